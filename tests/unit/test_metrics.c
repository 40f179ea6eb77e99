/* test_metrics.c — the /metrics counters (src/pipeline/metrics.h): surface interning and its
 * cap, label escaping, status and route folding, histograms, and interning from many threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/pipeline/metrics.h"

/* The metrics object is ~100 KB: on the heap, not on a test's stack. */
static tg_metrics_t *new_metrics(void) {
    tg_metrics_t *m = malloc(sizeof *m);
    assert_non_null(m);
    tg_metrics_init(m);
    return m;
}

static char *render(tg_metrics_t *m, tg_buf_t *b) {
    tg_buf_init(b, 0);
    assert_int_equal(tg_metrics_render(b, m), TG_OK);
    return b->data;
}

/* The value of the sample whose text (name and labels) is exactly `series`, or -1. */
static long long sample(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            return atoll(p + n + 1);
        }
    }
    return -1;
}

static int count_lines_with(const char *text, const char *needle) {
    int c = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        c++;
    }
    return c;
}

static void test_surfaces_interned_and_capped(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    char name[32];
    /* More surfaces than the table holds: the first TG_METRICS_SURFACES get a label each,
     * the rest are counted under surface="other" (a policy cannot grow the exposition). */
    int extra = 40;
    for (int i = 0; i < TG_METRICS_SURFACES + extra; i++) {
        int n = snprintf(name, sizeof name, "surface.%03d", i);
        tg_metrics_decision(m, name, (size_t)n, 0);
        tg_metrics_decision(m, name, (size_t)n, 0); /* seen again: the same slot */
    }
    tg_buf_t b;
    char *t = render(m, &b);
    assert_int_equal(
        count_lines_with(t, "trigguard_decisions_total{decision=\"PERMIT\",surface=\"surface."),
        TG_METRICS_SURFACES);
    assert_int_equal(
        sample(t, "trigguard_decisions_total{decision=\"PERMIT\",surface=\"surface.000\"}"), 2);
    assert_int_equal(sample(t, "trigguard_decisions_total{decision=\"PERMIT\",surface=\"other\"}"),
                     2 * extra);
    assert_int_equal(sample(t, "trigguard_decisions_total{decision=\"DENY\",surface=\"other\"}"),
                     -1);
    tg_buf_free(&b);
    free(m);
}

static void test_surface_names_out_of_bounds(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    char longname[TG_METRICS_SURFACE_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname);
    tg_metrics_decision(m, longname, TG_METRICS_SURFACE_NAME_MAX + 1, 1); /* too long: other */
    tg_metrics_decision(m, longname, TG_METRICS_SURFACE_NAME_MAX, 1);     /* at the limit: kept */
    tg_metrics_decision(m, "", 0, 2);                                     /* empty: other */
    tg_metrics_decision(m, NULL, 3, 2);                                   /* none: other */
    tg_metrics_decision(m, "s", 1, TG_METRICS_OUTCOMES);                  /* no such outcome */
    tg_metrics_decision(m, "s", 1, -1);
    tg_metrics_decision(m, "e", 1, 3); /* ESCALATE (SPEC §11.2), the fourth outcome */
    tg_buf_t b;
    char *t = render(m, &b);
    assert_int_equal(sample(t, "trigguard_decisions_total{decision=\"DENY\",surface=\"other\"}"),
                     1);
    assert_int_equal(sample(t, "trigguard_decisions_total{decision=\"SILENCE\",surface=\"other\"}"),
                     2);
    char series[256];
    snprintf(series, sizeof series, "trigguard_decisions_total{decision=\"DENY\",surface=\"%.*s\"}",
             TG_METRICS_SURFACE_NAME_MAX, longname);
    assert_int_equal(sample(t, series), 1);
    assert_null(strstr(t, "surface=\"s\"")); /* the bad outcomes counted nothing */
    assert_int_equal(sample(t, "trigguard_decisions_total{decision=\"ESCALATE\",surface=\"e\"}"),
                     1);
    tg_buf_free(&b);
    free(m);
}

/* Surface names come from the policy: quotes, backslashes and newlines must not break the
 * exposition format (they are escaped as it prescribes). */
static void test_label_escaping(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    const char *odd = "a\"b\\c\nd";
    tg_metrics_decision(m, odd, strlen(odd), 0);
    tg_buf_t b;
    char *t = render(m, &b);
    assert_int_equal(
        sample(t, "trigguard_decisions_total{decision=\"PERMIT\",surface=\"a\\\"b\\\\c\\nd\"}"), 1);
    assert_null(strstr(t, "c\nd")); /* no raw newline inside a label */
    tg_buf_free(&b);
    free(m);
}

/* The reload counters are all there from the start (zeros too), and config_info's labels
 * are escaped: the policy version is the policy author's text. */
static void test_reload_and_config_info(void **state) {
    (void)state;
    tg_metrics_config_t c = {.part = {"policy", "tokens", "keys", "tls"},
                             .ok = {3, 0, 2, 0},
                             .failed = {1, 0, 0, 4},
                             .policy_version = "v\"1\\\n",
                             .policy_hash = "ab",
                             .signing_key_id = ""};
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_metrics_render_config(&b, &c), TG_OK);
    const char *t = b.data;
    assert_int_equal(sample(t, "trigguard_reload_total{what=\"policy\",result=\"ok\"}"), 3);
    assert_int_equal(sample(t, "trigguard_reload_total{what=\"policy\",result=\"failed\"}"), 1);
    assert_int_equal(sample(t, "trigguard_reload_total{what=\"tokens\",result=\"ok\"}"), 0);
    assert_int_equal(sample(t, "trigguard_reload_total{what=\"tls\",result=\"failed\"}"), 4);
    assert_int_equal(sample(t, "trigguard_config_info{policy_version=\"v\\\"1\\\\\\n\","
                               "policy_hash=\"ab\",signing_key_id=\"\"}"),
                     1);
    tg_buf_free(&b);
}

static void test_requests_statuses_and_routes(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    tg_metrics_request(m, TG_ROUTE_EVALUATE, 200, 30);      /* bucket le=5e-05 */
    tg_metrics_request(m, TG_ROUTE_EVALUATE, 503, 7000000); /* beyond the last bound: +Inf */
    tg_metrics_request(m, TG_ROUTE_EVALUATE, 299, -5);      /* unlisted status; negative time */
    tg_metrics_request(m, (tg_route_t)(TG_ROUTE__COUNT + 3), 404, 10); /* no such route */
    tg_metrics_request(m, (tg_route_t)-1, 404, 10);
    assert_string_equal(tg_route_name(TG_ROUTE_DECIDE), "/decide");
    assert_string_equal(tg_route_name((tg_route_t)(TG_ROUTE__COUNT + 3)), "other");
    tg_buf_t b;
    char *t = render(m, &b);
    assert_int_equal(
        sample(t, "trigguard_http_requests_total{route=\"/v1/evaluate\",status=\"200\"}"), 1);
    assert_int_equal(
        sample(t, "trigguard_http_requests_total{route=\"/v1/evaluate\",status=\"503\"}"), 1);
    assert_int_equal(
        sample(t, "trigguard_http_requests_total{route=\"/v1/evaluate\",status=\"other\"}"), 1);
    assert_int_equal(sample(t, "trigguard_http_requests_total{route=\"other\",status=\"404\"}"), 2);
    /* cumulative buckets: 25 µs holds the negative time (a clock step counts as 0), 50 µs
     * also the 30 µs one, 5 s still those two, +Inf all three */
    assert_int_equal(sample(t, "trigguard_http_request_duration_seconds_bucket{route=\"/v1/"
                               "evaluate\",le=\"2.5e-05\"}"),
                     1);
    assert_int_equal(sample(t, "trigguard_http_request_duration_seconds_bucket{route=\"/v1/"
                               "evaluate\",le=\"5e-05\"}"),
                     2);
    assert_int_equal(sample(t, "trigguard_http_request_duration_seconds_bucket{route=\"/v1/"
                               "evaluate\",le=\"5\"}"),
                     2);
    assert_int_equal(sample(t, "trigguard_http_request_duration_seconds_bucket{route=\"/v1/"
                               "evaluate\",le=\"+Inf\"}"),
                     3);
    assert_int_equal(
        sample(t, "trigguard_http_request_duration_seconds_count{route=\"/v1/evaluate\"}"), 3);
    tg_buf_free(&b);
    free(m);
}

/* ---- interning from many threads: every name gets one slot, every count lands -------- */

#define N_THREADS 4
#define N_NAMES 200
#define N_ROUNDS 50

static void *intern_worker(void *arg) {
    tg_metrics_t *m = arg;
    char name[32];
    for (int r = 0; r < N_ROUNDS; r++) {
        for (int i = 0; i < N_NAMES; i++) {
            int n = snprintf(name, sizeof name, "t.%d", i);
            tg_metrics_decision(m, name, (size_t)n, i % 3);
        }
    }
    return NULL;
}

/* SPEC §11.1: decisions by mode, and observe mode's would-decisions by surface, decision and
 * reason, in a bounded table whose overflow is counted as "other". */
static void test_modes_and_would_decisions(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    tg_metrics_mode(m, false, 1);
    tg_metrics_mode(m, true, 1);
    tg_metrics_mode(m, true, 1);
    tg_metrics_mode(m, true, 3); /* no such outcome */
    tg_metrics_would(m, "pay\"x", 5, 1, "HIGH_RISK");
    tg_metrics_would(m, "pay\"x", 5, 1, "HIGH_RISK");
    tg_metrics_would(m, "pay\"x", 5, 2, "HIGH_RISK"); /* another decision: its own series */
    tg_metrics_would(m, "pay", 3, 0, "NO_POLICY_VIOLATION");
    tg_metrics_would(m, "pay", 3, 0, NULL); /* no reason: other */
    char many[32];
    for (int i = 0; i < TG_METRICS_WOULD_SLOTS + 10; i++) {
        int n = snprintf(many, sizeof many, "s%04d", i);
        tg_metrics_would(m, many, (size_t)n, 1, "R");
    }
    tg_buf_t b;
    char *t = render(m, &b);
    assert_int_equal(
        sample(t, "trigguard_decisions_by_mode_total{mode=\"enforce\",decision=\"DENY\"}"), 1);
    assert_int_equal(
        sample(t, "trigguard_decisions_by_mode_total{mode=\"observe\",decision=\"DENY\"}"), 2);
    assert_int_equal(
        sample(t, "trigguard_decisions_by_mode_total{mode=\"observe\",decision=\"PERMIT\"}"), 0);
    assert_int_equal(sample(t, "trigguard_would_decisions_total{surface=\"pay\\\"x\",decision="
                               "\"DENY\",reason=\"HIGH_RISK\"}"),
                     2);
    assert_int_equal(sample(t, "trigguard_would_decisions_total{surface=\"pay\\\"x\",decision="
                               "\"SILENCE\",reason=\"HIGH_RISK\"}"),
                     1);
    assert_int_equal(sample(t, "trigguard_would_decisions_total{surface=\"pay\",decision="
                               "\"PERMIT\",reason=\"NO_POLICY_VIOLATION\"}"),
                     1);
    /* 3 series took slots above: the rest of the table, then "other" */
    assert_int_equal(count_lines_with(t, "trigguard_would_decisions_total{surface=\"s"),
                     TG_METRICS_WOULD_SLOTS - 3);
    assert_int_equal(sample(t, "trigguard_would_decisions_total{surface=\"other\",decision="
                               "\"DENY\",reason=\"other\"}"),
                     13);
    assert_int_equal(sample(t, "trigguard_would_decisions_total{surface=\"other\",decision="
                               "\"PERMIT\",reason=\"other\"}"),
                     1);
    tg_buf_free(&b);
    free(m);
}

static void test_interning_concurrent(void **state) {
    (void)state;
    tg_metrics_t *m = new_metrics();
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, intern_worker, m), 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    tg_buf_t b;
    char *t = render(m, &b);
    static const char *const outcomes[3] = {"PERMIT", "DENY", "SILENCE"};
    char series[128];
    for (int i = 0; i < N_NAMES; i++) {
        snprintf(series, sizeof series,
                 "trigguard_decisions_total{decision=\"%s\",surface=\"t.%d\"}", outcomes[i % 3], i);
        assert_int_equal(sample(t, series), N_THREADS * N_ROUNDS);
    }
    /* one label per name: no name was interned twice by racing threads */
    assert_int_equal(count_lines_with(t, "surface=\"t."), N_NAMES);
    assert_null(strstr(t, "surface=\"other\""));
    tg_buf_free(&b);
    free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_surfaces_interned_and_capped),
        cmocka_unit_test(test_surface_names_out_of_bounds),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_reload_and_config_info),
        cmocka_unit_test(test_requests_statuses_and_routes),
        cmocka_unit_test(test_interning_concurrent),
        cmocka_unit_test(test_modes_and_would_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
