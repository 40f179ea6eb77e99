/* io.c — file-descriptor helpers (see io.h). */
#include "trigguard/io.h"

#include <errno.h>
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
