/* stats.c — nearest-rank percentiles and JSON summaries of raw latency samples. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

const double tg_bench_digest_pcts[TG_BENCH_DIGEST_N] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,   17,   18,    19,    20,
    21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37,   38,   39,    40,    41,
    42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58,   59,   60,    61,    62,
    63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,   80,   81,    82,    83,
    84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 99.5, 99.9, 99.95, 99.99, 100};

#define SCALE 100000000ULL /* 100 percent in millionths of a percent */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void tg_bench_sort(int64_t *samples, size_t n) {
    if (samples != NULL && n > 1) {
        qsort(samples, n, sizeof *samples, cmp_i64);
    }
}

size_t tg_bench_rank(size_t n, double p) {
    if (n == 0 || n > TG_BENCH_MAX_SAMPLES || !(p >= 0.0 && p <= 100.0)) {
        return 0;
    }
    /* Integer ceil(pm * n / SCALE): a double product would turn 99.9% of 1000 into 999.0000001
     * and round the rank up past the sample that defines it. */
    uint64_t pm = (uint64_t)llround(p * 1e6);
    uint64_t prod = pm * (uint64_t)n;
    uint64_t rank = prod / SCALE + (prod % SCALE != 0);
    if (rank < 1) {
        rank = 1;
    }
    return rank > n ? n : (size_t)rank;
}

tg_err_t tg_bench_percentile(int64_t *out, const int64_t *sorted, size_t n, double p) {
    size_t rank = tg_bench_rank(n, p);
    if (out == NULL || sorted == NULL || rank == 0) {
        return TG_ERR_INVALID_ARG;
    }
    *out = sorted[rank - 1];
    return TG_OK;
}

tg_err_t tg_bench_summarize(tg_bench_summary_t *out, const int64_t *sorted, size_t n) {
    if (out == NULL || sorted == NULL || n == 0 || n > TG_BENCH_MAX_SAMPLES) {
        return TG_ERR_INVALID_ARG;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && sorted[i] < sorted[i - 1]) {
            return TG_ERR_INVALID_ARG;
        }
        sum += (double)sorted[i];
    }
    double mean = sum / (double)n, var = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)sorted[i] - mean;
        var += d * d;
    }
    tg_bench_summary_t s = {.n = n, .min = sorted[0], .max = sorted[n - 1], .mean = mean};
    s.stdev = sqrt(var / (double)n);
    s.p50 = sorted[tg_bench_rank(n, 50) - 1];
    s.p90 = sorted[tg_bench_rank(n, 90) - 1];
    s.p95 = sorted[tg_bench_rank(n, 95) - 1];
    s.p99 = sorted[tg_bench_rank(n, 99) - 1];
    s.p99_9 = sorted[tg_bench_rank(n, 99.9) - 1];
    *out = s;
    return TG_OK;
}

tg_err_t tg_bench_put_latency(tg_buf_t *b, const tg_bench_summary_t *s) {
    if (b == NULL || s == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    return tg_buf_printf(b,
                         "\"latency_ms\":{\"min\":%.6f,\"mean\":%.6f,\"p50\":%.6f,\"p90\":%.6f,"
                         "\"p95\":%.6f,\"p99\":%.6f,\"p99_9\":%.6f,\"max\":%.6f,\"stdev\":%.6f}",
                         (double)s->min / 1e6, s->mean / 1e6, (double)s->p50 / 1e6,
                         (double)s->p90 / 1e6, (double)s->p95 / 1e6, (double)s->p99 / 1e6,
                         (double)s->p99_9 / 1e6, (double)s->max / 1e6, s->stdev / 1e6);
}

tg_err_t tg_bench_put_digest(tg_buf_t *b, const int64_t *sorted, size_t n) {
    if (b == NULL || sorted == NULL || tg_bench_rank(n, 0) == 0) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc = tg_buf_puts(b, "\"digest\":{\"definition\":\"nearest-rank\",\"percentiles\":[");
    for (size_t i = 0; i < TG_BENCH_DIGEST_N && rc == TG_OK; i++) {
        rc = tg_buf_printf(b, "%s%g", i ? "," : "", tg_bench_digest_pcts[i]);
    }
    rc = rc ? rc : tg_buf_puts(b, "],\"latency_ms\":[");
    for (size_t i = 0; i < TG_BENCH_DIGEST_N && rc == TG_OK; i++) {
        int64_t v = sorted[tg_bench_rank(n, tg_bench_digest_pcts[i]) - 1];
        rc = tg_buf_printf(b, "%s%.6f", i ? "," : "", (double)v / 1e6);
    }
    return rc ? rc : tg_buf_puts(b, "]}");
}
