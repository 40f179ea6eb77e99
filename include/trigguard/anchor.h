/* anchor.h — the signed ledger anchor: where a pruned ledger's chain starts (issue 24).
 *
 * ## Why this shape
 * A ledger's chain proves itself from seq 1 (ledger.h). Once old segments are archived and
 * removed (`trigguard ledger archive`, docs/LEDGER.md "Archive and prune"), the directory
 * starts in the middle of the chain, and something must say where and with which hash, or
 * deleting segments at the front would be indistinguishable from an archive. The anchor is
 * that statement, signed with an Ed25519 key so that it cannot be rewritten by someone who
 * can only write files: the first kept segment and seq, the record_hash of the record before
 * it (the last archived one), the archived range, when, and by which key.
 *
 * This header owns the format; nothing else composes or parses it.
 *
 * ## Files
 *   ledger.anchor   in a live ledger directory (and in an archive that does not start at
 *                   seq 1): its chain starts at first_seq in segment first_segment, whose
 *                   first record's prev_hash must be prev_hash. Segments numbered below
 *                   first_segment are not part of the ledger (left over from an archive run
 *                   interrupted while removing them: ignored).
 *   archive.anchor  in an archive directory: a copy of the anchor the live directory got
 *                   when these segments left it, so the archive says where it ends (its last
 *                   record is seq first_seq - 1 with record_hash prev_hash) and a truncated
 *                   archive is found.
 * Both are written whole to a temporary name, fsynced, renamed and the directory fsynced.
 *
 * ## Layout (TG_ANCHOR_SIZE = 208 bytes; integers little-endian)
 *   0    8   magic                  "TGANCHR1"
 *   8    4   first_segment          u32, >= 2: the first kept segment
 *   12   4   archived_first_segment u32, 1 .. first_segment-1: first segment archived by this
 *                                   run (the archived segments are archived_first_segment
 *                                   .. first_segment-1)
 *   16   8   first_seq              u64, >= 2: seq of the first kept record
 *   24   32  prev_hash              record_hash of seq first_seq-1 (the last archived record)
 *   56   8   archived_first_seq     u64, 1 .. first_seq-1: first seq archived by this run
 *   64   8   created_ms             i64, ms since the epoch (UTC), when the anchor was made
 *   72   1   key_id_len             1 .. 64
 *   73   64  key_id                 the signing key's id (keys.h charset), zero padded
 *   137  7   zero
 *   144  64  signature              Ed25519 over bytes 0 .. 143 by the key named key_id
 * Any other size, magic, range, key id or non-zero padding is damage (TG_ERR_LEDGER_CORRUPT).
 *
 * Thread safety: every function is reentrant. */
#ifndef TRIGGUARD_ANCHOR_H
#define TRIGGUARD_ANCHOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_ANCHOR_NAME "ledger.anchor"
#define TG_ANCHOR_END_NAME "archive.anchor"
#define TG_ANCHOR_SIZE 208
#define TG_ANCHOR_SIGNED 144 /* bytes covered by the signature */
#define TG_ANCHOR_KEY_ID_MAX 64
#define TG_ANCHOR_HASH_SIZE 32
#define TG_ANCHOR_SIG_SIZE 64

typedef struct tg_anchor {
    uint32_t first_segment;
    uint32_t archived_first_segment;
    uint64_t first_seq;
    uint8_t prev_hash[TG_ANCHOR_HASH_SIZE];
    uint64_t archived_first_seq;
    int64_t created_ms;
    char key_id[TG_ANCHOR_KEY_ID_MAX + 1]; /* NUL-terminated */
    uint8_t sig[TG_ANCHOR_SIG_SIZE];
} tg_anchor_t;

/* TG_OK when a's fields are within the layout's ranges (signature not checked), else
 * TG_ERR_LEDGER_CORRUPT with a short reason in what (may be NULL). */
tg_err_t tg_anchor_check_fields(const tg_anchor_t *a, char *what, size_t what_len) TG_MUST_USE;

/* Writes the whole anchor (with a->sig as it is) into out. TG_ERR_INVALID_ARG when the
 * fields are out of range (nothing written then). */
tg_err_t tg_anchor_encode(uint8_t out[TG_ANCHOR_SIZE], const tg_anchor_t *a) TG_MUST_USE;

/* Parses exactly TG_ANCHOR_SIZE bytes (len must be that): TG_OK, or TG_ERR_LEDGER_CORRUPT
 * with a reason in what (may be NULL). Does not check the signature. */
tg_err_t tg_anchor_parse(tg_anchor_t *a, const uint8_t *buf, size_t len, char *what,
                         size_t what_len) TG_MUST_USE;

/* Fills a->sig: Ed25519 of the signed bytes with the 64-byte libsodium secret key sk (seed ‖
 * public key, keys.h tg_key_t.sk). a->key_id must name that key. TG_ERR_INVALID_ARG (fields
 * out of range), TG_ERR_CRYPTO. */
tg_err_t tg_anchor_sign(tg_anchor_t *a, const uint8_t sk[64]) TG_MUST_USE;

/* TG_OK when a->sig is a valid signature of a's signed bytes by public key pk, else
 * TG_ERR_CRYPTO (TG_ERR_INVALID_ARG for fields out of range). */
tg_err_t tg_anchor_verify(const tg_anchor_t *a, const uint8_t pk[32]) TG_MUST_USE;

/* Reads the anchor file `name` in the directory dirfd (dir: for messages). Absent: TG_OK and
 * *found false. Present: parsed into *a, *found true. Errors: TG_ERR_LEDGER_CORRUPT (not a
 * regular file of TG_ANCHOR_SIZE bytes, or a bad layout; a symlink too), TG_ERR_IO; diag
 * names the file. */
tg_err_t tg_anchor_read(tg_anchor_t *a, bool *found, int dirfd, const char *dir, const char *name,
                        tg_diag_t *diag) TG_MUST_USE;

/* Writes a as `name` in dirfd atomically: `name`.tmp (0600), fsync, rename, fsync of the
 * directory. A crash leaves the old file or the new one, never a mix. Errors:
 * TG_ERR_INVALID_ARG (fields out of range), TG_ERR_IO (diag says what). */
tg_err_t tg_anchor_write(int dirfd, const char *dir, const char *name, const tg_anchor_t *a,
                         tg_diag_t *diag) TG_MUST_USE;

#endif /* TRIGGUARD_ANCHOR_H */
