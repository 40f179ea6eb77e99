/* checkpoint.c — C2SP tlog-checkpoint bodies: parse and format. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tlog_int.h"
#include "trigguard/note.h"

static int origin_ok(const char *o, size_t n) {
    return o != NULL && n > 0 && n <= TG_CHECKPOINT_ORIGIN_MAX && tlog_text_ok(o, n, 0);
}

tg_err_t tg_checkpoint_parse(tg_checkpoint_t *c, const char *text, size_t n) {
    memset(c, 0, sizeof *c);
    if (text == NULL || n == 0 || n > TG_NOTE_MAX_BYTES || text[n - 1] != '\n') {
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    /* line 1: origin */
    const char *nl = memchr(text, '\n', n);
    size_t olen = (size_t)(nl - text);
    if (!origin_ok(text, olen)) {
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    size_t at = olen + 1;
    /* line 2: the size, decimal, no sign, no leading zeros, within uint64_t */
    uint64_t size = 0;
    size_t start = at;
    while (at < n && text[at] >= '0' && text[at] <= '9') {
        unsigned d = (unsigned)(text[at] - '0');
        if (size > (UINT64_MAX - d) / 10u) {
            return TG_ERR_CHECKPOINT_MALFORMED;
        }
        size = size * 10u + d;
        at++;
    }
    if (at == start || (at - start > 1 && text[start] == '0') || at >= n || text[at] != '\n') {
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    at++;
    /* line 3: the root, canonical base64 of exactly 32 bytes */
    if (n - at < 45 || text[at + 44] != '\n') {
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    size_t got = 0;
    if (tlog_b64_decode(c->root, sizeof c->root, &got, text + at, 44) != TG_OK || got != 32) {
        memset(c, 0, sizeof *c);
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    at += 45;
    /* extension lines: each non-empty note text */
    size_t ext = at;
    while (at < n) {
        const char *e = memchr(text + at, '\n', n - at);
        size_t el = (size_t)(e - (text + at));
        if (el == 0 || !tlog_text_ok(text + at, el, 0)) {
            memset(c, 0, sizeof *c);
            return TG_ERR_CHECKPOINT_MALFORMED;
        }
        at += el + 1;
    }
    memcpy(c->origin, text, olen);
    c->origin[olen] = '\0';
    c->origin_len = olen;
    c->size = size;
    c->ext = n > ext ? text + ext : NULL;
    c->ext_len = n - ext;
    return TG_OK;
}

tg_err_t tg_checkpoint_format(char *out, size_t cap, size_t *len, const char *origin,
                              size_t origin_len, uint64_t size, const uint8_t root[32]) {
    char b64[44];
    if (!origin_ok(origin, origin_len)) {
        return TG_ERR_CHECKPOINT_MALFORMED;
    }
    tlog_b64_encode(b64, root, 32);
    int w = snprintf(out, cap, "%.*s\n%" PRIu64 "\n%.44s\n", (int)origin_len, origin, size, b64);
    if (w < 0 || (size_t)w >= cap) {
        return TG_ERR_BUFFER_TOO_SMALL;
    }
    if (len != NULL) {
        *len = (size_t)w;
    }
    return TG_OK;
}
