/* read.h — the unit tests' way to read a whole file (a test vector, a ledger segment, a log
 * the test wrote): tg_read_file, so the tests read files the way the daemon does.
 *
 * Linked into every unit test by tests/unit/CMakeLists.txt. Not thread-safe beyond what
 * cmocka's failure reporting is (call it from the test's own thread).
 */
#ifndef TG_TEST_READ_H
#define TG_TEST_READ_H

#include <stddef.h>

/* The whole regular file at path, NUL-terminated, in memory the caller frees; *len (may be
 * NULL) gets its length. A file that cannot be read fails the running test, naming the path
 * and why. */
char *tg_test_read(const char *path, size_t *len);

#endif /* TG_TEST_READ_H */
