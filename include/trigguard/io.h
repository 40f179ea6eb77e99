/* io.h — small file-descriptor helpers shared by the modules that write files themselves.
 *
 * Thread safety: reentrant; the caller owns the descriptor and decides who else may
 * write to it.
 */
#ifndef TRIGGUARD_IO_H
#define TRIGGUARD_IO_H

#include <stddef.h>

#include "trigguard/err.h"

/* Writes all n bytes of data to fd, going on after short writes and EINTR. Errors:
 * TG_ERR_IO (errno says why; an unknown number of bytes may have been written). */
tg_err_t tg_write_all(int fd, const void *data, size_t n) TG_MUST_USE;

/* Writes the directory that contains path into out (cap bytes): trailing slashes are
 * ignored, "a/b" gives "a", "/a" gives "/", "a" gives ".". Errors: TG_ERR_LIMIT (the parent
 * does not fit; out is then ""). Pure; thread-safe. */
tg_err_t tg_path_parent(char *out, size_t cap, const char *path) TG_MUST_USE;

/* Opens path read-only, to load a whole file given by the operator (key, policy, tokens,
 * TLS material, CLI input). The open never waits: a FIFO with no writer or a device would
 * otherwise block startup, or a reload, with the shutdown signals already blocked. So the
 * file is opened with O_NONBLOCK (which regular files ignore) and refused unless fstat calls
 * it a regular file. label names the file in messages (for example "policy /etc/p.json";
 * the caller decides whether the path may be shown). On success *fd_out owns a descriptor
 * the caller closes. Errors: TG_ERR_NOT_FOUND (no such file), TG_ERR_IO (cannot open, or
 * not a regular file); *fd_out is then -1. */
tg_err_t tg_open_regular(int *fd_out, const char *path, const char *label,
                         tg_diag_t *diag) TG_MUST_USE;

#endif /* TRIGGUARD_IO_H */
