/* db_file.c — the file backend of db.h: the in-memory tables of store.h, rebuilt at
 * start from the ledger directory that keeps every record (ledger.h). */
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "approval_table.h"
#include "limit_table.h"

typedef struct file_db {
    tg_db_t base; /* first: db.c reads base.ops */
    tg_store_t *keys;
    tg_receipts_t *receipts;
    tg_limit_table_t *limits;
    tg_approval_table_t *approvals;
    tg_ledger_t *ledger; /* NULL until start */
    tg_ledger_opts_t ledger_opts;
} file_db_t;

/* db is always the base of a file_db_t: db.c only calls the ops of its own table. */
static file_db_t *fs_of(tg_db_t *db) { return (file_db_t *)db; }

static tg_err_t fs_start(tg_db_t *db, tg_db_replay_fn replay, void *ud,
                         tg_ledger_recovery_t *report, tg_diag_t *diag) {
    file_db_t *fs = fs_of(db);
    if (fs->ledger != NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: started twice");
    }
    return tg_ledger_open(&fs->ledger, &fs->ledger_opts, replay, ud, report, diag);
}

static void fs_close(tg_db_t *db) {
    file_db_t *fs = fs_of(db);
    /* The ledger first: its last done callbacks may still settle claims in the tables. */
    tg_ledger_close(fs->ledger);
    tg_store_destroy(fs->keys);
    tg_receipts_destroy(fs->receipts);
    tg_limit_table_destroy(fs->limits);
    tg_approval_table_destroy(fs->approvals);
    free(fs);
}

static tg_err_t fs_claim_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) {
    return tg_store_idem_begin(fs_of(db)->keys, tenant, tenant_len, key, key_len, request_hash,
                               now_ms, res);
}

static tg_err_t fs_claim_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                               const char *nonce, size_t nonce_len, int64_t now_ms) {
    return tg_store_nonce_use(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len, now_ms);
}

static tg_err_t fs_release_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len) {
    return tg_store_idem_abort(fs_of(db)->keys, tenant, tenant_len, key, key_len);
}

static tg_err_t fs_release_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len) {
    return tg_store_nonce_release(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len);
}

static bool fs_receipt_room(tg_db_t *db, size_t tenant_len, size_t id_len) {
    return tg_receipts_has_room(fs_of(db)->receipts, tenant_len, id_len);
}

static void fs_announce(tg_db_t *db) { tg_ledger_announce(fs_of(db)->ledger); }

static void fs_announce_end(tg_db_t *db) { tg_ledger_announce_end(fs_of(db)->ledger); }

/* meta carries the record's claims for the replay at start, so the typed copy in rec is not
 * needed here: the ledger stores type, meta and payload. */
static tg_err_t fs_append(tg_db_t *db, const tg_db_record_t *rec, tg_db_done_fn done, void *ud) {
    return tg_ledger_append(fs_of(db)->ledger, rec->type, rec->meta, rec->meta_len, rec->payload,
                            rec->payload_len, done, ud);
}

static tg_err_t fs_append_now(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos) {
    return tg_ledger_append_now(fs_of(db)->ledger, rec->type, rec->meta, rec->meta_len,
                                rec->payload, rec->payload_len, pos);
}

static tg_err_t fs_complete_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                                size_t key_len, int status, const tg_ledger_pos_t *pos,
                                int64_t now_ms) {
    return tg_store_idem_complete(fs_of(db)->keys, tenant, tenant_len, key, key_len, status, pos,
                                  now_ms);
}

static tg_err_t fs_index_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                                 int64_t now_ms, tg_ledger_pos_t *existing) {
    return tg_receipts_insert(fs_of(db)->receipts, tenant, tenant_len, id, id_len, pos, stamp_ms,
                              now_ms, existing);
}

static tg_err_t fs_find_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) {
    return tg_receipts_get(fs_of(db)->receipts, tenant, tenant_len, id, id_len, now_ms, pos);
}

static tg_err_t fs_read(tg_db_t *db, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                        tg_buf_t *meta_out) {
    return tg_ledger_read_at(fs_of(db)->ledger, pos, payload_out, meta_out, NULL);
}

static tg_err_t fs_restore_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len, const tg_idem_entry_t *entry, int64_t now_ms) {
    return tg_store_idem_restore(fs_of(db)->keys, tenant, tenant_len, key, key_len, entry, now_ms);
}

static tg_err_t fs_restore_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len, int64_t used_at_ms,
                                 int64_t now_ms) {
    return tg_store_nonce_restore(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len, used_at_ms,
                                  now_ms);
}

static tg_err_t fs_limit_total(tg_db_t *db, const tg_db_limit_ref_t *ref, double *total) {
    return tg_limit_table_total(fs_of(db)->limits, ref, total);
}

static tg_err_t fs_limit_reserve(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                                 double max, double *total_after) {
    return tg_limit_table_reserve(fs_of(db)->limits, ref, amount, max, total_after);
}

static tg_err_t fs_limit_release(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount) {
    return tg_limit_table_release(fs_of(db)->limits, ref, amount);
}

static tg_err_t fs_limit_restore(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                                 int64_t now_ms) {
    return tg_limit_table_restore(fs_of(db)->limits, ref, amount, now_ms);
}

static tg_err_t fs_approval_get(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, tg_approval_t *out) {
    return tg_approval_table_get(fs_of(db)->approvals, tenant, tenant_len, id, id_len, out);
}

static tg_err_t fs_approval_list(tg_db_t *db, const char *tenant, size_t tenant_len, bool all,
                                 int status, int64_t now_ms, tg_approval_t *out, size_t max,
                                 size_t *n) {
    return tg_approval_table_list(fs_of(db)->approvals, tenant, tenant_len, all, status, now_ms,
                                  out, max, n);
}

/* The hold is a flag in memory: one process owns the ledger, so there is no lease. */
static tg_err_t fs_approval_hold(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len, int64_t now_ms, tg_approval_t *cur) {
    (void)now_ms;
    return tg_approval_table_hold(fs_of(db)->approvals, tenant, tenant_len, id, id_len, cur);
}

static tg_err_t fs_approval_release(tg_db_t *db, const char *tenant, size_t tenant_len,
                                    const char *id, size_t id_len) {
    return tg_approval_table_release(fs_of(db)->approvals, tenant, tenant_len, id, id_len);
}

static tg_err_t fs_approval_commit(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    (void)now_ms;
    return tg_approval_table_commit(fs_of(db)->approvals, a);
}

static bool fs_approval_room(tg_db_t *db) { return tg_approval_table_room(fs_of(db)->approvals); }

static tg_err_t fs_approval_restore(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    (void)now_ms;
    return tg_approval_table_restore(fs_of(db)->approvals, a);
}

static tg_err_t fs_approval_due(tg_db_t *db, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                                size_t *n) {
    return tg_approval_table_due(fs_of(db)->approvals, now_ms, out, max, n);
}

static void fs_tick(tg_db_t *db, int64_t now_ms, uint32_t stall_ms) {
    file_db_t *fs = fs_of(db);
    (void)tg_store_sweep(fs->keys, now_ms);
    (void)tg_receipts_sweep(fs->receipts, now_ms);
    tg_limit_table_sweep(fs->limits, now_ms);
    tg_approval_table_sweep(fs->approvals, now_ms);
    if (fs->ledger != NULL) {
        /* An idle ledger notices a deleted or moved directory too (and keeps the evidence)
         * within a tick, not only at the next decision: /readyz tells the truth. */
        (void)tg_ledger_check_identity(fs->ledger);
        /* A disk that stops answering fails nothing by itself: declare the stall (new
         * records fail fast, /readyz 503); the caller then answers whoever waited. */
        (void)tg_ledger_watch(fs->ledger, stall_ms);
    }
}

static bool fs_health(tg_db_t *db, char *why, size_t why_len) {
    return tg_ledger_health(fs_of(db)->ledger, why, why_len);
}

static void fs_stats(tg_db_t *db, tg_db_stats_t *out) {
    tg_store_stats(fs_of(db)->keys, &out->keys);
    tg_receipts_stats(fs_of(db)->receipts, &out->receipts);
    tg_ledger_stats(fs_of(db)->ledger, &out->records);
    tg_limit_table_stats(fs_of(db)->limits, &out->limits);
    tg_approval_table_stats(fs_of(db)->approvals, &out->approvals);
}

static const tg_db_ops_t file_ops = {
    .start = fs_start,
    .close = fs_close,
    .claim_key = fs_claim_key,
    .claim_nonce = fs_claim_nonce,
    .release_key = fs_release_key,
    .release_nonce = fs_release_nonce,
    .receipt_room = fs_receipt_room,
    .announce = fs_announce,
    .announce_end = fs_announce_end,
    .append = fs_append,
    .append_now = fs_append_now,
    .complete_key = fs_complete_key,
    .index_receipt = fs_index_receipt,
    .find_receipt = fs_find_receipt,
    .read = fs_read,
    .restore_key = fs_restore_key,
    .restore_nonce = fs_restore_nonce,
    .limit_total = fs_limit_total,
    .limit_reserve = fs_limit_reserve,
    .limit_release = fs_limit_release,
    .limit_restore = fs_limit_restore,
    .approval_get = fs_approval_get,
    .approval_list = fs_approval_list,
    .approval_hold = fs_approval_hold,
    .approval_release = fs_approval_release,
    .approval_commit = fs_approval_commit,
    .approval_room = fs_approval_room,
    .approval_restore = fs_approval_restore,
    .approval_due = fs_approval_due,
    .tick = fs_tick,
    .health = fs_health,
    .stats = fs_stats,
};

tg_err_t tg_db_file_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag) {
    file_db_t *fs = calloc(1, sizeof *fs);
    if (fs == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    fs->base.ops = &file_ops;
    fs->base.unavailable = TG_ERR_LEDGER_UNHEALTHY;
    fs->ledger_opts = opts->ledger;
    tg_err_t rc = tg_store_create(&fs->keys, &opts->keys, diag);
    if (rc == TG_OK) {
        rc = tg_receipts_create(&fs->receipts, &opts->receipts, diag);
    }
    if (rc == TG_OK && tg_limit_table_create(&fs->limits, opts->limit_entries) != TG_OK) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    /* Terminal approvals are kept as long as the keys are (opts.keys retention_ms, 0 = its
     * default of 24 h, which the table applies). */
    if (rc == TG_OK && tg_approval_table_create(&fs->approvals, opts->approval_entries,
                                                opts->keys.retention_ms) != TG_OK) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    if (rc != TG_OK) {
        fs_close(&fs->base);
        return rc;
    }
    *out = &fs->base;
    return TG_OK;
}
