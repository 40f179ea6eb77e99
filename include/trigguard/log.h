/* log.h — one line per event, JSON (default) or text, level checked before formatting.
 *
 * The logger is process-wide state set once at startup by tg_log_setup (before any
 * thread starts) and read-only afterwards, so logging is thread-safe: each line is
 * formatted into a stack buffer and reaches the descriptor whole, never interleaved
 * with another thread's line. Never pass keys, tokens or whole request bodies to these
 * functions.
 *
 * Without tg_log_async_start every line is one write(2) by the calling thread. After it,
 * request lines (tg_log_request) are copied into a bounded buffer that a writer thread
 * empties about once a millisecond, with one write(2) for all the lines gathered: on a
 * busy daemon that is the difference between a system call per request and a thousand a
 * second. Nothing is dropped: when the buffer is full, the request thread waits for room.
 * Other lines (tg_log_write: startup, reload, warnings, errors) have been written, after
 * every line logged before them, when the call returns. What the buffer holds when the
 * process dies without tg_log_async_stop (a crash, SIGKILL) is lost: at most about a
 * millisecond of request lines. The ledger, not the log, is the record of decisions.
 */
#ifndef TRIGGUARD_LOG_H
#define TRIGGUARD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

typedef enum tg_log_level {
    TG_LOG_ERROR = 0,
    TG_LOG_WARN = 1,
    TG_LOG_INFO = 2,
    TG_LOG_DEBUG = 3
} tg_log_level_t;

typedef enum tg_log_format { TG_LOG_JSON = 0, TG_LOG_TEXT = 1 } tg_log_format_t;

/* Sets level and format; fd is the descriptor lines go to (2 = stderr). */
void tg_log_setup(tg_log_level_t level, tg_log_format_t format, int fd);

/* Parses "error|warn|info|debug" / "json|text". TG_ERR_INVALID_ARG otherwise. */
tg_err_t tg_log_level_parse(tg_log_level_t *out, const char *s) TG_MUST_USE;
tg_err_t tg_log_format_parse(tg_log_format_t *out, const char *s) TG_MUST_USE;

/* Starts the writer thread with a buffer of buffer_bytes (at least 4 KiB are used; two such
 * buffers are allocated). Call after tg_log_setup, before the threads that log start.
 * Errors: TG_ERR_INVALID_ARG (already started), TG_ERR_NOMEM, TG_ERR_INTERNAL (no thread);
 * on error lines keep being written directly. */
tg_err_t tg_log_async_start(size_t buffer_bytes) TG_MUST_USE;

/* Writes every buffered line, stops the writer thread and frees its buffers; lines logged
 * afterwards are written directly again. Call once the threads that log have stopped (a
 * line logged concurrently is written directly, possibly ahead of buffered ones). No-op
 * when not started. */
void tg_log_async_stop(void);

/* True when a line at `level` would be written; use it to skip building fields. */
bool tg_log_enabled(tg_log_level_t level);

/* One event line with a free-text message. Use the TG_LOG macro. */
void tg_log_write(tg_log_level_t level, const char *event, const char *fmt, ...) TG_PRINTF(3, 4);

#define TG_LOG(level, event, ...)                                                                  \
    do {                                                                                           \
        if (tg_log_enabled(level)) {                                                               \
            tg_log_write(level, event, __VA_ARGS__);                                               \
        }                                                                                          \
    } while (0)

/* The per-request access line. Strings may be NULL (omitted). */
typedef struct tg_log_request {
    const char *request_id;
    const char *tenant;
    const char *subject; /* the principal (tokens file "subject"; derived by default) */
    const char *issuer;  /* an OIDC caller's verified issuer; NULL (omitted) for tokens */
    const char *method;
    const char *route;
    int status;
    const char *decision;
    const char *reason;
    const char *surface;
    int64_t latency_us;
    /* Joining a line to its receipt and its trace (NULL / false = omitted): */
    const char *execution_id;
    const char *actor;       /* the request's actor (the caller's assertion, or its token's) */
    const char *rule;        /* the rule that decided */
    const char *error;       /* the error code of a 4xx/5xx body (docs/API.md) */
    bool replayed;           /* an idempotent replay: the stored response sent again */
    const char *client;      /* the peer's address */
    const char *traceparent; /* a valid W3C traceparent: logged as trace_id and span_id */
} tg_log_request_t;

void tg_log_request(const tg_log_request_t *r);

#endif /* TRIGGUARD_LOG_H */
