/* io.c — file-descriptor helpers (see io.h). */
#include "trigguard/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

tg_err_t tg_write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            if (w == 0) {
                errno = EIO; /* a regular write never returns 0 for n > 0; do not spin */
            }
            return TG_ERR_IO;
        }
        p += w;
        n -= (size_t)w;
    }
    return TG_OK;
}

tg_err_t tg_pwrite_all(int fd, const void *data, size_t n, uint64_t off) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            if (w == 0) {
                errno = EIO; /* no progress and no reason: never spin */
            }
            return TG_ERR_IO;
        }
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return TG_OK;
}

tg_err_t tg_pread_all(int fd, void *out, size_t n, uint64_t off) {
    char *p = out;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            if (r == 0) {
                errno = EIO; /* the file ends before what it should hold */
            }
            return TG_ERR_IO;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return TG_OK;
}

/* tg_open_regular, also handing back what fstat said of the file (tg_read_file sizes its
 * buffer from it, and a key file's mode is checked on the descriptor that was read). */
static tg_err_t open_regular(int *fd_out, struct stat *st, const char *path, const char *label,
                             tg_diag_t *diag) {
    *fd_out = -1;
    memset(st, 0, sizeof *st); /* the analyzer does not know fstat fills it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tg_diag_set(diag, e == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "cannot open %s: %s",
                           label, strerror(e));
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return tg_diag_set(diag, TG_ERR_IO, "%s is not a readable regular file", label);
    }
    *fd_out = fd;
    return TG_OK;
}

tg_err_t tg_open_regular(int *fd_out, const char *path, const char *label, tg_diag_t *diag) {
    struct stat st;
    return open_regular(fd_out, &st, path, label, diag);
}

/* Bytes of the first buffer when the file's size says nothing (a pipe, a /proc file): most
 * such input is small, and doubling from here reaches a 1 MiB cap in nine steps. */
#define READ_FIRST_CHUNK ((size_t)4096)

static void wipe_free(char *p, size_t n, bool secret) {
    if (p != NULL && secret) {
        explicit_bzero(p, n);
    }
    free(p);
}

/* A buffer of n bytes with the first len of old in it; old is gone either way (wiped when
 * secret, for realloc would leave the old copy of a key behind in freed memory). */
static char *grow(char *old, size_t old_cap, size_t len, size_t n, bool secret) {
    if (!secret) {
        char *p = realloc(old, n);
        if (p == NULL) {
            free(old);
        }
        return p;
    }
    char *p = malloc(n);
    if (p != NULL) {
        memcpy(p, old, len);
    }
    wipe_free(old, old_cap, true);
    return p;
}

/* Reads fd to its end into a buffer of at most cap + 1 data bytes: the one byte over cap is
 * how a file that is too long is told from one exactly cap long without reading it all. */
static tg_err_t read_to_end(tg_file_t *out, int fd, const struct stat *st, size_t cap,
                            const char *label, bool secret, tg_diag_t *diag) {
    size_t hint = st->st_size > 0 ? (size_t)st->st_size : READ_FIRST_CHUNK;
    size_t dcap = (hint < cap ? hint : cap) + 1; /* data bytes the buffer holds */
    size_t len = 0;
    char *buf = malloc(dcap + 1); /* and the NUL */
    if (buf == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory reading %s", label);
    }
    for (;;) {
        if (len == dcap) {
            if (dcap > cap) {
                wipe_free(buf, dcap + 1, secret);
                return tg_diag_set(diag, TG_ERR_LIMIT, "%s is larger than %zu bytes", label, cap);
            }
            size_t ndcap = dcap <= cap / 2 ? dcap * 2 : cap + 1;
            buf = grow(buf, dcap + 1, len, ndcap + 1, secret);
            dcap = ndcap;
            if (buf == NULL) {
                return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory reading %s", label);
            }
        }
        ssize_t got = read(fd, buf + len, dcap - len);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            int e = errno;
            wipe_free(buf, dcap + 1, secret);
            return tg_diag_set(diag, TG_ERR_IO, "cannot read %s: %s", label, strerror(e));
        }
        if (got == 0) {
            break;
        }
        len += (size_t)got;
    }
    buf[len] = '\0';
    out->data = buf;
    out->len = len;
    out->mode = (unsigned)st->st_mode;
    out->secret = secret;
    return TG_OK;
}

tg_err_t tg_read_fd(tg_file_t *out, int fd, size_t cap, const char *label, unsigned flags,
                    tg_diag_t *diag) {
    struct stat st = {0};
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    if (out == NULL || label == NULL || cap > TG_READ_CAP_MAX) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "tg_read_fd: NULL argument or cap too large");
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return tg_diag_set(diag, TG_ERR_IO, "cannot read %s: %s", label, strerror(e));
    }
    return read_to_end(out, fd, &st, cap, label, (flags & TG_READ_SECRET) != 0, diag);
}

tg_err_t tg_read_file(tg_file_t *out, const char *path, size_t cap, const char *label,
                      unsigned flags, tg_diag_t *diag) {
    struct stat st;
    int fd = -1;
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    if (out == NULL || path == NULL || label == NULL || cap > TG_READ_CAP_MAX) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG,
                           "tg_read_file: NULL argument or cap too large");
    }
    tg_err_t rc = open_regular(&fd, &st, path, label, diag);
    if (rc == TG_OK) {
        rc = read_to_end(out, fd, &st, cap, label, (flags & TG_READ_SECRET) != 0, diag);
        (void)close(fd);
    }
    return rc;
}

void tg_file_free(tg_file_t *f) {
    if (f == NULL) {
        return;
    }
    wipe_free(f->data, f->len, f->secret);
    memset(f, 0, sizeof *f);
}

tg_err_t tg_path_parent(char *out, size_t cap, const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') {
        n--;
    }
    while (n > 0 && path[n - 1] != '/') {
        n--;
    }
    while (n > 1 && path[n - 1] == '/') {
        n--;
    }
    const char *src = n == 0 ? "." : path;
    size_t len = n == 0 ? 1 : n;
    if (cap == 0 || len >= cap) {
        if (cap > 0) {
            out[0] = '\0';
        }
        return TG_ERR_LIMIT;
    }
    memcpy(out, src, len);
    out[len] = '\0';
    return TG_OK;
}

/* "MemTotal:  24535716 kB" anywhere in meminfo; a number alone (not "max") in memory.max. */
uint64_t tg_memory_parse(const char *meminfo, const char *cgroup_max) {
    uint64_t total = 0;
    const char *m = meminfo != NULL ? strstr(meminfo, "MemTotal:") : NULL;
    if (m != NULL) {
        m += strlen("MemTotal:");
        while (*m == ' ' || *m == '\t') {
            m++;
        }
        char *end = NULL;
        errno = 0;
        unsigned long long kb = strtoull(m, &end, 10);
        if (errno == 0 && end != m && strncmp(end, " kB", 3) == 0 && kb < UINT64_MAX / 1024) {
            total = (uint64_t)kb * 1024;
        }
    }
    if (cgroup_max != NULL && *cgroup_max >= '0' && *cgroup_max <= '9') {
        char *end = NULL;
        errno = 0;
        unsigned long long lim = strtoull(cgroup_max, &end, 10);
        if (errno == 0 && (*end == '\n' || *end == '\0') && lim > 0 &&
            (total == 0 || lim < total)) {
            total = (uint64_t)lim;
        }
    }
    return total;
}

/* Reads at most cap-1 bytes of a small system file; "" when it cannot be read. */
static void read_small(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
    }
    out[n] = '\0';
    (void)close(fd);
}

uint64_t tg_memory_available(void) {
    char meminfo[4096]; /* MemTotal is the first line */
    char cg[64];
    read_small("/proc/meminfo", meminfo, sizeof meminfo);
    read_small("/sys/fs/cgroup/memory.max", cg, sizeof cg);
    return tg_memory_parse(meminfo[0] != '\0' ? meminfo : NULL, cg[0] != '\0' ? cg : NULL);
}
