/* fuzz_jwt.c — a compact token → tg_jwt_parse, then tg_jwt_verify against a fixed key set
 * holding one key of each type (RSA 2048, P-256, Ed25519; the seeds in corpus/jwt/ were
 * signed with their private halves): results and reasons agree with the contract of jwt.h,
 * claims are visible exactly when a token verified, a verified token's claims meet the
 * expectation, and verification is deterministic. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW INT64_C(1800000000)
#define ISS "https://token.actions.githubusercontent.com"

static const char JWKS[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\"1enaMb"
    "gmLyXX1k64oFECRxwcos2OM1xwdK0VFQsj2YWnu-u5qCzgpKHsw4Pox34Ebccp7WxtuuSH"
    "kESTcS8bn8VHZsukhiXocQJ4cLxAIuz9slV0v_DAYPFV_f3ReckEglJoQCSctgdgn_J6UA"
    "KlTakZHFvBGV2hrLHvC7Cp1IB9ffY3FkgieTarCsmjDKthOv1HLvBSP8O4Uh-Rnz_QU7Fs"
    "LRkPXatHqyp7D4nIWUgtlQB8l5ekpcHCEwFwFcNO-5e4EtAR7jO8PhYZCsZYwtYjgpcGfD"
    "X-aMKh1ZESIhK1C9Z1Fbto2XP3efNwaErKiVZRKhUVBIE42pskER1zHQ\",\"e\":\"AQAB\"},"
    "{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\",\"x\":\"n93OomU8mN1yAkoFPI-w1fF6JGqi"
    "Op0WUZ8mzI6vpAg\",\"y\":\"110DcKyyveVBV10ugju4TudjLeenAEr93QOIJ36hW4w\"},"
    "{\"kty\":\"OKP\",\"kid\":\"d1\",\"crv\":\"Ed25519\",\"x\":\"kAr07xlWZVPscT-gRgjrFl_NT"
    "UAXXuxC5TpMEmJ506Y\"}]}";

static const char *const AUDS[] = {"trigguard"};

static tg_jwks_t *keys(void) {
    static tg_jwks_t *set;
    if (set == NULL && tg_jwks_parse(&set, JWKS, sizeof JWKS - 1, NULL, NULL) != TG_OK) {
        abort(); /* the fixed set itself must load */
    }
    return set;
}

static bool parse_reason(tg_jwt_fail_t w) {
    return w == TG_JWT_FAIL_FORMAT || w == TG_JWT_FAIL_HEADER || w == TG_JWT_FAIL_ALG_REFUSED ||
           w == TG_JWT_FAIL_CLAIMS;
}

static tg_err_t verify(tg_jwt_t *j, const tg_jwt_expect_t *e, tg_jwt_fail_t *why) {
    tg_err_t rc = tg_jwt_verify(j, keys(), e, why);
    if (rc == TG_OK) {
        const json_t *c = tg_jwt_claims(j), *exp = json_object_get(c, "exp");
        const json_t *iss = json_object_get(c, "iss");
        if (*why != TG_JWT_FAIL_NONE || c == NULL || tg_jwt_alg(j) == TG_JWT_ALG_NONE ||
            !json_is_string(iss) || strcmp(json_string_value(iss), ISS) != 0 ||
            !json_is_number(exp) ||
            json_number_value(exp) <= (double)e->now_s - (double)e->leeway_s) {
            abort();
        }
    } else {
        if (tg_jwt_claims(j) != NULL || tg_jwt_alg(j) != TG_JWT_ALG_NONE) {
            abort();
        }
        if (rc == TG_ERR_NOT_FOUND &&
            (*why != TG_JWT_FAIL_KID_UNKNOWN || tg_jwt_kid(j) == NULL ||
             tg_jwks_has_kid(keys(), tg_jwt_kid(j), strlen(tg_jwt_kid(j))))) {
            abort();
        }
        if (rc == TG_ERR_UNAUTHORIZED && (*why == TG_JWT_FAIL_NONE || parse_reason(*why))) {
            abort();
        }
        if (rc != TG_ERR_NOT_FOUND && rc != TG_ERR_UNAUTHORIZED && rc != TG_ERR_NOMEM) {
            abort();
        }
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_jwt_t *j = (tg_jwt_t *)1;
    tg_jwt_fail_t why = TG_JWT_FAIL__COUNT, why2 = TG_JWT_FAIL__COUNT;
    tg_err_t rc = tg_jwt_parse(&j, (const char *)data, size, &why);
    if (rc != TG_OK) {
        if (j != NULL || (rc == TG_ERR_UNAUTHORIZED && !parse_reason(why)) ||
            (rc != TG_ERR_UNAUTHORIZED && rc != TG_ERR_NOMEM)) {
            abort();
        }
        return 0;
    }
    if (j == NULL || why != TG_JWT_FAIL_NONE || size > TG_JWT_MAX || tg_jwt_claims(j) != NULL) {
        abort();
    }
    const tg_jwt_expect_t e = {ISS, AUDS, 1, NOW, 60};
    rc = verify(j, &e, &why);
    if (verify(j, &e, &why2) != rc || why2 != why) {
        abort(); /* deterministic, and a second call gives the same verdict */
    }
    /* the far future and the far past: only the time checks may change the verdict */
    const tg_jwt_expect_t late = {ISS, AUDS, 1, INT64_MAX, 0},
                          early = {ISS, AUDS, 1, INT64_MIN, 300};
    tg_err_t rc_late = verify(j, &late, &why2);
    if (rc_late == TG_OK && rc != TG_OK) {
        abort();
    }
    (void)verify(j, &early, &why2);
    tg_jwt_free(j);
    return 0;
}
