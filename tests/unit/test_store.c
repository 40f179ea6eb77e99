/* test_store.c — the in-memory tables (lifecycle, isolation, TTL, caps, restore, the receipt
 * index, allocation failure, threads) and the db interface over them (db.h, file backend). */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "trigguard/db.h"
#include "trigguard/store.h"

#include "support/fail_alloc.h"

/* ------------------------------------------------------------------ helpers */

#define T_A "acme"
#define T_B "beta"
#define S(x) (x), strlen(x)
#define R 1000 /* retention used by most tests, ms */

static void hash_of(uint8_t h[32], unsigned v) {
    memset(h, 0, 32);
    h[0] = (uint8_t)v;
    h[1] = (uint8_t)(v >> 8);
    h[2] = (uint8_t)(v >> 16);
    h[31] = 0xa5;
}

/* A ledger position whose every field says n, so a copy of the wrong one shows. */
static tg_ledger_pos_t pos_n(unsigned n) {
    tg_ledger_pos_t p = {.seq = n, .offset = 1000u * n + 1, .segment = n + 2, .length = n + 92};
    return p;
}

static void assert_pos(const tg_ledger_pos_t *p, unsigned n) {
    tg_ledger_pos_t want = pos_n(n);
    assert_int_equal(p->seq, want.seq);
    assert_int_equal(p->offset, want.offset);
    assert_int_equal(p->segment, want.segment);
    assert_int_equal(p->length, want.length);
}

static tg_store_opts_t opts(size_t shards, size_t max_entries, size_t max_bytes) {
    tg_store_opts_t o = {0};
    o.shards = shards;
    o.max_entries = max_entries;
    o.max_bytes = max_bytes;
    o.retention_ms = R;
    return o;
}

static tg_store_t *mk(size_t shards, size_t max_entries, size_t max_bytes) {
    tg_store_opts_t o = opts(shards, max_entries, max_bytes);
    tg_store_t *s = NULL;
    assert_int_equal(tg_store_create(&s, &o, NULL), TG_OK);
    assert_non_null(s);
    return s;
}

static tg_receipts_t *mk_index(size_t shards, size_t max_entries, size_t max_bytes) {
    tg_store_opts_t o = opts(shards, max_entries, max_bytes);
    tg_receipts_t *r = NULL;
    assert_int_equal(tg_receipts_create(&r, &o, NULL), TG_OK);
    assert_non_null(r);
    return r;
}

static tg_err_t begin(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now,
                      tg_idem_result_t *res) {
    uint8_t hash[32];
    hash_of(hash, h);
    return tg_store_idem_begin(s, S(t), S(k), hash, now, res);
}

static tg_err_t begin_state(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now,
                            tg_idem_state_t *state) {
    tg_idem_result_t res;
    tg_err_t rc = begin(s, t, k, h, now, &res);
    *state = res.state;
    return rc;
}

/* Completes (t, k) with status and the position pos_n(n). */
static tg_err_t complete(tg_store_t *s, const char *t, const char *k, int status, unsigned n,
                         int64_t now) {
    tg_ledger_pos_t p = pos_n(n);
    return tg_store_idem_complete(s, S(t), S(k), status, &p, now);
}

static void expect_replay(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now,
                          int status, unsigned n) {
    tg_idem_result_t res;
    uint8_t hash[32];
    hash_of(hash, h);
    assert_int_equal(begin(s, t, k, h, now, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.entry.status, status);
    assert_pos(&res.entry.pos, n);
    assert_memory_equal(res.entry.request_hash, hash, 32);
}

static void expect_new(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now) {
    tg_idem_state_t st;
    assert_int_equal(begin_state(s, t, k, h, now, &st), TG_OK);
    assert_int_equal(st, TG_IDEM_NEW);
}

static tg_idem_entry_t done_entry(unsigned h, int status, unsigned n, int64_t at) {
    tg_idem_entry_t e = {.status = status, .pos = pos_n(n), .stored_at_ms = at};
    hash_of(e.request_hash, h);
    return e;
}

static tg_err_t restore(tg_store_t *s, const char *t, const char *k, unsigned h, int status,
                        unsigned n, int64_t at, int64_t now) {
    tg_idem_entry_t e = done_entry(h, status, n, at);
    return tg_store_idem_restore(s, S(t), S(k), &e, now);
}

static tg_err_t index_put(tg_receipts_t *r, const char *t, const char *id, unsigned n,
                          int64_t stamp, int64_t now, tg_ledger_pos_t *existing) {
    tg_ledger_pos_t p = pos_n(n);
    return tg_receipts_insert(r, S(t), S(id), &p, stamp, now, existing);
}

static void expect_indexed(tg_receipts_t *r, const char *t, const char *id, int64_t now,
                           unsigned n) {
    tg_ledger_pos_t p;
    assert_int_equal(tg_receipts_get(r, S(t), S(id), now, &p), TG_OK);
    assert_pos(&p, n);
}

/* ------------------------------------------------------------------ create / options */

static void test_create_options(void **state) {
    (void)state;
    tg_store_t *s = NULL;
    tg_receipts_t *r = NULL;
    tg_diag_t d = {{0}};
    tg_store_opts_t o = {0};

    assert_int_equal(tg_store_create(&s, NULL, &d), TG_OK);
    assert_int_equal(tg_store_max_key_len(s), TG_STORE_DEFAULT_MAX_KEY_LEN);
    tg_store_stats_t st;
    tg_store_stats(s, &st);
    assert_int_equal(st.max_entries, TG_STORE_DEFAULT_MAX_ENTRIES);
    assert_int_equal(st.max_bytes, TG_STORE_DEFAULT_MAX_BYTES);
    assert_int_equal(st.entries, 0);
    tg_store_destroy(s);
    tg_store_destroy(NULL);
    assert_int_equal(tg_store_max_key_len(NULL), 0);
    assert_int_equal(tg_receipts_create(&r, NULL, &d), TG_OK);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.max_entries, TG_STORE_DEFAULT_MAX_ENTRIES);
    assert_int_equal(st.receipts, 0);
    tg_receipts_destroy(r);
    tg_receipts_destroy(NULL);

    assert_int_equal(tg_store_create(NULL, NULL, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_create(NULL, NULL, &d), TG_ERR_INVALID_ARG);

    struct {
        tg_store_opts_t o;
        const char *needle;
    } bad[] = {
        {{.shards = 3}, "power of two"},
        {{.shards = TG_STORE_MAX_SHARDS * 2}, "power of two"},
        {{.max_entries = ((size_t)1 << 32) + 1}, "max_entries"},
        {{.retention_ms = -1}, "retention"},
        {{.max_key_len = TG_STORE_MAX_KEY_LEN_LIMIT + 1}, "max_key_len"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = (tg_store_t *)&d; /* must be reset to NULL on error */
        memset(&d, 0, sizeof d);
        assert_int_equal(tg_store_create(&s, &bad[i].o, &d), TG_ERR_CONFIG);
        assert_null(s);
        assert_non_null(strstr(d.msg, bad[i].needle));
        r = (tg_receipts_t *)&d;
        assert_int_equal(tg_receipts_create(&r, &bad[i].o, &d), TG_ERR_CONFIG);
        assert_null(r);
    }
    /* the largest accepted values */
    o.shards = TG_STORE_MAX_SHARDS;
    o.max_entries = 16;
    o.max_key_len = TG_STORE_MAX_KEY_LEN_LIMIT;
    assert_int_equal(tg_store_create(&s, &o, &d), TG_OK);
    assert_int_equal(tg_store_max_key_len(s), TG_STORE_MAX_KEY_LEN_LIMIT);
    tg_store_destroy(s);
    assert_int_equal(tg_receipts_create(&r, &o, &d), TG_OK);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.max_entries, 16);
    tg_receipts_destroy(r);
}

/* ------------------------------------------------------------------ idempotency */

static void test_idem_lifecycle(void **state) {
    (void)state;
    tg_store_t *s = mk(4, 100, 0);
    tg_store_stats_t st;

    expect_new(s, T_A, "k1", 1, 10);
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_in_flight, 1);
    assert_int_equal(st.entries, 1);

    /* same request while in flight, different request while in flight */
    tg_idem_state_t stt;
    assert_int_equal(begin_state(s, T_A, "k1", 1, 11, &stt), TG_ERR_IN_FLIGHT);
    assert_int_equal(stt, TG_IDEM_NONE);
    assert_int_equal(begin_state(s, T_A, "k1", 2, 11, &stt), TG_ERR_CONFLICT);

    assert_int_equal(complete(s, T_A, "k1", 200, 7, 20), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_in_flight, 0);
    assert_int_equal(st.idem_done, 1);

    expect_replay(s, T_A, "k1", 1, 21, 200, 7);
    assert_int_equal(begin_state(s, T_A, "k1", 2, 21, &stt), TG_ERR_CONFLICT);
    /* completing or aborting again is a caller bug */
    assert_int_equal(complete(s, T_A, "k1", 200, 8, 22), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("k1")), TG_ERR_NOT_FOUND);
    expect_replay(s, T_A, "k1", 1, 23, 200, 7);
    /* never begun */
    assert_int_equal(complete(s, T_A, "nope", 200, 7, 22), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("nope")), TG_ERR_NOT_FOUND);

    /* abort frees the key for a retry, which may carry a different request */
    expect_new(s, T_A, "k2", 5, 30);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("k2")), TG_OK);
    assert_int_equal(complete(s, T_A, "k2", 200, 9, 31), TG_ERR_NOT_FOUND);
    expect_new(s, T_A, "k2", 6, 31);
    assert_int_equal(complete(s, T_A, "k2", 503, 9, 32), TG_OK);
    expect_replay(s, T_A, "k2", 6, 33, 503, 9);

    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.idem_done, 2);
    assert_int_equal(st.receipts, 0);
    tg_store_destroy(s);
}

/* The entry is copied out whole (hash, status, position, time) into the caller's struct, and
 * the struct is all zero whenever there is no entry to show. */
static void test_idem_entry_copy(void **state) {
    (void)state;
    tg_store_t *s = mk(1, 10, 0);
    tg_idem_result_t res;
    uint8_t h[32];
    hash_of(h, 1);

    memset(&res, 0x5a, sizeof res);
    assert_int_equal(begin(s, T_A, "e", 1, 100, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_NEW);
    const tg_idem_result_t zero = {0};
    assert_memory_equal(&res.entry, &zero.entry, sizeof zero.entry);
    tg_ledger_pos_t big = {.seq = UINT64_MAX,
                           .offset = UINT64_MAX - 1,
                           .segment = UINT32_MAX,
                           .length = UINT32_MAX - 1};
    assert_int_equal(tg_store_idem_complete(s, S(T_A), S("e"), 599, &big, 150), TG_OK);
    big.seq = 0; /* the table kept its own copy */
    memset(&res, 0x5a, sizeof res);
    assert_int_equal(begin(s, T_A, "e", 1, 160, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.entry.status, 599);
    assert_int_equal(res.entry.stored_at_ms, 150);
    assert_memory_equal(res.entry.request_hash, h, 32);
    assert_int_equal(res.entry.pos.seq, UINT64_MAX);
    assert_int_equal(res.entry.pos.offset, UINT64_MAX - 1);
    assert_int_equal(res.entry.pos.segment, UINT32_MAX);
    assert_int_equal(res.entry.pos.length, UINT32_MAX - 1);
    /* an error leaves nothing behind in res either */
    memset(&res, 0x5a, sizeof res);
    assert_int_equal(begin(s, T_A, "e", 2, 161, &res), TG_ERR_CONFLICT);
    assert_int_equal(res.state, TG_IDEM_NONE);
    assert_memory_equal(&res.entry, &zero.entry, sizeof zero.entry);
    /* the lowest status is kept as exactly as the highest */
    expect_new(s, T_A, "low", 3, 170);
    assert_int_equal(complete(s, T_A, "low", 100, 4, 171), TG_OK);
    expect_replay(s, T_A, "low", 3, 172, 100, 4);
    tg_store_destroy(s);
}

static void test_tenant_isolation(void **state) {
    (void)state;
    tg_store_t *s = mk(8, 100, 0);

    expect_new(s, T_A, "shared", 1, 0);
    /* another tenant, same key, same or different request: its own entry */
    expect_new(s, T_B, "shared", 1, 0);
    assert_int_equal(complete(s, T_A, "shared", 200, 11, 1), TG_OK);
    assert_int_equal(complete(s, T_B, "shared", 200, 12, 1), TG_OK);
    expect_replay(s, T_A, "shared", 1, 2, 200, 11);
    expect_replay(s, T_B, "shared", 1, 2, 200, 12);
    /* B cannot abort or complete A's reservation */
    expect_new(s, T_A, "only-a", 3, 3);
    assert_int_equal(tg_store_idem_abort(s, S(T_B), S("only-a")), TG_ERR_NOT_FOUND);
    assert_int_equal(complete(s, T_B, "only-a", 200, 13, 4), TG_ERR_NOT_FOUND);
    expect_new(s, T_B, "only-a", 3, 4);

    /* the tenant/key split is part of the identity: ("ab","c") != ("a","bc") */
    expect_new(s, "ab", "c", 9, 5);
    expect_new(s, "a", "bc", 9, 5);
    /* keys differing in the last byte or by a prefix are different */
    expect_new(s, T_A, "key", 9, 5);
    expect_new(s, T_A, "kez", 9, 5);
    expect_new(s, T_A, "ke", 9, 5);
    /* keys are byte strings: an embedded NUL is part of the key */
    tg_idem_state_t st;
    uint8_t h[32];
    hash_of(h, 9);
    tg_idem_result_t res;
    assert_int_equal(tg_store_idem_begin(s, S(T_A), "key\0", 4, h, 5, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_NEW);
    assert_int_equal(begin_state(s, T_A, "key", 9, 5, &st), TG_ERR_IN_FLIGHT);

    /* nonces and idempotency keys live in separate namespaces, per tenant */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("shared"), 6), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_B), S("shared"), 6), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("shared"), 7), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S(T_B), S("shared"), 7), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S("acmf"), S("shared"), 7), TG_OK);
    expect_replay(s, T_A, "shared", 1, 8, 200, 11);
    tg_store_destroy(s);

    /* the receipt index: per tenant too, and the split is part of the identity */
    tg_receipts_t *r = mk_index(8, 100, 0);
    assert_int_equal(index_put(r, T_A, "exec_1", 1, 0, 0, NULL), TG_OK);
    assert_int_equal(index_put(r, T_B, "exec_1", 2, 0, 0, NULL), TG_OK);
    assert_int_equal(index_put(r, "ab", "c", 3, 0, 0, NULL), TG_OK);
    assert_int_equal(index_put(r, "a", "bc", 4, 0, 0, NULL), TG_OK);
    expect_indexed(r, T_A, "exec_1", 1, 1);
    expect_indexed(r, T_B, "exec_1", 1, 2);
    expect_indexed(r, "ab", "c", 1, 3);
    expect_indexed(r, "a", "bc", 1, 4);
    tg_ledger_pos_t p;
    assert_int_equal(tg_receipts_get(r, S("acmf"), S("exec_1"), 1, &p), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_receipts_get(r, S(T_A), "exec_1\0", 7, 1, &p), TG_ERR_NOT_FOUND);
    tg_receipts_destroy(r);
}

static void test_ttl_boundary(void **state) {
    (void)state;
    tg_store_t *s = mk(2, 100, 0);
    const int64_t t0 = 1700000000000;
    tg_store_stats_t st;

    expect_new(s, T_A, "k", 1, t0 - 50);
    assert_int_equal(complete(s, T_A, "k", 200, 1, t0), TG_OK);
    /* retention counts from complete */
    expect_replay(s, T_A, "k", 1, t0 + R - 1, 200, 1);
    tg_idem_state_t stt;
    assert_int_equal(begin_state(s, T_A, "k", 2, t0 + R - 1, &stt), TG_ERR_CONFLICT);
    /* at exactly retention the entry is gone: a different request may use the key */
    expect_new(s, T_A, "k", 2, t0 + R);
    tg_store_stats(s, &st);
    assert_int_equal(st.expired_reclaimed, 1);
    assert_int_equal(st.entries, 1);
    assert_int_equal(complete(s, T_A, "k", 200, 2, t0 + R + 1), TG_OK);
    expect_replay(s, T_A, "k", 2, t0 + R + 2, 200, 2);

    /* nonces */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R - 1), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R), TG_ERR_REPLAY);

    /* a clock that steps back keeps entries (fail closed) */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 - 100000), TG_ERR_REPLAY);
    tg_store_destroy(s);

    /* the receipt index: live until stamp + R - 1, gone at stamp + R */
    tg_receipts_t *r = mk_index(2, 100, 0);
    assert_int_equal(index_put(r, T_A, "exec_t", 1, t0, t0, NULL), TG_OK);
    expect_indexed(r, T_A, "exec_t", t0 + R - 1, 1);
    expect_indexed(r, T_A, "exec_t", t0 - 100000, 1); /* clock stepped back: still there */
    tg_ledger_pos_t p;
    assert_int_equal(tg_receipts_get(r, S(T_A), S("exec_t"), t0 + R, &p), TG_ERR_NOT_FOUND);
    assert_int_equal(p.seq, 0);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.expired_reclaimed, 1); /* the lookup reclaimed it */
    assert_int_equal(st.entries, 0);
    tg_receipts_destroy(r);
}

static void test_in_flight_never_expires(void **state) {
    (void)state;
    tg_store_t *s = mk(1, 100, 0);
    tg_store_stats_t st;
    tg_idem_state_t stt;

    expect_new(s, T_A, "stuck", 1, 0);
    assert_int_equal(begin_state(s, T_A, "stuck", 1, 1000 * R, &stt), TG_ERR_IN_FLIGHT);
    assert_int_equal(tg_store_sweep(s, INT64_MAX), 0);
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_in_flight, 1);
    assert_int_equal(begin_state(s, T_A, "stuck", 2, INT64_MAX, &stt), TG_ERR_CONFLICT);
    /* completing late still works, and retention starts then */
    assert_int_equal(complete(s, T_A, "stuck", 200, 3, 5000 * R), TG_OK);
    expect_replay(s, T_A, "stuck", 1, 5001 * R - 1, 200, 3);
    expect_new(s, T_A, "stuck", 3, 5001 * R);
    tg_store_destroy(s);
}

static void test_sweep(void **state) {
    (void)state;
    tg_store_t *s = mk(4, 5000, 0);
    tg_store_stats_t st;
    char key[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        /* stamps i/2 < R: nothing expires (and is reclaimed lazily) while filling */
        expect_new(s, T_A, key, 1, i / 2);
        if (i % 4 != 0) { /* a quarter stays in flight */
            assert_int_equal(complete(s, T_A, key, 200, (unsigned)i, i / 2), TG_OK);
        }
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S(key), i / 2), TG_OK);
    }
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 4000);
    assert_int_equal(st.idem_in_flight, 500);
    assert_int_equal(st.idem_done, 1500);
    assert_int_equal(st.nonces, 2000);
    assert_true(st.bytes > 0);

    /* at now = 499 + R entries stamped 0..499 (i < 1000) are expired: 750 done + 1000 nonces */
    assert_int_equal(tg_store_sweep(s, 499 + R), 1750);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2250);
    assert_int_equal(st.expired_reclaimed, 1750);
    assert_int_equal(tg_store_sweep(s, 499 + R), 0);
    assert_int_equal(tg_store_sweep(s, INT64_MAX), 1750);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 500);
    assert_int_equal(st.idem_in_flight, 500);
    assert_int_equal(st.nonces, 0);
    for (int i = 0; i < 2000; i += 4) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(tg_store_idem_abort(s, S(T_A), S(key)), TG_OK);
    }
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(tg_store_sweep(NULL, 0), 0);
    tg_store_destroy(s);

    /* the receipt index sweeps the same way */
    tg_receipts_t *r = mk_index(4, 5000, 0);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "exec_%d", i);
        assert_int_equal(index_put(r, T_A, key, (unsigned)i, i, i, NULL), TG_OK);
    }
    assert_int_equal(tg_receipts_sweep(r, 499 + R), 500);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.receipts, 500);
    assert_int_equal(st.entries, 500);
    assert_int_equal(st.expired_reclaimed, 500);
    expect_indexed(r, T_A, "exec_500", 499 + R, 500);
    assert_int_equal(tg_receipts_sweep(r, INT64_MAX), 500);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(tg_receipts_sweep(NULL, 0), 0);
    tg_receipts_destroy(r);
}

/* The sweep walks entries oldest first and stops at the first live one: a reservation
 * completed late is as young as its completion; more than a chunk of expired entries in one
 * shard all go in one call; an entry stamped before a backward clock step waits for the
 * entries ahead of it but reads as absent from its own expiry. */
static void test_sweep_age_order(void **state) {
    (void)state;
    tg_store_t *s = mk(1, 10000, 0);
    tg_store_stats_t st;
    char key[32];
    /* 3 * TG_STORE_SWEEP_CHUNK nonces stamped 0..767, one shard */
    for (int i = 0; i < 3 * TG_STORE_SWEEP_CHUNK; i++) {
        snprintf(key, sizeof key, "n%d", i);
        assert_int_equal(tg_store_nonce_use(s, S(T_A), S(key), i), TG_OK);
    }
    /* reserved at 0, completed at 1000: must outlive the nonces stamped below 1000 */
    expect_new(s, T_A, "late", 1, 0);
    assert_int_equal(complete(s, T_A, "late", 200, 1, 1000), TG_OK);
    /* reserved at 5, still in flight: never reclaimed, stepped over */
    expect_new(s, T_A, "stuck", 1, 5);

    assert_int_equal(tg_store_sweep(s, 99 + R), 100); /* stamps 0..99 */
    assert_int_equal(tg_store_sweep(s, 99 + R), 0);
    assert_int_equal(tg_store_sweep(s, 767 + R), 668); /* the rest: 100..767, > 2 chunks */
    expect_replay(s, T_A, "late", 1, 999 + R, 200, 1);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(tg_store_sweep(s, 1000 + R), 1);  /* "late" */
    assert_int_equal(tg_store_sweep(s, INT64_MAX), 0); /* "stuck" stays */
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_in_flight, 1);

    /* a clock step backwards: "old" (stamp 3000) is listed after "new" (stamp 5000) */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("new"), 5000), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("old"), 3000), TG_OK);
    assert_int_equal(tg_store_sweep(s, 3000 + R), 0); /* held behind "new" */
    /* ... but already absent for lookups: using it again is not a replay (the lookup
     * reclaims the expired one and stamps a new one at 3000 + R) */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("old"), 3000 + R), TG_OK);
    assert_int_equal(tg_store_sweep(s, 5000 + R - 1), 0);
    assert_int_equal(tg_store_sweep(s, 5000 + R), 2); /* "new", then "old" behind it */
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("stuck")), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    tg_store_destroy(s);
}

/* ------------------------------------------------------------------ caps */

static void test_entry_cap(void **state) {
    (void)state;
    for (size_t shards = 1; shards <= 16; shards *= 4) {
        tg_store_t *s = mk(shards, 8, 0);
        tg_store_stats_t st;
        char key[16];
        tg_idem_state_t stt;
        for (int i = 0; i < 4; i++) {
            snprintf(key, sizeof key, "i%d", i);
            expect_new(s, T_A, key, 1, 0);
            snprintf(key, sizeof key, "n%d", i);
            /* stamped 2: still live at 1 + R below, when i0 expires */
            assert_int_equal(tg_store_nonce_use(s, S(T_B), S(key), 2), TG_OK);
        }
        /* at max: one more of either kind is refused, and nothing is held */
        assert_int_equal(begin_state(s, T_A, "over", 1, 0, &stt), TG_ERR_LIMIT);
        assert_int_equal(stt, TG_IDEM_NONE);
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("over"), 0), TG_ERR_LIMIT);
        assert_int_equal(tg_store_idem_abort(s, S(T_A), S("over")), TG_ERR_NOT_FOUND);
        assert_int_equal(tg_store_nonce_release(s, S(T_B), S("over")), TG_ERR_NOT_FOUND);
        assert_int_equal(restore(s, T_A, "over", 1, 200, 1, 0, 0), TG_ERR_LIMIT);
        assert_int_equal(tg_store_nonce_restore(s, S(T_B), S("over"), 0, 0), TG_ERR_LIMIT);
        tg_store_stats(s, &st);
        assert_int_equal(st.entries, 8);
        assert_int_equal(st.max_entries, 8);
        assert_int_equal(st.limit_rejections, 4);
        /* existing entries keep working when full: completing takes no new room */
        assert_int_equal(complete(s, T_A, "i0", 200, 1, 1), TG_OK);
        expect_replay(s, T_A, "i0", 1, 2, 200, 1);
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("n0"), 2), TG_ERR_REPLAY);
        /* a restore that replaces a DONE entry at the cap is refused (it is counted in full
         * before the old one is given back), and changes nothing */
        assert_int_equal(restore(s, T_A, "i0", 1, 200, 2, 1, 1), TG_ERR_LIMIT);
        expect_replay(s, T_A, "i0", 1, 2, 200, 1);
        /* freeing one slot admits exactly one */
        assert_int_equal(tg_store_idem_abort(s, S(T_A), S("i1")), TG_OK);
        expect_new(s, T_A, "over", 1, 3);
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("over"), 3), TG_ERR_LIMIT);
        /* expiry makes room lazily: i0 (done at 1) expires at 1 + R; the same key is reused */
        expect_new(s, T_A, "i0", 7, 1 + R);
        assert_int_equal(tg_store_nonce_release(s, S(T_B), S("n3")), TG_OK);
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("over"), 3), TG_OK);
        tg_store_stats(s, &st);
        assert_int_equal(st.entries, 8);
        tg_store_destroy(s);

        /* the receipt index: 4 entries at max 4, the fifth refused */
        tg_receipts_t *r = mk_index(shards, 4, 0);
        for (unsigned i = 0; i < 4; i++) {
            snprintf(key, sizeof key, "exec_%u", i);
            assert_true(tg_receipts_has_room(r, strlen(T_A), strlen(key)));
            assert_int_equal(index_put(r, T_A, key, i, 0, 0, NULL), TG_OK);
        }
        assert_false(tg_receipts_has_room(r, strlen(T_A), 6)); /* the hint counts nothing */
        assert_int_equal(index_put(r, T_A, "exec_4", 4, 0, 0, NULL), TG_ERR_LIMIT);
        /* a full index still answers, and still recognises the same record */
        expect_indexed(r, T_A, "exec_0", 0, 0);
        assert_int_equal(index_put(r, T_A, "exec_0", 0, 0, 0, NULL), TG_OK);
        tg_receipts_stats(r, &st);
        assert_int_equal(st.entries, 4);
        assert_int_equal(st.receipts, 4);
        assert_int_equal(st.limit_rejections, 1);
        /* expiry makes room once reclaimed (lazily only in the bucket a lookup walks) */
        assert_int_equal(tg_receipts_sweep(r, R), 4);
        assert_int_equal(index_put(r, T_A, "exec_4", 4, R, R, NULL), TG_OK);
        expect_indexed(r, T_A, "exec_4", R, 4);
        tg_receipts_destroy(r);
    }
}

/* The byte cap counts each entry's allocation as store.h's table says, and admits an entry
 * that reaches the cap exactly but not one byte more. */
static void test_byte_cap(void **state) {
    (void)state;
    const char key36[] = "0badc0de-0000-4000-8000-000000000001"; /* a UUID */
    const char id37[] = "exec_0123456789abcdef0123456789abcdef";
    assert_int_equal(strlen(key36), 36);
    assert_int_equal(strlen(id37), 37);
    tg_store_stats_t st;

    /* the header's examples, tenant "acme" */
    tg_store_t *s = mk(1, 10, 0);
    expect_new(s, T_A, key36, 1, 0);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 160);
    assert_int_equal(complete(s, T_A, key36, 200, 1, 0), TG_OK); /* completing adds nothing */
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 160);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S(key36), 0), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 160 + 112);
    tg_store_destroy(s);
    tg_receipts_t *r = mk_index(1, 10, 0);
    assert_int_equal(index_put(r, T_A, id37, 1, 0, 0, NULL), TG_OK);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.bytes, 144);
    tg_receipts_destroy(r);
    /* the cost rule itself */
    assert_int_equal(TG_STORE_ALLOC_COST(0), 32);
    assert_int_equal(TG_STORE_ALLOC_COST(24), 32);
    assert_int_equal(TG_STORE_ALLOC_COST(25), 48);
    assert_int_equal(TG_STORE_ALLOC_COST(152), 160);
    assert_int_equal(TG_STORE_ALLOC_COST(153), 176);

    /* idempotency "k": 112 + 4 + 1 bytes -> 128; a cap of two entries, exactly */
    const size_t one = TG_STORE_ALLOC_COST(112 + 4 + 1);
    const size_t nonce = TG_STORE_ALLOC_COST(56 + 4 + 1);
    assert_int_equal(one, 128);
    assert_int_equal(nonce, 80);
    s = mk(1, 10, 2 * one);
    tg_idem_state_t stt;
    expect_new(s, T_A, "k", 1, 0);
    expect_new(s, T_A, "j", 1, 0);                                        /* at max */
    assert_int_equal(begin_state(s, T_A, "i", 1, 0, &stt), TG_ERR_LIMIT); /* max + 1 */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_ERR_LIMIT);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("n"), 0, 0), TG_ERR_LIMIT);
    assert_int_equal(restore(s, T_A, "i", 1, 200, 1, 0, 0), TG_ERR_LIMIT);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 2 * one);
    assert_int_equal(st.max_bytes, 2 * one);
    assert_int_equal(st.limit_rejections, 4);
    /* completing at the cap works: the reservation already holds its room */
    assert_int_equal(complete(s, T_A, "k", 200, 1, 3), TG_OK);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("j")), TG_OK);
    assert_int_equal(tg_store_sweep(s, 3 + R), 1);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 0);
    tg_store_destroy(s);
    /* an idempotency entry and a nonce, exactly */
    s = mk(1, 10, one + nonce);
    expect_new(s, T_A, "k", 1, 0);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_OK);        /* at max */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("m"), 0), TG_ERR_LIMIT); /* max + 1 */
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("m"), 0, 0), TG_ERR_LIMIT);
    assert_int_equal(tg_store_nonce_release(s, S(T_A), S("n")), TG_OK);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("m"), 0, 0), TG_OK);
    tg_store_destroy(s);
    /* one byte short of one entry: nothing fits */
    s = mk(1, 10, one - 1);
    assert_int_equal(begin_state(s, T_A, "k", 1, 0, &stt), TG_ERR_LIMIT);
    tg_store_destroy(s);

    /* the receipt index: "exec_1" for "acme", 80 + 4 + 6 -> 112; room for exactly two */
    const size_t rone = TG_STORE_ALLOC_COST(80 + 4 + 6);
    assert_int_equal(rone, 112);
    r = mk_index(1, 10, 2 * rone);
    assert_true(tg_receipts_has_room(r, 4, 6));
    assert_false(tg_receipts_has_room(r, 4, 6 + 2 * rone)); /* one entry larger than the cap */
    assert_false(tg_receipts_has_room(r, SIZE_MAX / 2, SIZE_MAX / 4));
    assert_int_equal(index_put(r, T_A, "exec_1", 1, 0, 0, NULL), TG_OK);
    assert_true(tg_receipts_has_room(r, 4, 6));
    assert_false(tg_receipts_has_room(r, 4, 23)); /* 128: more than the 112 left */
    assert_int_equal(index_put(r, T_A, "exec_2", 2, 0, 0, NULL), TG_OK); /* at max */
    assert_false(tg_receipts_has_room(r, 4, 6));
    assert_int_equal(index_put(r, T_A, "exec_3", 3, 0, 0, NULL), TG_ERR_LIMIT); /* max + 1 */
    tg_receipts_stats(r, &st);
    assert_int_equal(st.bytes, 2 * rone);
    assert_int_equal(st.limit_rejections, 1);
    tg_receipts_destroy(r);
}

/* ------------------------------------------------------------------ arguments */

static void test_invalid_args(void **state) {
    (void)state;
    tg_store_t *s = mk(1, 10, 0);
    uint8_t h[32];
    hash_of(h, 1);
    tg_idem_result_t res;
    char big[TG_STORE_MAX_KEY_LEN_LIMIT + 2];
    memset(big, 'k', sizeof big);
    char tenant[TG_STORE_TENANT_MAX + 1];
    memset(tenant, 't', sizeof tenant);
    const size_t maxk = tg_store_max_key_len(s);

    assert_int_equal(tg_store_idem_begin(NULL, S(T_A), S("k"), h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, NULL, 1, S("k"), h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, T_A, 0, S("k"), h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, tenant, TG_STORE_TENANT_MAX + 1, S("k"), h, 0, &res),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), NULL, 1, h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), "k", 0, h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), big, maxk + 1, h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), NULL, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(res.state, TG_IDEM_NONE);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), h, 0, NULL), TG_ERR_INVALID_ARG);
    /* limits at max are fine */
    assert_int_equal(tg_store_idem_begin(s, tenant, TG_STORE_TENANT_MAX, big, maxk, h, 0, &res),
                     TG_OK);
    assert_int_equal(res.state, TG_IDEM_NEW);

    /* complete: status range (100 and 599 are tested elsewhere), a position is required */
    tg_ledger_pos_t p = pos_n(1);
    assert_int_equal(tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 99, &p, 1),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 600, &p, 1),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 200, NULL, 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_complete(s, S(T_A), big, maxk + 1, 200, &p, 1),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_complete(NULL, S(T_A), S("k"), 200, &p, 1), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 200, &p, 1),
                     TG_OK);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), "", 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_abort(NULL, S(T_A), S("k")), TG_ERR_INVALID_ARG);

    /* restore */
    tg_idem_entry_t e = done_entry(1, 200, 1, 0);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), NULL, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, "", 0, S("r"), &e, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), big, maxk + 1, &e, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(NULL, S(T_A), S("r"), &e, 0), TG_ERR_INVALID_ARG);
    e.status = 42;
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), &e, 0), TG_ERR_INVALID_ARG);
    e.status = 600;
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), &e, 0), TG_ERR_INVALID_ARG);

    /* nonces */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), "", 0, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), big, maxk + 1, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), big, maxk, 0), TG_OK);
    assert_int_equal(tg_store_nonce_use(NULL, S(T_A), S("n"), 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_nonce_release(s, NULL, 0, S("n")), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), NULL, 2, 0, 0), TG_ERR_INVALID_ARG);

    tg_store_stats(NULL, NULL);
    tg_store_stats_t st;
    tg_store_stats(NULL, &st);
    assert_int_equal(st.entries, 0);
    tg_store_destroy(s);

    /* the receipt index: lengths as for keys (max fine, max + 1 refused), a position */
    tg_receipts_t *r = mk_index(1, 10, 0);
    tg_ledger_pos_t held = pos_n(9);
    assert_int_equal(tg_receipts_insert(NULL, S(T_A), S("x"), &p, 0, 0, &held), TG_ERR_INVALID_ARG);
    assert_int_equal(held.seq, 0); /* written even on error */
    assert_int_equal(tg_receipts_insert(r, S(T_A), S("x"), NULL, 0, 0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_insert(r, "", 0, S("x"), &p, 0, 0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_insert(r, tenant, TG_STORE_TENANT_MAX + 1, S("x"), &p, 0, 0, NULL),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_insert(r, S(T_A), NULL, 1, &p, 0, 0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_insert(r, S(T_A), big, maxk + 1, &p, 0, 0, NULL),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_insert(r, tenant, TG_STORE_TENANT_MAX, big, maxk, &p, 0, 0, NULL),
                     TG_OK);
    tg_ledger_pos_t got = pos_n(9);
    assert_int_equal(tg_receipts_get(r, S(T_A), S("x"), 0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_get(NULL, S(T_A), S("x"), 0, &got), TG_ERR_INVALID_ARG);
    assert_int_equal(got.seq, 0);
    assert_int_equal(tg_receipts_get(r, S(T_A), "", 0, 0, &got), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_get(r, S(T_A), big, maxk + 1, 0, &got), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_receipts_get(r, tenant, TG_STORE_TENANT_MAX, big, maxk, 0, &got), TG_OK);
    assert_pos(&got, 1);
    assert_false(tg_receipts_has_room(r, TG_STORE_TENANT_MAX + 1, 1));
    assert_false(tg_receipts_has_room(r, 4, maxk + 1));
    assert_true(tg_receipts_has_room(r, TG_STORE_TENANT_MAX, maxk));
    tg_receipts_stats(NULL, &st);
    assert_int_equal(st.entries, 0);
    tg_receipts_stats(r, NULL);
    tg_receipts_destroy(r);
}

/* ------------------------------------------------------------------ restore */

static void test_restore(void **state) {
    (void)state;
    tg_store_t *s = mk(4, 100, 0);
    const int64_t now = 50000;
    tg_store_stats_t st;
    tg_idem_state_t stt;
    tg_idem_result_t res;

    /* stored R-1 ago: live; stored R ago: skipped */
    assert_int_equal(restore(s, T_A, "live", 1, 200, 1, now - R + 1, now), TG_OK);
    assert_int_equal(restore(s, T_A, "old", 1, 200, 2, now - R, now), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 1);
    expect_replay(s, T_A, "live", 1, now, 200, 1);
    assert_int_equal(begin(s, T_A, "live", 1, now, &res), TG_OK);
    assert_int_equal(res.entry.stored_at_ms, now - R + 1); /* the record's time, not now */
    assert_int_equal(begin_state(s, T_A, "live", 2, now, &stt), TG_ERR_CONFLICT);
    expect_new(s, T_A, "old", 2, now);
    /* in flight: restore refuses */
    assert_int_equal(restore(s, T_A, "old", 1, 200, 3, now, now), TG_ERR_IN_FLIGHT);
    /* restored entry expires retention after its own stamp */
    expect_new(s, T_A, "live", 2, now - R + 1 + R);

    /* duplicates: the later record wins, in either order */
    assert_int_equal(restore(s, T_B, "dup", 1, 200, 4, now - 10, now), TG_OK);
    assert_int_equal(restore(s, T_B, "dup", 2, 409, 5, now - 5, now), TG_OK);
    assert_int_equal(restore(s, T_B, "dup", 1, 200, 4, now - 10, now), TG_OK);
    expect_replay(s, T_B, "dup", 2, now, 409, 5);
    /* the same time twice: the second replaces the first */
    assert_int_equal(restore(s, T_B, "dup", 2, 201, 6, now - 5, now), TG_OK);
    expect_replay(s, T_B, "dup", 2, now, 201, 6);
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_done, 1); /* only "dup" is done; "old"/"live" in flight */
    assert_int_equal(st.entries, 3);

    /* nonces */
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("n1"), now - R + 1, now), TG_OK);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("n2"), now - R, now), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n1"), now), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n2"), now), TG_OK);
    /* a later stamp extends the nonce; an earlier one does not shorten it */
    assert_int_equal(tg_store_nonce_restore(s, S(T_B), S("n3"), now - 500, now), TG_OK);
    assert_int_equal(tg_store_nonce_restore(s, S(T_B), S("n3"), now - 100, now), TG_OK);
    assert_int_equal(tg_store_nonce_restore(s, S(T_B), S("n3"), now - 900, now), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_B), S("n3"), now - 100 + R - 1), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S(T_B), S("n3"), now - 100 + R), TG_OK);
    tg_store_destroy(s);
}

/* The receipt index: a live id is never repointed, and saying so is an error that shows the
 * position it keeps. */
static void test_receipts(void **state) {
    (void)state;
    tg_receipts_t *r = mk_index(2, 4, 0);
    tg_ledger_pos_t held, p;
    tg_store_stats_t st;
    const int64_t now = 50000;

    /* absent */
    assert_int_equal(tg_receipts_get(r, S(T_A), S("e1"), now, &p), TG_ERR_NOT_FOUND);
    memset(&held, 0x5a, sizeof held);
    assert_int_equal(index_put(r, T_A, "e1", 1, now, now, &held), TG_OK);
    assert_int_equal(held.seq, 0); /* written (zero) when there is no conflict */
    assert_int_equal(held.segment, 0);
    expect_indexed(r, T_A, "e1", now, 1);
    /* the same record again changes nothing and is no collision: not even its stamp */
    assert_int_equal(index_put(r, T_A, "e1", 1, now + R - 1, now + R - 1, &held), TG_OK);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(tg_receipts_get(r, S(T_A), S("e1"), now + R, &p), TG_ERR_NOT_FOUND);
    assert_int_equal(index_put(r, T_A, "e1", 1, now, now, NULL), TG_OK);
    /* another position for the same id: refused, the first one kept and shown */
    assert_int_equal(index_put(r, T_A, "e1", 2, now + 2, now + 2, &held), TG_ERR_CONFLICT);
    assert_pos(&held, 1);
    assert_int_equal(index_put(r, T_A, "e1", 2, now + 2, now + 2, NULL), TG_ERR_CONFLICT);
    /* positions differing in one field only are different records */
    tg_ledger_pos_t q = pos_n(1);
    q.length++;
    assert_int_equal(tg_receipts_insert(r, S(T_A), S("e1"), &q, now, now, NULL), TG_ERR_CONFLICT);
    q = pos_n(1);
    q.offset++;
    assert_int_equal(tg_receipts_insert(r, S(T_A), S("e1"), &q, now, now, NULL), TG_ERR_CONFLICT);
    q = pos_n(1);
    q.segment++;
    assert_int_equal(tg_receipts_insert(r, S(T_A), S("e1"), &q, now, now, NULL), TG_ERR_CONFLICT);
    expect_indexed(r, T_A, "e1", now + 3, 1);
    /* per tenant: beta's e1 is not acme's */
    assert_int_equal(index_put(r, T_B, "e1", 3, now, now, NULL), TG_OK);
    expect_indexed(r, T_B, "e1", now, 3);
    expect_indexed(r, T_A, "e1", now, 1);
    /* past retention: skipped (nothing stored, no cap taken) */
    assert_int_equal(index_put(r, T_A, "e3", 4, now - R, now, &held), TG_OK);
    assert_int_equal(tg_receipts_get(r, S(T_A), S("e3"), now, &p), TG_ERR_NOT_FOUND);
    assert_int_equal(index_put(r, T_A, "e3", 4, now - R + 1, now, &held), TG_OK);
    expect_indexed(r, T_A, "e3", now, 4);
    /* full: acme e1, beta e1, acme e3, acme e4 */
    assert_int_equal(index_put(r, T_A, "e4", 6, now, now, NULL), TG_OK);
    assert_int_equal(index_put(r, T_A, "e5", 7, now, now, NULL), TG_ERR_LIMIT);
    assert_int_equal(tg_receipts_get(r, S(T_A), S("e5"), now, &p), TG_ERR_NOT_FOUND);
    tg_receipts_stats(r, &st);
    assert_int_equal(st.entries, 4);
    assert_int_equal(st.receipts, 4);
    assert_int_equal(st.idem_done + st.idem_in_flight + st.nonces, 0);
    assert_int_equal(st.limit_rejections, 1);
    /* once an entry expired its id is free again, even in a full index: the lookup that
     * inserts reclaims the old one first */
    assert_int_equal(index_put(r, T_A, "e1", 5, now + R, now + R, &held), TG_OK);
    expect_indexed(r, T_A, "e1", now + R, 5);
    (void)tg_receipts_sweep(r, now + R); /* the rest, unless lookups already reclaimed them */
    tg_receipts_stats(r, &st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.expired_reclaimed, 5); /* the get at now + R above, and these four */
    assert_int_equal(index_put(r, T_A, "e5", 7, now + R, now + R, NULL), TG_OK);
    tg_receipts_destroy(r);
}

static void test_nonce_release(void **state) {
    (void)state;
    tg_store_t *s = mk(2, 10, 0);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 1), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_release(s, S(T_B), S("n")), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_nonce_release(s, S(T_A), S("n")), TG_OK);
    assert_int_equal(tg_store_nonce_release(s, S(T_A), S("n")), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 2), TG_OK);
    /* an idempotency key of the same text is not a nonce */
    expect_new(s, T_A, "n", 1, 3);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("n")), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 3), TG_ERR_REPLAY);
    tg_store_destroy(s);
}

/* ------------------------------------------------------------------ allocation failure */

static void test_nomem_and_crypto(void **state) {
    (void)state;
    tg_store_t *s = NULL;
    tg_store_opts_t o = {.shards = 4, .max_entries = 64, .retention_ms = R};
    tg_diag_t d;

    /* wrapping is active (otherwise this test cannot see anything) */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_create(&s, &o, &d), TG_ERR_NOMEM);
    assert_null(s);
    /* every allocation point of create fails cleanly (ASan checks for leaks) */
    int created = 0;
    for (long k = 1; k < 64 && !created; k++) {
        tg_fail_alloc_after(k);
        tg_err_t rc = tg_store_create(&s, &o, &d);
        if (rc == TG_OK) {
            created = 1;
        } else {
            assert_int_equal(rc, TG_ERR_NOMEM);
            assert_null(s);
        }
    }
    tg_fail_alloc_off();
    assert_true(created);

    tg_fail_sodium_init(true);
    tg_store_t *s2 = NULL;
    assert_int_equal(tg_store_create(&s2, &o, &d), TG_ERR_CRYPTO);
    tg_fail_sodium_init(false);

    uint8_t h[32];
    hash_of(h, 1);
    tg_idem_result_t res;
    tg_idem_state_t stt;
    tg_store_stats_t st;
    /* begin: the would-be entry */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), h, 0, &res), TG_ERR_NOMEM);
    assert_int_equal(res.state, TG_IDEM_NONE);
    expect_new(s, T_A, "k", 1, 0);
    /* complete allocates nothing (the reservation holds its room), nor does abort */
    tg_fail_alloc_after(0);
    assert_int_equal(complete(s, T_A, "k", 200, 1, 1), TG_OK);
    assert_int_equal(tg_fail_alloc_pending(), 0);
    tg_fail_alloc_off();
    expect_new(s, T_A, "gone", 1, 1);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("gone")), TG_OK);
    assert_int_equal(tg_fail_alloc_pending(), 0);
    tg_fail_alloc_off();
    /* a replay allocates exactly once (the would-be entry, freed again): no copy to free */
    tg_fail_alloc_after(1);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), h, 2, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(tg_fail_alloc_pending(), 0);
    tg_fail_alloc_off();
    assert_int_equal(begin_state(s, T_A, "k", 1, 2, &stt), TG_OK);
    assert_int_equal(stt, TG_IDEM_REPLAY);
    /* restore: the entry, once */
    tg_fail_alloc_after(0);
    assert_int_equal(restore(s, T_A, "r", 1, 200, 2, 0, 0), TG_ERR_NOMEM);
    tg_fail_alloc_after(1);
    assert_int_equal(restore(s, T_A, "r", 1, 200, 2, 0, 0), TG_OK);
    assert_int_equal(tg_fail_alloc_pending(), 0);
    /* nonces: use and restore allocate their entry, release nothing */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_ERR_NOMEM);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("n"), 0, 0), TG_ERR_NOMEM);
    tg_fail_alloc_off();
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("m"), 0), TG_OK);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_nonce_release(s, S(T_A), S("m")), TG_OK);
    assert_int_equal(tg_fail_alloc_pending(), 0);
    tg_fail_alloc_off();
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.limit_rejections, 0);
    tg_store_destroy(s);

    /* the receipt index: every allocation point of create, then insert's entry */
    tg_receipts_t *r = NULL;
    created = 0;
    for (long k = 0; k < 64 && !created; k++) {
        tg_fail_alloc_after(k);
        tg_err_t rc = tg_receipts_create(&r, &o, &d);
        if (rc == TG_OK) {
            created = 1;
        } else {
            assert_int_equal(rc, TG_ERR_NOMEM);
            assert_null(r);
        }
    }
    tg_fail_alloc_off();
    assert_true(created);
    tg_fail_sodium_init(true);
    tg_receipts_t *r2 = NULL;
    assert_int_equal(tg_receipts_create(&r2, &o, &d), TG_ERR_CRYPTO);
    assert_null(r2);
    tg_fail_sodium_init(false);
    tg_ledger_pos_t held;
    tg_fail_alloc_after(0);
    assert_int_equal(index_put(r, T_A, "e", 1, 0, 0, &held), TG_ERR_NOMEM);
    assert_int_equal(held.seq, 0);
    assert_int_equal(index_put(r, T_A, "e", 1, 0, 0, NULL), TG_OK);
    tg_fail_alloc_after(0); /* even a conflict allocates first: nothing changes */
    assert_int_equal(index_put(r, T_A, "e", 2, 0, 0, &held), TG_ERR_NOMEM);
    /* get and the room hint allocate nothing */
    tg_fail_alloc_after(0);
    expect_indexed(r, T_A, "e", 0, 1);
    assert_true(tg_receipts_has_room(r, 4, 1));
    assert_int_equal(tg_fail_alloc_pending(), 0);
    tg_fail_alloc_off();
    tg_receipts_destroy(r);
}

/* ------------------------------------------------------------------ threads */

#define ST_THREADS 8
#define ST_OPS 20000
#define ST_KEYS 256
#define ST_NONCES 2000

typedef struct stress {
    tg_store_t *s;
    atomic_int_fast64_t clock; /* logical time: one tick per operation */
    atomic_int news[2][ST_KEYS];
    atomic_int aborts[2][ST_KEYS];
    atomic_int completes[2][ST_KEYS];
    atomic_int replays;
    atomic_int nonce_ok[2][ST_NONCES];
    atomic_int bad; /* invariant violations seen inside threads */
    atomic_int stop;
} stress_t;

typedef struct worker {
    stress_t *st;
    uint64_t rng;
} worker_t;

static uint64_t xs(uint64_t *r) {
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    return *r;
}

static const char *stress_tenant(int t) { return t == 0 ? T_A : T_B; }

/* The one position each (tenant, key) is ever completed with. */
static unsigned expected_seq(int t, unsigned k) { return (unsigned)t * 100000u + k; }

static void *stress_worker(void *arg) {
    worker_t *w = arg;
    stress_t *st = w->st;
    char key[32];
    uint8_t h[32];
    for (int op = 0; op < ST_OPS; op++) {
        uint64_t r = xs(&w->rng);
        int t = (int)(r & 1);
        const char *tenant = stress_tenant(t);
        int64_t now = atomic_fetch_add(&st->clock, 1);
        if ((r >> 1) % 4 == 0) {
            unsigned n = (unsigned)((r >> 8) % ST_NONCES);
            snprintf(key, sizeof key, "nonce-%u", n);
            tg_err_t rc = tg_store_nonce_use(st->s, S(tenant), S(key), now);
            if (rc == TG_OK) {
                atomic_fetch_add(&st->nonce_ok[t][n], 1);
            } else if (rc != TG_ERR_REPLAY) {
                atomic_fetch_add(&st->bad, 1);
            }
            continue;
        }
        unsigned k = (unsigned)((r >> 8) % ST_KEYS);
        snprintf(key, sizeof key, "key-%u", k);
        /* one request per (tenant, key), except 1 in 16 that sends a different request */
        int conflicting = ((r >> 20) % 16) == 0;
        hash_of(h, conflicting ? 100000 + k : k);
        tg_idem_result_t res;
        tg_err_t rc = tg_store_idem_begin(st->s, S(tenant), S(key), h, now, &res);
        if (rc == TG_OK && res.state == TG_IDEM_NEW) {
            atomic_fetch_add(&st->news[t][k], 1);
            if (conflicting || (r >> 30) % 3 == 0) {
                if (tg_store_idem_abort(st->s, S(tenant), S(key)) != TG_OK) {
                    atomic_fetch_add(&st->bad, 1);
                }
                atomic_fetch_add(&st->aborts[t][k], 1);
            } else {
                tg_ledger_pos_t p = pos_n(expected_seq(t, k));
                if (tg_store_idem_complete(st->s, S(tenant), S(key), 200, &p, now) != TG_OK) {
                    atomic_fetch_add(&st->bad, 1);
                }
                atomic_fetch_add(&st->completes[t][k], 1);
            }
        } else if (rc == TG_OK && res.state == TG_IDEM_REPLAY) {
            tg_ledger_pos_t want = pos_n(expected_seq(t, k));
            if (conflicting || res.entry.status != 200 || res.entry.pos.seq != want.seq ||
                res.entry.pos.offset != want.offset || res.entry.pos.segment != want.segment ||
                res.entry.pos.length != want.length || memcmp(res.entry.request_hash, h, 32) != 0) {
                atomic_fetch_add(&st->bad, 1);
            }
            atomic_fetch_add(&st->replays, 1);
        } else if (rc != TG_ERR_IN_FLIGHT && rc != TG_ERR_CONFLICT) {
            atomic_fetch_add(&st->bad, 1);
        }
    }
    return NULL;
}

static void *stress_observer(void *arg) {
    stress_t *st = arg;
    while (!atomic_load(&st->stop)) {
        tg_store_stats_t s;
        tg_store_stats(st->s, &s);
        if (s.entries > s.max_entries) {
            atomic_fetch_add(&st->bad, 1);
        }
        /* retention is far beyond the logical clock: nothing may be reclaimed */
        if (tg_store_sweep(st->s, atomic_load(&st->clock)) != 0) {
            atomic_fetch_add(&st->bad, 1);
        }
        const struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void test_threaded_stress(void **state) {
    (void)state;
    stress_t *st = calloc(1, sizeof *st);
    assert_non_null(st);
    tg_store_opts_t o = {.shards = 16, .max_entries = 100000, .retention_ms = INT64_C(1) << 40};
    assert_int_equal(tg_store_create(&st->s, &o, NULL), TG_OK);
    pthread_t th[ST_THREADS];
    pthread_t obs;
    worker_t w[ST_THREADS];
    for (int i = 0; i < ST_THREADS; i++) {
        w[i].st = st;
        w[i].rng = 0x9e3779b97f4a7c15u * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, stress_worker, &w[i]), 0);
    }
    assert_int_equal(pthread_create(&obs, NULL, stress_observer, st), 0);
    for (int i = 0; i < ST_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    atomic_store(&st->stop, 1);
    pthread_join(obs, NULL);

    assert_int_equal(atomic_load(&st->bad), 0);
    int done_keys = 0;
    for (int t = 0; t < 2; t++) {
        for (unsigned k = 0; k < ST_KEYS; k++) {
            int news = atomic_load(&st->news[t][k]);
            int aborts = atomic_load(&st->aborts[t][k]);
            int completes = atomic_load(&st->completes[t][k]);
            /* every NEW ended in exactly one abort or complete; at most one complete ever */
            assert_int_equal(news, aborts + completes);
            assert_true(completes <= 1);
            done_keys += completes;
            if (completes == 1) {
                char key[32];
                snprintf(key, sizeof key, "key-%u", k);
                expect_replay(st->s, stress_tenant(t), key, k, atomic_load(&st->clock), 200,
                              expected_seq(t, k));
            }
        }
        for (unsigned n = 0; n < ST_NONCES; n++) {
            assert_true(atomic_load(&st->nonce_ok[t][n]) <= 1);
        }
    }
    assert_true(done_keys > ST_KEYS); /* the test did real work on both tenants */
    tg_store_stats_t s;
    tg_store_stats(st->s, &s);
    assert_int_equal(s.idem_in_flight, 0);
    assert_int_equal(s.idem_done, (uint64_t)done_keys);
    assert_int_equal(s.entries, s.idem_done + s.nonces);
    /* everything expires eventually and the counters return to zero */
    assert_int_equal(tg_store_sweep(st->s, INT64_MAX), s.entries);
    tg_store_stats(st->s, &s);
    assert_int_equal(s.entries, 0);
    assert_int_equal(s.bytes, 0);
    tg_store_destroy(st->s);
    free(st);
}

/* Short retention under churn: lazy reclaim and sweeps race with inserts. */
typedef struct churn {
    tg_store_t *s;
    atomic_int_fast64_t clock;
    atomic_int bad;
    int id;
} churn_t;

typedef struct churn_arg {
    churn_t *c;
    int id;
} churn_arg_t;

static void *churn_worker(void *arg) {
    churn_arg_t *a = arg;
    churn_t *c = a->c;
    char key[32];
    uint64_t rng = 0x1234567u + (uint64_t)a->id;
    for (int i = 0; i < ST_OPS / 2; i++) {
        int64_t now = atomic_fetch_add(&c->clock, 1);
        snprintf(key, sizeof key, "c%u", (unsigned)(xs(&rng) % 4096));
        tg_err_t rc = tg_store_nonce_use(c->s, S(T_A), S(key), now);
        if (rc != TG_OK && rc != TG_ERR_REPLAY && rc != TG_ERR_LIMIT) {
            atomic_fetch_add(&c->bad, 1);
        }
        if (a->id == 0 && i % 512 == 0) {
            (void)tg_store_sweep(c->s, now);
        }
    }
    return NULL;
}

static void test_threaded_churn(void **state) {
    (void)state;
    churn_t c = {0};
    tg_store_opts_t o = {.shards = 8, .max_entries = 1500, .retention_ms = 3000};
    assert_int_equal(tg_store_create(&c.s, &o, NULL), TG_OK);
    pthread_t th[4];
    churn_arg_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i].c = &c;
        args[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, churn_worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(atomic_load(&c.bad), 0);
    tg_store_stats_t s;
    tg_store_stats(c.s, &s);
    assert_true(s.entries <= 1500);
    assert_int_equal(s.entries, s.nonces);
    assert_true(s.expired_reclaimed > 0);
    (void)tg_store_sweep(c.s, INT64_MAX);
    tg_store_stats(c.s, &s);
    assert_int_equal(s.entries, 0);
    assert_int_equal(s.bytes, 0);
    tg_store_destroy(c.s);
}

/* Many threads index the same ids, each id at one position except for one thread that
 * tries another: every id keeps the first position it got, and every try at another one is a
 * conflict that shows it. Readers look ids up meanwhile and must only ever see that one. */
#define RX_THREADS 6
#define RX_IDS 512
#define RX_ROUNDS 8

typedef struct rx {
    tg_receipts_t *r;
    atomic_int bad;
    atomic_int inserted[RX_IDS]; /* TG_OK that stored something: exactly one per id */
    atomic_uint winner[RX_IDS];  /* 1 + the position's n for the id, from the first insert */
    atomic_int conflicts[RX_IDS];
} rx_t;

typedef struct rx_arg {
    rx_t *x;
    int id;
} rx_arg_t;

static void *rx_worker(void *arg) {
    rx_arg_t *a = arg;
    rx_t *x = a->x;
    char id[32];
    for (int round = 0; round < RX_ROUNDS; round++) {
        for (unsigned i = 0; i < RX_IDS; i++) {
            unsigned k = (i * 7u + (unsigned)a->id * 131u) % RX_IDS;
            snprintf(id, sizeof id, "exec_%u", k);
            /* thread 0 proposes another position for every id; the others all agree */
            unsigned n = a->id == 0 ? k + RX_IDS : k;
            tg_ledger_pos_t held;
            tg_err_t rc = index_put(x->r, T_A, id, n, 0, 0, &held);
            if (rc == TG_OK) {
                unsigned expect = 0;
                if (atomic_compare_exchange_strong(&x->winner[k], &expect, n + 1)) {
                    atomic_fetch_add(&x->inserted[k], 1);
                } else if (expect != n + 1) {
                    atomic_fetch_add(&x->bad, 1); /* OK for a position other than the kept one */
                }
            } else if (rc == TG_ERR_CONFLICT) {
                atomic_fetch_add(&x->conflicts[k], 1);
                if (held.seq == n) {
                    atomic_fetch_add(&x->bad, 1); /* a conflict with itself */
                }
            } else {
                atomic_fetch_add(&x->bad, 1);
            }
            tg_ledger_pos_t p;
            if (tg_receipts_get(x->r, S(T_A), S(id), 1, &p) != TG_OK ||
                (p.seq != k && p.seq != k + RX_IDS)) {
                atomic_fetch_add(&x->bad, 1);
            }
        }
    }
    return NULL;
}

static void test_threaded_receipts(void **state) {
    (void)state;
    rx_t *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->r = mk_index(8, 2 * RX_IDS, 0);
    pthread_t th[RX_THREADS];
    rx_arg_t args[RX_THREADS];
    for (int i = 0; i < RX_THREADS; i++) {
        args[i].x = x;
        args[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, rx_worker, &args[i]), 0);
    }
    for (int i = 0; i < RX_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    assert_int_equal(atomic_load(&x->bad), 0);
    char id[32];
    for (unsigned k = 0; k < RX_IDS; k++) {
        unsigned w = atomic_load(&x->winner[k]);
        assert_int_equal(atomic_load(&x->inserted[k]), 1);
        assert_true(w == k + 1 || w == k + RX_IDS + 1);
        snprintf(id, sizeof id, "exec_%u", k);
        expect_indexed(x->r, T_A, id, 1, w - 1);
        /* whoever lost tried RX_ROUNDS times at least: thread 0, or the five others */
        assert_true(atomic_load(&x->conflicts[k]) >= RX_ROUNDS);
    }
    tg_store_stats_t st;
    tg_receipts_stats(x->r, &st);
    assert_int_equal(st.entries, RX_IDS);
    assert_int_equal(st.receipts, RX_IDS);
    tg_receipts_destroy(x->r);
    free(x);
}

/* ------------------------------------------------------------------ the db interface */

static void test_db_args(void **state) {
    (void)state;
    tg_db_t *db = (tg_db_t *)&db;
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(NULL, &o, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_open(&db, NULL, &d), TG_ERR_INVALID_ARG);
    assert_null(db);
    o.backend = (tg_db_backend_t)7;
    db = (tg_db_t *)&db;
    assert_int_equal(tg_db_open(&db, &o, &d), TG_ERR_CONFIG);
    assert_null(db);
    assert_non_null(strstr(d.msg, "not built in"));
    o.backend = TG_DB_FILE;
    o.keys.shards = 3;
    assert_int_equal(tg_db_open(&db, &o, &d), TG_ERR_CONFIG);
    assert_null(db);
    o.keys.shards = 0;
    o.receipts.max_key_len = TG_STORE_MAX_KEY_LEN_LIMIT + 1;
    assert_int_equal(tg_db_open(&db, &o, &d), TG_ERR_CONFIG);
    assert_null(db);
    o.receipts.max_key_len = 0;
    /* every allocation of open fails cleanly (ASan checks for leaks) */
    int opened = 0;
    for (long k = 0; k < 64 && !opened; k++) {
        tg_fail_alloc_after(k);
        tg_err_t rc = tg_db_open(&db, &o, &d);
        if (rc == TG_OK) {
            opened = 1;
        } else {
            assert_int_equal(rc, TG_ERR_NOMEM);
            assert_null(db);
        }
    }
    tg_fail_alloc_off();
    assert_true(opened);
    tg_db_close(db); /* opened, never started */

    /* a NULL db refuses everything and fills every output */
    uint8_t h[32];
    hash_of(h, 1);
    tg_idem_result_t res;
    memset(&res, 0x5a, sizeof res);
    assert_int_equal(tg_db_claim_key(NULL, S(T_A), S("k"), h, 0, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(res.state, TG_IDEM_NONE);
    assert_int_equal(tg_db_claim_nonce(NULL, S(T_A), S("n"), 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_release_key(NULL, S(T_A), S("k")), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_release_nonce(NULL, S(T_A), S("n")), TG_ERR_INVALID_ARG);
    tg_ledger_pos_t p = pos_n(1);
    tg_ledger_pos_t out = pos_n(2);
    assert_int_equal(tg_db_complete_key(NULL, S(T_A), S("k"), 200, &p, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_index_receipt(NULL, S(T_A), S("e"), &p, 0, 0, &out), TG_ERR_INVALID_ARG);
    assert_int_equal(out.seq, 0);
    out = pos_n(2);
    assert_int_equal(tg_db_find_receipt(NULL, S(T_A), S("e"), 0, &out), TG_ERR_INVALID_ARG);
    assert_int_equal(out.seq, 0);
    assert_int_equal(tg_db_read(NULL, &p, NULL, NULL), TG_ERR_INVALID_ARG);
    tg_idem_entry_t e = done_entry(1, 200, 1, 0);
    assert_int_equal(tg_db_restore_key(NULL, S(T_A), S("k"), &e, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_restore_nonce(NULL, S(T_A), S("n"), 0, 0), TG_ERR_INVALID_ARG);
    tg_db_record_t rec = {.type = TG_LEDGER_TYPE_RECEIPT};
    assert_int_equal(tg_db_append(NULL, &rec, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_append_now(NULL, &rec, &out), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_start(NULL, NULL, NULL, NULL, &d), TG_ERR_INVALID_ARG);
    assert_false(tg_db_receipt_room(NULL, 4, 6));
    char why[64] = "x";
    assert_false(tg_db_health(NULL, why, sizeof why));
    assert_string_equal(why, "");
    tg_db_stats_t st;
    memset(&st, 0x5a, sizeof st);
    tg_db_stats(NULL, &st);
    assert_int_equal(st.keys.entries + st.receipts.max_entries, 0);
    tg_db_stats(NULL, NULL);
    tg_db_tick(NULL, 0, 0);
    tg_db_announce(NULL);
    tg_db_announce_end(NULL);
    tg_db_close(NULL);
}

/* What a record of these tests says in its meta ("tenant key nonce id"), decoded by the
 * replay callback the way the pipeline decodes its own meta. */
#define DB_AT 1000
#define DB_NOW 2000
#define DB_RETENTION (INT64_C(1) << 40)

typedef struct db_replay {
    tg_db_t *db;
    int records;
    tg_err_t fail; /* when set, returned for the first record */
} db_replay_t;

static tg_err_t db_replay(void *ud, const tg_ledger_record_t *rec) {
    db_replay_t *c = ud;
    char meta[256], t[64], k[64], n[64], id[64];
    if (c->fail != TG_OK) {
        return c->fail;
    }
    assert_true(rec->meta_len < sizeof meta);
    memcpy(meta, rec->meta, rec->meta_len);
    meta[rec->meta_len] = '\0';
    assert_int_equal(sscanf(meta, "%63s %63s %63s %63s", t, k, n, id), 4);
    tg_idem_entry_t e = done_entry(1, 200, 0, DB_AT);
    e.pos = rec->pos;
    assert_int_equal(tg_db_restore_key(c->db, S(t), S(k), &e, DB_NOW), TG_OK);
    assert_int_equal(tg_db_restore_nonce(c->db, S(t), S(n), DB_AT, DB_NOW), TG_OK);
    if (rec->type == TG_LEDGER_TYPE_RECEIPT) {
        assert_int_equal(tg_db_index_receipt(c->db, S(t), S(id), &rec->pos, DB_AT, DB_NOW, NULL),
                         TG_OK);
    }
    c->records++;
    return TG_OK;
}

static tg_db_t *db_start(const char *dir, tg_durability_t durability, db_replay_t *c,
                         tg_err_t want) {
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    o.keys.retention_ms = DB_RETENTION;
    o.receipts.retention_ms = DB_RETENTION;
    o.ledger = TG_LEDGER_OPTS_INIT;
    o.ledger.dir = dir;
    o.ledger.durability = durability;
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    memset(c, 0, sizeof *c);
    c->db = db;
    c->fail = want;
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_db_start(db, db_replay, c, &rep, &d), want);
    if (want == TG_OK) {
        assert_int_equal(tg_db_start(db, db_replay, c, &rep, &d), TG_ERR_INVALID_ARG);
    }
    return db;
}

static tg_db_record_t db_record(const char *meta, const char *payload, const uint8_t *hash) {
    tg_db_record_t r = {.type = TG_LEDGER_TYPE_RECEIPT,
                        .meta = meta,
                        .meta_len = strlen(meta),
                        .payload = payload,
                        .payload_len = strlen(payload),
                        .tenant = T_A,
                        .tenant_len = strlen(T_A),
                        .request_hash = hash,
                        .status = 200,
                        .at_ms = DB_AT};
    return r;
}

typedef struct db_done {
    atomic_int called;
    tg_err_t status;
    tg_ledger_pos_t pos;
} db_done_t;

static void db_on_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    db_done_t *w = ud;
    w->status = status;
    w->pos = *pos;
    atomic_store(&w->called, 1);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The file backend end to end: claims, a record made durable, the claims settled at its
 * position, reads; then a restart that rebuilds the same answers from the ledger alone. */
static void test_db_file(void **state) {
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tg-test-db.XXXXXX");
    assert_non_null(mkdtemp(dir));
    uint8_t h[32];
    hash_of(h, 1);
    db_replay_t c;
    tg_db_t *db = db_start(dir, TG_DURABILITY_NONE, &c, TG_OK);
    assert_int_equal(c.records, 0);
    char why[128] = "x";
    assert_true(tg_db_health(db, why, sizeof why));
    assert_string_equal(why, "");
    tg_db_stats_t dst;
    tg_db_stats(db, &dst);
    assert_true(dst.records.healthy); /* the record log's counters come through the db */

    /* steps 5-6, 7, 9, 9+ */
    tg_idem_result_t res;
    assert_int_equal(tg_db_claim_key(db, S(T_A), S("k1"), h, DB_AT, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_NEW);
    assert_int_equal(tg_db_claim_nonce(db, S(T_A), S("n1"), DB_AT), TG_OK);
    assert_true(tg_db_receipt_room(db, 4, 6));
    tg_db_announce(db);
    tg_db_announce_end(db);
    tg_db_record_t rec = db_record("acme k1 n1 exec_1", "receipt-1", h);
    tg_ledger_pos_t p1;
    assert_int_equal(tg_db_append_now(db, &rec, &p1), TG_OK);
    assert_int_equal(p1.seq, 1);
    assert_int_equal(tg_db_complete_key(db, S(T_A), S("k1"), 200, &p1, DB_AT), TG_OK);
    assert_int_equal(tg_db_index_receipt(db, S(T_A), S("exec_1"), &p1, DB_AT, DB_AT, NULL), TG_OK);
    assert_int_equal(tg_db_complete_key(db, S(T_A), S("k1"), 200, &p1, DB_AT), TG_ERR_NOT_FOUND);
    /* what later requests see */
    assert_int_equal(tg_db_claim_key(db, S(T_A), S("k1"), h, DB_NOW, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.entry.pos.seq, 1);
    assert_int_equal(tg_db_claim_nonce(db, S(T_A), S("n1"), DB_NOW), TG_ERR_REPLAY);
    tg_ledger_pos_t got;
    assert_int_equal(tg_db_find_receipt(db, S(T_A), S("exec_1"), DB_NOW, &got), TG_OK);
    assert_int_equal(got.offset, p1.offset);
    assert_int_equal(got.length, p1.length);
    tg_ledger_pos_t other = p1;
    other.seq++;
    assert_int_equal(tg_db_index_receipt(db, S(T_A), S("exec_1"), &other, DB_AT, DB_AT, &got),
                     TG_ERR_CONFLICT);
    assert_int_equal(got.seq, 1);
    tg_buf_t payload, meta;
    tg_buf_init(&payload, 0);
    tg_buf_init(&meta, 0);
    assert_int_equal(tg_db_read(db, &p1, &payload, &meta), TG_OK);
    assert_int_equal(payload.len, strlen("receipt-1"));
    assert_memory_equal(payload.data, "receipt-1", payload.len);
    assert_memory_equal(meta.data, "acme k1 n1 exec_1", meta.len);
    /* a request that failed before anything became durable gives its claims back */
    assert_int_equal(tg_db_claim_key(db, S(T_A), S("k2"), h, DB_AT, &res), TG_OK);
    assert_int_equal(tg_db_claim_nonce(db, S(T_A), S("n2"), DB_AT), TG_OK);
    assert_int_equal(tg_db_release_key(db, S(T_A), S("k2")), TG_OK);
    assert_int_equal(tg_db_release_nonce(db, S(T_A), S("n2")), TG_OK);
    assert_int_equal(tg_db_release_key(db, S(T_A), S("k2")), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_claim_nonce(db, S(T_A), S("n2"), DB_AT), TG_OK);
    assert_int_equal(tg_db_release_nonce(db, S(T_A), S("n2")), TG_OK);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.keys.entries, 2); /* k1 done, n1 */
    assert_int_equal(st.keys.idem_done, 1);
    assert_int_equal(st.receipts.entries, 1);
    tg_db_tick(db, DB_NOW, 1000); /* nothing expired, the ledger is well */
    tg_db_stats(db, &st);
    assert_int_equal(st.keys.entries + st.receipts.entries, 3);
    tg_db_close(db);

    /* the restart rebuilds the same answers from the ledger alone */
    db = db_start(dir, TG_DURABILITY_FSYNC, &c, TG_OK);
    assert_int_equal(c.records, 1);
    assert_int_equal(tg_db_claim_key(db, S(T_A), S("k1"), h, DB_NOW, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.entry.pos.seq, 1);
    assert_int_equal(res.entry.pos.offset, p1.offset);
    assert_int_equal(res.entry.stored_at_ms, DB_AT);
    assert_int_equal(tg_db_claim_nonce(db, S(T_A), S("n1"), DB_NOW), TG_ERR_REPLAY);
    assert_int_equal(tg_db_find_receipt(db, S(T_A), S("exec_1"), DB_NOW, &got), TG_OK);
    assert_int_equal(got.seq, 1);
    assert_int_equal(tg_db_read(db, &got, &payload, NULL), TG_OK);
    assert_memory_equal(payload.data, "receipt-1", payload.len);
    /* with a sync to share: the append answers through done, append_now refuses */
    hash_of(h, 2);
    tg_db_record_t rec2 = db_record("acme k3 n3 exec_3", "receipt-3", h);
    assert_int_equal(tg_db_append_now(db, &rec2, &got), TG_ERR_INVALID_ARG);
    db_done_t w = {0};
    assert_int_equal(tg_db_append(db, &rec2, db_on_done, &w), TG_OK);
    for (int i = 0; i < 5000 && !atomic_load(&w.called); i++) {
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(atomic_load(&w.called), 1);
    assert_int_equal(w.status, TG_OK);
    assert_int_equal(w.pos.seq, 2);
    rec2.type = 9;
    assert_int_equal(tg_db_append(db, &rec2, db_on_done, &w), TG_ERR_INVALID_ARG);
    /* retention passes: the tick reclaims everything */
    tg_db_tick(db, DB_AT + DB_RETENTION, 0);
    tg_db_stats(db, &st);
    assert_int_equal(st.keys.entries + st.receipts.entries, 0);
    tg_db_close(db);

    /* a replay callback that fails stops the start with its error; the db can be closed */
    db = db_start(dir, TG_DURABILITY_NONE, &c, TG_ERR_LEDGER_CORRUPT);
    tg_db_close(db);
    tg_buf_free(&payload);
    tg_buf_free(&meta);
    (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------------ fill estimate */

static tg_store_stats_t fill_st(uint64_t entries, uint64_t max_entries, uint64_t bytes,
                                uint64_t max_bytes) {
    return (tg_store_stats_t){
        .entries = entries, .max_entries = max_entries, .bytes = bytes, .max_bytes = max_bytes};
}

static void test_fill_estimate(void **state) {
    (void)state;
    tg_store_fill_t f = {0};
    tg_store_stats_t st = fill_st(0, 1000000, 0, 1u << 30);
    /* nothing before two samples, and NULLs are harmless */
    assert_true(tg_store_fill_seconds_to_full(&f, &st) < 0);
    tg_store_fill_sample(NULL, 0, &st);
    tg_store_fill_sample(&f, 0, NULL);
    assert_false(f.primed);
    assert_true(tg_store_fill_seconds_to_full(NULL, &st) < 0);
    tg_store_fill_sample(&f, 10000, &st);
    assert_true(f.primed);
    assert_true(tg_store_fill_seconds_to_full(&f, &st) < 0);
    /* a sample too close to the last is ignored */
    st = fill_st(5, 1000000, 800, 1u << 30);
    tg_store_fill_sample(&f, 10000 + TG_STORE_FILL_MIN_STEP_MS - 1, &st);
    assert_false(f.rated);
    /* 1,000 entries a second, 160 bytes each: the entry cap comes first, in 999 s */
    st = fill_st(1000, 1000000, 160000, 1u << 30);
    tg_store_fill_sample(&f, 11000, &st);
    assert_true(f.rated);
    assert_true(f.entries_per_s > 999.9 && f.entries_per_s < 1000.1);
    double eta = tg_store_fill_seconds_to_full(&f, &st);
    assert_true(eta > 998.9 && eta < 999.1);
    /* the rate holds steady: still 1,000/s, and the time left shrinks */
    for (int i = 2; i <= 60; i++) {
        st = fill_st(1000u * (unsigned)i, 1000000, 160000u * (unsigned)i, 1u << 30);
        tg_store_fill_sample(&f, 10000 + 1000 * i, &st);
    }
    assert_true(f.entries_per_s > 999.9 && f.entries_per_s < 1000.1);
    eta = tg_store_fill_seconds_to_full(&f, &st);
    assert_true(eta > 939.9 && eta < 940.1);
    /* large entries: the byte cap comes first (2 MiB left at 160,000 B/s) */
    tg_store_stats_t big = fill_st(60000, 1000000, (1u << 30) - (2u << 20), 1u << 30);
    eta = tg_store_fill_seconds_to_full(&f, &big);
    assert_true(eta > 13.0 && eta < 13.2);
    /* at a cap it is 0, whatever the rate */
    big = fill_st(1000000, 1000000, 0, 1u << 30);
    assert_true(tg_store_fill_seconds_to_full(&f, &big) == 0);
    big = fill_st(10, 1000000, 1u << 30, 1u << 30);
    assert_true(tg_store_fill_seconds_to_full(&f, &big) == 0);
    /* growth stops: the smoothed rate decays towards 0 (a minute's time constant), then
     * the table drains: not filling */
    for (int i = 61; i <= 300; i++) {
        tg_store_fill_sample(&f, 10000 + 1000 * i, &st);
    }
    assert_true(f.entries_per_s > 0 && f.entries_per_s < 25);
    for (int i = 301; i <= 320; i++) {
        st = fill_st(60000u - 1000u * (unsigned)(i - 300), 1000000, 0, 1u << 30);
        tg_store_fill_sample(&f, 10000 + 1000 * i, &st);
    }
    assert_true(f.entries_per_s < 0);
    assert_true(tg_store_fill_seconds_to_full(&f, &st) < 0);
    /* no caps at all (the PostgreSQL backend keeps keys on disk): never full */
    tg_store_stats_t nocap = fill_st(5, 0, 0, 0);
    assert_true(tg_store_fill_seconds_to_full(&f, &nocap) < 0);
    /* a clock step backwards restarts the estimate */
    tg_store_fill_sample(&f, 5000, &st);
    assert_true(f.primed);
    assert_false(f.rated);
    assert_int_equal(f.last_ms, 5000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_options),
        cmocka_unit_test(test_idem_lifecycle),
        cmocka_unit_test(test_idem_entry_copy),
        cmocka_unit_test(test_tenant_isolation),
        cmocka_unit_test(test_ttl_boundary),
        cmocka_unit_test(test_in_flight_never_expires),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_sweep_age_order),
        cmocka_unit_test(test_entry_cap),
        cmocka_unit_test(test_byte_cap),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_restore),
        cmocka_unit_test(test_receipts),
        cmocka_unit_test(test_nonce_release),
        cmocka_unit_test(test_nomem_and_crypto),
        cmocka_unit_test(test_threaded_stress),
        cmocka_unit_test(test_threaded_churn),
        cmocka_unit_test(test_threaded_receipts),
        cmocka_unit_test(test_db_args),
        cmocka_unit_test(test_db_file),
        cmocka_unit_test(test_fill_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
