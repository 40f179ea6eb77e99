/* limits.c — stateful limits in the pipeline (docs/POLICY.md "Limits"): the totals bound
 * into the frame before the kernel, the reservations after a PERMIT, their release, and the
 * metrics of both. The kernel only compares; the db holds the totals (db.h). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "internal.h"
#include "trigguard/kernel_tables.h"

tg_err_t tg_pipeline_limits_bind(tg_pipeline_t *p, const tg_policy_t *pol, tg_frame_t *f,
                                 int64_t now_ms, tg_limit_hold_t *h) {
    h->n = 0;
    h->n_reserved = 0;
    f->n_limits = 0;
    uint32_t n = 0;
    const uint32_t *ids = tg_policy_surface_limits(pol, f->surface, &n);
    for (uint32_t i = 0; i < n; i++) {
        const tg_limit_t *l = tg_policy_limit(pol, ids[i]);
        if (l == NULL || l->id.len > TG_DB_LIMIT_NAME_MAX || i >= TG_FRAME_MAX_LIMITS) {
            return TG_ERR_INVALID_ARG; /* the compiler's bounds make this unreachable */
        }
        tg_db_limit_ref_t *ref = &h->refs[i];
        tg_err_t rc = tg_policy_limit_key(ref->key, &ref->window_start_s, pol, ids[i], f, now_ms);
        if (rc != TG_OK) {
            return rc;
        }
        memcpy(h->names[i], l->id.ptr, l->id.len);
        h->names[i][l->id.len] = '\0';
        ref->limit = h->names[i];
        ref->limit_len = l->id.len;
        ref->window_s = tg_policy_limit_window_s(pol, ids[i]);
        double total = 0;
        rc = tg_db_limit_total(p->db, ref, &total);
        if (rc != TG_OK) {
            atomic_fetch_add_explicit(&p->metrics.limits.errors, 1, memory_order_relaxed);
            return rc;
        }
        h->ids[i] = ids[i];
        f->limits[i].id = ids[i];
        f->limits[i].v = (tg_value_t){.type = TG_VT_NUMBER, .num = total};
        h->n = i + 1;
        f->n_limits = i + 1;
    }
    return TG_OK;
}

/* What this request adds to limit l (kernel.h: 1 for a count, the summed field for a sum);
 * NaN when it cannot be counted, which the kernel already refused for a PERMIT. */
static double amount_of(const tg_limit_t *l, const tg_frame_t *f) {
    if (l->kind == TG_LIMIT_COUNT) {
        return 1.0;
    }
    for (uint32_t i = 0; i < f->n_context && i < TG_FRAME_MAX_CONTEXT; i++) {
        const tg_value_t *v = &f->context[i].v;
        if (f->context[i].id == l->field) {
            return v->type == TG_VT_NUMBER && v->num >= 0 && isfinite(v->num) ? v->num : NAN;
        }
    }
    return NAN;
}

tg_err_t tg_pipeline_limits_reserve(tg_pipeline_t *p, const tg_policy_t *pol, tg_frame_t *f,
                                    tg_limit_hold_t *h) {
    tg_pipeline_limits_release(p, h);
    for (uint32_t i = 0; i < h->n; i++) {
        const tg_limit_t *l = tg_policy_limit(pol, h->ids[i]);
        double amount = l != NULL ? amount_of(l, f) : NAN;
        if (l == NULL || !(amount >= 0)) {
            tg_pipeline_limits_release(p, h);
            return TG_ERR_INVALID_ARG; /* never reached after the kernel's PERMIT */
        }
        double after = 0;
        tg_err_t rc = tg_db_limit_reserve(p->db, &h->refs[i], amount, l->max, &after);
        if (rc == TG_ERR_LIMIT_EXCEEDED) {
            /* Another request took the room since the total was read: the kernel decides
             * again with the total as it is now (a DENY with this limit's reason). */
            atomic_fetch_add_explicit(&p->metrics.limits.conflicts, 1, memory_order_relaxed);
            f->limits[i].v.num = after;
            tg_pipeline_limits_release(p, h);
            return rc;
        }
        if (rc != TG_OK) {
            atomic_fetch_add_explicit(rc == TG_ERR_LIMIT ? &p->metrics.limits.full
                                                         : &p->metrics.limits.errors,
                                      1, memory_order_relaxed);
            tg_pipeline_limits_release(p, h);
            return rc;
        }
        h->amounts[i] = amount;
        h->n_reserved = i + 1;
    }
    return TG_OK;
}

void tg_pipeline_limits_release(tg_pipeline_t *p, tg_limit_hold_t *h) {
    /* in reverse, so that a reservation is undone after the ones taken after it */
    while (h->n_reserved > 0) {
        h->n_reserved--;
        uint32_t i = h->n_reserved;
        if (tg_db_limit_release(p->db, &h->refs[i], h->amounts[i]) != TG_OK) {
            /* The amount stays counted (pg unreachable): over-counting, fail closed. */
            atomic_fetch_add_explicit(&p->metrics.limits.errors, 1, memory_order_relaxed);
        }
    }
}

void tg_pipeline_limits_settled(tg_limit_hold_t *h) { h->n_reserved = 0; }

size_t tg_pipeline_limits_contributions(const tg_limit_hold_t *h, tg_record_limit_t *out) {
    for (uint32_t i = 0; i < h->n_reserved; i++) {
        out[i] = (tg_record_limit_t){.limit = {h->refs[i].limit, h->refs[i].limit_len},
                                     .window_start_s = h->refs[i].window_start_s,
                                     .window_s = h->refs[i].window_s,
                                     .amount = h->amounts[i]};
        memcpy(out[i].key, h->refs[i].key, sizeof out[i].key);
    }
    return h->n_reserved;
}

size_t tg_pipeline_limits_widest(const tg_policy_t *pol, uint32_t surface, tg_record_limit_t *out) {
    uint32_t n = 0;
    const uint32_t *ids = tg_policy_surface_limits(pol, surface, &n);
    for (uint32_t i = 0; i < n && i < TG_RECORD_MAX_LIMITS; i++) {
        const tg_limit_t *l = tg_policy_limit(pol, ids[i]);
        out[i] = (tg_record_limit_t){.limit = {l->id.ptr, l->id.len},
                                     .window_start_s = INT64_MAX / 1000,
                                     .window_s = TG_LIMIT_WINDOW_MAX_S,
                                     .amount = DBL_MAX}; /* among the longest number texts */
        memset(out[i].key, 0xff, sizeof out[i].key);
    }
    return n;
}

/* ---- metrics ---------------------------------------------------------------------------- */

void tg_metrics_limit_denial(tg_metrics_t *m, const char *surface, size_t surface_len,
                             const char *limit, size_t limit_len) {
    tg_metrics_limits_t *ml = &m->limits;
    if (surface_len > TG_METRICS_SURFACE_NAME_MAX || limit_len > TG_METRICS_SURFACE_NAME_MAX) {
        atomic_fetch_add_explicit(&ml->overflow, 1, memory_order_relaxed);
        return;
    }
    while (atomic_flag_test_and_set_explicit(&ml->lock, memory_order_acquire)) {
    }
    uint32_t n = atomic_load_explicit(&ml->n, memory_order_relaxed);
    tg_metrics_limit_slot_t *slot = NULL;
    for (uint32_t i = 0; i < n && slot == NULL; i++) {
        tg_metrics_limit_slot_t *s = &ml->slots[i];
        if (strlen(s->surface) == surface_len && memcmp(s->surface, surface, surface_len) == 0 &&
            strlen(s->limit) == limit_len && memcmp(s->limit, limit, limit_len) == 0) {
            slot = s;
        }
    }
    if (slot == NULL && n < TG_METRICS_LIMIT_SLOTS) {
        slot = &ml->slots[n];
        memcpy(slot->surface, surface, surface_len);
        slot->surface[surface_len] = '\0';
        memcpy(slot->limit, limit, limit_len);
        slot->limit[limit_len] = '\0';
        atomic_store_explicit(&ml->n, n + 1, memory_order_release);
    }
    atomic_flag_clear_explicit(&ml->lock, memory_order_release);
    atomic_fetch_add_explicit(slot != NULL ? &slot->count : &ml->overflow, 1, memory_order_relaxed);
}

/* A label value with \ " and newline escaped (Prometheus text format). */
static tg_err_t put_label(tg_buf_t *out, const char *s) {
    tg_err_t rc = TG_OK;
    for (; *s != '\0' && rc == TG_OK; s++) {
        if (*s == '\\' || *s == '"') {
            rc = tg_buf_putc(out, '\\');
        }
        if (rc == TG_OK) {
            rc = *s == '\n' ? tg_buf_puts(out, "\\n") : tg_buf_putc(out, *s);
        }
    }
    return rc;
}

static unsigned long long ld(atomic_uint_fast64_t *a) {
    return (unsigned long long)atomic_load_explicit(a, memory_order_relaxed);
}

tg_err_t tg_metrics_render_limits(tg_buf_t *out, tg_metrics_t *m) {
    tg_metrics_limits_t *ml = &m->limits;
    tg_err_t rc = tg_buf_puts(out, "# HELP trigguard_limit_denials_total DENY decisions by a "
                                   "stateful limit, by surface and limit.\n"
                                   "# TYPE trigguard_limit_denials_total counter\n");
    uint32_t n = atomic_load_explicit(&ml->n, memory_order_acquire);
    for (uint32_t i = 0; i < n && rc == TG_OK; i++) {
        tg_metrics_limit_slot_t *s = &ml->slots[i];
        rc = tg_buf_puts(out, "trigguard_limit_denials_total{surface=\"");
        if (rc == TG_OK) {
            rc = put_label(out, s->surface);
        }
        if (rc == TG_OK) {
            rc = tg_buf_puts(out, "\",limit=\"");
        }
        if (rc == TG_OK) {
            rc = put_label(out, s->limit);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(out, "\"} %llu\n", ld(&s->count));
        }
    }
    if (rc == TG_OK && ld(&ml->overflow) > 0) {
        rc = tg_buf_printf(out,
                           "trigguard_limit_denials_total{surface=\"other\",limit=\"other\"} "
                           "%llu\n",
                           ld(&ml->overflow));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(out,
                           "# HELP trigguard_limit_reservations_total Stateful-limit "
                           "reservations that failed after a PERMIT: conflict (another request "
                           "took the room; re-decided), full (the totals table is full; 503), "
                           "error (the store could not answer; 503).\n"
                           "# TYPE trigguard_limit_reservations_total counter\n"
                           "trigguard_limit_reservations_total{result=\"conflict\"} %llu\n"
                           "trigguard_limit_reservations_total{result=\"full\"} %llu\n"
                           "trigguard_limit_reservations_total{result=\"error\"} %llu\n",
                           ld(&ml->conflicts), ld(&ml->full), ld(&ml->errors));
    }
    return rc;
}
