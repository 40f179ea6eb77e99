/* lint.c — what compiles but is probably wrong: undeclared fields, rules that can never
 * match or never decide, unmarked unconditional tier-1 permits, a reused version
 * (policy.h has the table of findings). It reads the bundle's JSON for the conditions, so
 * that it walks condition shapes the compiler learns later (groups, new operators) without
 * knowing them: a shape it does not know gives no finding. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_internal.h"
#include "trigguard/canon.h"
#include "trigguard/io.h"

static const char *const CODE_NAMES[TG_LINT__COUNT] = {"undeclared_field",
                                                       "never_matches",
                                                       "shadowed_rule",
                                                       "duplicate_rule",
                                                       "permit_overridden_by_deny",
                                                       "unconditional_tier1_permit",
                                                       "version_reused",
                                                       "non_integer_amount"};

const char *tg_lint_code_name(tg_lint_code_t code) {
    return (unsigned)code < TG_LINT__COUNT ? CODE_NAMES[code] : "?";
}

const char *tg_lint_severity_name(tg_lint_severity_t s) {
    return s == TG_LINT_WARNING ? "warning" : "error";
}

/* Nesting of condition groups the walk follows; the JSON parser's depth limit is lower. */
#define LINT_MAX_DEPTH 32

/* ---- the walk's state: the report and the JSON path ------------------------------------ */

typedef struct lint {
    tg_lint_report_t *r;
    const tg_policy_t *p;
    const tg_surface_t *s; /* the surface being walked */
    size_t path_len;
    char path[TG_LINT_MAX_PATH];
    tg_err_t err; /* first allocation or canon error */
} lint_t;

static size_t push_key(lint_t *l, const char *key) {
    size_t saved = l->path_len;
    int w = snprintf(l->path + l->path_len, sizeof l->path - l->path_len, "%s%s",
                     l->path_len ? "." : "", key);
    if (w > 0) {
        l->path_len += (size_t)w;
        if (l->path_len >= sizeof l->path) {
            l->path_len = sizeof l->path - 1; /* truncated, still NUL-terminated */
        }
    }
    return saved;
}

static size_t push_index(lint_t *l, size_t i) {
    size_t saved = l->path_len;
    int w = snprintf(l->path + l->path_len, sizeof l->path - l->path_len, "[%zu]", i);
    if (w > 0) {
        l->path_len += (size_t)w;
        if (l->path_len >= sizeof l->path) {
            l->path_len = sizeof l->path - 1;
        }
    }
    return saved;
}

static void pop(lint_t *l, size_t saved) {
    l->path_len = saved;
    l->path[saved] = '\0';
}

TG_PRINTF(3, 4) static void add(lint_t *l, tg_lint_code_t code, const char *fmt, ...) {
    char msg[TG_LINT_MAX_MESSAGE];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tg_lint_report_t *r = l->r;
    tg_lint_severity_t sev = code == TG_LINT_NON_INTEGER_AMOUNT ? TG_LINT_WARNING : TG_LINT_ERROR;
    if (sev == TG_LINT_ERROR) {
        r->errors++;
    } else {
        r->warnings++;
    }
    if (r->n >= TG_LINT_MAX_FINDINGS) {
        r->dropped++;
        return;
    }
    tg_lint_finding_t *f = &r->findings[r->n++];
    f->severity = sev;
    f->code = code;
    (void)snprintf(f->path, sizeof f->path, "%s", l->path_len ? l->path : "policy");
    memcpy(f->message, msg, sizeof msg);
}

/* ---- leaves ---------------------------------------------------------------------------- */

static const char *const OPS[] = {"eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "exists"};
enum { N_OPS = sizeof OPS / sizeof OPS[0] };

/* TG_OP_* of a leaf's op, or -1 for one this file does not know (no finding then). */
static int leaf_op(const json_t *leaf) {
    const json_t *ov = json_object_get(leaf, "op");
    if (!json_is_string(ov)) {
        return -1;
    }
    for (int i = 0; i < N_OPS; i++) {
        if (strcmp(json_string_value(ov), OPS[i]) == 0) {
            return i;
        }
    }
    return -1;
}

static int is_ordered(int op) {
    return op == TG_OP_GT || op == TG_OP_GTE || op == TG_OP_LT || op == TG_OP_LTE;
}

static int is_number(const json_t *v) { return json_is_real(v) || json_is_integer(v); }

static double num_of(const json_t *v) {
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

/* Is `name` (n bytes) a declared context field of the surface? */
static int declared(const lint_t *l, const char *name, size_t n) {
    const tg_sv_t *fields = l->p->tables.fields;
    for (uint32_t i = 0; i < l->s->n_required; i++) {
        const tg_sv_t *f = &fields[l->s->required[i].id];
        if (f->len == n && memcmp(f->ptr, name, n) == 0) {
            return 1;
        }
    }
    for (uint32_t i = 0; i < l->s->n_optional; i++) {
        const tg_sv_t *f = &fields[l->s->optional[i].id];
        if (f->len == n && memcmp(f->ptr, name, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A reference to context.<name> (a leaf's field or value_from) at member `key`. */
static void check_reference(lint_t *l, const json_t *ref, const char *key) {
    if (!json_is_string(ref)) {
        return;
    }
    const char *s = json_string_value(ref);
    size_t n = json_string_length(ref);
    if (n <= 8 || memcmp(s, "context.", 8) != 0 || declared(l, s + 8, n - 8)) {
        return;
    }
    size_t saved = push_key(l, key);
    add(l, TG_LINT_UNDECLARED_FIELD,
        "%.*s is not declared in required_context or optional_context of surface %s (a typo? "
        "an undeclared field is never present, so the condition never holds)",
        (int)(n > 128 ? 128 : n), s, l->s->name.ptr);
    pop(l, saved);
}

/* Money compared as a float can round past a limit: docs/POLICY.md recommends integer minor
 * units. The operands of a numeric comparison on a context field that are not integers. */
static void check_integer_operands(lint_t *l, const json_t *leaf, int op) {
    const json_t *fv = json_object_get(leaf, "field");
    if (op < 0 || op == TG_OP_EXISTS || !json_is_string(fv) ||
        strncmp(json_string_value(fv), "context.", 8) != 0) {
        return;
    }
    const json_t *vv = json_object_get(leaf, "value");
    size_t saved = push_key(l, "value");
    if (is_number(vv) && num_of(vv) != floor(num_of(vv))) {
        add(l, TG_LINT_NON_INTEGER_AMOUNT,
            "%s is compared with %g, not an integer: give amounts in integer minor units "
            "(cents), which compare exactly",
            json_string_value(fv), num_of(vv));
    } else if (json_is_array(vv)) {
        for (size_t i = 0; i < json_array_size(vv); i++) {
            const json_t *e = json_array_get(vv, i);
            if (is_number(e) && num_of(e) != floor(num_of(e))) {
                size_t s2 = push_index(l, i);
                add(l, TG_LINT_NON_INTEGER_AMOUNT,
                    "%s is compared with %g, not an integer: give amounts in integer minor "
                    "units (cents), which compare exactly",
                    json_string_value(fv), num_of(e));
                pop(l, s2);
            }
        }
    }
    pop(l, saved);
}

/* ---- the walk: every leaf, and the leaves that must all hold ---------------------------- */

/* The leaves of one rule that must all hold (the top-level list and all_of groups within
 * it, not any_of or not): the ones a contradiction can be found among. */
typedef struct conj {
    const json_t **leaf;
    size_t n, cap;
} conj_t;

static int conj_add(conj_t *c, const json_t *leaf) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        const json_t **nl = realloc(c->leaf, cap * sizeof(const json_t *));
        if (nl == NULL) {
            return 0;
        }
        c->leaf = nl;
        c->cap = cap;
    }
    c->leaf[c->n++] = leaf;
    return 1;
}

static void walk(lint_t *l, const json_t *node, conj_t *conj, int depth);

static void walk_list(lint_t *l, const json_t *list, conj_t *conj, int depth) {
    for (size_t i = 0; i < json_array_size(list); i++) {
        size_t saved = push_index(l, i);
        walk(l, json_array_get(list, i), conj, depth + 1);
        pop(l, saved);
    }
}

/* conj: where leaves that must hold for the rule go, NULL below an any_of or a not. */
static void walk(lint_t *l, const json_t *node, conj_t *conj, int depth) {
    if (!json_is_object(node) || depth > LINT_MAX_DEPTH) {
        return;
    }
    static const char *const groups[] = {"all_of", "any_of", "not"};
    for (size_t g = 0; g < 3; g++) {
        const json_t *sub = json_object_get(node, groups[g]);
        if (sub == NULL) {
            continue;
        }
        size_t saved = push_key(l, groups[g]);
        if (g == 2) {
            walk(l, sub, NULL, depth + 1);
        } else if (json_is_array(sub)) {
            walk_list(l, sub, g == 0 ? conj : NULL, depth);
        }
        pop(l, saved);
        return;
    }
    const json_t *field = json_object_get(node, "field");
    if (field == NULL) {
        return; /* a shape this file does not know */
    }
    check_reference(l, field, "field");
    check_reference(l, json_object_get(node, "value_from"), "value_from");
    int op = leaf_op(node);
    check_integer_operands(l, node, op);
    if (conj != NULL && !conj_add(conj, node)) {
        l->err = TG_ERR_NOMEM;
    }
}

/* ---- contradictions among the leaves on one field ---------------------------------------- */

/* Equal as the kernel compares values: same type, numbers as doubles, strings bytewise. */
static int value_eq(const json_t *a, const json_t *b) {
    if (is_number(a) && is_number(b)) {
        return num_of(a) == num_of(b);
    }
    if (json_is_string(a) && json_is_string(b)) {
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    }
    if (json_is_boolean(a) && json_is_boolean(b)) {
        return json_is_true(a) == json_is_true(b);
    }
    return 0;
}

/* A constant operand the comparison is against (not value_from, not a data set). */
static const json_t *constant_operand(const json_t *leaf) {
    if (json_object_get(leaf, "value_from") != NULL || json_object_get(leaf, "set") != NULL) {
        return NULL;
    }
    return json_object_get(leaf, "value");
}

/* Does a candidate value x satisfy leaf (known op, constant operand)? */
static int holds(const json_t *x, int op, const json_t *v) {
    switch (op) {
    case TG_OP_EQ:
        return value_eq(x, v);
    case TG_OP_NE:
        return !value_eq(x, v);
    case TG_OP_GT:
    case TG_OP_GTE:
    case TG_OP_LT:
    case TG_OP_LTE: {
        if (!is_number(x) || !is_number(v)) {
            return 0;
        }
        double a = num_of(x), b = num_of(v);
        return op == TG_OP_GT ? a > b : op == TG_OP_GTE ? a >= b : op == TG_OP_LT ? a < b : a <= b;
    }
    case TG_OP_IN:
    case TG_OP_NOT_IN: {
        int found = 0;
        for (size_t i = 0; i < json_array_size(v) && !found; i++) {
            found = value_eq(x, json_array_get(v, i));
        }
        return found == (op == TG_OP_IN);
    }
    default:
        return 1; /* exists:true: a present value */
    }
}

/* Can the leaves leaf[0..n) (all on one field, all known ops with constant operands) hold
 * together? Returns 0 when they provably cannot. */
static int satisfiable(const json_t *const *leaf, const int *ops, size_t n) {
    int absent_only = 0, needs_value = 0;
    double lo = -INFINITY, hi = INFINITY;
    int lo_strict = 0, hi_strict = 0, ordered = 0;
    const json_t *cand_src = NULL; /* the first eq value or in list: the candidates */
    int cand_op = -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = constant_operand(leaf[i]);
        if (ops[i] == TG_OP_EXISTS) {
            if (v != NULL && json_is_false(v)) {
                absent_only = 1;
            } else {
                needs_value = 1;
            }
            continue;
        }
        needs_value = 1; /* every other operator is false on an absent field (kernel.h) */
        if (is_ordered(ops[i])) {
            ordered = 1;
            double b = num_of(v);
            if ((ops[i] == TG_OP_GT || ops[i] == TG_OP_GTE) &&
                (b > lo || (b == lo && ops[i] == TG_OP_GT))) {
                lo = b;
                lo_strict = ops[i] == TG_OP_GT;
            } else if ((ops[i] == TG_OP_LT || ops[i] == TG_OP_LTE) &&
                       (b < hi || (b == hi && ops[i] == TG_OP_LT))) {
                hi = b;
                hi_strict = ops[i] == TG_OP_LT;
            }
        } else if (cand_src == NULL && (ops[i] == TG_OP_EQ || ops[i] == TG_OP_IN)) {
            cand_src = v;
            cand_op = ops[i];
        }
    }
    if (absent_only && needs_value) {
        return 0;
    }
    if (ordered && (lo > hi || (lo == hi && (lo_strict || hi_strict)))) {
        return 0;
    }
    if (cand_src == NULL) {
        return 1; /* no finite set of values to test: only the checks above */
    }
    size_t nc = cand_op == TG_OP_EQ ? 1 : json_array_size(cand_src);
    for (size_t k = 0; k < nc; k++) {
        const json_t *x = cand_op == TG_OP_EQ ? cand_src : json_array_get(cand_src, k);
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) {
            ok = holds(x, ops[i], constant_operand(leaf[i]));
        }
        if (ok) {
            return 1;
        }
    }
    return 0;
}

/* Reports the rule (path at the rule) when some field's leaves cannot all hold. */
static void check_contradiction(lint_t *l, const conj_t *c) {
    const json_t **same = malloc((c->n ? c->n : 1) * sizeof(const json_t *));
    int *ops = malloc((c->n ? c->n : 1) * sizeof *ops);
    unsigned char *done = calloc(c->n ? c->n : 1, 1);
    if (same == NULL || ops == NULL || done == NULL) {
        l->err = TG_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (done[i]) {
            continue;
        }
        const json_t *fi = json_object_get(c->leaf[i], "field");
        if (!json_is_string(fi)) {
            continue;
        }
        size_t n = 0;
        for (size_t k = i; k < c->n; k++) {
            const json_t *fk = json_object_get(c->leaf[k], "field");
            if (done[k] || !json_is_string(fk) || !json_equal(fi, fk)) {
                continue;
            }
            done[k] = 1;
            int op = leaf_op(c->leaf[k]);
            const json_t *v = constant_operand(c->leaf[k]);
            /* Only what is fully understood takes part: a known operator on a constant of
             * the shape the compiler accepts for it. */
            int known = op == TG_OP_EXISTS ? (v == NULL || json_is_boolean(v))
                        : is_ordered(op)   ? is_number(v)
                        : op == TG_OP_IN || op == TG_OP_NOT_IN
                            ? json_is_array(v) && strcmp(json_string_value(fi), "actor") != 0
                            : op >= 0 && v != NULL;
            if (known) {
                same[n] = c->leaf[k];
                ops[n] = op;
                n++;
            }
        }
        if (n > 1 && !satisfiable(same, ops, n)) {
            add(l, TG_LINT_NEVER_MATCHES,
                "the conditions on %s cannot all hold: this rule never matches",
                json_string_value(fi));
            break; /* one finding per rule */
        }
    }
out:
    free(same);
    free(ops);
    free(done);
}

/* ---- rule sets: shadowed, duplicate and overridden rules --------------------------------- */

typedef struct {
    uint8_t (*h)[32]; /* canonical hashes of its conditions, sorted, unique */
    size_t n;
    int effect; /* TG_EFFECT_*, -1 = unknown (skipped) */
} ruleset_t;

static int hash_cmp(const void *a, const void *b) { return memcmp(a, b, 32); }

static int scalar_rank(const json_t *v) {
    return json_is_boolean(v) ? 0 : is_number(v) ? 1 : json_is_string(v) ? 2 : 3;
}

static int scalar_cmp(const void *a, const void *b) {
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    int rx = scalar_rank(x), ry = scalar_rank(y);
    if (rx != ry) {
        return rx < ry ? -1 : 1;
    }
    if (rx == 0) {
        return json_is_true(x) - json_is_true(y);
    }
    if (rx == 1) {
        double dx = num_of(x), dy = num_of(y);
        return (dx > dy) - (dx < dy);
    }
    if (rx == 2) {
        return tg_sv_lexcmp(json_string_value(x), (uint32_t)json_string_length(x),
                            json_string_value(y), (uint32_t)json_string_length(y));
    }
    return 0;
}

static tg_err_t canon_node(json_t *node, int depth);

/* A list whose order means nothing, made a set: sorted, duplicates removed. Scalars sort by
 * value; anything else by its canonical hash (after canonicalizing it). */
static tg_err_t canon_set(json_t *arr, int depth) {
    size_t n = json_array_size(arr);
    if (n < 2 && n > 0) {
        return canon_node(json_array_get(arr, 0), depth + 1);
    }
    json_t **e = malloc((n ? n : 1) * sizeof(json_t *));
    uint8_t(*h)[32] = malloc((n ? n : 1) * sizeof *h);
    tg_err_t rc = e == NULL || h == NULL ? TG_ERR_NOMEM : TG_OK;
    int scalars = 1;
    size_t held = 0; /* e[0..held) hold a reference */
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        e[i] = json_incref(json_array_get(arr, i));
        held = i + 1;
        scalars = scalars && scalar_rank(e[i]) < 3;
    }
    if (rc == TG_OK && !scalars) {
        /* hash-keyed: sort (hash, element) pairs by the hash */
        for (size_t i = 0; i < n && rc == TG_OK; i++) {
            rc = canon_node(e[i], depth + 1);
            if (rc == TG_OK) {
                rc = tg_canon_sha256(h[i], e[i], NULL);
            }
        }
        for (size_t i = 1; i < n && rc == TG_OK; i++) { /* insertion sort: lists are short */
            for (size_t k = i; k > 0 && memcmp(h[k - 1], h[k], 32) > 0; k--) {
                uint8_t th[32];
                memcpy(th, h[k], 32);
                memcpy(h[k], h[k - 1], 32);
                memcpy(h[k - 1], th, 32);
                json_t *te = e[k];
                e[k] = e[k - 1];
                e[k - 1] = te;
            }
        }
    } else if (rc == TG_OK) {
        qsort(e, n, sizeof(json_t *), scalar_cmp);
    }
    if (rc == TG_OK) {
        json_array_clear(arr);
        for (size_t i = 0; i < n && rc == TG_OK; i++) {
            int dup = i > 0 && (scalars ? scalar_cmp(&e[i - 1], &e[i]) == 0
                                        : memcmp(h[i - 1], h[i], 32) == 0);
            if (!dup && json_array_append(arr, e[i]) != 0) {
                rc = TG_ERR_NOMEM;
            }
        }
    }
    for (size_t i = 0; i < held; i++) {
        json_decref(e[i]);
    }
    free(e);
    free(h);
    return rc;
}

/* In place, on the lint's own copy: the condition as it means, not as it is written. */
static tg_err_t canon_node(json_t *node, int depth) {
    if (!json_is_object(node) || depth > LINT_MAX_DEPTH) {
        return TG_OK;
    }
    json_object_del(node, "description");
    const json_t *ov = json_object_get(node, "op");
    json_t *vv = json_object_get(node, "value");
    if (json_is_string(ov) && json_is_array(vv) &&
        (strcmp(json_string_value(ov), "in") == 0 ||
         strcmp(json_string_value(ov), "not_in") == 0)) {
        return canon_set(vv, depth);
    }
    json_t *sub = json_object_get(node, "any_of");
    if (json_is_array(sub)) {
        return canon_set(sub, depth);
    }
    sub = json_object_get(node, "all_of");
    if (json_is_array(sub)) {
        return canon_set(sub, depth);
    }
    return canon_node(json_object_get(node, "not"), depth + 1);
}

static tg_err_t ruleset_build(ruleset_t *rs, const json_t *rule) {
    rs->effect = -1;
    const json_t *ev = json_object_get(rule, "effect");
    if (json_is_string(ev)) {
        rs->effect = strcmp(json_string_value(ev), "permit") == 0 ? TG_EFFECT_PERMIT
                     : strcmp(json_string_value(ev), "deny") == 0 ? TG_EFFECT_DENY
                                                                  : -1;
    }
    const json_t *wv = json_object_get(rule, "when");
    size_t n = json_array_size(wv); /* 0 when absent */
    rs->h = malloc((n ? n : 1) * sizeof *rs->h);
    if (rs->h == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        json_t *copy = json_deep_copy(json_array_get(wv, i));
        rc = copy == NULL ? TG_ERR_NOMEM : canon_node(copy, 0);
        if (rc == TG_OK) {
            rc = tg_canon_sha256(rs->h[i], copy, NULL);
        }
        json_decref(copy);
    }
    if (rc != TG_OK) {
        return rc;
    }
    qsort(rs->h, n, 32, hash_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k == 0 || memcmp(rs->h[k - 1], rs->h[i], 32) != 0) {
            memmove(rs->h[k++], rs->h[i], 32);
        }
    }
    rs->n = k;
    return TG_OK;
}

/* a ⊆ b (both sorted and unique). */
static int subset(const ruleset_t *a, const ruleset_t *b) {
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        while (j < b->n && memcmp(b->h[j], a->h[i], 32) < 0) {
            j++;
        }
        if (j == b->n || memcmp(b->h[j], a->h[i], 32) != 0) {
            return 0;
        }
        j++;
    }
    return 1;
}

static const char *rule_name(const json_t *rules, size_t i, char buf[32]) {
    const json_t *id = json_object_get(json_array_get(rules, i), "id");
    if (json_is_string(id)) {
        return json_string_value(id);
    }
    (void)snprintf(buf, 32, "rules[%zu]", i);
    return buf;
}

/* Path at the rule (rules[i]). */
static void check_rule_sets(lint_t *l, const json_t *rules, const ruleset_t *rs, size_t i) {
    char b1[32], b2[32];
    const ruleset_t *me = &rs[i];
    if (me->effect < 0) {
        return;
    }
    for (size_t j = 0; j < i; j++) {
        if (rs[j].effect != me->effect || !subset(&rs[j], me)) {
            continue;
        }
        if (rs[j].n == me->n) {
            add(l, TG_LINT_DUPLICATE_RULE,
                "rule %s has the same effect and conditions as rule %s: it never decides",
                rule_name(rules, i, b1), rule_name(rules, j, b2));
        } else {
            add(l, TG_LINT_SHADOWED_RULE,
                "rule %s is shadowed by the earlier rule %s (same effect, a subset of its "
                "conditions): it never decides",
                rule_name(rules, i, b1), rule_name(rules, j, b2));
        }
        break;
    }
    if (me->effect != TG_EFFECT_PERMIT) {
        return;
    }
    size_t n_rules = json_array_size(rules);
    for (size_t j = 0; j < n_rules; j++) {
        if (rs[j].effect == TG_EFFECT_DENY && subset(&rs[j], me)) {
            add(l, TG_LINT_PERMIT_OVERRIDDEN_BY_DENY,
                "permit rule %s includes every condition of deny rule %s, and a matching deny "
                "wins: it never permits",
                rule_name(rules, i, b1), rule_name(rules, j, b2));
            break;
        }
    }
}

/* ---- one surface ------------------------------------------------------------------------- */

static void lint_surface(lint_t *l, const json_t *body) {
    const json_t *rules = json_object_get(body, "rules");
    size_t n = json_array_size(rules);
    ruleset_t *rs = calloc(n ? n : 1, sizeof *rs);
    if (rs == NULL) {
        l->err = TG_ERR_NOMEM;
        return;
    }
    for (size_t i = 0; i < n && l->err == TG_OK; i++) {
        l->err = ruleset_build(&rs[i], json_array_get(rules, i));
    }
    size_t s1 = push_key(l, "rules");
    for (size_t i = 0; i < n && l->err == TG_OK; i++) {
        const json_t *rule = json_array_get(rules, i);
        size_t s2 = push_index(l, i);
        const json_t *when = json_object_get(rule, "when");
        conj_t conj = {NULL, 0, 0};
        size_t s3 = push_key(l, "when");
        walk_list(l, when, &conj, 0);
        pop(l, s3);
        check_contradiction(l, &conj);
        free(conj.leaf);
        check_rule_sets(l, rules, rs, i);
        if (rs[i].effect == TG_EFFECT_PERMIT && json_array_size(when) == 0 && l->s->tier == 1 &&
            !json_is_true(json_object_get(rule, "unconditional"))) {
            add(l, TG_LINT_UNCONDITIONAL_TIER1_PERMIT,
                "a permit without conditions on tier-1 surface %s permits every request the "
                "signals let through; say \"unconditional\": true if that is meant",
                l->s->name.ptr);
        }
        pop(l, s2);
    }
    pop(l, s1);
    for (size_t i = 0; i < n; i++) {
        free(rs[i].h);
    }
    free(rs);
}

tg_err_t tg_policy_lint(tg_lint_report_t *out, const tg_policy_t *p, const json_t *bundle,
                        const tg_policy_t *previous) {
    if (out == NULL || p == NULL || bundle == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    out->n = out->errors = out->warnings = out->dropped = 0;
    lint_t l;
    memset(&l, 0, sizeof l);
    l.r = out;
    l.p = p;
    if (previous != NULL && strcmp(tg_policy_version(previous), tg_policy_version(p)) == 0 &&
        memcmp(tg_policy_hash(previous), tg_policy_hash(p), 32) != 0) {
        size_t saved = push_key(&l, "version");
        add(&l, TG_LINT_VERSION_REUSED,
            "version \"%s\" is the previous bundle's (policyHash %.16s...) with different "
            "content (%.16s...): receipts could not tell them apart; give it a new version",
            tg_policy_version(p), tg_policy_hash_hex(previous), tg_policy_hash_hex(p));
        pop(&l, saved);
    }
    const json_t *surfaces = json_object_get(bundle, "surfaces");
    for (uint32_t i = 0; i < p->tables.n_surfaces && l.err == TG_OK; i++) {
        l.s = &p->tables.surfaces[i];
        size_t s1 = push_key(&l, "surfaces");
        push_key(&l, l.s->name.ptr);
        lint_surface(&l, json_object_get(surfaces, l.s->name.ptr));
        pop(&l, s1);
    }
    return l.err;
}

tg_err_t tg_lint_report_json(tg_buf_t *o, const tg_lint_report_t *r) {
    tg_err_t rc = tg_buf_puts(o, "{\"findings\":[");
    for (size_t i = 0; i < r->n && rc == TG_OK; i++) {
        const tg_lint_finding_t *f = &r->findings[i];
        rc = tg_buf_printf(o, "%s{\"severity\":\"%s\",\"code\":\"%s\",\"path\":", i ? "," : "",
                           tg_lint_severity_name(f->severity), tg_lint_code_name(f->code));
        if (rc == TG_OK) {
            rc = tg_canon_string(o, f->path, strlen(f->path));
        }
        if (rc == TG_OK) {
            rc = tg_buf_puts(o, ",\"message\":");
        }
        if (rc == TG_OK) {
            rc = tg_canon_string(o, f->message, strlen(f->message));
        }
        if (rc == TG_OK) {
            rc = tg_buf_putc(o, '}');
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "],\"errors\":%zu,\"warnings\":%zu,\"dropped\":%zu}", r->errors,
                           r->warnings, r->dropped);
    }
    return rc;
}

/* ---- loading with the lint ------------------------------------------------------------- */

/* The two loaders below: opts carries the bundle's directory (file data sets) or is NULL. */
static tg_err_t load_checked(tg_policy_t **out, const char *text, size_t len,
                             const tg_policy_opts_t *opts, bool strict, const tg_policy_t *previous,
                             tg_lint_report_t *report, tg_diag_t *diag) {
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_policy_load_text_checked: NULL out");
    }
    *out = NULL;
    json_t *bundle = NULL;
    tg_err_t rc = tg_policy_parse_(&bundle, text, len, diag);
    tg_policy_t *p = NULL;
    if (rc == TG_OK) {
        rc = tg_policy_compile_opts(&p, bundle, opts, diag);
    }
    tg_lint_report_t *r = report;
    if (rc == TG_OK && r == NULL && strict) {
        r = malloc(sizeof *r);
        rc = r == NULL ? TG_ERR_NOMEM : TG_OK;
    }
    if (rc == TG_OK && r != NULL) {
        rc = tg_policy_lint(r, p, bundle, previous);
        if (rc != TG_OK) {
            (void)tg_diag_set(diag, rc, "linting the policy: %s", tg_strerror(rc));
        }
    }
    if (rc == TG_OK && strict && r->errors > 0) {
        const tg_lint_finding_t *f = NULL;
        for (size_t i = 0; i < r->n && f == NULL; i++) {
            f = r->findings[i].severity == TG_LINT_ERROR ? &r->findings[i] : NULL;
        }
        char more[48] = "";
        if (r->errors > 1) {
            (void)snprintf(more, sizeof more, " (and %zu more)", r->errors - 1);
        }
        rc = f == NULL ? tg_diag_set(diag, TG_ERR_POLICY_LINT, "%zu lint errors", r->errors)
                       : tg_diag_set(diag, TG_ERR_POLICY_LINT, "%s: %s: %s%s", f->path,
                                     tg_lint_code_name(f->code), f->message, more);
    }
    if (r != report) {
        free(r);
    }
    json_decref(bundle);
    if (rc != TG_OK) {
        tg_policy_destroy(p);
        return rc;
    }
    *out = p;
    return TG_OK;
}

tg_err_t tg_policy_load_text_checked(tg_policy_t **out, const char *text, size_t len, bool strict,
                                     const tg_policy_t *previous, tg_lint_report_t *report,
                                     tg_diag_t *diag) {
    return load_checked(out, text, len, NULL, strict, previous, report, diag);
}

tg_err_t tg_policy_load_file_checked(tg_policy_t **out, const char *path, bool strict,
                                     const tg_policy_t *previous, tg_lint_report_t *report,
                                     tg_diag_t *diag) {
    if (out == NULL || path == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_policy_load_file_checked: NULL argument");
    }
    *out = NULL;
    char label[320];
    (void)snprintf(label, sizeof label, "policy %s", path);
    tg_file_t f;
    tg_err_t rc = tg_read_file(&f, path, TG_POLICY_MAX_FILE, label, 0, diag);
    if (rc == TG_OK) {
        char dir[TG_POLICY_DIR_MAX];
        rc = tg_policy_dir_of_(dir, path, diag);
        tg_policy_opts_t opts = {dir, NULL};
        if (rc == TG_OK) {
            rc = load_checked(out, f.data, f.len, &opts, strict, previous, report, diag);
        }
        tg_file_free(&f);
    }
    return rc;
}
