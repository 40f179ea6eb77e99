/* tzif.c — RFC 8536 TZif reader for the policy compiler (format and bounds in tzif.h). */
#include <stdlib.h>
#include <string.h>

#include "trigguard/tzif.h"

/* Offsets beyond +-25 hours exist in no zone; RFC 8536 excludes -2^31 only. */
#define MAX_OFFSET (25 * 3600)
#define MAX_RULE_TIME (167 * 3600)

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p) { return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4)); }

typedef struct hdr {
    uint8_t version; /* 0, '2', '3', '4' */
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
} hdr_t;

static tg_err_t bad(tg_diag_t *diag, const char *what) {
    return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "not a usable TZif file: %s", what);
}

static tg_err_t read_header(hdr_t *h, const uint8_t *p, size_t left, tg_diag_t *diag) {
    if (left < 44 || memcmp(p, "TZif", 4) != 0) {
        return bad(diag, "no TZif header");
    }
    h->version = p[4];
    if (h->version != 0 && (h->version < '2' || h->version > '9')) {
        return bad(diag, "unknown version");
    }
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    if (h->typecnt == 0 || h->typecnt > 256 || h->charcnt == 0 || h->charcnt > 4096 ||
        (h->isutcnt != 0 && h->isutcnt != h->typecnt) ||
        (h->isstdcnt != 0 && h->isstdcnt != h->typecnt)) {
        return bad(diag, "inconsistent counts");
    }
    if (h->leapcnt != 0) {
        return bad(diag, "leap second records (a right/ zone) are not supported");
    }
    if (h->timecnt > TG_TZIF_MAX_TRANSITIONS) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "TZif file has more than %u transitions",
                           TG_TZIF_MAX_TRANSITIONS);
    }
    return TG_OK;
}

/* Bytes of the data block after header h, with `tsize`-byte times. Counts are bounded by
 * read_header, so this cannot overflow. */
static size_t block_size(const hdr_t *h, size_t tsize) {
    return (size_t)h->timecnt * tsize + h->timecnt + (size_t)h->typecnt * 6 + h->charcnt +
           (size_t)h->leapcnt * (tsize + 4) + h->isstdcnt + h->isutcnt;
}

static tg_err_t read_block(tg_tzif_t *out, const hdr_t *h, const uint8_t *p, size_t tsize,
                           tg_diag_t *diag) {
    const uint8_t *times = p, *idx = p + (size_t)h->timecnt * tsize;
    const uint8_t *types = idx + h->timecnt;
    int32_t utoff[256];
    for (uint32_t i = 0; i < h->typecnt; i++) {
        int32_t o = (int32_t)be32(types + (size_t)i * 6);
        if (o < -MAX_OFFSET || o > MAX_OFFSET || types[(size_t)i * 6 + 4] > 1 ||
            types[(size_t)i * 6 + 5] >= h->charcnt) {
            return bad(diag, "local time type out of range");
        }
        utoff[i] = o;
    }
    if (h->timecnt != 0) {
        out->at = malloc((size_t)h->timecnt * sizeof *out->at);
        out->off = malloc((size_t)h->timecnt * sizeof *out->off);
        if (out->at == NULL || out->off == NULL) {
            return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory reading a TZif file");
        }
    }
    for (uint32_t i = 0; i < h->timecnt; i++) {
        int64_t t = tsize == 8 ? be64(times + (size_t)i * 8)
                               : (int64_t)(int32_t)be32(times + (size_t)i * 4);
        if (i > 0 && t <= out->at[i - 1]) {
            return bad(diag, "transitions not in ascending order");
        }
        if (idx[i] >= h->typecnt) {
            return bad(diag, "transition type index out of range");
        }
        out->at[i] = t;
        out->off[i] = utoff[idx[i]];
    }
    out->zone.at = out->at;
    out->zone.off = out->off;
    out->zone.n = h->timecnt;
    out->zone.off0 = utoff[0];
    return TG_OK;
}

/* ---- POSIX TZ strings ------------------------------------------------------------------ */

typedef struct cur {
    const char *s;
    size_t n, i;
} cur_t;

static int peek(const cur_t *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static int is_alpha(int ch) { return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'); }
static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

/* A zone abbreviation: 3+ letters, or <...> of letters, digits, '+' and '-'. */
static int tz_name(cur_t *c) {
    size_t start = c->i;
    if (peek(c) == '<') {
        c->i++;
        while (is_alpha(peek(c)) || is_digit(peek(c)) || peek(c) == '+' || peek(c) == '-') {
            c->i++;
        }
        if (peek(c) != '>' || c->i - start - 1 < 3) {
            return 0;
        }
        c->i++;
        return 1;
    }
    while (is_alpha(peek(c))) {
        c->i++;
    }
    return c->i - start >= 3;
}

/* Unsigned number of at most `digits` digits, at most max. */
static int tz_num(cur_t *c, int digits, long max, long *out) {
    long v = 0;
    int k = 0;
    while (k < digits && is_digit(peek(c))) {
        v = v * 10 + (peek(c) - '0');
        c->i++;
        k++;
    }
    if (k == 0 || v > max) {
        return 0;
    }
    *out = v;
    return 1;
}

/* [+-]hh[:mm[:ss]] with hours up to max_h; seconds (signed) into *out. */
static int tz_time(cur_t *c, long max_h, long *out) {
    int neg = 0;
    if (peek(c) == '+' || peek(c) == '-') {
        neg = peek(c) == '-';
        c->i++;
    }
    long h, m = 0, s = 0;
    if (!tz_num(c, 3, max_h, &h)) {
        return 0;
    }
    if (peek(c) == ':') {
        c->i++;
        if (!tz_num(c, 2, 59, &m)) {
            return 0;
        }
        if (peek(c) == ':') {
            c->i++;
            if (!tz_num(c, 2, 59, &s)) {
                return 0;
            }
        }
    }
    *out = (neg ? -1 : 1) * (h * 3600 + m * 60 + s);
    return 1;
}

/* ,Mm.w.d[/time] */
static int tz_date(cur_t *c, tg_zone_date_t *d) {
    long m, w, wd, t = 2L * 3600;
    if (peek(c) != ',') {
        return 0;
    }
    c->i++;
    if (peek(c) != 'M') {
        return 0; /* the Jn and n forms: used by no zone, refused rather than guessed */
    }
    c->i++;
    if (!tz_num(c, 2, 12, &m) || m < 1 || peek(c) != '.') {
        return 0;
    }
    c->i++;
    if (!tz_num(c, 1, 5, &w) || w < 1 || peek(c) != '.') {
        return 0;
    }
    c->i++;
    if (!tz_num(c, 1, 6, &wd)) {
        return 0;
    }
    if (peek(c) == '/') {
        c->i++;
        if (!tz_time(c, 167, &t)) {
            return 0;
        }
    }
    d->month = (uint8_t)m;
    d->week = (uint8_t)w;
    d->wday = (uint8_t)wd;
    d->secs = (int32_t)t;
    return 1;
}

tg_err_t tg_tzif_parse_rule(tg_zone_t *z, const char *s, size_t len, tg_diag_t *diag) {
    if (z == NULL || (s == NULL && len != 0)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_tzif_parse_rule: NULL argument");
    }
    cur_t c = {s, len, 0};
    long std, dst;
    /* POSIX offsets count hours west of UTC: "EST5" is UTC-5, hence the negations. */
    if (!tz_name(&c) || !tz_time(&c, 24, &std)) {
        return bad(diag, "footer rule without a standard time name and offset");
    }
    z->has_rule = 1;
    z->has_dst = 0;
    z->std_off = (int32_t)-std;
    z->dst_off = z->std_off;
    if (c.i == c.n) {
        return TG_OK;
    }
    if (!tz_name(&c)) {
        return bad(diag, "footer rule with a malformed daylight time name");
    }
    dst = std - 3600; /* default: one hour ahead of standard time */
    if (peek(&c) != ',' && !tz_time(&c, 24, &dst)) {
        return bad(diag, "footer rule with a malformed daylight offset");
    }
    if (!tz_date(&c, &z->start) || !tz_date(&c, &z->end) || c.i != c.n) {
        return bad(diag, "footer rule dates are not both in the Mm.w.d[/time] form");
    }
    z->has_dst = 1;
    z->dst_off = (int32_t)-dst;
    if (z->std_off < -MAX_OFFSET || z->std_off > MAX_OFFSET || z->dst_off < -MAX_OFFSET ||
        z->dst_off > MAX_OFFSET) {
        return bad(diag, "footer rule offset out of range");
    }
    return TG_OK;
}

tg_err_t tg_tzif_parse(tg_tzif_t *out, const uint8_t *data, size_t len, tg_diag_t *diag) {
    if (out == NULL || data == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_tzif_parse: NULL argument");
    }
    memset(out, 0, sizeof *out);
    if (len > TG_TZIF_MAX_FILE) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "TZif file larger than %zu bytes", TG_TZIF_MAX_FILE);
    }
    hdr_t h;
    memset(&h, 0, sizeof h);
    tg_err_t rc = read_header(&h, data, len, diag);
    size_t pos = 44;
    if (rc == TG_OK && len - pos < block_size(&h, 4)) {
        rc = bad(diag, "truncated data block");
    }
    if (rc == TG_OK && h.version == 0) {
        rc = read_block(out, &h, data + pos, 4, diag);
        goto done;
    }
    if (rc == TG_OK) { /* version 2+: skip the 32-bit block, read the 64-bit one */
        pos += block_size(&h, 4);
        rc = read_header(&h, data + pos, len - pos, diag);
        pos += 44;
    }
    if (rc == TG_OK && (h.version == 0 || len - pos < block_size(&h, 8))) {
        rc = bad(diag, "truncated or inconsistent second data block");
    }
    if (rc == TG_OK) {
        rc = read_block(out, &h, data + pos, 8, diag);
        pos += block_size(&h, 8);
    }
    if (rc == TG_OK) { /* footer: "\n" TZ "\n" */
        const char *f = (const char *)data + pos;
        size_t left = len - pos;
        const char *nl = left > 1 && f[0] == '\n' ? memchr(f + 1, '\n', left - 1) : NULL;
        if (nl == NULL) {
            rc = bad(diag, "missing footer");
        } else if ((size_t)(nl - f - 1) > TG_TZIF_MAX_FOOTER) {
            rc = bad(diag, "footer too long");
        } else if (nl != f + 1) { /* an empty footer: the last transition rules on */
            rc = tg_tzif_parse_rule(&out->zone, f + 1, (size_t)(nl - f - 1), diag);
        }
    }
done:
    if (rc != TG_OK) {
        tg_tzif_free(out);
    }
    return rc;
}

void tg_tzif_free(tg_tzif_t *t) {
    if (t == NULL) {
        return;
    }
    free(t->at);
    free(t->off);
    memset(t, 0, sizeof *t);
}
