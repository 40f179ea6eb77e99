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

#include "trigguard/io.h"
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

/* A route of the gate (routes.c): method and path pattern -> surface, action, context. */
typedef struct tg_gate_route tg_gate_route_t;

/* What a stateful limit needs besides the kernel's tg_limit_t (limits.c): its surface, the
 * parts of its key and its window. By limit id, parallel to tables.limits. */
typedef enum tg_limit_key_src {
    TG_LIMIT_KEY_ACTOR = 0,
    TG_LIMIT_KEY_TENANT,
    TG_LIMIT_KEY_SUBJECT,
    TG_LIMIT_KEY_ISSUER,
    TG_LIMIT_KEY_CONTEXT
} tg_limit_key_src_t;

typedef struct tg_limit_spec {
    uint32_t surface;
    uint32_t n_key;
    uint8_t key_src[TG_LIMIT_KEY_PARTS];    /* tg_limit_key_src_t */
    uint32_t key_field[TG_LIMIT_KEY_PARTS]; /* TG_LIMIT_KEY_CONTEXT: the field id */
    int64_t window_s;
} tg_limit_spec_t;

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
    const tg_limit_spec_t *limit_specs; /* by limit id (limits.c) */
    tg_arena_chunk_t *arena;
    tg_gate_route_t *routes; /* the bundle's "routes" (routes.c; malloc'd, not the arena) */
    uint32_t n_routes;
    /* Escalate rules' "approval" (tg_policy_rule_approval): by surface index, an array of
     * that surface's n_rules entries, NULL for a rule that is not an escalate rule (arena). */
    const struct tg_approval_spec *const **approvals;
};

/* Name lookups for frame.c (tg_policy only; the kernel never looks names up). Return 1 and
 * the id when found, else 0. */
int tg_policy_find_field_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);
int tg_policy_find_signal_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);
int tg_policy_find_tool_(const tg_policy_t *p, const char *s, size_t n, uint32_t *id);

/* Zeroed arena memory owned by p (freed with it); NULL when out of memory. For the
 * compiler's files besides policy.c (limits.c). */
void *tg_policy_arena_alloc_(tg_policy_t *p, size_t n);

/* Compiles the bundle's top-level "limits" (limits.c; NULL = none) into p->tables.limits,
 * each surface's limits and p->limit_specs. Runs after the surfaces are compiled (it checks
 * their required_context). Errors: TG_ERR_POLICY_INVALID (diag "limits[i].<member>: ..."),
 * TG_ERR_NOMEM. */
tg_err_t tg_policy_compile_limits_(tg_policy_t *p, const json_t *limits, tg_diag_t *diag);

/* The directory of bundle file `path` ("." when it names none), where its data set files
 * resolve. TG_ERR_LIMIT when longer than TG_POLICY_DIR_MAX - 1 bytes. */
#define TG_POLICY_DIR_MAX 4096
tg_err_t tg_policy_dir_of_(char dir[TG_POLICY_DIR_MAX], const char *path, tg_diag_t *diag);

/* The bundle's "routes" (routes.c; NULL = none), after the surfaces. Errors:
 * TG_ERR_POLICY_INVALID (diag "routes[i].<member>: ..."), TG_ERR_NOMEM. What it allocated is
 * freed by tg_policy_routes_free_, also after an error. */
tg_err_t tg_policy_routes_compile_(tg_policy_t *p, const json_t *routes, tg_diag_t *diag);
void tg_policy_routes_free_(tg_policy_t *p);

/* "an object", "a string", ..., "null": a JSON value's type in error messages, one wording
 * for the compiler, the limits and the frame builder. */
const char *tg_policy_json_type_(const json_t *v);

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

/* Data set files (dataset.c; docs/POLICY.md "Data sets"). tg_dataset_path_ok: rel (n bytes)
 * is a relative path of at most TG_POLICY_MAX_NAME bytes with no empty, "." or ".."
 * component, no control character and no backslash. tg_dataset_read: reads base_dir/rel
 * (the last component opened O_NOFOLLOW, a regular file of at most TG_POLICY_MAX_SET_BYTES)
 * into *out and its SHA-256 into sha256; errors TG_ERR_POLICY_INVALID (path), TG_ERR_NOT_FOUND,
 * TG_ERR_IO, TG_ERR_LIMIT, TG_ERR_NOMEM. tg_dataset_lines: the non-empty lines of a text file
 * (UTF-8, no control character, each at most TG_POLICY_MAX_VALUE bytes, at most
 * TG_POLICY_MAX_SET_VALUES), views into data in a malloc'd array (*out, free()); errors
 * TG_ERR_POLICY_INVALID naming the line, TG_ERR_LIMIT, TG_ERR_NOMEM. */
int tg_dataset_path_ok(const char *rel, size_t n);
tg_err_t tg_dataset_read(tg_file_t *out, uint8_t sha256[32], const char *base_dir, const char *rel,
                         tg_diag_t *diag) TG_MUST_USE;
tg_err_t tg_dataset_lines(tg_sv_t **out, size_t *n_out, const char *data, size_t len,
                          tg_diag_t *diag) TG_MUST_USE;

#endif /* TRIGGUARD_POLICY_INTERNAL_H */
