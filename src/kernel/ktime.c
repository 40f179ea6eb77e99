/* ktime.c — civil time for time.* conditions, computed from the frame's instant and a
 * compiled zone (kernel_tables.h): integer arithmetic only, no libc time function, no clock
 * (kernel_purity.sh), no allocation. */
#include <stdint.h>

#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"

/* Floor division and modulo for a positive divisor (C rounds toward zero). */
static int64_t fdiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }
static int64_t fmod64(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

/* Howard Hinnant's days_from_civil / civil_from_days: 400-year eras of 146097 days, the
 * year starting on March 1 so that the leap day is the era's last. */
int64_t tg_days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = fdiv(y, 400);
    int64_t yoe = y - era * 400;                                            /* [0, 399] */
    int64_t doy = (153 * (int64_t)(m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;                    /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

void tg_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d) {
    int64_t z = days + 719468;
    int64_t era = fdiv(z, 146097);
    int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                                    /* [0, 11] */
    unsigned dd = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    unsigned mm = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (mm <= 2);
    *m = mm;
    *d = dd;
}

static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static unsigned month_days(int64_t y, unsigned m) {
    static const uint8_t days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29u : days[(m - 1) % 12];
}

/* The instant (UTC seconds) of POSIX date r in year y, at local time r->secs in a zone whose
 * offset at that moment is `off` (the rule's standard offset for the start, its daylight
 * offset for the end). */
static int64_t rule_instant(const tg_zone_date_t *r, int64_t y, int32_t off) {
    unsigned m = r->month >= 1 && r->month <= 12 ? r->month : 1;
    int64_t first = tg_days_from_civil(y, m, 1);
    unsigned wd1 = (unsigned)fmod64(first + 4, 7); /* 1970-01-01 was a Thursday (0 = Sunday) */
    unsigned day = 1 + (r->wday % 7 + 7 - wd1) % 7 + (unsigned)(r->week - 1) * 7;
    while (day > month_days(y, m)) { /* week 5 = the last such weekday of the month */
        day -= 7;
    }
    return (first + day - 1) * 86400 + r->secs - off;
}

static int32_t rule_offset(const tg_zone_t *z, int64_t t) {
    if (!z->has_dst) {
        return z->std_off;
    }
    int64_t y;
    unsigned m, d;
    tg_civil_from_days(fdiv(t + z->std_off, 86400), &y, &m, &d);
    int64_t start = rule_instant(&z->start, y, z->std_off);
    int64_t end = rule_instant(&z->end, y, z->dst_off);
    int dst = start < end ? (t >= start && t < end)   /* northern: DST inside the year */
                          : !(t >= end && t < start); /* southern: DST across the new year */
    return dst ? z->dst_off : z->std_off;
}

int32_t tg_zone_offset(const tg_zone_t *z, int64_t t) {
    if (z == NULL) {
        return 0;
    }
    if (z->n == 0 || t < z->at[0]) {
        return z->n == 0 && z->has_rule ? rule_offset(z, t) : z->off0;
    }
    uint32_t lo = 0, hi = z->n; /* the last transition at or before t: at[lo] <= t < at[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (z->at[mid] <= t) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if (lo == z->n - 1 && z->has_rule) {
        return rule_offset(z, t);
    }
    return z->off[lo];
}

void tg_civil_time(tg_civil_t *out, const tg_zone_t *z, int64_t t) {
    int64_t local = t + tg_zone_offset(z, t);
    int64_t days = fdiv(local, 86400);
    int64_t sod = local - days * 86400;
    unsigned m, d;
    tg_civil_from_days(days, &out->year, &m, &d);
    out->month = (uint8_t)m;
    out->day = (uint8_t)d;
    out->hour = (uint8_t)(sod / 3600);
    out->weekday = (uint8_t)fmod64(days + 3, 7); /* 1970-01-01 was a Thursday (0 = Monday) */
}

const char *tg_weekday_name(unsigned wd) {
    static const char *const names[7] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
    return wd < 7 ? names[wd] : NULL;
}

int tg_value_cmp(const tg_value_t *a, const tg_value_t *b) {
    if (a->type != b->type) {
        return a->type < b->type ? -1 : 1;
    }
    switch (a->type) {
    case TG_VT_NUMBER:
        return (a->num > b->num) - (a->num < b->num);
    case TG_VT_STRING:
        return tg_sv_cmp(a->str, a->len, b->str, b->len);
    case TG_VT_BOOL:
        return (a->boolean > b->boolean) - (a->boolean < b->boolean);
    default:
        return 0;
    }
}
