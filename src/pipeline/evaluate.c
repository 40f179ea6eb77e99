/* evaluate.c — POST /v1/evaluate, /execute and /decide: SPEC §3.3 one step at a time. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"
#include "trigguard/approval.h"
#include "trigguard/clock.h"
#include "trigguard/kernel.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/record.h"

#define TG_TENANT_MAX TG_GUARD_TENANT_NAME_MAX
/* A bound actor or surface is a policy name: the tokens file takes no longer ones. */
_Static_assert(TG_GUARD_NAME_MAX == TG_POLICY_MAX_NAME, "token bindings are policy names");
#define TG_KEY_MAX TG_STORE_MAX_KEY_LEN_LIMIT
/* A request hash as wide as a real one, for measuring a ledger meta before it exists. */
/* A SILENCE's detail: a sentence and a field or signal name (policy names are short). */
#define TG_DETAIL_MAX 256
#define TG_META_PROBE_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* What a request carries from the synchronous part to the ledger's done callback. */
typedef struct eval_req {
    tg_pipeline_t *p;
    tg_exchange_t *ex;
    tg_eval_mode_t mode;
    /* Owned by the tenant table the steps hold (steps_t.tenants), or for a JWT caller by
     * steps_t.auth: NULL before admit, and not to be read once the steps ended (a reload may
     * have freed that table since, and steps_end frees a JWT caller's principal). */
    const tg_principal_t *principal;
    int tenant;
    size_t tenant_len;
    size_t idem_len;  /* 0 = no idempotency key */
    size_t nonce_len; /* 0 = no nonce */
    size_t surface_len;
    bool has_nonce;
    bool has_idem;
    bool idem_reserved;
    bool nonce_used;
    bool bulkhead_held;
    bool observe; /* observe mode (SPEC §11.1): decided, signed, recorded, not enforced */
    /* ESCALATE (SPEC §11.2). appr (heap, NULL when none) is the approval the response shows:
     * the one this decision opens (appr_step, version 1), the one it consumes (appr_held
     * and appr_step: the hold is this request's, the record writes the new version), or
     * the pending one a resume names again (neither). */
    tg_approval_t *appr;
    bool appr_step;
    bool appr_held;
    bool has_appr_id;
    tg_approval_event_t appr_event; /* what appr_step counts as, once durable */
    bool announced;                 /* tg_ledger_announce made, its end not yet */
    bool enlisted;                  /* in the pipeline's list of requests waiting for the ledger */
    /* Waiting for the ledger (the deferred path): who answers the client first, the ledger
     * (WAIT_DONE) or the stall bound or the shutdown (WAIT_ABANDONED), is decided once by a
     * compare-and-swap from WAIT_LEDGER; see "waiting for the ledger" below. */
    _Atomic int wait_state;
    _Atomic int refs;     /* the exchange's and the ledger's; the last one frees */
    tg_err_t abandon_err; /* why an abandoned request got its 503 */
    int status;           /* the decision's HTTP status (200 or 403) */
    int64_t deferred_ns;  /* monotonic time the request began to wait */
    struct eval_req *wprev, *wnext;
    tg_verdict_t verdict;
    const char *reason;     /* static or policy-owned; copied below for the deferred path */
    tg_err_t ledger_status; /* what the ledger said, for the deferred path */
    tg_ledger_pos_t pos;
    /* Text members below are NUL-terminated when their length is set; they are not
     * zeroed at allocation (2.5 KB per request), see eval_req_new. */
    char tenant_name[TG_TENANT_MAX + 1];
    char subject[TG_GUARD_SUBJECT_MAX + 1];    /* the principal's, for the access log */
    char issuer[TG_RECEIPT_PRINCIPAL_MAX + 1]; /* its issuer (OIDC), for the access log */
    char idem[TG_KEY_MAX + 1];
    char nonce[TG_KEY_MAX + 1];
    char exec_id[TG_RECEIPT_EXEC_ID_LEN + 1];
    char surface[TG_POLICY_MAX_NAME + 1];
    char reason_copy[TG_POLICY_MAX_REASON + 1];
    /* The request id, for log lines written after the exchange may be gone. */
    char rid[TG_HTTP_REQUEST_ID_MAX + 1];
    /* For the access log: the decision's actor (a bounded prefix) and deciding rule. */
    char actor[TG_POLICY_MAX_NAME + 1];
    char rule[TG_POLICY_MAX_NAME + 1];
    char appr_id[TG_APPROVAL_ID_LEN + 1]; /* the request's approval_id (has_appr_id) */
    /* Stateful limits: the totals bound and what was reserved (limits.c); n and n_reserved
     * are set by eval_req_new, the rest by tg_pipeline_limits_bind. */
    tg_limit_hold_t limits;
} eval_req_t;

/* What the steps of one decision hand on to each other. Owned by tg_pipeline_evaluate's
 * frame: the steps borrow it, steps_end releases it (the ledger copied what it keeps). */
typedef struct steps {
    json_t *req;                 /* the parsed body */
    tg_swap_ref_t tenants_hold;  /* the tenant table, held from admit to the end */
    const tg_tenants_t *tenants; /* NULL until admit */
    tg_auth_t auth;              /* who the request is; a JWT caller's principal is owned here */
    tg_swap_ref_t keys_hold;     /* the key set, held from build_receipt to the end */
    const tg_keyset_t *keys;     /* NULL until build_receipt */
    tg_swap_ref_t hold;          /* the policy reference, held from parsing to the end */
    tg_policy_ref_t *ref;        /* NULL until parse_request */
    const tg_policy_t *pol;
    tg_frame_t frame;
    tg_request_meta_t meta;
    uint8_t req_hash[32];
    char req_hex[65];
    uint8_t claim_hash[32]; /* what the idempotency key is bound to: request and principal */
    char claim_hex[65];
    tg_decision_t d;
    char detail[TG_DETAIL_MAX]; /* SILENCE's detail (tg_decision_detail) */
    size_t detail_len;
    uint8_t type;              /* the record's ledger type */
    int64_t at_ms;             /* the decision's time (receipt timestamp, meta "at") */
    tg_buf_t record, meta_buf; /* the record's payload and meta */
    uint8_t entry[32];         /* a receipt's log entry: its receiptHash (SPEC §12) */
    /* --shadow-policy: the live decision and its inputs, captured while r is alive, decided
     * again by the shadow bundle at the end (shadow.c); copies of what lives in r */
    bool shadow_on;
    tg_shadow_input_t shadow;
    char shadow_tenant[TG_TENANT_MAX + 1];
    char shadow_surface[TG_POLICY_MAX_NAME + 1];
    char shadow_rid[TG_HTTP_REQUEST_ID_MAX + 1];
} steps_t;

/* What a step did: STEP_NEXT passes the request on (0, so `st ? st : next()` chains). */
typedef enum { STEP_NEXT = 0, STEP_ANSWERED, STEP_HANDED_OFF } step_t;

static void steps_init(steps_t *s) {
    s->req = NULL;
    s->tenants = NULL;
    s->auth = (tg_auth_t){NULL, NULL};
    s->keys = NULL;
    s->ref = NULL;
    s->pol = NULL;
    s->shadow_on = false;
    s->detail[0] = '\0';
    s->detail_len = 0;
    s->type = 0;
    tg_buf_init(&s->record, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&s->meta_buf, TG_LEDGER_META_MAX);
}

/* Ends the steps' references: a request waiting for the ledger holds none, so a reload
 * never waits for a disk (and the stall bound, on the control thread, can still answer it). */
static void steps_end(tg_pipeline_t *p, steps_t *s) {
    if (s->ref != NULL) {
        tg_pipeline_policy_release(p, &s->hold);
    }
    if (s->keys != NULL) {
        tg_pipeline_keys_release(p, &s->keys_hold);
    }
    tg_pipeline_auth_end(&s->auth);
    if (s->tenants != NULL) {
        /* r->principal dangles from here on; r itself may be the ledger's by now */
        tg_pipeline_tenants_release(p, &s->tenants_hold);
    }
    json_decref(s->req);
    tg_buf_free(&s->record);
    tg_buf_free(&s->meta_buf);
}

static eval_req_t *eval_req_new(void) {
    eval_req_t *r = malloc(sizeof *r);
    if (r != NULL) {
        memset(r, 0, offsetof(eval_req_t, tenant_name));
        r->tenant_name[0] = r->subject[0] = r->issuer[0] = r->idem[0] = r->nonce[0] =
            r->exec_id[0] = r->surface[0] = r->reason_copy[0] = r->rid[0] = r->actor[0] =
                r->rule[0] = r->appr_id[0] = '\0';
        r->limits.n = r->limits.n_reserved = 0;
    }
    return r;
}

static void eval_req_free(eval_req_t *r) {
    if (r != NULL) {
        free(r->appr);
    }
    free(r);
}

/* A replay's executionId, for the access log: read back from the stored response (our own
 * writer's canonical text, policy.h tg_decision_body_open). */
static void replay_exec_id(eval_req_t *r, const tg_exchange_t *ex) {
    static const char tag[] = "\"execution_id\":\"";
    const char *at = ex->out.data != NULL ? strstr((const char *)ex->out.data, tag) : NULL;
    if (at == NULL) {
        return;
    }
    at += sizeof tag - 1;
    const char *end = strchr(at, '"');
    if (end != NULL && (size_t)(end - at) <= TG_RECEIPT_EXEC_ID_LEN) {
        memcpy(r->exec_id, at, (size_t)(end - at));
        r->exec_id[end - at] = '\0';
    }
}

/* A replayed gate PERMIT names its receipt like the original answer did (the id above,
 * the hash from the stored receipt). */
static void gate_replay_headers(eval_req_t *r, tg_exchange_t *ex) {
    static const char tag[] = "\"receiptHash\":\"";
    const char *at = strstr((const char *)ex->out.data, tag);
    if (at == NULL || strlen(at + sizeof tag - 1) < 64) {
        return;
    }
    (void)snprintf(ex->gate_exec_id, sizeof ex->gate_exec_id, "%s", r->exec_id);
    memcpy(ex->gate_receipt_hash, at + sizeof tag - 1, 64);
    ex->gate_receipt_hash[64] = '\0';
}

/* Ends the request's group-commit announcement (tg_ledger_announce), once. */
static void announce_end(eval_req_t *r) {
    if (r->announced) {
        r->announced = false;
        tg_db_announce_end(r->p->db);
    }
}

/* The metrics' order of outcomes: PERMIT, DENY, SILENCE. */
static int verdict_index(tg_verdict_t v) {
    return v == TG_PERMIT ? 0 : v == TG_DENY ? 1 : v == TG_ESCALATE ? 3 : 2; /* metrics.h */
}

/* SPEC §3.2: /execute is a gate, so anything but PERMIT is a 403 there; elsewhere a
 * decision is a 200 whatever it is. */
static tg_answer_t decision_answer(tg_eval_mode_t m, bool permit) {
    return (m == TG_MODE_EXECUTE || m == TG_MODE_GATE) && !permit ? TG_ANSWER_BLOCKED
                                                                  : TG_ANSWER_OK;
}

static const char *route_label(tg_eval_mode_t m) {
    return m == TG_MODE_EXECUTE  ? "/execute"
           : m == TG_MODE_DECIDE ? "/decide"
           : m == TG_MODE_GATE   ? "/v1/gate"
                                 : "/v1/evaluate";
}

static tg_route_t route_id(tg_eval_mode_t m) {
    return m == TG_MODE_EXECUTE  ? TG_ROUTE_EXECUTE
           : m == TG_MODE_DECIDE ? TG_ROUTE_DECIDE
           : m == TG_MODE_GATE   ? TG_ROUTE_GATE
                                 : TG_ROUTE_EVALUATE;
}

/* Metrics and the access-log line for a finished request. */
static void finish(eval_req_t *r) {
    tg_exchange_t *ex = r->ex;
    int64_t us = (tg_clock_mono_ns() - ex->start_ns) / 1000;
    tg_metrics_request(&r->p->metrics, route_id(r->mode), ex->status, us);
    tg_log_request_t line = {
        .request_id = ex->request_id,
        .tenant = r->tenant_len ? r->tenant_name : NULL,
        .subject = r->subject[0] != '\0' ? r->subject : NULL,
        .issuer = r->issuer[0] != '\0' ? r->issuer : NULL,
        .method = ex->method,
        .route = route_label(r->mode),
        .status = ex->status,
        .decision = tg_answer_is_decision(ex->status)
                        ? (r->reason ? tg_verdict_name(r->verdict) : NULL)
                        : NULL,
        .reason = r->reason,
        .surface = r->surface_len ? r->surface : NULL,
        .latency_us = us,
        .execution_id =
            tg_answer_is_decision(ex->status) && r->exec_id[0] != '\0' ? r->exec_id : NULL,
        .actor = r->actor[0] != '\0' ? r->actor : NULL,
        .rule = tg_answer_is_decision(ex->status) && r->rule[0] != '\0' ? r->rule : NULL,
        .error = ex->status >= 400 ? ex->log_error : NULL,
        .replayed = ex->replayed,
        .client = ex->client[0] != '\0' ? ex->client : NULL,
        .traceparent = ex->traceparent[0] != '\0' ? ex->traceparent : NULL,
    };
    tg_log_request(&line);
    if (r->bulkhead_held) {
        tg_bulkhead_leave(r->p->bulkhead, r->tenant);
        r->bulkhead_held = false;
    }
}

/* Undo what the request reserved when it ends without a durable record, so a retry
 * can run and the live tables match what a restart would rebuild. */
static void release_reservations(eval_req_t *r) {
    if (r->idem_reserved) {
        TG_IGNORE(tg_db_release_key(r->p->db, r->tenant_name, r->tenant_len, r->idem, r->idem_len));
        r->idem_reserved = false;
    }
    if (r->nonce_used) {
        TG_IGNORE(
            tg_db_release_nonce(r->p->db, r->tenant_name, r->tenant_len, r->nonce, r->nonce_len));
        r->nonce_used = false;
    }
    tg_pipeline_limits_release(r->p, &r->limits);
    if (r->appr_held) {
        /* the consuming PERMIT was never written: the approval stays approved */
        TG_IGNORE(tg_db_approval_release(r->p->db, r->tenant_name, r->tenant_len, r->appr->id,
                                         strlen(r->appr->id)));
        r->appr_held = false;
    }
}

static void fail(eval_req_t *r, tg_err_t e, const char *msg) {
    release_reservations(r);
    tg_reply_error(r->ex, e, msg);
}

/* ---- response and ledger record bodies --------------------------------------------- */

/* The record's meta (record.h) for this request. */
static tg_record_meta_t meta_of(const eval_req_t *r, const char *req_hash, const char *claim_hash,
                                int64_t at_ms, int status, const tg_record_limit_t *limits,
                                size_t n_limits) {
    return (tg_record_meta_t){
        .limits = limits,
        .n_limits = n_limits,
        .at_ms = at_ms,
        .claim_hash = r->has_idem ? (tg_text_t){claim_hash, 64} : (tg_text_t){NULL, 0},
        .key = r->has_idem ? (tg_text_t){r->idem, r->idem_len} : (tg_text_t){NULL, 0},
        .nonce = r->has_nonce ? (tg_text_t){r->nonce, r->nonce_len} : (tg_text_t){NULL, 0},
        .request_hash = {req_hash, 64},
        .status = status,
        .tenant = {r->tenant_name, r->tenant_len},
        .approval = r->appr_step ? r->appr : NULL,
    };
}

/* ---- ledger completion ---------------------------------------------------------------- */

/* Step 9's aftermath in the tables, once the ledger has answered for the record: on
 * success the idempotency entry points at the record and the receipt is indexed; on
 * failure the request's reservations are released. Touches no exchange, so it also runs
 * for a request whose client was already answered (abandoned below). */
static void settle_store(eval_req_t *r, tg_err_t status, const tg_ledger_pos_t *pos) {
    tg_pipeline_t *p = r->p;
    if (status != TG_OK) {
        release_reservations(r);
        return;
    }
    int64_t now = tg_clock_now_ms();
    if (r->idem_reserved) {
        /* The entry keeps where the record is, not the response: a replay rebuilds the
         * response from the record (tg_pipeline_replay_response), the same way after a restart, so
         * an entry costs ~160 bytes (store.h) instead of a copy of a ~1.4 KB response. */
        tg_err_t rc = tg_db_complete_key(p->db, r->tenant_name, r->tenant_len, r->idem, r->idem_len,
                                         r->status, pos, now);
        if (rc != TG_OK) {
            /* The record is durable and the response goes out, but the table did not take
             * it (the reservation holds its room, so only a bug gets here). Dropping the
             * reservation would let a retry execute the request a second time, so it stays
             * held: retries get 409 in flight until a restart rebuilds the entry from the
             * ledger. Fail closed, say so. */
            TG_LOG(TG_LOG_ERROR, "idempotency_store_full",
                   "request %s: response not stored (%s); retries of its key get 409", r->rid,
                   tg_strerror(rc));
        }
        r->idem_reserved = false;
    }
    r->nonce_used = false; /* durable now: never release */
    tg_pipeline_limits_settled(&r->limits);
    if (r->appr_step) {
        /* the approval's new version is durable with the record: the db's view follows */
        tg_err_t arc = tg_db_approval_commit(p->db, r->appr, now);
        r->appr_held = false;
        if (arc != TG_OK) {
            TG_LOG(TG_LOG_ERROR, "approval_commit",
                   "request %s: approval %s version %u is durable but not in the table (%s); "
                   "it is restored at the next start",
                   r->rid, r->appr->id, (unsigned)r->appr->version, tg_strerror(arc));
        }
        tg_metrics_approval(&p->metrics, r->appr_event);
    }
    /* Index signed receipts for GET /v1/receipts (SILENCE has none). The index had
     * room before signing (run); if a concurrent request took it since, the receipt
     * is durable and goes out, and only that route will not find it: say so. */
    tg_err_t rc = r->verdict == TG_SILENCE && !r->observe /* an observe SILENCE is signed */
                      ? TG_OK
                      : tg_pipeline_index_receipt(p, r->tenant_name, r->tenant_len, r->exec_id, pos,
                                                  now, now, r->rid);
    if (rc != TG_OK && rc != TG_ERR_CONFLICT) {
        TG_LOG(TG_LOG_WARN, "receipt_index_full",
               "request %s: receipt %s is in the ledger but not in the index (%s); "
               "GET /v1/receipts will not find it",
               r->rid, r->exec_id, tg_strerror(rc));
    }
}

/* settle_store, and the error response when the record is not durable (on success the
 * response is already in the exchange). */
static void settle(eval_req_t *r, tg_err_t status, const tg_ledger_pos_t *pos) {
    settle_store(r, status, pos);
    if (status == TG_ERR_OVERLOADED) {
        tg_reply_error(r->ex, status, "the receipt ledger queue is full; retry shortly");
    } else if (status == TG_ERR_LIMIT) {
        tg_reply_error(r->ex, TG_ERR_REQUEST_INVALID,
                       "the receipt would exceed the ledger's record limit");
    } else if (status != TG_OK) {
        tg_reply_error(r->ex, tg_db_unavailable(r->p->db),
                       "the record was not made durable (the store is unavailable, or another "
                       "instance took its claim over); retry with the same idempotency key");
    }
}

/* ---- waiting for the ledger ----------------------------------------------------------- */

/* A deferred request is answered by whichever comes first: the ledger's done callback
 * (on_durable), or the pipeline giving up on it (tg_pipeline_abandon_waits: the record
 * was not durable within --ledger-stall-timeout, or the server is stopping and the drain
 * ran out). The first to move wait_state away from WAIT_LEDGER answers the client; a
 * request that was given up on keeps its claims until the ledger's word arrives, which
 * then settles the tables as usual (settle_store), so that a record that became durable
 * after its 503 is replayed to a retry and one that did not frees its key. Both sides hold
 * a reference; the last one frees the request. */
enum { WAIT_NONE = 0, WAIT_LEDGER, WAIT_DONE, WAIT_ABANDONED };

static void eval_req_put(eval_req_t *r) {
    if (atomic_fetch_sub(&r->refs, 1) == 1) {
        eval_req_free(r);
    }
}

/* Adds r at the tail of the pipeline's list of waiting requests (oldest first). False
 * when the list is closed (the server is stopping): r must not wait then. */
static bool wait_enlist(eval_req_t *r) {
    tg_pipeline_t *p = r->p;
    r->deferred_ns = tg_clock_mono_ns();
    atomic_store(&r->wait_state, WAIT_LEDGER);
    atomic_store(&r->refs, 2);
    pthread_mutex_lock(&p->wait_mu);
    bool open = !p->waits_closed;
    if (open) {
        r->wnext = NULL;
        r->wprev = p->wait_tail;
        if (p->wait_tail != NULL) {
            p->wait_tail->wnext = r;
        } else {
            p->wait_head = r;
        }
        p->wait_tail = r;
        r->enlisted = true;
        p->waiting++;
    }
    pthread_mutex_unlock(&p->wait_mu);
    return open;
}

/* wait_mu held. */
static void wait_unlink(tg_pipeline_t *p, eval_req_t *r) {
    if (!r->enlisted) {
        return;
    }
    if (r->wprev != NULL) {
        r->wprev->wnext = r->wnext;
    } else {
        p->wait_head = r->wnext;
    }
    if (r->wnext != NULL) {
        r->wnext->wprev = r->wprev;
    } else {
        p->wait_tail = r->wprev;
    }
    r->wprev = r->wnext = NULL;
    r->enlisted = false;
    p->waiting--;
}

size_t tg_pipeline_abandon_waits(tg_pipeline_t *p, int64_t older_than_ns, bool closing) {
    eval_req_t *taken = NULL;
    size_t n = 0;
    int64_t now = tg_clock_mono_ns();
    pthread_mutex_lock(&p->wait_mu);
    if (closing) {
        p->waits_closed = true;
    }
    eval_req_t *r = p->wait_head;
    /* Oldest first: the walk stops at the first request young enough to keep waiting. */
    while (r != NULL && (closing || now - r->deferred_ns > older_than_ns)) {
        eval_req_t *next = r->wnext;
        int expect = WAIT_LEDGER;
        if (atomic_compare_exchange_strong(&r->wait_state, &expect, WAIT_ABANDONED)) {
            wait_unlink(p, r);
            r->abandon_err = closing ? TG_ERR_OVERLOADED : tg_db_unavailable(p->db);
            r->wnext = taken;
            taken = r;
            n++;
        }
        r = next;
    }
    pthread_mutex_unlock(&p->wait_mu);
    while (taken != NULL) {
        eval_req_t *next = taken->wnext;
        taken->wnext = NULL;
        TG_LOG(TG_LOG_ERROR, closing ? "ledger_wait_abandoned_at_stop" : "ledger_wait_timeout",
               "request %s: its record was not durable after %lld ms; answered 503 (the record "
               "may still become durable: a retry with its idempotency key then replays it)",
               taken->rid, (long long)((now - taken->deferred_ns) / 1000000));
        tg_metrics_ledger_wait_timeout(&p->metrics);
        tg_exchange_complete(taken->ex); /* the exchange's reference keeps it alive */
        taken = next;
    }
    return n;
}

/* Runs on an event thread after the ledger answered or the request was given up on. */
static void on_resume(tg_exchange_t *ex, void *ud) {
    eval_req_t *r = ud;
    if (atomic_load(&r->wait_state) == WAIT_ABANDONED) {
        if (r->abandon_err == TG_ERR_OVERLOADED) {
            tg_reply_fail(ex, TG_ANSWER_OVERLOADED,
                          "the server is stopping and the receipt ledger did not make "
                          "the record durable in time; retry shortly");
        } else {
            tg_reply_error(ex, r->abandon_err,
                           "the receipt ledger did not make the record durable within "
                           "--ledger-stall-timeout; retry with the same idempotency key");
        }
    } else {
        settle(r, r->ledger_status, &r->pos);
    }
    finish(r);
    eval_req_put(r);
}

/* Runs on the ledger's completion thread once the record is durable (or failed). It only
 * notes the outcome and wakes the connection: what follows runs in on_resume, on the event
 * thread, so the request's memory is freed by the thread that allocated it (glibc's
 * per-thread caches lose that memory to the other thread otherwise) and this thread is
 * free for the next batch at once. A request already answered (abandoned) only settles
 * its claims here. */
static void on_durable(void *ud, tg_err_t status, const tg_ledger_pos_t *pos) {
    eval_req_t *r = ud;
    r->ledger_status = status;
    if (pos != NULL) {
        r->pos = *pos;
    }
    int expect = WAIT_LEDGER;
    if (atomic_compare_exchange_strong(&r->wait_state, &expect, WAIT_DONE)) {
        pthread_mutex_lock(&r->p->wait_mu);
        wait_unlink(r->p, r);
        pthread_mutex_unlock(&r->p->wait_mu);
        atomic_fetch_sub(&r->refs, 1); /* the exchange's reference remains: never the last */
        tg_exchange_complete(r->ex);
        return;
    }
    settle_store(r, status, pos != NULL && status == TG_OK ? pos : &r->pos);
    eval_req_put(r);
}

/* ---- the pipeline ------------------------------------------------------------------- */

static bool copy_view(char *dst, size_t cap, size_t *len_out, const char *src, size_t n) {
    if (n > cap) {
        return false;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
    *len_out = n;
    return true;
}

/* IETF RateLimit-Policy / RateLimit (draft-ietf-httpapi-ratelimit-headers, structured
 * fields) for the limiter the check described: quota q per w=60 s window, r requests
 * that would pass now, t seconds until the limiter is back to its full burst. */
static void set_ratelimit_headers(tg_exchange_t *ex, const tg_rate_info_t *info) {
    if (info->scope == TG_RATE_SCOPE_NONE) {
        return;
    }
    const char *name = info->scope == TG_RATE_SCOPE_TENANT ? "tenant" : "global";
    (void)snprintf(ex->ratelimit_policy, sizeof ex->ratelimit_policy, "\"%s\";q=%llu;w=60", name,
                   (unsigned long long)info->limit);
    long long t = (long long)((info->reset_ms + 999) / 1000);
    (void)snprintf(ex->ratelimit, sizeof ex->ratelimit, "\"%s\";r=%llu;t=%lld", name,
                   (unsigned long long)info->remaining, t);
}

/* Steps 1-2: auth, then bulkhead and rate limit for that tenant. Per-tenant limits need
 * the tenant, so they follow auth (docs/DESIGN.md explains the order). */
static step_t admit(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    tg_exchange_t *ex = r->ex;
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        return STEP_ANSWERED;
    }
    const char *auth = ex->authorization;
    s->tenants = tg_pipeline_tenants_acquire(p, &s->tenants_hold);
    const char *refusal = NULL;
    tg_err_t rc = tg_pipeline_auth(p, s->tenants, auth, r->rid, &s->auth, &refusal);
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, refusal);
        return STEP_ANSWERED;
    }
    r->principal = s->auth.principal;
    r->tenant = r->principal->tenant;
    (void)snprintf(r->subject, sizeof r->subject, "%s", r->principal->subject.ptr);
    if (r->principal->issuer.ptr != NULL) {
        (void)snprintf(r->issuer, sizeof r->issuer, "%s", r->principal->issuer.ptr);
    }
    size_t tl = 0;
    const char *tn = tg_tenants_name(s->tenants, r->tenant, &tl);
    if (tn == NULL || !copy_view(r->tenant_name, TG_TENANT_MAX, &r->tenant_len, tn, tl)) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return STEP_ANSWERED;
    }
    tg_bulkhead_reason_t why;
    if (tg_bulkhead_enter(p->bulkhead, r->tenant, &why) != TG_OK) {
        tg_reply_error(ex, TG_ERR_OVERLOADED,
                       why == TG_BULKHEAD_TENANT_FULL
                           ? "too many requests in flight for this tenant; retry shortly"
                           : "too many requests in flight; retry shortly");
        return STEP_ANSWERED;
    }
    r->bulkhead_held = true;
    tg_rate_info_t info;
    memset(&info, 0, sizeof info);
    tg_err_t rrc = tg_rate_check(p->rate, r->tenant, tg_clock_mono_ns(), &info);
    set_ratelimit_headers(ex, &info);
    if (rrc != TG_OK) {
        ex->retry_after_s = (int)tg_rate_retry_after_s(info.retry_after_ms);
        tg_reply_error(ex, TG_ERR_RATE_LIMITED,
                       info.scope == TG_RATE_SCOPE_TENANT ? "tenant rate limit exceeded"
                                                          : "server rate limit exceeded");
        return STEP_ANSWERED;
    }
    /* After the limits, so that a token of any role counts against its tenant's. */
    if (!tg_role_may_decide(r->principal->role)) {
        char msg[160];
        (void)snprintf(msg, sizeof msg,
                       "a token with role \"%s\" may not ask for decisions (only caller and "
                       "admin tokens may)",
                       tg_role_name(r->principal->role));
        tg_reply_fail(ex, TG_ANSWER_ROLE_NOT_ALLOWED, msg);
        return STEP_ANSWERED;
    }
    return STEP_NEXT;
}

static void respond_decide(eval_req_t *r, const tg_decision_t *d, const tg_policy_t *pol,
                           const tg_frame_t *f) {
    tg_exchange_t *ex = r->ex;
    tg_buf_reset(&ex->out);
    tg_err_t rc = tg_buf_printf(
        &ex->out, "{\"decision\":\"%s\",\"reason_code\":", tg_verdict_name(d->verdict));
    if (rc == TG_OK) {
        rc = tg_canon_string(&ex->out, d->reason, strlen(d->reason));
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(&ex->out, ",\"policy_version\":");
    }
    if (rc == TG_OK) {
        const char *v = tg_policy_version(pol);
        rc = tg_canon_string(&ex->out, v, strlen(v));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(&ex->out, ",\"policy_hash\":\"%s\"", tg_policy_hash_hex(pol));
    }
    char detail[TG_DETAIL_MAX];
    if (rc == TG_OK && tg_decision_detail(detail, sizeof detail, d) > 0) {
        rc = tg_buf_puts(&ex->out, ",\"detail\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(&ex->out, detail, strlen(detail));
        }
    }
    if (rc == TG_OK && ex->explain) {
        rc = tg_decision_trace_append(&ex->out, d, pol, NULL);
    }
    if (rc == TG_OK && ex->explain) {
        rc = tg_decision_explain_append(&ex->out, pol, f); /* issue 21: the cold second walk */
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    if (rc != TG_OK) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    tg_reply_ok(ex, TG_ANSWER_OK);
}

/* Step 3, the transport fields: the idempotency key (body member or header, which must then
 * agree) and the nonce, checked against their limits and copied into r. Nothing is reserved
 * yet, so a refusal here needs no undo. */
static step_t read_keys(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    tg_exchange_t *ex = r->ex;
    const tg_request_meta_t *meta = &s->meta;
    size_t maxk = (size_t)p->cfg.max_idempotency_key;
    size_t maxn = (size_t)p->cfg.max_nonce;
    const char *hdr = ex->idempotency_header;
    if (meta->idempotency_key.ptr != NULL && hdr != NULL &&
        (strlen(hdr) != meta->idempotency_key.len ||
         memcmp(hdr, meta->idempotency_key.ptr, meta->idempotency_key.len) != 0)) {
        tg_reply_error(ex, TG_ERR_REQUEST_INVALID,
                       "Idempotency-Key header and idempotency_key differ");
        return STEP_ANSWERED;
    }
    const char *k = meta->idempotency_key.ptr ? meta->idempotency_key.ptr : hdr;
    size_t kl = meta->idempotency_key.ptr ? meta->idempotency_key.len : (hdr ? strlen(hdr) : 0);
    if (k != NULL) {
        if (kl == 0) {
            tg_reply_error(ex, TG_ERR_REQUEST_INVALID, "idempotency key is empty");
            return STEP_ANSWERED;
        }
        if (kl > maxk || !copy_view(r->idem, TG_KEY_MAX, &r->idem_len, k, kl)) {
            tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_idempotency_key", maxk,
                           "idempotency key is %zu bytes, longer than --max-idempotency-key %zu",
                           kl, maxk);
            return STEP_ANSWERED;
        }
        r->has_idem = true;
    }
    if (meta->nonce.ptr != NULL) {
        if (meta->nonce.len == 0) {
            tg_reply_error(ex, TG_ERR_REQUEST_INVALID, "nonce is empty");
            return STEP_ANSWERED;
        }
        /* The server's own claims (a redemption's, redeem.c) live in this namespace, so a
         * request can neither take one nor have its nonce taken by one. */
        size_t rl = sizeof TG_RECORD_RESERVED_NONCE_PREFIX - 1;
        if (meta->nonce.len >= rl &&
            memcmp(meta->nonce.ptr, TG_RECORD_RESERVED_NONCE_PREFIX, rl) == 0) {
            tg_reply_error(ex, TG_ERR_REQUEST_INVALID,
                           "nonces beginning with \"" TG_RECORD_RESERVED_NONCE_PREFIX
                           "\" are reserved for the server");
            return STEP_ANSWERED;
        }
        if (meta->nonce.len > maxn ||
            !copy_view(r->nonce, TG_KEY_MAX, &r->nonce_len, meta->nonce.ptr, meta->nonce.len)) {
            tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_nonce", maxn,
                           "nonce is %zu bytes, longer than --max-nonce %zu",
                           (size_t)meta->nonce.len, maxn);
            return STEP_ANSWERED;
        }
        r->has_nonce = true;
    }
    /* Key and nonce are written JSON-escaped into the ledger record's meta, which has a
     * fixed cap: 255 control characters escape to 1530 bytes. Measure with the widest
     * values of the other members before reserving anything. */
    tg_record_limit_t wide_limits[TG_RECORD_MAX_LIMITS];
    size_t n_wide = tg_pipeline_limits_widest(s->pol, s->frame.surface, wide_limits);
    if (r->has_idem || r->has_nonce || n_wide > 0) {
        tg_buf_t probe;
        tg_buf_init(&probe, TG_RECORD_META_BASE_MAX);
        tg_record_meta_t widest =
            meta_of(r, TG_META_PROBE_HASH, TG_META_PROBE_HASH, INT64_MAX, 999, wide_limits, n_wide);
        tg_err_t mrc = tg_record_meta_write(&probe, &widest);
        tg_buf_free(&probe);
        if (mrc != TG_OK && mrc != TG_ERR_LIMIT) {
            /* Only the Idempotency-Key header can get here: JSON strings are valid UTF-8. */
            tg_reply_error(ex, TG_ERR_REQUEST_INVALID, "idempotency key is not valid UTF-8 text");
            return STEP_ANSWERED;
        }
        if (mrc != TG_OK) {
            tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_record_meta",
                           (size_t)TG_RECORD_META_BASE_MAX,
                           "idempotency key and nonce need more than %d bytes once "
                           "JSON-escaped into the ledger record with this surface's limit "
                           "reservations (a shorter key or nonce, fewer control characters, "
                           "quotes or backslashes)",
                           TG_RECORD_META_BASE_MAX);
            return STEP_ANSWERED;
        }
    }
    return STEP_NEXT;
}

/* Step 4, a resume (SPEC §11.2): a request that names an approval (approval_id, a transport
 * field) must name one of its tenant's, bound to this very request; else 422, before
 * anything is claimed. What the approval then allows is decided after the kernel (escalate). */
static step_t check_approval_id(eval_req_t *r, steps_t *s) {
    const tg_sv_t *id = &s->meta.approval_id;
    if (id->ptr == NULL || r->mode == TG_MODE_DECIDE) {
        return STEP_NEXT;
    }
    if (r->observe) {
        tg_reply_fail(r->ex, TG_ANSWER_INVALID_REQUEST,
                      "approval_id resumes an escalated request; an observe request never "
                      "escalates and cannot consume an approval");
        return STEP_ANSWERED;
    }
    if (!tg_approval_id_valid(id->ptr, id->len)) {
        tg_reply_fail(r->ex, TG_ANSWER_INVALID_REQUEST,
                      "approval_id must be \"appr_\" and 32 lowercase hex digits");
        return STEP_ANSWERED;
    }
    memcpy(r->appr_id, id->ptr, id->len);
    r->appr_id[id->len] = '\0';
    tg_approval_t *a = malloc(sizeof *a);
    if (a == NULL) {
        tg_reply_error(r->ex, TG_ERR_INTERNAL, NULL);
        return STEP_ANSWERED;
    }
    tg_err_t rc =
        tg_db_approval_get(r->p->db, r->tenant_name, r->tenant_len, r->appr_id, id->len, a);
    bool same = rc == TG_OK && sodium_memcmp(a->request_hash, s->req_hash, 32) == 0;
    free(a);
    if (rc == TG_OK && !same) {
        tg_reply_error(r->ex, TG_ERR_REQUEST_HASH_MISMATCH,
                       "the approval was opened for another request: resume with exactly the "
                       "escalated request (approval_id and the idempotency key excepted)");
        return STEP_ANSWERED;
    }
    if (rc == TG_ERR_NOT_FOUND) {
        /* another tenant's approval is a missing one: its existence is not told */
        tg_reply_error(r->ex, TG_ERR_REQUEST_HASH_MISMATCH,
                       "no approval with this id was opened for this request by this tenant");
        return STEP_ANSWERED;
    }
    if (rc != TG_OK) {
        tg_reply_error(r->ex, rc == tg_db_unavailable(r->p->db) ? rc : TG_ERR_INTERNAL,
                       "the approval cannot be read now; retry shortly");
        return STEP_ANSWERED;
    }
    r->has_appr_id = true;
    return STEP_NEXT;
}

/* Step 5: the idempotency key. Seen with this request hash: the stored response is
 * rebuilt and replayed; with another, or still in flight: 409. Otherwise it is reserved
 * (released if the request ends without a durable record). */
static step_t check_idempotency(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    tg_exchange_t *ex = r->ex;
    if (!r->has_idem) {
        return STEP_NEXT;
    }
    tg_idem_result_t res;
    memset(&res, 0, sizeof res);
    tg_err_t rc = tg_db_claim_key(p->db, r->tenant_name, r->tenant_len, r->idem, r->idem_len,
                                  s->claim_hash, tg_clock_now_ms(), &res);
    if (rc == TG_ERR_LIMIT) {
        tg_reply_error(ex, TG_ERR_OVERLOADED, "idempotency table is full; retry later");
        return STEP_ANSWERED;
    }
    if (rc == TG_ERR_CONFLICT) {
        tg_reply_error(ex, rc,
                       "this idempotency key was used for a different request or by another "
                       "principal");
        return STEP_ANSWERED;
    }
    if (rc == TG_ERR_IN_FLIGHT) {
        tg_reply_error(ex, rc, "a request with this idempotency key is still in flight");
        return STEP_ANSWERED;
    }
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, "idempotency key rejected");
        return STEP_ANSWERED;
    }
    if (res.state == TG_IDEM_REPLAY) {
        bool permit = false;
        tg_err_t prc = tg_pipeline_replay_response(p, &res.entry.pos, &ex->out, &permit);
        if (prc == tg_db_unavailable(p->db)) {
            /* the store cannot be read now: a retry replays once it can */
            tg_reply_error(ex, prc, "the stored response cannot be read now; retry shortly");
            return STEP_ANSWERED;
        }
        if (prc != TG_OK) {
            /* Never execute the request again: its record exists but cannot be read
             * back, which is the operator's to look at (the log says which). */
            TG_LOG(TG_LOG_ERROR, "idempotent_replay",
                   "request %s: stored response cannot be rebuilt from the ledger: %s",
                   ex->request_id, tg_strerror(prc));
            tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
            return STEP_ANSWERED;
        }
        /* The body is the stored one byte for byte; the status is this route's for
         * the stored decision. A key first used on /v1/evaluate (always 200) and
         * replayed on /execute must still answer 403 to a DENY or SILENCE: a gate
         * that trusts /execute's status would otherwise run a denied action. */
        ex->replayed = true;
        replay_exec_id(r, ex);
        if (r->mode == TG_MODE_GATE && permit) {
            gate_replay_headers(r, ex);
        }
        tg_reply_ok(ex, decision_answer(r->mode, permit));
        atomic_fetch_add_explicit(&p->metrics.idem_replays, 1, memory_order_relaxed);
        return STEP_ANSWERED;
    }
    r->idem_reserved = true;
    return STEP_NEXT;
}

/* Step 6: the nonce, single use per tenant (kept once the record is durable). */
static step_t consume_nonce(eval_req_t *r, steps_t *s) {
    (void)s;
    if (!r->has_nonce) {
        return STEP_NEXT;
    }
    tg_err_t rc = tg_db_claim_nonce(r->p->db, r->tenant_name, r->tenant_len, r->nonce, r->nonce_len,
                                    tg_clock_now_ms());
    if (rc == TG_ERR_REPLAY) {
        fail(r, rc, "this nonce was already used");
        return STEP_ANSWERED;
    }
    if (rc != TG_OK) {
        fail(r, rc == TG_ERR_LIMIT ? TG_ERR_OVERLOADED : rc, "nonce rejected");
        return STEP_ANSWERED;
    }
    r->nonce_used = true;
    return STEP_NEXT;
}

/* Step 8: the signed receipt for PERMIT and DENY, appended to out. */
static tg_err_t sign_receipt(eval_req_t *r, tg_buf_t *out, const tg_key_t *signer,
                             const tg_frame_t *f, const tg_request_meta_t *meta,
                             const tg_policy_ref_t *ref, const char *req_hash, int64_t now_ms,
                             tg_receipt_signed_t *info) {
    tg_pipeline_t *p = r->p;
    char ctx_hex[65];
    tg_receipt_fields_t fl;
    memset(&fl, 0, sizeof fl);
    if (meta->context != NULL) {
        uint8_t h[32];
        tg_err_t rc = tg_canon_sha256(h, meta->context, NULL);
        if (rc) {
            return rc;
        }
        tg_hex(ctx_hex, h, 32);
        fl.execution_context_hash = (tg_receipt_str_t){ctx_hex, 64};
    }
    fl.execution_id = (tg_receipt_str_t){r->exec_id, strlen(r->exec_id)};
    if (r->observe) {
        fl.execution_mode = TG_RSTR("observe");
    }
    fl.authority_id = TG_RSTR(p->cfg.authority_id);
    fl.tenant_id = (tg_receipt_str_t){r->tenant_name, r->tenant_len};
    fl.surface = (tg_receipt_str_t){r->surface, r->surface_len};
    fl.action = f->action.ptr ? (tg_receipt_str_t){f->action.ptr, f->action.len}
                              : (tg_receipt_str_t){"", 0};
    fl.actor_id =
        f->actor.ptr ? (tg_receipt_str_t){f->actor.ptr, f->actor.len} : (tg_receipt_str_t){"", 0};
    fl.decision = TG_RSTR(tg_verdict_name(r->verdict));
    fl.reason_code = TG_RSTR(r->reason);
    /* SPEC §11.2: an ESCALATE names its approval; a PERMIT that consumed one names it and
     * the approvals it had (a DENY of a denied or expired approval names neither) */
    tg_buf_t approvals;
    tg_buf_init(&approvals, 4096);
    if (r->appr != NULL && (r->verdict == TG_ESCALATE || r->verdict == TG_PERMIT)) {
        fl.approval_id = (tg_receipt_str_t){r->appr->id, strlen(r->appr->id)};
    }
    if (r->appr != NULL && r->verdict == TG_PERMIT) {
        tg_err_t arc = tg_approval_receipt_approvals(&approvals, r->appr);
        if (arc != TG_OK) {
            tg_buf_free(&approvals);
            return arc;
        }
        fl.approvals = (tg_receipt_str_t){(const char *)approvals.data, approvals.len};
    }
    fl.request_hash = (tg_receipt_str_t){req_hash, 64};
    if (meta->subject_digest.ptr) {
        fl.subject_digest = (tg_receipt_str_t){meta->subject_digest.ptr, meta->subject_digest.len};
    }
    if (meta->prev_receipt_hash.ptr) {
        fl.prev_receipt_hash =
            (tg_receipt_str_t){meta->prev_receipt_hash.ptr, meta->prev_receipt_hash.len};
    }
    fl.policy_version = TG_RSTR(tg_policy_version(ref->policy));
    fl.policy_hash = (tg_receipt_str_t){tg_policy_hash_hex(ref->policy), 64};
    fl.protocol_fingerprint = (tg_receipt_str_t){ref->fingerprint, 64};
    fl.timestamp_ms = now_ms;
    fl.expires_at_ms = now_ms + p->receipt_ttl_ms;
    /* Who asked (SPEC 1.1): an issuer's caller, or a token with an explicit subject. A
     * derived subject names nothing an operator chose, and leaving it out keeps those
     * tokens' receipts v1 receipts byte for byte. */
    const tg_principal_t *pr = r->principal;
    if (pr->issuer.ptr != NULL || !pr->subject_derived) {
        fl.principal_subject = (tg_receipt_str_t){pr->subject.ptr, pr->subject.len};
        fl.principal_issuer = (tg_receipt_str_t){pr->issuer.ptr, pr->issuer.len};
    }
    tg_err_t rc = tg_receipt_sign_fields(out, info, signer, &fl, NULL);
    tg_buf_free(&approvals);
    return rc;
}

/* Request members copied into the signed receipt must obey its field rules (receipt.h:
 * text of at most TG_RECEIPT_TEXT_MAX bytes; subjectDigest and prevReceiptHash non-empty),
 * checked here for every decision so a caller's data is a 400, never a failure to sign. */
static bool receipt_text_ok(tg_exchange_t *ex, const char *name, const char *ptr, size_t len,
                            bool may_be_empty) {
    if (ptr == NULL) {
        return true;
    }
    if (len == 0 && !may_be_empty) {
        char msg[80];
        (void)snprintf(msg, sizeof msg, "request.%s: must not be empty", name);
        tg_reply_error(ex, TG_ERR_REQUEST_INVALID, msg);
        return false;
    }
    if (len > TG_RECEIPT_TEXT_MAX) {
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_receipt_text", TG_RECEIPT_TEXT_MAX,
                       "request.%s: %zu bytes, more than the %d a receipt field holds", name, len,
                       TG_RECEIPT_TEXT_MAX);
        return false;
    }
    return true;
}

static bool receipt_fields_ok(tg_exchange_t *ex, const tg_frame_t *f, const tg_request_meta_t *m) {
    return receipt_text_ok(ex, "action", f->action.ptr, f->action.len, true) &&
           receipt_text_ok(ex, "actor", f->actor.ptr, f->actor.len, true) &&
           receipt_text_ok(ex, "subjectDigest", m->subject_digest.ptr, m->subject_digest.len,
                           false) &&
           receipt_text_ok(ex, "prevReceiptHash", m->prev_receipt_hash.ptr,
                           m->prev_receipt_hash.len, false);
}

/* Step 3: the request against its surface (tg_frame_from_request: members, types, limits,
 * the surface), and the members a receipt would copy. */
static step_t resolve_surface(eval_req_t *r, steps_t *s) {
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_frame_from_request(&s->frame, &s->meta, s->pol, s->req, &diag);
    if (rc != TG_OK) {
        tg_reply_error(r->ex, rc, diag.msg[0] ? diag.msg : NULL);
        return STEP_ANSWERED;
    }
    /* The decision's instant, read once: what time.* conditions see and what the receipt's
     * timestamp records (build_receipt takes it from here), so the two never disagree. */
    s->frame.now_ms = tg_clock_now_ms();
    s->frame.has_now = 1;
    (void)copy_view(r->surface, TG_POLICY_MAX_NAME, &r->surface_len, s->frame.surface_name.ptr,
                    s->frame.surface_name.len);
    return receipt_fields_ok(r->ex, &s->frame, &s->meta) ? STEP_NEXT : STEP_ANSWERED;
}

/* Step 3, the principal's bindings (tokens file "surfaces" and "actors"): the resolved
 * surface must be one of its surfaces; a named actor one of its actors; an absent actor
 * becomes its only actor, so the kernel, the request hash and the receipt all see the
 * actor the token is bound to. Before any claim is made: a refusal consumes nothing. */
static step_t bind_principal(eval_req_t *r, steps_t *s) {
    const tg_principal_t *pr = r->principal;
    tg_frame_t *f = &s->frame;
    char msg[TG_POLICY_MAX_NAME + 160];
    /* What the policy may judge of the caller comes from its authentication, never from
     * the body (tg_frame_from_request left these absent). */
    tg_pipeline_bind_facts(f, s->pol, r->tenant_name, r->tenant_len, pr);
    if (!tg_principal_surface_allowed(pr, f->surface_name.ptr, f->surface_name.len)) {
        (void)snprintf(msg, sizeof msg, "this token may not ask about surface \"%.*s\"",
                       (int)f->surface_name.len, f->surface_name.ptr);
        tg_reply_fail(r->ex, TG_ANSWER_SURFACE_NOT_ALLOWED, msg);
        return STEP_ANSWERED;
    }
    if (pr->actors_count == 0) {
        return STEP_NEXT; /* unbound: the actor is what the request says */
    }
    if (f->actor.ptr == NULL) {
        if (pr->actors_count > 1) {
            tg_reply_fail(r->ex, TG_ANSWER_INVALID_REQUEST,
                          "request.actor: required with this token, which may act as several "
                          "actors; name one of them");
            return STEP_ANSWERED;
        }
        f->actor.ptr = pr->actors[0].ptr;
        f->actor.len = (uint32_t)pr->actors[0].len;
        return STEP_NEXT;
    }
    if (!tg_principal_actor_allowed(pr, f->actor.ptr, f->actor.len)) {
        /* The request's actor is caller data: quote a bounded, printable prefix only. */
        size_t n = f->actor.len > 64 ? 64 : f->actor.len;
        while (n < f->actor.len && n > 0 && ((unsigned char)f->actor.ptr[n] & 0xc0) == 0x80) {
            n--; /* not inside a UTF-8 sequence */
        }
        bool printable = true;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)f->actor.ptr[i];
            printable = printable && c >= 0x20 && c != 0x7f;
        }
        (void)snprintf(msg, sizeof msg, "this token may not act as actor \"%.*s%s\"",
                       printable ? (int)n : 0, f->actor.ptr, f->actor.len > n ? "..." : "");
        tg_reply_fail(r->ex, TG_ANSWER_ACTOR_NOT_ALLOWED, msg);
        return STEP_ANSWERED;
    }
    return STEP_NEXT;
}

/* Step 3, who may observe (SPEC §11.1): a surface whose policy entry has "mode": "observe"
 * is observed for every caller; a caller may ask for it ("executionMode": "observe") only
 * with a token that has "observe": true. Before any claim: a refusal consumes nothing. */
static step_t resolve_mode(eval_req_t *r, steps_t *s) {
    bool asked =
        s->meta.execution_mode.ptr != NULL && strcmp(s->meta.execution_mode.ptr, "observe") == 0;
    bool surface = tg_policy_surface_observe(s->pol, s->frame.surface);
    if (asked && !surface && !r->principal->observe) {
        tg_reply_fail(r->ex, TG_ANSWER_OBSERVE_NOT_ALLOWED,
                      "this token may not ask for observe mode (its tokens-file entry needs "
                      "\"observe\": true), and the surface is not in observe mode");
        return STEP_ANSWERED;
    }
    /* /decide answers the kernel's decision as it is: never a PERMIT it did not give. */
    r->observe = (asked || surface) && r->mode != TG_MODE_DECIDE;
    return STEP_NEXT;
}

/* The access log's actor and rule, copied (bounded) once the kernel decided. */
static void log_capture(eval_req_t *r, const steps_t *s) {
    size_t n = s->frame.actor.len;
    if (s->frame.actor.ptr != NULL) {
        if (n > TG_POLICY_MAX_NAME) {
            n = TG_POLICY_MAX_NAME - 3;
            while (n > 0 && ((unsigned char)s->frame.actor.ptr[n] & 0xc0) == 0x80) {
                n--; /* not inside a UTF-8 sequence */
            }
            memcpy(r->actor, s->frame.actor.ptr, n);
            memcpy(r->actor + n, "...", 4);
        } else {
            memcpy(r->actor, s->frame.actor.ptr, n);
            r->actor[n] = '\0';
        }
    }
    if (s->d.rule_id.ptr != NULL && s->d.rule_id.len <= TG_POLICY_MAX_NAME) {
        memcpy(r->rule, s->d.rule_id.ptr, s->d.rule_id.len);
        r->rule[s->d.rule_id.len] = '\0';
    }
}

/* --shadow-policy: what the shadow bundle needs to decide this request again after the live
 * decision, copied out of r (which the ledger's answer may free before the shadow runs). */
static void shadow_capture(eval_req_t *r, steps_t *s) {
    if (r->p->shadow == NULL) {
        return;
    }
    tg_shadow_input_t *in = &s->shadow;
    memcpy(s->shadow_tenant, r->tenant_name, r->tenant_len);
    s->shadow_tenant[r->tenant_len] = '\0';
    memcpy(s->shadow_surface, r->surface, r->surface_len);
    s->shadow_surface[r->surface_len] = '\0';
    memcpy(s->shadow_rid, r->rid, sizeof s->shadow_rid);
    in->request = s->req;
    in->tenant = s->shadow_tenant;
    in->tenant_len = r->tenant_len;
    in->principal = r->principal; /* held by s (tenants table or auth) until steps_end */
    in->actor = s->frame.actor;
    in->now_ms = s->frame.has_now ? s->frame.now_ms : tg_clock_now_ms();
    in->surface = s->shadow_surface;
    in->surface_len = r->surface_len;
    in->live = s->d;
    in->live_version = tg_policy_version(s->pol);
    in->request_id = s->shadow_rid;
    s->shadow_on = true;
}

/* Step 7's inputs from the db: the running totals of the surface's stateful limits for this
 * request's key and window (read, no lock), so that the kernel decides with them. */
static step_t bind_limits(eval_req_t *r, steps_t *s) {
    int64_t now = s->frame.has_now ? s->frame.now_ms : tg_clock_now_ms();
    tg_err_t rc = tg_pipeline_limits_bind(r->p, s->pol, &s->frame, now, &r->limits);
    if (rc != TG_OK) {
        fail(r, rc == TG_ERR_INVALID_ARG ? TG_ERR_INTERNAL : tg_db_unavailable(r->p->db),
             "the running totals of this surface's limits cannot be read now; retry shortly");
        return STEP_ANSWERED;
    }
    return STEP_NEXT;
}

static void count_limit_denial(eval_req_t *r, const steps_t *s) {
    if (s->d.cause == TG_CAUSE_LIMIT && s->d.verdict == TG_DENY) {
        tg_metrics_limit_denial(&r->p->metrics, r->surface, r->surface_len, s->d.subject.ptr,
                                s->d.subject.len);
    }
}

/* After a PERMIT in enforce mode: every limit of the surface reserved, atomically per limit
 * (db.h), so that concurrent requests never pass a cap together. A reservation refused
 * because another request took the room re-decides with the fresh total (then a DENY with
 * the limit's reason, which is what gets signed); a bounded number of times, since a
 * release may make room again. Observe mode and /decide read totals, never reserve. */
#define LIMIT_RESERVE_ATTEMPTS 4
static step_t reserve_limits(eval_req_t *r, steps_t *s) {
    if (r->observe || r->limits.n == 0) {
        return STEP_NEXT;
    }
    for (int attempt = 0; s->d.verdict == TG_PERMIT; attempt++) {
        tg_err_t rc = attempt < LIMIT_RESERVE_ATTEMPTS
                          ? tg_pipeline_limits_reserve(r->p, s->pol, &s->frame, &r->limits)
                          : TG_ERR_OVERLOADED;
        if (rc == TG_OK) {
            return STEP_NEXT;
        }
        if (rc != TG_ERR_LIMIT_EXCEEDED) {
            fail(r,
                 rc == TG_ERR_LIMIT || rc == TG_ERR_OVERLOADED ? TG_ERR_OVERLOADED
                 : rc == TG_ERR_INVALID_ARG                    ? TG_ERR_INTERNAL
                                                               : tg_db_unavailable(r->p->db),
                 "the running totals of this surface's limits cannot be updated now; retry "
                 "shortly");
            return STEP_ANSWERED;
        }
        tg_kernel_decide(&s->d, tg_policy_tables(s->pol), &s->frame);
    }
    return STEP_NEXT;
}

/* /decide: step 7 alone, unsigned and unrecorded (SPEC §3: the fast path). */
static step_t decide_only(eval_req_t *r, steps_t *s) {
    if (bind_limits(r, s) != STEP_NEXT) {
        return STEP_ANSWERED;
    }
    tg_kernel_decide(&s->d, tg_policy_tables(s->pol), &s->frame);
    shadow_capture(r, s);
    log_capture(r, s);
    count_limit_denial(r, s);
    r->verdict = s->d.verdict;
    r->reason = s->d.reason;
    tg_metrics_decision(&r->p->metrics, r->surface, r->surface_len, verdict_index(s->d.verdict));
    tg_metrics_decision_detail(&r->p->metrics, r->tenant_name, r->tenant_len,
                               verdict_index(s->d.verdict), s->d.reason);
    respond_decide(r, &s->d, s->pol, &s->frame);
    return STEP_ANSWERED;
}

/* Step 4: request_hash, over the normalized request (transport fields excluded). */
static step_t hash_request(eval_req_t *r, steps_t *s) {
    tg_err_t rc = tg_request_hash(s->req_hash, &s->frame, &s->meta, NULL);
    if (rc != TG_OK) {
        tg_reply_error(r->ex, rc == TG_ERR_NOMEM ? TG_ERR_INTERNAL : TG_ERR_REQUEST_INVALID,
                       "request cannot be canonicalized");
        return STEP_ANSWERED;
    }
    tg_hex(s->req_hex, s->req_hash, 32);
    /* The key is bound to who asked too (record.h): another principal of the tenant
     * replaying it gets a 409, never this principal's receipt. Only a key needs it. */
    if (r->has_idem) {
        const tg_principal_t *pr = r->principal;
        tg_record_claim_hash(s->claim_hash, s->req_hash, pr->issuer.ptr, pr->issuer.len,
                             pr->subject.ptr, pr->subject.len);
        tg_hex(s->claim_hex, s->claim_hash, 32);
    }
    return STEP_NEXT;
}

/* Step 7 after an ESCALATE in enforce mode (SPEC §11.2). Without approval_id: a new
 * approval (version 1, written with this record). With it, the approval decides in the
 * kernel's place: approved -> a PERMIT that consumes it (under its hold, written with this
 * record); consumed -> 409; denied or expired -> DENY APPROVAL_DENIED / APPROVAL_EXPIRED;
 * pending -> ESCALATE again, naming it. */
static step_t escalate(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    int64_t now = s->frame.now_ms;
    tg_approval_t *a = malloc(sizeof *a);
    if (a == NULL) {
        fail(r, TG_ERR_INTERNAL, NULL);
        return STEP_ANSWERED;
    }
    r->appr = a;
    if (!r->has_appr_id) {
        const tg_approval_spec_t *spec =
            tg_policy_rule_approval(s->pol, s->frame.surface, s->d.rule_id);
        char rule[TG_APPROVAL_NAME_MAX + 1];
        char id[TG_APPROVAL_ID_LEN + 1];
        if (spec == NULL || s->d.rule_id.len > TG_APPROVAL_NAME_MAX) {
            /* the compiler gives every escalate rule its settings: a bug, fail closed */
            fail(r, TG_ERR_INTERNAL, NULL);
            return STEP_ANSWERED;
        }
        if (!tg_db_approval_room(p->db)) {
            fail(r, TG_ERR_OVERLOADED, "the approvals table is full; retry later");
            return STEP_ANSWERED;
        }
        memcpy(rule, s->d.rule_id.ptr, s->d.rule_id.len);
        rule[s->d.rule_id.len] = '\0';
        tg_err_t rc = tg_approval_new_id(id);
        rc = rc ? rc
                : tg_approval_init(a, id, r->tenant_name, s->req_hash, r->exec_id, r->surface, rule,
                                   s->d.reason, spec, now);
        if (rc != TG_OK) {
            fail(r, TG_ERR_INTERNAL, NULL);
            return STEP_ANSWERED;
        }
        r->appr_step = true;
        r->appr_event = TG_APPROVAL_EVENT_ESCALATED;
        return STEP_NEXT;
    }
    bool held = false;
    tg_err_t rc = tg_pipeline_approval_hold(p, r->tenant_name, r->tenant_len, r->appr_id, a, &held);
    if (rc != TG_OK) {
        fail(r,
             rc == TG_ERR_NOT_FOUND   ? TG_ERR_REQUEST_HASH_MISMATCH
             : rc == TG_ERR_IN_FLIGHT ? TG_ERR_OVERLOADED
                                      : rc,
             rc == TG_ERR_NOT_FOUND ? "no approval with this id was opened for this request"
                                    : "the approval cannot be used now; retry shortly");
        return STEP_ANSWERED;
    }
    r->appr_held = held;
    tg_approval_status_t st = tg_approval_status_at(a, now);
    if (st == TG_APPROVAL_APPROVED && !held) {
        /* read without the hold: another resume is consuming it right now */
        fail(r, TG_ERR_APPROVAL_CONSUMED,
             "another request is using this approval now; it is single use");
        return STEP_ANSWERED;
    }
    if (st == TG_APPROVAL_APPROVED) {
        tg_approval_t *next = malloc(sizeof *next);
        if (next == NULL || tg_approval_consume(next, a, r->exec_id, now) != TG_OK) {
            free(next);
            fail(r, TG_ERR_INTERNAL, NULL);
            return STEP_ANSWERED;
        }
        free(a);
        r->appr = next;
        r->appr_step = true;
        r->appr_event = TG_APPROVAL_EVENT_CONSUMED;
        /* a PERMIT's reason, as every PERMIT's: its receipt's approvalId and approvals say
         * which approvals allowed it */
        s->d.verdict = TG_PERMIT;
        s->d.reason = tg_reason_code(TG_REASON_NO_POLICY_VIOLATION);
        return STEP_NEXT;
    }
    if (st == TG_APPROVAL_CONSUMED) {
        fail(r, TG_ERR_APPROVAL_CONSUMED,
             "this approval has already been used by a PERMIT; escalate again for another");
        return STEP_ANSWERED;
    }
    if (held) {
        TG_IGNORE(
            tg_db_approval_release(p->db, r->tenant_name, r->tenant_len, a->id, strlen(a->id)));
    }
    r->appr_held = false;
    if (st == TG_APPROVAL_DENIED || st == TG_APPROVAL_EXPIRED) {
        s->d.verdict = TG_DENY;
        s->d.reason = tg_reason_code(st == TG_APPROVAL_DENIED ? TG_REASON_APPROVAL_DENIED
                                                              : TG_REASON_APPROVAL_EXPIRED);
        free(r->appr);
        r->appr = NULL; /* a DENY names no approval */
    }
    return STEP_NEXT; /* pending: ESCALATE again, naming it */
}

/* Step 7: the kernel, then what the decision fixes: its reason, its execution id. */
static step_t decide(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    if (bind_limits(r, s) != STEP_NEXT) {
        return STEP_ANSWERED;
    }
    tg_kernel_decide(&s->d, tg_policy_tables(s->pol), &s->frame);
    if (reserve_limits(r, s) != STEP_NEXT) {
        return STEP_ANSWERED;
    }
    shadow_capture(r, s); /* after a re-decision: the decision that is answered */
    /* From the idempotency key, else random: never from the nonce (receipt.h says why). */
    if (tg_receipt_execution_id(r->exec_id, r->tenant_name, r->tenant_len, r->surface,
                                r->surface_len, s->req_hex, 64, r->has_idem ? r->idem : NULL,
                                r->idem_len) != TG_OK) {
        /* read_keys refused empty keys and neither JSON nor a header value can hold 0x00:
         * a bug if it happens, and no receipt goes out with an id that may be another's */
        fail(r, TG_ERR_INTERNAL, NULL);
        return STEP_ANSWERED;
    }
    if (s->d.verdict == TG_ESCALATE && !r->observe && escalate(r, s) != STEP_NEXT) {
        return STEP_ANSWERED;
    }
    log_capture(r, s);
    count_limit_denial(r, s);
    /* A signed receipt must be readable by GET /v1/receipts: with the index full, refuse
     * now (503, claims released) rather than sign a receipt that route would deny
     * knowing. The insert after the ledger append stays the authority (see settle). */
    if ((s->d.verdict != TG_SILENCE || r->observe) &&
        !tg_db_receipt_room(p->db, r->tenant_len, TG_RECEIPT_EXEC_ID_LEN)) {
        fail(r, TG_ERR_OVERLOADED, "the receipt index is full; retry later");
        return STEP_ANSWERED;
    }
    r->verdict = s->d.verdict;
    (void)copy_view(r->reason_copy, TG_POLICY_MAX_REASON, &(size_t){0}, s->d.reason,
                    strlen(s->d.reason));
    r->reason = r->reason_copy;
    tg_metrics_decision(&p->metrics, r->surface, r->surface_len, verdict_index(s->d.verdict));
    tg_metrics_decision_detail(&p->metrics, r->tenant_name, r->tenant_len,
                               verdict_index(s->d.verdict), r->reason);
    tg_metrics_mode(&p->metrics, r->observe, verdict_index(s->d.verdict));
    if (r->observe) {
        tg_metrics_would(&p->metrics, r->surface, r->surface_len, verdict_index(s->d.verdict),
                         r->reason);
    }
    s->detail_len = tg_decision_detail(s->detail, sizeof s->detail, &s->d);
    return STEP_NEXT;
}

/* Step 8: the record (the signed receipt for PERMIT and DENY, the unsigned SILENCE record),
 * its meta, and the response that will go out once the record is durable. */
static step_t build_receipt(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    tg_exchange_t *ex = r->ex;
    const tg_decision_t *d = &s->d;
    int64_t now = s->frame.now_ms; /* the instant the kernel decided at (resolve_surface) */
    s->at_ms = now;
    /* A receipt is ~1.1 KB and its response ~1.4 KB: one allocation each instead of the
     * doubling steps from 256 bytes (allocation failure here is retried by the appends). */
    TG_IGNORE(tg_buf_reserve(&s->record, 2048));
    TG_IGNORE(tg_buf_reserve(&ex->out, 2048));
    /* The status is part of the record (meta "s"): a replay answers with it. */
    /* Observe: a 200 on every route and a signed receipt for every outcome, SILENCE
     * included (SPEC §11.1): the receipt says executionMode observe, so it never authorizes. */
    bool go = r->observe || d->verdict == TG_PERMIT;
    r->status = tg_answer_status(decision_answer(r->mode, go));
    s->type =
        d->verdict == TG_SILENCE && !r->observe ? TG_LEDGER_TYPE_SILENCE : TG_LEDGER_TYPE_RECEIPT;
    s->keys = tg_pipeline_keys_acquire(p, &s->keys_hold);
    if (s->type == TG_LEDGER_TYPE_RECEIPT && s->keys->signer == NULL) {
        fail(r, TG_ERR_NO_KEY, "no signing key is loaded");
        return STEP_ANSWERED;
    }
    const char *pv = tg_policy_version(s->pol);
    tg_err_t rc;
    if (s->type == TG_LEDGER_TYPE_RECEIPT) {
        tg_receipt_signed_t info;
        rc = sign_receipt(r, &s->record, s->keys->signer, &s->frame, &s->meta, s->ref, s->req_hex,
                          now, &info);
        if (rc == TG_OK) {
            memcpy(s->entry, info.hash, sizeof s->entry);
        }
        if (rc == TG_OK && r->mode == TG_MODE_GATE && go) {
            /* The gate's PERMIT names its receipt for the service behind the proxy. */
            (void)snprintf(r->ex->gate_exec_id, sizeof r->ex->gate_exec_id, "%s", r->exec_id);
            memcpy(r->ex->gate_receipt_hash, info.hash_hex, sizeof r->ex->gate_receipt_hash);
        }
    } else {
        tg_record_silence_t sil = {
            .execution_id = {r->exec_id, strlen(r->exec_id)},
            .tenant = {r->tenant_name, r->tenant_len},
            .surface = {r->surface, r->surface_len},
            .action = {s->frame.action.ptr, s->frame.action.len},
            .actor = {s->frame.actor.ptr, s->frame.actor.len},
            .reason = {r->reason, strlen(r->reason)},
            .request_hash = {s->req_hex, 64},
            .policy_version = {pv, strlen(pv)},
            .policy_hash = {tg_policy_hash_hex(s->pol), 64},
            .detail = {s->detail, s->detail_len},
            .at_ms = now,
        };
        rc = tg_record_silence_write(&s->record, &sil);
    }
    if (rc == TG_OK) {
        tg_record_limit_t contrib[TG_RECORD_MAX_LIMITS];
        size_t n_contrib = tg_pipeline_limits_contributions(&r->limits, contrib);
        tg_record_meta_t m =
            meta_of(r, s->req_hex, s->claim_hex, now, r->status, contrib, n_contrib);
        rc = tg_record_meta_write(&s->meta_buf, &m);
    }
    if (rc == TG_OK) {
        tg_buf_reset(&ex->out);
        tg_decision_body_t body = {
            .decision = tg_verdict_name(d->verdict),
            .reason = {r->reason, strlen(r->reason)},
            .execution_id = {r->exec_id, strlen(r->exec_id)},
            .request_hash = {s->req_hex, 64},
            .policy_version = {pv, strlen(pv)},
            .detail =
                s->detail_len > 0 ? (tg_text_t){s->detail, s->detail_len} : (tg_text_t){NULL, 0},
            .receipt = s->type == TG_LEDGER_TYPE_RECEIPT
                           ? (tg_text_t){s->record.data, s->record.len}
                           : (tg_text_t){NULL, 0},
            .observe = r->observe,
        };
        /* SPEC §11.2: the approval an ESCALATE opened or a PERMIT consumed, as written with
         * this record (a replay rebuilds it from meta "a"); a pending one a resume names
         * again is named only (GET /v1/approvals/{id} has its state) */
        tg_buf_t appr_json;
        tg_buf_init(&appr_json, (size_t)TG_APPROVAL_DOC_MAX * 2);
        if (r->appr != NULL) {
            body.approval_id = (tg_text_t){r->appr->id, strlen(r->appr->id)};
        }
        if (r->appr != NULL && r->appr_step) {
            rc = tg_approval_api_json(&appr_json, r->appr, now);
            body.approval = (tg_text_t){(const char *)appr_json.data, appr_json.len};
        }
        rc = rc ? rc : tg_decision_body_open(&ex->out, &body);
        tg_buf_free(&appr_json);
    }
    if (rc == TG_OK && ex->explain) {
        rc = tg_decision_trace_append(&ex->out, d, s->pol, &s->frame);
    }
    if (rc == TG_OK && ex->explain) {
        rc = tg_decision_explain_append(&ex->out, s->pol, &s->frame); /* issue 21 */
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    if (rc == TG_ERR_LIMIT) {
        /* Request data (within every request limit) that still makes the receipt or its
         * ledger record too large: the caller's to shorten, not a server fault. */
        release_reservations(r);
        tg_reply_limit(ex, TG_ANSWER_INVALID_REQUEST, "max_record", (size_t)TG_LEDGER_PAYLOAD_MAX,
                       "the receipt for this request would exceed the %d-byte ledger record; "
                       "shorten action, actor, subjectDigest or prevReceiptHash",
                       TG_LEDGER_PAYLOAD_MAX);
        return STEP_ANSWERED;
    }
    if (rc != TG_OK) {
        fail(r, TG_ERR_INTERNAL, NULL);
        return STEP_ANSWERED;
    }
    tg_reply_ok(ex, decision_answer(r->mode, go));
    return STEP_NEXT;
}

/* Step 9: durable before the response leaves. With --durability none there is no
 * fdatasync to share, so the record is written on this thread and the response goes out at
 * once; otherwise the connection waits, suspended, for the group commit (see "waiting for
 * the ledger"). STEP_HANDED_OFF: r belongs to the ledger's callback and the exchange's
 * resume hook now, and may already be freed. */
static step_t append_durably(eval_req_t *r, steps_t *s) {
    tg_pipeline_t *p = r->p;
    tg_exchange_t *ex = r->ex;
    /* The record carries what it claims, typed, for a backend that stores claims beside
     * it (db.h). */
    const tg_db_record_t rec = {.type = s->type,
                                .meta = s->meta_buf.data,
                                .meta_len = s->meta_buf.len,
                                .payload = s->record.data,
                                .payload_len = s->record.len,
                                .tenant = r->tenant_name,
                                .tenant_len = r->tenant_len,
                                .key = r->has_idem ? r->idem : NULL,
                                .key_len = r->idem_len,
                                .nonce = r->has_nonce ? r->nonce : NULL,
                                .nonce_len = r->nonce_len,
                                .exec_id = r->exec_id,
                                .exec_id_len = strlen(r->exec_id),
                                .request_hash = s->req_hash,
                                .status = r->status,
                                .at_ms = s->at_ms,
                                .approval = r->appr_step ? r->appr : NULL,
                                /* SPEC §12: a receipt's leaf is its receiptHash; the db
                                   hashes the payload of a SILENCE record */
                                .entry = s->type == TG_LEDGER_TYPE_RECEIPT ? s->entry : NULL};
    if (p->cfg.durability == TG_CONFIG_DURABILITY_NONE) {
        tg_ledger_pos_t pos;
        tg_err_t rc = tg_db_append_now(p->db, &rec, &pos);
        settle(r, rc, &pos);
        return STEP_ANSWERED;
    }
    /* Until on_durable says otherwise, the record is not durable: a hook that ran first
     * (the connection ended before the ledger answered) releases, never stores. */
    r->ledger_status = tg_db_unavailable(p->db);
    announce_end(r); /* before the append: the writer must not wait for this very record */
    /* Suspended first, enlisted second: whoever gives up on a listed request (the stall
     * bound, the stop) completes an exchange that is already deferred, never one that is
     * about to be. */
    ex->on_resume = on_resume;
    ex->on_resume_ud = r;
    tg_exchange_defer(ex);
    if (!wait_enlist(r)) {
        /* The server is stopping and gave up on every waiting request: this one must not
         * start waiting now (its connection would outlive the HTTP server). Answered at
         * once through the deferral already made; r is the caller's to free. */
        ex->on_resume = NULL;
        release_reservations(r);
        tg_reply_fail(ex, TG_ANSWER_OVERLOADED, "the server is shutting down; retry shortly");
        tg_exchange_complete(ex);
        return STEP_ANSWERED;
    }
    tg_err_t rc = tg_db_append(p->db, &rec, on_durable, r);
    if (rc != TG_OK) {
        on_durable(r, rc, NULL);
    }
    return STEP_HANDED_OFF;
}

/* Step 3's first half: the body is JSON within the limits (jansson; duplicates refused). */
static step_t parse_request(eval_req_t *r, steps_t *s) {
    tg_exchange_t *ex = r->ex;
    tg_pipeline_t *p = r->p;
    if (!tg_http_content_type_is_json(ex->content_type)) {
        tg_reply_fail(ex, TG_ANSWER_UNSUPPORTED_MEDIA, "Content-Type must be application/json");
        return STEP_ANSWERED;
    }
    if (r->mode != TG_MODE_DECIDE && p->cfg.durability == TG_CONFIG_DURABILITY_FSYNC) {
        tg_db_announce(p->db); /* a record is probably coming: see ledger.h */
        r->announced = true;
    }
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&s->req, ex->body, ex->body_len, &p->limits, &diag);
    if (rc != TG_OK) {
        tg_reply_json_error(ex, &p->limits, rc, diag.msg);
        return STEP_ANSWERED;
    }
    s->ref = tg_pipeline_policy_acquire(p, &s->hold);
    s->pol = s->ref->policy;
    return STEP_NEXT;
}

static const char *gate_header(void *ud, const char *name) { return tg_exchange_header(ud, name); }

/* GET|POST /v1/gate, step 3: the decision request is built by the bundle's routes from the
 * original request a proxy forwards (nginx auth_request: X-Original-Method and
 * X-Original-URI, set in its configuration; X-Forwarded-Method and X-Forwarded-Uri
 * otherwise) and its headers; the gate's own body, if any, is not read. */
static step_t gate_request(eval_req_t *r, steps_t *s) {
    tg_exchange_t *ex = r->ex;
    tg_pipeline_t *p = r->p;
    const char *method = tg_exchange_header(ex, "X-Original-Method");
    const char *uri = tg_exchange_header(ex, "X-Original-URI");
    if (method == NULL && uri == NULL) {
        method = tg_exchange_header(ex, "X-Forwarded-Method");
        uri = tg_exchange_header(ex, "X-Forwarded-Uri");
    }
    if (method == NULL || uri == NULL) {
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST,
                      "the gate needs the original request's method and target: X-Original-Method "
                      "and X-Original-URI (or X-Forwarded-Method and X-Forwarded-Uri)");
        return STEP_ANSWERED;
    }
    if (p->cfg.durability == TG_CONFIG_DURABILITY_FSYNC) {
        tg_db_announce(p->db); /* a record is probably coming: see ledger.h */
        r->announced = true;
    }
    s->ref = tg_pipeline_policy_acquire(p, &s->hold);
    s->pol = s->ref->policy;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_policy_route_request(&s->req, s->pol, method, uri, gate_header, ex, &diag);
    if (rc == TG_ERR_NOT_FOUND) {
        tg_reply_fail(ex, TG_ANSWER_ROUTE_NOT_MAPPED, diag.msg);
        return STEP_ANSWERED;
    }
    if (rc != TG_OK) {
        tg_reply_error(ex, rc == TG_ERR_NOMEM ? TG_ERR_INTERNAL : rc, diag.msg);
        return STEP_ANSWERED;
    }
    return STEP_NEXT;
}

/* SPEC §3.3 in order. Each step either passes the request on (STEP_NEXT), answers it, or,
 * the last one, hands it to the ledger. */
void tg_pipeline_evaluate(tg_pipeline_t *p, tg_exchange_t *ex, tg_eval_mode_t mode) {
    eval_req_t *r = eval_req_new();
    if (r == NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        tg_metrics_request(&p->metrics, route_id(mode), ex->status, 0);
        return;
    }
    r->p = p;
    r->ex = ex;
    memcpy(r->rid, ex->request_id, sizeof r->rid);
    r->mode = mode;
    r->tenant = TG_GUARD_NO_TENANT;
    steps_t s;
    steps_init(&s);
    /* Every jansson value of this request lives and dies between here and scope_end
     * (canon.h): parsed body, request-hash object, SILENCE record, trace. */
    tg_json_scope_begin();
    step_t st = admit(r, &s);                                                         /* 1-2 */
    st = st ? st : mode == TG_MODE_GATE ? gate_request(r, &s) : parse_request(r, &s); /* 3 */
    st = st ? st : resolve_surface(r, &s);                                            /* 3 */
    st = st ? st : bind_principal(r, &s);                                             /* 3 */
    st = st ? st : resolve_mode(r, &s); /* 3, SPEC §11.1 */
    if (st == STEP_NEXT && mode == TG_MODE_DECIDE) {
        st = decide_only(r, &s); /* 7, /decide */
    }
    st = st ? st : read_keys(r, &s);         /* 3 */
    st = st ? st : hash_request(r, &s);      /* 4 */
    st = st ? st : check_approval_id(r, &s); /* 4, a resume (SPEC §11.2) */
    st = st ? st : check_idempotency(r, &s); /* 5 */
    st = st ? st : consume_nonce(r, &s);     /* 6 */
    st = st ? st : decide(r, &s);            /* 7 */
    st = st ? st : build_receipt(r, &s);     /* 8 */
    st = st ? st : append_durably(r, &s);    /* 9 */
    if (s.shadow_on) {
        /* After the hand-off: on the durable path this overlaps the wait for the sync. */
        tg_pipeline_shadow_decide(p, &s.shadow);
    }
    steps_end(p, &s);
    tg_json_scope_end();
    if (st != STEP_HANDED_OFF) {
        announce_end(r);
        finish(r);
        eval_req_free(r);
    }
}
