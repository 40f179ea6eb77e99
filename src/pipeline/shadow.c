/* shadow.c — --shadow-policy (issue 22): a candidate bundle decided beside the live one.
 *
 * Teams roll a policy out by watching what it would have decided before it decides anything.
 * For every request the live policy decided, the shadow bundle decides the same request
 * (same body, tenant, principal, actor binding and instant), and a disagreement is counted
 * (trigguard_shadow_disagreements_total{surface,live,shadow}) and logged with both reasons.
 * The shadow never changes an outcome: it runs after the live decision and its result goes
 * nowhere but metrics and the log.
 *
 * Off the critical path where possible: tg_pipeline_evaluate calls it after the record was
 * handed to the ledger, so on the durable path it overlaps the wait for the sync; on /decide
 * and with --durability none it runs before the response is written (a frame and one kernel
 * run: microseconds).
 *
 * The bundle is loaded like the live one (same loader and checks) at start, where a broken
 * one refuses the start, and again by every reload (part "shadow_policy"), where a broken one
 * keeps the previous shadow. It lives in a swap of its own, so a request never waits for it. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"

tg_err_t tg_pipeline_shadow_start(tg_pipeline_t *p, tg_diag_t *diag) {
    if (p->cfg.shadow_policy[0] == '\0') {
        return TG_OK;
    }
    tg_policy_ref_t *ref = NULL;
    tg_diag_t d = {{0}};
    tg_err_t rc = tg_pipeline_policy_ref_load(&ref, p->cfg.shadow_policy, &d);
    if (rc == TG_OK) {
        rc = tg_swap_create(&p->shadow, ref);
        if (rc != TG_OK) {
            tg_pipeline_policy_ref_free(ref);
        }
        return rc;
    }
    return tg_diag_set(diag, rc, "--shadow-policy: %s", d.msg[0] ? d.msg : tg_strerror(rc));
}

tg_err_t tg_pipeline_shadow_reload(tg_pipeline_t *p, tg_diag_t *diag) {
    if (p->shadow == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "no --shadow-policy was configured");
    }
    tg_policy_ref_t *fresh = NULL;
    tg_err_t rc = tg_pipeline_policy_ref_load(&fresh, p->cfg.shadow_policy, diag);
    if (rc == TG_OK) {
        tg_pipeline_policy_ref_free(tg_swap_exchange(p->shadow, fresh));
    }
    return rc;
}

void tg_pipeline_shadow_stop(tg_pipeline_t *p) {
    if (p->shadow != NULL) {
        tg_pipeline_policy_ref_free(tg_swap_peek(p->shadow));
        tg_swap_destroy(p->shadow);
        p->shadow = NULL;
    }
}

/* At most this many disagreement lines a second: a candidate that disagrees with every
 * request must not turn the log into a second copy of the traffic. The counters see all. */
#define SHADOW_LOG_PER_S 10

static bool log_allowed(tg_pipeline_t *p, int64_t now_ms) {
    int64_t sec = now_ms / 1000;
    int64_t cur = atomic_load_explicit(&p->shadow_log_sec, memory_order_relaxed);
    if (cur != sec &&
        atomic_compare_exchange_strong_explicit(&p->shadow_log_sec, &cur, sec, memory_order_relaxed,
                                                memory_order_relaxed)) {
        atomic_store_explicit(&p->shadow_log_count, 0, memory_order_relaxed);
    }
    return atomic_fetch_add_explicit(&p->shadow_log_count, 1, memory_order_relaxed) <
           SHADOW_LOG_PER_S;
}

static int outcome(tg_verdict_t v) {
    return v == TG_PERMIT ? 0 : v == TG_DENY ? 1 : v == TG_ESCALATE ? 3 : 2;
}

void tg_pipeline_shadow_decide(tg_pipeline_t *p, const tg_shadow_input_t *in) {
    if (p->shadow == NULL || in->request == NULL) {
        return;
    }
    tg_swap_ref_t hold;
    const tg_policy_ref_t *ref = tg_swap_acquire(p->shadow, &hold);
    const tg_policy_t *pol = ref->policy;
    tg_frame_t f;
    tg_diag_t diag = {{0}};
    tg_decision_t d;
    int shadow = TG_METRICS_SHADOW_INVALID; /* the candidate refuses the request itself */
    const char *why = NULL;
    if (tg_frame_from_request(&f, NULL, pol, in->request, &diag) == TG_OK) {
        tg_pipeline_bind_facts(&f, pol, in->tenant, in->tenant_len, in->principal);
        /* The actor the live decision saw: a token bound to one actor supplies it. */
        f.actor = in->actor;
        f.now_ms = in->now_ms;
        f.has_now = 1;
        tg_kernel_decide(&d, tg_policy_tables(pol), &f);
        shadow = outcome(d.verdict);
        why = d.reason;
    }
    int live = outcome(in->live.verdict);
    bool same_reason = why != NULL && strcmp(why, in->live.reason) == 0;
    tg_metrics_shadow(&p->metrics, in->surface, in->surface_len, live, shadow);
    if (live == shadow && !same_reason) {
        tg_metrics_shadow_reason(&p->metrics);
    }
    if ((live != shadow || !same_reason) && log_allowed(p, in->now_ms)) {
        static const char *const names[TG_METRICS_SHADOW_INVALID + 1] = {
            "PERMIT", "DENY", "SILENCE", "ESCALATE", "INVALID"};
        TG_LOG(TG_LOG_INFO, "shadow_disagreement",
               "request %s surface %.*s: live %s %s (policy %s), shadow %s %s (policy %s)",
               in->request_id, (int)in->surface_len, in->surface, names[live], in->live.reason,
               in->live_version, names[shadow], why != NULL ? why : diag.msg,
               tg_policy_version(pol));
    }
    tg_swap_release(p->shadow, &hold);
}
