/* test_db_log.c — the transparency log of db.h on the file backend: records appended with
 * their entries are covered by signed checkpoints whose roots, inclusion and consistency
 * proofs verify from the stored hashes; a restart reproduces the checkpoint from the
 * replay; truncated ledgers, other keys and other origins refuse the start; a damaged
 * checkpoint slot falls back to the other; every durability mode; waiters; no log key. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "trigguard/db.h"
#include "trigguard/note.h"
#include "trigguard/tlog.h"

#include "../../src/store/tlog_engine.h"

#define ORIGIN "log.example.test/trigguard"
#define MAX_REC 600
#define SLOT 1024 /* tlog_file.h: the checkpoint file's slot size */

/* ---- fixture ---- */

typedef struct fx {
    char dir[64];
    tg_db_t *db;
    tg_note_signer_t signer;
    tg_durability_t mode;
    uint32_t batch_interval_ms;
    bool skip_restore;                /* the replay callback "forgets" tg_db_log_restore */
    tg_ledger_pos_t pos[MAX_REC + 1]; /* by seq */
} fx_t;

static void signer_of(tg_note_signer_t *s, const char *name, uint8_t seed_byte) {
    uint8_t seed[32];
    memset(seed, seed_byte, sizeof seed);
    assert_int_equal(tg_note_signer_from_seed(s, name, strlen(name), seed), TG_OK);
}

/* Record i: every fourth a SILENCE record (entry NULL: the backend's SHA-256 of the
 * payload), the others receipts with an entry of their own (as a receiptHash would be). */
static size_t payload_of(char out[64], uint64_t i) {
    return (size_t)snprintf(out, 64, "{\"rec\":%llu}", (unsigned long long)i);
}

static uint8_t type_of(uint64_t i) {
    return i % 4 == 0 ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
}

static void entry_from(uint8_t out[32], uint8_t type, const void *payload, size_t len) {
    if (type == TG_LEDGER_TYPE_SILENCE) {
        crypto_hash_sha256(out, payload, len);
        return;
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, (const uint8_t *)"R", 1);
    crypto_hash_sha256_update(&st, payload, len);
    crypto_hash_sha256_final(&st, out);
}

static void entry_of(uint8_t out[32], uint64_t i) {
    char p[64];
    size_t n = payload_of(p, i);
    entry_from(out, type_of(i), p, n);
}

static tg_err_t replay_fn(void *ud, const tg_ledger_record_t *rec) {
    fx_t *f = ud;
    if (f->skip_restore) {
        return TG_OK;
    }
    uint8_t e[32];
    entry_from(e, rec->type, rec->payload, rec->payload_len);
    if (rec->seq <= MAX_REC) {
        f->pos[rec->seq] = rec->pos;
    }
    return tg_db_log_restore(f->db, rec->seq, e);
}

/* Opens and starts the db on f->dir with `signer` (NULL: no log); the start's error. */
static tg_err_t start_db(fx_t *f, const tg_note_signer_t *signer, tg_diag_t *diag) {
    tg_db_opts_t o = {.backend = TG_DB_FILE};
    o.keys.max_key_len = 255;
    /* Small tables: these tests store no keys, and a start per case stays cheap (TSan). */
    o.keys.max_entries = o.receipts.max_entries = 1024;
    o.keys.shards = o.receipts.shards = 4;
    o.limit_entries = o.approval_entries = 1024;
    o.ledger = TG_LEDGER_OPTS_INIT;
    o.ledger.dir = f->dir;
    o.ledger.durability = f->mode;
    o.ledger.batch_interval_ms = f->batch_interval_ms;
    o.ledger.retry_ms = TG_LEDGER_RETRY_NEVER;
    o.log.signer = signer;
    o.log.min_interval_ms = 2;
    o.log.max_interval_ms = 20;
    f->db = NULL;
    assert_int_equal(tg_db_open(&f->db, &o, diag), TG_OK);
    tg_err_t rc = tg_db_start(f->db, replay_fn, f, NULL, diag);
    if (rc != TG_OK) {
        tg_db_close(f->db);
        f->db = NULL;
    }
    return rc;
}

static void open_db(fx_t *f) {
    tg_diag_t d = {{0}};
    tg_err_t rc = start_db(f, &f->signer, &d);
    if (rc != TG_OK) {
        fail_msg("start: %s: %s", tg_err_name(rc), d.msg);
    }
}

static void close_db(fx_t *f) {
    tg_db_close(f->db);
    f->db = NULL;
}

static fx_t *fx_new(tg_durability_t mode) {
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/tg_db_log_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->mode = mode;
    signer_of(&f->signer, ORIGIN, 0x42);
    return f;
}

static void fx_free(fx_t *f) {
    close_db(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    tg_note_signer_wipe(&f->signer);
    free(f);
}

/* ---- appending ---- */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    int calls;
    tg_err_t status;
    uint64_t leaf;
    tg_ledger_pos_t pos;
} waiter_t;

static void waiter_init(waiter_t *w, int pending) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->pending = pending;
    w->status = TG_ERR_INTERNAL;
}

static void waiter_end(waiter_t *w) {
    pthread_mutex_lock(&w->mu);
    while (w->pending > 0) {
        pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

typedef struct append_slot {
    waiter_t *w;
    tg_ledger_pos_t *pos;
} append_slot_t;

static void append_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    append_slot_t *s = ud;
    assert_int_equal(status, TG_OK);
    *s->pos = *pos;
    pthread_mutex_lock(&s->w->mu);
    s->w->pending--;
    pthread_cond_broadcast(&s->w->cv);
    pthread_mutex_unlock(&s->w->mu);
}

static void record_of(tg_db_record_t *r, uint64_t i, char p[64], uint8_t e[32]) {
    memset(r, 0, sizeof *r);
    r->type = type_of(i);
    r->payload = p;
    r->payload_len = payload_of(p, i);
    r->tenant = "t";
    r->tenant_len = 1;
    entry_of(e, i);
    r->entry = r->type == TG_LEDGER_TYPE_SILENCE ? NULL : e;
}

/* Appends records from..to (their seqs), all durable per the mode when this returns. */
static void append_range(fx_t *f, uint64_t from, uint64_t to) {
    assert_true(to <= MAX_REC);
    if (f->mode == TG_DURABILITY_NONE) {
        for (uint64_t i = from; i <= to; i++) {
            char p[64];
            uint8_t e[32];
            tg_db_record_t r;
            record_of(&r, i, p, e);
            assert_int_equal(tg_db_append_now(f->db, &r, &f->pos[i]), TG_OK);
            assert_int_equal(f->pos[i].seq, i);
        }
        return;
    }
    waiter_t w;
    waiter_init(&w, (int)(to - from + 1));
    static append_slot_t slots[MAX_REC + 1];
    for (uint64_t i = from; i <= to; i++) {
        char p[64];
        uint8_t e[32];
        tg_db_record_t r;
        record_of(&r, i, p, e);
        slots[i] = (append_slot_t){&w, &f->pos[i]};
        assert_int_equal(tg_db_append(f->db, &r, append_done, &slots[i]), TG_OK);
    }
    waiter_end(&w);
    for (uint64_t i = from; i <= to; i++) {
        assert_int_equal(f->pos[i].seq, i);
    }
}

static void wait_fn(void *ud, tg_err_t status, uint64_t leaf) {
    waiter_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    w->status = status;
    w->leaf = leaf;
    w->pending--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* tg_db_log_wait for the record seq, and its answer. */
static tg_err_t wait_for(fx_t *f, uint64_t seq, uint32_t timeout_ms) {
    waiter_t w;
    waiter_init(&w, 1);
    tg_ledger_pos_t pos = f->pos[seq];
    pos.seq = seq;
    assert_int_equal(tg_db_log_wait(f->db, &pos, timeout_ms, wait_fn, &w), TG_OK);
    waiter_end(&w);
    assert_int_equal(w.calls, 1);
    if (w.status == TG_OK) {
        assert_int_equal(w.leaf, seq - 1);
    }
    return w.status;
}

/* ---- checking ---- */

static tg_err_t db_read(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    return tg_db_log_hashes(ctx, level, index, 1, (uint8_t(*)[32])out->h);
}

/* The published checkpoint, its signature verified with the log key. */
static tg_checkpoint_t checkpoint_of(fx_t *f, tg_buf_t *note) {
    tg_buf_t local;
    tg_buf_init(&local, 0);
    tg_buf_t *b = note != NULL ? note : &local;
    tg_buf_reset(b);
    tg_checkpoint_t cp;
    assert_int_equal(tg_db_log_checkpoint(f->db, b, &cp), TG_OK);
    size_t text_len = 0;
    assert_int_equal(tg_note_verify(b->data, b->len, &f->signer.pub, 1, &text_len, NULL), TG_OK);
    tg_checkpoint_t parsed;
    assert_int_equal(tg_checkpoint_parse(&parsed, b->data, text_len), TG_OK);
    assert_int_equal(parsed.size, cp.size);
    assert_memory_equal(parsed.root, cp.root, 32);
    assert_string_equal(parsed.origin, ORIGIN);
    assert_string_equal(cp.origin, ORIGIN);
    assert_null(cp.ext);
    tg_buf_free(&local);
    return cp;
}

/* The root of records 1..n, computed here from the entries alone. */
static void root_of(tg_tlog_hash_t *root, uint64_t n) {
    static tg_tlog_hash_t leaves[MAX_REC];
    for (uint64_t i = 0; i < n; i++) {
        uint8_t e[32];
        entry_of(e, i + 1);
        tg_tlog_leaf_hash(&leaves[i], e, 32);
    }
    tg_tlog_root(root, leaves, n);
}

/* Everything a verifier could check of the published tree: the root from the entries, the
 * entries, every leaf's inclusion proof, and the hashes past it refused. */
static tg_checkpoint_t check_tree(fx_t *f) {
    tg_checkpoint_t cp = checkpoint_of(f, NULL);
    tg_tlog_hash_t root;
    root_of(&root, cp.size);
    assert_memory_equal(root.h, cp.root, 32);
    tg_tlog_reader_t rd = {db_read, f->db};
    for (uint64_t i = 0; i < cp.size; i++) {
        uint8_t want[32], got[1][32];
        entry_of(want, i + 1);
        assert_int_equal(tg_db_log_entries(f->db, i, 1, got), TG_OK);
        assert_memory_equal(got[0], want, 32);
        tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], leaf;
        size_t len = 0;
        assert_int_equal(tg_tlog_inclusion_proof(proof, &len, &rd, i, cp.size), TG_OK);
        tg_tlog_hash_t again[TG_TLOG_MAX_PROOF];
        size_t len2 = 0;
        assert_int_equal(tg_db_log_inclusion_proof(f->db, i, cp.size, again, &len2), TG_OK);
        assert_int_equal(len2, len);
        assert_memory_equal(again, proof, len * sizeof proof[0]);
        tg_tlog_leaf_hash(&leaf, want, 32);
        tg_tlog_hash_t r;
        memcpy(r.h, cp.root, 32);
        assert_int_equal(tg_tlog_verify_inclusion(&leaf, i, cp.size, proof, len, &r), TG_OK);
        tg_ledger_pos_t pos = {.seq = i + 1};
        uint64_t li = 99;
        assert_int_equal(tg_db_log_leaf(f->db, &pos, &li), TG_OK);
        assert_int_equal(li, i);
    }
    uint8_t out[2][32];
    assert_int_equal(tg_db_log_entries(f->db, cp.size, 1, out), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_hashes(f->db, 0, cp.size, 1, out), TG_ERR_NOT_FOUND);
    if (cp.size > 0) {
        assert_int_equal(tg_db_log_entries(f->db, cp.size - 1, 2, out), TG_ERR_NOT_FOUND);
        assert_int_equal(tg_db_log_hashes(f->db, 0, cp.size - 1, 1, out), TG_OK);
    }
    return cp;
}

/* old is consistent with new: the proof from the stored hashes verifies. */
static void check_consistent(fx_t *f, const tg_checkpoint_t *old, const tg_checkpoint_t *new) {
    assert_true(old->size <= new->size);
    if (old->size == 0) {
        return; /* nothing to prove from the empty tree (tlog.h) */
    }
    tg_tlog_reader_t rd = {db_read, f->db};
    tg_tlog_hash_t proof[TG_TLOG_MAX_PROOF], r1, r2;
    size_t len = 0;
    assert_int_equal(tg_tlog_consistency_proof(proof, &len, &rd, old->size, new->size), TG_OK);
    tg_tlog_hash_t again[TG_TLOG_MAX_PROOF];
    size_t len2 = 0;
    assert_int_equal(tg_db_log_consistency_proof(f->db, old->size, new->size, again, &len2), TG_OK);
    assert_int_equal(len2, len);
    assert_memory_equal(again, proof, len * sizeof proof[0]);
    assert_int_equal(tg_db_log_consistency_proof(f->db, old->size, new->size + 1000, again, &len2),
                     TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_consistency_proof(f->db, 0, new->size, again, &len2),
                     TG_ERR_INVALID_ARG);
    memcpy(r1.h, old->root, 32);
    memcpy(r2.h, new->root, 32);
    assert_int_equal(tg_tlog_verify_consistency(old->size, new->size, proof, len, &r1, &r2), TG_OK);
}

/* Waits until the published checkpoint covers records 1..n (tg_db_log_wait on seq n). */
static tg_checkpoint_t covered(fx_t *f, uint64_t n) {
    if (n > 0) {
        assert_int_equal(wait_for(f, n, 5000), TG_OK);
    }
    tg_checkpoint_t cp = checkpoint_of(f, NULL);
    assert_true(cp.size >= n);
    return cp;
}

static void path_in(char *out, size_t cap, const fx_t *f, const char *name) {
    snprintf(out, cap, "%s/%s", f->dir, name);
}

/* ---- tests ---- */

/* The log grows with the records: each checkpoint verifies (signature, root from the
 * entries, every inclusion proof) and is consistent with the one before. */
static void test_log_grows(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    tg_checkpoint_t c0 = covered(f, 0); /* the size-0 checkpoint, at start */
    assert_int_equal(c0.size, 0);
    tg_tlog_hash_t empty;
    tg_tlog_empty_root(&empty);
    assert_memory_equal(c0.root, empty.h, 32);
    uint64_t ends[] = {1, 2, 7, 8, 9, 64, 100, 257, 300};
    tg_checkpoint_t prev = c0;
    uint64_t have = 0;
    for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
        append_range(f, have + 1, ends[k]);
        have = ends[k];
        tg_checkpoint_t cp = covered(f, have);
        assert_int_equal(cp.size, have); /* nothing else was appended */
        cp = check_tree(f);
        check_consistent(f, &prev, &cp);
        prev = cp;
    }
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_true(st.log.enabled);
    assert_true(st.log.integrator);
    assert_int_equal(st.log.size, have);
    assert_int_equal(st.log.integrated, have);
    assert_true(st.log.checkpoints >= 2);
    assert_int_equal(st.log.failures, 0);
    assert_int_equal(st.log.waiters, 0);
    uint64_t lags = 0;
    for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
        lags += st.log.lag_hist[i];
    }
    assert_true(lags >= 1);
    /* a lag past the first bucket (1 µs and up) is part of the histogram's _sum */
    assert_true(lags == st.log.lag_hist[0] || st.log.lag_sum_us > 0);
    /* argument checks */
    uint8_t out[1][32];
    assert_int_equal(tg_db_log_hashes(f->db, 0, 0, 257, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes(f->db, 64, 0, 1, out), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes(f->db, 9, 0, 1, out), TG_ERR_NOT_FOUND); /* 512 > 300 */
    assert_int_equal(tg_db_log_hashes(f->db, 8, 0, 1, out), TG_OK);            /* 256 ≤ 300 */
    tg_db_log_at_t at[2] = {{.index = 0, .level = 8}, {.index = 1, .level = 2}};
    uint8_t two[2][32], one[1][32];
    assert_int_equal(tg_db_log_hashes_at(f->db, at, 2, two), TG_OK);
    assert_int_equal(tg_db_log_hashes(f->db, 2, 1, 1, one), TG_OK);
    assert_memory_equal(two[1], one[0], 32); /* in the order asked */
    at[1].level = 9;
    assert_int_equal(tg_db_log_hashes_at(f->db, at, 2, two), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_db_log_hashes_at(f->db, at, TG_DB_LOG_AT_MAX + 1, two), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes_at(f->db, NULL, 1, two), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_db_log_hashes_at(f->db, at, 0, NULL), TG_OK);
    assert_int_equal(tg_db_log_entries(f->db, UINT64_MAX, 1, out), TG_ERR_NOT_FOUND);
    tg_ledger_pos_t pos = {.seq = 0};
    uint64_t leaf;
    assert_int_equal(tg_db_log_leaf(f->db, &pos, &leaf), TG_ERR_INVALID_ARG);
    pos.seq = have + 10;
    assert_int_equal(tg_db_log_leaf(f->db, &pos, &leaf), TG_ERR_NOT_FOUND);
    /* a restore once started is a bug */
    uint8_t e[32] = {0};
    assert_int_equal(tg_db_log_restore(f->db, have + 1, e), TG_ERR_INVALID_ARG);
    fx_free(f);
}

/* Close and reopen: the replay rebuilds the tree, which reproduces the stored checkpoint
 * (the same note), and the next checkpoint is consistent with it. Twice. */
static void test_log_reopen(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    append_range(f, 1, 37);
    covered(f, 37);
    close_db(f);
    tg_buf_t before, after;
    tg_buf_init(&before, 0);
    tg_buf_init(&after, 0);
    for (int round = 0; round < 2; round++) {
        uint64_t have = 37 + 20 * (uint64_t)round;
        open_db(f);
        tg_checkpoint_t cp = checkpoint_of(f, &after);
        assert_int_equal(cp.size, have); /* the close signed over everything */
        if (round > 0) {
            assert_int_equal(after.len, before.len);
            assert_memory_equal(after.data, before.data, before.len); /* the stored note */
        }
        check_tree(f);
        append_range(f, have + 1, have + 20);
        tg_checkpoint_t next = covered(f, have + 20);
        check_consistent(f, &cp, &next);
        check_tree(f);
        close_db(f);
        open_db(f);
        checkpoint_of(f, &before);
        close_db(f);
    }
    tg_buf_free(&before);
    tg_buf_free(&after);
    fx_free(f);
}

/* The replay callback must restore every record: one that does not refuses the start. */
static void test_log_restore_missing(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    append_range(f, 1, 3);
    close_db(f);
    f->skip_restore = true;
    tg_diag_t d = {{0}};
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_INVALID_ARG);
    assert_non_null(strstr(d.msg, "restored 0 of the ledger's 3"));
    f->skip_restore = false;
    open_db(f);
    assert_int_equal(checkpoint_of(f, NULL).size, 3);
    fx_free(f);
}

/* A ledger cut at a record boundary below the checkpoint (with ledger.head moved away, as
 * the ledger's own refusal says to) refuses the start: the log signed records it no longer
 * has. Cut above the checkpoint's size, it starts. */
static void test_log_truncated(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    append_range(f, 1, 12);
    covered(f, 12);
    close_db(f);
    char seg[128], head[128];
    path_in(seg, sizeof seg, f, "ledger-000001.tgl");
    path_in(head, sizeof head, f, "ledger.head");
    assert_int_equal(truncate(seg, (off_t)f->pos[11].offset), 0); /* records 11 and 12 gone */
    assert_int_equal(unlink(head), 0);
    tg_diag_t d = {{0}};
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "covers 12 records"));
    assert_non_null(strstr(d.msg, "only 10"));
    fx_free(f);
}

/* Writes note into the checkpoint file's slot for generation gen (tlog_file.h's layout). */
static void write_slot(const fx_t *f, uint64_t gen, const char *note, size_t len) {
    uint8_t slot[SLOT];
    memset(slot, 0, sizeof slot);
    memcpy(slot, "TGTLCKP1", 8);
    for (int i = 0; i < 8; i++) {
        slot[8 + i] = (uint8_t)(gen >> (8 * i));
    }
    for (int i = 0; i < 4; i++) {
        slot[16 + i] = (uint8_t)(len >> (8 * i));
    }
    memcpy(slot + 20, note, len);
    crypto_hash_sha256(slot + SLOT - 32, slot, SLOT - 32);
    char path[128];
    path_in(path, sizeof path, f, "tlog/checkpoint");
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, slot, sizeof slot, (off_t)((gen % 2) * SLOT)), (ssize_t)SLOT);
    close(fd);
}

/* Both slots hold a checkpoint signed by s over (origin, size, root). */
static void plant(const fx_t *f, const tg_note_signer_t *s, const char *origin, uint64_t size,
                  const uint8_t root[32]) {
    char body[TG_CHECKPOINT_BODY_MAX], note[2048];
    size_t blen = 0, nlen = 0;
    assert_int_equal(
        tg_checkpoint_format(body, sizeof body, &blen, origin, strlen(origin), size, root), TG_OK);
    assert_int_equal(tg_note_sign(note, sizeof note, &nlen, body, blen, s), TG_OK);
    write_slot(f, 1001, note, nlen);
    write_slot(f, 1002, note, nlen);
}

/* Checkpoints the records do not reproduce: another key (same name), another origin
 * (signed by the log key), another root (as altered or reordered records would give), a
 * size past the ledger. Each refuses the start and names the reason; the true one starts. */
static void test_log_foreign_checkpoint(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    append_range(f, 1, 9);
    tg_checkpoint_t cp = covered(f, 9);
    close_db(f);
    tg_note_signer_t other;
    signer_of(&other, ORIGIN, 0x43);
    tg_diag_t d = {{0}};
    /* the same log key under another name signs for another origin: not this log's key */
    assert_int_equal(start_db(f, &other, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "signature"));
    plant(f, &other, ORIGIN, cp.size, cp.root);
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "signature is not by this log key"));
    plant(f, &f->signer, "another.example/log", cp.size, cp.root);
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "origin"));
    uint8_t root[32];
    memcpy(root, cp.root, 32);
    root[5] ^= 1;
    plant(f, &f->signer, ORIGIN, cp.size, root);
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "root at size 9"));
    tg_tlog_hash_t r8;
    root_of(&r8, 8);
    plant(f, &f->signer, ORIGIN, 8, r8.h); /* an older checkpoint of this log: fine */
    open_db(f);
    assert_int_equal(checkpoint_of(f, NULL).size, 9); /* and the 9th signed at once */
    close_db(f);
    root_of(&r8, 9);
    plant(f, &f->signer, ORIGIN, 10, r8.h);
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "covers 10 records"));
    plant(f, &f->signer, ORIGIN, cp.size, cp.root);
    open_db(f);
    check_tree(f);
    tg_note_signer_wipe(&other);
    fx_free(f);
}

static uint64_t slot_gen(const uint8_t *raw, int i) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) {
        v = (v << 8) | raw[i * SLOT + 8 + k];
    }
    return v;
}

/* The newest slot damaged: the start takes the other (an older checkpoint of the same log)
 * and signs the current size at once; both damaged refuses; a slot torn by a crash during
 * the very first write (the other never written) counts as no checkpoint. */
static void test_log_slot_fallback(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    open_db(f);
    append_range(f, 1, 5);
    tg_checkpoint_t c5 = covered(f, 5);
    append_range(f, 6, 11);
    covered(f, 11);
    close_db(f);
    char path[128];
    path_in(path, sizeof path, f, "tlog/checkpoint");
    uint8_t raw[2 * SLOT];
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, raw, sizeof raw, 0), (ssize_t)sizeof raw);
    int newest = slot_gen(raw, 0) > slot_gen(raw, 1) ? 0 : 1;
    uint8_t flip = raw[newest * SLOT + 100] ^ 0x01;
    assert_int_equal(pwrite(fd, &flip, 1, newest * SLOT + 100), 1);
    open_db(f);
    tg_checkpoint_t cp = check_tree(f);
    assert_int_equal(cp.size, 11);
    check_consistent(f, &c5, &cp);
    close_db(f);
    /* both slots damaged */
    assert_int_equal(pread(fd, raw, sizeof raw, 0), (ssize_t)sizeof raw);
    for (int i = 0; i < 2; i++) {
        flip = raw[i * SLOT + 60] ^ 0x80;
        assert_int_equal(pwrite(fd, &flip, 1, i * SLOT + 60), 1);
    }
    tg_diag_t d = {{0}};
    assert_int_equal(start_db(f, &f->signer, &d), TG_ERR_LOG_INCONSISTENT);
    assert_non_null(strstr(d.msg, "both slots"));
    /* one torn, the other empty: no checkpoint yet, a new one at once */
    uint8_t zero[SLOT];
    memset(zero, 0, sizeof zero);
    assert_int_equal(pwrite(fd, zero, sizeof zero, 0), (ssize_t)SLOT);
    close(fd);
    open_db(f);
    assert_int_equal(check_tree(f).size, 11);
    fx_free(f);
}

/* Batch mode: records are covered only after the periodic sync; none mode: after the sync
 * the log asks for (max_interval_ms); both verify and survive a restart. */
static void mode_case(tg_durability_t mode) {
    fx_t *f = fx_new(mode);
    f->batch_interval_ms = 10;
    open_db(f);
    append_range(f, 1, 40);
    covered(f, 40);
    tg_checkpoint_t a = check_tree(f);
    append_range(f, 41, 77);
    covered(f, 77);
    tg_checkpoint_t b = check_tree(f);
    check_consistent(f, &a, &b);
    close_db(f);
    open_db(f);
    assert_int_equal(check_tree(f).size, 77);
    fx_free(f);
}

static void test_log_batch(void **state) {
    (void)state;
    mode_case(TG_DURABILITY_BATCH);
}

static void test_log_none(void **state) {
    (void)state;
    mode_case(TG_DURABILITY_NONE);
}

/* Waiters: a record not yet synced (batch mode, a long interval) is pending until its
 * timeout; the close syncs it, and its last checkpoint covers it; a waiter for a record
 * that never comes is failed at the close. */
static void test_log_wait(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_BATCH);
    f->batch_interval_ms = 60000;
    open_db(f);
    append_range(f, 1, 3); /* acknowledged at write: not synced, not in the log */
    assert_int_equal(wait_for(f, 3, 30), TG_ERR_LOG_PENDING);
    tg_ledger_pos_t pos = f->pos[3];
    uint64_t leaf = 7;
    assert_int_equal(tg_db_log_leaf(f->db, &pos, &leaf), TG_ERR_LOG_PENDING);
    assert_int_equal(checkpoint_of(f, NULL).size, 0);
    waiter_t w3, w9;
    waiter_init(&w3, 1);
    waiter_init(&w9, 1);
    assert_int_equal(tg_db_log_wait(f->db, &pos, 60000, wait_fn, &w3), TG_OK);
    tg_ledger_pos_t far = {.seq = 9};
    assert_int_equal(tg_db_log_wait(f->db, &far, 60000, wait_fn, &w9), TG_OK);
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_int_equal(st.log.waiters, 2);
    assert_int_equal(tg_db_log_wait(f->db, &pos, 10, NULL, NULL), TG_ERR_INVALID_ARG);
    close_db(f);
    waiter_end(&w3);
    waiter_end(&w9);
    assert_int_equal(w3.status, TG_OK);
    assert_int_equal(w3.leaf, 2);
    assert_int_equal(w9.status, TG_ERR_LOG_PENDING);
    open_db(f);
    assert_int_equal(check_tree(f).size, 3);
    /* covered already: answered at once, on this thread */
    assert_int_equal(wait_for(f, 2, 0), TG_OK);
    fx_free(f);
}

/* No log key: every log function answers TG_ERR_LOG_DISABLED, restore is a no-op, and no
 * tlog directory appears. */
static void test_log_disabled(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    tg_diag_t d = {{0}};
    assert_int_equal(start_db(f, NULL, &d), TG_OK);
    append_range(f, 1, 4);
    close_db(f);
    assert_int_equal(start_db(f, NULL, &d), TG_OK); /* the replay restores into no log */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_checkpoint_t cp;
    uint8_t out[1][32];
    tg_ledger_pos_t pos = {.seq = 1};
    uint64_t leaf;
    waiter_t w;
    waiter_init(&w, 0);
    assert_int_equal(tg_db_log_checkpoint(f->db, &b, &cp), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_hashes(f->db, 0, 0, 1, out), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_entries(f->db, 0, 1, out), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_leaf(f->db, &pos, &leaf), TG_ERR_LOG_DISABLED);
    assert_int_equal(tg_db_log_wait(f->db, &pos, 10, wait_fn, &w), TG_ERR_LOG_DISABLED);
    assert_int_equal(w.calls, 0);
    waiter_end(&w);
    uint8_t e[32] = {0};
    assert_int_equal(tg_db_log_restore(f->db, 99, e), TG_OK);
    tg_db_stats_t st;
    tg_db_stats(f->db, &st);
    assert_false(st.log.enabled);
    assert_int_equal(st.records.records, 0); /* replayed records are not appends */
    char path[128];
    path_in(path, sizeof path, f, "tlog");
    struct stat sb;
    assert_int_equal(stat(path, &sb), -1);
    tg_buf_free(&b);
    fx_free(f);
}

/* The ledger's own tools take the tlog/ subdirectory in their stride: verify passes and a
 * log enabled later rebuilds its tree from the whole ledger. */
static void test_log_dir_and_verify(void **state) {
    (void)state;
    fx_t *f = fx_new(TG_DURABILITY_FSYNC);
    tg_diag_t d = {{0}};
    assert_int_equal(start_db(f, NULL, &d), TG_OK);
    append_range(f, 1, 6); /* without a log */
    close_db(f);
    open_db(f);
    assert_int_equal(checkpoint_of(f, NULL).size, 6);
    append_range(f, 7, 8);
    covered(f, 8);
    close_db(f);
    tg_ledger_verify_report_t vr;
    assert_int_equal(tg_ledger_verify_path(&vr, f->dir, NULL, &d), TG_OK);
    assert_int_equal(vr.records, 8);
    open_db(f);
    check_tree(f);
    fx_free(f);
}

/* ---- the integrator alone (tlog_engine.h), over an in-memory backend ---- */

#define MEM_LEAVES 512
typedef struct mem_be {
    pthread_mutex_t mu;
    bool fail;          /* commit answers TG_ERR_IO */
    int commits, fails; /* successful and failed commits */
    int syncs;          /* sync calls (each after a successful commit) */
    bool sync_fail;     /* sync answers TG_ERR_IO */
    uint64_t size;      /* the committed tree's */
    tg_tlog_hash_t h[10][MEM_LEAVES];
    uint8_t entries[MEM_LEAVES][32];
    uint64_t tags[MEM_LEAVES];
    char note[TG_TLE_NOTE_MAX];
    size_t note_len;
} mem_be_t;

static tg_err_t mem_commit(void *ctx, const tg_tle_step_t *st) {
    mem_be_t *m = ctx;
    pthread_mutex_lock(&m->mu);
    tg_err_t rc = TG_OK;
    if (m->fail) {
        m->fails++;
        rc = TG_ERR_IO;
    } else if (st->old_size != m->size || st->new_size > MEM_LEAVES) {
        rc = TG_ERR_INTERNAL; /* a step must continue the committed tree */
    } else {
        for (uint64_t i = st->old_size; i < st->new_size; i++) {
            memcpy(m->entries[i], st->entries[i - st->old_size], 32);
            m->tags[i] = st->tags[i - st->old_size];
        }
        for (size_t i = 0; i < st->n_hashes; i++) {
            assert_true(st->hashes[i].level < 10);
            m->h[st->hashes[i].level][st->hashes[i].index] = st->hashes[i].hash;
        }
        m->size = st->new_size;
        memcpy(m->note, st->note, st->note_len);
        m->note_len = st->note_len;
        m->commits++;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static tg_err_t mem_read(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    mem_be_t *m = ctx;
    if (level >= 10 || index >= MEM_LEAVES) {
        return TG_ERR_NOT_FOUND;
    }
    pthread_mutex_lock(&m->mu);
    *out = m->h[level][index];
    pthread_mutex_unlock(&m->mu);
    return TG_OK;
}

static tg_err_t mem_store(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    mem_be_t *m = ctx;
    m->h[level][index] = *h;
    return TG_OK;
}

static void mem_fail(mem_be_t *m, bool fail) {
    pthread_mutex_lock(&m->mu);
    m->fail = fail;
    pthread_mutex_unlock(&m->mu);
}

static tg_err_t mem_sync(void *ctx) {
    mem_be_t *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->syncs++;
    bool fail = m->sync_fail;
    pthread_mutex_unlock(&m->mu);
    return fail ? TG_ERR_IO : TG_OK;
}

static tg_tle_t *engine_new(mem_be_t *m, const tg_note_signer_t *s, uint32_t max_waiters) {
    tg_tle_opts_t o = {s, 1, 20, max_waiters};
    tg_tle_backend_t be = {.commit = mem_commit, .read = mem_read, .ctx = m, .sync = mem_sync};
    tg_tle_t *e = NULL;
    assert_int_equal(tg_tle_create(&e, &o, &be, NULL), TG_OK);
    return e;
}

static void push_range(tg_tle_t *e, uint64_t from, uint64_t to) {
    for (uint64_t i = from; i <= to; i++) {
        uint8_t ent[1][32];
        entry_of(ent[0], i + 1);
        uint64_t tag = 1000 + i;
        assert_int_equal(tg_tle_push(e, i, (const uint8_t(*)[32])ent, &tag, 1), TG_OK);
    }
}

static tg_err_t engine_wait(tg_tle_t *e, uint64_t leaf, uint32_t timeout_ms) {
    waiter_t w;
    waiter_init(&w, 1);
    assert_int_equal(tg_tle_wait(e, leaf, timeout_ms, wait_fn, &w), TG_OK);
    waiter_end(&w);
    return w.status;
}

/* Push, checkpoint, publish: the step continues the tree, carries entries and tags, the
 * root is the entries' root; pushes out of order are refused; a failed commit publishes
 * nothing and is retried with what came meanwhile; the waiter bound; the close's last
 * checkpoint; a second engine takes the tree over (restore_range) and adopts the note. */
static void test_engine(void **state) {
    (void)state;
    static mem_be_t m;
    memset(&m, 0, sizeof m);
    pthread_mutex_init(&m.mu, NULL);
    tg_note_signer_t s, other;
    signer_of(&s, ORIGIN, 7);
    signer_of(&other, ORIGIN, 8);
    tg_tle_t *e = engine_new(&m, &s, 3);
    uint8_t none[1][32] = {{0}};
    assert_int_equal(tg_tle_push(e, 1, (const uint8_t(*)[32])none, NULL, 1), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tle_published(e, NULL, NULL), TG_ERR_LOG_PENDING);
    assert_int_equal(tg_tle_wait(e, 0, 10, wait_fn, NULL), TG_ERR_INVALID_ARG); /* not running */
    assert_int_equal(tg_tle_start(e, NULL), TG_OK);
    assert_int_equal(tg_tle_start(e, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(m.commits, 1); /* the size-0 checkpoint, before start returned */
    assert_int_equal(m.syncs, 1);   /* and synced before it returned */
    assert_int_equal(tg_tle_published_size(e), 0);
    push_range(e, 0, 9);
    assert_int_equal(tg_tle_push(e, 9, (const uint8_t(*)[32])none, NULL, 1), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_tle_push(e, 11, (const uint8_t(*)[32])none, NULL, 1), TG_ERR_INVALID_ARG);
    assert_int_equal(engine_wait(e, 9, 5000), TG_OK);
    tg_buf_t note;
    tg_buf_init(&note, 0);
    tg_checkpoint_t cp;
    assert_int_equal(tg_tle_published(e, &note, &cp), TG_OK);
    assert_int_equal(cp.size, 10);
    tg_tlog_hash_t root;
    root_of(&root, 10);
    assert_memory_equal(cp.root, root.h, 32);
    pthread_mutex_lock(&m.mu);
    assert_int_equal(m.size, 10);
    assert_int_equal(m.note_len, note.len);
    assert_memory_equal(m.note, note.data, note.len);
    for (uint64_t i = 0; i < 10; i++) {
        uint8_t want[32];
        entry_of(want, i + 1);
        assert_memory_equal(m.entries[i], want, 32);
        assert_int_equal(m.tags[i], 1000 + i);
    }
    pthread_mutex_unlock(&m.mu);
    /* a failing backend: nothing published, counted, retried once it works */
    mem_fail(&m, true);
    push_range(e, 10, 14);
    assert_int_equal(engine_wait(e, 14, 60), TG_ERR_LOG_PENDING);
    tg_tle_stats_t st;
    tg_tle_stats(e, &st);
    assert_true(st.failures >= 1);
    assert_int_equal(st.size, 10);
    assert_int_equal(st.pushed, 15);
    assert_int_equal(tg_tle_published_size(e), 10);
    push_range(e, 15, 16); /* arrive while failing: join the retry */
    mem_fail(&m, false);
    assert_int_equal(engine_wait(e, 16, 5000), TG_OK);
    assert_int_equal(tg_tle_published_size(e), 17);
    /* a failing sync: the step stays published (it agrees with the ledger), counted */
    tg_tle_stats(e, &st);
    uint64_t failures = st.failures;
    pthread_mutex_lock(&m.mu);
    m.sync_fail = true;
    pthread_mutex_unlock(&m.mu);
    push_range(e, 17, 17);
    assert_int_equal(engine_wait(e, 17, 5000), TG_OK);
    assert_int_equal(tg_tle_published_size(e), 18);
    tg_tle_stats(e, &st);
    for (int i = 0; i < 500 && st.failures == failures; i++) {
        (void)usleep(2000); /* the sync runs after the waiters were answered */
        tg_tle_stats(e, &st);
    }
    assert_int_equal(st.failures, failures + 1);
    pthread_mutex_lock(&m.mu);
    m.sync_fail = false;
    pthread_mutex_unlock(&m.mu);
    /* the waiter bound: 3 waiting, the 4th refused; the close fails them */
    waiter_t w[3];
    for (int i = 0; i < 3; i++) {
        waiter_init(&w[i], 1);
        assert_int_equal(tg_tle_wait(e, 100 + (uint64_t)i, 60000, wait_fn, &w[i]), TG_OK);
    }
    assert_int_equal(tg_tle_wait(e, 200, 60000, wait_fn, NULL), TG_ERR_LIMIT);
    tg_tle_stats(e, &st);
    assert_int_equal(st.waiters, 3);
    /* the close integrates what is pending and commits it */
    push_range(e, 18, 19);
    tg_tle_destroy(e);
    assert_int_equal(m.syncs, m.commits); /* every committed step synced, the last too */
    for (int i = 0; i < 3; i++) {
        waiter_end(&w[i]);
        assert_int_equal(w[i].status, TG_ERR_LOG_PENDING);
    }
    assert_int_equal(m.size, 20);
    /* a takeover: the tree rebuilt as a range, the stored note adopted */
    tg_tlog_range_t r;
    tg_tlog_range_init(&r);
    for (uint64_t i = 0; i < 20; i++) {
        uint8_t ent[32];
        tg_tlog_hash_t leaf;
        entry_of(ent, i + 1);
        tg_tlog_leaf_hash(&leaf, ent, 32);
        assert_int_equal(tg_tlog_range_append(&r, &leaf, NULL, NULL), TG_OK);
    }
    tg_tle_t *e2 = engine_new(&m, &other, 0);
    assert_int_equal(tg_tle_restore_range(e2, &r), TG_OK);
    tg_diag_t d = {{0}};
    assert_int_equal(tg_tle_adopt(e2, m.note, m.note_len, &d), TG_ERR_LOG_INCONSISTENT);
    tg_tle_destroy(e2);
    e2 = engine_new(&m, &s, 0);
    assert_int_equal(tg_tle_restore_range(e2, &r), TG_OK);
    assert_int_equal(tg_tle_adopt(e2, m.note, m.note_len, &d), TG_OK);
    assert_int_equal(tg_tle_published_size(e2), 20);
    int commits = m.commits;
    assert_int_equal(tg_tle_start(e2, NULL), TG_OK);
    assert_int_equal(m.commits, commits); /* nothing new to sign */
    assert_int_equal(tg_tle_restore_range(e2, &r), TG_ERR_INVALID_ARG);
    uint8_t ent[32] = {0};
    assert_int_equal(tg_tle_restore_leaf(e2, ent, mem_store, &m), TG_ERR_INVALID_ARG);
    assert_int_equal(engine_wait(e2, 19, 0), TG_OK);
    assert_int_equal(engine_wait(e2, 20, 0), TG_ERR_LOG_PENDING);
    tg_tle_destroy(e2);
    assert_int_equal(m.commits, commits);
    tg_buf_free(&note);
    tg_note_signer_wipe(&s);
    tg_note_signer_wipe(&other);
    pthread_mutex_destroy(&m.mu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_grows),
        cmocka_unit_test(test_log_reopen),
        cmocka_unit_test(test_log_restore_missing),
        cmocka_unit_test(test_log_truncated),
        cmocka_unit_test(test_log_foreign_checkpoint),
        cmocka_unit_test(test_log_slot_fallback),
        cmocka_unit_test(test_log_batch),
        cmocka_unit_test(test_log_none),
        cmocka_unit_test(test_log_wait),
        cmocka_unit_test(test_log_disabled),
        cmocka_unit_test(test_log_dir_and_verify),
        cmocka_unit_test(test_engine),
    };
    if (sodium_init() < 0) {
        return 1;
    }
    if (getenv("TG_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TG_TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
