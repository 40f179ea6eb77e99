#!/usr/bin/env bash
# pg_tlog.sh — one transparency log for a deployment of two instances on one PostgreSQL (SPEC
# §12, §13; docs/POSTGRES.md "The transparency log"): both run with the same log key; one
# integrates (it holds the log's advisory lock), both serve the checkpoint, tiles and proofs
# from the rows. Records from both get leaves; every checkpoint either instance served is
# signed by the key keys.json publishes, one root per size, each consistent with the newest;
# every acknowledged receipt's proof verifies from either instance (lib/tlog_verify.py, the
# independent verifier). Then the integrator is killed (SIGKILL) under load: the other takes
# the lock over, its checkpoints extend the old ones, and the killed one, restarted, serves
# the same log without integrating. Last, `ledger verify --database-url` recomputes the log
# from the records and finds it whole.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

"$TG_PY" -c 'import cryptography' 2>/dev/null ||
    tg_die "python3-cryptography is needed (scripts/deps installs it)"
TV=("$TG_PY" "$TG_PYLIB/tlog_verify.py")

pg_migrate
tg_keygen "$TG_TMP/key.pem"
LOG_KEY=$TG_TMP/log-key.pem
tg_keygen "$LOG_KEY" itest-log-1
LOG_ARGS=(--log-key "$LOG_KEY" --log-origin itest.trigguard.test/pglog --checkpoint-interval 50)
ACKS=$TG_TMP/acks
NOTES=$TG_TMP/notes
: >"$ACKS"
: >"$NOTES"

# log_errors NAME STATUS CODE LABEL: the checkpoint, a tile and both proofs all answer STATUS
# with the JSON error CODE on instance NAME (one mapping for every log route).
log_errors() {
    local path
    tg_use "$1"
    for path in /v1/log/checkpoint /v1/log/tile/0/000.p/1 \
        "/v1/log/proof/inclusion?index=0&size=1" "/v1/log/proof/consistency?old=1&new=1"; do
        tg_req GET "$path"
        tg_expect_error "$2" "$3" "$4: GET $path"
    done
}

# ---- before the first checkpoint: 503 log_pending, Retry-After ----------------------------------
# A session of ours holds the log's advisory lock, so no instance integrates and the fresh
# schema's tg_log_state has no note: what a deployment serves until its integrator signs.

# lock_holders: how many sessions hold the log's advisory lock (TG_PG_LOG_LOCK, pg_schema.h).
lock_holders() {
    sql "$TG_PG_URL" "select count(*) from pg_locks where locktype = 'advisory' and granted and classid = x'74676c6f'::int::oid and objid = x'67696e74'::int::oid and objsubid = 1"
}
"$TG_PG_PSQL" "$TG_PG_URL" -X -At -c "select pg_advisory_lock(x'74676c6f67696e74'::bigint)" \
    -c "select pg_sleep(120)" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do
    [ "$(lock_holders)" == 1 ] && break
    sleep 0.1
done
tg_eq "$(lock_holders)" 1 "a test session holds the log's advisory lock"
pg_serve p "${LOG_ARGS[@]}"
sleep 0.3 # a few of its (failing) lock attempts
log_errors p 503 log_pending "no checkpoint signed yet"
tg_check "the pending answer carries Retry-After" test -n "$(tg_header Retry-After)"
tg_stop p
sql "$TG_PG_URL" "select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory' and granted and classid = x'74676c6f'::int::oid and objid = x'67696e74'::int::oid" >/dev/null
wait "$holder" 2>/dev/null

pg_serve a "${LOG_ARGS[@]}"
pg_serve b "${LOG_ARGS[@]}"

# metric NAME INSTANCE: the value of an unlabelled metric on that instance's /metrics.
metric() {
    curl -s --max-time 5 "http://127.0.0.1:${TG_PORTS[$2]}/metrics" |
        awk -v m="$1" '$1 == m { print $2; exit }'
}
# integrator: the name of the instance that integrates now ("" if none or both).
integrator() {
    local a b
    a=$(metric trigguard_log_integrator a)
    b=$(metric trigguard_log_integrator b)
    if [ "$a" == 1 ] && [ "$b" != 1 ]; then echo a; elif [ "$b" == 1 ] && [ "$a" != 1 ]; then echo b; fi
}
# wait_integrator: until exactly one instance integrates (15 s at most); its name in $INT.
wait_integrator() {
    INT=""
    for _ in $(seq 1 150); do
        INT=$(integrator)
        [ -n "$INT" ] && return 0
        sleep 0.1
    done
}
# note_from NAME: appends the checkpoint NAME serves now to NOTES.
note_from() {
    curl -s --max-time 5 "http://127.0.0.1:${TG_PORTS[$1]}/v1/log/checkpoint" |
        "$TG_PY" -c 'import json,sys; print(json.dumps(sys.stdin.read()))' >>"$NOTES"
}
# tv_check LABEL NAME ARGS...: the verifier against instance NAME: every receipt of ACKS
# proved there, every checkpoint of NOTES (served by either) checked there.
tv_check() {
    local label=$1 name=$2 out
    shift 2
    if out=$("${TV[@]}" check "http://127.0.0.1:${TG_PORTS[$name]}" tok-acme "$ACKS" "$NOTES" \
        "$@" 2>&1); then
        tg_pass "$label ($(tail -1 <<<"$out"))"
    else
        tg_fail "$label:
$(head -30 <<<"$out")"
    fi
}

wait_integrator
tg_check "exactly one instance integrates (a: $(metric trigguard_log_integrator a), b: $(metric trigguard_log_integrator b))" \
    test -n "$INT"
tg_eq "$(lock_holders)" 1 "one session holds the log's advisory lock"

# ---- records from both, served by both ---------------------------------------------------------

for name in a b; do
    tg_use "$name"
    for i in 1 2 3 4 5 6; do
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"pt-$name-$i\"")"
        tg_expect_status 200 "a receipt from $name ($i)"
        tg_jget ex 'j["receipt"]["executionId"]'
        tg_jget rh 'j["receipt"]["receiptHash"]'
        echo "$ex $rh" >>"$ACKS"
        [ "$i" == 3 ] && tg_post /v1/evaluate "$(tg_req_json silence)" # a leaf, no receipt
    done
    note_from a
    note_from b
done
"${TV[@]}" load "http://127.0.0.1:${TG_PORTS[a]}" tok-acme "$ACKS" "$NOTES" 2 2 &
la=$!
"${TV[@]}" load "http://127.0.0.1:${TG_PORTS[b]}" tok-acme "$ACKS" "$NOTES" 2 2 &
lb=$!
wait "$la" "$lb"
note_from a
note_from b
tv_check "from a: every receipt of both proved, every checkpoint of both consistent" a --all-pairs
tv_check "from b: the same" b
sizes=$(sql "$TG_PG_URL" "select (select count(*) from tg_records) = size, size > 0 from tg_log_state")
tg_eq "$sizes" "t|t" "every record has a leaf once the load has stopped"
chains=$(sql "$TG_PG_URL" "select count(distinct instance_id) from tg_records where log_index is not null")
tg_eq "$chains" 2 "the leaves hold both instances' records"
size_a=$(metric trigguard_log_tree_size a)
size_b=$(metric trigguard_log_tree_size b)
tg_check "both report a tree size ($size_a, $size_b)" test "${size_a:-0}" -gt 0 -a "${size_b:-0}" -gt 0

# ---- kill -9 the integrator under load ---------------------------------------------------------

OLD=$INT
if [ "$OLD" == a ]; then SURV=b; else SURV=a; fi
old_checkpoints=$(metric trigguard_log_checkpoints_total "$SURV")
tg_eq "$old_checkpoints" 0 "the other instance has signed nothing"
"${TV[@]}" load "http://127.0.0.1:${TG_PORTS[$SURV]}" tok-acme "$ACKS" "$NOTES" 3 2 &
ls=$!
"${TV[@]}" load "http://127.0.0.1:${TG_PORTS[$OLD]}" tok-acme "$ACKS" "$NOTES" 3 2 &
lo=$!
sleep 1
kill -KILL "$(tg_pid "$OLD")"
wait "$(tg_pid "$OLD")" 2>/dev/null
unset "TG_PIDS[$OLD]"
wait "$lo" "$ls"
for _ in $(seq 1 150); do
    [ "$(metric trigguard_log_integrator "$SURV")" == 1 ] && break
    sleep 0.1
done
tg_eq "$(metric trigguard_log_integrator "$SURV")" 1 "$SURV took the integration over"
tg_check "$SURV signs checkpoints now" test "$(metric trigguard_log_checkpoints_total "$SURV")" -gt 0
tg_use "$SURV"
for i in 1 2 3; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"pt-after-$i\"")"
    tg_expect_status 200 "a receipt after the takeover ($i)"
    tg_jget ex 'j["receipt"]["executionId"]'
    tg_jget rh 'j["receipt"]["receiptHash"]'
    echo "$ex $rh" >>"$ACKS"
done
sleep 0.3
note_from "$SURV"
tv_check "after the takeover: every receipt proved on $SURV, every checkpoint before and after consistent" \
    "$SURV" --all-pairs

# the killed one comes back: it serves the same log and does not integrate
pg_serve "$OLD" "${LOG_ARGS[@]}"
note_from "$OLD"
tv_check "$OLD after its restart: the same log" "$OLD"
tg_eq "$(integrator)" "$SURV" "the integration stays with $SURV"
tg_eq "$(lock_holders)" 1 "one session holds the log's advisory lock"
tg_stop a
tg_stop b

# ---- another log key than the one that signed the stored log: 500 log_inconsistent --------
OTHER_KEY=$TG_TMP/other-log-key.pem
tg_keygen "$OTHER_KEY" itest-log-2
pg_serve c --log-key "$OTHER_KEY" --log-origin itest.trigguard.test/pglog --checkpoint-interval 50
log_errors c 500 log_inconsistent "a checkpoint another key signed: fail closed"
tg_stop c

# ---- the stored log, recomputed offline ------------------------------------------------------

run verify ledger verify --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "ledger verify --database-url: exit 0 ($(grep -E 'FAULT|what' "$TG_TMP/verify.out") $(cat "$TG_TMP/verify.err"))"
tg_check "it checked the log" grep -qE '^  log: +checkpoint of [1-9][0-9]* leaves' "$TG_TMP/verify.out"
# a leaf moved: found, named
sql "$TG_PG_URL" "update tg_records set log_entry = sha256(log_entry) where log_index = 1" >/dev/null
run verify2 ledger verify --database-url "$TG_PG_URL"
tg_eq "$rc" 1 "a changed log entry: ledger verify exits 1"
tg_check "and names it" grep -q "log_entry is not the record's entry" "$TG_TMP/verify2.out"
sql "$TG_PG_URL" "update tg_records set log_entry = null where log_index = 1" >/dev/null
run verify3 ledger verify --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "an entry stored as NULL is derived from its record: exit 0 ($(grep -E 'FAULT|what' "$TG_TMP/verify3.out"))"
sql "$TG_PG_URL" "update tg_log_hashes set hash = sha256(hash) where level = 1 and idx = 0" >/dev/null
run verify4 ledger verify --database-url "$TG_PG_URL"
tg_eq "$rc" 1 "a changed stored hash: exit 1"
tg_check "and names it" grep -q "stored hash at level 1, index 0 is not the hash of its subtree" \
    "$TG_TMP/verify4.out"
tg_done
