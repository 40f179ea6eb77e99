/* routes.c — the route table of SPEC §3 and the dispatch: transport refusals, 404/405, and
 * which handler answers (the decisions in evaluate.c, the rest in readonly.c). */
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

/* A prefix route's suffix that takes any non-empty rest, slashes included (the log's tile
 * paths, whose own parser checks them: tg_tlog_tile_parse). */
static const char ANY_REST[] = "";

typedef struct {
    const char *path; /* exact path, or prefix when it ends in '/' */
    method_t method;
    const char *suffix; /* prefix routes: NULL, or what follows the one segment after it, or
                           ANY_REST */
    tg_route_t id;
    route_fn fn;         /* NULL for a decision route: tg_pipeline_evaluate in `mode` */
    tg_eval_mode_t mode; /* decision routes only */
} route_t;

void tg_pipeline_finish_simple(tg_pipeline_t *p, tg_exchange_t *ex, tg_route_t id) {
    int64_t us = (tg_clock_mono_ns() - ex->start_ns) / 1000;
    tg_metrics_request(&p->metrics, id, ex->status, us);
    tg_log_request_t line = {.request_id = ex->request_id,
                             .tenant = ex->log_tenant,
                             .subject = ex->log_subject,
                             .issuer = ex->log_issuer,
                             .method = ex->method,
                             .route = tg_route_name(id),
                             .status = ex->status,
                             .latency_us = us,
                             .error = ex->status >= 400 ? ex->log_error : NULL,
                             .client = ex->client[0] != '\0' ? ex->client : NULL,
                             .traceparent = ex->traceparent[0] != '\0' ? ex->traceparent : NULL};
    tg_log_request(&line);
}

static const route_t routes[] = {
    {"/v1/evaluate", M_POST, NULL, TG_ROUTE_EVALUATE, NULL, TG_MODE_EVALUATE},
    {"/execute", M_POST, NULL, TG_ROUTE_EXECUTE, NULL, TG_MODE_EXECUTE},
    {"/decide", M_POST, NULL, TG_ROUTE_DECIDE, NULL, TG_MODE_DECIDE},
    /* nginx auth_request sends the subrequest as GET; Envoy ext_authz as the original
     * method: both reach the gate, which reads the original from X-Original-* headers. */
    {"/v1/gate", M_GET, NULL, TG_ROUTE_GATE, NULL, TG_MODE_GATE},
    {"/v1/gate", M_POST, NULL, TG_ROUTE_GATE, NULL, TG_MODE_GATE},
    {"/v1/verify", M_POST, NULL, TG_ROUTE_VERIFY, tg_route_verify, TG_MODE_EVALUATE},
    {"/verify-receipt", M_POST, NULL, TG_ROUTE_VERIFY, tg_route_verify, TG_MODE_EVALUATE},
    {"/protocol/verify-receipt", M_POST, NULL, TG_ROUTE_PROTOCOL_VERIFY, tg_route_protocol_verify,
     TG_MODE_EVALUATE},
    {"/protocol/verify-signature", M_POST, NULL, TG_ROUTE_VERIFY_SIGNATURE,
     tg_route_verify_signature, TG_MODE_EVALUATE},
    {"/v1/receipts/", M_GET, NULL, TG_ROUTE_RECEIPTS, tg_route_receipts, TG_MODE_EVALUATE},
    {"/v1/receipts/", M_POST, "/redeem", TG_ROUTE_REDEEM, tg_route_redeem, TG_MODE_EVALUATE},
    {"/v1/approvals", M_GET, NULL, TG_ROUTE_APPROVALS, tg_route_approvals_list, TG_MODE_EVALUATE},
    {"/v1/approvals/", M_GET, NULL, TG_ROUTE_APPROVAL, tg_route_approval_get, TG_MODE_EVALUATE},
    {"/v1/approvals/", M_POST, "/approve", TG_ROUTE_APPROVAL_REVIEW, tg_route_approval_approve,
     TG_MODE_EVALUATE},
    {"/v1/approvals/", M_POST, "/deny", TG_ROUTE_APPROVAL_REVIEW, tg_route_approval_deny,
     TG_MODE_EVALUATE},
    {"/v1/receipts/", M_GET, "/proof", TG_ROUTE_RECEIPT_PROOF, tg_route_receipt_proof,
     TG_MODE_EVALUATE},
    /* the transparency log (SPEC §12, log_routes.c) */
    {"/v1/log/checkpoint", M_GET, NULL, TG_ROUTE_LOG_CHECKPOINT, tg_route_log_checkpoint,
     TG_MODE_EVALUATE},
    {"/v1/log/tile/", M_GET, ANY_REST, TG_ROUTE_LOG_TILE, tg_route_log_tile, TG_MODE_EVALUATE},
    {"/v1/log/proof/inclusion", M_GET, NULL, TG_ROUTE_LOG_PROOF, tg_route_log_inclusion,
     TG_MODE_EVALUATE},
    {"/v1/log/proof/consistency", M_GET, NULL, TG_ROUTE_LOG_PROOF, tg_route_log_consistency,
     TG_MODE_EVALUATE},
    {"/.well-known/trigguard/keys.json", M_GET, NULL, TG_ROUTE_KEYS, tg_route_keys,
     TG_MODE_EVALUATE},
    {"/protocol/capabilities", M_GET, NULL, TG_ROUTE_CAPABILITIES, tg_route_capabilities,
     TG_MODE_EVALUATE},
    {"/healthz", M_GET, NULL, TG_ROUTE_HEALTHZ, tg_route_healthz, TG_MODE_EVALUATE},
    {"/readyz", M_GET, NULL, TG_ROUTE_READYZ, tg_route_readyz, TG_MODE_EVALUATE},
    {"/version", M_GET, NULL, TG_ROUTE_VERSION, tg_route_version, TG_MODE_EVALUATE},
    {"/metrics", M_GET, NULL, TG_ROUTE_METRICS, tg_route_metrics, TG_MODE_EVALUATE},
    {"/v1/admin/reload", M_POST, NULL, TG_ROUTE_ADMIN_RELOAD, NULL, TG_MODE_EVALUATE},
};

#define N_ROUTES (sizeof routes / sizeof routes[0])

static bool path_matches(const route_t *r, const char *path, const char **rest) {
    size_t n = strlen(r->path);
    if (r->path[n - 1] == '/') {
        if (strncmp(path, r->path, n) != 0 || path[n] == '\0' || path[n] == '/') {
            return false;
        }
        if (r->suffix == ANY_REST) {
            *rest = path + n;
            return true;
        }
        /* one segment, then exactly the suffix (if any) */
        const char *slash = strchr(path + n, '/');
        bool ok =
            r->suffix == NULL ? slash == NULL : slash != NULL && strcmp(slash, r->suffix) == 0;
        if (ok) {
            *rest = path + n;
        }
        return ok;
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

/* What the --admin-listen listener serves: metrics, reload and the health routes. */
static bool is_admin_route(tg_route_t id) {
    return id == TG_ROUTE_METRICS || id == TG_ROUTE_ADMIN_RELOAD || id == TG_ROUTE_HEALTHZ ||
           id == TG_ROUTE_READYZ || id == TG_ROUTE_VERSION;
}

/* What the API port stops serving once an admin listener exists (health stays on both: a
 * load balancer checks the port it sends traffic to). */
static bool is_admin_only(tg_route_t id) {
    return id == TG_ROUTE_METRICS || id == TG_ROUTE_ADMIN_RELOAD;
}

static route_match_t match_route(const tg_exchange_t *ex, bool admin_apart) {
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
        /* --admin-listen: the operator's routes live there and only there. */
        if (ex->listener == 2 ? !is_admin_route(routes[i].id)
                              : admin_apart && is_admin_only(routes[i].id)) {
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
    return id == TG_ROUTE_EVALUATE || id == TG_ROUTE_EXECUTE || id == TG_ROUTE_DECIDE ||
           id == TG_ROUTE_GATE;
}

void tg_pipeline_handle(void *ud, tg_exchange_t *ex) {
    tg_pipeline_t *p = ud;
    if (ex->shutting_down) {
        /* SPEC's word for "not now, retry shortly" (with Retry-After); never deferred. */
        tg_reply_fail(ex, TG_ANSWER_OVERLOADED,
                      "the server is shutting down; retry shortly (another instance, "
                      "or this one once restarted)");
        tg_pipeline_finish_simple(p, ex, TG_ROUTE_OTHER);
        return;
    }
    /* Transport limits first, on every route (the HTTP layer measured them). */
    if (ex->url_too_long || ex->headers_too_large || ex->bad_framing || ex->bad_header ||
        ex->bad_target) {
        if (ex->bad_target != NULL) {
            tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, ex->bad_target);
        } else if (ex->bad_header != NULL) {
            tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, ex->bad_header);
        } else if (ex->bad_framing) {
            tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST,
                          "ambiguous message framing: several Content-Length or "
                          "Transfer-Encoding headers, both together, or a transfer "
                          "coding other than chunked");
        } else if (ex->url_too_long) {
            tg_reply_limit(ex, TG_ANSWER_URI_TOO_LONG, "max_url", (size_t)p->cfg.max_url,
                           "request path and query are %zu bytes, longer than --max-url %lld",
                           ex->url_bytes, (long long)p->cfg.max_url);
        } else {
            tg_reply_limit(ex, TG_ANSWER_HEADERS_TOO_LARGE, "max_header_bytes",
                           (size_t)p->cfg.max_header_bytes,
                           "request headers are %zu bytes, more than --max-header-bytes %lld",
                           ex->header_bytes, (long long)p->cfg.max_header_bytes);
        }
        tg_pipeline_finish_simple(p, ex, TG_ROUTE_OTHER);
        return;
    }
    route_match_t m = match_route(ex, p->cfg.admin_listen[0] != '\0');
    if (m.hit == NULL) {
        if (m.allow != NULL) {
            ex->allow = m.allow;
            tg_reply_fail(ex, TG_ANSWER_METHOD_NOT_ALLOWED, "method not allowed here");
        } else {
            tg_reply_fail(ex, TG_ANSWER_NOT_FOUND, "no such endpoint");
        }
        tg_pipeline_finish_simple(p, ex, m.known_id);
        return;
    }
    if (m.hit->id == TG_ROUTE_ADMIN_RELOAD) {
        tg_route_admin_reload(p, ex);
        return; /* its own accounting: it may finish later, on the control thread's word */
    }
    if (m.hit->fn == NULL) {
        tg_pipeline_evaluate(p, ex, m.hit->mode);
        return; /* the decision routes do their own accounting (they may finish later) */
    }
    m.hit->fn(p, ex, m.rest);
    tg_pipeline_finish_simple(p, ex, m.hit->id);
}

/* Why: a `100 Continue` invites the caller to send up to --max-body bytes, which a caller
 * without a valid token should not be invited to (RFC 9110 §10.1.1 lets a final status
 * replace the 100). The order of the handler is kept: the transport checks (the HTTP
 * layer) come first, and a valid token is checked again with the rest of admission once
 * the body is in. */
void tg_pipeline_early(void *ud, tg_exchange_t *ex) {
    tg_pipeline_t *p = ud;
    route_match_t m = match_route(ex, p->cfg.admin_listen[0] != '\0');
    int tenant = TG_GUARD_NO_TENANT;
    const char *auth = ex->authorization;
    if (m.hit == NULL || !is_decision_route(m.hit->id)) {
        return;
    }
    /* A JWT (with OIDC on) is no static token: looked up here it would be a 401 for every JWT
     * caller that asks for 100 Continue. It is verified once, with the body (tg_pipeline_auth:
     * the check may wait for a key refresh and is counted per token); a caller can skip this
     * early check by not asking for 100 Continue anyway, so nothing is lost by waiting. */
    if (tg_oidc_enabled(p->oidc) && tg_oidc_is_jwt_header(auth, auth != NULL ? strlen(auth) : 0)) {
        return;
    }
    tg_swap_ref_t th;
    bool bad = tg_auth_check(tg_pipeline_tenants_acquire(p, &th), auth, auth ? strlen(auth) : 0,
                             &tenant) != TG_OK;
    tg_pipeline_tenants_release(p, &th);
    if (bad) {
        tg_pipeline_handle(p, ex); /* the 401, exactly as after the body */
    }
}
