/* fuzz_request.c — request text → frame → kernel → JSON against fixed policies: never crash,
 * deterministic, conversion errors explain themselves, one of three verdicts, PERMIT only
 * with its reason, and the canonical form of a request decides and hashes the same. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A compact bundle using every feature, so the target works without the source tree. */
static const char BUNDLE[] =
    "{\"version\":\"fuzz-1\",\"authority\":\"fuzz\",\"actors\":{\"g\":[\"a\",\"b\"]},"
    "\"signals\":{\"riskScore\":{\"type\":\"number\"},\"spike\":{\"type\":\"boolean\","
    "\"deny_on_tier\":[1]},\"lat\":{\"type\":\"number\",\"thresholds\":{\"2\":0.5},\"reason\":"
    "\"LAT\"},\"ok\":{\"type\":\"boolean\",\"required_for\":[\"req\"]}},"
    "\"surfaces\":{\"pay\":{\"tier\":1,\"required_context\":{\"amount\":\"number\","
    "\"currency\":\"string\"},\"actors\":[\"@g\",\"c\"],\"rules\":["
    "{\"id\":\"big\",\"effect\":\"deny\",\"reason\":\"BIG\",\"when\":[{\"field\":"
    "\"context.amount\",\"op\":\"gt\",\"value\":100},{\"field\":\"signals.riskScore\",\"op\":"
    "\"gt\",\"value\":0.1}]},{\"id\":\"ok\",\"effect\":\"permit\",\"when\":[{\"field\":"
    "\"context.currency\",\"op\":\"in\",\"value\":[\"USD\",\"EUR\"]},{\"field\":\"actor\","
    "\"op\":\"ne\",\"value\":\"c\"},{\"field\":\"action\",\"op\":\"exists\"}]}]},"
    "\"frz\":{\"tier\":2,\"frozen\":true,\"default\":\"permit\"},"
    "\"req\":{\"tier\":3,\"required_context\":[\"x\"],\"rules\":[{\"id\":\"n\",\"effect\":"
    "\"deny\",\"when\":[{\"field\":\"context.x\",\"op\":\"not_in\",\"value\":[1,\"1\",true]},"
    "{\"field\":\"context.y\",\"op\":\"exists\",\"value\":false}]}],\"default\":\"permit\"},"
    "\"t2\":{\"tier\":2,\"rules\":[{\"effect\":\"permit\",\"when\":[{\"field\":\"context.x\","
    "\"op\":\"lte\",\"value\":-0.5}]}]}},"
    "\"tools\":{\"pay.tool\":{\"surface\":\"pay\",\"action\":\"charge\"},\"t\":\"t2\"}}";

static tg_policy_t *policies[2];
static size_t n_policies;

static void init(void) {
    if (n_policies > 0) {
        return;
    }
    if (tg_policy_load_text(&policies[0], BUNDLE, sizeof BUNDLE - 1, NULL) != TG_OK) {
        abort();
    }
    n_policies = 1;
    const char *src = getenv("TG_SRC");
    if (src != NULL) {
        char path[4096];
        snprintf(path, sizeof path, "%s/examples/policy.json", src);
        if (tg_policy_load_file(&policies[1], path, NULL) == TG_OK) {
            n_policies = 2;
        }
    }
}

/* The kernel's contract on any frame it is given: one of the three verdicts, a reason,
 * states entered in FSM order from RECEIVED, a known cause, and PERMIT only after the last
 * state with reason NO_POLICY_VIOLATION (SPEC 3.3: the zero decision never authorizes). */
static void check_decision(const tg_decision_t *d) {
    if ((d->verdict != TG_SILENCE && d->verdict != TG_PERMIT && d->verdict != TG_DENY) ||
        d->reason == NULL || d->reason[0] == '\0' || d->cause >= TG_CAUSE__COUNT ||
        d->n_states < 1 || d->n_states > TG_STATE__COUNT || d->tier > 3) {
        abort();
    }
    for (uint8_t i = 0; i < d->n_states; i++) {
        if (d->states[i] != i) {
            abort();
        }
    }
    if (d->verdict == TG_PERMIT &&
        (strcmp(d->reason, "NO_POLICY_VIOLATION") != 0 || d->n_states != TG_STATE__COUNT)) {
        abort();
    }
    const char *name = tg_verdict_name(d->verdict);
    if (strcmp(name, d->verdict == TG_PERMIT ? "PERMIT"
                     : d->verdict == TG_DENY ? "DENY"
                                             : "SILENCE") != 0) {
        abort();
    }
}

/* Converts and decides; returns the conversion result, fills *d and h (hash) on success. */
static tg_err_t decide(tg_decision_t *d, uint8_t h[32], const tg_policy_t *p, const json_t *req) {
    tg_frame_t f;
    tg_request_meta_t meta;
    tg_diag_t diag;
    memset(&diag, 0, sizeof diag);
    tg_err_t rc = tg_frame_from_request(&f, &meta, p, req, &diag);
    if (rc != TG_OK) {
        if ((rc != TG_ERR_REQUEST_INVALID && rc != TG_ERR_UNKNOWN_SURFACE) || diag.msg[0] == '\0') {
            abort();
        }
        return rc;
    }
    tg_decision_t e;
    tg_kernel_decide(d, tg_policy_tables(p), &f);
    tg_kernel_decide(&e, tg_policy_tables(p), &f);
    check_decision(d);
    if (d->verdict != e.verdict || d->reason != e.reason || d->cause != e.cause ||
        d->n_states != e.n_states || d->rules_evaluated != e.rules_evaluated) {
        abort(); /* the kernel is a pure function of (policy, frame) */
    }
    uint8_t h2[32];
    if (tg_request_hash(h, &f, &meta, NULL) != TG_OK ||
        tg_request_hash(h2, &f, &meta, NULL) != TG_OK || memcmp(h, h2, 32) != 0) {
        abort(); /* a converted request always hashes, and always alike */
    }
    /* The response body is strict JSON naming the same verdict and reason. */
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_decision_json_opts_t opts = {NULL, NULL, NULL, 0, 1};
    json_t *body = NULL;
    tg_json_limits_t lim = {1u << 20, 8, 1u << 16, 64};
    if (tg_decision_to_json(&b, d, p, &f, &opts) != TG_OK ||
        tg_json_parse(&body, b.data, b.len, &lim, NULL) != TG_OK) {
        abort();
    }
    const char *verdict = json_string_value(json_object_get(body, "decision"));
    const char *reason = json_string_value(json_object_get(body, "reason_code"));
    if (verdict == NULL || reason == NULL || strcmp(verdict, tg_verdict_name(d->verdict)) != 0 ||
        strcmp(reason, d->reason) != 0) {
        abort();
    }
    json_decref(body);
    /* The full explain (issue 21): strict JSON within its cap, decided as the kernel did. */
    tg_buf_reset(&b);
    tg_decision_t x;
    json_t *ex = NULL;
    if (tg_explain_json(&b, &x, p, &f) != TG_OK || b.len > TG_EXPLAIN_MAX_BYTES ||
        tg_json_parse(&ex, b.data, b.len, &lim, NULL) != TG_OK || x.verdict != d->verdict ||
        x.reason != d->reason || !json_is_array(json_object_get(ex, "rules"))) {
        abort();
    }
    json_decref(ex);
    tg_buf_free(&b);
    return TG_OK;
}

static void check_one(const tg_policy_t *p, const json_t *req) {
    tg_decision_t d1, d2;
    uint8_t h1[32], h2[32];
    tg_err_t rc1 = decide(&d1, h1, p, req);
    /* The canonical form of the request is the same request: same conversion result, same
     * decision, same request hash (receipts bind the hash, so it must not depend on member
     * order, whitespace or escapes). */
    tg_buf_t c;
    tg_buf_init(&c, 0);
    json_t *again = NULL;
    tg_json_limits_t lim = TG_JSON_LIMITS_DEFAULT;
    lim.max_bytes = 1u << 20; /* numbers may grow when written canonically */
    if (tg_canon_write(&c, req, NULL) != TG_OK ||
        tg_json_parse(&again, c.data, c.len, &lim, NULL) != TG_OK) {
        abort();
    }
    tg_err_t rc2 = decide(&d2, h2, p, again);
    if (rc1 != rc2 || (rc1 == TG_OK && (d1.verdict != d2.verdict || d1.reason != d2.reason ||
                                        memcmp(h1, h2, 32) != 0))) {
        abort();
    }
    json_decref(again);
    tg_buf_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    json_t *req = NULL;
    if (tg_json_parse(&req, (const char *)data, size, NULL, NULL) != TG_OK) {
        return 0;
    }
    for (size_t i = 0; i < n_policies; i++) {
        check_one(policies[i], req);
    }
    json_decref(req);
    return 0;
}
