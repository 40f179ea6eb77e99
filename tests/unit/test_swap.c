/* test_swap.c — the pointer swap behind policy hot reload (swap.h): a reader stalled at any
 * point of tg_swap_acquire, for longer than any grace period, never sees its object freed.
 * Meant to run under ASan (a use after free is a report) and TSan (scripts/test lists it):
 * the objects' canary is a plain int, so any free that races a reader is a data race too. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "trigguard/clock.h"
#include "trigguard/swap.h"

#define LIVE 0x4c495645
#define DEAD 0x44454144

typedef struct obj {
    int magic; /* LIVE until the writer retires it; plain on purpose (see the top) */
    unsigned id;
} obj_t;

static obj_t *obj_new(unsigned id) {
    obj_t *o = malloc(sizeof *o);
    assert_non_null(o);
    o->magic = LIVE;
    o->id = id;
    return o;
}

/* What the writer does with what tg_swap_exchange hands back: retire it, then free it. */
static void obj_retire(obj_t *o) {
    o->magic = DEAD;
    free(o);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void test_basics(void **state) {
    (void)state;
    assert_int_equal(tg_swap_create(NULL, NULL), TG_ERR_INVALID_ARG);
    tg_swap_t *s = NULL;
    obj_t *a = obj_new(1), *b = obj_new(2);
    assert_int_equal(tg_swap_create(&s, a), TG_OK);
    assert_ptr_equal(tg_swap_peek(s), a);
    tg_swap_ref_t r1, r2;
    assert_ptr_equal(tg_swap_acquire(s, &r1), a);
    assert_ptr_equal(r1.ptr, a);
    assert_ptr_equal(tg_swap_acquire(s, &r2), a); /* one reader, two references */
    tg_swap_release(s, &r2);
    tg_swap_release(s, &r1);
    /* nobody holds a: handed back at once */
    assert_ptr_equal(tg_swap_exchange(s, b), a);
    assert_ptr_equal(tg_swap_acquire(s, &r1), b);
    tg_swap_release(s, &r1);
    /* and back again (the other parity) */
    assert_ptr_equal(tg_swap_exchange(s, a), b);
    assert_ptr_equal(tg_swap_peek(s), a);
    assert_ptr_equal(tg_swap_exchange(s, NULL), a);
    assert_null(tg_swap_peek(s));
    tg_swap_destroy(s);
    tg_swap_destroy(NULL);
    free(a);
    free(b);
}

typedef struct {
    tg_swap_t *s;
    void *fresh;
    void *old;
    atomic_int done;
} exch_arg_t;

static void *exchanger(void *p) {
    exch_arg_t *a = p;
    a->old = tg_swap_exchange(a->s, a->fresh);
    atomic_store(&a->done, 1);
    return NULL;
}

/* An exchange waits for the reader holding the old object, and for nobody else. */
static void test_exchange_waits_for_holder(void **state) {
    (void)state;
    tg_swap_t *s = NULL;
    obj_t *a = obj_new(1), *b = obj_new(2);
    assert_int_equal(tg_swap_create(&s, a), TG_OK);
    tg_swap_ref_t ra, rb;
    assert_ptr_equal(tg_swap_acquire(s, &ra), a);
    exch_arg_t arg = {s, b, NULL, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, exchanger, &arg), 0);
    /* the exchange has published b: readers get it without waiting */
    while (tg_swap_peek(s) != b) {
        sleep_us(100);
    }
    assert_ptr_equal(tg_swap_acquire(s, &rb), b);
    sleep_us(100000);
    assert_int_equal(atomic_load(&arg.done), 0); /* a is still held */
    tg_swap_release(s, &rb);
    sleep_us(20000);
    assert_int_equal(atomic_load(&arg.done), 0); /* b's reader was never waited for */
    assert_int_equal(a->magic, LIVE);
    tg_swap_release(s, &ra);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&arg.done), 1);
    assert_ptr_equal(arg.old, a);
    obj_retire(a);
    free(tg_swap_exchange(s, NULL));
    tg_swap_destroy(s);
}

/* ---- the race: stalled readers against a writer that reloads as fast as it can ---------- */

#define READERS 4
#define LONG_STALL_US 60000 /* longer than the old scheme's 50 ms grace */
#define SHORT_STALL_US 2000
#define MIN_RUN_MS 1000
#define MAX_RUN_MS 10000
#define WANT_OVERLAPS 5

/* What a reader thread does besides reading. */
typedef enum {
    FAST = 0,     /* acquire, check, release, as fast as it can */
    UNCOUNTED,    /* stalls long before it counts itself: where the old scheme lost it */
    COUNTED_HOLD, /* stalls briefly after counting itself, and while holding: the writer waits */
} role_t;

typedef struct {
    tg_swap_t *s;
    atomic_int stop;
    atomic_uint_fast64_t reloads;
    atomic_uint_fast64_t reads;
    atomic_uint_fast64_t long_stalls;
    atomic_uint_fast64_t overlaps; /* long stalls during which at least one reload completed */
    atomic_int bad;                /* a reader saw a retired object */
} race_t;

static race_t race;
static _Thread_local role_t my_role;
static _Thread_local unsigned hook_passes;

/* UNCOUNTED stalls at every pass before counting; COUNTED_HOLD at every second pass
 * before loading. */
static void stall_hook(void *ud, tg_swap_hook_at_t at) {
    (void)ud;
    if (my_role == UNCOUNTED && at == TG_SWAP_HOOK_BEFORE_COUNT) {
        uint_fast64_t before = atomic_load(&race.reloads);
        sleep_us(LONG_STALL_US);
        atomic_fetch_add(&race.long_stalls, 1);
        if (atomic_load(&race.reloads) != before) {
            atomic_fetch_add(&race.overlaps, 1);
        }
    } else if (my_role == COUNTED_HOLD && at == TG_SWAP_HOOK_BEFORE_LOAD &&
               ++hook_passes % 2 == 0) {
        sleep_us(SHORT_STALL_US);
    }
}

static void *reader(void *p) {
    my_role = (role_t)(intptr_t)p;
    unsigned n = 0;
    while (!atomic_load(&race.stop)) {
        tg_swap_ref_t ref;
        obj_t *o = tg_swap_acquire(race.s, &ref);
        if (o->magic != LIVE) {
            atomic_store(&race.bad, 1);
        }
        unsigned id = o->id;
        if (my_role == COUNTED_HOLD && ++n % 3 == 0) {
            sleep_us(SHORT_STALL_US);
        }
        if (o->magic != LIVE || o->id != id) {
            atomic_store(&race.bad, 1);
        }
        tg_swap_release(race.s, &ref);
        atomic_fetch_add(&race.reads, 1);
    }
    return NULL;
}

static long elapsed_ms(int64_t t0_ns) { return (long)((tg_clock_mono_ns() - t0_ns) / 1000000); }

static void test_stalled_readers_race_reloads(void **state) {
    (void)state;
    memset(&race, 0, sizeof race);
    assert_int_equal(tg_swap_create(&race.s, obj_new(0)), TG_OK);
    tg_swap_set_hook(race.s, stall_hook, NULL);
    pthread_t t[READERS];
    static const role_t roles[READERS] = {FAST, FAST, UNCOUNTED, COUNTED_HOLD};
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, reader, (void *)(intptr_t)roles[i]), 0);
    }
    int64_t t0 = tg_clock_mono_ns();
    unsigned id = 1;
    /* Long enough that reloads completed during several long stalls, even on a loaded
     * machine (each such stall is a use after free for the old scheme). */
    for (;;) {
        obj_retire(tg_swap_exchange(race.s, obj_new(id++)));
        atomic_fetch_add(&race.reloads, 1);
        long ms = elapsed_ms(t0);
        if ((ms >= MIN_RUN_MS && atomic_load(&race.overlaps) >= WANT_OVERLAPS) ||
            ms >= MAX_RUN_MS) {
            break;
        }
    }
    atomic_store(&race.stop, 1);
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    tg_swap_set_hook(race.s, NULL, NULL);
    obj_retire(tg_swap_exchange(race.s, NULL));
    tg_swap_destroy(race.s);
    printf("# %llu reloads, %llu reads; %llu stalls of %d ms before counting, %llu of them "
           "outlived a reload\n",
           (unsigned long long)race.reloads, (unsigned long long)race.reads,
           (unsigned long long)race.long_stalls, LONG_STALL_US / 1000,
           (unsigned long long)race.overlaps);
    assert_int_equal(atomic_load(&race.bad), 0);
    /* the test tested something */
    assert_true(atomic_load(&race.overlaps) >= WANT_OVERLAPS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_exchange_waits_for_holder),
        cmocka_unit_test(test_stalled_readers_race_reloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
