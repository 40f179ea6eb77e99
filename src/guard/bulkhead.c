/* bulkhead.c — caps on requests in flight, per tenant and global, with atomic counters. */
#include "trigguard/guard.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct counter {
    _Alignas(64) atomic_uint_fast64_t n;
} counter_t;

struct tg_bulkhead {
    uint64_t global_max;
    uint64_t tenant_max;
    size_t tenants;
    counter_t *per_tenant;
    counter_t global;
    _Alignas(64) atomic_uint_fast64_t rejected_tenant;
    atomic_uint_fast64_t rejected_global;
    atomic_uint_fast64_t unbalanced;
};

tg_err_t tg_bulkhead_create(tg_bulkhead_t **out, const tg_bulkhead_opts_t *opts, tg_diag_t *diag) {
    tg_bulkhead_opts_t o = {0};
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "bulkhead: out is NULL");
    }
    *out = NULL;
    if (opts != NULL) {
        o = *opts;
    }
    if (o.tenants == 0) {
        o.tenants = TG_GUARD_MAX_TENANTS;
    }
    if (o.tenants > TG_GUARD_MAX_TENANTS) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "bulkhead: %zu tenant slots, at most %d", o.tenants,
                           TG_GUARD_MAX_TENANTS);
    }
    tg_bulkhead_t *b = aligned_alloc(64, (sizeof *b + 63) / 64 * 64);
    if (b == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "bulkhead: out of memory");
    }
    memset(b, 0, sizeof *b);
    b->per_tenant = aligned_alloc(64, o.tenants * sizeof(counter_t));
    if (b->per_tenant == NULL) {
        free(b);
        return tg_diag_set(diag, TG_ERR_NOMEM, "bulkhead: out of memory");
    }
    for (size_t i = 0; i < o.tenants; i++) {
        atomic_init(&b->per_tenant[i].n, 0);
    }
    b->global_max = o.global_max;
    b->tenant_max = o.tenant_max;
    b->tenants = o.tenants;
    atomic_init(&b->global.n, 0);
    atomic_init(&b->rejected_tenant, 0);
    atomic_init(&b->rejected_global, 0);
    atomic_init(&b->unbalanced, 0);
    *out = b;
    return TG_OK;
}

void tg_bulkhead_destroy(tg_bulkhead_t *b) {
    if (b != NULL) {
        free(b->per_tenant);
        free(b);
    }
}

/* Increments c unless it is at max (0 = no cap). A CAS loop, so c never exceeds max even
 * for an instant and a doomed attempt never makes a concurrent one fail. */
static bool counter_take(counter_t *c, uint64_t max) {
    if (max == 0) {
        atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
        return true;
    }
    uint_fast64_t cur = atomic_load_explicit(&c->n, memory_order_relaxed);
    do {
        if (cur >= max) {
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&c->n, &cur, cur + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/* Decrements c unless it is 0 (an unbalanced leave); returns false then. */
static bool counter_give(counter_t *c) {
    uint_fast64_t cur = atomic_load_explicit(&c->n, memory_order_relaxed);
    do {
        if (cur == 0) {
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&c->n, &cur, cur - 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

static bool tenant_ok(const tg_bulkhead_t *b, int tenant) {
    return tenant == TG_GUARD_NO_TENANT || (tenant >= 0 && (size_t)tenant < b->tenants);
}

tg_err_t tg_bulkhead_enter(tg_bulkhead_t *b, int tenant, tg_bulkhead_reason_t *why) {
    if (why != NULL) {
        *why = TG_BULKHEAD_OK;
    }
    if (b == NULL || !tenant_ok(b, tenant)) {
        return TG_ERR_INVALID_ARG;
    }
    counter_t *tc = tenant >= 0 ? &b->per_tenant[tenant] : NULL;
    if (tc != NULL && !counter_take(tc, b->tenant_max)) {
        atomic_fetch_add_explicit(&b->rejected_tenant, 1, memory_order_relaxed);
        if (why != NULL) {
            *why = TG_BULKHEAD_TENANT_FULL;
        }
        return TG_ERR_OVERLOADED;
    }
    if (!counter_take(&b->global, b->global_max)) {
        if (tc != NULL) {
            (void)counter_give(tc);
        }
        atomic_fetch_add_explicit(&b->rejected_global, 1, memory_order_relaxed);
        if (why != NULL) {
            *why = TG_BULKHEAD_GLOBAL_FULL;
        }
        return TG_ERR_OVERLOADED;
    }
    return TG_OK;
}

void tg_bulkhead_leave(tg_bulkhead_t *b, int tenant) {
    if (b == NULL) {
        return;
    }
    if (!tenant_ok(b, tenant)) {
        atomic_fetch_add_explicit(&b->unbalanced, 1, memory_order_relaxed);
        return;
    }
    bool ok = counter_give(&b->global);
    if (tenant >= 0) {
        ok = counter_give(&b->per_tenant[tenant]) && ok;
    }
    if (!ok) {
        atomic_fetch_add_explicit(&b->unbalanced, 1, memory_order_relaxed);
    }
}

void tg_bulkhead_stats(const tg_bulkhead_t *b, tg_bulkhead_stats_t *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (b != NULL) {
        out->in_flight = atomic_load_explicit(&b->global.n, memory_order_relaxed);
        out->rejected_tenant = atomic_load_explicit(&b->rejected_tenant, memory_order_relaxed);
        out->rejected_global = atomic_load_explicit(&b->rejected_global, memory_order_relaxed);
        out->unbalanced_leaves = atomic_load_explicit(&b->unbalanced, memory_order_relaxed);
    }
}

uint64_t tg_bulkhead_tenant_in_flight(const tg_bulkhead_t *b, int tenant) {
    if (b == NULL || tenant < 0 || (size_t)tenant >= b->tenants) {
        return 0;
    }
    return atomic_load_explicit(&b->per_tenant[tenant].n, memory_order_relaxed);
}
