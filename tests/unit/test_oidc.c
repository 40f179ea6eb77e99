/* test_oidc.c — the OIDC configuration (file and flags), claim templates and the mapping of
 * verified claims to a principal, the JWT shape test. Token verification is jwt.h's and is
 * tested there and end to end (tests/integration/daemon_oidc.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/canon.h"
#include "trigguard/config.h"
#include "trigguard/guard.h"
#include "trigguard/oidc.h"

#define GH "https://token.actions.githubusercontent.com"

static tg_err_t parse(tg_oidc_conf_t **c, const char *text, tg_diag_t *d) {
    return tg_oidc_conf_parse(c, text, strlen(text), "oidc.json", false, d);
}

/* A configuration that must be refused, with diag containing `want`. */
static void refused(const char *text, const char *want) {
    tg_oidc_conf_t *c = (tg_oidc_conf_t *)1;
    tg_diag_t d = {{0}};
    tg_err_t rc = parse(&c, text, &d);
    if (rc != TG_ERR_CONFIG || strstr(d.msg, want) == NULL) {
        fail_msg("config %s: rc %s, diag \"%s\", wanted \"%s\"", text, tg_err_name(rc), d.msg,
                 want);
    }
    assert_null(c);
}

static const char *github =
    "{\"issuers\":[{\"name\":\"github\",\"issuer\":\"" GH "\","
    "\"jwks\":\"" GH "/.well-known/jwks\",\"audiences\":[\"trigguard\"],"
    "\"tenant_claim\":\"repository_owner\",\"tenants\":[\"acme\"],"
    "\"subject\":\"{sub}\",\"actors\":[\"{repository}:{workflow}\"],"
    "\"surfaces\":[\"deploy.release\"],\"role\":\"caller\",\"observe\":true,\"leeway_s\":30}]}";

static void test_conf_file_ok(void **state) {
    (void)state;
    tg_oidc_conf_t *c = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(parse(&c, github, &d), TG_OK);
    assert_int_equal(tg_oidc_conf_count(c), 1);
    assert_string_equal(tg_oidc_conf_name(c, 0), "github");
    assert_string_equal(tg_oidc_conf_issuer(c, 0), GH);
    assert_null(tg_oidc_conf_name(c, 1));
    tg_oidc_conf_free(c);
    /* the minimum: defaults for subject, role, leeway; a fixed tenant */
    assert_int_equal(
        parse(&c,
              "{\"issuers\":[{\"name\":\"x\",\"issuer\":\"https://i\",\"jwks\":"
              "\"http://127.0.0.1:9/jwks\",\"audiences\":[\"a\"],\"tenant\":\"acme\"}]}",
              &d),
        TG_OK);
    tg_oidc_conf_free(c);
    /* no issuer at all is a valid (empty) configuration */
    assert_int_equal(parse(&c, "{\"issuers\":[]}", &d), TG_OK);
    assert_int_equal(tg_oidc_conf_count(c), 0);
    tg_oidc_conf_free(c);
}

static void test_conf_file_refused(void **state) {
    (void)state;
    refused("[]", "expected a JSON object");
    refused("{\"issuers\":[],\"extra\":1}", "extra: unknown member");
    refused("{\"issuers\":[{\"name\":\"a\",\"bogus\":1}]}", "issuers[0].bogus: unknown member");
    refused("{\"issuers\":[{\"issuer\":\"https://i\"}]}", "issuers[0].name: required");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"tenant\":\"acme\"}]}",
            "at least one audience");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"]}]}",
            "exactly one of tenant_claim");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"tenant_claim\":\"o\"}]}",
            "exactly one of tenant_claim");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":"
            "\"http://example.com/jwks\",\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "loopback");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":"
            "\"http://user@127.0.0.1/jwks\",\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "loopback");
    /* credentials in an https URL: they would be logged with every fetch */
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":"
            "\"https://u:secret@idp.test/jwks\",\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "user info");
    /* user info that looks like a loopback host and port: curl would fetch from evil.test */
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":"
            "\"http://127.0.0.1:80@evil.test/jwks\",\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "loopback");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":"
            "\"http://[::1]@evil.test/jwks\",\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "loopback");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"ftp://h/jwks\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "scheme");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"leeway_s\":301}]}",
            "leeway_s: expected an integer 0..300");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\",\"x\"],\"tenant\":\"acme\"}]}",
            "listed twice");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"subject\":\"{sub\"}]}",
            "subject template is malformed");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"actors\":[\"{}\"]}]}",
            "actors[0] template is malformed");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"role\":\"root\"}]}",
            "role: expected");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\",\"observe\":\"yes\"}]}",
            "observe: expected true or false");
    refused("{\"issuers\":[{\"name\":\"a b\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "name must be");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"ac me\"}]}",
            "is not a tenant name");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"},"
            "{\"name\":\"a\",\"issuer\":\"https://j\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "given twice");
    refused("{\"issuers\":[{\"name\":\"a\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"},"
            "{\"name\":\"b\",\"issuer\":\"https://i\",\"jwks\":\"k.json\","
            "\"audiences\":[\"x\"],\"tenant\":\"acme\"}]}",
            "one configuration per iss");
    refused("{\"issuers\":[{\"name\":\"a\",\"name\":\"b\"}]}", "oidc.json");
    refused("{\"issuers\":", "oidc.json");
}

/* Flags: --oidc NAME=ISSUER and its companions. */
static tg_err_t flags(tg_oidc_conf_t **c, tg_diag_t *d, int argc, char **argv) {
    tg_config_t *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    tg_config_action_t act;
    tg_err_t rc = tg_config_parse(cfg, &act, argc, argv, d);
    if (rc == TG_OK) {
        rc = tg_oidc_conf_build(c, cfg, d);
    }
    free(cfg);
    return rc;
}

static void test_conf_flags(void **state) {
    (void)state;
    tg_oidc_conf_t *c = NULL;
    tg_diag_t d = {{0}};
    char *ok[] = {"serve",
                  "--oidc",
                  ("gh=" GH),
                  "--oidc-jwks=gh=http://127.0.0.1:1/jwks",
                  "--oidc-audience",
                  "gh=trigguard",
                  "--oidc-audience",
                  "gh=other",
                  "--oidc-tenant-claim",
                  "gh=repository_owner",
                  "--oidc-actor",
                  "gh={repository}:{workflow}"};
    assert_int_equal(flags(&c, &d, 12, ok), TG_OK);
    assert_int_equal(tg_oidc_conf_count(c), 1);
    assert_string_equal(tg_oidc_conf_issuer(c, 0), GH);
    tg_oidc_conf_free(c);

    char *orphan[] = {"serve", "--oidc-audience", "nope=x"};
    assert_int_equal(flags(&c, &d, 3, orphan), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "no --oidc nope=ISSUER"));
    char *noeq[] = {"serve", "--oidc", "gh"};
    assert_int_equal(flags(&c, &d, 3, noeq), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "NAME=ISSUER"));
    char *nojwks[] = {
        "serve", "--oidc", ("gh=" GH), "--oidc-audience", "gh=a", "--oidc-tenant-claim", "gh=o"};
    assert_int_equal(flags(&c, &d, 7, nojwks), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "JWKS"));
    char *twice[] = {"serve", "--oidc", ("gh=" GH), "--oidc", "gh=https://x"};
    assert_int_equal(flags(&c, &d, 5, twice), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "given twice"));
    char *jwks2[] = {"serve",     "--oidc",      ("gh=" GH), "--oidc-jwks",
                     "gh=a.json", "--oidc-jwks", "gh=b.json"};
    assert_int_equal(flags(&c, &d, 7, jwks2), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "given twice"));
}

/* The repeatable option kind itself: bounded in count. */
static void test_config_list_bounded(void **state) {
    (void)state;
    enum { N = TG_CONFIG_LIST_MAX + 1 };
    char *argv[1 + 2 * N];
    char vals[N][32];
    argv[0] = "serve";
    for (int i = 0; i < N; i++) {
        snprintf(vals[i], sizeof vals[i], "n%d=https://i%d", i, i);
        argv[1 + 2 * i] = "--oidc";
        argv[2 + 2 * i] = vals[i];
    }
    tg_config_t *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    tg_config_action_t act;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_config_parse(cfg, &act, 1 + 2 * (N - 1), argv, &d), TG_OK);
    assert_int_equal(cfg->oidc.n, TG_CONFIG_LIST_MAX);
    assert_string_equal(tg_config_list_get(&cfg->oidc, 1), "n1=https://i1");
    assert_null(tg_config_list_get(&cfg->oidc, TG_CONFIG_LIST_MAX));
    assert_int_equal(tg_config_parse(cfg, &act, 1 + 2 * N, argv, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "oidc: more than 32 values"));
    free(cfg);
}

/* ---- mapping -------------------------------------------------------------------------- */

static json_t *claims_of(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    assert_non_null(j);
    return j;
}

static const char *gh_claims =
    "{\"iss\":\"" GH "\",\"aud\":\"trigguard\",\"sub\":\"repo:acme/app:environment:production\","
    "\"repository\":\"acme/app\",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/main\","
    "\"environment\":\"production\",\"workflow\":\"deploy\",\"actor\":\"octocat\","
    "\"run_number\":42,\"ref_protected\":true,\"nested\":{\"a\":1},\"list\":[1],\"nil\":null,"
    "\"exp\":2000000000}";

static tg_tenants_t *tenants(void) {
    tg_tenants_t *t = NULL;
    assert_int_equal(tg_tenants_create(&t), TG_OK);
    uint8_t dg[32] = {1};
    assert_int_equal(tg_tenants_add(t, "beta", 4, dg, NULL), TG_OK);   /* a tokens tenant */
    assert_int_equal(tg_tenants_add_name(t, "other", 5, NULL), TG_OK); /* token-less */
    return t;
}

static void test_map_github(void **state) {
    (void)state;
    tg_oidc_conf_t *c = NULL;
    assert_int_equal(parse(&c, github, NULL), TG_OK);
    tg_tenants_t *t = tenants();
    assert_int_equal(tg_oidc_conf_add_tenants(c, t, NULL), TG_OK);
    int acme = tg_tenants_find(t, "acme", 4);
    assert_true(acme >= 0);
    assert_false(tg_tenants_has_tokens(t, acme));
    json_t *cl = claims_of(gh_claims);
    tg_oidc_principal_t *pp = NULL;
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_OK);
    const tg_principal_t *p = tg_oidc_principal(pp);
    assert_int_equal(p->tenant, acme);
    assert_string_equal(p->subject.ptr, "repo:acme/app:environment:production");
    assert_int_equal(p->actors_count, 1);
    assert_string_equal(p->actors[0].ptr, "acme/app:deploy");
    assert_true(tg_principal_actor_allowed(p, "acme/app:deploy", 15));
    assert_false(tg_principal_actor_allowed(p, "acme/app:other", 14));
    assert_int_equal(p->surfaces_count, 1);
    assert_string_equal(p->issuer.ptr, GH);
    assert_int_equal(p->role, TG_ROLE_CALLER);
    assert_true(p->observe); /* the issuer's "observe": true (SPEC §11.1) */
    /* scalar claims only, in order: 12 scalars of 15 members */
    assert_int_equal(p->claims_count, 12);
    bool saw_num = false, saw_bool = false;
    for (size_t i = 0; i < p->claims_count; i++) {
        const tg_claim_t *k = &p->claims[i];
        assert_true(strcmp(k->name.ptr, "nested") != 0 && strcmp(k->name.ptr, "list") != 0 &&
                    strcmp(k->name.ptr, "nil") != 0);
        if (strcmp(k->name.ptr, "run_number") == 0) {
            assert_int_equal(k->value.type, TG_VT_NUMBER);
            assert_true(k->value.num == 42.0);
            saw_num = true;
        }
        if (strcmp(k->name.ptr, "ref_protected") == 0) {
            assert_int_equal(k->value.type, TG_VT_BOOL);
            assert_int_equal(k->value.boolean, 1);
            saw_bool = true;
        }
        if (strcmp(k->name.ptr, "repository") == 0) {
            assert_int_equal(k->value.type, TG_VT_STRING);
            assert_int_equal(k->value.len, 8);
            assert_memory_equal(k->value.str, "acme/app", 8);
        }
    }
    assert_true(saw_num && saw_bool);
    /* the principal outlives the claims, the configuration and the table */
    json_decref(cl);
    tg_oidc_conf_free(c);
    tg_tenants_destroy(t);
    assert_string_equal(p->actors[0].ptr, "acme/app:deploy");
    tg_oidc_principal_free(pp);
}

static void test_map_refusals(void **state) {
    (void)state;
    tg_oidc_conf_t *c = NULL;
    assert_int_equal(parse(&c, github, NULL), TG_OK);
    tg_tenants_t *t = tenants();
    assert_int_equal(tg_oidc_conf_add_tenants(c, t, NULL), TG_OK);
    tg_oidc_principal_t *pp = (tg_oidc_principal_t *)1;
    struct {
        const char *claims;
        tg_err_t want;
    } cases[] = {
        /* a tenant the daemon does not know */
        {"{\"sub\":\"s\",\"repository_owner\":\"evil\",\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_TENANT_NOT_ALLOWED},
        /* a known name without tokens, not listed by this issuer: not reachable */
        {"{\"sub\":\"s\",\"repository_owner\":\"other\",\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_TENANT_NOT_ALLOWED},
        /* nor is a tenant of the tokens file: this issuer lists its tenants, and a shared
         * issuer must not reach a token tenant its list leaves out */
        {"{\"sub\":\"s\",\"repository_owner\":\"beta\",\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_TENANT_NOT_ALLOWED},
        /* the tenant claim absent or not a string */
        {"{\"sub\":\"s\",\"repository\":\"r\",\"workflow\":\"w\"}", TG_ERR_UNAUTHORIZED},
        {"{\"sub\":\"s\",\"repository_owner\":7,\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_UNAUTHORIZED},
        /* an actor template naming an absent claim, or an object */
        {"{\"sub\":\"s\",\"repository_owner\":\"acme\",\"repository\":\"r\"}", TG_ERR_UNAUTHORIZED},
        {"{\"sub\":\"s\",\"repository_owner\":\"acme\",\"repository\":\"r\",\"workflow\":{}}",
         TG_ERR_UNAUTHORIZED},
        /* no sub, or a sub outside the subject alphabet */
        {"{\"repository_owner\":\"acme\",\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_UNAUTHORIZED},
        {"{\"sub\":\"a b\",\"repository_owner\":\"acme\",\"repository\":\"r\",\"workflow\":\"w\"}",
         TG_ERR_UNAUTHORIZED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *cl = claims_of(cases[i].claims);
        tg_err_t rc = tg_oidc_map(&pp, c, 0, cl, t);
        if (rc != cases[i].want) {
            fail_msg("case %zu: %s, wanted %s", i, tg_err_name(rc), tg_err_name(cases[i].want));
        }
        if (rc == TG_OK) {
            tg_oidc_principal_free(pp);
        } else {
            assert_null(pp);
        }
        json_decref(cl);
    }
    json_t *empty = json_object();
    assert_int_equal(tg_oidc_map(&pp, c, 1, empty, t), TG_ERR_INVALID_ARG);
    json_decref(empty);
    tg_oidc_conf_free(c);
    tg_tenants_destroy(t);
}

/* An issuer without a "tenants" list (nor a fixed tenant) reaches the tenants of the tokens
 * file, and still no name that is merely in the table. */
static void test_map_unlisted_issuer(void **state) {
    (void)state;
    static const char *open_issuer =
        "{\"issuers\":[{\"name\":\"corp\",\"issuer\":\"https://corp.test\","
        "\"jwks\":\"https://corp.test/jwks\",\"audiences\":[\"trigguard\"],"
        "\"tenant_claim\":\"org\"}]}";
    tg_oidc_conf_t *c = NULL;
    assert_int_equal(parse(&c, open_issuer, NULL), TG_OK);
    tg_tenants_t *t = tenants();
    assert_int_equal(tg_oidc_conf_add_tenants(c, t, NULL), TG_OK);
    tg_oidc_principal_t *pp = NULL;
    json_t *cl = claims_of("{\"sub\":\"s\",\"org\":\"beta\"}");
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_OK);
    assert_int_equal(tg_oidc_principal(pp)->tenant, tg_tenants_find(t, "beta", 4));
    tg_oidc_principal_free(pp);
    json_decref(cl);
    cl = claims_of("{\"sub\":\"s\",\"org\":\"other\"}");
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_ERR_TENANT_NOT_ALLOWED);
    assert_null(pp);
    json_decref(cl);
    tg_oidc_conf_free(c);
    tg_tenants_destroy(t);
}

static void test_map_claim_bounds(void **state) {
    (void)state;
    tg_oidc_conf_t *c = NULL;
    assert_int_equal(parse(&c,
                           "{\"issuers\":[{\"name\":\"x\",\"issuer\":\"https://i\",\"jwks\":"
                           "\"k.json\",\"audiences\":[\"a\"],\"tenant\":\"beta\","
                           "\"subject\":\"{{{sub}}}-{n}-{b}\"}]}",
                           NULL),
                     TG_OK);
    tg_tenants_t *t = tenants();
    json_t *cl = json_object();
    json_object_set_new(cl, "sub", json_string("me"));
    json_object_set_new(cl, "n", json_real(1.5));
    json_object_set_new(cl, "b", json_false());
    /* 100 more claims, one of them too long to fit the byte budget */
    for (int i = 0; i < 100; i++) {
        char k[16];
        snprintf(k, sizeof k, "c%d", i);
        json_object_set_new(cl, k, json_string("v"));
    }
    char big[TG_OIDC_CLAIM_BYTES + 10];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    json_object_set_new(cl, "big", json_string(big));
    tg_oidc_principal_t *pp = NULL;
    /* braces and scalar renderings in the subject: "{me}-1.5-false" has no valid subject
     * characters for '{', so it is refused; the template itself was valid */
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_ERR_UNAUTHORIZED);
    tg_oidc_conf_free(c);
    assert_int_equal(parse(&c,
                           "{\"issuers\":[{\"name\":\"x\",\"issuer\":\"https://i\",\"jwks\":"
                           "\"k.json\",\"audiences\":[\"a\"],\"tenant\":\"beta\","
                           "\"subject\":\"{sub}-{n}-{b}\"}]}",
                           NULL),
                     TG_OK);
    /* more claims than a JWT can carry: refused whole, never copied in part (a claim left
     * out would disarm a deny rule on it) */
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_ERR_UNAUTHORIZED);
    assert_null(pp);
    json_decref(cl);
    /* as many as a JWT may carry, the longest fitting value among them: every one copied */
    cl = json_object();
    json_object_set_new(cl, "sub", json_string("me"));
    json_object_set_new(cl, "n", json_real(1.5));
    json_object_set_new(cl, "b", json_false());
    json_object_set_new(cl, "obj", json_object()); /* not a scalar: not a fact, not counted */
    for (int i = 0; i < TG_OIDC_CLAIMS_MAX - 4; i++) {
        char k[16];
        snprintf(k, sizeof k, "c%d", i);
        json_object_set_new(cl, k, json_string("v"));
    }
    char longv[4096];
    memset(longv, 'y', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    json_object_set_new(cl, "long", json_string(longv));
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_OK);
    const tg_principal_t *p = tg_oidc_principal(pp);
    assert_string_equal(p->subject.ptr, "me-1.5-false");
    assert_int_equal(p->claims_count, TG_OIDC_CLAIMS_MAX);
    size_t bytes = 0;
    for (size_t i = 0; i < p->claims_count; i++) {
        assert_string_not_equal(p->claims[i].name.ptr, "obj");
        bytes += p->claims[i].name.len + 1;
    }
    assert_true(bytes <= TG_OIDC_CLAIM_BYTES);
    assert_string_equal(p->claims[p->claims_count - 1].name.ptr, "long");
    assert_int_equal(p->claims[p->claims_count - 1].value.len, sizeof longv - 1);
    tg_oidc_principal_free(pp);
    pp = NULL;
    /* a NUL inside a string claim: refused, not skipped */
    json_object_set_new(cl, "long", json_stringn("a\0b", 3));
    assert_int_equal(tg_oidc_map(&pp, c, 0, cl, t), TG_ERR_UNAUTHORIZED);
    tg_oidc_principal_free(pp);
    json_decref(cl);
    tg_oidc_conf_free(c);
    tg_tenants_destroy(t);
}

static void test_jwt_shape(void **state) {
    (void)state;
#define J(s) tg_oidc_is_jwt_header(s, strlen(s))
    assert_true(J("Bearer eyJh.eyJi.c2ln"));
    assert_true(J("bearer eyJh.eyJi.c2l-_n"));
    assert_true(J("Bearer eyJh.eyJi.")); /* alg none: still the OIDC way, and refused there */
    assert_false(J("Bearer s3cr3t-token"));
    assert_false(J("Bearer a.b"));
    assert_false(J("Bearer a..c"));
    assert_false(J("Bearer a.b.c.d"));
    assert_false(J("Bearer a.b+.c"));
    assert_false(J("Basic a.b.c"));
    assert_false(tg_oidc_is_jwt_header(NULL, 0));
#undef J
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf_file_ok),        cmocka_unit_test(test_conf_file_refused),
        cmocka_unit_test(test_conf_flags),          cmocka_unit_test(test_config_list_bounded),
        cmocka_unit_test(test_map_github),          cmocka_unit_test(test_map_refusals),
        cmocka_unit_test(test_map_unlisted_issuer), cmocka_unit_test(test_map_claim_bounds),
        cmocka_unit_test(test_jwt_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
