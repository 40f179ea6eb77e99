/* fuzz_policy.c — bundle text → compile → (if valid) decide one request per surface: never
 * crash, every rejection explains itself, every accepted bundle is internally consistent,
 * policyHash is the SHA-256 of the canonical form, and the canonical text compiles to an
 * equivalent policy (same hash and counts; frames from one copy decide alike on the other). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trigguard/canon.h"
#include "trigguard/kernel.h"
#include "trigguard/kernel_tables.h"
#include "trigguard/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One of the four verdicts, states in FSM order, PERMIT only with its reason, ESCALATE only
 * from a rule (SPEC §11.2). */
static void check_decision(const tg_decision_t *d) {
    if ((d->verdict != TG_SILENCE && d->verdict != TG_PERMIT && d->verdict != TG_DENY &&
         d->verdict != TG_ESCALATE) ||
        (d->verdict == TG_ESCALATE && (d->cause != TG_CAUSE_RULE || d->rule_id.ptr == NULL)) ||
        d->reason == NULL || d->cause >= TG_CAUSE__COUNT || d->n_states < 1 ||
        d->n_states > TG_STATE__COUNT ||
        (d->verdict == TG_PERMIT &&
         (strcmp(d->reason, "NO_POLICY_VIOLATION") != 0 || d->n_states != TG_STATE__COUNT))) {
        abort();
    }
    for (uint8_t i = 0; i < d->n_states; i++) {
        if (d->states[i] != i) {
            abort();
        }
    }
}

typedef struct {
    unsigned permits_held;
} explain_count_t;

static void explain_count(void *ud, const tg_explain_step_t *st) {
    explain_count_t *c = ud;
    if (st->kind == TG_EXPLAIN_RULE && st->held && st->evaluated &&
        st->rule->effect == TG_EFFECT_PERMIT) {
        c->permits_held++;
    }
}

/* p2 is NULL or a second compilation of the same canonical bundle. */
static void decide_each_surface(const tg_policy_t *p, const tg_policy_t *p2) {
    size_t n = tg_policy_surface_count(p);
    for (uint32_t i = 0; i < n; i++) {
        tg_sv_t name = tg_policy_surface_name(p, i);
        uint32_t idx = 0;
        int tier = tg_policy_surface_tier(p, i);
        if (name.ptr == NULL || tg_policy_surface_find(&idx, p, name.ptr, name.len) != TG_OK ||
            idx != i || tier < 1 || tier > 3) {
            abort();
        }
        json_t *req = json_pack("{s:s%, s:s, s:s, s:{s:f, s:s, s:b}, s:{s:f}}", "surface", name.ptr,
                                (size_t)name.len, "actor", "agent.billing", "action",
                                "transfer_funds", "context", "amount", 2500.0, "currency", "USD",
                                "flag", 1, "signals", "riskScore", 0.25);
        if (req == NULL) {
            abort();
        }
        tg_frame_t f;
        tg_request_meta_t meta;
        if (tg_frame_from_request(&f, &meta, p, req, NULL) == TG_OK) {
            tg_decision_t d, e;
            tg_kernel_decide(&d, tg_policy_tables(p), &f);
            tg_kernel_decide(&e, tg_policy_tables(p), &f);
            check_decision(&d);
            if (d.verdict != e.verdict || d.reason != e.reason) {
                abort();
            }
            /* an ESCALATE always names a rule whose approval settings the policy holds */
            if (d.verdict == TG_ESCALATE &&
                tg_policy_rule_approval(p, f.surface, d.rule_id) == NULL) {
                abort();
            }
            /* explain walks the same evaluation: its decision is the kernel's, and the rules
             * it reports held agree with the verdict (groups and value_from included) */
            explain_count_t xc = {0};
            tg_kernel_explain(&e, tg_policy_tables(p), &f, explain_count, &xc);
            if (e.verdict != d.verdict || e.reason != d.reason ||
                (d.verdict == TG_PERMIT && d.cause == TG_CAUSE_RULE && xc.permits_held == 0)) {
                abort();
            }
            if (p2 != NULL) {
                /* ids are a function of the content: the frame is valid for the copy too */
                tg_kernel_decide(&e, tg_policy_tables(p2), &f);
                if (d.verdict != e.verdict || strcmp(d.reason, e.reason) != 0 ||
                    d.cause != e.cause || d.n_states != e.n_states) {
                    abort();
                }
            }
            tg_buf_t b;
            tg_buf_init(&b, 0);
            tg_decision_json_opts_t opts = {NULL, NULL, NULL, 0, 1};
            if (tg_decision_to_json(&b, &d, p, &f, &opts) != TG_OK) {
                abort();
            }
            tg_buf_free(&b);
            uint8_t h[32];
            if (tg_request_hash(h, &f, &meta, NULL) != TG_OK) {
                abort();
            }
        }
        json_decref(req);
    }
}

/* The lint of an accepted bundle: never fails, its counts add up, every finding has a
 * known code and a path, the same bundle as `previous` is no version reuse, and the report
 * renders as JSON. (The lint reads the bundle's tree, not the compiled copy, so the tree
 * is linted against p2 too: declarations come from the policy and must agree.) */
static void lint_consistent(const tg_policy_t *p, const tg_policy_t *p2, const json_t *bundle) {
    static tg_lint_report_t r, r2; /* 66 KiB each: not on the fuzzer's stack */
    if (tg_policy_lint(&r, p, bundle, p2) != TG_OK ||
        tg_policy_lint(&r2, p2, bundle, NULL) != TG_OK ||
        r.errors + r.warnings != r.n + r.dropped || r.n > TG_LINT_MAX_FINDINGS || r.n != r2.n ||
        r.errors != r2.errors || r.warnings != r2.warnings) {
        abort();
    }
    for (size_t i = 0; i < r.n; i++) {
        const tg_lint_finding_t *f = &r.findings[i];
        if ((unsigned)f->code >= TG_LINT__COUNT || f->code == TG_LINT_VERSION_REUSED ||
            f->path[0] == '\0' || f->message[0] == '\0' ||
            (f->severity == TG_LINT_WARNING) != (f->code == TG_LINT_NON_INTEGER_AMOUNT)) {
            abort();
        }
    }
    tg_buf_t b;
    tg_buf_init(&b, 0);
    if (tg_lint_report_json(&b, &r) != TG_OK) {
        abort();
    }
    tg_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_policy_t *p = NULL;
    tg_diag_t diag;
    memset(&diag, 0, sizeof diag);
    tg_err_t rc = tg_policy_load_text(&p, (const char *)data, size, &diag);
    if (rc != TG_OK) {
        if (p != NULL || (rc == TG_ERR_POLICY_INVALID && diag.msg[0] == '\0')) {
            abort();
        }
        return 0;
    }
    if (strlen(tg_policy_hash_hex(p)) != 64 || tg_policy_version(p)[0] == '\0' ||
        tg_policy_authority(p)[0] == '\0' || tg_policy_surface_count(p) == 0) {
        abort();
    }
    /* policyHash = SHA-256 of the canonical form of the bundle */
    json_t *bundle = NULL;
    tg_json_limits_t lim = {TG_POLICY_MAX_FILE, 1024, TG_POLICY_MAX_FILE, 1u << 20};
    uint8_t h[32];
    if (tg_json_parse(&bundle, (const char *)data, size, &lim, NULL) != TG_OK ||
        tg_canon_sha256(h, bundle, NULL) != TG_OK || memcmp(h, tg_policy_hash(p), 32) != 0) {
        abort();
    }
    /* the canonical text compiles to the same policy */
    tg_buf_t c;
    tg_buf_init(&c, 0);
    tg_policy_t *p2 = NULL;
    if (tg_canon_write(&c, bundle, NULL) != TG_OK ||
        tg_policy_load_text(&p2, c.data, c.len, NULL) != TG_OK ||
        memcmp(tg_policy_hash(p2), h, 32) != 0 ||
        tg_policy_surface_count(p2) != tg_policy_surface_count(p) ||
        tg_policy_rule_count(p2) != tg_policy_rule_count(p) ||
        tg_policy_signal_count(p2) != tg_policy_signal_count(p) ||
        tg_policy_tool_count(p2) != tg_policy_tool_count(p) ||
        strcmp(tg_policy_version(p2), tg_policy_version(p)) != 0 ||
        strcmp(tg_policy_authority(p2), tg_policy_authority(p)) != 0) {
        abort();
    }
    decide_each_surface(p, p2);
    lint_consistent(p, p2, bundle);
    tg_policy_destroy(p2);
    tg_buf_free(&c);
    json_decref(bundle);
    tg_policy_destroy(p);
    return 0;
}
