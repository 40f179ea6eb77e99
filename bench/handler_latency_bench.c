/* handler_latency_bench.c — the request handler in process, without HTTP, and the
 * cryptography every signed receipt must pay.
 *
 * Why: the sequential target of issue 4 compares /v1/evaluate over HTTP with a static nginx
 * response. Over HTTP, the daemon's /decide already answers as fast as nginx (peerbench), so
 * what /v1/evaluate adds is its handler. This harness measures that handler alone, and the
 * part of it that no implementation of SPEC §3.3 and §6 can skip: one Ed25519 signature over
 * the 32 bytes of receiptHash, and SHA-256 over the canonical request, the canonical receipt
 * and the bearer token. Their sum is a floor under any evaluate handler on this machine.
 *
 * What it measures, one thread, every raw sample kept (nearest-rank percentiles,
 * bench/common/stats.h), clock_gettime(CLOCK_MONOTONIC) around each single call:
 *   evaluate_handler   tg_pipeline_handle on POST /v1/evaluate with bench/load/body.json, a
 *                      new idempotency key per call, --durability none (the ledger record is
 *                      written to the page cache, as in the HTTP benchmarks' none mode), the
 *                      bundled policy: parse, auth, hash, decide, sign, store, ledger, reply
 *   decide_handler     tg_pipeline_handle on POST /decide with the same body (no receipt)
 *   sign_receipt_hash  tg_key_sign over 32 bytes, as the daemon signs receiptHash
 *   sha256_request     SHA-256 over the canonical text of the request body
 *   sha256_receipt     SHA-256 over the canonical receipt without receiptHash,
 *                      authoritySignature and authorityKeyId (SPEC §6), taken from a reply
 *   sha256_token       SHA-256 over the bearer token (the tenant lookup's digest)
 * "floor" adds the p50s of the last four: the crypto one signed receipt costs at least.
 * What it does NOT measure: HTTP (parsing, sockets, wake-ups: peerbench and
 * http_latency_bench do), fsync-mode deferral, contention between threads, cold caches.
 *
 * usage: handler_latency_bench [--count N] [--warmup N] [--policy FILE] [--body FILE]
 *                              [--output FILE]
 * Writes one JSON document (stdout without --output) in the run shape of docs/BENCHMARKS.md.
 * Exit status: 0, 1 if any call answered other than expected, 2 if it could not run.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <jansson.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "stats.h"
#include "trigguard/buf.h"
#include "trigguard/canon.h"
#include "trigguard/config.h"
#include "trigguard/io.h"
#include "trigguard/keys.h"
#include "trigguard/log.h"
#include "trigguard/pipeline.h"
#include "trigguard/sha256.h"
#include "trigguard/version.h"

#define TOKEN "handler-bench-token-0123456789"
#define IDEM_MARK "{{IDEM}}"

typedef struct {
    const char *name;
    const char *what;
    int64_t *s; /* sorted after the run */
    size_t n;
    size_t wrong;
    double seconds;
} run_t;

static volatile unsigned sink;

/* The request template (bench/load/body.json is about 300 bytes). */
#define BODY_FILE_MAX ((size_t)1024 * 1024)

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "handler_latency_bench: %s\n", what);
    return 2;
}

/* <repo>/<rel> from this source file's path, or $TG_SRC/<rel>. */
static void repo_path(char *out, size_t cap, const char *rel) {
    if (getenv("TG_SRC") != NULL) {
        snprintf(out, cap, "%s/%s", getenv("TG_SRC"), rel);
        return;
    }
    char here[4096];
    snprintf(here, sizeof here, "%s", __FILE__); /* <repo>/bench/handler_latency_bench.c */
    char *slash = strrchr(here, '/');
    if (slash != NULL) {
        *slash = '\0';
        slash = strrchr(here, '/');
    }
    if (slash != NULL) {
        *slash = '\0';
        snprintf(out, cap, "%s/%s", here, rel);
    } else {
        snprintf(out, cap, "%s", rel);
    }
}

/* The body with {{IDEM}} replaced by key (or the template as it is without the mark). */
static void fill_body(tg_buf_t *b, const char *tmpl, const char *key) {
    tg_buf_reset(b);
    const char *m = strstr(tmpl, IDEM_MARK);
    if (m == NULL) {
        if (tg_buf_puts(b, tmpl) != TG_OK) {
            tg_buf_reset(b);
        }
        return;
    }
    if (tg_buf_append(b, tmpl, (size_t)(m - tmpl)) != TG_OK || tg_buf_puts(b, key) != TG_OK ||
        tg_buf_puts(b, m + strlen(IDEM_MARK)) != TG_OK) {
        tg_buf_reset(b); /* out of memory: an empty body, answered 400 and counted wrong */
    }
}

/* One request through the handler; returns its status. out receives the reply body. */
static int handle(tg_pipeline_t *p, const char *path, const tg_buf_t *body, tg_buf_t *out) {
    tg_exchange_t ex;
    memset(&ex, 0, sizeof ex);
    ex.method = "POST";
    ex.path = path;
    ex.authorization = "Bearer " TOKEN;
    ex.content_type = "application/json";
    snprintf(ex.request_id, sizeof ex.request_id, "bench");
    ex.body = body->data;
    ex.body_len = body->len;
    ex.url_bytes = strlen(path);
    ex.start_ns = now_ns();
    tg_buf_init(&ex.out, 0);
    tg_pipeline_handle(p, &ex);
    int status = ex.status;
    if (out != NULL) {
        tg_buf_reset(out);
        if (ex.out.len > 0 && tg_buf_append(out, ex.out.data, ex.out.len) != TG_OK) {
            status = 0;
        }
    }
    tg_buf_free(&ex.out);
    return status;
}

static int run_handler(run_t *r, tg_pipeline_t *p, const char *path, const char *tmpl, long warmup,
                       const char *run_id) {
    tg_buf_t body;
    tg_buf_init(&body, 0);
    char key[96];
    for (long i = 0; i < warmup; i++) {
        snprintf(key, sizeof key, "%s-%s-w%ld", run_id, r->name, i);
        fill_body(&body, tmpl, key);
        sink += (unsigned)handle(p, path, &body, NULL);
    }
    int64_t loop0 = now_ns();
    for (size_t i = 0; i < r->n; i++) {
        snprintf(key, sizeof key, "%s-%s-%zu", run_id, r->name, i);
        fill_body(&body, tmpl, key); /* outside the timed call */
        int64_t t0 = now_ns();
        int status = handle(p, path, &body, NULL);
        r->s[i] = now_ns() - t0;
        r->wrong += status != 200;
    }
    r->seconds = (double)(now_ns() - loop0) / 1e9;
    tg_buf_free(&body);
    return 0;
}

typedef void (*op_fn)(const void *ctx);

static void run_op(run_t *r, op_fn fn, const void *ctx, long warmup) {
    for (long i = 0; i < warmup; i++) {
        fn(ctx);
    }
    int64_t loop0 = now_ns();
    for (size_t i = 0; i < r->n; i++) {
        int64_t t0 = now_ns();
        fn(ctx);
        r->s[i] = now_ns() - t0;
    }
    r->seconds = (double)(now_ns() - loop0) / 1e9;
}

typedef struct {
    const tg_key_t *key;
    uint8_t msg[32];
} sign_ctx_t;

static void op_sign(const void *c) {
    const sign_ctx_t *s = c;
    uint8_t sig[TG_KEY_SIG_LEN];
    if (tg_key_sign(sig, s->key, s->msg, sizeof s->msg) == TG_OK) {
        sink += sig[0];
    }
}

typedef struct {
    const char *data;
    size_t len;
} bytes_t;

static void op_sha256(const void *c) {
    const bytes_t *b = c;
    uint8_t h[TG_SHA256_LEN];
    tg_sha256(h, b->data, b->len);
    sink += h[0];
}

/* Canonical text of v into out. */
static int canon_of(tg_buf_t *out, const json_t *v) {
    tg_buf_reset(out);
    return tg_canon_write(out, v, NULL) == TG_OK ? 0 : -1;
}

static tg_err_t put_str(tg_buf_t *b, const char *s) { return tg_canon_string(b, s, strlen(s)); }

static tg_err_t write_run(tg_buf_t *b, const run_t *r, long warmup) {
    tg_bench_summary_t sum;
    tg_err_t rc = tg_bench_summarize(&sum, r->s, r->n);
    rc = rc ? rc : tg_buf_puts(b, "{\"name\":");
    rc = rc ? rc : put_str(b, r->name);
    rc = rc ? rc : tg_buf_puts(b, ",\"what\":");
    rc = rc ? rc : put_str(b, r->what);
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"concurrency\":1,\"iterations\":%zu,\"warmup\":%ld,"
                            "\"duration_s\":%.3f,\"requests\":%zu,\"ok\":%zu,",
                            r->n, warmup, r->seconds, r->n, r->n - r->wrong);
    rc = rc ? rc : tg_bench_put_latency(b, &sum);
    rc = rc ? rc : tg_buf_putc(b, ',');
    rc = rc ? rc : tg_bench_put_digest(b, r->s, r->n);
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"throughput_per_s\":%.0f,\"throughput_source\":\"calls per "
                            "second of the timed loop, one thread\",\"errors\":{\"count\":%zu,"
                            "\"rate\":%.6f,\"by_kind\":{\"unexpected_status\":%zu}}}",
                            r->seconds > 0 ? (double)r->n / r->seconds : 0.0, r->wrong,
                            (double)r->wrong / (double)r->n, r->wrong);
    return rc;
}

typedef struct {
    long count, warmup;
    const char *policy, *body, *output;
} opts_t;

static int parse_opts(opts_t *o, int argc, char **argv) {
    o->count = 20000;
    o->warmup = 2000;
    o->policy = o->body = o->output = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            return 0;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--count") == 0 || strcmp(a, "--warmup") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || n < (a[2] == 'c' ? 1 : 0) || n > 10000000) {
                return 0;
            }
            *(a[2] == 'c' ? &o->count : &o->warmup) = n;
        } else if (strcmp(a, "--policy") == 0) {
            o->policy = v;
        } else if (strcmp(a, "--body") == 0) {
            o->body = v;
        } else if (strcmp(a, "--output") == 0) {
            o->output = v;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Builds the pipeline the way `trigguard serve` does: config parsed from an argv and the
 * environment (the token's digest in TRIGGUARD_API_KEYS), a fresh key, a fresh ledger. */
static int make_pipeline(tg_pipeline_t **out, tg_key_t *key, const char *dir, const char *pol) {
    char keyp[4200], ledger[4200], tokens[160];
    snprintf(keyp, sizeof keyp, "%s/key.pem", dir);
    snprintf(ledger, sizeof ledger, "%s/ledger", dir);
    if (tg_key_generate(key, "bench-1") != TG_OK ||
        tg_key_save_private(keyp, key, true, NULL) != TG_OK) {
        return fail("cannot create a signing key");
    }
    uint8_t d[TG_SHA256_LEN];
    tg_sha256(d, TOKEN, strlen(TOKEN));
    char hex[2 * sizeof d + 1];
    sodium_bin2hex(hex, sizeof hex, d, sizeof d);
    snprintf(tokens, sizeof tokens, "bench:sha256:%s", hex);
    setenv("TRIGGUARD_API_KEYS", tokens, 1);
    char *argv[] = {"serve",    "--policy",    (char *)pol,    "--key", keyp,
                    "--ledger", ledger,        "--durability", "none",  "--log-level",
                    "error",    "--retention", "3600",         NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    tg_config_t cfg;
    tg_config_action_t action;
    tg_diag_t diag = {{0}};
    if (tg_config_parse(&cfg, &action, argc, argv, &diag) != TG_OK ||
        tg_pipeline_create(out, &cfg, &diag) != TG_OK) {
        return fail(diag.msg);
    }
    tg_pipeline_set_serving(*out, true);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

/* The temporary state directory (key, ledger) goes away whatever happened. */
static void rm_tree(const char *dir) { (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

int main(int argc, char **argv) {
    opts_t o;
    if (!parse_opts(&o, argc, argv)) {
        fprintf(stderr, "usage: handler_latency_bench [--count N] [--warmup N] [--policy FILE] "
                        "[--body FILE] [--output FILE]\n");
        return 2;
    }
    if (sodium_init() < 0) {
        return fail("sodium_init failed");
    }
    char pol[4200], bodyp[4200];
    if (o.policy != NULL) {
        snprintf(pol, sizeof pol, "%s", o.policy);
    } else {
        repo_path(pol, sizeof pol, "examples/policy.json");
    }
    if (o.body != NULL) {
        snprintf(bodyp, sizeof bodyp, "%s", o.body);
    } else {
        repo_path(bodyp, sizeof bodyp, "bench/load/body.json");
    }
    tg_file_t tmpl_file;
    tg_diag_t diag = {{0}};
    if (tg_read_file(&tmpl_file, bodyp, BODY_FILE_MAX, bodyp, 0, &diag) != TG_OK) {
        fprintf(stderr, "handler_latency_bench: %s\n", diag.msg);
        return fail("cannot read the request body");
    }
    char *tmpl = tmpl_file.data; /* freed with free() below */
    size_t tlen = tmpl_file.len;
    while (tlen > 0 && (tmpl[tlen - 1] == '\n' || tmpl[tlen - 1] == '\r')) {
        tmpl[--tlen] = '\0';
    }
    tg_log_setup(TG_LOG_ERROR, TG_LOG_JSON, STDERR_FILENO);
    tg_json_alloc_install(); /* the daemon's request arenas, as `serve` installs them */

    char dir[] = "/tmp/tg-handler-bench.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        return fail("cannot create a temporary directory");
    }
    tg_key_t key;
    tg_pipeline_t *p = NULL;
    int rc = make_pipeline(&p, &key, dir, pol);
    if (rc != 0) {
        rm_tree(dir);
        return rc;
    }
    char run_id[32];
    snprintf(run_id, sizeof run_id, "hb%lld", (long long)time(NULL));

    enum { EVAL, DECIDE, SIGN, SHA_REQ, SHA_RCPT, SHA_TOKEN, NRUNS };
    static const char *const names[NRUNS] = {"evaluate_handler",  "decide_handler",
                                             "sign_receipt_hash", "sha256_request",
                                             "sha256_receipt",    "sha256_token"};
    static const char *const whats[NRUNS] = {
        "tg_pipeline_handle, POST /v1/evaluate, new idempotency key per call, durability none",
        "tg_pipeline_handle, POST /decide, same body",
        "tg_key_sign over 32 bytes (receiptHash), Ed25519, libsodium",
        "SHA-256 over the canonical text of the request body",
        ("SHA-256 over the canonical receipt without receiptHash, authoritySignature, "
         "authorityKeyId"),
        "SHA-256 over the bearer token"};
    run_t runs[NRUNS];
    memset(runs, 0, sizeof runs);
    for (int i = 0; i < NRUNS; i++) {
        runs[i].name = names[i];
        runs[i].what = whats[i];
        runs[i].n = (size_t)o.count;
        runs[i].s = malloc(runs[i].n * sizeof *runs[i].s);
        if (runs[i].s == NULL) {
            return fail("out of memory");
        }
    }

    /* One evaluate first: its receipt gives the canonical receipt the hash runs over. */
    tg_buf_t body, reply, ctext, rtext;
    tg_buf_init(&body, 0);
    tg_buf_init(&reply, 0);
    tg_buf_init(&ctext, 0);
    tg_buf_init(&rtext, 0);
    fill_body(&body, tmpl, run_id);
    int status = handle(p, "/v1/evaluate", &body, &reply);
    json_t *doc = status == 200 ? json_loadb(reply.data, reply.len, 0, NULL) : NULL;
    json_t *rcpt = doc != NULL ? json_object_get(doc, "receipt") : NULL;
    json_t *req = json_loadb(body.data, body.len, 0, NULL);
    if (rcpt == NULL || req == NULL) {
        fprintf(stderr, "handler_latency_bench: first evaluate answered %d: %.*s\n", status,
                (int)reply.len, reply.data != NULL ? reply.data : "");
        rm_tree(dir);
        return 2;
    }
    json_object_del(rcpt, "receiptHash");
    json_object_del(rcpt, "authoritySignature");
    json_object_del(rcpt, "authorityKeyId");
    if (canon_of(&rtext, rcpt) != 0 || canon_of(&ctext, req) != 0) {
        rm_tree(dir);
        return fail("cannot canonicalize the receipt or the request");
    }

    rc = run_handler(&runs[EVAL], p, "/v1/evaluate", tmpl, o.warmup, run_id);
    rc = rc ? rc : run_handler(&runs[DECIDE], p, "/decide", tmpl, o.warmup, run_id);
    sign_ctx_t sc = {.key = &key};
    randombytes_buf(sc.msg, sizeof sc.msg);
    run_op(&runs[SIGN], op_sign, &sc, o.warmup);
    bytes_t breq = {ctext.data, ctext.len}, brcpt = {rtext.data, rtext.len},
            btok = {TOKEN, strlen(TOKEN)};
    run_op(&runs[SHA_REQ], op_sha256, &breq, o.warmup);
    run_op(&runs[SHA_RCPT], op_sha256, &brcpt, o.warmup);
    run_op(&runs[SHA_TOKEN], op_sha256, &btok, o.warmup);
    tg_pipeline_destroy(p);
    tg_key_wipe(&key);
    rm_tree(dir);
    if (rc != 0) {
        return rc;
    }
    for (int i = 0; i < NRUNS; i++) {
        tg_bench_sort(runs[i].s, runs[i].n);
    }
    int64_t med[NRUNS];
    for (int i = 0; i < NRUNS; i++) {
        med[i] = runs[i].s[tg_bench_rank(runs[i].n, 50) - 1];
    }
    int64_t floor_ns = med[SIGN] + med[SHA_REQ] + med[SHA_RCPT] + med[SHA_TOKEN];

    char date[64];
    tg_bench_utc_now(date, sizeof date);
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_err_t e = tg_bench_put_header(
        &b, "handler_latency", "bench/handler_latency_bench.c",
        "the request handler in process (no HTTP), one thread, and the cryptography one signed "
        "receipt cannot skip (SPEC 3.3, 6)",
        "clock_gettime(CLOCK_MONOTONIC) around each single call after a warm-up; raw samples "
        "kept; nearest-rank percentiles",
        "HTTP parsing, sockets and wake-ups; fsync-mode deferral; contention between threads; "
        "cold caches. Samples include one clock read.");
    e = e ? e
          : tg_buf_printf(&b,
                          ",\"parameters\":{\"count\":%ld,\"warmup\":%ld,\"request_bytes\":%zu,"
                          "\"canonical_request_bytes\":%zu,\"canonical_receipt_bytes\":%zu,"
                          "\"policy_file\":",
                          o.count, o.warmup, body.len, ctext.len, rtext.len);
    e = e ? e : put_str(&b, pol);
    e = e ? e : tg_buf_puts(&b, ",\"body_file\":");
    e = e ? e : put_str(&b, bodyp);
    e = e ? e
          : tg_buf_printf(
                &b,
                "},\"engine_version\":\"%s\",\"git_commit\":\"%s\",\"date\":\"%s\","
                "\"floor\":{\"what\":\"p50 of sign_receipt_hash + sha256_request + "
                "sha256_receipt + sha256_token: the crypto any signed receipt costs on this "
                "machine\",\"mandatory_crypto_p50_ns\":%lld,\"evaluate_handler_p50_ns\":%lld,"
                "\"decide_handler_p50_ns\":%lld,\"evaluate_minus_decide_p50_ns\":%lld},",
                TG_ENGINE_VERSION, TG_GIT_COMMIT, date, (long long)floor_ns, (long long)med[EVAL],
                (long long)med[DECIDE], (long long)(med[EVAL] - med[DECIDE]));
    e = e ? e : tg_bench_put_environment(&b, "none", NULL);
    e = e ? e : tg_buf_puts(&b, ",\"runs\":[");
    for (int i = 0; i < NRUNS && !e; i++) {
        e = i ? tg_buf_putc(&b, ',') : TG_OK;
        e = e ? e : write_run(&b, &runs[i], o.warmup);
    }
    e = e ? e : tg_buf_puts(&b, "]}\n");
    if (e) {
        return fail("cannot build the JSON document");
    }
    FILE *out = o.output != NULL ? fopen(o.output, "w") : stdout;
    if (out == NULL || fwrite(b.data, 1, b.len, out) != b.len ||
        (out != stdout ? fclose(out) != 0 : fflush(stdout) != 0)) {
        return fail("cannot write the output");
    }
    size_t wrong = runs[EVAL].wrong + runs[DECIDE].wrong;
    for (int i = 0; i < NRUNS; i++) {
        free(runs[i].s);
    }
    json_decref(doc);
    json_decref(req);
    tg_buf_free(&b);
    tg_buf_free(&body);
    tg_buf_free(&reply);
    tg_buf_free(&ctext);
    tg_buf_free(&rtext);
    free(tmpl);
    if (wrong > 0) {
        fprintf(stderr, "handler_latency_bench: %zu calls answered other than 200\n", wrong);
    }
    return sink == 0xFFFFFFFFu || wrong > 0 ? 1 : 0;
}
