/* oidc.h — callers that authenticate with an OIDC ID token (a JWT) instead of a token of the
 * tenants file (issue 20): which issuers are trusted, where their key sets come from, and how
 * a verified token's claims become a principal (guard.h's tg_principal_t).
 *
 * The token format and its signature are jwt.h's; this module decides which issuer's
 * configuration and keys a token is checked against, and what the verified claims mean.
 *
 * ## Configuration (tg_oidc_conf_t)
 * Issuers come from the flags (--oidc NAME=ISSUER, --oidc-jwks NAME=FILE|URL,
 * --oidc-audience NAME=AUD, --oidc-tenant-claim NAME=CLAIM, --oidc-actor NAME=TEMPLATE) and
 * from the --oidc-config file, a JSON object parsed strictly (an unknown member is refused
 * with its JSON path):
 *   {"issuers": [{
 *      "name": "github",                                      1..64 of [A-Za-z0-9._-], unique
 *      "issuer": "https://token.actions.githubusercontent.com", exact iss, unique
 *      "jwks": "https://.../.well-known/jwks",  or a file path; http:// only to loopback
 *      "audiences": ["trigguard"],                             1..TG_OIDC_MAX_AUDIENCES
 *      "leeway_s": 60,                                         0..300 (default 60)
 *      "tenant_claim": "repository_owner",   or "tenant": "acme" (exactly one of the two)
 *      "tenants": ["acme"],                  tenants this issuer may name (added to the table)
 *      "subject": "{sub}",                   template (default "{sub}")
 *      "actors": ["{repository}:{workflow}"], templates; absent = unbound
 *      "surfaces": ["deploy.release"],       absent = every surface
 *      "observe": false,                     true: may ask for observe mode (SPEC §11.1)
 *      "role": "caller"}]}                   tg_role_t name (default caller)
 * A template is text with {claim} references ("{{" and "}}" stand for braces). A reference
 * to a claim that is absent or not a string (numbers and booleans are written as their JSON
 * text) fails the token: 401, logged as "mapping" (the token is genuine but does not name a
 * principal this configuration can build; refusing is the fail-closed reading).
 * A flag issuer and a file issuer of the same name are refused (one place per issuer).
 *
 * ## Tenants
 * The mapped tenant must be a tenant of the table the request authenticated against, and one
 * the issuer may name: an issuer with a "tenants" list (or a fixed "tenant") names only those
 * (the pipeline adds them to the table when it builds it); an issuer without a list names only
 * tenants of the tokens file / TRIGGUARD_API_KEYS. Any other name is
 * TG_ERR_TENANT_NOT_ALLOWED (403).
 *
 * ## Key sets
 * Per issuer the last good tg_jwks_t, held in a swap (swap.h): request threads read it
 * lock-free, a refresh replaces it. A file source is read when the configuration is built
 * (start, reload). A URL source is fetched by one background thread (libcurl: https with the
 * system CAs or opts.ca_file; http:// only to a loopback host; no redirect; connect and total
 * timeouts; body capped at TG_JWKS_MAX) every opts.refresh_s, and early when a request meets
 * an unknown kid (at most once per TG_OIDC_KICK_MIN_MS per issuer; the request waits up to
 * TG_OIDC_KICK_WAIT_MS for it). A failed or invalid fetch keeps the last good set. An issuer
 * without any set answers TG_ERR_IDP_UNAVAILABLE (503) until one arrives.
 *
 * ## Thread safety
 * tg_oidc_conf_t: built on one thread, then immutable. tg_oidc_t: tg_oidc_authenticate and
 * tg_oidc_metrics from any number of threads; tg_oidc_reload from one thread at a time;
 * create/start/destroy from one thread with no request in flight.
 */
#ifndef TRIGGUARD_OIDC_H
#define TRIGGUARD_OIDC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trigguard/buf.h"
#include "trigguard/config.h"
#include "trigguard/err.h"
#include "trigguard/guard.h"
#include "trigguard/jwt.h"

#define TG_OIDC_MAX_ISSUERS 16
#define TG_OIDC_NAME_MAX 64
#define TG_OIDC_URL_MAX 1024
#define TG_OIDC_MAX_AUDIENCES 8
#define TG_OIDC_MAX_TENANTS 64   /* "tenants" of one issuer */
#define TG_OIDC_TEMPLATE_MAX 256 /* bytes of one template */
/* Every scalar claim of a verified token is copied into its principal, never some of them:
 * a token has at most TG_JWT_CLAIMS_MAX claims, and its names and string values, each with a
 * NUL, take fewer bytes than the claims' JSON text, which is shorter than the token. */
#define TG_OIDC_CLAIMS_MAX TG_JWT_CLAIMS_MAX
#define TG_OIDC_CLAIM_BYTES TG_JWT_MAX
#define TG_OIDC_CONFIG_MAX ((size_t)256 * 1024)
#define TG_OIDC_LEEWAY_DEFAULT 60
#define TG_OIDC_LEEWAY_MAX 300
#define TG_OIDC_KICK_MIN_MS 10000 /* unknown-kid refreshes of one issuer: at most one per */
#define TG_OIDC_KICK_WAIT_MS 3000 /* the most a request waits for that refresh */

/* ---- configuration ---- */

typedef struct tg_oidc_conf tg_oidc_conf_t;

/* The issuers of the flags in cfg and of cfg->oidc_config (when set), validated; the key
 * files of file sources are read and parsed (a bad one is an error). An empty configuration
 * (no issuer) is valid: JWT callers are then not accepted at all.
 * Errors: TG_ERR_CONFIG (diag names the flag or the file and JSON path), TG_ERR_NOT_FOUND /
 * TG_ERR_IO (a file), TG_ERR_NOMEM. *out NULL on error. */
tg_err_t tg_oidc_conf_build(tg_oidc_conf_t **out, const tg_config_t *cfg,
                            tg_diag_t *diag) TG_MUST_USE;

/* The file format alone (text need not be NUL-terminated; origin names it in diag). Key files
 * are read only when load_files is true (false: for tests and the fuzz target).
 * Errors as tg_oidc_conf_build. */
tg_err_t tg_oidc_conf_parse(tg_oidc_conf_t **out, const char *text, size_t len, const char *origin,
                            bool load_files, tg_diag_t *diag) TG_MUST_USE;

void tg_oidc_conf_free(tg_oidc_conf_t *c); /* NULL-safe */

size_t tg_oidc_conf_count(const tg_oidc_conf_t *c);                 /* issuers (0 for NULL) */
const char *tg_oidc_conf_name(const tg_oidc_conf_t *c, size_t i);   /* NULL out of range */
const char *tg_oidc_conf_issuer(const tg_oidc_conf_t *c, size_t i); /* NULL out of range */

/* Adds every tenant some issuer of c lists in "tenants" (or names as its fixed "tenant") to
 * t, without a token (tg_tenants_add_name). Errors: as tg_tenants_add_name. */
tg_err_t tg_oidc_conf_add_tenants(const tg_oidc_conf_t *c, tg_tenants_t *t,
                                  tg_diag_t *diag) TG_MUST_USE;

/* ---- a principal built from a verified token ---- */

typedef struct tg_oidc_principal tg_oidc_principal_t;

/* Builds the principal issuer i of c makes of verified claims (an object), for table t:
 * tenant, subject, actors, role, surfaces, issuer and the scalar claims (at most
 * all of them, in the object's order; more than TG_OIDC_CLAIMS_MAX or TG_OIDC_CLAIM_BYTES of
 * text, or a NUL in a string claim, is TG_ERR_UNAUTHORIZED: none is ever left out, since a
 * claim left out would disarm a deny rule that names it). Everything is copied: the result outlives
 * claims, c and t. Errors: TG_ERR_UNAUTHORIZED (a template or the tenant claim names an absent or
 * unusable claim, or a result is not a valid name), TG_ERR_TENANT_NOT_ALLOWED, TG_ERR_NOMEM,
 * TG_ERR_INVALID_ARG. *out NULL on error. Thread-safe. */
tg_err_t tg_oidc_map(tg_oidc_principal_t **out, const tg_oidc_conf_t *c, size_t i,
                     const json_t *claims, const tg_tenants_t *t) TG_MUST_USE;

/* The principal (owned by p). */
const tg_principal_t *tg_oidc_principal(const tg_oidc_principal_t *p);
void tg_oidc_principal_free(tg_oidc_principal_t *p); /* NULL-safe */

/* True when an Authorization value is "Bearer <three base64url segments>", the shape of a
 * compact JWS (no static token of the tenants file is asked to look like one). Pure. */
bool tg_oidc_is_jwt_header(const char *header, size_t len);

/* ---- the running state ---- */

typedef struct tg_oidc tg_oidc_t;

typedef struct tg_oidc_opts {
    const char *ca_file;        /* PEM bundle for https JWKS URLs; NULL or "" = system CAs */
    int64_t refresh_s;          /* between fetches of a URL */
    int64_t connect_timeout_ms; /* of one fetch */
    int64_t timeout_ms;         /* of one fetch, in all */
} tg_oidc_opts_t;

/* Takes conf (freed on error too). Fetches nothing yet. Errors: TG_ERR_NOMEM,
 * TG_ERR_INTERNAL (curl or thread primitives), TG_ERR_INVALID_ARG. */
tg_err_t tg_oidc_create(tg_oidc_t **out, tg_oidc_conf_t *conf, const tg_oidc_opts_t *opts,
                        tg_diag_t *diag) TG_MUST_USE;

/* Starts the fetch thread (always, even when no issuer has a URL yet: a reload may add one)
 * and waits at most wait_ms for each URL source's first fetch: a start whose issuer is down
 * is not held up longer, and its JWT callers get 503 until a set arrives.
 * Errors: TG_ERR_INTERNAL (thread). */
tg_err_t tg_oidc_start(tg_oidc_t *o, int64_t wait_ms) TG_MUST_USE;

/* Stops the fetch thread (an ongoing fetch is aborted) and frees. NULL-safe. */
void tg_oidc_destroy(tg_oidc_t *o);

/* tg_oidc_conf_add_tenants for the configuration in use. Errors as it. */
tg_err_t tg_oidc_add_tenants(tg_oidc_t *o, tg_tenants_t *t, tg_diag_t *diag) TG_MUST_USE;

/* True when at least one issuer is configured (NULL: false). Thread-safe. */
bool tg_oidc_enabled(tg_oidc_t *o);

/* Replaces the configuration with fresh (taken, freed on error). Issuers whose name and JWKS
 * URL are unchanged keep their last good set (no fetch needed). Never fails for the content
 * (fresh is already valid); TG_ERR_NOMEM. */
tg_err_t tg_oidc_reload(tg_oidc_t *o, tg_oidc_conf_t *fresh, tg_diag_t *diag) TG_MUST_USE;

/* What one authentication found out, for logs and metrics (never for the caller). */
typedef struct tg_oidc_result {
    char issuer[TG_OIDC_NAME_MAX + 1]; /* the configured issuer's name; "" if none matched */
    const char *check;                 /* static: "ok", a tg_jwt_fail name, "unknown_issuer",
                                          "no_keys", "mapping", "tenant" */
} tg_oidc_result_t;

/* Authenticates an Authorization value holding a JWT against t (the request's tenant table).
 * TG_OK with *out (the caller frees it with tg_oidc_principal_free); TG_ERR_UNAUTHORIZED
 * (not a token of a configured issuer, any failed check); TG_ERR_TENANT_NOT_ALLOWED;
 * TG_ERR_IDP_UNAVAILABLE (the issuer has no key set yet); TG_ERR_NOMEM;
 * TG_ERR_INVALID_ARG. May wait up to TG_OIDC_KICK_WAIT_MS (an unknown kid). res may be NULL.
 * Counts trigguard_oidc_verify_total. Thread-safe. */
tg_err_t tg_oidc_authenticate(tg_oidc_t *o, const tg_tenants_t *t, const char *header, size_t len,
                              int64_t now_s, tg_oidc_principal_t **out,
                              tg_oidc_result_t *res) TG_MUST_USE;

/* Appends the Prometheus text of the module's counters and gauges:
 * trigguard_oidc_verify_total{issuer,result}, trigguard_oidc_jwks_refresh_total{issuer,
 * result}, trigguard_oidc_jwks_age_seconds{issuer}, trigguard_oidc_jwks_keys{issuer}.
 * Thread-safe. */
tg_err_t tg_oidc_metrics(tg_oidc_t *o, tg_buf_t *out, int64_t now_ms) TG_MUST_USE;

#endif /* TRIGGUARD_OIDC_H */
