/* fuzz_tlog_proof.c — the Merkle proof verifiers on fuzzed sizes, indices and hashes, and
 * the tile path parser: never a crash, never a read past the proof.
 *
 * Input: a (8 bytes, big-endian), b (8 bytes), mode (1 byte), then 32-byte hashes h1, h2
 * and the proof (as many whole hashes as follow; more than TG_TLOG_MAX_PROOF are passed on,
 * to test the bound). mode & 3: 0 inclusion (leaf h1, index a, size b, root h2),
 * 1 consistency (size1 a, size2 b, roots h1 h2), 2 the same two against a real tree of
 * up to 64 leaves (sizes and index reduced into it, real roots): a proof that verifies
 * there must be the generated one (anything else is a second preimage of SHA-256),
 * 3 the bytes after mode are a tile path: what parses formats back to exactly them. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/tlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REAL 64
static tg_tlog_hash_t leaves[REAL];
static tg_tlog_hash_t stored[7][REAL];
static tg_tlog_hash_t roots[REAL + 1];
static int ready;

static tg_err_t put(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    (void)ctx;
    stored[level][index] = *h;
    return TG_OK;
}

static tg_err_t get(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    (void)ctx;
    *out = stored[level][index];
    return TG_OK;
}

static void init(void) {
    tg_tlog_range_t r;
    tg_tlog_range_init(&r);
    tg_tlog_range_root(&r, &roots[0]);
    for (unsigned i = 0; i < REAL; i++) {
        uint8_t e = (uint8_t)i;
        tg_tlog_leaf_hash(&leaves[i], &e, 1);
        if (tg_tlog_range_append(&r, &leaves[i], put, NULL) != TG_OK) {
            abort();
        }
        tg_tlog_range_root(&r, &roots[i + 1]);
    }
    ready = 1;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) {
        init();
    }
    if (size < 17) {
        return 0;
    }
    uint64_t a = be64(data);
    uint64_t b = be64(data + 8);
    unsigned mode = data[16] & 3u;
    if (mode == 3) {
        tg_tlog_tile_t t;
        const char *path = (const char *)data + 17;
        size_t n = size - 17;
        if (tg_tlog_tile_parse(&t, path, n) == TG_OK) {
            char out[TG_TLOG_TILE_PATH_MAX];
            size_t len = 0;
            if (tg_tlog_tile_path(out, &len, &t) != TG_OK || len != n ||
                memcmp(out, path, n) != 0) {
                abort();
            }
        }
        return 0;
    }
    if (size < 17 + 64) {
        return 0;
    }
    /* copy the hashes into exactly-sized memory, so ASan sees any read past the proof */
    size_t len = (size - 17 - 64) / 32;
    tg_tlog_hash_t h1, h2;
    tg_tlog_hash_t *proof = len > 0 ? malloc(len * sizeof *proof) : NULL;
    memcpy(h1.h, data + 17, 32);
    memcpy(h2.h, data + 49, 32);
    for (size_t i = 0; i < len; i++) {
        memcpy(proof[i].h, data + 81 + 32 * i, 32);
    }
    if (mode == 0) {
        TG_IGNORE(tg_tlog_verify_inclusion(&h1, a, b, proof, len, &h2));
    } else if (mode == 1) {
        TG_IGNORE(tg_tlog_verify_consistency(a, b, proof, len, &h1, &h2));
    } else {
        const tg_tlog_reader_t rd = {get, NULL};
        tg_tlog_hash_t gen[TG_TLOG_MAX_PROOF];
        size_t gn = 0;
        uint64_t n = b % (REAL + 1);
        uint64_t i = n > 0 ? a % n : 0;
        if (tg_tlog_verify_inclusion(&leaves[i], i, n, proof, len, &roots[n]) == TG_OK &&
            (tg_tlog_inclusion_proof(gen, &gn, &rd, i, n) != TG_OK || gn != len ||
             (len > 0 && memcmp(gen, proof, len * sizeof *proof) != 0))) {
            abort();
        }
        uint64_t m = n > 0 ? a % (n + 1) : 0;
        if (tg_tlog_verify_consistency(m, n, proof, len, &roots[m], &roots[n]) == TG_OK &&
            (tg_tlog_consistency_proof(gen, &gn, &rd, m, n) != TG_OK || gn != len ||
             (len > 0 && memcmp(gen, proof, len * sizeof *proof) != 0))) {
            abort();
        }
    }
    free(proof);
    return 0;
}
