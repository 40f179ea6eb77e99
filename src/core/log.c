/* log.c — single-write log lines in JSON or text. */
#include "trigguard/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TG_LOG_LINE_MAX 2048

/* Set once before threads start, read-only afterwards (see log.h). */
static tg_log_level_t g_level = TG_LOG_INFO;
static tg_log_format_t g_format = TG_LOG_JSON;
static int g_fd = 2;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void tg_log_setup(tg_log_level_t level, tg_log_format_t format, int fd) {
    g_level = level;
    g_format = format;
    g_fd = fd;
}

tg_err_t tg_log_level_parse(tg_log_level_t *out, const char *s) {
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (tg_log_level_t)i;
            return TG_OK;
        }
    }
    return TG_ERR_INVALID_ARG;
}

tg_err_t tg_log_format_parse(tg_log_format_t *out, const char *s) {
    if (strcmp(s, "json") == 0) {
        *out = TG_LOG_JSON;
    } else if (strcmp(s, "text") == 0) {
        *out = TG_LOG_TEXT;
    } else {
        return TG_ERR_INVALID_ARG;
    }
    return TG_OK;
}

bool tg_log_enabled(tg_log_level_t level) { return level <= g_level; }

/* A small fixed-capacity line builder: everything past the cap is dropped, the
 * line always ends in '\n'. */
typedef struct {
    char data[TG_LOG_LINE_MAX];
    size_t len;
} line_t;

static void put_raw(line_t *l, const char *s, size_t n) {
    size_t room = sizeof l->data - 1 - l->len; /* keep one byte for '\n' */
    if (n > room) {
        n = room;
    }
    memcpy(l->data + l->len, s, n);
    l->len += n;
}

static void put_str(line_t *l, const char *s) { put_raw(l, s, strlen(s)); }

/* JSON string body escaping: quotes, backslash and control bytes. */
static void put_json_escaped(line_t *l, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            put_raw(l, esc, 2);
        } else if (*p < 0x20) {
            int n = snprintf(esc, sizeof esc, "\\u%04x", *p);
            put_raw(l, esc, (size_t)n);
        } else {
            put_raw(l, (const char *)p, 1);
        }
    }
}

/* Text format: strip control bytes so one event stays one line. */
static void put_text_clean(line_t *l, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char c = *p < 0x20 ? ' ' : (char)*p;
        put_raw(l, &c, 1);
    }
}

static void put_field_str(line_t *l, const char *key, const char *val) {
    if (val == NULL) {
        return;
    }
    if (g_format == TG_LOG_JSON) {
        put_str(l, ",\"");
        put_str(l, key);
        put_str(l, "\":\"");
        put_json_escaped(l, val);
        put_str(l, "\"");
    } else {
        put_str(l, " ");
        put_str(l, key);
        put_str(l, "=");
        put_text_clean(l, val);
    }
}

static void put_field_int(line_t *l, const char *key, long long v) {
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", v);
    if (g_format == TG_LOG_JSON) {
        put_str(l, ",\"");
        put_str(l, key);
        put_str(l, "\":");
    } else {
        put_str(l, " ");
        put_str(l, key);
        put_str(l, "=");
    }
    put_raw(l, num, (size_t)n);
}

static void begin_line(line_t *l, tg_log_level_t level, const char *event) {
    struct timespec ts;
    struct tm tm;
    char stamp[40];
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    (void)gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(stamp + n, sizeof stamp - n, ".%03ldZ", ts.tv_nsec / 1000000L);
    l->len = 0;
    if (g_format == TG_LOG_JSON) {
        put_str(l, "{\"ts\":\"");
        put_str(l, stamp);
        put_str(l, "\",\"level\":\"");
        put_str(l, level_names[level]);
        put_str(l, "\",\"event\":\"");
        put_json_escaped(l, event);
        put_str(l, "\"");
    } else {
        put_str(l, stamp);
        put_str(l, " ");
        put_str(l, level_names[level]);
        put_str(l, " ");
        put_text_clean(l, event);
    }
}

static void end_line(line_t *l) {
    if (g_format == TG_LOG_JSON) {
        put_str(l, "}");
    }
    l->data[l->len++] = '\n';
    ssize_t w = write(g_fd, l->data, l->len);
    (void)w; /* nowhere to report a failed log write */
}

void tg_log_write(tg_log_level_t level, const char *event, const char *fmt, ...) {
    line_t l;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    begin_line(&l, level, event);
    put_field_str(&l, "msg", msg);
    end_line(&l);
}

void tg_log_request(const tg_log_request_t *r) {
    if (!tg_log_enabled(TG_LOG_INFO)) {
        return;
    }
    line_t l;
    begin_line(&l, TG_LOG_INFO, "request");
    put_field_str(&l, "request_id", r->request_id);
    put_field_str(&l, "tenant", r->tenant);
    put_field_str(&l, "method", r->method);
    put_field_str(&l, "route", r->route);
    put_field_int(&l, "status", r->status);
    put_field_str(&l, "decision", r->decision);
    put_field_str(&l, "reason", r->reason);
    put_field_str(&l, "surface", r->surface);
    put_field_int(&l, "latency_us", (long long)r->latency_us);
    end_line(&l);
}
