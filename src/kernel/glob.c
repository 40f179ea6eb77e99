/* glob.c — the `glob` operator's matcher (kernel_tables.h: tg_glob_match).
 *
 * Pattern language: `*` matches any run of code points (the empty one too), `?` exactly one
 * code point, every other byte itself. No escapes, no classes. Text and pattern are UTF-8
 * (request strings and bundle operands are validated by the JSON parser); a byte that does
 * not start a well-formed sequence counts as one code point of its own, so the matcher
 * never reads past the text whatever it is given.
 *
 * Why not the usual matcher: the backtracking two-pointer algorithm retries the rest of the
 * pattern after the last `*` from every text position, O(n·m). Here the pattern is split at
 * its stars into segments S0 * S1 * ... * Sk, and:
 *   - S0 must match at the start of the text and Sk at its end (each one fixed walk);
 *   - each middle segment is matched at its leftmost position after the previous one.
 * Leftmost is enough: if the middle segments match at all, they match with each one at its
 * leftmost possible place (moving a match left only leaves more text for the segments after
 * it, and the stars around it absorb the difference), so no choice is ever revisited, and
 * each segment's search starts where the previous one's match ended. The search itself:
 *   - a segment without `?` (the common case: `release/`, `.prod`) is found with KMP, whose
 *     failure table lives on the stack: at most 2 comparisons per text byte scanned;
 *   - a segment with `?` is tried at each code point in turn, at most its length L per try.
 * The text a segment scans is never scanned by another, so the total is O(m + n) for
 * patterns whose middle segments have no `?` (`*a*a*a*b`, `*aaaaaaaab*`: the ones that make
 * backtracking matchers quadratic) and O(m + n·L) in general, L the longest middle segment
 * with a `?`; never the O(n·m) of backtracking. `steps` counts the comparisons so that tests
 * check the bound without a clock.
 */
#include <stddef.h>
#include <stdint.h>

#include "trigguard/kernel_tables.h"

/* Bytes of the code point at s[0] (n > 0): the lead byte's length when its continuation
 * bytes follow, else 1. */
static size_t cp_fwd(const unsigned char *s, size_t n) {
    size_t want = s[0] < 0x80             ? 1
                  : (s[0] & 0xE0) == 0xC0 ? 2
                  : (s[0] & 0xF0) == 0xE0 ? 3
                  : (s[0] & 0xF8) == 0xF0 ? 4
                                          : 1;
    if (want > n) {
        return 1;
    }
    for (size_t i = 1; i < want; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            return 1;
        }
    }
    return want;
}

/* Bytes of the code point that ends at s[n-1] (n > 0): up to three continuation bytes and
 * the lead byte before them, when the lead byte says so; else 1. */
static size_t cp_back(const unsigned char *s, size_t n) {
    size_t k = 1;
    while (k < 4 && k < n && (s[n - k] & 0xC0) == 0x80) {
        k++;
    }
    if (k > 1 && cp_fwd(s + n - k, k) == k) {
        return k;
    }
    return 1;
}

/* Matches segment p[0..m) (no `*`) at the start of s[0..n): on success *used is the number
 * of text bytes it covered. */
static int seg_fwd(const unsigned char *p, size_t m, const unsigned char *s, size_t n, size_t *used,
                   uint64_t *steps) {
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
        (*steps)++;
        if (j >= n) {
            return 0;
        }
        if (p[i] == '?') {
            j += cp_fwd(s + j, n - j);
        } else if (p[i] == s[j]) {
            j++;
        } else {
            return 0;
        }
    }
    *used = j;
    return 1;
}

/* Matches segment p[0..m) so that it ends at the end of s[0..n); *used as seg_fwd. */
static int seg_back(const unsigned char *p, size_t m, const unsigned char *s, size_t n,
                    size_t *used, uint64_t *steps) {
    size_t j = n; /* text bytes not yet covered, from the start */
    for (size_t i = m; i > 0; i--) {
        (*steps)++;
        if (j == 0) {
            return 0;
        }
        if (p[i - 1] == '?') {
            j -= cp_back(s, j);
        } else if (p[i - 1] == s[j - 1]) {
            j--;
        } else {
            return 0;
        }
    }
    *used = n - j;
    return 1;
}

/* Segments of at most this many bytes without `?` are searched with KMP: its failure table
 * lives on the stack (2 KiB), the search compares at most 2·(end - *pos) bytes. */
#define KMP_MAX 1024

/* For a middle segment p[0..m) with no `?` (and 2 <= m <= KMP_MAX): the leftmost occurrence
 * of p in s[*pos..end) is written to *pos and 1 returned; 0 when there is none. Returns -1
 * (nothing done) when the segment does not qualify, so that the caller scans naively. */
static int literal_find(const unsigned char *p, size_t m, const unsigned char *s, size_t *pos,
                        size_t end, uint64_t *steps) {
    if (m < 2 || m > KMP_MAX) {
        return -1;
    }
    for (size_t i = 0; i < m; i++) {
        if (p[i] == '?') {
            return -1;
        }
    }
    uint16_t border[KMP_MAX]; /* border[i]: longest proper border of p[0..i] */
    border[0] = 0;
    size_t k = 0;
    for (size_t i = 1; i < m; i++) {
        while (k > 0 && p[i] != p[k]) {
            k = border[k - 1];
        }
        if (p[i] == p[k]) {
            k++;
        }
        border[i] = (uint16_t)k;
    }
    k = 0;
    for (size_t i = *pos; i < end; i++) {
        while (k > 0 && s[i] != p[k]) {
            (*steps)++;
            k = border[k - 1];
        }
        (*steps)++;
        if (s[i] == p[k]) {
            k++;
        }
        if (k == m) {
            *pos = i + 1 - m;
            return 1;
        }
    }
    *pos = end;
    return 0;
}

int tg_glob_match(const char *pattern, size_t m, const char *text, size_t n, uint64_t *steps) {
    uint64_t local = 0;
    uint64_t *st = steps != NULL ? steps : &local;
    const unsigned char *p = (const unsigned char *)pattern;
    const unsigned char *s = (const unsigned char *)text;
    size_t first = 0;
    while (first < m && p[first] != '*') {
        first++;
    }
    size_t used = 0;
    if (first == m) { /* no star: the whole text, exactly */
        return seg_fwd(p, m, s, n, &used, st) && used == n;
    }
    size_t last = m - 1;
    while (p[last] != '*') {
        last--;
    }
    if (!seg_fwd(p, first, s, n, &used, st)) {
        return 0;
    }
    size_t pos = used;
    size_t tail = 0;
    if (!seg_back(p + last + 1, m - last - 1, s + pos, n - pos, &tail, st)) {
        return 0;
    }
    size_t end = n - tail; /* the middle segments live in s[pos..end) */
    size_t i = first + 1;
    while (i < last) {
        size_t j = i;
        while (j < last && p[j] != '*') {
            j++;
        }
        int lit = j > i ? literal_find(p + i, j - i, s, &pos, end, st) : 1;
        if (lit == 0) {
            return 0;
        }
        if (lit == 1) {
            pos += j - i; /* a literal segment covers its own length */
        } else {
            int found = 0;
            while (pos < end) {
                if (seg_fwd(p + i, j - i, s + pos, end - pos, &used, st)) {
                    found = 1;
                    break;
                }
                pos += cp_fwd(s + pos, end - pos);
            }
            if (!found) {
                return 0;
            }
            pos += used;
        }
        i = j + 1;
    }
    return 1;
}
