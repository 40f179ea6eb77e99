/* metrics.h — lock-free counters behind GET /metrics (pipeline-private).
 *
 * Every counter is a relaxed atomic: readers may see a scrape that is a few
 * increments behind, never a torn value. Routes and statuses are small fixed
 * enumerations; surfaces are interned into a fixed table on first sight (names
 * come from the policy, which is bounded), so nothing grows without limit.
 */
#ifndef TG_PIPELINE_METRICS_H
#define TG_PIPELINE_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/guard.h"
#include "trigguard/ledger.h"
#include "trigguard/store.h"

typedef enum {
    TG_ROUTE_EVALUATE = 0,
    TG_ROUTE_EXECUTE,
    TG_ROUTE_DECIDE,
    TG_ROUTE_VERIFY,
    TG_ROUTE_PROTOCOL_VERIFY,
    TG_ROUTE_RECEIPTS,
    TG_ROUTE_KEYS,
    TG_ROUTE_CAPABILITIES,
    TG_ROUTE_HEALTHZ,
    TG_ROUTE_READYZ,
    TG_ROUTE_VERSION,
    TG_ROUTE_METRICS,
    TG_ROUTE_ADMIN_RELOAD,
    TG_ROUTE_REDEEM,           /* POST /v1/receipts/{executionId}/redeem */
    TG_ROUTE_VERIFY_SIGNATURE, /* POST /protocol/verify-signature */
    TG_ROUTE_GATE,             /* GET|POST /v1/gate (nginx auth_request, Envoy ext_authz) */
    TG_ROUTE_APPROVALS,        /* GET /v1/approvals */
    TG_ROUTE_APPROVAL,         /* GET /v1/approvals/{id} */
    TG_ROUTE_APPROVAL_REVIEW,  /* POST /v1/approvals/{id}/approve|deny */
    TG_ROUTE_LOG_CHECKPOINT,   /* GET /v1/log/checkpoint (SPEC §12) */
    TG_ROUTE_LOG_TILE,         /* GET /v1/log/tile/... */
    TG_ROUTE_LOG_PROOF,        /* GET /v1/log/proof/inclusion|consistency */
    TG_ROUTE_RECEIPT_PROOF,    /* GET /v1/receipts/{executionId}/proof */
    TG_ROUTE_OTHER,
    TG_ROUTE__COUNT
} tg_route_t;

#define TG_METRICS_STATUSES 18
#define TG_METRICS_LATENCY_BUCKETS 16
#define TG_METRICS_SURFACES 256
#define TG_METRICS_SURFACE_NAME_MAX 128
/* Decision outcomes counted: 0 PERMIT, 1 DENY, 2 SILENCE, 3 ESCALATE (SPEC §11.2). */
#define TG_METRICS_OUTCOMES 4
/* The shadow's own fifth value: the candidate bundle refused the request itself. */
#define TG_METRICS_SHADOW_INVALID 4

typedef struct {
    _Atomic(const char *) name; /* NULL = free slot; points into `names` */
    char names[TG_METRICS_SURFACE_NAME_MAX + 1];
    atomic_uint_fast64_t decisions[TG_METRICS_OUTCOMES]; /* PERMIT, DENY, SILENCE, ESCALATE */
} tg_metrics_surface_t;

/* Observe mode's would-decisions (SPEC §11.1), one slot per (surface, decision, reason):
 * trigguard_would_decisions_total{surface,decision,reason}. The key is the surface, a 0x00,
 * the reason (a reason code: at most 64 bytes) and the decision's digit. */
#define TG_METRICS_WOULD_SLOTS 512
#define TG_METRICS_WOULD_KEY_MAX (TG_METRICS_SURFACE_NAME_MAX + 1 + 64 + 1)
typedef struct {
    _Atomic(const char *) key; /* NULL = free slot; points into `keys` */
    size_t key_len;            /* written before key is published */
    char keys[TG_METRICS_WOULD_KEY_MAX + 1];
    atomic_uint_fast64_t count;
} tg_metrics_would_t;

/* trigguard_shadow_disagreements_total{surface,live,shadow}: one slot per (surface, live
 * decision, shadow decision), the same slot type as the would-decisions'. */
#define TG_METRICS_SHADOW_SLOTS 256

/* Bounded label sets: reason codes come from the policy (bounded), tenants from the tokens
 * file and the OIDC issuers' lists; past the table, the label "other". */
#define TG_METRICS_REASON_SLOTS 256
#define TG_METRICS_TENANT_SLOTS 1024
#define TG_METRICS_TENANT_MAX 128 /* bytes of a tenant label */

/* An approval's steps (SPEC §11.2): trigguard_approval_events_total{event}. */
typedef enum tg_approval_event {
    TG_APPROVAL_EVENT_ESCALATED = 0, /* an ESCALATE opened an approval */
    TG_APPROVAL_EVENT_APPROVE,       /* a review approved */
    TG_APPROVAL_EVENT_DENY,          /* a review denied */
    TG_APPROVAL_EVENT_EXPIRED,       /* the timer expired one */
    TG_APPROVAL_EVENT_CONSUMED,      /* a resumed request's PERMIT used one */
    TG_APPROVAL_EVENT__COUNT
} tg_approval_event_t;

/* What a redemption ended in (redeem.c): trigguard_redemptions_total{result}. */
typedef enum {
    TG_REDEEM_OK = 0,        /* "redeemed": 200 */
    TG_REDEEM_ALREADY,       /* "already_redeemed": 409 */
    TG_REDEEM_HASH_MISMATCH, /* "request_hash_mismatch": 422 */
    TG_REDEEM_EXPIRED,       /* "expired": 410 */
    TG_REDEEM_NOT_PERMIT,    /* "not_permit": 409 */
    TG_REDEEM_NOT_AUTHENTIC, /* "not_authentic": 409 */
    TG_REDEEM_NOT_FOUND,     /* "not_found": 404 */
    TG_REDEEM_REFUSED,       /* "refused": 400, 401, 403, 413, 415, 429 before any lookup */
    TG_REDEEM_UNAVAILABLE,   /* "unavailable": 503, nothing redeemed */
    TG_REDEEM_ERROR,         /* "error": 500 */
    TG_REDEEM__COUNT
} tg_redeem_result_t;

/* Stateful limits (limits.c): trigguard_limit_denials_total{surface,limit}, one slot per
 * (surface, limit) met, and the reservation outcomes. Slots are claimed under a spin flag
 * (a denial is rare next to a decision); counts are relaxed atomics. */
#define TG_METRICS_LIMIT_SLOTS 256
typedef struct {
    char surface[TG_METRICS_SURFACE_NAME_MAX + 1];
    char limit[TG_METRICS_SURFACE_NAME_MAX + 1];
    atomic_uint_fast64_t count;
} tg_metrics_limit_slot_t;
typedef struct {
    atomic_flag lock;   /* guards n and slot names */
    _Atomic uint32_t n; /* slots in use */
    tg_metrics_limit_slot_t slots[TG_METRICS_LIMIT_SLOTS];
    atomic_uint_fast64_t overflow;  /* denials past the table (surface="other") */
    atomic_uint_fast64_t conflicts; /* reservations refused: the request re-decided */
    atomic_uint_fast64_t full;      /* reservations refused: the totals table is full (503) */
    atomic_uint_fast64_t errors;    /* totals unreadable or not reserved: 503 */
} tg_metrics_limits_t;

typedef struct tg_metrics {
    atomic_uint_fast64_t requests[TG_ROUTE__COUNT][TG_METRICS_STATUSES];
    atomic_uint_fast64_t latency[TG_ROUTE__COUNT][TG_METRICS_LATENCY_BUCKETS + 1];
    atomic_uint_fast64_t latency_sum_us[TG_ROUTE__COUNT];
    tg_metrics_surface_t surfaces[TG_METRICS_SURFACES];
    atomic_uint_fast64_t surfaces_overflow[TG_METRICS_OUTCOMES];
    atomic_uint_fast64_t idem_replays;
    atomic_uint_fast64_t ledger_wait_timeouts; /* deferred requests answered 503 unsettled */
    /* executionIds found already indexed for another ledger record, live or while the index
     * was rebuilt at start (evaluate.c, index_receipt): should stay 0 */
    atomic_uint_fast64_t receipt_index_collisions;
    atomic_uint_fast64_t redemptions[TG_REDEEM__COUNT];
    atomic_uint_fast64_t approval_events[TG_APPROVAL_EVENT__COUNT];
    /* trigguard_decisions_by_mode_total{mode,decision}: [0 enforce, 1 observe][outcome] */
    atomic_uint_fast64_t modes[2][TG_METRICS_OUTCOMES];
    tg_metrics_would_t would[TG_METRICS_WOULD_SLOTS];
    /* table full or names too long: surface "other" */
    atomic_uint_fast64_t would_overflow[TG_METRICS_OUTCOMES];
    /* --shadow-policy: the shadow bundle's decisions, and its disagreements with the live
     * one keyed by surface + the two decisions' digits (tg_metrics_shadow) */
    atomic_uint_fast64_t shadow_decisions;
    atomic_uint_fast64_t shadow_reason_only;
    tg_metrics_would_t shadow[TG_METRICS_SHADOW_SLOTS];
    atomic_uint_fast64_t shadow_overflow;
    /* trigguard_decisions_by_reason_total{decision,reason}: key reason + decision digit */
    tg_metrics_would_t reasons[TG_METRICS_REASON_SLOTS];
    atomic_uint_fast64_t reasons_overflow;
    /* trigguard_tenant_decisions_total{tenant,decision}: key tenant + decision digit */
    tg_metrics_would_t tenants[TG_METRICS_TENANT_SLOTS];
    atomic_uint_fast64_t tenants_overflow;
    int64_t start_ms; /* wall clock at tg_metrics_init: process_start_time_seconds */
    tg_metrics_limits_t limits;
} tg_metrics_t;

void tg_metrics_init(tg_metrics_t *m);
const char *tg_route_name(tg_route_t r);

/* Counts one finished request. Thread-safe. */
void tg_metrics_request(tg_metrics_t *m, tg_route_t route, int status, int64_t latency_us);

/* Counts one decision (0 PERMIT, 1 DENY, 2 SILENCE, 3 ESCALATE) for a surface. Thread-safe. */
void tg_metrics_decision(tg_metrics_t *m, const char *surface, size_t len, int outcome);

/* Counts one decision (0 PERMIT, 1 DENY, 2 SILENCE, 3 ESCALATE) by mode (observe or enforce). */
void tg_metrics_mode(tg_metrics_t *m, bool observe, int outcome);

/* Counts one observe-mode would-decision for surface and reason (reason NUL-terminated).
 * Thread-safe. */
void tg_metrics_would(tg_metrics_t *m, const char *surface, size_t len, int outcome,
                      const char *reason);

/* Counts one decision (0 PERMIT, 1 DENY, 2 SILENCE, 3 ESCALATE) by its reason code and by its
 * tenant. Thread-safe. */
void tg_metrics_decision_detail(tg_metrics_t *m, const char *tenant, size_t tenant_len, int outcome,
                                const char *reason);

/* build_info and the process_* series (CPU, resident memory, open and maximum descriptors,
 * start time) of the calling process. */
tg_err_t tg_metrics_render_process(tg_buf_t *out, const tg_metrics_t *m) TG_MUST_USE;

/* Counts one shadow decision; when live != shadow (0 PERMIT, 1 DENY, 2 SILENCE, 3 ESCALATE, 4
 * INVALID: the shadow bundle refused the request), one disagreement for the surface. Thread-safe.
 */
void tg_metrics_shadow(tg_metrics_t *m, const char *surface, size_t len, int live, int shadow);

/* Counts one shadow decision equal to the live one but for its reason code. Thread-safe. */
void tg_metrics_shadow_reason(tg_metrics_t *m);

/* Counts one request answered 503 while its record was still not durable (stall bound or
 * stop). Thread-safe. */
void tg_metrics_ledger_wait_timeout(tg_metrics_t *m);

/* Counts one redemption's result. Thread-safe. */
void tg_metrics_redeem(tg_metrics_t *m, tg_redeem_result_t r);
void tg_metrics_approval(tg_metrics_t *m, tg_approval_event_t e);

/* Counts one DENY by a stateful limit (limits.c). Thread-safe. */
void tg_metrics_limit_denial(tg_metrics_t *m, const char *surface, size_t surface_len,
                             const char *limit, size_t limit_len);
/* Appends trigguard_limit_denials_total and trigguard_limit_reservations_total (limits.c). */
tg_err_t tg_metrics_render_limits(tg_buf_t *out, tg_metrics_t *m) TG_MUST_USE;

/* Appends the Prometheus text exposition of these counters. */
tg_err_t tg_metrics_render(tg_buf_t *out, tg_metrics_t *m) TG_MUST_USE;

/* The transparency log's counters (db.h tg_db_stats_t.log, copied by the metrics route). */
typedef struct {
    bool enabled;
    uint64_t size;        /* the published checkpoint's tree size */
    uint64_t integrated;  /* leaves hashed into the tree */
    uint64_t checkpoints; /* signed and published since start */
    uint64_t lag_ms_last;
    uint64_t lag_hist[TG_LEDGER_FSYNC_BUCKETS]; /* µs, tg_ledger_fsync_bounds_us */
    uint64_t lag_sum_us;
    uint64_t failures; /* checkpoints that could not be made durable */
    uint64_t waiters;
    bool integrator;
} tg_metrics_log_t;

/* A snapshot of the state the other modules count (each taken with its own stats call). */
typedef struct {
    tg_metrics_log_t log;
    tg_ledger_stats_t ledger;
    tg_rate_stats_t rate, verify_rate;
    tg_bulkhead_stats_t bulkhead;
    tg_store_stats_t store;
    tg_store_stats_t receipts; /* the receipt index */
    /* [0] the idempotency/nonce table, [1] the receipt index (store.h's fill estimate) */
    bool fill_rated[2];         /* a rate exists (two samples) */
    int64_t fill_rate_milli[2]; /* smoothed net growth, thousandths of an entry per second */
    double fill_eta_s[2];       /* seconds to full at that rate and today's counts; -1: never */
} tg_metrics_state_t;

/* What is loaded now and how reloads went (reload.c): the parts' names, their counts, and
 * the identity of the configuration serving. The strings are the caller's, for the call. */
#define TG_METRICS_RELOAD_PARTS 6
typedef struct {
    const char *part[TG_METRICS_RELOAD_PARTS]; /* "policy", "tokens", "keys", "tls", "oidc",
                                                  "shadow_policy" */
    uint64_t ok[TG_METRICS_RELOAD_PARTS], failed[TG_METRICS_RELOAD_PARTS];
    const char *policy_version; /* policy-controlled: escaped */
    const char *policy_hash;
    const char *signing_key_id;       /* "" without a signing key */
    int64_t policy_loaded_at_ms;      /* when the serving policy was loaded */
    int64_t policy_last_reload_at_ms; /* 0 = no reload since start */
    bool policy_last_reload_ok;       /* true before the first reload */
} tg_metrics_config_t;

/* Appends trigguard_reload_total{what,result} (every part, both results, zeros included),
 * the gauge trigguard_config_info{policy_version,policy_hash,signing_key_id} 1 and the
 * policy's gauges trigguard_policy_loaded_timestamp_seconds,
 * trigguard_policy_last_reload_success and trigguard_policy_last_reload_timestamp_seconds. */
tg_err_t tg_metrics_render_config(tg_buf_t *out, const tg_metrics_config_t *c) TG_MUST_USE;

/* Appends the exposition of that snapshot (ledger, limits, bulkheads, store, and the
 * transparency log: trigguard_log_enabled always, its other series only when enabled). */
tg_err_t tg_metrics_render_state(tg_buf_t *out, const tg_metrics_state_t *st) TG_MUST_USE;

#endif /* TG_PIPELINE_METRICS_H */
