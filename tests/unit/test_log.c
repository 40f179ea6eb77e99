/* test_log.c — log lines: format, escaping, and the batched writer (nothing lost, nothing
 * torn, order kept, other lines out when their call returns); tg_write_all and
 * tg_open_regular and tg_path_parent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trigguard/clock.h"
#include "trigguard/io.h"
#include "trigguard/log.h"

#include "support/read.h"

typedef struct {
    char path[64];
    int fd;
} sink_t;

static int sink_setup(void **state) {
    sink_t *s = calloc(1, sizeof *s);
    assert_non_null(s);
    const char *dir = getenv("TMPDIR");
    (void)snprintf(s->path, sizeof s->path, "%s/tglogXXXXXX", dir && *dir ? dir : "/tmp");
    if (strlen(s->path) >= sizeof s->path - 1) {
        (void)snprintf(s->path, sizeof s->path, "/tmp/tglogXXXXXX");
    }
    s->fd = mkstemp(s->path);
    assert_true(s->fd >= 0);
    tg_log_setup(TG_LOG_INFO, TG_LOG_JSON, s->fd);
    *state = s;
    return 0;
}

static int sink_teardown(void **state) {
    sink_t *s = *state;
    tg_log_async_stop();
    tg_log_setup(TG_LOG_INFO, TG_LOG_JSON, 2);
    close(s->fd);
    unlink(s->path);
    free(s);
    return 0;
}

/* The whole file as a NUL-terminated string (caller frees). */
static char *slurp(const sink_t *s, size_t *len) { return tg_test_read(s->path, len); }

static size_t count_lines(const char *text) {
    size_t n = 0;
    for (const char *p = text; *p; p++) {
        n += *p == '\n';
    }
    return n;
}

static void log_req(const char *id, const char *reason, int64_t latency) {
    tg_log_request_t r = {.request_id = id,
                          .tenant = "acme",
                          .method = "POST",
                          .route = "/v1/evaluate",
                          .status = 200,
                          .decision = "PERMIT",
                          .reason = reason,
                          .surface = "payments.charge",
                          .latency_us = latency};
    tg_log_request(&r);
}

static void test_json_line(void **state) {
    sink_t *s = *state;
    int64_t before = tg_clock_now_ms();
    log_req("req_1", "q\"b\\s\x01\x1f end", INT64_MIN);
    log_req("req_2", NULL, 0);
    char *text = slurp(s, NULL);
    const char *want1 = "\",\"level\":\"info\",\"event\":\"request\",\"request_id\":\"req_1\","
                        "\"tenant\":\"acme\",\"method\":\"POST\",\"route\":\"/v1/evaluate\","
                        "\"status\":200,\"decision\":\"PERMIT\",\"reason\":\"q\\\"b\\\\s\\u0001"
                        "\\u001f end\",\"surface\":\"payments.charge\","
                        "\"latency_us\":-9223372036854775808}\n";
    assert_memory_equal(text, "{\"ts\":\"", 7);
    /* The stamp is the receipt format (UTC, milliseconds) and the time of the call. */
    char stamp[TG_TIME_ISO_LEN + 1];
    memcpy(stamp, text + 7, TG_TIME_ISO_LEN);
    stamp[TG_TIME_ISO_LEN] = '\0';
    int64_t at;
    assert_int_equal(tg_time_parse_ms(&at, stamp, TG_TIME_ISO_LEN), TG_OK);
    assert_true(at >= before - 1 && at <= tg_clock_now_ms() + 1);
    assert_memory_equal(text + 7 + TG_TIME_ISO_LEN, want1, strlen(want1));
    const char *line2 = text + 7 + TG_TIME_ISO_LEN + strlen(want1);
    assert_non_null(strstr(line2, "\"request_id\":\"req_2\","));
    assert_null(strstr(line2, "\"reason\"")); /* NULL fields are omitted */
    assert_non_null(strstr(line2, "\"latency_us\":0}\n"));
    assert_int_equal(count_lines(text), 2);
    free(text);
}

static void test_text_line(void **state) {
    sink_t *s = *state;
    tg_log_setup(TG_LOG_INFO, TG_LOG_TEXT, s->fd);
    log_req("req_t", "two\nlines\x7f", 9223372036854775807LL);
    char *text = slurp(s, NULL);
    assert_non_null(strstr(text, " info request request_id=req_t tenant=acme method=POST "
                                 "route=/v1/evaluate status=200 decision=PERMIT "
                                 "reason=two lines\x7f surface=payments.charge "
                                 "latency_us=9223372036854775807\n"));
    assert_int_equal(count_lines(text), 1);
    free(text);
}

static void test_level_filter(void **state) {
    sink_t *s = *state;
    tg_log_setup(TG_LOG_WARN, TG_LOG_JSON, s->fd);
    log_req("req_x", "R", 1);
    TG_LOG(TG_LOG_INFO, "quiet", "not written");
    TG_LOG(TG_LOG_WARN, "loud", "written %d", 7);
    char *text = slurp(s, NULL);
    assert_null(strstr(text, "req_x"));
    assert_null(strstr(text, "quiet"));
    assert_non_null(strstr(text, "\"level\":\"warn\",\"event\":\"loud\",\"msg\":\"written 7\"}\n"));
    assert_int_equal(count_lines(text), 1);
    free(text);
}

enum { THREADS = 4, PER_THREAD = 5000 };

static void *writer(void *arg) {
    int t = (int)(intptr_t)arg;
    char id[32];
    for (int i = 0; i < PER_THREAD; i++) {
        (void)snprintf(id, sizeof id, "t%d-%06d", t, i);
        log_req(id, "POLICY_ALLOW", i);
    }
    return NULL;
}

/* Every line of every thread is in the file exactly once, whole, in each thread's order. */
static void check_all_lines(char *text, size_t len) {
    int next[THREADS] = {0};
    size_t lines = 0;
    /* Line by line, each cut at its '\n': the sanitizers' string interceptors would
     * otherwise measure the whole remaining text on every call. */
    for (char *p = text; p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        assert_non_null(nl);
        *nl = '\0';
        assert_true(p[0] == '{' && nl[-1] == '}');
        const char *id = strstr(p, "\"request_id\":\"t");
        assert_true(id != NULL && id < nl);
        char *end;
        long t = strtol(id + strlen("\"request_id\":\"t"), &end, 10);
        assert_true(*end == '-');
        long i = strtol(end + 1, &end, 10);
        assert_true(*end == '"');
        assert_true(t >= 0 && t < THREADS);
        assert_int_equal(i, next[t]);
        next[t]++;
        lines++;
        p = nl + 1;
    }
    assert_int_equal(lines, (size_t)THREADS * PER_THREAD);
}

static void run_writers(void) {
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
    }
}

/* Starts the writer thread with buffer_bytes, logs from THREADS threads, stops (which
 * writes what is still buffered) and checks the file. */
static void run_async_and_check(const sink_t *s, size_t buffer_bytes) {
    assert_int_equal(tg_log_async_start(buffer_bytes), TG_OK);
    assert_int_equal(tg_log_async_start(buffer_bytes), TG_ERR_INVALID_ARG);
    run_writers();
    tg_log_async_stop();
    size_t len;
    char *text = slurp(s, &len);
    check_all_lines(text, len);
    free(text);
}

static void test_async_keeps_every_line(void **state) { run_async_and_check(*state, 64 * 1024); }

/* A buffer far smaller than the load (1 is rounded up to two line maxima, 4 KiB): request
 * threads wait for room, nothing is dropped. */
static void test_async_backpressure(void **state) { run_async_and_check(*state, 1); }

/* tg_write_all goes on after short writes (a pipe takes 64 KiB at a time) and reports a
 * descriptor that refuses the bytes. */
typedef struct {
    int fd;
    size_t got, wrong; /* checked by the main thread: cmocka asserts are not thread-safe */
} drain_t;

static void *drain(void *arg) {
    drain_t *d = arg;
    char buf[4096];
    ssize_t r;
    while ((r = read(d->fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            d->wrong += (unsigned char)buf[i] != (unsigned char)((d->got + (size_t)i) % 251);
        }
        d->got += (size_t)r;
    }
    return NULL;
}

static void test_write_all(void **state) {
    sink_t *s = *state;
    size_t n = (size_t)1 << 20;
    unsigned char *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++) {
        data[i] = (unsigned char)(i % 251);
    }
    int p[2];
    assert_int_equal(pipe(p), 0);
    drain_t d = {p[0], 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain, &d), 0);
    assert_int_equal(tg_write_all(p[1], data, n), TG_OK);
    close(p[1]);
    assert_int_equal(pthread_join(th, NULL), 0);
    close(p[0]);
    assert_int_equal(d.got, n);
    assert_int_equal(d.wrong, 0);
    int ro = open(s->path, O_RDONLY);
    assert_true(ro >= 0);
    assert_int_equal(tg_write_all(ro, data, 10), TG_ERR_IO);
    close(ro);
    assert_int_equal(tg_write_all(ro, data, 0), TG_OK); /* nothing to write: fd not used */
    free(data);
}

/* A warning is written, after the request lines logged before it, when TG_LOG returns. */
static void test_async_other_lines_flush(void **state) {
    sink_t *s = *state;
    assert_int_equal(tg_log_async_start(256 * 1024), TG_OK);
    for (int i = 0; i < 10; i++) {
        char id[16];
        (void)snprintf(id, sizeof id, "b%d", i);
        log_req(id, "R", i);
    }
    TG_LOG(TG_LOG_WARN, "after", "ten request lines");
    char *text = slurp(s, NULL); /* the writer thread is still running */
    assert_int_equal(count_lines(text), 11);
    const char *warn = strstr(text, "\"event\":\"after\"");
    const char *last = strstr(text, "\"request_id\":\"b9\"");
    assert_true(warn != NULL && last != NULL && last < warn);
    free(text);
    tg_log_async_stop();
    tg_log_async_stop();       /* a second stop is a no-op */
    log_req("direct", "R", 1); /* written at once again */
    text = slurp(s, NULL);
    assert_int_equal(count_lines(text), 12);
    assert_non_null(strstr(text, "\"request_id\":\"direct\""));
    free(text);
}

/* A request line reaches the file without a stop, once the writer thread's short wait is
 * over: a quiet daemon's log is current. */
static void test_async_idle_flush(void **state) {
    sink_t *s = *state;
    assert_int_equal(tg_log_async_start(256 * 1024), TG_OK);
    log_req("lonely", "R", 1);
    char *text = NULL;
    for (int i = 0; i < 2000; i++) { /* up to 2 s, normally about a millisecond */
        free(text);
        text = slurp(s, NULL);
        if (strstr(text, "lonely") != NULL) {
            break;
        }
        usleep(1000);
    }
    assert_non_null(strstr(text, "\"request_id\":\"lonely\""));
    free(text);
    tg_log_async_stop();
}

/* tg_open_regular: a regular file opens; a missing path, a directory and a FIFO with no
 * writer are refused, the FIFO at once rather than after a writer appears. */
static void test_open_regular(void **state) {
    (void)state;
    char dir[] = "/tmp/tg_open_regular.XXXXXX";
    char path[96];
    tg_diag_t d = {{0}};
    int fd = 7;
    assert_non_null(mkdtemp(dir));

    (void)snprintf(path, sizeof path, "%s/plain", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs("x", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(tg_open_regular(&fd, path, "test file", &d), TG_OK);
    char c = 0;
    assert_int_equal(read(fd, &c, 1), 1);
    assert_int_equal(c, 'x');
    assert_int_equal(close(fd), 0);
    assert_int_equal(unlink(path), 0);

    assert_int_equal(tg_open_regular(&fd, path, "test file", &d), TG_ERR_NOT_FOUND);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(d.msg, "cannot open test file"));

    assert_int_equal(tg_open_regular(&fd, dir, "test dir", &d), TG_ERR_IO);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(d.msg, "test dir is not a readable regular file"));

    (void)snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(tg_open_regular(&fd, path, "test fifo", NULL), TG_ERR_IO);
    assert_int_equal(fd, -1);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* tg_path_parent: the directory mkdir needs, for the shapes a --ledger value takes. */
static void test_path_parent(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"a/b", "a"}, {"a/b/", "a"}, {"a//b//", "a"},    {"/a", "/"},  {"/a/", "/"},
        {"a", "."},   {"a/", "."},   {"/a/b/c", "/a/b"}, {"./x", "."}, {"//", "/"},
    };
    char out[16];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(tg_path_parent(out, sizeof out, cases[i][0]), TG_OK);
        if (strcmp(out, cases[i][1]) != 0) {
            fail_msg("parent of \"%s\" is \"%s\", want \"%s\"", cases[i][0], out, cases[i][1]);
        }
    }
    char tiny[4];
    assert_int_equal(tg_path_parent(tiny, sizeof tiny, "abcd/e"), TG_ERR_LIMIT);
    assert_string_equal(tiny, "");
    assert_int_equal(tg_path_parent(tiny, sizeof tiny, "abc/e"), TG_OK);
    assert_string_equal(tiny, "abc");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_line, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_text_line, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_level_filter, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_async_keeps_every_line, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_async_backpressure, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_async_other_lines_flush, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_async_idle_flush, sink_setup, sink_teardown),
        cmocka_unit_test_setup_teardown(test_write_all, sink_setup, sink_teardown),
        cmocka_unit_test(test_open_regular),
        cmocka_unit_test(test_path_parent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
