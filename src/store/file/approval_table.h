/* approval_table.h — the file backend's approvals (db.h "approvals"): an in-memory table of
 * (tenant, id) -> the newest durable state, rebuilt at start from the records' meta "a".
 *
 * Nothing here is persisted: the ledger record that carries each version is the truth, and
 * the replay puts the highest version back (tg_approval_table_restore). The hold is a flag
 * per approval, so one writer at a time makes the next version. One mutex for the whole
 * table: approvals are rare (one per escalation, a few steps each), and list and due scan
 * it anyway. Bounded by max_entries (full = TG_ERR_LIMIT, counted); each entry holds a
 * tg_approval_t by value (about 5.5 KiB). Thread-safe except create/destroy. */
#ifndef TG_STORE_APPROVAL_TABLE_H
#define TG_STORE_APPROVAL_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "trigguard/approval.h"
#include "trigguard/db.h"

typedef struct tg_approval_table tg_approval_table_t;

#define TG_APPROVAL_TABLE_DEFAULT_ENTRIES 100000u

/* max_entries 0 = TG_APPROVAL_TABLE_DEFAULT_ENTRIES; retention_ms (> 0) is how long a
 * terminal approval is kept after it resolved. TG_ERR_NOMEM. */
tg_err_t tg_approval_table_create(tg_approval_table_t **out, uint64_t max_entries,
                                  int64_t retention_ms);
void tg_approval_table_destroy(tg_approval_table_t *t);

/* As tg_db_approval_get / _list / _hold / _release / _commit / _room / _restore / _due
 * (arguments already checked by db.c). */
tg_err_t tg_approval_table_get(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                               const char *id, size_t id_len, tg_approval_t *out);
tg_err_t tg_approval_table_list(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                bool all, int status, int64_t now_ms, tg_approval_t *out,
                                size_t max, size_t *n);
tg_err_t tg_approval_table_hold(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                const char *id, size_t id_len, tg_approval_t *cur);
tg_err_t tg_approval_table_release(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                   const char *id, size_t id_len);
tg_err_t tg_approval_table_commit(tg_approval_table_t *t, const tg_approval_t *a);
bool tg_approval_table_room(tg_approval_table_t *t);
tg_err_t tg_approval_table_restore(tg_approval_table_t *t, const tg_approval_t *a);
tg_err_t tg_approval_table_due(tg_approval_table_t *t, int64_t now_ms, tg_db_approval_ref_t *out,
                               size_t max, size_t *n);

/* Calls fn(ud, a) for every approval held (newest version; holds are not state), under the
 * table's lock (fn must not call the table); stops at fn's first error. For snapshots
 * (snapshot.h): tg_approval_table_restore of each rebuilds the table. */
typedef tg_err_t (*tg_approval_each_fn)(void *ud, const tg_approval_t *a);
tg_err_t tg_approval_table_each(tg_approval_table_t *t, tg_approval_each_fn fn, void *ud);

/* Drops terminal approvals (tg_approval_status_at denied, expired or consumed) that ended
 * more than retention_ms before now_ms and are not held, a few buckets per call. */
void tg_approval_table_sweep(tg_approval_table_t *t, int64_t now_ms);

/* entries, max_entries, limit_rejections, expired_reclaimed. */
void tg_approval_table_stats(tg_approval_table_t *t, tg_store_stats_t *out);

#endif /* TG_STORE_APPROVAL_TABLE_H */
