/* db_pg.c — the PostgreSQL backend of db.h (SPEC §13, docs/POSTGRES.md): every claim,
 * record and receipt index row lives in one database that any number of instances share.
 *
 * ## Connections and threads
 * - A pool of --db-pool connections answers claims, releases and lookups, one statement
 *   each, on the caller's thread, bounded by --db-timeout (waiting for a free connection
 *   included). They commit asynchronously (synchronous_commit off): a claim matters only
 *   through the record that consumes it, and that record's synchronous commit flushes the
 *   write-ahead log up to itself, which includes every claim it depends on; a claim lost
 *   in a crash belonged to a request that never got an answer.
 * - One writer thread owns one connection in pipeline mode and commits the queued records
 *   in groups (up to PG_BATCH_MAX per transaction): BEGIN, one statement per record, the
 *   chain head, then COMMIT — two round trips per group, whatever its size. COMMIT runs
 *   with synchronous_commit on; done is called only after it answered.
 * - One upkeep thread refills the pool after a connection broke, and runs the retention
 *   job (expired idempotency and nonce rows, a bounded number per statement).
 * Nothing on the hot path ever connects: a broken connection is closed and replaced by
 * the upkeep, so a dead database costs a request at most --db-timeout.
 *
 * ## Claims and fencing
 * A claim (idempotency key or nonce) is a row holding a token (claim_id, from one
 * sequence) and a lease (--claim-timeout). Another instance may take the row over once
 * the lease has passed; the statement that makes a record durable updates the claim only
 * where claim_id is still ours, and inserts the record only if it could (one statement:
 * the claim rows are locked first, FOR UPDATE, so a takeover that commits in between is
 * seen). A record whose claim was taken over is not written: its request gets 503, the
 * group is rolled back and committed again without it, so the hash chain never has a
 * hole. The tokens stay here (fences, by kind and (tenant, name)); this instance answers
 * a second claim of a key it holds itself from the fence, without the database, and never
 * takes over its own live claim.
 *
 * ## Health
 * healthy turns false when a commit fails or takes longer than its bound, or a pooled
 * statement loses its connection or its bound; the writer then probes (and reconnects)
 * every PG_RETRY_MS and turns it true again when the database answers. While false,
 * appends fail at once; /readyz reads it (tg_db_health).
 */
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backend.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/pg_schema.h"

#define PG_BATCH_MAX 256     /* records per transaction */
#define PG_QUEUE_MAX 16384   /* records waiting for the writer; beyond: TG_ERR_OVERLOADED */
#define PG_FENCE_MAX 1000000 /* claims held by this instance at once */
#define PG_FENCE_BUCKETS 4096
#define PG_RETRY_MS 250        /* the writer's probe / reconnect period while unhealthy */
#define PG_SWEEP_MS 1000       /* the retention job's period */
#define PG_SWEEP_ROWS "1000"   /* rows one retention statement deletes at most */
#define PG_CONNECT_TIMEOUT "2" /* seconds (libpq's granularity); the URL may say otherwise */
#define PG_WHY_MAX 160
/* a chain's start value: 32 zero bytes, as bytea text */
#define PG_ZERO_HASH_HEX "0000000000000000000000000000000000000000000000000000000000000000"

enum { FENCE_KEY = 'k', FENCE_NONCE = 'n' };

/* A claim this instance holds: its token, and for a key the request hash it was taken for. */
typedef struct fence {
    struct fence *next;
    int64_t claim_id;
    uint8_t request_hash[32];
    uint8_t kind;
    size_t tenant_len, name_len;
    char data[]; /* tenant, then name */
} fence_t;

/* A record waiting for the writer: copies of everything the insert needs. */
typedef struct pending {
    struct pending *next;
    tg_db_done_fn done;
    void *ud;
    uint8_t type;
    int status;
    int64_t key_claim, nonce_claim;             /* tokens, from the fences at append */
    const char *tenant, *key, *nonce, *exec_id; /* into data; key/nonce/exec_id NULL if none */
    size_t tenant_len, key_len, nonce_len, exec_id_len;
    const uint8_t *meta, *payload;
    size_t meta_len, payload_len;
    /* filled by the writer, per attempt */
    uint64_t chain_seq;
    uint8_t prev[32], hash[32];
    int64_t seq;
    bool fenced_out;
    uint8_t data[];
} pending_t;

typedef struct pg_db {
    tg_db_t base; /* first: db.c reads base.ops */
    char *url;
    char instance[128];
    tg_db_pg_opts_t o;
    int64_t retention_ms;
    size_t max_key_len;
    char lease_ms[24], retention_txt[24]; /* as statement parameters */

    /* the pool */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    PGconn **idle;
    size_t n_idle, n_open;

    /* fences */
    pthread_mutex_t fence_mu;
    fence_t *buckets[PG_FENCE_BUCKETS];
    size_t n_fences;
    uint8_t fence_key[crypto_shorthash_KEYBYTES];

    /* the writer */
    pthread_t writer;
    bool writer_started;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    pending_t *q_head, *q_tail;
    size_t q_len;
    bool stopping;
    bool probe_wanted; /* a pooled statement lost its connection: check the database */
    PGconn *wconn;
    uint64_t chain_seq;
    uint8_t head[32];

    /* the upkeep */
    pthread_t upkeep;
    bool upkeep_started;
    PGconn *uconn;

    /* health */
    atomic_bool healthy;
    pthread_mutex_t why_mu;
    char why[PG_WHY_MAX];

    /* counters (tg_ledger_stats_t's meaning: a batch is one commit) */
    _Atomic uint64_t st_records, st_bytes, st_batches, st_last_batch, st_max_batch;
    _Atomic uint64_t st_commits, st_commit_us, st_failures, st_stalls, st_rejected;
    _Atomic uint64_t st_head_seq, st_fenced, st_reconnects;
    _Atomic uint64_t st_commit_hist[TG_LEDGER_FSYNC_BUCKETS];
    _Atomic uint64_t st_batch_hist[TG_LEDGER_BATCH_BUCKETS];
} pg_db_t;

/* db is always the base of a pg_db_t: db.c only calls the ops of its own table. */
static pg_db_t *pg_of(tg_db_t *db) { return (pg_db_t *)db; }

static int64_t deadline_in(uint32_t ms) { return tg_clock_mono_ns() + (int64_t)ms * 1000000; }

/* ---- health ------------------------------------------------------------------------------ */

/* The first line of libpq's message, for a log line or why. */
static void first_line(char *out, size_t cap, const char *msg) {
    if (msg == NULL || msg[0] == '\0') {
        msg = "no reason given";
    }
    size_t n = strcspn(msg, "\n");
    (void)snprintf(out, cap, "%.*s", (int)n, msg);
}

static void set_unhealthy(pg_db_t *db, const char *what, const char *detail) {
    char why[PG_WHY_MAX];
    char d[PG_WHY_MAX / 2];
    first_line(d, sizeof d, detail);
    (void)snprintf(why, sizeof why, "%.70s: %s", what, d);
    pthread_mutex_lock(&db->why_mu);
    memcpy(db->why, why, sizeof why);
    pthread_mutex_unlock(&db->why_mu);
    if (atomic_exchange(&db->healthy, false)) {
        atomic_fetch_add(&db->st_failures, 1);
        TG_LOG(TG_LOG_ERROR, "store_unavailable",
               "the database cannot be used (%s); evaluate and execute answer 503 until it "
               "answers again (retried every %d ms)",
               why, PG_RETRY_MS);
    }
}

static void set_healthy(pg_db_t *db) {
    if (!atomic_exchange(&db->healthy, true)) {
        pthread_mutex_lock(&db->why_mu);
        db->why[0] = '\0';
        pthread_mutex_unlock(&db->why_mu);
        TG_LOG(TG_LOG_INFO, "store_available", "the database answers again");
    }
}

/* Asks the writer to check the database (a pooled statement lost its connection). */
static void want_probe(pg_db_t *db) {
    pthread_mutex_lock(&db->q_mu);
    db->probe_wanted = true;
    pthread_cond_signal(&db->q_cv);
    pthread_mutex_unlock(&db->q_mu);
}

/* ---- bounded I/O ------------------------------------------------------------------------- */

/* Flushes and reads until conn's next result can be taken without blocking, or until the
 * deadline. False: the connection failed or ran out of time (the caller closes it). */
static bool pg_wait(PGconn *c, int64_t deadline_ns) {
    for (;;) {
        int fl = PQflush(c);
        if (fl < 0 || PQconsumeInput(c) == 0) {
            return false;
        }
        if (fl == 0 && !PQisBusy(c)) {
            return true;
        }
        int64_t left = deadline_ns - tg_clock_mono_ns();
        if (left <= 0) {
            return false;
        }
        struct pollfd pfd = {.fd = PQsocket(c), .events = (short)(POLLIN | (fl ? POLLOUT : 0))};
        if (pfd.fd < 0) {
            return false;
        }
        int ms = (int)(left / 1000000) + 1;
        (void)poll(&pfd, 1, ms);
    }
}

/* The next result of conn (NULL: the end of one query's results, or a failure: then
 * *failed). */
static PGresult *pg_next(PGconn *c, int64_t deadline_ns, bool *failed) {
    if (!pg_wait(c, deadline_ns)) {
        *failed = true;
        return NULL;
    }
    return PQgetResult(c);
}

/* Runs one statement without parameters on a connection outside pipeline mode, bounded.
 * *res_out (may be NULL) gets the result. False with why filled on failure. */
static bool pg_run(PGconn *c, const char *sql, int64_t deadline_ns, PGresult **res_out, char *why,
                   size_t why_len) {
    if (res_out != NULL) {
        *res_out = NULL;
    }
    if (!PQsendQuery(c, sql)) {
        first_line(why, why_len, PQerrorMessage(c));
        return false;
    }
    bool failed = false, ok = true;
    PGresult *r;
    while ((r = pg_next(c, deadline_ns, &failed)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            if (ok) {
                first_line(why, why_len, PQresultErrorMessage(r));
            }
            ok = false;
        }
        if (res_out != NULL && ok && *res_out == NULL) {
            *res_out = r;
        } else {
            PQclear(r);
        }
    }
    if (failed) {
        first_line(why, why_len,
                   PQstatus(c) == CONNECTION_BAD ? PQerrorMessage(c)
                                                 : "no answer within the bound");
        ok = false;
    }
    if (!ok && res_out != NULL) {
        PQclear(*res_out);
        *res_out = NULL;
    }
    return ok;
}

/* ---- statements -------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *sql;
    int nparams;
} stmt_t;

/* Claims (pool). Intervals come as milliseconds. */
static const stmt_t st_claim_key = {
    "tg_claim_key",
    "WITH ins AS ("
    " INSERT INTO tg_idem_claims AS t (tenant, idem_key, request_hash, state, claim_id, owner,"
    "  lease_until, expires_at)"
    " VALUES ($1::text, $2::text, $3::bytea, 'in_flight', nextval('tg_claim_id_seq'), $4::text,"
    "  now() + $5::bigint * interval '1 millisecond',"
    "  now() + $6::bigint * interval '1 millisecond')"
    " ON CONFLICT (tenant, idem_key) DO UPDATE SET request_hash = excluded.request_hash,"
    "  state = 'in_flight', claim_id = excluded.claim_id, owner = excluded.owner,"
    "  claimed_at = now(), lease_until = excluded.lease_until, record_seq = NULL,"
    "  http_status = NULL, completed_at = NULL, expires_at = excluded.expires_at"
    " WHERE t.expires_at <= now() OR (t.state = 'in_flight' AND t.lease_until <= now())"
    " RETURNING claim_id)"
    " SELECT 0::smallint, claim_id, NULL::bytea, NULL::bigint, NULL::smallint, NULL::bigint"
    " FROM ins"
    " UNION ALL"
    " SELECT CASE state WHEN 'done' THEN 2::smallint ELSE 1::smallint END, claim_id,"
    "  request_hash, record_seq, http_status,"
    "  (extract(epoch FROM completed_at) * 1000)::bigint"
    " FROM tg_idem_claims WHERE tenant = $1::text AND idem_key = $2::text"
    "  AND expires_at > now() AND NOT EXISTS (SELECT 1 FROM ins)",
    6};

static const stmt_t st_claim_nonce = {
    "tg_claim_nonce",
    "INSERT INTO tg_nonces AS t (tenant, nonce, used_at, expires_at, claim_id, lease_until)"
    " VALUES ($1::text, $2::text, now(), now() + $4::bigint * interval '1 millisecond',"
    "  nextval('tg_claim_id_seq'), now() + $3::bigint * interval '1 millisecond')"
    " ON CONFLICT (tenant, nonce) DO UPDATE SET used_at = now(), expires_at = excluded.expires_at,"
    "  claim_id = excluded.claim_id, lease_until = excluded.lease_until, record_seq = NULL"
    " WHERE t.expires_at <= now() OR (t.lease_until IS NOT NULL AND t.lease_until <= now())"
    " RETURNING claim_id",
    4};

/* Releases touch only a claim that is still ours and still in flight: a record that did
 * commit (even one whose answer was lost) keeps its key DONE and its nonce used. */
static const stmt_t st_release_key = {
    "tg_release_key",
    "DELETE FROM tg_idem_claims WHERE tenant = $1::text AND idem_key = $2::text"
    " AND claim_id = $3::bigint AND state = 'in_flight'",
    3};

static const stmt_t st_release_nonce = {
    "tg_release_nonce",
    "DELETE FROM tg_nonces WHERE tenant = $1::text AND nonce = $2::text"
    " AND claim_id = $3::bigint AND lease_until IS NOT NULL",
    3};

static const stmt_t st_find_receipt = {
    "tg_find_receipt",
    "SELECT record_seq FROM tg_receipts WHERE tenant = $1::text AND execution_id = $2::text", 2};

static const stmt_t st_read = {
    "tg_read",
    "SELECT type, chain_seq, meta, payload, prev_hash, record_hash FROM tg_records"
    " WHERE seq = $1::bigint",
    1};

/* The writer's record statement. The claims are locked first (k, n): the record is
 * inserted only while both are still ours, and with it the key turns DONE, the nonce
 * consumed and the receipt indexed, all in this one statement. */
static const stmt_t st_record = {
    "tg_record",
    "WITH k AS (SELECT 1 FROM tg_idem_claims WHERE $9::text IS NOT NULL AND tenant = $3::text"
    "  AND idem_key = $9::text AND claim_id = $10::bigint AND state = 'in_flight' FOR UPDATE),"
    " n AS (SELECT 1 FROM tg_nonces WHERE $11::text IS NOT NULL AND tenant = $3::text"
    "  AND nonce = $11::text AND claim_id = $12::bigint AND lease_until IS NOT NULL FOR UPDATE),"
    " r AS (INSERT INTO tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
    "  prev_hash, record_hash)"
    "  SELECT $1::text, $2::bigint, $3::text, $4::smallint, $5::bytea, $6::bytea, $7::bytea,"
    "  $8::bytea"
    "  WHERE ($9::text IS NULL OR EXISTS (SELECT 1 FROM k))"
    "  AND ($11::text IS NULL OR EXISTS (SELECT 1 FROM n))"
    "  RETURNING seq),"
    " c AS (UPDATE tg_idem_claims t SET state = 'done', lease_until = NULL, record_seq = r.seq,"
    "  http_status = $14::smallint, completed_at = now(),"
    "  expires_at = now() + $15::bigint * interval '1 millisecond'"
    "  FROM r WHERE t.tenant = $3::text AND t.idem_key = $9::text AND t.claim_id = $10::bigint),"
    " u AS (UPDATE tg_nonces t SET lease_until = NULL, record_seq = r.seq"
    "  FROM r WHERE t.tenant = $3::text AND t.nonce = $11::text AND t.claim_id = $12::bigint),"
    " x AS (INSERT INTO tg_receipts (tenant, execution_id, record_seq)"
    "  SELECT $3::text, $13::text, r.seq FROM r WHERE $13::text IS NOT NULL"
    "  ON CONFLICT DO NOTHING)"
    " SELECT seq FROM r",
    15};

static const stmt_t st_head = {
    "tg_head",
    "UPDATE tg_chains SET head_seq = $2::bigint, head_hash = $3::bytea, updated_at = now()"
    " WHERE instance_id = $1::text",
    3};

static const stmt_t *const pool_stmts[] = {
    &st_claim_key, &st_claim_nonce, &st_release_key, &st_release_nonce, &st_find_receipt, &st_read,
    NULL};
static const stmt_t *const writer_stmts[] = {&st_record, &st_head, NULL};

/* ---- connections ------------------------------------------------------------------------- */

typedef enum { ROLE_POOL, ROLE_WRITER, ROLE_UPKEEP } role_t;

static void pg_quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* Opens and prepares one connection for role; NULL with why filled on failure. Blocks for
 * at most the connect timeout plus the bound of each setup statement. */
static PGconn *pg_open(pg_db_t *db, role_t role, char *why, size_t why_len) {
    const char *const keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *const vals[] = {PG_CONNECT_TIMEOUT, "trigguard", db->url, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c == NULL) {
        (void)snprintf(why, why_len, "out of memory");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        first_line(why, why_len, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    /* A standby takes reads only: a URL without target_session_attrs=read-write may land
     * on one (the server reports in_hot_standby since PostgreSQL 14). */
    const char *hot = PQparameterStatus(c, "in_hot_standby");
    if (hot != NULL && strcmp(hot, "on") == 0) {
        (void)snprintf(why, why_len,
                       "the server is a standby (read-only); add target_session_attrs=read-write "
                       "to a multi-host URL");
        PQfinish(c);
        return NULL;
    }
    uint32_t bound = role == ROLE_WRITER ? db->o.commit_timeout_ms
                     : role == ROLE_POOL ? db->o.timeout_ms
                                         : 10000;
    int64_t deadline = deadline_in(bound > 2000 ? bound : 2000);
    char setup[160];
    /* The server gives up on a statement its client has given up on, too. */
    (void)snprintf(setup, sizeof setup, "SET synchronous_commit = %s; SET statement_timeout = %u",
                   role == ROLE_WRITER ? "on" : "off", bound);
    bool ok = pg_run(c, setup, deadline, NULL, why, why_len);
    if (ok && role == ROLE_WRITER) {
        PGresult *res = NULL;
        ok = pg_run(c,
                    "SELECT CASE WHEN to_regclass('trigguard_schema') IS NULL THEN 0"
                    " ELSE (SELECT coalesce(max(version), 0) FROM trigguard_schema) END",
                    deadline, &res, why, why_len);
        if (ok) {
            int v = atoi(PQgetvalue(res, 0, 0));
            if (v != TG_PG_SCHEMA_VERSION) {
                (void)snprintf(why, why_len,
                               "the database has schema version %d, this binary needs %d (run "
                               "trigguard db migrate)",
                               v, TG_PG_SCHEMA_VERSION);
                ok = false;
            }
        }
        PQclear(res);
    }
    const stmt_t *const *list = role == ROLE_WRITER ? writer_stmts
                                : role == ROLE_POOL ? pool_stmts
                                                    : NULL;
    for (; ok && list != NULL && *list != NULL; list++) {
        if (!PQsendPrepare(c, (*list)->name, (*list)->sql, (*list)->nparams, NULL)) {
            first_line(why, why_len, PQerrorMessage(c));
            ok = false;
            break;
        }
        bool failed = false;
        PGresult *r;
        while ((r = pg_next(c, deadline, &failed)) != NULL) {
            if (PQresultStatus(r) != PGRES_COMMAND_OK && ok) {
                first_line(why, why_len, PQresultErrorMessage(r));
                ok = false;
            }
            PQclear(r);
        }
        if (failed) {
            first_line(why, why_len, "no answer within the bound while preparing");
            ok = false;
        }
    }
    if (ok && role == ROLE_WRITER) {
        ok = PQsetnonblocking(c, 1) == 0 && PQenterPipelineMode(c) == 1;
        if (!ok) {
            first_line(why, why_len, PQerrorMessage(c));
        }
    }
    if (!ok) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* ---- the pool ---------------------------------------------------------------------------- */

static PGconn *pool_take(pg_db_t *db, int64_t deadline_ns) {
    PGconn *c = NULL;
    pthread_mutex_lock(&db->pool_mu);
    while (db->n_idle == 0 && !db->stopping) {
        int64_t left = deadline_ns - tg_clock_mono_ns();
        if (left <= 0) {
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + left % 1000000000;
        ts.tv_sec += (time_t)(left / 1000000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        (void)pthread_cond_timedwait(&db->pool_cv, &db->pool_mu, &ts);
    }
    if (db->n_idle > 0) {
        c = db->idle[--db->n_idle];
    }
    pthread_mutex_unlock(&db->pool_mu);
    return c;
}

/* Returns c to the pool, or closes it when broken (the upkeep opens a replacement). */
static void pool_put(pg_db_t *db, PGconn *c, bool broken) {
    if (broken) {
        PQfinish(c);
    }
    pthread_mutex_lock(&db->pool_mu);
    if (broken) {
        db->n_open--;
    } else {
        db->idle[db->n_idle++] = c;
        pthread_cond_signal(&db->pool_cv);
    }
    pthread_mutex_unlock(&db->pool_mu);
}

static void pool_add(pg_db_t *db, PGconn *c) {
    pthread_mutex_lock(&db->pool_mu);
    db->n_open++;
    db->idle[db->n_idle++] = c;
    pthread_cond_signal(&db->pool_cv);
    pthread_mutex_unlock(&db->pool_mu);
}

/* One parameter list: values, lengths, formats (text NUL-terminated when len is
 * TG_PG_TEXT, else binary bytes; NULL ptr = SQL NULL). */
typedef struct {
    const char *v[16];
    int len[16];
    int fmt[16];
    int n;
} params_t;

static void par(params_t *p, const void *ptr, size_t len) {
    p->v[p->n] = ptr;
    p->len[p->n] = len == TG_PG_TEXT ? 0 : (int)len;
    p->fmt[p->n] = len == TG_PG_TEXT ? 0 : 1;
    p->n++;
}

/* Runs a pooled statement within --db-timeout; *res_out gets a TUPLES_OK or COMMAND_OK
 * result (binary columns). TG_ERR_INVALID_ARG for data the server refuses (class 22: a
 * key that is not valid text in the database's encoding), else the unavailable error. */
static tg_err_t pool_call(pg_db_t *db, const stmt_t *s, const params_t *p, PGresult **res_out) {
    *res_out = NULL;
    int64_t deadline = deadline_in(db->o.timeout_ms);
    PGconn *c = pool_take(db, deadline);
    if (c == NULL) {
        set_unhealthy(db, "no database connection within --db-timeout",
                      "every pooled connection is busy or broken");
        want_probe(db);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    if (!PQsendQueryPrepared(c, s->name, p->n, p->v, p->len, p->fmt, 1)) {
        set_unhealthy(db, "a database statement could not be sent", PQerrorMessage(c));
        pool_put(db, c, true);
        want_probe(db);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    bool failed = false;
    PGresult *res = NULL, *r;
    while ((r = pg_next(c, deadline, &failed)) != NULL) {
        if (res == NULL) {
            res = r;
        } else {
            PQclear(r);
        }
    }
    if (failed) {
        set_unhealthy(db, "a database statement did not answer within --db-timeout",
                      PQstatus(c) == CONNECTION_BAD ? PQerrorMessage(c) : "timed out");
        PQclear(res);
        pool_put(db, c, true);
        want_probe(db);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        pool_put(db, c, false);
        *res_out = res;
        return TG_OK;
    }
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    bool data = state != NULL && strncmp(state, "22", 2) == 0;
    bool bad = PQstatus(c) == CONNECTION_BAD;
    if (!data) {
        TG_LOG(TG_LOG_WARN, "store_statement_failed", "%s failed (SQLSTATE %s): %.200s", s->name,
               state != NULL ? state : "none",
               res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c));
    }
    PQclear(res);
    /* A read-only server (a demoted primary) or a lost connection: this connection is no
     * use any more; a fresh one follows the multi-host URL to the new primary. */
    bool drop =
        bad || (state != NULL && (strcmp(state, "25006") == 0 || strncmp(state, "08", 2) == 0 ||
                                  strncmp(state, "57", 2) == 0));
    pool_put(db, c, drop);
    if (drop) {
        set_unhealthy(db, "a database connection failed", state != NULL ? state : "closed");
        want_probe(db);
    }
    return data ? TG_ERR_INVALID_ARG : TG_ERR_STORE_UNAVAILABLE;
}

/* ---- binary results ---------------------------------------------------------------------- */

static int64_t get_i64(const PGresult *r, int row, int col) {
    const uint8_t *b = (const uint8_t *)PQgetvalue(r, row, col);
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8) {
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | b[i];
    }
    return (int64_t)v;
}

static int get_i16(const PGresult *r, int row, int col) {
    const uint8_t *b = (const uint8_t *)PQgetvalue(r, row, col);
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 2) {
        return 0;
    }
    return (int16_t)(uint16_t)((b[0] << 8) | b[1]);
}

/* ---- fences ------------------------------------------------------------------------------ */

static size_t fence_bucket(const pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                           size_t nl) {
    crypto_generichash_state st;
    uint8_t h[16];
    uint8_t lens[17];
    lens[0] = kind;
    for (int i = 0; i < 8; i++) {
        lens[1 + i] = (uint8_t)(tl >> (8 * i));
        lens[9 + i] = (uint8_t)(nl >> (8 * i));
    }
    /* keyed: a caller cannot aim many keys at one bucket */
    crypto_generichash_init(&st, db->fence_key, sizeof db->fence_key, sizeof h);
    crypto_generichash_update(&st, lens, sizeof lens);
    crypto_generichash_update(&st, (const uint8_t *)t, tl);
    crypto_generichash_update(&st, (const uint8_t *)n, nl);
    crypto_generichash_final(&st, h, sizeof h);
    uint64_t v = 0;
    memcpy(&v, h, sizeof v);
    return (size_t)(v % PG_FENCE_BUCKETS);
}

/* fence_mu held. */
static fence_t **fence_find(pg_db_t *db, size_t b, uint8_t kind, const char *t, size_t tl,
                            const char *n, size_t nl) {
    fence_t **pp = &db->buckets[b];
    for (; *pp != NULL; pp = &(*pp)->next) {
        fence_t *f = *pp;
        if (f->kind == kind && f->tenant_len == tl && f->name_len == nl &&
            memcmp(f->data, t, tl) == 0 && memcmp(f->data + tl, n, nl) == 0) {
            return pp;
        }
    }
    return pp;
}

/* Looks up this instance's claim; copies it into *out when held. */
static bool fence_get(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n, size_t nl,
                      fence_t *out) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    pthread_mutex_lock(&db->fence_mu);
    fence_t *f = *fence_find(db, b, kind, t, tl, n, nl);
    if (f != NULL && out != NULL) {
        out->claim_id = f->claim_id;
        memcpy(out->request_hash, f->request_hash, sizeof out->request_hash);
    }
    pthread_mutex_unlock(&db->fence_mu);
    return f != NULL;
}

static tg_err_t fence_put(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                          size_t nl, int64_t claim_id, const uint8_t *request_hash) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    fence_t *f = malloc(sizeof *f + tl + nl);
    if (f == NULL) {
        return TG_ERR_NOMEM;
    }
    f->kind = kind;
    f->claim_id = claim_id;
    f->tenant_len = tl;
    f->name_len = nl;
    memcpy(f->data, t, tl);
    memcpy(f->data + tl, n, nl);
    if (request_hash != NULL) {
        memcpy(f->request_hash, request_hash, sizeof f->request_hash);
    } else {
        memset(f->request_hash, 0, sizeof f->request_hash);
    }
    pthread_mutex_lock(&db->fence_mu);
    fence_t **pp = fence_find(db, b, kind, t, tl, n, nl);
    tg_err_t rc = TG_OK;
    if (*pp != NULL) {
        rc = TG_ERR_EXISTS; /* never two claims of one name here: a caller bug */
    } else if (db->n_fences >= PG_FENCE_MAX) {
        rc = TG_ERR_LIMIT;
    } else {
        *pp = f;
        f->next = NULL;
        db->n_fences++;
        f = NULL;
    }
    pthread_mutex_unlock(&db->fence_mu);
    free(f);
    return rc;
}

/* Removes this instance's claim; *claim_id gets its token. */
static bool fence_take(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                       size_t nl, int64_t *claim_id) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    pthread_mutex_lock(&db->fence_mu);
    fence_t **pp = fence_find(db, b, kind, t, tl, n, nl);
    fence_t *f = *pp;
    if (f != NULL) {
        *pp = f->next;
        db->n_fences--;
        *claim_id = f->claim_id;
    }
    pthread_mutex_unlock(&db->fence_mu);
    free(f);
    return f != NULL;
}

/* ---- claims ------------------------------------------------------------------------------ */

/* tenant, key or nonce as a statement parameter: text in the database, so no NUL, and
 * (checked by the server) valid in its encoding. */
static bool name_ok(const char *s, size_t n, size_t max) {
    return s != NULL && n >= 1 && n <= max && memchr(s, '\0', n) == NULL;
}

static tg_err_t pg_claim_key(tg_db_t *dbp, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) {
    pg_db_t *db = pg_of(dbp);
    (void)now_ms; /* the database's clock decides leases and retention, for every instance */
    memset(res, 0, sizeof *res);
    if (!name_ok(tenant, tenant_len, TG_STORE_TENANT_MAX) ||
        !name_ok(key, key_len, db->max_key_len) || request_hash == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    fence_t mine;
    if (fence_get(db, FENCE_KEY, tenant, tenant_len, key, key_len, &mine)) {
        /* in flight here: answered without the database, and never taken over by us */
        return sodium_memcmp(mine.request_hash, request_hash, 32) == 0 ? TG_ERR_IN_FLIGHT
                                                                       : TG_ERR_CONFLICT;
    }
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, key, key_len);
    par(&p, request_hash, 32);
    par(&p, db->instance, strlen(db->instance));
    par(&p, db->lease_ms, TG_PG_TEXT);
    par(&p, db->retention_txt, TG_PG_TEXT);
    /* A row that commits between the insert's conflict check and the select's snapshot is
     * seen by neither: ask again (each statement takes a new snapshot). */
    for (int attempt = 0; attempt < 3; attempt++) {
        PGresult *r = NULL;
        tg_err_t rc = pool_call(db, &st_claim_key, &p, &r);
        if (rc != TG_OK) {
            return rc;
        }
        if (PQntuples(r) == 0) {
            PQclear(r);
            continue;
        }
        int state = get_i16(r, 0, 0);
        int64_t claim_id = get_i64(r, 0, 1);
        bool same = state == 0 || (PQgetlength(r, 0, 2) == 32 &&
                                   sodium_memcmp(PQgetvalue(r, 0, 2), request_hash, 32) == 0);
        if (state == 0) {
            PQclear(r);
            rc = fence_put(db, FENCE_KEY, tenant, tenant_len, key, key_len, claim_id, request_hash);
            if (rc != TG_OK) {
                /* cannot remember the token: give the claim back rather than hold it blind */
                params_t q = {.n = 0};
                char id[24];
                (void)snprintf(id, sizeof id, "%lld", (long long)claim_id);
                par(&q, tenant, tenant_len);
                par(&q, key, key_len);
                par(&q, id, TG_PG_TEXT);
                PGresult *x = NULL;
                TG_IGNORE(pool_call(db, &st_release_key, &q, &x));
                PQclear(x);
                return rc == TG_ERR_LIMIT ? TG_ERR_LIMIT : TG_ERR_NOMEM;
            }
            res->state = TG_IDEM_NEW;
            return TG_OK;
        }
        if (!same) {
            PQclear(r);
            return TG_ERR_CONFLICT;
        }
        if (state == 1) {
            PQclear(r);
            return TG_ERR_IN_FLIGHT;
        }
        res->state = TG_IDEM_REPLAY;
        memcpy(res->entry.request_hash, request_hash, 32);
        res->entry.status = get_i16(r, 0, 4);
        res->entry.pos.seq = (uint64_t)get_i64(r, 0, 3);
        res->entry.stored_at_ms = get_i64(r, 0, 5);
        PQclear(r);
        return TG_OK;
    }
    return TG_ERR_STORE_UNAVAILABLE;
}

static tg_err_t pg_claim_nonce(tg_db_t *dbp, const char *tenant, size_t tenant_len,
                               const char *nonce, size_t nonce_len, int64_t now_ms) {
    pg_db_t *db = pg_of(dbp);
    (void)now_ms;
    if (!name_ok(tenant, tenant_len, TG_STORE_TENANT_MAX) ||
        !name_ok(nonce, nonce_len, db->max_key_len)) {
        return TG_ERR_INVALID_ARG;
    }
    if (fence_get(db, FENCE_NONCE, tenant, tenant_len, nonce, nonce_len, NULL)) {
        return TG_ERR_REPLAY;
    }
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, nonce, nonce_len);
    par(&p, db->lease_ms, TG_PG_TEXT);
    par(&p, db->retention_txt, TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_claim_nonce, &p, &r);
    if (rc != TG_OK) {
        return rc;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return TG_ERR_REPLAY; /* used, or held by a request in flight: either way not again */
    }
    int64_t claim_id = get_i64(r, 0, 0);
    PQclear(r);
    rc = fence_put(db, FENCE_NONCE, tenant, tenant_len, nonce, nonce_len, claim_id, NULL);
    if (rc != TG_OK) {
        params_t q = {.n = 0};
        char id[24];
        (void)snprintf(id, sizeof id, "%lld", (long long)claim_id);
        par(&q, tenant, tenant_len);
        par(&q, nonce, nonce_len);
        par(&q, id, TG_PG_TEXT);
        PGresult *x = NULL;
        TG_IGNORE(pool_call(db, &st_release_nonce, &q, &x));
        PQclear(x);
        return rc == TG_ERR_LIMIT ? TG_ERR_LIMIT : TG_ERR_NOMEM;
    }
    return TG_OK;
}

static tg_err_t release(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                        size_t nl) {
    int64_t claim_id = 0;
    if (t == NULL || n == NULL || !fence_take(db, kind, t, tl, n, nl, &claim_id)) {
        return TG_ERR_NOT_FOUND;
    }
    char id[24];
    (void)snprintf(id, sizeof id, "%lld", (long long)claim_id);
    params_t p = {.n = 0};
    par(&p, t, tl);
    par(&p, n, nl);
    par(&p, id, TG_PG_TEXT);
    PGresult *r = NULL;
    /* If this fails the row keeps its lease, and is free once the lease has passed. */
    tg_err_t rc = pool_call(db, kind == FENCE_KEY ? &st_release_key : &st_release_nonce, &p, &r);
    PQclear(r);
    return rc;
}

static tg_err_t pg_release_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len) {
    return release(pg_of(db), FENCE_KEY, tenant, tenant_len, key, key_len);
}

static tg_err_t pg_release_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len) {
    return release(pg_of(db), FENCE_NONCE, tenant, tenant_len, nonce, nonce_len);
}

static bool pg_receipt_room(tg_db_t *db, size_t tenant_len, size_t id_len) {
    (void)db;
    (void)tenant_len;
    (void)id_len;
    return true; /* rows, not memory: the database's disk is the cap */
}

static void pg_announce(tg_db_t *db) { (void)db; }

static void pg_announce_end(tg_db_t *db) { (void)db; }

/* ---- appends ----------------------------------------------------------------------------- */

static tg_err_t pg_append(tg_db_t *dbp, const tg_db_record_t *rec, tg_db_done_fn done, void *ud) {
    pg_db_t *db = pg_of(dbp);
    if ((rec->type != TG_LEDGER_TYPE_RECEIPT && rec->type != TG_LEDGER_TYPE_SILENCE) ||
        done == NULL || (rec->meta == NULL && rec->meta_len) ||
        (rec->payload == NULL && rec->payload_len) || rec->tenant == NULL ||
        !name_ok(rec->tenant, rec->tenant_len, TG_STORE_TENANT_MAX)) {
        return TG_ERR_INVALID_ARG;
    }
    if (rec->meta_len > TG_LEDGER_META_MAX || rec->payload_len > TG_LEDGER_PAYLOAD_MAX) {
        return TG_ERR_LIMIT;
    }
    if (!atomic_load(&db->healthy)) {
        atomic_fetch_add(&db->st_rejected, 1);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    fence_t kf, nf;
    if ((rec->key != NULL &&
         !fence_get(db, FENCE_KEY, rec->tenant, rec->tenant_len, rec->key, rec->key_len, &kf)) ||
        (rec->nonce != NULL && !fence_get(db, FENCE_NONCE, rec->tenant, rec->tenant_len, rec->nonce,
                                          rec->nonce_len, &nf))) {
        return TG_ERR_INVALID_ARG; /* a record must hold the claims it completes */
    }
    bool receipt = rec->type == TG_LEDGER_TYPE_RECEIPT && rec->exec_id != NULL;
    size_t extra = rec->tenant_len + (rec->key ? rec->key_len : 0) +
                   (rec->nonce ? rec->nonce_len : 0) + (receipt ? rec->exec_id_len : 0) +
                   rec->meta_len + rec->payload_len;
    pending_t *pr = calloc(1, sizeof *pr + extra);
    if (pr == NULL) {
        return TG_ERR_NOMEM;
    }
    uint8_t *w = pr->data;
#define PG_COPY(dst, src, n)                                                                       \
    do {                                                                                           \
        if ((n) > 0) {                                                                             \
            memcpy(w, (src), (n));                                                                 \
        }                                                                                          \
        (dst) = (void *)w;                                                                         \
        w += (n);                                                                                  \
    } while (0)
    PG_COPY(pr->tenant, rec->tenant, rec->tenant_len);
    pr->tenant_len = rec->tenant_len;
    if (rec->key != NULL) {
        PG_COPY(pr->key, rec->key, rec->key_len);
        pr->key_len = rec->key_len;
        pr->key_claim = kf.claim_id;
    }
    if (rec->nonce != NULL) {
        PG_COPY(pr->nonce, rec->nonce, rec->nonce_len);
        pr->nonce_len = rec->nonce_len;
        pr->nonce_claim = nf.claim_id;
    }
    if (receipt) {
        PG_COPY(pr->exec_id, rec->exec_id, rec->exec_id_len);
        pr->exec_id_len = rec->exec_id_len;
    }
    PG_COPY(pr->meta, rec->meta, rec->meta_len);
    pr->meta_len = rec->meta_len;
    PG_COPY(pr->payload, rec->payload, rec->payload_len);
    pr->payload_len = rec->payload_len;
#undef PG_COPY
    pr->type = rec->type;
    pr->status = rec->status;
    pr->done = done;
    pr->ud = ud;
    pthread_mutex_lock(&db->q_mu);
    tg_err_t rc = TG_OK;
    if (db->stopping) {
        rc = TG_ERR_STORE_UNAVAILABLE;
    } else if (db->q_len >= PG_QUEUE_MAX) {
        rc = TG_ERR_OVERLOADED;
    } else {
        if (db->q_tail != NULL) {
            db->q_tail->next = pr;
        } else {
            db->q_head = pr;
        }
        db->q_tail = pr;
        db->q_len++;
        pthread_cond_signal(&db->q_cv);
    }
    pthread_mutex_unlock(&db->q_mu);
    if (rc != TG_OK) {
        atomic_fetch_add(&db->st_rejected, 1);
        free(pr);
    }
    return rc;
}

static tg_err_t pg_append_now(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos) {
    (void)db;
    (void)rec;
    if (pos != NULL) {
        memset(pos, 0, sizeof *pos);
    }
    return TG_ERR_INVALID_ARG; /* no durability "none" here: config refuses it */
}

/* ---- the writer -------------------------------------------------------------------------- */

/* Reads the results of the n queries sent since the last sync and the sync itself. out[i]
 * gets query i's first result (the caller clears them). False: the connection failed or
 * ran out of time. */
static bool read_pipeline(PGconn *c, int64_t deadline, PGresult **out, size_t n) {
    size_t i = 0;
    bool failed = false;
    for (;;) {
        PGresult *r = pg_next(c, deadline, &failed);
        if (failed) {
            return false;
        }
        if (r == NULL) {
            /* the end of one query's results */
            if (i < n && out[i] != NULL) {
                i++;
            }
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            return true;
        }
        if (i < n && out[i] == NULL) {
            out[i] = r;
        } else {
            PQclear(r);
        }
    }
}

static bool res_ok(const PGresult *r) {
    ExecStatusType st = PQresultStatus(r);
    return r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
}

static void writer_drop(pg_db_t *db) {
    PQfinish(db->wconn);
    db->wconn = NULL;
}

/* Sends one record's statement. */
static bool send_record(pg_db_t *db, pending_t *pr, const char *retention) {
    char chain[24], type[8], status[8], kc[24], nc[24];
    (void)snprintf(chain, sizeof chain, "%llu", (unsigned long long)pr->chain_seq);
    (void)snprintf(type, sizeof type, "%u", (unsigned)pr->type);
    (void)snprintf(status, sizeof status, "%d", pr->status);
    (void)snprintf(kc, sizeof kc, "%lld", (long long)pr->key_claim);
    (void)snprintf(nc, sizeof nc, "%lld", (long long)pr->nonce_claim);
    params_t p = {.n = 0};
    par(&p, db->instance, strlen(db->instance));
    par(&p, chain, TG_PG_TEXT);
    par(&p, pr->tenant, pr->tenant_len);
    par(&p, type, TG_PG_TEXT);
    par(&p, pr->meta_len ? (const char *)pr->meta : "", pr->meta_len);
    par(&p, pr->payload_len ? (const char *)pr->payload : "", pr->payload_len);
    par(&p, (const char *)pr->prev, 32);
    par(&p, (const char *)pr->hash, 32);
    par(&p, pr->key, pr->key != NULL ? pr->key_len : 0);
    par(&p, pr->key != NULL ? kc : NULL, TG_PG_TEXT);
    par(&p, pr->nonce, pr->nonce != NULL ? pr->nonce_len : 0);
    par(&p, pr->nonce != NULL ? nc : NULL, TG_PG_TEXT);
    par(&p, pr->exec_id, pr->exec_id != NULL ? pr->exec_id_len : 0);
    par(&p, status, TG_PG_TEXT);
    par(&p, retention, TG_PG_TEXT);
    return PQsendQueryPrepared(db->wconn, st_record.name, p.n, p.v, p.len, p.fmt, 1) == 1;
}

typedef enum { TRY_COMMITTED, TRY_FENCED, TRY_FAILED } try_t;

/* One attempt at committing v[0..n) in one transaction. TRY_FENCED: some records lost
 * their claim (fenced_out set) and the transaction was rolled back. */
static try_t try_commit(pg_db_t *db, pending_t **v, size_t n, PGresult **res, char *why,
                        size_t why_len) {
    PGconn *c = db->wconn;
    int64_t deadline = deadline_in(db->o.commit_timeout_ms);
    uint64_t seq = db->chain_seq;
    uint8_t prev[32];
    memcpy(prev, db->head, sizeof prev);
    for (size_t i = 0; i < n; i++) {
        pending_t *pr = v[i];
        pr->chain_seq = ++seq;
        memcpy(pr->prev, prev, sizeof prev);
        if (tg_ledger_record_hash(pr->hash, pr->type, pr->chain_seq, pr->prev, pr->meta,
                                  pr->meta_len, pr->payload, pr->payload_len) != TG_OK) {
            (void)snprintf(why, why_len, "a record over the ledger's caps");
            return TRY_FAILED;
        }
        memcpy(prev, pr->hash, sizeof prev);
    }
    char head_seq[24];
    (void)snprintf(head_seq, sizeof head_seq, "%llu", (unsigned long long)seq);
    params_t hp = {.n = 0};
    par(&hp, db->instance, strlen(db->instance));
    par(&hp, head_seq, TG_PG_TEXT);
    par(&hp, (const char *)prev, 32);
    bool sent = PQsendQueryParams(c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) == 1;
    for (size_t i = 0; sent && i < n; i++) {
        sent = send_record(db, v[i], db->retention_txt);
    }
    sent = sent && PQsendQueryPrepared(c, st_head.name, hp.n, hp.v, hp.len, hp.fmt, 0) == 1 &&
           PQpipelineSync(c) == 1;
    size_t nq = n + 2;
    memset(res, 0, nq * sizeof *res);
    if (!sent || !read_pipeline(c, deadline, res, nq)) {
        first_line(why, why_len,
                   PQstatus(c) == CONNECTION_BAD || !sent ? PQerrorMessage(c)
                                                          : "no answer within the commit bound");
        return TRY_FAILED;
    }
    bool all = res_ok(res[0]) && res_ok(res[nq - 1]) && strcmp(PQcmdTuples(res[nq - 1]), "1") == 0;
    bool fenced = false;
    for (size_t i = 0; all && i < n; i++) {
        PGresult *r = res[1 + i];
        if (!res_ok(r)) {
            all = false;
        } else if (PQntuples(r) != 1) {
            v[i]->fenced_out = true;
            fenced = true;
        } else {
            v[i]->seq = get_i64(r, 0, 0);
        }
    }
    if (!all) {
        const PGresult *bad = NULL;
        for (size_t i = 0; i < nq && bad == NULL; i++) {
            if (res[i] != NULL && !res_ok(res[i]) &&
                PQresultStatus(res[i]) != PGRES_PIPELINE_ABORTED) {
                bad = res[i];
            }
        }
        first_line(why, why_len,
                   bad != NULL ? PQresultErrorMessage(bad) : "the chain head row is missing");
    }
    const char *end = all && !fenced ? "COMMIT" : "ROLLBACK";
    PGresult *er[1] = {NULL};
    bool ended = PQsendQueryParams(c, end, 0, NULL, NULL, NULL, NULL, 0) == 1 &&
                 PQpipelineSync(c) == 1 && read_pipeline(c, deadline, er, 1);
    bool end_ok = ended && res_ok(er[0]);
    if (!end_ok && all && !fenced) {
        first_line(why, why_len,
                   er[0] != NULL                   ? PQresultErrorMessage(er[0])
                   : PQstatus(c) == CONNECTION_BAD ? PQerrorMessage(c)
                                                   : "COMMIT did not answer within the bound");
    }
    PQclear(er[0]);
    if (!all || !end_ok) {
        return TRY_FAILED;
    }
    if (fenced) {
        return TRY_FENCED;
    }
    db->chain_seq = seq;
    memcpy(db->head, prev, sizeof prev);
    return TRY_COMMITTED;
}

static void finish(pg_db_t *db, pending_t *pr, tg_err_t status) {
    tg_ledger_pos_t pos;
    memset(&pos, 0, sizeof pos);
    int64_t id = 0;
    if (status == TG_OK) {
        pos.seq = (uint64_t)pr->seq;
        /* durable: the claims are settled in the database; this instance lets go of them */
        if (pr->key != NULL) {
            (void)fence_take(db, FENCE_KEY, pr->tenant, pr->tenant_len, pr->key, pr->key_len, &id);
        }
        if (pr->nonce != NULL) {
            (void)fence_take(db, FENCE_NONCE, pr->tenant, pr->tenant_len, pr->nonce, pr->nonce_len,
                             &id);
        }
    }
    pr->done(pr->ud, status, &pos);
    free(pr);
}

static void commit_group(pg_db_t *db, pending_t **v, size_t n) {
    PGresult *res[PG_BATCH_MAX + 2];
    char why[PG_WHY_MAX] = "";
    size_t live = n;
    int64_t t0 = tg_clock_mono_ns();
    try_t t = TRY_FAILED;
    while (live > 0 && db->wconn != NULL) {
        t = try_commit(db, v, live, res, why, sizeof why);
        for (size_t i = 0; i < live + 2; i++) {
            PQclear(res[i]);
        }
        if (t != TRY_FENCED) {
            break;
        }
        /* Those whose claim another instance took over are not written; the rest go again,
         * chained anew, so the chain has no hole. */
        size_t k = 0;
        for (size_t i = 0; i < live; i++) {
            if (v[i]->fenced_out) {
                atomic_fetch_add(&db->st_fenced, 1);
                TG_LOG(TG_LOG_WARN, "claim_fenced",
                       "a record was not written: another instance took over its claim after "
                       "--claim-timeout; its request gets 503");
                finish(db, v[i], TG_ERR_STORE_UNAVAILABLE);
            } else {
                v[k++] = v[i];
            }
        }
        live = k;
    }
    if (live == 0) {
        return;
    }
    if (t == TRY_COMMITTED) {
        uint64_t us = (uint64_t)((tg_clock_mono_ns() - t0) / 1000);
        uint64_t bytes = 0;
        for (size_t i = 0; i < live; i++) {
            bytes += v[i]->meta_len + v[i]->payload_len;
        }
        atomic_fetch_add(&db->st_records, live);
        atomic_fetch_add(&db->st_bytes, bytes);
        atomic_fetch_add(&db->st_batches, 1);
        atomic_store(&db->st_last_batch, live);
        uint64_t mx = atomic_load(&db->st_max_batch);
        if (live > mx) {
            atomic_store(&db->st_max_batch, live);
        }
        atomic_fetch_add(&db->st_commits, 1);
        atomic_fetch_add(&db->st_commit_us, us);
        atomic_fetch_add(&db->st_commit_hist[tg_ledger_hist_bucket(
                             tg_ledger_fsync_bounds_us, TG_LEDGER_FSYNC_BUCKETS - 1, us)],
                         1);
        atomic_fetch_add(&db->st_batch_hist[tg_ledger_hist_bucket(
                             tg_ledger_batch_bounds, TG_LEDGER_BATCH_BUCKETS - 1, live)],
                         1);
        atomic_store(&db->st_head_seq, db->chain_seq);
        for (size_t i = 0; i < live; i++) {
            finish(db, v[i], TG_OK);
        }
        return;
    }
    /* Not committed, or not known to be (a COMMIT whose answer was lost may have
     * committed): 503 for all of them. Their releases delete only claims still in flight,
     * so a record that did commit keeps its key and nonce; the chain head is read back
     * from the database at the reconnect. */
    if (db->wconn != NULL && (tg_clock_mono_ns() - t0) / 1000000 >= db->o.commit_timeout_ms) {
        atomic_fetch_add(&db->st_stalls, 1);
    }
    set_unhealthy(db, "a commit failed", why[0] ? why : "the connection is gone");
    writer_drop(db);
    for (size_t i = 0; i < live; i++) {
        finish(db, v[i], TG_ERR_STORE_UNAVAILABLE);
    }
}

/* (Re)connects the writer and reads where its chain stands. */
static bool writer_connect(pg_db_t *db, char *why, size_t why_len) {
    PGconn *c = pg_open(db, ROLE_WRITER, why, why_len);
    if (c == NULL) {
        return false;
    }
    db->wconn = c;
    /* In pipeline mode: one query and a sync. */
    params_t p = {.n = 0};
    par(&p, db->instance, strlen(db->instance));
    PGresult *r[1] = {NULL};
    int64_t deadline = deadline_in(db->o.commit_timeout_ms);
    bool ok = PQsendQueryParams(c,
                                "INSERT INTO tg_chains (instance_id, head_seq, head_hash)"
                                " VALUES ($1::text, 0, '\\x" PG_ZERO_HASH_HEX "')"
                                " ON CONFLICT (instance_id) DO UPDATE SET updated_at = now()"
                                " RETURNING head_seq, head_hash",
                                p.n, NULL, p.v, p.len, p.fmt, 1) == 1 &&
              PQpipelineSync(c) == 1 && read_pipeline(c, deadline, r, 1) && res_ok(r[0]) &&
              PQntuples(r[0]) == 1 && PQgetlength(r[0], 0, 1) == 32;
    if (ok) {
        db->chain_seq = (uint64_t)get_i64(r[0], 0, 0);
        memcpy(db->head, PQgetvalue(r[0], 0, 1), 32);
        atomic_store(&db->st_head_seq, db->chain_seq);
    } else {
        first_line(why, why_len, r[0] != NULL ? PQresultErrorMessage(r[0]) : PQerrorMessage(c));
        writer_drop(db);
    }
    PQclear(r[0]);
    return ok;
}

/* Checks the writer's connection with a trivial statement. */
static bool writer_probe(pg_db_t *db, char *why, size_t why_len) {
    PGresult *r[1] = {NULL};
    bool ok = PQsendQueryParams(db->wconn, "SELECT 1", 0, NULL, NULL, NULL, NULL, 0) == 1 &&
              PQpipelineSync(db->wconn) == 1 &&
              read_pipeline(db->wconn, deadline_in(db->o.timeout_ms), r, 1) && res_ok(r[0]);
    if (!ok) {
        first_line(why, why_len, r[0] != NULL ? PQresultErrorMessage(r[0]) : "no answer");
    }
    PQclear(r[0]);
    return ok;
}

static void *writer_main(void *arg) {
    pg_db_t *db = arg;
    pending_t *v[PG_BATCH_MAX];
    char why[PG_WHY_MAX];
    for (;;) {
        pthread_mutex_lock(&db->q_mu);
        if (db->q_head == NULL && !db->stopping && !db->probe_wanted) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += PG_RETRY_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            (void)pthread_cond_timedwait(&db->q_cv, &db->q_mu, &ts);
        }
        size_t n = 0;
        while (db->q_head != NULL && n < PG_BATCH_MAX) {
            pending_t *pr = db->q_head;
            db->q_head = pr->next;
            pr->next = NULL;
            v[n++] = pr;
            db->q_len--;
        }
        if (db->q_head == NULL) {
            db->q_tail = NULL;
        }
        bool stop = db->stopping && n == 0;
        bool probe = db->probe_wanted;
        db->probe_wanted = false;
        pthread_mutex_unlock(&db->q_mu);
        if (stop) {
            break;
        }
        /* Unhealthy, or asked to look: probe, reconnect when the connection is gone. */
        if (db->wconn != NULL && (probe || !atomic_load(&db->healthy))) {
            if (writer_probe(db, why, sizeof why)) {
                set_healthy(db);
            } else {
                set_unhealthy(db, "the database does not answer", why);
                writer_drop(db);
            }
        }
        if (db->wconn == NULL && !db->stopping) {
            if (writer_connect(db, why, sizeof why)) {
                atomic_fetch_add(&db->st_reconnects, 1);
                set_healthy(db);
            } else {
                set_unhealthy(db, "cannot connect to the database", why);
            }
        }
        if (n == 0) {
            continue;
        }
        if (db->wconn == NULL) {
            for (size_t i = 0; i < n; i++) {
                finish(db, v[i], TG_ERR_STORE_UNAVAILABLE);
            }
            continue;
        }
        commit_group(db, v, n);
    }
    return NULL;
}

/* ---- the upkeep -------------------------------------------------------------------------- */

static void upkeep_sweep(pg_db_t *db) {
    char why[PG_WHY_MAX];
    if (db->uconn == NULL) {
        db->uconn = pg_open(db, ROLE_UPKEEP, why, sizeof why);
        if (db->uconn == NULL) {
            return;
        }
    }
    /* A bounded number of rows per statement, skipping rows a claim holds right now, so
     * the job never stalls a request behind a long delete. */
    static const char *const sweeps[] = {
        "DELETE FROM tg_idem_claims WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_idem_claims"
        " WHERE expires_at <= now() LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
        "DELETE FROM tg_nonces WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_nonces"
        " WHERE expires_at <= now() LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
    };
    for (size_t i = 0; i < sizeof sweeps / sizeof sweeps[0]; i++) {
        if (!pg_run(db->uconn, sweeps[i], deadline_in(10000), NULL, why, sizeof why)) {
            TG_LOG(TG_LOG_WARN, "retention_failed", "the retention job failed: %s", why);
            PQfinish(db->uconn);
            db->uconn = NULL;
            return;
        }
    }
}

static void *upkeep_main(void *arg) {
    pg_db_t *db = arg;
    int64_t next_sweep = tg_clock_mono_ns();
    char why[PG_WHY_MAX];
    for (;;) {
        pthread_mutex_lock(&db->pool_mu);
        bool stop = db->stopping;
        bool want = db->n_open < db->o.pool;
        if (!stop && !want) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            (void)pthread_cond_timedwait(&db->pool_cv, &db->pool_mu, &ts);
            stop = db->stopping;
            want = db->n_open < db->o.pool;
        }
        pthread_mutex_unlock(&db->pool_mu);
        if (stop) {
            break;
        }
        if (want) {
            PGconn *c = pg_open(db, ROLE_POOL, why, sizeof why);
            if (c != NULL) {
                pool_add(db, c);
            } else {
                /* the writer says so in the log and in /readyz; here just wait a little */
                usleep(PG_RETRY_MS * 1000);
            }
        }
        if (atomic_load(&db->healthy) && tg_clock_mono_ns() >= next_sweep) {
            upkeep_sweep(db);
            next_sweep = tg_clock_mono_ns() + (int64_t)PG_SWEEP_MS * 1000000;
        }
    }
    return NULL;
}

/* ---- lookups ----------------------------------------------------------------------------- */

static tg_err_t pg_find_receipt(tg_db_t *dbp, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) {
    pg_db_t *db = pg_of(dbp);
    (void)now_ms;
    memset(pos, 0, sizeof *pos);
    if (!name_ok(tenant, tenant_len, TG_STORE_TENANT_MAX) || !name_ok(id, id_len, 256)) {
        return TG_ERR_INVALID_ARG;
    }
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, id, id_len);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_find_receipt, &p, &r);
    if (rc == TG_ERR_INVALID_ARG) {
        return TG_ERR_NOT_FOUND; /* not valid text: no receipt can have that id */
    }
    if (rc != TG_OK) {
        return rc;
    }
    rc = TG_ERR_NOT_FOUND;
    if (PQntuples(r) == 1) {
        pos->seq = (uint64_t)get_i64(r, 0, 0);
        rc = TG_OK;
    }
    PQclear(r);
    return rc;
}

static tg_err_t pg_read(tg_db_t *dbp, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                        tg_buf_t *meta_out) {
    pg_db_t *db = pg_of(dbp);
    if (pos == NULL || pos->seq == 0 || pos->seq > (uint64_t)INT64_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    char seq[24];
    (void)snprintf(seq, sizeof seq, "%llu", (unsigned long long)pos->seq);
    params_t p = {.n = 0};
    par(&p, seq, TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_read, &p, &r);
    if (rc != TG_OK) {
        return rc;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return TG_ERR_NOT_FOUND;
    }
    int type = get_i16(r, 0, 0);
    int64_t chain_seq = get_i64(r, 0, 1);
    const uint8_t *meta = (const uint8_t *)PQgetvalue(r, 0, 2);
    size_t meta_len = (size_t)PQgetlength(r, 0, 2);
    const uint8_t *payload = (const uint8_t *)PQgetvalue(r, 0, 3);
    size_t payload_len = (size_t)PQgetlength(r, 0, 3);
    /* Re-verified as a ledger read is: the row's hash must be its fields' hash. */
    if (type < 0 || type > 255 || chain_seq < 1 || PQgetlength(r, 0, 4) != 32 ||
        PQgetlength(r, 0, 5) != 32 ||
        !tg_ledger_hash_matches((uint8_t)type, (uint64_t)chain_seq,
                                (const uint8_t *)PQgetvalue(r, 0, 4), meta, meta_len, payload,
                                payload_len, (const uint8_t *)PQgetvalue(r, 0, 5))) {
        PQclear(r);
        TG_LOG(TG_LOG_ERROR, "record_corrupt",
               "record %llu in tg_records does not match its record_hash (altered in the "
               "database?): run trigguard ledger verify --database-url",
               (unsigned long long)pos->seq);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (payload_out != NULL) {
        tg_buf_reset(payload_out);
        rc = tg_buf_append(payload_out, payload, payload_len);
    }
    if (rc == TG_OK && meta_out != NULL) {
        tg_buf_reset(meta_out);
        rc = tg_buf_append(meta_out, meta, meta_len);
    }
    PQclear(r);
    return rc;
}

/* ---- after the commit: nothing left to do ------------------------------------------------ */

static tg_err_t pg_complete_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                                size_t key_len, int status, const tg_ledger_pos_t *pos,
                                int64_t now_ms) {
    (void)db;
    (void)tenant_len;
    (void)key_len;
    (void)status;
    (void)now_ms;
    /* The commit made the key DONE already, in the record's own statement. */
    return tenant == NULL || key == NULL || pos == NULL ? TG_ERR_INVALID_ARG : TG_OK;
}

static tg_err_t pg_index_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                                 int64_t now_ms, tg_ledger_pos_t *existing) {
    (void)db;
    (void)tenant_len;
    (void)id_len;
    (void)stamp_ms;
    (void)now_ms;
    if (existing != NULL) {
        memset(existing, 0, sizeof *existing);
    }
    /* Indexed in the record's own statement. */
    return tenant == NULL || id == NULL || pos == NULL ? TG_ERR_INVALID_ARG : TG_OK;
}

static tg_err_t pg_restore_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len, const tg_idem_entry_t *entry, int64_t now_ms) {
    (void)db;
    (void)tenant;
    (void)tenant_len;
    (void)key;
    (void)key_len;
    (void)entry;
    (void)now_ms;
    return TG_ERR_INVALID_ARG; /* never replays: start does not call back */
}

static tg_err_t pg_restore_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len, int64_t used_at_ms,
                                 int64_t now_ms) {
    (void)db;
    (void)tenant;
    (void)tenant_len;
    (void)nonce;
    (void)nonce_len;
    (void)used_at_ms;
    (void)now_ms;
    return TG_ERR_INVALID_ARG;
}

/* ---- start, tick, health, stats, close --------------------------------------------------- */

static tg_err_t pg_start(tg_db_t *dbp, tg_db_replay_fn replay, void *ud,
                         tg_ledger_recovery_t *report, tg_diag_t *diag) {
    pg_db_t *db = pg_of(dbp);
    (void)replay;
    (void)ud;
    if (report != NULL) {
        memset(report, 0, sizeof *report);
    }
    if (db->writer_started) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: started twice");
    }
    char why[PG_WHY_MAX];
    /* The schema first, with libpq's own words: an unknown version refuses to start. */
    int version = 0;
    tg_err_t rc = tg_pg_schema_version(db->url, &version, diag);
    if (rc != TG_OK) {
        return rc;
    }
    if (version != TG_PG_SCHEMA_VERSION) {
        return tg_diag_set(diag,
                           version > TG_PG_SCHEMA_VERSION ? TG_ERR_SCHEMA_VERSION : TG_ERR_CONFIG,
                           "the database has schema version %d and this binary uses %d: %s",
                           version, TG_PG_SCHEMA_VERSION,
                           version > TG_PG_SCHEMA_VERSION
                               ? "upgrade trigguard (never run an older binary on a newer schema)"
                               : "run trigguard db migrate --database-url first");
    }
    if (!writer_connect(db, why, sizeof why)) {
        return tg_diag_set(diag, TG_ERR_IO, "cannot use the database: %s", why);
    }
    for (uint32_t i = 0; i < db->o.pool; i++) {
        PGconn *c = pg_open(db, ROLE_POOL, why, sizeof why);
        if (c == NULL) {
            return tg_diag_set(diag, TG_ERR_IO, "cannot open the connection pool: %s", why);
        }
        pool_add(db, c);
    }
    atomic_store(&db->healthy, true);
    if (pthread_create(&db->writer, NULL, writer_main, db) != 0) {
        return tg_diag_set(diag, TG_ERR_INTERNAL, "db: cannot start the writer thread");
    }
    db->writer_started = true;
    if (pthread_create(&db->upkeep, NULL, upkeep_main, db) != 0) {
        return tg_diag_set(diag, TG_ERR_INTERNAL, "db: cannot start the upkeep thread");
    }
    db->upkeep_started = true;
    TG_LOG(TG_LOG_INFO, "store_open",
           "PostgreSQL: schema version %d, instance %s (a new hash chain), %u pooled "
           "connections, claim lease %u ms",
           version, db->instance, db->o.pool, db->o.claim_timeout_ms);
    return TG_OK;
}

static void pg_tick(tg_db_t *db, int64_t now_ms, uint32_t stall_ms) {
    /* The writer bounds its own commits and the upkeep runs the retention job: nothing to
     * do on the caller's thread. */
    (void)db;
    (void)now_ms;
    (void)stall_ms;
}

static bool pg_health(tg_db_t *dbp, char *why, size_t why_len) {
    pg_db_t *db = pg_of(dbp);
    bool ok = atomic_load(&db->healthy);
    if (why != NULL && why_len > 0) {
        pthread_mutex_lock(&db->why_mu);
        (void)snprintf(why, why_len, "%s", ok ? "" : db->why);
        pthread_mutex_unlock(&db->why_mu);
    }
    return ok;
}

static void pg_stats(tg_db_t *dbp, tg_db_stats_t *out) {
    pg_db_t *db = pg_of(dbp);
    tg_ledger_stats_t *s = &out->records;
    s->records = atomic_load(&db->st_records);
    s->bytes = atomic_load(&db->st_bytes);
    s->batches = atomic_load(&db->st_batches);
    s->last_batch = atomic_load(&db->st_last_batch);
    s->max_batch = atomic_load(&db->st_max_batch);
    s->fsyncs = atomic_load(&db->st_commits);
    s->fsync_sum_us = atomic_load(&db->st_commit_us);
    s->failures = atomic_load(&db->st_failures);
    s->stalls = atomic_load(&db->st_stalls);
    s->rejected = atomic_load(&db->st_rejected);
    for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
        s->fsync_hist[i] = atomic_load(&db->st_commit_hist[i]);
    }
    for (size_t i = 0; i < TG_LEDGER_BATCH_BUCKETS; i++) {
        s->batch_hist[i] = atomic_load(&db->st_batch_hist[i]);
    }
    s->healthy = atomic_load(&db->healthy);
    s->durability = TG_DURABILITY_FSYNC;
    s->head_seq = atomic_load(&db->st_head_seq);
    pthread_mutex_lock(&db->q_mu);
    s->queued = db->q_len;
    pthread_mutex_unlock(&db->q_mu);
    pthread_mutex_lock(&db->fence_mu);
    out->keys.entries = db->n_fences;
    pthread_mutex_unlock(&db->fence_mu);
}

static void pg_close(tg_db_t *dbp) {
    pg_db_t *db = pg_of(dbp);
    pthread_mutex_lock(&db->q_mu);
    db->stopping = true;
    pthread_cond_broadcast(&db->q_cv);
    pthread_mutex_unlock(&db->q_mu);
    pthread_mutex_lock(&db->pool_mu);
    pthread_cond_broadcast(&db->pool_cv);
    pthread_mutex_unlock(&db->pool_mu);
    /* The writer commits (or fails) everything queued before it ends: every done runs. */
    if (db->writer_started) {
        pthread_join(db->writer, NULL);
    }
    if (db->upkeep_started) {
        pthread_join(db->upkeep, NULL);
    }
    writer_drop(db);
    PQfinish(db->uconn);
    for (size_t i = 0; i < db->n_idle; i++) {
        PQfinish(db->idle[i]);
    }
    free(db->idle);
    for (size_t b = 0; b < PG_FENCE_BUCKETS; b++) {
        for (fence_t *f = db->buckets[b], *next; f != NULL; f = next) {
            next = f->next;
            free(f);
        }
    }
    if (db->url != NULL) {
        sodium_memzero(db->url, strlen(db->url)); /* it may hold a password */
        free(db->url);
    }
    pthread_mutex_destroy(&db->pool_mu);
    pthread_cond_destroy(&db->pool_cv);
    pthread_mutex_destroy(&db->fence_mu);
    pthread_mutex_destroy(&db->q_mu);
    pthread_cond_destroy(&db->q_cv);
    pthread_mutex_destroy(&db->why_mu);
    free(db);
}

static const tg_db_ops_t pg_ops = {
    .start = pg_start,
    .close = pg_close,
    .claim_key = pg_claim_key,
    .claim_nonce = pg_claim_nonce,
    .release_key = pg_release_key,
    .release_nonce = pg_release_nonce,
    .receipt_room = pg_receipt_room,
    .announce = pg_announce,
    .announce_end = pg_announce_end,
    .append = pg_append,
    .append_now = pg_append_now,
    .complete_key = pg_complete_key,
    .index_receipt = pg_index_receipt,
    .find_receipt = pg_find_receipt,
    .read = pg_read,
    .restore_key = pg_restore_key,
    .restore_nonce = pg_restore_nonce,
    .tick = pg_tick,
    .health = pg_health,
    .stats = pg_stats,
};

/* "host/pid/16 hex": unique per process start, readable in tg_records and tg_chains. */
static void make_instance_id(char *out, size_t cap) {
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0) {
        (void)snprintf(host, sizeof host, "host");
    }
    host[sizeof host - 1] = '\0';
    uint8_t rnd[8];
    randombytes_buf(rnd, sizeof rnd);
    char hex[17];
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    (void)snprintf(out, cap, "%s/%ld/%s", host, (long)getpid(), hex);
}

tg_err_t tg_db_pg_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag) {
    const tg_db_pg_opts_t *o = &opts->pg;
    if (o->pool < 1 || o->pool > 256 || o->timeout_ms < 1 || o->claim_timeout_ms < 1 ||
        o->commit_timeout_ms < 1 || opts->keys.retention_ms < 1 || opts->keys.max_key_len < 1) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "db: a PostgreSQL option is out of range");
    }
    tg_err_t rc = tg_pg_check_url(o->url, diag);
    if (rc != TG_OK) {
        return rc;
    }
    pg_db_t *db = calloc(1, sizeof *db);
    if (db == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    db->base.ops = &pg_ops;
    db->base.unavailable = TG_ERR_STORE_UNAVAILABLE;
    db->o = *o;
    db->o.url = NULL;
    db->retention_ms = opts->keys.retention_ms;
    db->max_key_len = opts->keys.max_key_len;
    (void)snprintf(db->lease_ms, sizeof db->lease_ms, "%u", o->claim_timeout_ms);
    (void)snprintf(db->retention_txt, sizeof db->retention_txt, "%lld",
                   (long long)opts->keys.retention_ms);
    make_instance_id(db->instance, sizeof db->instance);
    randombytes_buf(db->fence_key, sizeof db->fence_key);
    db->url = strdup(o->url);
    db->idle = calloc(o->pool, sizeof *db->idle);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&db->pool_mu, NULL);
    pthread_cond_init(&db->pool_cv, &ca);
    pthread_mutex_init(&db->fence_mu, NULL);
    pthread_mutex_init(&db->q_mu, NULL);
    pthread_cond_init(&db->q_cv, &ca);
    pthread_mutex_init(&db->why_mu, NULL);
    pthread_condattr_destroy(&ca);
    atomic_init(&db->healthy, false);
    if (db->url == NULL || db->idle == NULL) {
        pg_close(&db->base);
        return tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    *out = &db->base;
    return TG_OK;
}
