#!/usr/bin/env bash
# ledger_archive.sh — issue 24: `ledger archive` moves old sealed segments to an archive and
# anchors what stays with a signed ledger.anchor. Round trips (archive, verify the live
# directory alone and archive + live as one chain, a second archive, receipts from the archive
# verified offline, the daemon restarting on the pruned directory and serving) and the
# failures: a tampered archived segment, a tampered anchor, a forged signature, a missing
# segment, a missing anchor, a truncated archive, the daemon running, a transparency log.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
"$TG_BIN" keys "$TG_KEY" >"$TG_TMP/keys.json" 2>"$TG_TMP/keys.err" || tg_die "keys: $(cat "$TG_TMP/keys.err")"
KEYS=$TG_TMP/keys.json
L=$TG_TMP/ledger-main
A1=$TG_TMP/archive-1
A2=$TG_TMP/archive-2
tg_std_args main
ARGS=("${TG_STD_ARGS[@]}" --segment-bytes 65536)
LATER=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)

burst() { # burst PREFIX N: N PERMITs with idempotency keys PREFIX-1 .. PREFIX-N
    local i
    for i in $(seq 1 "$2"); do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$1-$i\"")"
        if [ "$TG_STATUS" != 200 ]; then
            tg_fail "burst $1-$i: status $TG_STATUS"
            return
        fi
    done
    tg_pass "burst $1: $2 decisions"
}

# run EXPECTED LABEL NEEDLE -- trigguard args: the exit status and a text in its output
run() {
    local want=$1 label=$2 needle=$3
    shift 4
    "$TG_BIN" "$@" >"$TG_TMP/run.out" 2>&1
    local rc=$?
    if [ "$rc" != "$want" ]; then
        tg_fail "$label: exit $rc, want $want; output:
$(head -20 "$TG_TMP/run.out")"
    elif [ -n "$needle" ] && ! grep -qF -- "$needle" "$TG_TMP/run.out"; then
        tg_fail "$label: output lacks '$needle':
$(head -20 "$TG_TMP/run.out")"
    else
        tg_pass "$label"
    fi
}

# refuses_start LABEL NEEDLE DIR: serve on DIR exits non-zero and its output names NEEDLE
refuses_start() {
    timeout 60 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --port 0 --policy "$TG_POLICY" \
        --key "$TG_KEY" --ledger "$3" --log-format json --threads 2 >"$TG_TMP/serve.out" 2>&1
    local rc=$?
    if [ "$rc" == 0 ] || [ "$rc" == 124 ]; then
        tg_fail "$1: serve exited $rc, want a refusal"
    elif ! grep -qF -- "$2" "$TG_TMP/serve.out"; then
        tg_fail "$1: serve's output lacks '$2': $(tail -5 "$TG_TMP/serve.out")"
    else
        tg_pass "$1"
    fi
}

# ---- a ledger of several segments --------------------------------------------------------
tg_start main -- "${ARGS[@]}"
burst old 200
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"kept-1"')"
tg_save kept
tg_jget KEPT_EXEC 'j["execution_id"]'
run 2 "archive refused while the daemon holds the lock" "locked by another process" -- \
    ledger archive "$L" --before "$LATER" --retention 0 --to "$A1" --key "$TG_KEY"
tg_stop main
nseg=$(find "$L" -name 'ledger-*.tgl' | wc -l)
tg_check "the ledger has at least 4 segments ($nseg)" test "$nseg" -ge 4
cp -a "$L" "$TG_TMP/unpruned"

# ---- archive 1 ------------------------------------------------------------------------------
run 0 "nothing older than 1970" "nothing to archive" -- \
    ledger archive "$L" --before 1970-01-02T00:00:00Z --to "$A1" --key "$TG_KEY"
tg_check "no anchor after archiving nothing" test ! -e "$L/ledger.anchor"
run 2 "archive needs --key" "are required" -- ledger archive "$L" --before "$LATER" --retention 0 --to "$A1"
run 2 "archive refuses a time within the default retention (a day)" "within --retention 86400s" -- \
    ledger archive "$L" --before "$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)" --to "$A1" --key "$TG_KEY"
tg_check "no anchor after the refusal" test ! -e "$L/ledger.anchor"
run 2 "archive refuses a bad --retention" "wants seconds" -- \
    ledger archive "$L" --before "$LATER" --retention -5 --to "$A1" --key "$TG_KEY"
run 0 "archive 1" "archived: ledger-000001.tgl" -- \
    ledger archive "$L" --before "$LATER" --retention 0 --to "$A1" --key "$TG_KEY"
last=$(find "$L" -name 'ledger-*.tgl' | sort | tail -1)
tg_check "the active segment stays" test -e "$last"
tg_check "segment 1 left the live directory" test ! -e "$L/ledger-000001.tgl"
tg_check "segment 1 is in the archive" test -e "$A1/ledger-000001.tgl"
tg_check "the live directory has its anchor" test -s "$L/ledger.anchor"
tg_check "the archive says where it ends" cmp -s "$L/ledger.anchor" "$A1/archive.anchor"
run 0 "live directory verifies from its anchor, signature checked" "starts at seq" -- \
    ledger verify "$L" --keys "$KEYS"
grep -qF "anchor signatures verified" "$TG_TMP/run.out" || tg_fail "anchor signature not reported verified"
run 0 "archive verifies alone" "an archive: the chain goes on" -- ledger verify "$A1" --keys "$KEYS"
run 0 "archive + live verify as one chain" "ledger OK: $A1 + $L" -- \
    ledger verify "$A1" "$L" --keys "$KEYS"
"$TG_BIN" ledger verify "$TG_TMP/unpruned" --json >"$TG_TMP/unpruned.json" 2>/dev/null
"$TG_BIN" ledger verify "$A1" "$L" --json >"$TG_TMP/both.json" 2>/dev/null
python3 - "$TG_TMP/unpruned.json" "$TG_TMP/both.json" <<'EOF' || tg_fail "archive + live is not the unpruned ledger"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["head_hash"] == b["head_hash"], (a["head_hash"], b["head_hash"])
assert a["records"] == b["records"] and a["records"] > 200, (a["records"], b["records"])
assert a["anchors"] == 0 and b["anchors"] == 2 and b["anchor_seq"] == 0, b
EOF
"$TG_BIN" ledger verify "$L" --json >"$TG_TMP/live.json" 2>/dev/null
python3 - "$TG_TMP/live.json" "$TG_TMP/both.json" <<'EOF' || tg_fail "the live summary does not start at its anchor"
import json, sys
live, both = (json.load(open(p)) for p in sys.argv[1:3])
assert live["anchor_seq"] == live["first_seq"] > 1 and live["anchors"] == 1, live
assert live["last_seq"] == both["last_seq"], (live, both)
EOF

# A receipt past retention verifies offline from the archive.
"$TG_BIN" ledger dump "$A1" >"$TG_TMP/a1.dump" 2>&1 || tg_fail "ledger dump of the archive"
python3 - "$TG_TMP/a1.dump" "$TG_TMP/old-receipt.json" <<'EOF' || tg_fail "no receipt in the archive"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "receipt":
        json.dump(r["payload"], open(sys.argv[2], "w"))
        break
else:
    sys.exit(1)
EOF
"$TG_BIN" verify --keys "$KEYS" "$TG_TMP/old-receipt.json" >"$TG_TMP/v.out" 2>&1
rc=$?
tg_check "an archived receipt verifies offline (exit $rc: 0, or 6 authentic but expired)" \
    test "$rc" == 0 -o "$rc" == 6
python3 - "$TG_TMP/old-receipt.json" "$TG_TMP/forged-receipt.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["policyVersion"] = r["policyVersion"] + "x"
json.dump(r, open(sys.argv[2], "w"))
EOF
"$TG_BIN" verify --keys "$KEYS" "$TG_TMP/forged-receipt.json" >/dev/null 2>&1
rc=$?
tg_check "an altered archived receipt does not (exit $rc)" test "$rc" == 1 -o "$rc" == 2

# ---- the daemon restarts on the pruned directory and serves ----------------------------
tg_start main -- "${ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"kept-1"')"
tg_expect_header Idempotent-Replayed true "a kept decision still replays after the prune"
tg_check "byte-identical replay" cmp -s "$TG_BODY_FILE" "$(tg_saved_body kept)"
tg_req GET "/v1/receipts/$KEPT_EXEC" "${TG_AUTH_A[@]}"
tg_expect_status 200 "a kept receipt is served from the pruned ledger"
OLD_EXEC=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["executionId"])' "$TG_TMP/old-receipt.json")
tg_req GET "/v1/receipts/$OLD_EXEC" "${TG_AUTH_A[@]}"
tg_expect_status 404 "an archived receipt is no longer served (the archive holds it)"
burst new 120
tg_stop main
run 0 "live directory verifies after new records" "starts at seq" -- ledger verify "$L" --keys "$KEYS"

# ---- archive 2, to another archive: three directories, one chain --------------------------
run 0 "archive 2" "archived:" -- ledger archive "$L" --before "$LATER" --retention 0 --to "$A2" --key "$TG_KEY"
tg_check "archive 2 starts at archive 1's end" cmp -s "$A1/archive.anchor" "$A2/ledger.anchor"
run 0 "archive 1 + archive 2 + live verify as one chain" "ledger OK" -- \
    ledger verify "$A1" "$A2" "$L" --keys "$KEYS"
refuses_start "the daemon does not append to an archive" "archive.anchor" "$A2"
tg_keygen "$TG_TMP/log-key.pem" itest-log-1
timeout 60 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --port 0 "${ARGS[@]}" \
    --log-key "$TG_TMP/log-key.pem" --log-origin example.trigguard.test/log >"$TG_TMP/serve.out" 2>&1
rc=$?
tg_check "a daemon with a transparency log refuses the pruned ledger (exit $rc)" \
    test "$rc" != 0 -a "$rc" != 124
grep -qF "transparency log needs every record" "$TG_TMP/serve.out" ||
    tg_fail "the refusal does not say why: $(tail -3 "$TG_TMP/serve.out")"
tg_check "... and created no log there" test ! -e "$L/tlog"
run 1 "archive 1 + live without archive 2 do not chain" "does not continue" -- \
    ledger verify "$A1" "$L" --keys "$KEYS"
run 1 "the order matters" "must start at an anchor" -- ledger verify "$A2" "$A1" "$L" --keys "$KEYS"
tg_start main -- "${ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"after-2"')"
tg_expect_status 200 "serves after the second prune"
tg_stop main

# ---- tampering -------------------------------------------------------------------------------
fresh() { rm -rf "$TG_TMP/t"; mkdir "$TG_TMP/t"; cp -a "$A1" "$A2" "$L" "$TG_TMP/t/"; }
T1=$TG_TMP/t/archive-1
T2=$TG_TMP/t/archive-2
TL=$TG_TMP/t/ledger-main
flip() { # flip FILE OFFSET: one bit of one byte changed
    python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[o] ^= 1
open(p, "wb").write(b)' "$1" "$2"
}
fresh
flip "$T1/ledger-000002.tgl" 300
run 1 "a tampered archived segment fails the chain" "record hash mismatch" -- \
    ledger verify "$T1" "$T2" "$TL" --keys "$KEYS"
run 1 "... and the archive alone" "ledger-000002.tgl" -- ledger verify "$T1"
fresh
flip "$TL/ledger.anchor" 66
run 1 "a tampered anchor (its time) fails the signature" "signature does not verify" -- \
    ledger verify "$TL" --keys "$KEYS"
run 1 "... also when verified with the archives" "signature does not verify" -- \
    ledger verify "$T1" "$T2" "$TL" --keys "$KEYS"
fresh
flip "$TL/ledger.anchor" 30
run 1 "a tampered anchor hash breaks the chain" "seq" -- ledger verify "$TL"
refuses_start "the daemon refuses a tampered anchor hash" "prev_hash" "$TL"
fresh
flip "$T2/archive.anchor" 60
run 1 "a tampered archive.anchor fails" "archive.anchor" -- ledger verify "$T1" "$T2" "$TL" --keys "$KEYS"
fresh
printf 'garbage' >"$TL/ledger.anchor"
run 1 "a damaged anchor" "ledger.anchor" -- ledger verify "$TL"
refuses_start "the daemon refuses a damaged anchor" "ledger.anchor" "$TL"
fresh
rm "$TL/ledger.anchor"
run 1 "a pruned directory without its anchor is corrupt" "segment file missing" -- ledger verify "$TL"
refuses_start "the daemon refuses a gap without an anchor" "segment file missing" "$TL"
tg_check "nothing was created in its place" test ! -e "$TL/ledger-000001.tgl"
fresh
rm "$T1/ledger-000002.tgl"
run 1 "a missing middle archived segment" "ledger-000002.tgl: segment file missing" -- \
    ledger verify "$T1" "$T2" "$TL"
fresh
last1=$(find "$T1" -name 'ledger-*.tgl' | sort | tail -1)
rm "$last1"
run 1 "an archive missing its last segment" "records missing or altered at its end" -- \
    ledger verify "$T1" "$T2" "$TL"
fresh
rm "$T1/archive.anchor"
run 1 "an archive without archive.anchor cannot be followed" "must say where it ends" -- \
    ledger verify "$T1" "$T2" "$TL"

# A forged anchor: another key under the same key id.
tg_keygen "$TG_TMP/forger.pem" itest-key-1
rm -rf "$TG_TMP/f"
mkdir "$TG_TMP/f"
cp -a "$TG_TMP/unpruned" "$TG_TMP/f/live"
run 0 "archive with another key" "archived:" -- ledger archive "$TG_TMP/f/live" --before "$LATER" --retention 0 \
    --to "$TG_TMP/f/arch" --key "$TG_TMP/forger.pem"
run 1 "an anchor signed by another key fails" "signature does not verify" -- \
    ledger verify "$TG_TMP/f/live" --keys "$KEYS"
tg_keygen "$TG_TMP/other.pem" other-key
rm -rf "$TG_TMP/f/live" "$TG_TMP/f/arch"
cp -a "$TG_TMP/unpruned" "$TG_TMP/f/live"
run 0 "archive with a key of another id" "archived:" -- ledger archive "$TG_TMP/f/live" \
    --before "$LATER" --retention 0 --to "$TG_TMP/f/arch" --key "$TG_TMP/other.pem"
run 1 "an anchor by a key not given fails" "not among the keys given" -- \
    ledger verify "$TG_TMP/f/live" --keys "$KEYS"

# ---- interrupted runs: before the live anchor (the archive partly written), after it (the
# segments still below it); a transparency log -------------------------------------------------
rm -rf "$TG_TMP/c"
mkdir -p "$TG_TMP/c/arch"
cp -a "$TG_TMP/unpruned" "$TG_TMP/c/live"
cp "$TG_TMP/c/live/ledger-000001.tgl" "$TG_TMP/c/arch/"
head -c 100 "$TG_TMP/c/live/ledger-000002.tgl" >"$TG_TMP/c/arch/ledger-000002.tgl"
echo partial >"$TG_TMP/c/arch/ledger-000003.tgl.tmp"
run 0 "an archive interrupted before the anchor is redone" "archived: ledger-000001.tgl" -- \
    ledger archive "$TG_TMP/c/live" --before "$LATER" --retention 0 --to "$TG_TMP/c/arch" --key "$TG_KEY"
run 0 "... and both verify as one chain" "ledger OK" -- \
    ledger verify "$TG_TMP/c/arch" "$TG_TMP/c/live" --keys "$KEYS"
fresh
cp -a "$(find "$T2" -name 'ledger-*.tgl' | sort | head -1)" "$TL/"
run 0 "a segment left below the anchor is ignored" "below the anchor ignored" -- ledger verify "$TL"
run 0 "the next archive removes it (identical in the archive)" "removed 1 segment(s)" -- \
    ledger archive "$TL" --before 1970-01-02T00:00:00Z --to "$T2" --key "$TG_KEY"
run 0 "... and the directory verifies" "ledger OK" -- ledger verify "$T1" "$T2" "$TL" --keys "$KEYS"
fresh
mkdir "$TL/tlog"
run 2 "a ledger with a transparency log is not archived" "transparency log" -- \
    ledger archive "$TL" --before "$LATER" --retention 0 --to "$TG_TMP/t/a3" --key "$TG_KEY"

tg_done
