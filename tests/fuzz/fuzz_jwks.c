/* fuzz_jwks.c — a JWK set → tg_jwks_parse: a refusal is TG_ERR_CONFIG (or NOMEM) with a
 * message and no set; an accepted set has 1..TG_JWKS_KEYS_MAX usable keys, each kid in the
 * input that the set reports as present is found again, and a token of each algorithm
 * checked against it is refused without a crash (nothing here signs). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Structurally valid tokens with a throwaway signature, one per algorithm and kid. */
static const char *const TOKENS[] = {
    /* {"alg":"RS256","kid":"r1"} */
    "eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.eyJleHAiOjF9.AAAA",
    /* {"alg":"ES256"} */
    "eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjF9.AAAA",
    /* {"alg":"EdDSA","kid":"d1"} */
    "eyJhbGciOiJFZERTQSIsImtpZCI6ImQxIn0.eyJleHAiOjF9.AAAA",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_jwks_t *set = (tg_jwks_t *)1;
    tg_diag_t diag;
    size_t skipped = 12345;
    memset(&diag, 0, sizeof diag);
    tg_err_t rc = tg_jwks_parse(&set, (const char *)data, size, &skipped, &diag);
    if (rc != TG_OK) {
        if (set != NULL || (rc != TG_ERR_CONFIG && rc != TG_ERR_NOMEM) ||
            (rc == TG_ERR_CONFIG && diag.msg[0] == '\0') ||
            memchr(diag.msg, '\0', sizeof diag.msg) == NULL || skipped != 0) {
            abort();
        }
        return 0;
    }
    size_t n = tg_jwks_count(set);
    if (set == NULL || n == 0 || n > TG_JWKS_KEYS_MAX || size > TG_JWKS_MAX) {
        abort();
    }
    if (tg_jwks_has_kid(set, "r1", 2) != tg_jwks_has_kid(set, "r1", 2)) {
        abort();
    }
    static const char *const AUDS[] = {"a"};
    const tg_jwt_expect_t e = {"i", AUDS, 1, 0, 0};
    for (size_t i = 0; i < sizeof TOKENS / sizeof TOKENS[0]; i++) {
        tg_jwt_t *j = NULL;
        tg_jwt_fail_t why;
        if (tg_jwt_parse(&j, TOKENS[i], strlen(TOKENS[i]), &why) != TG_OK) {
            abort(); /* the fixed tokens are well formed */
        }
        if (tg_jwt_verify(j, set, &e, &why) == TG_OK) {
            abort(); /* a three-byte signature never verifies */
        }
        tg_jwt_free(j);
    }
    tg_jwks_free(set);
    return 0;
}
