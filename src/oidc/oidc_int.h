/* oidc_int.h — what the oidc module's files share (not a public contract). */
#ifndef TG_OIDC_INT_H
#define TG_OIDC_INT_H

#include <stdatomic.h>

#include "trigguard/oidc.h"
#include "trigguard/swap.h"

/* One key set as published to request threads: immutable once in the swap. text is the JWKS
 * as fetched (or read), kept so that a reload can give an unchanged issuer the same set
 * without a fetch. */
typedef struct oidc_keys {
    tg_jwks_t *set;
    char *text;
    size_t len;
    int64_t at_ms; /* when it was fetched or read (wall clock) */
} oidc_keys_t;

void oidc_keys_free(oidc_keys_t *k); /* NULL-safe */

/* Copies text and parses it. Errors as tg_jwks_parse. */
tg_err_t oidc_keys_make(oidc_keys_t **out, const char *text, size_t len, int64_t at_ms,
                        tg_diag_t *diag) TG_MUST_USE;

#define OIDC_RESULTS (TG_JWT_FAIL__COUNT + 4) /* ok + fails, then mapping, tenant, no_keys */
#define OIDC_RES_MAPPING (TG_JWT_FAIL__COUNT + 0)
#define OIDC_RES_TENANT (TG_JWT_FAIL__COUNT + 1)
#define OIDC_RES_NO_KEYS (TG_JWT_FAIL__COUNT + 2)
#define OIDC_RES_INTERNAL (TG_JWT_FAIL__COUNT + 3)

typedef struct oidc_issuer {
    char name[TG_OIDC_NAME_MAX + 1];
    char *issuer;
    char *jwks;    /* the source as configured */
    bool jwks_url; /* http(s):// (fetched) rather than a file */
    char *audiences[TG_OIDC_MAX_AUDIENCES];
    size_t n_audiences;
    int64_t leeway_s;
    char *tenant_claim; /* exactly one of tenant_claim and tenant */
    char *tenant;
    char *tenants[TG_OIDC_MAX_TENANTS];
    size_t n_tenants;
    char *subject; /* template */
    char *actors[TG_GUARD_MAX_BINDINGS];
    size_t n_actors;
    char *surfaces[TG_GUARD_MAX_BINDINGS];
    size_t n_surfaces;
    tg_role_t role;
    bool observe; /* "observe": true: its callers may ask for observe mode (SPEC §11.1) */

    /* runtime (cache.c): the published key set and the fetch bookkeeping */
    tg_swap_t *keys;         /* oidc_keys_t, NULL until a set is read or fetched */
    pthread_mutex_t keys_mu; /* writers of keys (exchange, peek) */
    bool keys_mu_init;
    _Atomic int64_t next_fetch_ms; /* monotonic; the fetch thread's schedule */
    _Atomic int64_t last_kick_ms;  /* monotonic; unknown-kid refreshes, rate-limited */
    _Atomic uint64_t attempts;     /* fetches finished (ok or not): waiters watch it */
    atomic_uint_fast64_t verify[OIDC_RESULTS];
    atomic_uint_fast64_t refresh[2]; /* ok, failed */
} oidc_issuer_t;

struct tg_oidc_conf {
    oidc_issuer_t *issuers[TG_OIDC_MAX_ISSUERS];
    size_t n;
};

/* conf.c: a new, empty issuer (runtime parts initialised). */
tg_err_t oidc_issuer_new(oidc_issuer_t **out) TG_MUST_USE;

/* map.c: renders template tpl over claims into out (cap bytes with the NUL). TG_OK,
 * TG_ERR_UNAUTHORIZED (a claim absent or not a scalar, or the result too long),
 * TG_ERR_CONFIG (tpl malformed: for validation at load; claims may be NULL then). */
tg_err_t oidc_render(char *out, size_t cap, size_t *len_out, const char *tpl,
                     const json_t *claims) TG_MUST_USE;

#endif /* TG_OIDC_INT_H */
