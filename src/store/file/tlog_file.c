/* tlog_file.c — the file backend's transparency-log files (tlog_file.h has the format). */
#include "tlog_file.h"

#include "trigguard/db.h"
#include "trigguard/io.h"
#include "trigguard/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "TGTLCKP1"
#define SLOT_NOTE_OFF 20
#define SLOT_SUM_OFF (TG_TLF_SLOT - 32)
#define LEVELS TG_TLOG_LEVELS
#define RUN_MAX 256        /* hashes gathered before one pwrite */
#define FILES (1 + LEVELS) /* entries, then one per level */
#define RECENT 1024        /* newest hashes per level kept in memory (a power of two) */
/* serve reserves db.h's count for them: the directory and the checkpoint file, then these */
_Static_assert(2 + FILES == TG_DB_LOG_FDS_FILE, "db.h's TG_DB_LOG_FDS_FILE counts these files");

/* Consecutive 32-byte values of one file, written with one pwrite. */
typedef struct run {
    uint64_t first;
    size_t n;
    uint8_t v[RUN_MAX][32];
} run_t;

/* The newest stored hashes of one level, indices [lo, end) with end - lo <= RECENT, at
 * v[index % RECENT]. A batch receipt's inclusion proof is for a record the newest checkpoint
 * just covered, and every hash such a proof reads is among the newest of its level: served
 * from here, the proof costs memory reads instead of a pread per hash (about 2 log2(n)). */
typedef struct recent {
    uint64_t lo, end;
    uint8_t v[RECENT][32];
} recent_t;

struct tg_tlog_file {
    char *dir; /* <ledger dir>/tlog */
    int dirfd;
    int cpfd;
    /* entries (0) and the levels (1 + L): created by the writer (restore, then the engine
     * thread), read by any thread once published, hence atomic. -1 = not created yet. */
    atomic_int fd[FILES];
    run_t *runs[FILES];
    bool opened;
    uint64_t gen; /* of the newest valid slot (0: none) */
    /* Written by the writer, read by any thread: under recent_mu (readers share it). */
    pthread_rwlock_t recent_mu;
    recent_t *recent[LEVELS];
};

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void file_name(char out[16], size_t f) {
    if (f == 0) {
        snprintf(out, 16, "entries");
    } else {
        snprintf(out, 16, "hashes-%02u", (unsigned)(f - 1));
    }
}

tg_err_t tg_tlog_file_new(tg_tlog_file_t **out, const char *ledger_dir) {
    *out = NULL;
    if (ledger_dir == NULL || ledger_dir[0] == '\0') {
        return TG_ERR_INVALID_ARG;
    }
    tg_tlog_file_t *tf = calloc(1, sizeof *tf);
    size_t n = strlen(ledger_dir) + sizeof "/" TG_TLF_DIR;
    char *dir = malloc(n);
    if (tf == NULL || dir == NULL) {
        free(tf);
        free(dir);
        return TG_ERR_NOMEM;
    }
    snprintf(dir, n, "%s/%s", ledger_dir, TG_TLF_DIR);
    tf->dir = dir;
    tf->dirfd = tf->cpfd = -1;
    for (size_t f = 0; f < FILES; f++) {
        atomic_init(&tf->fd[f], -1);
    }
    if (pthread_rwlock_init(&tf->recent_mu, NULL) != 0) {
        free(dir);
        free(tf);
        return TG_ERR_NOMEM;
    }
    *out = tf;
    return TG_OK;
}

static int fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int r = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

tg_err_t tg_tlog_file_open(tg_tlog_file_t *tf, tg_diag_t *diag) {
    if (tf->opened) {
        return TG_OK;
    }
    if (mkdir(tf->dir, 0700) == 0) {
        char parent[4096];
        if (tg_path_parent(parent, sizeof parent, tf->dir) != TG_OK || fsync_dir(parent) != 0) {
            return tg_diag_set(diag, TG_ERR_IO, "%s: cannot sync its new directory entry: %s",
                               tf->dir, strerror(errno));
        }
    } else if (errno != EEXIST) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot create: %s", tf->dir, strerror(errno));
    }
    tf->dirfd = open(tf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (tf->dirfd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot open as a directory: %s", tf->dir,
                           strerror(errno));
    }
    /* The derived files of the last run go: the replay writes them again, and a stale
     * value past what it writes must never be read as a stored hash. */
    for (size_t f = 0; f < FILES; f++) {
        char name[16];
        file_name(name, f);
        if (unlinkat(tf->dirfd, name, 0) != 0 && errno != ENOENT) {
            return tg_diag_set(diag, TG_ERR_IO, "%s/%s: cannot remove: %s", tf->dir, name,
                               strerror(errno));
        }
    }
    bool created = false;
    tf->cpfd = openat(tf->dirfd, "checkpoint", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (tf->cpfd < 0 && errno == ENOENT) {
        tf->cpfd = openat(tf->dirfd, "checkpoint", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        created = true;
    }
    struct stat st;
    if (tf->cpfd < 0 || fstat(tf->cpfd, &st) != 0 || !S_ISREG(st.st_mode)) {
        return tg_diag_set(diag, TG_ERR_IO, "%s/checkpoint: cannot open a regular file: %s",
                           tf->dir, tf->cpfd < 0 ? strerror(errno) : "not a regular file");
    }
    if (created && fsync(tf->dirfd) != 0) {
        return tg_diag_set(diag, TG_ERR_IO, "%s: cannot sync the new checkpoint file's entry: %s",
                           tf->dir, strerror(errno));
    }
    tf->opened = true;
    return TG_OK;
}

/* The descriptor of file f, created on first use (writer side only). */
static int writer_fd(tg_tlog_file_t *tf, size_t f) {
    int fd = atomic_load(&tf->fd[f]);
    if (fd >= 0) {
        return fd;
    }
    char name[16];
    file_name(name, f);
    fd = openat(tf->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        atomic_store(&tf->fd[f], fd);
    }
    return fd;
}

static tg_err_t run_flush(tg_tlog_file_t *tf, size_t f) {
    run_t *r = tf->runs[f];
    if (r == NULL || r->n == 0) {
        return TG_OK;
    }
    int fd = writer_fd(tf, f);
    if (fd < 0 || tg_pwrite_all(fd, r->v, r->n * 32, r->first * 32) != 0) {
        return TG_ERR_IO;
    }
    r->n = 0;
    return TG_OK;
}

/* Appends value v at index to file f's run; a gap or a full run writes it first. */
static tg_err_t run_put(tg_tlog_file_t *tf, size_t f, uint64_t index, const uint8_t v[32]) {
    if (index > UINT64_MAX / 32 - 1) {
        return TG_ERR_LIMIT;
    }
    run_t *r = tf->runs[f];
    if (r == NULL) {
        r = tf->runs[f] = calloc(1, sizeof *r);
        if (r == NULL) {
            return TG_ERR_NOMEM;
        }
    }
    if (r->n > 0 && (r->n == RUN_MAX || index != r->first + r->n)) {
        tg_err_t rc = run_flush(tf, f);
        if (rc != TG_OK) {
            return rc;
        }
    }
    if (r->n == 0) {
        r->first = index;
    }
    memcpy(r->v[r->n++], v, 32);
    return TG_OK;
}

tg_err_t tg_tlog_file_put_entry(tg_tlog_file_t *tf, uint64_t leaf, const uint8_t entry[32]) {
    return run_put(tf, 0, leaf, entry);
}

/* Caller holds recent_mu for writing. Hashes come in index order per level; a gap (the
 * first store after a restore from a range) starts the window anew. An allocation failure
 * only leaves the level to pread. */
static void recent_put(tg_tlog_file_t *tf, unsigned level, uint64_t index, const uint8_t h[32]) {
    recent_t *r = tf->recent[level];
    if (r == NULL) {
        r = tf->recent[level] = malloc(sizeof *r);
        if (r == NULL) {
            return;
        }
        r->lo = r->end = index;
    }
    if (index != r->end) {
        if (index >= r->lo && index < r->end) {
            memcpy(r->v[index % RECENT], h, 32); /* the same hash again: harmless */
            return;
        }
        r->lo = r->end = index;
    }
    memcpy(r->v[index % RECENT], h, 32);
    r->end = index + 1;
    if (r->end - r->lo > RECENT) {
        r->lo = r->end - RECENT;
    }
}

static tg_err_t store_locked(tg_tlog_file_t *tf, unsigned level, uint64_t index,
                             const uint8_t h[32]) {
    if (level >= LEVELS) {
        return TG_ERR_LIMIT;
    }
    tg_err_t rc = run_put(tf, 1 + level, index, h);
    if (rc == TG_OK) {
        recent_put(tf, level, index, h);
    }
    return rc;
}

tg_err_t tg_tlog_file_store(void *ctx, unsigned level, uint64_t index, const tg_tlog_hash_t *h) {
    tg_tlog_file_t *tf = ctx;
    pthread_rwlock_wrlock(&tf->recent_mu);
    tg_err_t rc = store_locked(tf, level, index, h->h);
    pthread_rwlock_unlock(&tf->recent_mu);
    return rc;
}

tg_err_t tg_tlog_file_flush(tg_tlog_file_t *tf) {
    for (size_t f = 0; f < FILES; f++) {
        tg_err_t rc = run_flush(tf, f);
        if (rc != TG_OK) {
            return rc;
        }
    }
    return TG_OK;
}

/* ---- the checkpoint slots ---- */

typedef enum { SLOT_EMPTY, SLOT_DAMAGED, SLOT_VALID } slot_state_t;

typedef struct slot {
    slot_state_t state;
    uint64_t gen;
    uint64_t size; /* the checkpoint's */
    size_t len;
    const char *note;
} slot_t;

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* Reads slot i of raw (read_len bytes of the file; a short file has empty slots). */
static slot_t slot_parse(const uint8_t *raw, size_t read_len, size_t i) {
    slot_t s = {SLOT_EMPTY, 0, 0, 0, NULL};
    if (read_len < (i + 1) * TG_TLF_SLOT) {
        if (read_len > i * TG_TLF_SLOT &&
            !all_zero(raw + i * TG_TLF_SLOT, read_len - i * TG_TLF_SLOT)) {
            s.state = SLOT_DAMAGED;
        }
        return s;
    }
    const uint8_t *p = raw + i * TG_TLF_SLOT;
    if (all_zero(p, TG_TLF_SLOT)) {
        return s;
    }
    s.state = SLOT_DAMAGED;
    uint8_t sum[32];
    tg_sha256(sum, p, SLOT_SUM_OFF);
    uint32_t len =
        (uint32_t)p[16] | (uint32_t)p[17] << 8 | (uint32_t)p[18] << 16 | (uint32_t)p[19] << 24;
    s.gen = get_u64(p + 8);
    if (memcmp(p, MAGIC, 8) != 0 || sodium_memcmp(sum, p + SLOT_SUM_OFF, 32) != 0 || len == 0 ||
        len > SLOT_SUM_OFF - SLOT_NOTE_OFF || len >= TG_TLE_NOTE_MAX || s.gen == 0 ||
        s.gen % 2 != i) {
        return s;
    }
    /* The size, from the note's text (its signature is checked by the engine's adopt). */
    const char *note = (const char *)p + SLOT_NOTE_OFF;
    size_t text_len = 0;
    for (size_t k = len; k >= 2; k--) {
        if (note[k - 1] == '\n' && note[k - 2] == '\n') {
            text_len = k - 1;
            break;
        }
    }
    tg_checkpoint_t cp;
    if (text_len == 0 || tg_checkpoint_parse(&cp, note, text_len) != TG_OK) {
        return s;
    }
    s.state = SLOT_VALID;
    s.size = cp.size;
    s.len = len;
    s.note = note;
    return s;
}

tg_err_t tg_tlog_file_load(tg_tlog_file_t *tf, char *note, size_t cap, size_t *len, bool *found,
                           tg_diag_t *diag) {
    *found = false;
    *len = 0;
    uint8_t raw[2 * TG_TLF_SLOT];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = pread(tf->cpfd, raw + got, sizeof raw - got, (off_t)got);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            return tg_diag_set(diag, TG_ERR_IO, "%s/checkpoint: %s", tf->dir, strerror(errno));
        }
        if (k == 0) {
            break;
        }
        got += (size_t)k;
    }
    slot_t s[2] = {slot_parse(raw, got, 0), slot_parse(raw, got, 1)};
    int best = -1;
    for (int i = 0; i < 2; i++) {
        if (s[i].state == SLOT_VALID && (best < 0 || s[i].size > s[best].size ||
                                         (s[i].size == s[best].size && s[i].gen > s[best].gen))) {
            best = i;
        }
    }
    if (best < 0) {
        if (s[0].state == SLOT_DAMAGED && s[1].state == SLOT_DAMAGED) {
            return tg_diag_set(diag, TG_ERR_LOG_INCONSISTENT,
                               "%s/checkpoint: both slots are damaged, so the log's newest "
                               "checkpoint is unknown; restore the file, or move it away to "
                               "start the log's checkpoints anew from the ledger",
                               tf->dir);
        }
        /* Empty, or one slot torn by a crash while the first checkpoint was written (it
         * was never published: publication follows the sync). */
        tf->gen = 0;
        return TG_OK;
    }
    if (s[best].len >= cap) {
        return tg_diag_set(diag, TG_ERR_BUFFER_TOO_SMALL, "%s/checkpoint: note too long", tf->dir);
    }
    memcpy(note, s[best].note, s[best].len);
    note[s[best].len] = '\0';
    *len = s[best].len;
    *found = true;
    tf->gen = s[best].gen;
    return TG_OK;
}

/* ---- the engine's backend ---- */

tg_err_t tg_tlog_file_commit(void *ctx, const tg_tle_step_t *step) {
    tg_tlog_file_t *tf = ctx;
    uint64_t n = step->new_size - step->old_size;
    if (n > 0) {
        int fd = writer_fd(tf, 0);
        if (n > SIZE_MAX / 32 || fd < 0 ||
            tg_pwrite_all(fd, step->entries, (size_t)n * 32, step->old_size * 32) != 0) {
            return TG_ERR_IO;
        }
    }
    tg_err_t rc = TG_OK;
    pthread_rwlock_wrlock(&tf->recent_mu); /* once per step, not per hash */
    for (size_t i = 0; i < step->n_hashes && rc == TG_OK; i++) {
        const tg_tle_hash_t *h = &step->hashes[i];
        rc = store_locked(tf, h->level, h->index, h->hash.h);
    }
    pthread_rwlock_unlock(&tf->recent_mu);
    if (rc == TG_OK) {
        rc = tg_tlog_file_flush(tf);
    }
    if (rc != TG_OK) {
        return rc;
    }
    /* The checkpoint last; its one sync is tg_tlog_file_sync, which the engine calls after
     * publishing (tlog_engine.h says why that order is safe). The hashes need none: a
     * start rebuilds them. */
    if (step->note_len == 0 || step->note_len > SLOT_SUM_OFF - SLOT_NOTE_OFF) {
        return TG_ERR_INVALID_ARG;
    }
    uint8_t slot[TG_TLF_SLOT];
    memset(slot, 0, sizeof slot);
    uint64_t gen = tf->gen + 1;
    memcpy(slot, MAGIC, 8);
    put_u64(slot + 8, gen);
    uint32_t len = (uint32_t)step->note_len;
    for (int i = 0; i < 4; i++) {
        slot[16 + i] = (uint8_t)(len >> (8 * i));
    }
    memcpy(slot + SLOT_NOTE_OFF, step->note, step->note_len);
    tg_sha256(slot + SLOT_SUM_OFF, slot, SLOT_SUM_OFF);
    if (tg_pwrite_all(tf->cpfd, slot, sizeof slot, (gen % 2) * TG_TLF_SLOT) != 0) {
        return TG_ERR_IO;
    }
    tf->gen = gen;
    return TG_OK;
}

tg_err_t tg_tlog_file_sync(void *ctx) {
    tg_tlog_file_t *tf = ctx;
    return fdatasync(tf->cpfd) == 0 ? TG_OK : TG_ERR_IO;
}

tg_err_t tg_tlog_file_hashes(tg_tlog_file_t *tf, unsigned level, uint64_t index, size_t n,
                             uint8_t (*out)[32]) {
    if (level >= LEVELS) {
        return TG_ERR_INVALID_ARG;
    }
    if (n == 0) {
        return TG_OK;
    }
    bool hit = false;
    pthread_rwlock_rdlock(&tf->recent_mu);
    const recent_t *r = tf->recent[level];
    if (r != NULL && index >= r->lo && index <= r->end && n <= r->end - index) {
        for (size_t i = 0; i < n; i++) {
            memcpy(out[i], r->v[(index + i) % RECENT], 32);
        }
        hit = true;
    }
    pthread_rwlock_unlock(&tf->recent_mu);
    if (hit) {
        return TG_OK;
    }
    int fd = atomic_load(&tf->fd[1 + level]);
    if (fd < 0 || tg_pread_all(fd, out, n * 32, index * 32) != 0) {
        return TG_ERR_IO;
    }
    return TG_OK;
}

tg_err_t tg_tlog_file_entries(tg_tlog_file_t *tf, uint64_t index, size_t n, uint8_t (*out)[32]) {
    int fd = atomic_load(&tf->fd[0]);
    if (n == 0) {
        return TG_OK;
    }
    if (fd < 0 || tg_pread_all(fd, out, n * 32, index * 32) != 0) {
        return TG_ERR_IO;
    }
    return TG_OK;
}

tg_err_t tg_tlog_file_read(void *ctx, unsigned level, uint64_t index, tg_tlog_hash_t *out) {
    return tg_tlog_file_hashes(ctx, level, index, 1, (uint8_t(*)[32])out->h);
}

void tg_tlog_file_free(tg_tlog_file_t *tf) {
    if (tf == NULL) {
        return;
    }
    for (size_t f = 0; f < FILES; f++) {
        int fd = atomic_load(&tf->fd[f]);
        if (fd >= 0) {
            close(fd);
        }
        free(tf->runs[f]);
    }
    for (size_t l = 0; l < LEVELS; l++) {
        free(tf->recent[l]);
    }
    pthread_rwlock_destroy(&tf->recent_mu);
    if (tf->cpfd >= 0) {
        close(tf->cpfd);
    }
    if (tf->dirfd >= 0) {
        close(tf->dirfd);
    }
    free(tf->dir);
    free(tf);
}

/* ---- offline: the stored checkpoint, read-only (db.h) ---- */

tg_err_t tg_db_log_stored_checkpoint(const char *ledger_dir, char *note, size_t cap, size_t *len,
                                     bool *found, tg_diag_t *diag) {
    tg_tlog_file_t *tf = NULL;
    *found = false;
    *len = 0;
    tg_err_t rc = tg_tlog_file_new(&tf, ledger_dir);
    if (rc != TG_OK) {
        return tg_diag_set(diag, rc, "%s: %s", ledger_dir, tg_strerror(rc));
    }
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/checkpoint", tf->dir);
    if (n < 0 || (size_t)n >= sizeof path) {
        tg_tlog_file_free(tf);
        return tg_diag_set(diag, TG_ERR_IO, "%s: path too long", ledger_dir);
    }
    /* read-only, and never through a symlink: what open() refuses for the writer */
    tf->cpfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (tf->cpfd < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        tg_tlog_file_free(tf);
        return TG_OK;
    }
    struct stat st;
    if (tf->cpfd < 0 || fstat(tf->cpfd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = tg_diag_set(diag, TG_ERR_IO, "%s: cannot open a regular file: %s", path,
                         tf->cpfd < 0 ? strerror(errno) : "not a regular file");
        tg_tlog_file_free(tf);
        return rc;
    }
    rc = tg_tlog_file_load(tf, note, cap, len, found, diag);
    tg_tlog_file_free(tf);
    return rc;
}
