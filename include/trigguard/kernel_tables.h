/* kernel_tables.h — the kernel's input format: the flat tables tg_kernel_decide reads.
 *
 * Owner: the kernel (tg_kernel). The policy compiler (tg_policy_compile) is the one writer:
 * it includes this header and fills a tg_kernel_tables_t inside each compiled policy, which
 * hands it out through tg_policy_tables (policy.h). The arrow runs policy -> kernel only: the
 * kernel sees these tables and nothing else of a policy (no arena, name indexes, tools,
 * version), and links none of tg_policy's code.
 *
 * Everything a tg_kernel_tables_t points to is immutable once the compiler returns and lives
 * as long as the policy that owns it. Strings are views (tg_sv_t: ptr, len) that are also
 * NUL-terminated, so a decision can hand them out as C strings.
 *
 * Ids (integers the frame carries instead of names, tg_frame_t):
 *   surface id = index in `surfaces`;  signal id = index in `signals`;
 *   field id   = index in `fields`, the context member names the bundle mentions;
 *   claim id   = index in `claims`, the principal claim names the bundle mentions.
 * The compiler makes them a function of the bundle's content (docs/POLICY.md), so a frame
 * built against one compiled copy of a bundle is valid for every copy with its policy_hash.
 *
 *   tg_kernel_tables_t  member           meaning
 *   policy_hash         32 bytes         SHA-256 of the bundle; a frame must carry the same
 *   surfaces            n_surfaces       the surfaces, by surface id
 *   signals             n_signals        declared signals (riskScore included), by signal id,
 *                                        ordered by name bytewise: MISSING_SIGNAL and the
 *                                        signal states check them in this order
 *   fields              n_fields         context field names, by field id (for traces)
 *   claims              n_claims         principal claim names (principal.claims.<name>),
 *                                        by claim id; the caller binds frame.claims by them
 *   bool_deny_mask[t]   bit i            tier t (1..3): signal i is boolean and true denies
 *   threshold_mask[t]   bit i            tier t: signal i is a number with a threshold on t
 *
 *   tg_surface_t        member           meaning
 *   name                view             the surface name (trace subject of SURFACE_FROZEN)
 *   tier                1..3             anything else is a corrupt table: SILENCE
 *   frozen              0/1              DENY SURFACE_FROZEN
 *   required            n_required       required context fields, ordered by name bytewise
 *                                        (the first one missing is the one named)
 *   required_signals    bit i            signal i must be present (MISSING_SIGNAL)
 *   has_actors          0/1              an actor list exists (it may be empty: nobody)
 *   actors              n_actors         allowed actor ids, ordered by tg_sv_cmp, unique
 *                                        (binary-searched)
 *   rules               n_rules          in bundle order (the first matching deny names it)
 *   default_effect      TG_EFFECT_*      outcome when no rule holds
 *   default_reason      code             its reason (a deny; NULL = NO_MATCHING_POLICY)
 *   optional            n_optional       optional context fields (may be absent), ordered by
 *                                        name bytewise; never read by the kernel
 *
 *   tg_rule_t           id (view), effect TG_EFFECT_*, reason (deny: its code; permit:
 *                       NO_POLICY_VIOLATION), conds[n_conds] (all must hold; none = always)
 *   tg_cond_t           src TG_SRC_* and id (field, signal or claim id) say where the value is;
 *                       op TG_OP_*; value (scalar operand; exists: a TG_VT_BOOL), list[n_list]
 *                       (in / not_in operands); field (the condition's field as written)
 *   tg_reqfield_t       id (field id), type TG_FT_*
 *   tg_signal_t         name (view), type TG_SIG_*, reason (its deny code), threshold[t]
 *                       (valid for the tiers of threshold_tiers), deny_tiers / threshold_tiers
 *                       (bit t = tier t, as in the masks above)
 *
 * What the kernel checks and what it trusts. It checks every frame against the tables (ids
 * below n_surfaces, n_signals, n_fields, n_claims; counts within the frame's arrays) and a surface
 * tier of 0, and decides SILENCE INVALID_FRAME when they disagree. It trusts the compiler for the
 * rest: orders as stated, at most TG_FRAME_MAX_SIGNALS signals, mask bits only for declared
 * signals, field ids of `required` below n_fields, reasons that are valid reason codes.
 */
#ifndef TRIGGUARD_KERNEL_TABLES_H
#define TRIGGUARD_KERNEL_TABLES_H

#include <stdint.h>
#include <string.h>

#include "trigguard/kernel.h"

/* Signal sets (required_signals and the tier masks) are one bit per signal id. */
_Static_assert(TG_FRAME_MAX_SIGNALS <= sizeof(uint32_t) * 8,
               "every signal id a frame can carry has a bit in a uint32_t signal set");

/* Declared type of a required context field. */
typedef enum tg_field_type {
    TG_FT_ANY = 0, /* present and not null */
    TG_FT_STRING,
    TG_FT_NUMBER,
    TG_FT_BOOLEAN,
    TG_FT_OBJECT,
    TG_FT_ARRAY
} tg_field_type_t;

/* Where a condition reads its value. */
typedef enum tg_cond_src {
    TG_SRC_CONTEXT = 0,
    TG_SRC_ACTOR,
    TG_SRC_ACTION,
    TG_SRC_SIGNAL,
    TG_SRC_TENANT,            /* the authenticated tenant (frame.tenant) */
    TG_SRC_PRINCIPAL_SUBJECT, /* frame.principal_subject */
    TG_SRC_PRINCIPAL_ISSUER,  /* frame.principal_issuer */
    TG_SRC_CLAIM              /* frame.claims, by claim id */
} tg_cond_src_t;

/* Condition operators (docs/POLICY.md gives their meaning on each value type). */
typedef enum tg_op {
    TG_OP_EQ = 0,
    TG_OP_NE,
    TG_OP_GT,
    TG_OP_GTE,
    TG_OP_LT,
    TG_OP_LTE,
    TG_OP_IN,
    TG_OP_NOT_IN,
    TG_OP_EXISTS
} tg_op_t;

typedef enum tg_effect { TG_EFFECT_DENY = 0, TG_EFFECT_PERMIT = 1 } tg_effect_t;

typedef enum tg_signal_type { TG_SIG_NUMBER = 0, TG_SIG_BOOLEAN = 1 } tg_signal_type_t;

/* The enums above are stored in uint8_t members so the tables stay small. */

typedef struct tg_cond {
    uint8_t src;            /* tg_cond_src_t */
    uint8_t op;             /* tg_op_t */
    uint32_t id;            /* field id (context), signal id or claim id */
    tg_value_t value;       /* scalar operand; exists: TG_VT_BOOL */
    const tg_value_t *list; /* in / not_in operands */
    uint32_t n_list;
    tg_sv_t field; /* the condition's field as written, for traces */
} tg_cond_t;

typedef struct tg_rule {
    tg_sv_t id;
    const char *reason; /* deny: its reason code; permit: NO_POLICY_VIOLATION */
    const tg_cond_t *conds;
    uint32_t n_conds;
    uint8_t effect; /* tg_effect_t */
} tg_rule_t;

typedef struct tg_reqfield {
    uint32_t id;  /* field id */
    uint8_t type; /* tg_field_type_t */
} tg_reqfield_t;

typedef struct tg_surface {
    tg_sv_t name;
    const tg_reqfield_t *required; /* ordered by name bytewise */
    const tg_sv_t *actors;         /* ordered by tg_sv_cmp, unique */
    const tg_rule_t *rules;        /* in bundle order */
    const char *default_reason;
    uint32_t n_required;
    uint32_t n_actors;
    uint32_t n_rules;
    uint32_t required_signals; /* bit i = signal id i must be present */
    uint8_t tier;              /* 1..3 */
    uint8_t frozen;
    uint8_t has_actors; /* an actor list exists (possibly empty: nobody allowed) */
    uint8_t default_effect;
    uint8_t observe; /* "mode": "observe" (SPEC §11.1): never read by the kernel; the
                        pipeline applies it after the decision */
    /* optional_context: fields that may be absent, ordered by name bytewise. Never read by
     * the kernel (an absent field is no SILENCE); the compiler types conditions on them and
     * tg_policy_lint checks references against them. */
    const tg_reqfield_t *optional;
    uint32_t n_optional;
} tg_surface_t;

typedef struct tg_signal {
    tg_sv_t name;
    const char *reason;  /* deny reason */
    double threshold[4]; /* by tier (index 1..3), valid where threshold_tiers has the bit */
    uint8_t type;        /* tg_signal_type_t */
    uint8_t deny_tiers;  /* boolean: bit t = deny when true on tier t */
    uint8_t threshold_tiers;
} tg_signal_t;

struct tg_kernel_tables {
    uint8_t policy_hash[32];
    const tg_surface_t *surfaces;
    const tg_signal_t *signals;
    const tg_sv_t *fields;
    const tg_sv_t *claims; /* principal claim names, by claim id */
    uint32_t n_surfaces;
    uint32_t n_signals;
    uint32_t n_fields;
    uint32_t n_claims;
    /* Per tier (index 1..3): signals the CLASSIFIED -> SIGNALS_EVALUATED step checks. */
    uint32_t bool_deny_mask[4];
    uint32_t threshold_mask[4];
};

/* A frame belongs to the tables whose policy_hash it carries: the two are compared whole. */
_Static_assert(sizeof(((tg_frame_t *)0)->policy_hash) ==
                   sizeof(((tg_kernel_tables_t *)0)->policy_hash),
               "tg_frame_t.policy_hash and tg_kernel_tables_t.policy_hash have one size");

/* The order of `actors`: length first, then bytes (the cheapest total order, for binary
 * search). The compiler sorts with it and the kernel searches with it, so it is defined
 * here, once. Returns <0, 0, >0. */
static inline int tg_sv_cmp(const char *a, uint32_t alen, const char *b, uint32_t blen) {
    if (alen != blen) {
        return alen < blen ? -1 : 1;
    }
    int c = alen ? memcmp(a, b, alen) : 0;
    return (c > 0) - (c < 0);
}

#endif /* TRIGGUARD_KERNEL_TABLES_H */
