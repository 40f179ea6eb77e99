#!/usr/bin/env bash
# verify_documents.sh — issue 18, what a new user hands a verifier: the whole /v1/evaluate or
# /execute response verifies as its receipt through POST /v1/verify, /protocol/verify-receipt
# and `trigguard verify`, with one verdict and one message for every other document; and
# `trigguard verify --key` trusts a public key exported by openssl (which drops the
# trigguard-key-id line) by its signature, while --keys keys.json still matches key ids.
source "$(dirname "$0")/lib/daemon.sh"
command -v openssl >/dev/null || tg_die "openssl is required for this test (scripts/deps test)"

tg_keygen
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}"
tg_fetch_keys "$TG_TMP/keys.json"
D=$TG_TMP

# ---- the documents: three responses that carry a receipt, one that has none ------------
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and 'receipt' in j" "evaluate: PERMIT"
cp "$TG_BODY_FILE" "$D/permit.json"
tg_post '/v1/evaluate?explain=1' "$(tg_req_json deny)"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and 'trace' in j and 'receipt' in j" \
    "evaluate ?explain=1: DENY with a trace"
cp "$TG_BODY_FILE" "$D/deny-explain.json"
tg_post /execute "$(tg_req_json deny)"
tg_expect_py "s == 403 and j['decision'] == 'DENY' and 'receipt' in j" "/execute: 403 DENY"
cp "$TG_BODY_FILE" "$D/execute-deny.json"
tg_post /v1/evaluate "$(tg_req_json silence)"
tg_expect_py "s == 200 and j['decision'] == 'SILENCE' and 'receipt' not in j" "evaluate: SILENCE"
cp "$TG_BODY_FILE" "$D/silence.json"

# cli_verdict FILE [verify args...] -> "$rc:$out" of `trigguard verify --keys keys.json`
cli_verdict() {
    local f=$1 rc=0
    shift
    out=$("$TG_BIN" verify --keys "$D/keys.json" "$@" "$f" 2>&1) || rc=$?
    echo "$rc:$out"
}

for f in permit deny-explain execute-deny; do
    for route in /v1/verify /protocol/verify-receipt; do
        tg_req POST "$route" --json-body "$(cat "$D/$f.json")"
        tg_expect_py "s == 200 and j['valid'] is True and j['reason'] == 'valid'" \
            "POST $route with the whole $f response: valid"
    done
    tg_eq "$(cli_verdict "$D/$f.json")" "0:VALID" "trigguard verify of the whole $f response"
    tg_eq "$(cli_verdict - <"$D/$f.json")" "0:VALID" "trigguard verify - of the whole $f response"
done

# ---- refused documents: the route's detail is the CLI's, word for word -----------------
python3 - "$D" <<'PY' || tg_fail "cannot build the refused documents"
import json, sys
d = sys.argv[1]
permit = json.load(open(d + "/permit.json"))
deny = json.load(open(d + "/deny-explain.json"))
def put(name, doc):
    json.dump(doc, open("%s/%s.json" % (d, name), "w"))
put("extra-member", dict(permit, note="forwarded by the billing agent"))
put("spliced", dict(permit, receipt=deny["receipt"]))  # PERMIT around a DENY receipt
put("other-request", dict(permit, request_hash="0" * 64))
put("no-enforcement", {k: v for k, v in permit.items() if k != "enforcement"})
put("receipt-not-object", dict(permit, receipt="see attachment"))
r = dict(permit["receipt"])
r["surface"] = "payments.refund"
put("tampered-receipt", dict(permit, receipt=r))
PY
check_refused() { # NAME REASON DETAIL-START
    local f=$D/$1.json
    tg_req POST /v1/verify --json-body "$(cat "$f")"
    tg_expect_py "s == 200 and j['valid'] is False and j['reason'] == '$2' and j['detail'].startswith('''$3''')" \
        "POST /v1/verify $1: $2"
    local detail
    tg_jget detail "j['detail']"
    tg_eq "$(cli_verdict "$f")" "1:INVALID: $2 ($detail)" "trigguard verify $1: the route's verdict and detail"
}
check_refused extra-member malformed 'unknown member "note" beside "receipt"; a verifier takes a receipt, {"receipt": {...}}, or a whole /v1/evaluate or /execute response'
check_refused spliced malformed "the response's decision is not its receipt's decision: the receipt is not this response's"
check_refused other-request malformed "the response's request_hash is not its receipt's requestHash"
check_refused no-enforcement malformed '"receipt" comes with evaluate-response members, but enforcement is missing'
check_refused receipt-not-object malformed 'member "receipt" is not an object'
check_refused silence malformed "an evaluate response without a receipt (a SILENCE, or /decide): nothing to verify"
check_refused tampered-receipt hash_mismatch "receiptHash does not match"

# ---- keys exported by openssl: --key is a trust anchor, --keys matches ids --------------
openssl pkey -in "$TG_KEY" -pubout -out "$D/pub.pem" 2>"$D/openssl.err" ||
    tg_die "openssl pkey -pubout: $(cat "$D/openssl.err")"
tg_check "openssl's export has no trigguard-key-id line" bash -c "! grep -q trigguard-key-id '$D/pub.pem'"
out=$("$TG_BIN" verify --key "$D/pub.pem" "$D/permit.json" 2>&1)
rc=$?
tg_eq "$rc" 0 "verify --key PUB.pem (openssl export) of a receipt signed as itest-key-1: $out"
tg_check "the output names the file and both key ids: $out" \
    grep -Eq "^VALID \(signed by --key $D/pub\.pem, key id tg-[0-9a-f]{16}; the receipt names key id itest-key-1\)$" <<<"$out"
"$TG_BIN" keys "$D/pub.pem" >"$D/pub.keys.json" || tg_fail "trigguard keys pub.pem"
out=$("$TG_BIN" verify --keys "$D/pub.keys.json" "$D/permit.json" 2>&1)
tg_eq "$?:${out%% (*}" "1:INVALID: unknown_key" "verify --keys of the same key under its derived id: matched by id"
openssl genpkey -algorithm ed25519 -out "$D/stranger.pem" 2>/dev/null && chmod 600 "$D/stranger.pem"
openssl pkey -in "$D/stranger.pem" -pubout -out "$D/stranger.pub.pem" 2>/dev/null
out=$("$TG_BIN" verify --key "$D/stranger.pub.pem" "$D/permit.json" 2>&1)
tg_eq "$?:${out%% (*}" "1:INVALID: unknown_key" "verify --key of a key that did not sign it"
out=$("$TG_BIN" verify --key "$D/stranger.pub.pem" --key "$D/pub.pem" "$D/execute-deny.json" 2>&1)
tg_eq "$?:${out%% (*}" "0:VALID" "verify with two --key files: the one that signed verifies"

tg_stop main
tg_done
