/* canon.c — RFC 8785 canonical writer over a jansson tree, JCS strings, SHA-256 and hex. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon_int.h"
#include "trigguard/canon.h"
#include "trigguard/sha256.h"

/* Member entries sorted per object; this many live on the writer's stack (shared by all
 * nesting levels as a bump area), larger or more numerous objects take one heap block. */
#define TG_CANON_SCRATCH 512
/* In hashing mode the buffer is fed to SHA-256 and emptied once it holds this much. */
#define TG_CANON_FLUSH 4096
/* Objects up to this size are sorted by insertion (usually already in order); heapsort above. */
#define TG_CANON_INSERTION_MAX 16

typedef struct {
    const char *key;
    size_t klen;
    const json_t *val;
} tg_member_t;

typedef struct {
    tg_buf_t *out;
    tg_member_t *scratch;
    size_t scratch_used;
    tg_sha256_ctx_t *hs; /* non-NULL: stream into the hash */
    tg_diag_t *diag;
    json_malloc_t alloc;
    json_free_t release;
} tg_canon_ctx_t;

size_t tg_canon_utf8_seq(const unsigned char *p, size_t n, tg_err_t *err) {
    unsigned c = p[0];
    *err = TG_ERR_JSON_UTF8;
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xC2) { /* stray continuation byte, or C0/C1 (always overlong) */
        return 0;
    }
    if (c < 0xE0) {
        return (n >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c < 0xF0) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        if (c == 0xE0 && p[1] < 0xA0) { /* overlong */
            return 0;
        }
        if (c == 0xED && p[1] >= 0xA0) {
            *err = TG_ERR_JSON_SURROGATE;
            return 0;
        }
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90)) {
            return 0; /* overlong, or above U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* ASCII: 0 copies the byte as is, 'u' writes \u00xx, otherwise the character that follows
 * the backslash. Bytes >= 0x80 ('x' below) start a multi-byte sequence (or are invalid). */
/* clang-format off */
static const char tg_escape[128] = {
    ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
    [0x00] = 'u', [0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u',
    [0x06] = 'u', [0x07] = 'u', [0x0B] = 'u', [0x0E] = 'u', [0x0F] = 'u', [0x10] = 'u',
    [0x11] = 'u', [0x12] = 'u', [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u',
    [0x17] = 'u', [0x18] = 'u', [0x19] = 'u', [0x1A] = 'u', [0x1B] = 'u', [0x1C] = 'u',
    [0x1D] = 'u', [0x1E] = 'u', [0x1F] = 'u', ['"'] = '"', ['\\'] = '\\',
};
/* clang-format on */

#define TG_ONES UINT64_C(0x0101010101010101)
#define TG_HIGHS UINT64_C(0x8080808080808080)

/* Nonzero iff some byte of w is a control (< 0x20), '"', '\\' or non-ASCII (>= 0x80): the
 * classic "has a zero byte" / "has a byte less than n" word tricks, exact for "any byte". */
static inline uint64_t swar_special(uint64_t w) {
    uint64_t ctl = (w - TG_ONES * 0x20) & ~w;
    uint64_t q = w ^ (TG_ONES * '"');
    uint64_t bs = w ^ (TG_ONES * '\\');
    return (ctl | ((q - TG_ONES) & ~q) | ((bs - TG_ONES) & ~bs) | w) & TG_HIGHS;
}

/* Copies t (1..7) plain bytes from p to d if none is special; returns 0 (copying nothing
 * useful) otherwise. Two overlapping fixed-size loads cover every byte without reading past
 * p + t; the unused upper bytes of the word are padded with a plain 'a'. */
static inline int tail_copy(char *d, const unsigned char *p, size_t t) {
    uint64_t w;
    if (t >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + t - 4, 4);
        w = (uint64_t)a | (uint64_t)b << 32;
        if (swar_special(w)) {
            return 0;
        }
        memcpy(d, &a, 4);
        memcpy(d + t - 4, &b, 4);
        return 1;
    }
    if (t >= 2) {
        uint16_t a, b;
        memcpy(&a, p, 2);
        memcpy(&b, p + t - 2, 2);
        w = (uint64_t)a | (uint64_t)b << 16 | (TG_ONES * 'a') << 32;
        if (swar_special(w)) {
            return 0;
        }
        memcpy(d, &a, 2);
        memcpy(d + t - 2, &b, 2);
        return 1;
    }
    w = (uint64_t)p[0] | (TG_ONES * 'a') << 8;
    if (swar_special(w)) {
        return 0;
    }
    d[0] = (char)p[0];
    return 1;
}

tg_err_t tg_canon_string(tg_buf_t *out, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t start = out->len;
    tg_err_t rc;
    if (s == NULL && n > 0) {
        return TG_ERR_INVALID_ARG;
    }
    /* Invariant: capacity covers o + (bytes left) + closing quote + NUL, as raw bytes map 1:1.
     * The inline test is tg_buf_reserve's own (cap never exceeds max + 1). */
    if (n >= out->cap || out->cap - out->len < n + 3) {
        rc = tg_buf_reserve(out, n + 2);
        if (rc) {
            return rc;
        }
    }
    char *d = out->data;
    size_t o = start;
    d[o++] = '"';
    size_t i = 0;
    while (i < n) {
        /* Eight plain bytes (printable ASCII, no quote or backslash) at a time... */
        uint64_t w;
        while (n - i >= 8 && (memcpy(&w, p + i, 8), swar_special(w) == 0)) {
            memcpy(d + o, p + i, 8);
            o += 8;
            i += 8;
        }
        if (i == n) {
            break;
        }
        /* A short clean tail (most member names) in one go. */
        if (n - i < 8 && tail_copy(d + o, p + i, n - i)) {
            o += n - i;
            break;
        }
        /* ...then byte by byte through the word that holds something special (or the tail). */
        size_t stop = n - i >= 8 ? i + 8 : n;
        while (i < stop) {
            unsigned c = p[i];
            char e = c < 0x80 ? tg_escape[c] : 'x';
            if (e == 0) {
                d[o++] = (char)c;
                i++;
                continue;
            }
            if (e == 'x') {
                size_t k = tg_canon_utf8_seq(p + i, n - i, &rc);
                if (k == 0) {
                    goto fail;
                }
                memcpy(d + o, p + i, k);
                o += k;
                i += k;
                continue;
            }
            out->len = o;
            rc = tg_buf_reserve(out, (n - i) + 6); /* this escape (<= 6) + the rest + quote */
            if (rc) {
                goto fail;
            }
            d = out->data;
            d[o++] = '\\';
            d[o++] = e;
            if (e == 'u') {
                d[o++] = '0';
                d[o++] = '0';
                d[o++] = hex[c >> 4];
                d[o++] = hex[c & 0xF];
            }
            i++;
        }
    }
    d[o++] = '"';
    d[o] = '\0';
    out->len = o;
    return TG_OK;
fail:
    out->len = start;
    out->data[start] = '\0';
    return rc;
}

static size_t path_format_rec(char *dst, size_t cap, size_t o, const tg_jpath_t *p) {
    if (p == NULL) {
        if (o + 1 < cap) {
            dst[o++] = '$';
        }
        return o;
    }
    o = path_format_rec(dst, cap, o, p->up);
    if (p->key == NULL) {
        int w = snprintf(dst + o, cap - o, "[%zu]", p->index);
        if (w > 0) {
            o += (size_t)w < cap - o ? (size_t)w : cap - o - 1;
        }
        return o;
    }
    if (o + 1 < cap) {
        dst[o++] = '.';
    }
    /* Keys come from the peer: keep them printable and short so a log line stays one line. */
    for (size_t i = 0; i < p->klen && i < 32 && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)p->key[i];
        dst[o++] = (c > 0x20 && c < 0x7F && c != '"' && c != '\\') ? (char)c : '?';
    }
    if (p->klen > 32 && o + 3 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    return o;
}

void tg_canon_path_format(char *dst, size_t cap, const tg_jpath_t *p) {
    size_t o = path_format_rec(dst, cap, 0, p);
    dst[o] = '\0';
}

/* Orders names by UTF-16 code units. UTF-8 byte order equals code point order, which differs
 * from UTF-16 order in one place: U+E000..U+FFFF (lead bytes EE, EF) sort after the surrogate
 * pairs of U+10000.. (lead bytes F0..F4). At the first differing byte both strings are at the
 * same position of a sequence, so lifting EE/EF above F4 there gives UTF-16 order. */
static int member_cmp(const tg_member_t *a, const tg_member_t *b) {
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    const unsigned char *x = (const unsigned char *)a->key;
    const unsigned char *y = (const unsigned char *)b->key;
    size_t i = 0;
    while (i < n && x[i] == y[i]) {
        i++;
    }
    if (i == n) {
        return (a->klen > b->klen) - (a->klen < b->klen);
    }
    unsigned cx = x[i], cy = y[i];
    cx += (cx == 0xEE || cx == 0xEF) ? 0x100u : 0u;
    cy += (cy == 0xEE || cy == 0xEF) ? 0x100u : 0u;
    return cx < cy ? -1 : 1;
}

static void sift_down(tg_member_t *m, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) {
            return;
        }
        if (child + 1 < n && member_cmp(&m[child], &m[child + 1]) < 0) {
            child++;
        }
        if (member_cmp(&m[root], &m[child]) >= 0) {
            return;
        }
        tg_member_t t = m[root];
        m[root] = m[child];
        m[child] = t;
        root = child;
    }
}

/* In-place, allocation-free; names in one object are distinct, so stability is moot. */
static void members_sort(tg_member_t *m, size_t n) {
    if (n <= TG_CANON_INSERTION_MAX) {
        for (size_t i = 1; i < n; i++) {
            tg_member_t t = m[i];
            size_t j = i;
            while (j > 0 && member_cmp(&m[j - 1], &t) > 0) {
                m[j] = m[j - 1];
                j--;
            }
            m[j] = t;
        }
        return;
    }
    for (size_t i = n / 2; i-- > 0;) {
        sift_down(m, i, n);
    }
    for (size_t end = n; end-- > 1;) {
        tg_member_t t = m[0];
        m[0] = m[end];
        m[end] = t;
        sift_down(m, 0, end);
    }
}

static tg_err_t write_value(tg_canon_ctx_t *c, const json_t *v, size_t depth,
                            const tg_jpath_t *path);

/* tg_buf_putc without the call when there is room (cap <= max + 1 keeps the bound). */
static inline tg_err_t put_byte(tg_buf_t *b, char ch) {
    if (b->len + 2 <= b->cap) {
        b->data[b->len++] = ch;
        b->data[b->len] = '\0';
        return TG_OK;
    }
    return tg_buf_putc(b, ch);
}

static tg_err_t string_error(tg_canon_ctx_t *c, tg_err_t rc, const char *what,
                             const tg_jpath_t *path) {
    if (rc != TG_ERR_JSON_UTF8 && rc != TG_ERR_JSON_SURROGATE) {
        return tg_diag_set(c->diag, rc, "cannot write %s: %s", what, tg_strerror(rc));
    }
    char where[160];
    tg_canon_path_format(where, sizeof where, path);
    return tg_diag_set(c->diag, rc, "%s in %s at %s", tg_strerror(rc), what, where);
}

static tg_err_t write_object(tg_canon_ctx_t *c, const json_t *v, size_t depth,
                             const tg_jpath_t *path) {
    size_t n = json_object_size(v);
    tg_member_t *m;
    tg_member_t *heap = NULL;
    tg_err_t rc;
    if (n <= TG_CANON_SCRATCH - c->scratch_used) {
        m = c->scratch + c->scratch_used;
        c->scratch_used += n;
    } else {
        /* jansson's allocator, so json_set_alloc_funcs fault injection reaches this too. */
        json_get_alloc_funcs(&c->alloc, &c->release);
        heap = n <= SIZE_MAX / sizeof *heap ? c->alloc(n * sizeof *heap) : NULL;
        if (heap == NULL) {
            return tg_diag_set(c->diag, TG_ERR_NOMEM, "out of memory sorting %zu members", n);
        }
        m = heap;
    }
    size_t k = 0;
    /* jansson's iterator API takes a non-const object but does not modify it. */
    for (void *it = json_object_iter((json_t *)(uintptr_t)v); it != NULL && k < n;
         it = json_object_iter_next((json_t *)(uintptr_t)v, it)) {
        m[k].key = json_object_iter_key(it);
        m[k].klen = json_object_iter_key_len(it);
        m[k].val = json_object_iter_value(it);
        k++;
    }
    members_sort(m, k);
    rc = put_byte(c->out, '{');
    for (size_t i = 0; rc == TG_OK && i < k; i++) {
        tg_jpath_t step = {path, m[i].key, m[i].klen, 0};
        if (i > 0) {
            rc = put_byte(c->out, ',');
            if (rc) {
                break;
            }
        }
        rc = tg_canon_string(c->out, m[i].key, m[i].klen);
        if (rc) {
            rc = string_error(c, rc, "a member name", &step);
            break;
        }
        rc = put_byte(c->out, ':');
        if (rc) {
            break;
        }
        rc = write_value(c, m[i].val, depth, &step);
    }
    if (rc == TG_OK) {
        rc = put_byte(c->out, '}');
    }
    if (heap != NULL) {
        c->release(heap);
    } else {
        c->scratch_used -= n;
    }
    return rc;
}

static tg_err_t write_array(tg_canon_ctx_t *c, const json_t *v, size_t depth,
                            const tg_jpath_t *path) {
    size_t n = json_array_size(v);
    tg_err_t rc = put_byte(c->out, '[');
    for (size_t i = 0; rc == TG_OK && i < n; i++) {
        tg_jpath_t step = {path, NULL, 0, i};
        if (i > 0) {
            rc = put_byte(c->out, ',');
            if (rc) {
                break;
            }
        }
        rc = write_value(c, json_array_get(v, i), depth, &step);
    }
    if (rc == TG_OK) {
        rc = put_byte(c->out, ']');
    }
    return rc;
}

static tg_err_t write_number(tg_canon_ctx_t *c, double d, const tg_jpath_t *path) {
    char num[TG_CANON_NUMBER_MAX];
    size_t len;
    tg_err_t rc = tg_canon_number(num, &len, d);
    if (rc) {
        char where[160];
        tg_canon_path_format(where, sizeof where, path);
        return tg_diag_set(c->diag, rc, "number at %s is NaN or infinite", where);
    }
    return tg_buf_append(c->out, num, len);
}

static tg_err_t write_value(tg_canon_ctx_t *c, const json_t *v, size_t depth,
                            const tg_jpath_t *path) {
    tg_err_t rc;
    if (v == NULL) {
        char where[160];
        tg_canon_path_format(where, sizeof where, path);
        return tg_diag_set(c->diag, TG_ERR_INVALID_ARG, "NULL JSON value at %s", where);
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        if (depth >= TG_CANON_MAX_DEPTH) {
            char where[160];
            tg_canon_path_format(where, sizeof where, path);
            return tg_diag_set(c->diag, TG_ERR_JSON_DEPTH, "nesting deeper than %d levels at %s",
                               TG_CANON_MAX_DEPTH, where);
        }
        rc = json_is_object(v) ? write_object(c, v, depth + 1, path)
                               : write_array(c, v, depth + 1, path);
        break;
    case JSON_STRING:
        rc = tg_canon_string(c->out, json_string_value(v), json_string_length(v));
        if (rc) {
            rc = string_error(c, rc, "a string", path);
        }
        break;
    case JSON_INTEGER:
        rc = write_number(c, (double)json_integer_value(v), path);
        break;
    case JSON_REAL:
        rc = write_number(c, json_real_value(v), path);
        break;
    case JSON_TRUE:
        rc = tg_buf_append(c->out, "true", 4);
        break;
    case JSON_FALSE:
        rc = tg_buf_append(c->out, "false", 5);
        break;
    case JSON_NULL:
        rc = tg_buf_append(c->out, "null", 4);
        break;
    default:
        rc = tg_diag_set(c->diag, TG_ERR_JSON_TYPE, "unknown jansson type %d", (int)json_typeof(v));
        break;
    }
    if (rc == TG_OK && c->hs != NULL && c->out->len >= TG_CANON_FLUSH) {
        tg_sha256_update(c->hs, c->out->data, c->out->len);
        tg_buf_reset(c->out);
    }
    return rc;
}

static tg_err_t canon_run(tg_buf_t *out, const json_t *v, tg_sha256_ctx_t *hs, tg_diag_t *diag) {
    tg_member_t scratch[TG_CANON_SCRATCH];
    tg_canon_ctx_t c = {out, scratch, 0, hs, diag, NULL, NULL};
    size_t start = out->len;
    tg_err_t rc = write_value(&c, v, 0, NULL);
    if (rc == TG_ERR_LIMIT || rc == TG_ERR_NOMEM) {
        (void)tg_diag_set(diag, rc, "canonical output: %s", tg_strerror(rc));
    }
    if (rc && out->data != NULL) {
        out->len = start <= out->len ? start : 0;
        out->data[out->len] = '\0';
    }
    return rc;
}

tg_err_t tg_canon_write(tg_buf_t *out, const json_t *v, tg_diag_t *diag) {
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "NULL output buffer");
    }
    return canon_run(out, v, NULL, diag);
}

tg_err_t tg_canon_sha256(uint8_t out[32], const json_t *v, tg_diag_t *diag) {
    tg_sha256_ctx_t hs;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_sha256_init(&hs);
    tg_err_t rc = canon_run(&b, v, &hs, diag);
    if (rc == TG_OK) {
        tg_sha256_update(&hs, b.data, b.len);
        tg_sha256_final(&hs, out);
    } else {
        memset(out, 0, 32);
    }
    tg_buf_free(&b);
    return rc;
}

void tg_hex(char *out, const uint8_t *in, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0xF];
    }
    out[2 * n] = '\0';
}

static int hex_val(char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

tg_err_t tg_unhex(uint8_t *out, size_t n, const char *hex, size_t hex_len) {
    if (hex == NULL || n > SIZE_MAX / 2 || hex_len != 2 * n) {
        return TG_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        int hi = hex_val(hex[2 * i]);
        int lo = hex_val(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return TG_ERR_INVALID_ARG;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return TG_OK;
}
