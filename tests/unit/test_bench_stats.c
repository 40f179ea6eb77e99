/* test_bench_stats.c — nearest-rank percentiles and JSON blocks of bench/common on
 * hand-computed sample sets (the values below were worked out on paper, not by the code). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "env.h"
#include "stats.h"
#include "support/fail_alloc.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int64_t pct(const int64_t *s, size_t n, double p) {
    int64_t v = -1;
    assert_int_equal(tg_bench_percentile(&v, s, n, p), TG_OK);
    return v;
}

/* Odd size, the textbook nearest-rank example: ranks ceil(p/100 * 5). */
static void test_odd_five(void **state) {
    (void)state;
    const int64_t s[] = {15, 20, 35, 40, 50};
    assert_int_equal(pct(s, 5, 0), 15);   /* rank clamped to 1 */
    assert_int_equal(pct(s, 5, 5), 15);   /* ceil(0.25) = 1 */
    assert_int_equal(pct(s, 5, 30), 20);  /* ceil(1.5) = 2 */
    assert_int_equal(pct(s, 5, 40), 20);  /* exactly 2.0: rank 2, not 3 */
    assert_int_equal(pct(s, 5, 50), 35);  /* ceil(2.5) = 3 */
    assert_int_equal(pct(s, 5, 99), 50);  /* ceil(4.95) = 5 */
    assert_int_equal(pct(s, 5, 100), 50); /* the maximum */
}

/* Even size (10) and odd size (11): the median of an even set is the lower middle sample
 * (nearest rank never averages two samples). */
static void test_even_and_odd(void **state) {
    (void)state;
    const int64_t e[] = {3, 6, 7, 8, 8, 10, 13, 15, 16, 20};
    assert_int_equal(pct(e, 10, 25), 7);  /* ceil(2.5) = 3 */
    assert_int_equal(pct(e, 10, 50), 8);  /* 5.0 -> rank 5 */
    assert_int_equal(pct(e, 10, 75), 15); /* ceil(7.5) = 8 */
    assert_int_equal(pct(e, 10, 90), 16); /* 9.0 -> rank 9 */
    assert_int_equal(pct(e, 10, 91), 20); /* ceil(9.1) = 10 */
    const int64_t o[] = {3, 6, 7, 8, 8, 9, 10, 13, 15, 16, 20};
    assert_int_equal(pct(o, 11, 25), 7);  /* ceil(2.75) = 3 */
    assert_int_equal(pct(o, 11, 50), 9);  /* ceil(5.5) = 6 */
    assert_int_equal(pct(o, 11, 75), 15); /* ceil(8.25) = 9 */
    assert_int_equal(pct(o, 11, 90), 16); /* ceil(9.9) = 10 */
    assert_int_equal(pct(o, 11, 100), 20);
}

static void test_one_sample(void **state) {
    (void)state;
    const int64_t s[] = {42};
    const double ps[] = {0, 0.001, 50, 99, 99.9, 100};
    for (size_t i = 0; i < N_OF(ps); i++) {
        assert_int_equal(pct(s, 1, ps[i]), 42);
    }
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, s, 1), TG_OK);
    assert_int_equal(sum.n, 1);
    assert_int_equal(sum.min, 42);
    assert_int_equal(sum.p99_9, 42);
    assert_int_equal(sum.max, 42);
    assert_true(sum.mean == 42.0);
    assert_true(sum.stdev == 0.0);
}

static void test_duplicates(void **state) {
    (void)state;
    const int64_t s[] = {5, 5, 5, 5, 7};
    assert_int_equal(pct(s, 5, 80), 5); /* 4.0 -> rank 4 */
    assert_int_equal(pct(s, 5, 81), 7); /* ceil(4.05) = 5 */
    const int64_t same[] = {9, 9, 9, 9};
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, same, 4), TG_OK); /* equal neighbours: sorted */
    assert_int_equal(sum.p50, 9);
    assert_true(sum.stdev == 0.0);
}

/* Where a floating-point rank would go wrong: 99.9% of 1000 is exactly 999. */
static void test_tail_ranks_exact(void **state) {
    (void)state;
    size_t n = 100000;
    int64_t *s = malloc(n * sizeof *s);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) {
        s[i] = (int64_t)i + 1;
    }
    assert_int_equal(tg_bench_rank(1000, 99.9), 999);
    assert_int_equal(tg_bench_rank(1000, 99.99), 1000); /* ceil(999.9) */
    assert_int_equal(tg_bench_rank(1000, 99), 990);
    assert_int_equal(pct(s, 1000, 99.9), 999);
    assert_int_equal(pct(s, n, 99.9), 99900);
    assert_int_equal(pct(s, n, 99.99), 99990);
    assert_int_equal(pct(s, n, 50), 50000);
    /* a third of 3 samples is rank 1; the double product 33.33..% * 3 is 1.0000000000000002 */
    assert_int_equal(pct(s, 3, 100.0 / 3.0), 1);
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, s, n), TG_OK);
    assert_int_equal(sum.p90, 90000);
    assert_int_equal(sum.p95, 95000);
    assert_int_equal(sum.p99, 99000);
    assert_int_equal(sum.p99_9, 99900);
    assert_true(fabs(sum.mean - 50000.5) < 1e-9);
    free(s);
}

static void test_mean_stdev(void **state) {
    (void)state;
    const int64_t s[] = {2, 4, 4, 4, 5, 5, 7, 9}; /* mean 5, population variance 4 */
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, s, N_OF(s)), TG_OK);
    assert_true(sum.mean == 5.0);
    assert_true(fabs(sum.stdev - 2.0) < 1e-12);
    assert_int_equal(sum.p50, 4);
    assert_int_equal(sum.p90, 9); /* ceil(7.2) = 8 */
}

static void test_sort(void **state) {
    (void)state;
    int64_t s[] = {9, -3, 7, 7, 0, 1000000000000};
    tg_bench_sort(s, N_OF(s));
    const int64_t want[] = {-3, 0, 7, 7, 9, 1000000000000};
    assert_memory_equal(s, want, sizeof want);
    tg_bench_sort(NULL, 3); /* no-op */
    tg_bench_sort(s, 0);
}

static void test_invalid_args(void **state) {
    (void)state;
    const int64_t s[] = {1, 2, 3};
    int64_t v = 77;
    assert_int_equal(tg_bench_rank(0, 50), 0);
    assert_int_equal(tg_bench_rank(3, -0.5), 0);
    assert_int_equal(tg_bench_rank(3, 100.5), 0);
    assert_int_equal(tg_bench_rank(3, NAN), 0);
    assert_int_equal(tg_bench_rank(TG_BENCH_MAX_SAMPLES + 1, 50), 0);
    assert_int_equal(tg_bench_percentile(&v, s, 0, 50), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_percentile(&v, s, 3, 101), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_percentile(&v, NULL, 3, 50), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_percentile(NULL, s, 3, 50), TG_ERR_INVALID_ARG);
    assert_int_equal(v, 77); /* untouched on error */

    tg_bench_summary_t sum;
    const int64_t unsorted[] = {1, 3, 2};
    assert_int_equal(tg_bench_summarize(&sum, unsorted, 3), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_summarize(&sum, s, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_summarize(NULL, s, 3), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_summarize(&sum, NULL, 3), TG_ERR_INVALID_ARG);

    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_bench_put_latency(NULL, &sum), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_put_latency(&b, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_put_digest(&b, s, 0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_put_digest(&b, NULL, 3), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_put_digest(NULL, s, 3), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_bench_put_environment(NULL, "fsync", NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(b.len, 0);
    tg_buf_free(&b);
}

static void test_latency_json(void **state) {
    (void)state;
    const int64_t s[] = {1000, 2000, 3000, 4000, 1500000000};
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, s, 5), TG_OK);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_bench_put_latency(&b, &sum), TG_OK);
    /* mean (1e4 + 1.5e9) / 5 = 300002000 ns; ranks: p50 3, p90..p99.9 5. */
    assert_non_null(strstr(b.data, "\"latency_ms\":{\"min\":0.001000,\"mean\":300.002000,"
                                   "\"p50\":0.003000,\"p90\":1500.000000,\"p95\":1500.000000,"
                                   "\"p99\":1500.000000,\"p99_9\":1500.000000,"
                                   "\"max\":1500.000000,\"stdev\":"));
    tg_buf_free(&b);
}

static void test_digest_json(void **state) {
    (void)state;
    int64_t s[200];
    for (size_t i = 0; i < 200; i++) {
        s[i] = ((int64_t)i + 1) * 1000000; /* 1..200 ms */
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_buf_putc(&b, '{'), TG_OK);
    assert_int_equal(tg_bench_put_digest(&b, s, 200), TG_OK);
    assert_int_equal(tg_buf_putc(&b, '}'), TG_OK);
    json_error_t err;
    json_t *j = json_loads(b.data, 0, &err);
    assert_non_null(j);
    json_t *d = json_object_get(j, "digest");
    assert_string_equal(json_string_value(json_object_get(d, "definition")), "nearest-rank");
    json_t *p = json_object_get(d, "percentiles"), *v = json_object_get(d, "latency_ms");
    assert_int_equal(json_array_size(p), TG_BENCH_DIGEST_N);
    assert_int_equal(json_array_size(v), TG_BENCH_DIGEST_N);
    /* p0 = 1 ms, p1 = rank 2, p50 = rank 100, p99.5 = rank 199, p99.9 = rank 200 */
    assert_true(json_number_value(json_array_get(v, 0)) == 1.0);
    assert_true(json_number_value(json_array_get(v, 1)) == 2.0);
    assert_true(json_number_value(json_array_get(v, 50)) == 100.0);
    assert_true(json_number_value(json_array_get(p, 100)) == 99.5);
    assert_true(json_number_value(json_array_get(v, 100)) == 199.0);
    assert_true(json_number_value(json_array_get(v, 101)) == 200.0);
    assert_true(json_number_value(json_array_get(v, TG_BENCH_DIGEST_N - 1)) == 200.0);
    for (size_t i = 1; i < TG_BENCH_DIGEST_N; i++) {
        assert_true(json_number_value(json_array_get(p, i)) >
                    json_number_value(json_array_get(p, i - 1)));
        assert_true(json_number_value(json_array_get(v, i)) >=
                    json_number_value(json_array_get(v, i - 1)));
    }
    json_decref(j);
    tg_buf_free(&b);
}

static void test_buffer_errors(void **state) {
    (void)state;
    const int64_t s[] = {1, 2, 3};
    tg_bench_summary_t sum;
    assert_int_equal(tg_bench_summarize(&sum, s, 3), TG_OK);
    tg_buf_t b;
    tg_buf_init(&b, 32); /* far too small for either block */
    assert_int_equal(tg_bench_put_digest(&b, s, 3), TG_ERR_LIMIT);
    tg_buf_reset(&b);
    assert_int_equal(tg_bench_put_latency(&b, &sum), TG_ERR_LIMIT);
    tg_buf_reset(&b);
    assert_int_equal(tg_bench_put_environment(&b, NULL, NULL), TG_ERR_LIMIT);
    tg_buf_free(&b);

    tg_buf_init(&b, 0);
    tg_fail_alloc_all(true);
    assert_int_equal(tg_bench_put_digest(&b, s, 3), TG_ERR_NOMEM);
    assert_int_equal(tg_bench_put_str(&b, "x"), TG_ERR_NOMEM);
    tg_fail_alloc_all(false);
    tg_buf_free(&b);
}

static void test_put_str(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_bench_put_str(&b, "a\"b\\c\n\x01\xc3\xa9z"), TG_OK);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\u000a\\u0001??z\"");
    tg_buf_free(&b);
}

static void test_environment(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_buf_putc(&b, '{'), TG_OK);
    assert_int_equal(tg_bench_put_environment(&b, "fsync", "abc123"), TG_OK);
    assert_int_equal(tg_buf_putc(&b, '}'), TG_OK);
    json_error_t err;
    json_t *j = json_loads(b.data, 0, &err);
    assert_non_null(j);
    json_t *e = json_object_get(j, "environment");
    const char *str_keys[] = {"cpu_model", "kernel",     "os",         "compiler", "build_type",
                              "c_flags",   "git_commit", "durability", "date",     "loadavg"};
    for (size_t i = 0; i < N_OF(str_keys); i++) {
        assert_true(json_is_string(json_object_get(e, str_keys[i])));
    }
    assert_true(json_integer_value(json_object_get(e, "cpu_cores")) >= 1);
    assert_true(json_integer_value(json_object_get(e, "memory_total_mib")) >= 1);
    assert_true(json_is_boolean(json_object_get(e, "sanitizers")));
    assert_string_equal(json_string_value(json_object_get(e, "durability")), "fsync");
    assert_string_equal(json_string_value(json_object_get(e, "git_commit")), "abc123");
    const char *libs[] = {"libmicrohttpd", "jansson", "libsodium"};
    for (size_t i = 0; i < N_OF(libs); i++) {
        json_t *l = json_object_get(json_object_get(e, "libraries"), libs[i]);
        assert_true(json_is_string(json_object_get(l, "package")));
        assert_true(strlen(json_string_value(json_object_get(l, "runtime"))) > 0);
    }
    const char *date = json_string_value(json_object_get(e, "date"));
    assert_int_equal(strlen(date), 20);
    assert_int_equal(date[19], 'Z');
    json_decref(j);

    tg_buf_reset(&b);
    assert_int_equal(tg_bench_put_environment(&b, NULL, NULL), TG_OK);
    assert_non_null(strstr(b.data, "\"durability\":\"not applicable\""));
    tg_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_five),
        cmocka_unit_test(test_even_and_odd),
        cmocka_unit_test(test_one_sample),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_tail_ranks_exact),
        cmocka_unit_test(test_mean_stdev),
        cmocka_unit_test(test_sort),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_latency_json),
        cmocka_unit_test(test_digest_json),
        cmocka_unit_test(test_buffer_errors),
        cmocka_unit_test(test_put_str),
        cmocka_unit_test(test_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
