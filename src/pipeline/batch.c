/* batch.c — batch-signed receipts (SPEC §12): the transparency member a receipt is answered
 * with, built from the db's published checkpoint and stored hashes. The receipt's format is
 * receipt.h's; the log is the db's (db.h "the transparency log"). */
#include <string.h>

#include "internal.h"
#include "trigguard/log.h"
#include "trigguard/note.h"
#include "trigguard/receipt.h"
#include "trigguard/tlog.h"

uint32_t tg_pipeline_log_wait_ms(const tg_pipeline_t *p) {
    int64_t t = p->cfg.checkpoint_interval_ms * 10 + 1000;
    int64_t stall = p->cfg.ledger_stall_timeout_ms;
    if (t >= stall) {
        t = stall / 2 > 0 ? stall / 2 : 1;
    }
    return (uint32_t)t;
}

tg_err_t tg_pipeline_add_transparency(tg_pipeline_t *p, tg_buf_t *body, size_t receipt_end,
                                      uint64_t leaf) {
    tg_buf_t note, member;
    tg_checkpoint_t cp;
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF];
    size_t n = 0;
    tg_err_t rc = TG_OK;
    if (!p->log.enabled) {
        return TG_ERR_LOG_DISABLED;
    }
    if (body->data == NULL || receipt_end >= body->len || body->data[receipt_end] != '}') {
        return TG_ERR_INVALID_ARG;
    }
    tg_buf_init(&note, 512);
    tg_buf_init(&member, 2048);
    TG_TRY(tg_db_log_checkpoint(p->db, &note, &cp));
    if (cp.size <= leaf) {
        rc = TG_ERR_LOG_PENDING; /* published, but an older checkpoint than the leaf's */
        goto done;
    }
    /* the proof into the tree the checkpoint names: the newest one, whichever that is now */
    TG_TRY(tg_db_log_inclusion_proof(p->db, leaf, cp.size, proof, &n));
    tg_receipt_transparency_t t = {
        .checkpoint = (const char *)note.data,
        .checkpoint_len = note.len,
        .proof = proof,
        .proof_len = n,
        .leaf_index = leaf,
        .tree_size = cp.size,
        .log_key_id = p->log.pub.key_id,
        .log_origin = p->log.pub.name,
        .log_origin_len = p->log.pub.name_len,
    };
    TG_TRY(tg_receipt_transparency_member(&member, &t));
    TG_TRY(tg_buf_reserve(body, member.len));
    /* before the receipt's closing brace: transparency is its last member (receipt.h) */
    memmove(body->data + receipt_end + member.len, body->data + receipt_end,
            body->len - receipt_end);
    memcpy(body->data + receipt_end, member.data, member.len);
    body->len += member.len;
    body->data[body->len] = '\0';
done:
    tg_buf_free(&note);
    tg_buf_free(&member);
    return rc;
}

/* The first occurrence of needle[0..n) in hay[0..len), or -1. */
static ptrdiff_t find(const char *hay, size_t len, const char *needle, size_t n) {
    for (size_t i = 0; n > 0 && n <= len && i <= len - n; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0) {
            return (ptrdiff_t)i;
        }
    }
    return -1;
}

tg_err_t tg_pipeline_complete_batch(tg_pipeline_t *p, tg_buf_t *body, const char *receipt,
                                    size_t len, const tg_ledger_pos_t *pos) {
    if (receipt == NULL || !tg_receipt_text_is_hashed(receipt, len)) {
        return TG_OK; /* a per-receipt signed receipt is complete as stored */
    }
    if (!p->log.enabled) {
        return TG_ERR_LOG_DISABLED;
    }
    ptrdiff_t at =
        body->data != NULL ? find((const char *)body->data, body->len, receipt, len) : -1;
    if (at < 0 || len < 2) {
        return TG_ERR_NOT_FOUND;
    }
    uint64_t leaf = 0;
    tg_err_t rc = tg_db_log_leaf(p->db, pos, &leaf);
    return rc != TG_OK ? rc : tg_pipeline_add_transparency(p, body, (size_t)at + len - 1, leaf);
}

void tg_pipeline_reply_batch_error(tg_pipeline_t *p, tg_exchange_t *ex, tg_err_t rc,
                                   bool decision) {
    if (rc == TG_ERR_LOG_PENDING) {
        tg_reply_fail(ex, TG_ANSWER_LOG_TIMEOUT,
                      "the receipt is durable, but no signed checkpoint covers it yet; retry "
                      "shortly (with the same idempotency key, or GET /v1/receipts/{id})");
    } else if (rc == TG_ERR_LOG_DISABLED) {
        tg_reply_fail(ex, decision ? TG_ANSWER_BATCH_NO_LOG : TG_ANSWER_LOG_DISABLED,
                      "the receipt is batch-signed and this server keeps no transparency log "
                      "now (started without --log-key)");
    } else if (rc == tg_db_unavailable(p->db)) {
        tg_reply_error(ex, rc, "the log cannot be read now; retry shortly");
    } else {
        TG_LOG(TG_LOG_ERROR, "batch_receipt", "request %s: cannot complete a batch receipt: %s",
               ex->request_id, tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    }
}
