/* durable.c — a record made durable before a route answers, waited for on the route's own
 * thread. For the routes whose records are rare and whose answer must say the record is
 * durable: a redemption (redeem.c), an approval's review and the expiry timer (approvals.c).
 * /v1/evaluate does not wait here: it defers its connection instead (evaluate.c), because
 * it is the hot path and a thread per waiting request would not scale.
 *
 * The db's word may come after the route stopped waiting (the stall bound): the settle
 * callback is then run by the db's completion thread, so the claim or hold the record
 * carries is settled by whichever side learns the outcome, exactly once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "trigguard/log.h"

typedef struct durable_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int refs;
    bool done;      /* the db answered (under mu) */
    bool abandoned; /* the route stopped waiting (under mu): the callback settles */
    tg_err_t status;
    tg_pipeline_t *p;
    tg_durable_settle_fn settle;
    size_t state_len;
    max_align_t state[]; /* the caller's state, copied */
} durable_wait_t;

static void wait_put(durable_wait_t *w) {
    if (atomic_fetch_sub(&w->refs, 1) == 1) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
    }
}

/* db.h done: on the backend's completion thread; short, never blocking (the settle of an
 * abandoned wait is the exception the db allows: releases and commits). */
static void on_durable(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    (void)pos;
    durable_wait_t *w = ud;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    w->status = status;
    bool abandoned = w->abandoned;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (abandoned) {
        w->settle(w->p, w->state, status);
    }
    wait_put(w);
}

static durable_wait_t *wait_new(tg_pipeline_t *p, tg_durable_settle_fn settle, const void *state,
                                size_t state_len) {
    durable_wait_t *w = calloc(1, sizeof *w + state_len);
    if (w == NULL) {
        return NULL;
    }
    pthread_condattr_t ca;
    bool ok = pthread_condattr_init(&ca) == 0;
    ok = ok && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0;
    ok = ok && pthread_cond_init(&w->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_mutex_init(&w->mu, NULL) != 0) {
        if (ok) {
            pthread_cond_destroy(&w->cv);
        }
        free(w);
        return NULL;
    }
    atomic_store(&w->refs, 1);
    w->p = p;
    w->settle = settle;
    w->state_len = state_len;
    if (state_len > 0) {
        memcpy(w->state, state, state_len);
    }
    return w;
}

/* Waits for the db's word until --ledger-stall-timeout. Returns the word, or the
 * unavailability error with w->abandoned set (the callback settles then). */
static tg_err_t wait_word(tg_pipeline_t *p, durable_wait_t *w, const char *what) {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = dl.tv_nsec + (p->cfg.ledger_stall_timeout_ms % 1000) * 1000000;
    dl.tv_sec += (time_t)(p->cfg.ledger_stall_timeout_ms / 1000 + ns / 1000000000);
    dl.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&w->mu);
    int e = 0;
    while (!w->done && e == 0) {
        e = pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    }
    tg_err_t status = w->done ? w->status : tg_db_unavailable(p->db);
    if (!w->done) {
        w->abandoned = true;
        TG_LOG(TG_LOG_ERROR, "durable_wait_timeout",
               "%s record was not durable within --ledger-stall-timeout %lld ms; answered 503",
               what, (long long)p->cfg.ledger_stall_timeout_ms);
        tg_metrics_ledger_wait_timeout(&p->metrics);
    }
    bool settle_here = w->done;
    pthread_mutex_unlock(&w->mu);
    if (settle_here) {
        w->settle(p, w->state, status);
    }
    return status;
}

tg_err_t tg_pipeline_append_wait(tg_pipeline_t *p, const tg_db_record_t *rec,
                                 tg_durable_settle_fn settle, const void *state, size_t state_len,
                                 const char *what) {
    durable_wait_t *w = wait_new(p, settle, state, state_len);
    if (w == NULL) {
        settle(p, (void *)(uintptr_t)state, TG_ERR_NOMEM);
        return TG_ERR_NOMEM;
    }
    tg_err_t rc;
    if (p->cfg.durability == TG_CONFIG_DURABILITY_NONE) {
        tg_ledger_pos_t pos;
        rc = tg_db_append_now(p->db, rec, &pos);
        settle(p, w->state, rc);
        wait_put(w);
        return rc;
    }
    atomic_store(&w->refs, 2); /* the route's and the callback's */
    rc = tg_db_append(p->db, rec, on_durable, w);
    if (rc != TG_OK) {
        atomic_store(&w->refs, 1); /* done is never called on error */
        settle(p, w->state, rc);
        wait_put(w);
        return rc;
    }
    rc = wait_word(p, w, what);
    wait_put(w);
    return rc;
}
