/* kernel.c — the pure decision FSM of SPEC §8 (states and order documented in kernel.h). */
#include <math.h> /* NAN and isfinite: macros, no libm call (kernel_purity.sh) */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"

/* The texts of kernel.h's reason list; R(code) is a constant the compiler folds. */
static const char *const reason_codes[TG_REASON__COUNT] = {
#define TG_REASON_TEXT_(code) #code,
    TG_REASON_LIST(TG_REASON_TEXT_)
#undef TG_REASON_TEXT_
};
#define R(code) reason_codes[TG_REASON_##code]

/* Every code must fit the format it defines (the UPPER_SNAKE part: test_kernel). */
#define TG_REASON_FITS_(code)                                                                      \
    _Static_assert(sizeof #code - 1 <= TG_REASON_MAX, #code " is longer than TG_REASON_MAX");
TG_REASON_LIST(TG_REASON_FITS_)
#undef TG_REASON_FITS_

static tg_sv_t sv_of(const char *p, uint32_t n) {
    tg_sv_t s = {p, n};
    return s;
}

static void enter(tg_decision_t *d, tg_state_t s) {
    if (d->n_states < TG_STATE__COUNT) {
        d->states[d->n_states++] = (uint8_t)s;
    }
}

static void finish(tg_decision_t *d, tg_verdict_t v, const char *reason, tg_cause_t cause,
                   tg_sv_t subject) {
    d->verdict = v;
    d->reason = reason;
    d->cause = cause;
    d->subject = subject;
}

/* Linear scan over at most TG_FRAME_MAX_CONTEXT slots; requests carry a handful. */
static const tg_value_t *slot_find(const tg_frame_slot_t *slots, uint32_t n, uint32_t id) {
    for (uint32_t i = 0; i < n; i++) {
        if (slots[i].id == id) {
            return &slots[i].v;
        }
    }
    return NULL;
}

static int value_eq(const tg_value_t *a, const tg_value_t *b) {
    if (a->type != b->type) {
        return 0; /* typed equality: "5" is not 5 */
    }
    switch (a->type) {
    case TG_VT_BOOL:
        return a->boolean == b->boolean;
    case TG_VT_NUMBER:
        return a->num == b->num;
    case TG_VT_STRING:
        return a->len == b->len && (a->len == 0 || memcmp(a->str, b->str, a->len) == 0);
    default:
        return 0; /* objects and arrays never equal a scalar operand */
    }
}

static int type_matches(const tg_value_t *v, uint8_t ft) {
    switch (ft) {
    case TG_FT_ANY:
        return v->type != TG_VT_ABSENT && v->type != TG_VT_NULL;
    case TG_FT_STRING:
        return v->type == TG_VT_STRING;
    case TG_FT_NUMBER:
        return v->type == TG_VT_NUMBER;
    case TG_FT_BOOLEAN:
        return v->type == TG_VT_BOOL;
    case TG_FT_OBJECT:
        return v->type == TG_VT_OBJECT;
    case TG_FT_ARRAY:
        return v->type == TG_VT_ARRAY;
    default:
        return 0;
    }
}

/* time.hour / time.weekday / time.date of the frame's instant in the condition's zone
 * (kernel_tables.h): NULL when the frame carries no instant (has_now 0) or one outside
 * years 1..9999. Cold: only time conditions reach it. */
static const tg_value_t *time_value(const tg_cond_t *c, const tg_frame_t *f, tg_value_t *tmp) {
    if (!f->has_now || f->now_ms < TG_CIVIL_MIN_MS || f->now_ms > TG_CIVIL_MAX_MS) {
        return NULL;
    }
    int64_t ms = f->now_ms;
    int64_t secs = ms / 1000 - (ms % 1000 < 0); /* floor: an instant belongs to its second */
    tg_civil_t lt;
    tg_civil_time(&lt, c->zone, secs);
    tmp->num = 0;
    tmp->str = NULL;
    tmp->len = 0;
    tmp->boolean = 0;
    tmp->type = TG_VT_NUMBER;
    if (c->src == TG_SRC_TIME_HOUR) {
        tmp->num = lt.hour;
    } else if (c->src == TG_SRC_TIME_DATE) {
        tmp->num = (double)(lt.year * 10000 + (int64_t)lt.month * 100 + lt.day);
    } else {
        tmp->type = TG_VT_STRING;
        tmp->str = tg_weekday_name(lt.weekday);
        tmp->len = 3;
    }
    return tmp;
}

/* Whether set (sorted by tg_value_cmp, unique) holds v: binary search, O(log n). */
static int set_contains(const tg_value_t *set, uint32_t n, const tg_value_t *v) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = tg_value_cmp(&set[mid], v);
        if (c == 0) {
            return 1;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

/* The caller's verified facts (tenant, principal.*): a function of its own, kept out of
 * eval_cond's common cases so that rules on the request's own members stay as cheap as
 * they were. NULL when absent (or an unknown source: nothing holds but exists:false). */
static const tg_value_t *fact_value(const tg_cond_t *c, const tg_frame_t *f, tg_value_t *tmp) {
    const tg_sv_t *s;
    switch (c->src) {
    case TG_SRC_CLAIM:
        return slot_find(f->claims, f->n_claims, c->id);
    case TG_SRC_TENANT:
        s = &f->tenant;
        break;
    case TG_SRC_PRINCIPAL_SUBJECT:
        s = &f->principal_subject;
        break;
    case TG_SRC_PRINCIPAL_ISSUER:
        s = &f->principal_issuer;
        break;
    case TG_SRC_TIME_HOUR:
    case TG_SRC_TIME_WEEKDAY:
    case TG_SRC_TIME_DATE:
        return time_value(c, f, tmp);
    default:
        return NULL;
    }
    if (s->ptr == NULL) {
        return NULL;
    }
    tmp->type = TG_VT_STRING;
    tmp->str = s->ptr;
    tmp->len = s->len;
    tmp->num = 0;
    tmp->boolean = 0;
    return tmp;
}

/* The value condition c reads from frame f: NULL when absent. tmp holds a value built from
 * a view (actor, action, facts); the result may point into it. */
static const tg_value_t *cond_value(const tg_cond_t *c, const tg_frame_t *f, tg_value_t *tmp) {
    switch (c->src) {
    case TG_SRC_CONTEXT:
        return slot_find(f->context, f->n_context, c->id);
    case TG_SRC_SIGNAL:
        return slot_find(f->signals, f->n_signals, c->id);
    case TG_SRC_ACTOR:
    case TG_SRC_ACTION: {
        const tg_sv_t *s = c->src == TG_SRC_ACTOR ? &f->actor : &f->action;
        if (s->ptr == NULL) {
            return NULL;
        }
        tmp->type = TG_VT_STRING;
        tmp->str = s->ptr;
        tmp->len = s->len;
        tmp->num = 0;
        tmp->boolean = 0;
        return tmp;
    }
    default:
        return fact_value(c, f, tmp);
    }
}

/* Branch and placement hints for the rare paths of the rules loop (GCC and clang). */
#if defined(__GNUC__)
#define TG_KERNEL_COLD __attribute__((cold, noinline))
#define TG_KERNEL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TG_KERNEL_COLD
#define TG_KERNEL_UNLIKELY(x) (x)
#endif

static int string_test(const tg_cond_t *c, const tg_value_t *v);

/* Whether condition c holds on value v (NULL = absent). A condition holds only on a present
 * value of a comparable type (kernel.h). */
static int cond_test(const tg_cond_t *c, const tg_value_t *v) {
    if (v == NULL || v->type == TG_VT_ABSENT || v->type == TG_VT_NULL) {
        return c->op == TG_OP_EXISTS && !c->value.boolean; /* exists:false holds */
    }
    switch (c->op) {
    case TG_OP_EXISTS:
        return c->value.boolean;
    case TG_OP_EQ:
        return value_eq(v, &c->value);
    case TG_OP_NE:
        return !value_eq(v, &c->value);
    case TG_OP_GT:
    case TG_OP_GTE:
    case TG_OP_LT:
    case TG_OP_LTE: {
        if (v->type != TG_VT_NUMBER) {
            return 0; /* "20000" is not a number: the comparison does not hold */
        }
        double x = v->num, y = c->value.num;
        return c->op == TG_OP_GT    ? x > y
               : c->op == TG_OP_GTE ? x >= y
               : c->op == TG_OP_LT  ? x < y
                                    : x <= y;
    }
    case TG_OP_IN:
    case TG_OP_NOT_IN: {
        int found = 0;
        for (uint32_t i = 0; i < c->n_list && !found; i++) {
            found = value_eq(v, &c->list[i]);
        }
        return found == (c->op == TG_OP_IN);
    }
    case TG_OP_IN_SET:
        return set_contains(c->list, c->n_list, v);
    case TG_OP_NOT_IN_SET:
        return !set_contains(c->list, c->n_list, v);
    case TG_OP_PREFIX:
    case TG_OP_SUFFIX:
    case TG_OP_GLOB:
        return string_test(c, v); /* out of line: today's operators keep cond_test small */
    default:
        return 0; /* groups are walked by eval_node, never tested on a value */
    }
}

/* ---- issue 21's conditions: string matching, value_from, groups ----------------------
 * Kept out of cond_test's and eval_cond's common path: a rule of today's operators pays one
 * test of its op and has_from, nothing more. */

/* prefix / suffix / glob: hold only on a string value (the compiler makes value a string). */
TG_KERNEL_COLD static int string_test(const tg_cond_t *c, const tg_value_t *v) {
    if (v->type != TG_VT_STRING || c->value.type != TG_VT_STRING) {
        return 0;
    }
    uint32_t n = c->value.len;
    switch (c->op) {
    case TG_OP_PREFIX:
        return v->len >= n && (n == 0 || memcmp(v->str, c->value.str, n) == 0);
    case TG_OP_SUFFIX:
        return v->len >= n && (n == 0 || memcmp(v->str + (v->len - n), c->value.str, n) == 0);
    default:
        return tg_glob_match(c->value.str, n, v->str, v->len, NULL);
    }
}

/* The other side of a value_from condition: NULL when absent. */
static const tg_value_t *from_value(const tg_cond_t *c, const tg_frame_t *f, tg_value_t *tmp) {
    tg_cond_t o;
    memset(&o, 0, sizeof o);
    o.src = c->from_src;
    o.id = c->from_id;
    return cond_value(&o, f, tmp);
}

static int is_scalar(const tg_value_t *v) {
    return v->type == TG_VT_BOOL || v->type == TG_VT_NUMBER || v->type == TG_VT_STRING;
}

/* Whether value_from condition c holds on v (its field) and o (the other field): both must
 * be present; ordered operators compare two numbers; eq holds on the same type and value,
 * ne on two scalars that are not equal (objects and arrays make neither hold: fail closed). */
static int from_test(const tg_cond_t *c, const tg_value_t *v, const tg_value_t *o) {
    if (v == NULL || o == NULL || !is_scalar(v) || !is_scalar(o)) {
        return 0;
    }
    switch (c->op) {
    case TG_OP_EQ:
        return value_eq(v, o);
    case TG_OP_NE:
        return !value_eq(v, o);
    case TG_OP_GT:
    case TG_OP_GTE:
    case TG_OP_LT:
    case TG_OP_LTE: {
        if (v->type != TG_VT_NUMBER || o->type != TG_VT_NUMBER) {
            return 0;
        }
        double x = v->num, y = o->num;
        return c->op == TG_OP_GT    ? x > y
               : c->op == TG_OP_GTE ? x >= y
               : c->op == TG_OP_LT  ? x < y
                                    : x <= y;
    }
    default:
        return 0;
    }
}

/* A condition of any kind at `depth` groups down: 1 holds, 0 does not, -1 corrupt tables
 * (nested deeper than TG_COND_MAX_NESTING, or a group without members). -1 propagates
 * through `not` unchanged, so a corrupt member can never make a rule hold by negation. The
 * recursion is bounded by TG_COND_MAX_NESTING; nothing is allocated. */
static int eval_node(const tg_cond_t *c, const tg_frame_t *f, unsigned depth) {
    tg_value_t a, b;
    if (c->op < TG_OP_ALL) {
        const tg_value_t *v = cond_value(c, f, &a);
        return c->has_from ? from_test(c, v, from_value(c, f, &b)) : cond_test(c, v);
    }
    if (depth >= TG_COND_MAX_NESTING || c->n_sub == 0 || c->sub == NULL) {
        return -1;
    }
    if (c->op == TG_OP_NOT) {
        int r = eval_node(&c->sub[0], f, depth + 1);
        return r < 0 ? r : !r;
    }
    int any = c->op == TG_OP_ANY, corrupt = 0;
    for (uint32_t i = 0; i < c->n_sub; i++) {
        int r = eval_node(&c->sub[i], f, depth + 1);
        if (r < 0) {
            corrupt = 1;
            if (!any) {
                return -1;
            }
        } else if (r == any) {
            return r; /* all_of: the first failure decides; any_of: the first success */
        }
    }
    return corrupt ? -1 : !any;
}

/* The walk for groups and value_from, out of line so that eval_cond (inlined into the
 * rules loop) stays as small as it was for today's conditions. */
TG_KERNEL_COLD static int eval_cond_ext(const tg_cond_t *c, const tg_frame_t *f) {
    return eval_node(c, f, 0) == 1;
}

static int eval_cond(const tg_cond_t *c, const tg_frame_t *f) {
    if (TG_KERNEL_UNLIKELY(c->op >= TG_OP_ALL || c->has_from)) {
        return eval_cond_ext(c, f);
    }
    tg_value_t tmp;
    return cond_test(c, cond_value(c, f, &tmp));
}

static int eval_rule(const tg_rule_t *r, const tg_frame_t *f) {
    for (uint32_t i = 0; i < r->n_conds; i++) {
        if (!eval_cond(&r->conds[i], f)) {
            return 0;
        }
    }
    return 1;
}

static int actor_allowed(const tg_surface_t *s, const tg_sv_t *actor) {
    if (actor->ptr == NULL) {
        return 0;
    }
    uint32_t lo = 0, hi = s->n_actors;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = tg_sv_cmp(s->actors[mid].ptr, s->actors[mid].len, actor->ptr, actor->len);
        if (c == 0) {
            return 1;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

/* RECEIVED -> VALIDATED. Returns 1 when a terminal decision was written. */
static int validate(tg_decision_t *d, const tg_kernel_tables_t *t, const tg_surface_t *s,
                    const tg_frame_t *f) {
    for (uint32_t i = 0; i < s->n_required; i++) {
        const tg_reqfield_t *rq = &s->required[i];
        const tg_value_t *v = slot_find(f->context, f->n_context, rq->id);
        if (v == NULL || !type_matches(v, rq->type)) {
            finish(d, TG_SILENCE, R(MISSING_CONTEXT), TG_CAUSE_CONTEXT, t->fields[rq->id]);
            return 1;
        }
    }
    if (f->n_unknown_signals > 0) {
        finish(d, TG_SILENCE, R(UNKNOWN_SIGNAL), TG_CAUSE_UNKNOWN_SIGNAL, f->unknown_signal);
        return 1;
    }
    uint32_t present = 0;
    for (uint32_t i = 0; i < f->n_signals; i++) {
        const tg_frame_slot_t *sl = &f->signals[i];
        const tg_signal_t *sig = &t->signals[sl->id];
        int ok = sig->type == TG_SIG_NUMBER
                     ? (sl->v.type == TG_VT_NUMBER && sl->v.num >= 0.0 && sl->v.num <= 1.0)
                     : sl->v.type == TG_VT_BOOL;
        if (!ok) {
            finish(d, TG_SILENCE, R(INVALID_SIGNAL), TG_CAUSE_INVALID_SIGNAL, sig->name);
            return 1;
        }
        present |= UINT32_C(1) << sl->id;
    }
    uint32_t missing = s->required_signals & ~present;
    if (missing != 0) {
        uint32_t id = 0;
        while (!(missing & (UINT32_C(1) << id))) {
            id++;
        }
        finish(d, TG_SILENCE, R(MISSING_SIGNAL), TG_CAUSE_MISSING_SIGNAL, t->signals[id].name);
        return 1;
    }
    return 0;
}

/* CLASSIFIED -> SIGNALS_EVALUATED: booleans first, then thresholds (kernel.h). */
static int evaluate_signals(tg_decision_t *d, const tg_kernel_tables_t *t, const tg_frame_t *f,
                            unsigned tier) {
    uint32_t bm = t->bool_deny_mask[tier], tm = t->threshold_mask[tier];
    if (bm != 0) {
        for (uint32_t i = 0; i < f->n_signals; i++) {
            const tg_frame_slot_t *sl = &f->signals[i];
            if ((bm >> sl->id) & 1u && sl->v.boolean) {
                const tg_signal_t *sig = &t->signals[sl->id];
                finish(d, TG_DENY, sig->reason, TG_CAUSE_SIGNAL_DENY, sig->name);
                return 1;
            }
        }
    }
    if (tm != 0) {
        for (uint32_t i = 0; i < f->n_signals; i++) {
            const tg_frame_slot_t *sl = &f->signals[i];
            if ((tm >> sl->id) & 1u) {
                const tg_signal_t *sig = &t->signals[sl->id];
                if (sl->v.num > sig->threshold[tier]) { /* equal passes (SPEC §8) */
                    finish(d, TG_DENY, sig->reason, TG_CAUSE_SIGNAL_THRESHOLD, sig->name);
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* The amount request f adds to limit l: 1 for a count; the summed context field for a sum,
 * NaN when it cannot be counted (absent, not a number, negative, not finite). */
static double limit_amount(const tg_limit_t *l, const tg_frame_t *f) {
    if (l->kind == TG_LIMIT_COUNT) {
        return 1.0;
    }
    const tg_value_t *v = slot_find(f->context, f->n_context, l->field);
    if (v == NULL || v->type != TG_VT_NUMBER || !(v->num >= 0.0) || !isfinite(v->num)) {
        return NAN;
    }
    return v->num;
}

/* Whether limit l takes total + amount: NaN anywhere (an uncountable amount, a corrupt
 * total) fails, so nothing uncountable passes. */
static int limit_holds(const tg_limit_t *l, double total, double amount) {
    double sum = total + amount;
    return sum == sum && sum <= l->max;
}

/* After a PERMIT at RULES_EVALUATED: every limit of the surface, in id order (kernel.h).
 * Returns 1 when a limit decided (DENY, or SILENCE for an unbound total). */
static int evaluate_limits(tg_decision_t *d, const tg_kernel_tables_t *t, const tg_surface_t *s,
                           const tg_frame_t *f) {
    for (uint32_t i = 0; i < s->n_limits; i++) {
        const tg_limit_t *l = &t->limits[s->limits[i]];
        const tg_value_t *total = slot_find(f->limits, f->n_limits, s->limits[i]);
        if (total == NULL || total->type != TG_VT_NUMBER) {
            d->rule_id = sv_of(NULL, 0);
            finish(d, TG_SILENCE, R(INVALID_FRAME), TG_CAUSE_FRAME, l->id);
            return 1;
        }
        if (!limit_holds(l, total->num, limit_amount(l, f))) {
            d->rule_id = sv_of(NULL, 0);
            finish(d, TG_DENY, l->reason, TG_CAUSE_LIMIT, l->id);
            return 1;
        }
    }
    return 0;
}

/* Whether rule r can still change the outcome once the rules before it matched as
 * escalate/permit say: deny beats escalate beats permit, the first of each kind names the
 * decision, so a later permit after any match, or a later escalate after an escalate, is
 * skipped. Shared by the decision and explain so that they cannot disagree. */
static int rule_examined(const tg_rule_t *r, const tg_rule_t *escalate, const tg_rule_t *permit) {
    if (r->effect == TG_EFFECT_PERMIT) {
        return escalate == NULL && permit == NULL;
    }
    if (r->effect == TG_EFFECT_ESCALATE) {
        return escalate == NULL;
    }
    return 1;
}

/* SIGNALS_EVALUATED -> RULES_EVALUATED: always terminal. */
static void evaluate_rules(tg_decision_t *d, const tg_surface_t *s, const tg_frame_t *f) {
    const tg_rule_t *permit = NULL, *escalate = NULL;
    for (uint32_t i = 0; i < s->n_rules; i++) {
        const tg_rule_t *r = &s->rules[i];
        if (!rule_examined(r, escalate, permit)) {
            continue; /* only the first matching permit or escalate can matter */
        }
        d->rules_evaluated++;
        if (eval_rule(r, f)) {
            if (r->effect == TG_EFFECT_DENY) {
                d->rule_id = r->id; /* any matching deny wins, the first one names it */
                finish(d, TG_DENY, r->reason, TG_CAUSE_RULE, sv_of(NULL, 0));
                return;
            }
            if (r->effect == TG_EFFECT_ESCALATE) {
                escalate = r;
            } else if (r->effect == TG_EFFECT_PERMIT) {
                permit = r;
            } else {
                /* an effect the kernel does not know: a corrupt table, never a PERMIT */
                d->rule_id = sv_of(NULL, 0);
                finish(d, TG_SILENCE, R(INVALID_FRAME), TG_CAUSE_FRAME, r->id);
                return;
            }
        }
    }
    if (escalate != NULL) {
        d->rule_id = escalate->id;
        finish(d, TG_ESCALATE, escalate->reason != NULL ? escalate->reason : R(APPROVAL_REQUIRED),
               TG_CAUSE_RULE, sv_of(NULL, 0));
        return;
    }
    if (permit != NULL) {
        d->rule_id = permit->id;
        finish(d, TG_PERMIT, R(NO_POLICY_VIOLATION), TG_CAUSE_RULE, sv_of(NULL, 0));
        return;
    }
    if (s->default_effect == TG_EFFECT_PERMIT) {
        finish(d, TG_PERMIT, R(NO_POLICY_VIOLATION), TG_CAUSE_DEFAULT, sv_of(NULL, 0));
    } else {
        finish(d, TG_DENY, s->default_reason != NULL ? s->default_reason : R(NO_MATCHING_POLICY),
               TG_CAUSE_DEFAULT, sv_of(NULL, 0));
    }
}

static int claims_ok(const tg_kernel_tables_t *t, const tg_frame_t *f) {
    if (f->n_claims > TG_FRAME_MAX_CLAIMS) {
        return 0;
    }
    for (uint32_t i = 0; i < f->n_claims; i++) {
        if (f->claims[i].id >= t->n_claims) {
            return 0;
        }
    }
    return 1;
}

/* The frame must come from these tables and respect its own bounds before any lookup. */
static int frame_ok(const tg_kernel_tables_t *t, const tg_frame_t *f) {
    if (f->surface >= t->n_surfaces || f->n_context > TG_FRAME_MAX_CONTEXT ||
        f->n_signals > TG_FRAME_MAX_SIGNALS || f->n_limits > TG_FRAME_MAX_LIMITS) {
        return 0;
    }
    for (uint32_t i = 0; i < f->n_limits; i++) {
        if (f->limits[i].id >= t->n_limits) {
            return 0;
        }
    }
    if (f->n_claims != 0 && !claims_ok(t, f)) {
        return 0;
    }
    for (uint32_t i = 0; i < f->n_signals; i++) {
        if (f->signals[i].id >= t->n_signals) {
            return 0;
        }
    }
    for (uint32_t i = 0; i < f->n_context; i++) {
        if (f->context[i].id >= t->n_fields) {
            return 0;
        }
    }
    return 1;
}

void tg_kernel_decide(tg_decision_t *out, const tg_kernel_tables_t *t, const tg_frame_t *f) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    out->reason = R(INVALID_FRAME);
    out->cause = TG_CAUSE_FRAME;
    enter(out, TG_STATE_RECEIVED);
    if (t == NULL || f == NULL) {
        return;
    }
    if (memcmp(t->policy_hash, f->policy_hash, sizeof t->policy_hash) != 0) {
        out->reason = R(POLICY_MISMATCH);
        return;
    }
    if (!frame_ok(t, f)) {
        return;
    }
    const tg_surface_t *s = &t->surfaces[f->surface];
    unsigned tier = s->tier & 3u;
    if (tier == 0) {
        return; /* compile guarantees 1..3; a zero tier means a corrupt table */
    }
    if (validate(out, t, s, f)) {
        return;
    }
    enter(out, TG_STATE_VALIDATED);
    out->tier = (uint8_t)tier;
    if (s->frozen) {
        finish(out, TG_DENY, R(SURFACE_FROZEN), TG_CAUSE_FROZEN, s->name);
        return;
    }
    if (s->has_actors && !actor_allowed(s, &f->actor)) {
        finish(out, TG_DENY, R(ACTOR_NOT_AUTHORIZED), TG_CAUSE_ACTOR, f->actor);
        return;
    }
    enter(out, TG_STATE_CLASSIFIED);
    if (evaluate_signals(out, t, f, tier)) {
        return;
    }
    enter(out, TG_STATE_SIGNALS_EVALUATED);
    enter(out, TG_STATE_RULES_EVALUATED);
    evaluate_rules(out, s, f);
    if (out->verdict == TG_PERMIT && s->n_limits != 0) {
        (void)evaluate_limits(out, t, s, f);
    }
}

/* ---- explain (kernel_tables.h): a cold second walk over the same functions ---------- */

typedef struct explain {
    const tg_frame_t *f;
    tg_explain_fn fn;
    void *ud;
    const tg_rule_t *rule;
    uint8_t evaluated;
} explain_t;

/* time.date is compared as the number YYYYMMDD; explain shows it as the "YYYY-MM-DD" the
 * bundle wrote. buf lives as long as the step (the callback's duration). */
static const tg_value_t *explain_date(const tg_value_t *v, tg_value_t *out, char buf[11]) {
    if (v == NULL || v->type != TG_VT_NUMBER || !(v->num >= 10101 && v->num <= 99991231)) {
        return v;
    }
    uint32_t n = (uint32_t)v->num;
    uint32_t parts[3] = {n / 10000, n / 100 % 100, n % 100};
    char *p = buf;
    for (int i = 0; i < 3; i++) {
        uint32_t width = i == 0 ? 4 : 2, div = i == 0 ? 1000 : 10;
        for (uint32_t k = 0; k < width; k++, div /= 10) {
            *p++ = (char)('0' + parts[i] / div % 10);
        }
        *p++ = i < 2 ? '-' : '\0';
    }
    *out = *v;
    out->type = TG_VT_STRING;
    out->str = buf;
    out->len = 10;
    return out;
}

/* One condition, then (a group) its members at depth + 1, pre-order. held comes from the
 * kernel's own eval_node, so explain and decision cannot disagree; depth 1 = a when[]
 * member, and the walk stops where eval_node stops (TG_COND_MAX_NESTING). */
static void explain_cond(explain_t *x, const tg_cond_t *c, uint32_t index, uint8_t depth) {
    tg_value_t tmp, otmp, shown;
    char date[11];
    tg_explain_step_t st = {0};
    st.kind = TG_EXPLAIN_COND;
    st.depth = depth;
    st.index = index;
    st.rule = x->rule;
    st.cond = c;
    st.evaluated = x->evaluated;
    if (c->op < TG_OP_ALL) {
        st.value = cond_value(c, x->f, &tmp);
        st.other = c->has_from ? from_value(c, x->f, &otmp) : NULL;
        if (c->src == TG_SRC_TIME_DATE) { /* compared as YYYYMMDD, shown as written */
            st.value = explain_date(st.value, &shown, date);
        }
    }
    st.held = (uint8_t)(eval_node(c, x->f, (unsigned)depth - 1u) == 1);
    x->fn(x->ud, &st);
    if (c->op >= TG_OP_ALL && depth <= TG_COND_MAX_NESTING && c->sub != NULL) {
        for (uint32_t j = 0; j < c->n_sub; j++) {
            explain_cond(x, &c->sub[j], j, (uint8_t)(depth + 1));
        }
    }
}

void tg_kernel_explain(tg_decision_t *d, const tg_kernel_tables_t *t, const tg_frame_t *f,
                       tg_explain_fn fn, void *ud) {
    tg_decision_t local;
    tg_decision_t *dd = d != NULL ? d : &local;
    tg_kernel_decide(dd, t, f);
    if (t == NULL || f == NULL || fn == NULL || dd->n_states == 0 ||
        dd->states[dd->n_states - 1] != TG_STATE_RULES_EVALUATED) {
        return; /* decided before the rules: the decision's cause says why */
    }
    const tg_surface_t *s = &t->surfaces[f->surface];
    explain_t x = {f, fn, ud, NULL, 0};
    int deny = 0;
    const tg_rule_t *permit = NULL, *escalate = NULL;
    for (uint32_t i = 0; i < s->n_rules; i++) {
        const tg_rule_t *r = &s->rules[i];
        int examined = !deny && rule_examined(r, escalate, permit);
        int held = eval_rule(r, f);
        if (examined && held) {
            deny |= r->effect == TG_EFFECT_DENY;
            if (r->effect == TG_EFFECT_ESCALATE) {
                escalate = r;
            } else if (r->effect == TG_EFFECT_PERMIT) {
                permit = r;
            }
        }
        tg_explain_step_t st = {0};
        st.kind = TG_EXPLAIN_RULE;
        st.index = i;
        st.rule = r;
        st.held = (uint8_t)held;
        st.evaluated = (uint8_t)examined;
        fn(ud, &st);
        x.rule = r;
        x.evaluated = (uint8_t)examined;
        for (uint32_t j = 0; j < r->n_conds; j++) {
            explain_cond(&x, &r->conds[j], j, 1);
        }
    }
    /* The limits are examined after a PERMIT of the rules step, until one fails. */
    int examine =
        !deny && escalate == NULL && (permit != NULL || s->default_effect == TG_EFFECT_PERMIT);
    for (uint32_t i = 0; i < s->n_limits; i++) {
        const tg_limit_t *l = &t->limits[s->limits[i]];
        const tg_value_t *total = slot_find(f->limits, f->n_limits, s->limits[i]);
        tg_explain_step_t st = {0};
        st.kind = TG_EXPLAIN_LIMIT;
        st.index = i;
        st.limit = l;
        st.total = total != NULL && total->type == TG_VT_NUMBER ? total->num : NAN;
        st.amount = limit_amount(l, f);
        st.held = (uint8_t)limit_holds(l, st.total, st.amount);
        st.evaluated = (uint8_t)examine;
        fn(ud, &st);
        examine = examine && st.held;
    }
}

const char *tg_verdict_name(tg_verdict_t v) {
    switch (v) {
    case TG_PERMIT:
        return "PERMIT";
    case TG_DENY:
        return "DENY";
    case TG_ESCALATE:
        return "ESCALATE";
    default:
        return "SILENCE";
    }
}

const char *tg_state_name(tg_state_t s) {
    static const char *const names[TG_STATE__COUNT] = {"RECEIVED", "VALIDATED", "CLASSIFIED",
                                                       "SIGNALS_EVALUATED", "RULES_EVALUATED"};
    return (unsigned)s < TG_STATE__COUNT ? names[s] : "UNKNOWN";
}

const char *tg_cause_name(tg_cause_t c) {
    static const char *const names[TG_CAUSE__COUNT] = {
        "frame",          "context", "unknown_signal", "invalid_signal",   "missing_signal",
        "surface_frozen", "actor",   "signal",         "signal_threshold", "rule",
        "default",        "limit"};
    return (unsigned)c < TG_CAUSE__COUNT ? names[c] : "unknown";
}

const char *tg_reason_code(tg_reason_t r) {
    return (unsigned)r < TG_REASON__COUNT ? reason_codes[r] : R(INTERNAL_ERROR);
}

bool tg_reason_code_valid(const char *s, size_t n) {
    if (n == 0 || n > TG_REASON_MAX || s[0] < 'A' || s[0] > 'Z') {
        return false;
    }
    for (size_t i = 1; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) {
            return false;
        }
    }
    return true;
}
