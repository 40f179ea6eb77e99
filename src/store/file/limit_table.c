/* limit_table.c — the file backend's limit totals (limit_table.h). */
#include "limit_table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS 64u
#define BUCKETS 4096u   /* per shard: chains stay short up to a few million entries */
#define SWEEP_SHARDS 4u /* per tg_limit_table_sweep call */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    int64_t window_start_s;
    int64_t window_end_s;
    double total;
    uint8_t key[32];
    uint32_t limit_len;
    char limit[]; /* limit_len bytes */
} entry_t;

typedef struct shard {
    pthread_mutex_t mu;
    entry_t *buckets[BUCKETS];
} shard_t;

struct tg_limit_table {
    uint64_t max_entries;
    _Atomic uint64_t entries;
    _Atomic uint64_t rejections;
    _Atomic uint64_t reclaimed;
    _Atomic uint32_t sweep_next;
    shard_t shards[SHARDS];
};

tg_err_t tg_limit_table_create(tg_limit_table_t **out, uint64_t max_entries) {
    *out = NULL;
    tg_limit_table_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return TG_ERR_NOMEM;
    }
    t->max_entries = max_entries ? max_entries : TG_LIMIT_TABLE_DEFAULT_ENTRIES;
    for (unsigned i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&t->shards[i].mu, NULL);
    }
    *out = t;
    return TG_OK;
}

void tg_limit_table_destroy(tg_limit_table_t *t) {
    if (t == NULL) {
        return;
    }
    for (unsigned i = 0; i < SHARDS; i++) {
        for (unsigned b = 0; b < BUCKETS; b++) {
            entry_t *e = t->shards[i].buckets[b];
            while (e != NULL) {
                entry_t *n = e->next;
                free(e);
                e = n;
            }
        }
        pthread_mutex_destroy(&t->shards[i].mu);
    }
    free(t);
}

/* FNV-1a over the name, the key (already a uniform hash) and the window start. */
static uint64_t ref_hash(const tg_db_limit_ref_t *ref) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < ref->limit_len; i++) {
        h = (h ^ (unsigned char)ref->limit[i]) * UINT64_C(0x100000001b3);
    }
    uint64_t k;
    memcpy(&k, ref->key, sizeof k);
    h ^= k;
    h = (h ^ (uint64_t)ref->window_start_s) * UINT64_C(0x100000001b3);
    return h ^ (h >> 29);
}

static shard_t *shard_of(tg_limit_table_t *t, uint64_t h) { return &t->shards[h % SHARDS]; }

static entry_t **bucket_of(shard_t *s, uint64_t h) { return &s->buckets[(h / SHARDS) % BUCKETS]; }

/* The entry's link in its chain (holding the shard's lock), or the chain's end. */
static entry_t **find(shard_t *s, uint64_t h, const tg_db_limit_ref_t *ref) {
    entry_t **pe = bucket_of(s, h);
    while (*pe != NULL) {
        entry_t *e = *pe;
        if (e->hash == h && e->window_start_s == ref->window_start_s &&
            e->limit_len == ref->limit_len && memcmp(e->key, ref->key, 32) == 0 &&
            memcmp(e->limit, ref->limit, ref->limit_len) == 0) {
            return pe;
        }
        pe = &e->next;
    }
    return pe;
}

/* A new entry at *pe (the chain's end), within the bound; NULL when full or out of memory. */
static entry_t *insert(tg_limit_table_t *t, entry_t **pe, uint64_t h,
                       const tg_db_limit_ref_t *ref) {
    if (atomic_fetch_add(&t->entries, 1) >= t->max_entries) {
        atomic_fetch_sub(&t->entries, 1);
        atomic_fetch_add(&t->rejections, 1);
        return NULL;
    }
    entry_t *e = malloc(sizeof *e + ref->limit_len);
    if (e == NULL) {
        atomic_fetch_sub(&t->entries, 1);
        return NULL;
    }
    e->next = NULL;
    e->hash = h;
    e->window_start_s = ref->window_start_s;
    e->window_end_s = ref->window_start_s + ref->window_s;
    e->total = 0;
    memcpy(e->key, ref->key, 32);
    e->limit_len = (uint32_t)ref->limit_len;
    memcpy(e->limit, ref->limit, ref->limit_len);
    *pe = e;
    return e;
}

static void unlink_free(tg_limit_table_t *t, entry_t **pe) {
    entry_t *e = *pe;
    *pe = e->next;
    free(e);
    atomic_fetch_sub(&t->entries, 1);
}

tg_err_t tg_limit_table_total(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double *total) {
    uint64_t h = ref_hash(ref);
    shard_t *s = shard_of(t, h);
    pthread_mutex_lock(&s->mu);
    entry_t **pe = find(s, h, ref);
    *total = *pe != NULL ? (*pe)->total : 0;
    pthread_mutex_unlock(&s->mu);
    return TG_OK;
}

tg_err_t tg_limit_table_reserve(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount,
                                double max, double *total_after) {
    uint64_t h = ref_hash(ref);
    shard_t *s = shard_of(t, h);
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&s->mu);
    entry_t **pe = find(s, h, ref);
    double cur = *pe != NULL ? (*pe)->total : 0;
    /* The kernel's comparison (kernel.c limit_holds): the same expression, so a refusal here
     * re-decides to DENY with the limit's reason. */
    double sum = cur + amount;
    if (!(sum == sum && sum <= max)) {
        *total_after = cur;
        rc = TG_ERR_LIMIT_EXCEEDED;
    } else {
        entry_t *e = *pe != NULL ? *pe : insert(t, pe, h, ref);
        if (e == NULL) {
            *total_after = cur;
            rc = TG_ERR_LIMIT;
        } else {
            e->total = sum;
            *total_after = sum;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

tg_err_t tg_limit_table_release(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount) {
    uint64_t h = ref_hash(ref);
    shard_t *s = shard_of(t, h);
    pthread_mutex_lock(&s->mu);
    entry_t **pe = find(s, h, ref);
    if (*pe != NULL) {
        double left = (*pe)->total - amount;
        if (left > 0) {
            (*pe)->total = left;
        } else {
            unlink_free(t, pe); /* nothing counted: the entry is a zero total */
        }
    }
    pthread_mutex_unlock(&s->mu);
    return TG_OK;
}

tg_err_t tg_limit_table_restore(tg_limit_table_t *t, const tg_db_limit_ref_t *ref, double amount,
                                int64_t now_ms) {
    if ((ref->window_start_s + ref->window_s) * 1000 <= now_ms) {
        return TG_OK; /* its window is over: it counts for nothing any more */
    }
    uint64_t h = ref_hash(ref);
    shard_t *s = shard_of(t, h);
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&s->mu);
    entry_t **pe = find(s, h, ref);
    entry_t *e = *pe != NULL ? *pe : insert(t, pe, h, ref);
    if (e == NULL) {
        rc = TG_ERR_LIMIT;
    } else {
        e->total += amount;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

tg_err_t tg_limit_table_each(tg_limit_table_t *t, int64_t now_ms, tg_limit_each_fn fn, void *ud) {
    tg_err_t rc = TG_OK;
    for (unsigned i = 0; rc == TG_OK && i < SHARDS; i++) {
        shard_t *s = &t->shards[i];
        pthread_mutex_lock(&s->mu);
        for (unsigned b = 0; rc == TG_OK && b < BUCKETS; b++) {
            for (entry_t *e = s->buckets[b]; rc == TG_OK && e != NULL; e = e->next) {
                if (e->window_end_s * 1000 <= now_ms) {
                    continue; /* as restore: a window over counts for nothing */
                }
                tg_db_limit_ref_t ref = {.limit = e->limit,
                                         .limit_len = e->limit_len,
                                         .window_start_s = e->window_start_s,
                                         .window_s = e->window_end_s - e->window_start_s};
                memcpy(ref.key, e->key, sizeof ref.key);
                rc = fn(ud, &ref, e->total);
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

void tg_limit_table_sweep(tg_limit_table_t *t, int64_t now_ms) {
    int64_t now_s = now_ms / 1000;
    for (unsigned k = 0; k < SWEEP_SHARDS; k++) {
        shard_t *s = &t->shards[atomic_fetch_add(&t->sweep_next, 1) % SHARDS];
        pthread_mutex_lock(&s->mu);
        for (unsigned b = 0; b < BUCKETS; b++) {
            entry_t **pe = &s->buckets[b];
            while (*pe != NULL) {
                if ((*pe)->window_end_s <= now_s) {
                    unlink_free(t, pe);
                    atomic_fetch_add(&t->reclaimed, 1);
                } else {
                    pe = &(*pe)->next;
                }
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
}

void tg_limit_table_stats(tg_limit_table_t *t, tg_store_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (t == NULL) {
        return;
    }
    out->entries = atomic_load(&t->entries);
    out->max_entries = t->max_entries;
    out->limit_rejections = atomic_load(&t->rejections);
    out->expired_reclaimed = atomic_load(&t->reclaimed);
}
