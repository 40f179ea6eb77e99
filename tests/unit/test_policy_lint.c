/* test_policy_lint.c — tg_policy_lint: one bad bundle per finding, each with its exact code
 * and JSON path; clean bundles (the bundled policy among them) with none; optional_context
 * and the rule member `unconditional` in the compiler; strict loading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

/* ---- helpers ------------------------------------------------------------------------ */

static const char *src_root(void) {
    const char *s = getenv("TG_SRC");
    return s != NULL && s[0] != '\0' ? s : "../..";
}

/* Test bundles are written with ' for " to stay readable. */
static char *unquote(const char *q) {
    size_t n = strlen(q);
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i <= n; i++) {
        t[i] = q[i] == '\'' ? '"' : q[i];
    }
    return t;
}

static json_t *parse_q(const char *q) {
    char *t = unquote(q);
    json_t *v = NULL;
    tg_diag_t diag = {{0}};
    if (tg_json_parse(&v, t, strlen(t), NULL, &diag) != TG_OK) {
        fail_msg("test JSON does not parse: %s: %s", diag.msg, t);
    }
    free(t);
    return v;
}

static tg_policy_t *compile_q(const char *q) {
    json_t *b = parse_q(q);
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_policy_compile(&p, b, &diag);
    json_decref(b);
    if (rc != TG_OK) {
        fail_msg("test bundle does not compile: %s: %s", tg_err_name(rc), diag.msg);
    }
    return p;
}

static tg_lint_report_t *new_report(void) {
    tg_lint_report_t *r = malloc(sizeof *r);
    assert_non_null(r);
    return r;
}

/* Lints the tree `tree_q` against the policy compiled from `bundle_q` (the same text unless
 * a test walks shapes the compiler does not take yet: the lint reads conditions from the
 * tree and declarations from the policy). */
static tg_lint_report_t *lint_tree(const char *bundle_q, const char *tree_q, const char *prev_q) {
    tg_policy_t *p = compile_q(bundle_q);
    tg_policy_t *prev = prev_q != NULL ? compile_q(prev_q) : NULL;
    json_t *tree = parse_q(tree_q);
    tg_lint_report_t *r = new_report();
    assert_int_equal(tg_policy_lint(r, p, tree, prev), TG_OK);
    json_decref(tree);
    tg_policy_destroy(p);
    tg_policy_destroy(prev);
    return r;
}

static tg_lint_report_t *lint_q(const char *q) { return lint_tree(q, q, NULL); }

static void dump(const tg_lint_report_t *r) {
    for (size_t i = 0; i < r->n; i++) {
        print_message("  finding: %s %s %s: %s\n", tg_lint_severity_name(r->findings[i].severity),
                      tg_lint_code_name(r->findings[i].code), r->findings[i].path,
                      r->findings[i].message);
    }
}

/* Exactly one finding, with this code and path. */
static void expect_one(tg_lint_report_t *r, tg_lint_code_t code, const char *path) {
    if (r->n != 1 || r->findings[0].code != code || strcmp(r->findings[0].path, path) != 0) {
        dump(r);
        fail_msg("expected exactly %s at %s, got %zu findings", tg_lint_code_name(code), path,
                 r->n);
    }
    free(r);
}

static void expect_none(tg_lint_report_t *r) {
    if (r->n != 0 || r->errors != 0 || r->warnings != 0) {
        dump(r);
        fail_msg("expected no finding, got %zu", r->n);
    }
    free(r);
}

/* A tier-1 payments surface whose rules are `rules` (a JSON array text). */
#define PAY(rules)                                                                                 \
    "{'version':'1','surfaces':{'payments.charge':{'tier':1,"                                      \
    "'required_context':{'amount':'number','currency':'string'},"                                  \
    "'optional_context':{'memo':'string','approved':'boolean'},"                                   \
    "'rules':" rules "}}}"

#define P "surfaces.payments.charge.rules"

/* ---- undeclared fields ---------------------------------------------------------------- */

/* The report of issue 21: `context.amout` compiled, the cap never held, and a $40,000
 * transfer was permitted. The kernel still permits it (the lint is what catches it) and a
 * strict load refuses the bundle. */
static void test_typo_would_permit_40000(void **state) {
    (void)state;
    const char *q = PAY("[{'id':'cap','effect':'deny','reason':'AMOUNT_LIMIT_EXCEEDED',"
                        "'when':[{'field':'context.amout','op':'gt','value':10000}]},"
                        "{'id':'billing','effect':'permit',"
                        "'when':[{'field':'actor','op':'eq','value':'agent.billing'}]}]");
    tg_policy_t *p = compile_q(q);
    json_t *req = parse_q("{'surface':'payments.charge','action':'transfer','actor':"
                          "'agent.billing','context':{'amount':4000000,'currency':'USD'}}");
    tg_frame_t f;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &diag), TG_OK);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT); /* what the lint is for */
    json_decref(req);
    tg_policy_destroy(p);

    expect_one(lint_q(q), TG_LINT_UNDECLARED_FIELD, P "[0].when[0].field");

    char *text = unquote(q);
    tg_policy_t *out = (tg_policy_t *)(uintptr_t)1;
    tg_err_t rc = tg_policy_load_text_checked(&out, text, strlen(text), true, NULL, NULL, &diag);
    assert_int_equal(rc, TG_ERR_POLICY_LINT);
    assert_null(out);
    assert_non_null(strstr(diag.msg, P "[0].when[0].field: undeclared_field: context.amout"));
    /* not strict: loaded, the finding reported */
    tg_lint_report_t *r = new_report();
    rc = tg_policy_load_text_checked(&out, text, strlen(text), false, NULL, r, &diag);
    assert_int_equal(rc, TG_OK);
    assert_non_null(out);
    tg_policy_destroy(out);
    free(text);
    expect_one(r, TG_LINT_UNDECLARED_FIELD, P "[0].when[0].field");
}

static void test_declared_fields_are_clean(void **state) {
    (void)state;
    expect_none(lint_q(PAY("[{'id':'cap','effect':'deny','when':[{'field':'context.amount','op':"
                           "'gt','value':10000},{'field':'context.memo','op':'exists'}]},"
                           "{'id':'ok','effect':'permit','when':[{'field':'context.approved',"
                           "'op':'eq','value':true},{'field':'actor','op':'eq','value':'a'}]}]")));
}

/* Groups and value_from are walked whatever their nesting (the compiler learns them in
 * another change: the tree is linted against a policy compiled without them). */
static void test_nested_references(void **state) {
    (void)state;
    const char *base = PAY("[{'id':'r','effect':'deny','when':[{'field':'actor','op':'eq',"
                           "'value':'x'}]}]");
    expect_one(lint_tree(base,
                         PAY("[{'id':'r','effect':'deny','when':[{'any_of':[{'field':"
                             "'context.amount','op':'gt','value':1},{'all_of':[{'not':{'field':"
                             "'context.curency','op':'eq','value':'USD'}}]}]}]}]"),
                         NULL),
               TG_LINT_UNDECLARED_FIELD, P "[0].when[0].any_of[1].all_of[0].not.field");
    expect_one(lint_tree(base,
                         PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                             "'gt','value_from':'context.limt'}]}]"),
                         NULL),
               TG_LINT_UNDECLARED_FIELD, P "[0].when[0].value_from");
    /* shapes and operators it does not know: no finding */
    expect_none(lint_tree(base,
                          PAY("[{'id':'r','effect':'deny','when':[{'weird':1},{'field':"
                              "'context.currency','op':'glob','value':'U*'},{'field':"
                              "'context.currency','op':'eq','value':'EUR'}]}]"),
                          NULL));
}

/* The same through the compiler, now that it takes groups and value_from. */
static void test_nested_compiled(void **state) {
    (void)state;
    expect_one(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'any_of':[{'field':"
                          "'context.amount','op':'gt','value':1},{'not':{'field':"
                          "'context.curency','op':'eq','value':'USD'}}]}]}]")),
               TG_LINT_UNDECLARED_FIELD, P "[0].when[0].any_of[1].not.field");
    expect_one(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                          "'gt','value_from':'context.limt'}]}]")),
               TG_LINT_UNDECLARED_FIELD, P "[0].when[0].value_from");
    expect_one(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                          "'gt','value':10},{'all_of':[{'field':'context.amount','op':'lt',"
                          "'value':5}]}]}]")),
               TG_LINT_NEVER_MATCHES, P "[0]");
    /* groups compare as sets: members in another order are the same condition */
    expect_one(lint_q(PAY("[{'id':'a','effect':'deny','when':[{'any_of':[{'field':"
                          "'context.currency','op':'eq','value':'USD'},{'field':'context.amount',"
                          "'op':'gt','value':5}]}]},"
                          "{'id':'b','effect':'deny','when':[{'any_of':[{'field':"
                          "'context.amount','op':'gt','value':5},{'field':'context.currency',"
                          "'op':'eq','value':'USD'}]}]}]")),
               TG_LINT_DUPLICATE_RULE, P "[1]");
}

/* ---- rules that never match ---------------------------------------------------------- */

static void expect_never(const char *when) {
    char q[2048];
    (void)snprintf(q, sizeof q, PAY("[{'id':'r','effect':'deny','when':%s}]"), when);
    expect_one(lint_q(q), TG_LINT_NEVER_MATCHES, P "[0]");
}

static void expect_can_match(const char *when) {
    char q[2048];
    (void)snprintf(q, sizeof q, PAY("[{'id':'r','effect':'deny','when':%s}]"), when);
    expect_none(lint_q(q));
}

static void test_never_matches(void **state) {
    (void)state;
    expect_never("[{'field':'context.amount','op':'gt','value':100},"
                 "{'field':'context.amount','op':'lt','value':50}]");
    expect_never("[{'field':'context.amount','op':'gt','value':100},"
                 "{'field':'context.amount','op':'lte','value':100}]");
    expect_never("[{'field':'context.currency','op':'eq','value':'USD'},"
                 "{'field':'context.currency','op':'eq','value':'EUR'}]");
    expect_never("[{'field':'context.currency','op':'eq','value':'USD'},"
                 "{'field':'context.currency','op':'ne','value':'USD'}]");
    expect_never("[{'field':'context.currency','op':'eq','value':'USD'},"
                 "{'field':'context.currency','op':'not_in','value':['EUR','USD']}]");
    expect_never("[{'field':'context.currency','op':'in','value':['EUR','GBP']},"
                 "{'field':'context.currency','op':'eq','value':'USD'}]");
    expect_never("[{'field':'context.currency','op':'in','value':['EUR','GBP']},"
                 "{'field':'context.currency','op':'not_in','value':['GBP','EUR']}]");
    expect_never("[{'field':'context.amount','op':'in','value':[1,2,3]},"
                 "{'field':'context.amount','op':'gt','value':3}]");
    expect_never("[{'field':'context.memo','op':'exists','value':false},"
                 "{'field':'context.memo','op':'ne','value':'x'}]");
    expect_never("[{'field':'action','op':'eq','value':'a'},{'field':'actor','op':'eq',"
                 "'value':'b'},{'field':'action','op':'eq','value':'c'}]");
    /* an all_of within the rule's list is part of the conjunction */
    char q[2048];
    (void)snprintf(q, sizeof q,
                   PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':'gt',"
                       "'value':10},{'all_of':[{'field':'context.amount','op':'lt','value':5}]}]"
                       "}]"));
    const char *base = PAY("[{'id':'r','effect':'deny','when':[{'field':'actor','op':'eq',"
                           "'value':'x'}]}]");
    expect_one(lint_tree(base, q, NULL), TG_LINT_NEVER_MATCHES, P "[0]");

    expect_can_match("[{'field':'context.amount','op':'gt','value':0},"
                     "{'field':'context.amount','op':'lte','value':5000}]");
    expect_can_match("[{'field':'context.amount','op':'gte','value':5},"
                     "{'field':'context.amount','op':'lte','value':5}]");
    expect_can_match("[{'field':'context.currency','op':'in','value':['EUR','USD']},"
                     "{'field':'context.currency','op':'ne','value':'EUR'}]");
    expect_can_match("[{'field':'context.memo','op':'exists','value':false},"
                     "{'field':'context.amount','op':'gt','value':1}]");
    /* any_of branches are alternatives, not a conjunction */
    (void)snprintf(q, sizeof q,
                   PAY("[{'id':'r','effect':'deny','when':[{'any_of':[{'field':'context.amount',"
                       "'op':'gt','value':10},{'field':'context.amount','op':'lt','value':5}]}]}"
                       "]"));
    expect_none(lint_tree(base, q, NULL));
}

/* ---- shadowed, duplicate, overridden ---------------------------------------------------- */

static void test_shadowed_rule(void **state) {
    (void)state;
    expect_one(lint_q(PAY("[{'id':'big','effect':'deny','reason':'TOO_BIG','when':[{'field':"
                          "'context.amount','op':'gt','value':1000}]},"
                          "{'id':'big-usd','effect':'deny','reason':'TOO_BIG_USD','when':["
                          "{'field':'context.currency','op':'eq','value':'USD'},"
                          "{'field':'context.amount','op':'gt','value':1000,'description':'x'}]}"
                          "]")),
               TG_LINT_SHADOWED_RULE, P "[1]");
    /* the other way round: the narrower rule first names the decision it makes */
    expect_none(lint_q(PAY("[{'id':'big-usd','effect':'deny','when':[{'field':"
                           "'context.currency','op':'eq','value':'USD'},{'field':"
                           "'context.amount','op':'gt','value':1000}]},"
                           "{'id':'big','effect':'deny','when':[{'field':'context.amount','op':"
                           "'gt','value':1000}]}]")));
}

static void test_duplicate_rule(void **state) {
    (void)state;
    /* order, descriptions and in-list order do not make rules different */
    expect_one(lint_q(PAY("[{'id':'a','effect':'permit','when':[{'field':'actor','op':'eq',"
                          "'value':'agent.billing'},{'field':'context.currency','op':'in',"
                          "'value':['USD','EUR']}]},"
                          "{'id':'b','effect':'permit','description':'again','when':["
                          "{'field':'context.currency','op':'in','value':['EUR','USD','EUR']},"
                          "{'field':'actor','op':'eq','value':'agent.billing'}]}]")),
               TG_LINT_DUPLICATE_RULE, P "[1]");
}

static void test_permit_overridden_by_deny(void **state) {
    (void)state;
    expect_one(lint_q(PAY("[{'id':'permit-usd','effect':'permit','when':[{'field':'actor','op':"
                          "'eq','value':'agent.billing'},{'field':'context.currency','op':'eq',"
                          "'value':'USD'}]},"
                          "{'id':'no-usd','effect':'deny','when':[{'field':'context.currency',"
                          "'op':'eq','value':'USD'}]}]")),
               TG_LINT_PERMIT_OVERRIDDEN_BY_DENY, P "[0]");
}

/* ---- unconditional tier-1 permits ---------------------------------------------------------- */

static void test_unconditional_tier1_permit(void **state) {
    (void)state;
    expect_one(lint_q(PAY("[{'id':'all','effect':'permit'}]")), TG_LINT_UNCONDITIONAL_TIER1_PERMIT,
               P "[0]");
    expect_one(lint_q(PAY("[{'id':'all','effect':'permit','when':[]}]")),
               TG_LINT_UNCONDITIONAL_TIER1_PERMIT, P "[0]");
    expect_none(lint_q(PAY("[{'id':'all','effect':'permit','unconditional':true}]")));
    expect_one(lint_q(PAY("[{'id':'all','effect':'permit','unconditional':false}]")),
               TG_LINT_UNCONDITIONAL_TIER1_PERMIT, P "[0]");
    /* tier 2, and a deny: nothing to say */
    expect_none(lint_q("{'version':'1','surfaces':{'s':{'tier':2,'rules':[{'id':'all',"
                       "'effect':'permit'}]}}}"));
    expect_none(lint_q(PAY("[{'id':'none','effect':'deny'}]")));
}

/* ---- version reuse --------------------------------------------------------------------------- */

static void test_version_reused(void **state) {
    (void)state;
    const char *a = "{'version':'2026-12-01.1','surfaces':{'s':{'tier':2}}}";
    const char *b = "{'version':'2026-12-01.1','surfaces':{'s':{'tier':3}}}";
    const char *c = "{'version':'2026-12-01.2','surfaces':{'s':{'tier':3}}}";
    expect_one(lint_tree(b, b, a), TG_LINT_VERSION_REUSED, "version");
    expect_none(lint_tree(a, a, a)); /* the same bundle again */
    expect_none(lint_tree(c, c, a)); /* a new version */
    expect_none(lint_tree(b, b, NULL));
}

/* ---- non-integer amounts ----------------------------------------------------------------------
 */

static void test_non_integer_amount(void **state) {
    (void)state;
    tg_lint_report_t *r = lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':"
                                     "'context.amount','op':'gt','value':100.5}]}]"));
    assert_int_equal(r->findings[0].severity, TG_LINT_WARNING);
    assert_int_equal(r->errors, 0);
    assert_int_equal(r->warnings, 1);
    assert_non_null(strstr(r->findings[0].message, "integer minor units"));
    expect_one(r, TG_LINT_NON_INTEGER_AMOUNT, P "[0].when[0].value");
    expect_one(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                          "'in','value':[1,2.25,3]}]}]")),
               TG_LINT_NON_INTEGER_AMOUNT, P "[0].when[0].value[1]");
    expect_none(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                           "'gte','value':100.0}]}]")));
    /* signals are scores, not money */
    expect_none(lint_q(PAY("[{'id':'r','effect':'deny','when':[{'field':'signals.riskScore',"
                           "'op':'gt','value':0.5}]}]")));
    /* a warning alone does not refuse a strict load */
    char *text = unquote(PAY("[{'id':'r','effect':'deny','when':[{'field':'context.amount','op':"
                             "'gt','value':0.5}]}]"));
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_policy_load_text_checked(&p, text, strlen(text), true, NULL, NULL, &diag),
                     TG_OK);
    tg_policy_destroy(p);
    free(text);
}

/* ---- clean bundles -----------------------------------------------------------------------------
 */

static void test_bundled_policy_is_clean(void **state) {
    (void)state;
    char path[512];
    (void)snprintf(path, sizeof path, "%s/examples/policy.json", src_root());
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    tg_lint_report_t *r = new_report();
    tg_err_t rc = tg_policy_load_file_checked(&p, path, true, NULL, r, &diag);
    if (rc != TG_OK) {
        fail_msg("%s: %s", tg_err_name(rc), diag.msg);
    }
    /* linted against itself: the same version with the same content is no reuse */
    tg_policy_t *again = NULL;
    assert_int_equal(tg_policy_load_file_checked(&again, path, true, p, NULL, &diag), TG_OK);
    tg_policy_destroy(again);
    tg_policy_destroy(p);
    expect_none(r);
}

static void test_report_json(void **state) {
    (void)state;
    tg_lint_report_t *r = lint_q(PAY("[{'id':'all','effect':'permit'},{'id':'w','effect':"
                                     "'deny','when':[{'field':'context.amount','op':'lt','value':"
                                     "0.5}]}]"));
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_lint_report_json(&b, r), TG_OK);
    assert_int_equal(tg_buf_putc(&b, '\0'), TG_OK);
    json_t *v = json_loads(b.data, 0, NULL);
    assert_non_null(v);
    assert_int_equal(json_integer_value(json_object_get(v, "errors")), 1);
    assert_int_equal(json_integer_value(json_object_get(v, "warnings")), 1);
    json_t *f0 = json_array_get(json_object_get(v, "findings"), 0);
    assert_string_equal(json_string_value(json_object_get(f0, "code")),
                        "unconditional_tier1_permit");
    assert_string_equal(json_string_value(json_object_get(f0, "severity")), "error");
    assert_string_equal(json_string_value(json_object_get(f0, "path")), P "[0]");
    json_decref(v);
    tg_buf_free(&b);
    free(r);
    assert_string_equal(tg_lint_code_name(TG_LINT__COUNT), "?");
    assert_int_equal(tg_policy_lint(NULL, NULL, NULL, NULL), TG_ERR_INVALID_ARG);
}

/* ---- the compiler: optional_context, unconditional, groups and signals ---------------------- */

static void expect_compile_error(const char *q, const char *msg) {
    json_t *b = parse_q(q);
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_policy_compile(&p, b, &diag);
    json_decref(b);
    if (rc != TG_ERR_POLICY_INVALID || strcmp(diag.msg, msg) != 0) {
        fail_msg("expected \"%s\", got %s \"%s\"", msg, tg_err_name(rc), diag.msg);
    }
    assert_null(p);
}

static void test_optional_context_compiles_typed(void **state) {
    (void)state;
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'required_context':{'a':"
                         "'number'},'optional_context':{'a':'number'}}}}",
                         "surfaces.s.optional_context.a: field \"a\" is declared in "
                         "required_context too");
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'optional_context':{'a':"
                         "'number'},'rules':[{'effect':'deny','when':[{'field':'context.a','op':"
                         "'eq','value':'x'}]}]}}}",
                         "surfaces.s.rules[0].when[0].value: a string operand never matches a "
                         "field of type number");
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'optional_context':{'a':"
                         "'boolean'},'rules':[{'effect':'deny','when':[{'field':'context.a','op':"
                         "'gt','value':1}]}]}}}",
                         "surfaces.s.rules[0].when[0].op: gt compares numbers but context.a is "
                         "of type boolean");
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'optional_context':{'a':"
                         "'date'}}}}",
                         "surfaces.s.optional_context.a: type must be one of string, number, "
                         "boolean, object, array, any");
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'rules':[{'effect':'permit',"
                         "'unconditional':'yes'}]}}}",
                         "surfaces.s.rules[0].unconditional: must be true or false, not a "
                         "string");
    /* unknown actor groups and undeclared signals are compile errors, not lint findings */
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'rules':[{'effect':'deny',"
                         "'when':[{'field':'actor','op':'in','value':['@nobody']}]}]}}}",
                         "surfaces.s.rules[0].when[0].value[0]: unknown actor group \"@nobody\"");
    expect_compile_error("{'version':'1','surfaces':{'s':{'tier':2,'rules':[{'effect':'deny',"
                         "'when':[{'field':'signals.nope','op':'eq','value':true}]}]}}}",
                         "surfaces.s.rules[0].when[0].field: signal \"nope\" is not declared in "
                         "signals");
    /* optional means absent is fine: no SILENCE, the condition just does not hold */
    tg_policy_t *p = compile_q("{'version':'1','surfaces':{'s':{'tier':2,'optional_context':{"
                               "'a':'number'},'default':'permit','rules':[{'effect':'deny',"
                               "'reason':'BIG','when':[{'field':'context.a','op':'gt','value':5}]"
                               "}]}}}");
    const tg_surface_t *s = &tg_policy_tables(p)->surfaces[0];
    assert_int_equal(s->n_optional, 1);
    assert_int_equal(s->n_required, 0);
    json_t *req = parse_q("{'surface':'s','action':'x','actor':'y','context':{}}");
    tg_frame_t f;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &diag), TG_OK);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT);
    json_decref(req);
    /* the member is part of the bundle and of its hash */
    tg_policy_t *q = compile_q("{'version':'1','surfaces':{'s':{'tier':2,'optional_context':{"
                               "'a':'number'},'default':'permit','rules':[{'effect':'deny',"
                               "'reason':'BIG','unconditional':false,'when':[{'field':"
                               "'context.a','op':'gt','value':5}]}]}}}");
    assert_string_not_equal(tg_policy_hash_hex(p), tg_policy_hash_hex(q));
    tg_policy_destroy(q);
    tg_policy_destroy(p);
}

int main(void) {
    if (sodium_init() < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typo_would_permit_40000),
        cmocka_unit_test(test_declared_fields_are_clean),
        cmocka_unit_test(test_nested_references),
        cmocka_unit_test(test_nested_compiled),
        cmocka_unit_test(test_never_matches),
        cmocka_unit_test(test_shadowed_rule),
        cmocka_unit_test(test_duplicate_rule),
        cmocka_unit_test(test_permit_overridden_by_deny),
        cmocka_unit_test(test_unconditional_tier1_permit),
        cmocka_unit_test(test_version_reused),
        cmocka_unit_test(test_non_integer_amount),
        cmocka_unit_test(test_bundled_policy_is_clean),
        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_optional_context_compiles_typed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
