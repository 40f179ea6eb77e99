#!/usr/bin/env bash
# pg_instance_kill.sh — kill -9 of one of two instances sharing one PostgreSQL, under load
# (SPEC §13): every receipt acknowledged with a 2xx is readable from the survivor and replays
# there byte for byte; a key whose request was in flight on the dead instance (claimed, not
# committed) is 409 on the survivor until its claim's lease ends (--claim-timeout 2000), then
# executes there once; every key the load sent executes exactly once. Before that, a stalled
# owner: an instance stopped (SIGSTOP) between a claim and its commit, whose key the other
# takes over after the lease, has its commit fenced out when it goes on (503, one record).
#
# To have a request in flight at a known point, the instance's next commits are held: an
# open transaction inserts a row into its own hash chain a few places ahead
# (tg_records_chain UNIQUE (instance_id, chain_seq)), so its commit of that place waits for
# this transaction while the other instance commits as usual. A request sent then is
# claimed and waits, queued behind that commit, and the instance is stopped or killed.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

pg_migrate
tg_keygen "$TG_TMP/key.pem"
pg_serve a --claim-timeout 2000
pg_serve b --claim-timeout 2000
pg_lb a b
A=${TG_PORTS[a]} B=${TG_PORTS[b]}

# a's chain: the instance_id of a record a wrote
tg_use a
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"probe-a"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "a PERMIT from a"
CHAIN_A=$(sql "$TG_PG_URL" "select r.instance_id from tg_idem_claims c join tg_records r on r.seq = c.record_seq where c.tenant = 'acme' and c.idem_key = 'probe-a'")
[ -n "$CHAIN_A" ] || tg_die "no record for probe-a in tg_records"
tg_log "a writes chain '$CHAIN_A'"

# ---- holding a's commits ----------------------------------------------------------------

# hold_chain OFFSET: an open transaction (psql reading a fifo, application_name tg-blocker)
# inserts a row at OFFSET places past a's last committed record; a's commit of that place
# waits for it. A commit in progress may already hold the place (the insert then fails, or
# waits for it and fails): then again, at the new end.
hold_chain() {
    local try st
    rm -f "$TG_TMP/blocker.in"
    mkfifo "$TG_TMP/blocker.in"
    "$TG_PG_PSQL" "$TG_PG_URL&application_name=tg-blocker" -X -q -At <"$TG_TMP/blocker.in" \
        >>"$TG_TMP/blocker.out" 2>&1 &
    BLOCKER_PID=$!
    exec 7>"$TG_TMP/blocker.in"
    for try in 1 2 3 4 5; do
        echo "begin; insert into tg_records (instance_id, chain_seq, tenant, type, meta, payload, prev_hash, record_hash) select '$CHAIN_A', coalesce(max(chain_seq), 0) + $1, 'acme', 1, '\\x', '\\x', decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex') from tg_records where instance_id = '$CHAIN_A';" >&7
        for _ in $(seq 1 50); do
            st=$(sql "$TG_PG_URL" "select state from pg_stat_activity where application_name = 'tg-blocker'")
            case $st in "idle in transaction" | "idle in transaction (aborted)") break ;; esac
            sleep 0.1
        done
        [ "$st" != "idle in transaction" ] || return 0
        tg_log "holding a place in a's chain failed (try $try: '$st'); again"
        echo "rollback;" >&7
    done
    tg_die "could not hold a place in a's chain"
}

# release_chain: ends the transaction (rollback: the row was never there) and its psql.
release_chain() {
    echo "rollback;" >&7
    exec 7>&-
    wait "$BLOCKER_PID"
}

# wait_held LABEL: until a server session waits for the held place (10 s at most).
BLOCKED_Q="select count(*) from pg_stat_activity w, pg_stat_activity b where b.application_name = 'tg-blocker' and b.pid = any(pg_blocking_pids(w.pid))"
wait_held() {
    for _ in $(seq 1 100); do
        [ "$(sql "$TG_PG_URL" "$BLOCKED_Q")" -ge 1 ] && break
        sleep 0.1
    done
    tg_check "$1: a's commit waits for the held place" test "$(sql "$TG_PG_URL" "$BLOCKED_Q")" -ge 1
}

# wait_claim KEY LABEL: until KEY is claimed in tg_idem_claims (5 s at most); its state,
# owner and lease end (epoch seconds) in CLAIM_STATE, CLAIM_OWNER, LEASE_UNTIL.
wait_claim() {
    local claim=""
    for _ in $(seq 1 50); do
        claim=$(sql "$TG_PG_URL" "select state || ' ' || owner || ' ' || extract(epoch from lease_until) from tg_idem_claims where tenant = 'acme' and idem_key = '$1'")
        [ -n "$claim" ] && break
        sleep 0.1
    done
    read -r CLAIM_STATE CLAIM_OWNER LEASE_UNTIL <<<"$claim"
    tg_eq "$CLAIM_STATE" in_flight "$2: $1 is claimed and in flight ($claim)"
}

# post_bg NAME PORT JSON: POST /v1/evaluate in the background; status in $TG_TMP/NAME.status,
# body in $TG_TMP/NAME.body once it ends ($BG_PID). Without the blocker's fifo (fd 7): psql
# must see its end when release_chain closes it, not when this request ends.
post_bg() {
    curl -s -o "$TG_TMP/$1.body" -w '%{http_code}' --max-time 60 -X POST \
        -H "Authorization: Bearer tok-acme" -H "Content-Type: application/json" \
        --data-binary "$3" "http://127.0.0.1:$2/v1/evaluate" >"$TG_TMP/$1.status" 7>&- &
    BG_PID=$!
}

# takeover_on_b KEY_JSON LEASE OUT LABEL: b answers the key 409 until LEASE, then executes
# it (a fresh 200, whose execution id goes to OUT); a retry replays that.
takeover_on_b() {
    tg_check "$4: b answers 409 until the claim's lease ends, then executes the key" \
        python3 - "$B" "$1" "$2" "$3" <<'PY'
import json, sys, time, pgload
b, req, lease, out = int(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
seen = []
deadline = time.time() + 15
while time.time() < deadline:
    t0 = time.time()
    st, h, body = pgload.one(b, "POST", "/v1/evaluate", req, "tok-acme")
    seen.append((t0, time.time(), st))
    if st == 200:
        break
    assert st == 409 and pgload.error_code(body) == "idempotency_conflict", (st, body[:200])
    time.sleep(0.1)
assert st == 200, "no 200 within 15 s: %r" % seen[-3:]
early = [x for x in seen if x[2] == 409]
assert early, "no 409 before the takeover (lease until %.3f, first answer at %.3f)" % (lease, seen[0][0])
first200 = seen[-1]
assert first200[1] >= lease - 0.1, "executed at %.3f, before the lease ended at %.3f" % (first200[1], lease)
assert first200[0] <= lease + 3, "taken over %.2f s after the lease ended" % (first200[0] - lease)
assert "idempotent-replayed" not in h, "a replay: the first owner's commit went through?"
j = json.loads(body)
assert j["decision"] == "PERMIT", j
st2, h2, body2 = pgload.one(b, "POST", "/v1/evaluate", req, "tok-acme")
assert st2 == 200 and h2.get("idempotent-replayed") == "true" and body2 == body, "the retry is not a replay"
open(out, "w").write(j["execution_id"])
print("409 %d times, then executed %.2f s after the lease ended" % (len(early), first200[1] - lease))
PY
}

# records_of EXEC: how many receipt records name the execution id EXEC.
records_of() {
    sql "$TG_PG_URL" "select count(*) from tg_records where type = 1 and convert_from(payload, 'UTF8')::json->>'executionId' = '$1'"
}

# ---- a stalled owner: a claims a key, stops (SIGSTOP) before its commit, b takes the key
# over after the lease; when a goes on, its commit of the key is fenced out ----------------
R1REQ=$(tg_req_json permit ',"idempotency_key":"k-stall-1"')
K1REQ=$(tg_req_json permit ',"idempotency_key":"k-stall-2"')
hold_chain 1
post_bg stall1 "$A" "$R1REQ"
R1_PID=$BG_PID
wait_held "stall"
post_bg stall2 "$A" "$K1REQ"
K1_PID=$BG_PID
wait_claim k-stall-2 "stall"
kill -STOP "$(tg_pid a)"
release_chain
takeover_on_b "$K1REQ" "$LEASE_UNTIL" "$TG_TMP/k-stall-2.exec" "stalled a"
kill -CONT "$(tg_pid a)"
wait "$R1_PID" "$K1_PID"
K1_STATUS=$(cat "$TG_TMP/stall2.status")
tg_log "after SIGCONT a answered k-stall-1 $(cat "$TG_TMP/stall1.status"), k-stall-2 $K1_STATUS: $(head -c 200 "$TG_TMP/stall2.body")"
tg_ne "$K1_STATUS" 200 "a, going on after b took k-stall-2 over, does not answer it 200"
tg_eq "$(records_of "$(cat "$TG_TMP/k-stall-2.exec" 2>/dev/null)")" 1 \
    "k-stall-2 has one record: b's (a's late commit was fenced out)"
tg_use a
tg_post /v1/evaluate "$K1REQ"
tg_expect_py "s == 200 and h.get('idempotent-replayed') == 'true' and j['execution_id'] == '$(cat "$TG_TMP/k-stall-2.exec" 2>/dev/null)'" \
    "a now replays b's execution of k-stall-2"
tg_post /v1/evaluate "$R1REQ"
tg_expect_py "s == 200" "k-stall-1 answers 200 on a (a replay, or its one execution)"
pg_no_double_execution "after the stall"

# ---- load on both, then hold a's commits ---------------------------------------------------
python3 "$TG_PYLIB/pgload.py" load "$A,$B,$LB_PORT" tok-acme L "$TG_TMP/load.jsonl" "$TG_TMP/stop" 6 20 &
LOAD_PID=$!
sleep 1.5
# a's commits run into it within the next 20 records (the load keeps a busy)
hold_chain 20
wait_held "kill"

# ---- a request claimed on a, its commit held; then kill -9 a ------------------------------
KREQ=$(tg_req_json permit ',"idempotency_key":"k-inflight"')
post_bg inflight "$A" "$KREQ"
CURL_PID=$BG_PID
wait_claim k-inflight "kill"
tg_log "k-inflight claimed by '$CLAIM_OWNER', lease until $LEASE_UNTIL"
kill -KILL "$(tg_pid a)"
wait "$(tg_pid a)" 2>/dev/null
unset 'TG_PIDS[a]'
KILLED_AT=$(date +%s.%N)
tg_use b
tg_log "killed a at $KILLED_AT"

# ---- the survivor: 409 until the lease ends, then one execution ----------------------------
takeover_on_b "$KREQ" "$LEASE_UNTIL" "$TG_TMP/k-inflight.exec" "a killed"

# ---- stop the load, let a's held commit through: it must be fenced out --------------------
sleep 1
touch "$TG_TMP/stop"
wait "$LOAD_PID"
tg_eq "$?" 0 "the load generator ran to the end"
release_chain
wait "$CURL_PID" 2>/dev/null
# a's orphaned server sessions now run what a sent before it died; wait until they are done
for _ in $(seq 1 50); do
    [ "$(sql "$TG_PG_URL" "select count(*) from pg_stat_activity where backend_type = 'client backend' and state <> 'idle' and pid <> pg_backend_pid()")" = 0 ] && break
    sleep 0.1
done
K_EXEC=$(cat "$TG_TMP/k-inflight.exec" 2>/dev/null)
tg_eq "$(records_of "$K_EXEC")" 1 "k-inflight has one record (b's)"
tg_eq "$(sql "$TG_PG_URL" "select state from tg_idem_claims where tenant = 'acme' and idem_key = 'k-inflight'")" \
    "done" "k-inflight's claim is done"

# ---- everything the load had acknowledged is on the survivor; the rest executes once ------
tg_check "every 2xx of the load: its receipt from b, its key replayed byte for byte on b" \
    python3 - "$B" "$TG_TMP/load.jsonl" "$KILLED_AT" <<'PY'
import json, sys, pgload
b, log, killed = int(sys.argv[1]), pgload.read_log(sys.argv[2]), float(sys.argv[3])
acked = [r for r in log if 200 <= r["status"] < 300]
other = {}
for r in log:
    if not 200 <= r["status"] < 300:
        k = "%s %s" % (r["status"], r.get("error") or "")
        other[k] = other.get(k, 0) + 1
before = sum(1 for r in acked if r["t1"] < killed)
print("load: %d answers, %d acknowledged (%d before the kill); others: %r" % (len(log), len(acked), before, other))
assert before > 20 and len(acked) - before > 20, "too little load around the kill"
bad = [r for r in log if r["status"] not in (0, 502, 503, 504) and not 200 <= r["status"] < 300
       and not (r["status"] == 409 and r.get("error") == "idempotency_conflict")]
assert not bad, "unexpected answers: %r" % bad[:3]
jobs = [(b, "GET", "/v1/receipts/" + r["exec"], None, "tok-acme") for r in acked]
res = pgload.fire(jobs, 8)
for r, (st, h, body) in zip(acked, res):
    assert st == 200, "%s (%s on %d): receipt %d %r" % (r["exec"], r["key"], r["port"], st, body[:200])
    assert json.loads(body) == json.loads(r["body"])["receipt"], "%s: another receipt" % r["key"]
res = pgload.fire([(b, "POST", "/v1/evaluate", pgload.permit(idempotency_key=r["key"]), "tok-acme")
                   for r in acked], 8)
for r, (st, h, body) in zip(acked, res):
    assert st == 200 and h.get("idempotent-replayed") == "true", (r["key"], st, body[:200])
    assert body.decode() == r["body"], "%s: the replay on b differs from the acknowledged answer" % r["key"]
PY
tg_check "every key the load sent without an answer executes on b, once (claims left by a taken over)" \
    python3 - "$B" "$TG_TMP/load.jsonl" <<'PY'
import json, sys, time, pgload
b, log = int(sys.argv[1]), pgload.read_log(sys.argv[2])
acked = {r["key"] for r in log if 200 <= r["status"] < 300}
todo = sorted({r["key"] for r in log} - acked)
deadline = time.time() + 20
while todo and time.time() < deadline:
    res = pgload.fire([(b, "POST", "/v1/evaluate", pgload.permit(idempotency_key=k), "tok-acme") for k in todo], 8)
    left = []
    for k, (st, h, body) in zip(todo, res):
        if st == 409 and pgload.error_code(body) == "idempotency_conflict":
            left.append(k)  # a's claim, its lease not over yet
        else:
            assert st == 200, (k, st, body[:200])
    todo = left
    if todo:
        time.sleep(0.5)
assert not todo, "%d keys still 409 after 20 s: %r" % (len(todo), todo[:5])
PY
pg_no_double_execution "after the kill"
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_idem_claims where state <> 'done'")" 0 "no claim is left in flight"

tg_fetch_keys "$TG_TMP/keys.json"
run verify ledger verify --database-url "$TG_PG_URL" --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "ledger verify --database-url after the kill ($(head -c 300 "$TG_TMP/verify.out" "$TG_TMP/verify.err"))"

tg_check "stop nginx" tg_lb_stop
tg_stop b
tg_check "stop PostgreSQL" tg_pg_stop
tg_done
