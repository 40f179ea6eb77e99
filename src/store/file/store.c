/* store.c — sharded idempotency, nonce and receipt-index tables with retention and hard caps. */
#include "trigguard/store.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { KIND_IDEM = 1, KIND_NONCE = 2, KIND_RECEIPT = 3 };
enum { ST_IN_FLIGHT = 1, ST_DONE = 2 };

/* What every entry starts with. A nonce is only this; the other kinds' values follow it in
 * the same allocation (idem_entry_t, receipt_entry_t), then the tenant and key bytes. */
typedef struct entry {
    struct entry *next;     /* bucket chain */
    struct entry **pprev;   /* the slot that points at this entry, so unlinking needs no walk */
    struct entry *age_prev; /* the shard's age list: oldest stamp first (see tg_store_sweep) */
    struct entry *age_next;
    uint64_t hash;
    int64_t stamp_ms; /* reservation time while in flight, then store / first-use time */
    uint16_t key_len;
    uint16_t status; /* DONE idempotency entries; here because it fits what would be padding */
    uint8_t tenant_len;
    uint8_t kind;
    uint8_t state;
    uint8_t name_off; /* where the tenant bytes begin: the size of the kind's struct */
} entry_t;

typedef struct idem_entry {
    entry_t h;
    uint8_t request_hash[32];
    tg_ledger_pos_t pos; /* once DONE */
} idem_entry_t;

typedef struct receipt_entry {
    entry_t h;
    tg_ledger_pos_t pos;
} receipt_entry_t;

/* The sizes store.h's table of costs is made of. */
_Static_assert(sizeof(void *) != 8 || sizeof(entry_t) == 56, "store.h: 56-byte entry header");
_Static_assert(sizeof(void *) != 8 || sizeof(idem_entry_t) == 112, "store.h: idempotency 112");
_Static_assert(sizeof(void *) != 8 || sizeof(receipt_entry_t) == 80, "store.h: receipt 80");
_Static_assert(sizeof(idem_entry_t) <= UINT8_MAX, "name_off holds every kind's struct size");

typedef struct shard {
    _Alignas(64) pthread_mutex_t mu;
    entry_t **buckets;
    entry_t *age_head; /* every entry of the shard, in the order their stamps were set */
    entry_t *age_tail;
    size_t in_flight; /* counts below are guarded by mu */
    size_t done;
    size_t nonces;
    size_t receipts;
} shard_t;

struct tg_store {
    shard_t *shards;
    size_t nshards;
    unsigned shard_bits;
    size_t nbuckets;  /* per shard, power of two */
    void *bucket_map; /* one mapping holds every shard's bucket array */
    size_t bucket_map_len;
    size_t max_entries;
    size_t max_bytes;
    size_t max_key_len;
    int64_t retention_ms;
    unsigned char hkey[crypto_shorthash_KEYBYTES];
    _Alignas(64) atomic_size_t entries;
    atomic_size_t bytes;
    _Alignas(64) atomic_uint_fast64_t limit_rejections;
    atomic_uint_fast64_t expired_reclaimed;
};

/* The receipt index is a table of its own type, so that no idempotency or nonce call can be
 * made on it; its engine is the same. t is the first member: the two share an address. */
struct tg_receipts {
    struct tg_store t;
};

/* A lookup key: everything that identifies an entry, plus its hash. */
typedef struct lookup {
    uint8_t kind;
    const char *tenant;
    size_t tenant_len;
    const char *key;
    size_t key_len;
    uint64_t hash;
} lookup_t;

static bool is_pow2(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

static size_t next_pow2(size_t v) {
    size_t p = 1;
    while (p < v && p < ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
        p <<= 1;
    }
    return p;
}

/* Creates a table in a zeroed allocation of `size` bytes (a struct tg_store, or a struct
 * that begins with one), so both table types share one constructor. */
static tg_err_t table_create(tg_store_t **out, size_t size, const tg_store_opts_t *opts,
                             tg_diag_t *diag) {
    tg_store_opts_t o = {0};
    tg_store_t *s = NULL;
    size_t i = 0;
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "store: out is NULL");
    }
    *out = NULL;
    if (opts != NULL) {
        o = *opts;
    }
    if (o.shards == 0) {
        o.shards = TG_STORE_DEFAULT_SHARDS;
    }
    if (o.max_entries == 0) {
        o.max_entries = TG_STORE_DEFAULT_MAX_ENTRIES;
    }
    if (o.max_bytes == 0) {
        o.max_bytes = TG_STORE_DEFAULT_MAX_BYTES;
    }
    if (o.retention_ms == 0) {
        o.retention_ms = TG_STORE_DEFAULT_RETENTION_MS;
    }
    if (o.max_key_len == 0) {
        o.max_key_len = TG_STORE_DEFAULT_MAX_KEY_LEN;
    }
    if (!is_pow2(o.shards) || o.shards > TG_STORE_MAX_SHARDS) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "store: shards must be a power of two in 1..%d (got %zu)",
                           TG_STORE_MAX_SHARDS, o.shards);
    }
    if (o.max_entries > ((size_t)1 << 32)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "store: max_entries %zu is above 2^32",
                           o.max_entries);
    }
    if (o.retention_ms < 0) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "store: retention_ms must be positive");
    }
    if (o.max_key_len > TG_STORE_MAX_KEY_LEN_LIMIT) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "store: max_key_len %zu is above %d", o.max_key_len,
                           TG_STORE_MAX_KEY_LEN_LIMIT);
    }
    if (sodium_init() < 0) {
        return tg_diag_set(diag, TG_ERR_CRYPTO, "store: sodium_init failed");
    }

    s = aligned_alloc(64, (size + 63) / 64 * 64);
    if (s == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "store: out of memory");
    }
    memset(s, 0, size);
    s->nshards = o.shards;
    while (((size_t)1 << s->shard_bits) < o.shards) {
        s->shard_bits++;
    }
    /* Load factor <= 1 at the cap, so chains stay short without ever rehashing. */
    s->nbuckets = next_pow2((o.max_entries + o.shards - 1) / o.shards);
    if (s->nbuckets < 16) {
        s->nbuckets = 16;
    }
    s->max_entries = o.max_entries;
    s->max_bytes = o.max_bytes;
    s->max_key_len = o.max_key_len;
    s->retention_ms = o.retention_ms;
    randombytes_buf(s->hkey, sizeof s->hkey);
    atomic_init(&s->entries, 0);
    atomic_init(&s->bytes, 0);
    atomic_init(&s->limit_rejections, 0);
    atomic_init(&s->expired_reclaimed, 0);

    s->shards = aligned_alloc(64, o.shards * sizeof(shard_t));
    if (s->shards == NULL) {
        goto nomem;
    }
    memset(s->shards, 0, o.shards * sizeof(shard_t));
    /* Every lookup lands on a random bucket of a table that is 32 MB at the default
     * capacity: with 4 KiB pages nearly each one is a TLB miss, and a costly one in a VM.
     * So the arrays share one mapping, aligned to 2 MiB and offered to transparent huge
     * pages (best effort: where THP is off this is an ordinary zeroed mapping). */
    {
        const size_t huge = (size_t)2 << 20;
        size_t want = o.shards * s->nbuckets * sizeof(entry_t *);
        s->bucket_map_len = want + huge;
        s->bucket_map = mmap(NULL, s->bucket_map_len, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s->bucket_map == MAP_FAILED) {
            s->bucket_map = NULL;
            goto nomem;
        }
        uintptr_t base = ((uintptr_t)s->bucket_map + huge - 1) & ~(uintptr_t)(huge - 1);
#ifdef MADV_HUGEPAGE
        (void)madvise((void *)base, want, MADV_HUGEPAGE);
#endif
        for (i = 0; i < o.shards; i++) {
            s->shards[i].buckets = (entry_t **)base + i * s->nbuckets;
        }
    }
    for (i = 0; i < o.shards; i++) {
        if (pthread_mutex_init(&s->shards[i].mu, NULL) != 0) {
            goto nomem;
        }
    }
    *out = s;
    return TG_OK;

nomem:
    s->nshards = i; /* only the shards fully initialised are torn down */
    tg_store_destroy(s);
    return tg_diag_set(diag, TG_ERR_NOMEM, "store: out of memory");
}

tg_err_t tg_store_create(tg_store_t **out, const tg_store_opts_t *opts, tg_diag_t *diag) {
    return table_create(out, sizeof(struct tg_store), opts, diag);
}

tg_err_t tg_receipts_create(tg_receipts_t **out, const tg_store_opts_t *opts, tg_diag_t *diag) {
    tg_store_t *t = NULL;
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "store: out is NULL");
    }
    tg_err_t rc = table_create(&t, sizeof(struct tg_receipts), opts, diag);
    *out = (tg_receipts_t *)t; /* t is the first member of the allocation's tg_receipts */
    return rc;
}

void tg_store_destroy(tg_store_t *s) {
    if (s == NULL) {
        return;
    }
    if (s->shards != NULL) {
        /* Every entry is on its shard's age list (age_append is the only way in), so the
         * teardown costs what the table holds. Walking the bucket arrays instead read every
         * page of them: hundreds of MB of untouched zero pages for a table sized from memory,
         * which under ThreadSanitizer took longer than 20 s at every stop (CI run 18). */
        for (size_t i = 0; i < s->nshards; i++) {
            shard_t *sh = &s->shards[i];
            entry_t *e = sh->age_head;
            while (e != NULL) {
                entry_t *next = e->age_next;
                free(e);
                e = next;
            }
            pthread_mutex_destroy(&sh->mu);
        }
        free(s->shards);
    }
    if (s->bucket_map != NULL) {
        munmap(s->bucket_map, s->bucket_map_len);
    }
    sodium_memzero(s->hkey, sizeof s->hkey);
    free(s);
}

void tg_receipts_destroy(tg_receipts_t *r) { tg_store_destroy(r != NULL ? &r->t : NULL); }

size_t tg_store_max_key_len(const tg_store_t *s) { return s != NULL ? s->max_key_len : 0; }

/* ------------------------------------------------------------------ internals */

static idem_entry_t *as_idem(entry_t *e) { return (idem_entry_t *)e; }
static receipt_entry_t *as_receipt(entry_t *e) { return (receipt_entry_t *)e; }

static const char *entry_name(const entry_t *e) { return (const char *)e + e->name_off; }

/* What the entry is charged against max_bytes: its allocation, as store.h counts it. */
static size_t entry_cost(const entry_t *e) {
    return TG_STORE_ALLOC_COST((size_t)e->name_off + e->tenant_len + e->key_len);
}

static size_t kind_size(uint8_t kind) {
    return kind == KIND_IDEM      ? sizeof(idem_entry_t)
           : kind == KIND_RECEIPT ? sizeof(receipt_entry_t)
                                  : sizeof(entry_t);
}

static bool pos_equal(const tg_ledger_pos_t *a, const tg_ledger_pos_t *b) {
    return a->seq == b->seq && a->offset == b->offset && a->segment == b->segment &&
           a->length == b->length;
}

static tg_err_t lookup_init(lookup_t *lk, const tg_store_t *s, uint8_t kind, const char *tenant,
                            size_t tenant_len, const char *key, size_t key_len) {
    unsigned char msg[2 + TG_STORE_TENANT_MAX + TG_STORE_MAX_KEY_LEN_LIMIT];
    unsigned char h[crypto_shorthash_BYTES];
    if (s == NULL || tenant == NULL || key == NULL || tenant_len == 0 ||
        tenant_len > TG_STORE_TENANT_MAX || key_len == 0 || key_len > s->max_key_len) {
        return TG_ERR_INVALID_ARG;
    }
    /* kind and tenant length are framed in, so (t, k) pairs cannot alias across the split. */
    msg[0] = kind;
    msg[1] = (unsigned char)tenant_len;
    memcpy(msg + 2, tenant, tenant_len);
    memcpy(msg + 2 + tenant_len, key, key_len);
    crypto_shorthash(h, msg, 2 + tenant_len + key_len, s->hkey);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof h; i++) {
        v = (v << 8) | h[i];
    }
    lk->kind = kind;
    lk->tenant = tenant;
    lk->tenant_len = tenant_len;
    lk->key = key;
    lk->key_len = key_len;
    lk->hash = v;
    return TG_OK;
}

static shard_t *shard_of(const tg_store_t *s, const lookup_t *lk) {
    size_t idx = s->shard_bits == 0 ? 0 : (size_t)(lk->hash >> (64 - s->shard_bits));
    return &s->shards[idx];
}

static entry_t **bucket_of(const tg_store_t *s, shard_t *sh, const lookup_t *lk) {
    return &sh->buckets[lk->hash & (s->nbuckets - 1)];
}

static bool entry_matches(const entry_t *e, const lookup_t *lk) {
    const char *name = entry_name(e);
    return e->hash == lk->hash && e->kind == lk->kind && e->tenant_len == lk->tenant_len &&
           e->key_len == lk->key_len && memcmp(name, lk->tenant, lk->tenant_len) == 0 &&
           memcmp(name + e->tenant_len, lk->key, lk->key_len) == 0;
}

/* now - stamp >= retention, without signed overflow; in-flight reservations never expire. */
static bool entry_expired(const tg_store_t *s, const entry_t *e, int64_t now_ms) {
    if (e->state == ST_IN_FLIGHT || now_ms <= e->stamp_ms) {
        return false;
    }
    return (uint64_t)now_ms - (uint64_t)e->stamp_ms >= (uint64_t)s->retention_ms;
}

static bool past_retention(const tg_store_t *s, int64_t stamp_ms, int64_t now_ms) {
    return now_ms > stamp_ms && (uint64_t)now_ms - (uint64_t)stamp_ms >= (uint64_t)s->retention_ms;
}

static void age_remove(shard_t *sh, entry_t *e) {
    if (e->age_prev != NULL) {
        e->age_prev->age_next = e->age_next;
    } else {
        sh->age_head = e->age_next;
    }
    if (e->age_next != NULL) {
        e->age_next->age_prev = e->age_prev;
    } else {
        sh->age_tail = e->age_prev;
    }
    e->age_prev = e->age_next = NULL;
}

static void age_append(shard_t *sh, entry_t *e) {
    e->age_next = NULL;
    e->age_prev = sh->age_tail;
    if (sh->age_tail != NULL) {
        sh->age_tail->age_next = e;
    } else {
        sh->age_head = e;
    }
    sh->age_tail = e;
}

/* Caller holds sh->mu; e is in the shard. Its stamp was just set to a later time: it moves
 * to the young end of the age list, which keeps the list in stamp order. */
static void age_touch(shard_t *sh, entry_t *e) {
    if (sh->age_tail != e) {
        age_remove(sh, e);
        age_append(sh, e);
    }
}

/* The shard's count for e's kind and state. */
static size_t *shard_count(shard_t *sh, const entry_t *e) {
    return e->kind == KIND_NONCE      ? &sh->nonces
           : e->kind == KIND_RECEIPT  ? &sh->receipts
           : e->state == ST_IN_FLIGHT ? &sh->in_flight
                                      : &sh->done;
}

/* Caller holds sh->mu. Gives back the entry's share of the global counters. */
static void shard_unlink(tg_store_t *s, shard_t *sh, entry_t *e) {
    /* Through e->pprev, not a bucket walk: only stores land on the bucket's cache line, and
     * a sweep unlinking entries in age order would otherwise wait on a miss per entry. */
    if (e->pprev != NULL) { /* always set while e is in a bucket, which every caller's e is */
        *e->pprev = e->next;
        if (e->next != NULL) {
            e->next->pprev = e->pprev;
        }
    }
    e->next = NULL;
    e->pprev = NULL;
    age_remove(sh, e);
    (*shard_count(sh, e))--;
    atomic_fetch_sub_explicit(&s->entries, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->bytes, entry_cost(e), memory_order_relaxed);
}

/* Caller holds sh->mu. Walks the bucket of lk; expired entries met on the way are unlinked
 * onto *graveyard (freed by the caller after unlocking). Returns the live match or NULL. */
static entry_t *shard_find(tg_store_t *s, shard_t *sh, const lookup_t *lk, int64_t now_ms,
                           bool expire, entry_t **graveyard) {
    entry_t **link = bucket_of(s, sh, lk);
    while (*link != NULL) {
        entry_t *e = *link;
        if (expire && entry_expired(s, e, now_ms)) {
            shard_unlink(s, sh, e);
            e->next = *graveyard;
            *graveyard = e;
            atomic_fetch_add_explicit(&s->expired_reclaimed, 1, memory_order_relaxed);
            continue;
        }
        if (entry_matches(e, lk)) {
            return e;
        }
        link = &e->next;
    }
    return NULL;
}

static void graveyard_free(entry_t *g) {
    while (g != NULL) {
        entry_t *next = g->next;
        free(g);
        g = next;
    }
}

/* Takes one entry and nbytes from the caps, or nothing. CAS loops, so the counters never
 * pass the caps even for an instant and a concurrent caller near the cap is never refused
 * because of someone else's doomed attempt. */
static bool caps_take(tg_store_t *s, size_t nbytes) {
    size_t cur = atomic_load_explicit(&s->entries, memory_order_relaxed);
    do {
        if (cur + 1 > s->max_entries) {
            goto refuse;
        }
    } while (!atomic_compare_exchange_weak_explicit(&s->entries, &cur, cur + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    cur = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    do {
        if (nbytes > s->max_bytes || cur > s->max_bytes - nbytes) {
            atomic_fetch_sub_explicit(&s->entries, 1, memory_order_relaxed);
            goto refuse;
        }
    } while (!atomic_compare_exchange_weak_explicit(&s->bytes, &cur, cur + nbytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;

refuse:
    atomic_fetch_add_explicit(&s->limit_rejections, 1, memory_order_relaxed);
    return false;
}

/* A detached entry for lk (not yet counted anywhere), its value zeroed for the caller. */
static entry_t *entry_new(const lookup_t *lk, uint8_t state, int64_t stamp_ms) {
    size_t head = kind_size(lk->kind);
    entry_t *e = malloc(head + lk->tenant_len + lk->key_len);
    if (e == NULL) {
        return NULL;
    }
    memset(e, 0, head);
    e->hash = lk->hash;
    e->stamp_ms = stamp_ms;
    e->kind = lk->kind;
    e->state = state;
    e->tenant_len = (uint8_t)lk->tenant_len;
    e->key_len = (uint16_t)lk->key_len;
    e->name_off = (uint8_t)head;
    memcpy((char *)e + head, lk->tenant, lk->tenant_len);
    memcpy((char *)e + head + lk->tenant_len, lk->key, lk->key_len);
    return e;
}

static void shard_insert(tg_store_t *s, shard_t *sh, const lookup_t *lk, entry_t *e) {
    entry_t **head = bucket_of(s, sh, lk);
    e->next = *head;
    if (e->next != NULL) {
        e->next->pprev = &e->next;
    }
    e->pprev = head;
    *head = e;
    age_append(sh, e);
    (*shard_count(sh, e))++;
}

/* ------------------------------------------------------------------ idempotency */

static void idem_copy_out(tg_idem_entry_t *out, entry_t *e) {
    idem_entry_t *ie = as_idem(e);
    memcpy(out->request_hash, ie->request_hash, sizeof out->request_hash);
    out->status = e->status;
    out->pos = ie->pos;
    out->stored_at_ms = e->stamp_ms;
}

tg_err_t tg_store_idem_begin(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len, const uint8_t request_hash[32], int64_t now_ms,
                             tg_idem_result_t *res) {
    lookup_t lk;
    entry_t *fresh = NULL;
    entry_t *graveyard = NULL;
    tg_err_t rc = TG_OK;
    if (res == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    memset(res, 0, sizeof *res);
    if (request_hash == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    rc = lookup_init(&lk, s, KIND_IDEM, tenant, tenant_len, key, key_len);
    if (rc) {
        return rc;
    }
    /* Allocated before locking: most keys are new and the lock should cover only the walk. */
    fresh = entry_new(&lk, ST_IN_FLIGHT, now_ms);
    if (fresh == NULL) {
        return TG_ERR_NOMEM;
    }
    memcpy(as_idem(fresh)->request_hash, request_hash, 32);

    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e != NULL) {
        if (memcmp(as_idem(e)->request_hash, request_hash, 32) != 0) {
            rc = TG_ERR_CONFLICT;
        } else if (e->state == ST_IN_FLIGHT) {
            rc = TG_ERR_IN_FLIGHT;
        } else {
            idem_copy_out(&res->entry, e);
            res->state = TG_IDEM_REPLAY;
        }
    } else if (!caps_take(s, entry_cost(fresh))) {
        rc = TG_ERR_LIMIT;
    } else {
        shard_insert(s, sh, &lk, fresh);
        fresh = NULL;
        res->state = TG_IDEM_NEW;
    }
    pthread_mutex_unlock(&sh->mu);

    free(fresh);
    graveyard_free(graveyard);
    return rc;
}

tg_err_t tg_store_idem_complete(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *key, size_t key_len, int status,
                                const tg_ledger_pos_t *pos, int64_t now_ms) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    tg_err_t rc = lookup_init(&lk, s, KIND_IDEM, tenant, tenant_len, key, key_len);
    if (rc) {
        return rc;
    }
    if (status < 100 || status > 599 || pos == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e == NULL || e->state != ST_IN_FLIGHT) {
        rc = TG_ERR_NOT_FOUND;
    } else {
        /* The reservation was charged its whole size at begin: nothing more to take. */
        as_idem(e)->pos = *pos;
        e->status = (uint16_t)status;
        sh->in_flight--;
        e->state = ST_DONE;
        sh->done++;
        e->stamp_ms = now_ms;
        age_touch(sh, e);
    }
    pthread_mutex_unlock(&sh->mu);
    graveyard_free(graveyard);
    return rc;
}

/* Unlinks and frees the live entry (kind, tenant, key); with only_in_flight, only an
 * IN_FLIGHT reservation qualifies. Shared by idem_abort and nonce_release. */
static tg_err_t remove_live(tg_store_t *s, uint8_t kind, const char *tenant, size_t tenant_len,
                            const char *key, size_t key_len, bool only_in_flight) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    entry_t *victim = NULL;
    tg_err_t rc = lookup_init(&lk, s, kind, tenant, tenant_len, key, key_len);
    if (rc) {
        return rc;
    }
    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, 0, false, &graveyard);
    if (e == NULL || (only_in_flight && e->state != ST_IN_FLIGHT)) {
        rc = TG_ERR_NOT_FOUND;
    } else {
        shard_unlink(s, sh, e);
        victim = e;
    }
    pthread_mutex_unlock(&sh->mu);
    free(victim);
    return rc;
}

tg_err_t tg_store_idem_abort(tg_store_t *s, const char *tenant, size_t tenant_len, const char *key,
                             size_t key_len) {
    return remove_live(s, KIND_IDEM, tenant, tenant_len, key, key_len, true);
}

tg_err_t tg_store_idem_restore(tg_store_t *s, const char *tenant, size_t tenant_len,
                               const char *key, size_t key_len, const tg_idem_entry_t *entry,
                               int64_t now_ms) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    entry_t *fresh = NULL;
    entry_t *old = NULL;
    tg_err_t rc = lookup_init(&lk, s, KIND_IDEM, tenant, tenant_len, key, key_len);
    if (rc) {
        return rc;
    }
    if (entry == NULL || entry->status < 100 || entry->status > 599) {
        return TG_ERR_INVALID_ARG;
    }
    if (past_retention(s, entry->stored_at_ms, now_ms)) {
        return TG_OK;
    }
    fresh = entry_new(&lk, ST_DONE, entry->stored_at_ms);
    if (fresh == NULL) {
        return TG_ERR_NOMEM;
    }
    memcpy(as_idem(fresh)->request_hash, entry->request_hash, 32);
    as_idem(fresh)->pos = entry->pos;
    fresh->status = (uint16_t)entry->status;

    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e != NULL && e->state == ST_IN_FLIGHT) {
        rc = TG_ERR_IN_FLIGHT;
    } else if (e != NULL && e->stamp_ms > entry->stored_at_ms) {
        rc = TG_OK; /* the later record already holds the key */
    } else if (!caps_take(s, entry_cost(fresh))) {
        rc = TG_ERR_LIMIT;
    } else {
        if (e != NULL) {
            /* Counted in full before the old one is given back: replacing may be refused
             * near the cap, but never overshoots it. */
            shard_unlink(s, sh, e);
            old = e;
        }
        shard_insert(s, sh, &lk, fresh);
        fresh = NULL;
    }
    pthread_mutex_unlock(&sh->mu);

    free(fresh);
    free(old);
    graveyard_free(graveyard);
    return rc;
}

/* ------------------------------------------------------------------ nonces */

tg_err_t tg_store_nonce_use(tg_store_t *s, const char *tenant, size_t tenant_len, const char *nonce,
                            size_t nonce_len, int64_t now_ms) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    entry_t *fresh = NULL;
    tg_err_t rc = lookup_init(&lk, s, KIND_NONCE, tenant, tenant_len, nonce, nonce_len);
    if (rc) {
        return rc;
    }
    fresh = entry_new(&lk, ST_DONE, now_ms);
    if (fresh == NULL) {
        return TG_ERR_NOMEM;
    }
    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    if (shard_find(s, sh, &lk, now_ms, true, &graveyard) != NULL) {
        rc = TG_ERR_REPLAY;
    } else if (!caps_take(s, entry_cost(fresh))) {
        rc = TG_ERR_LIMIT;
    } else {
        shard_insert(s, sh, &lk, fresh);
        fresh = NULL;
    }
    pthread_mutex_unlock(&sh->mu);

    free(fresh);
    graveyard_free(graveyard);
    return rc;
}

tg_err_t tg_store_nonce_release(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *nonce, size_t nonce_len) {
    return remove_live(s, KIND_NONCE, tenant, tenant_len, nonce, nonce_len, false);
}

tg_err_t tg_store_nonce_restore(tg_store_t *s, const char *tenant, size_t tenant_len,
                                const char *nonce, size_t nonce_len, int64_t used_at_ms,
                                int64_t now_ms) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    entry_t *fresh = NULL;
    tg_err_t rc = lookup_init(&lk, s, KIND_NONCE, tenant, tenant_len, nonce, nonce_len);
    if (rc) {
        return rc;
    }
    if (past_retention(s, used_at_ms, now_ms)) {
        return TG_OK;
    }
    fresh = entry_new(&lk, ST_DONE, used_at_ms);
    if (fresh == NULL) {
        return TG_ERR_NOMEM;
    }
    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e != NULL) {
        if (used_at_ms > e->stamp_ms) {
            e->stamp_ms = used_at_ms;
            age_touch(sh, e);
        }
    } else if (!caps_take(s, entry_cost(fresh))) {
        rc = TG_ERR_LIMIT;
    } else {
        shard_insert(s, sh, &lk, fresh);
        fresh = NULL;
    }
    pthread_mutex_unlock(&sh->mu);

    free(fresh);
    graveyard_free(graveyard);
    return rc;
}

/* ------------------------------------------------------------------ the receipt index */

tg_err_t tg_receipts_insert(tg_receipts_t *r, const char *tenant, size_t tenant_len, const char *id,
                            size_t id_len, const tg_ledger_pos_t *pos, int64_t stamp_ms,
                            int64_t now_ms, tg_ledger_pos_t *existing) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    entry_t *fresh = NULL;
    if (existing != NULL) {
        memset(existing, 0, sizeof *existing);
    }
    if (r == NULL || pos == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_store_t *s = &r->t;
    tg_err_t rc = lookup_init(&lk, s, KIND_RECEIPT, tenant, tenant_len, id, id_len);
    if (rc) {
        return rc;
    }
    if (past_retention(s, stamp_ms, now_ms)) {
        return TG_OK;
    }
    fresh = entry_new(&lk, ST_DONE, stamp_ms);
    if (fresh == NULL) {
        return TG_ERR_NOMEM;
    }
    as_receipt(fresh)->pos = *pos;

    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e != NULL) {
        if (!pos_equal(&as_receipt(e)->pos, pos)) {
            rc = TG_ERR_CONFLICT;
            if (existing != NULL) {
                *existing = as_receipt(e)->pos; /* under the lock: e may be reclaimed after */
            }
        }
    } else if (!caps_take(s, entry_cost(fresh))) {
        rc = TG_ERR_LIMIT;
    } else {
        shard_insert(s, sh, &lk, fresh);
        fresh = NULL;
    }
    pthread_mutex_unlock(&sh->mu);

    free(fresh);
    graveyard_free(graveyard);
    return rc;
}

tg_err_t tg_receipts_get(tg_receipts_t *r, const char *tenant, size_t tenant_len, const char *id,
                         size_t id_len, int64_t now_ms, tg_ledger_pos_t *pos) {
    lookup_t lk;
    entry_t *graveyard = NULL;
    if (pos == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    memset(pos, 0, sizeof *pos);
    if (r == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    tg_store_t *s = &r->t;
    tg_err_t rc = lookup_init(&lk, s, KIND_RECEIPT, tenant, tenant_len, id, id_len);
    if (rc) {
        return rc;
    }
    shard_t *sh = shard_of(s, &lk);
    pthread_mutex_lock(&sh->mu);
    entry_t *e = shard_find(s, sh, &lk, now_ms, true, &graveyard);
    if (e == NULL) {
        rc = TG_ERR_NOT_FOUND;
    } else {
        *pos = as_receipt(e)->pos;
    }
    pthread_mutex_unlock(&sh->mu);
    graveyard_free(graveyard);
    return rc;
}

bool tg_receipts_has_room(const tg_receipts_t *r, size_t tenant_len, size_t id_len) {
    /* atomic loads of a const object: C11 takes them through a non-const pointer */
    tg_store_t *s = (tg_store_t *)&r->t;
    if (tenant_len > TG_STORE_TENANT_MAX || id_len > s->max_key_len) {
        return false; /* the insert would refuse it anyway (and the sum below cannot wrap) */
    }
    size_t bytes = TG_STORE_ALLOC_COST(sizeof(receipt_entry_t) + tenant_len + id_len);
    size_t n = atomic_load_explicit(&s->entries, memory_order_relaxed);
    size_t b = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    return n < s->max_entries && bytes <= s->max_bytes && b <= s->max_bytes - bytes;
}

/* ------------------------------------------------------------------ maintenance */

/* Walks each shard's age list from its oldest end and stops at the first entry that is
 * still live, so a sweep costs what it reclaims (plus the reservations it steps over), not
 * the size of the table: at a million live entries a scan of every bucket took tens of
 * milliseconds of CPU, every time, for nothing. Stamps are set from the caller's clock in
 * list order, so the list is in stamp order unless that clock steps backwards; then entries
 * stamped before the step are reclaimed up to the step's length late (lookups treat them as
 * absent from their real expiry either way). */
size_t tg_store_sweep(tg_store_t *s, int64_t now_ms) {
    size_t freed = 0;
    if (s == NULL) {
        return 0;
    }
    for (size_t i = 0; i < s->nshards; i++) {
        shard_t *sh = &s->shards[i];
        bool more = true;
        while (more) {
            entry_t *graveyard = NULL;
            size_t n = 0;
            more = false;
            pthread_mutex_lock(&sh->mu);
            entry_t *e = sh->age_head;
            while (e != NULL) {
                entry_t *next = e->age_next;
                if (entry_expired(s, e, now_ms)) {
                    shard_unlink(s, sh, e);
                    e->next = graveyard;
                    graveyard = e;
                    if (++n == TG_STORE_SWEEP_CHUNK) {
                        more = true; /* let waiting requests in, then go on */
                        break;
                    }
                } else if (e->state != ST_IN_FLIGHT) {
                    break; /* live: everything younger is live too */
                }
                /* an IN_FLIGHT reservation never expires: step over it */
                e = next;
            }
            pthread_mutex_unlock(&sh->mu);
            graveyard_free(graveyard);
            freed += n;
        }
    }
    atomic_fetch_add_explicit(&s->expired_reclaimed, freed, memory_order_relaxed);
    return freed;
}

/* The next DONE entry live at now_ms from e on (a shard's age list), or NULL. */
static entry_t *next_live(const tg_store_t *s, entry_t *e, int64_t now_ms) {
    while (e != NULL && (e->state != ST_DONE || entry_expired(s, e, now_ms))) {
        e = e->age_next;
    }
    return e;
}

tg_err_t tg_store_each(tg_store_t *s, int64_t now_ms, tg_store_each_fn fn, void *ud) {
    if (s == NULL || fn == NULL) {
        return TG_ERR_INVALID_ARG;
    }
    entry_t **cur = malloc(s->nshards * sizeof *cur);
    if (cur == NULL) {
        return TG_ERR_NOMEM;
    }
    /* Every shard's lock, in index order, for the whole walk: the entries come out merged
     * across shards in stamp order (each age list is in stamp order), so a table rebuilt
     * from them in that order has age lists in stamp order again, which the sweep relies
     * on. Meant for a table no request uses (the snapshot thread's copy). */
    for (size_t i = 0; i < s->nshards; i++) {
        pthread_mutex_lock(&s->shards[i].mu);
        cur[i] = next_live(s, s->shards[i].age_head, now_ms);
    }
    tg_err_t rc = TG_OK;
    while (rc == TG_OK) {
        size_t best = s->nshards;
        for (size_t i = 0; i < s->nshards; i++) {
            if (cur[i] != NULL && (best == s->nshards || cur[i]->stamp_ms < cur[best]->stamp_ms)) {
                best = i;
            }
        }
        if (best == s->nshards) {
            break;
        }
        entry_t *e = cur[best];
        cur[best] = next_live(s, e->age_next, now_ms);
        tg_store_item_t it = {.kind = e->kind == KIND_IDEM    ? TG_STORE_ITEM_KEY
                                      : e->kind == KIND_NONCE ? TG_STORE_ITEM_NONCE
                                                              : TG_STORE_ITEM_RECEIPT,
                              .tenant = entry_name(e),
                              .tenant_len = e->tenant_len,
                              .key = entry_name(e) + e->tenant_len,
                              .key_len = e->key_len,
                              .stamp_ms = e->stamp_ms,
                              .status = e->status};
        if (e->kind == KIND_IDEM) {
            it.request_hash = as_idem(e)->request_hash;
            it.pos = as_idem(e)->pos;
        } else if (e->kind == KIND_RECEIPT) {
            it.pos = as_receipt(e)->pos;
        }
        rc = fn(ud, &it);
    }
    for (size_t i = s->nshards; i > 0; i--) {
        pthread_mutex_unlock(&s->shards[i - 1].mu);
    }
    free(cur);
    return rc;
}

unsigned tg_store_part(const tg_store_t *s, int kind, const char *tenant, size_t tenant_len,
                       const char *key, size_t key_len, unsigned nparts) {
    lookup_t lk;
    uint8_t k = kind == TG_STORE_ITEM_KEY     ? KIND_IDEM
                : kind == TG_STORE_ITEM_NONCE ? KIND_NONCE
                                              : KIND_RECEIPT;
    if (nparts == 0 || lookup_init(&lk, s, k, tenant, tenant_len, key, key_len) != TG_OK) {
        return 0;
    }
    return (unsigned)((size_t)(shard_of(s, &lk) - s->shards) % nparts);
}

unsigned tg_receipts_part(const tg_receipts_t *r, const char *tenant, size_t tenant_len,
                          const char *id, size_t id_len, unsigned nparts) {
    return tg_store_part(&r->t, TG_STORE_ITEM_RECEIPT, tenant, tenant_len, id, id_len, nparts);
}

tg_err_t tg_receipts_each(tg_receipts_t *r, int64_t now_ms, tg_store_each_fn fn, void *ud) {
    return tg_store_each(r != NULL ? &r->t : NULL, now_ms, fn, ud);
}

size_t tg_receipts_sweep(tg_receipts_t *r, int64_t now_ms) {
    return tg_store_sweep(r != NULL ? &r->t : NULL, now_ms);
}

void tg_store_stats(const tg_store_t *s, tg_store_stats_t *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->nshards; i++) {
        shard_t *sh = &s->shards[i];
        pthread_mutex_lock(&sh->mu);
        out->idem_in_flight += sh->in_flight;
        out->idem_done += sh->done;
        out->nonces += sh->nonces;
        out->receipts += sh->receipts;
        pthread_mutex_unlock(&sh->mu);
    }
    out->entries = atomic_load_explicit(&s->entries, memory_order_relaxed);
    out->max_entries = s->max_entries;
    out->bytes = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    out->max_bytes = s->max_bytes;
    out->limit_rejections = atomic_load_explicit(&s->limit_rejections, memory_order_relaxed);
    out->expired_reclaimed = atomic_load_explicit(&s->expired_reclaimed, memory_order_relaxed);
}

void tg_receipts_stats(const tg_receipts_t *r, tg_store_stats_t *out) {
    tg_store_stats(r != NULL ? &r->t : NULL, out);
}
