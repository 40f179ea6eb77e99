/* test_record.c — the ledger record's meta and SILENCE payload: exact bytes, round trips,
 * the response rebuilt from a record, and what a reader refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trigguard/approval.h"
#include "trigguard/canon.h"
#include "trigguard/ledger.h"
#include "trigguard/policy.h"
#include "trigguard/record.h"

#define RH "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define T(s) ((tg_text_t){(s), sizeof(s) - 1})
#define NONE ((tg_text_t){NULL, 0})

static tg_record_meta_t meta_example(void) {
    return (tg_record_meta_t){.at_ms = 1796017500123,
                              .key = T("key-\"1\""),
                              .nonce = T("n1"),
                              .request_hash = T(RH),
                              .status = 403,
                              .tenant = T("acme")};
}

/* The meta is canonical JSON with its members in the order record.h lists them: a golden
 * string pins the format (escaping included), so a change to it is a decision. */
static void test_meta_bytes(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_META_MAX);
    tg_record_meta_t m = meta_example();
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_string_equal(b.data,
                        "{\"at\":1796017500123,\"k\":\"key-\\\"1\\\"\",\"n\":\"n1\",\"rh\":\"" RH
                        "\",\"s\":403,\"t\":\"acme\"}");
    /* optional members absent */
    tg_buf_reset(&b);
    m.key = NONE;
    m.nonce = NONE;
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_string_equal(b.data,
                        "{\"at\":1796017500123,\"rh\":\"" RH "\",\"s\":403,\"t\":\"acme\"}");
    tg_buf_free(&b);
}

static void expect_canonical(const tg_buf_t *b);

/* The claim hash ("ch", SPEC 1.1): between "at" and "k"; a reader without it (a record of an
 * earlier build) binds the key to the request hash; the hash covers the principal. */
static void test_meta_claim_hash(void **state) {
    (void)state;
#define CH "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_META_MAX);
    tg_record_meta_t m = meta_example();
    m.claim_hash = T(CH);
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_string_equal(b.data, "{\"at\":1796017500123,\"ch\":\"" CH
                                "\",\"k\":\"key-\\\"1\\\"\",\"n\":\"n1\",\"rh\":\"" RH
                                "\",\"s\":403,\"t\":\"acme\"}");
    expect_canonical(&b);
    const char *payload = "{\"decision\":\"PERMIT\",\"executionId\":\"e\",\"policyVersion\":"
                          "\"v1\",\"reasonCode\":\"NO_POLICY_VIOLATION\"}";
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, b.data, b.len, payload, strlen(payload)), TG_OK);
    uint8_t want[32];
    assert_int_equal(tg_unhex(want, 32, CH, 64), TG_OK);
    assert_memory_equal(v.claim_hash, want, 32);
    tg_record_view_free(&v);
    /* without ch: the request hash */
    tg_buf_reset(&b);
    m.claim_hash = NONE;
    assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
    assert_int_equal(tg_record_view(&v, b.data, b.len, payload, strlen(payload)), TG_OK);
    assert_memory_equal(v.claim_hash, v.request_hash, 32);
    tg_record_view_free(&v);
    /* a ch that is not hex is corruption; a writer refuses one of the wrong length */
    const char *bad = "{\"at\":1,\"ch\":\"zz\",\"rh\":\"" RH "\",\"s\":200,\"t\":\"a\"}";
    assert_int_equal(tg_record_view(&v, bad, strlen(bad), payload, strlen(payload)),
                     TG_ERR_LEDGER_CORRUPT);
    m.claim_hash = T("abc");
    assert_int_equal(tg_record_meta_write(&b, &m), TG_ERR_INVALID_ARG);
    tg_buf_free(&b);

    /* The claim hash tells principals apart, and never equals the bare request hash. */
    uint8_t rh[32], a[32], c[32], d[32], e[32], f[32];
    assert_int_equal(tg_unhex(rh, 32, RH, 64), TG_OK);
    tg_record_claim_hash(a, rh, NULL, 0, "ci-deploy", 9);
    tg_record_claim_hash(c, rh, NULL, 0, "ci-deploy", 9);
    assert_memory_equal(a, c, 32);
    tg_record_claim_hash(d, rh, NULL, 0, "ops", 3);
    assert_memory_not_equal(a, d, 32);
    tg_record_claim_hash(e, rh, "", 0, "ci-deploy", 9); /* an empty issuer is not none */
    assert_memory_not_equal(a, e, 32);
    tg_record_claim_hash(f, rh, "https://idp", 11, "ci-deploy", 9);
    assert_memory_not_equal(a, f, 32);
    tg_record_claim_hash(f, rh, "ci-", 3, "deploy", 6); /* no splicing across the parts */
    assert_memory_not_equal(e, f, 32);
    assert_memory_not_equal(a, rh, 32);
#undef CH
}

static tg_record_silence_t silence_example(void);

/* The hand-written meta writer and the tree-built SILENCE writer both produce RFC 8785
 * text: parsed and written again by the canonical writer, the bytes do not change. */
static void expect_canonical(const tg_buf_t *b) {
    json_t *v = NULL;
    assert_int_equal(tg_json_parse(&v, b->data, b->len, NULL, NULL), TG_OK);
    tg_buf_t again;
    tg_buf_init(&again, 0);
    assert_int_equal(tg_canon_write(&again, v, NULL), TG_OK);
    assert_string_equal(again.data, b->data);
    tg_buf_free(&again);
    json_decref(v);
}

static void test_canonical_round_trip(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_PAYLOAD_MAX);
    tg_record_meta_t m = meta_example();
    const char *keys[] = {"plain",
                          "quote\"and\\slash",
                          "\x01\x1f ctl",
                          "caf\xc3\xa9 \xe2\x82\xac",
                          "\xf0\x9f\x98\x80 astral",
                          "</script>"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        m.key = (tg_text_t){keys[i], strlen(keys[i])};
        m.nonce = (tg_text_t){keys[i], strlen(keys[i])};
        m.at_ms = (int64_t)i * 1000003;
        tg_buf_reset(&b);
        assert_int_equal(tg_record_meta_write(&b, &m), TG_OK);
        expect_canonical(&b);
    }
    tg_record_silence_t s = silence_example();
    tg_buf_reset(&b);
    assert_int_equal(tg_record_silence_write(&b, &s), TG_OK);
    expect_canonical(&b);
    tg_buf_free(&b);
}

static void test_meta_errors(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_META_MAX);
    tg_record_meta_t m = meta_example();
    assert_int_equal(tg_record_meta_write(NULL, &m), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_record_meta_write(&b, NULL), TG_ERR_INVALID_ARG);
    m.request_hash = T("abc");
    assert_int_equal(tg_record_meta_write(&b, &m), TG_ERR_INVALID_ARG);
    m = meta_example();
    m.tenant = NONE;
    assert_int_equal(tg_record_meta_write(&b, &m), TG_ERR_INVALID_ARG);
    /* a header-borne key that is not UTF-8 */
    m = meta_example();
    m.key = T("\xff\xfe");
    assert_int_equal(tg_record_meta_write(&b, &m), TG_ERR_JSON_UTF8);
    /* the cap of the buffer is the meta's limit */
    tg_buf_t small;
    tg_buf_init(&small, 40);
    m = meta_example();
    assert_int_equal(tg_record_meta_write(&small, &m), TG_ERR_LIMIT);
    tg_buf_free(&small);
    tg_buf_free(&b);
}

static tg_record_silence_t silence_example(void) {
    return (tg_record_silence_t){.execution_id = T("exec_0123456789abcdef0123456789abcdef"),
                                 .tenant = T("acme"),
                                 .surface = T("payments.charge"),
                                 .action = T("transfer"),
                                 .actor = NONE,
                                 .reason = T("MISSING_CONTEXT"),
                                 .request_hash = T(RH),
                                 .policy_version = T("v1"),
                                 .policy_hash = T(RH),
                                 .detail =
                                     T("context.amount is missing or not of its declared type"),
                                 .at_ms = 1796017500123};
}

static void test_silence_bytes(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, TG_LEDGER_PAYLOAD_MAX);
    tg_record_silence_t s = silence_example();
    assert_int_equal(tg_record_silence_write(&b, &s), TG_OK);
    assert_string_equal(
        b.data, "{\"action\":\"transfer\",\"decision\":\"SILENCE\",\"detail\":\"context.amount is "
                "missing or not of its declared type\",\"executionId\":\"exec_"
                "0123456789abcdef0123456789abcdef\",\"policyHash\":\"" RH
                "\",\"policyVersion\":\"v1\",\"reasonCode\":\"MISSING_CONTEXT\",\"requestHash\":"
                "\"" RH "\",\"surface\":\"payments.charge\",\"tenantId\":\"acme\",\"timestamp\":"
                "\"2026-11-30T05:45:00.123Z\",\"type\":\"silence\"}");
    s.reason = NONE;
    assert_int_equal(tg_record_silence_write(&b, &s), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_record_silence_write(&b, NULL), TG_ERR_INVALID_ARG);
    tg_buf_free(&b);
}

/* Writing and reading back agree, and the rebuilt response is the decision body the live
 * path writes (tg_decision_body_open), SILENCE's detail included. */
static void test_round_trip_silence(void **state) {
    (void)state;
    tg_buf_t meta, payload, resp, live;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&resp, 0);
    tg_buf_init(&live, 0);
    tg_record_meta_t m = meta_example();
    tg_record_silence_t s = silence_example();
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    assert_int_equal(tg_record_silence_write(&payload, &s), TG_OK);
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len), TG_OK);
    assert_int_equal(v.meta.at_ms, m.at_ms);
    assert_int_equal(v.meta.status, 403);
    assert_int_equal(v.meta.key.len, m.key.len);
    assert_memory_equal(v.meta.key.ptr, m.key.ptr, m.key.len);
    assert_memory_equal(v.meta.nonce.ptr, "n1", 2);
    assert_memory_equal(v.meta.tenant.ptr, "acme", 4);
    assert_int_equal(v.request_hash[0], 0x00);
    assert_int_equal(v.request_hash[31], 0xff);
    assert_string_equal(v.decision, "SILENCE");
    assert_false(v.receipt);
    assert_int_equal(tg_record_response(&resp, &v, payload.data, payload.len), TG_OK);
    tg_decision_body_t body = {.decision = "SILENCE",
                               .reason = s.reason,
                               .execution_id = s.execution_id,
                               .request_hash = s.request_hash,
                               .policy_version = s.policy_version,
                               .detail = s.detail};
    assert_int_equal(tg_decision_body_open(&live, &body), TG_OK);
    assert_int_equal(tg_buf_putc(&live, '}'), TG_OK);
    assert_string_equal(resp.data, live.data);
    assert_non_null(strstr(resp.data, "\"detail\":\"context.amount"));
    tg_record_view_free(&v);
    tg_record_view_free(&v); /* idempotent */
    tg_buf_free(&meta);
    tg_buf_free(&payload);
    tg_buf_free(&resp);
    tg_buf_free(&live);
}

/* A signed record: the rebuilt response embeds the payload as the receipt, and no detail. */
static void test_round_trip_receipt(void **state) {
    (void)state;
    const char *receipt = "{\"decision\":\"DENY\",\"executionId\":\"exec_1\",\"policyVersion\":"
                          "\"v1\",\"reasonCode\":\"AMOUNT_TOO_HIGH\",\"detail\":\"ignored\"}";
    tg_buf_t meta, resp;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&resp, 0);
    tg_record_meta_t m = meta_example();
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, receipt, strlen(receipt)), TG_OK);
    assert_true(v.receipt);
    assert_null(v.detail.ptr);
    assert_int_equal(tg_record_response(&resp, &v, receipt, strlen(receipt)), TG_OK);
    char want[1024];
    (void)snprintf(want, sizeof want,
                   "{\"decision\":\"DENY\",\"enforcement\":\"BLOCKED\",\"reason_code\":"
                   "\"AMOUNT_TOO_HIGH\",\"execution_id\":\"exec_1\",\"request_hash\":\"" RH
                   "\",\"policy_version\":\"v1\",\"receipt\":%s}",
                   receipt);
    assert_string_equal(resp.data, want);
    tg_record_view_free(&v);
    tg_buf_free(&meta);
    tg_buf_free(&resp);
}

/* Anything that is not what the writers produce is corruption, and leaves the view empty. */
static void test_view_refuses(void **state) {
    (void)state;
    const char *good_meta = "{\"at\":1,\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}";
    const char *good_payload = "{\"decision\":\"PERMIT\",\"executionId\":\"e\",\"policyVersion\":"
                               "\"v\",\"reasonCode\":\"NO_POLICY_VIOLATION\"}";
    const char *bad_metas[] = {
        "",
        "{",
        "[]",
        "{\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}",              /* no at */
        "{\"at\":1,\"s\":200,\"t\":\"acme\"}",                       /* no rh */
        "{\"at\":1,\"rh\":\"zz\",\"s\":200,\"t\":\"acme\"}",         /* rh not hex */
        "{\"at\":1,\"rh\":\"" RH "\",\"s\":\"200\",\"t\":\"acme\"}", /* s not a number */
        "{\"at\":1,\"rh\":\"" RH "\",\"s\":200}",                    /* no tenant */
    };
    tg_record_view_t v;
    for (size_t i = 0; i < sizeof bad_metas / sizeof bad_metas[0]; i++) {
        assert_int_equal(tg_record_view(&v, bad_metas[i], strlen(bad_metas[i]), good_payload,
                                        strlen(good_payload)),
                         TG_ERR_LEDGER_CORRUPT);
        assert_null(v.meta_doc);
        assert_null(v.decision);
    }
    const char *bad_payloads[] = {
        "{}",
        "{\"executionId\":\"e\",\"policyVersion\":\"v\",\"reasonCode\":\"R\"}",
        "{\"decision\":\"PERMIT\",\"policyVersion\":\"v\",\"reasonCode\":\"R\"}",
        "{\"decision\":\"PERMIT\",\"executionId\":\"e\",\"reasonCode\":\"R\"}",
        "{\"decision\":\"PERMIT\",\"executionId\":\"e\",\"policyVersion\":\"v\"}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad_payloads / sizeof bad_payloads[0]; i++) {
        assert_int_equal(tg_record_view(&v, good_meta, strlen(good_meta), bad_payloads[i],
                                        strlen(bad_payloads[i])),
                         TG_ERR_LEDGER_CORRUPT);
        assert_null(v.payload_doc);
    }
    assert_int_equal(
        tg_record_view(&v, good_meta, strlen(good_meta), good_payload, strlen(good_payload)),
        TG_OK);
    tg_buf_t out;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_record_response(NULL, &v, good_payload, 1), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_record_response(&out, NULL, good_payload, 1), TG_ERR_INVALID_ARG);
    tg_record_view_free(&v);
    tg_buf_free(&out);
}

/* A redemption (record.h): exact bytes, read back with its claim, and refused when its meta
 * does not carry the claim of its executionId or names another tenant or request hash. */
#define EID "exec_0123456789abcdef0123456789abcdef"
static void test_redemption(void **state) {
    (void)state;
    tg_buf_t meta, payload, out;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&out, 0);
    tg_record_redemption_t r = {.execution_id = T(EID),
                                .tenant = T("acme"),
                                .request_hash = T(RH),
                                .receipt_hash = T(RH),
                                .at_ms = 1796017500123};
    assert_int_equal(tg_record_redemption_write(&payload, &r), TG_OK);
    assert_string_equal(payload.data, "{\"executionId\":\"" EID "\",\"receiptHash\":\"" RH
                                      "\",\"redeemedAt\":\"2026-11-30T05:45:00.123Z\","
                                      "\"requestHash\":\"" RH "\",\"tenantId\":\"acme\","
                                      "\"type\":\"redemption\"}");
    tg_record_meta_t m = {.at_ms = r.at_ms,
                          .nonce = T(TG_RECORD_REDEEM_NONCE_PREFIX EID),
                          .request_hash = T(RH),
                          .status = 200,
                          .tenant = T("acme")};
    assert_int_equal(m.nonce.len, TG_RECORD_REDEEM_NONCE_LEN);
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len), TG_OK);
    assert_true(v.redemption);
    assert_false(v.receipt);
    assert_null(v.decision);
    assert_int_equal(v.execution_id.len, sizeof EID - 1);
    assert_memory_equal(v.meta.nonce.ptr, TG_RECORD_REDEEM_NONCE_PREFIX EID, m.nonce.len);
    assert_int_equal(v.meta.status, 200);
    assert_int_equal(v.request_hash[31], 0xff);
    /* it answered no decision: nothing to replay */
    assert_int_equal(tg_record_response(&out, &v, payload.data, payload.len), TG_ERR_INVALID_ARG);
    tg_record_view_free(&v);

    const char *bad_metas[] = {
        /* no claim */
        "{\"at\":1,\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}",
        /* a caller's nonce, not the claim */
        "{\"at\":1,\"n\":\"" EID "\",\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}",
        /* the claim of another receipt */
        "{\"at\":1,\"n\":\"tg:redeem:exec_1\",\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}",
        /* another tenant */
        "{\"at\":1,\"n\":\"tg:redeem:" EID "\",\"rh\":\"" RH "\",\"s\":200,\"t\":\"beta\"}",
        /* another request hash */
        "{\"at\":1,\"n\":\"tg:redeem:" EID "\",\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}",
        /* an idempotency key: a redemption completes none */
        "{\"at\":1,\"k\":\"x\",\"n\":\"tg:redeem:" EID "\",\"rh\":\"" RH
        "\",\"s\":200,\"t\":\"acme\"}",
    };
    for (size_t i = 0; i < sizeof bad_metas / sizeof bad_metas[0]; i++) {
        const char *pl = payload.data;
        char other[512];
        if (i == 4) { /* the payload's hash differs from the meta's */
            (void)snprintf(other, sizeof other, "%s", payload.data);
            char *h = strstr(other, "\"requestHash\":\"") + 15;
            h[0] = h[0] == '0' ? '1' : '0';
            pl = other;
        }
        assert_int_equal(tg_record_view(&v, bad_metas[i], strlen(bad_metas[i]), pl, strlen(pl)),
                         TG_ERR_LEDGER_CORRUPT);
        assert_false(v.redemption);
    }
    r.receipt_hash = NONE;
    assert_int_equal(tg_record_redemption_write(&payload, &r), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_record_redemption_write(&payload, NULL), TG_ERR_INVALID_ARG);
    tg_buf_free(&meta);
    tg_buf_free(&payload);
    tg_buf_free(&out);
}

/* ---- approvals (SPEC §11.2): meta "a", the type-4 payload, the ESCALATE response ---- */

#define AID "appr_0123456789abcdef0123456789abcdef"
#define AT0 INT64_C(1796017500000)

/* One approver (alice), one approval needed; escalated by EID for request RH. */
static tg_approval_t approval_example(void) {
    tg_approval_spec_t s = {.required = 1,
                            .n_approvers = 1,
                            .approvers = {"alice"},
                            .ttl_s = 3600,
                            .consume_within_s = 900};
    uint8_t rh[32];
    assert_int_equal(tg_unhex(rh, 32, RH, 64), TG_OK);
    tg_approval_t a;
    assert_int_equal(
        tg_approval_init(&a, AID, "acme", rh, EID, "payments", "big", "NEEDS_OK", &s, AT0), TG_OK);
    return a;
}

/* Meta "a" is the approval's document, first, embedded as an object; a view parses it back
 * into the same state. */
static void test_meta_approval(void **state) {
    (void)state;
    tg_approval_t a = approval_example();
    tg_buf_t meta, d;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&d, 0);
    tg_record_meta_t m = meta_example();
    m.approval = &a;
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    assert_int_equal(tg_approval_write(&d, &a), TG_OK);
    assert_memory_equal(meta.data, "{\"a\":", 5);
    assert_memory_equal(meta.data + 5, d.data, d.len);
    assert_memory_equal(meta.data + 5 + d.len, ",\"at\":1796017500123,", 20);
    const char *receipt = "{\"approvalId\":\"" AID "\",\"decision\":\"ESCALATE\",\"executionId\":"
                          "\"" EID "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, receipt, strlen(receipt)), TG_OK);
    assert_true(v.has_approval);
    assert_non_null(v.approval);
    assert_ptr_equal(v.meta.approval, v.approval);
    assert_memory_equal(v.approval, &a, sizeof a);
    assert_string_equal(v.decision, "ESCALATE");
    assert_true(v.receipt);
    assert_false(v.approval_record);
    assert_int_equal(v.approval_id.len, 37);
    assert_memory_equal(v.approval_id.ptr, AID, 37);
    tg_record_view_free(&v);
    assert_null(v.approval);
    /* A state that is not one (version 2 with no step) is refused by the writer. */
    a.version = 2;
    tg_buf_reset(&meta);
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_ERR_INVALID_ARG);
    tg_buf_free(&meta);
    tg_buf_free(&d);
}

/* Builds meta (with a) and a receipt payload; returns the view's result. */
static tg_err_t view_with(tg_record_view_t *v, tg_buf_t *meta, const tg_approval_t *a,
                          const char *payload) {
    tg_record_meta_t m = meta_example();
    m.approval = a;
    tg_buf_reset(meta);
    assert_int_equal(tg_record_meta_write(meta, &m), TG_OK);
    return tg_record_view(v, meta->data, meta->len, payload, strlen(payload));
}

static void test_meta_approval_refused(void **state) {
    (void)state;
    tg_approval_t a = approval_example();
    tg_buf_t meta;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_record_view_t v;
    const char *no_id = "{\"decision\":\"ESCALATE\",\"executionId\":\"" EID
                        "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    const char *other = "{\"approvalId\":\"appr_ffffffffffffffffffffffffffffffff\",\"decision\":"
                        "\"ESCALATE\",\"executionId\":\"" EID
                        "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    const char *bad_id =
        "{\"approvalId\":\"appr_x\",\"decision\":\"ESCALATE\",\"executionId\":\"" EID
        "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    assert_int_equal(view_with(&v, &meta, &a, no_id), TG_ERR_LEDGER_CORRUPT);
    assert_null(v.approval);
    assert_int_equal(view_with(&v, &meta, &a, other), TG_ERR_LEDGER_CORRUPT);
    assert_int_equal(view_with(&v, &meta, NULL, bad_id), TG_ERR_LEDGER_CORRUPT);
    /* An "a" that is not exactly a state: one member changed by hand. */
    assert_int_equal(view_with(&v, &meta, &a, other), TG_ERR_LEDGER_CORRUPT);
    tg_record_meta_t m = meta_example();
    m.approval = &a;
    tg_buf_reset(&meta);
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    char *p = strstr(meta.data, "\"v\":1}");
    assert_non_null(p);
    p[4] = '2';
    const char *ok = "{\"approvalId\":\"" AID "\",\"decision\":\"ESCALATE\",\"executionId\":\"" EID
                     "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, ok, strlen(ok)),
                     TG_ERR_LEDGER_CORRUPT);
    p[4] = '1';
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, ok, strlen(ok)), TG_OK);
    tg_record_view_free(&v);
    const char *arr = "{\"a\":[],\"at\":1,\"rh\":\"" RH "\",\"s\":200,\"t\":\"acme\"}";
    assert_int_equal(tg_record_view(&v, arr, strlen(arr), ok, strlen(ok)), TG_ERR_LEDGER_CORRUPT);
    tg_buf_free(&meta);
}

/* The ESCALATE response is rebuilt as the live path writes it: approval_id, and the
 * approval's API object as it stood at the record's time. */
static void test_response_escalate(void **state) {
    (void)state;
    tg_approval_t a = approval_example();
    tg_buf_t meta, resp, live, api;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&resp, 0);
    tg_buf_init(&live, 0);
    tg_buf_init(&api, 0);
    const char *receipt = "{\"approvalId\":\"" AID "\",\"decision\":\"ESCALATE\",\"executionId\":"
                          "\"" EID "\",\"policyVersion\":\"v1\",\"reasonCode\":\"NEEDS_OK\"}";
    tg_record_view_t v;
    assert_int_equal(view_with(&v, &meta, &a, receipt), TG_OK);
    assert_int_equal(tg_record_response(&resp, &v, receipt, strlen(receipt)), TG_OK);
    assert_int_equal(tg_approval_api_json(&api, &a, v.meta.at_ms), TG_OK);
    tg_decision_body_t b = {.decision = "ESCALATE",
                            .reason = T("NEEDS_OK"),
                            .execution_id = T(EID),
                            .request_hash = T(RH),
                            .policy_version = T("v1"),
                            .receipt = {receipt, strlen(receipt)},
                            .approval_id = T(AID),
                            .approval = {api.data, api.len}};
    assert_int_equal(tg_decision_body_open(&live, &b), TG_OK);
    assert_int_equal(tg_buf_putc(&live, '}'), TG_OK);
    assert_string_equal(resp.data, live.data);
    tg_record_view_free(&v);
    tg_buf_free(&meta);
    tg_buf_free(&resp);
    tg_buf_free(&live);
    tg_buf_free(&api);
}

static tg_record_approval_event_t event_example(void) {
    return (tg_record_approval_event_t){.approval_id = T(AID),
                                        .tenant = T("acme"),
                                        .review = true,
                                        .subject = T("alice"),
                                        .entry = 0,
                                        .approve = true,
                                        .comment = T("ok \"go\""),
                                        .request_hash = T(RH),
                                        .status = T("approved"),
                                        .at_ms = AT0 + 5};
}

/* The type-4 payload: golden bytes, a view of a review and of an expiry, no response. */
static void test_approval_event(void **state) {
    (void)state;
    tg_buf_t payload, meta, out;
    tg_buf_init(&payload, TG_LEDGER_PAYLOAD_MAX);
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_buf_init(&out, 0);
    tg_record_approval_event_t e = event_example();
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_OK);
    assert_string_equal(payload.data,
                        "{\"approvalId\":\"" AID "\",\"at\":\"2026-11-30T05:45:00.005Z\","
                        "\"comment\":\"ok \\\"go\\\"\",\"decision\":\"approve\",\"entry\":0,"
                        "\"event\":\"review\",\"requestHash\":\"" RH "\",\"status\":\"approved\","
                        "\"subject\":\"alice\",\"tenantId\":\"acme\",\"type\":\"approval\"}");
    tg_approval_t a = approval_example(), b;
    assert_int_equal(tg_approval_review(&b, &a, "alice", 0, true, a.request_hash, AT0 + 5), TG_OK);
    tg_record_meta_t m = {.at_ms = AT0 + 5,
                          .request_hash = T(RH),
                          .status = 200,
                          .tenant = T("acme"),
                          .approval = &b};
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    tg_record_view_t v;
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len), TG_OK);
    assert_true(v.approval_record);
    assert_null(v.decision);
    assert_false(v.receipt);
    assert_true(v.event.review);
    assert_true(v.event.approve);
    assert_int_equal(v.event.entry, 0);
    assert_int_equal(v.event.at_ms, AT0 + 5);
    assert_memory_equal(v.event.subject.ptr, "alice", 5);
    assert_memory_equal(v.event.comment.ptr, "ok \"go\"", 7);
    assert_int_equal(v.approval->status, TG_APPROVAL_APPROVED);
    assert_int_equal(tg_record_response(&out, &v, payload.data, payload.len), TG_ERR_INVALID_ARG);
    tg_record_view_free(&v);
    /* The status must be the state's: "pending" against an approved state is corruption. */
    e.status = T("pending");
    tg_buf_reset(&payload);
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_OK);
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len),
                     TG_ERR_LEDGER_CORRUPT);
    /* Without meta "a" a type-4 record is corrupt. */
    m.approval = NULL;
    tg_buf_reset(&meta);
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    e.status = T("approved");
    tg_buf_reset(&payload);
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_OK);
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len),
                     TG_ERR_LEDGER_CORRUPT);

    /* An expiry: no subject, decision, entry or comment. */
    assert_int_equal(tg_approval_expire(&b, &a, AT0 + 3600000), TG_OK);
    tg_record_approval_event_t x = {.approval_id = T(AID),
                                    .tenant = T("acme"),
                                    .request_hash = T(RH),
                                    .status = T("expired"),
                                    .at_ms = AT0 + 3600000};
    tg_buf_reset(&payload);
    assert_int_equal(tg_record_approval_event_write(&payload, &x), TG_OK);
    assert_string_equal(payload.data,
                        "{\"approvalId\":\"" AID "\",\"at\":\"2026-11-30T06:45:00.000Z\","
                        "\"event\":\"expire\",\"requestHash\":\"" RH
                        "\",\"status\":\"expired\",\"tenantId\":\"acme\",\"type\":"
                        "\"approval\"}");
    m.approval = &b;
    m.status = 0;
    tg_buf_reset(&meta);
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    assert_int_equal(tg_record_view(&v, meta.data, meta.len, payload.data, payload.len), TG_OK);
    assert_true(v.approval_record);
    assert_false(v.event.review);
    assert_null(v.event.subject.ptr);
    tg_record_view_free(&v);

    /* The writer's refusals. */
    tg_buf_reset(&payload);
    x.subject = T("alice");
    assert_int_equal(tg_record_approval_event_write(&payload, &x), TG_ERR_INVALID_ARG);
    x.subject = NONE;
    x.status = T("gone");
    assert_int_equal(tg_record_approval_event_write(&payload, &x), TG_ERR_INVALID_ARG);
    x.status = T("expired");
    x.approval_id = T("appr_1");
    assert_int_equal(tg_record_approval_event_write(&payload, &x), TG_ERR_INVALID_ARG);
    x.approval_id = T(AID);
    x.request_hash = T("00");
    assert_int_equal(tg_record_approval_event_write(&payload, &x), TG_ERR_INVALID_ARG);
    e = event_example();
    e.subject = NONE;
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_ERR_INVALID_ARG);
    e = event_example();
    e.entry = TG_APPROVAL_MAX_APPROVERS;
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_ERR_INVALID_ARG);
    static char longc[TG_APPROVAL_COMMENT_MAX + 1];
    memset(longc, 'c', sizeof longc);
    e = event_example();
    e.comment = (tg_text_t){longc, sizeof longc};
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_ERR_INVALID_ARG);
    e.comment.len--;
    assert_int_equal(tg_record_approval_event_write(&payload, &e), TG_OK);
    assert_int_equal(tg_record_approval_event_write(&payload, NULL), TG_ERR_INVALID_ARG);
    tg_buf_free(&meta);
    tg_buf_free(&payload);
    tg_buf_free(&out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_bytes),
        cmocka_unit_test(test_meta_claim_hash),
        cmocka_unit_test(test_meta_errors),
        cmocka_unit_test(test_silence_bytes),
        cmocka_unit_test(test_round_trip_silence),
        cmocka_unit_test(test_round_trip_receipt),
        cmocka_unit_test(test_view_refuses),
        cmocka_unit_test(test_canonical_round_trip),
        cmocka_unit_test(test_redemption),
        cmocka_unit_test(test_meta_approval),
        cmocka_unit_test(test_meta_approval_refused),
        cmocka_unit_test(test_response_escalate),
        cmocka_unit_test(test_approval_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
