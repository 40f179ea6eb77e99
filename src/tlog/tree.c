/* tree.c — RFC 6962/9162 Merkle tree hashing, the compact range, proof generation from
 * stored hashes, and the RFC 9162 §2.1.3.2 / §2.1.4.2 verifiers. */
#include <string.h>

#include "tlog_int.h"
#include "trigguard/tlog.h"

void tg_tlog_leaf_hash(tg_tlog_hash_t *out, const void *entry, size_t len) {
    static const uint8_t prefix = 0x00;
    tlog_part_t parts[2] = {{&prefix, 1}, {entry, len}};
    tlog_sha256(out->h, parts, 2);
}

void tg_tlog_node_hash(tg_tlog_hash_t *out, const tg_tlog_hash_t *left,
                       const tg_tlog_hash_t *right) {
    static const uint8_t prefix = 0x01;
    tlog_part_t parts[3] = {{&prefix, 1}, {left->h, 32}, {right->h, 32}};
    uint8_t h[32];
    /* through h, so out may be left or right */
    tlog_sha256(h, parts, 3);
    memcpy(out->h, h, sizeof h);
}

void tg_tlog_empty_root(tg_tlog_hash_t *out) { tlog_sha256(out->h, NULL, 0); }

/* Hash comparison: every hash here is public, so a plain comparison is fine. */
static int hash_eq(const tg_tlog_hash_t *a, const tg_tlog_hash_t *b) {
    return memcmp(a->h, b->h, TG_TLOG_HASH_LEN) == 0;
}

/* floor(log2(x)) for x > 0. */
static unsigned log2_floor(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

/* The largest power of two strictly below n, for n ≥ 2: RFC 6962's split point k. */
static uint64_t split_point(uint64_t n) { return UINT64_C(1) << log2_floor(n - 1); }

/* ---- the compact range ------------------------------------------------------------------ */

void tg_tlog_range_init(tg_tlog_range_t *r) { memset(r, 0, sizeof *r); }

tg_err_t tg_tlog_range_append(tg_tlog_range_t *r, const tg_tlog_hash_t *leaf,
                              tg_tlog_store_fn store, void *ctx) {
    if (r->size == UINT64_MAX) {
        return TG_ERR_LIMIT;
    }
    /* The new leaf merges with one frontier node per trailing one bit of the old size. The
     * merged hash is built aside and the range only changes at the end, so a store
     * callback's error leaves the range as it was. */
    tg_tlog_hash_t h = *leaf;
    uint64_t s = r->size;
    unsigned count = r->count;
    unsigned level = 0;
    if (store != NULL) {
        tg_err_t rc = store(ctx, 0, r->size, &h);
        if (rc != TG_OK) {
            return rc;
        }
    }
    while (s & 1u) {
        count--;
        tg_tlog_node_hash(&h, &r->nodes[count], &h);
        level++;
        s >>= 1;
        if (store != NULL) {
            /* the completed node covers [s·2^level, (s+1)·2^level): the new size's prefix */
            tg_err_t rc = store(ctx, level, s, &h);
            if (rc != TG_OK) {
                return rc;
            }
        }
    }
    r->nodes[count] = h;
    r->count = count + 1;
    r->size++;
    return TG_OK;
}

void tg_tlog_range_root(const tg_tlog_range_t *r, tg_tlog_hash_t *out) {
    if (r->count == 0) {
        tg_tlog_empty_root(out);
        return;
    }
    /* MTH folds from the right: the smallest subtree pairs with its left neighbour first */
    tg_tlog_hash_t h = r->nodes[r->count - 1];
    for (unsigned i = r->count - 1; i > 0; i--) {
        tg_tlog_node_hash(&h, &r->nodes[i - 1], &h);
    }
    *out = h;
}

void tg_tlog_root(tg_tlog_hash_t *out, const tg_tlog_hash_t *leaves, uint64_t n) {
    tg_tlog_range_t r;
    tg_tlog_range_init(&r);
    for (uint64_t i = 0; i < n; i++) {
        /* n leaves in memory cannot reach UINT64_MAX, the only error without a store */
        TG_IGNORE(tg_tlog_range_append(&r, &leaves[i], NULL, NULL));
    }
    tg_tlog_range_root(&r, out);
}

/* ---- generation from stored hashes ------------------------------------------------------- */

tg_err_t tg_tlog_subtree_hash(tg_tlog_hash_t *out, const tg_tlog_reader_t *rd, uint64_t lo,
                              uint64_t hi) {
    if (rd == NULL || rd->read == NULL || lo >= hi) {
        return TG_ERR_INVALID_ARG;
    }
    uint64_t n = hi - lo;
    /* A subtree of a Merkle tree starts at a multiple of a power of two at least its size;
     * only then is its MTH the right fold of the complete subtrees its size's bits name. */
    if (lo != 0 && n > (lo & (~lo + 1))) { /* lo & -lo: the largest power of two dividing lo */
        return TG_ERR_INVALID_ARG;
    }
    tg_tlog_hash_t parts[TG_TLOG_RANGE_MAX];
    unsigned np = 0;
    uint64_t at = lo;
    for (int bit = 63; bit >= 0; bit--) {
        if ((n >> bit) & 1u) {
            tg_err_t rc = rd->read(rd->ctx, (unsigned)bit, at >> bit, &parts[np]);
            if (rc != TG_OK) {
                return rc;
            }
            np++;
            at += UINT64_C(1) << bit;
        }
    }
    tg_tlog_hash_t h = parts[np - 1];
    for (unsigned i = np - 1; i > 0; i--) {
        tg_tlog_node_hash(&h, &parts[i - 1], &h);
    }
    *out = h;
    return TG_OK;
}

static void reverse_into(tg_tlog_hash_t *proof, const tg_tlog_hash_t *tmp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        proof[i] = tmp[n - 1 - i];
    }
}

tg_err_t tg_tlog_inclusion_proof(tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *len,
                                 const tg_tlog_reader_t *rd, uint64_t index, uint64_t size) {
    *len = 0;
    if (index >= size) {
        return TG_ERR_INVALID_ARG;
    }
    /* RFC 9162 PATH(m, D[n]) unrolled top-down: each split contributes the MTH of the half
     * not holding the leaf; the RFC lists them bottom-up, hence the reversal. */
    tg_tlog_hash_t tmp[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    uint64_t lo = 0;
    uint64_t hi = size;
    while (hi - lo > 1) {
        uint64_t k = split_point(hi - lo);
        if (n == TG_TLOG_MAX_PROOF) {
            return TG_ERR_LIMIT;
        }
        tg_err_t rc;
        if (index < lo + k) {
            rc = tg_tlog_subtree_hash(&tmp[n], rd, lo + k, hi);
            hi = lo + k;
        } else {
            rc = tg_tlog_subtree_hash(&tmp[n], rd, lo, lo + k);
            lo += k;
        }
        if (rc != TG_OK) {
            return rc;
        }
        n++;
    }
    reverse_into(proof, tmp, n);
    *len = n;
    return TG_OK;
}

tg_err_t tg_tlog_consistency_proof(tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *len,
                                   const tg_tlog_reader_t *rd, uint64_t old, uint64_t size) {
    *len = 0;
    if (old == 0 || old > size) {
        return TG_ERR_INVALID_ARG;
    }
    /* RFC 9162 SUBPROOF(m, D[n], b) unrolled top-down, reversed at the end like PATH. */
    tg_tlog_hash_t tmp[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    uint64_t m = old;
    uint64_t lo = 0;
    uint64_t hi = size;
    int b = 1; /* still on the old tree's own right edge: its root is known to the verifier */
    for (;;) {
        tg_err_t rc = TG_OK;
        if (m == hi - lo) {
            if (!b) {
                if (n == TG_TLOG_MAX_PROOF) {
                    return TG_ERR_LIMIT;
                }
                rc = tg_tlog_subtree_hash(&tmp[n++], rd, lo, hi);
            }
            if (rc != TG_OK) {
                return rc;
            }
            break;
        }
        if (n == TG_TLOG_MAX_PROOF) {
            return TG_ERR_LIMIT;
        }
        uint64_t k = split_point(hi - lo);
        if (m <= k) {
            rc = tg_tlog_subtree_hash(&tmp[n], rd, lo + k, hi);
            hi = lo + k;
        } else {
            rc = tg_tlog_subtree_hash(&tmp[n], rd, lo, lo + k);
            m -= k;
            lo += k;
            b = 0;
        }
        if (rc != TG_OK) {
            return rc;
        }
        n++;
    }
    reverse_into(proof, tmp, n);
    *len = n;
    return TG_OK;
}

/* ---- verification -------------------------------------------------------------------------- */

tg_err_t tg_tlog_verify_inclusion(const tg_tlog_hash_t *leaf, uint64_t index, uint64_t size,
                                  const tg_tlog_hash_t *proof, size_t len,
                                  const tg_tlog_hash_t *root) {
    /* RFC 9162 §2.1.3.2, step by step. */
    if (index >= size || len > TG_TLOG_MAX_PROOF || (len > 0 && proof == NULL)) {
        return TG_ERR_TLOG_PROOF;
    }
    uint64_t fn = index;
    uint64_t sn = size - 1;
    tg_tlog_hash_t r = *leaf;
    for (size_t i = 0; i < len; i++) {
        if (sn == 0) {
            return TG_ERR_TLOG_PROOF; /* more hashes than the path has levels */
        }
        if ((fn & 1u) || fn == sn) {
            tg_tlog_node_hash(&r, &proof[i], &r);
            /* a right-edge node with no sibling at these levels: climb past them */
            while (!(fn & 1u) && fn != 0) {
                fn >>= 1;
                sn >>= 1;
            }
        } else {
            tg_tlog_node_hash(&r, &r, &proof[i]);
        }
        fn >>= 1;
        sn >>= 1;
    }
    return sn == 0 && hash_eq(&r, root) ? TG_OK : TG_ERR_TLOG_PROOF;
}

tg_err_t tg_tlog_verify_consistency(uint64_t size1, uint64_t size2, const tg_tlog_hash_t *proof,
                                    size_t len, const tg_tlog_hash_t *root1,
                                    const tg_tlog_hash_t *root2) {
    /* The edges RFC 9162 leaves open, settled as the transparency-dev vectors do: from
     * size 0 is meaningless (even to size 0), a shrinking tree is never consistent, equal
     * sizes need an empty proof and equal roots, different sizes a non-empty proof. */
    if (size1 == 0 || size1 > size2 || len > TG_TLOG_MAX_PROOF || (len > 0 && proof == NULL)) {
        return TG_ERR_TLOG_PROOF;
    }
    if (size1 == size2) {
        return len == 0 && hash_eq(root1, root2) ? TG_OK : TG_ERR_TLOG_PROOF;
    }
    if (len == 0) {
        return TG_ERR_TLOG_PROOF;
    }
    /* RFC 9162 §2.1.4.2. Step 2 prepends first_hash when size1 is a power of two; the
     * index i plays that role instead of copying the proof. */
    size_t i = 0;
    tg_tlog_hash_t start;
    if ((size1 & (size1 - 1)) == 0) {
        start = *root1;
    } else {
        start = proof[i++];
    }
    uint64_t fn = size1 - 1;
    uint64_t sn = size2 - 1;
    while (fn & 1u) {
        fn >>= 1;
        sn >>= 1;
    }
    tg_tlog_hash_t fr = start;
    tg_tlog_hash_t sr = start;
    for (; i < len; i++) {
        const tg_tlog_hash_t *c = &proof[i];
        if (sn == 0) {
            return TG_ERR_TLOG_PROOF;
        }
        if ((fn & 1u) || fn == sn) {
            tg_tlog_node_hash(&fr, c, &fr);
            tg_tlog_node_hash(&sr, c, &sr);
            while (!(fn & 1u) && fn != 0) {
                fn >>= 1;
                sn >>= 1;
            }
        } else {
            tg_tlog_node_hash(&sr, &sr, c);
        }
        fn >>= 1;
        sn >>= 1;
    }
    return sn == 0 && hash_eq(&fr, root1) && hash_eq(&sr, root2) ? TG_OK : TG_ERR_TLOG_PROOF;
}
