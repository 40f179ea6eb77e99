/* pipeline.c — loading, hot-swapping and tearing down the daemon's state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/db.h"
#include "trigguard/io.h"
#include "trigguard/log.h"
#include "trigguard/pg_schema.h"
#include "trigguard/receipt.h"
#include "trigguard/record.h"

/* The option table's bounds are the whole truth about what starts (config.c): where a module
 * enforces a bound of its own, the table's is the same number, so a value `serve --help`
 * offers never fails later and no later check is hidden from it. */
_Static_assert(TG_CONFIG_RATE_MAX == TG_RATE_MAX_PER_MIN, "rate limits: table = guard");
_Static_assert(TG_CONFIG_BURST_MAX == TG_RATE_BURST_ANY_RATE, "burst: table = guard, any rate");
_Static_assert(TG_CONFIG_STORE_ENTRIES_MAX <= (INT64_C(1) << 32), "store: max_entries <= 2^32");
_Static_assert(TG_CONFIG_KEY_MAX <= TG_STORE_MAX_KEY_LEN_LIMIT, "store: max_key_len");
_Static_assert(TG_GUARD_TENANT_NAME_MAX <= TG_STORE_TENANT_MAX, "store keys hold every tenant");
/* surface, version and authority go into receipts as text fields */
_Static_assert(TG_POLICY_MAX_NAME <= TG_RECEIPT_TEXT_MAX, "surface names fit a receipt field");
_Static_assert(TG_POLICY_MAX_VERSION <= TG_RECEIPT_TEXT_MAX, "versions fit a receipt field");
_Static_assert(TG_POLICY_MAX_AUTHORITY <= TG_RECEIPT_TEXT_MAX, "authorities fit a receipt field");

/* ---- policy references ---------------------------------------------------------------
 * The policy lives in a tg_swap_t (swap.h): requests count themselves in the swap's own
 * counters, never in the policy object, so a request preempted at any point cannot touch
 * a policy a reload has freed. Until issue 17 the count was in the object, and a 50 ms
 * grace period covered the moment between loading the pointer and counting. Requests never
 * wait for a reload; a reload waits for the requests that may still use the old policy. */

tg_policy_ref_t *tg_pipeline_policy_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold) {
    return tg_swap_acquire(p->policy, hold);
}

void tg_pipeline_policy_release(tg_pipeline_t *p, const tg_swap_ref_t *hold) {
    tg_swap_release(p->policy, hold);
}

/* The key set and the tenant table live in swaps of their own, the same way: a reload of
 * one never waits for, or replaces, another. */
const tg_keyset_t *tg_pipeline_keys_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold) {
    return tg_swap_acquire(p->keys, hold);
}

void tg_pipeline_keys_release(tg_pipeline_t *p, const tg_swap_ref_t *hold) {
    tg_swap_release(p->keys, hold);
}

const tg_tenants_t *tg_pipeline_tenants_acquire(tg_pipeline_t *p, tg_swap_ref_t *hold) {
    return tg_swap_acquire(p->tenants, hold);
}

void tg_pipeline_tenants_release(tg_pipeline_t *p, const tg_swap_ref_t *hold) {
    tg_swap_release(p->tenants, hold);
}

static void policy_ref_free(tg_policy_ref_t *r) {
    if (r != NULL) {
        tg_policy_destroy(r->policy);
        free(r);
    }
}

/* Loads --policy; with --policy-strict (the default) a bundle with lint errors is refused
 * (TG_ERR_POLICY_LINT) like one that does not compile. previous: the live policy on a
 * reload, so that its version reused with other content is one of those errors. Warnings
 * are logged and the bundle taken. */
static tg_err_t policy_ref_load(tg_policy_ref_t **out, const char *path, bool strict,
                                const tg_policy_t *previous, tg_diag_t *diag) {
    *out = NULL;
    if (path[0] == '\0') {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--policy is required (a policy bundle file)");
    }
    tg_policy_ref_t *r = calloc(1, sizeof *r);
    tg_lint_report_t *lint = malloc(sizeof *lint);
    if (r == NULL || lint == NULL) {
        free(r);
        free(lint);
        return TG_ERR_NOMEM;
    }
    tg_err_t rc = tg_policy_load_file_checked(&r->policy, path, strict, previous, lint, diag);
    for (size_t i = 0; rc == TG_OK && i < lint->n; i++) {
        const tg_lint_finding_t *f = &lint->findings[i];
        /* errors too when --policy-strict=false: the operator asked to run with them */
        TG_LOG(f->severity == TG_LINT_ERROR ? TG_LOG_ERROR : TG_LOG_WARN, "policy_lint",
               "%s %s %s: %s", tg_lint_severity_name(f->severity), tg_lint_code_name(f->code),
               f->path, f->message);
    }
    free(lint);
    r->loaded_at_ms = tg_clock_now_ms();
    if (rc == TG_OK) {
        rc = tg_receipt_protocol_fingerprint(r->fingerprint, tg_policy_hash_hex(r->policy));
    }
    if (rc != TG_OK) {
        policy_ref_free(r);
        return rc;
    }
    *out = r;
    return TG_OK;
}

/* The shadow policy (shadow.c) is linted but never refused for it: it is decided beside
 * the live one and never enforced, and trying a candidate is what it is for. */
tg_err_t tg_pipeline_policy_ref_load(tg_policy_ref_t **out, const char *path, tg_diag_t *diag) {
    return policy_ref_load(out, path, false, NULL, diag);
}

void tg_pipeline_policy_ref_free(tg_policy_ref_t *r) { policy_ref_free(r); }

/* ---- tenants and limits ----------------------------------------------------------------- */

/* The OIDC issuers, when any flag or --oidc-config asks for them (a JWKS file is read now;
 * URLs are fetched once the pipeline starts: tg_pipeline_oidc_start). */
static tg_err_t load_oidc(tg_pipeline_t *p, tg_diag_t *diag) {
    const tg_config_t *c = &p->cfg;
    if (c->oidc.n + c->oidc_jwks.n + c->oidc_audience.n + c->oidc_tenant_claim.n +
                c->oidc_actor.n ==
            0 &&
        c->oidc_config[0] == '\0') {
        return TG_OK;
    }
    tg_oidc_conf_t *conf = NULL;
    tg_err_t rc = tg_oidc_conf_build(&conf, c, diag);
    if (rc != TG_OK) {
        return rc;
    }
    tg_oidc_opts_t o = {.ca_file = c->oidc_ca_file,
                        .refresh_s = c->oidc_refresh_s,
                        .connect_timeout_ms = c->oidc_connect_timeout_ms,
                        .timeout_ms = c->oidc_timeout_ms};
    return tg_oidc_create(&p->oidc, conf, &o, diag);
}

tg_err_t tg_pipeline_auth(tg_pipeline_t *p, const tg_tenants_t *t, const char *header,
                          const char *rid, tg_auth_t *a, const char **msg) {
    a->principal = NULL;
    a->owned = NULL;
    *msg = "a valid bearer token is required";
    size_t len = header != NULL ? strlen(header) : 0;
    if (!tg_oidc_enabled(p->oidc) || !tg_oidc_is_jwt_header(header, len)) {
        return tg_auth_principal(t, header, len, &a->principal);
    }
    tg_oidc_result_t res;
    tg_err_t rc =
        tg_oidc_authenticate(p->oidc, t, header, len, tg_clock_now_ms() / 1000, &a->owned, &res);
    if (rc == TG_OK) {
        a->principal = tg_oidc_principal(a->owned);
        return TG_OK;
    }
    /* The check's name goes to the log only: the caller learns no more than "unauthorized". */
    TG_LOG(TG_LOG_INFO, "oidc_refused", "request %s: issuer \"%s\": %s", rid != NULL ? rid : "-",
           res.issuer, res.check);
    if (rc == TG_ERR_TENANT_NOT_ALLOWED) {
        *msg = "the token's tenant is not one this server serves";
    } else if (rc == TG_ERR_IDP_UNAVAILABLE) {
        *msg = "the identity provider's keys are not available yet; retry shortly";
    } else if (rc != TG_ERR_NOMEM) {
        rc = TG_ERR_UNAUTHORIZED;
    }
    return rc;
}

static _Thread_local char log_tenant[TG_GUARD_TENANT_NAME_MAX + 1];
static _Thread_local char log_subject[TG_GUARD_SUBJECT_MAX + 1];
static _Thread_local char log_issuer[TG_RECEIPT_PRINCIPAL_MAX + 1];

void tg_pipeline_log_principal(tg_exchange_t *ex, const tg_tenants_t *t, const tg_principal_t *pr) {
    const char *tenant = tg_tenants_name(t, pr->tenant, NULL);
    (void)snprintf(log_tenant, sizeof log_tenant, "%s", tenant != NULL ? tenant : "");
    (void)snprintf(log_subject, sizeof log_subject, "%s", pr->subject.ptr);
    ex->log_tenant = log_tenant;
    ex->log_subject = log_subject;
    if (pr->issuer.ptr != NULL) {
        (void)snprintf(log_issuer, sizeof log_issuer, "%s", pr->issuer.ptr);
        ex->log_issuer = log_issuer;
    }
}

void tg_pipeline_auth_end(tg_auth_t *a) {
    if (a != NULL) {
        tg_oidc_principal_free(a->owned);
        a->owned = NULL;
        a->principal = NULL;
    }
}

static tg_err_t load_guard(tg_pipeline_t *p, tg_diag_t *diag) {
    const tg_config_t *c = &p->cfg;
    tg_tenants_t *t = NULL;
    tg_err_t rc = tg_tenants_build(&t, c, NULL, p->oidc, diag);
    if (rc == TG_OK) {
        rc = tg_swap_create(&p->tenants, t);
        if (rc != TG_OK) {
            tg_tenants_destroy(t);
        }
    }
    if (rc == TG_OK) {
        tg_rate_opts_t ro = {.tenant_per_min = (uint64_t)c->rate_per_tenant,
                             .global_per_min = (uint64_t)c->rate_global,
                             .tenant_burst = (uint64_t)c->rate_burst,
                             .global_burst = (uint64_t)c->rate_burst};
        rc = tg_rate_create(&p->rate, &ro, diag);
    }
    if (rc == TG_OK) {
        tg_rate_opts_t vo = {.global_per_min = (uint64_t)c->rate_verify,
                             .global_burst = (uint64_t)c->rate_burst,
                             .tenants = 1};
        rc = tg_rate_create(&p->verify_rate, &vo, diag);
    }
    if (rc == TG_OK) {
        tg_bulkhead_opts_t bo = {.global_max = (uint64_t)c->bulkhead_global,
                                 .tenant_max = (uint64_t)c->bulkhead_tenant};
        rc = tg_bulkhead_create(&p->bulkhead, &bo, diag);
    }
    return rc;
}

/* The longest key or nonce the store takes: the caller's, and a redemption's claim (redeem.c,
 * whatever --max-nonce says). */
static size_t key_len_max(const tg_config_t *c) {
    size_t m =
        (size_t)(c->max_idempotency_key > c->max_nonce ? c->max_idempotency_key : c->max_nonce);
    return m > TG_RECORD_REDEEM_NONCE_LEN ? m : TG_RECORD_REDEEM_NONCE_LEN;
}

/* --store-max-bytes 0 and --store-max-entries 0: the tables' caps from the machine's memory
 * (docs/OPERATIONS.md, Sizing the idempotency store). Each of the two tables may take an
 * eighth, so together a quarter: enough that a daemon at full speed runs for many minutes
 * before "full" (trigguard_store_seconds_to_full says how many), and little enough that
 * the ledger's page cache and the rest of the host keep theirs. 160 bytes is what a UUID
 * key costs (store.h's table). Unknown memory keeps the caps of earlier releases. */
#define TG_STORE_AUTO_SHARE 8
#define TG_STORE_AUTO_MIN_BYTES (UINT64_C(64) << 20)
#define TG_STORE_AUTO_ENTRY_BYTES 160
static void store_caps(const tg_config_t *c, uint64_t memory, size_t *entries, size_t *bytes) {
    uint64_t b = (uint64_t)c->store_max_bytes;
    if (b == 0) {
        b = memory == 0 ? UINT64_C(1) << 30 : memory / TG_STORE_AUTO_SHARE;
        b = b < TG_STORE_AUTO_MIN_BYTES ? TG_STORE_AUTO_MIN_BYTES : b;
    }
    uint64_t e = (uint64_t)c->store_max_entries;
    if (e == 0) {
        e = memory == 0 ? 4000000 : b / TG_STORE_AUTO_ENTRY_BYTES;
        e = e > (uint64_t)TG_CONFIG_STORE_ENTRIES_MAX ? (uint64_t)TG_CONFIG_STORE_ENTRIES_MAX : e;
        e = e < 16 ? 16 : e;
    }
    *entries = (size_t)e;
    *bytes = b > SIZE_MAX ? SIZE_MAX : (size_t)b;
}

static tg_err_t open_state(tg_pipeline_t *p, tg_diag_t *diag) {
    const tg_config_t *c = &p->cfg;
    size_t cap_entries = 0, cap_bytes = 0;
    if (c->store_max_entries == 0 || c->store_max_bytes == 0) {
        uint64_t mem = tg_memory_available();
        store_caps(c, mem, &cap_entries, &cap_bytes);
        if (!c->store_postgres) {
            TG_LOG(TG_LOG_INFO, "store_sized",
                   "idempotency/nonce table and receipt index: %zu entries, %zu bytes each "
                   "(memory %llu bytes%s)",
                   cap_entries, cap_bytes, (unsigned long long)mem,
                   mem == 0 ? " unknown: the fixed defaults" : "");
        }
    } else {
        store_caps(c, 0, &cap_entries, &cap_bytes);
    }
    /* Idempotency entries hold the ledger position of their record (evaluate.c), never a
     * response; the receipt index maps executionId to the same. */
    tg_db_opts_t so = {.backend = TG_DB_FILE};
    so.keys = (tg_store_opts_t){.max_entries = cap_entries,
                                .max_bytes = cap_bytes,
                                .retention_ms = c->retention_s * 1000,
                                .max_key_len = key_len_max(c)};
    so.receipts = (tg_store_opts_t){
        .max_entries = cap_entries, .max_bytes = cap_bytes, .retention_ms = c->retention_s * 1000};
    so.limit_entries = (uint64_t)c->limit_entries;
    so.approval_entries = (uint64_t)c->approval_entries;
    so.snapshot = (tg_db_snapshot_opts_t){
        .every = (uint64_t)c->snapshot_every, .replay = tg_pipeline_replay_into, .ud = p};
    tg_ledger_opts_t lo = TG_LEDGER_OPTS_INIT;
    lo.dir = c->ledger;
    lo.durability = c->durability == TG_CONFIG_DURABILITY_BATCH  ? TG_DURABILITY_BATCH
                    : c->durability == TG_CONFIG_DURABILITY_NONE ? TG_DURABILITY_NONE
                                                                 : TG_DURABILITY_FSYNC;
    lo.batch_interval_ms = (uint32_t)c->batch_ms;
    lo.commit_delay_us = (uint32_t)c->commit_delay_us;
    lo.segment_max_bytes = (uint64_t)c->segment_bytes;
    lo.no_create = c->ledger_no_create;
    so.ledger = lo;
    /* SPEC §12: the db copies the log key at open; this copy is wiped right after */
    so.log = (tg_db_log_opts_t){.signer = p->log.signer,
                                .min_interval_ms = (uint32_t)c->checkpoint_min_interval_ms,
                                .max_interval_ms = (uint32_t)c->checkpoint_interval_ms};
    if (c->store_postgres) {
        so.backend = TG_DB_POSTGRES;
        so.pg = (tg_db_pg_opts_t){.url = c->database_url,
                                  .pool = (uint32_t)c->db_pool,
                                  .timeout_ms = (uint32_t)c->db_timeout_ms,
                                  .claim_timeout_ms = (uint32_t)c->claim_timeout_ms,
                                  .commit_timeout_ms = (uint32_t)c->ledger_stall_timeout_ms};
        tg_err_t rc = tg_db_open(&p->db, &so, diag);
        tg_pipeline_log_free(p);
        if (rc == TG_OK) {
            /* no replay: the tables are the database's, shared with every instance */
            rc = tg_db_start(p->db, NULL, NULL, NULL, diag);
        }
        return rc;
    }
    tg_err_t rc = tg_db_open(&p->db, &so, diag);
    tg_pipeline_log_free(p);
    if (rc != TG_OK) {
        return rc;
    }
    tg_ledger_recovery_t rep;
    memset(&rep, 0, sizeof rep);
    rc = tg_db_start(p->db, tg_pipeline_replay_record, p, &rep, diag);
    /* routes.c's /readyz and /metrics still read these two directly (db.h) */
    if (rc == TG_ERR_NOT_FOUND && c->ledger_no_create && diag != NULL) {
        char why[TG_DIAG_MAX];
        snprintf(why, sizeof why, "%s", diag->msg);
        return tg_diag_set(diag, rc,
                           "%s (--ledger-create never): restore the ledger there, or start once "
                           "with --ledger-create auto to begin a new, empty one",
                           why);
    }
    if (rc == TG_OK) {
        rc = tg_pipeline_replay_check(p, diag);
    }
    if (rc != TG_OK) {
        return rc;
    }
    if (rep.created) {
        /* Loud on purpose: where a ledger was expected, a new one means every earlier
         * receipt, idempotency key and nonce counts for nothing. */
        TG_LOG(TG_LOG_WARN, "ledger_created",
               "created a new, empty ledger at %s (there was no segment file; "
               "--ledger-create never refuses to start instead)",
               c->ledger);
    }
    if (rep.torn) {
        TG_LOG(TG_LOG_WARN, "ledger_torn_tail",
               "segment %u: cut %llu bytes at offset %llu that are no complete record (a "
               "final write cut short). Records acknowledged in fsync mode never lie there, so "
               "if this is more than the last batch the disk lost data: see LEDGER.md",
               rep.torn_segment, (unsigned long long)rep.torn_bytes,
               (unsigned long long)rep.torn_offset);
    }
    TG_LOG(TG_LOG_INFO, "ledger_open",
           "%s: %llu records in %u segments, last seq %llu, durability %s", c->ledger,
           (unsigned long long)rep.records, rep.segments, (unsigned long long)rep.last_seq,
           tg_config_durability_name(c->durability));
    char why[256];
    if (!tg_db_health(p->db, why, sizeof why)) {
        TG_LOG(TG_LOG_ERROR, "ledger_not_ready",
               "%s: %s. Serving, but /readyz is 503 and decisions get 503 until a write "
               "succeeds (retried every second)",
               c->ledger, why);
    }
    return TG_OK;
}

/* Every receipt carries the authority id as authorityId: non-empty UTF-8 of at most
 * TG_RECEIPT_TEXT_MAX bytes (SPEC §5). Refused at start, not at the first signature. */
static tg_err_t check_authority_id(const char *id, tg_diag_t *diag) {
    size_t n = strlen(id);
    if (n == 0 || n > TG_RECEIPT_TEXT_MAX) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--authority-id must be 1 to %d bytes (it is every receipt's "
                           "authorityId)",
                           TG_RECEIPT_TEXT_MAX);
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_err_t rc = tg_canon_string(&b, id, n);
    tg_buf_free(&b);
    if (rc == TG_ERR_NOMEM) {
        return rc;
    }
    return rc == TG_OK ? TG_OK
                       : tg_diag_set(diag, TG_ERR_CONFIG, "--authority-id is not valid UTF-8");
}

/* with_state false: everything but the idempotency tables and the ledger (--check-config). */
static tg_err_t create(tg_pipeline_t **out, const tg_config_t *cfg, bool with_state,
                       tg_diag_t *diag) {
    *out = NULL;
    if (sodium_init() < 0) {
        return tg_diag_set(diag, TG_ERR_CRYPTO, "libsodium failed to initialise");
    }
    tg_pipeline_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return TG_ERR_NOMEM;
    }
    p->cfg = *cfg;
    p->limits = (tg_json_limits_t){(size_t)cfg->max_body, (size_t)cfg->max_depth,
                                   (size_t)cfg->max_string, (size_t)cfg->max_keys};
    p->receipt_ttl_ms = cfg->receipt_ttl_s * 1000;
    tg_metrics_init(&p->metrics);
    atomic_init(&p->serving, false);
    for (size_t i = 0; i < 2; i++) {
        atomic_init(&p->fill_rate_milli[i], INT64_MIN);
        atomic_init(&p->fill_bytes_rate_milli[i], INT64_MIN);
    }
    if (pthread_mutex_init(&p->wait_mu, NULL) != 0) {
        free(p);
        return TG_ERR_NOMEM;
    }
    if (pthread_mutex_init(&p->reload_mu, NULL) != 0) {
        pthread_mutex_destroy(&p->wait_mu);
        free(p);
        return TG_ERR_NOMEM;
    }
    if (pthread_mutex_init(&p->admin_mu, NULL) != 0) {
        pthread_mutex_destroy(&p->reload_mu);
        pthread_mutex_destroy(&p->wait_mu);
        free(p);
        return TG_ERR_NOMEM;
    }
    tg_policy_ref_t *ref = NULL;
    tg_err_t rc = policy_ref_load(&ref, cfg->policy, cfg->policy_strict, NULL, diag);
    if (rc == TG_OK &&
        ref != NULL) { /* check's rule; resolved once, a reload keeps it (docs/POLICY.md) */
        (void)snprintf(p->cfg.authority_id, sizeof p->cfg.authority_id, "%s",
                       tg_policy_authority_id(ref->policy, cfg->authority_id));
        rc = check_authority_id(p->cfg.authority_id, diag);
    }
    if (rc == TG_OK) {
        rc = tg_swap_create(&p->policy, ref);
    }
    if (rc != TG_OK) {
        policy_ref_free(ref); /* NULL-safe; not yet owned by the swap */
    }
    if (rc == TG_OK) {
        rc = tg_pipeline_shadow_start(p, diag);
    }
    if (rc == TG_OK) {
        rc = tg_pipeline_log_load(p, diag); /* before the keys: keys.json lists it */
    }
    if (rc == TG_OK) {
        tg_keyset_t *ks = NULL;
        rc = tg_keyset_load(&ks, &p->cfg, &p->log, diag);
        if (rc == TG_OK) {
            rc = tg_swap_create(&p->keys, ks);
            if (rc != TG_OK) {
                tg_keyset_free(ks);
            }
        }
    }
    if (rc == TG_OK) {
        rc = load_oidc(p, diag);
    }
    if (rc == TG_OK) {
        rc = load_guard(p, diag);
    }
    const tg_tenants_t *tt = rc == TG_OK ? tg_swap_peek(p->tenants) : NULL;
    if (rc == TG_OK && tg_tenants_count(tt) == 0 && !tg_tenants_local_bypass(tt)) {
        TG_LOG(TG_LOG_WARN, "no_tenants",
               "no tenant tokens (--tokens, TRIGGUARD_API_KEYS): every decision request will "
               "get 401");
    }
    if (rc == TG_OK && with_state) {
        rc = open_state(p, diag);
    }
    if (rc == TG_OK && with_state && p->oidc != NULL) {
        /* The first fetches may take a while; the start waits for them at most this long,
         * then serves (JWT callers of an issuer without keys get 503 until they arrive). */
        int64_t wait = cfg->oidc_timeout_ms < 5000 ? cfg->oidc_timeout_ms : 5000;
        rc = tg_oidc_start(p->oidc, wait);
        if (rc != TG_OK) {
            rc = tg_diag_set(diag, rc, "oidc: cannot start the JWKS fetch thread");
        }
    }
    if (rc != TG_OK) {
        tg_pipeline_destroy(p);
        return rc;
    }
    *out = p;
    return TG_OK;
}

tg_err_t tg_pipeline_create(tg_pipeline_t **out, const tg_config_t *cfg, tg_diag_t *diag) {
    return create(out, cfg, true, diag);
}

/* The ledger directory as serve will use it: an existing directory, or one mkdir can make;
 * with --ledger-create never, one holding the first segment file. */
static tg_err_t check_ledger_path(const char *dir, bool no_create, tg_diag_t *diag) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            return tg_diag_set(diag, TG_ERR_CONFIG, "--ledger %s is not a directory", dir);
        }
        char first[TG_CONFIG_STR_MAX + 32];
        char name[32];
        if (no_create && tg_ledger_segment_name(name, sizeof name, 1) == TG_OK) {
            snprintf(first, sizeof first, "%s/%s", dir, name);
            if (stat(first, &st) != 0) {
                return tg_diag_set(diag, TG_ERR_CONFIG,
                                   "--ledger %s holds no %s, and --ledger-create is never", dir,
                                   name);
            }
        }
        return TG_OK;
    }
    if (errno != ENOENT) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "--ledger %s: %s", dir, strerror(errno));
    }
    if (no_create) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--ledger %s does not exist, and --ledger-create is never", dir);
    }
    char parent[TG_CONFIG_STR_MAX];
    if (tg_path_parent(parent, sizeof parent, dir) != TG_OK || stat(parent, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "--ledger %s does not exist and its parent %s is not a directory "
                           "(serve creates only the last component)",
                           dir, parent);
    }
    return TG_OK;
}

tg_err_t tg_pipeline_check(char *summary, size_t cap, const tg_config_t *cfg, tg_diag_t *diag) {
    tg_pipeline_t *p = NULL;
    tg_err_t rc = create(&p, cfg, false, diag);
    if (rc == TG_OK && cfg->store_postgres) {
        /* the URL parses; whether the server answers is serve's to find out */
        rc = tg_pg_check_url(cfg->database_url, diag);
    } else if (rc == TG_OK) {
        rc = check_ledger_path(cfg->ledger, cfg->ledger_no_create,
                               diag); /* last, as serve opens it last */
    }
    if (rc == TG_OK && p != NULL) {
        tg_pipeline_describe(p, summary, cap);
    }
    tg_pipeline_destroy(p);
    return rc;
}

tg_err_t tg_pipeline_reload(tg_pipeline_t *p, tg_diag_t *diag) {
    tg_policy_ref_t *fresh = NULL;
    /* peek: this thread is the only one that replaces the policy (reload_mu) */
    const tg_policy_ref_t *live = tg_swap_peek(p->policy);
    tg_err_t rc = policy_ref_load(&fresh, p->cfg.policy, p->cfg.policy_strict,
                                  live != NULL ? live->policy : NULL, diag);
    if (rc != TG_OK) {
        return rc;
    }
    /* Returns once no request can hold the old policy any more, however long one was
     * preempted while taking or using it. */
    policy_ref_free(tg_swap_exchange(p->policy, fresh));
    return TG_OK;
}

/* The tables' fill estimates, after the sweep so that reclaimed entries count. tg_db_stats
 * walks the shards' counters, so a sample per TG_STORE_FILL_MIN_STEP_MS at most (the
 * estimate ignores closer ones anyway). */
/* A rate in thousandths, bounded first: a double beyond int64's range is undefined. */
static int64_t milli(double per_s) {
    double m = per_s * 1000.0;
    m = m > 9e15 ? 9e15 : m < -9e15 ? -9e15 : m;
    return (int64_t)m;
}

static void fill_tick(tg_pipeline_t *p) {
    int64_t now = tg_clock_now_ms();
    if (p->fill[0].primed && now >= p->fill[0].last_ms &&
        now - p->fill[0].last_ms < TG_STORE_FILL_MIN_STEP_MS) {
        return;
    }
    tg_db_stats_t ds;
    tg_db_stats(p->db, &ds);
    const tg_store_stats_t *tables[2] = {&ds.keys, &ds.receipts};
    for (size_t i = 0; i < 2; i++) {
        tg_store_fill_sample(&p->fill[i], now, tables[i]);
        if (p->fill[i].rated) {
            atomic_store(&p->fill_rate_milli[i], milli(p->fill[i].entries_per_s));
            atomic_store(&p->fill_bytes_rate_milli[i], milli(p->fill[i].bytes_per_s));
        }
    }
}

/* A sweep costs what it reclaims (it walks each shard's entries oldest first and stops at the
 * first live one), so it runs on every tick: expired entries are already invisible to
 * lookups, the sweep returns their memory and their share of the caps within a tick. */
void tg_pipeline_tick(tg_pipeline_t *p) {
    if (p->db != NULL) {
        /* Sweeps, and the record log's watchdogs: a deleted or moved ledger directory and
         * a disk that stops answering are noticed by an idle daemon too (db.h). Then
         * answer whoever waited for the ledger past the bound. */
        tg_db_tick(p->db, tg_clock_now_ms(), (uint32_t)p->cfg.ledger_stall_timeout_ms);
        (void)tg_pipeline_abandon_waits(p, p->cfg.ledger_stall_timeout_ms * INT64_C(1000000),
                                        false);
        tg_pipeline_approvals_tick(p, tg_clock_now_ms()); /* expiry on time, SPEC §11.2 */
        fill_tick(p);
    }
}

void tg_pipeline_abandon(void *ud) { (void)tg_pipeline_abandon_waits(ud, 0, true); }

void tg_pipeline_set_serving(tg_pipeline_t *p, bool serving) { atomic_store(&p->serving, serving); }

void tg_pipeline_describe(const tg_pipeline_t *p, char *out, size_t cap) {
    /* No reference needed: describe runs on the thread that reloads. */
    const tg_policy_ref_t *ref = tg_swap_peek(p->policy);
    const tg_keyset_t *ks = tg_swap_peek(p->keys);
    const tg_tenants_t *tt = tg_swap_peek(p->tenants);
    (void)snprintf(out, cap,
                   "policy %s (version %s, hash %.16s…), signing key %s, %zu tenants (%zu "
                   "tokens)%s, "
                   "durability %s, %s %s, transparency log %s%s%s",
                   p->cfg.policy, tg_policy_version(ref->policy), tg_policy_hash_hex(ref->policy),
                   ks->signer ? ks->signer->key_id : "(none: receipts unavailable)",
                   tg_tenants_count(tt), tg_tenants_token_count(tt),
                   tg_tenants_local_bypass(tt) ? " (UNSAFE local auth bypass)" : "",
                   tg_config_durability_name(p->cfg.durability),
                   p->cfg.store_postgres ? "store" : "ledger",
                   p->cfg.store_postgres ? "postgres" : p->cfg.ledger,
                   p->log.enabled ? p->log.pub.name : "off", p->log.enabled ? " key " : "",
                   p->log.enabled ? p->log.key_id : "");
}

void tg_pipeline_destroy(tg_pipeline_t *p) {
    if (p == NULL) {
        return;
    }
    tg_oidc_destroy(p->oidc); /* stops its fetch thread first */
    tg_db_close(p->db);
    tg_bulkhead_destroy(p->bulkhead);
    tg_rate_destroy(p->rate);
    tg_rate_destroy(p->verify_rate);
    if (p->tenants != NULL) {
        tg_tenants_destroy(tg_swap_peek(p->tenants));
        tg_swap_destroy(p->tenants);
    }
    if (p->keys != NULL) {
        tg_keyset_free(tg_swap_peek(p->keys));
        tg_swap_destroy(p->keys);
    }
    if (p->policy != NULL) {
        policy_ref_free(tg_swap_peek(p->policy));
        tg_swap_destroy(p->policy);
    }
    tg_pipeline_shadow_stop(p);
    tg_pipeline_log_free(p);
    tg_key_wipe(&p->log.key);
    pthread_mutex_destroy(&p->wait_mu);
    pthread_mutex_destroy(&p->reload_mu);
    pthread_mutex_destroy(&p->admin_mu);
    sodium_memzero(p->cfg.signing_key, sizeof p->cfg.signing_key);
    sodium_memzero(p->cfg.api_keys, sizeof p->cfg.api_keys);
    free(p);
}
