/* db.c — the db interface (db.h): picks a backend at open, then forwards each call to it. */
#include "trigguard/db.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "trigguard/approval.h"
#include "trigguard/guard.h"
#include "trigguard/tlog.h"

tg_err_t tg_db_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag) {
    if (out == NULL || opts == NULL) {
        if (out != NULL) {
            *out = NULL;
        }
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: out or opts is NULL");
    }
    *out = NULL;
    switch (opts->backend) {
    case TG_DB_FILE:
        return tg_db_file_open(out, opts, diag);
    case TG_DB_POSTGRES:
        return tg_db_pg_open(out, opts, diag);
    }
    return tg_diag_set(diag, TG_ERR_CONFIG, "db: backend %d is not built in", (int)opts->backend);
}

tg_err_t tg_db_start(tg_db_t *db, tg_db_replay_fn replay, void *ud, tg_ledger_recovery_t *report,
                     tg_diag_t *diag) {
    if (db == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: NULL");
    }
    return db->ops->start(db, replay, ud, report, diag);
}

void tg_db_close(tg_db_t *db) {
    if (db != NULL) {
        db->ops->close(db);
    }
}

tg_err_t tg_db_claim_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                         size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                         tg_idem_result_t *res) {
    if (db == NULL) {
        if (res != NULL) {
            memset(res, 0, sizeof *res);
        }
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->claim_key(db, tenant, tenant_len, key, key_len, request_hash, now_ms, res);
}

tg_err_t tg_db_claim_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                           size_t nonce_len, int64_t now_ms) {
    return db == NULL ? TG_ERR_INVALID_ARG
                      : db->ops->claim_nonce(db, tenant, tenant_len, nonce, nonce_len, now_ms);
}

tg_err_t tg_db_release_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                           size_t key_len) {
    return db == NULL ? TG_ERR_INVALID_ARG
                      : db->ops->release_key(db, tenant, tenant_len, key, key_len);
}

tg_err_t tg_db_release_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                             size_t nonce_len) {
    return db == NULL ? TG_ERR_INVALID_ARG
                      : db->ops->release_nonce(db, tenant, tenant_len, nonce, nonce_len);
}

bool tg_db_receipt_room(tg_db_t *db, size_t tenant_len, size_t id_len) {
    return db != NULL && db->ops->receipt_room(db, tenant_len, id_len);
}

void tg_db_announce(tg_db_t *db) {
    if (db != NULL) {
        db->ops->announce(db);
    }
}

void tg_db_announce_end(tg_db_t *db) {
    if (db != NULL) {
        db->ops->announce_end(db);
    }
}

static bool approval_ok(const tg_approval_t *a);

/* A record's approval (db.h): a valid state of the record's own tenant, in every backend. */
static bool record_approval_ok(const tg_db_record_t *rec) {
    const tg_approval_t *a = rec->approval;
    return a == NULL || (approval_ok(a) && rec->tenant != NULL &&
                         strnlen(a->tenant, sizeof a->tenant) == rec->tenant_len &&
                         memcmp(a->tenant, rec->tenant, rec->tenant_len) == 0);
}

tg_err_t tg_db_append(tg_db_t *db, const tg_db_record_t *rec, tg_db_done_fn done, void *ud) {
    return db == NULL || rec == NULL || !record_approval_ok(rec)
               ? TG_ERR_INVALID_ARG
               : db->ops->append(db, rec, done, ud);
}

tg_err_t tg_db_append_now(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos) {
    return db == NULL || rec == NULL || !record_approval_ok(rec)
               ? TG_ERR_INVALID_ARG
               : db->ops->append_now(db, rec, pos);
}

tg_err_t tg_db_complete_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                            size_t key_len, int status, const tg_ledger_pos_t *pos,
                            int64_t now_ms) {
    return db == NULL
               ? TG_ERR_INVALID_ARG
               : db->ops->complete_key(db, tenant, tenant_len, key, key_len, status, pos, now_ms);
}

tg_err_t tg_db_index_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                             int64_t now_ms, tg_ledger_pos_t *existing) {
    if (db == NULL) {
        if (existing != NULL) {
            memset(existing, 0, sizeof *existing);
        }
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->index_receipt(db, tenant, tenant_len, id, id_len, pos, stamp_ms, now_ms,
                                  existing);
}

tg_err_t tg_db_find_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) {
    if (db == NULL) {
        if (pos != NULL) {
            memset(pos, 0, sizeof *pos);
        }
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->find_receipt(db, tenant, tenant_len, id, id_len, now_ms, pos);
}

tg_err_t tg_db_read(tg_db_t *db, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                    tg_buf_t *meta_out) {
    return db == NULL ? TG_ERR_INVALID_ARG : db->ops->read(db, pos, payload_out, meta_out);
}

tg_err_t tg_db_restore_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                           size_t key_len, const tg_idem_entry_t *entry, int64_t now_ms) {
    return db == NULL ? TG_ERR_INVALID_ARG
                      : db->ops->restore_key(db, tenant, tenant_len, key, key_len, entry, now_ms);
}

tg_err_t tg_db_restore_nonce(tg_db_t *db, const char *tenant, size_t tenant_len, const char *nonce,
                             size_t nonce_len, int64_t used_at_ms, int64_t now_ms) {
    return db == NULL ? TG_ERR_INVALID_ARG
                      : db->ops->restore_nonce(db, tenant, tenant_len, nonce, nonce_len, used_at_ms,
                                               now_ms);
}

/* A limit entry's reference: a name of 1..TG_DB_LIMIT_NAME_MAX bytes and a window of
 * 1..31 days starting at or after the epoch. */
static bool limit_ref_ok(const tg_db_limit_ref_t *ref) {
    return ref != NULL && ref->limit != NULL && ref->limit_len > 0 &&
           ref->limit_len <= TG_DB_LIMIT_NAME_MAX && ref->window_s > 0 &&
           ref->window_s <= (int64_t)31 * 86400 && ref->window_start_s >= 0;
}

static bool amount_ok(double a) { return a >= 0.0 && isfinite(a); }

tg_err_t tg_db_limit_total(tg_db_t *db, const tg_db_limit_ref_t *ref, double *total) {
    if (total != NULL) {
        *total = 0;
    }
    if (db == NULL || total == NULL || !limit_ref_ok(ref)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->limit_total(db, ref, total);
}

tg_err_t tg_db_limit_reserve(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount, double max,
                             double *total_after) {
    if (total_after != NULL) {
        *total_after = 0;
    }
    if (db == NULL || total_after == NULL || !limit_ref_ok(ref) || !amount_ok(amount) ||
        !amount_ok(max)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->limit_reserve(db, ref, amount, max, total_after);
}

tg_err_t tg_db_limit_release(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount) {
    if (db == NULL || !limit_ref_ok(ref) || !amount_ok(amount)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->limit_release(db, ref, amount);
}

tg_err_t tg_db_limit_restore(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                             int64_t now_ms) {
    if (db == NULL || !limit_ref_ok(ref) || !amount_ok(amount)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->limit_restore(db, ref, amount, now_ms);
}

/* ---- approvals ----
 * The arguments every backend relies on are checked here once: a tenant of
 * 1..TG_GUARD_TENANT_NAME_MAX bytes and an id shaped as tg_approval_new_id makes them. */
static bool approval_key_ok(const char *tenant, size_t tenant_len, const char *id, size_t id_len) {
    return tenant != NULL && tenant_len > 0 && tenant_len <= TG_GUARD_TENANT_NAME_MAX &&
           id != NULL && tg_approval_id_valid(id, id_len);
}

/* A state to store: its key as above (NUL-terminated within its arrays) and a version. */
static bool approval_ok(const tg_approval_t *a) {
    if (a == NULL || a->version == 0 || a->status >= TG_APPROVAL__COUNT) {
        return false;
    }
    size_t tl = strnlen(a->tenant, sizeof a->tenant);
    size_t il = strnlen(a->id, sizeof a->id);
    return tl < sizeof a->tenant && il < sizeof a->id && approval_key_ok(a->tenant, tl, a->id, il);
}

tg_err_t tg_db_approval_get(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, tg_approval_t *out) {
    if (db == NULL || out == NULL || !approval_key_ok(tenant, tenant_len, id, id_len)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_get(db, tenant, tenant_len, id, id_len, out);
}

tg_err_t tg_db_approval_list(tg_db_t *db, const char *tenant, size_t tenant_len, bool all,
                             int status, int64_t now_ms, tg_approval_t *out, size_t max,
                             size_t *n) {
    if (n != NULL) {
        *n = 0;
    }
    if (db == NULL || n == NULL || (out == NULL && max > 0) || tenant == NULL || tenant_len == 0 ||
        tenant_len > TG_GUARD_TENANT_NAME_MAX ||
        (!all && (status < 0 || status >= (int)TG_APPROVAL__COUNT))) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_list(db, tenant, tenant_len, all, status, now_ms, out, max, n);
}

tg_err_t tg_db_approval_hold(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                             size_t id_len, int64_t now_ms, tg_approval_t *cur) {
    if (db == NULL || cur == NULL || !approval_key_ok(tenant, tenant_len, id, id_len)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_hold(db, tenant, tenant_len, id, id_len, now_ms, cur);
}

tg_err_t tg_db_approval_release(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len) {
    if (db == NULL || !approval_key_ok(tenant, tenant_len, id, id_len)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_release(db, tenant, tenant_len, id, id_len);
}

tg_err_t tg_db_approval_commit(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    if (db == NULL || !approval_ok(a)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_commit(db, a, now_ms);
}

bool tg_db_approval_room(tg_db_t *db) { return db != NULL && db->ops->approval_room(db); }

tg_err_t tg_db_approval_restore(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    if (db == NULL || !approval_ok(a)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_restore(db, a, now_ms);
}

tg_err_t tg_db_approval_due(tg_db_t *db, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                            size_t *n) {
    if (n != NULL) {
        *n = 0;
    }
    if (db == NULL || n == NULL || (out == NULL && max > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->approval_due(db, now_ms, out, max, n);
}

/* ---- the transparency log ---- */

tg_err_t tg_db_log_restore(tg_db_t *db, uint64_t seq, const uint8_t entry[32]) {
    if (db == NULL || entry == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->log_restore(db, seq, entry);
}

tg_err_t tg_db_log_checkpoint(tg_db_t *db, tg_buf_t *note, struct tg_checkpoint *cp) {
    return db == NULL ? TG_ERR_INVALID_ARG : db->ops->log_checkpoint(db, note, cp);
}

tg_err_t tg_db_log_hashes(tg_db_t *db, unsigned level, uint64_t index, size_t n,
                          uint8_t (*out)[32]) {
    if (db == NULL || n > 256 || (out == NULL && n > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->log_hashes(db, level, index, n, out);
}

tg_err_t tg_db_log_hashes_at(tg_db_t *db, const tg_db_log_at_t *at, size_t n, uint8_t (*out)[32]) {
    if (db == NULL || n > TG_DB_LOG_AT_MAX || (n > 0 && (at == NULL || out == NULL))) {
        return TG_ERR_INVALID_ARG;
    }
    if (db->ops->log_hashes_at != NULL) {
        return db->ops->log_hashes_at(db, at, n, out);
    }
    for (size_t i = 0; i < n; i++) {
        tg_err_t rc = db->ops->log_hashes(db, at[i].level, at[i].index, 1, &out[i]);
        if (rc != TG_OK) {
            return rc;
        }
    }
    return TG_OK;
}

/* The two passes of a proof (db.h): the first records where the generator reads (and
 * answers zeros: it never looks at them), the second answers from what one fetch got, in
 * the same order. */
typedef struct proof_reads {
    tg_db_log_at_t at[TG_DB_LOG_AT_MAX];
    uint8_t h[TG_DB_LOG_AT_MAX][32];
    size_t n, next;
    bool over;
} proof_reads_t;

static tg_err_t read_record(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    proof_reads_t *r = ctx;
    memset(out->h, 0, sizeof out->h);
    if (r->n == TG_DB_LOG_AT_MAX) {
        r->over = true;
    } else {
        r->at[r->n++] = (tg_db_log_at_t){index, level};
    }
    return TG_OK;
}

static tg_err_t read_replay(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    proof_reads_t *r = ctx;
    if (r->next >= r->n || r->at[r->next].level != level || r->at[r->next].index != index) {
        return TG_ERR_INTERNAL; /* the generator read elsewhere the second time */
    }
    memcpy(out->h, r->h[r->next++], sizeof out->h);
    return TG_OK;
}

static tg_err_t read_one(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    return tg_db_log_hashes(ctx, level, index, 1, &out->h);
}

typedef tg_err_t (*proof_gen_fn)(tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], size_t *len,
                                 const tg_tlog_reader_t *rd, uint64_t a, uint64_t b);

static tg_err_t proof_from_db(tg_db_t *db, proof_gen_fn gen, uint64_t a, uint64_t b,
                              tg_tlog_hash_t *proof, size_t *len) {
    if (db == NULL || proof == NULL || len == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    proof_reads_t *r = malloc(sizeof *r); /* 12 KiB: not on an event thread's stack */
    if (r == NULL) {
        return TG_ERR_NOMEM;
    }
    r->n = r->next = 0;
    r->over = false;
    tg_tlog_reader_t rd = {read_record, r};
    tg_err_t rc = gen(proof, len, &rd, a, b);
    if (rc == TG_OK && r->over) {
        rd = (tg_tlog_reader_t){read_one, db}; /* more places than one fetch takes */
        rc = gen(proof, len, &rd, a, b);
    } else if (rc == TG_OK) {
        rc = tg_db_log_hashes_at(db, r->at, r->n, r->h);
        rd = (tg_tlog_reader_t){read_replay, r};
        rc = rc != TG_OK ? rc : gen(proof, len, &rd, a, b);
    }
    free(r);
    return rc;
}

tg_err_t tg_db_log_inclusion_proof(tg_db_t *db, uint64_t leaf, uint64_t size, tg_tlog_hash_t *proof,
                                   size_t *len) {
    return proof_from_db(db, tg_tlog_inclusion_proof, leaf, size, proof, len);
}

tg_err_t tg_db_log_consistency_proof(tg_db_t *db, uint64_t old, uint64_t size,
                                     tg_tlog_hash_t *proof, size_t *len) {
    return proof_from_db(db, tg_tlog_consistency_proof, old, size, proof, len);
}

tg_err_t tg_db_log_entries(tg_db_t *db, uint64_t index, size_t n, uint8_t (*out)[32]) {
    if (db == NULL || n > 256 || (out == NULL && n > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->log_entries(db, index, n, out);
}

tg_err_t tg_db_log_leaf(tg_db_t *db, const tg_ledger_pos_t *pos, uint64_t *leaf) {
    if (db == NULL || pos == NULL || leaf == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *leaf = 0;
    return db->ops->log_leaf(db, pos, leaf);
}

tg_err_t tg_db_log_wait(tg_db_t *db, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                        tg_db_log_wait_fn fn, void *ud) {
    if (db == NULL || pos == NULL || fn == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    return db->ops->log_wait(db, pos, timeout_ms, fn, ud);
}

void tg_db_tick(tg_db_t *db, int64_t now_ms, uint32_t stall_ms) {
    if (db != NULL) {
        db->ops->tick(db, now_ms, stall_ms);
    }
}

bool tg_db_health(tg_db_t *db, char *why, size_t why_len) {
    if (db == NULL) {
        if (why != NULL && why_len > 0) {
            why[0] = '\0';
        }
        return false;
    }
    return db->ops->health(db, why, why_len);
}

void tg_db_stats(tg_db_t *db, tg_db_stats_t *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (db != NULL) {
        db->ops->stats(db, out);
    }
}

tg_err_t tg_db_unavailable(const tg_db_t *db) {
    return db != NULL ? db->unavailable : TG_ERR_LEDGER_UNHEALTHY;
}
