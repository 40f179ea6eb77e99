/* cmd_policy_test.c — `trigguard policy test`: decide test cases against a bundle, report
 * failures with the full explain, and rule and condition coverage (issue 21). */
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/guard.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"

#define PT_MAX_FILE ((size_t)8 * 1024 * 1024) /* bytes of one tests file */
#define PT_MAX_CASES 10000                    /* cases over all files */
#define PT_MAX_FILES 64                       /* tests files on the command line */
#define PT_MAX_LINE ((size_t)256 * 1024)      /* bytes of one JSONL case */
#define PT_MAX_CLAIMS 64                      /* principal.claims of one case */
#define PT_MAX_CONDS 256                      /* conditions tracked per rule (pre-order) */
#define PT_DEFAULT_TENANT "local"             /* as `trigguard check` */

static void test_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard policy test [--policy FILE] [--coverage] [--json] TESTS...\n"
            "\n"
            "Decides every case of the TESTS files (a JSON array of cases, or JSONL: one case\n"
            "per line; blank lines and lines starting with // are skipped) against the bundle\n"
            "FILE with the kernel, as the daemon would, and compares with its expectation.\n"
            "Without --policy the bundle is the one beside the first tests file: X.tests.json\n"
            "or X.tests.jsonl tests X.json. A case:\n"
            "  {\"name\", \"request\" (SPEC section 3.1), \"tenant\"? (default \"local\"),\n"
            "   \"principal\"?: {\"subject\", \"issuer\"?, \"claims\"?: {NAME: scalar}},\n"
            "   \"at\"?: RFC 3339 time (without it time.* values are absent),\n"
            "   \"limits_state\"?: {LIMIT_ID: running total} (limits not named start at 0),\n"
            "   \"expect\": {\"decision\": PERMIT|DENY|SILENCE|ESCALATE, \"reason_code\"?, "
            "\"rule\"?}}\n"
            "Unknown members are errors. Each failure is printed with the full explain; the\n"
            "last line is \"N passed, N failed\". --coverage adds rule coverage (rules that\n"
            "decided at least one case, per surface, the others listed) and condition coverage\n"
            "(conditions seen both holding and not holding). --json prints one JSON document.\n"
            "exit status: 0 all passed, 1 a case failed, 2 usage, unreadable or invalid tests\n"
            "file or policy\n");
}

/* Coverage of one rule: whether it decided a case, and per condition (pre-order index in
 * the rule) whether it was seen holding and not holding. */
typedef struct rule_cov {
    uint32_t decided;
    uint32_t n_conds; /* conditions explain reported (groups' members included) */
    uint8_t held[PT_MAX_CONDS / 8];
    uint8_t failed[PT_MAX_CONDS / 8];
} rule_cov_t;

typedef struct run {
    const tg_policy_t *p;
    const tg_kernel_tables_t *t;
    bool json, coverage;
    uint32_t passed, failed, cases;
    rule_cov_t *cov;    /* one per rule of the policy, surfaces in id order */
    uint32_t *cov_base; /* first rule_cov_t of each surface */
    bool json_open;     /* --json: the document and its failures array were begun */
    /* the case being decided (the explain callback's view) */
    uint32_t surface;
    uint32_t cond_seq;
} run_t;

typedef struct case_in {
    const char *file;
    size_t where; /* line (JSONL) or index + 1 (array) */
    bool jsonl;
} case_in_t;

static void case_error(const case_in_t *c, const char *name, const char *fmt, ...) TG_PRINTF(3, 4);

/* An expect.decision a case may name: one of the kernel's verdicts (SPEC §11.2's too). */
static bool decision_known(const char *want) {
    static const char *const names[] = {"PERMIT", "DENY", "SILENCE", "ESCALATE"};
    for (size_t i = 0; want != NULL && i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(want, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* "trigguard policy test: FILE:LINE NAME: why" (or FILE:case N for an array). */
static void case_error(const case_in_t *c, const char *name, const char *fmt, ...) {
    fprintf(stderr, "trigguard policy test: %s:%s%zu%s%s: ", c->file, c->jsonl ? "" : "case ",
            c->where, name != NULL ? " " : "", name != NULL ? name : "");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The explain walk's steps, for coverage: the rule and condition that were reported. */
static void on_step(void *ud, const tg_explain_step_t *st) {
    run_t *r = ud;
    if (st->kind == TG_EXPLAIN_RULE) {
        r->cond_seq = 0;
        return;
    }
    if (st->kind != TG_EXPLAIN_COND || st->rule == NULL) {
        return;
    }
    const tg_surface_t *s = &r->t->surfaces[r->surface];
    uint32_t ri = (uint32_t)(st->rule - s->rules);
    uint32_t k = r->cond_seq++;
    if (ri >= s->n_rules || k >= PT_MAX_CONDS) {
        return;
    }
    rule_cov_t *rc = &r->cov[r->cov_base[r->surface] + ri];
    if (k + 1 > rc->n_conds) {
        rc->n_conds = k + 1;
    }
    uint8_t bit = (uint8_t)(1u << (k % 8));
    if (st->held) {
        rc->held[k / 8] |= bit;
    } else {
        rc->failed[k / 8] |= bit;
    }
}

static bool only_members(const json_t *o, const char *const *names, const case_in_t *c,
                         const char *name, const char *where) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        bool known = false;
        for (size_t i = 0; names[i] != NULL && !known; i++) {
            known = strcmp(key, names[i]) == 0;
        }
        if (!known) {
            char msg[200];
            (void)snprintf(msg, sizeof msg, "unknown member \"%.64s\" in %s", key, where);
            case_error(c, name, "%s", msg);
            return false;
        }
    }
    return true;
}

static const char *opt_string(const json_t *o, const char *member, bool *ok) {
    const json_t *v = json_object_get(o, member);
    if (v == NULL) {
        return NULL;
    }
    if (!json_is_string(v)) {
        *ok = false;
        return NULL;
    }
    return json_string_value(v);
}

/* principal -> pr (claims into claims[], borrowing from the case's tree). */
static bool read_principal(tg_principal_t *pr, tg_claim_t *claims, const json_t *pj,
                           const case_in_t *c, const char *name) {
    static const char *const members[] = {"subject", "issuer", "claims", NULL};
    if (!json_is_object(pj)) {
        case_error(c, name, "%s", "principal must be an object");
        return false;
    }
    if (!only_members(pj, members, c, name, "principal")) {
        return false;
    }
    bool ok = true;
    const char *subject = opt_string(pj, "subject", &ok);
    const char *issuer = opt_string(pj, "issuer", &ok);
    if (!ok || subject == NULL || subject[0] == '\0' || (issuer != NULL && issuer[0] == '\0')) {
        case_error(c, name, "%s",
                   "principal needs a non-empty string subject (and issuer, when given)");
        return false;
    }
    pr->subject = (tg_guard_str_t){subject, strlen(subject)};
    if (issuer != NULL) {
        pr->issuer = (tg_guard_str_t){issuer, strlen(issuer)};
    }
    const json_t *cj = json_object_get(pj, "claims");
    if (cj == NULL) {
        return true;
    }
    if (!json_is_object(cj) || json_object_size(cj) > PT_MAX_CLAIMS) {
        case_error(c, name, "%s", "principal.claims must be an object of at most 64 claims");
        return false;
    }
    const char *key;
    const json_t *v;
    size_t n = 0;
    json_object_foreach((json_t *)cj, key, v) {
        tg_claim_t *cl = &claims[n];
        memset(cl, 0, sizeof *cl);
        cl->name = (tg_guard_str_t){key, strlen(key)};
        if (json_is_string(v)) {
            cl->value.type = TG_VT_STRING;
            cl->value.str = json_string_value(v);
            cl->value.len = (uint32_t)json_string_length(v);
        } else if (json_is_boolean(v)) {
            cl->value.type = TG_VT_BOOL;
            cl->value.boolean = json_is_true(v) ? 1 : 0;
        } else if (json_is_number(v)) {
            cl->value.type = TG_VT_NUMBER;
            cl->value.num = json_number_value(v);
        } else {
            case_error(c, name, "principal.claims.%s must be a string, number or boolean", key);
            return false;
        }
        n++;
    }
    pr->claims = n > 0 ? claims : NULL;
    pr->claims_count = n;
    return true;
}

/* limits_state into the frame: every limit of the surface gets a slot (0 unless named), in
 * limit id order as the kernel wants; a name that is no limit of the bundle is an error. */
static bool bind_limits(tg_frame_t *f, const tg_kernel_tables_t *t, const json_t *ls,
                        const case_in_t *c, const char *name) {
    double totals[TG_FRAME_MAX_LIMITS] = {0};
    const tg_surface_t *s = &t->surfaces[f->surface];
    if (ls != NULL) {
        if (!json_is_object(ls)) {
            case_error(c, name, "%s", "limits_state must be an object {LIMIT_ID: total}");
            return false;
        }
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)ls, key, v) {
            uint32_t id = UINT32_MAX;
            for (uint32_t i = 0; i < t->n_limits && id == UINT32_MAX; i++) {
                if (t->limits[i].id.len == strlen(key) &&
                    memcmp(t->limits[i].id.ptr, key, t->limits[i].id.len) == 0) {
                    id = i;
                }
            }
            if (id == UINT32_MAX) {
                case_error(c, name, "limits_state.%s: the bundle has no such limit", key);
                return false;
            }
            if (!json_is_number(v) || json_number_value(v) < 0) {
                case_error(c, name, "limits_state.%s must be a number >= 0", key);
                return false;
            }
            for (uint32_t i = 0; i < s->n_limits && i < TG_FRAME_MAX_LIMITS; i++) {
                if (s->limits[i] == id) {
                    totals[i] = json_number_value(v);
                }
            }
        }
    }
    f->n_limits = 0;
    for (uint32_t i = 0; i < s->n_limits && i < TG_FRAME_MAX_LIMITS; i++) {
        f->limits[i].id = s->limits[i];
        memset(&f->limits[i].v, 0, sizeof f->limits[i].v);
        f->limits[i].v.type = TG_VT_NUMBER;
        f->limits[i].v.num = totals[i];
        f->n_limits++;
    }
    return true;
}

static bool sv_eq(tg_sv_t a, const char *b) {
    return a.ptr != NULL && strlen(b) == a.len && memcmp(a.ptr, b, a.len) == 0;
}

/* "DENY AMOUNT_TOO_LARGE (rule big)" for a failure line. */
static void print_outcome(const char *decision, const char *reason, const char *rule,
                          size_t rule_len) {
    printf("%s", decision);
    if (reason != NULL) {
        printf(" %s", reason);
    }
    if (rule != NULL) {
        printf(" (rule %.*s)", (int)rule_len, rule);
    }
}

static tg_err_t json_str_member(tg_buf_t *b, const char *name, const char *s, size_t n) {
    tg_err_t rc = tg_buf_printf(b, ",\"%s\":", name);
    return rc ? rc : tg_canon_string(b, s, n);
}

/* --json: the document is written as it goes ({"failures":[ first, each failure as it is
 * found, the counts and coverage at the end), so that no failure count is too large. */
static void json_begin(run_t *r) {
    if (!r->json_open) {
        fputs("{\"failures\":[", stdout);
        r->json_open = true;
    }
}

/* One failure as a --json object, written to stdout. */
static tg_err_t failure_json(run_t *r, const case_in_t *c, const char *name, const json_t *ex,
                             const tg_decision_t *d, const tg_buf_t *explain) {
    tg_buf_t out;
    tg_buf_t *b = &out;
    tg_buf_init(b, 0);
    tg_err_t rc = tg_buf_puts(b, r->failed > 1 ? ",{\"file\":" : "{\"file\":");
    if (!rc) {
        rc = tg_canon_string(b, c->file, strlen(c->file));
    }
    if (!rc) {
        rc = tg_buf_printf(b, ",\"%s\":%zu", c->jsonl ? "line" : "case", c->where);
    }
    if (!rc) {
        rc = json_str_member(b, "name", name, strlen(name));
    }
    if (!rc) {
        rc = tg_buf_puts(b, ",\"expect\":");
    }
    if (!rc) {
        rc = tg_canon_write(b, ex, NULL);
    }
    if (!rc) {
        rc = tg_buf_printf(b, ",\"got\":{\"decision\":\"%s\"", tg_verdict_name(d->verdict));
    }
    if (!rc) {
        rc = json_str_member(b, "reason_code", d->reason, strlen(d->reason));
    }
    if (!rc && d->rule_id.ptr != NULL) {
        rc = json_str_member(b, "rule", d->rule_id.ptr, d->rule_id.len);
    }
    if (!rc) {
        rc = tg_buf_puts(b, "},\"explain\":");
    }
    if (!rc) {
        rc = tg_buf_append(b, explain->data, explain->len);
    }
    if (!rc) {
        rc = tg_buf_putc(b, '}');
    }
    if (!rc) {
        json_begin(r);
        fwrite(b->data, 1, b->len, stdout);
    }
    tg_buf_free(b);
    return rc;
}

/* A JSON value as compact text on stdout (values of the explain: scalars and short lists). */
static void print_json(const json_t *v) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    printf("%s", v != NULL && tg_canon_write(&b, v, NULL) == TG_OK ? b.data : "?");
    tg_buf_free(&b);
}

static void print_conds(const json_t *conds, int depth) {
    size_t i;
    const json_t *c;
    json_array_foreach(conds, i, c) {
        const json_t *field = json_object_get(c, "field");
        printf("%*s", 6 + 2 * depth, "");
        if (json_is_string(field)) {
            printf("%s ", json_string_value(field));
        }
        printf("%s", json_string_value(json_object_get(c, "op")));
        const json_t *v = json_object_get(c, "value");
        const json_t *count = json_object_get(c, "value_count");
        if (v != NULL) {
            printf(" ");
            print_json(v);
        } else if (count != NULL) {
            printf(" [%lld values]", (long long)json_number_value(count));
        }
        const json_t *present = json_object_get(c, "present");
        const json_t *actual = json_object_get(c, "actual");
        if (json_is_false(present)) {
            printf(": absent");
        } else if (actual != NULL) {
            printf(": ");
            print_json(actual);
        } else if (present != NULL) {
            printf(": (%s)", json_string_value(json_object_get(c, "actual_type")));
        }
        printf(" -> %s\n", json_is_true(json_object_get(c, "held")) ? "holds" : "does not hold");
        const json_t *sub = json_object_get(c, "conditions");
        if (json_is_array(sub)) {
            print_conds(sub, depth + 1);
        }
    }
}

/* The explain object as indented text: a rule a line, its conditions below it. */
static void print_explain(const tg_buf_t *explain) {
    json_t *x = json_loadb(explain->data, explain->len, 0, NULL);
    if (x == NULL) {
        printf("  explain  %s\n", explain->data);
        return;
    }
    const json_t *rules = json_object_get(x, "rules");
    const json_t *limits = json_object_get(x, "limits");
    printf("  explain%s\n", json_array_size(rules) + json_array_size(limits) == 0
                                ? ": decided before the rules (see the reason)"
                                : ":");
    size_t i;
    const json_t *r;
    json_array_foreach(rules, i, r) {
        const json_t *reason = json_object_get(r, "reason");
        printf("    rule %s (%s%s%s): %s%s\n", json_string_value(json_object_get(r, "id")),
               json_string_value(json_object_get(r, "effect")), reason != NULL ? " " : "",
               reason != NULL ? json_string_value(reason) : "",
               json_is_true(json_object_get(r, "matched")) ? "matched" : "not matched",
               json_is_true(json_object_get(r, "evaluated")) ? ""
                                                             : " (not examined by the kernel)");
        print_conds(json_object_get(r, "conditions"), 0);
    }
    json_array_foreach(limits, i, r) {
        printf("    limit %s: total ", json_string_value(json_object_get(r, "id")));
        print_json(json_object_get(r, "total"));
        printf(" + amount ");
        print_json(json_object_get(r, "amount"));
        printf(" <= max ");
        print_json(json_object_get(r, "max"));
        printf(" -> %s%s\n", json_is_true(json_object_get(r, "held")) ? "holds" : "does not hold",
               json_is_true(json_object_get(r, "evaluated")) ? "" : " (not examined)");
    }
    if (json_is_true(json_object_get(x, "truncated"))) {
        printf("    ... (truncated)\n");
    }
    json_decref(x);
}

/* The daemon parses a request under TG_JSON_LIMITS_DEFAULT (SPEC §3.1); a case's request
 * came from a larger document, so it is held to them again (through its canonical text:
 * the same depth, strings and members, and the smallest size it can be sent in), so that a
 * test never passes with a request the daemon would refuse with 400. */
static tg_err_t within_request_limits(const json_t *req, tg_diag_t *diag) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_err_t rc = tg_canon_write(&b, req, diag);
    json_t *again = NULL;
    if (!rc) {
        rc = tg_json_parse(&again, b.data, b.len, NULL, diag);
    }
    json_decref(again);
    tg_buf_free(&b);
    return rc;
}

/* Runs one case. Returns false on a case error (exit 2), after saying why. */
static bool run_case(run_t *r, const json_t *cj, const case_in_t *c) {
    static const char *const members[] = {"name", "request",      "tenant", "principal",
                                          "at",   "limits_state", "expect", NULL};
    static const char *const expect_members[] = {"decision", "reason_code", "rule", NULL};
    if (!json_is_object(cj)) {
        case_error(c, NULL, "%s", "a case must be a JSON object");
        return false;
    }
    const json_t *nj = json_object_get(cj, "name");
    if (!json_is_string(nj) || json_string_length(nj) == 0) {
        case_error(c, NULL, "%s", "a case needs a non-empty string \"name\"");
        return false;
    }
    const char *name = json_string_value(nj);
    if (!only_members(cj, members, c, name, "the case")) {
        return false;
    }
    const json_t *req = json_object_get(cj, "request");
    const json_t *ex = json_object_get(cj, "expect");
    if (!json_is_object(req) || !json_is_object(ex)) {
        case_error(c, name, "%s", "a case needs a \"request\" object and an \"expect\" object");
        return false;
    }
    if (!only_members(ex, expect_members, c, name, "expect")) {
        return false;
    }
    bool ok = true;
    const char *want = opt_string(ex, "decision", &ok);
    const char *want_reason = opt_string(ex, "reason_code", &ok);
    const char *want_rule = opt_string(ex, "rule", &ok);
    if (!ok || !decision_known(want)) {
        case_error(c, name, "%s",
                   "expect.decision must be \"PERMIT\", \"DENY\", \"SILENCE\" or \"ESCALATE\" "
                   "(reason_code and rule: strings)");
        return false;
    }
    const char *tenant = opt_string(cj, "tenant", &ok);
    const char *at = opt_string(cj, "at", &ok);
    if (!ok || (tenant != NULL && tenant[0] == '\0')) {
        case_error(c, name, "%s", "tenant and at must be non-empty strings");
        return false;
    }
    tenant = tenant != NULL ? tenant : PT_DEFAULT_TENANT;

    tg_frame_t frame;
    tg_diag_t diag = {{0}};
    tg_err_t rc = within_request_limits(req, &diag);
    if (rc) {
        case_error(c, name, "request: %s", diag.msg[0] ? diag.msg : tg_strerror(rc));
        return false;
    }
    rc = tg_frame_from_request(&frame, NULL, r->p, req, &diag);
    if (rc) {
        case_error(c, name, "request: %s", diag.msg[0] ? diag.msg : tg_strerror(rc));
        return false;
    }
    tg_principal_t pr;
    tg_claim_t claims[PT_MAX_CLAIMS];
    memset(&pr, 0, sizeof pr);
    const json_t *pj = json_object_get(cj, "principal");
    if (pj != NULL && !read_principal(&pr, claims, pj, c, name)) {
        return false;
    }
    /* The facts the daemon takes from the caller's token: the pipeline's own binding. */
    tg_pipeline_bind_facts(&frame, r->p, tenant, strlen(tenant), pj != NULL ? &pr : NULL);
    if (at != NULL) {
        int64_t ms = 0;
        if (tg_time_parse_rfc3339_ms(&ms, at, strlen(at)) != TG_OK) {
            case_error(c, name, "at \"%s\" is not an RFC 3339 date-time", at);
            return false;
        }
        frame.now_ms = ms;
        frame.has_now = 1;
    }
    if (!bind_limits(&frame, r->t, json_object_get(cj, "limits_state"), c, name)) {
        return false;
    }

    tg_decision_t d;
    r->surface = frame.surface;
    r->cond_seq = 0;
    tg_kernel_explain(&d, r->t, &frame, on_step, r);
    const tg_surface_t *s = &r->t->surfaces[frame.surface];
    if (d.cause == TG_CAUSE_RULE && d.rule_id.ptr != NULL) {
        for (uint32_t i = 0; i < s->n_rules; i++) {
            if (s->rules[i].id.ptr == d.rule_id.ptr) {
                r->cov[r->cov_base[frame.surface] + i].decided++;
            }
        }
    }
    r->cases++;
    bool pass = strcmp(want, tg_verdict_name(d.verdict)) == 0 &&
                (want_reason == NULL || strcmp(want_reason, d.reason) == 0) &&
                (want_rule == NULL || sv_eq(d.rule_id, want_rule));
    if (pass) {
        r->passed++;
        return true;
    }
    r->failed++;
    tg_buf_t explain;
    tg_buf_init(&explain, 0);
    rc = tg_explain_json(&explain, NULL, r->p, &frame);
    if (rc) {
        tg_buf_free(&explain);
        case_error(c, name, "cannot write the explain: %s", tg_strerror(rc));
        return false;
    }
    if (r->json) {
        rc = failure_json(r, c, name, ex, &d, &explain);
    } else {
        printf("FAIL %s:%s%zu %s\n  expected ", c->file, c->jsonl ? "" : "case ", c->where, name);
        print_outcome(want, want_reason, want_rule, want_rule != NULL ? strlen(want_rule) : 0);
        printf("\n  got      ");
        print_outcome(tg_verdict_name(d.verdict), d.reason, d.rule_id.ptr, d.rule_id.len);
        char detail[256];
        if (tg_decision_detail(detail, sizeof detail, &d) > 0) {
            printf(": %s", detail);
        }
        printf("\n");
        print_explain(&explain);
    }
    tg_buf_free(&explain);
    if (rc) {
        case_error(c, name, "cannot write the failure: %s", tg_strerror(rc));
        return false;
    }
    return true;
}

/* The cases of one file: a JSON array, or JSONL. */
static bool run_file(run_t *r, const char *path) {
    size_t len = 0;
    char *text = tg_cli_read_file(path, PT_MAX_FILE, &len);
    if (text == NULL) {
        return false;
    }
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
        i++;
    }
    bool ok = true;
    tg_diag_t diag = {{0}};
    if (i < len && text[i] == '[') {
        json_t *all = NULL;
        tg_json_limits_t lim = {PT_MAX_FILE, 32, 65536, 1024};
        tg_err_t rc = tg_json_parse(&all, text, len, &lim, &diag);
        if (rc || !json_is_array(all)) {
            fprintf(stderr, "trigguard policy test: %s: %s\n", path,
                    rc ? (diag.msg[0] ? diag.msg : tg_strerror(rc)) : "not a JSON array");
            ok = false;
        }
        for (size_t k = 0; ok && k < json_array_size(all); k++) {
            case_in_t c = {path, k + 1, false};
            if (r->cases >= PT_MAX_CASES) {
                case_error(&c, NULL, "more than %d cases in all", PT_MAX_CASES);
                ok = false;
                break;
            }
            ok = run_case(r, json_array_get(all, k), &c);
        }
        json_decref(all);
    } else {
        size_t line = 0;
        for (size_t pos = 0; ok && pos < len;) {
            const char *eol = memchr(text + pos, '\n', len - pos);
            size_t end = eol != NULL ? (size_t)(eol - text) : len;
            line++;
            size_t b = pos, e = end;
            pos = end + 1;
            while (b < e && (text[b] == ' ' || text[b] == '\t')) {
                b++;
            }
            while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r')) {
                e--;
            }
            if (b == e || (e - b >= 2 && text[b] == '/' && text[b + 1] == '/')) {
                continue; /* blank, or a comment */
            }
            case_in_t c = {path, line, true};
            if (r->cases >= PT_MAX_CASES) {
                case_error(&c, NULL, "more than %d cases in all", PT_MAX_CASES);
                ok = false;
                break;
            }
            if (e - b > PT_MAX_LINE) {
                case_error(&c, NULL, "%s", "a case longer than 256 KiB");
                ok = false;
                break;
            }
            json_t *cj = NULL;
            tg_json_limits_t lim = {PT_MAX_LINE, 32, 65536, 1024};
            tg_err_t rc = tg_json_parse(&cj, text + b, e - b, &lim, &diag);
            if (rc) {
                case_error(&c, NULL, "%s", diag.msg[0] ? diag.msg : tg_strerror(rc));
                ok = false;
                break;
            }
            ok = run_case(r, cj, &c);
            json_decref(cj);
        }
    }
    free(text);
    return ok;
}

static unsigned pct(uint32_t n, uint32_t of) {
    return of == 0 ? 100u : (unsigned)((uint64_t)n * 100u / of); /* floor: 100 only when all */
}

static unsigned popcount8(uint8_t x) {
    unsigned n = 0;
    for (; x; x &= (uint8_t)(x - 1)) {
        n++;
    }
    return n;
}

/* Prints (or appends as JSON to b) the coverage. Condition totals: each rule counts the
 * conditions explain reported for it (a group's members included) or, for a rule on a
 * surface no case reached the rules of, its when[] entries. */
static tg_err_t coverage(const run_t *r, tg_buf_t *b) {
    const tg_kernel_tables_t *t = r->t;
    uint32_t rules = 0, covered = 0, conds = 0, both = 0;
    for (uint32_t s = 0; s < t->n_surfaces; s++) {
        for (uint32_t i = 0; i < t->surfaces[s].n_rules; i++) {
            const rule_cov_t *c = &r->cov[r->cov_base[s] + i];
            rules++;
            covered += c->decided > 0;
            uint32_t n = c->n_conds > t->surfaces[s].rules[i].n_conds
                             ? c->n_conds
                             : t->surfaces[s].rules[i].n_conds;
            conds += n;
            for (uint32_t k = 0; k < PT_MAX_CONDS / 8; k++) {
                both += popcount8(c->held[k] & c->failed[k]);
            }
        }
    }
    tg_err_t rc = TG_OK;
    if (b != NULL) {
        rc =
            tg_buf_printf(b, ",\"coverage\":{\"rules\":{\"covered\":%u,\"total\":%u,\"surfaces\":[",
                          covered, rules);
    } else {
        printf("rules: %u/%u covered (%u%%)\n", covered, rules, pct(covered, rules));
    }
    bool first = true;
    for (uint32_t s = 0; s < t->n_surfaces && !rc; s++) {
        const tg_surface_t *sf = &t->surfaces[s];
        if (sf->n_rules == 0) {
            continue;
        }
        uint32_t sc = 0;
        for (uint32_t i = 0; i < sf->n_rules; i++) {
            sc += r->cov[r->cov_base[s] + i].decided > 0;
        }
        if (b != NULL) {
            rc = tg_buf_puts(b, first ? "{\"surface\":" : ",{\"surface\":");
            if (!rc) {
                rc = tg_canon_string(b, sf->name.ptr, sf->name.len);
            }
            if (!rc) {
                rc = tg_buf_printf(b, ",\"covered\":%u,\"total\":%u,\"uncovered\":[", sc,
                                   sf->n_rules);
            }
        } else {
            printf("  %.*s: %u/%u", (int)sf->name.len, sf->name.ptr, sc, sf->n_rules);
        }
        first = false;
        bool first_un = true;
        for (uint32_t i = 0; i < sf->n_rules && !rc; i++) {
            if (r->cov[r->cov_base[s] + i].decided > 0) {
                continue;
            }
            const tg_sv_t *id = &sf->rules[i].id;
            if (b != NULL) {
                rc = first_un ? TG_OK : tg_buf_putc(b, ',');
                if (!rc) {
                    rc = tg_canon_string(b, id->ptr, id->len);
                }
            } else {
                printf("%s%.*s", first_un ? ", not covered: " : ", ", (int)id->len, id->ptr);
            }
            first_un = false;
        }
        if (b != NULL && !rc) {
            rc = tg_buf_puts(b, "]}");
        } else if (b == NULL) {
            printf("\n");
        }
    }
    if (b != NULL && !rc) {
        rc = tg_buf_printf(b, "]},\"conditions\":{\"covered\":%u,\"total\":%u}}", both, conds);
    } else if (b == NULL) {
        printf("conditions: %u/%u seen holding and not holding (%u%%)\n", both, conds,
               pct(both, conds));
    }
    return rc;
}

/* X.tests.json / X.tests.jsonl -> X.json (heap), or NULL. */
static char *policy_beside(const char *tests) {
    static const char *const suffixes[] = {".tests.jsonl", ".tests.json"};
    size_t n = strlen(tests);
    for (size_t i = 0; i < 2; i++) {
        size_t sn = strlen(suffixes[i]);
        if (n > sn && strcmp(tests + n - sn, suffixes[i]) == 0) {
            char *out = malloc(n - sn + 6);
            if (out != NULL) {
                memcpy(out, tests, n - sn);
                memcpy(out + n - sn, ".json", 6);
            }
            return out;
        }
    }
    return NULL;
}

int tg_cmd_policy_test(int argc, char **argv) {
    const char *policy = NULL;
    const char *files[PT_MAX_FILES];
    size_t n_files = 0;
    run_t r;
    memset(&r, 0, sizeof r);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            test_usage(stdout);
            return TG_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--policy") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard policy test: --policy needs a value\n");
                return TG_EXIT_USAGE;
            }
            policy = argv[++i];
        } else if (strcmp(arg, "--coverage") == 0) {
            r.coverage = true;
        } else if (strcmp(arg, "--json") == 0) {
            r.json = true;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "trigguard policy test: unknown option '%s'\n\n", arg);
            test_usage(stderr);
            return TG_EXIT_USAGE;
        } else if (n_files >= PT_MAX_FILES) {
            fprintf(stderr, "trigguard policy test: more than %d tests files\n", PT_MAX_FILES);
            return TG_EXIT_USAGE;
        } else {
            files[n_files++] = arg;
        }
    }
    if (n_files == 0) {
        fprintf(stderr, "trigguard policy test: no tests file given\n\n");
        test_usage(stderr);
        return TG_EXIT_USAGE;
    }
    char *derived = NULL;
    if (policy == NULL) {
        derived = policy_beside(files[0]);
        if (derived == NULL) {
            fprintf(stderr,
                    "trigguard policy test: --policy FILE is needed (%s is not named "
                    "X.tests.json or X.tests.jsonl)\n",
                    files[0]);
            return TG_EXIT_USAGE;
        }
        policy = derived;
    }
    int status = TG_EXIT_USAGE;
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_policy_load_file(&p, policy, &diag);
    if (rc) {
        fprintf(stderr, "trigguard policy test: policy %s: %s\n", policy,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    r.p = p;
    r.t = tg_policy_tables(p);
    size_t n_rules = tg_policy_rule_count(p);
    r.cov = calloc(n_rules > 0 ? n_rules : 1, sizeof *r.cov);
    r.cov_base = calloc(r.t->n_surfaces > 0 ? r.t->n_surfaces : 1, sizeof *r.cov_base);
    if (r.cov == NULL || r.cov_base == NULL) {
        fprintf(stderr, "trigguard policy test: out of memory\n");
        goto done;
    }
    for (uint32_t s = 0, base = 0; s < r.t->n_surfaces; s++) {
        r.cov_base[s] = base;
        base += r.t->surfaces[s].n_rules;
    }
    for (size_t i = 0; i < n_files; i++) {
        if (!run_file(&r, files[i])) {
            goto done;
        }
    }
    if (r.cases == 0) {
        fprintf(stderr, "trigguard policy test: no test cases in the given files\n");
        goto done;
    }
    if (r.json) {
        tg_buf_t out;
        tg_buf_init(&out, 0);
        rc = tg_buf_printf(&out, "],\"passed\":%u,\"failed\":%u", r.passed, r.failed);
        if (!rc && r.coverage) {
            rc = coverage(&r, &out);
        }
        if (!rc) {
            rc = tg_buf_putc(&out, '}');
        }
        if (rc) {
            tg_buf_free(&out);
            fprintf(stderr, "trigguard policy test: cannot write the report: %s\n",
                    tg_strerror(rc));
            goto done;
        }
        json_begin(&r);
        printf("%s\n", out.data);
        tg_buf_free(&out);
    } else {
        if (r.coverage) {
            (void)coverage(&r, NULL);
        }
        printf("%u passed, %u failed\n", r.passed, r.failed);
    }
    status = r.failed > 0 ? TG_EXIT_FAIL : TG_EXIT_OK;
done:
    free(r.cov);
    free(r.cov_base);
    tg_policy_destroy(p);
    free(derived);
    return status;
}
