/* dataset.c — the files of a bundle's named data sets (docs/POLICY.md "Data sets"): where
 * they may be, how they are read, how a text file splits into values. The compiler
 * (policy.c) turns the values into the kernel's sorted sets. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy_internal.h"
#include "trigguard/canon.h"

int tg_dataset_path_ok(const char *rel, size_t n) {
    if (n == 0 || n > TG_POLICY_MAX_NAME || rel[0] == '/') {
        return 0;
    }
    size_t seg = 0; /* start of the current component */
    for (size_t i = 0; i <= n; i++) {
        if (i == n || rel[i] == '/') {
            size_t len = i - seg;
            if (len == 0 || (len == 1 && rel[seg] == '.') ||
                (len == 2 && rel[seg] == '.' && rel[seg + 1] == '.')) {
                return 0; /* empty, "." and ".." components: no way around base_dir */
            }
            seg = i + 1;
            continue;
        }
        unsigned char ch = (unsigned char)rel[i];
        if (ch < 0x20 || ch == 0x7f || ch == '\\') {
            return 0;
        }
    }
    return 1;
}

tg_err_t tg_dataset_read(tg_file_t *out, uint8_t sha256[32], const char *base_dir, const char *rel,
                         tg_diag_t *diag) {
    memset(out, 0, sizeof *out);
    if (!tg_dataset_path_ok(rel, strlen(rel))) {
        return tg_diag_set(diag, TG_ERR_POLICY_INVALID,
                           "data set file must be a relative path without \".\" or \"..\" "
                           "components");
    }
    int dfd = open(base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return tg_diag_set(diag, TG_ERR_IO, "cannot open the bundle's directory");
    }
    /* O_NOFOLLOW: the set file itself may not be a symbolic link (it could point anywhere);
     * O_NONBLOCK: a FIFO does not block the load before fstat refuses it. */
    int fd = openat(dfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int err = errno;
    close(dfd);
    if (fd < 0) {
        return tg_diag_set(diag, err == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO,
                           "data set file %s: %s", rel,
                           err == ENOENT  ? "no such file"
                           : err == ELOOP ? "is a symbolic link"
                                          : "cannot open");
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tg_diag_set(diag, TG_ERR_IO, "data set file %s: not a regular file", rel);
    }
    tg_err_t rc = tg_read_fd(out, fd, TG_POLICY_MAX_SET_BYTES, rel, 0, diag);
    close(fd);
    if (rc == TG_ERR_LIMIT) {
        return tg_diag_set(diag, TG_ERR_LIMIT, "data set file %s: larger than %zu bytes", rel,
                           TG_POLICY_MAX_SET_BYTES);
    }
    if (rc == TG_OK) {
        tg_sha256(sha256, out->data, out->len);
    }
    return rc;
}

/* Length of the UTF-8 sequence at s (n bytes left), 0 when invalid (overlong forms,
 * surrogates and code points above U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) {
        return 1;
    }
    size_t k = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (k == 0 || k > n) {
        return 0;
    }
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f)) {
        return 0;
    }
    return k;
}

tg_err_t tg_dataset_lines(tg_sv_t **out, size_t *n_out, const char *data, size_t len,
                          tg_diag_t *diag) {
    *out = NULL;
    *n_out = 0;
    size_t n = 0, cap = 0, line = 1;
    tg_sv_t *v = NULL;
    size_t start = 0;
    for (size_t i = 0; i <= len; line++) {
        size_t end = i;
        while (end < len && data[end] != '\n') {
            unsigned char ch = (unsigned char)data[end];
            size_t k = utf8_len((const unsigned char *)data + end, len - end);
            if (ch < 0x20 || ch == 0x7f || k == 0) {
                free(v);
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "line %zu: %s", line,
                                   k == 0 ? "invalid UTF-8" : "a control character");
            }
            end += k;
        }
        start = i;
        if (end > start) { /* empty lines are ignored (a trailing newline makes one) */
            if (end - start > TG_POLICY_MAX_VALUE) {
                free(v);
                return tg_diag_set(diag, TG_ERR_POLICY_INVALID, "line %zu: longer than %d bytes",
                                   line, TG_POLICY_MAX_VALUE);
            }
            if (n == TG_POLICY_MAX_SET_VALUES) {
                free(v);
                return tg_diag_set(diag, TG_ERR_LIMIT, "more than %d values",
                                   TG_POLICY_MAX_SET_VALUES);
            }
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                tg_sv_t *nv = realloc(v, nc * sizeof *nv);
                if (nv == NULL) {
                    free(v);
                    return tg_diag_set(diag, TG_ERR_NOMEM, "out of memory reading a data set");
                }
                v = nv;
                cap = nc;
            }
            v[n].ptr = data + start;
            v[n].len = (uint32_t)(end - start);
            n++;
        }
        i = end + 1;
    }
    *out = v;
    *n_out = n;
    return TG_OK;
}
