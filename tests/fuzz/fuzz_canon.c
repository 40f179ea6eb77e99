/* fuzz_canon.c — strict parse, canonicalize, re-parse, canonicalize: the form is a fixed point. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Any double formats to something that reads back as the same double. */
static void check_number(const uint8_t *data, size_t size) {
    if (size < 8) {
        return;
    }
    double d;
    memcpy(&d, data, sizeof d);
    char out[TG_CANON_NUMBER_MAX];
    size_t len = 0;
    tg_err_t rc = tg_canon_number(out, &len, d);
    if (!isfinite(d)) {
        if (rc != TG_ERR_JSON_NONFINITE) {
            abort();
        }
        return;
    }
    if (rc != TG_OK || len == 0 || len >= TG_CANON_NUMBER_MAX || strlen(out) != len) {
        abort();
    }
    double back = strtod(out, NULL);
    if (!(back == d || (d == 0 && strcmp(out, "0") == 0))) {
        abort();
    }
    if (d == 0) {
        return;
    }
    /* Brute-force oracle: the first precision p whose correctly rounded "%.*e" reads back.
     * Ours may only be shorter where a power of two's narrower lower interval lets the
     * neighbour above R_p in (the oracle misses those); otherwise it must be exactly R_p. */
    char ref[64];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(ref, sizeof ref, "%.*e", p - 1, fabs(d));
        if (strtod(ref, NULL) == fabs(d)) {
            break;
        }
    }
    char ours[TG_CANON_NUMBER_MAX], theirs[24];
    size_t no = 0, nt = 0;
    for (const char *c = out; *c != '\0' && *c != 'e'; c++) {
        if (*c >= '0' && *c <= '9' && (no > 0 || *c != '0')) {
            ours[no++] = *c;
        }
    }
    while (no > 1 && ours[no - 1] == '0') {
        no--;
    }
    for (const char *c = ref; *c != '\0' && *c != 'e'; c++) {
        if (*c >= '0' && *c <= '9') {
            theirs[nt++] = *c;
        }
    }
    while (nt > 1 && theirs[nt - 1] == '0') {
        nt--;
    }
    if (no > nt || (no == nt && memcmp(ours, theirs, no) != 0)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_number(data, size);

    json_t *v1 = NULL, *v2 = NULL;
    tg_buf_t c1, c2;
    tg_buf_init(&c1, 0);
    tg_buf_init(&c2, 0);
    if (tg_json_parse(&v1, (const char *)data, size, NULL, NULL) != TG_OK) {
        if (v1 != NULL) {
            abort(); /* failure must leave *out NULL */
        }
        return 0;
    }
    /* Whatever the strict parser accepts, the writer must be able to write. */
    if (tg_canon_write(&c1, v1, NULL) != TG_OK) {
        abort();
    }
    /* Numbers can grow ("1e20" -> 21 digits), everything else keeps its decoded size. */
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = 8 * size + 64;
    if (tg_json_parse(&v2, c1.data, c1.len, &lim, NULL) != TG_OK) {
        abort();
    }
    if (tg_canon_write(&c2, v2, NULL) != TG_OK) {
        abort();
    }
    if (c1.len != c2.len || memcmp(c1.data, c2.data, c1.len) != 0) {
        abort();
    }
    uint8_t h1[32], h2[32];
    if (tg_canon_sha256(h1, v1, NULL) != TG_OK) {
        abort();
    }
    tg_sha256(h2, c1.data, c1.len);
    if (memcmp(h1, h2, sizeof h1) != 0) {
        abort();
    }
    json_decref(v1);
    json_decref(v2);
    tg_buf_free(&c1);
    tg_buf_free(&c2);
    return 0;
}
