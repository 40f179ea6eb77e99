/* approvals.c — the approvals API of SPEC §11.2 (list, read, approve, deny) and the timer
 * that expires approvals on time. The resume of an escalated request is a decision, in
 * evaluate.c.
 *
 * Every change of an approval is one record carrying its state after the change (record.h
 * meta "a", approval.h), written under the approval's hold (db.h), durable before the
 * answer, and committed to the db's view only then: a review the client saw answered 200
 * is in the ledger, and one that was not written changed nothing. Reviews of one approval
 * queue on its hold (tg_pipeline_approval_hold), so that concurrent reviews resolve it
 * exactly once and the later ones meet a closed approval. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "internal.h"
#include "trigguard/approval.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/record.h"

#define LIST_DEFAULT 50
#define LIST_MAX 100
#define HOLD_TRIES 200 /* x HOLD_PAUSE_MS: about 2 s behind other writers of one approval */
#define HOLD_PAUSE_MS 10
#define TG_APPROVAL_TICK_MS 500
#define EXPIRE_PER_TICK 16

/* Who asked, copied out of the principal (which a reload or the auth's end may free) before
 * anything waits for a disk. */
typedef struct asker {
    char tenant[TG_GUARD_TENANT_NAME_MAX + 1];
    size_t tenant_len;
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    tg_role_t role;
    size_t n_groups;
    char groups[TG_GUARD_MAX_BINDINGS][TG_GUARD_NAME_MAX + 1];
} asker_t;

typedef enum { MAY_LIST, MAY_READ, MAY_REVIEW } need_t;

static bool role_may(tg_role_t role, need_t need) {
    switch (need) {
    case MAY_READ: /* the tenant's callers and approvers */
        return role == TG_ROLE_CALLER || role == TG_ROLE_ADMIN || role == TG_ROLE_APPROVER;
    case MAY_LIST:
    case MAY_REVIEW:
        return role == TG_ROLE_APPROVER;
    }
    return false;
}

/* Step 1 of every route: the principal, its role, its tenant's rate. False: answered. */
static bool admit(tg_pipeline_t *p, tg_exchange_t *ex, need_t need, asker_t *out) {
    tg_swap_ref_t th;
    const tg_tenants_t *t = tg_pipeline_tenants_acquire(p, &th);
    tg_auth_t a;
    const char *why = NULL;
    bool ok = false;
    tg_err_t rc = tg_pipeline_auth(p, t, ex->authorization, ex->request_id, &a, &why);
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, why);
    } else {
        const tg_principal_t *pr = a.principal;
        tg_pipeline_log_principal(ex, t, pr);
        tg_rate_info_t info;
        size_t tl = 0;
        const char *name = tg_tenants_name(t, pr->tenant, &tl);
        if (!role_may(pr->role, need)) {
            char msg[160];
            (void)snprintf(msg, sizeof msg, "a token with role \"%s\" may not %s (SPEC 11.2: %s)",
                           tg_role_name(pr->role),
                           need == MAY_REVIEW ? "review approvals"
                           : need == MAY_LIST ? "list approvals"
                                              : "read approvals",
                           need == MAY_READ ? "the tenant's callers and approvers may"
                                            : "approver tokens may");
            tg_reply_fail(ex, TG_ANSWER_ROLE_NOT_ALLOWED, msg);
        } else if (tg_rate_check(p->rate, pr->tenant, tg_clock_mono_ns(), &info) != TG_OK) {
            ex->retry_after_s = (int)tg_rate_retry_after_s(info.retry_after_ms);
            tg_reply_error(ex, TG_ERR_RATE_LIMITED, "rate limit exceeded");
        } else if (name == NULL || tl > TG_GUARD_TENANT_NAME_MAX ||
                   pr->subject.len > TG_GUARD_SUBJECT_MAX) {
            tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        } else {
            memset(out, 0, sizeof *out);
            memcpy(out->tenant, name, tl);
            out->tenant_len = tl;
            memcpy(out->subject, pr->subject.ptr, pr->subject.len);
            out->role = pr->role;
            for (size_t i = 0; i < pr->groups_count && i < TG_GUARD_MAX_BINDINGS; i++) {
                if (pr->groups[i].len <= TG_GUARD_NAME_MAX) {
                    memcpy(out->groups[out->n_groups++], pr->groups[i].ptr, pr->groups[i].len);
                }
            }
            ok = true;
        }
    }
    tg_pipeline_auth_end(&a);
    tg_pipeline_tenants_release(p, &th);
    return ok;
}

/* The {id} of a route's rest ("{id}" or "{id}/approve"), NUL-terminated into id. False:
 * not an approval id, answered 404 (an id this server never issued names nothing). */
static bool route_id(tg_exchange_t *ex, const char *rest, char id[TG_APPROVAL_ID_LEN + 1]) {
    const char *slash = strchr(rest, '/');
    size_t n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
    if (!tg_approval_id_valid(rest, n)) {
        tg_reply_fail(ex, TG_ANSWER_APPROVAL_NOT_FOUND,
                      "no approval with this id for this tenant (ids are \"appr_\" and 32 "
                      "lowercase hex digits)");
        return false;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    return true;
}

static void reply_approval(tg_exchange_t *ex, const tg_approval_t *a, int64_t now) {
    tg_buf_reset(&ex->out);
    tg_reply_built(ex, tg_approval_api_json(&ex->out, a, now), TG_ANSWER_OK);
}

/* An answer for an error of the db's approval functions. */
static void reply_db_error(tg_pipeline_t *p, tg_exchange_t *ex, tg_err_t rc) {
    if (rc == TG_ERR_NOT_FOUND) {
        tg_reply_fail(ex, TG_ANSWER_APPROVAL_NOT_FOUND, "no approval with this id for this tenant");
    } else if (rc == TG_ERR_IN_FLIGHT) {
        tg_reply_error(ex, TG_ERR_OVERLOADED,
                       "another change of this approval is being written; retry shortly");
    } else if (rc == tg_db_unavailable(p->db)) {
        tg_reply_error(ex, rc, "the approvals cannot be read now; retry shortly");
    } else {
        TG_LOG(TG_LOG_ERROR, "approval_store", "request %s: %s", ex->request_id, tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    }
}

tg_err_t tg_pipeline_approval_hold(tg_pipeline_t *p, const char *tenant, size_t tenant_len,
                                   const char *id, tg_approval_t *cur, bool *held) {
    *held = false;
    for (int i = 0; i < HOLD_TRIES; i++) {
        int64_t now = tg_clock_now_ms();
        tg_err_t rc = tg_db_approval_hold(p->db, tenant, tenant_len, id, strlen(id), now, cur);
        if (rc != TG_ERR_IN_FLIGHT) {
            *held = rc == TG_OK;
            return rc;
        }
        /* Held by another writer. An approval that is no longer pending can only be read:
         * answer from its stored state at once. Waiting would be wrong there: the holder may
         * be a resume whose PERMIT is deferred on this very event thread (the consuming
         * write is the only one that defers), and its answer would wait for this sleep. */
        rc = tg_db_approval_get(p->db, tenant, tenant_len, id, strlen(id), cur);
        if (rc != TG_OK || tg_approval_status_at(cur, now) != TG_APPROVAL_PENDING) {
            return rc;
        }
        /* pending: a review or the timer is writing it, on a thread of its own */
        struct timespec ts = {0, HOLD_PAUSE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return TG_ERR_IN_FLIGHT;
}

/* ---- GET /v1/approvals --------------------------------------------------------------- */

void tg_route_approvals_list(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    asker_t who;
    if (!admit(p, ex, MAY_LIST, &who)) {
        return;
    }
    const char *st = tg_exchange_query(ex, "status");
    const char *lim = tg_exchange_query(ex, "limit");
    tg_approval_status_t status = TG_APPROVAL_PENDING;
    if (st != NULL && !tg_approval_status_parse(&status, st, strlen(st))) {
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST,
                      "status must be pending, approved, denied, expired or consumed");
        return;
    }
    long limit = LIST_DEFAULT;
    if (lim != NULL) {
        char *end = NULL;
        limit = strtol(lim, &end, 10);
        if (end == lim || *end != '\0' || limit < 1 || limit > LIST_MAX) {
            tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, "limit must be an integer 1..100");
            return;
        }
    }
    tg_approval_t *list = calloc((size_t)limit, sizeof *list);
    if (list == NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    int64_t now = tg_clock_now_ms();
    size_t n = 0;
    tg_err_t rc = tg_db_approval_list(p->db, who.tenant, who.tenant_len, st == NULL, (int)status,
                                      now, list, (size_t)limit, &n);
    if (rc != TG_OK) {
        reply_db_error(p, ex, rc);
        free(list);
        return;
    }
    tg_buf_reset(&ex->out);
    rc = tg_buf_puts(&ex->out, "{\"approvals\":[");
    for (size_t i = 0; rc == TG_OK && i < n; i++) {
        rc = i > 0 ? tg_buf_putc(&ex->out, ',') : TG_OK;
        rc = rc ? rc : tg_approval_api_json(&ex->out, &list[i], now);
    }
    rc = rc ? rc : tg_buf_puts(&ex->out, "]}");
    free(list);
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

/* ---- GET /v1/approvals/{id} ----------------------------------------------------------- */

void tg_route_approval_get(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    asker_t who;
    char id[TG_APPROVAL_ID_LEN + 1];
    if (!admit(p, ex, MAY_READ, &who) || !route_id(ex, rest, id)) {
        return;
    }
    tg_approval_t *a = malloc(sizeof *a);
    if (a == NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    tg_err_t rc = tg_db_approval_get(p->db, who.tenant, who.tenant_len, id, strlen(id), a);
    if (rc == TG_OK) {
        reply_approval(ex, a, tg_clock_now_ms());
    } else {
        reply_db_error(p, ex, rc);
    }
    free(a);
}

/* ---- a step written under the hold ------------------------------------------------------ */

/* What a step's settle needs: the state to commit, or the hold to drop. */
typedef struct step_state {
    tg_approval_t next;
} step_state_t;

/* tg_pipeline_append_wait's settle: durable -> the db's view is the new state; not durable
 * -> the hold is dropped and nothing changed. */
static void settle_step(tg_pipeline_t *p, void *state, tg_err_t status) {
    const step_state_t *st = state;
    const tg_approval_t *a = &st->next;
    if (status == TG_OK) {
        tg_err_t rc = tg_db_approval_commit(p->db, a, tg_clock_now_ms());
        if (rc != TG_OK) {
            /* durable in the ledger: the next start restores it (db.h) */
            TG_LOG(TG_LOG_ERROR, "approval_commit",
                   "approval %s version %u is durable but not in the table (%s); it is "
                   "restored at the next start",
                   a->id, (unsigned)a->version, tg_strerror(rc));
        }
    } else {
        TG_IGNORE(
            tg_db_approval_release(p->db, a->tenant, strlen(a->tenant), a->id, strlen(a->id)));
    }
}

/* Writes the type-4 record of a review or an expiry whose state after is st->next, and
 * waits for it (the hold is settled either way). */
static tg_err_t write_step(tg_pipeline_t *p, step_state_t *st, const tg_record_approval_event_t *e,
                           int status, const char *what) {
    const tg_approval_t *a = &st->next;
    char rh[65];
    tg_hex(rh, a->request_hash, 32);
    tg_buf_t payload, meta;
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_record_meta_t m = {.at_ms = e->at_ms,
                          .request_hash = {rh, 64},
                          .status = status,
                          .tenant = {a->tenant, strlen(a->tenant)},
                          .approval = a};
    tg_err_t rc = tg_record_approval_event_write(&payload, e);
    rc = rc ? rc : tg_record_meta_write(&meta, &m);
    if (rc != TG_OK) {
        settle_step(p, st, rc);
    } else {
        const tg_db_record_t rec = {.type = TG_LEDGER_TYPE_APPROVAL,
                                    .meta = meta.data,
                                    .meta_len = meta.len,
                                    .payload = payload.data,
                                    .payload_len = payload.len,
                                    .tenant = a->tenant,
                                    .tenant_len = strlen(a->tenant),
                                    .request_hash = a->request_hash,
                                    .status = status,
                                    .at_ms = e->at_ms,
                                    .approval = a};
        rc = tg_pipeline_append_wait(p, &rec, settle_step, st, sizeof *st, what);
    }
    tg_buf_free(&payload);
    tg_buf_free(&meta);
    return rc;
}

/* ---- POST /v1/approvals/{id}/approve|deny ------------------------------------------------ */

/* The body: {"request_hash": "<64 hex>", "comment": "..."?}; 400 otherwise. */
static bool review_body(tg_pipeline_t *p, tg_exchange_t *ex, uint8_t hash[32], char hash_hex[65],
                        char *comment, size_t *comment_len) {
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        return false;
    }
    if (!tg_http_content_type_is_json(ex->content_type)) {
        tg_reply_fail(ex, TG_ANSWER_UNSUPPORTED_MEDIA, "Content-Type must be application/json");
        return false;
    }
    json_t *doc = NULL;
    tg_diag_t diag = {{0}};
    tg_json_scope_begin();
    tg_err_t rc = tg_json_parse(&doc, ex->body, ex->body_len, &p->limits, &diag);
    bool ok = false;
    if (rc != TG_OK) {
        tg_reply_json_error(ex, &p->limits, rc, diag.msg);
    } else if (!json_is_object(doc)) {
        tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, "the body must be a JSON object");
    } else {
        const char *k;
        json_t *v;
        const char *bad = NULL;
        json_t *jh = NULL, *jc = NULL;
        json_object_foreach(doc, k, v) {
            if (strcmp(k, "request_hash") == 0) {
                jh = v;
            } else if (strcmp(k, "comment") == 0) {
                jc = v;
            } else {
                bad = "the body has request_hash and, optionally, comment: nothing else";
            }
        }
        const char *h = json_string_value(jh);
        if (bad == NULL &&
            (h == NULL || json_string_length(jh) != 64 || tg_unhex(hash, 32, h, 64) != TG_OK)) {
            bad = "request_hash must be the escalated request's hash: 64 hex digits";
        }
        if (bad == NULL && jc != NULL &&
            (!json_is_string(jc) || json_string_length(jc) > TG_APPROVAL_COMMENT_MAX)) {
            bad = "comment must be a string of at most 1024 bytes";
        }
        if (bad != NULL) {
            tg_reply_fail(ex, TG_ANSWER_INVALID_REQUEST, bad);
        } else {
            tg_hex(hash_hex, hash, 32);
            *comment_len = jc != NULL ? json_string_length(jc) : 0;
            if (jc != NULL) {
                memcpy(comment, json_string_value(jc), *comment_len);
            }
            comment[*comment_len] = '\0';
            ok = true;
        }
    }
    tg_json_scope_end();
    return ok;
}

static void review(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest, bool approve) {
    asker_t who;
    char id[TG_APPROVAL_ID_LEN + 1];
    uint8_t hash[32];
    char hash_hex[65];
    char comment[TG_APPROVAL_COMMENT_MAX + 1];
    size_t comment_len = 0;
    if (!admit(p, ex, MAY_REVIEW, &who) || !route_id(ex, rest, id) ||
        !review_body(p, ex, hash, hash_hex, comment, &comment_len)) {
        return;
    }
    tg_approval_t *cur = malloc(sizeof *cur);
    step_state_t *st = malloc(sizeof *st);
    if (cur == NULL || st == NULL) {
        free(cur);
        free(st);
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    bool held = false;
    tg_err_t rc = tg_pipeline_approval_hold(p, who.tenant, who.tenant_len, id, cur, &held);
    if (rc != TG_OK) {
        reply_db_error(p, ex, rc);
        free(cur);
        free(st);
        return;
    }
    const char *groups[TG_GUARD_MAX_BINDINGS];
    for (size_t i = 0; i < who.n_groups; i++) {
        groups[i] = who.groups[i];
    }
    uint32_t entry = 0;
    int64_t now = tg_clock_now_ms();
    rc = tg_approval_match(cur, who.subject, groups, who.n_groups, &entry);
    rc = rc ? rc : tg_approval_review(&st->next, cur, who.subject, entry, approve, hash, now);
    if (rc == TG_OK && !held) {
        /* read without the hold (no longer pending when read): never written unheld */
        rc = TG_ERR_APPROVAL_CLOSED;
    }
    if (rc != TG_OK) {
        if (held) {
            TG_IGNORE(tg_db_approval_release(p->db, who.tenant, who.tenant_len, id, strlen(id)));
        }
        static const struct {
            tg_err_t rc;
            const char *msg;
        } why[] = {
            {TG_ERR_NOT_APPROVER, "the escalate rule does not list this subject or its groups"},
            {TG_ERR_REQUEST_HASH_MISMATCH,
             "request_hash is not the escalated request's: the review binds to exactly the "
             "request the approver saw"},
            {TG_ERR_ALREADY_REVIEWED, "this subject has already reviewed this approval"},
            {TG_ERR_APPROVAL_CLOSED, "the approval is already resolved, expired or consumed"},
        };
        const char *msg = NULL;
        for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
            msg = why[i].rc == rc ? why[i].msg : msg;
        }
        tg_reply_error(ex, msg != NULL ? rc : TG_ERR_INTERNAL, msg);
        free(cur);
        free(st);
        return;
    }
    tg_record_approval_event_t e = {
        .approval_id = {id, strlen(id)},
        .tenant = {who.tenant, who.tenant_len},
        .review = true,
        .subject = {who.subject, strlen(who.subject)},
        .entry = entry,
        .approve = approve,
        .comment = comment_len > 0 ? (tg_text_t){comment, comment_len} : (tg_text_t){NULL, 0},
        .request_hash = {hash_hex, 64},
        .status = {tg_approval_status_name(st->next.status),
                   strlen(tg_approval_status_name(st->next.status))},
        .at_ms = now,
    };
    rc = write_step(p, st, &e, 200, "an approval review's");
    if (rc == TG_OK) {
        tg_metrics_approval(&p->metrics,
                            approve ? TG_APPROVAL_EVENT_APPROVE : TG_APPROVAL_EVENT_DENY);
        reply_approval(ex, &st->next, now);
    } else if (rc == TG_ERR_OVERLOADED) {
        tg_reply_error(ex, rc, "the record queue is full; retry shortly");
    } else if (rc == TG_ERR_NOMEM || rc == TG_ERR_INVALID_ARG || rc == TG_ERR_LIMIT) {
        TG_LOG(TG_LOG_ERROR, "approval_record", "request %s: review of %s not written: %s",
               ex->request_id, id, tg_strerror(rc));
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    } else {
        tg_reply_error(ex, tg_db_unavailable(p->db),
                       "the review was not made durable and did not count; retry shortly");
    }
    free(cur);
    free(st);
}

void tg_route_approval_approve(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    review(p, ex, rest, true);
}

void tg_route_approval_deny(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    review(p, ex, rest, false);
}

/* ---- the expiry timer ------------------------------------------------------------------- */

void tg_pipeline_approvals_tick(tg_pipeline_t *p, int64_t now_ms) {
    if (now_ms - p->approvals_tick_ms < TG_APPROVAL_TICK_MS) {
        return;
    }
    p->approvals_tick_ms = now_ms;
    tg_db_approval_ref_t due[EXPIRE_PER_TICK];
    size_t n = 0;
    if (tg_db_approval_due(p->db, now_ms, due, EXPIRE_PER_TICK, &n) != TG_OK || n == 0) {
        return; /* the next tick asks again */
    }
    tg_approval_t *cur = malloc(sizeof *cur);
    step_state_t *st = malloc(sizeof *st);
    for (size_t i = 0; cur != NULL && st != NULL && i < n; i++) {
        size_t tl = strlen(due[i].tenant);
        /* one try: a holder is writing a step of it now, and the next tick sees its result */
        if (tg_db_approval_hold(p->db, due[i].tenant, tl, due[i].id, strlen(due[i].id), now_ms,
                                cur) != TG_OK) {
            continue;
        }
        if (tg_approval_expire(&st->next, cur, now_ms) != TG_OK) {
            TG_IGNORE(
                tg_db_approval_release(p->db, due[i].tenant, tl, due[i].id, strlen(due[i].id)));
            continue;
        }
        char rh[65];
        tg_hex(rh, st->next.request_hash, 32);
        tg_record_approval_event_t e = {
            .approval_id = {due[i].id, strlen(due[i].id)},
            .tenant = {due[i].tenant, tl},
            .review = false,
            .request_hash = {rh, 64},
            .status = {"expired", 7},
            .at_ms = now_ms,
        };
        tg_err_t rc = write_step(p, st, &e, 0, "an approval's expiry");
        if (rc == TG_OK) {
            tg_metrics_approval(&p->metrics, TG_APPROVAL_EVENT_EXPIRED);
        } else {
            TG_LOG(TG_LOG_WARN, "approval_expiry",
                   "approval %s: expiry record not written (%s); the next tick tries again",
                   due[i].id, tg_strerror(rc));
        }
    }
    free(cur);
    free(st);
}
