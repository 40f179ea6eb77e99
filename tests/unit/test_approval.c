/* test_approval.c — the approval state machine (approval.h): every transition and every error
 * in its documented order, the document's one spelling, the parser's refusals, the biggest
 * document, and the expiry boundaries. */
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
#include "trigguard/clock.h"

#define ID "appr_0123456789abcdef0123456789abcdef"
#define EXEC "exec_00112233445566778899aabbccddeeff"
#define EXEC2 "exec_ffeeddccbbaa99887766554433221100"
#define T0 INT64_C(1796017500000) /* 2026-11-30T05:45:00.000Z */
#define RHX "0102030405060708090a00000000000000000000000000000000000000000000"

static const uint8_t RH[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const uint8_t RH_OTHER[32] = {9};

/* Two approvals needed from "@ops" or alice; ttl 1 h, consume within 15 min. */
static tg_approval_t pending(void) {
    tg_approval_spec_t s = {.required = 2,
                            .n_approvers = 2,
                            .approvers = {"@ops", "alice"},
                            .ttl_s = 3600,
                            .consume_within_s = 900};
    tg_approval_t a;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "payments.refund", "refund-big",
                                      "NEEDS_TWO", &s, T0),
                     TG_OK);
    return a;
}

static tg_approval_t approved(void) {
    tg_approval_t a = pending(), b;
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, true, RH, T0 + 10), TG_OK);
    assert_int_equal(tg_approval_review(&a, &b, "alice", 1, true, RH, T0 + 20), TG_OK);
    return a;
}

static char *doc(const tg_approval_t *a) {
    tg_buf_t b;
    tg_buf_init(&b, TG_APPROVAL_DOC_MAX);
    assert_int_equal(tg_approval_write(&b, a), TG_OK);
    return b.data;
}

static void test_names(void **state) {
    (void)state;
    tg_approval_status_t s = TG_APPROVAL_PENDING;
    for (int i = 0; i < TG_APPROVAL__COUNT; i++) {
        const char *n = tg_approval_status_name((tg_approval_status_t)i);
        assert_true(tg_approval_status_parse(&s, n, strlen(n)));
        assert_int_equal(s, i);
    }
    assert_string_equal(tg_approval_status_name(TG_APPROVAL__COUNT), "?");
    s = TG_APPROVAL_DENIED;
    assert_false(tg_approval_status_parse(&s, "Pending", 7));
    assert_false(tg_approval_status_parse(&s, "pendingx", 8));
    assert_false(tg_approval_status_parse(&s, "pending", 6));
    assert_int_equal(s, TG_APPROVAL_DENIED);
}

static void test_ids(void **state) {
    (void)state;
    char a[TG_APPROVAL_ID_LEN + 1], b[TG_APPROVAL_ID_LEN + 1];
    assert_int_equal(tg_approval_new_id(a), TG_OK);
    assert_int_equal(tg_approval_new_id(b), TG_OK);
    assert_int_equal(strlen(a), TG_APPROVAL_ID_LEN);
    assert_true(tg_approval_id_valid(a, strlen(a)));
    assert_string_not_equal(a, b);
    assert_true(tg_approval_id_valid(ID, strlen(ID)));
    assert_false(tg_approval_id_valid("appr_0123456789ABCDEF0123456789abcdef", 37));
    assert_false(tg_approval_id_valid(ID, 36));
    assert_false(tg_approval_id_valid(EXEC, 37));
    assert_false(tg_approval_id_valid(NULL, 37));
}

static void test_init(void **state) {
    (void)state;
    tg_approval_t a = pending();
    assert_int_equal(a.version, 1);
    assert_int_equal(a.status, TG_APPROVAL_PENDING);
    assert_int_equal(a.expires_ms, T0 + 3600000);
    assert_int_equal(a.consume_within_ms, 900000);
    assert_int_equal(a.n_reviews, 0);
    assert_int_equal(a.resolved_ms, 0);
    tg_approval_spec_t s = {.required = 3,
                            .n_approvers = 2,
                            .approvers = {"bob", "alice"},
                            .ttl_s = 60,
                            .consume_within_s = 60};
    /* Three approvals from two named subjects could never be reached. */
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(a.version, 0);
    s.required = 2;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0), TG_OK);
    assert_int_equal(tg_approval_init(&a, EXEC, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, ID, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "bad reason", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_init(&a, ID, "", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_init(&a, ID, "acme", NULL, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.ttl_s = TG_APPROVAL_TTL_MAX_S + 1;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.ttl_s = 60;
    s.consume_within_s = 0;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.consume_within_s = 60;
    s.approvers[1] = "@";
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.approvers[1] = "al ice";
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.approvers[1] = "alice";
    s.n_approvers = 0;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    s.n_approvers = 2;
    s.required = 0;
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_init(NULL, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0),
                     TG_ERR_INVALID_ARG);
}

static void test_match(void **state) {
    (void)state;
    tg_approval_t a = pending();
    uint32_t e = 99;
    const char *ops[] = {"dev", "ops"};
    assert_int_equal(tg_approval_match(&a, "alice", NULL, 0, &e), TG_OK);
    assert_int_equal(e, 1);
    assert_int_equal(tg_approval_match(&a, "alice", ops, 2, &e), TG_OK);
    assert_int_equal(e, 0); /* the first entry that admits her */
    assert_int_equal(tg_approval_match(&a, "bob", ops, 2, &e), TG_OK);
    assert_int_equal(e, 0);
    assert_int_equal(tg_approval_match(&a, "bob", ops, 1, &e), TG_ERR_NOT_APPROVER);
    const char *at_ops[] = {"@ops"};
    assert_int_equal(tg_approval_match(&a, "bob", at_ops, 1, &e), TG_ERR_NOT_APPROVER);
    assert_int_equal(tg_approval_match(&a, "@ops", NULL, 0, &e), TG_ERR_NOT_APPROVER);
    assert_int_equal(tg_approval_match(&a, "Alice", NULL, 0, &e), TG_ERR_NOT_APPROVER);
}

static void test_review_to_approved(void **state) {
    (void)state;
    tg_approval_t a = pending(), b;
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, true, RH, T0 + 10), TG_OK);
    assert_int_equal(b.version, 2);
    assert_int_equal(b.status, TG_APPROVAL_PENDING);
    assert_int_equal(b.n_reviews, 1);
    assert_string_equal(b.reviews[0].subject, "bob");
    assert_int_equal(b.reviews[0].at_ms, T0 + 10);
    assert_int_equal(b.resolved_ms, 0);
    a = approved();
    assert_int_equal(a.version, 3);
    assert_int_equal(a.status, TG_APPROVAL_APPROVED);
    assert_int_equal(a.resolved_ms, T0 + 20);
}

static void test_review_deny(void **state) {
    (void)state;
    tg_approval_t a = pending(), b;
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, true, RH, T0 + 10), TG_OK);
    assert_int_equal(tg_approval_review(&a, &b, "carol", 0, false, RH, T0 + 30), TG_OK);
    assert_int_equal(a.status, TG_APPROVAL_DENIED);
    assert_int_equal(a.version, 3);
    assert_int_equal(a.resolved_ms, T0 + 30);
    assert_false(a.reviews[1].approve);
    /* Closed: nobody reviews a denied approval, and it cannot be consumed. */
    assert_int_equal(tg_approval_review(&b, &a, "alice", 1, true, RH, T0 + 40),
                     TG_ERR_APPROVAL_CLOSED);
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 40), TG_ERR_APPROVAL_CLOSED);
    assert_int_equal(tg_approval_expire(&b, &a, T0 + 99999999), TG_ERR_NOT_FOUND);
}

/* The documented order: INVALID_ARG, REQUEST_HASH_MISMATCH, ALREADY_REVIEWED,
 * APPROVAL_CLOSED; each case below also qualifies for every later error. */
static void test_review_error_order(void **state) {
    (void)state;
    tg_approval_t a = pending(), b, n;
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, true, RH, T0 + 10), TG_OK);
    const int64_t late = T0 + 3600000; /* expired: closed */
    memset(&n, 0x5a, sizeof n);
    tg_approval_t before = n;
    assert_int_equal(tg_approval_review(&n, &b, "bob", 5, true, RH_OTHER, late),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_review(&n, &b, "bob", 1, true, RH_OTHER, late),
                     TG_ERR_INVALID_ARG); /* entry 1 names alice, not bob */
    assert_int_equal(tg_approval_review(&n, &b, "b ob", 0, true, RH_OTHER, late),
                     TG_ERR_INVALID_ARG);
    char longsub[TG_GUARD_SUBJECT_MAX + 2];
    memset(longsub, 'x', sizeof longsub - 1);
    longsub[sizeof longsub - 1] = '\0';
    assert_int_equal(tg_approval_review(&n, &b, longsub, 0, true, RH_OTHER, late),
                     TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_review(&n, &b, "bob", 0, true, RH_OTHER, late),
                     TG_ERR_REQUEST_HASH_MISMATCH);
    assert_int_equal(tg_approval_review(&n, &b, "bob", 0, false, RH, late),
                     TG_ERR_ALREADY_REVIEWED);
    assert_int_equal(tg_approval_review(&n, &b, "alice", 1, true, RH, late),
                     TG_ERR_APPROVAL_CLOSED);
    assert_memory_equal(&n, &before, sizeof n); /* written only on success */
    assert_int_equal(tg_approval_review(&n, &b, "alice", 1, true, RH, late - 1), TG_OK);
    /* Approved: closed to further reviews. */
    assert_int_equal(tg_approval_review(&b, &n, "dave", 0, true, RH, late - 1),
                     TG_ERR_APPROVAL_CLOSED);
}

/* A clock stepped back cannot make a step older than the one before. */
static void test_review_clamps_time(void **state) {
    (void)state;
    tg_approval_t a = pending(), b, c;
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, true, RH, T0 + 500), TG_OK);
    assert_int_equal(tg_approval_review(&c, &b, "alice", 1, true, RH, T0 + 100), TG_OK);
    assert_int_equal(c.reviews[1].at_ms, T0 + 500);
    assert_int_equal(tg_approval_consume(&b, &c, EXEC2, T0), TG_OK);
    assert_int_equal(b.consumed_ms, T0 + 500);
}

static void test_consume(void **state) {
    (void)state;
    tg_approval_t a = approved(), b, c;
    assert_int_equal(tg_approval_consume(&b, &a, "exec_x", T0 + 30), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 30), TG_OK);
    assert_int_equal(b.status, TG_APPROVAL_CONSUMED);
    assert_int_equal(b.version, 4);
    assert_int_equal(b.consumed_ms, T0 + 30);
    assert_string_equal(b.consumed_by, EXEC2);
    /* Order: CONSUMED before CLOSED (a consumed approval is not approved any more). */
    assert_int_equal(tg_approval_consume(&c, &b, EXEC2, T0 + 40), TG_ERR_APPROVAL_CONSUMED);
    assert_int_equal(tg_approval_consume(&c, &b, "nope", T0 + 40), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_expire(&c, &b, T0 + 99999999), TG_ERR_NOT_FOUND);
    a = pending();
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 30), TG_ERR_APPROVAL_CLOSED);
    /* Approved at T0+20, usable until T0+20+900000 (exclusive). */
    a = approved();
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 20 + 900000), TG_ERR_APPROVAL_CLOSED);
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 20 + 899999), TG_OK);
}

static void test_status_at_and_expire(void **state) {
    (void)state;
    tg_approval_t a = pending(), b;
    const int64_t exp = T0 + 3600000;
    assert_int_equal(tg_approval_status_at(&a, exp - 1), TG_APPROVAL_PENDING);
    assert_int_equal(tg_approval_status_at(&a, exp), TG_APPROVAL_EXPIRED);
    assert_int_equal(tg_approval_expire(&b, &a, exp - 1), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_approval_expire(&b, &a, exp + 5000), TG_OK);
    assert_int_equal(b.status, TG_APPROVAL_EXPIRED);
    assert_int_equal(b.resolved_ms, exp); /* the instant it expired, not the timer's */
    assert_int_equal(b.version, 2);
    assert_int_equal(tg_approval_expire(&a, &b, exp + 6000), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_approval_status_at(&b, 0), TG_APPROVAL_EXPIRED);

    a = approved();
    const int64_t use_by = T0 + 20 + 900000;
    assert_int_equal(tg_approval_status_at(&a, use_by - 1), TG_APPROVAL_APPROVED);
    assert_int_equal(tg_approval_status_at(&a, use_by), TG_APPROVAL_EXPIRED);
    assert_int_equal(tg_approval_expire(&b, &a, use_by - 1), TG_ERR_NOT_FOUND);
    assert_int_equal(tg_approval_expire(&b, &a, use_by), TG_OK);
    assert_int_equal(b.resolved_ms, use_by);
    assert_int_equal(b.version, 4);
    /* An approved approval is usable past the review TTL, within consume_within. */
    tg_approval_spec_t s = {.required = 1,
                            .n_approvers = 1,
                            .approvers = {"alice"},
                            .ttl_s = 60,
                            .consume_within_s = 900};
    assert_int_equal(tg_approval_init(&a, ID, "acme", RH, EXEC, "s", "r", "R", &s, T0), TG_OK);
    assert_int_equal(tg_approval_review(&b, &a, "alice", 0, true, RH, T0 + 59999), TG_OK);
    assert_int_equal(tg_approval_status_at(&b, T0 + 70000), TG_APPROVAL_APPROVED);
    assert_int_equal(tg_approval_review(&b, &a, "alice", 0, true, RH, T0 + 60000),
                     TG_ERR_APPROVAL_CLOSED);
}

/* The golden document pins the format: member names, order, escapes. */
static void test_write_golden(void **state) {
    (void)state;
    tg_approval_t a = approved(), b;
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 30), TG_OK);
    char *d = doc(&b);
    assert_string_equal(
        d, "{\"approvers\":[\"@ops\",\"alice\"],\"consumeWithinMs\":900000,\"consumedAt\":"
           "1796017500030,\"consumedBy\":\"" EXEC2 "\",\"createdAt\":1796017500000,"
           "\"escalationId\":\"" EXEC "\",\"expiresAt\":1796021100000,\"id\":\"" ID "\","
           "\"reason\":\"NEEDS_TWO\",\"requestHash\":\"" RHX "\",\"required\":2,"
           "\"resolvedAt\":1796017500020,\"reviews\":[{\"at\":1796017500010,\"decision\":"
           "\"approve\",\"entry\":0,\"subject\":\"bob\"},{\"at\":1796017500020,\"decision\":"
           "\"approve\",\"entry\":1,\"subject\":\"alice\"}],\"rule\":\"refund-big\","
           "\"status\":\"consumed\",\"surface\":\"payments.refund\",\"tenant\":\"acme\",\"v\":4}");
    free(d);
}

static void test_round_trip(void **state) {
    (void)state;
    tg_approval_t st[6], p;
    st[0] = pending();
    st[1] = approved();
    assert_int_equal(tg_approval_consume(&st[2], &st[1], EXEC2, T0 + 30), TG_OK);
    assert_int_equal(tg_approval_expire(&st[3], &st[0], T0 + 3600000), TG_OK);
    assert_int_equal(tg_approval_expire(&st[4], &st[1], T0 + 3600000), TG_OK);
    assert_int_equal(tg_approval_review(&st[5], &st[0], "bob", 0, false, RH, T0 + 1), TG_OK);
    for (int i = 0; i < 6; i++) {
        char *d = doc(&st[i]);
        assert_int_equal(tg_approval_parse(&p, d, strlen(d)), TG_OK);
        assert_memory_equal(&p, &st[i], sizeof p);
        char *d2 = doc(&p);
        assert_string_equal(d, d2);
        free(d);
        free(d2);
    }
}

/* Replaces the first occurrence of from in d by to; the result is a new string. */
static char *edit(const char *d, const char *from, const char *to) {
    const char *p = strstr(d, from);
    assert_non_null(p);
    size_t n = strlen(d) - strlen(from) + strlen(to) + 1;
    char *r = malloc(n);
    assert_non_null(r);
    snprintf(r, n, "%.*s%s%s", (int)(p - d), d, to, p + strlen(from));
    return r;
}

static void expect_corrupt(const char *d) {
    tg_approval_t p;
    memset(&p, 0x33, sizeof p);
    assert_int_equal(tg_approval_parse(&p, d, strlen(d)), TG_ERR_LEDGER_CORRUPT);
    tg_approval_t zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&p, &zero, sizeof p);
}

static void test_parse_rejects(void **state) {
    (void)state;
    tg_approval_t a = approved();
    char *d = doc(&a);
    static const char *const edits[][2] = {
        {"{\"approvers\"", "{ \"approvers\""},                 /* whitespace */
        {"\"v\":3}", "\"v\":3,\"x\":1}"},                      /* unknown member */
        {"\"v\":3}", "\"v\":3.0}"},                            /* number spelling */
        {"\"v\":3}", "\"v\":4}"},                              /* version vs steps */
        {"\"v\":3}", "\"v\":\"3\"}"},                          /* type */
        {"\"v\":3}", "\"v\":-3}"},                             /* range */
        {"\"status\":\"approved\"", "\"status\":\"pending\""}, /* status vs counts */
        {"\"status\":\"approved\"", "\"status\":\"consumed\""},
        {"\"status\":\"approved\"", "\"status\":\"APPROVED\""},
        {"\"required\":2", "\"required\":3"},
        {"\"required\":2", "\"required\":1"},
        {"\"resolvedAt\":1796017500020", "\"resolvedAt\":1796017500021"},
        {",\"resolvedAt\":1796017500020", ""},            /* missing member */
        {"\"subject\":\"alice\"", "\"subject\":\"bob\""}, /* duplicate reviewer, and entry */
        {"\"entry\":1", "\"entry\":0,\"entry\":1"},       /* duplicate member */
        {"\"entry\":1", "\"entry\":7"},                   /* entry out of range */
        {"\"decision\":\"approve\"", "\"decision\":\"yes\""},
        {"\"at\":1796017500010", "\"at\":1796017500030"}, /* reviews out of order */
        {"\"id\":\"appr_", "\"id\":\"exec_"},
        {"\"requestHash\":\"01", "\"requestHash\":\"0A"}, /* upper-case hex */
        {"\"tenant\":\"acme\"", "\"tenant\":\"\""},
        {"\"tenant\":\"acme\"", "\"tenant\":\"ac\\u006de\""}, /* escape not minimal */
        {"\"expiresAt\":1796021100000", "\"expiresAt\":1796017500000"},
        {"\"consumeWithinMs\":900000", "\"consumeWithinMs\":0"},
        {"\"reviews\":[", "\"reviews\":[{},"},
        {"\"approvers\":[\"@ops\",\"alice\"]", "\"approvers\":[]"},
        {"\"approvers\":[\"@ops\",\"alice\"]", "\"approvers\":\"@ops\""},
        {"\"reason\":\"NEEDS_TWO\"", "\"reason\":\"needs two\""},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *e = edit(d, edits[i][0], edits[i][1]);
        print_message("edit %zu\n", i);
        expect_corrupt(e);
        free(e);
    }
    expect_corrupt("");
    expect_corrupt("[]");
    expect_corrupt("null");
    char trailing[TG_APPROVAL_DOC_MAX];
    snprintf(trailing, sizeof trailing, "%s ", d);
    expect_corrupt(trailing);
    /* A NUL inside a string never reaches the C fields. */
    char *e = edit(d, "\"rule\":\"refund-big\"", "\"rule\":\"refund\\u0000big\"");
    expect_corrupt(e);
    free(e);
    tg_approval_t p;
    assert_int_equal(tg_approval_parse(&p, d, strlen(d) - 1), TG_ERR_LEDGER_CORRUPT);
    assert_int_equal(tg_approval_parse(&p, d, strlen(d)), TG_OK);
    assert_int_equal(tg_approval_parse(NULL, d, strlen(d)), TG_ERR_INVALID_ARG);
    free(d);
}

/* The writer refuses a state that no transition makes. */
static void test_write_rejects(void **state) {
    (void)state;
    tg_buf_t b;
    tg_buf_init(&b, 0);
    tg_approval_t a = approved();
    a.version = 7;
    assert_int_equal(tg_approval_write(&b, &a), TG_ERR_INVALID_ARG);
    a = approved();
    a.status = TG_APPROVAL_DENIED;
    assert_int_equal(tg_approval_write(&b, &a), TG_ERR_INVALID_ARG);
    a = pending();
    memset(a.tenant, 'x', sizeof a.tenant); /* no NUL */
    assert_int_equal(tg_approval_write(&b, &a), TG_ERR_INVALID_ARG);
    a = pending();
    a.status = TG_APPROVAL__COUNT;
    assert_int_equal(tg_approval_write(&b, &a), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_api_json(&b, &a, T0), TG_ERR_INVALID_ARG);
    assert_int_equal(tg_approval_receipt_approvals(&b, &a), TG_ERR_INVALID_ARG);
    assert_int_equal(b.len, 0);
    tg_buf_free(&b);
}

/* Every field at its bound, every string escaped to its longest (a control character is
 * six bytes: \u001f; '"' two where control characters are excluded): the document still
 * fits TG_APPROVAL_DOC_MAX. Subjects admit no escapes, so they are at their longest plain. */
static void test_biggest_document(void **state) {
    (void)state;
    char entries[TG_APPROVAL_MAX_APPROVERS][TG_APPROVAL_ENTRY_MAX + 1];
    tg_approval_spec_t s = {.required = TG_APPROVAL_MAX_REQUIRED,
                            .n_approvers = TG_APPROVAL_MAX_APPROVERS,
                            .ttl_s = TG_APPROVAL_TTL_MAX_S,
                            .consume_within_s = TG_APPROVAL_TTL_MAX_S};
    for (int i = 0; i < TG_APPROVAL_MAX_APPROVERS; i++) {
        /* A group name may hold '"' (a binding has only control characters excluded). */
        memset(entries[i], '"', TG_APPROVAL_ENTRY_MAX);
        entries[i][0] = '@';
        entries[i][1] = (char)('a' + i);
        entries[i][TG_APPROVAL_ENTRY_MAX] = '\0';
        s.approvers[i] = entries[i];
    }
    char tenant[TG_GUARD_TENANT_NAME_MAX + 1], name[TG_APPROVAL_NAME_MAX + 1], reason[65];
    memset(tenant, 0x1f, sizeof tenant - 1);
    tenant[sizeof tenant - 1] = '\0';
    memset(name, 0x1f, sizeof name - 1);
    name[sizeof name - 1] = '\0';
    memset(reason, 'Z', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    tg_approval_t a, b;
    const int64_t t0 = TG_TIME_MAX_MS - 2 * TG_APPROVAL_TTL_MAX_S * 1000;
    /* surface: a binding has no control characters; rule: any text. */
    char surface[TG_APPROVAL_NAME_MAX + 1];
    memset(surface, '"', sizeof surface - 1);
    surface[sizeof surface - 1] = '\0';
    assert_int_equal(tg_approval_init(&a, ID, tenant, RH, EXEC, surface, name, reason, &s, t0),
                     TG_OK);
    for (int i = 0; i < TG_APPROVAL_MAX_REQUIRED; i++) {
        char sub[TG_GUARD_SUBJECT_MAX + 1];
        memset(sub, 'A' + i, TG_GUARD_SUBJECT_MAX);
        sub[TG_GUARD_SUBJECT_MAX] = '\0';
        assert_int_equal(tg_approval_review(&b, &a, sub, (uint32_t)i, true, RH, t0 + i), TG_OK);
        a = b;
    }
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, t0 + 100), TG_OK);
    tg_buf_t d;
    tg_buf_init(&d, 0);
    assert_int_equal(tg_approval_write(&d, &b), TG_OK);
    print_message("biggest document: %zu bytes\n", d.len);
    assert_true(d.len <= TG_APPROVAL_DOC_MAX);
    assert_int_equal(tg_approval_parse(&a, d.data, d.len), TG_OK);
    assert_memory_equal(&a, &b, sizeof a);
    tg_buf_free(&d);
}

static void test_api_json(void **state) {
    (void)state;
    tg_approval_t a = pending(), b;
    tg_buf_t out;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_approval_review(&b, &a, "bob", 0, false, RH, T0 + 1500), TG_OK);
    assert_int_equal(tg_approval_api_json(&out, &b, T0 + 2000), TG_OK);
    assert_string_equal(
        out.data,
        "{\"approval_id\":\"" ID "\",\"status\":\"denied\",\"required\":2,\"approvals\":[{"
        "\"subject\":\"bob\",\"decision\":\"deny\",\"at\":\"2026-11-30T05:45:01.500Z\"}],"
        "\"expires_at\":\"2026-11-30T06:45:00.000Z\",\"created_at\":\"2026-11-30T05:45:00.000Z\","
        "\"request_hash\":\"" RHX "\",\"surface\":\"payments.refund\",\"rule\":\"refund-big\","
        "\"reason_code\":\"NEEDS_TWO\",\"escalation_execution_id\":\"" EXEC "\","
        "\"approvers\":[\"@ops\",\"alice\"],\"resolved_at\":\"2026-11-30T05:45:01.500Z\"}");
    /* The status is the clock's, not the stored one. */
    tg_buf_reset(&out);
    assert_int_equal(tg_approval_api_json(&out, &a, T0 + 3600000), TG_OK);
    assert_non_null(strstr(out.data, "\"status\":\"expired\""));
    assert_null(strstr(out.data, "resolved_at"));
    tg_buf_reset(&out);
    a = approved();
    assert_int_equal(tg_approval_consume(&b, &a, EXEC2, T0 + 30), TG_OK);
    assert_int_equal(tg_approval_api_json(&out, &b, T0 + 40), TG_OK);
    assert_non_null(strstr(out.data,
                           "\"resolved_at\":\"2026-11-30T05:45:00.020Z\",\"consumed_at\":"
                           "\"2026-11-30T05:45:00.030Z\",\"consumed_by\":\"" EXEC2 "\"}"));
    tg_buf_free(&out);
}

static void test_receipt_approvals(void **state) {
    (void)state;
    tg_approval_t a = approved();
    tg_buf_t out;
    tg_buf_init(&out, 0);
    assert_int_equal(tg_approval_receipt_approvals(&out, &a), TG_OK);
    assert_string_equal(
        out.data, "[{\"at\":\"2026-11-30T05:45:00.010Z\",\"decision\":\"approve\",\"subject\":"
                  "\"bob\"},{\"at\":\"2026-11-30T05:45:00.020Z\",\"decision\":\"approve\","
                  "\"subject\":\"alice\"}]");
    /* Canonical: what the receipt signs is what RFC 8785 makes of it. */
    json_t *j = NULL;
    assert_int_equal(tg_json_parse(&j, out.data, out.len, NULL, NULL), TG_OK);
    tg_buf_t c;
    tg_buf_init(&c, 0);
    assert_int_equal(tg_canon_write(&c, j, NULL), TG_OK);
    assert_string_equal(c.data, out.data);
    json_decref(j);
    tg_buf_free(&c);
    tg_buf_reset(&out);
    a = pending();
    assert_int_equal(tg_approval_receipt_approvals(&out, &a), TG_OK);
    assert_string_equal(out.data, "[]");
    tg_buf_free(&out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_review_to_approved),
        cmocka_unit_test(test_review_deny),
        cmocka_unit_test(test_review_error_order),
        cmocka_unit_test(test_review_clamps_time),
        cmocka_unit_test(test_consume),
        cmocka_unit_test(test_status_at_and_expire),
        cmocka_unit_test(test_write_golden),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_write_rejects),
        cmocka_unit_test(test_biggest_document),
        cmocka_unit_test(test_api_json),
        cmocka_unit_test(test_receipt_approvals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
