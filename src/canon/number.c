/* number.c — ECMAScript Number.prototype.toString for doubles (the RFC 8785 number form). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"

/* Decimal digits of a double: value = 0.d[0]d[1]..d[k-1] × 10^n (ECMAScript's s, k, n). */
typedef struct {
    char d[24];
    int k;
    int n;
} tg_digits_t;

static const double tg_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Writes the decimal digits of u (u > 0) into dg, without its trailing zeros. */
static void digits_from_u64(tg_digits_t *dg, uint64_t u, int exp10) {
    char tmp[24];
    int m = 0;
    while (u > 0) {
        tmp[m++] = (char)('0' + (int)(u % 10));
        u /= 10;
    }
    int z = 0;
    while (z < m && tmp[z] == '0') {
        z++;
    }
    dg->k = m - z;
    for (int i = 0; i < dg->k; i++) {
        dg->d[i] = tmp[m - 1 - i];
    }
    dg->n = m + exp10;
}

/* Exact shortcut for "decimal-looking" values (0.12, 2500.75, 5e-7): if t = |d|·10^j is an
 * integer below 10^15 and t/10^j rounds back to |d|, the decimal t×10^-j round-trips. A
 * round-tripping decimal of at most 15 significant digits is the unique one of its length
 * (15-digit spacing exceeds 2 ulp), so stripped of trailing zeros it is the shortest one.
 * Both 10^j (j <= 22) and t are exact doubles, so each check is one correctly rounded op. */
static int digits_short(tg_digits_t *dg, double a) {
#if FLT_EVAL_METHOD == 0
    for (int j = 0; j <= 22; j++) {
        double t = a * tg_pow10[j];
        if (t >= 1e15) {
            return 0;
        }
        if (t == floor(t) && t / tg_pow10[j] == a) {
            digits_from_u64(dg, (uint64_t)t, -j);
            return 1;
        }
    }
#else
    (void)dg;
    (void)a;
#endif
    return 0;
}

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 tg_u128;

/* 10^k for 0 <= k <= 38. */
static tg_u128 pow10_u128(int k) {
    tg_u128 r = 1;
    while (k >= 19) {
        r *= (tg_u128)10000000000000000000u;
        k -= 19;
    }
    for (; k > 0; k--) {
        r *= 10;
    }
    return r;
}

/* v = m·2^-s >= 10^p, exactly. */
static int ge_pow10(uint64_t m, int s, int p) {
    if (p >= 0) {
        return (tg_u128)m >= pow10_u128(p) << s;
    }
    return (tg_u128)m * pow10_u128(-p) >= (tg_u128)1 << s;
}

typedef struct {
    uint64_t m; /* v = m·2^-s */
    int s;
    int quarter;   /* lower neighbour is half as far (m = 2^52 at a binade start) */
    int inclusive; /* interval ends round to v (m even: ties go to even) */
    int n;         /* 10^(n-1) <= v < 10^n */
} tg_exact_t;

/* c = v·10^-q rounded to nearest (ties to even) and whether c·10^q rounds back to v, in exact
 * 128-bit integer arithmetic: with A/B = v·10^-q the rounding interval is A ± T/2 (lower: T/4
 * when quarter), T = 10^max(0,-q), all scaled by B. */
static int exact_round(uint64_t *c_out, int *below, const tg_exact_t *x, int k, int bump) {
    int q = x->n - k;
    tg_u128 t = pow10_u128(q < 0 ? -q : 0);
    tg_u128 a = (tg_u128)x->m * t;
    tg_u128 b = (tg_u128)1 << x->s;
    tg_u128 c = a >> x->s;
    if (q > 0) {
        b *= pow10_u128(q);
        c /= pow10_u128(q);
    }
    tg_u128 r = a - c * b;
    if (bump || 2 * r > b || (2 * r == b && (c & 1))) { /* bump: the candidate above */
        c++;
    }
    tg_u128 cb = c * b;
    int ok;
    *below = cb < a;
    if (cb >= a) {
        tg_u128 diff = cb - a;
        ok = 2 * diff < t || (2 * diff == t && x->inclusive);
    } else {
        tg_u128 diff = a - cb;
        tg_u128 scaled = x->quarter ? 4 * diff : 2 * diff;
        ok = scaled < t || (scaled == t && x->inclusive);
    }
    *c_out = (uint64_t)c;
    return ok;
}

/* The same search as digits_general (15 digits, 16, the 16-digit neighbour above, 17) done
 * in exact integer arithmetic instead of printf/strtod, for non-integers in [2^-12, 2^53):
 * there every quantity fits 128 bits (A < 2^120, c·B < 2^122). Returns 0 outside that range. */
static int digits_exact(tg_digits_t *dg, double a) {
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int be = (int)(bits >> 52 & 0x7FF);
    int s = 1075 - be;
    if (be == 0 || s < 1 || s > 64) {
        return 0;
    }
    tg_exact_t x;
    x.m = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
    x.s = s;
    x.quarter = x.m == UINT64_C(1) << 52 && be > 1;
    x.inclusive = (x.m & 1) == 0;
    x.n = (int)floor(log10(a)) + 1;
    while (!ge_pow10(x.m, s, x.n - 1)) {
        x.n--;
    }
    while (ge_pow10(x.m, s, x.n)) {
        x.n++;
    }
    uint64_t c;
    int below, k = 15;
    if (!exact_round(&c, &below, &x, 15, 0)) {
        k = 16;
        /* The nearest 16-digit candidate failed; if it was below v, the one above may not. */
        if (!exact_round(&c, &below, &x, 16, 0) &&
            (!below || !exact_round(&c, &below, &x, 16, 1))) {
            k = 17;
            if (!exact_round(&c, &below, &x, 17, 0)) {
                return 0; /* cannot happen (17 digits always round-trip); be safe */
            }
        }
    }
    digits_from_u64(dg, c, x.n - k);
    return 1;
}
#else
static int digits_exact(tg_digits_t *dg, double a) {
    (void)dg;
    (void)a;
    return 0;
}
#endif

/* "%.*e" of a with p significant digits into dg (n set from the exponent). Locale-proof:
 * only the digits and the exponent are read back. */
static void digits_printf(tg_digits_t *dg, double a, int p) {
    char buf[64];
    int w = snprintf(buf, sizeof buf, "%.*e", p - 1, a);
    int k = 0;
    const char *c = buf;
    while (*c != '\0' && *c != 'e' && k < p) {
        if (*c >= '0' && *c <= '9') {
            dg->d[k++] = *c;
        }
        c++;
    }
    while (*c != '\0' && *c != 'e') {
        c++;
    }
    long e = (w > 0 && *c == 'e') ? strtol(c + 1, NULL, 10) : 0;
    if (k == 0) { /* snprintf cannot fail here; keep the digits well-formed regardless */
        dg->d[k++] = '0';
    }
    dg->k = k;
    dg->n = (int)e + 1;
}

/* Does the decimal in dg read back (correctly rounded, as JSON.parse would) as a? */
static int digits_roundtrip(const tg_digits_t *dg, double a) {
    char buf[48];
    memcpy(buf, dg->d, (size_t)dg->k);
    (void)snprintf(buf + dg->k, sizeof buf - (size_t)dg->k, "e%d", dg->n - dg->k);
    return strtod(buf, NULL) == a;
}

static void digits_strip(tg_digits_t *dg) {
    while (dg->k > 1 && dg->d[dg->k - 1] == '0') {
        dg->k--;
    }
}

/* Adds one unit in the last digit place (carry may lengthen the exponent). */
static void digits_increment(tg_digits_t *dg) {
    int i = dg->k - 1;
    while (i >= 0 && dg->d[i] == '9') {
        dg->d[i] = '0';
        i--;
    }
    if (i >= 0) {
        dg->d[i]++;
    } else {
        dg->d[0] = '1';
        for (int j = 1; j < dg->k; j++) {
            dg->d[j] = '0';
        }
        dg->n++;
    }
}

/* Shortest round-tripping digits of a (finite, > 0), closest to a among equally short ones.
 * Normal doubles, 15 digits: correct rounding finds it whenever <= 15 digits suffice (see
 * digits_short).
 * 16 digits: the closest candidate usually wins; at a power of two the rounding interval is
 * narrower below, so when the closest lies below and misses, the one above may still hit.
 * 17 digits always round-trip (half the 17-digit spacing is below the narrowest half-gap). */
static void digits_general(tg_digits_t *dg, double a) {
    if (a < DBL_MIN) {
        /* Subnormals carry fewer than 53 bits, so short candidates are not unique there:
         * search every length. The interval is symmetric, so the closest one is enough. */
        for (int p = 1; p < 17; p++) {
            digits_printf(dg, a, p);
            if (digits_roundtrip(dg, a)) {
                digits_strip(dg);
                return;
            }
        }
        digits_printf(dg, a, 17);
        digits_strip(dg);
        return;
    }
    digits_printf(dg, a, 15);
    if (digits_roundtrip(dg, a)) {
        digits_strip(dg);
        return;
    }
    digits_printf(dg, a, 16);
    if (digits_roundtrip(dg, a)) {
        digits_strip(dg);
        return;
    }
    tg_digits_t up = *dg;
    digits_increment(&up);
    if (digits_roundtrip(&up, a)) {
        *dg = up;
        digits_strip(dg);
        return;
    }
    digits_printf(dg, a, 17);
    digits_strip(dg);
}

/* Lays the digits out as Number::toString does (ECMA-262 §6.1.6.1.20, steps 6-10). */
static size_t layout(char *out, const tg_digits_t *dg, int neg) {
    size_t o = 0;
    int k = dg->k, n = dg->n;
    if (neg) {
        out[o++] = '-';
    }
    if (k <= n && n <= 21) {
        memcpy(out + o, dg->d, (size_t)k);
        o += (size_t)k;
        for (int i = 0; i < n - k; i++) {
            out[o++] = '0';
        }
    } else if (0 < n && n <= 21) {
        memcpy(out + o, dg->d, (size_t)n);
        o += (size_t)n;
        out[o++] = '.';
        memcpy(out + o, dg->d + n, (size_t)(k - n));
        o += (size_t)(k - n);
    } else if (-6 < n && n <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -n; i++) {
            out[o++] = '0';
        }
        memcpy(out + o, dg->d, (size_t)k);
        o += (size_t)k;
    } else {
        int e = n - 1;
        out[o++] = dg->d[0];
        if (k > 1) {
            out[o++] = '.';
            memcpy(out + o, dg->d + 1, (size_t)(k - 1));
            o += (size_t)(k - 1);
        }
        out[o++] = 'e';
        out[o++] = e < 0 ? '-' : '+';
        unsigned ue = (unsigned)(e < 0 ? -e : e);
        char tmp[8];
        int m = 0;
        do {
            tmp[m++] = (char)('0' + ue % 10);
            ue /= 10;
        } while (ue > 0);
        while (m > 0) {
            out[o++] = tmp[--m];
        }
    }
    out[o] = '\0';
    return o;
}

tg_err_t tg_canon_number(char out[TG_CANON_NUMBER_MAX], size_t *len_out, double d) {
    if (!isfinite(d)) {
        out[0] = '\0';
        if (len_out != NULL) {
            *len_out = 0;
        }
        return TG_ERR_JSON_NONFINITE;
    }
    size_t len;
    if (d == 0) { /* also -0 */
        out[0] = '0';
        out[1] = '\0';
        len = 1;
    } else if (fabs(d) < 9007199254740992.0 && d == floor(d)) {
        /* Integers below 2^53 print as themselves: no digit search needed. */
        int neg = d < 0;
        uint64_t u = (uint64_t)(neg ? -d : d);
        char tmp[24];
        int m = 0;
        while (u > 0) {
            tmp[m++] = (char)('0' + (int)(u % 10));
            u /= 10;
        }
        len = 0;
        if (neg) {
            out[len++] = '-';
        }
        while (m > 0) {
            out[len++] = tmp[--m];
        }
        out[len] = '\0';
    } else {
        tg_digits_t dg;
        double a = fabs(d);
        if (!digits_short(&dg, a) && !digits_exact(&dg, a)) {
            digits_general(&dg, a);
        }
        len = layout(out, &dg, d < 0);
    }
    if (len_out != NULL) {
        *len_out = len;
    }
    return TG_OK;
}
