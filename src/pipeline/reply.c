/* reply.c — the one table of answers: each one's HTTP status and error code, and tg_err_t's. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* What each answer is on the wire. Error answers carry their code; successful ones none. */
typedef struct {
    int status;
    const char *code; /* the error body's "error", NULL for an answer with its own body */
    bool retry;       /* 503s that are transient get Retry-After: 1 */
} answer_map_t;

static const answer_map_t answers[TG_ANSWER__COUNT] = {
    [TG_ANSWER_OK] = {200, NULL, false},
    [TG_ANSWER_BLOCKED] = {403, NULL, false},
    [TG_ANSWER_NOT_READY] = {503, NULL, false},
    [TG_ANSWER_INVALID_JSON] = {400, "invalid_json", false},
    [TG_ANSWER_INVALID_REQUEST] = {400, "invalid_request", false},
    [TG_ANSWER_UNKNOWN_SURFACE] = {400, "unknown_surface", false},
    [TG_ANSWER_UNAUTHORIZED] = {401, "unauthorized", false},
    [TG_ANSWER_ROLE_NOT_ALLOWED] = {403, "role_not_allowed", false},
    [TG_ANSWER_SURFACE_NOT_ALLOWED] = {403, "surface_not_allowed", false},
    [TG_ANSWER_ACTOR_NOT_ALLOWED] = {403, "actor_not_allowed", false},
    [TG_ANSWER_TENANT_NOT_ALLOWED] = {403, "tenant_not_allowed", false},
    [TG_ANSWER_OBSERVE_NOT_ALLOWED] = {403, "observe_not_allowed", false},
    [TG_ANSWER_ROUTE_NOT_MAPPED] = {403, "route_not_mapped", false},
    [TG_ANSWER_NOT_FOUND] = {404, "not_found", false},
    [TG_ANSWER_METHOD_NOT_ALLOWED] = {405, "method_not_allowed", false},
    [TG_ANSWER_CONFLICT] = {409, "idempotency_conflict", false},
    [TG_ANSWER_REPLAY] = {409, "replay_detected", false},
    [TG_ANSWER_BODY_TOO_LARGE] = {413, "body_too_large", false},
    [TG_ANSWER_URI_TOO_LONG] = {414, "uri_too_long", false},
    [TG_ANSWER_UNSUPPORTED_MEDIA] = {415, "unsupported_media_type", false},
    [TG_ANSWER_RATE_LIMITED] = {429, "rate_limited", false},
    [TG_ANSWER_HEADERS_TOO_LARGE] = {431, "headers_too_large", false},
    [TG_ANSWER_INTERNAL] = {500, "internal_error", false},
    [TG_ANSWER_OVERLOADED] = {503, "overloaded", true},
    [TG_ANSWER_KEYS_UNAVAILABLE] = {503, "keys_unavailable", false},
    [TG_ANSWER_LEDGER_UNAVAILABLE] = {503, "ledger_unavailable", true},
    [TG_ANSWER_STORE_UNAVAILABLE] = {503, "store_unavailable", true},
    [TG_ANSWER_IDP_UNAVAILABLE] = {503, "identity_provider_unavailable", true},
    [TG_ANSWER_RECEIPT_ALREADY_REDEEMED] = {409, "receipt_already_redeemed", false},
    [TG_ANSWER_RECEIPT_NOT_PERMIT] = {409, "receipt_not_permit", false},
    [TG_ANSWER_RECEIPT_NOT_AUTHENTIC] = {409, "receipt_not_authentic", false},
    [TG_ANSWER_RECEIPT_EXPIRED] = {410, "receipt_expired", false},
    [TG_ANSWER_REQUEST_HASH_MISMATCH] = {422, "request_hash_mismatch", false},
    [TG_ANSWER_APPROVAL_NOT_FOUND] = {404, "approval_not_found", false},
    [TG_ANSWER_NOT_APPROVER] = {403, "not_an_approver", false},
    [TG_ANSWER_ALREADY_REVIEWED] = {409, "already_reviewed", false},
    [TG_ANSWER_APPROVAL_CLOSED] = {409, "approval_closed", false},
    [TG_ANSWER_APPROVAL_CONSUMED] = {409, "approval_consumed", false},
    [TG_ANSWER_LOG_PENDING] = {202, NULL, false},
    [TG_ANSWER_LOG_DISABLED] = {404, "log_disabled", false},
    [TG_ANSWER_LOG_INCONSISTENT] = {500, "log_inconsistent", false},
    [TG_ANSWER_BATCH_NO_LOG] = {400, "log_disabled", false},
    [TG_ANSWER_LOG_TIMEOUT] = {503, "log_pending", true},
};

typedef struct {
    tg_err_t err;
    tg_answer_t answer;
} err_map_t;

/* Every error a request can end in. Anything not listed is a 500 `internal_error`
 * whose message never says more than that (a 5xx never leaks internals). */
static const err_map_t err_map[] = {
    {TG_ERR_JSON_SYNTAX, TG_ANSWER_INVALID_JSON},
    {TG_ERR_JSON_DUPLICATE_KEY, TG_ANSWER_INVALID_JSON},
    {TG_ERR_JSON_UTF8, TG_ANSWER_INVALID_JSON},
    {TG_ERR_JSON_SURROGATE, TG_ANSWER_INVALID_JSON},
    {TG_ERR_JSON_NONFINITE, TG_ANSWER_INVALID_JSON},
    {TG_ERR_JSON_DEPTH, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_JSON_TYPE, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_JSON_STRING_LONG, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_JSON_NAME_LONG, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_JSON_MEMBERS, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_JSON_TOO_LARGE, TG_ANSWER_BODY_TOO_LARGE},
    {TG_ERR_LIMIT, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_REQUEST_INVALID, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_INVALID_ARG, TG_ANSWER_INVALID_REQUEST},
    {TG_ERR_UNKNOWN_SURFACE, TG_ANSWER_UNKNOWN_SURFACE},
    {TG_ERR_UNAUTHORIZED, TG_ANSWER_UNAUTHORIZED},
    {TG_ERR_NOT_FOUND, TG_ANSWER_NOT_FOUND},
    {TG_ERR_CONFLICT, TG_ANSWER_CONFLICT},
    {TG_ERR_IN_FLIGHT, TG_ANSWER_CONFLICT},
    {TG_ERR_REPLAY, TG_ANSWER_REPLAY},
    {TG_ERR_RATE_LIMITED, TG_ANSWER_RATE_LIMITED},
    {TG_ERR_OVERLOADED, TG_ANSWER_OVERLOADED},
    {TG_ERR_NO_KEY, TG_ANSWER_KEYS_UNAVAILABLE},
    {TG_ERR_LEDGER_UNHEALTHY, TG_ANSWER_LEDGER_UNAVAILABLE},
    {TG_ERR_STORE_UNAVAILABLE, TG_ANSWER_STORE_UNAVAILABLE},
    {TG_ERR_TENANT_NOT_ALLOWED, TG_ANSWER_TENANT_NOT_ALLOWED},
    {TG_ERR_IDP_UNAVAILABLE, TG_ANSWER_IDP_UNAVAILABLE},
    {TG_ERR_NOT_APPROVER, TG_ANSWER_NOT_APPROVER},
    {TG_ERR_ALREADY_REVIEWED, TG_ANSWER_ALREADY_REVIEWED},
    {TG_ERR_APPROVAL_CLOSED, TG_ANSWER_APPROVAL_CLOSED},
    {TG_ERR_APPROVAL_CONSUMED, TG_ANSWER_APPROVAL_CONSUMED},
    {TG_ERR_REQUEST_HASH_MISMATCH, TG_ANSWER_REQUEST_HASH_MISMATCH},
    {TG_ERR_LOG_DISABLED, TG_ANSWER_LOG_DISABLED},
};

int tg_answer_status(tg_answer_t a) {
    return (unsigned)a < TG_ANSWER__COUNT && answers[a].status != 0 ? answers[a].status : 500;
}

bool tg_answer_is_decision(int status) {
    return status == answers[TG_ANSWER_OK].status || status == answers[TG_ANSWER_BLOCKED].status;
}

tg_answer_t tg_answer_of(tg_err_t e) {
    for (size_t i = 0; i < sizeof err_map / sizeof err_map[0]; i++) {
        if (err_map[i].err == e) {
            return err_map[i].answer;
        }
    }
    return TG_ANSWER_INTERNAL;
}

/* The one error body: {"error","message"[,"limit","max"],"request_id"}. */
static void reply_body(tg_exchange_t *ex, tg_answer_t a, const char *limit, size_t max,
                       const char *message) {
    if ((unsigned)a >= TG_ANSWER__COUNT || answers[a].code == NULL) {
        a = TG_ANSWER_INTERNAL; /* a success kind has no error body: a caller's mistake */
        message = "internal error";
    }
    const char *code = answers[a].code;
    tg_buf_reset(&ex->out);
    ex->status = answers[a].status;
    ex->log_error = code; /* the access log's "error" */
    ex->content_type_out = NULL;
    if (ex->status == 401) {
        ex->www_authenticate = true; /* RFC 9110 §11.6.1: a 401 names its scheme */
    }
    /* Shed load with a hint: overload and a sick ledger are transient (the writer retries
     * recovery every second). A 429 sets its own value from the limiter. */
    if (answers[a].retry && ex->retry_after_s <= 0) {
        ex->retry_after_s = 1;
    }
    tg_err_t rc = tg_buf_puts(&ex->out, "{\"error\":\"");
    if (rc == TG_OK) {
        rc = tg_buf_puts(&ex->out, code);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(&ex->out, "\",\"message\":");
    }
    if (rc == TG_OK) {
        /* Messages may quote request data (a member name); escape them properly. */
        rc = tg_canon_string(&ex->out, message, strlen(message));
        if (rc != TG_OK) {
            rc = tg_buf_puts(&ex->out, "\"request rejected\"");
        }
    }
    if (rc == TG_OK && limit != NULL) {
        rc = tg_buf_printf(&ex->out, ",\"limit\":\"%s\",\"max\":%zu", limit, max);
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(&ex->out, ",\"request_id\":");
    }
    if (rc == TG_OK) {
        rc = tg_canon_string(&ex->out, ex->request_id, strlen(ex->request_id));
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    if (rc != TG_OK) {
        /* Could not even build the error: send the status with an empty body. */
        tg_buf_reset(&ex->out);
    }
}

void tg_reply_fail(tg_exchange_t *ex, tg_answer_t a, const char *message) {
    reply_body(ex, a, NULL, 0, message);
}

void tg_reply_limit(tg_exchange_t *ex, tg_answer_t a, const char *limit, size_t max,
                    const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_body(ex, a, limit, max, msg);
}

void tg_reply_body_too_large(tg_exchange_t *ex, size_t max_body) {
    tg_reply_limit(ex, TG_ANSWER_BODY_TOO_LARGE, "max_body", max_body,
                   "request body is larger than --max-body (%zu bytes)", max_body);
}

void tg_reply_json_error(tg_exchange_t *ex, const tg_json_limits_t *lim, tg_err_t e,
                         const char *detail) {
    /* Each limit has its own error code (tg_json_parse), so the body can name its knob. */
    const char *d = detail != NULL ? detail : "";
    switch (e) {
    case TG_ERR_JSON_DEPTH:
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_depth", lim->max_depth,
                       "JSON nesting is deeper than --max-depth %zu (%s)", lim->max_depth, d);
        break;
    case TG_ERR_JSON_STRING_LONG:
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_string", lim->max_string,
                       "a JSON string is longer than --max-string %zu bytes (%s)", lim->max_string,
                       d);
        break;
    case TG_ERR_JSON_NAME_LONG:
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_string", lim->max_string,
                       "a JSON member name is longer than --max-string %zu bytes (%s)",
                       lim->max_string, d);
        break;
    case TG_ERR_JSON_MEMBERS:
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_keys", lim->max_keys,
                       "a JSON object has more members than --max-keys %zu (%s)", lim->max_keys, d);
        break;
    case TG_ERR_JSON_TOO_LARGE:
        tg_reply_body_too_large(ex, lim->max_bytes);
        break;
    default:
        tg_reply_error(ex, e, detail != NULL && detail[0] ? detail : NULL);
        break;
    }
}

void tg_reply_error(tg_exchange_t *ex, tg_err_t e, const char *message) {
    tg_answer_t a = tg_answer_of(e);
    if (a == TG_ANSWER_INTERNAL) {
        message = "internal error"; /* never more: a 5xx does not leak internals */
    }
    reply_body(ex, a, NULL, 0, message ? message : tg_strerror(e));
}

void tg_reply_ok(tg_exchange_t *ex, tg_answer_t a) {
    if ((unsigned)a >= TG_ANSWER__COUNT || answers[a].code != NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL); /* an error kind needs its error body */
        return;
    }
    ex->status = answers[a].status;
    ex->content_type_out = NULL;
}

void tg_reply_built(tg_exchange_t *ex, tg_err_t rc, tg_answer_t a) {
    if (rc != TG_OK) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    } else {
        tg_reply_ok(ex, a);
    }
}
