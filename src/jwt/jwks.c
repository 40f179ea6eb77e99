/* jwks.c — a JSON Web Key Set (RFC 7517) into OpenSSL public keys, one algorithm per key. */
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "jwt_int.h"
#include "trigguard/canon.h"

/* RSA moduli accepted (bits), and the longest exponent: OpenSSL itself refuses exponents over
 * 64 bits for moduli above 3072 bits, and a long one only makes verification slower. */
#define RSA_BITS_MIN 2048
#define RSA_BITS_MAX 8192
#define RSA_N_BYTES_MAX (RSA_BITS_MAX / 8 + 1) /* one leading zero byte is tolerated */
#define RSA_E_BYTES_MAX 8
#define COORD_BYTES 32 /* P-256 coordinates and Ed25519 public keys */

/* Strings in a JWKS: x5c certificates are the longest members a real set carries. */
static const tg_json_limits_t JWKS_LIMITS = {TG_JWKS_MAX, 8, 16384, 64};

bool tg_jwt_b64url_decode(uint8_t *out, size_t bin_maxlen, size_t *out_len, const char *b64,
                          size_t b64_len) {
    /* libsodium's decoder with no ignore set and no end pointer refuses padding, whitespace,
     * any character outside the URL-safe alphabet, a length of 4k+1 and non-zero trailing
     * bits (checked in tests/unit/test_jwt.c), so every input has one decoding. */
    if (b64_len == 0) {
        *out_len = 0;
        return true;
    }
    return sodium_base642bin(out, bin_maxlen, b64, b64_len, NULL, out_len, NULL,
                             sodium_base64_VARIANT_URLSAFE_NO_PADDING) == 0;
}

const tg_jwk_t *tg_jwks_find(const tg_jwks_t *k, const char *kid, size_t len) {
    if (k == NULL || (kid == NULL && len > 0)) {
        return NULL;
    }
    for (size_t i = 0; i < k->n; i++) {
        const tg_jwk_t *e = &k->keys[i];
        if (e->has_kid && e->kid_len == len && memcmp(e->kid, kid, len) == 0) {
            return e;
        }
    }
    return NULL;
}

size_t tg_jwks_count(const tg_jwks_t *k) { return k != NULL ? k->n : 0; }

bool tg_jwks_has_kid(const tg_jwks_t *k, const char *kid, size_t len) {
    return tg_jwks_find(k, kid, len) != NULL;
}

void tg_jwks_free(tg_jwks_t *k) {
    if (k == NULL) {
        return;
    }
    for (size_t i = 0; i < k->n; i++) {
        EVP_PKEY_free(k->keys[i].pkey);
    }
    free(k);
}

/* Decodes member `name` of key i, which must be a base64url string of 1..cap bytes. */
static tg_err_t member_b64(uint8_t *out, size_t cap, size_t *out_len, const json_t *key,
                           const char *name, size_t i, tg_diag_t *diag) {
    const json_t *v = json_object_get(key, name);
    if (!json_is_string(v)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].%s: missing or not a string", i, name);
    }
    if (!tg_jwt_b64url_decode(out, cap, out_len, json_string_value(v), json_string_length(v)) ||
        *out_len == 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "keys[%zu].%s: not base64url (unpadded) of 1..%zu bytes", i, name, cap);
    }
    return TG_OK;
}

/* Builds a provider key of type `type` from params; NULL when OpenSSL refuses it. */
static EVP_PKEY *key_fromdata(const char *type, OSSL_PARAM_BLD *bld, tg_err_t *rc) {
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params == NULL || ctx == NULL) {
        *rc = TG_ERR_NOMEM;
    } else if (EVP_PKEY_fromdata_init(ctx) != 1) {
        *rc = TG_ERR_CRYPTO;
    } else if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        pkey = NULL;
        *rc = TG_ERR_CONFIG;
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static tg_err_t rsa_key(tg_jwk_t *out, const json_t *key, size_t i, tg_diag_t *diag) {
    uint8_t n[RSA_N_BYTES_MAX], e[RSA_E_BYTES_MAX];
    size_t n_len = 0, e_len = 0;
    tg_err_t rc = member_b64(n, sizeof n, &n_len, key, "n", i, diag);
    if (rc == TG_OK) {
        rc = member_b64(e, sizeof e, &e_len, key, "e", i, diag);
    }
    if (rc) {
        return rc;
    }
    BIGNUM *bn = BN_bin2bn(n, (int)n_len, NULL), *be = BN_bin2bn(e, (int)e_len, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bn == NULL || be == NULL || bld == NULL) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    if (BN_num_bits(bn) < RSA_BITS_MIN || BN_num_bits(bn) > RSA_BITS_MAX) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].n: modulus of %d bits (%d..%d allowed)", i,
                         BN_num_bits(bn), RSA_BITS_MIN, RSA_BITS_MAX);
    } else if (!BN_is_odd(be) || BN_num_bits(be) < 2) {
        rc =
            tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].e: exponent must be odd and at least 3", i);
    } else if (OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) != 1 ||
               OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) != 1) {
        rc = TG_ERR_NOMEM;
    } else {
        out->pkey = key_fromdata("RSA", bld, &rc);
        if (rc == TG_ERR_CONFIG) {
            tg_diag_set(diag, rc, "keys[%zu]: OpenSSL refused the RSA public key", i);
        }
    }
done:
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return rc;
}

static tg_err_t ec_key(tg_jwk_t *out, const json_t *key, size_t i, tg_diag_t *diag) {
    /* The uncompressed point 04 || x || y (SEC 1 §2.3.3), each coordinate exactly 32 bytes:
     * RFC 7518 §6.2.1.2 fixes their length, so a shorter or longer one is malformed. */
    uint8_t pub[1 + 2 * COORD_BYTES + 1];
    size_t x_len = 0, y_len = 0;
    pub[0] = 0x04;
    tg_err_t rc = member_b64(pub + 1, COORD_BYTES + 1, &x_len, key, "x", i, diag);
    if (rc == TG_OK) {
        rc = member_b64(pub + 1 + COORD_BYTES, COORD_BYTES + 1, &y_len, key, "y", i, diag);
    }
    if (rc) {
        return rc;
    }
    if (x_len != COORD_BYTES || y_len != COORD_BYTES) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].%s: not 32 bytes", i,
                           x_len != COORD_BYTES ? "x" : "y");
    }
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bld == NULL ||
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) != 1 ||
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, 1 + 2 * COORD_BYTES) !=
            1) {
        OSSL_PARAM_BLD_free(bld);
        return TG_ERR_NOMEM;
    }
    out->pkey = key_fromdata("EC", bld, &rc);
    OSSL_PARAM_BLD_free(bld);
    if (rc == TG_OK) {
        /* fromdata decodes the point; the explicit public check makes "on the curve, not the
         * point at infinity" this module's rule rather than an OpenSSL implementation detail. */
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, out->pkey, NULL);
        if (check == NULL) {
            rc = TG_ERR_NOMEM;
        } else if (EVP_PKEY_public_check(check) != 1) {
            rc = TG_ERR_CONFIG;
        }
        EVP_PKEY_CTX_free(check);
    }
    if (rc == TG_ERR_CONFIG) {
        tg_diag_set(diag, rc, "keys[%zu].x: not on curve P-256", i);
    }
    return rc;
}

static tg_err_t okp_key(tg_jwk_t *out, const json_t *key, size_t i, tg_diag_t *diag) {
    uint8_t x[COORD_BYTES + 1];
    size_t x_len = 0;
    tg_err_t rc = member_b64(x, sizeof x, &x_len, key, "x", i, diag);
    if (rc) {
        return rc;
    }
    if (x_len != COORD_BYTES) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].x: not 32 bytes", i);
    }
    out->pkey = EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, x, COORD_BYTES);
    if (out->pkey == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].x: not an Ed25519 public key", i);
    }
    return TG_OK;
}

static bool str_is(const json_t *v, const char *s) {
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* The algorithm a key of this kty/crv allows, or TG_JWT_ALG_NONE when the key is of a kind
 * this module does not verify with (skipped). A missing or mistyped kty/crv is an error. */
static tg_err_t key_kind(tg_jwt_alg_t *alg, const json_t *key, size_t i, tg_diag_t *diag) {
    const json_t *kty = json_object_get(key, "kty");
    *alg = TG_JWT_ALG_NONE;
    if (!json_is_string(kty)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].kty: missing or not a string", i);
    }
    if (str_is(kty, "RSA")) {
        *alg = TG_JWT_ALG_RS256;
        return TG_OK;
    }
    if (!str_is(kty, "EC") && !str_is(kty, "OKP")) {
        return TG_OK; /* oct and anything else: never a verification key here */
    }
    const json_t *crv = json_object_get(key, "crv");
    if (!json_is_string(crv)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].crv: missing or not a string", i);
    }
    if (str_is(kty, "EC") && str_is(crv, "P-256")) {
        *alg = TG_JWT_ALG_ES256;
    } else if (str_is(kty, "OKP") && str_is(crv, "Ed25519")) {
        *alg = TG_JWT_ALG_EDDSA;
    }
    return TG_OK;
}

/* False when `use` or `key_ops` say the key is not for verifying signatures. */
static tg_err_t key_purpose(bool *for_sig, const json_t *key, size_t i, tg_diag_t *diag) {
    const json_t *use = json_object_get(key, "use"), *ops = json_object_get(key, "key_ops");
    *for_sig = true;
    if (use != NULL) {
        if (!json_is_string(use)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].use: not a string", i);
        }
        *for_sig = str_is(use, "sig");
    }
    if (ops != NULL) {
        if (!json_is_array(ops)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].key_ops: not an array", i);
        }
        bool verify = false;
        for (size_t k = 0; k < json_array_size(ops); k++) {
            const json_t *op = json_array_get(ops, k);
            if (!json_is_string(op)) {
                return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].key_ops[%zu]: not a string", i,
                                   k);
            }
            verify = verify || str_is(op, "verify");
        }
        *for_sig = *for_sig && verify;
    }
    return TG_OK;
}

/* Loads keys[i] into set (when usable) or counts it as skipped. */
static tg_err_t load_key(tg_jwks_t *set, const json_t *key, size_t i, size_t *skipped,
                         tg_diag_t *diag) {
    tg_jwt_alg_t alg;
    bool for_sig;
    tg_err_t rc;
    if (!json_is_object(key)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu]: not an object", i);
    }
    if ((rc = key_kind(&alg, key, i, diag)) != TG_OK ||
        (rc = key_purpose(&for_sig, key, i, diag)) != TG_OK) {
        return rc;
    }
    const json_t *kalg = json_object_get(key, "alg");
    if (kalg != NULL && !json_is_string(kalg)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].alg: not a string", i);
    }
    if (alg != TG_JWT_ALG_NONE && kalg != NULL && !str_is(kalg, tg_jwt_alg_name(alg))) {
        /* One of our algorithms on a key of another type is a broken set; an algorithm we do
         * not implement (RSA-OAEP, PS256, ...) only makes the key unusable here. */
        if (str_is(kalg, "RS256") || str_is(kalg, "ES256") || str_is(kalg, "EdDSA")) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].alg: %s does not fit the key type",
                               i, json_string_value(kalg));
        }
        alg = TG_JWT_ALG_NONE;
    }
    if (alg == TG_JWT_ALG_NONE || !for_sig) {
        (*skipped)++;
        return TG_OK;
    }
    if (json_object_get(key, "d") != NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].d: private key material in a key set",
                           i);
    }
    if (set->n == TG_JWKS_KEYS_MAX) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu]: more than %d usable keys", i,
                           TG_JWKS_KEYS_MAX);
    }
    tg_jwk_t *out = &set->keys[set->n];
    memset(out, 0, sizeof *out);
    const json_t *kid = json_object_get(key, "kid");
    if (kid != NULL) {
        size_t len = json_string_length(kid);
        if (!json_is_string(kid) || len > TG_JWT_KID_MAX) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "keys[%zu].kid: not a string of at most %d bytes", i,
                               TG_JWT_KID_MAX);
        }
        if (tg_jwks_find(set, json_string_value(kid), len) != NULL) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "keys[%zu].kid: used by an earlier key", i);
        }
        memcpy(out->kid, json_string_value(kid), len);
        out->kid_len = len;
        out->has_kid = true;
    }
    out->alg = alg;
    switch (alg) {
    case TG_JWT_ALG_RS256:
        rc = rsa_key(out, key, i, diag);
        break;
    case TG_JWT_ALG_ES256:
        rc = ec_key(out, key, i, diag);
        break;
    default:
        rc = okp_key(out, key, i, diag);
        break;
    }
    if (rc) {
        EVP_PKEY_free(out->pkey);
        memset(out, 0, sizeof *out);
        return rc;
    }
    set->n++;
    return TG_OK;
}

tg_err_t tg_jwks_parse(tg_jwks_t **out, const char *text, size_t len, size_t *skipped,
                       tg_diag_t *diag) {
    size_t skip = 0;
    json_t *root = NULL;
    tg_jwks_t *set = NULL;
    tg_diag_t jd;
    tg_err_t rc;
    if (out != NULL) {
        *out = NULL;
    }
    if (skipped != NULL) {
        *skipped = 0;
    }
    if (out == NULL || (text == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (len > TG_JWKS_MAX) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "JWKS: %zu bytes, more than %zu", len, TG_JWKS_MAX);
    }
    memset(&jd, 0, sizeof jd);
    rc = tg_json_parse(&root, text, len, &JWKS_LIMITS, &jd);
    if (rc == TG_ERR_NOMEM) {
        return rc;
    }
    if (rc) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "JWKS: %s", jd.msg);
    }
    const json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys)) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "JWKS: not an object with a \"keys\" array");
        goto done;
    }
    set = calloc(1, sizeof *set);
    if (set == NULL) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < json_array_size(keys); i++) {
        TG_TRY(load_key(set, json_array_get(keys, i), i, &skip, diag));
    }
    if (set->n == 0) {
        rc = tg_diag_set(diag, TG_ERR_CONFIG, "JWKS: no usable key (%zu skipped)", skip);
        goto done;
    }
done:
    json_decref(root);
    if (rc) {
        tg_jwks_free(set);
        ERR_clear_error(); /* leave no refusal in this thread's OpenSSL error queue */
        return rc;
    }
    if (skipped != NULL) {
        *skipped = skip;
    }
    *out = set;
    return TG_OK;
}
