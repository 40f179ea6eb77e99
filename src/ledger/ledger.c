/* ledger.c — open/replay/recovery, the group-commit writer thread, reads and stats. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ledger_int.h"
#include "trigguard/anchor.h"
#include "trigguard/clock.h"
#include "trigguard/io.h"
#include "trigguard/log.h"
#include "trigguard/sha256.h"

#define HSZ TG_LEDGER_HASH_SIZE
#define DEFAULT_BATCH_INTERVAL_MS 10u
#define DEFAULT_SEGMENT_MAX ((uint64_t)64 * 1024 * 1024)
#define DEFAULT_MAX_BATCH 1024u
#define DEFAULT_QUEUE_MAX 16384u
#define DEFAULT_RETRY_MS 1000u
#define PROBE_SIZE 4096

const uint64_t tg_ledger_fsync_bounds_us[TG_LEDGER_FSYNC_BUCKETS - 1] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000};
const uint64_t tg_ledger_batch_bounds[TG_LEDGER_BATCH_BUCKETS - 1] = {1,  2,   4,   8,   16,  32,
                                                                      64, 128, 256, 512, 1024};

typedef struct entry {
    struct entry *next;
    tg_ledger_done_fn done;
    void *ud;
    tg_ledger_pos_t pos;
    tg_err_t status;
    uint32_t meta_len;
    uint32_t payload_len;
    uint8_t type;
    uint8_t body[HSZ]; /* tg_lg_body_digest, computed by the appending thread */
    uint8_t leaf[HSZ]; /* the record's log entry (tg_ledger_in_t.entry), with a feed only */
    /* Queued entries own a copy (data[]); an inline append (durability none) points at the
     * caller's buffers instead, which live until it returns, so it allocates nothing. */
    const uint8_t *meta;
    const uint8_t *payload;
    uint8_t data[]; /* meta then payload, for queued entries */
} entry_t;

struct tg_ledger {
    char *dir;
    int dirfd;
    int lockfd;
    tg_durability_t durability;
    uint32_t batch_interval_ms;
    uint64_t segment_max;
    uint32_t max_batch;
    uint32_t queue_max;
    uint32_t retry_ms;
    uint32_t commit_delay_us;
    bool no_create;         /* opts->no_create */
    tg_ledger_feed_fn feed; /* opts->feed (NULL: no log entries are computed or kept) */
    void *feed_ud;
    uint32_t flush_ms;     /* durability none: the background flush's period */
    atomic_uint announced; /* tg_ledger_announce minus tg_ledger_announce_end */

    /* Identity (ledger.h): the directory and lock file open() opened, fixed before any
     * thread starts; the active segment's inode is read from fd when it is checked. */
    dev_t dir_dev;
    ino_t dir_ino;
    dev_t lock_dev;
    ino_t lock_ino;
    atomic_bool identity_lost; /* sticky: once set, no recovery succeeds */

    /* queue and control, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;    /* writer waits for work */
    pthread_cond_t recover_cv; /* try_recover waits for the attempt */
    entry_t *qhead, *qtail;
    uint32_t qcount;
    bool delaying;       /* the writer holds a batch open (group-commit delay) */
    bool delay_full;     /* ... for the whole delay: announcements cannot end it early */
    uint32_t prev_batch; /* records in the writer's previous batch */
    bool closing;
    bool recover_req;
    uint64_t recover_gen;
    tg_err_t recover_rc;
    char recover_msg[TG_DIAG_MAX];
    pthread_t thread;
    bool thread_started;

    /* Health reporting (report_health) and the writer's timers: fail_msg under wmu, the rest
     * writer thread only. */
    char fail_msg[256];     /* what made the ledger unhealthy last, with the system's reason */
    uint64_t failures_seen; /* st_failures when the writer last reported */
    bool down_logged;       /* an unhealthy line was written and no recovered line yet */
    int64_t down_since_ns;  /* when that was */
    uint64_t attempts;      /* failed recovery attempts since then */
    int64_t attempt_log_ns; /* last line about them */
    int64_t retry_ns;       /* when the unhealthy writer next tries recovery on its own */
    int64_t flush_ns;       /* none mode: when the last background flush ended */

    /* Finished entries wait here for the completion thread, which runs their callbacks in
     * order while the writer is already writing and syncing the next batch: the callbacks
     * (resume a connection, store the idempotent entry, log) are then off the commit
     * cycle, so it is one fdatasync plus a hand-off. Lock order: mu, then cmu. */
    pthread_mutex_t cmu;
    pthread_cond_t cmu_cv;
    entry_t *chead, *ctail;
    bool cclosing;
    pthread_t cthread;
    bool cthread_started;

    /* File state below: owned by the writer thread, and held under wmu whenever it is
     * touched, because tg_ledger_append_now (durability none) writes from the caller's
     * thread. Lock order: mu may be held while taking wmu, never the reverse. */
    pthread_mutex_t wmu;
    bool wclosed;         /* set at close under wmu: no more inline appends */
    int fd;               /* active segment, O_WRONLY */
    uint32_t seg;         /* its number */
    uint64_t acked_end;   /* end of the last acknowledged record in the active segment */
    uint64_t synced_end;  /* covered by a successful fdatasync */
    uint64_t next_seq;    /* of the next record */
    uint8_t head[HSZ];    /* record_hash of the last acknowledged record */
    bool dir_unsynced;    /* a new segment's directory entry still needs an fsync */
    int64_t last_sync_ns; /* monotonic time of the last fdatasync */
    uint8_t *batch;       /* encode buffer */
    size_t batch_cap;
    entry_t **ents;       /* entries of the batch being written */
    tg_lg_head_t durable; /* the last record an fdatasync covered (seq 0: none yet) */
    /* With a feed: the log entries of acknowledged records that no fdatasync has covered
     * yet, fp[i] for seq fp_first + i; feed_durable hands them on once one has. */
    uint8_t (*fp)[HSZ];
    size_t fp_n, fp_cap;
    uint64_t fp_first;
    int64_t id_full_ns; /* none mode: when the whole identity was last checked */
    char id_why[224];   /* what broke the identity (at most 200 bytes of it) */
    bool evid_done;     /* keep_evidence finished (or found the path taken) */
    int evid_dirfd;     /* the directory at the path, and the lock taken there, held */
    int evid_lockfd;    /* until close so that no second process locks it */
    char evid_msg[384]; /* what keep_evidence did, for the log */

    /* open only: where the scan starts (opts->resume, copied), NULL for a full scan */
    const tg_ledger_resume_t *resume;
    tg_ledger_resume_t resume_copy;

    /* ledger.head (checkpoint): the writer thread's, and open's and close's around it. */
    int headfd;
    uint64_t head_gen; /* generation of the slot written last */
    uint64_t head_seq; /* the durable.seq that slot recorded */
    int64_t head_ns;   /* monotonic time of the last attempt */
    bool head_warned;  /* a failed write was logged and none has succeeded since */

    /* Stall watch (tg_ledger_watch). When the file work in progress began, monotonic ns, 0
     * when none: io_writer_ns for the writer thread, io_inline_ns for an inline append
     * (durability none, under wmu). `stalled` is set by the watch when either is older than
     * its bound and cleared when that work returns. */
    _Atomic int64_t io_writer_ns;
    _Atomic int64_t io_inline_ns;
    atomic_bool stalled;
    _Atomic int64_t stalled_since_ns;
    _Atomic uint32_t stall_ms; /* the watch's bound, 0 until it first runs */

    /* published for other threads */
    atomic_bool healthy;
    pthread_mutex_t stat_mu; /* head_seq, head_hash, segment, segment_bytes, reason */
    char pub_reason[256];    /* fail_msg, for tg_ledger_health (never behind a file lock) */
    uint64_t pub_head_seq;
    uint8_t pub_head[HSZ];
    uint32_t pub_seg;
    uint64_t pub_seg_bytes;
    _Atomic uint64_t st_records, st_bytes, st_batches, st_last_batch, st_max_batch;
    _Atomic uint64_t st_fsyncs, st_fsync_sum_us, st_failures, st_rejected, st_stalls;
    _Atomic uint64_t st_identity_lost;
    _Atomic uint64_t st_fsync_hist[TG_LEDGER_FSYNC_BUCKETS];
    _Atomic uint64_t st_batch_hist[TG_LEDGER_BATCH_BUCKETS];
};

static void abs_deadline(struct timespec *ts, int64_t at_ns) {
    ts->tv_sec = (time_t)(at_ns / 1000000000);
    ts->tv_nsec = (long)(at_ns % 1000000000);
}

/* Brackets file work (writes, syncs, rotation, ledger.head, recovery) for the stall watch.
 * The end also ends a stall the watch declared: the disk answered again. */
static void io_begin(_Atomic int64_t *slot) { atomic_store(slot, tg_clock_mono_ns()); }

static void io_end(tg_ledger_t *l, _Atomic int64_t *slot) {
    atomic_store(slot, 0);
    if (atomic_load(&l->stalled) && atomic_load(&l->io_writer_ns) == 0 &&
        atomic_load(&l->io_inline_ns) == 0 && atomic_exchange(&l->stalled, false)) {
        TG_LOG(TG_LOG_WARN, "ledger_stall_ended",
               "%s: the stalled write or sync returned after %.1f s; records accepted again",
               l->dir, (double)(tg_clock_mono_ns() - atomic_load(&l->stalled_since_ns)) / 1e9);
    }
}

size_t tg_ledger_hist_bucket(const uint64_t *bounds, size_t nb, uint64_t v) {
    size_t i = 0;
    while (i < nb && v > bounds[i]) {
        i++;
    }
    return i;
}

static void publish_head(tg_ledger_t *l) {
    pthread_mutex_lock(&l->stat_mu);
    l->pub_head_seq = l->next_seq - 1;
    memcpy(l->pub_head, l->head, HSZ);
    l->pub_seg = l->seg;
    l->pub_seg_bytes = l->acked_end;
    pthread_mutex_unlock(&l->stat_mu);
}

/* One fdatasync, timed into the histogram. */
/* fdatasync with its latency in the stats; touches only atomics, so it may run without wmu. */
static int timed_fdatasync(tg_ledger_t *l, int fd) {
    int64_t t0 = tg_clock_mono_ns();
    int r = fdatasync(fd);
    if (r != 0) {
        return -1;
    }
    uint64_t us = (uint64_t)(tg_clock_mono_ns() - t0) / 1000;
    atomic_fetch_add_explicit(&l->st_fsyncs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->st_fsync_sum_us, us, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->st_fsync_hist[tg_ledger_hist_bucket(
                                  tg_ledger_fsync_bounds_us, TG_LEDGER_FSYNC_BUCKETS - 1, us)],
                              1, memory_order_relaxed);
    return 0;
}

/* Caller holds wmu. */
static int do_fdatasync(tg_ledger_t *l, int fd) {
    if (timed_fdatasync(l, fd) != 0) {
        return -1;
    }
    l->last_sync_ns = tg_clock_mono_ns();
    return 0;
}

/* Caller holds wmu (so feeds never overlap and keep sequence order), durable just
 * advanced: the records it now covers go to the feed, each exactly once. */
static void feed_durable(tg_ledger_t *l) {
    if (l->feed == NULL || l->fp_n == 0 || l->durable.seq < l->fp_first) {
        return;
    }
    uint64_t covered = l->durable.seq - l->fp_first + 1;
    size_t k = covered < l->fp_n ? (size_t)covered : l->fp_n;
    l->feed(l->feed_ud, l->fp_first, (const uint8_t(*)[HSZ])l->fp, k);
    memmove(l->fp, l->fp + k, (l->fp_n - k) * sizeof *l->fp);
    l->fp_n -= k;
    l->fp_first += k;
}

/* Caller holds wmu: room for n more feed entries, taken before a batch is written so that
 * keeping an acknowledged record's entry can never fail. */
static bool fp_reserve(tg_ledger_t *l, size_t n) {
    if (l->feed == NULL || n <= l->fp_cap - l->fp_n) {
        return true;
    }
    size_t cap = l->fp_cap ? l->fp_cap : 1024;
    while (cap < l->fp_n + n) {
        cap *= 2;
    }
    uint8_t(*p)[HSZ] = realloc(l->fp, cap * sizeof *p);
    if (p == NULL) {
        return false;
    }
    l->fp = p;
    l->fp_cap = cap;
    return true;
}

/* Caller holds wmu, right after an fdatasync that covered every acknowledged record. */
static void note_synced(tg_ledger_t *l) {
    l->synced_end = l->acked_end;
    l->durable.seq = l->next_seq - 1;
    memcpy(l->durable.hash, l->head, HSZ);
    feed_durable(l);
}

/* Durability none: every NONE_FLUSH_MS the writer thread (otherwise idle in this mode)
 * fdatasyncs the active segment through a dup of its descriptor, without holding wmu, so
 * requests keep appending meanwhile. A rotation's fdatasync, which does hold wmu, then has
 * at most that long of data to flush: with 256 MiB segments it had the whole segment and
 * stalled every request for ~200 ms per rotation. It also bounds what a power loss takes
 * in this mode to about NONE_FLUSH_MS (a fact, not a promise: none promises nothing). */
#define NONE_FLUSH_MS 100
static void background_flush(tg_ledger_t *l) {
    pthread_mutex_lock(&l->wmu);
    if (l->wclosed || !atomic_load(&l->healthy) || l->synced_end == l->acked_end) {
        pthread_mutex_unlock(&l->wmu);
        return;
    }
    int fd = dup(l->fd);
    uint32_t seg = l->seg;
    uint64_t end = l->acked_end;
    tg_lg_head_t covered = {.seq = l->next_seq - 1};
    memcpy(covered.hash, l->head, HSZ);
    pthread_mutex_unlock(&l->wmu);
    if (fd < 0) {
        return;
    }
    int r = timed_fdatasync(l, fd);
    close(fd);
    if (r != 0) {
        return; /* advisory; the rotation or close fdatasync reports a failing disk */
    }
    pthread_mutex_lock(&l->wmu);
    if (l->seg == seg && end > l->synced_end && end <= l->acked_end) {
        l->synced_end = end;
        l->durable = covered;
        feed_durable(l); /* the records written before this sync began, not those after */
    }
    pthread_mutex_unlock(&l->wmu);
}

/* ledger.head. At most every HEAD_INTERVAL_MS, and at open and close, the writer records
 * the last durable record (seq, segment, end, record_hash) in the next of the file's two
 * slots and syncs it. A start that finds the ledger no longer reaching that record is
 * looking at data lost after it was on disk (a truncation, a zeroed block), which no torn
 * write explains, so it refuses instead of cutting the loss away as a torn tail
 * (docs/LEDGER.md). The interval keeps the cost at one small write and sync a second;
 * records acknowledged since the last one are covered by the torn-tail rules only. A
 * failed write is logged once and retried; appends go on, their records are durable. */
#define HEAD_INTERVAL_MS 1000
static int checkpoint(tg_ledger_t *l, bool force) {
    if (l->headfd < 0) {
        return 0;
    }
    int64_t now = tg_clock_mono_ns();
    if (!force && now - l->head_ns < (int64_t)HEAD_INTERVAL_MS * 1000000) {
        return 0;
    }
    pthread_mutex_lock(&l->wmu);
    tg_lg_head_t h = l->durable;
    pthread_mutex_unlock(&l->wmu);
    if (h.seq == l->head_seq && l->head_gen > 0) {
        return 0; /* nothing new since the last slot */
    }
    l->head_ns = now; /* a failed attempt waits the interval too */
    h.gen = l->head_gen + 1;
    h.at_ms = tg_clock_now_ms();
    uint8_t slot[TG_LG_HEAD_SLOT];
    tg_lg_head_encode(slot, &h);
    if (tg_pwrite_all(l->headfd, slot, sizeof slot, (h.gen % 2) * TG_LG_HEAD_SLOT) != 0 ||
        fdatasync(l->headfd) != 0) {
        int err = errno;
        if (!l->head_warned) {
            l->head_warned = true;
            TG_LOG(TG_LOG_WARN, "ledger_head_failed",
                   "%s/%s: cannot record the durable head: %s. Appends go on; a loss of "
                   "durable records would not be detected at the next start until this "
                   "succeeds (retried every %d ms)",
                   l->dir, TG_LG_HEAD_NAME, strerror(err), HEAD_INTERVAL_MS);
        }
        errno = err;
        return -1;
    }
    l->head_gen = h.gen;
    l->head_seq = h.seq;
    l->head_warned = false;
    return 0;
}

/* Caller holds mu (lock order: mu, then wmu). True when durable records are not yet in
 * ledger.head. */
static bool head_pending(tg_ledger_t *l) {
    pthread_mutex_lock(&l->wmu);
    bool pending = l->headfd >= 0 && l->durable.seq != l->head_seq;
    pthread_mutex_unlock(&l->wmu);
    return pending;
}

/* Caller holds wmu. Why the ledger is unhealthy, for the log and for tg_ledger_health; set
 * before `healthy` turns false, so /readyz never shows a stale reason. */
static void set_reason(tg_ledger_t *l, const char *why) {
    snprintf(l->fail_msg, sizeof l->fail_msg, "%s", why);
    pthread_mutex_lock(&l->stat_mu);
    snprintf(l->pub_reason, sizeof l->pub_reason, "%s", why);
    pthread_mutex_unlock(&l->stat_mu);
}

/* Caller holds wmu. `why` says what failed and the system's reason, for the log. Counted
 * once per outage: a broken identity found by a batch and again by its failure path is one
 * failure. */
static void mark_unhealthy(tg_ledger_t *l, const char *why) {
    set_reason(l, why);
    if (atomic_exchange(&l->healthy, false)) {
        atomic_fetch_add_explicit(&l->st_failures, 1, memory_order_relaxed);
    }
}

/* errno is the failed fdatasync's; `when` qualifies it ("" or " at close"). */
static void sync_failure(char *why, size_t n, uint32_t seg, const char *when) {
    snprintf(why, n, "fdatasync of segment %u%s: %s", seg, when, strerror(errno));
}

/* Caller holds wmu, right after a failed fdatasync of the active segment. */
static void mark_sync_failed(tg_ledger_t *l, const char *when) {
    char why[sizeof l->fail_msg];
    sync_failure(why, sizeof why, l->seg, when);
    mark_unhealthy(l, why);
}

/* How often a recovery that keeps failing is logged again (the first failure always is). */
#define STILL_DOWN_LOG_NS ((int64_t)60 * 1000000000)

/* Writer thread, no lock held. An operator must learn from the log, not only from /readyz
 * and the metrics, that the ledger refuses records and why: one error line when it becomes
 * unhealthy (with the cause), a line a minute at most while recovery keeps failing, and one
 * when it accepts records again. `attempt` is the message of a recovery attempt that just
 * ran ("" when it succeeded), or NULL. Costs one atomic load when nothing changed. */
static void report_health(tg_ledger_t *l, const char *attempt) {
    uint64_t failures = atomic_load_explicit(&l->st_failures, memory_order_relaxed);
    if (atomic_load(&l->identity_lost)) {
        /* Logged where it was found (ledger_identity_lost, with what changed and the
         * evidence kept): not again as a write failure. It lasts until a restart. */
        l->failures_seen = failures;
        if (!l->down_logged) {
            l->down_logged = true;
            l->down_since_ns = l->attempt_log_ns = tg_clock_mono_ns();
            l->attempts = 0;
        }
    }
    if (failures != l->failures_seen && !l->down_logged) {
        char why[sizeof l->fail_msg];
        pthread_mutex_lock(&l->wmu);
        memcpy(why, l->fail_msg, sizeof why);
        pthread_mutex_unlock(&l->wmu);
        char retry[48] = "only on request (no automatic retry)";
        if (l->retry_ms != TG_LEDGER_RETRY_NEVER) {
            snprintf(retry, sizeof retry, "retried every %u ms", l->retry_ms);
        }
        TG_LOG(TG_LOG_ERROR, "ledger_unhealthy",
               "%s: %s. Records are refused (503 ledger_unavailable, /readyz 503) until "
               "recovery succeeds, %s",
               l->dir, why, retry);
        l->down_logged = true;
        l->down_since_ns = l->attempt_log_ns = tg_clock_mono_ns();
        l->attempts = 0;
    }
    l->failures_seen = failures;
    if (!l->down_logged) {
        return;
    }
    int64_t now = tg_clock_mono_ns();
    if (atomic_load(&l->healthy)) {
        TG_LOG(TG_LOG_WARN, "ledger_recovered",
               "%s: records accepted again after %.1f s unhealthy (%llu failed recovery "
               "attempts)",
               l->dir, (double)(now - l->down_since_ns) / 1e9, (unsigned long long)l->attempts);
        l->down_logged = false;
        return;
    }
    if (attempt != NULL && attempt[0] != '\0') {
        l->attempts++;
        if (now - l->attempt_log_ns >= STILL_DOWN_LOG_NS) {
            TG_LOG(TG_LOG_ERROR, "ledger_still_unhealthy",
                   "%s: recovery attempt failed: %s (%llu attempts in %.0f s)", l->dir, attempt,
                   (unsigned long long)l->attempts, (double)(now - l->down_since_ns) / 1e9);
            l->attempt_log_ns = now;
        }
    }
}

static int open_segment(tg_ledger_t *l, uint32_t seg, int flags) {
    char name[TG_LG_NAME_MAX];
    tg_lg_seg_name(name, seg);
    /* O_NOFOLLOW: a segment is this directory's own file, never a link to one elsewhere.
     * O_NONBLOCK: a FIFO planted as a segment must fail the S_ISREG check at once rather
     * than hang the start; regular files ignore the flag. */
    return openat(l->dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
}

/* ---- identity: the directory, lock and segment must stay the files open() opened ---- */

static int sync_parent(const char *dir);

/* The whole check (ledger.h, "Identity"); caller holds wmu. Four stat calls. Each name is
 * compared with the inode the ledger holds open: an open file's inode cannot be freed, so
 * no other file can come back under its number, and a name that still resolves to it is
 * still linked there. `why` gets what changed, without the directory's path (it ends up
 * in /readyz; the log line adds the path). */
static bool identity_full(tg_ledger_t *l, char *why, size_t n) {
    struct stat st;
    if (stat(l->dir, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            snprintf(why, n, "the ledger directory is gone from its path (deleted or moved away)");
        } else {
            snprintf(why, n, "the ledger directory's path cannot be checked: %s", strerror(errno));
        }
        return false;
    }
    if (!S_ISDIR(st.st_mode) || st.st_dev != l->dir_dev || st.st_ino != l->dir_ino) {
        snprintf(why, n, "the ledger directory's path now names another %s (it was replaced)",
                 S_ISDIR(st.st_mode) ? "directory" : "file");
        return false;
    }
    if (fstatat(l->dirfd, TG_LG_LOCK_NAME, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(why, n, "%s was removed (%s): another process could lock the directory",
                 TG_LG_LOCK_NAME, strerror(errno));
        return false;
    }
    if (st.st_dev != l->lock_dev || st.st_ino != l->lock_ino) {
        snprintf(why, n, "%s was replaced by another file: another process could lock it",
                 TG_LG_LOCK_NAME);
        return false;
    }
    char name[TG_LG_NAME_MAX];
    tg_lg_seg_name(name, l->seg);
    struct stat seg;
    if (fstat(l->fd, &seg) != 0 || seg.st_nlink == 0) {
        snprintf(why, n, "segment %s was deleted", name);
        return false;
    }
    if (fstatat(l->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(why, n, "segment %s lost its name (%s): renamed or deleted", name,
                 strerror(errno));
        return false;
    }
    if (st.st_dev != seg.st_dev || st.st_ino != seg.st_ino) {
        snprintf(why, n, "segment %s was replaced by another file", name);
        return false;
    }
    return true;
}

/* Writes a fresh ledger.head (both slots, so one torn sector leaves the other) recording
 * h into directory dfd. -1 with errno when the file exists already or cannot be written. */
static int write_new_head(int dfd, const tg_lg_head_t *h) {
    int fd =
        openat(dfd, TG_LG_HEAD_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return -1;
    }
    uint8_t buf[TG_LG_HEAD_SIZE];
    tg_lg_head_t s = *h;
    s.at_ms = tg_clock_now_ms();
    for (uint64_t gen = 1; gen <= 2; gen++) {
        s.gen = gen;
        tg_lg_head_encode(buf + (gen % 2) * TG_LG_HEAD_SLOT, &s);
    }
    int r = tg_pwrite_all(fd, buf, sizeof buf, 0) == 0 && fdatasync(fd) == 0 ? 0 : -1;
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

/* After the identity broke (caller holds wmu; once, and recover() retries it until it has
 * run to the end): leave at the directory's path what makes a restart refuse instead of
 * starting an empty ledger there, and hold its lock so that no second process starts on
 * the path meanwhile. The directory is recreated (0700) when it is missing. ledger.head
 * gets the durable head unless the directory has one already: then it is this ledger's own
 * (only the lock or a segment changed; the writer keeps it current) or another ledger's,
 * and either way it is evidence to keep as it is. The lock is taken unless this ledger
 * still holds it; a directory whose lock another process holds is that process's, and is
 * left alone. */
static void keep_evidence(tg_ledger_t *l) {
    if (l->evid_done) {
        return;
    }
    char *msg = l->evid_msg;
    size_t mn = sizeof l->evid_msg;
    bool made = mkdir(l->dir, 0700) == 0;
    if (!made && errno != EEXIST) {
        snprintf(msg, mn, "the directory could not be recreated to keep the evidence: %s",
                 strerror(errno));
        return;
    }
    int dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(msg, mn, "the path could not be opened as a directory to keep the evidence: %s",
                 strerror(errno));
        return;
    }
    int lfd =
        openat(dfd, TG_LG_LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    struct stat st;
    if (lfd < 0 || fstat(lfd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(msg, mn, "%s there could not be created: %s", TG_LG_LOCK_NAME,
                 lfd < 0 ? strerror(errno) : "not a regular file");
        if (lfd >= 0) {
            close(lfd);
        }
        close(dfd);
        return;
    }
    const char *lock_note = "lock taken";
    if (st.st_dev == l->lock_dev && st.st_ino == l->lock_ino) {
        close(lfd); /* still ours, and still locked through lockfd */
        lfd = -1;
        lock_note = "lock still held";
    } else if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(msg, mn,
                 "another process holds the lock of the directory now at the path (%s); it "
                 "was left alone",
                 strerror(errno));
        close(lfd);
        close(dfd);
        l->evid_done = true;
        return;
    }
    char head_note[96];
    if (write_new_head(dfd, &l->durable) == 0) {
        snprintf(head_note, sizeof head_note, "%s written (seq %llu)", TG_LG_HEAD_NAME,
                 (unsigned long long)l->durable.seq);
    } else if (errno == EEXIST) {
        snprintf(head_note, sizeof head_note, "the %s there kept", TG_LG_HEAD_NAME);
    } else {
        /* A short ledger.head still refuses the start (as a damaged one), so it stays. */
        snprintf(head_note, sizeof head_note, "%s written only in part (%s)", TG_LG_HEAD_NAME,
                 strerror(errno));
    }
    const char *synced = "";
    if (fsync(dfd) != 0 || (made && sync_parent(l->dir) != 0)) {
        synced = " (the directory could not be synced: a power loss may undo this)";
    }
    l->evid_dirfd = dfd;
    l->evid_lockfd = lfd;
    l->evid_done = true;
    snprintf(msg, mn,
             "evidence kept: directory %s, %s, %s%s, so that a restart cannot start an "
             "empty ledger in its place",
             made ? "recreated (0700)" : "in place", head_note, lock_note, synced);
}

/* Caller holds wmu, on any thread. The identity broke (what): unhealthy until a restart,
 * the evidence kept, one log line. Later calls only refresh the reason. */
static void identity_broken(tg_ledger_t *l, const char *what) {
    if (atomic_exchange(&l->identity_lost, true)) {
        return;
    }
    snprintf(l->id_why, sizeof l->id_why, "%.200s", what);
    atomic_fetch_add_explicit(&l->st_identity_lost, 1, memory_order_relaxed);
    char why[sizeof l->fail_msg];
    snprintf(why, sizeof why, "%.200s; a restart is needed", what);
    mark_unhealthy(l, why); /* first: appends fail from here on, while the evidence is kept */
    keep_evidence(l);
    TG_LOG(TG_LOG_ERROR, "ledger_identity_lost",
           "%s: %s. Records are refused (503 ledger_unavailable, /readyz 503) until the daemon "
           "is restarted; %s",
           l->dir, what, l->evid_msg);
}

/* How often durability none, whose appends check only the segment's link count (one fstat),
 * checks the whole identity. */
#define IDENTITY_FULL_MS 100

/* Before a batch is acknowledged (caller holds wmu): true while the identity holds. In
 * fsync and batch mode the whole check (four stat calls, next to a write and usually an
 * fdatasync); in none mode, where the request thread writes and waits for nothing else,
 * fstat's link count of the segment, and the whole check at most every IDENTITY_FULL_MS or
 * when the link count is 0 (to say what changed). why gets the reason when false. */
static bool identity_ok(tg_ledger_t *l, char *why, size_t n) {
    if (!atomic_load(&l->identity_lost)) {
        int64_t now = 0;
        if (l->durability == TG_DURABILITY_NONE) {
            now = tg_clock_mono_ns();
            struct stat st;
            if (now - l->id_full_ns < (int64_t)IDENTITY_FULL_MS * 1000000 &&
                fstat(l->fd, &st) == 0 && st.st_nlink > 0) {
                return true;
            }
        }
        if (identity_full(l, why, n)) {
            l->id_full_ns = now;
            return true;
        }
        identity_broken(l, why);
    }
    snprintf(why, n, "%.200s; a restart is needed", l->id_why); /* the reason identity_broken set */
    return false;
}

/* Recovery's first probe (caller holds wmu): 4 KiB of zeros written and synced at the end
 * of the active segment and truncated away. It meets what failed: the segment itself,
 * where the next record goes. A small file elsewhere fits under a file-size limit or a
 * quota that the segment no longer does, and the ledger would turn healthy only to fail
 * again at the next record. Zeros, so that a crash before the truncation leaves a tail the
 * next start cuts as torn. msg gets the reason when it fails. */
static tg_err_t probe_segment(tg_ledger_t *l, char *msg, size_t msg_len) {
    uint8_t zeros[PROBE_SIZE];
    memset(zeros, 0, sizeof zeros);
    int perr = 0;
    if (tg_pwrite_all(l->fd, zeros, sizeof zeros, l->acked_end) != 0 || fdatasync(l->fd) != 0) {
        perr = errno;
    }
    if (ftruncate(l->fd, (off_t)l->acked_end) != 0 && perr == 0) {
        perr = errno;
    }
    if (perr != 0) {
        snprintf(msg, msg_len, "probe write at the end of segment %u failed: %s", l->seg,
                 strerror(perr));
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    return TG_OK;
}

/* The probe recovery and open share (caller holds wmu, or open before any thread): a 4 KiB
 * ledger.probe written, synced and removed; it proves the directory's disk takes new data
 * (a full disk fails it). msg gets the reason when it fails. */
static tg_err_t probe_file(tg_ledger_t *l, char *msg, size_t msg_len) {
    int pfd = openat(l->dirfd, TG_LG_PROBE_NAME, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (pfd < 0) {
        snprintf(msg, msg_len, "creating probe file failed: %s", strerror(errno));
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    uint8_t probe[PROBE_SIZE];
    memset(probe, 0xA5, sizeof probe);
    size_t done = 0;
    int ok = 1;
    while (done < sizeof probe) {
        ssize_t k = write(pfd, probe + done, sizeof probe - done);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            if (k == 0) {
                errno = EIO;
            }
            ok = 0;
            break;
        }
        done += (size_t)k;
    }
    int saved = errno;
    if (ok && fdatasync(pfd) != 0) {
        saved = errno;
        ok = 0;
    }
    close(pfd);
    unlinkat(l->dirfd, TG_LG_PROBE_NAME, 0);
    if (!ok) {
        snprintf(msg, msg_len, "probe write to the ledger directory failed: %s", strerror(saved));
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    return TG_OK;
}

/* Starts segment seg+1. On failure the old segment stays active (or, when only the
 * directory fsync failed, the new one is active with dir_unsynced set). */
static int rotate(tg_ledger_t *l) {
    int nfd = open_segment(l, l->seg + 1, O_WRONLY | O_CREAT | O_EXCL);
    if (nfd < 0) {
        return -1;
    }
    close(l->fd);
    l->fd = nfd;
    l->seg++;
    l->acked_end = 0;
    l->synced_end = 0;
    l->dir_unsynced = true;
    if (fsync(l->dirfd) != 0) {
        return -1;
    }
    l->dir_unsynced = false;
    return 0;
}

/* Recovery attempt (writer thread): the identity, the directory entry, truncation to the
 * acknowledged end, fdatasync, and the probe writes proving the disk takes data again. A
 * broken identity never recovers: the files the ledger would write are not the ledger's. */
static tg_err_t recover(tg_ledger_t *l, char *msg, size_t msg_len) {
    char why[sizeof l->fail_msg];
    if (!atomic_load(&l->identity_lost) && !identity_full(l, why, sizeof why)) {
        identity_broken(l, why); /* e.g. the directory went away and a rotation failed */
    }
    if (atomic_load(&l->identity_lost)) {
        keep_evidence(l); /* again, when it could not finish the first time */
        snprintf(msg, msg_len, "%.200s: a restart is needed", l->id_why);
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    if (l->dir_unsynced) {
        if (fsync(l->dirfd) != 0) {
            snprintf(msg, msg_len, "fsync of ledger directory failed: %s", strerror(errno));
            return TG_ERR_LEDGER_UNHEALTHY;
        }
        l->dir_unsynced = false;
    }
    if (ftruncate(l->fd, (off_t)l->acked_end) != 0) {
        snprintf(msg, msg_len, "truncating segment %u to %llu bytes failed: %s", l->seg,
                 (unsigned long long)l->acked_end, strerror(errno));
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    if (do_fdatasync(l, l->fd) != 0) {
        snprintf(msg, msg_len, "fdatasync of segment %u failed: %s", l->seg, strerror(errno));
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    note_synced(l);
    tg_err_t rc = probe_segment(l, msg, msg_len);
    if (rc == TG_OK) {
        rc = probe_file(l, msg, msg_len);
    }
    if (rc != TG_OK) {
        return rc;
    }
    atomic_store(&l->healthy, true);
    msg[0] = '\0';
    return TG_OK;
}

static bool grow_batch(tg_ledger_t *l, size_t need) {
    if (need <= l->batch_cap) {
        return true;
    }
    size_t cap = l->batch_cap ? l->batch_cap : 65536;
    while (cap < need) {
        cap *= 2;
    }
    uint8_t *p = realloc(l->batch, cap);
    if (p == NULL) {
        return false;
    }
    l->batch = p;
    l->batch_cap = cap;
    return true;
}

/* Writes entries ents[0..n) (already taken off the queue). Sets each entry's status and
 * position; acknowledged state advances only for entries that are durable per the mode. */
static void write_batch(tg_ledger_t *l, entry_t **ents, size_t n) {
    size_t first = 0; /* first entry not yet acknowledged */
    bool failed = false;
    char why[sizeof l->fail_msg] = "out of memory encoding records";
    if (!fp_reserve(l, n)) {
        snprintf(why, sizeof why, "out of memory keeping the records' log entries");
        failed = true;
    }
    while (first < n && !failed) {
        /* Encode as many entries as fit in the active segment (at least one). */
        uint64_t seq = l->next_seq;
        uint8_t prev[HSZ];
        memcpy(prev, l->head, HSZ);
        uint64_t off = l->acked_end;
        size_t blen = 0, i = first;
        bool rotate_after = false;
        for (; i < n; i++) {
            entry_t *e = ents[i];
            size_t rl = tg_lg_record_len(e->meta_len, e->payload_len);
            if (off + blen > 0 && off + blen + rl > l->segment_max) {
                rotate_after = true;
                break;
            }
            if (!grow_batch(l, blen + rl)) {
                break; /* out of memory: write what we have; the rest fails below */
            }
            uint8_t hash[HSZ];
            tg_lg_encode(l->batch + blen, hash, e->type, seq, prev, e->meta, e->meta_len,
                         e->payload, e->payload_len, e->body);
            e->pos.seq = seq;
            e->pos.offset = off + blen;
            e->pos.segment = l->seg;
            e->pos.length = (uint32_t)rl;
            memcpy(prev, hash, HSZ);
            seq++;
            blen += rl;
        }
        if (i == first && !rotate_after) {
            failed = true; /* not even one record could be encoded (no memory) */
            break;
        }
        if (i > first) {
            if (tg_pwrite_all(l->fd, l->batch, blen, off) != 0) {
                snprintf(why, sizeof why, "writing %zu bytes at offset %llu of segment %u: %s",
                         blen, (unsigned long long)off, l->seg, strerror(errno));
                failed = true;
                break;
            }
            bool sync_now = l->durability == TG_DURABILITY_FSYNC || rotate_after;
            if (sync_now && do_fdatasync(l, l->fd) != 0) {
                sync_failure(why, sizeof why, l->seg, "");
                failed = true;
                break;
            }
            /* After the write and sync, before anything is acknowledged: records written
             * into a file that lost its name (a deleted or moved directory) must fail, also
             * when the deletion raced this batch. */
            if (!identity_ok(l, why, sizeof why)) {
                failed = true;
                break;
            }
            /* Durable per the mode: acknowledge. */
            for (size_t k = first; k < i; k++) {
                if (l->feed != NULL) { /* room reserved above */
                    if (l->fp_n == 0) {
                        l->fp_first = ents[k]->pos.seq;
                    }
                    memcpy(l->fp[l->fp_n++], ents[k]->leaf, HSZ);
                }
                ents[k]->status = TG_OK;
                atomic_fetch_add_explicit(&l->st_records, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&l->st_bytes, ents[k]->pos.length, memory_order_relaxed);
            }
            l->acked_end = off + blen;
            l->next_seq = seq;
            memcpy(l->head, prev, HSZ);
            if (sync_now) {
                note_synced(l);
            }
            first = i;
        }
        if (rotate_after) {
            if (l->synced_end != l->acked_end && do_fdatasync(l, l->fd) != 0) {
                sync_failure(why, sizeof why, l->seg, " before rotation");
                failed = true;
                break;
            }
            note_synced(l);
            if (rotate(l) != 0) {
                snprintf(why, sizeof why, "starting segment %u: %s", l->seg + 1, strerror(errno));
                failed = true;
                break;
            }
        } else if (i < n) {
            failed = true; /* encode stopped for lack of memory */
        }
    }
    if (failed) {
        mark_unhealthy(l, why);
        /* Only in FSYNC mode may unacknowledged bytes sit between acked_end and the end of the
         * file; in the other modes acked_end is where the failed write started. Either way
         * nothing past acked_end was acknowledged. Best effort now; recovery retries it. */
        if (ftruncate(l->fd, (off_t)l->acked_end) != 0) {
            /* recover() repeats the truncation before the ledger is healthy again */
        }
        for (size_t k = first; k < n; k++) {
            ents[k]->status = TG_ERR_LEDGER_UNHEALTHY;
            memset(&ents[k]->pos, 0, sizeof ents[k]->pos);
        }
    }
    publish_head(l);
}

static void finish(entry_t *e) {
    e->done(e->ud, e->status, &e->pos);
    free(e);
}

/* Gives the linked entries head..tail (status and position set) to the completion thread. */
static void hand_off(tg_ledger_t *l, entry_t *head, entry_t *tail) {
    if (head == NULL) {
        return;
    }
    tail->next = NULL;
    pthread_mutex_lock(&l->cmu);
    if (l->ctail != NULL) {
        l->ctail->next = head;
    } else {
        l->chead = head;
    }
    l->ctail = tail;
    pthread_cond_signal(&l->cmu_cv);
    pthread_mutex_unlock(&l->cmu);
}

static void hand_off_batch(tg_ledger_t *l, entry_t **ents, size_t n) {
    for (size_t k = 0; k + 1 < n; k++) {
        ents[k]->next = ents[k + 1];
    }
    if (n > 0) {
        hand_off(l, ents[0], ents[n - 1]);
    }
}

static void *completer_main(void *arg) {
    tg_ledger_t *l = arg;
    (void)prctl(PR_SET_NAME, "tg-ledger-done", 0, 0, 0); /* top -H, ps -L */
    pthread_mutex_lock(&l->cmu);
    for (;;) {
        if (l->chead == NULL) {
            if (l->cclosing) {
                break;
            }
            pthread_cond_wait(&l->cmu_cv, &l->cmu);
            continue;
        }
        entry_t *list = l->chead;
        l->chead = l->ctail = NULL;
        pthread_mutex_unlock(&l->cmu);
        while (list != NULL) {
            entry_t *next = list->next;
            finish(list);
            list = next;
        }
        pthread_mutex_lock(&l->cmu);
    }
    pthread_mutex_unlock(&l->cmu);
    return NULL;
}

/* Fails every queued entry (their callbacks run on the completion thread); mu held. */
static void fail_queue_locked(tg_ledger_t *l) {
    entry_t *list = l->qhead, *tail = l->qtail;
    l->qhead = l->qtail = NULL;
    l->qcount = 0;
    for (entry_t *e = list; e != NULL; e = e->next) {
        e->status = TG_ERR_LEDGER_UNHEALTHY;
        memset(&e->pos, 0, sizeof e->pos);
    }
    hand_off(l, list, tail);
}

/* ---- the writer thread: writer_main's loop and the steps it takes ---- */

/* Caller holds mu. File work runs without it, so that appends, stats and the stall watch
 * never wait behind a disk, and inside the bracket the stall watch reads. */
static void file_work_begin(tg_ledger_t *l) {
    pthread_mutex_unlock(&l->mu);
    io_begin(&l->io_writer_ns);
}

/* Ends what file_work_begin started; mu is held again. */
static void file_work_end(tg_ledger_t *l) {
    io_end(l, &l->io_writer_ns);
    pthread_mutex_lock(&l->mu);
}

/* An unhealthy writer tries recovery on its own retry_ms after its last attempt or failure. */
static void schedule_retry(tg_ledger_t *l) {
    l->retry_ns = tg_clock_mono_ns() + (int64_t)l->retry_ms * 1000000;
}

/* Caller holds mu. Before due_ns, sleeps on work_cv until then (or until woken) and returns
 * true, so the loop looks at everything again; false once due_ns has come. */
static bool sleep_until(tg_ledger_t *l, int64_t due_ns) {
    if (tg_clock_mono_ns() >= due_ns) {
        return false;
    }
    struct timespec ts;
    abs_deadline(&ts, due_ns);
    pthread_cond_timedwait(&l->work_cv, &l->mu, &ts);
    return true;
}

/* Caller holds wmu. The fdatasync that makes every acknowledged record durable outside a
 * batch's own (batch mode's, the close's); a failure makes the ledger unhealthy. */
static bool sync_segment(tg_ledger_t *l, const char *when) {
    if (do_fdatasync(l, l->fd) != 0) {
        mark_sync_failed(l, when);
        return false;
    }
    note_synced(l);
    return true;
}

/* Caller holds mu. tg_ledger_try_recover waits for this: one recovery attempt unless the
 * ledger is healthy already, and its outcome published to the caller under mu. */
static void answer_recovery_request(tg_ledger_t *l) {
    l->recover_req = false;
    char msg[TG_DIAG_MAX] = "";
    file_work_begin(l);
    pthread_mutex_lock(&l->wmu);
    tg_err_t rc = atomic_load(&l->healthy) ? TG_OK : recover(l, msg, sizeof msg);
    pthread_mutex_unlock(&l->wmu);
    report_health(l, msg);
    file_work_end(l);
    l->recover_rc = rc;
    snprintf(l->recover_msg, sizeof l->recover_msg, "%s", msg);
    l->recover_gen++;
    pthread_cond_broadcast(&l->recover_cv);
}

/* Caller holds mu, the ledger unhealthy: a recovery attempt once retry_ms has passed, so a
 * disk that comes back is used again without an operator; with TG_LEDGER_RETRY_NEVER only
 * a request (try_recover) or the close wakes the writer. */
static void retry_on_schedule(tg_ledger_t *l) {
    if (l->retry_ms == TG_LEDGER_RETRY_NEVER) {
        pthread_cond_wait(&l->work_cv, &l->mu);
        return;
    }
    if (sleep_until(l, l->retry_ns)) {
        return;
    }
    char msg[TG_DIAG_MAX];
    file_work_begin(l);
    pthread_mutex_lock(&l->wmu);
    (void)recover(l, msg, sizeof msg);
    pthread_mutex_unlock(&l->wmu);
    report_health(l, msg);
    file_work_end(l);
    schedule_retry(l);
}

/* Caller holds mu. Group-commit delay: more records are on their way when request threads
 * have announced some, or when the last batch had several (concurrent clients), so hold
 * this fdatasync up to commit_delay_us instead of paying another one right after it. A lone
 * client (batches of one, nothing announced) never waits.
 * After a concurrent batch the writer starts that wait at once, even with nothing queued
 * yet, instead of sleeping until the first record wakes it and then sleeping again for the
 * delay: appends do not wake a delaying writer, so that is one context switch less per
 * batch, and no record waits longer than it would have. A wait that gathers nothing ends
 * the streak: the next record wakes the writer. */
static bool commit_delay_applies(tg_ledger_t *l) {
    bool concurrent = l->prev_batch >= 2;
    bool nap = l->qhead == NULL && concurrent;
    return (l->qhead != NULL || nap) && l->durability == TG_DURABILITY_FSYNC &&
           l->commit_delay_us > 0 && (concurrent || atomic_load(&l->announced) > 0) &&
           l->qcount < l->max_batch;
}

/* Caller holds mu, and commit_delay_applies. Holds the batch open until the announced
 * records are in (when the last batch was not concurrent), the batch is full, the delay is
 * over, or recovery or the close asks. True when records are queued to be written now;
 * false when the top of the loop decides (recovery, a failure, or nothing came). */
static bool hold_for_commit_delay(tg_ledger_t *l) {
    bool concurrent = l->prev_batch >= 2;
    int64_t deadline = tg_clock_mono_ns() + (int64_t)l->commit_delay_us * 1000;
    struct timespec ts;
    abs_deadline(&ts, deadline);
    l->delaying = true;
    l->delay_full = concurrent;
    while ((concurrent || atomic_load(&l->announced) > 0) && l->qcount < l->max_batch &&
           !l->closing && !l->recover_req && tg_clock_mono_ns() < deadline) {
        pthread_cond_timedwait(&l->work_cv, &l->mu, &ts);
    }
    l->delaying = false;
    if (l->recover_req || !atomic_load(&l->healthy)) {
        return false; /* handled at the top of the loop, before any batch */
    }
    if (l->qhead == NULL) {
        l->prev_batch = 0; /* the streak ends: the next record wakes the writer */
        return false;      /* closing, or nothing came: the top of the loop decides */
    }
    return true;
}

/* Caller holds mu: up to max_batch queued entries, in queue order, move to ents. */
static size_t take_batch(tg_ledger_t *l) {
    size_t n = 0;
    while (l->qhead != NULL && n < l->max_batch) {
        entry_t *e = l->qhead;
        l->qhead = e->next;
        l->ents[n++] = e;
        l->qcount--;
    }
    if (l->qhead == NULL) {
        l->qtail = NULL;
    }
    l->prev_batch = (uint32_t)n;
    return n;
}

/* A batch's size, for /metrics (batches, last, max, histogram). */
static void count_batch(tg_ledger_t *l, size_t n) {
    atomic_fetch_add_explicit(&l->st_batches, 1, memory_order_relaxed);
    atomic_store_explicit(&l->st_last_batch, n, memory_order_relaxed);
    uint64_t mx = atomic_load_explicit(&l->st_max_batch, memory_order_relaxed);
    if (n > mx) {
        atomic_store_explicit(&l->st_max_batch, n, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&l->st_batch_hist[tg_ledger_hist_bucket(
                                  tg_ledger_batch_bounds, TG_LEDGER_BATCH_BUCKETS - 1, n)],
                              1, memory_order_relaxed);
}

/* Caller holds mu, records queued: one group commit. The batch is written (and synced in
 * fsync mode) under wmu, its callbacks go to the completion thread, and what falls due
 * with it follows on this thread: batch mode's sync, the health report, ledger.head. */
static void write_queued(tg_ledger_t *l) {
    size_t n = take_batch(l);
    file_work_begin(l);
    pthread_mutex_lock(&l->wmu);
    write_batch(l, l->ents, n);
    pthread_mutex_unlock(&l->wmu);
    count_batch(l, n);
    hand_off_batch(l, l->ents, n);
    /* BATCH: acknowledged at write(); the fdatasync follows when it is due. */
    pthread_mutex_lock(&l->wmu);
    if (atomic_load(&l->healthy) && l->durability == TG_DURABILITY_BATCH &&
        l->synced_end != l->acked_end &&
        tg_clock_mono_ns() - l->last_sync_ns >= (int64_t)l->batch_interval_ms * 1000000) {
        (void)sync_segment(l, "");
    }
    pthread_mutex_unlock(&l->wmu);
    if (!atomic_load(&l->healthy)) {
        schedule_retry(l);
    }
    report_health(l, NULL);
    (void)checkpoint(l, false);
    file_work_end(l);
}

/* Caller holds mu; batch mode, nothing queued. Written records wait at most
 * batch_interval_ms for their fdatasync (the mode's loss window), also when no further
 * batch brings one. False when every written record is synced. */
static bool sync_batch_when_due(tg_ledger_t *l) {
    pthread_mutex_lock(&l->wmu);
    bool unsynced = l->synced_end != l->acked_end;
    int64_t due = l->last_sync_ns + (int64_t)l->batch_interval_ms * 1000000;
    pthread_mutex_unlock(&l->wmu);
    if (!unsynced) {
        return false;
    }
    if (sleep_until(l, due)) {
        return true;
    }
    file_work_begin(l);
    pthread_mutex_lock(&l->wmu);
    if (!sync_segment(l, "")) {
        schedule_retry(l);
    }
    pthread_mutex_unlock(&l->wmu);
    report_health(l, NULL);
    file_work_end(l);
    return true;
}

/* Caller holds mu; durability none, nothing queued. NONE_FLUSH_MS after the last one, the
 * background flush (background_flush says why) and a ledger.head checkpoint. Timed from
 * that flush, not from the last wake-up: queued appends wake the writer once a record, and
 * records coming more often than the period would otherwise put the flush off forever. */
static void flush_when_due(tg_ledger_t *l) {
    /* (flush_ms: NONE_FLUSH_MS, or with a feed the log's sync interval.) */
    if (sleep_until(l, l->flush_ns + (int64_t)l->flush_ms * 1000000)) {
        return; /* slept, woken or not: the top of the loop decides */
    }
    file_work_begin(l);
    background_flush(l);
    (void)checkpoint(l, false);
    file_work_end(l);
    l->flush_ns = tg_clock_mono_ns();
}

/* Caller holds mu; nothing queued. Durable records reach ledger.head within
 * HEAD_INTERVAL_MS also when no batch follows them (checkpoint says why). False when
 * ledger.head is current. */
static bool checkpoint_when_due(tg_ledger_t *l) {
    if (!head_pending(l)) {
        return false;
    }
    if (sleep_until(l, l->head_ns + (int64_t)HEAD_INTERVAL_MS * 1000000)) {
        return true;
    }
    file_work_begin(l);
    (void)checkpoint(l, false); /* failed: head_ns puts the retry an interval on */
    file_work_end(l);
    return true;
}

/* Caller holds mu, closing, the queue written or failed: a clean stop leaves every record
 * durable and in ledger.head. mu stays released: the thread ends here. */
static void close_files(tg_ledger_t *l) {
    file_work_begin(l);
    pthread_mutex_lock(&l->wmu);
    /* A directory deleted or moved since the last check (an idle ledger is checked every
     * tick, and the stop may come first): keep the evidence before the process is gone. */
    char idwhy[sizeof l->fail_msg];
    if (!atomic_load(&l->identity_lost) && !identity_full(l, idwhy, sizeof idwhy)) {
        identity_broken(l, idwhy);
    }
    if (atomic_load(&l->healthy) && l->synced_end != l->acked_end) {
        (void)sync_segment(l, " at close");
    }
    l->wclosed = true; /* no inline append writes after this */
    pthread_mutex_unlock(&l->wmu);
    report_health(l, NULL);
    (void)checkpoint(l, true); /* a clean stop leaves every record in ledger.head */
    io_end(l, &l->io_writer_ns);
}

/* The writer's policy, mu held between its steps (lock order: mu, then wmu; every step
 * that touches a file releases mu and runs inside the stall watch's bracket). Each turn:
 * recover if asked; if unhealthy, fail the queue and retry on schedule; else gather a batch
 * (maybe waiting for the group-commit delay) and write it; else do what is due while idle
 * (batch mode's sync, none mode's flush, a ledger.head checkpoint); else sleep until work.
 * Every step that waited or worked starts the next turn from the top, so a recovery
 * request, a failure or the close is seen before anything else is done. */
static void *writer_main(void *arg) {
    tg_ledger_t *l = arg;
    (void)prctl(PR_SET_NAME, "tg-ledger-wr", 0, 0, 0); /* top -H, ps -L */
    schedule_retry(l);
    l->flush_ns = tg_clock_mono_ns();
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->recover_req) {
            answer_recovery_request(l);
            continue;
        }
        if (!atomic_load(&l->healthy)) {
            fail_queue_locked(l); /* queued records fail like the appends refused now */
            if (l->recover_req) {
                continue;
            }
            if (l->closing) {
                break;
            }
            retry_on_schedule(l);
            continue;
        }
        if (commit_delay_applies(l) && !hold_for_commit_delay(l)) {
            continue;
        }
        if (l->qhead != NULL) {
            write_queued(l);
            continue;
        }
        if (l->closing) {
            break;
        }
        if (l->durability == TG_DURABILITY_BATCH && sync_batch_when_due(l)) {
            continue;
        }
        if (l->durability == TG_DURABILITY_NONE) {
            flush_when_due(l);
            continue;
        }
        if (checkpoint_when_due(l)) {
            continue;
        }
        pthread_cond_wait(&l->work_cv, &l->mu);
    }
    close_files(l);
    return NULL;
}

/* ---- open ---- */

typedef struct replay_ctx {
    tg_ledger_replay_fn fn;
    void *ud;
    tg_lg_head_probe_t probe; /* ledger.head's record */
} replay_ctx_t;

static tg_err_t replay_rec(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    replay_ctx_t *c = ud;
    tg_lg_head_probe_see(&c->probe, rec);
    if (c->fn == NULL) {
        return TG_OK;
    }
    tg_err_t rc = c->fn(c->ud, rec);
    if (rc) {
        tg_diag_set(diag, rc, "replay callback refused the record: %s", tg_strerror(rc));
    }
    return rc;
}

static void stop_completer(tg_ledger_t *l) {
    if (!l->cthread_started) {
        return;
    }
    pthread_mutex_lock(&l->cmu);
    l->cclosing = true;
    pthread_cond_signal(&l->cmu_cv);
    pthread_mutex_unlock(&l->cmu);
    pthread_join(l->cthread, NULL);
    l->cthread_started = false;
}

static void ledger_free(tg_ledger_t *l) {
    if (l == NULL) {
        return;
    }
    if (l->fd >= 0) {
        close(l->fd);
    }
    if (l->headfd >= 0) {
        close(l->headfd);
    }
    if (l->lockfd >= 0) {
        close(l->lockfd); /* releases the flock */
    }
    if (l->evid_lockfd >= 0) {
        close(l->evid_lockfd); /* the lock keep_evidence took at the path */
    }
    if (l->evid_dirfd >= 0) {
        close(l->evid_dirfd);
    }
    if (l->dirfd >= 0) {
        close(l->dirfd);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->stat_mu);
    pthread_mutex_destroy(&l->wmu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->recover_cv);
    pthread_mutex_destroy(&l->cmu);
    pthread_cond_destroy(&l->cmu_cv);
    free(l->batch);
    free(l->ents);
    free(l->fp);
    free(l->dir);
    free(l);
}

/* A directory created just now survives a power loss only once its parent is synced. */
static int sync_parent(const char *dir) {
    char parent[4096];
    if (tg_path_parent(parent, sizeof parent, dir) != TG_OK) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int r = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

static tg_err_t open_dir(tg_ledger_t *l, tg_diag_t *diag) {
    if (l->no_create) {
        struct stat st;
        if (stat(l->dir, &st) != 0 && errno == ENOENT) {
            return tg_diag_set(diag, TG_ERR_NOT_FOUND,
                               "%s: no ledger directory, and this start may not create a new "
                               "ledger",
                               l->dir);
        }
    } else if (mkdir(l->dir, 0700) == 0) {
        if (sync_parent(l->dir) != 0) {
            return tg_diag_set(diag, TG_ERR_IO,
                               "%s: cannot sync the new ledger directory's "
                               "parent: %s",
                               l->dir, strerror(errno));
        }
    } else if (errno != EEXIST) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot create ledger directory: %s", l->dir,
                           strerror(errno));
    }
    l->dirfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dirfd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot open ledger directory: %s", l->dir,
                           strerror(errno));
    }
    /* O_NOFOLLOW: a planted symlink must not make the daemon create or lock a file
     * outside the ledger directory. */
    l->lockfd = openat(l->dirfd, TG_LG_LOCK_NAME,
                       O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (l->lockfd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot open lock file: %s", l->dir,
                           TG_LG_LOCK_NAME, strerror(errno));
    }
    struct stat lst;
    if (fstat(l->lockfd, &lst) != 0 || !S_ISREG(lst.st_mode)) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: lock file is not a regular file", l->dir,
                           TG_LG_LOCK_NAME);
    }
    if (flock(l->lockfd, LOCK_EX | LOCK_NB) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: ledger is locked by another process (%s)", l->dir,
                           strerror(errno));
    }
    struct stat dst;
    if (fstat(l->dirfd, &dst) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: %s", l->dir, strerror(errno));
    }
    /* What the identity checks compare with from here on. */
    l->dir_dev = dst.st_dev;
    l->dir_ino = dst.st_ino;
    l->lock_dev = lst.st_dev;
    l->lock_ino = lst.st_ino;
    return TG_OK;
}

/* Before anything is cut: the scanned ledger must still reach, unchanged, the record
 * ledger.head says was durable (h NULL: no ledger.head). Otherwise the storage lost or
 * replaced records after they were on disk; the start is refused and nothing is touched. */
static tg_err_t check_head(const tg_ledger_t *l, const tg_lg_head_t *h, const replay_ctx_t *c,
                           uint64_t last_seq, tg_diag_t *diag) {
    if (h == NULL) {
        return TG_OK;
    }
    uint64_t seq;
    char what[TG_DIAG_MAX];
    if (tg_lg_head_check(h, last_seq, &c->probe, &seq, what, sizeof what) == TG_OK) {
        return TG_OK;
    }
    return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                       "%s: %s. Nothing was changed; to accept it, move %s away", l->dir, what,
                       TG_LG_HEAD_NAME);
}

/* Whether the record at rs->pos in fd is whole and is the one rs names (its record_hash):
 * TG_OK with hash filled, TG_ERR_LEDGER_CORRUPT with another hash, else tg_lg_check_at's
 * error; what says why. One check for both the start from a snapshot and
 * tg_ledger_check_resume, so the two cannot disagree about a snapshot. */
static tg_err_t resume_record_check(int fd, const tg_ledger_resume_t *rs, uint8_t hash[HSZ],
                                    char *what, size_t what_len) {
    tg_err_t rc = tg_lg_check_at(fd, &rs->pos, hash, what, what_len);
    if (rc == TG_OK && sodium_memcmp(hash, rs->hash, HSZ) != 0) {
        rc = TG_ERR_LEDGER_CORRUPT;
        snprintf(what, what_len, "seq %llu is not the snapshot's record (hash differs)",
                 (unsigned long long)rs->seq);
    }
    return rc;
}

/* Scans every segment, replays, checks ledger.head (head: NULL if there is none), truncates
 * a torn tail and leaves the active segment open. */
static tg_err_t scan_all(tg_ledger_t *l, replay_ctx_t *rctx, const tg_lg_head_t *head,
                         tg_ledger_recovery_t *rep, tg_diag_t *diag) {
    uint32_t *segs = NULL;
    size_t nseg = 0;
    tg_lg_chain_t chain;
    memset(&chain, 0, sizeof chain);
    chain.next_seq = 1;
    /* A pruned ledger starts where its anchor says (anchor.h): the first kept segment, the
     * first kept seq and its predecessor's hash. Without one, from segment 1 and seq 1. A
     * damaged anchor refuses the start: the chain's start would be unknown. */
    tg_anchor_t anchor;
    bool anchored = false;
    tg_err_t rc = tg_anchor_read(&anchor, &anchored, l->dirfd, l->dir, TG_ANCHOR_NAME, diag);
    if (rc) {
        return rc;
    }
    struct stat est;
    if (fstatat(l->dirfd, TG_ANCHOR_END_NAME, &est, AT_SYMLINK_NOFOLLOW) == 0) {
        /* An archive's chain goes on in the live directory: appending here would fork it. */
        return tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                           "%s: an archive of a pruned ledger (%s): records are appended to the "
                           "live directory only",
                           l->dir, TG_ANCHOR_END_NAME);
    }
    uint32_t first = 1;
    if (anchored) {
        chain.next_seq = anchor.first_seq;
        memcpy(chain.prev, anchor.prev_hash, HSZ);
        first = anchor.first_segment;
    }
    rc = tg_lg_list_segments(&segs, &nseg, l->dirfd, l->dir, first, NULL, diag);
    if (rc) {
        return rc;
    }
    if (anchored && nseg == 0) {
        char name[TG_LG_NAME_MAX];
        tg_lg_seg_name(name, first);
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "%s/%s: segment file missing (%s says the ledger starts there)", l->dir,
                         name, TG_ANCHOR_NAME);
        goto done;
    }
    const tg_ledger_resume_t *rs = l->resume;
    if (rs != NULL && (rs->pos.seq != rs->seq || rs->seq < chain.next_seq || nseg == 0 ||
                       rs->pos.segment < segs[0] || rs->pos.segment > segs[nseg - 1])) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "%s: the snapshot's record seq %llu (segment %u) is not in this ledger",
                         l->dir, (unsigned long long)rs->seq, (unsigned)rs->pos.segment);
        goto done;
    }
    if (rs != NULL) {
        /* Records before the snapshot's are not read (snapshot.h): counted, and ledger.head's
         * record, when it lies there, taken as found (verify checks it). */
        rep->first_seq = chain.next_seq;
        rep->records = rs->seq - chain.next_seq + 1;
        if (rctx->probe.want_seq != 0 && rctx->probe.want_seq <= rs->seq) {
            rctx->probe.got = true;
            memcpy(rctx->probe.hash, rctx->probe.want_seq == rs->seq ? rs->hash : head->hash, HSZ);
        }
    }
    for (size_t i = 0; i < nseg; i++) {
        char name[TG_LG_NAME_MAX];
        bool last = i + 1 == nseg;
        tg_lg_seg_name(name, segs[i]);
        uint64_t start = 0;
        if (rs != NULL && segs[i] < rs->pos.segment) {
            struct stat pst;
            if (fstatat(l->dirfd, name, &pst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(pst.st_mode) ||
                pst.st_size == 0) {
                rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                                 "%s/%s: missing, empty or not a regular file (before the "
                                 "snapshot's record)",
                                 l->dir, name);
                goto done;
            }
            continue;
        }
        int fd = open_segment(l, segs[i], last ? O_RDWR : O_RDONLY);
        if (fd < 0) {
            rc = tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", l->dir, name, strerror(errno));
            goto done;
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            rc = tg_diag_set(diag, TG_ERR_IO, "%s/%s: not a readable regular file", l->dir, name);
            goto done;
        }
        if (rs != NULL && segs[i] == rs->pos.segment) {
            /* The snapshot's record must be there, whole, with the hash the snapshot names;
             * the chain goes on from it. */
            uint8_t h[HSZ];
            char what[TG_DIAG_MAX];
            rc = resume_record_check(fd, rs, h, what, sizeof what);
            if (rc) {
                close(fd);
                rc = tg_diag_set(diag, rc == TG_ERR_NOT_FOUND ? TG_ERR_LEDGER_CORRUPT : rc,
                                 "%s/%s: %s", l->dir, name, what);
                goto done;
            }
            chain.next_seq = rs->seq + 1;
            memcpy(chain.prev, h, HSZ);
            start = rs->pos.offset + rs->pos.length;
        }
        tg_lg_scan_result_t res;
        tg_lg_fault_t f;
        rc = tg_lg_scan_fd_at(&res, &f, &chain, fd, (uint64_t)st.st_size, start, 0, segs[i], last,
                              replay_rec, rctx);
        if (rc == TG_OK && res.records == 0 && start == 0 && !last) {
            rc = TG_ERR_LEDGER_CORRUPT;
            f.seq = chain.next_seq;
            f.offset = 0;
            snprintf(f.what, sizeof f.what, "empty segment that is not the last one");
        }
        if (rc) {
            close(fd);
            if (rc == TG_ERR_IO || rc == TG_ERR_NOMEM) {
                rc = tg_diag_set(diag, rc, "%s/%s: reading failed: %s", l->dir, name,
                                 tg_strerror(rc));
            } else {
                rc = tg_diag_set(diag, rc, "%s/%s: seq %llu at offset %llu: %s", l->dir, name,
                                 (unsigned long long)f.seq, (unsigned long long)f.offset, f.what);
            }
            goto done;
        }
        if (rep->records == 0 && res.records > 0) {
            rep->first_seq = res.first_seq;
        }
        rep->records += res.records;
        if (!last) {
            close(fd);
            continue;
        }
        rc = check_head(l, head, rctx, chain.next_seq - 1, diag);
        if (rc) {
            close(fd);
            goto done;
        }
        if (res.torn) {
            if (ftruncate(fd, (off_t)res.good_end) != 0 || fdatasync(fd) != 0) {
                rc = tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot truncate torn tail: %s", l->dir,
                                 name, strerror(errno));
                close(fd);
                goto done;
            }
            rep->torn = true;
            rep->torn_segment = segs[i];
            rep->torn_offset = res.good_end;
            rep->torn_bytes = res.torn_bytes;
            snprintf(rep->message, sizeof rep->message,
                     "%s/%s: torn final record truncated: %llu bytes dropped at offset %llu "
                     "(seq %llu was never acknowledged)",
                     l->dir, name, (unsigned long long)res.torn_bytes,
                     (unsigned long long)res.good_end, (unsigned long long)chain.next_seq);
        }
        l->fd = fd;
        l->seg = segs[i];
        l->acked_end = l->synced_end = res.good_end;
    }
    rep->segments = (uint32_t)nseg;
    if (nseg == 0) {
        const char *file = NULL;
        char what[TG_DIAG_MAX];
        if (tg_lg_orphan_check(l->dirfd, head, &file, what, sizeof what) != TG_OK) {
            rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                             "%s: %s. Nothing was changed; restore the segments, or move %s "
                             "away to begin a new ledger",
                             l->dir, what, file);
            goto done;
        }
        if (l->no_create) {
            rc = tg_diag_set(diag, TG_ERR_NOT_FOUND,
                             "%s: no ledger segment file, and this start may not create a new "
                             "ledger",
                             l->dir);
            goto done;
        }
        l->fd = open_segment(l, 1, O_RDWR | O_CREAT | O_EXCL);
        if (l->fd < 0 || fsync(l->dirfd) != 0) {
            rc = tg_diag_set(diag, TG_ERR_IO, "%s: cannot create the first segment: %s", l->dir,
                             strerror(errno));
            goto done;
        }
        l->seg = 1;
        l->acked_end = l->synced_end = 0;
        rep->created = true;
        rep->segments = 1;
    }
    l->next_seq = chain.next_seq;
    memcpy(l->head, chain.prev, HSZ);
    rep->last_seq = chain.next_seq - 1;
    memcpy(rep->head_hash, chain.prev, HSZ);
done:
    free(segs);
    return rc;
}

/* After the scan: what it read is made durable (a process crash leaves written but unsynced
 * records readable), becomes the durable head, and is recorded in ledger.head, created if
 * missing. */
static tg_err_t open_head(tg_ledger_t *l, const tg_lg_head_t *found, tg_diag_t *diag) {
    if (fdatasync(l->fd) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: fdatasync of segment %u failed: %s", l->dir,
                           l->seg, strerror(errno));
    }
    note_synced(l);
    l->headfd = openat(l->dirfd, TG_LG_HEAD_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (l->headfd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", l->dir, TG_LG_HEAD_NAME, strerror(errno));
    }
    if (found == NULL) { /* created just now: both slots (zero, so invalid), then its name */
        if (ftruncate(l->headfd, TG_LG_HEAD_SIZE) != 0 || fsync(l->dirfd) != 0) {
            return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot create it: %s", l->dir,
                               TG_LG_HEAD_NAME, strerror(errno));
        }
    } else {
        l->head_gen = found->gen;
        l->head_seq = found->seq;
    }
    if (checkpoint(l, true) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot write it: %s", l->dir, TG_LG_HEAD_NAME,
                           strerror(errno));
    }
    return TG_OK;
}

tg_err_t tg_ledger_open(tg_ledger_t **out, const tg_ledger_opts_t *opts, tg_ledger_replay_fn replay,
                        void *ud, tg_ledger_recovery_t *report, tg_diag_t *diag) {
    tg_ledger_recovery_t local;
    tg_ledger_recovery_t *rep = report != NULL ? report : &local;
    memset(rep, 0, sizeof *rep);
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger open: NULL out");
    }
    *out = NULL;
    if (opts == NULL || opts->dir == NULL || opts->dir[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger open: no directory given");
    }
    if (opts->durability != TG_DURABILITY_FSYNC && opts->durability != TG_DURABILITY_BATCH &&
        opts->durability != TG_DURABILITY_NONE) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger open: unknown durability mode %d",
                           (int)opts->durability);
    }
    if (sodium_init() < 0) {
        return tg_diag_set(diag, TG_ERR_INTERNAL, "libsodium failed to start");
    }
    tg_ledger_t *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "ledger open: out of memory");
    }
    l->fd = l->dirfd = l->lockfd = l->headfd = l->evid_dirfd = l->evid_lockfd = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->stat_mu, NULL);
    pthread_mutex_init(&l->wmu, NULL);
    pthread_mutex_init(&l->cmu, NULL);
    pthread_cond_init(&l->cmu_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->work_cv, &ca);
    pthread_cond_init(&l->recover_cv, &ca);
    pthread_condattr_destroy(&ca);
    l->durability = opts->durability;
    l->batch_interval_ms =
        opts->batch_interval_ms ? opts->batch_interval_ms : DEFAULT_BATCH_INTERVAL_MS;
    l->segment_max = opts->segment_max_bytes ? opts->segment_max_bytes : DEFAULT_SEGMENT_MAX;
    l->max_batch = opts->max_batch ? opts->max_batch : DEFAULT_MAX_BATCH;
    l->queue_max = opts->queue_max ? opts->queue_max : DEFAULT_QUEUE_MAX;
    l->retry_ms = opts->retry_ms ? opts->retry_ms : DEFAULT_RETRY_MS;
    l->commit_delay_us = opts->commit_delay_us;
    l->no_create = opts->no_create;
    if (opts->resume != NULL) {
        l->resume_copy = *opts->resume;
        l->resume = &l->resume_copy;
    }
    l->feed = opts->feed;
    l->feed_ud = opts->feed_ud;
    /* With a feed, records written in none mode reach the log only through a sync: the
     * flush then runs as often as the log asks (its checkpoint interval). */
    l->flush_ms = NONE_FLUSH_MS;
    if (l->feed != NULL) {
        l->flush_ms = opts->sync_interval_ms ? opts->sync_interval_ms : NONE_FLUSH_MS;
    }
    atomic_init(&l->announced, 0);
    atomic_init(&l->identity_lost, false);
    l->last_sync_ns = tg_clock_mono_ns();
    atomic_init(&l->healthy, true);
    tg_err_t rc = TG_OK;
    l->dir = strdup(opts->dir);
    l->ents = calloc(l->max_batch, sizeof(entry_t *));
    if (l->dir == NULL || l->ents == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "ledger open: out of memory");
        goto done;
    }
    rc = open_dir(l, diag);
    if (rc) {
        goto done;
    }
    tg_lg_head_t head;
    bool have_head = false;
    rc = tg_lg_head_read(&head, &have_head, l->dirfd, l->dir, diag);
    if (rc) {
        char why[TG_DIAG_MAX];
        snprintf(why, sizeof why, "%s", diag != NULL ? diag->msg : tg_strerror(rc));
        rc =
            tg_diag_set(diag, rc, "%s; to start without the durable-head check, move it away", why);
        goto done;
    }
    replay_ctx_t rctx = {.fn = replay, .ud = ud, .probe.want_seq = have_head ? head.seq : 0};
    rc = scan_all(l, &rctx, have_head ? &head : NULL, rep, diag);
    if (rc) {
        goto done;
    }
    rc = open_head(l, have_head ? &head : NULL, diag);
    if (rc) {
        goto done;
    }
    l->id_full_ns = tg_clock_mono_ns();
    /* Ready only once the disk has taken data: on a full disk the ledger would otherwise
     * look healthy until the first decision failed. Open still succeeds (the records are
     * sound); the writer's retry loop recovers it like after any failed write. Only the
     * file probe: the segment probe, killed between its write and its truncation, leaves
     * zeros that the next start reports as a torn tail, and a start is where crashes and
     * restarts meet. A limit only the segment meets fails the first record instead, and
     * recovery's segment probe then holds the ledger down until it is lifted. */
    char why[sizeof l->fail_msg];
    if (probe_file(l, why, sizeof why) != TG_OK) {
        mark_unhealthy(l, why);
    }
    publish_head(l);
    if (pthread_create(&l->cthread, NULL, completer_main, l) != 0) {
        rc = tg_diag_set(diag, TG_ERR_INTERNAL, "ledger open: cannot start the completion thread");
        goto done;
    }
    l->cthread_started = true;
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0) {
        rc = tg_diag_set(diag, TG_ERR_INTERNAL, "ledger open: cannot start the writer thread");
        goto done;
    }
    l->thread_started = true;
done:
    if (rc) {
        stop_completer(l);
        ledger_free(l);
        return rc;
    }
    *out = l;
    return TG_OK;
}

/* ---- what snapshots need (snapshot.h) ---- */

tg_err_t tg_ledger_check_resume(const char *dir, const tg_ledger_resume_t *rs, tg_diag_t *diag) {
    if (dir == NULL || rs == NULL || rs->seq == 0 || rs->pos.seq != rs->seq ||
        rs->pos.segment == 0) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "no valid ledger position");
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return tg_diag_set(diag, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "%s: %s", dir,
                           strerror(errno));
    }
    tg_anchor_t anchor;
    bool anchored = false;
    tg_err_t rc = tg_anchor_read(&anchor, &anchored, dfd, dir, TG_ANCHOR_NAME, diag);
    if (rc == TG_OK && anchored &&
        (rs->pos.segment < anchor.first_segment || rs->seq < anchor.first_seq)) {
        rc = tg_diag_set(
            diag, TG_ERR_NOT_FOUND, "seq %llu was pruned: the ledger now starts at seq %llu (%s)",
            (unsigned long long)rs->seq, (unsigned long long)anchor.first_seq, TG_ANCHOR_NAME);
    }
    if (rc == TG_OK) {
        char name[TG_LG_NAME_MAX];
        tg_lg_seg_name(name, rs->pos.segment);
        int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            rc = tg_diag_set(diag, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                             "%s: segment %u: %s", dir, (unsigned)rs->pos.segment, strerror(errno));
        } else {
            uint8_t h[HSZ];
            char what[TG_DIAG_MAX];
            rc = resume_record_check(fd, rs, h, what, sizeof what);
            if (rc) {
                rc = tg_diag_set(diag, rc, "%s: %s", name, what);
            }
            close(fd);
        }
    }
    close(dfd);
    return rc;
}

void tg_ledger_durable(tg_ledger_t *l, uint64_t *seq, uint8_t hash[TG_LEDGER_HASH_SIZE]) {
    pthread_mutex_lock(&l->wmu);
    *seq = l->durable.seq;
    memcpy(hash, l->durable.hash, HSZ);
    pthread_mutex_unlock(&l->wmu);
}

typedef struct range_ctx {
    tg_ledger_replay_fn fn;
    void *ud;
    tg_ledger_resume_t *at;
} range_ctx_t;

static tg_err_t range_rec(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    range_ctx_t *c = ud;
    tg_err_t rc = c->fn(c->ud, rec);
    if (rc) {
        return tg_diag_set(diag, rc, "callback refused the record: %s", tg_strerror(rc));
    }
    c->at->seq = rec->seq;
    c->at->pos = rec->pos;
    memcpy(c->at->hash, rec->hash, HSZ);
    return TG_OK;
}

tg_err_t tg_ledger_read_range(tg_ledger_t *l, tg_ledger_resume_t *at, uint64_t upto,
                              tg_ledger_replay_fn fn, void *ud, tg_diag_t *diag) {
    if (l == NULL || at == NULL || fn == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger range: NULL argument");
    }
    tg_lg_chain_t chain;
    memset(&chain, 0, sizeof chain);
    uint32_t seg;
    uint64_t start;
    if (at->seq == 0) {
        /* from the ledger's first record: segment 1 or the anchor's */
        tg_anchor_t anchor;
        bool anchored = false;
        tg_err_t rc = tg_anchor_read(&anchor, &anchored, l->dirfd, l->dir, TG_ANCHOR_NAME, diag);
        if (rc) {
            return rc;
        }
        chain.next_seq = anchored ? anchor.first_seq : 1;
        if (anchored) {
            memcpy(chain.prev, anchor.prev_hash, HSZ);
        }
        seg = anchored ? anchor.first_segment : 1;
        start = 0;
    } else {
        chain.next_seq = at->seq + 1;
        memcpy(chain.prev, at->hash, HSZ);
        seg = at->pos.segment;
        start = at->pos.offset + at->pos.length;
    }
    range_ctx_t c = {fn, ud, at};
    while (chain.next_seq <= upto) {
        char name[TG_LG_NAME_MAX];
        tg_lg_seg_name(name, seg);
        int fd = open_segment(l, seg, O_RDONLY);
        if (fd < 0) {
            return tg_diag_set(diag, TG_ERR_IO, "%s/%s: %s", l->dir, name, strerror(errno));
        }
        struct stat st;
        tg_err_t rc = fstat(fd, &st) == 0 ? TG_OK : TG_ERR_IO;
        tg_lg_scan_result_t res;
        tg_lg_fault_t f;
        memset(&f, 0, sizeof f);
        if (rc == TG_OK) {
            rc = tg_lg_scan_fd_at(&res, &f, &chain, fd, (uint64_t)st.st_size, start, upto, seg,
                                  false, range_rec, &c);
        }
        close(fd);
        if (rc) {
            return tg_diag_set(diag, rc, "%s/%s: seq %llu at offset %llu: %s", l->dir, name,
                               (unsigned long long)f.seq, (unsigned long long)f.offset,
                               f.what[0] ? f.what : tg_strerror(rc));
        }
        if (chain.next_seq <= upto) {
            seg++; /* this segment is complete: the next record opens the next one */
            start = 0;
        }
    }
    return TG_OK;
}

/* ---- append ---- */

/* The checks both append paths share: the error to return, or TG_OK. */
static tg_err_t entry_check(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                            const void *payload, size_t len) {
    if ((type != TG_LEDGER_TYPE_RECEIPT && type != TG_LEDGER_TYPE_SILENCE &&
         type != TG_LEDGER_TYPE_REDEMPTION && type != TG_LEDGER_TYPE_APPROVAL) ||
        (meta == NULL && meta_len > 0) || (payload == NULL && len > 0)) {
        return TG_ERR_INVALID_ARG;
    }
    if (meta_len > TG_LEDGER_META_MAX || len > TG_LEDGER_PAYLOAD_MAX) {
        return TG_ERR_LIMIT;
    }
    if (!tg_ledger_healthy(l)) {
        atomic_fetch_add_explicit(&l->st_rejected, 1, memory_order_relaxed);
        return TG_ERR_LEDGER_UNHEALTHY;
    }
    return TG_OK;
}

/* With a feed, the record's log entry: the caller's, or SHA-256 of the payload (on the
 * appending thread, off the writer's cycle). Without one nothing is computed. */
static void entry_leaf(const tg_ledger_t *l, entry_t *e, const tg_ledger_in_t *in) {
    if (l->feed == NULL) {
        return;
    }
    if (in->entry != NULL) {
        memcpy(e->leaf, in->entry, HSZ);
    } else {
        tg_sha256(e->leaf, e->payload, e->payload_len);
    }
}

/* A queued entry owning a copy of meta and payload (the caller's buffers do not outlive
 * tg_ledger_append), or the error to return (nothing allocated then). */
static tg_err_t entry_new(entry_t **out, tg_ledger_t *l, const tg_ledger_in_t *in) {
    *out = NULL;
    tg_err_t rc = entry_check(l, in->type, in->meta, in->meta_len, in->payload, in->len);
    if (rc != TG_OK) {
        return rc;
    }
    size_t meta_len = in->meta_len, len = in->len;
    entry_t *e = malloc(sizeof *e + meta_len + len);
    if (e == NULL) {
        return TG_ERR_NOMEM;
    }
    memset(e, 0, sizeof *e);
    e->type = in->type;
    e->status = TG_ERR_LEDGER_UNHEALTHY;
    e->meta_len = (uint32_t)meta_len;
    e->payload_len = (uint32_t)len;
    if (meta_len) {
        memcpy(e->data, in->meta, meta_len);
    }
    if (len) {
        memcpy(e->data + meta_len, in->payload, len);
    }
    e->meta = e->data;
    e->payload = e->data + meta_len;
    tg_lg_body_digest(e->body, e->meta, e->meta_len, e->payload, e->payload_len);
    entry_leaf(l, e, in);
    *out = e;
    return TG_OK;
}

tg_err_t tg_ledger_append(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                          const void *payload, size_t len, tg_ledger_done_fn done, void *ud) {
    tg_ledger_in_t in = {type, meta, meta_len, payload, len, NULL};
    return tg_ledger_append_in(l, &in, done, ud);
}

tg_err_t tg_ledger_append_in(tg_ledger_t *l, const tg_ledger_in_t *in, tg_ledger_done_fn done,
                             void *ud) {
    if (l == NULL || in == NULL || done == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    entry_t *e;
    tg_err_t erc = entry_new(&e, l, in);
    if (erc != TG_OK) {
        return erc;
    }
    e->done = done;
    e->ud = ud;
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&l->mu);
    if (l->closing || !tg_ledger_healthy(l)) {
        rc = TG_ERR_LEDGER_UNHEALTHY;
    } else if (l->qcount >= l->queue_max) {
        rc = TG_ERR_OVERLOADED;
    } else {
        if (l->qtail != NULL) {
            l->qtail->next = e;
        } else {
            l->qhead = e;
        }
        l->qtail = e;
        l->qcount++;
        /* A delaying writer waits for announcements to end (or a full batch), not for each
         * record: waking it per record would only cost context switches. */
        if (!l->delaying || l->qcount >= l->max_batch) {
            pthread_cond_signal(&l->work_cv);
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (rc) {
        atomic_fetch_add_explicit(&l->st_rejected, 1, memory_order_relaxed);
        free(e);
    }
    return rc;
}

typedef struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    tg_err_t rc;
    tg_ledger_pos_t pos;
} sync_wait_t;

static void sync_done(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    sync_wait_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->rc = status;
    w->pos = *pos;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

tg_err_t tg_ledger_append_sync(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                               const void *payload, size_t len, tg_ledger_pos_t *pos_out) {
    sync_wait_t w;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    w.done = false;
    w.rc = TG_ERR_INTERNAL;
    memset(&w.pos, 0, sizeof w.pos);
    tg_err_t rc = tg_ledger_append(l, type, meta, meta_len, payload, len, sync_done, &w);
    if (rc == TG_OK) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) {
            pthread_cond_wait(&w.cv, &w.mu);
        }
        pthread_mutex_unlock(&w.mu);
        rc = w.rc;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (pos_out != NULL) {
        if (rc == TG_OK) {
            *pos_out = w.pos;
        } else {
            memset(pos_out, 0, sizeof *pos_out);
        }
    }
    return rc;
}

tg_err_t tg_ledger_append_now(tg_ledger_t *l, uint8_t type, const void *meta, size_t meta_len,
                              const void *payload, size_t len, tg_ledger_pos_t *pos_out) {
    tg_ledger_in_t in = {type, meta, meta_len, payload, len, NULL};
    return tg_ledger_append_now_in(l, &in, pos_out);
}

tg_err_t tg_ledger_append_now_in(tg_ledger_t *l, const tg_ledger_in_t *in,
                                 tg_ledger_pos_t *pos_out) {
    if (pos_out != NULL) {
        memset(pos_out, 0, sizeof *pos_out);
    }
    if (l == NULL || in == NULL || pos_out == NULL || l->durability != TG_DURABILITY_NONE) {
        return TG_ERR_INVALID_ARG;
    }
    tg_err_t erc = entry_check(l, in->type, in->meta, in->meta_len, in->payload, in->len);
    if (erc != TG_OK) {
        return erc;
    }
    entry_t ent = {.type = in->type,
                   .status = TG_ERR_LEDGER_UNHEALTHY,
                   .meta_len = (uint32_t)in->meta_len,
                   .payload_len = (uint32_t)in->len,
                   .meta = in->meta,
                   .payload = in->payload};
    entry_t *e = &ent;
    /* The bulk of the record hash (and the log entry), before the lock: only the chained
     * part runs under it. */
    tg_lg_body_digest(ent.body, ent.meta, ent.meta_len, ent.payload, ent.payload_len);
    entry_leaf(l, &ent, in);
    /* The lock's holder may be stuck in a write the disk does not answer; this runs on an
     * HTTP event thread, which must not wait for it longer than the stall bound (every
     * connection of the thread would wait with it). */
    uint32_t bound = atomic_load(&l->stall_ms);
    if (pthread_mutex_trylock(&l->wmu) == 0) {
        /* uncontended, the usual case: no deadline to compute */
    } else if (bound == 0) {
        pthread_mutex_lock(&l->wmu);
    } else {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = (int64_t)until.tv_nsec + (int64_t)(bound % 1000) * 1000000;
        until.tv_sec += (time_t)(bound / 1000 + ns / 1000000000);
        until.tv_nsec = (long)(ns % 1000000000);
        if (pthread_mutex_timedlock(&l->wmu, &until) != 0) {
            atomic_fetch_add_explicit(&l->st_rejected, 1, memory_order_relaxed);
            return TG_ERR_LEDGER_UNHEALTHY;
        }
    }
    /* Re-checked under the lock: a stall declared while this thread waited for it (the
     * holder's write did not return) fails this record at once instead of queueing it
     * behind that write. */
    bool ok = !l->wclosed && tg_ledger_healthy(l);
    if (ok) {
        io_begin(&l->io_inline_ns);
        write_batch(l, &e, 1);
        io_end(l, &l->io_inline_ns);
    }
    pthread_mutex_unlock(&l->wmu);
    tg_err_t rc = ok ? ent.status : TG_ERR_LEDGER_UNHEALTHY;
    if (rc == TG_OK) {
        *pos_out = ent.pos;
        atomic_fetch_add_explicit(&l->st_batches, 1, memory_order_relaxed);
        atomic_store_explicit(&l->st_last_batch, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->st_batch_hist[0], 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&l->st_rejected, 1, memory_order_relaxed);
        /* Wake the writer so its recovery timer runs (it sleeps while it has no work). */
        pthread_mutex_lock(&l->mu);
        pthread_cond_signal(&l->work_cv);
        pthread_mutex_unlock(&l->mu);
    }
    return rc;
}

void tg_ledger_announce(tg_ledger_t *l) {
    if (l != NULL) {
        atomic_fetch_add_explicit(&l->announced, 1, memory_order_relaxed);
    }
}

void tg_ledger_announce_end(tg_ledger_t *l) {
    if (l == NULL) {
        return;
    }
    if (atomic_fetch_sub(&l->announced, 1) == 1) {
        /* The last announced record is in (or will not come): a delaying writer can stop,
         * unless it holds the batch for the whole delay (then the wake-up is wasted: at
         * 50 connections it was one of the writer's ~4.6 futex calls per batch). */
        pthread_mutex_lock(&l->mu);
        if (l->delaying && !l->delay_full) {
            pthread_cond_signal(&l->work_cv);
        }
        pthread_mutex_unlock(&l->mu);
    }
}

bool tg_ledger_healthy(const tg_ledger_t *l) {
    tg_ledger_t *m = (tg_ledger_t *)l;
    return l != NULL && atomic_load(&m->healthy) && !atomic_load(&m->stalled);
}

bool tg_ledger_watch(tg_ledger_t *l, uint32_t stall_ms) {
    if (l == NULL || stall_ms == 0) {
        return false;
    }
    atomic_store(&l->stall_ms, stall_ms);
    int64_t now = tg_clock_mono_ns();
    int64_t bound = (int64_t)stall_ms * 1000000;
    int64_t w = atomic_load(&l->io_writer_ns);
    int64_t i = atomic_load(&l->io_inline_ns);
    int64_t since = w != 0 && (i == 0 || w < i) ? w : i;
    bool stalled = since != 0 && now - since > bound;
    if (!stalled) {
        /* Nothing old in progress; a stall that io_end did not see end (it raced this
         * watch setting the flag) ends here, a tick later. */
        if (atomic_exchange(&l->stalled, false)) {
            TG_LOG(TG_LOG_WARN, "ledger_stall_ended", "%s: no write or sync is stalled any more",
                   l->dir);
        }
        return false;
    }
    if (!atomic_exchange(&l->stalled, true)) {
        atomic_store(&l->stalled_since_ns, since);
        atomic_fetch_add_explicit(&l->st_stalls, 1, memory_order_relaxed);
        TG_LOG(TG_LOG_ERROR, "ledger_stalled",
               "%s: a %s has not returned for %lld ms (bound %u ms, --ledger-stall-timeout); "
               "records are refused (503 ledger_unavailable, /readyz 503) until it does",
               l->dir, since == w ? "write or sync of the writer thread" : "record write",
               (long long)((now - since) / 1000000), stall_ms);
        /* Queued records would only wait behind the stalled one: fail them now (never
         * written, so their requests' claims are released and a retry can run). */
        pthread_mutex_lock(&l->mu);
        fail_queue_locked(l);
        pthread_mutex_unlock(&l->mu);
    }
    return true;
}

bool tg_ledger_health(const tg_ledger_t *cl, char *why, size_t why_len) {
    tg_ledger_t *l = (tg_ledger_t *)cl; /* the mutex is mutable state */
    bool healthy = tg_ledger_healthy(l);
    if (why != NULL && why_len > 0) {
        why[0] = '\0';
        if (l == NULL) {
            snprintf(why, why_len, "no ledger is open");
        } else if (!healthy && atomic_load(&l->healthy)) {
            snprintf(why, why_len, "a write or sync has not returned within %u ms (stalled)",
                     atomic_load(&l->stall_ms));
        } else if (!healthy) {
            pthread_mutex_lock(&l->stat_mu);
            snprintf(why, why_len, "%s", l->pub_reason);
            pthread_mutex_unlock(&l->stat_mu);
        }
    }
    return healthy;
}

bool tg_ledger_check_identity(tg_ledger_t *l) {
    if (l == NULL) {
        return false;
    }
    /* Never wait behind a write or an fdatasync (a stalled disk would stall the caller,
     * the daemon's signal thread): whoever holds wmu is writing, and checks before it
     * acknowledges anything. */
    if (pthread_mutex_trylock(&l->wmu) != 0) {
        return !atomic_load(&l->identity_lost);
    }
    bool broke = false;
    if (!l->wclosed && !atomic_load(&l->identity_lost)) {
        char why[sizeof l->fail_msg];
        if (!identity_full(l, why, sizeof why)) {
            identity_broken(l, why);
            broke = true;
        }
    }
    pthread_mutex_unlock(&l->wmu);
    if (broke) {
        /* Wake the writer so that anything queued fails now (lock order: mu before wmu). */
        pthread_mutex_lock(&l->mu);
        pthread_cond_signal(&l->work_cv);
        pthread_mutex_unlock(&l->mu);
    }
    return !atomic_load(&l->identity_lost);
}

tg_err_t tg_ledger_try_recover(tg_ledger_t *l, tg_diag_t *diag) {
    if (l == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger: NULL");
    }
    pthread_mutex_lock(&l->mu);
    uint64_t gen = l->recover_gen;
    l->recover_req = true;
    pthread_cond_signal(&l->work_cv);
    while (l->recover_gen == gen) {
        pthread_cond_wait(&l->recover_cv, &l->mu);
    }
    tg_err_t rc = l->recover_rc;
    char msg[TG_DIAG_MAX];
    snprintf(msg, sizeof msg, "%s", l->recover_msg);
    pthread_mutex_unlock(&l->mu);
    if (rc) {
        return tg_diag_set(diag, rc, "%s: ledger still unhealthy: %s", l->dir, msg);
    }
    return TG_OK;
}

/* ---- reads ---- */

tg_err_t tg_ledger_read_at(tg_ledger_t *l, const tg_ledger_pos_t *pos, tg_buf_t *payload_out,
                           tg_buf_t *meta_out, tg_diag_t *diag) {
    if (l == NULL || pos == NULL || pos->seq == 0 || pos->segment == 0 ||
        pos->length < TG_LEDGER_RECORD_OVERHEAD || pos->length > TG_LEDGER_RECORD_MAX) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "ledger read: invalid position");
    }
    pthread_mutex_lock(&l->stat_mu);
    uint64_t head_seq = l->pub_head_seq;
    pthread_mutex_unlock(&l->stat_mu);
    if (pos->seq > head_seq) {
        return tg_diag_set(diag, TG_ERR_NOT_FOUND, "ledger read: seq %llu is not in the ledger",
                           (unsigned long long)pos->seq);
    }
    char name[TG_LG_NAME_MAX];
    tg_lg_seg_name(name, pos->segment);
    tg_err_t rc = TG_OK;
    uint8_t *rec = NULL;
    int fd = open_segment(l, pos->segment, O_RDONLY);
    if (fd < 0) {
        return tg_diag_set(diag, errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "%s/%s: %s",
                           l->dir, name, strerror(errno));
    }
    rec = malloc(pos->length);
    if (rec == NULL) {
        rc = TG_ERR_NOMEM;
        goto done;
    }
    size_t got = 0;
    while (got < pos->length) {
        ssize_t k = pread(fd, rec + got, pos->length - got, (off_t)(pos->offset + got));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            rc = tg_diag_set(diag, TG_ERR_IO, "%s/%s: read failed: %s", l->dir, name,
                             strerror(errno));
            goto done;
        }
        if (k == 0) {
            rc = tg_diag_set(diag, TG_ERR_NOT_FOUND, "%s/%s: offset %llu is past the end", l->dir,
                             name, (unsigned long long)pos->offset);
            goto done;
        }
        got += (size_t)k;
    }
    tg_lg_hdr_t h;
    char what[TG_DIAG_MAX];
    uint8_t hash[HSZ];
    if (tg_lg_hdr_parse(&h, rec, what, sizeof what) != TG_OK || h.seq != pos->seq ||
        tg_lg_record_len(h.meta_len, h.payload_len) != pos->length ||
        !tg_lg_hash_check(rec, pos->length, hash)) {
        rc = tg_diag_set(diag, TG_ERR_LEDGER_CORRUPT,
                         "%s/%s: seq %llu at offset %llu: record does not verify", l->dir, name,
                         (unsigned long long)pos->seq, (unsigned long long)pos->offset);
        goto done;
    }
    if (payload_out != NULL) {
        tg_buf_reset(payload_out);
        rc = tg_buf_append(payload_out, rec + TG_LEDGER_HEADER_SIZE + h.meta_len, h.payload_len);
        if (rc) {
            goto done;
        }
    }
    if (meta_out != NULL) {
        tg_buf_reset(meta_out);
        rc = tg_buf_append(meta_out, rec + TG_LEDGER_HEADER_SIZE, h.meta_len);
        if (rc) {
            goto done;
        }
    }
done:
    free(rec);
    close(fd);
    return rc;
}

void tg_ledger_stats(const tg_ledger_t *cl, tg_ledger_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (cl == NULL) {
        return;
    }
    tg_ledger_t *l = (tg_ledger_t *)cl; /* counters and locks are mutable state */
    out->records = atomic_load_explicit(&l->st_records, memory_order_relaxed);
    out->bytes = atomic_load_explicit(&l->st_bytes, memory_order_relaxed);
    out->batches = atomic_load_explicit(&l->st_batches, memory_order_relaxed);
    out->last_batch = atomic_load_explicit(&l->st_last_batch, memory_order_relaxed);
    out->max_batch = atomic_load_explicit(&l->st_max_batch, memory_order_relaxed);
    out->fsyncs = atomic_load_explicit(&l->st_fsyncs, memory_order_relaxed);
    out->fsync_sum_us = atomic_load_explicit(&l->st_fsync_sum_us, memory_order_relaxed);
    out->failures = atomic_load_explicit(&l->st_failures, memory_order_relaxed);
    out->stalls = atomic_load_explicit(&l->st_stalls, memory_order_relaxed);
    out->stalled = atomic_load(&l->stalled);
    out->rejected = atomic_load_explicit(&l->st_rejected, memory_order_relaxed);
    for (size_t i = 0; i < TG_LEDGER_FSYNC_BUCKETS; i++) {
        out->fsync_hist[i] = atomic_load_explicit(&l->st_fsync_hist[i], memory_order_relaxed);
    }
    for (size_t i = 0; i < TG_LEDGER_BATCH_BUCKETS; i++) {
        out->batch_hist[i] = atomic_load_explicit(&l->st_batch_hist[i], memory_order_relaxed);
    }
    out->healthy = tg_ledger_healthy(l);
    out->identity_lost = atomic_load_explicit(&l->st_identity_lost, memory_order_relaxed);
    out->durability = l->durability;
    pthread_mutex_lock(&l->mu);
    out->queued = l->qcount;
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_lock(&l->stat_mu);
    out->segment = l->pub_seg;
    out->segment_bytes = l->pub_seg_bytes;
    out->head_seq = l->pub_head_seq;
    memcpy(out->head_hash, l->pub_head, HSZ);
    pthread_mutex_unlock(&l->stat_mu);
}

void tg_ledger_close(tg_ledger_t *l) {
    if (l == NULL) {
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->closing = true;
    pthread_cond_signal(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    if (l->thread_started) {
        pthread_join(l->thread, NULL);
    }
    stop_completer(l); /* after the writer: it runs what the writer handed off last */
    ledger_free(l);
}
