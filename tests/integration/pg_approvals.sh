#!/usr/bin/env bash
# pg_approvals.sh — ESCALATE approvals (SPEC §11.2) are shared by two instances on one
# PostgreSQL (SPEC §13): an escalation on instance A is readable on B; one review on A and one
# on B make it approved (the same subject on the other instance is 409 already_reviewed); the
# resume on B is the PERMIT with both approvals; a second resume on A is 409
# approval_consumed; concurrent reviews on both instances count `required` once; after both
# restart the state stands; `ledger verify --database-url` accepts the records.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen "$TG_TMP/key.pem"
TOKENS=$TG_TMP/tokens.json
{
    echo '['
    echo "  {\"tenant\": \"acme\", \"token_sha256\": \"$(sha tok-caller)\", \"subject\": \"ci\"},"
    for i in 1 2 3 4 5 6; do
        sep=,
        [ "$i" == 6 ] && sep=
        echo "  {\"tenant\": \"acme\", \"token_sha256\": \"$(sha "tok-rm$i")\", \"subject\": \"rm$i\", \"role\": \"approver\", \"groups\": [\"release-managers\"]}$sep"
    done
    echo ']'
} >"$TOKENS"
chmod 600 "$TOKENS"
POLICY=$TG_TMP/policy.json
cat >"$POLICY" <<'EOF'
{"version": "pg-approvals-1", "authority": "trigguard-itest", "tiers": {"1": 0.3, "2": 0.6, "3": 0.8},
 "surfaces": {"deploy.prod": {"tier": 3, "required_context": {"service": "string", "version": "string"},
   "rules": [{"id": "needs-two", "effect": "escalate", "reason": "TWO_PERSON_RULE",
              "when": [{"field": "context.service", "op": "eq", "value": "api"}],
              "approval": {"required": 2, "approvers": ["@release-managers"],
                           "ttl_s": 300, "consume_within_s": 300}}],
   "default": "permit"}}}
EOF
pg_migrate
pg_serve a --tokens "$TOKENS" --policy "$POLICY"
pg_serve b --tokens "$TOKENS" --policy "$POLICY"

req() { # req VERSION [extra members]
    echo "{\"surface\":\"deploy.prod\",\"action\":\"deploy\",\"actor\":\"ci.deployer\",\"context\":{\"service\":\"api\",\"version\":\"$1\"}${2:-}}"
}
ev() { tg_use "$1"; tg_req POST /v1/evaluate -H "Authorization: Bearer tok-caller" --json-body "$2"; }
review() { # review INSTANCE TOKEN ID HASH
    tg_use "$1"
    tg_req POST "/v1/approvals/$3/approve" -H "Authorization: Bearer $2" --json-body "{\"request_hash\":\"$4\"}"
}

ev a "$(req 1.0.0 ',"idempotency_key":"e1"')"
tg_expect_py "s == 200 and j['decision'] == 'ESCALATE' and j['approval']['status'] == 'pending'" "ESCALATE on A"
tg_jget ID 'j["approval_id"]'
tg_jget H 'j["request_hash"]'
tg_use b
tg_req GET "/v1/approvals/$ID" -H "Authorization: Bearer tok-caller"
tg_expect_py "s == 200 and j['status'] == 'pending' and j['request_hash'] == '$H'" "the approval is readable on B"
review a tok-rm1 "$ID" "$H"
tg_expect_py "s == 200 and j['status'] == 'pending' and len(j['approvals']) == 1" "the first review, on A"
review b tok-rm1 "$ID" "$H"
tg_expect_error 409 already_reviewed "the same subject again, on B"
review b tok-rm2 "$ID" "$H"
tg_expect_py "s == 200 and j['status'] == 'approved' and [a['subject'] for a in j['approvals']] == ['rm1', 'rm2']" \
    "the second review, on B: approved"
review a tok-rm3 "$ID" "$H"
tg_expect_error 409 approval_closed "a third review, on A: closed"
ev b "$(req 1.0.0 ",\"idempotency_key\":\"r1\",\"approval_id\":\"$ID\"")"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['approvalId'] == '$ID' and [a['subject'] for a in j['receipt']['approvals']] == ['rm1', 'rm2']" \
    "the resume on B: PERMIT with both approvals"
tg_save r1
ev a "$(req 1.0.0 ",\"idempotency_key\":\"r2\",\"approval_id\":\"$ID\"")"
tg_expect_error 409 approval_consumed "a second resume, on A: 409"
ev a "$(req 1.0.0 ",\"idempotency_key\":\"r1\",\"approval_id\":\"$ID\"")"
tg_check "the first resume's key replays its bytes on A" cmp -s "$(tg_saved_body r1)" "$TG_BODY_FILE"

# ---- concurrent reviews on both instances, and resumes on both -------------------------------

ev a "$(req 1.0.1 ',"idempotency_key":"e2"')"
tg_jget ID2 'j["approval_id"]'
tg_jget H2 'j["request_hash"]'
python3 - "${TG_PORTS[a]}" "${TG_PORTS[b]}" "$ID2" "$H2" >"$TG_TMP/conc.out" 2>&1 <<'PY2'
import json, sys, pgload
a, b, aid, h = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
jobs = [((a, b)[i % 2], "POST", "/v1/approvals/%s/approve" % aid, {"request_hash": h}, "tok-rm%d" % i)
        for i in range(1, 7)]
res = pgload.fire(jobs, 6)
st = [r[0] for r in res]
ok = [json.loads(r[2]) for r in res if r[0] == 200]
codes = [pgload.error_code(r[2]) for r in res if r[0] != 200]
print("statuses", st, "codes", codes)
assert st.count(200) == 2, st
assert [x["status"] for x in ok].count("approved") == 1, ok
assert all(c == "approval_closed" for c in codes), codes
PY2
tg_eq "$?" 0 "six reviews on both instances at once: two count, approved once ($(tail -3 "$TG_TMP/conc.out" | tr '\n' ' '))"

# ---- restarts: the state stands ----------------------------------------------------------------

tg_stop a
tg_stop b
pg_serve a --tokens "$TOKENS" --policy "$POLICY"
pg_serve b --tokens "$TOKENS" --policy "$POLICY"
ev b "$(req 1.0.0 ",\"idempotency_key\":\"r3\",\"approval_id\":\"$ID\"")"
tg_expect_error 409 approval_consumed "after both restarted: still consumed"
ev b "$(req 1.0.1 ",\"idempotency_key\":\"r4\",\"approval_id\":\"$ID2\"")"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and len(j['receipt']['approvals']) == 2" \
    "after both restarted: the approved one resumes once on B"
ev a "$(req 1.0.1 ",\"idempotency_key\":\"r5\",\"approval_id\":\"$ID2\"")"
tg_expect_error 409 approval_consumed "and not again on A"
tg_stop a
tg_stop b
run verify ledger verify --database-url "$TG_PG_URL" --key "$TG_KEY"
tg_eq "$rc" 0 "ledger verify --database-url accepts the approval records ($(tail -2 "$TG_TMP/verify.out" | tr '\n' ' '))"
tg_done
