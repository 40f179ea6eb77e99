/* backend.h — what a db backend implements (db.h), as a table of operations: one
 * backend file fills one table, and db.c dispatches every call through it. */
#ifndef TG_STORE_BACKEND_H
#define TG_STORE_BACKEND_H

#include "trigguard/db.h"

/* One entry per db.h operation (minus open, which picks the table), with its contract.
 * Every entry is set; ledger and keys return NULL where the backend has none. */
typedef struct tg_db_ops {
    tg_err_t (*start)(tg_db_t *db, tg_db_replay_fn replay, void *ud, tg_ledger_recovery_t *report,
                      tg_diag_t *diag);
    void (*close)(tg_db_t *db);
    tg_err_t (*claim_key)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                          size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                          tg_idem_result_t *res);
    tg_err_t (*claim_nonce)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                            size_t nonce_len, int64_t now_ms);
    tg_err_t (*release_key)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                            size_t key_len);
    tg_err_t (*release_nonce)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                              size_t nonce_len);
    bool (*receipt_room)(tg_db_t *db, size_t tenant_len, size_t id_len);
    void (*announce)(tg_db_t *db);
    void (*announce_end)(tg_db_t *db);
    tg_err_t (*append)(tg_db_t *db, const tg_db_record_t *rec, tg_db_done_fn done, void *ud);
    tg_err_t (*append_now)(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos);
    tg_err_t (*complete_key)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, int status, const tg_ledger_pos_t *pos,
                             int64_t now_ms);
    tg_err_t (*index_receipt)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                              size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                              int64_t now_ms, tg_ledger_pos_t *existing);
    tg_err_t (*find_receipt)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos);
    tg_err_t (*read)(tg_db_t *db, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                     tg_buf_t *meta_out);
    tg_err_t (*restore_key)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                            size_t key_len, const tg_idem_entry_t *entry, int64_t now_ms);
    tg_err_t (*restore_nonce)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                              size_t nonce_len, int64_t used_at_ms, int64_t now_ms);
    tg_err_t (*limit_total)(tg_db_t *db, const tg_db_limit_ref_t *ref, double *total);
    tg_err_t (*limit_reserve)(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount, double max,
                              double *total_after);
    tg_err_t (*limit_release)(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount);
    tg_err_t (*limit_restore)(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                              int64_t now_ms);
    tg_err_t (*approval_get)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, struct tg_approval *out);
    tg_err_t (*approval_list)(tg_db_t *db, const char *tenant, size_t tenant_len, bool all,
                              int status, int64_t now_ms, struct tg_approval *out, size_t max,
                              size_t *n);
    tg_err_t (*approval_hold)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                              size_t id_len, int64_t now_ms, struct tg_approval *cur);
    tg_err_t (*approval_release)(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len);
    tg_err_t (*approval_commit)(tg_db_t *db, const struct tg_approval *a, int64_t now_ms);
    bool (*approval_room)(tg_db_t *db);
    tg_err_t (*approval_restore)(tg_db_t *db, const struct tg_approval *a, int64_t now_ms);
    tg_err_t (*approval_due)(tg_db_t *db, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                             size_t *n);
    /* The transparency log (db.h): db.c has checked db and the pointers it can. */
    tg_err_t (*log_restore)(tg_db_t *db, uint64_t seq, const uint8_t entry[32]);
    tg_err_t (*log_checkpoint)(tg_db_t *db, tg_buf_t *note, struct tg_checkpoint *cp);
    tg_err_t (*log_hashes)(tg_db_t *db, unsigned level, uint64_t index, size_t n,
                           uint8_t (*out)[32]);
    tg_err_t (*log_entries)(tg_db_t *db, uint64_t index, size_t n, uint8_t (*out)[32]);
    /* NULL: db.c reads the places one by one with log_hashes. */
    tg_err_t (*log_hashes_at)(tg_db_t *db, const tg_db_log_at_t *at, size_t n, uint8_t (*out)[32]);
    tg_err_t (*log_leaf)(tg_db_t *db, const tg_ledger_pos_t *pos, uint64_t *leaf);
    tg_err_t (*log_wait)(tg_db_t *db, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                         tg_db_log_wait_fn fn, void *ud);
    void (*tick)(tg_db_t *db, int64_t now_ms, uint32_t stall_ms);
    bool (*health)(tg_db_t *db, char *why, size_t why_len);
    void (*stats)(tg_db_t *db, tg_db_stats_t *out);
} tg_db_ops_t;

/* Every backend's db begins with this, so db.c can find the table. */
struct tg_db {
    const tg_db_ops_t *ops;
    tg_err_t unavailable; /* tg_db_unavailable's answer, set at open */
};

/* The file backend (file/db_file.c): opts->backend is TG_DB_FILE. */
tg_err_t tg_db_file_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag);

/* The PostgreSQL backend (pg/db_pg.c): opts->backend is TG_DB_POSTGRES. */
tg_err_t tg_db_pg_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag);

#endif /* TG_STORE_BACKEND_H */
