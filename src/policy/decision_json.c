/* decision_json.c — the decision object of SPEC §3.2 (with the kernel trace). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/policy.h"

/* ,"name": — the member separator and name (names are ASCII literals). */
static tg_err_t put_name(tg_buf_t *b, const char *name, int comma) {
    tg_err_t rc = comma ? tg_buf_putc(b, ',') : TG_OK;
    if (!rc) {
        rc = tg_buf_putc(b, '"');
    }
    if (!rc) {
        rc = tg_buf_puts(b, name);
    }
    if (!rc) {
        rc = tg_buf_puts(b, "\":");
    }
    return rc;
}

static tg_err_t put_str(tg_buf_t *b, const char *name, const char *s, size_t n) {
    tg_err_t rc = put_name(b, name, 1);
    return rc ? rc : tg_canon_string(b, s, n);
}

static tg_err_t put_trace(tg_buf_t *b, const tg_decision_t *d, const tg_policy_t *p,
                          const tg_frame_t *f) {
    tg_err_t rc = put_name(b, "trace", 1);
    if (!rc) {
        rc = tg_buf_puts(b, "{\"states\":[");
    }
    unsigned n = d->n_states <= TG_STATE__COUNT ? d->n_states : TG_STATE__COUNT;
    for (unsigned i = 0; i < n && !rc; i++) {
        rc = tg_buf_printf(b, "%s\"%s\"", i ? "," : "", tg_state_name((tg_state_t)d->states[i]));
    }
    if (!rc) {
        rc = tg_buf_putc(b, ']');
    }
    if (!rc) {
        const char *in = n ? tg_state_name((tg_state_t)d->states[n - 1]) : "RECEIVED";
        rc = tg_buf_printf(b, ",\"decided_in\":\"%s\",\"decided_by\":\"%s\"", in,
                           tg_cause_name(d->cause));
    }
    if (!rc && d->rule_id.ptr != NULL) {
        rc = put_str(b, "rule", d->rule_id.ptr, d->rule_id.len);
    }
    if (!rc && d->subject.ptr != NULL) {
        rc = put_str(b, "subject", d->subject.ptr, d->subject.len);
    }
    if (!rc && f != NULL && f->surface_name.ptr != NULL) {
        rc = put_str(b, "surface", f->surface_name.ptr, f->surface_name.len);
    }
    if (!rc) {
        rc = tg_buf_printf(b, ",\"tier\":%u,\"rules_evaluated\":%u,\"policy_hash\":\"%s\"}",
                           (unsigned)d->tier, (unsigned)d->rules_evaluated, tg_policy_hash_hex(p));
    }
    return rc;
}

size_t tg_decision_detail(char *out, size_t cap, const tg_decision_t *d) {
    if (out == NULL || cap == 0) {
        return 0;
    }
    out[0] = '\0';
    if (d == NULL || d->verdict != TG_SILENCE) {
        return 0;
    }
    int n = (int)(d->subject.ptr != NULL ? d->subject.len : 0);
    const char *s = d->subject.ptr != NULL ? d->subject.ptr : "";
    int w;
    switch (d->cause) {
    case TG_CAUSE_CONTEXT:
        w = snprintf(out, cap, "context.%.*s is missing or not of its declared type", n, s);
        break;
    case TG_CAUSE_UNKNOWN_SIGNAL:
        w = snprintf(out, cap, "signals.%.*s is not a signal this policy declares", n, s);
        break;
    case TG_CAUSE_INVALID_SIGNAL:
        w = snprintf(out, cap, "signals.%.*s has the wrong type or is outside [0, 1]", n, s);
        break;
    case TG_CAUSE_MISSING_SIGNAL:
        w = snprintf(out, cap, "signals.%.*s is required for this surface", n, s);
        break;
    default:
        w = n > 0 ? snprintf(out, cap, "the request cannot be decided (%.*s)", n, s)
                  : snprintf(out, cap, "the request cannot be decided");
        break;
    }
    if (w < 0) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)w < cap ? (size_t)w : cap - 1;
}

/* The UTF-8 errors of a view are the caller's: its strings were not valid text. */
static tg_err_t restore(tg_buf_t *out, size_t start, tg_err_t rc) {
    if (rc != TG_OK) {
        out->len = start;
        if (out->data != NULL) {
            out->data[start] = '\0';
        }
        if (rc == TG_ERR_JSON_UTF8 || rc == TG_ERR_JSON_SURROGATE) {
            rc = TG_ERR_INVALID_ARG;
        }
    }
    return rc;
}

tg_err_t tg_decision_body_open(tg_buf_t *out, const tg_decision_body_t *b) {
    if (out == NULL || b == NULL || b->decision == NULL || b->reason.ptr == NULL ||
        b->policy_version.ptr == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    size_t start = out->len;
    bool permit = strcmp(b->decision, "PERMIT") == 0;
    bool escalate = strcmp(b->decision, "ESCALATE") == 0;
    if (b->approval.ptr != NULL && b->approval_id.ptr == NULL) {
        return TG_ERR_INVALID_ARG; /* an approval is always shown with its id */
    }
    tg_err_t rc;
    if (b->observe) {
        /* Nothing is enforced: the caller proceeds, and reads what would have happened. */
        rc = tg_buf_puts(out, "{\"decision\":\"PERMIT\",\"enforcement\":\"NOT_ENFORCED\","
                              "\"reason_code\":\"OBSERVE_MODE\",\"execution_mode\":\"observe\","
                              "\"would_decision\":\"");
        if (!rc) {
            rc = tg_buf_puts(out, b->decision);
        }
        if (!rc) {
            rc = tg_buf_puts(out, "\",\"would_reason_code\":");
        }
    } else {
        rc = tg_buf_puts(out, "{\"decision\":\"");
        if (!rc) {
            rc = tg_buf_puts(out, b->decision);
        }
        if (!rc) {
            rc = tg_buf_puts(out, permit ? "\",\"enforcement\":\"EXECUTED\",\"reason_code\":"
                                  : escalate
                                      ? "\",\"enforcement\":\"PENDING_APPROVAL\",\"reason_code\":"
                                      : "\",\"enforcement\":\"BLOCKED\",\"reason_code\":");
        }
    }
    if (!rc) {
        rc = tg_canon_string(out, b->reason.ptr, b->reason.len);
    }
    if (!rc && b->execution_id.ptr != NULL) {
        rc = put_str(out, "execution_id", b->execution_id.ptr, b->execution_id.len);
    }
    if (!rc && b->request_hash.ptr != NULL) {
        rc = put_str(out, "request_hash", b->request_hash.ptr, b->request_hash.len);
    }
    if (!rc) {
        rc = put_str(out, "policy_version", b->policy_version.ptr, b->policy_version.len);
    }
    /* SPEC §11.2: the approval an ESCALATE opened (or a PERMIT consumed); an observe-mode
     * body has none, whatever it would have decided. */
    if (!rc && b->approval_id.ptr != NULL && !b->observe) {
        rc = put_str(out, "approval_id", b->approval_id.ptr, b->approval_id.len);
    }
    if (!rc && b->approval.ptr != NULL && !b->observe) {
        rc = put_name(out, "approval", 1);
        if (!rc) {
            rc = tg_buf_append(out, b->approval.ptr, b->approval.len);
        }
    }
    if (!rc && b->detail.ptr != NULL && !b->observe) {
        rc = put_str(out, "detail", b->detail.ptr, b->detail.len);
    }
    if (!rc && b->receipt.ptr != NULL) {
        rc = put_name(out, "receipt", 1);
        if (!rc) {
            rc = tg_buf_append(out, b->receipt.ptr, b->receipt.len);
        }
    }
    return restore(out, start, rc);
}

tg_err_t tg_decision_trace_append(tg_buf_t *out, const tg_decision_t *d, const tg_policy_t *p,
                                  const tg_frame_t *f) {
    if (out == NULL || d == NULL || p == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    size_t start = out->len;
    return restore(out, start, put_trace(out, d, p, f));
}

tg_err_t tg_decision_to_json(tg_buf_t *out, const tg_decision_t *d, const tg_policy_t *p,
                             const tg_frame_t *f, const tg_decision_json_opts_t *opts) {
    if (out == NULL || d == NULL || p == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    size_t start = out->len;
    const char *reason = d->reason != NULL ? d->reason : tg_reason_code(TG_REASON_INTERNAL_ERROR);
    const char *ver = tg_policy_version(p);
    tg_decision_body_t b = {
        .decision = tg_verdict_name(d->verdict),
        .reason = {reason, strlen(reason)},
        .policy_version = {ver, strlen(ver)},
    };
    if (opts != NULL && opts->execution_id != NULL) {
        b.execution_id = (tg_text_t){opts->execution_id, strlen(opts->execution_id)};
    }
    if (opts != NULL && opts->request_hash_hex != NULL) {
        b.request_hash = (tg_text_t){opts->request_hash_hex, strlen(opts->request_hash_hex)};
    }
    if (opts != NULL && opts->receipt != NULL) {
        b.receipt = (tg_text_t){opts->receipt, opts->receipt_len};
    }
    char detail[256];
    size_t dn = tg_decision_detail(detail, sizeof detail, d);
    if (dn > 0) {
        b.detail = (tg_text_t){detail, dn};
    }
    tg_err_t rc = tg_decision_body_open(out, &b);
    if (!rc && opts != NULL && opts->trace) {
        rc = put_trace(out, d, p, f);
    }
    if (!rc) {
        rc = tg_buf_putc(out, '}');
    }
    return restore(out, start, rc);
}
