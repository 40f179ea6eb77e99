/* test_explain.c — the full explain's JSON (tg_explain_json, issue 21): the exact document
 * for a small policy, agreement with the kernel, cuts, the byte cap, errors. */
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

/* Test JSON is written with ' for " to stay readable. */
static char *unquote(const char *q) {
    size_t n = strlen(q);
    char *t = malloc(n + 1);
    assert_non_null(t);
    for (size_t i = 0; i <= n; i++) {
        t[i] = q[i] == '\'' ? '"' : q[i];
    }
    return t;
}

static tg_policy_t *load(const char *q) {
    char *t = unquote(q);
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_policy_load_text(&p, t, strlen(t), &diag);
    if (rc) {
        fail_msg("policy does not load: %s", diag.msg);
    }
    free(t);
    return p;
}

static json_t *request(const char *q) {
    char *t = unquote(q);
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, t, strlen(t), NULL, NULL), TG_OK);
    free(t);
    return v;
}

/* The explain of request rq under p, as a NUL-terminated heap string; *d its decision. */
static char *explain_of(tg_decision_t *d, const tg_policy_t *p, const json_t *rq) {
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, rq, NULL), TG_OK);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_explain_json(&b, d, p, &f), TG_OK);
    /* the walk decides exactly as the kernel does */
    tg_decision_t k;
    tg_kernel_decide(&k, tg_policy_tables(p), &f);
    assert_int_equal(k.verdict, d->verdict);
    assert_string_equal(k.reason, d->reason);
    assert_ptr_equal(k.rule_id.ptr, d->rule_id.ptr);
    json_t *parsed = NULL;
    assert_int_equal(
        tg_json_parse(&parsed, b.data, b.len, &(tg_json_limits_t){1 << 20, 32, 4096, 256}, NULL),
        TG_OK);
    json_decref(parsed);
    char *s = strdup(b.data);
    tg_buf_free(&b);
    return s;
}

static const char POLICY[] =
    "{'version':'x1','surfaces':{'pay':{'tier':2,'required_context':{'amount':'number'},"
    "'rules':["
    "{'id':'big','effect':'deny','reason':'TOO_BIG','when':["
    "{'field':'context.amount','op':'gt','value':1000},"
    "{'field':'context.note','op':'exists','value':false}]},"
    "{'id':'a-may','effect':'permit','when':["
    "{'field':'actor','op':'in','value':['a','b']},"
    "{'field':'context.amount','op':'lte','value':100},"
    "{'field':'context.tag','op':'ne','value':'x'},"
    "{'field':'principal.claims.team','op':'eq','value':'pay'}]},"
    "{'id':'many','effect':'permit','when':["
    "{'field':'context.amount','op':'in','value':[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}]}"
    "]}}}";

static void test_document(void **state) {
    (void)state;
    tg_policy_t *p = load(POLICY);
    json_t *rq = request("{'surface':'pay','actor':'c','context':{'amount':50,'tag':null}}");
    tg_decision_t d;
    char *got = explain_of(&d, p, rq);
    char *want = unquote(
        "{'rules':["
        "{'id':'big','effect':'deny','reason':'TOO_BIG','evaluated':true,'matched':false,"
        "'conditions':["
        "{'field':'context.amount','op':'gt','value':1000,'present':true,'actual_type':'number',"
        "'actual':50,'held':false},"
        "{'field':'context.note','op':'exists','value':false,'present':false,'held':true}]},"
        "{'id':'a-may','effect':'permit','evaluated':true,'matched':false,'conditions':["
        "{'field':'actor','op':'in','value':['a','b'],'present':true,'actual_type':'string',"
        "'actual':'c','held':false},"
        "{'field':'context.amount','op':'lte','value':100,'present':true,'actual_type':'number',"
        "'actual':50,'held':true},"
        "{'field':'context.tag','op':'ne','value':'x','present':true,'actual_type':'null',"
        "'actual':null,'held':false},"
        "{'field':'principal.claims.team','op':'eq','value':'pay','present':false,"
        "'held':false}]},"
        "{'id':'many','effect':'permit','evaluated':true,'matched':false,'conditions':["
        "{'field':'context.amount','op':'in','value_count':17,'present':true,"
        "'actual_type':'number','actual':50,'held':false}]}"
        "],'limits':[]}");
    assert_string_equal(got, want);
    assert_int_equal(d.verdict, TG_DENY);
    assert_string_equal(d.reason, "NO_MATCHING_POLICY");
    free(got);
    free(want);
    json_decref(rq);

    /* A matching deny ends the kernel's walk: later rules are reported, not evaluated. */
    rq = request("{'surface':'pay','actor':'a','context':{'amount':5000}}");
    got = explain_of(&d, p, rq);
    assert_non_null(strstr(got, "\"id\":\"big\",\"effect\":\"deny\",\"reason\":\"TOO_BIG\","
                                "\"evaluated\":true,\"matched\":true"));
    assert_non_null(strstr(got, "\"id\":\"a-may\",\"effect\":\"permit\",\"evaluated\":false"));
    assert_non_null(strstr(got, "\"id\":\"many\",\"effect\":\"permit\",\"evaluated\":false"));
    assert_int_equal(d.verdict, TG_DENY);
    free(got);
    json_decref(rq);
    tg_policy_destroy(p);
}

/* A decision taken before RULES_EVALUATED has nothing to explain rule by rule. */
static void test_before_rules(void **state) {
    (void)state;
    tg_policy_t *p = load(POLICY);
    json_t *rq = request("{'surface':'pay','actor':'a','context':{}}");
    tg_decision_t d;
    char *got = explain_of(&d, p, rq);
    assert_string_equal(got, "{\"rules\":[],\"limits\":[]}");
    assert_int_equal(d.verdict, TG_SILENCE);
    free(got);
    json_decref(rq);
    tg_policy_destroy(p);
}

/* A long request string is cut at a UTF-8 boundary, and the condition says so. */
static void test_cut_string(void **state) {
    (void)state;
    tg_policy_t *p = load("{'version':'x','surfaces':{'s':{'tier':3,'rules':[{'id':'r',"
                          "'effect':'permit','when':[{'field':'context.t','op':'eq',"
                          "'value':'y'}]}]}}}");
    /* 255 ASCII bytes then "é" (2 bytes): byte 256 is inside the sequence */
    char text[400];
    memset(text, 'a', 255);
    memcpy(text + 255, "\xc3\xa9zzz", 5);
    text[260] = '\0';
    json_t *rq = json_pack("{s:s, s:{s:s}}", "surface", "s", "context", "t", text);
    assert_non_null(rq);
    tg_decision_t d;
    char *got = explain_of(&d, p, rq);
    char want[600];
    (void)snprintf(want, sizeof want, "\"actual\":\"%.255s\",\"cut\":true,\"held\":false", text);
    assert_non_null(strstr(got, want));
    free(got);
    json_decref(rq);
    tg_policy_destroy(p);
}

/* Whole rules only, within TG_EXPLAIN_MAX_BYTES, and the cut is marked. */
static void test_byte_cap(void **state) {
    (void)state;
    char big[1025];
    memset(big, 'v', 1024);
    big[1024] = '\0';
    json_t *rules = json_array();
    for (int r = 0; r < TG_POLICY_MAX_RULES; r++) {
        json_t *when = json_array();
        for (int c = 0; c < TG_POLICY_MAX_CONDITIONS; c++) {
            json_array_append_new(
                when, json_pack("{s:s,s:s,s:s}", "field", "context.t", "op", "ne", "value", big));
        }
        char id[32];
        (void)snprintf(id, sizeof id, "r%d", r);
        json_array_append_new(
            rules, json_pack("{s:s,s:s,s:o}", "id", id, "effect", "permit", "when", when));
    }
    json_t *bundle = json_pack("{s:s,s:{s:{s:i,s:o}}}", "version", "x", "surfaces", "s", "tier", 3,
                               "rules", rules);
    tg_policy_t *p = NULL;
    assert_int_equal(tg_policy_compile(&p, bundle, NULL), TG_OK);
    char other[1025];
    memset(other, 'w', 1024);
    other[1024] = '\0';
    json_t *rq = json_pack("{s:s, s:{s:s}}", "surface", "s", "context", "t", other);
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, rq, NULL), TG_OK);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_decision_t d;
    assert_int_equal(tg_explain_json(&b, &d, p, &f), TG_OK);
    assert_true(b.len <= TG_EXPLAIN_MAX_BYTES);
    assert_int_equal(d.verdict, TG_PERMIT); /* "t" ne big: every rule holds */
    json_t *x = NULL;
    assert_int_equal(
        tg_json_parse(&x, b.data, b.len, &(tg_json_limits_t){1 << 20, 32, 4096, 256}, NULL), TG_OK);
    assert_true(json_is_true(json_object_get(x, "truncated")));
    size_t n = json_array_size(json_object_get(x, "rules"));
    assert_true(n > 0 && n < TG_POLICY_MAX_RULES);
    /* the rules shown are the first ones, in order, each whole */
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(json_object_get(x, "rules"), i);
        char id[32];
        (void)snprintf(id, sizeof id, "r%u", (unsigned)i);
        assert_string_equal(json_string_value(json_object_get(r, "id")), id);
        assert_int_equal(json_array_size(json_object_get(r, "conditions")),
                         TG_POLICY_MAX_CONDITIONS);
    }
    json_decref(x);
    tg_buf_free(&b);
    json_decref(rq);
    json_decref(bundle);
    tg_policy_destroy(p);
}

/* Limits (hand-built tables: the compiler of this branch has no "limits" yet): every limit
 * of the surface with its total, amount and max; null for an uncountable amount; after the
 * first failing one the rest are reported but not evaluated. */
static void test_limits(void **state) {
    (void)state;
    static const tg_sv_t fields[] = {{"amount", 6}};
    static const tg_cond_t conds[] = {{.src = TG_SRC_ACTOR,
                                       .op = TG_OP_EQ,
                                       .value = {.type = TG_VT_STRING, .str = "a", .len = 1},
                                       .field = {"actor", 5}}};
    static const tg_rule_t rules[] = {
        {{"a-may", 5}, "NO_POLICY_VIOLATION", conds, 1, TG_EFFECT_PERMIT}};
    static const tg_limit_t limits[] = {
        {{"daily-spend", 11}, "DAILY_LIMIT_EXCEEDED", 100, 0, TG_LIMIT_SUM},
        {{"hourly-count", 12}, "COUNT_LIMIT_EXCEEDED", 3, 0, TG_LIMIT_COUNT}};
    static const uint32_t surface_limits[] = {0, 1};
    tg_surface_t s;
    memset(&s, 0, sizeof s);
    s.name = (tg_sv_t){"pay", 3};
    s.rules = rules;
    s.n_rules = 1;
    s.tier = 2;
    s.default_effect = TG_EFFECT_DENY;
    s.limits = surface_limits;
    s.n_limits = 2;
    tg_kernel_tables_t t;
    memset(&t, 0, sizeof t);
    memset(t.policy_hash, 7, sizeof t.policy_hash);
    t.surfaces = &s;
    t.n_surfaces = 1;
    t.fields = fields;
    t.n_fields = 1;
    t.limits = limits;
    t.n_limits = 2;
    tg_frame_t f;
    memset(&f, 0, sizeof f);
    memcpy(f.policy_hash, t.policy_hash, sizeof f.policy_hash);
    f.actor = (tg_sv_t){"a", 1};
    f.n_context = 1;
    f.context[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 40.5}};
    f.n_limits = 2;
    f.limits[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 60}};
    f.limits[1] = (tg_frame_slot_t){1, {.type = TG_VT_NUMBER, .num = 2}};

    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_decision_t d;
    assert_int_equal(tg_explain_tables_json(&b, &d, &t, &f), TG_OK);
    assert_int_equal(d.verdict, TG_DENY);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    assert_string_equal(b.data,
                        "{\"rules\":[{\"id\":\"a-may\",\"effect\":\"permit\",\"evaluated\":true,"
                        "\"matched\":true,\"conditions\":[{\"field\":\"actor\",\"op\":\"eq\","
                        "\"value\":\"a\",\"present\":true,\"actual_type\":\"string\",\"actual\":"
                        "\"a\",\"held\":true}]}],\"limits\":["
                        "{\"id\":\"daily-spend\",\"total\":60,\"amount\":40.5,\"max\":100,"
                        "\"held\":false,\"evaluated\":true},"
                        "{\"id\":\"hourly-count\",\"total\":2,\"amount\":1,\"max\":3,"
                        "\"held\":true,\"evaluated\":false}]}");

    /* An amount that cannot be counted is null, and the limit does not hold. */
    f.context[0].v = (tg_value_t){.type = TG_VT_STRING, .str = "5", .len = 1};
    tg_buf_reset(&b);
    assert_int_equal(tg_explain_tables_json(&b, &d, &t, &f), TG_OK);
    assert_non_null(strstr(b.data, "\"total\":60,\"amount\":null,\"max\":100,\"held\":false"));
    tg_buf_free(&b);
}

/* Nesting from depths alone (condition groups arrive with other branches' condition kinds):
 * a condition without a field whose next step is deeper is a group with members. */
static void test_nesting(void **state) {
    (void)state;
    static const tg_cond_t group = {.op = TG_OP_EQ}; /* no field: stands for a group */
    static const tg_cond_t leaf = {.src = TG_SRC_ACTOR,
                                   .op = TG_OP_EQ,
                                   .value = {.type = TG_VT_STRING, .str = "a", .len = 1},
                                   .field = {"actor", 5}};
    static const tg_rule_t r1 = {{"r1", 2}, "NO_POLICY_VIOLATION", NULL, 0, TG_EFFECT_PERMIT};
    static const tg_rule_t r2 = {{"r2", 2}, "NOPE", NULL, 0, TG_EFFECT_DENY};
    static const tg_limit_t lim = {{"l", 1}, "OVER", 3, 0, TG_LIMIT_COUNT};
    const tg_value_t a = {.type = TG_VT_STRING, .str = "a", .len = 1};
#define RULE(r, h)                                                                                 \
    { .kind = TG_EXPLAIN_RULE, .rule = &(r), .held = (h), .evaluated = 1 }
#define COND(r, c, dp, h)                                                                          \
    {                                                                                              \
        .kind = TG_EXPLAIN_COND, .rule = &(r), .cond = &(c), .depth = (dp), .held = (h),           \
        .evaluated = 1, .value = (c).field.ptr != NULL ? &a : NULL                                 \
    }
    const tg_explain_step_t steps[] = {
        RULE(r1, 1),
        COND(r1, group, 1, 1),
        COND(r1, leaf, 2, 1),
        COND(r1, group, 2, 0),
        COND(r1, leaf, 3, 0),
        COND(r1, leaf, 2, 1),
        COND(r1, group, 1, 1),
        COND(r1, leaf, 2, 1),
        COND(r1, leaf, 1, 1),
        RULE(r2, 0),
        COND(r2, group, 1, 0),
        COND(r2, group, 2, 0),
        COND(r2, leaf, 3, 0),
        {.kind = TG_EXPLAIN_LIMIT,
         .limit = &lim,
         .total = 1,
         .amount = 1,
         .held = 1,
         .evaluated = 1},
    };
#undef RULE
#undef COND
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_explain_steps_json(&b, steps, sizeof steps / sizeof steps[0]), TG_OK);
    const char *L = "{'field':'actor','op':'eq','value':'a','present':true,"
                    "'actual_type':'string','actual':'a','held':";
    /* L: a leaf condition up to its held value */
    char buf[4096];
    (void)snprintf(
        buf, sizeof buf,
        "{'rules':[{'id':'r1','effect':'permit','evaluated':true,'matched':true,'conditions':["
        "{'op':'eq','held':true,'conditions':["
        "%strue},"
        "{'op':'eq','held':false,'conditions':[%sfalse}]},"
        "%strue}]},"
        "{'op':'eq','held':true,'conditions':[%strue}]},"
        "%strue}]},"
        "{'id':'r2','effect':'deny','reason':'NOPE','evaluated':true,'matched':false,"
        "'conditions':[{'op':'eq','held':false,'conditions':[{'op':'eq','held':false,"
        "'conditions':[%sfalse}]}]}]}],"
        "'limits':[{'id':'l','total':1,'amount':1,'max':3,'held':true,'evaluated':true}]}",
        L, L, L, L, L, L);
    char *want = unquote(buf);
    assert_string_equal(b.data, want);
    json_t *x = NULL;
    assert_int_equal(tg_json_parse(&x, b.data, b.len, NULL, NULL), TG_OK);
    json_decref(x);
    free(want);
    tg_buf_free(&b);
}

static void test_errors(void **state) {
    (void)state;
    tg_policy_t *p = load(POLICY);
    json_t *rq = request("{'surface':'pay','actor':'a','context':{'amount':5}}");
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, rq, NULL), TG_OK);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_explain_json(NULL, NULL, p, &f), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_explain_json(&b, NULL, NULL, &f), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_explain_json(&b, NULL, p, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_decision_explain_append(&b, p, NULL), TG_ERR_INVALID_ARG);
    /* a buffer too small for the document: TG_ERR_LIMIT, and what it held is kept */
    tg_buf_t small;
    tg_buf_init(&small, 40);
    assert_int_equal(tg_buf_puts(&small, "{\"x\":1"), TG_OK);
    assert_int_equal(tg_decision_explain_append(&small, p, &f), TG_ERR_LIMIT);
    assert_int_equal(small.len, 6);
    assert_string_equal(small.data, "{\"x\":1");
    /* the member form: ,"explain":{...} */
    assert_int_equal(tg_decision_explain_append(&b, p, &f), TG_OK);
    assert_memory_equal(b.data, ",\"explain\":{\"rules\":[", 21);
    assert_string_equal(tg_policy_op_name(TG_OP_NOT_IN), "not_in");
    assert_string_equal(tg_policy_op_name(255), "?");
    tg_buf_free(&small);
    tg_buf_free(&b);
    json_decref(rq);
    tg_policy_destroy(p);
}

int main(void) {
    if (sodium_init() < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document),   cmocka_unit_test(test_before_rules),
        cmocka_unit_test(test_cut_string), cmocka_unit_test(test_byte_cap),
        cmocka_unit_test(test_limits),     cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
