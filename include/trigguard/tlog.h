/* tlog.h — the Merkle tree of the transparency log (SPEC §12): the owner of its format.
 *
 * Hashing (RFC 6962 §2.1, RFC 9162 §2.1.1), SHA-256 throughout:
 *   leaf hash  = SHA-256(0x00 ‖ entry)
 *   node hash  = SHA-256(0x01 ‖ left ‖ right)
 *   MTH({})    = SHA-256("")                      (the empty tree)
 *   MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n]))   k = the largest power of two < n
 *
 * Stored hashes are named as tiles name them (C2SP tlog-tiles): the hash at level L, index N
 * is MTH of the leaves [N·2^L, (N+1)·2^L), a complete (perfect) subtree; level 0 holds the
 * leaf hashes. A log that keeps every such hash once it is complete (tg_tlog_range_append
 * reports each one as it completes) can answer every root and proof below from them: the
 * generators read them through a tg_tlog_reader_t, so the daemon may keep them in tiles, in
 * memory or in a database without this module knowing.
 *
 * Proofs (RFC 9162 §2.1.3 and §2.1.4) are arrays of at most TG_TLOG_MAX_PROOF hashes,
 * ordered as the RFC's PATH and PROOF lists (the sibling nearest the leaf first). The
 * verifiers are the RFC's algorithms; where the RFC leaves an edge open they follow the
 * transparency-dev vectors (tests/vectors/tlog/README.md): a leaf index ≥ the tree size,
 * any consistency proof from size 0 (even 0 → 0: trust the newer checkpoint's signature
 * instead), equal sizes with a non-empty proof or different roots, and an empty proof
 * between different sizes are all rejected. Hashes are always 32 bytes (the type says so).
 *
 * Tiles (C2SP tlog-tiles): height 8, so a full tile holds 256 hashes (8,192 bytes) and a
 * partial one 1..255; paths `tile/<L>/<N>[.p/<W>]` and `tile/entries/<N>[.p/<W>]`, L in
 * 0..63 decimal without leading zeros, N in 3-digit groups all but the last prefixed `x`
 * (1234067 → x001/x234/067), W in 1..255 only for a partial tile (a full one has no
 * suffix). The parser accepts exactly the paths the formatter writes.
 *
 * Errors: TG_ERR_TLOG_PROOF (a proof does not verify, whatever the reason: sizes, index,
 * length, hashes), TG_ERR_TLOG_PATH (not a canonical tile path), TG_ERR_INVALID_ARG (a
 * generator asked for a leaf or size outside the tree), TG_ERR_LIMIT (a proof would exceed
 * TG_TLOG_MAX_PROOF, a range is full), TG_ERR_BUFFER_TOO_SMALL, or whatever a reader
 * returns (passed on unchanged).
 *
 * Pure: no I/O, no allocation, no global state; every function is reentrant and
 * thread-safe for distinct outputs. Sizes are uint64_t and never overflow (checked).
 * All SHA-256 goes through one internal helper (src/tlog/hash.c).
 */
#ifndef TRIGGUARD_TLOG_H
#define TRIGGUARD_TLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_TLOG_HASH_LEN 32
/* A tree of up to 2^63 leaves needs at most 63 proof hashes; longer proofs are refused. */
#define TG_TLOG_MAX_PROOF 63
/* One frontier hash per set bit of a uint64_t size. */
#define TG_TLOG_RANGE_MAX 64
/* Tree levels a tree of up to 2^64 - 1 leaves has hashes at: 0 (the leaves) to 63. */
#define TG_TLOG_LEVELS 64

typedef struct tg_tlog_hash {
    uint8_t h[TG_TLOG_HASH_LEN];
} tg_tlog_hash_t;

/* ---- hashing -------------------------------------------------------------------------- */

/* SHA-256(0x00 ‖ entry); entry may be NULL when len is 0. */
void tg_tlog_leaf_hash(tg_tlog_hash_t *out, const void *entry, size_t len);
/* SHA-256(0x01 ‖ left ‖ right). out may alias left or right. */
void tg_tlog_node_hash(tg_tlog_hash_t *out, const tg_tlog_hash_t *left,
                       const tg_tlog_hash_t *right);
/* The root of the empty tree, SHA-256(""). */
void tg_tlog_empty_root(tg_tlog_hash_t *out);
/* The root of the tree whose leaf hashes are leaves[0..n). O(n) hashing, no allocation
 * (a tg_tlog_range_t on the stack). leaves may be NULL when n is 0. */
void tg_tlog_root(tg_tlog_hash_t *out, const tg_tlog_hash_t *leaves, uint64_t n);

/* ---- the compact tree: append leaves one at a time ------------------------------------ */

/* The frontier of a tree of `size` leaves: one complete subtree per set bit of size,
 * largest (leftmost) first; nodes[i] is the hash at level levels[i]. About 2 KiB, plain
 * data: copy it, keep it on the stack, store it. */
typedef struct tg_tlog_range {
    uint64_t size;
    unsigned count;
    tg_tlog_hash_t nodes[TG_TLOG_RANGE_MAX];
} tg_tlog_range_t;

/* Called by tg_tlog_range_append for every stored hash that becomes complete, lowest level
 * first: the new leaf hash (level 0, index = its leaf index), then each node the append
 * completes. This is exactly the set of hashes tiles hold. Returning non-zero stops the
 * append before the range changes (the range stays as it was). */
typedef tg_err_t (*tg_tlog_store_fn)(void *ctx, unsigned level, uint64_t index,
                                     const tg_tlog_hash_t *hash);

void tg_tlog_range_init(tg_tlog_range_t *r);
/* Appends one leaf hash. store may be NULL. TG_ERR_LIMIT when size is UINT64_MAX, or the
 * store callback's error; either way r is unchanged. */
tg_err_t tg_tlog_range_append(tg_tlog_range_t *r, const tg_tlog_hash_t *leaf,
                              tg_tlog_store_fn store, void *ctx) TG_MUST_USE;
/* The root of the range's tree (the empty root for size 0). */
void tg_tlog_range_root(const tg_tlog_range_t *r, tg_tlog_hash_t *out);

/* ---- proof generation from stored hashes ---------------------------------------------- */

/* Reads the stored hash at (level, index): MTH of leaves [index·2^level, (index+1)·2^level).
 * The generators only ask for complete subtrees of the tree they were given (never past
 * its size). Any non-zero return is passed on to the generator's caller. */
typedef tg_err_t (*tg_tlog_read_fn)(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out);
typedef struct tg_tlog_reader {
    tg_tlog_read_fn read;
    void *ctx;
} tg_tlog_reader_t;

/* MTH of the leaves [lo, hi) of a tree (0 ≤ lo < hi), from at most 2·64 stored hashes.
 * For lo = 0 and hi = the tree size, that is the tree's root. */
tg_err_t tg_tlog_subtree_hash(tg_tlog_hash_t *out, const tg_tlog_reader_t *rd, uint64_t lo,
                              uint64_t hi) TG_MUST_USE;

/* PATH(index, D[size]) (RFC 9162 §2.1.3.1) into proof[0..*len). TG_ERR_INVALID_ARG unless
 * index < size. */
tg_err_t tg_tlog_inclusion_proof(tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *len,
                                 const tg_tlog_reader_t *rd, uint64_t index,
                                 uint64_t size) TG_MUST_USE;

/* PROOF(old, D[size]) (RFC 9162 §2.1.4.1) into proof[0..*len). TG_ERR_INVALID_ARG unless
 * 0 < old ≤ size (old = size gives the empty proof). */
tg_err_t tg_tlog_consistency_proof(tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *len,
                                   const tg_tlog_reader_t *rd, uint64_t old,
                                   uint64_t size) TG_MUST_USE;

/* ---- proof verification (RFC 9162 §2.1.3.2, §2.1.4.2) ---------------------------------- */

/* TG_OK if proof[0..len) proves that leaf is leaf `index` of the tree of `size` leaves
 * whose root is root; TG_ERR_TLOG_PROOF otherwise (including index ≥ size and
 * len > TG_TLOG_MAX_PROOF). proof may be NULL when len is 0. */
tg_err_t tg_tlog_verify_inclusion(const tg_tlog_hash_t *leaf, uint64_t index, uint64_t size,
                                  const tg_tlog_hash_t *proof, size_t len,
                                  const tg_tlog_hash_t *root) TG_MUST_USE;

/* TG_OK if proof[0..len) proves the tree (size1, root1) is a prefix of (size2, root2);
 * TG_ERR_TLOG_PROOF otherwise (size1 = 0, size1 > size2, see the top of this file). */
tg_err_t tg_tlog_verify_consistency(uint64_t size1, uint64_t size2, const tg_tlog_hash_t *proof,
                                    size_t len, const tg_tlog_hash_t *root1,
                                    const tg_tlog_hash_t *root2) TG_MUST_USE;

/* ---- tiles (C2SP tlog-tiles) ----------------------------------------------------------- */

#define TG_TLOG_TILE_HEIGHT 8
#define TG_TLOG_TILE_WIDTH 256 /* hashes (or entries) in a full tile */
#define TG_TLOG_TILE_MAX_LEVEL 63
/* "tile/entries/" + 7 groups of 4 ("x018/") - 1 + ".p/255" + NUL, rounded up. */
#define TG_TLOG_TILE_PATH_MAX 64

typedef struct tg_tlog_tile {
    bool entries;   /* tile/entries/...: a bundle of entries (level is then 0) */
    unsigned level; /* 0..63 */
    uint64_t index; /* N */
    unsigned width; /* 1..256; 256 = full (no .p suffix) */
} tg_tlog_tile_t;

/* The path of t into out (NUL-terminated), *len = its length (len may be NULL).
 * TG_ERR_INVALID_ARG for a level or width out of range (or entries with level ≠ 0). */
tg_err_t tg_tlog_tile_path(char out[TG_TLOG_TILE_PATH_MAX], size_t *len,
                           const tg_tlog_tile_t *t) TG_MUST_USE;
/* Parses exactly what tg_tlog_tile_path writes (n bytes, no NUL needed); TG_ERR_TLOG_PATH
 * for anything else (leading zeros in L or W, .p/256, .p/0, groups not 3 digits, a missing
 * or extra x, a redundant leading x000 group, N beyond uint64_t). */
tg_err_t tg_tlog_tile_parse(tg_tlog_tile_t *t, const char *path, size_t n) TG_MUST_USE;

/* The tile of a tree of `size` leaves at (level, index): width = the hashes of that level
 * it holds (256 unless it is the level's last, partial tile). TG_ERR_NOT_FOUND if the tree
 * has no hash there yet; TG_ERR_INVALID_ARG for level > 63. With entries, the entry bundle
 * of level-0 tile `index`. */
tg_err_t tg_tlog_tile_for_size(tg_tlog_tile_t *t, bool entries, unsigned level, uint64_t index,
                               uint64_t size) TG_MUST_USE;

/* Note on levels: tile level L holds the stored hashes of tree level 8·L; hash (8·L, i) is
 * entry i % 256 of tile (L, i / 256). The tree levels between are not stored in tiles
 * (a tile-backed reader recomputes one from the tile's lowest row: at most 127 node
 * hashes per read). */

#endif /* TRIGGUARD_TLOG_H */
