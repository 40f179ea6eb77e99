/* db_file.c — the file backend of db.h: the in-memory tables of store.h, rebuilt at
 * start from the ledger directory that keeps every record (ledger.h). */
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backend.h"
#include "../tlog_engine.h"
#include "approval_table.h"
#include "limit_table.h"
#include "tlog_file.h"
#include "trigguard/anchor.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/note.h"
#include "trigguard/snapshot.h"

typedef struct file_db {
    tg_db_t base; /* first: db.c reads base.ops */
    tg_store_t *keys;
    tg_receipts_t *receipts;
    tg_limit_table_t *limits;
    tg_approval_table_t *approvals;
    tg_ledger_t *ledger; /* NULL until start */
    tg_ledger_opts_t ledger_opts;
    /* The transparency log (db.h), NULL without a log key: the integrator, fed by the
     * ledger after each sync, and its files in <ledger dir>/tlog. */
    tg_tle_t *tle;
    tg_tlog_file_t *tf;
    atomic_bool feed_failed; /* a push was refused: the log stops growing (logged once) */
    /* Snapshots (snapshot.h): the options, what a private copy of the tables needs, and the
     * thread that keeps that copy and writes the files. */
    tg_db_opts_t opts; /* as opened (its pointers are the caller's, alive until close) */
    tg_db_snapshot_opts_t snap;
    int64_t snap_retention_ms; /* the tables' retention, the longer of the two */
    pthread_t snap_thread;
    bool snap_started;
    pthread_mutex_t snap_mu;
    pthread_cond_t snap_cv;
    bool snap_stop;        /* under snap_mu */
    atomic_bool snap_quit; /* the same, read while following the ledger: a close does not
                              wait for a long catch-up to finish */
} file_db_t;

/* db is always the base of a file_db_t: db.c only calls the ops of its own table. */
static file_db_t *fs_of(tg_db_t *db) { return (file_db_t *)db; }

/* The ledger's feed (writer thread, or a rotation's or the close's): records
 * [first_seq, first_seq + n) are durable; leaf = seq - 1, tag = seq. */
static void fs_feed(void *ud, uint64_t first_seq, const uint8_t (*entries)[32], size_t n) {
    file_db_t *fs = ud;
    uint64_t tags[256];
    for (size_t off = 0; off < n;) {
        size_t k = n - off < 256 ? n - off : 256;
        for (size_t i = 0; i < k; i++) {
            tags[i] = first_seq + off + i;
        }
        tg_err_t rc = tg_tle_push(fs->tle, first_seq + off - 1, entries + off, tags, k);
        if (rc != TG_OK) {
            /* Out of memory, or records out of order (a bug). The leaves must stay
             * contiguous, so nothing after this can join the log until a restart rebuilds it
             * from the ledger; records still commit. */
            if (!atomic_exchange(&fs->feed_failed, true)) {
                TG_LOG(TG_LOG_ERROR, "tlog_feed_failed",
                       "the transparency log could not take record %llu (%s); no checkpoint "
                       "covers it or any later record until a restart",
                       (unsigned long long)(first_seq + off), tg_err_name(rc));
            }
            return;
        }
        off += k;
    }
}

/* After the ledger opened (the replay restored the tree): the replay's hashes on disk, the
 * stored checkpoint reproduced by the tree (or the start refused), the integrator running. */
static tg_err_t fs_log_start(file_db_t *fs, const tg_ledger_recovery_t *rep, tg_diag_t *diag) {
    tg_err_t rc = tg_tlog_file_open(fs->tf, diag);
    if (rc != TG_OK) {
        return rc;
    }
    if (tg_tlog_file_flush(fs->tf) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot write the replayed log hashes",
                           fs->ledger_opts.dir, TG_TLF_DIR);
    }
    uint64_t size = tg_tle_size(fs->tle);
    if (size != rep->last_seq) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "the replay restored %llu of the ledger's %llu records into the "
                           "transparency log (the replay callback must call tg_db_log_restore "
                           "for each)",
                           (unsigned long long)size, (unsigned long long)rep->last_seq);
    }
    char note[TG_TLE_NOTE_MAX];
    size_t len = 0;
    bool found = false;
    rc = tg_tlog_file_load(fs->tf, note, sizeof note, &len, &found, diag);
    if (rc == TG_OK && found) {
        tg_diag_t why = {{0}};
        rc = tg_tle_adopt(fs->tle, note, len, &why);
        if (rc != TG_OK) {
            rc = tg_diag_set(diag, rc, "%s/%s/checkpoint: %s", fs->ledger_opts.dir, TG_TLF_DIR,
                             why.msg);
        }
    }
    if (rc == TG_OK) {
        rc = tg_tle_start(fs->tle, diag);
    }
    return rc;
}

/* Whether dir holds a ledger anchor (anchor.h): the ledger starts past seq 1. */
static bool anchored(const char *dir) {
    char path[4096];
    struct stat st;
    return snprintf(path, sizeof path, "%s/%s", dir, TG_ANCHOR_NAME) < (int)sizeof path &&
           lstat(path, &st) == 0;
}

/* ---- snapshots (snapshot.h) ---- */

/* Loading a snapshot into one db's tables: the restore functions a replay calls, with the
 * same now; entries that no longer fit are counted (the start is refused, as a replay's). */
typedef struct load_ctx {
    file_db_t *fs;
    int64_t now;
    uint64_t unfit;
    unsigned part, nparts; /* this loader restores the entries of shards part mod nparts */
    const tg_snap_t *snap;
    tg_err_t rc;
} load_ctx_t;

static tg_err_t unfit_ok(load_ctx_t *c, tg_err_t rc) {
    if (rc == TG_ERR_LIMIT) {
        c->unfit++;
        return TG_OK;
    }
    return rc;
}

static tg_err_t load_item(void *ud, const tg_store_item_t *it) {
    load_ctx_t *c = ud;
    unsigned part = it->kind == TG_STORE_ITEM_RECEIPT
                        ? tg_receipts_part(c->fs->receipts, it->tenant, it->tenant_len, it->key,
                                           it->key_len, c->nparts)
                        : tg_store_part(c->fs->keys, it->kind, it->tenant, it->tenant_len, it->key,
                                        it->key_len, c->nparts);
    if (part != c->part) {
        return TG_OK; /* the other loader's */
    }
    if (it->kind == TG_STORE_ITEM_KEY) {
        tg_idem_entry_t e = {.status = it->status, .pos = it->pos, .stored_at_ms = it->stamp_ms};
        memcpy(e.request_hash, it->request_hash, sizeof e.request_hash);
        return unfit_ok(c, tg_store_idem_restore(c->fs->keys, it->tenant, it->tenant_len, it->key,
                                                 it->key_len, &e, c->now));
    }
    if (it->kind == TG_STORE_ITEM_NONCE) {
        return unfit_ok(c, tg_store_nonce_restore(c->fs->keys, it->tenant, it->tenant_len, it->key,
                                                  it->key_len, it->stamp_ms, c->now));
    }
    tg_err_t rc = tg_receipts_insert(c->fs->receipts, it->tenant, it->tenant_len, it->key,
                                     it->key_len, &it->pos, it->stamp_ms, c->now, NULL);
    return unfit_ok(c, rc == TG_ERR_CONFLICT ? TG_OK : rc);
}

static tg_err_t load_limit(void *ud, const tg_db_limit_ref_t *ref, double total) {
    load_ctx_t *c = ud;
    if (c->part != 0) {
        return TG_OK;
    }
    return unfit_ok(c, tg_limit_table_restore(c->fs->limits, ref, total, c->now));
}

static tg_err_t load_approval(void *ud, const tg_approval_t *a) {
    load_ctx_t *c = ud;
    if (c->part != 0) {
        return TG_OK;
    }
    return unfit_ok(c, tg_approval_table_restore(c->fs->approvals, a));
}

static void *load_main(void *arg) {
    load_ctx_t *c = arg;
    tg_snap_sink_t sink = {load_item, load_limit, load_approval, c};
    c->rc = tg_snap_apply(c->snap, &sink);
    return NULL;
}

/* Loads s into into's tables with two threads, each restoring the entries of its own shards
 * (tg_store_part), so each shard gets its entries in file order (stamp order) and the tables
 * are built on both cores: the restores are memory-bound (a cache miss per bucket). */
static tg_err_t load_parallel(file_db_t *into, const tg_snap_t *s, int64_t now, uint64_t *unfit) {
    load_ctx_t c[2] = {{into, now, 0, 0, 2, s, TG_OK}, {into, now, 0, 1, 2, s, TG_OK}};
    pthread_t t;
    bool two = pthread_create(&t, NULL, load_main, &c[1]) == 0;
    if (!two) {
        c[0].nparts = 1; /* no second thread: this one restores everything */
    }
    load_main(&c[0]);
    if (two) {
        pthread_join(t, NULL);
    }
    *unfit = c[0].unfit + c[1].unfit;
    return c[0].rc != TG_OK ? c[0].rc : c[1].rc;
}

/* Finds the newest snapshot that passes every check and loads it into into's tables: TG_OK
 * with *at set (at->seq 0: none loaded, replay everything). Every snapshot passed over is
 * logged (snapshot_ignored, with why) when loud. An error is the start's: the tables are
 * then partly loaded, so the db may only be closed. */
static tg_err_t snap_load(file_db_t *fs, file_db_t *into, tg_ledger_resume_t *at, bool loud,
                          tg_diag_t *diag) {
    memset(at, 0, sizeof *at);
    const char *dir = fs->ledger_opts.dir;
    char names[8][TG_SNAP_NAME_MAX];
    size_t n = 0;
    if (tg_snap_list(dir, names, 8, &n) != TG_OK) {
        if (loud) {
            TG_LOG(TG_LOG_WARN, "snapshot_ignored", "%s: cannot list snapshots; full replay", dir);
        }
        return TG_OK;
    }
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        char why[TG_DIAG_MAX + 64] = "";
        tg_snap_t *s = NULL;
        tg_snap_info_t info;
        int64_t t0 = tg_clock_mono_ns();
        int64_t now = tg_clock_now_ms();
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            continue;
        }
        tg_err_t rc = tg_snap_read(&s, &info, path, why, sizeof why);
        if (rc == TG_ERR_NOMEM) {
            return tg_diag_set(diag, rc, "snapshot %s: out of memory", names[i]);
        }
        if (rc == TG_OK && info.created_ms > now) {
            rc = TG_ERR_INVALID_ARG;
            snprintf(why, sizeof why,
                     "written at %lld ms, later than now (%lld): the clock went "
                     "back",
                     (long long)info.created_ms, (long long)now);
        }
        if (rc == TG_OK && info.retention_ms < fs->snap_retention_ms) {
            /* it dropped entries a replay with today's retention would keep */
            rc = TG_ERR_INVALID_ARG;
            snprintf(why, sizeof why,
                     "written with a retention of %lld ms, shorter than now "
                     "(%lld ms)",
                     (long long)info.retention_ms, (long long)fs->snap_retention_ms);
        }
        if (rc == TG_OK) {
            tg_diag_t d = {{0}};
            rc = tg_ledger_check_resume(dir, &info.at, &d);
            if (rc) {
                snprintf(why, sizeof why, "its record seq %llu does not match the ledger: %s",
                         (unsigned long long)info.at.seq, d.msg);
            }
        }
        if (rc) {
            if (loud) {
                TG_LOG(TG_LOG_WARN, "snapshot_ignored", "%s: %s; %s", names[i], why,
                       i + 1 < n ? "trying an older one" : "full replay");
            }
            tg_snap_free(s);
            continue;
        }
        uint64_t unfit = 0;
        int64_t t_checked = tg_clock_mono_ns();
        rc = load_parallel(into, s, now, &unfit);
        tg_snap_free(s);
        if (rc == TG_OK && unfit > 0) {
            rc =
                tg_diag_set(diag, TG_ERR_CONFIG,
                            "snapshot %s: %llu entries do not fit the tables (--store-max-entries, "
                            "--store-max-bytes, --limit-entries, --approval-entries); start "
                            "refused, none dropped",
                            names[i], (unsigned long long)unfit);
        } else if (rc) {
            rc =
                tg_diag_set(diag, rc, "snapshot %s: cannot load it: %s", names[i], tg_strerror(rc));
        }
        if (rc) {
            return rc;
        }
        if (loud) {
            TG_LOG(TG_LOG_INFO, "snapshot_loaded",
                   "%s: state after seq %llu (%llu keys, %llu nonces, %llu receipts, %llu limit "
                   "totals, %llu approvals) in %lld ms (read and checked %lld ms, tables "
                   "filled %lld ms); replaying the records after it",
                   names[i], (unsigned long long)info.at.seq,
                   (unsigned long long)info.counts[TG_SNAP_KEYS],
                   (unsigned long long)info.counts[TG_SNAP_NONCES],
                   (unsigned long long)info.counts[TG_SNAP_RECEIPTS],
                   (unsigned long long)info.counts[TG_SNAP_LIMITS],
                   (unsigned long long)info.counts[TG_SNAP_APPROVALS],
                   (long long)((tg_clock_mono_ns() - t0) / 1000000),
                   (long long)((t_checked - t0) / 1000000),
                   (long long)((tg_clock_mono_ns() - t_checked) / 1000000));
        }
        *at = info.at;
        return TG_OK;
    }
    return TG_OK;
}

/* The snapshot thread's private tables: a file db that is never started. */
static tg_err_t snap_private(file_db_t *fs, tg_db_t **out) {
    tg_db_opts_t o = fs->opts;
    o.log = (tg_db_log_opts_t){0};
    o.snapshot = (tg_db_snapshot_opts_t){0};
    return tg_db_file_open(out, &o, NULL);
}

typedef struct follow_ctx {
    file_db_t *fs;
    tg_db_t *priv;
} follow_ctx_t;

static tg_err_t follow_rec(void *ud, const tg_ledger_record_t *rec) {
    follow_ctx_t *c = ud;
    if (atomic_load_explicit(&c->fs->snap_quit, memory_order_relaxed)) {
        return TG_ERR_INTERNAL; /* closing: stop reading (not a failure, not logged) */
    }
    return c->fs->snap.replay(c->fs->snap.ud, c->priv, rec);
}

typedef struct put_ctx {
    tg_snap_writer_t *w;
} put_ctx_t;

static tg_err_t put_item(void *ud, const tg_store_item_t *it) {
    return tg_snap_put_item(((put_ctx_t *)ud)->w, it);
}
static tg_err_t put_limit(void *ud, const tg_db_limit_ref_t *ref, double total) {
    return tg_snap_put_limit(((put_ctx_t *)ud)->w, ref, total);
}
static tg_err_t put_approval(void *ud, const tg_approval_t *a) {
    return tg_snap_put_approval(((put_ctx_t *)ud)->w, a);
}

/* Writes the private tables as the snapshot of the state after record at. */
static tg_err_t snap_write(file_db_t *fs, file_db_t *priv, const tg_ledger_resume_t *at, char *name,
                           size_t name_cap, uint64_t *entries, tg_diag_t *diag) {
    int64_t now = tg_clock_now_ms();
    (void)tg_store_sweep(priv->keys, now);
    (void)tg_receipts_sweep(priv->receipts, now);
    tg_snap_writer_t *w = NULL;
    tg_err_t rc = tg_snap_writer_open(&w, fs->ledger_opts.dir, diag);
    if (rc) {
        return rc;
    }
    put_ctx_t c = {w};
    rc = tg_store_each(priv->keys, now, put_item, &c);
    if (rc == TG_OK) {
        rc = tg_receipts_each(priv->receipts, now, put_item, &c);
    }
    if (rc == TG_OK) {
        rc = tg_limit_table_each(priv->limits, now, put_limit, &c);
    }
    if (rc == TG_OK) {
        rc = tg_approval_table_each(priv->approvals, put_approval, &c);
    }
    if (rc) {
        tg_snap_writer_abort(w);
        return tg_diag_set(diag, rc, "snapshot: cannot write an entry: %s", tg_strerror(rc));
    }
    tg_snap_info_t info = {.at = *at, .created_ms = now, .retention_ms = fs->snap_retention_ms};
    tg_store_stats_t a, b;
    tg_store_stats(priv->keys, &a);
    tg_receipts_stats(priv->receipts, &b);
    *entries = a.entries + b.entries;
    return tg_snap_writer_commit(w, &info, name, name_cap, diag);
}

/* Waits up to ms or until close; true when stopping. */
static bool snap_sleep(file_db_t *fs, uint32_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&fs->snap_mu);
    while (!fs->snap_stop) {
        if (pthread_cond_timedwait(&fs->snap_cv, &fs->snap_mu, &ts) != 0) {
            break;
        }
    }
    bool stop = fs->snap_stop;
    pthread_mutex_unlock(&fs->snap_mu);
    return stop;
}

#define SNAP_POLL_MS 1000

/* The snapshot thread: keeps a private copy of the tables equal to the state after the
 * durable record `at` (loaded from the newest valid snapshot, then following the ledger
 * with the start's own replay function) and writes it every snap.every durable records.
 * The live tables are never read or locked. A failure stops snapshots (logged); the daemon
 * goes on, and the next start replays more. */
static void *snap_main(void *arg) {
    file_db_t *fs = arg;
    tg_db_t *priv = NULL;
    tg_ledger_resume_t at;
    tg_diag_t d = {{0}};
    tg_err_t rc = snap_private(fs, &priv);
    if (rc == TG_OK) {
        rc = snap_load(fs, fs_of(priv), &at, false, &d);
    }
    while (rc == TG_OK && !snap_sleep(fs, SNAP_POLL_MS)) {
        uint64_t durable;
        uint8_t hash[TG_LEDGER_HASH_SIZE];
        tg_ledger_durable(fs->ledger, &durable, hash);
        if (durable < at.seq || durable - at.seq < fs->snap.every) {
            continue;
        }
        int64_t t0 = tg_clock_mono_ns();
        follow_ctx_t fc = {fs, priv};
        rc = tg_ledger_read_range(fs->ledger, &at, durable, follow_rec, &fc, &d);
        if (rc == TG_OK && sodium_memcmp(at.hash, hash, sizeof hash) != 0) {
            rc = tg_diag_set(&d, TG_ERR_LEDGER_CORRUPT,
                             "seq %llu read back with another hash than the writer's",
                             (unsigned long long)durable);
        }
        int64_t t1 = tg_clock_mono_ns();
        char name[TG_SNAP_NAME_MAX];
        uint64_t entries = 0;
        if (rc == TG_OK) {
            rc = snap_write(fs, fs_of(priv), &at, name, sizeof name, &entries, &d);
        }
        if (rc == TG_OK) {
            TG_LOG(TG_LOG_INFO, "snapshot_written",
                   "%s/%s: state after seq %llu, %llu table entries (read %lld ms, written "
                   "%lld ms)",
                   fs->ledger_opts.dir, name, (unsigned long long)at.seq,
                   (unsigned long long)entries, (long long)((t1 - t0) / 1000000),
                   (long long)((tg_clock_mono_ns() - t1) / 1000000));
        }
    }
    if (rc != TG_OK && !atomic_load(&fs->snap_quit)) {
        TG_LOG(TG_LOG_ERROR, "snapshot_failed",
               "%s: snapshots stopped until a restart: %s (the ledger and the decisions are not "
               "affected; the next start replays more of the ledger)",
               fs->ledger_opts.dir, d.msg[0] ? d.msg : tg_strerror(rc));
    }
    tg_db_close(priv);
    return NULL;
}

static void snap_stop(file_db_t *fs) {
    if (!fs->snap_started) {
        return;
    }
    atomic_store(&fs->snap_quit, true);
    pthread_mutex_lock(&fs->snap_mu);
    fs->snap_stop = true;
    pthread_cond_signal(&fs->snap_cv);
    pthread_mutex_unlock(&fs->snap_mu);
    pthread_join(fs->snap_thread, NULL);
    fs->snap_started = false;
}

static tg_err_t fs_start(tg_db_t *db, tg_db_replay_fn replay, void *ud,
                         tg_ledger_recovery_t *report, tg_diag_t *diag) {
    file_db_t *fs = fs_of(db);
    if (fs->ledger != NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: started twice");
    }
    tg_ledger_recovery_t local;
    tg_ledger_recovery_t *rep = report != NULL ? report : &local;
    if (fs->tle != NULL && anchored(fs->ledger_opts.dir)) {
        /* The log's tree is rebuilt from every record's leaf at each start (tlog/hashes-* are
         * never synced): without the archived records it cannot be, so refuse rather than
         * sign a tree that starts in the middle (docs/LEDGER.md "Archive and prune"). */
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "%s: the ledger was pruned (%s) and a transparency log needs every "
                           "record: start without the log key, or on the unpruned ledger",
                           fs->ledger_opts.dir, TG_ANCHOR_NAME);
    }
    bool snap_on = fs->snap.every > 0 && fs->snap.replay != NULL;
    if (snap_on && fs->tle != NULL) {
        /* The log's tree is rebuilt from every record's leaf at each start (above), so a
         * start from a snapshot could not rebuild it: full replay, no snapshots. */
        TG_LOG(TG_LOG_INFO, "snapshot_off",
               "%s: snapshots are not written or loaded while the transparency log is on "
               "(its tree is rebuilt from every record); full replay",
               fs->ledger_opts.dir);
        snap_on = false;
    }
    tg_ledger_resume_t at;
    memset(&at, 0, sizeof at);
    tg_err_t rc = TG_OK;
    if (snap_on) {
        rc = snap_load(fs, fs, &at, true, diag);
        if (rc) {
            return rc;
        }
    }
    tg_ledger_opts_t lo = fs->ledger_opts;
    lo.resume = at.seq > 0 ? &at : NULL;
    rc = tg_ledger_open(&fs->ledger, &lo, replay, ud, rep, diag);
    if (rc == TG_OK && fs->tle != NULL) {
        rc = fs_log_start(fs, rep, diag);
    }
    if (rc == TG_OK && snap_on) {
        fs->snap_started = pthread_create(&fs->snap_thread, NULL, snap_main, fs) == 0;
        if (!fs->snap_started) {
            TG_LOG(TG_LOG_ERROR, "snapshot_failed",
                   "%s: cannot start the snapshot thread; no snapshots until a restart",
                   fs->ledger_opts.dir);
        }
    }
    return rc;
}

static void fs_close(tg_db_t *db) {
    file_db_t *fs = fs_of(db);
    snap_stop(fs); /* it reads the ledger */
    /* The ledger first: its last done callbacks may still settle claims in the tables, and
     * its close syncs and feeds the last records; then the log signs its last checkpoint. */
    tg_ledger_close(fs->ledger);
    tg_tle_destroy(fs->tle);
    tg_tlog_file_free(fs->tf);
    tg_store_destroy(fs->keys);
    tg_receipts_destroy(fs->receipts);
    tg_limit_table_destroy(fs->limits);
    tg_approval_table_destroy(fs->approvals);
    pthread_cond_destroy(&fs->snap_cv);
    pthread_mutex_destroy(&fs->snap_mu);
    free(fs);
}

static tg_err_t fs_claim_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) {
    return tg_store_idem_begin(fs_of(db)->keys, tenant, tenant_len, key, key_len, request_hash,
                               now_ms, res);
}

static tg_err_t fs_claim_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                               const char *nonce, size_t nonce_len, int64_t now_ms) {
    return tg_store_nonce_use(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len, now_ms);
}

static tg_err_t fs_release_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len) {
    return tg_store_idem_abort(fs_of(db)->keys, tenant, tenant_len, key, key_len);
}

static tg_err_t fs_release_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len) {
    return tg_store_nonce_release(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len);
}

static bool fs_receipt_room(tg_db_t *db, size_t tenant_len, size_t id_len) {
    return tg_receipts_has_room(fs_of(db)->receipts, tenant_len, id_len);
}

static void fs_announce(tg_db_t *db) { tg_ledger_announce(fs_of(db)->ledger); }

static void fs_announce_end(tg_db_t *db) { tg_ledger_announce_end(fs_of(db)->ledger); }

/* meta carries the record's claims for the replay at start, so the typed copy in rec is not
 * needed here: the ledger stores type, meta and payload. */
static tg_err_t fs_append(tg_db_t *db, const tg_db_record_t *rec, tg_db_done_fn done, void *ud) {
    tg_ledger_in_t in = {rec->type,    rec->meta,        rec->meta_len,
                         rec->payload, rec->payload_len, rec->entry};
    return tg_ledger_append_in(fs_of(db)->ledger, &in, done, ud);
}

static tg_err_t fs_append_now(tg_db_t *db, const tg_db_record_t *rec, tg_ledger_pos_t *pos) {
    tg_ledger_in_t in = {rec->type,    rec->meta,        rec->meta_len,
                         rec->payload, rec->payload_len, rec->entry};
    return tg_ledger_append_now_in(fs_of(db)->ledger, &in, pos);
}

static tg_err_t fs_complete_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                                size_t key_len, int status, const tg_ledger_pos_t *pos,
                                int64_t now_ms) {
    return tg_store_idem_complete(fs_of(db)->keys, tenant, tenant_len, key, key_len, status, pos,
                                  now_ms);
}

static tg_err_t fs_index_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                                 int64_t now_ms, tg_ledger_pos_t *existing) {
    return tg_receipts_insert(fs_of(db)->receipts, tenant, tenant_len, id, id_len, pos, stamp_ms,
                              now_ms, existing);
}

static tg_err_t fs_find_receipt(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) {
    return tg_receipts_get(fs_of(db)->receipts, tenant, tenant_len, id, id_len, now_ms, pos);
}

static tg_err_t fs_read(tg_db_t *db, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                        tg_buf_t *meta_out) {
    return tg_ledger_read_at(fs_of(db)->ledger, pos, payload_out, meta_out, NULL);
}

static tg_err_t fs_restore_key(tg_db_t *db, const char *tenant, size_t tenant_len, const char *key,
                               size_t key_len, const tg_idem_entry_t *entry, int64_t now_ms) {
    return tg_store_idem_restore(fs_of(db)->keys, tenant, tenant_len, key, key_len, entry, now_ms);
}

static tg_err_t fs_restore_nonce(tg_db_t *db, const char *tenant, size_t tenant_len,
                                 const char *nonce, size_t nonce_len, int64_t used_at_ms,
                                 int64_t now_ms) {
    return tg_store_nonce_restore(fs_of(db)->keys, tenant, tenant_len, nonce, nonce_len, used_at_ms,
                                  now_ms);
}

static tg_err_t fs_limit_total(tg_db_t *db, const tg_db_limit_ref_t *ref, double *total) {
    return tg_limit_table_total(fs_of(db)->limits, ref, total);
}

static tg_err_t fs_limit_reserve(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                                 double max, double *total_after) {
    return tg_limit_table_reserve(fs_of(db)->limits, ref, amount, max, total_after);
}

static tg_err_t fs_limit_release(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount) {
    return tg_limit_table_release(fs_of(db)->limits, ref, amount);
}

static tg_err_t fs_limit_restore(tg_db_t *db, const tg_db_limit_ref_t *ref, double amount,
                                 int64_t now_ms) {
    return tg_limit_table_restore(fs_of(db)->limits, ref, amount, now_ms);
}

static tg_err_t fs_approval_get(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                size_t id_len, tg_approval_t *out) {
    return tg_approval_table_get(fs_of(db)->approvals, tenant, tenant_len, id, id_len, out);
}

static tg_err_t fs_approval_list(tg_db_t *db, const char *tenant, size_t tenant_len, bool all,
                                 int status, int64_t now_ms, tg_approval_t *out, size_t max,
                                 size_t *n) {
    return tg_approval_table_list(fs_of(db)->approvals, tenant, tenant_len, all, status, now_ms,
                                  out, max, n);
}

/* The hold is a flag in memory: one process owns the ledger, so there is no lease. */
static tg_err_t fs_approval_hold(tg_db_t *db, const char *tenant, size_t tenant_len, const char *id,
                                 size_t id_len, int64_t now_ms, tg_approval_t *cur) {
    (void)now_ms;
    return tg_approval_table_hold(fs_of(db)->approvals, tenant, tenant_len, id, id_len, cur);
}

static tg_err_t fs_approval_release(tg_db_t *db, const char *tenant, size_t tenant_len,
                                    const char *id, size_t id_len) {
    return tg_approval_table_release(fs_of(db)->approvals, tenant, tenant_len, id, id_len);
}

static tg_err_t fs_approval_commit(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    (void)now_ms;
    return tg_approval_table_commit(fs_of(db)->approvals, a);
}

static bool fs_approval_room(tg_db_t *db) { return tg_approval_table_room(fs_of(db)->approvals); }

static tg_err_t fs_approval_restore(tg_db_t *db, const tg_approval_t *a, int64_t now_ms) {
    (void)now_ms;
    return tg_approval_table_restore(fs_of(db)->approvals, a);
}

static tg_err_t fs_approval_due(tg_db_t *db, int64_t now_ms, tg_db_approval_ref_t *out, size_t max,
                                size_t *n) {
    return tg_approval_table_due(fs_of(db)->approvals, now_ms, out, max, n);
}

/* ---- the transparency log ---- */

static tg_err_t fs_log_restore(tg_db_t *db, uint64_t seq, const uint8_t entry[32]) {
    file_db_t *fs = fs_of(db);
    if (fs->tle == NULL) {
        return TG_OK;
    }
    if (seq == 0 || seq - 1 != tg_tle_size(fs->tle)) {
        return TG_ERR_INVALID_ARG;
    }
    /* The first replayed record opens the files (the ledger directory exists by now). */
    tg_err_t rc = tg_tlog_file_open(fs->tf, NULL);
    if (rc == TG_OK) {
        rc = tg_tlog_file_put_entry(fs->tf, seq - 1, entry);
    }
    if (rc == TG_OK) {
        rc = tg_tle_restore_leaf(fs->tle, entry, tg_tlog_file_store, fs->tf);
    }
    return rc;
}

static tg_err_t fs_log_checkpoint(tg_db_t *db, tg_buf_t *note, struct tg_checkpoint *cp) {
    file_db_t *fs = fs_of(db);
    return fs->tle == NULL ? TG_ERR_LOG_DISABLED : tg_tle_published(fs->tle, note, cp);
}

static tg_err_t fs_log_hashes(tg_db_t *db, unsigned level, uint64_t index, size_t n,
                              uint8_t (*out)[32]) {
    file_db_t *fs = fs_of(db);
    if (fs->tle == NULL) {
        return TG_ERR_LOG_DISABLED;
    }
    if (level > TG_TLOG_TILE_MAX_LEVEL) {
        return TG_ERR_INVALID_ARG;
    }
    /* Hash (level, i) is complete once (i + 1)·2^level leaves are in the tree. */
    uint64_t complete = tg_tle_published_size(fs->tle) >> level;
    if (index > complete || n > complete - index) {
        return TG_ERR_NOT_FOUND;
    }
    return tg_tlog_file_hashes(fs->tf, level, index, n, out);
}

static tg_err_t fs_log_entries(tg_db_t *db, uint64_t index, size_t n, uint8_t (*out)[32]) {
    file_db_t *fs = fs_of(db);
    if (fs->tle == NULL) {
        return TG_ERR_LOG_DISABLED;
    }
    uint64_t size = tg_tle_published_size(fs->tle);
    if (index > size || n > size - index) {
        return TG_ERR_NOT_FOUND;
    }
    return tg_tlog_file_entries(fs->tf, index, n, out);
}

static tg_err_t fs_log_leaf(tg_db_t *db, const tg_ledger_pos_t *pos, uint64_t *leaf) {
    file_db_t *fs = fs_of(db);
    if (fs->tle == NULL) {
        return TG_ERR_LOG_DISABLED;
    }
    if (pos->seq == 0) {
        return TG_ERR_INVALID_ARG;
    }
    if (pos->seq - 1 < tg_tle_published_size(fs->tle)) {
        *leaf = pos->seq - 1;
        return TG_OK;
    }
    tg_ledger_stats_t st;
    tg_ledger_stats(fs->ledger, &st);
    return pos->seq > st.head_seq ? TG_ERR_NOT_FOUND : TG_ERR_LOG_PENDING;
}

static tg_err_t fs_log_wait(tg_db_t *db, const tg_ledger_pos_t *pos, uint32_t timeout_ms,
                            tg_db_log_wait_fn fn, void *ud) {
    file_db_t *fs = fs_of(db);
    if (fs->tle == NULL) {
        return TG_ERR_LOG_DISABLED;
    }
    if (pos->seq == 0) {
        return TG_ERR_INVALID_ARG;
    }
    return tg_tle_wait(fs->tle, pos->seq - 1, timeout_ms, fn, ud);
}

static void fs_tick(tg_db_t *db, int64_t now_ms, uint32_t stall_ms) {
    file_db_t *fs = fs_of(db);
    (void)tg_store_sweep(fs->keys, now_ms);
    (void)tg_receipts_sweep(fs->receipts, now_ms);
    tg_limit_table_sweep(fs->limits, now_ms);
    tg_approval_table_sweep(fs->approvals, now_ms);
    if (fs->ledger != NULL) {
        /* An idle ledger notices a deleted or moved directory too (and keeps the evidence)
         * within a tick, not only at the next decision: /readyz tells the truth. */
        (void)tg_ledger_check_identity(fs->ledger);
        /* A disk that stops answering fails nothing by itself: declare the stall (new
         * records fail fast, /readyz 503); the caller then answers whoever waited. */
        (void)tg_ledger_watch(fs->ledger, stall_ms);
    }
}

static bool fs_health(tg_db_t *db, char *why, size_t why_len) {
    return tg_ledger_health(fs_of(db)->ledger, why, why_len);
}

static void fs_stats(tg_db_t *db, tg_db_stats_t *out) {
    tg_store_stats(fs_of(db)->keys, &out->keys);
    tg_receipts_stats(fs_of(db)->receipts, &out->receipts);
    tg_ledger_stats(fs_of(db)->ledger, &out->records);
    tg_limit_table_stats(fs_of(db)->limits, &out->limits);
    tg_approval_table_stats(fs_of(db)->approvals, &out->approvals);
    tg_tle_t *tle = fs_of(db)->tle;
    if (tle != NULL) {
        tg_tle_stats_t ls;
        tg_tle_stats(tle, &ls);
        out->log.enabled = true;
        out->log.size = ls.size;
        out->log.integrated = ls.integrated;
        out->log.checkpoints = ls.checkpoints;
        out->log.lag_ms_last = ls.lag_ms_last;
        memcpy(out->log.lag_hist, ls.lag_hist, sizeof out->log.lag_hist);
        out->log.lag_sum_us = ls.lag_sum_us;
        out->log.failures = ls.failures;
        out->log.waiters = ls.waiters;
        out->log.integrator = true;
    }
}

static const tg_db_ops_t file_ops = {
    .start = fs_start,
    .close = fs_close,
    .claim_key = fs_claim_key,
    .claim_nonce = fs_claim_nonce,
    .release_key = fs_release_key,
    .release_nonce = fs_release_nonce,
    .receipt_room = fs_receipt_room,
    .announce = fs_announce,
    .announce_end = fs_announce_end,
    .append = fs_append,
    .append_now = fs_append_now,
    .complete_key = fs_complete_key,
    .index_receipt = fs_index_receipt,
    .find_receipt = fs_find_receipt,
    .read = fs_read,
    .restore_key = fs_restore_key,
    .restore_nonce = fs_restore_nonce,
    .limit_total = fs_limit_total,
    .limit_reserve = fs_limit_reserve,
    .limit_release = fs_limit_release,
    .limit_restore = fs_limit_restore,
    .approval_get = fs_approval_get,
    .approval_list = fs_approval_list,
    .approval_hold = fs_approval_hold,
    .approval_release = fs_approval_release,
    .approval_commit = fs_approval_commit,
    .approval_room = fs_approval_room,
    .approval_restore = fs_approval_restore,
    .approval_due = fs_approval_due,
    .log_restore = fs_log_restore,
    .log_checkpoint = fs_log_checkpoint,
    .log_hashes = fs_log_hashes,
    .log_entries = fs_log_entries,
    .log_leaf = fs_log_leaf,
    .log_wait = fs_log_wait,
    .tick = fs_tick,
    .health = fs_health,
    .stats = fs_stats,
};

tg_err_t tg_db_file_open(tg_db_t **out, const tg_db_opts_t *opts, tg_diag_t *diag) {
    file_db_t *fs = calloc(1, sizeof *fs);
    if (fs == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    fs->base.ops = &file_ops;
    fs->base.unavailable = TG_ERR_LEDGER_UNHEALTHY;
    fs->ledger_opts = opts->ledger;
    fs->opts = *opts;
    fs->snap = opts->snapshot;
    fs->snap_retention_ms = opts->keys.retention_ms > opts->receipts.retention_ms
                                ? opts->keys.retention_ms
                                : opts->receipts.retention_ms;
    pthread_mutex_init(&fs->snap_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fs->snap_cv, &ca);
    pthread_condattr_destroy(&ca);
    tg_err_t rc = tg_store_create(&fs->keys, &opts->keys, diag);
    if (rc == TG_OK) {
        rc = tg_receipts_create(&fs->receipts, &opts->receipts, diag);
    }
    if (rc == TG_OK && tg_limit_table_create(&fs->limits, opts->limit_entries) != TG_OK) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    /* Terminal approvals are kept as long as the keys are (opts.keys retention_ms, 0 = its
     * default of 24 h, which the table applies). */
    if (rc == TG_OK && tg_approval_table_create(&fs->approvals, opts->approval_entries,
                                                opts->keys.retention_ms) != TG_OK) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "db: out of memory");
    }
    if (rc == TG_OK && opts->log.signer != NULL) {
        /* No I/O yet: the log's files live in the ledger directory, which the start opens. */
        tg_tle_opts_t lo = {opts->log.signer, opts->log.min_interval_ms, opts->log.max_interval_ms,
                            0};
        tg_tle_backend_t be = {
            .commit = tg_tlog_file_commit, .read = tg_tlog_file_read, .sync = tg_tlog_file_sync};
        rc = opts->ledger.dir == NULL
                 ? tg_diag_set(diag, TG_ERR_INVALID_ARG, "db: no ledger directory")
                 : tg_tlog_file_new(&fs->tf, opts->ledger.dir);
        if (rc == TG_OK) {
            be.ctx = fs->tf;
            rc = tg_tle_create(&fs->tle, &lo, &be, diag);
        }
        if (rc == TG_OK) {
            /* None mode syncs for the log at most every checkpoint interval (db.h). */
            fs->ledger_opts.feed = fs_feed;
            fs->ledger_opts.feed_ud = fs;
            fs->ledger_opts.sync_interval_ms =
                opts->log.max_interval_ms ? opts->log.max_interval_ms : 100;
        } else if (rc == TG_ERR_NOMEM) {
            rc = tg_diag_set(diag, rc, "db: out of memory");
        }
    }
    if (rc != TG_OK) {
        fs_close(&fs->base);
        return rc;
    }
    *out = &fs->base;
    return TG_OK;
}
