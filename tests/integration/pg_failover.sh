#!/usr/bin/env bash
# pg_failover.sh — SPEC §13's durability promise, tested: with a synchronous standby
# (synchronous_standby_names = 'ANY 1 (...)'), no acknowledged receipt is lost when the
# primary is killed with SIGKILL under load and the standby is promoted; the daemon, given
# both nodes in one multi-host URL with target_session_attrs=read-write, finds the new
# primary by itself. Three such cycles (the old primary rebuilt as the new standby each
# time), one more with the standby's walreceiver stopped (commits wait and get 503, still
# nothing acknowledged is lost), then the negative control: the same with an asynchronous
# standby, where the check must find acknowledged receipts missing, or it proves nothing.
# shellcheck disable=SC2317 # the helpers are called through wait_for and tg_check
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=scripts/lib/pg.sh
source "$TG_SRC/scripts/lib/pg.sh"
unset TRIGGUARD_DATABASE_URL

SYNC_CYCLES=${TG_FAILOVER_CYCLES:-3}
ASYNC_TRIES=${TG_FAILOVER_ASYNC_TRIES:-3}
STALL_SECONDS=2

sql() { "$TG_PG_PSQL" "$1" -X -At -v ON_ERROR_STOP=1 -c "$2" 2>&1; }

# wait_for SECONDS CMD...: CMD succeeds within SECONDS (polled every 0.1 s).
wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# standby_is PRIMARY STANDBY STATE: PRIMARY streams to STANDBY and counts it as STATE
# (pg_stat_replication.sync_state: quorum for a member of ANY 1 (...), async otherwise).
standby_is() {
    [ "$(sql "${TG_PG_NODE_ADMIN_URL[$1]}" "select sync_state from pg_stat_replication where application_name = '$2' and state = 'streaming'")" = "$3" ]
}

acks_in() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
more_acks() { [ "$(acks_in "$1")" -gt "$2" ]; }
# alive WHEN: both daemons still run, or the test stops here with the end of a log.
alive() {
    local n
    for n in a b; do
        kill -0 "$(tg_pid $n)" 2>/dev/null && continue
        tg_die "$1: daemon $n died; its log ends:
$(grep -v '"event":"request"' "$(tg_logfile $n)" | tail -30)"
    done
}
# readyz_is STATUS: both daemons' /readyz answer STATUS.
readyz_is() {
    local n
    for n in a b; do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${TG_PORTS[$n]}/readyz")" = "$1" ] ||
            return 1
    done
}

# The pair: tga the primary, tgb its standby; either is the other's standby after a
# failover, so both are named in synchronous_standby_names.
primary=tga standby=tgb
tg_pg_node_primary "$primary" "synchronous_standby_names = 'ANY 1 (tga, tgb)'" ||
    tg_die "start the primary: $TG_PG_ERROR"
tg_pg_node_standby "$standby" "$primary" || tg_die "start the standby: $TG_PG_ERROR"
tg_check "the standby is synchronous (quorum)" wait_for 30 standby_is "$primary" "$standby" quorum
tg_pg_multi_url tga tgb
"$TG_BIN" db migrate --database-url "$TG_PG_MULTI_URL" >"$TG_TMP/migrate.out" 2>&1 ||
    tg_die "db migrate through the multi-host URL: $(cat "$TG_TMP/migrate.out")"

# shellcheck disable=SC2119 # the default key path
tg_keygen
# Two instances behind one (client-side, round robin) balancer, each with its own pool and
# writer: both must find the new primary.
for n in a b; do
    tg_start $n -- --policy "$TG_POLICY" --key "$TG_KEY" --log-format json --threads 2 \
        --store postgres --database-url "$TG_PG_MULTI_URL" --db-timeout 500 \
        --ledger-stall-timeout 1000 --claim-timeout 1000
done
tg_check "both daemons are ready on the primary" wait_for 10 readyz_is 200

# cycle LABEL MODE STALL: one failover under load. MODE sync or async (what the standby is
# expected to be); STALL 1 stops the standby's walreceiver for STALL_SECONDS of load before
# the primary is killed. Afterwards the promoted standby is $primary, the rebuilt old
# primary $standby; ACKED and MISSING are the cycle's acknowledged receipts and how many of
# them tg_receipts on the new primary lacks; WINDOW the statuses answered while the
# walreceiver was stopped; LOST_ID one missing execution id (if any).
cycle() {
    local label=$1 mode=$2 stall=$3 d=$TG_TMP/$1 want=quorum load wr="" before old
    [ "$mode" = async ] && want=async
    mkdir -p "$d"
    tg_check "$label: the standby $standby is $want before the kill" \
        wait_for 30 standby_is "$primary" "$standby" "$want"
    python3 "$TG_PYLIB/failover_load.py" --ports "${TG_PORTS[a]},${TG_PORTS[b]}" --token tok-acme \
        --prefix "$label" --threads 8 --acks "$d/acks" --stop "$d/stop" \
        --mark "$d/stalled" --mark "$d/killed" --mark "$d/promoted" --mark "$d/ready" \
        >"$d/load.json" 2>"$d/load.err" &
    load=$!
    wait_for 30 more_acks "$d/acks" 100 || tg_fail "$label: fewer than 100 acks in 30 s of load"
    if [ "$stall" = 1 ]; then
        tg_pg_node_walreceiver "$standby" || tg_die "$label: $TG_PG_ERROR"
        wr=$TG_PG_WALRECEIVER
        kill -STOP "$wr" || tg_die "$label: cannot stop the walreceiver $wr"
        touch "$d/stalled"
        sleep 1
        tg_log "$label: walreceiver $wr state $(ps -o stat= -p "$wr"); on $primary: $(sql "${TG_PG_NODE_ADMIN_URL[$primary]}" "select application_name, sync_state, flush_lsn, pg_current_wal_lsn() from pg_stat_replication" | tr '\n' ' ')"
        sleep $((STALL_SECONDS - 1))
    fi
    alive "$label, before the kill"
    before=$(acks_in "$d/acks")
    tg_pg_node_kill "$primary" || tg_die "$label: kill -9 the primary: $TG_PG_ERROR"
    touch "$d/killed"
    tg_check "$label: /readyz turns 503 on both daemons with the primary gone" wait_for 10 readyz_is 503
    # A receipt lookup with no primary: 503 store_unavailable, never 404 (an auditor would
    # read "no such receipt").
    tg_use a
    tg_req GET "/v1/receipts/$(head -n 1 "$d/acks" | cut -f1)" "${TG_AUTH_A[@]}"
    tg_expect_error 503 store_unavailable "$label: GET /v1/receipts with no primary"
    [ -z "$wr" ] || kill -CONT "$wr"
    tg_pg_node_promote "$standby" || tg_die "$label: promote $standby: $TG_PG_ERROR"
    touch "$d/promoted"
    cp "${TG_PG_NODE_DIR[$primary]}/server.log" "$d/server-$primary.log"
    old=$primary primary=$standby standby=$old
    # The new primary's commits wait for a synchronous standby: rebuild one at once.
    tg_pg_node_rebuild "$standby" "$primary" || tg_die "$label: rebuild $standby: $TG_PG_ERROR"
    tg_check "$label: /readyz 200 again on both, the daemons found $primary by themselves" \
        wait_for 30 readyz_is 200
    alive "$label, after the promotion"
    touch "$d/ready"
    tg_check "$label: acknowledged decisions again after the failover" \
        wait_for 30 more_acks "$d/acks" "$before"
    sleep 2
    touch "$d/stop"
    wait "$load" || tg_fail "$label: the load client failed: $(tail -5 "$d/load.err")"
    alive "$label, at the end"
    tg_log "$label: load $(cat "$d/load.json")"
    tg_check "$label: every 2xx carried its receipt, every non-2xx was 503 store_unavailable" \
        python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["bad"] != [])' "$d/load.json"
    ACKED=$(acks_in "$d/acks")
    WINDOW=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["window"].get("stalled", {})))' "$d/load.json")
    # The check: every acknowledged execution id has its row in tg_receipts (and so, by the
    # foreign key, its record) on the new primary.
    "$TG_PG_PSQL" "${TG_PG_NODE_URL[$primary]}" -X -q -At -v ON_ERROR_STOP=1 \
        -c 'create temp table acks (id text, idem_key text, t float8)' \
        -c "\\copy acks from '$d/acks'" \
        -c "select count(*), count(distinct id) from acks" \
        -c "select count(*) from acks a where not exists (select 1 from tg_receipts r where r.tenant = 'acme' and r.execution_id = a.id)" \
        -c "select coalesce(min(a.id), '') from acks a where not exists (select 1 from tg_receipts r where r.tenant = 'acme' and r.execution_id = a.id)" \
        >"$d/check.out" 2>&1 || tg_die "$label: the check query failed: $(cat "$d/check.out")"
    tg_eq "$(sed -n 1p "$d/check.out")" "$ACKED|$ACKED" "$label: $ACKED acknowledged, all distinct, all loaded"
    MISSING=$(sed -n 2p "$d/check.out") LOST_ID=$(sed -n 3p "$d/check.out")
    cp "${TG_PG_NODE_DIR[$primary]}/server.log" "$d/server-$primary.log"
    tg_log "$label: $mode standby, stall $stall: $ACKED acknowledged ($before before the kill), $MISSING missing on $primary; while stalled: $WINDOW"
}

# ---- synchronous standby: nothing acknowledged is lost -------------------------------------

total=0
for i in $(seq 1 "$SYNC_CYCLES"); do
    cycle "sync-$i" sync 0
    tg_eq "$MISSING" 0 "sync-$i: no acknowledged receipt is missing after the failover"
    tg_check "sync-$i: a real run ($ACKED acknowledged)" test "$ACKED" -gt 100
    total=$((total + ACKED))
done

# The walreceiver stopped: the primary cannot have a commit confirmed, so decisions wait and
# get 503 instead of an acknowledgment that the standby does not hold.
cycle sync-stall sync 1
tg_eq "$MISSING" 0 "sync-stall: no acknowledged receipt is missing after the failover"
tg_check "sync-stall: 503s while the walreceiver was stopped ($WINDOW)" python3 -c '
import json, sys; sys.exit(json.loads(sys.argv[1]).get("503", 0) == 0)' "$WINDOW"
total=$((total + ACKED))

# Any instance serves any receipt from the promoted primary: the first and the last one
# acknowledged, whichever daemon signed them.
for id in "$(head -n 1 "$TG_TMP/sync-1/acks" | cut -f1)" "$(tail -n 1 "$TG_TMP/sync-stall/acks" | cut -f1)"; do
    for n in a b; do
        tg_use $n
        tg_req GET "/v1/receipts/$id" "${TG_AUTH_A[@]}"
        tg_expect_py "s == 200 and j['executionId'] == '$id'" "GET /v1/receipts/$id from daemon $n after the failovers"
    done
done
# Their idempotency keys survived too: a retry is a replay of the first answer.
for line in "$(head -n 1 "$TG_TMP/sync-1/acks")" "$(tail -n 1 "$TG_TMP/sync-stall/acks")"; do
    id=$(cut -f1 <<<"$line") key=$(cut -f2 <<<"$line")
    tg_use b
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$key\"")"
    tg_expect_py "s == 200 and h.get('idempotent-replayed') == 'true' and j['receipt']['executionId'] == '$id'" \
        "a retry of $key after the failovers replays its acknowledged answer"
done
"$TG_BIN" ledger verify --database-url "${TG_PG_NODE_URL[$primary]}" >"$TG_TMP/verify-sync.out" 2>&1
rc=$?
tg_eq "$rc" 0 "ledger verify --database-url after the synchronous failovers ($(tail -n 2 "$TG_TMP/verify-sync.out" | tr '\n' ' '))"
tg_log "synchronous: $total acknowledged over $((SYNC_CYCLES + 1)) failovers, 0 missing"

# ---- negative control: an asynchronous standby loses acknowledged receipts -----------------
# Without a synchronous standby a commit is acknowledged once the primary has it; a standby
# whose walreceiver is stopped falls behind, and what the primary had not sent it when it
# died is gone. The check above must see that, or finding 0 missing proves nothing.
tg_pg_node_set "$primary" synchronous_standby_names "''" || tg_die "$TG_PG_ERROR"
tg_pg_node_set "$standby" synchronous_standby_names "''" || tg_die "$TG_PG_ERROR"
detected=0
for i in $(seq 1 "$ASYNC_TRIES"); do
    cycle "async-$i" async 1
    if [ "$MISSING" -gt 0 ]; then
        detected=$MISSING
        tg_req GET "/v1/receipts/$LOST_ID" "${TG_AUTH_A[@]}"
        tg_log "async-$i: a lost, acknowledged receipt: GET /v1/receipts/$LOST_ID -> $TG_STATUS"
        key=$(awk -F'\t' -v id="$LOST_ID" '$1 == id { print $2; exit }' "$TG_TMP/async-$i/acks")
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$key\"")"
        tg_log "async-$i: its key $key again -> $TG_STATUS, Idempotent-Replayed '$(tg_header Idempotent-Replayed)' (decided afresh: the key was lost with it)"
        break
    fi
done
tg_check "async: the check detects lost acknowledged receipts ($detected missing, try $i of $ASYNC_TRIES)" \
    test "$detected" -gt 0
"$TG_BIN" ledger verify --database-url "${TG_PG_NODE_URL[$primary]}" >"$TG_TMP/verify-async.out" 2>&1
rc=$?
tg_log "after the asynchronous failovers: ledger verify --database-url exit $rc: $(tail -n 3 "$TG_TMP/verify-async.out" | tr '\n' ' ')"

tg_stop a
tg_stop b
tg_check "stop the PostgreSQL nodes" tg_pg_nodes_stop
tg_done
