/* ledger.h — the receipt ledger: append-only, hash-chained segment files, group commit.
 *
 * ## Why this shape
 * Every receipt trigguard signs is audit evidence, so the ledger is a plain append-only log
 * that an independent program can check with nothing but SHA-256: each record names its
 * sequence number and the hash of the record before it, so removing, reordering or editing
 * any record breaks the chain from that point on. One writer thread owns the files; request
 * threads hand it records through a bounded queue and are told (done callback) when their
 * record is durable. The writer takes everything queued, writes it with one pwrite and makes
 * it durable with one fdatasync (group commit), so one disk flush serves many requests.
 *
 * ## Files
 * A ledger is a directory holding segment files `ledger-NNNNNN.tgl` (decimal segment number,
 * at least 6 digits, zero padded, starting at 000001, or at a pruned ledger's anchor segment,
 * and consecutive) and a lock file
 * `ledger.lock` (flock, one writer process per directory). Other files are ignored, except
 * that a non-canonical `ledger-*.tgl` name counts as damage. A
 * segment is a concatenation of records with no file header. The first record of the ledger
 * (segment 1) has seq 1 and prev_hash all zeros; the first record of a later segment chains
 * to the last record of the previous segment exactly as if the files were one stream.
 *
 * ## Record layout (format version 2; all integers little-endian, no padding)
 *
 *   offset      size  field
 *   0           4     magic        "TGLR" (0x54 0x47 0x4C 0x52)
 *   4           1     version      2 (1 is still read, see below)
 *   5           1     type         1 = signed receipt (canonical receipt JSON, SPEC §5),
 *                                  2 = SILENCE decision record (JSON, unsigned),
 *                                  3 = redemption of a PERMIT receipt (JSON, unsigned;
 *                                  record.h; written since issue 20: a build without
 *                                  it refuses such a ledger as corrupt, fail closed);
 *                                  every other value is invalid in versions 1 and 2
 *   6           2     flags        u16, must be 0 (reserved)
 *   8           8     seq          u64, 1 for the first record, then exactly +1
 *   16          32    prev_hash    record_hash of the previous record (zeros for seq 1)
 *   48          4     meta_len     u32, 0 .. 16384 (TG_LEDGER_META_MAX)
 *   52          4     payload_len  u32, 0 .. 65536 (TG_LEDGER_PAYLOAD_MAX)
 *   56          4     header_check first 4 bytes of SHA-256(bytes 0..55 of this record)
 *   60          M     meta         M = meta_len opaque bytes (owned by the daemon)
 *   60+M        P     payload      P = payload_len bytes
 *   60+M+P      32    record_hash  SHA-256(bytes 0 .. 59 ‖ SHA-256(meta ‖ payload)): the
 *                                  60 header bytes followed by the 32-byte body digest
 *
 *   record length = 92 + M + P. The record_hash is both the checksum and the chain link:
 *   record n's prev_hash = record n-1's record_hash. The "head hash" is the record_hash of the
 *   last record (32 zero bytes for an empty ledger).
 *
 * Version 1 records (written by earlier builds) differ only in the version byte and in
 * record_hash = SHA-256(bytes 0 .. 60+M+P-1). Readers accept both, record by record, so an
 * existing ledger keeps working and new records chain onto it. Version 2 exists for speed:
 * the body digest does not depend on the chain, so appending threads compute it before the
 * write lock and only two SHA-256 compressions per record remain in chain order.
 *
 * header_check lets a reader tell a torn write (a record cut short at the end of the file)
 * from a damaged length field: a header is only trusted once its check matches.
 *
 * ## Recovery rules (tg_ledger_open)
 * Every segment is scanned in order; every record must be complete and valid (magic, version,
 * type, flags, header_check, lengths within the caps, seq = previous + 1, prev_hash = previous
 * record_hash, record_hash). Only at the end of the LAST segment, the bytes after the last
 * valid record form a *torn tail* (dropped by truncation and reported) when they are
 *   (a) all zero bytes (a file extended without its data after a power loss), or
 *   (b) fewer than 60 bytes starting with a prefix of the magic, or
 *   (c) a complete, fully valid header (including seq and prev_hash) whose record extends
 *       past the end of the file.
 * Anything else, including a complete final record whose record_hash does not match (a
 * flipped bit is damage, not a torn write), is TG_ERR_LEDGER_CORRUPT and the ledger refuses
 * to open; the diag names the segment file, the sequence number and the byte offset.
 * A missing or extra segment number, an empty segment that is not the last one, or a ledger
 * whose first record is not seq 1 are corruption too, unless the directory holds a valid
 * ledger.anchor (anchor.h, written by `trigguard ledger archive`): the scan then starts at
 * the anchor's segment, its first record must be the anchor's seq chained to the anchor's
 * hash, and segments numbered below the anchor's are ignored. A damaged anchor, or one the
 * first kept record does not chain to, is corruption (the signature is verify's to check).
 *
 * ## Durability modes
 *   FSYNC (default): done(TG_OK) only after fdatasync covered the record. Loss window: none.
 *   BATCH: done(TG_OK) after the write() of the batch; fdatasync at most every
 *          batch_interval_ms. A process crash loses nothing acknowledged (the page cache
 *          survives); a power failure or kernel crash can lose the records acknowledged in
 *          the last batch_interval_ms.
 *   NONE:  done(TG_OK) after write(); fdatasync only at rotation and close. A process crash
 *          loses nothing; a power failure can lose everything since the last rotation.
 *
 * ## Failure
 * A failed or short pwrite, or a failed fdatasync/fsync (EIO, ENOSPC, ...), makes the ledger
 * unhealthy: the batch's done() get TG_ERR_LEDGER_UNHEALTHY, the segment is truncated back to
 * the end of the last acknowledged record, every queued and later append fails fast with
 * TG_ERR_LEDGER_UNHEALTHY, and the writer retries recovery (truncate + fdatasync of the
 * segment, plus writing and syncing a 4 KiB probe file `ledger.probe`) every retry_ms, or on
 * tg_ledger_try_recover(). Nothing is ever acknowledged that is not durable per the mode.
 *
 * ## Identity: the files must stay the ones open() opened
 * The directory, its lock file and the active segment are checked against what the ledger
 * holds open: the directory's path must still name the directory open() opened, and the
 * names ledger.lock and the active segment's must still name the open lock file and segment
 * (same device and inode; the segment must still have a link). Deleting, moving or replacing
 * any of them while the ledger runs would otherwise go unnoticed: appends would land in
 * unlinked files, and a restart would create an empty ledger in their place. In FSYNC and
 * BATCH mode every batch is checked after its write (and sync) and before it is
 * acknowledged, so a deletion racing a batch fails the batch; in NONE mode every append
 * checks the segment's link count (one fstat) and the whole identity at most every 100 ms;
 * tg_ledger_check_identity() checks it on request (the daemon's tick, so an idle ledger
 * notices too). A broken identity makes the ledger unhealthy for good (no recovery attempt
 * succeeds; a restart is needed), is logged once (`ledger_identity_lost`) and counted
 * (tg_ledger_stats_t.identity_lost). To keep a restart from starting an empty ledger, the
 * ledger then recreates the directory at its path if it is missing (0700), writes its
 * durable head there as ledger.head and takes ledger.lock there: a start that finds
 * ledger.head (or a ledger.probe) but no segment file refuses (TG_ERR_LEDGER_CORRUPT), and a
 * second process cannot lock the directory while this one runs.
 *
 * ## Rotation
 * Before a record that would make the active segment exceed segment_max_bytes (and the
 * segment is not empty), the writer fdatasyncs and closes the segment, creates the next one
 * (O_EXCL), and fsyncs the directory. A record larger than the limit gets a segment alone.
 *
 * Thread safety: tg_ledger_append/append_sync/healthy/stats/read_at/try_recover may be
 * called from any number of threads concurrently. open and close are not concurrent with
 * anything else on the same ledger. done() callbacks run on the ledger's completion thread
 * (one thread, so one at a time, in sequence order), never on the writer: the next batch's
 * write and fdatasync do not wait for the last batch's callbacks.
 */
#ifndef TRIGGUARD_LEDGER_H
#define TRIGGUARD_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"

#define TG_LEDGER_MAGIC "TGLR"
#define TG_LEDGER_FORMAT_VERSION 2     /* written */
#define TG_LEDGER_FORMAT_VERSION_MIN 1 /* oldest still read */
#define TG_LEDGER_HEADER_SIZE 60
#define TG_LEDGER_HASH_SIZE 32
#define TG_LEDGER_META_MAX 16384 /* 1024 before approvals (meta "a", record.h) */
#define TG_LEDGER_PAYLOAD_MAX 65536
#define TG_LEDGER_RECORD_OVERHEAD (TG_LEDGER_HEADER_SIZE + TG_LEDGER_HASH_SIZE) /* 92 */
#define TG_LEDGER_RECORD_MAX                                                                       \
    (TG_LEDGER_RECORD_OVERHEAD + TG_LEDGER_META_MAX + TG_LEDGER_PAYLOAD_MAX)

#define TG_LEDGER_TYPE_RECEIPT 1
#define TG_LEDGER_TYPE_SILENCE 2
#define TG_LEDGER_TYPE_REDEMPTION 3 /* a receipt redeemed by an executor (record.h) */
#define TG_LEDGER_TYPE_APPROVAL 4   /* a review or expiry of an approval (record.h, SPEC §11.2) */

typedef enum tg_durability {
    TG_DURABILITY_FSYNC = 0, /* default: acknowledged = on disk */
    TG_DURABILITY_BATCH = 1, /* acknowledged = written; fdatasync every batch_interval_ms */
    TG_DURABILITY_NONE = 2   /* acknowledged = written; fdatasync at rotation/close only */
} tg_durability_t;

/* "fsync" / "batch" / "none"; "unknown" for other values. Static text. */
const char *tg_durability_name(tg_durability_t d);

/* Parses "fsync" / "batch" / "none" (exact, lowercase). TG_ERR_INVALID_ARG otherwise. */
tg_err_t tg_durability_parse(tg_durability_t *out, const char *s) TG_MUST_USE;

#define TG_LEDGER_RETRY_NEVER UINT32_MAX /* retry_ms: only tg_ledger_try_recover() recovers */

/* Descriptors, for a process that must never run out of them (serve sizes its connection
 * limit from these). An open ledger holds TG_LEDGER_FDS_HELD for as long as it is open: the
 * directory, the lock file, the active segment and ledger.head. Appending opens at most
 * TG_LEDGER_FDS_TRANSIENT more at any one moment: a rotation's new segment before the old
 * one is closed (on the writer, or on the appending thread with TG_DURABILITY_NONE) and, on
 * the writer meanwhile, the dup of a background flush or the recovery probe file. Each
 * tg_ledger_read_at in progress opens TG_LEDGER_FDS_PER_READ (its segment). tg_ledger_open
 * opens a few more while it replays, all closed before it returns. */
#define TG_LEDGER_FDS_HELD 4
#define TG_LEDGER_FDS_TRANSIENT 2
#define TG_LEDGER_FDS_PER_READ 1

/* The transparency log's feed (db.h "transparency log", SPEC §12): the log entries of
 * records [first_seq, first_seq + n), entries[i] for seq first_seq + i, once an fdatasync
 * covering them has returned. Every record is fed exactly once, in sequence order, never
 * concurrently with itself, and never before its sync: FSYNC after each batch's sync (before
 * the batch's done callbacks are handed on), BATCH at its periodic sync, NONE at the periodic
 * sync that sync_interval_ms asks for (and at rotation and close). Records replayed by open
 * are not fed (the caller's replay callback sees them). Runs on the writer thread (or the
 * thread of a rotation sync or close); it must be short and must not call tg_ledger_
 * functions: copy the entries and return. The entries are valid during the call only. */
typedef void (*tg_ledger_feed_fn)(void *ud, uint64_t first_seq, const uint8_t (*entries)[32],
                                  size_t n);

typedef struct tg_ledger_opts {
    const char *dir;            /* ledger directory; created (0700) if missing (not its
                                   parents). Required. */
    tg_durability_t durability; /* default TG_DURABILITY_FSYNC */
    uint32_t batch_interval_ms; /* BATCH: max ms between fdatasyncs; 0 = 10 */
    uint64_t segment_max_bytes; /* rotation threshold; 0 = 64 MiB */
    uint32_t max_batch;         /* records per group commit; 0 = 1024 */
    uint32_t queue_max;         /* queued records before TG_ERR_OVERLOADED; 0 = 16384 */
    uint32_t retry_ms;          /* automatic recovery attempts when unhealthy; 0 = 1000 */
    uint32_t commit_delay_us;   /* FSYNC: longest wait for announced appends (below) before
                                   a fdatasync; 0 = never wait */
    bool no_create;             /* true: refuse a missing directory or one without a segment
                                   file (TG_ERR_NOT_FOUND) instead of starting a new, empty
                                   ledger there (serve --ledger-create never) */
    tg_ledger_feed_fn feed;     /* NULL = no transparency log: entries are neither computed
                                   nor kept */
    void *feed_ud;
    uint32_t sync_interval_ms; /* NONE with a feed: the writer fdatasyncs the records written
                                  since its last sync at most this often (so the log can cover
                                  them); 0 = 100. Ignored otherwise. */
    /* NULL: open scans and replays every record (the recovery rules above). Otherwise the
     * records up to resume->seq are neither read nor replayed: their segment files must
     * exist and be non-empty, resume's own record must be at resume->pos, whole and with
     * resume->hash (else TG_ERR_LEDGER_CORRUPT), and every record after it is checked and
     * replayed as usual. ledger.head's record, when it lies at or before resume->seq, is
     * taken as found. The checks skipped here are `trigguard ledger verify`'s (copied). */
    const struct tg_ledger_resume *resume;
} tg_ledger_opts_t;

/* Zero-initialised opts mean "defaults"; set .dir. */
#define TG_LEDGER_OPTS_INIT                                                                        \
    ((tg_ledger_opts_t){NULL, TG_DURABILITY_FSYNC, 0, 0, 0, 0, 0, 0, false, NULL, NULL, 0, NULL})

/* Where a record lives. The daemon keeps these in its receipt index for tg_ledger_read_at. */
typedef struct tg_ledger_pos {
    uint64_t seq;     /* sequence number of the record */
    uint64_t offset;  /* byte offset of the record's magic inside its segment file */
    uint32_t segment; /* segment number (ledger-<segment>.tgl) */
    uint32_t length;  /* whole record length in bytes (92 + meta_len + payload_len) */
} tg_ledger_pos_t;

/* A record the caller already holds the effect of (a snapshot of derived state, snapshot.h):
 * its seq, where it is, and its record_hash. */
typedef struct tg_ledger_resume {
    uint64_t seq;
    tg_ledger_pos_t pos; /* pos.seq == seq */
    uint8_t hash[32];
} tg_ledger_resume_t;

/* A record as seen by replay and verify callbacks. Pointers are valid only during the call. */
typedef struct tg_ledger_record {
    uint8_t type; /* TG_LEDGER_TYPE_RECEIPT, _SILENCE, _REDEMPTION or _APPROVAL */
    uint64_t seq;
    const uint8_t *meta;
    size_t meta_len;
    const uint8_t *payload;
    size_t payload_len;
    tg_ledger_pos_t pos;
    uint8_t prev_hash[TG_LEDGER_HASH_SIZE];
    uint8_t hash[TG_LEDGER_HASH_SIZE]; /* this record's record_hash */
} tg_ledger_record_t;

/* Replay callback: called by tg_ledger_open for every record in ledger order, before the
 * writer starts. A non-TG_OK return aborts the open with that error. */
typedef tg_err_t (*tg_ledger_replay_fn)(void *ud, const tg_ledger_record_t *rec);

/* Completion callback, called exactly once per accepted append, on the completion thread, in
 * sequence order. status: TG_OK (durable per the mode; *pos filled) or
 * TG_ERR_LEDGER_UNHEALTHY (not written, never will be; *pos is all zeros). pos is valid only
 * during the call. It must be cheap, must not block, and must not call any tg_ledger_
 * function (resume a connection, signal a condition variable, and return). */
typedef void (*tg_ledger_done_fn)(void *ud, tg_err_t status, const tg_ledger_pos_t *pos);

/* What tg_ledger_open found. */
typedef struct tg_ledger_recovery {
    uint64_t records;   /* valid records replayed */
    uint32_t segments;  /* segment files found (after creating the first one if none) */
    uint64_t first_seq; /* 0 when the ledger is empty */
    uint64_t last_seq;  /* 0 when the ledger is empty */
    uint8_t head_hash[TG_LEDGER_HASH_SIZE];
    bool created;              /* the ledger was empty and segment 1 was created */
    bool torn;                 /* a torn tail was truncated */
    uint32_t torn_segment;     /* segment holding the torn tail */
    uint64_t torn_offset;      /* its byte offset (= new file length) */
    uint64_t torn_bytes;       /* bytes dropped */
    char message[TG_DIAG_MAX]; /* one sentence for the startup log ("" if nothing to say) */
} tg_ledger_recovery_t;

typedef struct tg_ledger tg_ledger_t;

/* Opens (creating if needed) the ledger in opts->dir, takes its lock, verifies every segment,
 * calls replay(ud, rec) for each record (replay may be NULL), truncates a torn tail of the
 * last segment (reported in *report, which may be NULL), and starts the writer thread.
 * Last, it writes, fdatasyncs and removes a 4 KiB ledger.probe: when that fails (a full
 * disk), open still succeeds but the ledger starts unhealthy (tg_ledger_health says why)
 * and recovers as after any failed write, so readiness is false until the disk takes data.
 * A directory without a segment file gets segment 1 (report->created) unless
 * opts->no_create, or unless it holds ledger.head or ledger.probe: those are only ever
 * written beside a segment, so the ledger's segments were deleted, moved or replaced, and
 * the start is refused (TG_ERR_LEDGER_CORRUPT; moving ledger.head away accepts a new ledger).
 * On success *out owns the ledger (release with tg_ledger_close).
 * Errors: TG_ERR_INVALID_ARG (NULL out/opts/dir, unknown durability),
 * TG_ERR_NOT_FOUND (opts->no_create and no directory, or no segment file in it),
 * TG_ERR_LEDGER_CORRUPT (diag: "<dir>/<file>: seq N at offset O: what"), TG_ERR_IO (cannot
 * create, read, lock — "locked by another process" — or truncate), TG_ERR_LIMIT (more than a
 * million segment files), TG_ERR_NOMEM, TG_ERR_INTERNAL (libsodium or the writer thread
 * failed to start), or the replay callback's error (diag names the seq). On error *out is
 * NULL, the lock is released and no record was appended (a torn tail may already have been
 * truncated, the directory, its lock file and an empty first segment may have been created).
 * Not thread-safe. */
tg_err_t tg_ledger_open(tg_ledger_t **out, const tg_ledger_opts_t *opts, tg_ledger_replay_fn replay,
                        void *ud, tg_ledger_recovery_t *report, tg_diag_t *diag) TG_MUST_USE;

/* Queues one record; copies type, meta and payload, so the caller keeps ownership and may
 * free them on return. On TG_OK, done(ud, ...) will be called exactly once later (on the
 * completion thread, possibly before this function returns). On error done is never called.
 * Errors (immediate, never blocking): TG_ERR_INVALID_ARG (NULL l/done, type not 1..4,
 * NULL pointer with nonzero length), TG_ERR_LIMIT (meta_len > 16384 or len > 65536),
 * TG_ERR_LEDGER_UNHEALTHY (unhealthy or closing), TG_ERR_OVERLOADED (queue full),
 * TG_ERR_NOMEM. Thread-safe. */
tg_err_t tg_ledger_append(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                          const void *payload, size_t len, tg_ledger_done_fn done,
                          void *ud) TG_MUST_USE;

/* One record to append, with its transparency-log entry (tg_ledger_feed_fn). */
typedef struct tg_ledger_in {
    uint8_t type;
    const void *meta;
    size_t meta_len;
    const void *payload;
    size_t len;
    const uint8_t *entry; /* 32 bytes, copied; NULL = SHA-256(payload) (when a feed is set) */
} tg_ledger_in_t;

/* tg_ledger_append and tg_ledger_append_now with the record's log entry: the same contract
 * and errors. tg_ledger_append(l, type, meta, ml, payload, len, done, ud) is
 * tg_ledger_append_in with entry NULL. */
tg_err_t tg_ledger_append_in(tg_ledger_t *l, const tg_ledger_in_t *in, tg_ledger_done_fn done,
                             void *ud) TG_MUST_USE;
tg_err_t tg_ledger_append_now_in(tg_ledger_t *l, const tg_ledger_in_t *in,
                                 tg_ledger_pos_t *pos_out) TG_MUST_USE;

/* tg_ledger_append and wait for its completion: returns the done status (or the immediate
 * error); *pos_out (may be NULL) receives the position on TG_OK. For the CLI and tests; never
 * call it from a done callback or an event-loop thread. Thread-safe. */
tg_err_t tg_ledger_append_sync(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                               const void *payload, size_t len,
                               tg_ledger_pos_t *pos_out) TG_MUST_USE;

/* Durability NONE only: encodes and writes the record on the calling thread (under the
 * ledger's write lock, in sequence with the writer thread's batches) and returns once the
 * write() is done, which is exactly when an asynchronous append in that mode would be
 * acknowledged. It saves the hand-off to the writer thread and back (two thread wake-ups
 * per request) when no fdatasync has to be shared. *pos_out receives the position on TG_OK.
 * Errors: TG_ERR_INVALID_ARG (also: durability is not NONE, or pos_out NULL), TG_ERR_LIMIT,
 * TG_ERR_LEDGER_UNHEALTHY (unhealthy, closing, or this write failed: the ledger is then
 * unhealthy and recovers as after any failed write), TG_ERR_NOMEM. Never blocks on a sync
 * except at segment rotation. Thread-safe. */
tg_err_t tg_ledger_append_now(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                              const void *payload, size_t len,
                              tg_ledger_pos_t *pos_out) TG_MUST_USE;

/* Group-commit hint (used in FSYNC mode with commit_delay_us > 0): the caller will
 * probably append soon (it is parsing and signing a request). While any caller has
 * announced, the writer holds a non-full batch up to commit_delay_us for those records, so
 * one fdatasync covers them all: fewer fdatasyncs, less CPU per record under load. A lone
 * caller never waits for itself: it ends its announcement before it appends. Each
 * tg_ledger_announce must be followed by exactly one tg_ledger_announce_end. Thread-safe. */
void tg_ledger_announce(tg_ledger_t *l);
void tg_ledger_announce_end(tg_ledger_t *l);

/* true while appends can be made durable (for /readyz): not failed (see Failure above) and
 * not stalled (tg_ledger_watch). Lock-free. Thread-safe. */
bool tg_ledger_healthy(const tg_ledger_t *l);

/* The stall watch. A disk can stop answering without failing (a frozen filesystem, a hung
 * device, a storage path that fails over): a write or fdatasync then blocks the writer for
 * as long as the device likes, records pile up behind it, and nothing turns unhealthy. Call
 * this periodically (serve: every 100 ms) with the bound (--ledger-stall-timeout); 0 turns
 * the watch off. When the writer's file work in progress, or an inline append's write
 * (tg_ledger_append_now), began more than stall_ms ago, the ledger is *stalled*:
 * tg_ledger_healthy is false, every queued record not yet taken by the writer is failed
 * (done(TG_ERR_LEDGER_UNHEALTHY): never written), new appends fail fast with
 * TG_ERR_LEDGER_UNHEALTHY, and one ledger_stalled line is logged. Records already in the
 * stalled write stay there: their done() comes when (if ever) the write returns, as usual;
 * a caller that cannot wait that long answers its client itself (the pipeline's
 * --ledger-stall-timeout). The stall ends, and records are accepted again, as soon as that
 * work returns (logged, ledger_stall_ended). Returns whether the ledger is stalled now.
 * Thread-safe, but meant for one watching thread. */
bool tg_ledger_watch(tg_ledger_t *l, uint32_t stall_ms);

/* tg_ledger_healthy, and when it is false, why: one sentence naming what failed and the
 * system's reason, without the directory's path (/readyz shows it to anyone), into
 * why[0..why_len) (why may be NULL; "" while healthy). Never waits for the disk: a short
 * mutex that no file operation holds. Thread-safe. */
bool tg_ledger_health(const tg_ledger_t *l, char *why, size_t why_len);

/* Checks the ledger's identity now (see "Identity" above): false once it is broken (the
 * ledger is then unhealthy until a restart, the event is logged and the evidence written),
 * true otherwise. If a write holds the file state at this moment it does not wait: that
 * write checks the identity itself, so it returns the last known answer. For the daemon's
 * 100 ms tick, so an idle ledger notices too: four stat calls. Thread-safe. */
bool tg_ledger_check_identity(tg_ledger_t *l);

/* Asks the writer to recover now (truncate to the last acknowledged record, fdatasync, probe
 * write) and waits for the attempt. TG_OK if the ledger is (now) healthy,
 * TG_ERR_LEDGER_UNHEALTHY otherwise (diag says why). Thread-safe. */
tg_err_t tg_ledger_try_recover(tg_ledger_t *l, tg_diag_t *diag) TG_MUST_USE;

/* Reads the record at pos (pread of its segment file), re-verifying header_check, seq ==
 * pos->seq, length == pos->length and record_hash. Resets then fills payload_out and meta_out
 * (either may be NULL). Errors: TG_ERR_INVALID_ARG, TG_ERR_NOT_FOUND (no such segment or
 * offset beyond its end), TG_ERR_LEDGER_CORRUPT, TG_ERR_IO, tg_buf errors. Thread-safe. */
tg_err_t tg_ledger_read_at(tg_ledger_t *l, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                           tg_buf_t *meta_out, tg_diag_t *diag) TG_MUST_USE;

/* The last record an fdatasync covered (*seq 0 and a zero hash: none since open). Briefly
 * takes the writer's file lock, so it may wait for a write in progress. Thread-safe. */
void tg_ledger_durable(tg_ledger_t *l, uint64_t *seq, uint8_t hash[TG_LEDGER_HASH_SIZE]);

/* Reads the records after *at (at->seq 0: from the ledger's first record) up to seq upto,
 * which must be durable (tg_ledger_durable), from the segment files with the same checks as
 * open, calling fn(ud, rec) for each in order, and advances *at to the last one read. For a
 * thread that follows the ledger while it runs (snapshot.h); it never touches the writer's
 * state. Errors: TG_ERR_INVALID_ARG, TG_ERR_IO, TG_ERR_LEDGER_CORRUPT, TG_ERR_NOMEM or fn's
 * error (diag says where); *at then names the last record fn accepted. Thread-safe. */
tg_err_t tg_ledger_read_range(tg_ledger_t *l, tg_ledger_resume_t *at, uint64_t upto,
                              tg_ledger_replay_fn fn, void *ud, tg_diag_t *diag) TG_MUST_USE;

/* Without opening the ledger (no lock, nothing written): whether the directory holds, at
 * rs->pos, the whole record rs->seq with rs->hash, in a segment an anchor did not prune. TG_OK,
 * or TG_ERR_NOT_FOUND / TG_ERR_LEDGER_CORRUPT / TG_ERR_IO / TG_ERR_INVALID_ARG with a reason
 * in diag. So a start can drop a snapshot before it loads anything. Thread-safe. */
tg_err_t tg_ledger_check_resume(const char *dir, const tg_ledger_resume_t *rs,
                                tg_diag_t *diag) TG_MUST_USE;

/* Histogram bucket upper bounds. Counts are per bucket (not cumulative); the last bucket
 * (index *_BUCKETS-1) counts everything above the previous bound (+Inf). */
#define TG_LEDGER_FSYNC_BUCKETS 12 /* fsync latency, microseconds */
#define TG_LEDGER_BATCH_BUCKETS 12 /* records per batch */
extern const uint64_t tg_ledger_fsync_bounds_us[TG_LEDGER_FSYNC_BUCKETS - 1];
extern const uint64_t tg_ledger_batch_bounds[TG_LEDGER_BATCH_BUCKETS - 1];

typedef struct tg_ledger_stats {
    uint64_t records;      /* records made durable (acknowledged TG_OK) since open */
    uint64_t bytes;        /* their bytes */
    uint64_t batches;      /* group commits */
    uint64_t last_batch;   /* records in the last batch */
    uint64_t max_batch;    /* largest batch */
    uint64_t fsyncs;       /* successful fdatasync calls */
    uint64_t fsync_sum_us; /* their total latency */
    uint64_t failures;     /* what made the ledger unhealthy: write/sync failures, a failed
                              probe at open, a broken identity (each counted once) */
    uint64_t stalls;       /* stalls declared by tg_ledger_watch */
    bool stalled;          /* stalled now (healthy is then false too) */
    uint64_t rejected;     /* appends refused (overloaded or unhealthy) */
    uint64_t queued;       /* records waiting for the writer right now */
    uint64_t fsync_hist[TG_LEDGER_FSYNC_BUCKETS];
    uint64_t batch_hist[TG_LEDGER_BATCH_BUCKETS];
    bool healthy;           /* tg_ledger_healthy */
    uint64_t identity_lost; /* 1 once the directory, lock or segment changed under the ledger */
    tg_durability_t durability;
    uint32_t segment;       /* active segment number */
    uint64_t segment_bytes; /* its length */
    uint64_t head_seq;      /* last acknowledged record (0 if none) */
    uint8_t head_hash[TG_LEDGER_HASH_SIZE];
} tg_ledger_stats_t;

/* Snapshot of the counters (each read atomically; the snapshot as a whole is not a single
 * instant). Thread-safe. */
void tg_ledger_stats(const tg_ledger_t *l, tg_ledger_stats_t *out);

/* Stops accepting appends, lets the writer finish everything queued (every pending done()
 * is called), fdatasyncs, joins the writer, releases the lock and frees l. NULL-safe. Must
 * not be called concurrently with other calls on l, nor from a done callback. */
void tg_ledger_close(tg_ledger_t *l);

/* ---- offline verification (no lock taken, nothing written) ---- */

/* Extra per-record check for verify (e.g. receipt signatures). Return TG_OK or an error with
 * diag set; the verify stops at the first failure and reports it at that record. */
typedef tg_err_t (*tg_ledger_check_fn)(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag);

/* Extra check of an anchor (anchor.h) for verify, typically its signature: called for every
 * anchor file the verify relies on (file: its path), before the records it anchors. Return
 * TG_OK or an error with diag set; the verify fails at that file. */
struct tg_anchor;
typedef tg_err_t (*tg_ledger_anchor_fn)(void *ud, const struct tg_anchor *a, const char *file,
                                        tg_diag_t *diag);

typedef struct tg_ledger_verify_opts {
    tg_ledger_check_fn check; /* may be NULL: structure and chain only */
    void *check_ud;
    tg_ledger_anchor_fn anchor_check; /* may be NULL: anchors' layout and chain only */
    void *anchor_ud;
} tg_ledger_verify_opts_t;

typedef struct tg_ledger_verify_report {
    uint64_t records, receipts, silences, redemptions;
    uint64_t first_seq, last_seq; /* 0 when no record */
    uint8_t head_hash[TG_LEDGER_HASH_SIZE];
    uint64_t bytes;         /* bytes of valid records */
    uint32_t segments;      /* segment files checked */
    uint32_t first_segment; /* their numbers */
    uint32_t last_segment;
    bool anchored; /* the chain's start was checked: seq 1 with zero prev_hash, or a
                      directory's ledger.anchor (always, for a directory) */
    /* Anchors (anchor.h, docs/LEDGER.md "Archive and prune"). */
    bool anchor_found;          /* the first directory has a ledger.anchor ... */
    uint64_t anchor_seq;        /* ... and its chain starts at this seq */
    uint32_t anchors;           /* anchor files checked (each given to opts->anchor_check) */
    bool end_found;             /* the last directory has an archive.anchor: it is an archive */
    uint64_t end_seq;           /* whose chain goes on at this seq (elsewhere) */
    uint32_t leftover_segments; /* segments below a ledger.anchor, ignored (LEDGER.md) */
    /* fault (when the result is not TG_OK): where and what */
    tg_err_t fault;
    char fault_file[256];  /* path of the segment file */
    uint64_t fault_seq;    /* sequence number of the faulty record (expected one if unknown) */
    uint64_t fault_offset; /* byte offset inside fault_file */
    char fault_what[TG_DIAG_MAX];
    uint64_t torn_bytes; /* fault == TG_ERR_LEDGER_TORN: bytes a restart would drop */
    /* A directory's ledger.head (the durable head the daemon records, docs/LEDGER.md): found,
     * the seq it says was on disk, and when it was written (ms since the epoch, UTC). */
    bool head_found;
    uint64_t head_seq;
    int64_t head_at_ms;
} tg_ledger_verify_report_t;

/* Verifies a ledger directory (all segments, strictly: numbering from 1, chain from seq 1, or
 * from its ledger.anchor: its segment and seq, its hash, opts->anchor_check; and, in an
 * archive, that the chain ends where its archive.anchor says) or
 * one segment file (its internal chain; its first prev_hash is taken as given when its first
 * seq is not 1). Checks every record as tg_ledger_open does, then opts->check per record.
 * For a directory with a ledger.head, also as tg_ledger_open does: the valid records must
 * reach the seq it records, with the record_hash it records (TG_ERR_LEDGER_CORRUPT when not,
 * or when the file is damaged; a torn tail past that seq stays TG_ERR_LEDGER_TORN). A
 * directory with ledger.head or ledger.probe but no segment file is TG_ERR_LEDGER_CORRUPT too
 * (the fault names that file), as tg_ledger_open refuses it.
 * Returns TG_OK; TG_ERR_LEDGER_CORRUPT; TG_ERR_LEDGER_TORN (the structure is sound but the
 * last segment ends in a torn tail that a restart would drop); the check's error; or, for
 * unusable input, TG_ERR_NOT_FOUND (no such path / no segment in the directory), TG_ERR_IO,
 * TG_ERR_INVALID_ARG, TG_ERR_NOMEM. *rep (required) is filled in every case: the summary of
 * the valid prefix and, on a fault, the fault fields. diag gets one sentence. Thread-safe. */
tg_err_t tg_ledger_verify_path(tg_ledger_verify_report_t *rep, const char *path,
                               const tg_ledger_verify_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;

/* Verifies n ledger directories as one chain, oldest first: an archive (or several), then
 * the live directory (`trigguard ledger verify ARCHIVE... DIR`). Each directory is checked as
 * tg_ledger_verify_path checks it, anchors included; a directory after the first must have a
 * ledger.anchor that continues the previous one exactly (its seq, the previous last record's
 * hash, the next segment number), and a directory's archive.anchor must describe where its
 * chain stops. n == 1 is tg_ledger_verify_path on a directory. Same errors and report (the
 * counts sum over the directories; first_segment is the first directory's, last_segment the
 * last one's). Thread-safe. */
tg_err_t tg_ledger_verify_dirs(tg_ledger_verify_report_t *rep, const char *const *paths, size_t n,
                               const tg_ledger_verify_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;

/* Whether want is the record_hash of a record with these fields, in either format version
 * (a ledger may hold both, LEDGER.md): for stores that keep a record's fields rather than its
 * bytes (PostgreSQL's tg_records, docs/POSTGRES.md), so they verify the chain the way the
 * file ledger does. Lengths above the caps never match. Thread-safe. */
bool tg_ledger_hash_matches(uint8_t type, uint64_t seq, const uint8_t prev[TG_LEDGER_HASH_SIZE],
                            const uint8_t *meta, size_t meta_len, const uint8_t *payload,
                            size_t payload_len, const uint8_t want[TG_LEDGER_HASH_SIZE]);

/* out = the record_hash the file ledger's current format gives a record with these fields
 * (the header with seq and prev, then SHA-256(meta ‖ payload)): for stores that keep fields,
 * so their chains verify like a ledger directory's (tg_ledger_hash_matches accepts it).
 * TG_ERR_LIMIT when a length is over its cap. Thread-safe. */
tg_err_t tg_ledger_record_hash(uint8_t out[TG_LEDGER_HASH_SIZE], uint8_t type, uint64_t seq,
                               const uint8_t prev[TG_LEDGER_HASH_SIZE], const uint8_t *meta,
                               size_t meta_len, const uint8_t *payload,
                               size_t payload_len) TG_MUST_USE;

/* The index of v's bucket in a histogram of nb + 1 buckets with upper bounds bounds[0..nb)
 * (the last one counts everything above): for backends that keep the ledger's histograms. */
size_t tg_ledger_hist_bucket(const uint64_t *bounds, size_t nb, uint64_t v);

/* "ledger-000042.tgl" into out (NUL-terminated). TG_ERR_BUFFER_TOO_SMALL if it does not fit. */
tg_err_t tg_ledger_segment_name(char *out, size_t out_len, uint32_t segment) TG_MUST_USE;

#endif /* TRIGGUARD_LEDGER_H */
