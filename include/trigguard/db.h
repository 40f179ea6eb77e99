/* db.h — the daemon's database, as the pipeline sees it: claims on idempotency keys and
 * nonces, durable decision records, the receipt index. One interface, one implementation
 * per backend ("db" because "state" is the kernel's FSM, kernel.h).
 *
 * ## Why this shape
 * Everything an evaluation must remember lives behind this header, so that where it lives
 * (one ledger directory and tables in memory, or rows in PostgreSQL shared by several
 * daemons, SPEC §13) is a backend's business and not the pipeline's. The operations are the
 * pipeline's steps, in its order (SPEC §3.3):
 *
 *   step   operation                what it does
 *   5      tg_db_claim_key          claim (tenant, key) for this request hash, or find the
 *                                   entry to replay
 *   6      tg_db_claim_nonce        consume (tenant, nonce)
 *   7      tg_db_receipt_room       room to index one more receipt? (asked before signing)
 *   9      tg_db_append(_now)       make the record durable; it carries what it claims
 *   9+     tg_db_complete_key       the claim is DONE at the record's position
 *          tg_db_index_receipt      executionId -> the record's position, never repointed
 *   fail   tg_db_release_key/nonce  nothing durable happened: undo the claims
 *   read   tg_db_find_receipt       executionId -> position (GET /v1/receipts)
 *
 * A receipt's redemption (POST /v1/receipts/{id}/redeem, redeem.c) uses the same steps
 * with no operation of its own: tg_db_claim_nonce of TG_RECORD_REDEEM_NONCE_PREFIX +
 * executionId (record.h: a namespace callers cannot send), tg_db_append of a record of
 * type TG_LEDGER_TYPE_REDEMPTION carrying that nonce, tg_db_release_nonce when it was
 * never written. Everything below about nonces (exclusive, durable with the record,
 * replayed or fenced) is what makes a receipt redeemable once.
 *          tg_db_read               the record at a position (replays, receipt reads)
 *   start  tg_db_start              open the record log; rebuild what lives in memory
 *          tg_db_restore_key/nonce  through the caller's replay callback
 *   tick   tg_db_tick               retention sweeps, the record log's watchdogs
 *
 * ## What the pipeline may assume
 * - A durable record is the truth for everything it claims. Once tg_db_append reported
 *   TG_OK for it, its key is DONE at its position, its nonce is used and its receipt (type
 *   RECEIPT) is indexed, for every later lookup, from every instance and after any restart,
 *   until retention passes: the backend derives those from the record itself (file: the
 *   ledger is replayed at start; pg: the record's row and its claims' outcomes are written
 *   in one transaction). complete_key and index_receipt, called after the append's TG_OK,
 *   bring a backend's fast lookup structures up to date; they are not what makes the
 *   outcome durable, and a crash between the append and them loses nothing.
 * - A record whose append failed was never written and never will be: releasing its claims
 *   then makes every instance, and any restart, agree that the request did not happen.
 * - A claim is exclusive: while one is held (NEW, until complete or release), any other
 *   claim of the same (tenant, key) answers TG_ERR_IN_FLIGHT or TG_ERR_CONFLICT, on every
 *   instance. A claim is never dropped behind the pipeline's back (fail closed): the file
 *   backend never expires one; pg fences its claims, so that one taken over after a lease
 *   can no longer commit (the backend keeps its fencing token by (tenant, key): nothing of
 *   it passes through the pipeline).
 * - TG_ERR_LIMIT from a claim, a restore or an index insert means "full": answer 503.
 * - append never blocks. Claims, releases, completions, index calls and lookups never wait
 *   for a disk (file: memory); pg answers them with one round trip under a statement
 *   timeout. read waits for one record's read, start and close for the whole log.
 *
 * ## Which backend does what
 *   file   (today; src/store/file/) the tables are the in-memory ones of store.h, rebuilt at
 *          start from the ledger (ledger.h) by replaying every record through the caller's
 *          callback; records go to the ledger, whose writer thread group-commits them (one
 *          fdatasync per batch) and calls done on its completion thread. meta carries the
 *          record's claims for the replay, so the typed claims of tg_db_record_t are not
 *          read.
 *   pg     (src/store/pg/db_pg.c, SPEC §13, docs/POSTGRES.md) claims are rows, taken with
 *          one statement each on a pooled connection (committed asynchronously: a claim
 *          lost in a crash had no record yet, and a record's synchronous commit flushes
 *          every claim it depends on); one writer thread per instance commits the queued
 *          records in groups, one transaction each (pipelined: one round trip for the
 *          statements, one for COMMIT), inserting every record with its claims' outcomes
 *          (the key DONE, the nonce consumed, the receipt's index row) from the typed
 *          claims of each tg_db_record_t, each fenced by the claim's token; done runs once
 *          COMMIT has answered. start connects, refuses a schema it does not know, and
 *          never calls replay. Each process start is a new hash chain (instance_id).
 *
 * Positions: a record's place is a tg_ledger_pos_t. seq names the record in every backend;
 * segment/offset/length locate it in a ledger directory (file), and are 0 where a backend
 * finds records by seq alone (pg).
 *
 * Thread safety: after tg_db_start returned TG_OK, every function except tg_db_close may be
 * called from any number of threads at once. done callbacks may call the claim, complete,
 * release and index functions, never append, read, tick or close.
 */
#ifndef TRIGGUARD_DB_H
#define TRIGGUARD_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/ledger.h"
#include "trigguard/store.h"
#include "trigguard/tlog.h"

struct tg_approval;    /* approval.h */
struct tg_note_signer; /* note.h */
struct tg_checkpoint;  /* note.h */
struct tg_tlog_hash;   /* tlog.h */

typedef struct tg_db tg_db_t;

typedef enum tg_db_backend {
    TG_DB_FILE = 0,     /* the ledger directory + tables in memory */
    TG_DB_POSTGRES = 1, /* rows in one PostgreSQL database, shared by instances (SPEC §13) */
} tg_db_backend_t;

/* pg: where the database is and the bounds on talking to it. */
typedef struct tg_db_pg_opts {
    const char *url;            /* libpq conninfo or URI (copied at open; may hold a password) */
    uint32_t pool;              /* connections for claims and lookups, 1..256 */
    uint32_t timeout_ms;        /* one claim or lookup, waiting for a connection included */
    uint32_t claim_timeout_ms;  /* lease of an in-flight claim (key or nonce) */
    uint32_t commit_timeout_ms; /* one group commit, from BEGIN to COMMIT's answer */
} tg_db_pg_opts_t;

/* The transparency log (SPEC §12): off unless a log key is given. */
/* Descriptors the log holds for as long as the db is open, beyond the backend's own (serve
 * sizes its connection limit from these). file: the tlog directory, its checkpoint file, the
 * entries file and one hashes file per tree level (store/file/tlog_file.h), each opened once
 * and kept; pg: the integrator's connection, holding the log's advisory lock. */
#define TG_DB_LOG_FDS_FILE (3 + TG_TLOG_LEVELS)
#define TG_DB_LOG_FDS_PG 1
typedef struct tg_db_log_opts {
    const struct tg_note_signer *signer; /* the log key, named by the origin (--log-origin);
                                            copied at open, wiped at close; NULL = no log */
    uint32_t min_interval_ms;            /* --checkpoint-min-interval; 0 = 5 */
    uint32_t max_interval_ms;            /* --checkpoint-interval; 0 = 100 */
} tg_db_log_opts_t;

/* file: snapshots of the tables (snapshot.h, docs/LEDGER.md "Snapshots"). replay is the
 * start's replay callback with the db to restore into made explicit: the snapshot thread
 * applies records to a private set of tables with it, from its own thread (so it must touch
 * nothing but `into` and thread-safe state). every 0 = no snapshots written or loaded. */
typedef tg_err_t (*tg_db_snap_replay_fn)(void *ud, struct tg_db *into,
                                         const tg_ledger_record_t *rec);
typedef struct tg_db_snapshot_opts {
    uint64_t every; /* write one after this many durable records since the last */
    tg_db_snap_replay_fn replay;
    void *ud;
} tg_db_snapshot_opts_t;

typedef struct tg_db_opts {
    tg_db_backend_t backend;
    tg_store_opts_t keys;           /* idempotency keys and nonces: caps, retention, key length
                                       (pg: retention and key length only) */
    tg_store_opts_t receipts;       /* the receipt index: caps, retention (file only) */
    uint64_t limit_entries;         /* file: most (limit, key, window) totals held; 0 = 1,000,000 */
    uint64_t approval_entries;      /* file: most approvals held in memory; 0 = 100,000 */
    tg_ledger_opts_t ledger;        /* file: the ledger directory and its durability */
    tg_db_pg_opts_t pg;             /* pg */
    tg_db_log_opts_t log;           /* the transparency log (both backends) */
    tg_db_snapshot_opts_t snapshot; /* file only */
} tg_db_opts_t;

/* A decision record on its way to durability, and what it claims. Pointers are read
 * during the call only. */
typedef struct tg_db_record {
    uint8_t type; /* TG_LEDGER_TYPE_RECEIPT, _SILENCE or _REDEMPTION */
    const void *meta;
    size_t meta_len; /* 0..TG_LEDGER_META_MAX: the pipeline's record meta */
    const void *payload;
    size_t payload_len; /* 0..TG_LEDGER_PAYLOAD_MAX: the receipt or SILENCE record */
    /* The same facts meta holds, typed, for a backend that stores claims beside records: */
    const char *tenant;
    size_t tenant_len;
    const char *key; /* the idempotency key it completes; NULL when none */
    size_t key_len;
    const char *nonce; /* the nonce it consumed; NULL when none */
    size_t nonce_len;
    const char *exec_id; /* its executionId (indexed when type is RECEIPT; a redemption's
                            is the redeemed receipt's, never indexed) */
    size_t exec_id_len;
    const uint8_t *request_hash; /* 32 bytes */
    int status;                  /* the HTTP status the decision answered */
    int64_t at_ms;               /* when it was decided (the stamp retention counts from) */
    /* The approval this record is a step of (approval.h), as its state after the step (the
     * same state meta "a" holds); NULL when none. Its tenant is the record's
     * (TG_ERR_INVALID_ARG otherwise). Version 1 (an ESCALATE receipt) creates it; version
     * n > 1 needs the hold of version n - 1 (tg_db_approval_hold). */
    const struct tg_approval *approval;
    /* The record's transparency-log entry (SPEC §12): its receiptHash for a receipt, the
     * SHA-256 of its payload (canonical JSON) for every other type. NULL = the SHA-256 of
     * the payload, computed by the backend (wrong for a receipt: the pipeline always sets
     * it for receipts). */
    const uint8_t *entry;
} tg_db_record_t;

/* The append's answer: exactly once per accepted append, status TG_OK (durable as the
 * configured durability promises; *pos filled) or the backend's unavailability error
 * (tg_db_unavailable: not durable; *pos all zero). Runs on a backend thread, one at a time, in
 * record order; pos is valid during the call only. It must be short and must not block. */
typedef tg_ledger_done_fn tg_db_done_fn;

/* Rebuild callback for backends whose tables live in memory: called by tg_db_start for
 * every record, in order, before anything else can use the db. It reads the record's
 * meta and payload and calls tg_db_restore_key, tg_db_restore_nonce and
 * tg_db_index_receipt. A non-TG_OK return stops the start with that error. */
typedef tg_ledger_replay_fn tg_db_replay_fn;

/* Creates the db's tables (nothing is opened yet). Errors: TG_ERR_INVALID_ARG (NULL
 * out/opts), TG_ERR_CONFIG (an option out of range, or a backend not built in; diag says
 * which), TG_ERR_CRYPTO, TG_ERR_NOMEM. *out is NULL on error. Not thread-safe. */
tg_err_t tg_db_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;

/* Opens the record log and rebuilds what lives in memory: file: tg_ledger_open with the
 * ledger options (its errors, e.g. TG_ERR_NOT_FOUND with no_create), calling replay(ud, rec)
 * for every record; report (may be NULL) gets the ledger's recovery report. Once, after
 * tg_db_open. On error the db may only be closed. Not thread-safe. */
tg_err_t tg_db_start(tg_db_t *db, tg_db_replay_fn replay, void *ud, tg_ledger_recovery_t *report,
                     tg_diag_t *diag) TG_MUST_USE;

/* Stops the record log (every outstanding done is called first; they may still use the
 * claim functions) and frees everything. NULL-safe. Nothing else may run concurrently. */
void tg_db_close(tg_db_t *db);

/* ---- claims (SPEC §3.3 steps 5-6) ----
 * As tg_store_idem_begin and tg_store_nonce_use (store.h): the same results and errors. */
tg_err_t tg_db_claim_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                         size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                         tg_idem_result_t *res) TG_MUST_USE;
tg_err_t tg_db_claim_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                           size_t nonce_len, int64_t now_ms) TG_MUST_USE;

/* Undo a claim whose request ended with nothing durable (never after its record's append
 * reported TG_OK). As tg_store_idem_abort and tg_store_nonce_release. */
tg_err_t tg_db_release_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                           size_t key_len) TG_MUST_USE;
tg_err_t tg_db_release_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                             size_t nonce_len) TG_MUST_USE;

/* A hint (tg_receipts_has_room): whether the receipt index would take one more id of
 * id_len bytes for a tenant_len-byte tenant now. Never blocks. */
bool tg_db_receipt_room(tg_db_t *db, size_t tenant_len, size_t id_len);

/* ---- records (step 9) ---- */

/* Group-commit hints (tg_ledger_announce): the caller will probably append soon. Each
 * announce is followed by exactly one announce_end, before the caller's own append. */
void tg_db_announce(tg_db_t *db);
void tg_db_announce_end(tg_db_t *db);

/* Queues rec; done(ud, ...) follows exactly once on TG_OK (possibly before this returns),
 * never on error. Never blocks. Errors: TG_ERR_INVALID_ARG (bad type, NULL with a length),
 * TG_ERR_LIMIT (meta or payload over its cap), TG_ERR_LEDGER_UNHEALTHY (the log cannot make
 * records durable now), TG_ERR_OVERLOADED (queue full), TG_ERR_NOMEM. */
tg_err_t tg_db_append(tg_db_t *db, const tg_db_record_t *rec, tg_db_done_fn done,
                      void *ud) TG_MUST_USE;

/* Writes rec on the calling thread when there is no sync to share (file: durability none,
 * tg_ledger_append_now) and returns when it is as durable as the mode promises; *pos set on
 * TG_OK. Errors as tg_db_append, and TG_ERR_INVALID_ARG where the durability is not none. */
tg_err_t tg_db_append_now(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos) TG_MUST_USE;

/* ---- after the record is durable ---- */

/* The claim (tenant, key) is DONE with status, at *pos, stamped now_ms. As
 * tg_store_idem_complete: TG_OK, TG_ERR_NOT_FOUND (no claim held: a caller bug),
 * TG_ERR_INVALID_ARG. */
tg_err_t tg_db_complete_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                            size_t key_len, int status, const tg_ledger_pos_t *pos,
                            int64_t now_ms) TG_MUST_USE;

/* (tenant, id) -> *pos, stamped stamp_ms; also while rebuilding. As tg_receipts_insert: an
 * id live at another position is never repointed (TG_ERR_CONFLICT, *existing gets that
 * position), TG_ERR_LIMIT when full. */
tg_err_t tg_db_index_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                             int64_t now_ms, tg_ledger_pos_t *existing) TG_MUST_USE;

/* ---- lookups ---- */

/* (tenant, id) -> *pos, as tg_receipts_get: TG_OK, TG_ERR_NOT_FOUND, TG_ERR_INVALID_ARG. */
tg_err_t tg_db_find_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) TG_MUST_USE;

/* The record at *pos, re-verified (tg_ledger_read_at): resets and fills payload_out and
 * meta_out (either may be NULL). TG_ERR_NOT_FOUND, TG_ERR_LEDGER_CORRUPT, TG_ERR_IO, buffer
 * errors. May block for the disk or the network. */
tg_err_t tg_db_read(tg_db_t *db, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                    tg_buf_t *meta_out) TG_MUST_USE;

/* ---- rebuild (from the replay callback only) ----
 * As tg_store_idem_restore (later stamp wins) and tg_store_nonce_restore; receipts go
 * through tg_db_index_receipt. A backend that never replays never gets these calls. */
tg_err_t tg_db_restore_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                           size_t key_len, const tg_idem_entry_t *entry,
                           int64_t now_ms) TG_MUST_USE;
tg_err_t tg_db_restore_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                             size_t nonce_len, int64_t used_at_ms, int64_t now_ms) TG_MUST_USE;

/* ---- stateful limits (docs/POLICY.md "Limits", docs/DESIGN.md "Limit totals") ----
 *
 * A running total per (limit name, key, window start): the policy names the limit
 * (tg_policy_limit_key gives the key and the window), the pipeline reads, reserves and
 * releases, as it does with claims. The policyHash is not part of the entry: a reload keeps
 * the totals, and a limit whose definition changed under the same name keeps counting.
 *   read     tg_db_limit_total     the total before this request, to bind the frame (no lock)
 *   reserve  tg_db_limit_reserve   after a PERMIT: add the amount only if the total stays
 *                                  <= max (atomic per entry); else TG_ERR_LIMIT_EXCEEDED
 *                                  with the current total, and the pipeline re-decides
 *   release  tg_db_limit_release   the record never became durable: take the amount back
 *   rebuild  tg_db_limit_restore   from the replay callback: a durable record's contribution
 * A durable record is the truth for its contributions (record.h meta "l"): file: the replay
 * adds them back at start; pg: the reservation is its own statement (not inside the group
 * commit), so a crash between the reservation and the record over-counts: fail closed.
 * Totals and amounts are doubles (integers are exact up to 2^53: money in minor units).
 * Entries expire at window_start_s + window_s (swept by tg_db_tick). */
typedef struct tg_db_limit_ref {
    const char *limit; /* the limit's name (its bundle id), 1..TG_DB_LIMIT_NAME_MAX bytes */
    size_t limit_len;
    uint8_t key[32];        /* tg_policy_limit_key */
    int64_t window_start_s; /* Unix seconds */
    int64_t window_s;       /* 1..31 days: the entry is dropped from start + window_s on */
} tg_db_limit_ref_t;

#define TG_DB_LIMIT_NAME_MAX 128

/* The entry's total (0 when it has none) into *total. Errors: TG_ERR_INVALID_ARG,
 * tg_db_unavailable's error when the backend cannot answer. Never blocks on a disk. */
tg_err_t tg_db_limit_total(tg_db_t *db, const tg_db_limit_ref_t *ref, double *total) TG_MUST_USE;

/* Adds amount (finite, >= 0) to the entry when total + amount <= max: TG_OK and
 * *total_after; else TG_ERR_LIMIT_EXCEEDED, nothing added and *total_after = the current
 * total. TG_ERR_LIMIT: the table is full (file: --limit-entries; answer 503).
 * TG_ERR_INVALID_ARG, or the backend's unavailability error. Atomic per entry against
 * every other reserve and release, on every instance. */
tg_err_t tg_db_limit_reserve(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount, double max,
                             double *total_after) TG_MUST_USE;

/* Takes back a reservation whose record was never made durable (never after its
 * append reported TG_OK). The total never goes below 0. TG_OK also when the entry has
 * expired meanwhile. */
tg_err_t tg_db_limit_release(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount) TG_MUST_USE;

/* From the replay callback only: adds a durable record's contribution, unconditionally
 * (the record was permitted under the totals of its time); a contribution whose window has
 * ended by now_ms is skipped. TG_ERR_LIMIT when full. A backend that never replays never
 * gets this call. */
tg_err_t tg_db_limit_restore(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                             int64_t now_ms) TG_MUST_USE;

/* ---- approvals (SPEC §11.2, approval.h) ----
 *
 * An approval changes in numbered versions; each version is written by one record (its
 * rec->approval), durable with it, and never otherwise:
 *   read     tg_db_approval_get      (tenant, id) -> its newest durable state
 *   list     tg_db_approval_list     a tenant's approvals, newest first, by status at now
 *   hold     tg_db_approval_hold     the exclusive right to write the next version, with the
 *                                    current state; one holder per approval on every
 *                                    instance (TG_ERR_IN_FLIGHT to the others)
 *   write    tg_db_append            rec->approval = the state after, version = held + 1
 *   then     tg_db_approval_commit   after the append's TG_OK (from done too): the new state
 *                                    is what get answers here, and the hold is dropped
 *   or       tg_db_approval_release  nothing was written: the hold is dropped
 *   create   tg_db_append            an ESCALATE receipt with rec->approval version 1 (a
 *                                    fresh id: no hold), then tg_db_approval_commit
 *   timer    tg_db_approval_due      approvals whose stored status lags the clock (pending
 *                                    past expires_ms, approved past its consume window)
 *   rebuild  tg_db_approval_restore  from the replay callback (file): a record's meta "a"
 * file: a table in memory (at most opts.approval_entries), rebuilt at start from the
 * records' meta "a" (the highest version wins); the hold is a flag in memory.
 * pg: a row per approval (schema v4, tg_approvals: the document and its indexed columns)
 * written in the record's group-commit transaction, fenced by the hold (a lease of
 * claim_timeout_ms, kept by the backend by (tenant, id)): a record whose fence fails is
 * not committed and its done reports the unavailability error.
 * Terminal approvals (denied, expired, consumed) are dropped retention_ms (opts.keys) after
 * they resolved, by tg_db_tick. */

/* *out = the newest durable state of (tenant, id). TG_ERR_NOT_FOUND (none: unknown, another
 * tenant's, or dropped after retention), TG_ERR_INVALID_ARG, the unavailability error. */
tg_err_t tg_db_approval_get(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, struct tg_approval *out) TG_MUST_USE;

/* Up to max of the tenant's approvals whose tg_approval_status_at(now_ms) is status (or any
 * status when all), newest created first, into out[0..*n). TG_ERR_INVALID_ARG, the
 * unavailability error. */
tg_err_t tg_db_approval_list(tg_db_t *db, const char *tenant, size_t tenant_len, bool all,
                             int status, int64_t now_ms, struct tg_approval *out, size_t max,
                             size_t *n) TG_MUST_USE;

/* Takes the hold on (tenant, id) and fills *cur with its newest durable state. TG_OK;
 * TG_ERR_NOT_FOUND; TG_ERR_IN_FLIGHT (another holder: a review, a resume or the timer is
 * writing it; retry shortly); TG_ERR_INVALID_ARG; the unavailability error. */
tg_err_t tg_db_approval_hold(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, int64_t now_ms, struct tg_approval *cur) TG_MUST_USE;

/* Drops a hold whose next version was never written. TG_OK also when none is held. */
tg_err_t tg_db_approval_release(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len) TG_MUST_USE;

/* After the append of the record carrying a (TG_OK): a becomes what get answers here and
 * the hold (if any) is dropped. Never blocks. TG_ERR_LIMIT (file: the table is full for a
 * new approval: it stays durable in the ledger and is restored at the next start; the
 * caller logs it), TG_ERR_INVALID_ARG. */
tg_err_t tg_db_approval_commit(tg_db_t *db, const struct tg_approval *a,
                               int64_t now_ms) TG_MUST_USE;

/* Whether one more approval fits (file: approval_entries; pg: always). Never blocks. */
bool tg_db_approval_room(tg_db_t *db);

/* From the replay callback only: a durable record's approval state (its meta "a"); the
 * higher version of the same (tenant, id) wins. TG_ERR_LIMIT when full. */
tg_err_t tg_db_approval_restore(tg_db_t *db, const struct tg_approval *a,
                                int64_t now_ms) TG_MUST_USE;

/* Which approval is due for the timer's expiry step. */
typedef struct tg_db_approval_ref {
    char id[38];
    char tenant[65];
} tg_db_approval_ref_t;

/* Up to max approvals (any tenant) whose stored status is pending or approved but whose
 * tg_approval_status_at(now_ms) is expired, into out[0..*n), and not held here. The timer
 * holds each, writes its expiry record and commits; on pg several instances may list the
 * same one, and the hold lets one write it. TG_ERR_INVALID_ARG, the unavailability error. */
tg_err_t tg_db_approval_due(tg_db_t *db, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                            size_t *n) TG_MUST_USE;

/* ---- the transparency log (SPEC §12, docs/TLOG.md) ----
 *
 * Every record is a leaf of one RFC 6962 Merkle tree, in log order; its entry is
 * tg_db_record_t.entry (32 bytes). The backend keeps the tree's stored hashes (tlog.h: every
 * complete subtree's hash, by level and index) and the newest signed checkpoint, and signs a
 * new checkpoint (C2SP signed note, key opts.log.signer, origin = the key's name) over the
 * records it has integrated, at most every min_interval_ms and within max_interval_ms of
 * growth. A checkpoint is *published* (what these functions answer) only once it is
 * durable, and it covers only durable records:
 *   file  leaf index = seq - 1. The ledger feeds each record's entry once its fdatasync
 *         returned (ledger.h, tg_ledger_feed_fn; durability batch: at its periodic sync,
 *         none: the log makes the writer sync at most every max_interval_ms); the stored
 *         hashes are derived files in <ledger dir>/tlog/ (rewritten from the replay at start,
 *         never synced), the newest checkpoint a durable file there (two alternating
 *         checksummed slots, one fdatasync per checkpoint). At start the tree rebuilt from
 *         the replay (tg_db_log_restore) must reproduce the stored checkpoint (same origin,
 *         size ≤ the tree's, same root at that size, valid signature by the log key), or
 *         tg_db_start fails with TG_ERR_LOG_INCONSISTENT (a truncated, altered or
 *         reordered ledger, or another log key): a log never signs two inconsistent
 *         checkpoints. An empty log publishes the size-0 checkpoint at start.
 *   pg    one log for the deployment: leaf index = the record's log_index, assigned in
 *         commit order by one integrator at a time (the instance holding the log's advisory
 *         lock), which writes the leaf indices, the stored hashes and the signed checkpoint
 *         in one transaction; every instance serves the checkpoint and proofs from the
 *         rows. The integrator checks the stored checkpoint against the stored hashes when
 *         it takes over (TG_ERR_LOG_INCONSISTENT: it refuses to sign, logs, and the log
 *         stops growing; records still commit).
 * Every function below answers TG_ERR_LOG_DISABLED when opts.log.signer was NULL.
 * Thread safety: as the rest of the db (after tg_db_start); never blocks on a disk sync. */

/* From the replay callback only (file), in record order: the entry of the record just
 * replayed (its seq must be the log's size + 1; TG_ERR_INVALID_ARG otherwise). Without a
 * log, TG_OK and nothing done (so the caller needs no test). */
tg_err_t tg_db_log_restore(tg_db_t *db, uint64_t seq, const uint8_t entry[32]) TG_MUST_USE;

/* The newest published checkpoint: its signed note text appended to note (may be NULL) and
 * its parsed body in *cp (may be NULL; cp->ext is NULL). TG_ERR_LOG_DISABLED, the
 * unavailability error (pg), tg_buf errors; pg also TG_ERR_LOG_PENDING (no integrator has
 * signed yet: a new database, for the moment of the first takeover) and
 * TG_ERR_LOG_INCONSISTENT (the stored checkpoint is not this instance's log key's). */
tg_err_t tg_db_log_checkpoint(tg_db_t *db, tg_buf_t *note, struct tg_checkpoint *cp) TG_MUST_USE;

/* n stored hashes of tree level `level`, indices index .. index+n-1, into out[0..n); all
 * must be complete in the published tree (TG_ERR_NOT_FOUND otherwise). n ≤ 256. For tiles
 * and proofs. TG_ERR_INVALID_ARG, TG_ERR_IO, the unavailability error. */
tg_err_t tg_db_log_hashes(tg_db_t *db, unsigned level, uint64_t index, size_t n,
                          uint8_t (*out)[32]) TG_MUST_USE;

/* A stored hash's place in the tree, for tg_db_log_hashes_at. */
typedef struct tg_db_log_at {
    uint64_t index;
    unsigned level;
} tg_db_log_at_t;
#define TG_DB_LOG_AT_MAX 256

/* The stored hashes at at[0..n) (any places, any order) into out[0..n), each complete in
 * the published tree (TG_ERR_NOT_FOUND otherwise); n ≤ TG_DB_LOG_AT_MAX. One round trip on
 * PostgreSQL, where a proof read hash by hash costs one query per hash. Errors as
 * tg_db_log_hashes. */
tg_err_t tg_db_log_hashes_at(tg_db_t *db, const tg_db_log_at_t *at, size_t n,
                             uint8_t (*out)[32]) TG_MUST_USE;

/* RFC 9162 inclusion (leaf in a tree of `size`) and consistency (old to size) proofs over
 * the published tree's stored hashes, as tg_tlog_inclusion_proof and
 * tg_tlog_consistency_proof compute them (their argument rules and errors), with every hash
 * they read fetched in one tg_db_log_hashes_at: the places a generator reads depend on the
 * sizes and indices only, so a first pass with a recording reader learns them. size must
 * not exceed the published tree's (TG_ERR_NOT_FOUND). Errors also tg_db_log_hashes_at's. */
tg_err_t tg_db_log_inclusion_proof(tg_db_t *db, uint64_t leaf, uint64_t size,
                                   struct tg_tlog_hash *proof, size_t *len) TG_MUST_USE;
tg_err_t tg_db_log_consistency_proof(tg_db_t *db, uint64_t old, uint64_t size,
                                     struct tg_tlog_hash *proof, size_t *len) TG_MUST_USE;

/* n entries (32 bytes each) from leaf `index` on, all in the published tree
 * (TG_ERR_NOT_FOUND otherwise), into out[0..n). n ≤ 256. For entry tiles. */
tg_err_t tg_db_log_entries(tg_db_t *db, uint64_t index, size_t n, uint8_t (*out)[32]) TG_MUST_USE;

/* The leaf index of the record at *pos. file: seq - 1 (TG_ERR_LOG_PENDING while it is not
 * in the published tree); pg: its log_index (TG_ERR_LOG_PENDING while unassigned or not yet
 * published). TG_ERR_NOT_FOUND (no such record), the unavailability error. */
tg_err_t tg_db_log_leaf(tg_db_t *db, const tg_ledger_pos_t *pos, uint64_t *leaf) TG_MUST_USE;

/* Called once when a published checkpoint covers the record at the position given to
 * tg_db_log_wait (status TG_OK, *leaf its index), or when it will not in time (status
 * TG_ERR_LOG_PENDING after timeout_ms; the unavailability error). Runs on a backend thread;
 * must be short and must not block (resume a connection and return). */
typedef void (*tg_db_log_wait_fn)(void *ud, tg_err_t status, uint64_t leaf);

/* Registers fn for the record at *pos (already durable: after its append's done). fn may run
 * before this returns. TG_ERR_LOG_DISABLED, TG_ERR_LIMIT (too many waiters: answer 503),
 * TG_ERR_INVALID_ARG; fn is never called on an error. For batch-signed receipts. */
tg_err_t tg_db_log_wait(tg_db_t *db, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                        tg_db_log_wait_fn fn, void *ud) TG_MUST_USE;

/* Offline, file backend (`ledger verify`, `log audit DIR`): the newest checkpoint note stored
 * in <ledger_dir>/tlog (the two-slot file above), read without opening anything for writing
 * or changing anything, so it may run beside a daemon. Its signature is not checked here.
 * note gets the note text (NUL-terminated, at most cap - 1 bytes), *len its length; *found
 * false when there is none (no tlog directory or file, empty slots). Errors:
 * TG_ERR_LOG_INCONSISTENT (both slots damaged), TG_ERR_IO, TG_ERR_BUFFER_TOO_SMALL, diag
 * says which. Thread-safe. */
tg_err_t tg_db_log_stored_checkpoint(const char *ledger_dir, char *note, size_t cap, size_t *len,
                                     bool *found, tg_diag_t *diag) TG_MUST_USE;

/* ---- upkeep and observation ---- */

/* Periodic upkeep, from one thread (serve: every 100 ms): reclaims expired entries in
 * small doses and runs the record log's watchdogs (file: the ledger's identity check and
 * its stall watch with stall_ms, 0 = off; ledger.h). Never waits behind a write. */
void tg_db_tick(tg_db_t *db, int64_t now_ms, uint32_t stall_ms);

/* Whether records can be made durable now, and when not, why (one sentence without paths
 * into why[0..why_len), "" while healthy; tg_ledger_health). Never blocks. */
bool tg_db_health(tg_db_t *db, char *why, size_t why_len);

typedef struct tg_db_stats {
    tg_store_stats_t keys;      /* idempotency keys and nonces */
    tg_store_stats_t receipts;  /* the receipt index */
    tg_ledger_stats_t records;  /* the record log's counters (file: the ledger's; ledger.h) */
    tg_store_stats_t limits;    /* limit totals (file: entries, capacity, full refusals) */
    tg_store_stats_t approvals; /* approvals held (file: entries, capacity, full refusals) */
    struct {
        bool enabled;
        uint64_t size;        /* the published checkpoint's tree size */
        uint64_t integrated;  /* leaves hashed into the tree (≥ size) */
        uint64_t checkpoints; /* checkpoints signed and published since start */
        uint64_t lag_ms_last; /* the last checkpoint: ms from its newest record's
                                 durability (file) or commit (pg) to its publication */
        uint64_t lag_hist[TG_LEDGER_FSYNC_BUCKETS]; /* that lag in µs, bounds as fsync's */
        uint64_t lag_sum_us; /* the sum of the lags lag_hist counts (its _sum) */
        uint64_t failures;   /* checkpoints that could not be made durable */
        uint64_t waiters;    /* tg_db_log_wait callers waiting now */
        bool integrator;     /* pg: this instance integrates now (file: true) */
        bool inconsistent;   /* pg: the stored log failed this instance's checks
                                (TG_ERR_LOG_INCONSISTENT): it neither signs nor serves
                                checkpoints; records still commit */
    } log;
} tg_db_stats_t;

/* Fills *out (all zero for a NULL db). Thread-safe. */
void tg_db_stats(tg_db_t *db, tg_db_stats_t *out);

/* The error a request gets when this backend cannot make its record durable or answer a
 * claim: TG_ERR_LEDGER_UNHEALTHY (file: 503 ledger_unavailable) or TG_ERR_STORE_UNAVAILABLE
 * (pg: 503 store_unavailable, SPEC §13). Also what done reports for a record that failed,
 * and what claims and lookups return when the database cannot answer within its bound.
 * TG_ERR_LEDGER_UNHEALTHY for NULL. Thread-safe. */
tg_err_t tg_db_unavailable(const tg_db_t *db);

#endif /* TRIGGUARD_DB_H */
