/* fuzz_tokens.c — tokens file and TRIGGUARD_API_KEYS parsers, then auth, on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_tenants_t *t = NULL;
    tg_diag_t d = {{0}};
    if (tg_tenants_create(&t) != TG_OK) {
        return 0;
    }
    /* Same bytes through both loaders into one table: exercises cross-source duplicates. */
    tg_err_t rc = tg_tenants_load_json(t, (const char *)data, size, "fuzz.json", &d);
    size_t after_json = tg_tenants_count(t);
    if (rc != TG_OK && after_json != 0) {
        abort(); /* a failed load must leave the table unchanged */
    }
    if (memchr(d.msg, '\0', sizeof d.msg) == NULL) {
        abort();
    }
    rc = tg_tenants_load_env(t, (const char *)data, size, &d);
    if (rc != TG_OK && tg_tenants_count(t) != after_json) {
        abort();
    }
    /* Every loaded tenant is reachable by name and its name is well-formed. */
    for (size_t i = 0; i < tg_tenants_count(t); i++) {
        size_t len = 0;
        const char *name = tg_tenants_name(t, (int)i, &len);
        if (name == NULL || len == 0 || len > TG_GUARD_TENANT_NAME_MAX ||
            tg_tenants_find(t, name, len) != (int)i) {
            abort();
        }
    }
    /* Auth on the same bytes as a header must not crash and must give a valid index. */
    int idx = -1;
    if (tg_auth_check(t, (const char *)data, size, &idx) == TG_OK &&
        (idx < 0 || (size_t)idx >= tg_tenants_count(t))) {
        abort();
    }
    tg_tenants_destroy(t);
    return 0;
}
