/* sha256.c — tg_sha256 on nettle (include/trigguard/sha256.h says why nettle). */
#include "trigguard/sha256.h"

/* nettle's digest length must be the one the contract promises. */
_Static_assert(SHA256_DIGEST_SIZE == TG_SHA256_LEN, "SHA-256 digest size");

void tg_sha256_init(tg_sha256_ctx_t *c) { sha256_init(&c->n); }

void tg_sha256_update(tg_sha256_ctx_t *c, const void *data, size_t len) {
    /* A zero-length update changes nothing; skipping it keeps a NULL pointer away from
     * nettle's memcpy. */
    if (len > 0) {
        sha256_update(&c->n, len, data);
    }
}

void tg_sha256_final(tg_sha256_ctx_t *c, uint8_t out[TG_SHA256_LEN]) {
    /* sha256_digest pads, writes the digest and re-initialises the context. */
    sha256_digest(&c->n, TG_SHA256_LEN, out);
}

void tg_sha256(uint8_t out[TG_SHA256_LEN], const void *data, size_t len) {
    tg_sha256_ctx_t c;
    tg_sha256_init(&c);
    tg_sha256_update(&c, data, len);
    tg_sha256_final(&c, out);
}
