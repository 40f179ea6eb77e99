/* test_pipeline.c — the request pipeline in process, without HTTP: execution ids, the
 * receipt index (live and rebuilt from the ledger) and the start refused when the tables
 * cannot hold the ledger's live entries. Every test builds its pipeline the way
 * `trigguard serve` does (config from an argv, the tokens from the environment) over a
 * ledger of its own, durability none, so a decision is settled before tg_pipeline_handle
 * returns. */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp, setenv */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>

#include "trigguard/buf.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/config.h"
#include "trigguard/keys.h"
#include "trigguard/ledger.h"
#include "trigguard/log.h"
#include "trigguard/pipeline.h"

#define POLICY "../integration/data/daemon_policy.json"
#define REQ_BODY "{\"surface\":\"example\",\"action\":\"noop\",\"actor\":\"someone\""

typedef struct {
    char dir[64];
    char key[128];
    char log[128];
    int log_fd;
} env_t;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state) {
    env_t *e = calloc(1, sizeof *e);
    assert_non_null(e);
    snprintf(e->dir, sizeof e->dir, "/tmp/tg-test-pipeline.XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->key, sizeof e->key, "%s/key.pem", e->dir);
    snprintf(e->log, sizeof e->log, "%s/log", e->dir);
    tg_key_t k;
    assert_int_equal(tg_key_generate(&k, "test-pipeline-1"), TG_OK);
    assert_int_equal(tg_key_save_private(e->key, &k, true, NULL), TG_OK);
    tg_key_wipe(&k);
    /* error lines (the ones these tests look for) go to a file of their own */
    e->log_fd = open(e->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    assert_true(e->log_fd >= 0);
    tg_log_setup(TG_LOG_ERROR, TG_LOG_JSON, e->log_fd);
    setenv("TRIGGUARD_API_KEYS", "acme:tok-acme,beta:tok-beta", 1);
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env_t *e = *state;
    tg_log_setup(TG_LOG_ERROR, TG_LOG_JSON, STDERR_FILENO);
    close(e->log_fd);
    (void)nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(e);
    return 0;
}

/* A pipeline over <dir>/<ledger>; extra serve arguments (NULL-terminated) may follow. */
static tg_err_t open_pipeline(tg_pipeline_t **out, const env_t *e, const char *ledger,
                              tg_diag_t *diag, ...) {
    char lpath[192];
    snprintf(lpath, sizeof lpath, "%s/%s", e->dir, ledger);
    char *argv[32] = {"serve", "--policy",     POLICY, "--key",       (char *)e->key, "--ledger",
                      lpath,   "--durability", "none", "--log-level", "error"};
    int argc = 11;
    va_list ap;
    va_start(ap, diag);
    for (char *a = va_arg(ap, char *); a != NULL && argc < 31; a = va_arg(ap, char *)) {
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    tg_config_t cfg;
    tg_config_action_t action;
    tg_err_t rc = tg_config_parse(&cfg, &action, argc, argv, diag);
    if (rc == TG_OK) {
        rc = tg_pipeline_create(out, &cfg, diag);
    }
    if (rc == TG_OK) {
        tg_pipeline_set_serving(*out, true);
    }
    return rc;
}

typedef struct {
    int status;
    tg_buf_t body;
} reply_t;

/* One request through the handler, as the HTTP layer hands it over. */
static void call(reply_t *r, tg_pipeline_t *p, const char *method, const char *path,
                 const char *body) {
    tg_exchange_t ex;
    memset(&ex, 0, sizeof ex);
    ex.method = method;
    ex.path = path;
    ex.authorization = "Bearer tok-acme";
    ex.content_type = body != NULL ? "application/json" : NULL;
    snprintf(ex.request_id, sizeof ex.request_id, "test-pipeline");
    ex.body = body != NULL ? body : "";
    ex.body_len = body != NULL ? strlen(body) : 0;
    ex.url_bytes = strlen(path);
    ex.start_ns = tg_clock_mono_ns();
    tg_buf_init(&ex.out, 0);
    tg_pipeline_handle(p, &ex);
    r->status = ex.status;
    r->body = ex.out;
    assert_non_null(r->body.data);
}

static void reply_free(reply_t *r) { tg_buf_free(&r->body); }

/* POST /v1/evaluate with REQ_BODY plus extra members; the answer must be 200 with a receipt.
 * Writes its executionId, requestHash and (if receipt not NULL) the receipt's text. */
static void evaluate(tg_pipeline_t *p, const char *extra, char exec_id[64], char req_hash[80],
                     tg_buf_t *receipt) {
    char body[512];
    snprintf(body, sizeof body, "%s%s}", REQ_BODY, extra);
    reply_t r;
    call(&r, p, "POST", "/v1/evaluate", body);
    if (r.status != 200) {
        fail_msg("evaluate %s: %d %s", body, r.status, r.body.data);
    }
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    assert_non_null(j);
    const char *id = json_string_value(json_object_get(j, "execution_id"));
    const char *rh = json_string_value(json_object_get(j, "request_hash"));
    assert_non_null(id);
    assert_non_null(rh);
    snprintf(exec_id, 64, "%s", id);
    snprintf(req_hash, 80, "%s", rh);
    json_t *rc = json_object_get(j, "receipt");
    assert_non_null(rc);
    assert_string_equal(json_string_value(json_object_get(rc, "executionId")), id);
    if (receipt != NULL) {
        char *text = json_dumps(rc, JSON_COMPACT);
        assert_non_null(text);
        tg_buf_reset(receipt);
        assert_int_equal(tg_buf_puts(receipt, text), TG_OK);
        free(text);
    }
    json_decref(j);
    reply_free(&r);
}

/* GET /v1/receipts/<id>: its status; the receipt's bytes go to out. */
static int get_receipt(tg_pipeline_t *p, const char *id, tg_buf_t *out) {
    char path[128];
    snprintf(path, sizeof path, "/v1/receipts/%.64s", id);
    reply_t r;
    call(&r, p, "GET", path, NULL);
    int status = r.status;
    if (out != NULL) {
        tg_buf_reset(out);
        assert_int_equal(tg_buf_append(out, r.body.data, r.body.len), TG_OK);
    }
    reply_free(&r);
    return status;
}

/* The value of an unlabelled counter in GET /metrics. */
static unsigned long long metric(tg_pipeline_t *p, const char *name) {
    reply_t r;
    call(&r, p, "GET", "/metrics", NULL);
    assert_int_equal(r.status, 200);
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *at = strstr(r.body.data, want);
    if (at == NULL) {
        fail_msg("no %s in /metrics", name);
    }
    unsigned long long v = strtoull(at + strlen(want), NULL, 10);
    reply_free(&r);
    return v;
}

/* How many lines of the error log mention needle. */
static int log_count(const env_t *e, const char *needle) {
    FILE *f = fopen(e->log, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        n += strstr(line, needle) != NULL;
    }
    fclose(f);
    return n;
}

/* SPEC §5's executionId for an idempotency key, written out. */
static void spec_exec_id(char out[64], const char *tenant, const char *surface, const char *rh,
                         const char *key) {
    unsigned char in[512];
    size_t n = 0;
    const char *parts[] = {tenant, surface, rh, key};
    for (size_t i = 0; i < 4; i++) {
        size_t l = strlen(parts[i]);
        memcpy(in + n, parts[i], l);
        n += l;
        if (i < 3) {
            in[n++] = 0;
        }
    }
    uint8_t h[32];
    crypto_hash_sha256(h, in, n);
    memcpy(out, "exec_", 5);
    tg_hex(out + 5, h, 16);
    out[37] = '\0';
}

/* A ledger of crafted receipt records: meta as the pipeline writes it (tenant acme, no key
 * or nonce), payloads as given. */
static void craft_ledger(const env_t *e, const char *name, const char *rh, const tg_buf_t *payloads,
                         size_t n) {
    char dir[192];
    snprintf(dir, sizeof dir, "%s/%s", e->dir, name);
    tg_ledger_opts_t lo = TG_LEDGER_OPTS_INIT;
    lo.dir = dir;
    lo.durability = TG_DURABILITY_NONE;
    tg_ledger_t *l = NULL;
    tg_diag_t diag = {{0}};
    if (tg_ledger_open(&l, &lo, NULL, NULL, NULL, &diag) != TG_OK) {
        fail_msg("ledger %s: %s", dir, diag.msg);
    }
    char meta[256];
    snprintf(meta, sizeof meta, "{\"at\":%lld,\"rh\":\"%s\",\"s\":200,\"t\":\"acme\"}",
             (long long)tg_clock_now_ms(), rh);
    for (size_t i = 0; i < n; i++) {
        tg_ledger_pos_t pos;
        assert_int_equal(tg_ledger_append_now(l, TG_LEDGER_TYPE_RECEIPT, meta, strlen(meta),
                                              payloads[i].data, payloads[i].len, &pos),
                         TG_OK);
        assert_int_equal(pos.seq, i + 1);
    }
    tg_ledger_close(l);
}

/* ---- tests ------------------------------------------------------------------------------ */

/* Issue 17: a key "X" and a nonce "X" on the same request gave two executions one id, and
 * the index kept only the second. */
static void test_exec_id_key_and_nonce(void **state) {
    env_t *e = *state;
    tg_pipeline_t *p = NULL;
    tg_diag_t diag = {{0}};
    assert_int_equal(open_pipeline(&p, e, "ledger-kinds", &diag, NULL), TG_OK);
    char id_k[64], id_n[64], id_n2[64], id_none[64], rh[80], rh2[80], want[64];
    tg_buf_t rk, rn, got;
    tg_buf_init(&rk, 0);
    tg_buf_init(&rn, 0);
    tg_buf_init(&got, 0);
    evaluate(p, ",\"idempotency_key\":\"X\"", id_k, rh, &rk);
    evaluate(p, ",\"nonce\":\"X\"", id_n, rh2, &rn);
    assert_string_equal(rh, rh2); /* the same request: only the kind of "X" differs */
    assert_string_not_equal(id_k, id_n);
    /* the key's id is SPEC §5's, byte for byte */
    spec_exec_id(want, "acme", "example", rh, "X");
    assert_string_equal(id_k, want);
    /* each id reads back its own receipt */
    assert_int_equal(get_receipt(p, id_k, &got), 200);
    assert_int_equal(got.len, rk.len);
    assert_memory_equal(got.data, rk.data, rk.len);
    assert_int_equal(get_receipt(p, id_n, &got), 200);
    assert_int_equal(got.len, rn.len);
    assert_memory_equal(got.data, rn.data, rn.len);
    /* a retry of the key is the same execution; other nonces and no key at all are new ones */
    char id_k2[64];
    evaluate(p, ",\"idempotency_key\":\"X\"", id_k2, rh2, NULL);
    assert_string_equal(id_k2, id_k);
    evaluate(p, ",\"nonce\":\"Y\"", id_n2, rh2, NULL);
    evaluate(p, "", id_none, rh2, NULL);
    assert_string_not_equal(id_n2, id_n);
    assert_string_not_equal(id_none, id_n);
    assert_string_not_equal(id_none, id_k);
    assert_int_equal(metric(p, "trigguard_receipt_index_collisions_total"), 0);
    tg_buf_free(&rk);
    tg_buf_free(&rn);
    tg_buf_free(&got);
    tg_pipeline_destroy(p);
}

/* A live receipt whose id is already indexed for another record: the index keeps the first,
 * and the collision is logged and counted. Forced with a ledger that already holds a record
 * with the id the request's key will get (the SPEC §5 id is deterministic), but not the key. */
static void test_index_collision_live(void **state) {
    env_t *e = *state;
    tg_pipeline_t *p = NULL;
    tg_diag_t diag = {{0}};
    char id[64], rh[80], id2[64], rh2[80];
    tg_buf_t first, got;
    tg_buf_init(&first, 0);
    tg_buf_init(&got, 0);
    assert_int_equal(open_pipeline(&p, e, "ledger-live-a", &diag, NULL), TG_OK);
    evaluate(p, ",\"idempotency_key\":\"K-live\"", id, rh, &first);
    tg_pipeline_destroy(p);

    craft_ledger(e, "ledger-live-b", rh, &first, 1);
    int before = log_count(e, "receipt_index_collision");
    assert_int_equal(open_pipeline(&p, e, "ledger-live-b", &diag, NULL), TG_OK);
    assert_int_equal(metric(p, "trigguard_receipt_index_collisions_total"), 0);
    evaluate(p, ",\"idempotency_key\":\"K-live\"", id2, rh2, NULL);
    assert_string_equal(id2, id);
    assert_int_equal(metric(p, "trigguard_receipt_index_collisions_total"), 1);
    assert_int_equal(log_count(e, "receipt_index_collision"), before + 1);
    assert_int_equal(log_count(e, "is already indexed for ledger seq 1; this request's receipt "
                                  "is at seq 2"),
                     1);
    /* GET answers with the receipt it would have answered with before */
    assert_int_equal(get_receipt(p, id, &got), 200);
    assert_int_equal(got.len, first.len);
    assert_memory_equal(got.data, first.data, first.len);
    tg_pipeline_destroy(p);
    tg_buf_free(&first);
    tg_buf_free(&got);
}

/* Two records with one id in the ledger: the rebuilt index keeps the first and says so. */
static void test_index_collision_replay(void **state) {
    env_t *e = *state;
    tg_pipeline_t *p = NULL;
    tg_diag_t diag = {{0}};
    char id[64], rh[80];
    tg_buf_t recs[2], got;
    tg_buf_init(&recs[0], 0);
    tg_buf_init(&recs[1], 0);
    tg_buf_init(&got, 0);
    assert_int_equal(open_pipeline(&p, e, "ledger-replay-a", &diag, NULL), TG_OK);
    evaluate(p, "", id, rh, &recs[0]);
    tg_pipeline_destroy(p);
    /* the second record: the same receipt, spelled with a trailing blank */
    assert_int_equal(tg_buf_append(&recs[1], recs[0].data, recs[0].len), TG_OK);
    assert_int_equal(tg_buf_putc(&recs[1], ' '), TG_OK);
    craft_ledger(e, "ledger-replay-b", rh, recs, 2);

    int before = log_count(e, "receipt_index_collision");
    assert_int_equal(open_pipeline(&p, e, "ledger-replay-b", &diag, NULL), TG_OK);
    assert_int_equal(metric(p, "trigguard_receipt_index_collisions_total"), 1);
    assert_int_equal(log_count(e, "receipt_index_collision"), before + 1);
    assert_int_equal(log_count(e, "ledger seq 2: executionId"), 1);
    assert_int_equal(get_receipt(p, id, &got), 200);
    assert_int_equal(got.len, recs[0].len);
    assert_memory_equal(got.data, recs[0].data, recs[0].len);
    tg_pipeline_destroy(p);
    tg_buf_free(&recs[0]);
    tg_buf_free(&recs[1]);
    tg_buf_free(&got);
}

/* Issue 17: a restart with a smaller --store-max-entries dropped receipt index entries
 * without a word. Now the start is refused, naming the numbers; with room it goes on. */
static void test_restart_smaller_caps(void **state) {
    env_t *e = *state;
    tg_pipeline_t *p = NULL;
    tg_diag_t diag = {{0}};
    char id[64], rh[80], ids[18][64];
    /* 18 receipts, no keys: only the receipt index is too small for 16 */
    assert_int_equal(open_pipeline(&p, e, "ledger-caps-r", &diag, NULL), TG_OK);
    for (int i = 0; i < 18; i++) {
        evaluate(p, "", ids[i], rh, NULL);
    }
    tg_pipeline_destroy(p);
    p = NULL;
    assert_int_equal(
        open_pipeline(&p, e, "ledger-caps-r", &diag, "--store-max-entries", "16", (char *)NULL),
        TG_ERR_CONFIG);
    assert_null(p);
    if (strstr(diag.msg, "receipt index: the ledger holds 18 live entries but "
                         "--store-max-entries is 16") == NULL ||
        strstr(diag.msg, "--store-max-entries 18 or more") == NULL) {
        fail_msg("diag: %s", diag.msg);
    }
    assert_int_equal(log_count(e, "store_too_small"), 1);
    assert_int_equal(
        open_pipeline(&p, e, "ledger-caps-r", &diag, "--store-max-entries", "18", (char *)NULL),
        TG_OK);
    for (int i = 0; i < 18; i++) {
        assert_int_equal(get_receipt(p, ids[i], NULL), 200);
    }
    tg_pipeline_destroy(p);

    /* 9 requests with a key and a nonce: 18 idempotency entries, 9 receipts */
    assert_int_equal(open_pipeline(&p, e, "ledger-caps-k", &diag, NULL), TG_OK);
    for (int i = 0; i < 9; i++) {
        char extra[96];
        snprintf(extra, sizeof extra, ",\"idempotency_key\":\"k%d\",\"nonce\":\"n%d\"", i, i);
        evaluate(p, extra, id, rh, NULL);
    }
    tg_pipeline_destroy(p);
    p = NULL;
    assert_int_equal(
        open_pipeline(&p, e, "ledger-caps-k", &diag, "--store-max-entries", "16", (char *)NULL),
        TG_ERR_CONFIG);
    if (strstr(diag.msg, "idempotency keys and nonces: the ledger holds 18 live entries but "
                         "--store-max-entries is 16") == NULL) {
        fail_msg("diag: %s", diag.msg);
    }
    assert_int_equal(log_count(e, "store_too_small"), 2);
    assert_int_equal(log_count(e, "receipt index: the ledger holds 9"), 0);
}

/* SIGHUP's reload against requests in flight on other threads (the swap itself is tested
 * with stalled readers in test_swap): every request gets an answer from a whole policy. */
typedef struct {
    tg_pipeline_t *p;
    atomic_int stop;
    atomic_int wrong;
    atomic_int done;
} load_t;

static void *decide_loop(void *arg) {
    load_t *l = arg;
    while (!atomic_load(&l->stop)) {
        reply_t r;
        call(&r, l->p, "POST", "/decide", REQ_BODY "}");
        if (r.status != 200 || strstr(r.body.data, "\"policy_version\":\"itest-1\"") == NULL) {
            atomic_fetch_add(&l->wrong, 1);
        }
        reply_free(&r);
        atomic_fetch_add(&l->done, 1);
    }
    return NULL;
}

static void test_reload_under_load(void **state) {
    env_t *e = *state;
    tg_diag_t diag = {{0}};
    load_t l;
    memset(&l, 0, sizeof l);
    assert_int_equal(open_pipeline(&l.p, e, "ledger-reload", &diag, NULL), TG_OK);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, decide_loop, &l), 0);
    }
    for (int i = 0; i < 40; i++) {
        assert_int_equal(tg_pipeline_reload(l.p, &diag), TG_OK);
    }
    atomic_store(&l.stop, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    assert_int_equal(atomic_load(&l.wrong), 0);
    assert_true(atomic_load(&l.done) > 0);
    tg_pipeline_destroy(l.p);
}

/* ---- reloading tokens and keys --------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(tmp, 0600), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static int status_as(tg_pipeline_t *p, const char *auth, const char *path) {
    tg_exchange_t ex;
    memset(&ex, 0, sizeof ex);
    ex.method = "POST";
    ex.path = path;
    ex.authorization = auth;
    ex.content_type = "application/json";
    snprintf(ex.request_id, sizeof ex.request_id, "test-reload");
    ex.body = REQ_BODY "}";
    ex.body_len = strlen(ex.body);
    ex.url_bytes = strlen(path);
    ex.start_ns = tg_clock_mono_ns();
    tg_buf_init(&ex.out, 0);
    tg_pipeline_handle(p, &ex);
    tg_buf_free(&ex.out);
    return ex.status;
}

static void *evaluate_loop(void *arg) {
    load_t *l = arg;
    while (!atomic_load(&l->stop)) {
        if (status_as(l->p, "Bearer tok-acme", "/v1/evaluate") != 200) {
            atomic_fetch_add(&l->wrong, 1);
        }
        atomic_fetch_add(&l->done, 1);
    }
    return NULL;
}

/* Tokens and keys swapped 40 times under three evaluating threads: no request fails (ASan
 * and TSan see every reader's use of a table or key set a reload frees), a token dropped
 * from the file is refused right after the reload that dropped it and one added works. */
static void test_reload_tokens_and_keys_under_load(void **state) {
    env_t *e = *state;
    char tokens[128], key2[128], tok_x[600];
    snprintf(tokens, sizeof tokens, "%s/tokens.json", e->dir);
    snprintf(key2, sizeof key2, "%s/key2.pem", e->dir);
    uint8_t h[32];
    char hex[65];
    crypto_hash_sha256(h, (const uint8_t *)"tok-x", 5);
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
    }
    snprintf(tok_x, sizeof tok_x, "[{\"tenant\":\"acme\",\"token_sha256\":\"%s\"}]", hex);
    write_text(tokens, "[]");
    tg_key_t k;
    assert_int_equal(tg_key_generate(&k, "test-pipeline-2"), TG_OK);
    assert_int_equal(tg_key_save_private(key2, &k, true, NULL), TG_OK);
    tg_key_wipe(&k);
    tg_diag_t diag = {{0}};
    load_t l;
    memset(&l, 0, sizeof l);
    assert_int_equal(open_pipeline(&l.p, e, "ledger-reload-parts", &diag, "--tokens", tokens,
                                   "--verify-keys", key2, NULL),
                     TG_OK);
    assert_int_equal(status_as(l.p, "Bearer tok-x", "/v1/evaluate"), 401);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, evaluate_loop, &l), 0);
    }
    for (int i = 0; i < 40; i++) {
        bool with_x = i % 2 == 0;
        write_text(tokens, with_x ? tok_x : "[]");
        assert_int_equal(tg_pipeline_reload_all(l.p, "signal"), TG_OK);
        assert_int_equal(status_as(l.p, "Bearer tok-x", "/v1/evaluate"), with_x ? 200 : 401);
    }
    /* a broken file: the reload fails, the old table (without tok-x) keeps serving */
    write_text(tokens, "[{\"tenant\":\"acme\"}]");
    assert_int_equal(tg_pipeline_reload_all(l.p, "signal"), TG_ERR_CONFIG);
    assert_int_equal(status_as(l.p, "Bearer tok-acme", "/v1/evaluate"), 200);
    assert_int_equal(status_as(l.p, "Bearer tok-x", "/v1/evaluate"), 401);
    atomic_store(&l.stop, 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    assert_int_equal(atomic_load(&l.wrong), 0);
    assert_true(atomic_load(&l.done) > 0);
    tg_pipeline_destroy(l.p);
}

/* ---- every step's answers ------------------------------------------------------------- */

typedef struct {
    const char *label;
    const char *method, *path;
    const char *auth;        /* NULL: the acme token; "" none */
    const char *ctype;       /* NULL: application/json */
    const char *idem_header; /* Idempotency-Key, or NULL */
    bool body_too_large;     /* as the HTTP layer flags it */
    const char *body;
    int status;
    const char *error; /* the error body's code, or NULL for a success answer */
    const char *has;   /* a substring the body must hold, or NULL */
} case_t;

static void call_case(reply_t *r, tg_pipeline_t *p, const case_t *c) {
    tg_exchange_t ex;
    memset(&ex, 0, sizeof ex);
    ex.method = c->method;
    ex.path = c->path;
    ex.authorization = c->auth == NULL ? "Bearer tok-acme" : c->auth[0] ? c->auth : NULL;
    ex.content_type = c->ctype != NULL ? c->ctype : "application/json";
    ex.idempotency_header = c->idem_header;
    ex.body_too_large = c->body_too_large;
    snprintf(ex.request_id, sizeof ex.request_id, "test-steps");
    ex.body = c->body != NULL ? c->body : "";
    ex.body_len = strlen(ex.body);
    ex.url_bytes = strlen(c->path);
    ex.start_ns = tg_clock_mono_ns();
    tg_buf_init(&ex.out, 0);
    tg_pipeline_handle(p, &ex);
    r->status = ex.status;
    r->body = ex.out;
}

#define CHARGE(x) "{\"surface\":\"payments.charge\",\"actor\":\"agent.billing\"" x "}"

/* One request per way each step of SPEC §3.3 can end, through tg_pipeline_handle: the
 * status, the error code, and what the body must say. In order, so that the idempotency and
 * nonce cases see what the earlier ones stored. */
static const case_t cases[] = {
    /* 1-2 admit */
    {"no token", "POST", "/v1/evaluate", "", NULL, NULL, false, CHARGE(""), 401, "unauthorized",
     NULL},
    {"wrong token", "POST", "/v1/evaluate", "Bearer nope", NULL, NULL, false, CHARGE(""), 401,
     "unauthorized", NULL},
    {"body too large", "POST", "/v1/evaluate", NULL, NULL, NULL, true, "", 413, "body_too_large",
     "\"limit\":\"max_body\""},
    /* 3 parse */
    {"not JSON content", "POST", "/v1/evaluate", NULL, "text/plain", NULL, false, CHARGE(""), 415,
     "unsupported_media_type", NULL},
    {"invalid JSON", "POST", "/v1/evaluate", NULL, NULL, NULL, false, "{\"surface\":", 400,
     "invalid_json", NULL},
    {"duplicate member", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"a\",\"surface\":\"b\"}", 400, "invalid_json", NULL},
    {"too deep", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"example\",\"context\":{\"a\":"
     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1"
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
     400, "invalid_request", "\"limit\":\"max_depth\""},
    /* 3 resolve the surface */
    {"unknown surface", "POST", "/v1/evaluate", NULL, NULL, NULL, false, "{\"surface\":\"nope\"}",
     400, "unknown_surface", NULL},
    {"unknown member", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"example\",\"extra\":1}", 400, "invalid_request", NULL},
    {"wrong type", "POST", "/v1/evaluate", NULL, NULL, NULL, false, "{\"surface\":7}", 400,
     "invalid_request", NULL},
    /* 3 the transport fields */
    {"empty key", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     CHARGE(",\"idempotency_key\":\"\""), 400, "invalid_request", NULL},
    {"key header and body differ", "POST", "/v1/evaluate", NULL, NULL, "k-other", false,
     CHARGE(",\"idempotency_key\":\"k-1\""), 400, "invalid_request", NULL},
    {"empty nonce", "POST", "/v1/evaluate", NULL, NULL, NULL, false, CHARGE(",\"nonce\":\"\""), 400,
     "invalid_request", NULL},
    /* 7-9 decisions */
    {"PERMIT", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"amount\":5,\"currency\":\"USD\"},\"idempotency_key\":\"k-1\""), 200,
     NULL, "\"decision\":\"PERMIT\""},
    {"DENY on /v1/evaluate is 200", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"deploy.release\",\"context\":{\"target\":\"prod\",\"version\":\"1\"}}", 200,
     NULL, "\"decision\":\"DENY\""},
    {"DENY on /execute is 403", "POST", "/execute", NULL, NULL, NULL, false,
     "{\"surface\":\"deploy.release\",\"context\":{\"target\":\"prod\",\"version\":\"1\"}}", 403,
     NULL, "\"receipt\":"},
    {"SILENCE names the missing field", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"currency\":\"USD\"},\"idempotency_key\":\"k-silence\""), 200, NULL,
     "\"detail\":\"context.amount is missing or not of its declared type\""},
    {"SILENCE on /execute is 403, no receipt", "POST", "/execute", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"currency\":\"USD\"}"), 403, NULL, "\"decision\":\"SILENCE\""},
    {"/decide SILENCE has its detail", "POST", "/decide", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"currency\":\"USD\"}"), 200, NULL, "\"detail\":\"context.amount"},
    /* 5 idempotency */
    {"same key, same request: replay", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"amount\":5,\"currency\":\"USD\"},\"idempotency_key\":\"k-1\""), 200,
     NULL, "\"decision\":\"PERMIT\""},
    {"same key, other request: 409", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     CHARGE(",\"context\":{\"amount\":6,\"currency\":\"USD\"},\"idempotency_key\":\"k-1\""), 409,
     "idempotency_conflict", NULL},
    {"a DENY replayed on /execute is 403", "POST", "/execute", NULL, NULL, "k-deny", false,
     "{\"surface\":\"deploy.release\",\"context\":{\"target\":\"prod\",\"version\":\"1\"}}", 403,
     NULL, NULL},
    {"... and again", "POST", "/execute", NULL, NULL, "k-deny", false,
     "{\"surface\":\"deploy.release\",\"context\":{\"target\":\"prod\",\"version\":\"1\"}}", 403,
     NULL, "\"decision\":\"DENY\""},
    /* 6 nonce */
    {"nonce first use", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"example\",\"nonce\":\"n-1\"}", 200, NULL, NULL},
    {"nonce reused", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
     "{\"surface\":\"example\",\"nonce\":\"n-1\"}", 409, "replay_detected", NULL},
    /* the route table */
    {"no such route", "GET", "/nope", NULL, NULL, NULL, false, NULL, 404, "not_found", NULL},
    {"wrong method", "GET", "/v1/evaluate", NULL, NULL, NULL, false, NULL, 405,
     "method_not_allowed", NULL},
    {"healthz", "GET", "/healthz", NULL, NULL, NULL, false, NULL, 200, NULL, "\"status\":\"ok\""},
    {"readyz", "GET", "/readyz", NULL, NULL, NULL, false, NULL, 200, NULL, "\"ready\":true"},
    {"receipt of another id", "GET", "/v1/receipts/exec_00000000000000000000000000000000", NULL,
     NULL, NULL, false, NULL, 404, "not_found", NULL},
};

static void check_case(const case_t *c, const reply_t *r) {
    if (r->status != c->status) {
        fail_msg("%s: status %d, want %d (%s)", c->label, r->status, c->status,
                 r->body.data ? r->body.data : "");
    }
    if (c->error != NULL) {
        char want[96];
        snprintf(want, sizeof want, "{\"error\":\"%s\"", c->error);
        if (r->body.data == NULL || strncmp(r->body.data, want, strlen(want)) != 0) {
            fail_msg("%s: body %s, want error %s", c->label, r->body.data ? r->body.data : "",
                     c->error);
        }
    }
    if (c->has != NULL && (r->body.data == NULL || strstr(r->body.data, c->has) == NULL)) {
        fail_msg("%s: body %s lacks %s", c->label, r->body.data ? r->body.data : "", c->has);
    }
}

static void test_steps(void **state) {
    env_t *e = *state;
    tg_diag_t diag = {{0}};
    tg_pipeline_t *p = NULL;
    assert_int_equal(open_pipeline(&p, e, "ledger-steps", &diag, NULL), TG_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply_t r;
        call_case(&r, p, &cases[i]);
        check_case(&cases[i], &r);
        reply_free(&r);
    }
    tg_pipeline_destroy(p);
}

/* An idempotent replay is the original response byte for byte, live and after a restart
 * (rebuilt from the ledger record), for each kind of decision: PERMIT, DENY, SILENCE. */
static void test_replay_bytes(void **state) {
    env_t *e = *state;
    tg_diag_t diag = {{0}};
    const case_t kinds[] = {
        {"permit", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
         CHARGE(
             ",\"context\":{\"amount\":5,\"currency\":\"USD\"},\"idempotency_key\":\"r-permit\""),
         200, NULL, NULL},
        {"deny", "POST", "/v1/evaluate", NULL, NULL, "r-deny", false,
         "{\"surface\":\"deploy.release\",\"context\":{\"target\":\"prod\",\"version\":\"1\"}}",
         200, NULL, NULL},
        {"silence", "POST", "/v1/evaluate", NULL, NULL, NULL, false,
         CHARGE(",\"context\":{\"currency\":\"USD\"},\"idempotency_key\":\"r-silence\""), 200, NULL,
         NULL},
    };
    enum { N = sizeof kinds / sizeof kinds[0] };
    tg_buf_t first[N];
    tg_pipeline_t *p = NULL;
    assert_int_equal(open_pipeline(&p, e, "ledger-replay", &diag, NULL), TG_OK);
    for (size_t i = 0; i < N; i++) {
        reply_t r;
        call_case(&r, p, &kinds[i]);
        check_case(&kinds[i], &r);
        first[i] = r.body;
        call_case(&r, p, &kinds[i]);
        check_case(&kinds[i], &r);
        assert_string_equal(r.body.data, first[i].data);
        reply_free(&r);
    }
    tg_pipeline_destroy(p);
    assert_int_equal(open_pipeline(&p, e, "ledger-replay", &diag, NULL), TG_OK);
    for (size_t i = 0; i < N; i++) {
        reply_t r;
        call_case(&r, p, &kinds[i]);
        check_case(&kinds[i], &r);
        assert_string_equal(r.body.data, first[i].data);
        reply_free(&r);
        tg_buf_free(&first[i]);
    }
    tg_pipeline_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exec_id_key_and_nonce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_collision_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_collision_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_smaller_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_tokens_and_keys_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_bytes, setup, teardown),
    };
    if (sodium_init() < 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
