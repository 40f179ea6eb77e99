/* log.c — whole log lines in JSON or text; request lines batched by a writer thread. */
#include "trigguard/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "trigguard/buf.h"
#include "trigguard/clock.h"
#include "trigguard/io.h"

#define TG_LOG_LINE_MAX 2048
/* How long the writer thread lets request lines gather after the first one, so that a
 * busy daemon pays one write(2) per millisecond instead of one per request. */
#define LINGER_NS 1000000L

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
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    for (;;) {
        /* Copy the run of bytes that need no escape in one step. */
        size_t n = 0;
        while (p[n] != '\0' && p[n] != '"' && p[n] != '\\' && p[n] >= 0x20) {
            n++;
        }
        put_raw(l, (const char *)p, n);
        p += n;
        if (*p == '\0') {
            return;
        }
        char esc[6] = {'\\', (char)*p, 0, 0, 0, 0};
        if (*p < 0x20) {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 15];
            put_raw(l, esc, 6);
        } else {
            put_raw(l, esc, 2);
        }
        p++;
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

static void put_field_bool(line_t *l, const char *key, bool v) {
    if (g_format == TG_LOG_JSON) {
        put_str(l, ",\"");
        put_str(l, key);
        put_str(l, v ? "\":true" : "\":false");
    } else {
        put_str(l, " ");
        put_str(l, key);
        put_str(l, v ? "=true" : "=false");
    }
}

static void put_field_int(line_t *l, const char *key, int64_t v) {
    char num[TG_I64_TEXT_MAX];
    size_t n = tg_fmt_i64(num, v);
    if (g_format == TG_LOG_JSON) {
        put_str(l, ",\"");
        put_str(l, key);
        put_str(l, "\":");
    } else {
        put_str(l, " ");
        put_str(l, key);
        put_str(l, "=");
    }
    put_raw(l, num, n);
}

static void begin_line(line_t *l, tg_log_level_t level, const char *event) {
    /* Not gmtime_r: glibc serializes it on a process-wide time-zone lock. */
    char stamp[TG_TIME_ISO_LEN + 1];
    if (tg_time_format_ms(stamp, tg_clock_now_ms()) != TG_OK) {
        memcpy(stamp, "0000-00-00T00:00:00.000Z", sizeof stamp);
    }
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

/* A failed log write has nowhere to be reported: the line is gone, the caller goes on. */
static void write_all(int fd, const char *p, size_t n) { TG_IGNORE(tg_write_all(fd, p, n)); }

/* ---- the writer thread ------------------------------------------------------------ */

/* Lines wait in `fill`; the writer thread swaps it with `spare` and writes `spare` outside
 * the lock. `appended` and `written` count bytes ever appended and written, so a caller
 * can wait until its own line is out. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t work;    /* the writer thread waits here for lines (CLOCK_MONOTONIC) */
    pthread_cond_t room;    /* appenders wait here for space */
    pthread_cond_t flushed; /* tg_log_write waits here for its line */
    char *fill, *spare;
    size_t len, cap;
    unsigned long long appended, written;
    unsigned sync_waiters;
    bool on, stopping, idle, lingering;
    pthread_t thread;
} g_async = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .room = PTHREAD_COND_INITIALIZER,
    .flushed = PTHREAD_COND_INITIALIZER,
};

static void *writer_main(void *arg) {
    (void)arg;
    (void)prctl(PR_SET_NAME, "tg-log", 0, 0, 0); /* so top -H and ps -L tell threads apart */
    pthread_mutex_lock(&g_async.mu);
    for (;;) {
        while (g_async.len == 0 && !g_async.stopping) {
            g_async.idle = true;
            pthread_cond_wait(&g_async.work, &g_async.mu);
            g_async.idle = false;
        }
        if (g_async.len == 0) {
            break; /* stopping, and everything is out */
        }
        /* Let a burst gather for up to LINGER_NS; an appender cuts it short when the
         * buffer is half full or a caller waits for its line. */
        struct timespec until;
        (void)clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += LINGER_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        g_async.lingering = true;
        while (g_async.sync_waiters == 0 && !g_async.stopping && g_async.len < g_async.cap / 2) {
            if (pthread_cond_timedwait(&g_async.work, &g_async.mu, &until) == ETIMEDOUT) {
                break;
            }
        }
        g_async.lingering = false;
        char *out = g_async.fill;
        size_t n = g_async.len;
        g_async.fill = g_async.spare;
        g_async.spare = out;
        g_async.len = 0;
        unsigned long long upto = g_async.appended;
        pthread_cond_broadcast(&g_async.room);
        pthread_mutex_unlock(&g_async.mu);
        write_all(g_fd, out, n);
        pthread_mutex_lock(&g_async.mu);
        g_async.written = upto;
        if (g_async.sync_waiters > 0) {
            pthread_cond_broadcast(&g_async.flushed);
        }
    }
    pthread_mutex_unlock(&g_async.mu);
    return NULL;
}

tg_err_t tg_log_async_start(size_t buffer_bytes) {
    const size_t min_cap = (size_t)2 * TG_LOG_LINE_MAX; /* any line fits, twice */
    size_t cap = buffer_bytes < min_cap ? min_cap : buffer_bytes;
    pthread_mutex_lock(&g_async.mu);
    if (g_async.on) {
        pthread_mutex_unlock(&g_async.mu);
        return TG_ERR_INVALID_ARG;
    }
    pthread_mutex_unlock(&g_async.mu);
    char *a = malloc(cap), *b = malloc(cap);
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return TG_ERR_NOMEM;
    }
    pthread_mutex_lock(&g_async.mu);
    if (g_async.on) { /* another thread started it meanwhile */
        pthread_mutex_unlock(&g_async.mu);
        free(a);
        free(b);
        return TG_ERR_INVALID_ARG;
    }
    /* The linger deadline is monotonic: a wall-clock step must not stall the writer. */
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) == 0) {
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0) {
            (void)pthread_cond_destroy(&g_async.work);
            (void)pthread_cond_init(&g_async.work, &ca);
        }
        (void)pthread_condattr_destroy(&ca);
    }
    g_async.fill = a;
    g_async.spare = b;
    g_async.cap = cap;
    g_async.len = 0;
    g_async.appended = g_async.written = 0;
    g_async.stopping = false;
    g_async.idle = false;
    g_async.on = true;
    int prc = pthread_create(&g_async.thread, NULL, writer_main, NULL);
    if (prc != 0) {
        g_async.on = false;
        g_async.fill = g_async.spare = NULL;
    }
    pthread_mutex_unlock(&g_async.mu);
    if (prc != 0) {
        free(a);
        free(b);
        return TG_ERR_INTERNAL;
    }
    return TG_OK;
}

void tg_log_async_stop(void) {
    pthread_mutex_lock(&g_async.mu);
    if (!g_async.on) {
        pthread_mutex_unlock(&g_async.mu);
        return;
    }
    g_async.stopping = true;
    pthread_cond_signal(&g_async.work);
    pthread_mutex_unlock(&g_async.mu);
    (void)pthread_join(g_async.thread, NULL);
    pthread_mutex_lock(&g_async.mu);
    g_async.on = false;
    free(g_async.fill);
    free(g_async.spare);
    g_async.fill = g_async.spare = NULL;
    g_async.cap = g_async.len = 0;
    pthread_cond_broadcast(&g_async.room); /* appenders that waited now write directly */
    pthread_mutex_unlock(&g_async.mu);
}

/* Appends a finished line for the writer thread. Returns false when the writer thread is
 * not running (or stops meanwhile): the caller writes the line itself. When wait_out is
 * set, returns only once the line has been written. */
static bool async_append(const line_t *l, bool wait_out) {
    pthread_mutex_lock(&g_async.mu);
    while (g_async.on && !g_async.stopping && g_async.len + l->len > g_async.cap) {
        pthread_cond_wait(&g_async.room, &g_async.mu); /* backpressure: never drop a line */
    }
    if (!g_async.on || g_async.stopping) {
        pthread_mutex_unlock(&g_async.mu);
        return false;
    }
    memcpy(g_async.fill + g_async.len, l->data, l->len);
    g_async.len += l->len;
    g_async.appended += l->len;
    unsigned long long mine = g_async.appended;
    if (wait_out) {
        g_async.sync_waiters++;
    }
    if (g_async.idle || wait_out || (g_async.lingering && g_async.len >= g_async.cap / 2)) {
        pthread_cond_signal(&g_async.work);
    }
    if (wait_out) {
        while (g_async.written < mine) {
            pthread_cond_wait(&g_async.flushed, &g_async.mu);
        }
        g_async.sync_waiters--;
    }
    pthread_mutex_unlock(&g_async.mu);
    return true;
}

/* Finishes the line and hands it out: request lines (`batched`) go to the writer thread
 * when it runs; every other line is out (after every line appended before it) when this
 * returns. */
static void end_line(line_t *l, bool batched) {
    if (g_format == TG_LOG_JSON) {
        put_str(l, "}");
    }
    l->data[l->len++] = '\n';
    if (!async_append(l, !batched)) {
        write_all(g_fd, l->data, l->len);
    }
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
    end_line(&l, false);
}

void tg_log_request(const tg_log_request_t *r) {
    if (!tg_log_enabled(TG_LOG_INFO)) {
        return;
    }
    line_t l;
    begin_line(&l, TG_LOG_INFO, "request");
    put_field_str(&l, "request_id", r->request_id);
    put_field_str(&l, "tenant", r->tenant);
    put_field_str(&l, "subject", r->subject);
    put_field_str(&l, "issuer", r->issuer);
    put_field_str(&l, "method", r->method);
    put_field_str(&l, "route", r->route);
    put_field_int(&l, "status", r->status);
    put_field_str(&l, "decision", r->decision);
    put_field_str(&l, "reason", r->reason);
    put_field_str(&l, "surface", r->surface);
    put_field_str(&l, "execution_id", r->execution_id);
    put_field_str(&l, "actor", r->actor);
    put_field_str(&l, "rule", r->rule);
    put_field_str(&l, "error", r->error);
    if (r->replayed) {
        put_field_bool(&l, "replayed", true);
    }
    put_field_str(&l, "client", r->client);
    if (r->traceparent != NULL && strlen(r->traceparent) == 55) {
        char trace[33], span[17];
        memcpy(trace, r->traceparent + 3, 32);
        trace[32] = '\0';
        memcpy(span, r->traceparent + 36, 16);
        span[16] = '\0';
        put_field_str(&l, "trace_id", trace);
        put_field_str(&l, "span_id", span);
    }
    put_field_int(&l, "latency_us", r->latency_us);
    end_line(&l, true);
}
