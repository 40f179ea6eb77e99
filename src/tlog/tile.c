/* tile.c — C2SP tlog-tiles paths: format, strict parse, and which tiles a tree has. */
#include <stdio.h>
#include <string.h>

#include "trigguard/tlog.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

tg_err_t tg_tlog_tile_path(char out[TG_TLOG_TILE_PATH_MAX], size_t *len, const tg_tlog_tile_t *t) {
    if (t->level > TG_TLOG_TILE_MAX_LEVEL || t->width < 1 || t->width > TG_TLOG_TILE_WIDTH ||
        (t->entries && t->level != 0)) {
        return TG_ERR_INVALID_ARG;
    }
    /* N in groups of three digits, most significant first; all but the last get an x */
    unsigned groups[7];
    unsigned ng = 0;
    uint64_t n = t->index;
    do {
        groups[ng++] = (unsigned)(n % 1000u);
        n /= 1000u;
    } while (n != 0);
    size_t at = 0;
    int w = t->entries ? snprintf(out, TG_TLOG_TILE_PATH_MAX, "tile/entries/")
                       : snprintf(out, TG_TLOG_TILE_PATH_MAX, "tile/%u/", t->level);
    at += (size_t)w;
    for (unsigned i = ng; i > 1; i--) {
        w = snprintf(out + at, TG_TLOG_TILE_PATH_MAX - at, "x%03u/", groups[i - 1]);
        at += (size_t)w;
    }
    w = snprintf(out + at, TG_TLOG_TILE_PATH_MAX - at, "%03u", groups[0]);
    at += (size_t)w;
    if (t->width < TG_TLOG_TILE_WIDTH) {
        w = snprintf(out + at, TG_TLOG_TILE_PATH_MAX - at, ".p/%u", t->width);
        at += (size_t)w;
    }
    if (len != NULL) {
        *len = at;
    }
    return TG_OK;
}

/* A decimal without leading zeros ("0" itself allowed when zero_ok) at p[*i..n), at most
 * max; advances *i. */
static int parse_small(const char *p, size_t n, size_t *i, unsigned max, int zero_ok,
                       unsigned *out) {
    size_t start = *i;
    unsigned v = 0;
    while (*i < n && is_digit(p[*i])) {
        v = v * 10u + (unsigned)(p[*i] - '0');
        if (v > max) {
            return 0;
        }
        (*i)++;
    }
    size_t digits = *i - start;
    if (digits == 0 || (digits > 1 && p[start] == '0') || (v == 0 && !zero_ok)) {
        return 0;
    }
    *out = v;
    return 1;
}

tg_err_t tg_tlog_tile_parse(tg_tlog_tile_t *t, const char *path, size_t n) {
    static const char prefix[] = "tile/";
    static const char entries[] = "entries/";
    tg_tlog_tile_t r = {.entries = false, .level = 0, .index = 0, .width = TG_TLOG_TILE_WIDTH};
    size_t i = sizeof prefix - 1;
    memset(t, 0, sizeof *t);
    if (path == NULL || n < i || memcmp(path, prefix, i) != 0) {
        return TG_ERR_TLOG_PATH;
    }
    if (n - i >= sizeof entries - 1 && memcmp(path + i, entries, sizeof entries - 1) == 0) {
        r.entries = true;
        i += sizeof entries - 1;
    } else {
        if (!parse_small(path, n, &i, TG_TLOG_TILE_MAX_LEVEL, 1, &r.level) || i >= n ||
            path[i] != '/') {
            return TG_ERR_TLOG_PATH;
        }
        i++;
    }
    /* N: ("x" ddd "/")* ddd, no redundant leading x000, within uint64_t */
    unsigned ng = 0;
    for (;;) {
        int more = i < n && path[i] == 'x';
        if (more) {
            i++;
        }
        if (n - i < 3 || !is_digit(path[i]) || !is_digit(path[i + 1]) || !is_digit(path[i + 2])) {
            return TG_ERR_TLOG_PATH;
        }
        unsigned g =
            (unsigned)((path[i] - '0') * 100 + (path[i + 1] - '0') * 10 + (path[i + 2] - '0'));
        i += 3;
        if (ng == 0 && more && g == 0) {
            return TG_ERR_TLOG_PATH;
        }
        if (r.index > (UINT64_MAX - g) / 1000u) {
            return TG_ERR_TLOG_PATH;
        }
        r.index = r.index * 1000u + g;
        ng++;
        if (!more) {
            break;
        }
        if (i >= n || path[i] != '/') {
            return TG_ERR_TLOG_PATH;
        }
        i++;
    }
    if (i < n) {
        if (n - i < 3 || memcmp(path + i, ".p/", 3) != 0) {
            return TG_ERR_TLOG_PATH;
        }
        i += 3;
        /* a partial tile is 1..255 wide; a full one never has the suffix */
        if (!parse_small(path, n, &i, TG_TLOG_TILE_WIDTH - 1, 0, &r.width) || i != n) {
            return TG_ERR_TLOG_PATH;
        }
    }
    *t = r;
    return TG_OK;
}

tg_err_t tg_tlog_tile_for_size(tg_tlog_tile_t *t, bool entries, unsigned level, uint64_t index,
                               uint64_t size) {
    memset(t, 0, sizeof *t);
    if (level > TG_TLOG_TILE_MAX_LEVEL || (entries && level != 0)) {
        return TG_ERR_INVALID_ARG;
    }
    /* the complete hashes at tree level 8·level: one per 256^level leaves */
    unsigned shift = level * TG_TLOG_TILE_HEIGHT;
    uint64_t hashes = shift >= 64 ? 0 : size >> shift;
    uint64_t full = hashes / TG_TLOG_TILE_WIDTH;
    unsigned rest = (unsigned)(hashes % TG_TLOG_TILE_WIDTH);
    unsigned width;
    if (index < full) {
        width = TG_TLOG_TILE_WIDTH;
    } else if (index == full && rest > 0) {
        width = rest;
    } else {
        return TG_ERR_NOT_FOUND;
    }
    t->entries = entries;
    t->level = level;
    t->index = index;
    t->width = width;
    return TG_OK;
}
