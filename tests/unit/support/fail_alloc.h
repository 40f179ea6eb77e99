/* fail_alloc.h — allocation failure injection, one copy for every unit test that needs it.
 *
 * tests/unit/CMakeLists.txt (tg_unit_fail_alloc) links a test with fail_alloc.c and
 * -Wl,--wrap=malloc,calloc,realloc,aligned_alloc,free,sodium_init. Every call of those from
 * the test and from the static tg_* libraries then lands in fail_alloc.c, which calls the
 * real function unless a test armed a failure. Calls made inside shared libraries (libc
 * itself, jansson, libsodium) are not redirected: a failure there is injected by other means
 * (json_set_alloc_funcs).
 *
 * Thread safety: the state is atomic. An armed failure is taken by whichever thread
 * allocates next, so a test with threads of its own running (the ledger's writer, the log
 * writer) arms only what any of them may take.
 */
#ifndef TG_TEST_FAIL_ALLOC_H
#define TG_TEST_FAIL_ALLOC_H

#include <stdbool.h>

/* The allocation after k more successful ones fails, once; k < 0 disarms. */
void tg_fail_alloc_after(long k);

/* While on, every allocation fails. */
void tg_fail_alloc_all(bool on);

/* Disarms everything above and tg_fail_sodium_init. */
void tg_fail_alloc_off(void);

/* The countdown armed by tg_fail_alloc_after: the successful allocations left before the
 * failing one, or -1 once it fired (or when off). A test that armed 0 and sees 0 afterwards
 * knows the code it called allocated nothing. */
long tg_fail_alloc_pending(void);

/* Allocations made to fail so far (both modes): how a test tells that its countdown fired. */
long tg_fail_alloc_injected(void);

/* Calls of malloc, calloc, realloc, aligned_alloc, and of free with a non-NULL pointer,
 * made while tg_fail_alloc_all was on: code that must not touch the heap at all (the
 * kernel) leaves this unchanged. */
long tg_fail_alloc_seen(void);

/* While on, sodium_init() returns -1 (the "cannot initialize libsodium" paths). */
void tg_fail_sodium_init(bool on);

#endif /* TG_TEST_FAIL_ALLOC_H */
