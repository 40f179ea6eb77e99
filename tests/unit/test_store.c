/* test_store.c — idempotency/nonce store: lifecycle, isolation, TTL, caps, restore, threads. */
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

static tg_store_t *mk(size_t shards, size_t max_entries, size_t max_bytes) {
    tg_store_opts_t o = {0};
    tg_store_t *s = NULL;
    o.shards = shards;
    o.max_entries = max_entries;
    o.max_bytes = max_bytes;
    o.retention_ms = R;
    assert_int_equal(tg_store_create(&s, &o, NULL), TG_OK);
    assert_non_null(s);
    return s;
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
    tg_idem_result_free(&res);
    return rc;
}

static tg_err_t complete(tg_store_t *s, const char *t, const char *k, int status, const char *body,
                         int64_t now) {
    return tg_store_idem_complete(s, S(t), S(k), status, body, strlen(body), now);
}

static void expect_replay(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now,
                          int status, const char *body) {
    tg_idem_result_t res;
    assert_int_equal(begin(s, t, k, h, now, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.status, status);
    assert_int_equal(res.body_len, strlen(body));
    assert_memory_equal(res.body, body, strlen(body));
    assert_int_equal(res.body[res.body_len], '\0');
    tg_idem_result_free(&res);
    assert_null(res.body);
    assert_int_equal(res.state, TG_IDEM_NONE);
}

static void expect_new(tg_store_t *s, const char *t, const char *k, unsigned h, int64_t now) {
    tg_idem_state_t st;
    assert_int_equal(begin_state(s, t, k, h, now, &st), TG_OK);
    assert_int_equal(st, TG_IDEM_NEW);
}

/* ------------------------------------------------------------------ create / options */

static void test_create_options(void **state) {
    (void)state;
    tg_store_t *s = NULL;
    tg_diag_t d = {{0}};
    tg_store_opts_t o = {0};

    assert_int_equal(tg_store_create(&s, NULL, &d), TG_OK);
    assert_int_equal(tg_store_max_key_len(s), TG_STORE_DEFAULT_MAX_KEY_LEN);
    assert_int_equal(tg_store_max_response_len(s), TG_STORE_DEFAULT_MAX_RESPONSE_LEN);
    tg_store_stats_t st;
    tg_store_stats(s, &st);
    assert_int_equal(st.max_entries, TG_STORE_DEFAULT_MAX_ENTRIES);
    assert_int_equal(st.max_bytes, TG_STORE_DEFAULT_MAX_BYTES);
    assert_int_equal(st.entries, 0);
    tg_store_destroy(s);
    tg_store_destroy(NULL);
    assert_int_equal(tg_store_max_key_len(NULL), 0);

    assert_int_equal(tg_store_create(NULL, NULL, &d), TG_ERR_INVALID_ARG);

    struct {
        tg_store_opts_t o;
        const char *needle;
    } bad[] = {
        {{.shards = 3}, "power of two"},
        {{.shards = TG_STORE_MAX_SHARDS * 2}, "power of two"},
        {{.max_entries = ((size_t)1 << 32) + 1}, "max_entries"},
        {{.retention_ms = -1}, "retention"},
        {{.max_key_len = TG_STORE_MAX_KEY_LEN_LIMIT + 1}, "max_key_len"},
        {{.max_response_len = TG_STORE_MAX_RESPONSE_LEN_LIMIT + 1}, "max_response_len"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = (tg_store_t *)&d; /* must be reset to NULL on error */
        memset(&d, 0, sizeof d);
        assert_int_equal(tg_store_create(&s, &bad[i].o, &d), TG_ERR_CONFIG);
        assert_null(s);
        assert_non_null(strstr(d.msg, bad[i].needle));
    }
    /* the largest accepted values */
    o.shards = TG_STORE_MAX_SHARDS;
    o.max_entries = 16;
    o.max_key_len = TG_STORE_MAX_KEY_LEN_LIMIT;
    o.max_response_len = TG_STORE_MAX_RESPONSE_LEN_LIMIT;
    assert_int_equal(tg_store_create(&s, &o, &d), TG_OK);
    assert_int_equal(tg_store_max_key_len(s), TG_STORE_MAX_KEY_LEN_LIMIT);
    tg_store_destroy(s);
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

    const char body[] = "{\"decision\":\"PERMIT\",\"x\":\"\\u0000 bytes\"}";
    assert_int_equal(complete(s, T_A, "k1", 200, body, 20), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_in_flight, 0);
    assert_int_equal(st.idem_done, 1);

    expect_replay(s, T_A, "k1", 1, 21, 200, body);
    assert_int_equal(begin_state(s, T_A, "k1", 2, 21, &stt), TG_ERR_CONFLICT);
    /* completing or aborting again is a caller bug */
    assert_int_equal(complete(s, T_A, "k1", 200, body, 22), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("k1")), TG_ERR_NOT_FOUND);
    expect_replay(s, T_A, "k1", 1, 23, 200, body);
    /* never begun */
    assert_int_equal(complete(s, T_A, "nope", 200, body, 22), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("nope")), TG_ERR_NOT_FOUND);

    /* abort frees the key for a retry, which may carry a different request */
    expect_new(s, T_A, "k2", 5, 30);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), S("k2")), TG_OK);
    assert_int_equal(complete(s, T_A, "k2", 200, "x", 31), TG_ERR_NOT_FOUND);
    expect_new(s, T_A, "k2", 6, 31);
    assert_int_equal(tg_store_idem_complete(s, S(T_A), S("k2"), 503, NULL, 0, 32), TG_OK);
    expect_replay(s, T_A, "k2", 6, 33, 503, "");

    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.idem_done, 2);
    tg_store_destroy(s);
}

static void test_idem_binary_body_and_stored_at(void **state) {
    (void)state;
    tg_store_t *s = mk(1, 10, 0);
    char body[300];
    for (size_t i = 0; i < sizeof body; i++) {
        body[i] = (char)(i * 7);
    }
    expect_new(s, T_A, "bin", 1, 100);
    assert_int_equal(tg_store_idem_complete(s, S(T_A), S("bin"), 201, body, sizeof body, 150),
                     TG_OK);
    tg_idem_result_t res;
    assert_int_equal(begin(s, T_A, "bin", 1, 160, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.status, 201);
    assert_int_equal(res.stored_at_ms, 150);
    assert_int_equal(res.body_len, sizeof body);
    assert_memory_equal(res.body, body, sizeof body);
    tg_idem_result_free(&res);
    tg_idem_result_free(&res); /* twice is fine */
    tg_idem_result_free(NULL);
    tg_store_destroy(s);
}

static void test_tenant_isolation(void **state) {
    (void)state;
    tg_store_t *s = mk(8, 100, 0);

    expect_new(s, T_A, "shared", 1, 0);
    /* another tenant, same key, same or different request: its own entry */
    expect_new(s, T_B, "shared", 1, 0);
    assert_int_equal(complete(s, T_A, "shared", 200, "A-body", 1), TG_OK);
    assert_int_equal(complete(s, T_B, "shared", 200, "B-body", 1), TG_OK);
    expect_replay(s, T_A, "shared", 1, 2, 200, "A-body");
    expect_replay(s, T_B, "shared", 1, 2, 200, "B-body");
    /* B cannot abort or complete A's reservation */
    expect_new(s, T_A, "only-a", 3, 3);
    assert_int_equal(tg_store_idem_abort(s, S(T_B), S("only-a")), TG_ERR_NOT_FOUND);
    assert_int_equal(complete(s, T_B, "only-a", 200, "x", 4), TG_ERR_NOT_FOUND);
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
    expect_replay(s, T_A, "shared", 1, 8, 200, "A-body");
    tg_store_destroy(s);
}

static void test_ttl_boundary(void **state) {
    (void)state;
    tg_store_t *s = mk(2, 100, 0);
    const int64_t t0 = 1700000000000;
    tg_store_stats_t st;

    expect_new(s, T_A, "k", 1, t0 - 50);
    assert_int_equal(complete(s, T_A, "k", 200, "first", t0), TG_OK);
    /* retention counts from complete */
    expect_replay(s, T_A, "k", 1, t0 + R - 1, 200, "first");
    tg_idem_state_t stt;
    assert_int_equal(begin_state(s, T_A, "k", 2, t0 + R - 1, &stt), TG_ERR_CONFLICT);
    /* at exactly retention the entry is gone: a different request may use the key */
    expect_new(s, T_A, "k", 2, t0 + R);
    tg_store_stats(s, &st);
    assert_int_equal(st.expired_reclaimed, 1);
    assert_int_equal(st.entries, 1);
    assert_int_equal(complete(s, T_A, "k", 200, "second", t0 + R + 1), TG_OK);
    expect_replay(s, T_A, "k", 2, t0 + R + 2, 200, "second");

    /* nonces */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R - 1), TG_ERR_REPLAY);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R), TG_OK);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 + R), TG_ERR_REPLAY);

    /* a clock that steps back keeps entries (fail closed) */
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), t0 - 100000), TG_ERR_REPLAY);
    tg_store_destroy(s);
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
    assert_int_equal(complete(s, T_A, "stuck", 200, "late", 5000 * R), TG_OK);
    expect_replay(s, T_A, "stuck", 1, 5001 * R - 1, 200, "late");
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
            assert_int_equal(complete(s, T_A, key, 200, "body", i / 2), TG_OK);
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
    assert_int_equal(complete(s, T_A, "late", 200, "body", 1000), TG_OK);
    /* reserved at 5, still in flight: never reclaimed, stepped over */
    expect_new(s, T_A, "stuck", 1, 5);

    assert_int_equal(tg_store_sweep(s, 99 + R), 100); /* stamps 0..99 */
    assert_int_equal(tg_store_sweep(s, 99 + R), 0);
    assert_int_equal(tg_store_sweep(s, 767 + R), 668); /* the rest: 100..767, > 2 chunks */
    expect_replay(s, T_A, "late", 1, 999 + R, 200, "body");
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
        uint8_t h[32];
        hash_of(h, 1);
        assert_int_equal(tg_store_idem_restore(s, S(T_A), S("over"), h, 200, "x", 1, 0, 0),
                         TG_ERR_LIMIT);
        assert_int_equal(tg_store_nonce_restore(s, S(T_B), S("over"), 0, 0), TG_ERR_LIMIT);
        tg_store_stats(s, &st);
        assert_int_equal(st.entries, 8);
        assert_int_equal(st.max_entries, 8);
        assert_int_equal(st.limit_rejections, 4);
        assert_false(tg_store_has_room(s, 1)); /* full by count; the hint counts nothing */
        assert_int_equal(st.limit_rejections, 4);
        /* existing entries keep working when full */
        assert_int_equal(complete(s, T_A, "i0", 200, "ok", 1), TG_OK);
        expect_replay(s, T_A, "i0", 1, 2, 200, "ok");
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("n0"), 2), TG_ERR_REPLAY);
        /* freeing one slot admits exactly one */
        assert_int_equal(tg_store_idem_abort(s, S(T_A), S("i1")), TG_OK);
        assert_true(tg_store_has_room(s, 1));
        expect_new(s, T_A, "over", 1, 3);
        assert_false(tg_store_has_room(s, 1));
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("over"), 3), TG_ERR_LIMIT);
        /* expiry makes room lazily: i0 (done at 1) expires at 1 + R; the same key is reused */
        expect_new(s, T_A, "i0", 7, 1 + R);
        assert_int_equal(tg_store_nonce_release(s, S(T_B), S("n3")), TG_OK);
        assert_int_equal(tg_store_nonce_use(s, S(T_B), S("over"), 3), TG_OK);
        tg_store_stats(s, &st);
        assert_int_equal(st.entries, 8);
        tg_store_destroy(s);
    }
}

static void test_byte_cap(void **state) {
    (void)state;
    /* measure what one entry costs, then allow that plus 50 body bytes (less than an entry) */
    tg_store_t *probe = mk(1, 10, 0);
    tg_store_stats_t st;
    expect_new(probe, T_A, "k", 1, 0);
    tg_store_stats(probe, &st);
    size_t one = (size_t)st.bytes;
    tg_store_destroy(probe);

    tg_store_t *s = mk(1, 10, one + 50);
    char body[51];
    memset(body, 'b', sizeof body);
    assert_true(tg_store_has_room(s, one + 50));
    assert_false(tg_store_has_room(s, one + 51));
    assert_false(tg_store_has_room(s, SIZE_MAX));
    expect_new(s, T_A, "k", 1, 0);
    assert_true(tg_store_has_room(s, 50));
    assert_false(tg_store_has_room(s, 51));
    /* a second entry does not fit */
    tg_idem_state_t stt;
    assert_int_equal(begin_state(s, T_A, "j", 1, 0, &stt), TG_ERR_LIMIT);
    /* 51 body bytes do not fit: the reservation stays in flight */
    assert_int_equal(tg_store_idem_complete(s, S(T_A), S("k"), 200, body, 51, 1), TG_ERR_LIMIT);
    assert_int_equal(begin_state(s, T_A, "k", 1, 2, &stt), TG_ERR_IN_FLIGHT);
    /* 50 do */
    assert_int_equal(tg_store_idem_complete(s, S(T_A), S("k"), 200, body, 50, 3), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, one + 50);
    assert_int_equal(st.max_bytes, one + 50);
    assert_int_equal(st.limit_rejections, 2);
    assert_int_equal(tg_store_sweep(s, 3 + R), 1);
    tg_store_stats(s, &st);
    assert_int_equal(st.bytes, 0);
    tg_store_destroy(s);
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

    /* complete: status range, body length limit (max ok, max+1 refused) */
    size_t maxr = tg_store_max_response_len(s);
    char *body = calloc(1, maxr + 1);
    assert_non_null(body);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 99, "", 0, 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 600, "", 0, 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 200, NULL, 1, 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 200, body, maxr + 1, 1),
        TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_complete(s, S(T_A), big, maxk + 1, 200, "", 0, 1),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(
        tg_store_idem_complete(s, tenant, TG_STORE_TENANT_MAX, big, maxk, 200, body, maxr, 1),
        TG_OK);
    free(body);
    assert_int_equal(tg_store_idem_abort(s, S(T_A), "", 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_abort(NULL, S(T_A), S("k")), TG_ERR_INVALID_ARG);

    /* restore */
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), NULL, 200, "", 0, 0, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), h, 42, "", 0, 0, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), h, 200, NULL, 3, 0, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), h, 200, "", maxr + 1, 0, 0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_restore(s, "", 0, S("r"), h, 200, "", 0, 0, 0),
                     TG_ERR_INVALID_ARG);

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
}

/* ------------------------------------------------------------------ restore */

static void test_restore(void **state) {
    (void)state;
    tg_store_t *s = mk(4, 100, 0);
    const int64_t now = 50000;
    uint8_t h1[32];
    uint8_t h2[32];
    hash_of(h1, 1);
    hash_of(h2, 2);
    tg_store_stats_t st;
    tg_idem_state_t stt;

    /* stored R-1 ago: live; stored R ago: skipped */
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("live"), h1, 200, S("L"), now - R + 1, now),
                     TG_OK);
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("old"), h1, 200, S("O"), now - R, now),
                     TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 1);
    expect_replay(s, T_A, "live", 1, now, 200, "L");
    assert_int_equal(begin_state(s, T_A, "live", 2, now, &stt), TG_ERR_CONFLICT);
    expect_new(s, T_A, "old", 2, now);
    /* in flight: restore refuses */
    assert_int_equal(tg_store_idem_restore(s, S(T_A), S("old"), h1, 200, S("x"), now, now),
                     TG_ERR_IN_FLIGHT);
    /* restored entry expires retention after its own stamp */
    expect_new(s, T_A, "live", 2, now - R + 1 + R);

    /* duplicates: the later record wins, in either order */
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("dup"), h1, 200, S("early"), now - 10, now),
                     TG_OK);
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("dup"), h2, 409, S("late"), now - 5, now),
                     TG_OK);
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("dup"), h1, 200, S("early"), now - 10, now),
                     TG_OK);
    expect_replay(s, T_B, "dup", 2, now, 409, "late");
    tg_store_stats(s, &st);
    assert_int_equal(st.idem_done, 1); /* only "dup" is done; "old"/"live" in flight */

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

static void test_idem_get(void **state) {
    (void)state;
    tg_store_t *s = mk(2, 10, 0);
    uint8_t h[32];
    hash_of(h, 3);
    tg_idem_result_t res;
    /* absent */
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("x"), 0, &res), TG_ERR_NOT_FOUND);
    assert_int_equal(res.state, TG_IDEM_NONE);
    /* in flight is not found; done is, whatever the request hash; per tenant */
    expect_new(s, T_A, "x", 1, 0);
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("x"), 0, &res), TG_ERR_NOT_FOUND);
    assert_int_equal(complete(s, T_A, "x", 200, "pos", 10), TG_OK);
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("x"), 10 + R - 1, &res), TG_OK);
    assert_int_equal(res.state, TG_IDEM_REPLAY);
    assert_int_equal(res.status, 200);
    assert_int_equal(res.stored_at_ms, 10);
    assert_int_equal(res.body_len, 3);
    assert_memory_equal(res.body, "pos", 3);
    tg_idem_result_free(&res);
    assert_int_equal(tg_store_idem_get(s, S(T_B), S("x"), 11, &res), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("r"), h, 200, S("idx"), 5, 5), TG_OK);
    assert_int_equal(tg_store_idem_get(s, S(T_B), S("r"), 6, &res), TG_OK);
    assert_memory_equal(res.body, "idx", 3);
    tg_idem_result_free(&res);
    /* reads reserve nothing: the entry count is unchanged */
    tg_store_stats_t st;
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2);
    /* arguments and allocation failure */
    assert_int_equal(tg_store_idem_get(s, S(T_B), S("r"), 6, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_get(s, S(T_B), "", 0, 6, &res), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_get(NULL, S(T_B), S("r"), 6, &res), TG_ERR_INVALID_ARG);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_idem_get(s, S(T_B), S("r"), 6, &res), TG_ERR_NOMEM);
    assert_int_equal(res.state, TG_IDEM_NONE);
    tg_fail_alloc_off();
    /* expired. Last: a lookup at 10 + R also reclaims any expired entry that shares the
     * bucket, "r" included when the keyed hash puts them together (1 run in ~32), so no
     * read at an earlier time may follow it. */
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("x"), 10 + R, &res), TG_ERR_NOT_FOUND);
    tg_store_destroy(s);
}

/* The receipt index's insert: a live key is never repointed, and saying so is an error. */
static void test_idem_insert(void **state) {
    (void)state;
    tg_store_t *s = mk(2, 4, 0);
    uint8_t h[32];
    hash_of(h, 0);
    tg_idem_result_t res, held;
    tg_store_stats_t st;
    const int64_t now = 50000;

    assert_int_equal(tg_store_idem_insert(s, S(T_A), S("e1"), h, 200, S("pos-1"), now, now, &held),
                     TG_OK);
    assert_int_equal(held.state, TG_IDEM_NONE);
    /* the same record again changes nothing and is no collision */
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("e1"), h, 200, S("pos-1"), now + 1, now + 1, &held),
        TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 1);
    /* another position for the same id: refused, the first one kept and shown */
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("e1"), h, 200, S("pos-2"), now + 2, now + 2, &held),
        TG_ERR_CONFLICT);
    assert_int_equal(held.state, TG_IDEM_REPLAY);
    assert_int_equal(held.stored_at_ms, now);
    assert_int_equal(held.body_len, 5);
    assert_memory_equal(held.body, "pos-1", 5);
    tg_idem_result_free(&held);
    assert_int_equal(tg_store_idem_insert(s, S(T_A), S("e1"), h, 201, S("pos-1"), now, now, NULL),
                     TG_ERR_CONFLICT); /* a different status is a different entry too */
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("e1"), now + 3, &res), TG_OK);
    assert_memory_equal(res.body, "pos-1", 5);
    assert_int_equal(res.status, 200);
    tg_idem_result_free(&res);
    /* restore, by contrast, lets the later record take the key */
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("e1"), h, 200, S("pos-1"), now, now),
                     TG_OK);
    assert_int_equal(tg_store_idem_restore(s, S(T_B), S("e1"), h, 200, S("pos-2"), now + 1, now),
                     TG_OK);
    assert_int_equal(tg_store_idem_get(s, S(T_B), S("e1"), now + 2, &res), TG_OK);
    assert_memory_equal(res.body, "pos-2", 5);
    tg_idem_result_free(&res);
    /* per tenant: beta's e1 is not acme's */
    assert_int_equal(tg_store_idem_insert(s, S(T_B), S("e2"), h, 200, S("pos-3"), now, now, &held),
                     TG_OK);
    /* past retention: skipped; once the first entry expired, the id is free again */
    assert_int_equal(tg_store_idem_insert(s, S(T_A), S("e3"), h, 200, S("x"), now - R, now, &held),
                     TG_OK);
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("e3"), now, &res), TG_ERR_NOT_FOUND);
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("e1"), h, 200, S("pos-4"), now + R, now + R, &held),
        TG_OK);
    /* a reservation under the key */
    expect_new(s, T_A, "r", 1, now + R);
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("r"), h, 200, S("y"), now + R, now + R, &held),
        TG_ERR_IN_FLIGHT);
    assert_int_equal(held.state, TG_IDEM_NONE);
    /* full: acme e1, beta e1, beta e2, acme r */
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("e5"), h, 200, S("z"), now + R, now + R, &held),
        TG_ERR_LIMIT);
    /* the copy of the held entry cannot be made: out of memory, nothing changed (the new
     * entry and its body are allocated first, the copy third) */
    tg_fail_alloc_after(2);
    assert_int_equal(
        tg_store_idem_insert(s, S(T_A), S("e1"), h, 200, S("pos-5"), now + R, now + R, &held),
        TG_ERR_NOMEM);
    tg_fail_alloc_off();
    assert_int_equal(held.state, TG_IDEM_NONE);
    assert_int_equal(tg_store_idem_get(s, S(T_A), S("e1"), now + R, &res), TG_OK);
    assert_memory_equal(res.body, "pos-4", 5);
    tg_idem_result_free(&res);
    /* arguments, as restore */
    assert_int_equal(tg_store_idem_insert(s, S(T_A), S("e6"), NULL, 200, S("z"), now, now, &held),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_insert(s, S(T_A), "", 0, h, 200, S("z"), now, now, &held),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_store_idem_insert(s, S(T_A), S("e6"), h, 99, S("z"), now, now, &held),
                     TG_ERR_INVALID_ARG);
    tg_store_destroy(s);
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
    /* begin: entry allocation */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), h, 0, &res), TG_ERR_NOMEM);
    expect_new(s, T_A, "k", 1, 0);
    /* complete: body copy; the reservation survives */
    tg_fail_alloc_after(0);
    assert_int_equal(complete(s, T_A, "k", 200, "body", 1), TG_ERR_NOMEM);
    assert_int_equal(begin_state(s, T_A, "k", 1, 1, &stt), TG_ERR_IN_FLIGHT);
    assert_int_equal(complete(s, T_A, "k", 200, "body", 1), TG_OK);
    /* replay: the copy handed out (the entry pre-allocation comes first) */
    tg_fail_alloc_after(1);
    assert_int_equal(tg_store_idem_begin(s, S(T_A), S("k"), h, 2, &res), TG_ERR_NOMEM);
    assert_int_equal(res.state, TG_IDEM_NONE);
    expect_replay(s, T_A, "k", 1, 2, 200, "body");
    /* restore: entry, then body */
    for (long k = 0; k < 2; k++) {
        tg_fail_alloc_after(k);
        assert_int_equal(tg_store_idem_restore(s, S(T_A), S("r"), h, 200, S("b"), 0, 0),
                         TG_ERR_NOMEM);
    }
    /* nonces */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_ERR_NOMEM);
    tg_fail_alloc_after(0);
    assert_int_equal(tg_store_nonce_restore(s, S(T_A), S("n"), 0, 0), TG_ERR_NOMEM);
    tg_fail_alloc_off();
    assert_int_equal(tg_store_nonce_use(s, S(T_A), S("n"), 0), TG_OK);
    tg_store_stats(s, &st);
    assert_int_equal(st.entries, 2);
    tg_store_destroy(s);
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

static void expected_body(char *out, size_t n, int t, unsigned k) {
    snprintf(out, n, "{\"tenant\":%d,\"key\":%u}", t, k);
}

static void *stress_worker(void *arg) {
    worker_t *w = arg;
    stress_t *st = w->st;
    char key[32];
    char body[64];
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
                expected_body(body, sizeof body, t, k);
                if (tg_store_idem_complete(st->s, S(tenant), S(key), 200, S(body), now) != TG_OK) {
                    atomic_fetch_add(&st->bad, 1);
                }
                atomic_fetch_add(&st->completes[t][k], 1);
            }
        } else if (rc == TG_OK && res.state == TG_IDEM_REPLAY) {
            expected_body(body, sizeof body, t, k);
            if (conflicting || res.status != 200 || res.body_len != strlen(body) ||
                memcmp(res.body, body, res.body_len) != 0) {
                atomic_fetch_add(&st->bad, 1);
            }
            atomic_fetch_add(&st->replays, 1);
        } else if (rc != TG_ERR_IN_FLIGHT && rc != TG_ERR_CONFLICT) {
            atomic_fetch_add(&st->bad, 1);
        }
        tg_idem_result_free(&res);
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
                char body[64];
                expected_body(body, sizeof body, t, k);
                char key[32];
                snprintf(key, sizeof key, "key-%u", k);
                expect_replay(st->s, stress_tenant(t), key, k, atomic_load(&st->clock), 200, body);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_options),
        cmocka_unit_test(test_idem_lifecycle),
        cmocka_unit_test(test_idem_binary_body_and_stored_at),
        cmocka_unit_test(test_tenant_isolation),
        cmocka_unit_test(test_ttl_boundary),
        cmocka_unit_test(test_in_flight_never_expires),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_sweep_age_order),
        cmocka_unit_test(test_entry_cap),
        cmocka_unit_test(test_byte_cap),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_restore),
        cmocka_unit_test(test_idem_get),
        cmocka_unit_test(test_idem_insert),
        cmocka_unit_test(test_nonce_release),
        cmocka_unit_test(test_nomem_and_crypto),
        cmocka_unit_test(test_threaded_stress),
        cmocka_unit_test(test_threaded_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
