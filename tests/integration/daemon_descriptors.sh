#!/usr/bin/env bash
# daemon_descriptors.sh — connections are capped below the open-files limit, so that idle
# clients can never take the descriptors the daemon needs for itself. Under
# `prlimit --nofile=N:N` with a small N: the default --max-connections is lowered (logged),
# more idle connections than fit are held open on both listeners, and decisions, ledger
# segment rotations, receipt reads and /decide still work. An explicit --max-connections
# that cannot fit is refused at start (exit 2, the numbers in the message); a soft limit
# below the hard one is raised.
source "$(dirname "$0")/lib/daemon.sh"

command -v prlimit >/dev/null || tg_die "prlimit (util-linux) is needed"
N=96
tg_keygen

# ---- an explicit --max-connections that cannot fit: refused, exit 2, numbers named -------
tg_std_args refuse
for how in flag env check; do
    args=("${TG_STD_ARGS[@]}" --port 0)
    envs=(TRIGGUARD_API_KEYS="$TG_API_KEYS")
    case $how in
    flag) args+=(--max-connections 1000) ;;
    env) envs+=(TRIGGUARD_MAX_CONNECTIONS=1000) ;;
    check) args+=(--max-connections 1000 --check-config) ;;
    esac
    timeout 30 prlimit --nofile=$N:$N env "${envs[@]}" "$TG_BIN" serve "${args[@]}" \
        >"$TG_TMP/refuse-$how.out" 2>&1
    rc=$?
    tg_eq "$rc" 2 "--max-connections 1000 ($how) under a limit of $N: exit status"
    tg_check "--max-connections 1000 ($how): the message names the limit and what fits" \
        grep -qE "max-connections 1000 does not fit the open-files limit $N \(hard $N\): 1 x 1000 connections \+ [0-9]+ kept for the daemon = [0-9]+; at most [0-9]+ fit" \
        "$TG_TMP/refuse-$how.out"
done
sed 's/^/    /' "$TG_TMP/refuse-flag.out"
tg_check "a refused start created no ledger" test ! -e "$TG_TMP/ledger-refuse"
# One that fits is taken as given.
timeout 30 prlimit --nofile=$N:$N env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve \
    "${TG_STD_ARGS[@]}" --max-connections 10 --check-config >"$TG_TMP/fits.out" 2>&1
tg_eq "$?" 0 "--max-connections 10 under a limit of $N: --check-config passes"
tg_check "--max-connections 10 is kept as given" grep -q "1 listener of 10 connections" "$TG_TMP/fits.out"

# ---- the default lowered; idle connections beyond it; the daemon still works ------------
DPORT=$(tg_free_port)
tg_std_args capped
TG_WRAPPER=(prlimit --nofile=$N:$N)
# A tiny segment, so that the decisions below rotate the ledger several times; a long
# connection timeout, so that the idle connections stay for the whole test.
tg_start capped -- "${TG_STD_ARGS[@]}" --segment-bytes 65536 --connection-timeout 120 \
    --decide-port "$DPORT"
TG_WRAPPER=()
LOG=$(tg_logfile capped)
PID=$(tg_pid capped)
tg_check "the lowered default is logged" grep -q '"event":"max_connections_lowered"' "$LOG"
FIT=$(sed -n 's/.*"event":"descriptors".*2 listeners of \([0-9]*\) connections.*/\1/p' "$LOG")
tg_log "fit per listener under --nofile=$N: ${FIT:-?} connections"
tg_check "a connection limit was derived ($FIT)" test -n "$FIT"
tg_check "$N descriptors leave room for at least 8 connections per listener" test "${FIT:-0}" -ge 8
tg_check "two listeners of $FIT connections and the reserve fit in $N" test $((2 * ${FIT:-999})) -lt $N
tg_eq "$(awk '/^Max open files/ {print $4 ":" $5}' "/proc/$PID/limits")" "$N:$N" "the daemon's limit"

python3 - "${TG_PORTS[capped]}" "$DPORT" "${FIT:-$N}" "$PID" "$N" "$TG_TMP/ledger-capped" \
    >"$TG_TMP/capped.out" 2>&1 <<'PY'
import http.client, json, os, socket, sys, time

port, dport, fit, pid, limit, ledger = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                        int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
A = {"Authorization": "Bearer tok-acme", "Content-Type": "application/json"}

def fds():
    return len(os.listdir("/proc/%d/fd" % pid))

# One keep-alive connection per listener first: they hold a slot each for the whole test.
main = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
main.request("GET", "/healthz")
assert main.getresponse().read() == b'{"status":"ok"}'
dec = http.client.HTTPConnection("127.0.0.1", dport, timeout=30)
DECIDE = json.dumps({"surface": "example", "action": "noop", "actor": "someone"})
dec.request("POST", "/decide", headers=A, body=DECIDE)
r = dec.getresponse()
assert r.status == 200 and json.loads(r.read())["decision"] == "PERMIT"

# Then more idle connections than fit, on both: the kernel completes every handshake, the
# daemon accepts only up to its limit and leaves the rest in the listen backlog.
idle = []
for p in (port, dport):
    for _ in range(fit + 20):
        idle.append(socket.create_connection(("127.0.0.1", p), timeout=10))
time.sleep(1.0)  # let the accept threads take what they may
held = fds()
print("idle connections opened: %d; the daemon has %d descriptors open (limit %d)"
      % (len(idle), held, limit))
assert held < limit, "the daemon has %d descriptors open, at its limit %d" % (held, limit)

# Decisions on the kept connection, enough to rotate the 64 KiB segment several times.
ids = []
for i in range(150):
    body = {"surface": "example", "action": "noop", "actor": "fd-%d" % i,
            "idempotency_key": "fd-key-%d" % i}
    main.request("POST", "/v1/evaluate", body=json.dumps(body), headers=A)
    r = main.getresponse()
    b = r.read()
    assert r.status == 200, "decision %d: %d %r" % (i, r.status, b[:300])
    j = json.loads(b)
    assert j["decision"] == "PERMIT", j
    ids.append(j["execution_id"])
    most = max(held, fds())
    held = most
segs = sorted(f for f in os.listdir(ledger) if f.endswith(".tgl"))
print("150 decisions: all PERMIT; %d ledger segments; at most %d descriptors seen" % (len(segs), held))
assert len(segs) >= 3, segs
assert held < limit, held
# A replay and a receipt read each open a segment of their own (the first, rotated away).
main.request("POST", "/v1/evaluate", headers=A,
             body=json.dumps({"surface": "example", "action": "noop", "actor": "fd-0",
                              "idempotency_key": "fd-key-0"}))
r = main.getresponse()
b = r.read()
assert r.status == 200 and r.getheader("Idempotent-Replayed") == "true", (r.status, b[:200])
main.request("GET", "/v1/receipts/" + ids[0], headers={"Authorization": "Bearer tok-acme"})
r = main.getresponse()
b = r.read()
assert r.status == 200 and json.loads(b)["executionId"] == ids[0], (r.status, b[:200])
# The /decide-only listener, with its own full set of idle connections.
dec.request("POST", "/decide", headers=A, body=DECIDE)
r = dec.getresponse()
b = r.read()
assert r.status == 200 and json.loads(b)["decision"] == "PERMIT", (r.status, b[:200])
main.request("GET", "/readyz")
r = main.getresponse()
b = r.read()
assert r.status == 200, (r.status, b)
main.request("GET", "/metrics")
m = main.getresponse().read().decode()
assert "trigguard_ledger_failures_total 0" in m and "trigguard_ledger_healthy 1" in m
print("replay, receipt read, /decide, /readyz: ok; ledger healthy, no failures")
for s in idle:
    s.close()
PY
rc=$?
sed 's/^/    /' "$TG_TMP/capped.out"
tg_eq "$rc" 0 "idle connections beyond the cap on both listeners: decisions, rotations, reads work"
tg_check "no descriptor ran out (EMFILE) in the daemon's log" \
    bash -c "! grep -qE 'Too many open files|ledger_unhealthy|accept_failed' '$LOG'"
tg_stop capped
tg_check "the ledger verifies" "$TG_BIN" ledger verify "$TG_TMP/ledger-capped"

# ---- a soft limit below the hard one is raised as far as the connections need ----------
HARD=$(ulimit -Hn)
if [ "$HARD" == unlimited ] || [ "$HARD" -gt 1000 ]; then
    [ "$HARD" == unlimited ] && HARD=1048576
    tg_std_args raised
    TG_WRAPPER=(prlimit --nofile=$N:"$HARD")
    tg_start raised -- "${TG_STD_ARGS[@]}" --max-connections 500
    TG_WRAPPER=()
    SOFT=$(awk '/^Max open files/ {print $4}' "/proc/$(tg_pid raised)/limits")
    tg_log "soft limit $N (hard $HARD) raised to $SOFT for 500 connections"
    tg_check "the soft limit was raised above 500 for 500 connections ($SOFT)" test "$SOFT" -gt 500
    tg_check "... as far as they need, not to the hard limit $HARD ($SOFT)" test "$SOFT" -lt 1000
    tg_check "--max-connections 500 kept" grep -q "1 listener of 500 connections" \
        "$(tg_logfile raised)"
    tg_stop raised
else
    tg_log "skipped the soft-limit raise: the hard limit here is $HARD"
fi
tg_done
