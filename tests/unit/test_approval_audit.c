/* test_approval_audit.c — the offline audit of approvals (approval.h) over crafted record
 * streams built with the real writers: a valid two-approver history passes, and each kind
 * of forged step fails with its own report. Receipts are built by hand (the audit reads
 * their members; signatures are verify's other checks). */
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
#include "trigguard/record.h"

#define ID "appr_0123456789abcdef0123456789abcdef"
#define EXEC "exec_00112233445566778899aabbccddeeff"
#define EXEC2 "exec_ffeeddccbbaa99887766554433221100"
#define RHX "0102030405060708090a00000000000000000000000000000000000000000000"
#define OTHERX "ff02030405060708090a00000000000000000000000000000000000000000000"
#define T0 INT64_C(1796017500000)
#define TXT(s) ((tg_text_t){(s), strlen(s)})

typedef struct seen {
    int n;
    uint64_t seq;
    char id[64];
    char what[512];
} seen_t;

static void on_problem(void *ud, uint64_t seq, const char *id, const char *what) {
    seen_t *s = ud;
    print_message("  seq %llu %s: %s\n", (unsigned long long)seq, id, what);
    if (s->n++ == 0) { /* the first report is the one each case is about */
        s->seq = seq;
        snprintf(s->id, sizeof s->id, "%s", id);
        snprintf(s->what, sizeof s->what, "%s", what);
    }
}

typedef struct hist {
    tg_approval_audit_t *au;
    seen_t seen;
    uint64_t seq;
    uint8_t rh[32];
    tg_approval_t cur;
} hist_t;

static void feed(hist_t *h, uint8_t type, const tg_approval_t *a, int64_t at_ms,
                 const char *payload) {
    tg_buf_t meta;
    tg_buf_init(&meta, TG_LEDGER_META_MAX);
    tg_record_meta_t m = {.at_ms = at_ms,
                          .request_hash = TXT(RHX),
                          .status = 200,
                          .tenant = TXT("acme"),
                          .approval = a};
    assert_int_equal(tg_record_meta_write(&meta, &m), TG_OK);
    assert_int_equal(tg_approval_audit_record(h->au, ++h->seq, type, meta.data, meta.len, payload,
                                              strlen(payload)),
                     TG_OK);
    tg_buf_free(&meta);
}

static void start(hist_t *h) {
    memset(h, 0, sizeof *h);
    assert_int_equal(tg_approval_audit_new(&h->au, 0, on_problem, &h->seen), TG_OK);
    assert_int_equal(tg_unhex(h->rh, 32, RHX, 64), TG_OK);
    /* An unrelated record first: passed over. */
    const char *plain =
        "{\"decision\":\"DENY\",\"executionId\":\"exec_1\",\"requestHash\":\"" RHX "\"}";
    feed(h, TG_LEDGER_TYPE_RECEIPT, NULL, T0 - 5, plain);
    tg_approval_spec_t s = {.required = 2,
                            .n_approvers = 2,
                            .approvers = {"@ops", "alice"},
                            .ttl_s = 3600,
                            .consume_within_s = 900};
    assert_int_equal(
        tg_approval_init(&h->cur, ID, "acme", h->rh, EXEC, "payments", "big", "NEEDS_TWO", &s, T0),
        TG_OK);
    feed(h, TG_LEDGER_TYPE_RECEIPT, &h->cur, T0,
         "{\"approvalId\":\"" ID "\",\"decision\":\"ESCALATE\",\"executionId\":\"" EXEC
         "\",\"requestHash\":\"" RHX "\",\"tenantId\":\"acme\"}");
}

/* A review record: payload from the arguments, meta "a" = state (the honest one unless a
 * forgery passes another). */
static void review_record(hist_t *h, const tg_approval_t *state, const char *subject,
                          uint32_t entry, bool approve, const char *rhx, int64_t at_ms) {
    tg_buf_t p;
    tg_buf_init(&p, TG_LEDGER_PAYLOAD_MAX);
    tg_record_approval_event_t e = {.approval_id = TXT(ID),
                                    .tenant = TXT("acme"),
                                    .review = true,
                                    .subject = TXT(subject),
                                    .entry = entry,
                                    .approve = approve,
                                    .request_hash = TXT(rhx),
                                    .status = TXT(tg_approval_status_name(state->status)),
                                    .at_ms = at_ms};
    assert_int_equal(tg_record_approval_event_write(&p, &e), TG_OK);
    feed(h, TG_LEDGER_TYPE_APPROVAL, state, at_ms, p.data);
    tg_buf_free(&p);
}

/* An honest review: the transition, then its record. */
static void review(hist_t *h, const char *subject, uint32_t entry, int64_t at_ms) {
    tg_approval_t next;
    assert_int_equal(tg_approval_review(&next, &h->cur, subject, entry, true, h->rh, at_ms), TG_OK);
    h->cur = next;
    review_record(h, &h->cur, subject, entry, true, RHX, at_ms);
}

/* A PERMIT receipt carrying approvalId, the given approvals list, and meta "a" = state. */
static void permit_record(hist_t *h, const tg_approval_t *state, const char *approvals,
                          int64_t at_ms) {
    char p[4096];
    snprintf(p, sizeof p,
             "{\"approvalId\":\"" ID "\",\"approvals\":%s,\"decision\":\"PERMIT\",\"executionId\":"
             "\"" EXEC2 "\",\"requestHash\":\"" RHX "\",\"tenantId\":\"acme\"}",
             approvals);
    feed(h, TG_LEDGER_TYPE_RECEIPT, state, at_ms, p);
}

static void consume(hist_t *h, int64_t at_ms) {
    tg_approval_t next;
    tg_buf_t list;
    tg_buf_init(&list, 0);
    assert_int_equal(tg_approval_receipt_approvals(&list, &h->cur), TG_OK);
    assert_int_equal(tg_approval_consume(&next, &h->cur, EXEC2, at_ms), TG_OK);
    h->cur = next;
    permit_record(h, &h->cur, list.data, at_ms);
    tg_buf_free(&list);
}

static void expect(hist_t *h, uint64_t seq, const char *what) {
    assert_int_equal(h->seen.n >= 1, 1);
    assert_int_equal(h->seen.seq, seq);
    assert_string_equal(h->seen.id, ID);
    if (strstr(h->seen.what, what) == NULL) {
        fail_msg("report \"%s\" does not say \"%s\"", h->seen.what, what);
    }
    tg_approval_audit_stats_t st;
    tg_approval_audit_stats(h->au, &st);
    assert_int_equal(st.problems, (uint64_t)h->seen.n);
    tg_approval_audit_free(h->au);
}

static void test_valid_history(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    review(&h, "alice", 1, T0 + 20);
    consume(&h, T0 + 30);
    /* A second approval that expires unreviewed; a DENY receipt after it is no step. */
    tg_approval_audit_stats_t st;
    tg_approval_audit_stats(h.au, &st);
    assert_int_equal(h.seen.n, 0);
    assert_int_equal(st.problems, 0);
    assert_int_equal(st.approvals, 1);
    assert_int_equal(st.reviews, 2);
    assert_int_equal(st.consumed, 1);
    tg_approval_audit_free(h.au);
}

static void test_valid_expiry_and_resume(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    /* A resume while pending answers ESCALATE again, without a step. */
    feed(&h, TG_LEDGER_TYPE_RECEIPT, NULL, T0 + 11,
         "{\"approvalId\":\"" ID "\",\"decision\":\"ESCALATE\",\"executionId\":\"exec_2\","
         "\"requestHash\":\"" RHX "\",\"tenantId\":\"acme\"}");
    tg_approval_t next;
    assert_int_equal(tg_approval_expire(&next, &h.cur, T0 + 3600000 + 7), TG_OK);
    tg_buf_t p;
    tg_buf_init(&p, 0);
    tg_record_approval_event_t e = {.approval_id = TXT(ID),
                                    .tenant = TXT("acme"),
                                    .request_hash = TXT(RHX),
                                    .status = TXT("expired"),
                                    .at_ms = T0 + 3600000 + 7};
    assert_int_equal(tg_record_approval_event_write(&p, &e), TG_OK);
    feed(&h, TG_LEDGER_TYPE_APPROVAL, &next, e.at_ms, p.data);
    tg_buf_free(&p);
    tg_approval_audit_stats_t st;
    tg_approval_audit_stats(h.au, &st);
    assert_int_equal(h.seen.n, 0);
    assert_int_equal(st.expired, 1);
    tg_approval_audit_free(h.au);
}

static void test_duplicated_approver(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    /* bob again; the state claims a second subject so that it is a valid document. */
    tg_approval_t forged;
    assert_int_equal(tg_approval_review(&forged, &h.cur, "carol", 0, true, h.rh, T0 + 20), TG_OK);
    review_record(&h, &forged, "bob", 0, true, RHX, T0 + 20);
    expect(&h, 4, "duplicated approver: bob");
}

static void test_review_after_expiry(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    tg_approval_t forged;
    assert_int_equal(tg_approval_review(&forged, &h.cur, "alice", 1, true, h.rh, T0 + 20), TG_OK);
    review_record(&h, &forged, "alice", 1, true, RHX, T0 + 3600000);
    expect(&h, 4, "review after the approval expired");
}

static void test_review_other_hash(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    tg_approval_t forged;
    assert_int_equal(tg_approval_review(&forged, &h.cur, "bob", 0, true, h.rh, T0 + 20), TG_OK);
    review_record(&h, &forged, "bob", 0, true, OTHERX, T0 + 20);
    expect(&h, 3, "review by bob is for another request hash");
}

static void test_review_wrong_entry(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    tg_approval_t forged;
    assert_int_equal(tg_approval_review(&forged, &h.cur, "bob", 0, true, h.rh, T0 + 20), TG_OK);
    review_record(&h, &forged, "bob", 1, true, RHX, T0 + 20);
    expect(&h, 3, "not admitted by approvers entry 1 (alice)");
}

static void test_permit_without_quorum(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    tg_approval_t full, used;
    assert_int_equal(tg_approval_review(&full, &h.cur, "alice", 1, true, h.rh, T0 + 20), TG_OK);
    assert_int_equal(tg_approval_consume(&used, &full, EXEC2, T0 + 30), TG_OK);
    permit_record(&h, &used,
                  "[{\"at\":\"2026-11-30T05:45:00.010Z\",\"decision\":\"approve\",\"subject\":"
                  "\"bob\"}]",
                  T0 + 30);
    expect(&h, 4, "PERMIT without quorum: 1 of 2 required approvals");
}

static void test_version_gap(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    tg_approval_t bob;
    assert_int_equal(tg_approval_review(&bob, &h.cur, "bob", 0, true, h.rh, T0 + 10), TG_OK);
    /* bob's record is missing: alice's record carries v3. */
    assert_int_equal(tg_approval_review(&h.cur, &bob, "alice", 1, true, h.rh, T0 + 20), TG_OK);
    review_record(&h, &h.cur, "alice", 1, true, RHX, T0 + 20);
    expect(&h, 3, "version gap: v3 follows v1");
}

static void test_second_consumption(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    review(&h, "alice", 1, T0 + 20);
    consume(&h, T0 + 30);
    assert_int_equal(h.seen.n, 0);
    permit_record(&h, &h.cur,
                  "[{\"at\":\"2026-11-30T05:45:00.010Z\",\"decision\":\"approve\",\"subject\":"
                  "\"bob\"},{\"at\":\"2026-11-30T05:45:00.020Z\",\"decision\":\"approve\","
                  "\"subject\":\"alice\"}]",
                  T0 + 40);
    expect(&h, 6, "approval consumed a second time");
}

static void test_permit_list_differs(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    review(&h, "bob", 0, T0 + 10);
    review(&h, "alice", 1, T0 + 20);
    tg_approval_t used;
    assert_int_equal(tg_approval_consume(&used, &h.cur, EXEC2, T0 + 30), TG_OK);
    permit_record(&h, &used,
                  "[{\"at\":\"2026-11-30T05:45:00.010Z\",\"decision\":\"approve\",\"subject\":"
                  "\"bob\"},{\"at\":\"2026-11-30T05:45:00.020Z\",\"decision\":\"approve\","
                  "\"subject\":\"mallory\"}]",
                  T0 + 30);
    expect(&h, 5, "PERMIT's approvals list differs");
}

/* The record's state must be the transition's: a review whose state says denied. */
static void test_state_not_transition(void **state) {
    (void)state;
    hist_t h;
    start(&h);
    tg_approval_t forged;
    assert_int_equal(tg_approval_review(&forged, &h.cur, "bob", 0, false, h.rh, T0 + 20), TG_OK);
    review_record(&h, &forged, "bob", 0, true, RHX, T0 + 20);
    expect(&h, 3, "is not the one the transition makes");
}

static void test_unknown_and_bounds(void **state) {
    (void)state;
    seen_t seen = {0};
    tg_approval_audit_t *au = NULL;
    assert_int_equal(tg_approval_audit_new(&au, 0, NULL, NULL), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_audit_new(&au, 1, on_problem, &seen), TG_OK);
    /* A step of an approval never escalated. */
    const char *p = "{\"approvalId\":\"" ID "\",\"approvals\":[],\"decision\":\"PERMIT\","
                    "\"executionId\":\"" EXEC2 "\",\"requestHash\":\"" RHX "\"}";
    const char *m = "{\"at\":1,\"rh\":\"" RHX "\",\"s\":200,\"t\":\"acme\"}";
    assert_int_equal(
        tg_approval_audit_record(au, 9, TG_LEDGER_TYPE_RECEIPT, m, strlen(m), p, strlen(p)), TG_OK);
    assert_int_equal(seen.n, 1);
    assert_non_null(strstr(seen.what, "without a valid approval state"));
    assert_int_equal(tg_approval_audit_record(au, 10, TG_LEDGER_TYPE_APPROVAL, "x", 1, "{}", 2),
                     TG_OK);
    assert_int_equal(seen.n, 2);
    assert_int_equal(tg_approval_audit_record(NULL, 10, 1, m, 1, p, 1), TG_ERR_INVALID_ARG);
    tg_approval_audit_free(au);
    tg_approval_audit_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_history),
        cmocka_unit_test(test_valid_expiry_and_resume),
        cmocka_unit_test(test_duplicated_approver),
        cmocka_unit_test(test_review_after_expiry),
        cmocka_unit_test(test_review_other_hash),
        cmocka_unit_test(test_review_wrong_entry),
        cmocka_unit_test(test_permit_without_quorum),
        cmocka_unit_test(test_version_gap),
        cmocka_unit_test(test_second_consumption),
        cmocka_unit_test(test_permit_list_differs),
        cmocka_unit_test(test_state_not_transition),
        cmocka_unit_test(test_unknown_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
