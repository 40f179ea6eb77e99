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

#endif /* TRIGGUARD_IO_H */
