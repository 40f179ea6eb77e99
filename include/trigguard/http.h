/* http.h — libmicrohttpd lifecycle and the transport-neutral exchange.
 *
 * The HTTP layer is glue: it reads a bounded request, fills a tg_exchange_t, calls
 * one handler, and sends exactly one response built from the exchange. It holds no
 * policy logic. A handler either completes the exchange before returning, or calls
 * tg_exchange_defer() and later tg_exchange_complete() from any thread (the ledger
 * writer does this once the receipt is durable); in between, the connection is
 * suspended and no event thread waits for it.
 *
 * Ownership: the exchange lives in the per-request context the HTTP layer allocates
 * on the first callback and frees in libmicrohttpd's completion callback (which also
 * runs for aborted requests). Request strings point into that context or into
 * libmicrohttpd's connection memory and are valid until the response is queued.
 * The response body buffer belongs to the exchange; the HTTP layer hands it to
 * libmicrohttpd without copying.
 */
#ifndef TRIGGUARD_HTTP_H
#define TRIGGUARD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"

typedef struct tg_tls tg_tls_t; /* tls.h; declared here so http.h needs no GnuTLS header */

#define TG_HTTP_REQUEST_ID_MAX 64
#define TG_HTTP_RATELIMIT_MAX 96
/* A chunked body over max_body is read on (and refused with 413 at its end) for up to this
 * many times max_body plus 64 KiB; past that the connection is closed without an answer. */
#define TG_HTTP_DRAIN_FACTOR 4
/* tg_http_stop: how long no request must be in flight before the drain counts as done. */
#define TG_HTTP_SETTLE_MS 200
/* tg_http_stop: how long the abandon hook's answers may take to be sent. */
#define TG_HTTP_ABANDON_MS 2000

typedef struct tg_exchange tg_exchange_t;

#define TG_HTTP_TRACEPARENT_LEN 55 /* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TG_HTTP_CLIENT_MAX 46      /* an IPv6 address in text (INET6_ADDRSTRLEN - 1) */

struct tg_exchange {
    /* ---- request, filled by the HTTP layer ---- */
    int listener;                                /* 0 = main, 1 = the /decide-only listener */
    const char *method;                          /* "GET", "POST", ... */
    const char *path;                            /* URL path without query; of an
                                                    absolute-form target only the path */
    bool explain;                                /* ?explain=1 */
    const char *authorization;                   /* header or NULL */
    const char *content_type;                    /* header or NULL */
    const char *idempotency_header;              /* Idempotency-Key header or NULL */
    char request_id[TG_HTTP_REQUEST_ID_MAX + 1]; /* caller's X-Request-Id or generated */
    /* The caller's W3C traceparent (trace context), when it is well formed: logged as trace
     * and span ids and echoed in the response; "" otherwise (a malformed one is ignored, as
     * W3C Trace Context asks). */
    char traceparent[TG_HTTP_TRACEPARENT_LEN + 1];
    char client[TG_HTTP_CLIENT_MAX + 1]; /* the peer's address ("" if unknown), for the log */
    const char *body;                    /* NUL-terminated copy of the body */
    size_t body_len;
    bool body_too_large;    /* the body passed --max-body: respond 413 */
    bool url_too_long;      /* path + query passed --max-url: respond 414 */
    bool headers_too_large; /* request headers passed --max-header-bytes: respond 431 */
    bool bad_framing;       /* several Content-Length / Transfer-Encoding headers, both
                               together, or a transfer coding other than chunked: 400 */
    const char *bad_header; /* NULL, or why the headers are refused (static text): a
                               header read as one value (Host among them) appeared twice,
                               or a header name is not an RFC 9110 token: respond 400 */
    const char *bad_target; /* NULL, or why the request target is refused (static text): a
                               raw NUL or other control byte in it, or an absolute-form
                               target without a usable host: respond 400 */
    bool shutting_down;     /* the request began after tg_http_stop's drain: respond 503 at
                               once; the handler must not defer it */
    size_t url_bytes;       /* path + query bytes as measured for --max-url */
    size_t header_bytes;    /* sum of "name: value\r\n" bytes as measured for the limit */
    int64_t start_ns;       /* monotonic time of the first byte of headers */

    /* ---- response, filled by the handler ---- */
    int status;
    tg_buf_t out;                 /* response body (JSON unless content_type_out says otherwise) */
    const char *content_type_out; /* static string; NULL = application/json */
    int retry_after_s;            /* > 0: Retry-After header */
    bool www_authenticate;        /* WWW-Authenticate: Bearer */
    bool replayed;                /* Idempotent-Replayed: true */
    const char *cache_control;    /* static string or NULL */
    const char *allow;            /* 405: Allow header (static) */
    /* IETF RateLimit / RateLimit-Policy header values (draft-ietf-httpapi-ratelimit-headers,
     * structured fields); empty = header not sent. */
    char ratelimit[TG_HTTP_RATELIMIT_MAX];
    char ratelimit_policy[TG_HTTP_RATELIMIT_MAX];

    /* ---- access-log fields the handler may set (static or exchange-owned) ---- */
    const char *log_route;
    const char *log_tenant;
    const char *log_subject; /* the authenticated principal's subject */
    const char *log_issuer;  /* its issuer (OIDC callers); NULL for tokens */
    const char *log_decision;
    const char *log_reason;
    const char *log_surface;
    const char *log_error; /* the error code of an error body (reply.c), static */
    /* The gate's PERMIT (GET|POST /v1/gate): TrigGuard-Execution-Id and
     * TrigGuard-Receipt-Hash response headers, "" = not sent. */
    char gate_exec_id[48];
    char gate_receipt_hash[65];

    /* ---- deferred exchanges: optional hook, set by the handler before deferring ---- */
    /* Runs exactly once after tg_exchange_complete, on an event thread, before the response
     * is queued (it may still change the response); or, if the connection is gone by then,
     * from the completion callback. So work after an asynchronous step, and the freeing of
     * what the handler allocated, stay on the event threads that allocated it. */
    void (*on_resume)(tg_exchange_t *ex, void *ud);
    void *on_resume_ud;

    /* ---- owned by the HTTP layer ---- */
    void *http_ctx;
};

/* A request header by name (case-insensitive), NULL when absent: the first value. Only
 * on the event thread that runs the handler, before the exchange is deferred. */
const char *tg_exchange_header(tg_exchange_t *ex, const char *name);

/* A query argument by name (unescaped), NULL when absent: the first value. Same thread rule
 * as tg_exchange_header. */
const char *tg_exchange_query(tg_exchange_t *ex, const char *name);

/* Marks the exchange as finished later. Call at most once, from the handler, before
 * starting the asynchronous work whose completion calls tg_exchange_complete. */
void tg_exchange_defer(tg_exchange_t *ex);

/* Completes a deferred exchange; safe from any thread, exactly once per defer. */
void tg_exchange_complete(tg_exchange_t *ex);

/* The request handler: fills the response (status, out, headers) or defers. */
typedef void (*tg_http_handler_fn)(void *ud, tg_exchange_t *ex);

typedef struct tg_http_opts {
    const char *listen;            /* IPv4 or IPv6 literal */
    uint16_t port;                 /* 0 = ephemeral */
    int listener;                  /* value copied into every exchange's `listener` */
    unsigned threads;              /* epoll thread pool size, >= 1 */
    unsigned max_connections;      /* at the limit, accepting pauses (the backlog waits) */
    unsigned per_ip_connections;   /* 0 = no per-address limit */
    unsigned connection_timeout_s; /* idle timeout, >= 1 (libmicrohttpd's default is none) */
    size_t connection_memory;
    size_t max_body;
    size_t max_url;          /* path + query bytes; 0 = no check of our own */
    size_t max_header_bytes; /* request header bytes; 0 = no check of our own */
    /* NULL = plain HTTP. Else HTTPS with the store's current certificate and key, taken
     * at each handshake (tls.h), so a tg_tls_reload reaches new connections; the store
     * must outlive the server (tg_http_stop). Several servers may share one. */
    tg_tls_t *tls;
    /* Optional. Called on the event thread once the headers of a request that asks
     * `Expect: 100-continue` for a body are in and passed the transport checks, before the
     * 100 is sent. If it answers (sets ex->status, with all the accounting the handler
     * would do), that response is sent instead, the body is never read, the connection
     * closes after the response, and the handler is not called. It must not defer. Only
     * such requests: without the Expect, the body is already on its way, and reading it
     * keeps the connection (and requests pipelined behind it) usable. */
    tg_http_handler_fn early;
    /* Optional. Called by tg_http_stop when its drain ran out while exchanges are still
     * deferred (suspended): it must make every deferred exchange complete promptly, from
     * any thread (answer it without waiting for its asynchronous step), and make later
     * defers impossible. Without it, or if it does not, tg_http_stop leaves libmicrohttpd
     * running rather than stop it with connections suspended (which aborts the process). */
    void (*abandon)(void *ud);
} tg_http_opts_t;

typedef struct tg_http_server tg_http_server_t;

/* Starts listening (a socket and an accept thread of ours) and serving on the pool
 * threads. Requests whose URL or headers pass max_url / max_header_bytes, or whose announced body
 * passes max_body, are handed to the handler at once with the matching flag set (before any body
 * byte is read); so are requests with ambiguous framing, a repeated single-value header, a
 * header name that is not a token or a request target with a raw control byte (bad_framing,
 * bad_header, bad_target). An absolute-form target (http://host/path) is handed over as its
 * path. Requests beyond libmicrohttpd's connection memory never reach the handler:
 * libmicrohttpd itself answers 414 (request line) or 431 (headers) with a short HTML body and
 * closes. Errors: TG_ERR_INVALID_ARG (bad address), TG_ERR_CONFIG (TLS asked for but this
 * libmicrohttpd was built without it, or without its certificate callback), TG_ERR_IO
 * (bind/listen failed, or libmicrohttpd refused the TLS setup; diag says why), TG_ERR_NOMEM,
 * TG_ERR_INTERNAL (no accept thread). A panic of libmicrohttpd is logged (event
 * libmicrohttpd_panic) before the process aborts. */
tg_err_t tg_http_start(tg_http_server_t **out, const tg_http_opts_t *opts,
                       tg_http_handler_fn handler, void *ud, tg_diag_t *diag) TG_MUST_USE;

/* Descriptors one listener holds besides its connections' sockets, with `threads` event
 * threads: its listening socket, and per event thread libmicrohttpd's epoll descriptor and
 * inter-thread channel (an eventfd, or a pipe's two ends where there is none), plus one
 * socket per thread still open for a moment after its connection was counted closed (the
 * close notification comes just before libmicrohttpd closes the socket). With
 * max_connections this bounds what a listener can ever have open. Pure. */
unsigned tg_http_fds_per_listener(unsigned threads);

/* The port actually bound (useful with port 0). */
uint16_t tg_http_port(const tg_http_server_t *s);

/* Requests accepted but not yet answered (including deferred ones). */
unsigned tg_http_in_flight(const tg_http_server_t *s);

/* Stops accepting new connections (closes the listening socket, joins the accept thread);
 * requests in flight continue. Not thread-safe with other calls on s. */
void tg_http_quiesce(tg_http_server_t *s);

/* Drains, then stops the threads and frees the server: stops accepting; marks every
 * response from then on `Connection: close`; waits until no request has been in flight
 * for TG_HTTP_SETTLE_MS (requests already received get parsed and answered meanwhile);
 * then answers every request whose handler would run from then on with shutting_down set
 * (also one whose headers came earlier but whose body completes now), lets those answers
 * go, and stops. The waits together last at most timeout_ms. Exchanges still deferred then
 * are handed to opts.abandon, which answers them (up to TG_HTTP_ABANDON_MS more); requests
 * still in flight after that have their connections closed (logged as drain_timeout).
 * libmicrohttpd aborts the process when stopped with a suspended connection, so if any
 * remains (no abandon hook, or it did not answer), the server is left running and a
 * drain_stuck line is logged instead: the process can still exit. NULL-safe. Not
 * thread-safe with other calls on s. */
void tg_http_stop(tg_http_server_t *s, int64_t timeout_ms);

/* True when a request's Content-Type value is one media type, application/json (any
 * case), followed only by well-formed `;` parameters (RFC 9110 §8.3.1), of which a charset
 * must be utf-8: bodies are always parsed as UTF-8. A list ("application/json, text/plain"),
 * any other type and NULL are false. ct is NUL-terminated and only read. Pure; thread-safe. */
bool tg_http_content_type_is_json(const char *ct);

#endif /* TRIGGUARD_HTTP_H */
