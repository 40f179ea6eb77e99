/* test_kernel.c — the decision FSM: data-driven vectors, determinism properties, purity. */
#include <dirent.h>
#include <math.h>
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
#include "trigguard/clock.h"
#include "trigguard/guard.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"

#include "support/fail_alloc.h"
#include "support/read.h"

/* ---- helpers ------------------------------------------------------------------------ */

#define MAX_VECTORS 1024
#define MAX_POLICIES 16

static const char *src_root(void) {
    const char *s = getenv("TG_SRC");
    return s != NULL && s[0] != '\0' ? s : "../..";
}

static json_t *load_json(const char *path) {
    size_t len = 0;
    char *text = tg_test_read(path, &len);
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = TG_POLICY_MAX_FILE;
    lim.max_keys = 1024;
    json_t *v = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&v, text, len, &lim, &diag);
    free(text);
    if (rc) {
        fail_msg("%s: %s", path, diag.msg);
    }
    return v;
}

typedef struct {
    char path[512];
    tg_policy_t *p;
} policy_cache_t;

static policy_cache_t cache[MAX_POLICIES];
static size_t n_cache;

static const tg_policy_t *policy_for(const char *rel) {
    for (size_t i = 0; i < n_cache; i++) {
        if (strcmp(cache[i].path, rel) == 0) {
            return cache[i].p;
        }
    }
    assert_true(n_cache < MAX_POLICIES);
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", src_root(), rel);
    tg_diag_t diag = {{0}};
    tg_policy_t *p = NULL;
    tg_err_t rc = tg_policy_load_file(&p, full, &diag);
    if (rc) {
        fail_msg("policy %s: %s", full, diag.msg);
    }
    snprintf(cache[n_cache].path, sizeof cache[n_cache].path, "%s", rel);
    cache[n_cache].p = p;
    n_cache++;
    return p;
}

static void cache_clear(void) {
    for (size_t i = 0; i < n_cache; i++) {
        tg_policy_destroy(cache[i].p);
    }
    n_cache = 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted list of the *.json files directly in dir (malloc'd strings). */
static size_t list_vectors(const char *dir, char **names, size_t max) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        fail_msg("cannot open %s", dir);
    }
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0 && n < max) {
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    return n;
}

static int sv_eq_str(tg_sv_t v, const char *s) {
    if (v.ptr == NULL) {
        return s == NULL;
    }
    return s != NULL && strlen(s) == v.len && memcmp(v.ptr, s, v.len) == 0;
}

static int sv_eq(tg_sv_t a, tg_sv_t b) {
    if (a.ptr == NULL || b.ptr == NULL) {
        return a.ptr == b.ptr;
    }
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* Decisions compared by content (reasons and ids may live in different policy copies). */
static int same_decision(const tg_decision_t *a, const tg_decision_t *b) {
    return a->verdict == b->verdict && strcmp(a->reason, b->reason) == 0 &&
           sv_eq(a->rule_id, b->rule_id) && sv_eq(a->subject, b->subject) && a->cause == b->cause &&
           a->tier == b->tier && a->n_states == b->n_states &&
           memcmp(a->states, b->states, a->n_states) == 0 &&
           a->rules_evaluated == b->rules_evaluated;
}

static const json_t *json_path(const json_t *v, const json_t *path) {
    for (size_t i = 0; i < json_array_size(path) && v != NULL; i++) {
        v = json_object_get(v, json_string_value(json_array_get(path, i)));
    }
    return v;
}

/* ---- the data-driven suite ------------------------------------------------------------ */

typedef struct {
    unsigned reasons_seen[32];
    const char *reasons[32];
    unsigned n_reasons;
    unsigned states_seen[TG_STATE__COUNT];
    unsigned causes_seen[TG_CAUSE__COUNT];
    unsigned verdicts_seen[3];
    unsigned errors_seen[TG_ERR__COUNT];
    unsigned ulp_checks;
} coverage_t;

static void note_reason(coverage_t *cov, const char *r) {
    for (unsigned i = 0; i < cov->n_reasons; i++) {
        if (strcmp(cov->reasons[i], r) == 0) {
            cov->reasons_seen[i]++;
            return;
        }
    }
    if (cov->n_reasons < 32) {
        cov->reasons[cov->n_reasons] = r;
        cov->reasons_seen[cov->n_reasons++] = 1;
    }
}

static int reason_covered(const coverage_t *cov, const char *r) {
    for (unsigned i = 0; i < cov->n_reasons; i++) {
        if (strcmp(cov->reasons[i], r) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A vector's "limits_state" ({limit id: running total}, as in `policy test` files): the
 * totals bound into the frame by limit id, ascending, as the pipeline binds them. Absent:
 * nothing is bound (a surface limit then decides SILENCE INVALID_FRAME). */
static int bind_limits_state(tg_frame_t *f, const tg_policy_t *p, const json_t *state,
                             const char *file) {
    f->n_limits = 0;
    if (state == NULL) {
        return 1;
    }
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)state, name, v) {
        uint32_t id;
        if (tg_policy_limit_find(&id, p, name, strlen(name)) != TG_OK || !json_is_number(v) ||
            f->n_limits >= TG_FRAME_MAX_LIMITS) {
            print_error("%s: limits_state: no limit \"%s\" or not a number\n", file, name);
            return 0;
        }
        uint32_t k = f->n_limits++;
        while (k > 0 && f->limits[k - 1].id > id) {
            f->limits[k] = f->limits[k - 1];
            k--;
        }
        f->limits[k] = (tg_frame_slot_t){id, {.type = TG_VT_NUMBER, .num = json_number_value(v)}};
    }
    return 1;
}

/* Runs one vector; returns 0 when it passes, else prints why and returns 1. */
static int run_vector(const char *file, coverage_t *cov) {
    json_t *vec = load_json(file);
    int bad = 0;
    const json_t *pol = json_object_get(vec, "policy");
    const json_t *req = json_object_get(vec, "request");
    const json_t *exp = json_object_get(vec, "expect");
    if (!json_is_string(pol) || req == NULL || !json_is_object(exp)) {
        print_error("%s: needs policy (path), request and expect\n", file);
        json_decref(vec);
        return 1;
    }
    const tg_policy_t *p = policy_for(json_string_value(pol));

    /* Boundary vectors state which ulp they sit on; check the literal really is there. */
    const json_t *ulps = json_object_get(vec, "ulp");
    for (size_t i = 0; i < json_array_size(ulps); i++) {
        const json_t *u = json_array_get(ulps, i);
        const json_t *v = json_path(req, json_object_get(u, "path"));
        double of = json_number_value(json_object_get(u, "of"));
        int upward = strcmp(json_string_value(json_object_get(u, "direction")), "up") == 0;
        double want = nextafter(of, upward ? INFINITY : -INFINITY);
        if (!json_is_number(v) || json_number_value(v) != want || json_number_value(v) == of) {
            print_error("%s: ulp check: value is not one ulp %s %.17g\n", file,
                        upward ? "above" : "below", of);
            bad = 1;
        }
        cov->ulp_checks++;
    }

    tg_frame_t f;
    tg_request_meta_t meta;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_frame_from_request(&f, &meta, p, req, &diag);
    const json_t *want_err = json_object_get(exp, "error");
    if (want_err != NULL) {
        const json_t *contains = json_object_get(exp, "message_contains");
        if (strcmp(tg_err_name(rc), json_string_value(want_err)) != 0) {
            print_error("%s: expected %s, got %s (%s)\n", file, json_string_value(want_err),
                        tg_err_name(rc), diag.msg);
            bad = 1;
        } else if (contains != NULL && strstr(diag.msg, json_string_value(contains)) == NULL) {
            print_error("%s: message \"%s\" lacks \"%s\"\n", file, diag.msg,
                        json_string_value(contains));
            bad = 1;
        }
        if ((unsigned)rc < TG_ERR__COUNT) {
            cov->errors_seen[rc]++;
        }
        json_decref(vec);
        return bad;
    }
    if (rc) {
        print_error("%s: frame: %s: %s\n", file, tg_err_name(rc), diag.msg);
        json_decref(vec);
        return 1;
    }
    if (!bind_limits_state(&f, p, json_object_get(vec, "limits_state"), file)) {
        json_decref(vec);
        return 1;
    }
    /* "at" (RFC 3339): the decision's instant, for time.* conditions; absent = none */
    const json_t *at = json_object_get(vec, "at");
    if (at != NULL &&
        (!json_is_string(at) || tg_time_parse_rfc3339_ms(&f.now_ms, json_string_value(at),
                                                         json_string_length(at)) != TG_OK)) {
        print_error("%s: \"at\" is not an RFC 3339 date-time\n", file);
        json_decref(vec);
        return 1;
    }
    f.has_now = at != NULL;
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    const char *want_dec = json_string_value(json_object_get(exp, "decision"));
    const char *want_reason = json_string_value(json_object_get(exp, "reason"));
    const json_t *want_rule = json_object_get(exp, "rule");
    const json_t *want_in = json_object_get(exp, "decided_in");
    const json_t *want_by = json_object_get(exp, "decided_by");
    const json_t *want_subject = json_object_get(exp, "subject");
    const char *got_in = tg_state_name((tg_state_t)d.states[d.n_states - 1]);
    if (want_dec == NULL || strcmp(tg_verdict_name(d.verdict), want_dec) != 0 ||
        want_reason == NULL || strcmp(d.reason, want_reason) != 0 ||
        !sv_eq_str(d.rule_id, json_is_string(want_rule) ? json_string_value(want_rule) : NULL) ||
        (want_in != NULL && strcmp(got_in, json_string_value(want_in)) != 0) ||
        (want_by != NULL && strcmp(tg_cause_name(d.cause), json_string_value(want_by)) != 0) ||
        (want_subject != NULL && !sv_eq_str(d.subject, json_string_value(want_subject)))) {
        print_error(
            "%s: expected %s %s rule %s in %s by %s subject %s; got %s %s rule %.*s in %s "
            "by %s subject %.*s\n",
            file, want_dec, want_reason,
            json_is_string(want_rule) ? json_string_value(want_rule) : "-",
            want_in ? json_string_value(want_in) : "*", want_by ? json_string_value(want_by) : "*",
            want_subject ? json_string_value(want_subject) : "*", tg_verdict_name(d.verdict),
            d.reason, (int)d.rule_id.len, d.rule_id.ptr ? d.rule_id.ptr : "-", got_in,
            tg_cause_name(d.cause), (int)d.subject.len, d.subject.ptr ? d.subject.ptr : "-");
        bad = 1;
    }
    /* The states entered are a prefix of the FSM, in order, starting at RECEIVED. */
    for (unsigned i = 0; i < d.n_states; i++) {
        if (d.states[i] != i) {
            print_error("%s: trace state %u is %s\n", file, i,
                        tg_state_name((tg_state_t)d.states[i]));
            bad = 1;
        }
    }
    /* The JSON rendering says the same thing. */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_decision_json_opts_t opts = {NULL, NULL, NULL, 0, 1};
    assert_int_equal(tg_decision_to_json(&b, &d, p, &f, &opts), TG_OK);
    json_t *out = json_loads(b.data, 0, NULL);
    assert_non_null(out);
    assert_string_equal(json_string_value(json_object_get(out, "decision")),
                        tg_verdict_name(d.verdict));
    assert_string_equal(json_string_value(json_object_get(out, "reason_code")), d.reason);
    assert_string_equal(json_string_value(json_object_get(out, "enforcement")),
                        d.verdict == TG_PERMIT ? "EXECUTED" : "BLOCKED");
    assert_int_equal(json_array_size(json_object_get(json_object_get(out, "trace"), "states")),
                     d.n_states);
    json_decref(out);
    tg_buf_free(&b);

    note_reason(cov, d.reason);
    cov->states_seen[d.states[d.n_states - 1]]++;
    cov->causes_seen[d.cause]++;
    cov->verdicts_seen[d.verdict]++;
    json_decref(vec);
    return bad;
}

static void test_vectors(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/unit/vectors/kernel", src_root());
    char *names[MAX_VECTORS];
    size_t n = list_vectors(dir, names, MAX_VECTORS);
    coverage_t cov;
    memset(&cov, 0, sizeof cov);
    unsigned failed = 0;
    for (size_t i = 0; i < n; i++) {
        char file[2048];
        snprintf(file, sizeof file, "%s/%s", dir, names[i]);
        failed += (unsigned)run_vector(file, &cov);
        free(names[i]);
    }
    print_message("kernel vectors: %zu run, %u failed, %u ulp boundaries checked\n", n, failed,
                  cov.ulp_checks);
    assert_int_equal(failed, 0);
    assert_true(n >= 200);
    assert_true(cov.ulp_checks >= 20);

    /* Every reason code the kernel itself produces for a decision on a valid frame. */
    static const char *const reasons[] = {
        "MISSING_CONTEXT",         "UNKNOWN_SIGNAL",      "INVALID_SIGNAL",
        "MISSING_SIGNAL",          "SURFACE_FROZEN",      "ACTOR_NOT_AUTHORIZED",
        "RISK_THRESHOLD_EXCEEDED", "NO_POLICY_VIOLATION", "NO_MATCHING_POLICY",
        "HIGH_RISK_SPEND",         "POLICY_DENY"};
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++) {
        if (!reason_covered(&cov, reasons[i])) {
            fail_msg("no vector produces %s", reasons[i]);
        }
    }
    /* Every terminal state and every cause except the frame guard (tested below). */
    assert_true(cov.states_seen[TG_STATE_RECEIVED] > 0);
    assert_true(cov.states_seen[TG_STATE_VALIDATED] > 0);
    assert_true(cov.states_seen[TG_STATE_CLASSIFIED] > 0);
    assert_true(cov.states_seen[TG_STATE_RULES_EVALUATED] > 0);
    for (int c = TG_CAUSE_CONTEXT; c < TG_CAUSE__COUNT; c++) {
        if (cov.causes_seen[c] == 0) {
            fail_msg("no vector is decided by cause %s", tg_cause_name((tg_cause_t)c));
        }
    }
    assert_true(cov.verdicts_seen[TG_PERMIT] > 0 && cov.verdicts_seen[TG_DENY] > 0 &&
                cov.verdicts_seen[TG_SILENCE] > 0);
    assert_true(cov.errors_seen[TG_ERR_REQUEST_INVALID] > 0);
    assert_true(cov.errors_seen[TG_ERR_UNKNOWN_SURFACE] > 0);
    cache_clear();
}

/* ---- properties ----------------------------------------------------------------------- */

static const char SPEC_REQUEST[] =
    "{\"surface\":\"payments.charge\",\"action\":\"transfer_funds\",\"actor\":\"agent.billing\","
    "\"context\":{\"amount\":2500,\"currency\":\"USD\"},"
    "\"signals\":{\"riskScore\":0.12,\"rsdSpike\":false},\"idempotency_key\":\"tx_9921\"}";

static json_t *parse_text(const char *text) {
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, text, strlen(text), NULL, NULL), TG_OK);
    return v;
}

static void test_property_same_frame_1e5(void **state) {
    (void)state;
    const tg_policy_t *p = policy_for("examples/policy.json");
    const char *requests[] = {
        SPEC_REQUEST,
        "{\"surface\":\"payments.charge\",\"actor\":\"agent.billing\",\"context\":{\"amount\":"
        "20000,\"currency\":\"USD\"},\"signals\":{\"riskScore\":0.2}}",
        "{\"surface\":\"payments.charge\",\"actor\":\"agent.billing\",\"context\":{}}",
        "{\"surface\":\"example\",\"signals\":{\"riskScore\":0.81}}"};
    for (size_t r = 0; r < sizeof requests / sizeof requests[0]; r++) {
        json_t *req = parse_text(requests[r]);
        tg_frame_t f;
        assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
        tg_decision_t first, d;
        tg_kernel_decide(&first, tg_policy_tables(p), &f);
        unsigned long diffs = 0;
        for (int i = 0; i < 100000; i++) {
            tg_kernel_decide(&d, tg_policy_tables(p), &f);
            diffs += !same_decision(&first, &d) || d.reason != first.reason;
        }
        assert_int_equal(diffs, 0);
        json_decref(req);
    }
    cache_clear();
}

/* Rebuilds v with every object's members inserted in reverse order: a different text,
 * the same canonical form. */
static json_t *reversed_copy(const json_t *v) {
    if (json_is_object(v)) {
        size_t n = json_object_size(v);
        const char **keys = malloc((n ? n : 1) * sizeof *keys);
        size_t i = 0;
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)(uintptr_t)v, k, m) { keys[i++] = k; }
        json_t *o = json_object();
        while (i > 0) {
            i--;
            json_object_set_new(o, keys[i], reversed_copy(json_object_get(v, keys[i])));
        }
        free(keys);
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_array_append_new(a, reversed_copy(json_array_get(v, i)));
        }
        return a;
    }
    return json_deep_copy(v);
}

static void test_property_two_compiled_copies(void **state) {
    (void)state;
    const char *bundles[] = {"examples/policy.json", "tests/unit/vectors/kernel/policies/fsm.json",
                             "tests/unit/vectors/kernel/policies/operators.json",
                             "tests/unit/vectors/kernel/policies/lang.json"};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/unit/vectors/kernel", src_root());
    char *names[MAX_VECTORS];
    size_t n = list_vectors(dir, names, MAX_VECTORS);
    unsigned compared = 0;
    for (size_t b = 0; b < sizeof bundles / sizeof bundles[0]; b++) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", src_root(), bundles[b]);
        json_t *tree = load_json(full);
        json_t *rev = reversed_copy(tree);
        tg_policy_t *a = NULL, *c = NULL;
        assert_int_equal(tg_policy_compile(&a, tree, NULL), TG_OK);
        assert_int_equal(tg_policy_compile(&c, rev, NULL), TG_OK);
        assert_memory_equal(tg_policy_hash(a), tg_policy_hash(c), 32);
        for (size_t i = 0; i < n; i++) {
            char file[2048];
            snprintf(file, sizeof file, "%s/%s", dir, names[i]);
            json_t *vec = load_json(file);
            if (strcmp(json_string_value(json_object_get(vec, "policy")), bundles[b]) == 0) {
                const json_t *req = json_object_get(vec, "request");
                tg_frame_t fa, fc;
                tg_err_t ra = tg_frame_from_request(&fa, NULL, a, req, NULL);
                tg_err_t rcc = tg_frame_from_request(&fc, NULL, c, req, NULL);
                assert_int_equal(ra, rcc);
                if (ra == TG_OK) {
                    tg_decision_t da, dc, dx;
                    tg_kernel_decide(&da, tg_policy_tables(a), &fa);
                    tg_kernel_decide(&dc, tg_policy_tables(c), &fc);
                    tg_kernel_decide(&dx, tg_policy_tables(c),
                                     &fa); /* frame from copy A, policy copy C */
                    if (!same_decision(&da, &dc) || !same_decision(&da, &dx)) {
                        fail_msg("%s: copies disagree", names[i]);
                    }
                    compared++;
                }
            }
            json_decref(vec);
        }
        tg_policy_destroy(a);
        tg_policy_destroy(c);
        json_decref(tree);
        json_decref(rev);
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    print_message("two-copy property: %u decisions compared\n", compared);
    assert_true(compared >= 150);
}

/* ---- purity: no allocation inside the kernel ------------------------------------------ */

static void test_kernel_never_allocates(void **state) {
    (void)state;
    /* The spy works: an armed allocation from this file fails and is counted. The call
     * goes through a volatile pointer so the compiler cannot elide it. */
    void *(*volatile alloc_fn)(size_t) = malloc;
    long seen = tg_fail_alloc_seen();
    tg_fail_alloc_all(true);
    void *probe = alloc_fn(16);
    tg_fail_alloc_all(false);
    assert_null(probe);
    assert_int_equal(tg_fail_alloc_seen() - seen, 1);
    seen = tg_fail_alloc_seen();

    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/unit/vectors/kernel", src_root());
    char *names[MAX_VECTORS];
    size_t n = list_vectors(dir, names, MAX_VECTORS);
    unsigned decided = 0;
    for (size_t i = 0; i < n; i++) {
        char file[2048];
        snprintf(file, sizeof file, "%s/%s", dir, names[i]);
        json_t *vec = load_json(file);
        const tg_policy_t *p = policy_for(json_string_value(json_object_get(vec, "policy")));
        tg_frame_t f;
        if (tg_frame_from_request(&f, NULL, p, json_object_get(vec, "request"), NULL) == TG_OK) {
            tg_decision_t d;
            tg_fail_alloc_all(true);
            tg_kernel_decide(&d, tg_policy_tables(p), &f);
            tg_kernel_decide(&d, tg_policy_tables(p), NULL);
            tg_kernel_decide(&d, NULL, &f);
            tg_fail_alloc_all(false);
            decided++;
        }
        json_decref(vec);
        free(names[i]);
    }
    assert_int_equal(tg_fail_alloc_seen() - seen, 0);
    assert_true(decided >= 150);
    cache_clear();
}

/* ---- guards: frames that do not belong to the policy ---------------------------------- */

static void test_frame_guards(void **state) {
    (void)state;
    const tg_policy_t *p = policy_for("examples/policy.json");
    const tg_policy_t *other = policy_for("tests/unit/vectors/kernel/policies/fsm.json");
    json_t *req = parse_text(SPEC_REQUEST);
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    tg_decision_t d;

    tg_kernel_decide(NULL, tg_policy_tables(p), &f); /* no output: nothing happens */

    tg_kernel_decide(&d, NULL, &f);
    assert_int_equal(d.verdict, TG_SILENCE);
    assert_string_equal(d.reason, "INVALID_FRAME");
    assert_int_equal(d.cause, TG_CAUSE_FRAME);
    assert_int_equal(d.n_states, 1);

    tg_kernel_decide(&d, tg_policy_tables(p), NULL);
    assert_string_equal(d.reason, "INVALID_FRAME");

    tg_kernel_decide(&d, tg_policy_tables(other), &f);
    assert_int_equal(d.verdict, TG_SILENCE);
    assert_string_equal(d.reason, "POLICY_MISMATCH");

    tg_frame_t g = f;
    g.surface = (uint32_t)tg_policy_surface_count(p);
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");

    g = f;
    g.n_signals = TG_FRAME_MAX_SIGNALS + 1;
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");

    g = f;
    g.n_context = TG_FRAME_MAX_CONTEXT + 1;
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");

    g = f;
    g.signals[0].id = (uint32_t)tg_policy_signal_count(p);
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");

    g = f;
    g.context[0].id = 100000;
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");

    /* The untouched frame still decides. */
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    assert_int_equal(d.verdict, TG_PERMIT);

    /* A zeroed decision never authorizes. */
    tg_decision_t zero;
    memset(&zero, 0, sizeof zero);
    assert_int_equal(zero.verdict, TG_SILENCE);
    json_decref(req);
    cache_clear();
}

/* ---- verified facts: tenant, principal.subject, principal.issuer, principal.claims ---- */

/* One rule per surface, each on one fact; every surface denies by default. */
static const char FACTS_POLICY[] =
    "{\"version\":\"1\",\"surfaces\":{"
    "\"t\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"tenant\",\"op\":\"eq\",\"value\":\"acme\"}]}]},"
    "\"s\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.subject\",\"op\":\"in\",\"value\":[\"ci-deploy\",\"ops\"]}]}]},"
    "\"i\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.issuer\",\"op\":\"eq\",\"value\":\"https://idp\"}]}]},"
    "\"noiss\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.issuer\",\"op\":\"exists\",\"value\":false}]}]},"
    "\"ref\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.claims.ref\",\"op\":\"eq\",\"value\":\"refs/heads/main\"},"
    "{\"field\":\"principal.claims.environment\",\"op\":\"eq\",\"value\":\"production\"}]}]},"
    "\"num\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.claims.level\",\"op\":\"gte\",\"value\":3}]}]},"
    "\"bool\":{\"tier\":1,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"principal.claims.admin\",\"op\":\"eq\",\"value\":true}]}]}}}";

static tg_verdict_t facts_decide(const tg_policy_t *p, const char *surface, const char *tenant,
                                 const tg_principal_t *pr, const char *body_context) {
    char text[512];
    snprintf(text, sizeof text, "{\"surface\":\"%s\"%s%s}", surface,
             body_context ? ",\"context\":" : "", body_context ? body_context : "");
    json_t *req = parse_text(text);
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    /* The body never fills a fact. */
    assert_null(f.tenant.ptr);
    assert_null(f.principal_subject.ptr);
    assert_int_equal(f.n_claims, 0);
    tg_pipeline_bind_facts(&f, p, tenant, tenant ? strlen(tenant) : 0, pr);
    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    json_decref(req);
    return d.verdict;
}

static tg_claim_t claim_str(const char *name, const char *v) {
    tg_claim_t c;
    memset(&c, 0, sizeof c);
    c.name = (tg_guard_str_t){name, strlen(name)};
    c.value.type = TG_VT_STRING;
    c.value.str = v;
    c.value.len = (uint32_t)strlen(v);
    return c;
}

static void test_principal_facts(void **state) {
    (void)state;
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_policy_load_text(&p, FACTS_POLICY, strlen(FACTS_POLICY), &diag), TG_OK);
    /* Claim names are interned like context fields: ids in first-seen order. */
    assert_int_equal(tg_policy_claim_count(p), 4);
    assert_null(tg_policy_claim_name(p, 4).ptr);
    size_t seen = 0;
    for (uint32_t i = 0; i < 4; i++) {
        tg_sv_t n = tg_policy_claim_name(p, i);
        assert_non_null(n.ptr);
        seen += strcmp(n.ptr, "ref") == 0 || strcmp(n.ptr, "environment") == 0 ||
                strcmp(n.ptr, "level") == 0 || strcmp(n.ptr, "admin") == 0;
    }
    assert_int_equal(seen, 4);

    tg_principal_t token; /* a tokens-file principal: no issuer, no claims */
    memset(&token, 0, sizeof token);
    token.subject = (tg_guard_str_t){"ci-deploy", 9};
    tg_principal_t other = token;
    other.subject = (tg_guard_str_t){"acme:0123abcd", 13};
    other.subject_derived = true;

    /* tenant */
    assert_int_equal(facts_decide(p, "t", "acme", &token, NULL), TG_PERMIT);
    assert_int_equal(facts_decide(p, "t", "beta", &token, NULL), TG_DENY);
    assert_int_equal(facts_decide(p, "t", NULL, NULL, "{\"tenant\":\"acme\"}"), TG_DENY);
    /* principal.subject */
    assert_int_equal(facts_decide(p, "s", "acme", &token, NULL), TG_PERMIT);
    assert_int_equal(facts_decide(p, "s", "acme", &other, NULL), TG_DENY);
    assert_int_equal(facts_decide(p, "s", "acme", NULL, NULL), TG_DENY);
    /* principal.issuer: absent for a token (exists false holds, eq does not) */
    assert_int_equal(facts_decide(p, "i", "acme", &token, NULL), TG_DENY);
    assert_int_equal(facts_decide(p, "noiss", "acme", &token, NULL), TG_PERMIT);
    tg_principal_t oidc = token;
    oidc.issuer = (tg_guard_str_t){"https://idp", 11};
    assert_int_equal(facts_decide(p, "i", "acme", &oidc, NULL), TG_PERMIT);
    assert_int_equal(facts_decide(p, "noiss", "acme", &oidc, NULL), TG_DENY);

    /* principal.claims: both verified claims, whatever the body says */
    tg_claim_t cl[4];
    cl[0] = claim_str("environment", "production");
    cl[1] = claim_str("ref", "refs/heads/main");
    oidc.claims = cl;
    oidc.claims_count = 2;
    assert_int_equal(facts_decide(p, "ref", "acme", &oidc, NULL), TG_PERMIT);
    assert_int_equal(facts_decide(p, "ref", "acme", &token,
                                  "{\"ref\":\"refs/heads/main\",\"environment\":\"production\"}"),
                     TG_DENY);
    cl[1] = claim_str("ref", "refs/heads/dev");
    assert_int_equal(facts_decide(p, "ref", "acme", &oidc, NULL), TG_DENY);
    oidc.claims_count = 1; /* environment only */
    assert_int_equal(facts_decide(p, "ref", "acme", &oidc, NULL), TG_DENY);

    /* typed: a number claim compares as a number, "3" is not 3; a bool is a bool */
    memset(&cl[0], 0, sizeof cl[0]);
    cl[0].name = (tg_guard_str_t){"level", 5};
    cl[0].value.type = TG_VT_NUMBER;
    cl[0].value.num = 3;
    oidc.claims_count = 1;
    assert_int_equal(facts_decide(p, "num", "acme", &oidc, NULL), TG_PERMIT);
    cl[0].value.num = 2.5;
    assert_int_equal(facts_decide(p, "num", "acme", &oidc, NULL), TG_DENY);
    cl[0] = claim_str("level", "3");
    assert_int_equal(facts_decide(p, "num", "acme", &oidc, NULL), TG_DENY);
    memset(&cl[0], 0, sizeof cl[0]);
    cl[0].name = (tg_guard_str_t){"admin", 5};
    cl[0].value.type = TG_VT_BOOL;
    cl[0].value.boolean = 1;
    assert_int_equal(facts_decide(p, "bool", "acme", &oidc, NULL), TG_PERMIT);
    cl[0] = claim_str("admin", "true");
    assert_int_equal(facts_decide(p, "bool", "acme", &oidc, NULL), TG_DENY);
    /* a claim that is not a scalar is not bound at all */
    memset(&cl[0], 0, sizeof cl[0]);
    cl[0].name = (tg_guard_str_t){"admin", 5};
    cl[0].value.type = TG_VT_OBJECT;
    json_t *req = parse_text("{\"surface\":\"bool\"}");
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    tg_pipeline_bind_facts(&f, p, "acme", 4, &oidc);
    assert_int_equal(f.n_claims, 0);

    /* frame binding: slots sorted by claim id, only the names the policy uses */
    cl[0] = claim_str("unused", "x");
    cl[1] = claim_str("ref", "refs/heads/main");
    cl[2] = claim_str("environment", "production");
    cl[3] = claim_str("level", "1");
    oidc.claims_count = 4;
    tg_pipeline_bind_facts(&f, p, "acme", 4, &oidc);
    assert_int_equal(f.n_claims, 3);
    for (uint32_t i = 1; i < f.n_claims; i++) {
        assert_true(f.claims[i - 1].id < f.claims[i].id);
    }
    assert_true(f.tenant.len == 4 && memcmp(f.tenant.ptr, "acme", 4) == 0);
    assert_ptr_equal(f.principal_issuer.ptr, oidc.issuer.ptr);

    /* the kernel stays allocation-free with facts bound */
    long before = tg_fail_alloc_seen();
    tg_decision_t d;
    tg_fail_alloc_all(true);
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    tg_fail_alloc_all(false);
    assert_int_equal(tg_fail_alloc_seen() - before, 0);

    /* frame guards: claim ids and counts are checked like the others */
    tg_frame_t g = f;
    g.n_claims = TG_FRAME_MAX_CLAIMS + 1;
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");
    g = f;
    g.claims[0].id = (uint32_t)tg_policy_claim_count(p);
    tg_kernel_decide(&d, tg_policy_tables(p), &g);
    assert_string_equal(d.reason, "INVALID_FRAME");
    json_decref(req);
    tg_policy_destroy(p);
}

/* Hand-built tables: the kernel's limit step and tg_kernel_explain, independent of how a
 * compiler writes limits. One tier-2 surface, a deny rule on context.amount > 1000, a permit
 * rule on actor "a", a sum limit over context.amount (max 100) and a count limit (max 3). */
typedef struct explain_log {
    int rules, conds, limits;
    int held[16];
    int evaluated[16];
    int n;
    double last_total, last_amount;
} explain_log_t;

static void explain_record(void *ud, const tg_explain_step_t *st) {
    explain_log_t *x = ud;
    if (st->kind == TG_EXPLAIN_RULE) {
        x->rules++;
    } else if (st->kind == TG_EXPLAIN_COND) {
        x->conds++;
        assert_non_null(st->cond);
        assert_int_equal(st->depth, 1);
    } else {
        x->limits++;
        assert_non_null(st->limit);
        x->last_total = st->total;
        x->last_amount = st->amount;
    }
    if (x->n < 16) {
        x->held[x->n] = st->held;
        x->evaluated[x->n] = st->evaluated;
        x->n++;
    }
}

static void test_limits_and_explain(void **state) {
    (void)state;
    static const tg_sv_t fields[] = {{"amount", 6}};
    static const tg_cond_t deny_conds[] = {{.src = TG_SRC_CONTEXT,
                                            .op = TG_OP_GT,
                                            .id = 0,
                                            .value = {.type = TG_VT_NUMBER, .num = 1000},
                                            .field = {"context.amount", 14}}};
    static const tg_cond_t permit_conds[] = {{.src = TG_SRC_ACTOR,
                                              .op = TG_OP_EQ,
                                              .value = {.type = TG_VT_STRING, .str = "a", .len = 1},
                                              .field = {"actor", 5}}};
    static const tg_rule_t rules[] = {
        {{"big", 3}, "TOO_BIG", deny_conds, 1, TG_EFFECT_DENY},
        {{"a-may", 5}, "NO_POLICY_VIOLATION", permit_conds, 1, TG_EFFECT_PERMIT}};
    static const tg_limit_t limits[] = {
        {{"daily-spend", 11}, "DAILY_LIMIT_EXCEEDED", 100, 0, TG_LIMIT_SUM},
        {{"hourly-count", 12}, "COUNT_LIMIT_EXCEEDED", 3, 0, TG_LIMIT_COUNT}};
    static const uint32_t surface_limits[] = {0, 1};
    tg_surface_t s;
    memset(&s, 0, sizeof s);
    s.name = (tg_sv_t){"pay", 3};
    s.rules = rules;
    s.n_rules = 2;
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
    f.context[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 40}};
    f.n_limits = 2;
    f.limits[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 60}};
    f.limits[1] = (tg_frame_slot_t){1, {.type = TG_VT_NUMBER, .num = 2}};
    tg_decision_t d;

    /* 60 + 40 = 100 <= 100 and 2 + 1 = 3 <= 3: the cap itself is allowed. */
    tg_kernel_decide(&d, &t, &f);
    assert_int_equal(d.verdict, TG_PERMIT);
    assert_string_equal(d.reason, "NO_POLICY_VIOLATION");

    /* One more unit over either limit: DENY with its reason, the limit named. */
    f.context[0].v.num = 40.5;
    tg_kernel_decide(&d, &t, &f);
    assert_int_equal(d.verdict, TG_DENY);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    assert_int_equal(d.cause, TG_CAUSE_LIMIT);
    assert_memory_equal(d.subject.ptr, "daily-spend", 11);
    assert_null(d.rule_id.ptr);
    f.context[0].v.num = 40;
    f.limits[1].v.num = 3;
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "COUNT_LIMIT_EXCEEDED");
    f.limits[1].v.num = 2;

    /* Amounts that cannot be counted are never free: negative, absent, not a number. */
    f.context[0].v.num = -5;
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    f.context[0].v = (tg_value_t){.type = TG_VT_STRING, .str = "5", .len = 1};
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    f.context[0].v = (tg_value_t){.type = TG_VT_NUMBER, .num = 40};
    f.limits[0].v.num = NAN; /* a corrupt total */
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    f.limits[0].v.num = 60;

    /* An unbound total is not zero: SILENCE INVALID_FRAME. A total for a limit id the
     * tables do not have is a malformed frame. */
    f.n_limits = 1;
    tg_kernel_decide(&d, &t, &f);
    assert_int_equal(d.verdict, TG_SILENCE);
    assert_string_equal(d.reason, "INVALID_FRAME");
    f.n_limits = 2;
    f.limits[1].id = 2;
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "INVALID_FRAME");
    f.limits[1].id = 1;

    /* Limits only turn PERMITs into DENY: a deny rule keeps its reason, whatever the totals. */
    f.context[0].v.num = 5000;
    tg_kernel_decide(&d, &t, &f);
    assert_string_equal(d.reason, "TOO_BIG");

    /* Explain: every rule and condition, then the limits, with what the kernel examined. */
    explain_log_t x;
    memset(&x, 0, sizeof x);
    tg_kernel_explain(&d, &t, &f, explain_record, &x);
    assert_string_equal(d.reason, "TOO_BIG");
    assert_int_equal(x.rules, 2);
    assert_int_equal(x.conds, 2);
    assert_int_equal(x.limits, 2);
    /* steps: rule big (held, evaluated), its cond (held), rule a-may (held, not examined:
     * the deny decided first), its cond, then two limits (not examined after a DENY). */
    assert_int_equal(x.held[0], 1);
    assert_int_equal(x.evaluated[0], 1);
    assert_int_equal(x.held[2], 1);
    assert_int_equal(x.evaluated[2], 0);
    assert_int_equal(x.evaluated[4], 0);
    assert_int_equal(x.held[4], 0); /* 60 + 5000 > 100 */
    assert_int_equal(x.evaluated[5], 0);

    f.context[0].v.num = 50;
    memset(&x, 0, sizeof x);
    tg_kernel_explain(&d, &t, &f, explain_record, &x);
    assert_string_equal(d.reason, "DAILY_LIMIT_EXCEEDED");
    assert_int_equal(x.evaluated[0], 1);
    assert_int_equal(x.held[0], 0);
    assert_int_equal(x.evaluated[2], 1);
    assert_int_equal(x.held[2], 1);
    assert_int_equal(x.evaluated[4], 1); /* the sum limit failed ... */
    assert_int_equal(x.held[4], 0);
    assert_int_equal(x.evaluated[5], 0); /* ... so the count limit was never reached */
    assert_true(x.last_total == 2.0 && x.last_amount == 1.0);

    /* Decided before the rules: explain reports nothing. */
    f.policy_hash[0] ^= 1;
    memset(&x, 0, sizeof x);
    tg_kernel_explain(&d, &t, &f, explain_record, &x);
    assert_string_equal(d.reason, "POLICY_MISMATCH");
    assert_int_equal(x.n, 0);
    tg_kernel_explain(NULL, NULL, NULL, NULL, NULL); /* NULL-safe */
}

/* ---- ESCALATE (SPEC §11.2): deny > escalate > permit, in every order ------------------ */

typedef struct esc_log {
    int n;
    int held[8], evaluated[8];
    int limits_evaluated;
} esc_log_t;

static void esc_record(void *ud, const tg_explain_step_t *st) {
    esc_log_t *x = ud;
    if (st->kind == TG_EXPLAIN_RULE && x->n < 8) {
        x->held[x->n] = st->held;
        x->evaluated[x->n] = st->evaluated;
        x->n++;
    } else if (st->kind == TG_EXPLAIN_LIMIT) {
        x->limits_evaluated += st->evaluated;
    }
}

static void test_escalate_precedence(void **state) {
    (void)state;
    /* Five rules: a deny, two escalates, two permits; rule k holds when context field k is
     * true. Every order of the five and every set of holding rules is decided and compared
     * with the rule as SPEC §11.2 states it. A count limit (max 0) would deny any PERMIT that
     * reaches it: an ESCALATE must never reach the limits. */
    static const tg_sv_t fields[] = {{"d", 1}, {"e1", 2}, {"e2", 2}, {"p1", 2}, {"p2", 2}};
    static tg_cond_t conds[5];
    static const struct {
        const char *id, *reason;
        tg_effect_t effect;
    } defs[5] = {{"d", "NO_WAY", TG_EFFECT_DENY},
                 {"e1", "APPROVAL_REQUIRED", TG_EFFECT_ESCALATE},
                 {"e2", "TWO_PERSON", TG_EFFECT_ESCALATE},
                 {"p1", "NO_POLICY_VIOLATION", TG_EFFECT_PERMIT},
                 {"p2", "NO_POLICY_VIOLATION", TG_EFFECT_PERMIT}};
    for (uint32_t k = 0; k < 5; k++) {
        conds[k] = (tg_cond_t){.src = TG_SRC_CONTEXT,
                               .op = TG_OP_EQ,
                               .id = k,
                               .value = {.type = TG_VT_BOOL, .boolean = 1},
                               .field = fields[k]};
    }
    static const tg_limit_t limits[] = {
        {{"none", 4}, "COUNT_LIMIT_EXCEEDED", 0, 0, TG_LIMIT_COUNT}};
    static const uint32_t surface_limits[] = {0};
    tg_rule_t rules[5];
    tg_surface_t s;
    memset(&s, 0, sizeof s);
    s.name = (tg_sv_t){"deploy", 6};
    s.rules = rules;
    s.n_rules = 5;
    s.tier = 2;
    s.default_effect = TG_EFFECT_DENY;
    s.limits = surface_limits;
    s.n_limits = 1;
    tg_kernel_tables_t t;
    memset(&t, 0, sizeof t);
    memset(t.policy_hash, 3, sizeof t.policy_hash);
    t.surfaces = &s;
    t.n_surfaces = 1;
    t.fields = fields;
    t.n_fields = 5;
    t.limits = limits;
    t.n_limits = 1;
    tg_frame_t f;
    memset(&f, 0, sizeof f);
    memcpy(f.policy_hash, t.policy_hash, sizeof f.policy_hash);
    f.n_limits = 1;
    f.limits[0] = (tg_frame_slot_t){0, {.type = TG_VT_NUMBER, .num = 0}};
    f.n_context = 5;

    int perm[5] = {0, 1, 2, 3, 4};
    int orders = 0, escalates = 0;
    for (;;) {
        for (int i = 0; i < 5; i++) {
            rules[i] = (tg_rule_t){{defs[perm[i]].id, (uint32_t)strlen(defs[perm[i]].id)},
                                   defs[perm[i]].reason,
                                   &conds[perm[i]],
                                   1,
                                   (uint8_t)defs[perm[i]].effect};
        }
        for (unsigned set = 0; set < 32; set++) {
            for (uint32_t k = 0; k < 5; k++) {
                f.context[k] = (tg_frame_slot_t){
                    k, {.type = TG_VT_BOOL, .boolean = (uint8_t)((set >> k) & 1u)}};
            }
            /* The rule as stated: a rule is evaluated unless a deny matched before it, or
             * it is an escalate after a matching escalate, or a permit after a matching
             * escalate or permit; the first matching deny, else escalate, else permit. */
            int deny = -1, esc = -1, permit = -1, evaluated = 0;
            int want_eval[5];
            for (int i = 0; i < 5; i++) {
                tg_effect_t e = defs[perm[i]].effect;
                int ev = deny < 0 && !(e == TG_EFFECT_ESCALATE && esc >= 0) &&
                         !(e == TG_EFFECT_PERMIT && (esc >= 0 || permit >= 0));
                want_eval[i] = ev;
                evaluated += ev;
                if (ev && ((set >> perm[i]) & 1u)) {
                    int *slot = e == TG_EFFECT_DENY       ? &deny
                                : e == TG_EFFECT_ESCALATE ? &esc
                                                          : &permit;
                    *slot = *slot < 0 ? i : *slot;
                }
            }
            tg_decision_t d;
            tg_kernel_decide(&d, &t, &f);
            if (deny >= 0) {
                assert_int_equal(d.verdict, TG_DENY);
                assert_string_equal(d.reason, "NO_WAY");
                assert_true(sv_eq_str(d.rule_id, "d"));
            } else if (esc >= 0) {
                escalates++;
                assert_int_equal(d.verdict, TG_ESCALATE);
                assert_int_equal(d.cause, TG_CAUSE_RULE);
                assert_true(sv_eq_str(d.rule_id, defs[perm[esc]].id));
                assert_string_equal(d.reason, defs[perm[esc]].reason);
                assert_int_equal(d.states[d.n_states - 1], TG_STATE_RULES_EVALUATED);
            } else if (permit >= 0) {
                /* a PERMIT goes on to the limits, whose max 0 denies it */
                assert_int_equal(d.verdict, TG_DENY);
                assert_int_equal(d.cause, TG_CAUSE_LIMIT);
            } else {
                assert_int_equal(d.verdict, TG_DENY);
                assert_int_equal(d.cause, TG_CAUSE_DEFAULT);
            }
            assert_int_equal(d.rules_evaluated, evaluated);
            esc_log_t x;
            memset(&x, 0, sizeof x);
            tg_decision_t e;
            tg_kernel_explain(&e, &t, &f, esc_record, &x);
            assert_true(same_decision(&d, &e));
            assert_int_equal(x.n, 5);
            for (int i = 0; i < 5; i++) {
                assert_int_equal(x.held[i], (set >> perm[i]) & 1u);
                assert_int_equal(x.evaluated[i], want_eval[i]);
            }
            assert_int_equal(x.limits_evaluated, deny < 0 && esc < 0 && permit >= 0);
        }
        orders++;
        /* next permutation (lexicographic) */
        int i = 3;
        while (i >= 0 && perm[i] > perm[i + 1]) {
            i--;
        }
        if (i < 0) {
            break;
        }
        int j = 4;
        while (perm[j] < perm[i]) {
            j--;
        }
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        for (int a = i + 1, b = 4; a < b; a++, b--) {
            tmp = perm[a];
            perm[a] = perm[b];
            perm[b] = tmp;
        }
    }
    assert_int_equal(orders, 120);
    assert_true(escalates > 0);

    /* An effect the kernel does not know never permits: a corrupt table is a SILENCE. */
    rules[0] = (tg_rule_t){{"x", 1}, "NO_POLICY_VIOLATION", NULL, 0, (tg_effect_t)7};
    s.n_rules = 1;
    tg_decision_t d;
    tg_kernel_decide(&d, &t, &f);
    assert_int_equal(d.verdict, TG_SILENCE);
    assert_string_equal(d.reason, "INVALID_FRAME");
    assert_int_equal(d.cause, TG_CAUSE_FRAME);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(tg_verdict_name(TG_PERMIT), "PERMIT");
    assert_string_equal(tg_verdict_name(TG_DENY), "DENY");
    assert_string_equal(tg_verdict_name(TG_SILENCE), "SILENCE");
    assert_string_equal(tg_verdict_name(TG_ESCALATE), "ESCALATE");
    assert_string_equal(tg_verdict_name((tg_verdict_t)77), "SILENCE");
    static const char *const states[] = {"RECEIVED", "VALIDATED", "CLASSIFIED", "SIGNALS_EVALUATED",
                                         "RULES_EVALUATED"};
    for (int i = 0; i < TG_STATE__COUNT; i++) {
        assert_string_equal(tg_state_name((tg_state_t)i), states[i]);
    }
    assert_string_equal(tg_state_name((tg_state_t)9), "UNKNOWN");
    for (int i = 0; i < TG_CAUSE__COUNT; i++) {
        assert_true(strcmp(tg_cause_name((tg_cause_t)i), "unknown") != 0);
    }
    assert_string_equal(tg_cause_name((tg_cause_t)99), "unknown");
}

/* ---- reason codes: one table, one rule ----------------------------------------------- */

static void test_reason_codes(void **state) {
    (void)state;
    /* The texts are the protocol: they travel in every decision, receipt and ledger record. */
    static const char *const texts[TG_REASON__COUNT] = {
        "NO_POLICY_VIOLATION",     "NO_MATCHING_POLICY", "POLICY_DENY",
        "RISK_THRESHOLD_EXCEEDED", "SURFACE_FROZEN",     "ACTOR_NOT_AUTHORIZED",
        "MISSING_CONTEXT",         "UNKNOWN_SIGNAL",     "INVALID_SIGNAL",
        "MISSING_SIGNAL",          "POLICY_MISMATCH",    "INVALID_FRAME",
        "APPROVAL_REQUIRED",       "APPROVAL_DENIED",    "APPROVAL_EXPIRED",
        "INTERNAL_ERROR"};
    for (int i = 0; i < TG_REASON__COUNT; i++) {
        const char *code = tg_reason_code((tg_reason_t)i);
        assert_string_equal(code, texts[i]);
        assert_true(tg_reason_code_valid(code, strlen(code)));
        for (int k = 0; k < i; k++) {
            assert_true(strcmp(code, tg_reason_code((tg_reason_t)k)) != 0);
        }
    }
    assert_string_equal(tg_reason_code(TG_REASON__COUNT), "INTERNAL_ERROR");
    assert_string_equal(tg_reason_code((tg_reason_t)-1), "INTERNAL_ERROR");

    /* The kernel emits the table's own storage, not a copy of the text. */
    tg_decision_t d;
    tg_kernel_decide(&d, NULL, NULL);
    assert_ptr_equal(d.reason, tg_reason_code(TG_REASON_INVALID_FRAME));

    char longest[TG_REASON_MAX + 1];
    memset(longest, 'A', sizeof longest);
    static const char *const valid[] = {"A", "Z", "A1", "A_", "A_B_9", "NO_POLICY_VIOLATION"};
    static const char *const invalid[] = {"",    "a",   "1A",  "_A",      "Ab",
                                          "A-B", "A B", "A.B", "\xc3\x89"};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        assert_true(tg_reason_code_valid(valid[i], strlen(valid[i])));
    }
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        assert_false(tg_reason_code_valid(invalid[i], strlen(invalid[i])));
    }
    assert_true(tg_reason_code_valid(longest, TG_REASON_MAX));
    assert_false(tg_reason_code_valid(longest, TG_REASON_MAX + 1));
    assert_false(tg_reason_code_valid("AB\0C", 4)); /* length is n, not the NUL */
}

int main(void) {
    if (sodium_init() < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_property_same_frame_1e5),
        cmocka_unit_test(test_property_two_compiled_copies),
        cmocka_unit_test(test_kernel_never_allocates),
        cmocka_unit_test(test_frame_guards),
        cmocka_unit_test(test_principal_facts),
        cmocka_unit_test(test_limits_and_explain),
        cmocka_unit_test(test_escalate_precedence),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_reason_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
