/* redeem.c — POST /v1/receipts/{executionId}/redeem (issue 20): an executor redeems a PERMIT
 * receipt, once.
 *
 * Single use is the db's nonce claim (db.h) in a namespace no caller can send
 * (TG_RECORD_REDEEM_NONCE_PREFIX + executionId, record.h): the claim is exclusive on every
 * instance, the redemption record consumes it in the same durable step (file: the ledger
 * record, replayed at start; pg: the nonce row updated in the record's transaction, fenced),
 * and it is released only when the record was never written. docs/DESIGN.md, "Redemption",
 * has the reasoning; docs/API.md the order of the checks, which is the order below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/record.h"

/* What a redemption's record claims, for the settle below. */
typedef struct redeem_claim {
    char tenant[TG_GUARD_TENANT_NAME_MAX + 1];
    size_t tenant_len;
    char nonce[TG_RECORD_REDEEM_NONCE_LEN + 1];
    size_t nonce_len;
} redeem_claim_t;

/* tg_pipeline_append_wait's settle: a claim whose record was never written is released, so
 * the receipt stays redeemable (every instance and any restart agree that no redemption
 * happened); a durable one keeps it for good. */
static void settle_claim(tg_pipeline_t *p, void *state, tg_err_t status) {
    const redeem_claim_t *c = state;
    if (status != TG_OK) {
        TG_IGNORE(tg_db_release_nonce(p->db, c->tenant, c->tenant_len, c->nonce, c->nonce_len));
    }
}

/* Step 7: the redemption record, durable before the 200. TG_OK, or the error the request
 * ends in (the claim released unless the record may still become durable). */
static tg_err_t make_durable(tg_pipeline_t *p, const tg_db_record_t *rec) {
    redeem_claim_t c;
    memset(&c, 0, sizeof c);
    memcpy(c.tenant, rec->tenant, rec->tenant_len);
    c.tenant_len = rec->tenant_len;
    memcpy(c.nonce, rec->nonce, rec->nonce_len);
    c.nonce_len = rec->nonce_len;
    return tg_pipeline_append_wait(p, rec, settle_claim, &c, sizeof c, "a redemption's");
}

/* The body: exactly {"request_hash": "<64 lowercase hex>"}; 400 otherwise. */
static bool body_hash(tg_pipeline_t *p, tg_exchange_t *ex, char out[65]) {
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        return false;
    }
    if (!tg_http_content_type_is_json(ex->content_type)) {
        tg_reply_fail(ex, TG_ANSWER_UNSUPPORTED_MEDIA, "Content-Type must be application/json");
        return false;
    }
    json_t *doc = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&doc, ex->body, ex->body_len, &p->limits, &diag);
    if (rc != TG_OK) {
        tg_reply_json_error(ex, &p->limits, rc, diag.msg);
        return false;
    }
    const json_t *h = json_object_get(doc, "request_hash");
    bool ok = json_is_object(doc) && json_object_size(doc) == 1 && json_is_string(h) &&
              json_string_length(h) == 64;
    const char *s = ok ? json_string_value(h) : "";
    for (size_t i = 0; ok && i < 64; i++) {
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    }
    if (ok) {
        memcpy(out, s, 64);
        out[64] = '\0';
    }
    json_decref(doc);
    if (!ok) {
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST,
                      "the body must be {\"request_hash\": \"<64 lowercase hex>\"} and nothing "
                      "else");
    }
    return ok;
}

/* Whether id is one of ours: "exec_" + 32 lowercase hex (anything else cannot be indexed). */
static bool exec_id_ok(const char *id, size_t n) {
    bool ok = n == TG_RECEIPT_EXEC_ID_LEN && strncmp(id, "exec_", 5) == 0;
    for (size_t i = 5; ok && i < n; i++) {
        ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
    }
    return ok;
}

/* What the receipt's checks found (steps 3-5). */
typedef struct {
    tg_redeem_result_t result; /* TG_REDEEM_OK: redeemable */
    char receipt_hash[65];
} receipt_check_t;

/* Steps 3-5 on the receipt text: authentic with the current key set, a PERMIT, unexpired,
 * and bound to the executor's request hash. */
static receipt_check_t check_receipt(tg_pipeline_t *p, const tg_buf_t *payload,
                                     const char *want_hash) {
    receipt_check_t c = {TG_REDEEM_NOT_AUTHENTIC, ""};
    json_t *doc = NULL;
    if (tg_json_parse(&doc, payload->data, payload->len, NULL, NULL) != TG_OK) {
        return c;
    }
    tg_swap_ref_t kh;
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    tg_err_t rc = tg_receipt_verify(&ks->ring, doc, tg_clock_now_ms(), NULL);
    tg_pipeline_keys_release(p, &kh);
    const char *dec = json_string_value(json_object_get(doc, "decision"));
    const char *rh = json_string_value(json_object_get(doc, "requestHash"));
    const char *hash = json_string_value(json_object_get(doc, "receiptHash"));
    /* A verified receipt always has both hashes: one without them is not authentic. */
    bool authentic = (rc == TG_OK || rc == TG_ERR_RECEIPT_EXPIRED) && rh != NULL &&
                     strlen(rh) == 64 && hash != NULL && strlen(hash) == 64;
    if (!authentic) {
        c.result = TG_REDEEM_NOT_AUTHENTIC; /* e.g. its key left the key set */
    } else if (dec == NULL || strcmp(dec, "PERMIT") != 0 ||
               json_object_get(doc, "executionMode") != NULL) {
        /* an observe receipt's PERMIT authorizes nothing (SPEC §11.1) */
        c.result = TG_REDEEM_NOT_PERMIT;
    } else if (rc == TG_ERR_RECEIPT_EXPIRED) {
        c.result = TG_REDEEM_EXPIRED;
    } else if (sodium_memcmp(rh, want_hash, 64) != 0) {
        /* Not a secret; constant time anyway, as it costs nothing here. */
        c.result = TG_REDEEM_HASH_MISMATCH;
    } else {
        c.result = TG_REDEEM_OK;
        memcpy(c.receipt_hash, hash, 65);
    }
    json_decref(doc);
    return c;
}

/* 200: {"execution_id","receipt","redeemed","redeemed_at","request_hash"}. */
static tg_err_t ok_body(tg_buf_t *o, const char *exec_id, const tg_buf_t *receipt, const char *when,
                        const char *req_hash) {
    tg_err_t rc = tg_buf_printf(o, "{\"execution_id\":\"%s\",\"receipt\":", exec_id);
    if (rc == TG_OK) {
        rc = tg_buf_append(o, receipt->data, receipt->len);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, ",\"redeemed\":true,\"redeemed_at\":\"%s\",\"request_hash\":\"%s\"}",
                           when, req_hash);
    }
    return rc;
}

static const tg_answer_t result_answer[TG_REDEEM__COUNT] = {
    [TG_REDEEM_OK] = TG_ANSWER_OK,
    [TG_REDEEM_NOT_FOUND] = TG_ANSWER_NOT_FOUND,
    [TG_REDEEM_NOT_AUTHENTIC] = TG_ANSWER_RECEIPT_NOT_AUTHENTIC,
    [TG_REDEEM_NOT_PERMIT] = TG_ANSWER_RECEIPT_NOT_PERMIT,
    [TG_REDEEM_EXPIRED] = TG_ANSWER_RECEIPT_EXPIRED,
    [TG_REDEEM_HASH_MISMATCH] = TG_ANSWER_REQUEST_HASH_MISMATCH,
    [TG_REDEEM_ALREADY] = TG_ANSWER_RECEIPT_ALREADY_REDEEMED,
};

static const char *const result_message[TG_REDEEM__COUNT] = {
    [TG_REDEEM_NOT_FOUND] = "no receipt with this executionId for this tenant",
    [TG_REDEEM_NOT_AUTHENTIC] = "the receipt no longer verifies with the current key set",
    [TG_REDEEM_NOT_PERMIT] = "only a PERMIT receipt can be redeemed",
    [TG_REDEEM_EXPIRED] = "the receipt has expired (expiresAt)",
    [TG_REDEEM_HASH_MISMATCH] = "the receipt authorizes another action (requestHash)",
    [TG_REDEEM_ALREADY] = "this receipt was already redeemed (or its redemption is in flight)",
};

/* Steps 2-7 for an executor of tenant tn (tl bytes); answers ex, returns the result. */
static tg_redeem_result_t redeem(tg_pipeline_t *p, tg_exchange_t *ex, const char *tn, size_t tl,
                                 const char *id, size_t id_len, const char *want_hash) {
    /* 2: the receipt, in this tenant's index (another tenant's is a missing one) */
    tg_ledger_pos_t pos;
    char exec_id[TG_RECEIPT_EXEC_ID_LEN + 1] = "";
    tg_err_t rc = TG_ERR_NOT_FOUND;
    if (exec_id_ok(id, id_len)) {
        memcpy(exec_id, id, id_len);
        exec_id[id_len] = '\0';
        rc = tg_db_find_receipt(p->db, tn, tl, exec_id, id_len, tg_clock_now_ms(), &pos);
    }
    tg_buf_t payload, meta;
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    if (rc == TG_OK) {
        rc = tg_db_read(p->db, &pos, &payload, &meta);
    }
    tg_redeem_result_t res = TG_REDEEM_NOT_FOUND;
    receipt_check_t chk = {TG_REDEEM_NOT_FOUND, ""};
    tg_err_t brc = TG_OK;
    if (rc == TG_OK && tg_receipt_text_is_hashed((const char *)payload.data, payload.len)) {
        /* a batch receipt (SPEC §12): verified, and answered, with its transparency member */
        uint64_t leaf = 0;
        brc = p->log.enabled ? tg_db_log_leaf(p->db, &pos, &leaf) : TG_ERR_LOG_DISABLED;
        if (brc == TG_OK && payload.len > 0) {
            brc = tg_pipeline_add_transparency(p, &payload, payload.len - 1, leaf);
        }
    }
    if (brc != TG_OK) {
        tg_pipeline_reply_batch_error(p, ex, brc, false);
        res = TG_REDEEM_UNAVAILABLE;
    } else if (rc == tg_db_unavailable(p->db)) {
        tg_reply_error(ex, rc, "the record store cannot be read now; retry shortly");
        res = TG_REDEEM_UNAVAILABLE;
    } else if (rc == TG_ERR_NOT_FOUND) {
        res = TG_REDEEM_NOT_FOUND;
    } else if (rc != TG_OK) {
        TG_LOG(TG_LOG_ERROR, "redeem_read", "ledger read of seq %llu failed: %s",
               (unsigned long long)pos.seq, tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        res = TG_REDEEM_ERROR;
    } else {
        /* 3-5 */
        chk = check_receipt(p, &payload, want_hash);
        res = chk.result;
    }
    if (res != TG_REDEEM_OK) {
        if (res != TG_REDEEM_UNAVAILABLE && res != TG_REDEEM_ERROR) {
            tg_reply_fail(ex, result_answer[res], result_message[res]);
        }
        tg_buf_free(&payload);
        tg_buf_free(&meta);
        return res;
    }
    /* 6: the claim, exclusive on every instance */
    char nonce[TG_RECORD_REDEEM_NONCE_LEN + 1];
    int nl = snprintf(nonce, sizeof nonce, "%s%s", TG_RECORD_REDEEM_NONCE_PREFIX, exec_id);
    int64_t now = tg_clock_now_ms();
    rc = tg_db_claim_nonce(p->db, tn, tl, nonce, (size_t)nl, now);
    if (rc == TG_ERR_REPLAY) {
        res = TG_REDEEM_ALREADY;
        tg_reply_fail(ex, result_answer[res], result_message[res]);
    } else if (rc != TG_OK) {
        res = TG_REDEEM_UNAVAILABLE;
        tg_reply_error(ex, rc == TG_ERR_LIMIT ? TG_ERR_OVERLOADED : rc,
                       "the redemption cannot be recorded now; retry shortly");
    }
    /* 7: the redemption record, durable before the answer (fail closed) */
    char when[TG_TIME_ISO_LEN + 1];
    tg_buf_t rec_payload, rec_meta;
    tg_buf_init(&rec_payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&rec_meta, TG_LEDGER_META_MAX);
    if (res == TG_REDEEM_OK) {
        tg_record_redemption_t r = {.execution_id = {exec_id, id_len},
                                    .tenant = {tn, tl},
                                    .request_hash = {want_hash, 64},
                                    .receipt_hash = {chk.receipt_hash, 64},
                                    .at_ms = now};
        tg_record_meta_t m = {.at_ms = now,
                              .nonce = {nonce, (size_t)nl},
                              .request_hash = {want_hash, 64},
                              .status = 200,
                              .tenant = {tn, tl}};
        uint8_t req_hash[32];
        rc = tg_record_redemption_write(&rec_payload, &r);
        rc = rc ? rc : tg_record_meta_write(&rec_meta, &m);
        rc = rc ? rc : tg_unhex(req_hash, 32, want_hash, 64);
        rc = rc ? rc : tg_time_format_ms(when, now);
        if (rc != TG_OK) {
            TG_IGNORE(tg_db_release_nonce(p->db, tn, tl, nonce, (size_t)nl));
        } else {
            const tg_db_record_t rec = {.type = TG_LEDGER_TYPE_REDEMPTION,
                                        .meta = rec_meta.data,
                                        .meta_len = rec_meta.len,
                                        .payload = rec_payload.data,
                                        .payload_len = rec_payload.len,
                                        .tenant = tn,
                                        .tenant_len = tl,
                                        .nonce = nonce,
                                        .nonce_len = (size_t)nl,
                                        .exec_id = exec_id,
                                        .exec_id_len = id_len,
                                        .request_hash = req_hash,
                                        .status = 200,
                                        .at_ms = now};
            rc = make_durable(p, &rec);
        }
        if (rc == TG_OK) {
            tg_buf_reset(&ex->out);
            tg_reply_built(ex, ok_body(&ex->out, exec_id, &payload, when, want_hash), TG_ANSWER_OK);
        } else if (rc == TG_ERR_OVERLOADED) {
            res = TG_REDEEM_UNAVAILABLE;
            tg_reply_error(ex, rc, "the record queue is full; retry shortly");
        } else if (rc == TG_ERR_NOMEM || rc == TG_ERR_INVALID_ARG || rc == TG_ERR_LIMIT) {
            res = TG_REDEEM_ERROR;
            TG_LOG(TG_LOG_ERROR, "redeem_record", "redemption record of %s not written: %s",
                   exec_id, tg_strerror(rc));
            tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        } else {
            res = TG_REDEEM_UNAVAILABLE;
            tg_reply_error(ex, tg_db_unavailable(p->db),
                           "the redemption was not made durable; the receipt is not redeemed, "
                           "retry shortly");
        }
    }
    tg_buf_free(&rec_payload);
    tg_buf_free(&rec_meta);
    tg_buf_free(&payload);
    tg_buf_free(&meta);
    return res;
}

/* Step 1, under the tenant table: an executor of the tenant, its rate, the body. On
 * TG_REDEEM_OK the tenant's name is in tn (the table is released before the record is waited
 * for: a waiting redemption holds no tokens, so a reload never waits for a disk). */
static tg_redeem_result_t admit_principal(tg_pipeline_t *p, tg_exchange_t *ex,
                                          const tg_tenants_t *t, const tg_principal_t *pr,
                                          char tn[TG_GUARD_TENANT_NAME_MAX + 1], size_t *tl,
                                          char want[65]);

static tg_redeem_result_t admit(tg_pipeline_t *p, tg_exchange_t *ex, const tg_tenants_t *t,
                                char tn[TG_GUARD_TENANT_NAME_MAX + 1], size_t *tl, char want[65]) {
    /* 1: an executor of the tenant (a token, or a JWT caller mapped to role executor) */
    tg_auth_t a;
    const char *why = NULL;
    tg_err_t rc = tg_pipeline_auth(p, t, ex->authorization, ex->request_id, &a, &why);
    tg_redeem_result_t res = TG_REDEEM_REFUSED;
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, why);
    } else {
        res = admit_principal(p, ex, t, a.principal, tn, tl, want);
    }
    tg_pipeline_auth_end(&a); /* nothing of the principal is used past here */
    return res;
}

static tg_redeem_result_t admit_principal(tg_pipeline_t *p, tg_exchange_t *ex,
                                          const tg_tenants_t *t, const tg_principal_t *pr,
                                          char tn[TG_GUARD_TENANT_NAME_MAX + 1], size_t *tl,
                                          char want[65]) {
    tg_pipeline_log_principal(ex, t, pr); /* the route waits for its record, never defers */
    if (pr->role != TG_ROLE_EXECUTOR) {
        char msg[128];
        (void)snprintf(msg, sizeof msg,
                       "a token with role \"%s\" may not redeem receipts (executor tokens may)",
                       tg_role_name(pr->role));
        tg_reply_fail(ex, TG_ANSWER_ROLE_NOT_ALLOWED, msg);
        return TG_REDEEM_REFUSED;
    }
    tg_rate_info_t info;
    if (tg_rate_check(p->rate, pr->tenant, tg_clock_mono_ns(), &info) != TG_OK) {
        ex->retry_after_s = (int)tg_rate_retry_after_s(info.retry_after_ms);
        tg_reply_error(ex, TG_ERR_RATE_LIMITED, "rate limit exceeded");
        return TG_REDEEM_REFUSED;
    }
    if (!body_hash(p, ex, want)) {
        return TG_REDEEM_REFUSED;
    }
    const char *name = tg_tenants_name(t, pr->tenant, tl);
    if (name == NULL || *tl > TG_GUARD_TENANT_NAME_MAX) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return TG_REDEEM_ERROR;
    }
    memcpy(tn, name, *tl);
    tn[*tl] = '\0';
    return TG_REDEEM_OK;
}

void tg_route_redeem(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    tg_swap_ref_t th;
    const tg_tenants_t *t = tg_pipeline_tenants_acquire(p, &th);
    char tn[TG_GUARD_TENANT_NAME_MAX + 1];
    size_t tl = 0;
    char want[65];
    tg_redeem_result_t res = admit(p, ex, t, tn, &tl, want);
    tg_pipeline_tenants_release(p, &th);
    if (res == TG_REDEEM_OK) {
        /* rest is "{executionId}/redeem" (routes.c) */
        const char *slash = strchr(rest, '/');
        size_t id_len = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
        res = redeem(p, ex, tn, tl, rest, id_len, want);
    }
    tg_metrics_redeem(&p->metrics, res);
}
