/* fuzz_request.c — request text → frame → kernel → JSON against fixed policies: never crash,
 * deterministic, conversion errors explain themselves, PERMIT only with its reason. */
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

static void check_one(const tg_policy_t *p, const json_t *req) {
    tg_frame_t f;
    tg_request_meta_t meta;
    tg_diag_t diag;
    memset(&diag, 0, sizeof diag);
    tg_err_t rc = tg_frame_from_request(&f, &meta, p, req, &diag);
    if (rc != TG_OK) {
        if ((rc != TG_ERR_REQUEST_INVALID && rc != TG_ERR_UNKNOWN_SURFACE) || diag.msg[0] == '\0') {
            abort();
        }
        return;
    }
    tg_decision_t d, e;
    tg_kernel_decide(&d, p, &f);
    tg_kernel_decide(&e, p, &f);
    if (d.verdict != e.verdict || d.reason != e.reason || d.cause != e.cause ||
        d.n_states != e.n_states || d.reason == NULL || d.n_states < 1 ||
        (d.verdict == TG_PERMIT &&
         (strcmp(d.reason, "NO_POLICY_VIOLATION") != 0 || d.n_states != TG_STATE__COUNT))) {
        abort();
    }
    uint8_t h1[32], h2[32];
    tg_err_t r1 = tg_request_hash(h1, &f, &meta, NULL);
    tg_err_t r2 = tg_request_hash(h2, &f, &meta, NULL);
    if (r1 != r2 || (r1 == TG_OK && memcmp(h1, h2, 32) != 0)) {
        abort();
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_decision_json_opts_t opts = {NULL, NULL, NULL, 0, 1};
    if (tg_decision_to_json(&b, &d, p, &f, &opts) != TG_OK) {
        abort();
    }
    tg_buf_free(&b);
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
