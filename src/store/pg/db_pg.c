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
 * - With a log key (db.h "the transparency log"; the section of that name below): one
 *   integrator thread on a connection of its own, which holds the log's advisory lock when
 *   this instance integrates, and one thread that polls the log's waiters (pooled
 *   connections).
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
#include <errno.h>
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
#include "../tlog_engine.h"
#include "trigguard/approval.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/note.h"
#include "trigguard/pg_schema.h"
#include "trigguard/record.h"
#include "trigguard/tlog.h"

#define PG_BATCH_MAX 256     /* records per transaction */
#define PG_QUEUE_MAX 16384   /* records waiting for the writer; beyond: TG_ERR_OVERLOADED */
#define PG_FENCE_MAX 1000000 /* claims held by this instance at once */
#define PG_APPR_ROWS_MAX ((size_t)100000) /* rows one approval list or due statement returns */
#define PG_FENCE_BUCKETS 4096
#define PG_RETRY_MS 250        /* the writer's probe / reconnect period while unhealthy */
#define PG_SWEEP_MS 1000       /* the retention job's period */
#define PG_SWEEP_ROWS "1000"   /* rows one retention statement deletes at most */
#define PG_CONNECT_TIMEOUT "2" /* seconds (libpq's granularity); the URL may say otherwise */
#define PG_WHY_MAX 160
/* the transparency log (section "the transparency log" below) */
#define PG_LOG_BATCH "4096"      /* unassigned records one poll of the integrator takes */
#define PG_LOG_CACHE_MS 3        /* how long a checkpoint read from the rows is served again */
#define PG_LOG_WAITERS_MAX 65536 /* tg_db_log_wait callers at once; TG_ERR_LIMIT beyond */
/* a chain's start value: 32 zero bytes, as bytea text */
#define PG_ZERO_HASH_HEX "0000000000000000000000000000000000000000000000000000000000000000"

/* FENCE_APPROVAL: an approval's hold (db.h), whose token fences the next version. */
enum { FENCE_KEY = 'k', FENCE_NONCE = 'n', FENCE_APPROVAL = 'a' };

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
    /* the approval version it writes (a_id NULL when none): its document, and for a version
     * after the first the hold's token (0 when this instance holds none: the fence fails) */
    const char *a_id, *a_doc;
    size_t a_id_len, a_doc_len;
    int64_t a_ver, a_token;
    /* its transparency-log entry (schema v5: tg_records.log_entry); has_entry false = NULL,
     * for a receipt appended without one: the integrator then reads its receiptHash */
    bool has_entry;
    uint8_t entry[32];
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
    _Atomic bool stopping; /* read under q_mu and pool_mu both: atomic */
    bool probe_wanted;     /* a pooled statement lost its connection: check the database */
    PGconn *wconn;
    uint64_t chain_seq;
    uint8_t head[32];

    /* the claimer: idempotency claims in groups */
    pthread_t claimer;
    bool claimer_started;
    pthread_mutex_t c_mu; /* its own: the claims' handoffs never wait for the records' */
    struct claim_req *c_head, *c_tail;
    pthread_cond_t c_cv;

    /* the upkeep */
    pthread_t upkeep;
    bool upkeep_started;
    PGconn *uconn;

    /* the transparency log (off unless log_on) */
    bool log_on;
    tg_note_signer_t log_signer; /* the log key, a copy (wiped at close) */
    uint32_t log_min_ms, log_max_ms;
    /* the published checkpoint as read from tg_log_state, served for PG_LOG_CACHE_MS */
    pthread_mutex_t lc_mu;
    bool lc_have;
    int64_t lc_at_ns;
    size_t lc_len;
    char lc_note[TG_TLE_NOTE_MAX + 1];
    tg_checkpoint_t lc_cp;
    /* tg_db_log_wait's callers, polled by one thread */
    pthread_t lw_thread;
    bool lw_started;
    pthread_mutex_t lw_mu;
    pthread_cond_t lw_cv;
    struct log_waiter *lw_head;
    size_t lw_n;
    /* the integrator: its connection (holding the advisory lock) and engine */
    pthread_t li_thread;
    bool li_started;
    pthread_mutex_t li_mu; /* li_conn and li_note: the integrator's and the engine's threads */
    PGconn *li_conn;
    size_t li_note_len; /* the checkpoint the next commit replaces (0: none yet) */
    char li_note[TG_TLE_NOTE_MAX + 1];
    atomic_bool li_lost;    /* the lock or a commit was lost: take over again from the rows */
    pthread_mutex_t li_wmu; /* the integrator's sleeps, woken by publication and close */
    pthread_cond_t li_wcv;
    bool li_woken;
    atomic_bool st_log_integrator, st_log_inconsistent;
    _Atomic uint64_t st_log_size, st_log_checkpoints, st_log_failures, st_log_lag_ms;
    _Atomic uint64_t st_log_lag_sum_us;
    _Atomic uint64_t st_log_lag_hist[TG_LEDGER_FSYNC_BUCKETS];

    /* health */
    atomic_bool healthy;
    pthread_mutex_t why_mu;
    char why[PG_WHY_MAX];

    /* counters (tg_ledger_stats_t's meaning: a batch is one commit) */
    _Atomic uint64_t st_records, st_bytes, st_batches, st_last_batch, st_max_batch;
    _Atomic uint64_t st_commits, st_commit_us, st_failures, st_stalls, st_rejected;
    _Atomic uint64_t st_head_seq;
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

static bool res_ok(const PGresult *r) {
    ExecStatusType st = PQresultStatus(r);
    return r != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
}

/* Reads every result of the command in flight on c, until the deadline: *first gets the
 * first result, or the first failed one if any failed (the caller clears it). False: no
 * answer within the deadline, or the connection broke (why says which; *first NULL). */
static bool collect(PGconn *c, int64_t deadline_ns, PGresult **first, char *why, size_t why_len) {
    bool failed = false;
    PGresult *r;
    *first = NULL;
    while ((r = pg_next(c, deadline_ns, &failed)) != NULL) {
        if (*first == NULL || (!res_ok(r) && res_ok(*first))) {
            PQclear(*first);
            *first = r;
        } else {
            PQclear(r);
        }
    }
    if (failed) {
        first_line(why, why_len,
                   PQstatus(c) == CONNECTION_BAD ? PQerrorMessage(c)
                                                 : "no answer within the bound");
        PQclear(*first);
        *first = NULL;
    }
    return !failed;
}

/* Runs sql (one or more statements, no parameters) on a connection, bounded. *res_out (may
 * be NULL) gets the first result. False with why filled on failure. */
static bool pg_run(PGconn *c, const char *sql, int64_t deadline_ns, PGresult **res_out, char *why,
                   size_t why_len) {
    PGresult *res = NULL;
    if (res_out != NULL) {
        *res_out = NULL;
    }
    if (!PQsendQuery(c, sql)) {
        first_line(why, why_len, PQerrorMessage(c));
        return false;
    }
    if (!collect(c, deadline_ns, &res, why, why_len)) {
        return false;
    }
    bool ok = res_ok(res);
    if (!ok) {
        first_line(why, why_len, res != NULL ? PQresultErrorMessage(res) : "no result");
    }
    if (ok && res_out != NULL) {
        *res_out = res;
    } else {
        PQclear(res);
    }
    return ok;
}

/* ---- statements -------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *sql;
    int nparams;
} stmt_t;

/* When a claim may take an existing row of its key: a done row past its retention, or an
 * in-flight one past its lease, or this instance's own orphan (a claim whose answer was
 * lost: never a live one, which fence_hold answers locally). Shared by both claims. */
#define PG_CLAIM_TAKEOVER                                                                          \
    " ON CONFLICT (tenant, idem_key) DO UPDATE SET request_hash = excluded.request_hash,"          \
    "  state = 'in_flight', claim_id = excluded.claim_id, owner = excluded.owner,"                 \
    "  claimed_at = now(), lease_until = excluded.lease_until, record_seq = NULL,"                 \
    "  http_status = NULL, completed_at = NULL, expires_at = excluded.expires_at"                  \
    " WHERE (t.state = 'done' AND t.expires_at <= now()) OR (t.state = 'in_flight'"                \
    "  AND (t.lease_until <= now() OR t.owner = excluded.owner))"

/* Claims (pool). Intervals come as milliseconds. */
static const stmt_t st_claim_key = {
    "tg_claim_key",
    "WITH ins AS ("
    " INSERT INTO tg_idem_claims AS t (tenant, idem_key, request_hash, state, claim_id, owner,"
    "  lease_until, expires_at)"
    " VALUES ($1::text, $2::text, $3::bytea, 'in_flight', nextval('tg_claim_id_seq'), $4::text,"
    "  now() + $5::bigint * interval '1 millisecond',"
    "  now() + $6::bigint * interval '1 millisecond')" PG_CLAIM_TAKEOVER " RETURNING claim_id)"
    " SELECT 0::smallint, claim_id, NULL::bytea, NULL::bigint, NULL::smallint, NULL::bigint"
    " FROM ins"
    " UNION ALL"
    " SELECT CASE state WHEN 'done' THEN 2::smallint ELSE 1::smallint END, claim_id,"
    "  request_hash, record_seq, http_status,"
    "  (extract(epoch FROM completed_at) * 1000)::bigint"
    " FROM tg_idem_claims WHERE tenant = $1::text AND idem_key = $2::text"
    "  AND NOT EXISTS (SELECT 1 FROM ins)",
    6};

/* The same claim for a group of keys (the claimer): one statement, one transaction, for
 * every key claimed on this instance meanwhile. Rows are inserted in key order, so two
 * instances' groups wait for each other's keys in one order and never deadlock. One
 * instance never has one key twice in a group (fence_hold). A key with no row back (a row
 * that committed between the conflict check and the snapshot) is asked again alone. */
static const stmt_t st_claim_keys = {
    "tg_claim_keys",
    "WITH i AS (SELECT * FROM unnest($1::integer[], $2::text[], $3::text[], $4::bytea[])"
    "  AS i (ord, tenant, idem_key, request_hash)),"
    " ins AS ("
    " INSERT INTO tg_idem_claims AS t (tenant, idem_key, request_hash, state, claim_id, owner,"
    "  lease_until, expires_at)"
    " SELECT i.tenant, i.idem_key, i.request_hash, 'in_flight', nextval('tg_claim_id_seq'),"
    "  $5::text, now() + $6::bigint * interval '1 millisecond',"
    "  now() + $7::bigint * interval '1 millisecond' FROM i ORDER BY i.tenant, "
    "i.idem_key" PG_CLAIM_TAKEOVER " RETURNING t.tenant, t.idem_key, t.claim_id)"
    " SELECT i.ord, 0::smallint, ins.claim_id, NULL::bytea, NULL::bigint, NULL::smallint,"
    "  NULL::bigint FROM i JOIN ins ON ins.tenant = i.tenant AND ins.idem_key = i.idem_key"
    " UNION ALL"
    " SELECT i.ord, CASE c.state WHEN 'done' THEN 2::smallint ELSE 1::smallint END,"
    "  c.claim_id, c.request_hash, c.record_seq, c.http_status,"
    "  (extract(epoch FROM c.completed_at) * 1000)::bigint"
    " FROM i JOIN tg_idem_claims c ON c.tenant = i.tenant AND c.idem_key = i.idem_key"
    " WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.tenant = i.tenant"
    "  AND ins.idem_key = i.idem_key)",
    7};

static const stmt_t st_claim_nonce = {
    "tg_claim_nonce",
    "INSERT INTO tg_nonces AS t (tenant, nonce, used_at, expires_at, claim_id, lease_until,"
    "  owner)"
    " VALUES ($1::text, $2::text, now(), now() + $4::bigint * interval '1 millisecond',"
    "  nextval('tg_claim_id_seq'), now() + $3::bigint * interval '1 millisecond', $5::text)"
    " ON CONFLICT (tenant, nonce) DO UPDATE SET used_at = now(), expires_at = excluded.expires_at,"
    "  claim_id = excluded.claim_id, lease_until = excluded.lease_until, record_seq = NULL,"
    "  owner = excluded.owner"
    " WHERE (t.lease_until IS NULL AND t.expires_at <= now()) OR (t.lease_until IS NOT NULL"
    "  AND (t.lease_until <= now() OR t.owner = excluded.owner))"
    " RETURNING claim_id",
    5};

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

/* The writer's statement: a whole group in one statement, so one round trip and one
 * transaction (autocommit: the statement commits as it ends) whatever the group's size.
 * The records come as arrays, one element each. The chain head (h) is locked and compared
 * with the head the group was chained on, then the claims are locked (k, n; a claim taken
 * over meanwhile is seen, as the lock waits for the takeover and reads the row anew): only when
 * every claim is still ours and the head is unchanged are the records inserted, their keys made
 * DONE, their nonces consumed, their receipts indexed and the head moved, all or nothing. The
 * result is (chain_seq, seq) per record written, or, when nothing was, (chain_seq, NULL)
 * per record whose claim was taken over (none: the head had moved). */
static const stmt_t st_group = {
    "tg_group",
    "WITH i AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::smallint[], $5::bytea[],"
    "  $6::bytea[], $7::bytea[], $8::bytea[], $9::text[], $10::bigint[], $11::text[],"
    "  $12::bigint[], $13::text[], $14::smallint[], $15::text[], $16::bigint[], $17::bigint[],"
    "  $18::text[], $22::bytea[])"
    "  AS i (chain_seq, tenant, type, meta, payload, prev_hash, record_hash, idem_key,"
    "   key_claim, nonce, nonce_claim, exec_id, http_status, a_id, a_ver, a_token, a_doc,"
    "   log_entry)),"
    " k AS (SELECT c.tenant, c.idem_key FROM tg_idem_claims c JOIN i ON c.tenant = i.tenant"
    "  AND c.idem_key = i.idem_key AND c.claim_id = i.key_claim"
    "  WHERE c.state = 'in_flight' FOR NO KEY UPDATE OF c),"
    " n AS (SELECT t.tenant, t.nonce FROM tg_nonces t JOIN i ON t.tenant = i.tenant"
    "  AND t.nonce = i.nonce AND t.claim_id = i.nonce_claim"
    "  WHERE t.lease_until IS NOT NULL FOR NO KEY UPDATE OF t),"
    " ap AS (SELECT t.tenant, t.id FROM tg_approvals t JOIN i ON t.tenant = i.tenant"
    "  AND t.id = i.a_id AND t.version = i.a_ver - 1 AND t.hold_token = i.a_token"
    "  WHERE i.a_ver > 1 FOR NO KEY UPDATE OF t),"
    " h AS (SELECT head_seq FROM tg_chains WHERE instance_id = $1::text FOR NO KEY UPDATE),"
    " good AS (SELECT i.chain_seq FROM i"
    "  WHERE (i.idem_key IS NULL OR EXISTS (SELECT 1 FROM k"
    "   WHERE k.tenant = i.tenant AND k.idem_key = i.idem_key))"
    "  AND (i.nonce IS NULL OR EXISTS (SELECT 1 FROM n"
    "   WHERE n.tenant = i.tenant AND n.nonce = i.nonce))"
    "  AND (i.a_id IS NULL OR (i.a_ver = 1 AND NOT EXISTS (SELECT 1 FROM tg_approvals t"
    "   WHERE t.tenant = i.tenant AND t.id = i.a_id)) OR EXISTS (SELECT 1 FROM ap"
    "   WHERE ap.tenant = i.tenant AND ap.id = i.a_id))),"
    " go AS (SELECT coalesce((SELECT head_seq FROM h) = $19::bigint, false)"
    "  AND (SELECT count(*) FROM good) = (SELECT count(*) FROM i) AS v),"
    " r AS (INSERT INTO tg_records (instance_id, chain_seq, tenant, type, meta, payload,"
    "  prev_hash, record_hash, log_entry)"
    "  SELECT $1::text, i.chain_seq, i.tenant, i.type, i.meta, i.payload, i.prev_hash,"
    "  i.record_hash, i.log_entry FROM i, go WHERE go.v ORDER BY i.chain_seq"
    "  RETURNING seq, chain_seq),"
    " c AS (UPDATE tg_idem_claims t SET state = 'done', lease_until = NULL,"
    "  record_seq = r.seq, http_status = i.http_status, completed_at = now()"
    "  FROM r JOIN i USING (chain_seq) WHERE t.tenant = i.tenant AND t.idem_key = i.idem_key"
    "  AND t.claim_id = i.key_claim),"
    " u AS (UPDATE tg_nonces t SET lease_until = NULL, record_seq = r.seq"
    "  FROM r JOIN i USING (chain_seq) WHERE t.tenant = i.tenant AND t.nonce = i.nonce"
    "  AND t.claim_id = i.nonce_claim),"
    " x AS (INSERT INTO tg_receipts (tenant, execution_id, record_seq)"
    "  SELECT i.tenant, i.exec_id, r.seq FROM r JOIN i USING (chain_seq)"
    "  WHERE i.exec_id IS NOT NULL ON CONFLICT DO NOTHING),"
    " ai AS (INSERT INTO tg_approvals (tenant, id, version, status, created_at, expires_at,"
    "  resolved_at, consume_within_ms, doc)"
    "  SELECT i.tenant, i.a_id, i.a_ver, i.a_doc::jsonb->>'status',"
    "  (i.a_doc::jsonb->>'createdAt')::bigint, (i.a_doc::jsonb->>'expiresAt')::bigint,"
    "  coalesce((i.a_doc::jsonb->>'resolvedAt')::bigint, 0),"
    "  (i.a_doc::jsonb->>'consumeWithinMs')::bigint, i.a_doc"
    "  FROM r JOIN i USING (chain_seq) WHERE i.a_ver = 1 ON CONFLICT DO NOTHING),"
    " au AS (UPDATE tg_approvals t SET version = i.a_ver, status = i.a_doc::jsonb->>'status',"
    "  resolved_at = coalesce((i.a_doc::jsonb->>'resolvedAt')::bigint, 0), doc = i.a_doc,"
    "  hold_token = NULL, hold_until = NULL"
    "  FROM r JOIN i USING (chain_seq) WHERE i.a_ver > 1 AND t.tenant = i.tenant"
    "  AND t.id = i.a_id AND t.version = i.a_ver - 1 AND t.hold_token = i.a_token),"
    " hu AS (UPDATE tg_chains SET head_seq = $20::bigint, head_hash = $21::bytea,"
    "  updated_at = now() FROM go WHERE instance_id = $1::text AND go.v)"
    " SELECT r.chain_seq, r.seq FROM r"
    " UNION ALL"
    " SELECT i.chain_seq, NULL::bigint FROM i, go"
    "  WHERE NOT go.v AND i.chain_seq NOT IN (SELECT chain_seq FROM good)",
    22};

/* The writer's chain: created at the first connect, read back at every reconnect (a group
 * whose answer was lost may have moved it). */
static const stmt_t st_chain = {NULL,
                                "INSERT INTO tg_chains (instance_id, head_seq, head_hash)"
                                " VALUES ($1::text, 0, '\\x" PG_ZERO_HASH_HEX "')"
                                " ON CONFLICT (instance_id) DO UPDATE SET updated_at = now()"
                                " RETURNING head_seq, head_hash",
                                1};

/* Stateful limits (db.h): a read, the reservation (one conditional upsert: a row comes
 * back only when total + amount <= max held, under the row's lock, so instances never pass
 * a cap together), and its release. */
static const stmt_t st_limit_total = {
    "tg_limit_total",
    "SELECT total FROM tg_limit_totals WHERE limit_id = $1::text AND key = $2::bytea"
    " AND window_start = $3::bigint",
    3};

static const stmt_t st_limit_reserve = {
    "tg_limit_reserve",
    "INSERT INTO tg_limit_totals AS t (limit_id, key, window_start, window_end, total)"
    " SELECT $1::text, $2::bytea, $3::bigint, $4::bigint, $5::float8"
    "  WHERE $5::float8 <= $6::float8"
    " ON CONFLICT (limit_id, key, window_start) DO UPDATE SET total = t.total + excluded.total"
    "  WHERE t.total + excluded.total <= $6::float8"
    " RETURNING total",
    6};

static const stmt_t st_limit_release = {
    "tg_limit_release",
    "UPDATE tg_limit_totals SET total = greatest(total - $4::float8, 0)"
    " WHERE limit_id = $1::text AND key = $2::bytea AND window_start = $3::bigint",
    4};

/* Approvals (db.h; the functions below st_group's users, "approvals"). */
static const stmt_t st_appr_get = {
    "tg_appr_get", "SELECT doc FROM tg_approvals WHERE tenant = $1::text AND id = $2::text", 2};

/* One statement: the lease when the row is free (never held, or its lease passed), else a
 * row that says it is held; no row at all: no such approval. */
static const stmt_t st_appr_hold = {
    "tg_appr_hold",
    "WITH u AS (UPDATE tg_approvals SET hold_token = nextval('tg_claim_id_seq'),"
    "  hold_until = now() + $3::bigint * interval '1 millisecond'"
    "  WHERE tenant = $1::text AND id = $2::text"
    "  AND (hold_until IS NULL OR hold_until <= now()) RETURNING hold_token, doc)"
    " SELECT 0::smallint, hold_token, doc FROM u"
    " UNION ALL"
    " SELECT 1::smallint, NULL::bigint, NULL::text FROM tg_approvals"
    "  WHERE tenant = $1::text AND id = $2::text AND NOT EXISTS (SELECT 1 FROM u)",
    3};

static const stmt_t st_appr_release = {
    "tg_appr_release",
    "UPDATE tg_approvals SET hold_token = NULL, hold_until = NULL"
    " WHERE tenant = $1::text AND id = $2::text AND hold_token = $3::bigint",
    3};

/* The tenant's newest first. The status filter is a superset of tg_approval_status_at's
 * answer at $3 (it differs at the very millisecond of an expiry at most), which the caller
 * then applies exactly. */
static const stmt_t st_appr_list = {
    "tg_appr_list",
    "SELECT doc FROM tg_approvals WHERE tenant = $1::text AND ($4::text IS NULL"
    "  OR (status = $4::text AND status IN ('denied', 'consumed'))"
    "  OR ($4::text = 'pending' AND status = 'pending' AND expires_at >= $3::bigint)"
    "  OR ($4::text = 'approved' AND status = 'approved'"
    "   AND resolved_at + consume_within_ms >= $3::bigint)"
    "  OR ($4::text = 'expired' AND (status = 'expired'"
    "   OR (status = 'pending' AND expires_at <= $3::bigint)"
    "   OR (status = 'approved' AND resolved_at + consume_within_ms <= $3::bigint))))"
    " ORDER BY created_at DESC, id DESC LIMIT $2::bigint",
    4};

static const stmt_t st_appr_due = {
    "tg_appr_due",
    "SELECT tenant, id FROM tg_approvals"
    " WHERE ((status = 'pending' AND expires_at <= $1::bigint)"
    "  OR (status = 'approved' AND resolved_at + consume_within_ms <= $1::bigint))"
    " AND (hold_until IS NULL OR hold_until <= now()) LIMIT $2::bigint",
    2};

/* The transparency log's readers (every instance, from the rows the integrator writes;
 * "the transparency log" below). A stored hash or an assigned log_index exists only once
 * the transaction that also published the checkpoint covering it has committed, so a row
 * found is in the published tree. */
static const stmt_t st_log_state = {"tg_log_state", "SELECT size, note FROM tg_log_state WHERE id",
                                    0};

static const stmt_t st_log_hashes = {
    "tg_log_hashes",
    "SELECT idx, hash FROM tg_log_hashes WHERE level = $1::smallint AND idx >= $2::bigint"
    " AND idx < $3::bigint ORDER BY idx",
    3};

/* The payload only where the entry must be derived from it (rows older than schema v5). */
static const stmt_t st_log_entries = {
    "tg_log_entries",
    "SELECT log_index, log_entry, type, CASE WHEN log_entry IS NULL THEN payload END"
    " FROM tg_records WHERE log_index >= $1::bigint AND log_index < $2::bigint"
    " ORDER BY log_index",
    2};

static const stmt_t st_log_leaf = {"tg_log_leaf",
                                   "SELECT r.log_index, s.size FROM tg_records r"
                                   " LEFT JOIN tg_log_state s ON s.id WHERE r.seq = $1::bigint",
                                   1};

/* Stored hashes at scattered places, in the order asked (a proof's reads, db.h). */
static const stmt_t st_log_hashes_at = {
    "tg_log_hashes_at",
    "SELECT u.ord, h.hash FROM unnest($1::smallint[], $2::bigint[]) WITH ORDINALITY"
    "  AS u (level, idx, ord) JOIN tg_log_hashes h ON h.level = u.level AND h.idx = u.idx"
    " ORDER BY u.ord",
    2};

/* The waiters' poll: which of these records have a leaf now. */
static const stmt_t st_log_covered = {
    "tg_log_covered",
    "SELECT seq, log_index FROM tg_records WHERE seq = ANY ($1::bigint[])"
    " AND log_index IS NOT NULL ORDER BY seq",
    1};

static const stmt_t *const pool_stmts[] = {&st_claim_key,     &st_claim_keys,
                                           &st_claim_nonce,   &st_release_key,
                                           &st_release_nonce, &st_find_receipt,
                                           &st_read,          &st_appr_get,
                                           &st_appr_hold,     &st_appr_release,
                                           &st_appr_list,     &st_appr_due,
                                           &st_limit_total,   &st_limit_reserve,
                                           &st_limit_release, &st_log_state,
                                           &st_log_hashes,    &st_log_entries,
                                           &st_log_leaf,      &st_log_covered,
                                           &st_log_hashes_at, NULL};
static const stmt_t *const writer_stmts[] = {&st_group, NULL};

/* ---- connections ------------------------------------------------------------------------- */

/* ROLE_LOG: the integrator's connection (the log's advisory lock, its commits). */
typedef enum { ROLE_POOL, ROLE_WRITER, ROLE_UPKEEP, ROLE_LOG } role_t;

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
    uint32_t bound = role == ROLE_WRITER || role == ROLE_LOG ? db->o.commit_timeout_ms
                     : role == ROLE_POOL                     ? db->o.timeout_ms
                                                             : 10000;
    int64_t deadline = deadline_in(bound > 2000 ? bound : 2000);
    char setup[256];
    /* The server gives up on a statement its client has given up on, too. Every statement
     * here finds its rows by primary key; a generic plan guesses 100 rows for an unnest of
     * a parameter and, with a large table, would rather hash-join the whole of it (measured:
     * a group commit took 6 ms instead of 2), so joins and scans that are not index
     * lookups are ruled out for these sessions. */
    (void)snprintf(setup, sizeof setup,
                   "SET synchronous_commit = %s; SET statement_timeout = %u;"
                   " SET enable_hashjoin = off; SET enable_mergejoin = off;"
                   " SET enable_seqscan = off",
                   role == ROLE_WRITER || role == ROLE_LOG ? "on" : "off", bound);
    bool ok = pg_run(c, setup, deadline, NULL, why, why_len);
    if (ok && role == ROLE_WRITER) {
        PGresult *res = NULL;
        ok = pg_run(c,
                    "SELECT CASE WHEN to_regclass('trigguard_schema') IS NULL THEN 0"
                    " ELSE (SELECT coalesce(max(version), 0) FROM trigguard_schema) END",
                    deadline, &res, why, why_len);
        if (ok) {
            long v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
            if (v != TG_PG_SCHEMA_VERSION) {
                (void)snprintf(why, why_len,
                               "the database has schema version %ld, this binary needs %d (run "
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
        PGresult *r = NULL;
        ok = collect(c, deadline, &r, why, why_len);
        if (ok && !res_ok(r)) {
            first_line(why, why_len, PQresultErrorMessage(r));
            ok = false;
        }
        PQclear(r);
    }
    /* Non-blocking: a group's statement can be larger than the socket's buffer, and a
     * server that stopped reading must not hold a send forever; pg_wait flushes the rest
     * under the deadline. */
    if (ok && PQsetnonblocking(c, 1) != 0) {
        first_line(why, why_len, PQerrorMessage(c));
        ok = false;
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
    /* With the store known to be down, waiting for a connection the upkeep cannot open only
     * holds an event thread (and /healthz, /decide behind it) for the whole bound. */
    while (db->n_idle == 0 && !db->stopping && atomic_load(&db->healthy)) {
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

/* Closes every idle pooled connection; the upkeep opens new ones at once. */
static void pool_flush(pg_db_t *db) {
    pthread_mutex_lock(&db->pool_mu);
    size_t n = db->n_idle;
    PGconn *old[256];
    for (size_t i = 0; i < n; i++) {
        old[i] = db->idle[i];
    }
    db->n_idle = 0;
    db->n_open -= n;
    pthread_cond_broadcast(&db->pool_cv);
    pthread_mutex_unlock(&db->pool_mu);
    for (size_t i = 0; i < n; i++) {
        PQfinish(old[i]);
    }
}

/* One parameter list: values, lengths, formats (text NUL-terminated when len is
 * TG_PG_TEXT, else binary bytes; NULL ptr = SQL NULL). */
typedef struct {
    const char *v[24];
    int len[24];
    int fmt[24];
    int n;
} params_t;

static void par(params_t *p, const void *ptr, size_t len) {
    p->v[p->n] = ptr;
    p->len[p->n] = len == TG_PG_TEXT ? 0 : (int)len;
    p->fmt[p->n] = len == TG_PG_TEXT ? 0 : 1;
    p->n++;
}

/* How one statement on one connection ended. */
typedef enum {
    CALL_OK,     /* *res is TUPLES_OK or COMMAND_OK */
    CALL_DATA,   /* the server refused the data (SQLSTATE class 22); the connection is fine */
    CALL_FAILED, /* the statement failed; the connection is fine */
    CALL_BROKEN, /* no answer within the deadline, or the connection is no use any more */
} call_t;

/* Runs s (prepared when it has a name) with p on c, binary results, until the deadline.
 * *res gets the result for CALL_OK (the caller clears it); why the reason otherwise. */
static call_t conn_call(PGconn *c, const stmt_t *s, const params_t *p, int64_t deadline,
                        PGresult **res_out, char *why, size_t why_len) {
    *res_out = NULL;
    int sent = s->name != NULL ? PQsendQueryPrepared(c, s->name, p->n, p->v, p->len, p->fmt, 1)
                               : PQsendQueryParams(c, s->sql, p->n, NULL, p->v, p->len, p->fmt, 1);
    if (!sent) {
        first_line(why, why_len, PQerrorMessage(c));
        return CALL_BROKEN;
    }
    PGresult *res = NULL;
    if (!collect(c, deadline, &res, why, why_len)) {
        return CALL_BROKEN;
    }
    if (res_ok(res)) {
        *res_out = res;
        return CALL_OK;
    }
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char text[PG_WHY_MAX];
    first_line(text, sizeof text, res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c));
    (void)snprintf(why, why_len, "%.110s (SQLSTATE %s)", text, state != NULL ? state : "none");
    /* A read-only server (a demoted primary), a lost connection, a server shutting down:
     * this connection is no use any more; a fresh one follows a multi-host URL to the
     * new primary. */
    call_t out = PQstatus(c) == CONNECTION_BAD || state == NULL || strcmp(state, "25006") == 0 ||
                         strncmp(state, "08", 2) == 0 || strncmp(state, "57", 2) == 0
                     ? CALL_BROKEN
                 : strncmp(state, "22", 2) == 0 ? CALL_DATA
                                                : CALL_FAILED;
    PQclear(res);
    return out;
}

/* Runs a pooled statement within --db-timeout (waiting for a connection included). A lost
 * or hung connection is closed (the upkeep opens another) and makes the store unhealthy
 * until the writer has checked the database. TG_ERR_INVALID_ARG for data the server
 * refuses (a key that is not valid text in the database's encoding), else the unavailable
 * error. */
static tg_err_t pool_call(pg_db_t *db, const stmt_t *s, const params_t *p, PGresult **res_out) {
    int64_t deadline = deadline_in(db->o.timeout_ms);
    *res_out = NULL;
    PGconn *c = pool_take(db, deadline);
    if (c == NULL) {
        set_unhealthy(db, "no database connection within --db-timeout",
                      "every pooled connection is busy or broken");
        want_probe(db);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    char why[PG_WHY_MAX];
    call_t r = conn_call(c, s, p, deadline, res_out, why, sizeof why);
    pool_put(db, c, r == CALL_BROKEN);
    switch (r) {
    case CALL_OK:
        return TG_OK;
    case CALL_DATA:
        return TG_ERR_INVALID_ARG;
    case CALL_FAILED:
        TG_LOG(TG_LOG_WARN, "store_statement_failed", "%s failed: %s", s->name, why);
        return TG_ERR_STORE_UNAVAILABLE;
    case CALL_BROKEN:
        break;
    }
    set_unhealthy(db, "a database statement failed", why);
    want_probe(db);
    return TG_ERR_STORE_UNAVAILABLE;
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

/* ---- array parameters ------------------------------------------------------------------ */

/* A one-dimensional array parameter in PostgreSQL's binary format (array_recv): a header
 * (dimensions, a has-NULL flag, the element type), the dimension, then each element as its
 * length (-1 for NULL) and bytes, all big-endian. */
typedef struct {
    tg_buf_t b;
    uint32_t count;
    bool nulls;
    tg_err_t rc;
} arr_t;

enum { OID_BYTEA = 17, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_TEXT = 25 };

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void arr_begin(arr_t *a, uint32_t oid) {
    uint8_t h[20];
    a->count = 0;
    a->nulls = false;
    tg_buf_reset(&a->b);
    be32(h, 1);     /* dimensions */
    be32(h + 4, 0); /* has NULLs: set at the end */
    be32(h + 8, oid);
    be32(h + 12, 0); /* the dimension's size: set at the end */
    be32(h + 16, 1); /* lower bound */
    a->rc = tg_buf_append(&a->b, h, sizeof h);
}

static void arr_put(arr_t *a, const void *v, size_t n) {
    uint8_t len[4];
    if (a->rc != TG_OK) {
        return;
    }
    a->count++;
    if (v == NULL) {
        a->nulls = true;
        be32(len, UINT32_MAX); /* -1 */
        a->rc = tg_buf_append(&a->b, len, sizeof len);
        return;
    }
    be32(len, (uint32_t)n);
    a->rc = tg_buf_append(&a->b, len, sizeof len);
    if (a->rc == TG_OK && n > 0) {
        a->rc = tg_buf_append(&a->b, v, n);
    }
}

static void arr_int(arr_t *a, int64_t v, size_t width, bool null) {
    uint8_t b[8];
    for (size_t i = 0; i < width; i++) {
        b[i] = (uint8_t)((uint64_t)v >> (8 * (width - 1 - i)));
    }
    arr_put(a, null ? NULL : b, width);
}

static void arr_end(arr_t *a) {
    if (a->rc == TG_OK) {
        be32((uint8_t *)a->b.data + 4, a->nulls ? 1 : 0);
        be32((uint8_t *)a->b.data + 12, a->count);
    }
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

/* Looks up this instance's granted claim; copies it into *out when held. */
static bool fence_get(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n, size_t nl,
                      fence_t *out) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    pthread_mutex_lock(&db->fence_mu);
    fence_t *f = *fence_find(db, b, kind, t, tl, n, nl);
    bool granted = f != NULL && f->claim_id != 0;
    if (granted && out != NULL) {
        out->claim_id = f->claim_id;
        memcpy(out->request_hash, f->request_hash, sizeof out->request_hash);
    }
    pthread_mutex_unlock(&db->fence_mu);
    return granted;
}

/* Holds (kind, tenant, name) for a claim about to be asked of the database (claim_id 0
 * until it is granted: fence_grant). TG_ERR_EXISTS when this instance holds it already
 * (*held gets the holder's request hash), TG_ERR_LIMIT, TG_ERR_NOMEM. Holding it first is
 * what lets one instance never race itself: a second claim of a name in flight here is
 * answered from here, so a row this instance owns without a fence is an orphan (a claim
 * whose answer was lost) that it may take over at once. */
static tg_err_t fence_hold(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                           size_t nl, const uint8_t *request_hash, uint8_t held[32]) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    fence_t *f = malloc(sizeof *f + tl + nl);
    if (f == NULL) {
        return TG_ERR_NOMEM;
    }
    f->kind = kind;
    f->claim_id = 0;
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
        memcpy(held, (*pp)->request_hash, 32);
        rc = TG_ERR_EXISTS;
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

/* The database granted the held claim: its token. */
static void fence_grant(pg_db_t *db, uint8_t kind, const char *t, size_t tl, const char *n,
                        size_t nl, int64_t claim_id) {
    size_t b = fence_bucket(db, kind, t, tl, n, nl);
    pthread_mutex_lock(&db->fence_mu);
    fence_t *f = *fence_find(db, b, kind, t, tl, n, nl);
    if (f != NULL) {
        f->claim_id = claim_id;
    }
    pthread_mutex_unlock(&db->fence_mu);
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

/* One idempotency claim waiting for the claimer, on its caller's stack. */
typedef struct claim_req {
    struct claim_req *next;
    const char *tenant, *key;
    size_t tenant_len, key_len;
    const uint8_t *hash;
    int64_t deadline;
    pthread_cond_t cv;
    /* the answer, valid once done (under c_mu) */
    bool done;
    bool alone;  /* no row came back for it: ask again with the single statement */
    tg_err_t rc; /* TG_OK: the fields below hold the row */
    int state;   /* 0 claimed, 1 in flight, 2 done */
    int64_t claim_id, record_seq, stored_at;
    bool same; /* the row's request hash is this request's */
    int status;
} claim_req_t;

static uint32_t get_u32(const PGresult *r, int row, int col) {
    const uint8_t *b = (const uint8_t *)PQgetvalue(r, row, col);
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 4) {
        return UINT32_MAX;
    }
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

/* Answers a group of claims with one statement on a pooled connection; a claim that gets
 * no row is marked to be asked alone. */
static void claim_group(pg_db_t *db, claim_req_t **v, size_t n, arr_t *arr) {
    int64_t deadline = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        v[i]->rc = TG_ERR_STORE_UNAVAILABLE;
        deadline = v[i]->deadline < deadline ? v[i]->deadline : deadline;
    }
    if (deadline <= tg_clock_mono_ns()) {
        return; /* waited past its bound in the queue (the database is slow): 503 */
    }
    static const uint32_t oids[4] = {OID_INT4, OID_TEXT, OID_TEXT, OID_BYTEA};
    for (size_t j = 0; j < 4; j++) {
        arr_begin(&arr[j], oids[j]);
    }
    for (size_t i = 0; i < n; i++) {
        arr_int(&arr[0], (int64_t)i, 4, false);
        arr_put(&arr[1], v[i]->tenant, v[i]->tenant_len);
        arr_put(&arr[2], v[i]->key, v[i]->key_len);
        arr_put(&arr[3], v[i]->hash, 32);
    }
    params_t p = {.n = 0};
    for (size_t j = 0; j < 4; j++) {
        arr_end(&arr[j]);
        if (arr[j].rc != TG_OK) {
            return;
        }
        par(&p, arr[j].b.data, arr[j].b.len);
    }
    par(&p, db->instance, strlen(db->instance));
    par(&p, db->lease_ms, TG_PG_TEXT);
    par(&p, db->retention_txt, TG_PG_TEXT);
    PGconn *c = pool_take(db, deadline);
    if (c == NULL) {
        set_unhealthy(db, "no database connection within --db-timeout",
                      "every pooled connection is busy or broken");
        want_probe(db);
        return;
    }
    char why[PG_WHY_MAX];
    PGresult *res = NULL;
    call_t r = conn_call(c, &st_claim_keys, &p, deadline, &res, why, sizeof why);
    pool_put(db, c, r == CALL_BROKEN);
    if (r == CALL_BROKEN) {
        set_unhealthy(db, "a database statement failed", why);
        want_probe(db);
        return;
    }
    if (r == CALL_FAILED) {
        /* e.g. a deadlock with another instance's group: each alone is never part of one */
        TG_LOG(TG_LOG_WARN, "store_statement_failed", "%s failed: %s", st_claim_keys.name, why);
    }
    for (size_t i = 0; i < n; i++) {
        v[i]->alone = true; /* until its row is found; data errors find their key this way */
    }
    for (int k = 0; r == CALL_OK && k < PQntuples(res); k++) {
        uint32_t o = get_u32(res, k, 0);
        if (o >= n) {
            continue;
        }
        claim_req_t *q = v[o];
        q->alone = false;
        q->rc = TG_OK;
        q->state = get_i16(res, k, 1);
        q->claim_id = get_i64(res, k, 2);
        q->same = q->state == 0 || (PQgetlength(res, k, 3) == 32 &&
                                    sodium_memcmp(PQgetvalue(res, k, 3), q->hash, 32) == 0);
        q->record_seq = get_i64(res, k, 4);
        q->status = get_i16(res, k, 5);
        q->stored_at = get_i64(res, k, 6);
    }
    PQclear(res);
}

static void *claimer_main(void *arg) {
    pg_db_t *db = arg;
    claim_req_t *v[PG_BATCH_MAX];
    arr_t arr[4];
    for (size_t j = 0; j < 4; j++) {
        tg_buf_init(&arr[j].b, 0);
    }
    for (;;) {
        pthread_mutex_lock(&db->c_mu);
        while (db->c_head == NULL && !db->stopping) {
            pthread_cond_wait(&db->c_cv, &db->c_mu);
        }
        size_t n = 0;
        while (db->c_head != NULL && n < PG_BATCH_MAX) {
            v[n++] = db->c_head;
            db->c_head = db->c_head->next;
        }
        if (db->c_head == NULL) {
            db->c_tail = NULL;
        }
        pthread_mutex_unlock(&db->c_mu);
        if (n == 0) {
            break; /* stopping, nothing queued */
        }
        claim_group(db, v, n, arr);
        pthread_mutex_lock(&db->c_mu);
        for (size_t i = 0; i < n; i++) {
            v[i]->done = true;
            pthread_cond_signal(&v[i]->cv);
        }
        pthread_mutex_unlock(&db->c_mu);
    }
    for (size_t j = 0; j < 4; j++) {
        tg_buf_free(&arr[j].b);
    }
    return NULL;
}

/* Hands q to the claimer and waits for its answer (given within q's deadline, or 503). */
static void claim_via_group(pg_db_t *db, claim_req_t *q) {
    pthread_cond_init(&q->cv, NULL);
    pthread_mutex_lock(&db->c_mu);
    if (db->stopping || !db->claimer_started) {
        q->done = true;
        q->alone = true;
    } else {
        q->next = NULL;
        if (db->c_tail != NULL) {
            db->c_tail->next = q;
        } else {
            db->c_head = q;
        }
        db->c_tail = q;
        pthread_cond_signal(&db->c_cv);
    }
    while (!q->done) {
        pthread_cond_wait(&q->cv, &db->c_mu);
    }
    pthread_mutex_unlock(&db->c_mu);
    pthread_cond_destroy(&q->cv);
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
    uint8_t held[32];
    tg_err_t rc = fence_hold(db, FENCE_KEY, tenant, tenant_len, key, key_len, request_hash, held);
    if (rc == TG_ERR_EXISTS) {
        /* in flight here: answered without the database */
        return sodium_memcmp(held, request_hash, 32) == 0 ? TG_ERR_IN_FLIGHT : TG_ERR_CONFLICT;
    }
    if (rc != TG_OK) {
        return rc;
    }
    /* Asked in a group with every key claimed here meanwhile (the claimer); alone when the
     * group had no row for it. */
    claim_req_t q = {.tenant = tenant,
                     .tenant_len = tenant_len,
                     .key = key,
                     .key_len = key_len,
                     .hash = request_hash,
                     .deadline = deadline_in(db->o.timeout_ms)};
    claim_via_group(db, &q);
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, key, key_len);
    par(&p, request_hash, 32);
    par(&p, db->instance, strlen(db->instance));
    par(&p, db->lease_ms, TG_PG_TEXT);
    par(&p, db->retention_txt, TG_PG_TEXT);
    /* A row that commits between the insert's conflict check and the select's snapshot is
     * seen by neither: ask again (each statement takes a new snapshot). */
    for (int attempt = 0; q.alone && attempt < 3; attempt++) {
        PGresult *r = NULL;
        q.rc = pool_call(db, &st_claim_key, &p, &r);
        if (q.rc != TG_OK) {
            q.alone = false;
            break;
        }
        if (PQntuples(r) == 1) {
            q.alone = false;
            q.state = get_i16(r, 0, 0);
            q.claim_id = get_i64(r, 0, 1);
            q.same = q.state == 0 || (PQgetlength(r, 0, 2) == 32 &&
                                      sodium_memcmp(PQgetvalue(r, 0, 2), request_hash, 32) == 0);
            q.record_seq = get_i64(r, 0, 3);
            q.status = get_i16(r, 0, 4);
            q.stored_at = get_i64(r, 0, 5);
        }
        PQclear(r);
    }
    if (q.alone) {
        q.rc = TG_ERR_STORE_UNAVAILABLE;
    }
    if (q.rc == TG_OK && q.state == 0) {
        fence_grant(db, FENCE_KEY, tenant, tenant_len, key, key_len, q.claim_id);
        res->state = TG_IDEM_NEW;
        return TG_OK;
    }
    rc = q.rc != TG_OK ? q.rc : !q.same ? TG_ERR_CONFLICT : q.state == 1 ? TG_ERR_IN_FLIGHT : TG_OK;
    if (rc == TG_OK) {
        res->state = TG_IDEM_REPLAY;
        memcpy(res->entry.request_hash, request_hash, 32);
        res->entry.status = q.status;
        res->entry.pos.seq = (uint64_t)q.record_seq;
        res->entry.stored_at_ms = q.stored_at;
    }
    int64_t unused = 0;
    (void)fence_take(db, FENCE_KEY, tenant, tenant_len, key, key_len, &unused);
    return rc;
}

static tg_err_t pg_claim_nonce(tg_db_t *dbp, const char *tenant, size_t tenant_len,
                               const char *nonce, size_t nonce_len, int64_t now_ms) {
    pg_db_t *db = pg_of(dbp);
    (void)now_ms;
    if (!name_ok(tenant, tenant_len, TG_STORE_TENANT_MAX) ||
        !name_ok(nonce, nonce_len, db->max_key_len)) {
        return TG_ERR_INVALID_ARG;
    }
    uint8_t held[32];
    tg_err_t rc = fence_hold(db, FENCE_NONCE, tenant, tenant_len, nonce, nonce_len, NULL, held);
    if (rc == TG_ERR_EXISTS) {
        return TG_ERR_REPLAY; /* in use by a request in flight here */
    }
    if (rc != TG_OK) {
        return rc;
    }
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, nonce, nonce_len);
    par(&p, db->lease_ms, TG_PG_TEXT);
    par(&p, db->retention_txt, TG_PG_TEXT);
    par(&p, db->instance, strlen(db->instance));
    PGresult *r = NULL;
    rc = pool_call(db, &st_claim_nonce, &p, &r);
    if (rc == TG_OK && PQntuples(r) == 1) {
        fence_grant(db, FENCE_NONCE, tenant, tenant_len, nonce, nonce_len, get_i64(r, 0, 0));
        PQclear(r);
        return TG_OK;
    }
    PQclear(r);
    int64_t unused = 0;
    (void)fence_take(db, FENCE_NONCE, tenant, tenant_len, nonce, nonce_len, &unused);
    /* no row: used, or held by a request in flight elsewhere: either way not again */
    return rc == TG_OK ? TG_ERR_REPLAY : rc;
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
    if ((rec->type != TG_LEDGER_TYPE_RECEIPT && rec->type != TG_LEDGER_TYPE_SILENCE &&
         rec->type != TG_LEDGER_TYPE_REDEMPTION && rec->type != TG_LEDGER_TYPE_APPROVAL) ||
        (rec->type == TG_LEDGER_TYPE_APPROVAL && rec->approval == NULL) || done == NULL ||
        (rec->meta == NULL && rec->meta_len) || (rec->payload == NULL && rec->payload_len) ||
        rec->tenant == NULL || !name_ok(rec->tenant, rec->tenant_len, TG_STORE_TENANT_MAX)) {
        return TG_ERR_INVALID_ARG;
    }
    if (rec->meta_len > TG_LEDGER_META_MAX || rec->payload_len > TG_LEDGER_PAYLOAD_MAX) {
        return TG_ERR_LIMIT;
    }
    /* The approval version it writes: its document, and past version 1 the hold's token
     * (none held here: 0, which no row has, so the writer's fence refuses the record). */
    const tg_approval_t *ap = rec->approval;
    tg_buf_t adoc;
    tg_buf_init(&adoc, TG_APPROVAL_DOC_MAX);
    size_t a_id_len = 0;
    fence_t af = {.claim_id = 0};
    if (ap != NULL) {
        a_id_len = strnlen(ap->id, sizeof ap->id);
        if (ap->version == 0 || strnlen(ap->tenant, sizeof ap->tenant) != rec->tenant_len ||
            memcmp(ap->tenant, rec->tenant, rec->tenant_len) != 0 ||
            !tg_approval_id_valid(ap->id, a_id_len)) {
            return TG_ERR_INVALID_ARG; /* an approval is its record's tenant's */
        }
        tg_err_t wrc = tg_approval_write(&adoc, ap);
        if (wrc != TG_OK) {
            tg_buf_free(&adoc);
            return wrc == TG_ERR_NOMEM ? wrc : TG_ERR_INVALID_ARG;
        }
        if (ap->version > 1 &&
            !fence_get(db, FENCE_APPROVAL, rec->tenant, rec->tenant_len, ap->id, a_id_len, &af)) {
            af.claim_id = 0;
        }
    }
    if (!atomic_load(&db->healthy)) {
        tg_buf_free(&adoc);
        atomic_fetch_add(&db->st_rejected, 1);
        return TG_ERR_STORE_UNAVAILABLE;
    }
    fence_t kf, nf;
    if ((rec->key != NULL &&
         !fence_get(db, FENCE_KEY, rec->tenant, rec->tenant_len, rec->key, rec->key_len, &kf)) ||
        (rec->nonce != NULL && !fence_get(db, FENCE_NONCE, rec->tenant, rec->tenant_len, rec->nonce,
                                          rec->nonce_len, &nf))) {
        tg_buf_free(&adoc);
        return TG_ERR_INVALID_ARG; /* a record must hold the claims it completes */
    }
    bool receipt = rec->type == TG_LEDGER_TYPE_RECEIPT && rec->exec_id != NULL;
    size_t extra = rec->tenant_len + (rec->key ? rec->key_len : 0) +
                   (rec->nonce ? rec->nonce_len : 0) + (receipt ? rec->exec_id_len : 0) +
                   rec->meta_len + rec->payload_len + a_id_len + adoc.len;
    pending_t *pr = calloc(1, sizeof *pr + extra);
    if (pr == NULL) {
        tg_buf_free(&adoc);
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
    if (ap != NULL) {
        PG_COPY(pr->a_id, ap->id, a_id_len);
        pr->a_id_len = a_id_len;
        PG_COPY(pr->a_doc, adoc.data, adoc.len);
        pr->a_doc_len = adoc.len;
        pr->a_ver = ap->version;
        pr->a_token = af.claim_id;
    }
    tg_buf_free(&adoc);
#undef PG_COPY
    pr->type = rec->type;
    pr->status = rec->status;
    /* The record's log entry (db.h): given, or the payload's SHA-256 for a type whose entry
     * that is. A receipt without one is stored with NULL, so the integrator derives it from
     * the receiptHash it carries rather than from a rule that would be wrong for it. */
    if (rec->entry != NULL) {
        memcpy(pr->entry, rec->entry, sizeof pr->entry);
        pr->has_entry = true;
    } else if (rec->type != TG_LEDGER_TYPE_RECEIPT) {
        pr->has_entry =
            tg_record_log_entry(pr->entry, rec->type, pr->payload, pr->payload_len, NULL) == TG_OK;
    }
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

/* ---- the writer ------------------------------------------------------------------------- */

enum {
    A_CHAIN,
    A_TENANT,
    A_TYPE,
    A_META,
    A_PAYLOAD,
    A_PREV,
    A_HASH,
    A_KEY,
    A_KEY_CLAIM,
    A_NONCE,
    A_NONCE_CLAIM,
    A_EXEC,
    A_STATUS,
    A_AID,
    A_AVER,
    A_ATOKEN,
    A_ADOC,
    A_ENTRY, /* sent last ($22): the statement's other parameters keep their numbers */
    A__COUNT
};

static const uint32_t arr_oid[A__COUNT] = {
    OID_INT8, OID_TEXT, OID_INT2, OID_BYTEA, OID_BYTEA, OID_BYTEA, OID_BYTEA, OID_TEXT, OID_INT8,
    OID_TEXT, OID_INT8, OID_TEXT, OID_INT2,  OID_TEXT,  OID_INT8,  OID_INT8,  OID_TEXT, OID_BYTEA};

typedef enum { TRY_COMMITTED, TRY_FENCED, TRY_MOVED, TRY_FAILED } try_t;

static void writer_drop(pg_db_t *db) {
    PQfinish(db->wconn);
    db->wconn = NULL;
}

/* One attempt at committing v[0..n) as one statement. TRY_FENCED: nothing was written,
 * and the records whose claim another instance took over have fenced_out set. TRY_MOVED:
 * nothing was written because the chain head is not where this writer thought. */
static try_t try_commit(pg_db_t *db, pending_t **v, size_t n, arr_t *arr, char *why,
                        size_t why_len) {
    uint64_t seq = db->chain_seq;
    uint8_t prev[32];
    memcpy(prev, db->head, sizeof prev);
    for (size_t j = 0; j < A__COUNT; j++) {
        arr_begin(&arr[j], arr_oid[j]);
    }
    for (size_t i = 0; i < n; i++) {
        pending_t *pr = v[i];
        pr->chain_seq = ++seq;
        pr->fenced_out = false;
        memcpy(pr->prev, prev, sizeof prev);
        if (tg_ledger_record_hash(pr->hash, pr->type, pr->chain_seq, pr->prev, pr->meta,
                                  pr->meta_len, pr->payload, pr->payload_len) != TG_OK) {
            (void)snprintf(why, why_len, "a record over the ledger's caps");
            return TRY_FAILED;
        }
        memcpy(prev, pr->hash, sizeof prev);
        arr_int(&arr[A_CHAIN], (int64_t)pr->chain_seq, 8, false);
        arr_put(&arr[A_TENANT], pr->tenant, pr->tenant_len);
        arr_int(&arr[A_TYPE], pr->type, 2, false);
        arr_put(&arr[A_META], pr->meta_len ? pr->meta : (const uint8_t *)"", pr->meta_len);
        arr_put(&arr[A_PAYLOAD], pr->payload_len ? pr->payload : (const uint8_t *)"",
                pr->payload_len);
        arr_put(&arr[A_PREV], pr->prev, 32);
        arr_put(&arr[A_HASH], pr->hash, 32);
        arr_put(&arr[A_KEY], pr->key, pr->key_len);
        arr_int(&arr[A_KEY_CLAIM], pr->key_claim, 8, pr->key == NULL);
        arr_put(&arr[A_NONCE], pr->nonce, pr->nonce_len);
        arr_int(&arr[A_NONCE_CLAIM], pr->nonce_claim, 8, pr->nonce == NULL);
        arr_put(&arr[A_EXEC], pr->exec_id, pr->exec_id_len);
        arr_int(&arr[A_STATUS], pr->status, 2, false);
        arr_put(&arr[A_AID], pr->a_id, pr->a_id_len);
        arr_int(&arr[A_AVER], pr->a_ver, 8, pr->a_id == NULL);
        arr_int(&arr[A_ATOKEN], pr->a_token, 8, pr->a_id == NULL);
        arr_put(&arr[A_ADOC], pr->a_doc, pr->a_doc_len);
        arr_put(&arr[A_ENTRY], pr->has_entry ? pr->entry : NULL, 32);
    }
    params_t p = {.n = 0};
    par(&p, db->instance, strlen(db->instance));
    for (size_t j = 0; j < A__COUNT; j++) {
        arr_end(&arr[j]);
        if (arr[j].rc != TG_OK) {
            (void)snprintf(why, why_len, "out of memory building a group");
            return TRY_FAILED;
        }
        if (j != A_ENTRY) {
            par(&p, arr[j].b.data, arr[j].b.len);
        }
    }
    char base[24], head_seq[24];
    (void)snprintf(base, sizeof base, "%llu", (unsigned long long)db->chain_seq);
    (void)snprintf(head_seq, sizeof head_seq, "%llu", (unsigned long long)seq);
    par(&p, base, TG_PG_TEXT);
    par(&p, head_seq, TG_PG_TEXT);
    par(&p, prev, 32);
    par(&p, arr[A_ENTRY].b.data, arr[A_ENTRY].b.len);
    PGresult *res = NULL;
    call_t r = conn_call(db->wconn, &st_group, &p, deadline_in(db->o.commit_timeout_ms), &res, why,
                         why_len);
    if (r != CALL_OK) {
        if (r == CALL_BROKEN) {
            writer_drop(db);
        }
        return TRY_FAILED;
    }
    int rows = PQntuples(res);
    bool written = rows > 0 && !PQgetisnull(res, 0, 1);
    for (int k = 0; k < rows; k++) {
        int64_t cs = get_i64(res, k, 0);
        if (cs <= (int64_t)db->chain_seq || cs > (int64_t)seq) {
            continue;
        }
        pending_t *pr = v[cs - (int64_t)db->chain_seq - 1];
        if (written) {
            pr->seq = get_i64(res, k, 1);
        } else {
            pr->fenced_out = true;
        }
    }
    PQclear(res);
    if (!written) {
        return rows > 0 ? TRY_FENCED : TRY_MOVED;
    }
    if ((size_t)rows != n) {
        (void)snprintf(why, why_len, "the group statement wrote %d of %zu records", rows, n);
        return TRY_FAILED; /* committed in part: cannot happen (one statement) */
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

static bool writer_read_head(pg_db_t *db, char *why, size_t why_len);

static void commit_group(pg_db_t *db, pending_t **v, size_t n, arr_t *arr) {
    char why[PG_WHY_MAX] = "";
    size_t live = n;
    int64_t t0 = tg_clock_mono_ns();
    try_t t = TRY_FAILED;
    for (int attempt = 0; live > 0 && db->wconn != NULL && attempt < 4; attempt++) {
        t = try_commit(db, v, live, arr, why, sizeof why);
        if (t == TRY_MOVED) {
            /* someone moved this writer's head (a group whose answer was lost did commit):
             * read it back and chain again */
            if (!writer_read_head(db, why, sizeof why)) {
                t = TRY_FAILED;
                break;
            }
            continue;
        }
        if (t != TRY_FENCED) {
            break;
        }
        /* Those whose claim another instance took over are not written; the rest go again,
         * chained anew, so the chain has no hole. */
        size_t k = 0;
        for (size_t i = 0; i < live; i++) {
            if (v[i]->fenced_out) {
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
        if (live > atomic_load(&db->st_max_batch)) {
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
    /* Not committed, or not known to be (a statement whose answer was lost may have
     * committed): 503 for all of them. Their releases delete only claims still in flight,
     * so a record that did commit keeps its key and nonce; the chain head is read back
     * from the database at the reconnect. */
    if ((tg_clock_mono_ns() - t0) / 1000000 >= db->o.commit_timeout_ms) {
        atomic_fetch_add(&db->st_stalls, 1);
    }
    set_unhealthy(db, "a commit failed", why[0] ? why : "the connection is gone");
    writer_drop(db);
    for (size_t i = 0; i < live; i++) {
        finish(db, v[i], TG_ERR_STORE_UNAVAILABLE);
    }
}

/* Reads (creating it the first time) where this writer's chain stands. */
static bool writer_read_head(pg_db_t *db, char *why, size_t why_len) {
    params_t p = {.n = 0};
    par(&p, db->instance, strlen(db->instance));
    PGresult *r = NULL;
    call_t c =
        conn_call(db->wconn, &st_chain, &p, deadline_in(db->o.commit_timeout_ms), &r, why, why_len);
    bool ok = c == CALL_OK && PQntuples(r) == 1 && PQgetlength(r, 0, 1) == 32;
    if (ok) {
        db->chain_seq = (uint64_t)get_i64(r, 0, 0);
        memcpy(db->head, PQgetvalue(r, 0, 1), 32);
        atomic_store(&db->st_head_seq, db->chain_seq);
    } else if (c == CALL_OK) {
        (void)snprintf(why, why_len, "tg_chains did not return this writer's head");
    }
    PQclear(r);
    return ok;
}

/* (Re)connects the writer and reads where its chain stands. */
static bool writer_connect(pg_db_t *db, char *why, size_t why_len) {
    db->wconn = pg_open(db, ROLE_WRITER, why, why_len);
    if (db->wconn == NULL) {
        return false;
    }
    if (!writer_read_head(db, why, why_len)) {
        writer_drop(db);
        return false;
    }
    return true;
}

/* Checks the writer's connection with a trivial statement. */
static bool writer_probe(pg_db_t *db, char *why, size_t why_len) {
    PGresult *r = NULL;
    bool ok = pg_run(db->wconn, "SELECT 1", deadline_in(db->o.timeout_ms), &r, why, why_len);
    PQclear(r);
    return ok;
}

static void *writer_main(void *arg) {
    pg_db_t *db = arg;
    pending_t *v[PG_BATCH_MAX];
    arr_t arr[A__COUNT];
    char why[PG_WHY_MAX];
    for (size_t j = 0; j < A__COUNT; j++) {
        /* a whole group's column: room for PG_BATCH_MAX of the largest records */
        tg_buf_init(&arr[j].b,
                    (size_t)PG_BATCH_MAX * (TG_LEDGER_META_MAX + TG_LEDGER_PAYLOAD_MAX + 8) + 64);
    }
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
                /* The idle pooled connections were opened before the failure and are most
                 * likely dead too: replace them now rather than fail a request each. */
                pool_flush(db);
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
        commit_group(db, v, n, arr);
    }
    for (size_t j = 0; j < A__COUNT; j++) {
        tg_buf_free(&arr[j].b);
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
        /* a claim still held (in flight within its lease) is never swept: only taken over */
        "DELETE FROM tg_idem_claims WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_idem_claims"
        " WHERE expires_at <= now() AND (state = 'done' OR lease_until <= now())"
        " LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
        "DELETE FROM tg_nonces WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_nonces"
        " WHERE expires_at <= now() AND (lease_until IS NULL OR lease_until <= now())"
        " LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
        /* limit totals whose window has ended count for nothing any more */
        "DELETE FROM tg_limit_totals WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_limit_totals"
        " WHERE window_end <= extract(epoch FROM now())"
        " LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
    };
    /* approvals that ended (denied, expired, consumed: the stored status; one the clock
     * expired is stepped by the timer first) more than the keys' retention ago, never one
     * held; retention_txt is our own number, so it may be part of the text */
    char appr[640];
    (void)snprintf(appr, sizeof appr,
                   "DELETE FROM tg_approvals WHERE ctid = ANY (ARRAY (SELECT ctid FROM tg_approvals"
                   " WHERE status IN ('denied', 'expired', 'consumed')"
                   " AND greatest(resolved_at, coalesce((doc::jsonb->>'consumedAt')::bigint, 0))"
                   " + %s < (extract(epoch FROM now()) * 1000)::bigint"
                   " AND (hold_until IS NULL OR hold_until <= now())"
                   " LIMIT " PG_SWEEP_ROWS " FOR UPDATE SKIP LOCKED))",
                   db->retention_txt);
    for (size_t i = 0; i <= sizeof sweeps / sizeof sweeps[0]; i++) {
        const char *sql = i < sizeof sweeps / sizeof sweeps[0] ? sweeps[i] : appr;
        if (!pg_run(db->uconn, sql, deadline_in(10000), NULL, why, sizeof why)) {
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

/* ---- the transparency log -----------------------------------------------------------------
 * One log for the deployment (db.h "the transparency log", docs/POSTGRES.md "The
 * transparency log"). Each record's entry is written with the record (log_entry); its leaf
 * index (log_index) is assigned afterwards by the integrator: the instance whose integrator
 * connection holds the advisory lock TG_PG_LOG_LOCK (a session lock: the server releases it
 * with the connection, so when that instance dies the next one takes it). The holder loads
 * the tree's frontier from tg_log_hashes, checks the stored checkpoint against it
 * (tg_tle_adopt), and runs the engine (tlog_engine.h): a poll takes the records without a
 * leaf in seq order (at most PG_LOG_BATCH), pushes their entries (tag = seq) and waits until
 * the engine has published them; the engine's commit is one transaction on the lock's
 * connection that assigns their log_index, inserts the new stored hashes and replaces
 * tg_log_state, fenced on the checkpoint it replaces (so two integrators, one of which lost
 * its lock without knowing yet, can never both move the log). Every instance answers the
 * readers from the rows.
 *
 * Why a poll and not LISTEN/NOTIFY from the group commit: a notifying transaction takes a
 * database-wide lock at commit (the notification queue's), which would serialise every
 * instance's group commits, and a listener has to poll after each reconnect anyway. A poll
 * that finds nothing is one probe of the partial index of unassigned rows. The lag it adds:
 * a record committed just after a poll waits min_interval_ms for the next one, then at most
 * min_interval_ms for the engine's spacing of checkpoints, then one transaction: about
 * 2 × min_interval_ms + a commit (12 ms with the defaults), within max_interval_ms. */

typedef struct log_waiter {
    struct log_waiter *next;
    uint64_t seq;
    int64_t deadline_ns;
    tg_db_log_wait_fn fn;
    void *ud;
    tg_err_t status; /* the answer, once it leaves the list */
    uint64_t leaf;
} log_waiter_t;

/* CLOCK_MONOTONIC ms from now, for the condition variables made with that clock. */
static struct timespec mono_after(uint32_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* The checkpoint note[0..len) of tg_log_state checked as every instance serves it: signed by
 * this instance's log key, a checkpoint of its origin, of the row's size. */
static tg_err_t log_check_note(pg_db_t *db, const char *note, size_t len, int64_t size,
                               tg_checkpoint_t *cp) {
    size_t text_len = 0;
    const tg_note_verifier_t *k = &db->log_signer.pub;
    if (len > TG_TLE_NOTE_MAX || tg_note_verify(note, len, k, 1, &text_len, NULL) != TG_OK ||
        tg_checkpoint_parse(cp, note, text_len) != TG_OK || cp->origin_len != k->name_len ||
        memcmp(cp->origin, k->name, k->name_len) != 0 || size < 0 || cp->size != (uint64_t)size) {
        return TG_ERR_LOG_INCONSISTENT;
    }
    cp->ext = NULL; /* db.h: never handed out (this log writes none) */
    cp->ext_len = 0;
    return TG_OK;
}

static void log_size_seen(pg_db_t *db, uint64_t size) {
    uint64_t old = atomic_load(&db->st_log_size);
    while (size > old && !atomic_compare_exchange_weak(&db->st_log_size, &old, size)) {
    }
}

/* Reads tg_log_state into the cache (checked when its note changed). */
static tg_err_t log_fetch(pg_db_t *db) {
    params_t p = {.n = 0};
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_log_state, &p, &r);
    if (rc != TG_OK) {
        return db->base.unavailable;
    }
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 1)) {
        /* no row: not a schema this binary made; no note: no integrator has signed yet */
        rc = PQntuples(r) != 1 ? TG_ERR_LOG_INCONSISTENT : TG_ERR_LOG_PENDING;
        PQclear(r);
        return rc;
    }
    const char *note = PQgetvalue(r, 0, 1);
    size_t len = (size_t)PQgetlength(r, 0, 1);
    int64_t size = get_i64(r, 0, 0);
    pthread_mutex_lock(&db->lc_mu);
    bool same = db->lc_have && db->lc_len == len && memcmp(db->lc_note, note, len) == 0;
    pthread_mutex_unlock(&db->lc_mu);
    tg_checkpoint_t cp;
    if (!same && log_check_note(db, note, len, size, &cp) != TG_OK) {
        PQclear(r);
        if (!atomic_exchange(&db->st_log_inconsistent, true)) {
            TG_LOG(TG_LOG_ERROR, "log_inconsistent",
                   "tg_log_state holds a checkpoint this instance's log key did not sign for "
                   "its origin (another --log-key or --log-origin than the integrator's, or an "
                   "edited row): this instance serves no checkpoint and does not integrate");
        }
        return TG_ERR_LOG_INCONSISTENT;
    }
    pthread_mutex_lock(&db->lc_mu);
    if (!same) {
        memcpy(db->lc_note, note, len);
        db->lc_note[len] = '\0';
        db->lc_len = len;
        db->lc_cp = cp;
        db->lc_have = true;
    }
    db->lc_at_ns = tg_clock_mono_ns();
    uint64_t seen = db->lc_cp.size;
    pthread_mutex_unlock(&db->lc_mu);
    PQclear(r);
    log_size_seen(db, seen);
    return TG_OK;
}

static tg_err_t pg_log_restore(tg_db_t *dbp, uint64_t seq, const uint8_t entry[32]) {
    (void)seq;
    (void)entry;
    /* Without a log: nothing to do (db.h). With one, the rows are the log and pg never
     * replays: a call is a caller's bug. */
    return pg_of(dbp)->log_on ? TG_ERR_INVALID_ARG : TG_OK;
}

static tg_err_t pg_log_checkpoint(tg_db_t *dbp, tg_buf_t *note, tg_checkpoint_t *cp) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    pthread_mutex_lock(&db->lc_mu);
    bool fresh =
        db->lc_have && tg_clock_mono_ns() - db->lc_at_ns < (int64_t)PG_LOG_CACHE_MS * 1000000;
    pthread_mutex_unlock(&db->lc_mu);
    if (!fresh) {
        tg_err_t rc = log_fetch(db);
        if (rc != TG_OK) {
            return rc;
        }
    }
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&db->lc_mu);
    if (note != NULL) {
        rc = tg_buf_append(note, db->lc_note, db->lc_len);
    }
    if (cp != NULL) {
        *cp = db->lc_cp;
    }
    pthread_mutex_unlock(&db->lc_mu);
    return rc;
}

/* A range [index, index + n) of bigint keys as two text parameters; false when it does not
 * fit a bigint. */
static bool log_range(char lo[24], char hi[24], uint64_t index, size_t n) {
    if (index > (uint64_t)INT64_MAX - n) {
        return false;
    }
    uint64_t end = index + n;
    (void)snprintf(lo, 24, "%llu", (unsigned long long)index);
    (void)snprintf(hi, 24, "%llu", (unsigned long long)end);
    return true;
}

static tg_err_t pg_log_hashes(tg_db_t *dbp, unsigned level, uint64_t index, size_t n,
                              uint8_t (*out)[32]) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    char lv[8], lo[24], hi[24];
    if (level > 63 || n > 256 || (n > 0 && out == NULL) || !log_range(lo, hi, index, n)) {
        return TG_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return TG_OK;
    }
    (void)snprintf(lv, sizeof lv, "%u", level);
    params_t p = {.n = 0};
    par(&p, lv, TG_PG_TEXT);
    par(&p, lo, TG_PG_TEXT);
    par(&p, hi, TG_PG_TEXT);
    PGresult *r = NULL;
    if (pool_call(db, &st_log_hashes, &p, &r) != TG_OK) {
        return db->base.unavailable;
    }
    /* every one must be stored: a hash not (yet) stored is not in the published tree */
    tg_err_t rc = (size_t)PQntuples(r) == n ? TG_OK : TG_ERR_NOT_FOUND;
    for (size_t k = 0; rc == TG_OK && k < n; k++) {
        if (get_i64(r, (int)k, 0) != (int64_t)(index + k) || PQgetlength(r, (int)k, 1) != 32) {
            rc = TG_ERR_IO; /* not a row the integrator wrote */
        } else {
            memcpy(out[k], PQgetvalue(r, (int)k, 1), 32);
        }
    }
    PQclear(r);
    return rc;
}

static tg_err_t pg_log_hashes_at(tg_db_t *dbp, const tg_db_log_at_t *at, size_t n,
                                 uint8_t (*out)[32]) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    if (n == 0) {
        return TG_OK;
    }
    arr_t lv, ix;
    tg_buf_init(&lv.b, 0);
    tg_buf_init(&ix.b, 0);
    arr_begin(&lv, OID_INT2);
    arr_begin(&ix, OID_INT8);
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n; i++) {
        if (at[i].level > 63 || at[i].index > INT64_MAX) {
            rc = TG_ERR_INVALID_ARG;
        }
        arr_int(&lv, (int64_t)at[i].level, 2, false);
        arr_int(&ix, (int64_t)at[i].index, 8, false);
    }
    arr_end(&lv);
    arr_end(&ix);
    rc = rc != TG_OK ? rc : lv.rc != TG_OK ? lv.rc : ix.rc;
    PGresult *r = NULL;
    if (rc == TG_OK) {
        params_t p = {.n = 0};
        par(&p, lv.b.data, lv.b.len);
        par(&p, ix.b.data, ix.b.len);
        if (pool_call(db, &st_log_hashes_at, &p, &r) != TG_OK) {
            rc = db->base.unavailable;
        }
    }
    if (rc == TG_OK) {
        /* every one must be stored: a hash not (yet) stored is not in the published tree */
        rc = (size_t)PQntuples(r) == n ? TG_OK : TG_ERR_NOT_FOUND;
        for (size_t k = 0; rc == TG_OK && k < n; k++) {
            if (get_i64(r, (int)k, 0) != (int64_t)k + 1 || PQgetlength(r, (int)k, 1) != 32) {
                rc = TG_ERR_IO; /* not a row the integrator wrote */
            } else {
                memcpy(out[k], PQgetvalue(r, (int)k, 1), 32);
            }
        }
    }
    PQclear(r);
    tg_buf_free(&lv.b);
    tg_buf_free(&ix.b);
    return rc;
}

static tg_err_t pg_log_entries(tg_db_t *dbp, uint64_t index, size_t n, uint8_t (*out)[32]) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    char lo[24], hi[24];
    if (n > 256 || (n > 0 && out == NULL) || !log_range(lo, hi, index, n)) {
        return TG_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return TG_OK;
    }
    params_t p = {.n = 0};
    par(&p, lo, TG_PG_TEXT);
    par(&p, hi, TG_PG_TEXT);
    PGresult *r = NULL;
    if (pool_call(db, &st_log_entries, &p, &r) != TG_OK) {
        return db->base.unavailable;
    }
    tg_err_t rc = (size_t)PQntuples(r) == n ? TG_OK : TG_ERR_NOT_FOUND;
    for (size_t k = 0; rc == TG_OK && k < n; k++) {
        int row = (int)k;
        if (get_i64(r, row, 0) != (int64_t)(index + k)) {
            rc = TG_ERR_IO;
        } else if (!PQgetisnull(r, row, 1)) {
            rc = PQgetlength(r, row, 1) == 32 ? TG_OK : TG_ERR_IO;
            if (rc == TG_OK) {
                memcpy(out[k], PQgetvalue(r, row, 1), 32);
            }
        } else {
            /* a row from before schema v5: its entry from the record itself */
            int type = get_i16(r, row, 2);
            rc = type > 0 && type < 256 &&
                         tg_record_log_entry(out[k], (uint8_t)type, PQgetvalue(r, row, 3),
                                             (size_t)PQgetlength(r, row, 3), NULL) == TG_OK
                     ? TG_OK
                     : TG_ERR_IO;
        }
    }
    PQclear(r);
    return rc;
}

static tg_err_t pg_log_leaf(tg_db_t *dbp, const tg_ledger_pos_t *pos, uint64_t *leaf) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    if (pos == NULL || leaf == NULL || pos->seq == 0 || pos->seq > (uint64_t)INT64_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    char seq[24];
    (void)snprintf(seq, sizeof seq, "%llu", (unsigned long long)pos->seq);
    params_t p = {.n = 0};
    par(&p, seq, TG_PG_TEXT);
    PGresult *r = NULL;
    if (pool_call(db, &st_log_leaf, &p, &r) != TG_OK) {
        return db->base.unavailable;
    }
    tg_err_t rc = TG_ERR_NOT_FOUND;
    if (PQntuples(r) == 1) {
        int64_t idx = get_i64(r, 0, 0);
        int64_t size = get_i64(r, 0, 1);
        /* assigned in the transaction that published it, so idx < size; checked anyway */
        rc = PQgetisnull(r, 0, 0) || PQgetisnull(r, 0, 1) || idx < 0 || idx >= size
                 ? TG_ERR_LOG_PENDING
                 : TG_OK;
        if (rc == TG_OK) {
            *leaf = (uint64_t)idx;
        }
    }
    PQclear(r);
    return rc;
}

static tg_err_t pg_log_wait(tg_db_t *dbp, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                            tg_db_log_wait_fn fn, void *ud) {
    pg_db_t *db = pg_of(dbp);
    if (!db->log_on) {
        return TG_ERR_LOG_DISABLED;
    }
    if (pos == NULL || fn == NULL || pos->seq == 0 || pos->seq > (uint64_t)INT64_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    log_waiter_t *w = calloc(1, sizeof *w);
    if (w == NULL) {
        return TG_ERR_NOMEM;
    }
    w->seq = pos->seq;
    w->deadline_ns = deadline_in(timeout_ms);
    w->fn = fn;
    w->ud = ud;
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&db->lw_mu);
    if (db->stopping || !db->lw_started) {
        rc = db->base.unavailable;
    } else if (db->lw_n >= PG_LOG_WAITERS_MAX) {
        rc = TG_ERR_LIMIT;
    } else {
        w->next = db->lw_head;
        db->lw_head = w;
        db->lw_n++;
        pthread_cond_signal(&db->lw_cv);
        w = NULL;
    }
    pthread_mutex_unlock(&db->lw_mu);
    free(w);
    return rc;
}

/* The leaf of seq in a poll's result (rows in seq order): binary search. */
static bool covered_find(const PGresult *r, uint64_t seq, uint64_t *leaf) {
    int lo = 0, hi = PQntuples(r);
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        uint64_t s = (uint64_t)get_i64(r, mid, 0);
        if (s == seq) {
            *leaf = (uint64_t)get_i64(r, mid, 1);
            return true;
        }
        if (s < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return false;
}

/* Calls and frees a list of answered waiters (outside every lock: fn may do anything short). */
static void waiters_fire(log_waiter_t *w) {
    while (w != NULL) {
        log_waiter_t *next = w->next;
        w->fn(w->ud, w->status, w->leaf);
        free(w);
        w = next;
    }
}

/* The waiters' thread: while any wait, one statement every min_interval_ms asks which of
 * their records have a leaf (assigned in the transaction that published the checkpoint
 * covering it, so a leaf found is a leaf covered). */
static void *lw_main(void *arg) {
    pg_db_t *db = arg;
    arr_t seqs;
    tg_buf_init(&seqs.b, 0);
    for (;;) {
        pthread_mutex_lock(&db->lw_mu);
        while (db->lw_head == NULL && !db->stopping) {
            pthread_cond_wait(&db->lw_cv, &db->lw_mu);
        }
        if (db->stopping) {
            /* db.h: a waiter is answered once; at close, not in time */
            log_waiter_t *all = db->lw_head;
            db->lw_head = NULL;
            db->lw_n = 0;
            pthread_mutex_unlock(&db->lw_mu);
            for (log_waiter_t *w = all; w != NULL; w = w->next) {
                w->status = TG_ERR_LOG_PENDING;
            }
            waiters_fire(all);
            break;
        }
        arr_begin(&seqs, OID_INT8);
        for (log_waiter_t *w = db->lw_head; w != NULL; w = w->next) {
            arr_int(&seqs, (int64_t)w->seq, 8, false);
        }
        arr_end(&seqs);
        pthread_mutex_unlock(&db->lw_mu);
        PGresult *r = NULL;
        tg_err_t rc = seqs.rc;
        if (rc == TG_OK) {
            params_t p = {.n = 0};
            par(&p, seqs.b.data, seqs.b.len);
            rc = pool_call(db, &st_log_covered, &p, &r);
        }
        int64_t now = tg_clock_mono_ns();
        log_waiter_t *fire = NULL;
        pthread_mutex_lock(&db->lw_mu);
        for (log_waiter_t **pp = &db->lw_head; *pp != NULL;) {
            log_waiter_t *w = *pp;
            bool done = true;
            if (rc != TG_OK) {
                w->status = db->base.unavailable;
            } else if (covered_find(r, w->seq, &w->leaf)) {
                w->status = TG_OK;
            } else if (now >= w->deadline_ns) {
                w->status = TG_ERR_LOG_PENDING;
            } else {
                done = false;
            }
            if (done) {
                *pp = w->next;
                w->next = fire;
                fire = w;
                db->lw_n--;
            } else {
                pp = &w->next;
            }
        }
        pthread_mutex_unlock(&db->lw_mu);
        PQclear(r);
        waiters_fire(fire);
        /* the next poll after the interval; new waiters wait for it too (one statement for
         * all of them), only close cuts it short */
        struct timespec until = mono_after(db->log_min_ms);
        pthread_mutex_lock(&db->lw_mu);
        while (!db->stopping &&
               pthread_cond_timedwait(&db->lw_cv, &db->lw_mu, &until) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&db->lw_mu);
    }
    tg_buf_free(&seqs.b);
    return NULL;
}

/* -- the integrator -- */

/* The integrator's statements, on its own connection (not prepared: a few a second). */
static const stmt_t st_li_lock = {NULL, "SELECT pg_try_advisory_lock($1::bigint)", 1};

static const stmt_t st_li_state = {
    NULL,
    "SELECT size, note, (SELECT max(log_index) FROM tg_records),"
    " (SELECT max(idx) FROM tg_log_hashes WHERE level = 0) FROM tg_log_state WHERE id",
    0};

static const stmt_t st_li_frontier = {
    NULL,
    "SELECT u.ord, h.hash FROM unnest($1::smallint[], $2::bigint[]) WITH ORDINALITY"
    "  AS u (level, idx, ord) JOIN tg_log_hashes h ON h.level = u.level AND h.idx = u.idx"
    " ORDER BY u.ord",
    2};

static const stmt_t st_li_hash = {
    NULL, "SELECT hash FROM tg_log_hashes WHERE level = $1::smallint AND idx = $2::bigint", 2};

/* The records without a leaf, oldest first (the partial index tg_records_unlogged). A record
 * whose group committed after a later seq's was seen gets the next leaf when it is seen: leaf
 * order is the order the integrator finds the records in, which is commit order up to one
 * poll. */
static const stmt_t st_li_poll = {
    NULL,
    "SELECT seq, log_entry, type, CASE WHEN log_entry IS NULL THEN payload END FROM tg_records"
    " WHERE log_index IS NULL ORDER BY seq LIMIT " PG_LOG_BATCH,
    0};

/* One checkpoint: the state row first (fenced: it must still hold the checkpoint this
 * integrator replaces; another integrator's commit makes it 0 rows, and then the rest does
 * nothing), then the leaves and the stored hashes. The counts come back so the transaction
 * is committed only when all of it happened; the lag is from the newest record's commit
 * (created_at, the group's transaction time) to now, by the server's clock. */
static const stmt_t st_li_step = {
    NULL,
    "WITH st AS (UPDATE tg_log_state SET size = $2::bigint, root = $3::bytea, note = $4::text,"
    "  origin = $5::text, updated_at = now()"
    "  WHERE id AND size = $1::bigint AND note IS NOT DISTINCT FROM $6::text RETURNING size),"
    " r AS (UPDATE tg_records t SET log_index = u.idx"
    "  FROM unnest($7::bigint[], $8::bigint[]) AS u (seq, idx), st"
    "  WHERE t.seq = u.seq AND t.log_index IS NULL RETURNING t.created_at),"
    " h AS (INSERT INTO tg_log_hashes (level, idx, hash) SELECT u.level, u.idx, u.hash"
    "  FROM unnest($9::smallint[], $10::bigint[], $11::bytea[]) AS u (level, idx, hash), st"
    "  RETURNING 1)"
    " SELECT (SELECT count(*) FROM st), (SELECT count(*) FROM r), (SELECT count(*) FROM h),"
    "  (SELECT coalesce((extract(epoch FROM clock_timestamp() - max(created_at)) * 1000000)"
    "   ::bigint, 0) FROM r)",
    11};

static void li_wake(pg_db_t *db) {
    pthread_mutex_lock(&db->li_wmu);
    db->li_woken = true;
    pthread_cond_broadcast(&db->li_wcv);
    pthread_mutex_unlock(&db->li_wmu);
}

/* Sleeps ms, or until woken (a publication, a lost commit, close). */
static void li_sleep(pg_db_t *db, uint32_t ms) {
    struct timespec until = mono_after(ms);
    pthread_mutex_lock(&db->li_wmu);
    while (!db->li_woken && !db->stopping &&
           pthread_cond_timedwait(&db->li_wcv, &db->li_wmu, &until) != ETIMEDOUT) {
    }
    db->li_woken = false;
    pthread_mutex_unlock(&db->li_wmu);
}

/* Closes the integrator's connection: the server releases the log's lock with it. */
static void li_drop(pg_db_t *db) {
    pthread_mutex_lock(&db->li_mu);
    PQfinish(db->li_conn);
    db->li_conn = NULL;
    db->li_note_len = 0;
    pthread_mutex_unlock(&db->li_mu);
}

/* One statement on the integrator's connection, bounded by the commit timeout. */
static call_t li_call(pg_db_t *db, const stmt_t *s, const params_t *p, PGresult **res, char *why,
                      size_t why_len) {
    pthread_mutex_lock(&db->li_mu);
    call_t c = CALL_BROKEN;
    *res = NULL;
    if (db->li_conn != NULL) {
        c = conn_call(db->li_conn, s, p, deadline_in(db->o.commit_timeout_ms), res, why, why_len);
    } else {
        (void)snprintf(why, why_len, "no connection");
    }
    pthread_mutex_unlock(&db->li_mu);
    return c;
}

/* tg_tle's read: a stored hash of the durable tree (for tg_tle_adopt). */
static tg_err_t li_read(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    pg_db_t *db = ctx;
    char lv[8], ix[24], why[PG_WHY_MAX];
    if (level > 63 || index > (uint64_t)INT64_MAX) {
        return TG_ERR_INVALID_ARG;
    }
    (void)snprintf(lv, sizeof lv, "%u", level);
    (void)snprintf(ix, sizeof ix, "%llu", (unsigned long long)index);
    params_t p = {.n = 0};
    par(&p, lv, TG_PG_TEXT);
    par(&p, ix, TG_PG_TEXT);
    PGresult *r = NULL;
    if (li_call(db, &st_li_hash, &p, &r, why, sizeof why) != CALL_OK) {
        return db->base.unavailable;
    }
    /* the adopted tree's hashes must all be stored: one missing is an inconsistent log */
    tg_err_t rc = PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 32 ? TG_OK : TG_ERR_LOG_INCONSISTENT;
    if (rc == TG_OK) {
        memcpy(out->h, PQgetvalue(r, 0, 0), 32);
    }
    PQclear(r);
    return rc;
}

/* A commit did not happen (or may not have): this integrator's view is no longer the
 * rows'. It stops, drops its connection (and so the lock) and takes over again from the
 * rows, whoever holds the lock by then. */
static void li_lose(pg_db_t *db) {
    atomic_fetch_add(&db->st_log_failures, 1);
    atomic_store(&db->li_lost, true);
    li_wake(db);
}

/* tg_tle's commit: the step as one transaction on the lock's connection. */
static tg_err_t li_commit(void *ctx, const tg_tle_step_t *s) {
    pg_db_t *db = ctx;
    if (atomic_load(&db->li_lost)) {
        return db->base.unavailable; /* quickly: the engine is being replaced */
    }
    uint64_t n = s->new_size - s->old_size;
    arr_t a[5];
    static const uint32_t oids[5] = {OID_INT8, OID_INT8, OID_INT2, OID_INT8, OID_BYTEA};
    for (size_t j = 0; j < 5; j++) {
        tg_buf_init(&a[j].b, 0);
        arr_begin(&a[j], oids[j]);
    }
    for (uint64_t i = 0; i < n; i++) {
        arr_int(&a[0], (int64_t)s->tags[i], 8, false);
        arr_int(&a[1], (int64_t)(s->old_size + i), 8, false);
    }
    for (size_t k = 0; k < s->n_hashes; k++) {
        arr_int(&a[2], (int64_t)s->hashes[k].level, 2, false);
        arr_int(&a[3], (int64_t)s->hashes[k].index, 8, false);
        arr_put(&a[4], s->hashes[k].hash.h, 32);
    }
    char old_txt[24], new_txt[24], why[PG_WHY_MAX] = "";
    (void)snprintf(old_txt, sizeof old_txt, "%llu", (unsigned long long)s->old_size);
    (void)snprintf(new_txt, sizeof new_txt, "%llu", (unsigned long long)s->new_size);
    params_t p = {.n = 0};
    par(&p, old_txt, TG_PG_TEXT);
    par(&p, new_txt, TG_PG_TEXT);
    par(&p, s->root.h, 32);
    par(&p, s->note, s->note_len);
    par(&p, db->log_signer.pub.name, db->log_signer.pub.name_len);
    bool built = true;
    for (size_t j = 0; j < 5; j++) {
        arr_end(&a[j]);
        built = built && a[j].rc == TG_OK;
    }
    int64_t counts[4] = {-1, -1, -1, 0};
    bool good = false;
    pthread_mutex_lock(&db->li_mu);
    par(&p, db->li_note_len > 0 ? db->li_note : NULL, db->li_note_len);
    for (size_t j = 0; j < 5; j++) {
        par(&p, a[j].b.data, a[j].b.len);
    }
    int64_t deadline = deadline_in(db->o.commit_timeout_ms);
    PGconn *c = db->li_conn;
    bool begun = built && c != NULL && pg_run(c, "BEGIN", deadline, NULL, why, sizeof why);
    PGresult *res = NULL;
    call_t cr =
        begun ? conn_call(c, &st_li_step, &p, deadline, &res, why, sizeof why) : CALL_BROKEN;
    if (cr == CALL_OK && PQntuples(res) == 1) {
        for (int k = 0; k < 4; k++) {
            counts[k] = get_i64(res, 0, k);
        }
    }
    PQclear(res);
    good = cr == CALL_OK && counts[0] == 1 && counts[1] == (int64_t)n &&
           counts[2] == (int64_t)s->n_hashes;
    if (good) {
        PGresult *cm = NULL;
        good = pg_run(c, "COMMIT", deadline, &cm, why, sizeof why) &&
               strcmp(PQcmdStatus(cm), "COMMIT") == 0;
        PQclear(cm);
    } else if (begun && cr != CALL_BROKEN) {
        char ignored[PG_WHY_MAX]; /* the first reason is the one to report */
        (void)pg_run(c, "ROLLBACK", deadline, NULL, ignored, sizeof ignored);
    }
    if (good) {
        memcpy(db->li_note, s->note, s->note_len);
        db->li_note[s->note_len] = '\0';
        db->li_note_len = s->note_len;
    }
    pthread_mutex_unlock(&db->li_mu);
    for (size_t j = 0; j < 5; j++) {
        tg_buf_free(&a[j].b);
    }
    if (good) {
        uint64_t lag_us = counts[3] > 0 ? (uint64_t)counts[3] : 0;
        atomic_fetch_add(&db->st_log_checkpoints, 1);
        if (n > 0) {
            atomic_store(&db->st_log_lag_ms, lag_us / 1000);
            atomic_fetch_add(&db->st_log_lag_sum_us, lag_us);
            atomic_fetch_add(&db->st_log_lag_hist[tg_ledger_hist_bucket(
                                 tg_ledger_fsync_bounds_us, TG_LEDGER_FSYNC_BUCKETS - 1, lag_us)],
                             1);
        }
        log_size_seen(db, s->new_size);
        return TG_OK;
    }
    if (counts[0] == 0) {
        TG_LOG(TG_LOG_WARN, "log_fenced",
               "another integrator replaced the log's checkpoint meanwhile (this instance had "
               "lost its lock): nothing committed; taking over again from the rows");
    } else {
        TG_LOG(TG_LOG_WARN, "log_commit_failed",
               "a checkpoint of the transparency log (size %llu) could not be committed "
               "(%s): nothing published; taking over again from the rows",
               (unsigned long long)s->new_size,
               why[0] ? why
               : cr == CALL_OK
                   ? "the statement touched other rows than the step's (log_index already set?)"
                   : "no connection");
    }
    li_lose(db);
    return db->base.unavailable;
}

/* tg_tle_wait's callback for the integrator's own wait: wake the poll loop. */
static void li_published(void *ud, tg_err_t status, uint64_t leaf) {
    (void)status;
    (void)leaf;
    li_wake(ud);
}

/* Loads the tree from the rows, checks the stored checkpoint, and starts an engine on them.
 * TG_ERR_LOG_INCONSISTENT (diag says why), the unavailable error, engine errors. */
static tg_err_t li_takeover(pg_db_t *db, tg_tle_t **out, tg_diag_t *d) {
    char why[PG_WHY_MAX];
    params_t p = {.n = 0};
    PGresult *r = NULL;
    *out = NULL;
    if (li_call(db, &st_li_state, &p, &r, why, sizeof why) != CALL_OK) {
        return tg_diag_set(d, db->base.unavailable, "reading tg_log_state: %s", why);
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return tg_diag_set(d, TG_ERR_LOG_INCONSISTENT, "tg_log_state has no row");
    }
    int64_t size = get_i64(r, 0, 0);
    bool has_note = !PQgetisnull(r, 0, 1);
    size_t note_len = (size_t)PQgetlength(r, 0, 1);
    char note[TG_TLE_NOTE_MAX + 1];
    if (has_note && note_len <= TG_TLE_NOTE_MAX) {
        memcpy(note, PQgetvalue(r, 0, 1), note_len);
        note[note_len] = '\0';
    }
    /* the last leaf assigned and the last leaf hash stored: both size - 1 (-1: none) */
    int64_t last_leaf = PQgetisnull(r, 0, 2) ? -1 : get_i64(r, 0, 2);
    int64_t last_hash = PQgetisnull(r, 0, 3) ? -1 : get_i64(r, 0, 3);
    PQclear(r);
    if (size < 0 || (has_note && note_len > TG_TLE_NOTE_MAX) || (!has_note && size != 0)) {
        return tg_diag_set(d, TG_ERR_LOG_INCONSISTENT, "tg_log_state's row is malformed");
    }
    if (last_leaf != size - 1 || last_hash != size - 1) {
        return tg_diag_set(d, TG_ERR_LOG_INCONSISTENT,
                           "the checkpoint covers %lld leaves, but tg_records assigns leaves up "
                           "to %lld and tg_log_hashes stores leaf hashes up to %lld",
                           (long long)size, (long long)last_leaf, (long long)last_hash);
    }
    /* the frontier: one complete subtree per set bit of size, the largest first */
    tg_tlog_range_t range;
    tg_tlog_range_init(&range);
    arr_t a[2];
    tg_buf_init(&a[0].b, 0);
    tg_buf_init(&a[1].b, 0);
    arr_begin(&a[0], OID_INT2);
    arr_begin(&a[1], OID_INT8);
    unsigned count = 0;
    for (int lv = 63; lv >= 0; lv--) {
        if (((uint64_t)size >> lv) & 1u) {
            arr_int(&a[0], lv, 2, false);
            arr_int(&a[1], (int64_t)(((uint64_t)size >> lv) - 1), 8, false);
            count++;
        }
    }
    arr_end(&a[0]);
    arr_end(&a[1]);
    tg_err_t rc = a[0].rc != TG_OK ? a[0].rc : a[1].rc;
    call_t c = CALL_FAILED;
    if (rc == TG_OK) {
        par(&p, a[0].b.data, a[0].b.len);
        par(&p, a[1].b.data, a[1].b.len);
        c = li_call(db, &st_li_frontier, &p, &r, why, sizeof why);
    }
    tg_buf_free(&a[0].b);
    tg_buf_free(&a[1].b);
    if (rc != TG_OK) {
        return tg_diag_set(d, rc, "out of memory");
    }
    if (c != CALL_OK) {
        return tg_diag_set(d, db->base.unavailable, "reading tg_log_hashes: %s", why);
    }
    bool whole = (unsigned)PQntuples(r) == count;
    for (unsigned i = 0; whole && i < count; i++) {
        whole = get_i64(r, (int)i, 0) == (int64_t)i + 1 && PQgetlength(r, (int)i, 1) == 32;
        if (whole) {
            memcpy(range.nodes[i].h, PQgetvalue(r, (int)i, 1), 32);
        }
    }
    PQclear(r);
    if (!whole) {
        return tg_diag_set(d, TG_ERR_LOG_INCONSISTENT,
                           "tg_log_hashes lacks a stored hash of the checkpoint's tree (size "
                           "%lld)",
                           (long long)size);
    }
    range.size = (uint64_t)size;
    range.count = count;
    tg_tle_opts_t eo = {.signer = &db->log_signer,
                        .min_interval_ms = db->log_min_ms,
                        .max_interval_ms = db->log_max_ms};
    tg_tle_backend_t be = {.commit = li_commit, .read = li_read, .ctx = db};
    tg_tle_t *e = NULL;
    rc = tg_tle_create(&e, &eo, &be, d);
    if (rc == TG_OK) {
        rc = tg_tle_restore_range(e, &range);
    }
    if (rc == TG_OK && has_note) {
        rc = tg_tle_adopt(e, note, note_len, d);
    }
    if (rc == TG_OK) {
        /* the fence of the first commit: the checkpoint just adopted (none: NULL) */
        pthread_mutex_lock(&db->li_mu);
        if (has_note) {
            memcpy(db->li_note, note, note_len + 1);
        }
        db->li_note_len = has_note ? note_len : 0;
        pthread_mutex_unlock(&db->li_mu);
        log_size_seen(db, (uint64_t)size);
        rc = tg_tle_start(e, d);
    }
    if (rc != TG_OK) {
        tg_tle_destroy(e);
        return rc;
    }
    *out = e;
    return TG_OK;
}

/* One poll: pushes the records without a leaf. > 0 pushed, 0 none, -1 the connection or
 * the engine failed (take over again), -2 a record whose entry cannot be derived. */
static int li_poll(pg_db_t *db, tg_tle_t *e, uint64_t *pushed) {
    char why[PG_WHY_MAX];
    params_t p = {.n = 0};
    PGresult *r = NULL;
    if (li_call(db, &st_li_poll, &p, &r, why, sizeof why) != CALL_OK) {
        TG_LOG(TG_LOG_WARN, "log_poll_failed",
               "the integrator could not read the records without a leaf (%s): taking over "
               "again",
               why);
        return -1;
    }
    int n = PQntuples(r);
    if (n == 0) {
        PQclear(r);
        return 0;
    }
    uint8_t(*ent)[32] = malloc((size_t)n * 32);
    uint64_t *tags = malloc((size_t)n * sizeof *tags);
    int out = n;
    for (int k = 0; out > 0 && ent != NULL && tags != NULL && k < n; k++) {
        tags[k] = (uint64_t)get_i64(r, k, 0);
        int type = get_i16(r, k, 2);
        bool ok = !PQgetisnull(r, k, 1)
                      ? PQgetlength(r, k, 1) == 32
                      : type > 0 && type < 256 &&
                            tg_record_log_entry(ent[k], (uint8_t)type, PQgetvalue(r, k, 3),
                                                (size_t)PQgetlength(r, k, 3), NULL) == TG_OK;
        if (ok && !PQgetisnull(r, k, 1)) {
            memcpy(ent[k], PQgetvalue(r, k, 1), 32);
        }
        if (!ok) {
            TG_LOG(TG_LOG_ERROR, "log_inconsistent",
                   "record seq %llu has no log entry and none can be derived from it (a "
                   "receipt without a valid receiptHash, or a malformed log_entry): the "
                   "transparency log stops growing here; records still commit; run trigguard "
                   "ledger verify --database-url",
                   (unsigned long long)tags[k]);
            out = -2;
        }
    }
    PQclear(r);
    if (out > 0 && (ent == NULL || tags == NULL ||
                    tg_tle_push(e, *pushed, (const uint8_t(*)[32])ent, tags, (size_t)n) != TG_OK)) {
        out = -1;
    }
    if (out > 0) {
        *pushed += (uint64_t)n;
    }
    free(ent);
    free(tags);
    return out;
}

/* One term as the integrator, from the takeover to losing the lock (or close). */
static void li_run(pg_db_t *db) {
    tg_diag_t d = {{0}};
    tg_tle_t *e = NULL;
    tg_err_t rc = li_takeover(db, &e, &d);
    if (rc == TG_ERR_LOG_INCONSISTENT) {
        atomic_store(&db->st_log_inconsistent, true);
        TG_LOG(TG_LOG_ERROR, "log_inconsistent",
               "the transparency log's rows do not reproduce its signed checkpoint (%s): this "
               "instance will not sign; the log stops growing unless another instance "
               "integrates it; records still commit; run trigguard ledger verify "
               "--database-url",
               d.msg);
        return;
    }
    if (rc != TG_OK) {
        TG_LOG(TG_LOG_WARN, "log_takeover_failed",
               "cannot take over the transparency log's integration (%s): trying again", d.msg);
        return;
    }
    uint64_t pushed = tg_tle_size(e);
    atomic_store(&db->st_log_integrator, true);
    TG_LOG(TG_LOG_INFO, "log_integrator",
           "this instance integrates the transparency log now (tree size %llu)",
           (unsigned long long)pushed);
    while (!db->stopping && !atomic_load(&db->li_lost)) {
        if (tg_tle_published_size(e) < pushed) {
            /* what was pushed is published before the next poll, so a poll never takes a
             * record again that is on its way to a leaf */
            if (tg_tle_wait(e, pushed - 1, db->log_max_ms + db->o.commit_timeout_ms, li_published,
                            db) == TG_OK) {
                li_sleep(db, db->log_max_ms + db->o.commit_timeout_ms);
            } else {
                li_sleep(db, 1);
            }
            continue;
        }
        int got = li_poll(db, e, &pushed);
        if (got == -2) {
            atomic_store(&db->st_log_inconsistent, true);
            break;
        }
        if (got < 0) {
            atomic_store(&db->li_lost, true);
            break;
        }
        if (got == 0) {
            li_sleep(db, db->log_min_ms);
        }
    }
    atomic_store(&db->st_log_integrator, false);
    /* at close: the engine commits what was pushed; after a loss its commit refuses fast */
    tg_tle_destroy(e);
}

static void *li_main(void *arg) {
    pg_db_t *db = arg;
    char why[PG_WHY_MAX];
    char key[24];
    (void)snprintf(key, sizeof key, "%lld", (long long)TG_PG_LOG_LOCK);
    while (!db->stopping && !atomic_load(&db->st_log_inconsistent)) {
        if (db->li_conn == NULL) {
            PGconn *c = pg_open(db, ROLE_LOG, why, sizeof why);
            if (c == NULL) {
                li_sleep(db, PG_RETRY_MS); /* the writer reports the database's state */
                continue;
            }
            pthread_mutex_lock(&db->li_mu);
            db->li_conn = c;
            pthread_mutex_unlock(&db->li_mu);
        }
        params_t p = {.n = 0};
        par(&p, key, TG_PG_TEXT);
        PGresult *r = NULL;
        call_t c = li_call(db, &st_li_lock, &p, &r, why, sizeof why);
        bool held = c == CALL_OK && PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 1 &&
                    PQgetvalue(r, 0, 0)[0] != 0;
        PQclear(r);
        if (c != CALL_OK) {
            li_drop(db);
        }
        if (!held) {
            li_sleep(db, PG_RETRY_MS); /* another instance integrates: ask again later */
            continue;
        }
        li_run(db);
        /* however the term ended, the lock goes with the connection: a fresh start */
        li_drop(db);
        atomic_store(&db->li_lost, false);
        if (!db->stopping) {
            li_sleep(db, PG_RETRY_MS);
        }
    }
    li_drop(db);
    return NULL;
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
    if (pthread_create(&db->claimer, NULL, claimer_main, db) != 0) {
        return tg_diag_set(diag, TG_ERR_INTERNAL, "db: cannot start the claimer thread");
    }
    pthread_mutex_lock(&db->c_mu);
    db->claimer_started = true;
    pthread_mutex_unlock(&db->c_mu);
    if (db->log_on) {
        /* the integrator takes the log's lock (or waits for it) on its own thread: a start
         * never waits for another instance's term */
        if (pthread_create(&db->lw_thread, NULL, lw_main, db) != 0) {
            return tg_diag_set(diag, TG_ERR_INTERNAL, "db: cannot start the log waiters' thread");
        }
        pthread_mutex_lock(&db->lw_mu);
        db->lw_started = true;
        pthread_mutex_unlock(&db->lw_mu);
        if (pthread_create(&db->li_thread, NULL, li_main, db) != 0) {
            return tg_diag_set(diag, TG_ERR_INTERNAL, "db: cannot start the log integrator");
        }
        db->li_started = true;
        /* A new database has no checkpoint until the first integrator has signed the empty
         * tree, a moment after its lock: wait for it (within the commit bound), so a start
         * normally returns with a checkpoint to serve, as the file backend's does. Whatever
         * else the rows say is the readers' and the integrator's to report. */
        int64_t until = deadline_in(db->o.commit_timeout_ms);
        while (log_fetch(db) == TG_ERR_LOG_PENDING && tg_clock_mono_ns() < until) {
            usleep(5000);
        }
    }
    TG_LOG(TG_LOG_INFO, "store_open",
           "PostgreSQL: schema version %d, instance %s (a new hash chain), %u pooled "
           "connections, claim lease %u ms",
           version, db->instance, db->o.pool, db->o.claim_timeout_ms);
    return TG_OK;
}

/* ---- stateful limits (db.h) -------------------------------------------------------- */

/* The text parameters of a limit statement: name, window start and end, amounts. */
typedef struct {
    char name[TG_DB_LIMIT_NAME_MAX + 1];
    char start[24], end[24], amount[32], max[32];
} limit_txt_t;

static bool limit_params(params_t *p, limit_txt_t *t, const tg_db_limit_ref_t *ref) {
    if (ref->limit_len > TG_DB_LIMIT_NAME_MAX || memchr(ref->limit, 0, ref->limit_len) != NULL) {
        return false;
    }
    memcpy(t->name, ref->limit, ref->limit_len);
    t->name[ref->limit_len] = '\0';
    (void)snprintf(t->start, sizeof t->start, "%lld", (long long)ref->window_start_s);
    (void)snprintf(t->end, sizeof t->end, "%lld",
                   (long long)ref->window_start_s + (long long)ref->window_s);
    p->n = 0;
    par(p, t->name, TG_PG_TEXT);
    par(p, ref->key, 32);
    par(p, t->start, TG_PG_TEXT);
    return true;
}

/* A float8 column in binary: 8 bytes big-endian IEEE 754. */
static double get_f64(const PGresult *r, int row, int col) {
    uint64_t bits = (uint64_t)get_i64(r, row, col);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static tg_err_t pg_limit_total(tg_db_t *dbp, const tg_db_limit_ref_t *ref, double *total) {
    pg_db_t *db = pg_of(dbp);
    params_t p;
    limit_txt_t t;
    *total = 0;
    if (!limit_params(&p, &t, ref)) {
        return TG_ERR_INVALID_ARG;
    }
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_limit_total, &p, &r);
    if (rc == TG_OK && PQntuples(r) == 1) {
        *total = get_f64(r, 0, 0);
    }
    PQclear(r);
    return rc == TG_ERR_INVALID_ARG ? rc : rc != TG_OK ? TG_ERR_STORE_UNAVAILABLE : TG_OK;
}

static tg_err_t pg_limit_reserve(tg_db_t *dbp, const tg_db_limit_ref_t *ref, double amount,
                                 double max, double *total_after) {
    pg_db_t *db = pg_of(dbp);
    params_t p;
    limit_txt_t t;
    *total_after = 0;
    if (!limit_params(&p, &t, ref)) {
        return TG_ERR_INVALID_ARG;
    }
    /* %.17g: every double survives the text round trip exactly, so the database adds the
     * same numbers the kernel compared. */
    (void)snprintf(t.amount, sizeof t.amount, "%.17g", amount);
    (void)snprintf(t.max, sizeof t.max, "%.17g", max);
    par(&p, t.end, TG_PG_TEXT);
    par(&p, t.amount, TG_PG_TEXT);
    par(&p, t.max, TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_limit_reserve, &p, &r);
    bool taken = rc == TG_OK && PQntuples(r) == 1;
    if (taken) {
        *total_after = get_f64(r, 0, 0);
    }
    PQclear(r);
    if (rc != TG_OK) {
        return rc == TG_ERR_INVALID_ARG ? rc : TG_ERR_STORE_UNAVAILABLE;
    }
    if (taken) {
        return TG_OK;
    }
    /* No row: the cap would be passed. The total as it is now, for the re-decision. */
    tg_err_t rc2 = pg_limit_total(dbp, ref, total_after);
    return rc2 != TG_OK ? rc2 : TG_ERR_LIMIT_EXCEEDED;
}

static tg_err_t pg_limit_release(tg_db_t *dbp, const tg_db_limit_ref_t *ref, double amount) {
    pg_db_t *db = pg_of(dbp);
    params_t p;
    limit_txt_t t;
    if (!limit_params(&p, &t, ref)) {
        return TG_ERR_INVALID_ARG;
    }
    (void)snprintf(t.amount, sizeof t.amount, "%.17g", amount);
    par(&p, t.amount, TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_limit_release, &p, &r);
    PQclear(r);
    return rc == TG_OK || rc == TG_ERR_INVALID_ARG ? rc : TG_ERR_STORE_UNAVAILABLE;
}

static tg_err_t pg_limit_restore(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                                 int64_t now_ms) {
    (void)db, (void)ref, (void)amount, (void)now_ms;
    return TG_OK; /* pg never replays */
}

/* ---- approvals ----------------------------------------------------------------------------
 * A row per approval (schema v4, docs/POSTGRES.md): its newest document, written only by
 * the group commit of the record carrying the version (st_group: inserted at version 1,
 * updated at n where the row is at n - 1 and its hold_token is the writer's). The hold is
 * a lease on the row (claim_timeout_ms) and a fence here holding its token, as for claims;
 * the database's clock decides leases. */

/* A doc column of row into *out. TG_ERR_LEDGER_CORRUPT when it is not a document. */
static tg_err_t appr_doc(const PGresult *r, int row, int col, tg_approval_t *out) {
    if (PQgetisnull(r, row, col)) {
        return TG_ERR_LEDGER_CORRUPT;
    }
    return tg_approval_parse(out, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

static tg_err_t pg_approval_get(tg_db_t *dbp, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, tg_approval_t *out) {
    pg_db_t *db = pg_of(dbp);
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, id, id_len);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_appr_get, &p, &r);
    if (rc == TG_OK) {
        rc = PQntuples(r) == 1 ? appr_doc(r, 0, 0, out) : TG_ERR_NOT_FOUND;
    }
    PQclear(r);
    return rc;
}

static tg_err_t pg_approval_list(tg_db_t *dbp, const char *tenant, size_t tenant_len, bool all,
                                 int status, int64_t now_ms, tg_approval_t *out, size_t max,
                                 size_t *n) {
    pg_db_t *db = pg_of(dbp);
    *n = 0;
    if (max == 0) {
        return TG_OK;
    }
    char now_txt[24], max_txt[24];
    (void)snprintf(now_txt, sizeof now_txt, "%lld", (long long)now_ms);
    /* a LIMIT the statement takes (bigint); the caller's array bounds the rest */
    (void)snprintf(max_txt, sizeof max_txt, "%zu", max < PG_APPR_ROWS_MAX ? max : PG_APPR_ROWS_MAX);
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, max_txt, TG_PG_TEXT);
    par(&p, now_txt, TG_PG_TEXT);
    par(&p, all ? NULL : tg_approval_status_name((tg_approval_status_t)status), TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_appr_list, &p, &r);
    for (int k = 0; rc == TG_OK && k < PQntuples(r) && *n < max; k++) {
        rc = appr_doc(r, k, 0, &out[*n]);
        if (rc == TG_OK && (all || (int)tg_approval_status_at(&out[*n], now_ms) == status)) {
            (*n)++;
        }
    }
    PQclear(r);
    if (rc != TG_OK) {
        *n = 0;
    }
    return rc;
}

static tg_err_t pg_approval_hold(tg_db_t *dbp, const char *tenant, size_t tenant_len,
                                 const char *id, size_t id_len, int64_t now_ms,
                                 tg_approval_t *cur) {
    pg_db_t *db = pg_of(dbp);
    (void)now_ms; /* the database's clock decides leases, for every instance */
    uint8_t held[32];
    tg_err_t rc = fence_hold(db, FENCE_APPROVAL, tenant, tenant_len, id, id_len, NULL, held);
    if (rc == TG_ERR_EXISTS) {
        return TG_ERR_IN_FLIGHT; /* held by a writer here */
    }
    if (rc != TG_OK) {
        return rc;
    }
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, id, id_len);
    par(&p, db->lease_ms, TG_PG_TEXT);
    PGresult *r = NULL;
    rc = pool_call(db, &st_appr_hold, &p, &r);
    int64_t token = 0;
    if (rc == TG_OK) {
        if (PQntuples(r) != 1) {
            rc = TG_ERR_NOT_FOUND;
        } else if (get_i16(r, 0, 0) != 0) {
            rc = TG_ERR_IN_FLIGHT; /* another instance's writer holds the lease */
        } else {
            token = get_i64(r, 0, 1);
            rc = appr_doc(r, 0, 2, cur);
        }
    }
    PQclear(r);
    if (rc == TG_OK) {
        fence_grant(db, FENCE_APPROVAL, tenant, tenant_len, id, id_len, token);
        return TG_OK;
    }
    int64_t unused = 0;
    (void)fence_take(db, FENCE_APPROVAL, tenant, tenant_len, id, id_len, &unused);
    if (token != 0) {
        /* the lease was taken but its document is unreadable: give it back at once */
        char tok[24];
        (void)snprintf(tok, sizeof tok, "%lld", (long long)token);
        p.n = 2; /* tenant, id, then the token instead of the lease */
        par(&p, tok, TG_PG_TEXT);
        if (pool_call(db, &st_appr_release, &p, &r) == TG_OK) {
            PQclear(r);
        }
    }
    return rc;
}

static tg_err_t pg_approval_release(tg_db_t *dbp, const char *tenant, size_t tenant_len,
                                    const char *id, size_t id_len) {
    pg_db_t *db = pg_of(dbp);
    int64_t token = 0;
    if (!fence_take(db, FENCE_APPROVAL, tenant, tenant_len, id, id_len, &token) || token == 0) {
        return TG_OK; /* none held here */
    }
    char tok[24];
    (void)snprintf(tok, sizeof tok, "%lld", (long long)token);
    params_t p = {.n = 0};
    par(&p, tenant, tenant_len);
    par(&p, id, id_len);
    par(&p, tok, TG_PG_TEXT);
    PGresult *r = NULL;
    /* If this fails the row keeps its lease, and is free once the lease has passed. */
    tg_err_t rc = pool_call(db, &st_appr_release, &p, &r);
    PQclear(r);
    return rc;
}

/* The record's transaction wrote the row and cleared its lease: only the fence here is
 * left to drop. */
static tg_err_t pg_approval_commit(tg_db_t *dbp, const tg_approval_t *a, int64_t now_ms) {
    (void)now_ms;
    int64_t unused = 0;
    (void)fence_take(pg_of(dbp), FENCE_APPROVAL, a->tenant, strlen(a->tenant), a->id, strlen(a->id),
                     &unused);
    return TG_OK;
}

static bool pg_approval_room(tg_db_t *db) {
    (void)db;
    return true; /* rows, not memory */
}

static tg_err_t pg_approval_restore(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    (void)db, (void)a, (void)now_ms;
    return TG_OK; /* pg never replays */
}

static tg_err_t pg_approval_due(tg_db_t *dbp, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                                size_t *n) {
    pg_db_t *db = pg_of(dbp);
    *n = 0;
    if (max == 0) {
        return TG_OK;
    }
    char now_txt[24], max_txt[24];
    (void)snprintf(now_txt, sizeof now_txt, "%lld", (long long)now_ms);
    /* a LIMIT the statement takes (bigint); the caller's array bounds the rest */
    (void)snprintf(max_txt, sizeof max_txt, "%zu", max < PG_APPR_ROWS_MAX ? max : PG_APPR_ROWS_MAX);
    params_t p = {.n = 0};
    par(&p, now_txt, TG_PG_TEXT);
    par(&p, max_txt, TG_PG_TEXT);
    PGresult *r = NULL;
    tg_err_t rc = pool_call(db, &st_appr_due, &p, &r);
    for (int k = 0; rc == TG_OK && k < PQntuples(r) && *n < max; k++) {
        int tl = PQgetlength(r, k, 0), il = PQgetlength(r, k, 1);
        if (tl <= 0 || (size_t)tl >= sizeof out->tenant || il <= 0 ||
            (size_t)il >= sizeof out->id) {
            continue; /* not a row this binary wrote */
        }
        tg_db_approval_ref_t *o = &out[(*n)++];
        memset(o, 0, sizeof *o);
        memcpy(o->tenant, PQgetvalue(r, k, 0), (size_t)tl);
        memcpy(o->id, PQgetvalue(r, k, 1), (size_t)il);
    }
    PQclear(r);
    return rc;
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
    out->log.enabled = db->log_on;
    if (db->log_on) {
        /* the newest size this instance has seen published (its own commits, or a read of
         * tg_log_state); an integrator publishes what it integrates in the same commit */
        out->log.size = atomic_load(&db->st_log_size);
        out->log.integrated = out->log.size;
        out->log.checkpoints = atomic_load(&db->st_log_checkpoints);
        out->log.lag_ms_last = atomic_load(&db->st_log_lag_ms);
        for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
            out->log.lag_hist[i] = atomic_load(&db->st_log_lag_hist[i]);
        }
        out->log.lag_sum_us = atomic_load(&db->st_log_lag_sum_us);
        out->log.failures = atomic_load(&db->st_log_failures);
        out->log.integrator = atomic_load(&db->st_log_integrator);
        out->log.inconsistent = atomic_load(&db->st_log_inconsistent);
        pthread_mutex_lock(&db->lw_mu);
        out->log.waiters = db->lw_n;
        pthread_mutex_unlock(&db->lw_mu);
    }
}

static void pg_close(tg_db_t *dbp) {
    pg_db_t *db = pg_of(dbp);
    pthread_mutex_lock(&db->q_mu);
    db->stopping = true;
    pthread_cond_broadcast(&db->q_cv);
    pthread_mutex_unlock(&db->q_mu);
    pthread_mutex_lock(&db->c_mu);
    pthread_cond_broadcast(&db->c_cv);
    pthread_mutex_unlock(&db->c_mu);
    if (db->claimer_started) {
        pthread_join(db->claimer, NULL);
    }
    pthread_mutex_lock(&db->pool_mu);
    pthread_cond_broadcast(&db->pool_cv);
    pthread_mutex_unlock(&db->pool_mu);
    /* The integrator commits what it has pushed (a last checkpoint) and lets go of the
     * lock; the waiters still waiting are answered TG_ERR_LOG_PENDING. */
    pthread_mutex_lock(&db->lw_mu);
    pthread_cond_broadcast(&db->lw_cv);
    pthread_mutex_unlock(&db->lw_mu);
    li_wake(db);
    if (db->li_started) {
        pthread_join(db->li_thread, NULL);
    }
    if (db->lw_started) {
        pthread_join(db->lw_thread, NULL);
    }
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
    pthread_cond_destroy(&db->c_cv);
    pthread_mutex_destroy(&db->c_mu);
    pthread_mutex_destroy(&db->why_mu);
    tg_note_signer_wipe(&db->log_signer);
    pthread_mutex_destroy(&db->lc_mu);
    pthread_mutex_destroy(&db->lw_mu);
    pthread_cond_destroy(&db->lw_cv);
    pthread_mutex_destroy(&db->li_mu);
    pthread_mutex_destroy(&db->li_wmu);
    pthread_cond_destroy(&db->li_wcv);
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
    .limit_total = pg_limit_total,
    .limit_reserve = pg_limit_reserve,
    .limit_release = pg_limit_release,
    .limit_restore = pg_limit_restore,
    .approval_get = pg_approval_get,
    .approval_list = pg_approval_list,
    .approval_hold = pg_approval_hold,
    .approval_release = pg_approval_release,
    .approval_commit = pg_approval_commit,
    .approval_room = pg_approval_room,
    .approval_restore = pg_approval_restore,
    .approval_due = pg_approval_due,
    .log_restore = pg_log_restore,
    .log_checkpoint = pg_log_checkpoint,
    .log_hashes = pg_log_hashes,
    .log_hashes_at = pg_log_hashes_at,
    .log_entries = pg_log_entries,
    .log_leaf = pg_log_leaf,
    .log_wait = pg_log_wait,
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
    db->max_key_len = opts->keys.max_key_len;
    (void)snprintf(db->lease_ms, sizeof db->lease_ms, "%u", o->claim_timeout_ms);
    (void)snprintf(db->retention_txt, sizeof db->retention_txt, "%lld",
                   (long long)opts->keys.retention_ms);
    make_instance_id(db->instance, sizeof db->instance);
    randombytes_buf(db->fence_key, sizeof db->fence_key);
    db->url = strdup(o->url);
    db->idle = calloc(o->pool, sizeof(PGconn *));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&db->pool_mu, NULL);
    pthread_cond_init(&db->pool_cv, &ca);
    pthread_mutex_init(&db->fence_mu, NULL);
    pthread_mutex_init(&db->q_mu, NULL);
    pthread_cond_init(&db->q_cv, &ca);
    pthread_cond_init(&db->c_cv, NULL);
    pthread_mutex_init(&db->c_mu, NULL);
    pthread_mutex_init(&db->why_mu, NULL);
    pthread_mutex_init(&db->lc_mu, NULL);
    pthread_mutex_init(&db->lw_mu, NULL);
    pthread_cond_init(&db->lw_cv, &ca);
    pthread_mutex_init(&db->li_mu, NULL);
    pthread_mutex_init(&db->li_wmu, NULL);
    pthread_cond_init(&db->li_wcv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&db->li_lost, false);
    atomic_init(&db->st_log_integrator, false);
    atomic_init(&db->st_log_inconsistent, false);
    if (opts->log.signer != NULL) {
        db->log_on = true;
        db->log_signer = *opts->log.signer;
        db->log_min_ms = opts->log.min_interval_ms ? opts->log.min_interval_ms : 5;
        db->log_max_ms = opts->log.max_interval_ms ? opts->log.max_interval_ms : 100;
    }
    atomic_init(&db->healthy, false);
    if (db->url == NULL || db->idle == NULL) {
        pg_close(&db->base);
        return tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    *out = &db->base;
    return TG_OK;
}
