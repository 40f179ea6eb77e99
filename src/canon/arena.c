/* arena.c — request-scoped bump allocation for jansson (see canon.h). */
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "trigguard/canon.h"

#if defined(__SANITIZE_ADDRESS__)
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define ARENA_TRACK_EXIT 1
#else
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN 16

/* One per thread, in static TLS: no allocation, and a pointer's owner is known by address. */
static _Thread_local alignas(ALIGN) unsigned char tl_arena[TG_JSON_ARENA_BYTES];
static _Thread_local size_t tl_used;
static _Thread_local bool tl_active;
static _Thread_local bool tl_poisoned; /* first use on this thread poisons the whole arena */

static bool in_arena(const void *p) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)tl_arena;
    return a >= lo && a < lo + sizeof tl_arena;
}

static void *arena_malloc(size_t n) {
    if (tl_active) {
        size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        if (n > 0 && need >= n && need <= sizeof tl_arena - tl_used) {
            void *p = tl_arena + tl_used;
            tl_used += need;
            ARENA_UNPOISON(p, n); /* the padding up to `need` stays poisoned */
            return p;
        }
    }
    return malloc(n > 0 ? n : 1); /* malloc(0) may return NULL, which jansson would take for OOM */
}

static void arena_free(void *p) {
    if (p == NULL) {
        return;
    }
    if (in_arena(p)) {
        return; /* reclaimed all at once by tg_json_scope_end */
    }
    free(p);
}

void tg_json_alloc_install(void) { json_set_alloc_funcs(arena_malloc, arena_free); }

#ifdef ARENA_TRACK_EXIT
/* A thread's TLS is unmapped when it exits, and the next mmap (a large malloc) may reuse
 * the pages: left poisoned, they would fail as use-after-poison in whatever is allocated
 * there. So a thread that poisoned its arena unpoisons it on its way out (a key
 * destructor runs in the exiting thread, before its TLS goes). */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void unpoison_at_exit(void *unused) {
    (void)unused;
    ARENA_UNPOISON(tl_arena, sizeof tl_arena);
}

static void make_exit_key(void) { (void)pthread_key_create(&exit_key, unpoison_at_exit); }

static void track_exit(void) {
    (void)pthread_once(&exit_once, make_exit_key);
    (void)pthread_setspecific(exit_key, tl_arena); /* any non-NULL value runs the destructor */
}
#else
static void track_exit(void) {}
#endif

void tg_json_scope_begin(void) {
    if (!tl_poisoned) {
        track_exit();
        ARENA_POISON(tl_arena, sizeof tl_arena);
        tl_poisoned = true;
    }
    tl_used = 0;
    tl_active = true;
}

void tg_json_scope_end(void) {
    ARENA_POISON(tl_arena, tl_used);
    tl_used = 0;
    tl_active = false;
}
