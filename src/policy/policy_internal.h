/* policy_internal.h — the compiled policy's flat tables, shared by tg_policy and tg_kernel.
 *
 * Layout: one tg_policy_t owns an arena; every table and string below lives in it and is
 * never modified after tg_policy_compile returns. Strings are views (ptr, len) that are also
 * NUL-terminated in the arena. Ids:
 *   surface id = index in `surfaces`, sorted by name bytewise (tg_sv_lexcmp);
 *   signal id  = index in `signals`, sorted the same way (riskScore included);
 *   field id   = index in `fields`, the distinct context member names the bundle mentions,
 *                in the order the compiler meets them (objects walked in sorted order).
 * So ids are a function of the bundle's content, not of its member order.
 * The kernel includes this header but links none of tg_policy's code.
 */
#ifndef TRIGGUARD_POLICY_INTERNAL_H
#define TRIGGUARD_POLICY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/kernel.h"

/* Declared type of a required context field. */
enum {
    TG_FT_ANY = 0, /* present and not null */
    TG_FT_STRING,
    TG_FT_NUMBER,
    TG_FT_BOOLEAN,
    TG_FT_OBJECT,
    TG_FT_ARRAY
};

/* Where a condition reads its value. */
enum { TG_SRC_CONTEXT = 0, TG_SRC_ACTOR, TG_SRC_ACTION, TG_SRC_SIGNAL };

enum {
    TG_OP_EQ = 0,
    TG_OP_NE,
    TG_OP_GT,
    TG_OP_GTE,
    TG_OP_LT,
    TG_OP_LTE,
    TG_OP_IN,
    TG_OP_NOT_IN,
    TG_OP_EXISTS
};

enum { TG_EFFECT_DENY = 0, TG_EFFECT_PERMIT = 1 };

/* Signal types. */
enum { TG_SIG_NUMBER = 0, TG_SIG_BOOLEAN = 1 };

typedef struct tg_cond {
    uint8_t src;            /* TG_SRC_* */
    uint8_t op;             /* TG_OP_* */
    uint32_t id;            /* field id (context) or signal id */
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
    uint8_t effect; /* TG_EFFECT_* */
} tg_rule_t;

typedef struct tg_reqfield {
    uint32_t id;  /* field id */
    uint8_t type; /* TG_FT_* */
} tg_reqfield_t;

typedef struct tg_surface {
    tg_sv_t name;
    const tg_reqfield_t *required; /* sorted by name (tg_sv_lexcmp) */
    const tg_sv_t *actors;         /* sorted (tg_sv_cmp), unique */
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
} tg_surface_t;

typedef struct tg_signal {
    tg_sv_t name;
    const char *reason;  /* deny reason */
    double threshold[4]; /* by tier (index 1..3), valid where threshold_tiers has the bit */
    uint8_t type;        /* TG_SIG_* */
    uint8_t deny_tiers;  /* boolean: bit t = deny when true on tier t */
    uint8_t threshold_tiers;
} tg_signal_t;

typedef struct tg_tool {
    tg_sv_t name;
    tg_sv_t action; /* ptr NULL = none */
    uint32_t surface;
} tg_tool_t;

/* Open-addressing index over a names array: slot = id + 1, 0 = empty; FNV-1a hash. */
typedef struct tg_htab {
    uint32_t *slots;
    uint32_t mask;
} tg_htab_t;

typedef struct tg_arena_chunk tg_arena_chunk_t;

struct tg_policy {
    uint8_t hash[32];
    char hash_hex[65];
    const char *version;
    const char *authority;
    const tg_surface_t *surfaces;
    const tg_signal_t *signals;
    const tg_sv_t *fields;
    const tg_tool_t *tools;
    uint32_t n_surfaces;
    uint32_t n_signals;
    uint32_t n_fields;
    uint32_t n_tools;
    uint32_t n_rules;
    /* Per tier (index 1..3): signals the CLASSIFIED -> SIGNALS_EVALUATED step checks. */
    uint32_t bool_deny_mask[4];
    uint32_t threshold_mask[4];
    tg_htab_t surface_index;
    tg_htab_t signal_index;
    tg_htab_t field_index;
    tg_htab_t tool_index;
    tg_arena_chunk_t *arena;
};

/* Name lookups for frame.c (tg_policy only; the kernel never looks names up). Return 1 and
 * the id when found, else 0. */
int tg_policy_find_field_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);
int tg_policy_find_signal_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);
int tg_policy_find_tool_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);

/* Bytewise order (shorter first on a common prefix): the order users see (signals,
 * required fields); for ASCII names it is also RFC 8785's member order. */
static inline int tg_sv_lexcmp(const char *a, uint32_t alen, const char *b, uint32_t blen) {
    uint32_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0) {
        return (c > 0) - (c < 0);
    }
    return (alen > blen) - (alen < blen);
}

/* Total order on views: length first, then bytes (cheapest; for binary-searched tables). */
static inline int tg_sv_cmp(const char *a, uint32_t alen, const char *b, uint32_t blen) {
    if (alen != blen) {
        return alen < blen ? -1 : 1;
    }
    int c = alen ? memcmp(a, b, alen) : 0;
    return (c > 0) - (c < 0);
}

#endif /* TRIGGUARD_POLICY_INTERNAL_H */
