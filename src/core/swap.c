/* swap.c — a pointer replaced under readers, freed by epoch-parity slot counters (swap.h). */
#include "trigguard/swap.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One counter per cache line: readers on different shards never write the same line. */
typedef struct counter {
    _Alignas(64) atomic_uint_fast64_t n;
} counter_t;

struct tg_swap {
    counter_t count[2][TG_SWAP_SHARDS]; /* [epoch parity][shard]: readers counted */
    _Alignas(64) _Atomic(void *) ptr;
    atomic_uint_fast64_t epoch;
    tg_swap_hook_fn hook; /* tests only; set while no reader runs */
    void *hook_ud;
    pthread_mutex_t writer; /* one exchange at a time: two would share a parity */
};

/* Threads are given shards round robin on their first acquire, so the event threads of
 * one daemon (fewer than TG_SWAP_SHARDS) each have their own. */
static atomic_uint next_shard;
static _Thread_local unsigned my_shard_plus1; /* 0 = not given one yet */

static unsigned my_shard(void) {
    if (my_shard_plus1 == 0) {
        unsigned n = atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed);
        my_shard_plus1 = n % TG_SWAP_SHARDS + 1;
    }
    return my_shard_plus1 - 1;
}

tg_err_t tg_swap_create(tg_swap_t **out, void *initial) {
    if (out == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    *out = NULL;
    tg_swap_t *s = aligned_alloc(64, (sizeof(tg_swap_t) + 63) / 64 * 64);
    if (s == NULL) {
        return TG_ERR_NOMEM;
    }
    memset(s, 0, sizeof *s);
    for (unsigned p = 0; p < 2; p++) {
        for (unsigned i = 0; i < TG_SWAP_SHARDS; i++) {
            atomic_init(&s->count[p][i].n, 0);
        }
    }
    atomic_init(&s->ptr, initial);
    atomic_init(&s->epoch, 0);
    if (pthread_mutex_init(&s->writer, NULL) != 0) {
        free(s);
        return TG_ERR_INTERNAL;
    }
    *out = s;
    return TG_OK;
}

void tg_swap_destroy(tg_swap_t *s) {
    if (s != NULL) {
        pthread_mutex_destroy(&s->writer);
        free(s);
    }
}

void *tg_swap_acquire(tg_swap_t *s, tg_swap_ref_t *ref) {
    unsigned shard = my_shard();
    for (;;) {
        uint_fast64_t e = atomic_load(&s->epoch);
        if (s->hook != NULL) {
            s->hook(s->hook_ud, TG_SWAP_HOOK_BEFORE_COUNT);
        }
        atomic_uint_fast64_t *c = &s->count[e & 1][shard].n;
        atomic_fetch_add(c, 1);
        /* Counted, and the epoch has not moved since it was read: any writer that moves it
         * from here on waits for this counter to drop (swap.h). */
        if (atomic_load(&s->epoch) == e) {
            if (s->hook != NULL) {
                s->hook(s->hook_ud, TG_SWAP_HOOK_BEFORE_LOAD);
            }
            ref->ptr = atomic_load(&s->ptr);
            ref->slot = (unsigned)(e & 1) * TG_SWAP_SHARDS + shard;
            return ref->ptr;
        }
        /* A writer moved the epoch in between: this count may be too late for it. */
        atomic_fetch_sub_explicit(c, 1, memory_order_release);
    }
}

void tg_swap_release(tg_swap_t *s, const tg_swap_ref_t *ref) {
    /* Release: the reader's last use of the object happens before the writer, which reads
     * this counter with acquire semantics, frees it. */
    atomic_fetch_sub_explicit(&s->count[ref->slot / TG_SWAP_SHARDS][ref->slot % TG_SWAP_SHARDS].n,
                              1, memory_order_release);
}

/* Yields a few times (a reader in flight finishes in microseconds), then sleeps 100 µs per
 * round so that a reader stalled for long costs the writer no CPU. */
static void backoff(unsigned *rounds) {
    if (++*rounds < 64) {
        sched_yield();
    } else {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

void *tg_swap_exchange(tg_swap_t *s, void *fresh) {
    pthread_mutex_lock(&s->writer);
    void *old = atomic_exchange(&s->ptr, fresh);
    uint_fast64_t e = atomic_fetch_add(&s->epoch, 1);
    /* Every reader that can hold old was counted under parity e & 1 before the epoch moved. */
    for (unsigned i = 0; i < TG_SWAP_SHARDS; i++) {
        unsigned rounds = 0;
        while (atomic_load(&s->count[e & 1][i].n) != 0) {
            backoff(&rounds);
        }
    }
    pthread_mutex_unlock(&s->writer);
    return old;
}

void *tg_swap_peek(tg_swap_t *s) { return atomic_load(&s->ptr); }

void tg_swap_set_hook(tg_swap_t *s, tg_swap_hook_fn fn, void *ud) {
    s->hook = fn;
    s->hook_ud = ud;
}
