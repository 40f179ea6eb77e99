/* fill.c — a table's smoothed net growth and its time to full (store.h). */
#include <math.h>

#include "trigguard/store.h"

/* Exponential smoothing over irregular steps: a step of dt weighs 1 - e^(-dt/tau), so the
 * estimate forgets at the same pace whatever the tick's jitter. */
static double smooth(double old, double now, double weight) { return old + weight * (now - old); }

void tg_store_fill_sample(tg_store_fill_t *f, int64_t now_ms, const tg_store_stats_t *st) {
    if (f == NULL || st == NULL) {
        return;
    }
    if (!f->primed || now_ms < f->last_ms) {
        *f = (tg_store_fill_t){.last_ms = now_ms,
                               .last_entries = st->entries,
                               .last_bytes = st->bytes,
                               .primed = true};
        return;
    }
    int64_t dt_ms = now_ms - f->last_ms;
    if (dt_ms < TG_STORE_FILL_MIN_STEP_MS) {
        return;
    }
    double dt_s = (double)dt_ms / 1000.0;
    /* differences as doubles: a shrinking table gives a negative rate, not a wrap */
    double de = ((double)st->entries - (double)f->last_entries) / dt_s;
    double db = ((double)st->bytes - (double)f->last_bytes) / dt_s;
    if (!f->rated) {
        f->entries_per_s = de;
        f->bytes_per_s = db;
        f->rated = true;
    } else {
        double w = 1.0 - exp(-(double)dt_ms / (double)TG_STORE_FILL_TAU_MS);
        f->entries_per_s = smooth(f->entries_per_s, de, w);
        f->bytes_per_s = smooth(f->bytes_per_s, db, w);
    }
    f->last_ms = now_ms;
    f->last_entries = st->entries;
    f->last_bytes = st->bytes;
}

/* Seconds until used reaches cap at rate; -1 for never (no cap, not growing). */
static double eta(uint64_t used, uint64_t cap, double rate) {
    if (cap == 0) {
        return -1;
    }
    if (used >= cap) {
        return 0;
    }
    if (!(rate > 0)) {
        return -1;
    }
    return (double)(cap - used) / rate;
}

double tg_store_fill_seconds_to_full(const tg_store_fill_t *f, const tg_store_stats_t *st) {
    if (f == NULL || st == NULL) {
        return -1;
    }
    /* full is full, rate or not */
    if ((st->max_entries != 0 && st->entries >= st->max_entries) ||
        (st->max_bytes != 0 && st->bytes >= st->max_bytes)) {
        return 0;
    }
    if (!f->rated) {
        return -1;
    }
    double a = eta(st->entries, st->max_entries, f->entries_per_s);
    double b = eta(st->bytes, st->max_bytes, f->bytes_per_s);
    if (a < 0) {
        return b;
    }
    if (b < 0) {
        return a;
    }
    return a < b ? a : b;
}
