/* rate.c — lock-free GCRA rate limiting, per tenant and global. */
#include "trigguard/guard.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MIN INT64_C(60000000000)
#define MAX_BURST UINT64_C(1000000000)
_Static_assert(TG_RATE_MAX_PER_MIN == NS_PER_MIN, "the fastest rate is one request per ns");
_Static_assert(TG_RATE_BURST_ANY_RATE == INT64_MAX / 8 / NS_PER_MIN &&
                   (uint64_t)TG_RATE_BURST_ANY_RATE < MAX_BURST,
               "TG_RATE_BURST_ANY_RATE passes limiter_init's checks at 1/min, the slowest rate");
/* TAT of an idle limiter: far in the past, yet far from overflow when T is added. */
#define TAT_IDLE (INT64_MIN / 4)

typedef struct slot {
    _Alignas(64) atomic_int_least64_t tat;
} slot_t;

typedef struct limiter {
    uint64_t rate;  /* per minute; 0 = unlimited */
    uint64_t burst; /* B: 1 + B pass at once */
    int64_t t_ns;   /* emission interval T */
    int64_t tau_ns; /* B * T: how far the TAT may run ahead of now */
} limiter_t;

struct tg_rate {
    limiter_t tenant;
    limiter_t global;
    size_t tenants;
    slot_t *slots;
    slot_t gslot;
    _Alignas(64) atomic_uint_fast64_t rejected_tenant;
    atomic_uint_fast64_t rejected_global;
};

static tg_err_t limiter_init(limiter_t *l, uint64_t rate, uint64_t burst, const char *what,
                             tg_diag_t *diag) {
    memset(l, 0, sizeof *l);
    if (rate == 0) {
        return TG_OK;
    }
    if (rate > (uint64_t)TG_RATE_MAX_PER_MIN) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "rate limit: %s rate %llu/min is above %lld/min",
                           what, (unsigned long long)rate, (long long)NS_PER_MIN);
    }
    if (burst == 0) {
        burst = rate / 10 < MAX_BURST ? rate / 10 : MAX_BURST;
    }
    l->rate = rate;
    l->burst = burst;
    l->t_ns = NS_PER_MIN / (int64_t)rate;
    if (burst > MAX_BURST || burst > (uint64_t)(INT64_MAX / 8 / l->t_ns)) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "rate limit: %s burst %llu is too large", what,
                           (unsigned long long)burst);
    }
    l->tau_ns = (int64_t)burst * l->t_ns;
    return TG_OK;
}

tg_err_t tg_rate_create(tg_rate_t **out, const tg_rate_opts_t *opts, tg_diag_t *diag) {
    tg_rate_opts_t o = {0};
    tg_rate_t *r = NULL;
    tg_err_t rc = TG_OK;
    if (out == NULL) {
        return tg_diag_set(diag, TG_ERR_INVALID_ARG, "rate limit: out is NULL");
    }
    *out = NULL;
    if (opts != NULL) {
        o = *opts;
    }
    if (o.tenants == 0) {
        o.tenants = TG_GUARD_MAX_TENANTS;
    }
    if (o.tenants > TG_GUARD_MAX_TENANTS) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "rate limit: %zu tenant slots, at most %d",
                           o.tenants, TG_GUARD_MAX_TENANTS);
    }
    r = aligned_alloc(64, (sizeof *r + 63) / 64 * 64);
    if (r == NULL) {
        return tg_diag_set(diag, TG_ERR_NOMEM, "rate limit: out of memory");
    }
    memset(r, 0, sizeof *r);
    rc = limiter_init(&r->tenant, o.tenant_per_min, o.tenant_burst, "per-tenant", diag);
    if (rc) {
        goto fail;
    }
    rc = limiter_init(&r->global, o.global_per_min, o.global_burst, "global", diag);
    if (rc) {
        goto fail;
    }
    r->tenants = o.tenants;
    r->slots = aligned_alloc(64, o.tenants * sizeof(slot_t));
    if (r->slots == NULL) {
        rc = tg_diag_set(diag, TG_ERR_NOMEM, "rate limit: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < o.tenants; i++) {
        atomic_init(&r->slots[i].tat, TAT_IDLE);
    }
    atomic_init(&r->gslot.tat, TAT_IDLE);
    atomic_init(&r->rejected_tenant, 0);
    atomic_init(&r->rejected_global, 0);
    *out = r;
    return TG_OK;

fail:
    tg_rate_destroy(r);
    return rc;
}

void tg_rate_destroy(tg_rate_t *r) {
    if (r != NULL) {
        free(r->slots);
        free(r);
    }
}

static int64_t ns_to_ms_up(int64_t ns) { return ns <= 0 ? 0 : (ns + 999999) / 1000000; }

/* One GCRA cell: admit iff max(TAT, now) - now <= tau, then TAT = max(TAT, now) + T.
 * A refusal writes nothing. */
static bool limiter_take(const limiter_t *l, slot_t *s, int64_t now, tg_rate_info_t *info) {
    int64_t tat = atomic_load_explicit(&s->tat, memory_order_relaxed);
    for (;;) {
        int64_t base = tat > now ? tat : now;
        int64_t ahead = base - now;
        if (ahead > l->tau_ns) {
            if (info != NULL) {
                info->retry_after_ms = ns_to_ms_up(ahead - l->tau_ns);
                info->remaining = 0;
                info->reset_ms = ns_to_ms_up(ahead);
            }
            return false;
        }
        int64_t next = base + l->t_ns;
        if (atomic_compare_exchange_weak_explicit(&s->tat, &tat, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            if (info != NULL) {
                info->retry_after_ms = 0;
                info->remaining = (uint64_t)((l->tau_ns + l->t_ns - (next - now)) / l->t_ns);
                info->reset_ms = ns_to_ms_up(next - now);
            }
            return true;
        }
    }
}

static void info_describe(tg_rate_info_t *info, const limiter_t *l, tg_rate_scope_t scope) {
    info->scope = scope;
    info->limit = l->rate;
    info->burst = l->burst;
}

tg_err_t tg_rate_check(tg_rate_t *r, int tenant, int64_t now_ns, tg_rate_info_t *info) {
    tg_rate_info_t g;
    if (info != NULL) {
        memset(info, 0, sizeof *info);
    }
    if (r == NULL || tenant < TG_GUARD_NO_TENANT || (tenant >= 0 && (size_t)tenant >= r->tenants)) {
        return TG_ERR_INVALID_ARG;
    }
    bool use_tenant = tenant >= 0 && r->tenant.rate != 0;
    slot_t *ts = use_tenant ? &r->slots[tenant] : NULL;
    if (use_tenant) {
        if (info != NULL) {
            info_describe(info, &r->tenant, TG_RATE_SCOPE_TENANT);
        }
        if (!limiter_take(&r->tenant, ts, now_ns, info)) {
            atomic_fetch_add_explicit(&r->rejected_tenant, 1, memory_order_relaxed);
            return TG_ERR_RATE_LIMITED;
        }
    }
    if (r->global.rate != 0) {
        memset(&g, 0, sizeof g);
        info_describe(&g, &r->global, TG_RATE_SCOPE_GLOBAL);
        if (!limiter_take(&r->global, &r->gslot, now_ns, &g)) {
            if (use_tenant) {
                /* Refund: TATs are sums of T, so taking ours back leaves the state every
                 * concurrent caller saw minus exactly this request. */
                atomic_fetch_sub_explicit(&ts->tat, r->tenant.t_ns, memory_order_relaxed);
            }
            atomic_fetch_add_explicit(&r->rejected_global, 1, memory_order_relaxed);
            if (info != NULL) {
                *info = g;
            }
            return TG_ERR_RATE_LIMITED;
        }
        if (info != NULL && !use_tenant) {
            *info = g;
        }
    }
    return TG_OK;
}

int64_t tg_rate_retry_after_s(int64_t retry_after_ms) {
    if (retry_after_ms <= 1000) {
        return 1;
    }
    return (retry_after_ms + 999) / 1000;
}

void tg_rate_stats(const tg_rate_t *r, tg_rate_stats_t *out) {
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof *out);
    if (r != NULL) {
        out->rejected_tenant = atomic_load_explicit(&r->rejected_tenant, memory_order_relaxed);
        out->rejected_global = atomic_load_explicit(&r->rejected_global, memory_order_relaxed);
    }
}
