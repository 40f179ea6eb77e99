/* cache.c — the running OIDC state: the published configuration, each issuer's last good key
 * set, the thread that fetches JWKS URLs, authentication and metrics. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "oidc_int.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"

#define FETCH_RETRY_MS 10000 /* after a failed fetch: sooner than the refresh period */
#define THREAD_TICK_MS 1000  /* the fetch thread looks at its schedule at least this often */

struct tg_oidc {
    tg_swap_t *conf; /* tg_oidc_conf_t, never NULL */
    tg_oidc_opts_t opts;
    char ca_file[TG_CONFIG_STR_MAX];
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the fetch thread: a kick, or stop */
    pthread_cond_t done; /* waiters for a fetch: one finished */
    bool started;
    atomic_bool stop;
    atomic_bool enabled;
    pthread_t thread;
    atomic_uint_fast64_t unknown_issuer;
    /* refused before any issuer was chosen (tg_jwt_parse: format, header, alg_refused, claims):
       counted under issuer "" by the check's name */
    atomic_uint_fast64_t early[TG_JWT_FAIL__COUNT];
};

static int64_t mono_ms(void) { return tg_clock_mono_ns() / 1000000; }

static void deadline_ts(struct timespec *ts, int64_t ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* ---- fetching --------------------------------------------------------------------------- */

typedef struct fetch_ctx {
    tg_oidc_t *o;
    tg_buf_t body;
    bool too_big;
} fetch_ctx_t;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    fetch_ctx_t *f = ud;
    size_t n = size * nmemb;
    if (tg_buf_append(&f->body, ptr, n) != TG_OK) {
        f->too_big = true;
        return 0; /* aborts the transfer */
    }
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)dt, (void)dn, (void)ut, (void)un;
    fetch_ctx_t *f = ud;
    return atomic_load(&f->o->stop) ? 1 : 0; /* non-zero aborts: shutdown stops a fetch */
}

/* GET url into f->body. TG_OK or TG_ERR_IO with why. */
static tg_err_t fetch(tg_oidc_t *o, const char *url, fetch_ctx_t *f, char *why, size_t cap) {
    CURL *h = curl_easy_init();
    if (h == NULL) {
        (void)snprintf(why, cap, "curl_easy_init failed");
        return TG_ERR_IO;
    }
    bool ok =
        curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK &&
        /* http only reaches here for a loopback host (conf.c checks it) */
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http") == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)o->opts.connect_timeout_ms) ==
            CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)o->opts.timeout_ms) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)TG_JWKS_MAX) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_USERAGENT, "trigguard") == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_WRITEDATA, f) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress) == CURLE_OK &&
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, f) == CURLE_OK &&
        (o->ca_file[0] == '\0' || curl_easy_setopt(h, CURLOPT_CAINFO, o->ca_file) == CURLE_OK);
    if (!ok) {
        curl_easy_cleanup(h);
        (void)snprintf(why, cap, "curl refused an option");
        return TG_ERR_IO;
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    if (f->too_big || cc == CURLE_FILESIZE_EXCEEDED) {
        (void)snprintf(why, cap, "body over %zu bytes", (size_t)TG_JWKS_MAX);
        return TG_ERR_IO;
    }
    if (cc != CURLE_OK) {
        (void)snprintf(why, cap, "%s", curl_easy_strerror(cc));
        return TG_ERR_IO;
    }
    if (status != 200) {
        (void)snprintf(why, cap, "HTTP status %ld", status);
        return TG_ERR_IO;
    }
    return TG_OK;
}

/* Fetches issuer is's URL once and installs a good set; counts and logs either way. */
static void refresh(tg_oidc_t *o, oidc_issuer_t *is) {
    fetch_ctx_t f = {.o = o};
    tg_buf_init(&f.body, TG_JWKS_MAX);
    char why[TG_DIAG_MAX] = "";
    tg_err_t rc = fetch(o, is->jwks, &f, why, sizeof why);
    oidc_keys_t *k = NULL;
    if (rc == TG_OK) {
        tg_diag_t d = {{0}};
        rc = oidc_keys_make(&k, (const char *)f.body.data, f.body.len, tg_clock_now_ms(), &d);
        if (rc != TG_OK) {
            (void)snprintf(why, sizeof why, "invalid JWKS: %.200s", d.msg);
        }
    }
    tg_buf_free(&f.body);
    int64_t now = mono_ms();
    if (rc == TG_OK) {
        pthread_mutex_lock(&is->keys_mu);
        oidc_keys_t *old = tg_swap_exchange(is->keys, k);
        pthread_mutex_unlock(&is->keys_mu);
        oidc_keys_free(old);
        atomic_fetch_add(&is->refresh[0], 1);
        atomic_store(&is->next_fetch_ms, now + o->opts.refresh_s * 1000);
        TG_LOG(TG_LOG_INFO, "oidc_jwks_refresh", "issuer %s: %zu keys from %s", is->name,
               tg_jwks_count(k->set), is->jwks);
    } else {
        atomic_fetch_add(&is->refresh[1], 1);
        int64_t retry =
            o->opts.refresh_s * 1000 < FETCH_RETRY_MS ? o->opts.refresh_s * 1000 : FETCH_RETRY_MS;
        atomic_store(&is->next_fetch_ms, now + retry);
        bool have = tg_swap_peek(is->keys) != NULL;
        TG_LOG(TG_LOG_WARN, "oidc_jwks_refresh_failed", "issuer %s: %s: %s; %s", is->name, is->jwks,
               why,
               have ? "keeping the last good key set"
                    : "no key set yet: its JWT callers get 503 until one arrives");
    }
    atomic_fetch_add(&is->attempts, 1);
    pthread_mutex_lock(&o->mu);
    pthread_cond_broadcast(&o->done);
    pthread_mutex_unlock(&o->mu);
}

static void *fetch_thread(void *arg) {
    tg_oidc_t *o = arg;
    (void)prctl(PR_SET_NAME, "tg-oidc-jwks", 0, 0, 0); /* top -H, ps -L */
    while (!atomic_load(&o->stop)) {
        tg_swap_ref_t hold;
        tg_oidc_conf_t *c = tg_swap_acquire(o->conf, &hold);
        int64_t now = mono_ms(), next = now + THREAD_TICK_MS;
        oidc_issuer_t *due = NULL;
        for (size_t i = 0; i < c->n; i++) {
            oidc_issuer_t *is = c->issuers[i];
            if (!is->jwks_url) {
                continue;
            }
            int64_t at = atomic_load(&is->next_fetch_ms);
            if (at <= now && due == NULL) {
                due = is;
            } else if (at < next) {
                next = at;
            }
        }
        if (due != NULL) {
            /* holds the configuration for one fetch at most: a reload waits that long */
            refresh(o, due);
            tg_swap_release(o->conf, &hold);
            continue;
        }
        tg_swap_release(o->conf, &hold);
        pthread_mutex_lock(&o->mu);
        if (!atomic_load(&o->stop)) {
            struct timespec ts;
            deadline_ts(&ts, next - now > 0 ? next - now : 1);
            (void)pthread_cond_timedwait(&o->wake, &o->mu, &ts);
        }
        pthread_mutex_unlock(&o->mu);
    }
    return NULL;
}

/* ---- life --------------------------------------------------------------------------------- */

tg_err_t tg_oidc_create(tg_oidc_t **out, tg_oidc_conf_t *conf, const tg_oidc_opts_t *opts,
                        tg_diag_t *diag) {
    if (out == NULL || conf == NULL || opts == NULL) {
        tg_oidc_conf_free(conf);
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    tg_oidc_t *o = calloc(1, sizeof *o);
    if (o == NULL) {
        tg_oidc_conf_free(conf);
        return TG_ERR_NOMEM;
    }
    o->opts = *opts;
    (void)snprintf(o->ca_file, sizeof o->ca_file, "%s", opts->ca_file ? opts->ca_file : "");
    o->opts.ca_file = o->ca_file;
    atomic_init(&o->stop, false);
    atomic_init(&o->enabled, conf->n > 0);
    atomic_init(&o->unknown_issuer, 0);
    for (size_t i = 0; i < TG_JWT_FAIL__COUNT; i++) {
        atomic_init(&o->early[i], 0);
    }
    pthread_condattr_t ca;
    bool ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    bool mu = ok && pthread_mutex_init(&o->mu, NULL) == 0;
    bool wake = mu && pthread_cond_init(&o->wake, &ca) == 0;
    bool done = wake && pthread_cond_init(&o->done, &ca) == 0;
    (void)pthread_condattr_destroy(&ca);
    if (!done || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        tg_swap_create(&o->conf, conf) != TG_OK) {
        if (wake) {
            pthread_cond_destroy(&o->wake);
        }
        if (done) {
            pthread_cond_destroy(&o->done);
            curl_global_cleanup(); /* harmless when its init failed */
        }
        if (mu) {
            pthread_mutex_destroy(&o->mu);
        }
        free(o);
        tg_oidc_conf_free(conf);
        return tg_diag_set(diag, TG_ERR_INTERNAL, "oidc: cannot set up libcurl or a lock");
    }
    *out = o;
    return TG_OK;
}

/* True when every URL issuer of the current configuration has had a fetch finish. */
static bool all_tried(tg_oidc_t *o) {
    tg_swap_ref_t hold;
    tg_oidc_conf_t *c = tg_swap_acquire(o->conf, &hold);
    bool all = true;
    for (size_t i = 0; i < c->n; i++) {
        all = all && (!c->issuers[i]->jwks_url || atomic_load(&c->issuers[i]->attempts) > 0);
    }
    tg_swap_release(o->conf, &hold);
    return all;
}

tg_err_t tg_oidc_start(tg_oidc_t *o, int64_t wait_ms) {
    if (o == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    if (pthread_create(&o->thread, NULL, fetch_thread, o) != 0) {
        return TG_ERR_INTERNAL;
    }
    o->started = true;
    int64_t end = mono_ms() + wait_ms;
    pthread_mutex_lock(&o->mu);
    while (!all_tried(o) && mono_ms() < end) {
        struct timespec ts;
        deadline_ts(&ts, end - mono_ms() > 100 ? 100 : 1);
        (void)pthread_cond_timedwait(&o->done, &o->mu, &ts);
    }
    pthread_mutex_unlock(&o->mu);
    return TG_OK;
}

void tg_oidc_destroy(tg_oidc_t *o) {
    if (o == NULL) {
        return;
    }
    if (o->started) {
        pthread_mutex_lock(&o->mu);
        atomic_store(&o->stop, true);
        pthread_cond_broadcast(&o->wake);
        pthread_cond_broadcast(&o->done);
        pthread_mutex_unlock(&o->mu);
        pthread_join(o->thread, NULL);
    }
    tg_oidc_conf_free(tg_swap_peek(o->conf));
    tg_swap_destroy(o->conf);
    pthread_cond_destroy(&o->wake);
    pthread_cond_destroy(&o->done);
    pthread_mutex_destroy(&o->mu);
    curl_global_cleanup();
    free(o);
}

tg_err_t tg_oidc_add_tenants(tg_oidc_t *o, tg_tenants_t *t, tg_diag_t *diag) {
    if (o == NULL || t == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_swap_ref_t hold;
    const tg_oidc_conf_t *c = tg_swap_acquire(o->conf, &hold);
    tg_err_t rc = tg_oidc_conf_add_tenants(c, t, diag);
    tg_swap_release(o->conf, &hold);
    return rc;
}

bool tg_oidc_enabled(tg_oidc_t *o) { return o != NULL && atomic_load(&o->enabled); }

tg_err_t tg_oidc_reload(tg_oidc_t *o, tg_oidc_conf_t *fresh, tg_diag_t *diag) {
    if (o == NULL || fresh == NULL) {
        tg_oidc_conf_free(fresh);
        return TG_ERR_INVALID_ARG;
    }
    tg_oidc_conf_t *old = tg_swap_peek(o->conf); /* this thread is the one that exchanges */
    for (size_t i = 0; i < fresh->n; i++) {
        oidc_issuer_t *is = fresh->issuers[i];
        for (size_t j = 0; j < old->n; j++) {
            oidc_issuer_t *was = old->issuers[j];
            if (strcmp(was->name, is->name) != 0) {
                continue;
            }
            for (size_t r = 0; r < OIDC_RESULTS; r++) {
                atomic_store(&is->verify[r], atomic_load(&was->verify[r]));
            }
            atomic_store(&is->refresh[0], atomic_load(&was->refresh[0]));
            atomic_store(&is->refresh[1], atomic_load(&was->refresh[1]));
            if (!is->jwks_url || strcmp(was->jwks, is->jwks) != 0) {
                break; /* a file was read anew; a new URL is fetched at once */
            }
            /* Same URL: the last good set carries over (parsed again from its text: a set
             * belongs to one configuration), and so does the schedule. */
            pthread_mutex_lock(&was->keys_mu);
            const oidc_keys_t *k = tg_swap_peek(was->keys);
            oidc_keys_t *copy = NULL;
            tg_err_t rc =
                k != NULL ? oidc_keys_make(&copy, k->text, k->len, k->at_ms, diag) : TG_OK;
            pthread_mutex_unlock(&was->keys_mu);
            if (rc != TG_OK) {
                tg_oidc_conf_free(fresh);
                return rc;
            }
            oidc_keys_free(tg_swap_exchange(is->keys, copy));
            atomic_store(&is->next_fetch_ms, atomic_load(&was->next_fetch_ms));
            atomic_store(&is->attempts, atomic_load(&was->attempts));
            break;
        }
    }
    atomic_store(&o->enabled, fresh->n > 0);
    old = tg_swap_exchange(o->conf, fresh);
    tg_oidc_conf_free(old);
    pthread_mutex_lock(&o->mu);
    pthread_cond_broadcast(&o->wake); /* new URLs are due now */
    pthread_mutex_unlock(&o->mu);
    return TG_OK;
}

/* ---- authentication ------------------------------------------------------------------- */

/* Asks for an early fetch of is (an unknown kid), at most once per TG_OIDC_KICK_MIN_MS, and
 * waits up to TG_OIDC_KICK_WAIT_MS for a fetch to finish. False: no fetch was asked for. */
static bool kick_and_wait(tg_oidc_t *o, oidc_issuer_t *is, bool wait) {
    int64_t now = mono_ms();
    int64_t last = atomic_load(&is->last_kick_ms);
    if (!is->jwks_url || now - last < TG_OIDC_KICK_MIN_MS ||
        !atomic_compare_exchange_strong(&is->last_kick_ms, &last, now)) {
        return false;
    }
    uint64_t before = atomic_load(&is->attempts);
    atomic_store(&is->next_fetch_ms, 0);
    pthread_mutex_lock(&o->mu);
    pthread_cond_broadcast(&o->wake);
    int64_t end = now + TG_OIDC_KICK_WAIT_MS;
    while (wait && atomic_load(&is->attempts) == before && !atomic_load(&o->stop) &&
           mono_ms() < end) {
        struct timespec ts;
        deadline_ts(&ts, end - mono_ms() > 0 ? end - mono_ms() : 1);
        (void)pthread_cond_timedwait(&o->done, &o->mu, &ts);
    }
    pthread_mutex_unlock(&o->mu);
    return true;
}

static const char *result_name(size_t r) {
    switch (r) {
    case 0:
        return "ok";
    case OIDC_RES_MAPPING:
        return "mapping";
    case OIDC_RES_TENANT:
        return "tenant";
    case OIDC_RES_NO_KEYS:
        return "no_keys";
    case OIDC_RES_INTERNAL:
        return "internal";
    default:
        return tg_jwt_fail_name((tg_jwt_fail_t)r);
    }
}

/* Verifies j against is's current set; NOT_FOUND (unknown kid) is retried once after a
 * refresh. *res_idx gets the result's index. */
static tg_err_t verify(tg_oidc_t *o, oidc_issuer_t *is, tg_jwt_t *j, int64_t now_s,
                       size_t *res_idx) {
    tg_jwt_expect_t ex = {.issuer = is->issuer,
                          .audience = (const char *const *)is->audiences,
                          .n_audience = is->n_audiences,
                          .now_s = now_s,
                          .leeway_s = is->leeway_s};
    tg_err_t rc = TG_ERR_NOT_FOUND;
    for (int round = 0; round < 2; round++) {
        tg_swap_ref_t kh;
        const oidc_keys_t *k = tg_swap_acquire(is->keys, &kh);
        tg_jwt_fail_t why = TG_JWT_FAIL_NONE;
        if (k == NULL) {
            tg_swap_release(is->keys, &kh);
            (void)kick_and_wait(o, is, false); /* no wait: the issuer is likely down */
            *res_idx = OIDC_RES_NO_KEYS;
            return TG_ERR_IDP_UNAVAILABLE;
        }
        rc = tg_jwt_verify(j, k->set, &ex, &why);
        tg_swap_release(is->keys, &kh);
        *res_idx = rc == TG_OK ? 0 : (size_t)why;
        if (rc == TG_ERR_NOT_FOUND && round == 0 && kick_and_wait(o, is, true)) {
            continue;
        }
        break;
    }
    if (rc == TG_ERR_NOT_FOUND) {
        *res_idx = TG_JWT_FAIL_KID_UNKNOWN;
        return TG_ERR_UNAUTHORIZED;
    }
    if (rc != TG_OK && rc != TG_ERR_UNAUTHORIZED) {
        *res_idx = OIDC_RES_INTERNAL;
    } else if (rc == TG_ERR_UNAUTHORIZED && (*res_idx == 0 || *res_idx >= TG_JWT_FAIL__COUNT)) {
        *res_idx = TG_JWT_FAIL_FORMAT; /* a refusal without its reason: counted somewhere */
    }
    return rc;
}

tg_err_t tg_oidc_authenticate(tg_oidc_t *o, const tg_tenants_t *t, const char *header, size_t len,
                              int64_t now_s, tg_oidc_principal_t **out, tg_oidc_result_t *res) {
    tg_oidc_result_t dummy;
    res = res != NULL ? res : &dummy;
    res->issuer[0] = '\0';
    res->check = "format";
    if (o == NULL || t == NULL || out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (!tg_oidc_is_jwt_header(header, len)) {
        atomic_fetch_add(&o->early[TG_JWT_FAIL_FORMAT], 1);
        return TG_ERR_UNAUTHORIZED;
    }
    tg_jwt_t *j = NULL;
    tg_jwt_fail_t why = TG_JWT_FAIL_NONE;
    tg_err_t rc = tg_jwt_parse(&j, header + 7, len - 7, &why);
    if (rc != TG_OK) {
        res->check = rc == TG_ERR_UNAUTHORIZED ? tg_jwt_fail_name(why) : "internal";
        atomic_fetch_add(&o->early[(unsigned)why < TG_JWT_FAIL__COUNT && why != TG_JWT_FAIL_NONE
                                       ? why
                                       : TG_JWT_FAIL_FORMAT],
                         1);
        return rc == TG_ERR_NOMEM ? rc : TG_ERR_UNAUTHORIZED;
    }
    const char *iss = tg_jwt_unverified_issuer(j);
    tg_swap_ref_t hold;
    tg_oidc_conf_t *c = tg_swap_acquire(o->conf, &hold);
    size_t i = 0;
    while (iss != NULL && i < c->n && strcmp(c->issuers[i]->issuer, iss) != 0) {
        i++;
    }
    if (iss == NULL || i == c->n) {
        tg_swap_release(o->conf, &hold);
        tg_jwt_free(j);
        res->check = "unknown_issuer";
        atomic_fetch_add(&o->unknown_issuer, 1);
        return TG_ERR_UNAUTHORIZED;
    }
    oidc_issuer_t *is = c->issuers[i];
    (void)snprintf(res->issuer, sizeof res->issuer, "%s", is->name);
    size_t r = 0;
    rc = verify(o, is, j, now_s, &r);
    if (rc == TG_OK) {
        rc = tg_oidc_map(out, c, i, tg_jwt_claims(j), t);
        r = rc == TG_OK                       ? 0
            : rc == TG_ERR_TENANT_NOT_ALLOWED ? OIDC_RES_TENANT
            : rc == TG_ERR_UNAUTHORIZED       ? OIDC_RES_MAPPING
                                              : OIDC_RES_INTERNAL;
    }
    atomic_fetch_add(&is->verify[r], 1);
    res->check = result_name(r);
    tg_swap_release(o->conf, &hold);
    tg_jwt_free(j);
    return rc;
}

/* ---- metrics ------------------------------------------------------------------------------ */

tg_err_t tg_oidc_metrics(tg_oidc_t *o, tg_buf_t *out, int64_t now_ms) {
    tg_buf_t *b = out;
    if (o == NULL) {
        return TG_OK;
    }
    tg_swap_ref_t hold;
    tg_oidc_conf_t *c = tg_swap_acquire(o->conf, &hold);
    tg_err_t rc = tg_buf_puts(b, "# HELP trigguard_oidc_verify_total JWT callers by issuer and "
                                 "outcome (ok, or the check that refused)\n"
                                 "# TYPE trigguard_oidc_verify_total counter\n");
    if (rc == TG_OK) {
        rc = tg_buf_printf(b,
                           "trigguard_oidc_verify_total{issuer=\"\",result=\"unknown_issuer\"} "
                           "%llu\n",
                           (unsigned long long)atomic_load(&o->unknown_issuer));
    }
    for (size_t r = 1; rc == TG_OK && r < TG_JWT_FAIL__COUNT; r++) {
        rc = tg_buf_printf(b, "trigguard_oidc_verify_total{issuer=\"\",result=\"%s\"} %llu\n",
                           tg_jwt_fail_name((tg_jwt_fail_t)r),
                           (unsigned long long)atomic_load(&o->early[r]));
    }
    for (size_t i = 0; rc == TG_OK && i < c->n; i++) {
        for (size_t r = 0; rc == TG_OK && r < OIDC_RESULTS; r++) {
            rc = tg_buf_printf(b, "trigguard_oidc_verify_total{issuer=\"%s\",result=\"%s\"} %llu\n",
                               c->issuers[i]->name, result_name(r),
                               (unsigned long long)atomic_load(&c->issuers[i]->verify[r]));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(b, "# HELP trigguard_oidc_jwks_refresh_total JWKS fetches by issuer "
                            "and result\n# TYPE trigguard_oidc_jwks_refresh_total counter\n");
    }
    for (size_t i = 0; rc == TG_OK && i < c->n; i++) {
        oidc_issuer_t *is = c->issuers[i];
        rc = tg_buf_printf(b,
                           "trigguard_oidc_jwks_refresh_total{issuer=\"%s\",result=\"ok\"} %llu\n"
                           "trigguard_oidc_jwks_refresh_total{issuer=\"%s\",result=\"failed\"} "
                           "%llu\n",
                           is->name, (unsigned long long)atomic_load(&is->refresh[0]), is->name,
                           (unsigned long long)atomic_load(&is->refresh[1]));
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(b, "# HELP trigguard_oidc_jwks_age_seconds age of the key set in use "
                            "(absent: none yet)\n# TYPE trigguard_oidc_jwks_age_seconds gauge\n"
                            "# HELP trigguard_oidc_jwks_keys usable keys in the set in use\n"
                            "# TYPE trigguard_oidc_jwks_keys gauge\n");
    }
    for (size_t i = 0; rc == TG_OK && i < c->n; i++) {
        oidc_issuer_t *is = c->issuers[i];
        tg_swap_ref_t kh;
        const oidc_keys_t *k = tg_swap_acquire(is->keys, &kh);
        size_t n = k != NULL ? tg_jwks_count(k->set) : 0;
        int64_t age = k != NULL ? (now_ms - k->at_ms) / 1000 : 0;
        tg_swap_release(is->keys, &kh);
        rc = tg_buf_printf(b, "trigguard_oidc_jwks_keys{issuer=\"%s\"} %zu\n", is->name, n);
        if (rc == TG_OK && n > 0) {
            rc = tg_buf_printf(b, "trigguard_oidc_jwks_age_seconds{issuer=\"%s\"} %lld\n", is->name,
                               (long long)(age > 0 ? age : 0));
        }
    }
    tg_swap_release(o->conf, &hold);
    return rc;
}
