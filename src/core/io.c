/* io.c — file-descriptor helpers (see io.h). */
#include "trigguard/io.h"

#include <errno.h>
#include <fcntl.h>
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

tg_err_t tg_open_regular(int *fd_out, const char *path, const char *label, tg_diag_t *diag) {
    struct stat st;
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tg_diag_set(diag, e == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "cannot open %s: %s",
                           label, strerror(e));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tg_diag_set(diag, TG_ERR_IO, "%s is not a readable regular file", label);
    }
    *fd_out = fd;
    return TG_OK;
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
