/* metrics.c — counters and their Prometheus text rendering. */
#include "metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "trigguard/clock.h"
#include "trigguard/version.h"

/* Every status the daemon itself sends has its own label; "other" is left for a status
 * added later and not listed here. */
static const int status_codes[TG_METRICS_STATUSES] = {200, 202, 400, 401, 403, 404, 405, 409, 410,
                                                      413, 414, 415, 422, 429, 431, 500, 503, 0};
#define STATUS_OTHER (TG_METRICS_STATUSES - 1)

/* Upper bounds in microseconds; the last bucket is +Inf. */
static const int64_t latency_bounds_us[TG_METRICS_LATENCY_BUCKETS] = {
    25,    50,    100,   250,    500,    1000,   2500,    5000,
    10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000};

static const char *const route_names[TG_ROUTE__COUNT] = {"/v1/evaluate",
                                                         "/execute",
                                                         "/decide",
                                                         "/v1/verify",
                                                         "/protocol/verify-receipt",
                                                         "/v1/receipts",
                                                         "/.well-known/trigguard/keys.json",
                                                         "/protocol/capabilities",
                                                         "/healthz",
                                                         "/readyz",
                                                         "/version",
                                                         "/metrics",
                                                         "/v1/admin/reload",
                                                         "/v1/receipts/redeem",
                                                         "/protocol/verify-signature",
                                                         "/v1/gate",
                                                         "/v1/approvals",
                                                         "/v1/approvals/{id}",
                                                         "/v1/approvals/{id}/review",
                                                         "/v1/log/checkpoint",
                                                         "/v1/log/tile",
                                                         "/v1/log/proof",
                                                         "/v1/receipts/proof",
                                                         "other"};

static const char *const redeem_names[TG_REDEEM__COUNT] = {
    [TG_REDEEM_OK] = "redeemed",
    [TG_REDEEM_ALREADY] = "already_redeemed",
    [TG_REDEEM_HASH_MISMATCH] = "request_hash_mismatch",
    [TG_REDEEM_EXPIRED] = "expired",
    [TG_REDEEM_NOT_PERMIT] = "not_permit",
    [TG_REDEEM_NOT_AUTHENTIC] = "not_authentic",
    [TG_REDEEM_NOT_FOUND] = "not_found",
    [TG_REDEEM_REFUSED] = "refused",
    [TG_REDEEM_UNAVAILABLE] = "unavailable",
    [TG_REDEEM_ERROR] = "error",
};

static const char *const approval_event_names[TG_APPROVAL_EVENT__COUNT] = {
    [TG_APPROVAL_EVENT_ESCALATED] = "escalated", [TG_APPROVAL_EVENT_APPROVE] = "approve",
    [TG_APPROVAL_EVENT_DENY] = "deny",           [TG_APPROVAL_EVENT_EXPIRED] = "expired",
    [TG_APPROVAL_EVENT_CONSUMED] = "consumed",
};

void tg_metrics_approval(tg_metrics_t *m, tg_approval_event_t e) {
    if ((unsigned)e < TG_APPROVAL_EVENT__COUNT) {
        atomic_fetch_add_explicit(&m->approval_events[e], 1, memory_order_relaxed);
    }
}

void tg_metrics_redeem(tg_metrics_t *m, tg_redeem_result_t r) {
    if ((unsigned)r < TG_REDEEM__COUNT) {
        atomic_fetch_add_explicit(&m->redemptions[r], 1, memory_order_relaxed);
    }
}

static const char *const outcome_names[TG_METRICS_OUTCOMES] = {"PERMIT", "DENY", "SILENCE",
                                                               "ESCALATE"};

/* Marks a surface slot whose name is being written. */
static const char slot_claiming[1] = "";

void tg_metrics_init(tg_metrics_t *m) {
    memset(m, 0, sizeof *m); /* all-zero is a valid state for these atomics on our targets */
    m->start_ms = tg_clock_now_ms();
}

const char *tg_route_name(tg_route_t r) {
    return (unsigned)r < TG_ROUTE__COUNT ? route_names[r] : "other";
}

void tg_metrics_request(tg_metrics_t *m, tg_route_t route, int status, int64_t latency_us) {
    if ((unsigned)route >= TG_ROUTE__COUNT) {
        route = TG_ROUTE_OTHER;
    }
    int si = STATUS_OTHER;
    for (int i = 0; i < STATUS_OTHER; i++) {
        if (status_codes[i] == status) {
            si = i;
            break;
        }
    }
    atomic_fetch_add_explicit(&m->requests[route][si], 1, memory_order_relaxed);
    int b = 0;
    while (b < TG_METRICS_LATENCY_BUCKETS && latency_us > latency_bounds_us[b]) {
        b++;
    }
    atomic_fetch_add_explicit(&m->latency[route][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->latency_sum_us[route],
                              (uint_fast64_t)(latency_us > 0 ? latency_us : 0),
                              memory_order_relaxed);
}

/* A label value as the text exposition format wants it: \\, \" and \n escaped. */
static tg_err_t put_label(tg_buf_t *out, const char *v) {
    tg_err_t rc = TG_OK;
    for (const char *p = v; *p && rc == TG_OK; p++) {
        if (*p == '\\' || *p == '"') {
            rc = tg_buf_putc(out, '\\');
        }
        if (rc == TG_OK) {
            rc = *p == '\n' ? tg_buf_puts(out, "\\n") : tg_buf_putc(out, *p);
        }
    }
    return rc;
}

tg_err_t tg_metrics_render_config(tg_buf_t *o, const tg_metrics_config_t *c) {
    tg_err_t rc = tg_buf_puts(o, "# HELP trigguard_reload_total Reloads of each part (SIGHUP, "
                                 "POST /v1/admin/reload) by result.\n"
                                 "# TYPE trigguard_reload_total counter\n");
    for (int i = 0; i < TG_METRICS_RELOAD_PARTS && rc == TG_OK; i++) {
        rc = tg_buf_printf(o,
                           "trigguard_reload_total{what=\"%s\",result=\"ok\"} %llu\n"
                           "trigguard_reload_total{what=\"%s\",result=\"failed\"} %llu\n",
                           c->part[i], (unsigned long long)c->ok[i], c->part[i],
                           (unsigned long long)c->failed[i]);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "# HELP trigguard_config_info The configuration serving now.\n"
                            "# TYPE trigguard_config_info gauge\n"
                            "trigguard_config_info{policy_version=\"");
    }
    if (rc == TG_OK) {
        rc = put_label(o, c->policy_version);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "\",policy_hash=\"");
    }
    if (rc == TG_OK) {
        rc = put_label(o, c->policy_hash);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "\",signing_key_id=\"");
    }
    if (rc == TG_OK) {
        rc = put_label(o, c->signing_key_id);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "\"} 1\n");
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(
            o,
            "# HELP trigguard_policy_loaded_timestamp_seconds When the serving policy was "
            "loaded (start or the last successful reload), Unix time.\n"
            "# TYPE trigguard_policy_loaded_timestamp_seconds gauge\n"
            "trigguard_policy_loaded_timestamp_seconds %lld.%03lld\n"
            "# HELP trigguard_policy_last_reload_success 1 if the last policy reload took the "
            "bundle (or none ran yet), 0 if it was refused and the old policy kept serving.\n"
            "# TYPE trigguard_policy_last_reload_success gauge\n"
            "trigguard_policy_last_reload_success %d\n"
            "# HELP trigguard_policy_last_reload_timestamp_seconds When the last policy reload "
            "ran, Unix time; 0 before the first.\n"
            "# TYPE trigguard_policy_last_reload_timestamp_seconds gauge\n"
            "trigguard_policy_last_reload_timestamp_seconds %lld.%03lld\n",
            (long long)(c->policy_loaded_at_ms / 1000), (long long)(c->policy_loaded_at_ms % 1000),
            c->policy_last_reload_ok ? 1 : 0, (long long)(c->policy_last_reload_at_ms / 1000),
            (long long)(c->policy_last_reload_at_ms % 1000));
    }
    return rc;
}

/* FNV-1a: only spreads interned names over the table, no adversary can grow it. */
static size_t name_slot(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    }
    return h % TG_METRICS_SURFACES;
}

void tg_metrics_decision(tg_metrics_t *m, const char *surface, size_t len, int outcome) {
    if (outcome < 0 || outcome >= TG_METRICS_OUTCOMES) {
        return;
    }
    if (surface == NULL || len == 0 || len > TG_METRICS_SURFACE_NAME_MAX) {
        atomic_fetch_add_explicit(&m->surfaces_overflow[outcome], 1, memory_order_relaxed);
        return;
    }
    size_t start = name_slot(surface, len);
    for (size_t probe = 0; probe < TG_METRICS_SURFACES; probe++) {
        tg_metrics_surface_t *s = &m->surfaces[(start + probe) % TG_METRICS_SURFACES];
        const char *name = atomic_load_explicit(&s->name, memory_order_acquire);
        if (name == NULL) {
            /* Claim the slot with a CAS to a sentinel, copy the name, then publish it.
             * Losing the CAS means another thread owns the slot: compare with its name. */
            const char *expected = NULL;
            if (atomic_compare_exchange_strong(&s->name, &expected, slot_claiming)) {
                memcpy(s->names, surface, len);
                s->names[len] = '\0';
                atomic_store_explicit(&s->name, s->names, memory_order_release);
                name = s->names;
            } else {
                name = expected;
            }
        }
        while (name == slot_claiming) {
            name = atomic_load_explicit(&s->name, memory_order_acquire);
        }
        if (name != NULL && strlen(name) == len && memcmp(name, surface, len) == 0) {
            atomic_fetch_add_explicit(&s->decisions[outcome], 1, memory_order_relaxed);
            return;
        }
    }
    atomic_fetch_add_explicit(&m->surfaces_overflow[outcome], 1, memory_order_relaxed);
}

void tg_metrics_mode(tg_metrics_t *m, bool observe, int outcome) {
    if (outcome >= 0 && outcome < TG_METRICS_OUTCOMES) {
        atomic_fetch_add_explicit(&m->modes[observe ? 1 : 0][outcome], 1, memory_order_relaxed);
    }
}

/* Counts one more for key[0..kl) in the open-addressed table tab[0..n): a slot is claimed
 * with a CAS to the sentinel, filled, then published (as surfaces are). false when the table
 * is full (the caller counts an overflow). */
static bool keyed_add(tg_metrics_would_t *tab, size_t n, const char *key, size_t kl) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: spreads the slots, nothing more */
    for (size_t i = 0; i < kl; i++) {
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    }
    for (size_t probe = 0; probe < n; probe++) {
        tg_metrics_would_t *w = &tab[(h + probe) % n];
        const char *name = atomic_load_explicit(&w->key, memory_order_acquire);
        if (name == NULL) {
            const char *expected = NULL;
            if (atomic_compare_exchange_strong(&w->key, &expected, slot_claiming)) {
                memcpy(w->keys, key, kl);
                w->key_len = kl;
                atomic_store_explicit(&w->key, w->keys, memory_order_release);
                name = w->keys;
            } else {
                name = expected;
            }
        }
        while (name == slot_claiming) {
            name = atomic_load_explicit(&w->key, memory_order_acquire);
        }
        if (name != NULL && w->key_len == kl && memcmp(name, key, kl) == 0) {
            atomic_fetch_add_explicit(&w->count, 1, memory_order_relaxed);
            return true;
        }
    }
    return false;
}

void tg_metrics_would(tg_metrics_t *m, const char *surface, size_t len, int outcome,
                      const char *reason) {
    if (outcome < 0 || outcome >= TG_METRICS_OUTCOMES) {
        return;
    }
    size_t rl = reason != NULL ? strlen(reason) : 0;
    if (surface == NULL || len == 0 || len > TG_METRICS_SURFACE_NAME_MAX || rl == 0 || rl > 64) {
        atomic_fetch_add_explicit(&m->would_overflow[outcome], 1, memory_order_relaxed);
        return;
    }
    char key[TG_METRICS_WOULD_KEY_MAX + 1];
    memcpy(key, surface, len);
    key[len] = '\0';
    memcpy(key + len + 1, reason, rl);
    key[len + 1 + rl] = (char)('0' + outcome);
    if (!keyed_add(m->would, TG_METRICS_WOULD_SLOTS, key, len + rl + 2)) {
        atomic_fetch_add_explicit(&m->would_overflow[outcome], 1, memory_order_relaxed);
    }
}

void tg_metrics_shadow(tg_metrics_t *m, const char *surface, size_t len, int live, int shadow) {
    atomic_fetch_add_explicit(&m->shadow_decisions, 1, memory_order_relaxed);
    if (live == shadow || live < 0 || live > TG_METRICS_SHADOW_INVALID || shadow < 0 ||
        shadow > TG_METRICS_SHADOW_INVALID) {
        return; /* agreement on the decision (a reason-only difference: below) */
    }
    if (surface == NULL || len == 0 || len > TG_METRICS_SURFACE_NAME_MAX) {
        atomic_fetch_add_explicit(&m->shadow_overflow, 1, memory_order_relaxed);
        return;
    }
    char key[TG_METRICS_SURFACE_NAME_MAX + 3];
    memcpy(key, surface, len);
    key[len] = (char)('0' + live);
    key[len + 1] = (char)('0' + shadow);
    if (!keyed_add(m->shadow, TG_METRICS_SHADOW_SLOTS, key, len + 2)) {
        atomic_fetch_add_explicit(&m->shadow_overflow, 1, memory_order_relaxed);
    }
}

static tg_err_t put_label_n(tg_buf_t *out, const char *p, size_t n);

void tg_metrics_decision_detail(tg_metrics_t *m, const char *tenant, size_t tenant_len, int outcome,
                                const char *reason) {
    if (outcome < 0 || outcome >= TG_METRICS_OUTCOMES) {
        return;
    }
    char key[TG_METRICS_TENANT_MAX + 66];
    size_t rl = reason != NULL ? strlen(reason) : 0;
    if (rl == 0 || rl > 64) {
        atomic_fetch_add_explicit(&m->reasons_overflow, 1, memory_order_relaxed);
    } else {
        memcpy(key, reason, rl);
        key[rl] = (char)('0' + outcome);
        if (!keyed_add(m->reasons, TG_METRICS_REASON_SLOTS, key, rl + 1)) {
            atomic_fetch_add_explicit(&m->reasons_overflow, 1, memory_order_relaxed);
        }
    }
    if (tenant == NULL || tenant_len == 0 || tenant_len > TG_METRICS_TENANT_MAX) {
        atomic_fetch_add_explicit(&m->tenants_overflow, 1, memory_order_relaxed);
        return;
    }
    memcpy(key, tenant, tenant_len);
    key[tenant_len] = (char)('0' + outcome);
    if (!keyed_add(m->tenants, TG_METRICS_TENANT_SLOTS, key, tenant_len + 1)) {
        atomic_fetch_add_explicit(&m->tenants_overflow, 1, memory_order_relaxed);
    }
}

/* One labeled series per used slot of a table keyed by NAME + decision digit:
 * `metric{label="NAME",decision="D"} count`, then the overflow as label "other". */
static tg_err_t render_keyed(tg_buf_t *out, const char *metric, const char *label,
                             tg_metrics_would_t *tab, size_t n, atomic_uint_fast64_t *overflow) {
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        tg_metrics_would_t *w = &tab[i];
        const char *k = atomic_load_explicit(&w->key, memory_order_acquire);
        if (k == NULL || k != w->keys) {
            continue;
        }
        int o = k[w->key_len - 1] - '0';
        rc = tg_buf_printf(out, "%s{%s=\"", metric, label);
        if (rc == TG_OK) {
            rc = put_label_n(out, k, w->key_len - 1);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(
                out, "\",decision=\"%s\"} %llu\n", outcome_names[(unsigned)o % TG_METRICS_OUTCOMES],
                (unsigned long long)atomic_load_explicit(&w->count, memory_order_relaxed));
        }
    }
    uint64_t v = (uint64_t)atomic_load_explicit(overflow, memory_order_relaxed);
    if (v && rc == TG_OK) {
        rc = tg_buf_printf(out, "%s{%s=\"other\",decision=\"other\"} %llu\n", metric, label,
                           (unsigned long long)v);
    }
    return rc;
}

static tg_err_t render_detail(tg_buf_t *out, tg_metrics_t *m) {
    tg_err_t rc = tg_buf_puts(out, "# HELP trigguard_decisions_by_reason_total Decisions by "
                                   "decision and reason code.\n"
                                   "# TYPE trigguard_decisions_by_reason_total counter\n");
    if (rc == TG_OK) {
        rc = render_keyed(out, "trigguard_decisions_by_reason_total", "reason", m->reasons,
                          TG_METRICS_REASON_SLOTS, &m->reasons_overflow);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_tenant_decisions_total Decisions by tenant and "
                              "decision.\n# TYPE trigguard_tenant_decisions_total counter\n");
    }
    if (rc == TG_OK) {
        rc = render_keyed(out, "trigguard_tenant_decisions_total", "tenant", m->tenants,
                          TG_METRICS_TENANT_SLOTS, &m->tenants_overflow);
    }
    return rc;
}

/* CPU from getrusage; resident memory from /proc/self/statm; descriptors by counting
 * /proc/self/fd (a process may read its own /proc entries although it is not dumpable). */
tg_err_t tg_metrics_render_process(tg_buf_t *out, const tg_metrics_t *m) {
    struct rusage ru;
    double cpu = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    }
    /* statm: "size resident shared ..." in pages; the second number is the resident set. */
    unsigned long long resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        char line[128];
        if (fgets(line, sizeof line, f) != NULL) {
            char *end = NULL;
            (void)strtoull(line, &end, 10);
            if (end != NULL && *end == ' ') {
                resident = strtoull(end + 1, NULL, 10);
            }
        }
        (void)fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    long long fds = -1;
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        fds = 0;
        for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
            fds += e->d_name[0] != '.';
        }
        (void)closedir(d);
        fds--; /* the directory's own descriptor */
    }
    struct rlimit rl;
    unsigned long long max_fds = 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        max_fds = (unsigned long long)rl.rlim_cur;
    }
    return tg_buf_printf(
        out,
        "# HELP trigguard_build_info The running build.\n# TYPE trigguard_build_info gauge\n"
        "trigguard_build_info{version=\"%s\",commit=\"%s\",protocol=\"%s\"} 1\n"
        "# HELP process_cpu_seconds_total User and system CPU time.\n"
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n"
        "# HELP process_resident_memory_bytes Resident memory.\n"
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n"
        "# HELP process_open_fds Open file descriptors.\n"
        "# TYPE process_open_fds gauge\nprocess_open_fds %lld\n"
        "# HELP process_max_fds The open-files limit.\n"
        "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n"
        "# HELP process_start_time_seconds Start time, seconds since the Unix epoch.\n"
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
        TG_VERSION, TG_GIT_COMMIT, TG_PROTOCOL_VERSION, cpu,
        resident * (unsigned long long)(page > 0 ? page : 4096), fds, max_fds,
        (double)m->start_ms / 1000.0);
}

void tg_metrics_shadow_reason(tg_metrics_t *m) {
    atomic_fetch_add_explicit(&m->shadow_reason_only, 1, memory_order_relaxed);
}

/* put_label for n bytes (a slice of a would-decision key). */
static tg_err_t put_label_n(tg_buf_t *out, const char *p, size_t n) {
    tg_err_t rc = TG_OK;
    for (size_t i = 0; i < n && rc == TG_OK; i++) {
        if (p[i] == '\\' || p[i] == '"') {
            rc = tg_buf_putc(out, '\\');
        }
        if (rc == TG_OK) {
            rc = p[i] == '\n' ? tg_buf_puts(out, "\\n") : tg_buf_putc(out, p[i]);
        }
    }
    return rc;
}

/* trigguard_decisions_by_mode_total and trigguard_would_decisions_total (SPEC §11.1). */
static tg_err_t render_modes(tg_buf_t *out, tg_metrics_t *m) {
    tg_err_t rc = tg_buf_puts(out, "# HELP trigguard_decisions_by_mode_total Decisions by "
                                   "execution mode (enforce, observe) and outcome (the policy's, "
                                   "before observe mode).\n"
                                   "# TYPE trigguard_decisions_by_mode_total counter\n");
    static const char *const mode_names[2] = {"enforce", "observe"};
    for (int md = 0; md < 2 && rc == TG_OK; md++) {
        for (int o = 0; o < TG_METRICS_OUTCOMES && rc == TG_OK; o++) {
            rc = tg_buf_printf(
                out,
                "trigguard_decisions_by_mode_total{mode=\"%s\",decision=\"%s\"} "
                "%llu\n",
                mode_names[md], outcome_names[o],
                (unsigned long long)atomic_load_explicit(&m->modes[md][o], memory_order_relaxed));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_would_decisions_total Observe mode: what the "
                              "policy decided (and would have enforced) by surface, decision "
                              "and reason.\n# TYPE trigguard_would_decisions_total counter\n");
    }
    for (int i = 0; i < TG_METRICS_WOULD_SLOTS && rc == TG_OK; i++) {
        tg_metrics_would_t *w = &m->would[i];
        const char *k = atomic_load_explicit(&w->key, memory_order_acquire);
        if (k == NULL || k != w->keys) {
            continue;
        }
        size_t sl = strlen(k);
        const char *reason = k + sl + 1;
        size_t rl = w->key_len - sl - 2;
        int o = k[w->key_len - 1] - '0';
        rc = tg_buf_puts(out, "trigguard_would_decisions_total{surface=\"");
        if (rc == TG_OK) {
            rc = put_label_n(out, k, sl);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(out, "\",decision=\"%s\",reason=\"", outcome_names[o]);
        }
        if (rc == TG_OK) {
            rc = put_label_n(out, reason, rl);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(
                out, "\"} %llu\n",
                (unsigned long long)atomic_load_explicit(&w->count, memory_order_relaxed));
        }
    }
    for (int o = 0; o < TG_METRICS_OUTCOMES && rc == TG_OK; o++) {
        uint64_t v = (uint64_t)atomic_load_explicit(&m->would_overflow[o], memory_order_relaxed);
        if (v) {
            rc = tg_buf_printf(out,
                               "trigguard_would_decisions_total{surface=\"other\",decision=\"%s\","
                               "reason=\"other\"} %llu\n",
                               outcome_names[o], (unsigned long long)v);
        }
    }
    return rc;
}

/* --shadow-policy (issue 22): trigguard_shadow_decisions_total, and the disagreements by
 * surface and both decisions (INVALID: the candidate refused the request itself). */
static tg_err_t render_shadow(tg_buf_t *out, tg_metrics_t *m) {
    static const char *const names[TG_METRICS_SHADOW_INVALID + 1] = {"PERMIT", "DENY", "SILENCE",
                                                                     "ESCALATE", "INVALID"};
    tg_err_t rc = tg_buf_printf(
        out,
        "# HELP trigguard_shadow_decisions_total Requests the --shadow-policy bundle decided "
        "beside the live one.\n# TYPE trigguard_shadow_decisions_total counter\n"
        "trigguard_shadow_decisions_total %llu\n"
        "# HELP trigguard_shadow_reason_disagreements_total Same decision, another reason "
        "code.\n# TYPE trigguard_shadow_reason_disagreements_total counter\n"
        "trigguard_shadow_reason_disagreements_total %llu\n"
        "# HELP trigguard_shadow_disagreements_total The shadow bundle's decision differs from "
        "the live one, by surface, live and shadow decision.\n"
        "# TYPE trigguard_shadow_disagreements_total counter\n",
        (unsigned long long)atomic_load_explicit(&m->shadow_decisions, memory_order_relaxed),
        (unsigned long long)atomic_load_explicit(&m->shadow_reason_only, memory_order_relaxed));
    for (int i = 0; i < TG_METRICS_SHADOW_SLOTS && rc == TG_OK; i++) {
        tg_metrics_would_t *w = &m->shadow[i];
        const char *k = atomic_load_explicit(&w->key, memory_order_acquire);
        if (k == NULL || k != w->keys) {
            continue;
        }
        size_t sl = w->key_len - 2;
        int lv = k[sl] - '0', sv = k[sl + 1] - '0';
        rc = tg_buf_puts(out, "trigguard_shadow_disagreements_total{surface=\"");
        if (rc == TG_OK) {
            rc = put_label_n(out, k, sl);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(
                out, "\",live=\"%s\",shadow=\"%s\"} %llu\n", names[(unsigned)lv % 5u],
                names[(unsigned)sv % 5u],
                (unsigned long long)atomic_load_explicit(&w->count, memory_order_relaxed));
        }
    }
    uint64_t v = (uint64_t)atomic_load_explicit(&m->shadow_overflow, memory_order_relaxed);
    if (v && rc == TG_OK) {
        rc = tg_buf_printf(out,
                           "trigguard_shadow_disagreements_total{surface=\"other\",live=\"other\","
                           "shadow=\"other\"} %llu\n",
                           (unsigned long long)v);
    }
    return rc;
}

void tg_metrics_ledger_wait_timeout(tg_metrics_t *m) {
    atomic_fetch_add_explicit(&m->ledger_wait_timeouts, 1, memory_order_relaxed);
}

static uint64_t ld(atomic_uint_fast64_t *a) {
    return (uint64_t)atomic_load_explicit(a, memory_order_relaxed);
}

tg_err_t tg_metrics_render(tg_buf_t *out, tg_metrics_t *m) {
    tg_err_t rc = tg_buf_puts(out, "# HELP trigguard_http_requests_total HTTP requests by route "
                                   "and status.\n# TYPE trigguard_http_requests_total counter\n");
    for (int r = 0; r < TG_ROUTE__COUNT && rc == TG_OK; r++) {
        for (int s = 0; s <= STATUS_OTHER && rc == TG_OK; s++) {
            uint64_t v = ld(&m->requests[r][s]);
            if (v == 0) {
                continue;
            }
            if (s == STATUS_OTHER) {
                rc = tg_buf_printf(out,
                                   "trigguard_http_requests_total{route=\"%s\",status=\"other\"} "
                                   "%llu\n",
                                   route_names[r], (unsigned long long)v);
            } else {
                rc = tg_buf_printf(out,
                                   "trigguard_http_requests_total{route=\"%s\",status=\"%d\"} "
                                   "%llu\n",
                                   route_names[r], status_codes[s], (unsigned long long)v);
            }
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_http_request_duration_seconds Time from request "
                              "headers to response.\n"
                              "# TYPE trigguard_http_request_duration_seconds histogram\n");
    }
    for (int r = 0; r < TG_ROUTE__COUNT && rc == TG_OK; r++) {
        uint64_t cum = 0;
        uint64_t total = 0;
        for (int b = 0; b <= TG_METRICS_LATENCY_BUCKETS; b++) {
            total += ld(&m->latency[r][b]);
        }
        if (total == 0) {
            continue;
        }
        for (int b = 0; b <= TG_METRICS_LATENCY_BUCKETS && rc == TG_OK; b++) {
            cum += ld(&m->latency[r][b]);
            if (b < TG_METRICS_LATENCY_BUCKETS) {
                rc = tg_buf_printf(out,
                                   "trigguard_http_request_duration_seconds_bucket{route=\"%s\","
                                   "le=\"%g\"} %llu\n",
                                   route_names[r], (double)latency_bounds_us[b] / 1e6,
                                   (unsigned long long)cum);
            } else {
                rc = tg_buf_printf(out,
                                   "trigguard_http_request_duration_seconds_bucket{route=\"%s\","
                                   "le=\"+Inf\"} %llu\n",
                                   route_names[r], (unsigned long long)cum);
            }
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(out,
                               "trigguard_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                               "trigguard_http_request_duration_seconds_count{route=\"%s\"} "
                               "%llu\n",
                               route_names[r], (double)ld(&m->latency_sum_us[r]) / 1e6,
                               route_names[r], (unsigned long long)total);
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_decisions_total Decisions by outcome and "
                              "surface.\n# TYPE trigguard_decisions_total counter\n");
    }
    for (int i = 0; i < TG_METRICS_SURFACES && rc == TG_OK; i++) {
        tg_metrics_surface_t *s = &m->surfaces[i];
        const char *name = atomic_load_explicit(&s->name, memory_order_acquire);
        if (name == NULL || name != s->names) {
            continue;
        }
        for (int o = 0; o < TG_METRICS_OUTCOMES && rc == TG_OK; o++) {
            uint64_t v = ld(&s->decisions[o]);
            if (v == 0) {
                continue;
            }
            rc = tg_buf_puts(out, "trigguard_decisions_total{decision=\"");
            if (rc == TG_OK) {
                rc = tg_buf_printf(out, "%s\",surface=\"", outcome_names[o]);
            }
            /* Surface names are policy-controlled: escape for the exposition format. */
            for (const char *p = name; *p && rc == TG_OK; p++) {
                if (*p == '\\' || *p == '"') {
                    rc = tg_buf_putc(out, '\\');
                }
                if (rc == TG_OK) {
                    rc = *p == '\n' ? tg_buf_puts(out, "\\n") : tg_buf_putc(out, *p);
                }
            }
            if (rc == TG_OK) {
                rc = tg_buf_printf(out, "\"} %llu\n", (unsigned long long)v);
            }
        }
    }
    for (int o = 0; o < TG_METRICS_OUTCOMES && rc == TG_OK; o++) {
        uint64_t v = ld(&m->surfaces_overflow[o]);
        if (v) {
            rc = tg_buf_printf(out,
                               "trigguard_decisions_total{decision=\"%s\",surface=\"other\"} "
                               "%llu\n",
                               outcome_names[o], (unsigned long long)v);
        }
    }
    if (rc == TG_OK) {
        rc = render_modes(out, m);
    }
    if (rc == TG_OK) {
        rc = render_shadow(out, m);
    }
    if (rc == TG_OK) {
        rc = render_detail(out, m);
    }
    if (rc == TG_OK) {
        rc = tg_metrics_render_limits(out, m);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(out,
                           "# HELP trigguard_idempotent_replays_total Responses replayed for a "
                           "repeated idempotency key.\n"
                           "# TYPE trigguard_idempotent_replays_total counter\n"
                           "trigguard_idempotent_replays_total %llu\n"
                           "# HELP trigguard_ledger_wait_timeouts_total Requests answered 503 "
                           "because their record was not durable in time (--ledger-stall-timeout, "
                           "or the drain at a stop ran out).\n"
                           "# TYPE trigguard_ledger_wait_timeouts_total counter\n"
                           "trigguard_ledger_wait_timeouts_total %llu\n"
                           "# HELP trigguard_receipt_index_collisions_total Receipts whose "
                           "executionId was already indexed for another ledger record (0 "
                           "unless something is wrong: the log names both records).\n"
                           "# TYPE trigguard_receipt_index_collisions_total counter\n"
                           "trigguard_receipt_index_collisions_total %llu\n",
                           (unsigned long long)ld(&m->idem_replays),
                           (unsigned long long)ld(&m->ledger_wait_timeouts),
                           (unsigned long long)ld(&m->receipt_index_collisions));
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_redemptions_total Receipt redemptions (POST "
                              "/v1/receipts/{id}/redeem) by result.\n"
                              "# TYPE trigguard_redemptions_total counter\n");
    }
    for (int r = 0; r < TG_REDEEM__COUNT && rc == TG_OK; r++) {
        rc = tg_buf_printf(out, "trigguard_redemptions_total{result=\"%s\"} %llu\n",
                           redeem_names[r], (unsigned long long)ld(&m->redemptions[r]));
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(out, "# HELP trigguard_approval_events_total Approval steps (SPEC "
                              "11.2): escalations, reviews, expiries, consumptions.\n"
                              "# TYPE trigguard_approval_events_total counter\n");
    }
    for (int e = 0; e < TG_APPROVAL_EVENT__COUNT && rc == TG_OK; e++) {
        rc = tg_buf_printf(out, "trigguard_approval_events_total{event=\"%s\"} %llu\n",
                           approval_event_names[e], (unsigned long long)ld(&m->approval_events[e]));
    }
    return rc;
}

/* The _bucket lines of a histogram kept per bucket (not cumulative): n buckets, the last
 * one +Inf, bounds[i] / scale its upper bounds. %g prints integers as integers, so one
 * writer serves the seconds and the counts. */
static tg_err_t put_buckets(tg_buf_t *o, const char *name, const uint64_t *hist, int n,
                            const uint64_t *bounds, double scale) {
    tg_err_t rc = TG_OK;
    uint64_t cum = 0;
    for (int b = 0; b < n && rc == TG_OK; b++) {
        cum += hist[b];
        if (b < n - 1) {
            rc = tg_buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)bounds[b] / scale,
                               (unsigned long long)cum);
        } else {
            rc = tg_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
        }
    }
    return rc;
}

/* The transparency log's series (SPEC §12): what the log published and how late. */
static tg_err_t render_log(tg_buf_t *o, const tg_metrics_log_t *lg) {
    tg_err_t rc = tg_buf_printf(o,
                                "# HELP trigguard_log_enabled 1 when a transparency log is kept "
                                "(--log-key).\n"
                                "# TYPE trigguard_log_enabled gauge\n"
                                "trigguard_log_enabled %d\n",
                                lg->enabled ? 1 : 0);
    if (rc != TG_OK || !lg->enabled) {
        return rc;
    }
    rc = tg_buf_printf(
        o,
        "# HELP trigguard_log_tree_size Leaves of the newest published checkpoint.\n"
        "# TYPE trigguard_log_tree_size gauge\n"
        "trigguard_log_tree_size %llu\n"
        "# HELP trigguard_log_integrated_leaves Leaves hashed into the tree (published or "
        "not).\n"
        "# TYPE trigguard_log_integrated_leaves gauge\n"
        "trigguard_log_integrated_leaves %llu\n"
        "# HELP trigguard_log_checkpoints_total Checkpoints signed and published since start.\n"
        "# TYPE trigguard_log_checkpoints_total counter\n"
        "trigguard_log_checkpoints_total %llu\n"
        "# HELP trigguard_log_checkpoint_failures_total Checkpoints that could not be made "
        "durable.\n"
        "# TYPE trigguard_log_checkpoint_failures_total counter\n"
        "trigguard_log_checkpoint_failures_total %llu\n"
        "# HELP trigguard_log_waiters Requests waiting for a checkpoint to cover their record.\n"
        "# TYPE trigguard_log_waiters gauge\n"
        "trigguard_log_waiters %llu\n"
        "# HELP trigguard_log_integrator 1 while this instance signs the log's checkpoints.\n"
        "# TYPE trigguard_log_integrator gauge\n"
        "trigguard_log_integrator %d\n"
        "# HELP trigguard_log_checkpoint_lag_last_seconds The last checkpoint's lag.\n"
        "# TYPE trigguard_log_checkpoint_lag_last_seconds gauge\n"
        "trigguard_log_checkpoint_lag_last_seconds %.3f\n"
        "# HELP trigguard_log_checkpoint_lag_seconds From a checkpoint's newest record's "
        "durability to the checkpoint's publication.\n"
        "# TYPE trigguard_log_checkpoint_lag_seconds histogram\n",
        (unsigned long long)lg->size, (unsigned long long)lg->integrated,
        (unsigned long long)lg->checkpoints, (unsigned long long)lg->failures,
        (unsigned long long)lg->waiters, lg->integrator ? 1 : 0, (double)lg->lag_ms_last / 1e3);
    if (rc == TG_OK) {
        rc = put_buckets(o, "trigguard_log_checkpoint_lag_seconds", lg->lag_hist,
                         TG_LEDGER_FSYNC_BUCKETS, tg_ledger_fsync_bounds_us, 1e6);
    }
    uint64_t count = 0;
    for (int b = 0; b < TG_LEDGER_FSYNC_BUCKETS; b++) {
        count += lg->lag_hist[b];
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "trigguard_log_checkpoint_lag_seconds_sum %.6f\n"
                           "trigguard_log_checkpoint_lag_seconds_count %llu\n",
                           (double)lg->lag_sum_us / 1e6, (unsigned long long)count);
    }
    return rc;
}

/* The other modules' counters, rendered here so that every line of the exposition has
 * one writer. */
tg_err_t tg_metrics_render_state(tg_buf_t *o, const tg_metrics_state_t *st) {
    const tg_ledger_stats_t ls = st->ledger;
    tg_err_t rc = render_log(o, &st->log);

    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "# HELP trigguard_ledger_records_total Records made durable.\n"
                           "# TYPE trigguard_ledger_records_total counter\n"
                           "trigguard_ledger_records_total %llu\n"
                           "# HELP trigguard_ledger_batches_total Group commits.\n"
                           "# TYPE trigguard_ledger_batches_total counter\n"
                           "trigguard_ledger_batches_total %llu\n"
                           "# HELP trigguard_ledger_failures_total Write or sync failures.\n"
                           "# TYPE trigguard_ledger_failures_total counter\n"
                           "trigguard_ledger_failures_total %llu\n"
                           "# HELP trigguard_ledger_healthy 1 when records can be made "
                           "durable.\n# TYPE trigguard_ledger_healthy gauge\n"
                           "trigguard_ledger_healthy %d\n"
                           "# HELP trigguard_ledger_stalled 1 while a ledger write or sync has "
                           "not returned within --ledger-stall-timeout.\n"
                           "# TYPE trigguard_ledger_stalled gauge\n"
                           "trigguard_ledger_stalled %d\n"
                           "# HELP trigguard_ledger_stalls_total Stalls declared.\n"
                           "# TYPE trigguard_ledger_stalls_total counter\n"
                           "trigguard_ledger_stalls_total %llu\n"
                           "# HELP trigguard_ledger_fsync_seconds fdatasync latency.\n"
                           "# TYPE trigguard_ledger_fsync_seconds histogram\n",
                           (unsigned long long)ls.records, (unsigned long long)ls.batches,
                           (unsigned long long)ls.failures, ls.healthy ? 1 : 0, ls.stalled ? 1 : 0,
                           (unsigned long long)ls.stalls);
    }
    if (rc == TG_OK) {
        rc = put_buckets(o, "trigguard_ledger_fsync_seconds", ls.fsync_hist,
                         TG_LEDGER_FSYNC_BUCKETS, tg_ledger_fsync_bounds_us, 1e6);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "trigguard_ledger_fsync_seconds_sum %.6f\n"
                           "trigguard_ledger_fsync_seconds_count %llu\n"
                           "# HELP trigguard_ledger_batch_records Records per group commit.\n"
                           "# TYPE trigguard_ledger_batch_records histogram\n",
                           (double)ls.fsync_sum_us / 1e6, (unsigned long long)ls.fsyncs);
    }
    if (rc == TG_OK) {
        rc = put_buckets(o, "trigguard_ledger_batch_records", ls.batch_hist,
                         TG_LEDGER_BATCH_BUCKETS, tg_ledger_batch_bounds, 1);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "trigguard_ledger_batch_records_sum %llu\n"
                           "trigguard_ledger_batch_records_count %llu\n",
                           (unsigned long long)ls.records, (unsigned long long)ls.batches);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "# HELP trigguard_ledger_identity_lost_total The ledger's directory, "
                           "lock file or segment was deleted, moved or replaced under it (a "
                           "restart is needed).\n"
                           "# TYPE trigguard_ledger_identity_lost_total counter\n"
                           "trigguard_ledger_identity_lost_total %llu\n",
                           (unsigned long long)ls.identity_lost);
    }
    const tg_rate_stats_t rs = st->rate, vs = st->verify_rate;
    const tg_bulkhead_stats_t bs = st->bulkhead;
    const tg_store_stats_t ss = st->store;
    if (rc == TG_OK) {
        rc = tg_buf_printf(
            o,
            "# HELP trigguard_rate_limited_total Requests refused by a rate limit.\n"
            "# TYPE trigguard_rate_limited_total counter\n"
            "trigguard_rate_limited_total{scope=\"tenant\"} %llu\n"
            "trigguard_rate_limited_total{scope=\"global\"} %llu\n"
            "trigguard_rate_limited_total{scope=\"verify\"} %llu\n"
            "# HELP trigguard_bulkhead_rejected_total Requests refused by a bulkhead.\n"
            "# TYPE trigguard_bulkhead_rejected_total counter\n"
            "trigguard_bulkhead_rejected_total{scope=\"tenant\"} %llu\n"
            "trigguard_bulkhead_rejected_total{scope=\"global\"} %llu\n"
            "# HELP trigguard_in_flight Requests being processed.\n"
            "# TYPE trigguard_in_flight gauge\n"
            "trigguard_in_flight %llu\n"
            "# HELP trigguard_store_entries Idempotency keys and nonces held.\n"
            "# TYPE trigguard_store_entries gauge\n"
            "trigguard_store_entries %llu\n"
            "# HELP trigguard_store_capacity Most entries the store may hold.\n"
            "# TYPE trigguard_store_capacity gauge\n"
            "trigguard_store_capacity %llu\n",
            (unsigned long long)rs.rejected_tenant, (unsigned long long)rs.rejected_global,
            (unsigned long long)vs.rejected_global, (unsigned long long)bs.rejected_tenant,
            (unsigned long long)bs.rejected_global, (unsigned long long)bs.in_flight,
            (unsigned long long)ss.entries, (unsigned long long)ss.max_entries);
    }
    if (rc == TG_OK) {
        /* Occupancy: alert before "full" answers 503 (deploy/alerts.yml). */
        rc = tg_buf_printf(
            o,
            "# HELP trigguard_store_bytes Memory the idempotency keys and nonces cost.\n"
            "# TYPE trigguard_store_bytes gauge\ntrigguard_store_bytes %llu\n"
            "# HELP trigguard_store_bytes_capacity The cap on trigguard_store_bytes.\n"
            "# TYPE trigguard_store_bytes_capacity gauge\ntrigguard_store_bytes_capacity %llu\n"
            "# HELP trigguard_receipt_index_entries Receipts GET /v1/receipts can find.\n"
            "# TYPE trigguard_receipt_index_entries gauge\ntrigguard_receipt_index_entries %llu\n"
            "# HELP trigguard_receipt_index_capacity Most entries the receipt index may hold.\n"
            "# TYPE trigguard_receipt_index_capacity gauge\n"
            "trigguard_receipt_index_capacity %llu\n"
            "# HELP trigguard_ledger_head_seq The last durable record's sequence number (records "
            "in the ledger).\n# TYPE trigguard_ledger_head_seq gauge\n"
            "trigguard_ledger_head_seq %llu\n"
            "# HELP trigguard_ledger_segment The active segment's number.\n"
            "# TYPE trigguard_ledger_segment gauge\ntrigguard_ledger_segment %u\n"
            "# HELP trigguard_ledger_segment_bytes The active segment's length.\n"
            "# TYPE trigguard_ledger_segment_bytes gauge\ntrigguard_ledger_segment_bytes %llu\n"
            "# HELP trigguard_ledger_bytes_total Bytes of the records made durable since start.\n"
            "# TYPE trigguard_ledger_bytes_total counter\ntrigguard_ledger_bytes_total %llu\n",
            (unsigned long long)ss.bytes, (unsigned long long)ss.max_bytes,
            (unsigned long long)st->receipts.entries, (unsigned long long)st->receipts.max_entries,
            (unsigned long long)ls.head_seq, (unsigned)ls.segment,
            (unsigned long long)ls.segment_bytes, (unsigned long long)ls.bytes);
    }
    /* How soon "full" comes (docs/OPERATIONS.md, deploy/alerts): a table that fills answers
     * 503 to every new key until entries age out. Each family's samples stay together. */
    static const char *const tables[2] = {"keys", "receipts"};
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "# HELP trigguard_store_fill_rate Net entries added per second "
                              "(inserts minus reclaims), smoothed over about a minute.\n"
                              "# TYPE trigguard_store_fill_rate gauge\n");
    }
    for (size_t i = 0; rc == TG_OK && i < 2; i++) {
        int64_t r = st->fill_rate_milli[i];
        uint64_t mag = r < 0 ? (uint64_t)0 - (uint64_t)r : (uint64_t)r;
        rc = tg_buf_printf(o, "trigguard_store_fill_rate{table=\"%s\"} %s%llu.%03llu\n", tables[i],
                           r < 0 ? "-" : "", (unsigned long long)(mag / 1000),
                           (unsigned long long)(mag % 1000));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "# HELP trigguard_store_seconds_to_full Seconds until the table "
                              "reaches its entry or byte cap at that rate (+Inf: not filling).\n"
                              "# TYPE trigguard_store_seconds_to_full gauge\n");
    }
    for (size_t i = 0; rc == TG_OK && i < 2; i++) {
        double eta = st->fill_eta_s[i];
        if (eta < 0) {
            rc =
                tg_buf_printf(o, "trigguard_store_seconds_to_full{table=\"%s\"} +Inf\n", tables[i]);
        } else {
            /* whole seconds, rounded up: 0 only when full */
            double whole = ceil(eta);
            rc = tg_buf_printf(o, "trigguard_store_seconds_to_full{table=\"%s\"} %.0f\n", tables[i],
                               whole > 9e15 ? 9e15 : whole);
        }
    }
    return rc;
}
