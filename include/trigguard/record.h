/* record.h — what the daemon keeps in a ledger record besides the ledger's own framing:
 * the record's meta, the unsigned SILENCE payload, and the reading of both back, which
 * rebuilds a decision's response for an idempotent replay and the daemon's tables at start.
 *
 * ## Why this shape
 * A ledger record (ledger.h) has two opaque sections, meta and payload. The payload is the
 * evidence: the signed receipt (type 1, receipt.h) or the SILENCE decision (type 2, below).
 * The meta is what the daemon needs besides the evidence to act on the record again: the
 * tenant, the idempotency key and nonce it consumed, the request hash and the claim hash
 * (request and principal) the key is bound to, and
 * the status it answered with. Everything a replay sends is rebuilt from these two sections
 * with the same writer the live path used (tg_decision_body_open, policy.h), so a replay is
 * the original response byte for byte, before and after a restart, and the idempotency
 * table keeps only where the record is.
 *
 * ## Meta (canonical JSON, RFC 8785: members in this order, no whitespace; at most
 * ## TG_LEDGER_META_MAX bytes)
 *
 *   member  JSON type  presence  meaning
 *   a       object     optional  the approval this record is a step of, as its state after
 *                                the step (approval.h's document, embedded as an object):
 *                                on an ESCALATE receipt (version 1), a consuming PERMIT, and
 *                                every approval record (type 4). Absent otherwise.
 *   at      integer    always    wall-clock ms of the decision (the receipt's timestamp)
 *   ch      string     optional  the idempotency claim hash the key is bound to: 64 lowercase
 *                                hex (tg_idem_claim_hash: the request hash and the principal);
 *                                absent in records of earlier builds, whose key is bound to rh
 *   k       string     optional  the idempotency key (body member or header), as sent
 *   l       array      optional  the stateful limits a PERMIT reserved (docs/POLICY.md
 *                                "Limits"), each [limit, key, start, window, amount]: the
 *                                limit's name, its key (64 lowercase hex, tg_policy_limit_key),
 *                                the window's start and length in seconds (integers) and the
 *                                amount added (a number); at most TG_RECORD_MAX_LIMITS. The
 *                                replay adds them back at start (file backend). Absent when
 *                                none, and in records of earlier builds.
 *   n       string     optional  the nonce, as sent
 *   rh      string     always    requestHash: 64 lowercase hex (policy.h tg_request_hash)
 *   s       integer    always    the HTTP status the decision was answered with
 *   t       string     always    the tenant
 *
 * ## SILENCE payload (type 2; canonical JSON, unsigned)
 *
 *   action, actorId (when the request had them), decision "SILENCE", detail (what was
 *   missing or invalid, tg_decision_detail; absent in records of earlier builds),
 *   executionId, policyHash, policyVersion, reasonCode, requestHash, surface, tenantId,
 *   timestamp (RFC 3339 UTC, milliseconds), type "silence"
 *
 * ## Redemption payload (type 3; canonical JSON, unsigned)
 *
 *   executionId (the redeemed receipt's), receiptHash (its receiptHash: which receipt,
 *   byte for byte, was redeemed), redeemedAt (RFC 3339 UTC, milliseconds), requestHash
 *   (the receipt's, which the executor's equalled), tenantId, type "redemption"
 *
 *   Its meta is an ordinary meta: at = redeemedAt, n = the redemption's claim
 *   (TG_RECORD_REDEEM_NONCE_PREFIX + executionId: a nonce in a namespace callers cannot
 *   use, so a restart's replay and PostgreSQL's nonce rows make it single use exactly as
 *   they make a nonce single use), rh = the request hash, s = 200, t = the tenant.
 *
 * ## Approval payload (type 4, TG_LEDGER_TYPE_APPROVAL; canonical JSON, unsigned)
 *
 *   approvalId, at (RFC 3339 UTC, milliseconds), comment (review only, when given: at most
 *   TG_APPROVAL_COMMENT_MAX bytes), decision ("approve" | "deny", review only), entry (the
 *   approvers index that admitted the subject, review only), event ("review" | "expire"),
 *   requestHash (review: the hash the approver sent, which must be the approval's; expire:
 *   the approval's), status (the approval's status after the step), subject (review only),
 *   tenantId, type "approval"
 *
 *   Its meta: at, rh = the approval's request hash, s = the HTTP status answered (200; an
 *   expiry 0: no request), t = the tenant, a = the approval's state after the step.
 *
 * All are written by the functions below and read by tg_record_view; nothing else in the
 * tree composes or parses them. Thread safety: every function is reentrant.
 */
#ifndef TRIGGUARD_RECORD_H
#define TRIGGUARD_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/kernel.h"

/* One contribution of a record to a limit's running total (meta "l"). */
#define TG_RECORD_MAX_LIMITS TG_FRAME_MAX_LIMITS
typedef struct tg_record_limit {
    tg_text_t limit; /* the limit's name */
    uint8_t key[32];
    int64_t window_start_s;
    int64_t window_s;
    double amount; /* finite, >= 0 */
} tg_record_limit_t;

/* What a meta may take besides "a": the bound of every meta before approvals. The pipeline
 * keeps a request's key, nonce and limit reservations within it (a 400 otherwise), so a
 * record without an approval is as small as it always was, and an approval's document
 * (at most TG_APPROVAL_DOC_MAX) fits beside it within TG_LEDGER_META_MAX. */
#define TG_RECORD_META_BASE_MAX 1024

/* The meta's members. Views: ptr NULL = absent (k, n only). */
typedef struct tg_record_meta {
    int64_t at_ms;
    tg_text_t key;                   /* k */
    tg_text_t nonce;                 /* n */
    tg_text_t request_hash;          /* rh: 64 lowercase hex */
    tg_text_t claim_hash;            /* ch: 64 lowercase hex; ptr NULL = absent */
    int status;                      /* s */
    tg_text_t tenant;                /* t */
    const tg_record_limit_t *limits; /* l: n_limits of them (0..TG_RECORD_MAX_LIMITS) */
    size_t n_limits;
    const struct tg_approval *approval; /* a: NULL = absent */
} tg_record_meta_t;

/* Appends the meta's canonical JSON. Errors: TG_ERR_INVALID_ARG (NULL argument, a missing
 * member, request_hash not 64 bytes, more than TG_RECORD_MAX_LIMITS limits or an amount
 * that is negative or not finite), TG_ERR_JSON_UTF8 / TG_ERR_JSON_SURROGATE (a key, nonce
 * or tenant that is not valid UTF-8: only a header can carry such bytes), tg_buf errors
 * (TG_ERR_LIMIT when out's cap, normally TG_LEDGER_META_MAX, is reached). */
tg_err_t tg_record_meta_write(tg_buf_t *out, const tg_record_meta_t *m) TG_MUST_USE;

/* The SILENCE payload's members; views, ptr NULL = absent (action, actor only). */
typedef struct tg_record_silence {
    tg_text_t execution_id, tenant, surface, action, actor, reason, request_hash;
    tg_text_t policy_version, policy_hash;
    tg_text_t detail; /* ptr NULL = absent */
    int64_t at_ms;
} tg_record_silence_t;

/* Appends the SILENCE payload's canonical JSON. Errors: TG_ERR_INVALID_ARG, TG_ERR_NOMEM,
 * canon errors (tg_canon_write), tg_buf errors. */
tg_err_t tg_record_silence_write(tg_buf_t *out, const tg_record_silence_t *s) TG_MUST_USE;

/* The redemption claim's nonce: this prefix, then the executionId. Callers' nonces may not
 * begin with TG_RECORD_RESERVED_NONCE_PREFIX (the pipeline refuses them, 400), so no request
 * can consume a redemption's claim, nor a redemption a caller's nonce. */
#define TG_RECORD_RESERVED_NONCE_PREFIX "tg:"
#define TG_RECORD_REDEEM_NONCE_PREFIX "tg:redeem:"
#define TG_RECORD_REDEEM_NONCE_LEN (sizeof TG_RECORD_REDEEM_NONCE_PREFIX - 1 + 37)

/* The redemption payload's members (views; all required). */
typedef struct tg_record_redemption {
    tg_text_t execution_id, tenant, request_hash, receipt_hash;
    int64_t at_ms; /* redeemedAt */
} tg_record_redemption_t;

/* Appends the redemption payload's canonical JSON. Errors: TG_ERR_INVALID_ARG (NULL, a
 * member missing), TG_ERR_NOMEM, canon errors, tg_buf errors. */
tg_err_t tg_record_redemption_write(tg_buf_t *out, const tg_record_redemption_t *r) TG_MUST_USE;

/* The approval payload's members (views; ptr NULL = absent, for the review-only ones). */
typedef struct tg_record_approval_event {
    tg_text_t approval_id, tenant;
    bool review;            /* event "review"; false: "expire" */
    tg_text_t subject;      /* review */
    uint32_t entry;         /* review */
    bool approve;           /* review: decision "approve"; false: "deny" */
    tg_text_t comment;      /* review, optional */
    tg_text_t request_hash; /* 64 lowercase hex */
    tg_text_t status;       /* the approval's status after the step (approval.h names) */
    int64_t at_ms;
} tg_record_approval_event_t;

/* Appends the approval payload's canonical JSON. Errors: TG_ERR_INVALID_ARG (a NULL or a
 * missing member, a bound exceeded), TG_ERR_NOMEM, canon errors, tg_buf errors. */
tg_err_t tg_record_approval_event_write(tg_buf_t *out,
                                        const tg_record_approval_event_t *e) TG_MUST_USE;

/* A record as this server wrote it, read back: views into two parsed documents, valid until
 * tg_record_view_free. */
typedef struct tg_record_view {
    tg_record_meta_t meta;
    uint8_t request_hash[32]; /* meta.request_hash decoded */
    uint8_t claim_hash[32];   /* meta.claim_hash decoded; request_hash when it is absent */
    const char *decision;     /* the payload's: PERMIT, DENY, SILENCE or ESCALATE; NULL for
                                 a redemption or an approval record (no decision) */
    tg_text_t reason, execution_id, policy_version; /* a redemption: execution_id only */
    tg_text_t detail;     /* SILENCE's detail (ptr NULL when the record has none) */
    bool receipt;         /* the payload is a signed receipt (not SILENCE, not a redemption) */
    bool redemption;      /* the payload is a redemption (type "redemption") */
    bool observe;         /* the receipt carries executionMode (SPEC §11.1): its response is the
                             observe one, whatever the decision (a SILENCE too is signed then) */
    bool approval_record; /* type 4: event below */
    tg_record_approval_event_t event; /* approval_record only */
    tg_text_t approval_id;            /* a receipt's approvalId (ptr NULL = none) */
    bool has_approval;                /* meta "a" present: approval below */
    struct tg_approval *approval;     /* meta "a", parsed (heap; freed with the view) */
    tg_record_limit_t limits[TG_RECORD_MAX_LIMITS]; /* meta.limits points here */
    json_t *meta_doc, *payload_doc;
} tg_record_view_t;

/* Parses meta and payload (the two sections of a ledger record). Errors:
 * TG_ERR_LEDGER_CORRUPT unless both are what the writers above and the receipt writer
 * produce (the members above present, with their types, "l" included when present; *v is
 * then zeroed). A redemption
 * must also carry its claim as the meta's nonce (TG_RECORD_REDEEM_NONCE_PREFIX +
 * executionId). Meta "a" must be an approval document (tg_approval_parse of its canonical
 * text: a state the transitions can make); a receipt with "a" must name the same approval
 * as its approvalId, and an approvalId must be an id's shape; an approval record (type 4)
 * must carry "a", with the payload's approvalId, tenantId and status equal to the state's.
 * Whether a step was a valid transition is not checked here: that is the audit's
 * (approval.h), which reports it precisely. */
tg_err_t tg_record_view(tg_record_view_t *v, const void *meta, size_t meta_len, const void *payload,
                        size_t payload_len) TG_MUST_USE;

/* Releases what tg_record_view parsed. NULL-safe; idempotent. */
void tg_record_view_free(tg_record_view_t *v);

/* A record's transparency-log entry (SPEC §12, db.h "the transparency log") from its type and
 * payload: a receipt's receiptHash (the payload's member, 64 hex, decoded), the SHA-256 of the
 * payload for every other type. The one rule, for the file backend's replay (which passes
 * the payload it already parsed as payload_doc), for records stored without their entry
 * (PostgreSQL rows older than schema v5) and for checking stored entries (ledger verify);
 * payload_doc NULL = parse the payload here. Errors: TG_ERR_LEDGER_CORRUPT (a receipt
 * payload that is not JSON or has no valid receiptHash), TG_ERR_INVALID_ARG (NULL). */
tg_err_t tg_record_log_entry(uint8_t entry[32], uint8_t type, const void *payload,
                             size_t payload_len, const json_t *payload_doc) TG_MUST_USE;

/* The decision response a record answered with (SPEC §3.2, without a ?explain trace, which
 * is never kept): appended to out, complete with its closing brace. payload is the record's
 * payload text (embedded as the receipt for a signed record). A record with meta "a" (an
 * ESCALATE, or the PERMIT that consumed the approval) answers with approval_id and the
 * approval's tg_approval_api_json at the record's own at_ms, as the live path wrote it.
 * Errors: as tg_decision_body_open; TG_ERR_INVALID_ARG for a redemption or an approval
 * record (they answered no decision). */
tg_err_t tg_record_response(tg_buf_t *out, const tg_record_view_t *v, const void *payload,
                            size_t payload_len) TG_MUST_USE;

/* The hash an idempotency claim is bound to (SPEC 1.1, docs/API.md "Idempotency"): SHA-256
 * over a domain tag, the request hash (32 raw bytes), then the principal's issuer and subject,
 * each length-prefixed (issuer NULL = none, distinct from empty). A replay must match it, so
 * the same key and body from another principal of the tenant is a conflict, never the first
 * principal's receipt; the receipt's requestHash stays SPEC §3.3's request hash. Stored as
 * the meta's "ch" and, on PostgreSQL, as the claim row's request_hash column. Pure. */
void tg_record_claim_hash(uint8_t out[32], const uint8_t request_hash[32], const char *issuer,
                          size_t issuer_len, const char *subject, size_t subject_len);

#endif /* TRIGGUARD_RECORD_H */
