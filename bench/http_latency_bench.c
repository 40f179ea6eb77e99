/* http_latency_bench.c — sequential keep-alive HTTP/1.1 latency of POST /decide or /v1/evaluate.
 *
 * What it measures: one client, one TCP connection kept alive (re-opened only if the server
 * closes it), one request in flight at a time. Per request, clock_gettime(CLOCK_MONOTONIC)
 * is read just before the request is written and just after the last byte of the response
 * is read: the sample covers the client's write, the loopback round trip and all server
 * work (for /v1/evaluate: parse, canonicalize and hash, idempotency, decide, sign, ledger
 * append and, with --durability fsync, the fdatasync). `WARMUP` requests are sent first and
 * not recorded. Every raw sample is kept; percentiles are nearest rank over them
 * (bench/common/stats.h). Each request carries a fresh idempotency key "<run id>-<seq>", so
 * no request is an idempotent replay. Every response is verified: status 200, a
 * Content-Length framed body containing "decision":"<EXPECT_DECISION>", and no
 * Idempotent-Replayed header; failures are counted by kind and excluded from the samples.
 * Throughput is measured requests / wall time of the measured phase.
 * What it does NOT measure: concurrency (see scripts/loadtest), TLS, connection setup (the
 * connection is warm), Nagle/delayed-ACK effects (TCP_NODELAY is set), DNS (loopback
 * literals only), and the client's own verification work (done after the second clock read).
 *
 * Traffic goes to loopback only: BASE_URL must be http://127.0.0.1[:port],
 * http://localhost[:port] or http://[::1][:port]; anything else is refused. localhost means
 * 127.0.0.1 (never looked up).
 *
 * Parameters (flag, else environment, else default):
 *   --base-url     BASE_URL         http://127.0.0.1:8080
 *   --endpoint     ENDPOINT         /v1/evaluate           (/decide or /v1/evaluate)
 *   --iterations   ITERATIONS       20000 for /decide, 5000 for /v1/evaluate
 *   --warmup       WARMUP           200
 *   --token        TOKEN            (none: no Authorization header)
 *   --output       OUTPUT           stdout
 *   --body-file    BODY_FILE        bench/load/body.json ({{IDEM}} marks the key)
 *   --expect       EXPECT_DECISION  PERMIT
 *   --timeout-ms   TIMEOUT_MS       10000                  (per read/write)
 *   --raw-output   RAW_OUTPUT       (none) every measured sample in ns, one per line, in
 *                                   request order (failed requests as -1)
 *   --label        LABEL            copied into the document
 * Exit status: 0 every request verified, 1 some failed (the document is still written),
 * 2 usage or setup error (nothing measured).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <sodium.h>

#include "env.h"
#include "stats.h"
#include "trigguard/buf.h"
#include "trigguard/io.h"

#define RESP_MAX ((size_t)1024 * 1024) /* largest response accepted */
#define KEY_SEQ_DIGITS 10              /* fixed width: every request has the same length */

typedef struct {
    const char *base_url, *endpoint, *token, *output, *body_file, *expect, *raw_output, *label;
    long iterations, warmup, timeout_ms;
} opts_t;

typedef struct {
    int family;    /* AF_INET or AF_INET6 */
    char host[64]; /* as written in the Host header */
    unsigned port;
} target_t;

typedef struct {
    int fd;
    char *buf; /* RESP_MAX bytes */
    size_t have;
    long opened;
} conn_t;

/* Error kinds, in the order of the JSON "by_kind" object. */
enum {
    E_CONNECT,
    E_SEND,
    E_RECV,
    E_TIMEOUT,
    E_PARSE,
    E_TOO_LARGE,
    E_STATUS,
    E_DECISION,
    E_REPLAY,
    E_KINDS
};
static const char *const KIND_NAMES[E_KINDS] = {"connect", "send",      "recv",
                                                "timeout", "malformed", "too_large",
                                                "status",  "decision",  "replayed"};

typedef struct {
    int status;
    int close;  /* Connection: close */
    int replay; /* Idempotent-Replayed: true */
    const char *body;
    size_t body_len;
} resp_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int usage_error(const char *what, const char *detail) {
    fprintf(stderr, "http_latency_bench: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 2;
}

/* ---- options ------------------------------------------------------------------------ */

static int parse_long(long *out, const char *name, const char *s, long lo, long hi) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "http_latency_bench: %s must be an integer in %ld..%ld\n", name, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : dflt;
}

static int parse_opts(opts_t *o, int argc, char **argv) {
    static const char *const NAMES[][2] = {{"--base-url", "BASE_URL"},
                                           {"--endpoint", "ENDPOINT"},
                                           {"--iterations", "ITERATIONS"},
                                           {"--warmup", "WARMUP"},
                                           {"--token", "TOKEN"},
                                           {"--output", "OUTPUT"},
                                           {"--body-file", "BODY_FILE"},
                                           {"--expect", "EXPECT_DECISION"},
                                           {"--timeout-ms", "TIMEOUT_MS"},
                                           {"--raw-output", "RAW_OUTPUT"},
                                           {"--label", "LABEL"}};
    enum { N_NAMES = sizeof NAMES / sizeof NAMES[0] };
    const char *val[N_NAMES];
    for (size_t k = 0; k < N_NAMES; k++) {
        val[k] = env_or(NAMES[k][1], NULL);
    }
    for (int i = 1; i < argc; i++) {
        size_t k = 0;
        while (k < N_NAMES && strcmp(argv[i], NAMES[k][0]) != 0) {
            k++;
        }
        if (k == N_NAMES) {
            fprintf(stderr, "http_latency_bench: unknown option %s\n", argv[i]);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "http_latency_bench: %s needs a value\n", argv[i]);
            return 0;
        }
        val[k] = argv[++i];
    }
    o->base_url = val[0] ? val[0] : "http://127.0.0.1:8080";
    o->endpoint = val[1] ? val[1] : "/v1/evaluate";
    o->token = val[4];
    o->output = val[5];
    o->body_file = val[6];
    o->expect = val[7] ? val[7] : "PERMIT";
    o->raw_output = val[9];
    o->label = val[10] ? val[10] : "";
    if (strcmp(o->endpoint, "/decide") != 0 && strcmp(o->endpoint, "/v1/evaluate") != 0) {
        fprintf(stderr, "http_latency_bench: ENDPOINT must be /decide or /v1/evaluate\n");
        return 0;
    }
    o->iterations = strcmp(o->endpoint, "/decide") == 0 ? 20000 : 5000;
    o->warmup = 200;
    o->timeout_ms = 10000;
    if ((val[2] && !parse_long(&o->iterations, "ITERATIONS", val[2], 1, 100000000)) ||
        (val[3] && !parse_long(&o->warmup, "WARMUP", val[3], 0, 100000000)) ||
        (val[8] && !parse_long(&o->timeout_ms, "TIMEOUT_MS", val[8], 1, 600000))) {
        return 0;
    }
    for (const char *p = o->expect; *p; p++) {
        if (!((*p >= 'A' && *p <= 'Z') || *p == '_')) {
            fprintf(stderr, "http_latency_bench: EXPECT_DECISION is an upper-case word\n");
            return 0;
        }
    }
    if (o->token != NULL && strpbrk(o->token, "\r\n") != NULL) {
        fprintf(stderr, "http_latency_bench: TOKEN must be one line\n");
        return 0;
    }
    return 1;
}

/* http://HOST[:PORT][/] with HOST one of 127.0.0.1, localhost, [::1]: nothing else, so the
 * benchmark can never send traffic off the machine. */
static int parse_base_url(target_t *t, const char *url) {
    static const char scheme[] = "http://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
        return 0;
    }
    const char *h = url + sizeof scheme - 1, *rest;
    if (strncmp(h, "127.0.0.1", 9) == 0) {
        t->family = AF_INET;
        snprintf(t->host, sizeof t->host, "127.0.0.1");
        rest = h + 9;
    } else if (strncmp(h, "localhost", 9) == 0) {
        t->family = AF_INET; /* resolved here, never through DNS */
        snprintf(t->host, sizeof t->host, "localhost");
        rest = h + 9;
    } else if (strncmp(h, "[::1]", 5) == 0) {
        t->family = AF_INET6;
        snprintf(t->host, sizeof t->host, "[::1]");
        rest = h + 5;
    } else {
        return 0;
    }
    t->port = 80;
    if (*rest == ':') {
        long port = 0;
        char *end = NULL;
        errno = 0;
        port = strtol(rest + 1, &end, 10);
        if (errno != 0 || end == rest + 1 || port < 1 || port > 65535 ||
            (*end >= '0' && *end <= '9')) {
            return 0;
        }
        t->port = (unsigned)port;
        rest = end;
    }
    if (strcmp(rest, "") != 0 && strcmp(rest, "/") != 0) {
        return 0;
    }
    if (t->port != 80) {
        size_t hl = strlen(t->host);
        snprintf(t->host + hl, sizeof t->host - hl, ":%u", t->port);
    }
    return 1;
}

/* ---- connection --------------------------------------------------------------------- */

static void conn_close(conn_t *c) {
    if (c->fd >= 0) {
        close(c->fd);
    }
    c->fd = -1;
    c->have = 0;
}

static int conn_open(conn_t *c, const target_t *t, long timeout_ms) {
    conn_close(c);
    int fd = socket(t->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int one = 1;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int rc;
    if (t->family == AF_INET6) {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                                 .sin6_port = htons((uint16_t)t->port),
                                 .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        rc = connect(fd, (const struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = connect(fd, (const struct sockaddr *)&a, sizeof a);
    }
    if (rc != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->opened++;
    return 0;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? E_TIMEOUT : E_SEND;
        }
        p += w;
        n -= (size_t)w;
    }
    return -1;
}

/* Reads more bytes; E_* on failure, -2 on orderly EOF, -1 on success. */
static int recv_more(conn_t *c) {
    if (c->have >= RESP_MAX) {
        return E_TOO_LARGE;
    }
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->have, RESP_MAX - c->have, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? E_TIMEOUT : E_RECV;
        }
        if (r == 0) {
            return -2;
        }
        c->have += (size_t)r;
        return -1;
    }
}

static const char *find_crlf2(const char *p, size_t n) {
    for (size_t i = 0; i + 3 < n; i++) {
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') {
            return p + i;
        }
    }
    return NULL;
}

static int header_is(const char *line, size_t len, const char *name, const char **value,
                     size_t *vlen) {
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0) {
        return 0;
    }
    const char *v = line + nl + 1, *e = line + len;
    while (v < e && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (e > v && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    *value = v;
    *vlen = (size_t)(e - v);
    return 1;
}

/* Reads one whole response (Content-Length framed, or delimited by the close) into c->buf.
 * -1 on success with *r filled; else an E_* kind (the connection must then be closed). */
static int read_response(conn_t *c, resp_t *r) {
    memset(r, 0, sizeof *r);
    const char *end;
    int rc;
    while ((end = find_crlf2(c->buf, c->have)) == NULL) {
        rc = recv_more(c);
        if (rc != -1) {
            return rc == -2 ? E_RECV : rc;
        }
    }
    size_t head_len = (size_t)(end - c->buf) + 4;
    if (head_len < 12 || strncmp(c->buf, "HTTP/1.", 7) != 0 || c->buf[8] != ' ') {
        return E_PARSE;
    }
    r->status = 0;
    for (int i = 9; i < 12; i++) {
        if (c->buf[i] < '0' || c->buf[i] > '9') {
            return E_PARSE;
        }
        r->status = r->status * 10 + (c->buf[i] - '0');
    }
    long long clen = -1;
    const char *line = memchr(c->buf, '\n', head_len);
    while (line != NULL && (size_t)(line + 1 - c->buf) < head_len - 2) {
        line++;
        const char *nl = memchr(line, '\n', head_len - (size_t)(line - c->buf));
        if (nl == NULL) {
            return E_PARSE;
        }
        size_t len = (size_t)(nl - line) - (nl > line && nl[-1] == '\r');
        const char *v;
        size_t vl;
        if (header_is(line, len, "Content-Length", &v, &vl)) {
            clen = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9' || clen > (long long)RESP_MAX) {
                    return E_PARSE;
                }
                clen = clen * 10 + (v[i] - '0');
            }
            if (vl == 0) {
                return E_PARSE;
            }
        } else if (header_is(line, len, "Transfer-Encoding", &v, &vl)) {
            return E_PARSE; /* the daemon frames every reply with Content-Length */
        } else if (header_is(line, len, "Connection", &v, &vl)) {
            r->close = vl == 5 && strncasecmp(v, "close", 5) == 0;
        } else if (header_is(line, len, "Idempotent-Replayed", &v, &vl)) {
            r->replay = vl == 4 && strncasecmp(v, "true", 4) == 0;
        }
        line = nl;
    }
    if (clen > (long long)(RESP_MAX - head_len)) {
        return E_TOO_LARGE;
    }
    if (clen >= 0) {
        while (c->have < head_len + (size_t)clen) {
            rc = recv_more(c);
            if (rc != -1) {
                return rc == -2 ? E_RECV : rc;
            }
        }
        if (c->have != head_len + (size_t)clen) {
            return E_PARSE; /* bytes nobody asked for: the exchange is out of step */
        }
    } else {
        while ((rc = recv_more(c)) == -1) {
        }
        if (rc != -2) {
            return rc;
        }
        r->close = 1;
    }
    r->body = c->buf + head_len;
    r->body_len = c->have - head_len;
    return -1;
}

static int body_has(const resp_t *r, const char *needle) {
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= r->body_len; i++) {
        if (memcmp(r->body + i, needle, nl) == 0) {
            return 1;
        }
    }
    return 0;
}

/* One exchange on a kept-alive connection, reopened on demand. -1 verified, else E_*.
 * *elapsed = ns from just before the write to just after the last response byte. */
static int exchange(conn_t *c, const target_t *t, const opts_t *o, const char *req, size_t len,
                    const char *needle, int check_replay, int64_t *elapsed) {
    if (c->fd < 0 && conn_open(c, t, o->timeout_ms) != 0) {
        return E_CONNECT;
    }
    c->have = 0;
    resp_t r;
    int64_t t0 = now_ns();
    int rc = send_all(c->fd, req, len);
    if (rc == -1) {
        rc = read_response(c, &r);
    }
    *elapsed = now_ns() - t0;
    if (rc != -1) {
        conn_close(c);
        return rc;
    }
    if (r.status != 200) {
        rc = E_STATUS;
    } else if (needle != NULL && !body_has(&r, needle)) {
        rc = E_DECISION;
    } else if (check_replay && r.replay) {
        rc = E_REPLAY;
    }
    if (r.close) {
        conn_close(c);
    }
    return rc;
}

/* ---- request template ---------------------------------------------------------------- */

static void default_body_path(char *out, size_t n) {
    if (getenv("TG_SRC") != NULL) {
        snprintf(out, n, "%s/bench/load/body.json", getenv("TG_SRC"));
        return;
    }
    char here[4096];
    snprintf(here, sizeof here, "%s", __FILE__); /* <repo>/bench/http_latency_bench.c */
    char *slash = strrchr(here, '/');
    if (slash != NULL) {
        *slash = '\0';
        snprintf(out, n, "%s/load/body.json", here);
    } else {
        snprintf(out, n, "load/body.json");
    }
}

/* The whole request with a KEY placeholder of fixed width; *key_off is where the unique
 * sequence digits go (patched in place per request: no allocation on the timed path). */
static int build_request(tg_buf_t *req, size_t *key_off, const opts_t *o, const target_t *t,
                         const char *body_path, const char *run_id) {
    tg_file_t body;
    tg_diag_t diag = {{0}};
    if (tg_read_file(&body, body_path, (size_t)1024 * 1024, body_path, 0, &diag) != TG_OK) {
        fprintf(stderr, "http_latency_bench: %s\n", diag.msg);
        return 0;
    }
    while (body.len > 0 && strchr(" \t\r\n", body.data[body.len - 1]) != NULL) {
        body.data[--body.len] = '\0';
    }
    const char *mark = strstr(body.data, "{{IDEM}}");
    if (mark == NULL) {
        fprintf(stderr, "http_latency_bench: %s has no {{IDEM}} placeholder\n", body_path);
        tg_file_free(&body);
        return 0;
    }
    size_t pre = (size_t)(mark - body.data), key_len = strlen(run_id) + 1 + KEY_SEQ_DIGITS;
    size_t total = body.len - 8 + key_len;
    tg_err_t rc = tg_buf_printf(req, "POST %s HTTP/1.1\r\nHost: %s\r\n", o->endpoint, t->host);
    if (o->token != NULL && o->token[0] != '\0') {
        rc = rc ? rc : tg_buf_printf(req, "Authorization: Bearer %s\r\n", o->token);
    }
    rc = rc ? rc
            : tg_buf_printf(req,
                            "Content-Type: application/json\r\nUser-Agent: http_latency_bench\r\n"
                            "Content-Length: %zu\r\n\r\n",
                            total);
    rc = rc ? rc : tg_buf_append(req, body.data, pre);
    rc = rc ? rc : tg_buf_printf(req, "%s-", run_id);
    *key_off = req->len;
    rc = rc ? rc : tg_buf_printf(req, "%0*d", KEY_SEQ_DIGITS, 0);
    rc = rc ? rc : tg_buf_append(req, mark + 8, body.len - pre - 8);
    tg_file_free(&body);
    return rc == TG_OK;
}

static void set_seq(char *digits, unsigned long long seq) {
    for (int i = KEY_SEQ_DIGITS - 1; i >= 0; i--) {
        digits[i] = (char)('0' + seq % 10);
        seq /= 10;
    }
}

/* ---- server facts ------------------------------------------------------------------- */

typedef struct {
    char engine[64], commit[64], durability[32], policy_version[128], policy_hash[80];
} server_t;

static void copy_member(char *out, size_t n, const json_t *j, const char *key) {
    const char *v = json_string_value(json_object_get(j, key));
    snprintf(out, n, "%s", v != NULL ? v : "unknown");
}

/* GET /version on the benchmark connection (not timed): what the numbers belong to. */
static int query_server(server_t *s, conn_t *c, const target_t *t, const opts_t *o) {
    char req[256];
    int n = snprintf(req, sizeof req, "GET /version HTTP/1.1\r\nHost: %s\r\n\r\n", t->host);
    int64_t ignored;
    int rc = exchange(c, t, o, req, (size_t)n, NULL, 0, &ignored);
    if (rc == E_CONNECT) {
        return 0;
    }
    json_t *j = NULL;
    if (rc == -1) {
        resp_t r = {.body = c->buf, .body_len = 0};
        const char *end = find_crlf2(c->buf, c->have);
        if (end != NULL) {
            r.body = end + 4;
            r.body_len = c->have - (size_t)(r.body - c->buf);
        }
        j = json_loadb(r.body, r.body_len, 0, NULL);
    }
    copy_member(s->engine, sizeof s->engine, j, "engine");
    copy_member(s->commit, sizeof s->commit, j, "build_commit");
    copy_member(s->durability, sizeof s->durability, j, "durability");
    copy_member(s->policy_version, sizeof s->policy_version, j, "policy_version");
    copy_member(s->policy_hash, sizeof s->policy_hash, j, "policy_hash");
    json_decref(j);
    return 1;
}

/* ---- output ------------------------------------------------------------------------- */

static tg_err_t put_kv(tg_buf_t *b, const char *key, const char *val) {
    tg_err_t rc = tg_buf_printf(b, "\"%s\":", key);
    return rc ? rc : tg_bench_put_str(b, val);
}

typedef struct {
    long measured, ok, warmup_errors;
    long errors[E_KINDS];
    double wall_s;
    int64_t *sorted;
} result_t;

static tg_err_t write_document(tg_buf_t *b, const opts_t *o, const server_t *s,
                               const char *body_path, const char *run_id, const result_t *r,
                               long reconnects) {
    int decide = strcmp(o->endpoint, "/decide") == 0;
    long nerr = r->measured - r->ok;
    tg_err_t rc = tg_bench_put_header(
        b, decide ? "http_decide_sequential" : "http_evaluate_sequential",
        "bench/http_latency_bench.c",
        decide ? "POST /decide (decision core only: validate, kernel, reply) over one keep-alive "
                 "connection, one request at a time, client-side latency per request"
               : "POST /v1/evaluate (full pipeline: parse, hash, idempotency, decide, sign, "
                 "durable ledger append) over one keep-alive connection, one request at a time, "
                 "client-side latency per request",
        "clock_gettime(CLOCK_MONOTONIC) before writing each request and after reading the last "
        "byte of its response; raw samples kept; nearest-rank percentiles; failed requests "
        "excluded from the samples and counted",
        "concurrency, TLS, connection setup, DNS, the client's response verification; the server "
        "shares the machine's cores with this client");
    rc = rc ? rc : tg_buf_puts(b, ",\"parameters\":{");
    rc = rc ? rc : put_kv(b, "base_url", o->base_url);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "endpoint", o->endpoint);
    rc = rc ? rc
            : tg_buf_printf(b, ",\"iterations\":%ld,\"warmup\":%ld,\"timeout_ms\":%ld,",
                            o->iterations, o->warmup, o->timeout_ms);
    rc = rc ? rc : put_kv(b, "expect_decision", o->expect);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "body_file", body_path);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "idempotency_keys", "unique per request: <run_id>-<10-digit seq>");
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "run_id", run_id);
    rc = rc ? rc
            : tg_buf_printf(b, ",\"authorization\":%s,",
                            o->token != NULL && o->token[0] ? "true" : "false");
    rc = rc ? rc : put_kv(b, "label", o->label);
    rc = rc ? rc : tg_buf_puts(b, "},\"server\":{");
    rc = rc ? rc : put_kv(b, "engine", s->engine);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "build_commit", s->commit);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "durability", s->durability);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "policy_version", s->policy_version);
    rc = rc ? rc : tg_buf_puts(b, ",");
    rc = rc ? rc : put_kv(b, "policy_hash", s->policy_hash);
    rc = rc ? rc : tg_buf_puts(b, "},");
    rc = rc ? rc
            : tg_bench_put_environment(b, s->durability,
                                       strcmp(s->commit, "unknown") ? s->commit : NULL);
    rc = rc ? rc : tg_buf_puts(b, ",\"runs\":[{\"name\":\"sequential\",\"concurrency\":1,");
    rc = rc ? rc
            : tg_buf_printf(b,
                            "\"iterations\":%ld,\"warmup\":%ld,\"duration_s\":%.3f,"
                            "\"requests\":%ld,\"ok\":%ld,",
                            o->iterations, o->warmup, r->wall_s, r->measured, r->ok);
    if (r->ok > 0) {
        tg_bench_summary_t sum;
        rc = rc ? rc : tg_bench_summarize(&sum, r->sorted, (size_t)r->ok);
        rc = rc ? rc : tg_bench_put_latency(b, &sum);
        rc = rc ? rc : tg_buf_puts(b, ",");
        rc = rc ? rc : tg_bench_put_digest(b, r->sorted, (size_t)r->ok);
    } else {
        rc = rc ? rc : tg_buf_puts(b, "\"latency_ms\":null,\"digest\":null");
    }
    rc = rc ? rc
            : tg_buf_printf(b,
                            ",\"throughput_per_s\":%.1f,\"throughput_source\":\"requests / wall "
                            "time of the measured phase\",\"errors\":{\"count\":%ld,"
                            "\"rate\":%.6f,\"by_kind\":{",
                            r->wall_s > 0 ? (double)r->measured / r->wall_s : 0.0, nerr,
                            r->measured > 0 ? (double)nerr / (double)r->measured : 0.0);
    for (int k = 0; k < E_KINDS && rc == TG_OK; k++) {
        rc = tg_buf_printf(b, "%s\"%s\":%ld", k ? "," : "", KIND_NAMES[k], r->errors[k]);
    }
    rc = rc ? rc
            : tg_buf_printf(b, "},\"warmup_errors\":%ld},\"reconnects\":%ld}]}\n", r->warmup_errors,
                            reconnects);
    return rc;
}

static int write_out(const char *path, const char *data, size_t len) {
    FILE *f = path != NULL ? fopen(path, "w") : stdout;
    if (f == NULL) {
        return 0;
    }
    int ok = fwrite(data, 1, len, f) == len;
    ok = (f == stdout ? fflush(f) : fclose(f)) == 0 && ok;
    return ok;
}

int main(int argc, char **argv) {
    opts_t o;
    target_t t;
    if (!parse_opts(&o, argc, argv)) {
        fprintf(stderr,
                "usage: http_latency_bench [--base-url URL] [--endpoint /decide|/v1/evaluate] "
                "[--iterations N] [--warmup N] [--token T] [--output FILE] "
                "[--body-file FILE] [--expect DECISION] [--timeout-ms N] "
                "[--raw-output FILE] [--label TEXT]\n"
                "(each also from the environment: BASE_URL, ENDPOINT, ITERATIONS, "
                "WARMUP, TOKEN, OUTPUT, BODY_FILE, EXPECT_DECISION, TIMEOUT_MS, "
                "RAW_OUTPUT, LABEL)\n");
        return 2;
    }
    if (!parse_base_url(&t, o.base_url)) {
        return usage_error("BASE_URL must be http://127.0.0.1[:port], http://localhost[:port] "
                           "or http://[::1][:port] (loopback only, no path)",
                           o.base_url);
    }
    if (sodium_init() < 0) {
        return usage_error("libsodium failed to initialize", NULL);
    }
    char body_path[4200];
    if (o.body_file != NULL) {
        snprintf(body_path, sizeof body_path, "%s", o.body_file);
    } else {
        default_body_path(body_path, sizeof body_path);
    }
    unsigned char rnd[8];
    randombytes_buf(rnd, sizeof rnd);
    char run_id[32];
    snprintf(run_id, sizeof run_id, "hlb%lx-", (unsigned long)time(NULL));
    for (size_t i = 0; i < sizeof rnd; i++) {
        size_t l = strlen(run_id);
        snprintf(run_id + l, sizeof run_id - l, "%02x", rnd[i]);
    }

    int status = 2;
    tg_buf_t req, doc;
    tg_buf_init(&req, 2 * 1024 * 1024);
    tg_buf_init(&doc, 0);
    conn_t c = {.fd = -1, .buf = malloc(RESP_MAX)};
    result_t r = {0};
    int64_t *raw = malloc((size_t)o.iterations * sizeof *raw);
    r.sorted = malloc((size_t)o.iterations * sizeof *r.sorted);
    size_t key_off = 0;
    server_t s;
    if (c.buf == NULL || raw == NULL || r.sorted == NULL) {
        usage_error("out of memory", NULL);
        goto done;
    }
    if (!build_request(&req, &key_off, &o, &t, body_path, run_id)) {
        usage_error("cannot read the request body template", body_path);
        goto done;
    }
    if (!query_server(&s, &c, &t, &o)) {
        usage_error("cannot connect to", o.base_url);
        goto done;
    }
    char needle[64];
    snprintf(needle, sizeof needle, "\"decision\":\"%s\"", o.expect);
    int check_replay = strcmp(o.endpoint, "/v1/evaluate") == 0;
    unsigned long long seq = 0;
    int64_t elapsed;
    for (long i = 0; i < o.warmup; i++) {
        set_seq(req.data + key_off, seq++);
        if (exchange(&c, &t, &o, req.data, req.len, needle, check_replay, &elapsed) != -1) {
            r.warmup_errors++;
        }
    }
    long consecutive_connect_failures = 0;
    int64_t start = now_ns();
    for (long i = 0; i < o.iterations; i++) {
        set_seq(req.data + key_off, seq++);
        int rc = exchange(&c, &t, &o, req.data, req.len, needle, check_replay, &elapsed);
        r.measured++;
        if (rc == -1) {
            raw[i] = elapsed;
            r.sorted[r.ok++] = elapsed;
            consecutive_connect_failures = 0;
            continue;
        }
        raw[i] = -1;
        r.errors[rc]++;
        if (rc == E_CONNECT && ++consecutive_connect_failures >= 100) {
            fprintf(stderr, "http_latency_bench: 100 connection failures in a row; stopping\n");
            break;
        }
    }
    r.wall_s = (double)(now_ns() - start) / 1e9;
    tg_bench_sort(r.sorted, (size_t)r.ok);
    if (write_document(&doc, &o, &s, body_path, run_id, &r, c.opened > 0 ? c.opened - 1 : 0)) {
        usage_error("cannot build the JSON document", NULL);
        goto done;
    }
    if (!write_out(o.output, doc.data, doc.len)) {
        usage_error("cannot write", o.output != NULL ? o.output : "stdout");
        goto done;
    }
    if (o.raw_output != NULL) {
        tg_buf_t rb;
        tg_buf_init(&rb, 0);
        tg_err_t e = TG_OK;
        for (long i = 0; i < r.measured && e == TG_OK; i++) {
            e = tg_buf_printf(&rb, "%lld\n", (long long)raw[i]);
        }
        int ok = e == TG_OK && write_out(o.raw_output, rb.data != NULL ? rb.data : "", rb.len);
        tg_buf_free(&rb);
        if (!ok) {
            usage_error("cannot write", o.raw_output);
            goto done;
        }
    }
    status = r.ok == r.measured && r.measured == o.iterations ? 0 : 1;
    if (status != 0) {
        fprintf(stderr, "http_latency_bench: %ld of %ld requests failed verification\n",
                r.measured - r.ok, o.iterations);
    }
done:
    conn_close(&c);
    free(c.buf);
    free(raw);
    free(r.sorted);
    tg_buf_free(&req);
    tg_buf_free(&doc);
    return status;
}
