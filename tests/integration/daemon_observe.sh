#!/usr/bin/env bash
# daemon_observe.sh — observe (shadow) mode, SPEC §11.1, against the real daemon: the matrix
# surface mode {enforce, observe} x request {none, observe, report} x token allowed to
# observe {yes, no} x kernel outcome {PERMIT, DENY, SILENCE, ESCALATE}, on /v1/evaluate and
# /execute
# (status, effective decision, receipt decision and executionMode, what /v1/verify says,
# the stored receipt); a refusal (403 observe_not_allowed) consumes nothing; replays rebuild
# the same bytes, also after a restart; the metrics by mode and would-decisions; an
# Action-shaped client (POST /execute, keys.json with the Bearer, Ed25519 over receiptHash);
# and the invariant over 10,000 random requests: no PERMIT receipt is signed in observe mode
# unless enforce mode gives PERMIT for the same request; POST /protocol/verify-signature
# (SPEC §14). Also run on --store postgres
# (integration_pg_daemon_observe).
source "$(dirname "$0")/lib/daemon.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOT
[
  {"tenant": "acme", "token_sha256": "$(sha tok-obs)", "subject": "observer", "observe": true},
  {"tenant": "acme", "token_sha256": "$(sha tok-plain)", "subject": "plain"}
]
EOT
chmod 600 "$TOKENS"
# The test policy with an escalate rule (SPEC §11.2: a low-risk transfer over 5000 needs an
# approval; the high-risk deny still wins above 10000), plus payments.observed
# (payments.charge in observe mode) and an Action-shaped surface (deploy.production: only
# main may deploy).
POLICY=$TG_TMP/policy.json
python3 - "$TG_POLICY" "$POLICY" <<'PY'
import copy, json, sys
p = json.load(open(sys.argv[1]))
p["surfaces"]["payments.charge"]["rules"].append(
    {"id": "large-transfer", "effect": "escalate", "reason": "LARGE_TRANSFER",
     "when": [{"field": "context.amount", "op": "gt", "value": 5000}],
     "approval": {"approvers": ["@treasury"]}})
s = copy.deepcopy(p["surfaces"]["payments.charge"])
s["mode"] = "observe"
p["surfaces"]["payments.observed"] = s
p["surfaces"]["deploy.production"] = {
    "tier": 3, "required_context": {"repository": "string", "branch": "string"},
    "rules": [{"id": "main-only", "effect": "permit",
               "when": [{"field": "context.branch", "op": "eq", "value": "main"}]}],
    "default": "deny"}
json.dump(p, open(sys.argv[2], "w"))
PY
tg_std_args main
ARGS=("${TG_STD_ARGS[@]}" --tokens "$TOKENS" --policy "$POLICY")
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"
tg_fetch_keys "$TG_TMP/keys.json"

# ---- the matrix (one python client; it prints one line per failed check) ---------------

python3 - "$TG_URL" "$TG_TMP/keys.json" >"$TG_TMP/matrix.out" 2>&1 <<'PY'
import base64, http.client, json, re, sys, urllib.parse
from cryptography.hazmat.primitives.serialization import load_pem_public_key
url, keys_path = sys.argv[1], sys.argv[2]
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
keys = {k["keyId"]: k for k in json.load(open(keys_path))["keys"]}
fails, checks = [], 0
def check(ok, what):
    global checks
    checks += 1
    if not ok:
        fails.append(what)
def post(path, body, token):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                 "Authorization": "Bearer " + token})
    r = conn.getresponse()
    data = r.read()
    return r.status, json.loads(data) if data else None
REQ = {
    "PERMIT": {"action": "transfer_funds", "actor": "agent.billing",
               "context": {"amount": 2500, "currency": "USD"},
               "signals": {"riskScore": 0.12, "rsdSpike": False}},
    "DENY": {"action": "transfer_funds", "actor": "agent.billing",
             "context": {"amount": 20000, "currency": "USD"}, "signals": {"riskScore": 0.2}},
    "SILENCE": {"action": "transfer_funds", "actor": "agent.billing",
                "context": {"currency": "USD"}},
    "ESCALATE": {"action": "transfer_funds", "actor": "agent.billing",
                 "context": {"amount": 7000, "currency": "USD"}, "signals": {"riskScore": 0.05}},
}
APPR = re.compile(r"appr_[0-9a-f]{32}")
n = 0
for surface, smode in (("payments.charge", "enforce"), ("payments.observed", "observe")):
    for rmode in (None, "observe", "report"):
        for allowed in (True, False):
            for kernel, base in REQ.items():
                for route in ("/v1/evaluate", "/execute"):
                    n += 1
                    body = dict(base, surface=surface, nonce="m-%d" % n)
                    if rmode is not None:
                        body["executionMode" if rmode == "observe" else "execution_mode"] = rmode
                    tok = "tok-obs" if allowed else "tok-plain"
                    label = "%s %s req=%s allowed=%s kernel=%s" % (route, smode, rmode, allowed, kernel)
                    st, j = post(route, body, tok)
                    observe = smode == "observe" or rmode is not None
                    if rmode is not None and smode != "observe" and not allowed:
                        check(st == 403 and j.get("error") == "observe_not_allowed",
                              label + ": 403 observe_not_allowed, got %s %s" % (st, j))
                        # nothing consumed: the same nonce still works for a token that may
                        st2, j2 = post(route, body, "tok-obs")
                        check(st2 == 200, label + ": the refused request's nonce is unused (%s)" % st2)
                        continue
                    if observe:
                        check(st == 200, label + ": 200, got %s" % st)
                        check(j["decision"] == "PERMIT" and j["enforcement"] == "NOT_ENFORCED"
                              and j["execution_mode"] == "observe"
                              and j["would_decision"] == kernel
                              and j["reason_code"] == "OBSERVE_MODE"
                              and isinstance(j.get("would_reason_code"), str),
                              label + ": observe response shape: %s" % j)
                        r = j.get("receipt")
                        check(r is not None and r["decision"] == kernel
                              and r["executionMode"] == "observe"
                              and r["reasonCode"] == j["would_reason_code"],
                              label + ": signed receipt with the true decision: %s" % r)
                        # an observed ESCALATE opens no approval (SPEC §11.2)
                        check("approval_id" not in j and "approval" not in j
                              and (r is None or "approvalId" not in r),
                              label + ": no approval in observe mode: %s" % j)
                    else:
                        want = 200 if route == "/v1/evaluate" or kernel == "PERMIT" else 403
                        check(st == want, label + ": status %s, got %s" % (want, st))
                        check(j["decision"] == kernel and "execution_mode" not in j
                              and "would_decision" not in j, label + ": enforce response %s" % j)
                        r = j.get("receipt")
                        check((r is None) == (kernel == "SILENCE"), label + ": receipt iff not SILENCE")
                        check(r is None or "executionMode" not in r, label + ": no executionMode")
                        if kernel == "ESCALATE":
                            check(j["enforcement"] == "PENDING_APPROVAL"
                                  and APPR.fullmatch(j.get("approval_id", "")) is not None
                                  and j.get("approval", {}).get("status") == "pending"
                                  and r["approvalId"] == j["approval_id"],
                                  label + ": ESCALATE opens an approval: %s" % j)
                        else:
                            check("approval_id" not in j and "approvalId" not in (r or {}),
                                  label + ": no approval: %s" % j)
                    if r is None:
                        continue
                    # the signature over the hex-decoded receiptHash, with keys.json
                    k = keys.get(r["authorityKeyId"])
                    ok = False
                    if k is not None:
                        try:
                            load_pem_public_key(k["publicKeyPem"].encode()).verify(
                                base64.b64decode(r["authoritySignature"]), bytes.fromhex(r["receiptHash"]))
                            ok = True
                        except Exception:
                            pass
                    check(ok, label + ": Ed25519 over receiptHash holds")
                    st, v = post("/v1/verify", j, "none")
                    want_auth = (not observe) and kernel == "PERMIT"
                    check(st == 200 and v["valid"] is True and v["authorizes"] is want_auth
                          and v["reason"] == ("observe_mode" if observe else
                                              "pending_approval" if kernel == "ESCALATE" else "valid"),
                          label + ": /v1/verify of the response: %s" % v)
                    st, v = post("/protocol/verify-receipt", r, "none")
                    check(st == 200 and v["valid"] is True and v["authorizes"] is want_auth,
                          label + ": /protocol/verify-receipt: %s" % v)
                    conn.request("GET", "/v1/receipts/" + j["execution_id"], headers={
                        "Authorization": "Bearer tok-plain"})
                    g = conn.getresponse()
                    gb = json.loads(g.read())
                    check(g.status == 200 and gb.get("receiptHash", gb.get("receipt", {}).get("receiptHash")) == r["receiptHash"],
                          label + ": the stored receipt is readable: %s" % g.status)
for f in fails:
    print("FAIL", f)
print("CHECKS", checks, "FAILED", len(fails))
sys.exit(1 if fails else 0)
PY
tg_eq "$?" 0 "the observe matrix ($(tail -1 "$TG_TMP/matrix.out")): $(grep -m5 FAIL "$TG_TMP/matrix.out")"

# ---- observe replays: the same bytes, on both routes, and after a restart ----------------

obs_body=$(tg_req_json deny ',"executionMode":"observe","idempotency_key":"obs-k1"')
tg_req POST /execute -H "Authorization: Bearer tok-obs" --json-body "$obs_body"
tg_expect_status 200 "an observe DENY on /execute"
tg_save first
tg_req POST /execute -H "Authorization: Bearer tok-obs" --json-body "$obs_body"
tg_expect_status 200 "its replay on /execute: still 200"
tg_expect_header Idempotent-Replayed true "the replay"
tg_check "the replay is the same bytes" cmp -s "$(tg_saved_body first)" "$TG_BODY_FILE"
sil_body=$(tg_req_json silence ',"executionMode":"observe","idempotency_key":"obs-k2"')
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-obs" --json-body "$sil_body"
tg_expect_py "j['would_decision'] == 'SILENCE' and j['receipt']['decision'] == 'SILENCE'" "an observe SILENCE is signed"
tg_save sil
tg_save_receipt "$TG_TMP/obs-receipt.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/obs-receipt.json" 2>&1)
tg_eq "$?:$out" "0:VALID; authorizes: false (observe_mode)" "trigguard verify: an observe receipt is valid and authorizes nothing"
# the request hash of a request without executionMode is what it always was
tg_req_json permit >"$TG_TMP/plain.json"
"$TG_BIN" check --policy "$POLICY" "$TG_TMP/plain.json" >"$TG_TMP/check.out" 2>&1
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-obs" --json-body "$(cat "$TG_TMP/plain.json")"
tg_jget PLAIN_HASH 'j["request_hash"]'
tg_check "no executionMode: the v1 request hash (trigguard check agrees)" grep -q "$PLAIN_HASH" "$TG_TMP/check.out"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-obs" --json-body "$(tg_req_json permit ',"executionMode":"observe"')"
tg_jget OBS_HASH 'j["request_hash"]'
tg_ne "$OBS_HASH" "$PLAIN_HASH" "executionMode is part of the request hash"

# ---- metrics ----------------------------------------------------------------------------

curl -s --max-time 5 "$TG_URL/metrics" >"$TG_TMP/metrics.txt"
tg_check "would-decisions by surface, decision and reason" \
    grep -q '^trigguard_would_decisions_total{surface="payments.observed",decision="DENY",reason="HIGH_RISK_SPEND"} [1-9]' "$TG_TMP/metrics.txt"
tg_check "would-decisions of a requested observe on an enforce surface" \
    grep -q '^trigguard_would_decisions_total{surface="payments.charge",decision="SILENCE",reason="[A-Z_]*"} [1-9]' "$TG_TMP/metrics.txt"
tg_check "decisions by mode: observe" grep -q '^trigguard_decisions_by_mode_total{mode="observe",decision="PERMIT"} [1-9]' "$TG_TMP/metrics.txt"
tg_check "decisions by mode: enforce" grep -q '^trigguard_decisions_by_mode_total{mode="enforce",decision="DENY"} [1-9]' "$TG_TMP/metrics.txt"

# ---- an Action-shaped client --------------------------------------------------------------

python3 - "$TG_URL" >"$TG_TMP/action.out" 2>&1 <<'PY'
import base64, json, sys, urllib.request
from cryptography.hazmat.primitives.serialization import load_pem_public_key
url = sys.argv[1]
H = {"Authorization": "Bearer tok-obs", "Content-Type": "application/json"}
body = {"surface": "deploy.production", "actorId": "github-actions", "executionMode": "observe",
        "context": {"repository": "acme/app", "branch": "feature/x"}}
req = urllib.request.Request(url + "/execute", json.dumps(body).encode(), H, method="POST")
with urllib.request.urlopen(req) as r:
    assert r.status == 200, r.status
    j = json.load(r)
assert j["would_decision"] == "DENY" and j["decision"] == "PERMIT", j
rc = j["receipt"]
req = urllib.request.Request(url + "/.well-known/trigguard/keys.json", headers={"Authorization": "Bearer tok-obs"})
with urllib.request.urlopen(req) as r:
    keys = {k["keyId"]: k for k in json.load(r)["keys"]}
key = load_pem_public_key(keys[rc["authorityKeyId"]]["publicKeyPem"].encode())
key.verify(base64.b64decode(rc["authoritySignature"]), bytes.fromhex(rc["receiptHash"]))
print("OK", j["would_decision"], j["would_reason_code"])
PY
tg_eq "$?:$(head -c 60 "$TG_TMP/action.out")" "0:$(head -c 60 "$TG_TMP/action.out" | grep '^OK DENY' || echo OK DENY)" \
    "the Action-shaped client: 200, would_decision DENY, the receipt's signature holds"

# ---- the invariant over a random corpus --------------------------------------------------

python3 - "$TG_URL" >"$TG_TMP/corpus.out" 2>&1 <<'PY'
import http.client, json, random, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
rnd = random.Random(22)
def post(body):
    conn.request("POST", "/v1/evaluate", json.dumps(body),
                 {"Content-Type": "application/json", "Authorization": "Bearer tok-obs"})
    r = conn.getresponse()
    return r.status, json.loads(r.read())
def one():
    b = {"surface": "payments.charge", "action": "transfer_funds"}
    a = rnd.choice(["agent.billing", "agent.treasury", "eve", None])
    if a: b["actor"] = a
    ctx = {}
    x = rnd.random()
    if x < 0.8: ctx["amount"] = rnd.choice([rnd.randint(0, 20000), rnd.random() * 15000, "ten"])
    if rnd.random() < 0.9: ctx["currency"] = "USD"
    b["context"] = ctx
    sig = {}
    if rnd.random() < 0.8: sig["riskScore"] = rnd.choice([rnd.random(), 1.5, 0.05])
    if rnd.random() < 0.5: sig["rsdSpike"] = rnd.random() < 0.3
    if rnd.random() < 0.05: sig["unknownThing"] = 0.1
    if sig: b["signals"] = sig
    return b
n = 5000
bad = counts = 0
outcomes = {}
for i in range(n):
    b = one()
    st_e, e = post(b)
    st_o, o = post(dict(b, executionMode=rnd.choice(["observe", "report"])))
    if st_e != 200 or st_o != 200:
        print("status", st_e, st_o, b); bad += 1; continue
    od = o["receipt"]["decision"]
    outcomes[od] = outcomes.get(od, 0) + 1
    # observe PERMIT receipts are a subset of enforce PERMITs: and the decision is the same
    if (od == "PERMIT" and e["decision"] != "PERMIT") or od != e["decision"] or o["decision"] != "PERMIT":
        print("MISMATCH", b, e["decision"], od); bad += 1
print("REQUESTS", 2 * n, "OUTCOMES", json.dumps(outcomes, sort_keys=True), "BAD", bad)
sys.exit(1 if bad or len(outcomes) < 3 else 0)
PY
tg_eq "$?" 0 "10,000 requests: observe PERMIT receipts only where enforce permits ($(tail -1 "$TG_TMP/corpus.out"))"

# ---- the ledger ---------------------------------------------------------------------------

if [ "${TG_STORE:-${TG_TEST_STORE:-file}}" != postgres ]; then
    tg_stop main
    "$TG_BIN" ledger verify "$TG_TMP/ledger-main" --key "$TG_KEY" >"$TG_TMP/verify.out" 2>&1
    tg_eq "$?" 0 "ledger verify: observe receipts, SILENCE ones included, verify ($(tail -1 "$TG_TMP/verify.out"))"
    "$TG_BIN" ledger dump "$TG_TMP/ledger-main" >"$TG_TMP/dump.out" 2>&1
    python3 - "$TG_TMP/dump.out" >"$TG_TMP/dumpcheck.out" 2>&1 <<'PY'
import json, sys
obs_sil = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r.get("payload")
    if isinstance(p, dict) and p.get("executionMode") == "observe" and p.get("decision") == "SILENCE":
        assert "receiptHash" in p, r
        obs_sil += 1
print("observe SILENCE receipts:", obs_sil)
sys.exit(0 if obs_sil > 0 else 1)
PY
    tg_eq "$?" 0 "the ledger holds signed observe SILENCE receipts: $(cat "$TG_TMP/dumpcheck.out" | tail -1)"
else
    tg_stop main
fi
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"
tg_req POST /execute -H "Authorization: Bearer tok-obs" --json-body "$obs_body"
tg_expect_status 200 "after a restart: the observe replay on /execute"
tg_check "after a restart: the same bytes" cmp -s "$(tg_saved_body first)" "$TG_BODY_FILE"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-obs" --json-body "$sil_body"
tg_check "after a restart: the observe SILENCE replays the same bytes" cmp -s "$(tg_saved_body sil)" "$TG_BODY_FILE"

# ---- POST /protocol/verify-signature (SPEC §14) ---------------------------------------------

RH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["receiptHash"])' "$TG_TMP/obs-receipt.json")
RS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["authoritySignature"])' "$TG_TMP/obs-receipt.json")
RK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["authorityKeyId"])' "$TG_TMP/obs-receipt.json")
vsig() { tg_req POST /protocol/verify-signature --json-body "$1"; }
vsig "{\"receiptHash\":\"$RH\",\"authoritySignature\":\"$RS\",\"authorityKeyId\":\"$RK\"}"
tg_expect_status 200 "verify-signature: a good signature"
tg_expect_py "j == {'type':'verify_signature','protocol':'trigguard/v1','protocol_version':'1.0.0','valid':True,'reason':'valid'}" \
    "verify-signature: valid, with the protocol members"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"$RS\",\"keyId\":\"$RK\"}"
tg_expect_py "j['valid'] is True" "verify-signature: the aliases signature and keyId"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"$RS\"}"
tg_expect_py "j['valid'] is True" "verify-signature: without a key id, any loaded key"
OTHER=$(printf '%064d' 0)
vsig "{\"receiptHash\":\"$OTHER\",\"signature\":\"$RS\",\"keyId\":\"$RK\"}"
tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'bad_signature'" "verify-signature: another hash"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"$RS\",\"keyId\":\"nobody\"}"
tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'unknown_key'" "verify-signature: an unknown key id"
vsig "{\"receiptHash\":\"${RH^^}\",\"signature\":\"$RS\"}"
tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'malformed'" "verify-signature: upper-case hex"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"AAAA\"}"
tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'malformed'" "verify-signature: a short signature"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"$RS\",\"authoritySignature\":\"$RS\"}"
tg_expect_error 400 invalid_request "verify-signature: an alias given twice"
vsig "{\"receiptHash\":\"$RH\",\"signature\":\"$RS\",\"extra\":1}"
tg_expect_error 400 invalid_request "verify-signature: an unknown member"
vsig "{\"signature\":\"$RS\"}"
tg_expect_error 400 invalid_request "verify-signature: no receiptHash"
vsig "[1]"
tg_expect_error 400 invalid_request "verify-signature: not an object"
vsig "{"
tg_expect_error 400 invalid_json "verify-signature: not JSON"
tg_req POST /protocol/verify-signature -H "Content-Type: text/plain" --data-binary x
tg_expect_error 415 unsupported_media_type "verify-signature: not JSON content"
tg_req GET /protocol/capabilities
tg_expect_py "'POST /protocol/verify-signature' in j['endpoints']" "capabilities list verify-signature"

tg_done
