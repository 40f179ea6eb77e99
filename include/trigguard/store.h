/* store.h — per-tenant idempotency and nonce tables: sharded, bounded, with retention.
 *
 * Model. One store holds two kinds of entries, both keyed by (tenant, key) compared byte for
 * byte (the hash only picks a bucket; tenants can never see, replay or collide with each
 * other's entries, and an idempotency key never collides with a nonce of the same text):
 *
 *   idempotency entry  (tenant, key) -> request_hash, state IN_FLIGHT | DONE, and once DONE
 *                      the HTTP status + response body to replay byte for byte;
 *   nonce entry        (tenant, nonce) -> first-use time.
 *
 * Sharding. N shards (power of two) chosen by a keyed SipHash (libsodium crypto_shorthash,
 * random key per store, so callers cannot engineer collisions) of kind, tenant and key; one
 * mutex per shard, held for a hash-chain walk and an O(1) insert/unlink (plus a body copy for
 * a replay). Each shard has a chained hash table whose bucket array is pre-sized at create
 * from max_entries, so it never rehashes. No global lock; the only shared writes on the hot
 * path are two relaxed atomic counters (entries, bytes) that enforce the caps exactly.
 *
 * Time. Every call takes now_ms from the caller (Unix wall-clock milliseconds, the clock the
 * ledger's timestamps use, so entries rebuilt from the ledger age correctly). An entry
 * stamped at t is live while now_ms - t < retention_ms and expired from now_ms - t >=
 * retention_ms (at t + retention_ms - 1 it is still there). A clock that steps backwards
 * only makes entries live longer (fail closed). Expired entries behave exactly as absent;
 * their memory is reclaimed lazily when a lookup walks past them and by tg_store_sweep.
 *
 * Idempotency lifecycle (three phases):
 *   begin    -> NEW (a reservation is now held: IN_FLIGHT) | REPLAY | CONFLICT | IN_FLIGHT
 *   complete -> IN_FLIGHT becomes DONE with the response; retention counts from complete
 *   abort    -> IN_FLIGHT reservation dropped (nothing durable was produced); a retry runs
 * An IN_FLIGHT reservation NEVER expires, by TTL or by sweep: it ends only by complete or
 * abort. Expiring it while the first request may still finish would let a duplicate run
 * and authorize the same request twice; a stuck reservation instead costs one slot and
 * answers 409 to retries (fail closed). The daemon must therefore call complete or abort
 * exactly once after every NEW, on every path (including aborted connections: do it in the
 * libmicrohttpd completion callback). tg_store_stats reports idem_in_flight so a leak is
 * visible. Reservations are in memory only; a restart forgets them and rebuilds DONE
 * entries from the ledger (tg_store_idem_restore).
 *
 * Nonce choice: a nonce is consumed when first presented (tg_store_nonce_use), whatever
 * happens to the request afterwards; a second presentation within retention is a replay
 * (SPEC §3.3 step 6). The one exception is tg_store_nonce_release, for a request that
 * failed before anything about it became durable (e.g. 5xx because the ledger is down): it
 * makes the live table match what a restart would rebuild from the ledger, where that nonce
 * does not appear. Never release after the ledger append succeeded.
 *
 * Capacity (fail closed, never evict): max_entries counts idempotency entries (in flight
 * or done) plus nonces; max_bytes bounds their memory (entry header + key + stored body).
 * When a new entry would exceed either, the call fails with TG_ERR_LIMIT and changes
 * nothing: evicting live entries would silently re-enable replays. Expired entries still
 * count until reclaimed, so the daemon should call tg_store_sweep periodically (serve does
 * every 100 ms, so that each call reclaims a small batch). A sweep costs what it reclaims, not the
 * size of the table, and holds each shard lock for at most TG_STORE_SWEEP_CHUNK reclaimed entries
 * at a time. Per-item limits (key length, response length) are caller errors (TG_ERR_INVALID_ARG):
 * validate them first with tg_store_max_key_len / the configured response limit so that
 * TG_ERR_LIMIT from this module always means "table full" (map it to 503).
 *
 * Thread safety: every function except tg_store_create/tg_store_destroy is thread-safe and
 * may be called concurrently from any number of threads. Pointers passed in are only read
 * during the call; the store copies what it keeps.
 */
#ifndef TRIGGUARD_STORE_H
#define TRIGGUARD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"

#define TG_STORE_DEFAULT_SHARDS 64
#define TG_STORE_MAX_SHARDS 4096
#define TG_STORE_DEFAULT_MAX_ENTRIES 1000000
#define TG_STORE_DEFAULT_MAX_BYTES ((size_t)512 * 1024 * 1024)
#define TG_STORE_DEFAULT_RETENTION_MS (INT64_C(24) * 60 * 60 * 1000)
#define TG_STORE_DEFAULT_MAX_KEY_LEN 255 /* idempotency keys and nonces, bytes */
#define TG_STORE_MAX_KEY_LEN_LIMIT 1024  /* largest max_key_len accepted */
#define TG_STORE_DEFAULT_MAX_RESPONSE_LEN ((size_t)64 * 1024)
#define TG_STORE_MAX_RESPONSE_LEN_LIMIT ((size_t)16 * 1024 * 1024)
#define TG_STORE_TENANT_MAX 64   /* bytes; same bound as guard's tenant names */
#define TG_STORE_SWEEP_CHUNK 256 /* entries reclaimed per shard-lock hold in a sweep */

typedef struct tg_store tg_store_t;

/* Zero-initialise and set what you need; every 0 field takes its default. */
typedef struct tg_store_opts {
    size_t shards;           /* power of two, 1..TG_STORE_MAX_SHARDS; 0 = 64 */
    size_t max_entries;      /* idempotency + nonce entries in total; 0 = 1,000,000 */
    size_t max_bytes;        /* memory for entries incl. stored bodies; 0 = 512 MiB */
    int64_t retention_ms;    /* > 0; 0 = 24 h */
    size_t max_key_len;      /* 1..1024; 0 = 255 */
    size_t max_response_len; /* 1..16 MiB; 0 = 64 KiB */
} tg_store_opts_t;

/* Creates an empty store (opts NULL = all defaults). Seeds the bucket hash key from
 * randombytes_buf (calls sodium_init). Allocates the shard and bucket arrays up front
 * (about 8 bytes per max_entries plus 64 bytes per shard).
 * Errors: TG_ERR_INVALID_ARG (out NULL), TG_ERR_CONFIG (an option out of range; diag says
 * which), TG_ERR_CRYPTO (sodium_init failed), TG_ERR_NOMEM. *out is NULL on error.
 * Not thread-safe with respect to the store it creates (nobody else has it yet). */
tg_err_t tg_store_create(tg_store_t **out, const tg_store_opts_t *opts,
                         tg_diag_t *diag) TG_MUST_USE;

/* Frees every entry and the store. NULL-safe. No other thread may use the store. */
void tg_store_destroy(tg_store_t *s);

/* The effective max_key_len and max_response_len (after defaults), for callers that
 * validate before calling. Thread-safe. */
size_t tg_store_max_key_len(const tg_store_t *s);
size_t tg_store_max_response_len(const tg_store_t *s);

typedef enum tg_idem_state {
    TG_IDEM_NONE = 0,   /* begin failed; nothing held */
    TG_IDEM_NEW = 1,    /* first sighting: a reservation is held, caller must complete/abort */
    TG_IDEM_REPLAY = 2, /* same key, same request hash, completed: replay status + body */
} tg_idem_state_t;

/* Output of tg_store_idem_begin. body is malloc'd (one extra NUL byte after body_len, not
 * counted), owned by the caller and released by tg_idem_result_free; a caller may instead
 * take it over (e.g. MHD_RESPMEM_MUST_FREE) and set body to NULL. */
typedef struct tg_idem_result {
    tg_idem_state_t state;
    int status;           /* REPLAY: the stored HTTP status */
    char *body;           /* REPLAY: copy of the stored response body; else NULL */
    size_t body_len;      /* REPLAY: its length */
    int64_t stored_at_ms; /* REPLAY: when the response was stored */
} tg_idem_result_t;

/* Frees res->body and resets *res to TG_IDEM_NONE. NULL-safe; safe to call twice. */
void tg_idem_result_free(tg_idem_result_t *res);

/* Looks up (tenant, key) and reserves it if absent or expired.
 *   TG_OK, res->state = TG_IDEM_NEW      reservation held (IN_FLIGHT, stamped now_ms)
 *   TG_OK, res->state = TG_IDEM_REPLAY   DONE entry with the same request_hash: res holds a
 *                                        copy of status and body (free it)
 *   TG_ERR_CONFLICT                      live entry with a different request_hash (in flight
 *                                        or done)
 *   TG_ERR_IN_FLIGHT                     same request_hash, first request still in flight
 *   TG_ERR_LIMIT                         store full (max_entries or max_bytes); nothing held
 *   TG_ERR_INVALID_ARG                   NULL pointer, tenant_len not 1..TG_STORE_TENANT_MAX,
 *                                        key_len not 1..max_key_len
 *   TG_ERR_NOMEM                         allocation failed; nothing held
 * res is always written (state NONE on any error). tenant and key are arbitrary bytes (no
 * NUL terminator needed). Thread-safe. */
tg_err_t tg_store_idem_begin(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) TG_MUST_USE;

/* Stores the response for a reservation returned as NEW: the entry becomes DONE, stamped
 * now_ms (retention counts from here). body is copied (body may be NULL when body_len 0).
 *   TG_OK
 *   TG_ERR_NOT_FOUND     no IN_FLIGHT reservation for (tenant, key) (never begun, already
 *                        completed or aborted): a caller bug; nothing changes
 *   TG_ERR_INVALID_ARG   bad pointers/lengths, status outside 100..599,
 *                        body_len > max_response_len
 *   TG_ERR_LIMIT         storing the body would exceed max_bytes
 *   TG_ERR_NOMEM
 * On any error the reservation is left IN_FLIGHT, untouched; the caller then decides
 * (normally tg_store_idem_abort if nothing durable happened, otherwise keep it: retries get
 * 409, which is the fail-closed answer). Thread-safe. */
tg_err_t tg_store_idem_complete(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *key, size_t key_len, int status, const char *body,
                                size_t body_len, int64_t now_ms) TG_MUST_USE;

/* Drops an IN_FLIGHT reservation so a retry can run (use when the request ended without a
 * durable outcome, e.g. a 5xx before the ledger append). DONE entries are never dropped.
 * TG_OK, TG_ERR_NOT_FOUND (no IN_FLIGHT reservation for the key), TG_ERR_INVALID_ARG.
 * Thread-safe. */
tg_err_t tg_store_idem_abort(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len) TG_MUST_USE;

/* Read-only lookup of a DONE entry by (tenant, key), whatever its request hash (e.g. an index
 * from execution id to ledger position kept with tg_store_idem_restore). Reserves nothing and
 * counts against no cap. TG_OK with res->state = TG_IDEM_REPLAY (status, body copy,
 * stored_at_ms: free with tg_idem_result_free); TG_ERR_NOT_FOUND (absent, expired at now_ms,
 * or still IN_FLIGHT); TG_ERR_INVALID_ARG; TG_ERR_NOMEM. res is always written. Thread-safe. */
tg_err_t tg_store_idem_get(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                           size_t key_len, int64_t now_ms, tg_idem_result_t *res) TG_MUST_USE;

/* Rebuild from the ledger at startup: inserts a DONE entry stamped stored_at_ms.
 * Entries already past retention at now_ms are skipped (TG_OK, nothing stored). If a DONE
 * entry for the key exists, the one with the later stored_at_ms wins (a key reused after
 * its retention appears twice in the ledger). TG_ERR_IN_FLIGHT if a reservation is held
 * for the key (restore ran concurrently with traffic: a caller bug), TG_ERR_LIMIT (full),
 * TG_ERR_INVALID_ARG (as begin/complete), TG_ERR_NOMEM. Thread-safe. */
tg_err_t tg_store_idem_restore(tg_store_t *s, const char *tenant, size_t tenant_len,
                               const char *key, size_t key_len, const uint8_t request_hash[32],
                               int status, const char *body, size_t body_len, int64_t stored_at_ms,
                               int64_t now_ms) TG_MUST_USE;

/* Insert that never reassigns a key, for an index whose keys name one thing for good (the
 * receipt index: executionId -> ledger position). Inserts a DONE entry stamped
 * stored_at_ms unless the key is live already; restore's "later wins" would instead
 * silently repoint the key at whatever came last.
 *   TG_OK               inserted; or stored_at_ms is past retention at now_ms (nothing
 *                       stored); or a live DONE entry holds this very status and body byte
 *                       for byte (nothing changes: the same record indexed twice)
 *   TG_ERR_CONFLICT     a live DONE entry holds another status or body. It is kept as it
 *                       was; existing (if not NULL) receives a copy of it, state REPLAY,
 *                       to be freed with tg_idem_result_free
 *   TG_ERR_IN_FLIGHT    a reservation is held for the key
 *   TG_ERR_LIMIT, TG_ERR_INVALID_ARG, TG_ERR_NOMEM as tg_store_idem_restore (NOMEM also
 *                       when the conflicting entry could not be copied)
 * existing may be NULL; otherwise it is always written (state NONE unless CONFLICT).
 * Thread-safe. */
tg_err_t tg_store_idem_insert(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                              size_t key_len, const uint8_t request_hash[32], int status,
                              const char *body, size_t body_len, int64_t stored_at_ms,
                              int64_t now_ms, tg_idem_result_t *existing) TG_MUST_USE;

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

/* Reclaims expired DONE idempotency entries and expired nonces (never IN_FLIGHT
 * reservations), oldest first, up to the first live one in each shard: with a clock that
 * never steps backwards that is every expired entry; after a backward step of d ms, entries
 * stamped before it may be reclaimed up to d ms late, and an entry restored with a stamp
 * older than entries already in its shard waits for them (either way they read as absent
 * once expired).
 * Locks one shard at a time for at most TG_STORE_SWEEP_CHUNK reclaimed entries. Returns the
 * number of entries reclaimed. Thread-safe. */
size_t tg_store_sweep(tg_store_t *s, int64_t now_ms);

/* A hint, not a reservation: whether the caps would admit one more entry of about bytes
 * bytes right now (a concurrent insert may still take the room first). Lets a caller refuse
 * work whose result it must store, before doing it. Thread-safe, lock-free. */
bool tg_store_has_room(const tg_store_t *s, size_t bytes);

/* Point-in-time counters for /metrics. entries/bytes include expired entries not yet
 * reclaimed. Per-kind counts are summed shard by shard (each shard locked briefly), so
 * under concurrent traffic they are approximate. */
typedef struct tg_store_stats {
    uint64_t entries;           /* idempotency + nonce entries held */
    uint64_t max_entries;       /* capacity */
    uint64_t bytes;             /* memory accounted to entries */
    uint64_t max_bytes;         /* memory cap */
    uint64_t idem_in_flight;    /* reservations held (NEW without complete/abort yet) */
    uint64_t idem_done;         /* completed idempotency entries */
    uint64_t nonces;            /* nonce entries */
    uint64_t limit_rejections;  /* TG_ERR_LIMIT answers since create (entries or bytes) */
    uint64_t expired_reclaimed; /* expired entries freed (lazily or by sweep) since create */
} tg_store_stats_t;

/* Fills *out. Thread-safe. */
void tg_store_stats(const tg_store_t *s, tg_store_stats_t *out);

#endif /* TRIGGUARD_STORE_H */
