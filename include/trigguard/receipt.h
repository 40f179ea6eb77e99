/* receipt.h — build, hash, sign and verify receipts (SPEC §5).
 *
 * A receipt is one JSON object whose members are strings, but for `principal` (an object of
 * strings, SPEC 1.1). Its canonical form
 * (RFC 8785) sorts the names by UTF-16 code units; all names are ASCII, so the order is
 * fixed. `*` = optional (absent, never null); `s` = member of the per-receipt signed form
 * only, `b` = of the batch-signed form only, `sb` = of both (SPEC §12; see "Two kinds" below):
 *
 *   #  name                   format                                   hashed
 *   1  action                 text (may be empty)                       yes
 *   2  actorId                text (may be empty)                       yes
 *  2a  approvalId           * "appr_" + 32 lowercase hex (v1.1, §11.2)  yes
 *  2b  approvals            * [{"at": time,"decision":"approve",        yes
 *                             "subject": id}] (a consuming PERMIT)
 *   3  authorityId            text, non-empty                           yes
 *   4  authorityKeyId     s   key id [A-Za-z0-9._:-]{1,64}              no
 *   5  authoritySignature s   base64 (padded) of 64 bytes = 88 chars    no
 *   6  decision               "PERMIT" | "DENY" | "ESCALATE" |          yes
 *                             "SILENCE" (observe only)
 *   7  engineVersion          text, non-empty                           yes
 *   8  executionContextHash * 64 lowercase hex                          yes
 *   9  executionId            "exec_" + 32 lowercase hex                yes
 *  9a  executionMode        * "observe" (v1.1, SPEC §11.1)              yes
 *  10  expiresAt              YYYY-MM-DDTHH:MM:SS.mmmZ, >= timestamp    yes
 *  11  policyHash             64 lowercase hex                          yes
 *  12  policyVersion          text, non-empty                           yes
 *  13  prevReceiptHash      * text, non-empty (as given)                yes
 *  14  principal            * {"issuer"*: id, "subject": id} (v1.1)     yes
 *  15  protocolFingerprint    64 lowercase hex                          yes
 *  16  protocolVersion        "trigguard/v1"                            yes
 *  17  reasonCode             text, non-empty                           yes
 *  18  receiptHash        sb  64 lowercase hex                          no
 *  19  requestHash            64 lowercase hex                          yes
 *  20  subjectDigest        * text, non-empty (as given)                yes
 *  21  surface                text, non-empty                           yes
 *  22  tenantId               text, non-empty                           yes
 *  23  timestamp              YYYY-MM-DDTHH:MM:SS.mmmZ                  yes
 *  24  transparency       b   {"checkpoint","inclusionProof",           no
 *                             "leafIndex","logKeyId","logOrigin",
 *                             "treeSize"} (below)
 *
 * Two kinds (SPEC §12). A per-receipt signed receipt carries authorityKeyId,
 * authoritySignature and receiptHash (v1, byte for byte). A batch-signed receipt carries
 * receiptHash and transparency, and neither authority member: it is authentic because its
 * receiptHash is a leaf of the transparency log under a checkpoint signed by the log's key,
 * one signature for a whole group commit. receiptHash is the same hash in both kinds (the
 * non-hashed members are left out alike), so the same fields hash the same. The ledger
 * stores a batch receipt in its hashed form (tg_receipt_write_hashed: receiptHash, no
 * transparency); the transparency member is added when it is answered
 * (tg_receipt_add_transparency), from the checkpoint that covers it then.
 *
 * transparency, members in canonical order (all required, nothing else):
 *   checkpoint      the C2SP signed note (note.h) of the checkpoint the proof is against:
 *                   text, 1..TG_NOTE_MAX_BYTES bytes
 *   inclusionProof  [padded base64 of 32 bytes, ...]: RFC 9162 PATH(leafIndex, treeSize),
 *                   0..TG_TLOG_MAX_PROOF hashes (tlog.h's order)
 *   leafIndex       integer, 0..2^53-1 (a JSON-safe integer)
 *   logKeyId        the log key's C2SP key id: 8 lowercase hex
 *   logOrigin       the log's origin = its key's name (note.h's name rules)
 *   treeSize        integer, 1..2^53-1: the checkpoint's size
 * The leaf is tg_tlog_leaf_hash(the 32 raw bytes of receiptHash) (SPEC §12: a receipt's log
 * entry is its receiptHash).
 *
 * principal names who asked, verified by the daemon (never taken from the request body):
 * the OIDC ID token's `iss` and `sub`, or a tokens-file principal's explicit `subject`
 * (no issuer). It is absent for principals with a derived subject, so receipts of such
 * tokens stay v1 receipts byte for byte. "id" is text of 1..TG_RECEIPT_PRINCIPAL_MAX bytes;
 * the object has exactly these members, issuer first when present (canonical order).
 *
 * executionMode "observe" marks a receipt of observe (shadow) mode: its decision is the
 * policy's true one, and it never authorizes anything (SPEC §11.1); only such a receipt
 * may state decision "SILENCE" (an enforce-mode SILENCE is never signed).
 *
 * ESCALATE (SPEC §11.2): decision "ESCALATE" carries approvalId (the approval it opened;
 * absent only in observe mode) and never authorizes. A PERMIT that consumed an approval
 * carries approvalId and approvals (1..TG_APPROVAL_MAX_REQUIRED entries, each exactly
 * {at, decision "approve", subject}, in review order); approvals appears only with
 * approvalId on a PERMIT. Receipts without them are v1/v1.1 receipts byte for byte.
 * Checked on both paths: approvalId is an approval id's shape (approval.h); approvals is an
 * array of 1..16 entries with a receipt time, a subject's shape (guard.h
 * tg_guard_subject_valid), distinct subjects and times never decreasing, given to the
 * builder in its canonical form; neither member goes with executionMode observe (observe
 * mode opens and consumes no approval). A response's "approval_id", when present, must be
 * its receipt's approvalId.
 *
 * "text" is valid UTF-8 of at most TG_RECEIPT_TEXT_MAX bytes.
 * receiptHash  = SHA-256(canonical JSON of the members marked "hashed" that are present).
 * authoritySignature = base64(Ed25519(the 32 raw bytes of receiptHash)).
 * The signed receipt is emitted in canonical form too (all names sorted as above).
 *
 * Verification order (SPEC §5): shape -> known key id (or a trust anchor whose signature
 * holds) -> signature over the stated hash -> recomputed hash equals the stated one ->
 * expiresAt not passed. A batch-signed receipt (SPEC §12) takes the same steps with the log
 * in place of the signature: shape (transparency included) -> the ring's log key named by
 * logOrigin and logKeyId (TG_ERR_KEY_UNKNOWN) -> the checkpoint note verifies with it
 * (TG_ERR_NOTE_MALFORMED, TG_ERR_NOTE_SIGNATURE, TG_ERR_NOTE_UNVERIFIED; its text
 * TG_ERR_CHECKPOINT_MALFORMED) -> the checkpoint's origin is logOrigin and its size
 * treeSize, and inclusionProof proves the leaf of the stated receiptHash at leafIndex under
 * the checkpoint's root (TG_ERR_TLOG_PROOF) -> recomputed hash equals the stated one
 * (TG_ERR_RECEIPT_HASH) -> expiresAt. So TG_ERR_RECEIPT_HASH means in both kinds that the
 * stated hash is authentic and the fields were changed. The first failure wins.
 * TG_ERR_RECEIPT_EXPIRED is only returned for a receipt that passed every other check: it is
 * authentic but no longer authorizes (callers verifying history, e.g. the ledger, may treat
 * it as authentic).
 *
 * Thread safety: every function is reentrant; a shared read-only key ring and key may be
 * used from any number of threads at once. libsodium must be initialised (sodium_init).
 */
#ifndef TRIGGUARD_RECEIPT_H
#define TRIGGUARD_RECEIPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/buf.h"
#include "trigguard/clock.h"
#include "trigguard/err.h"
#include "trigguard/keys.h"
#include "trigguard/note.h"
#include "trigguard/tlog.h"

#define TG_RECEIPT_TEXT_MAX 4096
#define TG_RECEIPT_PRINCIPAL_MAX 1024 /* bytes of principal.issuer and of principal.subject */
/* Largest receipt text the text verifier accepts. */
#define TG_RECEIPT_MAX_BYTES ((size_t)64 * 1024)
#define TG_RECEIPT_EXEC_ID_LEN 37 /* "exec_" + 32 hex */
#define TG_RECEIPT_SIG_B64_LEN 88 /* padded base64 of a TG_KEY_SIG_LEN-byte signature */
_Static_assert(TG_RECEIPT_EXEC_ID_LEN == sizeof "exec_" - 1 + 32, "exec_ + 32 hex characters");
_Static_assert(TG_RECEIPT_SIG_B64_LEN == 4 * ((TG_KEY_SIG_LEN + 2) / 3),
               "padded base64 of an Ed25519 signature");
/* Default receipt lifetime (SPEC §5, --receipt-ttl). */
#define TG_RECEIPT_TTL_MS_DEFAULT INT64_C(600000)

/* A string that travels with its length. ptr NULL = absent (optional fields only). */
typedef struct tg_receipt_str {
    const char *ptr;
    size_t len;
} tg_receipt_str_t;

/* Builds a tg_receipt_str_t from a NUL-terminated string (NULL stays absent). */
#define TG_RSTR(s) ((tg_receipt_str_t){(s), (s) != NULL ? strlen(s) : 0})

/* The hashed fields of a receipt (all borrowed; the builder copies what it writes). */
typedef struct tg_receipt_fields {
    tg_receipt_str_t protocol_version; /* ptr NULL = TG_PROTOCOL_VERSION */
    tg_receipt_str_t execution_id;     /* "exec_" + 32 hex */
    tg_receipt_str_t execution_mode;   /* optional: "observe" (SPEC §11.1); absent = enforce */
    tg_receipt_str_t authority_id;     /* --authority-id */
    tg_receipt_str_t tenant_id;
    tg_receipt_str_t surface;
    tg_receipt_str_t action;   /* "" when the request had none */
    tg_receipt_str_t actor_id; /* "" when the request had none */
    tg_receipt_str_t decision; /* "PERMIT" or "DENY" */
    tg_receipt_str_t reason_code;
    tg_receipt_str_t request_hash;           /* 64 lowercase hex */
    tg_receipt_str_t execution_context_hash; /* optional, 64 lowercase hex */
    tg_receipt_str_t subject_digest;         /* optional */
    tg_receipt_str_t prev_receipt_hash;      /* optional */
    tg_receipt_str_t policy_version;
    tg_receipt_str_t policy_hash;          /* 64 lowercase hex */
    tg_receipt_str_t protocol_fingerprint; /* 64 lowercase hex */
    tg_receipt_str_t engine_version;       /* ptr NULL = TG_ENGINE_VERSION */
    int64_t timestamp_ms;                  /* Unix ms */
    int64_t expires_at_ms;                 /* Unix ms, >= timestamp_ms */
    /* The principal member: present when principal_subject.ptr is not NULL; the issuer
     * (optional) only with a subject. */
    tg_receipt_str_t principal_subject;
    tg_receipt_str_t principal_issuer;
    /* SPEC §11.2: approval_id (ptr NULL = absent); approvals: the canonical JSON array
     * (approval.h tg_approval_receipt_approvals), embedded as is (ptr NULL = absent). */
    tg_receipt_str_t approval_id;
    tg_receipt_str_t approvals;
} tg_receipt_fields_t;

/* What the signer reports about the receipt it appended. */
typedef struct tg_receipt_signed {
    uint8_t hash[32];  /* receiptHash, raw */
    char hash_hex[65]; /* receiptHash, hex */
    size_t offset;     /* where the signed receipt JSON starts in the output buffer */
    size_t length;     /* its length in bytes */
} tg_receipt_signed_t;

/* Hot path: appends the complete signed receipt (canonical JSON) to `out` — whatever out
 * already holds (e.g. the start of a response) is kept. Validates every field format
 * first (fail closed: nothing is signed that the verifier would reject as malformed).
 * No jansson, no allocation besides growing `out`. info may be NULL.
 * Errors: TG_ERR_INVALID_ARG (a field missing or malformed; diag names it), TG_ERR_NO_KEY
 * (key has no secret), TG_ERR_CRYPTO, tg_buf errors. On error out->len is restored. */
tg_err_t tg_receipt_sign_fields(tg_buf_t *out, tg_receipt_signed_t *info, const tg_key_t *key,
                                const tg_receipt_fields_t *fields, tg_diag_t *diag) TG_MUST_USE;

/* Appends only the canonical JSON of the hashed members (what receiptHash covers).
 * Same validation and errors as tg_receipt_sign_fields (without the key ones). */
tg_err_t tg_receipt_write_unsigned(tg_buf_t *out, const tg_receipt_fields_t *fields,
                                   tg_diag_t *diag) TG_MUST_USE;

/* The batch-signed receipt's hashed form (SPEC §12): the canonical hashed members with
 * receiptHash in its place, and neither the authority members nor transparency. What the
 * ledger stores for a batch receipt (its log entry is info->hash), completed by
 * tg_receipt_add_transparency when it is answered. info (may be NULL) as for
 * tg_receipt_sign_fields. Same validation and errors as tg_receipt_write_unsigned: no key,
 * no signature. On error out->len is restored. */
tg_err_t tg_receipt_write_hashed(tg_buf_t *out, tg_receipt_signed_t *info,
                                 const tg_receipt_fields_t *fields, tg_diag_t *diag) TG_MUST_USE;

/* The largest safe JSON integer (2^53 - 1): leafIndex and treeSize stay within it, since a
 * JSON number is a double to every verifier (canon.h). */
#define TG_RECEIPT_MAX_LOG_INT ((UINT64_C(1) << 53) - 1)

/* A batch receipt's transparency member, borrowed. */
typedef struct tg_receipt_transparency {
    const char *checkpoint; /* the signed note text (note.h), checkpoint_len bytes */
    size_t checkpoint_len;
    const tg_tlog_hash_t *proof; /* PATH(leaf_index, tree_size); may be NULL when proof_len 0 */
    size_t proof_len;
    uint64_t leaf_index;
    uint64_t tree_size;
    uint32_t log_key_id;    /* the log key's id (note.h tg_note_key_id) */
    const char *log_origin; /* the log's origin, the key's name; log_origin_len bytes */
    size_t log_origin_len;
} tg_receipt_transparency_t;

/* Appends the member text `,"transparency":{...}` (canonical) to out. Checks what a verifier
 * would refuse as malformed: a checkpoint of 1..TG_NOTE_MAX_BYTES bytes of valid UTF-8, at
 * most TG_TLOG_MAX_PROOF hashes, leaf_index < tree_size ≤ TG_RECEIPT_MAX_LOG_INT, a valid
 * key name as origin. Errors: TG_ERR_INVALID_ARG, tg_buf errors; out->len restored. Pure. */
tg_err_t tg_receipt_transparency_member(tg_buf_t *out,
                                        const tg_receipt_transparency_t *t) TG_MUST_USE;

/* Appends the batch-signed receipt: hashed[0..len), a hashed form as
 * tg_receipt_write_hashed writes it, with the transparency member before its closing brace
 * (its place in canonical order: the last member). Pure. TG_ERR_INVALID_ARG when hashed is
 * not such a form (no final '}', no receiptHash, an authority or transparency member) or t
 * is invalid (tg_receipt_transparency_member); tg_buf errors; out->len restored. */
tg_err_t tg_receipt_add_transparency(tg_buf_t *out, const char *hashed, size_t len,
                                     const tg_receipt_transparency_t *t) TG_MUST_USE;

/* True when text[0..len), a receipt this server wrote (a ledger record's payload), is a
 * batch receipt's hashed form: receiptHash without authoritySignature. A member name can
 * only appear unescaped as a name, so the test is a search. */
bool tg_receipt_text_is_hashed(const char *text, size_t len);

/* Checks a hashed form (a batch receipt as the ledger stores it; `ledger verify`): shape
 * (receiptHash present; authority members and transparency absent) and receiptHash
 * recomputed. Nothing here is authenticated (the log's checkpoint does that). TG_OK,
 * TG_ERR_RECEIPT_SHAPE, TG_ERR_RECEIPT_HASH, TG_ERR_NOMEM / canon errors; diag says why.
 * hash (may be NULL) receives receiptHash's 32 bytes on TG_OK. */
tg_err_t tg_receipt_check_hashed(const json_t *receipt, uint8_t hash[32],
                                 tg_diag_t *diag) TG_MUST_USE;

/* Generic path (`trigguard receipt sign`): body is a JSON object with the hashed members
 * only (shape-checked as in verification; receiptHash, the authority members and transparency
 * must be absent).
 * Computes receiptHash over tg_canon_write(body), signs it and appends the canonical
 * signed receipt. body is only read. info may be NULL.
 * Errors: TG_ERR_RECEIPT_SHAPE (diag names the member), TG_ERR_NO_KEY, TG_ERR_CRYPTO,
 * canon and tg_buf errors. On error out->len is restored. */
tg_err_t tg_receipt_sign_json(tg_buf_t *out, tg_receipt_signed_t *info, const tg_key_t *key,
                              const json_t *body, tg_diag_t *diag) TG_MUST_USE;

/* What a verification found besides its verdict, for the caller's message. */
typedef struct tg_receipt_verdict {
    /* The ring key whose signature holds (set from the signature step on, so also for
     * hash_mismatch and expired); NULL when no key's did. */
    const tg_key_t *key;
    /* key is a trust anchor whose id is not the receipt's authorityKeyId: it was found by
     * its signature, not by the id (keys.h, tg_keyring_entry_t.anchor). */
    bool by_anchor;
    /* The receipt's authorityKeyId and expiresAt once its shape is good, else "". */
    char key_id[TG_KEY_ID_MAX + 1];
    char expires_at[TG_TIME_ISO_LEN + 1];
    /* Once the shape is good: the receipt's decision is PERMIT; it carries executionMode
     * (observe mode, SPEC §11.1: never authorizes). */
    bool permit;
    bool observe;
    bool escalate; /* decision ESCALATE: valid evidence, never authorizes (SPEC §11.2) */
    /* A batch-signed receipt (transparency, SPEC §12), once its shape is good; key is then
     * NULL and key_id "". log_key: the ring's log key whose checkpoint signature holds (set
     * from that step on); then also the checkpoint's tree size and root, and the receipt's
     * leaf index (what `verify --checkpoint` checks against a newer checkpoint). */
    bool batch;
    const tg_note_verifier_t *log_key;
    uint64_t leaf_index;
    uint64_t tree_size;
    uint8_t root[32];
} tg_receipt_verdict_t;

/* Verifies a parsed receipt object of either kind against the ring at wall-clock time
 * now_ms, in the order above. The key is the ring's key named by authorityKeyId; when that
 * is absent or its signature does not hold, each trust anchor of the ring (other than that
 * one) is tried by signature. A batch receipt's key is the ring's log key (keys.h
 * tg_keyring_find_log). Returns TG_OK, TG_ERR_RECEIPT_SHAPE, TG_ERR_KEY_UNKNOWN (no key of
 * that id and no anchor's signature; no such log key), TG_ERR_RECEIPT_SIGNATURE (the named
 * key's signature does not hold, nor an anchor's), the batch kind's TG_ERR_NOTE_*,
 * TG_ERR_CHECKPOINT_MALFORMED and TG_ERR_TLOG_PROOF, TG_ERR_RECEIPT_HASH or
 * TG_ERR_RECEIPT_EXPIRED, with the reason in words in diag; TG_ERR_NOMEM / canon errors
 * only on internal failure.
 * Expired means now_ms >= expiresAt. receipt is only read; it is not unwrapped. */
tg_err_t tg_receipt_verify(const tg_keyring_t *ring, const json_t *receipt, int64_t now_ms,
                           tg_diag_t *diag) TG_MUST_USE;

/* The one rule for what a verifier is given (server, CLI, library: same verdicts). doc is
 *  - a receipt;
 *  - {"receipt": {...}}, as SPEC §3 lets /v1/verify take it;
 *  - a whole /v1/evaluate or /execute response (SPEC §3.2): "receipt" with the members
 *    decision, enforcement, reason_code, execution_id, request_hash and policy_version
 *    (strings), and optionally trace (?explain=1, an object) and the SPEC §11 members
 *    execution_mode, would_decision, would_reason_code, approval_id (strings) and approval
 *    (an object). Its execution_id, request_hash and policy_version must be the receipt's
 *    executionId, requestHash and policyVersion, and, without execution_mode, decision and
 *    reason_code its decision and reasonCode: a response around someone else's receipt
 *    is refused, not vouched for.
 * Anything else beside "receipt", a response member missing or of the wrong type, a
 * "receipt" that is not an object, and an evaluate response without a receipt (SILENCE
 * has none) are TG_ERR_RECEIPT_SHAPE with a message saying which. Then as
 * tg_receipt_verify on the receipt. verdict may be NULL; it is filled as far as the
 * verification got (zeroed first). */
tg_err_t tg_receipt_verify_doc(const tg_keyring_t *ring, const json_t *doc, int64_t now_ms,
                               tg_receipt_verdict_t *verdict, tg_diag_t *diag) TG_MUST_USE;

/* Same for a document's text (at most TG_RECEIPT_MAX_BYTES, strict parse: duplicates, bad
 * UTF-8 etc. rejected). A text that is not JSON returns the TG_ERR_JSON_* / TG_ERR_LIMIT of
 * the parser (callers treat it as "malformed" or as unusable input). verdict may be NULL. */
tg_err_t tg_receipt_verify_text(const tg_keyring_t *ring, const char *text, size_t len,
                                int64_t now_ms, tg_receipt_verdict_t *verdict,
                                tg_diag_t *diag) TG_MUST_USE;

/* SPEC §11.1 "authorizes": true only when the verification returned TG_OK (authentic,
 * unexpired) and the receipt is a PERMIT in enforce mode (no executionMode). v may be NULL
 * (false). Every verifier (HTTP, CLI) answers with this one rule. */
bool tg_receipt_authorizes(tg_err_t rc, const tg_receipt_verdict_t *v);

/* The verifiers' "reason": "observe_mode" for a valid observe receipt (it is valid but
 * authorizes nothing), "pending_approval" for a valid enforce-mode ESCALATE receipt, else
 * tg_receipt_reason_code(rc). Static text. */
const char *tg_receipt_verdict_reason(tg_err_t rc, const tg_receipt_verdict_t *v);

/* Short snake_case reason for HTTP/CLI: "valid", "malformed" (shape and JSON errors, a
 * malformed checkpoint note or text), "unknown_key", "bad_signature" (also a checkpoint whose
 * log-key signature does not hold or that has none), "bad_proof" (the inclusion proof does
 * not lead to the checkpoint, or the checkpoint is not the one transparency names),
 * "hash_mismatch", "expired", else "error". Static text. */
const char *tg_receipt_reason_code(tg_err_t e);

/* executionId = "exec_" + the first 32 hex of SHA-256(tenant 0x00 surface 0x00 request_hash
 * 0x00 D), the request hash as its 64-char lowercase hex text, and D:
 *   - the idempotency key, when the request has one: SPEC §5 byte for byte, so a retry
 *     with the same key names the same execution and a verifier can recompute the id;
 *   - otherwise 0x00 followed by 16 bytes from the CSPRNG (libsodium), whether or not the
 *     request carries a nonce.
 * Two executions never share an id, by construction rather than by luck: tenant, surface
 * and key never contain 0x00 and the key is never empty, so a key's D starts with a byte
 * that is not 0x00 and every other D starts with 0x00; the two cases hash different strings
 * whatever the key. A nonce names one use within --retention, not one execution (it may
 * come again once that has passed), so hashing it as SPEC §5 words it would give a later,
 * separate execution the same id; and a key "X" and a nonce "X" got one id that way.
 * docs/DESIGN.md, "Execution ids", has the reasoning.
 * Errors: TG_ERR_INVALID_ARG when tenant or surface is empty or contains 0x00, the request
 * hash is not 64 lowercase hex, or key is not NULL and empty or contains 0x00 (out is then
 * ""). out receives 37 chars + NUL. Thread-safe. */
tg_err_t tg_receipt_execution_id(char out[TG_RECEIPT_EXEC_ID_LEN + 1], const char *tenant,
                                 size_t tenant_len, const char *surface, size_t surface_len,
                                 const char *request_hash_hex, size_t request_hash_len,
                                 const char *idempotency_key, size_t key_len) TG_MUST_USE;

/* protocolFingerprint = hex SHA-256 of the canonical
 * {"engineVersion":TG_ENGINE_VERSION,"policyHash":policy_hash_hex,
 *  "protocolVersion":TG_PROTOCOL_VERSION}. policy_hash_hex must be 64 lowercase hex.
 * Errors: TG_ERR_INVALID_ARG. Compute once per policy load, not per request. */
tg_err_t tg_receipt_protocol_fingerprint(char out_hex[65], const char *policy_hash_hex) TG_MUST_USE;

#endif /* TRIGGUARD_RECEIPT_H */
