#!/usr/bin/env bash
# daemon_approvals.sh — ESCALATE approvals (SPEC §11.2) against the real daemon, black box:
# the ESCALATE outcome on /v1/evaluate (200) and /execute (403) and its replay; roles (an
# approver cannot evaluate, a caller cannot review); the happy path with two approvers of
# one group and the resumed PERMIT with approvalId and approvals; not_an_approver,
# already_reviewed, request_hash_mismatch, approval_closed, approval_consumed,
# approval_not_found and bad bodies; the list and its filters; tenant isolation; a deny ->
# DENY APPROVAL_DENIED; expiry by the timer without traffic (ttl_s) and past
# consume_within_s -> DENY APPROVAL_EXPIRED; a policy reload in each direction between the
# escalation and the resume; 10 concurrent reviews with required 2; kill -9 between the
# approval and the resume; /v1/verify and `trigguard check` on an ESCALATE; `trigguard ledger
# verify` on the resulting ledger. Also run on --store postgres (integration_pg_daemon_approvals).
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen
TOKENS=$TG_TMP/tokens.json
{
    echo '['
    echo "  {\"tenant\": \"acme\", \"token_sha256\": \"$(sha tok-caller)\", \"subject\": \"ci\"},"
    echo "  {\"tenant\": \"acme\", \"token_sha256\": \"$(sha tok-mallory)\", \"subject\": \"mallory\", \"role\": \"approver\", \"groups\": [\"ops\"]},"
    echo "  {\"tenant\": \"beta\", \"token_sha256\": \"$(sha tok-bcaller)\", \"subject\": \"beta-ci\"},"
    echo "  {\"tenant\": \"beta\", \"token_sha256\": \"$(sha tok-bappr)\", \"subject\": \"beta-rm\", \"role\": \"approver\", \"groups\": [\"release-managers\"]},"
    for i in 01 02 03 04 05 06 07 08 09 10; do
        sep=,
        [ "$i" == 10 ] && sep=
        echo "  {\"tenant\": \"acme\", \"token_sha256\": \"$(sha "tok-ap$i")\", \"subject\": \"ap$i\", \"role\": \"approver\", \"groups\": [\"release-managers\"]}$sep"
    done
    echo ']'
} >"$TOKENS"
chmod 600 "$TOKENS"

# Policy A: deploy.prod escalates service "api" to two release managers, denies "legacy",
# permits the rest; deploy.fast escalates everything to one, with short clocks for expiry.
# Policy B: the same without the escalate rule, and a deny for version 2.0.2 (the reloads).
POLICY=$TG_TMP/policy.json
python3 - "$TG_TMP" <<'PY'
import json, sys
d = sys.argv[1]
def policy(escalate):
    rules = [{"id": "freeze", "effect": "deny", "reason": "FROZEN_SERVICE",
              "when": [{"field": "context.service", "op": "eq", "value": "legacy"}]}]
    if escalate:
        rules.append({"id": "needs-two", "effect": "escalate", "reason": "TWO_PERSON_RULE",
                      "when": [{"field": "context.service", "op": "eq", "value": "api"}],
                      "approval": {"required": 2, "approvers": ["@release-managers"],
                                   "ttl_s": 120, "consume_within_s": 120}})
    else:
        rules.append({"id": "bad-build", "effect": "deny", "reason": "BAD_BUILD",
                      "when": [{"field": "context.version", "op": "eq", "value": "2.0.2"}]})
    return {
        "version": "approvals-" + ("a" if escalate else "b"),
        "authority": "trigguard-itest",
        "tiers": {"1": 0.3, "2": 0.6, "3": 0.8},
        "surfaces": {
            "deploy.prod": {"tier": 3, "required_context": {"service": "string", "version": "string"},
                            "rules": rules, "default": "permit"},
            "deploy.fast": {"tier": 3, "required_context": {"service": "string", "version": "string"},
                            "rules": [{"id": "one-look", "effect": "escalate",
                                       "when": [{"field": "context.service", "op": "eq", "value": "api"}],
                                       "approval": {"required": 1,
                                                    "approvers": ["@release-managers", "ap01"],
                                                    "ttl_s": 2, "consume_within_s": 1}}],
                            "default": "deny"},
        },
    }
json.dump(policy(True), open(d + "/policy-a.json", "w"))
json.dump(policy(False), open(d + "/policy-b.json", "w"))
PY
cp "$TG_TMP/policy-a.json" "$POLICY"
tg_std_args main
ARGS=("${TG_STD_ARGS[@]}" --tokens "$TOKENS" --policy "$POLICY")
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"

# req SURFACE SERVICE VERSION [extra members]: a deploy request.
req() {
    echo "{\"surface\":\"$1\",\"action\":\"deploy\",\"actor\":\"ci.deployer\",\"context\":{\"service\":\"$2\",\"version\":\"$3\"}${4:-}}"
}
# ev TOKEN BODY [PATH]: POST /v1/evaluate (or PATH) as TOKEN.
ev() { tg_req POST "${3:-/v1/evaluate}" -H "Authorization: Bearer $1" --json-body "$2"; }
# review TOKEN ID approve|deny HASH [extra members]
review() {
    tg_req POST "/v1/approvals/$2/$3" -H "Authorization: Bearer $1" \
        --json-body "{\"request_hash\":\"$4\"${5:-}}"
}
# get TOKEN ID
get() { tg_req GET "/v1/approvals/$2" -H "Authorization: Bearer $1"; }

# escalate VAR_ID VAR_HASH BODY LABEL: an ESCALATE on /v1/evaluate as the caller.
escalate() {
    ev tok-caller "$3"
    tg_expect_status 200 "$4: ESCALATE on /v1/evaluate"
    tg_expect_py "j['decision'] == 'ESCALATE' and j['enforcement'] == 'PENDING_APPROVAL'" "$4: decision ESCALATE, PENDING_APPROVAL"
    tg_jget "$1" 'j["approval_id"]'
    tg_jget "$2" 'j["request_hash"]'
}
APPROVAL_SHAPE="set(['approval_id','status','required','approvals','expires_at','created_at','request_hash','surface','rule','reason_code','escalation_execution_id','approvers']) <= set(a)"

# ---- the ESCALATE outcome --------------------------------------------------------------

E1=$(req deploy.prod api 2.0.1 ',"idempotency_key":"esc-1"')
escalate A1 H1 "$E1" "happy path"
tg_save esc1
tg_expect_py "re.fullmatch(r'appr_[0-9a-f]{32}', j['approval_id']) is not None" "approval_id is appr_ + 32 hex"
tg_expect_py "j['reason_code'] == 'TWO_PERSON_RULE' and hex64(j['request_hash']) and is_exec_id(j['execution_id']) and j['policy_version'] == 'approvals-a'" \
    "the usual members: reason_code (the rule's reason), request_hash, execution_id, policy_version"
tg_expect_py "(lambda a: $APPROVAL_SHAPE and a['approval_id'] == j['approval_id'] and a['status'] == 'pending' and a['required'] == 2 and a['approvals'] == [] and a['request_hash'] == j['request_hash'] and a['surface'] == 'deploy.prod' and a['rule'] == 'needs-two' and a['reason_code'] == 'TWO_PERSON_RULE' and a['escalation_execution_id'] == j['execution_id'] and a['approvers'] == ['@release-managers'])(j['approval'])" \
    "the approval object: pending, required 2, no approvals, bound to the request"
tg_expect_py "iso(j['approval']['expires_at']) > iso(j['approval']['created_at'])" "expires_at after created_at"
tg_expect_py "j['receipt']['decision'] == 'ESCALATE' and j['receipt']['approvalId'] == j['approval_id'] and 'approvals' not in j['receipt']" \
    "the signed receipt: decision ESCALATE with approvalId"
EXEC1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execution_id"])' "$(tg_saved_body esc1)")
ev tok-caller "$E1"
tg_expect_status 200 "the escalation replayed"
tg_expect_header Idempotent-Replayed true "the escalation replayed"
tg_check "the replay is the same bytes" cmp -s "$(tg_saved_body esc1)" "$TG_BODY_FILE"

tg_req POST /v1/verify --json-body "$(cat "$(tg_saved_body esc1)")"
tg_expect_py "s == 200 and j['valid'] is True and j['authorizes'] is False and j['reason'] == 'pending_approval'" \
    "/v1/verify: an ESCALATE receipt is valid and authorizes nothing"

ev tok-caller "$(req deploy.prod api 2.0.1 ',"idempotency_key":"esc-1x"')" /execute
tg_expect_status 403 "ESCALATE on /execute"
tg_expect_py "j['decision'] == 'ESCALATE' and j['enforcement'] == 'PENDING_APPROVAL' and j['approval']['status'] == 'pending' and j['receipt']['approvalId'] == j['approval_id']" \
    "/execute's 403 carries the same body shape"

ev tok-ap01 "$(req deploy.prod web 1.0.0)"
tg_expect_error 403 role_not_allowed "an approver token cannot evaluate"
ev tok-ap01 "$(req deploy.prod web 1.0.0)" /execute
tg_expect_error 403 role_not_allowed "an approver token cannot /execute"

req deploy.prod api 2.0.1 >"$TG_TMP/check.json"
"$TG_BIN" check --policy "$POLICY" "$TG_TMP/check.json" >"$TG_TMP/check.out" 2>&1
tg_eq "$?" 5 "trigguard check: ESCALATE exits 5"
tg_check "trigguard check prints ESCALATE" grep -q ESCALATE "$TG_TMP/check.out"

# ---- reading it -------------------------------------------------------------------------

get tok-caller "$A1"
tg_expect_status 200 "GET by the tenant's caller"
tg_expect_py "(lambda a: $APPROVAL_SHAPE and a['approval_id'] == '$A1' and a['status'] == 'pending')(j)" "GET: the approval object"
get tok-ap05 "$A1"
tg_expect_status 200 "GET by the tenant's approver"
get tok-bcaller "$A1"
tg_expect_error 404 approval_not_found "GET by another tenant's caller: 404"
get tok-bappr "$A1"
tg_expect_error 404 approval_not_found "GET by another tenant's approver: 404"
get tok-caller "appr_00000000000000000000000000000000"
tg_expect_error 404 approval_not_found "GET of an unknown id"
tg_req GET /v1/approvals/appr_x
tg_expect_status 401 "GET without a token"

# ---- who may review ------------------------------------------------------------------------

review tok-caller "$A1" approve "$H1"
tg_expect_error 403 role_not_allowed "the caller reviewing its own escalation"
review tok-mallory "$A1" approve "$H1"
tg_expect_error 403 not_an_approver "an approver whose groups the rule does not list"
review tok-bappr "$A1" approve "$H1"
tg_expect_error 404 approval_not_found "another tenant's approver"
review tok-ap01 "$A1" approve "$(printf '%064d' 0)"
tg_expect_error 422 request_hash_mismatch "a review bound to another request hash"
review tok-ap01 appr_00000000000000000000000000000000 approve "$H1"
tg_expect_error 404 approval_not_found "a review of an unknown approval"
tg_req POST "/v1/approvals/$A1/approve" -H "Authorization: Bearer tok-ap01" --json-body '{"comment":"no hash"}'
tg_expect_status 400 "a review without request_hash"
tg_req POST "/v1/approvals/$A1/approve" -H "Authorization: Bearer tok-ap01" --json-body "{\"request_hash\":\"$H1\",\"extra\":1}"
tg_expect_status 400 "a review with an unknown member"
tg_req POST "/v1/approvals/$A1/approve" -H "Authorization: Bearer tok-ap01" --json-body "{\"request_hash\":\"$H1\""
tg_expect_status 400 "a review that is not JSON"
review tok-ap01 "$A1" approve "$H1" ",\"comment\":\"$(head -c 1025 /dev/zero | tr '\0' c)\""
tg_expect_status 400 "a comment over 1024 bytes"
get tok-caller "$A1"
tg_expect_py "j['status'] == 'pending' and j['approvals'] == []" "none of the refused reviews counted"

# ---- resume while pending -----------------------------------------------------------------

ev tok-caller "$(req deploy.prod api 2.0.1 ",\"idempotency_key\":\"res-1a\",\"approval_id\":\"$A1\"")"
tg_expect_status 200 "resume while pending"
tg_expect_py "j['decision'] == 'ESCALATE' and j['approval_id'] == '$A1' and j['request_hash'] == '$H1'" \
    "resume while pending: ESCALATE again with the same approval_id (approval_id is not in the hash)"

# ---- the happy path -----------------------------------------------------------------------

review tok-ap01 "$A1" approve "$H1" ',"comment":"looks good"'
tg_expect_status 200 "the first approval"
tg_expect_py "j['status'] == 'pending' and len(j['approvals']) == 1 and j['approvals'][0]['subject'] == 'ap01' and j['approvals'][0]['decision'] == 'approve'" \
    "after one of two: pending, one approval by ap01"
review tok-ap01 "$A1" approve "$H1"
tg_expect_error 409 already_reviewed "the same subject twice"
review tok-ap01 "$A1" deny "$H1"
tg_expect_error 409 already_reviewed "the same subject denying after approving"
review tok-ap02 "$A1" approve "$H1"
tg_expect_status 200 "the second approval"
tg_expect_py "j['status'] == 'approved' and [a['subject'] for a in j['approvals']] == ['ap01', 'ap02']" "after two: approved"
review tok-ap03 "$A1" approve "$H1"
tg_expect_error 409 approval_closed "a third review of an approved approval"

ev tok-bcaller "$(req deploy.prod api 2.0.1 ",\"idempotency_key\":\"res-b\",\"approval_id\":\"$A1\"")"
tg_expect_error 422 request_hash_mismatch "another tenant resuming with it"
ev tok-caller "$(req deploy.prod api 2.0.9 ",\"idempotency_key\":\"res-other\",\"approval_id\":\"$A1\"")"
tg_expect_error 422 request_hash_mismatch "another request resuming with it"

R1=$(req deploy.prod api 2.0.1 ",\"idempotency_key\":\"res-1\",\"approval_id\":\"$A1\"")
ev tok-caller "$R1" /execute
tg_expect_status 200 "the resume on /execute: PERMIT"
tg_save res1
tg_expect_py "j['decision'] == 'PERMIT' and j['request_hash'] == '$H1' and j['approval_id'] == '$A1' and j['approval']['status'] == 'consumed'" \
    "the resumed PERMIT names the approval, now consumed"
tg_expect_py "j['receipt']['decision'] == 'PERMIT' and j['receipt']['approvalId'] == '$A1' and [(a['subject'], a['decision']) for a in j['receipt']['approvals']] == [('ap01','approve'), ('ap02','approve')] and all(set(a) == {'at','decision','subject'} for a in j['receipt']['approvals'])" \
    "the PERMIT receipt carries approvalId and approvals [{at, decision, subject}]"
tg_req POST /v1/verify --json-body "$(cat "$(tg_saved_body res1)")"
tg_expect_py "j['valid'] is True and j['authorizes'] is True" "/v1/verify: the resumed PERMIT authorizes"
ev tok-caller "$R1" /execute
tg_expect_header Idempotent-Replayed true "the resume replayed with its key"
tg_check "the resume replay is the same bytes" cmp -s "$(tg_saved_body res1)" "$TG_BODY_FILE"
ev tok-caller "$(req deploy.prod api 2.0.1 ",\"idempotency_key\":\"res-1b\",\"approval_id\":\"$A1\"")"
tg_expect_error 409 approval_consumed "a second resume with a new key"
get tok-caller "$A1"
tg_expect_py "j['status'] == 'consumed'" "GET: consumed"
review tok-ap04 "$A1" deny "$H1"
tg_expect_error 409 approval_closed "a review of a consumed approval"

# ---- a deny -------------------------------------------------------------------------------

escalate A2 H2 "$(req deploy.prod api 2.0.5 ',"idempotency_key":"esc-2"')" "deny path"
review tok-ap01 "$A2" approve "$H2"
review tok-ap03 "$A2" deny "$H2" ',"comment":"not today"'
tg_expect_status 200 "one deny"
tg_expect_py "j['status'] == 'denied'" "one deny: denied"
review tok-ap04 "$A2" approve "$H2"
tg_expect_error 409 approval_closed "an approval after the deny"
ev tok-caller "$(req deploy.prod api 2.0.5 ",\"idempotency_key\":\"res-2\",\"approval_id\":\"$A2\"")"
tg_expect_status 200 "resume after a deny (/v1/evaluate)"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'APPROVAL_DENIED'" "resume after a deny: DENY APPROVAL_DENIED"

# ---- the list -----------------------------------------------------------------------------

escalate A3 H3 "$(req deploy.prod api 2.0.6 ',"idempotency_key":"esc-3"')" "list"
ev tok-bcaller "$(req deploy.prod api 9.9.9 ',"idempotency_key":"esc-b"')"
tg_jget AB 'j["approval_id"]'
tg_req GET "/v1/approvals?status=pending" -H "Authorization: Bearer tok-ap07"
tg_expect_status 200 "list pending"
tg_expect_py "isinstance(j['approvals'], list) and all(a['status'] == 'pending' for a in j['approvals']) and '$A3' in [a['approval_id'] for a in j['approvals']] and '$AB' not in [a['approval_id'] for a in j['approvals']] and '$A1' not in [a['approval_id'] for a in j['approvals']]" \
    "list pending: the tenant's pending ones only"
tg_expect_py "[a['approval_id'] for a in j['approvals']][0] == '$A3'" "list: newest first"
tg_req GET "/v1/approvals?status=pending&limit=1" -H "Authorization: Bearer tok-ap07"
tg_expect_py "s == 200 and len(j['approvals']) == 1" "list: limit 1"
tg_req GET "/v1/approvals?status=consumed" -H "Authorization: Bearer tok-ap07"
tg_expect_py "s == 200 and [a['approval_id'] for a in j['approvals']] == ['$A1']" "list consumed"
tg_req GET "/v1/approvals?status=denied" -H "Authorization: Bearer tok-ap07"
tg_expect_py "s == 200 and [a['approval_id'] for a in j['approvals']] == ['$A2']" "list denied"
tg_req GET "/v1/approvals?status=pending" -H "Authorization: Bearer tok-bappr"
tg_expect_py "s == 200 and [a['approval_id'] for a in j['approvals']] == ['$AB']" "list: beta sees only beta's"
tg_req GET "/v1/approvals" -H "Authorization: Bearer tok-ap07"
tg_expect_py "s == 200 and {'$A1', '$A2', '$A3'} <= {a['approval_id'] for a in j['approvals']} and '$AB' not in [a['approval_id'] for a in j['approvals']]" \
    "list without a status: every status, the tenant's only"
tg_req GET "/v1/approvals?status=sleeping" -H "Authorization: Bearer tok-ap07"
tg_expect_status 400 "list: an unknown status"
tg_req GET "/v1/approvals?status=pending&limit=0" -H "Authorization: Bearer tok-ap07"
tg_expect_status 400 "list: limit 0"
tg_req GET "/v1/approvals?status=pending&limit=101" -H "Authorization: Bearer tok-ap07"
tg_expect_status 400 "list: limit 101"
tg_req GET "/v1/approvals?status=pending" -H "Authorization: Bearer tok-caller"
tg_expect_error 403 role_not_allowed "list: a caller token"

# ---- expiry: by the timer, without traffic; and past consume_within_s ---------------------

escalate A4 H4 "$(req deploy.fast api 3.0.1 ',"idempotency_key":"esc-4"')" "ttl expiry"
escalate A5 H5 "$(req deploy.fast api 3.0.2 ',"idempotency_key":"esc-5"')" "consume_within expiry"
review tok-ap01 "$A5" approve "$H5"
tg_expect_py "s == 200 and j['status'] == 'approved'" "one approval of one required: approved"
sleep 3.5 # ttl_s 2 and consume_within_s 1 have passed; no request meanwhile
# The timer wrote the expiry by itself: counted before any request touched an approval
# (a read computes the status at its instant, so GET alone would not show the timer).
curl -s --max-time 5 "$TG_URL/metrics" >"$TG_TMP/metrics-exp.txt"
tg_check "the timer expired both without traffic: $(grep 'approval_events_total{event="expired"}' "$TG_TMP/metrics-exp.txt")" \
    grep -q '^trigguard_approval_events_total{event="expired"} [2-9]' "$TG_TMP/metrics-exp.txt"
get tok-caller "$A4"
tg_expect_py "s == 200 and j['status'] == 'expired'" "GET after ttl_s without traffic: expired"
review tok-ap02 "$A4" approve "$H4"
tg_expect_error 409 approval_closed "a review of an expired approval"
ev tok-caller "$(req deploy.fast api 3.0.1 ",\"idempotency_key\":\"res-4\",\"approval_id\":\"$A4\"")"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'APPROVAL_EXPIRED'" "resume after ttl_s: DENY APPROVAL_EXPIRED"
ev tok-caller "$(req deploy.fast api 3.0.2 ",\"idempotency_key\":\"res-5\",\"approval_id\":\"$A5\"")"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'APPROVAL_EXPIRED'" "resume past consume_within_s: DENY APPROVAL_EXPIRED"
tg_req GET "/v1/approvals?status=expired" -H "Authorization: Bearer tok-ap07"
tg_expect_py "s == 200 and '$A4' in [a['approval_id'] for a in j['approvals']]" "list expired"

# ---- 10 concurrent reviews, required 2 ------------------------------------------------------

escalate A6 H6 "$(req deploy.prod api 2.0.7 ',"idempotency_key":"esc-6"')" "concurrent"
python3 - "${TG_PORTS[main]}" "$A6" "$H6" >"$TG_TMP/conc.out" 2>&1 <<'PY'
import json, sys, pgload
port, aid, h = int(sys.argv[1]), sys.argv[2], sys.argv[3]
jobs = [(port, "POST", "/v1/approvals/%s/approve" % aid, {"request_hash": h}, "tok-ap%02d" % i)
        for i in range(1, 11)]
res = pgload.fire(jobs, 10)
st = [r[0] for r in res]
ok = [json.loads(r[2]) for r in res if r[0] == 200]
codes = [pgload.error_code(r[2]) for r in res if r[0] != 200]
print("statuses", st, "codes", codes)
assert st.count(200) == 2, st
assert [a["status"] for a in ok].count("approved") == 1, ok
assert all(c == "approval_closed" for c in codes), codes
PY
tg_eq "$?" 0 "10 concurrent reviews: two 200, approved once, eight 409 approval_closed ($(tail -3 "$TG_TMP/conc.out" | tr '\n' ' '))"
get tok-caller "$A6"
tg_expect_py "j['status'] == 'approved' and len(j['approvals']) == 2 and len({a['subject'] for a in j['approvals']}) == 2" \
    "exactly two approvals counted, by two subjects"

# Four resumes of the approved approval at once: one PERMIT, three 409 approval_consumed, and
# none of them waits for another (a resume that meets the consuming one answers from the
# stored state; sleeping on the event thread would hold back the winner's own answer).
python3 - "${TG_PORTS[main]}" "$A6" "$(req deploy.prod api 2.0.7 '')" >"$TG_TMP/conc2.out" 2>&1 <<'PY'
import json, sys, time, pgload
port, aid, body = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
jobs = [(port, "POST", "/v1/evaluate", dict(body, approval_id=aid, idempotency_key="cr-%d" % i),
         "tok-caller") for i in range(4)]
t0 = time.monotonic()
res = pgload.fire(jobs, 4)
took = time.monotonic() - t0
st = [r[0] for r in res]
print("statuses", st, "codes", [pgload.error_code(r[2]) for r in res if r[0] != 200], "took %.2f s" % took)
assert st.count(200) == 1 and st.count(409) == 3, st
assert [json.loads(r[2])["decision"] for r in res if r[0] == 200] == ["PERMIT"], res
assert all(pgload.error_code(r[2]) == "approval_consumed" for r in res if r[0] == 409), res
PY
tg_eq "$?" 0 "4 concurrent resumes: one PERMIT, three 409 approval_consumed ($(tail -3 "$TG_TMP/conc2.out" | tr '\n' ' '))"

# ---- a policy reload between the escalation and the resume, both ways -----------------------

escalate A7 H7 "$(req deploy.prod api 2.0.1 ',"idempotency_key":"esc-7","nonce":"n7"')" "reload, to permit"
escalate A8 H8 "$(req deploy.prod api 2.0.2 ',"idempotency_key":"esc-8"')" "reload, to deny"
P9=$(req deploy.prod api 2.0.3 ',"idempotency_key":"esc-9"')
cp "$TG_TMP/policy-b.json" "$POLICY"
tg_hup "$(tg_pid main)"
ev tok-caller "$(req deploy.prod api 2.0.1 ",\"idempotency_key\":\"res-7\",\"nonce\":\"n7b\",\"approval_id\":\"$A7\"")"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['policy_version'] == 'approvals-b' and 'approvalId' not in j['receipt']" \
    "escalate rule removed: the resume is the new policy's plain PERMIT"
ev tok-caller "$(req deploy.prod api 2.0.2 ",\"idempotency_key\":\"res-8\",\"approval_id\":\"$A8\"")"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'BAD_BUILD'" \
    "escalate rule removed: the resume is the new policy's DENY"
ev tok-caller "$P9"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "under policy B: a PERMIT"
tg_save p9
cp "$TG_TMP/policy-a.json" "$POLICY"
tg_hup "$(tg_pid main)"
ev tok-caller "$P9"
tg_check "escalate rule added: the PERMIT-era key replays its PERMIT" cmp -s "$(tg_saved_body p9)" "$TG_BODY_FILE"
ev tok-caller "$(req deploy.prod api 2.0.3 ',"idempotency_key":"esc-9b"')"
tg_expect_py "s == 200 and j['decision'] == 'ESCALATE' and j['approval']['status'] == 'pending'" \
    "escalate rule added: the same request now escalates"

# ---- kill -9 after the approval, before the resume -------------------------------------------

escalate AK HK "$(req deploy.prod api 2.0.8 ',"idempotency_key":"esc-k"')" "kill -9"
review tok-ap09 "$AK" approve "$HK"
review tok-ap10 "$AK" approve "$HK"
tg_expect_py "s == 200 and j['status'] == 'approved'" "approved just before the crash"
kill -KILL "$(tg_pid main)"
wait "$(tg_pid main)" 2>/dev/null
unset "TG_PIDS[main]"
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"
get tok-caller "$AK"
tg_expect_py "s == 200 and j['status'] == 'approved' and [a['subject'] for a in j['approvals']] == ['ap09', 'ap10']" \
    "after kill -9 and a restart: still approved by ap09 and ap10"
get tok-caller "$A1"
tg_expect_py "s == 200 and j['status'] == 'consumed'" "after the restart: the consumed one stays consumed"
ev tok-caller "$(req deploy.prod api 2.0.8 ",\"idempotency_key\":\"res-k1\",\"approval_id\":\"$AK\"")"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['approvalId'] == '$AK' and [a['subject'] for a in j['receipt']['approvals']] == ['ap09', 'ap10']" \
    "after kill -9 and a restart: the resume is one PERMIT with both approvals"
ev tok-caller "$(req deploy.prod api 2.0.8 ",\"idempotency_key\":\"res-k9\",\"approval_id\":\"$AK\"")"
tg_expect_error 409 approval_consumed "a second resume after the restart: 409"
ev tok-caller "$E1"
tg_check "after the restart: the escalation still replays its bytes" cmp -s "$(tg_saved_body esc1)" "$TG_BODY_FILE"
tg_req GET "/v1/receipts/$EXEC1" -H "Authorization: Bearer tok-caller"
tg_expect_status 200 "the ESCALATE receipt is stored"

# ---- the ledger ------------------------------------------------------------------------------

tg_stop main
if [ "${TG_TEST_STORE:-file}" == postgres ]; then
    "$TG_BIN" ledger verify --database-url "$(tg_pg_store_url main)" --key "$TG_KEY" >"$TG_TMP/verify.out" 2>&1
    rc=$?
    n4=$("$TG_PG_PSQL" "$(tg_pg_store_url main)" -X -At -c "select count(*) from tg_records where type = 4" 2>&1)
else
    "$TG_BIN" ledger verify "$TG_TMP/ledger-main" --key "$TG_KEY" >"$TG_TMP/verify.out" 2>&1
    rc=$?
    n4=$("$TG_BIN" ledger dump "$TG_TMP/ledger-main" 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if json.loads(l).get("type") in (4, "approval")))')
fi
tg_eq "$rc" 0 "ledger verify passes with the approvals ($(tail -2 "$TG_TMP/verify.out" | tr '\n' ' '))"
# reviews: A1 2, A2 2, A5 1, A6 2, AK 2 (= 9); the expiry of A4 (the timer's)
tg_check "the ledger holds the reviews and expiries as approval records (got $n4)" test "${n4:-0}" -ge 10
tg_done
