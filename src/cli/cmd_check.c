/* cmd_check.c — `trigguard check`: decide one request file in-process (kernel + receipt). */
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trigguard/canon.h"
#include "trigguard/clock.h"
#include "trigguard/guard.h"
#include "trigguard/kernel.h"
#include "trigguard/keys.h"
#include "trigguard/pipeline.h"
#include "trigguard/policy.h"
#include "trigguard/receipt.h"
#include "trigguard/version.h"

static void check_usage(FILE *out) {
    fprintf(out,
            "usage: trigguard check --policy FILE [--key KEY.pem] [--key-id ID] [--tenant T]\n"
            "                       [--subject S] [--issuer I] [--claim NAME=VALUE]...\n"
            "                       [--authority-id A] [--receipt-ttl SECONDS] [--explain]\n"
            "                       [--at TIME] [--no-strict]\n"
            "                       REQUEST.json\n"
            "\n"
            "Decides REQUEST.json (SPEC section 3.1, or {\"tool\",\"args\",\"intent_id\"}; - for\n"
            "stdin) against the policy bundle FILE with the kernel FSM and prints the decision\n"
            "JSON of SPEC section 3.2 with its trace. With --key (an Ed25519 PKCS#8 PEM, mode\n"
            "0600) PERMIT and DENY carry a signed receipt. --tenant defaults to \"local\",\n"
            "--authority-id to the policy's authority (as serve's does; an empty value too),\n"
            "--receipt-ttl to 600; those two and --key-id shape the receipt, so they need\n"
            "--key.\n"
            "\n"
            "The verified facts a policy may judge (tenant, principal.subject,\n"
            "principal.issuer, principal.claims.<name>) are what the daemon learns from the\n"
            "caller's token; here they are given: --tenant, --subject S, --issuer I (needs\n"
            "--subject) and --claim NAME=VALUE, repeatable, one per claim name, VALUE a JSON\n"
            "number, true, false or \"string\", anything else the string itself\n"
            "(--claim ref=refs/heads/main). Without them those facts are absent. With --subject\n"
            "the signed receipt names the principal {issuer?, subject}, as serve's does for an\n"
            "OIDC caller or a token with an explicit subject.\n"
            "\n"
            "--explain adds the full explain (docs/POLICY.md \"Explain and policy tests\"):\n"
            "every rule of the surface with each condition, the request's value and\n"
            "whether it held, then every limit.\n"
            "--at TIME (RFC 3339, e.g. 2026-12-24T09:00:00Z or 2026-12-24T10:00:00+01:00) is the\n"
            "decision's instant: what time.hour, time.weekday and time.date see and the\n"
            "receipt's timestamp, so a check is deterministic. Default: the current time.\n"
            "\n"
            "The bundle is linted as serve's is (trigguard policy lint): one with lint errors is\n"
            "refused unless --no-strict (as serve --policy-strict=false).\n"
            "\n"
            "An ESCALATE (an escalate rule holds, SPEC section 11.2) is shown with its\n"
            "reason and rule but no receipt: check opens no approval for it to name.\n"
            "\n"
            "exit status: 0 PERMIT, 3 DENY, 4 SILENCE, 5 ESCALATE, 2 bad input (unreadable or\n"
            "invalid policy, request or key; unknown surface)\n");
}

#define CHECK_MAX_CLAIMS 64 /* --claim options (a verified token holds as many at most) */

typedef struct {
    const char *policy, *key, *key_id, *tenant, *authority, *request, *subject, *issuer, *at;
    long ttl_s;
    bool no_strict;
    bool explain;  /* --explain: the full explain after the trace */
    int64_t at_ms; /* --at, else the current time: the frame's instant and the receipt's */
    const char *claim_args[CHECK_MAX_CLAIMS]; /* NAME=VALUE as given */
    size_t n_claims;
} check_args_t;

static int parse_args(check_args_t *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->tenant = "local";
    a->ttl_s = 600;
    bool ttl_given = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char **dst = strcmp(arg, "--policy") == 0         ? &a->policy
                           : strcmp(arg, "--key") == 0          ? &a->key
                           : strcmp(arg, "--key-id") == 0       ? &a->key_id
                           : strcmp(arg, "--tenant") == 0       ? &a->tenant
                           : strcmp(arg, "--authority-id") == 0 ? &a->authority
                           : strcmp(arg, "--subject") == 0      ? &a->subject
                           : strcmp(arg, "--issuer") == 0       ? &a->issuer
                           : strcmp(arg, "--at") == 0           ? &a->at
                                                                : NULL;
        if (strcmp(arg, "--explain") == 0) {
            a->explain = true;
            continue;
        }
        if (strcmp(arg, "--claim") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard check: --claim needs a value\n");
                return 0;
            }
            if (a->n_claims >= CHECK_MAX_CLAIMS) {
                fprintf(stderr, "trigguard check: more than %d --claim options\n",
                        CHECK_MAX_CLAIMS);
                return 0;
            }
            a->claim_args[a->n_claims++] = argv[++i];
            continue;
        }
        if (dst != NULL || strcmp(arg, "--receipt-ttl") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "trigguard check: %s needs a value\n", arg);
                return 0;
            }
            if (dst != NULL) {
                *dst = argv[++i];
                continue;
            }
            char *end = NULL;
            const char *tv = argv[++i];
            ttl_given = true;
            /* digits only, as serve's integers: strtol alone takes " 5" and "+5" */
            a->ttl_s = tv[0] >= '0' && tv[0] <= '9' ? strtol(tv, &end, 10) : 0;
            if (end == NULL || *end != '\0' || a->ttl_s < 1 || a->ttl_s > 31536000) {
                fprintf(stderr, "trigguard check: --receipt-ttl must be 1..31536000 seconds\n");
                return 0;
            }
        } else if (strcmp(arg, "--no-strict") == 0) {
            a->no_strict = true;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "trigguard check: unknown option '%s'\n", arg);
            return 0;
        } else if (a->request != NULL) {
            fprintf(stderr, "trigguard check: more than one request file\n");
            return 0;
        } else {
            a->request = arg;
        }
    }
    if (a->policy == NULL || a->request == NULL) {
        fprintf(stderr, "trigguard check: --policy FILE and a request file are required\n");
        return 0;
    }
    if (a->tenant[0] == '\0') {
        fprintf(stderr, "trigguard check: --tenant must not be empty\n");
        return 0;
    }
    if ((a->subject != NULL &&
         (a->subject[0] == '\0' || strlen(a->subject) > TG_RECEIPT_PRINCIPAL_MAX)) ||
        (a->issuer != NULL &&
         (a->issuer[0] == '\0' || strlen(a->issuer) > TG_RECEIPT_PRINCIPAL_MAX))) {
        fprintf(stderr, "trigguard check: --subject and --issuer take 1..%d bytes\n",
                TG_RECEIPT_PRINCIPAL_MAX);
        return 0;
    }
    if (a->at != NULL) {
        if (tg_time_parse_rfc3339_ms(&a->at_ms, a->at, strlen(a->at)) != TG_OK) {
            fprintf(stderr, "trigguard check: --at needs an RFC 3339 date-time from 1970 to "
                            "9999, e.g. 2026-12-24T09:00:00Z\n");
            return 0;
        }
    } else {
        a->at_ms = tg_clock_now_ms();
    }
    if (a->issuer != NULL && a->subject == NULL) {
        /* an issuer vouches for a subject: a principal always has one */
        fprintf(stderr, "trigguard check: --issuer needs --subject\n");
        return 0;
    }
    if (a->key == NULL && (a->key_id != NULL || a->authority != NULL || ttl_given)) {
        /* they only shape the signed receipt: without --key they would be ignored silently */
        fprintf(stderr, "trigguard check: --key-id, --authority-id and --receipt-ttl need --key "
                        "(they shape the signed receipt)\n");
        return 0;
    }
    return 1;
}

/* --claim NAME=VALUE into claims[i] (values in vals[i], which the caller releases). VALUE
 * that parses as a JSON number, boolean or string is that value; anything else that is not
 * JSON at all is the string itself; JSON null, objects and arrays are refused (a verified
 * claim the kernel compares is a scalar, guard.h). */
static int parse_claims(tg_claim_t *claims, json_t **vals, const check_args_t *a) {
    for (size_t i = 0; i < a->n_claims; i++) {
        const char *arg = a->claim_args[i];
        const char *eq = strchr(arg, '=');
        size_t nl = eq != NULL ? (size_t)(eq - arg) : 0;
        if (nl == 0 || nl > TG_POLICY_MAX_NAME) {
            fprintf(stderr, "trigguard check: --claim %s: expected NAME=VALUE, NAME 1..%d bytes\n",
                    arg, TG_POLICY_MAX_NAME);
            return 0;
        }
        for (size_t j = 0; j < i; j++) {
            if (claims[j].name.len == nl && memcmp(claims[j].name.ptr, arg, nl) == 0) {
                fprintf(stderr, "trigguard check: --claim %.*s given twice\n", (int)nl, arg);
                return 0;
            }
        }
        const char *text = eq + 1;
        json_error_t jerr;
        json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (v == NULL) {
            v = json_string(text); /* not JSON: the string as typed (NULL: not UTF-8) */
        }
        if (v == NULL || !(json_is_string(v) || json_is_number(v) || json_is_boolean(v))) {
            json_decref(v);
            fprintf(stderr,
                    "trigguard check: --claim %.*s: the value must be a string, number or "
                    "boolean (valid UTF-8)\n",
                    (int)nl, arg);
            return 0;
        }
        vals[i] = v;
        claims[i].name.ptr = arg;
        claims[i].name.len = nl;
        memset(&claims[i].value, 0, sizeof claims[i].value);
        if (json_is_string(v)) {
            claims[i].value.type = TG_VT_STRING;
            claims[i].value.str = json_string_value(v);
            claims[i].value.len = (uint32_t)json_string_length(v);
        } else if (json_is_boolean(v)) {
            claims[i].value.type = TG_VT_BOOL;
            claims[i].value.boolean = json_is_true(v) ? 1 : 0;
        } else {
            claims[i].value.type = TG_VT_NUMBER;
            claims[i].value.num = json_number_value(v);
        }
    }
    return 1;
}

static tg_receipt_str_t rstr(tg_sv_t v) {
    tg_receipt_str_t s = {v.ptr, v.len};
    return s;
}

/* Signs the receipt for a PERMIT/DENY into `out`. */
static tg_err_t sign_receipt(tg_buf_t *out, const tg_key_t *key, const check_args_t *a,
                             const tg_policy_t *p, const tg_frame_t *f,
                             const tg_request_meta_t *meta, const tg_decision_t *d,
                             const char *exec_id, const char *req_hash, tg_diag_t *diag) {
    char fingerprint[65], ctx_hex[65];
    tg_err_t rc = tg_receipt_protocol_fingerprint(fingerprint, tg_policy_hash_hex(p));
    if (rc) {
        return tg_diag_set(diag, rc, "cannot compute the protocol fingerprint");
    }
    tg_receipt_fields_t r;
    memset(&r, 0, sizeof r);
    if (meta->context != NULL) {
        uint8_t h[32];
        rc = tg_canon_sha256(h, meta->context, diag);
        if (rc) {
            return rc;
        }
        tg_hex(ctx_hex, h, sizeof h);
        r.execution_context_hash = TG_RSTR(ctx_hex);
    }
    const char *empty = "";
    const char *verdict = tg_verdict_name(d->verdict);
    r.execution_id = TG_RSTR(exec_id);
    r.authority_id = TG_RSTR(tg_policy_authority_id(p, a->authority)); /* serve's rule too */
    r.tenant_id = TG_RSTR(a->tenant);
    r.surface = rstr(f->surface_name);
    r.action = f->action.ptr != NULL ? rstr(f->action) : TG_RSTR(empty);
    r.actor_id = f->actor.ptr != NULL ? rstr(f->actor) : TG_RSTR(empty);
    r.decision = TG_RSTR(verdict);
    r.reason_code = TG_RSTR(d->reason);
    r.request_hash = TG_RSTR(req_hash);
    r.subject_digest = rstr(meta->subject_digest);
    r.prev_receipt_hash = rstr(meta->prev_receipt_hash);
    r.policy_version = TG_RSTR(tg_policy_version(p));
    r.policy_hash = TG_RSTR(tg_policy_hash_hex(p));
    r.protocol_fingerprint = TG_RSTR(fingerprint);
    r.timestamp_ms = f->now_ms; /* the instant the kernel decided at (--at or now) */
    r.expires_at_ms = r.timestamp_ms + (int64_t)a->ttl_s * 1000;
    r.principal_subject = TG_RSTR(a->subject); /* absent without --subject, as serve's */
    r.principal_issuer = TG_RSTR(a->issuer);
    return tg_receipt_sign_fields(out, NULL, key, &r, diag);
}

int tg_cmd_check(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            check_usage(stdout);
            return TG_EXIT_OK;
        }
    }
    check_args_t a;
    if (!parse_args(&a, argc, argv)) {
        check_usage(stderr);
        return TG_EXIT_USAGE;
    }
    int status = TG_EXIT_USAGE;
    tg_policy_t *p = NULL;
    json_t *req = NULL;
    char *text = NULL;
    tg_key_t key;
    tg_buf_t receipt, out;
    tg_diag_t diag = {{0}};
    tg_claim_t claims[CHECK_MAX_CLAIMS];
    json_t *claim_vals[CHECK_MAX_CLAIMS] = {NULL};
    memset(&key, 0, sizeof key);
    tg_buf_init(&receipt, 0);
    tg_buf_init(&out, 0);

    if (sodium_init() < 0) {
        fprintf(stderr, "trigguard check: libsodium failed to initialise\n");
        goto done;
    }
    if (!parse_claims(claims, claim_vals, &a)) {
        goto done;
    }
    tg_err_t rc = tg_policy_load_file_checked(&p, a.policy, !a.no_strict, NULL, NULL, &diag);
    if (rc) {
        fprintf(stderr, "trigguard check: policy %s: %s\n", a.policy,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    if (a.key != NULL) {
        rc = tg_key_load_file(&key, a.key, a.key_id, &diag);
        if (rc == TG_OK && !key.has_secret) {
            rc = tg_diag_set(&diag, TG_ERR_NO_KEY,
                             "%s holds a public key; signing needs the "
                             "private key",
                             a.key);
        }
        if (rc) {
            fprintf(stderr, "trigguard check: key: %s\n", diag.msg[0] ? diag.msg : tg_strerror(rc));
            goto done;
        }
    }
    size_t len = 0;
    text = tg_cli_read_file(a.request, TG_JSON_LIMITS_DEFAULT.max_bytes, &len);
    if (text == NULL) {
        goto done;
    }
    rc = tg_json_parse(&req, text, len, NULL, &diag);
    if (rc) {
        fprintf(stderr, "trigguard check: request %s: %s\n", a.request,
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    tg_frame_t frame;
    tg_request_meta_t meta;
    rc = tg_frame_from_request(&frame, &meta, p, req, &diag);
    if (rc) {
        fprintf(stderr, "trigguard check: %s\n", diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    uint8_t h[32];
    char req_hash[65], exec_id[TG_RECEIPT_EXEC_ID_LEN + 1];
    rc = tg_request_hash(h, &frame, &meta, &diag);
    if (rc) {
        fprintf(stderr, "trigguard check: request hash: %s\n",
                diag.msg[0] ? diag.msg : tg_strerror(rc));
        goto done;
    }
    tg_hex(req_hash, h, sizeof h);
    /* As serve derives it: from the idempotency key, else random (a nonce does not enter). */
    const tg_sv_t *idem = &meta.idempotency_key;
    rc = tg_receipt_execution_id(exec_id, a.tenant, strlen(a.tenant), frame.surface_name.ptr,
                                 frame.surface_name.len, req_hash, 64, idem->ptr, idem->len);
    if (rc) {
        fprintf(stderr, "trigguard check: no execution id for this request: %s\n",
                idem->ptr != NULL && idem->len == 0 ? "the idempotency key is empty"
                                                    : tg_strerror(rc));
        goto done;
    }

    /* The facts serve takes from the caller's token, here from the options. */
    tg_principal_t pr;
    memset(&pr, 0, sizeof pr);
    pr.subject.ptr = a.subject;
    pr.subject.len = a.subject != NULL ? strlen(a.subject) : 0;
    pr.issuer.ptr = a.issuer;
    pr.issuer.len = a.issuer != NULL ? strlen(a.issuer) : 0;
    pr.claims = a.n_claims > 0 ? claims : NULL;
    pr.claims_count = a.n_claims;
    tg_pipeline_bind_facts(&frame, p, a.tenant, strlen(a.tenant), &pr);
    frame.now_ms = a.at_ms;
    frame.has_now = 1;

    tg_decision_t d;
    tg_kernel_decide(&d, tg_policy_tables(p), &frame);

    tg_decision_json_opts_t opts = {exec_id, req_hash, NULL, 0, 1};
    /* SILENCE is never signed in enforce mode; an ESCALATE receipt names the approval it
     * opened (receipt.h), and check opens none. */
    if (a.key != NULL && (d.verdict == TG_PERMIT || d.verdict == TG_DENY)) {
        rc = sign_receipt(&receipt, &key, &a, p, &frame, &meta, &d, exec_id, req_hash, &diag);
        if (rc) {
            fprintf(stderr, "trigguard check: cannot sign the receipt: %s\n",
                    diag.msg[0] ? diag.msg : tg_strerror(rc));
            goto done;
        }
        opts.receipt = receipt.data;
        opts.receipt_len = receipt.len;
    }
    rc = tg_decision_to_json(&out, &d, p, &frame, &opts);
    if (!rc && a.explain) {
        /* the explain member goes after the trace, inside the object: reopen it */
        out.len--;
        rc = tg_decision_explain_append(&out, p, &frame);
        if (!rc) {
            rc = tg_buf_putc(&out, '}');
        }
    }
    if (rc) {
        fprintf(stderr, "trigguard check: cannot write the decision: %s\n", tg_strerror(rc));
        goto done;
    }
    printf("%s\n", out.data); /* a failed write is main's to report (finish) */
    status = d.verdict == TG_PERMIT     ? TG_EXIT_OK
             : d.verdict == TG_DENY     ? TG_EXIT_DENY
             : d.verdict == TG_ESCALATE ? TG_EXIT_ESCALATE
                                        : TG_EXIT_SILENCE;
done:
    for (size_t i = 0; i < a.n_claims; i++) {
        json_decref(claim_vals[i]);
    }
    tg_key_wipe(&key);
    tg_buf_free(&receipt);
    tg_buf_free(&out);
    json_decref(req);
    free(text);
    tg_policy_destroy(p);
    return status;
}
