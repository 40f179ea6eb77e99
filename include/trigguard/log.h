/* log.h — one line per event, JSON (default) or text, level checked before formatting.
 *
 * The logger is process-wide state set once at startup by tg_log_setup (before any
 * thread starts) and read-only afterwards, so logging is thread-safe: each line is
 * formatted into a stack buffer and written with a single write(2) to stderr, which
 * keeps lines from different threads whole. Never pass keys, tokens or whole
 * request bodies to these functions.
 */
#ifndef TRIGGUARD_LOG_H
#define TRIGGUARD_LOG_H

#include <stdbool.h>
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
    const char *method;
    const char *route;
    int status;
    const char *decision;
    const char *reason;
    const char *surface;
    int64_t latency_us;
} tg_log_request_t;

void tg_log_request(const tg_log_request_t *r);

#endif /* TRIGGUARD_LOG_H */
