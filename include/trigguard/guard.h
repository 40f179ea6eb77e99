/* guard.h — the door of the daemon: tenant auth tokens, GCRA rate limits, bulkheads.
 *
 * Three independent objects, no global state:
 *
 * tg_tenants_t  the tenant table and the principals that authenticate into it. A principal
 *               is one bearer token (kept only as its SHA-256 digest) bound to a tenant, a
 *               subject, a role and, optionally, the actors and surfaces it may use. Up to
 *               TG_GUARD_MAX_TOKENS principals; a tenant (1..64 chars of [A-Za-z0-9._-]) may
 *               have several, and up to TG_GUARD_MAX_TENANTS distinct tenants exist. Each
 *               tenant gets a stable small index 0..count-1 (order of first appearance) used
 *               to index the per-tenant arrays of the rate limiter and bulkheads. Built once
 *               at startup (not thread-safe while loading), then read-only: every query is
 *               thread-safe. Digests and subjects are unique: the same token digest twice
 *               (an ambiguous token could authenticate as the wrong principal) or the same
 *               subject twice is a TG_ERR_CONFIG.
 *
 *   Tokens file (--tokens FILE): a JSON array (at most 1 MiB) of objects. Members:
 *     tenant        required; the tenant name
 *     token_sha256  required; 64 hex digits, either case, the SHA-256 of the raw token
 *     subject       1..TG_GUARD_SUBJECT_MAX chars of [A-Za-z0-9._:@/+-], the principal's
 *                   name in logs; default "<tenant>:<first 8 hex of token_sha256>"
 *     actors        1..TG_GUARD_MAX_BINDINGS distinct actor ids (1..TG_GUARD_NAME_MAX bytes,
 *                   no control character, not starting with '@'): the only actors the
 *                   token may act as. Absent = any actor the request names (unbound).
 *     surfaces      1..TG_GUARD_MAX_BINDINGS distinct surface names (same rules but '@'):
 *                   the only surfaces the token may ask about. Absent = every surface.
 *     role          "caller" (default), "approver", "executor" or "admin" (tg_role_t)
 *     groups        1..TG_GUARD_MAX_BINDINGS distinct group names (same rules as
 *                   surfaces): an approver's groups, which an escalate rule's "@group"
 *                   approvers entries name (SPEC §11.2). Absent = none.
 *     observe       false (default); true lets the token ask for observe mode
 *                   ("executionMode": "observe", SPEC §11.1): decided and signed, never
 *                   enforced. Without it such a request is 403 observe_not_allowed.
 *   Anything else (an unknown or mistyped member, an empty or oversized list, a duplicate
 *   in a list) is rejected with the JSON path, e.g.
 *   "tokens.json: [2].token_sha256: expected 64 hex digits".
 *     [{"tenant": "acme", "token_sha256": "9f86d0818..."},
 *      {"tenant": "acme", "token_sha256": "...", "subject": "ci-deploy",
 *       "actors": ["ci.release-bot"], "surfaces": ["deploy.release"]}]
 *   The principal of the i-th array element is principal i when the file is the table's
 *   only source (trigguard token list/revoke rely on it).
 *
 *   TRIGGUARD_API_KEYS: comma-separated entries, each `tenant:token` or
 *   `tenant:sha256:<64 hex>`. The tenant is everything before the first ':' (names cannot
 *   contain ':' or ','). A secret starting with "sha256:" is always a digest; anything else is
 *   a raw bearer token (1..512 chars 0x21..0x7E except ','; it may contain ':') that is
 *   SHA-256'd at load and never kept. Spaces and tabs around an entry are ignored; empty
 *   entries (",,") and an empty value are errors. Example:
 *     TRIGGUARD_API_KEYS="acme:s3cr3t-token,beta:sha256:<64 hex digits of SHA-256(token)>"
 *   Prefer digests: the environment of a process is readable by its user (/proc/PID/environ).
 *
 *   Local bypass (TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS=true): tg_tenants_set_local_bypass adds
 *   tenant "local" (if absent) with a principal of subject "local", role caller, unbound,
 *   and makes tg_auth_check map every request to it without looking at the header. The
 *   daemon must refuse to start with it unless every listen address passes
 *   tg_guard_listen_is_loopback.
 *
 * tg_rate_t     GCRA (generic cell rate algorithm) per tenant and global. A limit of R
 *               requests per minute has emission interval T = 60 s / R (integer ns, rounded
 *               down) and burst B: from idle, 1 + B requests pass at once, then one per T.
 *               State is one atomic 64-bit theoretical arrival time (TAT) per limiter,
 *               updated with a CAS loop: lock-free. A request must pass its tenant limiter
 *               and then the global one; when the global one refuses, the tenant's token is
 *               refunded, so a denied request consumes nothing anywhere.
 *
 * tg_bulkhead_t caps requests in flight, per tenant and global, with atomic counters that
 *               never exceed their cap even transiently (CAS loops). Every successful
 *               tg_bulkhead_enter must be paired with exactly one tg_bulkhead_leave with the
 *               same tenant argument (do it in the libmicrohttpd completion callback, which
 *               also runs for aborted connections); a failed enter holds nothing.
 *
 * Tenant arguments: an index from tg_tenants_t, or TG_GUARD_NO_TENANT (-1) to apply only
 * the global limit (e.g. before authentication). Limits of 0 mean unlimited.
 */
#ifndef TRIGGUARD_GUARD_H
#define TRIGGUARD_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/err.h"
#include "trigguard/kernel.h"

#define TG_GUARD_MAX_TENANTS 1024
#define TG_GUARD_MAX_TOKENS 1024 /* principals: tokens file and TRIGGUARD_API_KEYS together */
#define TG_GUARD_TENANT_NAME_MAX 64
#define TG_GUARD_SUBJECT_MAX 128
#define TG_GUARD_NAME_MAX 128    /* bytes of a bound actor id or surface name (policy's max) */
#define TG_GUARD_MAX_BINDINGS 64 /* actors, and surfaces, one principal may be bound to */
#define TG_GUARD_TOKEN_MAX 512
#define TG_GUARD_TOKENS_FILE_MAX ((size_t)1024 * 1024)
#define TG_GUARD_NO_TENANT (-1)
#define TG_GUARD_LOCAL_TENANT "local"

/* ------------------------------------------------------------------ tenants and auth */

typedef struct tg_tenants tg_tenants_t;

/* What a principal may do. Which routes each role may call is decided here, once
 * (tg_role_may_decide, tg_role_may_read_receipts), and documented in docs/OPERATIONS.md. */
typedef enum tg_role {
    TG_ROLE_CALLER = 0, /* asks for decisions, reads its tenant's receipts */
    TG_ROLE_APPROVER,   /* reviews escalations (SPEC §11.2): never asks for a decision */
    TG_ROLE_EXECUTOR,   /* redeems receipts (issue 20): reads receipts, never decides */
    TG_ROLE_ADMIN,      /* a caller that may also administer (reload, later) */
} tg_role_t;

typedef struct tg_guard_str {
    const char *ptr; /* NUL-terminated, owned by the table */
    size_t len;
} tg_guard_str_t;

/* A verified fact about a principal that a policy may judge (principal.claims.<name>): one
 * claim of a verified JWT whose value is a string, a number or a boolean (value.type is
 * TG_VT_STRING, TG_VT_NUMBER or TG_VT_BOOL; kernel.h). Claims of other types (objects,
 * arrays, null) are not facts a condition can compare and are not listed. */
typedef struct tg_claim {
    tg_guard_str_t name;
    tg_value_t value; /* strings borrow from the principal's owner, like name */
} tg_claim_t;

/* One authenticated principal. Two kinds share this shape:
 * - a token of the tenant table (tokens file, TRIGGUARD_API_KEYS, the local bypass): owned by
 *   the table, read-only, valid until tg_tenants_destroy; issuer.ptr NULL, no claims;
 * - a caller with a verified OIDC ID token (oidc.h): built per request by the oidc module
 *   and owned by whoever asked for it (valid until it is released there); issuer is the
 *   token's verified `iss`, claims its verified scalar claims.
 * Everything here is verified: nothing in it comes from the request body. */
typedef struct tg_principal {
    int tenant; /* index into the tenant table */
    tg_role_t role;
    bool observe;         /* may ask for observe mode (see the tokens file above) */
    bool subject_derived; /* no "subject" member: subject is the derived default */
    tg_guard_str_t subject;
    const tg_guard_str_t *actors; /* actors_count of them; NULL and 0 = unbound */
    size_t actors_count;
    const tg_guard_str_t *surfaces; /* surfaces_count of them; NULL and 0 = unbound */
    size_t surfaces_count;
    const tg_guard_str_t *groups; /* groups_count of them (approvers); NULL and 0 = none */
    size_t groups_count;
    tg_guard_str_t issuer;    /* ptr NULL: a token of the tenant table */
    const tg_claim_t *claims; /* claims_count of them, names unique; NULL and 0: none */
    size_t claims_count;
} tg_principal_t;

/* The shape of a principal's subject: 1..TG_GUARD_SUBJECT_MAX of [A-Za-z0-9._:@/+-] (no NUL).
 * One rule for the tokens file and for subjects an OIDC issuer's template builds. Pure. */
bool tg_guard_subject_valid(const char *s, size_t len);

/* The shape of an actor or surface binding: 1..TG_GUARD_NAME_MAX bytes without control
 * characters (an actor must also not start with '@', a policy group). Pure. */
bool tg_guard_binding_valid(const char *s, size_t len);

/* "caller", "approver", "executor", "admin" ("?" outside the enum). */
const char *tg_role_name(tg_role_t role);

/* The role named exactly s[0..len). False (and *out untouched) for anything else. */
bool tg_role_parse(tg_role_t *out, const char *s, size_t len);

/* True for the roles that may call POST /v1/evaluate, /execute and /decide: caller, admin
 * (SPEC §11.2: an approver token cannot evaluate; an executor acts on receipts). */
bool tg_role_may_decide(tg_role_t role);

/* True for the roles that may call GET /v1/receipts/{id}: caller, executor (it checks the
 * receipt before it acts), admin. */
bool tg_role_may_read_receipts(tg_role_t role);

/* True when p is unbound to actors or actor[0..len) is one of its actors (exact bytes). */
bool tg_principal_actor_allowed(const tg_principal_t *p, const char *actor, size_t len);

/* The same for surfaces. */
bool tg_principal_surface_allowed(const tg_principal_t *p, const char *surface, size_t len);

/* An empty table (no tenant can authenticate until some are loaded). Calls sodium_init.
 * Errors: TG_ERR_INVALID_ARG, TG_ERR_CRYPTO, TG_ERR_NOMEM. */
tg_err_t tg_tenants_create(tg_tenants_t **out) TG_MUST_USE;

/* Wipes the digests and frees. NULL-safe. */
void tg_tenants_destroy(tg_tenants_t *t);

/* Reads and loads a tokens file (format above), appending its tenants. diag names the path
 * and, for content errors, the JSON path. Errors: TG_ERR_NOT_FOUND (no such file), TG_ERR_IO
 * (cannot open or read, or not a regular file: tg_read_file), TG_ERR_CONFIG
 * (not a JSON array, invalid JSON, file over TG_GUARD_TOKENS_FILE_MAX, missing/extra/mistyped
 * member, bad name, bad hex, bad subject, role or list, duplicate digest or subject, more than
 * TG_GUARD_MAX_TOKENS principals or TG_GUARD_MAX_TENANTS tenants),
 * TG_ERR_NOMEM, TG_ERR_INVALID_ARG (NULL). On error the table is unchanged. */
tg_err_t tg_tenants_load_file(tg_tenants_t *t, const char *path, tg_diag_t *diag) TG_MUST_USE;

/* The same from memory; origin (may be NULL) names the source in diag. text need not be
 * NUL-terminated. Errors as tg_tenants_load_file minus TG_ERR_IO. */
tg_err_t tg_tenants_load_json(tg_tenants_t *t, const char *text, size_t len, const char *origin,
                              tg_diag_t *diag) TG_MUST_USE;

/* Loads a TRIGGUARD_API_KEYS value (format above; len bytes, need not be NUL-terminated).
 * diag names the entry number but never echoes a token. Errors: TG_ERR_CONFIG, TG_ERR_NOMEM,
 * TG_ERR_INVALID_ARG. On error the table is unchanged. */
tg_err_t tg_tenants_load_env(tg_tenants_t *t, const char *value, size_t len,
                             tg_diag_t *diag) TG_MUST_USE;

/* Adds one principal of tenant `name` (the tenant is created if new) whose token digest is
 * given, with the default subject and role, unbound. Errors: TG_ERR_CONFIG (bad name,
 * duplicate digest or subject, table full), TG_ERR_NOMEM, TG_ERR_INVALID_ARG. */
tg_err_t tg_tenants_add(tg_tenants_t *t, const char *name, size_t name_len,
                        const uint8_t token_sha256[32], tg_diag_t *diag) TG_MUST_USE;

/* Gives the empty table t the tenants of `from` (names and indices, no principals), so that a
 * table built again from changed sources (a reload) keeps every tenant's index, and with it
 * the tenant's rate-limit and bulkhead slots; a tenant whose last token went keeps its
 * index and authenticates nobody. Errors: TG_ERR_INVALID_ARG (NULL, or t not empty). */
tg_err_t tg_tenants_seed(tg_tenants_t *t, const tg_tenants_t *from) TG_MUST_USE;

/* Adds tenant name[0..len) without any principal (no token authenticates into it), unless it
 * exists: the tenants an OIDC issuer may name (oidc.h), so that they get an index (and rate
 * limit and bulkhead slots) like every other; after tg_tenants_seed the seeded indices stay.
 * Errors: TG_ERR_CONFIG (bad name, table full), TG_ERR_INVALID_ARG. */
tg_err_t tg_tenants_add_name(tg_tenants_t *t, const char *name, size_t len,
                             tg_diag_t *diag) TG_MUST_USE;

/* True when tenant `index` has at least one principal of the table (a token), i.e. is a
 * tenant of the tokens file, TRIGGUARD_API_KEYS or the local bypass, not only a name kept by
 * tg_tenants_seed or added by tg_tenants_add_name. Thread-safe. */
bool tg_tenants_has_tokens(const tg_tenants_t *t, int index);

/* Turns the local bypass on or off. Turning it on adds tenant "local" if absent, with a random
 * digest (no known token matches it). Errors: TG_ERR_CONFIG (table full), TG_ERR_INVALID_ARG. */
tg_err_t tg_tenants_set_local_bypass(tg_tenants_t *t, bool on) TG_MUST_USE;
bool tg_tenants_local_bypass(const tg_tenants_t *t);

/* Number of tenants (indices are 0..count-1). */
size_t tg_tenants_count(const tg_tenants_t *t);

/* Number of principals (tokens; indices are 0..n-1, in load order). */
size_t tg_tenants_token_count(const tg_tenants_t *t);

/* Principal `index`, or NULL out of range. */
const tg_principal_t *tg_tenants_principal(const tg_tenants_t *t, size_t index);

/* The first 2*n hex digits (lowercase) of principal `index`'s token digest into out, which
 * holds 2*n + 1 bytes (n at most 32). False out of range. For tools that name a token
 * (trigguard token list) without showing it. */
bool tg_tenants_digest_hex(const tg_tenants_t *t, size_t index, char *out, size_t n);

/* Name of tenant `index` (NUL-terminated, owned by the table, valid until destroy), or NULL
 * for an out-of-range index. *len_out (may be NULL) gets its length. */
const char *tg_tenants_name(const tg_tenants_t *t, int index, size_t *len_out);

/* Index of the tenant named exactly name[0..len), or -1. Not constant-time (names are not
 * secret). */
int tg_tenants_find(const tg_tenants_t *t, const char *name, size_t len);

/* Authenticates an Authorization header value (header NULL = header absent; len bytes, need
 * not be NUL-terminated). Accepts exactly "<scheme> <token>" with scheme "Bearer" in any case,
 * one space, and a token of 1..TG_GUARD_TOKEN_MAX chars in 0x21..0x7E. The token is SHA-256'd
 * and compared against EVERY stored digest with sodium_memcmp, without stopping at a match,
 * so the time taken does not depend on which tenant matched or whether any did. With the
 * local bypass on, returns the "local" tenant without reading the header.
 * TG_OK with *tenant_index_out set; TG_ERR_UNAUTHORIZED (absent, malformed or unknown token;
 * *tenant_index_out = -1); TG_ERR_INVALID_ARG (t or tenant_index_out NULL).
 * Thread-safe (the table is read-only). */
tg_err_t tg_auth_check(const tg_tenants_t *t, const char *header, size_t len,
                       int *tenant_index_out) TG_MUST_USE;

/* tg_auth_check, giving the whole principal: TG_OK with *out set (never NULL);
 * TG_ERR_UNAUTHORIZED (*out = NULL); TG_ERR_INVALID_ARG. Thread-safe, same timing. */
tg_err_t tg_auth_principal(const tg_tenants_t *t, const char *header, size_t len,
                           const tg_principal_t **out) TG_MUST_USE;

/* True if addr is a loopback listen address: an IPv4 literal in 127.0.0.0/8, "::1" (also
 * "[::1]" and IPv4-mapped ::ffff:127.x.y.z), or exactly "localhost". Everything else,
 * including NULL, "", "0.0.0.0" and "::", is false. Thread-safe. */
bool tg_guard_listen_is_loopback(const char *addr);

/* ------------------------------------------------------------------ GCRA rate limits */

typedef struct tg_rate tg_rate_t;

typedef struct tg_rate_opts {
    uint64_t tenant_per_min; /* RATE_LIMIT_PER_TENANT; 0 = unlimited */
    uint64_t global_per_min; /* RATE_LIMIT_GLOBAL; 0 = unlimited */
    uint64_t tenant_burst;   /* extra requests at once above the steady rate; 0 = rate/10 */
    uint64_t global_burst;   /* same for the global limiter; 0 = rate/10 */
    size_t tenants;          /* per-tenant slots; 0 = TG_GUARD_MAX_TENANTS */
} tg_rate_opts_t;
/* (The rate/10 default is capped at 1e9; a rate under 10/min gets no burst by default.) */

/* The largest rate, per minute: an emission interval of 1 ns. */
#define TG_RATE_MAX_PER_MIN INT64_C(60000000000)
/* The largest burst taken with every rate. The limiter keeps burst x interval in int64
 * nanoseconds with room to spare (under INT64_MAX / 8), and at 1/min the interval is a minute:
 * INT64_MAX / 8 / 60e9 = 19,215,358. Faster rates take more, up to 1e9. */
#define TG_RATE_BURST_ANY_RATE INT64_C(19215358)

/* Errors: TG_ERR_INVALID_ARG (out NULL), TG_ERR_CONFIG (a rate above TG_RATE_MAX_PER_MIN,
 * a burst above 1e9 or one whose burst x interval reaches INT64_MAX / 8 ns (never one up to
 * TG_RATE_BURST_ANY_RATE), tenants above TG_GUARD_MAX_TENANTS), TG_ERR_NOMEM. opts NULL =
 * everything unlimited. */
tg_err_t tg_rate_create(tg_rate_t **out, const tg_rate_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;
void tg_rate_destroy(tg_rate_t *r); /* NULL-safe */

typedef enum tg_rate_scope {
    TG_RATE_SCOPE_NONE = 0, /* no limiter applies (both unlimited) */
    TG_RATE_SCOPE_TENANT = 1,
    TG_RATE_SCOPE_GLOBAL = 2,
} tg_rate_scope_t;

/* What a check learned, for Retry-After and the IETF RateLimit / RateLimit-Policy headers.
 * Describes the tenant limiter when it applies (else the global one) on success, and the
 * limiter that refused on TG_ERR_RATE_LIMITED. */
typedef struct tg_rate_info {
    tg_rate_scope_t scope;
    int64_t retry_after_ms; /* refused: ms until this request would pass (rounded up); else 0 */
    uint64_t limit;         /* requests per window (the configured per-minute rate) */
    uint64_t burst;         /* effective burst B (1 + B pass at once) */
    uint64_t remaining;     /* requests that would pass right now after this one */
    int64_t reset_ms;       /* ms until the limiter is back to a full burst (rounded up) */
} tg_rate_info_t;

/* Admits one request for `tenant` (index or TG_GUARD_NO_TENANT) at now_ns (a monotonic clock,
 * tg_clock_mono_ns; must not run backwards by more than the burst window or requests are
 * refused longer, never admitted more). TG_OK (a token taken from each applicable limiter),
 * TG_ERR_RATE_LIMITED (nothing taken anywhere; info says from which limiter and
 * retry_after_ms), TG_ERR_INVALID_ARG (r NULL, tenant out of range). info may be NULL.
 * Lock-free, thread-safe. */
tg_err_t tg_rate_check(tg_rate_t *r, int tenant, int64_t now_ns, tg_rate_info_t *info) TG_MUST_USE;

/* Retry-After header value: retry_after_ms rounded up to whole seconds, at least 1. */
int64_t tg_rate_retry_after_s(int64_t retry_after_ms);

typedef struct tg_rate_stats {
    uint64_t rejected_tenant; /* refusals by a tenant limiter since create */
    uint64_t rejected_global; /* refusals by the global limiter */
} tg_rate_stats_t;
void tg_rate_stats(const tg_rate_t *r, tg_rate_stats_t *out); /* thread-safe */

/* ------------------------------------------------------------------ bulkheads */

typedef struct tg_bulkhead tg_bulkhead_t;

typedef struct tg_bulkhead_opts {
    uint64_t global_max; /* BULKHEAD_GLOBAL_MAX_IN_FLIGHT; 0 = unlimited */
    uint64_t tenant_max; /* BULKHEAD_TENANT_MAX_IN_FLIGHT; 0 = unlimited */
    size_t tenants;      /* per-tenant slots; 0 = TG_GUARD_MAX_TENANTS */
} tg_bulkhead_opts_t;

/* Errors: TG_ERR_INVALID_ARG, TG_ERR_CONFIG (tenants above TG_GUARD_MAX_TENANTS),
 * TG_ERR_NOMEM. opts NULL = unlimited. */
tg_err_t tg_bulkhead_create(tg_bulkhead_t **out, const tg_bulkhead_opts_t *opts,
                            tg_diag_t *diag) TG_MUST_USE;
void tg_bulkhead_destroy(tg_bulkhead_t *b); /* NULL-safe */

typedef enum tg_bulkhead_reason {
    TG_BULKHEAD_OK = 0,
    TG_BULKHEAD_TENANT_FULL = 1,
    TG_BULKHEAD_GLOBAL_FULL = 2,
} tg_bulkhead_reason_t;

/* Takes one in-flight slot for `tenant` (index or TG_GUARD_NO_TENANT) and one global slot,
 * tenant first. TG_OK (both held: call tg_bulkhead_leave exactly once later),
 * TG_ERR_OVERLOADED (nothing held; *why, if not NULL, says which cap), TG_ERR_INVALID_ARG
 * (b NULL or tenant out of range; nothing held). Lock-free, thread-safe. */
tg_err_t tg_bulkhead_enter(tg_bulkhead_t *b, int tenant, tg_bulkhead_reason_t *why) TG_MUST_USE;

/* Releases the slots of one successful enter (same tenant argument). A leave without a
 * matching enter is a caller bug: the counter is not driven below zero and the event is
 * counted in stats.unbalanced_leaves. Thread-safe. */
void tg_bulkhead_leave(tg_bulkhead_t *b, int tenant);

typedef struct tg_bulkhead_stats {
    uint64_t in_flight;         /* global slots held now */
    uint64_t rejected_tenant;   /* TG_ERR_OVERLOADED because a tenant was full, since create */
    uint64_t rejected_global;   /* TG_ERR_OVERLOADED because the global cap was full */
    uint64_t unbalanced_leaves; /* leaves without a held slot (should stay 0) */
} tg_bulkhead_stats_t;
void tg_bulkhead_stats(const tg_bulkhead_t *b, tg_bulkhead_stats_t *out); /* thread-safe */

/* Slots held now by one tenant (0 for an out-of-range index). Thread-safe. */
uint64_t tg_bulkhead_tenant_in_flight(const tg_bulkhead_t *b, int tenant);

#endif /* TRIGGUARD_GUARD_H */
