/* ledger_int.h — internals shared by the ledger writer (ledger.c) and the scanner (format.c). */
#ifndef TG_LEDGER_INT_H
#define TG_LEDGER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/ledger.h"

#define TG_LG_LOCK_NAME "ledger.lock"
#define TG_LG_PROBE_NAME "ledger.probe"
#define TG_LG_SEGMENTS_MAX 1000000u /* more segment files than this: refuse (bounded listing) */

typedef struct tg_lg_hdr {
    uint8_t type;
    uint64_t seq;
    uint8_t prev[TG_LEDGER_HASH_SIZE];
    uint32_t meta_len;
    uint32_t payload_len;
} tg_lg_hdr_t;

/* Whole record length for these section lengths. */
size_t tg_lg_record_len(uint32_t meta_len, uint32_t payload_len);

/* SHA-256(meta ‖ payload): the part of a version-2 record hash that does not depend on the
 * chain, so callers compute it before taking the write lock. */
void tg_lg_body_digest(uint8_t out[TG_LEDGER_HASH_SIZE], const uint8_t *meta, uint32_t meta_len,
                       const uint8_t *payload, uint32_t payload_len);

/* Writes one complete record (tg_lg_record_len bytes, current format version) to dst and its
 * record_hash to hash. body is tg_lg_body_digest of the same meta and payload. */
void tg_lg_encode(uint8_t *dst, uint8_t hash[TG_LEDGER_HASH_SIZE], uint8_t type, uint64_t seq,
                  const uint8_t prev[TG_LEDGER_HASH_SIZE], const uint8_t *meta, uint32_t meta_len,
                  const uint8_t *payload, uint32_t payload_len,
                  const uint8_t body[TG_LEDGER_HASH_SIZE]);

/* Parses and checks the 60 header bytes at p (magic, version, header_check, type, flags,
 * length caps). TG_ERR_LEDGER_CORRUPT with a short reason in what. */
tg_err_t tg_lg_hdr_parse(tg_lg_hdr_t *h, const uint8_t *p, char *what, size_t what_len);

/* Recomputes the record_hash of the complete record rec[0..len) (its header already passed
 * tg_lg_hdr_parse, so the version byte is a known one) into hash; true if it matches the
 * stored one. */
bool tg_lg_hash_check(const uint8_t *rec, size_t len, uint8_t hash[TG_LEDGER_HASH_SIZE]);

/* Per-record callback of the scanner; a non-TG_OK return stops the scan (diag explains). */
typedef tg_err_t (*tg_lg_rec_fn)(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag);

/* What the next record must carry. next_seq 0 = not anchored: accept the first record's
 * seq and prev_hash as given (single-file verify). */
typedef struct tg_lg_chain {
    uint64_t next_seq;
    uint8_t prev[TG_LEDGER_HASH_SIZE];
} tg_lg_chain_t;

typedef struct tg_lg_fault {
    tg_err_t err;
    uint64_t seq;
    uint64_t offset;
    char what[TG_DIAG_MAX];
} tg_lg_fault_t;

typedef struct tg_lg_scan_result {
    uint64_t good_end;   /* end of the last valid record */
    uint64_t records;    /* valid records in this segment */
    uint64_t first_seq;  /* of this segment (0 if none) */
    bool torn;           /* last segment only: bytes after good_end are a torn tail */
    uint64_t torn_bytes; /* size - good_end when torn */
} tg_lg_scan_result_t;

/* Scans one segment file (fd, size bytes, read with pread). Every record is checked as
 * ledger.h describes, chain is advanced, cb (may be NULL) sees every valid record. A torn
 * tail is only accepted when `last`. Returns TG_OK (res filled; maybe torn),
 * TG_ERR_LEDGER_CORRUPT (fault filled), TG_ERR_IO, TG_ERR_NOMEM or the callback's error
 * (fault filled, what = callback's diag). */
tg_err_t tg_lg_scan_fd(tg_lg_scan_result_t *res, tg_lg_fault_t *fault, tg_lg_chain_t *chain, int fd,
                       uint64_t size, uint32_t segment, bool last, tg_lg_rec_fn cb, void *ud);

/* tg_lg_scan_fd from byte offset start (a record boundary; chain names the record that
 * begins there), stopping before the first record whose seq exceeds stop_seq (0 = at the end
 * of the file): a reader of a segment the writer is still appending to stops at what it
 * knows is complete (snapshots, snapshot.h). res->good_end is where the scan stopped. */
tg_err_t tg_lg_scan_fd_at(tg_lg_scan_result_t *res, tg_lg_fault_t *fault, tg_lg_chain_t *chain,
                          int fd, uint64_t size, uint64_t start, uint64_t stop_seq,
                          uint32_t segment, bool last, tg_lg_rec_fn cb, void *ud);

/* Reads the record at pos from fd (its segment) and checks it alone: header, seq, length and
 * record_hash (its chain link is not checked). TG_OK with its record_hash in hash;
 * TG_ERR_NOT_FOUND (the file ends before it), TG_ERR_LEDGER_CORRUPT, TG_ERR_IO or
 * TG_ERR_NOMEM, with a reason in what. */
tg_err_t tg_lg_check_at(int fd, const tg_ledger_pos_t *pos, uint8_t hash[TG_LEDGER_HASH_SIZE],
                        char *what, size_t what_len);

/* Lists the segment numbers in the directory (open dirfd; dir is for messages), sorted.
 * Every entry named "ledger-*.tgl" must be a canonical segment name; the numbers from first
 * on must be first..first+n-1 without gaps (first: 1, or an anchor's first segment, anchor.h).
 * Numbers below first are not listed, only counted in *below (may be NULL): what an archive
 * run interrupted while removing them left. *out is malloc'ed (NULL when n == 0). Errors:
 * TG_ERR_LEDGER_CORRUPT (bad name, gap), TG_ERR_IO, TG_ERR_NOMEM, TG_ERR_LIMIT (too many
 * segments). */
tg_err_t tg_lg_list_segments(uint32_t **out, size_t *n, int dirfd, const char *dir, uint32_t first,
                             size_t *below, tg_diag_t *diag);

/* "ledger-000042.tgl" (never fails: 32 bytes hold every u32). */
#define TG_LG_NAME_MAX 32
void tg_lg_seg_name(char out[TG_LG_NAME_MAX], uint32_t segment);

/* ledger.head: the durable head, so that a start can tell records the storage lost from a
 * torn write. Two 512-byte slots (one sector each, so a torn write of one leaves the other
 * whole); the writer overwrites them in turn and the valid slot with the higher generation
 * counts. A slot (little-endian):
 *   0 "TGLHEAD1" | 8 generation u64 | 16 seq u64 | 24 record_hash of seq (32) |
 *   56 wall-clock ms when written, i64 | 64 SHA-256 of bytes 0..64 (32) | 96.. zero
 * seq 0 means nothing was durable yet (hash all zero). */
#define TG_LG_HEAD_NAME "ledger.head"
#define TG_LG_HEAD_SLOT 512
#define TG_LG_HEAD_SIZE (TG_LG_HEAD_SLOT + TG_LG_HEAD_SLOT)
typedef struct tg_lg_head {
    uint64_t gen;
    uint64_t seq;
    uint8_t hash[TG_LEDGER_HASH_SIZE];
    int64_t at_ms;
} tg_lg_head_t;

/* What a scan saw of ledger.head's record: set want_seq (0: no head), pass every valid
 * record to tg_lg_head_probe_see, then tg_lg_head_check. Open and verify share both. */
typedef struct tg_lg_head_probe {
    uint64_t want_seq;
    bool got;
    uint8_t hash[TG_LEDGER_HASH_SIZE];
} tg_lg_head_probe_t;
void tg_lg_head_probe_see(tg_lg_head_probe_t *p, const tg_ledger_record_t *rec);

/* The start's check against ledger.head h: the valid records end at last_seq, and p says
 * whether seq h->seq was among them and its record_hash. TG_OK, or TG_ERR_LEDGER_CORRUPT
 * with the first bad seq in *fault_seq and a sentence in what (records lost, or the record
 * at h->seq is another one). */
tg_err_t tg_lg_head_check(const tg_lg_head_t *h, uint64_t last_seq, const tg_lg_head_probe_t *p,
                          uint64_t *fault_seq, char *what, size_t what_len);

/* A directory that holds no segment file but shows that it held a ledger: its ledger.head
 * (h; NULL when there is none) or a ledger.probe left by a crash. Both are only ever written
 * while a segment exists (open creates segment 1 before either), so the segments were
 * deleted, moved or replaced, and starting a new ledger there would silently let acknowledged
 * records, their idempotency keys and nonces, count for nothing. ledger.lock alone is no such
 * evidence: open creates it before segment 1, so a crash between the two leaves only it.
 * Open and verify both call this, so they agree. TG_OK when there is no evidence; otherwise
 * TG_ERR_LEDGER_CORRUPT with the evidence's file name (static) in *file and a sentence in
 * what (for a head with records it is tg_lg_head_check's "... durable records lost"). */
tg_err_t tg_lg_orphan_check(int dirfd, const tg_lg_head_t *h, const char **file, char *what,
                            size_t what_len);

/* Writes h into one slot (TG_LG_HEAD_SLOT bytes). */
void tg_lg_head_encode(uint8_t slot[TG_LG_HEAD_SLOT], const tg_lg_head_t *h);

/* Reads the file name of dir (dirfd open on it), which must be a regular file of exactly
 * size bytes, into buf: ledger.head and the anchors (anchor.h) are such files. Absent:
 * TG_OK with *found false. Errors: TG_ERR_LEDGER_CORRUPT (a symbolic link, not a regular
 * file of that size), TG_ERR_IO; diag names the file. */
tg_err_t tg_lg_read_exact(int dirfd, const char *dir, const char *name, uint8_t *buf, size_t size,
                          bool *found, tg_diag_t *diag) TG_MUST_USE;

/* Reads dir's ledger.head (dirfd open on it). Absent: TG_OK with *found false. Otherwise the
 * valid slot with the higher generation in *out and *found true. Errors:
 * TG_ERR_LEDGER_CORRUPT (not a regular file of TG_LG_HEAD_SIZE bytes, or no valid slot),
 * TG_ERR_IO; diag names the file. */
tg_err_t tg_lg_head_read(tg_lg_head_t *out, bool *found, int dirfd, const char *dir,
                         tg_diag_t *diag) TG_MUST_USE;

/* Little-endian helpers. */
void tg_lg_put_u64(uint8_t *p, uint64_t v);
uint64_t tg_lg_get_u64(const uint8_t *p);

#endif /* TG_LEDGER_INT_H */
