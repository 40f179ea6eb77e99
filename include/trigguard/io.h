/* io.h — small file helpers shared by the modules: writing all of a buffer, and the one
 * bounded reader of the files the operator names.
 *
 * Thread safety: reentrant; the caller owns the descriptor and decides who else may
 * write to it.
 */
#ifndef TRIGGUARD_IO_H
#define TRIGGUARD_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

/* Writes all n bytes of data to fd, going on after short writes and EINTR. Errors:
 * TG_ERR_IO (errno says why; an unknown number of bytes may have been written). */
tg_err_t tg_write_all(int fd, const void *data, size_t n) TG_MUST_USE;

/* tg_write_all at byte offset off (pwrite: the file offset is untouched, so threads may share
 * fd). A short write is continued, so a full disk fails the next attempt with its own errno
 * (ENOSPC, EFBIG, EDQUOT); no progress without a reason is EIO. TG_ERR_IO. */
tg_err_t tg_pwrite_all(int fd, const void *data, size_t n, uint64_t off) TG_MUST_USE;

/* Reads exactly n bytes at offset off (pread, continued after short reads and EINTR).
 * TG_ERR_IO with errno; end of file before n bytes is EIO (a file shorter than its
 * reader was told). */
tg_err_t tg_pread_all(int fd, void *out, size_t n, uint64_t off) TG_MUST_USE;

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

/* A whole file read into memory by tg_read_file or tg_read_fd. */
typedef struct tg_file {
    char *data;    /* len bytes and a NUL after them (the text may hold NULs of its own);
                    * heap memory the caller owns: tg_file_free, or take it and free() it */
    size_t len;    /* bytes read, at most the cap asked for */
    unsigned mode; /* st_mode of the descriptor read (type and permission bits) */
    bool secret;   /* read with TG_READ_SECRET: tg_file_free wipes data before freeing */
} tg_file_t;

/* The largest cap tg_read_file takes: every file it serves is a few MiB at most, and a bound
 * keeps cap + 2 (the byte that proves a file too long, and the NUL) far from overflowing. */
#define TG_READ_CAP_MAX ((size_t)1 << 30)

/* Flags of tg_read_file and tg_read_fd. */
enum {
    /* The file holds key material (a private key, a tokens file). Every heap copy the read
     * makes is wiped before it is freed: the buffer on every error path, the old buffer when
     * a growing file needs a larger one, and data in tg_file_free. */
    TG_READ_SECRET = 1u
};

/* Reads the whole regular file at path, at most cap bytes, for files the operator names
 * (policy, key, tokens, TLS material, CLI input). Opens with tg_open_regular, so a FIFO or
 * a device is refused at once instead of blocking. label names the file in every message
 * (tg_open_regular's; the caller decides whether the path may be shown). The buffer is sized
 * from the file's size, so a regular file is read in one allocation; one that grows while it
 * is read is still cut off at cap + 1 bytes.
 * On success *out holds the text (see tg_file_t). Errors: TG_ERR_NOT_FOUND (no such file),
 * TG_ERR_IO (cannot open or read, not a regular file), TG_ERR_LIMIT (more than cap bytes;
 * the message names cap), TG_ERR_NOMEM, TG_ERR_INVALID_ARG (NULL out/path/label, or cap
 * above TG_READ_CAP_MAX). On error *out is all zero and nothing read is left in memory when
 * flags has TG_READ_SECRET. Thread safety: reentrant. */
tg_err_t tg_read_file(tg_file_t *out, const char *path, size_t cap, const char *label,
                      unsigned flags, tg_diag_t *diag) TG_MUST_USE;

/* The same for an open descriptor (standard input, for instance), read from where it is to
 * its end; fd stays the caller's and is not closed. Any kind of file is accepted: the caller
 * chose the descriptor. Errors as tg_read_file but TG_ERR_NOT_FOUND. */
tg_err_t tg_read_fd(tg_file_t *out, int fd, size_t cap, const char *label, unsigned flags,
                    tg_diag_t *diag) TG_MUST_USE;

/* Frees f->data (wiped first when f->secret) and zeroes *f. NULL-safe; a zeroed tg_file_t is
 * fine. */
void tg_file_free(tg_file_t *f);

/* The memory this process may use, in bytes: the smaller of /proc/meminfo's MemTotal and a
 * cgroup v2 limit (/sys/fs/cgroup/memory.max, when it is a number); 0 when neither can be
 * read. For sizing defaults, not for enforcing anything. Thread-safe. */
uint64_t tg_memory_available(void);

/* The same, from the two files' texts (either NULL or unparseable = not known): what
 * tg_memory_available parses, apart so that tests can give it any text. */
uint64_t tg_memory_parse(const char *meminfo, const char *cgroup_max);

#endif /* TRIGGUARD_IO_H */
