#!/usr/bin/env bash
# daemon_redeem.sh — POST /v1/receipts/{executionId}/redeem (issue 20) against the real
# daemon: an executor redeems a PERMIT receipt once (200), never twice (409), not for another
# action (422), not once expired (410), never a DENY (409), only with an executor token of
# the receipt's tenant (403 / 404 / 401), only with a strict body (400/415); 20 concurrent
# redemptions give one 200; a redemption survives a restart and a kill -9 right after its
# 200; a receipt whose key left the key set is not redeemable; the ledger verifies with its
# redemptions and `ledger verify` catches a forged second one. Also run on --store
# postgres (integration_pg_daemon_redeem).
source "$(dirname "$0")/lib/daemon.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOF
[
  {"tenant": "acme", "token_sha256": "$(sha tok-acme)", "subject": "caller"},
  {"tenant": "acme", "token_sha256": "$(sha tok-exec)", "subject": "runner", "role": "executor"},
  {"tenant": "acme", "token_sha256": "$(sha tok-admin)", "subject": "ops", "role": "admin",
   "observe": false},
  {"tenant": "beta", "token_sha256": "$(sha tok-beta)", "subject": "beta-caller"},
  {"tenant": "beta", "token_sha256": "$(sha tok-bexec)", "subject": "beta-runner", "role": "executor"}
]
EOF
chmod 600 "$TOKENS"
tg_std_args main
ARGS=("${TG_STD_ARGS[@]}" --tokens "$TOKENS")
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"

# redeem TOKEN EXEC_ID BODY [curl args]: one redemption ("" TOKEN: no Authorization).
redeem() {
    local tok=$1 id=$2 body=$3
    shift 3
    local -a auth=()
    [ -n "$tok" ] && auth=(-H "Authorization: Bearer $tok")
    tg_req POST "/v1/receipts/$id/redeem" "${auth[@]}" --json-body "$body" "$@"
}
hashbody() { printf '{"request_hash":"%s"}' "$1"; }
# permit_receipt VAR_ID VAR_HASH [extra members]: a fresh PERMIT of acme; its id and hash.
permit_receipt() {
    tg_post /v1/evaluate "$(tg_req_json permit "${3:-}")"
    tg_expect_py "j['decision'] == 'PERMIT'" "a PERMIT to redeem"
    tg_jget "$1" 'j["execution_id"]'
    tg_jget "$2" 'j["request_hash"]'
}
redeemed_total() {
    curl -s --max-time 5 "$TG_URL/metrics" |
        awk -v r="$1" '$1 == "trigguard_redemptions_total{result=\"" r "\"}" {print $2}'
}

tg_req GET /protocol/capabilities
tg_expect_py "'POST /v1/receipts/{executionId}/redeem' in j['endpoints']" "capabilities list the route"

# ---- the executor's side: the request hash of the action it is about to run -----------

tg_req_json permit >"$TG_TMP/action.json"
"$TG_BIN" check --policy "$TG_POLICY" "$TG_TMP/action.json" >"$TG_TMP/check.out" 2>&1
MYHASH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["request_hash"])' "$TG_TMP/check.out")
tg_post /v1/evaluate "$(cat "$TG_TMP/action.json")"
tg_jget ID1 'j["execution_id"]'
tg_jget H1 'j["request_hash"]'
tg_eq "$MYHASH" "$H1" "trigguard check computes the receipt's request hash from the action"

# ---- once, then never again -------------------------------------------------------------

redeem tok-exec "$ID1" "$(hashbody "$MYHASH")"
tg_expect_status 200 "the first redemption"
tg_expect_py "j['redeemed'] is True and j['execution_id'] == '$ID1' and j['request_hash'] == '$H1' and j['receipt']['executionId'] == '$ID1' and j['receipt']['decision'] == 'PERMIT' and iso(j['redeemed_at']) is not None" \
    "200 body: redeemed, execution_id, request_hash, redeemed_at, the receipt"
tg_expect_py "h.get('content-type','').startswith('application/json')" "200 is JSON"
redeem tok-exec "$ID1" "$(hashbody "$MYHASH")"
tg_expect_error 409 receipt_already_redeemed "the second redemption"
tg_req GET "/v1/receipts/$ID1" -H "Authorization: Bearer tok-exec"
tg_expect_status 200 "a redeemed receipt is still readable"

# ---- what is not redeemable ----------------------------------------------------------------

permit_receipt ID2 H2
OTHER=$(printf '%064d' 0)
redeem tok-exec "$ID2" "$(hashbody "$OTHER")"
tg_expect_error 422 request_hash_mismatch "a receipt for another action"
redeem tok-exec "$ID2" "$(hashbody "$H2")"
tg_expect_status 200 "a mismatch did not use the receipt up"

tg_post /v1/evaluate "$(tg_req_json deny)"
tg_expect_py "j['decision'] == 'DENY'" "a DENY receipt"
tg_jget IDD 'j["execution_id"]'
tg_jget HD 'j["request_hash"]'
redeem tok-exec "$IDD" "$(hashbody "$HD")"
tg_expect_error 409 receipt_not_permit "a DENY is never redeemed"

tg_post /v1/evaluate "$(tg_req_json silence)"
tg_jget IDS 'j["execution_id"]'
tg_jget HS 'j["request_hash"]'
redeem tok-exec "$IDS" "$(hashbody "$HS")"
tg_expect_error 404 not_found "a SILENCE has no receipt"
redeem tok-exec "exec_00000000000000000000000000000000" "$(hashbody "$HS")"
tg_expect_error 404 not_found "an unknown executionId"
redeem tok-exec "garbage" "$(hashbody "$HS")"
tg_expect_error 404 not_found "an id that is not one"

# ---- who may redeem ---------------------------------------------------------------------------

permit_receipt ID3 H3
redeem tok-acme "$ID3" "$(hashbody "$H3")"
tg_expect_error 403 role_not_allowed "a caller token may not redeem"
tg_expect_py "'executor' in j['message']" "the 403 names the role that may"
redeem tok-admin "$ID3" "$(hashbody "$H3")"
tg_expect_error 403 role_not_allowed "an admin token may not redeem"
redeem tok-bexec "$ID3" "$(hashbody "$H3")"
tg_expect_error 404 not_found "another tenant's executor sees no such receipt"
redeem "" "$ID3" "$(hashbody "$H3")"
tg_expect_error 401 unauthorized "no token"
redeem tok-nobody "$ID3" "$(hashbody "$H3")"
tg_expect_error 401 unauthorized "an unknown token"

# ---- bodies ---------------------------------------------------------------------------------

for body in '' '{}' '[]' '"x"' '{"request_hash":1}' "{\"request_hash\":\"${H3^^}\"}" \
    "{\"request_hash\":\"${H3:0:63}\"}" "{\"request_hash\":\"${H3}0\"}" \
    "{\"request_hash\":\"$H3\",\"extra\":1}" "{\"request_hash\":\"$H3\",\"request_hash\":\"$H3\"}" \
    '{"request_hash":"' "{\"requestHash\":\"$H3\"}"; do
    redeem tok-exec "$ID3" "$body"
    tg_expect_py "s == 400 and j['error'] in ('invalid_request', 'invalid_json')" "bad body $body: 400"
done
tg_req POST "/v1/receipts/$ID3/redeem" -H "Authorization: Bearer tok-exec" \
    -H "Content-Type: text/plain" --data-binary "$(hashbody "$H3")"
tg_expect_error 415 unsupported_media_type "a body that is not JSON by its type"
head -c 70000 /dev/zero | tr '\0' ' ' >"$TG_TMP/big.body"
tg_req POST "/v1/receipts/$ID3/redeem" -H "Authorization: Bearer tok-exec" \
    -H "Content-Type: application/json" --data-binary "@$TG_TMP/big.body"
tg_expect_error 413 body_too_large "a body over --max-body"
tg_req GET "/v1/receipts/$ID3/redeem" -H "Authorization: Bearer tok-exec"
tg_expect_error 405 method_not_allowed "GET on the redeem route"
tg_expect_header Allow POST "405 says POST"
tg_req POST "/v1/receipts/$ID3/redeem/x" -H "Authorization: Bearer tok-exec" --json-body "$(hashbody "$H3")"
tg_expect_error 404 not_found "a longer path is no route"
redeem tok-exec "$ID3" "$(hashbody "$H3")"
tg_expect_status 200 "after all that, the receipt is still redeemable once"

# ---- a caller cannot take the server's claims -------------------------------------------------

tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"tg:redeem:'"$ID3"'"')"
tg_expect_error 400 invalid_request "a nonce in the server's namespace is refused"

# ---- 20 at once: one 200 ----------------------------------------------------------------------

permit_receipt ID4 H4
CURLS=()
for i in $(seq 1 20); do
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 -X POST \
        -H "Authorization: Bearer tok-exec" -H "Content-Type: application/json" \
        --data-binary "$(hashbody "$H4")" "$TG_URL/v1/receipts/$ID4/redeem" >"$TG_TMP/conc.$i" &
    CURLS+=($!)
done
wait "${CURLS[@]}" # not a bare wait: the daemon and the evaluator are children too
tg_eq "$(cat "$TG_TMP"/conc.* | grep -c '^200$')" 1 "20 concurrent redemptions: exactly one 200"
tg_eq "$(cat "$TG_TMP"/conc.* | grep -c '^409$')" 19 "20 concurrent redemptions: 19 answers 409"

tg_eq "$(redeemed_total redeemed)" 4 "/metrics: 4 redeemed"
tg_eq "$(redeemed_total already_redeemed)" 20 "/metrics: 20 already redeemed"
tg_eq "$(redeemed_total request_hash_mismatch)" 1 "/metrics: 1 hash mismatch"
tg_eq "$(redeemed_total not_permit)" 1 "/metrics: 1 not a PERMIT"

# ---- restarts -------------------------------------------------------------------------------

permit_receipt ID5 H5
tg_stop main
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"
redeem tok-exec "$ID1" "$(hashbody "$H1")"
tg_expect_error 409 receipt_already_redeemed "after a restart: still redeemed"
redeem tok-exec "$ID5" "$(hashbody "$H5")"
tg_expect_status 200 "after a restart: an unredeemed receipt redeems"
kill -KILL "$(tg_pid main)"
wait "$(tg_pid main)" 2>/dev/null
unset "TG_PIDS[main]"
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS[@]}"
redeem tok-exec "$ID5" "$(hashbody "$H5")"
tg_expect_error 409 receipt_already_redeemed "kill -9 right after the 200, restart: 409"
redeem tok-exec "$ID4" "$(hashbody "$H4")"
tg_expect_error 409 receipt_already_redeemed "the concurrent one too"

# ---- a receipt that no longer verifies ---------------------------------------------------------

permit_receipt ID6 H6
tg_stop main
tg_keygen "$TG_TMP/key2.pem" itest-key-2
ARGS2=()
prev=""
for a in "${ARGS[@]}"; do
    [ "$prev" == "--key" ] && a=$TG_TMP/key2.pem
    ARGS2+=("$a")
    prev=$a
done
tg_start main TRIGGUARD_API_KEYS= -- "${ARGS2[@]}"
redeem tok-exec "$ID6" "$(hashbody "$H6")"
tg_expect_error 409 receipt_not_authentic "its signing key left the key set: not redeemable"
tg_stop main

# ---- the ledger (file backend) ----------------------------------------------------------------

if [ "${TG_TEST_STORE:-file}" != postgres ]; then
    L=$TG_TMP/ledger-main
    "$TG_BIN" ledger verify "$L" --key "$TG_KEY" >"$TG_TMP/verify.out" 2>&1
    tg_eq "$?" 0 "ledger verify: the daemon's ledger with its redemptions"
    tg_check "ledger verify counts 5 redemptions" grep -q "5 redemptions" "$TG_TMP/verify.out"
    # a forged second redemption of ID1 (its record copied): caught
    "$TG_BIN" ledger dump "$L" >"$TG_TMP/dump.out" 2>&1
    python3 - "$TG_TMP/dump.out" "$TG_TMP/forged" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "redemption":
        open(sys.argv[2] + ".meta", "w").write(bytes.fromhex(r["meta_hex"]).decode())
        open(sys.argv[2] + ".json", "w").write(json.dumps(r["payload"], separators=(",", ":")))
        break
PY
    cp -r "$L" "$TG_TMP/forged-ledger"
    "$TG_BIN" ledger append "$TG_TMP/forged-ledger" --redemption --meta "$(cat "$TG_TMP/forged.meta")" \
        "$TG_TMP/forged.json" >/dev/null 2>&1
    "$TG_BIN" ledger verify "$TG_TMP/forged-ledger" >"$TG_TMP/forged.out" 2>&1
    tg_eq "$?" 1 "ledger verify: a receipt redeemed twice is a fault"
    tg_check "the fault says so" grep -q "redeemed a second time" "$TG_TMP/forged.out"
    # a redemption of a DENY receipt: caught
    python3 - "$TG_TMP/forged" "$IDD" "$HD" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + ".meta"))
p = json.load(open(sys.argv[1] + ".json"))
m["n"] = "tg:redeem:" + sys.argv[2]; m["rh"] = sys.argv[3]
p["executionId"] = sys.argv[2]; p["requestHash"] = sys.argv[3]
open(sys.argv[1] + "-deny.meta", "w").write(json.dumps(m, separators=(",", ":"), sort_keys=True))
open(sys.argv[1] + "-deny.json", "w").write(json.dumps(p, separators=(",", ":"), sort_keys=True))
PY
    cp -r "$L" "$TG_TMP/deny-ledger"
    "$TG_BIN" ledger append "$TG_TMP/deny-ledger" --redemption --meta "$(cat "$TG_TMP/forged-deny.meta")" \
        "$TG_TMP/forged-deny.json" >/dev/null 2>&1
    "$TG_BIN" ledger verify "$TG_TMP/deny-ledger" >"$TG_TMP/deny.out" 2>&1
    tg_eq "$?" 1 "ledger verify: a redeemed DENY is a fault"
    tg_check "the fault says so" grep -q "not a PERMIT receipt" "$TG_TMP/deny.out"
fi

# ---- expiry (its own daemon: --receipt-ttl 1) ---------------------------------------------------

tg_std_args short
tg_start short TRIGGUARD_API_KEYS= -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS" --receipt-ttl 1
permit_receipt ID7 H7
sleep 1.2
redeem tok-exec "$ID7" "$(hashbody "$H7")"
tg_expect_error 410 receipt_expired "an expired receipt"
tg_stop short

tg_done
