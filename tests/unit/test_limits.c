/* test_limits.c — stateful limits (docs/POLICY.md "Limits"): the compiler's checks with
 * their JSON paths, the key and window of a frame (boundaries with an injected clock), the
 * kernel over a compiled limit, and the file backend's table of totals through db.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/db.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"
#include "trigguard/record.h"

/* A payments surface with a daily sum and an hourly count, and a second surface. %s: the
 * "limits" array. */
static const char BUNDLE_FMT[] =
    "{\"version\":\"t1\",\"surfaces\":{"
    "\"payments.charge\":{\"tier\":2,\"required_context\":{\"amount\":\"number\","
    "\"payee\":\"string\",\"note\":\"any\"},\"rules\":[{\"id\":\"ok\",\"effect\":\"permit\","
    "\"when\":[{\"field\":\"context.amount\",\"op\":\"lte\",\"value\":5000}]}]},"
    "\"deploy\":{\"tier\":2,\"default\":\"permit\"}},"
    "\"limits\":%s}";

static const char LIMITS_OK[] =
    "[{\"id\":\"daily-spend\",\"surface\":\"payments.charge\",\"key\":[\"actor\"],"
    "\"sum\":\"context.amount\",\"window_s\":86400,\"max\":10000,"
    "\"reason\":\"DAILY_LIMIT_EXCEEDED\",\"description\":\"per agent and day\"},"
    "{\"id\":\"deploys\",\"surface\":\"deploy\",\"count\":true,\"window_s\":3600,\"max\":3},"
    "{\"id\":\"per-payee\",\"surface\":\"payments.charge\",\"key\":[\"context.payee\","
    "\"principal.subject\"],\"count\":true,\"window_s\":60,\"max\":2}]";

static tg_err_t compile_limits(tg_policy_t **p, const char *limits, tg_diag_t *d) {
    static char text[16384 + sizeof BUNDLE_FMT]; /* the longest "limits" a test passes */
    snprintf(text, sizeof text, BUNDLE_FMT, limits);
    memset(d, 0, sizeof *d);
    return tg_policy_load_text(p, text, strlen(text), d);
}

static tg_policy_t *compile_ok(void) {
    tg_policy_t *p = NULL;
    tg_diag_t d;
    tg_err_t rc = compile_limits(&p, LIMITS_OK, &d);
    if (rc != TG_OK) {
        fail_msg("compile: %s", d.msg);
    }
    return p;
}

static void test_compile(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok();
    assert_int_equal(tg_policy_limit_count(p), 3);
    uint32_t id = 99;
    assert_int_equal(tg_policy_limit_find(&id, p, "deploys", 7), TG_OK);
    assert_int_equal(id, 1);
    assert_int_equal(tg_policy_limit_find(&id, p, "nope", 4), TG_ERR_NOT_FOUND);
    const tg_limit_t *l = tg_policy_limit(p, 0);
    assert_string_equal(l->id.ptr, "daily-spend");
    assert_string_equal(l->reason, "DAILY_LIMIT_EXCEEDED");
    assert_true(l->max == 10000);
    assert_int_equal(l->kind, TG_LIMIT_SUM);
    assert_string_equal(tg_policy_limit(p, 1)->reason, TG_LIMIT_DEFAULT_REASON);
    assert_null(tg_policy_limit(p, 3));
    assert_int_equal(tg_policy_limit_window_s(p, 1), 3600);
    uint32_t sid = 0, n = 0;
    assert_int_equal(tg_policy_surface_find(&sid, p, "payments.charge", 15), TG_OK);
    const uint32_t *ids = tg_policy_surface_limits(p, sid, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 2);
    assert_int_equal(tg_policy_surface_find(&sid, p, "deploy", 6), TG_OK);
    ids = tg_policy_surface_limits(p, sid, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    assert_null(tg_policy_surface_limits(p, 99, &n));
    assert_int_equal(n, 0);
    tg_policy_destroy(p);

    /* no limits at all: nothing changes */
    char text[2048];
    snprintf(text, sizeof text, BUNDLE_FMT, "[]");
    tg_diag_t d;
    assert_int_equal(tg_policy_load_text(&p, text, strlen(text), &d), TG_OK);
    assert_int_equal(tg_policy_limit_count(p), 0);
    tg_policy_destroy(p);
}

typedef struct {
    const char *limits;
    const char *want; /* a substring of the message, path first */
} bad_t;

#define LIM(body) "[{\"id\":\"x\",\"surface\":\"payments.charge\"," body "}]"

static void test_compile_errors(void **state) {
    (void)state;
    static const bad_t cases[] = {
        {"{}", "limits: must be an array"},
        {"[1]", "limits[0]: a limit must be an object"},
        {LIM("\"count\":true,\"window_s\":60,\"max\":1,\"extra\":1"), "limits[0]: unknown member"},
        {"[{\"surface\":\"deploy\",\"count\":true,\"window_s\":60,\"max\":1}]", "limits[0].id"},
        {"[{\"id\":\"x\",\"surface\":\"nope\",\"count\":true,\"window_s\":60,\"max\":1}]",
         "limits[0].surface: no surface \"nope\""},
        {LIM("\"window_s\":60,\"max\":1"), "exactly one of \"sum\" and \"count\""},
        {LIM("\"count\":true,\"sum\":\"context.amount\",\"window_s\":60,\"max\":1"),
         "exactly one of"},
        {LIM("\"count\":false,\"window_s\":60,\"max\":1"), "limits[0].count: must be true"},
        {LIM("\"sum\":\"context.payee\",\"window_s\":60,\"max\":1"),
         "limits[0].sum: context.payee must be in required_context"},
        {LIM("\"sum\":\"context.amout\",\"window_s\":60,\"max\":1"),
         "MISSING_CONTEXT before any limit"},
        {LIM("\"sum\":\"amount\",\"window_s\":60,\"max\":1"), "not a context.<field> reference"},
        {LIM("\"count\":true,\"key\":[\"context.note\"],\"window_s\":60,\"max\":1"),
         "limits[0].key[0]: context.note must be in required_context"},
        {LIM("\"count\":true,\"key\":[\"actor\",\"actor\"],\"window_s\":60,\"max\":1"),
         "limits[0].key[1]: \"actor\" appears twice"},
        {LIM("\"count\":true,\"key\":[\"signals.x\"],\"window_s\":60,\"max\":1"),
         "limits[0].key[0]: \"signals.x\" is not a key part"},
        {LIM("\"count\":true,\"key\":[\"actor\",\"tenant\",\"principal.subject\","
             "\"principal.issuer\",\"context.payee\"],\"window_s\":60,\"max\":1"),
         "limits[0].key: 5 parts (limit 4)"},
        {LIM("\"count\":true,\"key\":\"actor\",\"window_s\":60,\"max\":1"),
         "limits[0].key: must be an array"},
        {LIM("\"count\":true,\"window_s\":0,\"max\":1"), "limits[0].window_s"},
        {LIM("\"count\":true,\"window_s\":2678401,\"max\":1"), "limits[0].window_s"},
        {LIM("\"count\":true,\"window_s\":1.5,\"max\":1"), "limits[0].window_s"},
        {LIM("\"count\":true,\"window_s\":60,\"max\":-1"), "limits[0].max"},
        {LIM("\"count\":true,\"window_s\":60"), "limits[0].max"},
        {LIM("\"count\":true,\"window_s\":60,\"max\":\"5\""), "limits[0].max"},
        {LIM("\"count\":true,\"window_s\":60,\"max\":1,\"reason\":\"too-many\""),
         "limits[0].reason"},
        {LIM("\"count\":true,\"window_s\":60,\"max\":1,\"description\":5"),
         "limits[0].description"},
        {"[{\"id\":\"x\",\"surface\":\"deploy\",\"count\":true,\"window_s\":60,\"max\":1},"
         "{\"id\":\"x\",\"surface\":\"deploy\",\"count\":true,\"window_s\":60,\"max\":1}]",
         "limits[1].id: \"x\" is also limits[0]'s id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_policy_t *p = NULL;
        tg_diag_t d;
        tg_err_t rc = compile_limits(&p, cases[i].limits, &d);
        if (rc != TG_ERR_POLICY_INVALID || strstr(d.msg, cases[i].want) == NULL) {
            fail_msg("case %zu: rc %d, message \"%s\", wanted \"%s\"", i, (int)rc, d.msg,
                     cases[i].want);
        }
        assert_null(p);
    }
}

/* TG_FRAME_MAX_LIMITS limits on one surface compile; one more is refused. So is a bundle
 * with more than TG_POLICY_MAX_LIMITS. */
static void test_compile_bounds(void **state) {
    (void)state;
    char limits[16384];
    for (int total = TG_FRAME_MAX_LIMITS; total <= TG_FRAME_MAX_LIMITS + 1; total++) {
        size_t k = 0;
        k += (size_t)snprintf(limits + k, sizeof limits - k, "[");
        for (int i = 0; i < total; i++) {
            k += (size_t)snprintf(limits + k, sizeof limits - k,
                                  "%s{\"id\":\"l%d\",\"surface\":\"deploy\",\"count\":true,"
                                  "\"window_s\":60,\"max\":1}",
                                  i ? "," : "", i);
        }
        snprintf(limits + k, sizeof limits - k, "]");
        char *text = malloc(sizeof limits + 1024);
        assert_non_null(text);
        snprintf(text, sizeof limits + 1024, BUNDLE_FMT, limits);
        tg_policy_t *p = NULL;
        tg_diag_t d = {{0}};
        tg_err_t rc = tg_policy_load_text(&p, text, strlen(text), &d);
        free(text);
        if (total == TG_FRAME_MAX_LIMITS) {
            assert_int_equal(rc, TG_OK);
            tg_policy_destroy(p);
        } else {
            assert_int_equal(rc, TG_ERR_POLICY_INVALID);
            assert_non_null(strstr(d.msg, "limits[8].surface: more than 8 limits"));
        }
    }
    size_t k = 0;
    k += (size_t)snprintf(limits + k, sizeof limits - k, "[");
    for (int i = 0; i <= TG_POLICY_MAX_LIMITS; i++) {
        k += (size_t)snprintf(limits + k, sizeof limits - k, "%s{}", i ? "," : "");
    }
    snprintf(limits + k, sizeof limits - k, "]");
    tg_policy_t *p = NULL;
    tg_diag_t d;
    assert_int_equal(compile_limits(&p, limits, &d), TG_ERR_POLICY_INVALID);
    assert_non_null(strstr(d.msg, "limits: 65 limits (limit 64)"));
}

/* Frames borrow from their parsed requests: kept until the test ends. */
static json_t *kept[64];
static size_t n_kept;

static void frame_keep(tg_frame_t *f, const tg_policy_t *p, const char *req, const char *tenant) {
    json_error_t je;
    json_t *j = json_loads(req, 0, &je);
    assert_non_null(j);
    assert_true(n_kept < 64);
    kept[n_kept++] = j;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_frame_from_request(f, NULL, p, j, &d), TG_OK);
    f->tenant = tenant != NULL ? (tg_sv_t){tenant, (uint32_t)strlen(tenant)} : (tg_sv_t){NULL, 0};
}

static void release_kept(void) {
    while (n_kept > 0) {
        json_decref(kept[--n_kept]);
    }
}

#define REQ(actor, payee, amount)                                                                  \
    "{\"surface\":\"payments.charge\",\"action\":\"pay\",\"actor\":\"" actor "\","                 \
    "\"context\":{\"amount\":" amount ",\"payee\":\"" payee "\",\"note\":1}}"

static void test_key(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok();
    tg_frame_t a, b;
    uint8_t ka[32], kb[32];
    int64_t wa = 0, wb = 0;
    const int64_t now = INT64_C(1764806400000) + 5000; /* 2025-12-04 00:00:05 UTC */

    frame_keep(&a, p, REQ("agent-1", "p1", "300"), "acme");
    frame_keep(&b, p, REQ("agent-1", "p2", "999"), "acme");
    /* daily-spend is keyed by actor: payee and amount do not matter */
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 0, &a, now), TG_OK);
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 0, &b, now), TG_OK);
    assert_memory_equal(ka, kb, 32);
    assert_int_equal(wa, INT64_C(1764806400));
    /* per-payee is keyed by payee: they differ */
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 2, &a, now), TG_OK);
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 2, &b, now), TG_OK);
    assert_memory_not_equal(ka, kb, 32);
    assert_int_equal(wa, INT64_C(1764806400)); /* 60 s windows: 00:00:00 */

    /* another tenant, same actor: never the same total */
    frame_keep(&b, p, REQ("agent-1", "p1", "300"), "beta");
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 0, &a, now), TG_OK);
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 0, &b, now), TG_OK);
    assert_memory_not_equal(ka, kb, 32);
    /* another actor */
    frame_keep(&b, p, REQ("agent-2", "p1", "300"), "acme");
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 0, &b, now), TG_OK);
    assert_memory_not_equal(ka, kb, 32);
    /* unambiguous: tenant "ab" + actor "c" is not tenant "a" + actor "bc" */
    frame_keep(&a, p, REQ("c", "p1", "1"), "ab");
    frame_keep(&b, p, REQ("bc", "p1", "1"), "a");
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 0, &a, now), TG_OK);
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 0, &b, now), TG_OK);
    assert_memory_not_equal(ka, kb, 32);
    /* an absent actor is not the empty actor */
    frame_keep(&a, p, REQ("", "p1", "1"), "acme");
    frame_keep(&b, p, REQ("", "p1", "1"), "acme");
    b.actor = (tg_sv_t){NULL, 0};
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 0, &a, now), TG_OK);
    assert_int_equal(tg_policy_limit_key(kb, &wb, p, 0, &b, now), TG_OK);
    assert_memory_not_equal(ka, kb, 32);

    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 3, &a, now), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_limit_key(ka, &wa, p, 0, &a, -1), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_limit_key(NULL, &wa, p, 0, &a, now), TG_ERR_INVALID_ARG);
    release_kept();
    tg_policy_destroy(p);
}

/* Fixed windows aligned to the epoch: the last ms of a window and the first of the next. */
static void test_window_boundaries(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok();
    tg_frame_t f;
    frame_keep(&f, p, REQ("agent-1", "p1", "300"), "acme");
    uint8_t k1[32], k2[32];
    int64_t w = 0;
    const int64_t day = INT64_C(86400000);
    const int64_t midnight = INT64_C(20426) * day; /* 2025-12-04 00:00:00.000 UTC */
    assert_int_equal(tg_policy_limit_key(k1, &w, p, 0, &f, midnight - 1), TG_OK);
    assert_int_equal(w, (midnight - day) / 1000); /* 23:59:59.999 is still yesterday */
    assert_int_equal(tg_policy_limit_key(k2, &w, p, 0, &f, midnight), TG_OK);
    assert_int_equal(w, midnight / 1000); /* 00:00:00.000 starts today */
    assert_memory_equal(k1, k2, 32);      /* the key does not move, the window does */
    assert_int_equal(tg_policy_limit_key(k2, &w, p, 0, &f, midnight + day - 1), TG_OK);
    assert_int_equal(w, midnight / 1000);
    /* hourly */
    tg_frame_t g;
    frame_keep(&g, p, "{\"surface\":\"deploy\",\"action\":\"go\"}", "acme");
    const int64_t hour = INT64_C(3600000);
    assert_int_equal(tg_policy_limit_key(k1, &w, p, 1, &g, midnight + 3 * hour - 1), TG_OK);
    assert_int_equal(w, (midnight + 2 * hour) / 1000);
    assert_int_equal(tg_policy_limit_key(k1, &w, p, 1, &g, midnight + 3 * hour), TG_OK);
    assert_int_equal(w, (midnight + 3 * hour) / 1000);
    assert_int_equal(tg_policy_limit_key(k1, &w, p, 1, &g, 0), TG_OK);
    assert_int_equal(w, 0);
    release_kept();
    tg_policy_destroy(p);
}

/* The kernel over a compiled limit: the sum field reaches the frame, and the cap itself is
 * allowed while one unit more is DENY with the limit's reason. */
static void test_kernel_compiled(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok();
    tg_frame_t f;
    frame_keep(&f, p, REQ("agent-1", "p1", "300"), "acme");
    tg_decision_t d;
    /* unbound totals: fail closed */
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_SILENCE);
    assert_string_equal(d.reason, "INVALID_FRAME");
    f.n_limits = 2;
    f.limits[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 9700}};
    f.limits[1] = (tg_frame_slot_t){2, {.type = TG_VT_NUMBER, .num = 0}};
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT); /* 9700 + 300 = 10000 */
    f.limits[0].v.num = 9701;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_DENY);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    assert_int_equal(d.cause, TG_CAUSE_LIMIT);
    f.limits[0].v.num = 0;
    f.limits[1].v.num = 2; /* per-payee: 2 + 1 > 2 */
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_string_equal(d.reason, TG_LIMIT_DEFAULT_REASON);
    assert_memory_equal(d.subject.ptr, "per-payee", 9);
    release_kept();
    tg_policy_destroy(p);
}

/* ---- the file backend's totals (db.h) -------------------------------------------------- */

static tg_db_t *open_file_db(uint64_t entries) {
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    o.limit_entries = entries;
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    return db;
}

static tg_db_limit_ref_t ref_of(const char *name, uint8_t keybyte, int64_t start, int64_t win) {
    tg_db_limit_ref_t r = {
        .limit = name, .limit_len = strlen(name), .window_start_s = start, .window_s = win};
    memset(r.key, keybyte, sizeof r.key);
    return r;
}

static void test_store_reserve_release(void **state) {
    (void)state;
    tg_db_t *db = open_file_db(0);
    tg_db_limit_ref_t r = ref_of("daily-spend", 1, 86400, 86400);
    double t = -1;
    assert_int_equal(tg_db_limit_total(db, &r, &t), TG_OK);
    assert_true(t == 0);
    for (int i = 0; i < 33; i++) {
        assert_int_equal(tg_db_limit_reserve(db, &r, 300, 10000, &t), TG_OK);
    }
    assert_true(t == 9900);
    /* the 34th would make 10200: refused with the current total, nothing added */
    assert_int_equal(tg_db_limit_reserve(db, &r, 300, 10000, &t), TG_ERR_LIMIT_EXCEEDED);
    assert_true(t == 9900);
    /* exactly up to the cap is allowed */
    assert_int_equal(tg_db_limit_reserve(db, &r, 100, 10000, &t), TG_OK);
    assert_true(t == 10000);
    assert_int_equal(tg_db_limit_reserve(db, &r, 0, 10000, &t), TG_OK);
    assert_int_equal(tg_db_limit_release(db, &r, 100), TG_OK);
    assert_int_equal(tg_db_limit_total(db, &r, &t), TG_OK);
    assert_true(t == 9900);
    /* another key, another window, another limit: separate totals */
    tg_db_limit_ref_t other = ref_of("daily-spend", 2, 86400, 86400);
    assert_int_equal(tg_db_limit_total(db, &other, &t), TG_OK);
    assert_true(t == 0);
    other = ref_of("daily-spend", 1, 2 * 86400, 86400);
    assert_int_equal(tg_db_limit_total(db, &other, &t), TG_OK);
    assert_true(t == 0);
    other = ref_of("daily-spend-2", 1, 86400, 86400);
    assert_int_equal(tg_db_limit_total(db, &other, &t), TG_OK);
    assert_true(t == 0);
    /* a release never goes below zero; releasing an unknown entry is fine */
    assert_int_equal(tg_db_limit_release(db, &r, 1e9), TG_OK);
    assert_int_equal(tg_db_limit_total(db, &r, &t), TG_OK);
    assert_true(t == 0);
    assert_int_equal(tg_db_limit_release(db, &other, 5), TG_OK);
    /* arguments */
    assert_int_equal(tg_db_limit_reserve(db, &r, -1, 10, &t), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_limit_reserve(db, &r, 1, -1, &t), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_limit_reserve(db, NULL, 1, 10, &t), TG_ERR_INVALID_ARG);
    tg_db_limit_ref_t bad = ref_of("", 1, 0, 60);
    assert_int_equal(tg_db_limit_total(db, &bad, &t), TG_ERR_INVALID_ARG);
    bad = ref_of("x", 1, 0, 0);
    assert_int_equal(tg_db_limit_total(db, &bad, &t), TG_ERR_INVALID_ARG);
    tg_db_close(db);
}

static void test_store_bounds_and_sweep(void **state) {
    (void)state;
    tg_db_t *db = open_file_db(16);
    double t = 0;
    for (int i = 0; i < 16; i++) {
        tg_db_limit_ref_t r = ref_of("c", (uint8_t)i, 0, 60);
        assert_int_equal(tg_db_limit_reserve(db, &r, 1, 5, &t), TG_OK);
    }
    tg_db_limit_ref_t r17 = ref_of("c", 200, 0, 60);
    assert_int_equal(tg_db_limit_reserve(db, &r17, 1, 5, &t), TG_ERR_LIMIT); /* full: 503 */
    /* an entry already held still takes more */
    tg_db_limit_ref_t r0 = ref_of("c", 0, 0, 60);
    assert_int_equal(tg_db_limit_reserve(db, &r0, 1, 5, &t), TG_OK);
    assert_true(t == 2);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.limits.entries, 16);
    assert_int_equal(st.limits.max_entries, 16);
    assert_int_equal(st.limits.limit_rejections, 1);
    /* the window [0, 60 s) is over at 60 000 ms, not at 59 999 */
    for (int k = 0; k < 64; k++) {
        tg_db_tick(db, 59999, 0);
    }
    tg_db_stats(db, &st);
    assert_int_equal(st.limits.entries, 16);
    for (int k = 0; k < 64; k++) {
        tg_db_tick(db, 60000, 0);
    }
    tg_db_stats(db, &st);
    assert_int_equal(st.limits.entries, 0);
    assert_int_equal(st.limits.expired_reclaimed, 16);
    assert_int_equal(tg_db_limit_reserve(db, &r17, 1, 5, &t), TG_OK);
    tg_db_close(db);
}

/* Threads racing one entry: the check and the add are one step, so exactly
 * floor(max / amount) reservations succeed however they interleave. */
typedef struct {
    tg_db_t *db;
    int ok;
} racer_t;

static void *racer(void *arg) {
    racer_t *r = arg;
    tg_db_limit_ref_t ref = ref_of("race", 7, 0, 60);
    for (int i = 0; i < 100; i++) {
        double t = 0;
        tg_err_t rc = tg_db_limit_reserve(r->db, &ref, 7, 1000, &t);
        if (rc == TG_OK) {
            r->ok++;
        } else if (rc != TG_ERR_LIMIT_EXCEEDED || t > 1000) {
            r->ok = -100000; /* anything else is a failure */
        }
    }
    return NULL;
}

static void test_store_race(void **state) {
    (void)state;
    tg_db_t *db = open_file_db(0);
    enum { N = 8 };
    pthread_t th[N];
    racer_t r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (racer_t){db, 0};
        assert_int_equal(pthread_create(&th[i], NULL, racer, &r[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        total += r[i].ok;
    }
    assert_int_equal(total, 1000 / 7);
    double t = 0;
    tg_db_limit_ref_t ref = ref_of("race", 7, 0, 60);
    assert_int_equal(tg_db_limit_total(db, &ref, &t), TG_OK);
    assert_true(t == (1000 / 7) * 7);
    tg_db_close(db);
}

/* The rebuild: restore adds unconditionally, skips ended windows, and counts as full. */
static void test_store_restore(void **state) {
    (void)state;
    tg_db_t *db = open_file_db(16);
    tg_db_limit_ref_t r = ref_of("daily-spend", 1, 0, 86400);
    double t = 0;
    assert_int_equal(tg_db_limit_restore(db, &r, 7000, 86399999), TG_OK);
    assert_int_equal(tg_db_limit_restore(db, &r, 7000, 86399999), TG_OK); /* over max: durable */
    assert_int_equal(tg_db_limit_total(db, &r, &t), TG_OK);
    assert_true(t == 14000);
    tg_db_limit_ref_t old = ref_of("daily-spend", 2, 0, 86400);
    assert_int_equal(tg_db_limit_restore(db, &old, 5, 86400000), TG_OK); /* ended: skipped */
    assert_int_equal(tg_db_limit_total(db, &old, &t), TG_OK);
    assert_true(t == 0);
    for (int i = 0; i < 15; i++) {
        tg_db_limit_ref_t x = ref_of("n", (uint8_t)i, 0, 86400);
        assert_int_equal(tg_db_limit_restore(db, &x, 1, 0), TG_OK);
    }
    tg_db_limit_ref_t x = ref_of("n", 99, 0, 86400);
    assert_int_equal(tg_db_limit_restore(db, &x, 1, 0), TG_ERR_LIMIT);
    tg_db_close(db);
}

/* The record meta carries the contributions and reads them back (record.h "l"). */
static void test_record_meta(void **state) {
    (void)state;
    tg_record_limit_t l[2] = {
        {.limit = {"daily-spend", 11},
         .window_start_s = 1764806400,
         .window_s = 86400,
         .amount = 300},
        {.limit = {"per-payee", 9}, .window_start_s = 1764806400, .window_s = 60, .amount = 1.5},
    };
    memset(l[0].key, 0xab, 32);
    memset(l[1].key, 0x01, 32);
    static const char rh[] = "00000000000000000000000000000000000000000000000000000000000000ff";
    tg_record_meta_t m = {.at_ms = 1764806400123,
                          .request_hash = {rh, 64},
                          .status = 200,
                          .tenant = {"acme", 4},
                          .limits = l,
                          .n_limits = 2};
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_META_MAX);
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_non_null(strstr(b.data, ",\"l\":[[\"daily-spend\",\"abab"));
    assert_non_null(strstr(b.data, "\",1764806400,86400,300],[\"per-payee\",\"0101"));
    assert_non_null(strstr(b.data, ",1764806400,60,1.5]],\"rh\""));
    static const char payload[] =
        "{\"decision\":\"PERMIT\",\"reasonCode\":\"NO_POLICY_VIOLATION\",\"executionId\":\"e\","
        "\"policyVersion\":\"v\"}";
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, b.data, b.len, payload, strlen(payload)), TG_OK);
    assert_int_equal(v.meta.n_limits, 2);
    assert_memory_equal(v.meta.limits[0].limit.ptr, "daily-spend", 11);
    assert_memory_equal(v.meta.limits[0].key, l[0].key, 32);
    assert_int_equal(v.meta.limits[1].window_s, 60);
    assert_true(v.meta.limits[1].amount == 1.5);
    tg_record_view_free(&v);
    /* old records without "l" still read */
    m.n_limits = 0;
    tg_buf_reset(&b);
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_null(strstr(b.data, "\"l\""));
    assert_int_equal(tg_record_view(&v, b.data, b.len, payload, strlen(payload)), TG_OK);
    assert_int_equal(v.meta.n_limits, 0);
    tg_record_view_free(&v);
    /* a negative amount is refused; a malformed "l" is corrupt */
    m.n_limits = 1;
    l[0].amount = -1;
    tg_buf_reset(&b);
    assert_int_equal(tg_record_meta_write(&b, &m), TG_ERR_INVALID_ARG);
    static const char bad[] = "{\"at\":1,\"l\":[[\"x\",\"zz\",0,60,1]],\"rh\":\"" /* bad hex */
                              "00000000000000000000000000000000000000000000000000000000000000ff"
                              "\",\"s\":200,\"t\":\"acme\"}";
    assert_int_equal(tg_record_view(&v, bad, strlen(bad), payload, strlen(payload)),
                     TG_ERR_LEDGER_CORRUPT);
    tg_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_compile_bounds),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_window_boundaries),
        cmocka_unit_test(test_kernel_compiled),
        cmocka_unit_test(test_store_reserve_release),
        cmocka_unit_test(test_store_bounds_and_sweep),
        cmocka_unit_test(test_store_race),
        cmocka_unit_test(test_store_restore),
        cmocka_unit_test(test_record_meta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
