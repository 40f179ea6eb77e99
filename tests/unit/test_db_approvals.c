/* test_db_approvals.c — the approvals of db.h (get, list, hold, release, commit, room,
 * restore, due, tick retention) on the file backend's table. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/approval.h"
#include "trigguard/db.h"

#define T0 1700000000000LL /* an arbitrary "now", ms */
#define TTL 60000LL
#define RETENTION 10000LL

static tg_db_t *open_db(uint64_t entries) {
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    o.approval_entries = entries;
    o.keys.retention_ms = RETENTION;
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    return db;
}

/* A pending version-1 approval, built by hand: the table stores what it is given. */
static tg_approval_t mk(const char *tenant, unsigned n, int64_t created_ms) {
    tg_approval_t a;
    memset(&a, 0, sizeof a);
    snprintf(a.id, sizeof a.id, "appr_%032x", n);
    snprintf(a.tenant, sizeof a.tenant, "%s", tenant);
    snprintf(a.escalation_id, sizeof a.escalation_id, "exec_%032x", n);
    snprintf(a.surface, sizeof a.surface, "payments");
    snprintf(a.rule, sizeof a.rule, "big-transfer");
    snprintf(a.reason, sizeof a.reason, "APPROVAL_REQUIRED");
    memset(a.request_hash, (int)n, sizeof a.request_hash);
    a.version = 1;
    a.status = TG_APPROVAL_PENDING;
    a.required = 1;
    a.n_approvers = 1;
    snprintf(a.approvers[0], sizeof a.approvers[0], "@finance");
    a.created_ms = created_ms;
    a.expires_ms = created_ms + TTL;
    a.consume_within_ms = TTL;
    return a;
}

/* The next version of a, with status s resolved at at_ms (0: still pending). */
static tg_approval_t step(const tg_approval_t *a, tg_approval_status_t s, int64_t at_ms) {
    tg_approval_t b = *a;
    b.version++;
    b.status = s;
    if (s != TG_APPROVAL_PENDING && s != TG_APPROVAL_CONSUMED) {
        b.resolved_ms = at_ms;
    }
    if (s == TG_APPROVAL_CONSUMED) {
        b.consumed_ms = at_ms;
        snprintf(b.consumed_by, sizeof b.consumed_by, "exec_%032x", 0xfffu);
    }
    return b;
}

#define ID(a) (a).id, strlen((a).id)
#define TEN(s) s, strlen(s)

static void test_create_get(void **state) {
    (void)state;
    tg_approval_t a = mk("acme", 1, T0), got;
    /* The create path: an ESCALATE receipt record carrying v1, durable, then commit. */
    char dir[] = "/tmp/tg_db_appr_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    o.ledger = TG_LEDGER_OPTS_INIT;
    o.ledger.dir = dir;
    o.ledger.durability = TG_DURABILITY_NONE;
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    assert_int_equal(tg_db_start(db, NULL, NULL, NULL, &d), TG_OK);
    uint8_t h[32] = {1};
    tg_db_record_t rec = {.type = TG_LEDGER_TYPE_RECEIPT,
                          .meta = "{}",
                          .meta_len = 2,
                          .payload = "{}",
                          .payload_len = 2,
                          .tenant = "acme",
                          .tenant_len = 4,
                          .request_hash = h,
                          .status = 200,
                          .at_ms = T0,
                          .approval = &a};
    tg_ledger_pos_t pos;
    assert_int_equal(tg_db_append_now(db, &rec, &pos), TG_OK);
    /* Not visible before its commit: get answers the committed state only. */
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &got), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_commit(db, &a, T0), TG_OK);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &got), TG_OK);
    assert_int_equal(got.version, 1);
    assert_memory_equal(&got, &a, sizeof a);
    /* another tenant's, an unknown id, a malformed id */
    assert_int_equal(tg_db_approval_get(db, TEN("other"), ID(a), &got), TG_ERR_NOT_FOUND);
    tg_approval_t b = mk("acme", 2, T0);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(b), &got), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), "appr_XYZ", 8, &got), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_approval_get(db, "", 0, ID(a), &got), TG_ERR_INVALID_ARG);
    tg_approval_t bad = a;
    bad.version = 0;
    assert_int_equal(tg_db_approval_commit(db, &bad, T0), TG_ERR_INVALID_ARG);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.approvals.entries, 1);
    assert_int_equal(st.approvals.max_entries, 100000);
    tg_db_close(db);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_hold_commit_release(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t a = mk("acme", 1, T0), cur;
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(a), T0, &cur), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_commit(db, &a, T0), TG_OK);
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(a), T0, &cur), TG_OK);
    assert_int_equal(cur.version, 1);
    /* one holder: a second review, resume or timer waits */
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(a), T0, &cur), TG_ERR_IN_FLIGHT);
    assert_int_equal(tg_db_approval_hold(db, TEN("other"), ID(a), T0, &cur), TG_ERR_NOT_FOUND);
    /* the next version, committed: get answers it and the hold is gone */
    tg_approval_t v2 = step(&a, TG_APPROVAL_APPROVED, T0 + 10);
    assert_int_equal(tg_db_approval_commit(db, &v2, T0 + 10), TG_OK);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    assert_int_equal(cur.status, TG_APPROVAL_APPROVED);
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(a), T0, &cur), TG_OK);
    /* release: nothing written, the state unchanged, the hold free again */
    assert_int_equal(tg_db_approval_release(db, TEN("acme"), ID(a)), TG_OK);
    assert_int_equal(tg_db_approval_release(db, TEN("acme"), ID(a)), TG_OK);
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(a), T0, &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    /* an older version never replaces a newer one, even from a commit */
    assert_int_equal(tg_db_approval_commit(db, &a, T0), TG_OK);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    tg_db_close(db);
}

static void test_list(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t a1 = mk("acme", 1, T0), a2 = mk("acme", 2, T0 + 1000),
                  a3 = mk("acme", 3, T0 + 2000), o = mk("other", 4, T0 + 3000);
    tg_approval_t d3 = step(&a3, TG_APPROVAL_DENIED, T0 + 2500);
    assert_int_equal(tg_db_approval_commit(db, &a1, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &a2, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &a3, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &d3, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &o, T0), TG_OK);
    tg_approval_t out[8];
    size_t n = 99;
    int64_t now = T0 + 5000;
    assert_int_equal(tg_db_approval_list(db, TEN("acme"), true, 0, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 3); /* newest created first, the other tenant's left out */
    assert_string_equal(out[0].id, a3.id);
    assert_string_equal(out[1].id, a2.id);
    assert_string_equal(out[2].id, a1.id);
    assert_int_equal(
        tg_db_approval_list(db, TEN("acme"), false, TG_APPROVAL_PENDING, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 2);
    assert_int_equal(
        tg_db_approval_list(db, TEN("acme"), false, TG_APPROVAL_DENIED, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a3.id);
    /* max bounds the answer */
    assert_int_equal(tg_db_approval_list(db, TEN("acme"), true, 0, now, out, 1, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a3.id);
    /* by the clock: a1 expires at T0 + TTL, a2 a second later; the stored status lags */
    now = T0 + TTL + 500;
    assert_int_equal(
        tg_db_approval_list(db, TEN("acme"), false, TG_APPROVAL_EXPIRED, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a1.id);
    assert_int_equal(out[0].status, TG_APPROVAL_PENDING);
    assert_int_equal(tg_db_approval_list(db, TEN("acme"), false, 77, now, out, 8, &n),
                     TG_ERR_INVALID_ARG);
    tg_db_close(db);
}

static void test_due(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t p = mk("acme", 1, T0);               /* pending, expires T0 + TTL */
    tg_approval_t ap = mk("acme", 2, T0);              /* approved at T0 + 100 */
    tg_approval_t dn = mk("other", 3, T0);             /* denied: never due */
    tg_approval_t fresh = mk("acme", 4, T0 + 2 * TTL); /* not expired yet */
    tg_approval_t ap2 = step(&ap, TG_APPROVAL_APPROVED, T0 + 100);
    tg_approval_t dn2 = step(&dn, TG_APPROVAL_DENIED, T0 + 100);
    assert_int_equal(tg_db_approval_commit(db, &p, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &ap2, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &dn2, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &fresh, T0), TG_OK);
    tg_db_approval_ref_t out[8];
    size_t n = 99;
    assert_int_equal(tg_db_approval_due(db, T0 + 50, out, 8, &n), TG_OK);
    assert_int_equal(n, 0);
    /* past the pending one's expiry (T0 + TTL) and the approved one's consume window
     * (T0 + 100 + TTL) */
    int64_t now = T0 + TTL + 200;
    assert_int_equal(tg_db_approval_due(db, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 2);
    bool saw_p = false, saw_ap = false;
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(out[i].tenant, "acme");
        saw_p |= strcmp(out[i].id, p.id) == 0;
        saw_ap |= strcmp(out[i].id, ap.id) == 0;
    }
    assert_true(saw_p && saw_ap);
    assert_int_equal(tg_db_approval_due(db, now, out, 1, &n), TG_OK);
    assert_int_equal(n, 1);
    /* a held one is being written by someone: not listed */
    tg_approval_t cur;
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(p), now, &cur), TG_OK);
    assert_int_equal(tg_db_approval_due(db, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, ap.id);
    /* the expiry step written: no longer due */
    tg_approval_t pe = step(&cur, TG_APPROVAL_EXPIRED, p.expires_ms);
    assert_int_equal(tg_db_approval_commit(db, &pe, now), TG_OK);
    assert_int_equal(tg_db_approval_due(db, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    tg_db_close(db);
}

static void test_restore_higher_wins(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t a = mk("acme", 1, T0), cur;
    tg_approval_t v2 = step(&a, TG_APPROVAL_PENDING, 0);
    tg_approval_t v3 = step(&v2, TG_APPROVAL_APPROVED, T0 + 5);
    assert_int_equal(tg_db_approval_restore(db, &a, T0), TG_OK);
    assert_int_equal(tg_db_approval_restore(db, &v3, T0), TG_OK);
    assert_int_equal(tg_db_approval_restore(db, &v2, T0), TG_OK); /* older: ignored */
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 3);
    assert_int_equal(cur.status, TG_APPROVAL_APPROVED);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.approvals.entries, 1);
    tg_db_close(db);
}

static void test_capacity(void **state) {
    (void)state;
    tg_db_t *db = open_db(2);
    tg_approval_t a = mk("acme", 1, T0), b = mk("acme", 2, T0), c = mk("acme", 3, T0);
    assert_true(tg_db_approval_room(db));
    assert_int_equal(tg_db_approval_commit(db, &a, T0), TG_OK);
    assert_int_equal(tg_db_approval_restore(db, &b, T0), TG_OK);
    assert_false(tg_db_approval_room(db));
    assert_int_equal(tg_db_approval_commit(db, &c, T0), TG_ERR_LIMIT);
    assert_int_equal(tg_db_approval_restore(db, &c, T0), TG_ERR_LIMIT);
    /* a new version of a held one still fits: it replaces its entry */
    tg_approval_t a2 = step(&a, TG_APPROVAL_DENIED, T0 + 1);
    assert_int_equal(tg_db_approval_commit(db, &a2, T0), TG_OK);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.approvals.entries, 2);
    assert_int_equal(st.approvals.max_entries, 2);
    assert_int_equal(st.approvals.limit_rejections, 2);
    tg_db_close(db);
}

/* Enough ticks for the sweep to have visited the whole table. */
static void ticks(tg_db_t *db, int64_t now) {
    for (int i = 0; i < 64; i++) {
        tg_db_tick(db, now, 0);
    }
}

static void test_tick_retention(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t a = mk("acme", 1, T0), p = mk("acme", 2, T0), ap = mk("acme", 3, T0), cur;
    tg_approval_t dn = step(&a, TG_APPROVAL_DENIED, T0 + 100); /* ended T0 + 100 */
    tg_approval_t ap2 = step(&ap, TG_APPROVAL_APPROVED, T0 + 100);
    tg_approval_t co = step(&ap2, TG_APPROVAL_CONSUMED, T0 + 200); /* ended T0 + 200 */
    assert_int_equal(tg_db_approval_commit(db, &dn, T0), TG_OK);
    assert_int_equal(tg_db_approval_commit(db, &p, T0), TG_OK); /* expires by clock T0 + TTL */
    assert_int_equal(tg_db_approval_commit(db, &co, T0), TG_OK);
    ticks(db, T0 + 100 + RETENTION); /* exactly at retention: kept */
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &cur), TG_OK);
    ticks(db, T0 + 150 + RETENTION);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(a), &cur), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(ap), &cur), TG_OK);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(p), &cur), TG_OK);
    ticks(db, T0 + 300 + RETENTION);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(ap), &cur), TG_ERR_NOT_FOUND);
    /* pending, expired by the clock at T0 + TTL but not yet stepped: kept while held (its
     * expiry is being written), dropped once retention passed its expiry */
    assert_int_equal(tg_db_approval_hold(db, TEN("acme"), ID(p), T0, &cur), TG_OK);
    ticks(db, T0 + TTL + RETENTION + 1);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(p), &cur), TG_OK);
    assert_int_equal(tg_db_approval_release(db, TEN("acme"), ID(p)), TG_OK);
    ticks(db, T0 + TTL + RETENTION + 1);
    assert_int_equal(tg_db_approval_get(db, TEN("acme"), ID(p), &cur), TG_ERR_NOT_FOUND);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_int_equal(st.approvals.entries, 0);
    assert_int_equal(st.approvals.expired_reclaimed, 3);
    tg_db_close(db);
}

#define RACERS 8

typedef struct racer {
    tg_db_t *db;
    const char *id;
    pthread_barrier_t *go;
    tg_err_t rc;
} racer_t;

static void *race_hold(void *arg) {
    racer_t *r = arg;
    tg_approval_t cur;
    pthread_barrier_wait(r->go);
    r->rc = tg_db_approval_hold(r->db, "acme", 4, r->id, strlen(r->id), T0, &cur);
    return NULL;
}

static void test_concurrent_holds(void **state) {
    (void)state;
    tg_db_t *db = open_db(0);
    tg_approval_t a = mk("acme", 1, T0);
    assert_int_equal(tg_db_approval_commit(db, &a, T0), TG_OK);
    for (int round = 0; round < 20; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, RACERS);
        pthread_t th[RACERS];
        racer_t r[RACERS];
        for (int i = 0; i < RACERS; i++) {
            r[i] = (racer_t){db, a.id, &go, TG_ERR_INTERNAL};
            assert_int_equal(pthread_create(&th[i], NULL, race_hold, &r[i]), 0);
        }
        int won = 0, busy = 0;
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            won += r[i].rc == TG_OK;
            busy += r[i].rc == TG_ERR_IN_FLIGHT;
        }
        pthread_barrier_destroy(&go);
        assert_int_equal(won, 1);
        assert_int_equal(busy, RACERS - 1);
        assert_int_equal(tg_db_approval_release(db, TEN("acme"), ID(a)), TG_OK);
    }
    tg_db_close(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_get),
        cmocka_unit_test(test_hold_commit_release),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_due),
        cmocka_unit_test(test_restore_higher_wins),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_tick_retention),
        cmocka_unit_test(test_concurrent_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
