/* test_buf.c — the bounded buffer: growth, the max bound, and the two formatters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/buf.h"

/* tg_buf_printf writes in one pass into spare room, grows when the text does not fit, and
 * agrees with snprintf either way. */
static void test_printf_growth(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    char want[8192];
    size_t wl = 0;
    for (int i = 0; i < 400; i++) {
        /* lengths vary so some appends fit the spare room and others need a grow */
        assert_int_equal(tg_buf_printf(&b, "[%d:%.*s]", i, i % 23, "abcdefghijklmnopqrstuvw"),
                         TG_OK);
        int n = snprintf(want + wl, sizeof want - wl, "[%d:%.*s]", i, i % 23,
                         "abcdefghijklmnopqrstuvw");
        assert_true(n > 0 && (size_t)n < sizeof want - wl);
        wl += (size_t)n;
        assert_int_equal(b.len, wl);
        assert_true(b.len < b.cap);
        assert_int_equal(b.data[b.len], '\0');
    }
    assert_memory_equal(b.data, want, wl);
    /* an empty format appends nothing */
    assert_int_equal(tg_buf_printf(&b, "%s", ""), TG_OK);
    assert_int_equal(b.len, wl);
    tg_buf_free(&b);
}

/* Past max, tg_buf_printf fails with TG_ERR_LIMIT and leaves the buffer as it was, even
 * when the text was partly written into the spare room before the check. */
static void test_printf_limit(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 40);
    assert_int_equal(tg_buf_puts(&b, "0123456789"), TG_OK); /* cap is now 41 (max + 1) */
    assert_int_equal(b.cap, 41);
    assert_int_equal(tg_buf_printf(&b, "%s", "abcdefghijklmnopqrstuvwxyz0123456789"), TG_ERR_LIMIT);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");
    /* exactly up to max fits */
    assert_int_equal(tg_buf_printf(&b, "%030d", 7), TG_OK);
    assert_int_equal(b.len, 40);
    assert_int_equal(tg_buf_printf(&b, "%c", 'x'), TG_ERR_LIMIT);
    assert_int_equal(b.len, 40);
    assert_int_equal(b.data[40], '\0');
    assert_int_equal(tg_buf_put_i64(&b, 1), TG_ERR_LIMIT);
    assert_int_equal(b.len, 40);
    tg_buf_free(&b);
}

/* tg_buf_put_i64 and tg_fmt_i64 write what %lld writes, including both ends of the range
 * (INT64_MIN fills TG_I64_TEXT_MAX exactly). */
static void test_put_i64(void **state) {
    (void)state;
    static const int64_t fixed[] = {
        0,         1,         -1,        9,         10,           -10, 999, 1000, 1764480010123,
        INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    tg_buf_t b;
    tg_buf_init(&b, 0);
    char want[32];
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        tg_buf_reset(&b);
        assert_int_equal(tg_buf_put_i64(&b, fixed[i]), TG_OK);
        (void)snprintf(want, sizeof want, "%lld", (long long)fixed[i]);
        assert_string_equal(b.data, want);
        /* the same text from tg_fmt_i64, NUL-terminated, with its length */
        char text[TG_I64_TEXT_MAX];
        memset(text, 'x', sizeof text);
        assert_int_equal(tg_fmt_i64(text, fixed[i]), strlen(want));
        assert_string_equal(text, want);
    }
    /* every power of ten and its neighbours, both signs */
    for (int64_t p = 1; p <= INT64_MAX / 10; p *= 10) {
        for (int64_t d = -1; d <= 1; d++) {
            int64_t vs[2] = {p + d, -(p + d)};
            for (int k = 0; k < 2; k++) {
                tg_buf_reset(&b);
                assert_int_equal(tg_buf_put_i64(&b, vs[k]), TG_OK);
                (void)snprintf(want, sizeof want, "%lld", (long long)vs[k]);
                assert_string_equal(b.data, want);
            }
        }
    }
    tg_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_printf_growth),
        cmocka_unit_test(test_printf_limit),
        cmocka_unit_test(test_put_i64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
