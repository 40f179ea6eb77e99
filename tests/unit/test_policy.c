/* test_policy.c — bundle validation (every error path names its JSON path), limits, hashing,
 * file loading, allocation failures, request → frame conversion, request hash, JSON output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

#include "support/fail_alloc.h"

/* ---- helpers ------------------------------------------------------------------------ */

static const char *src_root(void) {
    const char *s = getenv("TG_SRC");
    return s != NULL && s[0] != '\0' ? s : "../..";
}

/* Test bundles are written with ' for " to stay readable. */
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
    tg_err_t rc = tg_json_parse(&v, t, n, &lim, &diag);
    if (rc) {
        fail_msg("test JSON does not parse: %s: %s", diag.msg, t);
    }
    free(t);
    return v;
}

static tg_err_t compile_tree(tg_policy_t **p, const json_t *bundle, tg_diag_t *diag) {
    memset(diag, 0, sizeof *diag);
    return tg_policy_compile(p, bundle, diag);
}

/* The bundle must be rejected with TG_ERR_POLICY_INVALID and exactly this message. */
static void expect_error_tree(const json_t *bundle, const char *msg) {
    tg_policy_t *p = (tg_policy_t *)(uintptr_t)1;
    tg_diag_t diag;
    tg_err_t rc = compile_tree(&p, bundle, &diag);
    if (rc != TG_ERR_POLICY_INVALID || strcmp(diag.msg, msg) != 0) {
        fail_msg("expected TG_ERR_POLICY_INVALID \"%s\", got %s \"%s\"", msg, tg_err_name(rc),
                 diag.msg);
    }
    assert_null(p);
}

static void expect_error(const char *q, const char *msg) {
    json_t *b = parse_q(q);
    expect_error_tree(b, msg);
    json_decref(b);
}

static tg_policy_t *compile_ok_tree(const json_t *bundle) {
    tg_policy_t *p = NULL;
    tg_diag_t diag;
    tg_err_t rc = compile_tree(&p, bundle, &diag);
    if (rc) {
        fail_msg("expected a valid bundle: %s %s", tg_err_name(rc), diag.msg);
    }
    return p;
}

static tg_policy_t *compile_ok(const char *q) {
    json_t *b = parse_q(q);
    tg_policy_t *p = compile_ok_tree(b);
    json_decref(b);
    return p;
}

/* A surface body inside a minimal valid bundle. */
static void expect_surface_error(const char *surface_q, const char *msg) {
    char buf[8192];
    snprintf(buf, sizeof buf, "{'version':'1','surfaces':{'x':%s}}", surface_q);
    expect_error(buf, msg);
}

static json_t *base_bundle(void) { return parse_q("{'version':'1','surfaces':{'x':{'tier':3}}}"); }

static json_t *load_example(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/policy.json", src_root());
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, text, n, NULL, NULL), TG_OK);
    return v;
}

/* ---- top level ---------------------------------------------------------------------- */

static void test_top_level_errors(void **state) {
    (void)state;
    expect_error("[1]", "policy: the bundle must be a JSON object, not an array");
    expect_error("{'version':'1','surfaces':{'x':{'tier':3}},'surfacez':1}",
                 "surfacez: unknown member (expected version, authority, description, surfaces, "
                 "signals, actors, tools, tiers, timezone, sets, limits, routes)");
    expect_error("{'surfaces':{'x':{'tier':3}}}", "version: required member missing");
    expect_error("{'version':1,'surfaces':{'x':{'tier':3}}}",
                 "version: must be a string, not a number");
    expect_error("{'version':'','surfaces':{'x':{'tier':3}}}", "version: must not be empty");
    expect_error("{'version':'a\\nb','surfaces':{'x':{'tier':3}}}",
                 "version: contains a control character");
    expect_error("{'version':'1','authority':null,'surfaces':{'x':{'tier':3}}}",
                 "authority: must be a string, not null");
    expect_error("{'version':'1','description':5,'surfaces':{'x':{'tier':3}}}",
                 "description: must be a string, not a number");
    expect_error("{'version':'1'}", "surfaces: required member missing");
    expect_error("{'version':'1','surfaces':[]}",
                 "surfaces: must be an object of surfaces, not an array");
    expect_error("{'version':'1','surfaces':{}}", "surfaces: at least one surface is required");
    expect_error("{'version':'1','surfaces':{'':{'tier':3}}}",
                 "surfaces.: surface name must not be empty");
    expect_error("{'version':'1','surfaces':{'a\\tb':{'tier':3}}}",
                 "surfaces.a?b: surface name \"a?b\" contains a control character");
    expect_error("{'version':'1','surfaces':{'x':'deny'}}",
                 "surfaces.x: surface must be an object, not a string");
}

static void test_tier_and_group_errors(void **state) {
    (void)state;
    const char *pre = "{'version':'1','surfaces':{'x':{'tier':3}},";
    char buf[1024];
    struct {
        const char *tail, *msg;
    } cases[] = {
        {"'tiers':[]}", "tiers: must be an object, not an array"},
        {"'tiers':{'4':0.5}}", "tiers.4: unknown tier (expected \"1\", \"2\" or \"3\")"},
        {"'tiers':{'1':1.5}}", "tiers.1: threshold 1.5 is outside [0, 1]"},
        {"'tiers':{'2':'0.5'}}", "tiers.2: must be a number in [0, 1], not a string"},
        {"'tiers':{'1':{}}}", "tiers.1: risk_threshold is required"},
        {"'tiers':{'1':{'risk_threshold':-0.1}}}",
         "tiers.1.risk_threshold: threshold -0.1 is outside [0, 1]"},
        {"'tiers':{'1':{'risk':0.1}}}",
         "tiers.1.risk: unknown member (expected risk_threshold, description)"},
        {"'actors':[]}", "actors: must be an object of actor groups, not an array"},
        {"'actors':{'g':'a'}}", "actors.g: must be an array of actor ids, not a string"},
        {"'actors':{'g':[1]}}", "actors.g[0]: must be a string, not a number"},
        {"'actors':{'g':['']}}", "actors.g[0]: actor id must not be empty"},
        {"'actors':{'g':['@h']}}", "actors.g[0]: groups cannot contain groups"},
        {"'actors':{'':['a']}}", "actors.: group name must not be empty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", pre, cases[i].tail);
        expect_error(buf, cases[i].msg);
    }
}

static void test_surface_errors(void **state) {
    (void)state;
    expect_surface_error("{'tier':3,'foo':1}",
                         "surfaces.x.foo: unknown member (expected tier, frozen, description, "
                         "required_context, optional_context, actors, rules, default, mode, "
                         "timezone)");
    expect_surface_error("{}", "surfaces.x.tier: required member missing (1, 2 or 3)");
    expect_surface_error("{'tier':3,'mode':'report'}",
                         "surfaces.x.mode: must be \"enforce\" or \"observe\"");
    expect_surface_error("{'tier':3,'mode':true}",
                         "surfaces.x.mode: must be \"enforce\" or \"observe\"");
    /* SPEC §11.1: the surface's mode, for the pipeline (the kernel never reads it) */
    tg_policy_t *mp = compile_ok("{'version':'1','surfaces':{'a':{'tier':3,'mode':'observe'},"
                                 "'b':{'tier':3,'mode':'enforce'},'c':{'tier':3}}}");
    assert_true(tg_policy_surface_observe(mp, 0));
    assert_false(tg_policy_surface_observe(mp, 1));
    assert_false(tg_policy_surface_observe(mp, 2));
    assert_false(tg_policy_surface_observe(mp, 3));
    tg_policy_destroy(mp);
    expect_surface_error("{'tier':4}", "surfaces.x.tier: must be 1, 2 or 3");
    expect_surface_error("{'tier':1.5}", "surfaces.x.tier: must be 1, 2 or 3");
    expect_surface_error("{'tier':'1'}", "surfaces.x.tier: must be 1, 2 or 3");
    expect_surface_error("{'tier':3,'frozen':'yes'}",
                         "surfaces.x.frozen: must be true or false, not a string");
    expect_surface_error("{'tier':3,'description':[]}",
                         "surfaces.x.description: must be a string, not an array");
    expect_surface_error("{'tier':3,'required_context':'amount'}",
                         "surfaces.x.required_context: must be an object of name -> type or an "
                         "array of names, not a string");
    expect_surface_error("{'tier':3,'required_context':{'amount':'integer'}}",
                         "surfaces.x.required_context.amount: type must be one of string, number, "
                         "boolean, object, array, any");
    expect_surface_error("{'tier':3,'required_context':{'amount':1}}",
                         "surfaces.x.required_context.amount: type must be one of string, number, "
                         "boolean, object, array, any");
    expect_surface_error("{'tier':3,'required_context':{'':'any'}}",
                         "surfaces.x.required_context.: context field name must not be empty");
    expect_surface_error("{'tier':3,'required_context':['a',2]}",
                         "surfaces.x.required_context[1]: must be a field name (string), not a "
                         "number");
    expect_surface_error("{'tier':3,'required_context':['a','b','a']}",
                         "surfaces.x.required_context[2]: duplicate field \"a\"");
    expect_surface_error("{'tier':3,'actors':'a'}",
                         "surfaces.x.actors: must be an array of actor ids, not a string");
    expect_surface_error("{'tier':3,'actors':['a',{}]}",
                         "surfaces.x.actors[1]: actor must be a string, not an object");
    expect_surface_error("{'tier':3,'actors':['@nope']}",
                         "surfaces.x.actors[0]: unknown actor group \"@nope\"");
    expect_surface_error("{'tier':3,'default':'allow'}",
                         "surfaces.x.default: must be \"permit\", \"deny\" or {\"effect\", "
                         "\"reason\"}");
    expect_surface_error("{'tier':3,'default':{}}",
                         "surfaces.x.default: effect is required (\"permit\" or \"deny\")");
    expect_surface_error("{'tier':3,'default':{'effect':'deny','why':1}}",
                         "surfaces.x.default.why: unknown member (expected effect, reason)");
    expect_surface_error("{'tier':3,'default':{'effect':'deny','reason':'nope'}}",
                         "surfaces.x.default.reason: reason code \"nope\" must be UPPER_SNAKE "
                         "([A-Z][A-Z0-9_]*, at most 64 bytes)");
    expect_surface_error("{'tier':1,'default':'permit'}",
                         "surfaces.x.default: a tier-1 (irreversible) surface cannot default to "
                         "permit");
    expect_surface_error("{'tier':1,'default':{'effect':'permit'}}",
                         "surfaces.x.default: a tier-1 (irreversible) surface cannot default to "
                         "permit");
}

static void test_rule_errors(void **state) {
    (void)state;
    /* The example message of the issue, verbatim. */
    expect_error("{'version':'1','surfaces':{'payments.charge':{'tier':1,'rules':["
                 "{'id':'a','effect':'permit'},{'id':'b','effect':'permit'},"
                 "{'id':'c','effect':'deny','when':[{'field':'context.amount','op':'gtx',"
                 "'value':1}]}]}}}",
                 "surfaces.payments.charge.rules[2].when[0].op: unknown operator \"gtx\"");
    struct {
        const char *rules, *msg;
    } cases[] = {
        {"{}", "surfaces.x.rules: must be an array of rules, not an object"},
        {"[1]", "surfaces.x.rules[0]: rule must be an object, not a number"},
        {"[{'effect':'deny','if':[]}]",
         "surfaces.x.rules[0].if: unknown member (expected id, effect, reason, when, "
         "description, unconditional, approval)"},
        {"[{'id':5,'effect':'deny'}]", "surfaces.x.rules[0].id: must be a string, not a number"},
        {"[{'id':'','effect':'deny'}]", "surfaces.x.rules[0].id: rule id must not be empty"},
        {"[{'id':'r','effect':'deny'},{'id':'r','effect':'permit'}]",
         "surfaces.x.rules[1].id: duplicate rule id \"r\""},
        {"[{'id':'r'}]",
         "surfaces.x.rules[0].effect: required member missing (\"permit\", \"deny\" or "
         "\"escalate\")"},
        {"[{'effect':'allow'}]",
         "surfaces.x.rules[0].effect: must be \"permit\", \"deny\" or \"escalate\""},
        /* escalate rules and their approval (SPEC §11.2) */
        {"[{'effect':'escalate'}]",
         "surfaces.x.rules[0]: an escalate rule needs \"approval\": {\"approvers\": [...]}"},
        {"[{'effect':'permit','approval':{'approvers':['a']}}]",
         "surfaces.x.rules[0].approval: only an escalate rule has an approval"},
        {"[{'effect':'deny','approval':{'approvers':['a']}}]",
         "surfaces.x.rules[0].approval: only an escalate rule has an approval"},
        {"[{'effect':'escalate','approval':[]}]",
         "surfaces.x.rules[0].approval: must be an object, not an array"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'quorum':1}}]",
         "surfaces.x.rules[0].approval.quorum: unknown member (expected required, approvers, "
         "ttl_s, consume_within_s)"},
        {"[{'effect':'escalate','approval':{}}]",
         "surfaces.x.rules[0].approval.approvers: required member missing (an array of "
         "\"@group\" or subject entries)"},
        {"[{'effect':'escalate','approval':{'approvers':'a'}}]",
         "surfaces.x.rules[0].approval.approvers: must be an array of \"@group\" or subject "
         "entries, not a string"},
        {"[{'effect':'escalate','approval':{'approvers':[]}}]",
         "surfaces.x.rules[0].approval.approvers: 0 entries (1..16)"},
        {"[{'effect':'escalate','approval':{'approvers':['a','b','c','d','e','f','g','h','i',"
         "'j','k','l','m','n','o','p','q']}}]",
         "surfaces.x.rules[0].approval.approvers: 17 entries (1..16)"},
        {"[{'effect':'escalate','approval':{'approvers':['a',1]}}]",
         "surfaces.x.rules[0].approval.approvers[1]: must be a string, not a number"},
        {"[{'effect':'escalate','approval':{'approvers':['a','a']}}]",
         "surfaces.x.rules[0].approval.approvers[1]: duplicate entry \"a\""},
        {"[{'effect':'escalate','approval':{'approvers':['@']}}]",
         "surfaces.x.rules[0].approval.approvers[0]: \"@\" is neither a subject nor "
         "\"@group\" (1..128 of [A-Za-z0-9._:@/+-] in all)"},
        {"[{'effect':'escalate','approval':{'approvers':['a b']}}]",
         "surfaces.x.rules[0].approval.approvers[0]: \"a b\" is neither a subject nor "
         "\"@group\" (1..128 of [A-Za-z0-9._:@/+-] in all)"},
        {"[{'effect':'escalate','approval':{'approvers':['']}}]",
         "surfaces.x.rules[0].approval.approvers[0]: \"\" is neither a subject nor "
         "\"@group\" (1..128 of [A-Za-z0-9._:@/+-] in all)"},
        {"[{'effect':'escalate','approval':{'approvers':['a','b'],'required':3}}]",
         "surfaces.x.rules[0].approval.required: 3 approvals required of 2 listed subjects: it "
         "can never be approved"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'required':0}}]",
         "surfaces.x.rules[0].approval.required: 0 is out of range (1..16)"},
        {"[{'effect':'escalate','approval':{'approvers':['@g'],'required':17}}]",
         "surfaces.x.rules[0].approval.required: 17 is out of range (1..16)"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'required':1.5}}]",
         "surfaces.x.rules[0].approval.required: 1.5 is not an integer"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'ttl_s':true}}]",
         "surfaces.x.rules[0].approval.ttl_s: must be an integer, not a boolean"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'ttl_s':0}}]",
         "surfaces.x.rules[0].approval.ttl_s: 0 is out of range (1..2678400)"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'ttl_s':2678401}}]",
         "surfaces.x.rules[0].approval.ttl_s: 2678401 is out of range (1..2678400)"},
        {"[{'effect':'escalate','approval':{'approvers':['a'],'consume_within_s':'9'}}]",
         "surfaces.x.rules[0].approval.consume_within_s: must be an integer, not a string"},
        {"[{'effect':'escalate','reason':'x','approval':{'approvers':['a']}}]",
         "surfaces.x.rules[0].reason: reason code \"x\" must be UPPER_SNAKE "
         "([A-Z][A-Z0-9_]*, at most 64 bytes)"},
        {"[{'effect':'deny','reason':'Too_Big'}]",
         "surfaces.x.rules[0].reason: reason code \"Too_Big\" must be UPPER_SNAKE "
         "([A-Z][A-Z0-9_]*, at most 64 bytes)"},
        {"[{'effect':'deny','reason':7}]",
         "surfaces.x.rules[0].reason: must be a string, not a number"},
        {"[{'effect':'deny','when':{}}]",
         "surfaces.x.rules[0].when: must be an array of conditions, not an object"},
        {"[{'effect':'deny','when':['x']}]",
         "surfaces.x.rules[0].when[0]: condition must be an object, not a string"},
        {"[{'effect':'deny','when':[{'field':'actor','op':'eq','value':'a','x':1}]}]",
         "surfaces.x.rules[0].when[0].x: unknown member (expected field, op, value, "
         "value_from, set, description)"},
        {"[{'effect':'deny','when':[{'op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].field: required member missing"},
        {"[{'effect':'deny','when':[{'field':1,'op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].field: must be a string, not a number"},
        {"[{'effect':'deny','when':[{'field':'tenants','op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].field: unknown field \"tenants\" (expected "
         "context.<name>, signals.<name>, actor, action, tenant or "
         "principal.<subject|issuer|claims.<name>>)"},
        {"[{'effect':'deny','when':[{'field':'context.','op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].field: unknown field \"context.\" (expected "
         "context.<name>, signals.<name>, actor, action, tenant or "
         "principal.<subject|issuer|claims.<name>>)"},
        /* The verified facts of the caller (issue 20): strings, and claims by name. */
        {"[{'effect':'deny','when':[{'field':'tenant','op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].value: a number operand never matches a field of type "
         "string"},
        {"[{'effect':'deny','when':[{'field':'principal.subject','op':'gt','value':1}]}]",
         "surfaces.x.rules[0].when[0].op: gt compares numbers but principal.subject is of type "
         "string"},
        {"[{'effect':'deny','when':[{'field':'principal.issuer','op':'in','value':['a',true]}]}]",
         "surfaces.x.rules[0].when[0].value[1]: a boolean operand never matches a field of type "
         "string"},
        {"[{'effect':'deny','when':[{'field':'principal.','op':'eq','value':'a'}]}]",
         "surfaces.x.rules[0].when[0].field: unknown principal field \"principal.\" (expected "
         "principal.subject, principal.issuer or principal.claims.<name>)"},
        {"[{'effect':'deny','when':[{'field':'principal.foo','op':'eq','value':'a'}]}]",
         "surfaces.x.rules[0].when[0].field: unknown principal field \"principal.foo\" "
         "(expected principal.subject, principal.issuer or principal.claims.<name>)"},
        {"[{'effect':'deny','when':[{'field':'principal.claims.','op':'eq','value':'a'}]}]",
         "surfaces.x.rules[0].when[0].field: unknown principal field \"principal.claims.\" "
         "(expected principal.subject, principal.issuer or principal.claims.<name>)"},
        {"[{'effect':'deny','when':[{'field':'principal','op':'eq','value':'a'}]}]",
         "surfaces.x.rules[0].when[0].field: unknown field \"principal\" (expected "
         "context.<name>, signals.<name>, actor, action, tenant or "
         "principal.<subject|issuer|claims.<name>>)"},
        {"[{'effect':'deny','when':[{'field':'signals.nope','op':'eq','value':1}]}]",
         "surfaces.x.rules[0].when[0].field: signal \"nope\" is not declared in signals"},
        {"[{'effect':'deny','when':[{'field':'actor','value':'a'}]}]",
         "surfaces.x.rules[0].when[0].op: required member missing"},
        {"[{'effect':'deny','when':[{'field':'actor','op':['eq'],'value':'a'}]}]",
         "surfaces.x.rules[0].when[0].op: must be a string, not an array"},
        {"[{'effect':'deny','when':[{'field':'actor','op':'gt','value':1}]}]",
         "surfaces.x.rules[0].when[0].op: gt compares numbers but actor is of type string"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'eq'}]}]",
         "surfaces.x.rules[0].when[0].value: required member missing for operator eq"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'lte','value':'5'}]}]",
         "surfaces.x.rules[0].when[0].value: lte needs a number, not a string"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'eq','value':null}]}]",
         "surfaces.x.rules[0].when[0].value: must be a string, number or boolean, not null"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'ne','value':{}}]}]",
         "surfaces.x.rules[0].when[0].value: must be a string, number or boolean, not an "
         "object"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'in','value':1}]}]",
         "surfaces.x.rules[0].when[0].value: in needs an array, not a number"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'not_in','value':[]}]}]",
         "surfaces.x.rules[0].when[0].value: not_in needs at least one value"},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'in','value':[1,[2]]}]}]",
         "surfaces.x.rules[0].when[0].value[1]: must be a string, number or boolean, not an "
         "array"},
        {"[{'effect':'deny','when':[{'field':'actor','op':'in','value':['@none']}]}]",
         "surfaces.x.rules[0].when[0].value[0]: unknown actor group \"@none\""},
        {"[{'effect':'deny','when':[{'field':'context.a','op':'exists','value':1}]}]",
         "surfaces.x.rules[0].when[0].value: exists takes true or false, not a number"},
        {"[{'effect':'deny','when':[{'field':'action','op':'eq','value':true}]}]",
         "surfaces.x.rules[0].when[0].value: a boolean operand never matches a field of type "
         "string"},
    };
    char buf[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "{'tier':3,'rules':%s}", cases[i].rules);
        expect_surface_error(buf, cases[i].msg);
    }
    /* Operands are checked against the surface's declared context types and signal types. */
    expect_surface_error("{'tier':3,'required_context':{'amount':'number'},'rules':[{'effect':"
                         "'deny','when':[{'field':'context.amount','op':'eq','value':'10'}]}]}",
                         "surfaces.x.rules[0].when[0].value: a string operand never matches a "
                         "field of type number");
    expect_surface_error("{'tier':3,'required_context':{'cur':'string'},'rules':[{'effect':"
                         "'deny','when':[{'field':'context.cur','op':'gt','value':1}]}]}",
                         "surfaces.x.rules[0].when[0].op: gt compares numbers but context.cur is "
                         "of type string");
    expect_surface_error("{'tier':3,'required_context':{'cur':'string'},'rules':[{'effect':"
                         "'deny','when':[{'field':'context.cur','op':'in','value':['a',1]}]}]}",
                         "surfaces.x.rules[0].when[0].value[1]: a number operand never matches a "
                         "field of type string");
    expect_surface_error("{'tier':3,'rules':[{'effect':'deny','when':[{'field':"
                         "'signals.riskScore','op':'eq','value':true}]}]}",
                         "surfaces.x.rules[0].when[0].value: a boolean operand never matches a "
                         "field of type number");
    expect_error("{'version':'1','signals':{'b':{'type':'boolean'}},'surfaces':{'x':{'tier':3,"
                 "'rules':[{'effect':'deny','when':[{'field':'signals.b','op':'lt','value':1}]}"
                 "]}}}",
                 "surfaces.x.rules[0].when[0].op: lt compares numbers but signals.b is of type "
                 "boolean");
}

static void test_signal_and_tool_errors(void **state) {
    (void)state;
    const char *post = ",'surfaces':{'x':{'tier':3}}}";
    struct {
        const char *head, *msg;
    } cases[] = {
        {"{'version':'1','signals':[]", "signals: must be an object of signals, not an array"},
        {"{'version':'1','signals':{'s':true}", "signals.s: must be an object, not a boolean"},
        {"{'version':'1','signals':{'s':{'type':'number','weight':1}}",
         "signals.s.weight: unknown member (expected type, description, reason, deny_on_tier, "
         "thresholds, required_for)"},
        {"{'version':'1','signals':{'s':{}}",
         "signals.s.type: required member missing (\"number\" or \"boolean\")"},
        {"{'version':'1','signals':{'s':{'type':'string'}}",
         "signals.s.type: must be \"number\" or \"boolean\""},
        {"{'version':'1','signals':{'riskScore':{'type':'boolean'}}",
         "signals.riskScore: riskScore is a number signal"},
        {"{'version':'1','signals':{'s':{'type':'number','deny_on_tier':[1]}}",
         "signals.s.deny_on_tier: applies to boolean signals only (number signals use "
         "thresholds)"},
        {"{'version':'1','signals':{'s':{'type':'boolean','deny_on_tier':1}}",
         "signals.s.deny_on_tier: must be an array of tiers, not a number"},
        {"{'version':'1','signals':{'s':{'type':'boolean','deny_on_tier':[1,4]}}",
         "signals.s.deny_on_tier[1]: tier must be 1, 2 or 3"},
        {"{'version':'1','signals':{'s':{'type':'boolean','thresholds':{'1':0.5}}}",
         "signals.s.thresholds: applies to number signals only (boolean signals use "
         "deny_on_tier)"},
        {"{'version':'1','signals':{'s':{'type':'number','thresholds':[0.5]}}",
         "signals.s.thresholds: must be an object of tier -> number, not an array"},
        {"{'version':'1','signals':{'s':{'type':'number','thresholds':{'0':0.5}}}",
         "signals.s.thresholds.0: unknown tier (expected \"1\", \"2\" or \"3\")"},
        {"{'version':'1','signals':{'s':{'type':'number','thresholds':{'1':2}}}",
         "signals.s.thresholds.1: threshold 2 is outside [0, 1]"},
        {"{'version':'1','signals':{'s':{'type':'boolean','reason':'lower'}}",
         "signals.s.reason: reason code \"lower\" must be UPPER_SNAKE ([A-Z][A-Z0-9_]*, at most "
         "64 bytes)"},
        {"{'version':'1','signals':{'_s':{'type':'boolean','deny_on_tier':[1]}}",
         "signals._s: reason is required (cannot derive one from the name)"},
        {"{'version':'1','signals':{'s':{'type':'boolean','required_for':'x'}}",
         "signals.s.required_for: must be an array of surface names, not a string"},
        {"{'version':'1','signals':{'s':{'type':'boolean','required_for':['y']}}",
         "signals.s.required_for[0]: unknown surface \"y\""},
        {"{'version':'1','signals':{'s':{'type':'boolean','required_for':[1]}}",
         "signals.s.required_for[0]: must be a surface name (string), not a number"},
        {"{'version':'1','signals':{'':{'type':'boolean'}}",
         "signals.: signal name must not be empty"},
        {"{'version':'1','tools':[]", "tools: must be an object of tool -> surface, not an array"},
        {"{'version':'1','tools':{'t':'y'}", "tools.t: unknown surface \"y\""},
        {"{'version':'1','tools':{'t':5}",
         "tools.t: must be a surface name (string), not a number"},
        {"{'version':'1','tools':{'t':{}}", "tools.t.surface: required member missing"},
        {"{'version':'1','tools':{'t':{'surface':'x','verb':'a'}}",
         "tools.t.verb: unknown member (expected surface, action, description)"},
        {"{'version':'1','tools':{'t':{'surface':'x','action':1}}",
         "tools.t.action: must be a string, not a number"},
        {"{'version':'1','tools':{'':'x'}", "tools.: tool name must not be empty"},
    };
    char buf[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", cases[i].head, post);
        expect_error(buf, cases[i].msg);
    }
    /* A wrongly typed operand on a declared signal: boolean signal compared with a number. */
    expect_error("{'version':'1','signals':{'b':{'type':'boolean'}},'surfaces':{'x':{'tier':3,"
                 "'rules':[{'effect':'deny','when':[{'field':'signals.b','op':'eq','value':1}]}]}}"
                 "}",
                 "surfaces.x.rules[0].when[0].value: a number operand never matches a field of "
                 "type boolean");
}

/* ---- limits: max accepted, max + 1 rejected ------------------------------------------- */

static json_t *surface_of(json_t *b) {
    return json_object_get(json_object_get(b, "surfaces"), "x");
}

static json_t *cond(const char *field, const char *op, json_t *value) {
    json_t *c = json_pack("{s:s, s:s}", "field", field, "op", op);
    json_object_set_new(c, "value", value);
    return c;
}

static void test_limits(void **state) {
    (void)state;
    char name[512];
    for (int over = 0; over <= 1; over++) {
        /* surfaces */
        json_t *b = parse_q("{'version':'1','surfaces':{}}");
        for (int i = 0; i < TG_POLICY_MAX_SURFACES + over; i++) {
            snprintf(name, sizeof name, "s%03d", i);
            json_object_set_new(json_object_get(b, "surfaces"), name,
                                json_pack("{s:i}", "tier", 3));
        }
        if (over) {
            expect_error_tree(b, "surfaces: 257 surfaces (limit 256)");
        } else {
            tg_policy_t *p = compile_ok_tree(b);
            assert_int_equal(tg_policy_surface_count(p), TG_POLICY_MAX_SURFACES);
            tg_policy_destroy(p);
        }
        json_decref(b);

        /* rules per surface, conditions per rule */
        b = base_bundle();
        json_t *rules = json_array();
        for (int i = 0; i < TG_POLICY_MAX_RULES + over; i++) {
            json_array_append_new(rules, json_pack("{s:s}", "effect", "deny"));
        }
        json_object_set_new(surface_of(b), "rules", rules);
        if (over) {
            expect_error_tree(b, "surfaces.x.rules: 65 rules (limit 64)");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);
        b = base_bundle();
        json_t *when = json_array();
        for (int i = 0; i < TG_POLICY_MAX_CONDITIONS + over; i++) {
            json_array_append_new(when, cond("actor", "exists", json_true()));
        }
        json_object_set_new(surface_of(b), "rules",
                            json_pack("[{s:s, s:o}]", "effect", "deny", "when", when));
        if (over) {
            expect_error_tree(b, "surfaces.x.rules[0].when: 17 conditions (limit 16)");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        /* in-list values (64; actor lists 256) */
        b = base_bundle();
        json_t *list = json_array();
        for (int i = 0; i < TG_POLICY_MAX_LIST + over; i++) {
            json_array_append_new(list, json_integer(i));
        }
        json_object_set_new(
            surface_of(b), "rules",
            json_pack("[{s:s, s:[o]}]", "effect", "deny", "when", cond("context.a", "in", list)));
        if (over) {
            expect_error_tree(b, "surfaces.x.rules[0].when[0].value: 65 values (limit 64)");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        /* required context fields */
        b = base_bundle();
        json_t *req = json_object();
        for (int i = 0; i < TG_POLICY_MAX_REQUIRED + over; i++) {
            snprintf(name, sizeof name, "f%02d", i);
            json_object_set_new(req, name, json_string("any"));
        }
        json_object_set_new(surface_of(b), "required_context", req);
        if (over) {
            expect_error_tree(b, "surfaces.x.required_context: 33 required fields (limit 32)");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        /* actors per surface (literal) and per group; groups */
        b = base_bundle();
        json_t *actors = json_array();
        for (int i = 0; i < TG_POLICY_MAX_ACTORS + over; i++) {
            snprintf(name, sizeof name, "agent.%03d", i);
            json_array_append_new(actors, json_string(name));
        }
        json_object_set_new(surface_of(b), "actors", actors);
        if (over) {
            expect_error_tree(b, "surfaces.x.actors[256]: more than 256 actors");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);
        b = base_bundle();
        actors = json_array();
        for (int i = 0; i < TG_POLICY_MAX_ACTORS + over; i++) {
            snprintf(name, sizeof name, "agent.%03d", i);
            json_array_append_new(actors, json_string(name));
        }
        json_object_set_new(b, "actors", json_pack("{s:o}", "g", actors));
        if (over) {
            expect_error_tree(b, "actors.g: 257 actors (limit 256)");
        } else {
            json_object_set_new(surface_of(b), "actors", json_pack("[s]", "@g"));
            tg_policy_destroy(compile_ok_tree(b));
            /* a group of 256 plus one literal actor overflows the surface list */
            json_object_set_new(surface_of(b), "actors", json_pack("[s,s]", "@g", "extra"));
            expect_error_tree(b, "surfaces.x.actors[1]: more than 256 actors");
        }
        json_decref(b);
        b = base_bundle();
        json_t *groups = json_object();
        for (int i = 0; i < TG_POLICY_MAX_GROUPS + over; i++) {
            snprintf(name, sizeof name, "g%02d", i);
            json_object_set_new(groups, name, json_pack("[s]", "a"));
        }
        json_object_set_new(b, "actors", groups);
        if (over) {
            expect_error_tree(b, "actors: 65 actor groups (limit 64)");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        /* signals (riskScore counts) */
        b = base_bundle();
        json_t *sigs = json_object();
        for (int i = 0; i < TG_POLICY_MAX_SIGNALS - 1 + over; i++) {
            snprintf(name, sizeof name, "sig%02d", i);
            json_object_set_new(sigs, name, json_pack("{s:s}", "type", "boolean"));
        }
        json_object_set_new(b, "signals", sigs);
        if (over) {
            expect_error_tree(b, "signals: 33 signals with riskScore (limit 32)");
        } else {
            tg_policy_t *p = compile_ok_tree(b);
            assert_int_equal(tg_policy_signal_count(p), TG_POLICY_MAX_SIGNALS);
            tg_policy_destroy(p);
        }
        json_decref(b);

        /* tools */
        b = base_bundle();
        json_t *tools = json_object();
        for (int i = 0; i < TG_POLICY_MAX_TOOLS + over; i++) {
            snprintf(name, sizeof name, "tool.%04d", i);
            json_object_set_new(tools, name, json_string("x"));
        }
        json_object_set_new(b, "tools", tools);
        if (over) {
            expect_error_tree(b, "tools: 1025 tools (limit 1024)");
        } else {
            tg_policy_t *p = compile_ok_tree(b);
            assert_int_equal(tg_policy_tool_count(p), TG_POLICY_MAX_TOOLS);
            tg_policy_destroy(p);
        }
        json_decref(b);

        /* distinct context fields across the bundle: 16 surfaces x 16 required fields */
        b = parse_q("{'version':'1','surfaces':{}}");
        int total = 0;
        for (int s = 0; s < 17 && total < TG_POLICY_MAX_FIELDS + over; s++) {
            json_t *rq = json_object();
            for (int k = 0; k < 16 && total < TG_POLICY_MAX_FIELDS + over; k++, total++) {
                snprintf(name, sizeof name, "f%03d", total);
                json_object_set_new(rq, name, json_string("any"));
            }
            snprintf(name, sizeof name, "s%02d", s);
            json_object_set_new(json_object_get(b, "surfaces"), name,
                                json_pack("{s:i, s:o}", "tier", 3, "required_context", rq));
        }
        if (over) {
            expect_error_tree(b, "surfaces.s16.required_context.f256: more than 256 distinct "
                                 "context fields in the policy");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        /* distinct principal claims across the bundle (one rule, one condition each) */
        b = parse_q("{'version':'1','surfaces':{'x':{'tier':3,'rules':[]}}}");
        json_t *crules =
            json_object_get(json_object_get(json_object_get(b, "surfaces"), "x"), "rules");
        for (int k = 0; k < TG_POLICY_MAX_CLAIMS + over; k++) {
            snprintf(name, sizeof name, "principal.claims.c%02d", k);
            json_array_append_new(crules,
                                  json_pack("{s:s, s:[{s:s, s:s, s:b}]}", "effect", "deny", "when",
                                            "field", name, "op", "exists", "value", 1));
        }
        if (over) {
            expect_error_tree(b, "surfaces.x.rules[16].when[0].field: more than 16 distinct "
                                 "principal claims in the policy");
        } else {
            tg_policy_t *p = compile_ok_tree(b);
            assert_int_equal(tg_policy_claim_count(p), TG_POLICY_MAX_CLAIMS);
            tg_policy_destroy(p);
        }
        json_decref(b);
    }

    /* Byte lengths: names 128, reasons 64, version 64, authority 128, operands 1024. */
    char big[2048];
    for (int over = 0; over <= 1; over++) {
        json_t *b = base_bundle();
        memset(big, 'n', sizeof big);
        big[TG_POLICY_MAX_NAME + over] = '\0';
        json_object_set_new(json_object_get(b, "surfaces"), big, json_pack("{s:i}", "tier", 3));
        if (over) {
            tg_policy_t *p = NULL;
            tg_diag_t diag;
            assert_int_equal(compile_tree(&p, b, &diag), TG_ERR_POLICY_INVALID);
            assert_non_null(strstr(diag.msg, "is longer than 128 bytes"));
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        b = base_bundle();
        memset(big, 'R', sizeof big);
        big[TG_POLICY_MAX_REASON + over] = '\0';
        json_object_set_new(surface_of(b), "default",
                            json_pack("{s:s, s:s}", "effect", "deny", "reason", big));
        if (over) {
            tg_policy_t *p = NULL;
            tg_diag_t diag;
            assert_int_equal(compile_tree(&p, b, &diag), TG_ERR_POLICY_INVALID);
            assert_non_null(strstr(diag.msg, "surfaces.x.default.reason: reason code"));
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        b = base_bundle();
        memset(big, 'v', sizeof big);
        big[TG_POLICY_MAX_VERSION + over] = '\0';
        json_object_set_new(b, "version", json_string(big));
        if (over) {
            expect_error_tree(b, "version: longer than 64 bytes");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        memset(big, 'a', sizeof big);
        big[TG_POLICY_MAX_AUTHORITY + over] = '\0';
        json_object_set_new(b, "version", json_string("1"));
        json_object_set_new(b, "authority", json_string(big));
        if (over) {
            expect_error_tree(b, "authority: longer than 128 bytes");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);

        b = base_bundle();
        memset(big, 's', sizeof big);
        big[TG_POLICY_MAX_VALUE + over] = '\0';
        json_object_set_new(surface_of(b), "rules",
                            json_pack("[{s:s, s:[o]}]", "effect", "deny", "when",
                                      cond("context.a", "eq", json_string(big))));
        if (over) {
            expect_error_tree(b, "surfaces.x.rules[0].when[0].value: string longer than 1024 "
                                 "bytes");
        } else {
            tg_policy_destroy(compile_ok_tree(b));
        }
        json_decref(b);
    }
}

/* ---- hash, accessors, files ------------------------------------------------------------ */

static void test_hash_and_accessors(void **state) {
    (void)state;
    /* Known answer computed independently: SHA-256 of {"surfaces":{"s":{"tier":3}},"version":"1"}
     */
    tg_policy_t *p = compile_ok("{ 'version' : '1', 'surfaces' : { 's' : { 'tier' : 3.0 } } }");
    assert_string_equal(tg_policy_hash_hex(p),
                        "ae82a55a6ccff805588f30500227884924c7a6ae93cecc8e2f5a00729c2e6e45");
    assert_string_equal(tg_policy_version(p), "1");
    assert_string_equal(tg_policy_authority(p), "trigguard-local");
    assert_int_equal(tg_policy_surface_count(p), 1);
    assert_int_equal(tg_policy_rule_count(p), 0);
    assert_int_equal(tg_policy_signal_count(p), 1); /* the implicit riskScore */
    assert_int_equal(tg_policy_tool_count(p), 0);
    tg_policy_destroy(p);

    /* receipts' authorityId, serve's and check's one rule: flag, else bundle, else default */
    p = compile_ok("{'version':'1','authority':'acme-prod','surfaces':{'s':{'tier':3}}}");
    assert_string_equal(tg_policy_authority_id(p, NULL), "acme-prod");
    assert_string_equal(tg_policy_authority_id(p, ""), "acme-prod");
    assert_string_equal(tg_policy_authority_id(p, "ops"), "ops");
    tg_policy_destroy(p);
    p = compile_ok("{'version':'1','surfaces':{'s':{'tier':3}}}");
    assert_string_equal(tg_policy_authority_id(p, NULL), "trigguard-local");
    assert_string_equal(tg_policy_authority_id(p, "ops"), "ops");
    tg_policy_destroy(p);

    /* The bundled policy: hash = SHA-256 of its canonical bytes. */
    json_t *ex = load_example();
    p = compile_ok_tree(ex);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_canon_write(&b, ex, NULL), TG_OK);
    uint8_t h[32];
    tg_sha256(h, b.data, b.len);
    assert_memory_equal(h, tg_policy_hash(p), 32);
    char hex[65];
    tg_hex(hex, h, 32);
    assert_string_equal(hex, tg_policy_hash_hex(p));
    tg_buf_free(&b);
    assert_string_equal(tg_policy_version(p), "2026-12-04.2");
    assert_string_equal(tg_policy_authority(p), "trigguard-local");
    assert_int_equal(tg_policy_surface_count(p), 12);
    assert_true(tg_policy_signal_count(p) >= 3);

    static const struct {
        const char *name;
        int tier;
    } registry[] = {{"deploy.release", 1},  {"infra.apply", 1},      {"database.migrate", 1},
                    {"secrets.access", 1},  {"artifact.publish", 1}, {"data.export", 2},
                    {"payments.charge", 1}, {"payments.refund", 1},  {"identity.role_grant", 1},
                    {"model.publish", 1},   {"prod.deploy", 2},      {"example", 3}};
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++) {
        uint32_t idx = 9999;
        assert_int_equal(
            tg_policy_surface_find(&idx, p, registry[i].name, strlen(registry[i].name)), TG_OK);
        assert_int_equal(tg_policy_surface_tier(p, idx), registry[i].tier);
        tg_sv_t nm = tg_policy_surface_name(p, idx);
        assert_int_equal(nm.len, strlen(registry[i].name));
        assert_memory_equal(nm.ptr, registry[i].name, nm.len);
    }
    uint32_t idx;
    assert_int_equal(tg_policy_surface_find(&idx, p, "payments", 8), TG_ERR_UNKNOWN_SURFACE);
    assert_int_equal(tg_policy_surface_find(&idx, p, "", 0), TG_ERR_UNKNOWN_SURFACE);
    assert_int_equal(tg_policy_surface_find(NULL, p, "example", 7), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_surface_find(&idx, NULL, "example", 7), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_surface_find(&idx, p, NULL, 3), TG_ERR_INVALID_ARG);
    assert_null(tg_policy_surface_name(p, 12).ptr);
    assert_int_equal(tg_policy_surface_tier(p, 12), 0);
    tg_policy_destroy(p);
    json_decref(ex);

    /* Different text, same canonical form: same hash. */
    tg_policy_t *a = compile_ok("{'version':'1','surfaces':{'a':{'tier':1},'b':{'tier':2}}}");
    tg_policy_t *c = compile_ok("{'surfaces':{'b':{'tier':2.0},'a':{'tier':1}},'version':'1'}");
    assert_string_equal(tg_policy_hash_hex(a), tg_policy_hash_hex(c));
    tg_policy_t *d = compile_ok("{'surfaces':{'b':{'tier':2},'a':{'tier':1}},'version':'2'}");
    assert_string_not_equal(tg_policy_hash_hex(a), tg_policy_hash_hex(d));
    tg_policy_destroy(a);
    tg_policy_destroy(c);
    tg_policy_destroy(d);
}

static void test_null_arguments(void **state) {
    (void)state;
    tg_policy_t *p = NULL;
    json_t *b = base_bundle();
    tg_diag_t diag;
    assert_int_equal(tg_policy_compile(NULL, b, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_compile(&p, NULL, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_load_text(NULL, "{}", 2, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_load_file(NULL, "x", &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_policy_load_file(&p, NULL, &diag), TG_ERR_INVALID_ARG);
    tg_policy_destroy(NULL);
    json_decref(b);
}

static void test_load_text_and_file(void **state) {
    (void)state;
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    const char *ok = "{\"version\":\"7\",\"surfaces\":{\"x\":{\"tier\":2}}}";
    assert_int_equal(tg_policy_load_text(&p, ok, strlen(ok), &diag), TG_OK);
    assert_string_equal(tg_policy_version(p), "7");
    tg_policy_destroy(p);
    const char *dup = "{\"version\":\"7\",\"version\":\"8\",\"surfaces\":{\"x\":{\"tier\":2}}}";
    assert_int_equal(tg_policy_load_text(&p, dup, strlen(dup), &diag), TG_ERR_JSON_DUPLICATE_KEY);
    assert_null(p);
    assert_int_equal(tg_policy_load_text(&p, "{", 1, &diag), TG_ERR_JSON_SYNTAX);
    const char *inv = "{\"version\":\"7\",\"surfaces\":{}}";
    assert_int_equal(tg_policy_load_text(&p, inv, strlen(inv), &diag), TG_ERR_POLICY_INVALID);

    assert_int_equal(tg_policy_load_file(&p, "/nonexistent/policy.json", &diag), TG_ERR_NOT_FOUND);
    assert_non_null(strstr(diag.msg, "/nonexistent/policy.json"));
    assert_int_equal(tg_policy_load_file(&p, "/", &diag), TG_ERR_IO); /* a directory */

    char path[] = "/tmp/tg_policy_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    /* exactly the maximum size: whitespace-padded valid bundle */
    size_t len = strlen(ok);
    assert_int_equal(fwrite(ok, 1, len, f), len);
    for (size_t i = len; i < TG_POLICY_MAX_FILE; i++) {
        fputc(' ', f);
    }
    fflush(f);
    assert_int_equal(tg_policy_load_file(&p, path, &diag), TG_OK);
    tg_policy_destroy(p);
    fputc(' ', f); /* one byte over */
    fclose(f);
    assert_int_equal(tg_policy_load_file(&p, path, &diag), TG_ERR_LIMIT);
    assert_null(p);
    unlink(path);

    char example[1024];
    snprintf(example, sizeof example, "%s/examples/policy.json", src_root());
    assert_int_equal(tg_policy_load_file(&p, example, &diag), TG_OK);
    tg_policy_destroy(p);
}

/* Every allocation of a compile fails in turn: NOMEM, never a crash, never a leak. */
static void test_allocation_failures(void **state) {
    (void)state;
    json_t *ex = load_example();
    long injected_before = tg_fail_alloc_injected();
    for (long n = 0;; n++) {
        tg_policy_t *p = NULL;
        tg_diag_t diag = {{0}};
        long before = tg_fail_alloc_injected();
        tg_fail_alloc_after(n);
        tg_err_t rc = tg_policy_compile(&p, ex, &diag);
        bool failed = tg_fail_alloc_injected() != before; /* the countdown fired */
        tg_fail_alloc_off();
        if (!failed) {
            assert_int_equal(rc, TG_OK);
            tg_policy_destroy(p);
            print_message("compile survived %ld injected allocation failures\n", n);
            break;
        }
        if (rc != TG_ERR_NOMEM) {
            fail_msg("allocation %ld failed but compile returned %s (%s)", n, tg_err_name(rc),
                     diag.msg);
        }
        assert_null(p);
        assert_true(n < 100000);
    }
    assert_true(tg_fail_alloc_injected() - injected_before >= 5);
    json_decref(ex);
}

/* ---- requests -> frames ---------------------------------------------------------------- */

static const char SPEC_REQUEST[] =
    "{\"surface\":\"payments.charge\",\"action\":\"transfer_funds\",\"actor\":\"agent.billing\","
    "\"context\":{\"amount\":2500,\"currency\":\"USD\"},"
    "\"signals\":{\"riskScore\":0.12,\"rsdSpike\":false},\"idempotency_key\":\"tx_9921\","
    "\"nonce\":\"6f1c\",\"subjectDigest\":\"sha256:abc\",\"prevReceiptHash\":\"abc\"}";

static json_t *parse_text(const char *text) {
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, text, strlen(text), NULL, NULL), TG_OK);
    return v;
}

static int sv_is(tg_sv_t v, const char *s) {
    return v.ptr != NULL && v.len == strlen(s) && memcmp(v.ptr, s, v.len) == 0;
}

static void test_frame_conversion(void **state) {
    (void)state;
    json_t *ex = load_example();
    tg_policy_t *p = compile_ok_tree(ex);
    json_t *req = parse_text(SPEC_REQUEST);
    tg_frame_t f;
    tg_request_meta_t meta;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_frame_from_request(&f, &meta, p, req, &diag), TG_OK);
    assert_memory_equal(f.policy_hash, tg_policy_hash(p), 32);
    assert_true(sv_is(f.surface_name, "payments.charge"));
    assert_true(sv_is(f.action, "transfer_funds"));
    assert_true(sv_is(f.actor, "agent.billing"));
    assert_true(sv_is(meta.idempotency_key, "tx_9921"));
    assert_true(sv_is(meta.nonce, "6f1c"));
    assert_true(sv_is(meta.subject_digest, "sha256:abc"));
    assert_true(sv_is(meta.prev_receipt_hash, "abc"));
    assert_null(meta.tool.ptr);
    assert_ptr_equal(meta.context, json_object_get(req, "context"));
    assert_ptr_equal(meta.signals, json_object_get(req, "signals"));
    assert_int_equal(f.n_context, 2);
    assert_int_equal(f.n_signals, 2);
    assert_int_equal(f.n_unknown_signals, 0);
    assert_true(f.context[0].id < f.context[1].id);
    assert_true(f.signals[0].id < f.signals[1].id);
    json_decref(req);

    /* tool-call shape: mapping, intent_id, meta.tool, args as context */
    req = parse_text("{\"tool\":\"stripe.charge\",\"args\":{\"amount\":5,\"currency\":\"USD\"},"
                     "\"intent_id\":\"i-9\"}");
    assert_int_equal(tg_frame_from_request(&f, &meta, p, req, &diag), TG_OK);
    assert_true(sv_is(f.surface_name, "payments.charge"));
    assert_true(sv_is(f.action, "charge"));
    assert_null(f.actor.ptr);
    assert_true(sv_is(meta.tool, "stripe.charge"));
    assert_true(sv_is(meta.idempotency_key, "i-9"));
    assert_ptr_equal(meta.context, json_object_get(req, "args"));
    assert_null(meta.signals);
    json_decref(req);
    /* a tool without a mapped action: the action is the tool name */
    req = parse_text("{\"tool\":\"terraform.apply\",\"args\":{\"changeId\":\"c\"}}");
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &diag), TG_OK);
    assert_true(sv_is(f.action, "terraform.apply"));
    json_decref(req);
    req = parse_text("{\"tool\":\"terraform.apply\",\"action\":\"plan\"}");
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &diag), TG_OK);
    assert_true(sv_is(f.action, "plan"));
    json_decref(req);

    /* jansson integers (trees not built by tg_json_parse) are numbers too */
    req = json_pack("{s:s, s:s, s:{s:I, s:s}}", "surface", "payments.charge", "actor",
                    "agent.billing", "context", "amount", (json_int_t)2500, "currency", "USD");
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &diag), TG_OK);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT);
    json_decref(req);

    /* errors, each with the member named */
    struct {
        const char *text;
        tg_err_t rc;
        const char *msg;
    } bad[] = {
        {"[]", TG_ERR_REQUEST_INVALID, "request: must be a JSON object, not an array"},
        {"{\"surface\":\"example\",\"Surface\":1}", TG_ERR_REQUEST_INVALID,
         "request.Surface: unknown member"},
        {"{\"surface\":null}", TG_ERR_REQUEST_INVALID,
         "request.surface: must be a string, not null"},
        {"{\"surface\":\"example\",\"nonce\":5}", TG_ERR_REQUEST_INVALID,
         "request.nonce: must be a string, not a number"},
        {"{\"surface\":\"example\",\"args\":\"x\"}", TG_ERR_REQUEST_INVALID,
         "request.args: must be an object, not a string"},
        {"{\"surface\":\"example\",\"context\":{},\"args\":{}}", TG_ERR_REQUEST_INVALID,
         "request: context and args cannot both be given"},
        {"{\"actor\":\"a\"}", TG_ERR_REQUEST_INVALID,
         "request: surface is required (or tool, for a tool call)"},
        {"{\"surface\":\"example\",\"tool\":\"example.echo\"}", TG_ERR_REQUEST_INVALID,
         "request: surface and tool cannot both be given"},
        {"{\"surface\":\"nope\"}", TG_ERR_UNKNOWN_SURFACE,
         "request.surface: unknown surface \"nope\""},
        {"{\"tool\":\"nope\"}", TG_ERR_UNKNOWN_SURFACE,
         "request.tool: tool \"nope\" is not mapped to a surface by the policy's tools table"},
        {"{\"tool\":\"stripe.charge\",\"action\":\"x\"}", TG_ERR_REQUEST_INVALID,
         "request.action: tool \"stripe.charge\" maps to action \"charge\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req = parse_text(bad[i].text);
        memset(&diag, 0, sizeof diag);
        tg_err_t rc = tg_frame_from_request(&f, &meta, p, req, &diag);
        if (rc != bad[i].rc || strcmp(diag.msg, bad[i].msg) != 0) {
            fail_msg("%s: expected %s \"%s\", got %s \"%s\"", bad[i].text, tg_err_name(bad[i].rc),
                     bad[i].msg, tg_err_name(rc), diag.msg);
        }
        json_decref(req);
    }
    req = parse_text("{\"surface\":\"example\"}");
    assert_int_equal(tg_frame_from_request(NULL, NULL, p, req, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_frame_from_request(&f, NULL, NULL, req, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_frame_from_request(&f, NULL, p, NULL, &diag), TG_ERR_INVALID_ARG);
    json_decref(req);
    tg_policy_destroy(p);
    json_decref(ex);
}

static void test_frame_context_limit(void **state) {
    (void)state;
    /* 65 distinct fields the policy uses (5 rules x 13 conditions). */
    json_t *b = base_bundle();
    json_t *rules = json_array();
    char name[64];
    for (int r = 0; r < 5; r++) {
        json_t *when = json_array();
        for (int k = 0; k < 13; k++) {
            snprintf(name, sizeof name, "context.f%02d", r * 13 + k);
            json_array_append_new(when, cond(name, "exists", json_true()));
        }
        json_array_append_new(rules, json_pack("{s:s, s:o}", "effect", "permit", "when", when));
    }
    json_object_set_new(surface_of(b), "rules", rules);
    tg_policy_t *p = compile_ok_tree(b);
    for (int over = 0; over <= 1; over++) {
        json_t *ctx = json_object();
        for (int i = 0; i < TG_FRAME_MAX_CONTEXT + over; i++) {
            snprintf(name, sizeof name, "f%02d", i);
            json_object_set_new(ctx, name, json_integer(i));
        }
        json_object_set_new(ctx, "unused", json_true()); /* not counted: the policy ignores it */
        json_t *req = json_pack("{s:s, s:o}", "surface", "x", "context", ctx);
        tg_frame_t f;
        tg_diag_t diag = {{0}};
        tg_err_t rc = tg_frame_from_request(&f, NULL, p, req, &diag);
        if (over) {
            assert_int_equal(rc, TG_ERR_REQUEST_INVALID);
            assert_string_equal(diag.msg, "request.context: more than 64 fields the policy uses");
        } else {
            assert_int_equal(rc, TG_OK);
            assert_int_equal(f.n_context, TG_FRAME_MAX_CONTEXT);
            for (uint32_t i = 1; i < f.n_context; i++) {
                assert_true(f.context[i - 1].id < f.context[i].id);
            }
        }
        json_decref(req);
    }
    tg_policy_destroy(p);
    json_decref(b);
}

static void hash_of(uint8_t out[32], const tg_policy_t *p, const char *text) {
    json_t *req = parse_text(text);
    tg_frame_t f;
    tg_request_meta_t meta;
    assert_int_equal(tg_frame_from_request(&f, &meta, p, req, NULL), TG_OK);
    assert_int_equal(tg_request_hash(out, &f, &meta, NULL), TG_OK);
    json_decref(req);
}

static void test_request_hash(void **state) {
    (void)state;
    json_t *ex = load_example();
    tg_policy_t *p = compile_ok_tree(ex);
    uint8_t h[32], g[32];
    /* Known answer: SHA-256 of the normalized canonical object (computed independently). */
    hash_of(h, p, SPEC_REQUEST);
    char hex[65];
    tg_hex(hex, h, 32);
    assert_string_equal(hex, "f002da74746f7ad6586ea3aca600e28e570755f6803107e9272fea9df51cca20");
    /* idempotency_key and nonce are transport-only; member order and aliases do not matter */
    hash_of(g, p,
            "{\"prevReceiptHash\":\"abc\",\"subjectDigest\":\"sha256:abc\",\"intent_id\":\"other\","
            "\"signals\":{\"rsdSpike\":false,\"riskScore\":0.12},\"context\":{\"currency\":\"USD\","
            "\"amount\":2.5e3},\"actorId\":\"agent.billing\",\"action\":\"transfer_funds\","
            "\"surface\":\"payments.charge\"}");
    assert_memory_equal(h, g, 32);
    /* the tool-call shape hashes like the equivalent SPEC request */
    hash_of(h, p,
            "{\"tool\":\"stripe.charge\",\"args\":{\"amount\":5,\"currency\":\"USD\"},"
            "\"actor\":\"agent.billing\",\"intent_id\":\"i\"}");
    hash_of(g, p,
            "{\"surface\":\"payments.charge\",\"action\":\"charge\",\"context\":{\"amount\":5,"
            "\"currency\":\"USD\"},\"actor\":\"agent.billing\",\"nonce\":\"n\"}");
    assert_memory_equal(h, g, 32);
    /* anything hashed changes the hash */
    hash_of(g, p,
            "{\"surface\":\"payments.charge\",\"action\":\"charge\",\"context\":{\"amount\":6,"
            "\"currency\":\"USD\"},\"actor\":\"agent.billing\"}");
    assert_memory_not_equal(h, g, 32);
    hash_of(h, p, "{\"surface\":\"example\"}");
    const char *min = "{\"surface\":\"example\"}";
    tg_sha256(g, min, strlen(min));
    assert_memory_equal(h, g, 32);
    /* SPEC §11.1: executionMode is hashed (normalized: its alias and "report" hash as
     * "observe") only when present, so requests without it keep their v1 hashes */
    hash_of(h, p, "{\"surface\":\"example\",\"executionMode\":\"observe\"}");
    const char *obs = "{\"executionMode\":\"observe\",\"surface\":\"example\"}";
    tg_sha256(g, obs, strlen(obs));
    assert_memory_equal(h, g, 32);
    hash_of(g, p, "{\"surface\":\"example\",\"execution_mode\":\"report\"}");
    assert_memory_equal(h, g, 32);
    hash_of(g, p, "{\"surface\":\"example\",\"executionMode\":\"enforce\"}");
    assert_memory_not_equal(h, g, 32);
    {
        json_t *bad = NULL;
        tg_frame_t bf;
        tg_request_meta_t bm;
        tg_diag_t bd = {{0}};
        static const char *const refused[] = {
            "{\"surface\":\"example\",\"executionMode\":\"shadow\"}",
            "{\"surface\":\"example\",\"executionMode\":\"Observe\"}",
            "{\"surface\":\"example\",\"executionMode\":true}",
            ("{\"surface\":\"example\",\"executionMode\":\"observe\",\"execution_mode\":"
             "\"observe\"}")};
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
            assert_int_equal(tg_json_parse(&bad, refused[i], strlen(refused[i]), NULL, NULL),
                             TG_OK);
            assert_int_equal(tg_frame_from_request(&bf, &bm, p, bad, &bd), TG_ERR_REQUEST_INVALID);
            json_decref(bad);
        }
    }

    tg_frame_t f;
    tg_request_meta_t meta;
    memset(&meta, 0, sizeof meta);
    assert_int_equal(tg_request_hash(NULL, &f, &meta, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_request_hash(h, NULL, &meta, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_request_hash(h, &f, NULL, NULL), TG_ERR_INVALID_ARG);
    tg_policy_destroy(p);
    json_decref(ex);
}

/* ---- decision JSON -------------------------------------------------------------------- */

static void test_decision_json(void **state) {
    (void)state;
    json_t *ex = load_example();
    tg_policy_t *p = compile_ok_tree(ex);
    json_t *req = parse_text(SPEC_REQUEST);
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);

    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_decision_to_json(&b, &d, p, &f, NULL), TG_OK);
    assert_string_equal(b.data, "{\"decision\":\"PERMIT\",\"enforcement\":\"EXECUTED\","
                                "\"reason_code\":\"NO_POLICY_VIOLATION\","
                                "\"policy_version\":\"2026-12-04.2\"}");
    tg_buf_reset(&b);
    const char receipt[] = "{\"r\":1}";
    tg_decision_json_opts_t opts = {"exec_00", "ab", receipt, sizeof receipt - 1, 1};
    assert_int_equal(tg_decision_to_json(&b, &d, p, &f, &opts), TG_OK);
    char expect[1024];
    snprintf(
        expect, sizeof expect,
        "{\"decision\":\"PERMIT\",\"enforcement\":\"EXECUTED\",\"reason_code\":"
        "\"NO_POLICY_VIOLATION\",\"execution_id\":\"exec_00\",\"request_hash\":\"ab\","
        "\"policy_version\":\"2026-12-04.2\",\"receipt\":{\"r\":1},\"trace\":{\"states\":"
        "[\"RECEIVED\",\"VALIDATED\",\"CLASSIFIED\",\"SIGNALS_EVALUATED\",\"RULES_EVALUATED\"],"
        "\"decided_in\":\"RULES_EVALUATED\",\"decided_by\":\"rule\",\"rule\":"
        "\"billing-agent-within-limit\",\"surface\":\"payments.charge\",\"tier\":1,"
        "\"rules_evaluated\":4,\"policy_hash\":\"%s\"}}",
        tg_policy_hash_hex(p));
    assert_string_equal(b.data, expect);

    /* SILENCE in RECEIVED with a subject; no frame given */
    tg_decision_t s;
    memset(&s, 0, sizeof s);
    tg_kernel_decide(&s, tg_policy_tables(p), NULL);
    tg_buf_reset(&b);
    tg_decision_json_opts_t topts = {NULL, NULL, NULL, 0, 1};
    assert_int_equal(tg_decision_to_json(&b, &s, p, NULL, &topts), TG_OK);
    snprintf(expect, sizeof expect,
             "{\"decision\":\"SILENCE\",\"enforcement\":\"BLOCKED\",\"reason_code\":"
             "\"INVALID_FRAME\",\"policy_version\":\"2026-12-04.2\",\"detail\":\"the request "
             "cannot be decided\",\"trace\":{\"states\":"
             "[\"RECEIVED\"],\"decided_in\":\"RECEIVED\",\"decided_by\":\"frame\",\"tier\":0,"
             "\"rules_evaluated\":0,\"policy_hash\":\"%s\"}}",
             tg_policy_hash_hex(p));
    assert_string_equal(b.data, expect);

    /* ESCALATE (SPEC §11.2): PENDING_APPROVAL, the approval after policy_version */
    tg_decision_t esc = d;
    esc.verdict = TG_ESCALATE;
    esc.reason = "APPROVAL_REQUIRED";
    tg_buf_reset(&b);
    assert_int_equal(tg_decision_to_json(&b, &esc, p, &f, NULL), TG_OK);
    assert_string_equal(b.data, "{\"decision\":\"ESCALATE\",\"enforcement\":\"PENDING_APPROVAL\","
                                "\"reason_code\":\"APPROVAL_REQUIRED\","
                                "\"policy_version\":\"2026-12-04.2\"}");
    const char appr_id[] = "appr_0123456789abcdef0123456789abcdef";
    const char appr[] = "{\"status\":\"pending\"}";
    tg_decision_body_t body = {.decision = "ESCALATE",
                               .reason = {"APPROVAL_REQUIRED", 17},
                               .execution_id = {"exec_00", 7},
                               .policy_version = {"v1", 2},
                               .approval_id = {appr_id, sizeof appr_id - 1},
                               .approval = {appr, sizeof appr - 1},
                               .receipt = {receipt, sizeof receipt - 1}};
    tg_buf_reset(&b);
    assert_int_equal(tg_decision_body_open(&b, &body), TG_OK);
    assert_string_equal(b.data,
                        "{\"decision\":\"ESCALATE\",\"enforcement\":\"PENDING_APPROVAL\","
                        "\"reason_code\":\"APPROVAL_REQUIRED\",\"execution_id\":\"exec_00\","
                        "\"policy_version\":\"v1\",\"approval_id\":"
                        "\"appr_0123456789abcdef0123456789abcdef\",\"approval\":"
                        "{\"status\":\"pending\"},\"receipt\":{\"r\":1}");
    /* a consuming PERMIT carries them too */
    body.decision = "PERMIT";
    body.reason = (tg_text_t){"NO_POLICY_VIOLATION", 19};
    tg_buf_reset(&b);
    assert_int_equal(tg_decision_body_open(&b, &body), TG_OK);
    assert_string_equal(b.data, "{\"decision\":\"PERMIT\",\"enforcement\":\"EXECUTED\","
                                "\"reason_code\":\"NO_POLICY_VIOLATION\",\"execution_id\":"
                                "\"exec_00\",\"policy_version\":\"v1\",\"approval_id\":"
                                "\"appr_0123456789abcdef0123456789abcdef\",\"approval\":"
                                "{\"status\":\"pending\"},\"receipt\":{\"r\":1}");
    /* observe mode: ESCALATE is a would_decision, no approval members */
    body.decision = "ESCALATE";
    body.reason = (tg_text_t){"APPROVAL_REQUIRED", 17};
    body.observe = true;
    tg_buf_reset(&b);
    assert_int_equal(tg_decision_body_open(&b, &body), TG_OK);
    assert_string_equal(b.data, "{\"decision\":\"PERMIT\",\"enforcement\":\"NOT_ENFORCED\","
                                "\"reason_code\":\"OBSERVE_MODE\",\"execution_mode\":\"observe\","
                                "\"would_decision\":\"ESCALATE\",\"would_reason_code\":"
                                "\"APPROVAL_REQUIRED\",\"execution_id\":\"exec_00\","
                                "\"policy_version\":\"v1\",\"receipt\":{\"r\":1}");
    /* an approval without its id is refused, the buffer untouched */
    body.observe = false;
    body.approval_id = (tg_text_t){NULL, 0};
    tg_buf_reset(&b);
    assert_int_equal(tg_decision_body_open(&b, &body), TG_ERR_INVALID_ARG);
    assert_int_equal(b.len, 0);

    /* errors restore the buffer */
    tg_buf_reset(&b);
    assert_int_equal(tg_buf_puts(&b, "keep"), TG_OK);
    tg_decision_t bad = d;
    bad.subject.ptr = "\xff";
    bad.subject.len = 1;
    assert_int_equal(tg_decision_to_json(&b, &bad, p, &f, &topts), TG_ERR_INVALID_ARG);
    assert_string_equal(b.data, "keep");
    tg_buf_t small;
    tg_buf_init(&small, 32);
    assert_int_equal(tg_decision_to_json(&small, &d, p, &f, &opts), TG_ERR_LIMIT);
    assert_int_equal(small.len, 0);
    assert_int_equal(tg_decision_to_json(NULL, &d, p, &f, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_decision_to_json(&b, NULL, p, &f, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_decision_to_json(&b, &d, NULL, &f, NULL), TG_ERR_INVALID_ARG);
    tg_buf_free(&small);
    tg_buf_free(&b);
    json_decref(req);
    tg_policy_destroy(p);
    json_decref(ex);
}

/* ---- compiled semantics that vectors cannot express directly -------------------------- */

static void test_compiled_semantics(void **state) {
    (void)state;
    /* required_for "*" applies to every surface; rule ids default to rules[i]. */
    tg_policy_t *p = compile_ok("{'version':'1','signals':{'hb':{'type':'boolean','required_for':"
                                "['*']}},'surfaces':{'a':{'tier':3,'rules':[{'effect':'deny',"
                                "'when':[{'field':'signals.hb','op':'eq','value':false}]}]},"
                                "'b':{'tier':2,'default':'permit'}}}");
    const char *texts[] = {"{\"surface\":\"a\"}", "{\"surface\":\"b\"}",
                           "{\"surface\":\"a\",\"signals\":{\"hb\":false}}",
                           "{\"surface\":\"b\",\"signals\":{\"hb\":true}}"};
    const char *reasons[] = {"MISSING_SIGNAL", "MISSING_SIGNAL", "POLICY_DENY",
                             "NO_POLICY_VIOLATION"};
    for (size_t i = 0; i < 4; i++) {
        json_t *req = parse_text(texts[i]);
        tg_frame_t f;
        assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
        tg_decision_t d;
        tg_kernel_decide(&d, tg_policy_tables(p), &f);
        assert_string_equal(d.reason, reasons[i]);
        if (i == 2) {
            assert_true(sv_is(d.rule_id, "rules[0]"));
        }
        json_decref(req);
    }
    tg_policy_destroy(p);

    /* riskScore with its own thresholds overrides the tier table per tier. */
    p = compile_ok("{'version':'1','tiers':{'1':0.9},'signals':{'riskScore':{'type':'number',"
                   "'thresholds':{'3':0.1}}},'surfaces':{'one':{'tier':1,'rules':[{'effect':"
                   "'permit'}]},'three':{'tier':3,'default':'permit'}}}");
    const char *rt[] = {"{\"surface\":\"one\",\"signals\":{\"riskScore\":0.85}}",
                        "{\"surface\":\"three\",\"signals\":{\"riskScore\":0.15}}"};
    const tg_verdict_t rv[] = {TG_PERMIT, TG_DENY};
    for (size_t i = 0; i < 2; i++) {
        json_t *req = parse_text(rt[i]);
        tg_frame_t f;
        assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
        tg_decision_t d;
        tg_kernel_decide(&d, tg_policy_tables(p), &f);
        assert_int_equal(d.verdict, rv[i]);
        json_decref(req);
    }
    tg_policy_destroy(p);
}

/* An escalate rule's approval (SPEC §11.2): defaults, explicit values, groups allowing a
 * required count above the entries, and NULL for everything that is not an escalate rule. */
static void test_rule_approval(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok(
        "{'version':'1','surfaces':{'a':{'tier':2,'rules':["
        "{'id':'p','effect':'permit'},"
        "{'id':'e1','effect':'escalate','approval':{'approvers':['alice']}},"
        "{'id':'e2','effect':'escalate','reason':'TWO_PERSON','approval':{'required':3,"
        "'approvers':['@release-managers','bob'],'ttl_s':60,'consume_within_s':2678400}},"
        "{'id':'d','effect':'deny'}]},'b':{'tier':3,'default':'permit'}}}");
    tg_sv_t e1 = {"e1", 2}, e2 = {"e2", 2}, pr = {"p", 1}, dr = {"d", 1}, none = {"zz", 2};
    const tg_approval_spec_t *a = tg_policy_rule_approval(p, 0, e1);
    assert_non_null(a);
    assert_int_equal(a->required, 1);
    assert_int_equal(a->n_approvers, 1);
    assert_string_equal(a->approvers[0], "alice");
    assert_int_equal(a->ttl_s, 3600);
    assert_int_equal(a->consume_within_s, 900);
    a = tg_policy_rule_approval(p, 0, e2);
    assert_non_null(a);
    assert_int_equal(a->required, 3);
    assert_int_equal(a->n_approvers, 2);
    assert_string_equal(a->approvers[0], "@release-managers");
    assert_string_equal(a->approvers[1], "bob");
    assert_int_equal(a->ttl_s, 60);
    assert_int_equal(a->consume_within_s, 2678400);
    assert_null(tg_policy_rule_approval(p, 0, pr));
    assert_null(tg_policy_rule_approval(p, 0, dr));
    assert_null(tg_policy_rule_approval(p, 0, none));
    assert_null(tg_policy_rule_approval(p, 1, e1)); /* a surface without rules */
    assert_null(tg_policy_rule_approval(p, 2, e1)); /* out of range */
    assert_null(tg_policy_rule_approval(NULL, 0, e1));
    const tg_kernel_tables_t *t = tg_policy_tables(p);
    assert_int_equal(t->surfaces[0].rules[1].effect, TG_EFFECT_ESCALATE);
    assert_string_equal(t->surfaces[0].rules[1].reason, "APPROVAL_REQUIRED");
    assert_string_equal(t->surfaces[0].rules[2].reason, "TWO_PERSON");
    tg_policy_destroy(p);

    /* the bounds themselves are accepted: 16 entries, required 16 */
    p = compile_ok("{'version':'1','surfaces':{'a':{'tier':2,'rules':[{'id':'e','effect':"
                   "'escalate','approval':{'required':16,'approvers':['a','b','c','d','e','f',"
                   "'g','h','i','j','k','l','m','n','o','p'],'ttl_s':1,'consume_within_s':1}}]"
                   "}}}");
    tg_sv_t e = {"e", 1};
    a = tg_policy_rule_approval(p, 0, e);
    assert_non_null(a);
    assert_int_equal(a->required, 16);
    assert_int_equal(a->n_approvers, 16);
    tg_policy_destroy(p);
}

int main(void) {
    if (sodium_init() < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_level_errors),       cmocka_unit_test(test_tier_and_group_errors),
        cmocka_unit_test(test_surface_errors),         cmocka_unit_test(test_rule_errors),
        cmocka_unit_test(test_signal_and_tool_errors), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_hash_and_accessors),     cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_load_text_and_file),     cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_frame_conversion),       cmocka_unit_test(test_frame_context_limit),
        cmocka_unit_test(test_request_hash),           cmocka_unit_test(test_decision_json),
        cmocka_unit_test(test_compiled_semantics),     cmocka_unit_test(test_rule_approval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
