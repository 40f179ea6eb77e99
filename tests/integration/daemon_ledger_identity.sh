#!/usr/bin/env bash
# daemon_ledger_identity.sh — the ledger directory disappears under a running daemon (moved
# away or deleted, with decisions in flight, or while idle). The daemon must notice at once
# and never let the records, their idempotency keys and nonces count for nothing:
#   - every decision after that gets 503 ledger_unavailable (none is acknowledged into a
#     file that has no name any more), /readyz 503 saying why, one `ledger_identity_lost`
#     error line, trigguard_ledger_identity_lost_total 1;
#   - the directory is back at its path holding ledger.head and the daemon's lock: a second
#     daemon on the path refuses while the first runs, and a restart with the same flags
#     refuses (exit 2) naming what is missing and the way out, instead of starting an empty
#     ledger; `ledger verify` reports the directory as damage (exit 1);
#   - a moved directory still holds exactly the acknowledged records, and putting it back
#     is the way out: the old idempotency keys replay byte for byte.
# Then --ledger-create: never refuses a missing or empty directory (serve and
# --check-config), auto (the default) creates one with a warning.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen

# traffic NAME TAG N: N sequential evaluates with idempotency keys TAG-1..N, one status a
# line into $TG_TMP/traffic-TAG (curl alone: runs in the background, away from tg_req).
traffic() {
    local name=$1 tag=$2 n=$3 i
    local url="http://127.0.0.1:${TG_PORTS[$name]}/v1/evaluate"
    : >"$TG_TMP/traffic-$tag"
    for i in $(seq 1 "$n"); do
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 "${TG_AUTH_A[@]}" \
            -H "Content-Type: application/json" \
            --data-binary "$(tg_req_json permit ",\"idempotency_key\":\"$tag-$i\"")" \
            "$url" >>"$TG_TMP/traffic-$tag"
    done
}

# wait_lines FILE N: until FILE has N lines (20 s at most).
wait_lines() {
    local i
    for i in $(seq 1 400); do
        [ "$(wc -l <"$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}

# check_statuses TAG LABEL: 200s, then only 503s, and some of each. Sets OK_COUNT.
check_statuses() {
    local f=$TG_TMP/traffic-$1
    OK_COUNT=$(grep -c '^200$' "$f")
    tg_check "$2: every answer is 200 or 503 ($(sort "$f" | uniq -c | tr '\n' ' '))" \
        bash -c "! grep -qvE '^(200|503)$' '$f'"
    tg_check "$2: no 200 after the first 503 (nothing acknowledged once it is gone)" \
        bash -c "awk '/^503$/{bad=1} /^200$/{if (bad) exit 1}' '$f'"
    tg_ne "$OK_COUNT" 0 "$2: decisions were acknowledged before"
    tg_check "$2: decisions were refused after" grep -q '^503$' "$f"
}

# expect_lost NAME LABEL: what a daemon whose ledger lost its identity shows.
expect_lost() {
    local name=$1 label=$2 log
    log=$(tg_logfile "$name")
    tg_use "$name"
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"after-$name\"")"
    tg_expect_error 503 ledger_unavailable "$label: a decision after it"
    tg_req GET /readyz
    tg_expect_status 503 "$label: /readyz"
    tg_expect_py "j['ready'] is False and j['ledger'] is False and 'gone from its path' in j['reason'] and 'restart' in j['reason']" \
        "$label: /readyz says the ledger directory is gone and a restart is needed"
    tg_req GET /metrics
    tg_check "$label: trigguard_ledger_identity_lost_total 1" \
        grep -qx "trigguard_ledger_identity_lost_total 1" "$TG_BODY_FILE"
    tg_eq "$(grep -c '"event":"ledger_identity_lost"' "$log")" 1 "$label: one ledger_identity_lost line"
    tg_check "$label: the line is an error naming the directory and the evidence kept" \
        grep -q '"level":"error","event":"ledger_identity_lost","msg":"[^"]*ledger-'"$name"': the ledger directory is gone.*evidence kept: directory recreated' "$log"
    tg_eq "$(grep -c '"event":"ledger_unhealthy"' "$log")" 0 "$label: not also logged as a write failure"
    local dir=$TG_TMP/ledger-$name
    tg_eq "$(stat -c %s "$dir/ledger.head" 2>/dev/null)" 1024 "$label: ledger.head is back at the path"
    tg_check "$label: ledger.lock is back at the path" test -f "$dir/ledger.lock"
    tg_eq "$(stat -c %a "$dir")" 700 "$label: the recreated directory is 0700"
    tg_check "$label: no segment was created there" bash -c "! ls '$dir'/ledger-*.tgl >/dev/null 2>&1"
}

# refused_start NAME LABEL WANT...: `serve` with NAME's ledger exits 2 saying each WANT.
refused_start() {
    local name=$1 label=$2 out rc w
    shift 2
    rm -f "$TG_TMP/port-refused"
    out=$(TRIGGUARD_API_KEYS="$TG_API_KEYS" timeout 20 "$TG_BIN" serve --port 0 \
        --port-file "$TG_TMP/port-refused" "${TG_STD_ARGS[@]}" "${EXTRA[@]}" 2>&1)
    rc=$?
    tg_eq "$rc" 2 "$label: refused (exit 2)"
    for w in "$@"; do
        tg_check "$label: says '$w': $out" grep -q -- "$w" <<<"$out"
    done
    tg_check "$label: never listened" test ! -e "$TG_TMP/port-refused"
}
EXTRA=()

# ---- 1. fsync: the directory moved away while two clients send decisions ---------------
tg_std_args li1
tg_start li1 -- "${TG_STD_ARGS[@]}"
for i in 1 2 3; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"first-$i\"")"
    tg_expect_status 200 "first-$i"
    tg_save "first-$i"
done
traffic li1 a1 150 &
ta=$!
traffic li1 b1 150 &
tb=$!
wait_lines "$TG_TMP/traffic-a1" 30 || tg_fail "moved: the traffic did not start"
mv "$TG_TMP/ledger-li1" "$TG_TMP/ledger-li1.moved"
wait "$ta" "$tb"
check_statuses a1 "moved, client a"
acked=$OK_COUNT
check_statuses b1 "moved, client b"
acked=$((acked + OK_COUNT + 3))
expect_lost li1 "moved"

refused_start li1 "a second daemon on the path while the first runs" "locked by another process"
tg_stop li1
refused_start li1 "a restart after the move" "no segment file is left" "move ledger.head away" \
    "seq [0-9]* was on disk"
out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-li1" 2>&1)
tg_eq "$?" 1 "ledger verify calls the evidence directory damage: $out"
tg_check "ledger verify names ledger.head" grep -q "file: .*ledger.head" <<<"$out"

out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-li1.moved" 2>&1)
tg_eq "$?" 0 "the moved directory is a sound ledger: $out"
tg_check "it holds exactly the $acked acknowledged records" grep -q "records: *$acked " <<<"$out"

# The way out: the evidence directory holds only ledger.head and the lock; put the real
# one back in its place and the daemon serves on, every acknowledged key remembered.
tg_eq "$(ls -A "$TG_TMP/ledger-li1" | sort | tr '\n' ' ')" "ledger.head ledger.lock " \
    "the evidence directory holds only ledger.head and ledger.lock"
rm -r "$TG_TMP/ledger-li1"
mv "$TG_TMP/ledger-li1.moved" "$TG_TMP/ledger-li1"
tg_start li1b -- "${TG_STD_ARGS[@]}"
for i in 1 2 3; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"first-$i\"")"
    tg_expect_header Idempotent-Replayed true "after moving it back: first-$i replays"
    tg_check "first-$i replays byte for byte" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "first-$i")"
done
tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"a1-1\"")"
tg_expect_header Idempotent-Replayed true "a key acknowledged during the traffic replays"
tg_stop li1b

# ---- 2. none: the directory deleted (rm -rf) under traffic -------------------------------
tg_std_args li2
tg_start li2 -- "${TG_STD_ARGS[@]}" --durability none
traffic li2 a2 150 &
ta=$!
traffic li2 b2 150 &
tb=$!
wait_lines "$TG_TMP/traffic-a2" 30 || tg_fail "deleted: the traffic did not start"
rm -rf "$TG_TMP/ledger-li2"
wait "$ta" "$tb"
check_statuses a2 "deleted (none), client a"
check_statuses b2 "deleted (none), client b"
expect_lost li2 "deleted (none)"
tg_stop li2
EXTRA=(--durability none)
refused_start li2 "a restart after rm -rf" "no segment file is left" "move ledger.head away"
EXTRA=()

# ---- 3. fsync, idle: deleted with no request in flight, then a quick restart -------------
# Nothing writes, so only the daemon's tick can notice; it must, before the restart, or
# the restart would find an empty path and start an empty ledger.
tg_std_args li3
tg_start li3 -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"idle-1"')"
tg_expect_status 200 "idle: a decision before"
rm -rf "$TG_TMP/ledger-li3"
tg_check "idle: /readyz turns 503 within 2 s without any decision" \
    tg_wait_status /readyz 503 40 0.05
expect_lost li3 "idle"
tg_stop li3
refused_start li3 "idle: a restart right after" "no segment file is left"
# Accepting a fresh ledger on purpose: move ledger.head away (docs/OPERATIONS.md).
mv "$TG_TMP/ledger-li3/ledger.head" "$TG_TMP/ledger.head.li3"
tg_start li3b -- "${TG_STD_ARGS[@]}"
tg_check "the accepted fresh ledger is logged as created" \
    grep -q '"level":"warn","event":"ledger_created","msg":"created a new, empty ledger at ' "$(tg_logfile li3b)"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"idle-1"')"
tg_expect_status 200 "the fresh ledger decides"
tg_expect_no_header Idempotent-Replayed "the fresh ledger remembers no earlier key (accepted on purpose)"
tg_stop li3b

# ---- 4. --ledger-create -------------------------------------------------------------------
tg_std_args lc
EXTRA=(--ledger-create never)
refused_start lc "never, no directory" "no ledger directory" "--ledger-create auto"
tg_check "never: the directory was not created" test ! -e "$TG_TMP/ledger-lc"
out=$(TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --check-config "${TG_STD_ARGS[@]}" \
    --ledger-create never 2>&1)
tg_eq "$?" 2 "never: --check-config refuses a missing directory too: $out"
mkdir -m 0700 "$TG_TMP/ledger-lc"
refused_start lc "never, an empty directory" "no ledger segment file" "--ledger-create auto"
tg_check "never: no segment was created" test ! -e "$TG_TMP/ledger-lc/ledger-000001.tgl"
EXTRA=()
tg_start lc -- "${TG_STD_ARGS[@]}"
tg_check "auto (the default): a new ledger, with a warning" \
    grep -q '"level":"warn","event":"ledger_created"' "$(tg_logfile lc)"
tg_stop lc
tg_start lc2 TRIGGUARD_LEDGER_CREATE=never -- "${TG_STD_ARGS[@]}"
tg_check "never (from the environment) starts on an existing ledger, without the warning" \
    bash -c "! grep -q '\"event\":\"ledger_created\"' '$(tg_logfile lc2)'"
tg_req GET /readyz
tg_expect_status 200 "never: ready on an existing ledger"
tg_stop lc2
tg_done
