/* routes.c — the route table of SPEC §3 and the small read-only endpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/version.h"

typedef enum { M_GET, M_POST } method_t;

typedef void (*route_fn)(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);

typedef struct {
    const char *path; /* exact path, or prefix when it ends in '/' */
    method_t method;
    tg_route_t id;
    route_fn fn;
} route_t;

static void finish_simple(tg_pipeline_t *p, tg_exchange_t *ex, tg_route_t id) {
    int64_t us = (tg_clock_mono_ns() - ex->start_ns) / 1000;
    tg_metrics_request(&p->metrics, id, ex->status, us);
    tg_log_request_t line = {.request_id = ex->request_id,
                             .method = ex->method,
                             .route = tg_route_name(id),
                             .status = ex->status,
                             .latency_us = us};
    tg_log_request(&line);
}

static void put_or_fail(tg_exchange_t *ex, tg_err_t rc, int status) {
    if (rc != TG_OK) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    } else {
        tg_reply_json(ex, status);
    }
}

static void r_evaluate(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_pipeline_evaluate(p, ex, TG_MODE_EVALUATE);
}

static void r_execute(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_pipeline_evaluate(p, ex, TG_MODE_EXECUTE);
}

static void r_decide(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_pipeline_evaluate(p, ex, TG_MODE_DECIDE);
}

static void r_healthz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)p;
    (void)rest;
    put_or_fail(ex, tg_buf_puts(&ex->out, "{\"status\":\"ok\"}"), 200);
}

/* Appends "; part" (or "part" first) to the NUL-terminated text in buf[0..cap). */
static void add_reason(char *buf, size_t cap, const char *part) {
    size_t n = strlen(buf);
    (void)snprintf(buf + n, cap - n, "%s%s", n > 0 ? "; " : "", part);
}

/* Not ready: "reason" says why, one clause per missing part, so that an operator (or a load
 * balancer's log) reads "ledger: probe write ...: No space left on device", not only 503. */
static void r_readyz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    bool policy = tg_swap_peek(p->policy) != NULL;
    bool key = p->signer != NULL;
    char ledger_why[256];
    bool ledger = tg_ledger_health(p->ledger, ledger_why, sizeof ledger_why);
    bool serving = atomic_load(&p->serving);
    bool ready = policy && key && ledger && serving;
    tg_err_t rc =
        tg_buf_printf(&ex->out,
                      "{\"ready\":%s,\"policy\":%s,\"signing_key\":%s,\"ledger\":%s,"
                      "\"serving\":%s",
                      ready ? "true" : "false", policy ? "true" : "false", key ? "true" : "false",
                      ledger ? "true" : "false", serving ? "true" : "false");
    if (rc == TG_OK && !ready) {
        char why[640] = "";
        if (!serving) {
            add_reason(why, sizeof why, "not serving (starting or stopping)");
        }
        if (!policy) {
            add_reason(why, sizeof why, "no policy loaded");
        }
        if (!key) {
            add_reason(why, sizeof why, "no signing key loaded");
        }
        if (!ledger) {
            char part[sizeof ledger_why + 16];
            (void)snprintf(part, sizeof part, "ledger: %s",
                           ledger_why[0] != '\0' ? ledger_why : "unhealthy");
            add_reason(why, sizeof why, part);
        }
        rc = tg_buf_puts(&ex->out, ",\"reason\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(&ex->out, why, strlen(why));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    put_or_fail(ex, rc, ready ? 200 : 503);
}

static void r_version(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_swap_ref_t hold;
    tg_policy_ref_t *ref = tg_pipeline_policy_acquire(p, &hold);
    const char *pv = tg_policy_version(ref->policy);
    tg_err_t rc =
        tg_buf_printf(&ex->out,
                      "{\"engine\":\"%s\",\"version\":\"%s\",\"protocol\":\"%s\","
                      "\"protocol_version\":\"%s\",\"build_commit\":\"%s\","
                      "\"durability\":\"%s\",\"policy_version\":",
                      TG_ENGINE_VERSION, TG_VERSION, TG_PROTOCOL_VERSION, TG_PROTOCOL_SEMVER,
                      TG_GIT_COMMIT, tg_config_durability_name(p->cfg.durability));
    if (rc == TG_OK) {
        rc = tg_canon_string(&ex->out, pv, strlen(pv));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(&ex->out, ",\"policy_hash\":\"%s\"}", tg_policy_hash_hex(ref->policy));
    }
    tg_pipeline_policy_release(p, &hold);
    put_or_fail(ex, rc, 200);
}

static void r_keys(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    if (p->keys_json.len == 0) {
        tg_reply_error(ex, TG_ERR_NO_KEY, "no key is loaded");
        return;
    }
    ex->cache_control = "public, max-age=300";
    put_or_fail(ex, tg_buf_append(&ex->out, p->keys_json.data, p->keys_json.len), 200);
}

static void r_capabilities(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_swap_ref_t hold;
    tg_policy_ref_t *ref = tg_pipeline_policy_acquire(p, &hold);
    tg_buf_t *o = &ex->out;
    tg_err_t rc = tg_buf_printf(
        o,
        "{\"protocol\":\"%s\",\"protocol_version\":\"%s\",\"engine\":\"%s\","
        "\"decisions\":[\"PERMIT\",\"DENY\",\"SILENCE\"],"
        "\"algorithms\":{\"signature\":\"Ed25519\",\"hash\":\"SHA-256\","
        "\"canonicalization\":\"RFC8785\"},"
        "\"endpoints\":[\"POST /v1/evaluate\",\"POST /execute\",\"POST /decide\","
        "\"POST /v1/verify\",\"POST /verify-receipt\",\"POST /protocol/verify-receipt\","
        "\"GET /v1/receipts/{executionId}\",\"GET /.well-known/trigguard/keys.json\","
        "\"GET /protocol/capabilities\",\"GET /healthz\",\"GET /readyz\",\"GET /version\","
        "\"GET /metrics\"],\"surfaces\":[",
        TG_PROTOCOL_VERSION, TG_PROTOCOL_SEMVER, TG_ENGINE_VERSION);
    size_t n = tg_policy_surface_count(ref->policy);
    for (uint32_t i = 0; i < n && rc == TG_OK; i++) {
        tg_sv_t name = tg_policy_surface_name(ref->policy, i);
        rc = tg_buf_printf(o, "%s{\"name\":", i ? "," : "");
        if (rc == TG_OK) {
            rc = tg_canon_string(o, name.ptr, name.len);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(o, ",\"tier\":%d}", tg_policy_surface_tier(ref->policy, i));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "]}");
    }
    tg_pipeline_policy_release(p, &hold);
    put_or_fail(ex, rc, 200);
}

static void verify_common(tg_pipeline_t *p, tg_exchange_t *ex, bool protocol) {
    /* First, before any parsing or signature work: this route takes no token, so its one
     * limiter is all the bound there is on what anonymous callers can make us compute. */
    tg_rate_info_t info;
    if (tg_rate_check(p->verify_rate, TG_GUARD_NO_TENANT, tg_clock_mono_ns(), &info) != TG_OK) {
        ex->retry_after_s = (int)tg_rate_retry_after_s(info.retry_after_ms);
        tg_reply_error(ex, TG_ERR_RATE_LIMITED, "verification rate limit exceeded");
        return;
    }
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        return;
    }
    if (!tg_http_content_type_is_json(ex->content_type)) {
        tg_reply_error_code(ex, 415, "unsupported_media_type",
                            "Content-Type must be application/json");
        return;
    }
    json_t *doc = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&doc, ex->body, ex->body_len, &p->limits, &diag);
    if (rc != TG_OK) {
        tg_reply_json_error(ex, &p->limits, rc, diag.msg);
        return;
    }
    diag.msg[0] = '\0';
    rc = tg_receipt_verify_doc(&p->ring, doc, tg_clock_now_ms(), NULL, &diag); /* the CLI's rule */
    json_decref(doc);
    bool internal = rc == TG_ERR_NOMEM || rc == TG_ERR_INTERNAL;
    if (internal) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    bool valid = rc == TG_OK;
    /* Expired = authentic but no longer authorizing: say both (SPEC §5). */
    bool authentic = valid || rc == TG_ERR_RECEIPT_EXPIRED;
    tg_buf_t *o = &ex->out;
    rc = tg_buf_printf(o, "{%s\"valid\":%s,\"authentic\":%s,\"reason\":\"%s\"",
                       protocol ? "\"type\":\"verify_receipt\",\"protocol\":\"" TG_PROTOCOL_VERSION
                                  "\",\"protocol_version\":\"" TG_PROTOCOL_SEMVER "\","
                                : "",
                       valid ? "true" : "false", authentic ? "true" : "false",
                       tg_receipt_reason_code(valid ? TG_OK : rc));
    if (rc == TG_OK && !valid && diag.msg[0]) {
        rc = tg_buf_puts(o, ",\"detail\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(o, diag.msg, strlen(diag.msg));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(o, '}');
    }
    put_or_fail(ex, rc, 200);
}

static void r_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    verify_common(p, ex, false);
}

static void r_protocol_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    verify_common(p, ex, true);
}

static void r_receipts(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    tg_pipeline_get_receipt(p, ex, rest);
}

static void r_metrics(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);

static const route_t routes[] = {
    {"/v1/evaluate", M_POST, TG_ROUTE_EVALUATE, r_evaluate},
    {"/execute", M_POST, TG_ROUTE_EXECUTE, r_execute},
    {"/decide", M_POST, TG_ROUTE_DECIDE, r_decide},
    {"/v1/verify", M_POST, TG_ROUTE_VERIFY, r_verify},
    {"/verify-receipt", M_POST, TG_ROUTE_VERIFY, r_verify},
    {"/protocol/verify-receipt", M_POST, TG_ROUTE_PROTOCOL_VERIFY, r_protocol_verify},
    {"/v1/receipts/", M_GET, TG_ROUTE_RECEIPTS, r_receipts},
    {"/.well-known/trigguard/keys.json", M_GET, TG_ROUTE_KEYS, r_keys},
    {"/protocol/capabilities", M_GET, TG_ROUTE_CAPABILITIES, r_capabilities},
    {"/healthz", M_GET, TG_ROUTE_HEALTHZ, r_healthz},
    {"/readyz", M_GET, TG_ROUTE_READYZ, r_readyz},
    {"/version", M_GET, TG_ROUTE_VERSION, r_version},
    {"/metrics", M_GET, TG_ROUTE_METRICS, r_metrics},
};

#define N_ROUTES (sizeof routes / sizeof routes[0])

static bool path_matches(const route_t *r, const char *path, const char **rest) {
    size_t n = strlen(r->path);
    if (r->path[n - 1] == '/') {
        if (strncmp(path, r->path, n) == 0 && path[n] != '\0' && strchr(path + n, '/') == NULL) {
            *rest = path + n;
            return true;
        }
        return false;
    }
    *rest = "";
    return strcmp(path, r->path) == 0;
}

/* What a request's method and path select on its listener. */
typedef struct {
    const route_t *hit;  /* NULL: 404, or 405 when allow is set */
    const char *rest;    /* the path after a prefix route's prefix */
    tg_route_t known_id; /* the route a 405 is counted under, else TG_ROUTE_OTHER */
    const char *allow;   /* the Allow header of a 405 */
} route_match_t;

static route_match_t match_route(const tg_exchange_t *ex) {
    route_match_t m = {NULL, "", TG_ROUTE_OTHER, NULL};
    bool is_get = strcmp(ex->method, "GET") == 0 || strcmp(ex->method, "HEAD") == 0;
    bool is_post = strcmp(ex->method, "POST") == 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *rr;
        if (!path_matches(&routes[i], ex->path, &rr)) {
            continue;
        }
        /* The /decide-only listener serves nothing else (SPEC §10 TG_DECIDE_PORT). */
        if (ex->listener == 1 && routes[i].id != TG_ROUTE_DECIDE) {
            continue;
        }
        m.known_id = routes[i].id;
        if ((routes[i].method == M_GET && is_get) || (routes[i].method == M_POST && is_post)) {
            m.hit = &routes[i];
            m.rest = rr;
            m.allow = NULL;
            return m;
        }
        m.allow = routes[i].method == M_GET ? "GET, HEAD" : "POST";
    }
    return m;
}

/* The routes that take a bearer token and run the decision pipeline. */
static bool is_decision_route(tg_route_t id) {
    return id == TG_ROUTE_EVALUATE || id == TG_ROUTE_EXECUTE || id == TG_ROUTE_DECIDE;
}

void tg_pipeline_handle(void *ud, tg_exchange_t *ex) {
    tg_pipeline_t *p = ud;
    if (ex->shutting_down) {
        /* SPEC's word for "not now, retry shortly" (with Retry-After); never deferred. */
        tg_reply_error_code(ex, 503, "overloaded",
                            "the server is shutting down; retry shortly (another instance, "
                            "or this one once restarted)");
        finish_simple(p, ex, TG_ROUTE_OTHER);
        return;
    }
    /* Transport limits first, on every route (the HTTP layer measured them). */
    if (ex->url_too_long || ex->headers_too_large || ex->bad_framing || ex->bad_header ||
        ex->bad_target) {
        if (ex->bad_target != NULL) {
            tg_reply_error_code(ex, 400, "invalid_request", ex->bad_target);
        } else if (ex->bad_header != NULL) {
            tg_reply_error_code(ex, 400, "invalid_request", ex->bad_header);
        } else if (ex->bad_framing) {
            tg_reply_error_code(ex, 400, "invalid_request",
                                "ambiguous message framing: several Content-Length or "
                                "Transfer-Encoding headers, both together, or a transfer "
                                "coding other than chunked");
        } else if (ex->url_too_long) {
            tg_reply_limit(ex, 414, "uri_too_long", "max_url", (size_t)p->cfg.max_url,
                           "request path and query are %zu bytes, longer than --max-url %lld",
                           ex->url_bytes, (long long)p->cfg.max_url);
        } else {
            tg_reply_limit(ex, 431, "headers_too_large", "max_header_bytes",
                           (size_t)p->cfg.max_header_bytes,
                           "request headers are %zu bytes, more than --max-header-bytes %lld",
                           ex->header_bytes, (long long)p->cfg.max_header_bytes);
        }
        finish_simple(p, ex, TG_ROUTE_OTHER);
        return;
    }
    route_match_t m = match_route(ex);
    if (m.hit == NULL) {
        if (m.allow != NULL) {
            ex->allow = m.allow;
            tg_reply_error_code(ex, 405, "method_not_allowed", "method not allowed here");
        } else {
            tg_reply_error_code(ex, 404, "not_found", "no such endpoint");
        }
        finish_simple(p, ex, m.known_id);
        return;
    }
    m.hit->fn(p, ex, m.rest);
    /* The decision routes do their own accounting (they may finish later). */
    if (!is_decision_route(m.hit->id)) {
        finish_simple(p, ex, m.hit->id);
    }
}

static void r_metrics(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_buf_t *o = &ex->out;
    tg_err_t rc = tg_metrics_render(o, &p->metrics);
    tg_ledger_stats_t ls;
    tg_ledger_stats(p->ledger, &ls);
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
    uint64_t cum = 0;
    for (int b = 0; b < TG_LEDGER_FSYNC_BUCKETS && rc == TG_OK; b++) {
        cum += ls.fsync_hist[b];
        if (b < TG_LEDGER_FSYNC_BUCKETS - 1) {
            rc = tg_buf_printf(o, "trigguard_ledger_fsync_seconds_bucket{le=\"%g\"} %llu\n",
                               (double)tg_ledger_fsync_bounds_us[b] / 1e6, (unsigned long long)cum);
        } else {
            rc = tg_buf_printf(o, "trigguard_ledger_fsync_seconds_bucket{le=\"+Inf\"} %llu\n",
                               (unsigned long long)cum);
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o,
                           "trigguard_ledger_fsync_seconds_sum %.6f\n"
                           "trigguard_ledger_fsync_seconds_count %llu\n"
                           "# HELP trigguard_ledger_batch_records Records per group commit.\n"
                           "# TYPE trigguard_ledger_batch_records histogram\n",
                           (double)ls.fsync_sum_us / 1e6, (unsigned long long)ls.fsyncs);
    }
    cum = 0;
    for (int b = 0; b < TG_LEDGER_BATCH_BUCKETS && rc == TG_OK; b++) {
        cum += ls.batch_hist[b];
        if (b < TG_LEDGER_BATCH_BUCKETS - 1) {
            rc = tg_buf_printf(o, "trigguard_ledger_batch_records_bucket{le=\"%llu\"} %llu\n",
                               (unsigned long long)tg_ledger_batch_bounds[b],
                               (unsigned long long)cum);
        } else {
            rc = tg_buf_printf(o, "trigguard_ledger_batch_records_bucket{le=\"+Inf\"} %llu\n",
                               (unsigned long long)cum);
        }
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
    tg_rate_stats_t rs, vs;
    tg_rate_stats(p->rate, &rs);
    tg_rate_stats(p->verify_rate, &vs);
    tg_bulkhead_stats_t bs;
    tg_bulkhead_stats(p->bulkhead, &bs);
    tg_store_stats_t ss;
    tg_store_stats(p->store, &ss);
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
        ex->content_type_out = "text/plain; version=0.0.4; charset=utf-8";
        ex->status = 200;
    } else {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    }
}

/* Why: a `100 Continue` invites the caller to send up to --max-body bytes, which a caller
 * without a valid token should not be invited to (RFC 9110 §10.1.1 lets a final status
 * replace the 100). The order of the handler is kept: the transport checks (the HTTP
 * layer) come first, and a valid token is checked again with the rest of admission once
 * the body is in. */
void tg_pipeline_early(void *ud, tg_exchange_t *ex) {
    tg_pipeline_t *p = ud;
    route_match_t m = match_route(ex);
    int tenant = TG_GUARD_NO_TENANT;
    const char *auth = ex->authorization;
    if (m.hit != NULL && is_decision_route(m.hit->id) &&
        tg_auth_check(p->tenants, auth, auth ? strlen(auth) : 0, &tenant) != TG_OK) {
        tg_pipeline_handle(p, ex); /* the 401, exactly as after the body */
    }
}
