/* test_snapshot.c — the snapshot format (snapshot.h): round trip, every damage class refused,
 * the listing and pruning, and the ledger's side (tg_ledger_check_resume, open with resume). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "trigguard/ledger.h"
#include "trigguard/snapshot.h"

static char g_dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tg-snaptest.XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    assert_true(sodium_init() >= 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const uint8_t RH[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                               17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static tg_snap_info_t info_at(uint64_t seq) {
    tg_snap_info_t info;
    memset(&info, 0, sizeof info);
    info.at.seq = seq;
    info.at.pos = (tg_ledger_pos_t){.seq = seq, .offset = 4096, .segment = 3, .length = 700};
    memset(info.at.hash, 0xab, sizeof info.at.hash);
    info.created_ms = 1700000000000;
    info.retention_ms = 86400000;
    return info;
}

/* A snapshot at seq with two keys, a nonce, a receipt and a limit total; its path. */
static void write_snap(uint64_t seq, char *path, size_t cap) {
    tg_snap_writer_t *w = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_snap_writer_open(&w, g_dir, &d), TG_OK);
    tg_store_item_t k1 = {.kind = TG_STORE_ITEM_KEY,
                          .tenant = "acme",
                          .tenant_len = 4,
                          .key = "k-1",
                          .key_len = 3,
                          .stamp_ms = 111,
                          .status = 200,
                          .request_hash = RH,
                          .pos = {.seq = 1, .offset = 0, .segment = 1, .length = 500}};
    tg_store_item_t k2 = k1;
    k2.key = "k-2";
    k2.status = 403;
    k2.pos.seq = 2;
    tg_store_item_t n1 = {.kind = TG_STORE_ITEM_NONCE,
                          .tenant = "beta",
                          .tenant_len = 4,
                          .key = "n-1",
                          .key_len = 3,
                          .stamp_ms = 222};
    tg_store_item_t r1 = {.kind = TG_STORE_ITEM_RECEIPT,
                          .tenant = "acme",
                          .tenant_len = 4,
                          .key = "exec_00",
                          .key_len = 7,
                          .stamp_ms = 333,
                          .pos = {.seq = 1, .offset = 0, .segment = 1, .length = 500}};
    tg_db_limit_ref_t lim = {
        .limit = "daily", .limit_len = 5, .window_start_s = 86400, .window_s = 86400};
    memset(lim.key, 7, sizeof lim.key);
    assert_int_equal(tg_snap_put_item(w, &k1), TG_OK);
    assert_int_equal(tg_snap_put_item(w, &n1), TG_OK);
    assert_int_equal(tg_snap_put_item(w, &k2), TG_OK);
    assert_int_equal(tg_snap_put_item(w, &r1), TG_OK);
    assert_int_equal(tg_snap_put_limit(w, &lim, 12.5), TG_OK);
    tg_snap_info_t info = info_at(seq);
    char name[TG_SNAP_NAME_MAX];
    assert_int_equal(tg_snap_writer_commit(w, &info, name, sizeof name, &d), TG_OK);
    snprintf(path, cap, "%s/%s", g_dir, name);
}

typedef struct seen {
    int keys, nonces, receipts, limits;
    char last_key[16];
    int statuses[4];
    int64_t nonce_stamp;
    double total;
    tg_ledger_pos_t receipt_pos;
} seen_t;

static tg_err_t see_item(void *ud, const tg_store_item_t *it) {
    seen_t *s = ud;
    if (it->kind == TG_STORE_ITEM_KEY) {
        assert_memory_equal(it->request_hash, RH, 32);
        s->statuses[s->keys++] = it->status;
        snprintf(s->last_key, sizeof s->last_key, "%.*s", (int)it->key_len, it->key);
    } else if (it->kind == TG_STORE_ITEM_NONCE) {
        s->nonces++;
        s->nonce_stamp = it->stamp_ms;
        assert_memory_equal(it->tenant, "beta", 4);
    } else {
        s->receipts++;
        s->receipt_pos = it->pos;
    }
    return TG_OK;
}
static tg_err_t see_limit(void *ud, const tg_db_limit_ref_t *ref, double total) {
    seen_t *s = ud;
    s->limits++;
    s->total = total;
    assert_int_equal(ref->limit_len, 5);
    assert_int_equal(ref->window_s, 86400);
    return TG_OK;
}
static tg_err_t see_approval(void *ud, const tg_approval_t *a) {
    (void)ud;
    (void)a;
    fail_msg("no approval was written");
    return TG_OK;
}

static void test_round_trip(void **state) {
    (void)state;
    char path[512];
    write_snap(42, path, sizeof path);
    tg_snap_t *s = NULL;
    tg_snap_info_t info;
    char why[128];
    assert_int_equal(tg_snap_read(&s, &info, path, why, sizeof why), TG_OK);
    assert_int_equal(info.at.seq, 42);
    assert_int_equal(info.at.pos.seq, 42);
    assert_int_equal(info.at.pos.offset, 4096);
    assert_int_equal(info.at.pos.segment, 3);
    assert_int_equal(info.at.pos.length, 700);
    assert_int_equal(info.created_ms, 1700000000000);
    assert_int_equal(info.retention_ms, 86400000);
    assert_int_equal(info.counts[TG_SNAP_KEYS], 2);
    assert_int_equal(info.counts[TG_SNAP_NONCES], 1);
    assert_int_equal(info.counts[TG_SNAP_RECEIPTS], 1);
    assert_int_equal(info.counts[TG_SNAP_LIMITS], 1);
    assert_int_equal(info.counts[TG_SNAP_APPROVALS], 0);
    seen_t seen;
    memset(&seen, 0, sizeof seen);
    tg_snap_sink_t sink = {see_item, see_limit, see_approval, &seen};
    assert_int_equal(tg_snap_apply(s, &sink), TG_OK);
    assert_int_equal(seen.keys, 2);
    assert_int_equal(seen.statuses[0], 200);
    assert_int_equal(seen.statuses[1], 403);
    assert_string_equal(seen.last_key, "k-2");
    assert_int_equal(seen.nonces, 1);
    assert_int_equal(seen.nonce_stamp, 222);
    assert_int_equal(seen.receipts, 1);
    assert_int_equal(seen.receipt_pos.length, 500);
    assert_int_equal(seen.limits, 1);
    assert_true(seen.total == 12.5);
    tg_snap_free(s);
    struct stat st;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/%s", g_dir, TG_SNAP_TMP_NAME);
    assert_int_not_equal(stat(tmp, &st), 0); /* renamed away */
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 64);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void expect_refused(const char *path, const char *why_part) {
    tg_snap_t *s = (tg_snap_t *)1;
    tg_snap_info_t info;
    char why[256] = "";
    tg_err_t rc = tg_snap_read(&s, &info, path, why, sizeof why);
    assert_int_not_equal(rc, TG_OK);
    assert_null(s);
    if (strstr(why, why_part) == NULL) {
        fail_msg("reason \"%s\" does not name \"%s\"", why, why_part);
    }
}

static void test_damage(void **state) {
    (void)state;
    char path[512];
    write_snap(7, path, sizeof path);
    size_t len;
    uint8_t *orig = slurp(path, &len);
    uint8_t *b = malloc(len + 64);
    assert_non_null(b);
    char bad[600];
    snprintf(bad, sizeof bad, "%s.bad", path);
    /* every byte flipped, one at a time: never accepted */
    for (size_t i = 0; i < len; i++) {
        memcpy(b, orig, len);
        b[i] ^= 0x01;
        spit(bad, b, len);
        tg_snap_t *s = NULL;
        tg_snap_info_t info;
        char why[256];
        assert_int_not_equal(tg_snap_read(&s, &info, bad, why, sizeof why), TG_OK);
    }
    /* a flipped body byte: the check */
    memcpy(b, orig, len);
    b[TG_SNAP_HEADER_SIZE + 3] ^= 0x10;
    spit(bad, b, len);
    expect_refused(bad, "checksum");
    /* truncations: too short for a header, and cut anywhere */
    spit(bad, orig, 10);
    expect_refused(bad, "size");
    for (size_t cut = TG_SNAP_HEADER_SIZE + 32; cut < len; cut += 7) {
        spit(bad, orig, cut);
        expect_refused(bad, "length");
    }
    /* bytes appended */
    memcpy(b, orig, len);
    memset(b + len, 0, 16);
    spit(bad, b, len + 16);
    expect_refused(bad, "length");
    /* magic */
    memcpy(b, orig, len);
    b[0] = 'X';
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "magic");
    /* an unknown version, even with a valid check */
    memcpy(b, orig, len);
    b[4] = 2;
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "unknown version");
    /* counts that do not match the items, with a valid check */
    memcpy(b, orig, len);
    b[80] ^= 1; /* keys count */
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "counts");
    /* a malformed item (tenant length 0), with a valid check */
    memcpy(b, orig, len);
    assert_int_equal(b[TG_SNAP_HEADER_SIZE], 1); /* the first item is a key */
    b[TG_SNAP_HEADER_SIZE + 1] = 0;
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "malformed");
    /* an unknown item tag */
    memcpy(b, orig, len);
    b[TG_SNAP_HEADER_SIZE] = 9;
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "malformed");
    /* seq 0: no position */
    memcpy(b, orig, len);
    memset(b + 8, 0, 8);
    tg_snap_seal(b, len);
    spit(bad, b, len);
    expect_refused(bad, "position");
    /* missing */
    tg_snap_t *s = NULL;
    tg_snap_info_t info;
    char why[64];
    assert_int_equal(tg_snap_read(&s, &info, "/nonexistent/snapshot", why, sizeof why),
                     TG_ERR_NOT_FOUND);
    free(b);
    free(orig);
    unlink(bad);
}

static void test_bounds(void **state) {
    (void)state;
    tg_snap_writer_t *w = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_snap_writer_open(&w, g_dir, &d), TG_OK);
    char big[TG_STORE_MAX_KEY_LEN_LIMIT + 2];
    memset(big, 'x', sizeof big);
    tg_store_item_t it = {.kind = TG_STORE_ITEM_NONCE,
                          .tenant = "acme",
                          .tenant_len = 4,
                          .key = big,
                          .key_len = TG_STORE_MAX_KEY_LEN_LIMIT};
    assert_int_equal(tg_snap_put_item(w, &it), TG_OK); /* at the max */
    it.key_len = TG_STORE_MAX_KEY_LEN_LIMIT + 1;
    assert_int_equal(tg_snap_put_item(w, &it), TG_ERR_INVALID_ARG);
    it.key_len = 3;
    it.tenant_len = TG_STORE_TENANT_MAX + 1;
    assert_int_equal(tg_snap_put_item(w, &it), TG_ERR_INVALID_ARG);
    it.tenant_len = 4;
    it.kind = TG_STORE_ITEM_KEY; /* a key needs its request hash and a status */
    assert_int_equal(tg_snap_put_item(w, &it), TG_ERR_INVALID_ARG);
    tg_db_limit_ref_t lim = {.limit = big, .limit_len = TG_DB_LIMIT_NAME_MAX + 1, .window_s = 1};
    assert_int_equal(tg_snap_put_limit(w, &lim, 1), TG_ERR_INVALID_ARG);
    tg_snap_info_t info = info_at(0);
    assert_int_equal(tg_snap_writer_commit(w, &info, NULL, 0, &d), TG_ERR_INVALID_ARG);
    char tmp[512];
    struct stat st;
    snprintf(tmp, sizeof tmp, "%s/%s", g_dir, TG_SNAP_TMP_NAME);
    assert_int_not_equal(stat(tmp, &st), 0); /* a failed commit leaves no temp file */
}

static void test_list_and_keep(void **state) {
    (void)state;
    char path[512];
    write_snap(5, path, sizeof path);
    write_snap(1000, path, sizeof path);
    write_snap(99, path, sizeof path);
    spit(path, (const uint8_t *)"x", 1); /* overwrite 99's file: listed all the same */
    char other[512];
    snprintf(other, sizeof other, "%s/snapshot-12.tgs", g_dir); /* not a canonical name */
    spit(other, (const uint8_t *)"x", 1);
    char names[8][TG_SNAP_NAME_MAX];
    size_t n = 0;
    assert_int_equal(tg_snap_list(g_dir, names, 8, &n), TG_OK);
    assert_int_equal(n, TG_SNAP_KEEP); /* the oldest (5) was pruned when 99 was written */
    assert_string_equal(names[0], "snapshot-00000000000000001000.tgs");
    assert_string_equal(names[1], "snapshot-00000000000000000099.tgs");
    assert_int_equal(tg_snap_list("/nonexistent/dir", names, 8, &n), TG_OK);
    assert_int_equal(n, 0);
}

/* ---- the ledger's side ---- */

typedef struct replayed {
    uint64_t first, last, n;
} replayed_t;

static tg_err_t count_rec(void *ud, const tg_ledger_record_t *rec) {
    replayed_t *r = ud;
    if (r->n++ == 0) {
        r->first = rec->seq;
    }
    r->last = rec->seq;
    return TG_OK;
}

static tg_err_t keep_third(void *ud, const tg_ledger_record_t *rec) {
    tg_ledger_resume_t *at = ud;
    if (rec->seq == 3) {
        at->seq = rec->seq;
        at->pos = rec->pos;
        memcpy(at->hash, rec->hash, 32);
    }
    return TG_OK;
}

static void test_ledger_resume(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ledger", g_dir);
    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = dir;
    tg_ledger_t *l = NULL;
    tg_diag_t d = {{0}};
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &d), TG_OK);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(tg_ledger_append_sync(l, TG_LEDGER_TYPE_SILENCE, "m", 1, "{}", 2, NULL),
                         TG_OK);
    }
    uint64_t dseq;
    uint8_t dh[32];
    tg_ledger_durable(l, &dseq, dh);
    assert_int_equal(dseq, 6);
    /* following the ledger: from the start, then from where it stopped */
    tg_ledger_resume_t at;
    memset(&at, 0, sizeof at);
    replayed_t r = {0};
    assert_int_equal(tg_ledger_read_range(l, &at, 4, count_rec, &r, &d), TG_OK);
    assert_int_equal(r.first, 1);
    assert_int_equal(r.last, 4);
    assert_int_equal(at.seq, 4);
    r = (replayed_t){0};
    assert_int_equal(tg_ledger_read_range(l, &at, 6, count_rec, &r, &d), TG_OK);
    assert_int_equal(r.first, 5);
    assert_int_equal(r.n, 2);
    assert_memory_equal(at.hash, dh, 32);
    tg_ledger_close(l);

    tg_ledger_resume_t third;
    memset(&third, 0, sizeof third);
    l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, keep_third, &third, NULL, &d), TG_OK);
    tg_ledger_close(l);
    assert_int_equal(third.seq, 3);
    assert_int_equal(tg_ledger_check_resume(dir, &third, &d), TG_OK);

    /* open from seq 3: only 4..6 replayed, the head and count as a full open's */
    o.resume = &third;
    r = (replayed_t){0};
    tg_ledger_recovery_t rep;
    l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, count_rec, &r, &rep, &d), TG_OK);
    tg_ledger_close(l);
    assert_int_equal(r.first, 4);
    assert_int_equal(r.n, 3);
    assert_int_equal(rep.records, 6);
    assert_int_equal(rep.last_seq, 6);
    assert_memory_equal(rep.head_hash, dh, 32);

    /* a record hash the ledger does not have */
    tg_ledger_resume_t wrong = third;
    wrong.hash[0] ^= 1;
    assert_int_equal(tg_ledger_check_resume(dir, &wrong, &d), TG_ERR_LEDGER_CORRUPT);
    o.resume = &wrong;
    l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, count_rec, &r, NULL, &d), TG_ERR_LEDGER_CORRUPT);
    assert_null(l);
    /* a position that is not that record's */
    wrong = third;
    wrong.pos.offset += 1;
    assert_int_not_equal(tg_ledger_check_resume(dir, &wrong, &d), TG_OK);
    /* beyond the ledger's end */
    wrong = third;
    wrong.pos.offset = 1u << 20;
    assert_int_equal(tg_ledger_check_resume(dir, &wrong, &d), TG_ERR_NOT_FOUND);
    /* a segment that does not exist */
    wrong = third;
    wrong.pos.segment = 2;
    assert_int_equal(tg_ledger_check_resume(dir, &wrong, &d), TG_ERR_NOT_FOUND);
    o.resume = &wrong;
    l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, count_rec, &r, NULL, &d), TG_ERR_LEDGER_CORRUPT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_and_keep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_resume, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
