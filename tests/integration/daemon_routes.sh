#!/usr/bin/env bash
# daemon_routes.sh — every route of SPEC §3 against the real daemon, with the status codes
# and error bodies each one can produce, receipts verified offline against keys.json.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args main
DECIDE_PORT=$(tg_free_port)
tg_start main TG_DECIDE_PORT="$DECIDE_PORT" -- "${TG_STD_ARGS[@]}"
POLICY_HASH=$("$TG_BIN" policy check "$TG_POLICY" | sed -n 's/.*hash \([0-9a-f]\{64\}\).*/\1/p')
[ ${#POLICY_HASH} -eq 64 ] || tg_die "cannot read the test policy hash from trigguard policy check"

# ---- read-only endpoints ------------------------------------------------------------

tg_req GET /healthz
tg_expect_status 200 "GET /healthz"
tg_expect_py 'j == {"status": "ok"}' "/healthz body"
tg_req HEAD /healthz -I
tg_expect_status 200 "HEAD /healthz"

tg_req GET /readyz
tg_expect_status 200 "GET /readyz with policy, key and ledger"
tg_expect_py 'j["ready"] is True and j["policy"] is True and j["signing_key"] is True and j["ledger"] is True' "/readyz body"

tg_req GET /version
tg_expect_status 200 "GET /version"
tg_expect_py "j['engine'] == 'trigguard/0.1.0' and j['protocol'] == 'trigguard/v1' and j['policy_version'] == 'itest-1' and j['policy_hash'] == '$POLICY_HASH' and isinstance(j.get('build_commit'), str) and isinstance(j.get('version'), str)" \
    "/version: engine, protocol, policy version and hash, build commit"

tg_req GET /protocol/capabilities
tg_expect_status 200 "GET /protocol/capabilities"
tg_expect_py "j['protocol'] == 'trigguard/v1' and j['decisions'] == ['PERMIT','DENY','SILENCE','ESCALATE'] and j['algorithms']['signature'] == 'Ed25519' and sorted(s['name'] for s in j['surfaces']) == ['deploy.release','example','payments.charge'] and {s['name']: s['tier'] for s in j['surfaces']}['example'] == 3 and all(e in j['endpoints'] for e in ['POST /v1/evaluate','POST /execute','POST /decide','POST /v1/verify','POST /verify-receipt','POST /protocol/verify-receipt','GET /.well-known/trigguard/keys.json','GET /metrics','GET /v1/approvals','POST /v1/approvals/{id}/approve'])" \
    "capabilities: surfaces of the loaded policy, decisions, algorithms, endpoints"

tg_req GET /.well-known/trigguard/keys.json
tg_expect_status 200 "GET keys.json"
tg_expect_header Cache-Control "public, max-age=300" "keys.json"
tg_expect_py "j['protocol'] == 'trigguard/v1' and j['authority'] == 'trigguard-itest' and len(j['keys']) == 1 and j['keys'][0]['keyId'] == 'itest-key-1' and j['keys'][0]['algorithm'] == 'Ed25519' and j['keys'][0]['status'] == 'active' and j['keys'][0]['publicKeyPem'].startswith('-----BEGIN PUBLIC KEY-----\n') and 'PRIVATE' not in b.decode()" \
    "keys.json: one active Ed25519 key, public PEM only"
cp "$TG_BODY_FILE" "$TG_TMP/keys.json"
# The served key is the one we generated: compare with `trigguard keys KEY.pem`.
"$TG_BIN" keys "$TG_KEY" >"$TG_TMP/keys-cli.json" 2>&1 || tg_fail "trigguard keys failed: $(cat "$TG_TMP/keys-cli.json")"
tg_check "keys.json public key equals the key file's public key" python3 -c '
import json,sys
a=json.load(open(sys.argv[1]))["keys"][0]["publicKeyPem"]; b=json.load(open(sys.argv[2]))["keys"][0]["publicKeyPem"]
sys.exit(a!=b)' "$TG_TMP/keys.json" "$TG_TMP/keys-cli.json"

# ---- X-Request-Id ---------------------------------------------------------------------

tg_req GET /healthz -H "X-Request-Id: itest-req-42"
tg_expect_header X-Request-Id "itest-req-42" "caller's X-Request-Id is echoed"
tg_req GET /healthz
RID1=$(tg_header X-Request-Id)
tg_req GET /healthz
RID2=$(tg_header X-Request-Id)
tg_check "a request id is generated when none is given" test -n "$RID1"
tg_ne "$RID1" "$RID2" "generated request ids differ"
tg_req GET /no/such/route -H "X-Request-Id: itest-404"
tg_expect_error 404 not_found "unknown path"
tg_expect_header X-Request-Id "itest-404" "404 echoes X-Request-Id"
tg_expect_py 'j["request_id"] == "itest-404"' "error body carries the caller's request id"
# A request id with a space or a quote cannot be echoed (header/log injection).
tg_req GET /healthz -H 'X-Request-Id: bad id"x'
tg_ne "$(tg_header X-Request-Id)" 'bad id"x' "an unsafe X-Request-Id is replaced"
tg_check "the replacement request id is not empty" test -n "$(tg_header X-Request-Id)"
LONG_RID=$(printf 'r%.0s' $(seq 1 200))
tg_req GET /healthz -H "X-Request-Id: $LONG_RID"
tg_ne "$(tg_header X-Request-Id)" "$LONG_RID" "an over-long X-Request-Id is replaced"

# ---- POST /v1/evaluate: the three decisions -----------------------------------------

tg_post /v1/evaluate "$(tg_req_json permit)" -H "X-Request-Id: itest-eval-1"
tg_expect_status 200 "evaluate PERMIT"
tg_expect_header X-Request-Id "itest-eval-1" "evaluate echoes X-Request-Id"
tg_expect_py "j['decision'] == 'PERMIT' and j['enforcement'] == 'EXECUTED' and j['reason_code'] == 'NO_POLICY_VIOLATION' and is_exec_id(j['execution_id']) and hex64(j['request_hash']) and j['policy_version'] == 'itest-1' and 'trace' not in j and h['content-type'].startswith('application/json')" \
    "evaluate PERMIT body (SPEC §3.2)"
tg_expect_py "(lambda r: r['protocolVersion'] == 'trigguard/v1' and r['executionId'] == j['execution_id'] and r['tenantId'] == 'acme' and r['surface'] == 'payments.charge' and r['action'] == 'transfer_funds' and r['actorId'] == 'agent.billing' and r['decision'] == 'PERMIT' and r['reasonCode'] == 'NO_POLICY_VIOLATION' and r['requestHash'] == j['request_hash'] and hex64(r['executionContextHash']) and r['policyVersion'] == 'itest-1' and r['policyHash'] == '$POLICY_HASH' and hex64(r['protocolFingerprint']) and r['engineVersion'] == 'trigguard/0.1.0' and r['authorityId'] == 'trigguard-itest' and r['authorityKeyId'] == 'itest-key-1' and hex64(r['receiptHash']) and 'subjectDigest' not in r and 'prevReceiptHash' not in r and None not in r.values())(j['receipt'])" \
    "PERMIT receipt fields (SPEC §5)"
tg_expect_py "(lambda r: __import__('datetime').datetime.fromisoformat(r['expiresAt'].replace('Z','+00:00')) - __import__('datetime').datetime.fromisoformat(r['timestamp'].replace('Z','+00:00')) == __import__('datetime').timedelta(seconds=600))(j['receipt'])" \
    "expiresAt = timestamp + 600 s (default --receipt-ttl)"
tg_save permit
tg_save_receipt "$TG_TMP/receipt-permit.json"
tg_jget PERMIT_EXEC 'j["execution_id"]'
tg_jget PERMIT_HASH 'j["request_hash"]'

# The executionContextHash is the SHA-256 of the canonical context (trigguard canon).
CTX_HASH=$(printf '%s' '{"currency":"USD","amount":2500}' | "$TG_BIN" canon --sha256)
tg_expect_py "j['receipt']['executionContextHash'] == '$CTX_HASH'" \
    "executionContextHash = SHA-256 of the canonical context"

tg_post /v1/evaluate "$(tg_req_json deny)"
tg_expect_status 200 "evaluate DENY is still HTTP 200"
tg_expect_py "j['decision'] == 'DENY' and j['enforcement'] == 'BLOCKED' and j['reason_code'] == 'HIGH_RISK_SPEND' and j['receipt']['decision'] == 'DENY' and j['receipt']['reasonCode'] == 'HIGH_RISK_SPEND'" \
    "DENY HIGH_RISK_SPEND with a signed receipt"
tg_save_receipt "$TG_TMP/receipt-deny.json"
tg_jget DENY_EXEC 'j["execution_id"]'

tg_post /v1/evaluate '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.mallory","context":{"amount":5,"currency":"USD"}}'
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'ACTOR_NOT_AUTHORIZED' and 'receipt' in j" "DENY ACTOR_NOT_AUTHORIZED"
tg_post /v1/evaluate '{"surface":"deploy.release","action":"ship","actor":"ci","context":{"target":"prod","version":"1.2.3"}}'
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'SURFACE_FROZEN'" "DENY SURFACE_FROZEN"
tg_post /v1/evaluate "$(tg_req_json permit | sed 's/"rsdSpike":false/"rsdSpike":true/')"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'RSD_SPIKE'" "DENY by a tier-1 boolean signal"
tg_post /v1/evaluate "$(tg_req_json permit | sed 's/"riskScore":0.12/"riskScore":0.31/')"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'RISK_THRESHOLD_EXCEEDED'" "DENY riskScore above the tier-1 threshold"
tg_post /v1/evaluate "$(tg_req_json permit | sed 's/"riskScore":0.12/"riskScore":0.3/')"
tg_expect_py "j['decision'] == 'PERMIT'" "riskScore equal to the threshold passes"

tg_post /v1/evaluate "$(tg_req_json silence)"
tg_expect_status 200 "evaluate SILENCE is HTTP 200"
tg_expect_py "j['decision'] == 'SILENCE' and j['enforcement'] == 'BLOCKED' and j['reason_code'] == 'MISSING_CONTEXT' and 'receipt' not in j and is_exec_id(j['execution_id'])" \
    "SILENCE MISSING_CONTEXT has no receipt"
tg_jget SILENCE_EXEC 'j["execution_id"]'
tg_post /v1/evaluate '{"surface":"example","signals":{"undeclared":true}}'
tg_expect_py "j['decision'] == 'SILENCE' and j['reason_code'] == 'UNKNOWN_SIGNAL' and 'receipt' not in j" "SILENCE UNKNOWN_SIGNAL"
tg_post /v1/evaluate '{"surface":"example","signals":{"riskScore":1.5}}'
tg_expect_py "j['decision'] == 'SILENCE' and j['reason_code'] == 'INVALID_SIGNAL'" "SILENCE INVALID_SIGNAL (number outside [0,1])"
tg_post /v1/evaluate '{"surface":"payments.charge","actor":"agent.billing","context":{"amount":"12","currency":"USD"}}'
tg_expect_py "j['decision'] == 'SILENCE'" "SILENCE for a context field of the wrong type"

# subjectDigest and prevReceiptHash are carried into the receipt.
tg_post /v1/evaluate "$(tg_req_json permit ',"subjectDigest":"sha256:abcd","prevReceiptHash":"'"$PERMIT_HASH"'"')"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['subjectDigest'] == 'sha256:abcd' and j['receipt']['prevReceiptHash'] == '$PERMIT_HASH' and j['request_hash'] != '$PERMIT_HASH'" \
    "subjectDigest and prevReceiptHash go into the receipt and the request hash"
tg_save_receipt "$TG_TMP/receipt-chain.json"

# Determinism: the same request gives the same request hash, a fresh execution id.
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['request_hash'] == '$PERMIT_HASH' and j['execution_id'] != '$PERMIT_EXEC'" \
    "same request: same request_hash, new execution_id"
tg_expect_no_header Idempotent-Replayed "no idempotency key: never a replay"
# Member order and whitespace do not change the request hash (canonical JSON).
tg_post /v1/evaluate '{ "signals" : {"rsdSpike":false, "riskScore":0.120}, "context":{"currency":"USD","amount":2.5e3},
  "actor":"agent.billing", "action":"transfer_funds", "surface":"payments.charge" }'
tg_expect_py "j['request_hash'] == '$PERMIT_HASH'" "reordered, re-spaced, 2.5e3 for 2500: same request_hash"

# Aliases: actorId for actor; intent_id for idempotency_key.
tg_post /v1/evaluate "$(tg_req_json permit | sed 's/"actor":/"actorId":/')"
tg_expect_py "j['decision'] == 'PERMIT' and j['request_hash'] == '$PERMIT_HASH' and j['receipt']['actorId'] == 'agent.billing'" \
    "actorId alias maps to actor"
tg_post /v1/evaluate "$(tg_req_json permit | sed 's/"actor":"agent.billing"/"actor":"agent.billing","actorId":"agent.billing"/')"
tg_expect_error 400 invalid_request "actor and actorId together"
tg_post /v1/evaluate "$(tg_req_json permit ',"intent_id":"itest-intent-1"')"
tg_expect_py "j['decision'] == 'PERMIT'" "intent_id accepted"
tg_save intent
tg_post /v1/evaluate "$(tg_req_json permit ',"intent_id":"itest-intent-1"')"
tg_expect_header Idempotent-Replayed true "intent_id is the idempotency key"
tg_check "intent_id replay is byte-identical" cmp -s "$TG_BODY_FILE" "$(tg_saved_body intent)"

# Tool-call shape: the policy's tools table maps tool -> surface (+ action), args -> context.
tg_post /v1/evaluate '{"tool":"stripe.charge","args":{"amount":2500,"currency":"USD"},"actor":"agent.billing","signals":{"riskScore":0.12,"rsdSpike":false},"intent_id":"itest-tool-1"}'
tg_expect_status 200 "tool-call shape"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['surface'] == 'payments.charge' and j['receipt']['action'] == 'charge'" \
    "tool-call shape maps stripe.charge to payments.charge / charge"
tg_jget TOOL_HASH 'j["request_hash"]'
tg_post /v1/evaluate '{"surface":"payments.charge","action":"charge","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false}}'
tg_expect_py "j['request_hash'] == '$TOOL_HASH'" "tool-call shape hashes like the equivalent surface request"
tg_post /v1/evaluate '{"tool":"example.echo","args":{}}'
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['surface'] == 'example' and j['receipt']['action'] == 'example.echo'" \
    "tool mapped to a bare surface name: action is the tool name"
tg_post /v1/evaluate '{"tool":"no.such.tool","args":{}}'
tg_expect_error 400 unknown_surface "unknown tool"

# ?explain=1 adds the FSM trace.
tg_post "/v1/evaluate?explain=1" "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT' and j['trace']['states'][0] == 'RECEIVED' and j['trace']['states'][-1] == 'RULES_EVALUATED' and j['trace']['decided_in'] == 'RULES_EVALUATED' and j['trace']['rule'] == 'billing-within-limit' and 'receipt' in j" \
    "?explain=1: trace with states and the deciding rule"
tg_post "/v1/evaluate?explain=1" "$(tg_req_json silence)"
tg_expect_py "j['decision'] == 'SILENCE' and j['trace']['decided_in'] == 'VALIDATED' or j['trace']['states'][-1] in ('RECEIVED','VALIDATED')" \
    "?explain=1 on SILENCE: ends in the validation state"
tg_expect_py "j['explain'] == {'rules': [], 'limits': []}" \
    "?explain=1 on SILENCE: the full explain has no rules (decided before them)"
# ... and the full explain (issue 21): every rule in order, each condition with the
# request's value and whether it held.
tg_post "/v1/evaluate?explain=1" "$(tg_req_json permit)"
tg_expect_py "[r['id'] for r in j['explain']['rules'] if r['matched'] and r['evaluated']] == ['billing-within-limit'] and all(c['held'] and c['present'] for r in j['explain']['rules'] if r['id'] == 'billing-within-limit' for c in r['conditions']) and any(c.get('field') == 'actor' and c.get('actual') == 'agent.billing' for r in j['explain']['rules'] for c in r['conditions']) and j['explain']['limits'] == []" \
    "?explain=1: the full explain names the matching rule and the values compared"
tg_post "/v1/evaluate?explain=1" "$(tg_req_json deny)"
tg_expect_py "j['decision'] == 'DENY' and len(j['explain']['rules']) > 0 and all('held' in c for r in j['explain']['rules'] for c in r['conditions']) and not all(r['matched'] for r in j['explain']['rules'] if r['effect'] == 'permit')" \
    "?explain=1 on DENY: every rule with its conditions"
tg_post "/decide?explain=1" "$(tg_req_json permit)"
tg_expect_py "'trace' in j and [r['id'] for r in j['explain']['rules'] if r['matched']] == ['billing-within-limit']" \
    "/decide?explain=1: the full explain too"
tg_post "/v1/evaluate?explain=0" "$(tg_req_json permit)"
tg_expect_py "'trace' not in j and 'explain' not in j" "?explain=0 has no trace and no explain"

# ---- receipts verify offline against the served keys.json ----------------------------

for r in permit deny chain; do
    out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/receipt-$r.json" 2>&1)
    rc=$?
    tg_eq "$rc:$out" "0:VALID" "trigguard verify --keys keys.json: $r receipt"
done
python3 - "$TG_TMP/receipt-permit.json" "$TG_TMP/receipt-tampered.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["decision"] = "DENY"
json.dump(r, open(sys.argv[2], "w"), separators=(",", ":"))
PY
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/receipt-tampered.json" 2>&1)
rc=$?
tg_eq "$rc" 1 "trigguard verify rejects a tampered receipt (exit 1)"
tg_check "tampered receipt reason printed: $out" grep -q "INVALID" <<<"$out"
if python3 -c 'import tgclient,sys; sys.exit(not tgclient.have_crypto())'; then
    tg_check "independent python verifier accepts the receipts" python3 - "$TG_TMP" <<'PY'
import json, sys, tgclient
d = sys.argv[1]
keys = json.load(open(d + "/keys.json"))
for n in ("permit", "deny", "chain"):
    why = tgclient.verify_receipt(json.load(open(d + "/receipt-%s.json" % n)), keys)
    if why:
        print(n, why); sys.exit(1)
if tgclient.verify_receipt(json.load(open(d + "/receipt-tampered.json")), keys) is None:
    print("tampered receipt accepted"); sys.exit(1)
PY
else
    tg_log "note: python 'cryptography' missing, independent verifier skipped (trigguard verify still ran)"
fi

# ---- GET /v1/receipts/{executionId} ---------------------------------------------------

tg_req GET "/v1/receipts/$PERMIT_EXEC" "${TG_AUTH_A[@]}"
tg_expect_status 200 "GET own receipt"
tg_expect_header Content-Type "application/trigguard-receipt+json" "stored receipt"
tg_check "stored receipt is byte-identical to the one in the evaluate response" python3 -c '
import sys
stored = open(sys.argv[1], "rb").read(); resp = open(sys.argv[2], "rb").read()
sys.exit(not (len(stored) > 100 and (b"\"receipt\":" + stored + b"}") in resp))' "$TG_BODY_FILE" "$(tg_saved_body permit)"
tg_req GET "/v1/receipts/$DENY_EXEC" "${TG_AUTH_A[@]}"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['executionId'] == '$DENY_EXEC'" "GET a DENY receipt"
tg_req GET "/v1/receipts/$PERMIT_EXEC" "${TG_AUTH_B[@]}"
tg_expect_error 404 not_found "tenant beta cannot read acme's receipt"
tg_req GET "/v1/receipts/$PERMIT_EXEC"
tg_expect_error 401 unauthorized "GET receipt without a token"
tg_expect_header WWW-Authenticate Bearer "GET receipt 401"
tg_req GET "/v1/receipts/$SILENCE_EXEC" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "SILENCE has no receipt to fetch"
tg_req GET "/v1/receipts/exec_00000000000000000000000000000000" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "unknown execution id"
tg_req GET "/v1/receipts/not-an-id" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "malformed execution id"
tg_req POST "/v1/receipts/$PERMIT_EXEC" "${TG_AUTH_A[@]}" --json-body '{}'
tg_expect_error 405 method_not_allowed "POST to a receipt"

# ---- /v1/verify, /verify-receipt, /protocol/verify-receipt ----------------------------

RECEIPT=$(cat "$TG_TMP/receipt-permit.json")
TAMPERED=$(cat "$TG_TMP/receipt-tampered.json")
for path in /v1/verify /verify-receipt; do
    tg_req POST $path --json-body "$RECEIPT"
    tg_expect_status 200 "$path valid receipt (no auth needed)"
    tg_expect_py "j['valid'] is True and isinstance(j['reason'], str)" "$path: valid true"
    tg_req POST $path --json-body "{\"receipt\": $RECEIPT}"
    tg_expect_py "s == 200 and j['valid'] is True" "$path: {\"receipt\": {...}} wrapper"
    tg_req POST $path --json-body "$TAMPERED"
    tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == 'hash_mismatch'" "$path: tampered decision -> hash_mismatch"
done
python3 - "$TG_TMP" <<'PY'
import json, sys, base64
d = sys.argv[1]
r = json.load(open(d + "/receipt-permit.json"))
s = bytearray(base64.b64decode(r["authoritySignature"])); s[0] ^= 1
bad_sig = dict(r, authoritySignature=base64.b64encode(bytes(s)).decode())
json.dump(bad_sig, open(d + "/receipt-badsig.json", "w"))
json.dump(dict(r, authorityKeyId="someone-else"), open(d + "/receipt-badkid.json", "w"))
shape = dict(r); del shape["receiptHash"]
json.dump(shape, open(d + "/receipt-shape.json", "w"))
PY
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/receipt-badsig.json")"
tg_expect_py "j['valid'] is False and j['reason'] == 'bad_signature'" "flipped signature bit -> bad_signature"
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/receipt-badkid.json")"
tg_expect_py "j['valid'] is False and j['reason'] == 'unknown_key'" "unknown authorityKeyId -> unknown_key"
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/receipt-shape.json")"
tg_expect_py "j['valid'] is False and j['reason'] == 'malformed'" "receipt without receiptHash -> malformed"
tg_req POST /v1/verify --json-body '{"hello":"world"}'
tg_expect_py "s == 200 and j['valid'] is False" "not a receipt -> valid false"
tg_req POST /v1/verify --json-body '{"receipt": '
tg_expect_error 400 invalid_json "verify with broken JSON"
tg_req POST /v1/verify -H "Content-Type: text/plain" --data-binary "$RECEIPT"
tg_expect_error 415 unsupported_media_type "verify with text/plain"
tg_req GET /v1/verify
tg_expect_error 405 method_not_allowed "GET /v1/verify"

tg_req POST /protocol/verify-receipt --json-body "$RECEIPT"
tg_expect_py "s == 200 and j['type'] == 'verify_receipt' and j['protocol'] == 'trigguard/v1' and j['protocol_version'] == '1.0.0' and j['valid'] is True" \
    "/protocol/verify-receipt: protocol fields and valid"
tg_req POST /protocol/verify-receipt --json-body "{\"receipt\": $TAMPERED}"
tg_expect_py "s == 200 and j['type'] == 'verify_receipt' and j['valid'] is False and j['reason'] == 'hash_mismatch'" \
    "/protocol/verify-receipt: wrapped tampered receipt"

# ---- /execute: gate semantics ---------------------------------------------------------

tg_post /execute "$(tg_req_json permit)"
tg_expect_status 200 "/execute PERMIT"
tg_expect_py "j['decision'] == 'PERMIT' and j['enforcement'] == 'EXECUTED' and 'receipt' in j" "/execute PERMIT body"
tg_post /execute "$(tg_req_json deny)"
tg_expect_status 403 "/execute DENY"
tg_expect_py "j['decision'] == 'DENY' and j['enforcement'] == 'BLOCKED' and j['reason_code'] == 'HIGH_RISK_SPEND' and 'receipt' in j" "/execute DENY: same body as evaluate"
tg_save_receipt "$TG_TMP/receipt-exec-deny.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/receipt-exec-deny.json" 2>&1)
tg_eq "$?:$out" "0:VALID" "/execute DENY receipt verifies"
tg_post /execute "$(tg_req_json silence)"
tg_expect_status 403 "/execute SILENCE"
tg_expect_py "j['decision'] == 'SILENCE' and 'receipt' not in j" "/execute SILENCE: no receipt"
tg_req POST /execute --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "/execute without a token"

# ---- /decide: decision core only -------------------------------------------------------

metric_value() { # current value of a metric (sum over matching label sets)
    curl -s --max-time 10 "$TG_URL/metrics" | python3 -c '
import sys, tgclient
s, _ = tgclient.parse_prometheus(sys.stdin.read())
labels = dict(a.split("=", 1) for a in sys.argv[2:])
print(int(tgclient.metric(s, sys.argv[1], **labels)))' "$@"
}
LEDGER_BEFORE=$(metric_value trigguard_ledger_records_total)
tg_post /decide "$(tg_req_json permit ',"idempotency_key":"itest-decide-1","nonce":"itest-decide-n"')"
tg_expect_status 200 "/decide PERMIT"
tg_expect_py "j == {'decision': 'PERMIT', 'reason_code': 'NO_POLICY_VIOLATION', 'policy_version': 'itest-1', 'policy_hash': '$POLICY_HASH'}" \
    "/decide body: decision, reason_code, policy_version, policy_hash only"
tg_post /decide "$(tg_req_json deny ',"idempotency_key":"itest-decide-1","nonce":"itest-decide-n"')"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'HIGH_RISK_SPEND'" \
    "/decide: no idempotency (same key, other request: no 409) and no nonce check"
tg_expect_no_header Idempotent-Replayed "/decide never replays"
tg_post /decide "$(tg_req_json silence)"
tg_expect_py "s == 200 and j['decision'] == 'SILENCE' and j['reason_code'] == 'MISSING_CONTEXT'" "/decide SILENCE"
tg_post "/decide?explain=1" "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT' and j['trace']['decided_in'] == 'RULES_EVALUATED'" "/decide?explain=1 trace"
LEDGER_AFTER=$(metric_value trigguard_ledger_records_total)
tg_eq "$LEDGER_AFTER" "$LEDGER_BEFORE" "/decide writes nothing to the ledger"
# The /decide key was not stored: /v1/evaluate may use it for any request.
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"itest-decide-1","nonce":"itest-decide-n"')"
tg_expect_py "s == 200 and j['decision'] == 'DENY'" "key and nonce seen only by /decide are still fresh"
tg_expect_no_header Idempotent-Replayed "/decide stored no idempotent response"
tg_req POST /decide --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "/decide without a token"
tg_post /decide '{"surface":"nope"}'
tg_expect_error 400 unknown_surface "/decide unknown surface"

# ---- 400 -------------------------------------------------------------------------------

tg_post /v1/evaluate '{"surface":"payments.charge",'
tg_expect_error 400 invalid_json "truncated JSON"
tg_post /v1/evaluate '{"surface":"example","surface":"example"}'
tg_expect_error 400 invalid_json "duplicate member name"
tg_post /v1/evaluate $'{"surface":"example","action":"\xff"}'
tg_expect_error 400 invalid_json "invalid UTF-8"
tg_post /v1/evaluate '{"surface":"example","action":"\ud800"}'
tg_expect_error 400 invalid_json "lone surrogate"
tg_post /v1/evaluate '{"surface":"example","context":{"x":NaN}}'
tg_expect_error 400 invalid_json "NaN"
tg_post /v1/evaluate ''
tg_expect_error 400 invalid_json "empty body"
tg_post /v1/evaluate "$(tg_req_json permit ',"color":"blue"')"
tg_expect_error 400 invalid_request "unknown top-level field"
tg_expect_py "'color' in j['message']" "the message names the unknown field"
tg_post /v1/evaluate '{"action":"x"}'
tg_expect_error 400 invalid_request "no surface"
tg_post /v1/evaluate '[1,2]'
tg_expect_error 400 invalid_request "body is an array"
tg_post /v1/evaluate '{"surface":42}'
tg_expect_error 400 invalid_request "surface is a number"
tg_post /v1/evaluate '{"surface":"example","context":"x"}'
tg_expect_error 400 invalid_request "context is a string"
tg_post /v1/evaluate '{"surface":"example","signals":[1]}'
tg_expect_error 400 invalid_request "signals is an array"
tg_post /v1/evaluate '{"surface":"payments.refund"}'
tg_expect_error 400 unknown_surface "surface not in the policy"
# Limits at max (accepted) and max+1 (400): depth 32, strings 4096 bytes, 256 members.
nest() { python3 -c "import sys; n=int(sys.argv[1]); print('['*n + ']'*n)" "$1"; }
tg_post /v1/evaluate "{\"surface\":\"example\",\"context\":{\"x\":$(nest 30)}}"
tg_expect_status 200 "nesting depth 32 (the limit)"
tg_post /v1/evaluate "{\"surface\":\"example\",\"context\":{\"x\":$(nest 31)}}"
tg_expect_error 400 invalid_request "nesting depth 33"
tg_post /v1/evaluate "{\"surface\":\"example\",\"action\":\"$(head -c 4096 /dev/zero | tr '\0' a)\"}"
tg_expect_status 200 "4096-byte string (the limit)"
tg_post /v1/evaluate "{\"surface\":\"example\",\"action\":\"$(head -c 4097 /dev/zero | tr '\0' a)\"}"
tg_expect_error 400 invalid_request "4097-byte string"
members() { python3 -c "import sys; print(','.join('\"k%d\":1' % i for i in range(int(sys.argv[1]))))" "$1"; }
tg_post /v1/evaluate "{\"surface\":\"example\",\"context\":{$(members 256)}}"
tg_expect_status 200 "256 members in an object (the limit)"
tg_post /v1/evaluate "{\"surface\":\"example\",\"context\":{$(members 257)}}"
tg_expect_error 400 invalid_request "257 members in an object"

# ---- 401 -------------------------------------------------------------------------------

tg_req POST /v1/evaluate --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "no Authorization header"
tg_expect_header WWW-Authenticate Bearer "401"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-wrong" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "wrong token"
tg_expect_header WWW-Authenticate Bearer "401 wrong token"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-acm" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "token prefix"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-acmee" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "token with a suffix"
tg_req POST /v1/evaluate -H "Authorization: Basic dG9rLWFjbWU6" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "Basic scheme"
tg_req POST /v1/evaluate -H "Authorization: Bearer " --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "empty bearer token"
tg_req POST /v1/evaluate -H "Authorization: tok-acme" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "token without a scheme"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta'" "tenant beta's token maps to beta"
# Authentication comes before parsing: a bad body without a token is a 401, not a 400.
tg_req POST /v1/evaluate --json-body '{"surface":'
tg_expect_error 401 unauthorized "unauthenticated broken JSON"

# Expect: 100-continue without a valid token: the 401 comes instead of the 100 (the body
# is never asked for); with a valid token, the 100 comes and the body is read as usual.
tg_check "Expect: 100-continue without a valid token: 401, not 100 Continue" python3 - "${TG_PORTS[main]}" "$(tg_req_json permit)" <<'PY2'
import socket, sys
port, body = int(sys.argv[1]), sys.argv[2].encode()
def exchange(headers, send_body_after_100=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              + headers + b"\r\n")
    got = s.recv(65536)  # a timeout here means the daemon waited for the body
    if send_body_after_100 and got.startswith(b"HTTP/1.1 100"):
        s.sendall(body)
        while b"\r\n\r\n" not in got.split(b"\r\n\r\n", 1)[1]:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    s.close()
    return got
for name, auth in (("no token", b""), ("wrong token", b"Authorization: Bearer tok-wrong\r\n")):
    got = exchange(auth + b"Expect: 100-continue\r\nContent-Length: %d\r\n" % len(body))
    head = got.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 401 "), (name, got[:200])
    assert b"WWW-Authenticate: Bearer" in head, (name, head)
    assert b'"error":"unauthorized"' in got, (name, got[:300])
got = exchange(b"Authorization: Bearer tok-acme\r\nExpect: 100-continue\r\nContent-Length: %d\r\n"
               % len(body), send_body_after_100=True)
assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), got[:300]
PY2

# ---- 404, 405 --------------------------------------------------------------------------

tg_req GET /v2/evaluate
tg_expect_error 404 not_found "GET /v2/evaluate"
tg_req POST /v1/evaluate/extra "${TG_AUTH_A[@]}" --json-body '{}'
tg_expect_error 404 not_found "path below /v1/evaluate"
tg_req GET /v1/evaluate
tg_expect_error 405 method_not_allowed "GET /v1/evaluate"
tg_expect_header Allow POST "405 on a POST route"
tg_req PUT /execute "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
tg_expect_error 405 method_not_allowed "PUT /execute"
tg_req DELETE /decide "${TG_AUTH_A[@]}"
tg_expect_error 405 method_not_allowed "DELETE /decide"
tg_req POST /healthz --json-body '{}'
tg_expect_error 405 method_not_allowed "POST /healthz"
tg_check "405 on a GET route allows GET: $(tg_header Allow)" grep -q GET <<<"$(tg_header Allow)"
tg_req POST /.well-known/trigguard/keys.json --json-body '{}'
tg_expect_error 405 method_not_allowed "POST keys.json"

# ---- 413 (default --max-body 64 KiB), 415 ---------------------------------------------

python3 -c "import sys; sys.stdout.write('{\"surface\":\"example\",\"action\":\"' + 'a'*70000 + '\"}')" >"$TG_TMP/big.json"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: application/json" --data-binary "@$TG_TMP/big.json"
tg_expect_error 413 body_too_large "Content-Length above --max-body"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: application/json" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/big.json"
tg_expect_error 413 body_too_large "chunked body above --max-body"
tg_req POST /v1/verify -H "Content-Type: application/json" --data-binary "@$TG_TMP/big.json"
tg_expect_error 413 body_too_large "/v1/verify body above --max-body"

tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: text/plain" --data-binary "$(tg_req_json permit)"
tg_expect_error 415 unsupported_media_type "text/plain body"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type:" --data-binary "$(tg_req_json permit)"
tg_expect_error 415 unsupported_media_type "no Content-Type"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: application/jsonx" --data-binary "$(tg_req_json permit)"
tg_expect_error 415 unsupported_media_type "application/jsonx"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: application/json; charset=utf-8" --data-binary "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "application/json with a charset parameter"
# One media type with well-formed parameters; the body is always read as UTF-8, so another
# charset is refused rather than ignored, and a list is not one media type.
for ct in 'APPLICATION/JSON;CHARSET="UTF-8"' 'application/json ; profile=x ;' 'application/json;;q="a;b"'; do
    tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: $ct" --data-binary "$(tg_req_json permit)"
    tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "Content-Type '$ct' accepted"
done
for ct in 'application/json, text/plain' 'application/json ,text/plain' 'application/json; charset=latin1' \
    'application/json; charset=utf-16' 'application/json; charset="utf-8' 'application/json; charset' \
    'application/json; =x' 'application/json x' 'application/json; charset=utf-8, text/plain'; do
    tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" -H "Content-Type: $ct" --data-binary "$(tg_req_json permit)"
    tg_expect_error 415 unsupported_media_type "Content-Type '$ct' refused"
done
tg_req POST /decide "${TG_AUTH_A[@]}" -H "Content-Type: application/x-www-form-urlencoded" --data-binary "$(tg_req_json permit)"
tg_expect_error 415 unsupported_media_type "/decide with a form content type"

# ---- the /decide-only listener (TG_DECIDE_PORT) ---------------------------------------

MAIN_URL=$TG_URL
TG_URL="http://127.0.0.1:$DECIDE_PORT"
tg_post /decide "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['policy_hash'] == '$POLICY_HASH'" "TG_DECIDE_PORT serves POST /decide"
tg_post /decide "$(tg_req_json deny)"
tg_expect_py "s == 200 and j['decision'] == 'DENY'" "TG_DECIDE_PORT /decide DENY"
tg_req POST /decide --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "TG_DECIDE_PORT /decide still needs a token"
for route in /healthz /metrics /version /.well-known/trigguard/keys.json; do
    tg_req GET $route
    tg_expect_error 404 not_found "TG_DECIDE_PORT does not serve GET $route"
done
for route in /v1/evaluate /execute /v1/verify; do
    tg_post $route "$(tg_req_json permit)"
    tg_expect_error 404 not_found "TG_DECIDE_PORT does not serve POST $route"
done
TG_URL=$MAIN_URL

# ---- /metrics --------------------------------------------------------------------------

# A status the daemon sends before routing gets its own label too.
tg_req GET "/healthz?$(head -c 9000 /dev/zero | tr '\0' a)"
tg_expect_error 414 uri_too_long "a 9000-byte query (for the metrics below)"

tg_req GET /metrics
tg_expect_status 200 "GET /metrics"
tg_check "metrics content type is Prometheus text 0.0.4: $(tg_header Content-Type)" \
    grep -q '^text/plain; version=0.0.4' <<<"$(tg_header Content-Type)"
tg_check "/metrics parses as Prometheus text with the expected families" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
text = open(sys.argv[1]).read()
samples, types = tgclient.parse_prometheus(text)
helps = {l.split(" ")[2] for l in text.splitlines() if l.startswith("# HELP ")}
missing = [f for f in types if f not in helps]
assert not missing, "families without HELP: %s" % missing
for name, _, _ in samples:
    assert tgclient._family(name, types) in types, "sample without TYPE: %s" % name
m = lambda n, **l: tgclient.metric(samples, n, **l)
want = {
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "200"))): 10,
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "400"))): 10,
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "401"))): 5,
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "413"))): 2,
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "415"))): 3,
    ("trigguard_http_requests_total", (("route", "/execute"), ("status", "403"))): 2,
    ("trigguard_http_requests_total", (("route", "/decide"), ("status", "200"))): 4,
    # a wrong method is counted under the route it was sent to
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "405"))): 1,
    ("trigguard_http_requests_total", (("route", "/healthz"), ("status", "405"))): 1,
    ("trigguard_http_requests_total", (("route", "other"), ("status", "414"))): 1,
    ("trigguard_decisions_total", (("decision", "PERMIT"), ("surface", "payments.charge"))): 5,
    ("trigguard_decisions_total", (("decision", "DENY"), ("surface", "payments.charge"))): 3,
    ("trigguard_decisions_total", (("decision", "SILENCE"), ("surface", "payments.charge"))): 2,
    ("trigguard_http_request_duration_seconds_count", (("route", "/v1/evaluate"),)): 30,
    ("trigguard_ledger_records_total", ()): 10,
    ("trigguard_ledger_fsync_seconds_count", ()): 1,
}
bad = []
for (name, labels), least in want.items():
    v = m(name, **dict(labels))
    if v < least:
        bad.append("%s%s = %s < %s" % (name, dict(labels), v, least))
for fam in ("trigguard_rate_limited_total", "trigguard_bulkhead_rejected_total",
            "trigguard_http_request_duration_seconds", "trigguard_ledger_fsync_seconds"):
    if fam not in types:
        bad.append("family %s missing" % fam)
assert types["trigguard_http_request_duration_seconds"] == "histogram"
assert m("trigguard_ledger_healthy") == 1, "ledger not healthy"
# build, process and occupancy series (issue 24)
builds = [l for n, l, v in samples if n == "trigguard_build_info"]
if len(builds) != 1 or set(dict(builds[0])) != {"version", "commit", "protocol"} or dict(builds[0])["protocol"] != "trigguard/v1":
    bad.append("trigguard_build_info: %s" % builds)
if not m("process_cpu_seconds_total") > 0: bad.append("process_cpu_seconds_total")
if not m("process_resident_memory_bytes") > 1 << 20: bad.append("process_resident_memory_bytes")
if not 3 <= m("process_open_fds") <= m("process_max_fds"): bad.append("process_open_fds / process_max_fds")
import time
if not abs(m("process_start_time_seconds") - time.time()) < 3600: bad.append("process_start_time_seconds")
for fam in ("trigguard_store_bytes", "trigguard_store_bytes_capacity", "trigguard_receipt_index_entries",
            "trigguard_receipt_index_capacity", "trigguard_ledger_segment", "trigguard_ledger_segment_bytes",
            "trigguard_ledger_head_seq", "trigguard_ledger_bytes_total"):
    if fam not in types: bad.append("family %s missing" % fam)
import os
if os.environ.get("TG_TEST_STORE", "file") == "file":  # PostgreSQL keeps these in the database
    if not m("trigguard_receipt_index_entries") >= 8: bad.append("trigguard_receipt_index_entries")
    if not m("trigguard_ledger_head_seq") >= 10: bad.append("trigguard_ledger_head_seq")
# decisions by reason code and by tenant: the same decisions as by surface
by_reason = sum(v for n, l, v in samples if n == "trigguard_decisions_by_reason_total")
by_tenant = sum(v for n, l, v in samples if n == "trigguard_tenant_decisions_total")
by_surface = sum(v for n, l, v in samples if n == "trigguard_decisions_total")
if not (by_reason == by_tenant == by_surface > 0): bad.append("by reason %s, by tenant %s, by surface %s" % (by_reason, by_tenant, by_surface))
if m("trigguard_decisions_by_reason_total", decision="PERMIT", reason="NO_POLICY_VIOLATION") < 5: bad.append("PERMIT NO_POLICY_VIOLATION")
if m("trigguard_tenant_decisions_total", tenant="acme", decision="PERMIT") < 1: bad.append("acme PERMIT")
if bad:
    print("\n".join(bad)); sys.exit(1)
PY
if command -v promtool >/dev/null; then
    tg_check "promtool check metrics" sh -c "promtool check metrics <'$TG_BODY_FILE'"
fi

# ---- trace context and what the access log carries (issue 24) ---------------------------
TP=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"itest-log-1"')" -H "traceparent: $TP" -H "X-Request-Id: itest-log-1"
tg_expect_status 200 "evaluate with a traceparent"
tg_expect_header traceparent "$TP" "a valid traceparent is echoed"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"itest-log-1"')" -H "X-Request-Id: itest-log-2"
tg_expect_status 200 "the same key again: a replay"
for bad in 00-00000000000000000000000000000000-00f067aa0ba902b7-01 ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 \
    00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01 "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"; do
    tg_req GET /healthz -H "traceparent: $bad"
    tg_check "a malformed traceparent ($bad) is not echoed" bash -c "! grep -qi '^traceparent:' '$TG_HDR_FILE'"
done
tg_post /v1/evaluate '{"surface":"payments.charge"' -H "X-Request-Id: itest-log-3"
tg_expect_status 400 "bad JSON"

# ---- stop: exit 0, no sanitizer report ---------------------------------------------------

tg_stop main
tg_check "access log lines are JSON with request id, route, status and never a token" python3 - "$(tg_logfile main)" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert "tok-acme" not in text and "tok-beta" not in text, "a token appears in the log"
assert "PRIVATE KEY" not in text, "key material in the log"
reqs = [json.loads(l) for l in text.splitlines() if l.startswith("{") and '"event":"request"' in l]
assert len(reqs) > 50, "too few request lines: %d" % len(reqs)
for r in reqs:
    assert r["request_id"] and r["route"] and isinstance(r["status"], int) and "latency_us" in r, r
assert any(r.get("request_id") == "itest-eval-1" and r.get("tenant") == "acme" and r.get("decision") == "PERMIT" and r.get("reason") == "NO_POLICY_VIOLATION" for r in reqs), "evaluate line lacks tenant/decision/reason"
by = {r["request_id"]: r for r in reqs}
l1, l2, l3 = by["itest-log-1"], by["itest-log-2"], by["itest-log-3"]
assert l1["execution_id"].startswith("exec_") and l1["actor"] == "agent.billing" and l1["rule"] == "billing-within-limit", l1
assert l1["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" and l1["span_id"] == "00f067aa0ba902b7", l1
assert l1["client"] == "127.0.0.1" and "replayed" not in l1 and "error" not in l1, l1
assert l2.get("replayed") is True and l2["execution_id"] == l1["execution_id"] and "trace_id" not in l2, l2
assert l3["error"] == "invalid_json" and l3["status"] == 400 and "execution_id" not in l3, l3
assert all(r.get("client") for r in reqs), "a request line without the client address"
PY
tg_done
