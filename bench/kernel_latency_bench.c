/* kernel_latency_bench.c — in-process latency and throughput of tg_kernel_decide.
 *
 * What it measures, per variant (a compiled policy and one pre-built frame):
 *   per_call  clock_gettime(CLOCK_MONOTONIC) immediately before and after each single
 *             tg_kernel_decide call, after `--warmup` unrecorded calls; every raw sample is
 *             kept and the percentiles are computed from the sorted samples (nearest rank,
 *             bench/common/stats.h; the same code as every other harness).
 *             These numbers INCLUDE one clock read (reported as clock.overhead_ns_p50, about
 *             20-40 ns here): for a ~100 ns call the clock is a large share of the sample.
 *   batched   `--batch` calls between two clock reads, repeated count/batch times: the clock
 *             cost is amortized, so ns_per_decision and throughput_per_s (the decisions/s
 *             figure) come from here. The headline throughput is that of the MEDIAN batch: on
 *             a shared machine one lost timeslice (milliseconds) inside a batch would dominate
 *             a mean. The mean over all batches (wall clock) and the decisions per second of
 *             thread CPU time (CLOCK_THREAD_CPUTIME_ID, immune to preemption) are reported too.
 *   frame     tg_frame_from_request on the already-parsed request, batched the same way
 *             (informational: it runs outside the kernel, once per request).
 * What it does NOT measure: reading the body, JSON parsing (jansson), canonicalization and
 * request hashing, idempotency/nonce lookups, receipt signing (Ed25519), ledger writes, HTTP;
 * nor contention between threads (single thread only); nor cold caches (everything is warm
 * after the warm-up; the same frame is decided every time).
 *
 * Variants (bundled policy examples/policy.json):
 *   default  deploy.release to staging by ci.release-bot: tier 1, two required context fields,
 *            actor checked through an "@group" in-list rule -> PERMIT
 *   spend    the SPEC 3.1 payments.charge request: tier 1 irreversible, two signals
 *            (riskScore, rsdSpike), actor list, the HIGH_RISK_SPEND spend rule and two more deny
 *            rules evaluated before the permit rule -> PERMIT
 * Variants with their own policy (built in memory by the harness; issue 21):
 *   time     a change window in Europe/Berlin (host tzdata): a time.date freeze deny rule,
 *            time.weekday and time.hour deny rules, then a permit -> PERMIT at a fixed
 *            instant (2026-12-04T10:00:00Z, after the zone's last transition: footer rule)
 *   set      context.payee in a 100,000-value data set file (written to a temporary
 *            directory) -> PERMIT (binary search over the sorted set)
 *   limit    a permit rule, then two stateful limits (a daily sum, an hourly count) whose
 *            totals are bound in the frame as the pipeline's store would -> PERMIT
 *
 *   any_of   issue 21's language (a bundle of its own, LANG_BUNDLE): a deny any_of that fails,
 *            then a permit any_of whose third member holds -> PERMIT
 *   glob     the same bundle: a deny glob `*-bot` on the actor that fails, then a permit glob
 *            on context.ref (the release branches, refs/heads/release/ and a star) -> PERMIT
 *
 * usage: kernel_latency_bench [--count N] [--warmup N] [--batch N]
 *                             [--variant default|spend|any_of|glob|time|set|limit|all]
 *                             [--policy FILE] [--output FILE]   (--policy: default, spend)
 * Writes one JSON document (stdout without --output); its common fields ("schema", "what",
 * "environment", "runs") are described in docs/BENCHMARKS.md.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "stats.h"
#include "trigguard/buf.h"
#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/policy.h"
#include "trigguard/version.h"

typedef struct {
    const char *name;
    const char *description;
    const char *request;
    tg_verdict_t expect; /* every call must decide this; others are counted as errors */
    const char *bundle;  /* NULL: the --policy bundle; else this bundle text, its own policy */
    int64_t at_ms;       /* the frame's instant (0: none) */
    int set_file;        /* 1: SET_POLICY with its 100,000-line file (load_set_policy) */
    int limits;          /* 1: every limit of the surface bound with a running total of 5000 */
} variant_t;

/* Issue 21's language (docs/POLICY.md 1.2.1), one surface per variant below. */
#define LANG_BUNDLE                                                                                \
    "{\"version\":\"bench-lang-1\",\"surfaces\":{"                                                 \
    "\"bench.any_of\":{\"tier\":2,\"required_context\":{\"env\":\"string\"},\"rules\":["           \
    "{\"id\":\"frozen-env\",\"effect\":\"deny\",\"when\":[{\"any_of\":["                           \
    "{\"field\":\"context.env\",\"op\":\"eq\",\"value\":\"prod\"},"                                \
    "{\"field\":\"context.env\",\"op\":\"eq\",\"value\":\"dr\"}]}]},"                              \
    "{\"id\":\"teams\",\"effect\":\"permit\",\"when\":[{\"any_of\":["                              \
    "{\"field\":\"actor\",\"op\":\"eq\",\"value\":\"alice\"},"                                     \
    "{\"field\":\"actor\",\"op\":\"eq\",\"value\":\"bob\"},"                                       \
    "{\"field\":\"context.team\",\"op\":\"eq\",\"value\":\"platform\"}]}]}]},"                     \
    "\"bench.glob\":{\"tier\":2,\"required_context\":{\"ref\":\"string\"},\"rules\":["             \
    "{\"id\":\"no-bots\",\"effect\":\"deny\",\"when\":[{\"field\":\"actor\",\"op\":"               \
    "\"glob\",\"value\":\"*-bot\"}]},"                                                             \
    "{\"id\":\"release\",\"effect\":\"permit\",\"when\":[{\"field\":\"context.ref\","              \
    "\"op\":\"glob\",\"value\":\"refs/heads/release/*\"}]}]}}}"

/* The time variant's bundle: a change freeze and a change window (docs/POLICY.md "Time"). */
static const char TIME_POLICY[] =
    "{\"version\":\"bench-time\",\"timezone\":\"Europe/Berlin\",\"surfaces\":{\"deploy\":{"
    "\"tier\":2,\"required_context\":{\"environment\":\"string\"},\"rules\":["
    "{\"id\":\"freeze\",\"effect\":\"deny\",\"reason\":\"CHANGE_FREEZE\",\"when\":["
    "{\"field\":\"context.environment\",\"op\":\"eq\",\"value\":\"production\"},"
    "{\"field\":\"time.date\",\"op\":\"gte\",\"value\":\"2026-12-20\"},"
    "{\"field\":\"time.date\",\"op\":\"lte\",\"value\":\"2027-01-02\"}]},"
    "{\"id\":\"weekend\",\"effect\":\"deny\",\"reason\":\"OUTSIDE_WINDOW\",\"when\":["
    "{\"field\":\"time.weekday\",\"op\":\"in\",\"value\":[\"sat\",\"sun\"]}]},"
    "{\"id\":\"hours\",\"effect\":\"deny\",\"reason\":\"OUTSIDE_WINDOW\",\"when\":["
    "{\"field\":\"time.hour\",\"op\":\"not_in\",\"value\":[9,10,11,12,13,14,15,16]}]},"
    "{\"id\":\"deploy\",\"effect\":\"permit\",\"when\":[]}]}}}";

static const char SET_POLICY[] =
    "{\"version\":\"bench-set\",\"sets\":{\"payees\":{\"file\":\"payees.txt\"}},"
    "\"surfaces\":{\"pay\":{\"tier\":2,\"rules\":[{\"id\":\"known-payee\",\"effect\":"
    "\"permit\",\"when\":[{\"field\":\"context.payee\",\"op\":\"in\",\"set\":"
    "\"payees\"}]}]}}}";

#define SET_VALUES 100000

/* The limit variant's bundle: a daily spend cap and an hourly count (docs/POLICY.md 1.9). */
static const char LIMIT_POLICY[] =
    "{\"version\":\"bench-limit\",\"surfaces\":{\"pay\":{\"tier\":1,"
    "\"required_context\":{\"amount\":\"number\"},\"rules\":[{\"id\":\"small\","
    "\"effect\":\"permit\",\"when\":[{\"field\":\"context.amount\",\"op\":\"lte\","
    "\"value\":10000}]}]}},\"limits\":[{\"id\":\"daily-spend\",\"surface\":\"pay\","
    "\"key\":[\"actor\"],\"sum\":\"context.amount\",\"window_s\":86400,\"max\":100000},"
    "{\"id\":\"hourly-count\",\"surface\":\"pay\",\"key\":[\"actor\"],\"count\":true,"
    "\"window_s\":3600,\"max\":100000}]}";

static const variant_t VARIANTS[] = {
    {"default",
     "deploy.release to staging by ci.release-bot: tier 1, two required context fields, actor "
     "group in-list rule",
     "{\"surface\":\"deploy.release\",\"action\":\"release\",\"actor\":\"ci.release-bot\","
     "\"context\":{\"target\":\"staging\",\"version\":\"1.4.2\"},\"idempotency_key\":\"rel-1\"}",
     TG_PERMIT, NULL, 0, 0, 0},
    {"spend",
     "SPEC 3.1 payments.charge: tier 1 irreversible, two signals (riskScore, rsdSpike), actor "
     "list, spend rule HIGH_RISK_SPEND plus two other deny rules before the permit",
     "{\"surface\":\"payments.charge\",\"action\":\"transfer_funds\",\"actor\":\"agent.billing\","
     "\"context\":{\"amount\":2500,\"currency\":\"USD\"},\"signals\":{\"riskScore\":0.12,"
     "\"rsdSpike\":false},\"idempotency_key\":\"tx_9921\",\"nonce\":\"6f1c\"}",
     TG_PERMIT, NULL, 0, 0, 0},
    {"any_of",
     "issue 21 language: a deny any_of (2 members) that fails, then a permit any_of whose "
     "third member holds",
     "{\"surface\":\"bench.any_of\",\"action\":\"deploy\",\"actor\":\"carol\","
     "\"context\":{\"env\":\"staging\",\"team\":\"platform\"}}",
     TG_PERMIT, LANG_BUNDLE, 0, 0, 0},
    {"glob",
     "issue 21 language: a deny glob on the actor (*-bot) that fails, then a permit glob "
     "refs/heads/release/* that holds",
     "{\"surface\":\"bench.glob\",\"action\":\"push\",\"actor\":\"alice\","
     "\"context\":{\"ref\":\"refs/heads/release/2026.12\"}}",
     TG_PERMIT, LANG_BUNDLE, 0, 0, 0},
    {"time",
     "a change window in Europe/Berlin: time.date freeze (two date comparisons), time.weekday "
     "and time.hour deny rules before the permit",
     "{\"surface\":\"deploy\",\"action\":\"release\",\"actor\":\"ci\",\"context\":"
     "{\"environment\":\"production\"}}",
     TG_PERMIT, TIME_POLICY, INT64_C(1796378400000), 0, 0},
    {"set", "context.payee in a 100,000-value data set (binary search)",
     "{\"surface\":\"pay\",\"action\":\"charge\",\"actor\":\"agent\",\"context\":"
     "{\"payee\":\"payee-071234\"}}",
     TG_PERMIT, NULL, 0, 1, 0},
    {"limit",
     "a permit under two stateful limits (a daily sum and an hourly count), totals bound: "
     "the limit step after the PERMIT",
     "{\"surface\":\"pay\",\"action\":\"charge\",\"actor\":\"agent\",\"context\":"
     "{\"amount\":2500}}",
     TG_PERMIT, LIMIT_POLICY, 0, 0, 1},
};
#define N_VARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

typedef struct {
    long count, warmup, batch;
    const char *variant, *policy, *output;
} opts_t;

static volatile unsigned sink; /* keeps every decision observable */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Nearest-rank percentile of sorted samples (bench/common/stats.h); n >= 1 everywhere here. */
static int64_t pct(const int64_t *s, size_t n, double p) { return s[tg_bench_rank(n, p) - 1]; }

static int fail(const char *what) {
    fprintf(stderr, "kernel_latency_bench: %s\n", what);
    return 2;
}

/* ---- environment facts ------------------------------------------------------------- */

static tg_err_t put_json_str(tg_buf_t *b, const char *s) {
    return tg_canon_string(b, s, strlen(s));
}

/* ---- measurement ------------------------------------------------------------------- */

/* Batched timing of one operation: per-batch wall times, plus thread CPU time overall. */
typedef struct {
    size_t batches;
    double ns_mean, ns_p50, ns_p99; /* per operation, wall clock */
    double tput_median, tput_mean, tput_cpu;
} batched_t;

typedef struct {
    const variant_t *v;
    const tg_policy_t *p; /* the policy the variant decided under */
    tg_policy_t *own;     /* the variant's own bundle, when it has one */
    tg_decision_t d;
    int64_t *samples;
    size_t n;
    size_t wrong;      /* per-call decisions other than v->expect */
    double per_call_s; /* wall time of the per-call loop */
    batched_t kernel, frame;
} result_t;

static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sorts the per-batch wall times and derives the per-operation figures. */
static void summarize(batched_t *r, int64_t *per, size_t batches, long batch, int64_t cpu) {
    int64_t total = 0;
    for (size_t b = 0; b < batches; b++) {
        total += per[b];
    }
    tg_bench_sort(per, batches);
    double ops = (double)batches * (double)batch;
    r->batches = batches;
    r->ns_mean = (double)total / ops;
    r->ns_p50 = (double)pct(per, batches, 50) / (double)batch;
    r->ns_p99 = (double)pct(per, batches, 99) / (double)batch;
    r->tput_median = 1e9 / r->ns_p50;
    r->tput_mean = ops * 1e9 / (double)total;
    r->tput_cpu = ops * 1e9 / (double)cpu;
}

static int run_variant(result_t *r, const tg_policy_t *p, const variant_t *v, const opts_t *o) {
    json_t *req = NULL;
    tg_diag_t diag = {{0}};
    if (tg_json_parse(&req, v->request, strlen(v->request), NULL, &diag) != TG_OK) {
        return fail(diag.msg);
    }
    tg_frame_t f;
    if (tg_frame_from_request(&f, NULL, p, req, &diag) != TG_OK) {
        json_decref(req);
        return fail(diag.msg);
    }
    if (v->at_ms != 0) {
        f.now_ms = v->at_ms;
        f.has_now = 1;
    }
    if (v->limits) { /* what the pipeline's store binds (kernel.h: frame.limits) */
        uint32_t nl = 0;
        const uint32_t *ids = tg_policy_surface_limits(p, f.surface, &nl);
        for (uint32_t i = 0; i < nl && i < TG_FRAME_MAX_LIMITS; i++) {
            f.limits[i].id = ids[i];
            f.limits[i].v = (tg_value_t){.type = TG_VT_NUMBER, .num = 5000};
        }
        f.n_limits = nl;
    }
    r->v = v;
    r->n = (size_t)o->count;
    r->samples = malloc(r->n * sizeof *r->samples);
    if (r->samples == NULL) {
        json_decref(req);
        return fail("out of memory");
    }
    /* Taken once, as a caller holding the policy would: the loops time the kernel alone. */
    const tg_kernel_tables_t *kt = tg_policy_tables(p);
    tg_decision_t d;
    for (long i = 0; i < o->warmup; i++) {
        tg_kernel_decide(&d, kt, &f);
        sink += (unsigned)d.verdict;
    }
    int64_t loop0 = now_ns();
    for (size_t i = 0; i < r->n; i++) {
        int64_t t0 = now_ns();
        tg_kernel_decide(&d, kt, &f);
        int64_t t1 = now_ns();
        r->samples[i] = t1 - t0;
        sink += (unsigned)d.verdict;
        r->wrong += d.verdict != v->expect;
    }
    r->per_call_s = (double)(now_ns() - loop0) / 1e9;
    r->d = d;
    tg_bench_sort(r->samples, r->n);

    /* Batched: the clock cost is paid once per `batch` decisions. */
    size_t batches = (size_t)(o->count / o->batch);
    if (batches < 1) {
        batches = 1;
    }
    int64_t *per = malloc(batches * sizeof *per);
    if (per == NULL) {
        json_decref(req);
        return fail("out of memory");
    }
    int64_t c0 = cpu_ns();
    for (size_t b = 0; b < batches; b++) {
        int64_t t0 = now_ns();
        for (long i = 0; i < o->batch; i++) {
            tg_kernel_decide(&d, kt, &f);
            sink += (unsigned)d.verdict;
        }
        per[b] = now_ns() - t0;
    }
    summarize(&r->kernel, per, batches, o->batch, cpu_ns() - c0);

    /* Frame conversion from the parsed request (outside the kernel), a tenth as many. */
    size_t fbatches = batches / 10 > 0 ? batches / 10 : 1;
    c0 = cpu_ns();
    for (size_t b = 0; b < fbatches; b++) {
        int64_t t0 = now_ns();
        for (long i = 0; i < o->batch; i++) {
            tg_err_t rc = tg_frame_from_request(&f, NULL, p, req, NULL);
            sink += (unsigned)rc;
        }
        per[b] = now_ns() - t0;
    }
    summarize(&r->frame, per, fbatches, o->batch, cpu_ns() - c0);
    free(per);
    json_decref(req);
    return 0;
}

static tg_err_t put_stats(tg_buf_t *b, const char *key, int64_t ns) {
    return tg_buf_printf(b, "\"%s_ns\":%lld,\"%s_ms\":%.6f,", key, (long long)ns, key,
                         (double)ns / 1e6);
}

static tg_err_t put_batched(tg_buf_t *b, const char *key, long batch, const batched_t *r) {
    return tg_buf_printf(b,
                         "\"%s\":{\"batch_size\":%ld,\"batches\":%zu,\"ns_per_op_p50\":%.2f,"
                         "\"ns_per_op_p99\":%.2f,\"ns_per_op_mean\":%.2f,"
                         "\"throughput_per_s_median_batch\":%.0f,\"throughput_per_s_mean\":%.0f,"
                         "\"throughput_per_s_thread_cpu\":%.0f},",
                         key, batch, r->batches, r->ns_p50, r->ns_p99, r->ns_mean, r->tput_median,
                         r->tput_mean, r->tput_cpu);
}

static tg_err_t write_variant(tg_buf_t *b, const result_t *r, const tg_policy_t *p,
                              const opts_t *o) {
    const int64_t *s = r->samples;
    size_t n = r->n;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += (double)s[i];
    }
    int64_t p99 = pct(s, n, 99);
    tg_err_t rc = tg_buf_puts(b, "{\"variant\":");
    rc = rc ? rc : put_json_str(b, r->v->name);
    rc = rc ? rc : tg_buf_puts(b, ",\"description\":");
    rc = rc ? rc : put_json_str(b, r->v->description);
    rc = rc ? rc : tg_buf_puts(b, ",\"request\":");
    rc = rc ? rc : tg_buf_puts(b, r->v->request);
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"policy_version\":\"%s\",\"policy_hash\":\"%s\","
                            "\"decision\":\"%s\",\"reason_code\":\"%s\",\"rule\":",
                            tg_policy_version(p), tg_policy_hash_hex(p),
                            tg_verdict_name(r->d.verdict), r->d.reason);
    rc = rc ? rc
            : (r->d.rule_id.ptr ? tg_canon_string(b, r->d.rule_id.ptr, r->d.rule_id.len)
                                : tg_buf_puts(b, "null"));
    rc = rc ? rc
            : tg_buf_printf(b, ",\"states_visited\":%u,\"rules_evaluated\":%u,",
                            (unsigned)r->d.n_states, (unsigned)r->d.rules_evaluated);
    rc = rc ? rc
            : tg_buf_printf(b, "\"per_call\":{\"iterations\":%zu,\"warmup\":%ld,", n, o->warmup);
    rc = rc ? rc : put_stats(b, "min", s[0]);
    rc = rc ? rc : put_stats(b, "p50", pct(s, n, 50));
    rc = rc ? rc : put_stats(b, "p95", pct(s, n, 95));
    rc = rc ? rc : put_stats(b, "p99", p99);
    rc = rc ? rc : put_stats(b, "p99_9", pct(s, n, 99.9));
    rc = rc ? rc : put_stats(b, "max", s[n - 1]);
    rc = rc ? rc
            : tg_buf_printf(b,
                            "\"mean_ns\":%.1f,\"includes_clock_read\":true,"
                            "\"throughput_per_s\":%.0f},",
                            sum / (double)n, (double)n * 1e9 / sum);
    rc = rc ? rc : put_batched(b, "batched", o->batch, &r->kernel);
    rc = rc ? rc : put_batched(b, "frame_conversion", o->batch, &r->frame);
    rc = rc ? rc
            : tg_buf_printf(b,
                            "\"throughput_per_s\":%.0f,\"throughput_source\":"
                            "\"batched.throughput_per_s_median_batch\",",
                            r->kernel.tput_median);
    rc = rc ? rc
            : tg_buf_printf(b,
                            "\"targets\":{\"p99_ns_max\":1000,\"throughput_per_s_min\":"
                            "5000000,\"p99_met\":%s,\"throughput_met\":%s}}",
                            p99 <= 1000 ? "true" : "false",
                            r->kernel.tput_median >= 5e6 ? "true" : "false");
    return rc;
}

/* The variant in the common run shape of docs/BENCHMARKS.md (one "runs" entry). */
static tg_err_t write_run(tg_buf_t *b, const result_t *r, const opts_t *o) {
    tg_bench_summary_t sum;
    tg_err_t rc = tg_bench_summarize(&sum, r->samples, r->n);
    rc = rc ? rc : tg_buf_puts(b, "{\"name\":");
    rc = rc ? rc : put_json_str(b, r->v->name);
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"concurrency\":1,\"iterations\":%zu,\"warmup\":%ld,"
                            "\"duration_s\":%.3f,\"requests\":%zu,\"ok\":%zu,",
                            r->n, o->warmup, r->per_call_s, r->n, r->n - r->wrong);
    rc = rc ? rc : tg_bench_put_latency(b, &sum);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : tg_bench_put_digest(b, r->samples, r->n);
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"throughput_per_s\":%.0f,\"throughput_source\":\"batched: "
                            "decisions per second of the median batch of %ld calls\","
                            "\"per_call_throughput_per_s\":%.0f,\"errors\":{\"count\":%zu,"
                            "\"rate\":%.6f,\"by_kind\":{\"unexpected_decision\":%zu}}}",
                            r->kernel.tput_median, o->batch,
                            r->per_call_s > 0 ? (double)r->n / r->per_call_s : 0.0, r->wrong,
                            (double)r->wrong / (double)r->n, r->wrong);
    return rc;
}

/* The set variant's bundle and its 100,000-line file, in a temporary directory removed once
 * loaded (the policy keeps the values). */
static int load_set_policy(tg_policy_t **out) {
    char dir[256], path[300];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tg_bench_set_XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        return fail("cannot create a temporary directory");
    }
    snprintf(path, sizeof path, "%s/payees.txt", dir);
    FILE *f = fopen(path, "w");
    for (unsigned i = 0; f != NULL && i < SET_VALUES; i++) {
        fprintf(f, "payee-%06u\n", i);
    }
    int ok = f != NULL && fclose(f) == 0;
    char bpath[300];
    snprintf(bpath, sizeof bpath, "%s/policy.json", dir);
    f = ok ? fopen(bpath, "w") : NULL;
    ok = f != NULL && fputs(SET_POLICY, f) >= 0;
    ok = f != NULL && fclose(f) == 0 && ok;
    tg_diag_t diag = {{0}};
    tg_err_t rc = ok ? tg_policy_load_file(out, bpath, &diag) : TG_ERR_IO;
    unlink(path);
    unlink(bpath);
    rmdir(dir);
    if (rc != TG_OK) {
        return fail(diag.msg[0] ? diag.msg : "cannot write the set variant's files");
    }
    return 0;
}

static int parse_opts(opts_t *o, int argc, char **argv) {
    o->count = 100000;
    o->warmup = 1000;
    o->batch = 1000;
    o->variant = "all";
    o->policy = NULL;
    o->output = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "kernel_latency_bench: %s needs a value\n", a);
            return 0;
        }
        const char *val = argv[++i];
        long *num = strcmp(a, "--count") == 0    ? &o->count
                    : strcmp(a, "--warmup") == 0 ? &o->warmup
                    : strcmp(a, "--batch") == 0  ? &o->batch
                                                 : NULL;
        if (num != NULL) {
            char *end = NULL;
            errno = 0;
            *num = strtol(val, &end, 10);
            if (errno != 0 || end == val || *end != '\0' || *num < 0 || *num > 100000000) {
                fprintf(stderr, "kernel_latency_bench: bad number for %s\n", a);
                return 0;
            }
        } else if (strcmp(a, "--variant") == 0) {
            o->variant = val;
        } else if (strcmp(a, "--policy") == 0) {
            o->policy = val;
        } else if (strcmp(a, "--output") == 0) {
            o->output = val;
        } else {
            fprintf(stderr, "kernel_latency_bench: unknown option %s\n", a);
            return 0;
        }
    }
    if (o->count < 1 || o->batch < 1) {
        fprintf(stderr, "kernel_latency_bench: --count and --batch must be at least 1\n");
        return 0;
    }
    int known = strcmp(o->variant, "all") == 0;
    for (size_t i = 0; i < N_VARIANTS; i++) {
        known |= strcmp(o->variant, VARIANTS[i].name) == 0;
    }
    if (!known) {
        fprintf(stderr,
                "kernel_latency_bench: --variant is default, spend, any_of, glob, time, set "
                "or all\n");
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    opts_t o;
    if (!parse_opts(&o, argc, argv)) {
        fprintf(stderr, "usage: kernel_latency_bench [--count N] [--warmup N] [--batch N] "
                        "[--variant default|spend|any_of|glob|time|set|limit|all] [--policy FILE] "
                        "[--output FILE]\n");
        return 2;
    }
    /* The bundled policy: --policy, else $TG_SRC/examples/policy.json, else next to this
     * source file's repository. */
    char path[4200], here[4096];
    if (o.policy != NULL) {
        snprintf(path, sizeof path, "%s", o.policy);
    } else if (getenv("TG_SRC") != NULL) {
        snprintf(path, sizeof path, "%s/examples/policy.json", getenv("TG_SRC"));
    } else {
        snprintf(here, sizeof here, "%s", __FILE__); /* <repo>/bench/kernel_latency_bench.c */
        char *slash = strrchr(here, '/');
        if (slash != NULL) {
            *slash = '\0';
            slash = strrchr(here, '/');
        }
        if (slash != NULL) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/examples/policy.json", here);
        } else {
            snprintf(path, sizeof path, "examples/policy.json");
        }
    }
    tg_policy_t *p = NULL;
    tg_diag_t diag = {{0}};
    if (tg_policy_load_file(&p, path, &diag) != TG_OK) {
        return fail(diag.msg);
    }

    /* Clock overhead: back-to-back reads. */
    size_t nclk = 100000;
    int64_t *clk = malloc(nclk * sizeof *clk);
    if (clk == NULL) {
        return fail("out of memory");
    }
    for (size_t i = 0; i < nclk; i++) {
        int64_t t0 = now_ns();
        clk[i] = now_ns() - t0;
    }
    tg_bench_sort(clk, nclk);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);

    result_t results[N_VARIANTS];
    size_t nres = 0;
    int rc = 0;
    for (size_t i = 0; i < N_VARIANTS && rc == 0; i++) {
        if (strcmp(o.variant, "all") == 0 || strcmp(o.variant, VARIANTS[i].name) == 0) {
            result_t *r = &results[nres];
            memset(r, 0, sizeof *r);
            r->p = p;
            if (VARIANTS[i].set_file) {
                if (load_set_policy(&r->own) != 0) {
                    return 2;
                }
                r->p = r->own;
            } else if (VARIANTS[i].bundle != NULL) {
                if (tg_policy_load_text(&r->own, VARIANTS[i].bundle, strlen(VARIANTS[i].bundle),
                                        &diag) != TG_OK) {
                    return fail(diag.msg);
                }
                r->p = r->own;
            }
            rc = run_variant(r, r->p, &VARIANTS[i], &o);
            if (rc != 0) {
                tg_policy_destroy(r->own);
            }
            nres += rc == 0;
        }
    }
    if (rc != 0) {
        return rc;
    }

    char cpu[256], load[256], cmd[8192], date[64];
    tg_bench_read_field(cpu, sizeof cpu, "/proc/cpuinfo", "model name");
    tg_bench_read_field(load, sizeof load, "/proc/loadavg", NULL);
    tg_bench_compile_command(cmd, sizeof cmd, "/src/kernel/kernel.c");
    struct utsname un;
    uname(&un);
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);

    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_err_t e = tg_bench_put_header(
        &b, "kernel_fsm_latency", "bench/kernel_latency_bench.c",
        "tg_kernel_decide in process, one thread, on a pre-built frame of each variant: "
        "per-call latency and batched throughput",
        "clock_gettime(CLOCK_MONOTONIC) around each call after a warm-up; raw samples kept; "
        "nearest-rank percentiles; throughput from batches of calls between two clock reads "
        "(median batch)",
        "JSON parsing, canonicalization and request hashing, idempotency/nonce lookups, receipt "
        "signing, ledger writes, HTTP; multi-thread contention; cold caches. per_call samples "
        "include one clock_gettime read (see clock.overhead_ns_p50).");
    e = e ? e
          : tg_buf_printf(&b,
                          ",\"parameters\":{\"count\":%ld,\"warmup\":%ld,\"batch\":%ld,"
                          "\"variant\":",
                          o.count, o.warmup, o.batch);
    e = e ? e : put_json_str(&b, o.variant);
    e = e ? e : tg_buf_puts(&b, ",\"policy_file\":");
    e = e ? e : put_json_str(&b, path);
    e = e ? e : tg_buf_puts(&b, "},\"host\":{\"cpu_model\":");
    e = e ? e : put_json_str(&b, cpu[0] ? cpu : "unknown");
    e = e ? e : tg_buf_printf(&b, ",\"cores\":%ld,\"kernel\":", sysconf(_SC_NPROCESSORS_ONLN));
    e = e ? e : put_json_str(&b, un.release);
    e = e ? e : tg_buf_puts(&b, ",\"loadavg_at_start\":");
    e = e ? e : put_json_str(&b, load);
    e = e ? e : tg_buf_puts(&b, "},\"build\":{\"compiler\":");
#ifdef __clang__
    e = e ? e : put_json_str(&b, "clang " __VERSION__);
#else
    e = e ? e : put_json_str(&b, "gcc " __VERSION__);
#endif
#ifdef __OPTIMIZE__
    e = e ? e : tg_buf_puts(&b, ",\"optimized\":true");
#else
    e = e ? e : tg_buf_puts(&b, ",\"optimized\":false");
#endif
#if defined(__SANITIZE_ADDRESS__)
    e = e ? e : tg_buf_puts(&b, ",\"sanitizers\":true");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    e = e ? e : tg_buf_puts(&b, ",\"sanitizers\":true");
#else
    e = e ? e : tg_buf_puts(&b, ",\"sanitizers\":false");
#endif
#else
    e = e ? e : tg_buf_puts(&b, ",\"sanitizers\":false");
#endif
    e = e ? e : tg_buf_puts(&b, ",\"kernel_compile_command\":");
    e = e ? e : put_json_str(&b, cmd);
    e = e ? e
          : tg_buf_printf(&b,
                          "},\"engine_version\":\"%s\",\"git_commit\":\"%s\",\"date\":"
                          "\"%s\",",
                          TG_ENGINE_VERSION, TG_GIT_COMMIT, date);
    e = e ? e
          : tg_buf_printf(&b,
                          "\"clock\":{\"source\":\"CLOCK_MONOTONIC\",\"resolution_ns\":%ld,"
                          "\"overhead_ns_p50\":%lld,\"overhead_ns_p99\":%lld},"
                          "\"variants\":[",
                          res.tv_nsec, (long long)pct(clk, nclk, 50),
                          (long long)pct(clk, nclk, 99));
    for (size_t i = 0; i < nres && !e; i++) {
        e = i ? tg_buf_putc(&b, ',') : TG_OK;
        e = e ? e : write_variant(&b, &results[i], results[i].p, &o);
    }
    e = e ? e : tg_buf_puts(&b, "],");
    e = e ? e : tg_bench_put_environment(&b, NULL, NULL);
    e = e ? e : tg_buf_puts(&b, ",\"runs\":[");
    for (size_t i = 0; i < nres && !e; i++) {
        e = i ? tg_buf_putc(&b, ',') : TG_OK;
        e = e ? e : write_run(&b, &results[i], &o);
    }
    e = e ? e : tg_buf_puts(&b, "]}\n");
    if (e) {
        return fail("cannot build the JSON document");
    }
    FILE *out = o.output != NULL ? fopen(o.output, "w") : stdout;
    if (out == NULL || fwrite(b.data, 1, b.len, out) != b.len ||
        (out != stdout && fclose(out) != 0)) {
        return fail("cannot write the output");
    }
    if (out == stdout) {
        fflush(stdout);
    }
    for (size_t i = 0; i < nres; i++) {
        free(results[i].samples);
        tg_policy_destroy(results[i].own);
    }
    free(clk);
    tg_buf_free(&b);
    tg_policy_destroy(p);
    size_t wrong = 0;
    for (size_t i = 0; i < nres; i++) {
        wrong += results[i].wrong;
    }
    if (wrong > 0) {
        fprintf(stderr, "kernel_latency_bench: %zu calls decided other than expected\n", wrong);
    }
    return sink == 0xFFFFFFFFu || wrong > 0 ? 1 : 0;
}
