/* db_file.c — the file backend of db.h: the in-memory tables of store.h, rebuilt at
 * start from the ledger directory that keeps every record (ledger.h). */
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
#include "trigguard/log.h"
#include "trigguard/note.h"

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
    tg_err_t rc = tg_ledger_open(&fs->ledger, &fs->ledger_opts, replay, ud, rep, diag);
    if (rc == TG_OK && fs->tle != NULL) {
        rc = fs_log_start(fs, rep, diag);
    }
    return rc;
}

static void fs_close(tg_db_t *db) {
    file_db_t *fs = fs_of(db);
    /* The ledger first: its last done callbacks may still settle claims in the tables, and
     * its close syncs and feeds the last records; then the log signs its last checkpoint. */
    tg_ledger_close(fs->ledger);
    tg_tle_destroy(fs->tle);
    tg_tlog_file_free(fs->tf);
    tg_store_destroy(fs->keys);
    tg_receipts_destroy(fs->receipts);
    tg_limit_table_destroy(fs->limits);
    tg_approval_table_destroy(fs->approvals);
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
