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
    /* Every principal names a loaded tenant and stays within its bounds; the same digest
     * twice would make auth ambiguous, the same subject twice the logs. */
    for (size_t i = 0; i < tg_tenants_token_count(t); i++) {
        const tg_principal_t *p = tg_tenants_principal(t, i);
        if (p == NULL || p->tenant < 0 || (size_t)p->tenant >= tg_tenants_count(t) ||
            p->subject.len == 0 || p->subject.len > TG_GUARD_SUBJECT_MAX ||
            strlen(p->subject.ptr) != p->subject.len || p->observe ||
            p->actors_count > TG_GUARD_MAX_BINDINGS || p->surfaces_count > TG_GUARD_MAX_BINDINGS ||
            (p->actors_count == 0) != (p->actors == NULL) ||
            (p->surfaces_count == 0) != (p->surfaces == NULL) ||
            (unsigned)p->role > TG_ROLE_ADMIN) {
            abort();
        }
        for (size_t k = 0; k < p->actors_count; k++) {
            if (p->actors[k].len == 0 || p->actors[k].len > TG_GUARD_NAME_MAX ||
                !tg_principal_actor_allowed(p, p->actors[k].ptr, p->actors[k].len)) {
                abort();
            }
        }
        for (size_t j = 0; j < i; j++) {
            const tg_principal_t *q = tg_tenants_principal(t, j);
            char a[65], b[65];
            if ((q->subject.len == p->subject.len &&
                 memcmp(q->subject.ptr, p->subject.ptr, p->subject.len) == 0) ||
                (tg_tenants_digest_hex(t, i, a, 32) && tg_tenants_digest_hex(t, j, b, 32) &&
                 memcmp(a, b, 64) == 0)) {
                abort();
            }
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
