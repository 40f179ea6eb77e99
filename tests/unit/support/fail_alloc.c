/* fail_alloc.c — the wrappers behind fail_alloc.h (linked with -Wl,--wrap, see there). */
#include "fail_alloc.h"

#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void __real_free(void *p);
int __real_sodium_init(void);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
void __wrap_free(void *p);
int __wrap_sodium_init(void);

/* Atomics rather than plain globals: tests arm from one thread and library threads allocate
 * on others, and GCC assumes malloc reads no user globals, so a plain store right before an
 * allocation could be dropped. */
static atomic_long countdown = -1; /* < 0: off; 0: the next allocation fails */
static atomic_bool fail_all;
static atomic_bool fail_sodium;
static atomic_long injected;
static atomic_long seen;

void tg_fail_alloc_after(long k) { atomic_store(&countdown, k < 0 ? -1 : k); }

void tg_fail_alloc_all(bool on) { atomic_store(&fail_all, on); }

void tg_fail_alloc_off(void) {
    atomic_store(&countdown, -1);
    atomic_store(&fail_all, false);
    atomic_store(&fail_sodium, false);
}

long tg_fail_alloc_injected(void) { return atomic_load(&injected); }

long tg_fail_alloc_pending(void) { return atomic_load(&countdown); }

long tg_fail_alloc_seen(void) { return atomic_load(&seen); }

void tg_fail_sodium_init(bool on) { atomic_store(&fail_sodium, on); }

/* True when this allocation is to fail; counts it. */
static bool should_fail(void) {
    if (atomic_load(&fail_all)) {
        atomic_fetch_add(&seen, 1);
        atomic_fetch_add(&injected, 1);
        return true;
    }
    long cur = atomic_load(&countdown);
    while (cur >= 0) {
        /* one thread takes the failure: the one whose exchange moves 0 to -1 */
        if (atomic_compare_exchange_weak(&countdown, &cur, cur == 0 ? -1 : cur - 1)) {
            if (cur == 0) {
                atomic_fetch_add(&injected, 1);
                return true;
            }
            return false;
        }
    }
    return false;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }

void *__wrap_calloc(size_t n, size_t m) { return should_fail() ? NULL : __real_calloc(n, m); }

void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }

void *__wrap_aligned_alloc(size_t a, size_t n) {
    return should_fail() ? NULL : __real_aligned_alloc(a, n);
}

void __wrap_free(void *p) {
    if (p != NULL && atomic_load(&fail_all)) {
        atomic_fetch_add(&seen, 1);
    }
    __real_free(p);
}

int __wrap_sodium_init(void) { return atomic_load(&fail_sodium) ? -1 : __real_sodium_init(); }
