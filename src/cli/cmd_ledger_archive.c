/* cmd_ledger_archive.c — `trigguard ledger archive DIR --before TIME --to DEST --key KEY`:
 * moves old sealed segments to an archive directory and anchors what stays (issue 24;
 * anchor.h owns the anchor, docs/LEDGER.md "Archive and prune" gives the order of steps and
 * why each crash point leaves a valid ledger). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "trigguard/anchor.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/keys.h"
#include "trigguard/ledger.h"

#define CMD "trigguard ledger archive"
#define COPY_CHUNK 65536

/* What the archive needs to know of each segment that holds records. */
typedef struct seg_info {
    uint32_t segment;
    uint64_t first_seq, last_seq;
    uint8_t last_hash[TG_LEDGER_HASH_SIZE];
    int64_t newest_ms; /* the largest meta "at" of its records */
    bool undated;      /* a record without a meta "at": never archived (its age is unknown) */
} seg_info_t;

typedef struct seg_list {
    seg_info_t *v;
    size_t n, cap;
} seg_list_t;

/* The record's decision time: meta "at" (record.h), ms since the epoch. */
static bool record_at(const tg_ledger_record_t *rec, int64_t *at) {
    if (rec->meta_len == 0) {
        return false;
    }
    json_t *m = json_loadb((const char *)rec->meta, rec->meta_len, JSON_REJECT_DUPLICATES, NULL);
    json_t *v = json_is_object(m) ? json_object_get(m, "at") : NULL;
    bool ok = json_is_integer(v);
    if (ok) {
        *at = (int64_t)json_integer_value(v);
    }
    json_decref(m);
    return ok;
}

static tg_err_t collect(void *ud, const tg_ledger_record_t *rec, tg_diag_t *diag) {
    seg_list_t *l = ud;
    if (l->n == 0 || l->v[l->n - 1].segment != rec->pos.segment) {
        if (l->n == l->cap) {
            size_t ncap = l->cap ? l->cap * 2 : 64;
            seg_info_t *nv = realloc(l->v, ncap * sizeof *nv);
            if (nv == NULL) {
                return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory");
            }
            l->v = nv;
            l->cap = ncap;
        }
        seg_info_t *s = &l->v[l->n++];
        memset(s, 0, sizeof *s);
        s->segment = rec->pos.segment;
        s->first_seq = rec->seq;
        s->newest_ms = INT64_MIN;
    }
    seg_info_t *s = &l->v[l->n - 1];
    s->last_seq = rec->seq;
    memcpy(s->last_hash, rec->hash, sizeof s->last_hash);
    int64_t at = 0;
    if (!record_at(rec, &at)) {
        s->undated = true;
    } else if (at > s->newest_ms) {
        s->newest_ms = at;
    }
    return TG_OK;
}

/* Anchors the archive relies on are checked with the signing key when they name it; an
 * anchor made with an earlier key is left to `ledger verify --keys`. */
static tg_err_t check_own_anchor(void *ud, const struct tg_anchor *a, const char *file,
                                 tg_diag_t *diag) {
    const tg_key_t *key = ud;
    if (strcmp(a->key_id, key->key_id) != 0) {
        return TG_OK;
    }
    if (tg_anchor_verify(a, key->pk) != TG_OK) {
        return tg_diag_set(diag, TG_ERR_CRYPTO, "%s: signature does not verify with key %s", file,
                           key->key_id);
    }
    return TG_OK;
}

/* Takes dir's ledger.lock (created if missing), as the daemon does: -1 when it is held. */
static int lock_dir(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/ledger.lock", dir) >= (int)sizeof path) {
        fprintf(stderr, CMD ": %s: path too long\n", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) {
        fprintf(stderr, CMD ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr,
                CMD ": %s: the ledger is locked by another process (a running daemon?): stop "
                    "it first\n",
                dir);
        close(fd);
        return -1;
    }
    return fd;
}

/* The highest segment number among dirfd's ledger-*.tgl files (0: none); -1 on error. */
static int64_t highest_segment(int dirfd) {
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    int64_t hi = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 12 || strncmp(e->d_name, "ledger-", 7) != 0 ||
            strcmp(e->d_name + len - 4, ".tgl") != 0) {
            continue;
        }
        int64_t v = 0;
        for (size_t i = 7; i < len - 4 && v <= UINT32_MAX; i++) {
            v = e->d_name[i] >= '0' && e->d_name[i] <= '9' ? v * 10 + (e->d_name[i] - '0')
                                                           : INT64_MAX / 16;
        }
        if (v > hi) {
            hi = v;
        }
    }
    closedir(d);
    return hi;
}

/* Copies segment `name` from sfd's directory to dfd's: name.tmp, fsync, rename. The
 * directory itself is fsynced by the caller once every segment is in place. */
static bool copy_segment(int sfd, int dfd, const char *name, const char *dest) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int in = openat(sfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = in >= 0 && out >= 0;
    static uint8_t buf[COPY_CHUNK];
    uint64_t copied = 0;
    while (ok) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r == 0) {
            break;
        }
        ok = r > 0 && write(out, buf, (size_t)r) == r;
        copied += ok ? (uint64_t)r : 0;
    }
    struct stat st;
    ok = ok && fstat(in, &st) == 0 && (uint64_t)st.st_size == copied && fsync(out) == 0;
    int saved = errno;
    if (in >= 0) {
        close(in);
    }
    if (out >= 0 && close(out) != 0) {
        ok = false;
    }
    if (ok && renameat(dfd, tmp, dfd, name) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        fprintf(stderr, CMD ": cannot copy %s to %s: %s\n", name, dest, strerror(saved));
    }
    return ok;
}

/* Byte comparison of a leftover segment with the archive's copy. */
static bool same_file(int adir, int bdir, const char *name) {
    int a = openat(adir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int b = openat(bdir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    bool same = a >= 0 && b >= 0;
    static uint8_t ba[COPY_CHUNK], bb[COPY_CHUNK];
    while (same) {
        ssize_t ra = read(a, ba, sizeof ba), rb = read(b, bb, sizeof bb);
        if (ra != rb || ra < 0) {
            same = false;
        } else if (ra == 0) {
            break;
        } else {
            same = memcmp(ba, bb, (size_t)ra) == 0;
        }
    }
    if (a >= 0) {
        close(a);
    }
    if (b >= 0) {
        close(b);
    }
    return same;
}

/* An archive run interrupted while removing segments leaves them below the anchor (open and
 * verify ignore them). They are removed now, once each is found byte for byte in DEST. */
static bool remove_leftovers(int sfd, int dfd, const char *dir, const char *dest) {
    tg_anchor_t a;
    bool found = false;
    tg_diag_t diag = {{0}};
    if (tg_anchor_read(&a, &found, sfd, dir, TG_ANCHOR_NAME, &diag) != TG_OK) {
        fprintf(stderr, CMD ": %s\n", diag.msg);
        return false;
    }
    if (!found) {
        return true;
    }
    unsigned removed = 0;
    for (uint32_t s = a.archived_first_segment; s < a.first_segment; s++) {
        char name[32];
        if (tg_ledger_segment_name(name, sizeof name, s) != TG_OK) {
            return false;
        }
        struct stat st;
        if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            continue;
        }
        if (!same_file(sfd, dfd, name)) {
            fprintf(stderr,
                    CMD ": %s/%s is below the anchor (left by an interrupted archive) but %s "
                        "holds no identical copy: move it away yourself after checking\n",
                    dir, name, dest);
            return false;
        }
        if (unlinkat(sfd, name, 0) != 0) {
            fprintf(stderr, CMD ": %s/%s: %s\n", dir, name, strerror(errno));
            return false;
        }
        removed++;
    }
    if (removed > 0) {
        if (fsync(sfd) != 0) {
            fprintf(stderr, CMD ": %s: fsync: %s\n", dir, strerror(errno));
            return false;
        }
        printf("removed %u segment(s) below the anchor, left by an interrupted archive (each "
               "identical in %s)\n",
               removed, dest);
    }
    return true;
}

static void archive_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard ledger archive DIR --before TIME --to DEST --key KEY.pem\n"
            "                                [--retention SECONDS]\n"
            "\n"
            "Moves every sealed segment of the ledger in DIR whose newest record (meta \"at\")\n"
            "is older than TIME (RFC 3339) to the archive directory DEST, oldest first and\n"
            "without gaps, and anchors what stays: DIR/ledger.anchor, signed with KEY (the\n"
            "receipt signing key), records where the remaining chain starts. DEST receives the\n"
            "segments (same numbers), a copy of DIR's previous anchor as its ledger.anchor when\n"
            "it starts past seq 1, and the new anchor as archive.anchor (where it ends). DEST\n"
            "may already hold the previous archive of the same ledger; it then grows.\n"
            "The active (last) segment always stays, and so does at least one record. The daemon\n"
            "must be stopped (DIR's ledger.lock is taken). A ledger with a transparency log\n"
            "(DIR/tlog) is refused: the log's tree needs every record.\n"
            "TIME must lie at least --retention (the daemon's; default 86400) in the past: a\n"
            "pruned record's idempotency key and nonce are forgotten at the next start, so a\n"
            "retry within retention would be decided again. --retention 0 turns the check off.\n"
            "Then: trigguard ledger verify DEST DIR --keys keys.json proves both as one chain.\n"
            "exit status: 0 archived (or nothing old enough), 1 a check failed (nothing removed),\n"
            "2 usage or unusable input\n");
}

int tg_cmd_ledger_archive(int argc, char **argv) {
    const char *dir = NULL, *dest = NULL, *before_s = NULL, *key_path = NULL;
    const char *retention_s = "86400"; /* serve's --retention default */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            archive_usage(stdout);
            return TG_EXIT_OK;
        }
        if (strcmp(a, "--before") == 0 && i + 1 < argc) {
            before_s = argv[++i];
        } else if (strcmp(a, "--to") == 0 && i + 1 < argc) {
            dest = argv[++i];
        } else if (strcmp(a, "--key") == 0 && i + 1 < argc) {
            key_path = argv[++i];
        } else if (strcmp(a, "--retention") == 0 && i + 1 < argc) {
            retention_s = argv[++i];
        } else if (a[0] != '-' && dir == NULL) {
            dir = a;
        } else {
            fprintf(stderr, CMD ": unexpected argument '%s'\n\n", a);
            archive_usage(stderr);
            return TG_EXIT_USAGE;
        }
    }
    if (dir == NULL || dest == NULL || before_s == NULL || key_path == NULL) {
        fprintf(stderr, CMD ": DIR, --before, --to and --key are required\n\n");
        archive_usage(stderr);
        return TG_EXIT_USAGE;
    }
    int64_t before = 0;
    if (tg_time_parse_rfc3339_ms(&before, before_s, strlen(before_s)) != TG_OK) {
        fprintf(stderr, CMD ": --before wants an RFC 3339 time (2026-11-01T00:00:00Z)\n");
        return TG_EXIT_USAGE;
    }
    /* serve's range for --retention (a year at most), and 0 for "checked elsewhere" */
    char *end = NULL;
    errno = 0;
    long long retention = strtoll(retention_s, &end, 10);
    if (errno != 0 || end == retention_s || *end != '\0' || retention < 0 || retention > 31536000) {
        fprintf(stderr, CMD ": --retention wants seconds in 0..31536000\n");
        return TG_EXIT_USAGE;
    }
    /* Fail closed: after a prune the daemon forgets the pruned records' idempotency keys and
     * nonces, so a prune inside retention would let a retried request be decided (and
     * permitted) a second time. */
    if (retention > 0 && before > tg_clock_now_ms() - retention * 1000) {
        fprintf(stderr,
                CMD ": --before %s is within --retention %llds of now: the daemon would forget "
                    "those records' idempotency keys and nonces and could decide a retried request "
                    "again; archive older records (or pass the daemon's --retention)\n",
                before_s, retention);
        return TG_EXIT_USAGE;
    }
    int status = TG_EXIT_USAGE;
    int sfd = -1, dfd = -1, slock = -1, dlock = -1;
    seg_list_t segs = {0};
    tg_key_t key;
    memset(&key, 0, sizeof key);
    tg_diag_t diag = {{0}};
    if (tg_key_load_file(&key, key_path, NULL, &diag) != TG_OK || !key.has_secret) {
        fprintf(stderr, CMD ": %s\n", diag.msg[0] ? diag.msg : "--key: not a private key");
        goto done;
    }
    sfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, CMD ": %s: %s\n", dir, strerror(errno));
        goto done;
    }
    struct stat st;
    if (fstatat(sfd, "tlog", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        fprintf(stderr,
                CMD ": %s holds a transparency log (tlog/): its Merkle tree is rebuilt from every "
                    "record at each start, so pruning would break it; archiving such a ledger is "
                    "not supported (docs/LEDGER.md)\n",
                dir);
        goto done;
    }
    slock = lock_dir(dir);
    if (slock < 0) {
        goto done;
    }
    if (mkdir(dest, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, CMD ": %s: %s\n", dest, strerror(errno));
        goto done;
    }
    dfd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        fprintf(stderr, CMD ": %s: %s\n", dest, strerror(errno));
        goto done;
    }
    dlock = lock_dir(dest);
    if (dlock < 0) {
        goto done;
    }
    struct stat s1, s2;
    if (fstat(sfd, &s1) != 0 || fstat(dfd, &s2) != 0 ||
        (s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino)) {
        fprintf(stderr, CMD ": --to must be another directory than DIR\n");
        goto done;
    }
    if (!remove_leftovers(sfd, dfd, dir, dest)) {
        status = TG_EXIT_FAIL;
        goto done;
    }

    /* 1. The whole live ledger verifies, and each segment's newest record is known. */
    tg_ledger_verify_report_t rep;
    tg_ledger_verify_opts_t vo = {
        .check = collect, .check_ud = &segs, .anchor_check = check_own_anchor, .anchor_ud = &key};
    tg_err_t rc = tg_ledger_verify_path(&rep, dir, &vo, &diag);
    if (rc != TG_OK || rep.end_found) {
        fprintf(stderr, CMD ": %s does not verify (%s); nothing was changed\n", dir,
                rc ? diag.msg : "it is an archive (archive.anchor)");
        status = rc == TG_ERR_NOT_FOUND ? TG_EXIT_USAGE : TG_EXIT_FAIL;
        goto done;
    }
    /* 2. Which segments: sealed, dated, older than TIME, from the first on without a gap;
     * at least one record stays, and the record ledger.head names stays too. */
    size_t m = 0;
    while (m < segs.n && segs.v[m].segment < rep.last_segment && !segs.v[m].undated &&
           segs.v[m].newest_ms < before) {
        m++;
    }
    if (m == segs.n && m > 0) {
        m--;
    }
    while (m > 0 && rep.head_found && rep.head_seq > 0 && rep.head_seq <= segs.v[m - 1].last_seq) {
        m--;
    }
    if (m == 0) {
        printf("nothing to archive: no sealed segment of %s has only records older than %s\n", dir,
               before_s);
        status = TG_EXIT_OK;
        goto done;
    }
    const seg_info_t *firsta = &segs.v[0], *lasta = &segs.v[m - 1];
    int64_t hi = highest_segment(dfd);
    if (hi < 0 || hi > (int64_t)lasta->segment) {
        fprintf(stderr,
                CMD ": %s already holds segments after ledger-%06u.tgl: not an archive "
                    "of this ledger's past\n",
                dest, lasta->segment);
        status = TG_EXIT_FAIL;
        goto done;
    }
    tg_anchor_t old, fresh;
    bool had_anchor = false, dest_anchor = false;
    if (tg_anchor_read(&old, &had_anchor, sfd, dir, TG_ANCHOR_NAME, &diag) != TG_OK) {
        fprintf(stderr, CMD ": %s\n", diag.msg);
        status = TG_EXIT_FAIL;
        goto done;
    }
    if (fstatat(dfd, TG_ANCHOR_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        dest_anchor = true;
    }
    char name[32];
    if (tg_ledger_segment_name(name, sizeof name, firsta->segment - 1) != TG_OK) {
        goto done;
    }
    /* DEST continues its own past (segment K-1 there) or starts with these segments. */
    bool dest_has_past = firsta->segment > 1 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!had_anchor && dest_anchor) {
        fprintf(stderr, CMD ": %s has a ledger.anchor but this archive starts at seq 1\n", dest);
        status = TG_EXIT_FAIL;
        goto done;
    }

    /* 3. Copy (each: temporary name, fsync, rename), then fsync DEST. */
    for (size_t i = 0; i < m; i++) {
        if (tg_ledger_segment_name(name, sizeof name, segs.v[i].segment) != TG_OK ||
            !copy_segment(sfd, dfd, name, dest)) {
            status = TG_EXIT_FAIL;
            goto done;
        }
    }
    if (fsync(dfd) != 0) {
        fprintf(stderr, CMD ": %s: fsync: %s\n", dest, strerror(errno));
        status = TG_EXIT_FAIL;
        goto done;
    }
    /* 4. The new anchor, signed; DEST's anchors: where it starts (DIR's previous anchor,
     * unless DEST continues its own past) and where it ends. */
    memset(&fresh, 0, sizeof fresh);
    fresh.first_segment = lasta->segment + 1;
    fresh.archived_first_segment = firsta->segment;
    fresh.first_seq = lasta->last_seq + 1;
    memcpy(fresh.prev_hash, lasta->last_hash, sizeof fresh.prev_hash);
    fresh.archived_first_seq = firsta->first_seq;
    fresh.created_ms = tg_clock_now_ms();
    snprintf(fresh.key_id, sizeof fresh.key_id, "%s", key.key_id);
    if (tg_anchor_sign(&fresh, key.sk) != TG_OK) {
        fprintf(stderr, CMD ": cannot sign the anchor\n");
        status = TG_EXIT_FAIL;
        goto done;
    }
    if ((had_anchor && !dest_has_past &&
         tg_anchor_write(dfd, dest, TG_ANCHOR_NAME, &old, &diag) != TG_OK) ||
        tg_anchor_write(dfd, dest, TG_ANCHOR_END_NAME, &fresh, &diag) != TG_OK) {
        fprintf(stderr, CMD ": %s\n", diag.msg);
        status = TG_EXIT_FAIL;
        goto done;
    }
    /* 5. DEST verifies on its own, ending exactly where DIR will start. */
    tg_ledger_verify_report_t arep;
    tg_ledger_verify_opts_t ao = {.anchor_check = check_own_anchor, .anchor_ud = &key};
    rc = tg_ledger_verify_path(&arep, dest, &ao, &diag);
    if (rc != TG_OK || !arep.end_found || arep.end_seq != fresh.first_seq) {
        fprintf(stderr, CMD ": the archive %s does not verify (%s); %s was not changed\n", dest,
                rc ? diag.msg : "it does not end where the anchor says", dir);
        status = TG_EXIT_FAIL;
        goto done;
    }
    /* 6. DIR's anchor: from here on the ledger starts at the first kept segment. */
    if (tg_anchor_write(sfd, dir, TG_ANCHOR_NAME, &fresh, &diag) != TG_OK) {
        fprintf(stderr, CMD ": %s\n", diag.msg);
        status = TG_EXIT_FAIL;
        goto done;
    }
    /* 7. Remove the archived segments (a crash here leaves some below the anchor: ignored by
     * the ledger, removed by the next run). */
    for (size_t i = 0; i < m; i++) {
        if (tg_ledger_segment_name(name, sizeof name, segs.v[i].segment) != TG_OK ||
            unlinkat(sfd, name, 0) != 0) {
            fprintf(stderr, CMD ": %s/%s: cannot remove it: %s (the next run removes it)\n", dir,
                    name, strerror(errno));
            status = TG_EXIT_FAIL;
            goto done;
        }
    }
    if (fsync(sfd) != 0) {
        fprintf(stderr, CMD ": %s: fsync: %s\n", dir, strerror(errno));
        status = TG_EXIT_FAIL;
        goto done;
    }
    char hex[2 * TG_LEDGER_HASH_SIZE + 1];
    tg_hex(hex, fresh.prev_hash, sizeof fresh.prev_hash);
    printf("archived: ledger-%06u.tgl .. ledger-%06u.tgl (seq %llu .. %llu) to %s\n",
           firsta->segment, lasta->segment, (unsigned long long)firsta->first_seq,
           (unsigned long long)lasta->last_seq, dest);
    printf("anchor:   %s/%s: starts at ledger-%06u.tgl, seq %llu, prev_hash %s, key %s\n", dir,
           TG_ANCHOR_NAME, fresh.first_segment, (unsigned long long)fresh.first_seq, hex,
           fresh.key_id);
    status = TG_EXIT_OK;
done:
    free(segs.v);
    tg_key_wipe(&key);
    if (dlock >= 0) {
        close(dlock);
    }
    if (slock >= 0) {
        close(slock);
    }
    if (dfd >= 0) {
        close(dfd);
    }
    if (sfd >= 0) {
        close(sfd);
    }
    return status;
}
