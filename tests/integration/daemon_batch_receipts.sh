#!/usr/bin/env bash
# daemon_batch_receipts.sh — batch-signed receipts (SPEC §12, receipt.h "Two kinds"): by flag
# (--receipt-signing batch) and per request ("receiptSigning"), with fsync durability (and
# batch and none); every receipt verified by `trigguard verify` and by the independent Python
# verifier (lib/tlog_verify.py batch), the five mutation classes refused by both; POST
# /v1/verify, GET /v1/receipts/{id} and the idempotent replay (also after a restart) answer
# with the transparency member; --checkpoint pins a newer checkpoint; `log audit` against the
# live daemon and the ledger directory, with a state file that catches a forked log; `ledger
# verify` reproduces the stored checkpoint; a late checkpoint is 503 log_pending and the
# record stays durable. TG_TEST_STORE=postgres runs the parts that are not about ledger files.
# shellcheck source=lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"

"$TG_PY" -c 'import cryptography' 2>/dev/null ||
    tg_die "python3-cryptography is needed (scripts/deps installs it)"
TV=("$TG_PY" "$TG_PYLIB/tlog_verify.py")
FILE_STORE=1
[ "${TG_TEST_STORE:-file}" == postgres ] && FILE_STORE=0

tg_keygen
LOG_KEY=$TG_TMP/log-key.pem
tg_keygen "$LOG_KEY" itest-log-1
ORIGIN=itest.trigguard.test/batch
LOG_ARGS=(--log-key "$LOG_KEY" --log-origin "$ORIGIN" --checkpoint-interval 20)
STATE=$TG_TMP/audit-state.json

# run_ok LABEL CMD...: passes when CMD exits 0; its output is left in OUT.
run_ok() {
    local label=$1
    shift
    if OUT=$("$@" 2>&1); then
        tg_pass "$label ($(tail -1 <<<"$OUT"))"
    else
        tg_fail "$label: $OUT"
    fi
}

# verify_ok LABEL FILE [verify args]: VALID and batch-signed, by trigguard verify and Python.
verify_ok() {
    local label=$1 file=$2 out
    shift 2
    if out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$@" "$file" 2>&1) &&
        grep -q "^VALID; batch-signed: leaf [0-9]* of $ORIGIN at tree size [1-9]" <<<"$out"; then
        tg_pass "$label: trigguard verify"
    else
        tg_fail "$label: trigguard verify said: $out"
    fi
    run_ok "$label: Python verifier" "${TV[@]}" batch "$TG_TMP/keys.json" "$file"
}

# mutant NAME PYTHON REASON: the receipt of $BASE changed by PYTHON (r = the receipt, t = its
# transparency); trigguard verify says INVALID: REASON (exit 1), the Python verifier fails it.
mutant() {
    local name=$1 code=$2 reason=$3 f=$TG_TMP/mutant-$1.json out rc=0
    "$TG_PY" - "$BASE" "$f" "$code" <<'PY' || tg_die "cannot build mutant $name"
import base64, json, sys
r = json.load(open(sys.argv[1]))
t = r["transparency"]
def flip(b64):
    raw = bytearray(base64.b64decode(b64))
    raw[7] ^= 0x40
    return base64.b64encode(bytes(raw)).decode()
exec(sys.argv[3])
json.dump(r, open(sys.argv[2], "w"), ensure_ascii=False)
PY
    out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$f" 2>&1) || rc=$?
    tg_eq "$rc" 1 "mutant $name: trigguard verify exits 1"
    tg_check "mutant $name: INVALID: $reason ($out)" grep -q "^INVALID: $reason " <<<"$out"
    if out=$("${TV[@]}" batch "$TG_TMP/keys.json" "$f" 2>&1); then
        tg_fail "mutant $name: the Python verifier accepted it: $out"
    else
        tg_pass "mutant $name: the Python verifier refuses it"
    fi
}

# ---- configuration -----------------------------------------------------------------------------

refused() { # refused LABEL PATTERN serve-args...
    local label=$1 pat=$2 out rc=0
    shift 2
    out=$(timeout 30 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --check-config \
        --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-refused" "$@" 2>&1) || rc=$?
    tg_eq "$rc" 2 "$label: refused (exit 2)"
    tg_check "$label: says why" grep -q -- "$pat" <<<"$out"
}
refused "--receipt-signing batch without a log" "needs the transparency log" --receipt-signing batch
refused "--receipt-signing bogus" "receipt-signing" --receipt-signing bogus --log-key "$LOG_KEY"

# ---- per request, on a daemon that signs per receipt -----------------------------------------

tg_std_args nolog
tg_start nolog -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"batch"')"
tg_expect_error 400 log_disabled "receiptSigning batch without a log"
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"receipt"')"
tg_expect_py 's == 200 and "authoritySignature" in j["receipt"]' "receiptSigning receipt without a log: signed"
tg_stop nolog

tg_std_args mixed
tg_start mixed -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}"
tg_fetch_keys "$TG_TMP/keys.json"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"m-1"')"
tg_expect_py 's == 200 and "authoritySignature" in j["receipt"] and "transparency" not in j["receipt"]' \
    "default: per-receipt signed, no transparency (v1)"
tg_save_receipt "$TG_TMP/signed.json"
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"batch","idempotency_key":"m-2"')"
tg_expect_py 's == 200 and "transparency" in j["receipt"] and "authoritySignature" not in j["receipt"] and "authorityKeyId" not in j["receipt"]' \
    "receiptSigning batch: transparency, no signature"
cp "$TG_BODY_FILE" "$TG_TMP/mixed-batch.json"
verify_ok "per-request batch receipt (whole response)" "$TG_TMP/mixed-batch.json"
tg_post /v1/evaluate "$(tg_req_json permit ',"receipt_signing":"batch"')"
tg_expect_py 's == 200 and "transparency" in j["receipt"]' "receipt_signing (the alias) batch"
# a transport field: the request hash is the same with or without it
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_jget H1 'j["request_hash"]'
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"batch"')"
tg_jget H2 'j["request_hash"]'
tg_eq "$H2" "$H1" "receiptSigning is not in the request hash"
for v in '"bogus"' '""' '"Batch"' 7; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"receiptSigning\":$v")"
    tg_expect_error 400 invalid_request "receiptSigning $v"
done
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"batch","receipt_signing":"batch"')"
tg_expect_error 400 invalid_request "receiptSigning and its alias together"
tg_check "the signed receipt verifies as before" "$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/signed.json" \
    >/dev/null
tg_stop mixed

# ---- batch mode by flag, fsync ---------------------------------------------------------------

tg_std_args main
MAIN_ARGS=("${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}" --receipt-signing batch --durability fsync)
tg_start main -- "${MAIN_ARGS[@]}"
tg_fetch_keys "$TG_TMP/keys.json"
tg_check "keys.json lists the checkpoint key" "$TG_PY" -c \
    'import json,sys; assert [k["use"] for k in json.load(open(sys.argv[1]))["keys"]] == ["receipt","checkpoint"]' \
    "$TG_TMP/keys.json"
for i in 1 2 3 4 5 6 7 8; do
    kind=permit
    [ $((i % 3)) == 0 ] && kind=deny
    tg_post /v1/evaluate "$(tg_req_json $kind ",\"idempotency_key\":\"b-$i\"")"
    tg_expect_py 's == 200 and "transparency" in j["receipt"] and "authoritySignature" not in j["receipt"]' \
        "batch receipt $i ($kind)"
    tg_save_receipt "$TG_TMP/b-$i.json"
    cp "$TG_BODY_FILE" "$TG_TMP/b-$i.response.json"
done
tg_post /v1/evaluate "$(tg_req_json silence)"
tg_expect_py 's == 200 and j["decision"] == "SILENCE" and "receipt" not in j' "SILENCE: no receipt, as before"
tg_post /execute "$(tg_req_json deny)"
tg_expect_py 's == 403 and "transparency" in j["receipt"]' "/execute DENY: 403 with a batch receipt"
tg_post /v1/evaluate "$(tg_req_json permit ',"receiptSigning":"receipt"')"
tg_expect_py 's == 200 and "authoritySignature" in j["receipt"] and "transparency" not in j["receipt"]' \
    "receiptSigning receipt on a batch daemon: signed"
for i in 1 2 3 4 5 6 7 8; do
    verify_ok "batch receipt $i" "$TG_TMP/b-$i.json"
done
verify_ok "a whole /v1/evaluate response" "$TG_TMP/b-2.response.json"
run_ok "Python: all at once" "${TV[@]}" batch "$TG_TMP/keys.json" "$TG_TMP"/b-*.json

# the five mutation classes of issue 23 (and a few more), on receipt 2 (PERMIT)
BASE=$TG_TMP/b-2.json
tg_check "the base receipt has a proof to mutate" "$TG_PY" -c \
    'import json,sys; assert len(json.load(open(sys.argv[1]))["transparency"]["inclusionProof"]) >= 1' "$BASE"
mutant proof-hash 't["inclusionProof"][0] = flip(t["inclusionProof"][0])' bad_proof
mutant index 't["leafIndex"] = (t["leafIndex"] + 1) % t["treeSize"]' bad_proof
mutant tree-size 't["treeSize"] = t["treeSize"] + 1' bad_proof
mutant field 'r["action"] = "transfer_all_funds"' hash_mismatch
mutant field-and-hash "$(cat <<'PY'
import hashlib
r["action"] = "transfer_all_funds"
body = {k: v for k, v in r.items() if k not in ("receiptHash", "transparency")}
r["receiptHash"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
PY
)" bad_proof
# re-signed by another key of the same name: a C2SP note signature by a key the verifier
# does not know is ignored, so no signature by the log key remains
mutant resigned "$(cat <<'PY'
import hashlib
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
k = Ed25519PrivateKey.generate()
pub = k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
name = t["logOrigin"]
kid = hashlib.sha256(name.encode() + b"\n\x01" + pub).digest()[:4]
text = t["checkpoint"][: t["checkpoint"].rfind("\n\n") + 1]
t["checkpoint"] = text + "\n\u2014 " + name + " " + base64.b64encode(kid + k.sign(text.encode())).decode() + "\n"
PY
)" bad_signature
mutant note-text 't["checkpoint"] = t["checkpoint"].replace("\n", "\nx", 1)' bad_signature
mutant unknown-log 't["logKeyId"] = "00000000"' unknown_key
mutant signature-too 'r["authoritySignature"] = "A" * 86 + "=="' malformed

# POST /v1/verify, GET /v1/receipts/{id}
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/b-1.json")"
tg_expect_py 's == 200 and j["valid"] is True and j["authorizes"] is True and j["reason"] == "valid"' \
    "POST /v1/verify: a batch PERMIT is valid and authorizes"
tg_req POST /v1/verify --json-body "$(cat "$TG_TMP/mutant-proof-hash.json")"
tg_expect_py 's == 200 and j["valid"] is False and j["reason"] == "bad_proof"' "POST /v1/verify: bad_proof"
tg_jget_file() { "$TG_PY" -c 'import json,sys; print(eval(sys.argv[2], {"j": json.load(open(sys.argv[1]))}))' "$@"; }
EXEC1=$(tg_jget_file "$TG_TMP/b-1.json" 'j["executionId"]')
HASH1=$(tg_jget_file "$TG_TMP/b-1.json" 'j["receiptHash"]')
tg_req GET "/v1/receipts/$EXEC1" "${TG_AUTH_A[@]}"
tg_expect_py "s == 200 and j['receiptHash'] == '$HASH1' and 'transparency' in j" \
    "GET /v1/receipts/{id}: the batch receipt with its transparency"
cp "$TG_BODY_FILE" "$TG_TMP/get-1.json"
verify_ok "GET /v1/receipts/{id}" "$TG_TMP/get-1.json"
# the idempotent replay: the same receipt, its proof from the newest checkpoint
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"b-1"')"
tg_expect_py "s == 200 and j['receipt']['receiptHash'] == '$HASH1' and 'transparency' in j['receipt']" \
    "replay: the same receiptHash, with transparency"
cp "$TG_BODY_FILE" "$TG_TMP/replay-1.json"
verify_ok "the replay" "$TG_TMP/replay-1.json"

# --checkpoint: receipt 1's checkpoint against a newer one
"${TV[@]}" fill "$TG_URL" tok-acme 300 || tg_fail "300 more decisions"
sleep 0.3
curl -sf "$TG_URL/v1/log/checkpoint" -o "$TG_TMP/pinned.txt" || tg_fail "GET the checkpoint"
OLD=$(tg_jget_file "$TG_TMP/b-1.json" 'j["transparency"]["treeSize"]')
NEW=$(sed -n 2p "$TG_TMP/pinned.txt")
curl -sf "$TG_URL/v1/log/proof/consistency?old=$OLD&new=$NEW" -o "$TG_TMP/cons.json" ||
    tg_fail "GET a consistency proof"
verify_ok "--checkpoint newer, with its consistency proof" "$TG_TMP/b-1.json" \
    --checkpoint "$TG_TMP/pinned.txt" --consistency "$TG_TMP/cons.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" --checkpoint "$TG_TMP/pinned.txt" \
    --consistency "$TG_TMP/cons.json" "$TG_TMP/b-1.json")
tg_check "VALID names the pinned size ($out)" grep -q "; consistent with checkpoint size $NEW\$" <<<"$out"
"$TG_PY" - "$TG_TMP/cons.json" "$TG_TMP/cons-bad.json" <<'PY'
import base64, json, sys
j = json.load(open(sys.argv[1]))
raw = bytearray(base64.b64decode(j["consistencyProof"][0])); raw[0] ^= 1
j["consistencyProof"][0] = base64.b64encode(bytes(raw)).decode()
json.dump(j, open(sys.argv[2], "w"))
PY
rc=0
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" --checkpoint "$TG_TMP/pinned.txt" \
    --consistency "$TG_TMP/cons-bad.json" "$TG_TMP/b-1.json" 2>&1) || rc=$?
tg_eq "$rc" 1 "--checkpoint with a proof that does not hold: exit 1"
tg_check "INCONSISTENT ($out)" grep -q "^INCONSISTENT: " <<<"$out"
rc=0
"$TG_BIN" verify --keys "$TG_TMP/keys.json" --checkpoint "$TG_TMP/pinned.txt" "$TG_TMP/b-1.json" \
    >/dev/null 2>&1 || rc=$?
tg_eq "$rc" 2 "--checkpoint of another size without --consistency: exit 2"
rc=0
"$TG_BIN" verify --keys "$TG_TMP/keys.json" --checkpoint "$TG_TMP/pinned.txt" "$TG_TMP/signed.json" \
    >/dev/null 2>&1 || rc=$?
tg_eq "$rc" 2 "--checkpoint with a per-receipt signed receipt: exit 2"

# log audit against the live daemon, twice (the second run checks the first's checkpoint)
run_ok "log audit URL" "$TG_BIN" log audit "$TG_URL" --state "$STATE"
"${TV[@]}" fill "$TG_URL" tok-acme 20 || tg_fail "20 more decisions"
sleep 0.2
run_ok "log audit URL again" "$TG_BIN" log audit "$TG_URL" --state "$STATE"
tg_check "the second run checked the first's checkpoint ($OUT)" grep -q "1 checkpoints seen before" <<<"$OUT"

# ---- a restart: the replay still completes a batch receipt ---------------------------------

tg_stop main
tg_start main -- "${MAIN_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"b-1"')"
tg_expect_py "s == 200 and j['receipt']['receiptHash'] == '$HASH1' and 'transparency' in j['receipt']" \
    "replay after a restart: the same receipt, with transparency"
cp "$TG_BODY_FILE" "$TG_TMP/replay-2.json"
verify_ok "the replay after a restart" "$TG_TMP/replay-2.json"
tg_req GET "/v1/receipts/$EXEC1" "${TG_AUTH_A[@]}"
cp "$TG_BODY_FILE" "$TG_TMP/get-2.json"
verify_ok "GET /v1/receipts/{id} after a restart" "$TG_TMP/get-2.json"
run_ok "log audit URL after a restart" "$TG_BIN" log audit "$TG_URL" --state "$STATE"
tg_stop main

# ---- the ledger directory ----------------------------------------------------------------

LEDGER=$TG_TMP/ledger-main
if [ $FILE_STORE == 1 ]; then
    run_ok "log audit DIR" "$TG_BIN" log audit "$LEDGER" --state "$STATE"
    run_ok "ledger verify" "$TG_BIN" ledger verify "$LEDGER" --keys "$TG_TMP/keys.json"
    tg_check "ledger verify reproduces the stored checkpoint, signature verified ($OUT)" \
        grep -q "^  log: .*reproduced by the records; signature verified" <<<"$OUT"
    tg_check "ledger verify counts the batch receipts" grep -qE "^  batch: +[1-9][0-9]* batch-signed" <<<"$OUT"
fi

# a fork: another ledger under the same log key and origin
tg_std_args fork
tg_start fork -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}" --receipt-signing batch
"${TV[@]}" fill "$TG_URL" tok-acme 5 || tg_fail "the fork's decisions"
sleep 0.2
rc=0
out=$("$TG_BIN" log audit "$TG_URL" --state "$STATE" 2>&1) || rc=$?
tg_eq "$rc" 1 "log audit of a fork with the state file: exit 1"
tg_check "the fork is a fault ($out)" grep -q "^log FAULT: .*rolled back\|^log FAULT: .*forked\|^log FAULT: .*not a prefix" <<<"$out"
tg_stop fork
if [ $FILE_STORE == 1 ]; then
    # the fork's stored checkpoint in a copy of the main ledger: the records do not reproduce it
    cp -r "$LEDGER" "$TG_TMP/ledger-swapped"
    cp "$TG_TMP/ledger-fork/tlog/checkpoint" "$TG_TMP/ledger-swapped/tlog/checkpoint"
    rc=0
    out=$("$TG_BIN" log audit "$TG_TMP/ledger-swapped" --keys "$TG_TMP/keys.json" 2>&1) || rc=$?
    tg_eq "$rc" 1 "log audit DIR, a checkpoint the records do not give: exit 1"
    tg_check "says so ($out)" grep -q "do not reproduce the stored checkpoint" <<<"$out"
    rc=0
    out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-swapped" --keys "$TG_TMP/keys.json" 2>&1) || rc=$?
    tg_eq "$rc" 1 "ledger verify, a checkpoint the records do not give: exit 1"
    # the main ledger's checkpoint in the fork's (shorter) ledger: records under it are gone
    cp -r "$TG_TMP/ledger-fork" "$TG_TMP/ledger-short"
    cp "$LEDGER/tlog/checkpoint" "$TG_TMP/ledger-short/tlog/checkpoint"
    rc=0
    out=$("$TG_BIN" log audit "$TG_TMP/ledger-short" --keys "$TG_TMP/keys.json" 2>&1) || rc=$?
    tg_eq "$rc" 1 "log audit DIR, a checkpoint over more records than there are: exit 1"
    tg_check "says so ($out)" grep -q "records signed into the log are gone" <<<"$out"
fi

# ---- every receipt kind: ESCALATE, the consuming PERMIT, observe ------------------------------

sha() { printf %s "$1" | sha256sum | cut -c1-64; }
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOT
[
  {"tenant": "acme", "token_sha256": "$(sha tok-caller)", "subject": "ci", "observe": true},
  {"tenant": "acme", "token_sha256": "$(sha tok-ap)", "subject": "ap01", "role": "approver"}
]
EOT
chmod 600 "$TOKENS"
"$TG_PY" - "$TG_TMP/approvals-policy.json" <<'PY'
import json, sys
json.dump({"version": "batch-approvals", "authority": "trigguard-itest",
           "tiers": {"1": 0.3, "2": 0.6, "3": 0.8},
           "surfaces": {"deploy.prod": {
               "tier": 3, "required_context": {"service": "string"},
               "rules": [{"id": "one-look", "effect": "escalate",
                          "when": [{"field": "context.service", "op": "eq", "value": "api"}],
                          "approval": {"required": 1, "approvers": ["ap01"], "ttl_s": 120,
                                       "consume_within_s": 120}}],
               "default": "deny"}}}, open(sys.argv[1], "w"))
PY
tg_std_args appr
tg_start appr TRIGGUARD_API_KEYS= -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS" \
    --policy "$TG_TMP/approvals-policy.json" "${LOG_ARGS[@]}" --receipt-signing batch
tg_fetch_keys "$TG_TMP/keys.json"
AREQ='{"surface":"deploy.prod","action":"deploy","actor":"ci.deployer","context":{"service":"api"}}'
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-caller" --json-body "$AREQ"
tg_expect_py 's == 200 and j["decision"] == "ESCALATE" and "transparency" in j["receipt"]' \
    "ESCALATE: a batch receipt"
cp "$TG_BODY_FILE" "$TG_TMP/escalate.json"
verify_ok "the ESCALATE receipt" "$TG_TMP/escalate.json"
tg_jget AID 'j["approval_id"]'
tg_jget AHASH 'j["request_hash"]'
tg_req POST "/v1/approvals/$AID/approve" -H "Authorization: Bearer tok-ap" \
    --json-body "{\"request_hash\":\"$AHASH\"}"
tg_expect_status 200 "the approval"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-caller" \
    --json-body "${AREQ%\}},\"approval_id\":\"$AID\"}"
tg_expect_py 's == 200 and j["decision"] == "PERMIT" and "approvals" in j["receipt"] and "transparency" in j["receipt"]' \
    "the consuming PERMIT: a batch receipt with its approvals"
cp "$TG_BODY_FILE" "$TG_TMP/consumed.json"
verify_ok "the consuming PERMIT" "$TG_TMP/consumed.json"
tg_req POST /v1/evaluate -H "Authorization: Bearer tok-caller" \
    --json-body "${AREQ%\}},\"executionMode\":\"observe\"}"
tg_expect_py 's == 200 and j["receipt"].get("executionMode") == "observe" and "transparency" in j["receipt"]' \
    "observe: a batch receipt"
cp "$TG_BODY_FILE" "$TG_TMP/observe.json"
verify_ok "the observe receipt" "$TG_TMP/observe.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/observe.json")
tg_check "observe: valid, authorizes nothing ($out)" grep -q "authorizes: false (observe_mode)" <<<"$out"
tg_stop appr

# ---- durability batch and none; a checkpoint that comes too late -------------------------------

for d in $([ $FILE_STORE == 1 ] && echo batch none); do
    tg_std_args "dur-$d"
    tg_start "dur-$d" -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}" --receipt-signing batch --durability "$d"
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"d-$d\"")"
    tg_expect_py 's == 200 and "transparency" in j["receipt"]' "--durability $d: a batch receipt"
    cp "$TG_BODY_FILE" "$TG_TMP/dur-$d.json"
    verify_ok "--durability $d" "$TG_TMP/dur-$d.json"
    tg_stop "dur-$d"
done
# checkpoints at most once a minute, an answer waits at most half the stall bound: the first
# record after the start's checkpoint is durable, but no checkpoint covers it in time
tg_std_args late
tg_start late -- "${TG_STD_ARGS[@]}" --log-key "$LOG_KEY" --log-origin "$ORIGIN" \
    --checkpoint-min-interval 60000 --checkpoint-interval 60000 --ledger-stall-timeout 1000 \
    --receipt-signing batch
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"late-1"')"
tg_expect_error 503 log_pending "no checkpoint in time: 503 log_pending"
tg_check "with Retry-After" test "$(tg_header Retry-After)" == 1
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"late-1"')"
tg_expect_error 503 log_pending "the retry: still log_pending (durable, replayed, not covered), never run again"
tg_stop late
if [ $FILE_STORE == 1 ]; then
    rc=0
    "$TG_BIN" ledger verify "$TG_TMP/ledger-late" >/dev/null 2>&1 || rc=$?
    tg_eq "$rc" 0 "the late record is in the ledger"
    n=$("$TG_BIN" ledger dump "$TG_TMP/ledger-late" | grep -c '"type":"receipt"')
    tg_eq "$n" 1 "one receipt record: the retry did not decide again"
fi

tg_done
