/* sha256.h — the one SHA-256 of trigguard: request hashes, receipt hashes, ledger records
 * and heads, transparency-log leaves and nodes, limit keys, key ids.
 *
 * Why nettle and not libsodium: libsodium's SHA-256 is portable C (about 8.6 µs for the
 * 2,545 bytes one signed request hashes, issue 25); nettle, as Debian builds it ("fat"),
 * picks the CPU's SHA extensions (SHA-NI) at run time, about 2.0 µs for the same bytes, and
 * falls back to its own C code elsewhere. Both compute FIPS 180-4 SHA-256, so every digest
 * (and every stored or signed byte derived from one) is the same; tests/unit/test_sha256.c
 * checks that against the NIST vectors and against libsodium. libsodium keeps everything
 * else (Ed25519 signatures, random bytes, base64, constant-time compares).
 *
 * Ownership: the caller owns every buffer and the context (usually on its stack); nothing is
 * allocated, nothing can fail. A context is a plain value: copying one (struct assignment)
 * forks the hash, e.g. to read a digest of a prefix and keep going.
 * Thread safety: every function is reentrant; a context belongs to one thread at a time.
 * Inputs: `data` may be NULL when `len` is 0.
 */
#ifndef TRIGGUARD_SHA256_H
#define TRIGGUARD_SHA256_H

#include <nettle/sha2.h>
#include <stddef.h>
#include <stdint.h>

#define TG_SHA256_LEN 32

/* An incremental SHA-256. Its fields are nettle's and private to src/core/sha256.c. */
typedef struct tg_sha256_ctx {
    struct sha256_ctx n;
} tg_sha256_ctx_t;

/* out = SHA-256(data[0..len)). */
void tg_sha256(uint8_t out[TG_SHA256_LEN], const void *data, size_t len);

/* Starts (or restarts) an empty hash. */
void tg_sha256_init(tg_sha256_ctx_t *c);

/* Appends len bytes to the hashed message. */
void tg_sha256_update(tg_sha256_ctx_t *c, const void *data, size_t len);

/* Writes the digest of everything appended since init into out, then leaves the context
 * initialised again (empty), ready for another message. */
void tg_sha256_final(tg_sha256_ctx_t *c, uint8_t out[TG_SHA256_LEN]);

#endif
