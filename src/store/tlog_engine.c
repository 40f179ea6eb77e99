/* tlog_engine.c — the transparency log's integrator (tlog_engine.h says what and why). */
#include "tlog_engine.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "trigguard/clock.h"

#define DEFAULT_MIN_MS 5u
#define DEFAULT_MAX_MS 100u
#define DEFAULT_MAX_WAITERS 65536u
#define FIRE_CHUNK 128 /* waiter callbacks taken out per pass (on the stack) */

/* Entries and their tags, one growable pair of arrays. */
typedef struct tle_vec {
    uint8_t (*e)[32];
    uint64_t *tags;
    size_t n, cap;
} tle_vec_t;

typedef struct tle_waiter {
    uint64_t leaf;
    int64_t deadline_ns;
    tg_tle_wait_fn fn;
    void *ud;
} tle_waiter_t;

struct tg_tle {
    tg_note_signer_t signer;
    tg_tle_backend_t be;
    uint32_t min_ms, max_ms, max_waiters;

    /* The tree as last committed: restore's before start, the engine thread's after (no
     * lock: nobody else touches it once the thread runs; sizes for others go through
     * `integrated` and `pub_size`). */
    tg_tlog_range_t range;

    /* Under mu: the queue, the waiters, control and most counters. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tle_vec_t pending;
    uint64_t next_leaf;     /* range size + work + pending: the next push's first leaf */
    int64_t pending_newest; /* monotonic ns of the newest push in pending */
    tle_waiter_t *waiters;
    size_t n_waiters, cap_waiters;
    int64_t wake_at; /* when the sleeping thread wakes by itself (INT64_MAX: only if woken) */
    bool started, running, stopping;
    pthread_t thread;
    uint64_t integrated, checkpoints, failures, lag_ms_last, lag_sum_us;
    uint64_t lag_hist[TG_LEDGER_FSYNC_BUCKETS];

    /* The published checkpoint: written under mu and pub_mu both (lock order mu, pub_mu),
     * so a reader may hold either. */
    pthread_mutex_t pub_mu;
    bool have_pub;
    uint64_t pub_size;
    uint8_t pub_root[32];
    char pub_note[TG_TLE_NOTE_MAX];
    size_t pub_note_len;

    /* The engine thread's own (and tg_tle_start's, before the thread exists); under mu. */
    tle_vec_t work; /* taken from pending, not yet committed */
    int64_t work_newest;
    bool initial;          /* a checkpoint is due although nothing is pending (see the top) */
    int64_t last_cp;       /* monotonic ns of the last step */
    int64_t retry_at;      /* after a failed step: not before this */
    tg_tle_hash_t *hashes; /* the step's stored hashes */
    size_t n_hashes, cap_hashes;
};

/* ---- small helpers ---- */

static bool vec_reserve(tle_vec_t *v, size_t extra) {
    if (extra <= v->cap - v->n) {
        return true;
    }
    if (v->n > SIZE_MAX / 2 - extra) {
        return false;
    }
    size_t cap = v->cap ? v->cap : 256;
    while (cap < v->n + extra) {
        cap *= 2;
    }
    uint8_t(*e)[32] = realloc(v->e, cap * sizeof *v->e);
    if (e == NULL) {
        return false;
    }
    v->e = e;
    uint64_t *t = realloc(v->tags, cap * sizeof *v->tags);
    if (t == NULL) {
        return false; /* e stays larger than cap says: harmless */
    }
    v->tags = t;
    v->cap = cap;
    return true;
}

static void vec_free(tle_vec_t *v) {
    free(v->e);
    free(v->tags);
    memset(v, 0, sizeof *v);
}

static void deadline_ts(struct timespec *ts, int64_t at_ns) {
    ts->tv_sec = (time_t)(at_ns / 1000000000);
    ts->tv_nsec = (long)(at_ns % 1000000000);
}

static int64_t ms_after(int64_t now_ns, uint32_t ms) { return now_ns + (int64_t)ms * 1000000; }

/* ---- create, restore ---- */

tg_err_t tg_tle_create(tg_tle_t **out, const tg_tle_opts_t *opts, const tg_tle_backend_t *be,
                       tg_diag_t *diag) {
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tlog engine: NULL out");
    }
    *out = NULL;
    if (opts == NULL || opts->signer == NULL || be == NULL || be->commit == NULL ||
        be->read == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "tlog engine: a signer and a backend (commit, read) are required");
    }
    if (sodium_init() < 0) {
        return tg_diag_set(diag, TG_ERR_CRYPTO, "libsodium failed to start");
    }
    tg_tle_t *e = calloc(1, sizeof *e);
    if (e == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "tlog engine: out of memory");
    }
    e->signer = *opts->signer;
    e->be = *be;
    e->min_ms = opts->min_interval_ms ? opts->min_interval_ms : DEFAULT_MIN_MS;
    e->max_ms = opts->max_interval_ms ? opts->max_interval_ms : DEFAULT_MAX_MS;
    e->max_waiters = opts->max_waiters ? opts->max_waiters : DEFAULT_MAX_WAITERS;
    tg_tlog_range_init(&e->range);
    e->wake_at = INT64_MAX;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->pub_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = e;
    return TG_OK;
}

/* Restore runs before the thread, but a push may come early (the ledger feeds from its
 * writer as soon as it is open): the tree may only change while nothing is pending. */
static bool restorable(tg_tle_t *e) {
    pthread_mutex_lock(&e->mu);
    bool ok = !e->started && e->pending.n == 0;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

tg_err_t tg_tle_restore_leaf(tg_tle_t *e, const uint8_t entry[32], tg_tlog_store_fn store,
                             void *ctx) {
    if (e == NULL || entry == NULL || !restorable(e)) {
        return TG_ERR_INVALID_ARG;
    }
    tg_tlog_hash_t leaf;
    tg_tlog_leaf_hash(&leaf, entry, 32);
    tg_err_t rc = tg_tlog_range_append(&e->range, &leaf, store, ctx);
    if (rc == TG_OK) {
        pthread_mutex_lock(&e->mu);
        e->next_leaf = e->integrated = e->range.size;
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

tg_err_t tg_tle_restore_range(tg_tle_t *e, const tg_tlog_range_t *r) {
    if (e == NULL || r == NULL || r->count > TG_TLOG_RANGE_MAX || !restorable(e)) {
        return TG_ERR_INVALID_ARG;
    }
    e->range = *r;
    pthread_mutex_lock(&e->mu);
    e->next_leaf = e->integrated = e->range.size;
    pthread_mutex_unlock(&e->mu);
    return TG_OK;
}

uint64_t tg_tle_size(tg_tle_t *e) {
    if (e == NULL) {
        return 0;
    }
    pthread_mutex_lock(&e->mu);
    uint64_t n = e->integrated;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Caller holds mu. */
static void publish_locked(tg_tle_t *e, uint64_t size, const uint8_t root[32], const char *note,
                           size_t len) {
    pthread_mutex_lock(&e->pub_mu);
    e->have_pub = true;
    e->pub_size = size;
    memcpy(e->pub_root, root, 32);
    memcpy(e->pub_note, note, len);
    e->pub_note[len] = '\0';
    e->pub_note_len = len;
    pthread_mutex_unlock(&e->pub_mu);
}

tg_err_t tg_tle_adopt(tg_tle_t *e, const char *note, size_t len, tg_diag_t *diag) {
    if (e == NULL || note == NULL || !restorable(e)) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tlog adopt: not before start");
    }
    if (len >= TG_TLE_NOTE_MAX) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the stored checkpoint is %zu bytes, longer than any this log signs",
                           len);
    }
    size_t text_len = 0;
    tg_err_t rc = tg_note_verify(note, len, &e->signer.pub, 1, &text_len, NULL);
    if (rc != TG_OK) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the stored checkpoint's signature is not by this log key (%s): "
                           "another key or a damaged note",
                           tg_err_name(rc));
    }
    tg_checkpoint_t cp;
    rc = tg_checkpoint_parse(&cp, note, text_len);
    if (rc != TG_OK) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the stored checkpoint's body does not parse (%s)", tg_err_name(rc));
    }
    if (cp.origin_len != e->signer.pub.name_len ||
        memcmp(cp.origin, e->signer.pub.name, cp.origin_len) != 0) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the stored checkpoint's origin '%.64s' is not this log's '%.64s'",
                           cp.origin, e->signer.pub.name);
    }
    if (cp.size > e->range.size) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the stored checkpoint covers %llu records, the ledger holds only "
                           "%llu (truncated or lost records)",
                           (unsigned long long)cp.size, (unsigned long long)e->range.size);
    }
    tg_tlog_hash_t root;
    if (cp.size == 0) {
        tg_tlog_empty_root(&root);
    } else {
        tg_tlog_reader_t rd = {e->be.read, e->be.ctx};
        rc = tg_tlog_subtree_hash(&root, &rd, 0, cp.size);
        if (rc != TG_OK) {
            return tg_diag_set(diag, rc, "reading the stored hashes for the root of size %llu: %s",
                               (unsigned long long)cp.size, tg_strerror(rc));
        }
    }
    if (sodium_memcmp(root.h, cp.root, 32) != 0) {
        return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                           "the records do not reproduce the stored checkpoint's root at size "
                           "%llu (altered or reordered records)",
                           (unsigned long long)cp.size);
    }
    pthread_mutex_lock(&e->mu);
    publish_locked(e, cp.size, cp.root, note, len);
    pthread_mutex_unlock(&e->mu);
    return TG_OK;
}

/* ---- the engine thread ---- */

static tg_err_t collect_hash(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    tg_tle_t *e = ctx;
    if (e->n_hashes == e->cap_hashes) {
        size_t cap = e->cap_hashes ? e->cap_hashes * 2 : 512;
        tg_tle_hash_t *p = realloc(e->hashes, cap * sizeof *p);
        if (p == NULL) {
            return TG_ERR_NOMEM;
        }
        e->hashes = p;
        e->cap_hashes = cap;
    }
    e->hashes[e->n_hashes++] = (tg_tle_hash_t){level, index, *h};
    return TG_OK;
}

/* Caller holds mu. Moves pending behind work (swapping when work is empty: no copy). On
 * allocation failure the rest waits in pending for the next step. */
static void take_pending(tg_tle_t *e) {
    if (e->pending.n == 0) {
        return;
    }
    if (e->work.n == 0) {
        tle_vec_t t = e->work;
        e->work = e->pending;
        e->pending = t;
        e->work_newest = e->pending_newest;
        return;
    }
    if (!vec_reserve(&e->work, e->pending.n)) {
        return;
    }
    memcpy(e->work.e + e->work.n, e->pending.e, e->pending.n * sizeof *e->pending.e);
    memcpy(e->work.tags + e->work.n, e->pending.tags, e->pending.n * sizeof *e->pending.tags);
    e->work.n += e->pending.n;
    e->pending.n = 0;
    e->work_newest = e->pending_newest;
}

/* Engine thread, no lock held: integrates work into a copy of the tree, signs, commits.
 * TG_OK: r, root, note are the new published state. */
static tg_err_t make_step(tg_tle_t *e, tg_tlog_range_t *r, tg_tlog_hash_t *root, char *note,
                          size_t *note_len) {
    *r = e->range; /* plain data: a failed step leaves e->range as it was */
    e->n_hashes = 0;
    for (size_t i = 0; i < e->work.n; i++) {
        tg_tlog_hash_t leaf;
        tg_tlog_leaf_hash(&leaf, e->work.e[i], 32);
        tg_err_t rc = tg_tlog_range_append(r, &leaf, collect_hash, e);
        if (rc != TG_OK) {
            return rc;
        }
    }
    tg_tlog_range_root(r, root);
    char body[TG_CHECKPOINT_BODY_MAX];
    size_t body_len = 0;
    tg_err_t rc = tg_checkpoint_format(body, sizeof body, &body_len, e->signer.pub.name,
                                       e->signer.pub.name_len, r->size, root->h);
    if (rc == TG_OK) {
        rc = tg_note_sign(note, TG_TLE_NOTE_MAX, note_len, body, body_len, &e->signer);
    }
    if (rc != TG_OK) {
        return rc;
    }
    pthread_mutex_lock(&e->mu);
    e->integrated = r->size;
    pthread_mutex_unlock(&e->mu);
    tg_tle_step_t step = {.old_size = e->range.size,
                          .new_size = r->size,
                          .entries = (const uint8_t(*)[32])e->work.e,
                          .tags = e->work.tags,
                          .hashes = e->hashes,
                          .n_hashes = e->n_hashes,
                          .root = *root,
                          .note = note,
                          .note_len = *note_len};
    rc = e->be.commit(e->be.ctx, &step);
    if (rc != TG_OK) {
        pthread_mutex_lock(&e->mu);
        e->integrated = e->range.size;
        pthread_mutex_unlock(&e->mu);
    }
    return rc;
}

/* Caller holds mu. Calls, mu released, every waiter that is covered (leaf < published
 * size), past its deadline (now), or any when `all`; the calls happen outside the lock in
 * chunks. Returns with mu held; sets *next to the earliest remaining deadline. */
static void fire_waiters(tg_tle_t *e, int64_t now, bool all, int64_t *next) {
    for (;;) {
        tle_waiter_t out[FIRE_CHUNK];
        tg_err_t st[FIRE_CHUNK];
        size_t k = 0;
        int64_t earliest = INT64_MAX;
        size_t i = 0;
        while (i < e->n_waiters) {
            tle_waiter_t *w = &e->waiters[i];
            bool covered = e->have_pub && w->leaf < e->pub_size;
            bool due = all || w->deadline_ns <= now;
            if (k < FIRE_CHUNK && (covered || due)) {
                out[k] = *w;
                st[k++] = covered ? TG_OK : TG_ERR_LOG_PENDING;
                e->waiters[i] = e->waiters[--e->n_waiters]; /* order does not matter */
                continue;
            }
            if (w->deadline_ns < earliest) {
                earliest = w->deadline_ns;
            }
            i++;
        }
        *next = earliest;
        if (k == 0) {
            return;
        }
        pthread_mutex_unlock(&e->mu);
        for (size_t j = 0; j < k; j++) {
            out[j].fn(out[j].ud, st[j], out[j].leaf);
        }
        pthread_mutex_lock(&e->mu);
        if (k < FIRE_CHUNK) {
            /* Everything due was taken in this pass; the deadline found stands unless a
             * waiter came meanwhile, which the caller's loop sees again. */
            *next = INT64_MAX;
            for (size_t j = 0; j < e->n_waiters; j++) {
                if (e->waiters[j].deadline_ns < *next) {
                    *next = e->waiters[j].deadline_ns;
                }
            }
            return;
        }
    }
}

/* Caller holds mu: sleeps until at_ns (INT64_MAX: until woken). */
static void sleep_until(tg_tle_t *e, int64_t at_ns) {
    e->wake_at = at_ns;
    if (at_ns == INT64_MAX) {
        pthread_cond_wait(&e->cv, &e->mu);
    } else {
        struct timespec ts;
        deadline_ts(&ts, at_ns);
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    e->wake_at = INT64_MIN; /* awake: nobody needs to signal */
}

/* Caller holds mu (released meanwhile): one step, everything pending integrated, signed,
 * committed and published; on failure nothing published and the work kept for a retry. */
static tg_err_t run_step(tg_tle_t *e) {
    char note[TG_TLE_NOTE_MAX];
    take_pending(e);
    int64_t newest = e->work_newest;
    pthread_mutex_unlock(&e->mu);
    tg_tlog_range_t r;
    tg_tlog_hash_t root;
    size_t note_len = 0;
    tg_err_t rc = make_step(e, &r, &root, note, &note_len);
    int64_t done = tg_clock_mono_ns();
    pthread_mutex_lock(&e->mu);
    e->last_cp = done;
    if (rc != TG_OK) {
        e->failures++;
        e->retry_at = ms_after(done, e->max_ms);
        return rc;
    }
    uint64_t added = r.size - e->range.size;
    e->range = r;
    e->work.n = 0;
    e->initial = false;
    e->retry_at = 0;
    publish_locked(e, r.size, root.h, note, note_len);
    e->checkpoints++;
    if (added > 0 && done > newest) {
        uint64_t us = (uint64_t)(done - newest) / 1000;
        e->lag_ms_last = us / 1000;
        e->lag_hist[tg_ledger_hist_bucket(tg_ledger_fsync_bounds_us, TG_LEDGER_FSYNC_BUCKETS - 1,
                                          us)]++;
        e->lag_sum_us += us;
    } else {
        e->lag_ms_last = 0;
    }
    return TG_OK;
}

/* Caller holds mu, run_step just succeeded: with a backend sync, the step's waiters are
 * answered before the sync (its latency stays off their path; tg_tle_backend_t says why
 * that is safe), then the sync runs with mu released. A failed sync is counted: the
 * checkpoint stays published (it agrees with the ledger whatever the disk keeps). */
static void after_step(tg_tle_t *e) {
    if (e->be.sync == NULL) {
        return;
    }
    int64_t ignored;
    fire_waiters(e, tg_clock_mono_ns(), false, &ignored);
    pthread_mutex_unlock(&e->mu);
    tg_err_t rc = e->be.sync(e->be.ctx);
    pthread_mutex_lock(&e->mu);
    if (rc != TG_OK) {
        e->failures++;
    }
}

static void *engine_main(void *arg) {
    tg_tle_t *e = arg;
    (void)prctl(PR_SET_NAME, "tg-tlog", 0, 0, 0); /* top -H, ps -L */
    pthread_mutex_lock(&e->mu);
    for (;;) {
        int64_t now = tg_clock_mono_ns();
        int64_t next_deadline;
        fire_waiters(e, now, false, &next_deadline);
        bool has_work = e->initial || e->work.n > 0 || e->pending.n > 0;
        if (!has_work) {
            if (e->stopping) {
                break;
            }
            sleep_until(e, next_deadline);
            continue;
        }
        int64_t due = e->last_cp + (int64_t)e->min_ms * 1000000;
        if (e->retry_at > due) {
            due = e->retry_at;
        }
        if (!e->stopping && now < due) {
            sleep_until(e, due < next_deadline ? due : next_deadline);
            continue;
        }
        bool final = e->stopping;
        tg_err_t rc = run_step(e);
        if (rc == TG_OK) {
            after_step(e);
        }
        /* At the close: one last attempt. What it could not commit is lost to the log, not
         * to the ledger: the next start integrates it from the replay. */
        if (final && (rc != TG_OK || e->pending.n == 0)) {
            break;
        }
    }
    int64_t ignored;
    fire_waiters(e, tg_clock_mono_ns(), true, &ignored);
    e->running = false;
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

tg_err_t tg_tle_start(tg_tle_t *e, tg_diag_t *diag) {
    if (e == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tlog engine: NULL");
    }
    pthread_mutex_lock(&e->mu);
    if (e->started) {
        pthread_mutex_unlock(&e->mu);
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tlog engine: already started");
    }
    e->started = e->running = true;
    e->last_cp = INT64_MIN / 2;
    /* A tree larger than what was published (or nothing published) gets its checkpoint at
     * once, here, so that the start returns with one (the size-0 one for a new log, the
     * replayed records' after a restart); a failure is retried by the thread. */
    e->initial = !e->have_pub || e->range.size > e->pub_size;
    if (e->initial && run_step(e) == TG_OK) {
        after_step(e); /* no waiters yet: the start returns with the checkpoint durable */
    }
    pthread_mutex_unlock(&e->mu);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        pthread_mutex_lock(&e->mu);
        e->started = e->running = false;
        pthread_mutex_unlock(&e->mu);
        return tg_diag_set(diag, TG_ERR_INTERNAL, "tlog engine: cannot start its thread");
    }
    return TG_OK;
}

/* ---- running ---- */

tg_err_t tg_tle_push(tg_tle_t *e, uint64_t first_leaf, const uint8_t (*entries)[32],
                     const uint64_t *tags, size_t n) {
    if (e == NULL || (entries == NULL && n > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return TG_OK;
    }
    int64_t now = tg_clock_mono_ns();
    pthread_mutex_lock(&e->mu);
    tg_err_t rc = TG_OK;
    if (first_leaf != e->next_leaf || n > UINT64_MAX - first_leaf) {
        rc = TG_ERR_INVALID_ARG;
    } else if (!vec_reserve(&e->pending, n)) {
        rc = TG_ERR_NOMEM;
    } else {
        bool was_empty = e->pending.n == 0;
        memcpy(e->pending.e + e->pending.n, entries, n * 32);
        if (tags != NULL) {
            memcpy(e->pending.tags + e->pending.n, tags, n * sizeof *tags);
        } else {
            memset(e->pending.tags + e->pending.n, 0, n * sizeof *tags);
        }
        e->pending.n += n;
        e->next_leaf += n;
        e->pending_newest = now;
        /* A thread that sleeps only until woken must learn of the work; one that has work
         * already wakes by its own timer (the minimum interval) and collects this too. */
        if (was_empty && e->wake_at != INT64_MIN) {
            pthread_cond_signal(&e->cv);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

tg_err_t tg_tle_published(tg_tle_t *e, tg_buf_t *note, tg_checkpoint_t *cp) {
    if (e == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    char copy[TG_TLE_NOTE_MAX];
    pthread_mutex_lock(&e->pub_mu);
    bool have = e->have_pub;
    size_t len = e->pub_note_len;
    uint64_t size = e->pub_size;
    uint8_t root[32];
    memcpy(root, e->pub_root, 32);
    memcpy(copy, e->pub_note, len);
    pthread_mutex_unlock(&e->pub_mu);
    if (!have) {
        return TG_ERR_LOG_PENDING;
    }
    if (cp != NULL) {
        memset(cp, 0, sizeof *cp);
        memcpy(cp->origin, e->signer.pub.name, e->signer.pub.name_len);
        cp->origin_len = e->signer.pub.name_len;
        cp->size = size;
        memcpy(cp->root, root, 32);
    }
    if (note != NULL) {
        return tg_buf_append(note, copy, len);
    }
    return TG_OK;
}

uint64_t tg_tle_published_size(tg_tle_t *e) {
    if (e == NULL) {
        return 0;
    }
    pthread_mutex_lock(&e->pub_mu);
    uint64_t n = e->have_pub ? e->pub_size : 0;
    pthread_mutex_unlock(&e->pub_mu);
    return n;
}

tg_err_t tg_tle_wait(tg_tle_t *e, uint64_t leaf, uint32_t timeout_ms, tg_tle_wait_fn fn, void *ud) {
    if (e == NULL || fn == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    int64_t now = tg_clock_mono_ns();
    pthread_mutex_lock(&e->mu);
    if (!e->running || e->stopping) {
        pthread_mutex_unlock(&e->mu);
        return TG_ERR_INVALID_ARG;
    }
    if (e->have_pub && leaf < e->pub_size) {
        pthread_mutex_unlock(&e->mu);
        fn(ud, TG_OK, leaf);
        return TG_OK;
    }
    if (timeout_ms == 0) {
        pthread_mutex_unlock(&e->mu);
        fn(ud, TG_ERR_LOG_PENDING, leaf);
        return TG_OK;
    }
    if (e->n_waiters >= e->max_waiters) {
        pthread_mutex_unlock(&e->mu);
        return TG_ERR_LIMIT;
    }
    if (e->n_waiters == e->cap_waiters) {
        size_t cap = e->cap_waiters ? e->cap_waiters * 2 : 64;
        if (cap > e->max_waiters) {
            cap = e->max_waiters;
        }
        tle_waiter_t *p = realloc(e->waiters, cap * sizeof *p);
        if (p == NULL) {
            pthread_mutex_unlock(&e->mu);
            return TG_ERR_NOMEM;
        }
        e->waiters = p;
        e->cap_waiters = cap;
    }
    int64_t deadline = ms_after(now, timeout_ms);
    e->waiters[e->n_waiters++] = (tle_waiter_t){leaf, deadline, fn, ud};
    if (deadline < e->wake_at) {
        pthread_cond_signal(&e->cv); /* sleeping past this deadline */
    }
    pthread_mutex_unlock(&e->mu);
    return TG_OK;
}

void tg_tle_stats(tg_tle_t *e, tg_tle_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (e == NULL) {
        return;
    }
    out->size = tg_tle_published_size(e);
    pthread_mutex_lock(&e->mu);
    out->integrated = e->integrated;
    out->pushed = e->next_leaf;
    out->checkpoints = e->checkpoints;
    out->lag_ms_last = e->lag_ms_last;
    memcpy(out->lag_hist, e->lag_hist, sizeof out->lag_hist);
    out->lag_sum_us = e->lag_sum_us;
    out->failures = e->failures;
    out->waiters = e->n_waiters;
    pthread_mutex_unlock(&e->mu);
}

void tg_tle_destroy(tg_tle_t *e) {
    if (e == NULL) {
        return;
    }
    pthread_mutex_lock(&e->mu);
    bool started = e->started;
    e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (started) {
        pthread_join(e->thread, NULL);
    }
    tg_note_signer_wipe(&e->signer);
    sodium_memzero(&e->signer, sizeof e->signer);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->pub_mu);
    vec_free(&e->pending);
    vec_free(&e->work);
    free(e->hashes);
    free(e->waiters);
    free(e);
}
