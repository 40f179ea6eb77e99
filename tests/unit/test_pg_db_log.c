/* test_pg_db_log.c — the transparency log of db.h on PostgreSQL: one log for the deployment,
 * integrated by the instance holding its advisory lock, served by every instance from the
 * rows. Runs when TG_PG_DB_LOG_URL names a migrated database (tests/integration/pg_db_log.sh
 * runs it so, on a throwaway cluster); every case skips itself otherwise. The cases share
 * that database's one log and run in order: each checks what it adds against what was there
 * (sizes, roots and proofs relative to the checkpoint it found). */
#include <libpq-fe.h>
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
#include <sodium.h>

#include "trigguard/db.h"
#include "trigguard/note.h"
#include "trigguard/pg_schema.h"
#include "trigguard/record.h"
#include "trigguard/tlog.h"

#define URL_ENV "TG_PG_DB_LOG_URL"
#define ORIGIN "log.test.example/pg"
#define TENANT "tlog"
#define SOON_MS 15000 /* the longest any case waits for the log to catch up */

static const char *url(void) { return getenv(URL_ENV); }

#define NEED_PG()                                                                                  \
    do {                                                                                           \
        (void)state;                                                                               \
        if (url() == NULL) {                                                                       \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* The log key every instance shares (seed 1), and a stranger's (seed 2, same origin). */
static tg_note_signer_t key_of(uint8_t seed_byte) {
    uint8_t seed[32];
    memset(seed, seed_byte, sizeof seed);
    tg_note_signer_t s;
    assert_int_equal(tg_note_signer_from_seed(&s, ORIGIN, strlen(ORIGIN), seed), TG_OK);
    return s;
}

/* An instance on the test database; signer NULL = no log. */
static tg_db_t *open_db(const tg_note_signer_t *signer) {
    tg_db_opts_t o = {.backend = TG_DB_POSTGRES};
    o.keys.retention_ms = 60000;
    o.keys.max_key_len = 255;
    o.ledger = TG_LEDGER_OPTS_INIT;
    o.pg = (tg_db_pg_opts_t){.url = url(),
                             .pool = 3,
                             .timeout_ms = 5000,
                             .claim_timeout_ms = 30000,
                             .commit_timeout_ms = 5000};
    o.log = (tg_db_log_opts_t){.signer = signer, .min_interval_ms = 5, .max_interval_ms = 100};
    tg_db_t *db = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_db_open(&db, &o, &d), TG_OK);
    if (tg_db_start(db, NULL, NULL, NULL, &d) != TG_OK) {
        fail_msg("tg_db_start: %s", d.msg);
    }
    return db;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(void) { usleep(10 * 1000); }

/* ---- direct SQL, for what no instance would do ---------------------------------------------- */

static PGconn *sql_conn(void) {
    PGconn *c = PQconnectdb(url());
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    return c;
}

/* Runs sql; its first value as text into out (may be NULL). */
static void sql(const char *q, char *out, size_t cap) {
    PGconn *c = sql_conn();
    PGresult *r = PQexec(c, q);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", q, PQresultErrorMessage(r));
    }
    if (out != NULL) {
        snprintf(out, cap, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    }
    PQclear(r);
    PQfinish(c);
}

/* ---- appends and waits ---------------------------------------------------------------------- */

typedef struct sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    tg_err_t status;
    tg_ledger_pos_t pos;
    uint64_t leaf;
    int calls;
} sync_t;

static void sync_init(sync_t *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void sync_wait(sync_t *s) {
    pthread_mutex_lock(&s->mu);
    while (!s->done) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

static void on_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    sync_t *s = ud;
    pthread_mutex_lock(&s->mu);
    s->done = true;
    s->status = status;
    s->pos = *pos;
    s->calls++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_covered(void *ud, tg_err_t status, uint64_t leaf) {
    sync_t *s = ud;
    pthread_mutex_lock(&s->mu);
    s->done = true;
    s->status = status;
    s->leaf = leaf;
    s->calls++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* One record of the kind a case needs; *expect gets the entry the log must hold for it. */
typedef enum { R_SILENCE, R_GIVEN, R_RECEIPT } kind_t;

static unsigned record_no;

static tg_ledger_pos_t append(tg_db_t *db, kind_t kind, uint8_t expect[32]) {
    char payload[200];
    uint8_t given[32];
    randombytes_buf(given, sizeof given);
    if (kind == R_RECEIPT) {
        char hex[65];
        sodium_bin2hex(hex, sizeof hex, given, sizeof given);
        snprintf(payload, sizeof payload, "{\"n\":%u,\"receiptHash\":\"%s\"}", ++record_no, hex);
        memcpy(expect, given, 32); /* a receipt's leaf is its receiptHash */
    } else {
        snprintf(payload, sizeof payload, "{\"n\":%u,\"pid\":%ld}", ++record_no, (long)getpid());
        if (kind == R_GIVEN) {
            memcpy(expect, given, 32);
        } else {
            crypto_hash_sha256(expect, (const uint8_t *)payload, strlen(payload));
        }
    }
    /* a receipt appended without its entry: stored NULL, derived by the integrator */
    tg_db_record_t rec = {.type =
                              kind == R_RECEIPT ? TG_LEDGER_TYPE_RECEIPT : TG_LEDGER_TYPE_SILENCE,
                          .meta = "{}",
                          .meta_len = 2,
                          .payload = payload,
                          .payload_len = strlen(payload),
                          .tenant = TENANT,
                          .tenant_len = strlen(TENANT),
                          .status = 200,
                          .entry = kind == R_GIVEN ? given : NULL};
    sync_t s;
    sync_init(&s);
    assert_int_equal(tg_db_append(db, &rec, on_done, &s), TG_OK);
    sync_wait(&s);
    assert_int_equal(s.status, TG_OK);
    assert_int_equal(s.calls, 1);
    assert_true(s.pos.seq > 0);
    return s.pos;
}

/* tg_db_log_wait, waited for: its status; *leaf on TG_OK. */
static tg_err_t covered(tg_db_t *db, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                        uint64_t *leaf) {
    sync_t s;
    sync_init(&s);
    tg_err_t rc = tg_db_log_wait(db, pos, timeout_ms, on_covered, &s);
    if (rc != TG_OK) {
        pthread_mutex_destroy(&s.mu);
        pthread_cond_destroy(&s.cv);
        return rc;
    }
    sync_wait(&s);
    assert_int_equal(s.calls, 1);
    *leaf = s.leaf;
    return s.status;
}

/* ---- checks against the published checkpoint ------------------------------------------------- */

static tg_err_t read_hash(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    return tg_db_log_hashes(ctx, level, index, 1, &out->h);
}

/* The published checkpoint, its note verified with k and its body equal to *cp. */
static tg_checkpoint_t checkpoint(tg_db_t *db, const tg_note_signer_t *k) {
    tg_buf_t note;
    tg_buf_init(&note, 0);
    tg_checkpoint_t cp, body;
    assert_int_equal(tg_db_log_checkpoint(db, &note, &cp), TG_OK);
    size_t text_len = 0;
    assert_int_equal(tg_note_verify(note.data, note.len, &k->pub, 1, &text_len, NULL), TG_OK);
    assert_int_equal(tg_checkpoint_parse(&body, note.data, text_len), TG_OK);
    assert_int_equal(body.size, cp.size);
    assert_memory_equal(body.root, cp.root, 32);
    assert_string_equal(cp.origin, ORIGIN);
    assert_null(cp.ext);
    tg_buf_free(&note);
    return cp;
}

/* The root of cp's size, recomputed from the stored hashes, is cp's root. */
static void check_root(tg_db_t *db, const tg_checkpoint_t *cp) {
    tg_tlog_hash_t root;
    if (cp->size == 0) {
        tg_tlog_empty_root(&root);
    } else {
        tg_tlog_reader_t rd = {read_hash, db};
        assert_int_equal(tg_tlog_subtree_hash(&root, &rd, 0, cp->size), TG_OK);
    }
    assert_memory_equal(root.h, cp->root, 32);
}

/* Leaf `leaf` holds entry and its inclusion proof verifies against cp. */
static void check_inclusion(tg_db_t *db, uint64_t leaf, const uint8_t entry[32],
                            const tg_checkpoint_t *cp) {
    uint8_t got[1][32];
    assert_int_equal(tg_db_log_entries(db, leaf, 1, got), TG_OK);
    assert_memory_equal(got[0], entry, 32);
    tg_tlog_hash_t lh, root, proof[TG_TLOG_MAX_PROOF];
    tg_tlog_leaf_hash(&lh, entry, 32);
    memcpy(root.h, cp->root, 32);
    size_t n = 0;
    tg_tlog_reader_t rd = {read_hash, db};
    assert_int_equal(tg_tlog_inclusion_proof(proof, &n, &rd, leaf, cp->size), TG_OK);
    assert_int_equal(tg_tlog_verify_inclusion(&lh, leaf, cp->size, proof, n, &root), TG_OK);
    /* the db's proof, its hashes fetched in one query, is the same proof */
    tg_tlog_hash_t again[TG_TLOG_MAX_PROOF];
    size_t n2 = 0;
    assert_int_equal(tg_db_log_inclusion_proof(db, leaf, cp->size, again, &n2), TG_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(again, proof, n * sizeof proof[0]);
    /* the level-0 stored hash is that leaf hash */
    uint8_t h0[1][32];
    assert_int_equal(tg_db_log_hashes(db, 0, leaf, 1, h0), TG_OK);
    assert_memory_equal(h0[0], lh.h, 32);
}

/* cp2 extends cp1 (a consistency proof from the stored hashes verifies). */
static void check_consistent(tg_db_t *db, const tg_checkpoint_t *cp1, const tg_checkpoint_t *cp2) {
    assert_true(cp2->size >= cp1->size);
    if (cp1->size == 0) {
        return; /* every tree extends the empty one (no proof exists from size 0) */
    }
    tg_tlog_hash_t r1, r2, proof[TG_TLOG_MAX_PROOF];
    memcpy(r1.h, cp1->root, 32);
    memcpy(r2.h, cp2->root, 32);
    size_t n = 0;
    tg_tlog_reader_t rd = {read_hash, db};
    assert_int_equal(tg_tlog_consistency_proof(proof, &n, &rd, cp1->size, cp2->size), TG_OK);
    assert_int_equal(tg_tlog_verify_consistency(cp1->size, cp2->size, proof, n, &r1, &r2), TG_OK);
    tg_tlog_hash_t again[TG_TLOG_MAX_PROOF];
    size_t n2 = 0;
    assert_int_equal(tg_db_log_consistency_proof(db, cp1->size, cp2->size, again, &n2), TG_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(again, proof, n * sizeof proof[0]);
    /* past the published tree: not found, from the one query as from the single reads */
    assert_int_equal(tg_db_log_consistency_proof(db, cp1->size, cp2->size + 1000000, again, &n2),
                     TG_ERR_NOT_FOUND);
}

/* Waits until some instance has published a checkpoint (the first integrator signs the
 * empty tree at once) and returns it. */
static tg_checkpoint_t first_checkpoint(tg_db_t *db, const tg_note_signer_t *k) {
    int64_t until = mono_ms() + SOON_MS;
    tg_err_t rc;
    while ((rc = tg_db_log_checkpoint(db, NULL, NULL)) == TG_ERR_LOG_PENDING && mono_ms() < until) {
        nap();
    }
    assert_int_equal(rc, TG_OK);
    return checkpoint(db, k);
}

static bool is_integrator(tg_db_t *db) {
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    return st.log.integrator;
}

static bool is_inconsistent(tg_db_t *db) {
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    return st.log.inconsistent;
}

#define EVENTUALLY(cond)                                                                           \
    do {                                                                                           \
        int64_t until_ = mono_ms() + SOON_MS;                                                      \
        while (!(cond) && mono_ms() < until_) {                                                    \
            nap();                                                                                 \
        }                                                                                          \
        assert_true(cond);                                                                         \
    } while (0)

/* ---- the cases ------------------------------------------------------------------------------ */

/* Without a log key nothing of the log exists, and the records still take their entries. */
static void test_disabled(void **state) {
    NEED_PG();
    tg_db_t *db = open_db(NULL);
    uint8_t e[32], out[1][32];
    tg_ledger_pos_t pos = append(db, R_SILENCE, e);
    uint64_t leaf = 0;
    assert_int_equal(tg_db_log_checkpoint(db, NULL, NULL), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_hashes(db, 0, 0, 1, out), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_entries(db, 0, 1, out), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_leaf(db, &pos, &leaf), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_wait(db, &pos, 10, on_covered, NULL), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_restore(db, 1, e), TG_OK);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_false(st.log.enabled);
    assert_false(st.log.integrator);
    char q[160], got[80], want[80];
    snprintf(q, sizeof q, "select encode(log_entry, 'hex') from tg_records where seq = %llu",
             (unsigned long long)pos.seq);
    sql(q, got, sizeof got);
    sodium_bin2hex(want, sizeof want, e, 32);
    assert_string_equal(got, want);
    tg_db_close(db);
}

/* One instance: every record gets a leaf holding its entry, proofs verify, and the log only
 * grows. */
static void test_grows(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    tg_db_t *db = open_db(&k);
    tg_checkpoint_t cp0 = first_checkpoint(db, &k);
    check_root(db, &cp0);
    EVENTUALLY(is_integrator(db));
    enum { N = 24 };
    tg_ledger_pos_t pos[N];
    uint8_t entry[N][32];
    for (int i = 0; i < N; i++) {
        pos[i] = append(db, (kind_t)(i % 3), entry[i]);
    }
    uint64_t leaf[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(covered(db, &pos[i], SOON_MS, &leaf[i]), TG_OK);
        uint64_t again = UINT64_MAX;
        assert_int_equal(tg_db_log_leaf(db, &pos[i], &again), TG_OK);
        assert_int_equal(again, leaf[i]);
        assert_true(leaf[i] >= cp0.size);
        for (int j = 0; j < i; j++) {
            assert_true(leaf[j] != leaf[i]);
        }
    }
    tg_checkpoint_t cp = checkpoint(db, &k);
    assert_true(cp.size >= cp0.size + N);
    check_root(db, &cp);
    check_consistent(db, &cp0, &cp);
    for (int i = 0; i < N; i++) {
        assert_true(leaf[i] < cp.size);
        check_inclusion(db, leaf[i], entry[i], &cp);
    }
    /* a receipt without its entry was stored without one; the others with theirs */
    char q[200], got[80];
    snprintf(q, sizeof q,
             "select count(*) filter (where log_entry is null) || '/' || count(*) from tg_records"
             " where seq in (%llu, %llu, %llu)",
             (unsigned long long)pos[0].seq, (unsigned long long)pos[1].seq,
             (unsigned long long)pos[2].seq);
    sql(q, got, sizeof got);
    assert_string_equal(got, "1/3");
    /* reads past the published tree, bad arguments */
    uint8_t out[2][32];
    assert_int_equal(tg_db_log_entries(db, cp.size, 1, out), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_entries(db, cp.size - 1, 2, out), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_hashes(db, 0, cp.size, 1, out), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_hashes(db, 64, 0, 1, out), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes(db, 0, 0, 257, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_entries(db, UINT64_MAX, 1, out), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes(db, 0, 0, 0, NULL), TG_OK);
    tg_ledger_pos_t none = {.seq = (uint64_t)INT64_MAX};
    uint64_t l = 0;
    assert_int_equal(tg_db_log_leaf(db, &none, &l), TG_ERR_NOT_FOUND);
    none.seq = 0;
    assert_int_equal(tg_db_log_leaf(db, &none, &l), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_wait(db, &none, 10, on_covered, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_wait(db, &pos[0], 10, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_restore(db, 1, entry[0]), TG_ERR_INVALID_ARG);
    /* a wait for a record covered long ago answers at the next poll */
    assert_int_equal(covered(db, &pos[0], 0, &l), TG_OK);
    assert_int_equal(l, leaf[0]);
    tg_db_stats_t st;
    tg_db_stats(db, &st);
    assert_true(st.log.enabled);
    assert_true(st.log.integrator);
    assert_false(st.log.inconsistent);
    assert_true(st.log.checkpoints >= 1);
    assert_true(st.log.size >= cp.size);
    assert_int_equal(st.log.waiters, 0);
    uint64_t hist = 0;
    for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
        hist += st.log.lag_hist[i];
    }
    assert_true(hist >= 1);
    tg_db_close(db);
}

/* Rows written before schema v5 (log_entry NULL) get their entry from the record itself. */
static void test_old_rows(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    uint8_t rh[32];
    char hex[65], q[600], seq[32];
    randombytes_buf(rh, sizeof rh);
    sodium_bin2hex(hex, sizeof hex, rh, sizeof rh);
    /* as v4 would have written them: a receipt and a silence, no entry */
    snprintf(
        q, sizeof q,
        "insert into tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
        " prev_hash, record_hash) values ('old-%ld', 1, 'tlog', 1, '', "
        "convert_to('{\"receiptHash\":\"%s\"}', 'UTF8'), '\\x%064d', '\\x%064d') returning seq",
        (long)getpid(), hex, 0, 0);
    sql(q, seq, sizeof seq);
    tg_ledger_pos_t p1 = {.seq = strtoull(seq, NULL, 10)};
    snprintf(q, sizeof q,
             "insert into tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
             " prev_hash, record_hash) values ('old-%ld', 2, 'tlog', 2, '', "
             "convert_to('{\"old\":true}', 'UTF8'), '\\x%064d', '\\x%064d') returning seq",
             (long)getpid(), 0, 0);
    sql(q, seq, sizeof seq);
    tg_ledger_pos_t p2 = {.seq = strtoull(seq, NULL, 10)};
    uint8_t e2[32];
    crypto_hash_sha256(e2, (const uint8_t *)"{\"old\":true}", 12);
    tg_db_t *db = open_db(&k);
    uint64_t l1 = 0, l2 = 0;
    assert_int_equal(covered(db, &p1, SOON_MS, &l1), TG_OK);
    assert_int_equal(covered(db, &p2, SOON_MS, &l2), TG_OK);
    tg_checkpoint_t cp = checkpoint(db, &k);
    check_inclusion(db, l1, rh, &cp);
    check_inclusion(db, l2, e2, &cp);
    tg_db_close(db);
}

/* Two instances: one integrates, both append and serve; when it closes the other takes
 * over, and its checkpoints extend the old ones. */
static void test_two_instances(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    tg_db_t *a = open_db(&k);
    EVENTUALLY(is_integrator(a));
    tg_db_t *b = open_db(&k);
    tg_checkpoint_t cp0 = first_checkpoint(b, &k);
    enum { N = 10 };
    tg_ledger_pos_t pos[N];
    uint8_t entry[N][32];
    uint64_t leaf[N];
    for (int i = 0; i < N; i++) {
        pos[i] = append(i % 2 ? b : a, (kind_t)(i % 3), entry[i]);
    }
    for (int i = 0; i < N; i++) {
        /* waited for on the other instance than the one that wrote it */
        assert_int_equal(covered(i % 2 ? a : b, &pos[i], SOON_MS, &leaf[i]), TG_OK);
    }
    assert_true(is_integrator(a));
    assert_false(is_integrator(b)); /* one lock, one integrator */
    tg_checkpoint_t ca = checkpoint(a, &k);
    EVENTUALLY(checkpoint(b, &k).size == ca.size); /* b's cache lags by a few ms at most */
    tg_checkpoint_t cb = checkpoint(b, &k);
    assert_memory_equal(ca.root, cb.root, 32);
    check_consistent(b, &cp0, &cb);
    for (int i = 0; i < N; i++) {
        check_inclusion(b, leaf[i], entry[i], &cb);
    }
    /* the integrator goes away (its last checkpoint committed at close) */
    tg_db_close(a);
    EVENTUALLY(is_integrator(b));
    uint8_t e[32];
    tg_ledger_pos_t p = append(b, R_SILENCE, e);
    uint64_t l = 0;
    assert_int_equal(covered(b, &p, SOON_MS, &l), TG_OK);
    tg_checkpoint_t c2 = checkpoint(b, &k);
    assert_true(l >= cb.size && l < c2.size);
    check_consistent(b, &cb, &c2);
    check_inclusion(b, l, e, &c2);
    tg_db_close(b);
}

/* The integrator's connection is killed mid-stream (its lock goes with it): some instance
 * takes over from the rows, records appended throughout all get leaves, and every
 * checkpoint seen extends the one before. */
static void test_lock_lost(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    tg_db_t *a = open_db(&k);
    EVENTUALLY(is_integrator(a));
    tg_db_t *b = open_db(&k);
    tg_checkpoint_t prev = first_checkpoint(b, &k);
    enum { N = 30 };
    tg_ledger_pos_t pos[N];
    uint8_t entry[N][32];
    for (int i = 0; i < N; i++) {
        pos[i] = append(i % 2 ? b : a, (kind_t)(i % 3), entry[i]);
        if (i == N / 3 || i == 2 * N / 3) {
            /* the session holding the log's lock (key "tglogint": classid, objid its halves) */
            char n[16];
            sql("select count(pg_terminate_backend(pid)) from pg_locks where locktype = "
                "'advisory' and granted and classid = x'74676c6f'::int::oid and objid = "
                "x'67696e74'::int::oid and objsubid = 1",
                n, sizeof n);
        }
        tg_checkpoint_t cp = checkpoint(b, &k);
        check_consistent(b, &prev, &cp);
        prev = cp;
    }
    for (int i = 0; i < N; i++) {
        uint64_t l = 0;
        assert_int_equal(covered(b, &pos[i], SOON_MS, &l), TG_OK);
        tg_checkpoint_t cp = checkpoint(b, &k);
        check_consistent(b, &prev, &cp);
        prev = cp;
        check_inclusion(b, l, entry[i], &cp);
    }
    /* exactly one integrates again */
    EVENTUALLY(is_integrator(a) != is_integrator(b));
    check_root(b, &prev);
    tg_db_close(a);
    tg_db_close(b);
}

/* An instance with another log key (same origin) cannot adopt the stored checkpoint: it
 * neither signs nor serves one, its records still commit and stay pending; the right key
 * integrates them afterwards. */
static void test_foreign_key(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1), other = key_of(2);
    tg_db_t *x = open_db(&other);
    EVENTUALLY(is_inconsistent(x));
    assert_false(is_integrator(x));
    assert_int_equal(tg_db_log_checkpoint(x, NULL, NULL), TG_ERR_LOG_INCONSISTENT);
    uint8_t e[32];
    tg_ledger_pos_t p = append(x, R_GIVEN, e); /* records still commit */
    uint64_t l = 0;
    assert_int_equal(tg_db_log_leaf(x, &p, &l), TG_ERR_LOG_PENDING);
    assert_int_equal(covered(x, &p, 200, &l), TG_ERR_LOG_PENDING); /* nobody integrates */
    tg_db_close(x);
    tg_db_t *db = open_db(&k);
    assert_int_equal(covered(db, &p, SOON_MS, &l), TG_OK);
    tg_checkpoint_t cp = checkpoint(db, &k);
    check_inclusion(db, l, e, &cp);
    assert_false(is_inconsistent(db));
    tg_db_close(db);
}

/* Rows that do not reproduce the checkpoint: a stored hash missing, a note altered. The
 * instance that finds it logs, stops integrating and says so in its stats; records still
 * commit; once the rows are right again a new instance integrates on. */
static void test_inconsistent_rows(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    tg_db_t *db = open_db(&k);
    uint8_t e[32];
    tg_ledger_pos_t p = append(db, R_SILENCE, e);
    uint64_t l = 0;
    assert_int_equal(covered(db, &p, SOON_MS, &l), TG_OK);
    tg_db_close(db); /* nobody integrates now */
    char saved[200], note[600];
    /* the last leaf hash stored goes missing */
    sql("select encode(hash, 'hex') from tg_log_hashes where level = 0 and idx = (select size"
        " - 1 from tg_log_state)",
        saved, sizeof saved);
    assert_int_equal(strlen(saved), 64);
    sql("delete from tg_log_hashes where level = 0 and idx = (select size - 1 from tg_log_state)",
        NULL, 0);
    db = open_db(&k);
    EVENTUALLY(is_inconsistent(db));
    assert_false(is_integrator(db));
    tg_ledger_pos_t p2 = append(db, R_SILENCE, e);
    assert_int_equal(covered(db, &p2, 200, &l), TG_ERR_LOG_PENDING);
    tg_db_close(db);
    char q[400];
    snprintf(q, sizeof q,
             "insert into tg_log_hashes (level, idx, hash) select 0, size - 1, '\\x%s' from"
             " tg_log_state",
             saved);
    sql(q, NULL, 0);
    /* the note altered: one character of its root */
    sql("select note from tg_log_state", note, sizeof note);
    sql("update tg_log_state set note = overlay(note placing (case when substr(note, "
        "length(origin) + length(size::text) + 3, 1) = 'A' then 'B' else 'A' end) from "
        "length(origin) + length(size::text) + 3 for 1)",
        NULL, 0);
    db = open_db(&k);
    EVENTUALLY(is_inconsistent(db));
    assert_int_equal(tg_db_log_checkpoint(db, NULL, NULL), TG_ERR_LOG_INCONSISTENT);
    tg_db_close(db);
    PGconn *c = sql_conn();
    const char *vals[] = {note};
    PGresult *r =
        PQexecParams(c, "update tg_log_state set note = $1", 1, NULL, vals, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    PQfinish(c);
    /* right again: the pending record gets its leaf */
    db = open_db(&k);
    assert_int_equal(covered(db, &p2, SOON_MS, &l), TG_OK);
    tg_checkpoint_t cp = checkpoint(db, &k);
    check_root(db, &cp);
    check_inclusion(db, l, e, &cp);
    assert_false(is_inconsistent(db));
    tg_db_close(db);
}

/* Last (it stops the log for good): a record whose entry cannot be derived (a receipt
 * without its receiptHash, stored without an entry) stops the integration there; records
 * still commit, and the published checkpoint is still served. */
static void test_underivable_entry(void **state) {
    NEED_PG();
    tg_note_signer_t k = key_of(1);
    tg_db_t *db = open_db(&k);
    tg_checkpoint_t before = first_checkpoint(db, &k);
    char q[400], seq[32];
    snprintf(q, sizeof q,
             "insert into tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
             " prev_hash, record_hash) values ('bad-%ld', 1, 'tlog', 1, '', '\\x7b7d',"
             " '\\x%064d', '\\x%064d') returning seq",
             (long)getpid(), 0, 0);
    sql(q, seq, sizeof seq);
    EVENTUALLY(is_inconsistent(db));
    assert_false(is_integrator(db));
    uint8_t e[32];
    tg_ledger_pos_t p = append(db, R_SILENCE, e);
    uint64_t l = 0;
    assert_int_equal(covered(db, &p, 200, &l), TG_ERR_LOG_PENDING);
    tg_checkpoint_t cp = checkpoint(db, &k);
    check_consistent(db, &before, &cp);
    tg_db_close(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disabled),          cmocka_unit_test(test_grows),
        cmocka_unit_test(test_old_rows),          cmocka_unit_test(test_two_instances),
        cmocka_unit_test(test_lock_lost),         cmocka_unit_test(test_foreign_key),
        cmocka_unit_test(test_inconsistent_rows), cmocka_unit_test(test_underivable_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
