/* jwt_int.h — what jwks.c and jwt.c share: the key set's layout and strict base64url. */
#ifndef TRIGGUARD_JWT_INT_H
#define TRIGGUARD_JWT_INT_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/jwt.h"

/* One usable key: the algorithm it allows is fixed by its type at parse. */
typedef struct tg_jwk {
    EVP_PKEY *pkey;
    tg_jwt_alg_t alg;
    bool has_kid;
    size_t kid_len;
    char kid[TG_JWT_KID_MAX + 1];
} tg_jwk_t;

struct tg_jwks {
    size_t n;
    tg_jwk_t keys[TG_JWKS_KEYS_MAX];
};

/* Strict base64url (RFC 7515 §2: no padding, no whitespace, only A-Z a-z 0-9 - _, zero
 * trailing bits) of b64[0..b64_len) into out (bin_maxlen bytes; the names are libsodium's).
 * False on any of those or when the result does not fit; *out_len is then unspecified. */
bool tg_jwt_b64url_decode(uint8_t *out, size_t bin_maxlen, size_t *out_len, const char *b64,
                          size_t b64_len);

/* The usable key named kid[0..len), or NULL. */
const tg_jwk_t *tg_jwks_find(const tg_jwks_t *k, const char *kid, size_t len);

#endif /* TRIGGUARD_JWT_INT_H */
