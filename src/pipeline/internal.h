/* internal.h — state shared by the pipeline's files (not a public contract). */
#ifndef TG_PIPELINE_INTERNAL_H
#define TG_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"
#include "trigguard/canon.h"
#include "trigguard/config.h"
#include "trigguard/db.h"
#include "trigguard/guard.h"
#include "trigguard/http.h"
#include "trigguard/keys.h"
#include "trigguard/ledger.h"
#include "trigguard/note.h"
#include "trigguard/oidc.h"
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"
#include "trigguard/record.h"
#include "trigguard/swap.h"

/* A loaded policy plus what is derived from it once. Requests hold a reference through the
 * pipeline's swap (swap.h) for the few microseconds they use it; a reload replaces it
 * there and frees the old one once no request can still hold it. */
typedef struct tg_policy_ref {
    tg_policy_t *policy;
    char fingerprint[65];
    int64_t loaded_at_ms; /* wall clock when it was loaded (start or a reload): /version */
} tg_policy_ref_t;

/* The signing key, the verify-only keys and the keys.json rendered from them: one object,
 * replaced whole by a reload (reload.c), so that a request sees one consistent set. */
typedef struct tg_keyset {
    tg_keyring_t ring;
    const tg_key_t *signer; /* points into ring, NULL when no signing key */
    tg_buf_t keys_json;     /* rendered at load; empty when the ring is */
} tg_keyset_t;

/* The transparency log's key as the routes and keys.json show it (SPEC §12; log_routes.c),
 * fixed at start: rotating the log key is not supported (docs/OPERATIONS.md). */
typedef struct tg_pipeline_log {
    bool enabled;                /* --log-key given */
    tg_note_verifier_t pub;      /* origin (the key name), key id, public key */
    char key_id[9];              /* keys.json keyId: the note key id, 8 lowercase hex */
    char vkey[TG_NOTE_VKEY_MAX]; /* the C2SP verifier key */
    tg_key_t key;                /* its public half (keys.json's publicKeyPem) */
    tg_note_signer_t *signer;    /* until the db copied it (open_state), then NULL */
} tg_pipeline_log_t;

/* What the last reload of each part did, for /version and /metrics (reload.c). */
typedef enum {
    TG_PART_POLICY,
    TG_PART_TOKENS,
    TG_PART_KEYS,
    TG_PART_TLS,
    TG_PART_OIDC,   /* reloaded before the tokens: its tenants go into the new table */
    TG_PART_SHADOW, /* --shadow-policy (shadow.c) */
    TG_PART__COUNT
} tg_part_t;

/* One reload: when, what triggered it, and each part's outcome. */
struct tg_reload_report {
    int64_t at_ms;       /* wall clock; 0 = no reload since start */
    const char *trigger; /* "signal" or "admin" (static) */
    tg_err_t rc[TG_PART__COUNT];
    bool tried[TG_PART__COUNT]; /* false: the part is not configured (nothing to reload) */
    char error[TG_PART__COUNT][TG_DIAG_MAX];
};
typedef struct tg_reload_report tg_reload_report_t;

struct tg_pipeline {
    tg_config_t cfg;
    tg_json_limits_t limits;
    int64_t receipt_ttl_ms;

    tg_swap_t *policy; /* holds the current tg_policy_ref_t; NULL only while creating */
    tg_swap_t *shadow; /* --shadow-policy's tg_policy_ref_t (shadow.c); NULL when none */
    _Atomic int64_t shadow_log_sec; /* the second shadow.c's log budget counts */
    atomic_int shadow_log_count;

    tg_swap_t *keys;    /* holds the current tg_keyset_t (never NULL once created) */
    tg_swap_t *tenants; /* holds the current tg_tenants_t (never NULL once created) */
    tg_tls_t *tls;      /* the listeners' certificate store, not owned; NULL: plain HTTP */
    tg_rate_t *rate;
    tg_rate_t *verify_rate; /* RATE_LIMIT_VERIFY: verification needs no token, so no tenant */
    tg_bulkhead_t *bulkhead;
    tg_db_t *db;           /* claims, records, the receipt index (db.h) */
    tg_pipeline_log_t log; /* the transparency log's key (log_routes.c) */
    /* JWT callers (oidc.h); NULL when neither an --oidc flag nor --oidc-config was given */
    tg_oidc_t *oidc;

    tg_metrics_t metrics;
    atomic_bool serving;
    uint64_t replayed_records;

    /* Live ledger entries the replay could not fit (caps smaller than at the last run):
     * the start is refused when either is not 0 (tg_pipeline_replay_check). */
    uint64_t replay_unfit_store;     /* idempotency keys and nonces */
    uint64_t replay_unfit_receipts;  /* receipt index entries */
    uint64_t replay_unfit_limits;    /* limit totals (--limit-entries) */
    uint64_t replay_unfit_approvals; /* approvals (--approval-entries) */
    int64_t approvals_tick_ms;       /* the expiry timer's last run (control thread only) */

    /* How fast the idempotency/nonce table [0] and the receipt index [1] fill (store.h):
     * sampled by the tick on the control thread, which alone touches fill[]; its rates are
     * published for /metrics in thousandths per second (INT64_MIN: no rate yet), which
     * computes the time to full from them and the tables' counts at the scrape. */
    tg_store_fill_t fill[2];
    _Atomic int64_t fill_rate_milli[2];
    _Atomic int64_t fill_bytes_rate_milli[2];

    /* Reloads (reload.c): one at a time (reload_mu); last_reload is what /version shows
     * (under admin_mu, which is never held for long); the counts are /metrics'. */
    pthread_mutex_t reload_mu;
    tg_reload_report_t last_reload;
    atomic_uint_fast64_t reload_count[TG_PART__COUNT][2]; /* [part][0 ok, 1 failed] */
    /* POST /v1/admin/reload: the exchange waiting for the control thread (one at a time). */
    pthread_mutex_t admin_mu;
    tg_exchange_t *admin_pending;
    bool admin_closed; /* the server is stopping: no more admin reloads */

    /* Requests deferred for the ledger, oldest first (evaluate.c, "waiting for the
     * ledger"): the stall bound and the stop answer them when the ledger does not. */
    pthread_mutex_t wait_mu;
    struct eval_req *wait_head, *wait_tail;
    size_t waiting;
    bool waits_closed; /* the stop gave up on every waiting request: no new ones */
};

/* Answers 503 to every request that has waited for its record longer than older_than_ns
 * (all of them when closing, which also refuses later waits), leaving its claims to the
 * ledger's answer. Returns how many. Thread-safe. */
size_t tg_pipeline_abandon_waits(tg_pipeline_t *p, int64_t older_than_ns, bool closing);

/* The current policy, valid until tg_pipeline_policy_release(p, hold). Never blocks. */
tg_policy_ref_t *tg_pipeline_policy_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold);
void tg_pipeline_policy_release(tg_pipeline_t *p, const tg_swap_ref_t *hold);

/* The loader of the live policy (its checks, its fingerprint), for the shadow policy too.
 * Errors: those of tg_policy_load_file; TG_ERR_CONFIG for an empty path. */
tg_err_t tg_pipeline_policy_ref_load(tg_policy_ref_t **out, const char *path,
                                     tg_diag_t *diag) TG_MUST_USE;
void tg_pipeline_policy_ref_free(tg_policy_ref_t *r); /* NULL-safe */

/* ---- --shadow-policy (shadow.c) ---- */

/* What the live decision of one request was, and what the shadow needs to decide it again.
 * Every pointer is borrowed for the call (the request's steps still hold them). */
typedef struct tg_shadow_input {
    const json_t *request; /* the parsed body */
    const char *tenant;
    size_t tenant_len;
    const tg_principal_t *principal;
    tg_sv_t actor;  /* the live frame's actor (the request's, or the token's only one) */
    int64_t now_ms; /* the live decision's instant */
    const char *surface;
    size_t surface_len;
    tg_decision_t live;
    const char *live_version; /* the live policy's version */
    const char *request_id;
} tg_shadow_input_t;

/* Loads --shadow-policy when configured (else nothing). Errors: the loader's, diag says
 * --shadow-policy. */
tg_err_t tg_pipeline_shadow_start(tg_pipeline_t *p, tg_diag_t *diag) TG_MUST_USE;
/* The reload part "shadow_policy": TG_ERR_CONFIG when none is configured. */
tg_err_t tg_pipeline_shadow_reload(tg_pipeline_t *p, tg_diag_t *diag) TG_MUST_USE;
void tg_pipeline_shadow_stop(tg_pipeline_t *p);
/* Decides in->request under the shadow bundle and counts/logs a disagreement with in->live.
 * Nothing when no shadow is configured. Thread-safe; never fails (a request the candidate
 * refuses is the disagreement "INVALID"). */
void tg_pipeline_shadow_decide(tg_pipeline_t *p, const tg_shadow_input_t *in);

/* The current key set / tenant table, valid until the matching release. Never block. */
const tg_keyset_t *tg_pipeline_keys_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold);
void tg_pipeline_keys_release(tg_pipeline_t *p, const tg_swap_ref_t *hold);
const tg_tenants_t *tg_pipeline_tenants_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold);
void tg_pipeline_tenants_release(tg_pipeline_t *p, const tg_swap_ref_t *hold);

/* reload.c: builds a key set / tenant table from p->cfg (the files as they are now).
 * Errors: as tg_pipeline_create's for keys and tenants; *out NULL on error. */
/* log: the transparency log's key, listed in keys.json when enabled (NULL: none); a ring key
 * that is the log key is refused (TG_ERR_CONFIG: the log key must be a separate key). */
tg_err_t tg_keyset_load(tg_keyset_t **out, const tg_config_t *cfg, const tg_pipeline_log_t *log,
                        tg_diag_t *diag) TG_MUST_USE;
void tg_keyset_free(tg_keyset_t *k); /* wipes; NULL-safe */
tg_err_t tg_tenants_build(tg_tenants_t **out, const tg_config_t *cfg, const tg_tenants_t *prev,
                          tg_oidc_t *oidc, tg_diag_t *diag) TG_MUST_USE;

/* Who a request is: a token of the table t, or a verified JWT of an OIDC issuer (then owned
 * here until tg_pipeline_auth_end). */
typedef struct tg_auth {
    const tg_principal_t *principal; /* NULL unless authenticated */
    tg_oidc_principal_t *owned;      /* the JWT caller's principal, or NULL */
} tg_auth_t;

/* Authenticates an Authorization value (NULL = absent) against t: a JWT-shaped Bearer while
 * some OIDC issuer is configured goes to the oidc module, anything else to the table.
 * TG_OK (a->principal valid while t is held and until tg_pipeline_auth_end);
 * TG_ERR_UNAUTHORIZED, TG_ERR_TENANT_NOT_ALLOWED, TG_ERR_IDP_UNAVAILABLE, TG_ERR_NOMEM
 * (a JWT refusal is logged with its check and the request id rid). *msg gets the sentence
 * for the caller. May wait (oidc.h, an unknown kid). */
tg_err_t tg_pipeline_auth(tg_pipeline_t *p, const tg_tenants_t *t, const char *header,
                          const char *rid, tg_auth_t *a, const char **msg) TG_MUST_USE;
void tg_pipeline_auth_end(tg_auth_t *a); /* NULL-safe, idempotent */

/* Points ex's access-log tenant, subject and issuer at copies of pr's (t is pr's table), for
 * a route that answers on the calling thread without deferring: the line is written after
 * the route returned, when the principal may be freed (tg_pipeline_auth_end) and the table
 * replaced by a reload. The copies are per thread, overwritten by the next such request. */
void tg_pipeline_log_principal(tg_exchange_t *ex, const tg_tenants_t *t, const tg_principal_t *pr);

/* POST /v1/admin/reload (reload.c): answers 401/403/503 at once, or defers the exchange
 * until the control thread's tg_pipeline_admin_poll ran the reload. Does its own
 * accounting (metrics, access log), like the decision routes. */
void tg_route_admin_reload(tg_pipeline_t *p, tg_exchange_t *ex);

/* Metrics and the access-log line of a request answered outside the decision pipeline. */
void tg_pipeline_finish_simple(tg_pipeline_t *p, tg_exchange_t *ex, tg_route_t id);

/* Appends the report of one reload as /version's last_reload and the admin route's body. */
tg_err_t tg_reload_report_json(tg_buf_t *o, const tg_reload_report_t *r) TG_MUST_USE;

/* A copy of the last reload's report (at_ms 0 when none yet). Thread-safe. */
void tg_pipeline_last_reload(tg_pipeline_t *p, tg_reload_report_t *out);

/* tg_pipeline_reload_all, with the report in *out (NULL: not wanted). */
tg_err_t tg_pipeline_reload_parts(tg_pipeline_t *p, const char *trigger,
                                  tg_reload_report_t *out) TG_MUST_USE;

/* "policy", "tokens", "keys", "tls". */
const char *tg_reload_part_name(unsigned part);

/* ---- answers (reply.c): the one place that knows HTTP statuses ---------------------- */

/* Every kind of answer the pipeline gives. reply.c's table gives each its status and, for
 * errors, the error code of the body; nothing else in the pipeline names a status. */
typedef enum {
    TG_ANSWER_OK,                  /* 200, body prepared in ex->out */
    TG_ANSWER_BLOCKED,             /* 403, body prepared: /execute answering DENY or SILENCE */
    TG_ANSWER_NOT_READY,           /* 503, body prepared: /readyz */
    TG_ANSWER_INVALID_JSON,        /* 400 invalid_json */
    TG_ANSWER_INVALID_REQUEST,     /* 400 invalid_request */
    TG_ANSWER_UNKNOWN_SURFACE,     /* 400 unknown_surface */
    TG_ANSWER_UNAUTHORIZED,        /* 401 unauthorized (with WWW-Authenticate) */
    TG_ANSWER_ROLE_NOT_ALLOWED,    /* 403 role_not_allowed: the token's role may not call it */
    TG_ANSWER_SURFACE_NOT_ALLOWED, /* 403 surface_not_allowed: outside the token's surfaces */
    TG_ANSWER_ACTOR_NOT_ALLOWED,   /* 403 actor_not_allowed: not one of the token's actors */
    TG_ANSWER_TENANT_NOT_ALLOWED,  /* 403 tenant_not_allowed: a JWT naming a tenant not served */
    TG_ANSWER_OBSERVE_NOT_ALLOWED, /* 403 observe_not_allowed: observe mode asked, not granted */
    TG_ANSWER_ROUTE_NOT_MAPPED,    /* 403 route_not_mapped: the gate has no route for it */
    TG_ANSWER_NOT_FOUND,           /* 404 not_found */
    TG_ANSWER_METHOD_NOT_ALLOWED,  /* 405 method_not_allowed */
    TG_ANSWER_CONFLICT,            /* 409 idempotency_conflict */
    TG_ANSWER_REPLAY,              /* 409 replay_detected */
    TG_ANSWER_BODY_TOO_LARGE,      /* 413 body_too_large */
    TG_ANSWER_URI_TOO_LONG,        /* 414 uri_too_long */
    TG_ANSWER_UNSUPPORTED_MEDIA,   /* 415 unsupported_media_type */
    TG_ANSWER_RATE_LIMITED,        /* 429 rate_limited */
    TG_ANSWER_HEADERS_TOO_LARGE,   /* 431 headers_too_large */
    TG_ANSWER_INTERNAL,            /* 500 internal_error */
    TG_ANSWER_OVERLOADED,          /* 503 overloaded (Retry-After: 1) */
    TG_ANSWER_KEYS_UNAVAILABLE,    /* 503 keys_unavailable */
    TG_ANSWER_LEDGER_UNAVAILABLE,  /* 503 ledger_unavailable (Retry-After: 1) */
    TG_ANSWER_STORE_UNAVAILABLE,   /* 503 store_unavailable (Retry-After: 1): PostgreSQL */
    TG_ANSWER_IDP_UNAVAILABLE,     /* 503 identity_provider_unavailable (Retry-After: 1) */
    /* POST /v1/receipts/{id}/redeem (redeem.c) */
    TG_ANSWER_RECEIPT_ALREADY_REDEEMED, /* 409 receipt_already_redeemed */
    TG_ANSWER_RECEIPT_NOT_PERMIT,       /* 409 receipt_not_permit */
    TG_ANSWER_RECEIPT_NOT_AUTHENTIC,    /* 409 receipt_not_authentic: no longer verifies */
    TG_ANSWER_RECEIPT_EXPIRED,          /* 410 receipt_expired */
    TG_ANSWER_REQUEST_HASH_MISMATCH,    /* 422 request_hash_mismatch */
    /* approvals (approvals.c, evaluate.c's resume; SPEC §11.2) */
    TG_ANSWER_APPROVAL_NOT_FOUND, /* 404 approval_not_found */
    TG_ANSWER_NOT_APPROVER,       /* 403 not_an_approver: the rule does not list the subject */
    TG_ANSWER_ALREADY_REVIEWED,   /* 409 already_reviewed */
    TG_ANSWER_APPROVAL_CLOSED,    /* 409 approval_closed: resolved, expired or consumed */
    TG_ANSWER_APPROVAL_CONSUMED,  /* 409 approval_consumed: its PERMIT was already issued */
    /* the transparency log (log_routes.c; SPEC §12) */
    TG_ANSWER_LOG_PENDING,      /* 202, body prepared: no checkpoint covers the receipt yet */
    TG_ANSWER_LOG_DISABLED,     /* 404 log_disabled: started without --log-key */
    TG_ANSWER_LOG_INCONSISTENT, /* 500 log_inconsistent: the stored log is not what this
                                   server's log key signed: it serves nothing of it */
    /* batch-signed receipts (batch.c; SPEC §12) */
    TG_ANSWER_BATCH_NO_LOG, /* 400 log_disabled: receiptSigning batch without a log */
    TG_ANSWER_LOG_TIMEOUT,  /* 503 log_pending: durable, but no checkpoint covers it in time;
                               the log routes too, before the first checkpoint is signed */
    TG_ANSWER__COUNT
} tg_answer_t;

/* The HTTP status of an answer (500 for a value outside the enum). Pure. */
int tg_answer_status(tg_answer_t a);

/* The answer an error ends a request in (TG_ANSWER_INTERNAL for one not in the table). */
tg_answer_t tg_answer_of(tg_err_t e);

/* True for the statuses a decision is answered with (TG_ANSWER_OK, TG_ANSWER_BLOCKED): for
 * the access log, which names the decision only then. */
bool tg_answer_is_decision(int status);

/* A success answer (OK, BLOCKED, NOT_READY) whose body is already in ex->out. */
void tg_reply_ok(tg_exchange_t *ex, tg_answer_t a);

/* tg_reply_ok, unless building the body failed (rc): then 500. */
void tg_reply_built(tg_exchange_t *ex, tg_err_t rc, tg_answer_t a);

/* An error answer: {"error","message","request_id"}. `message` is a human sentence without
 * internals. */
void tg_reply_fail(tg_exchange_t *ex, tg_answer_t a, const char *message);

/* An error answer for an error value, through the table (anything unlisted is 500). */
void tg_reply_error(tg_exchange_t *ex, tg_err_t e, const char *message);

/* A limit refused the request: the error body also carries "limit" (the knob, e.g.
 * "max_depth") and "max" (its value); fmt is the human sentence, naming the flag. */
void tg_reply_limit(tg_exchange_t *ex, tg_answer_t a, const char *limit, size_t max,
                    const char *fmt, ...) TG_PRINTF(5, 6);

/* 413 body_too_large naming --max-body. */
void tg_reply_body_too_large(tg_exchange_t *ex, size_t max_body);

/* A tg_json_parse failure: each limit's error names its knob (--max-depth, --max-string,
 * --max-keys, --max-body), everything else goes through the table with the parser's
 * detail. */
void tg_reply_json_error(tg_exchange_t *ex, const tg_json_limits_t *lim, tg_err_t e,
                         const char *detail);

/* Routes (routes.c) and the decision endpoints (evaluate.c). */
/* TG_MODE_GATE: GET|POST /v1/gate, the decision request built from the original request's
 * method, path and headers by the bundle's routes; answered like /execute (403 unless
 * PERMIT), with the receipt's id and hash in response headers. */
typedef enum { TG_MODE_EVALUATE, TG_MODE_EXECUTE, TG_MODE_DECIDE, TG_MODE_GATE } tg_eval_mode_t;
void tg_pipeline_evaluate(tg_pipeline_t *p, tg_exchange_t *ex, tg_eval_mode_t mode);
tg_err_t tg_pipeline_replay_record(void *ud, const tg_ledger_record_t *rec);
/* The same into another db's tables (db.h tg_db_snap_replay_fn: the snapshot thread's). */
tg_err_t tg_pipeline_replay_into(void *ud, tg_db_t *into, const tg_ledger_record_t *rec);
/* After the replay: TG_ERR_CONFIG (diag names the numbers) if a table could not hold the
 * ledger's live entries, else TG_OK. */
tg_err_t tg_pipeline_replay_check(const tg_pipeline_t *p, tg_diag_t *diag);
void tg_pipeline_get_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const char *exec_id);

/* records.c. The response an idempotent replay sends: rebuilt from the record at pos
 * (tg_record_response), so it is the original byte for byte; *permit says whether the
 * stored decision was a PERMIT (/execute answers 403 otherwise); a batch receipt's
 * transparency member comes from the newest checkpoint (tg_pipeline_complete_batch). Errors:
 * the db's read errors, TG_ERR_LEDGER_CORRUPT (the record is not what this server writes),
 * tg_pipeline_complete_batch's, tg_buf errors. */
tg_err_t tg_pipeline_replay_response(tg_pipeline_t *p, const tg_ledger_pos_t *pos, tg_buf_t *out,
                                     bool *permit) TG_MUST_USE;

/* Indexes executionId -> pos for GET /v1/receipts, live (request_id names the request) or
 * while the index is rebuilt at start (request_id NULL). An id already indexed for another
 * record is never repointed: TG_ERR_CONFLICT, logged with both records and counted
 * (trigguard_receipt_index_collisions_total). Other errors as tg_db_index_receipt. */
tg_err_t tg_pipeline_index_receipt(tg_pipeline_t *p, const char *tenant, size_t tenant_len,
                                   const char *exec_id, const tg_ledger_pos_t *pos,
                                   int64_t stamp_ms, int64_t now_ms,
                                   const char *request_id) TG_MUST_USE;

/* The read-only endpoints (readonly.c), called by the route table; rest is the path after a
 * prefix route's prefix ("" otherwise). Each answers the exchange. */
void tg_route_healthz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_readyz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_version(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_keys(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_capabilities(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_protocol_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
/* POST /protocol/verify-signature (SPEC §14): the Ed25519 check of a receiptHash alone. */
void tg_route_verify_signature(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_receipts(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_metrics(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
/* A record made durable before a route answers (durable.c). settle(p, state, status) runs
 * exactly once with the db's final word about rec: on this thread before the return when
 * the word came within --ledger-stall-timeout (or the append was refused), else later on the
 * db's completion thread, after this returned the unavailability error (the route answers
 * 503). state (state_len bytes) is copied first, so it may live on the caller's stack; the
 * copy is what settle gets. what names the record in the log ("a redemption"). Returns
 * TG_OK (durable), the append's error, TG_ERR_NOMEM, or tg_db_unavailable's error. */
typedef void (*tg_durable_settle_fn)(tg_pipeline_t *p, void *state, tg_err_t status);
tg_err_t tg_pipeline_append_wait(tg_pipeline_t *p, const tg_db_record_t *rec,
                                 tg_durable_settle_fn settle, const void *state, size_t state_len,
                                 const char *what) TG_MUST_USE;

/* The approvals API (approvals.c, SPEC §11.2): GET /v1/approvals, GET /v1/approvals/{id},
 * POST /v1/approvals/{id}/approve and /deny; rest is what follows "/v1/approvals/". */
void tg_route_approvals_list(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_approval_get(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_approval_approve(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_approval_deny(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);

/* The expiry timer (approvals.c): approvals past their ttl_s or consume window get their
 * expiry record, so they expire on time without traffic. From the control thread's tick;
 * runs at most every TG_APPROVAL_TICK_MS and writes at most a few records per run. */
void tg_pipeline_approvals_tick(tg_pipeline_t *p, int64_t now_ms);

/* Takes the hold on an approval (db.h) and reads its state into *cur (*held true). While
 * another writer holds it: a pending approval is waited for (up to about 2 s: reviews of one
 * approval queue up rather than fail); one that is no longer pending is answered from its
 * stored state at once, TG_OK with *held false (it can only be read: no step may follow).
 * TG_ERR_IN_FLIGHT after the wait; as tg_db_approval_hold / _get otherwise. */
tg_err_t tg_pipeline_approval_hold(tg_pipeline_t *p, const char *tenant, size_t tenant_len,
                                   const char *id, struct tg_approval *cur, bool *held) TG_MUST_USE;

/* ---- the transparency log (log_routes.c; SPEC §12, docs/API.md "Transparency log") ---- */

/* --log-key, --log-origin: loads the log key into p->log (nothing without --log-key); the
 * origin defaults to the authority id when it is a valid key name, else "trigguard". The key
 * file is read like --key's (PKCS#8 PEM, no group or other permission); the seed is wiped
 * once the signer holds it. Errors: TG_ERR_CONFIG (diag names the option), the key loader's. */
tg_err_t tg_pipeline_log_load(tg_pipeline_t *p, tg_diag_t *diag) TG_MUST_USE;
/* Wipes and frees what tg_pipeline_log_load kept. Idempotent. */
void tg_pipeline_log_free(tg_pipeline_t *p);
void tg_route_log_checkpoint(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_log_tile(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_log_inclusion(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
void tg_route_log_consistency(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);
/* GET /v1/receipts/{executionId}/proof; rest is "{executionId}/proof". */
void tg_route_receipt_proof(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);

/* ---- batch-signed receipts (batch.c; SPEC §12, receipt.h "Two kinds") ---- */

/* How long a batch receipt's answer waits, once its record is durable, for a published
 * checkpoint to cover it (tg_db_log_wait), in ms: ten checkpoint intervals and a second,
 * kept below --ledger-stall-timeout, whose bound covers the whole wait. */
uint32_t tg_pipeline_log_wait_ms(const tg_pipeline_t *p);

/* Inserts the transparency member of the batch receipt whose hashed form is the
 * receipt_len bytes ending at body->data[receipt_end] (its closing brace), for leaf `leaf`,
 * at the newest published checkpoint. TG_ERR_LOG_PENDING when that checkpoint does not
 * cover the leaf yet, the db's log errors, tg_buf and receipt.h errors; body unchanged on
 * error. */
tg_err_t tg_pipeline_add_transparency(tg_pipeline_t *p, tg_buf_t *body, size_t receipt_end,
                                      uint64_t leaf) TG_MUST_USE;

/* For a response rebuilt from a record (replay, GET /v1/receipts): when the receipt text
 * (receipt[0..len), embedded verbatim in body) is a batch receipt's hashed form, adds its
 * transparency member (the record at *pos: its leaf, tg_db_log_leaf). TG_OK and nothing done
 * for a per-receipt signed one. Errors: TG_ERR_LOG_PENDING (not covered yet),
 * TG_ERR_LOG_DISABLED (no log now), TG_ERR_NOT_FOUND (the text is not in body), the db's. */
tg_err_t tg_pipeline_complete_batch(tg_pipeline_t *p, tg_buf_t *body, const char *receipt,
                                    size_t len, const tg_ledger_pos_t *pos) TG_MUST_USE;

/* The answer for tg_pipeline_complete_batch's errors: 503 log_pending with Retry-After, the
 * unavailability error, else 500; TG_ERR_LOG_DISABLED is 400 log_disabled on a decision
 * route (decision true: the request's receipt cannot be answered), else 404 log_disabled
 * (GET /v1/receipts, redeem: as the log routes answer). */
void tg_pipeline_reply_batch_error(tg_pipeline_t *p, tg_exchange_t *ex, tg_err_t rc, bool decision);

/* GET /v1/receipts/...: authenticates the caller (Bearer, a role that may read receipts) and
 * finds the receipt exec_id of its tenant. true with *pos set; false with the answer given
 * (401, 403, 404, 503). */
bool tg_pipeline_find_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const char *exec_id,
                              size_t exec_id_len, tg_ledger_pos_t *pos);

/* POST /v1/receipts/{executionId}/redeem (redeem.c); rest is "{executionId}/redeem". */
void tg_route_redeem(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest);

/* ---- stateful limits of one request (limits.c; docs/POLICY.md "Limits") ----
 * Where the request's totals are, what the frame was bound with and what it reserved. The
 * names are copies: a reservation may be released from the ledger's callback, after the
 * request gave its policy reference back. */
typedef struct tg_limit_hold {
    uint32_t n;          /* the surface's limits, bound in the frame (ascending ids) */
    uint32_t n_reserved; /* the first n_reserved are reserved and not yet durable */
    uint32_t ids[TG_FRAME_MAX_LIMITS];
    double amounts[TG_FRAME_MAX_LIMITS];
    tg_db_limit_ref_t refs[TG_FRAME_MAX_LIMITS]; /* refs[i].limit points into names[i] */
    char names[TG_FRAME_MAX_LIMITS][TG_DB_LIMIT_NAME_MAX + 1];
} tg_limit_hold_t;

/* Before the kernel: for each limit of f's surface, its key and window at now_ms, and the
 * total read from the db, bound into f->limits. h->n = 0 when the surface has none (then
 * nothing is read). Errors: the db's (unavailable: 503), TG_ERR_INVALID_ARG. */
tg_err_t tg_pipeline_limits_bind(tg_pipeline_t *p, const tg_policy_t *pol, tg_frame_t *f,
                                 int64_t now_ms, tg_limit_hold_t *h) TG_MUST_USE;

/* After a PERMIT in enforce mode: reserves every bound limit in id order. TG_OK: all held
 * (h->n_reserved = h->n, and they are the record's contributions). TG_ERR_LIMIT_EXCEEDED:
 * one was refused; those before it are released, and its fresh total is in f's slot, so
 * the caller re-decides. Other errors (TG_ERR_LIMIT: full; unavailable): all released. */
tg_err_t tg_pipeline_limits_reserve(tg_pipeline_t *p, const tg_policy_t *pol, tg_frame_t *f,
                                    tg_limit_hold_t *h) TG_MUST_USE;

/* Takes back whatever h still holds (the record was not made durable). Idempotent. */
void tg_pipeline_limits_release(tg_pipeline_t *p, tg_limit_hold_t *h);

/* The record of h's reservations became durable: nothing is released any more. */
void tg_pipeline_limits_settled(tg_limit_hold_t *h);

/* The widest contributions a request on surface `surface` can record (its limits' names,
 * the widest key, window and amount), to measure the record's meta before anything is
 * reserved; returns their number. */
size_t tg_pipeline_limits_widest(const tg_policy_t *pol, uint32_t surface, tg_record_limit_t *out);

/* The record's contributions (meta "l": what h holds reserved) into
 * out[0..TG_RECORD_MAX_LIMITS); returns their number (0 when nothing is reserved). */
size_t tg_pipeline_limits_contributions(const tg_limit_hold_t *h, tg_record_limit_t *out);

#endif /* TG_PIPELINE_INTERNAL_H */
