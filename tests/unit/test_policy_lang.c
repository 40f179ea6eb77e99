/* test_policy_lang.c — issue 21's language: condition groups (any_of, all_of, not), string
 * operators (prefix, suffix, glob) and value_from. Decision tables (true / false / absent /
 * wrong type for each), compile errors naming the JSON path for every bound and misuse, the
 * glob matcher against a reference and its step bound, and explain over groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

/* ---- helpers ------------------------------------------------------------------------ */

/* Test JSON is written with ' for ". */
static json_t *parse_q(const char *q) {
    size_t n = strlen(q);
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i <= n; i++) {
        t[i] = q[i] == '\'' ? '"' : q[i];
    }
    json_t *v = NULL;
    tg_diag_t diag = {{0}};
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = TG_POLICY_MAX_FILE;
    lim.max_keys = 4096;
    if (tg_json_parse(&v, t, n, &lim, &diag) != TG_OK) {
        fail_msg("test JSON does not parse: %s: %s", diag.msg, t);
    }
    free(t);
    return v;
}

/* A bundle whose surface "s" (tier 3, the given required_context) has one permit rule with
 * the given when list and a deny default; signals score (number) and flag (boolean). */
static json_t *bundle_with_when(const char *required_q, json_t *when) {
    char text[1024];
    snprintf(text, sizeof text,
             "{'version':'lang-1','signals':{'score':{'type':'number'},'flag':{'type':"
             "'boolean'}},'surfaces':{'s':{'tier':3,'required_context':%s,'rules':[{'id':'r',"
             "'effect':'permit'}]}}}",
             required_q);
    json_t *b = parse_q(text);
    json_t *rule = json_array_get(
        json_object_get(json_object_get(json_object_get(b, "surfaces"), "s"), "rules"), 0);
    json_object_set_new(rule, "when", when);
    return b;
}

static tg_policy_t *compile_q(const char *required_q, const char *when_q, tg_diag_t *diag,
                              tg_err_t *rc) {
    json_t *b = bundle_with_when(required_q, parse_q(when_q));
    tg_policy_t *p = NULL;
    memset(diag, 0, sizeof *diag);
    *rc = tg_policy_compile(&p, b, diag);
    json_decref(b);
    return p;
}

static void expect_error_when(const char *required_q, const char *when_q, const char *msg) {
    tg_diag_t diag;
    tg_err_t rc;
    tg_policy_t *p = compile_q(required_q, when_q, &diag, &rc);
    if (rc != TG_ERR_POLICY_INVALID || strcmp(diag.msg, msg) != 0) {
        fail_msg("when %s: expected \"%s\", got %s \"%s\"", when_q, msg, tg_err_name(rc), diag.msg);
    }
    assert_null(p);
}

static tg_policy_t *compile_ok(const char *required_q, const char *when_q) {
    tg_diag_t diag;
    tg_err_t rc;
    tg_policy_t *p = compile_q(required_q, when_q, &diag, &rc);
    if (rc != TG_OK) {
        fail_msg("when %s: expected a valid bundle, got %s \"%s\"", when_q, tg_err_name(rc),
                 diag.msg);
    }
    return p;
}

/* Decides request_q (surface s) under p: 1 when the rule held (PERMIT), 0 when not. */
static int decide(const tg_policy_t *p, const char *request_q) {
    json_t *req = parse_q(request_q);
    tg_frame_t f;
    tg_diag_t diag = {{0}};
    if (tg_frame_from_request(&f, NULL, p, req, &diag) != TG_OK) {
        fail_msg("request %s: %s", request_q, diag.msg);
    }
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    json_decref(req);
    if (d.verdict == TG_SILENCE) {
        fail_msg("request %s: SILENCE %s", request_q, d.reason);
    }
    return d.verdict == TG_PERMIT;
}

typedef struct {
    const char *when;    /* the rule's when list */
    const char *request; /* the request */
    int holds;
} row_t;

static void run_table(const row_t *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        tg_policy_t *p = compile_ok("{}", rows[i].when);
        int got = decide(p, rows[i].request);
        if (got != rows[i].holds) {
            fail_msg("row %zu: when %s on %s: expected %s", i, rows[i].when, rows[i].request,
                     rows[i].holds ? "held" : "not held");
        }
        tg_policy_destroy(p);
    }
}

#define ROWS(a) (a), sizeof(a) / sizeof((a)[0])

/* ---- decision tables ---------------------------------------------------------------- */

#define B "[{'field':'context.branch','op':"
static void test_string_operators(void **state) {
    (void)state;
    static const row_t rows[] = {
        /* prefix: true, false, absent, wrong type, null, exact, empty operand */
        {B "'prefix','value':'refs/heads/'}]",
         "{'surface':'s','context':{'branch':'refs/heads/main'}}", 1},
        {B "'prefix','value':'refs/heads/'}]",
         "{'surface':'s','context':{'branch':'refs/tags/v1'}}", 0},
        {B "'prefix','value':'refs/heads/'}]", "{'surface':'s','context':{}}", 0},
        {B "'prefix','value':'1'}]", "{'surface':'s','context':{'branch':12}}", 0},
        {B "'prefix','value':'r'}]", "{'surface':'s','context':{'branch':null}}", 0},
        {B "'prefix','value':'refs'}]", "{'surface':'s','context':{'branch':'refs'}}", 1},
        {B "'prefix','value':'refs/x'}]", "{'surface':'s','context':{'branch':'refs'}}", 0},
        {B "'prefix','value':''}]", "{'surface':'s','context':{'branch':''}}", 1},
        {B "'prefix','value':'a'}]", "{'surface':'s','context':{'branch':['a']}}", 0},
        /* suffix */
        {B "'suffix','value':'.prod'}]", "{'surface':'s','context':{'branch':'db.prod'}}", 1},
        {B "'suffix','value':'.prod'}]", "{'surface':'s','context':{'branch':'db.prod.bak'}}", 0},
        {B "'suffix','value':'.prod'}]", "{'surface':'s','context':{}}", 0},
        {B "'suffix','value':'true'}]", "{'surface':'s','context':{'branch':true}}", 0},
        {B "'suffix','value':'prod.'}]", "{'surface':'s','context':{'branch':'.'}}", 0},
        /* glob */
        {B "'glob','value':'release/*'}]", "{'surface':'s','context':{'branch':'release/1.4'}}", 1},
        {B "'glob','value':'release/*'}]", "{'surface':'s','context':{'branch':'release/'}}", 1},
        {B "'glob','value':'release/*'}]", "{'surface':'s','context':{'branch':'hotfix/1'}}", 0},
        {B "'glob','value':'release/*'}]", "{'surface':'s','context':{}}", 0},
        {B "'glob','value':'*'}]", "{'surface':'s','context':{'branch':5}}", 0},
        {B "'glob','value':'v?.*'}]", "{'surface':'s','context':{'branch':'v1.2'}}", 1},
        {B "'glob','value':'v?.*'}]", "{'surface':'s','context':{'branch':'v10.2'}}", 0},
        /* ? is one code point: é is two bytes */
        {B "'glob','value':'caf?'}]", "{'surface':'s','context':{'branch':'caf\\u00e9'}}", 1},
        {B "'glob','value':'caf?"
           "?'}]",
         "{'surface':'s','context':{'branch':'caf\\u00e9'}}", 0},
        {"[{'field':'actor','op':'glob','value':'ci.*-bot'}]",
         "{'surface':'s','actor':'ci.release-bot'}", 1},
        {"[{'field':'actor','op':'glob','value':'ci.*-bot'}]", "{'surface':'s'}", 0},
        {"[{'field':'action','op':'suffix','value':'.delete'}]",
         "{'surface':'s','action':'db.delete'}", 1},
    };
    run_table(ROWS(rows));
}

#define AMT "[{'field':'context.amount','op':"
static void test_value_from(void **state) {
    (void)state;
    static const row_t rows[] = {
        {AMT "'lte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':50,'limit':100}}", 1},
        {AMT "'lte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':100,'limit':100}}", 1},
        {AMT "'lte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':101,'limit':100}}", 0},
        {AMT "'lte','value_from':'context.limit'}]", "{'surface':'s','context':{'amount':1}}", 0},
        {AMT "'lte','value_from':'context.limit'}]", "{'surface':'s','context':{'limit':1}}", 0},
        {AMT "'lte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':'1','limit':100}}", 0},
        {AMT "'lte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':1,'limit':'100'}}", 0},
        {AMT "'gt','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':2,'limit':1}}", 1},
        {AMT "'gte','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':1,'limit':1}}", 1},
        {AMT "'lt','value_from':'context.limit'}]",
         "{'surface':'s','context':{'amount':1,'limit':1}}", 0},
        {AMT "'gt','value_from':'signals.score'}]",
         "{'surface':'s','context':{'amount':0.7},'signals':{'score':0.5}}", 1},
        /* eq / ne: typed, both present; ne with a side absent does not hold */
        {"[{'field':'context.approver','op':'ne','value_from':'actor'}]",
         "{'surface':'s','actor':'a','context':{'approver':'b'}}", 1},
        {"[{'field':'context.approver','op':'ne','value_from':'actor'}]",
         "{'surface':'s','actor':'a','context':{'approver':'a'}}", 0},
        {"[{'field':'context.approver','op':'ne','value_from':'actor'}]",
         "{'surface':'s','context':{'approver':'a'}}", 0},
        {"[{'field':'context.approver','op':'ne','value_from':'actor'}]",
         "{'surface':'s','actor':'a'}", 0},
        {"[{'field':'context.approver','op':'eq','value_from':'actor'}]",
         "{'surface':'s','actor':'a','context':{'approver':'a'}}", 1},
        {"[{'field':'context.a','op':'eq','value_from':'context.b'}]",
         "{'surface':'s','context':{'a':5,'b':'5'}}", 0},
        {"[{'field':'context.a','op':'ne','value_from':'context.b'}]",
         "{'surface':'s','context':{'a':5,'b':'5'}}", 1},
        {"[{'field':'context.a','op':'ne','value_from':'context.b'}]",
         "{'surface':'s','context':{'a':{},'b':{}}}", 0},
        {"[{'field':'context.a','op':'eq','value_from':'context.b'}]",
         "{'surface':'s','context':{'a':null,'b':null}}", 0},
    };
    run_table(ROWS(rows));
}

#define X "{'field':'context.x','op':'eq','value':1}"
#define Y "{'field':'context.y','op':'eq','value':1}"
static void test_groups(void **state) {
    (void)state;
    static const row_t rows[] = {
        {"[{'any_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':1,'y':0}}", 1},
        {"[{'any_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':0,'y':1}}", 1},
        {"[{'any_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':0,'y':0}}", 0},
        {"[{'any_of':[" X "," Y "]}]", "{'surface':'s','context':{}}", 0},
        {"[{'any_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':'1'}}", 0},
        {"[{'all_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':1,'y':1}}", 1},
        {"[{'all_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':1,'y':0}}", 0},
        {"[{'all_of':[" X "," Y "]}]", "{'surface':'s','context':{'x':1}}", 0},
        {"[{'not':" X "}]", "{'surface':'s','context':{'x':1}}", 0},
        {"[{'not':" X "}]", "{'surface':'s','context':{'x':2}}", 1},
        /* documented: not over an absent or wrong-typed field holds */
        {"[{'not':" X "}]", "{'surface':'s','context':{}}", 1},
        {"[{'not':" X "}]", "{'surface':'s','context':{'x':'1'}}", 1},
        {"[{'not':{'not':" X "}}]", "{'surface':'s','context':{'x':1}}", 1},
        /* nested: main, or release/... with an approval */
        {"[{'any_of':[{'field':'context.b','op':'eq','value':'main'},{'all_of':[{'field':'context."
         "b','op':'glob','value':'release/*'},{'field':'context.ok','op':'eq','value':true}]}]}]",
         "{'surface':'s','context':{'b':'release/2','ok':true}}", 1},
        {"[{'any_of':[{'field':'context.b','op':'eq','value':'main'},{'all_of':[{'field':'context."
         "b','op':'glob','value':'release/*'},{'field':'context.ok','op':'eq','value':true}]}]}]",
         "{'surface':'s','context':{'b':'release/2'}}", 0},
        {"[{'any_of':[{'field':'context.b','op':'eq','value':'main'},{'all_of':[{'field':'context."
         "b','op':'glob','value':'release/*'},{'field':'context.ok','op':'eq','value':true}]}]}]",
         "{'surface':'s','context':{'b':'main'}}", 1},
        /* a group beside a leaf: the when list stays an all_of */
        {"[" X ",{'not':" Y "}]", "{'surface':'s','context':{'x':1,'y':2}}", 1},
        {"[" X ",{'not':" Y "}]", "{'surface':'s','context':{'x':1,'y':1}}", 0},
        {"[{'all_of':[{'all_of':[{'all_of':[{'any_of':[" X "]}]}]}]}]",
         "{'surface':'s','context':{'x':1}}", 1},
    };
    run_table(ROWS(rows));
}

/* ---- compile errors: bounds (max accepted, max + 1 refused) and misuse -------------- */

static json_t *leaf(void) { return parse_q(X); }

/* depth groups around one leaf (all_of and not alternating), innermost first. */
static json_t *nested(unsigned depth) {
    json_t *c = leaf();
    for (unsigned i = 0; i < depth; i++) {
        json_t *g = json_object();
        if (i % 2 == 0) {
            json_t *a = json_array();
            json_array_append_new(a, c);
            json_object_set_new(g, "all_of", a);
        } else {
            json_object_set_new(g, "not", c);
        }
        c = g;
    }
    json_t *when = json_array();
    json_array_append_new(when, c);
    return when;
}

static json_t *any_of_n(size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, leaf());
    }
    json_t *g = json_object();
    json_object_set_new(g, "any_of", a);
    return g;
}

static tg_err_t compile_when(json_t *when, tg_diag_t *diag) {
    json_t *b = bundle_with_when("{}", when);
    tg_policy_t *p = NULL;
    memset(diag, 0, sizeof *diag);
    tg_err_t rc = tg_policy_compile(&p, b, diag);
    tg_policy_destroy(p);
    json_decref(b);
    return rc;
}

static void test_bounds(void **state) {
    (void)state;
    tg_diag_t diag;
    assert_int_equal(TG_POLICY_MAX_NESTING, 4);
    assert_int_equal(compile_when(nested(TG_POLICY_MAX_NESTING), &diag), TG_OK);
    assert_int_equal(compile_when(nested(TG_POLICY_MAX_NESTING + 1), &diag), TG_ERR_POLICY_INVALID);
    assert_string_equal(diag.msg, "surfaces.s.rules[0].when[0].all_of[0].not.all_of[0].not.all_of: "
                                  "groups nested more than 4 deep");

    json_t *when = json_array();
    json_array_append_new(when, any_of_n(TG_POLICY_MAX_GROUP));
    assert_int_equal(compile_when(when, &diag), TG_OK);
    when = json_array();
    json_array_append_new(when, any_of_n(TG_POLICY_MAX_GROUP + 1));
    assert_int_equal(compile_when(when, &diag), TG_ERR_POLICY_INVALID);
    assert_string_equal(diag.msg, "surfaces.s.rules[0].when[0].any_of: 17 members (limit 16)");

    /* nodes: 4 groups + 16 + 16 + 16 + 12 members = 64; one more member is 65 */
    when = json_array();
    for (int i = 0; i < 3; i++) {
        json_array_append_new(when, any_of_n(16));
    }
    json_array_append_new(when, any_of_n(12));
    assert_int_equal(compile_when(json_deep_copy(when), &diag), TG_OK);
    json_array_set_new(when, 3, any_of_n(13));
    assert_int_equal(compile_when(when, &diag), TG_ERR_POLICY_INVALID);
    assert_string_equal(diag.msg, "surfaces.s.rules[0].when[3].any_of: more than 64 conditions in "
                                  "the rule (groups and their members)");
}

static void test_misuse(void **state) {
    (void)state;
    const char *P = "surfaces.s.rules[0].when[0]";
    char msg[512];
#define EXPECT(req, when, suffix)                                                                  \
    do {                                                                                           \
        snprintf(msg, sizeof msg, "%s%s", P, suffix);                                              \
        expect_error_when(req, when, msg);                                                         \
    } while (0)
    EXPECT("{}", "[{'any_of':[]}]", ".any_of: an empty any_of is an error (it would hold never)");
    EXPECT("{}", "[{'all_of':[]}]", ".all_of: an empty all_of is an error (it would hold always)");
    EXPECT("{}", "[{'not':[" X "]}]", ".not: not takes one condition (an object), not an array");
    EXPECT("{}", "[{'any_of':" X "}]",
           ".any_of: any_of takes an array of conditions, not an object");
    EXPECT("{}", "[{'any_of':[" X "],'all_of':[" X "]}]",
           ": a group has one of any_of, all_of and not, not both all_of and any_of");
    EXPECT("{}", "[{'any_of':[" X "],'field':'actor'}]",
           ".field: unknown member (expected any_of, all_of or not, and description)");
    EXPECT("{}", "[{'any_of':[{'field':'context.x','op':'gtx','value':1}]}]",
           ".any_of[0].op: unknown operator \"gtx\"");
    EXPECT("{}", "[{'not':{'field':'nope','op':'eq','value':1}}]",
           ".not.field: unknown field \"nope\" (expected context.<name>, signals.<name>, actor, "
           "action, tenant or principal.<subject|issuer|claims.<name>>)");
    /* string operators */
    EXPECT("{'n':'number'}", "[{'field':'context.n','op':'prefix','value':'1'}]",
           ".op: prefix matches strings but context.n is of type number");
    EXPECT("{}", "[{'field':'signals.score','op':'glob','value':'*'}]",
           ".op: glob matches strings but signals.score is of type number");
    EXPECT("{}", "[{'field':'signals.flag','op':'suffix','value':'e'}]",
           ".op: suffix matches strings but signals.flag is of type boolean");
    EXPECT("{}", "[{'field':'context.b','op':'glob','value':5}]",
           ".value: glob needs a string, not a number");
    EXPECT("{}", "[{'field':'context.b','op':'prefix'}]",
           ".value: required member missing for operator prefix");
    /* value_from */
    EXPECT("{}", "[{'field':'context.a','op':'lte','value':1,'value_from':'context.b'}]",
           ".value: value and value_from together (a condition compares with one of them)");
    EXPECT("{}", "[{'field':'context.a','op':'in','value_from':'context.b'}]",
           ".value_from: value_from works with eq, ne, gt, gte, lt and lte, not in");
    EXPECT("{}", "[{'field':'context.a','op':'prefix','value_from':'context.b'}]",
           ".value_from: value_from works with eq, ne, gt, gte, lt and lte, not prefix");
    EXPECT("{}", "[{'field':'context.a','op':'lte','value_from':5}]",
           ".value_from: must be a field name (a string), not a number");
    EXPECT("{}", "[{'field':'context.a','op':'lte','value_from':'signals.nope'}]",
           ".value_from: signal \"nope\" is not declared in signals");
    EXPECT("{}", "[{'field':'context.a','op':'lte','value_from':'context.'}]",
           ".value_from: unknown field \"context.\" (expected context.<name>, signals.<name>, "
           "actor, action, tenant or principal.<subject|issuer|claims.<name>>)");
    EXPECT("{}", "[{'field':'context.a','op':'lte','value_from':'actor'}]",
           ".value_from: lte compares numbers but actor is of type string");
    EXPECT("{'n':'number'}", "[{'field':'context.n','op':'eq','value_from':'actor'}]",
           ".value_from: actor is of type string and context.n of type number: eq never holds "
           "as meant");
#undef EXPECT
}

/* A field only value_from mentions is still copied into the frame. */
static void test_value_from_field_is_mentioned(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok("{}", AMT "'lte','value_from':'context.only_here'}]");
    assert_int_equal(decide(p, "{'surface':'s','context':{'amount':1,'only_here':2}}"), 1);
    assert_int_equal(decide(p, "{'surface':'s','context':{'amount':3,'only_here':2}}"), 0);
    tg_policy_destroy(p);
}

/* The string operand's bound: TG_POLICY_MAX_VALUE bytes accepted, one more refused. */
static void test_operand_bound(void **state) {
    (void)state;
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = TG_POLICY_MAX_VALUE + (size_t)extra;
        char *pat = malloc(n + 1);
        assert_non_null(pat);
        memset(pat, 'a', n);
        pat[n - 1] = '*';
        pat[n] = '\0';
        json_t *when =
            json_pack("[{s:s, s:s, s:s}]", "field", "context.b", "op", "glob", "value", pat);
        tg_diag_t diag;
        tg_err_t rc = compile_when(when, &diag);
        if (extra == 0) {
            assert_int_equal(rc, TG_OK);
        } else {
            assert_int_equal(rc, TG_ERR_POLICY_INVALID);
            assert_string_equal(diag.msg,
                                "surfaces.s.rules[0].when[0].value: string longer than 1024 bytes");
        }
        free(pat);
    }
}

/* The caller's verified facts take the string operators and value_from like the request's
 * own fields: an absent fact holds nothing. */
static void test_facts(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok("{}", "[{'field':'tenant','op':'prefix','value':'acme-'},"
                                      "{'field':'principal.subject','op':'eq','value_from':"
                                      "'context.owner'}]");
    json_t *req = parse_q("{'surface':'s','context':{'owner':'u1'}}");
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_DENY); /* no tenant, no subject */
    f.tenant.ptr = "acme-eu";
    f.tenant.len = 7;
    f.principal_subject.ptr = "u1";
    f.principal_subject.len = 2;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT);
    f.principal_subject.ptr = "u2";
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_DENY);
    f.principal_subject.ptr = "u1";
    f.tenant.ptr = "beta-eu";
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_DENY);
    json_decref(req);
    tg_policy_destroy(p);
}

/* ---- glob: a reference matcher and the step bound ----------------------------------- */

/* Backtracking reference over code points (small inputs only). */
static size_t ref_cp(const char *s) {
    unsigned char c = (unsigned char)s[0];
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

static int ref_match(const char *p, const char *s) {
    if (*p == '\0') {
        return *s == '\0';
    }
    if (*p == '*') {
        for (const char *t = s;; t += ref_cp(t)) {
            if (ref_match(p + 1, t)) {
                return 1;
            }
            if (*t == '\0') {
                return 0;
            }
        }
    }
    if (*s == '\0') {
        return 0;
    }
    if (*p == '?') {
        return ref_match(p + 1, s + ref_cp(s));
    }
    return *p == *s && ref_match(p + 1, s + 1);
}

static int glob(const char *p, const char *s, uint64_t *steps) {
    return tg_glob_match(p, strlen(p), s, strlen(s), steps);
}

static void test_glob_reference(void **state) {
    (void)state;
    static const char *const atoms[] = {"a", "b", "\xc3\xa9", "*", "?"};
    static const char *const texts[] = {"a", "b", "\xc3\xa9"};
    uint32_t seed = 12345;
    unsigned checked = 0;
    for (int round = 0; round < 20000; round++) {
        char p[64] = "", s[64] = "";
        seed = seed * 1103515245u + 12345u;
        int np = (int)((seed >> 16) % 7), ns = (int)((seed >> 8) % 8);
        for (int i = 0; i < np; i++) {
            seed = seed * 1103515245u + 12345u;
            strcat(p, atoms[(seed >> 16) % 5]);
        }
        for (int i = 0; i < ns; i++) {
            seed = seed * 1103515245u + 12345u;
            strcat(s, texts[(seed >> 16) % 3]);
        }
        if (glob(p, s, NULL) != ref_match(p, s)) {
            fail_msg("glob \"%s\" on \"%s\": expected %d", p, s, ref_match(p, s));
        }
        checked++;
    }
    assert_true(glob("", "", NULL));
    assert_false(glob("", "a", NULL));
    assert_true(glob("*", "", NULL));
    assert_true(glob("**", "abc", NULL));
    assert_false(glob("ab*ba", "aba", NULL));
    assert_true(glob("ab*ba", "abba", NULL));
    assert_true(glob("*.example.com", "api.example.com", NULL));
    assert_false(glob("*.example.com", "example.com", NULL));
    /* an invalid UTF-8 byte is one code point and never read past */
    assert_true(tg_glob_match("?", 1, "\xff", 1, NULL));
    assert_true(tg_glob_match("a?", 2, "a\xc3", 2, NULL));
    assert_true(tg_glob_match("*?", 2, "\xe2\x82", 2, NULL) == 1);
    print_message("glob: %u random cases agree with the reference\n", checked);
}

/* Adversarial patterns over long runs: the comparisons stay linear in the text (the
 * backtracking matcher needs ~n*m of them). Counted, never timed. */
static void test_glob_steps(void **state) {
    (void)state;
    enum { N = 100000 };
    char *text = malloc(N + 2);
    assert_non_null(text);
    memset(text, 'a', N);
    text[N] = '\0';
    static char long_literal[520];
    long_literal[0] = '*';
    memset(long_literal + 1, 'a', 500);
    memcpy(long_literal + 501, "b*", 3);
    const struct {
        const char *pattern;
        int match;
        uint64_t per_byte; /* comparisons allowed per text byte: 2 for literal segments
                              (KMP), the longest segment with a `?` + 1 otherwise */
    } cases[] = {
        {"*a*a*a*a*b", 0, 2},  {"*a*a*a*a*a", 1, 2},   {"*a*a*a*ab*", 0, 2},
        {"*aaaaaaaab*", 0, 2}, {long_literal, 0, 2},   {"a*a*a*a*a*a*a*a*", 1, 2},
        {"*?*?*?*?*b", 0, 2},  {"*a?a?a?a?b*", 0, 11}, {"*b*", 0, 2},
        {"*aaab*aaab*", 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t steps = 0;
        int m = glob(cases[i].pattern, text, &steps);
        assert_int_equal(m, cases[i].match);
        uint64_t bound = cases[i].per_byte * (N + 1) + strlen(cases[i].pattern);
        if (steps > bound) {
            fail_msg("glob %s over %d bytes: %llu comparisons (bound %llu)", cases[i].pattern, N,
                     (unsigned long long)steps, (unsigned long long)bound);
        }
    }
    free(text);
}

/* ---- explain over groups and value_from --------------------------------------------- */

typedef struct {
    tg_explain_step_t steps[32];
    const tg_value_t *other_seen[32];
    double other_num[32];
    size_t n;
} trace_t;

static void collect(void *ud, const tg_explain_step_t *st) {
    trace_t *t = ud;
    if (t->n < 32) {
        t->steps[t->n] = *st;
        t->other_num[t->n] = st->other != NULL ? st->other->num : -1;
        t->n++;
    }
}

static void test_explain(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok(
        "{}", "[{'any_of':[{'field':'context.b','op':'eq','value':'main'},{'not':{'field':"
              "'context.b','op':'prefix','value':'wip/'}}]},{'field':'context.amount','op':'lte',"
              "'value_from':'context.limit'}]");
    json_t *req = parse_q("{'surface':'s','context':{'b':'wip/x','amount':5,'limit':7}}");
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    trace_t t = {0};
    tg_decision_t d, k;
    tg_kernel_explain(&d, tg_policy_tables(p), &f, collect, &t);
    tg_kernel_decide(&k, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, k.verdict);
    assert_int_equal(d.verdict, TG_DENY);
    /* rule, any_of (depth 1), eq (2), not (2), prefix (3), value_from (1) */
    assert_int_equal(t.n, 6);
    static const uint8_t kinds[] = {TG_EXPLAIN_RULE, TG_EXPLAIN_COND, TG_EXPLAIN_COND,
                                    TG_EXPLAIN_COND, TG_EXPLAIN_COND, TG_EXPLAIN_COND};
    static const uint8_t depths[] = {0, 1, 2, 2, 3, 1};
    static const uint8_t held[] = {0, 0, 0, 0, 1, 1};
    static const uint32_t index[] = {0, 0, 0, 1, 0, 1};
    for (size_t i = 0; i < t.n; i++) {
        assert_int_equal(t.steps[i].kind, kinds[i]);
        assert_int_equal(t.steps[i].depth, depths[i]);
        assert_int_equal(t.steps[i].held, held[i]);
        assert_int_equal(t.steps[i].index, index[i]);
    }
    assert_int_equal(t.steps[1].cond->op, TG_OP_ANY);
    assert_int_equal(t.steps[3].cond->op, TG_OP_NOT);
    assert_int_equal(t.steps[4].cond->op, TG_OP_PREFIX);
    assert_true(t.steps[5].cond->has_from);
    assert_true(t.other_num[5] == 7.0);
    assert_true(t.other_num[4] == -1); /* no value_from: no other */
    json_decref(req);
    tg_policy_destroy(p);
}

/* Today's rules compile as before: the new members stay zero for them. */
static void test_old_conditions_untouched(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok("{}", "[{'field':'context.x','op':'gt','value':1}]");
    const tg_kernel_tables_t *t = tg_policy_tables(p);
    const tg_cond_t *c = &t->surfaces[0].rules[0].conds[0];
    assert_int_equal(c->op, TG_OP_GT);
    assert_int_equal(c->has_from, 0);
    assert_null(c->sub);
    assert_int_equal(c->n_sub, 0);
    tg_policy_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_operators),
        cmocka_unit_test(test_value_from),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_value_from_field_is_mentioned),
        cmocka_unit_test(test_operand_bound),
        cmocka_unit_test(test_facts),
        cmocka_unit_test(test_glob_reference),
        cmocka_unit_test(test_glob_steps),
        cmocka_unit_test(test_explain),
        cmocka_unit_test(test_old_conditions_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
