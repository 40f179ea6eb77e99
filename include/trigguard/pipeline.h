/* pipeline.h — the daemon's request handling: SPEC §3.3 step by step, and every route.
 *
 * A tg_pipeline_t owns the loaded state (policy, key ring, tenants, limits, idempotency
 * store, ledger, metrics). tg_pipeline_handle is the HTTP handler (http.h): it routes,
 * answers, and for decisions that must be durable defers the exchange until the ledger
 * writer reports the record on disk.
 *
 * Lifecycle (single-threaded): create → start the HTTP listeners with tg_pipeline_handle
 * → (reload on SIGHUP, tick every 100 ms) → stop the listeners (in-flight requests drain)
 * → destroy (closes the ledger, wipes keys). Everything in between is thread-safe.
 */
#ifndef TRIGGUARD_PIPELINE_H
#define TRIGGUARD_PIPELINE_H

#include "trigguard/config.h"
#include "trigguard/err.h"
#include "trigguard/guard.h"
#include "trigguard/http.h"
#include "trigguard/policy.h"

typedef struct tg_pipeline tg_pipeline_t;

/* Loads policy, keys, tenants and limits from cfg, opens the ledger and replays it into
 * the idempotency/nonce tables. cfg is copied. Errors: TG_ERR_CONFIG (diag says which
 * option and why), TG_ERR_POLICY_INVALID, TG_ERR_KEY_*, TG_ERR_LEDGER_*, TG_ERR_IO,
 * TG_ERR_NOMEM. On error *out is NULL and nothing is left open. */
tg_err_t tg_pipeline_create(tg_pipeline_t **out, const tg_config_t *cfg,
                            tg_diag_t *diag) TG_MUST_USE;

/* --check-config: loads and checks everything tg_pipeline_create does except the state. The
 * ledger is not opened, so this neither creates files nor needs the lock a running daemon
 * holds; it checks only that --ledger is a directory or can be created (`trigguard ledger
 * verify` checks the records). On success writes tg_pipeline_describe's line to summary.
 * Errors: as tg_pipeline_create, without TG_ERR_LEDGER_*. */
tg_err_t tg_pipeline_check(char *summary, size_t cap, const tg_config_t *cfg,
                           tg_diag_t *diag) TG_MUST_USE;

/* The HTTP handler (tg_http_handler_fn); ud is the pipeline. Thread-safe. */
void tg_pipeline_handle(void *ud, tg_exchange_t *ex);

/* The early hook (tg_http_opts_t.early): on the routes that take a bearer token, a request
 * that asks `Expect: 100-continue` without a valid token is answered 401 (by
 * tg_pipeline_handle, so with the same body, metrics and access-log line) instead of the
 * 100; anything else is left alone. Thread-safe. */
void tg_pipeline_early(void *ud, tg_exchange_t *ex);

/* Re-reads the policy file and swaps it in atomically; on any error the old policy
 * keeps serving and the error is returned. Requests in flight finish on the policy
 * they started with. Not reentrant (call from one control thread). */
tg_err_t tg_pipeline_reload(tg_pipeline_t *p, tg_diag_t *diag) TG_MUST_USE;

/* Reloads, each on its own and atomically, the policy (tg_pipeline_reload), the tokens
 * (--tokens, with TRIGGUARD_API_KEYS as it was at start: the environment cannot change),
 * the signing and verify-only keys (--key, --verify-keys) and, where configured, the TLS
 * certificate and key (--tls-cert, --tls-key, into the store of tg_pipeline_set_tls: new
 * handshakes present the new pair, open connections keep theirs). A part that
 * fails keeps its old state; each part is logged, counted (trigguard_reload_total) and kept
 * as the last reload (/version). trigger ("signal", "admin") is a static string. Requests in
 * flight finish with what they started with. Returns TG_OK when every part reloaded, else
 * the first part's error. Thread-safe (reloads are serialised), but must not run on an HTTP
 * event thread: it waits for requests that hold the old objects. */
tg_err_t tg_pipeline_reload_all(tg_pipeline_t *p, const char *trigger) TG_MUST_USE;

/* The TLS store the listeners serve (tls.h), which a reload's "tls" part replaces the pair
 * of; NULL (the default) for plain HTTP. The pipeline does not own it: the caller destroys
 * it after the pipeline and the listeners. Call before serving, from the thread that
 * reloads. */
void tg_pipeline_set_tls(tg_pipeline_t *p, tg_tls_t *tls);

/* Runs the reload a POST /v1/admin/reload is waiting for, if any, and answers it. Call from
 * the control thread (serve: every tick). */
void tg_pipeline_admin_poll(tg_pipeline_t *p);

/* Answers a waiting admin reload 503 and refuses later ones: call once the server stops. */
void tg_pipeline_admin_close(tg_pipeline_t *p);

/* Descriptors a reload opens at once (the policy file), closed before it returns. Requests
 * open no files of their own besides the ledger reads of receipts and idempotent replays
 * (TG_LEDGER_FDS_PER_READ each, on the event thread that serves them). */
#define TG_PIPELINE_RELOAD_FDS 2 /* one file at a time, and a margin for the key files */

/* The HTTP layer's abandon hook (tg_http_opts_t.abandon); ud is the pipeline. Answers 503
 * to every request still waiting for its ledger record and refuses new waits from then on:
 * the server is stopping and the drain ran out. The claims of those requests stay with the
 * ledger's answer (a record that becomes durable later is replayed to a retry after a
 * restart). Thread-safe; idempotent. */
void tg_pipeline_abandon(void *ud);

/* Housekeeping: expires idempotency/nonce entries; checks that the ledger's files are still
 * the ones it opened (tg_ledger_check_identity); declares a stalled ledger
 * (tg_ledger_watch) and answers 503 to requests that have waited for their record longer
 * than --ledger-stall-timeout. Call often (serve: every 100 ms), so that
 * each call frees a small batch rather than a second's worth at once. */
void tg_pipeline_tick(tg_pipeline_t *p);

/* Marks the pipeline ready (/readyz) once listeners are up, or not ready (shutdown). */
void tg_pipeline_set_serving(tg_pipeline_t *p, bool serving);

/* A one-line summary for the startup log: policy, key id, tenants, durability, ledger. */
void tg_pipeline_describe(const tg_pipeline_t *p, char *out, size_t cap);

/* Binds the verified facts of the caller into f, a frame tg_frame_from_request built
 * against pol: f->tenant = tenant (tenant_len bytes; NULL = absent), the principal's subject
 * and issuer, and one claim slot per claim name pol references (tg_policy_claim_name) that
 * pr holds with a scalar value. pr NULL: only the tenant. The frame borrows every view from
 * tenant and pr, which must outlive its use. Runs after authentication and before the
 * kernel on /v1/evaluate, /execute and /decide, and in `trigguard check`. Pure;
 * thread-safe; allocates nothing. */
void tg_pipeline_bind_facts(tg_frame_t *f, const tg_policy_t *pol, const char *tenant,
                            size_t tenant_len, const tg_principal_t *pr);

/* Closes the ledger (after all exchanges completed), wipes keys, frees. NULL-safe. */
void tg_pipeline_destroy(tg_pipeline_t *p);

#endif /* TRIGGUARD_PIPELINE_H */
