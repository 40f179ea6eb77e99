/* limit_table.h — the file backend's limit totals (db.h "stateful limits"): an in-memory
 * table of (limit name, key, window start) -> total, rebuilt at start from the ledger.
 *
 * Sharded by the entry's hash, one mutex per shard, so that requests on different keys do
 * not serialize; a reservation is a check and an add under its shard's lock, which is what
 * makes concurrent requests unable to pass a cap together. Bounded by max_entries (full =
 * TG_ERR_LIMIT, counted); entries whose window has ended are dropped by the sweep, or
 * reused in place when met by a lookup. Thread-safe except create/destroy. */
#ifndef TG_STORE_LIMIT_TABLE_H
#define TG_STORE_LIMIT_TABLE_H

#include <stdint.h>

#include "trigguard/db.h"

typedef struct tg_limit_table tg_limit_table_t;

#define TG_LIMIT_TABLE_DEFAULT_ENTRIES 1000000u

/* max_entries 0 = TG_LIMIT_TABLE_DEFAULT_ENTRIES. TG_ERR_NOMEM. */
tg_err_t tg_limit_table_create(tg_limit_table_t **out, uint64_t max_entries);
void tg_limit_table_destroy(tg_limit_table_t *t);

/* As tg_db_limit_total / _reserve / _release / _restore (arguments already checked). */
tg_err_t tg_limit_table_total(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double *total);
tg_err_t tg_limit_table_reserve(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount,
                                double max, double *total_after);
tg_err_t tg_limit_table_release(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount);
tg_err_t tg_limit_table_restore(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount,
                                int64_t now_ms);

/* Calls fn(ud, ref, total) for every entry whose window is still open at now_ms, under its
 * shard's lock (fn must not call the table); stops at fn's first error. tg_limit_table_restore
 * of each (ref, total) into an empty table rebuilds the same totals (snapshot.h). */
typedef tg_err_t (*tg_limit_each_fn)(void *ud, const tg_db_limit_ref_t *ref, double total);
tg_err_t tg_limit_table_each(tg_limit_table_t *t, int64_t now_ms, tg_limit_each_fn fn, void *ud);

/* Drops entries whose window ended before now_ms, a few shards per call. */
void tg_limit_table_sweep(tg_limit_table_t *t, int64_t now_ms);

/* entries, max_entries, limit_rejections, expired_reclaimed. */
void tg_limit_table_stats(tg_limit_table_t *t, tg_store_stats_t *out);

#endif /* TG_STORE_LIMIT_TABLE_H */
