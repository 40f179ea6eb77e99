/* test_guard.c — tenants file/env loading, bearer auth, GCRA rate limits, bulkheads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/canon.h"
#include "trigguard/guard.h"

#include "support/fail_alloc.h"

/* ------------------------------------------------------------------ helpers */

#define S(x) (x), strlen(x)

static tg_tenants_t *mk_tenants(void) {
    tg_tenants_t *t = NULL;
    assert_int_equal(tg_tenants_create(&t), TG_OK);
    return t;
}

static void digest_hex(char out[65], const char *token) {
    uint8_t d[32];
    tg_sha256(d, token, strlen(token));
    tg_hex(out, d, 32);
}

/* Authorization header "Bearer <token>" into buf. */
static const char *bearer(char *buf, size_t n, const char *token) {
    snprintf(buf, n, "Bearer %s", token);
    return buf;
}

static tg_err_t auth(const tg_tenants_t *t, const char *header, int *idx) {
    return tg_auth_check(t, header, header != NULL ? strlen(header) : 0, idx);
}

static int auth_token(const tg_tenants_t *t, const char *token) {
    char buf[700];
    int idx = -2;
    tg_err_t rc = auth(t, bearer(buf, sizeof buf, token), &idx);
    if (rc != TG_OK) {
        assert_int_equal(rc, TG_ERR_UNAUTHORIZED);
        assert_int_equal(idx, -1);
    }
    return idx;
}

static char *write_temp(const char *content, size_t len) {
    char *path = strdup("/tmp/tg_guard_test_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

/* ------------------------------------------------------------------ tokens file */

static void test_tokens_json_ok(void **state) {
    (void)state;
    tg_tenants_t *t = mk_tenants();
    char ha[65];
    char hb[65];
    char json[512];
    digest_hex(ha, "token-a");
    digest_hex(hb, "token-b");
    for (char *p = hb; *p; p++) { /* upper-case hex is accepted too */
        if (*p >= 'a' && *p <= 'f') {
            *p = (char)(*p - 'a' + 'A');
        }
    }
    snprintf(json, sizeof json,
             " [ {\"tenant\": \"acme\", \"token_sha256\": \"%s\"},\n"
             "   {\"token_sha256\": \"%s\", \"tenant\": \"Beta_2.x-y\"} ] ",
             ha, hb);
    char *path = write_temp(json, strlen(json));
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_OK);
    unlink(path);
    free(path);

    assert_int_equal(tg_tenants_count(t), 2);
    size_t len = 0;
    assert_string_equal(tg_tenants_name(t, 0, &len), "acme");
    assert_int_equal(len, 4);
    assert_string_equal(tg_tenants_name(t, 1, NULL), "Beta_2.x-y");
    assert_null(tg_tenants_name(t, 2, &len));
    assert_int_equal(len, 0);
    assert_null(tg_tenants_name(t, -1, NULL));
    assert_int_equal(tg_tenants_find(t, S("Beta_2.x-y")), 1);
    assert_int_equal(tg_tenants_find(t, S("beta_2.x-y")), -1);
    assert_int_equal(tg_tenants_find(t, "acme", 3), -1);
    assert_int_equal(tg_tenants_find(NULL, S("acme")), -1);

    assert_int_equal(auth_token(t, "token-a"), 0);
    assert_int_equal(auth_token(t, "token-b"), 1);
    assert_int_equal(auth_token(t, "token-c"), -1);
    /* the file holds digests: presenting the digest itself is not the token */
    assert_int_equal(auth_token(t, ha), -1);

    /* an empty list is valid (nobody authenticates) */
    assert_int_equal(tg_tenants_load_json(t, S("[]"), "empty.json", &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), 2);
    tg_tenants_destroy(t);
    tg_tenants_destroy(NULL);
}

static void test_tokens_json_errors(void **state) {
    (void)state;
    char ha[65];
    char hb[65];
    digest_hex(ha, "token-a");
    digest_hex(hb, "token-b");
    char bad_hex[65];
    memcpy(bad_hex, ha, 65);
    bad_hex[10] = 'g';
    char name65[66];
    memset(name65, 'n', 65);
    name65[65] = '\0';

    char buf[8][600];
    snprintf(buf[0], sizeof buf[0], "[{\"tenant\":\"acme\"}]");
    snprintf(buf[1], sizeof buf[1], "[{\"token_sha256\":\"%s\"}]", ha);
    snprintf(buf[2], sizeof buf[2], "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"}]", bad_hex);
    snprintf(buf[3], sizeof buf[3], "[{\"tenant\":\"acme\",\"token_sha256\":\"%.63s\"}]", ha);
    snprintf(buf[4], sizeof buf[4],
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"subject\":\"s\"},"
             "{\"tenant\":\"beta\",\"token_sha256\":\"%s\",\"subject\":\"s\"}]",
             ha, hb);
    snprintf(buf[5], sizeof buf[5],
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"},"
             "{\"tenant\":\"beta\",\"token_sha256\":\"%s\"}]",
             ha, ha);
    snprintf(buf[6], sizeof buf[6], "[{\"tenant\":\"%s\",\"token_sha256\":\"%s\"}]", name65, ha);
    snprintf(buf[7], sizeof buf[7],
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"comment\":\"x\"}]", ha);

    struct {
        const char *json;
        const char *needle;
    } cases[] = {
        {"{\"tenant\":\"acme\"}", "expected a JSON array"},
        {"\"acme\"", "expected a JSON array"},
        {"", "tokens.json"},
        {"[", "tokens.json"},
        {"[{\"tenant\":\"a\",\"tenant\":\"b\"}]", "tokens.json"},
        {"[1]", "[0]: expected an object"},
        {"[[]]", "[0]: expected an object"},
        {buf[0], "[0]: missing member \"token_sha256\""},
        {buf[1], "[0]: missing member \"tenant\""},
        {buf[2], "[0].token_sha256: expected 64 hex digits"},
        {buf[3], "[0].token_sha256: expected 64 hex digits"},
        {buf[4], "duplicate subject \"s\""},
        {buf[5], "same token"},
        {buf[6], "[0].tenant"},
        {buf[7], "[0]: unknown member \"comment\""},
        {"[{\"tenant\":\"\",\"token_sha256\":\"00\"}]", "[0].tenant"},
        {"[{\"tenant\":\"a b\",\"token_sha256\":\"00\"}]", "[0].tenant"},
        {"[{\"tenant\":\"a:b\",\"token_sha256\":\"00\"}]", "[0].tenant"},
        {"[{\"tenant\":7,\"token_sha256\":\"00\"}]", "[0].tenant"},
        {"[{\"tenant\":\"acme\",\"token_sha256\":{}}]", "[0].token_sha256"},
        {"[{\"tenant\":\"acme\",\"token_sha256\":null}]", "[0].token_sha256"},
    };
    tg_tenants_t *t = mk_tenants();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_diag_t d = {{0}};
        tg_err_t rc = tg_tenants_load_json(t, S(cases[i].json), "tokens.json", &d);
        if (rc != TG_ERR_CONFIG || strstr(d.msg, cases[i].needle) == NULL ||
            strncmp(d.msg, "tokens.json: ", 13) != 0) {
            fail_msg("case %zu (%s): rc %s, diag \"%s\"", i, cases[i].json, tg_err_name(rc), d.msg);
        }
        assert_int_equal(tg_tenants_count(t), 0); /* nothing half-loaded */
    }

    /* duplicates against what is already loaded, by digest and by subject */
    char ok[300];
    snprintf(ok, sizeof ok, "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"}]", ha);
    assert_int_equal(tg_tenants_load_json(t, S(ok), NULL, NULL), TG_OK);
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tenants_load_json(t, S(ok), NULL, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "same token"));
    snprintf(ok, sizeof ok,
             "[{\"tenant\":\"x\",\"token_sha256\":\"%s\",\"subject\":\"acme:%.8s\"}]", hb, ha);
    assert_int_equal(tg_tenants_load_json(t, S(ok), NULL, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "duplicate subject"));
    snprintf(ok, sizeof ok, "[{\"tenant\":\"other\",\"token_sha256\":\"%s\"}]", ha);
    assert_int_equal(tg_tenants_load_json(t, S(ok), NULL, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "same token"));
    assert_int_equal(tg_tenants_count(t), 1);

    assert_int_equal(tg_tenants_load_json(NULL, S("[]"), NULL, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_load_json(t, NULL, 3, NULL, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_load_json(t, NULL, 0, NULL, &d), TG_ERR_CONFIG);
    tg_tenants_destroy(t);
}

/* Builds a tokens file of n entries tenant-<i> / token-<i>. */
static char *many_json(size_t n, size_t *len_out) {
    size_t cap = n * 128 + 16;
    char *j = malloc(cap);
    assert_non_null(j);
    size_t len = 0;
    j[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        char tok[32];
        char hx[65];
        snprintf(tok, sizeof tok, "token-%zu", i);
        digest_hex(hx, tok);
        len += (size_t)snprintf(j + len, cap - len,
                                "%s{\"tenant\":\"tenant-%zu\",\"token_sha256\":\"%s\"}",
                                i ? "," : "", i, hx);
    }
    j[len++] = ']';
    j[len] = '\0';
    *len_out = len;
    return j;
}

static void test_tokens_limits(void **state) {
    (void)state;
    tg_diag_t d = {{0}};
    size_t len = 0;
    /* at max: 1024 tenants; the constant-time loop finds first, middle and last */
    char *j = many_json(TG_GUARD_MAX_TENANTS, &len);
    tg_tenants_t *t = mk_tenants();
    assert_int_equal(tg_tenants_load_json(t, j, len, "many.json", &d), TG_OK);
    free(j);
    assert_int_equal(tg_tenants_count(t), TG_GUARD_MAX_TENANTS);
    assert_int_equal(auth_token(t, "token-0"), 0);
    assert_int_equal(auth_token(t, "token-511"), 511);
    assert_int_equal(auth_token(t, "token-1023"), 1023);
    assert_int_equal(auth_token(t, "token-1024"), -1);
    /* table full: nothing more fits */
    uint8_t dg[32] = {1};
    assert_int_equal(tg_tenants_add(t, S("one-more"), dg, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "too many tokens"));
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_ERR_CONFIG);
    tg_tenants_destroy(t);

    /* max + 1 in one file */
    j = many_json(TG_GUARD_MAX_TENANTS + 1, &len);
    t = mk_tenants();
    assert_int_equal(tg_tenants_load_json(t, j, len, "many.json", &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "at most 1024"));
    free(j);
    /* max + 1 across two loads */
    j = many_json(TG_GUARD_MAX_TENANTS, &len);
    assert_int_equal(tg_tenants_add(t, S("first"), dg, &d), TG_OK);
    assert_int_equal(tg_tenants_load_json(t, j, len, "many.json", &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "too many tokens"));
    assert_int_equal(tg_tenants_count(t), 1);
    free(j);
    tg_tenants_destroy(t);

    /* file errors */
    t = mk_tenants();
    assert_int_equal(tg_tenants_load_file(t, "/nonexistent/tokens.json", &d), TG_ERR_NOT_FOUND);
    assert_non_null(strstr(d.msg, "/nonexistent/tokens.json"));
    assert_int_equal(tg_tenants_load_file(t, "/tmp", &d), TG_ERR_IO); /* a directory */
    assert_int_equal(tg_tenants_load_file(t, NULL, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_load_file(NULL, "/tmp", &d), TG_ERR_INVALID_ARG);
    size_t big = TG_GUARD_TOKENS_FILE_MAX + 1;
    char *blob = malloc(big);
    assert_non_null(blob);
    memset(blob, ' ', big);
    blob[0] = '[';
    blob[big - 1] = ']';
    char *path = write_temp(blob, big);
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "larger than"));
    assert_int_equal(tg_tenants_load_json(t, blob, big, "mem", &d), TG_ERR_CONFIG);
    unlink(path);
    free(path);
    /* exactly at the size limit is fine: "[" + spaces + "]" of TG_GUARD_TOKENS_FILE_MAX bytes */
    blob[1] = '[';
    path = write_temp(blob + 1, big - 1);
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_OK);
    unlink(path);
    free(path);
    free(blob);
    path = write_temp("[1,", 3);
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, path));
    unlink(path);
    free(path);
    tg_tenants_destroy(t);
}

/* ------------------------------------------------------------------ principals */

static const tg_principal_t *auth_p(const tg_tenants_t *t, const char *token) {
    char buf[700];
    static const tg_principal_t poison;
    const tg_principal_t *p = &poison; /* must be overwritten */
    bearer(buf, sizeof buf, token);
    tg_err_t rc = tg_auth_principal(t, buf, strlen(buf), &p);
    if (rc != TG_OK) {
        assert_int_equal(rc, TG_ERR_UNAUTHORIZED);
        assert_null(p);
    }
    return p;
}

static void test_principals_ok(void **state) {
    (void)state;
    char ha[65], hb[65], hc[65], hd[65];
    digest_hex(ha, "tok-old");
    digest_hex(hb, "tok-ci");
    digest_hex(hc, "tok-rev");
    digest_hex(hd, "tok-exec");
    char sub128[TG_GUARD_SUBJECT_MAX + 1];
    memset(sub128, 's', TG_GUARD_SUBJECT_MAX);
    sub128[TG_GUARD_SUBJECT_MAX] = '\0';
    char j[2048];
    snprintf(
        j, sizeof j,
        "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"},"
        "{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"subject\":\"ci/deploy@acme:1+x_y.z-w\","
        "\"actors\":[\"ci.release-bot\",\"ci.other\"],\"surfaces\":[\"deploy.release\"],"
        "\"role\":\"admin\",\"observe\":false},"
        "{\"tenant\":\"beta\",\"token_sha256\":\"%s\",\"subject\":\"%s\",\"role\":\"approver\","
        "\"observe\":true,\"groups\":[\"release-managers\",\"sre\"]},"
        "{\"token_sha256\":\"%s\",\"role\":\"executor\",\"tenant\":\"acme\","
        "\"actors\":[\"b\\u00e9t\"]}]",
        ha, hb, hc, sub128, hd);
    tg_diag_t d = {{0}};
    tg_tenants_t *t = mk_tenants();
    assert_int_equal(tg_tenants_load_json(t, S(j), "tokens.json", &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), 2); /* acme, beta */
    assert_int_equal(tg_tenants_token_count(t), 4);

    const tg_principal_t *p = auth_p(t, "tok-old");
    assert_non_null(p);
    assert_ptr_equal(p, tg_tenants_principal(t, 0));
    assert_int_equal(p->tenant, 0);
    assert_int_equal(p->role, TG_ROLE_CALLER);
    assert_false(p->observe);
    assert_true(p->subject_derived);
    char want[80];
    snprintf(want, sizeof want, "acme:%.8s", ha);
    assert_string_equal(p->subject.ptr, want);
    assert_int_equal(p->subject.len, strlen(want));
    assert_null(p->actors);
    assert_int_equal(p->surfaces_count, 0);
    assert_true(tg_principal_actor_allowed(p, S("anyone")));
    assert_true(tg_principal_actor_allowed(p, NULL, 0));
    assert_true(tg_principal_surface_allowed(p, S("anything")));

    p = auth_p(t, "tok-ci");
    assert_ptr_equal(p, tg_tenants_principal(t, 1));
    assert_int_equal(p->tenant, 0);
    assert_int_equal(p->role, TG_ROLE_ADMIN);
    assert_false(p->subject_derived);
    assert_string_equal(p->subject.ptr, "ci/deploy@acme:1+x_y.z-w");
    assert_int_equal(p->actors_count, 2);
    assert_string_equal(p->actors[0].ptr, "ci.release-bot");
    assert_string_equal(p->actors[1].ptr, "ci.other");
    assert_int_equal(p->surfaces_count, 1);
    assert_string_equal(p->surfaces[0].ptr, "deploy.release");
    assert_true(tg_principal_actor_allowed(p, S("ci.other")));
    assert_false(tg_principal_actor_allowed(p, S("ci.othe")));
    assert_false(tg_principal_actor_allowed(p, S("ci.other2")));
    assert_false(tg_principal_actor_allowed(p, NULL, 0));
    assert_true(tg_principal_surface_allowed(p, S("deploy.release")));
    assert_false(tg_principal_surface_allowed(p, S("payments.charge")));
    assert_false(tg_principal_surface_allowed(p, NULL, 0));

    assert_false(p->observe); /* "observe": false */

    p = auth_p(t, "tok-rev");
    assert_int_equal(p->tenant, 1);
    assert_int_equal(p->role, TG_ROLE_APPROVER);
    assert_true(p->observe); /* SPEC §11.1: the token may ask for observe mode */
    assert_string_equal(p->subject.ptr, sub128);
    /* SPEC §11.2: an approver's groups, which "@group" approvers entries name */
    assert_int_equal(p->groups_count, 2);
    assert_string_equal(p->groups[0].ptr, "release-managers");
    assert_string_equal(p->groups[1].ptr, "sre");
    assert_null(p->actors);
    assert_null(p->surfaces);
    p = auth_p(t, "tok-exec");
    assert_null(p->groups); /* no "groups": none */
    assert_int_equal(p->groups_count, 0);
    assert_int_equal(p->role, TG_ROLE_EXECUTOR);
    assert_int_equal(p->actors_count, 1);
    assert_string_equal(p->actors[0].ptr, "b\xc3\xa9t"); /* UTF-8, as policy names may be */
    assert_null(auth_p(t, "tok-nobody"));

    /* tg_auth_check still answers with the tenant index */
    int idx = -2;
    char hdr[64];
    assert_int_equal(auth(t, bearer(hdr, sizeof hdr, "tok-rev"), &idx), TG_OK);
    assert_int_equal(idx, 1);

    /* digest prefixes for tools, never more than the digest */
    char px[65];
    assert_true(tg_tenants_digest_hex(t, 1, px, 6));
    assert_int_equal(strlen(px), 12);
    assert_int_equal(strncmp(px, hb, 12), 0);
    assert_true(tg_tenants_digest_hex(t, 1, px, 32));
    assert_string_equal(px, hb);
    assert_false(tg_tenants_digest_hex(t, 4, px, 4));
    assert_false(tg_tenants_digest_hex(t, 0, px, 33));
    assert_null(tg_tenants_principal(t, 4));
    assert_null(tg_tenants_principal(NULL, 0));
    assert_int_equal(tg_tenants_token_count(NULL), 0);
    tg_tenants_destroy(t);

    /* roles */
    tg_role_t r = TG_ROLE_ADMIN;
    assert_true(tg_role_parse(&r, S("caller")));
    assert_int_equal(r, TG_ROLE_CALLER);
    assert_true(tg_role_parse(&r, S("executor")));
    assert_int_equal(r, TG_ROLE_EXECUTOR);
    assert_false(tg_role_parse(&r, S("Caller")));
    assert_false(tg_role_parse(&r, "calle", 5));
    assert_false(tg_role_parse(&r, S("callers")));
    assert_false(tg_role_parse(&r, NULL, 0));
    assert_int_equal(r, TG_ROLE_EXECUTOR);
    assert_string_equal(tg_role_name(TG_ROLE_APPROVER), "approver");
    assert_string_equal(tg_role_name((tg_role_t)9), "?");
    assert_true(tg_role_may_decide(TG_ROLE_CALLER));
    assert_true(tg_role_may_decide(TG_ROLE_ADMIN));
    assert_false(tg_role_may_decide(TG_ROLE_APPROVER));
    assert_false(tg_role_may_decide(TG_ROLE_EXECUTOR));
    assert_true(tg_role_may_read_receipts(TG_ROLE_CALLER));
    assert_true(tg_role_may_read_receipts(TG_ROLE_EXECUTOR));
    assert_true(tg_role_may_read_receipts(TG_ROLE_ADMIN));
    assert_false(tg_role_may_read_receipts(TG_ROLE_APPROVER));
    const tg_principal_t *none = NULL;
    assert_int_equal(tg_auth_principal(NULL, S("Bearer tok-old"), &none), TG_ERR_INVALID_ARG);
    t = mk_tenants();
    assert_int_equal(tg_auth_principal(t, S("Bearer tok-old"), NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_auth_principal(t, S("Bearer tok-old"), &none), TG_ERR_UNAUTHORIZED);
    assert_null(none);
    /* the local bypass principal: subject "local", a caller bound to nothing */
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_OK);
    assert_int_equal(tg_auth_principal(t, NULL, 0, &none), TG_OK);
    assert_string_equal(none->subject.ptr, "local");
    assert_int_equal(none->role, TG_ROLE_CALLER);
    assert_int_equal(none->actors_count + none->surfaces_count, 0);
    assert_string_equal(tg_tenants_name(t, none->tenant, NULL), TG_GUARD_LOCAL_TENANT);
    tg_tenants_destroy(t);
    assert_false(tg_principal_actor_allowed(NULL, S("x")));
    assert_false(tg_principal_surface_allowed(NULL, S("x")));
}

/* A list of n names "<prefix><i>" as a JSON array into out. */
static void json_list(char *out, size_t cap, const char *prefix, size_t n) {
    size_t len = 0;
    out[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(out + len, cap - len, "%s\"%s%zu\"", i ? "," : "", prefix, i);
    }
    snprintf(out + len, cap - len, "]");
}

static void test_principals_errors(void **state) {
    (void)state;
    char ha[65];
    char hb[65];
    digest_hex(ha, "token-a");
    digest_hex(hb, "token-b");
    /* the same first 8 hex digits as ha: the derived subjects collide */
    char hc[65];
    memcpy(hc, ha, 65);
    hc[63] = hc[63] == '0' ? '1' : '0';
    char l64[2048], l65[2048], n129[200], s129[200];
    json_list(l64, sizeof l64, "n", TG_GUARD_MAX_BINDINGS);
    json_list(l65, sizeof l65, "n", TG_GUARD_MAX_BINDINGS + 1);
    memset(n129, 'a', 129);
    n129[129] = '\0';
    memset(s129, 's', 129);
    s129[129] = '\0';

    struct {
        const char *extra; /* members after tenant and token_sha256 of one entry */
        const char *needle;
    } cases[] = {
        {"\"subject\":\"\"", "[0].subject: expected 1..128"},
        {"\"subject\":\"a b\"", "[0].subject"},
        {"\"subject\":\"a\\\"b\"", "[0].subject"},
        {"\"subject\":\"caf\\u00e9\"", "[0].subject"},
        {"\"subject\":\"a\\u0000b\"", "tokens.json"}, /* the parser refuses \u0000 */
        {"\"subject\":7", "[0].subject"},
        {"\"subject\":null", "[0].subject"},
        {"\"role\":\"root\"", "[0].role: expected \"caller\""},
        {"\"role\":\"Caller\"", "[0].role"},
        {"\"role\":\"\"", "[0].role"},
        {"\"role\":[\"caller\"]", "[0].role"},
        {"\"observe\":\"false\"", "[0].observe: expected true or false"},
        {"\"observe\":0", "[0].observe: expected true or false"},
        {"\"observe\":null", "[0].observe: expected true or false"},
        {"\"actors\":\"ci.bot\"", "[0].actors: expected an array of 1..64 strings"},
        {"\"actors\":[]", "[0].actors: expected an array"},
        {"\"actors\":{}", "[0].actors: expected an array"},
        {"\"actors\":[7]", "[0].actors[0]: expected 1..128 bytes"},
        {"\"actors\":[\"ok\",\"\"]", "[0].actors[1]: expected 1..128 bytes"},
        {"\"actors\":[\"a\\tb\"]", "[0].actors[0]"},
        {"\"actors\":[\"a\\u007fb\"]", "[0].actors[0]"},
        {"\"actors\":[\"@group\"]", "[0].actors[0]: \"@\" names a policy actor group"},
        {"\"actors\":[\"x\",\"y\",\"x\"]", "[0].actors: \"x\" is listed twice"},
        {"\"actors\":[[\"x\"]]", "[0].actors[0]"},
        {"\"surfaces\":[]", "[0].surfaces: expected an array"},
        {"\"surfaces\":\"deploy\"", "[0].surfaces: expected an array"},
        {"\"surfaces\":[\"a\",\"a\"]", "[0].surfaces: \"a\" is listed twice"},
        {"\"surfaces\":[null]", "[0].surfaces[0]"},
        {"\"surfaces\":[\"a\\nb\"]", "[0].surfaces[0]"},
        {"\"groups\":[]", "[0].groups: expected an array"},
        {"\"groups\":\"sre\"", "[0].groups: expected an array"},
        {"\"groups\":[\"sre\",\"sre\"]", "[0].groups: \"sre\" is listed twice"},
        {"\"groups\":[\"@sre\"]", "[0].groups[0]: expected 1..128 chars"},
        {"\"groups\":[\"s re\"]", "[0].groups[0]: expected 1..128 chars"},
        {"\"groups\":[7]", "[0].groups[0]"},
        {"\"comment\":\"x\"", "[0]: unknown member \"comment\""},
        {"\"Subject\":\"x\"", "[0]: unknown member \"Subject\""},
        {"\"subject\":\"x\",\"subject\":\"y\"", "tokens.json"}, /* duplicate member */
    };
    tg_tenants_t *t = mk_tenants();
    char j[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(j, sizeof j, "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\",%s}]", ha,
                 cases[i].extra);
        tg_diag_t d = {{0}};
        tg_err_t rc = tg_tenants_load_json(t, S(j), "tokens.json", &d);
        if (rc != TG_ERR_CONFIG || strstr(d.msg, cases[i].needle) == NULL ||
            strncmp(d.msg, "tokens.json: ", 13) != 0) {
            fail_msg("case %zu (%s): rc %s, diag \"%s\"", i, cases[i].extra, tg_err_name(rc),
                     d.msg);
        }
        assert_int_equal(tg_tenants_count(t), 0);
        assert_int_equal(tg_tenants_token_count(t), 0);
    }

    /* bounds: at the max loads, one past is refused */
    struct {
        const char *member;
        const char *value;
        bool ok;
    } bounds[] = {
        {"actors", l64, true},      {"actors", l65, false},      {"surfaces", l64, true},
        {"surfaces", l65, false},   {"subject", s129 + 1, true}, {"subject", s129, false},
        {"actors", n129 + 1, true}, {"actors", n129, false},     {"surfaces", n129 + 1, true},
        {"surfaces", n129, false},
    };
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        const char *v = bounds[i].value;
        bool scalar = v[0] != '[';
        bool is_list = strcmp(bounds[i].member, "subject") != 0;
        snprintf(j, sizeof j, "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"%s\":%s%s%s%s%s}]",
                 ha, bounds[i].member, scalar && is_list ? "[" : "", scalar ? "\"" : "", v,
                 scalar ? "\"" : "", scalar && is_list ? "]" : "");
        tg_tenants_t *b = mk_tenants();
        tg_diag_t d = {{0}};
        tg_err_t rc = tg_tenants_load_json(b, S(j), "tokens.json", &d);
        if ((rc == TG_OK) != bounds[i].ok) {
            fail_msg("bound %zu (%s, %zu bytes): rc %s, diag \"%s\"", i, bounds[i].member,
                     strlen(v), tg_err_name(rc), d.msg);
        }
        tg_tenants_destroy(b);
    }

    /* derived subjects that collide are refused with a hint to name them */
    snprintf(j, sizeof j,
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"},"
             "{\"tenant\":\"acme\",\"token_sha256\":\"%s\"}]",
             ha, hc);
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tenants_load_json(t, S(j), "tokens.json", &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "duplicate subject"));
    assert_non_null(strstr(d.msg, "set \"subject\""));
    /* ... and load once one is named */
    snprintf(j, sizeof j,
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"},"
             "{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"subject\":\"second\"}]",
             ha, hc);
    assert_int_equal(tg_tenants_load_json(t, S(j), "tokens.json", &d), TG_OK);
    assert_int_equal(tg_tenants_token_count(t), 2);
    /* an explicit subject equal to a loaded one, from another source */
    assert_int_equal(
        tg_tenants_load_json(t,
                             S("[{\"tenant\":\"beta\",\"token_sha256\":\""
                               "0000000000000000000000000000000000000000000000000000000000000000\","
                               "\"subject\":\"second\"}]"),
                             "more.json", &d),
        TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "more.json: duplicate subject \"second\""));
    assert_null(strstr(d.msg, "set \"subject\""));
    assert_int_equal(tg_tenants_token_count(t), 2);
    assert_int_equal(tg_tenants_count(t), 1);
    (void)hb;
    tg_tenants_destroy(t);
}

/* 1024 tokens of 2 tenants fill the token table; tenants are counted apart from tokens. */
static void test_principals_limits(void **state) {
    (void)state;
    size_t cap = (size_t)TG_GUARD_MAX_TOKENS * 128 + 16;
    char *j = malloc(cap);
    assert_non_null(j);
    size_t len = 0;
    j[len++] = '[';
    for (size_t i = 0; i < TG_GUARD_MAX_TOKENS; i++) {
        char tok[32];
        char hx[65];
        snprintf(tok, sizeof tok, "token-%zu", i);
        digest_hex(hx, tok);
        len +=
            (size_t)snprintf(j + len, cap - len, "%s{\"tenant\":\"t%zu\",\"token_sha256\":\"%s\"}",
                             i ? "," : "", i % 2, hx);
    }
    j[len++] = ']';
    j[len] = '\0';
    tg_tenants_t *t = mk_tenants();
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tenants_load_json(t, j, len, "many.json", &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), 2);
    assert_int_equal(tg_tenants_token_count(t), TG_GUARD_MAX_TOKENS);
    assert_int_equal(auth_token(t, "token-1023"), 1);
    assert_int_equal(auth_token(t, "token-1022"), 0);
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_ERR_CONFIG);
    free(j);
    tg_tenants_destroy(t);
}

/* ------------------------------------------------------------------ TRIGGUARD_API_KEYS */

static void test_env_keys(void **state) {
    (void)state;
    char hb[65];
    char env[300];
    tg_diag_t d = {{0}};
    digest_hex(hb, "beta-token");
    snprintf(env, sizeof env, " acme:s3cr3t-token ,\tbeta:sha256:%s,gamma:a:b:c", hb);
    tg_tenants_t *t = mk_tenants();
    assert_int_equal(tg_tenants_load_env(t, S(env), &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), 3);
    assert_int_equal(tg_tenants_find(t, S("acme")), 0);
    assert_int_equal(auth_token(t, "s3cr3t-token"), 0);
    assert_int_equal(auth_token(t, "beta-token"), 1);
    assert_int_equal(auth_token(t, "a:b:c"), 2); /* raw tokens may contain ':' */
    assert_int_equal(auth_token(t, hb), -1);
    tg_tenants_destroy(t);

    /* one tenant, two tokens: two principals of the same tenant index, derived subjects */
    t = mk_tenants();
    assert_int_equal(tg_tenants_load_env(t, S("acme:tok-one,acme:tok-two"), &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), 1);
    assert_int_equal(tg_tenants_token_count(t), 2);
    assert_int_equal(auth_token(t, "tok-one"), 0);
    assert_int_equal(auth_token(t, "tok-two"), 0);
    char h1[65];
    char want[80];
    digest_hex(h1, "tok-two");
    snprintf(want, sizeof want, "acme:%.8s", h1);
    assert_string_equal(tg_tenants_principal(t, 1)->subject.ptr, want);
    assert_true(tg_tenants_principal(t, 1)->subject_derived);
    assert_int_equal(tg_tenants_principal(t, 1)->role, TG_ROLE_CALLER);
    assert_int_equal(tg_tenants_principal(t, 1)->actors_count, 0);
    tg_tenants_destroy(t);

    char tok512[TG_GUARD_TOKEN_MAX + 16];
    memset(tok512, 'x', sizeof tok512);
    char at_max[600];
    snprintf(at_max, sizeof at_max, "big:%.*s", TG_GUARD_TOKEN_MAX, tok512);
    char over[600];
    snprintf(over, sizeof over, "big:%.*s", TG_GUARD_TOKEN_MAX + 1, tok512);
    t = mk_tenants();
    assert_int_equal(tg_tenants_load_env(t, S(at_max), &d), TG_OK);
    char hdr[600];
    snprintf(hdr, sizeof hdr, "%.*s", TG_GUARD_TOKEN_MAX, tok512);
    assert_int_equal(auth_token(t, hdr), 0);
    tg_tenants_destroy(t);

    struct {
        const char *v;
        const char *needle;
    } bad[] = {
        {"", "entry 1 is empty"},
        {"   ", "entry 1 is empty"},
        {",acme:SECRET", "entry 1 is empty"},
        {"acme:SECRET,", "entry 2 is empty"},
        {"acme:SECRET,,beta:SECRET2", "entry 2 is empty"},
        {"acmeSECRET", "entry 1: expected tenant:token"},
        {":SECRET", "entry 1: tenant name"},
        {"ac me:SECRET", "entry 1: tenant name"},
        {"acme:", "entry 1 (tenant \"acme\"): token"},
        {"acme:SEC RET", "entry 1 (tenant \"acme\"): token"},
        {"acme:SECRET\x7f", "token must be"},
        {"acme:SECR\xc3\xb6T", "token must be"},
        {"acme:sha256:abcd", "sha256: needs 64 hex digits"},
        {"acme:SECRET,acme:SECRET", "same token"},
        {"acme:SECRET,beta:SECRET", "same token"},
        {"acme:SECRET,beta:sha256:SECRET", "entry 2 (tenant \"beta\")"},
        {over, "token must be 1..512"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = mk_tenants();
        memset(&d, 0, sizeof d);
        tg_err_t rc = tg_tenants_load_env(t, S(bad[i].v), &d);
        if (rc != TG_ERR_CONFIG || strstr(d.msg, bad[i].needle) == NULL ||
            strstr(d.msg, "TRIGGUARD_API_KEYS") == NULL) {
            fail_msg("case %zu: rc %s, diag \"%s\"", i, tg_err_name(rc), d.msg);
        }
        /* tokens are never echoed */
        assert_null(strstr(d.msg, "SECRET"));
        assert_null(strstr(d.msg, "SEC"));
        assert_null(strstr(d.msg, "xxxx"));
        assert_int_equal(tg_tenants_count(t), 0);
        tg_tenants_destroy(t);
    }

    /* 1025 entries */
    size_t cap = 1100 * 24;
    char *many = malloc(cap);
    assert_non_null(many);
    size_t len = 0;
    for (int i = 0; i <= TG_GUARD_MAX_TENANTS; i++) {
        len += (size_t)snprintf(many + len, cap - len, "%st%d:tok%d", i ? "," : "", i, i);
    }
    t = mk_tenants();
    assert_int_equal(tg_tenants_load_env(t, many, len, &d), TG_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "more than 1024"));
    /* the first 1024 of them are fine; the value need not be NUL-terminated */
    char *comma = many;
    for (int i = 0; i < TG_GUARD_MAX_TENANTS; i++) {
        comma = strchr(comma + 1, ',');
    }
    assert_int_equal(tg_tenants_load_env(t, many, (size_t)(comma - many), &d), TG_OK);
    assert_int_equal(tg_tenants_count(t), TG_GUARD_MAX_TENANTS);
    assert_int_equal(auth_token(t, "tok1023"), 1023);
    assert_int_equal(auth_token(t, "tok1024"), -1);
    free(many);
    assert_int_equal(tg_tenants_load_env(NULL, S("a:b"), &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_load_env(t, NULL, 4, &d), TG_ERR_INVALID_ARG);
    tg_tenants_destroy(t);
}

/* ------------------------------------------------------------------ bearer parsing */

static void test_bearer_parsing(void **state) {
    (void)state;
    tg_tenants_t *t = mk_tenants();
    uint8_t dg[32];
    tg_sha256(dg, "tok", 3);
    assert_int_equal(tg_tenants_add(t, S("acme"), dg, NULL), TG_OK);
    char tok512[TG_GUARD_TOKEN_MAX + 1];
    memset(tok512, 'Z', TG_GUARD_TOKEN_MAX);
    tok512[TG_GUARD_TOKEN_MAX] = '\0';
    tg_sha256(dg, tok512, TG_GUARD_TOKEN_MAX);
    assert_int_equal(tg_tenants_add(t, S("long"), dg, NULL), TG_OK);
    int idx = -2;

    const char *good[] = {"Bearer tok", "bearer tok", "BEARER tok", "bEaReR tok"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        idx = -2;
        assert_int_equal(auth(t, good[i], &idx), TG_OK);
        assert_int_equal(idx, 0);
    }
    const char *bad[] = {
        "",
        "Bearer",
        "Bearer ",
        "Bearer  tok",
        " Bearer tok",
        "Bearer tok ",
        "Bearer\ttok",
        "Bearertok",
        "Basic tok",
        "Bearer: tok",
        "Bearer tok\n",
        "Bearer t\xc3\xb6k",
        "Bearer tok\x7f",
        "Bearer tok tok",
        "Bearer tokX",
        "Bear tok",
        "Bearer tok", /* last one is valid: keeps the table honest */
    };
    size_t nbad = sizeof bad / sizeof bad[0];
    for (size_t i = 0; i + 1 < nbad; i++) {
        idx = -2;
        if (auth(t, bad[i], &idx) != TG_ERR_UNAUTHORIZED || idx != -1) {
            fail_msg("header \"%s\" was accepted", bad[i]);
        }
    }
    assert_int_equal(auth(t, bad[nbad - 1], &idx), TG_OK);

    /* absent header */
    idx = -2;
    assert_int_equal(tg_auth_check(t, NULL, 0, &idx), TG_ERR_UNAUTHORIZED);
    assert_int_equal(idx, -1);
    /* embedded NUL and a length shorter than the string */
    assert_int_equal(tg_auth_check(t, "Bearer t\0k", 10, &idx), TG_ERR_UNAUTHORIZED);
    assert_int_equal(tg_auth_check(t, "Bearer tokens", 10, &idx), TG_OK);
    assert_int_equal(idx, 0);
    /* token length: 512 accepted, 513 refused without hashing */
    char hdr[TG_GUARD_TOKEN_MAX + 16];
    assert_int_equal(auth(t, bearer(hdr, sizeof hdr, tok512), &idx), TG_OK);
    assert_int_equal(idx, 1);
    snprintf(hdr, sizeof hdr, "Bearer %sZ", tok512);
    assert_int_equal(auth(t, hdr, &idx), TG_ERR_UNAUTHORIZED);

    assert_int_equal(tg_auth_check(NULL, S("Bearer tok"), &idx), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_auth_check(t, S("Bearer tok"), NULL), TG_ERR_INVALID_ARG);

    /* an empty table authenticates nobody */
    tg_tenants_t *empty = mk_tenants();
    assert_int_equal(auth(empty, "Bearer tok", &idx), TG_ERR_UNAUTHORIZED);
    tg_tenants_destroy(empty);
    tg_tenants_destroy(t);
}

static void test_add_and_bypass(void **state) {
    (void)state;
    tg_tenants_t *t = mk_tenants();
    uint8_t dg[32];
    tg_diag_t d;
    int idx = -2;
    tg_sha256(dg, "tok", 3);
    assert_int_equal(tg_tenants_add(t, S("acme"), dg, &d), TG_OK);
    assert_int_equal(tg_tenants_add(t, S("acme"), dg, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tenants_add(t, S("bad name"), dg, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tenants_add(t, "", 0, dg, &d), TG_ERR_CONFIG);
    assert_int_equal(tg_tenants_add(t, S("x"), NULL, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_add(NULL, S("x"), dg, &d), TG_ERR_INVALID_ARG);

    assert_false(tg_tenants_local_bypass(t));
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_OK);
    assert_true(tg_tenants_local_bypass(t));
    assert_int_equal(tg_tenants_count(t), 2);
    int local = tg_tenants_find(t, S(TG_GUARD_LOCAL_TENANT));
    assert_int_equal(local, 1);
    /* every request maps to "local", whatever the header */
    assert_int_equal(tg_auth_check(t, NULL, 0, &idx), TG_OK);
    assert_int_equal(idx, local);
    assert_int_equal(auth(t, "Bearer tok", &idx), TG_OK);
    assert_int_equal(idx, local);
    assert_int_equal(auth(t, "garbage", &idx), TG_OK);
    assert_int_equal(idx, local);
    /* idempotent */
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_OK);
    assert_int_equal(tg_tenants_count(t), 2);
    /* off again: real auth */
    assert_int_equal(tg_tenants_set_local_bypass(t, false), TG_OK);
    assert_int_equal(tg_auth_check(t, NULL, 0, &idx), TG_ERR_UNAUTHORIZED);
    assert_int_equal(auth(t, "Bearer tok", &idx), TG_OK);
    assert_int_equal(idx, 0);
    assert_int_equal(tg_tenants_set_local_bypass(NULL, true), TG_ERR_INVALID_ARG);
    assert_false(tg_tenants_local_bypass(NULL));
    tg_tenants_destroy(t);

    /* an existing "local" tenant is reused */
    t = mk_tenants();
    assert_int_equal(tg_tenants_add(t, S("other"), dg, &d), TG_OK);
    tg_sha256(dg, "l", 1);
    assert_int_equal(tg_tenants_add(t, S("local"), dg, &d), TG_OK);
    assert_int_equal(tg_tenants_set_local_bypass(t, true), TG_OK);
    assert_int_equal(tg_tenants_count(t), 2);
    assert_int_equal(tg_auth_check(t, NULL, 0, &idx), TG_OK);
    assert_int_equal(idx, 1);
    tg_tenants_destroy(t);
}

static void test_loopback(void **state) {
    (void)state;
    const char *yes[] = {"127.0.0.1", "127.255.255.254", "127.0.0.53",       "::1",
                         "[::1]",     "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost"};
    const char *no[] = {"",
                        "0.0.0.0",
                        "::",
                        "[::]",
                        "128.0.0.1",
                        "10.0.0.1",
                        "192.168.1.10",
                        "::ffff:10.0.0.1",
                        "::2",
                        "127.1",
                        "LOCALHOST",
                        "localhost.",
                        "example.com",
                        "127.0.0.1 ",
                        "[127.0.0.1]",
                        "[::1",
                        "fe80::1",
                        "1.127.0.0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!tg_guard_listen_is_loopback(yes[i])) {
            fail_msg("%s should be loopback", yes[i]);
        }
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (tg_guard_listen_is_loopback(no[i])) {
            fail_msg("%s should not be loopback", no[i]);
        }
    }
    assert_false(tg_guard_listen_is_loopback(NULL));
    char longaddr[200];
    memset(longaddr, '1', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = '\0';
    assert_false(tg_guard_listen_is_loopback(longaddr));
}

/* ------------------------------------------------------------------ rate limits */

#define SEC INT64_C(1000000000)

static void test_gcra_exact(void **state) {
    (void)state;
    tg_rate_t *r = NULL;
    tg_rate_opts_t o = {.tenant_per_min = 60, .tenant_burst = 4, .tenants = 4};
    tg_rate_info_t in;
    assert_int_equal(tg_rate_create(&r, &o, NULL), TG_OK);
    const int64_t t0 = 5000 * SEC;

    /* from idle: 1 + burst = 5 at once, remaining counts down */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tg_rate_check(r, 0, t0, &in), TG_OK);
        assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
        assert_int_equal(in.limit, 60);
        assert_int_equal(in.burst, 4);
        assert_int_equal(in.remaining, 4 - i);
        assert_int_equal(in.retry_after_ms, 0);
        assert_int_equal(in.reset_ms, (i + 1) * 1000);
    }
    /* the sixth waits one emission interval; refusals consume nothing */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(tg_rate_check(r, 0, t0, &in), TG_ERR_RATE_LIMITED);
        assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
        assert_int_equal(in.retry_after_ms, 1000);
        assert_int_equal(in.remaining, 0);
        assert_int_equal(in.reset_ms, 5000);
    }
    assert_int_equal(tg_rate_check(r, 0, t0 + SEC - 1, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.retry_after_ms, 1); /* 1 ns rounds up to 1 ms */
    assert_int_equal(tg_rate_retry_after_s(in.retry_after_ms), 1);
    assert_int_equal(tg_rate_check(r, 0, t0 + SEC, &in), TG_OK);
    assert_int_equal(in.remaining, 0);
    assert_int_equal(tg_rate_check(r, 0, t0 + SEC, &in), TG_ERR_RATE_LIMITED);
    /* steady state: exactly one per second */
    for (int k = 2; k < 10; k++) {
        assert_int_equal(tg_rate_check(r, 0, t0 + k * SEC - 1, NULL), TG_ERR_RATE_LIMITED);
        assert_int_equal(tg_rate_check(r, 0, t0 + k * SEC, NULL), TG_OK);
        assert_int_equal(tg_rate_check(r, 0, t0 + k * SEC, NULL), TG_ERR_RATE_LIMITED);
    }
    /* other tenants are untouched */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tg_rate_check(r, 1, t0, NULL), TG_OK);
    }
    assert_int_equal(tg_rate_check(r, 1, t0, NULL), TG_ERR_RATE_LIMITED);
    /* after a long idle period the burst is back, not more */
    int64_t later = t0 + 3600 * SEC;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tg_rate_check(r, 0, later, NULL), TG_OK);
    }
    assert_int_equal(tg_rate_check(r, 0, later, &in), TG_ERR_RATE_LIMITED);
    /* half an interval later: 500 ms to go */
    assert_int_equal(tg_rate_check(r, 0, later + SEC / 2, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.retry_after_ms, 500);
    /* the global-only path (no tenant yet) is unlimited here */
    assert_int_equal(tg_rate_check(r, TG_GUARD_NO_TENANT, t0, &in), TG_OK);
    assert_int_equal(in.scope, TG_RATE_SCOPE_NONE);

    tg_rate_stats_t rs;
    tg_rate_stats(r, &rs);
    assert_int_equal(rs.rejected_tenant, 100 + 1 + 1 + 8 * 2 + 1 + 2);
    assert_int_equal(rs.rejected_global, 0);
    assert_int_equal(tg_rate_check(r, 4, t0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_rate_check(r, -2, t0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_rate_check(NULL, 0, t0, &in), TG_ERR_INVALID_ARG);
    tg_rate_destroy(r);
    tg_rate_destroy(NULL);
}

static void test_gcra_defaults_and_config(void **state) {
    (void)state;
    tg_rate_t *r = NULL;
    tg_diag_t d;
    tg_rate_info_t in;
    /* default burst = rate/10: 600/min -> 60 extra, T = 100 ms */
    tg_rate_opts_t o = {.tenant_per_min = 600, .tenants = 1};
    assert_int_equal(tg_rate_create(&r, &o, &d), TG_OK);
    for (int i = 0; i < 61; i++) {
        assert_int_equal(tg_rate_check(r, 0, 0, NULL), TG_OK);
    }
    assert_int_equal(tg_rate_check(r, 0, 0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.burst, 60);
    assert_int_equal(in.retry_after_ms, 100);
    tg_rate_destroy(r);

    /* a rate below 10/min has no burst: strictly one per interval */
    o = (tg_rate_opts_t){.tenant_per_min = 7, .tenants = 1};
    assert_int_equal(tg_rate_create(&r, &o, &d), TG_OK);
    assert_int_equal(tg_rate_check(r, 0, 0, NULL), TG_OK);
    assert_int_equal(tg_rate_check(r, 0, 0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.retry_after_ms, (60000 + 6) / 7); /* 8571.43 ms rounded up */
    assert_int_equal(tg_rate_retry_after_s(in.retry_after_ms), 9);
    tg_rate_destroy(r);

    /* unlimited */
    assert_int_equal(tg_rate_create(&r, NULL, &d), TG_OK);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(tg_rate_check(r, i % TG_GUARD_MAX_TENANTS, 0, &in), TG_OK);
    }
    assert_int_equal(in.scope, TG_RATE_SCOPE_NONE);
    tg_rate_destroy(r);

    struct {
        tg_rate_opts_t o;
        const char *needle;
    } bad[] = {
        {{.tenant_per_min = UINT64_C(60000000001)}, "per-tenant rate"},
        {{.global_per_min = UINT64_C(60000000001)}, "global rate"},
        {{.tenant_per_min = 60, .tenant_burst = UINT64_C(1000000001)}, "burst"},
        {{.global_per_min = 1, .global_burst = UINT64_C(100000000)}, "burst"},
        {{.tenants = TG_GUARD_MAX_TENANTS + 1}, "tenant slots"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = (tg_rate_t *)&d;
        memset(&d, 0, sizeof d);
        assert_int_equal(tg_rate_create(&r, &bad[i].o, &d), TG_ERR_CONFIG);
        assert_null(r);
        assert_non_null(strstr(d.msg, bad[i].needle));
    }
    /* the extremes that are accepted */
    o = (tg_rate_opts_t){.tenant_per_min = UINT64_C(60000000000),
                         .global_per_min = 1,
                         .global_burst = 1000,
                         .tenants = TG_GUARD_MAX_TENANTS};
    assert_int_equal(tg_rate_create(&r, &o, &d), TG_OK);
    tg_rate_destroy(r);
    assert_int_equal(tg_rate_create(NULL, &o, &d), TG_ERR_INVALID_ARG);

    assert_int_equal(tg_rate_retry_after_s(0), 1);
    assert_int_equal(tg_rate_retry_after_s(1), 1);
    assert_int_equal(tg_rate_retry_after_s(1000), 1);
    assert_int_equal(tg_rate_retry_after_s(1001), 2);
    assert_int_equal(tg_rate_retry_after_s(2500), 3);
}

static void test_gcra_global_refund(void **state) {
    (void)state;
    tg_rate_t *r = NULL;
    tg_rate_info_t in;
    tg_rate_opts_t o = {.tenant_per_min = 60, .tenants = 2};
    assert_int_equal(tg_rate_create(&r, &o, NULL), TG_OK);
    const int64_t t0 = 100 * SEC;
    tg_rate_destroy(r);

    /* global 6/min (T = 10 s, default burst 6/10 = 0): strictly one per 10 s */
    o = (tg_rate_opts_t){
        .tenant_per_min = 60, .tenant_burst = 1, .global_per_min = 6, .tenants = 2};
    assert_int_equal(tg_rate_create(&r, &o, NULL), TG_OK);
    assert_int_equal(tg_rate_check(r, 0, t0, &in), TG_OK);
    /* tenant 0 still has one token; the global refuses and the tenant token is refunded */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(tg_rate_check(r, 0, t0, &in), TG_ERR_RATE_LIMITED);
        assert_int_equal(in.scope, TG_RATE_SCOPE_GLOBAL);
        assert_int_equal(in.limit, 6);
        assert_int_equal(in.retry_after_ms, 10000);
    }
    /* tenant 1 is refused by the global limiter too, without losing its own tokens */
    assert_int_equal(tg_rate_check(r, 1, t0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.scope, TG_RATE_SCOPE_GLOBAL);
    assert_int_equal(tg_rate_check(r, TG_GUARD_NO_TENANT, t0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.scope, TG_RATE_SCOPE_GLOBAL);
    /* 10 s later the global has one token again */
    assert_int_equal(tg_rate_check(r, 0, t0 + 10 * SEC, &in), TG_OK);
    assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
    assert_int_equal(in.remaining, 1);
    tg_rate_stats_t rs;
    tg_rate_stats(r, &rs);
    assert_int_equal(rs.rejected_global, 12);
    assert_int_equal(rs.rejected_tenant, 0);
    tg_rate_destroy(r);

    /* refund observed directly: tenant 6/min (T = 10 s, default burst 0: 1 at once), global
     * 600/min with burst 1 (T = 100 ms, 2 at once) */
    o = (tg_rate_opts_t){
        .tenant_per_min = 6, .global_per_min = 600, .global_burst = 1, .tenants = 2};
    assert_int_equal(tg_rate_create(&r, &o, NULL), TG_OK);
    assert_int_equal(tg_rate_check(r, 1, t0, NULL), TG_OK); /* global: 1 of 2 used */
    assert_int_equal(tg_rate_check(r, 1, t0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
    assert_int_equal(tg_rate_check(r, TG_GUARD_NO_TENANT, t0, NULL), TG_OK); /* 2 of 2 */
    /* tenant 0 passes its limiter, the global refuses, the refund restores tenant 0 */
    assert_int_equal(tg_rate_check(r, 0, t0, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.scope, TG_RATE_SCOPE_GLOBAL);
    assert_int_equal(in.retry_after_ms, 100);
    /* at t0 + 100 ms the global has one token; tenant 0 must still have its only one */
    assert_int_equal(tg_rate_check(r, 0, t0 + SEC / 10, &in), TG_OK);
    assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
    assert_int_equal(tg_rate_check(r, 0, t0 + SEC / 10, &in), TG_ERR_RATE_LIMITED);
    assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
    assert_int_equal(in.retry_after_ms, 10000);
    tg_rate_destroy(r);
}

/* ------------------------------------------------------------------ bulkheads */

static void test_bulkhead_limits(void **state) {
    (void)state;
    tg_bulkhead_t *b = NULL;
    tg_bulkhead_reason_t why;
    tg_bulkhead_stats_t st;
    tg_diag_t d;
    tg_bulkhead_opts_t o = {.global_max = 3, .tenant_max = 2, .tenants = 4};
    assert_int_equal(tg_bulkhead_create(&b, &o, &d), TG_OK);

    assert_int_equal(tg_bulkhead_enter(b, 0, &why), TG_OK);
    assert_int_equal(why, TG_BULKHEAD_OK);
    assert_int_equal(tg_bulkhead_enter(b, 0, &why), TG_OK);
    /* tenant 0 at its max; max + 1 refused */
    assert_int_equal(tg_bulkhead_enter(b, 0, &why), TG_ERR_OVERLOADED);
    assert_int_equal(why, TG_BULKHEAD_TENANT_FULL);
    assert_int_equal(tg_bulkhead_tenant_in_flight(b, 0), 2);
    /* another tenant gets the last global slot */
    assert_int_equal(tg_bulkhead_enter(b, 1, &why), TG_OK);
    /* global at max: refused, and tenant 1's slot is not kept */
    assert_int_equal(tg_bulkhead_enter(b, 1, &why), TG_ERR_OVERLOADED);
    assert_int_equal(why, TG_BULKHEAD_GLOBAL_FULL);
    assert_int_equal(tg_bulkhead_tenant_in_flight(b, 1), 1);
    assert_int_equal(tg_bulkhead_enter(b, TG_GUARD_NO_TENANT, &why), TG_ERR_OVERLOADED);
    assert_int_equal(why, TG_BULKHEAD_GLOBAL_FULL);
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 3);
    assert_int_equal(st.rejected_tenant, 1);
    assert_int_equal(st.rejected_global, 2);

    /* leaving frees exactly one slot */
    tg_bulkhead_leave(b, 0);
    assert_int_equal(tg_bulkhead_enter(b, 2, NULL), TG_OK);
    assert_int_equal(tg_bulkhead_enter(b, 3, NULL), TG_ERR_OVERLOADED);
    tg_bulkhead_leave(b, 0);
    tg_bulkhead_leave(b, 1);
    tg_bulkhead_leave(b, 2);
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.unbalanced_leaves, 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tg_bulkhead_tenant_in_flight(b, i), 0);
    }
    /* a global-only slot */
    assert_int_equal(tg_bulkhead_enter(b, TG_GUARD_NO_TENANT, NULL), TG_OK);
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 1);
    tg_bulkhead_leave(b, TG_GUARD_NO_TENANT);

    /* unbalanced leaves are counted and never drive a counter below zero */
    tg_bulkhead_leave(b, 0);
    tg_bulkhead_leave(b, 99);
    tg_bulkhead_leave(NULL, 0);
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.unbalanced_leaves, 2);
    assert_int_equal(tg_bulkhead_tenant_in_flight(b, 0), 0);
    assert_int_equal(tg_bulkhead_tenant_in_flight(b, 4), 0);
    assert_int_equal(tg_bulkhead_tenant_in_flight(NULL, 0), 0);

    assert_int_equal(tg_bulkhead_enter(b, 4, &why), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bulkhead_enter(b, -2, &why), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bulkhead_enter(NULL, 0, &why), TG_ERR_INVALID_ARG);
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 0);
    tg_bulkhead_destroy(b);
    tg_bulkhead_destroy(NULL);

    /* unlimited still counts what is in flight */
    assert_int_equal(tg_bulkhead_create(&b, NULL, &d), TG_OK);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(tg_bulkhead_enter(b, 7, NULL), TG_OK);
    }
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 1000);
    assert_int_equal(tg_bulkhead_tenant_in_flight(b, 7), 1000);
    for (int i = 0; i < 1000; i++) {
        tg_bulkhead_leave(b, 7);
    }
    tg_bulkhead_stats(b, &st);
    assert_int_equal(st.in_flight, 0);
    tg_bulkhead_destroy(b);

    o = (tg_bulkhead_opts_t){.tenants = TG_GUARD_MAX_TENANTS + 1};
    b = (tg_bulkhead_t *)&d;
    assert_int_equal(tg_bulkhead_create(&b, &o, &d), TG_ERR_CONFIG);
    assert_null(b);
    assert_int_equal(tg_bulkhead_create(NULL, NULL, &d), TG_ERR_INVALID_ARG);
}

/* A reload builds the table again seeded with the old one's tenants: indices stay (the rate
 * limiter's and bulkheads' slots follow the tenant), a tenant without tokens left keeps its
 * index and authenticates nobody, and a new tenant comes after the old ones. */
static void test_seed_keeps_indices(void **state) {
    (void)state;
    char ha[65], hb[65], hc[65], json[512];
    digest_hex(ha, "token-a");
    digest_hex(hb, "token-b");
    digest_hex(hc, "token-c");
    tg_tenants_t *old = NULL, *fresh = NULL;
    assert_int_equal(tg_tenants_create(&old), TG_OK);
    snprintf(json, sizeof json,
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"},"
             "{\"tenant\":\"beta\",\"token_sha256\":\"%s\"}]",
             ha, hb);
    assert_int_equal(tg_tenants_load_json(old, S(json), NULL, NULL), TG_OK);
    /* acme's token revoked, a tenant gamma added, beta now listed first */
    snprintf(json, sizeof json,
             "[{\"tenant\":\"gamma\",\"token_sha256\":\"%s\"},"
             "{\"tenant\":\"beta\",\"token_sha256\":\"%s\"}]",
             hc, hb);
    assert_int_equal(tg_tenants_create(&fresh), TG_OK);
    assert_int_equal(tg_tenants_seed(fresh, old), TG_OK);
    assert_int_equal(tg_tenants_load_json(fresh, S(json), NULL, NULL), TG_OK);
    assert_int_equal(tg_tenants_find(fresh, S("acme")), 0);
    assert_int_equal(tg_tenants_find(fresh, S("beta")), 1);
    assert_int_equal(tg_tenants_find(fresh, S("gamma")), 2);
    assert_int_equal(tg_tenants_count(fresh), 3);
    assert_int_equal(tg_tenants_token_count(fresh), 2);
    assert_int_equal(auth_token(fresh, "token-a"), -1);
    assert_int_equal(auth_token(fresh, "token-b"), 1);
    assert_int_equal(auth_token(fresh, "token-c"), 2);
    /* only an empty table is seeded */
    assert_int_equal(tg_tenants_seed(fresh, old), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tenants_seed(NULL, old), TG_ERR_INVALID_ARG);
    tg_tenants_destroy(fresh);
    tg_tenants_destroy(old);
}

/* ------------------------------------------------------------------ allocation failure */

static void test_nomem_and_crypto(void **state) {
    (void)state;
    tg_tenants_t *t = NULL;
    tg_rate_t *r = NULL;
    tg_bulkhead_t *b = NULL;
    tg_diag_t d;

    tg_fail_alloc_after(0);
    assert_int_equal(tg_tenants_create(&t), TG_ERR_NOMEM);
    assert_null(t);
    for (long k = 0; k < 2; k++) {
        tg_fail_alloc_after(k);
        assert_int_equal(tg_rate_create(&r, NULL, &d), TG_ERR_NOMEM);
        assert_null(r);
        tg_fail_alloc_after(k);
        assert_int_equal(tg_bulkhead_create(&b, NULL, &d), TG_ERR_NOMEM);
        assert_null(b);
    }
    tg_fail_alloc_off();

    tg_fail_sodium_init(true);
    assert_int_equal(tg_tenants_create(&t), TG_ERR_CRYPTO);
    tg_fail_sodium_init(false);

    t = mk_tenants();
    /* the staging array of each loader */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_tenants_load_env(t, S("a:b"), &d), TG_ERR_NOMEM);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_tenants_load_json(t, S("[]"), NULL, &d), TG_ERR_NOMEM);
    char *path = write_temp("[]", 2);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_ERR_NOMEM);
    tg_fail_alloc_off();
    assert_int_equal(tg_tenants_load_file(t, path, &d), TG_OK);
    unlink(path);
    free(path);
    assert_int_equal(tg_tenants_count(t), 0);

    /* every allocation of a load with bound lists fails in turn: all or nothing */
    char ha[65], hb[65], j[600];
    digest_hex(ha, "nomem-a");
    digest_hex(hb, "nomem-b");
    snprintf(j, sizeof j,
             "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"actors\":[\"x\"]},"
             "{\"tenant\":\"acme\",\"token_sha256\":\"%s\",\"surfaces\":[\"s\",\"u\"]}]",
             ha, hb);
    long k = 0;
    for (;; k++) {
        tg_fail_alloc_after(k);
        tg_err_t rc = tg_tenants_load_json(t, S(j), NULL, &d);
        tg_fail_alloc_off();
        if (rc == TG_OK) {
            break;
        }
        assert_int_equal(rc, TG_ERR_NOMEM);
        assert_int_equal(tg_tenants_token_count(t), 0);
        assert_int_equal(tg_tenants_count(t), 0);
    }
    assert_true(k >= 3); /* the staging array and both lists at least */
    assert_int_equal(tg_tenants_token_count(t), 2);
    assert_string_equal(tg_tenants_principal(t, 1)->surfaces[1].ptr, "u");
    tg_tenants_destroy(t);
}

/* ------------------------------------------------------------------ threads */

#define GT_THREADS 8
#define GT_OPS 20000

typedef struct gstress {
    tg_bulkhead_t *b;
    tg_rate_t *r;
    tg_tenants_t *t;
    atomic_int bad;
    atomic_long admitted[2];
    atomic_long rate_ok[2];
    atomic_long rate_ok_total;
    atomic_long attempts;
} gstress_t;

typedef struct gworker {
    gstress_t *g;
    int id;
} gworker_t;

static void *gstress_worker(void *arg) {
    gworker_t *w = arg;
    gstress_t *g = w->g;
    int tenant = w->id % 2;
    char hdr[64];
    snprintf(hdr, sizeof hdr, "Bearer token-%d", tenant);
    for (int i = 0; i < GT_OPS; i++) {
        /* bulkhead: hold the slot across a little work, check the caps from inside */
        tg_bulkhead_reason_t why;
        if (tg_bulkhead_enter(g->b, tenant, &why) == TG_OK) {
            atomic_fetch_add(&g->admitted[tenant], 1);
            if (tg_bulkhead_tenant_in_flight(g->b, tenant) > 3) {
                atomic_fetch_add(&g->bad, 1);
            }
            tg_bulkhead_stats_t st;
            tg_bulkhead_stats(g->b, &st);
            if (st.in_flight > 5 || st.in_flight == 0) {
                atomic_fetch_add(&g->bad, 1);
            }
            tg_bulkhead_leave(g->b, tenant);
        } else if (why != TG_BULKHEAD_TENANT_FULL && why != TG_BULKHEAD_GLOBAL_FULL) {
            atomic_fetch_add(&g->bad, 1);
        }
        /* rate: frozen clock, so exactly the bursts pass */
        if (i < 2000) {
            atomic_fetch_add(&g->attempts, 1);
            if (tg_rate_check(g->r, tenant, 1000, NULL) == TG_OK) {
                atomic_fetch_add(&g->rate_ok[tenant], 1);
                atomic_fetch_add(&g->rate_ok_total, 1);
            }
        }
        /* auth from many threads on the shared read-only table */
        if (i % 64 == 0) {
            int idx = -1;
            if (tg_auth_check(g->t, hdr, strlen(hdr), &idx) != TG_OK || idx != tenant) {
                atomic_fetch_add(&g->bad, 1);
            }
        }
    }
    return NULL;
}

static void test_threaded_stress(void **state) {
    (void)state;
    gstress_t g = {0};
    tg_bulkhead_opts_t bo = {.global_max = 5, .tenant_max = 3, .tenants = 2};
    /* tenant bursts 100 each, global 150: both tenants together hit the global cap */
    tg_rate_opts_t ro = {.tenant_per_min = 60,
                         .tenant_burst = 99,
                         .global_per_min = 6000,
                         .global_burst = 149,
                         .tenants = 2};
    assert_int_equal(tg_bulkhead_create(&g.b, &bo, NULL), TG_OK);
    assert_int_equal(tg_rate_create(&g.r, &ro, NULL), TG_OK);
    g.t = mk_tenants();
    assert_int_equal(tg_tenants_load_env(g.t, S("t0:token-0,t1:token-1"), NULL), TG_OK);

    pthread_t th[GT_THREADS];
    gworker_t w[GT_THREADS];
    for (int i = 0; i < GT_THREADS; i++) {
        w[i].g = &g;
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, gstress_worker, &w[i]), 0);
    }
    for (int i = 0; i < GT_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(atomic_load(&g.bad), 0);

    /* bulkheads: everything returned, rejections account for every refusal */
    tg_bulkhead_stats_t bs;
    tg_bulkhead_stats(g.b, &bs);
    assert_int_equal(bs.in_flight, 0);
    assert_int_equal(bs.unbalanced_leaves, 0);
    assert_int_equal(tg_bulkhead_tenant_in_flight(g.b, 0), 0);
    assert_int_equal(tg_bulkhead_tenant_in_flight(g.b, 1), 0);
    long admitted = atomic_load(&g.admitted[0]) + atomic_load(&g.admitted[1]);
    assert_int_equal((uint64_t)admitted + bs.rejected_tenant + bs.rejected_global,
                     (uint64_t)GT_THREADS * GT_OPS);

    /* rate: exactly the global burst passed, no tenant above its own, every refusal counted */
    assert_int_equal(atomic_load(&g.rate_ok_total), 150);
    assert_true(atomic_load(&g.rate_ok[0]) <= 100);
    assert_true(atomic_load(&g.rate_ok[1]) <= 100);
    tg_rate_stats_t rs;
    tg_rate_stats(g.r, &rs);
    assert_int_equal(rs.rejected_tenant + rs.rejected_global + 150,
                     (uint64_t)atomic_load(&g.attempts));
    /* refunds were exact: 1.5 s later the global (T = 10 ms) is full again and each tenant
     * (T = 1 s) has precisely its unused tokens plus 1.5 s of refill: 101 - used */
    for (int t = 0; t < 2; t++) {
        long used = atomic_load(&g.rate_ok[t]);
        long passed = 0;
        tg_rate_info_t in;
        while (tg_rate_check(g.r, t, 1000 + 3 * SEC / 2, &in) == TG_OK) {
            passed++;
        }
        assert_int_equal(in.scope, TG_RATE_SCOPE_TENANT);
        assert_int_equal(passed, 101 - used);
    }
    tg_rate_destroy(g.r);
    tg_bulkhead_destroy(g.b);
    tg_tenants_destroy(g.t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_json_ok),     cmocka_unit_test(test_tokens_json_errors),
        cmocka_unit_test(test_tokens_limits),      cmocka_unit_test(test_principals_ok),
        cmocka_unit_test(test_principals_errors),  cmocka_unit_test(test_principals_limits),
        cmocka_unit_test(test_env_keys),           cmocka_unit_test(test_bearer_parsing),
        cmocka_unit_test(test_add_and_bypass),     cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_gcra_exact),         cmocka_unit_test(test_gcra_defaults_and_config),
        cmocka_unit_test(test_gcra_global_refund), cmocka_unit_test(test_bulkhead_limits),
        cmocka_unit_test(test_seed_keeps_indices), cmocka_unit_test(test_nomem_and_crypto),
        cmocka_unit_test(test_threaded_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
