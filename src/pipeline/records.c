/* records.c — the ledger's records read back: the response of an idempotent replay, the
 * tables rebuilt at start, the receipt index, and GET /v1/receipts/{executionId}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/record.h"

/* Adds executionId -> ledger position to the receipt index, live (settle) or while the
 * index is rebuilt from the ledger at start (request_id NULL). An id already indexed for
 * another record is never repointed: GET /v1/receipts keeps answering with the receipt
 * it answered with first, and the collision is an error, logged with both records and
 * counted (trigguard_receipt_index_collisions_total), because two executions with one id
 * mean the derivation (receipt.h) or the ledger is not what it should be. Returns what
 * tg_db_index_receipt returned. */
tg_err_t tg_pipeline_index_receipt(tg_pipeline_t *p, const char *tenant, size_t tenant_len,
                                   const char *exec_id, const tg_ledger_pos_t *pos,
                                   int64_t stamp_ms, int64_t now_ms, const char *request_id) {
    tg_ledger_pos_t first;
    tg_err_t rc = tg_db_index_receipt(p->db, tenant, tenant_len, exec_id, strlen(exec_id), pos,
                                      stamp_ms, now_ms, &first);
    if (rc == TG_ERR_CONFLICT) {
        unsigned long long first_seq = (unsigned long long)first.seq;
        atomic_fetch_add_explicit(&p->metrics.receipt_index_collisions, 1, memory_order_relaxed);
        if (request_id != NULL) {
            TG_LOG(TG_LOG_ERROR, "receipt_index_collision",
                   "request %s: executionId %s (tenant %.*s) is already indexed for ledger seq "
                   "%llu; this request's receipt is at seq %llu, but GET /v1/receipts keeps "
                   "returning seq %llu",
                   request_id, exec_id, (int)tenant_len, tenant, first_seq,
                   (unsigned long long)pos->seq, first_seq);
        } else {
            TG_LOG(TG_LOG_ERROR, "receipt_index_collision",
                   "ledger seq %llu: executionId %s (tenant %.*s) is already indexed for seq "
                   "%llu; GET /v1/receipts keeps returning seq %llu, the first",
                   (unsigned long long)pos->seq, exec_id, (int)tenant_len, tenant, first_seq,
                   first_seq);
        }
    }
    return rc;
}

/* ---- restart: rebuild the tables from the ledger ------------------------------------ */

/* An idempotent replay: the stored entry says where the request's record is; the response
 * is rebuilt from it by tg_record_response, with the writer that built the original, so the
 * bytes are the same (without a ?explain trace, which is never stored). */
tg_err_t tg_pipeline_replay_response(tg_pipeline_t *p, const tg_ledger_pos_t *pos, tg_buf_t *out,
                                     bool *permit) {
    tg_buf_t payload, meta;
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_record_view_t v;
    tg_err_t rc = tg_db_read(p->db, pos, &payload, &meta);
    if (rc == TG_OK) {
        rc = tg_record_view(&v, meta.data, meta.len, payload.data, payload.len);
    }
    if (rc == TG_OK && v.decision == NULL) {
        rc = TG_ERR_LEDGER_CORRUPT; /* a redemption answered no decision: never replayed */
        tg_record_view_free(&v);
    } else if (rc == TG_OK) {
        /* an observe answer is a 200 on every route, whatever it would have been */
        *permit = v.observe || strcmp(v.decision, "PERMIT") == 0;
        tg_buf_reset(out);
        rc = tg_record_response(out, &v, payload.data, payload.len);
        if (rc == TG_OK && v.receipt) {
            /* a batch receipt gets its transparency member from the newest checkpoint */
            rc = tg_pipeline_complete_batch(p, out, (const char *)payload.data, payload.len, pos);
        }
        tg_record_view_free(&v);
    }
    tg_buf_free(&payload);
    tg_buf_free(&meta);
    return rc;
}

/* One record's effect on db's tables. live: db is the daemon's own (p->db): tables that are
 * too small are counted for tg_pipeline_replay_check, collisions logged and counted, the log
 * leaf restored; otherwise db is the snapshot thread's private copy (db.h snapshot), which
 * gets the same restores and touches nothing else of p. */
static tg_err_t replay_into(tg_pipeline_t *p, tg_db_t *db, bool live,
                            const tg_ledger_record_t *rec) {
    uint64_t unfit_store = 0, unfit_limits = 0, unfit_approvals = 0, unfit_receipts = 0;
    tg_record_view_t v;
    tg_err_t rc = tg_record_view(&v, rec->meta, rec->meta_len, rec->payload, rec->payload_len);
    if (rc != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "ledger_replay",
               "record seq %llu: metadata or payload is not what this server writes",
               (unsigned long long)rec->seq);
        return TG_ERR_LEDGER_CORRUPT;
    }
    int64_t now = tg_clock_now_ms();
    /* A table too small for the ledger's live entries (a restart with smaller caps) is not
     * a reason to stop reading: every entry that does not fit is counted, so that the start
     * is refused afterwards with how many there are (tg_pipeline_replay_check). Dropping
     * them instead would let a forgotten idempotency key or nonce run its request again,
     * and make receipts already handed out unreadable through GET /v1/receipts. */
    const tg_record_meta_t *m = &v.meta;
    if (m->key.ptr != NULL) {
        tg_idem_entry_t done = {.status = m->status, .pos = rec->pos, .stored_at_ms = m->at_ms};
        memcpy(done.request_hash, v.claim_hash,
               sizeof done.request_hash); /* what the key is bound to */
        rc =
            tg_db_restore_key(db, m->tenant.ptr, m->tenant.len, m->key.ptr, m->key.len, &done, now);
        if (rc == TG_ERR_LIMIT) {
            unfit_store++;
            rc = TG_OK;
        }
    }
    if (rc == TG_OK && m->nonce.ptr != NULL) {
        rc = tg_db_restore_nonce(db, m->tenant.ptr, m->tenant.len, m->nonce.ptr, m->nonce.len,
                                 m->at_ms, now);
        if (rc == TG_ERR_LIMIT) {
            unfit_store++;
            rc = TG_OK;
        }
    }
    /* A PERMIT's reservations count again (record.h "l"); expired windows are skipped.
     * Every contribution that does not fit is counted: starting without it would let
     * requests pass a cap, so the start is refused (tg_pipeline_replay_check). */
    for (size_t i = 0; rc == TG_OK && i < m->n_limits; i++) {
        const tg_record_limit_t *l = &m->limits[i];
        tg_db_limit_ref_t ref = {.limit = l->limit.ptr,
                                 .limit_len = l->limit.len,
                                 .window_start_s = l->window_start_s,
                                 .window_s = l->window_s};
        memcpy(ref.key, l->key, sizeof ref.key);
        rc = tg_db_limit_restore(db, &ref, l->amount, now);
        if (rc == TG_ERR_LIMIT) {
            unfit_limits++;
            rc = TG_OK;
        } else if (rc == TG_ERR_INVALID_ARG) {
            rc = TG_ERR_LEDGER_CORRUPT; /* not what this server writes */
        }
    }
    /* An approval's newest state (record.h meta "a"; the highest version wins): open
     * approvals survive a restart. One that does not fit is counted like a key: starting
     * without it would forget a review or a consumption, so the start is refused. */
    if (rc == TG_OK && v.has_approval) {
        rc = tg_db_approval_restore(db, v.approval, now);
        if (rc == TG_ERR_LIMIT) {
            unfit_approvals++;
            rc = TG_OK;
        } else if (rc == TG_ERR_INVALID_ARG) {
            rc = TG_ERR_LEDGER_CORRUPT;
        }
    }
    if (rc == TG_OK && rec->type == TG_LEDGER_TYPE_RECEIPT) {
        /* the id is ours: "exec_" + 32 hex (the index needs it NUL-terminated) */
        char id[TG_RECEIPT_EXEC_ID_LEN + 1];
        (void)snprintf(id, sizeof id, "%.*s", (int)v.execution_id.len, v.execution_id.ptr);
        rc = live ? tg_pipeline_index_receipt(p, m->tenant.ptr, m->tenant.len, id, &rec->pos,
                                              m->at_ms, now, NULL)
                  : tg_db_index_receipt(db, m->tenant.ptr, m->tenant.len, id, strlen(id), &rec->pos,
                                        m->at_ms, now, NULL);
        if (rc == TG_ERR_LIMIT) {
            unfit_receipts++;
        }
        if (rc == TG_ERR_LIMIT || rc == TG_ERR_CONFLICT) {
            rc = TG_OK; /* counted (and a collision logged): the start decides */
        }
    }
    /* SPEC §12: every record is a leaf of the log, in ledger order; the tree rebuilt here
     * must reproduce the log's stored checkpoint, which tg_db_start checks after the replay
     * (a failure here fails the start). Without a log this does nothing. */
    if (rc == TG_OK && live) { /* the private copy of a snapshot has no log (db.h) */
        uint8_t entry[32];
        rc = tg_record_log_entry(entry, rec->type, rec->payload, rec->payload_len, v.payload_doc);
        if (rc == TG_OK) {
            rc = tg_db_log_restore(db, rec->seq, entry);
        }
        if (rc != TG_OK) {
            TG_LOG(TG_LOG_ERROR, "log_replay", "record seq %llu: cannot add its log leaf: %s",
                   (unsigned long long)rec->seq, tg_strerror(rc));
        }
    }
    if (rc == TG_OK && live) {
        p->replayed_records++;
        p->replay_unfit_store += unfit_store;
        p->replay_unfit_limits += unfit_limits;
        p->replay_unfit_approvals += unfit_approvals;
        p->replay_unfit_receipts += unfit_receipts;
    } else if (rc == TG_OK && unfit_store + unfit_limits + unfit_approvals + unfit_receipts > 0) {
        rc = TG_ERR_LIMIT; /* a private copy that cannot hold the state is no snapshot */
    }
    tg_record_view_free(&v);
    return rc;
}

tg_err_t tg_pipeline_replay_record(void *ud, const tg_ledger_record_t *rec) {
    tg_pipeline_t *p = ud;
    return replay_into(p, p->db, true, rec);
}

tg_err_t tg_pipeline_replay_into(void *ud, tg_db_t *into, const tg_ledger_record_t *rec) {
    tg_pipeline_t *p = ud;
    return replay_into(p, into, into == p->db, rec);
}

/* One table's verdict after the replay: TG_OK, or TG_ERR_CONFIG with the numbers, in a log
 * line of its own (both tables may be too small) and, shorter, in diag. */
static tg_err_t unfit_check(const tg_pipeline_t *p, const tg_store_stats_t *st, uint64_t unfit,
                            const char *what, const char *why, tg_diag_t *diag) {
    if (unfit == 0) {
        return TG_OK;
    }
    unsigned long long need = (unsigned long long)st->entries + (unsigned long long)unfit;
    /* full by count, else by bytes */
    bool by_count = st->entries >= st->max_entries;
    const char *flag = by_count ? "--store-max-entries" : "--store-max-bytes";
    unsigned long long cap = (unsigned long long)(by_count ? st->max_entries : st->max_bytes);
    TG_LOG(TG_LOG_ERROR, "store_too_small",
           "%s: the ledger holds %llu live entries (within --retention %llds), %llu more than "
           "%s %llu admits (%llu entries, %llu bytes held); starting would drop them and %s",
           what, need, (long long)p->cfg.retention_s, (unsigned long long)unfit, flag, cap,
           (unsigned long long)st->entries, (unsigned long long)st->bytes, why);
    if (by_count) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "%s: the ledger holds %llu live entries but --store-max-entries is "
                           "%llu; start refused, none dropped: use --store-max-entries %llu or "
                           "more",
                           what, need, cap, need);
    }
    return tg_diag_set(diag, TG_ERR_CONFIG,
                       "%s: the ledger holds %llu live entries, %llu more than --store-max-bytes "
                       "%llu holds; start refused, none dropped: raise --store-max-bytes",
                       what, need, (unsigned long long)unfit, cap);
}

tg_err_t tg_pipeline_replay_check(const tg_pipeline_t *p, tg_diag_t *diag) {
    tg_diag_t second = {{0}};
    tg_db_stats_t st;
    tg_db_stats(p->db, &st);
    tg_err_t rc = unfit_check(p, &st.keys, p->replay_unfit_store, "idempotency keys and nonces",
                              "their requests could run a second time", diag);
    tg_err_t rc2 = unfit_check(p, &st.receipts, p->replay_unfit_receipts, "receipt index",
                               "GET /v1/receipts would not find receipts already handed out",
                               rc == TG_OK ? diag : &second);
    if (rc == TG_OK && rc2 == TG_OK && p->replay_unfit_limits > 0) {
        TG_LOG(TG_LOG_ERROR, "limit_table_too_small",
               "limit totals: %llu contributions of the ledger do not fit --limit-entries %llu; "
               "starting would let requests pass their caps",
               (unsigned long long)p->replay_unfit_limits,
               (unsigned long long)st.limits.max_entries);
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "limit totals: %llu contributions do not fit --limit-entries %llu; "
                           "start refused: raise --limit-entries",
                           (unsigned long long)p->replay_unfit_limits,
                           (unsigned long long)st.limits.max_entries);
    }
    if (rc == TG_OK && rc2 == TG_OK && p->replay_unfit_approvals > 0) {
        TG_LOG(TG_LOG_ERROR, "approval_table_too_small",
               "approvals: %llu of the ledger do not fit --approval-entries %llu; starting "
               "would forget their reviews and consumptions",
               (unsigned long long)p->replay_unfit_approvals,
               (unsigned long long)st.approvals.max_entries);
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "approvals: %llu do not fit --approval-entries %llu; start refused: "
                           "raise --approval-entries",
                           (unsigned long long)p->replay_unfit_approvals,
                           (unsigned long long)st.approvals.max_entries);
    }
    return rc != TG_OK ? rc : rc2;
}

/* ---- GET /v1/receipts/{executionId} -------------------------------------------------- */

static bool find_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const tg_tenants_t *t,
                         const tg_principal_t *pr, const char *exec_id, size_t len,
                         tg_ledger_pos_t *pos);

bool tg_pipeline_find_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const char *exec_id,
                              size_t exec_id_len, tg_ledger_pos_t *pos) {
    tg_swap_ref_t th;
    const tg_tenants_t *t = tg_pipeline_tenants_acquire(p, &th);
    tg_auth_t a;
    const char *why = NULL;
    bool found = false;
    tg_err_t rc = tg_pipeline_auth(p, t, ex->authorization, ex->request_id, &a, &why);
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, why);
    } else {
        found = find_receipt(p, ex, t, a.principal, exec_id, exec_id_len, pos);
    }
    tg_pipeline_auth_end(&a);
    tg_pipeline_tenants_release(p, &th);
    return found;
}

static bool find_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const tg_tenants_t *t,
                         const tg_principal_t *pr, const char *exec_id, size_t len,
                         tg_ledger_pos_t *pos) {
    tg_pipeline_log_principal(ex, t, pr); /* the routes never defer */
    if (!tg_role_may_read_receipts(pr->role)) {
        char msg[128];
        (void)snprintf(msg, sizeof msg,
                       "a token with role \"%s\" may not read receipts (caller, executor and "
                       "admin tokens may)",
                       tg_role_name(pr->role));
        tg_reply_fail(ex, TG_ANSWER_ROLE_NOT_ALLOWED, msg);
        return false;
    }
    int tenant = pr->tenant;
    size_t tl = 0;
    const char *tn = tg_tenants_name(t, tenant, &tl);
    bool ok = tn != NULL && len == TG_RECEIPT_EXEC_ID_LEN && strncmp(exec_id, "exec_", 5) == 0;
    for (size_t i = 5; ok && i < TG_RECEIPT_EXEC_ID_LEN; i++) {
        char c = exec_id[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    }
    tg_err_t rc = ok ? tg_db_find_receipt(p->db, tn, tl, exec_id, len, tg_clock_now_ms(), pos)
                     : TG_ERR_NOT_FOUND;
    if (rc == tg_db_unavailable(p->db)) {
        /* The store cannot answer now: that is not "no such receipt" (an auditor would
         * read it so). */
        tg_reply_error(ex, rc, "the record store cannot be read now; retry shortly");
        return false;
    }
    if (rc != TG_OK) {
        /* Another tenant's receipt is indistinguishable from a missing one. */
        tg_reply_error(ex, TG_ERR_NOT_FOUND, "no receipt with this executionId for this tenant");
        return false;
    }
    return true;
}

void tg_pipeline_get_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const char *exec_id) {
    tg_ledger_pos_t pos;
    if (!tg_pipeline_find_receipt(p, ex, exec_id, strlen(exec_id), &pos)) {
        return;
    }
    tg_buf_reset(&ex->out);
    tg_err_t rc = tg_db_read(p->db, &pos, &ex->out, NULL);
    if (rc == tg_db_unavailable(p->db)) {
        tg_reply_error(ex, rc, "the record store cannot be read now; retry shortly");
        return;
    }
    if (rc != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "receipt_read", "ledger read of seq %llu failed: %s",
               (unsigned long long)pos.seq, tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    /* A batch receipt is stored in its hashed form: it is answered with its transparency
     * member from the newest checkpoint, as its first answer was (SPEC §12). */
    if (tg_receipt_text_is_hashed((const char *)ex->out.data, ex->out.len)) {
        uint64_t leaf = 0;
        rc = p->log.enabled ? tg_db_log_leaf(p->db, &pos, &leaf) : TG_ERR_LOG_DISABLED;
        if (rc == TG_OK && ex->out.len > 0) {
            rc = tg_pipeline_add_transparency(p, &ex->out, ex->out.len - 1, leaf);
        }
        if (rc != TG_OK) {
            tg_pipeline_reply_batch_error(p, ex, rc, false);
            return;
        }
    }
    tg_reply_ok(ex, TG_ANSWER_OK);
    ex->content_type_out = "application/trigguard-receipt+json";
}
