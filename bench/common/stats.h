/* stats.h — percentiles, summaries and JSON blocks of raw latency samples (bench harnesses).
 *
 * Percentile definition (the one every harness uses, so their figures compare): NEAREST RANK
 * on the sorted raw samples, no interpolation and no bucketing. For n samples sorted
 * ascending, the p-th percentile (0 <= p <= 100) is the sample of 1-based rank
 *     rank = ceil(p / 100 * n), clamped to 1..n
 * so p0 is the minimum, p100 the maximum and every reported value is a sample that was
 * observed. The rank is computed in integer arithmetic (p scaled to millionths of a percent)
 * so that, e.g., p99.9 of 1000 samples is exactly rank 999, never 1000 through rounding.
 *
 * Units: samples are int64_t nanoseconds; the JSON blocks report milliseconds with 6
 * decimals (exact to the nanosecond).
 *
 * Thread safety: every function is reentrant; nothing here keeps state.
 */
#ifndef TRIGGUARD_BENCH_STATS_H
#define TRIGGUARD_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"

/* Largest sample count accepted (keeps the rank arithmetic inside 64 bits). */
#define TG_BENCH_MAX_SAMPLES ((size_t)10000000000ULL)

/* The percentiles of the digest: 0..99 by 1, then the tail. Same list in the Python tools. */
#define TG_BENCH_DIGEST_N 105
extern const double tg_bench_digest_pcts[TG_BENCH_DIGEST_N];

typedef struct {
    size_t n;
    int64_t min, p50, p90, p95, p99, p99_9, max; /* nearest-rank, ns */
    double mean;                                 /* ns */
    double stdev;                                /* population standard deviation, ns */
} tg_bench_summary_t;

/* Sorts n samples ascending in place. `samples` is the caller's; n may be 0. */
void tg_bench_sort(int64_t *samples, size_t n);

/* 1-based nearest rank of percentile p among n samples (see above). Returns 0 when n is 0,
 * n > TG_BENCH_MAX_SAMPLES, or p is not in [0, 100] (NaN included). */
size_t tg_bench_rank(size_t n, double p);

/* *out = the p-th percentile of `sorted` (ascending, n samples, borrowed).
 * TG_ERR_INVALID_ARG: out or sorted NULL, n == 0 or too large, p outside [0, 100]. */
tg_err_t tg_bench_percentile(int64_t *out, const int64_t *sorted, size_t n, double p) TG_MUST_USE;

/* Fills *out from `sorted` (ascending, n samples, borrowed).
 * TG_ERR_INVALID_ARG: NULL pointers, n == 0 or too large, or samples not ascending. */
tg_err_t tg_bench_summarize(tg_bench_summary_t *out, const int64_t *sorted, size_t n) TG_MUST_USE;

/* Appends the JSON member "latency_ms":{"min":..,"mean":..,"p50":..,"p90":..,"p95":..,
 * "p99":..,"p99_9":..,"max":..,"stdev":..} (no leading or trailing comma).
 * Errors: those of tg_buf_printf (TG_ERR_LIMIT, TG_ERR_NOMEM); TG_ERR_INVALID_ARG for NULL. */
tg_err_t tg_bench_put_latency(tg_buf_t *b, const tg_bench_summary_t *s) TG_MUST_USE;

/* Appends the JSON member "digest":{"definition":"nearest-rank","percentiles":[...],
 * "latency_ms":[...]}: the value at each of tg_bench_digest_pcts, so a page can draw the
 * percentile curve without the raw samples. Errors as tg_bench_percentile and tg_buf_printf. */
tg_err_t tg_bench_put_digest(tg_buf_t *b, const int64_t *sorted, size_t n) TG_MUST_USE;

#endif /* TRIGGUARD_BENCH_STATS_H */
