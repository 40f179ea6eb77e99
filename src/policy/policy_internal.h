/* policy_internal.h — the compiled policy as tg_policy's own files see it.
 *
 * Layout: one tg_policy_t owns an arena; the kernel's tables (tg_kernel_tables_t, whose
 * format kernel_tables.h owns), the tools, the name indexes and every string live in it and
 * are never modified after tg_policy_compile returns. Strings are views (ptr, len) that are
 * also NUL-terminated in the arena. How the compiler assigns the kernel's ids:
 *   surface id = index in `surfaces`, sorted by name bytewise (tg_sv_lexcmp);
 *   signal id  = index in `signals`, sorted the same way (riskScore included);
 *   field id   = index in `fields`, the distinct context member names the bundle mentions,
 *                in the order the compiler meets them (objects walked in sorted order);
 *   claim id   = index in `claims`, the distinct principal.claims.<name> names, likewise.
 * So ids are a function of the bundle's content, not of its member order.
 * Only src/policy includes this header; the kernel sees the tables alone.
 */
#ifndef TRIGGUARD_POLICY_INTERNAL_H
#define TRIGGUARD_POLICY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

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
    tg_kernel_tables_t tables; /* what tg_kernel_decide reads (tg_policy_tables) */
    char hash_hex[65];         /* tables.policy_hash in hex */
    const char *version;
    const char *authority;
    const tg_tool_t *tools;
    uint32_t n_tools;
    uint32_t n_rules;
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

/* Strict-parses a bundle text with the bundle's limits (tg_policy_load_text's; lint.c
 * needs the tree as well as the policy). Caller json_decref's *out. */
tg_err_t tg_policy_parse_(json_t **out, const char *text, size_t len, tg_diag_t *diag);

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

#endif /* TRIGGUARD_POLICY_INTERNAL_H */
