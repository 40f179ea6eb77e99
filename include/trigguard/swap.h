/* swap.h — one pointer that a writer replaces while any number of readers use it; the old
 * object is handed back to the writer (to free) only once no reader can still be using it.
 *
 * The daemon's policy lives in one (pipeline.c): requests read it for microseconds,
 * SIGHUP replaces it.
 *
 * Why not a reference count in the object. A reader would load the pointer, then
 * increment the object's count. A reader preempted between the two steps increments an
 * object the writer may already have freed; no grace period is long enough for every
 * preemption. This was the policy swap's scheme until issue 17, with a 50 ms grace.
 *
 * The scheme. The counters are the slot's, never the object's: they live as long as the
 * tg_swap_t, so a reader touches only memory that cannot be freed under it. There are two
 * sets of counters, one per epoch parity; each set is sharded by thread (16 cache lines),
 * so readers on different threads do not write one line.
 *   reader (acquire)  e = epoch; counter[e parity][its shard] += 1; if epoch is still e,
 *                     load the pointer and use it, else undo and start again;
 *   reader (release)  that counter -= 1;
 *   writer (exchange) pointer = new; epoch += 1; wait until every counter of the old
 *                     epoch's parity is 0; hand back the old pointer.
 * All of it is sequentially consistent atomics. A reader that saw epoch e unchanged after
 * counting itself was counted before the writer moved the epoch on, so the writer waits
 * for it. A reader counted in time may still have loaded the new pointer: it is waited for,
 * harmlessly. A reader whose epoch check fails was never counted in time; it retries,
 * counts itself under the new epoch and loads the new pointer. This holds for any
 * preemption of either side: a delay only makes the writer wait longer, it is never a use
 * of freed memory. The epoch is 64 bits, so it never wraps in practice.
 *
 * Cost. acquire is two loads of the epoch, one atomic add and one load of the pointer;
 * release is one atomic subtract. That is what the old scheme did, on a per-thread line
 * instead of one line every request wrote. Readers never wait for a writer. A writer waits
 * for the readers that were in flight when it moved the epoch, and for none that came later.
 *
 * Thread safety: acquire/release from any number of threads; exchange from any thread
 * (exchanges are serialised by a mutex inside). create/destroy/set_hook as noted.
 */
#ifndef TRIGGUARD_SWAP_H
#define TRIGGUARD_SWAP_H

#include "trigguard/err.h"

#define TG_SWAP_SHARDS 16 /* counters per epoch parity; threads share them round robin */

typedef struct tg_swap tg_swap_t;

/* What a reader holds between tg_swap_acquire and tg_swap_release (on its stack). */
typedef struct tg_swap_ref {
    void *ptr;     /* the object, as tg_swap_acquire returned it */
    unsigned slot; /* the counter this reader is counted in */
} tg_swap_ref_t;

/* Creates a swap holding initial (which may be NULL; the swap never dereferences it).
 * Errors: TG_ERR_INVALID_ARG (out NULL), TG_ERR_NOMEM, TG_ERR_INTERNAL (mutex). */
tg_err_t tg_swap_create(tg_swap_t **out, void *initial) TG_MUST_USE;

/* Frees the swap, not the object it holds (take it with tg_swap_peek first). NULL-safe.
 * No reader may hold a reference and no other thread may use the swap. */
void tg_swap_destroy(tg_swap_t *s);

/* Takes a reference to the current object and returns it (also in ref->ptr). It stays valid
 * until tg_swap_release(s, ref), which must follow exactly once, on any thread. Never
 * blocks. A reader may hold several references, but not across a tg_swap_exchange it makes
 * itself (that would wait for the reader). */
void *tg_swap_acquire(tg_swap_t *s, tg_swap_ref_t *ref);

/* Gives back a reference taken by tg_swap_acquire. */
void tg_swap_release(tg_swap_t *s, const tg_swap_ref_t *ref);

/* Makes fresh the current object, then waits until no reader can still hold the previous
 * one, and returns it: the caller now owns it and may free it. Requests that acquire
 * meanwhile get fresh and are not waited for. Blocks (sleeping, after a few yields) as
 * long as a reader of the previous object holds it. */
void *tg_swap_exchange(tg_swap_t *s, void *fresh);

/* The current object, without a reference. Only the thread that exchanges may dereference
 * it (nothing frees it under that thread); any thread may compare it with NULL. */
void *tg_swap_peek(tg_swap_t *s);

/* ---- for tests only ------------------------------------------------------------------ */

/* Where tg_swap_acquire calls the hook: after it read the epoch and before it counts itself
 * (the window the old scheme lost), and after it counted itself and before it loads the
 * pointer. */
typedef enum { TG_SWAP_HOOK_BEFORE_COUNT = 1, TG_SWAP_HOOK_BEFORE_LOAD = 2 } tg_swap_hook_at_t;
typedef void (*tg_swap_hook_fn)(void *ud, tg_swap_hook_at_t at);

/* Installs a hook (NULL removes it) that acquire calls at both points, so a test can stall
 * a reader there for as long as it likes. Set it before any reader runs and remove it after
 * the last one; production code never sets one (acquire then pays one predicted branch). */
void tg_swap_set_hook(tg_swap_t *s, tg_swap_hook_fn fn, void *ud);

#endif /* TRIGGUARD_SWAP_H */
