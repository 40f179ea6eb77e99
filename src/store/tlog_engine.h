/* tlog_engine.h — the transparency log's integrator (db.h "transparency log", SPEC §12),
 * shared by both backends: it owns the compact tree (tg_tlog_range_t), the log key and the
 * newest published checkpoint, and runs one thread that turns pushed entries into signed
 * checkpoints. What it does not own is storage: a backend table (tg_tle_backend_t) makes a
 * step durable (file: hash files + checkpoint slot; pg: one transaction) and reads stored
 * hashes back (proofs, old roots). Internal to src/store; not a public header.
 *
 * Life cycle (one owner):
 *   tg_tle_create
 *   restore, single-threaded:  tg_tle_restore_leaf (file: one per replayed record) or
 *                              tg_tle_restore_range (pg: a whole range at takeover), then
 *                              tg_tle_adopt (the stored checkpoint, if any)
 *   tg_tle_start               the thread; from now on push, wait, published, stats
 *                              are thread-safe
 *   tg_tle_destroy             integrates what is pending, signs and commits a last
 *                              checkpoint, fails the remaining waiters, joins, wipes the key
 *
 * The thread: if the tree is larger than the newest published checkpoint (or none was
 * published: the size-0 checkpoint is a valid one) one is signed and committed at once (by
 * tg_tle_start itself). Then the thread waits for pushed entries, keeps at least min_interval_ms
 * between two checkpoints (collecting meanwhile), integrates everything pending, signs one
 * checkpoint over the new size, asks the backend to commit the step, and only then publishes it and
 * calls the waiters it covers. A failed commit publishes nothing: the tree is rolled back to the
 * published one, the entries stay pending, the failure is counted, and the step is retried
 * (with whatever arrived meanwhile) after max_interval_ms.
 *
 * Errors: the one enum (err.h). TG_ERR_INVALID_ARG (a caller bug: leaves out of order, a
 * restore after start, ...), TG_ERR_LIMIT (too many waiters), TG_ERR_NOMEM,
 * TG_ERR_LOG_PENDING, TG_ERR_LOG_INCONSISTENT, and whatever the backend returns.
 */
#ifndef TG_STORE_TLOG_ENGINE_H
#define TG_STORE_TLOG_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/ledger.h" /* TG_LEDGER_FSYNC_BUCKETS, tg_ledger_fsync_bounds_us */
#include "trigguard/note.h"
#include "trigguard/tlog.h"

typedef struct tg_tle tg_tle_t;

/* A signed checkpoint note: body (TG_CHECKPOINT_BODY_MAX) + blank line + one signature line. */
#define TG_TLE_NOTE_MAX (TG_CHECKPOINT_BODY_MAX + 1 + TG_NOTE_SIG_LINE_MAX)

/* One stored hash a step completed (what tg_tlog_range_append reports). */
typedef struct tg_tle_hash {
    unsigned level;
    uint64_t index;
    tg_tlog_hash_t hash;
} tg_tle_hash_t;

/* What one checkpoint adds: leaves [old_size, new_size), their entries and tags
 * (entries[i], tags[i] for leaf old_size + i; n = new_size - old_size, may be 0 for the
 * first checkpoint of an unchanged tree), every stored hash the appends completed (lowest
 * level first within each leaf), the new root and the signed note over new_size. Valid
 * during the commit call only. */
typedef struct tg_tle_step {
    uint64_t old_size;
    uint64_t new_size;
    const uint8_t (*entries)[32];
    /* the opaque u64 pushed with each entry (file: seq; pg: tg_records.seq) */
    const uint64_t *tags;
    const tg_tle_hash_t *hashes;
    size_t n_hashes;
    tg_tlog_hash_t root;
    const char *note; /* the signed checkpoint note, note_len bytes (NUL-terminated) */
    size_t note_len;
} tg_tle_step_t;

/* The backend. They run on the engine thread (commit, sync) or the restore/reader threads
 * (read), never under the engine's locks.
 *   commit  stores the step: when it returns TG_OK, a restart must find the new checkpoint
 *           (after sync, if there is one) and be able to rebuild the stored hashes; on any
 *           error nothing of the step may count as published (file: the checkpoint slot was
 *           not written; pg: the transaction rolled back).
 *   sync    optional: makes the last commit durable. With it, the engine publishes a step
 *           and answers the step's waiters first, then syncs, before its next step. A
 *           checkpoint is a deterministic function of records already durable (their sync
 *           returned before it was signed; Ed25519 signatures are deterministic), so a crash
 *           between publication and this sync can lose the stored copy of the newest
 *           checkpoint, never a checkpoint that disagrees with the ledger: the next start
 *           adopts the older stored one and signs the same tree again (docs/TLOG.md).
 *   read    a stored hash of the durable tree (tg_tlog_read_fn): used by tg_tle_adopt for the
 *           root of the stored checkpoint's size. */
typedef struct tg_tle_backend {
    tg_err_t (*commit)(void *ctx, const tg_tle_step_t *step);
    tg_tlog_read_fn read;
    void *ctx;
    tg_err_t (*sync)(void *ctx); /* NULL: commit is durable by itself (pg) */
} tg_tle_backend_t;

typedef struct tg_tle_opts {
    const tg_note_signer_t *signer; /* required; copied (wiped at destroy); origin = its name */
    uint32_t min_interval_ms;       /* 0 = 5 */
    uint32_t max_interval_ms;       /* 0 = 100: the retry delay after a failed commit */
    uint32_t max_waiters;           /* 0 = 65536; tg_tle_wait answers TG_ERR_LIMIT beyond */
} tg_tle_opts_t;

/* Called once per tg_tle_wait: TG_OK with the leaf once a published checkpoint covers it,
 * TG_ERR_LOG_PENDING at the timeout or at destroy. From the engine thread (or the caller of
 * tg_tle_wait when the leaf is already covered or timeout_ms is 0); short, never blocks.
 * The same shape as db.h's tg_db_log_wait_fn. */
typedef void (*tg_tle_wait_fn)(void *ud, tg_err_t status, uint64_t leaf);

typedef struct tg_tle_stats {
    uint64_t size;        /* the published checkpoint's tree size */
    uint64_t integrated;  /* leaves hashed into the tree (≥ size; more while a commit runs) */
    uint64_t pushed;      /* leaves known: restored + pushed (≥ integrated) */
    uint64_t checkpoints; /* checkpoints signed and published since start */
    uint64_t lag_ms_last; /* the last checkpoint: ms from the push of its newest entry to its
                             publication (0 for one that added nothing) */
    uint64_t lag_hist[TG_LEDGER_FSYNC_BUCKETS]; /* that lag in µs, tg_ledger_fsync_bounds_us */
    uint64_t lag_sum_us;                        /* the sum of those lags (a histogram's _sum) */
    uint64_t failures;                          /* commits that failed */
    uint64_t waiters;                           /* waiting now */
} tg_tle_stats_t;

/* A new engine with an empty tree and no published checkpoint. The backend table is copied.
 * TG_ERR_INVALID_ARG (no signer, no commit or read), TG_ERR_NOMEM. */
tg_err_t tg_tle_create(tg_tle_t **out, const tg_tle_opts_t *opts, const tg_tle_backend_t *be,
                       tg_diag_t *diag) TG_MUST_USE;

/* ---- restore: single-threaded, before tg_tle_start ---- */

/* Appends one leaf (its 32-byte entry) to the tree; every stored hash it completes goes to
 * store (may be NULL) first, as tg_tlog_range_append reports them (a store error leaves the
 * tree unchanged and is returned). TG_ERR_INVALID_ARG after start or with pushed entries. */
tg_err_t tg_tle_restore_leaf(tg_tle_t *e, const uint8_t entry[32], tg_tlog_store_fn store,
                             void *ctx) TG_MUST_USE;

/* Replaces the tree with r (pg: the range rebuilt from stored rows at takeover).
 * TG_ERR_INVALID_ARG after start or with pushed entries. */
tg_err_t tg_tle_restore_range(tg_tle_t *e, const tg_tlog_range_t *r) TG_MUST_USE;

/* The tree's size now (restored + integrated; not counting pending pushes). */
uint64_t tg_tle_size(tg_tle_t *e);

/* Adopts the stored checkpoint note[0..len) as the published one, after checking that the
 * tree reproduces it: its signature by the engine's own key, its origin = the key's name,
 * its size ≤ the tree's, and the root of that size (tg_tlog_subtree_hash through the
 * backend's read) equal to its root. Any failure: TG_ERR_LOG_INCONSISTENT with a diag that
 * says which (a read error is passed on as is). TG_ERR_INVALID_ARG after start. */
tg_err_t tg_tle_adopt(tg_tle_t *e, const char *note, size_t len, tg_diag_t *diag) TG_MUST_USE;

/* Starts the thread. When a checkpoint is due at once (see the top) it is signed and
 * committed here first, on the caller's thread, so that a start returns with a published
 * checkpoint (a failed commit is counted and retried by the thread; the start goes on).
 * TG_ERR_INVALID_ARG when already started, TG_ERR_INTERNAL when the thread cannot start. */
tg_err_t tg_tle_start(tg_tle_t *e, tg_diag_t *diag) TG_MUST_USE;

/* ---- running: thread-safe ---- */

/* Queues the entries of leaves [first_leaf, first_leaf + n) with their tags (tags may be
 * NULL: all 0). Leaves arrive in order without gaps: first_leaf must be the size of the tree
 * plus what is pending (TG_ERR_INVALID_ARG otherwise: a bug). Never blocks on the engine's
 * work and never drops (the pending vector grows; TG_ERR_NOMEM only when memory runs out).
 * May be called before start (the entries wait). */
tg_err_t tg_tle_push(tg_tle_t *e, uint64_t first_leaf, const uint8_t (*entries)[32],
                     const uint64_t *tags, size_t n) TG_MUST_USE;

/* The newest published checkpoint: its signed note appended to note (may be NULL), its body
 * in *cp (may be NULL; cp->ext NULL). TG_ERR_LOG_PENDING when none has been published yet,
 * tg_buf errors. */
tg_err_t tg_tle_published(tg_tle_t *e, tg_buf_t *note, tg_checkpoint_t *cp) TG_MUST_USE;

/* The published tree size (0 when none), cheaply. */
uint64_t tg_tle_published_size(tg_tle_t *e);

/* Calls fn(ud, TG_OK, leaf) once a published checkpoint covers leaf (at once, on this
 * thread, if one already does), or fn(ud, TG_ERR_LOG_PENDING, leaf) after timeout_ms (or at
 * destroy). TG_ERR_LIMIT (max_waiters waiting), TG_ERR_INVALID_ARG (fn NULL, or the engine
 * is not running), TG_ERR_NOMEM; fn is never called when this returns an error. */
tg_err_t tg_tle_wait(tg_tle_t *e, uint64_t leaf, uint32_t timeout_ms, tg_tle_wait_fn fn,
                     void *ud) TG_MUST_USE;

void tg_tle_stats(tg_tle_t *e, tg_tle_stats_t *out);

/* See the top. NULL is a no-op. Not concurrently with any other call. */
void tg_tle_destroy(tg_tle_t *e);

#endif /* TG_STORE_TLOG_ENGINE_H */
