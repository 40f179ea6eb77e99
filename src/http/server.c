/* server.c — libmicrohttpd glue: bounded bodies, one handler call, one response. */
#include "trigguard/clock.h"
#include "trigguard/http.h"
#include "trigguard/log.h"
#include "trigguard/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

struct tg_http_server {
    struct MHD_Daemon *mhd;
    tg_http_handler_fn handler;
    tg_http_handler_fn early; /* optional: see tg_http_opts_t */
    void (*abandon)(void *ud);
    void *ud;
    int listener;
    size_t max_body;
    size_t max_url;
    size_t max_header_bytes;
    int64_t body_deadline_ns; /* a body must be in within this long of its headers */
    uint16_t port;
    atomic_uint in_flight;
    atomic_uint suspended;   /* deferred exchanges whose connection is suspended */
    int listen_fd;           /* ours, not libmicrohttpd's; -1 once closed */
    pthread_t acceptor;      /* accept() loop handing sockets to MHD_add_connection */
    bool acceptor_running;   /* joined by tg_http_quiesce */
    unsigned max_conns;      /* --max-connections, enforced by the acceptor */
    atomic_uint conns;       /* handed to libmicrohttpd and not yet closed */
    pthread_mutex_t full_mu; /* with full_cv: the acceptor waits at max_conns */
    pthread_cond_t full_cv;  /* signalled by a close while full_wait is set */
    atomic_bool full_wait;   /* the acceptor is (about to be) waiting on full_cv */
    atomic_bool quiescing;   /* the acceptor's accept() failed because we stopped it */
    atomic_bool draining;    /* tg_http_stop began: responses carry Connection: close */
    atomic_bool stopping;    /* the drain is over: new requests get shutting_down */
    atomic_bool starting;    /* MHD_start_daemon running: keep its last message for diag */
    tg_tls_t *tls;           /* NULL: plain HTTP; else the pair each handshake presents */
    char start_err[160];
};

typedef enum { REQ_READING = 0, REQ_DEFERRED, REQ_READY, REQ_QUEUED } req_state_t;

/* Per-request context: created when libmicrohttpd has parsed the request line (on_uri),
 * filled in once the headers are in (ctx_begin), freed on completion (on_completed). */
typedef struct {
    tg_exchange_t ex;
    tg_http_server_t *srv;
    struct MHD_Connection *conn;
    /* The request target as libmicrohttpd first saw it (on_uri), before it splits off the
     * query and unescapes in place: where it starts, how long it is up to the first NUL,
     * and whether it holds a raw control byte before that NUL. */
    const char *raw_target;
    size_t raw_target_len;
    bool raw_target_ctl;
    bool raw_target_bad_authority; /* absolute form with no host, userinfo or a '%' in it */
    size_t origin_skip;            /* absolute form: bytes of "scheme://authority" */
    bool begun;                    /* the headers are in and ctx_begin ran: counted in in_flight */
    tg_buf_t body;
    size_t drained;      /* body bytes read past --max-body */
    bool wants_continue; /* Expect: 100-continue, with a body announced */
    bool in_suspended;   /* counted in srv->suspended (event thread only) */
    _Atomic int state;
} req_ctx_t;

/* Request ids need to be unique, not secret: a per-thread random prefix and a
 * counter avoid a getrandom() call per request. */
static _Thread_local uint64_t tl_rid_prefix;
static _Thread_local uint64_t tl_rid_counter;

static void make_request_id(char out[TG_HTTP_REQUEST_ID_MAX + 1]) {
    if (tl_rid_prefix == 0) {
        randombytes_buf(&tl_rid_prefix, sizeof tl_rid_prefix);
        tl_rid_prefix |= 1;
    }
    (void)snprintf(out, TG_HTTP_REQUEST_ID_MAX + 1, "req_%016llx%08llx",
                   (unsigned long long)tl_rid_prefix,
                   (unsigned long long)(++tl_rid_counter & 0xffffffffu));
}

/* A caller's X-Request-Id is echoed only if it is short visible ASCII, so it can
 * never inject headers or log lines. */
static bool request_id_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > TG_HTTP_REQUEST_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* W3C Trace Context: version "-" trace-id "-" parent-id "-" flags, lowercase hex of 2, 32,
 * 16 and 2 digits; version ff and all-zero ids are invalid. Only this 55-byte form is
 * taken (a later version's extra fields are not echoed back). */
static bool traceparent_ok(const char *s) {
    if (strlen(s) != TG_HTTP_TRACEPARENT_LEN || s[2] != '-' || s[35] != '-' || s[52] != '-') {
        return false;
    }
    bool trace_zero = true, span_zero = true;
    for (size_t i = 0; i < TG_HTTP_TRACEPARENT_LEN; i++) {
        if (i == 2 || i == 35 || i == 52) {
            continue;
        }
        int v = hexval(s[i]);
        if (v < 0) {
            return false;
        }
        if (i > 2 && i < 35) {
            trace_zero = trace_zero && v == 0;
        } else if (i > 35 && i < 52) {
            span_zero = span_zero && v == 0;
        }
    }
    return !(s[0] == 'f' && s[1] == 'f') && !trace_zero && !span_zero;
}

static void client_address(struct MHD_Connection *conn, char out[TG_HTTP_CLIENT_MAX + 1]) {
    out[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci == NULL || ci->client_addr == NULL) {
        return;
    }
    const struct sockaddr *sa = ci->client_addr;
    const void *addr =
        sa->sa_family == AF_INET6
            ? (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr
        : sa->sa_family == AF_INET
            ? (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr
            : NULL;
    if (addr == NULL || inet_ntop(sa->sa_family, addr, out, TG_HTTP_CLIENT_MAX + 1) == NULL) {
        out[0] = '\0';
    }
}

static void add_header(struct MHD_Response *r, const char *k, const char *v) {
    (void)MHD_add_response_header(r, k, v);
}

/* The handler's after-completion hook, at most once. */
static void run_resume_hook(req_ctx_t *ctx) {
    tg_exchange_t *ex = &ctx->ex;
    void (*fn)(tg_exchange_t *, void *) = ex->on_resume;
    if (fn != NULL) {
        ex->on_resume = NULL;
        fn(ex, ex->on_resume_ud);
    }
}

static enum MHD_Result queue_exchange(req_ctx_t *ctx) {
    tg_exchange_t *ex = &ctx->ex;
    struct MHD_Response *resp;
    if (ex->out.data != NULL && ex->out.len > 0) {
        resp = MHD_create_response_from_buffer(ex->out.len, ex->out.data, MHD_RESPMEM_MUST_FREE);
        if (resp != NULL) {
            ex->out.data = NULL; /* libmicrohttpd owns it now */
            ex->out.len = ex->out.cap = 0;
        }
    } else {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (resp == NULL) {
        return MHD_NO;
    }
    add_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
               ex->content_type_out ? ex->content_type_out : "application/json");
    if (atomic_load(&ctx->srv->draining) || ex->bad_framing || ex->bad_header != NULL ||
        ex->bad_target != NULL) {
        /* Draining: a keep-alive client would go on sending on this connection, so end it
         * here. A request whose framing or header lines were refused: where it ends, and so
         * where a next request would begin, is exactly what is in doubt (a request smuggled
         * behind it starts there), so nothing more is read from this connection. */
        add_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    add_header(resp, "X-Request-Id", ex->request_id);
    if (ex->traceparent[0] != '\0') {
        add_header(resp, "traceparent", ex->traceparent);
    }
    if (ex->gate_exec_id[0] != '\0') {
        add_header(resp, "TrigGuard-Execution-Id", ex->gate_exec_id);
    }
    if (ex->gate_receipt_hash[0] != '\0') {
        add_header(resp, "TrigGuard-Receipt-Hash", ex->gate_receipt_hash);
    }
    if (ex->retry_after_s > 0) {
        char v[24];
        (void)snprintf(v, sizeof v, "%d", ex->retry_after_s);
        add_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (ex->www_authenticate) {
        add_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    }
    if (ex->replayed) {
        add_header(resp, "Idempotent-Replayed", "true");
    }
    if (ex->cache_control) {
        add_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, ex->cache_control);
    }
    if (ex->allow) {
        add_header(resp, MHD_HTTP_HEADER_ALLOW, ex->allow);
    }
    if (ex->ratelimit_policy[0] != '\0') {
        add_header(resp, "RateLimit-Policy", ex->ratelimit_policy);
    }
    if (ex->ratelimit[0] != '\0') {
        add_header(resp, "RateLimit", ex->ratelimit);
    }
    atomic_store(&ctx->state, REQ_QUEUED);
    enum MHD_Result ret = MHD_queue_response(ctx->conn, (unsigned)ex->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

void tg_exchange_defer(tg_exchange_t *ex) {
    req_ctx_t *ctx = ex->http_ctx;
    atomic_fetch_add(&ctx->srv->suspended, 1);
    ctx->in_suspended = true;
    atomic_store(&ctx->state, REQ_DEFERRED);
    MHD_suspend_connection(ctx->conn);
}

void tg_exchange_complete(tg_exchange_t *ex) {
    req_ctx_t *ctx = ex->http_ctx;
    atomic_store(&ctx->state, REQ_READY);
    MHD_resume_connection(ctx->conn);
}

static const char *header(struct MHD_Connection *c, const char *name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

const char *tg_exchange_header(tg_exchange_t *ex, const char *name) {
    req_ctx_t *ctx = ex != NULL ? ex->http_ctx : NULL;
    return ctx != NULL && ctx->conn != NULL ? header(ctx->conn, name) : NULL;
}

const char *tg_exchange_query(tg_exchange_t *ex, const char *name) {
    req_ctx_t *ctx = ex != NULL ? ex->http_ctx : NULL;
    return ctx != NULL && ctx->conn != NULL
               ? MHD_lookup_connection_value(ctx->conn, MHD_GET_ARGUMENT_KIND, name)
               : NULL;
}

/* Headers this server reads as one value. Sent twice, a proxy in front that takes the last
 * one and this server, which would take the first, disagree about who is calling or which
 * request this is, so a second copy is refused instead. */
static const struct {
    const char *name, *refusal;
} single_headers[] = {
    {MHD_HTTP_HEADER_AUTHORIZATION, "the Authorization header appears more than once"},
    {MHD_HTTP_HEADER_CONTENT_TYPE, "the Content-Type header appears more than once"},
    {"Idempotency-Key", "the Idempotency-Key header appears more than once"},
    {"X-Request-Id", "the X-Request-Id header appears more than once"},
    /* RFC 9110 §7.2: a request with several Host lines must be refused; a proxy that routes
     * by one and a backend that reads the other disagree about where it was sent. */
    {MHD_HTTP_HEADER_HOST, "the Host header appears more than once"},
};
#define N_SINGLE_HEADERS (sizeof single_headers / sizeof single_headers[0])

/* What one pass over the request headers (or query arguments) measures. */
typedef struct {
    size_t bytes;                       /* approximately what they took on the wire */
    unsigned content_length;            /* Content-Length headers seen */
    unsigned transfer_encoding;         /* Transfer-Encoding headers seen */
    bool te_not_chunked;                /* a Transfer-Encoding other than exactly "chunked" */
    unsigned singles[N_SINGLE_HEADERS]; /* how often each of single_headers was seen */
    bool bad_name;                      /* a header name that is not an RFC 9110 token */
} hdr_scan_t;

/* RFC 9110 §5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" /
 * "_" / "`" / "|" / "~" / DIGIT / ALPHA. */
static bool is_tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field name must be a token (RFC 9110 §5.1), and RFC 9112 §5.1 wants whitespace between
 * it and the colon refused with 400. libmicrohttpd 0.9.75 in strict mode 1 takes
 * "Transfer-Encoding : chunked" and hands over the name "Transfer-Encoding " with its space,
 * which no comparison below would match while a proxy in front may have read it as the
 * header it resembles: the framing checks would be blind to it. */
static bool is_token(const char *s, size_t n) {
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

/* Adds "name: value\r\n" (or "name=value&") bytes, for --max-header-bytes / --max-url, and
 * notes the message-framing headers a request smuggler would play with and repeated
 * single-value headers. (A NUL byte inside a header value cannot be seen from here:
 * libmicrohttpd 0.9.75 already ends the value at it. OPERATIONS.md says so.) */
static enum MHD_Result scan_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size) {
    hdr_scan_t *sc = cls;
    sc->bytes += key_size + (value != NULL ? value_size : 0) + 4;
    if (kind == MHD_HEADER_KIND) {
        if (!is_token(key, key_size)) {
            sc->bad_name = true;
        }
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
            sc->content_length++;
        } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
            sc->transfer_encoding++;
            if (value == NULL || strcasecmp(value, "chunked") != 0) {
                sc->te_not_chunked = true;
            }
        }
        for (size_t i = 0; i < N_SINGLE_HEADERS; i++) {
            if (strcasecmp(key, single_headers[i].name) == 0) {
                sc->singles[i]++;
            }
        }
    }
    return MHD_YES;
}

/* %HH decoding for paths and query arguments, except that %00 and malformed escapes stay
 * as they are: a decoded NUL would cut the C string short, so "/v1/evaluate%00.json" would
 * be routed as "/v1/evaluate". Never lengthens s (libmicrohttpd's contract). */
static int hex_val(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static size_t unescape_no_nul(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r != '\0';) {
        int hi = r[0] == '%' ? hex_val(r[1]) : -1;
        int lo = hi >= 0 ? hex_val(r[2]) : -1;
        if (lo >= 0 && (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* The control bytes a request target may not hold raw (RFC 9112 §3.2: it is visible ASCII;
 * spaces libmicrohttpd's strict mode refuses itself). */
static bool is_ctl(unsigned char c) { return c < 0x20 || c == 0x7f; }

/* libmicrohttpd's URI log callback: called once per request, right after the request line
 * is parsed and before the query is split off or anything is unescaped (in place). The
 * request context is made here, as libmicrohttpd's manual suggests, because only here is
 * the target still raw; from this call on libmicrohttpd reports the request's end to
 * on_completed, which frees it. What is noted for ctx_begin:
 * - the target's length up to its first NUL. libmicrohttpd 0.9.75 keeps the bytes of the
 *   line after a raw NUL, but every string it hands over ends at it, so
 *   "POST /v1/evaluate\0.json HTTP/1.1" would be routed as "/v1/evaluate";
 * - whether a raw control byte comes before that;
 * - for the absolute form (RFC 9112 §3.2.2, "http://host/path"), how long "http://host" is,
 *   measured here because unescaping could later move a '/' into the authority. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    tg_http_server_t *srv = cls;
    req_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        return NULL; /* on_request refuses a request it has no context for */
    }
    ctx->srv = srv;
    ctx->conn = conn;
    ctx->raw_target = uri;
    if (uri == NULL) {
        return ctx; /* no target at all: libmicrohttpd refuses the line itself */
    }
    size_t n = strlen(uri);
    ctx->raw_target_len = n;
    for (size_t i = 0; i < n && !ctx->raw_target_ctl; i++) {
        ctx->raw_target_ctl = is_ctl((unsigned char)uri[i]);
    }
    size_t scheme = strncasecmp(uri, "http://", 7) == 0    ? 7
                    : strncasecmp(uri, "https://", 8) == 0 ? 8
                                                           : 0;
    if (scheme > 0) {
        /* RFC 9110 §4.2.4: no userinfo in an http(s) URI. A '%' would be unescaped and could
         * turn into the '/' that ends the authority, where a proxy saw none. */
        const char *auth = uri + scheme;
        size_t an = strcspn(auth, "/?");
        ctx->raw_target_bad_authority =
            an == 0 || memchr(auth, '@', an) != NULL || memchr(auth, '%', an) != NULL;
        ctx->origin_skip = scheme + an;
    }
    return ctx;
}

/* Checking that what libmicrohttpd hands over is all that was sent. libmicrohttpd 0.9.75
 * parses the request line and the header lines in place, in one buffer: it writes a NUL over
 * every CR and LF that ends a line, over the space after the method and the one before the
 * version, and over each header's colon, and hands out pointers into that buffer (`method`
 * is its first byte; the header block ends `header_size` bytes later). Two things it does
 * there cannot be seen in the strings it passes on:
 * - every string ends at a raw NUL, so "POST /v1/evaluate\0.json" is routed as
 *   "/v1/evaluate" and "Authorization: Bearer good\0junk" reads as "Bearer good";
 * - it takes the colon of a header line with an empty name (": a") for the end of the
 *   headers, once it has zeroed it: the header lines after it are dropped from the request
 *   and read as the next one.
 * So the block is walked and must be exactly: method, spaces, the target (its length as
 * on_uri measured it), one space, the version, CRLF; then for each header libmicrohttpd
 * recorded, in order, its name, the colon, blanks, its value, CRLF; then the CRLF that ends
 * the block. Any other byte refuses the request: a NUL, a bare LF line end, a folded line
 * (obs-fold, which RFC 9112 §5.2 lets a server refuse) or a line libmicrohttpd passed over.
 * A block laid out otherwise (another libmicrohttpd) is refused too rather than guessed at.
 * Every read stays inside the block. */
typedef struct {
    const char *base; /* the block's first byte (method) */
    size_t size;      /* its length */
    size_t at;        /* offset of the next byte the walk expects */
    bool ok;
} layout_t;

/* The offset of p in the block, if p lies in it (or just at its end). */
static bool layout_off(const layout_t *l, const char *p, size_t *off) {
    uintptr_t b = (uintptr_t)l->base, q = (uintptr_t)p;
    if (p == NULL || q < b || q - b > l->size) {
        return false;
    }
    *off = (size_t)(q - b);
    return true;
}

/* A CRLF (two NULs by now) at l->at, stepped over. */
static bool layout_crlf(layout_t *l) {
    if (l->size - l->at < 2 || l->base[l->at] != '\0' || l->base[l->at + 1] != '\0') {
        return false;
    }
    l->at += 2;
    return true;
}

static enum MHD_Result layout_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size) {
    (void)kind;
    layout_t *l = cls;
    size_t k, v;
    if (!layout_off(l, key, &k) || k != l->at || l->size - k <= key_size ||
        l->base[k + key_size] != '\0') {
        l->ok = false;
        return MHD_NO;
    }
    size_t i = k + key_size + 1; /* past the colon */
    while (i < l->size && (l->base[i] == ' ' || l->base[i] == '\t')) {
        i++;
    }
    if (!layout_off(l, value, &v) || v != i || l->size - v < value_size) {
        l->ok = false;
        return MHD_NO;
    }
    l->at = v + value_size;
    l->ok = layout_crlf(l);
    return l->ok ? MHD_YES : MHD_NO;
}

typedef enum { LAYOUT_OK = 0, LAYOUT_BAD_LINE, LAYOUT_NUL_TARGET, LAYOUT_BAD_BLOCK } layout_rc_t;

static layout_rc_t check_layout(const req_ctx_t *ctx, const char *url, const char *method,
                                const char *version) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(ctx->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (ci == NULL || method == NULL || version == NULL) {
        return LAYOUT_BAD_LINE;
    }
    layout_t l = {method, ci->header_size, 0, true};
    size_t u, ver;
    if (!layout_off(&l, url, &u) || !layout_off(&l, version, &ver)) {
        return LAYOUT_BAD_LINE;
    }
    /* libmicrohttpd skips extra spaces after the method; the target must begin after them. */
    size_t i = strnlen(method, l.size);
    if (i == 0 || i >= u || l.base[i] != '\0') {
        return LAYOUT_BAD_LINE;
    }
    for (i++; i < u; i++) {
        if (l.base[i] != ' ') {
            return LAYOUT_BAD_LINE;
        }
    }
    if (ctx->raw_target != url || ver <= u || ver - u - 1 != ctx->raw_target_len) {
        return LAYOUT_NUL_TARGET;
    }
    l.at = ver + strnlen(version, l.size - ver);
    if (!layout_crlf(&l)) {
        return LAYOUT_BAD_LINE;
    }
    (void)MHD_get_connection_values_n(ctx->conn, MHD_HEADER_KIND, layout_header, &l);
    if (!l.ok || !layout_crlf(&l) || l.at != l.size) {
        return LAYOUT_BAD_BLOCK;
    }
    return LAYOUT_OK;
}

/* Fills the exchange once the headers are in: the first access-handler call. */
static void ctx_begin(req_ctx_t *ctx, const char *url, const char *method, const char *version) {
    tg_http_server_t *srv = ctx->srv;
    struct MHD_Connection *conn = ctx->conn;
    ctx->begun = true;
    tg_buf_init(&ctx->body, srv->max_body);
    tg_exchange_t *ex = &ctx->ex;
    tg_buf_init(&ex->out, 0);
    ex->http_ctx = ctx;
    ex->listener = srv->listener;
    ex->start_ns = tg_clock_mono_ns();
    ex->method = method;
    ex->path = url; /* libmicrohttpd passes the path without the query string */
    layout_rc_t layout = check_layout(ctx, url, method, version);
    if (layout == LAYOUT_BAD_LINE) {
        ex->bad_target = "the request line is not METHOD SP target SP HTTP-version CRLF";
    } else if (layout == LAYOUT_NUL_TARGET) {
        ex->bad_target = "the request target contains a NUL byte";
    } else if (ctx->raw_target_ctl) {
        ex->bad_target = "the request target contains a control character";
    } else if (ctx->raw_target_bad_authority) {
        ex->bad_target = "the absolute-form request target has no host, userinfo or a '%' in "
                         "its host";
    } else if (ctx->origin_skip > 0) {
        /* Routed by its path; the query went to the arguments already. "http://host" alone
         * is the path "/" (RFC 9110 §4.2.3). */
        ex->path = url[ctx->origin_skip] != '\0' ? url + ctx->origin_skip : "/";
    }
    const char *explain = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "explain");
    ex->explain = explain != NULL && (strcmp(explain, "1") == 0 || strcmp(explain, "true") == 0);
    ex->authorization = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
    ex->content_type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
    ex->idempotency_header = header(conn, "Idempotency-Key");
    const char *rid = header(conn, "X-Request-Id");
    if (rid != NULL && request_id_ok(rid)) {
        memcpy(ex->request_id, rid, strlen(rid) + 1);
    } else {
        make_request_id(ex->request_id);
    }
    const char *tp = header(conn, "traceparent");
    ex->traceparent[0] = '\0';
    if (tp != NULL && traceparent_ok(tp)) {
        memcpy(ex->traceparent, tp, TG_HTTP_TRACEPARENT_LEN + 1);
    }
    client_address(conn, ex->client);
    hdr_scan_t qs = {0}, hs = {0};
    (void)MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, scan_value, &qs);
    (void)MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_value, &hs);
    ex->url_bytes = strlen(url) + qs.bytes;
    ex->header_bytes = hs.bytes;
    ex->url_too_long = srv->max_url > 0 && ex->url_bytes > srv->max_url;
    ex->headers_too_large = srv->max_header_bytes > 0 && ex->header_bytes > srv->max_header_bytes;
    /* RFC 9112 §6.1/§6.3: ambiguous framing is how requests are smuggled past proxies;
     * refuse it instead of guessing which length the sender meant. */
    ex->bad_framing = hs.content_length > 1 || hs.transfer_encoding > 1 ||
                      (hs.transfer_encoding > 0 && (hs.content_length > 0 || hs.te_not_chunked));
    if (layout == LAYOUT_BAD_BLOCK) {
        ex->bad_header = "the header lines are not name: value lines ending in CRLF (a NUL "
                         "byte, a bare LF, a line folded onto the next, or an empty name)";
    } else if (hs.bad_name) {
        ex->bad_header = "a header name is not an RFC 9110 token (whitespace before the colon, "
                         "an empty name or a character a name cannot have)";
    }
    for (size_t i = 0; ex->bad_header == NULL && i < N_SINGLE_HEADERS; i++) {
        if (hs.singles[i] > 1) {
            ex->bad_header = single_headers[i].refusal;
        }
    }
    const char *cl = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    bool announces_body = hs.transfer_encoding > 0;
    if (cl != NULL) {
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end != cl && n > srv->max_body) {
            ex->body_too_large = true;
        }
        announces_body = announces_body || end == cl || n > 0;
    }
    const char *expect = header(conn, MHD_HTTP_HEADER_EXPECT);
    ctx->wants_continue =
        announces_body && expect != NULL && strcasecmp(expect, "100-continue") == 0;
    atomic_store(&ctx->state, REQ_READING);
    atomic_fetch_add(&srv->in_flight, 1);
}

/* A deferred exchange leaves the suspended count once libmicrohttpd processes its
 * connection again: resumed (on_request) or, if the client left meanwhile, ended. */
static void uncount_suspended(req_ctx_t *ctx) {
    if (ctx->in_suspended) {
        ctx->in_suspended = false;
        atomic_fetch_sub(&ctx->srv->suspended, 1);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)conn;
    tg_http_server_t *srv = cls;
    req_ctx_t *ctx = *con_cls;
    if (ctx == NULL) {
        return MHD_NO; /* on_uri had no memory: no context, no checks, no answer */
    }
    if (!ctx->begun) {
        ctx_begin(ctx, url, method, version);
        /* ctx_begin counted this request in in_flight before this load, and tg_http_stop
         * sets stopping before its last look at in_flight (both sequentially consistent):
         * so either the stop waits for this request, or the request sees stopping and is
         * answered without the handler deferring it (a suspended connection would make
         * MHD_stop_daemon panic). */
        ctx->ex.shutting_down = atomic_load(&srv->stopping);
        if (ctx->ex.shutting_down || ctx->ex.body_too_large || ctx->ex.url_too_long ||
            ctx->ex.headers_too_large || ctx->ex.bad_framing || ctx->ex.bad_header != NULL ||
            ctx->ex.bad_target != NULL) {
            /* Refuse before reading a byte of the body. */
            srv->handler(srv->ud, &ctx->ex);
            return queue_exchange(ctx);
        }
        if (srv->early != NULL && ctx->wants_continue) {
            srv->early(srv->ud, &ctx->ex);
            if (ctx->ex.status != 0) {
                return queue_exchange(ctx);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        if (tg_clock_mono_ns() - ctx->ex.start_ns > srv->body_deadline_ns) {
            /* libmicrohttpd's --connection-timeout restarts with every byte, so a body sent
             * a byte at a time would hold its connection (and up to --max-body of memory)
             * for as long as the sender likes. The whole body gets that long instead. */
            *upload_data_size = 0;
            return MHD_NO;
        }
        if (!ctx->ex.body_too_large &&
            tg_buf_append(&ctx->body, upload_data, *upload_data_size) != TG_OK) {
            ctx->ex.body_too_large = true; /* keep draining, answer 413 at the end */
            tg_buf_free(&ctx->body);
        }
        if (ctx->ex.body_too_large) {
            /* Only a chunked body gets here (a Content-Length over the limit is refused
             * before the body). libmicrohttpd 0.9.75 cannot queue a response in the middle
             * of a body, so the 413 waits for its end; a body that goes on far past the
             * limit is cut off by closing the connection instead of being read forever. */
            ctx->drained += *upload_data_size;
            if (ctx->drained > srv->max_body * TG_HTTP_DRAIN_FACTOR + 65536) {
                *upload_data_size = 0;
                return MHD_NO;
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    int state = atomic_load(&ctx->state);
    if (state == REQ_READY) {
        /* Resumed: libmicrohttpd processes the connection again, so it no longer counts
         * against MHD_stop_daemon (see tg_http_stop). */
        uncount_suspended(ctx);
        run_resume_hook(ctx);
        return queue_exchange(ctx);
    }
    if (state != REQ_READING) {
        return MHD_YES; /* deferred and not ready yet, or already queued */
    }
    ctx->ex.body = ctx->body.data ? ctx->body.data : "";
    ctx->ex.body_len = ctx->body.len;
    /* A request whose headers came before the drain ended but whose body completes after
     * it is refused like one that begins now: it must not defer once the stop is near. */
    if (atomic_load(&srv->stopping)) {
        ctx->ex.shutting_down = true;
    }
    srv->handler(srv->ud, &ctx->ex);
    if (atomic_load(&ctx->state) == REQ_READING) {
        return queue_exchange(ctx);
    }
    /* Deferred: the connection is suspended; tg_exchange_complete resumes it and
     * libmicrohttpd calls us again with state REQ_READY. A completion that already
     * happened is picked up the same way. */
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    tg_http_server_t *srv = cls;
    req_ctx_t *ctx = *con_cls;
    if (ctx == NULL) {
        return;
    }
    *con_cls = NULL;
    if (!ctx->begun) {
        /* Ended between the request line and the end of the headers (libmicrohttpd refused
         * them, the client left, the server stopped): nothing was counted or allocated. */
        free(ctx);
        return;
    }
    /* A deferred exchange whose connection closed before its response was queued: the
     * handler still gets its hook (to release what it holds). A connection that is still
     * suspended never gets here: libmicrohttpd only ends connections it is processing. */
    uncount_suspended(ctx);
    run_resume_hook(ctx);
    tg_buf_free(&ctx->body);
    tg_buf_free(&ctx->ex.out);
    free(ctx);
    atomic_fetch_sub(&srv->in_flight, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) TG_PRINTF(2, 0);
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    /* libmicrohttpd's own messages (client resets, timeouts) are not errors of ours;
     * request-level outcomes are logged by the access log instead. While the daemon
     * starts, its last message says why a start failed (bad TLS material, bind error). */
    tg_http_server_t *s = cls;
    size_t n = strlen(s->start_err);
    if (atomic_load(&s->starting) && n + 3 < sizeof s->start_err) {
        if (n > 0) {
            memcpy(s->start_err + n, "; ", 3);
            n += 2;
        }
        (void)vsnprintf(s->start_err + n, sizeof s->start_err - n, fmt, ap);
        s->start_err[n + strcspn(s->start_err + n, "\r\n")] = '\0';
    }
}

/* libmicrohttpd calls this on an internal inconsistency, then must not return. The
 * default prints to stderr; ours goes through the log (written before TG_LOG returns) so
 * the event says where, then aborts as the default does. */
static void on_mhd_panic(void *cls, const char *file, unsigned int line, const char *reason) {
    (void)cls;
    TG_LOG(TG_LOG_ERROR, "libmicrohttpd_panic", "%s:%u: %s; exiting", file != NULL ? file : "?",
           line, reason != NULL ? reason : "(no reason)");
    /* Not abort(): the state is inconsistent, so no cleanup runs (exit handlers could touch
     * it), but the exit is a logged status, not a signal. Nothing acknowledged is lost:
     * every response that left had its record durable first. */
    _exit(70); /* EX_SOFTWARE */
}

/* The listening socket is ours, not libmicrohttpd's (see tg_http_quiesce for why): bound
 * and listening here, so bind errors are reported with errno. Same options libmicrohttpd
 * would set: SO_REUSEADDR, IPv6 sockets IPv6-only, the system's largest backlog. */
static tg_err_t open_listener(const tg_http_opts_t *opts, int *fd_out, uint16_t *port_out,
                              tg_diag_t *diag) {
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, opts->listen, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(opts->port);
        sl = sizeof *sin;
    } else if (inet_pton(AF_INET6, opts->listen, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(opts->port);
        sl = sizeof *sin6;
    } else {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "--listen \"%s\" is not an IPv4 or IPv6 address", opts->listen);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "cannot listen on %s port %u: socket: %s", opts->listen,
                           (unsigned)opts->port, strerror(errno));
    }
    int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ss.ss_family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    }
    if (bind(fd, (const struct sockaddr *)&ss, sl) != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        (void)close(fd);
        return tg_diag_set(diag, TG_ERR_IO, "cannot listen on %s port %u: %s", opts->listen,
                           (unsigned)opts->port, strerror(e));
    }
    sl = sizeof ss;
    *port_out = opts->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        *port_out = ntohs(ss.ss_family == AF_INET6 ? sin6->sin6_port : sin->sin_port);
    }
    *fd_out = fd;
    return TG_OK;
}

#define TG_HTTP_WARN_EVERY_S 10

/* A TLS connection's socket context: which server it belongs to (the retrieve callback gets
 * only the GnuTLS session) and the certificate generation its handshake selected, held until
 * the connection closes (tls.h, "Lifetime"). */
typedef struct {
    tg_http_server_t *srv;
    tg_tls_gen_t *held;
} conn_tls_t;

/* libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK, a gnutls_certificate_retrieve_function2,
 * called on the event thread during each handshake. libmicrohttpd 0.9.75 sets the session's
 * user pointer to its connection (gnutls_session_set_ptr), which leads to the socket context
 * made in on_connection. A connection without one (its allocation failed) gets no
 * certificate: the handshake fails, the connection is never served in plain text. */
static int on_tls_cert(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                       const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                       gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *key) {
    (void)req_ca_rdn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *info =
        conn != NULL ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    conn_tls_t *ct = info != NULL ? info->socket_context : NULL;
    if (ct == NULL) {
        return -1;
    }
    return tg_tls_select(ct->srv->tls, &ct->held, pcert, pcert_length, key);
}

/* Counts connections out (every connection libmicrohttpd started, it reports closed), and
 * gives a TLS connection its socket context for on_tls_cert. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    (void)conn;
    tg_http_server_t *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED && s->tls != NULL) {
        conn_tls_t *ct = calloc(1, sizeof *ct);
        if (ct != NULL) {
            ct->srv = s;
        }
        *socket_ctx = ct;
    }
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_tls_t *ct = *socket_ctx;
        if (ct != NULL) {
            /* libmicrohttpd only deinits the session after this (and gnutls_deinit does not
             * touch a pair it did not allocate): the session no longer uses it. */
            tg_tls_unhold(&ct->held);
            free(ct);
            *socket_ctx = NULL;
        }
        atomic_fetch_sub(&s->conns, 1);
        /* The acceptor sets full_wait before its last look at conns, and this reads it
         * after the decrement (both sequentially consistent): no wake-up is lost, and a
         * close costs nothing extra unless the acceptor waits. */
        if (atomic_load(&s->full_wait)) {
            pthread_mutex_lock(&s->full_mu);
            pthread_cond_signal(&s->full_cv);
            pthread_mutex_unlock(&s->full_mu);
        }
    }
}

/* The accept loop: one blocking accept() at a time, each socket handed to
 * MHD_add_connection, which gives it to a pool thread (or closes it, at the per-address
 * limit). At --max-connections it stops accepting until a connection closes: further
 * connections wait in the kernel's backlog, as they would with libmicrohttpd's own
 * listener. The count is ours because libmicrohttpd splits its limit evenly over the pool
 * threads while MHD_add_connection picks the thread by descriptor number, so its limit
 * could refuse a connection with the server below the total; its limit is set out of the
 * way (tg_http_start). Ends when tg_http_quiesce shuts the socket down. */
static void *acceptor_main(void *arg) {
    tg_http_server_t *s = arg;
    int64_t warned_at = -1;     /* accept_failed at most every TG_HTTP_WARN_EVERY_S */
    unsigned long failures = 0; /* since the last accept_failed line */
    (void)prctl(PR_SET_NAME, "tg-accept", 0, 0, 0); /* top -H, ps -L */
    for (;;) {
        if (atomic_load(&s->conns) >= s->max_conns) {
            pthread_mutex_lock(&s->full_mu);
            atomic_store(&s->full_wait, true);
            while (atomic_load(&s->conns) >= s->max_conns && !atomic_load(&s->quiescing)) {
                (void)pthread_cond_wait(&s->full_cv, &s->full_mu);
            }
            atomic_store(&s->full_wait, false);
            pthread_mutex_unlock(&s->full_mu);
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            /* Counted before the hand-over: the connection can close before the call
             * returns. A refused one (closed by libmicrohttpd) was never started. Queued
             * ones that libmicrohttpd then fails to start (no memory for their pool) are
             * closed without a notification and stay counted: the limit errs low. */
            atomic_fetch_add(&s->conns, 1);
            if (MHD_add_connection(s->mhd, fd, (const struct sockaddr *)&ss, sl) != MHD_YES) {
                atomic_fetch_sub(&s->conns, 1);
            }
            continue;
        }
        int e = errno;
        if (atomic_load(&s->quiescing)) {
            break;
        }
        if (e == EINTR || e == ECONNABORTED || e == EAGAIN || e == EPROTO) {
            continue; /* this connection is gone, or nothing to do: the next one */
        }
        /* Out of descriptors or memory (or unexpected): the connection waits in the
         * backlog; retry shortly rather than spin. Clients that come and go would turn one
         * line per failure into a flood: one line at most every few seconds, with a count. */
        failures++;
        int64_t now = tg_clock_mono_ns();
        if (warned_at < 0 || now - warned_at >= TG_HTTP_WARN_EVERY_S * INT64_C(1000000000)) {
            TG_LOG(TG_LOG_WARN, "accept_failed",
                   "listener %d: %s (%lu failures since the last such line); retrying every "
                   "10 ms",
                   s->listener, strerror(e), failures);
            warned_at = now;
            failures = 0;
        }
        struct timespec ts = {0, 10L * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Frees a server whose threads are gone (or never started). */
static void server_free(tg_http_server_t *s) {
    pthread_cond_destroy(&s->full_cv);
    pthread_mutex_destroy(&s->full_mu);
    free(s);
}

tg_err_t tg_http_start(tg_http_server_t **out, const tg_http_opts_t *opts,
                       tg_http_handler_fn handler, void *ud, tg_diag_t *diag) {
    *out = NULL;
    /* MHD_NO_LISTEN_SOCKET: connections come from acceptor_main. */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
                         MHD_USE_ERROR_LOG;
    if (opts->tls != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
            MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "--tls-cert/--tls-key given, but this libmicrohttpd was built "
                               "without TLS support or its certificate callback "
                               "(MHD_FEATURE_TLS, MHD_FEATURE_HTTPS_CERT_CALLBACK); install a "
                               "build with GnuTLS or terminate TLS in front of trigguard");
        }
        /* Not with TLS: in turbo mode libmicrohttpd 0.9.75 leaves a new TLS connection
         * out of its epoll set until it has read from it, so one that never sends a byte
         * (or half a ClientHello) escapes --connection-timeout and holds its slot forever
         * (hostile8 F3). Without turbo it is registered at once and times out. */
        flags = (flags | MHD_USE_TLS) & ~(unsigned int)MHD_USE_TURBO;
    }
    MHD_set_panic_func(on_mhd_panic, NULL);
    int lfd = -1;
    uint16_t port = 0;
    tg_err_t rc = open_listener(opts, &lfd, &port, diag);
    if (rc != TG_OK) {
        return rc;
    }
    tg_http_server_t *s = calloc(1, sizeof *s);
    if (s == NULL || pthread_mutex_init(&s->full_mu, NULL) != 0) {
        free(s);
        (void)close(lfd);
        return TG_ERR_NOMEM;
    }
    if (pthread_cond_init(&s->full_cv, NULL) != 0) {
        pthread_mutex_destroy(&s->full_mu);
        free(s);
        (void)close(lfd);
        return TG_ERR_NOMEM;
    }
    s->handler = handler;
    s->early = opts->early;
    s->abandon = opts->abandon;
    s->ud = ud;
    s->listener = opts->listener;
    s->max_body = opts->max_body;
    s->max_url = opts->max_url;
    s->max_header_bytes = opts->max_header_bytes;
    atomic_init(&s->in_flight, 0);
    atomic_init(&s->suspended, 0);
    s->listen_fd = lfd;
    s->port = port;
    s->max_conns = opts->max_connections ? opts->max_connections : 1;
    atomic_init(&s->conns, 0);
    atomic_init(&s->full_wait, false);
    atomic_init(&s->quiescing, false);
    atomic_init(&s->starting, true);
    unsigned threads = opts->threads ? opts->threads : 1;
    /* Each pool thread may hold every connection: the acceptor enforces the total. */
    unsigned mhd_limit = s->max_conns * threads;
    /* libmicrohttpd's default is no timeout at all: never let a connection idle forever. */
    unsigned timeout_s = opts->connection_timeout_s ? opts->connection_timeout_s : 30;
    s->body_deadline_ns = (int64_t)timeout_s * INT64_C(1000000000);
    s->tls = opts->tls;
    /* No MHD_OPTION_HTTPS_MEM_CERT/KEY: libmicrohttpd reads those once, at start. The
     * callback is asked at every handshake, so a reload (tg_tls_reload) reaches every new
     * connection (tls.h). The option array carries pointers as void *, and ISO C has no
     * cast from a function pointer to one, so its bytes are copied (libmicrohttpd reads them
     * back as the function pointer it expects). */
    gnutls_certificate_retrieve_function2 *cert_fn = on_tls_cert;
    void *cert_cb = NULL;
    _Static_assert(sizeof cert_fn == sizeof cert_cb, "function and object pointers differ");
    memcpy(&cert_cb, &cert_fn, sizeof cert_cb);
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, cert_cb},
        {MHD_OPTION_END, 0, NULL},
    };
    s->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, opts->per_ip_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, opts->connection_memory,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_no_nul, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri,
        s,
        /* 1 = strict: an HTTP/1.1 request without Host, or with spaces in the URL, is a
         * 400 from libmicrohttpd (an authorization server has no reason to be lenient). */
        MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_ARRAY,
        opts->tls != NULL ? tls_opts : &tls_opts[1], MHD_OPTION_END);
    if (s->mhd == NULL) {
        rc = tg_diag_set(diag, TG_ERR_IO, "cannot serve on %s port %u%s: %s", opts->listen,
                         (unsigned)opts->port, opts->tls != NULL ? " with TLS" : "",
                         s->start_err[0]     ? s->start_err
                         : opts->tls != NULL ? "TLS setup refused"
                                             : "libmicrohttpd did not start");
        goto fail;
    }
    atomic_store(&s->starting, false);
    if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        MHD_stop_daemon(s->mhd);
        rc = tg_diag_set(diag, TG_ERR_INTERNAL, "cannot start the accept thread for %s port %u",
                         opts->listen, (unsigned)port);
        goto fail;
    }
    s->acceptor_running = true;
    *out = s;
    return TG_OK;
fail:
    (void)close(lfd);
    server_free(s);
    return rc;
}

/* Measured with 0.9.75 (/proc/PID/fd): 1 + 2 x threads, its inter-thread channel being an
 * eventfd; a pipe would take 3 x threads. The pool's master daemon has neither. */
unsigned tg_http_fds_per_listener(unsigned threads) {
    unsigned t = threads ? threads : 1;
    return 1 + t * (1 + 2 + 1); /* listener; per thread epoll, channel (<= 2), closing socket */
}

uint16_t tg_http_port(const tg_http_server_t *s) { return s->port; }

unsigned tg_http_in_flight(const tg_http_server_t *s) {
    return atomic_load(&((tg_http_server_t *)s)->in_flight);
}

/* Why the listener is ours: MHD_quiesce_daemon with an epoll thread pool races its own
 * pool threads to remove the listening socket from their epoll sets, and the loser calls
 * MHD_PANIC (abort) on ENOENT -- libmicrohttpd 0.9.75 aborted the daemon this way on
 * SIGTERM under load. Here nothing of libmicrohttpd's is touched: shutdown() stops the
 * listening at once (new connects are refused; handshakes still in the backlog are reset)
 * and wakes the blocked accept(), and the join makes sure the last accepted socket has
 * been handed over before the drain starts counting. */
void tg_http_quiesce(tg_http_server_t *s) {
    if (s == NULL || !s->acceptor_running) {
        return;
    }
    atomic_store(&s->quiescing, true);
    pthread_mutex_lock(&s->full_mu); /* an acceptor waiting at max_conns sees quiescing */
    pthread_cond_signal(&s->full_cv);
    pthread_mutex_unlock(&s->full_mu);
    (void)shutdown(s->listen_fd, SHUT_RDWR);
    (void)pthread_join(s->acceptor, NULL);
    s->acceptor_running = false;
    (void)close(s->listen_fd);
    s->listen_fd = -1;
}

/* Returns once no request has been in flight for settle_ns (checked every 5 ms), or at the
 * deadline. A single look at zero is not enough: a connection accepted just before the
 * listener closed, or a keep-alive one, can hold a whole request that a pool thread has
 * not parsed yet. */
static void wait_settled(tg_http_server_t *s, int64_t settle_ns, int64_t deadline) {
    int64_t quiet_since = -1;
    for (;;) {
        int64_t now = tg_clock_mono_ns();
        if (atomic_load(&s->in_flight) > 0) {
            quiet_since = -1;
        } else if (quiet_since < 0) {
            quiet_since = now;
        } else if (now - quiet_since >= settle_ns) {
            return;
        }
        if (now >= deadline) {
            return;
        }
        struct timespec ts = {0, 5L * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void tg_http_stop(tg_http_server_t *s, int64_t timeout_ms) {
    if (s == NULL) {
        return;
    }
    tg_http_quiesce(s);
    atomic_store(&s->draining, true);
    int64_t deadline = tg_clock_mono_ns() + timeout_ms * INT64_C(1000000);
    wait_settled(s, TG_HTTP_SETTLE_MS * INT64_C(1000000), deadline);
    atomic_store(&s->stopping, true);
    /* What began meanwhile is answered at once (shutting_down): let those answers go. */
    wait_settled(s, TG_HTTP_SETTLE_MS * INT64_C(1000000) / 4, deadline);
    unsigned waiting = atomic_load(&s->suspended);
    if (waiting > 0 && s->abandon != NULL) {
        /* The drain ran out with requests still waiting for their asynchronous step (a
         * ledger sync that does not return): they get their answer now, not a reset. */
        TG_LOG(TG_LOG_ERROR, "drain_abandon",
               "listener %d: %u requests still waiting after %lld ms; answering them 503",
               s->listener, waiting, (long long)timeout_ms);
        s->abandon(s->ud);
        int64_t until = tg_clock_mono_ns() + TG_HTTP_ABANDON_MS * INT64_C(1000000);
        while (atomic_load(&s->suspended) > 0 && tg_clock_mono_ns() < until) {
            struct timespec ts = {0, 5L * 1000000L};
            nanosleep(&ts, NULL);
        }
        wait_settled(s, TG_HTTP_SETTLE_MS * INT64_C(1000000) / 4, until);
    }
    unsigned left = atomic_load(&s->in_flight);
    if (left > 0) {
        TG_LOG(TG_LOG_ERROR, "drain_timeout",
               "listener %d: %u requests still in flight after %lld ms; closing their "
               "connections",
               s->listener, left, (long long)timeout_ms);
    }
    waiting = atomic_load(&s->suspended);
    if (waiting > 0) {
        /* MHD_stop_daemon with a suspended connection panics (aborts). Leave the server
         * running instead; its threads end with the process. */
        TG_LOG(TG_LOG_ERROR, "drain_stuck",
               "listener %d: %u connections still suspended; not stopping libmicrohttpd",
               s->listener, waiting);
        return;
    }
    MHD_stop_daemon(s->mhd);
    server_free(s);
}
