#!/usr/bin/env bash
# daemon_ledger_failure.sh — the ledger stops taking data while the daemon runs (here a
# file-size limit, set on the running process with prlimit: to the ledger it looks like a
# full disk). The daemon must fail closed and say why, keep failing until the cause is gone
# (no flapping back to healthy on a probe that does not meet the real limit), recover by
# itself when it is, and lose nothing it acknowledged. Two rounds: a limit exactly at the
# end of the segment (the next write fails outright, and SIGXFSZ must not kill the daemon)
# and a limit a few records further (the write is cut short, then fails). Each round:
#   - decisions get 503 ledger_unavailable, never a receipt that is not on disk;
#   - /readyz turns 503 with "ledger": false;
#   - one error line `ledger_unhealthy` naming the system's reason (EFBIG, "File too
#     large"), not a generic I/O error, and one write failure in the metrics, however many
#     recovery attempts run while the limit stays;
#   - after the limit is lifted: `ledger_recovered`, /readyz 200, decisions signed again.
# At the end every acknowledged receipt replays byte for byte, and `trigguard ledger
# verify` counts exactly the acknowledged records.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args lf
tg_start lf -- "${TG_STD_ARGS[@]}"
pid=$(tg_pid lf)
seg=$TG_TMP/ledger-lf/ledger-000001.tgl
log=$(tg_logfile lf)

acked=0
next=1
post() { # post KEY: one evaluate with idempotency key lf-KEY
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"lf-$1\"")"
}
post_ok() { # post_ok LABEL: the next key must be acknowledged
    post "$next"
    tg_expect_status 200 "$1 (lf-$next)"
    tg_save "lf-$next"
    acked=$((acked + 1))
    next=$((next + 1))
}

round() { # round NAME ROOM: limit = segment size + ROOM bytes
    local name=$1 room=$2 size refused=0 i
    size=$(stat -c %s "$seg")
    tg_check "$name: prlimit lowers the running daemon's file-size limit" \
        prlimit --pid "$pid" --fsize=$((size + room)):unlimited
    for i in $(seq 1 20); do
        post "$next"
        if [ "$TG_STATUS" == 200 ]; then
            tg_save "lf-$next"
            acked=$((acked + 1))
            next=$((next + 1))
        else
            tg_expect_error 503 ledger_unavailable "$name: lf-$next at the limit fails closed"
            tg_expect_py "'receipt' not in j and 'decision' not in j" "$name: the 503 carries no decision"
            refused=1
            break
        fi
    done
    tg_eq "$refused" 1 "$name: a request was refused once the segment reached the limit"
    tg_check "$name: the daemon is still running" kill -0 "$pid"

    tg_req GET /readyz
    tg_expect_status 503 "$name: /readyz while the ledger cannot write"
    tg_expect_py "j['ledger'] is False and j['ready'] is False" "$name: /readyz names the ledger"

    # The writer retries every second; its probe meets the same limit: nothing comes back.
    sleep 2.5
    post "x-$name"
    tg_expect_error 503 ledger_unavailable "$name: still refused after recovery attempts"
    tg_req GET /metrics
    tg_check "$name: failures counted once per outage (no flapping back to health)" \
        grep -qx "trigguard_ledger_failures_total $3" "$TG_BODY_FILE"
    tg_eq "$(grep -c '"event":"ledger_unhealthy"' "$log")" "$3" \
        "$name: one ledger_unhealthy line per outage"
    tg_check "$name: it names the system's reason (EFBIG) at level error" \
        grep -q '"level":"error","event":"ledger_unhealthy".*File too large' "$log"
    if grep '"event":"ledger_unhealthy"' "$log" | grep -q 'Input/output error'; then
        tg_fail "$name: ledger_unhealthy says 'Input/output error' for a size limit"
    fi

    tg_check "$name: prlimit lifts the limit" prlimit --pid "$pid" --fsize=unlimited:unlimited
    tg_check "$name: /readyz is 200 again within 6 s of lifting the limit" \
        tg_wait_status /readyz 200 60 0.1
    tg_eq "$(grep -c '"event":"ledger_recovered"' "$log")" "$3" "$name: ledger_recovered is logged"
    post_ok "$name: a signed decision after recovery"
    tg_expect_py "j['decision'] == 'PERMIT' and 'receipt' in j" "$name: a signed PERMIT again"
}

for i in 1 2 3; do post_ok "before any limit"; done
round at-end 0 1
round short 3000 2

# Nothing acknowledged was lost: replays are byte-identical.
for i in $(seq 1 $((next - 1))); do
    post "$i"
    tg_expect_header Idempotent-Replayed true "replay of lf-$i"
    tg_check "replay of lf-$i is byte-identical" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "lf-$i")"
done

tg_fetch_keys "$TG_TMP/keys-lf.json"
tg_stop lf
out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-lf" --keys "$TG_TMP/keys-lf.json" 2>&1)
tg_eq "$?" 0 "ledger verify after two outages and recoveries: $out"
tg_check "the ledger holds exactly the $acked acknowledged records" \
    grep -q "records: *$acked " <<<"$out"

# Storage that loses acknowledged records while the daemon is stopped (the last record cut
# short): ledger.head recorded them, so the start is refused, not repaired as a torn tail.
seg=$(ls "$TG_TMP"/ledger-lf/ledger-*.tgl | tail -1)
size=$(stat -c %s "$seg")
truncate -s $((size - 1)) "$seg"
out=$(TRIGGUARD_API_KEYS="$TG_API_KEYS" timeout 20 "$TG_BIN" serve --port 0 \
    --port-file "$TG_TMP/port-refused" "${TG_STD_ARGS[@]}" 2>&1)
rc=$?
tg_eq "$rc" 2 "a start on a ledger that lost a durable record is refused (exit 2)"
tg_check "the refusal says what was lost: $out" grep -q "1 durable records lost" <<<"$out"
tg_check "the refusal says how to accept it" grep -q "move ledger.head away" <<<"$out"
tg_check "the refused start wrote no port file" test ! -e "$TG_TMP/port-refused"
tg_eq "$(stat -c %s "$seg")" "$((size - 1))" "the refused start left the segment as it was"
# The operator accepts the loss by moving ledger.head away: the cut record is then a torn
# tail, dropped, and the daemon serves again.
mv "$TG_TMP/ledger-lf/ledger.head" "$TG_TMP/ledger.head.lf"
tg_start lf2 -- "${TG_STD_ARGS[@]}"
tg_check "the start reports the dropped record" grep -q '"event":"ledger_torn_tail"' "$(tg_logfile lf2)"
post_ok "a signed decision after accepting the loss"
tg_check "a new ledger.head is written" test -s "$TG_TMP/ledger-lf/ledger.head"
tg_stop lf2
tg_done
