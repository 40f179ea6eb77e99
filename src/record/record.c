/* record.c — the ledger record's meta and SILENCE payload, written and read back (record.h). */
#include "trigguard/record.h"

#include <stdlib.h>
#include <string.h>

#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/ledger.h"
#include "trigguard/policy.h"
#include "trigguard/sha256.h"

/* Appends each string in turn, stopping at the first error. The meta is built on every
 * decision (and the response it goes with on every replay): printf's format parsing cost
 * more than the rest of building them. */
static tg_err_t put_strs(tg_buf_t *b, const char *const *parts, size_t n) {
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        rc = tg_buf_puts(b, parts[i]);
    }
    return rc;
}
#define PUT_STRS(b, ...)                                                                           \
    put_strs((b), (const char *const[]){__VA_ARGS__},                                              \
             sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* The meta's "l" member (record.h): one array per contribution, members in a fixed order. */
static tg_err_t meta_limits(tg_buf_t *out, const tg_record_limit_t *l, size_t n) {
    if (l == NULL || n > TG_RECORD_MAX_LIMITS) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc = tg_buf_puts(out, ",\"l\":[");
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        char num[TG_CANON_NUMBER_MAX + 1];
        size_t len = 0;
        if (l[i].limit.ptr == NULL || !(l[i].amount >= 0) ||
            tg_canon_number(num, &len, l[i].amount) != TG_OK) {
            return TG_ERR_INVALID_ARG;
        }
        num[len] = '\0';
        rc = tg_buf_puts(out, i ? ",[" : "[");
        if (rc == TG_OK) {
            rc = tg_canon_string(out, l[i].limit.ptr, l[i].limit.len);
        }
        if (rc == TG_OK) {
            rc = tg_buf_puts(out, ",\"");
        }
        if (rc == TG_OK) {
            rc = tg_buf_hex(out, l[i].key, 32);
        }
        if (rc == TG_OK) {
            rc = tg_buf_puts(out, "\",");
        }
        if (rc == TG_OK) {
            rc = tg_buf_put_i64(out, l[i].window_start_s);
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(out, ',');
        }
        if (rc == TG_OK) {
            rc = tg_buf_put_i64(out, l[i].window_s);
        }
        if (rc == TG_OK) {
            rc = PUT_STRS(out, ",", num, "]");
        }
    }
    return rc == TG_OK ? tg_buf_putc(out, ']') : rc;
}

tg_err_t tg_record_meta_write(tg_buf_t *out, const tg_record_meta_t *m) {
    if (out == NULL || m == NULL || m->tenant.ptr == NULL || m->request_hash.ptr == NULL ||
        m->request_hash.len != 64) {
        return TG_ERR_INVALID_ARG;
    }
    char rh[65];
    memcpy(rh, m->request_hash.ptr, 64);
    rh[64] = '\0';
    tg_err_t rc = tg_buf_putc(out, '{');
    /* "a" sorts first: the approval's document, embedded as the object it is. */
    if (rc == TG_OK && m->approval != NULL) {
        rc = tg_buf_puts(out, "\"a\":");
        if (rc == TG_OK) {
            rc = tg_approval_write(out, m->approval);
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(out, ',');
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "\"at\":");
    }
    if (rc == TG_OK) {
        rc = tg_buf_put_i64(out, m->at_ms);
    }
    if (rc == TG_OK && m->claim_hash.ptr != NULL) {
        if (m->claim_hash.len != 64) {
            return TG_ERR_INVALID_ARG;
        }
        char ch[65];
        memcpy(ch, m->claim_hash.ptr, 64);
        ch[64] = '\0';
        rc = PUT_STRS(out, ",\"ch\":\"", ch, "\"");
    }
    if (rc == TG_OK && m->key.ptr != NULL) {
        rc = tg_buf_puts(out, ",\"k\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(out, m->key.ptr, m->key.len);
        }
    }
    if (rc == TG_OK && m->n_limits > 0) {
        rc = meta_limits(out, m->limits, m->n_limits);
    }
    if (rc == TG_OK && m->nonce.ptr != NULL) {
        rc = tg_buf_puts(out, ",\"n\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(out, m->nonce.ptr, m->nonce.len);
        }
    }
    if (rc == TG_OK) {
        rc = PUT_STRS(out, ",\"rh\":\"", rh, "\",\"s\":");
    }
    if (rc == TG_OK) {
        rc = tg_buf_put_i64(out, m->status);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, ",\"t\":");
    }
    if (rc == TG_OK) {
        rc = tg_canon_string(out, m->tenant.ptr, m->tenant.len);
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(out, '}');
    }
    return rc;
}

/* Sets member k to the string view v (skipped when v.ptr is NULL); nonzero on failure. */
static int set_sv(json_t *o, const char *k, tg_text_t v) {
    return v.ptr == NULL ? 0 : json_object_set_new(o, k, json_stringn(v.ptr, v.len));
}

tg_err_t tg_record_silence_write(tg_buf_t *out, const tg_record_silence_t *s) {
    if (out == NULL || s == NULL || s->execution_id.ptr == NULL || s->tenant.ptr == NULL ||
        s->surface.ptr == NULL || s->reason.ptr == NULL || s->request_hash.ptr == NULL ||
        s->policy_version.ptr == NULL || s->policy_hash.ptr == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    char ts[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(ts, s->at_ms);
    if (rc != TG_OK) {
        return rc;
    }
    json_t *o = json_object();
    if (o == NULL) {
        return TG_ERR_NOMEM;
    }
    /* Built as a tree and written canonically: SILENCE is the rare path, and the canonical
     * writer orders the members (record.h lists them in that order). */
    int bad = json_object_set_new(o, "type", json_string("silence"));
    bad |= set_sv(o, "executionId", s->execution_id);
    bad |= set_sv(o, "tenantId", s->tenant);
    bad |= set_sv(o, "surface", s->surface);
    bad |= set_sv(o, "action", s->action);
    bad |= set_sv(o, "actorId", s->actor);
    bad |= json_object_set_new(o, "decision", json_string("SILENCE"));
    bad |= set_sv(o, "detail", s->detail);
    bad |= set_sv(o, "reasonCode", s->reason);
    bad |= set_sv(o, "requestHash", s->request_hash);
    bad |= set_sv(o, "policyVersion", s->policy_version);
    bad |= set_sv(o, "policyHash", s->policy_hash);
    bad |= json_object_set_new(o, "timestamp", json_string(ts));
    rc = bad ? TG_ERR_NOMEM : tg_canon_write(out, o, NULL);
    json_decref(o);
    return rc;
}

tg_err_t tg_record_redemption_write(tg_buf_t *out, const tg_record_redemption_t *r) {
    if (out == NULL || r == NULL || r->execution_id.ptr == NULL || r->tenant.ptr == NULL ||
        r->request_hash.ptr == NULL || r->receipt_hash.ptr == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    char ts[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(ts, r->at_ms);
    if (rc != TG_OK) {
        return rc;
    }
    json_t *o = json_object();
    if (o == NULL) {
        return TG_ERR_NOMEM;
    }
    /* One per redemption, a rare path next to decisions: a tree, written canonically. */
    int bad = json_object_set_new(o, "type", json_string("redemption"));
    bad |= set_sv(o, "executionId", r->execution_id);
    bad |= set_sv(o, "tenantId", r->tenant);
    bad |= set_sv(o, "requestHash", r->request_hash);
    bad |= set_sv(o, "receiptHash", r->receipt_hash);
    bad |= json_object_set_new(o, "redeemedAt", json_string(ts));
    rc = bad ? TG_ERR_NOMEM : tg_canon_write(out, o, NULL);
    json_decref(o);
    return rc;
}

static bool hex64(tg_text_t t) {
    if (t.ptr == NULL || t.len != 64) {
        return false;
    }
    for (size_t i = 0; i < 64; i++) {
        char c = t.ptr[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* Whether t names an approval status (approval.h). */
static bool status_text(tg_text_t t) {
    tg_approval_status_t st;
    return t.ptr != NULL && tg_approval_status_parse(&st, t.ptr, t.len);
}

tg_err_t tg_record_approval_event_write(tg_buf_t *out, const tg_record_approval_event_t *e) {
    if (out == NULL || e == NULL || !tg_approval_id_valid(e->approval_id.ptr, e->approval_id.len) ||
        e->tenant.ptr == NULL || e->tenant.len == 0 || !hex64(e->request_hash) ||
        !status_text(e->status)) {
        return TG_ERR_INVALID_ARG;
    }
    /* The review-only members belong to a review, and only to one. */
    if (e->review
            ? e->subject.ptr == NULL || e->subject.len == 0 ||
                  e->subject.len > TG_GUARD_SUBJECT_MAX || e->entry >= TG_APPROVAL_MAX_APPROVERS ||
                  (e->comment.ptr != NULL && e->comment.len > TG_APPROVAL_COMMENT_MAX)
            : e->subject.ptr != NULL || e->comment.ptr != NULL) {
        return TG_ERR_INVALID_ARG;
    }
    char ts[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(ts, e->at_ms);
    if (rc != TG_OK) {
        return rc;
    }
    json_t *o = json_object();
    if (o == NULL) {
        return TG_ERR_NOMEM;
    }
    /* One per review or expiry, a rare path: a tree, written canonically. */
    int bad = json_object_set_new(o, "type", json_string("approval"));
    bad |= set_sv(o, "approvalId", e->approval_id);
    bad |= json_object_set_new(o, "at", json_string(ts));
    bad |= json_object_set_new(o, "event", json_string(e->review ? "review" : "expire"));
    if (e->review) {
        bad |= set_sv(o, "comment", e->comment);
        bad |= json_object_set_new(o, "decision", json_string(e->approve ? "approve" : "deny"));
        bad |= json_object_set_new(o, "entry", json_integer((json_int_t)e->entry));
        bad |= set_sv(o, "subject", e->subject);
    }
    bad |= set_sv(o, "requestHash", e->request_hash);
    bad |= set_sv(o, "status", e->status);
    bad |= set_sv(o, "tenantId", e->tenant);
    rc = bad ? TG_ERR_NOMEM : tg_canon_write(out, o, NULL);
    json_decref(o);
    return rc;
}

/* The string member k of o as a view (ptr NULL when absent or not a string). */
static tg_text_t jsv(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    if (!json_is_string(v)) {
        return (tg_text_t){NULL, 0};
    }
    return (tg_text_t){json_string_value(v), json_string_length(v)};
}

void tg_record_view_free(tg_record_view_t *v) {
    if (v == NULL) {
        return;
    }
    json_decref(v->meta_doc);
    json_decref(v->payload_doc);
    free(v->approval);
    memset(v, 0, sizeof *v);
}

/* The rest of tg_record_view for a redemption payload: its members, and its claim in the
 * meta (the nonce a replay restores must be the one the redemption consumed). */
static tg_err_t view_redemption(tg_record_view_t *v) {
    tg_record_meta_t *m = &v->meta;
    const json_t *st = json_object_get(v->meta_doc, "s");
    const json_t *at = json_object_get(v->meta_doc, "at");
    v->execution_id = jsv(v->payload_doc, "executionId");
    tg_text_t tenant = jsv(v->payload_doc, "tenantId");
    tg_text_t rh = jsv(v->payload_doc, "requestHash");
    const size_t pl = sizeof TG_RECORD_REDEEM_NONCE_PREFIX - 1;
    bool ok = m->tenant.ptr != NULL && m->request_hash.ptr != NULL && json_is_number(st) &&
              json_is_number(at) && v->execution_id.ptr != NULL && tenant.ptr != NULL &&
              rh.ptr != NULL && jsv(v->payload_doc, "receiptHash").ptr != NULL &&
              jsv(v->payload_doc, "redeemedAt").ptr != NULL && m->key.ptr == NULL &&
              tenant.len == m->tenant.len && memcmp(tenant.ptr, m->tenant.ptr, tenant.len) == 0 &&
              rh.len == m->request_hash.len && memcmp(rh.ptr, m->request_hash.ptr, rh.len) == 0 &&
              m->nonce.ptr != NULL && m->nonce.len == pl + v->execution_id.len &&
              memcmp(m->nonce.ptr, TG_RECORD_REDEEM_NONCE_PREFIX, pl) == 0 &&
              memcmp(m->nonce.ptr + pl, v->execution_id.ptr, v->execution_id.len) == 0 &&
              tg_unhex(v->request_hash, 32, m->request_hash.ptr, m->request_hash.len) == TG_OK;
    if (!ok) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    v->redemption = true;
    m->at_ms = (int64_t)json_number_value(at);
    m->status = (int)json_number_value(st);
    return TG_OK;
}

/* Reads meta "a" into a heap v->approval; false when present and not an approval document.
 * The member is re-written canonically and handed to the strict parser, so what a view
 * holds is always a state the transitions can make. */
static bool view_approval_state(tg_record_view_t *v) {
    const json_t *a = json_object_get(v->meta_doc, "a");
    if (a == NULL) {
        return true;
    }
    if (!json_is_object(a)) {
        return false;
    }
    tg_buf_t b;
    tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
    bool ok = tg_canon_write(&b, a, NULL) == TG_OK &&
              (v->approval = malloc(sizeof *v->approval)) != NULL &&
              tg_approval_parse(v->approval, b.data, b.len) == TG_OK;
    tg_buf_free(&b);
    v->has_approval = ok;
    v->meta.approval = ok ? v->approval : NULL;
    return ok;
}

/* The rest of tg_record_view for an approval payload (type 4): its members, and the meta's
 * state after the step, which must be the same approval (id, tenant, status). Whether the
 * step itself was a valid transition is the audit's question (approval.h), not a reader's. */
static tg_err_t view_approval_event(tg_record_view_t *v) {
    tg_record_meta_t *m = &v->meta;
    tg_record_approval_event_t *e = &v->event;
    const json_t *p = v->payload_doc;
    const json_t *st = json_object_get(v->meta_doc, "s");
    const json_t *at = json_object_get(v->meta_doc, "at");
    const json_t *entry = json_object_get(p, "entry");
    tg_text_t event = jsv(p, "event"), ts = jsv(p, "at"), decision = jsv(p, "decision");
    e->approval_id = jsv(p, "approvalId");
    e->tenant = jsv(p, "tenantId");
    e->request_hash = jsv(p, "requestHash");
    e->status = jsv(p, "status");
    e->subject = jsv(p, "subject");
    e->comment = jsv(p, "comment");
    e->review = event.ptr != NULL && strcmp(event.ptr, "review") == 0;
    bool ok = view_approval_state(v) && v->approval != NULL && m->tenant.ptr != NULL &&
              m->request_hash.ptr != NULL && json_is_number(st) && json_is_number(at) &&
              event.ptr != NULL && (e->review || strcmp(event.ptr, "expire") == 0) &&
              ts.ptr != NULL && tg_time_parse_ms(&e->at_ms, ts.ptr, ts.len) == TG_OK &&
              tg_approval_id_valid(e->approval_id.ptr, e->approval_id.len) &&
              strcmp(e->approval_id.ptr, v->approval->id) == 0 && e->tenant.ptr != NULL &&
              e->tenant.len == m->tenant.len &&
              memcmp(e->tenant.ptr, m->tenant.ptr, m->tenant.len) == 0 &&
              strcmp(e->tenant.ptr, v->approval->tenant) == 0 && hex64(e->request_hash) &&
              e->status.ptr != NULL &&
              strcmp(e->status.ptr, tg_approval_status_name(v->approval->status)) == 0 &&
              tg_unhex(v->request_hash, 32, m->request_hash.ptr, m->request_hash.len) == TG_OK;
    if (ok && e->review) {
        double en = json_number_value(entry);
        ok = e->subject.ptr != NULL && decision.ptr != NULL && json_is_number(entry) && en >= 0 &&
             en < TG_APPROVAL_MAX_APPROVERS && en == (double)(uint32_t)en &&
             (strcmp(decision.ptr, "approve") == 0 || strcmp(decision.ptr, "deny") == 0) &&
             (e->comment.ptr == NULL || e->comment.len <= TG_APPROVAL_COMMENT_MAX);
        e->entry = ok ? (uint32_t)en : 0;
        e->approve = ok && strcmp(decision.ptr, "approve") == 0;
    } else if (ok) {
        ok = e->subject.ptr == NULL && e->comment.ptr == NULL && decision.ptr == NULL &&
             entry == NULL;
    }
    if (!ok) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    v->approval_record = true;
    memcpy(v->claim_hash, v->request_hash, sizeof v->claim_hash);
    m->at_ms = (int64_t)json_number_value(at);
    m->status = (int)json_number_value(st);
    return TG_OK;
}

/* Reads meta "l" into v->limits; false when present and malformed. */
static bool view_limits(tg_record_view_t *v) {
    const json_t *l = json_object_get(v->meta_doc, "l");
    if (l == NULL) {
        return true;
    }
    if (!json_is_array(l) || json_array_size(l) == 0 || json_array_size(l) > TG_RECORD_MAX_LIMITS) {
        return false;
    }
    for (size_t i = 0; i < json_array_size(l); i++) {
        const json_t *e = json_array_get(l, i);
        const json_t *name = json_array_get(e, 0), *key = json_array_get(e, 1);
        const json_t *start = json_array_get(e, 2), *win = json_array_get(e, 3);
        const json_t *amt = json_array_get(e, 4);
        tg_record_limit_t *r = &v->limits[i];
        if (!json_is_array(e) || json_array_size(e) != 5 || !json_is_string(name) ||
            !json_is_string(key) || !json_is_number(start) || !json_is_number(win) ||
            !json_is_number(amt) ||
            tg_unhex(r->key, 32, json_string_value(key), json_string_length(key)) != TG_OK) {
            return false;
        }
        r->limit = (tg_text_t){json_string_value(name), json_string_length(name)};
        r->window_start_s = (int64_t)json_number_value(start);
        r->window_s = (int64_t)json_number_value(win);
        r->amount = json_number_value(amt);
        if (!(r->amount >= 0) || r->window_s <= 0 || r->window_start_s < 0) {
            return false;
        }
    }
    v->meta.limits = v->limits;
    v->meta.n_limits = json_array_size(l);
    return true;
}

tg_err_t tg_record_view(tg_record_view_t *v, const void *meta, size_t meta_len, const void *payload,
                        size_t payload_len) {
    memset(v, 0, sizeof *v);
    if (tg_json_parse(&v->meta_doc, meta, meta_len, NULL, NULL) != TG_OK ||
        tg_json_parse(&v->payload_doc, payload, payload_len, NULL, NULL) != TG_OK) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    tg_record_meta_t *m = &v->meta;
    m->tenant = jsv(v->meta_doc, "t");
    m->key = jsv(v->meta_doc, "k");
    m->nonce = jsv(v->meta_doc, "n");
    m->request_hash = jsv(v->meta_doc, "rh");
    m->claim_hash = jsv(v->meta_doc, "ch");
    const json_t *st = json_object_get(v->meta_doc, "s");
    const json_t *at = json_object_get(v->meta_doc, "at");
    tg_text_t type = jsv(v->payload_doc, "type");
    if (type.ptr != NULL && strcmp(type.ptr, "redemption") == 0) {
        return view_redemption(v);
    }
    if (type.ptr != NULL && strcmp(type.ptr, "approval") == 0) {
        return view_approval_event(v);
    }
    tg_text_t decision = jsv(v->payload_doc, "decision");
    v->reason = jsv(v->payload_doc, "reasonCode");
    v->execution_id = jsv(v->payload_doc, "executionId");
    v->policy_version = jsv(v->payload_doc, "policyVersion");
    v->detail = jsv(v->payload_doc, "detail");
    if (m->tenant.ptr == NULL || m->request_hash.ptr == NULL || !json_is_number(st) ||
        !json_is_number(at) || decision.ptr == NULL || v->reason.ptr == NULL ||
        v->execution_id.ptr == NULL || v->policy_version.ptr == NULL ||
        tg_unhex(v->request_hash, 32, m->request_hash.ptr, m->request_hash.len) != TG_OK) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    if (!view_limits(v) || !view_approval_state(v)) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    v->approval_id = jsv(v->payload_doc, "approvalId");
    /* A receipt names the approval its meta carries, and only a receipt of that approval
     * carries its state. */
    if ((v->approval_id.ptr != NULL &&
         !tg_approval_id_valid(v->approval_id.ptr, v->approval_id.len)) ||
        (v->approval != NULL &&
         (v->approval_id.ptr == NULL || strcmp(v->approval_id.ptr, v->approval->id) != 0))) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    /* Records of earlier builds bound their key to the request hash alone. */
    if (m->claim_hash.ptr == NULL) {
        memcpy(v->claim_hash, v->request_hash, sizeof v->claim_hash);
    } else if (tg_unhex(v->claim_hash, 32, m->claim_hash.ptr, m->claim_hash.len) != TG_OK) {
        tg_record_view_free(v);
        return TG_ERR_LEDGER_CORRUPT;
    }
    v->decision = decision.ptr;
    /* An observe receipt (SPEC §11.1) is signed whatever its decision, SILENCE included. */
    v->observe = json_object_get(v->payload_doc, "executionMode") != NULL;
    v->receipt = v->observe || strcmp(v->decision, "SILENCE") != 0;
    if (v->receipt) {
        v->detail = (tg_text_t){NULL, 0}; /* only a SILENCE answers with one */
    }
    m->at_ms = (int64_t)json_number_value(at); /* tg_json_parse reads numbers as doubles */
    m->status = (int)json_number_value(st);
    return TG_OK;
}

tg_err_t tg_record_response(tg_buf_t *out, const tg_record_view_t *v, const void *payload,
                            size_t payload_len) {
    if (out == NULL || v == NULL || v->decision == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_decision_body_t b = {
        .decision = v->decision,
        .reason = v->reason,
        .execution_id = v->execution_id,
        .request_hash = v->meta.request_hash,
        .policy_version = v->policy_version,
        .detail = v->detail,
        .receipt = v->receipt ? (tg_text_t){payload, payload_len} : (tg_text_t){NULL, 0},
        .observe = v->observe,
    };
    /* An ESCALATE, or the PERMIT that consumed an approval, answered with the approval as it
     * stood after the record's step, seen at the record's own time (the live path's now). */
    tg_buf_t api;
    tg_buf_init(&api, (size_t)TG_APPROVAL_DOC_MAX * 2);
    tg_err_t rc = TG_OK;
    if (v->approval != NULL) {
        rc = tg_approval_api_json(&api, v->approval, v->meta.at_ms);
        b.approval_id = v->approval_id;
        b.approval = (tg_text_t){api.data, api.len};
    }
    if (rc == TG_OK) {
        rc = tg_decision_body_open(out, &b);
    }
    tg_buf_free(&api);
    return rc == TG_OK ? tg_buf_putc(out, '}') : rc;
}

/* Length-prefixed, so ("ab","c") and ("a","bc") never hash alike. */
static void claim_part(tg_sha256_ctx_t *st, const char *p, size_t n) {
    uint8_t len[8];
    uint64_t v = p != NULL ? (uint64_t)n : UINT64_MAX; /* absent differs from empty */
    for (int i = 7; i >= 0; i--) {
        len[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
    tg_sha256_update(st, len, sizeof len);
    if (p != NULL && n > 0) {
        tg_sha256_update(st, p, n);
    }
}

void tg_record_claim_hash(uint8_t out[32], const uint8_t request_hash[32], const char *issuer,
                          size_t issuer_len, const char *subject, size_t subject_len) {
    static const char domain[] = "trigguard/idempotency-claim/v1.1";
    tg_sha256_ctx_t st;
    tg_sha256_init(&st);
    tg_sha256_update(&st, domain, sizeof domain); /* with NUL */
    tg_sha256_update(&st, request_hash, 32);
    claim_part(&st, issuer, issuer_len);
    claim_part(&st, subject, subject_len);
    tg_sha256_final(&st, out);
}

tg_err_t tg_record_log_entry(uint8_t entry[32], uint8_t type, const void *payload,
                             size_t payload_len, const json_t *payload_doc) {
    if (entry == NULL || (payload == NULL && payload_len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (type != TG_LEDGER_TYPE_RECEIPT) {
        tg_sha256(entry, payload != NULL ? payload : (const void *)"", payload_len);
        return TG_OK;
    }
    /* A receipt's leaf is its receiptHash, so a receipt verifies against the log with the
     * hash it carries; the payload is the signed receipt's canonical JSON. */
    json_t *doc = NULL;
    if (payload_doc == NULL) {
        if (tg_json_parse(&doc, payload, payload_len, NULL, NULL) != TG_OK) {
            return TG_ERR_LEDGER_CORRUPT;
        }
        payload_doc = doc;
    }
    tg_text_t h = jsv(payload_doc, "receiptHash");
    tg_err_t rc = h.ptr != NULL && h.len == 64 && tg_unhex(entry, 32, h.ptr, h.len) == TG_OK
                      ? TG_OK
                      : TG_ERR_LEDGER_CORRUPT;
    json_decref(doc);
    return rc;
}
