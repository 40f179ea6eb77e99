/* tlog_file.h — the file backend's transparency-log storage (db.h "transparency log"): the
 * owner of the files in <ledger dir>/tlog/ (docs/LEDGER.md, docs/TLOG.md):
 *
 *   hashes-LL   the stored hashes of tree level LL (two decimal digits, 00..63), 32 bytes at
 *               offset 32·index. Derived data: removed at every start and rewritten from the
 *               replay, written with pwrite, never synced.
 *   entries     the log entry of leaf i at offset 32·i; derived as the hashes are.
 *   checkpoint  the newest signed checkpoint note, durable: two alternating slots of
 *               TG_TLF_SLOT bytes, slot gen % 2 holding generation gen:
 *                 0 "TGTLCKP1" | 8 gen u64 LE | 16 note length u32 LE | 20 note bytes,
 *                 zero padded | TG_TLF_SLOT-32 SHA-256 of the bytes before it
 *               A write goes to the slot the newest valid one is not in, with one fdatasync,
 *               so a torn write leaves the other slot whole. The start takes the valid slot
 *               whose checkpoint has the larger size.
 *
 * The ledger's lock (ledger.lock, held by the open ledger) makes these files one process's.
 * Threads: restore, flush and load before the engine starts; commit on the engine thread;
 * hashes, entries and read on any thread, for indices the published tree covers (files only
 * grow under them while the process runs). */
#ifndef TG_STORE_TLOG_FILE_H
#define TG_STORE_TLOG_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../tlog_engine.h"

#define TG_TLF_DIR "tlog"
#define TG_TLF_SLOT 1024

typedef struct tg_tlog_file tg_tlog_file_t;

/* A handle for <ledger_dir>/tlog; no I/O yet. TG_ERR_NOMEM, TG_ERR_INVALID_ARG. */
tg_err_t tg_tlog_file_new(tg_tlog_file_t **out, const char *ledger_dir) TG_MUST_USE;

/* Creates the directory (0700) and the checkpoint file if missing (synced into their
 * parents), removes the derived files of the last run. Once; later calls return TG_OK.
 * TG_ERR_IO with a diag. */
tg_err_t tg_tlog_file_open(tg_tlog_file_t *tf, tg_diag_t *diag) TG_MUST_USE;

/* Restore: leaf's entry, and (as tg_tlog_store_fn, ctx = tf) each stored hash; buffered
 * until tg_tlog_file_flush. */
tg_err_t tg_tlog_file_put_entry(tg_tlog_file_t *tf, uint64_t leaf, const uint8_t entry[32]);
tg_err_t tg_tlog_file_store(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h);
tg_err_t tg_tlog_file_flush(tg_tlog_file_t *tf) TG_MUST_USE;

/* The stored checkpoint note into note[0..cap) (NUL-terminated), *len its length, *found
 * false when there is none (no file, empty slots, or only a slot torn by a crash during the
 * first write). TG_ERR_LOG_INCONSISTENT when both slots are damaged; TG_ERR_IO. */
tg_err_t tg_tlog_file_load(tg_tlog_file_t *tf, char *note, size_t cap, size_t *len, bool *found,
                           tg_diag_t *diag) TG_MUST_USE;

/* The engine's backend (tg_tle_backend_t, ctx = tf). */
tg_err_t tg_tlog_file_commit(void *ctx, const tg_tle_step_t *step);
/* fdatasync of the checkpoint file: the last commit's slot durable (tg_tle_backend_t.sync). */
tg_err_t tg_tlog_file_sync(void *ctx);
tg_err_t tg_tlog_file_read(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out);

/* n hashes of level from index, n entries from index (pread; the caller checked that the
 * published tree holds them). TG_ERR_IO for a short or failed read. */
tg_err_t tg_tlog_file_hashes(tg_tlog_file_t *tf, unsigned level, uint64_t index, size_t n,
                             uint8_t (*out)[32]) TG_MUST_USE;
tg_err_t tg_tlog_file_entries(tg_tlog_file_t *tf, uint64_t index, size_t n,
                              uint8_t (*out)[32]) TG_MUST_USE;

/* Closes the files; NULL is a no-op. */
void tg_tlog_file_free(tg_tlog_file_t *tf);

#endif /* TG_STORE_TLOG_FILE_H */
