/* store.h — the in-memory tables: idempotency claims, nonces, the receipt index. Sharded,
 * bounded, with retention; typed, fixed-size values kept inside each entry.
 *
 * Model. Two table types, each keyed by (tenant, key) compared byte for byte (the hash only
 * picks a bucket; tenants can never see, replay or collide with each other's entries):
 *
 *   tg_store_t     idempotency entries and nonces (an idempotency key never collides with
 *                  a nonce of the same text):
 *                    idempotency  (tenant, key) -> tg_idem_entry_t: request hash, state
 *                                 IN_FLIGHT | DONE, and once DONE the HTTP status and the
 *                                 ledger position of the request's record;
 *                    nonce        (tenant, nonce) -> first-use time.
 *   tg_receipts_t  the receipt index: (tenant, executionId) -> ledger position. An id, once
 *                  indexed, is never repointed while it is live.
 *
 * Values. Every value has a fixed size and lives inside its entry: looking one up copies it
 * into a struct the caller provides. Nothing is allocated per lookup and nothing handed out
 * needs freeing. (Until issue 18 an entry kept a malloc'd opaque body, 24 bytes of ledger
 * position, and every replay malloc'd a copy.) Claiming a key (tg_store_idem_begin) still
 * allocates its would-be entry before it takes the shard lock, because most keys are new and
 * the lock should cover only the walk; a replay or a refusal frees it again.
 *
 * Memory per entry (LP64, glibc). An entry is one allocation: a 56-byte header (bucket and
 * age-list links, hash, stamp, lengths, state), the kind's value, then the tenant and key
 * bytes. Its cost, which is what max_bytes counts, is what glibc's malloc takes for it: the
 * size plus an 8-byte chunk header, rounded up to 16, at least 32 (TG_STORE_ALLOC_COST):
 *
 *   kind         struct   + value                                  example (tenant "acme")
 *   idempotency  56 + 56 (request hash 32, ledger pos 24) = 112    36-byte key: 152 -> 160
 *   nonce        56                                                36-byte nonce: 96 -> 112
 *   receipt      56 + 24 (ledger pos)                     = 80     37-byte id: 121 -> 144
 *
 * The HTTP status sits in the header, in what would be padding. Before issue 18 the same
 * idempotency entry cost 224 bytes (a 120-byte struct with the key: 176, plus the body's own
 * 48-byte chunk) and was counted as 184. Not counted per entry, because it is allocated at
 * create whatever the table holds: each table's bucket array, 8 bytes per slot, about one
 * slot per max_entries (rounded up to a power of two per shard).
 *
 * Sharding. N shards (power of two) chosen by a keyed SipHash (libsodium crypto_shorthash,
 * random key per table, so callers cannot engineer collisions) of kind, tenant and key; one
 * mutex per shard, held for a hash-chain walk and an O(1) insert/unlink or the copy of one
 * value (at most 72 bytes). Each shard has a chained hash table whose bucket array is
 * pre-sized at create from max_entries, so it never rehashes. No global lock; the only
 * shared writes on the hot path are two relaxed atomic counters (entries, bytes) that
 * enforce the caps exactly.
 *
 * Time. Every call takes now_ms from the caller (Unix wall-clock milliseconds, the clock the
 * ledger's timestamps use, so entries rebuilt from the ledger age correctly). An entry
 * stamped at t is live while now_ms - t < retention_ms and expired from now_ms - t >=
 * retention_ms (at t + retention_ms - 1 it is still there). A clock that steps backwards
 * only makes entries live longer (fail closed). Expired entries behave exactly as absent;
 * their memory is reclaimed lazily when a lookup walks past them and by the sweeps.
 *
 * Idempotency lifecycle (three phases):
 *   begin    -> NEW (a reservation is now held: IN_FLIGHT) | REPLAY | CONFLICT | IN_FLIGHT
 *   complete -> IN_FLIGHT becomes DONE with status and position; retention counts from here
 *   abort    -> IN_FLIGHT reservation dropped (nothing durable was produced); a retry runs
 * An IN_FLIGHT reservation NEVER expires, by TTL or by sweep: it ends only by complete or
 * abort. Expiring it while the first request may still finish would let a duplicate run
 * and authorize the same request twice; a stuck reservation instead costs one slot and
 * answers 409 to retries (fail closed). The daemon must therefore call complete or abort
 * exactly once after every NEW, on every path (including aborted connections: do it in the
 * libmicrohttpd completion callback). tg_store_stats reports idem_in_flight so a leak is
 * visible. A reservation already holds all the memory its DONE entry needs, so complete
 * cannot fail for want of room. Reservations are in memory only; a restart forgets them and
 * rebuilds DONE entries from the ledger (tg_store_idem_restore).
 *
 * Nonce choice: a nonce is consumed when first presented (tg_store_nonce_use), whatever
 * happens to the request afterwards; a second presentation within retention is a replay
 * (SPEC §3.3 step 6). The one exception is tg_store_nonce_release, for a request that
 * failed before anything about it became durable (e.g. 5xx because the ledger is down): it
 * makes the live table match what a restart would rebuild from the ledger, where that nonce
 * does not appear. Never release after the ledger append succeeded.
 *
 * Capacity (fail closed, never evict): max_entries counts a table's entries (in flight or
 * done, and nonces); max_bytes bounds their cost (above). When a new entry would exceed
 * either, the call fails with TG_ERR_LIMIT and changes nothing: evicting live entries would
 * silently re-enable replays. Expired entries still count until reclaimed, so the daemon
 * should sweep periodically (serve does every 100 ms, so that each call reclaims a small
 * batch). A sweep costs what it reclaims, not the size of the table, and holds each shard
 * lock for at most TG_STORE_SWEEP_CHUNK reclaimed entries at a time. A key longer than
 * max_key_len is a caller error (TG_ERR_INVALID_ARG): validate it first with
 * tg_store_max_key_len so that TG_ERR_LIMIT from this module always means "table full"
 * (map it to 503).
 *
 * Thread safety: every function except the _create/_destroy pairs is thread-safe and may be
 * called concurrently from any number of threads. Pointers passed in are only read during
 * the call; the tables copy what they keep.
 */
#ifndef TRIGGUARD_STORE_H
#define TRIGGUARD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"
#include "trigguard/ledger.h" /* tg_ledger_pos_t, the value entries point at */

#define TG_STORE_DEFAULT_SHARDS 64
#define TG_STORE_MAX_SHARDS 4096
#define TG_STORE_DEFAULT_MAX_ENTRIES 1000000
#define TG_STORE_DEFAULT_MAX_BYTES ((size_t)512 * 1024 * 1024)
#define TG_STORE_DEFAULT_RETENTION_MS (INT64_C(24) * 60 * 60 * 1000)
#define TG_STORE_DEFAULT_MAX_KEY_LEN 255 /* idempotency keys, nonces, ids: bytes */
#define TG_STORE_MAX_KEY_LEN_LIMIT 1024  /* largest max_key_len accepted */
#define TG_STORE_TENANT_MAX 64           /* bytes; same bound as guard's tenant names */
#define TG_STORE_SWEEP_CHUNK 256         /* entries reclaimed per shard-lock hold in a sweep */

/* What an allocation of n bytes costs with glibc's malloc on LP64: n plus its 8-byte chunk
 * header, rounded up to 16 bytes, at least 32. The tables charge each entry this much. */
#define TG_STORE_ALLOC_COST(n)                                                                     \
    ((n) + 8 + 15 < 32 ? (size_t)32 : ((size_t)(n) + 8 + 15) & ~(size_t)15)

typedef struct tg_store tg_store_t;       /* idempotency entries and nonces */
typedef struct tg_receipts tg_receipts_t; /* executionId -> ledger position */

/* Zero-initialise and set what you need; every 0 field takes its default. Both table types
 * take these options (for the receipt index, max_key_len bounds the execution id). */
typedef struct tg_store_opts {
    size_t shards;        /* power of two, 1..TG_STORE_MAX_SHARDS; 0 = 64 */
    size_t max_entries;   /* entries in the table in total; 0 = 1,000,000 */
    size_t max_bytes;     /* their cost (header comment); 0 = 512 MiB */
    int64_t retention_ms; /* > 0; 0 = 24 h */
    size_t max_key_len;   /* 1..1024; 0 = 255 */
} tg_store_opts_t;

/* Creates an empty table (opts NULL = all defaults). Seeds the bucket hash key from
 * randombytes_buf (calls sodium_init). Allocates the shard and bucket arrays up front
 * (about 8 bytes per max_entries plus 64 bytes per shard).
 * Errors: TG_ERR_INVALID_ARG (out NULL), TG_ERR_CONFIG (an option out of range; diag says
 * which), TG_ERR_CRYPTO (sodium_init failed), TG_ERR_NOMEM. *out is NULL on error.
 * Not thread-safe with respect to the table it creates (nobody else has it yet). */
tg_err_t tg_store_create(tg_store_t **out, const tg_store_opts_t *opts,
                         tg_diag_t *diag) TG_MUST_USE;
tg_err_t tg_receipts_create(tg_receipts_t **out, const tg_store_opts_t *opts,
                            tg_diag_t *diag) TG_MUST_USE;

/* Frees every entry and the table. NULL-safe. No other thread may use the table. */
void tg_store_destroy(tg_store_t *s);
void tg_receipts_destroy(tg_receipts_t *r);

/* The effective max_key_len (after defaults), for callers that validate before calling;
 * 0 for NULL. Thread-safe. */
size_t tg_store_max_key_len(const tg_store_t *s);

/* ------------------------------------------------------------------ idempotency */

typedef enum tg_idem_state {
    TG_IDEM_NONE = 0,   /* begin failed; nothing held */
    TG_IDEM_NEW = 1,    /* first sighting: a reservation is held, caller must complete/abort */
    TG_IDEM_REPLAY = 2, /* same key, same request hash, completed: replay the stored entry */
} tg_idem_state_t;

/* A DONE idempotency entry: what the request was, what it answered, where its record is. */
typedef struct tg_idem_entry {
    uint8_t request_hash[32];
    int status;           /* the HTTP status stored at complete, 100..599 */
    tg_ledger_pos_t pos;  /* the ledger record the response is rebuilt from */
    int64_t stored_at_ms; /* when it was completed (retention counts from here) */
} tg_idem_entry_t;

/* Output of tg_store_idem_begin: the state, and for REPLAY a copy of the entry (all zero
 * otherwise). Plain data: nothing to free. */
typedef struct tg_idem_result {
    tg_idem_state_t state;
    tg_idem_entry_t entry;
} tg_idem_result_t;

/* Looks up (tenant, key) and reserves it if absent or expired.
 *   TG_OK, res->state = TG_IDEM_NEW      reservation held (IN_FLIGHT, stamped now_ms)
 *   TG_OK, res->state = TG_IDEM_REPLAY   DONE entry with the same request_hash, copied into
 *                                        res->entry
 *   TG_ERR_CONFLICT                      live entry with a different request_hash (in flight
 *                                        or done)
 *   TG_ERR_IN_FLIGHT                     same request_hash, first request still in flight
 *   TG_ERR_LIMIT                         table full (max_entries or max_bytes); nothing held
 *   TG_ERR_INVALID_ARG                   NULL pointer, tenant_len not 1..TG_STORE_TENANT_MAX,
 *                                        key_len not 1..max_key_len
 *   TG_ERR_NOMEM                         allocation failed; nothing held
 * res is always written (state NONE on any error). tenant and key are arbitrary bytes (no
 * NUL terminator needed). Thread-safe. */
tg_err_t tg_store_idem_begin(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) TG_MUST_USE;

/* Completes a reservation returned as NEW: the entry becomes DONE with status and *pos,
 * stamped now_ms (retention counts from here). Allocates nothing.
 *   TG_OK
 *   TG_ERR_NOT_FOUND     no IN_FLIGHT reservation for (tenant, key) (never begun, already
 *                        completed or aborted): a caller bug; nothing changes
 *   TG_ERR_INVALID_ARG   bad pointers/lengths (pos NULL), status outside 100..599
 * On error the reservation is left as it was. Thread-safe. */
tg_err_t tg_store_idem_complete(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *key, size_t key_len, int status,
                                const tg_ledger_pos_t *pos, int64_t now_ms) TG_MUST_USE;

/* Drops an IN_FLIGHT reservation so a retry can run (use when the request ended without a
 * durable outcome, e.g. a 5xx before the ledger append). DONE entries are never dropped.
 * TG_OK, TG_ERR_NOT_FOUND (no IN_FLIGHT reservation for the key), TG_ERR_INVALID_ARG.
 * Thread-safe. */
tg_err_t tg_store_idem_abort(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len) TG_MUST_USE;

/* Rebuild from the ledger at startup: inserts *entry as a DONE entry stamped
 * entry->stored_at_ms. Entries already past retention at now_ms are skipped (TG_OK, nothing
 * stored). If a DONE entry for the key exists, the one with the later stored_at_ms wins (a
 * key reused after its retention appears twice in the ledger). TG_ERR_IN_FLIGHT if a
 * reservation is held for the key (restore ran concurrently with traffic: a caller bug),
 * TG_ERR_LIMIT (full), TG_ERR_INVALID_ARG (as begin; entry NULL; status outside 100..599),
 * TG_ERR_NOMEM. Thread-safe. */
tg_err_t tg_store_idem_restore(tg_store_t *s, const char *tenant, size_t tenant_len,
                               const char *key, size_t key_len, const tg_idem_entry_t *entry,
                               int64_t now_ms) TG_MUST_USE;

/* ------------------------------------------------------------------ nonces */

/* Consumes (tenant, nonce): TG_OK the first time within retention (the nonce is now
 * recorded, stamped now_ms); TG_ERR_REPLAY if it is live already; TG_ERR_LIMIT (full,
 * nothing recorded); TG_ERR_INVALID_ARG (lengths as for keys); TG_ERR_NOMEM. Thread-safe. */
tg_err_t tg_store_nonce_use(tg_store_t *s, const char *tenant, size_t tenant_len, const char *nonce,
                            size_t nonce_len, int64_t now_ms) TG_MUST_USE;

/* Un-consumes a nonce recorded by tg_store_nonce_use for a request that failed before
 * anything about it became durable (see the header comment). TG_OK, TG_ERR_NOT_FOUND (not
 * recorded), TG_ERR_INVALID_ARG. Thread-safe. */
tg_err_t tg_store_nonce_release(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *nonce, size_t nonce_len) TG_MUST_USE;

/* Rebuild from the ledger: records the nonce stamped used_at_ms unless already past
 * retention at now_ms (then TG_OK, nothing stored). An existing record keeps the later
 * stamp. TG_OK, TG_ERR_LIMIT, TG_ERR_INVALID_ARG, TG_ERR_NOMEM. Thread-safe. */
tg_err_t tg_store_nonce_restore(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *nonce, size_t nonce_len, int64_t used_at_ms,
                                int64_t now_ms) TG_MUST_USE;

/* ------------------------------------------------------------------ the receipt index */

/* Indexes (tenant, id) -> *pos, stamped stamp_ms, live (after the record is durable) and
 * while the index is rebuilt from the ledger at start. An id names one record for good, so a
 * live id is never repointed ("later wins" would silently move it to whatever came last).
 *   TG_OK               inserted; or stamp_ms is past retention at now_ms (nothing stored);
 *                       or the id is live at this very position (the same record indexed
 *                       twice: nothing changes)
 *   TG_ERR_CONFLICT     the id is live at another position. It is kept as it was; *existing
 *                       (if not NULL) receives that position
 *   TG_ERR_LIMIT        index full (max_entries or max_bytes); nothing stored
 *   TG_ERR_INVALID_ARG  NULL pointer (pos), lengths as for keys
 *   TG_ERR_NOMEM
 * existing may be NULL; otherwise it is always written (all zero unless CONFLICT).
 * Thread-safe. */
tg_err_t tg_receipts_insert(tg_receipts_t *r, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                            int64_t now_ms, tg_ledger_pos_t *existing) TG_MUST_USE;

/* Looks up (tenant, id): TG_OK with *pos set; TG_ERR_NOT_FOUND (absent or expired at now_ms;
 * *pos all zero); TG_ERR_INVALID_ARG. Reserves and allocates nothing. Thread-safe. */
tg_err_t tg_receipts_get(tg_receipts_t *r, const char *tenant, size_t tenant_len, const char *id,
                         size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) TG_MUST_USE;

/* A hint, not a reservation: whether the caps would admit one more entry for an id of
 * id_len bytes of a tenant_len-byte tenant right now (a concurrent insert may still take the
 * room first). Lets a caller refuse work whose result it must index, before doing it.
 * Thread-safe, lock-free. */
bool tg_receipts_has_room(const tg_receipts_t *r, size_t tenant_len, size_t id_len);

/* ------------------------------------------------------------------ maintenance */

/* Reclaims expired entries (DONE idempotency entries, nonces, index entries; never IN_FLIGHT
 * reservations), oldest first, up to the first live one in each shard: with a clock that
 * never steps backwards that is every expired entry; after a backward step of d ms, entries
 * stamped before it may be reclaimed up to d ms late, and an entry restored with a stamp
 * older than entries already in its shard waits for them (either way they read as absent
 * once expired).
 * Locks one shard at a time for at most TG_STORE_SWEEP_CHUNK reclaimed entries. Returns the
 * number of entries reclaimed; 0 for NULL. Thread-safe. */
size_t tg_store_sweep(tg_store_t *s, int64_t now_ms);
size_t tg_receipts_sweep(tg_receipts_t *r, int64_t now_ms);

/* Point-in-time counters of one table, for /metrics and the start's capacity check.
 * entries/bytes include expired entries not yet reclaimed. Per-kind counts are summed shard
 * by shard (each shard locked briefly), so under concurrent traffic they are approximate. */
typedef struct tg_store_stats {
    uint64_t entries;           /* entries held */
    uint64_t max_entries;       /* capacity */
    uint64_t bytes;             /* their cost (header comment) */
    uint64_t max_bytes;         /* the cap on it */
    uint64_t idem_in_flight;    /* tg_store_t: reservations held (NEW, not yet settled) */
    uint64_t idem_done;         /* tg_store_t: completed idempotency entries */
    uint64_t nonces;            /* tg_store_t: nonce entries */
    uint64_t receipts;          /* tg_receipts_t: index entries */
    uint64_t limit_rejections;  /* TG_ERR_LIMIT answers since create (entries or bytes) */
    uint64_t expired_reclaimed; /* expired entries freed (lazily or by sweep) since create */
} tg_store_stats_t;

/* Fills *out (all zero for a NULL table; out NULL is ignored). Thread-safe. */
/* One live entry, as tg_store_each / tg_receipts_each hand it out (pointers valid during the
 * call only): the arguments that tg_store_idem_restore, tg_store_nonce_restore or
 * tg_receipts_insert would take to put it back. */
enum { TG_STORE_ITEM_KEY = 1, TG_STORE_ITEM_NONCE = 2, TG_STORE_ITEM_RECEIPT = 3 };
typedef struct tg_store_item {
    int kind;
    const char *tenant;
    size_t tenant_len;
    const char *key; /* the idempotency key, nonce or executionId */
    size_t key_len;
    int64_t stamp_ms;            /* stored_at / used_at / the receipt's stamp */
    int status;                  /* KEY */
    const uint8_t *request_hash; /* KEY: 32 bytes; NULL otherwise */
    tg_ledger_pos_t pos;         /* KEY, RECEIPT */
} tg_store_item_t;
typedef tg_err_t (*tg_store_each_fn)(void *ud, const tg_store_item_t *it);

/* Calls fn for every DONE entry live at now_ms (in-flight reservations are not state a
 * restart keeps), oldest stamp first across the whole table, so that restoring them in this
 * order leaves every shard's age list in stamp order (tg_store_sweep); stops at and returns
 * fn's first error. Holds every shard's lock for the whole walk: for a table no request
 * uses (a snapshot's private copy, snapshot.h); fn must not call the table. TG_ERR_NOMEM.
 * Thread-safe. */
tg_err_t tg_store_each(tg_store_t *s, int64_t now_ms, tg_store_each_fn fn, void *ud) TG_MUST_USE;
tg_err_t tg_receipts_each(tg_receipts_t *r, int64_t now_ms, tg_store_each_fn fn,
                          void *ud) TG_MUST_USE;

/* Which of nparts parts (shard index mod nparts) the entry (kind a TG_STORE_ITEM_*) falls
 * in: threads that restore disjoint parts never share a shard, so each shard still gets its
 * entries in the order given (snapshot loading). 0 for arguments a restore would refuse.
 * Pure; thread-safe. */
unsigned tg_store_part(const tg_store_t *s, int kind, const char *tenant, size_t tenant_len,
                       const char *key, size_t key_len, unsigned nparts);
unsigned tg_receipts_part(const tg_receipts_t *r, const char *tenant, size_t tenant_len,
                          const char *id, size_t id_len, unsigned nparts);

void tg_store_stats(const tg_store_t *s, tg_store_stats_t *out);
void tg_receipts_stats(const tg_receipts_t *r, tg_store_stats_t *out);

/* ---- How fast a table fills (the daemon's tick; /metrics) ----
 * A table that fills answers 503 to every new key until entries age out (--retention), so
 * an operator needs to see it coming: the net growth rate (inserts minus reclaims, from
 * successive stats) smoothed over about a minute, and the time left until entries or bytes
 * reach their cap at that rate. Pure arithmetic over the samples it is given; the caller
 * serializes the calls (one thread samples). */
#define TG_STORE_FILL_TAU_MS 60000    /* the smoothing's time constant */
#define TG_STORE_FILL_MIN_STEP_MS 500 /* samples closer than this to the last are ignored */

typedef struct tg_store_fill {
    int64_t last_ms;
    uint64_t last_entries, last_bytes;
    double entries_per_s; /* smoothed net growth; negative while the table drains */
    double bytes_per_s;
    bool primed; /* a first sample was taken */
    bool rated;  /* a rate exists (two samples) */
} tg_store_fill_t;

/* Takes one sample of st at now_ms. A sample taken less than TG_STORE_FILL_MIN_STEP_MS after
 * the last is ignored; one from before the last (the clock stepped back) restarts the
 * estimate from it. f NULL or st NULL is ignored. */
void tg_store_fill_sample(tg_store_fill_t *f, int64_t now_ms, const tg_store_stats_t *st);

/* Seconds until the table is full at the smoothed rate: the sooner of entries and bytes
 * reaching their caps (0 when already at one). Returns -1 when it is not filling (no rate
 * yet, a rate <= 0, no cap) — "never at this rate". */
double tg_store_fill_seconds_to_full(const tg_store_fill_t *f, const tg_store_stats_t *st);

#endif /* TRIGGUARD_STORE_H */
