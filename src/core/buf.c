/* buf.c — bounded growable byte buffer. */
#include "trigguard/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_buf_init(tg_buf_t *b, size_t max) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : TG_BUF_DEFAULT_MAX;
}

tg_err_t tg_buf_reserve(tg_buf_t *b, size_t extra) {
    size_t max = b->max ? b->max : TG_BUF_DEFAULT_MAX;
    if (extra > max || b->len > max - extra) {
        return TG_ERR_LIMIT;
    }
    size_t need = b->len + extra + 1; /* + NUL */
    if (need <= b->cap) {
        return TG_OK;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    if (cap > max + 1) {
        cap = max + 1;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        return TG_ERR_NOMEM;
    }
    b->data = p;
    b->cap = cap;
    return TG_OK;
}

tg_err_t tg_buf_append(tg_buf_t *b, const void *p, size_t n) {
    tg_err_t rc = tg_buf_reserve(b, n);
    if (rc) {
        return rc;
    }
    if (n) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
    return TG_OK;
}

tg_err_t tg_buf_puts(tg_buf_t *b, const char *s) { return tg_buf_append(b, s, strlen(s)); }

tg_err_t tg_buf_putc(tg_buf_t *b, char c) { return tg_buf_append(b, &c, 1); }

/* One formatting pass when the output fits the spare capacity (the common case once a
 * buffer has grown); a measuring pass and a second one only when it does not. */
tg_err_t tg_buf_printf(tg_buf_t *b, const char *fmt, ...) {
    va_list ap;
    size_t room = b->cap > b->len ? b->cap - b->len : 0; /* counts the NUL's byte */
    va_start(ap, fmt);
    int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
        b->len += (size_t)n; /* fits, so len stays below cap <= max + 1 */
        return TG_OK;
    }
    if (room) {
        b->data[b->len] = '\0'; /* undo the partial write: the buffer is unchanged */
    }
    if (n < 0) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t rc = tg_buf_reserve(b, (size_t)n);
    if (rc) {
        return rc;
    }
    va_start(ap, fmt);
    (void)vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return TG_OK;
}

size_t tg_fmt_i64(char out[TG_I64_TEXT_MAX], int64_t v) {
    char tmp[TG_I64_TEXT_MAX];
    size_t i = sizeof tmp;
    /* Digits right to left, on the magnitude as unsigned so INT64_MIN does not overflow. */
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m != 0);
    if (v < 0) {
        tmp[--i] = '-';
    }
    size_t n = sizeof tmp - i;
    memcpy(out, tmp + i, n);
    out[n] = '\0';
    return n;
}

tg_err_t tg_buf_put_i64(tg_buf_t *b, int64_t v) {
    char text[TG_I64_TEXT_MAX];
    size_t n = tg_fmt_i64(text, v);
    return tg_buf_append(b, text, n);
}

tg_err_t tg_buf_hex(tg_buf_t *b, const uint8_t *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    if (n > SIZE_MAX / 2) {
        return TG_ERR_LIMIT;
    }
    tg_err_t rc = tg_buf_reserve(b, 2 * n);
    if (rc) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        b->data[b->len++] = digits[p[i] >> 4];
        b->data[b->len++] = digits[p[i] & 0xf];
    }
    b->data[b->len] = '\0';
    return TG_OK;
}

void tg_buf_reset(tg_buf_t *b) {
    b->len = 0;
    if (b->data) {
        b->data[0] = '\0';
    }
}

void tg_buf_free(tg_buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
