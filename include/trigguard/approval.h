/* approval.h — ESCALATE approvals (SPEC §11.2): an approval's state, the one text format it
 * is kept in, the transitions a review, a resume and the clock make, and the offline audit
 * of a ledger's approvals.
 *
 * ## Why this shape
 * An approval changes in numbered steps (version 1 at the escalation, +1 per step), and each
 * step is one ledger record that carries the approval's whole state after it (record.h
 * meta "a", this header's document). So the two backends keep it the same way a record
 * keeps everything else: the file backend replays the newest state of each approval at
 * start; PostgreSQL writes the state's row in the record's own transaction (db.h). The
 * transitions are pure functions here, used by the daemon to make a step and by the audit
 * to check, from the ledger alone, that every step was one of them.
 *
 *   step      record                                transition           status after
 *   escalate  the ESCALATE receipt (type RECEIPT)   tg_approval_init     pending (v1)
 *   review    an approval record (type APPROVAL,    tg_approval_review   pending, approved
 *             event "review", record.h)                                  or denied
 *   consume   the PERMIT receipt with approvalId    tg_approval_consume  consumed
 *   expire    an approval record (event "expire")   tg_approval_expire   expired
 *
 * Statuses. pending until `required` distinct subjects approved (approved) or one denied
 * (denied); pending past expires_ms is expired; approved but unconsumed past resolved_ms +
 * consume_within_ms is expired too. The stored status lags the clock until the expiry
 * step is written (a timer does it); tg_approval_status_at is the status a reader must use.
 *
 * Who may review is decided by the pipeline with tg_approval_match (the principal's subject
 * and groups against the rule's approvers, copied into the approval at escalation so that a
 * policy reload does not change who may review an open approval); a caller can never review
 * (role), and the same subject counts once (TG_ERR_ALREADY_REVIEWED).
 *
 * ## The document (canonical JSON, RFC 8785; at most TG_APPROVAL_DOC_MAX bytes)
 *   approvers      array of strings   the rule's entries ("@group" or a subject), in order
 *   consumeWithinMs integer           how long an approval may wait to be used
 *   consumedAt     integer            ms, present once consumed
 *   consumedBy     string             the consuming PERMIT's executionId, once consumed
 *   createdAt      integer            ms of the escalation
 *   escalationId   string             the ESCALATE receipt's executionId
 *   expiresAt      integer            createdAt + ttl, ms
 *   id             string             "appr_" + 32 lowercase hex
 *   reason         string             the escalate rule's reason code
 *   requestHash    string             64 lowercase hex: the escalated request's
 *   required       integer            1..TG_APPROVAL_MAX_REQUIRED
 *   resolvedAt     integer            ms, present once approved, denied or expired
 *   reviews        array              [{"at": ms, "decision": "approve"|"deny", "entry": i
 *                                     (index into approvers that admitted it), "subject"}]
 *   rule           string             the escalate rule's id
 *   status         string             pending|approved|denied|expired|consumed
 *   surface        string
 *   tenant         string
 *   v              integer            the version, 1..
 * tg_approval_parse accepts exactly what tg_approval_write writes (every member checked,
 * nothing unknown), so a document is a faithful copy of a tg_approval_t.
 *
 * Thread safety: every function is pure and reentrant (tg_approval_new_id reads the
 * system's random source); an audit object belongs to one thread.
 */
#ifndef TRIGGUARD_APPROVAL_H
#define TRIGGUARD_APPROVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/guard.h"

#define TG_APPROVAL_ID_PREFIX "appr_"
#define TG_APPROVAL_ID_LEN 37 /* "appr_" + 32 lowercase hex */
#define TG_APPROVAL_MAX_APPROVERS 16
#define TG_APPROVAL_MAX_REQUIRED 16
/* Reviews an approval can hold: fewer than `required` approvals, then the one that resolves
 * it (the required-th approval, or a deny). */
#define TG_APPROVAL_MAX_REVIEWS TG_APPROVAL_MAX_REQUIRED
#define TG_APPROVAL_ENTRY_MAX TG_GUARD_SUBJECT_MAX /* an approvers entry: "@group" or subject */
#define TG_APPROVAL_NAME_MAX 128                   /* surface and rule ids */
#define TG_APPROVAL_COMMENT_MAX 1024               /* a review's comment (the record's only) */
#define TG_APPROVAL_TTL_MAX_S (31LL * 86400)       /* ttl_s and consume_within_s bound */
/* The document's bound, within TG_LEDGER_META_MAX's meta (whose other members took at most
 * 1024 bytes before approvals). 8192 was short: sixteen "@group" entries of 127 '"' each
 * escape to 4 KiB alone (test_approval builds the biggest document: about 9.2 KiB). */
#define TG_APPROVAL_DOC_MAX 12288

typedef enum tg_approval_status {
    TG_APPROVAL_PENDING = 0,
    TG_APPROVAL_APPROVED,
    TG_APPROVAL_DENIED,
    TG_APPROVAL_EXPIRED,
    TG_APPROVAL_CONSUMED,
    TG_APPROVAL__COUNT
} tg_approval_status_t;

/* An escalate rule's "approval" settings (policy.h tg_policy_rule_approval), owned by the
 * compiled policy. Defaults (docs/POLICY.md): required 1, ttl_s 3600, consume_within_s 900. */
typedef struct tg_approval_spec {
    uint32_t required;    /* 1..TG_APPROVAL_MAX_REQUIRED, <= n_approvers unless a group */
    uint32_t n_approvers; /* 1..TG_APPROVAL_MAX_APPROVERS */
    const char *approvers[TG_APPROVAL_MAX_APPROVERS]; /* "@group" or a subject, NUL-terminated */
    int64_t ttl_s;                                    /* 1..TG_APPROVAL_TTL_MAX_S */
    int64_t consume_within_s;                         /* 1..TG_APPROVAL_TTL_MAX_S */
} tg_approval_spec_t;

typedef struct tg_approval_review {
    char subject[TG_GUARD_SUBJECT_MAX + 1];
    uint32_t entry; /* index into approvers of the entry that admitted the subject */
    bool approve;   /* false: deny */
    int64_t at_ms;
} tg_approval_review_t;

/* One approval, by value (about 5 KiB): every string NUL-terminated and bounded. */
typedef struct tg_approval {
    char id[TG_APPROVAL_ID_LEN + 1];
    char tenant[TG_GUARD_TENANT_NAME_MAX + 1];
    char escalation_id[38]; /* "exec_" + 32 hex */
    char surface[TG_APPROVAL_NAME_MAX + 1];
    char rule[TG_APPROVAL_NAME_MAX + 1];
    char reason[65]; /* a reason code (kernel.h TG_REASON_MAX) */
    uint8_t request_hash[32];
    uint32_t version; /* 1.. */
    tg_approval_status_t status;
    uint32_t required;
    uint32_t n_approvers;
    char approvers[TG_APPROVAL_MAX_APPROVERS][TG_APPROVAL_ENTRY_MAX + 1];
    int64_t created_ms, expires_ms, consume_within_ms;
    int64_t resolved_ms;  /* 0 while pending */
    int64_t consumed_ms;  /* 0 until consumed */
    char consumed_by[38]; /* "" until consumed */
    uint32_t n_reviews;
    tg_approval_review_t reviews[TG_APPROVAL_MAX_REVIEWS];
} tg_approval_t;

/* "pending", "approved", "denied", "expired", "consumed"; "?" out of range. Static. */
const char *tg_approval_status_name(tg_approval_status_t s);

/* The status named exactly s[0..n). False (and *out untouched) otherwise. */
bool tg_approval_status_parse(tg_approval_status_t *out, const char *s, size_t n);

/* A fresh id: "appr_" + 32 lowercase hex from the system's random source, NUL-terminated.
 * Errors: TG_ERR_CRYPTO (no randomness). */
tg_err_t tg_approval_new_id(char out[TG_APPROVAL_ID_LEN + 1]) TG_MUST_USE;

/* True when s[0..n) is shaped like an id ("appr_" + 32 lowercase hex). Pure. */
bool tg_approval_id_valid(const char *s, size_t n);

/* The escalation (version 1, pending, no reviews): approvers, required and the times come
 * from spec, created_ms = now_ms, expires_ms = now_ms + ttl. Errors: TG_ERR_INVALID_ARG (a
 * NULL argument, a string over its bound, an id or escalation id of the wrong shape, a spec
 * out of its ranges). *a is zeroed on error. */
tg_err_t tg_approval_init(tg_approval_t *a, const char *id, const char *tenant,
                          const uint8_t request_hash[32], const char *escalation_id,
                          const char *surface, const char *rule, const char *reason,
                          const tg_approval_spec_t *spec, int64_t now_ms) TG_MUST_USE;

/* The status at now_ms: the stored one, except pending at or past expires_ms and approved at
 * or past resolved_ms + consume_within_ms, which are TG_APPROVAL_EXPIRED (the instant itself
 * is the first one refused, as a token's exp is). */
tg_approval_status_t tg_approval_status_at(const tg_approval_t *a, int64_t now_ms);

/* Whether the principal (subject, and the groups it belongs to, each without '@') is one of
 * the approval's approvers: an entry equal to the subject, or "@g" for a group g it has.
 * TG_OK with *entry = the first such entry's index; TG_ERR_NOT_APPROVER. */
tg_err_t tg_approval_match(const tg_approval_t *a, const char *subject, const char *const *groups,
                           size_t n_groups, uint32_t *entry) TG_MUST_USE;

/* A review: *next = cur with the review appended, version + 1; the status becomes approved
 * when this is the required-th distinct approval, denied on a deny (resolved_ms = now_ms).
 * The review's time is now_ms, or the previous step's time when the clock reads earlier (a
 * history never goes backwards; the audit replays the same rule).
 * Checked in this order: TG_ERR_INVALID_ARG (entry out of range, subject over its bound or
 * not a subject's shape, a subject entry naming another subject, cur not a valid state);
 * TG_ERR_REQUEST_HASH_MISMATCH (request_hash is not the approval's); TG_ERR_ALREADY_REVIEWED
 * (the subject has reviewed it before); TG_ERR_APPROVAL_CLOSED (tg_approval_status_at is not
 * pending). next may alias cur only on TG_OK's path: it is written only on success. */
tg_err_t tg_approval_review(tg_approval_t *next, const tg_approval_t *cur, const char *subject,
                            uint32_t entry, bool approve, const uint8_t request_hash[32],
                            int64_t now_ms) TG_MUST_USE;

/* The resume's consumption: *next = cur consumed at now_ms by the PERMIT exec_id ("exec_" +
 * 32 hex), version + 1 (consumed_ms clamped to resolved_ms as a review's time is).
 * In this order: TG_ERR_INVALID_ARG (exec_id's shape); TG_ERR_APPROVAL_CONSUMED (already consumed);
 * TG_ERR_APPROVAL_CLOSED (tg_approval_status_at is anything but approved); TG_ERR_INVALID_ARG. */
tg_err_t tg_approval_consume(tg_approval_t *next, const tg_approval_t *cur, const char *exec_id,
                             int64_t now_ms) TG_MUST_USE;

/* The clock's step: when tg_approval_status_at(cur, now_ms) is expired but the stored status
 * is pending or approved, *next = cur expired (resolved_ms = the instant it expired:
 * expires_ms, or resolved_ms + consume_within_ms), version + 1, TG_OK. TG_ERR_NOT_FOUND
 * when there is nothing to expire. */
tg_err_t tg_approval_expire(tg_approval_t *next, const tg_approval_t *cur,
                            int64_t now_ms) TG_MUST_USE;

/* The document above, appended to out. Errors: TG_ERR_INVALID_ARG (a field out of its
 * bounds), tg_buf errors. */
tg_err_t tg_approval_write(tg_buf_t *out, const tg_approval_t *a) TG_MUST_USE;

/* Parses a document into *a. TG_ERR_LEDGER_CORRUPT unless it is exactly what
 * tg_approval_write writes for some tg_approval_t (members, types, bounds, order of
 * reviews, counts consistent with the status); *a zeroed then. */
tg_err_t tg_approval_parse(tg_approval_t *a, const void *doc, size_t len) TG_MUST_USE;

/* The approval as the API shows it (SPEC §11.2, docs/API.md "Approvals"), appended to out:
 * {"approval_id","status" (tg_approval_status_at now_ms),"required","approvals":[{"subject",
 * "decision":"approve"|"deny","at" (RFC 3339 ms)}],"expires_at","created_at","request_hash",
 * "surface","rule","reason_code","escalation_execution_id","approvers", and when set
 * "resolved_at","consumed_at","consumed_by"}. Errors: tg_buf errors, TG_ERR_INVALID_ARG. */
tg_err_t tg_approval_api_json(tg_buf_t *out, const tg_approval_t *a, int64_t now_ms) TG_MUST_USE;

/* The receipt member "approvals" of a consuming PERMIT (SPEC §11.2): the canonical JSON
 * array [{"at" (RFC 3339 ms),"decision":"approve","subject"}] of cur's approving reviews, in
 * review order, appended to out. Errors: tg_buf errors, TG_ERR_INVALID_ARG. */
tg_err_t tg_approval_receipt_approvals(tg_buf_t *out, const tg_approval_t *a) TG_MUST_USE;

/* ---- the offline audit (trigguard ledger verify; SPEC §11.2) -----------------------------
 *
 * Fed every record of a ledger in order (file or PostgreSQL), it checks each approval's
 * steps and reports every problem through the callback, with the record's seq:
 * - a step's version is the previous one + 1 (1 only on an ESCALATE receipt whose approvalId
 *   and requestHash are the document's), and the new state is exactly the transition the
 *   record states (a review record's subject, entry, decision, requestHash and time through
 *   tg_approval_review; an expire record through tg_approval_expire; a PERMIT with
 *   approvalId through tg_approval_consume) applied to the previous state;
 * - a review's requestHash is the approval's, its time is before expiry, its subject has not
 *   reviewed the approval before and is named by (or, for "@group", was admitted through)
 *   the entry it cites;
 * - every PERMIT receipt that carries an approvalId consumed an approval that had
 *   `required` distinct approving subjects, bound to the PERMIT's requestHash, all within
 *   the TTL, none denying, and its receipt's "approvals" list is exactly those reviews;
 * - an approval is consumed at most once.
 * Group membership is not in the ledger: a review admitted through "@group" is checked for
 * the entry's shape only. */
typedef struct tg_approval_audit tg_approval_audit_t;

typedef struct tg_approval_audit_stats {
    uint64_t approvals; /* escalations seen */
    uint64_t reviews;
    uint64_t consumed;
    uint64_t expired;
    uint64_t problems;
} tg_approval_audit_stats_t;

/* Called once per problem: seq of the record, the approval id ("" when unknown) and one
 * sentence. */
typedef void (*tg_approval_audit_fn)(void *ud, uint64_t seq, const char *approval_id,
                                     const char *what);

/* An audit that remembers at most max_approvals approvals (0 = 1,000,000); more is
 * reported as a problem, never silently skipped. Errors: TG_ERR_INVALID_ARG, TG_ERR_NOMEM. */
tg_err_t tg_approval_audit_new(tg_approval_audit_t **out, size_t max_approvals,
                               tg_approval_audit_fn report, void *ud) TG_MUST_USE;

/* One record: its seq, type (ledger.h TG_LEDGER_TYPE_*), meta and payload, as stored.
 * Records that touch no approval are passed over. Returns TG_OK also when the record has a
 * problem (reported); TG_ERR_NOMEM, TG_ERR_INVALID_ARG. */
tg_err_t tg_approval_audit_record(tg_approval_audit_t *au, uint64_t seq, uint8_t type,
                                  const void *meta, size_t meta_len, const void *payload,
                                  size_t payload_len) TG_MUST_USE;

void tg_approval_audit_stats(const tg_approval_audit_t *au, tg_approval_audit_stats_t *out);

/* NULL-safe. */
void tg_approval_audit_free(tg_approval_audit_t *au);

#endif /* TRIGGUARD_APPROVAL_H */
