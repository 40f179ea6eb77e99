/* clock.c — clocks and the receipt timestamp format (UTC, ms, 24 chars). */
#include "trigguard/clock.h"

#include <stdbool.h>
#include <time.h>

#define MS_PER_DAY INT64_C(86400000)

int64_t tg_clock_now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}

int64_t tg_clock_mono_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

/* Days since 1970-01-01 of a proleptic Gregorian date; eras of 400 years keep the
 * arithmetic exact and free of the C library's time zone handling. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Inverse of days_from_civil. */
static void civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

static void put_digits(char *p, int64_t v, int width) {
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + (int)(v % 10));
        v /= 10;
    }
}

tg_err_t tg_time_format_ms(char out[TG_TIME_ISO_LEN + 1], int64_t unix_ms) {
    if (unix_ms < 0 || unix_ms > TG_TIME_MAX_MS) {
        out[0] = '\0';
        return TG_ERR_INVALID_ARG;
    }
    int64_t days = unix_ms / MS_PER_DAY;
    int64_t rem = unix_ms % MS_PER_DAY;
    int64_t y, m, d;
    civil_from_days(days, &y, &m, &d);
    put_digits(out, y, 4);
    out[4] = '-';
    put_digits(out + 5, m, 2);
    out[7] = '-';
    put_digits(out + 8, d, 2);
    out[10] = 'T';
    put_digits(out + 11, rem / 3600000, 2);
    out[13] = ':';
    put_digits(out + 14, (rem / 60000) % 60, 2);
    out[16] = ':';
    put_digits(out + 17, (rem / 1000) % 60, 2);
    out[19] = '.';
    put_digits(out + 20, rem % 1000, 3);
    out[23] = 'Z';
    out[24] = '\0';
    return TG_OK;
}

/* Reads exactly `width` ASCII digits; -1 if any is not a digit. */
static int64_t get_digits(const char *p, int width) {
    int64_t v = 0;
    for (int i = 0; i < width; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static int64_t days_in_month(int64_t y, int64_t m) {
    static const int8_t dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) {
        return 29;
    }
    return dim[m - 1];
}

tg_err_t tg_time_parse_ms(int64_t *out, const char *s, size_t n) {
    if (s == NULL || n != TG_TIME_ISO_LEN || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
        s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z') {
        return TG_ERR_INVALID_ARG;
    }
    int64_t y = get_digits(s, 4), mo = get_digits(s + 5, 2), d = get_digits(s + 8, 2);
    int64_t h = get_digits(s + 11, 2), mi = get_digits(s + 14, 2);
    int64_t sec = get_digits(s + 17, 2), ms = get_digits(s + 20, 3);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
        sec > 59 || ms < 0) {
        return TG_ERR_INVALID_ARG;
    }
    if (d > days_in_month(y, mo)) {
        return TG_ERR_INVALID_ARG;
    }
    *out = days_from_civil(y, mo, d) * MS_PER_DAY + ((h * 60 + mi) * 60 + sec) * 1000 + ms;
    return TG_OK;
}

/* The offset of an RFC 3339 time (what follows the seconds and fraction), in ms east of
 * UTC; false when p[0..n) is not "Z", "z" or ("+"/"-") HH:MM with HH <= 23, MM <= 59. */
static bool parse_offset(int64_t *east_ms, const char *p, size_t n) {
    if (n == 1 && (p[0] == 'Z' || p[0] == 'z')) {
        *east_ms = 0;
        return true;
    }
    if (n != 6 || (p[0] != '+' && p[0] != '-') || p[3] != ':') {
        return false;
    }
    int64_t h = get_digits(p + 1, 2), m = get_digits(p + 4, 2);
    if (h < 0 || h > 23 || m < 0 || m > 59) {
        return false;
    }
    *east_ms = (p[0] == '-' ? -1 : 1) * (h * 60 + m) * 60000;
    return true;
}

tg_err_t tg_time_parse_rfc3339_ms(int64_t *out, const char *s, size_t n) {
    /* The shortest form is "YYYY-MM-DDTHH:MM:SSZ" (20 characters). */
    if (s == NULL || n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':') {
        return TG_ERR_INVALID_ARG;
    }
    int64_t y = get_digits(s, 4), mo = get_digits(s + 5, 2), d = get_digits(s + 8, 2);
    int64_t h = get_digits(s + 11, 2), mi = get_digits(s + 14, 2), sec = get_digits(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || sec < 0 || sec > 59) {
        return TG_ERR_INVALID_ARG;
    }
    size_t i = 19;
    int64_t ms = 0;
    if (s[i] == '.') {
        size_t first = ++i;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (i - first < 3) {
                ms = ms * 10 + (s[i] - '0');
            }
        }
        if (i == first) {
            return TG_ERR_INVALID_ARG; /* "." needs at least one digit */
        }
        for (size_t k = i - first; k < 3; k++) {
            ms *= 10; /* ".5" is 500 ms */
        }
    }
    int64_t east_ms = 0;
    if (!parse_offset(&east_ms, s + i, n - i)) {
        return TG_ERR_INVALID_ARG;
    }
    int64_t t =
        days_from_civil(y, mo, d) * MS_PER_DAY + ((h * 60 + mi) * 60 + sec) * 1000 + ms - east_ms;
    if (t < 0 || t > TG_TIME_MAX_MS) {
        return TG_ERR_INVALID_ARG;
    }
    *out = t;
    return TG_OK;
}
