/* decision_json.c — the decision object of SPEC §3.2 (with the kernel trace). */
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

tg_err_t tg_decision_to_json(tg_buf_t *out, const tg_decision_t *d, const tg_policy_t *p,
                             const tg_frame_t *f, const tg_decision_json_opts_t *opts) {
    if (out == NULL || d == NULL || p == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    size_t start = out->len;
    const char *reason = d->reason != NULL ? d->reason : tg_reason_code(TG_REASON_INTERNAL_ERROR);
    tg_err_t rc = tg_buf_printf(out,
                                "{\"decision\":\"%s\",\"enforcement\":\"%s\","
                                "\"reason_code\":\"%s\"",
                                tg_verdict_name(d->verdict),
                                d->verdict == TG_PERMIT ? "EXECUTED" : "BLOCKED", reason);
    if (!rc && opts != NULL && opts->execution_id != NULL) {
        rc = put_str(out, "execution_id", opts->execution_id, strlen(opts->execution_id));
    }
    if (!rc && opts != NULL && opts->request_hash_hex != NULL) {
        rc = put_str(out, "request_hash", opts->request_hash_hex, strlen(opts->request_hash_hex));
    }
    if (!rc) {
        const char *ver = tg_policy_version(p);
        rc = put_str(out, "policy_version", ver, strlen(ver));
    }
    if (!rc && opts != NULL && opts->receipt != NULL) {
        rc = put_name(out, "receipt", 1);
        if (!rc) {
            rc = tg_buf_append(out, opts->receipt, opts->receipt_len);
        }
    }
    if (!rc && opts != NULL && opts->trace) {
        rc = put_trace(out, d, p, f);
    }
    if (!rc) {
        rc = tg_buf_putc(out, '}');
    }
    if (rc) {
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
