/* snapshot.h — snapshots of the file backend's derived state, so a start replays only the
 * ledger's tail (issue 24, docs/LEDGER.md "Snapshots").
 *
 * ## Why this shape
 * A start on the file backend rebuilds the idempotency and nonce table, the receipt index,
 * the limit totals and the approvals from every ledger record (db.h). A snapshot is those
 * tables as they stand after replaying records 1..P (P a durable seq), written to one file:
 * the start loads the newest valid one and replays records P+1.. only. The snapshot holds
 * exactly what tg_db_restore_key / _nonce / tg_db_index_receipt / tg_db_limit_restore /
 * tg_db_approval_restore would put back, entry by entry, so loading it goes through the same
 * restore functions, and their rules (retention counted from each entry's stamp, the later
 * record winning, caps) apply as in a replay. The file is never trusted to permit what a full
 * replay would not: any check that fails makes the start ignore it (logged,
 * `snapshot_ignored`) and replay everything.
 *
 * ## Files
 * In the ledger directory: `snapshot-<P, 20 digits>.tgs` (the newest two are kept) and
 * `snapshot.tmp` while one is written (fdatasync, rename, fsync of the directory: a crash
 * leaves either the old set or the new one, plus maybe a temp file, which is ignored and
 * overwritten). The ledger ignores these names.
 *
 * ## Layout (version 1; integers little-endian, no padding)
 *
 *   offset  size  field
 *   0       4     magic        "TGSN"
 *   4       4     version      1 (any other: ignored)
 *   8       8     seq          P: the state is that after records 1..P
 *   16      8     pos.offset   where record P is (tg_ledger_pos_t)
 *   24      4     pos.segment
 *   28      4     pos.length
 *   32      32    hash         record P's record_hash (the start checks it against the ledger)
 *   64      8     created_ms   wall clock when written (a start whose clock is earlier ignores it)
 *   72      8     retention_ms the --retention it was pruned with (a longer one now: ignored)
 *   80      40    counts       u64 each: keys, nonces, receipts, limits, approvals
 *   120     8     body_len     bytes of items after the header
 *   128     B     items        body_len bytes: a sequence of tagged items (below)
 *   128+B   32    check        BLAKE2b-256(bytes 0..127 ‖ BLAKE2b-256(items))
 *
 * Items (tag u8 first; t = tenant 1..64 bytes, k = key 1..1024 bytes; pos = offset u64,
 * segment u32, length u32, seq = the item's own u64):
 *   1 key      tl u8, kl u16, stamp i64, status u16, request_hash 32, seq u64, pos, t, k
 *   2 nonce    tl u8, kl u16, stamp i64, t, k
 *   3 receipt  tl u8, kl u16, stamp i64, seq u64, pos, t, k
 *   4 limit    nl u16 (1..128), key 32, window_start_s i64, window_s i64, total f64 (IEEE
 *              bits), name
 *   5 approval len u32 (1..65536), the approval's JSON (tg_approval_write)
 * Every count must match its items and the items must end exactly at body_len.
 *
 * Thread safety: a writer belongs to one thread; tg_snap_read results are immutable and may
 * be applied from any thread.
 */
#ifndef TRIGGUARD_SNAPSHOT_H
#define TRIGGUARD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/approval.h"
#include "trigguard/db.h"
#include "trigguard/err.h"
#include "trigguard/ledger.h"
#include "trigguard/store.h"

#define TG_SNAP_MAGIC "TGSN"
#define TG_SNAP_VERSION 1u
#define TG_SNAP_HEADER_SIZE 128
#define TG_SNAP_CHECK_SIZE 32
#define TG_SNAP_APPROVAL_MAX 65536
#define TG_SNAP_FILE_MAX ((uint64_t)1 << 38) /* 256 GiB: larger is not one of ours */
#define TG_SNAP_TMP_NAME "snapshot.tmp"
#define TG_SNAP_KEEP 2 /* snapshot files kept */

enum {
    TG_SNAP_KEYS,
    TG_SNAP_NONCES,
    TG_SNAP_RECEIPTS,
    TG_SNAP_LIMITS,
    TG_SNAP_APPROVALS,
    TG_SNAP_N
};

typedef struct tg_snap_info {
    tg_ledger_resume_t at; /* record P: seq, position, record_hash */
    int64_t created_ms;
    int64_t retention_ms;
    uint64_t counts[TG_SNAP_N];
    uint64_t body_len; /* set by read */
} tg_snap_info_t;

/* ---- writing ---- */

typedef struct tg_snap_writer tg_snap_writer_t;

/* Creates (truncating) dir/snapshot.tmp and reserves the header. Errors: TG_ERR_INVALID_ARG,
 * TG_ERR_IO, TG_ERR_NOMEM (diag says which). */
tg_err_t tg_snap_writer_open(tg_snap_writer_t **out, const char *dir, tg_diag_t *diag) TG_MUST_USE;

/* One item each. tg_snap_put_item takes a key, nonce or receipt (store.h), put_limit a limit
 * total, put_approval an approval. Errors: TG_ERR_INVALID_ARG (out of the bounds above),
 * TG_ERR_IO, TG_ERR_NOMEM; the writer is then only good for tg_snap_writer_abort. */
tg_err_t tg_snap_put_item(tg_snap_writer_t *w, const tg_store_item_t *it) TG_MUST_USE;
tg_err_t tg_snap_put_limit(tg_snap_writer_t *w, const tg_db_limit_ref_t *ref,
                           double total) TG_MUST_USE;
tg_err_t tg_snap_put_approval(tg_snap_writer_t *w, const tg_approval_t *a) TG_MUST_USE;

/* Writes the header from info (its counts are the writer's own) and the check, fdatasyncs,
 * renames the file to snapshot-<P>.tgs, fsyncs the directory, then removes the older
 * snapshot files beyond TG_SNAP_KEEP. Frees w in every case (on error the temp file is
 * removed). The name written goes to name_out (may be NULL; at least 32 bytes). Errors:
 * TG_ERR_IO, TG_ERR_INVALID_ARG (info->at.seq 0). */
tg_err_t tg_snap_writer_commit(tg_snap_writer_t *w, const tg_snap_info_t *info, char *name_out,
                               size_t name_cap, tg_diag_t *diag) TG_MUST_USE;

/* Removes the temp file and frees w. NULL-safe. */
void tg_snap_writer_abort(tg_snap_writer_t *w);

/* ---- reading ---- */

typedef struct tg_snap tg_snap_t;

/* Reads path whole and checks it: size, magic, version, check, counts, every item within its
 * bounds and every approval parsed. TG_OK with *out (free with tg_snap_free) and *info;
 * otherwise *out is NULL and why says what is wrong in a few words (the reason of the
 * snapshot_ignored line): TG_ERR_NOT_FOUND, TG_ERR_IO, TG_ERR_NOMEM, or
 * TG_ERR_LEDGER_CORRUPT (damaged, an unknown version, or not a snapshot). */
tg_err_t tg_snap_read(tg_snap_t **out, tg_snap_info_t *info, const char *path, char *why,
                      size_t why_len) TG_MUST_USE;

/* Where the items go. Each function's error stops the apply and is returned. */
typedef struct tg_snap_sink {
    tg_err_t (*item)(void *ud, const tg_store_item_t *it);
    tg_err_t (*limit)(void *ud, const tg_db_limit_ref_t *ref, double total);
    tg_err_t (*approval)(void *ud, const tg_approval_t *a);
    void *ud;
} tg_snap_sink_t;

/* Hands every item of a snapshot tg_snap_read accepted to sink, in file order. */
tg_err_t tg_snap_apply(const tg_snap_t *s, const tg_snap_sink_t *sink) TG_MUST_USE;

void tg_snap_free(tg_snap_t *s);

/* Writes the trailing check of a whole snapshot image in memory (b, len bytes: header, body,
 * TG_SNAP_CHECK_SIZE bytes of check), the check tg_snap_read verifies; the writer uses the
 * same function. For tests and the fuzz target, which build damaged snapshots that must get
 * past the check to reach the parser behind it. len must be at least header + check. */
void tg_snap_seal(uint8_t *b, size_t len);

/* The snapshot files of dir, newest (highest P) first: up to max names ("snapshot-<P>.tgs")
 * into names[i] (each TG_SNAP_NAME_MAX bytes), count in *n. Other names are ignored. TG_OK
 * (also for a missing directory: *n 0), TG_ERR_IO. */
#define TG_SNAP_NAME_MAX 40
tg_err_t tg_snap_list(const char *dir, char (*names)[TG_SNAP_NAME_MAX], size_t max,
                      size_t *n) TG_MUST_USE;

#endif /* TRIGGUARD_SNAPSHOT_H */
