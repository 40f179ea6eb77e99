/* err.h — the one error enum of trigguard, plus a small diagnostic buffer.
 *
 * Contract: every fallible function returns tg_err_t (TG_OK == 0). Decisions
 * (PERMIT/DENY/SILENCE) never travel in this channel. Functions that can say
 * *where* something failed also take an optional tg_diag_t* (may be NULL) and
 * write one human sentence into it; the sentence never contains key material.
 * Thread safety: everything here is reentrant; tg_strerror returns static text.
 */
#ifndef TRIGGUARD_ERR_H
#define TRIGGUARD_ERR_H

#include <stddef.h>

#if defined(__GNUC__) || defined(__clang__)
#define TG_MUST_USE __attribute__((warn_unused_result))
#define TG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TG_MUST_USE
#define TG_PRINTF(a, b)
#endif

/* X-macro so the enum, tg_strerror and tg_err_name stay in one place.
 * New values go at the end of their group; numeric values are not a stable ABI. */
#define TG_ERR_LIST(X)                                                                             \
    X(TG_OK, "ok")                                                                                 \
    /* generic */                                                                                  \
    X(TG_ERR_NOMEM, "out of memory")                                                               \
    X(TG_ERR_INVALID_ARG, "invalid argument")                                                      \
    X(TG_ERR_LIMIT, "a configured limit was exceeded")                                             \
    X(TG_ERR_BUFFER_TOO_SMALL, "output buffer too small")                                          \
    X(TG_ERR_IO, "input/output error")                                                             \
    X(TG_ERR_NOT_FOUND, "not found")                                                               \
    X(TG_ERR_EXISTS, "already exists")                                                             \
    X(TG_ERR_INTERNAL, "internal error")                                                           \
    /* JSON and canonicalization */                                                                \
    X(TG_ERR_JSON_SYNTAX, "invalid JSON")                                                          \
    X(TG_ERR_JSON_DUPLICATE_KEY, "duplicate member name")                                          \
    X(TG_ERR_JSON_UTF8, "invalid UTF-8")                                                           \
    X(TG_ERR_JSON_SURROGATE, "lone surrogate")                                                     \
    X(TG_ERR_JSON_NONFINITE, "number is NaN or infinite")                                          \
    X(TG_ERR_JSON_DEPTH, "nesting too deep")                                                       \
    X(TG_ERR_JSON_TOO_LARGE, "JSON text longer than its limit")                                    \
    X(TG_ERR_JSON_STRING_LONG, "JSON string longer than its limit")                                \
    X(TG_ERR_JSON_NAME_LONG, "JSON member name longer than its limit")                             \
    X(TG_ERR_JSON_MEMBERS, "JSON object with more members than its limit")                         \
    X(TG_ERR_JSON_TYPE, "unexpected JSON type")                                                    \
    /* keys and crypto */                                                                          \
    X(TG_ERR_KEY_FORMAT, "malformed key")                                                          \
    X(TG_ERR_KEY_PERMISSIONS, "private key file is readable by group or others")                   \
    X(TG_ERR_KEY_UNKNOWN, "unknown key id")                                                        \
    X(TG_ERR_NO_KEY, "no signing key loaded")                                                      \
    X(TG_ERR_CRYPTO, "cryptographic operation failed")                                             \
    /* receipts */                                                                                 \
    X(TG_ERR_RECEIPT_SHAPE, "receipt is malformed")                                                \
    X(TG_ERR_RECEIPT_SIGNATURE, "receipt signature does not verify")                               \
    X(TG_ERR_RECEIPT_HASH, "receipt hash does not match its contents")                             \
    X(TG_ERR_RECEIPT_EXPIRED, "receipt has expired")                                               \
    /* policy and requests */                                                                      \
    X(TG_ERR_POLICY_INVALID, "invalid policy bundle")                                              \
    X(TG_ERR_POLICY_LINT, "policy bundle fails its strict lint")                                   \
    X(TG_ERR_UNKNOWN_SURFACE, "unknown surface")                                                   \
    X(TG_ERR_REQUEST_INVALID, "invalid request")                                                   \
    /* ledger, store, guard, config */                                                             \
    X(TG_ERR_LEDGER_CORRUPT, "ledger is corrupt")                                                  \
    X(TG_ERR_LEDGER_TORN, "ledger ends in a torn entry")                                           \
    X(TG_ERR_LEDGER_UNHEALTHY, "ledger cannot make entries durable")                               \
    X(TG_ERR_CONFLICT, "idempotency conflict")                                                     \
    X(TG_ERR_IN_FLIGHT, "request with this idempotency key is still in flight")                    \
    X(TG_ERR_REPLAY, "nonce already used")                                                         \
    X(TG_ERR_UNAUTHORIZED, "unauthorized")                                                         \
    X(TG_ERR_RATE_LIMITED, "rate limited")                                                         \
    X(TG_ERR_OVERLOADED, "overloaded")                                                             \
    X(TG_ERR_CONFIG, "invalid configuration")                                                      \
    X(TG_ERR_SCHEMA_VERSION, "database schema is newer than this binary knows")                    \
    X(TG_ERR_STORE_UNAVAILABLE, "the shared database cannot be reached or did not commit")         \
    X(TG_ERR_TENANT_NOT_ALLOWED, "the caller's tenant is not one this server serves")              \
    X(TG_ERR_IDP_UNAVAILABLE, "the identity provider's keys are not available")                    \
    /* transparency log (tlog.h, note.h) */                                                        \
    X(TG_ERR_TLOG_PROOF, "Merkle proof does not verify")                                           \
    X(TG_ERR_TLOG_PATH, "not a canonical tile path")                                               \
    X(TG_ERR_NOTE_MALFORMED, "malformed signed note")                                              \
    X(TG_ERR_NOTE_SIGNATURE, "a signed note's signature by a known key does not verify")           \
    X(TG_ERR_NOTE_UNVERIFIED, "signed note has no signature by a known key")                       \
    X(TG_ERR_CHECKPOINT_MALFORMED, "malformed checkpoint")                                         \
    /* stateful limits (db.h) */                                                                   \
    X(TG_ERR_LIMIT_EXCEEDED, "the amount would take a limit's running total over its max")         \
    /* approvals (approval.h, SPEC §11.2) */                                                      \
    X(TG_ERR_NOT_APPROVER, "the subject is not one of the approvers the rule lists")               \
    X(TG_ERR_ALREADY_REVIEWED, "the subject has already reviewed this approval")                   \
    X(TG_ERR_APPROVAL_CLOSED, "the approval is resolved, expired or consumed")                     \
    X(TG_ERR_APPROVAL_CONSUMED, "the approval has already been used by a PERMIT")                  \
    X(TG_ERR_REQUEST_HASH_MISMATCH, "the request hash is not the escalated request's")             \
    /* the transparency log in the daemon (db.h "transparency log", SPEC §12) */                  \
    X(TG_ERR_LOG_DISABLED, "the transparency log is not enabled (no log key)")                     \
    X(TG_ERR_LOG_PENDING, "no signed checkpoint covers the record yet")                            \
    X(TG_ERR_LOG_INCONSISTENT, "the records do not reproduce the log's signed checkpoint")

typedef enum tg_err {
#define TG_ERR_ENUM_(name, text) name,
    TG_ERR_LIST(TG_ERR_ENUM_)
#undef TG_ERR_ENUM_
        TG_ERR__COUNT
} tg_err_t;

/* Discards a TG_MUST_USE result on purpose (gcc ignores a plain (void) cast). Use
 * only where the failure has no better handling, and say why next to it. */
#define TG_IGNORE(expr)                                                                            \
    do {                                                                                           \
        tg_err_t tg_ignored_ = (expr);                                                             \
        (void)tg_ignored_;                                                                         \
    } while (0)

/* rc = (expr); on an error, goto done. For functions with one cleanup label: they declare
 * `tg_err_t rc` and a `done:` label that releases what they hold and returns rc. */
#define TG_TRY(expr)                                                                               \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc) {                                                                                  \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/* Static English text for an error; never NULL (unknown values give "unknown error"). */
const char *tg_strerror(tg_err_t e);

/* The enum identifier as text ("TG_ERR_NOMEM"); never NULL. For logs and tests. */
const char *tg_err_name(tg_err_t e);

/* Optional diagnostic: one sentence saying what failed and where. */
#define TG_DIAG_MAX 256
typedef struct tg_diag {
    char msg[TG_DIAG_MAX];
} tg_diag_t;

/* Formats into d->msg (truncating); NULL d is a no-op. Returns e so callers can
 * write `return tg_diag_set(d, TG_ERR_X, "...")`. */
tg_err_t tg_diag_set(tg_diag_t *d, tg_err_t e, const char *fmt, ...) TG_PRINTF(3, 4);

#endif /* TRIGGUARD_ERR_H */
