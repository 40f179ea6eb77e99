/* buf.h — a growable byte buffer with a hard upper bound.
 *
 * Ownership: the caller owns the tg_buf_t (usually on its stack); the buffer owns
 * `data`, released by tg_buf_free (NULL-safe, idempotent). `data` is always
 * NUL-terminated after a successful append so it can be handed to C string APIs;
 * `len` never counts that NUL. A buffer never grows past `max` bytes
 * (TG_ERR_LIMIT), so every output built with it is bounded.
 * Thread safety: none; one buffer belongs to one thread at a time.
 */
#ifndef TRIGGUARD_BUF_H
#define TRIGGUARD_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

typedef struct tg_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max; /* 0 means TG_BUF_DEFAULT_MAX */
} tg_buf_t;

#define TG_BUF_DEFAULT_MAX ((size_t)16 * 1024 * 1024)

/* A borrowed text with its length (not necessarily NUL-terminated); ptr NULL = absent. For
 * writers that take many strings at once (the decision body, a record's meta). */
typedef struct tg_text {
    const char *ptr;
    size_t len;
} tg_text_t;

/* Empty buffer that may grow to `max` bytes (0 = default). No allocation yet. */
void tg_buf_init(tg_buf_t *b, size_t max);

/* Makes room for `extra` more bytes (+ NUL). TG_ERR_LIMIT past max, TG_ERR_NOMEM. */
tg_err_t tg_buf_reserve(tg_buf_t *b, size_t extra) TG_MUST_USE;

/* Appends n bytes. Errors as tg_buf_reserve; on error the buffer is unchanged. */
tg_err_t tg_buf_append(tg_buf_t *b, const void *p, size_t n) TG_MUST_USE;

/* Appends a NUL-terminated string. */
tg_err_t tg_buf_puts(tg_buf_t *b, const char *s) TG_MUST_USE;

/* Appends one byte. */
tg_err_t tg_buf_putc(tg_buf_t *b, char c) TG_MUST_USE;

/* printf-style append. TG_ERR_INVALID_ARG on a formatting error. Errors leave the buffer
 * unchanged, as tg_buf_append does. */
tg_err_t tg_buf_printf(tg_buf_t *b, const char *fmt, ...) TG_MUST_USE TG_PRINTF(2, 3);

/* Room for the decimal text of any int64_t ("-9223372036854775808") and a NUL. */
#define TG_I64_TEXT_MAX 21

/* Writes the decimal text of v ("-12", "0"), as printf's %lld writes it, without printf's
 * cost, NUL-terminated, into out; returns its length (without the NUL). Thread-safe. */
size_t tg_fmt_i64(char out[TG_I64_TEXT_MAX], int64_t v);

/* Appends tg_fmt_i64's text of v. Errors as tg_buf_append. */
tg_err_t tg_buf_put_i64(tg_buf_t *b, int64_t v) TG_MUST_USE;

/* Lowercase hex of n bytes. */
tg_err_t tg_buf_hex(tg_buf_t *b, const uint8_t *p, size_t n) TG_MUST_USE;

/* Length back to 0, keeps the allocation. */
void tg_buf_reset(tg_buf_t *b);

/* Releases the allocation; the buffer may be reused after tg_buf_init. */
void tg_buf_free(tg_buf_t *b);

#endif /* TRIGGUARD_BUF_H */
