/* reload.c — SIGHUP and POST /v1/admin/reload: the policy, the tokens, the keys and the TLS
 * certificate, each loaded aside and swapped in on its own; the record of the last reload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/tls.h"

static const char *const part_names[TG_PART__COUNT] = {"policy", "tokens", "keys",
                                                       "tls",    "oidc",   "shadow_policy"};

/* The order parts reload in: the OIDC configuration before the tokens, whose new table
 * takes the tenants the issuers list. */
static const unsigned part_order[TG_PART__COUNT] = {TG_PART_POLICY, TG_PART_SHADOW, TG_PART_OIDC,
                                                    TG_PART_TOKENS, TG_PART_KEYS,   TG_PART_TLS};

const char *tg_reload_part_name(unsigned part) {
    return part < TG_PART__COUNT ? part_names[part] : "?";
}

/* ---- keys -------------------------------------------------------------------------------- */

/* The --verify-keys entry path[0..n) into the ring. The active key named again (the same id
 * and public key) is skipped: that is the last step of a rotation, where the file that
 * published the next key now holds the current one (docs/OPERATIONS.md, "Key rotation"). */
static tg_err_t add_verify_key(tg_keyring_t *ring, const char *path, tg_diag_t *diag) {
    tg_key_t k;
    memset(&k, 0, sizeof k);
    tg_err_t rc = tg_key_load_file(&k, path, NULL, diag);
    if (rc == TG_OK) {
        const tg_key_t *a = tg_keyring_active(ring);
        bool same = a != NULL && strcmp(a->key_id, k.key_id) == 0 &&
                    memcmp(a->pk, k.pk, TG_KEY_PK_LEN) == 0;
        rc = same ? TG_OK : tg_keyring_add(ring, &k, TG_KEY_VERIFY_ONLY);
        if (rc != TG_OK) {
            rc = tg_diag_set(diag, rc, "verify key %s: %s", path,
                             rc == TG_ERR_EXISTS ? "its key id or public key is already loaded"
                                                 : tg_strerror(rc));
        }
    }
    tg_key_wipe(&k);
    return rc;
}

static tg_err_t fill_ring(tg_keyring_t *ring, const tg_config_t *c, tg_diag_t *diag) {
    const char *kid = c->key_id[0] ? c->key_id : NULL;
    tg_err_t rc = TG_OK;
    if (c->signing_key[0] != '\0') {
        tg_key_t k;
        memset(&k, 0, sizeof k);
        if (strstr(c->signing_key, "-----BEGIN") != NULL) {
            rc = tg_key_parse_pem(&k, c->signing_key, strlen(c->signing_key), kid, diag);
        } else {
            rc = tg_key_load_file(&k, c->signing_key, kid, diag);
        }
        if (rc == TG_OK && !k.has_secret) {
            rc = tg_diag_set(diag, TG_ERR_KEY_FORMAT,
                             "TRIGGUARD_SIGNING_KEY / --key must be a private key");
        }
        if (rc == TG_OK) {
            rc = tg_keyring_add(ring, &k, TG_KEY_ACTIVE);
        }
        tg_key_wipe(&k);
        if (rc != TG_OK) {
            return rc;
        }
    }
    /* Verify-only keys: a comma-separated list of PEM files (private or public). */
    const char *s = c->verify_keys;
    while (*c->verify_keys != '\0') {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char path[sizeof c->verify_keys]; /* so n always fits */
        if (n == 0) {
            /* ",,", or a comma first or last, is more likely a lost file name than nothing */
            return tg_diag_set(diag, TG_ERR_CONFIG, "--verify-keys has an empty entry");
        }
        memcpy(path, s, n);
        path[n] = '\0';
        rc = add_verify_key(ring, path, diag);
        if (rc != TG_OK || comma == NULL) {
            return rc;
        }
        s = comma + 1;
    }
    return TG_OK;
}

/* SPEC §12: the log key is a separate key. One that also signed receipts would let a
 * signature over one kind of message be presented as the other's. */
static tg_err_t check_log_key_apart(const tg_keyring_t *ring, const tg_pipeline_log_t *log,
                                    tg_diag_t *diag) {
    for (size_t i = 0; log != NULL && log->enabled && i < ring->count; i++) {
        if (sodium_memcmp(ring->entries[i].key.pk, log->pub.pk, TG_KEY_PK_LEN) == 0) {
            return tg_diag_set(diag, TG_ERR_CONFIG,
                               "--log-key is the receipt key %s (--key or --verify-keys): the "
                               "transparency log needs a key of its own",
                               ring->entries[i].key.key_id);
        }
    }
    return TG_OK;
}

tg_err_t tg_keyset_load(tg_keyset_t **out, const tg_config_t *cfg, const tg_pipeline_log_t *log,
                        tg_diag_t *diag) {
    *out = NULL;
    tg_keyset_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return TG_ERR_NOMEM;
    }
    tg_keyring_init(&k->ring);
    tg_buf_init(&k->keys_json, 0);
    tg_err_t rc = fill_ring(&k->ring, cfg, diag);
    if (rc == TG_OK) {
        rc = check_log_key_apart(&k->ring, log, diag);
    }
    bool with_log = log != NULL && log->enabled;
    if (rc == TG_OK && (k->ring.count > 0 || with_log)) {
        tg_keys_json_log_t lk = {.key_id = with_log ? log->key_id : NULL,
                                 .origin = with_log ? log->pub.name : NULL,
                                 .vkey = with_log ? log->vkey : NULL,
                                 .key = with_log ? &log->key : NULL};
        rc = tg_keyring_keys_json_log(&k->keys_json, &k->ring, cfg->authority_id,
                                      with_log ? &lk : NULL);
    }
    if (rc != TG_OK) {
        tg_keyset_free(k);
        return rc;
    }
    k->signer = tg_keyring_signer(&k->ring);
    *out = k;
    return TG_OK;
}

void tg_keyset_free(tg_keyset_t *k) {
    if (k != NULL) {
        tg_keyring_wipe(&k->ring);
        tg_buf_free(&k->keys_json);
        sodium_memzero(k, sizeof *k);
        free(k);
    }
}

/* ---- tenants ----------------------------------------------------------------------------- */

tg_err_t tg_tenants_build(tg_tenants_t **out, const tg_config_t *c, const tg_tenants_t *prev,
                          tg_oidc_t *oidc, tg_diag_t *diag) {
    *out = NULL;
    if (c->auth_bypass && !tg_guard_listen_is_loopback(c->listen)) {
        return tg_diag_set(diag, TG_ERR_CONFIG,
                           "TRIGGUARD_UNSAFE_LOCAL_AUTH_BYPASS is only allowed on a loopback "
                           "--listen address, not %s",
                           c->listen);
    }
    tg_tenants_t *t = NULL;
    tg_err_t rc = tg_tenants_create(&t);
    if (rc == TG_OK && prev != NULL) {
        rc = tg_tenants_seed(t, prev);
    }
    if (rc == TG_OK && c->tokens[0]) {
        rc = tg_tenants_load_file(t, c->tokens, diag);
    }
    /* The environment a process started with cannot change: TRIGGUARD_API_KEYS is the same
     * value at every reload (kept in the config), loaded again beside the file. */
    if (rc == TG_OK && c->api_keys[0]) {
        rc = tg_tenants_load_env(t, c->api_keys, strlen(c->api_keys), diag);
    }
    if (rc == TG_OK && c->auth_bypass) {
        rc = tg_tenants_set_local_bypass(t, true);
    }
    /* Last: the tenants only issuers name get indices after every token's. */
    if (rc == TG_OK && oidc != NULL) {
        rc = tg_oidc_add_tenants(oidc, t, diag);
    }
    if (rc != TG_OK) {
        tg_tenants_destroy(t);
        return rc;
    }
    *out = t;
    return TG_OK;
}

/* ---- one reload -------------------------------------------------------------------------- */

static tg_err_t reload_tokens(tg_pipeline_t *p, tg_diag_t *diag) {
    tg_tenants_t *fresh = NULL;
    /* peek: this thread is the only one that replaces the table */
    tg_err_t rc = tg_tenants_build(&fresh, &p->cfg, tg_swap_peek(p->tenants), p->oidc, diag);
    if (rc == TG_OK) {
        tg_tenants_destroy(tg_swap_exchange(p->tenants, fresh));
    }
    return rc;
}

/* The --oidc-config file (and the JWKS files) read again; the flags are as at start. */
static tg_err_t reload_oidc(tg_pipeline_t *p, tg_diag_t *diag) {
    tg_oidc_conf_t *fresh = NULL;
    tg_err_t rc = tg_oidc_conf_build(&fresh, &p->cfg, diag);
    return rc == TG_OK ? tg_oidc_reload(p->oidc, fresh, diag) : rc;
}

static tg_err_t reload_keys(tg_pipeline_t *p, tg_diag_t *diag) {
    tg_keyset_t *fresh = NULL;
    tg_err_t rc = tg_keyset_load(&fresh, &p->cfg, &p->log, diag);
    if (rc == TG_OK && fresh->signer == NULL && p->cfg.signing_key[0] != '\0') {
        rc = tg_diag_set(diag, TG_ERR_NO_KEY, "the signing key loaded without its secret");
    }
    if (rc != TG_OK) {
        tg_keyset_free(fresh);
        return rc;
    }
    tg_keyset_free(tg_swap_exchange(p->keys, fresh));
    return TG_OK;
}

/* The listeners ask the store for the pair at each handshake (tls.h), so replacing it is
 * enough: new connections get the new certificate, open ones finish on theirs. The new pair
 * is checked as at start (both files parse, the key is the certificate's) before it is
 * swapped in; otherwise the old one keeps serving. */
static tg_err_t reload_tls(tg_pipeline_t *p, tg_diag_t *diag) {
    if (p->tls == NULL) {
        return tg_diag_set(diag, TG_ERR_CONFIG, "no TLS listener was started to take it");
    }
    return tg_tls_reload(p->tls, p->cfg.tls_cert, p->cfg.tls_key, diag);
}

void tg_pipeline_set_tls(tg_pipeline_t *p, tg_tls_t *tls) { p->tls = tls; }

static void log_part(unsigned part, const tg_reload_report_t *r, const char *trigger) {
    if (r->rc[part] == TG_OK) {
        TG_LOG(TG_LOG_INFO, part == TG_PART_POLICY ? "policy_reloaded" : "reloaded",
               "%s reloaded (%s)", part_names[part], trigger);
    } else if (part == TG_PART_POLICY) {
        TG_LOG(TG_LOG_ERROR, "policy_reload_failed", "kept the old policy: %s", r->error[part]);
    } else {
        TG_LOG(TG_LOG_ERROR, "reload_failed", "%s: kept the old one: %s", part_names[part],
               r->error[part]);
    }
}

tg_err_t tg_pipeline_reload_all(tg_pipeline_t *p, const char *trigger) {
    return tg_pipeline_reload_parts(p, trigger, NULL);
}

tg_err_t tg_pipeline_reload_parts(tg_pipeline_t *p, const char *trigger, tg_reload_report_t *out) {
    tg_reload_report_t r;
    memset(&r, 0, sizeof r);
    r.trigger = trigger;
    pthread_mutex_lock(&p->reload_mu);
    r.at_ms = tg_clock_now_ms();
    r.tried[TG_PART_POLICY] = true;
    r.tried[TG_PART_TOKENS] =
        p->cfg.tokens[0] != '\0' || p->cfg.api_keys[0] != '\0' || p->oidc != NULL;
    r.tried[TG_PART_KEYS] = p->cfg.signing_key[0] != '\0' || p->cfg.verify_keys[0] != '\0';
    r.tried[TG_PART_TLS] = p->cfg.tls_cert[0] != '\0';
    r.tried[TG_PART_OIDC] = p->oidc != NULL;
    r.tried[TG_PART_SHADOW] = p->shadow != NULL;
    tg_err_t first = TG_OK;
    for (unsigned k = 0; k < TG_PART__COUNT; k++) {
        unsigned i = part_order[k];
        if (!r.tried[i]) {
            continue;
        }
        tg_diag_t d = {{0}};
        tg_err_t rc = i == TG_PART_POLICY   ? tg_pipeline_reload(p, &d)
                      : i == TG_PART_TOKENS ? reload_tokens(p, &d)
                      : i == TG_PART_KEYS   ? reload_keys(p, &d)
                      : i == TG_PART_OIDC   ? reload_oidc(p, &d)
                      : i == TG_PART_SHADOW ? tg_pipeline_shadow_reload(p, &d)
                                            : reload_tls(p, &d);
        r.rc[i] = rc;
        if (rc != TG_OK) {
            (void)snprintf(r.error[i], sizeof r.error[i], "%s", d.msg[0] ? d.msg : tg_strerror(rc));
            first = first != TG_OK ? first : rc;
        }
        atomic_fetch_add_explicit(&p->reload_count[i][rc != TG_OK], 1, memory_order_relaxed);
        log_part(i, &r, trigger);
    }
    pthread_mutex_lock(&p->admin_mu); /* never held long: /version reads it */
    p->last_reload = r;
    pthread_mutex_unlock(&p->admin_mu);
    pthread_mutex_unlock(&p->reload_mu);
    if (out != NULL) {
        *out = r;
    }
    return first;
}

void tg_pipeline_last_reload(tg_pipeline_t *p, tg_reload_report_t *out) {
    pthread_mutex_lock(&p->admin_mu);
    *out = p->last_reload;
    pthread_mutex_unlock(&p->admin_mu);
}

/* ---- report ------------------------------------------------------------------------------ */

/* {"at":"<RFC 3339>","trigger":T,"reloaded":[...],"failed":{part:error},"result":"ok"|"failed"}
 * Errors are diag texts: paths and JSON paths, never a key or a token. */
tg_err_t tg_reload_report_json(tg_buf_t *o, const tg_reload_report_t *r) {
    char at[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(at, r->at_ms);
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "{\"at\":\"%s\",\"trigger\":\"%s\",\"reloaded\":[", at, r->trigger);
    }
    bool any = false, failed = false;
    for (unsigned i = 0; rc == TG_OK && i < TG_PART__COUNT; i++) {
        if (r->tried[i] && r->rc[i] == TG_OK) {
            rc = tg_buf_printf(o, "%s\"%s\"", any ? "," : "", part_names[i]);
            any = true;
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "],\"failed\":{");
    }
    for (unsigned i = 0; rc == TG_OK && i < TG_PART__COUNT; i++) {
        if (r->tried[i] && r->rc[i] != TG_OK) {
            rc = tg_buf_printf(o, "%s\"%s\":", failed ? "," : "", part_names[i]);
            if (rc == TG_OK) {
                rc = tg_canon_string(o, r->error[i], strlen(r->error[i]));
            }
            failed = true;
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "},\"result\":\"%s\"}", failed ? "failed" : "ok");
    }
    return rc;
}

/* ---- POST /v1/admin/reload --------------------------------------------------------------- */

/* The reload runs on the control thread (tg_pipeline_admin_poll), never on an event thread:
 * a swap's exchange waits for the requests that hold the old object, and some of those are
 * suspended connections that only an event thread can finish. */

/* What the deferred answer's access-log line needs once the control thread answered. */
typedef struct admin_req {
    tg_pipeline_t *p;
    char subject[TG_GUARD_SUBJECT_MAX + 1];
} admin_req_t;

static void admin_resumed(tg_exchange_t *ex, void *ud) {
    admin_req_t *a = ud;
    ex->log_subject = a->subject;
    tg_pipeline_finish_simple(a->p, ex, TG_ROUTE_ADMIN_RELOAD);
    free(a);
}

void tg_route_admin_reload(tg_pipeline_t *p, tg_exchange_t *ex) {
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        tg_pipeline_finish_simple(p, ex, TG_ROUTE_ADMIN_RELOAD);
        return;
    }
    char subject[TG_GUARD_SUBJECT_MAX + 1] = "";
    tg_swap_ref_t th;
    const tg_tenants_t *t = tg_pipeline_tenants_acquire(p, &th);
    tg_auth_t who;
    const char *why = NULL;
    tg_err_t rc = tg_pipeline_auth(p, t, ex->authorization, ex->request_id, &who, &why);
    const tg_principal_t *pr = who.principal;
    tg_role_t role = pr != NULL ? pr->role : TG_ROLE_CALLER;
    if (pr != NULL) {
        (void)snprintf(subject, sizeof subject, "%s", pr->subject.ptr);
    }
    tg_pipeline_auth_end(&who);
    /* Released before the reload: this request must not be one the swap waits for. */
    tg_pipeline_tenants_release(p, &th);
    ex->log_subject = subject[0] ? subject : NULL;
    admin_req_t *a = NULL;
    if (rc != TG_OK) {
        tg_reply_error(ex, rc, why);
    } else if (role != TG_ROLE_ADMIN) {
        char msg[128];
        (void)snprintf(msg, sizeof msg,
                       "a token with role \"%s\" may not reload (admin tokens may)",
                       tg_role_name(role));
        tg_reply_fail(ex, TG_ANSWER_ROLE_NOT_ALLOWED, msg);
    } else if ((a = malloc(sizeof *a)) == NULL) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
    } else {
        a->p = p;
        memcpy(a->subject, subject, sizeof subject);
        pthread_mutex_lock(&p->admin_mu);
        bool closed = p->admin_closed, busy = p->admin_pending != NULL;
        if (!closed && !busy) {
            ex->on_resume = admin_resumed;
            ex->on_resume_ud = a;
            tg_exchange_defer(ex);
            p->admin_pending = ex;
        }
        pthread_mutex_unlock(&p->admin_mu);
        if (!closed && !busy) {
            ex->log_subject = NULL; /* subject is this frame's; admin_resumed sets a copy */
            return;                 /* answered, counted and logged by admin_resumed */
        }
        free(a);
        ex->retry_after_s = 1;
        tg_reply_fail(ex, TG_ANSWER_OVERLOADED,
                      closed ? "the server is shutting down"
                             : "a reload is already waiting to run; retry shortly");
    }
    tg_pipeline_finish_simple(p, ex, TG_ROUTE_ADMIN_RELOAD);
}

/* Takes the waiting exchange, if any; close refuses every later one. */
static tg_exchange_t *take_pending(tg_pipeline_t *p, bool close) {
    pthread_mutex_lock(&p->admin_mu);
    tg_exchange_t *ex = p->admin_pending;
    p->admin_pending = NULL;
    p->admin_closed = p->admin_closed || close;
    pthread_mutex_unlock(&p->admin_mu);
    return ex;
}

void tg_pipeline_admin_poll(tg_pipeline_t *p) {
    tg_exchange_t *ex = take_pending(p, false);
    if (ex == NULL) {
        return;
    }
    tg_reload_report_t r;
    /* the report says what failed; the error value adds nothing to it */
    TG_IGNORE(tg_pipeline_reload_parts(p, "admin", &r));
    tg_buf_reset(&ex->out);
    /* 200 whatever the parts did: the body says which reloaded and which kept the old one. */
    tg_reply_built(ex, tg_reload_report_json(&ex->out, &r), TG_ANSWER_OK);
    tg_exchange_complete(ex);
}

void tg_pipeline_admin_close(tg_pipeline_t *p) {
    tg_exchange_t *ex = take_pending(p, true);
    if (ex != NULL) {
        ex->retry_after_s = 1;
        tg_reply_fail(ex, TG_ANSWER_OVERLOADED, "the server is shutting down");
        tg_exchange_complete(ex);
    }
}
