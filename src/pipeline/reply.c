/* reply.c — the one table from tg_err_t to HTTP status and error code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

typedef struct {
    tg_err_t err;
    int status;
    const char *code;
} err_map_t;

/* Every error a request can end in. Anything not listed is a 500 `internal_error`
 * whose message never says more than that (a 5xx never leaks internals). */
static const err_map_t err_map[] = {
    {TG_ERR_JSON_SYNTAX, 400, "invalid_json"},
    {TG_ERR_JSON_DUPLICATE_KEY, 400, "invalid_json"},
    {TG_ERR_JSON_UTF8, 400, "invalid_json"},
    {TG_ERR_JSON_SURROGATE, 400, "invalid_json"},
    {TG_ERR_JSON_NONFINITE, 400, "invalid_json"},
    {TG_ERR_JSON_DEPTH, 400, "invalid_request"},
    {TG_ERR_JSON_TYPE, 400, "invalid_request"},
    {TG_ERR_LIMIT, 400, "invalid_request"},
    {TG_ERR_REQUEST_INVALID, 400, "invalid_request"},
    {TG_ERR_INVALID_ARG, 400, "invalid_request"},
    {TG_ERR_UNKNOWN_SURFACE, 400, "unknown_surface"},
    {TG_ERR_UNAUTHORIZED, 401, "unauthorized"},
    {TG_ERR_NOT_FOUND, 404, "not_found"},
    {TG_ERR_CONFLICT, 409, "idempotency_conflict"},
    {TG_ERR_IN_FLIGHT, 409, "idempotency_conflict"},
    {TG_ERR_REPLAY, 409, "replay_detected"},
    {TG_ERR_RATE_LIMITED, 429, "rate_limited"},
    {TG_ERR_OVERLOADED, 503, "overloaded"},
    {TG_ERR_NO_KEY, 503, "keys_unavailable"},
    {TG_ERR_LEDGER_UNHEALTHY, 503, "ledger_unavailable"},
};

/* The one error body: {"error","message"[,"limit","max"],"request_id"}. */
static void reply_body(tg_exchange_t *ex, int status, const char *code, const char *limit,
                       size_t max, const char *message) {
    tg_buf_reset(&ex->out);
    ex->status = status;
    ex->content_type_out = NULL;
    /* Shed load with a hint: overload and a sick ledger are transient (the writer retries
     * recovery every second). A 429 sets its own value from the limiter. */
    if (status == 503 && ex->retry_after_s <= 0 &&
        (strcmp(code, "overloaded") == 0 || strcmp(code, "ledger_unavailable") == 0)) {
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

void tg_reply_error_code(tg_exchange_t *ex, int status, const char *code, const char *message) {
    reply_body(ex, status, code, NULL, 0, message);
}

void tg_reply_limit(tg_exchange_t *ex, int status, const char *code, const char *limit, size_t max,
                    const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_body(ex, status, code, limit, max, msg);
}

void tg_reply_body_too_large(tg_exchange_t *ex, size_t max_body) {
    tg_reply_limit(ex, 413, "body_too_large", "max_body", max_body,
                   "request body is larger than --max-body (%zu bytes)", max_body);
}

void tg_reply_json_error(tg_exchange_t *ex, const tg_json_limits_t *lim, tg_err_t e,
                         const char *detail) {
    /* The canon module words its limit diagnostics as "<what> at <path>: <n>, limit <max>";
     * the prefix says which limit refused (tests/hostile pins every one of them). */
    const char *d = detail != NULL ? detail : "";
    if (e == TG_ERR_JSON_DEPTH) {
        tg_reply_limit(ex, 400, "invalid_request", "max_depth", lim->max_depth,
                       "JSON nesting is deeper than --max-depth %zu (%s)", lim->max_depth, d);
    } else if (e == TG_ERR_LIMIT && strncmp(d, "string length", 13) == 0) {
        tg_reply_limit(ex, 400, "invalid_request", "max_string", lim->max_string,
                       "a JSON string is longer than --max-string %zu bytes (%s)", lim->max_string,
                       d);
    } else if (e == TG_ERR_LIMIT && strncmp(d, "member name length", 18) == 0) {
        tg_reply_limit(ex, 400, "invalid_request", "max_string", lim->max_string,
                       "a JSON member name is longer than --max-string %zu bytes (%s)",
                       lim->max_string, d);
    } else if (e == TG_ERR_LIMIT && strncmp(d, "members in object", 17) == 0) {
        tg_reply_limit(ex, 400, "invalid_request", "max_keys", lim->max_keys,
                       "a JSON object has more members than --max-keys %zu (%s)", lim->max_keys, d);
    } else if (e == TG_ERR_LIMIT && strncmp(d, "JSON text is", 12) == 0) {
        tg_reply_body_too_large(ex, lim->max_bytes);
    } else {
        tg_reply_error(ex, e, detail != NULL && detail[0] ? detail : NULL);
    }
}

void tg_reply_error(tg_exchange_t *ex, tg_err_t e, const char *message) {
    for (size_t i = 0; i < sizeof err_map / sizeof err_map[0]; i++) {
        if (err_map[i].err == e) {
            if (err_map[i].status == 401) {
                ex->www_authenticate = true;
            }
            tg_reply_error_code(ex, err_map[i].status, err_map[i].code,
                                message ? message : tg_strerror(e));
            return;
        }
    }
    tg_reply_error_code(ex, 500, "internal_error", "internal error");
}

void tg_reply_json(tg_exchange_t *ex, int status) {
    ex->status = status;
    ex->content_type_out = NULL;
}
