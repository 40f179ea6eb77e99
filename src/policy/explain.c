/* explain.c — the full explain (policy.h): tg_kernel_explain's steps written as JSON. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

/* Room kept for the closing of the document after the last rule that fits (the limits
 * array, at most TG_FRAME_MAX_LIMITS short entries, and the truncation marker). */
#define EXPLAIN_TAIL_RESERVE 2048

/* The writer's state across tg_kernel_explain's callbacks. A rule is written into `rule`
 * (a scratch buffer) and moved into `out` only when it fits the byte cap, so that a cut
 * never leaves half an entry. Conditions arrive in pre-order with their depth: the last
 * condition's object is left open (depth `open`), because only the next step tells whether
 * it has members (a deeper step) or not. */
typedef struct writer {
    tg_buf_t *out;
    size_t start;
    tg_buf_t rule;
    uint8_t open;  /* depth of the open condition, 0 = none */
    bool in_rule;  /* rule holds a rule being written */
    bool any_rule; /* a rule was written to out (a comma comes before the next) */
    bool in_limits;
    bool truncated;
    tg_err_t rc;
} writer_t;

static tg_err_t put_bool(tg_buf_t *b, const char *name, bool v) {
    tg_err_t rc = tg_buf_puts(b, name);
    return rc ? rc : tg_buf_puts(b, v ? "true" : "false");
}

/* A number, or null when it is not one JSON can carry (NaN: an unbound or uncountable
 * limit value). */
static tg_err_t put_num(tg_buf_t *b, double x) {
    char text[TG_CANON_NUMBER_MAX];
    size_t n = 0;
    if (tg_canon_number(text, &n, x) != TG_OK) {
        return tg_buf_puts(b, "null");
    }
    return tg_buf_append(b, text, n);
}

/* Up to TG_EXPLAIN_MAX_STRING bytes of s, cut back to the start of a UTF-8 sequence so the
 * JSON stays valid; *cut says whether anything was left out. */
static tg_err_t put_cut_string(tg_buf_t *b, const char *s, size_t n, bool *cut) {
    if (n > TG_EXPLAIN_MAX_STRING) {
        n = TG_EXPLAIN_MAX_STRING;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) {
            n--; /* s[n] continues a sequence: cut before the sequence begins */
        }
        *cut = true;
    }
    return tg_canon_string(b, s, n);
}

static const char *vtype_name(uint8_t t) {
    switch (t) {
    case TG_VT_NULL:
        return "null";
    case TG_VT_BOOL:
        return "boolean";
    case TG_VT_NUMBER:
        return "number";
    case TG_VT_STRING:
        return "string";
    case TG_VT_OBJECT:
        return "object";
    case TG_VT_ARRAY:
        return "array";
    default:
        return "absent";
    }
}

/* A scalar value as JSON. Objects and arrays are not kept in a frame (only their type), so
 * they are never written here: callers check scalar() first. */
static bool scalar(const tg_value_t *v) {
    return v->type == TG_VT_NULL || v->type == TG_VT_BOOL || v->type == TG_VT_NUMBER ||
           v->type == TG_VT_STRING;
}

static tg_err_t put_value(tg_buf_t *b, const tg_value_t *v, bool *cut) {
    switch (v->type) {
    case TG_VT_BOOL:
        return tg_buf_puts(b, v->boolean ? "true" : "false");
    case TG_VT_NUMBER:
        return put_num(b, v->num);
    case TG_VT_STRING:
        return put_cut_string(b, v->str, v->len, cut);
    default:
        return tg_buf_puts(b, "null");
    }
}

/* The condition's operand: the value of the bundle ("exists" its boolean), an in / not_in
 * list (or its count when long), nothing when the operand is not a value (a group; a
 * value_from, whose other side is the request's and shown as other_actual). */
/* time.date operands are compiled to the number YYYYMMDD: shown as the "YYYY-MM-DD" the
 * bundle wrote (a valid date, checked by the compiler). */
static tg_err_t put_operand_value(tg_buf_t *b, const tg_cond_t *c, const tg_value_t *v, bool *cut) {
    if (c->src == TG_SRC_TIME_DATE && v->type == TG_VT_NUMBER && v->num >= 10101 &&
        v->num <= 99991231) {
        unsigned n = (unsigned)v->num;
        return tg_buf_printf(b, "\"%04u-%02u-%02u\"", n / 10000, n / 100 % 100, n % 100);
    }
    return put_value(b, v, cut);
}

static tg_err_t put_operand(tg_buf_t *b, const tg_cond_t *c, bool *cut) {
    tg_err_t rc = TG_OK;
    if (c->op == TG_OP_IN_SET || c->op == TG_OP_NOT_IN_SET) { /* a named data set */
        rc = tg_buf_puts(b, ",\"set\":");
        rc = rc ? rc : tg_canon_string(b, c->value.str, c->value.len);
        return rc ? rc : tg_buf_printf(b, ",\"value_count\":%u", (unsigned)c->n_list);
    }
    if (c->has_from) { /* compared with another field of the request (other_actual) */
        rc = tg_buf_puts(b, ",\"value_from\":");
        return rc ? rc : tg_canon_string(b, c->from_field.ptr, c->from_field.len);
    }
    if (c->op == TG_OP_IN || c->op == TG_OP_NOT_IN) {
        if (c->list == NULL) {
            return TG_OK; /* a named set (no inline list): its name is the bundle's */
        }
        if (c->n_list > TG_EXPLAIN_MAX_LIST) {
            return tg_buf_printf(b, ",\"value_count\":%u", (unsigned)c->n_list);
        }
        rc = tg_buf_puts(b, ",\"value\":[");
        for (uint32_t i = 0; i < c->n_list && !rc; i++) {
            rc = i ? tg_buf_putc(b, ',') : TG_OK;
            if (!rc) {
                rc = put_operand_value(b, c, &c->list[i], cut);
            }
        }
        return rc ? rc : tg_buf_putc(b, ']');
    }
    if (!scalar(&c->value)) {
        return TG_OK;
    }
    rc = tg_buf_puts(b, ",\"value\":");
    return rc ? rc : put_operand_value(b, c, &c->value, cut);
}

static tg_err_t write_cond(tg_buf_t *b, const tg_explain_step_t *st) {
    const tg_cond_t *c = st->cond;
    bool cut = false;
    tg_err_t rc = tg_buf_putc(b, '{');
    if (!rc && c->field.ptr != NULL) {
        rc = tg_buf_puts(b, "\"field\":");
        if (!rc) {
            rc = tg_canon_string(b, c->field.ptr, c->field.len);
        }
        if (!rc) {
            rc = tg_buf_putc(b, ',');
        }
    }
    if (!rc) {
        rc = tg_buf_printf(b, "\"op\":\"%s\"", tg_policy_op_name(c->op));
    }
    if (!rc) {
        rc = put_operand(b, c, &cut);
    }
    const tg_value_t *v = st->value;
    bool present = v != NULL && v->type != TG_VT_ABSENT;
    if (!rc && c->field.ptr != NULL) { /* a condition without a field (a group) reads none */
        rc = put_bool(b, ",\"present\":", present);
    }
    if (!rc && present) {
        rc = tg_buf_printf(b, ",\"actual_type\":\"%s\"", vtype_name(v->type));
        if (!rc && scalar(v)) {
            rc = tg_buf_puts(b, ",\"actual\":");
            if (!rc) {
                rc = put_value(b, v, &cut);
            }
        }
    }
    if (!rc && st->other != NULL && scalar(st->other)) {
        rc = tg_buf_puts(b, ",\"other_actual\":");
        if (!rc) {
            rc = put_value(b, st->other, &cut);
        }
    }
    if (!rc && cut) {
        rc = tg_buf_puts(b, ",\"cut\":true");
    }
    if (!rc) {
        rc = put_bool(b, ",\"held\":", st->held);
    }
    return rc; /* left open: members may follow */
}

/* Closes the open condition and the member lists above it, down to depth `to` (0: all). */
/* Closes the open condition and every level deeper than `to`; the condition at depth `to`
 * (to > 0) is left open with its member list closed, for the caller to close or extend.
 * Open at depth 3, to 1: `}` (3) `]}` (list of 2's members, 2) `]` (list of 1's members). */
static tg_err_t close_conds(writer_t *w, uint8_t to) {
    tg_err_t rc = TG_OK;
    if (w->open > to) {
        rc = tg_buf_putc(&w->rule, '}');
        for (uint8_t d = w->open; d > to + 1 && !rc; d--) {
            rc = tg_buf_puts(&w->rule, "]}");
        }
        if (!rc && to > 0) {
            rc = tg_buf_putc(&w->rule, ']');
        }
        w->open = to;
    }
    return rc;
}

/* Ends the rule being written and moves it into out when it fits the cap. */
static void flush_rule(writer_t *w) {
    if (!w->in_rule || w->rc) {
        w->in_rule = false;
        return;
    }
    w->in_rule = false;
    w->rc = close_conds(w, 0);
    if (!w->rc) {
        w->rc = tg_buf_puts(&w->rule, "]}");
    }
    if (w->rc) {
        return;
    }
    size_t used = w->out->len - w->start;
    if (w->truncated || used + w->rule.len + 1 + EXPLAIN_TAIL_RESERVE > TG_EXPLAIN_MAX_BYTES) {
        w->truncated = true; /* later rules are left out too: the order must not lie */
        return;
    }
    w->rc = w->any_rule ? tg_buf_putc(w->out, ',') : TG_OK;
    if (!w->rc) {
        w->rc = tg_buf_append(w->out, w->rule.data, w->rule.len);
    }
    w->any_rule = true;
}

static void begin_rule(writer_t *w, const tg_explain_step_t *st) {
    const tg_rule_t *r = st->rule;
    tg_buf_reset(&w->rule);
    w->in_rule = true;
    w->open = 0;
    tg_buf_t *b = &w->rule;
    tg_err_t rc = tg_buf_puts(b, "{\"id\":");
    if (!rc) {
        rc = tg_canon_string(b, r->id.ptr, r->id.len);
    }
    if (!rc) {
        rc = tg_buf_puts(b, r->effect == TG_EFFECT_PERMIT     ? ",\"effect\":\"permit\""
                            : r->effect == TG_EFFECT_ESCALATE ? ",\"effect\":\"escalate\""
                                                              : ",\"effect\":\"deny\"");
    }
    if (!rc && r->effect != TG_EFFECT_PERMIT && r->reason != NULL) {
        rc = tg_buf_puts(b, ",\"reason\":");
        if (!rc) {
            rc = tg_canon_string(b, r->reason, strlen(r->reason));
        }
    }
    if (!rc) {
        rc = put_bool(b, ",\"evaluated\":", st->evaluated);
    }
    if (!rc) {
        rc = put_bool(b, ",\"matched\":", st->held);
    }
    if (!rc) {
        rc = tg_buf_puts(b, ",\"conditions\":[");
    }
    w->rc = rc;
}

static void add_cond(writer_t *w, const tg_explain_step_t *st) {
    if (!w->in_rule || st->depth == 0) {
        return; /* a condition outside a rule would be a kernel fault: nothing to show */
    }
    tg_err_t rc = TG_OK;
    if (w->open == 0) {
        /* the rule's first condition */
    } else if (st->depth > w->open) {
        rc = tg_buf_puts(&w->rule, ",\"conditions\":["); /* the open one is a group */
    } else {
        rc = close_conds(w, st->depth);
        if (!rc) {
            rc = tg_buf_puts(&w->rule, "},");
        }
    }
    if (!rc) {
        rc = write_cond(&w->rule, st);
    }
    w->open = st->depth;
    w->rc = rc;
}

static void add_limit(writer_t *w, const tg_explain_step_t *st) {
    flush_rule(w);
    if (w->rc) {
        return;
    }
    tg_buf_t *b = w->out;
    tg_err_t rc = TG_OK;
    if (!w->in_limits) {
        rc = tg_buf_puts(b, "],\"limits\":[");
        w->in_limits = true;
    } else {
        rc = tg_buf_putc(b, ',');
    }
    if (!rc) {
        rc = tg_buf_puts(b, "{\"id\":");
    }
    if (!rc) {
        rc = tg_canon_string(b, st->limit->id.ptr, st->limit->id.len);
    }
    if (!rc) {
        rc = tg_buf_puts(b, ",\"total\":");
    }
    if (!rc) {
        rc = put_num(b, st->total);
    }
    if (!rc) {
        rc = tg_buf_puts(b, ",\"amount\":");
    }
    if (!rc) {
        rc = put_num(b, st->amount);
    }
    if (!rc) {
        rc = tg_buf_puts(b, ",\"max\":");
    }
    if (!rc) {
        rc = put_num(b, st->limit->max);
    }
    if (!rc) {
        rc = put_bool(b, ",\"held\":", st->held);
    }
    if (!rc) {
        rc = put_bool(b, ",\"evaluated\":", st->evaluated);
    }
    if (!rc) {
        rc = tg_buf_putc(b, '}');
    }
    w->rc = rc;
}

static void on_step(void *ud, const tg_explain_step_t *st) {
    writer_t *w = ud;
    if (w->rc) {
        return;
    }
    switch (st->kind) {
    case TG_EXPLAIN_RULE:
        flush_rule(w);
        if (!w->rc) {
            begin_rule(w, st);
        }
        break;
    case TG_EXPLAIN_COND:
        add_cond(w, st);
        break;
    case TG_EXPLAIN_LIMIT:
        add_limit(w, st);
        break;
    default:
        break;
    }
}

/* Request strings were valid UTF-8 when parsed; an error of the string writer here is a
 * caller's broken view, reported as such. */
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

tg_err_t tg_explain_json(tg_buf_t *out, tg_decision_t *d, const tg_policy_t *p,
                         const tg_frame_t *f) {
    if (p == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    return tg_explain_tables_json(out, d, tg_policy_tables(p), f);
}

static void writer_begin(writer_t *w, tg_buf_t *out) {
    memset(w, 0, sizeof *w);
    w->out = out;
    w->start = out->len;
    tg_buf_init(&w->rule, TG_EXPLAIN_MAX_BYTES);
    w->rc = tg_buf_puts(out, "{\"rules\":[");
}

static tg_err_t writer_end(writer_t *w) {
    flush_rule(w);
    tg_err_t rc = w->rc;
    if (!rc) {
        rc = tg_buf_puts(w->out, w->in_limits ? "]" : "],\"limits\":[]");
    }
    if (!rc && w->truncated) {
        rc = tg_buf_puts(w->out, ",\"truncated\":true");
    }
    if (!rc) {
        rc = tg_buf_putc(w->out, '}');
    }
    tg_buf_free(&w->rule);
    return restore(w->out, w->start, rc);
}

tg_err_t tg_explain_tables_json(tg_buf_t *out, tg_decision_t *d, const tg_kernel_tables_t *t,
                                const tg_frame_t *f) {
    if (out == NULL || t == NULL || f == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    writer_t w;
    writer_begin(&w, out);
    if (!w.rc) {
        tg_kernel_explain(d, t, f, on_step, &w);
    } else if (d != NULL) {
        tg_kernel_decide(d, t, f);
    }
    return writer_end(&w);
}

tg_err_t tg_explain_steps_json(tg_buf_t *out, const tg_explain_step_t *steps, size_t n) {
    if (out == NULL || (steps == NULL && n > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    writer_t w;
    writer_begin(&w, out);
    for (size_t i = 0; i < n && !w.rc; i++) {
        on_step(&w, &steps[i]);
    }
    return writer_end(&w);
}

tg_err_t tg_decision_explain_append(tg_buf_t *out, const tg_policy_t *p, const tg_frame_t *f) {
    if (out == NULL || p == NULL || f == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    size_t start = out->len;
    tg_err_t rc = tg_buf_puts(out, ",\"explain\":");
    if (!rc) {
        rc = tg_explain_json(out, NULL, p, f);
    }
    return restore(out, start, rc);
}
