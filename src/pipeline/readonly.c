/* readonly.c — the endpoints that change nothing: health, readiness, version, keys,
 * capabilities, receipt verification, stored receipts, metrics (SPEC §3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"
#include "trigguard/clock.h"
#include "trigguard/log.h"
#include "trigguard/receipt.h"
#include "trigguard/version.h"

void tg_route_healthz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)p;
    (void)rest;
    tg_reply_built(ex, tg_buf_puts(&ex->out, "{\"status\":\"ok\"}"), TG_ANSWER_OK);
}

/* Appends "; part" (or "part" first) to the NUL-terminated text in buf[0..cap). */
static void add_reason(char *buf, size_t cap, const char *part) {
    size_t n = strlen(buf);
    (void)snprintf(buf + n, cap - n, "%s%s", n > 0 ? "; " : "", part);
}

/* Not ready: "reason" says why, one clause per missing part, so that an operator (or a load
 * balancer's log) reads "ledger: probe write ...: No space left on device", not only 503. */
void tg_route_readyz(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    bool policy = tg_swap_peek(p->policy) != NULL;
    tg_swap_ref_t kh;
    bool key = tg_pipeline_keys_acquire(p, &kh)->signer != NULL;
    tg_pipeline_keys_release(p, &kh);
    char ledger_why[256];
    bool ledger = tg_db_health(p->db, ledger_why, sizeof ledger_why);
    bool serving = atomic_load(&p->serving);
    bool ready = policy && key && ledger && serving;
    tg_err_t rc =
        tg_buf_printf(&ex->out,
                      "{\"ready\":%s,\"policy\":%s,\"signing_key\":%s,\"ledger\":%s,"
                      "\"serving\":%s",
                      ready ? "true" : "false", policy ? "true" : "false", key ? "true" : "false",
                      ledger ? "true" : "false", serving ? "true" : "false");
    if (rc == TG_OK && !ready) {
        char why[640] = "";
        if (!serving) {
            add_reason(why, sizeof why, "not serving (starting or stopping)");
        }
        if (!policy) {
            add_reason(why, sizeof why, "no policy loaded");
        }
        if (!key) {
            add_reason(why, sizeof why, "no signing key loaded");
        }
        if (!ledger) {
            char part[sizeof ledger_why + 16];
            (void)snprintf(part, sizeof part, "%s: %s",
                           tg_db_unavailable(p->db) == TG_ERR_STORE_UNAVAILABLE ? "database"
                                                                                : "ledger",
                           ledger_why[0] != '\0' ? ledger_why : "unhealthy");
            add_reason(why, sizeof why, part);
        }
        rc = tg_buf_puts(&ex->out, ",\"reason\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(&ex->out, why, strlen(why));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    tg_reply_built(ex, rc, ready ? TG_ANSWER_OK : TG_ANSWER_NOT_READY);
}

/* ,"policy":{"version","hash","loaded_at","last_reload":null|{"result","at","error_code"?,
 * "error"?}}: a refused bundle's error is the loader's diag (a JSON path and a lint code or
 * a file error), never a secret. */
static tg_err_t policy_json(tg_buf_t *o, const tg_policy_ref_t *ref,
                            const tg_reload_report_t *last) {
    const char *pv = tg_policy_version(ref->policy);
    char at[TG_TIME_ISO_LEN + 1];
    tg_err_t rc = tg_time_format_ms(at, ref->loaded_at_ms);
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, ",\"policy\":{\"version\":");
    }
    if (rc == TG_OK) {
        rc = tg_canon_string(o, pv, strlen(pv));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, ",\"hash\":\"%s\",\"loaded_at\":\"%s\",\"last_reload\":",
                           tg_policy_hash_hex(ref->policy), at);
    }
    if (rc == TG_OK && last->at_ms == 0) {
        return tg_buf_puts(o, "null}");
    }
    tg_err_t prc = last->rc[TG_PART_POLICY];
    if (rc == TG_OK) {
        rc = tg_time_format_ms(at, last->at_ms);
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(o, "{\"result\":\"%s\",\"at\":\"%s\"", prc == TG_OK ? "ok" : "failed",
                           at);
    }
    if (rc == TG_OK && prc != TG_OK) {
        rc = tg_buf_printf(o, ",\"error_code\":\"%s\",\"error\":", tg_err_name(prc));
        if (rc == TG_OK) {
            const char *e = last->error[TG_PART_POLICY];
            rc = tg_canon_string(o, e, strlen(e));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "}}");
    }
    return rc;
}

void tg_route_version(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_swap_ref_t hold;
    tg_policy_ref_t *ref = tg_pipeline_policy_acquire(p, &hold);
    const char *pv = tg_policy_version(ref->policy);
    tg_err_t rc = tg_buf_printf(
        &ex->out,
        "{\"engine\":\"%s\",\"version\":\"%s\",\"protocol\":\"%s\","
        "\"protocol_version\":\"%s\",\"build_commit\":\"%s\","
        "\"durability\":\"%s\",\"store\":\"%s\",\"policy_version\":",
        TG_ENGINE_VERSION, TG_VERSION, TG_PROTOCOL_VERSION, TG_PROTOCOL_SEMVER, TG_GIT_COMMIT,
        tg_config_durability_name(p->cfg.durability), p->cfg.store_postgres ? "postgres" : "file");
    if (rc == TG_OK) {
        rc = tg_canon_string(&ex->out, pv, strlen(pv));
    }
    if (rc == TG_OK) {
        rc = tg_buf_printf(&ex->out, ",\"policy_hash\":\"%s\"", tg_policy_hash_hex(ref->policy));
    }
    /* The policy on its own: what serves, since when, and whether the last reload took a new
     * bundle (policy_version and policy_hash above stay for older clients). */
    tg_reload_report_t last;
    tg_pipeline_last_reload(p, &last);
    if (rc == TG_OK) {
        rc = policy_json(&ex->out, ref, &last);
    }
    tg_pipeline_policy_release(p, &hold);
    tg_swap_ref_t kh;
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    if (rc == TG_OK && ks->signer != NULL) {
        rc = tg_buf_printf(&ex->out, ",\"signing_key_id\":\"%s\"", ks->signer->key_id);
    }
    tg_pipeline_keys_release(p, &kh);
    /* The last reload, whatever it did; null until the first (reload.c). */
    if (rc == TG_OK) {
        rc = tg_buf_puts(&ex->out, ",\"last_reload\":");
    }
    if (rc == TG_OK) {
        rc = last.at_ms == 0 ? tg_buf_puts(&ex->out, "null")
                             : tg_reload_report_json(&ex->out, &last);
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(&ex->out, '}');
    }
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

void tg_route_keys(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_swap_ref_t kh;
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    if (ks->keys_json.len == 0) {
        tg_pipeline_keys_release(p, &kh);
        tg_reply_error(ex, TG_ERR_NO_KEY, "no key is loaded");
        return;
    }
    /* How long a verifier may keep this document: a key rotation publishes the next key
     * at least this long before it signs with it (docs/OPERATIONS.md, "Key rotation"). */
    ex->cache_control = "public, max-age=300";
    tg_err_t rc = tg_buf_append(&ex->out, ks->keys_json.data, ks->keys_json.len);
    tg_pipeline_keys_release(p, &kh);
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

void tg_route_capabilities(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_swap_ref_t hold;
    tg_policy_ref_t *ref = tg_pipeline_policy_acquire(p, &hold);
    tg_buf_t *o = &ex->out;
    tg_err_t rc = tg_buf_printf(
        o,
        "{\"protocol\":\"%s\",\"protocol_version\":\"%s\",\"engine\":\"%s\","
        "\"decisions\":[\"PERMIT\",\"DENY\",\"SILENCE\",\"ESCALATE\"],"
        "\"algorithms\":{\"signature\":\"Ed25519\",\"hash\":\"SHA-256\","
        "\"canonicalization\":\"RFC8785\"},"
        "\"endpoints\":[\"POST /v1/evaluate\",\"POST /execute\",\"POST /decide\",\"GET "
        "/v1/gate\",\"POST /v1/gate\","
        "\"POST /v1/verify\",\"POST /verify-receipt\",\"POST /protocol/verify-receipt\","
        "\"POST /protocol/verify-signature\","
        "\"GET /v1/receipts/{executionId}\",\"POST /v1/receipts/{executionId}/redeem\","
        "\"GET /v1/approvals\",\"GET /v1/approvals/{id}\",\"POST /v1/approvals/{id}/approve\","
        "\"POST /v1/approvals/{id}/deny\","
        "\"GET /.well-known/trigguard/keys.json\","
        "\"GET /protocol/capabilities\",\"GET /healthz\",\"GET /readyz\",\"GET /version\","
        "\"GET /metrics\"",
        TG_PROTOCOL_VERSION, TG_PROTOCOL_SEMVER, TG_ENGINE_VERSION);
    if (rc == TG_OK && p->log.enabled) { /* the transparency log's routes (SPEC §12) */
        rc = tg_buf_puts(o, ",\"GET /v1/receipts/{executionId}/proof\",\"GET /v1/log/checkpoint\","
                            "\"GET /v1/log/tile/{L}/{N}[.p/{W}]\","
                            "\"GET /v1/log/tile/entries/{N}[.p/{W}]\","
                            "\"GET /v1/log/proof/inclusion\",\"GET /v1/log/proof/consistency\"");
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "],\"surfaces\":[");
    }
    size_t n = tg_policy_surface_count(ref->policy);
    for (uint32_t i = 0; i < n && rc == TG_OK; i++) {
        tg_sv_t name = tg_policy_surface_name(ref->policy, i);
        rc = tg_buf_printf(o, "%s{\"name\":", i ? "," : "");
        if (rc == TG_OK) {
            rc = tg_canon_string(o, name.ptr, name.len);
        }
        if (rc == TG_OK) {
            rc = tg_buf_printf(o, ",\"tier\":%d}", tg_policy_surface_tier(ref->policy, i));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_puts(o, "]}");
    }
    tg_pipeline_policy_release(p, &hold);
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

/* The anonymous verification routes' door, in their order: the verification limiter first,
 * before any parsing or signature work (these routes take no token, so it is all the bound
 * there is on what anonymous callers can make us compute), then the body's size, type and
 * JSON. *doc is the parsed body (the caller's to decref), or NULL with the answer given. */
static json_t *verify_admit(tg_pipeline_t *p, tg_exchange_t *ex) {
    tg_rate_info_t info;
    if (tg_rate_check(p->verify_rate, TG_GUARD_NO_TENANT, tg_clock_mono_ns(), &info) != TG_OK) {
        ex->retry_after_s = (int)tg_rate_retry_after_s(info.retry_after_ms);
        tg_reply_error(ex, TG_ERR_RATE_LIMITED, "verification rate limit exceeded");
        return NULL;
    }
    if (ex->body_too_large) {
        tg_reply_body_too_large(ex, (size_t)p->cfg.max_body);
        return NULL;
    }
    if (!tg_http_content_type_is_json(ex->content_type)) {
        tg_reply_fail(ex, TG_ANSWER_UNSUPPORTED_MEDIA, "Content-Type must be application/json");
        return NULL;
    }
    json_t *doc = NULL;
    tg_diag_t diag = {{0}};
    tg_err_t rc = tg_json_parse(&doc, ex->body, ex->body_len, &p->limits, &diag);
    if (rc != TG_OK) {
        tg_reply_json_error(ex, &p->limits, rc, diag.msg);
        return NULL;
    }
    return doc;
}

static void verify_common(tg_pipeline_t *p, tg_exchange_t *ex, bool protocol) {
    json_t *doc = verify_admit(p, ex);
    if (doc == NULL) {
        return;
    }
    tg_diag_t diag = {{0}};
    tg_err_t rc;
    tg_swap_ref_t kh;
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    tg_receipt_verdict_t vd;
    rc = tg_receipt_verify_doc(&ks->ring, doc, tg_clock_now_ms(), &vd, &diag); /* the CLI's rule */
    tg_pipeline_keys_release(p, &kh);
    json_decref(doc);
    bool internal = rc == TG_ERR_NOMEM || rc == TG_ERR_INTERNAL;
    if (internal) {
        tg_reply_error(ex, TG_ERR_INTERNAL, NULL);
        return;
    }
    bool valid = rc == TG_OK;
    /* Expired = authentic but no longer authorizing: say both (SPEC §5). */
    bool authentic = valid || rc == TG_ERR_RECEIPT_EXPIRED;
    tg_buf_t *o = &ex->out;
    /* SPEC §11.1: whether the receipt lets its action run, one rule for every verifier. */
    bool authorizes = tg_receipt_authorizes(rc, &vd);
    rc = tg_buf_printf(o, "{%s\"valid\":%s,\"authentic\":%s,\"authorizes\":%s,\"reason\":\"%s\"",
                       protocol ? "\"type\":\"verify_receipt\",\"protocol\":\"" TG_PROTOCOL_VERSION
                                  "\",\"protocol_version\":\"" TG_PROTOCOL_SEMVER "\","
                                : "",
                       valid ? "true" : "false", authentic ? "true" : "false",
                       authorizes ? "true" : "false", tg_receipt_verdict_reason(rc, &vd));
    if (rc == TG_OK && !valid && diag.msg[0]) {
        rc = tg_buf_puts(o, ",\"detail\":");
        if (rc == TG_OK) {
            rc = tg_canon_string(o, diag.msg, strlen(diag.msg));
        }
    }
    if (rc == TG_OK) {
        rc = tg_buf_putc(o, '}');
    }
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

void tg_route_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    verify_common(p, ex, false);
}

void tg_route_protocol_verify(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    verify_common(p, ex, true);
}

/* One string member of the verify-signature body under its name or its alias: NULL with
 * *bad set when both are given or the value is not a string. */
static const char *sig_member(const json_t *doc, const char *name, const char *alias, bool *bad) {
    const json_t *a = json_object_get(doc, name);
    const json_t *b = alias != NULL ? json_object_get(doc, alias) : NULL;
    if ((a != NULL && b != NULL) || (a != NULL && !json_is_string(a)) ||
        (b != NULL && !json_is_string(b))) {
        *bad = true;
        return NULL;
    }
    return a != NULL ? json_string_value(a) : b != NULL ? json_string_value(b) : NULL;
}

/* What the Ed25519 check found: "valid", "malformed" (not 64 hex, not the base64 of 64
 * bytes), "unknown_key" (no loaded key of that id), "bad_signature". */
static const char *check_signature(const tg_keyring_t *ring, const char *hash_hex,
                                   const char *sig_b64, const char *kid) {
    uint8_t hash[32], sig[TG_KEY_SIG_LEN];
    size_t got = 0;
    size_t hl = strlen(hash_hex), sl = strlen(sig_b64);
    bool lower = hl == 64;
    for (size_t i = 0; i < hl && lower; i++) {
        lower = (hash_hex[i] >= '0' && hash_hex[i] <= '9') ||
                (hash_hex[i] >= 'a' && hash_hex[i] <= 'f');
    }
    if (!lower || tg_unhex(hash, sizeof hash, hash_hex, hl) != TG_OK ||
        sl != TG_RECEIPT_SIG_B64_LEN ||
        sodium_base642bin(sig, sizeof sig, sig_b64, sl, NULL, &got, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != sizeof sig) {
        return "malformed";
    }
    if (kid != NULL) {
        const tg_key_t *k = tg_keyring_find(ring, kid, strlen(kid));
        if (k == NULL) {
            return "unknown_key";
        }
        return tg_key_verify(k, sig, hash, sizeof hash) == TG_OK ? "valid" : "bad_signature";
    }
    /* no key id: any loaded key whose signature holds (the ring is at most 16 keys) */
    for (size_t i = 0; i < ring->count; i++) {
        if (tg_key_verify(&ring->entries[i].key, sig, hash, sizeof hash) == TG_OK) {
            return "valid";
        }
    }
    return ring->count > 0 ? "bad_signature" : "unknown_key";
}

void tg_route_verify_signature(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    json_t *doc = verify_admit(p, ex);
    if (doc == NULL) {
        return;
    }
    bool bad = !json_is_object(doc);
    const char *name;
    json_t *v;
    if (!bad) {
        json_object_foreach(doc, name, v) {
            bad =
                bad || (strcmp(name, "receiptHash") != 0 &&
                        strcmp(name, "authoritySignature") != 0 && strcmp(name, "signature") != 0 &&
                        strcmp(name, "authorityKeyId") != 0 && strcmp(name, "keyId") != 0);
        }
    }
    const char *hash = bad ? NULL : sig_member(doc, "receiptHash", NULL, &bad);
    const char *sig = bad ? NULL : sig_member(doc, "authoritySignature", "signature", &bad);
    const char *kid = bad ? NULL : sig_member(doc, "authorityKeyId", "keyId", &bad);
    if (bad || hash == NULL || sig == NULL) {
        json_decref(doc);
        tg_reply_error(ex, TG_ERR_REQUEST_INVALID,
                       "body: {\"receiptHash\": 64 hex, \"authoritySignature\" (or \"signature\"): "
                       "base64, \"authorityKeyId\" (or \"keyId\"): optional} and nothing else");
        return;
    }
    tg_swap_ref_t kh;
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    const char *reason = check_signature(&ks->ring, hash, sig, kid);
    tg_pipeline_keys_release(p, &kh);
    json_decref(doc);
    tg_err_t rc = tg_buf_printf(&ex->out,
                                "{\"type\":\"verify_signature\",\"protocol\":\"" TG_PROTOCOL_VERSION
                                "\",\"protocol_version\":\"" TG_PROTOCOL_SEMVER
                                "\",\"valid\":%s,\"reason\":\"%s\"}",
                                strcmp(reason, "valid") == 0 ? "true" : "false", reason);
    tg_reply_built(ex, rc, TG_ANSWER_OK);
}

void tg_route_receipts(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    tg_pipeline_get_receipt(p, ex, rest);
}

static tg_err_t render_config(tg_pipeline_t *p, tg_buf_t *o) {
    _Static_assert(TG_METRICS_RELOAD_PARTS == TG_PART__COUNT, "one reload counter per part");
    tg_metrics_config_t c;
    for (unsigned i = 0; i < TG_PART__COUNT; i++) {
        c.part[i] = tg_reload_part_name(i);
        c.ok[i] = (uint64_t)atomic_load_explicit(&p->reload_count[i][0], memory_order_relaxed);
        c.failed[i] = (uint64_t)atomic_load_explicit(&p->reload_count[i][1], memory_order_relaxed);
    }
    tg_swap_ref_t ph, kh;
    const tg_policy_ref_t *ref = tg_pipeline_policy_acquire(p, &ph);
    const tg_keyset_t *ks = tg_pipeline_keys_acquire(p, &kh);
    c.policy_version = tg_policy_version(ref->policy);
    c.policy_hash = tg_policy_hash_hex(ref->policy);
    c.signing_key_id = ks->signer != NULL ? ks->signer->key_id : "";
    c.policy_loaded_at_ms = ref->loaded_at_ms;
    tg_reload_report_t last;
    tg_pipeline_last_reload(p, &last);
    c.policy_last_reload_at_ms = last.at_ms;
    c.policy_last_reload_ok = last.at_ms == 0 || last.rc[TG_PART_POLICY] == TG_OK;
    tg_err_t rc = tg_metrics_render_config(o, &c);
    tg_pipeline_keys_release(p, &kh);
    tg_pipeline_policy_release(p, &ph);
    return rc;
}

void tg_route_metrics(tg_pipeline_t *p, tg_exchange_t *ex, const char *rest) {
    (void)rest;
    tg_metrics_state_t st;
    tg_db_stats_t ds;
    tg_db_stats(p->db, &ds);
    st.ledger = ds.records;
    st.log = (tg_metrics_log_t){.enabled = ds.log.enabled,
                                .size = ds.log.size,
                                .integrated = ds.log.integrated,
                                .checkpoints = ds.log.checkpoints,
                                .lag_ms_last = ds.log.lag_ms_last,
                                .lag_sum_us = ds.log.lag_sum_us,
                                .failures = ds.log.failures,
                                .waiters = ds.log.waiters,
                                .integrator = ds.log.integrator};
    memcpy(st.log.lag_hist, ds.log.lag_hist, sizeof st.log.lag_hist);
    tg_rate_stats(p->rate, &st.rate);
    tg_rate_stats(p->verify_rate, &st.verify_rate);
    tg_bulkhead_stats(p->bulkhead, &st.bulkhead);
    st.store = ds.keys;
    st.receipts = ds.receipts;
    const tg_store_stats_t *tables[2] = {&ds.keys, &ds.receipts};
    for (size_t i = 0; i < 2; i++) {
        int64_t r = atomic_load(&p->fill_rate_milli[i]);
        int64_t b = atomic_load(&p->fill_bytes_rate_milli[i]);
        st.fill_rated[i] = r != INT64_MIN && b != INT64_MIN;
        st.fill_rate_milli[i] = st.fill_rated[i] ? r : 0;
        /* the time to full from the tick's rates and the counts of now, so a table that
         * just filled reads 0 at once */
        tg_store_fill_t f = {.rated = st.fill_rated[i],
                             .entries_per_s = (double)st.fill_rate_milli[i] / 1000.0,
                             .bytes_per_s = st.fill_rated[i] ? (double)b / 1000.0 : 0.0};
        st.fill_eta_s[i] = tg_store_fill_seconds_to_full(&f, tables[i]);
    }
    tg_err_t rc = tg_metrics_render(&ex->out, &p->metrics);
    if (rc == TG_OK) {
        rc = tg_metrics_render_process(&ex->out, &p->metrics);
    }
    if (rc == TG_OK) {
        rc = tg_metrics_render_state(&ex->out, &st);
    }
    if (rc == TG_OK) {
        rc = render_config(p, &ex->out);
    }
    if (rc == TG_OK) {
        rc = tg_oidc_metrics(p->oidc, &ex->out, tg_clock_now_ms()); /* nothing when NULL */
    }
    tg_reply_built(ex, rc, TG_ANSWER_OK);
    if (rc == TG_OK) {
        ex->content_type_out = "text/plain; version=0.0.4; charset=utf-8";
    }
}
