/* jwt.h — JSON Web Tokens (RFC 7519, compact JWS of RFC 7515) checked against a JSON Web Key
 * Set (RFC 7517), for callers that authenticate with an OIDC ID token (issue 20).
 *
 * The module owns two formats, the JWKS document and the compact JWT, and nothing else: which
 * issuers are trusted, where their key sets come from and how claims become a principal is
 * the oidc module's business (oidc.h).
 *
 * Signatures are checked with OpenSSL 3's EVP interface (RSA PKCS#1 v1.5 with SHA-256, ECDSA
 * P-256 with SHA-256, Ed25519); this module never computes or compares a signature itself.
 * It only converts formats (base64url, JWK members to OpenSSL keys, a JWS ES256 signature's
 * fixed-width r || s to the DER that OpenSSL verifies).
 *
 * ## Which algorithm
 * The key decides, never the token alone (RFC 8725 §3.1):
 *   kty RSA              RS256 only (and a modulus of 2048..8192 bits, e = 3 or more, odd)
 *   kty EC, crv P-256    ES256 only (the point must be on the curve)
 *   kty OKP, crv Ed25519 EdDSA only
 * A key's own `alg` member, when present, must be that algorithm: naming another of the
 * three (kty RSA with alg ES256) makes the set an error; naming one this module does not
 * implement (RSA-OAEP, PS256, ES384, ...) makes the key unusable (skipped). The token's
 * header `alg` must equal its key's algorithm, else the token is refused
 * (TG_JWT_FAIL_ALG_MISMATCH). `none`, every HMAC (`HS*`) and anything unlisted are refused
 * before any key is looked at (TG_JWT_FAIL_ALG_REFUSED). Keys with `use` other than "sig",
 * or `key_ops` without "verify", are skipped at parse (not usable), as are keys of other
 * types (oct, RSA-OAEP encryption keys, other curves): a JWKS may carry them. An RSA
 * exponent is at most 8 bytes; a usable key carrying private material (`d`) is an error.
 *
 * ## Header
 * `alg` is required (a string, compared case-sensitively); `typ`, when present, is "JWT" in
 * any case; `kid`, when present, a string of at most TG_JWT_KID_MAX bytes. `crit` is refused
 * (no extension is understood), and so are `jku`, `jwk`, `x5u` and `x5c`: the key always
 * comes from the configured set, so a token that names or carries its own key is refused
 * rather than quietly trusted less than it asks (TG_JWT_FAIL_HEADER). Other members (x5t,
 * cty, ...) are ignored.
 *
 * ## Times
 * exp, nbf and iat are JSON numbers (fractions allowed), turned into whole seconds toward
 * the stricter side (exp down, nbf and iat up) and clamped to +-2^62, as is now_s, so no
 * comparison overflows whatever the token says.
 *
 * ## Limits (max accepted; one more is refused)
 *   TG_JWT_MAX            bytes of a compact token
 *   TG_JWT_HEADER_MAX     decoded bytes of the protected header
 *   TG_JWT_CLAIMS_MAX     members of the claims object (any depth counts at the top level
 *                         only; nesting deeper than TG_JWT_DEPTH_MAX is refused)
 *   TG_JWKS_MAX           bytes of a JWKS document
 *   TG_JWKS_KEYS_MAX      usable keys in one set (more is an error, not a truncation)
 *   TG_JWT_KID_MAX        bytes of a kid
 * JSON in a header, claims or JWKS is parsed strictly (duplicate member names, invalid UTF-8
 * and lone surrogates are refused, as everywhere in trigguard: canon.h's parser).
 *
 * ## Thread safety
 * A tg_jwks_t is immutable once parsed: any number of threads may verify against it at once.
 * A tg_jwt_t belongs to one thread.
 */
#ifndef TRIGGUARD_JWT_H
#define TRIGGUARD_JWT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_JWT_MAX 8192
#define TG_JWT_HEADER_MAX 1024
#define TG_JWT_CLAIMS_MAX 64
#define TG_JWT_DEPTH_MAX 4
#define TG_JWKS_MAX ((size_t)256 * 1024)
#define TG_JWKS_KEYS_MAX 32
#define TG_JWT_KID_MAX 128

typedef enum tg_jwt_alg {
    TG_JWT_ALG_NONE = 0, /* not a usable algorithm: the zero value never verifies */
    TG_JWT_ALG_RS256,
    TG_JWT_ALG_ES256,
    TG_JWT_ALG_EDDSA,
} tg_jwt_alg_t;

/* Why a token was refused: one value per check, for logs, metrics and tests. The error
 * channel says only TG_ERR_UNAUTHORIZED (or TG_ERR_NOT_FOUND for an unknown kid); this says
 * which check. Never shown to the caller beyond the check's name. */
typedef enum tg_jwt_fail {
    TG_JWT_FAIL_NONE = 0,
    TG_JWT_FAIL_FORMAT,        /* not three base64url parts, bad base64url, over a limit */
    TG_JWT_FAIL_HEADER,        /* header not a JSON object, crit present, typ not JWT, ... */
    TG_JWT_FAIL_ALG_REFUSED,   /* alg none, HS*, or not RS256/ES256/EdDSA */
    TG_JWT_FAIL_KID_UNKNOWN,   /* no usable key with that kid (or no kid and several keys) */
    TG_JWT_FAIL_ALG_MISMATCH,  /* header alg is not the key's algorithm */
    TG_JWT_FAIL_SIGNATURE,     /* the signature does not verify (or has the wrong length) */
    TG_JWT_FAIL_CLAIMS,        /* claims not a JSON object, over a limit, mistyped iss/aud/... */
    TG_JWT_FAIL_ISSUER,        /* iss absent or not the expected issuer */
    TG_JWT_FAIL_AUDIENCE,      /* aud absent or none of its values is an expected audience */
    TG_JWT_FAIL_EXPIRED,       /* exp absent, or now >= exp + leeway */
    TG_JWT_FAIL_NOT_YET_VALID, /* now < nbf - leeway, or iat more than leeway in the future */
    TG_JWT_FAIL__COUNT
} tg_jwt_fail_t;

/* "format", "header", "alg_refused", "kid_unknown", "alg_mismatch", "signature", "claims",
 * "issuer", "audience", "expired", "not_yet_valid" ("none" for TG_JWT_FAIL_NONE, "?" out of
 * range). Static. */
const char *tg_jwt_fail_name(tg_jwt_fail_t f);

/* "RS256", "ES256", "EdDSA" ("none" otherwise). Static. */
const char *tg_jwt_alg_name(tg_jwt_alg_t a);

/* ---- key sets ---- */

typedef struct tg_jwks tg_jwks_t;

/* Parses a JWKS document {"keys": [...]} (text need not be NUL-terminated, len bytes) into
 * OpenSSL keys. Unusable keys are skipped (see above) and counted in *skipped (may be NULL);
 * a usable key with a malformed member (bad base64url, an off-curve point, a short RSA
 * modulus, an alg that does not fit its kty) is an error naming its index, as are two keys
 * with the same kid, a set with no usable key, and anything over a limit.
 * Errors: TG_ERR_CONFIG (diag says what and where, e.g. "keys[2].x: not on curve P-256"),
 * TG_ERR_NOMEM, TG_ERR_INVALID_ARG, TG_ERR_CRYPTO (OpenSSL could not start building a key).
 * *out NULL on error. Thread-safe (leaves nothing in the calling thread's OpenSSL error
 * queue). */
tg_err_t tg_jwks_parse(tg_jwks_t **out, const char *text, size_t len, size_t *skipped,
                       tg_diag_t *diag) TG_MUST_USE;

/* Frees the set and its keys. NULL-safe. No token verified against it may be in use. */
void tg_jwks_free(tg_jwks_t *k);

/* Number of usable keys (1..TG_JWKS_KEYS_MAX for a parsed set; 0 for NULL). */
size_t tg_jwks_count(const tg_jwks_t *k);

/* True when the set has a usable key whose kid is kid[0..len). For "refresh on unknown kid". */
bool tg_jwks_has_kid(const tg_jwks_t *k, const char *kid, size_t len);

/* ---- tokens ---- */

typedef struct tg_jwt tg_jwt_t;

/* Splits and decodes a compact token (len bytes, need not be NUL-terminated) without
 * trusting anything in it: checks the limits and the shape, parses the header and the
 * claims. Nothing it returns before tg_jwt_verify may be used to decide anything except
 * which issuer's keys to verify against (tg_jwt_unverified_issuer).
 * TG_OK; TG_ERR_UNAUTHORIZED with *why set (FORMAT, HEADER, ALG_REFUSED, CLAIMS);
 * TG_ERR_NOMEM; TG_ERR_INVALID_ARG. *out NULL on error. */
tg_err_t tg_jwt_parse(tg_jwt_t **out, const char *token, size_t len,
                      tg_jwt_fail_t *why) TG_MUST_USE;

void tg_jwt_free(tg_jwt_t *j); /* NULL-safe */

/* The claims' "iss" as sent (NUL-terminated, owned by j), or NULL when absent or not a
 * string. Unverified: only for choosing an issuer's configuration. */
const char *tg_jwt_unverified_issuer(const tg_jwt_t *j);

/* The header's kid (NUL-terminated, owned by j) or NULL. Unverified. */
const char *tg_jwt_kid(const tg_jwt_t *j);

typedef struct tg_jwt_expect {
    const char *issuer;          /* iss must equal it exactly (required) */
    const char *const *audience; /* aud (a string or an array of strings) must contain one */
    size_t n_audience;           /* 1 or more */
    int64_t now_s;               /* seconds since the epoch */
    int64_t leeway_s;            /* clock skew allowed on exp, nbf and iat (0..300) */
} tg_jwt_expect_t;

/* Verifies j's signature against the key of keys named by its kid (a token without a kid is
 * accepted only when keys holds exactly one key), then the registered claims as `expect`
 * says: iss, aud, exp (required, a number), nbf and iat (optional numbers), in that order.
 * TG_OK marks j verified; any other result unmarks it (a second call may take the verdict
 * back). TG_ERR_NOT_FOUND: no key with that kid (why = KID_UNKNOWN; the caller may refresh
 * the set and call again). A token without a kid against several keys is
 * TG_ERR_UNAUTHORIZED with KID_UNKNOWN (a refresh would not help, and trying each key would
 * let the token choose). TG_ERR_UNAUTHORIZED with *why for every other refusal (why may be
 * NULL).
 * TG_ERR_INVALID_ARG (NULLs, expect without issuer or audience, leeway out of range),
 * TG_ERR_CRYPTO (OpenSSL failed to run, not a bad signature), TG_ERR_NOMEM.
 * Thread-safe with respect to keys. */
tg_err_t tg_jwt_verify(tg_jwt_t *j, const tg_jwks_t *keys, const tg_jwt_expect_t *expect,
                       tg_jwt_fail_t *why) TG_MUST_USE;

/* The claims object, owned by j, once tg_jwt_verify returned TG_OK for it; NULL before. */
const json_t *tg_jwt_claims(const tg_jwt_t *j);

/* The algorithm of the key that verified j (TG_JWT_ALG_NONE before). */
tg_jwt_alg_t tg_jwt_alg(const tg_jwt_t *j);

#endif /* TRIGGUARD_JWT_H */
