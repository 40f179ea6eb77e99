/* fuzz_snapshot.c — tg_snap_read and tg_snap_apply on arbitrary snapshot bodies. The input's
 * first 8 × TG_SNAP_N bytes are the header's item counts, the rest the body; the harness
 * writes a header that passes (magic, version, a ledger position, the body length) and seals
 * the image, so every input reaches the item parser instead of stopping at the check.
 * Properties: never a crash; a refusal is one of the documented errors; what is accepted
 * applies cleanly and hands out exactly the items its header counts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trigguard/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint64_t items, limits, approvals;
} tally_t;

static tg_err_t on_item(void *ud, const tg_store_item_t *it) {
    (void)it;
    ((tally_t *)ud)->items++;
    return TG_OK;
}

static tg_err_t on_limit(void *ud, const tg_db_limit_ref_t *ref, double total) {
    (void)ref;
    (void)total;
    ((tally_t *)ud)->limits++;
    return TG_OK;
}

static tg_err_t on_approval(void *ud, const tg_approval_t *a) {
    (void)a;
    ((tally_t *)ud)->approvals++;
    return TG_OK;
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* One file, rewritten per input: tg_snap_read takes a path (it maps the file). */
static char path[64];

static void remove_file(void) { (void)unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t counts_len = (size_t)8 * TG_SNAP_N;
    if (size < counts_len || size > (size_t)1 << 16) {
        return 0;
    }
    if (path[0] == '\0') {
        snprintf(path, sizeof path, "/tmp/tg-fuzz-snapshot-%ld", (long)getpid());
        (void)atexit(remove_file);
    }
    size_t body = size - counts_len;
    size_t len = TG_SNAP_HEADER_SIZE + body + TG_SNAP_CHECK_SIZE;
    uint8_t *b = calloc(1, len);
    if (b == NULL) {
        return 0;
    }
    memcpy(b, TG_SNAP_MAGIC, 4);
    b[4] = (uint8_t)TG_SNAP_VERSION;
    put64(b + 8, 1); /* P = seq 1 */
    b[24] = 1;       /* in segment 1 */
    memcpy(b + 80, data, counts_len);
    put64(b + 120, body);
    memcpy(b + TG_SNAP_HEADER_SIZE, data + counts_len, body);
    tg_snap_seal(b, len);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b, 1, len, f) != len) {
        abort(); /* the harness's own failure, not the parser's */
    }
    fclose(f);
    free(b);

    tg_snap_t *s = NULL;
    tg_snap_info_t info;
    char why[256];
    tg_err_t rc = tg_snap_read(&s, &info, path, why, sizeof why);
    if (rc != TG_OK) {
        if (s != NULL || (rc != TG_ERR_LEDGER_CORRUPT && rc != TG_ERR_NOMEM)) {
            abort();
        }
        return 0;
    }
    tally_t t = {0};
    tg_snap_sink_t sink = {on_item, on_limit, on_approval, &t};
    if (tg_snap_apply(s, &sink) != TG_OK ||
        t.items != info.counts[TG_SNAP_KEYS] + info.counts[TG_SNAP_NONCES] +
                       info.counts[TG_SNAP_RECEIPTS] ||
        t.limits != info.counts[TG_SNAP_LIMITS] || t.approvals != info.counts[TG_SNAP_APPROVALS]) {
        abort();
    }
    tg_snap_free(s);
    return 0;
}
