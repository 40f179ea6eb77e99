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
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"
#include "trigguard/swap.h"

/* A loaded policy plus what is derived from it once. Requests hold a reference through the
 * pipeline's swap (swap.h) for the few microseconds they use it; a reload replaces it
 * there and frees the old one once no request can still hold it. */
typedef struct tg_policy_ref {
    tg_policy_t *policy;
    char fingerprint[65];
} tg_policy_ref_t;

struct tg_pipeline {
    tg_config_t cfg;
    tg_json_limits_t limits;
    int64_t receipt_ttl_ms;

    tg_swap_t *policy; /* holds the current tg_policy_ref_t; NULL only while creating */

    tg_keyring_t ring;
    const tg_key_t *signer; /* points into ring, NULL when no signing key */
    tg_buf_t keys_json;     /* rendered once: keys do not change while running */

    tg_tenants_t *tenants;
    tg_rate_t *rate;
    tg_rate_t *verify_rate; /* RATE_LIMIT_VERIFY: verification needs no token, so no tenant */
    tg_bulkhead_t *bulkhead;
    tg_db_t *db; /* claims, records, the receipt index (db.h) */
    /* The file backend's ledger and key table, borrowed from db for routes.c's /readyz
     * and /metrics until those read tg_db_health / tg_db_stats; nothing else uses
     * them, and they are not owned here. */
    tg_ledger_t *ledger;
    tg_store_t *store;

    tg_metrics_t metrics;
    atomic_bool serving;
    uint64_t replayed_records;

    /* Live ledger entries the replay could not fit (caps smaller than at the last run):
     * the start is refused when either is not 0 (tg_pipeline_replay_check). */
    uint64_t replay_unfit_store;    /* idempotency keys and nonces */
    uint64_t replay_unfit_receipts; /* receipt index entries */

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

/* Error reply: {"error","message","request_id"} with the status of the one mapping
 * table (reply.c). `message` is a human sentence without internals. */
void tg_reply_error(tg_exchange_t *ex, tg_err_t e, const char *message);

/* Reply with a specific error code and status (for codes not tied to one tg_err_t). */
void tg_reply_error_code(tg_exchange_t *ex, int status, const char *code, const char *message);

/* A limit refused the request: the error body also carries "limit" (the knob, e.g.
 * "max_depth") and "max" (its value); fmt is the human sentence, naming the flag. */
void tg_reply_limit(tg_exchange_t *ex, int status, const char *code, const char *limit, size_t max,
                    const char *fmt, ...) TG_PRINTF(6, 7);

/* 413 body_too_large naming --max-body. */
void tg_reply_body_too_large(tg_exchange_t *ex, size_t max_body);

/* A tg_json_parse failure: limit violations name their limit (--max-depth, --max-string,
 * --max-keys), everything else goes through the error table with the parser's detail. */
void tg_reply_json_error(tg_exchange_t *ex, const tg_json_limits_t *lim, tg_err_t e,
                         const char *detail);

/* 200 with a prepared JSON body already in ex->out. */
void tg_reply_json(tg_exchange_t *ex, int status);

/* Routes (routes.c) and the decision endpoints (evaluate.c). */
typedef enum { TG_MODE_EVALUATE, TG_MODE_EXECUTE, TG_MODE_DECIDE } tg_eval_mode_t;
void tg_pipeline_evaluate(tg_pipeline_t *p, tg_exchange_t *ex, tg_eval_mode_t mode);
tg_err_t tg_pipeline_replay_record(void *ud, const tg_ledger_record_t *rec);
/* After the replay: TG_ERR_CONFIG (diag names the numbers) if a table could not hold the
 * ledger's live entries, else TG_OK. */
tg_err_t tg_pipeline_replay_check(const tg_pipeline_t *p, tg_diag_t *diag);
void tg_pipeline_get_receipt(tg_pipeline_t *p, tg_exchange_t *ex, const char *exec_id);

#endif /* TG_PIPELINE_INTERNAL_H */
