/* test_db_approvals.c — the approvals of db.h (get, list, hold, release, commit, room,
 * restore, due, tick retention, the durable write of rec->approval) on the file backend,
 * and the same cases on PostgreSQL when TG_DB_APPROVALS_PG_URL names a migrated database
 * (tests/integration/pg_db_approvals.sh runs this binary so, on a throwaway cluster). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/approval.h"
#include "trigguard/db.h"

#define TTL_S 60
#define TTL (TTL_S * 1000LL)
#define RETENTION 10000LL

typedef struct fx {
    tg_db_t *db;
    bool pg;
    char dir[64];    /* file: the ledger directory */
    char tenant[32]; /* a fresh tenant per test: pg cases share one database */
    int64_t t0;      /* "now" of the test, ms */
} fx_t;

static unsigned tenant_seq;

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static tg_db_t *open_db(bool pg, uint64_t entries, char *dir) {
    tg_db_opts_t o = {.backend = pg ? TG_DB_POSTGRES : TG_DB_FILE};
    o.approval_entries = entries;
    o.keys.retention_ms = RETENTION;
    o.keys.max_key_len = 255;
    o.ledger = TG_LEDGER_OPTS_INIT;
    if (pg) {
        o.pg = (tg_db_pg_opts_t){.url = getenv("TG_DB_APPROVALS_PG_URL"),
                                 .pool = 4,
                                 .timeout_ms = 5000,
                                 .claim_timeout_ms = 30000,
                                 .commit_timeout_ms = 5000};
    } else {
        o.ledger.dir = dir;
        o.ledger.durability = TG_DURABILITY_NONE;
    }
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    if (tg_db_start(db, NULL, NULL, NULL, &d) != TG_OK) {
        fail_msg("tg_db_start: %s", d.msg);
    }
    return db;
}

static int setup_with(void **state, bool pg, uint64_t entries) {
    if (pg && getenv("TG_DB_APPROVALS_PG_URL") == NULL) {
        *state = NULL;
        return 0; /* each pg case skips itself */
    }
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->pg = pg;
    if (!pg) {
        snprintf(f->dir, sizeof f->dir, "/tmp/tg_db_appr_XXXXXX");
        assert_non_null(mkdtemp(f->dir));
    }
    snprintf(f->tenant, sizeof f->tenant, "t%ld-%u-%lld", (long)getpid(), ++tenant_seq,
             (long long)(wall_ms() % 100000));
    f->t0 = wall_ms();
    f->db = open_db(pg, entries, f->dir);
    *state = f;
    return 0;
}

static int setup_file(void **state) { return setup_with(state, false, 0); }
static int setup_file_small(void **state) { return setup_with(state, false, 2); }
static int setup_pg(void **state) { return setup_with(state, true, 0); }

static int teardown(void **state) {
    fx_t *f = *state;
    if (f == NULL) {
        return 0;
    }
    tg_db_close(f->db);
    if (!f->pg) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
    }
    free(f);
    return 0;
}

#define FX()                                                                                       \
    fx_t *f = *state;                                                                              \
    if (f == NULL) {                                                                               \
        skip();                                                                                    \
    }

/* ---- approvals, through approval.h's transitions -------------------------------------------- */

static const uint8_t HASH[32] = {7, 7, 7};

static tg_approval_t escalate(const fx_t *f, int64_t at_ms) {
    char id[TG_APPROVAL_ID_LEN + 1], exec[38];
    assert_int_equal(tg_approval_new_id(id), TG_OK);
    snprintf(exec, sizeof exec, "exec_%s", id + 5);
    tg_approval_spec_t spec = {.required = 1,
                               .n_approvers = 1,
                               .approvers = {"@finance"},
                               .ttl_s = TTL_S,
                               .consume_within_s = TTL_S};
    tg_approval_t a;
    assert_int_equal(tg_approval_init(&a, id, f->tenant, HASH, exec, "payments", "big-transfer",
                                      "APPROVAL_REQUIRED", &spec, at_ms),
                     TG_OK);
    return a;
}

static tg_approval_t reviewed(const tg_approval_t *cur, bool approve, int64_t at_ms) {
    tg_approval_t n;
    assert_int_equal(tg_approval_review(&n, cur, "alice", 0, approve, HASH, at_ms), TG_OK);
    return n;
}

static tg_approval_t consumed(const tg_approval_t *cur, int64_t at_ms) {
    tg_approval_t n;
    char exec[38];
    snprintf(exec, sizeof exec, "exec_%s", cur->id + 5);
    exec[5] = exec[5] == 'f' ? '0' : 'f'; /* another execution than the escalation */
    assert_int_equal(tg_approval_consume(&n, cur, exec, at_ms), TG_OK);
    return n;
}

/* ---- appends -------------------------------------------------------------------------------- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    tg_err_t status;
} waiter_t;

static void on_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    (void)pos;
    waiter_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    w->status = status;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Appends the record carrying a (an ESCALATE receipt for version 1, an approval record
 * after) and waits for its done: the durable status. */
static tg_err_t append_wait(fx_t *f, const tg_approval_t *a) {
    waiter_t w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    char exec[38];
    snprintf(exec, sizeof exec, "exec_%s", a->id + 5);
    exec[6] = (char)('0' + a->version % 10); /* an id per record (receipts are indexed) */
    /* The file ledger does not take type APPROVAL records yet (ledger.c entry_check, the
     * ledger's business): the table's behaviour does not depend on the type. */
    tg_db_record_t rec = {.type = a->version == 1 || !f->pg ? TG_LEDGER_TYPE_RECEIPT
                                                            : TG_LEDGER_TYPE_APPROVAL,
                          .meta = "{}",
                          .meta_len = 2,
                          .payload = "{}",
                          .payload_len = 2,
                          .tenant = f->tenant,
                          .tenant_len = strlen(f->tenant),
                          .exec_id = exec,
                          .exec_id_len = strlen(exec),
                          .request_hash = HASH,
                          .status = 200,
                          .at_ms = f->t0,
                          .approval = a};
    tg_err_t rc = tg_db_append(f->db, &rec, on_done, &w);
    if (rc == TG_OK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) {
            pthread_cond_wait(&w.cv, &w.mu);
        }
        pthread_mutex_unlock(&w.mu);
        rc = w.status;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

/* The pipeline's create: the record, then commit. */
static void create(fx_t *f, const tg_approval_t *a) {
    assert_int_equal(append_wait(f, a), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, a, f->t0), TG_OK);
}

/* The pipeline's step: hold, the record of next, commit. */
static void advance(fx_t *f, const tg_approval_t *next) {
    tg_approval_t cur;
    assert_int_equal(tg_db_approval_hold(f->db, f->tenant, strlen(f->tenant), next->id,
                                         strlen(next->id), f->t0, &cur),
                     TG_OK);
    assert_int_equal(cur.version + 1, next->version);
    assert_int_equal(append_wait(f, next), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, next, f->t0), TG_OK);
}

#define TEN(f) (f)->tenant, strlen((f)->tenant)
#define ID(a) (a).id, strlen((a).id)

/* ---- the cases ------------------------------------------------------------------------------ */

static void test_create_get(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0), got;
    assert_int_equal(append_wait(f, &a), TG_OK);
    if (!f->pg) {
        /* file: visible from its commit on (pg: from the record's transaction) */
        assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &got), TG_ERR_NOT_FOUND);
    }
    assert_int_equal(tg_db_approval_commit(f->db, &a, f->t0), TG_OK);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &got), TG_OK);
    assert_int_equal(got.version, 1);
    assert_memory_equal(&got, &a, sizeof a);
    /* another tenant's, an unknown id, malformed arguments */
    assert_int_equal(tg_db_approval_get(f->db, "other", 5, ID(a), &got), TG_ERR_NOT_FOUND);
    tg_approval_t b = escalate(f, f->t0);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(b), &got), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), "appr_XYZ", 8, &got), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_approval_get(f->db, "", 0, ID(a), &got), TG_ERR_INVALID_ARG);
    tg_approval_t bad = a;
    bad.version = 0;
    assert_int_equal(tg_db_approval_commit(f->db, &bad, f->t0), TG_ERR_INVALID_ARG);
    /* an approval rides only on its own tenant's record */
    tg_approval_t other = escalate(f, f->t0);
    snprintf(other.tenant, sizeof other.tenant, "someone-else");
    assert_int_equal(append_wait(f, &other), TG_ERR_INVALID_ARG);
    assert_true(tg_db_approval_room(f->db));
    if (!f->pg) {
        tg_db_stats_t st;
        tg_db_stats(f->db, &st);
        assert_int_equal(st.approvals.entries, 1);
        assert_int_equal(st.approvals.max_entries, 100000);
    }
}

static void test_hold_write_release(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0), cur;
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_ERR_NOT_FOUND);
    create(f, &a);
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_OK);
    assert_int_equal(cur.version, 1);
    /* one holder: a second review, resume or timer waits */
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_ERR_IN_FLIGHT);
    assert_int_equal(tg_db_approval_hold(f->db, "other", 5, ID(a), f->t0, &cur), TG_ERR_NOT_FOUND);
    if (f->pg) {
        /* another instance on the same database: the lease is in the row */
        tg_db_t *db2 = open_db(true, 0, NULL);
        assert_int_equal(tg_db_approval_hold(db2, TEN(f), ID(a), f->t0, &cur), TG_ERR_IN_FLIGHT);
        tg_db_close(db2);
    }
    /* version 2 under the hold: durable, then get answers it and the hold is gone */
    tg_approval_t v2 = reviewed(&cur, true, f->t0 + 10);
    assert_int_equal(append_wait(f, &v2), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, &v2, f->t0 + 10), TG_OK);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    assert_int_equal(cur.status, TG_APPROVAL_APPROVED);
    assert_memory_equal(&cur, &v2, sizeof v2);
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_OK);
    /* release: nothing written, the state unchanged, the hold free again (twice is fine) */
    assert_int_equal(tg_db_approval_release(f->db, TEN(f), ID(a)), TG_OK);
    assert_int_equal(tg_db_approval_release(f->db, TEN(f), ID(a)), TG_OK);
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    assert_int_equal(tg_db_approval_release(f->db, TEN(f), ID(a)), TG_OK);
    if (f->pg) {
        tg_db_t *db2 = open_db(true, 0, NULL);
        assert_int_equal(tg_db_approval_hold(db2, TEN(f), ID(a), f->t0, &cur), TG_OK);
        assert_int_equal(tg_db_approval_release(db2, TEN(f), ID(a)), TG_OK);
        tg_db_close(db2);
    } else {
        /* an older version never replaces a newer one */
        assert_int_equal(tg_db_approval_commit(f->db, &a, f->t0), TG_OK);
        assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
        assert_int_equal(cur.version, 2);
    }
}

/* pg: a version written without the hold is fenced out by the database. */
static void test_pg_fence(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0), cur;
    create(f, &a);
    /* version 1 again (an id that exists): refused, nothing changed */
    assert_int_equal(append_wait(f, &a), TG_ERR_STORE_UNAVAILABLE);
    char why[160];
    assert_true(tg_db_health(f->db, why, sizeof why)); /* that record alone, not the store */
    tg_approval_t v2 = reviewed(&a, false, f->t0 + 5);
    /* no hold at all */
    assert_int_equal(append_wait(f, &v2), TG_ERR_STORE_UNAVAILABLE);
    assert_true(tg_db_health(f->db, why, sizeof why));
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 1);
    /* the hold is another instance's */
    tg_db_t *db2 = open_db(true, 0, NULL);
    assert_int_equal(tg_db_approval_hold(db2, TEN(f), ID(a), f->t0, &cur), TG_OK);
    assert_int_equal(append_wait(f, &v2), TG_ERR_STORE_UNAVAILABLE);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 1);
    assert_int_equal(tg_db_approval_release(db2, TEN(f), ID(a)), TG_OK);
    tg_db_close(db2);
    /* under this instance's own hold it goes through */
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_OK);
    assert_int_equal(append_wait(f, &v2), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, &v2, f->t0), TG_OK);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 2);
    assert_int_equal(cur.status, TG_APPROVAL_DENIED);
    /* the same version again, under a new hold: the row is not at version n - 1 */
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(a), f->t0, &cur), TG_OK);
    assert_int_equal(append_wait(f, &v2), TG_ERR_STORE_UNAVAILABLE);
    assert_int_equal(tg_db_approval_release(f->db, TEN(f), ID(a)), TG_OK);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 2);
}

static void test_list(void **state) {
    FX();
    int64_t t = f->t0;
    tg_approval_t a1 = escalate(f, t), a2 = escalate(f, t + 1000), a3 = escalate(f, t + 2000);
    create(f, &a1);
    create(f, &a2);
    create(f, &a3);
    tg_approval_t d3 = reviewed(&a3, false, t + 2500);
    advance(f, &d3);
    tg_approval_t out[8];
    size_t n = 99;
    int64_t now = t + 5000;
    assert_int_equal(tg_db_approval_list(f->db, TEN(f), true, 0, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 3); /* newest created first; nobody else's */
    assert_string_equal(out[0].id, a3.id);
    assert_string_equal(out[1].id, a2.id);
    assert_string_equal(out[2].id, a1.id);
    assert_int_equal(out[0].version, 2);
    assert_int_equal(
        tg_db_approval_list(f->db, TEN(f), false, TG_APPROVAL_PENDING, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].id, a2.id);
    assert_int_equal(tg_db_approval_list(f->db, TEN(f), false, TG_APPROVAL_DENIED, now, out, 8, &n),
                     TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a3.id);
    /* max bounds the answer */
    assert_int_equal(tg_db_approval_list(f->db, TEN(f), true, 0, now, out, 1, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a3.id);
    /* by the clock: a1 expires at t + TTL, a2 a second later; the stored status lags */
    now = t + TTL + 500;
    assert_int_equal(
        tg_db_approval_list(f->db, TEN(f), false, TG_APPROVAL_EXPIRED, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a1.id);
    assert_int_equal(out[0].status, TG_APPROVAL_PENDING);
    assert_int_equal(
        tg_db_approval_list(f->db, TEN(f), false, TG_APPROVAL_PENDING, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].id, a2.id);
    assert_int_equal(tg_db_approval_list(f->db, TEN(f), false, 77, now, out, 8, &n),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_approval_list(f->db, "nobody", 6, true, 0, now, out, 8, &n), TG_OK);
    assert_int_equal(n, 0);
}

/* The due list is every tenant's: only this test's ids count here (pg shares a database). */
static size_t count_ids(const tg_db_approval_ref_t *out, size_t n, const tg_approval_t *a) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += strcmp(out[i].id, a->id) == 0;
    }
    return k;
}

static void test_due(void **state) {
    FX();
    int64_t t = f->t0;
    tg_approval_t p = escalate(f, t);           /* pending, expires t + TTL */
    tg_approval_t ap = escalate(f, t);          /* approved at t + 100 */
    tg_approval_t dn = escalate(f, t);          /* denied: never due */
    tg_approval_t fresh = escalate(f, t + TTL); /* not expired yet */
    create(f, &p);
    create(f, &ap);
    create(f, &dn);
    create(f, &fresh);
    tg_approval_t ap2 = reviewed(&ap, true, t + 100), dn2 = reviewed(&dn, false, t + 100);
    advance(f, &ap2);
    advance(f, &dn2);
    tg_db_approval_ref_t out[64];
    size_t n = 99;
    assert_int_equal(tg_db_approval_due(f->db, t + 50, out, 64, &n), TG_OK);
    assert_int_equal(count_ids(out, n, &p) + count_ids(out, n, &ap), 0);
    /* past the pending one's expiry and the approved one's consume window */
    int64_t now = t + TTL + 200;
    assert_int_equal(tg_db_approval_due(f->db, now, out, 64, &n), TG_OK);
    assert_int_equal(count_ids(out, n, &p), 1);
    assert_int_equal(count_ids(out, n, &ap), 1);
    assert_int_equal(count_ids(out, n, &dn) + count_ids(out, n, &fresh), 0);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(out[i].id, p.id) == 0) {
            assert_string_equal(out[i].tenant, f->tenant);
        }
    }
    assert_int_equal(tg_db_approval_due(f->db, now, out, 1, &n), TG_OK);
    assert_int_equal(n, 1);
    /* a held one is being written by someone: not listed */
    tg_approval_t cur, pe;
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(p), now, &cur), TG_OK);
    assert_int_equal(tg_db_approval_due(f->db, now, out, 64, &n), TG_OK);
    assert_int_equal(count_ids(out, n, &p), 0);
    assert_int_equal(count_ids(out, n, &ap), 1);
    /* the expiry step written: no longer due */
    assert_int_equal(tg_approval_expire(&pe, &cur, now), TG_OK);
    assert_int_equal(append_wait(f, &pe), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, &pe, now), TG_OK);
    assert_int_equal(tg_db_approval_due(f->db, now, out, 64, &n), TG_OK);
    assert_int_equal(count_ids(out, n, &p), 0);
    assert_int_equal(count_ids(out, n, &ap), 1);
}

static void test_restore_higher_wins(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0), cur;
    tg_approval_t v2 = reviewed(&a, true, f->t0 + 5);
    tg_approval_t v3 = consumed(&v2, f->t0 + 6);
    assert_int_equal(tg_db_approval_restore(f->db, &a, f->t0), TG_OK);
    assert_int_equal(tg_db_approval_restore(f->db, &v3, f->t0), TG_OK);
    assert_int_equal(tg_db_approval_restore(f->db, &v2, f->t0), TG_OK); /* older: ignored */
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    assert_int_equal(cur.version, 3);
    assert_int_equal(cur.status, TG_APPROVAL_CONSUMED);
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_int_equal(st.approvals.entries, 1);
}

static void test_capacity(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0), b = escalate(f, f->t0), c = escalate(f, f->t0);
    assert_true(tg_db_approval_room(f->db));
    create(f, &a);
    assert_int_equal(tg_db_approval_restore(f->db, &b, f->t0), TG_OK);
    assert_false(tg_db_approval_room(f->db));
    /* full: the record is durable, the table refuses (the next start restores it) */
    assert_int_equal(append_wait(f, &c), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, &c, f->t0), TG_ERR_LIMIT);
    assert_int_equal(tg_db_approval_restore(f->db, &c, f->t0), TG_ERR_LIMIT);
    /* a new version of a stored one still fits: it replaces its entry */
    tg_approval_t a2 = reviewed(&a, false, f->t0 + 1);
    advance(f, &a2);
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_int_equal(st.approvals.entries, 2);
    assert_int_equal(st.approvals.max_entries, 2);
    assert_int_equal(st.approvals.limit_rejections, 2);
}

/* Enough ticks for the sweep to have visited the whole table. */
static void ticks(tg_db_t *db, int64_t now) {
    for (int i = 0; i < 64; i++) {
        tg_db_tick(db, now, 0);
    }
}

static void test_tick_retention(void **state) {
    FX();
    int64_t t = f->t0;
    tg_approval_t a = escalate(f, t), p = escalate(f, t), ap = escalate(f, t), cur;
    tg_approval_t dn = reviewed(&a, false, t + 100); /* ended t + 100 */
    tg_approval_t ap2 = reviewed(&ap, true, t + 100);
    tg_approval_t co = consumed(&ap2, t + 200); /* ended t + 200 */
    assert_int_equal(tg_db_approval_commit(f->db, &dn, t), TG_OK);
    assert_int_equal(tg_db_approval_commit(f->db, &p, t), TG_OK); /* expires (clock) t + TTL */
    assert_int_equal(tg_db_approval_commit(f->db, &co, t), TG_OK);
    ticks(f->db, t + 100 + RETENTION); /* exactly at retention: kept */
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_OK);
    ticks(f->db, t + 150 + RETENTION);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(a), &cur), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(ap), &cur), TG_OK);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(p), &cur), TG_OK);
    ticks(f->db, t + 300 + RETENTION);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(ap), &cur), TG_ERR_NOT_FOUND);
    /* pending, expired by the clock at t + TTL but not yet stepped: kept while held (its
     * expiry is being written), dropped once retention has passed its expiry */
    assert_int_equal(tg_db_approval_hold(f->db, TEN(f), ID(p), t, &cur), TG_OK);
    ticks(f->db, t + TTL + RETENTION + 1);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(p), &cur), TG_OK);
    assert_int_equal(tg_db_approval_release(f->db, TEN(f), ID(p)), TG_OK);
    ticks(f->db, t + TTL + RETENTION + 1);
    assert_int_equal(tg_db_approval_get(f->db, TEN(f), ID(p), &cur), TG_ERR_NOT_FOUND);
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_int_equal(st.approvals.entries, 0);
    assert_int_equal(st.approvals.expired_reclaimed, 3);
}

#define RACERS 8

typedef struct racer {
    tg_db_t *db;
    const char *tenant, *id;
    pthread_barrier_t *go;
    tg_err_t rc;
} racer_t;

static void *race_hold(void *arg) {
    racer_t *r = arg;
    tg_approval_t cur;
    pthread_barrier_wait(r->go);
    r->rc = tg_db_approval_hold(r->db, r->tenant, strlen(r->tenant), r->id, strlen(r->id), 0, &cur);
    return NULL;
}

/* N threads (on pg: spread over two instances) hold at once: exactly one wins. */
static void test_concurrent_holds(void **state) {
    FX();
    tg_approval_t a = escalate(f, f->t0);
    create(f, &a);
    tg_db_t *db2 = f->pg ? open_db(true, 0, NULL) : f->db;
    for (int round = 0; round < (f->pg ? 5 : 20); round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, RACERS);
        pthread_t th[RACERS];
        racer_t r[RACERS];
        for (int i = 0; i < RACERS; i++) {
            r[i] = (racer_t){i % 2 ? db2 : f->db, f->tenant, a.id, &go, TG_ERR_INTERNAL};
            assert_int_equal(pthread_create(&th[i], NULL, race_hold, &r[i]), 0);
        }
        int won = -1, busy = 0;
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            if (r[i].rc == TG_OK) {
                assert_int_equal(won, -1);
                won = i;
            }
            busy += r[i].rc == TG_ERR_IN_FLIGHT;
        }
        pthread_barrier_destroy(&go);
        assert_true(won >= 0);
        assert_int_equal(busy, RACERS - 1);
        assert_int_equal(tg_db_approval_release(r[won].db, TEN(f), ID(a)), TG_OK);
    }
    if (db2 != f->db) {
        tg_db_close(db2);
    }
}

#define FILE_TEST(t) cmocka_unit_test_setup_teardown(t, setup_file, teardown)
#define PG_TEST(t) cmocka_unit_test_setup_teardown(t, setup_pg, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        FILE_TEST(test_create_get),
        FILE_TEST(test_hold_write_release),
        FILE_TEST(test_list),
        FILE_TEST(test_due),
        FILE_TEST(test_restore_higher_wins),
        cmocka_unit_test_setup_teardown(test_capacity, setup_file_small, teardown),
        FILE_TEST(test_tick_retention),
        FILE_TEST(test_concurrent_holds),
        PG_TEST(test_create_get),
        PG_TEST(test_hold_write_release),
        PG_TEST(test_pg_fence),
        PG_TEST(test_list),
        PG_TEST(test_due),
        PG_TEST(test_concurrent_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
