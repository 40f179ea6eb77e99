#!/usr/bin/env bash
# daemon_tlog.sh — the transparency log in the daemon (SPEC §12, docs/API.md "Transparency
# log"), checked by an independent verifier written from RFC 6962/9162 and the C2SP texts
# (lib/tlog_verify.py): the checkpoint is signed by the key keys.json publishes, the root
# recomputed from the tiles and entry bundles is the checkpoint's, every receipt's proof
# verifies with leaf SHA-256(0x00 ‖ receiptHash), every pair of checkpoints is consistent.
# Then SIGKILL under load, several rounds: after each restart every acknowledged receipt has
# a valid inclusion proof, every checkpoint ever served is consistent with every other, and
# no two of one size differ. A ledger cut below the published checkpoint refuses to start.
# Bad inputs get their 4xx JSON; without --log-key every log route is 404 log_disabled.
# The file backend; TG_TEST_STORE=postgres runs the parts that are not about ledger files.
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
ORIGIN=itest.trigguard.test/log
tg_std_args nolog
NOLOG_ARGS=("${TG_STD_ARGS[@]}")
tg_std_args main
LOG_ARGS=(--log-key "$LOG_KEY" --log-origin "$ORIGIN" --checkpoint-interval 50)
ACKS=$TG_TMP/acks
NOTES=$TG_TMP/notes

# tv_check LABEL ARGS...: the verifier's check; its FAIL lines are the failure's text.
tv_check() {
    local label=$1 out
    shift
    if out=$("${TV[@]}" check "$TG_URL" tok-acme "$ACKS" "$NOTES" "$@" 2>&1); then
        tg_pass "$label ($(tail -1 <<<"$out"))"
    else
        tg_fail "$label:
$(head -30 <<<"$out")"
    fi
}

# note_now: appends the checkpoint served now to NOTES (the verifier reads them all).
note_now() {
    curl -s --max-time 5 "$TG_URL/v1/log/checkpoint" |
        "$TG_PY" -c 'import json,sys; print(json.dumps(sys.stdin.read()))' >>"$NOTES"
}

# ---- configuration refusals (--check-config runs the same loading as serve) -----------------

refused() { # refused LABEL PATTERN serve-args...
    local label=$1 pat=$2 out rc=0
    shift 2
    out=$(timeout 30 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --check-config \
        --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-refused" "$@" 2>&1) || rc=$?
    tg_eq "$rc" 2 "$label: refused (exit 2)"
    tg_check "$label: says why" grep -q -- "$pat" <<<"$out"
}
refused "--log-key missing" "log-key" --log-key "$TG_TMP/no-such.pem"
refused "--log-key is the receipt key" "key of its own" --log-key "$TG_KEY"
refused "--log-origin with a space" "log-origin" --log-key "$LOG_KEY" --log-origin "a b"
refused "--log-origin with a plus" "log-origin" --log-key "$LOG_KEY" --log-origin "a+b"
refused "--checkpoint-min-interval above --checkpoint-interval" "checkpoint-min-interval" \
    --log-key "$LOG_KEY" --checkpoint-min-interval 200 --checkpoint-interval 100
refused "--checkpoint-interval 0" "checkpoint-interval" --log-key "$LOG_KEY" --checkpoint-interval 0
refused "--log-key as PEM text" "path of a PEM file" --log-key "$(cat "$LOG_KEY")"
cp "$LOG_KEY" "$TG_TMP/open-key.pem"
chmod 0644 "$TG_TMP/open-key.pem"
refused "--log-key readable by others" "open-key.pem" --log-key "$TG_TMP/open-key.pem"
openssl pkey -in "$LOG_KEY" -pubout -out "$TG_TMP/log-pub.pem" 2>/dev/null
refused "--log-key a public key" "public key" --log-key "$TG_TMP/log-pub.pem"

# ---- without --log-key: no log ---------------------------------------------------------------

tg_start nolog -- "${NOLOG_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"nl-1"')"
tg_jget NL_EXEC 'j["receipt"]["executionId"]'
for path in /v1/log/checkpoint /v1/log/tile/0/000.p/1 /v1/log/tile/entries/000.p/1 \
    '/v1/log/proof/inclusion?index=0&size=1' '/v1/log/proof/consistency?old=1&new=1'; do
    tg_req GET "$path"
    tg_expect_error 404 log_disabled "no log: GET $path"
done
tg_req GET "/v1/receipts/$NL_EXEC/proof" "${TG_AUTH_A[@]}"
tg_expect_error 404 log_disabled "no log: a receipt's proof"
tg_req GET /.well-known/trigguard/keys.json
tg_expect_py 'all(k["use"] == "receipt" for k in j["keys"]) and len(j["keys"]) == 1' \
    "no log: keys.json lists the receipt key alone, use receipt"
tg_req GET /metrics
tg_check "no log: trigguard_log_enabled 0" grep -q '^trigguard_log_enabled 0$' "$TG_BODY_FILE"
tg_stop nolog

# ---- a log: checkpoint, keys.json, receipts, proofs, tiles -----------------------------------

tg_start main -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}"
tg_req GET /v1/log/checkpoint
tg_expect_status 200 "the checkpoint"
tg_expect_header Content-Type "text/plain; charset=utf-8" "the checkpoint is text"
tg_expect_header Cache-Control "no-store" "the checkpoint is not cached"
tg_expect_py "b.decode().startswith('$ORIGIN\n')" "the checkpoint names --log-origin"
tg_req GET /.well-known/trigguard/keys.json
tg_expect_py '[k["use"] for k in j["keys"]] == ["receipt", "checkpoint"]' \
    "keys.json: the receipt key, then the checkpoint key"
tg_expect_py "j['keys'][1]['origin'] == '$ORIGIN' and j['keys'][1]['vkey'].startswith('$ORIGIN+' + j['keys'][1]['keyId'] + '+')" \
    "keys.json: the checkpoint key's origin, keyId and vkey agree"
tg_fetch_keys "$TG_TMP/keys.json"
: >"$ACKS"
: >"$NOTES"
note_now
ex="" rh=""
for i in $(seq 1 12); do
    kind=permit
    [ $((i % 4)) == 0 ] && kind=deny
    tg_post /v1/evaluate "$(tg_req_json $kind ",\"idempotency_key\":\"tl-$i\"")"
    tg_expect_status 200 "receipt $i"
    tg_jget ex 'j["receipt"]["executionId"]'
    tg_jget rh 'j["receipt"]["receiptHash"]'
    echo "$ex $rh" >>"$ACKS"
    [ "$i" == 1 ] && tg_save_receipt "$TG_TMP/one-receipt.json"
    [ $((i % 3)) == 0 ] && tg_post /v1/evaluate "$(tg_req_json silence)" # a leaf, no receipt
    [ $((i % 5)) == 0 ] && { sleep 0.1; note_now; }
done
FIRST_EXEC=$(head -1 "$ACKS" | cut -d' ' -f1)
tg_check "trigguard verify --keys keys.json (with its checkpoint key) verifies a receipt" \
    "$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/one-receipt.json"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json permit ',"idempotency_key":"tl-beta"')"
tg_jget BETA_EXEC 'j["receipt"]["executionId"]'
sleep 0.3
note_now
tv_check "receipts, checkpoints (all pairs) and tiles verify" --all-pairs

# a receipt's proof, pending or not: 200 with every member, or 202 with Retry-After
tg_req GET "/v1/receipts/$FIRST_EXEC/proof" "${TG_AUTH_A[@]}"
tg_expect_status 200 "a receipt's proof"
tg_expect_py "set(j) == {'logOrigin','leafIndex','treeSize','inclusionProof','checkpoint'} and j['logOrigin'] == '$ORIGIN'" \
    "the proof's members"
tg_jget LEAF 'j["leafIndex"]'
tg_jget SIZE 'j["treeSize"]'
# ?size=S: a proof into an older tree, without the checkpoint (the caller holds its own)
if out=$("${TV[@]}" prove-at "$TG_URL" tok-acme "$FIRST_EXEC" "$(head -1 "$ACKS" | cut -d' ' -f2)" \
    $((LEAF + 1)) 2>&1); then
    tg_pass "?size=leaf+1: verifies against the root from the tiles"
else
    tg_fail "?size=leaf+1: $out"
fi
tg_req GET "/v1/receipts/$FIRST_EXEC/proof?size=$SIZE" "${TG_AUTH_A[@]}"
tg_expect_py "s == 200 and 'checkpoint' in j and j['treeSize'] == $SIZE" \
    "?size= the newest size: with its checkpoint"

# ---- bad inputs ---------------------------------------------------------------------------------

for path in 0/0 0/0000 00/000 0/000.p/0 0/000.p/256 0/000.p/01 0/x000/001 0/x1/001 64/000 \
    0/000/ entries/0 entries/000.p/300 entries/x/000 1/000.p/1 0/001 0/000 entries/000 \
    0/000.p/255 0/x999/999/999/999/999/999/999; do
    tg_req GET "/v1/log/tile/$path"
    tg_expect_error 404 not_found "tile $path"
done
tg_req GET /v1/log/tile/
tg_expect_error 404 not_found "no tile path"
tg_req POST /v1/log/checkpoint --json-body '{}'
tg_expect_error 405 method_not_allowed "POST /v1/log/checkpoint"
for q in "" "index=0" "size=1" "index=0&size=01" "index=-0&size=1" "index=+0&size=1" \
    "index=0&size=1x" "index=0&size=18446744073709551616" "index=1&size=1" "index=5&size=2" \
    "index=&size=1"; do
    tg_req GET "/v1/log/proof/inclusion?$q"
    tg_expect_error 400 invalid_request "inclusion ?$q"
done
tg_req GET "/v1/log/proof/inclusion?index=0&size=18446744073709551615"
tg_expect_error 404 not_found "inclusion into a tree beyond the published one"
for q in "" "old=1" "old=0&new=1" "old=3&new=2" "old=1&new=00" "old=1.0&new=2"; do
    tg_req GET "/v1/log/proof/consistency?$q"
    tg_expect_error 400 invalid_request "consistency ?$q"
done
tg_req GET "/v1/log/proof/consistency?old=1&new=99999999"
tg_expect_error 404 not_found "consistency to a tree beyond the published one"
tg_req GET "/v1/log/proof/consistency?old=$SIZE&new=$SIZE"
tg_expect_py "s == 200 and j == {'oldSize': $SIZE, 'newSize': $SIZE, 'consistencyProof': []}" \
    "consistency of a tree with itself: the empty proof"
tg_req GET "/v1/receipts/$FIRST_EXEC/proof"
tg_expect_error 401 unauthorized "a receipt's proof without a token"
tg_req GET "/v1/receipts/$FIRST_EXEC/proof" "${TG_AUTH_B[@]}"
tg_expect_error 404 not_found "another tenant's receipt"
tg_req GET "/v1/receipts/$BETA_EXEC/proof" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "another tenant's receipt, the other way"
tg_req GET "/v1/receipts/exec_00000000000000000000000000000000/proof" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "an unknown receipt"
tg_req GET "/v1/receipts/not-an-id/proof" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "a malformed executionId"
for q in "size=0" "size=$LEAF" "size=x" "size=" "size=-1"; do
    tg_req GET "/v1/receipts/$FIRST_EXEC/proof?$q" "${TG_AUTH_A[@]}"
    tg_expect_error 400 invalid_request "a receipt's proof ?$q"
done
tg_req GET "/v1/receipts/$FIRST_EXEC/proof?size=$((SIZE + 1000000))" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "a receipt's proof into a tree beyond the published one"
tg_req POST "/v1/receipts/$FIRST_EXEC/proof" "${TG_AUTH_A[@]}" --json-body '{}'
tg_expect_error 405 method_not_allowed "POST a receipt's proof"
tg_req GET /metrics
tg_check "metrics: the log's tree size" grep -qE '^trigguard_log_tree_size [1-9]' "$TG_BODY_FILE"
tg_check "metrics: checkpoints signed" grep -qE '^trigguard_log_checkpoints_total [1-9]' "$TG_BODY_FILE"
tg_check "metrics: the lag histogram" grep -q '^trigguard_log_checkpoint_lag_seconds_count ' "$TG_BODY_FILE"
tg_check "metrics: a valid exposition" "$TG_PY" -c \
    'import sys, tgclient; tgclient.parse_prometheus(open(sys.argv[1]).read())' "$TG_BODY_FILE"

# ---- SIGKILL under load, several rounds ------------------------------------------------------

# At least 4 rounds, and more (up to 16) until the acknowledged receipts fill a tile: how
# many a round gets depends on the machine's load (PostgreSQL under a busy CI gets fewer).
round=0
touch "$ACKS"
while [ "$round" -lt 4 ] || { [ "$(wc -l <"$ACKS")" -le 256 ] && [ "$round" -lt 16 ]; }; do
    round=$((round + 1))
    "${TV[@]}" load "$TG_URL" tok-acme "$ACKS" "$NOTES" 4 4 &
    loader=$!
    sleep "1.$((RANDOM % 8))"
    kill -KILL "$(tg_pid main)"
    wait "$(tg_pid main)" 2>/dev/null
    unset "TG_PIDS[main]"
    wait "$loader"
    tg_start main -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}"
    note_now
    tv_check "round $round: after SIGKILL under load and a restart"
done
tg_eq "$(sort "$ACKS" | uniq -d | wc -l)" 0 "no receipt acknowledged twice"
tg_check "the rounds acknowledged receipts (more than a full tile's worth)" \
    test "$(wc -l <"$ACKS")" -gt 256

# ---- a ledger cut below the published checkpoint refuses to start ---------------------------

if [ "$FILE_STORE" == 1 ]; then
    tg_stop main
    LEDGER=$TG_TMP/ledger-main
    seg=$(find "$LEDGER" -maxdepth 1 -name '*.tgl' | sort | tail -1)
    truncate -s $(($(stat -c %s "$seg") / 2)) "$seg"
    # The ledger's own durable head would refuse this first: moving it away is what an
    # operator does to accept a loss, and the log must still refuse to sign past it.
    mv "$LEDGER/ledger.head" "$TG_TMP/ledger.head.moved"
    OUT=$(timeout 60 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve "${TG_STD_ARGS[@]}" \
        "${LOG_ARGS[@]}" --port 0 --port-file "$TG_TMP/port-cut" 2>&1)
    rc=$?
    tg_eq "$rc" 2 "a ledger cut below the published checkpoint: the start is refused (exit 2)"
    tg_check "the refusal is logged as startup_failed naming the log" grep -qE \
        '"event":"startup_failed".*(checkpoint|transparency log)' <<<"$OUT"
    tg_check "it never listened" test ! -s "$TG_TMP/port-cut"
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' <<<"$OUT"; then
        tg_fail "sanitizer report: $(head -c 2000 <<<"$OUT")"
    fi
fi

# ---- a low open-files limit: the log's descriptors are kept from the start ---------------
# The file log keeps its directory, checkpoint, entries and one file per tree level open
# (db.h TG_DB_LOG_FDS_FILE); serve reserves them with the rest before it sizes the
# connections, so a limit too low for what was asked is refused at the start with the
# numbers, and one that starts serves the log, never an EMFILE once the tree grows.
LOW=128
tg_std_args lowfd
if [ "$FILE_STORE" == 1 ]; then
    OUT=$(timeout 60 prlimit --nofile=$LOW:$LOW env TRIGGUARD_API_KEYS="$TG_API_KEYS" \
        "$TG_BIN" serve "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}" --max-connections 40 --port 0 \
        --port-file "$TG_TMP/port-lowfd" 2>&1)
    rc=$?
    tg_eq "$rc" 2 "ulimit -n $LOW and --max-connections 40 with a file log: refused (exit 2)"
    tg_check "the refusal gives the numbers and the knobs" grep -qE \
        '"event":"startup_failed".*does not fit the open-files limit '"$LOW"'.*ulimit -n' <<<"$OUT"
    tg_check "it never listened" test ! -s "$TG_TMP/port-lowfd"
fi
TG_WRAPPER=(prlimit "--nofile=$LOW:$LOW")
tg_start lowfd -- "${TG_STD_ARGS[@]}" "${LOG_ARGS[@]}"
TG_WRAPPER=()
for i in $(seq 1 20); do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"lowfd-$i\"")"
    [ "$TG_STATUS" == 200 ] || break
done
tg_expect_status 200 "ulimit -n $LOW: decisions are recorded"
lsize=0
for _ in $(seq 1 100); do
    lsize=$(curl -s --max-time 5 "$TG_URL/v1/log/checkpoint" | sed -n 2p)
    [ "${lsize:-0}" -ge 20 ] && break
    sleep 0.1
done
tg_check "ulimit -n $LOW: the log signs them all (size ${lsize:-none})" test "${lsize:-0}" -ge 20
kept=$(grep -o '"event":"descriptors".*' "$(tg_logfile lowfd)" |
    sed -nE 's/.* ([0-9]+) kept for the daemon, 1 listener of ([0-9]+) connections.*/\1 \2/p')
read -r held conns <<<"$kept"
tg_check "the reserve ($held) and the connections ($conns) fit the limit $LOW" \
    test -n "$kept" -a "$((${held:-0} + ${conns:-0}))" -le "$LOW"
tg_stop lowfd

tg_done
