#!/usr/bin/env bash
# api_contract.sh — every route of docs/openapi.yaml against the real daemon, in success and
# error cases: each response's status, headers and body are checked against the document
# (lib/openapi_check.py, JSON Schema 2020-12 through python3-jsonschema), and the hashes
# docs/API.md defines (requestHash, receiptHash, executionId for an idempotency key,
# executionContextHash, protocolFingerprint, the Ed25519 signature) are recomputed here.
# shellcheck source=lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"

"$TG_PY" -c 'import jsonschema, yaml' 2>/dev/null ||
    tg_die "python3-jsonschema and python3-yaml are needed (scripts/deps installs them)"
command -v openssl >/dev/null || tg_die "openssl is needed (scripts/deps installs it)"

AC_DIR=$TG_TMP/contract
mkdir -p "$AC_DIR"
AC_N=0

# ac STATUS LABEL METHOD PATH [curl args, --json-body TEXT]: one request to the current
# daemon, its status asserted, the exchange kept for the schema check at the end.
ac() {
    local want=$1 label=$2 method=$3 path=$4 a has_body=0
    shift 4
    for a in "$@"; do [ "$a" == "--json-body" ] && has_body=1; done
    tg_req "$method" "$path" "$@"
    tg_expect_status "$want" "$label"
    AC_N=$((AC_N + 1))
    local p
    p=$(printf '%s/%03d' "$AC_DIR" "$AC_N")
    cp "$TG_BODY_FILE" "$p.body"
    cp "$TG_HDR_FILE" "$p.headers"
    echo "$TG_STATUS" >"$p.status"
    local rb=""
    if [ $has_body -eq 1 ]; then
        cp "$TG_TMP/req.body" "$p.req"
        rb=$(basename "$p").req
    fi
    jq -n --arg lbl "$label" --arg method "$method" --arg path "$path" --arg rb "$rb" \
        --arg listener "${AC_LISTENER:-main}" \
        '{"label": $lbl, "method": $method, "path": $path, "listener": $listener,
          "request_body": (if $rb == "" then null else $rb end)}' >"$p.meta"
}
acp() { # acp STATUS LABEL PATH JSON [curl args]: POST JSON with acme's token
    local want=$1 label=$2 path=$3 body=$4
    shift 4
    ac "$want" "$label" POST "$path" "${TG_AUTH_A[@]}" --json-body "$body" "$@"
}
canon_sha() { "$TG_BIN" canon --sha256 | tr -d '\n'; }

PERMIT=$(tg_req_json permit)
DENY=$(tg_req_json deny)
SILENCE=$(tg_req_json silence)
LONG_QUERY="?x=$(head -c 9000 /dev/zero | tr '\0' a)"
BIG_HEADER="X-Padding: $(head -c 17000 /dev/zero | tr '\0' a)"
head -c 70000 /dev/zero | tr '\0' ' ' >"$TG_TMP/big.json"

tg_keygen
tg_keygen "$TG_TMP/log-key.pem" ac-log-1 # the transparency log's key (SPEC §12)
tg_std_args main
DECIDE_PORT=$(tg_free_port)
tg_start main TG_DECIDE_PORT="$DECIDE_PORT" -- "${TG_STD_ARGS[@]}" --log-key "$TG_TMP/log-key.pem" \
    --log-origin contract.trigguard.test/log --checkpoint-interval 20

# ---- read-only routes ------------------------------------------------------------------

for path in /healthz /readyz /version /protocol/capabilities /.well-known/trigguard/keys.json /metrics \
    /v1/log/checkpoint; do
    ac 200 "GET $path" GET "$path"
    ac 200 "HEAD $path" HEAD "$path" -I
    ac 405 "POST $path" POST "$path" --json-body '{}'
    ac 414 "GET $path with an over-long query" GET "$path$LONG_QUERY"
    ac 431 "GET $path with over-large headers" GET "$path" -H "$BIG_HEADER"
    ac 400 "GET $path with two X-Request-Id headers" GET "$path" -H "X-Request-Id: a" -H "X-Request-Id: b"
done
ac 404 "an unknown path" GET /no/such/route -H "X-Request-Id: ac-404"
tg_expect_py 'j["request_id"] == "ac-404"' "404 body carries the caller's request id"
tg_req GET /.well-known/trigguard/keys.json
cp "$TG_BODY_FILE" "$TG_TMP/keys.json"

# ---- decisions ------------------------------------------------------------------------

acp 200 "evaluate PERMIT with an idempotency key" /v1/evaluate \
    "$(tg_req_json permit ',"idempotency_key":"ac-k1"')" -H "X-Request-Id: ac-eval-1"
tg_expect_header X-Request-Id ac-eval-1 "evaluate echoes X-Request-Id"
cp "$TG_BODY_FILE" "$TG_TMP/permit.json"
acp 200 "evaluate PERMIT replayed" /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"ac-k1"')"
tg_expect_header Idempotent-Replayed true "the replay says so"
tg_check "the replay is the stored response byte for byte" cmp -s "$TG_BODY_FILE" "$TG_TMP/permit.json"
acp 200 "evaluate DENY" /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"ac-k2"')"
tg_expect_py 'j["decision"] == "DENY" and j["enforcement"] == "BLOCKED" and "receipt" in j' "DENY carries a receipt"
acp 200 "evaluate SILENCE" /v1/evaluate "$SILENCE"
tg_expect_py 'j["decision"] == "SILENCE" and "receipt" not in j' "SILENCE has no receipt"
acp 200 "evaluate with ?explain=1" '/v1/evaluate?explain=1' "$PERMIT"
tg_expect_py '"trace" in j and j["trace"]["decided_by"] == "rule"' "explain adds the trace"
tg_expect_py 'any(r["matched"] for r in j["explain"]["rules"])' "explain adds the full explain"
acp 200 "evaluate DENY with ?explain=1" '/v1/evaluate?explain=1' "$DENY"
tg_expect_py 'len(j["explain"]["rules"]) > 0' "a DENY's full explain lists the rules"
acp 200 "evaluate SILENCE with ?explain=1" '/v1/evaluate?explain=1' "$SILENCE"
tg_expect_py 'j["explain"] == {"rules": [], "limits": []}' "a SILENCE before the rules: empty explain"
acp 200 "evaluate with the Idempotency-Key header" /v1/evaluate "$PERMIT" -H "Idempotency-Key: ac-hdr-1"
acp 200 "evaluate with a nonce" /v1/evaluate "$(tg_req_json example ',"nonce":"ac-n1"')"
acp 200 "evaluate, tool-call shape" /v1/evaluate \
    '{"tool":"stripe.charge","args":{"amount":100,"currency":"USD"},"actorId":"agent.billing"}'
TOOL_HASH=$(jq -r .request_hash "$TG_BODY_FILE")
acp 200 "evaluate, the same request in the surface shape" /v1/evaluate \
    '{"surface":"payments.charge","action":"charge","context":{"amount":100,"currency":"USD"},"actor":"agent.billing"}'
tg_eq "$(jq -r .request_hash "$TG_BODY_FILE")" "$TOOL_HASH" "a tool call and its surface form hash alike"

acp 200 "execute PERMIT" /execute "$PERMIT"
acp 403 "execute DENY" /execute "$DENY"
acp 403 "execute SILENCE" /execute "$SILENCE"
# the gate (the test policy routes GET and POST /docs/* to the example surface)
GATE_ORIG=(-H "X-Original-Method: GET" -H "X-Original-URI: /docs/a?b=1")
ac 200 "gate PERMIT" GET /v1/gate "${TG_AUTH_A[@]}" "${GATE_ORIG[@]}"
tg_check "gate PERMIT: TrigGuard-Execution-Id" tg_has_header TrigGuard-Execution-Id
tg_check "gate PERMIT: TrigGuard-Receipt-Hash" tg_has_header TrigGuard-Receipt-Hash
ac 403 "gate: an unmapped path" GET /v1/gate "${TG_AUTH_A[@]}" -H "X-Original-Method: GET" -H "X-Original-URI: /admin"
ac 400 "gate: no original request" GET /v1/gate "${TG_AUTH_A[@]}"
ac 401 "gate: no token" GET /v1/gate "${GATE_ORIG[@]}"
ac 200 "gate as a POST (Envoy)" POST /v1/gate "${TG_AUTH_A[@]}" -H "X-Forwarded-Method: POST" -H "X-Forwarded-Uri: /docs/b"
ac 403 "gate as a POST: a path trick" POST /v1/gate "${TG_AUTH_A[@]}" -H "X-Forwarded-Method: POST" -H "X-Forwarded-Uri: /docs/../x"
acp 403 "execute replays a DENY first evaluated" /execute "$(tg_req_json deny ',"idempotency_key":"ac-k2"')"
tg_expect_header Idempotent-Replayed true "execute replay"

acp 200 "decide PERMIT" /decide "$PERMIT"
acp 200 "decide DENY, with explain" '/decide?explain=1' "$DENY"
acp 200 "decide ignores a used nonce" /decide "$(tg_req_json example ',"nonce":"ac-n1"')"

for route in /v1/evaluate /execute /decide; do
    ac 401 "$route without a token" POST "$route" --json-body "$PERMIT"
    tg_expect_header WWW-Authenticate Bearer "$route 401"
    ac 401 "$route with a wrong token" POST "$route" -H "Authorization: Bearer nope" --json-body "$PERMIT"
    acp 400 "$route: not JSON" "$route" '{"surface":'
    acp 400 "$route: duplicate member" "$route" '{"surface":"example","surface":"example"}'
    acp 400 "$route: unknown member" "$route" '{"surface":"example","colour":"red"}'
    acp 400 "$route: nesting beyond --max-depth" "$route" \
        "{\"surface\":\"example\",\"context\":$(printf '{"a":%.0s' $(seq 40))1$(printf '}%.0s' $(seq 40))}"
    tg_expect_py 'j.get("limit") == "max_depth" and j.get("max") == 32' "$route: the limit is named"
    acp 400 "$route: unknown surface" "$route" '{"surface":"nope"}'
    acp 400 "$route: unmapped tool" "$route" '{"tool":"nope"}'
    ac 415 "$route: text/plain" POST "$route" "${TG_AUTH_A[@]}" -H "Content-Type: text/plain" --data-binary '{}'
    ac 413 "$route: body over --max-body" POST "$route" "${TG_AUTH_A[@]}" \
        -H "Content-Type: application/json" --data-binary @"$TG_TMP/big.json"
    ac 405 "GET $route" GET "$route"
    tg_expect_header Allow POST "$route 405"
    acp 414 "$route: over-long query" "$route$LONG_QUERY" "$PERMIT"
    acp 431 "$route: over-large headers" "$route" "$PERMIT" -H "$BIG_HEADER"
    acp 400 "$route: two Content-Type headers" "$route" "$PERMIT" -H "Content-Type: application/json"
done
acp 400 "Idempotency-Key header differs from the body's key" /v1/evaluate \
    "$(tg_req_json example ',"idempotency_key":"a"')" -H "Idempotency-Key: b"
acp 400 "an empty nonce" /execute "$(tg_req_json example ',"nonce":""')"
acp 409 "idempotency key reused for another request" /v1/evaluate "$(tg_req_json example ',"idempotency_key":"ac-k1"')"
tg_expect_py 'j["error"] == "idempotency_conflict"' "409 idempotency_conflict"
acp 409 "nonce reused" /execute "$(tg_req_json example ',"nonce":"ac-n1"')"
tg_expect_py 'j["error"] == "replay_detected"' "409 replay_detected"

# ---- receipts: verification and retrieval ----------------------------------------------

jq -jc .receipt "$TG_TMP/permit.json" >"$TG_TMP/receipt.json" # canonical already: same bytes
EXEC_ID=$(jq -r .execution_id "$TG_TMP/permit.json")
jq -c '.decision = "DENY"' "$TG_TMP/receipt.json" >"$TG_TMP/tampered.json"
jq -c '.authorityKeyId = "no-such-key"' "$TG_TMP/receipt.json" >"$TG_TMP/unknown-key.json"
jq -c '.authoritySignature = ("A" * 86 + "==")' "$TG_TMP/receipt.json" >"$TG_TMP/bad-sig.json"
jq -c 'del(.receiptHash, .authoritySignature, .authorityKeyId)
       | .timestamp = "2020-01-01T00:00:00.000Z" | .expiresAt = "2020-01-01T00:10:00.000Z"' \
    "$TG_TMP/receipt.json" | "$TG_BIN" receipt sign --key "$TG_KEY" >"$TG_TMP/expired.json" ||
    tg_fail "trigguard receipt sign could not make an expired receipt"
for route in /v1/verify /verify-receipt /protocol/verify-receipt; do
    ac 200 "$route: a valid receipt" POST "$route" --json-body "$(cat "$TG_TMP/receipt.json")"
    tg_expect_py 'j["valid"] is True and j["reason"] == "valid"' "$route valid"
    ac 200 "$route: the wrapped form" POST "$route" --json-body "{\"receipt\":$(cat "$TG_TMP/receipt.json")}"
    tg_expect_py 'j["valid"] is True' "$route wrapped"
    ac 200 "$route: a changed field" POST "$route" --json-body "$(cat "$TG_TMP/tampered.json")"
    tg_expect_py 'j["valid"] is False and j["reason"] == "hash_mismatch" and j["authentic"] is False' "$route hash_mismatch"
    ac 200 "$route: an unknown key" POST "$route" --json-body "$(cat "$TG_TMP/unknown-key.json")"
    tg_expect_py 'j["reason"] == "unknown_key"' "$route unknown_key"
    ac 200 "$route: a wrong signature" POST "$route" --json-body "$(cat "$TG_TMP/bad-sig.json")"
    tg_expect_py 'j["reason"] == "bad_signature"' "$route bad_signature"
    ac 200 "$route: an expired receipt" POST "$route" --json-body "$(cat "$TG_TMP/expired.json")"
    tg_expect_py 'j["valid"] is False and j["authentic"] is True and j["reason"] == "expired"' "$route expired"
    ac 200 "$route: not a receipt" POST "$route" --json-body '[1]'
    tg_expect_py 'j["reason"] == "malformed" and len(j["detail"]) > 0' "$route malformed"
    ac 400 "$route: not JSON" POST "$route" --json-body '{"receipt":'
    ac 415 "$route: text/plain" POST "$route" -H "Content-Type: text/plain" --data-binary '{}'
    ac 413 "$route: body over --max-body" POST "$route" -H "Content-Type: application/json" \
        --data-binary @"$TG_TMP/big.json"
    ac 405 "GET $route" GET "$route"
    ac 414 "$route: over-long query" POST "$route$LONG_QUERY" --json-body '{}'
    ac 431 "$route: over-large headers" POST "$route" --json-body '{}' -H "$BIG_HEADER"
done

ac 200 "GET the PERMIT's receipt" GET "/v1/receipts/$EXEC_ID" "${TG_AUTH_A[@]}"
tg_check "the stored receipt is the one served" cmp -s "$TG_BODY_FILE" "$TG_TMP/receipt.json"
ac 404 "another tenant's receipt" GET "/v1/receipts/$EXEC_ID" "${TG_AUTH_B[@]}"
ac 404 "a malformed executionId" GET /v1/receipts/exec_zz "${TG_AUTH_A[@]}"
ac 404 "an unknown executionId" GET "/v1/receipts/exec_$(printf '0%.0s' $(seq 32))" "${TG_AUTH_A[@]}"
ac 401 "a receipt without a token" GET "/v1/receipts/$EXEC_ID"
ac 405 "POST to a receipt" POST "/v1/receipts/$EXEC_ID" "${TG_AUTH_A[@]}" --json-body '{}'
ac 414 "a receipt with an over-long query" GET "/v1/receipts/$EXEC_ID$LONG_QUERY" "${TG_AUTH_A[@]}"
ac 431 "a receipt with over-large headers" GET "/v1/receipts/$EXEC_ID" "${TG_AUTH_A[@]}" -H "$BIG_HEADER"
ac 400 "a receipt with two Authorization headers" GET "/v1/receipts/$EXEC_ID" "${TG_AUTH_A[@]}" "${TG_AUTH_B[@]}"

# ---- the transparency log (SPEC §12): checkpoint, tiles, proofs ---------------------------

"$TG_PY" "$TG_PYLIB/tlog_verify.py" fill "$TG_URL" tok-acme 260 >"$TG_TMP/fill.out" 2>&1 ||
    tg_fail "260 decisions for a full tile: $(cat "$TG_TMP/fill.out")"
tg_check "a checkpoint covers the first full tile" tg_wait_status \
    '/v1/log/proof/inclusion?index=0&size=256' 200 100 0.05
ac 200 "GET a receipt's inclusion proof" GET "/v1/receipts/$EXEC_ID/proof" "${TG_AUTH_A[@]}"
tg_expect_py 'j["logOrigin"] == "contract.trigguard.test/log" and "checkpoint" in j' "the proof names the log"
tg_jget AC_LEAF 'j["leafIndex"]'
ac 200 "GET a receipt's proof into an older tree" GET "/v1/receipts/$EXEC_ID/proof?size=$((AC_LEAF + 1))" \
    "${TG_AUTH_A[@]}"
tg_expect_py '"checkpoint" not in j' "?size= below the newest: no checkpoint"
ac 404 "another tenant's receipt's proof" GET "/v1/receipts/$EXEC_ID/proof" "${TG_AUTH_B[@]}"
ac 401 "a receipt's proof without a token" GET "/v1/receipts/$EXEC_ID/proof"
ac 400 "a receipt's proof with ?size=0" GET "/v1/receipts/$EXEC_ID/proof?size=0" "${TG_AUTH_A[@]}"
ac 405 "POST to a receipt's proof" POST "/v1/receipts/$EXEC_ID/proof" "${TG_AUTH_A[@]}" --json-body '{}'
ac 200 "GET a full tile" GET /v1/log/tile/0/000
tg_check "a full tile is 8,192 bytes" test "$(stat -c %s "$TG_BODY_FILE")" -eq 8192
ac 200 "GET a full entry bundle" GET /v1/log/tile/entries/000
tg_check "a full entry bundle is 256 x 34 bytes" test "$(stat -c %s "$TG_BODY_FILE")" -eq 8704
ac 200 "GET a partial tile" GET /v1/log/tile/0/000.p/7
ac 200 "GET a partial entry bundle" GET /v1/log/tile/entries/000.p/7
ac 404 "a tile beyond the tree" GET /v1/log/tile/0/999
ac 404 "a non-canonical tile path" GET /v1/log/tile/0/000.p/07
ac 404 "a tile path with x groups" GET /v1/log/tile/0/x000/000
ac 200 "an inclusion proof" GET '/v1/log/proof/inclusion?index=3&size=256'
ac 400 "an inclusion proof without size" GET '/v1/log/proof/inclusion?index=3'
ac 404 "an inclusion proof beyond the tree" GET '/v1/log/proof/inclusion?index=3&size=99999999'
ac 200 "a consistency proof" GET '/v1/log/proof/consistency?old=7&new=256'
ac 400 "a consistency proof from 0" GET '/v1/log/proof/consistency?old=0&new=256'
ac 405 "POST a consistency proof" POST '/v1/log/proof/consistency?old=7&new=256' --json-body '{}'

# ---- the computations docs/API.md defines ----------------------------------------------

R=$TG_TMP/receipt.json
tg_eq "$(printf '%s' "$PERMIT" | canon_sha)" "$(jq -r .requestHash "$R")" \
    "requestHash = SHA-256 of the canonical request without idempotency_key"
tg_eq "$(jq -r .request_hash "$TG_TMP/permit.json")" "$(jq -r .requestHash "$R")" "request_hash = receipt.requestHash"
tg_eq "$(jq -c 'del(.receiptHash, .authoritySignature, .authorityKeyId)' "$R" | canon_sha)" \
    "$(jq -r .receiptHash "$R")" "receiptHash = SHA-256 of the canonical receipt without the three signature members"
tg_eq "$(printf '%s' "$PERMIT" | jq -c .context | canon_sha)" "$(jq -r .executionContextHash "$R")" \
    "executionContextHash = SHA-256 of the canonical context"
tg_eq "$(jq -c '{protocolVersion, engineVersion, policyHash}' "$R" | canon_sha)" \
    "$(jq -r .protocolFingerprint "$R")" "protocolFingerprint = SHA-256 of canonical {protocolVersion, engineVersion, policyHash}"
WANT_EXEC=$("$TG_PY" -c '
import hashlib, sys
t, s, rh, k = sys.argv[1:5]
print("exec_" + hashlib.sha256(b"\0".join(x.encode() for x in (t, s, rh, k))).hexdigest()[:32])
' acme payments.charge "$(jq -r .requestHash "$R")" ac-k1)
tg_eq "$EXEC_ID" "$WANT_EXEC" "executionId for an idempotency key (SPEC §5)"
tg_eq "$(jq -r .executionId "$R")" "$EXEC_ID" "receipt.executionId = execution_id"
"$TG_PY" -c '
import base64, json, sys
r = json.load(open(sys.argv[1]))
open(sys.argv[2], "wb").write(bytes.fromhex(r["receiptHash"]))
open(sys.argv[3], "wb").write(base64.b64decode(r["authoritySignature"], validate=True))
' "$R" "$TG_TMP/hash.bin" "$TG_TMP/sig.bin" || tg_fail "cannot decode receiptHash and authoritySignature"
openssl pkey -in "$TG_KEY" -pubout -out "$TG_TMP/pub.pem" 2>"$TG_TMP/openssl.err" ||
    tg_fail "openssl could not read the key: $(cat "$TG_TMP/openssl.err")"
tg_check "authoritySignature is Ed25519 over the 32 bytes of receiptHash (openssl)" \
    openssl pkeyutl -verify -pubin -inkey "$TG_TMP/pub.pem" -rawin -in "$TG_TMP/hash.bin" \
    -sigfile "$TG_TMP/sig.bin" -out /dev/null
tg_eq "$(jq -r '.keys[0].publicKeyPem' "$TG_TMP/keys.json")" "$(cat "$TG_TMP/pub.pem")" \
    "keys.json serves the signing key's public key"

# ---- the /decide-only listener -------------------------------------------------------

TG_URL="http://127.0.0.1:$DECIDE_PORT"
AC_LISTENER=decide
acp 200 "decide on --decide-port" /decide "$PERMIT"
ac 404 "healthz on --decide-port" GET /healthz
acp 404 "evaluate on --decide-port" /v1/evaluate "$PERMIT"
AC_LISTENER=main
tg_use main

# POST /protocol/verify-signature (SPEC §14): the signature alone
RHASH=$(jq -r .receiptHash "$TG_TMP/receipt.json")
RSIG=$(jq -r .authoritySignature "$TG_TMP/receipt.json")
RKID=$(jq -r .authorityKeyId "$TG_TMP/receipt.json")
ac 200 "verify-signature: a good signature" POST /protocol/verify-signature \
    --json-body "{\"receiptHash\":\"$RHASH\",\"authoritySignature\":\"$RSIG\",\"authorityKeyId\":\"$RKID\"}"
tg_expect_py 'j["valid"] is True and j["reason"] == "valid" and j["type"] == "verify_signature"' "verify-signature valid"
ac 200 "verify-signature: an unknown key" POST /protocol/verify-signature \
    --json-body "{\"receiptHash\":\"$RHASH\",\"signature\":\"$RSIG\",\"keyId\":\"nobody\"}"
tg_expect_py 'j["valid"] is False and j["reason"] == "unknown_key"' "verify-signature unknown_key"
ac 400 "verify-signature: an unknown member" POST /protocol/verify-signature --json-body '{"x":1}'
ac 415 "verify-signature: text/plain" POST /protocol/verify-signature -H "Content-Type: text/plain" --data-binary '{}'
ac 405 "GET /protocol/verify-signature" GET /protocol/verify-signature
# observe mode asked for by a token without "observe": true (SPEC §11.1)
ac 403 "observe mode without the grant" POST /v1/evaluate "${TG_AUTH_A[@]}" \
    --json-body "$(tg_req_json permit ',"executionMode":"observe"')"
tg_expect_py 'j["error"] == "observe_not_allowed"' "observe_not_allowed"

# ---- limits: 429 with the rate-limit headers -------------------------------------------

# One request a minute and a burst of one: two pass, the third is refused for a minute, so
# the outcome does not depend on how fast this machine is. One tenant per decision route
# (their limits are per tenant); the verify limit is one for all callers and routes.
tg_start lim TRIGGUARD_API_KEYS="r1:tok-r1,r2:tok-r2,r3:tok-r3" RATE_LIMIT_PER_TENANT=1 \
    RATE_LIMIT_BURST=1 RATE_LIMIT_VERIFY=1 -- \
    --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-lim" --log-format json --threads 2
i=0
for route in /v1/evaluate /execute /decide; do
    i=$((i + 1))
    auth=(-H "Authorization: Bearer tok-r$i")
    ac 200 "$route: within the rate" POST "$route" "${auth[@]}" --json-body "$(tg_req_json example)"
    tg_check "$route: RateLimit-Policy is sent" tg_has_header RateLimit-Policy
    ac 200 "$route: within the burst" POST "$route" "${auth[@]}" --json-body "$(tg_req_json example)"
    ac 429 "$route: over the rate" POST "$route" "${auth[@]}" --json-body "$(tg_req_json example)"
    # About a minute: what is left of it when the third request comes (a loaded machine may
    # take seconds between the requests, which is not what this checks).
    ra=$(tg_header Retry-After)
    tg_check "$route 429: Retry-After $ra is within the minute" test "${ra:-0}" -ge 30 -a "${ra:-0}" -le 60
done
ac 200 "/v1/verify within the verify rate" POST /v1/verify --json-body '{}'
ac 200 "/verify-receipt within the verify burst" POST /verify-receipt --json-body '{}'
for route in /v1/verify /verify-receipt /protocol/verify-receipt; do
    ac 429 "$route over the verify rate" POST "$route" --json-body '{}'
done
tg_stop lim

# ---- tokens bound to principals: 403s -----------------------------------------------------

# A tokens file with a bound caller and an approver (docs/OPERATIONS.md, "Tenants and
# tokens"): refusals by role, surface and actor are error bodies, never decisions.
cat >"$TG_TMP/tokens.json" <<EOF
[{"tenant": "acme", "token_sha256": "$(printf %s tok-bound | sha256sum | cut -c1-64)",
  "subject": "bound", "actors": ["agent.billing"], "surfaces": ["payments.charge"]},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-appr | sha256sum | cut -c1-64)",
  "subject": "reviewer", "role": "approver"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-admin | sha256sum | cut -c1-64)",
  "subject": "operator", "role": "admin"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-exec | sha256sum | cut -c1-64)",
  "subject": "runner", "role": "executor"},
 {"tenant": "beta", "token_sha256": "$(printf %s tok-bexec | sha256sum | cut -c1-64)",
  "subject": "beta-runner", "role": "executor"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-obs | sha256sum | cut -c1-64)",
  "subject": "observer", "observe": true}]
EOF
tg_start bound TRIGGUARD_API_KEYS= -- --policy "$TG_POLICY" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-bound" --tokens "$TG_TMP/tokens.json" --log-format json --threads 2
BOUND=(-H "Authorization: Bearer tok-bound")
APPR=(-H "Authorization: Bearer tok-appr")
ac 200 "evaluate with a bound token and no actor" POST /v1/evaluate "${BOUND[@]}" \
    --json-body '{"surface":"payments.charge","context":{"amount":10,"currency":"USD"}}'
tg_jget BOUND_EXEC 'j["execution_id"]'
ac 403 "evaluate on a surface the token is not bound to" POST /v1/evaluate "${BOUND[@]}" \
    --json-body "$(tg_req_json example)"
tg_expect_py 'j["error"] == "surface_not_allowed"' "surface_not_allowed"
ac 403 "execute as an actor the token is not bound to" POST /execute "${BOUND[@]}" \
    --json-body '{"surface":"payments.charge","actor":"agent.treasury","context":{"amount":10,"currency":"USD"}}'
tg_expect_py 'j["error"] == "actor_not_allowed"' "actor_not_allowed"
OBS=(-H "Authorization: Bearer tok-obs")
for route in /v1/evaluate /execute; do
    for kind in permit deny silence; do
        ac 200 "$route: observe mode, $kind" POST "$route" "${OBS[@]}" \
            --json-body "$(tg_req_json "$kind" ',"executionMode":"observe"')"
        tg_expect_py 'j["enforcement"] == "NOT_ENFORCED" and j["receipt"]["executionMode"] == "observe"' "$route observe $kind"
    done
done
ac 200 "verify an observe response" POST /v1/verify --json-body "$(cat "$TG_BODY_FILE")"
tg_expect_py 'j["valid"] is True and j["authorizes"] is False and j["reason"] == "observe_mode"' "observe_mode"
ac 403 "decide with an approver token" POST /decide "${APPR[@]}" --json-body "$PERMIT"
tg_expect_py 'j["error"] == "role_not_allowed"' "role_not_allowed"
ac 403 "an approver may not read receipts" GET "/v1/receipts/$BOUND_EXEC" "${APPR[@]}"
tg_expect_py 'j["error"] == "role_not_allowed"' "role_not_allowed on receipts"

# ---- redemption (executor tokens) ---------------------------------------------------------
EXEC=(-H "Authorization: Bearer tok-exec")
tg_req POST /v1/evaluate "${BOUND[@]}" --json-body '{"surface":"payments.charge","context":{"amount":10,"currency":"USD"}}'
tg_jget RH 'j["request_hash"]'
RB="{\"request_hash\":\"$RH\"}"
ac 401 "redeem without a token" POST "/v1/receipts/$BOUND_EXEC/redeem" --json-body "$RB"
ac 403 "redeem with a caller token" POST "/v1/receipts/$BOUND_EXEC/redeem" "${BOUND[@]}" --json-body "$RB"
ac 404 "redeem another tenant's receipt" POST "/v1/receipts/$BOUND_EXEC/redeem" \
    -H "Authorization: Bearer tok-bexec" --json-body "$RB"
ac 404 "redeem an id that is not one" POST /v1/receipts/exec_zz/redeem "${EXEC[@]}" --json-body "$RB"
ac 400 "redeem with an unknown member" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" \
    --json-body "{\"request_hash\":\"$RH\",\"x\":1}"
ac 400 "redeem with a body that is not JSON" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" --json-body '{'
ac 415 "redeem with text/plain" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" \
    -H "Content-Type: text/plain" --data-binary "$RB"
ac 413 "redeem with a body over --max-body" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" \
    -H "Content-Type: application/json" --data-binary "@$TG_TMP/big.json"
ac 405 "GET the redeem route" GET "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}"
ac 422 "redeem for another request" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" \
    --json-body "{\"request_hash\":\"$(printf '%064d' 0)\"}"
ac 200 "redeem a PERMIT receipt" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" --json-body "$RB"
ac 409 "redeem it again" POST "/v1/receipts/$BOUND_EXEC/redeem" "${EXEC[@]}" --json-body "$RB"
tg_expect_py 'j["error"] == "receipt_already_redeemed"' "receipt_already_redeemed"
tg_req POST /v1/evaluate "${BOUND[@]}" --json-body '{"surface":"payments.charge","context":{"amount":20000,"currency":"USD"},"signals":{"riskScore":0.2}}'
tg_jget DENY_EXEC 'j["execution_id"]'
tg_jget DENY_RH 'j["request_hash"]'
ac 409 "redeem a DENY receipt" POST "/v1/receipts/$DENY_EXEC/redeem" "${EXEC[@]}" \
    --json-body "{\"request_hash\":\"$DENY_RH\"}"
tg_expect_py 'j["error"] == "receipt_not_permit"' "receipt_not_permit"
ADMIN=(-H "Authorization: Bearer tok-admin")
ac 200 "admin reload" POST /v1/admin/reload "${ADMIN[@]}"
tg_expect_py 'j["result"] == "ok" and j["reloaded"] == ["policy", "tokens", "keys"]' "admin reload: every part"
ac 401 "admin reload without a token" POST /v1/admin/reload
ac 403 "admin reload with a caller token" POST /v1/admin/reload "${BOUND[@]}"
tg_expect_py 'j["error"] == "role_not_allowed"' "role_not_allowed on admin reload"
ac 405 "GET /v1/admin/reload" GET /v1/admin/reload "${ADMIN[@]}"
ac 200 "version after a reload" GET /version
tg_expect_py 'j["last_reload"]["trigger"] == "admin"' "version: last_reload"
tg_stop bound
tg_start shortttl TRIGGUARD_API_KEYS= -- --policy "$TG_POLICY" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-shortttl" --tokens "$TG_TMP/tokens.json" --log-format json \
    --threads 2 --receipt-ttl 1
tg_req POST /v1/evaluate "${BOUND[@]}" --json-body '{"surface":"payments.charge","context":{"amount":10,"currency":"USD"}}'
tg_jget SHORT_EXEC 'j["execution_id"]'
tg_jget SHORT_RH 'j["request_hash"]'
sleep 1.2
ac 410 "redeem an expired receipt" POST "/v1/receipts/$SHORT_EXEC/redeem" "${EXEC[@]}" \
    --json-body "{\"request_hash\":\"$SHORT_RH\"}"
tg_stop shortttl

# ---- approvals (ESCALATE, SPEC §11.2) ------------------------------------------------------

# The test policy plus deploy.prod, whose "api" service needs two release managers.
python3 - "$TG_POLICY" "$TG_TMP/policy-appr.json" <<'PY2'
import json, sys
p = json.load(open(sys.argv[1]))
p["surfaces"]["deploy.prod"] = {
    "tier": 3, "required_context": {"service": "string"}, "default": "permit",
    "rules": [{"id": "needs-two", "effect": "escalate", "reason": "TWO_PERSON_RULE",
               "when": [{"field": "context.service", "op": "eq", "value": "api"}],
               "approval": {"required": 2, "approvers": ["@release-managers"]}}]}
json.dump(p, open(sys.argv[2], "w"))
PY2
cat >"$TG_TMP/tokens-appr.json" <<EOF
[{"tenant": "acme", "token_sha256": "$(printf %s tok-ci | sha256sum | cut -c1-64)", "subject": "ci"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-alice | sha256sum | cut -c1-64)",
  "subject": "alice", "role": "approver", "groups": ["release-managers"]},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-bob | sha256sum | cut -c1-64)",
  "subject": "bob", "role": "approver", "groups": ["release-managers"]},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-carol | sha256sum | cut -c1-64)",
  "subject": "carol", "role": "approver", "groups": ["release-managers"]},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-eve | sha256sum | cut -c1-64)",
  "subject": "eve", "role": "approver", "groups": ["auditors"]}]
EOF
tg_start appr TRIGGUARD_API_KEYS= -- --policy "$TG_TMP/policy-appr.json" --key "$TG_KEY" \
    --ledger "$TG_TMP/ledger-appr" --tokens "$TG_TMP/tokens-appr.json" --log-format json --threads 2
CI=(-H "Authorization: Bearer tok-ci")
ALICE=(-H "Authorization: Bearer tok-alice")
BOB=(-H "Authorization: Bearer tok-bob")
CAROL=(-H "Authorization: Bearer tok-carol")
EVE=(-H "Authorization: Bearer tok-eve")
ESC='{"surface":"deploy.prod","action":"deploy","actor":"ci","context":{"service":"api"}'
ac 200 "evaluate: ESCALATE" POST /v1/evaluate "${CI[@]}" --json-body "$ESC,\"idempotency_key\":\"ac-e1\"}"
tg_jget AID 'j["approval_id"]'
tg_jget AH 'j["request_hash"]'
ac 200 "verify an ESCALATE response" POST /v1/verify --json-body "$(cat "$TG_BODY_FILE")"
tg_expect_py 'j["valid"] is True and j["authorizes"] is False and j["reason"] == "pending_approval"' "pending_approval"
ac 403 "execute: ESCALATE" POST /execute "${CI[@]}" --json-body "$ESC,\"idempotency_key\":\"ac-e2\"}"
tg_expect_py 'j["decision"] == "ESCALATE"' "execute's 403 is the ESCALATE decision"
ac 200 "list pending approvals" GET "/v1/approvals?status=pending" "${ALICE[@]}"
ac 400 "list with an unknown status" GET "/v1/approvals?status=nope" "${ALICE[@]}"
ac 401 "list without a token" GET "/v1/approvals?status=pending"
ac 403 "list with a caller token" GET "/v1/approvals?status=pending" "${CI[@]}"
ac 200 "get an approval" GET "/v1/approvals/$AID" "${CI[@]}"
ac 404 "get an unknown approval" GET /v1/approvals/appr_00000000000000000000000000000000 "${CI[@]}"
tg_expect_py 'j["error"] == "approval_not_found"' "approval_not_found"
ac 401 "get without a token" GET "/v1/approvals/$AID"
RV="{\"request_hash\":\"$AH\"}"
ac 401 "approve without a token" POST "/v1/approvals/$AID/approve" --json-body "$RV"
ac 403 "approve with a caller token" POST "/v1/approvals/$AID/approve" "${CI[@]}" --json-body "$RV"
ac 403 "approve by an approver the rule does not list" POST "/v1/approvals/$AID/approve" "${EVE[@]}" --json-body "$RV"
tg_expect_py 'j["error"] == "not_an_approver"' "not_an_approver"
ac 404 "approve an unknown approval" POST /v1/approvals/appr_00000000000000000000000000000000/approve "${ALICE[@]}" --json-body "$RV"
ac 400 "approve with an unknown member" POST "/v1/approvals/$AID/approve" "${ALICE[@]}" --json-body "{\"request_hash\":\"$AH\",\"x\":1}"
ac 415 "approve with text/plain" POST "/v1/approvals/$AID/approve" "${ALICE[@]}" -H "Content-Type: text/plain" --data-binary "$RV"
ac 422 "approve another request" POST "/v1/approvals/$AID/approve" "${ALICE[@]}" --json-body "{\"request_hash\":\"$(printf '%064d' 0)\"}"
ac 405 "GET the approve route" GET "/v1/approvals/$AID/approve" "${ALICE[@]}"
ac 200 "approve" POST "/v1/approvals/$AID/approve" "${ALICE[@]}" --json-body "{\"request_hash\":\"$AH\",\"comment\":\"ok\"}"
ac 409 "approve twice" POST "/v1/approvals/$AID/approve" "${ALICE[@]}" --json-body "$RV"
tg_expect_py 'j["error"] == "already_reviewed"' "already_reviewed"
ac 200 "the second approval" POST "/v1/approvals/$AID/approve" "${BOB[@]}" --json-body "$RV"
tg_expect_py 'j["status"] == "approved"' "approved"
ac 409 "deny an approved approval" POST "/v1/approvals/$AID/deny" "${CAROL[@]}" --json-body "$RV"
tg_expect_py 'j["error"] == "approval_closed"' "approval_closed"
ac 422 "resume with the approval of another request" POST /v1/evaluate "${CI[@]}" \
    --json-body "{\"surface\":\"deploy.prod\",\"action\":\"deploy\",\"actor\":\"ci\",\"context\":{\"service\":\"api\",\"x\":1},\"approval_id\":\"$AID\"}"
ac 200 "resume: PERMIT" POST /execute "${CI[@]}" --json-body "$ESC,\"idempotency_key\":\"ac-r1\",\"approval_id\":\"$AID\"}"
tg_expect_py 'j["decision"] == "PERMIT" and j["receipt"]["approvalId"] == j["approval_id"]' "the resumed PERMIT"
ac 409 "resume again" POST /v1/evaluate "${CI[@]}" --json-body "$ESC,\"idempotency_key\":\"ac-r2\",\"approval_id\":\"$AID\"}"
tg_expect_py 'j["error"] == "approval_consumed"' "approval_consumed"
ac 200 "ESCALATE for a deny" POST /v1/evaluate "${CI[@]}" \
    --json-body '{"surface":"deploy.prod","action":"deploy","actor":"ci","context":{"service":"api","v":2}}'
tg_jget AID2 'j["approval_id"]'
tg_jget AH2 'j["request_hash"]'
ac 200 "deny" POST "/v1/approvals/$AID2/deny" "${CAROL[@]}" --json-body "{\"request_hash\":\"$AH2\"}"
tg_expect_py 'j["status"] == "denied"' "denied"
ac 200 "list denied approvals" GET "/v1/approvals?status=denied&limit=1" "${ALICE[@]}"
tg_stop appr

# ---- no signing key, a tiny idempotency table: 503s -------------------------------------

tg_start nokey -- --policy "$TG_POLICY" --ledger "$TG_TMP/ledger-nokey" --store-max-entries 16 \
    --log-format json --threads 2
ac 503 "readyz without a signing key" GET /readyz
tg_expect_py 'j["ready"] is False and j["signing_key"] is False' "readyz says what is missing"
ac 503 "keys.json without a key" GET /.well-known/trigguard/keys.json
acp 503 "evaluate PERMIT without a signing key" /v1/evaluate "$PERMIT"
tg_expect_py 'j["error"] == "keys_unavailable"' "keys_unavailable"
acp 503 "execute PERMIT without a signing key" /execute "$PERMIT"
acp 200 "decide needs no key" /decide "$PERMIT"
for i in $(seq 1 16); do
    tg_post /v1/evaluate "$(tg_req_json silence ",\"idempotency_key\":\"fill-$i\"")"
    [ "$TG_STATUS" == 200 ] || tg_fail "filling the idempotency table: request $i got $TG_STATUS"
done
acp 503 "evaluate with the idempotency table full" /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"fill-x"')"
tg_expect_py 'j["error"] == "overloaded"' "a full table is overloaded"
tg_check "503 overloaded: Retry-After" tg_has_header Retry-After
ac 404 "no transparency log: the checkpoint" GET /v1/log/checkpoint
tg_expect_py 'j["error"] == "log_disabled"' "log_disabled without --log-key"
ac 404 "no transparency log: a proof" GET '/v1/log/proof/inclusion?index=0&size=1'
tg_expect_py 'j["error"] == "log_disabled"' "log_disabled on the proofs too"
tg_stop nokey
tg_stop main

# ---- every kept exchange against docs/openapi.yaml ----------------------------------------

if "$TG_PY" "$TG_PYLIB/openapi_check.py" "$TG_SRC/docs/openapi.yaml" "$AC_DIR" >"$TG_TMP/check.out" 2>&1; then
    tg_pass "every response matches docs/openapi.yaml"
else
    tg_fail "responses that do not match docs/openapi.yaml:
$(cat "$TG_TMP/check.out")"
fi
tg_log "$(tail -1 "$TG_TMP/check.out")"
tg_done
