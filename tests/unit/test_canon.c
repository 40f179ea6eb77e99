/* test_canon.c — RFC 8785 canonical JSON: vectors, ES6 numbers, strict parsing, limits. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "trigguard/canon.h"

#include "support/read.h"

/* ---------- helpers ---------- */

/* The RFC 8785 vectors kept in the repository (tests/vectors/jcs, see its README); ctest
 * runs this test in tests/unit. */
#define JCS_DIR "../vectors/jcs"

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir ending in suffix; returns count. Caller frees names and array. */
static size_t list_dir(char ***names_out, const char *dir, const char *suffix) {
    *names_out = NULL;
    DIR *d = opendir(dir);
    if (d == NULL) {
        fail_msg("cannot open directory %s", dir);
        return 0; /* not reached: fail_msg longjmps */
    }
    size_t n = 0, cap = 16;
    char **names = malloc(cap * sizeof *names);
    assert_non_null(names);
    struct dirent *e;
    size_t sl = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l <= sl || strcmp(e->d_name + l - sl, suffix) != 0) {
            continue;
        }
        if (n == cap) {
            cap *= 2;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    *names_out = names;
    return n;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
}

/* Parses text with lim, canonicalizes, compares with want; then checks the fixed point. */
static void expect_canon(const char *text, size_t len, const tg_json_limits_t *lim,
                         const char *want, size_t want_len, const char *label) {
    json_t *v = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&v, text, len, lim, &diag);
    if (rc) {
        fail_msg("%s: parse failed: %s: %s", label, tg_err_name(rc), diag.msg);
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_canon_write(&b, v, &diag), TG_OK);
    if (b.len != want_len || memcmp(b.data, want, want_len) != 0) {
        fail_msg("%s: got %s want %.*s", label, b.data, (int)want_len, want);
    }
    /* SHA-256 helper agrees with hashing the bytes. */
    uint8_t h1[32], h2[32];
    assert_int_equal(tg_canon_sha256(h1, v, NULL), TG_OK);
    tg_sha256(h2, b.data, b.len);
    assert_memory_equal(h1, h2, 32);
    /* Canonical form is a fixed point. */
    json_t *v2 = NULL;
    assert_int_equal(tg_json_parse(&v2, b.data, b.len, lim, NULL), TG_OK);
    tg_buf_t b2;
    tg_buf_init(&b2, 0);
    assert_int_equal(tg_canon_write(&b2, v2, NULL), TG_OK);
    assert_int_equal(b2.len, b.len);
    assert_memory_equal(b2.data, b.data, b.len);
    tg_buf_free(&b2);
    json_decref(v2);
    tg_buf_free(&b);
    json_decref(v);
}

static void expect_parse_err(const char *text, size_t len, const tg_json_limits_t *lim,
                             tg_err_t want, const char *label) {
    json_t *v = (json_t *)(uintptr_t)1; /* must be reset to NULL */
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&v, text, len, lim, &diag);
    if (rc != want) {
        fail_msg("%s: got %s want %s (%s)", label, tg_err_name(rc), tg_err_name(want), diag.msg);
    }
    assert_null(v);
    assert_true(diag.msg[0] != '\0');
}

static void expect_number(double d, const char *want) {
    char out[TG_CANON_NUMBER_MAX];
    size_t len = 0;
    assert_int_equal(tg_canon_number(out, &len, d), TG_OK);
    if (strcmp(out, want) != 0) {
        fail_msg("%a: got %s want %s", d, out, want);
    }
    assert_int_equal(len, strlen(want));
}

static double from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---------- JCS vectors ---------- */

static void test_jcs_vectors(void **state) {
    (void)state;
    char dir_in[512], dir_out[512], p[1024];
    snprintf(dir_in, sizeof dir_in, "%s/input", JCS_DIR);
    snprintf(dir_out, sizeof dir_out, "%s/output", JCS_DIR);
    char **names;
    size_t n = list_dir(&names, dir_in, ".json");
    assert_true(n >= 6);
    for (size_t i = 0; i < n; i++) {
        size_t il, ol;
        snprintf(p, sizeof p, "%s/%s", dir_in, names[i]);
        char *in = tg_test_read(p, &il);
        snprintf(p, sizeof p, "%s/%s", dir_out, names[i]);
        char *out = tg_test_read(p, &ol);
        expect_canon(in, il, NULL, out, ol, names[i]);
        free(in);
        free(out);
    }
    free_names(names, n);
}

/* tests/unit/vectors/canon/accept/<name>.json -> <name>.out */
static void test_accept_vectors(void **state) {
    (void)state;
    const char *dir = "vectors/canon/accept";
    char **names;
    char p[1024];
    size_t n = list_dir(&names, dir, ".json");
    assert_true(n >= 10);
    for (size_t i = 0; i < n; i++) {
        size_t il, ol;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        char *in = tg_test_read(p, &il);
        snprintf(p, sizeof p, "%s/%.*s.out", dir, (int)(strlen(names[i]) - 5), names[i]);
        char *out = tg_test_read(p, &ol);
        expect_canon(in, il, NULL, out, ol, names[i]);
        free(in);
        free(out);
    }
    free_names(names, n);
}

/* tests/unit/vectors/canon/reject/<TG_ERR_NAME>--<what>.json must fail with that error. */
static void test_reject_vectors(void **state) {
    (void)state;
    const char *dir = "vectors/canon/reject";
    char **names;
    char p[1024];
    size_t n = list_dir(&names, dir, ".json");
    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        const char *sep = strstr(names[i], "--");
        assert_non_null(sep);
        tg_err_t want = TG_ERR__COUNT;
        for (int e = 0; e < (int)TG_ERR__COUNT; e++) {
            const char *en = tg_err_name((tg_err_t)e);
            if (strlen(en) == (size_t)(sep - names[i]) && strncmp(en, names[i], strlen(en)) == 0) {
                want = (tg_err_t)e;
            }
        }
        if (want == TG_ERR__COUNT) {
            fail_msg("%s: unknown error name", names[i]);
        }
        size_t len;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        char *in = tg_test_read(p, &len);
        expect_parse_err(in, len, NULL, want, names[i]);
        free(in);
    }
    free_names(names, n);
}

/* ---------- ES6 numbers ---------- */

/* Lines "hex-bits,expected"; returns the number of lines checked. */
static size_t check_number_file(const char *p) {
    FILE *f = fopen(p, "r");
    if (f == NULL) {
        fail_msg("cannot open %s", p);
        return 0;
    }
    char line[128];
    size_t lines = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *comma = strchr(line, ',');
        assert_non_null(comma);
        *comma = '\0';
        char *want = comma + 1;
        want[strcspn(want, "\r\n")] = '\0';
        expect_number(from_bits(strtoull(line, NULL, 16)), want);
        lines++;
    }
    fclose(f);
    return lines;
}

static void test_es6_file(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/es6-numbers-1000.txt", JCS_DIR);
    assert_int_equal(check_number_file(p), 1000);
    /* Generated by node for this formatter's own code paths (see vectors/canon/README.md). */
    assert_true(check_number_file("vectors/canon/es6-extra.txt") > 3000);
}

typedef struct {
    crypto_hash_sha256_state hs;
    size_t lines;
    size_t checks;
} es6_gen_t;

static void es6_emit(es6_gen_t *g, uint64_t bits) {
    static const struct {
        size_t lines;
        const char *sha256;
    } published[] = {
        {1000, "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687"},
        {10000, "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892"},
        {100000, "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7"},
    };
    char num[TG_CANON_NUMBER_MAX], line[64];
    size_t nl;
    assert_int_equal(tg_canon_number(num, &nl, from_bits(bits)), TG_OK);
    int w = snprintf(line, sizeof line, "%llx,%s\n", (unsigned long long)bits, num);
    crypto_hash_sha256_update(&g->hs, (const unsigned char *)line, (unsigned long long)w);
    g->lines++;
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        if (published[i].lines == g->lines) {
            crypto_hash_sha256_state copy = g->hs;
            uint8_t h[32];
            char hex[65];
            crypto_hash_sha256_final(&copy, h);
            tg_hex(hex, h, sizeof h);
            if (strcmp(hex, published[i].sha256) != 0) {
                fail_msg("first %zu lines hash to %s, published %s", g->lines, hex,
                         published[i].sha256);
            }
            g->checks++;
        }
    }
}

/* The RFC 8785 ES6 number sequence: the static edge cases (the first lines of the published
 * file), 2,000 consecutive doubles upwards from the smallest normal, then a SHA-256 chain from
 * 32 zero bytes whose digests are read as four little-endian doubles (zeros and non-finite
 * values skipped). */
#define TG_ES6_STATIC 168
#define TG_ES6_RUN 2000
#define TG_ES6_LINES 100000
static void test_es6_sequence(void **state) {
    (void)state;
    es6_gen_t g;
    memset(&g, 0, sizeof g);
    crypto_hash_sha256_init(&g.hs);
    char p[512];
    snprintf(p, sizeof p, "%s/es6-numbers-1000.txt", JCS_DIR);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[128];
    for (int i = 0; i < TG_ES6_STATIC; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        es6_emit(&g, strtoull(line, NULL, 16));
    }
    /* The file continues with the run: check the boundary is where we think it is. */
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(strtoull(line, NULL, 16), 0x10000000000000ull);
    fclose(f);
    for (uint64_t i = 0; i < TG_ES6_RUN; i++) {
        es6_emit(&g, 0x10000000000000ull + i);
    }
    uint8_t block[32] = {0};
    while (g.lines < TG_ES6_LINES) {
        crypto_hash_sha256(block, block, sizeof block);
        for (int j = 0; j < 4 && g.lines < TG_ES6_LINES; j++) {
            uint64_t bits = 0;
            for (int k = 7; k >= 0; k--) {
                bits = bits << 8 | block[8 * j + k];
            }
            double d = from_bits(bits);
            if (d == 0 || !isfinite(d)) {
                continue;
            }
            es6_emit(&g, bits);
        }
    }
    assert_int_equal(g.checks, 3);
}

static void test_number_edges(void **state) {
    (void)state;
    expect_number(0.0, "0");
    expect_number(-0.0, "0");
    expect_number(1.0, "1");
    expect_number(-1.0, "-1");
    expect_number(0.1, "0.1");
    expect_number(0.1 + 0.2, "0.30000000000000004");
    expect_number(1e21, "1e+21");
    expect_number(nextafter(1e21, 0), "999999999999999900000");
    expect_number(1e20, "100000000000000000000");
    expect_number(1e-7, "1e-7");
    expect_number(nextafter(1e-7, 1), "1.0000000000000001e-7");
    expect_number(1e-6, "0.000001");
    expect_number(1.5e-7, "1.5e-7");
    expect_number(123456e-11, "0.00000123456");
    expect_number(-1e-7, "-1e-7");
    expect_number(9007199254740992.0, "9007199254740992");
    expect_number(9007199254740993.0, "9007199254740992"); /* the literal rounds like JS */
    expect_number(9007199254740994.0, "9007199254740994");
    expect_number(-9007199254740991.0, "-9007199254740991");
    expect_number(18446744073709551616.0, "18446744073709552000");
    expect_number(5e-324, "5e-324");
    expect_number(-5e-324, "-5e-324");
    expect_number(1.7976931348623157e308, "1.7976931348623157e+308");
    expect_number(2.2250738585072014e-308, "2.2250738585072014e-308");
    expect_number(1e23, "1e+23");
    expect_number(2500.75, "2500.75");
    expect_number(0.12, "0.12");
    expect_number(1e-22, "1e-22");
    expect_number(4.35, "4.35");
    /* Powers of two where the closest 16-digit decimal lies just outside the narrower lower
     * half of the rounding interval (node's output). */
    expect_number(from_bits(0x3e70000000000000ull), "5.960464477539063e-8");
    expect_number(from_bits(0x3d30000000000000ull), "5.684341886080802e-14");
    expect_number(from_bits(0x4580000000000000ull), "6.189700196426902e+26");
    expect_number(from_bits(0x7cf0000000000000ull), "6.386688990511104e+293");
    expect_number(from_bits(0x0060000000000000ull), "7.120236347223045e-307");
    /* Longest forms fit TG_CANON_NUMBER_MAX. */
    expect_number(-2.2250738585072014e-308, "-2.2250738585072014e-308");
    expect_number(-3.3333333333333333e-6, "-0.0000033333333333333333");

    char out[TG_CANON_NUMBER_MAX];
    size_t len = 99;
    assert_int_equal(tg_canon_number(out, &len, NAN), TG_ERR_JSON_NONFINITE);
    assert_int_equal(len, 0);
    assert_int_equal(tg_canon_number(out, &len, INFINITY), TG_ERR_JSON_NONFINITE);
    assert_int_equal(tg_canon_number(out, NULL, -INFINITY), TG_ERR_JSON_NONFINITE);
    assert_int_equal(tg_canon_number(out, NULL, 42.5), TG_OK);
    assert_string_equal(out, "42.5");
}

/* Every output reads back as the same double (strtod is correctly rounded, like JSON.parse). */
static void test_number_roundtrip(void **state) {
    (void)state;
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d = from_bits(x);
        if (!isfinite(d)) {
            continue;
        }
        char out[TG_CANON_NUMBER_MAX];
        size_t len;
        assert_int_equal(tg_canon_number(out, &len, d), TG_OK);
        assert_true(len < TG_CANON_NUMBER_MAX);
        assert_true(strtod(out, NULL) == d || (d == 0 && strcmp(out, "0") == 0));
    }
}

/* ---------- parser limits and arguments ---------- */

static char *nested(size_t depth, char open, char close, const char *inner) {
    size_t il = strlen(inner);
    char *s = malloc(2 * depth + il + 1);
    assert_non_null(s);
    memset(s, open, depth);
    memcpy(s + depth, inner, il);
    memset(s + depth + il, close, depth);
    s[2 * depth + il] = '\0';
    return s;
}

static void test_parse_depth(void **state) {
    (void)state;
    tg_json_limits_t def = TG_JSON_LIMITS_DEFAULT;
    char *ok = nested(def.max_depth, '[', ']', "1");
    char *want = nested(def.max_depth, '[', ']', "1");
    expect_canon(ok, strlen(ok), NULL, want, strlen(want), "arrays at max depth");
    free(ok);
    free(want);
    char *bad = nested(def.max_depth + 1, '[', ']', "");
    expect_parse_err(bad, strlen(bad), NULL, TG_ERR_JSON_DEPTH, "arrays at max+1");
    free(bad);

    /* Objects: {"a":{"a":...{}}} */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    for (size_t i = 0; i < def.max_depth; i++) {
        assert_int_equal(tg_buf_puts(&b, i + 1 < def.max_depth ? "{\"a\":" : "{}"), TG_OK);
    }
    for (size_t i = 1; i < def.max_depth; i++) {
        assert_int_equal(tg_buf_putc(&b, '}'), TG_OK);
    }
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, b.data, b.len, NULL, NULL), TG_OK);
    json_decref(v);
    tg_buf_reset(&b);
    for (size_t i = 0; i < def.max_depth + 1; i++) {
        assert_int_equal(tg_buf_puts(&b, i < def.max_depth ? "{\"a\":" : "{}"), TG_OK);
    }
    for (size_t i = 0; i < def.max_depth; i++) {
        assert_int_equal(tg_buf_putc(&b, '}'), TG_OK);
    }
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_json_parse(&v, b.data, b.len, NULL, &diag), TG_ERR_JSON_DEPTH);
    assert_non_null(strstr(diag.msg, "$.a.a.a"));
    tg_buf_free(&b);

    /* Scalars have depth 0: max_depth 0 accepts them and rejects any container. */
    tg_json_limits_t zero = {64, 0, 64, 8};
    assert_int_equal(tg_json_parse(&v, "\"s\"", 3, &zero, NULL), TG_OK);
    json_decref(v);
    expect_parse_err("[]", 2, &zero, TG_ERR_JSON_DEPTH, "depth 0");

    /* Past jansson's own ceiling (2048) the parser's stack guard answers. */
    tg_json_limits_t deep = {1 << 20, 100000, 4096, 256};
    char *huge = nested(3000, '[', ']', "");
    expect_parse_err(huge, strlen(huge), &deep, TG_ERR_JSON_DEPTH, "jansson depth");
    free(huge);
}

static void test_parse_sizes(void **state) {
    (void)state;
    tg_json_limits_t def = TG_JSON_LIMITS_DEFAULT;
    char *s = malloc(def.max_bytes + 2);
    assert_non_null(s);
    json_t *v = NULL;
    tg_diag_t diag = {{0}};

    /* String value: max bytes (UTF-8, multi-byte counts per byte) and max+1. */
    memset(s, 'x', def.max_string + 2);
    s[0] = '"';
    s[def.max_string + 1] = '"';
    assert_int_equal(tg_json_parse(&v, s, def.max_string + 2, NULL, NULL), TG_OK);
    json_decref(v);
    memset(s, 'x', def.max_string + 3);
    s[0] = '"';
    s[def.max_string + 2] = '"';
    assert_int_equal(tg_json_parse(&v, s, def.max_string + 3, NULL, &diag),
                     TG_ERR_JSON_STRING_LONG);
    assert_non_null(strstr(diag.msg, "string length"));
    /* The same 4097 bytes as 4095 x + one 2-byte character. */
    memcpy(s + def.max_string, "\xc3\xa9", 2);
    assert_int_equal(tg_json_parse(&v, s, def.max_string + 3, NULL, NULL), TG_ERR_JSON_STRING_LONG);
    /* Escapes count decoded: "\u00e9" x 2048 = 4096 bytes is fine. */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_buf_putc(&b, '"'), TG_OK);
    for (size_t i = 0; i < def.max_string / 2; i++) {
        assert_int_equal(tg_buf_puts(&b, "\\u00e9"), TG_OK);
    }
    assert_int_equal(tg_buf_putc(&b, '"'), TG_OK);
    assert_int_equal(tg_json_parse(&v, b.data, b.len, NULL, NULL), TG_OK);
    json_decref(v);

    /* Member name: max and max+1, nested so the path shows. */
    for (size_t extra = 0; extra < 2; extra++) {
        tg_buf_reset(&b);
        assert_int_equal(tg_buf_puts(&b, "{\"a\":[0,{\""), TG_OK);
        for (size_t i = 0; i < def.max_string + extra; i++) {
            assert_int_equal(tg_buf_putc(&b, 'k'), TG_OK);
        }
        assert_int_equal(tg_buf_puts(&b, "\":1}]}"), TG_OK);
        tg_err_t rc = tg_json_parse(&v, b.data, b.len, NULL, &diag);
        if (extra == 0) {
            assert_int_equal(rc, TG_OK);
            json_decref(v);
        } else {
            assert_int_equal(rc, TG_ERR_JSON_NAME_LONG);
            assert_non_null(strstr(diag.msg, "member name"));
            assert_non_null(strstr(diag.msg, "$.a[1].kkkk"));
        }
    }

    /* Members per object: max and max+1. */
    for (size_t extra = 0; extra < 2; extra++) {
        tg_buf_reset(&b);
        assert_int_equal(tg_buf_putc(&b, '{'), TG_OK);
        for (size_t i = 0; i < def.max_keys + extra; i++) {
            assert_int_equal(tg_buf_printf(&b, "%s\"k%zu\":%zu", i ? "," : "", i, i), TG_OK);
        }
        assert_int_equal(tg_buf_putc(&b, '}'), TG_OK);
        tg_err_t rc = tg_json_parse(&v, b.data, b.len, NULL, &diag);
        if (extra == 0) {
            assert_int_equal(rc, TG_OK);
            assert_int_equal(json_object_size(v), def.max_keys);
            json_decref(v);
        } else {
            assert_int_equal(rc, TG_ERR_JSON_MEMBERS);
            assert_non_null(strstr(diag.msg, "members"));
        }
    }
    tg_buf_free(&b);

    /* Body: max bytes (a number padded with whitespace) and max+1. */
    memset(s, ' ', def.max_bytes + 1);
    s[0] = '7';
    assert_int_equal(tg_json_parse(&v, s, def.max_bytes, NULL, NULL), TG_OK);
    assert_true(json_is_real(v));
    json_decref(v);
    assert_int_equal(tg_json_parse(&v, s, def.max_bytes + 1, NULL, &diag), TG_ERR_JSON_TOO_LARGE);
    assert_non_null(strstr(diag.msg, "65537"));
    assert_null(v);
    free(s);
}

static void test_parse_args(void **state) {
    (void)state;
    json_t *v = NULL;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_json_parse(NULL, "1", 1, NULL, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_json_parse(&v, NULL, 5, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_json_parse(&v, NULL, 0, NULL, NULL), TG_ERR_JSON_SYNTAX);
    /* Not NUL-terminated: only len bytes are read. */
    assert_int_equal(tg_json_parse(&v, "[1]]]]", 3, NULL, NULL), TG_OK);
    json_decref(v);
    /* Line, column and offset in the diagnostic. */
    assert_int_equal(tg_json_parse(&v, "{\n  \"a\": 1,\n  \"a\": 2}", 21, NULL, &diag),
                     TG_ERR_JSON_DUPLICATE_KEY);
    assert_non_null(strstr(diag.msg, "line 3"));
    assert_int_equal(tg_json_parse(&v, "[1,\n\"\xc3\x28\"]", 9, NULL, &diag), TG_ERR_JSON_UTF8);
    assert_non_null(strstr(diag.msg, "line 2, column 2, byte 5"));
    /* Numbers all become reals, parsed like JSON.parse. */
    const char *nums = "[12, -0, 9007199254740993]";
    assert_int_equal(tg_json_parse(&v, nums, strlen(nums), NULL, NULL), TG_OK);
    assert_true(json_is_real(json_array_get(v, 0)));
    assert_true(signbit(json_real_value(json_array_get(v, 1))));
    assert_true(json_real_value(json_array_get(v, 2)) == 9007199254740992.0);
    json_decref(v);
}

static int alloc_budget = -1; /* < 0: unlimited */

static void *failing_malloc(size_t n) {
    if (alloc_budget == 0) {
        return NULL;
    }
    if (alloc_budget > 0) {
        alloc_budget--;
    }
    return malloc(n);
}

/* Fills the stack below the caller's frame with `byte`. */
static __attribute__((noinline)) void paint_stack(unsigned char byte) {
    volatile unsigned char area[16384];
    for (size_t i = 0; i < sizeof area; i++) {
        area[i] = byte;
    }
}

/* tg_json_parse one frame further down, so that all of its frame lies in what paint_stack
 * painted (called from the same frame as this) and a local it never writes reads the paint,
 * not what the last call left there. */
static __attribute__((noinline)) tg_err_t parse_on_painted_stack(json_t **v, const char *text) {
    volatile unsigned char pad[1024];
    pad[0] = 0;
    tg_err_t rc = tg_json_parse(v, text, strlen(text), NULL, NULL);
    pad[sizeof pad - 1] = pad[0];
    return rc;
}

static void test_parse_nomem(void **state) {
    (void)state;
    const char *text = "{\"a\":[1,2,{\"b\":\"ccc\"}],\"d\":\"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\"}";
    json_set_alloc_funcs(failing_malloc, free);
    int saw_nomem = 0, ok = 0;
    for (int budget = 0; budget < 64 && !ok; budget++) {
        alloc_budget = budget;
        json_t *v = NULL;
        /* On some allocation failures jansson returns without setting the error code, which
         * then is whatever was on the stack: paint it as "duplicate key" so a parser that
         * reads it unset answers TG_ERR_JSON_DUPLICATE_KEY here every time. */
        paint_stack((unsigned char)json_error_duplicate_key);
        tg_err_t rc = parse_on_painted_stack(&v, text);
        if (rc == TG_OK) {
            ok = 1;
            json_decref(v);
        } else {
            /* jansson 2.14 reports some allocation failures as syntax errors. */
            assert_null(v);
            if (rc == TG_ERR_NOMEM) {
                saw_nomem = 1;
            } else if (rc != TG_ERR_JSON_SYNTAX) {
                alloc_budget = -1;
                json_set_alloc_funcs(malloc, free);
                fail_msg("allocation budget %d: %s, want out of memory or syntax", budget,
                         tg_err_name(rc));
            }
        }
    }
    alloc_budget = -1;
    json_set_alloc_funcs(malloc, free);
    assert_true(saw_nomem);
    assert_true(ok);
}

/* ---------- writer ---------- */

static void expect_write(const json_t *v, const char *want) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_canon_write(&b, v, &diag);
    if (rc) {
        fail_msg("write failed: %s: %s", tg_err_name(rc), diag.msg);
    }
    assert_string_equal(b.data, want);
    tg_buf_free(&b);
}

static void expect_write_err(const json_t *v, tg_err_t want, const char *diag_part) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_buf_puts(&b, "prefix"), TG_OK);
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_canon_write(&b, v, &diag);
    if (rc != want) {
        fail_msg("got %s want %s (%s)", tg_err_name(rc), tg_err_name(want), diag.msg);
    }
    assert_string_equal(b.data, "prefix"); /* output rolled back */
    assert_int_equal(b.len, 6);
    if (diag_part != NULL && strstr(diag.msg, diag_part) == NULL) {
        fail_msg("diag '%s' lacks '%s'", diag.msg, diag_part);
    }
    uint8_t h[32];
    memset(h, 0xAA, sizeof h);
    assert_int_equal(tg_canon_sha256(h, v, NULL), want);
    uint8_t zero[32] = {0};
    assert_memory_equal(h, zero, 32);
    tg_buf_free(&b);
}

static void test_write_values(void **state) {
    (void)state;
    json_t *v =
        json_pack("{s:I,s:I,s:I,s:f,s:f,s:[bbn],s:s}", "big", (json_int_t)9007199254740993LL, "max",
                  (json_int_t)INT64_MAX, "neg", (json_int_t)-42, "mz", -0.0, "r", 1e21, "lits", 1,
                  0, "s", "\xe2\x82\xac");
    assert_non_null(v);
    expect_write(v, "{\"big\":9007199254740992,\"lits\":[true,false,null],"
                    "\"max\":9223372036854776000,\"mz\":0,\"neg\":-42,\"r\":1e+21,"
                    "\"s\":\"\xe2\x82\xac\"}");
    json_decref(v);
    json_t *n = json_null();
    expect_write(n, "null");
    json_t *str = json_stringn("a\0b", 3); /* NUL built by code is escaped, not dropped */
    assert_non_null(str);
    expect_write(str, "\"a\\u0000b\"");
    json_decref(str);
    json_t *e = json_object();
    expect_write(e, "{}");
    json_decref(e);
    /* Appends after what the buffer holds. */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_buf_puts(&b, "x="), TG_OK);
    json_t *one = json_real(1.5);
    assert_int_equal(tg_canon_write(&b, one, NULL), TG_OK);
    assert_string_equal(b.data, "x=1.5");
    json_decref(one);
    tg_buf_free(&b);
}

static void test_write_errors(void **state) {
    (void)state;
    /* Depth: TG_CANON_MAX_DEPTH nested arrays are fine, one more is not. */
    json_t *root = json_array();
    json_t *cur = root;
    for (int i = 1; i < TG_CANON_MAX_DEPTH; i++) {
        json_t *next = json_array();
        assert_int_equal(json_array_append_new(cur, next), 0);
        cur = next;
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_canon_write(&b, root, NULL), TG_OK);
    assert_int_equal(b.len, 2 * TG_CANON_MAX_DEPTH);
    tg_buf_free(&b);
    assert_int_equal(json_array_append_new(cur, json_object()), 0);
    expect_write_err(root, TG_ERR_JSON_DEPTH, "nesting");
    json_decref(root);

    /* Strings and names built by code are validated. */
    json_t *bad = json_pack("{s:[i,o]}", "k", 1, json_stringn_nocheck("a\xc3", 2));
    assert_non_null(bad);
    expect_write_err(bad, TG_ERR_JSON_UTF8, "$.k[1]");
    json_decref(bad);
    bad = json_stringn_nocheck("\xed\xa0\x80", 3);
    expect_write_err(bad, TG_ERR_JSON_SURROGATE, "string");
    json_decref(bad);
    bad = json_object();
    assert_int_equal(json_object_setn_new_nocheck(bad, "\xc0\x80", 2, json_true()), 0);
    expect_write_err(bad, TG_ERR_JSON_UTF8, "member name");
    json_decref(bad);

    /* Arguments. */
    expect_write_err(NULL, TG_ERR_INVALID_ARG, "NULL");
    json_t *t = json_true();
    assert_int_equal(tg_canon_write(NULL, t, NULL), TG_ERR_INVALID_ARG);

    /* A value of no JSON type (defensive branch; jansson never builds one). */
    json_t fake;
    memset(&fake, 0, sizeof fake);
    fake.type = (json_type)42;
    fake.refcount = (size_t)-1;
    expect_write_err(&fake, TG_ERR_JSON_TYPE, "type");

    /* Output bound. */
    json_t *arr = json_pack("[s,s]", "0123456789", "abcdefghij");
    tg_buf_init(&b, 12);
    assert_int_equal(tg_canon_write(&b, arr, NULL), TG_ERR_LIMIT);
    assert_int_equal(b.len, 0);
    tg_buf_free(&b);
    tg_buf_init(&b, 27);
    assert_int_equal(tg_canon_write(&b, arr, NULL), TG_OK);
    assert_string_equal(b.data, "[\"0123456789\",\"abcdefghij\"]");
    tg_buf_free(&b);
    json_decref(arr);

    /* Every bound short of the full size fails cleanly at whichever byte crosses it. */
    json_t *doc = json_pack("{s:[i,f,s,b,n],s:{s:s,s:{}},s:s}", "a", 1, 2.5, "x\ny", 1, "b", "c",
                            "d", "e", "f", "g");
    assert_non_null(doc);
    const char *full =
        "{\"a\":[1,2.5,\"x\\ny\",true,null],\"b\":{\"c\":\"d\",\"e\":{}},\"f\":\"g\"}";
    for (size_t max = 1; max <= strlen(full); max++) {
        tg_buf_init(&b, max);
        tg_err_t rc = tg_canon_write(&b, doc, NULL);
        if (max < strlen(full)) {
            assert_int_equal(rc, TG_ERR_LIMIT);
            assert_int_equal(b.len, 0);
        } else {
            assert_int_equal(rc, TG_OK);
            assert_string_equal(b.data, full);
        }
        tg_buf_free(&b);
    }
    json_decref(doc);
}

/* UTF-16 code units of UTF-8 s (valid), for the reference order. */
static size_t to_utf16(uint16_t *out, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        uint32_t cp;
        if (*p < 0x80) {
            cp = *p++;
        } else if (*p < 0xE0) {
            cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
            p += 2;
        } else if (*p < 0xF0) {
            cp = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
            p += 3;
        } else {
            cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
                 (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
            p += 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            out[n++] = (uint16_t)(0xD800 | (cp >> 10));
            out[n++] = (uint16_t)(0xDC00 | (cp & 0x3FF));
        } else {
            out[n++] = (uint16_t)cp;
        }
    }
    return n;
}

static int utf16_cmp(const void *a, const void *b) {
    uint16_t x[64], y[64];
    size_t nx = to_utf16(x, *(const char *const *)a);
    size_t ny = to_utf16(y, *(const char *const *)b);
    for (size_t i = 0; i < nx && i < ny; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return (nx > ny) - (nx < ny);
}

static void utf8_put(char **p, uint32_t cp) {
    unsigned char *q = (unsigned char *)*p;
    if (cp < 0x80) {
        *q++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *q++ = (unsigned char)(0xC0 | cp >> 6);
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *q++ = (unsigned char)(0xE0 | cp >> 12);
        *q++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *q++ = (unsigned char)(0xF0 | cp >> 18);
        *q++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *q++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *q++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    *p = (char *)q;
}

/* Builds an object of n names from tricky code points, canonicalizes it and checks the member
 * order against a UTF-16 reference sort. */
static void check_sort(size_t n, uint32_t seed) {
    static const uint32_t cps[] = {0x41,     0x61,   0x7F,   0x80,   0x7FF,  0x800,   0xD7FF,
                                   0xE000,   0xF8FF, 0xFB33, 0xFFFD, 0xFFFF, 0x10000, 0x1F602,
                                   0x10FFFF, 0x20AC, 0xF6,   0x31,   0x0A};
    const size_t ncp = sizeof cps / sizeof cps[0];
    char **names = malloc(n * sizeof *names);
    assert_non_null(names);
    json_t *obj = json_object();
    uint32_t x = seed;
    for (size_t i = 0; i < n;) {
        char buf[40];
        char *p = buf;
        size_t len = 1 + (x % 3);
        for (size_t j = 0; j < len; j++) {
            x = x * 1103515245u + 12345u;
            utf8_put(&p, cps[(x >> 8) % ncp]);
        }
        *p = '\0';
        if (json_object_get(obj, buf) != NULL) {
            x = x * 1103515245u + 12345u;
            continue;
        }
        assert_int_equal(json_object_set_new(obj, buf, json_integer((json_int_t)i)), 0);
        names[i] = strdup(buf);
        i++;
    }
    qsort(names, n, sizeof *names, utf16_cmp);
    tg_buf_t want, got;
    tg_buf_init(&want, 0);
    tg_buf_init(&got, 0);
    assert_int_equal(tg_buf_putc(&want, '{'), TG_OK);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            assert_int_equal(tg_buf_putc(&want, ','), TG_OK);
        }
        assert_int_equal(tg_canon_string(&want, names[i], strlen(names[i])), TG_OK);
        assert_int_equal(
            tg_buf_printf(&want, ":%lld",
                          (long long)json_integer_value(json_object_get(obj, names[i]))),
            TG_OK);
        free(names[i]);
    }
    assert_int_equal(tg_buf_putc(&want, '}'), TG_OK);
    assert_int_equal(tg_canon_write(&got, obj, NULL), TG_OK);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    tg_buf_free(&want);
    tg_buf_free(&got);
    free(names);
    json_decref(obj);
}

static void test_sort_order(void **state) {
    (void)state;
    /* Astral (surrogate pair D800..) sorts before private use / BMP E000..FFFF. */
    json_t *v = json_pack("{s:i,s:i,s:i,s:i}", "\xef\xbf\xbf", 1, "\xee\x80\x80", 2,
                          "\xf0\x9f\x98\x82", 3, "\xed\x9f\xbf", 4);
    expect_write(v, "{\"\xed\x9f\xbf\":4,\"\xf0\x9f\x98\x82\":3,\"\xee\x80\x80\":2,"
                    "\"\xef\xbf\xbf\":1}");
    json_decref(v);
    check_sort(2, 1);
    check_sort(16, 2); /* insertion sort */
    check_sort(17, 3); /* heapsort */
    check_sort(256, 4);
    check_sort(700, 5); /* beyond the stack scratch: heap */
    /* Nested objects that together exceed the stack scratch: the inner one goes to the heap. */
    json_t *outer = json_object();
    json_t *inner = json_object();
    for (int j = 0; j < 300; j++) {
        char k[16];
        snprintf(k, sizeof k, "%03d", 299 - j);
        assert_int_equal(json_object_set_new(inner, k, json_integer(j)), 0);
        assert_int_equal(json_object_set_new(outer, k, j == 149 ? inner : json_integer(j)), 0);
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_canon_write(&b, outer, NULL), TG_OK);
    assert_int_equal(strncmp(b.data, "{\"000\":299,\"001\":298,", 21), 0);
    assert_non_null(strstr(b.data, "\"149\":150,\"150\":{\"000\":299,\"001\":298,"));
    assert_non_null(strstr(b.data, "\"299\":0},\"151\":148,"));
    assert_int_equal(strcmp(b.data + b.len - 8, "\"299\":0}"), 0);
    tg_buf_free(&b);
    /* The heap block comes from jansson's allocator: a failure there is TG_ERR_NOMEM. */
    json_set_alloc_funcs(failing_malloc, free);
    alloc_budget = 0;
    expect_write_err(outer, TG_ERR_NOMEM, "memory");
    alloc_budget = -1;
    json_set_alloc_funcs(malloc, free);
    json_decref(outer);
}

/* ---------- strings ---------- */

static void test_canon_string(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    /* Every ASCII byte: controls escaped (short forms where JSON has them), rest raw. */
    for (int c = 0; c < 0x80; c++) {
        char in = (char)c;
        char want[16];
        switch (c) {
        case '\b':
            strcpy(want, "\"\\b\"");
            break;
        case '\t':
            strcpy(want, "\"\\t\"");
            break;
        case '\n':
            strcpy(want, "\"\\n\"");
            break;
        case '\f':
            strcpy(want, "\"\\f\"");
            break;
        case '\r':
            strcpy(want, "\"\\r\"");
            break;
        case '"':
            strcpy(want, "\"\\\"\"");
            break;
        case '\\':
            strcpy(want, "\"\\\\\"");
            break;
        default:
            if (c < 0x20) {
                snprintf(want, sizeof want, "\"\\u%04x\"", (unsigned)c);
            } else {
                snprintf(want, sizeof want, "\"%c\"", c);
            }
        }
        tg_buf_reset(&b);
        assert_int_equal(tg_canon_string(&b, &in, 1), TG_OK);
        assert_string_equal(b.data, want);
    }
    /* Each ASCII byte at each offset of a longer string (the 8-byte fast path must stop
     * for exactly the special ones). */
    for (int c = 0; c < 0x80; c++) {
        char one = (char)c;
        tg_buf_reset(&b);
        assert_int_equal(tg_canon_string(&b, &one, 1), TG_OK);
        char esc[8];
        int el = snprintf(esc, sizeof esc, "%.*s", (int)(b.len - 2), b.data + 1);
        for (size_t len = 1; len <= 24; len++) {
            for (size_t pos = 0; pos < len; pos++) {
                char in[24], want[40];
                memset(in, 'a', len);
                in[pos] = (char)c;
                int w = snprintf(want, sizeof want, "\"%.*s%.*s%.*s\"", (int)pos, in, el, esc,
                                 (int)(len - pos - 1), in + pos + 1);
                tg_buf_reset(&b);
                assert_int_equal(tg_canon_string(&b, in, len), TG_OK);
                assert_int_equal(b.len, (size_t)w);
                assert_memory_equal(b.data, want, b.len);
            }
        }
    }
    /* A non-ASCII or invalid byte deep inside a long ASCII run is still seen. */
    char run[40];
    memset(run, 'z', sizeof run);
    run[29] = (char)0xC3;
    run[30] = (char)0xA9;
    tg_buf_reset(&b);
    assert_int_equal(tg_canon_string(&b, run, sizeof run), TG_OK);
    assert_memory_equal(b.data + 1, run, sizeof run);
    run[30] = 'z';
    assert_int_equal(tg_canon_string(&b, run, sizeof run), TG_ERR_JSON_UTF8);
    run[29] = (char)0xFF;
    assert_int_equal(tg_canon_string(&b, run, 30), TG_ERR_JSON_UTF8);
    /* Many escapes in a row grow the buffer past its first reservation. */
    char ctl[300];
    memset(ctl, 0x01, sizeof ctl);
    tg_buf_reset(&b);
    assert_int_equal(tg_canon_string(&b, ctl, sizeof ctl), TG_OK);
    assert_int_equal(b.len, 2 + 6 * sizeof ctl);
    /* Non-ASCII stays raw, including U+2028 and the largest code point. */
    tg_buf_reset(&b);
    const char *u = "\xc3\xa9\xe2\x80\xa8\xf4\x8f\xbf\xbf\xef\xbf\xbf";
    assert_int_equal(tg_canon_string(&b, u, strlen(u)), TG_OK);
    assert_int_equal(b.len, strlen(u) + 2);
    assert_memory_equal(b.data + 1, u, strlen(u));
    /* Empty. */
    tg_buf_reset(&b);
    assert_int_equal(tg_canon_string(&b, NULL, 0), TG_OK);
    assert_string_equal(b.data, "\"\"");

    /* Invalid input leaves the buffer as it was. */
    static const struct {
        const char *s;
        size_t n;
        tg_err_t want;
    } bad[] = {
        {"\x80", 1, TG_ERR_JSON_UTF8},
        {"ab\xc3", 3, TG_ERR_JSON_UTF8},
        {"\xc0\xaf", 2, TG_ERR_JSON_UTF8},
        {"\xc1\xbf", 2, TG_ERR_JSON_UTF8},
        {"\xe0\x9f\xbf", 3, TG_ERR_JSON_UTF8},
        {"\xe2\x28\xa1", 3, TG_ERR_JSON_UTF8},
        {"\xe2\x82", 2, TG_ERR_JSON_UTF8},
        {"\xf0\x8f\xbf\xbf", 4, TG_ERR_JSON_UTF8},
        {"\xf4\x90\x80\x80", 4, TG_ERR_JSON_UTF8},
        {"\xf5\x80\x80\x80", 4, TG_ERR_JSON_UTF8},
        {"\xf0\x9f\x98", 3, TG_ERR_JSON_UTF8},
        {"\xf0\x9f\x98\x41", 4, TG_ERR_JSON_UTF8},
        {"\xff", 1, TG_ERR_JSON_UTF8},
        {"x\n\xed\xa0\x80", 5, TG_ERR_JSON_SURROGATE},
        {"\xed\xbf\xbf", 3, TG_ERR_JSON_SURROGATE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_buf_reset(&b);
        assert_int_equal(tg_buf_puts(&b, "keep"), TG_OK);
        assert_int_equal(tg_canon_string(&b, bad[i].s, bad[i].n), bad[i].want);
        assert_string_equal(b.data, "keep");
    }
    assert_int_equal(tg_canon_string(&b, NULL, 3), TG_ERR_INVALID_ARG);
    tg_buf_free(&b);

    /* Bounded output: the opening reservation and a later escape both hit the limit. */
    tg_buf_init(&b, 4);
    assert_int_equal(tg_canon_string(&b, "abcd", 4), TG_ERR_LIMIT);
    assert_int_equal(b.len, 0);
    assert_int_equal(tg_canon_string(&b, "a\n", 2), TG_ERR_LIMIT);
    assert_int_equal(b.len, 0);
    assert_int_equal(tg_canon_string(&b, "ab", 2), TG_OK);
    assert_string_equal(b.data, "\"ab\"");
    tg_buf_free(&b);
}

/* ---------- hashing and hex ---------- */

static void test_sha_hex(void **state) {
    (void)state;
    uint8_t h[32];
    char hex[65];
    tg_sha256(h, "abc", 3);
    tg_hex(hex, h, sizeof h);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    tg_sha256(h, NULL, 0);
    tg_hex(hex, h, sizeof h);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    tg_hex(hex, h, 0);
    assert_string_equal(hex, "");

    uint8_t out[4];
    assert_int_equal(tg_unhex(out, 4, "00fFa9B1", 8), TG_OK);
    assert_int_equal(out[0], 0x00);
    assert_int_equal(out[1], 0xff);
    assert_int_equal(out[2], 0xa9);
    assert_int_equal(out[3], 0xb1);
    assert_int_equal(tg_unhex(out, 4, "00ff", 4), TG_ERR_INVALID_ARG);   /* short */
    assert_int_equal(tg_unhex(out, 2, "00ffa", 5), TG_ERR_INVALID_ARG);  /* odd */
    assert_int_equal(tg_unhex(out, 2, "00ffa9", 6), TG_ERR_INVALID_ARG); /* long */
    assert_int_equal(tg_unhex(out, 2, "0g00", 4), TG_ERR_INVALID_ARG);   /* non-hex */
    assert_int_equal(tg_unhex(out, 2, "00 0", 4), TG_ERR_INVALID_ARG);   /* space */
    assert_int_equal(tg_unhex(out, 1, "0\0", 2), TG_ERR_INVALID_ARG);    /* NUL */
    assert_int_equal(tg_unhex(out, 1, NULL, 2), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_unhex(out, 0, "", 0), TG_OK);
    assert_int_equal(tg_unhex(out, SIZE_MAX / 2 + 1, "00", 2), TG_ERR_INVALID_ARG);

    /* tg_canon_sha256 streams large documents through a small buffer: same digest. */
    json_t *arr = json_array();
    for (int i = 0; i < 3000; i++) {
        json_t *o = json_pack("{s:i,s:s,s:f}", "i", i, "s", "some text \n\"", "f", i / 7.0);
        assert_int_equal(json_array_append_new(arr, o), 0);
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_canon_write(&b, arr, NULL), TG_OK);
    assert_true(b.len > 40000);
    uint8_t h1[32], h2[32];
    tg_sha256(h1, b.data, b.len);
    assert_int_equal(tg_canon_sha256(h2, arr, NULL), TG_OK);
    assert_memory_equal(h1, h2, 32);
    tg_buf_free(&b);
    json_decref(arr);
}

/* Request-scoped jansson arena (canon.h): values made in a scope come from the thread's
 * arena and are reclaimed together at scope_end; past the arena, and outside scopes, malloc. */
static void test_json_arena(void **state) {
    (void)state;
    tg_json_alloc_install();
    /* made outside any scope: malloc'd, may be freed inside one */
    json_t *outside = json_pack("{s:[i,i,i]}", "a", 1, 2, 3);
    assert_non_null(outside);

    const char *text = "{\"surface\":\"payments.charge\",\"amount\":4999,\"tags\":[\"x\",\"y\"]}";
    tg_json_scope_begin();
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, text, strlen(text), NULL, NULL), TG_OK);
    assert_string_equal(json_string_value(json_object_get(v, "surface")), "payments.charge");
    assert_true(json_number_value(json_object_get(v, "amount")) == 4999.0);
    const void *first = json_object_get(v, "surface");
    json_decref(v);
    json_decref(outside); /* malloc'd: really freed, inside the scope */
    tg_json_scope_end();

    /* the next scope starts over: the same text lands at the same place */
    tg_json_scope_begin();
    assert_int_equal(tg_json_parse(&v, text, strlen(text), NULL, NULL), TG_OK);
    assert_ptr_equal(json_object_get(v, "surface"), first);
    json_decref(v);
    tg_json_scope_end();

    /* more than the arena holds: the rest comes from malloc, and everything frees cleanly */
    tg_buf_t big;
    tg_buf_init(&big, 0);
    assert_int_equal(tg_buf_putc(&big, '['), TG_OK);
    for (int i = 0; i < 8000; i++) {
        assert_int_equal(tg_buf_printf(&big, "%s{\"k%d\":\"value %d\"}", i ? "," : "", i, i),
                         TG_OK);
    }
    assert_int_equal(tg_buf_putc(&big, ']'), TG_OK);
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = big.len;
    tg_json_scope_begin();
    assert_int_equal(tg_json_parse(&v, big.data, big.len, &lim, NULL), TG_OK);
    assert_int_equal(json_array_size(v), 8000);
    assert_string_equal(json_string_value(json_object_get(json_array_get(v, 7999), "k7999")),
                        "value 7999");
    json_decref(v);
    tg_json_scope_end();
    tg_buf_free(&big);

    json_set_alloc_funcs(malloc, free);
}

int main(void) {
    if (sodium_init() < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jcs_vectors),      cmocka_unit_test(test_accept_vectors),
        cmocka_unit_test(test_reject_vectors),   cmocka_unit_test(test_es6_file),
        cmocka_unit_test(test_es6_sequence),     cmocka_unit_test(test_number_edges),
        cmocka_unit_test(test_number_roundtrip), cmocka_unit_test(test_parse_depth),
        cmocka_unit_test(test_parse_sizes),      cmocka_unit_test(test_parse_args),
        cmocka_unit_test(test_parse_nomem),      cmocka_unit_test(test_write_values),
        cmocka_unit_test(test_write_errors),     cmocka_unit_test(test_sort_order),
        cmocka_unit_test(test_canon_string),     cmocka_unit_test(test_sha_hex),
        cmocka_unit_test(test_json_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
