#!/usr/bin/env bash
# daemon_snapshot.sh — starts from a snapshot of the tables (issue 24, docs/LEDGER.md
# "Snapshots"): replays stay replays, used nonces stay used, receipts are found, records after
# the snapshot count, a damaged or foreign snapshot is ignored (logged) with the state still
# right, a longer retention ignores it, and SIGKILL around snapshot writing is safe.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args snap
ARGS=("${TG_STD_ARGS[@]}" --snapshot-every 5)
LEDGER=$TG_TMP/ledger-snap

# events NAME EVENT: how many lines of that event daemon NAME logged
events() { grep -c "\"event\":\"$2\"" "$(tg_logfile "$1")" || true; }

# wait_event NAME EVENT N: until daemon NAME logged EVENT at least N times (20 s at most)
wait_event() {
    local i
    for i in $(seq 200); do
        [ "$(events "$1" "$2")" -ge "$3" ] && return 0
        sleep 0.1
    done
    return 1
}

expect_replay_of() { # expect_replay_of SAVED LABEL
    tg_expect_header Idempotent-Replayed true "$2"
    tg_check "$2: body byte-identical to the original" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "$1")"
}

# The state every start must rebuild, whatever it starts from.
check_state() { # check_state LABEL
    local i
    for i in 1 7 12; do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"k-$i\",\"nonce\":\"n-$i\"")"
        expect_replay_of "k$i" "$1: k-$i replayed"
    done
    tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-3"')"
    tg_expect_error 409 replay_detected "$1: nonce n-3 (before the snapshot) still used"
    tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-after"')"
    tg_expect_error 409 replay_detected "$1: nonce n-after (after the snapshot) still used"
    tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-after"')"
    expect_replay_of kafter "$1: k-after (after the snapshot) replayed"
    tg_req GET "/v1/receipts/$EXEC_7" "${TG_AUTH_A[@]}"
    tg_expect_py "s == 200 and j['executionId'] == '$EXEC_7'" "$1: receipt of k-7 found"
    tg_req GET "/v1/receipts/$EXEC_AFTER" "${TG_AUTH_A[@]}"
    tg_expect_py "s == 200" "$1: receipt of k-after found"
    tg_req GET "/v1/receipts/$EXEC_7" "${TG_AUTH_B[@]}"
    tg_expect_error 404 not_found "$1: another tenant still cannot read it"
}

# ---- a ledger with keys, nonces and receipts, and a snapshot of it -----------------------
tg_start a -- "${ARGS[@]}"
for i in $(seq 1 12); do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"k-$i\",\"nonce\":\"n-$i\"")"
    tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "PERMIT k-$i"
    tg_save "k$i"
done
tg_jget EXEC_12 'j["execution_id"]'
EXEC_7=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["execution_id"])' "$(tg_saved_body k7)")
wait_event a snapshot_written 1 || tg_fail "no snapshot_written within 20 s"
tg_check "a snapshot file exists" compgen -G "$LEDGER/snapshot-*.tgs"
SNAP_SEQ=$(ls "$LEDGER" | sed -n 's/^snapshot-0*\([0-9]*\)\.tgs$/\1/p' | sort -n | tail -1)
tg_check "the snapshot covers at least 10 records (got ${SNAP_SEQ:-none})" test "${SNAP_SEQ:-0}" -ge 10
tg_stop a
# Records after the snapshot: appended by a daemon that writes no snapshot of them.
tg_start a2 -- "${TG_STD_ARGS[@]}" --snapshot-every 0
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-after","nonce":"n-after"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "PERMIT k-after"
tg_save kafter
tg_jget EXEC_AFTER 'j["execution_id"]'
tg_eq "$(events a2 snapshot_loaded)" 0 "--snapshot-every 0 loads no snapshot"
tg_stop a2
tg_check "the snapshot is not of the newest record" test "$SNAP_SEQ" -lt \
    "$("$TG_BIN" ledger verify "$LEDGER" 2>&1 | sed -n 's/^ *records: *\([0-9]*\).*/\1/p'
)"

# ---- restart from the snapshot ----------------------------------------------------------
tg_start b -- "${ARGS[@]}"
tg_eq "$(events b snapshot_loaded)" 1 "start b loaded the snapshot"
tg_eq "$(events b snapshot_ignored)" 0 "start b ignored none"
check_state "from the snapshot"
tg_stop b

# ---- damaged: ignored, logged, older or full replay, same state -------------------------
NEWEST=$(ls "$LEDGER"/snapshot-*.tgs | sort | tail -1)
python3 - "$NEWEST" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0x40
open(p, 'wb').write(b)
EOF
tg_start c -- "${ARGS[@]}"
tg_check "damaged snapshot: snapshot_ignored with the reason" \
    grep -q '"event":"snapshot_ignored".*checksum mismatch' "$(tg_logfile c)"
check_state "after a damaged snapshot"
tg_stop c
for f in "$LEDGER"/snapshot-*.tgs; do
    truncate -s 100 "$f" # every snapshot damaged: nothing to load
done
printf 'junk' >"$LEDGER/snapshot.tmp" # what a crash while writing leaves
tg_start d -- "${ARGS[@]}"
tg_eq "$(events d snapshot_loaded)" 0 "all snapshots damaged: none loaded"
tg_check "all damaged: each logged" test "$(events d snapshot_ignored)" -ge 1
check_state "after a full replay"
wait_event d snapshot_written 1 || tg_fail "d: no new snapshot written"
tg_stop d

# ---- a longer retention than the snapshot was written with: ignored -----------------------
tg_start e -- "${ARGS[@]}" --retention 172800
tg_check "longer retention: snapshot_ignored names it" \
    grep -q '"event":"snapshot_ignored".*retention' "$(tg_logfile e)"
tg_eq "$(events e snapshot_loaded)" 0 "longer retention: not loaded"
check_state "with a longer retention"
tg_stop e

# ---- another ledger's snapshot: its record is not this ledger's ---------------------------
tg_std_args other
tg_start o -- "${TG_STD_ARGS[@]}" --snapshot-every 5
for i in $(seq 1 8); do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"nonce\":\"o-$i\"")"
done
wait_event o snapshot_written 1 || tg_fail "o: no snapshot written"
tg_stop o
rm -f "$LEDGER"/snapshot-*.tgs
cp "$TG_TMP"/ledger-other/snapshot-*.tgs "$LEDGER"/
tg_std_args snap
tg_start f -- "${ARGS[@]}"
tg_check "a foreign snapshot: ignored, its record does not match" \
    grep -q '"event":"snapshot_ignored".*does not match the ledger' "$(tg_logfile f)"
tg_eq "$(events f snapshot_loaded)" 0 "a foreign snapshot is never loaded"
check_state "after a foreign snapshot"
tg_stop f

# ---- SIGKILL while snapshots are written --------------------------------------------------
rm -f "$LEDGER"/snapshot-*.tgs
for round in 1 2 3; do
    tg_start "k$round" -- "${TG_STD_ARGS[@]}" --snapshot-every 1
    for i in $(seq 1 6); do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"kk-$round-$i\",\"nonce\":\"kn-$round-$i\"")"
        [ "$i" = 1 ] && tg_save "kk$round"
    done
    sleep "0.$((RANDOM % 9 + 1))"
    kill -KILL "$(tg_pid "k$round")"
    wait "$(tg_pid "k$round")" 2>/dev/null
    unset "TG_PIDS[k$round]"
done
tg_start k4 -- "${ARGS[@]}"
check_state "after SIGKILLs around snapshot writing"
for round in 1 2 3; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"kk-$round-1\",\"nonce\":\"kn-$round-1\"")"
    expect_replay_of "kk$round" "after SIGKILLs: kk-$round-1 replayed"
    tg_post /v1/evaluate "$(tg_req_json permit ",\"nonce\":\"kn-$round-6\"")"
    tg_expect_error 409 replay_detected "after SIGKILLs: nonce kn-$round-6 still used"
done
tg_stop k4
tg_check "the ledger still verifies" "$TG_BIN" ledger verify "$LEDGER"

# ---- limit totals: in the snapshot and in the tail ----------------------------------------
LPOLICY=$TG_TMP/limits_policy.json
cat >"$LPOLICY" <<'JSON'
{
  "version": "snap-limits-1",
  "surfaces": {"deploy.prod": {"tier": 2, "default": "permit"}},
  "limits": [{"id": "deploys", "surface": "deploy.prod", "key": ["actor"], "count": true,
              "window_s": 3600, "max": 3, "reason": "DEPLOY_RATE_EXCEEDED"}]
}
JSON
tg_std_args lim
LARGS=("${TG_STD_ARGS[@]/#$TG_POLICY/$LPOLICY}")
DEPLOY='{"surface":"deploy.prod","action":"deploy","actor":"ci"}'
tg_start l1 -- "${LARGS[@]}" --snapshot-every 1
for i in 1 2; do
    tg_post /v1/evaluate "$DEPLOY"
    tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "deploy $i of 3 permitted"
done
wait_event l1 snapshot_written 1 || tg_fail "l1: no snapshot written"
sleep 1.5 # the second deploy's snapshot too
tg_stop l1
tg_start l2 -- "${LARGS[@]}" --snapshot-every 0
tg_post /v1/evaluate "$DEPLOY"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "deploy 3 of 3 permitted (after the snapshot)"
tg_stop l2
tg_start l3 -- "${LARGS[@]}" --snapshot-every 1
tg_eq "$(events l3 snapshot_loaded)" 1 "limits: started from the snapshot"
tg_post /v1/evaluate "$DEPLOY"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'DEPLOY_RATE_EXCEEDED'" \
    "deploy 4: the cap counts the snapshot's two and the tail's one"
tg_stop l3

tg_done
