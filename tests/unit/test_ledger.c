/* test_ledger.c — ledger format, recovery, group commit, fault injection and verify. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/anchor.h"
#include "trigguard/ledger.h"

#include "support/fail_alloc.h"
#include "support/read.h"

/* ---- fault injection: -Wl,--wrap=pwrite,--wrap=fdatasync,--wrap=fsync,--wrap=write,
 * --wrap=pthread_create (see tests/unit/CMakeLists.txt); allocation failures come from
 * support/fail_alloc.h. Each fault fails its next `count` calls (-1 = every call) until
 * disarmed; disarmed wrappers call the real function. ---- */

typedef struct fault {
    atomic_int count;   /* calls left to fail; 0 = off; -1 = forever */
    int err;            /* errno to report */
    atomic_bool short_; /* pwrite/write only: the first failing call writes half and reports
                         * the short count; the later ones fail with err (a full disk) */
    atomic_bool short_done;
    atomic_int calls; /* every call seen (armed or not) */
} fault_t;

static fault_t f_pwrite, f_fdatasync, f_fsync, f_write, f_thread;
static atomic_bool g_block_sync; /* fdatasync waits while set */
static atomic_int g_sync_entered;
static atomic_int g_sync_ok; /* fdatasync calls that returned 0 */

ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);
int __real_fsync(int fd);
int __wrap_fsync(int fd);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

/* true if this call should fail (and consumes one armed failure). */
static bool take(fault_t *f) {
    atomic_fetch_add(&f->calls, 1);
    int c = atomic_load(&f->count);
    while (c != 0) {
        if (c < 0) {
            return true;
        }
        if (atomic_compare_exchange_weak(&f->count, &c, c - 1)) {
            return true;
        }
    }
    return false;
}

static void arm(fault_t *f, int count, int err, bool short_write) {
    f->err = err;
    atomic_store(&f->short_, short_write);
    atomic_store(&f->short_done, false);
    atomic_store(&f->count, count);
}

static void disarm_all(void) {
    fault_t *all[] = {&f_pwrite, &f_fdatasync, &f_fsync, &f_write, &f_thread};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        atomic_store(&all[i]->count, 0);
        atomic_store(&all[i]->short_, false);
    }
    atomic_store(&g_block_sync, false);
    tg_fail_alloc_off();
}

ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off) {
    if (take(&f_pwrite)) {
        if (atomic_load(&f_pwrite.short_) && n > 1 &&
            !atomic_exchange(&f_pwrite.short_done, true)) {
            return __real_pwrite(fd, buf, n / 2, off);
        }
        errno = f_pwrite.err;
        return -1;
    }
    return __real_pwrite(fd, buf, n, off);
}

int __wrap_fdatasync(int fd) {
    atomic_fetch_add(&g_sync_entered, 1);
    while (atomic_load(&g_block_sync)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (take(&f_fdatasync)) {
        errno = f_fdatasync.err;
        return -1;
    }
    int r = __real_fdatasync(fd);
    if (r == 0) {
        atomic_fetch_add(&g_sync_ok, 1);
    }
    return r;
}

int __wrap_fsync(int fd) {
    if (take(&f_fsync)) {
        errno = f_fsync.err;
        return -1;
    }
    return __real_fsync(fd);
}

ssize_t __wrap_write(int fd, const void *buf, size_t n) {
    if (take(&f_write)) {
        if (atomic_load(&f_write.short_) && n > 1 && !atomic_exchange(&f_write.short_done, true)) {
            return __real_write(fd, buf, n / 2);
        }
        errno = f_write.err;
        return -1;
    }
    return __real_write(fd, buf, n);
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
    if (take(&f_thread)) {
        return f_thread.err;
    }
    return __real_pthread_create(t, a, fn, arg);
}

/* ---- helpers ---- */

typedef struct tdir {
    char path[64];
} tdir_t;

static void tdir_make(tdir_t *d) {
    snprintf(d->path, sizeof d->path, "/tmp/tg_ledger_test_XXXXXX");
    assert_non_null(mkdtemp(d->path));
}

static void tdir_remove(tdir_t *d) {
    DIR *dd = opendir(d->path);
    if (dd != NULL) {
        struct dirent *e;
        while ((e = readdir(dd)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            char p[384];
            snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
            unlink(p);
        }
        closedir(dd);
    }
    rmdir(d->path);
}

static void seg_path(char *out, size_t n, const tdir_t *d, uint32_t seg) {
    char name[32];
    assert_int_equal(tg_ledger_segment_name(name, sizeof name, seg), TG_OK);
    snprintf(out, n, "%s/%s", d->path, name);
}

static uint8_t *slurp(const char *path, size_t *len) { return (uint8_t *)tg_test_read(path, len); }

static void spit(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) {
        assert_int_equal(fwrite(b, 1, len, f), len);
    }
    assert_int_equal(fclose(f), 0);
}

/* Overwrites one byte in place. */
static void poke(const char *path, size_t off, uint8_t v) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, (long)off, SEEK_SET), 0);
    assert_int_equal(fputc(v, f), v);
    assert_int_equal(fclose(f), 0);
}

static off_t fsize(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static tg_ledger_opts_t opts_for(const tdir_t *d) {
    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = d->path;
    o.retry_ms = TG_LEDGER_RETRY_NEVER;
    return o;
}

/* Payload of record i: deterministic JSON-ish text of varying length. */
static size_t make_payload(char *out, size_t cap, uint64_t i) {
    int n = snprintf(out, cap, "{\"decision\":\"PERMIT\",\"i\":%llu,\"pad\":\"%.*s\"}",
                     (unsigned long long)i, (int)(i % 37),
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    return (size_t)n;
}

static void append_n(tg_ledger_t *l, uint64_t from, uint64_t n) {
    for (uint64_t i = from; i < from + n; i++) {
        char p[128], m[32];
        size_t pl = make_payload(p, sizeof p, i);
        int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)i);
        tg_ledger_pos_t pos;
        uint8_t type = (i % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
        assert_int_equal(tg_ledger_append_sync(l, type, m, (size_t)ml, p, pl, &pos), TG_OK);
        assert_int_equal(pos.seq, i);
    }
}

/* A new directory holding a closed ledger of records 1..n (append_n's), and its options. */
static tg_ledger_opts_t ledger_of(tdir_t *d, uint64_t n) {
    tdir_make(d);
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, n);
    tg_ledger_close(l);
    return o;
}

/* Replay collector. */
typedef struct collect {
    uint64_t n;
    uint64_t last_seq;
    uint32_t last_seg;
    uint8_t last_hash[32];
    bool bad;
    tg_ledger_pos_t pos[64];
    tg_err_t fail_at_seq_rc;
    uint64_t fail_at_seq;
} collect_t;

static tg_err_t collect_fn(void *ud, const tg_ledger_record_t *rec) {
    collect_t *c = ud;
    if (c->fail_at_seq != 0 && rec->seq == c->fail_at_seq) {
        return c->fail_at_seq_rc;
    }
    char p[128], m[32];
    size_t pl = make_payload(p, sizeof p, rec->seq);
    int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)rec->seq);
    uint8_t type = (rec->seq % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
    if (rec->seq != c->last_seq + 1 || rec->type != type || rec->payload_len != pl ||
        memcmp(rec->payload, p, pl) != 0 || rec->meta_len != (size_t)ml ||
        memcmp(rec->meta, m, (size_t)ml) != 0 || rec->pos.seq != rec->seq ||
        rec->pos.segment < c->last_seg || memcmp(rec->prev_hash, c->last_hash, 32) != 0) {
        c->bad = true;
    }
    if (c->n < 64) {
        c->pos[c->n] = rec->pos;
    }
    c->n++;
    c->last_seq = rec->seq;
    c->last_seg = rec->pos.segment;
    memcpy(c->last_hash, rec->hash, 32);
    return TG_OK;
}

static void reopen_check(const tdir_t *d, uint64_t expect_records) {
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    collect_t c;
    memset(&c, 0, sizeof c);
    tg_ledger_recovery_t rep;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_ledger_open(&l, &o, collect_fn, &c, &rep, &diag);
    if (rc) {
        print_error("open: %s\n", diag.msg);
    }
    assert_int_equal(rc, TG_OK);
    assert_false(c.bad);
    assert_int_equal(c.n, expect_records);
    assert_int_equal(rep.records, expect_records);
    assert_int_equal(rep.last_seq, expect_records);
    assert_memory_equal(rep.head_hash, c.last_hash, 32);
    tg_ledger_close(l);
    tg_ledger_verify_report_t vr;
    rc = tg_ledger_verify_path(&vr, d->path, NULL, &diag);
    if (rc) {
        print_error("verify: %s\n", diag.msg);
    }
    assert_int_equal(rc, TG_OK);
    assert_int_equal(vr.records, expect_records);
    assert_memory_equal(vr.head_hash, c.last_hash, 32);
}

static int setup(void **state) {
    (void)state;
    disarm_all();
    return 0;
}

/* ---- tests ---- */

static void test_names(void **state) {
    (void)state;
    tg_durability_t d;
    assert_int_equal(tg_durability_parse(&d, "fsync"), TG_OK);
    assert_int_equal(d, TG_DURABILITY_FSYNC);
    assert_int_equal(tg_durability_parse(&d, "batch"), TG_OK);
    assert_int_equal(d, TG_DURABILITY_BATCH);
    assert_int_equal(tg_durability_parse(&d, "none"), TG_OK);
    assert_int_equal(d, TG_DURABILITY_NONE);
    assert_int_equal(tg_durability_parse(&d, "FSYNC"), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_durability_parse(&d, NULL), TG_ERR_INVALID_ARG);
    assert_string_equal(tg_durability_name((tg_durability_t)9), "unknown");
    char name[18];
    assert_int_equal(tg_ledger_segment_name(name, sizeof name, 42), TG_OK);
    assert_string_equal(name, "ledger-000042.tgl");
    assert_int_equal(tg_ledger_segment_name(name, 17, 42), TG_ERR_BUFFER_TOO_SMALL);
    char big[32];
    assert_int_equal(tg_ledger_segment_name(big, sizeof big, 1234567), TG_OK);
    assert_string_equal(big, "ledger-1234567.tgl");
}

/* Independent computations of the two record_hash definitions in ledger.h, from the bytes of
 * a record whose body (meta then payload) is body_len long. */
static void v2_hash(uint8_t out[32], const uint8_t *rec, size_t body_len) {
    uint8_t buf[60 + 32];
    memcpy(buf, rec, 60);
    crypto_hash_sha256(buf + 60, rec + 60, body_len);
    crypto_hash_sha256(out, buf, sizeof buf);
}

/* A version-1 record as earlier builds wrote it; returns its length. */
static size_t v1_encode(uint8_t *dst, uint8_t hash[32], uint8_t type, uint64_t seq,
                        const uint8_t prev[32], const char *meta, const char *payload) {
    size_t ml = strlen(meta), pl = strlen(payload);
    uint8_t h[32];
    memcpy(dst, "TGLR", 4);
    dst[4] = 1;
    dst[5] = type;
    dst[6] = dst[7] = 0;
    for (int i = 0; i < 8; i++) {
        dst[8 + i] = (uint8_t)(seq >> (8 * i));
    }
    memcpy(dst + 16, prev, 32);
    for (int i = 0; i < 4; i++) {
        dst[48 + i] = (uint8_t)(ml >> (8 * i));
        dst[52 + i] = (uint8_t)(pl >> (8 * i));
    }
    crypto_hash_sha256(h, dst, 56);
    memcpy(dst + 56, h, 4);
    memcpy(dst + 60, meta, ml);
    memcpy(dst + 60 + ml, payload, pl);
    crypto_hash_sha256(hash, dst, 60 + ml + pl);
    memcpy(dst + 60 + ml + pl, hash, 32);
    return 92 + ml + pl;
}

/* The bytes on disk follow the table of ledger.h exactly (an independent reader). */
static void test_layout(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, NULL), TG_OK);
    assert_true(rep.created);
    assert_int_equal(rep.records, 0);
    tg_ledger_pos_t p1, p2;
    assert_int_equal(tg_ledger_append_sync(l, 1, "ab", 2, "{\"x\":1}", 7, &p1), TG_OK);
    assert_int_equal(tg_ledger_append_sync(l, 2, NULL, 0, "{}", 2, &p2), TG_OK);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    tg_ledger_close(l);
    assert_int_equal(p1.seq, 1);
    assert_int_equal(p1.offset, 0);
    assert_int_equal(p1.segment, 1);
    assert_int_equal(p1.length, 92 + 2 + 7);
    assert_int_equal(p2.offset, p1.length);
    assert_int_equal(p2.length, 92 + 2);
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    size_t len;
    uint8_t *b = slurp(path, &len);
    assert_int_equal(len, p1.length + p2.length);
    static const uint8_t hdr1[] = {'T', 'G', 'L', 'R', 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(b, hdr1, sizeof hdr1);
    uint8_t zero[32] = {0}, h[32], h1[32];
    assert_memory_equal(b + 16, zero, 32);
    static const uint8_t lens1[] = {2, 0, 0, 0, 7, 0, 0, 0};
    assert_memory_equal(b + 48, lens1, 8);
    crypto_hash_sha256(h, b, 56);
    assert_memory_equal(b + 56, h, 4);
    assert_memory_equal(b + 60, "ab{\"x\":1}", 9);
    v2_hash(h1, b, 2 + 7);
    assert_memory_equal(b + 69, h1, 32);
    const uint8_t *r2 = b + p1.length;
    static const uint8_t hdr2[] = {'T', 'G', 'L', 'R', 2, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(r2, hdr2, sizeof hdr2);
    assert_memory_equal(r2 + 16, h1, 32); /* chained to record 1 */
    v2_hash(h, r2, 2);
    assert_memory_equal(r2 + 62, h, 32);
    assert_int_equal(st.head_seq, 2);
    assert_memory_equal(st.head_hash, h, 32);
    assert_int_equal(st.records, 2);
    assert_int_equal(st.bytes, len);
    assert_true(st.healthy);
    assert_int_equal(st.durability, TG_DURABILITY_FSYNC);
    assert_int_equal(st.segment, 1);
    assert_int_equal(st.segment_bytes, len);
    assert_true(st.fsyncs >= 2);
    free(b);
    tdir_remove(&d);
}

static void test_roundtrip(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 20);
    tg_ledger_close(l);
    reopen_check(&d, 20);
    /* Reopen, keep appending: the chain continues across opens. */
    collect_t c;
    memset(&c, 0, sizeof c);
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c, &rep, NULL), TG_OK);
    assert_false(rep.created);
    assert_false(rep.torn);
    assert_int_equal(rep.first_seq, 1);
    assert_int_equal(rep.segments, 1);
    append_n(l, 21, 5);
    /* read_at each replayed position returns the record's bytes */
    tg_buf_t pay, meta;
    tg_buf_init(&pay, 0);
    tg_buf_init(&meta, 0);
    for (uint64_t i = 0; i < 20; i++) {
        assert_int_equal(tg_ledger_read_at(l, &c.pos[i], &pay, &meta, NULL), TG_OK);
        char p[128], m[32];
        size_t pl = make_payload(p, sizeof p, i + 1);
        int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)(i + 1));
        assert_int_equal(pay.len, pl);
        assert_memory_equal(pay.data, p, pl);
        assert_int_equal(meta.len, (size_t)ml);
        assert_memory_equal(meta.data, m, (size_t)ml);
    }
    assert_int_equal(tg_ledger_read_at(l, &c.pos[3], NULL, NULL, NULL), TG_OK);
    tg_ledger_close(l);
    tg_buf_free(&pay);
    tg_buf_free(&meta);
    reopen_check(&d, 25);
    tdir_remove(&d);
}

static void test_args(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_open(NULL, &o, NULL, NULL, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_open(&l, NULL, NULL, NULL, NULL, NULL), TG_ERR_INVALID_ARG);
    tg_ledger_opts_t bad = o;
    bad.dir = NULL;
    assert_int_equal(tg_ledger_open(&l, &bad, NULL, NULL, NULL, NULL), TG_ERR_INVALID_ARG);
    bad = o;
    bad.durability = (tg_durability_t)7;
    assert_int_equal(tg_ledger_open(&l, &bad, NULL, NULL, NULL, &diag), TG_ERR_INVALID_ARG);
    bad = o;
    bad.dir = "/nonexistent-parent-dir/x/y";
    assert_int_equal(tg_ledger_open(&l, &bad, NULL, NULL, NULL, &diag), TG_ERR_IO);
    assert_null(l);

    /* the writer thread cannot start: nothing is left open (the lock is free again) */
    arm(&f_thread, 1, EAGAIN, false);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_INTERNAL);
    assert_null(l);
    disarm_all();
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    /* a second opener of the same directory is refused (flock) */
    tg_ledger_t *l2 = NULL;
    assert_int_equal(tg_ledger_open(&l2, &o, NULL, NULL, NULL, &diag), TG_ERR_IO);
    assert_non_null(strstr(diag.msg, "locked"));
    assert_null(l2);

    static uint8_t big[TG_LEDGER_PAYLOAD_MAX + 1];
    static uint8_t meta[TG_LEDGER_META_MAX + 1];
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_sync(l, 0, NULL, 0, "x", 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_sync(l, 5, NULL, 0, "x", 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 3, "x", 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, NULL, 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_sync(NULL, 1, NULL, 0, "x", 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "x", 1, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_sync(l, 1, meta, sizeof meta, "x", 1, &pos), TG_ERR_LIMIT);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, big, sizeof big, &pos), TG_ERR_LIMIT);
    /* exactly at the caps: accepted, and an empty payload too */
    assert_int_equal(
        tg_ledger_append_sync(l, 1, meta, TG_LEDGER_META_MAX, big, TG_LEDGER_PAYLOAD_MAX, &pos),
        TG_OK);
    assert_int_equal(pos.length, TG_LEDGER_RECORD_MAX);
    assert_int_equal(tg_ledger_append_sync(l, 2, NULL, 0, NULL, 0, &pos), TG_OK);
    assert_int_equal(pos.seq, 2);
    /* a redemption (type 3, record.h) is a record like the others */
    assert_int_equal(tg_ledger_append_sync(l, TG_LEDGER_TYPE_REDEMPTION, "m", 1, "{}", 2, &pos),
                     TG_OK);
    assert_int_equal(pos.seq, 3);
    /* allocation failure when copying the record */
    tg_fail_alloc_after(0);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, "x", 1, &pos), TG_ERR_NOMEM);
    disarm_all();
    assert_false(tg_ledger_healthy(NULL));
    assert_int_equal(tg_ledger_try_recover(NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK); /* healthy: nothing to do */
    tg_ledger_close(l);
    tg_ledger_close(NULL);

    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_OK);
    assert_int_equal(vr.records, 3);
    assert_int_equal(vr.receipts, 1);
    assert_int_equal(vr.silences, 1);
    assert_int_equal(vr.redemptions, 1);
    assert_true(vr.anchored);
    assert_int_equal(tg_ledger_verify_path(NULL, d.path, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_verify_path(&vr, NULL, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_verify_path(&vr, "/nonexistent/ledger", NULL, &diag),
                     TG_ERR_NOT_FOUND);
    assert_int_equal(tg_ledger_verify_path(&vr, "/dev/null", NULL, &diag), TG_ERR_IO);
    tdir_remove(&d);
    /* an empty directory has no ledger to verify */
    tdir_make(&d);
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, &diag), TG_ERR_NOT_FOUND);
    tdir_remove(&d);
}

static void test_replay_error(void **state) {
    (void)state;
    tdir_t d;
    tg_ledger_opts_t o = ledger_of(&d, 5);
    tg_ledger_t *l = NULL;
    collect_t c;
    memset(&c, 0, sizeof c);
    c.fail_at_seq = 3;
    c.fail_at_seq_rc = TG_ERR_LIMIT;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c, NULL, &diag), TG_ERR_LIMIT);
    assert_null(l);
    assert_int_equal(c.n, 2);
    assert_non_null(strstr(diag.msg, "seq 3"));
    /* the lock was released: a normal open works */
    reopen_check(&d, 5);
    tdir_remove(&d);
}

/* Truncate the last record at every byte offset: earlier records survive, the torn one is
 * reported and dropped, and the next append continues the chain. As after a crash, the
 * torn record is one ledger.head does not cover yet (it records seq 2). */
static void test_torn_every_offset(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.durability = TG_DURABILITY_NONE; /* speed; the file contents are what matter here */
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    tg_ledger_close(l);
    char hpath[128];
    snprintf(hpath, sizeof hpath, "%s/ledger.head", d.path);
    size_t hlen;
    uint8_t *head2 = slurp(hpath, &hlen); /* records seq 2 */
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 3, 1);
    tg_ledger_close(l);
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    size_t full;
    uint8_t *orig = slurp(path, &full);
    collect_t c0;
    memset(&c0, 0, sizeof c0);
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c0, NULL, NULL), TG_OK);
    tg_ledger_close(l);
    size_t last_off = (size_t)c0.pos[2].offset;
    assert_int_equal(last_off + c0.pos[2].length, full);
    for (size_t cut = last_off; cut < full; cut++) {
        spit(path, orig, cut);
        spit(hpath, head2, hlen);
        tg_ledger_verify_report_t vr;
        tg_err_t vrc = tg_ledger_verify_path(&vr, d.path, NULL, NULL);
        assert_int_equal(vrc, cut == last_off ? TG_OK : TG_ERR_LEDGER_TORN);
        assert_int_equal(vr.records, 2);
        if (cut > last_off) {
            assert_int_equal(vr.fault_offset, last_off);
            assert_int_equal(vr.fault_seq, 3);
            assert_int_equal(vr.torn_bytes, cut - last_off);
        }
        collect_t c;
        memset(&c, 0, sizeof c);
        tg_ledger_recovery_t rep;
        tg_diag_t diag = {{0}};
        tg_err_t rc = tg_ledger_open(&l, &o, collect_fn, &c, &rep, &diag);
        if (rc) {
            print_error("cut %zu: %s\n", cut, diag.msg);
        }
        assert_int_equal(rc, TG_OK);
        assert_int_equal(c.n, 2);
        assert_false(c.bad);
        assert_int_equal(rep.torn, cut > last_off);
        if (cut > last_off) {
            assert_int_equal(rep.torn_segment, 1);
            assert_int_equal(rep.torn_offset, last_off);
            assert_int_equal(rep.torn_bytes, cut - last_off);
            assert_non_null(strstr(rep.message, "torn"));
        }
        assert_int_equal(fsize(path), (off_t)last_off);
        append_n(l, 3, 1); /* seq 3 again, chained to record 2 */
        tg_ledger_close(l);
        size_t nlen;
        uint8_t *now = slurp(path, &nlen);
        assert_int_equal(nlen, full);
        assert_memory_equal(now, orig, full); /* deterministic: the same bytes as before */
        free(now);
    }
    free(orig);
    free(head2);
    reopen_check(&d, 3);
    tdir_remove(&d);
}

/* ledger.head (hostile6 F6): a start that finds fewer records than the head says were on
 * disk, or another record under its seq, is refused and changes nothing; without the file
 * the same ledger opens (the torn-tail rules alone); a damaged file is refused too. */
static void test_durable_head(void **state) {
    (void)state;
    tdir_t d;
    tg_ledger_opts_t o = ledger_of(&d, 5);
    tg_ledger_t *l = NULL;
    char path[128], hpath[128], moved[160];
    seg_path(path, sizeof path, &d, 1);
    snprintf(hpath, sizeof hpath, "%s/ledger.head", d.path);
    snprintf(moved, sizeof moved, "%s/head.moved", d.path);
    assert_int_equal(fsize(hpath), 1024);
    size_t full, hlen;
    uint8_t *orig = slurp(path, &full);
    uint8_t *head = slurp(hpath, &hlen);
    collect_t c0;
    memset(&c0, 0, sizeof c0);
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c0, NULL, NULL), TG_OK);
    tg_ledger_close(l);
    size_t last_off = (size_t)c0.pos[4].offset;
    tg_diag_t diag;
    tg_ledger_recovery_t rep;
    /* 1. cut at a record boundary (record 5 gone): refused, file untouched */
    spit(path, orig, last_off);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "seq 5 was on disk"));
    assert_non_null(strstr(diag.msg, "ends at seq 4"));
    assert_non_null(strstr(diag.msg, "1 durable records lost"));
    assert_non_null(strstr(diag.msg, "move ledger.head away"));
    assert_int_equal(fsize(path), (off_t)last_off);
    tg_ledger_verify_report_t vr; /* the offline check says the same */
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_ERR_LEDGER_CORRUPT);
    assert_true(vr.head_found);
    assert_int_equal(vr.head_seq, 5);
    assert_int_equal(vr.fault_seq, 5);
    assert_int_equal(vr.records, 4);
    assert_non_null(strstr(vr.fault_file, "ledger.head"));
    assert_non_null(strstr(vr.fault_what, "1 durable records lost"));
    /* 2. the last two records zeroed in place (the F6 reproduction): refused, untouched */
    uint8_t *z = malloc(full);
    assert_non_null(z);
    memcpy(z, orig, full);
    memset(z + c0.pos[3].offset, 0, full - c0.pos[3].offset);
    spit(path, z, full);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "2 durable records lost"));
    assert_int_equal(fsize(path), (off_t)full);
    /* 3. without ledger.head the zero tail is cut as torn, as before, and a new head is made */
    assert_int_equal(rename(hpath, moved), 0);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_OK);
    assert_true(rep.torn);
    assert_int_equal(rep.records, 3);
    tg_ledger_close(l);
    assert_int_equal(fsize(hpath), 1024);
    /* 4. another ledger of the same length under the old head: seq 5's hash differs */
    spit(hpath, head, hlen);
    tdir_t d2;
    tdir_make(&d2);
    tg_ledger_opts_t o2 = opts_for(&d2);
    assert_int_equal(tg_ledger_open(&l, &o2, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 4);
    tg_ledger_pos_t p5; /* seq 5 with other bytes than append_n's */
    assert_int_equal(tg_ledger_append_sync(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, &p5), TG_OK);
    assert_int_equal(p5.seq, 5);
    tg_ledger_close(l);
    char path2[128];
    seg_path(path2, sizeof path2, &d2, 1);
    size_t olen;
    uint8_t *o5 = slurp(path2, &olen);
    spit(path, o5, olen);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "seq 5 is not the record"));
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(vr.fault_what, "its hash differs"));
    free(o5);
    tdir_remove(&d2);
    /* 5. a damaged head: refused with the way out in the message; a wrong size too */
    spit(path, orig, full);
    uint8_t bad[1024];
    memcpy(bad, head, sizeof bad);
    bad[20] ^= 1;
    bad[512 + 20] ^= 1;
    spit(hpath, bad, sizeof bad);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "neither slot is valid"));
    assert_non_null(strstr(diag.msg, "move it away"));
    spit(hpath, head, 100);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "not a regular file of 1024 bytes"));
    /* 6. one damaged slot: the other still counts */
    for (size_t slot = 0; slot < 2; slot++) {
        memcpy(bad, head, sizeof bad);
        bad[slot * 512 + 20] ^= 1;
        spit(hpath, bad, sizeof bad);
        assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_OK);
        tg_ledger_close(l);
    }
    /* 7. the segments gone, the head kept: refused */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "ends at seq 0"));
    spit(path, orig, full);
    free(z);
    free(head);
    free(orig);
    reopen_check(&d, 5);
    tdir_remove(&d);
}

/* A tail of zero bytes (file extended without data after power loss) is torn; garbage is
 * corruption; so is an incomplete tail in a segment that is not the last. */
static void test_tails(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    tg_ledger_close(l);
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    size_t full;
    uint8_t *orig = slurp(path, &full);
    uint8_t *buf = calloc(1, full + 300);
    assert_non_null(buf);
    memcpy(buf, orig, full);
    tg_ledger_recovery_t rep;
    tg_diag_t diag;
    size_t zl[] = {1, 59, 60, 61, 300};
    for (size_t i = 0; i < sizeof zl / sizeof zl[0]; i++) {
        memset(buf + full, 0, 300);
        spit(path, buf, full + zl[i]);
        assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_OK);
        assert_true(rep.torn);
        assert_int_equal(rep.torn_bytes, zl[i]);
        assert_int_equal(rep.records, 2);
        tg_ledger_close(l);
    }
    /* non-zero garbage, short and long */
    static const char *garbage[] = {"x", "hello world", "TGLX"};
    for (size_t i = 0; i < 3; i++) {
        memcpy(buf + full, garbage[i], strlen(garbage[i]));
        spit(path, buf, full + strlen(garbage[i]));
        assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
        assert_non_null(strstr(diag.msg, "ledger-000001.tgl"));
        assert_non_null(strstr(diag.msg, "seq 3"));
    }
    memset(buf + full, 0, 300);
    memset(buf + full + 100, 0x41, 200);
    spit(path, buf, full + 300);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    /* a magic prefix longer than 60 bytes with a bad header is corrupt, not torn */
    memcpy(buf + full, orig, 60);
    buf[full + 20] ^= 1;
    spit(path, buf, full + 70);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "header check"));
    /* a complete header of a wrong sequence number whose body runs past EOF: corrupt */
    spit(path, buf, full);
    memcpy(buf + full, orig, 70); /* record 1's header again: seq 1, not 3 */
    spit(path, buf, full + 70);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "sequence number 1 where 3"));
    spit(path, orig, full);
    reopen_check(&d, 2);
    free(buf);
    free(orig);
    tdir_remove(&d);
}

/* Flip every bit of a small ledger: each flip is corruption, reported at the damaged record,
 * by verify and by open. */
static void test_bitflips(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 3);
    tg_ledger_close(l);
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    size_t full;
    uint8_t *orig = slurp(path, &full);
    collect_t c0;
    memset(&c0, 0, sizeof c0);
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c0, NULL, NULL), TG_OK);
    tg_ledger_close(l);
    for (size_t i = 0; i < full; i++) {
        size_t rec = 0;
        while (rec < 2 && i >= c0.pos[rec + 1].offset) {
            rec++;
        }
        for (int bit = 0; bit < 8; bit++) {
            poke(path, i, (uint8_t)(orig[i] ^ (1u << bit)));
            tg_ledger_verify_report_t vr;
            tg_err_t rc = tg_ledger_verify_path(&vr, path, NULL, NULL);
            if (rc != TG_ERR_LEDGER_CORRUPT) {
                print_error("byte %zu bit %d: %s\n", i, bit, tg_err_name(rc));
            }
            assert_int_equal(rc, TG_ERR_LEDGER_CORRUPT);
            assert_int_equal(vr.fault_offset, c0.pos[rec].offset);
            assert_int_equal(vr.fault_seq, rec + 1);
            assert_int_equal(vr.records, rec);
            if (bit == (int)(i % 8)) { /* open on one bit per byte (it is slower) */
                tg_diag_t diag;
                assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag),
                                 TG_ERR_LEDGER_CORRUPT);
                char want[64];
                snprintf(want, sizeof want, "seq %zu at offset %llu", rec + 1,
                         (unsigned long long)c0.pos[rec].offset);
                assert_non_null(strstr(diag.msg, want));
                assert_non_null(strstr(diag.msg, "ledger-000001.tgl"));
            }
        }
        poke(path, i, orig[i]);
    }
    reopen_check(&d, 3);
    free(orig);
    tdir_remove(&d);
}

static void test_rotation(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.segment_max_bytes = 600;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 30);
    /* a record larger than the limit gets a segment of its own */
    static uint8_t big[2000];
    tg_ledger_pos_t pos;
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, big, sizeof big, &pos), TG_OK);
    assert_int_equal(pos.segment, st.segment + 1);
    assert_int_equal(pos.offset, 0);
    tg_ledger_close(l);
    uint32_t nseg = pos.segment;
    assert_true(nseg >= 4);
    for (uint32_t s = 1; s <= nseg; s++) {
        char p[128];
        seg_path(p, sizeof p, &d, s);
        assert_true(fsize(p) <= 600 || s == nseg);
    }
    /* replay across segments (records 1..30 match the generator; 31 is the big one) */
    collect_t c;
    memset(&c, 0, sizeof c);
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c, &rep, NULL), TG_OK);
    assert_int_equal(rep.segments, nseg);
    assert_int_equal(rep.records, 31);
    assert_int_equal(c.n, 31);
    assert_int_equal(c.last_seg, nseg);
    /* the next append rotates again (the big segment is over the limit) */
    char pl[128];
    size_t pll = make_payload(pl, sizeof pl, 32);
    assert_int_equal(tg_ledger_append_sync(l, 1, "meta-32", 7, pl, pll, &pos), TG_OK);
    assert_int_equal(pos.segment, nseg + 1);
    tg_buf_t pay;
    tg_buf_init(&pay, 0);
    assert_int_equal(tg_ledger_read_at(l, &c.pos[0], &pay, NULL, NULL), TG_OK);
    assert_int_equal(tg_ledger_read_at(l, &c.pos[29], &pay, NULL, NULL), TG_OK);
    assert_true(c.pos[29].segment > 1);
    tg_buf_free(&pay);
    tg_ledger_close(l);
    tg_ledger_verify_report_t vr;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, &diag), TG_OK);
    assert_int_equal(vr.records, 32);
    assert_int_equal(vr.segments, nseg + 1);
    assert_int_equal(vr.first_segment, 1);
    assert_int_equal(vr.last_segment, nseg + 1);
    assert_int_equal(vr.first_seq, 1);
    assert_int_equal(vr.last_seq, 32);
    /* one middle segment alone verifies its internal chain, unanchored */
    char p2[128];
    seg_path(p2, sizeof p2, &d, 2);
    assert_int_equal(tg_ledger_verify_path(&vr, p2, NULL, &diag), TG_OK);
    assert_false(vr.anchored);
    assert_true(vr.first_seq > 1);
    assert_int_equal(vr.first_segment, 2);
    tdir_remove(&d);
}

/* Build a 4-segment ledger for the damage tests. */
static uint32_t build_segments(const tdir_t *d) {
    tg_ledger_opts_t o = opts_for(d);
    o.segment_max_bytes = 500;
    o.durability = TG_DURABILITY_NONE;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 16);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    tg_ledger_close(l);
    assert_true(st.segment >= 4);
    return st.segment;
}

static void expect_corrupt(const tdir_t *d, const char *needle) {
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_null(l);
    if (strstr(diag.msg, needle) == NULL) {
        print_error("open diag '%s' lacks '%s'\n", diag.msg, needle);
        fail();
    }
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d->path, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    if (strstr(diag.msg, needle) == NULL) {
        print_error("verify diag '%s' lacks '%s'\n", diag.msg, needle);
        fail();
    }
}

/* A ledger written in format version 1 by an earlier build opens, replays, verifies and takes
 * version-2 records chained onto its last version-1 record; damage to a version-1 record is
 * still caught. */
static void test_version1_compat(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    uint8_t seg[4096], prev[32] = {0}, hash[32];
    size_t len = 0;
    for (uint64_t i = 1; i <= 3; i++) {
        char p[128], m[32];
        (void)make_payload(p, sizeof p, i);
        (void)snprintf(m, sizeof m, "meta-%llu", (unsigned long long)i);
        uint8_t type = (i % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
        len += v1_encode(seg + len, hash, type, i, prev, m, p);
        memcpy(prev, hash, 32);
    }
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    spit(path, seg, len);
    reopen_check(&d, 3);

    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, NULL), TG_OK);
    assert_int_equal(rep.records, 3);
    assert_memory_equal(rep.head_hash, prev, 32);
    append_n(l, 4, 3);
    tg_ledger_close(l);
    reopen_check(&d, 6);
    size_t n;
    uint8_t *b = slurp(path, &n);
    assert_int_equal(b[4], 1);       /* the old records are left as they were */
    assert_int_equal(b[len + 4], 2); /* the new one is version 2, chained to the old head */
    assert_memory_equal(b + len + 16, prev, 32);
    free(b);

    /* a flipped payload bit in a version-1 record is corruption */
    poke(path, 70, seg[70] ^ 0x01);
    expect_corrupt(&d, "seq 1 ");
    tdir_remove(&d);
}

static void test_missing_segments(void **state) {
    (void)state;
    tdir_t d;
    char p[128], q[128];
    /* missing middle segment */
    tdir_make(&d);
    build_segments(&d);
    seg_path(p, sizeof p, &d, 2);
    assert_int_equal(unlink(p), 0);
    expect_corrupt(&d, "ledger-000002.tgl");
    tdir_remove(&d);
    /* missing first segment */
    tdir_make(&d);
    build_segments(&d);
    seg_path(p, sizeof p, &d, 1);
    assert_int_equal(unlink(p), 0);
    expect_corrupt(&d, "ledger-000001.tgl");
    tdir_remove(&d);
    /* a middle segment replaced by the next one (renumbered): the chain breaks */
    tdir_make(&d);
    uint32_t n = build_segments(&d);
    seg_path(p, sizeof p, &d, 2);
    seg_path(q, sizeof q, &d, 3);
    assert_int_equal(rename(q, p), 0);
    for (uint32_t s = 4; s <= n; s++) {
        seg_path(p, sizeof p, &d, s - 1);
        seg_path(q, sizeof q, &d, s);
        assert_int_equal(rename(q, p), 0);
    }
    expect_corrupt(&d, "ledger-000002.tgl: seq");
    tdir_remove(&d);
    /* an empty middle segment */
    tdir_make(&d);
    build_segments(&d);
    seg_path(p, sizeof p, &d, 2);
    assert_int_equal(truncate(p, 0), 0);
    expect_corrupt(&d, "ledger-000002.tgl");
    tdir_remove(&d);
    /* an incomplete record at the end of a middle segment is not a torn tail */
    tdir_make(&d);
    build_segments(&d);
    seg_path(p, sizeof p, &d, 2);
    assert_int_equal(truncate(p, fsize(p) - 1), 0);
    expect_corrupt(&d, "ledger-000002.tgl");
    tdir_remove(&d);
    /* a non-canonical segment name */
    tdir_make(&d);
    build_segments(&d);
    snprintf(p, sizeof p, "%s/ledger-7.tgl", d.path);
    spit(p, (const uint8_t *)"", 0);
    expect_corrupt(&d, "ledger-7.tgl");
    tdir_remove(&d);
    /* other files are ignored; a truncated last segment (an empty last segment) is fine */
    tdir_make(&d);
    n = build_segments(&d);
    snprintf(p, sizeof p, "%s/notes.txt", d.path);
    spit(p, (const uint8_t *)"hi", 2);
    seg_path(p, sizeof p, &d, n + 1);
    spit(p, (const uint8_t *)"", 0);
    reopen_check(&d, 16);
    tdir_remove(&d);
}

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_PER 2000

typedef struct gc_slot {
    atomic_int calls;
    uint64_t seq;
    tg_err_t status;
} gc_slot_t;

static gc_slot_t gc_slots[GC_THREADS][GC_PER];
static tg_ledger_t *gc_ledger;

static void gc_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    gc_slot_t *s = ud;
    s->seq = pos->seq;
    s->status = status;
    atomic_fetch_add(&s->calls, 1);
}

static void *gc_thread(void *arg) {
    size_t t = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < GC_PER; i++) {
        char p[64];
        int n = snprintf(p, sizeof p, "{\"t\":%zu,\"i\":%zu}", t, i);
        tg_err_t rc;
        while ((rc = tg_ledger_append(gc_ledger, 1, &t, sizeof t, p, (size_t)n, gc_done,
                                      &gc_slots[t][i])) == TG_ERR_OVERLOADED) {
            sched_yield();
        }
        if (rc != TG_OK) {
            return (void *)1;
        }
    }
    return NULL;
}

static void test_group_commit(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.queue_max = 4096;
    o.max_batch = 512;
    memset(gc_slots, 0, sizeof gc_slots);
    assert_int_equal(tg_ledger_open(&gc_ledger, &o, NULL, NULL, NULL, NULL), TG_OK);
    pthread_t th[GC_THREADS];
    for (size_t t = 0; t < GC_THREADS; t++) {
        assert_int_equal(pthread_create(&th[t], NULL, gc_thread, (void *)(uintptr_t)t), 0);
    }
    for (size_t t = 0; t < GC_THREADS; t++) {
        void *ret;
        assert_int_equal(pthread_join(th[t], &ret), 0);
        assert_null(ret);
    }
    tg_ledger_close(gc_ledger); /* drains: every done() has run when close returns */
    static uint8_t seen[GC_THREADS * GC_PER + 1];
    memset(seen, 0, sizeof seen);
    for (size_t t = 0; t < GC_THREADS; t++) {
        uint64_t prev = 0;
        for (size_t i = 0; i < GC_PER; i++) {
            gc_slot_t *s = &gc_slots[t][i];
            assert_int_equal(atomic_load(&s->calls), 1);
            assert_int_equal(s->status, TG_OK);
            assert_true(s->seq >= 1 && s->seq <= GC_THREADS * GC_PER);
            assert_true(s->seq > prev); /* one thread's appends keep their order */
            prev = s->seq;
            assert_int_equal(seen[s->seq], 0);
            seen[s->seq] = 1;
        }
    }
    /* replay sees exactly these records: record seq's meta names its thread */
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_OK);
    assert_int_equal(vr.records, GC_THREADS * GC_PER);
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, NULL), TG_OK);
    assert_int_equal(rep.last_seq, GC_THREADS * GC_PER);
    tg_ledger_close(l);
    tdir_remove(&d);
}

/* Group-commit delay: while a caller has announced a record, the writer holds the batch
 * (here for up to 60 s); the last tg_ledger_announce_end releases it at once, and close
 * releases it too. */
typedef struct delay_arg {
    tg_ledger_t *l;
    atomic_int done;
    tg_err_t rc;
} delay_arg_t;

static void *delay_append(void *arg) {
    delay_arg_t *a = arg;
    tg_ledger_pos_t pos;
    a->rc = tg_ledger_append_sync(a->l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, &pos);
    atomic_store(&a->done, 1);
    return NULL;
}

static void delay_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    (void)pos;
    delay_arg_t *a = ud;
    a->rc = status;
    atomic_store(&a->done, 1);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* a's record is still held by the writer's delay; closing the ledger makes it durable at
 * once (close returns after every done() has run), leaving `records` records. */
static void close_releases(tg_ledger_t *l, delay_arg_t *a, tdir_t *d, uint64_t records) {
    assert_int_equal(atomic_load(&a->done), 0);
    tg_ledger_close(l);
    assert_int_equal(atomic_load(&a->done), 1);
    assert_int_equal(a->rc, TG_OK);
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d->path, NULL, NULL), TG_OK);
    assert_int_equal(vr.records, records);
    tdir_remove(d);
}

/* A fresh ledger in a new test directory, with the given group-commit delay. */
static tg_ledger_t *open_delayed(tdir_t *d, uint32_t delay_us) {
    tdir_make(d);
    tg_ledger_opts_t o = opts_for(d);
    o.commit_delay_us = delay_us;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    return l;
}

static void test_commit_delay(void **state) {
    (void)state;
    tdir_t d;
    tg_ledger_t *l = open_delayed(&d, 60u * 1000 * 1000);
    delay_arg_t a = {.l = l};
    atomic_init(&a.done, 0);
    tg_ledger_announce(l);
    tg_ledger_announce(l);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, delay_append, &a), 0);
    sleep_ms(50);
    assert_int_equal(atomic_load(&a.done), 0); /* held: two announcements outstanding */
    tg_ledger_announce_end(l);
    sleep_ms(20);
    assert_int_equal(atomic_load(&a.done), 0); /* one still outstanding */
    tg_ledger_announce_end(l);                 /* the last one: the batch goes now */
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(a.rc, TG_OK);
    /* Held again, then closed: close must not wait out the delay, and the record is durable. */
    atomic_store(&a.done, 0);
    a.rc = TG_ERR_INTERNAL;
    tg_ledger_announce(l);
    assert_int_equal(tg_ledger_append(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, delay_done, &a),
                     TG_OK);
    sleep_ms(20);
    close_releases(l, &a, &d, 2);
}

/* Waits (up to 10 s) for a done() to have run. */
static void wait_done(delay_arg_t *a) {
    for (int i = 0; i < 10000 && !atomic_load(&a->done); i++) {
        sleep_ms(1);
    }
    assert_int_equal(atomic_load(&a->done), 1);
}

/* Voluntary context switches of this process's thread called name, or -1. */
static long thread_vcsw(const char *name) {
    DIR *dir = opendir("/proc/self/task");
    assert_non_null(dir);
    long out = -1;
    struct dirent *de;
    while (out < 0 && (de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        bool match = fgets(comm, sizeof comm, f) != NULL &&
                     strncmp(comm, name, strlen(name)) == 0 && comm[strlen(name)] == '\n';
        fclose(f);
        if (!match) {
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        f = fopen(path, "r");
        assert_non_null(f);
        char line[128];
        while (fgets(line, sizeof line, f) != NULL) {
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &out) == 1) {
                break;
            }
        }
        fclose(f);
    }
    closedir(dir);
    return out;
}

/* A batch of two records, held together by an announcement and then released. */
static void concurrent_batch(tg_ledger_t *l) {
    delay_arg_t a = {.l = l}, b = {.l = l};
    atomic_init(&a.done, 0);
    atomic_init(&b.done, 0);
    tg_ledger_announce(l);
    assert_int_equal(tg_ledger_append(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, delay_done, &a),
                     TG_OK);
    assert_int_equal(tg_ledger_append(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, delay_done, &b),
                     TG_OK);
    tg_ledger_announce_end(l);
    wait_done(&a);
    wait_done(&b);
    assert_int_equal(a.rc, TG_OK);
    assert_int_equal(b.rc, TG_OK);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_int_equal(st.last_batch, 2);
}

/* After a concurrent batch the writer waits out the delay before anything is queued (the
 * nap): a record that arrives is held, close ends the nap at once and the record is
 * durable. A nap that gathers nothing ends the streak, so an idle writer sleeps until work
 * comes instead of napping again and again. */
static void test_commit_nap(void **state) {
    (void)state;
    tdir_t d;
    tg_ledger_t *l = open_delayed(&d, 60u * 1000 * 1000);
    concurrent_batch(l);
    delay_arg_t c = {.l = l, .rc = TG_ERR_INTERNAL};
    atomic_init(&c.done, 0);
    assert_int_equal(tg_ledger_append(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, delay_done, &c),
                     TG_OK);
    sleep_ms(50);
    close_releases(l, &c, &d, 3); /* held by the nap until the close */

    /* The streak ends: with a 2 ms delay, a writer that napped forever would switch ~150
     * times in 300 ms of idleness. */
    l = open_delayed(&d, 2000);
    concurrent_batch(l);
    sleep_ms(100);
    long before = thread_vcsw("tg-ledger-wr");
    assert_true(before >= 0);
    sleep_ms(300);
    long after = thread_vcsw("tg-ledger-wr");
    assert_true(after - before < 10);
    tg_ledger_close(l);
    tdir_remove(&d);
}

/* Durability none: the writer thread fdatasyncs written records in the background (so a
 * rotation never has a whole segment to flush under the write lock), and only then. */
static void test_none_background_flush(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.durability = TG_DURABILITY_NONE;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    tg_ledger_stats_t st;
    sleep_ms(250);
    tg_ledger_stats(l, &st);
    assert_int_equal(st.fsyncs, 0); /* nothing written, nothing to flush */
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_now(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, &pos), TG_OK);
    for (int i = 0; i < 100; i++) { /* 100 ms period: give it up to 5 s */
        tg_ledger_stats(l, &st);
        if (st.fsyncs > 0) {
            break;
        }
        sleep_ms(50);
    }
    assert_true(st.fsyncs >= 1);
    uint64_t after = st.fsyncs;
    sleep_ms(250);
    tg_ledger_stats(l, &st);
    assert_int_equal(st.fsyncs, after); /* synced: no more flushes until new records */
    tg_ledger_close(l);
    tdir_remove(&d);
}

/* Durability none with queued appends (tg_ledger_append, as `ledger append --durability
 * none` does): each record wakes the writer, and the background flush must still come
 * every ~100 ms. It was timed from the writer's last wake-up, so records arriving more often
 * than that put it off for as long as they kept coming. */
static void test_none_flush_queued(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.durability = TG_DURABILITY_NONE;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    tg_ledger_stats_t st;
    memset(&st, 0, sizeof st);
    /* a record every 20 ms for up to 2 s: twenty flush periods */
    for (int i = 0; i < 100 && st.fsyncs == 0; i++) {
        assert_int_equal(tg_ledger_append_sync(l, TG_LEDGER_TYPE_RECEIPT, "m", 1, "{}", 2, NULL),
                         TG_OK);
        sleep_ms(20);
        tg_ledger_stats(l, &st);
    }
    assert_true(st.fsyncs >= 1);
    tg_ledger_close(l);
    tdir_remove(&d);
}

static void test_group_commit_batches(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.queue_max = 8;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    static gc_slot_t slots[9];
    memset(slots, 0, sizeof slots);
    /* hold the writer inside fdatasync of the first record, queue 8 more: one batch */
    atomic_store(&g_sync_entered, 0);
    atomic_store(&g_block_sync, true);
    assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "a", 1, gc_done, &slots[0]), TG_OK);
    while (atomic_load(&g_sync_entered) == 0) {
        sched_yield();
    }
    for (size_t i = 1; i < 9; i++) {
        assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "b", 1, gc_done, &slots[i]), TG_OK);
    }
    /* the queue is full: refused immediately */
    assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "c", 1, gc_done, NULL), TG_ERR_OVERLOADED);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_int_equal(st.queued, 8);
    assert_int_equal(st.rejected, 1);
    assert_int_equal(atomic_load(&slots[0].calls), 0); /* not acknowledged before the sync */
    atomic_store(&g_block_sync, false);
    tg_ledger_close(l);
    for (size_t i = 0; i < 9; i++) {
        assert_int_equal(atomic_load(&slots[i].calls), 1);
        assert_int_equal(slots[i].status, TG_OK);
        assert_int_equal(slots[i].seq, i + 1);
    }
    tg_ledger_stats(NULL, &st);
    assert_int_equal(st.records, 0);
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_OK);
    assert_int_equal(vr.records, 9);
    tdir_remove(&d);
}

/* ---- fault injection ---- */

static tg_ledger_t *open_fault(const tdir_t *d, tg_durability_t mode) {
    tg_ledger_opts_t o = opts_for(d);
    o.durability = mode;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    return l;
}

/* One failure kind: the append fails, nothing is acknowledged or left in the file, appends
 * fail fast until recovery, then the chain continues. */
static void one_fault(fault_t *f, int err, bool short_write, tg_durability_t mode) {
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, mode);
    append_n(l, 1, 3);
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    off_t before = fsize(path);
    arm(f, short_write ? 2 : 1, err, short_write); /* short: half written, then err */
    char p[128];
    size_t pl = make_payload(p, sizeof p, 4);
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_sync(l, 1, "meta-4", 6, p, pl, &pos),
                     TG_ERR_LEDGER_UNHEALTHY);
    assert_int_equal(pos.seq, 0);
    assert_false(tg_ledger_healthy(l));
    assert_int_equal(fsize(path), before); /* truncated back: nothing unacknowledged stays */
    assert_int_equal(tg_ledger_append_sync(l, 1, "meta-4", 6, p, pl, &pos),
                     TG_ERR_LEDGER_UNHEALTHY);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_false(st.healthy);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.head_seq, 3);
    assert_int_equal(st.records, 3);
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK);
    assert_true(tg_ledger_healthy(l));
    append_n(l, 4, 2);
    tg_ledger_close(l);
    reopen_check(&d, 5);
    tdir_remove(&d);
}

static void test_fault_pwrite_eio(void **state) {
    (void)state;
    one_fault(&f_pwrite, EIO, false, TG_DURABILITY_FSYNC);
}

static void test_fault_pwrite_enospc(void **state) {
    (void)state;
    one_fault(&f_pwrite, ENOSPC, false, TG_DURABILITY_FSYNC);
}

/* A short write is written again; the second attempt reports why (here a full disk or a
 * file-size limit), and the ledger fails as for any write error. */
static void test_fault_short_write(void **state) {
    (void)state;
    one_fault(&f_pwrite, ENOSPC, true, TG_DURABILITY_FSYNC);
    one_fault(&f_pwrite, EFBIG, true, TG_DURABILITY_BATCH);
    one_fault(&f_pwrite, ENOSPC, true, TG_DURABILITY_NONE);
}

/* A short write that the retry completes is no failure: the record is whole. */
static void test_short_write_completed(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, TG_DURABILITY_FSYNC);
    append_n(l, 1, 2);
    arm(&f_pwrite, 1, EIO, true); /* one call writes half; the retry is not armed */
    append_n(l, 3, 1);
    assert_true(tg_ledger_healthy(l));
    assert_int_equal(atomic_load(&f_pwrite.count), 0);
    disarm_all();
    tg_ledger_close(l);
    reopen_check(&d, 3);
    tdir_remove(&d);
}

/* tg_ledger_append_now (durability none): records written on the caller's thread chain
 * with the writer thread's batches; other modes refuse it; a failed write makes the ledger
 * unhealthy and acknowledges nothing. */
static void append_now_one(tg_ledger_t *l, uint64_t i, tg_err_t want) {
    char p[128], m[32];
    size_t pl = make_payload(p, sizeof p, i);
    int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)i);
    uint8_t type = (i % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_now(l, type, m, (size_t)ml, p, pl, &pos), want);
    assert_int_equal(pos.seq, want == TG_OK ? i : 0);
}

static void test_append_now(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, TG_DURABILITY_NONE);
    append_now_one(l, 1, TG_OK);
    append_n(l, 2, 2); /* through the writer thread */
    append_now_one(l, 4, TG_OK);
    append_now_one(l, 5, TG_OK);
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_now(l, 7, "m", 1, "p", 1, &pos), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_now(l, 1, "m", 1, "p", 1, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_append_now(l, 1, "m", 1, "p", TG_LEDGER_PAYLOAD_MAX + 1, &pos),
                     TG_ERR_LIMIT);
    /* a failed write: nothing acknowledged, unhealthy until recovered, then the chain goes on */
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    off_t before = fsize(path);
    arm(&f_pwrite, 1, EIO, false);
    append_now_one(l, 6, TG_ERR_LEDGER_UNHEALTHY);
    assert_false(tg_ledger_healthy(l));
    assert_int_equal(fsize(path), before);
    append_now_one(l, 6, TG_ERR_LEDGER_UNHEALTHY);
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK);
    append_now_one(l, 6, TG_OK);
    tg_ledger_close(l);
    reopen_check(&d, 6);
    /* only durability none may write on the caller's thread */
    l = open_fault(&d, TG_DURABILITY_FSYNC);
    assert_int_equal(tg_ledger_append_now(l, 1, "m", 1, "p", 1, &pos), TG_ERR_INVALID_ARG);
    tg_ledger_close(l);
    tdir_remove(&d);
}

static void test_fault_fdatasync(void **state) {
    (void)state;
    one_fault(&f_fdatasync, EIO, false, TG_DURABILITY_FSYNC);
    one_fault(&f_fdatasync, ENOSPC, false, TG_DURABILITY_FSYNC);
}

/* Every append in flight when the failure hits fails; none is acknowledged. */
static void test_fault_batch_in_flight(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, TG_DURABILITY_FSYNC);
    append_n(l, 1, 2);
    static gc_slot_t slots[6];
    memset(slots, 0, sizeof slots);
    atomic_store(&g_sync_entered, 0);
    atomic_store(&g_block_sync, true);
    assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "a", 1, gc_done, &slots[0]), TG_OK);
    while (atomic_load(&g_sync_entered) == 0) {
        sched_yield();
    }
    for (size_t i = 1; i < 6; i++) {
        assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "b", 1, gc_done, &slots[i]), TG_OK);
    }
    arm(&f_fdatasync, 1, EIO, false); /* the held sync fails */
    atomic_store(&g_block_sync, false);
    for (size_t i = 0; i < 6; i++) {
        while (atomic_load(&slots[i].calls) == 0) {
            sched_yield();
        }
        assert_int_equal(atomic_load(&slots[i].calls), 1);
        assert_int_equal(slots[i].status, TG_ERR_LEDGER_UNHEALTHY);
        assert_int_equal(slots[i].seq, 0);
    }
    assert_false(tg_ledger_healthy(l));
    /* recovery itself can fail: the disk still refuses */
    arm(&f_fdatasync, -1, EIO, false);
    tg_diag_t diag;
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_ERR_LEDGER_UNHEALTHY);
    assert_non_null(strstr(diag.msg, "fdatasync"));
    disarm_all();
    /* the probe at the end of the segment fails (a file-size limit, a quota): still down,
     * and nothing of the probe stays in the segment */
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    off_t acked = fsize(path);
    arm(&f_pwrite, 2, EFBIG, true);
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_ERR_LEDGER_UNHEALTHY);
    assert_non_null(strstr(diag.msg, "end of segment"));
    assert_non_null(strstr(diag.msg, strerror(EFBIG)));
    assert_int_equal(fsize(path), acked);
    assert_false(tg_ledger_healthy(l));
    disarm_all();
    arm(&f_write, 1, ENOSPC, false); /* the probe file's write fails */
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_ERR_LEDGER_UNHEALTHY);
    assert_non_null(strstr(diag.msg, "probe"));
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_OK);
    append_n(l, 3, 2);
    tg_ledger_close(l);
    reopen_check(&d, 4);
    tdir_remove(&d);
}

/* Automatic retry brings the ledger back without try_recover. */
static void test_fault_auto_retry(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.retry_ms = 20;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 1);
    arm(&f_pwrite, 1, EIO, false);
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, "x", 1, NULL), TG_ERR_LEDGER_UNHEALTHY);
    int waited = 0;
    while (!tg_ledger_healthy(l) && waited < 3000) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        waited += 5;
    }
    assert_true(tg_ledger_healthy(l));
    append_n(l, 2, 1);
    tg_ledger_close(l);
    reopen_check(&d, 2);
    tdir_remove(&d);
}

/* Rotation failures: creating the directory entry durably fails, then recovery. */
static void test_fault_rotation(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.segment_max_bytes = 400;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    uint32_t seg = st.segment;
    uint64_t n = 3;
    /* append until the next one needs a new segment, failing the directory fsync */
    arm(&f_fsync, -1, EIO, false);
    for (;;) {
        char p[128], m[32];
        size_t pl = make_payload(p, sizeof p, n);
        int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)n);
        uint8_t type = (n % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
        tg_err_t rc = tg_ledger_append_sync(l, type, m, (size_t)ml, p, pl, NULL);
        if (rc != TG_OK) {
            assert_int_equal(rc, TG_ERR_LEDGER_UNHEALTHY);
            break;
        }
        n++;
    }
    tg_ledger_stats(l, &st);
    assert_false(st.healthy);
    assert_int_equal(st.segment, seg + 1);
    assert_int_equal(st.head_seq, n - 1);
    tg_diag_t diag;
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_ERR_LEDGER_UNHEALTHY);
    assert_non_null(strstr(diag.msg, "directory"));
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_OK);
    append_n(l, n, 3);
    tg_ledger_close(l);
    reopen_check(&d, n + 2);
    tdir_remove(&d);
}

/* ---- identity: the directory, lock and segment deleted, moved or replaced ---- */

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* path/name into out. */
static void join(char *out, size_t n, const char *path, const char *name) {
    snprintf(out, n, "%s/%s", path, name);
}

/* A tdir_t naming path (shorter than its buffer). */
static void tdir_set(tdir_t *d, const char *path) {
    assert_true(strlen(path) < sizeof d->path);
    snprintf(d->path, sizeof d->path, "%s", path);
}

/* Removes a ledger directory and its files (what `rm -rf` does to it). */
static void rm_dir(const char *path) {
    tdir_t t;
    tdir_set(&t, path);
    tdir_remove(&t);
    assert_false(exists(path));
}

/* One append in the ledger's own way (inline in none mode): the status. */
static tg_err_t append_one(tg_ledger_t *l, tg_durability_t mode, uint64_t i) {
    char p[128], m[32];
    size_t pl = make_payload(p, sizeof p, i);
    int ml = snprintf(m, sizeof m, "meta-%llu", (unsigned long long)i);
    uint8_t type = (i % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
    tg_ledger_pos_t pos;
    if (mode == TG_DURABILITY_NONE) {
        return tg_ledger_append_now(l, type, m, (size_t)ml, p, pl, &pos);
    }
    return tg_ledger_append_sync(l, type, m, (size_t)ml, p, pl, &pos);
}

/* After the identity broke: unhealthy with `what` as the reason, counted once, no recovery,
 * and a second opener of the path is refused by the lock the ledger holds there. */
static void expect_identity_lost(tg_ledger_t *l, const tg_ledger_opts_t *o, const char *what) {
    char why[256];
    assert_false(tg_ledger_health(l, why, sizeof why));
    if (strstr(why, what) == NULL || strstr(why, "restart") == NULL) {
        print_error("reason: %s (want %s)\n", why, what);
        fail();
    }
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_int_equal(st.identity_lost, 1);
    assert_int_equal(st.failures, 1);
    assert_false(tg_ledger_check_identity(l));
    tg_diag_t diag;
    assert_int_equal(tg_ledger_try_recover(l, &diag), TG_ERR_LEDGER_UNHEALTHY);
    assert_non_null(strstr(diag.msg, "restart"));
    assert_false(tg_ledger_healthy(l));
    tg_ledger_t *l2 = NULL;
    assert_int_equal(tg_ledger_open(&l2, o, NULL, NULL, NULL, &diag), TG_ERR_IO);
    assert_non_null(strstr(diag.msg, "locked"));
}

/* A start on the path now: refused, naming what is missing and the way out; verify agrees. */
static void expect_orphan_refused(const tdir_t *d) {
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_null(l);
    if (strstr(diag.msg, "no segment file is left") == NULL ||
        strstr(diag.msg, "move ledger.head away") == NULL) {
        print_error("open: %s\n", diag.msg);
        fail();
    }
    char seg[128];
    seg_path(seg, sizeof seg, d, 1);
    assert_false(exists(seg)); /* nothing was created */
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d->path, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(vr.fault_file, "ledger.head"));
    assert_non_null(strstr(vr.fault_what, "no segment file is left"));
}

/* The directory removed while the ledger runs, in every mode: the next append fails, the
 * evidence (directory, ledger.head, lock) is back at the path, and a restart refuses. */
static void test_identity_dir_removed(void **state) {
    (void)state;
    tg_durability_t modes[] = {TG_DURABILITY_FSYNC, TG_DURABILITY_BATCH, TG_DURABILITY_NONE};
    for (size_t m = 0; m < 3; m++) {
        tdir_t d;
        tdir_make(&d);
        tg_ledger_opts_t o = opts_for(&d);
        o.durability = modes[m];
        tg_ledger_t *l = NULL;
        assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
        for (uint64_t i = 1; i <= 3; i++) {
            assert_int_equal(append_one(l, modes[m], i), TG_OK);
        }
        rm_dir(d.path);
        assert_int_equal(append_one(l, modes[m], 4), TG_ERR_LEDGER_UNHEALTHY);
        assert_int_equal(append_one(l, modes[m], 4), TG_ERR_LEDGER_UNHEALTHY);
        expect_identity_lost(l, &o, "gone from its path");
        char p[128];
        join(p, sizeof p, d.path, "ledger.head");
        assert_int_equal(fsize(p), 1024);
        join(p, sizeof p, d.path, "ledger.lock");
        assert_true(exists(p));
        struct stat st;
        assert_int_equal(stat(d.path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        tg_ledger_close(l);
        expect_orphan_refused(&d);
        tdir_remove(&d);
    }
}

/* The directory moved away: it keeps exactly the acknowledged records (the failed batch's
 * bytes are truncated away), the path refuses a start, and putting the directory back in
 * place of the evidence is the way out. */
static void test_identity_dir_moved(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 3);
    char moved[96];
    snprintf(moved, sizeof moved, "%s.moved", d.path);
    assert_int_equal(rename(d.path, moved), 0);
    assert_int_equal(append_one(l, TG_DURABILITY_FSYNC, 4), TG_ERR_LEDGER_UNHEALTHY);
    expect_identity_lost(l, &o, "gone from its path");
    tg_ledger_close(l);
    expect_orphan_refused(&d);
    tg_ledger_verify_report_t vr;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_verify_path(&vr, moved, NULL, &diag), TG_OK);
    assert_int_equal(vr.records, 3);
    rm_dir(d.path); /* the evidence: only ledger.head and ledger.lock */
    assert_int_equal(rename(moved, d.path), 0);
    reopen_check(&d, 3);
    tdir_remove(&d);
}

/* The directory replaced by another one: detected by the periodic check while idle, and the
 * evidence goes into the replacement (nothing of it is overwritten). */
static void test_identity_dir_replaced(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    assert_true(tg_ledger_check_identity(l));
    char moved[96], p[128];
    snprintf(moved, sizeof moved, "%s.old", d.path);
    assert_int_equal(rename(d.path, moved), 0);
    assert_int_equal(mkdir(d.path, 0700), 0);
    join(p, sizeof p, d.path, "notes.txt");
    spit(p, (const uint8_t *)"mine", 4);
    assert_false(tg_ledger_check_identity(l)); /* idle: no append needed to notice */
    expect_identity_lost(l, &o, "names another directory");
    assert_int_equal(append_one(l, TG_DURABILITY_FSYNC, 3), TG_ERR_LEDGER_UNHEALTHY);
    assert_int_equal(fsize(p), 4);
    join(p, sizeof p, d.path, "ledger.head");
    assert_int_equal(fsize(p), 1024);
    tg_ledger_close(l);
    expect_orphan_refused(&d);
    tdir_remove(&d);
    tdir_set(&d, moved);
    reopen_check(&d, 2);
    tdir_remove(&d);
}

/* The active segment unlinked, or renamed inside the directory: the ledger.head in the
 * directory stays the evidence, so a restart refuses. */
static void test_identity_segment(void **state) {
    (void)state;
    for (int renamed = 0; renamed < 2; renamed++) {
        tg_durability_t modes[] = {TG_DURABILITY_FSYNC, TG_DURABILITY_NONE};
        for (size_t m = 0; m < 2; m++) {
            tdir_t d;
            tdir_make(&d);
            tg_ledger_opts_t o = opts_for(&d);
            o.durability = modes[m];
            tg_ledger_t *l = NULL;
            assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
            assert_int_equal(append_one(l, modes[m], 1), TG_OK);
            char seg[128], other[128];
            seg_path(seg, sizeof seg, &d, 1);
            join(other, sizeof other, d.path, "elsewhere.tgl");
            if (renamed) {
                assert_int_equal(rename(seg, other), 0);
                /* none mode sees a rename (the link count stays 1) at its periodic check */
                if (modes[m] == TG_DURABILITY_NONE) {
                    sleep_ms(120);
                }
            } else {
                assert_int_equal(unlink(seg), 0);
            }
            assert_int_equal(append_one(l, modes[m], 2), TG_ERR_LEDGER_UNHEALTHY);
            expect_identity_lost(l, &o, renamed ? "lost its name" : "was deleted");
            tg_ledger_close(l);
            expect_orphan_refused(&d);
            unlink(other);
            tdir_remove(&d);
        }
    }
}

/* ledger.lock unlinked: a second daemon could lock a new one. The ledger takes the new
 * one itself; the records are intact, so after the restart it needs, the ledger opens. */
static void test_identity_lock(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    char p[128];
    join(p, sizeof p, d.path, "ledger.lock");
    assert_int_equal(unlink(p), 0);
    assert_int_equal(append_one(l, TG_DURABILITY_FSYNC, 3), TG_ERR_LEDGER_UNHEALTHY);
    expect_identity_lost(l, &o, "ledger.lock was removed");
    assert_true(exists(p));
    tg_ledger_close(l);
    reopen_check(&d, 2);
    tdir_remove(&d);
}

/* A deletion racing a batch: the record is written and synced into the segment, then its
 * directory goes away before it is acknowledged. It must fail, not be acknowledged. */
static void test_identity_race(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 1);
    static gc_slot_t slot;
    memset(&slot, 0, sizeof slot);
    atomic_store(&g_sync_entered, 0);
    atomic_store(&g_block_sync, true);
    assert_int_equal(tg_ledger_append(l, 1, NULL, 0, "a", 1, gc_done, &slot), TG_OK);
    while (atomic_load(&g_sync_entered) == 0) {
        sched_yield();
    }
    rm_dir(d.path); /* while the batch's fdatasync runs */
    atomic_store(&g_block_sync, false);
    while (atomic_load(&slot.calls) == 0) {
        sched_yield();
    }
    assert_int_equal(slot.status, TG_ERR_LEDGER_UNHEALTHY);
    assert_int_equal(slot.seq, 0);
    expect_identity_lost(l, &o, "gone from its path");
    tg_ledger_close(l);
    expect_orphan_refused(&d);
    tdir_remove(&d);
}

/* A start that finds evidence of a ledger but no segment: refused, whatever ledger.head
 * says, and a leftover ledger.probe counts too; a lone ledger.lock does not. */
static void test_open_orphans(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    tg_ledger_close(l); /* ledger.head at seq 0: no record was ever durable */
    char seg[128], p[128];
    seg_path(seg, sizeof seg, &d, 1);
    assert_int_equal(unlink(seg), 0);
    expect_orphan_refused(&d);
    tg_diag_t diag;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "shows a ledger was here"));
    /* the way out the message names: move ledger.head away */
    char hp[128], moved[160];
    join(hp, sizeof hp, d.path, "ledger.head");
    snprintf(moved, sizeof moved, "%s.moved", d.path);
    assert_int_equal(rename(hp, moved), 0);
    tg_ledger_recovery_t rep;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, NULL), TG_OK);
    assert_true(rep.created);
    tg_ledger_close(l);
    unlink(moved);
    /* a ledger.probe without segments (a crash during a probe, then the segments lost) */
    assert_int_equal(unlink(seg), 0);
    assert_int_equal(unlink(hp), 0);
    join(p, sizeof p, d.path, "ledger.probe");
    spit(p, (const uint8_t *)"x", 1);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "move ledger.probe away"));
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(vr.fault_file, "ledger.probe"));
    /* only the lock (a crash between creating it and segment 1): a new ledger */
    assert_int_equal(unlink(p), 0);
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, NULL), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, &rep, NULL), TG_OK);
    assert_true(rep.created);
    tg_ledger_close(l);
    tdir_remove(&d);
}

/* no_create (serve --ledger-create never): no directory, or no segment in it, is refused
 * and nothing is created; an existing ledger opens. */
static void test_open_no_create(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    char sub[128], seg[160];
    join(sub, sizeof sub, d.path, "ledger");
    snprintf(seg, sizeof seg, "%s/ledger-000001.tgl", sub);
    tg_ledger_opts_t o = TG_LEDGER_OPTS_INIT;
    o.dir = sub;
    o.retry_ms = TG_LEDGER_RETRY_NEVER;
    o.no_create = true;
    tg_ledger_t *l = NULL;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_NOT_FOUND);
    assert_non_null(strstr(diag.msg, "no ledger directory"));
    assert_false(exists(sub));
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, &diag), TG_ERR_NOT_FOUND);
    assert_non_null(strstr(diag.msg, "no ledger segment file"));
    assert_false(exists(seg));
    o.no_create = false;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    append_n(l, 1, 2);
    tg_ledger_close(l);
    o.no_create = true;
    collect_t c;
    memset(&c, 0, sizeof c);
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c, NULL, NULL), TG_OK);
    assert_int_equal(c.n, 2);
    tg_ledger_close(l);
    rm_dir(sub);
    tdir_remove(&d);
}

/* The probe at open: a disk that takes no data (here the probe file's write fails, as on a
 * full disk) leaves the ledger open but unhealthy, with the reason, until a recovery. */
static void test_open_probe(void **state) {
    (void)state;
    tdir_t d;
    tg_ledger_opts_t o = ledger_of(&d, 2);
    tg_ledger_t *l = NULL;
    arm(&f_write, 1, ENOSPC, false);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    disarm_all();
    char why[256];
    assert_false(tg_ledger_health(l, why, sizeof why));
    assert_non_null(strstr(why, "probe"));
    assert_non_null(strstr(why, strerror(ENOSPC)));
    tg_ledger_stats_t st;
    tg_ledger_stats(l, &st);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.identity_lost, 0);
    assert_int_equal(append_one(l, TG_DURABILITY_FSYNC, 3), TG_ERR_LEDGER_UNHEALTHY);
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK);
    assert_true(tg_ledger_health(l, why, sizeof why));
    assert_string_equal(why, "");
    append_n(l, 3, 1);
    tg_ledger_close(l);
    /* with automatic retries it comes back by itself once the disk takes data */
    o.retry_ms = 20;
    arm(&f_write, 1, ENOSPC, false);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    assert_false(tg_ledger_healthy(l));
    disarm_all();
    for (int i = 0; i < 300 && !tg_ledger_healthy(l); i++) {
        sleep_ms(10);
    }
    assert_true(tg_ledger_healthy(l));
    append_n(l, 4, 1);
    tg_ledger_close(l);
    reopen_check(&d, 4);
    tdir_remove(&d);
}

/* ---- durability modes: count fdatasyncs ---- */

static void test_modes(void **state) {
    (void)state;
    tg_durability_t modes[] = {TG_DURABILITY_FSYNC, TG_DURABILITY_BATCH, TG_DURABILITY_NONE};
    for (size_t m = 0; m < 3; m++) {
        tdir_t d;
        tdir_make(&d);
        tg_ledger_opts_t o = opts_for(&d);
        o.durability = modes[m];
        o.batch_interval_ms = 100000; /* no timed sync during the test */
        tg_ledger_t *l = NULL;
        assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
        int before = atomic_load(&f_fdatasync.calls);
        append_n(l, 1, 20);
        int during = atomic_load(&f_fdatasync.calls) - before;
        tg_ledger_stats_t st;
        tg_ledger_stats(l, &st);
        assert_int_equal(st.durability, modes[m]);
        assert_int_equal(st.records, 20);
        tg_ledger_close(l);
        int after = atomic_load(&f_fdatasync.calls) - before;
        if (modes[m] == TG_DURABILITY_FSYNC) {
            assert_true(during >= 20); /* sequential appends: one sync each */
            assert_int_equal(st.fsyncs, (uint64_t)during);
            uint64_t hsum = 0;
            for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
                hsum += st.fsync_hist[i];
            }
            assert_int_equal(hsum, st.fsyncs);
            assert_int_equal(st.batches, 20);
            assert_int_equal(st.batch_hist[0], 20); /* all batches of one record */
            assert_int_equal(st.last_batch, 1);
            assert_int_equal(st.max_batch, 1);
        } else {
            assert_int_equal(during, 0); /* acknowledged after write(), before any sync */
            assert_int_equal(after, 2);  /* close makes it durable, then ledger.head says so */
        }
        reopen_check(&d, 20);
        tdir_remove(&d);
    }
    /* BATCH with a short interval syncs on its own while idle */
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    o.durability = TG_DURABILITY_BATCH;
    o.batch_interval_ms = 5;
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    int before = atomic_load(&f_fdatasync.calls);
    append_n(l, 1, 1);
    int waited = 0;
    while (atomic_load(&f_fdatasync.calls) == before && waited < 2000) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        waited += 2;
    }
    assert_true(atomic_load(&f_fdatasync.calls) > before);
    /* a failing timed sync makes a BATCH ledger unhealthy too */
    arm(&f_fdatasync, -1, EIO, false);
    append_n(l, 2, 1); /* acknowledged at write() */
    waited = 0;
    while (tg_ledger_healthy(l) && waited < 2000) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        waited += 2;
    }
    assert_false(tg_ledger_healthy(l));
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK);
    append_n(l, 3, 1);
    tg_ledger_close(l);
    reopen_check(&d, 3);
    tdir_remove(&d);
}

/* ---- reads and verify callbacks ---- */

static void test_read_at_errors(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, TG_DURABILITY_FSYNC);
    append_n(l, 1, 3);
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_sync(l, 1, NULL, 0, "{\"k\":1}", 7, &pos), TG_OK);
    tg_buf_t pay;
    tg_buf_init(&pay, 0);
    tg_diag_t diag;
    tg_ledger_pos_t bad = pos;
    bad.seq = 99;
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_NOT_FOUND);
    bad = pos;
    bad.segment = 7;
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_NOT_FOUND);
    bad = pos;
    bad.offset = 100000;
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_NOT_FOUND);
    bad = pos;
    bad.length = 10;
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_ledger_read_at(l, NULL, &pay, NULL, &diag), TG_ERR_INVALID_ARG);
    bad = pos;
    bad.seq = 3; /* the position of seq 4 claimed as seq 3 */
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    bad = pos;
    bad.offset -= 1;
    assert_int_equal(tg_ledger_read_at(l, &bad, &pay, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    /* output buffer limit */
    tg_buf_t small;
    tg_buf_init(&small, 3);
    assert_int_equal(tg_ledger_read_at(l, &pos, &small, NULL, &diag), TG_ERR_LIMIT);
    tg_buf_t msmall;
    tg_buf_init(&msmall, 1);
    tg_ledger_pos_t p1 = {1, 0, 1, 0};
    p1.length = (uint32_t)(92 + 6 + make_payload((char[128]){0}, 128, 1));
    assert_int_equal(tg_ledger_read_at(l, &p1, NULL, &msmall, &diag), TG_ERR_LIMIT);
    tg_buf_free(&small);
    tg_buf_free(&msmall);
    /* damage on disk under a running ledger is caught by the re-verification */
    char path[128];
    seg_path(path, sizeof path, &d, 1);
    size_t len;
    uint8_t *b = slurp(path, &len);
    b[pos.offset + 65] ^= 0x20;
    spit(path, b, len);
    assert_int_equal(tg_ledger_read_at(l, &pos, &pay, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(diag.msg, "seq 4"));
    b[pos.offset + 65] ^= 0x20;
    spit(path, b, len);
    assert_int_equal(tg_ledger_read_at(l, &pos, &pay, NULL, &diag), TG_OK);
    assert_int_equal(pay.len, 7);
    free(b);
    tg_buf_free(&pay);
    /* an unreadable segment file */
    assert_int_equal(chmod(path, 0), 0);
    if (geteuid() != 0) {
        assert_int_equal(tg_ledger_read_at(l, &pos, NULL, NULL, &diag), TG_ERR_IO);
    }
    assert_int_equal(chmod(path, 0600), 0);
    tg_ledger_close(l);
    tdir_remove(&d);
}

/* ---- the transparency log's feed (ledger.h tg_ledger_feed_fn) ---- */

#define FEED_MAX 4096
/* What the feed saw: every call must continue the sequence (exactly once, in order) and
 * follow a successful fdatasync that no earlier call followed (never before its sync). */
typedef struct feed_log {
    pthread_mutex_t mu;
    uint64_t next;  /* the first_seq the next call must have */
    uint64_t calls; /* feed calls */
    uint64_t first[64], n[64];
    int syncs_seen; /* g_sync_ok at the last call */
    bool bad;
    char why[128];
    uint8_t entries[FEED_MAX][32]; /* by seq */
} feed_log_t;
static feed_log_t g_feed;

static void feed_reset(uint64_t next) {
    pthread_mutex_lock(&g_feed.mu);
    g_feed.next = next;
    g_feed.calls = 0;
    g_feed.bad = false;
    g_feed.why[0] = '\0';
    g_feed.syncs_seen = atomic_load(&g_sync_ok);
    memset(g_feed.entries, 0, sizeof g_feed.entries);
    pthread_mutex_unlock(&g_feed.mu);
}

static void feed_fn(void *ud, uint64_t first_seq, const uint8_t (*entries)[32], size_t n) {
    assert_ptr_equal(ud, &g_feed);
    pthread_mutex_lock(&g_feed.mu);
    int syncs = atomic_load(&g_sync_ok);
    if (first_seq != g_feed.next || n == 0 || first_seq + n > FEED_MAX) {
        g_feed.bad = true;
        snprintf(g_feed.why, sizeof g_feed.why, "call %llu: seq %llu+%zu, expected %llu",
                 (unsigned long long)g_feed.calls, (unsigned long long)first_seq, n,
                 (unsigned long long)g_feed.next);
    } else if (syncs == g_feed.syncs_seen) {
        g_feed.bad = true;
        snprintf(g_feed.why, sizeof g_feed.why, "seq %llu fed without a sync since the last feed",
                 (unsigned long long)first_seq);
    } else {
        memcpy(g_feed.entries[first_seq], entries, n * 32);
        g_feed.next = first_seq + n;
    }
    if (g_feed.calls < 64) {
        g_feed.first[g_feed.calls] = first_seq;
        g_feed.n[g_feed.calls] = n;
    }
    g_feed.calls++;
    g_feed.syncs_seen = syncs;
    pthread_mutex_unlock(&g_feed.mu);
}

static uint64_t feed_next(void) {
    pthread_mutex_lock(&g_feed.mu);
    uint64_t n = g_feed.next;
    pthread_mutex_unlock(&g_feed.mu);
    return n;
}

/* Waits (up to 5 s) until records up to seq were fed. */
static void feed_wait(uint64_t seq) {
    for (int i = 0; i < 1000 && feed_next() <= seq; i++) {
        sleep_ms(5);
    }
    assert_true(feed_next() > seq);
}

static void feed_check_ok(void) {
    pthread_mutex_lock(&g_feed.mu);
    bool bad = g_feed.bad;
    char why[128];
    memcpy(why, g_feed.why, sizeof why);
    pthread_mutex_unlock(&g_feed.mu);
    if (bad) {
        print_error("feed: %s\n", why);
    }
    assert_false(bad);
}

/* Record i's log entry: given by the caller for every third record, else the ledger's
 * default, SHA-256 of the payload (computed here independently). */
static void feed_expected(uint8_t out[32], uint64_t i) {
    if (i % 3 == 0) {
        memset(out, (int)(i & 0xff), 32);
        out[0] = 0xEE;
        return;
    }
    char p[128];
    size_t pl = make_payload(p, sizeof p, i);
    crypto_hash_sha256(out, (const uint8_t *)p, pl);
}

/* Record i as append_n writes it, with its entry per feed_expected. */
static void feed_in(tg_ledger_in_t *in, uint64_t i, char p[128], char m[32], uint8_t ent[32]) {
    size_t pl = make_payload(p, 128, i);
    int ml = snprintf(m, 32, "meta-%llu", (unsigned long long)i);
    feed_expected(ent, i);
    *in = (tg_ledger_in_t){(i % 5 == 4) ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT,
                           m,
                           (size_t)ml,
                           p,
                           pl,
                           i % 3 == 0 ? ent : NULL};
}

/* tg_ledger_append_sync for tg_ledger_append_in. */
typedef struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    tg_err_t rc;
    tg_ledger_pos_t pos;
} sync_wait_t;

static void sync_wait_init(sync_wait_t *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void sync_wait_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    sync_wait_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->rc = status;
    w->pos = *pos;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static tg_err_t sync_wait_end(sync_wait_t *w) {
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    tg_err_t rc = w->rc;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void sync_wait_destroy(sync_wait_t *w) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

static void feed_append_sync(tg_ledger_t *l, uint64_t i, tg_err_t want) {
    char p[128], m[32];
    uint8_t ent[32];
    tg_ledger_in_t in;
    feed_in(&in, i, p, m, ent);
    sync_wait_t w;
    sync_wait_init(&w);
    tg_err_t rc = tg_ledger_append_in(l, &in, sync_wait_done, &w);
    if (rc == TG_OK) {
        rc = sync_wait_end(&w);
    }
    sync_wait_destroy(&w);
    assert_int_equal(rc, want);
    if (want == TG_OK) {
        assert_int_equal(w.pos.seq, i);
    }
}

static void feed_append_now(tg_ledger_t *l, uint64_t i) {
    char p[128], m[32];
    uint8_t ent[32];
    tg_ledger_in_t in;
    feed_in(&in, i, p, m, ent);
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_now_in(l, &in, &pos), TG_OK);
    assert_int_equal(pos.seq, i);
}

/* Records [from, to] were fed with the right entries. */
static void feed_check_entries(uint64_t from, uint64_t to) {
    feed_check_ok();
    pthread_mutex_lock(&g_feed.mu);
    for (uint64_t i = from; i <= to; i++) {
        uint8_t want[32];
        feed_expected(want, i);
        assert_memory_equal(g_feed.entries[i], want, 32);
    }
    pthread_mutex_unlock(&g_feed.mu);
}

static tg_ledger_opts_t feed_opts(const tdir_t *d, tg_durability_t mode) {
    tg_ledger_opts_t o = opts_for(d);
    o.durability = mode;
    o.feed = feed_fn;
    o.feed_ud = &g_feed;
    return o;
}

#define FEED_THREADS 4
#define FEED_PER 50
static tg_ledger_t *feed_ledger;
static atomic_int feed_done_count;
static void feed_thread_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    (void)ud;
    (void)pos;
    assert_int_equal(status, TG_OK);
    atomic_fetch_add(&feed_done_count, 1);
}
static void *feed_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < FEED_PER; i++) {
        tg_ledger_in_t in = {TG_LEDGER_TYPE_RECEIPT, NULL, 0, "{}", 2, NULL};
        tg_err_t rc;
        while ((rc = tg_ledger_append_in(feed_ledger, &in, feed_thread_done, NULL)) ==
               TG_ERR_OVERLOADED) {
            sched_yield();
        }
        assert_int_equal(rc, TG_OK);
    }
    return NULL;
}

/* FSYNC: each batch is fed after its sync and before its done callbacks; replayed records
 * are not fed; concurrent appends are fed once each, in order; a failed sync feeds
 * nothing, and the record that failed is not fed when its seq is reused. */
static void test_feed_fsync(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = feed_opts(&d, TG_DURABILITY_FSYNC);
    feed_reset(1);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    for (uint64_t i = 1; i <= 6; i++) {
        feed_append_sync(l, i, TG_OK);
        assert_int_equal(feed_next(), i + 1); /* fed before the done callback ran */
    }
    feed_check_entries(1, 6);
    /* a failed sync: the record fails, nothing is fed */
    arm(&f_fdatasync, 1, EIO, false);
    feed_append_sync(l, 7, TG_ERR_LEDGER_UNHEALTHY);
    assert_int_equal(feed_next(), 7);
    disarm_all();
    assert_int_equal(tg_ledger_try_recover(l, NULL), TG_OK);
    feed_append_sync(l, 7, TG_OK); /* seq 7 again, another record: fed once */
    assert_int_equal(feed_next(), 8);
    feed_check_entries(1, 7);
    tg_ledger_close(l);
    /* reopened: the replay is not fed; appends go on at seq 8 */
    feed_reset(8);
    collect_t c;
    memset(&c, 0, sizeof c);
    assert_int_equal(tg_ledger_open(&l, &o, collect_fn, &c, NULL, NULL), TG_OK);
    assert_int_equal(c.n, 7);
    assert_int_equal(feed_next(), 8);
    feed_ledger = l;
    atomic_store(&feed_done_count, 0);
    pthread_t th[FEED_THREADS];
    for (int t = 0; t < FEED_THREADS; t++) {
        assert_int_equal(pthread_create(&th[t], NULL, feed_thread, NULL), 0);
    }
    for (int t = 0; t < FEED_THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    tg_ledger_close(l);
    assert_int_equal(atomic_load(&feed_done_count), FEED_THREADS * FEED_PER);
    assert_int_equal(feed_next(), 8 + FEED_THREADS * FEED_PER);
    feed_check_ok();
    for (uint64_t i = 8; i < 8 + FEED_THREADS * FEED_PER; i++) {
        uint8_t want[32];
        crypto_hash_sha256(want, (const uint8_t *)"{}", 2);
        assert_memory_equal(g_feed.entries[i], want, 32);
    }
    tdir_remove(&d);
}

/* BATCH: acknowledged at write, fed only at the periodic sync (or the close's); a failed
 * sync feeds nothing. */
static void test_feed_batch(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = feed_opts(&d, TG_DURABILITY_BATCH);
    o.batch_interval_ms = 60000; /* no periodic sync during the test */
    feed_reset(1);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    for (uint64_t i = 1; i <= 5; i++) {
        feed_append_sync(l, i, TG_OK);
    }
    sleep_ms(30);
    assert_int_equal(feed_next(), 1); /* acknowledged, not synced: not fed */
    tg_ledger_close(l);               /* the close's sync feeds them */
    assert_int_equal(feed_next(), 6);
    feed_check_entries(1, 5);
    /* the periodic sync */
    o.batch_interval_ms = 10;
    feed_reset(6);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    for (uint64_t i = 6; i <= 9; i++) {
        feed_append_sync(l, i, TG_OK);
    }
    feed_wait(9);
    feed_check_entries(6, 9);
    tg_ledger_close(l);
    /* a failed sync feeds nothing */
    o.batch_interval_ms = 60000;
    feed_reset(10);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    feed_append_sync(l, 10, TG_OK);
    arm(&f_fdatasync, -1, EIO, false);
    tg_ledger_close(l); /* its sync fails */
    disarm_all();
    assert_int_equal(feed_next(), 10);
    feed_check_ok();
    tdir_remove(&d);
}

/* NONE: the writer syncs what was written every sync_interval_ms and feeds exactly the
 * records written before that sync began; rotation and close sync and feed too. */
static void test_feed_none(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = feed_opts(&d, TG_DURABILITY_NONE);
    o.sync_interval_ms = 60000; /* no periodic sync: only the close's */
    feed_reset(1);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    feed_append_now(l, 1);
    feed_append_now(l, 2);
    feed_append_sync(l, 3, TG_OK); /* through the writer thread */
    sleep_ms(30);
    assert_int_equal(feed_next(), 1);
    tg_ledger_close(l);
    assert_int_equal(feed_next(), 4);
    feed_check_entries(1, 3);
    /* the periodic sync: records written while it runs wait for the next one */
    o.sync_interval_ms = 20;
    feed_reset(4);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    atomic_store(&g_block_sync, true);
    atomic_store(&g_sync_entered, 0);
    feed_append_now(l, 4);
    feed_append_now(l, 5);
    while (atomic_load(&g_sync_entered) == 0) { /* the flush has begun (and is held) */
        sched_yield();
    }
    feed_append_now(l, 6);
    atomic_store(&g_block_sync, false);
    feed_wait(6);
    feed_check_entries(4, 6);
    pthread_mutex_lock(&g_feed.mu);
    assert_true(g_feed.calls >= 2);
    assert_int_equal(g_feed.first[0], 4);
    assert_int_equal(g_feed.n[0], 2); /* 6 came after the sync began */
    pthread_mutex_unlock(&g_feed.mu);
    tg_ledger_close(l);
    /* rotation syncs the segment and feeds what it held */
    o.sync_interval_ms = 60000;
    o.segment_max_bytes = 600;
    feed_reset(7);
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    uint64_t i = 7;
    tg_ledger_stats_t st;
    do {
        feed_append_now(l, i++);
        tg_ledger_stats(l, &st);
    } while (st.segment == 1 && i < 100);
    assert_true(st.segment >= 2);
    /* the record that started segment 2 is not synced; everything before it is fed */
    assert_int_equal(feed_next(), i - 1);
    feed_check_entries(7, i - 2);
    tg_ledger_close(l);
    assert_int_equal(feed_next(), i);
    feed_check_entries(7, i - 1);
    tdir_remove(&d);
}

/* Without a feed, append_in with an entry is plain append (entries neither kept nor fed). */
static void test_feed_absent(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, NULL, NULL, NULL, NULL), TG_OK);
    feed_reset(1);
    for (uint64_t i = 1; i <= 3; i++) {
        feed_append_sync(l, i, TG_OK);
    }
    assert_int_equal(feed_next(), 1);
    assert_int_equal(tg_ledger_append_in(l, NULL, feed_thread_done, NULL), TG_ERR_INVALID_ARG);
    tg_ledger_pos_t pos;
    assert_int_equal(tg_ledger_append_now_in(l, NULL, &pos), TG_ERR_INVALID_ARG);
    tg_ledger_close(l);
    reopen_check(&d, 3);
    tdir_remove(&d);
}

static tg_err_t check_fail_at_3(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    int *calls = ud;
    (*calls)++;
    if (rec->seq == 3) {
        return tg_diag_set(diag, TG_ERR_RECEIPT_SIGNATURE, "signature of seq 3 is bad");
    }
    return TG_OK;
}

static void test_verify_check(void **state) {
    (void)state;
    tdir_t d;
    tdir_make(&d);
    tg_ledger_t *l = open_fault(&d, TG_DURABILITY_NONE);
    append_n(l, 1, 5);
    tg_ledger_close(l);
    int calls = 0;
    tg_ledger_verify_opts_t vo = {.check = check_fail_at_3, .check_ud = &calls};
    tg_ledger_verify_report_t vr;
    tg_diag_t diag;
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, &vo, &diag), TG_ERR_RECEIPT_SIGNATURE);
    assert_int_equal(calls, 3);
    assert_int_equal(vr.fault, TG_ERR_RECEIPT_SIGNATURE);
    assert_int_equal(vr.fault_seq, 3);
    assert_int_equal(vr.records, 2);
    assert_string_equal(vr.fault_what, "signature of seq 3 is bad");
    assert_non_null(strstr(vr.fault_file, "ledger-000001.tgl"));
    assert_non_null(strstr(diag.msg, "seq 3 at offset"));
    /* a file that is not a ledger at all */
    char p[128];
    seg_path(p, sizeof p, &d, 1);
    spit(p, (const uint8_t *)"{\"not\":\"a ledger\"}\n", 19);
    assert_int_equal(tg_ledger_verify_path(&vr, p, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_int_equal(vr.fault_offset, 0);
    assert_non_null(strstr(diag.msg, "incomplete record header"));
    static const char text[] = "{\"this is\": \"a JSON document of more than sixty bytes, "
                               "not a ledger segment\"}\n";
    spit(p, (const uint8_t *)text, sizeof text - 1);
    assert_int_equal(tg_ledger_verify_path(&vr, p, NULL, &diag), TG_ERR_LEDGER_CORRUPT);
    assert_int_equal(vr.fault_seq, 1);
    assert_non_null(strstr(diag.msg, "magic"));
    tdir_remove(&d);
}

/* ---- anchors (anchor.h): a pruned ledger starts where its signed anchor says ---- */

static void anchor_sample(tg_anchor_t *a) {
    memset(a, 0, sizeof *a);
    a->first_segment = 5;
    a->archived_first_segment = 2;
    a->first_seq = 40;
    for (int i = 0; i < 32; i++) {
        a->prev_hash[i] = (uint8_t)(i * 7 + 1);
    }
    a->archived_first_seq = 9;
    a->created_ms = 1764547200123;
    snprintf(a->key_id, sizeof a->key_id, "%s", "anchor-key.1");
}

/* Sign, encode, parse and verify round trip; every single changed byte of the file is caught
 * (by the parser or by the signature); bad fields are refused. */
static void test_anchor_format(void **state) {
    (void)state;
    uint8_t pk[32], sk[64], pk2[32], sk2[64];
    crypto_sign_keypair(pk, sk);
    crypto_sign_keypair(pk2, sk2);
    tg_anchor_t a, b;
    anchor_sample(&a);
    assert_int_equal(tg_anchor_sign(&a, sk), TG_OK);
    uint8_t buf[TG_ANCHOR_SIZE];
    assert_int_equal(tg_anchor_encode(buf, &a), TG_OK);
    assert_memory_equal(buf, "TGANCHR1", 8);
    char what[128];
    assert_int_equal(tg_anchor_parse(&b, buf, sizeof buf, what, sizeof what), TG_OK);
    assert_int_equal(b.first_segment, 5);
    assert_int_equal(b.archived_first_segment, 2);
    assert_int_equal(b.first_seq, 40);
    assert_int_equal(b.archived_first_seq, 9);
    assert_int_equal(b.created_ms, 1764547200123);
    assert_string_equal(b.key_id, "anchor-key.1");
    assert_memory_equal(b.prev_hash, a.prev_hash, 32);
    assert_int_equal(tg_anchor_verify(&b, pk), TG_OK);
    assert_int_equal(tg_anchor_verify(&b, pk2), TG_ERR_CRYPTO);
    /* the layout's offsets (anchor.h's table) */
    assert_int_equal(buf[8], 5);
    assert_int_equal(buf[12], 2);
    assert_int_equal(buf[16], 40);
    assert_memory_equal(buf + 24, a.prev_hash, 32);
    assert_int_equal(buf[56], 9);
    assert_int_equal(buf[72], strlen("anchor-key.1"));
    assert_memory_equal(buf + 73, "anchor-key.1", strlen("anchor-key.1"));
    assert_memory_equal(buf + 144, a.sig, 64);
    for (size_t i = 0; i < sizeof buf; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            uint8_t t[TG_ANCHOR_SIZE];
            memcpy(t, buf, sizeof t);
            t[i] ^= (uint8_t)(1u << bit);
            tg_err_t rc = tg_anchor_parse(&b, t, sizeof t, what, sizeof what);
            if (rc == TG_OK) {
                rc = tg_anchor_verify(&b, pk);
            }
            if (rc == TG_OK) {
                print_error("byte %zu bit %d changed and still accepted\n", i, bit);
                fail();
            }
        }
    }
    assert_int_equal(tg_anchor_parse(&b, buf, sizeof buf - 1, what, sizeof what),
                     TG_ERR_LEDGER_CORRUPT);
    uint8_t pad[TG_ANCHOR_SIZE];
    memcpy(pad, buf, sizeof pad);
    pad[140] = 1;
    assert_int_equal(tg_anchor_parse(&b, pad, sizeof pad, what, sizeof what),
                     TG_ERR_LEDGER_CORRUPT);
    assert_non_null(strstr(what, "padding"));
    /* fields out of range are neither signed nor encoded */
    tg_anchor_t c = a;
    c.first_segment = 1;
    assert_int_equal(tg_anchor_sign(&c, sk), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_anchor_encode(buf, &c), TG_ERR_INVALID_ARG);
    c = a;
    c.archived_first_seq = c.first_seq;
    assert_int_equal(tg_anchor_encode(buf, &c), TG_ERR_INVALID_ARG);
    c = a;
    c.archived_first_seq = 38; /* 2 records cannot fill 3 archived segments */
    assert_int_equal(tg_anchor_encode(buf, &c), TG_ERR_INVALID_ARG);
    c = a;
    c.key_id[0] = '\0';
    assert_int_equal(tg_anchor_encode(buf, &c), TG_ERR_INVALID_ARG);
    c = a;
    c.key_id[2] = '/';
    assert_int_equal(tg_anchor_encode(buf, &c), TG_ERR_INVALID_ARG);
}

/* Each record's segment and hash, by seq (build_segments writes 16). */
static struct {
    uint32_t seg[64];
    uint8_t hash[64][32];
    uint64_t n, first;
} g_recs;

static tg_err_t recs_fn(void *ud, const tg_ledger_record_t *rec) {
    (void)ud;
    if (g_recs.n == 0) {
        g_recs.first = rec->seq;
    }
    g_recs.n++;
    if (rec->seq < 64) {
        g_recs.seg[rec->seq] = rec->pos.segment;
        memcpy(g_recs.hash[rec->seq], rec->hash, 32);
    }
    return TG_OK;
}

/* Opens d (anchored) and checks it ends at last_seq, then verifies it. */
static void reopen_anchored(const tdir_t *d, uint64_t last_seq) {
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_ledger_open(&l, &o, NULL, NULL, &rep, &diag);
    if (rc) {
        print_error("open: %s\n", diag.msg);
    }
    assert_int_equal(rc, TG_OK);
    assert_int_equal(rep.last_seq, last_seq);
    tg_ledger_close(l);
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, d->path, NULL, &diag), TG_OK);
    assert_int_equal(vr.last_seq, last_seq);
}

/* Prunes d as `ledger archive` would: segments below `keep` removed, anchor written. */
static tg_anchor_t prune(const tdir_t *d, uint32_t keep, const uint8_t sk[64]) {
    memset(&g_recs, 0, sizeof g_recs);
    tg_ledger_opts_t o = opts_for(d);
    tg_ledger_t *l = NULL;
    assert_int_equal(tg_ledger_open(&l, &o, recs_fn, NULL, NULL, NULL), TG_OK);
    tg_ledger_close(l);
    uint64_t k = 1;
    while (k < 64 && g_recs.seg[k] < keep) {
        k++;
    }
    assert_true(k > 1 && k < g_recs.n);
    tg_anchor_t a;
    memset(&a, 0, sizeof a);
    a.first_segment = keep;
    a.archived_first_segment = 1;
    a.first_seq = k;
    memcpy(a.prev_hash, g_recs.hash[k - 1], 32);
    a.archived_first_seq = 1;
    a.created_ms = 1764547200000;
    snprintf(a.key_id, sizeof a.key_id, "k1");
    assert_int_equal(tg_anchor_sign(&a, sk), TG_OK);
    int dfd = open(d->path, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    tg_diag_t diag = {{0}};
    assert_int_equal(tg_anchor_write(dfd, d->path, TG_ANCHOR_NAME, &a, &diag), TG_OK);
    close(dfd);
    for (uint32_t s = 1; s < keep; s++) {
        char p[128];
        seg_path(p, sizeof p, d, s);
        assert_int_equal(unlink(p), 0);
    }
    return a;
}

static tg_err_t anchor_refuse(void *ud, const struct tg_anchor *a, const char *file,
                              tg_diag_t *diag) {
    (void)a;
    (void)file;
    int *calls = ud;
    (*calls)++;
    return tg_diag_set(diag, TG_ERR_CRYPTO, "refused by the test");
}

/* tg_ledger_open and verify accept a directory that starts at its anchor, and refuse a gap
 * without one, a damaged anchor, an anchor that does not match the first kept record and a
 * missing first kept segment; segments left below the anchor are ignored. */
static void test_open_anchored(void **state) {
    (void)state;
    uint8_t pk[32], sk[64];
    crypto_sign_keypair(pk, sk);
    tdir_t d;
    tdir_make(&d);
    uint32_t nseg = build_segments(&d);
    char kept_copy[160], p[128], ap[128];
    seg_path(p, sizeof p, &d, 2);
    size_t seg2_len = 0;
    uint8_t *seg2 = slurp(p, &seg2_len);
    tg_anchor_t a = prune(&d, 3, sk);
    assert_int_equal(tg_anchor_verify(&a, pk), TG_OK);
    snprintf(ap, sizeof ap, "%s/%s", d.path, TG_ANCHOR_NAME);

    /* open replays from the anchor and appends after the last record */
    memset(&g_recs, 0, sizeof g_recs);
    tg_ledger_opts_t o = opts_for(&d);
    tg_ledger_t *l = NULL;
    tg_ledger_recovery_t rep;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_ledger_open(&l, &o, recs_fn, NULL, &rep, &diag);
    if (rc) {
        print_error("open: %s\n", diag.msg);
    }
    assert_int_equal(rc, TG_OK);
    assert_int_equal(g_recs.first, a.first_seq);
    assert_int_equal(rep.first_seq, a.first_seq);
    assert_int_equal(rep.last_seq, 16);
    assert_int_equal(rep.records, 16 - a.first_seq + 1);
    append_n(l, 17, 2);
    tg_ledger_close(l);
    tg_ledger_verify_report_t vr;
    int calls = 0;
    tg_ledger_verify_opts_t vo = {.anchor_check = anchor_refuse, .anchor_ud = &calls};
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, &diag), TG_OK);
    assert_true(vr.anchor_found);
    assert_true(vr.anchored);
    assert_int_equal(vr.anchor_seq, a.first_seq);
    assert_int_equal(vr.first_seq, a.first_seq);
    assert_int_equal(vr.last_seq, 18);
    assert_int_equal(vr.first_segment, 3);
    assert_int_equal(vr.anchors, 1);
    /* the anchor check is consulted, and its refusal fails the verify at the anchor */
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, &vo, &diag), TG_ERR_CRYPTO);
    assert_int_equal(calls, 1);
    assert_non_null(strstr(vr.fault_file, TG_ANCHOR_NAME));
    assert_non_null(strstr(vr.fault_what, "refused by the test"));

    /* a segment left below the anchor (an interrupted archive) is ignored */
    spit(p, seg2, seg2_len);
    assert_int_equal(tg_ledger_verify_path(&vr, d.path, NULL, &diag), TG_OK);
    assert_int_equal(vr.leftover_segments, 1);
    reopen_anchored(&d, 18);
    assert_int_equal(unlink(p), 0);

    /* a middle kept segment missing */
    assert_true(nseg >= 5);
    seg_path(p, sizeof p, &d, 4);
    snprintf(kept_copy, sizeof kept_copy, "%s.keep", p);
    assert_int_equal(rename(p, kept_copy), 0);
    expect_corrupt(&d, "ledger-000004.tgl");
    assert_int_equal(rename(kept_copy, p), 0);

    /* the anchor's hash is not the first kept record's prev_hash: a signed but wrong anchor */
    tg_anchor_t w = a;
    w.prev_hash[0] ^= 1;
    assert_int_equal(tg_anchor_sign(&w, sk), TG_OK);
    int dfd = open(d.path, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    assert_int_equal(tg_anchor_write(dfd, d.path, TG_ANCHOR_NAME, &w, &diag), TG_OK);
    expect_corrupt(&d, "ledger-000003.tgl: seq");
    /* ... or another seq */
    w = a;
    w.first_seq++;
    assert_int_equal(tg_anchor_sign(&w, sk), TG_OK);
    assert_int_equal(tg_anchor_write(dfd, d.path, TG_ANCHOR_NAME, &w, &diag), TG_OK);
    expect_corrupt(&d, "ledger-000003.tgl: seq");
    /* ... or a later segment: the first kept one is then below it, and the chain breaks */
    w = a;
    w.first_segment++;
    assert_int_equal(tg_anchor_sign(&w, sk), TG_OK);
    assert_int_equal(tg_anchor_write(dfd, d.path, TG_ANCHOR_NAME, &w, &diag), TG_OK);
    expect_corrupt(&d, "ledger-000004.tgl: seq");
    assert_int_equal(tg_anchor_write(dfd, d.path, TG_ANCHOR_NAME, &a, &diag), TG_OK);
    close(dfd);
    reopen_anchored(&d, 18);

    /* a damaged anchor file, or a truncated one */
    size_t alen = 0;
    uint8_t *abytes = slurp(ap, &alen);
    poke(ap, 0, 'X');
    expect_corrupt(&d, TG_ANCHOR_NAME);
    spit(ap, abytes, alen - 1);
    expect_corrupt(&d, TG_ANCHOR_NAME);
    spit(ap, abytes, alen);
    reopen_anchored(&d, 18);

    /* the anchor removed: the gap before segment 3 is corruption, and nothing is created */
    assert_int_equal(unlink(ap), 0);
    expect_corrupt(&d, "ledger-000001.tgl");
    seg_path(p, sizeof p, &d, 1);
    assert_int_not_equal(access(p, F_OK), 0);
    spit(ap, abytes, alen);

    /* the anchored first segment missing */
    for (uint32_t s = 3; s <= nseg; s++) {
        seg_path(p, sizeof p, &d, s);
        unlink(p);
    }
    expect_corrupt(&d, "ledger-000003.tgl");
    free(abytes);
    free(seg2);
    unlink(ap);
    tdir_remove(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_names, setup),
        cmocka_unit_test_setup(test_layout, setup),
        cmocka_unit_test_setup(test_roundtrip, setup),
        cmocka_unit_test_setup(test_version1_compat, setup),
        cmocka_unit_test_setup(test_args, setup),
        cmocka_unit_test_setup(test_replay_error, setup),
        cmocka_unit_test_setup(test_torn_every_offset, setup),
        cmocka_unit_test_setup(test_durable_head, setup),
        cmocka_unit_test_setup(test_tails, setup),
        cmocka_unit_test_setup(test_bitflips, setup),
        cmocka_unit_test_setup(test_rotation, setup),
        cmocka_unit_test_setup(test_missing_segments, setup),
        cmocka_unit_test_setup(test_group_commit, setup),
        cmocka_unit_test_setup(test_group_commit_batches, setup),
        cmocka_unit_test_setup(test_commit_delay, setup),
        cmocka_unit_test_setup(test_commit_nap, setup),
        cmocka_unit_test_setup(test_none_background_flush, setup),
        cmocka_unit_test_setup(test_none_flush_queued, setup),
        cmocka_unit_test_setup(test_append_now, setup),
        cmocka_unit_test_setup(test_fault_pwrite_eio, setup),
        cmocka_unit_test_setup(test_fault_pwrite_enospc, setup),
        cmocka_unit_test_setup(test_fault_short_write, setup),
        cmocka_unit_test_setup(test_short_write_completed, setup),
        cmocka_unit_test_setup(test_fault_fdatasync, setup),
        cmocka_unit_test_setup(test_fault_batch_in_flight, setup),
        cmocka_unit_test_setup(test_fault_auto_retry, setup),
        cmocka_unit_test_setup(test_fault_rotation, setup),
        cmocka_unit_test_setup(test_identity_dir_removed, setup),
        cmocka_unit_test_setup(test_identity_dir_moved, setup),
        cmocka_unit_test_setup(test_identity_dir_replaced, setup),
        cmocka_unit_test_setup(test_identity_segment, setup),
        cmocka_unit_test_setup(test_identity_lock, setup),
        cmocka_unit_test_setup(test_identity_race, setup),
        cmocka_unit_test_setup(test_open_orphans, setup),
        cmocka_unit_test_setup(test_open_no_create, setup),
        cmocka_unit_test_setup(test_open_probe, setup),
        cmocka_unit_test_setup(test_modes, setup),
        cmocka_unit_test_setup(test_read_at_errors, setup),
        cmocka_unit_test_setup(test_verify_check, setup),
        cmocka_unit_test_setup(test_feed_fsync, setup),
        cmocka_unit_test_setup(test_feed_batch, setup),
        cmocka_unit_test_setup(test_feed_none, setup),
        cmocka_unit_test_setup(test_feed_absent, setup),
        cmocka_unit_test_setup(test_anchor_format, setup),
        cmocka_unit_test_setup(test_open_anchored, setup),
    };
    if (sodium_init() < 0) {
        return 1;
    }
    pthread_mutex_init(&g_feed.mu, NULL);
    if (getenv("TG_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TG_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
