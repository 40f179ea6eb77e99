/* fuzz_oidc_config.c — the --oidc-config parser on arbitrary bytes, then the claim mapping
 * of every issuer it accepted over a fixed GitHub-shaped claim set. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "trigguard/oidc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char claims_text[] =
    "{\"iss\":\"https://token.actions.githubusercontent.com\",\"aud\":\"trigguard\","
    "\"sub\":\"repo:acme/app:environment:production\",\"repository\":\"acme/app\","
    "\"repository_owner\":\"acme\",\"workflow\":\"deploy\",\"run_number\":7,\"ok\":true,"
    "\"obj\":{\"a\":1},\"org\":\"beta\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_oidc_conf_t *c = NULL;
    tg_diag_t d = {{0}};
    /* load_files false: a fuzzer must not open files named by its input */
    tg_err_t rc = tg_oidc_conf_parse(&c, (const char *)data, size, "fuzz.json", false, &d);
    if (memchr(d.msg, '\0', sizeof d.msg) == NULL || (rc == TG_OK) != (c != NULL)) {
        abort();
    }
    (void)tg_oidc_is_jwt_header((const char *)data, size);
    if (rc != TG_OK) {
        return 0;
    }
    if (tg_oidc_conf_count(c) > TG_OIDC_MAX_ISSUERS) {
        abort();
    }
    tg_tenants_t *t = NULL;
    json_t *claims = json_loads(claims_text, 0, NULL);
    uint8_t dg[32] = {7};
    if (claims != NULL && tg_tenants_create(&t) == TG_OK &&
        tg_tenants_add(t, "beta", 4, dg, NULL) == TG_OK &&
        tg_oidc_conf_add_tenants(c, t, NULL) == TG_OK) {
        for (size_t i = 0; i < tg_oidc_conf_count(c); i++) {
            tg_oidc_principal_t *pp = NULL;
            rc = tg_oidc_map(&pp, c, i, claims, t);
            if (rc != TG_OK) {
                if (pp != NULL) {
                    abort();
                }
                continue;
            }
            const tg_principal_t *p = tg_oidc_principal(pp);
            if (p->tenant < 0 || (size_t)p->tenant >= tg_tenants_count(t) || p->subject.len == 0 ||
                p->subject.len > TG_GUARD_SUBJECT_MAX || strlen(p->subject.ptr) != p->subject.len ||
                p->actors_count > TG_GUARD_MAX_BINDINGS || p->claims_count > TG_OIDC_CLAIMS_MAX ||
                p->issuer.ptr == NULL || strcmp(p->issuer.ptr, tg_oidc_conf_issuer(c, i)) != 0) {
                abort();
            }
            for (size_t k = 0; k < p->actors_count; k++) {
                if (p->actors[k].len == 0 || p->actors[k].len > TG_GUARD_NAME_MAX ||
                    strlen(p->actors[k].ptr) != p->actors[k].len) {
                    abort();
                }
            }
            tg_oidc_principal_free(pp);
        }
    }
    json_decref(claims);
    tg_tenants_destroy(t);
    tg_oidc_conf_free(c);
    return 0;
}
