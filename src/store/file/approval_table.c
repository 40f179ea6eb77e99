/* approval_table.c — the file backend's approvals (approval_table.h). */
#include "approval_table.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 4096u      /* chains of ~25 at the default bound: a scan costs the same */
#define SWEEP_BUCKETS 256u /* per sweep call: the whole table every 16 ticks */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    bool held; /* a writer is making the version after a.version */
    tg_approval_t a;
} entry_t;

struct tg_approval_table {
    pthread_mutex_t mu;
    uint64_t max_entries;
    int64_t retention_ms;
    uint64_t entries;
    uint64_t rejections;
    uint64_t reclaimed;
    uint32_t sweep_next;
    entry_t *buckets[BUCKETS];
};

tg_err_t tg_approval_table_create(tg_approval_table_t **out, uint64_t max_entries,
                                  int64_t retention_ms) {
    *out = NULL;
    tg_approval_table_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return TG_ERR_NOMEM;
    }
    t->max_entries = max_entries ? max_entries : TG_APPROVAL_TABLE_DEFAULT_ENTRIES;
    t->retention_ms = retention_ms > 0 ? retention_ms : 86400000;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return TG_OK;
}

void tg_approval_table_destroy(tg_approval_table_t *t) {
    if (t == NULL) {
        return;
    }
    for (unsigned b = 0; b < BUCKETS; b++) {
        entry_t *e = t->buckets[b];
        while (e != NULL) {
            entry_t *n = e->next;
            free(e);
            e = n;
        }
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* FNV-1a over the tenant, a separator no tenant holds, and the id. */
static uint64_t key_hash(const char *tenant, size_t tenant_len, const char *id, size_t id_len) {
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < tenant_len; i++) {
        h = (h ^ (unsigned char)tenant[i]) * UINT64_C(0x100000001b3);
    }
    h = (h ^ 0xffu) * UINT64_C(0x100000001b3);
    for (size_t i = 0; i < id_len; i++) {
        h = (h ^ (unsigned char)id[i]) * UINT64_C(0x100000001b3);
    }
    return h ^ (h >> 29);
}

static bool same_str(const char *s, const char *p, size_t n) {
    return strlen(s) == n && memcmp(s, p, n) == 0;
}

/* The entry's link in its chain (holding the lock), or the chain's end. */
static entry_t **find(tg_approval_table_t *t, uint64_t h, const char *tenant, size_t tenant_len,
                      const char *id, size_t id_len) {
    entry_t **pe = &t->buckets[h % BUCKETS];
    while (*pe != NULL) {
        entry_t *e = *pe;
        if (e->hash == h && same_str(e->a.id, id, id_len) &&
            same_str(e->a.tenant, tenant, tenant_len)) {
            return pe;
        }
        pe = &e->next;
    }
    return pe;
}

static entry_t **find_a(tg_approval_table_t *t, const tg_approval_t *a, uint64_t *h) {
    size_t tl = strnlen(a->tenant, sizeof a->tenant);
    size_t il = strnlen(a->id, sizeof a->id);
    *h = key_hash(a->tenant, tl, a->id, il);
    return find(t, *h, a->tenant, tl, a->id, il);
}

/* A new entry holding a at *pe (the chain's end), within the bound (holding the lock). */
static tg_err_t insert(tg_approval_table_t *t, entry_t **pe, uint64_t h, const tg_approval_t *a) {
    if (t->entries >= t->max_entries) {
        t->rejections++;
        return TG_ERR_LIMIT;
    }
    entry_t *e = malloc(sizeof *e);
    if (e == NULL) {
        return TG_ERR_NOMEM;
    }
    e->next = NULL;
    e->hash = h;
    e->held = false;
    e->a = *a;
    *pe = e;
    t->entries++;
    return TG_OK;
}

tg_err_t tg_approval_table_get(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                               const char *id, size_t id_len, tg_approval_t *out) {
    uint64_t h = key_hash(tenant, tenant_len, id, id_len);
    tg_err_t rc = TG_ERR_NOT_FOUND;
    pthread_mutex_lock(&t->mu);
    entry_t **pe = find(t, h, tenant, tenant_len, id, id_len);
    if (*pe != NULL) {
        *out = (*pe)->a;
        rc = TG_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* Newest created first; the id breaks ties so that a list is the same on every call. */
static int by_created_desc(const void *x, const void *y) {
    const tg_approval_t *a = *(const tg_approval_t *const *)x;
    const tg_approval_t *b = *(const tg_approval_t *const *)y;
    if (a->created_ms != b->created_ms) {
        return a->created_ms > b->created_ms ? -1 : 1;
    }
    return strcmp(b->id, a->id);
}

tg_err_t tg_approval_table_list(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                bool all, int status, int64_t now_ms, tg_approval_t *out,
                                size_t max, size_t *n) {
    *n = 0;
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&t->mu);
    /* Pointers to the tenant's matches, sorted, then copied: approvals are few enough that
     * a scan under the lock is cheaper than keeping an index per tenant. */
    const tg_approval_t **match = NULL;
    size_t count = 0;
    if (t->entries > 0 && max > 0) {
        match = malloc(t->entries * sizeof(const tg_approval_t *));
        if (match == NULL) {
            rc = TG_ERR_NOMEM;
        }
    }
    for (unsigned b = 0; match != NULL && b < BUCKETS; b++) {
        for (entry_t *e = t->buckets[b]; e != NULL; e = e->next) {
            if (same_str(e->a.tenant, tenant, tenant_len) &&
                (all || (int)tg_approval_status_at(&e->a, now_ms) == status)) {
                match[count++] = &e->a;
            }
        }
    }
    if (count > 1) {
        qsort(match, count, sizeof(const tg_approval_t *), by_created_desc);
    }
    for (size_t i = 0; i < count && i < max; i++) {
        out[i] = *match[i];
        *n = i + 1;
    }
    pthread_mutex_unlock(&t->mu);
    free(match);
    return rc;
}

tg_err_t tg_approval_table_hold(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                const char *id, size_t id_len, tg_approval_t *cur) {
    uint64_t h = key_hash(tenant, tenant_len, id, id_len);
    tg_err_t rc = TG_ERR_NOT_FOUND;
    pthread_mutex_lock(&t->mu);
    entry_t *e = *find(t, h, tenant, tenant_len, id, id_len);
    if (e != NULL && e->held) {
        rc = TG_ERR_IN_FLIGHT;
    } else if (e != NULL) {
        e->held = true;
        *cur = e->a;
        rc = TG_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

tg_err_t tg_approval_table_release(tg_approval_table_t *t, const char *tenant, size_t tenant_len,
                                   const char *id, size_t id_len) {
    uint64_t h = key_hash(tenant, tenant_len, id, id_len);
    pthread_mutex_lock(&t->mu);
    entry_t *e = *find(t, h, tenant, tenant_len, id, id_len);
    if (e != NULL) {
        e->held = false;
    }
    pthread_mutex_unlock(&t->mu);
    return TG_OK;
}

/* Commit and restore: a newer version replaces the stored one, an older one is ignored (a
 * replay may meet versions out of order only if the ledger was hand-edited, but the
 * highest version is the truth either way). release_hold: a commit ends the hold. */
static tg_err_t put(tg_approval_table_t *t, const tg_approval_t *a, bool release_hold) {
    uint64_t h;
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&t->mu);
    entry_t **pe = find_a(t, a, &h);
    if (*pe == NULL) {
        rc = insert(t, pe, h, a);
    } else {
        if (a->version > (*pe)->a.version) {
            (*pe)->a = *a;
        }
        if (release_hold) {
            (*pe)->held = false;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

tg_err_t tg_approval_table_commit(tg_approval_table_t *t, const tg_approval_t *a) {
    return put(t, a, true);
}

tg_err_t tg_approval_table_restore(tg_approval_table_t *t, const tg_approval_t *a) {
    return put(t, a, false);
}

tg_err_t tg_approval_table_each(tg_approval_table_t *t, tg_approval_each_fn fn, void *ud) {
    tg_err_t rc = TG_OK;
    pthread_mutex_lock(&t->mu);
    for (unsigned b = 0; rc == TG_OK && b < BUCKETS; b++) {
        for (entry_t *e = t->buckets[b]; rc == TG_OK && e != NULL; e = e->next) {
            rc = fn(ud, &e->a);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

bool tg_approval_table_room(tg_approval_table_t *t) {
    pthread_mutex_lock(&t->mu);
    bool room = t->entries < t->max_entries;
    pthread_mutex_unlock(&t->mu);
    return room;
}

/* Stored pending or approved, expired by the clock: the timer has an expiry step to write. */
static bool lags_clock(const tg_approval_t *a, int64_t now_ms) {
    return (a->status == TG_APPROVAL_PENDING || a->status == TG_APPROVAL_APPROVED) &&
           tg_approval_status_at(a, now_ms) == TG_APPROVAL_EXPIRED;
}

tg_err_t tg_approval_table_due(tg_approval_table_t *t, int64_t now_ms, tg_db_approval_ref_t *out,
                               size_t max, size_t *n) {
    *n = 0;
    pthread_mutex_lock(&t->mu);
    for (unsigned b = 0; b < BUCKETS && *n < max; b++) {
        for (entry_t *e = t->buckets[b]; e != NULL && *n < max; e = e->next) {
            if (!e->held && lags_clock(&e->a, now_ms)) {
                tg_db_approval_ref_t *r = &out[(*n)++];
                memset(r, 0, sizeof *r);
                memcpy(r->id, e->a.id, strnlen(e->a.id, sizeof r->id - 1));
                memcpy(r->tenant, e->a.tenant, strnlen(e->a.tenant, sizeof r->tenant - 1));
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    return TG_OK;
}

/* When a terminal approval ended: consumed at consumed_ms; denied or expired (stored) at
 * resolved_ms; expired by the clock only, at the instant status_at turned (expires_ms, or
 * resolved_ms + consume_within_ms for an approved one). -1: not terminal at now_ms. */
static int64_t ended_at(const tg_approval_t *a, int64_t now_ms) {
    switch (tg_approval_status_at(a, now_ms)) {
    case TG_APPROVAL_CONSUMED:
        return a->consumed_ms;
    case TG_APPROVAL_DENIED:
        return a->resolved_ms;
    case TG_APPROVAL_EXPIRED:
        if (a->status == TG_APPROVAL_EXPIRED) {
            return a->resolved_ms;
        }
        return a->status == TG_APPROVAL_APPROVED ? a->resolved_ms + a->consume_within_ms
                                                 : a->expires_ms;
    default:
        return -1;
    }
}

void tg_approval_table_sweep(tg_approval_table_t *t, int64_t now_ms) {
    pthread_mutex_lock(&t->mu);
    for (unsigned k = 0; k < SWEEP_BUCKETS; k++) {
        entry_t **pe = &t->buckets[t->sweep_next++ % BUCKETS];
        while (*pe != NULL) {
            entry_t *e = *pe;
            int64_t end = ended_at(&e->a, now_ms);
            /* A held one is being written: its writer commits a newer version next. */
            if (!e->held && end >= 0 && now_ms - end > t->retention_ms) {
                *pe = e->next;
                free(e);
                t->entries--;
                t->reclaimed++;
            } else {
                pe = &e->next;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
}

void tg_approval_table_stats(tg_approval_table_t *t, tg_store_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (t == NULL) {
        return;
    }
    pthread_mutex_lock(&t->mu);
    out->entries = t->entries;
    out->max_entries = t->max_entries;
    out->limit_rejections = t->rejections;
    out->expired_reclaimed = t->reclaimed;
    pthread_mutex_unlock(&t->mu);
}
