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
 *   limits              n_limits         stateful limits, by limit id (bundle order); the
 *                                        caller binds frame.limits (running totals) by them
 *   zones               n_zones          time zones time.* conditions read (tg_zone_t), by
 *                                        zone id, in the order the compiler meets them
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
 *   limits              n_limits         limit ids that apply to the surface, ascending
 *                                        (checked in this order after a PERMIT)
 *   optional            n_optional       optional context fields (may be absent), ordered by
 *                                        name bytewise; never read by the kernel
 *
 *   tg_rule_t           id (view), effect TG_EFFECT_*, reason (deny and escalate: its
 *                       code; permit: NO_POLICY_VIOLATION), conds[n_conds] (all must hold; none =
 * always) tg_cond_t           src TG_SRC_* and id (field, signal, claim or zone id) say where the
 *                       value is; op TG_OP_*; value (scalar operand; exists: a TG_VT_BOOL;
 *                       prefix, suffix, glob: a string), list[n_list] (in / not_in operands);
 *                       field (the condition's field as written). A group (op ALL, ANY, NOT)
 *                       has no field or value, only members sub[n_sub] (NOT: exactly one), at
 *                       most TG_COND_MAX_NESTING groups deep. has_from: the operand is the
 *                       request's own value at from_src / from_id (value_from), not value.
 *                       in_set / not_in_set: list[n_list] is the data set, sorted by
 *                       tg_value_cmp (value: the set's name, for explain; no operand).
 *                       zone (time.*): tables.zones[id], else NULL.
 *   tg_reqfield_t       id (field id), type TG_FT_*
 *   tg_limit_t          id (view), reason (DENY code), max, kind TG_LIMIT_SUM|COUNT, field
 *                       (sum: the field id of the summed context field). The key, window and
 *                       surface live in the policy: the kernel only compares totals.
 *   tg_signal_t         name (view), type TG_SIG_*, reason (its deny code), threshold[t]
 *                       (valid for the tiers of threshold_tiers), deny_tiers / threshold_tiers
 *                       (bit t = tier t, as in the masks above)
 *
 * What the kernel checks and what it trusts. It checks every frame against the tables (ids
 * below n_surfaces, n_signals, n_fields, n_claims; counts within the frame's arrays) and a surface
 * tier of 0, and decides SILENCE INVALID_FRAME when they disagree. It trusts the compiler for the
 * rest: orders as stated, at most TG_FRAME_MAX_SIGNALS signals, mask bits only for declared
 * signals, field ids of `required` below n_fields, reasons that are valid reason codes,
 * condition ids (and from_ids) within their tables, groups with members (a group nested deeper
 * than TG_COND_MAX_NESTING is not walked: it does not hold).
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
    TG_SRC_CLAIM,             /* frame.claims, by claim id */
    /* The decision's instant (frame.now_ms) in zone `id` (tables.zones; the cond's `zone`
     * points at it): time.hour a number 0..23, time.weekday a string "mon".."sun",
     * time.date the number YYYYMMDD (the compiler turns "YYYY-MM-DD" operands into it;
     * explain shows it as "YYYY-MM-DD"). Absent when the frame has no instant. */
    TG_SRC_TIME_HOUR,
    TG_SRC_TIME_WEEKDAY,
    TG_SRC_TIME_DATE
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
    TG_OP_EXISTS,
    /* String matching (docs/POLICY.md "Condition groups, string matching and field
     * comparison"): hold only on a string value; the operand (value) is a string. */
    TG_OP_PREFIX,
    TG_OP_SUFFIX,
    TG_OP_GLOB, /* `*` any run of code points, `?` one code point; linear (kernel.c) */
    /* in / not_in a named data set (docs/POLICY.md "Data sets"): list[n_list] is the set,
     * sorted by tg_value_cmp and unique, so the kernel binary-searches it. Leaves, so
     * before the groups (the kernel tells a group by op >= TG_OP_ALL). */
    TG_OP_IN_SET,
    TG_OP_NOT_IN_SET,
    /* Groups: no field and no value; their members are sub[n_sub]. */
    TG_OP_ALL, /* every member holds */
    TG_OP_ANY, /* one member holds */
    TG_OP_NOT  /* its one member does not hold (n_sub == 1) */
} tg_op_t;

/* Group nesting the kernel walks: a condition sits under at most this many groups. The
 * compiler's bound (TG_POLICY_MAX_NESTING, policy.h) is at most this; the kernel's recursion
 * is bounded by it whatever the tables say. */
#define TG_COND_MAX_NESTING 8

/* The `glob` operator: whether text[0..n) matches pattern[0..m), where `*` matches any run
 * of code points (the empty one too), `?` exactly one UTF-8 code point, and every other byte
 * itself (no escapes, no classes; a malformed UTF-8 byte counts as one code point). Time
 * O(m + n) when no star-free run between two stars holds a `?`, else O(m + n·L), L the
 * longest such run; never the O(n·m) of backtracking (glob.c argues it); *steps (when not NULL) is
 * increased by the comparisons made, for tests. Pure, no allocation, reentrant. */
int tg_glob_match(const char *pattern, size_t m, const char *text, size_t n, uint64_t *steps);

/* Among the rules that hold, deny beats escalate beats permit (SPEC §11.2): the first
 * deny rule in bundle order decides; else the first escalate rule; else the first permit
 * rule. An escalate rule's approval settings live in the policy (tg_policy_rule_approval):
 * the kernel only names the rule. */
typedef enum tg_effect {
    TG_EFFECT_DENY = 0,
    TG_EFFECT_PERMIT = 1,
    TG_EFFECT_ESCALATE = 2
} tg_effect_t;

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
    /* Groups (TG_OP_ALL / ANY / NOT): the members, in bundle order. */
    const struct tg_cond *sub;
    uint32_t n_sub;
    /* value_from: the other field of the request, compared instead of `value` (has_from 1;
     * op eq..lte only). from_src / from_id say where it is, as src / id do. */
    uint32_t from_id;
    uint8_t from_src; /* tg_cond_src_t */
    uint8_t has_from;
    tg_sv_t from_field;         /* the other field as written, for traces */
    const struct tg_zone *zone; /* TG_SRC_TIME_*: tables.zones[id]; else NULL */
} tg_cond_t;

typedef struct tg_rule {
    tg_sv_t id;
    const char *reason; /* deny, escalate: its reason code; permit: NO_POLICY_VIOLATION */
    const tg_cond_t *conds;
    uint32_t n_conds;
    uint8_t effect; /* tg_effect_t */
} tg_rule_t;

/* A stateful limit (docs/POLICY.md "Limits"): what the kernel needs to compare a running
 * total with its max. */
typedef enum tg_limit_kind { TG_LIMIT_SUM = 0, TG_LIMIT_COUNT = 1 } tg_limit_kind_t;

typedef struct tg_limit {
    tg_sv_t id;
    const char *reason; /* the DENY reason code when the request would exceed max */
    double max;         /* finite, >= 0 */
    uint32_t field;     /* TG_LIMIT_SUM: field id of the summed context field */
    uint8_t kind;       /* tg_limit_kind_t */
} tg_limit_t;

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
    const uint32_t *limits; /* limit ids, ascending */
    uint32_t n_limits;      /* at most TG_FRAME_MAX_LIMITS */
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
    const tg_sv_t *claims;    /* principal claim names, by claim id */
    const tg_limit_t *limits; /* stateful limits, by limit id */
    uint32_t n_limits;
    const struct tg_zone *zones; /* time zones of time.* conditions, by zone id */
    uint32_t n_zones;
    uint32_t n_surfaces;
    uint32_t n_signals;
    uint32_t n_fields;
    uint32_t n_claims;
    /* Per tier (index 1..3): signals the CLASSIFIED -> SIGNALS_EVALUATED step checks. */
    uint32_t bool_deny_mask[4];
    uint32_t threshold_mask[4];
};

/* ---- time zones and civil time (issue 21, time.* conditions; src/kernel/ktime.c) --------
 *
 * A zone is the compiled form of an IANA zone (the compiler reads its TZif file from the
 * host's tz database at policy load, src/policy/tzif.c): the UTC offset in force at any
 * instant, found without a clock or a library call. Instants are seconds since the epoch.
 *   at[n], off[n]   transitions: from at[i] (ascending, unique) on, the offset is off[i]
 *   off0            the offset before at[0] (and always, when n == 0 and there is no rule)
 *   rule            from at[n-1] on (or always when n == 0): the TZif footer's POSIX TZ
 *                   rule, std_off all year, or dst_off between start and end when has_dst.
 *                   start is in local standard time, end in local daylight time (POSIX).
 * Offsets are seconds east of UTC, within +-25 hours. */
typedef struct tg_zone_date { /* POSIX "Mm.w.d/time" */
    uint8_t month;            /* 1..12 */
    uint8_t week;             /* 1..5 (5 = the last) */
    uint8_t wday;             /* 0 = Sunday .. 6 */
    int32_t secs;             /* local time of day, -167..167 hours (RFC 8536) */
} tg_zone_date_t;

typedef struct tg_zone {
    tg_sv_t name; /* the IANA name as the bundle wrote it */
    const int64_t *at;
    const int32_t *off;
    uint32_t n;
    int32_t off0;
    uint8_t has_rule;
    uint8_t has_dst;
    int32_t std_off, dst_off;
    tg_zone_date_t start, end;
} tg_zone_t;

/* Local time of an instant: the parts the time.* fields read. */
typedef struct tg_civil {
    int64_t year;
    uint8_t month, day; /* 1..12, 1..31 */
    uint8_t hour;       /* 0..23 */
    uint8_t weekday;    /* 0 = Monday .. 6 = Sunday */
} tg_civil_t;

/* The earliest and latest instants a frame's now_ms may carry for time.* to be present
 * (0001-01-01 and 9999-12-31 UTC, in ms): outside, every time.* value is absent. */
#define TG_CIVIL_MIN_MS INT64_C(-62135596800000)
#define TG_CIVIL_MAX_MS INT64_C(253402300799999)

/* UTC offset (seconds east) of zone z at instant t (seconds since the epoch). Pure. */
int32_t tg_zone_offset(const tg_zone_t *z, int64_t t);

/* The local civil time of instant t (seconds) in zone z (NULL = UTC). Pure. */
void tg_civil_time(tg_civil_t *out, const tg_zone_t *z, int64_t t);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back (any int32 year). Pure. */
int64_t tg_days_from_civil(int64_t y, unsigned m, unsigned d);
void tg_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d);

/* "mon".."sun" for weekday 0..6 (Monday first); NULL out of range. Static. */
const char *tg_weekday_name(unsigned wd);

/* The order of a data set (TG_OP_IN_SET): type first, then numbers by value and strings by
 * tg_sv_cmp. <0, 0, >0. The compiler sorts with it, the kernel searches with it. Pure. */
int tg_value_cmp(const tg_value_t *a, const tg_value_t *b);

/* ---- explain (issue 21: "full explain") ------------------------------------------------
 *
 * tg_kernel_explain replays the rules step of tg_kernel_decide for one frame and reports
 * every rule of the surface, in bundle order, with each of its conditions (pre-order, so a
 * group comes before its members), the request's value the condition compared and whether
 * it held; then every limit of the surface. It is a separate walk over the same evaluation
 * functions the kernel decides with (so the two cannot disagree), and the hot path pays
 * nothing for it: tg_kernel_decide never calls it.
 *
 * Unlike the kernel, explain evaluates every condition of every rule (no short-circuit), so
 * that a NO_MATCHING_POLICY DENY shows why each permit rule failed; `evaluated` says which
 * rules and limits the kernel itself examined. It reports nothing when the decision ended
 * before RULES_EVALUATED (the decision's cause and subject already say why).
 *
 *   step member   RULE                      COND                       LIMIT
 *   index         rule index in surface     index among its siblings   index in surface
 *   depth         0                         1 = a when[] member, +1     0
 *                                           per group level
 *   held          all its conditions hold   the condition holds        total+amount <= max
 *   evaluated     the kernel examined it    its rule's `evaluated`     the kernel checked it
 *   rule / cond / limit                     the table entries concerned (NULL when not)
 *   value         NULL                      the request's value (NULL  NULL
 *                                           = absent; groups: NULL;
 *                                           time.date: "YYYY-MM-DD")
 *   other         NULL                      value_from: the other      NULL
 *                                           field's value (else NULL)
 *   total, amount 0                         0                          frame total, amount
 *                                                                      (NaN when uncountable)
 * Pointers in a step are valid during the callback only. */
typedef enum tg_explain_kind {
    TG_EXPLAIN_RULE = 0,
    TG_EXPLAIN_COND,
    TG_EXPLAIN_LIMIT
} tg_explain_kind_t;

typedef struct tg_explain_step {
    uint8_t kind; /* tg_explain_kind_t */
    uint8_t depth;
    uint8_t held;
    uint8_t evaluated;
    uint32_t index;
    const tg_rule_t *rule;
    const tg_cond_t *cond;
    const tg_limit_t *limit;
    const tg_value_t *value;
    const tg_value_t *other;
    double total, amount;
} tg_explain_step_t;

typedef void (*tg_explain_fn)(void *ud, const tg_explain_step_t *step);

/* Explains tg_kernel_decide(t, f) step by step through fn (see above); d, when not NULL,
 * receives the decision (the same as tg_kernel_decide's). NULL t, f or fn: only *d is
 * written. Pure (like the kernel: no allocation, no I/O); reentrant. */
void tg_kernel_explain(tg_decision_t *d, const tg_kernel_tables_t *t, const tg_frame_t *f,
                       tg_explain_fn fn, void *ud);

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
