/* jwt.c — compact JWS tokens (RFC 7515/7519): strict split and decode, header and claim
 * checks, signature verification through OpenSSL EVP against a parsed key set. */
#include <math.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jwt_int.h"
#include "trigguard/canon.h"

/* The longest signature: RSA with an 8192-bit modulus. */
#define SIG_MAX 1024
#define ES256_SIG 64
#define EDDSA_SIG 64
#define LEEWAY_MAX 300

struct tg_jwt {
    json_t *header;
    json_t *claims;
    char *signed_part; /* the ASCII header "." payload the signature covers */
    size_t signed_len;
    uint8_t sig[SIG_MAX];
    size_t sig_len;
    tg_jwt_alg_t header_alg;
    tg_jwt_alg_t alg; /* the verifying key's, once verified */
    bool verified;
    const char *kid; /* into header */
    size_t kid_len;
};

static const char *const FAIL_NAMES[TG_JWT_FAIL__COUNT] = {
    [TG_JWT_FAIL_NONE] = "none",
    [TG_JWT_FAIL_FORMAT] = "format",
    [TG_JWT_FAIL_HEADER] = "header",
    [TG_JWT_FAIL_ALG_REFUSED] = "alg_refused",
    [TG_JWT_FAIL_KID_UNKNOWN] = "kid_unknown",
    [TG_JWT_FAIL_ALG_MISMATCH] = "alg_mismatch",
    [TG_JWT_FAIL_SIGNATURE] = "signature",
    [TG_JWT_FAIL_CLAIMS] = "claims",
    [TG_JWT_FAIL_ISSUER] = "issuer",
    [TG_JWT_FAIL_AUDIENCE] = "audience",
    [TG_JWT_FAIL_EXPIRED] = "expired",
    [TG_JWT_FAIL_NOT_YET_VALID] = "not_yet_valid",
};

const char *tg_jwt_fail_name(tg_jwt_fail_t f) {
    if ((unsigned)f >= TG_JWT_FAIL__COUNT) {
        return "?";
    }
    return FAIL_NAMES[f];
}

const char *tg_jwt_alg_name(tg_jwt_alg_t a) {
    switch (a) {
    case TG_JWT_ALG_RS256:
        return "RS256";
    case TG_JWT_ALG_ES256:
        return "ES256";
    case TG_JWT_ALG_EDDSA:
        return "EdDSA";
    default:
        return "none";
    }
}

void tg_jwt_free(tg_jwt_t *j) {
    if (j == NULL) {
        return;
    }
    json_decref(j->header);
    json_decref(j->claims);
    free(j->signed_part);
    free(j);
}

const char *tg_jwt_kid(const tg_jwt_t *j) { return j != NULL ? j->kid : NULL; }

const char *tg_jwt_unverified_issuer(const tg_jwt_t *j) {
    if (j == NULL) {
        return NULL;
    }
    const json_t *iss = json_object_get(j->claims, "iss");
    return json_is_string(iss) ? json_string_value(iss) : NULL;
}

const json_t *tg_jwt_claims(const tg_jwt_t *j) {
    return j != NULL && j->verified ? j->claims : NULL;
}

tg_jwt_alg_t tg_jwt_alg(const tg_jwt_t *j) {
    return j != NULL && j->verified ? j->alg : TG_JWT_ALG_NONE;
}

/* Header members that would let the token name or carry its own key (RFC 8725 §3.10 and
 * §2.8 of the JWS BCP): the key always comes from the configured set, so a token that
 * offers one is refused rather than silently trusted less than it asks. */
static const char *const KEY_FINDING_MEMBERS[] = {"jku", "jwk", "x5u", "x5c"};

static tg_jwt_fail_t check_header(tg_jwt_t *j) {
    const json_t *h = j->header, *alg, *typ, *kid;
    if (!json_is_object(h)) {
        return TG_JWT_FAIL_HEADER;
    }
    alg = json_object_get(h, "alg");
    if (!json_is_string(alg)) {
        return TG_JWT_FAIL_HEADER;
    }
    /* Case-sensitive, as RFC 7515 §4.1.1 says; "none", HS* and all others stop here. */
    if (strcmp(json_string_value(alg), "RS256") == 0) {
        j->header_alg = TG_JWT_ALG_RS256;
    } else if (strcmp(json_string_value(alg), "ES256") == 0) {
        j->header_alg = TG_JWT_ALG_ES256;
    } else if (strcmp(json_string_value(alg), "EdDSA") == 0) {
        j->header_alg = TG_JWT_ALG_EDDSA;
    } else {
        return TG_JWT_FAIL_ALG_REFUSED;
    }
    /* crit names extensions the receiver must understand (RFC 7515 §4.1.11): we know none. */
    if (json_object_get(h, "crit") != NULL) {
        return TG_JWT_FAIL_HEADER;
    }
    for (size_t i = 0; i < sizeof KEY_FINDING_MEMBERS / sizeof KEY_FINDING_MEMBERS[0]; i++) {
        if (json_object_get(h, KEY_FINDING_MEMBERS[i]) != NULL) {
            return TG_JWT_FAIL_HEADER;
        }
    }
    typ = json_object_get(h, "typ");
    if (typ != NULL && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0)) {
        return TG_JWT_FAIL_HEADER;
    }
    kid = json_object_get(h, "kid");
    if (kid != NULL) {
        if (!json_is_string(kid) || json_string_length(kid) > TG_JWT_KID_MAX) {
            return TG_JWT_FAIL_HEADER;
        }
        j->kid = json_string_value(kid);
        j->kid_len = json_string_length(kid);
    }
    return TG_JWT_FAIL_NONE;
}

/* Types of the registered claims this module reads, so verify only checks values. */
static tg_jwt_fail_t check_claim_types(const json_t *c) {
    const json_t *iss = json_object_get(c, "iss"), *aud = json_object_get(c, "aud");
    static const char *const TIMES[] = {"exp", "nbf", "iat"};
    if (!json_is_object(c) || (iss != NULL && !json_is_string(iss))) {
        return TG_JWT_FAIL_CLAIMS;
    }
    if (aud != NULL && !json_is_string(aud)) {
        if (!json_is_array(aud) || json_array_size(aud) == 0) {
            return TG_JWT_FAIL_CLAIMS;
        }
        for (size_t i = 0; i < json_array_size(aud); i++) {
            if (!json_is_string(json_array_get(aud, i))) {
                return TG_JWT_FAIL_CLAIMS;
            }
        }
    }
    for (size_t i = 0; i < sizeof TIMES / sizeof TIMES[0]; i++) {
        const json_t *t = json_object_get(c, TIMES[i]);
        if (t != NULL && !json_is_number(t)) {
            return TG_JWT_FAIL_CLAIMS;
        }
    }
    return TG_JWT_FAIL_NONE;
}

static bool b64url_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Parses one decoded JSON part; NOMEM stays NOMEM, any other failure is `fail`. */
static tg_err_t parse_part(json_t **out, const uint8_t *text, size_t len,
                           const tg_json_limits_t *lim, tg_jwt_fail_t fail, tg_jwt_fail_t *why) {
    tg_err_t rc = tg_json_parse(out, (const char *)text, len, lim, NULL);
    if (rc == TG_ERR_NOMEM) {
        return rc;
    }
    if (rc) {
        *why = fail;
        return TG_ERR_UNAUTHORIZED;
    }
    return TG_OK;
}

tg_err_t tg_jwt_parse(tg_jwt_t **out, const char *token, size_t len, tg_jwt_fail_t *why) {
    static const tg_json_limits_t HEADER_LIMITS = {TG_JWT_HEADER_MAX, TG_JWT_DEPTH_MAX,
                                                   TG_JWT_HEADER_MAX, TG_JWT_CLAIMS_MAX};
    static const tg_json_limits_t CLAIMS_LIMITS = {TG_JWT_MAX, TG_JWT_DEPTH_MAX, TG_JWT_MAX,
                                                   TG_JWT_CLAIMS_MAX};
    tg_jwt_fail_t local = TG_JWT_FAIL_NONE;
    uint8_t header[TG_JWT_HEADER_MAX];
    uint8_t *payload = NULL;
    size_t dots[2] = {0, 0}, ndots = 0, header_len = 0, payload_len = 0;
    tg_jwt_t *j = NULL;
    tg_err_t rc = TG_OK;
    if (why == NULL) {
        why = &local;
    }
    *why = TG_JWT_FAIL_NONE;
    if (out != NULL) {
        *out = NULL;
    }
    if (out == NULL || (token == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    /* Shape first: bounded, three parts, only the base64url alphabet. */
    for (size_t i = 0; i < len && len <= TG_JWT_MAX; i++) {
        if (token[i] == '.') {
            if (ndots == 2) {
                ndots = 3;
                break;
            }
            dots[ndots++] = i;
        } else if (!b64url_char(token[i])) {
            break;
        }
    }
    j = calloc(1, sizeof *j);
    payload = malloc(TG_JWT_MAX);
    if (j == NULL || payload == NULL) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    *why = TG_JWT_FAIL_FORMAT;
    rc = TG_ERR_UNAUTHORIZED;
    if (len == 0 || len > TG_JWT_MAX || ndots != 2 ||
        !tg_jwt_b64url_decode(header, sizeof header, &header_len, token, dots[0])) {
        goto done;
    }
    *why = TG_JWT_FAIL_NONE;
    TG_TRY(parse_part(&j->header, header, header_len, &HEADER_LIMITS, TG_JWT_FAIL_HEADER, why));
    if ((*why = check_header(j)) != TG_JWT_FAIL_NONE) {
        rc = TG_ERR_UNAUTHORIZED;
        goto done;
    }
    if (!tg_jwt_b64url_decode(payload, TG_JWT_MAX, &payload_len, token + dots[0] + 1,
                              dots[1] - dots[0] - 1) ||
        !tg_jwt_b64url_decode(j->sig, sizeof j->sig, &j->sig_len, token + dots[1] + 1,
                              len - dots[1] - 1) ||
        j->sig_len == 0) {
        *why = TG_JWT_FAIL_FORMAT;
        rc = TG_ERR_UNAUTHORIZED;
        goto done;
    }
    TG_TRY(parse_part(&j->claims, payload, payload_len, &CLAIMS_LIMITS, TG_JWT_FAIL_CLAIMS, why));
    if ((*why = check_claim_types(j->claims)) != TG_JWT_FAIL_NONE) {
        rc = TG_ERR_UNAUTHORIZED;
        goto done;
    }
    j->signed_len = dots[1];
    j->signed_part = malloc(j->signed_len);
    if (j->signed_part == NULL) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    memcpy(j->signed_part, token, j->signed_len);
done:
    free(payload);
    if (rc) {
        if (rc != TG_ERR_UNAUTHORIZED) {
            *why = TG_JWT_FAIL_NONE;
        }
        tg_jwt_free(j);
        return rc;
    }
    *out = j;
    return TG_OK;
}

/* JWS carries an ES256 signature as r || s, 32 bytes each (RFC 7518 §3.4); OpenSSL verifies
 * the DER SEQUENCE of two INTEGERs. This converts, nothing more. */
static tg_err_t es256_to_der(uint8_t *der, size_t cap, size_t *der_len, const uint8_t *raw) {
    BIGNUM *r = BN_bin2bn(raw, ES256_SIG / 2, NULL), *s = BN_bin2bn(raw + 32, ES256_SIG / 2, NULL);
    ECDSA_SIG *sig = ECDSA_SIG_new();
    tg_err_t rc = TG_OK;
    if (r == NULL || s == NULL || sig == NULL) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return TG_ERR_NOMEM;
    }
    if (ECDSA_SIG_set0(sig, r, s) != 1) { /* on success sig owns r and s */
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(sig);
        return TG_ERR_CRYPTO;
    }
    int n = i2d_ECDSA_SIG(sig, NULL);
    if (n <= 0 || (size_t)n > cap) {
        rc = TG_ERR_CRYPTO;
    } else {
        unsigned char *p = der;
        *der_len = (size_t)i2d_ECDSA_SIG(sig, &p);
        if (*der_len != (size_t)n) {
            rc = TG_ERR_CRYPTO;
        }
    }
    ECDSA_SIG_free(sig);
    return rc;
}

static tg_err_t check_signature(const tg_jwk_t *key, const tg_jwt_t *j, tg_jwt_fail_t *why) {
    uint8_t der[80]; /* an ES256 DER signature is at most 72 bytes */
    const uint8_t *sig = j->sig;
    size_t sig_len = j->sig_len;
    const char *md = "SHA256";
    tg_err_t rc = TG_OK;
    switch (key->alg) {
    case TG_JWT_ALG_RS256:
        if (EVP_PKEY_get_size(key->pkey) <= 0 || sig_len != (size_t)EVP_PKEY_get_size(key->pkey)) {
            *why = TG_JWT_FAIL_SIGNATURE;
            return TG_ERR_UNAUTHORIZED;
        }
        break;
    case TG_JWT_ALG_ES256:
        if (sig_len != ES256_SIG) {
            *why = TG_JWT_FAIL_SIGNATURE;
            return TG_ERR_UNAUTHORIZED;
        }
        if ((rc = es256_to_der(der, sizeof der, &sig_len, j->sig)) != TG_OK) {
            return rc;
        }
        sig = der;
        break;
    case TG_JWT_ALG_EDDSA:
        if (sig_len != EDDSA_SIG) {
            *why = TG_JWT_FAIL_SIGNATURE;
            return TG_ERR_UNAUTHORIZED;
        }
        md = NULL; /* Ed25519 is one-shot over the message: no separate digest */
        break;
    default:
        return TG_ERR_INTERNAL;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pctx = NULL;
    if (ctx == NULL) {
        return TG_ERR_NOMEM;
    }
    if (EVP_DigestVerifyInit_ex(ctx, &pctx, md, NULL, NULL, key->pkey, NULL) != 1 ||
        (key->alg == TG_JWT_ALG_RS256 &&
         EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)) {
        rc = TG_ERR_CRYPTO;
    } else if (EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)j->signed_part,
                                j->signed_len) != 1) {
        /* 0 is a bad signature; a negative value is a signature OpenSSL could not even
         * decode (e.g. an RSA value not below the modulus): refused the same way. */
        *why = TG_JWT_FAIL_SIGNATURE;
        rc = TG_ERR_UNAUTHORIZED;
    }
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

/* A NumericDate as whole seconds, clamped to +-2^62 so that adding or subtracting a leeway
 * never overflows; `up` rounds toward the stricter side of the check it serves. */
static int64_t seconds_of(double d, bool up) {
    const double lim = 4611686018427387904.0; /* 2^62 */
    if (d >= lim) {
        return INT64_C(1) << 62;
    }
    if (d <= -lim) {
        return -(INT64_C(1) << 62);
    }
    return (int64_t)(up ? ceil(d) : floor(d));
}

static int64_t clamp62(int64_t v) {
    const int64_t lim = INT64_C(1) << 62;
    return v > lim ? lim : v < -lim ? -lim : v;
}

static tg_jwt_fail_t check_claims(const json_t *c, const tg_jwt_expect_t *e) {
    const json_t *iss = json_object_get(c, "iss"), *aud = json_object_get(c, "aud");
    const json_t *exp = json_object_get(c, "exp"), *nbf = json_object_get(c, "nbf");
    const json_t *iat = json_object_get(c, "iat");
    int64_t now = clamp62(e->now_s);
    if (!json_is_string(iss) || strcmp(json_string_value(iss), e->issuer) != 0) {
        return TG_JWT_FAIL_ISSUER;
    }
    bool aud_ok = false;
    size_t n_aud = json_is_array(aud) ? json_array_size(aud) : 1;
    for (size_t i = 0; i < n_aud && !aud_ok; i++) {
        const json_t *a = json_is_array(aud) ? json_array_get(aud, i) : aud;
        for (size_t k = 0; json_is_string(a) && k < e->n_audience && !aud_ok; k++) {
            aud_ok = strcmp(json_string_value(a), e->audience[k]) == 0;
        }
    }
    if (!aud_ok) {
        return TG_JWT_FAIL_AUDIENCE;
    }
    /* exp rounds down, nbf and iat round up: a fraction never buys a second. */
    if (!json_is_number(exp) || now >= seconds_of(json_number_value(exp), false) + e->leeway_s) {
        return TG_JWT_FAIL_EXPIRED;
    }
    if (nbf != NULL && now < seconds_of(json_number_value(nbf), true) - e->leeway_s) {
        return TG_JWT_FAIL_NOT_YET_VALID;
    }
    if (iat != NULL && now < seconds_of(json_number_value(iat), true) - e->leeway_s) {
        return TG_JWT_FAIL_NOT_YET_VALID;
    }
    return TG_JWT_FAIL_NONE;
}

tg_err_t tg_jwt_verify(tg_jwt_t *j, const tg_jwks_t *keys, const tg_jwt_expect_t *expect,
                       tg_jwt_fail_t *why) {
    tg_jwt_fail_t local = TG_JWT_FAIL_NONE;
    const tg_jwk_t *key;
    if (why == NULL) {
        why = &local;
    }
    *why = TG_JWT_FAIL_NONE;
    if (j == NULL || keys == NULL || expect == NULL || expect->issuer == NULL ||
        expect->audience == NULL || expect->n_audience == 0 || expect->leeway_s < 0 ||
        expect->leeway_s > LEEWAY_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < expect->n_audience; i++) {
        if (expect->audience[i] == NULL) {
            return TG_ERR_INVALID_ARG;
        }
    }
    j->verified = false;
    j->alg = TG_JWT_ALG_NONE;
    if (j->kid != NULL) {
        key = tg_jwks_find(keys, j->kid, j->kid_len);
        if (key == NULL) {
            *why = TG_JWT_FAIL_KID_UNKNOWN;
            return TG_ERR_NOT_FOUND;
        }
    } else if (keys->n == 1) {
        key = &keys->keys[0];
    } else {
        /* Trying every key would let the token pick among them; refreshing will not help. */
        *why = TG_JWT_FAIL_KID_UNKNOWN;
        return TG_ERR_UNAUTHORIZED;
    }
    if (key->alg != j->header_alg) {
        *why = TG_JWT_FAIL_ALG_MISMATCH;
        return TG_ERR_UNAUTHORIZED;
    }
    tg_err_t rc = check_signature(key, j, why);
    if (rc) {
        return rc;
    }
    if ((*why = check_claims(j->claims, expect)) != TG_JWT_FAIL_NONE) {
        return TG_ERR_UNAUTHORIZED;
    }
    j->alg = key->alg;
    j->verified = true;
    return TG_OK;
}
