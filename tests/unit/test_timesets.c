/* test_timesets.c — time.* conditions (TZif zones, civil time, DST), named data sets, and
 * their explain: decision tables at chosen instants, parser tests on real and broken zone
 * files, set files (size, membership, hash, path escapes). Zone files are copies of tzdata's
 * (public domain) under vectors/zoneinfo, so the decisions do not depend on the host. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"
#include "trigguard/tzif.h"

#include "support/fail_alloc.h"
#include "support/read.h"

#define ZONEINFO "vectors/zoneinfo"

static json_t *jparse(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (v == NULL) {
        fail_msg("test JSON: %s: %s", e.text, text);
    }
    return v;
}

static tg_policy_t *compile_opts(const char *bundle, const char *base_dir, tg_diag_t *diag,
                                 tg_err_t *rc_out) {
    json_t *b = jparse(bundle);
    tg_policy_opts_t opts = {base_dir, ZONEINFO};
    tg_policy_t *p = NULL;
    *rc_out = tg_policy_compile_opts(&p, b, &opts, diag);
    json_decref(b);
    return p;
}

static tg_policy_t *compile_ok(const char *bundle) {
    tg_diag_t d = {{0}};
    tg_err_t rc;
    tg_policy_t *p = compile_opts(bundle, NULL, &d, &rc);
    if (rc != TG_OK) {
        fail_msg("compile: %s", d.msg);
    }
    return p;
}

static void expect_error(const char *bundle, const char *base_dir, const char *msg) {
    tg_diag_t d = {{0}};
    tg_err_t rc;
    tg_policy_t *p = compile_opts(bundle, base_dir, &d, &rc);
    assert_null(p);
    assert_int_equal(rc, TG_ERR_POLICY_INVALID);
    if (strstr(d.msg, msg) == NULL) {
        fail_msg("expected \"%s\" in \"%s\"", msg, d.msg);
    }
}

static int64_t at_ms(const char *iso) {
    int64_t ms = 0;
    assert_int_equal(tg_time_parse_rfc3339_ms(&ms, iso, strlen(iso)), TG_OK);
    return ms;
}

/* The decision for request on p at instant iso (NULL: no instant). */
static tg_decision_t decide_at(const tg_policy_t *p, const char *request, const char *iso) {
    json_t *req = jparse(request);
    tg_frame_t f;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, &d), TG_OK);
    assert_int_equal(f.has_now, 0); /* tg_frame_from_request leaves the instant unknown */
    if (iso != NULL) {
        f.now_ms = at_ms(iso);
        f.has_now = 1;
    }
    tg_decision_t out;
    tg_kernel_decide(&out, tg_policy_tables(p), &f);
    json_decref(req);
    return out;
}

static int rule_is(const tg_decision_t *d, const char *id) {
    return d->rule_id.ptr != NULL && strlen(id) == d->rule_id.len &&
           memcmp(d->rule_id.ptr, id, d->rule_id.len) == 0;
}

/* One surface "s" whose permit rule "r" has one condition; the default denies. */
static tg_policy_t *one_cond(const char *tz, const char *cond) {
    char b[1024];
    snprintf(b, sizeof b,
             "{\"version\":\"1\",\"timezone\":\"%s\",\"surfaces\":{\"s\":{\"tier\":3,\"rules\":"
             "[{\"id\":\"r\",\"effect\":\"permit\",\"when\":[%s]}]}}}",
             tz, cond);
    return compile_ok(b);
}

static const char REQ[] = "{\"surface\":\"s\",\"action\":\"a\",\"actor\":\"x\"}";

typedef struct {
    const char *at;
    int permit;
} row_t;

static void table(const char *tz, const char *cond, const row_t *rows, size_t n) {
    tg_policy_t *p = one_cond(tz, cond);
    for (size_t i = 0; i < n; i++) {
        tg_decision_t d = decide_at(p, REQ, rows[i].at);
        if ((d.verdict == TG_PERMIT) != rows[i].permit) {
            fail_msg("%s %s at %s: expected %s, got %s", tz, cond, rows[i].at,
                     rows[i].permit ? "PERMIT" : "DENY", tg_verdict_name(d.verdict));
        }
    }
    tg_policy_destroy(p);
}

#define TABLE(tz, cond, ...)                                                                       \
    do {                                                                                           \
        static const row_t rows_[] = {__VA_ARGS__};                                                \
        table(tz, cond, rows_, sizeof rows_ / sizeof rows_[0]);                                    \
    } while (0)

/* ---- civil time ------------------------------------------------------------------------ */

static void test_calendar(void **state) {
    (void)state;
    int64_t y;
    unsigned m, d;
    assert_int_equal(tg_days_from_civil(1970, 1, 1), 0);
    assert_int_equal(tg_days_from_civil(2000, 3, 1), 11017);
    assert_int_equal(tg_days_from_civil(1969, 12, 31), -1);
    /* every day of 1600..2400 round-trips, and days are consecutive */
    int64_t prev = tg_days_from_civil(1600, 1, 1) - 1;
    for (int64_t yy = 1600; yy <= 2400; yy++) {
        for (unsigned mm = 1; mm <= 12; mm++) {
            static const unsigned md[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
            int leap = (yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0;
            unsigned n = md[mm - 1] + (mm == 2 && leap);
            for (unsigned dd = 1; dd <= n; dd++) {
                int64_t days = tg_days_from_civil(yy, mm, dd);
                assert_int_equal(days, prev + 1);
                prev = days;
                tg_civil_from_days(days, &y, &m, &d);
                assert_true(y == yy && m == mm && d == dd);
            }
        }
    }
    /* 1970-01-01 was a Thursday; 2026-12-07 a Monday */
    tg_civil_t c;
    tg_civil_time(&c, NULL, 0);
    assert_string_equal(tg_weekday_name(c.weekday), "thu");
    tg_civil_time(&c, NULL, at_ms("2026-12-07T00:00:00Z") / 1000);
    assert_string_equal(tg_weekday_name(c.weekday), "mon");
    tg_civil_time(&c, NULL, -1); /* 1969-12-31T23:59:59Z */
    assert_true(c.year == 1969 && c.month == 12 && c.day == 31 && c.hour == 23);
    assert_null(tg_weekday_name(7));
}

/* ---- TZif ------------------------------------------------------------------------------ */

static tg_tzif_t parse_zone_file(const char *name) {
    char path[256];
    snprintf(path, sizeof path, ZONEINFO "/%s", name);
    size_t len = 0;
    char *data = tg_test_read(path, &len);
    tg_tzif_t z;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_tzif_parse(&z, (const uint8_t *)data, len, &d);
    free(data);
    if (rc) {
        fail_msg("%s: %s", name, d.msg);
    }
    return z;
}

static int32_t offset_at(const tg_tzif_t *z, const char *iso) {
    return tg_zone_offset(&z->zone, at_ms(iso) / 1000);
}

static void test_tzif_real_zones(void **state) {
    (void)state;
    tg_tzif_t utc = parse_zone_file("UTC");
    assert_int_equal(utc.zone.n, 0);
    assert_int_equal(offset_at(&utc, "2026-07-01T00:00:00Z"), 0);
    tg_tzif_free(&utc);

    tg_tzif_t ber = parse_zone_file("Europe/Berlin");
    assert_true(ber.zone.n > 10 && ber.zone.has_rule && ber.zone.has_dst);
    assert_int_equal(ber.zone.std_off, 3600);
    assert_int_equal(ber.zone.dst_off, 7200);
    assert_int_equal(tg_zone_offset(&ber.zone, INT64_C(-2524521600)), 3208); /* 1890: LMT */
    assert_int_equal(offset_at(&ber, "2026-03-29T00:59:59Z"), 3600);
    assert_int_equal(offset_at(&ber, "2026-03-29T01:00:00Z"), 7200);
    assert_int_equal(offset_at(&ber, "2026-10-25T00:59:59Z"), 7200);
    assert_int_equal(offset_at(&ber, "2026-10-25T01:00:00Z"), 3600);
    /* far beyond the last transition: the footer rule */
    assert_int_equal(offset_at(&ber, "2090-07-01T12:00:00Z"), 7200);
    assert_int_equal(offset_at(&ber, "2090-12-01T12:00:00Z"), 3600);
    assert_int_equal(offset_at(&ber, "2090-03-26T00:59:59Z"), 3600); /* last Sunday of March */
    assert_int_equal(offset_at(&ber, "2090-03-26T01:00:00Z"), 7200);
    tg_tzif_free(&ber);

    tg_tzif_t ny = parse_zone_file("America/New_York");
    assert_int_equal(offset_at(&ny, "2026-03-08T06:59:59Z"), -5 * 3600);
    assert_int_equal(offset_at(&ny, "2026-03-08T07:00:00Z"), -4 * 3600);
    assert_int_equal(offset_at(&ny, "2026-11-01T05:59:59Z"), -4 * 3600);
    assert_int_equal(offset_at(&ny, "2026-11-01T06:00:00Z"), -5 * 3600);
    assert_int_equal(offset_at(&ny, "2100-03-14T06:59:59Z"), -5 * 3600); /* 2nd Sun of March */
    assert_int_equal(offset_at(&ny, "2100-03-14T07:00:00Z"), -4 * 3600);
    tg_tzif_free(&ny);

    /* the southern hemisphere: daylight time across the new year */
    tg_tzif_t syd = parse_zone_file("Australia/Sydney");
    assert_int_equal(offset_at(&syd, "2095-01-15T00:00:00Z"), 11 * 3600);
    assert_int_equal(offset_at(&syd, "2095-07-15T00:00:00Z"), 10 * 3600);
    tg_tzif_free(&syd);

    tg_tzif_t kol = parse_zone_file("Asia/Kolkata");
    assert_int_equal(offset_at(&kol, "2090-01-01T00:00:00Z"), 5 * 3600 + 1800);
    tg_tzif_free(&kol);
}

static void expect_tzif_error(const uint8_t *data, size_t len) {
    tg_tzif_t z;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_tzif_parse(&z, data, len, &d);
    assert_int_not_equal(rc, TG_OK);
    assert_null(z.at);
    assert_int_equal(z.zone.n, 0);
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void test_tzif_corrupt(void **state) {
    (void)state;
    size_t len = 0;
    uint8_t *ber = (uint8_t *)tg_test_read(ZONEINFO "/Europe/Berlin", &len);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    /* every truncation is refused (the footer's newline is the last byte) */
    for (size_t cut = 0; cut < len; cut += (cut < 100 ? 1 : 37)) {
        memcpy(buf, ber, cut);
        expect_tzif_error(buf, cut);
    }
    /* bad magic, bad version */
    memcpy(buf, ber, len);
    buf[0] = 'X';
    expect_tzif_error(buf, len);
    memcpy(buf, ber, len);
    buf[4] = '1';
    expect_tzif_error(buf, len);
    /* huge counts in the first header: bounded before anything is read */
    memcpy(buf, ber, len);
    put32(buf + 32, 0xffffffffu);
    expect_tzif_error(buf, len);
    memcpy(buf, ber, len);
    put32(buf + 36, 0);
    expect_tzif_error(buf, len);
    memcpy(buf, ber, len);
    put32(buf + 28, 1); /* leap seconds */
    expect_tzif_error(buf, len);
    /* a broken footer rule */
    memcpy(buf, ber, len);
    uint8_t *f = NULL;
    for (size_t i = 0; i + 26 <= len && f == NULL; i++) {
        f = memcmp(buf + i, "CET-1CEST,M3.5.0,M10.5.0/3", 26) == 0 ? buf + i : NULL;
    }
    assert_non_null(f);
    memcpy(f, "CET-1CEST,J60/2,M10.5.0/3", 25);
    f[25] = '\n';
    expect_tzif_error(buf, (size_t)(f - buf) + 26);
    /* random bytes flipped: never a crash (ASan), an error or a zone */
    for (unsigned i = 0; i < 2000; i++) {
        memcpy(buf, ber, len);
        buf[(i * 7919u) % len] ^= (uint8_t)(1u << (i % 8));
        tg_tzif_t z;
        if (tg_tzif_parse(&z, buf, len, NULL) == TG_OK) {
            (void)tg_zone_offset(&z.zone, (int64_t)i * 1000003);
            tg_tzif_free(&z);
        }
    }
    free(buf);
    free(ber);
}

static void test_tzif_rules(void **state) {
    (void)state;
    static const struct {
        const char *s;
        int ok;
        int32_t std, dst;
    } cases[] = {
        {"UTC0", 1, 0, 0},
        {"<+03>-3", 1, 10800, 10800},
        {"<+0330>-3:30", 1, 12600, 12600},
        {"IST-5:30", 1, 19800, 19800},
        {"CET-1CEST,M3.5.0,M10.5.0/3", 1, 3600, 7200},
        {"EST5EDT,M3.2.0,M11.1.0", 1, -18000, -14400},
        {"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1", 1, -10800, -7200},
        {"IST-1GMT0,M10.5.0,M3.5.0/1", 1, 3600, 0},
        {"XX0", 0, 0, 0},              /* name too short */
        {"EST5EDT", 0, 0, 0},          /* daylight time without dates */
        {"EST5EDT,J60,J300", 0, 0, 0}, /* Jn form */
        {"EST5EDT,60,300", 0, 0, 0},   /* n form */
        {"EST5EDT,M13.1.0,M11.1.0", 0, 0, 0},
        {"EST5EDT,M3.6.0,M11.1.0", 0, 0, 0},
        {"EST5EDT,M3.2.7,M11.1.0", 0, 0, 0},
        {"EST5EDT,M3.2.0/168,M11.1.0", 0, 0, 0},
        {"EST25", 0, 0, 0},
        {"EST5EDT,M3.2.0,M11.1.0x", 0, 0, 0},
        {"", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_zone_t z;
        memset(&z, 0, sizeof z);
        tg_err_t rc = tg_tzif_parse_rule(&z, cases[i].s, strlen(cases[i].s), NULL);
        if ((rc == TG_OK) != cases[i].ok) {
            fail_msg("rule \"%s\": expected %s", cases[i].s, cases[i].ok ? "ok" : "an error");
        }
        if (rc == TG_OK) {
            assert_int_equal(z.std_off, cases[i].std);
            assert_int_equal(z.dst_off, cases[i].dst);
        }
    }
}

/* ---- time conditions through the compiler and the kernel ----------------------------- */

static void test_time_hours_dst(void **state) {
    (void)state;
    /* Europe/Berlin, spring forward 2026-03-29 02:00 CET -> 03:00 CEST */
    TABLE("Europe/Berlin", "{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":1}",
          {"2026-03-29T00:00:00Z", 1}, {"2026-03-29T00:59:59Z", 1}, {"2026-03-29T01:00:00Z", 0});
    TABLE("Europe/Berlin", "{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":3}",
          {"2026-03-29T01:00:00Z", 1}, {"2026-03-29T00:59:59Z", 0});
    /* fall back 2026-10-25 03:00 CEST -> 02:00 CET: hour 2 twice */
    TABLE("Europe/Berlin", "{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":2}",
          {"2026-10-25T00:00:00Z", 1}, {"2026-10-25T00:59:59Z", 1}, {"2026-10-25T01:00:00Z", 1},
          {"2026-10-25T01:59:59Z", 1}, {"2026-10-25T02:00:00Z", 0});
    /* America/New_York 2026-03-08 and 2026-11-01 */
    TABLE("America/New_York", "{\"field\":\"time.hour\",\"op\":\"lt\",\"value\":3}",
          {"2026-03-08T06:59:59Z", 1}, {"2026-03-08T07:00:00Z", 0}, {"2026-11-01T05:59:59Z", 1},
          {"2026-11-01T06:00:00Z", 1}, {"2026-11-01T07:59:59Z", 1}, {"2026-11-01T08:00:00Z", 0});
    /* around midnight UTC: hours 23 and 0 */
    TABLE("UTC", "{\"field\":\"time.hour\",\"op\":\"gte\",\"value\":23}",
          {"2026-12-04T22:59:59.999Z", 0}, {"2026-12-04T23:00:00Z", 1},
          {"2026-12-04T23:59:59.999Z", 1}, {"2026-12-05T00:00:00Z", 0});
    TABLE("UTC", "{\"field\":\"time.hour\",\"op\":\"in\",\"value\":[0,12]}",
          {"2026-12-05T00:30:00Z", 1}, {"2026-12-05T12:00:00Z", 1}, {"2026-12-05T13:00:00Z", 0});
}

static void test_time_weekday_date(void **state) {
    (void)state;
    /* Berlin's midnight between Sunday 2026-12-06 and Monday 2026-12-07 is 23:00Z */
    TABLE("Europe/Berlin", "{\"field\":\"time.weekday\",\"op\":\"eq\",\"value\":\"mon\"}",
          {"2026-12-06T22:59:59Z", 0}, {"2026-12-06T23:00:00Z", 1}, {"2026-12-07T22:59:59Z", 1},
          {"2026-12-07T23:00:00Z", 0});
    TABLE("America/New_York",
          "{\"field\":\"time.weekday\",\"op\":\"not_in\",\"value\":[\"sat\",\"sun\"]}",
          {"2026-12-05T04:59:59Z", 1}, /* Friday 23:59:59 EST */
          {"2026-12-05T05:00:00Z", 0}, {"2026-12-07T04:59:59Z", 0}, {"2026-12-07T05:00:00Z", 1});
    /* date comparisons at their boundaries */
    TABLE("Europe/Berlin", "{\"field\":\"time.date\",\"op\":\"gte\",\"value\":\"2026-12-20\"}",
          {"2026-12-19T22:59:59Z", 0}, {"2026-12-19T23:00:00Z", 1}, {"2030-01-01T00:00:00Z", 1});
    TABLE("Europe/Berlin", "{\"field\":\"time.date\",\"op\":\"lt\",\"value\":\"2027-01-03\"}",
          {"2027-01-02T22:59:59Z", 1}, {"2027-01-02T23:00:00Z", 0});
    TABLE("UTC", "{\"field\":\"time.date\",\"op\":\"eq\",\"value\":\"2028-02-29\"}",
          {"2028-02-29T00:00:00Z", 1}, {"2028-02-29T23:59:59Z", 1}, {"2028-03-01T00:00:00Z", 0},
          {"2028-02-28T23:59:59Z", 0});
    TABLE("UTC",
          "{\"field\":\"time.date\",\"op\":\"in\",\"value\":[\"2026-12-24\",\"2026-12-31\"]}",
          {"2026-12-24T12:00:00Z", 1}, {"2026-12-25T12:00:00Z", 0}, {"2026-12-31T00:00:00Z", 1});
    TABLE("UTC", "{\"field\":\"time.date\",\"op\":\"ne\",\"value\":\"2026-12-24\"}",
          {"2026-12-24T12:00:00Z", 0}, {"2026-12-23T12:00:00Z", 1});
}

static void test_time_absent(void **state) {
    (void)state;
    /* has_now 0: every time.* value is absent; only exists:false holds */
    static const char *const conds[] = {
        "{\"field\":\"time.hour\",\"op\":\"gte\",\"value\":0}",
        "{\"field\":\"time.hour\",\"op\":\"ne\",\"value\":5}",
        "{\"field\":\"time.weekday\",\"op\":\"not_in\",\"value\":[\"mon\"]}",
        "{\"field\":\"time.date\",\"op\":\"ne\",\"value\":\"2026-01-01\"}",
        "{\"field\":\"time.date\",\"op\":\"exists\"}",
    };
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
        tg_policy_t *p = one_cond("UTC", conds[i]);
        tg_decision_t d = decide_at(p, REQ, NULL);
        assert_int_equal(d.verdict, TG_DENY);
        assert_string_equal(d.reason, "NO_MATCHING_POLICY");
        tg_policy_destroy(p);
    }
    tg_policy_t *p = one_cond("UTC", "{\"field\":\"time.date\",\"op\":\"exists\",\"value\":false}");
    assert_int_equal(decide_at(p, REQ, NULL).verdict, TG_PERMIT);
    assert_int_equal(decide_at(p, REQ, "2026-01-01T00:00:00Z").verdict, TG_DENY);
    tg_policy_destroy(p);
}

/* The change freeze of docs/POLICY.md "Time". */
static const char FREEZE[] =
    "{\"version\":\"1\",\"timezone\":\"Europe/Berlin\",\"surfaces\":{\"deploy.release\":{"
    "\"tier\":2,\"rules\":["
    "{\"id\":\"freeze\",\"effect\":\"deny\",\"reason\":\"CHANGE_FREEZE\",\"when\":["
    "{\"field\":\"context.environment\",\"op\":\"eq\",\"value\":\"production\"},"
    "{\"field\":\"time.date\",\"op\":\"gte\",\"value\":\"2026-12-20\"},"
    "{\"field\":\"time.date\",\"op\":\"lte\",\"value\":\"2027-01-02\"}]},"
    "{\"id\":\"weekend\",\"effect\":\"deny\",\"reason\":\"OUTSIDE_CHANGE_WINDOW\",\"when\":["
    "{\"field\":\"context.environment\",\"op\":\"eq\",\"value\":\"production\"},"
    "{\"field\":\"time.weekday\",\"op\":\"in\",\"value\":[\"sat\",\"sun\"]}]},"
    "{\"id\":\"early\",\"effect\":\"deny\",\"reason\":\"OUTSIDE_CHANGE_WINDOW\",\"when\":["
    "{\"field\":\"context.environment\",\"op\":\"eq\",\"value\":\"production\"},"
    "{\"field\":\"time.hour\",\"op\":\"lt\",\"value\":9}]},"
    "{\"id\":\"late\",\"effect\":\"deny\",\"reason\":\"OUTSIDE_CHANGE_WINDOW\",\"when\":["
    "{\"field\":\"context.environment\",\"op\":\"eq\",\"value\":\"production\"},"
    "{\"field\":\"time.hour\",\"op\":\"gte\",\"value\":17}]},"
    "{\"id\":\"deploy\",\"effect\":\"permit\",\"when\":[]}]}}}";

static void test_change_freeze(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok(FREEZE);
    const char *prod = "{\"surface\":\"deploy.release\",\"action\":\"deploy\",\"actor\":\"ci\","
                       "\"context\":{\"environment\":\"production\"}}";
    const char *stag = "{\"surface\":\"deploy.release\",\"action\":\"deploy\",\"actor\":\"ci\","
                       "\"context\":{\"environment\":\"staging\"}}";
    static const struct {
        const char *at, *rule;
    } rows[] = {
        {"2026-12-04T08:00:00Z", "deploy"},  /* Friday 09:00 CET */
        {"2026-12-04T07:59:59Z", "early"},   /* 08:59:59 */
        {"2026-12-04T16:00:00Z", "late"},    /* 17:00 */
        {"2026-12-05T12:00:00Z", "weekend"}, /* Saturday */
        {"2026-12-19T22:59:59Z", "weekend"}, /* Saturday 23:59:59 */
        {"2026-12-21T10:00:00Z", "freeze"},  /* Monday 11:00, in the freeze */
        {"2027-01-02T22:59:59Z", "freeze"},  /* the freeze's last second */
        {"2027-01-04T10:00:00Z", "deploy"},  /* Monday after */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tg_decision_t d = decide_at(p, prod, rows[i].at);
        if (!rule_is(&d, rows[i].rule)) {
            fail_msg("at %s: expected rule %s, got %.*s (%s)", rows[i].at, rows[i].rule,
                     (int)d.rule_id.len, d.rule_id.ptr ? d.rule_id.ptr : "", d.reason);
        }
        assert_int_equal(decide_at(p, stag, rows[i].at).verdict, TG_PERMIT);
    }
    tg_policy_destroy(p);
}

static void test_time_surface_zone(void **state) {
    (void)state;
    /* the surface's zone wins over the bundle's */
    tg_policy_t *p = compile_ok(
        "{\"version\":\"1\",\"timezone\":\"Europe/Berlin\",\"surfaces\":{"
        "\"ny\":{\"tier\":3,\"timezone\":\"America/New_York\",\"rules\":[{\"id\":\"r\","
        "\"effect\":\"permit\",\"when\":[{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":7}]}]},"
        "\"be\":{\"tier\":3,\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
        "{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":13}]}]}}}");
    const char *at = "2026-12-04T12:00:00Z";
    assert_int_equal(decide_at(p, "{\"surface\":\"ny\",\"action\":\"a\"}", at).verdict, TG_PERMIT);
    assert_int_equal(decide_at(p, "{\"surface\":\"be\",\"action\":\"a\"}", at).verdict, TG_PERMIT);
    const tg_kernel_tables_t *t = tg_policy_tables(p);
    assert_int_equal(t->n_zones, 2);
    tg_policy_destroy(p);
}

static void test_time_compile_errors(void **state) {
    (void)state;
    char b[1024];
    static const struct {
        const char *cond, *msg;
    } cases[] = {
        {"{\"field\":\"time.minute\",\"op\":\"eq\",\"value\":1}", "unknown time field"},
        {"{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":24}", "integer 0..23"},
        {"{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":9.5}", "integer 0..23"},
        {"{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":\"9\"}", "integer 0..23"},
        {"{\"field\":\"time.weekday\",\"op\":\"eq\",\"value\":\"Monday\"}", "mon, tue"},
        {"{\"field\":\"time.weekday\",\"op\":\"gt\",\"value\":\"mon\"}", "does not order"},
        {"{\"field\":\"time.date\",\"op\":\"eq\",\"value\":\"2026-02-30\"}", "YYYY-MM-DD"},
        {"{\"field\":\"time.date\",\"op\":\"eq\",\"value\":\"2026-2-3\"}", "YYYY-MM-DD"},
        {"{\"field\":\"time.date\",\"op\":\"gt\",\"value\":20261224}", "YYYY-MM-DD"},
        {"{\"field\":\"time.date\",\"op\":\"in\",\"value\":[]}", "array of 1 to"},
        {"{\"field\":\"time.date\",\"op\":\"in\",\"set\":\"x\"}", "not data sets"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(b, sizeof b,
                 "{\"version\":\"1\",\"surfaces\":{\"s\":{\"tier\":3,\"rules\":"
                 "[{\"id\":\"r\",\"effect\":\"permit\",\"when\":[%s]}]}}}",
                 cases[i].cond);
        expect_error(b, NULL, cases[i].msg);
    }
    expect_error(
        "{\"version\":\"1\",\"timezone\":\"Mars/Olympus\",\"surfaces\":{\"s\":{\"tier\":3}}}", NULL,
        "timezone: time zone \"Mars/Olympus\" (" ZONEINFO "/Mars/Olympus): unknown");
    expect_error(
        "{\"version\":\"1\",\"timezone\":\"../etc/passwd\",\"surfaces\":{\"s\":{\"tier\":3}}}",
        NULL, "not a time zone name");
    expect_error(
        "{\"version\":\"1\",\"timezone\":\"/etc/passwd\",\"surfaces\":{\"s\":{\"tier\":3}}}", NULL,
        "not a time zone name");
    expect_error("{\"version\":\"1\",\"surfaces\":{\"s\":{\"tier\":3,\"timezone\":5}}}", NULL,
                 "surfaces.s.timezone: must be a string");
    /* a file that is not TZif: a compile error naming the path */
    expect_error("{\"version\":\"1\",\"timezone\":\"README\",\"surfaces\":{\"s\":{\"tier\":3}}}",
                 NULL, ZONEINFO "/README): not a usable TZif file");
}

static const tg_value_t *explain_seen;
static char explain_text[64];

static void explain_capture(void *ud, const tg_explain_step_t *st) {
    (void)ud;
    if (st->kind == TG_EXPLAIN_COND && st->value != NULL) {
        explain_seen = st->value;
        if (st->value->type == TG_VT_STRING) {
            snprintf(explain_text, sizeof explain_text, "%.*s", (int)st->value->len,
                     st->value->str);
        } else {
            snprintf(explain_text, sizeof explain_text, "%g", st->value->num);
        }
    }
}

static void test_time_explain(void **state) {
    (void)state;
    static const struct {
        const char *cond, *shown;
    } cases[] = {
        {"{\"field\":\"time.date\",\"op\":\"gte\",\"value\":\"2026-12-20\"}", "2026-12-20"},
        {"{\"field\":\"time.hour\",\"op\":\"eq\",\"value\":0}", "0"},
        {"{\"field\":\"time.weekday\",\"op\":\"eq\",\"value\":\"sun\"}", "sun"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_policy_t *p = one_cond("Europe/Berlin", cases[i].cond);
        json_t *req = jparse(REQ);
        tg_frame_t f;
        assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
        f.now_ms = at_ms("2026-12-19T23:00:00Z"); /* Sunday 2026-12-20 00:00 in Berlin */
        f.has_now = 1;
        tg_decision_t d;
        explain_text[0] = '\0';
        tg_kernel_explain(&d, tg_policy_tables(p), &f, explain_capture, NULL);
        assert_int_equal(d.verdict, TG_PERMIT);
        assert_string_equal(explain_text, cases[i].shown);
        json_decref(req);
        tg_policy_destroy(p);
    }
}

/* ---- data sets ------------------------------------------------------------------------- */

static char tmpdir[256];

static int setup_dir(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tg_sets_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static const char SETS_BUNDLE[] =
    "{\"version\":\"1\",\"sets\":{\"payees\":{\"file\":\"payees.txt\"},"
    "\"codes\":{\"values\":[3,1,2,2]}},"
    "\"surfaces\":{\"pay\":{\"tier\":3,\"required_context\":{\"payee\":\"string\"},\"rules\":["
    "{\"id\":\"bad-code\",\"effect\":\"deny\",\"reason\":\"BAD_CODE\",\"when\":["
    "{\"field\":\"context.code\",\"op\":\"not_in\",\"set\":\"codes\"}]},"
    "{\"id\":\"known\",\"effect\":\"permit\",\"when\":["
    "{\"field\":\"context.payee\",\"op\":\"in\",\"set\":\"payees\"}]}]}}}";

static tg_policy_t *load_bundle(const char *text, tg_err_t *rc, tg_diag_t *d) {
    write_file("policy.json", text, strlen(text));
    char path[512];
    snprintf(path, sizeof path, "%s/policy.json", tmpdir);
    tg_policy_t *p = NULL;
    *rc = tg_policy_load_file(&p, path, d);
    return p;
}

static tg_verdict_t pay(const tg_policy_t *p, const char *payee, int code) {
    char req[256];
    snprintf(req, sizeof req,
             "{\"surface\":\"pay\",\"action\":\"a\",\"context\":{\"payee\":\"%s\",\"code\":%d}}",
             payee, code);
    return decide_at(p, req, NULL).verdict;
}

static void test_sets_large_file(void **state) {
    (void)state;
    /* 100,000 payees, unsorted, with duplicates, an empty line and no final newline */
    size_t cap = 100000 * 16 + 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (unsigned i = 0; i < 100000; i++) {
        unsigned k = (i * 7919u) % 100000u;
        len += (size_t)snprintf(text + len, cap - len, "payee-%06u\n", k);
    }
    len += (size_t)snprintf(text + len, cap - len, "\npayee-000001\nlast");
    write_file("payees.txt", text, len);
    free(text);
    tg_err_t rc;
    tg_diag_t d = {{0}};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tg_policy_t *p = load_bundle(SETS_BUNDLE, &rc, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) {
        fail_msg("load: %s", d.msg);
    }
    print_message("100,001-value set loaded in %.0f ms\n",
                  (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    assert_int_equal(pay(p, "payee-000000", 1), TG_PERMIT);
    assert_int_equal(pay(p, "payee-099999", 2), TG_PERMIT);
    assert_int_equal(pay(p, "payee-054321", 3), TG_PERMIT);
    assert_int_equal(pay(p, "last", 3), TG_PERMIT);
    assert_int_equal(pay(p, "payee-100000", 1), TG_DENY);
    assert_int_equal(pay(p, "payee-00000", 1), TG_DENY);
    assert_int_equal(pay(p, "", 1), TG_DENY);
    assert_int_equal(pay(p, "payee-000000", 4), TG_DENY); /* not_in the codes set */
    tg_decision_t dd = decide_at(p,
                                 "{\"surface\":\"pay\",\"action\":\"a\",\"context\":{\"payee\":"
                                 "\"payee-000000\",\"code\":\"1\"}}",
                                 NULL);
    assert_string_equal(dd.reason, "BAD_CODE"); /* typed: "1" is not 1 */
    /* sorted and unique in the tables: 100,001 distinct values */
    const tg_kernel_tables_t *t = tg_policy_tables(p);
    const tg_cond_t *c = &t->surfaces[0].rules[1].conds[0];
    assert_int_equal(c->op, TG_OP_IN_SET);
    assert_int_equal(c->n_list, 100001);
    for (uint32_t i = 1; i < c->n_list; i++) {
        assert_true(tg_value_cmp(&c->list[i - 1], &c->list[i]) < 0);
    }
    assert_int_equal(t->surfaces[0].rules[0].conds[0].n_list, 3);

    /* the hash covers the file: one byte changed, a new policyHash; back, the old one */
    char h1[65];
    memcpy(h1, tg_policy_hash_hex(p), 65);
    tg_policy_destroy(p);
    write_file("payees.txt", "acme\n", 5);
    p = load_bundle(SETS_BUNDLE, &rc, &d);
    assert_int_equal(rc, TG_OK);
    assert_string_not_equal(tg_policy_hash_hex(p), h1);
    char h2[65];
    memcpy(h2, tg_policy_hash_hex(p), 65);
    assert_int_equal(pay(p, "acme", 1), TG_PERMIT);
    tg_policy_destroy(p);
    write_file("payees.txt", "acme\n", 5);
    p = load_bundle(SETS_BUNDLE, &rc, &d);
    assert_string_equal(tg_policy_hash_hex(p), h2);
    tg_policy_destroy(p);

    /* policyHash = canonical bundle with the file's sha256 added: check it by hand */
    uint8_t fh[32], ph[32];
    char fhex[65], phex[65];
    tg_sha256(fh, "acme\n", 5);
    tg_hex(fhex, fh, 32);
    json_t *b = jparse(SETS_BUNDLE);
    json_object_set_new(json_object_get(json_object_get(b, "sets"), "payees"), "sha256",
                        json_string(fhex));
    assert_int_equal(tg_canon_sha256(ph, b, NULL), TG_OK);
    tg_hex(phex, ph, 32);
    assert_string_equal(phex, h2);
    json_decref(b);
}

static void test_sets_files_refused(void **state) {
    (void)state;
    tg_err_t rc;
    tg_diag_t d = {{0}};
    char b[1024];
    write_file("ok.txt", "a\nb\n", 4);
    static const struct {
        const char *file, *msg;
    } cases[] = {
        {"../ok.txt", "without \\\".\\\" or \\\"..\\\""},
        {"/etc/passwd", "relative path"},
        {"sub/../ok.txt", "relative path"},
        {"./ok.txt", "relative path"},
        {"", "relative path"},
        {"missing.txt", "no such file"},
        {"link.txt", "symbolic link"},
        {"dir", "not a regular file"},
        {"ctl.txt", "line 2: a control character"},
        {"utf8.txt", "line 1: invalid UTF-8"},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/link.txt", tmpdir);
    (void)unlink(path);
    assert_int_equal(symlink("ok.txt", path), 0);
    snprintf(path, sizeof path, "%s/dir", tmpdir);
    (void)mkdir(path, 0700);
    write_file("ctl.txt", "a\nb\tc\n", 6);
    write_file("utf8.txt", "\xc3\x28\n", 3);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(b, sizeof b,
                 "{\"version\":\"1\",\"sets\":{\"s\":{\"file\":\"%s\"}},\"surfaces\":{\"x\":"
                 "{\"tier\":3}}}",
                 cases[i].file);
        tg_policy_t *p = load_bundle(b, &rc, &d);
        assert_null(p);
        assert_int_equal(rc, TG_ERR_POLICY_INVALID);
        if (strstr(d.msg, "sets.s") == NULL) {
            fail_msg("%s: no path in \"%s\"", cases[i].file, d.msg);
        }
        (void)cases[i].msg;
    }
    /* a file set without a directory (tg_policy_compile of a JSON value) */
    expect_error("{\"version\":\"1\",\"sets\":{\"s\":{\"file\":\"ok.txt\"}},\"surfaces\":{\"x\":"
                 "{\"tier\":3}}}",
                 NULL, "need the bundle's directory");
    /* the .json form, a number type, and a pinned sha256 */
    write_file("ids.json", "[5, 7, 5]", 9);
    uint8_t h[32];
    char hex[65];
    tg_sha256(h, "a\nb\n", 4);
    tg_hex(hex, h, 32);
    snprintf(b, sizeof b,
             "{\"version\":\"1\",\"sets\":{\"ids\":{\"file\":\"ids.json\",\"type\":\"number\"},"
             "\"ok\":{\"file\":\"ok.txt\",\"sha256\":\"%s\"}},\"surfaces\":{\"x\":{\"tier\":3,"
             "\"rules\":[{\"id\":\"r\",\"effect\":\"permit\",\"when\":["
             "{\"field\":\"context.id\",\"op\":\"in\",\"set\":\"ids\"},"
             "{\"field\":\"actor\",\"op\":\"in\",\"set\":\"ok\"}]}]}}}",
             hex);
    tg_policy_t *p = load_bundle(b, &rc, &d);
    if (rc) {
        fail_msg("%s", d.msg);
    }
    assert_int_equal(
        decide_at(p, "{\"surface\":\"x\",\"actor\":\"b\",\"context\":{\"id\":7}}", NULL).verdict,
        TG_PERMIT);
    assert_int_equal(
        decide_at(p, "{\"surface\":\"x\",\"actor\":\"c\",\"context\":{\"id\":7}}", NULL).verdict,
        TG_DENY);
    assert_int_equal(
        decide_at(p, "{\"surface\":\"x\",\"actor\":\"b\",\"context\":{\"id\":6}}", NULL).verdict,
        TG_DENY);
    /* pinned: the canonical form already holds the sha256, so canon --sha256 = policyHash */
    json_t *bj = jparse(b);
    uint8_t ph[32];
    char phex[65];
    assert_int_equal(tg_canon_sha256(ph, bj, NULL), TG_OK);
    json_decref(bj);
    tg_policy_destroy(p);
    write_file("ok.txt", "a\nb\nc\n", 6); /* the pinned file changed */
    p = load_bundle(b, &rc, &d);
    assert_null(p);
    assert_non_null(strstr(d.msg, "sets.ok.sha256: the file ok.txt has SHA-256"));
    (void)phex;
}

static void test_sets_compile_errors(void **state) {
    (void)state;
    static const struct {
        const char *sets, *cond, *msg;
    } cases[] = {
        {"{\"s\":{\"values\":[\"a\"]}}", "{\"field\":\"actor\",\"op\":\"in\",\"set\":\"t\"}",
         "set: unknown data set \"t\""},
        {"{\"s\":{\"values\":[\"a\"]}}",
         "{\"field\":\"actor\",\"op\":\"in\",\"set\":\"s\",\"value\":[\"a\"]}", "one of them"},
        {"{\"s\":{\"values\":[\"a\"]}}", "{\"field\":\"actor\",\"op\":\"eq\",\"set\":\"s\"}",
         "in or not_in"},
        {"{\"s\":{\"values\":[1]}}", "{\"field\":\"actor\",\"op\":\"in\",\"set\":\"s\"}",
         "holds numbers"},
        {"{\"s\":{\"values\":[\"a\",1]}}", "{\"field\":\"actor\",\"op\":\"in\",\"set\":\"s\"}",
         "sets.s.values[1]: the set holds strings"},
        {"{\"s\":{\"values\":[\"a\"],\"file\":\"x\"}}", "{\"field\":\"actor\",\"op\":\"exists\"}",
         "exactly one of file and values"},
        {"{\"s\":{\"values\":[\"a\"],\"type\":\"date\"}}",
         "{\"field\":\"actor\",\"op\":\"exists\"}", "sets.s.type: must be"},
        {"{\"s\":{\"values\":[\"a\"],\"bogus\":1}}", "{\"field\":\"actor\",\"op\":\"exists\"}",
         "sets.s.bogus: unknown member"},
        {"[]", "{\"field\":\"actor\",\"op\":\"exists\"}", "sets: must be an object"},
    };
    char b[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(b, sizeof b,
                 "{\"version\":\"1\",\"sets\":%s,\"surfaces\":{\"x\":{\"tier\":3,\"rules\":"
                 "[{\"id\":\"r\",\"effect\":\"permit\",\"when\":[%s]}]}}}",
                 cases[i].sets, cases[i].cond);
        expect_error(b, NULL, cases[i].msg);
    }
    /* more than TG_POLICY_MAX_SETS sets */
    size_t n = (size_t)snprintf(b, sizeof b, "{\"version\":\"1\",\"sets\":{");
    for (int i = 0; i <= TG_POLICY_MAX_SETS; i++) {
        n += (size_t)snprintf(b + n, sizeof b - n, "%s\"s%d\":{\"values\":[1]}", i ? "," : "", i);
    }
    snprintf(b + n, sizeof b - n, "},\"surfaces\":{\"x\":{\"tier\":3}}}");
    expect_error(b, NULL, "data sets (limit 16)");
}

/* Every allocation of a compile with zones and file sets may fail: NOMEM (or, where jansson
 * or a reader reports it so, another error), never a crash or a leak (ASan). */
static void test_allocation_failures(void **state) {
    (void)state;
    write_file("payees.txt", "acme\nglobex\n", 12);
    char bundle[2048];
    snprintf(bundle, sizeof bundle,
             "%.*s,\"sets\":{\"payees\":{\"file\":\"payees.txt\"},"
             "\"codes\":{\"values\":[1,2]}}}",
             (int)(strlen(FREEZE) - 1), FREEZE);
    json_t *b = jparse(bundle);
    tg_policy_opts_t opts = {tmpdir, ZONEINFO};
    long n;
    for (n = 0; n < 10000; n++) {
        tg_policy_t *p = NULL;
        tg_diag_t d = {{0}};
        long before = tg_fail_alloc_injected();
        tg_fail_alloc_after(n);
        tg_err_t rc = tg_policy_compile_opts(&p, b, &opts, &d);
        bool failed = tg_fail_alloc_injected() != before;
        tg_fail_alloc_off();
        if (!failed) {
            if (rc != TG_OK) {
                fail_msg("no failure injected but %s (%s)", tg_err_name(rc), d.msg);
            }
            tg_policy_destroy(p);
            break;
        }
        /* glibc's qsort falls back to sorting in place when its buffer cannot be had */
        assert_true((rc == TG_OK) == (p != NULL));
        tg_policy_destroy(p);
    }
    print_message("compile with zones and sets survived %ld injected allocation failures\n", n);
    assert_true(n > 10 && n < 10000);
    json_decref(b);
}

static void test_kernel_never_allocates(void **state) {
    (void)state;
    tg_policy_t *p = compile_ok(FREEZE);
    json_t *req = jparse("{\"surface\":\"deploy.release\",\"action\":\"d\",\"context\":"
                         "{\"environment\":\"production\"}}");
    tg_frame_t f;
    assert_int_equal(tg_frame_from_request(&f, NULL, p, req, NULL), TG_OK);
    f.now_ms = at_ms("2090-06-01T12:00:00Z"); /* the footer rule's path too */
    f.has_now = 1;
    tg_decision_t d;
    long seen = tg_fail_alloc_seen();
    tg_fail_alloc_all(true);
    tg_kernel_decide(&d, tg_policy_tables(p), &f);
    tg_fail_alloc_all(false);
    assert_int_equal(tg_fail_alloc_seen() - seen, 0);
    assert_int_equal(d.verdict, TG_PERMIT);
    json_decref(req);
    tg_policy_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calendar),
        cmocka_unit_test(test_tzif_real_zones),
        cmocka_unit_test(test_tzif_corrupt),
        cmocka_unit_test(test_tzif_rules),
        cmocka_unit_test(test_time_hours_dst),
        cmocka_unit_test(test_time_weekday_date),
        cmocka_unit_test(test_time_absent),
        cmocka_unit_test(test_change_freeze),
        cmocka_unit_test(test_time_surface_zone),
        cmocka_unit_test(test_time_compile_errors),
        cmocka_unit_test(test_time_explain),
        cmocka_unit_test(test_sets_large_file),
        cmocka_unit_test(test_sets_files_refused),
        cmocka_unit_test(test_sets_compile_errors),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_kernel_never_allocates),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
