/* test_io.c — tg_read_file and tg_read_fd, the one bounded reader of the files the operator
 * names: every error it returns, the cap at max and max + 1, what it refuses without
 * blocking (a FIFO, a directory), and its allocations failing. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/io.h"

#include "support/fail_alloc.h"

typedef struct {
    char dir[64];
    char path[128];
} fixture_t;

static int setup(void **state) {
    fixture_t *fx = calloc(1, sizeof *fx);
    if (fx == NULL) {
        return -1;
    }
    (void)snprintf(fx->dir, sizeof fx->dir, "/tmp/tg_test_io.XXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    (void)snprintf(fx->path, sizeof fx->path, "%s/file", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture_t *fx = *state;
    (void)unlink(fx->path);
    (void)rmdir(fx->dir);
    free(fx);
    return 0;
}

/* Writes n bytes of c (a pattern when c is 0) to path, mode 0600. */
static void write_file(const char *path, size_t n, char c) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    char chunk[4096];
    for (size_t i = 0; i < sizeof chunk; i++) {
        chunk[i] = c != 0 ? c : (char)('a' + i % 26);
    }
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof chunk ? n - done : sizeof chunk;
        assert_int_equal(write(fd, chunk, k), (ssize_t)k);
        done += k;
    }
    assert_int_equal(close(fd), 0);
}

static void expect_zeroed(const tg_file_t *f) {
    assert_null(f->data);
    assert_int_equal(f->len, 0);
    assert_int_equal(f->mode, 0);
    assert_false(f->secret);
}

/* A regular file comes back whole, NUL-terminated, with its mode; tg_file_free zeroes. */
static void test_reads_whole_file(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    write_file(fx->path, 10000, 0);
    assert_int_equal(chmod(fx->path, 0640), 0);
    assert_int_equal(tg_read_file(&f, fx->path, 20000, "test file", 0, &d), TG_OK);
    assert_int_equal(f.len, 10000);
    assert_int_equal(f.data[f.len], '\0');
    assert_int_equal(f.data[0], 'a');
    assert_int_equal(f.data[9999], (char)('a' + (9999 % 4096) % 26));
    assert_true(S_ISREG(f.mode));
    assert_int_equal(f.mode & 07777, 0640);
    assert_false(f.secret);
    tg_file_free(&f);
    expect_zeroed(&f);
    tg_file_free(&f); /* a zeroed one again, and NULL: no-ops */
    tg_file_free(NULL);

    /* an empty file is an empty text, also with a cap of 0 */
    write_file(fx->path, 0, 'x');
    assert_int_equal(tg_read_file(&f, fx->path, 0, "test file", TG_READ_SECRET, &d), TG_OK);
    assert_int_equal(f.len, 0);
    assert_int_equal(f.data[0], '\0');
    assert_true(f.secret);
    tg_file_free(&f);
}

/* Exactly cap bytes is accepted; cap + 1 is TG_ERR_LIMIT with a message naming the cap. */
static void test_cap(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    static const size_t caps[] = {1, 4095, 4096, 4097, 65536};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        size_t cap = caps[i];
        write_file(fx->path, cap, 'k');
        assert_int_equal(tg_read_file(&f, fx->path, cap, "capped file", 0, &d), TG_OK);
        assert_int_equal(f.len, cap);
        tg_file_free(&f);

        write_file(fx->path, cap + 1, 'k');
        for (unsigned flags = 0; flags <= TG_READ_SECRET; flags++) {
            assert_int_equal(tg_read_file(&f, fx->path, cap, "capped file", flags, &d),
                             TG_ERR_LIMIT);
            expect_zeroed(&f);
            char want[96];
            (void)snprintf(want, sizeof want, "capped file is larger than %zu bytes", cap);
            assert_string_equal(d.msg, want);
        }
    }
    /* a cap of 0 refuses any byte */
    write_file(fx->path, 1, 'k');
    assert_int_equal(tg_read_file(&f, fx->path, 0, "capped file", 0, &d), TG_ERR_LIMIT);
}

/* TG_ERR_NOT_FOUND, and TG_ERR_IO for what cannot be opened or is not a regular file (a
 * directory, a FIFO), each with the label. */
static void test_open_errors(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    char missing[160];
    (void)snprintf(missing, sizeof missing, "%s/missing", fx->dir);
    assert_int_equal(tg_read_file(&f, missing, 100, "the missing file", 0, &d), TG_ERR_NOT_FOUND);
    expect_zeroed(&f);
    assert_non_null(strstr(d.msg, "cannot open the missing file"));

    assert_int_equal(tg_read_file(&f, fx->dir, 100, "a directory", 0, &d), TG_ERR_IO);
    expect_zeroed(&f);
    assert_string_equal(d.msg, "a directory is not a readable regular file");

    /* a path through a regular file: ENOTDIR is an I/O error, not "not found" */
    write_file(fx->path, 1, 'x');
    char through[160];
    (void)snprintf(through, sizeof through, "%s/below", fx->path);
    assert_int_equal(tg_read_file(&f, through, 100, "below a file", 0, &d), TG_ERR_IO);
    assert_non_null(strstr(d.msg, "cannot open below a file"));

    /* a FIFO with no writer is refused at once: a blocking open would hang startup or a
     * reload with the shutdown signals blocked */
    (void)snprintf(through, sizeof through, "%s/fifo", fx->dir);
    assert_int_equal(mkfifo(through, 0600), 0);
    assert_int_equal(tg_read_file(&f, through, 100, "the fifo", 0, &d), TG_ERR_IO);
    expect_zeroed(&f);
    assert_string_equal(d.msg, "the fifo is not a readable regular file");
    assert_int_equal(unlink(through), 0);
}

/* tg_read_fd reads what a pipe holds, growing past the first buffer, and is bounded too;
 * a read error (a directory's descriptor) and a bad descriptor are TG_ERR_IO. */
static void test_read_fd(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    for (unsigned flags = 0; flags <= TG_READ_SECRET; flags++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        char chunk[20000];
        for (size_t i = 0; i < sizeof chunk; i++) {
            chunk[i] = (char)('A' + i % 26);
        }
        assert_int_equal(write(p[1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
        assert_int_equal(close(p[1]), 0);
        assert_int_equal(tg_read_fd(&f, p[0], sizeof chunk, "the pipe", flags, &d), TG_OK);
        assert_int_equal(f.len, sizeof chunk);
        assert_memory_equal(f.data, chunk, sizeof chunk);
        assert_int_equal(f.data[f.len], '\0');
        assert_true(S_ISFIFO(f.mode));
        tg_file_free(&f);
        assert_int_equal(close(p[0]), 0);

        assert_int_equal(pipe(p), 0);
        assert_int_equal(write(p[1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
        assert_int_equal(close(p[1]), 0);
        assert_int_equal(tg_read_fd(&f, p[0], sizeof chunk - 1, "the pipe", flags, &d),
                         TG_ERR_LIMIT);
        expect_zeroed(&f);
        assert_string_equal(d.msg, "the pipe is larger than 19999 bytes");
        assert_int_equal(close(p[0]), 0);
    }

    int dfd = open(fx->dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(tg_read_fd(&f, dfd, 100, "a directory", TG_READ_SECRET, &d), TG_ERR_IO);
    expect_zeroed(&f);
    assert_non_null(strstr(d.msg, "cannot read a directory: "));
    assert_int_equal(close(dfd), 0);

    assert_int_equal(tg_read_fd(&f, -1, 100, "no descriptor", 0, &d), TG_ERR_IO);
    assert_non_null(strstr(d.msg, "cannot read no descriptor"));
}

static void test_invalid_args(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    write_file(fx->path, 1, 'x');
    assert_int_equal(tg_read_file(NULL, fx->path, 10, "x", 0, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_read_file(&f, NULL, 10, "x", 0, &d), TG_ERR_INVALID_ARG);
    expect_zeroed(&f);
    assert_int_equal(tg_read_file(&f, fx->path, 10, NULL, 0, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_read_file(&f, fx->path, TG_READ_CAP_MAX + 1, "x", 0, &d),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_read_fd(NULL, 0, 10, "x", 0, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_read_fd(&f, 0, 10, NULL, 0, &d), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_read_fd(&f, 0, TG_READ_CAP_MAX + 1, "x", 0, &d), TG_ERR_INVALID_ARG);
    /* the largest cap is taken (the file is small: nothing near it is allocated) */
    assert_int_equal(tg_read_file(&f, fx->path, TG_READ_CAP_MAX, "x", 0, &d), TG_OK);
    tg_file_free(&f);
}

/* The first buffer, and the larger one a growing input needs, failing: TG_ERR_NOMEM with
 * the label, nothing returned, nothing leaked (ASan), with and without TG_READ_SECRET. */
static void test_nomem(void **state) {
    fixture_t *fx = *state;
    tg_diag_t d = {{0}};
    tg_file_t f;
    write_file(fx->path, 100, 'x');
    for (unsigned flags = 0; flags <= TG_READ_SECRET; flags++) {
        tg_fail_alloc_after(0);
        assert_int_equal(tg_read_file(&f, fx->path, 1000, "test file", flags, &d), TG_ERR_NOMEM);
        tg_fail_alloc_off();
        expect_zeroed(&f);
        assert_string_equal(d.msg, "out of memory reading test file");

        /* a pipe says nothing of its size: 20000 bytes outgrow the first buffer */
        int p[2];
        char chunk[20000];
        memset(chunk, 'p', sizeof chunk);
        assert_int_equal(pipe(p), 0);
        assert_int_equal(write(p[1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
        assert_int_equal(close(p[1]), 0);
        long before = tg_fail_alloc_injected();
        tg_fail_alloc_after(1);
        assert_int_equal(tg_read_fd(&f, p[0], sizeof chunk, "the pipe", flags, &d), TG_ERR_NOMEM);
        tg_fail_alloc_off();
        assert_int_equal(tg_fail_alloc_injected() - before, 1);
        expect_zeroed(&f);
        assert_string_equal(d.msg, "out of memory reading the pipe");
        assert_int_equal(close(p[0]), 0);
    }
}

/* The memory a default is sized from: MemTotal, a smaller cgroup v2 limit, and every text
 * that is not one of those read as unknown. */
static void test_memory_parse(void **state) {
    (void)state;
    const char *mi = "MemTotal:       24535716 kB\nMemFree:        1000 kB\n";
    assert_int_equal(tg_memory_parse(mi, NULL), UINT64_C(24535716) * 1024);
    assert_int_equal(tg_memory_parse(mi, "max\n"), UINT64_C(24535716) * 1024);
    assert_int_equal(tg_memory_parse(mi, "2147483648\n"), UINT64_C(2147483648));
    /* a limit above the machine's memory does not raise it */
    assert_int_equal(tg_memory_parse(mi, "99999999999999\n"), UINT64_C(24535716) * 1024);
    /* a limit alone */
    assert_int_equal(tg_memory_parse(NULL, "1073741824"), UINT64_C(1073741824));
    assert_int_equal(tg_memory_parse(NULL, NULL), 0);
    assert_int_equal(tg_memory_parse("MemFree: 5 kB\n", NULL), 0);
    assert_int_equal(tg_memory_parse("MemTotal: 5 MB\n", NULL), 0);
    assert_int_equal(tg_memory_parse("MemTotal: kB\n", NULL), 0);
    assert_int_equal(tg_memory_parse("MemTotal: 99999999999999999999 kB\n", NULL), 0);
    assert_int_equal(tg_memory_parse(mi, "0\n"), UINT64_C(24535716) * 1024);
    assert_int_equal(tg_memory_parse(mi, "12abc"), UINT64_C(24535716) * 1024);
    assert_int_equal(tg_memory_parse(mi, "-5"), UINT64_C(24535716) * 1024);
    /* this machine's own answer is either unknown or a plausible size */
    uint64_t here = tg_memory_available();
    assert_true(here == 0 || here >= (UINT64_C(16) << 20));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_whole_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nomem, setup, teardown),
        cmocka_unit_test(test_memory_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
