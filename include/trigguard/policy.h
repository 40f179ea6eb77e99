/* policy.h — policy bundles: validate and compile once, resolve requests into kernel frames.
 *
 * A bundle (docs/POLICY.md has the full format and a complete example) is a JSON object:
 *
 *   member       type                          meaning
 *   version      string (1..64)                policy version, echoed in receipts
 *   authority    string (1..128), optional     authority id (default "trigguard-local")
 *   description  string, optional              free text, ignored
 *   surfaces     object name -> surface        the surface registry (at least one)
 *   signals      object name -> signal         declared signals (riskScore is implicit)
 *   actors       object group -> [actor ids]   groups usable as "@group" in actor lists
 *   tools        object tool -> surface|{surface, action}   tool-call mapping
 *   tiers        object "1".."3" -> number|{risk_threshold}  default 0.3 / 0.6 / 0.8
 *   limits       array of limit, optional      stateful limits (docs/POLICY.md "Limits")
 *   timezone     string, optional              IANA zone of time.* conditions (default UTC)
 *   sets         object name -> data set       named data sets for in / not_in (below)
 *
 *   surface: {tier 1|2|3, frozen bool, description, timezone, required_context {name: type} or
 *             [names], optional_context {name: type} or [names] (may be absent; a name in
 *             both lists is an error), actors [ids or "@group"], rules [rule], default
 *             "deny"|"permit"|{effect, reason}}   types: string number boolean object array any
 *   rule:    {id, effect "permit"|"deny", reason UPPER_SNAKE, when [condition],
 *             unconditional bool (says a permit without conditions on a tier-1 surface is
 *             meant: tg_policy_lint reports it otherwise)}
 *   condition: {field "context.<name>"|"actor"|"action"|"signals.<name>"|"tenant"|
 *               "principal.subject"|"principal.issuer"|"principal.claims.<name>"|
 *               "time.hour"|"time.weekday"|"time.date",
 *               op eq|ne|gt|gte|lt|lte|in|not_in|exists|prefix|suffix|glob,
 *               value | value_from} | {field, op in|not_in, set}
 *              or a group {"any_of": [condition]} | {"all_of": [condition]} |
 *              {"not": condition}, nested at most TG_POLICY_MAX_NESTING deep.
 *              prefix/suffix/glob take a string and hold only on a string value (glob:
 *              `*` any run, `?` one code point; tg_glob_match). value_from names another
 *              field of the same request (eq..lte only; either side absent: false, ne too).
 *              A when[] list is an all_of; `not` over an absent field HOLDS (docs/POLICY.md:
 *              test absence with exists).
 *              tenant and principal.* are verified facts of the authenticated caller, bound
 *              into the frame by the caller of tg_frame_from_request (never from the body).
 *              time.*: the decision's instant (frame.now_ms) in the surface's timezone, else
 *              the bundle's, else UTC: hour a number 0..23, weekday "mon".."sun", date
 *              "YYYY-MM-DD" (ordered operators compare dates). The zone's rules come from
 *              the host's tz database (TZif under zoneinfo_dir), read at compile time.
 *   data set: {file "name.txt"|"name.json", type?, sha256?} | {values [...], type?}
 *              type "string" (default for text files) or "number"; a text file is one value
 *              per line (UTF-8, no control characters, empty lines ignored, duplicates
 *              harmless), a .json file one array. Files resolve against the bundle's
 *              directory (tg_policy_opts_t.base_dir): relative, no "." / ".." components,
 *              the file itself no symbolic link, a regular file. sha256 (optional) pins the
 *              file's content: another content is a compile error.
 *   signal:  {type "number"|"boolean", description, reason, deny_on_tier [tiers],
 *             thresholds {"1".."3": number}, required_for [surfaces or "*"]}
 *   limit:   {id, surface, key [0..4 of "actor"|"tenant"|"principal.subject"|
 *             "principal.issuer"|"context.<f>"], "sum": "context.<f>" | "count": true,
 *             window_s 1..2678400, max (finite, >= 0), reason (default LIMIT_EXCEEDED),
 *             description}; context fields of key and sum must be required_context of the
 *             surface (key: string or number; sum: number), at most TG_FRAME_MAX_LIMITS
 *             limits per surface and TG_POLICY_MAX_LIMITS per bundle
 *
 * Compilation is deterministic in the bundle's *content*: every object is walked in sorted
 * member order, so two texts with the same canonical form (same policyHash) compile to
 * identical tables and ids. policyHash = SHA-256 of the RFC 8785 canonical form of the
 * bundle (the whole JSON value given to tg_policy_compile) in which every file data set's
 * object carries a "sha256" member: the lowercase hex SHA-256 of the file's bytes (set, or
 * checked when the bundle pins it). So the hash covers the sets' content, a changed file is
 * a new policyHash, and `trigguard canon --sha256` of the bundle file equals policyHash only
 * for bundles without file sets (or whose file sets all pin their sha256).
 *
 * Validation errors return TG_ERR_POLICY_INVALID with one message "<json path>: <problem>",
 * e.g. `surfaces.payments.charge.rules[2].when[0].op: unknown operator "gtx"`; the first
 * error found is reported.
 *
 * Thread safety: a compiled tg_policy_t is immutable. Any number of threads may read it
 * (tg_frame_from_request, tg_kernel_decide on its tables, accessors) concurrently without
 * locks; it must outlive every frame and decision that refers to it. Swapping bundles =
 * compile a new one, publish the pointer atomically, destroy the old one once no reader
 * holds it.
 */
#ifndef TRIGGUARD_POLICY_H
#define TRIGGUARD_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/err.h"
#include "trigguard/kernel.h"

/* Limits (max accepted; max + 1 is an error naming the limit). */
#define TG_POLICY_MAX_SURFACES 256         /* surfaces in a bundle */
#define TG_POLICY_MAX_RULES 64             /* rules per surface */
#define TG_POLICY_MAX_CONDITIONS 16        /* conditions per rule */
#define TG_POLICY_MAX_LIST 64              /* values of an in / not_in list */
#define TG_POLICY_MAX_REQUIRED 32          /* required context fields per surface */
#define TG_POLICY_MAX_OPTIONAL 32          /* optional context fields per surface */
#define TG_POLICY_MAX_ACTORS 256           /* actors per surface (groups expanded) and per group */
#define TG_POLICY_MAX_GROUPS 64            /* actor groups */
#define TG_POLICY_MAX_SIGNALS 32           /* declared signals, riskScore included */
#define TG_POLICY_MAX_FIELDS 256           /* distinct context field names in the bundle */
#define TG_POLICY_MAX_CLAIMS 16            /* distinct principal.claims.<name> in the bundle */
#define TG_POLICY_MAX_TOOLS 1024           /* tools */
#define TG_POLICY_MAX_NAME 128             /* bytes of a surface/field/signal/actor/tool/rule id */
#define TG_POLICY_MAX_REASON TG_REASON_MAX /* bytes of a reason code (kernel.h owns the format) */
#define TG_POLICY_MAX_VERSION 64           /* bytes of version */
#define TG_POLICY_MAX_AUTHORITY 128        /* bytes of authority */
#define TG_POLICY_MAX_VALUE 1024           /* bytes of a string operand */
#define TG_POLICY_MAX_FILE ((size_t)1024 * 1024) /* bytes of a bundle file */
#define TG_POLICY_MAX_NESTING 4          /* groups around one condition (any_of/all_of/not) */
#define TG_POLICY_MAX_GROUP 16           /* members of one any_of / all_of */
#define TG_POLICY_MAX_RULE_NODES 64      /* conditions in one rule, groups and members counted */
#define TG_POLICY_MAX_SETS 16            /* named data sets ("sets") */
#define TG_POLICY_MAX_SET_VALUES 1000000 /* values of one data set */
#define TG_POLICY_MAX_SET_BYTES ((size_t)64 * 1024 * 1024) /* bytes of one data set file */
#define TG_POLICY_MAX_ZONES 16                             /* distinct time zones ("timezone") */
#define TG_POLICY_ZONEINFO "/usr/share/zoneinfo"           /* the host's tz database (TZif files) */
#define TG_POLICY_MAX_LIMITS 64                            /* stateful limits in a bundle */
#define TG_LIMIT_KEY_PARTS 4                               /* parts of a limit's key */
#define TG_LIMIT_WINDOW_MAX_S 2678400                      /* a limit's window: 31 days */

/* The policy's limits that the kernel's formats must hold (kernel.h, kernel_tables.h). */
_Static_assert(TG_POLICY_MAX_SIGNALS <= TG_FRAME_MAX_SIGNALS,
               "a frame has a slot, and a signal set a bit, for every signal a bundle declares");
_Static_assert(TG_POLICY_MAX_REQUIRED <= TG_FRAME_MAX_CONTEXT,
               "a frame can carry every context field a surface requires");
_Static_assert(TG_POLICY_MAX_REQUIRED + TG_POLICY_MAX_OPTIONAL <= TG_FRAME_MAX_CONTEXT,
               "a frame can carry every context field a surface declares");
_Static_assert(TG_POLICY_MAX_CLAIMS <= TG_FRAME_MAX_CLAIMS,
               "a frame has a slot for every principal claim a bundle names");
_Static_assert(TG_POLICY_MAX_RULES <= UINT16_MAX, "tg_decision_t.rules_evaluated is a uint16_t");

typedef struct tg_policy tg_policy_t;

/* Validates and compiles a parsed bundle. bundle is only read (the caller keeps it; the
 * policy copies what it keeps). On success *out owns a new policy (tg_policy_destroy).
 * Errors: TG_ERR_POLICY_INVALID (diag: path and problem), TG_ERR_INVALID_ARG (NULL out or
 * bundle), TG_ERR_NOMEM, canon errors from hashing (TG_ERR_JSON_*). On error *out = NULL.
 * Thread-safe (no shared state). */
tg_err_t tg_policy_compile(tg_policy_t **out, const json_t *bundle, tg_diag_t *diag) TG_MUST_USE;

/* Where a bundle's outside inputs are. base_dir: the directory data set files resolve
 * against (NULL: a file data set is an error saying so); zoneinfo_dir: the tz database
 * (NULL: TG_POLICY_ZONEINFO). The strings are only read during the call. */
typedef struct tg_policy_opts {
    const char *base_dir;
    const char *zoneinfo_dir;
} tg_policy_opts_t;

/* tg_policy_compile with opts (NULL = all defaults; tg_policy_compile is this with NULL).
 * Additional errors: those of reading a data set file or a zone file (TG_ERR_NOT_FOUND,
 * TG_ERR_IO, TG_ERR_LIMIT), reported as TG_ERR_POLICY_INVALID naming the JSON path. */
tg_err_t tg_policy_compile_opts(tg_policy_t **out, const json_t *bundle,
                                const tg_policy_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;

/* tg_policy_load_text with opts (as tg_policy_compile_opts). */
tg_err_t tg_policy_load_text_opts(tg_policy_t **out, const char *text, size_t len,
                                  const tg_policy_opts_t *opts, tg_diag_t *diag) TG_MUST_USE;

/* Strict-parses text (len bytes, at most TG_POLICY_MAX_FILE; duplicate names rejected)
 * and compiles it. Errors: those of tg_json_parse (TG_ERR_JSON_*, TG_ERR_LIMIT) and of
 * tg_policy_compile. */
tg_err_t tg_policy_load_text(tg_policy_t **out, const char *text, size_t len,
                             tg_diag_t *diag) TG_MUST_USE;

/* Reads path (at most TG_POLICY_MAX_FILE bytes) and tg_policy_load_text's it, with data set
 * files resolved against path's directory (so a reload re-reads them). Errors:
 * TG_ERR_NOT_FOUND (no such file), TG_ERR_IO (cannot open/read, not a regular file),
 * TG_ERR_LIMIT (too big), and those of tg_policy_load_text. diag names the path for file errors. */
tg_err_t tg_policy_load_file(tg_policy_t **out, const char *path, tg_diag_t *diag) TG_MUST_USE;

/* Frees a policy. NULL-safe. No frame or decision referring to it may be used after. */
void tg_policy_destroy(tg_policy_t *p);

/* Accessors (p must be a compiled policy, not NULL): constant for the policy's lifetime,
 * strings NUL-terminated, thread-safe. */
const char *tg_policy_version(const tg_policy_t *p);
const char *tg_policy_authority(const tg_policy_t *p);
const char *tg_policy_hash_hex(const tg_policy_t *p); /* 64 lowercase hex */
const uint8_t *tg_policy_hash(const tg_policy_t *p);  /* 32 raw bytes */
size_t tg_policy_surface_count(const tg_policy_t *p);
size_t tg_policy_rule_count(const tg_policy_t *p); /* over all surfaces */
size_t tg_policy_signal_count(const tg_policy_t *p);
size_t tg_policy_tool_count(const tg_policy_t *p);

/* The principal claims the bundle's conditions name (principal.claims.<name>), by claim id
 * 0..tg_policy_claim_count-1, in a deterministic order (as field ids). Whoever authenticated
 * a request binds frame.claims with them: for each id whose name the principal has a
 * verified scalar claim of, one slot {id, value}, in id order (kernel.h). The policy module
 * knows no principal; that is why it hands the names out instead of binding them itself.
 * tg_policy_claim_name: {NULL, 0} when id is out of range; the view is NUL-terminated and
 * lives as long as p. Thread-safe. */
size_t tg_policy_claim_count(const tg_policy_t *p);
tg_sv_t tg_policy_claim_name(const tg_policy_t *p, uint32_t id);

/* The kernel's tables of p (kernel_tables.h): what tg_kernel_decide reads, owned by p and
 * valid as long as it. NULL p gives NULL, which tg_kernel_decide decides SILENCE
 * INVALID_FRAME, so `tg_kernel_decide(&d, tg_policy_tables(p), &f)` needs no check of p. */
const tg_kernel_tables_t *tg_policy_tables(const tg_policy_t *p);

/* The authorityId a receipt decided under p carries, one rule for `serve` and `check`
 * (docs/POLICY.md): the operator's --authority-id when `configured` is non-NULL and
 * non-empty, else the bundle's `authority` (itself "trigguard-local" when the bundle has
 * none). Returns one of the two strings (p's lives as long as p). Thread-safe. */
const char *tg_policy_authority_id(const tg_policy_t *p, const char *configured);

/* Index of surface `name` (len bytes) in O(1) expected time. TG_ERR_UNKNOWN_SURFACE when
 * the policy has no such surface. */
tg_err_t tg_policy_surface_find(uint32_t *index, const tg_policy_t *p, const char *name,
                                size_t len) TG_MUST_USE;

/* Name and tier of surface `index` (< tg_policy_surface_count); {NULL,0} / 0 when out of
 * range. Surfaces are indexed in sorted name order. */
tg_sv_t tg_policy_surface_name(const tg_policy_t *p, uint32_t index);
int tg_policy_surface_tier(const tg_policy_t *p, uint32_t index);
/* The surface's "mode" is "observe" (SPEC §11.1: every request on it is decided, signed and
 * recorded, never enforced); false when out of range. */
bool tg_policy_surface_observe(const tg_policy_t *p, uint32_t index);

/* The "approval" settings (SPEC §11.2, docs/POLICY.md "Escalate") of the escalate rule
 * rule_id (the decision's rule_id) of surface `surface`: owned by the policy, valid while it
 * lives. NULL when the surface or rule does not exist or the rule is not an escalate rule.
 * Bundle: a rule with "effect": "escalate" may have "approval": {"required": N (default 1),
 * "approvers": ["@group" | "subject", ...] (required, 1..TG_APPROVAL_MAX_APPROVERS distinct
 * entries, each a subject's shape, tg_guard_subject_valid, with an optional leading '@'),
 * "ttl_s" (default 3600), "consume_within_s" (default 900)}; a reason defaults to
 * APPROVAL_REQUIRED. N above the number of entries is refused unless an entry is a group. */
const struct tg_approval_spec *tg_policy_rule_approval(const tg_policy_t *p, uint32_t surface,
                                                       tg_sv_t rule_id);

/* ---- stateful limits (docs/POLICY.md "Limits") ----------------------------------------
 *
 * A limit id (0..tg_policy_limit_count-1) is the index of the limit in the bundle's
 * "limits" array, which is also tables.limits (kernel_tables.h). Its name (the bundle's
 * "id") is what the store of totals keys on: ids are per policy, names survive a reload,
 * and a changed limit with the same name keeps its running totals. */

/* The reason a limit denies with when the bundle names none. */
#define TG_LIMIT_DEFAULT_REASON "LIMIT_EXCEEDED"

/* Number of limits; the limit `id` (kernel_tables.h tg_limit_t; NULL when out of range;
 * owned by p). Thread-safe. */
size_t tg_policy_limit_count(const tg_policy_t *p);
const struct tg_limit *tg_policy_limit(const tg_policy_t *p, uint32_t id);

/* The id of the limit named name (len bytes): TG_OK, TG_ERR_NOT_FOUND, TG_ERR_INVALID_ARG.
 * Linear in the number of limits (at most TG_POLICY_MAX_LIMITS). */
tg_err_t tg_policy_limit_find(uint32_t *id, const tg_policy_t *p, const char *name,
                              size_t len) TG_MUST_USE;

/* The limits of surface `index`, ascending ids (the order the kernel checks and the
 * pipeline reserves them in), *n of them; NULL and *n = 0 when none or out of range. */
const uint32_t *tg_policy_surface_limits(const tg_policy_t *p, uint32_t index, uint32_t *n);

/* The window of limit `id` in seconds (0 when out of range). */
int64_t tg_policy_limit_window_s(const tg_policy_t *p, uint32_t id);

/* Where frame f's total for limit `id` lives at instant now_ms (Unix ms, UTC):
 * key: SHA-256 over a domain tag, then the frame's tenant and each key part of the limit
 * in order, each as a type byte (0 absent, 1 string, 2 number, 3 boolean) and a 4-byte
 * big-endian length before its bytes (numbers in their RFC 8785 text, so 5 and 5.0 are
 * one key): unambiguous, bounded, and always led by the tenant, so a total never crosses
 * tenants. An absent part (e.g. no actor) is a part of its own, not an error.
 * *window_start_s: the fixed window holding now_ms, aligned to the Unix epoch
 * (floor(now_s / window_s) * window_s; a daily window starts at 00:00 UTC). Errors:
 * TG_ERR_INVALID_ARG (NULL argument, id out of range, now_ms negative). Pure;
 * thread-safe. */
tg_err_t tg_policy_limit_key(uint8_t key[32], int64_t *window_start_s, const tg_policy_t *p,
                             uint32_t id, const tg_frame_t *f, int64_t now_ms) TG_MUST_USE;
/* ---- lint: what compiles but is probably wrong ----------------------------------------- */

/* tg_policy_lint reads a compiled bundle the way a reviewer would and reports findings
 * (docs/POLICY.md, "policy lint", lists every code with an example). Errors are bundles
 * `policy check --strict`, `check` and `serve` refuse; warnings are printed and accepted.
 *
 *   code                        severity  path names                 what
 *   undeclared_field            error     the condition's field or   context.<name> not in the
 *                                         value_from                 surface's required_context
 *                                                                    or optional_context
 *   never_matches               error     the rule                   contradictory conditions on
 *                                                                    one field in one all-of
 *   shadowed_rule               error     the rule                   an earlier rule of the same
 *                                                                    effect holds whenever it
 *                                                                    does (its conditions are a
 *                                                                    subset of this one's)
 *   duplicate_rule              error     the rule                   same effect, same conditions
 *                                                                    as an earlier rule
 *   permit_overridden_by_deny   error     the rule                   the permit's conditions
 *                                                                    include all of a deny's
 *   unconditional_tier1_permit  error     the rule                   a permit without conditions
 *                                                                    on a tier-1 surface, not
 *                                                                    marked "unconditional": true
 *   version_reused              error     version                    same version as `previous`,
 *                                                                    different policyHash
 *   non_integer_amount          warning   the operand                a non-integer number compared
 *                                                                    with a context field
 *
 * Conditions are compared canonically (RFC 8785, "description" left out, in / not_in
 * lists as sets). A condition is a leaf {field, op, value|value_from|set} or a group
 * {"any_of": [...]}, {"all_of": [...]}, {"not": {...}}; the walk goes into every group, and a
 * shape or operator it does not know yields no finding (never a false error). Paths are the
 * compiler's ("surfaces.payments.charge.rules[0].when[1].field"). The codes are stable
 * (scripts and tests match them); messages are for people. */
typedef enum tg_lint_severity { TG_LINT_ERROR = 0, TG_LINT_WARNING = 1 } tg_lint_severity_t;

typedef enum tg_lint_code {
    TG_LINT_UNDECLARED_FIELD = 0,
    TG_LINT_NEVER_MATCHES,
    TG_LINT_SHADOWED_RULE,
    TG_LINT_DUPLICATE_RULE,
    TG_LINT_PERMIT_OVERRIDDEN_BY_DENY,
    TG_LINT_UNCONDITIONAL_TIER1_PERMIT,
    TG_LINT_VERSION_REUSED,
    TG_LINT_NON_INTEGER_AMOUNT,
    TG_LINT__COUNT
} tg_lint_code_t;

#define TG_LINT_MAX_FINDINGS 128 /* kept in a report; more are counted in `dropped` */
#define TG_LINT_MAX_PATH 256     /* bytes of a finding's path, NUL included (truncated) */
#define TG_LINT_MAX_MESSAGE 256  /* bytes of its message, NUL included (truncated) */

typedef struct tg_lint_finding {
    tg_lint_severity_t severity;
    tg_lint_code_t code;
    char path[TG_LINT_MAX_PATH];
    char message[TG_LINT_MAX_MESSAGE];
} tg_lint_finding_t;

/* Caller-owned (about 66 KiB: allocate it, do not put it on a small stack). */
typedef struct tg_lint_report {
    size_t n;        /* findings[0..n), in bundle order (surfaces sorted by name, rules in order) */
    size_t errors;   /* over all findings, kept or dropped */
    size_t warnings; /* likewise */
    size_t dropped;  /* findings beyond TG_LINT_MAX_FINDINGS, counted only */
    tg_lint_finding_t findings[TG_LINT_MAX_FINDINGS];
} tg_lint_report_t;

/* The stable snake_case name of a code ("undeclared_field"); "?" out of range. */
const char *tg_lint_code_name(tg_lint_code_t code);
/* "error" or "warning". */
const char *tg_lint_severity_name(tg_lint_severity_t s);

/* Lints `bundle`, which must be the JSON value `p` was compiled from (tg_policy_compile
 * succeeded on it). previous: the policy this one replaces (NULL = none): its version and
 * hash are compared with p's. Fills *out (reset first). Errors: TG_ERR_INVALID_ARG (NULL
 * out, p or bundle), TG_ERR_NOMEM, canon errors (TG_ERR_JSON_*) from canonicalizing a
 * condition; on error *out holds what was found so far. Findings are not errors: the
 * return is TG_OK whatever the bundle says. Thread-safe (reads p, previous and bundle). */
tg_err_t tg_policy_lint(tg_lint_report_t *out, const tg_policy_t *p, const json_t *bundle,
                        const tg_policy_t *previous) TG_MUST_USE;

/* Appends the report as one JSON object: {"findings":[{"severity","code","path",
 * "message"}...],"errors":N,"warnings":N,"dropped":N}. Errors: tg_buf errors. */
tg_err_t tg_lint_report_json(tg_buf_t *out, const tg_lint_report_t *r) TG_MUST_USE;

/* tg_policy_load_text, then (strict) tg_policy_lint against previous: a bundle with a lint
 * error is refused with TG_ERR_POLICY_LINT, diag "<path>: <code>: <message>" of the first
 * error (and "(and N more)"). report (NULL = not wanted) receives the findings, the
 * warnings of an accepted bundle included, whether or not strict. Other errors: those of
 * tg_policy_load_text and tg_policy_lint. On error *out = NULL. Thread-safe. */
tg_err_t tg_policy_load_text_checked(tg_policy_t **out, const char *text, size_t len, bool strict,
                                     const tg_policy_t *previous, tg_lint_report_t *report,
                                     tg_diag_t *diag) TG_MUST_USE;

/* The same for a file (tg_policy_load_file's limits and errors). */
tg_err_t tg_policy_load_file_checked(tg_policy_t **out, const char *path, bool strict,
                                     const tg_policy_t *previous, tg_lint_report_t *report,
                                     tg_diag_t *diag) TG_MUST_USE;

/* ---- routes: the gate (GET|POST /v1/gate; docs/POLICY.md "Routes") ------------------
 *
 * The bundle's "routes" map a request to a service (its method, its path, its headers), as
 * a proxy's auth subrequest forwards them, to a decision request. tg_policy_route_request
 * finds the first route whose method and path match and builds {"surface", "action",
 * "context"?} from it; header(ud, NAME) gives the original request's header NAME (NULL when
 * absent; valid until the call returns). Errors: TG_ERR_NOT_FOUND (no route matches, or the
 * path is not a plain absolute path: empty, "." or ".." segments, an encoded '/', '\' or
 * '.', a backslash or a control byte; diag says which), TG_ERR_REQUEST_INVALID (a header
 * value that is not UTF-8), TG_ERR_NOMEM. *out (a new reference) is NULL on error.
 * Thread-safe. */
#define TG_POLICY_MAX_ROUTES 256 /* routes in a bundle */
typedef const char *(*tg_header_fn)(void *ud, const char *name);
tg_err_t tg_policy_route_request(json_t **out, const tg_policy_t *p, const char *method,
                                 const char *uri, tg_header_fn header, void *ud,
                                 tg_diag_t *diag) TG_MUST_USE;
size_t tg_policy_route_count(const tg_policy_t *p);

/* ---- requests -> frames -------------------------------------------------------------- */

/* The normalized request pieces the pipeline needs besides the frame (request hash,
 * idempotency, nonce, receipt). Views and json pointers borrow from the request tree. */
typedef struct tg_request_meta {
    tg_sv_t idempotency_key;   /* idempotency_key or intent_id; ptr NULL = absent */
    tg_sv_t nonce;             /* ptr NULL = absent */
    tg_sv_t subject_digest;    /* ptr NULL = absent */
    tg_sv_t prev_receipt_hash; /* ptr NULL = absent */
    tg_sv_t tool;              /* tool-call shape: the tool name; else absent */
    tg_sv_t execution_mode;    /* executionMode | execution_mode, normalized to "enforce" or
                                  "observe" ("report"; SPEC §11.1); static text; ptr NULL =
                                  absent (enforce) */
    tg_sv_t approval_id;       /* approval_id | approvalId: the approval a resumed request
                                  names (SPEC §11.2), a transport field like the
                                  idempotency key (not hashed); ptr NULL = absent */
    tg_sv_t receipt_signing;   /* receiptSigning | receipt_signing: "receipt" or "batch" (SPEC
                                  §12), a transport field (not hashed); its value is the
                                  pipeline's to check; ptr NULL = absent */
    const json_t *context;     /* "context" or "args" object; NULL = absent */
    const json_t *signals;     /* "signals" object; NULL = absent */
} tg_request_meta_t;

/* Converts a parsed request (SPEC §3.1, or the tool-call shape {"tool","args","intent_id"})
 * into a kernel frame bound to policy p. Accepted members: surface | tool, action,
 * actor | actorId, context | args, signals, idempotency_key | intent_id, nonce,
 * subjectDigest, prevReceiptHash, executionMode | execution_mode ("enforce", "observe" or
 * "report"; anything else is TG_ERR_REQUEST_INVALID), approval_id | approvalId (its shape is
 * the pipeline's to check), receiptSigning | receipt_signing (likewise); all strings except
 * context/args and
 * signals (objects).
 * A tool is mapped through the policy's tools table to its surface (and action, when the
 * mapping names one; else the action is the tool name unless "action" is given).
 * Context fields the policy never mentions are not copied (no rule can see them); signals
 * the policy does not declare are counted for the kernel (UNKNOWN_SIGNAL). Signal and
 * context value types are not judged here: the kernel decides SILENCE for wrong ones.
 * meta may be NULL. Views in *out and *meta borrow from `request`, which must outlive
 * them. Errors: TG_ERR_REQUEST_INVALID (not an object, unknown member, wrong type, alias
 * given twice, neither surface nor tool, more than TG_FRAME_MAX_CONTEXT context fields the
 * policy uses; diag names the member), TG_ERR_UNKNOWN_SURFACE (surface not in the policy,
 * or tool not in its tools table), TG_ERR_INVALID_ARG (NULL argument). No allocation.
 * Thread-safe. */
tg_err_t tg_frame_from_request(tg_frame_t *out, tg_request_meta_t *meta, const tg_policy_t *p,
                               const json_t *request, tg_diag_t *diag) TG_MUST_USE;

/* request_hash (SPEC §3.3 step 4) of a request converted by tg_frame_from_request: SHA-256
 * of the canonical JSON of the *normalized* request object {surface, action, actor,
 * context, executionMode, signals, subjectDigest, prevReceiptHash} (members absent in the
 * request stay
 * absent; aliases and the tool-call shape map to these names, so equivalent requests
 * hash alike; idempotency_key and nonce are transport-only and excluded). Errors:
 * TG_ERR_NOMEM, canon errors, TG_ERR_INVALID_ARG. Thread-safe. */
tg_err_t tg_request_hash(uint8_t out[32], const tg_frame_t *f, const tg_request_meta_t *meta,
                         tg_diag_t *diag) TG_MUST_USE;

/* ---- decisions -> JSON --------------------------------------------------------------- */

/* The decision object of SPEC §3.2 as the daemon answers it and rebuilds it from the ledger
 * for a replay (record.h): one writer, so that a replay is the original byte for byte.
 *   {"decision":D,"enforcement":"EXECUTED"|"BLOCKED"|"PENDING_APPROVAL","reason_code":R,
 *    "execution_id":E?,"request_hash":H?,"policy_version":V,"approval_id":A?,"approval":{...}?,
 *    "detail":T?,"receipt":{...}?   ... then "trace"? and "}"
 * enforcement is EXECUTED for PERMIT, PENDING_APPROVAL for ESCALATE, BLOCKED otherwise. Strings are
 * written as canonical JSON strings (decision, execution_id and request_hash are fixed-alphabet
 * values). */
typedef struct tg_decision_body {
    const char *decision; /* "PERMIT", "DENY", "SILENCE" or "ESCALATE" */
    tg_text_t reason;
    tg_text_t execution_id; /* ptr NULL = member omitted */
    tg_text_t request_hash; /* 64 lowercase hex; ptr NULL = member omitted */
    tg_text_t policy_version;
    tg_text_t detail;  /* SILENCE: what was missing or invalid (tg_decision_detail); ptr NULL
                          = omitted. Written after policy_version. */
    tg_text_t receipt; /* the signed receipt's JSON text, embedded as is; ptr NULL = omitted */
    /* Observe mode (SPEC §11.1): decision and reason above are the policy's (would_*), and
     * the object written is {"decision":"PERMIT","enforcement":"NOT_ENFORCED","reason_code":
     * "OBSERVE_MODE","execution_mode":"observe","would_decision":D,"would_reason_code":R,
     * execution_id, request_hash, policy_version, receipt}: no detail (the receipt holds
     * none, and a replay rebuilds the body from the receipt alone). */
    bool observe;
    /* ESCALATE (SPEC §11.2): enforcement is PENDING_APPROVAL, and "approval_id" and
     * "approval" follow "policy_version" (before detail and receipt): the id, and the
     * approval's API object (approval.h tg_approval_api_json) embedded as is. A PERMIT that
     * consumed an approval carries both too. ptr NULL = omitted. In observe mode an
     * ESCALATE is a would_decision like any other, with neither member. An approval
     * without an approval_id is TG_ERR_INVALID_ARG. */
    tg_text_t approval_id;
    tg_text_t approval;
} tg_decision_body_t;

/* For a SILENCE, one sentence naming the request field or signal that was missing or
 * invalid ("context.amount is missing or not of its declared type"), into out[0..cap)
 * (always NUL-terminated when cap > 0). Returns its length; 0 (and "") for PERMIT and DENY.
 * Pure; thread-safe. */
size_t tg_decision_detail(char *out, size_t cap, const tg_decision_t *d);

/* Appends the object above *without* its closing brace, so that a trace
 * (tg_decision_trace_append) may follow; the caller appends '}'. Errors: tg_buf errors,
 * TG_ERR_INVALID_ARG (NULL argument, invalid UTF-8 in a string). On error out->len is
 * restored. No printf: it runs on every decision and every replay. Thread-safe. */
tg_err_t tg_decision_body_open(tg_buf_t *out, const tg_decision_body_t *b) TG_MUST_USE;

/* Appends `,"trace":{...}` (the ?explain=1 member, below) for decision d. f may be NULL (no
 * surface in the trace). Errors: tg_buf errors, TG_ERR_INVALID_ARG. Thread-safe. */
tg_err_t tg_decision_trace_append(tg_buf_t *out, const tg_decision_t *d, const tg_policy_t *p,
                                  const tg_frame_t *f) TG_MUST_USE;

typedef struct tg_decision_json_opts {
    const char *execution_id;     /* NULL = member omitted */
    const char *request_hash_hex; /* NULL = member omitted */
    const char *receipt;          /* signed receipt JSON text to embed; NULL = omitted */
    size_t receipt_len;
    int trace; /* nonzero: add "trace" (SPEC §3.2 ?explain=1) */
} tg_decision_json_opts_t;

/* Appends the decision object of SPEC §3.2: {"decision","enforcement","reason_code",
 * "execution_id"?, "request_hash"?, "policy_version", "receipt"?, "trace"?}. The trace is
 * {"states":[...], "decided_in", "decided_by", "rule"?, "subject"?, "surface", "tier",
 * "rules_evaluated", "policy_hash"}. f may be NULL (no surface in the trace); opts may be
 * NULL (no optional members). Errors: tg_buf errors, TG_ERR_INVALID_ARG (NULL d or p,
 * invalid UTF-8 in a view). On error out->len is restored. Thread-safe. */
tg_err_t tg_decision_to_json(tg_buf_t *out, const tg_decision_t *d, const tg_policy_t *p,
                             const tg_frame_t *f, const tg_decision_json_opts_t *opts) TG_MUST_USE;

/* ---- full explain (issue 21; docs/POLICY.md "Explain and policy tests") --------------- */

/* The operator's name as a bundle spells it ("eq", "not_in", ...): the compiler's one table
 * of names, so that explain and lint print what the bundle says. "?" out of range. Static;
 * thread-safe. */
const char *tg_policy_op_name(unsigned op);

#define TG_EXPLAIN_MAX_BYTES ((size_t)64 * 1024) /* an explain object, at most */
#define TG_EXPLAIN_MAX_STRING 256 /* bytes of one string value shown (cut at a UTF-8 boundary) */
#define TG_EXPLAIN_MAX_LIST 16    /* in / not_in operands shown; longer lists: their count */

/* Appends the explain object of frame f under p: a second, cold walk of the kernel
 * (tg_kernel_explain) that the normal path never pays for.
 *   {"rules":[{"id","effect":"permit"|"deny","reason"? (deny rules),"evaluated","matched",
 *              "conditions":[COND...]}...],
 *    "limits":[{"id","total","amount","max","held","evaluated"}...], "truncated"?: true}
 *   COND = {"field"?, "op", "value"? | "value_count"?, "present", "actual"?, "actual_type"?,
 *           "other_actual"?, "cut"?: true, "held", "conditions"? (a group's members)}
 * Every rule of the surface in bundle order, every condition (even after one failed, so a
 * NO_MATCHING_POLICY says why each permit rule did not hold); "evaluated" says whether the
 * kernel itself examined the rule (a matching deny ends the walk; after a matching permit
 * only deny rules are examined). "present" false = the request has no value there (absent,
 * or a fact the caller does not have); "actual" is the request's value when it is a JSON
 * scalar (null included), "actual_type" its JSON type; "other_actual" the other field's value
 * of a value_from condition. A string longer than TG_EXPLAIN_MAX_STRING bytes is cut and the
 * condition says "cut": true; an in / not_in list longer than TG_EXPLAIN_MAX_LIST is given by
 * its "value_count". Limits: total null = unbound, amount null = uncountable. Values come from
 * the request and the bundle only, never from the server's keys or tokens. Rules that do not
 * fit TG_EXPLAIN_MAX_BYTES are left out and "truncated": true is added. A decision that ended
 * before RULES_EVALUATED has empty "rules" and "limits" (the trace's cause says why).
 * d, when not NULL, receives the decision (tg_kernel_decide's). Errors: TG_ERR_INVALID_ARG
 * (NULL out, p or f), tg_buf errors; on error out->len is restored. Thread-safe. */
tg_err_t tg_explain_json(tg_buf_t *out, tg_decision_t *d, const tg_policy_t *p,
                         const tg_frame_t *f) TG_MUST_USE;

/* The same over kernel tables t (tg_policy_tables(p), or tables a test builds by hand, e.g.
 * with limits). Errors as tg_explain_json (NULL t: TG_ERR_INVALID_ARG). */
tg_err_t tg_explain_tables_json(tg_buf_t *out, tg_decision_t *d, const tg_kernel_tables_t *t,
                                const tg_frame_t *f) TG_MUST_USE;

/* The writer itself over a given sequence of tg_kernel_explain steps (kernel_tables.h:
 * pre-order, a group's members one level deeper than the group), for producers other than
 * the kernel's walk and for tests of nesting. Steps must be those tg_kernel_explain could
 * emit (rule, then its conditions, then the limits). Errors as tg_explain_json. */
struct tg_explain_step;
tg_err_t tg_explain_steps_json(tg_buf_t *out, const struct tg_explain_step *steps,
                               size_t n) TG_MUST_USE;

/* Appends `,"explain":` and tg_explain_json's object: the ?explain=1 member after "trace".
 * Errors as tg_explain_json. */
tg_err_t tg_decision_explain_append(tg_buf_t *out, const tg_policy_t *p,
                                    const tg_frame_t *f) TG_MUST_USE;

#endif /* TRIGGUARD_POLICY_H */
