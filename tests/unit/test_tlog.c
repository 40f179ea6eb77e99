/* test_tlog.c — the Merkle tree of tlog.h: RFC 6962 roots, every transparency-dev inclusion
 * and consistency vector, generator against verifier for every tree up to 300 leaves with
 * mutations, the compact range's stored hashes, and C2SP tile paths.
 *
 * Vectors are read from tests/vectors/tlog (TG_TLOG_VECTORS, set by tests/unit/CMakeLists.txt
 * to the source tree's copy; README.md there says where they come from). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/read.h"
#include "trigguard/canon.h"
#include "trigguard/tlog.h"

#ifndef TG_TLOG_VECTORS
#error "TG_TLOG_VECTORS must name tests/vectors/tlog"
#endif

#define MAXN 300

/* ---- an independent oracle and an in-memory hash store -------------------------------- */

/* MTH by the RFC's recursive definition, straight from the leaf hashes. */
static void mth(tg_tlog_hash_t *out, const tg_tlog_hash_t *leaves, uint64_t n) {
    if (n == 0) {
        tg_tlog_empty_root(out);
        return;
    }
    if (n == 1) {
        *out = leaves[0];
        return;
    }
    uint64_t k = 1;
    while (k * 2 < n) {
        k *= 2;
    }
    tg_tlog_hash_t l, r;
    mth(&l, leaves, k);
    mth(&r, leaves + k, n - k);
    tg_tlog_node_hash(out, &l, &r);
}

/* Stored hashes by (level, index), filled by tg_tlog_range_append's callback. */
typedef struct store {
    tg_tlog_hash_t h[10][MAXN + 1];
    unsigned filled[10][MAXN + 1];
    unsigned reads;
    tg_err_t fail_with; /* read error to inject, TG_OK for none */
} store_t;

static store_t store;
static tg_tlog_hash_t leaves[MAXN];
static tg_tlog_hash_t roots[MAXN + 1];

static tg_err_t store_put(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    store_t *s = ctx;
    assert_true(level < 10 && index <= MAXN);
    assert_int_equal(s->filled[level][index], 0); /* each stored hash is reported once */
    s->h[level][index] = *h;
    s->filled[level][index] = 1;
    return TG_OK;
}

static tg_err_t store_get(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    store_t *s = ctx;
    s->reads++;
    if (s->fail_with != TG_OK) {
        return s->fail_with;
    }
    /* the generators only ask for complete subtrees that exist */
    assert_true(level < 10 && index <= MAXN && s->filled[level][index]);
    *out = s->h[level][index];
    return TG_OK;
}

static const tg_tlog_reader_t reader = {store_get, &store};

/* Leaves 0..MAXN-1 (entry = the 8-byte big-endian index), the store of the tree of MAXN
 * leaves, and the root of every prefix. */
static int setup(void **state) {
    (void)state;
    tg_tlog_range_t r;
    if (sodium_init() < 0) {
        return -1;
    }
    memset(&store, 0, sizeof store);
    tg_tlog_range_init(&r);
    tg_tlog_range_root(&r, &roots[0]);
    for (uint64_t i = 0; i < MAXN; i++) {
        uint8_t e[8];
        for (int b = 0; b < 8; b++) {
            e[b] = (uint8_t)(i >> (56 - 8 * b));
        }
        tg_tlog_leaf_hash(&leaves[i], e, sizeof e);
        if (tg_tlog_range_append(&r, &leaves[i], store_put, &store) != TG_OK) {
            return -1;
        }
        tg_tlog_range_root(&r, &roots[i + 1]);
    }
    return 0;
}

/* ---- helpers for the vector files ----------------------------------------------------- */

/* The vectors' raw text: the integer members are read from it, because one of them is
 * 2^64 - 1, beyond what jansson holds as an integer (the tree is parsed with integers as
 * reals, only for the other members). */
static char *raw_text;

static json_t *load_json(const char *path) {
    size_t len = 0;
    json_error_t err;
    free(raw_text);
    raw_text = tg_test_read(path, &len);
    json_t *v = json_loadb(raw_text, len, JSON_DECODE_INT_AS_REAL, &err);
    if (v == NULL) {
        fail_msg("%s: %s", path, err.text);
    }
    return v;
}

static void unhex_str(uint8_t *out, size_t n, const char *hex) {
    assert_int_equal(strlen(hex), 2 * n);
    assert_int_equal(tg_unhex(out, n, hex, 2 * n), TG_OK);
}

/* Decodes a standard-base64 member; returns its byte length (the vectors hold some values
 * that are not 32 bytes on purpose). */
static size_t b64_member(uint8_t *out, size_t cap, const json_t *o, const char *name) {
    const char *s = json_string_value(json_object_get(o, name));
    size_t n = 0;
    assert_non_null(s);
    if (sodium_base642bin(out, cap, s, strlen(s), NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) !=
        0) {
        fail_msg("bad base64 in %s: %s", name, s);
    }
    return n;
}

static uint64_t u64_member(const json_t *o, const char *name) {
    char key[32];
    (void)o;
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(raw_text, key);
    assert_non_null(at);
    at += strlen(key);
    while (*at == ' ') {
        at++;
    }
    assert_true(*at >= '0' && *at <= '9');
    char *end = NULL;
    unsigned long long v = strtoull(at, &end, 10);
    assert_true(end != at && (*end == ',' || *end == '\n' || *end == '}'));
    return (uint64_t)v;
}

/* The proof member (null = empty); returns the hash count, or SIZE_MAX when a hash is not
 * 32 bytes (such a proof cannot even be expressed through tlog.h's types). */
static size_t proof_member(tg_tlog_hash_t *proof, size_t cap, const json_t *o) {
    json_t *a = json_object_get(o, "proof");
    size_t i;
    json_t *v;
    if (json_is_null(a)) {
        return 0;
    }
    assert_true(json_is_array(a) && json_array_size(a) <= cap);
    json_array_foreach(a, i, v) {
        uint8_t buf[64];
        size_t n = 0;
        const char *s = json_string_value(v);
        assert_non_null(s);
        assert_int_equal(sodium_base642bin(buf, sizeof buf, s, strlen(s), NULL, &n, NULL,
                                           sodium_base64_VARIANT_ORIGINAL),
                         0);
        if (n != TG_TLOG_HASH_LEN) {
            return SIZE_MAX;
        }
        memcpy(proof[i].h, buf, TG_TLOG_HASH_LEN);
    }
    return json_array_size(a);
}

typedef void (*vector_fn)(const char *path, const json_t *v, unsigned *counts);

/* Runs fn on every .json file under dir (one level of subdirectories, and one more for
 * inclusion/additional/<n>/), in no particular order. */
static void for_each_vector(const char *dir, vector_fn fn, unsigned *counts) {
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d == NULL) {
        fail_msg("cannot open %s", dir);
    }
    while ((e = readdir(d)) != NULL) {
        char path[1024];
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (nl > 5 && strcmp(e->d_name + nl - 5, ".json") == 0) {
            json_t *v = load_json(path);
            fn(path, v, counts);
            json_decref(v);
        } else {
            DIR *sub = opendir(path);
            if (sub != NULL) {
                closedir(sub);
                for_each_vector(path, fn, counts);
            }
        }
    }
    closedir(d);
}

/* The RFC 6962 test tree (rfc6962-roots.json): its 8 leaf hashes and 9 roots. */
static tg_tlog_hash_t rfc_leaves[8];
static tg_tlog_hash_t rfc_roots[9];

static void load_rfc_tree(void) {
    json_t *v = load_json(TG_TLOG_VECTORS "/rfc6962-roots.json");
    json_t *ins = json_object_get(v, "leaf_inputs_hex");
    json_t *rs = json_object_get(v, "roots_hex_by_size");
    assert_int_equal(json_array_size(ins), 8);
    assert_int_equal(json_array_size(rs), 9);
    for (size_t i = 0; i < 8; i++) {
        uint8_t in[16];
        const char *hex = json_string_value(json_array_get(ins, i));
        size_t n = strlen(hex) / 2;
        unhex_str(in, n, hex);
        tg_tlog_leaf_hash(&rfc_leaves[i], in, n);
    }
    for (size_t i = 0; i < 9; i++) {
        unhex_str(rfc_roots[i].h, 32, json_string_value(json_array_get(rs, i)));
    }
    json_decref(v);
}

/* A store over the RFC test tree, for comparing generated proofs with the vectors'. */
static store_t rfc_store;
static const tg_tlog_reader_t rfc_reader = {store_get, &rfc_store};

static void fill_rfc_store(void) {
    tg_tlog_range_t r;
    memset(&rfc_store, 0, sizeof rfc_store);
    tg_tlog_range_init(&r);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(tg_tlog_range_append(&r, &rfc_leaves[i], store_put, &rfc_store), TG_OK);
    }
}

/* ---- RFC 6962 roots ------------------------------------------------------------------- */

static void test_rfc6962_roots(void **state) {
    (void)state;
    tg_tlog_range_t r;
    tg_tlog_hash_t got;
    load_rfc_tree();
    tg_tlog_range_init(&r);
    for (uint64_t n = 0; n <= 8; n++) {
        tg_tlog_root(&got, rfc_leaves, n);
        assert_memory_equal(got.h, rfc_roots[n].h, 32);
        tg_tlog_range_root(&r, &got);
        assert_memory_equal(got.h, rfc_roots[n].h, 32);
        if (n < 8) {
            assert_int_equal(tg_tlog_range_append(&r, &rfc_leaves[n], NULL, NULL), TG_OK);
        }
    }
    /* the empty root is SHA-256("") */
    tg_tlog_empty_root(&got);
    unhex_str(r.nodes[0].h, 32, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_memory_equal(got.h, r.nodes[0].h, 32);
}

/* ---- transparency-dev vectors --------------------------------------------------------- */

enum { C_TOTAL, C_OK, C_REJECTED, C_UNTYPED, C_REGENERATED };

static void inclusion_vector(const char *path, const json_t *v, unsigned *c) {
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF + 8];
    uint8_t leaf[64], root[64];
    int want_err = json_is_true(json_object_get(v, "wantErr"));
    uint64_t index = u64_member(v, "leafIdx");
    uint64_t size = u64_member(v, "treeSize");
    size_t ln = b64_member(leaf, sizeof leaf, v, "leafHash");
    size_t rn = b64_member(root, sizeof root, v, "root");
    size_t pn = proof_member(proof, TG_TLOG_MAX_PROOF + 8, v);
    c[C_TOTAL]++;
    if (ln != 32 || rn != 32 || pn == SIZE_MAX) {
        /* a value that is not a 32-byte hash is refused at the type boundary; every such
         * vector must be one that expects an error */
        if (!want_err) {
            fail_msg("%s: non-hash value in a vector that must verify", path);
        }
        c[C_UNTYPED]++;
        c[C_REJECTED]++;
        return;
    }
    tg_tlog_hash_t lh, rh;
    memcpy(lh.h, leaf, 32);
    memcpy(rh.h, root, 32);
    tg_err_t rc = tg_tlog_verify_inclusion(&lh, index, size, proof, pn, &rh);
    if (want_err) {
        if (rc != TG_ERR_TLOG_PROOF) {
            fail_msg("%s: accepted (%s)", path, tg_err_name(rc));
        }
        c[C_REJECTED]++;
        return;
    }
    if (rc != TG_OK) {
        fail_msg("%s: rejected (%s)", path, tg_err_name(rc));
    }
    c[C_OK]++;
    /* over the RFC test tree: the generator must give the very same proof */
    if (size <= 8 && memcmp(rh.h, rfc_roots[size].h, 32) == 0) {
        tg_tlog_hash_t gen[TG_TLOG_MAX_PROOF];
        size_t gn = 0;
        assert_int_equal(tg_tlog_inclusion_proof(gen, &gn, &rfc_reader, index, size), TG_OK);
        assert_int_equal(gn, pn);
        assert_memory_equal(gen, proof, pn * sizeof proof[0]);
        c[C_REGENERATED]++;
    }
}

static void test_inclusion_vectors(void **state) {
    (void)state;
    unsigned c[5] = {0};
    load_rfc_tree();
    fill_rfc_store();
    for_each_vector(TG_TLOG_VECTORS "/transparency-dev/testdata/inclusion", inclusion_vector, c);
    print_message("inclusion vectors: %u (%u verify, %u rejected, %u of them non-hash values; "
                  "%u regenerated)\n",
                  c[C_TOTAL], c[C_OK], c[C_REJECTED], c[C_UNTYPED], c[C_REGENERATED]);
    /* every file is one case: 5 happy paths + 1 single-entry match, the rest must fail */
    assert_int_equal(c[C_OK], 6);
    assert_int_equal(c[C_TOTAL], c[C_OK] + c[C_REJECTED]);
    assert_int_equal(c[C_TOTAL], 98); /* every file of the directory */
    assert_int_equal(c[C_REGENERATED], 5);
}

/* The one vector whose happy case compares values that are not hashes: equal sizes with
 * equal 12-byte "roots". Through tlog.h's 32-byte types the same rule is checked below. */
static const char untyped_happy[] = "sizes-are-equal-one-and-proof-is-empty.json";

static void consistency_vector(const char *path, const json_t *v, unsigned *c) {
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF + 8];
    uint8_t r1[64], r2[64];
    int want_err = json_is_true(json_object_get(v, "wantErr"));
    uint64_t size1 = u64_member(v, "size1");
    uint64_t size2 = u64_member(v, "size2");
    size_t n1 = b64_member(r1, sizeof r1, v, "root1");
    size_t n2 = b64_member(r2, sizeof r2, v, "root2");
    size_t pn = proof_member(proof, TG_TLOG_MAX_PROOF + 8, v);
    c[C_TOTAL]++;
    if (n1 != 32 || n2 != 32 || pn == SIZE_MAX) {
        if (!want_err) {
            size_t pl = strlen(path), ul = strlen(untyped_happy);
            assert_true(pl > ul && strcmp(path + pl - ul, untyped_happy) == 0);
            /* the same case with hashes: equal sizes, equal roots, empty proof */
            assert_true(size1 == size2 && pn == 0 && n1 == n2 && memcmp(r1, r2, n1) == 0);
            assert_int_equal(
                tg_tlog_verify_consistency(size1, size2, NULL, 0, &rfc_roots[1], &rfc_roots[1]),
                TG_OK);
            c[C_OK]++;
            c[C_UNTYPED]++;
            return;
        }
        c[C_UNTYPED]++;
        c[C_REJECTED]++;
        return;
    }
    tg_tlog_hash_t h1, h2;
    memcpy(h1.h, r1, 32);
    memcpy(h2.h, r2, 32);
    tg_err_t rc = tg_tlog_verify_consistency(size1, size2, proof, pn, &h1, &h2);
    if (want_err) {
        if (rc != TG_ERR_TLOG_PROOF) {
            fail_msg("%s: accepted (%s)", path, tg_err_name(rc));
        }
        c[C_REJECTED]++;
        return;
    }
    if (rc != TG_OK) {
        fail_msg("%s: rejected (%s)", path, tg_err_name(rc));
    }
    c[C_OK]++;
    if (size2 <= 8 && memcmp(h1.h, rfc_roots[size1].h, 32) == 0 &&
        memcmp(h2.h, rfc_roots[size2].h, 32) == 0) {
        tg_tlog_hash_t gen[TG_TLOG_MAX_PROOF];
        size_t gn = 0;
        assert_int_equal(tg_tlog_consistency_proof(gen, &gn, &rfc_reader, size1, size2), TG_OK);
        assert_int_equal(gn, pn);
        assert_memory_equal(gen, proof, pn * sizeof proof[0]);
        c[C_REGENERATED]++;
    }
}

static void test_consistency_vectors(void **state) {
    (void)state;
    unsigned c[5] = {0};
    load_rfc_tree();
    fill_rfc_store();
    for_each_vector(TG_TLOG_VECTORS "/transparency-dev/testdata/consistency", consistency_vector,
                    c);
    print_message("consistency vectors: %u (%u verify, %u rejected, %u of them non-hash values; "
                  "%u regenerated)\n",
                  c[C_TOTAL], c[C_OK], c[C_REJECTED], c[C_UNTYPED], c[C_REGENERATED]);
    assert_int_equal(c[C_OK], 6);
    assert_int_equal(c[C_TOTAL], c[C_OK] + c[C_REJECTED]);
    assert_int_equal(c[C_TOTAL], 98); /* every file of the directory */
    assert_int_equal(c[C_REGENERATED], 5);
}

/* ---- the compact range and its stored hashes ------------------------------------------ */

static void test_range_matches_oracle(void **state) {
    (void)state;
    tg_tlog_hash_t want;
    for (uint64_t n = 0; n <= MAXN; n++) {
        mth(&want, leaves, n);
        assert_memory_equal(roots[n].h, want.h, 32);
    }
    /* every stored hash is the MTH of its complete subtree, and all of them are there */
    for (unsigned level = 0; level < 10; level++) {
        for (uint64_t i = 0; ((i + 1) << level) <= MAXN; i++) {
            assert_true(store.filled[level][i]);
            mth(&want, leaves + (i << level), UINT64_C(1) << level);
            assert_memory_equal(store.h[level][i].h, want.h, 32);
        }
    }
    /* any subtree: the same as the oracle; misaligned ranges are refused */
    tg_tlog_hash_t got;
    for (uint64_t lo = 0; lo < MAXN; lo += 8) {
        for (uint64_t hi = lo + 1; hi <= MAXN && hi <= lo + 64; hi++) {
            uint64_t align = lo == 0 ? UINT64_MAX : (lo & (~lo + 1));
            tg_err_t rc = tg_tlog_subtree_hash(&got, &reader, lo, hi);
            if (hi - lo > align) {
                assert_int_equal(rc, TG_ERR_INVALID_ARG);
                continue;
            }
            assert_int_equal(rc, TG_OK);
            mth(&want, leaves + lo, hi - lo);
            assert_memory_equal(got.h, want.h, 32);
        }
    }
    assert_int_equal(tg_tlog_subtree_hash(&got, &reader, 5, 5), TG_ERR_INVALID_ARG);
}

static tg_err_t refuse_level1(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    (void)ctx, (void)index, (void)h;
    return level == 1 ? TG_ERR_IO : TG_OK;
}

static void test_range_store_failure_and_limit(void **state) {
    (void)state;
    tg_tlog_range_t r, before;
    tg_tlog_range_init(&r);
    assert_int_equal(tg_tlog_range_append(&r, &leaves[0], refuse_level1, NULL), TG_OK);
    before = r;
    /* the second leaf completes a level-1 node; the refused store leaves r unchanged */
    assert_int_equal(tg_tlog_range_append(&r, &leaves[1], refuse_level1, NULL), TG_ERR_IO);
    assert_memory_equal(&r, &before, sizeof r);
    /* a full range refuses one more leaf */
    r.size = UINT64_MAX;
    assert_int_equal(tg_tlog_range_append(&r, &leaves[0], NULL, NULL), TG_ERR_LIMIT);
}

/* ---- generator against verifier, every tree up to MAXN -------------------------------- */

static void flip(tg_tlog_hash_t *h, size_t byte) { h->h[byte % 32] ^= 0x01; }

static void test_inclusion_exhaustive(void **state) {
    (void)state;
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF + 1];
    unsigned checked = 0;
    for (uint64_t n = 1; n <= MAXN; n++) {
        const tg_tlog_hash_t *root = &roots[n];
        for (uint64_t i = 0; i < n; i++) {
            size_t len = 0;
            assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &reader, i, n), TG_OK);
            assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, n, proof, len, root), TG_OK);
            checked++;
            /* a flipped byte in every proof hash for the smaller trees, in one beyond (each
             * position is still hit by some leaf) */
            for (size_t k = 0; k < len; k++) {
                if (n > 64 && k != (i + n) % len) {
                    continue;
                }
                flip(&proof[k], i + k);
                assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, n, proof, len, root),
                                 TG_ERR_TLOG_PROOF);
                flip(&proof[k], i + k);
            }
            /* a wrong index (same leaf, same root) */
            uint64_t others[4] = {i ^ 1u, i + 1, i - 1, n - 1 - i};
            for (int k = 0; k < 4; k++) {
                if (others[k] != i && others[k] < UINT64_MAX) {
                    assert_int_equal(
                        tg_tlog_verify_inclusion(&leaves[i], others[k], n, proof, len, root),
                        TG_ERR_TLOG_PROOF);
                }
            }
            /* a wrong size, with its own root or with this one */
            const uint64_t sizes[2] = {n - 1, n + 1};
            for (int k = 0; k < 2; k++) {
                if (sizes[k] <= MAXN) {
                    assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, sizes[k], proof, len,
                                                              &roots[sizes[k]]),
                                     TG_ERR_TLOG_PROOF);
                }
            }
            assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, n * 2, proof, len, root),
                             TG_ERR_TLOG_PROOF);
            /* one hash short, one hash long, the wrong leaf */
            if (len > 0) {
                assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, n, proof, len - 1, root),
                                 TG_ERR_TLOG_PROOF);
            }
            proof[len] = leaves[0];
            assert_int_equal(tg_tlog_verify_inclusion(&leaves[i], i, n, proof, len + 1, root),
                             TG_ERR_TLOG_PROOF);
            assert_int_equal(
                tg_tlog_verify_inclusion(&leaves[(i + 1) % MAXN], i, n, proof, len, root),
                TG_ERR_TLOG_PROOF);
        }
        size_t len = 0;
        assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &reader, n, n), TG_ERR_INVALID_ARG);
        assert_int_equal(tg_tlog_verify_inclusion(&leaves[0], n, n, proof, 0, root),
                         TG_ERR_TLOG_PROOF);
    }
    print_message("inclusion: %u (size, leaf) pairs generated and verified\n", checked);
}

static void test_consistency_exhaustive(void **state) {
    (void)state;
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF + 1];
    unsigned checked = 0;
    for (uint64_t n = 1; n <= MAXN; n++) {
        for (uint64_t m = 1; m <= n; m++) {
            size_t len = 0;
            assert_int_equal(tg_tlog_consistency_proof(proof, &len, &reader, m, n), TG_OK);
            assert_int_equal(tg_tlog_verify_consistency(m, n, proof, len, &roots[m], &roots[n]),
                             TG_OK);
            checked++;
            if (m == n) {
                assert_int_equal(len, 0);
                /* equal sizes: different roots, or any proof, fail */
                if (n > 1) {
                    assert_int_equal(
                        tg_tlog_verify_consistency(m, n, NULL, 0, &roots[m - 1], &roots[n]),
                        TG_ERR_TLOG_PROOF);
                }
                proof[0] = roots[n];
                assert_int_equal(tg_tlog_verify_consistency(m, n, proof, 1, &roots[m], &roots[n]),
                                 TG_ERR_TLOG_PROOF);
                continue;
            }
            /* a flipped byte in every hash for the smaller trees, in one of them beyond */
            for (size_t k = 0; k < len; k++) {
                if (n > 64 && k != (m + n) % len) {
                    continue;
                }
                flip(&proof[k], m + k);
                assert_int_equal(tg_tlog_verify_consistency(m, n, proof, len, &roots[m], &roots[n]),
                                 TG_ERR_TLOG_PROOF);
                flip(&proof[k], m + k);
            }
            /* wrong sizes, each with its own root */
            if (m + 1 < n) {
                assert_int_equal(
                    tg_tlog_verify_consistency(m + 1, n, proof, len, &roots[m + 1], &roots[n]),
                    TG_ERR_TLOG_PROOF);
            }
            if (m > 1) {
                assert_int_equal(
                    tg_tlog_verify_consistency(m - 1, n, proof, len, &roots[m - 1], &roots[n]),
                    TG_ERR_TLOG_PROOF);
            }
            if (n < MAXN) {
                assert_int_equal(
                    tg_tlog_verify_consistency(m, n + 1, proof, len, &roots[m], &roots[n + 1]),
                    TG_ERR_TLOG_PROOF);
            }
            /* swapped roots, one hash short, one long, and the reverse direction */
            assert_int_equal(tg_tlog_verify_consistency(m, n, proof, len, &roots[n], &roots[m]),
                             TG_ERR_TLOG_PROOF);
            assert_int_equal(tg_tlog_verify_consistency(m, n, proof, len - 1, &roots[m], &roots[n]),
                             TG_ERR_TLOG_PROOF);
            proof[len] = leaves[0];
            assert_int_equal(tg_tlog_verify_consistency(m, n, proof, len + 1, &roots[m], &roots[n]),
                             TG_ERR_TLOG_PROOF);
            assert_int_equal(tg_tlog_verify_consistency(n, m, proof, len, &roots[n], &roots[m]),
                             TG_ERR_TLOG_PROOF);
        }
        size_t len = 0;
        assert_int_equal(tg_tlog_consistency_proof(proof, &len, &reader, 0, n), TG_ERR_INVALID_ARG);
        assert_int_equal(tg_tlog_consistency_proof(proof, &len, &reader, n + 1, n),
                         TG_ERR_INVALID_ARG);
        assert_int_equal(tg_tlog_verify_consistency(0, n, NULL, 0, &roots[0], &roots[n]),
                         TG_ERR_TLOG_PROOF);
    }
    assert_int_equal(tg_tlog_verify_consistency(0, 0, NULL, 0, &roots[0], &roots[0]),
                     TG_ERR_TLOG_PROOF);
    print_message("consistency: %u (old, new) pairs generated and verified\n", checked);
}

static void test_reader_errors_and_bounds(void **state) {
    (void)state;
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF + 1];
    size_t len = 7;
    store.fail_with = TG_ERR_IO;
    assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &reader, 3, 17), TG_ERR_IO);
    assert_int_equal(len, 0);
    assert_int_equal(tg_tlog_consistency_proof(proof, &len, &reader, 3, 17), TG_ERR_IO);
    store.fail_with = TG_OK;
    /* more than TG_TLOG_MAX_PROOF hashes is refused before anything is read */
    memset(proof, 0, sizeof proof);
    assert_int_equal(tg_tlog_verify_inclusion(&leaves[0], 0, UINT64_MAX, proof,
                                              TG_TLOG_MAX_PROOF + 1, &roots[1]),
                     TG_ERR_TLOG_PROOF);
    assert_int_equal(tg_tlog_verify_consistency(1, UINT64_MAX, proof, TG_TLOG_MAX_PROOF + 1,
                                                &roots[1], &roots[1]),
                     TG_ERR_TLOG_PROOF);
    /* the largest sizes do not overflow anything: wrong, but cleanly */
    assert_int_equal(tg_tlog_verify_inclusion(&leaves[0], UINT64_MAX - 1, UINT64_MAX, proof,
                                              TG_TLOG_MAX_PROOF, &roots[1]),
                     TG_ERR_TLOG_PROOF);
    assert_int_equal(tg_tlog_verify_consistency(UINT64_MAX - 1, UINT64_MAX, proof,
                                                TG_TLOG_MAX_PROOF, &roots[1], &roots[1]),
                     TG_ERR_TLOG_PROOF);
}

/* A reader that makes up hashes for any complete subtree, to run the generators on trees
 * far larger than memory: they must stop at TG_TLOG_MAX_PROOF, not overrun it. */
static tg_err_t any_hash(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    (void)ctx;
    memset(out, 0, sizeof *out);
    out->h[0] = (uint8_t)level;
    memcpy(out->h + 1, &index, sizeof index);
    return TG_OK;
}

static void test_generators_on_huge_trees(void **state) {
    (void)state;
    const tg_tlog_reader_t rd = {any_hash, NULL};
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t len = 0;
    uint64_t big = UINT64_C(1) << 63;
    assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &rd, big - 1, big), TG_OK);
    assert_int_equal(len, 63);
    /* 2^63 + 1 leaves: the last leaf's path is 1 hash, the first one's 64: too long */
    assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &rd, big, big + 1), TG_OK);
    assert_int_equal(len, 1);
    assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &rd, 0, big + 1), TG_ERR_LIMIT);
    assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &rd, 0, UINT64_MAX), TG_ERR_LIMIT);
    assert_int_equal(tg_tlog_consistency_proof(proof, &len, &rd, 3, UINT64_MAX), TG_ERR_LIMIT);
    assert_int_equal(tg_tlog_consistency_proof(proof, &len, &rd, big, big + 1), TG_OK);
    assert_int_equal(len, 1);
    tg_tlog_hash_t h;
    assert_int_equal(tg_tlog_subtree_hash(&h, &rd, 0, UINT64_MAX), TG_OK);
}

/* ---- tiles ---------------------------------------------------------------------------- */

static void path_is(const tg_tlog_tile_t *t, const char *want) {
    char out[TG_TLOG_TILE_PATH_MAX];
    size_t len = 0;
    tg_tlog_tile_t back;
    assert_int_equal(tg_tlog_tile_path(out, &len, t), TG_OK);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    assert_int_equal(tg_tlog_tile_parse(&back, out, len), TG_OK);
    assert_true(back.entries == t->entries && back.level == t->level && back.index == t->index &&
                back.width == t->width);
}

static void test_tile_paths(void **state) {
    (void)state;
    tg_tlog_tile_t t = {false, 0, 1234067, 256};
    path_is(&t, "tile/0/x001/x234/067");
    t = (tg_tlog_tile_t){false, 3, 0, 256};
    path_is(&t, "tile/3/000");
    t = (tg_tlog_tile_t){false, 63, 999, 1};
    path_is(&t, "tile/63/999.p/1");
    t = (tg_tlog_tile_t){false, 1, 1000, 255};
    path_is(&t, "tile/1/x001/000.p/255");
    t = (tg_tlog_tile_t){true, 0, 12, 17};
    path_is(&t, "tile/entries/012.p/17");
    t = (tg_tlog_tile_t){true, 0, UINT64_MAX, 256};
    path_is(&t, "tile/entries/x018/x446/x744/x073/x709/x551/615");
    /* what the formatter refuses */
    char out[TG_TLOG_TILE_PATH_MAX];
    t = (tg_tlog_tile_t){false, 64, 0, 256};
    assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_ERR_INVALID_ARG);
    t = (tg_tlog_tile_t){false, 0, 0, 0};
    assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_ERR_INVALID_ARG);
    t = (tg_tlog_tile_t){false, 0, 0, 257};
    assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_ERR_INVALID_ARG);
    t = (tg_tlog_tile_t){true, 1, 0, 256};
    assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_ERR_INVALID_ARG);
}

static void test_tile_parse_rejects(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        "tile/",
        "tile/0",
        "tile/0/",
        "Tile/0/000",
        "tiles/0/000",
        "tile/00/000",     /* leading zero in L */
        "tile/01/000",     /* leading zero in L */
        "tile/64/000",     /* L beyond 63 */
        "tile/-1/000",     /* no sign */
        "tile/+1/000",     /* no sign */
        "tile//000",       /* empty L */
        "tile/0/00",       /* N group of 2 */
        "tile/0/0000",     /* N group of 4 */
        "tile/0/1",        /* N not padded */
        "tile/0/x001",     /* the last group has no x */
        "tile/0/001/002",  /* all but the last group need an x */
        "tile/0/x000/001", /* redundant leading zero group */
        "tile/0/x001/x234/067/",
        "tile/0/x001//067",
        "tile/0/xx01/067",
        "tile/0/000.p/256", /* a full tile has no suffix */
        "tile/0/000.p/0",
        "tile/0/000.p/",
        "tile/0/000.p/012", /* leading zero in W */
        "tile/0/000.p/1/",
        "tile/0/000.p/1x",
        "tile/0/000.q/1",
        "tile/0/000p/1",
        "tile/0/000.",
        "tile/0/000 ",
        "tile/0/00a",
        "tile/entries/",
        "tile/entries/00",
        "tile/entries/000.p/256",
        "tile/1/entries/000",
        "tile/entries/x018/x446/x744/x073/x709/x551/616", /* 2^64 */
        "tile/0/x001/x018/x446/x744/x073/x709/x551/615",  /* far beyond */
        "tile/0/000\n",
    };
    tg_tlog_tile_t t;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (tg_tlog_tile_parse(&t, bad[i], strlen(bad[i])) != TG_ERR_TLOG_PATH) {
            fail_msg("accepted %s", bad[i]);
        }
    }
    /* an embedded NUL ends nothing: the length says where the path ends */
    assert_int_equal(tg_tlog_tile_parse(&t, "tile/0/000\0", 11), TG_ERR_TLOG_PATH);
    assert_int_equal(tg_tlog_tile_parse(&t, NULL, 0), TG_ERR_TLOG_PATH);
}

/* C2SP tlog-tiles' example: a tree of 70,000 leaves has tile/0/000 .. tile/0/272 full,
 * tile/0/273.p/112, tile/1/000 full, tile/1/001.p/17 and tile/2/000.p/1. */
static void test_tiles_of_size_70000(void **state) {
    (void)state;
    const uint64_t size = 70000;
    tg_tlog_tile_t t;
    char out[TG_TLOG_TILE_PATH_MAX];
    for (uint64_t i = 0; i < 273; i++) {
        assert_int_equal(tg_tlog_tile_for_size(&t, false, 0, i, size), TG_OK);
        assert_int_equal(t.width, 256);
    }
    static const struct {
        unsigned level;
        uint64_t index;
        const char *path;
    } want[] = {
        {0, 0, "tile/0/000"}, {0, 272, "tile/0/272"},    {0, 273, "tile/0/273.p/112"},
        {1, 0, "tile/1/000"}, {1, 1, "tile/1/001.p/17"}, {2, 0, "tile/2/000.p/1"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(tg_tlog_tile_for_size(&t, false, want[i].level, want[i].index, size),
                         TG_OK);
        assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_OK);
        assert_string_equal(out, want[i].path);
    }
    assert_int_equal(tg_tlog_tile_for_size(&t, true, 0, 273, size), TG_OK);
    assert_int_equal(tg_tlog_tile_path(out, NULL, &t), TG_OK);
    assert_string_equal(out, "tile/entries/273.p/112");
    /* and nothing beyond */
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 0, 274, size), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 1, 2, size), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 2, 1, size), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 3, 0, size), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 63, 0, UINT64_MAX), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 7, 0, UINT64_MAX), TG_OK);
    assert_int_equal(t.width, 255); /* 2^64-1 >> 56 = 255 hashes at tile level 7 */
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 64, 0, size), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tlog_tile_for_size(&t, true, 1, 0, size), TG_ERR_INVALID_ARG);
    /* an exact multiple of 256 has no partial tile */
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 0, 1, 512), TG_OK);
    assert_int_equal(t.width, 256);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 0, 2, 512), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_tlog_tile_for_size(&t, false, 1, 0, 512), TG_OK);
    assert_int_equal(t.width, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc6962_roots),
        cmocka_unit_test(test_inclusion_vectors),
        cmocka_unit_test(test_consistency_vectors),
        cmocka_unit_test(test_range_matches_oracle),
        cmocka_unit_test(test_range_store_failure_and_limit),
        cmocka_unit_test(test_inclusion_exhaustive),
        cmocka_unit_test(test_consistency_exhaustive),
        cmocka_unit_test(test_reader_errors_and_bounds),
        cmocka_unit_test(test_generators_on_huge_trees),
        cmocka_unit_test(test_tile_paths),
        cmocka_unit_test(test_tile_parse_rejects),
        cmocka_unit_test(test_tiles_of_size_70000),
    };
    int failed = cmocka_run_group_tests(tests, setup, NULL);
    free(raw_text);
    return failed;
}
