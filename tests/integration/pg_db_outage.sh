#!/usr/bin/env bash
# pg_db_outage.sh — two instances under load while their PostgreSQL goes away and comes back
# (SPEC §13, fail closed): stopped (pg_ctl stop -m immediate, as a crash), frozen (SIGSTOP
# to every server process, a hung machine), and only the daemons' sessions hung (SIGSTOP to
# their server processes, the server still accepting), each for longer than the bounds.
# Meanwhile /v1/evaluate and /execute answer 503 store_unavailable within the bound, never a
# decision without its record; /readyz is 503; /decide still decides. Once the database is back the
# instances serve again by themselves within a bounded time; every answer acknowledged
# before, between and after is in the database and replays byte for byte; every key that got
# a 503 executes once when retried.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

# The bounds: a claim or lookup round trip (--db-timeout) and a commit
# (--ledger-stall-timeout) 1 s each; an answer comes within both plus slack.
DB_TIMEOUT=1000 STALL=1000
BOUND_MS=$((DB_TIMEOUT + STALL + 1500))
RECOVER_S=15

pg_migrate
tg_keygen "$TG_TMP/key.pem"
# Four event threads for the two load workers and the checks' one request per instance: a
# request waiting for the database holds its thread (up to --db-timeout), and the bound
# here is the daemon's, not a queue for a free thread.
for name in a b; do
    pg_serve "$name" --db-timeout "$DB_TIMEOUT" --ledger-stall-timeout "$STALL" --claim-timeout 1000 \
        --threads 4
done
A=${TG_PORTS[a]} B=${TG_PORTS[b]}
now() { date +%s.%N; }
event() { printf '%s %s\n' "$1" "$(now)" >>"$TG_TMP/events"; }

# down_checks LABEL: what each instance answers while its database is away.
down_checks() {
    local name t0 t1 ms
    for name in a b; do
        tg_use "$name"
        tg_check "$1: /readyz on $name turns 503 within the bound" \
            tg_wait_status /readyz 503 $((BOUND_MS / 100 + 10)) 0.1
        t0=$(date +%s%N)
        tg_req POST /decide "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
        t1=$(date +%s%N)
        ms=$(((t1 - t0) / 1000000))
        tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "$1: /decide on $name still decides"
        tg_check "$1: /decide on $name answered within $BOUND_MS ms (took $ms)" test "$ms" -le "$BOUND_MS"
        t0=$(date +%s%N)
        tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$1-$name\"")"
        t1=$(date +%s%N)
        ms=$(((t1 - t0) / 1000000))
        tg_expect_error 503 store_unavailable "$1: /v1/evaluate on $name"
        tg_check "$1: /v1/evaluate on $name answered within $BOUND_MS ms (took $ms)" test "$ms" -le "$BOUND_MS"
        tg_post /execute "$(tg_req_json permit ",\"nonce\":\"$1-$name\"")"
        tg_expect_error 503 store_unavailable "$1: /execute on $name"
    done
}

# wait_recovered LABEL: until a PERMIT is 200 on both instances (at most RECOVER_S seconds
# after the database is back); then /readyz 200.
wait_recovered() {
    local name deadline=$((SECONDS + RECOVER_S)) t0
    t0=$(now)
    for name in a b; do
        tg_use "$name"
        while :; do
            tg_post /v1/evaluate "$(tg_req_json permit)"
            [ "$TG_STATUS" = 200 ] && break
            [ "$SECONDS" -lt "$deadline" ] || break
            sleep 0.2
        done
        tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "$1: $name serves again within $RECOVER_S s"
        tg_check "$1: /readyz on $name is 200 again" tg_wait_status /readyz 200 30 0.1
    done
    event "$1-recovered"
    tg_log "$1: both serve again $(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(now)") s after the database came back"
}

python3 "$TG_PYLIB/pgload.py" load "$A,$B" tok-acme L "$TG_TMP/load.jsonl" "$TG_TMP/stop" 4 20 &
LOAD_PID=$!
sleep 2

# ---- the database stops (as if it crashed), then starts again ------------------------------
event halt
tg_check "stop PostgreSQL (immediate)" tg_pg_halt immediate
event halted
down_checks halted
sleep 2
event resume
tg_check "start PostgreSQL again" tg_pg_resume
event resumed
wait_recovered restart
sleep 3

# ---- the database hangs (every server process stopped), then goes on -----------------------
event freeze
tg_check "freeze PostgreSQL (SIGSTOP)" tg_pg_signal STOP
event frozen
down_checks frozen
sleep 2
event thaw
tg_check "thaw PostgreSQL (SIGCONT)" tg_pg_signal CONT
event thawed
wait_recovered thaw
sleep 3

# ---- only the daemons' sessions hang (their server processes stopped), the server itself
# still accepts connections: the hung ones are given up, new ones may work --------------
event hang
HUNG=$(sql "$TG_PG_URL" "select string_agg(pid::text, ' ') from pg_stat_activity where application_name = 'trigguard'")
tg_log "stopping the server processes of the daemons' sessions: $HUNG"
# shellcheck disable=SC2086 # one word per pid
tg_check "stop every server process of a daemon's session (SIGSTOP)" kill -STOP $HUNG
event hung
sleep 4
event unhang
# shellcheck disable=SC2086 # one word per pid
tg_check "let them go on (SIGCONT)" kill -CONT $HUNG
wait_recovered unhang
sleep 3

touch "$TG_TMP/stop"
wait "$LOAD_PID"
tg_eq "$?" 0 "the load generator ran to the end"

# ---- what the load saw ---------------------------------------------------------------------
tg_check "the load: 200 or 503 store_unavailable within the bound, no 200 while the database was away, all 200 once it was back" \
    python3 - "$TG_TMP/load.jsonl" "$TG_TMP/events" "$BOUND_MS" "$TG_TMP/acked" <<'PY'
import sys, pgload
log = pgload.read_log(sys.argv[1])
ev = {}
for line in open(sys.argv[2]):
    k, t = line.split()
    ev[k] = float(t)
bound = int(sys.argv[3]) / 1000.0
bad = [r for r in log if not (r["status"] == 200 or (r["status"] == 503 and r["error"] == "store_unavailable"))]
assert not bad, "%d answers neither 200 nor 503 store_unavailable, first %r" % (len(bad), bad[:3])
slow = [r for r in log if r["t1"] - r["t0"] > bound]
assert not slow, "%d answers took longer than %.1f s, the slowest %.2f s: %r" % (
    len(slow), bound, max(r["t1"] - r["t0"] for r in slow), slow[:2])
for start, end, what in (("halted", "resume", "stopped"), ("frozen", "thaw", "frozen")):
    inside = [r for r in log if ev[start] + 0.05 <= r["t0"] and r["t1"] <= ev[end]]
    ok = [r for r in inside if r["status"] == 200]
    assert not ok, "%d PERMITs while the database was %s: %r" % (len(ok), what, ok[:2])
    assert len(inside) >= 4, "only %d answers while the database was %s" % (len(inside), what)
    print("while %s: %d answers, all 503, the slowest in %.2f s" % (
        what, len(inside), max(r["t1"] - r["t0"] for r in inside)))
# (while only the sessions hang, a new connection may work: 200 or 503, within the bound)
hung = [r for r in log if ev["hung"] <= r["t0"] and r["t1"] <= ev["unhang"]]
print("while the sessions hung: %d answers, %d of them 503" % (len(hung), sum(1 for r in hung if r["status"] == 503)))
for rec, until in (("restart-recovered", "freeze"), ("thaw-recovered", "hang"), ("unhang-recovered", None)):
    after = [r for r in log if r["t0"] >= ev[rec] + 1.5 and (until is None or r["t1"] <= ev[until])]
    failed = [r for r in after if r["status"] != 200]
    assert after and not failed, "%s: %d of %d answers from 1.5 s after it on were not 200: %r" % (
        rec, len(failed), len(after), failed[:2])
acked = [r for r in log if r["status"] == 200]
n503 = sum(1 for r in log if r["status"] == 503)
print("load: %d answers, %d acknowledged, %d store_unavailable" % (len(log), len(acked), n503))
open(sys.argv[4], "w").write("".join(r["exec"] + "\n" for r in acked))
PY
acked_in_db=$("$TG_PG_PSQL" "$TG_PG_URL" -X -q -At -v ON_ERROR_STOP=1 -c 'create temp table acked (id text)' \
    -c "\\copy acked from '$TG_TMP/acked'" \
    -c "select count(*) from tg_receipts r join acked a on a.id = r.execution_id where r.tenant = 'acme'" 2>&1)
tg_eq "$acked_in_db" "$(wc -l <"$TG_TMP/acked")" "every acknowledged receipt is in tg_receipts"
tg_check "every acknowledged answer: its receipt from the other instance, its key replayed byte for byte" \
    python3 - "$A" "$B" "$TG_TMP/load.jsonl" <<'PY'
import json, sys, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
acked = [r for r in pgload.read_log(sys.argv[3]) if r["status"] == 200]
other = lambda r: b if r["port"] == a else a
res = pgload.fire([(other(r), "GET", "/v1/receipts/" + r["exec"], None, "tok-acme") for r in acked], 8)
for r, (st, h, body) in zip(acked, res):
    assert st == 200 and json.loads(body) == json.loads(r["body"])["receipt"], (r["key"], st, body[:200])
res = pgload.fire([(other(r), "POST", "/v1/evaluate", pgload.permit(idempotency_key=r["key"]), "tok-acme")
                   for r in acked], 8)
for r, (st, h, body) in zip(acked, res):
    assert st == 200 and h.get("idempotent-replayed") == "true" and body.decode() == r["body"], \
        (r["key"], st, h.get("idempotent-replayed"), body[:200])
PY
# (with the keys down_checks sent: a claim taken while the database was frozen may have been
# written when it went on, and stays in flight until a retry takes it over)
tg_check "every key that got a 503 executes once when retried" python3 - "$A" "$B" "$TG_TMP/load.jsonl" <<'PY'
import sys, time, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
todo = sorted({r["key"] for r in pgload.read_log(sys.argv[3]) if r["status"] != 200} |
              {"%s-%s" % (p, n) for p in ("halted", "frozen") for n in "ab"})
n = len(todo)
deadline = time.time() + 15
while todo and time.time() < deadline:
    res = pgload.fire([((a, b)[i % 2], "POST", "/v1/evaluate", pgload.permit(idempotency_key=k), "tok-acme")
                       for i, k in enumerate(todo)], 8)
    left = []
    for k, (st, h, body) in zip(todo, res):
        if st == 409 and pgload.error_code(body) == "idempotency_conflict":
            left.append(k)  # a claim of the outage, its lease not over yet
        elif st == 503 and pgload.error_code(body) == "store_unavailable":
            # fenced: a claim statement of the outage, held up in the frozen server, ran
            # after this retry had taken the key over; nothing executed (fail closed), and
            # the answer says to retry with the same key, which the next round does
            left.append(k)
        else:
            assert st == 200, (k, st, body[:200])
    todo = left
    if todo:
        time.sleep(0.3)
assert not todo, "%d of %d keys still 409/503 after 15 s: %r" % (len(todo), n, todo[:5])
print("%d keys retried" % n)
PY
# The nonces of the /execute requests down_checks sent got 503: never consumed by a record,
# so once their claims' leases are over (--claim-timeout 1000) they are free again.
tg_check "a nonce whose request got 503 is free again once its lease is over" \
    python3 - "$A" "$B" <<'PY'
import sys, pgload
ports = {"a": int(sys.argv[1]), "b": int(sys.argv[2])}
for phase in ("halted", "frozen"):
    for name, other in (("a", "b"), ("b", "a")):
        nonce = "%s-%s" % (phase, name)  # sent to instance name: now to the other one
        st, h, body = pgload.one(ports[other], "POST", "/execute", pgload.permit(nonce=nonce), "tok-acme")
        assert st == 200, (nonce, st, body[:200])
PY
pg_no_double_execution "after the outages"
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_idem_claims where state <> 'done'")" 0 "no claim is left in flight"

tg_fetch_keys "$TG_TMP/keys.json"
run verify ledger verify --database-url "$TG_PG_URL" --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "ledger verify --database-url after the outages ($(head -c 300 "$TG_TMP/verify.out" "$TG_TMP/verify.err"))"

tg_stop a
tg_stop b
tg_check "stop PostgreSQL" tg_pg_stop
tg_done
