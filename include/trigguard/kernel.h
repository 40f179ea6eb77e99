/* kernel.h — the decision FSM of SPEC §8: a pure function (compiled tables, frame) → decision.
 *
 * Purity: tg_kernel_decide allocates nothing, takes no lock, does no I/O, reads no clock and
 * no global state; it only reads its two inputs and writes its output. It is reentrant and
 * may run on any number of threads at once over the same tables and frames. The kernel is
 * its own static library (tg_kernel) whose only libc references are memcmp-class functions;
 * tests/integration/kernel_purity.sh checks that with `nm -u`.
 *
 * The kernel owns its formats: the frame and the decision (here), the compiled tables it
 * reads (kernel_tables.h, written by the policy compiler and handed out by
 * tg_policy_tables). It depends on no other module; the policy module depends on it.
 *
 * States (each transition may end early in a terminal decision):
 *
 *   RECEIVED ──► VALIDATED ──► CLASSIFIED ──► SIGNALS_EVALUATED ──► RULES_EVALUATED
 *      │ SILENCE      │ DENY          │ DENY                 │ DENY/PERMIT by rule,
 *      │ MISSING_CONTEXT  SURFACE_FROZEN  <signal reason>    │ else the surface default
 *      │ UNKNOWN_SIGNAL   ACTOR_NOT_      RISK_THRESHOLD_    │ (DENY NO_MATCHING_POLICY
 *      │ INVALID_SIGNAL   AUTHORIZED      EXCEEDED           │ unless the policy says)
 *      │ MISSING_SIGNAL
 *
 *   RECEIVED → VALIDATED, in this order: every required context field of the surface is
 *     present with its declared type (else MISSING_CONTEXT); every signal is declared
 *     (else UNKNOWN_SIGNAL); every signal has its declared type and numbers lie in [0, 1]
 *     (else INVALID_SIGNAL); every signal the policy requires for the surface is present
 *     (else MISSING_SIGNAL).
 *   VALIDATED → CLASSIFIED: frozen surface → DENY SURFACE_FROZEN; allowed-actor list present
 *     and the actor absent or not in it → DENY ACTOR_NOT_AUTHORIZED.
 *   CLASSIFIED → SIGNALS_EVALUATED: a true boolean signal whose deny_on_tier holds the
 *     surface tier → DENY with the signal's reason (signals in bytewise name order); then
 *     a number signal strictly above its threshold for the tier (riskScore: the tier
 *     thresholds) → DENY with its reason (RISK_THRESHOLD_EXCEEDED for riskScore). Equal
 *     passes.
 *   SIGNALS_EVALUATED → RULES_EVALUATED: any deny rule whose conditions all hold wins
 *     → DENY with the reason of the first such rule (bundle order); else the first permit
 *     rule whose conditions all hold → PERMIT NO_POLICY_VIOLATION; else the surface default.
 *     Then, when that outcome is a PERMIT, every stateful limit of the surface (in bundle
 *     order): the frame's running total plus this request's amount (1 for a count, the
 *     summed context field for a sum) above the limit's max → DENY with the limit's reason
 *     (cause LIMIT, subject the limit's id); a sum whose field is absent, not a number,
 *     negative or not finite is DENY too (an amount that cannot be counted is never free).
 *     A condition holds only on a present, non-null value of a comparable type: a missing
 *     field makes every operator false except `exists: false`; ordered operators on a
 *     non-number are false; eq/ne/in/not_in compare typed ("5" ne 5 holds); prefix/
 *     suffix/glob hold on strings only; value_from needs both fields present (ne too).
 *     Groups combine those results: all_of, any_of, and not, which negates its member, so
 *     `not` over a missing field HOLDS (docs/POLICY.md 1.2.1). Mandatory facts
 *     are enforced by required context / required signals in the first state (SILENCE).
 *     Conditions on the principal (tenant, principal.subject, principal.issuer,
 *     principal.claims.<name>) read the frame's verified members with the same rules: an
 *     absent fact is a missing field.
 *   Before RECEIVED is left, the frame must belong to the policy (same policyHash) and be
 *   well formed, else SILENCE POLICY_MISMATCH / INVALID_FRAME.
 *
 * Frames are built by tg_frame_from_request (policy.h) against a compiled policy: field and
 * signal names are resolved to the ids of its tables there, so the kernel compares integers.
 * Ids are deterministic functions of the bundle's content, so a frame built against one
 * compiled copy of a bundle is valid for every other copy with the same policyHash.
 */
#ifndef TRIGGUARD_KERNEL_H
#define TRIGGUARD_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The compiled tables (kernel_tables.h); opaque to callers that only decide. */
typedef struct tg_kernel_tables tg_kernel_tables_t;

/* A borrowed byte string with its length (not necessarily NUL-terminated). ptr NULL =
 * absent. */
typedef struct tg_sv {
    const char *ptr;
    uint32_t len;
} tg_sv_t;

/* Type of a frame value (and of a policy operand). ABSENT = the member was not sent. */
typedef enum tg_vtype {
    TG_VT_ABSENT = 0,
    TG_VT_NULL,
    TG_VT_BOOL,
    TG_VT_NUMBER,
    TG_VT_STRING,
    TG_VT_OBJECT,
    TG_VT_ARRAY
} tg_vtype_t;

/* One typed value. Strings are borrowed views (into the parsed request or the policy). */
typedef struct tg_value {
    double num;      /* TG_VT_NUMBER */
    const char *str; /* TG_VT_STRING */
    uint32_t len;    /* TG_VT_STRING: bytes */
    uint8_t type;    /* tg_vtype_t */
    uint8_t boolean; /* TG_VT_BOOL: 0 or 1 */
} tg_value_t;

/* A frame entry: a context field or a signal, by policy id. */
typedef struct tg_frame_slot {
    uint32_t id;
    tg_value_t v;
} tg_frame_slot_t;

#define TG_FRAME_MAX_CONTEXT 64 /* context fields the policy mentions, per request */
#define TG_FRAME_MAX_SIGNALS 32 /* signals per request: at most one per declared signal */
#define TG_FRAME_MAX_CLAIMS 16  /* principal claims the policy mentions: one per claim name */
#define TG_FRAME_MAX_LIMITS 8   /* stateful limits on one surface: one total per limit */

/* The kernel's input: fixed size (about 4 KiB), no heap, caller-allocated. Views borrow
 * from the parsed request, which must outlive the frame's use. */
typedef struct tg_frame {
    uint8_t policy_hash[32]; /* the policy the ids below refer to */
    uint32_t surface;        /* index into the policy's surface table */
    tg_sv_t surface_name;
    tg_sv_t action; /* ptr NULL = absent */
    tg_sv_t actor;  /* ptr NULL = absent */
    uint32_t n_context;
    uint32_t n_signals;
    uint32_t n_unknown_signals; /* signals the policy does not declare */
    tg_sv_t unknown_signal;     /* the bytewise-smallest such name, for the trace */
    tg_frame_slot_t context[TG_FRAME_MAX_CONTEXT]; /* sorted by field id, unique */
    tg_frame_slot_t signals[TG_FRAME_MAX_SIGNALS]; /* sorted by signal id, unique */
    /* Verified facts about who asks (issue 20), never taken from the request body: the
     * authenticated tenant, the principal's subject and issuer (ptr NULL = absent, e.g. no
     * issuer for a token of the tokens file), and the principal's claims that the policy
     * names, by claim id. tg_frame_from_request leaves them all absent; the caller that
     * authenticated the request binds them before the kernel runs. */
    tg_sv_t tenant;
    tg_sv_t principal_subject;
    tg_sv_t principal_issuer;
    uint32_t n_claims;
    tg_frame_slot_t claims[TG_FRAME_MAX_CLAIMS]; /* sorted by claim id, unique */
    /* Stateful limits (issue 21, docs/POLICY.md "Limits"): for each limit of the surface,
     * by limit id, the running total of its current window for this request's key, before
     * this request (v: a TG_VT_NUMBER). The kernel reads state only through these inputs,
     * so it stays pure: whoever holds the totals (the pipeline's limit store, `policy test`'s
     * limits_state) binds them, and a surface limit without a slot decides SILENCE
     * INVALID_FRAME (fail closed: an unbound total is never taken as zero). */
    uint32_t n_limits;
    tg_frame_slot_t limits[TG_FRAME_MAX_LIMITS]; /* sorted by limit id, unique */
    /* The decision's instant (issue 21, time.* conditions): wall-clock ms since the Unix
     * epoch, read once per request by the pipeline (the receipt's timestamp) or given to
     * `check --at` / a policy test's `at`, so that the kernel reads no clock. has_now 0 =
     * unknown: every time.* value is absent. tg_frame_from_request leaves it unknown. */
    int64_t now_ms;
    uint8_t has_now;
} tg_frame_t;

/* A zeroed tg_decision_t is a SILENCE: the zero value never authorizes. */
/* TG_ESCALATE (SPEC §11.2): an escalate rule holds and no deny rule does; the action may
 * run only after people approve it (approval.h). It never authorizes by itself. */
typedef enum tg_verdict {
    TG_SILENCE = 0,
    TG_PERMIT = 1,
    TG_DENY = 2,
    TG_ESCALATE = 3
} tg_verdict_t;
#define TG_VERDICT__COUNT 4

typedef enum tg_state {
    TG_STATE_RECEIVED = 0,
    TG_STATE_VALIDATED,
    TG_STATE_CLASSIFIED,
    TG_STATE_SIGNALS_EVALUATED,
    TG_STATE_RULES_EVALUATED,
    TG_STATE__COUNT
} tg_state_t;

/* What produced the decision (the trace's "decided_by"). */
typedef enum tg_cause {
    TG_CAUSE_FRAME = 0,        /* frame/policy mismatch or malformed frame */
    TG_CAUSE_CONTEXT,          /* required context field missing or wrong type */
    TG_CAUSE_UNKNOWN_SIGNAL,   /* signal not declared by the policy */
    TG_CAUSE_INVALID_SIGNAL,   /* wrong type or number outside [0, 1] */
    TG_CAUSE_MISSING_SIGNAL,   /* signal required for the surface absent */
    TG_CAUSE_FROZEN,           /* surface frozen */
    TG_CAUSE_ACTOR,            /* actor not in the allowed list */
    TG_CAUSE_SIGNAL_DENY,      /* boolean signal with deny_on_tier */
    TG_CAUSE_SIGNAL_THRESHOLD, /* number signal above its threshold */
    TG_CAUSE_RULE,             /* a rule matched */
    TG_CAUSE_DEFAULT,          /* no rule matched: surface default */
    TG_CAUSE_LIMIT,            /* a PERMIT would take a stateful limit over its max */
    TG_CAUSE__COUNT
} tg_cause_t;

/* The kernel's output. Every string is static or owned by the tables (valid while the
 * policy that owns them lives); `subject` may also borrow from the frame's request. */
typedef struct tg_decision {
    tg_verdict_t verdict;
    const char *reason; /* UPPER_SNAKE reason code, NUL-terminated, never NULL */
    tg_sv_t rule_id;    /* rule that decided (ptr NULL when none) */
    tg_sv_t subject;    /* field, signal or actor the cause refers to (may be absent) */
    tg_cause_t cause;
    uint8_t tier;     /* surface tier, 0 when not reached */
    uint8_t n_states; /* states entered, in order (RECEIVED first) */
    uint8_t states[TG_STATE__COUNT];
    uint16_t rules_evaluated; /* rules whose conditions were examined */
} tg_decision_t;

/* Decides frame f under tables t (tg_policy_tables of a compiled policy). Always writes a
 * complete decision to *out (out NULL: nothing happens); never fails in the error channel:
 * NULL tables or frame, or a frame built against other tables (another policy_hash), is
 * SILENCE INVALID_FRAME / POLICY_MISMATCH. Pure, reentrant, thread-safe. */
void tg_kernel_decide(tg_decision_t *out, const tg_kernel_tables_t *t, const tg_frame_t *f);

/* ---- reason codes -------------------------------------------------------------------
 *
 * A reason code (SPEC §1) says why a decision is what it is: UPPER_SNAKE, [A-Z][A-Z0-9_]*,
 * 1 to TG_REASON_MAX bytes. Bundles name their own for rules, signals and defaults
 * (docs/POLICY.md); the codes trigguard itself emits are the list below, defined here once
 * because the kernel emits them. The policy compiler writes the ones it defaults to into
 * the tables (a rule or signal without a reason, a deny default), tg_decision_to_json has
 * one fallback, and receipts are checked with tg_reason_code_valid: every module takes the
 * text from this list and the rule from this header.
 *
 * X-macro, so the enum and the texts stay in one place; a code's text is its name. Numeric
 * values are not a stable ABI (only the text travels). */
#define TG_REASON_MAX 64

#define TG_REASON_LIST(X)                                                                          \
    X(NO_POLICY_VIOLATION)     /* PERMIT: a permit rule holds, or a permit default */              \
    X(NO_MATCHING_POLICY)      /* DENY: no rule holds; the deny default names no reason */         \
    X(POLICY_DENY)             /* DENY: a deny rule that names no reason holds */                  \
    X(RISK_THRESHOLD_EXCEEDED) /* DENY: riskScore above its threshold, no reason named */          \
    X(SURFACE_FROZEN)          /* DENY: the surface is frozen */                                   \
    X(ACTOR_NOT_AUTHORIZED)    /* DENY: actor absent or not in the surface's list */               \
    X(MISSING_CONTEXT)         /* SILENCE: required context field absent or of the wrong type */   \
    X(UNKNOWN_SIGNAL)          /* SILENCE: a signal the policy does not declare */                 \
    X(INVALID_SIGNAL)          /* SILENCE: signal of the wrong type, or a number outside [0, 1] */ \
    X(MISSING_SIGNAL)          /* SILENCE: a signal required for the surface is absent */          \
    X(POLICY_MISMATCH)         /* SILENCE: frame built against other tables (internal fault) */    \
    X(INVALID_FRAME)           /* SILENCE: malformed frame, corrupt table or NULL input */         \
    X(APPROVAL_REQUIRED)       /* ESCALATE: an escalate rule that names no reason holds */         \
    X(APPROVAL_DENIED)         /* DENY on resume: an approver denied the approval (SPEC §11.2) */ \
    X(APPROVAL_EXPIRED)        /* DENY on resume: past its ttl_s or consume_within_s */            \
    X(INTERNAL_ERROR)          /* no reason at all: tg_decision_to_json's fallback, never kernel */

typedef enum tg_reason {
#define TG_REASON_ENUM_(code) TG_REASON_##code,
    TG_REASON_LIST(TG_REASON_ENUM_)
#undef TG_REASON_ENUM_
        TG_REASON__COUNT
} tg_reason_t;

/* The text of reason r ("NO_POLICY_VIOLATION"): static, NUL-terminated, never NULL
 * ("INTERNAL_ERROR" out of range). Pure. */
const char *tg_reason_code(tg_reason_t r);

/* True when s (n bytes) is a reason code: [A-Z][A-Z0-9_]*, 1 to TG_REASON_MAX bytes. The one
 * rule for policy bundles and for receipt verification. Pure; thread-safe. */
bool tg_reason_code_valid(const char *s, size_t n);

/* "PERMIT", "DENY", "SILENCE", "ESCALATE" (anything else: "SILENCE"). Static. */
const char *tg_verdict_name(tg_verdict_t v);

/* "RECEIVED" … "RULES_EVALUATED"; "UNKNOWN" out of range. Static. */
const char *tg_state_name(tg_state_t s);

/* snake_case name of a cause ("rule", "default", "signal_threshold", …). Static. */
const char *tg_cause_name(tg_cause_t c);

#endif /* TRIGGUARD_KERNEL_H */
