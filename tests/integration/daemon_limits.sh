#!/usr/bin/env bash
# daemon_limits.sh — the protective limits: --max-body (413 at max+1, by Content-Length and
# chunked), rate limits (429 + Retry-After; RATE_LIMIT_VERIFY too), bulkheads and a full idempotency table (503
# overloaded), --max-connections (the next connection waits for a free slot), and a daemon
# without a signing key (503 keys_unavailable, /readyz 503).
source "$(dirname "$0")/lib/daemon.sh"

expect_metrics() { # expect_metrics LABEL PYTHON_EXPR: m(name, **labels) reads a GET /metrics sample
    tg_req GET /metrics
    tg_check "$1" python3 -c '
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
m = lambda name, **labels: tgclient.metric(s, name, **labels)
assert eval(sys.argv[2]), sys.argv[2]' "$TG_BODY_FILE" "$2"
}

tg_keygen
API_KEYS3="acme:tok-acme,beta:tok-beta,gamma:tok-gamma"

# ---- --max-body: exactly at the limit is read, one byte more is 413 --------------------

tg_std_args body
tg_start body -- "${TG_STD_ARGS[@]}" --max-body 1024
padded() { # a valid request of exactly $1 bytes
    python3 -c '
import sys
n = int(sys.argv[1]); head = "{\"surface\":\"example\",\"action\":\""; tail = "\"}"
sys.stdout.write(head + "a" * (n - len(head) - len(tail)) + tail)' "$1"
}
padded 1024 >"$TG_TMP/b1024.json"
padded 1025 >"$TG_TMP/b1025.json"
tg_check "test bodies have the intended sizes" test "$(wc -c <"$TG_TMP/b1024.json")" -eq 1024 -a "$(wc -c <"$TG_TMP/b1025.json")" -eq 1025
CT=(-H "Content-Type: application/json")
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" "${CT[@]}" --data-binary "@$TG_TMP/b1024.json"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "body of exactly --max-body bytes"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" "${CT[@]}" --data-binary "@$TG_TMP/b1025.json"
tg_expect_error 413 body_too_large "Content-Length --max-body + 1"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" "${CT[@]}" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/b1024.json"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "chunked body of exactly --max-body bytes"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" "${CT[@]}" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/b1025.json"
tg_expect_error 413 body_too_large "chunked body of --max-body + 1 bytes"
tg_req POST /execute "${TG_AUTH_A[@]}" "${CT[@]}" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/b1025.json"
tg_expect_error 413 body_too_large "/execute chunked body over the limit"
tg_req POST /decide "${TG_AUTH_A[@]}" "${CT[@]}" --data-binary "@$TG_TMP/b1025.json"
tg_expect_error 413 body_too_large "/decide over the limit"
tg_req POST /protocol/verify-receipt "${CT[@]}" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/b1025.json"
tg_expect_error 413 body_too_large "/protocol/verify-receipt chunked over the limit"
# A chunked upload over the limit is read on up to 4 x --max-body + 64 KiB (here 68 KiB)
# and refused with 413 at its end; one that goes on past that is cut off (the connection
# closes without an answer) instead of being read forever.
head -c 60000 /dev/zero | tr '\0' ' ' >"$TG_TMP/big.json"
tg_req POST /v1/evaluate "${TG_AUTH_A[@]}" "${CT[@]}" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/big.json"
tg_expect_error 413 body_too_large "60 KB chunked upload (drained, then refused)"
head -c 3000000 /dev/zero | tr '\0' ' ' >"$TG_TMP/huge.json"
tg_req POST /v1/evaluate -H "Expect:" -H "Transfer-Encoding: chunked" --data-binary "@$TG_TMP/huge.json"
tg_eq "$TG_STATUS" 000 "3 MB chunked upload, no token: cut off, no answer"
tg_req GET /healthz
tg_expect_status 200 "still serving after oversized uploads"
tg_stop body

# ---- receipt text fields: 4096 bytes at most, a 400 naming the limit beyond ---------------
# action and actor are copied into the signed receipt; a longer one (allowed by a raised
# --max-string) is the caller's error, refused before anything is decided or stored.
tg_std_args rtext
tg_start rtext -- "${TG_STD_ARGS[@]}" --max-string 8192
long_req() { # long_req FIELD N: the example surface with FIELD of N bytes
    python3 -c '
import json, sys
r = {"surface": "example", "action": "noop", "actor": "someone"}
r[sys.argv[1]] = "a" * int(sys.argv[2])
sys.stdout.write(json.dumps(r))' "$1" "$2"
}
tg_post /v1/evaluate "$(long_req action 4096)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and len(j['receipt']['action']) == 4096" \
    "an action of exactly 4096 bytes is signed into the receipt"
for field in action actor; do
    for route in /v1/evaluate /execute; do
        tg_post "$route" "$(long_req "$field" 4097)"
        tg_expect_error 400 invalid_request "$route: $field of 4097 bytes"
        tg_expect_py "j.get('limit') == 'max_receipt_text' and j.get('max') == 4096 and '$field' in j['message']" \
            "$route: the 400 names the limit and the field ($field)"
    done
done
tg_req GET /metrics
tg_check "no decision was counted for the refused requests" \
    grep -q 'trigguard_decisions_total{decision="PERMIT",surface="example"} 1$' "$TG_BODY_FILE"
tg_stop rtext

# ---- rate limits --------------------------------------------------------------------

tg_std_args rate
tg_start rate RATE_LIMIT_PER_TENANT=20 RATE_LIMIT_BURST=2 -- "${TG_STD_ARGS[@]}"
got429=0
for i in $(seq 1 12); do
    tg_post /v1/evaluate "$(tg_req_json example)"
    if [ "$TG_STATUS" == 429 ]; then got429=$i; break; fi
    tg_expect_status 200 "request $i under the tenant rate"
done
tg_check "RATE_LIMIT_PER_TENANT=20 with burst 2: a 429 within 12 back-to-back requests (at $got429)" test "$got429" -ge 2
tg_expect_error 429 rate_limited "tenant over its rate"
RETRY=$(tg_header Retry-After)
tg_check "Retry-After is a positive integer of seconds: '$RETRY'" grep -qE '^[1-9][0-9]*$' <<<"$RETRY"
tg_check "Retry-After is at most a few seconds at 1 request per 3 s: $RETRY" test "${RETRY:-99}" -le 4
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json example)"
tg_expect_py "s == 200" "another tenant is not limited by acme's rate"
tg_req GET /healthz
tg_expect_status 200 "/healthz is not rate limited"
tg_req POST /v1/evaluate --json-body "$(tg_req_json example)"
tg_expect_error 401 unauthorized "unauthenticated requests are refused, not counted against a tenant"
sleep "${RETRY:-1}"
sleep 0.2
tg_post /v1/evaluate "$(tg_req_json example)"
tg_expect_py "s == 200" "after Retry-After seconds the tenant is admitted again"
expect_metrics "rate-limit rejections are counted in /metrics" \
    'm("trigguard_rate_limited_total", scope="tenant") >= 1 and m("trigguard_http_requests_total", route="/v1/evaluate", status="429") >= 1'
tg_stop rate

# RATE_LIMIT_VERIFY: the verify routes take no token, so they have one limiter for all
# callers, checked before the body is parsed; it does not touch the tenants' budgets.
tg_std_args vrate
tg_start vrate RATE_LIMIT_VERIFY=6 RATE_LIMIT_BURST=2 -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "s == 200 and 'receipt' in j" "vrate: a receipt to verify"
VRECEIPT=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["receipt"]))' "$TG_BODY_FILE")
got429=0
for i in $(seq 1 8); do
    path=/v1/verify
    [ $((i % 3)) -eq 1 ] && path=/protocol/verify-receipt
    [ $((i % 3)) -eq 2 ] && path=/verify-receipt
    tg_req POST $path --json-body "$VRECEIPT"
    if [ "$TG_STATUS" == 429 ]; then got429=$i; break; fi
    tg_expect_py "s == 200 and j['valid'] is True" "vrate: verification $i passes"
done
tg_check "RATE_LIMIT_VERIFY=6, burst 2: the verify routes together hit 429 (at request $got429)" test "$got429" -ge 3
tg_expect_error 429 rate_limited "verify rate"
tg_check "verify 429 has Retry-After" test -n "$(tg_header Retry-After)"
tg_req POST /v1/verify --json-body 'not json at all'
tg_expect_error 429 rate_limited "the verify limit applies before the body is parsed"
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "s == 200" "vrate: evaluations are not counted by the verify limit"
expect_metrics "verify rejections are counted in /metrics" \
    'm("trigguard_rate_limited_total", scope="verify") >= 2 and m("trigguard_rate_limited_total", scope="global") == 0'
tg_stop vrate

tg_std_args grate
tg_start grate RATE_LIMIT_GLOBAL=20 RATE_LIMIT_BURST=2 -- "${TG_STD_ARGS[@]}"
got429=0
for i in $(seq 1 12); do
    if [ $((i % 2)) -eq 0 ]; then AUTH=("${TG_AUTH_A[@]}"); else AUTH=("${TG_AUTH_B[@]}"); fi
    tg_req POST /v1/evaluate "${AUTH[@]}" --json-body "$(tg_req_json example)"
    if [ "$TG_STATUS" == 429 ]; then got429=$i; break; fi
done
tg_check "RATE_LIMIT_GLOBAL=20: two tenants together hit 429 (at request $got429)" test "$got429" -ge 2
tg_expect_error 429 rate_limited "global rate"
tg_check "global 429 has Retry-After" test -n "$(tg_header Retry-After)"
tg_stop grate

# ---- bulkheads --------------------------------------------------------------------------
# A request holds its bulkhead slot from admission to its response. A large valid body
# (a context array of 300k numbers, parsed and hashed after admission) keeps one slot
# busy for a while on one event thread; small requests meanwhile run on the other thread.

bulkhead_probe() { # bulkhead_probe PORT BIG_TOKEN SMALL_TOKEN EXPECT(503|200) LABEL
    python3 - "$@" <<'PY'
import json, sys, threading, time, tgclient
port, big_tok, small_tok, expect, label = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
small = {"surface": "example", "action": "small"}
for attempt in range(4):
    # Inconclusive (the big request was too quick to overlap anything): make it bigger.
    n = 300000 << attempt
    big = ('{"surface":"example","action":"big","context":{"blob":[' + ",".join(["0"] * n) + "]}}").encode()
    done = threading.Event()
    big_result = []
    def send_big():
        try:
            big_result.append(tgclient.request(port, "POST", "/v1/evaluate", big, tgclient.bearer(big_tok), timeout=60))
        except Exception as e:
            big_result.append(e)
        done.set()
    t = threading.Thread(target=send_big)
    t.start()
    time.sleep(0.05)  # either order of admission shows the bulkhead
    statuses, bodies = [], []
    while not done.is_set():
        st, h, body = tgclient.request(port, "POST", "/v1/evaluate", small, tgclient.bearer(small_tok))
        statuses.append(st)
        bodies.append((st, h, body))
        time.sleep(0.01)
    t.join()
    r = big_result[0]
    assert not isinstance(r, Exception), "big request failed: %r" % r
    if r[0] == 200:
        assert json.loads(r[2])["decision"] == "PERMIT", "big request: %s" % r[2][:200]
    else:
        # A small request was in flight when the big one was admitted: also a rejection.
        assert expect == 503, "big request refused for a tenant that should be admitted: %s" % r[2][:200]
    bodies.append(r)
    statuses.append(r[0])
    bad = [b for b in bodies if b[0] not in (200, 503)]
    assert not bad, "unexpected statuses: %r" % [(b[0], b[2][:200]) for b in bad]
    for st, h, body in bodies:
        if st == 503:
            j = json.loads(body)
            assert j["error"] == "overloaded" and j["request_id"] == h["x-request-id"] and j["message"], body
    n503 = statuses.count(503)
    print("%s attempt %d: big request %d, %d small requests while it ran, %d x 503 in all"
          % (label, attempt + 1, r[0], len(statuses) - 1, n503))
    if expect == 503 and n503 > 0:
        break
    if expect == 200 and len(statuses) >= 3:
        assert n503 == 0, "%s: %d x 503 for a tenant that should be admitted" % (label, n503)
        break
else:
    sys.exit("%s: no conclusive round in 4 attempts" % label)
# The slot is released: a request after the big one is admitted.
st, _, _ = tgclient.request(port, "POST", "/v1/evaluate", small, tgclient.bearer(small_tok))
assert st == 200, "after the big request: %s" % st
PY
}

tg_std_args bulk
tg_start bulk BULKHEAD_GLOBAL_MAX_IN_FLIGHT=1 -- "${TG_STD_ARGS[@]}" --max-body 8388608
tg_check "BULKHEAD_GLOBAL_MAX_IN_FLIGHT=1: another tenant gets 503 overloaded while one request is in flight" \
    bulkhead_probe "${TG_PORTS[bulk]}" tok-acme tok-beta 503 global
tg_req GET /metrics
tg_check "global bulkhead rejections are counted" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
assert tgclient.metric(s, "trigguard_bulkhead_rejected_total", scope="global") >= 1
assert tgclient.metric(s, "trigguard_http_requests_total", route="/v1/evaluate", status="503") >= 1
assert tgclient.metric(s, "trigguard_in_flight") == 0, "a bulkhead slot leaked"
PY
tg_stop bulk

tg_std_args tbulk
tg_start tbulk BULKHEAD_TENANT_MAX_IN_FLIGHT=1 -- "${TG_STD_ARGS[@]}" --max-body 8388608
tg_check "BULKHEAD_TENANT_MAX_IN_FLIGHT=1: the same tenant gets 503 overloaded" \
    bulkhead_probe "${TG_PORTS[tbulk]}" tok-acme tok-acme 503 tenant
tg_check "BULKHEAD_TENANT_MAX_IN_FLIGHT=1: another tenant is still admitted" \
    bulkhead_probe "${TG_PORTS[tbulk]}" tok-acme tok-beta 200 tenant-isolation
tg_req GET /metrics
tg_check "tenant bulkhead rejections are counted" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
assert tgclient.metric(s, "trigguard_bulkhead_rejected_total", scope="tenant") >= 1
PY
tg_stop tbulk

# ---- a full idempotency table: 503 overloaded, never an eviction ------------------------

tg_std_args store
tg_start store -- "${TG_STD_ARGS[@]}" --store-max-entries 16
# Before it fills: keys added over two of the estimate's sampling steps give a growth rate
# and a finite time to full (store.h's fill estimate, sampled by the 100 ms tick at most
# every 500 ms); nothing has been added to it before, so +Inf first.
tg_req GET /metrics
tg_check "an empty table is not filling (+Inf)" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
assert tgclient.metric(s, "trigguard_store_seconds_to_full", table="keys") == float("inf")
assert tgclient.metric(s, "trigguard_store_seconds_to_full", table="receipts") == float("inf")
PY
for round in 1 2 3; do
    for i in 1 2; do
        tg_post /v1/evaluate "$(tg_req_json example ",\"idempotency_key\":\"grow-$round-$i\"")"
    done
    sleep 1.2
done
tg_req GET /metrics
tg_check "a growing table: a positive fill rate and a finite time to full" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
for t in ("keys", "receipts"):
    r = tgclient.metric(s, "trigguard_store_fill_rate", table=t)
    e = tgclient.metric(s, "trigguard_store_seconds_to_full", table=t)
    assert r > 0, (t, r)
    assert 0 < e < float("inf"), (t, e)
PY
full_at=0
for i in $(seq 1 24); do
    tg_post /v1/evaluate "$(tg_req_json example ",\"idempotency_key\":\"fill-$i\"")"
    if [ "$TG_STATUS" != 200 ]; then full_at=$i; break; fi
done
tg_check "--store-max-entries 16: the table fills up (first refusal at key $full_at)" test "$full_at" -ge 2 -a "$full_at" -le 17
tg_expect_error 503 overloaded "idempotency table full"
tg_post /v1/evaluate "$(tg_req_json example ',"idempotency_key":"fill-1"')"
tg_expect_py "s == 200 and h.get('idempotent-replayed') == 'true'" "a stored key still replays when the table is full"
tg_post /v1/evaluate "$(tg_req_json example ',"nonce":"fill-nonce"')"
tg_expect_error 503 overloaded "a new nonce cannot be recorded in a full table"
tg_post /v1/evaluate "$(tg_req_json example)"
tg_expect_error 503 overloaded "the receipt index (same cap) is full as well: no receipt is signed that GET /v1/receipts could not find"
tg_post /v1/evaluate "$(tg_req_json silence)"
tg_expect_py "s == 200 and j['decision'] == 'SILENCE'" "a SILENCE (no receipt to index) still works"
tg_req GET /metrics
tg_check "full tables: 0 seconds to full" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
assert tgclient.metric(s, "trigguard_store_seconds_to_full", table="keys") == 0
assert tgclient.metric(s, "trigguard_store_capacity") == 16
PY
tg_stop store

# ---- a full receipt index: 503 before signing, every receipt handed out can be read -------

tg_std_args rindex
tg_start rindex -- "${TG_STD_ARGS[@]}" --store-max-entries 16
ids=()
for i in $(seq 1 24); do
    tg_post /v1/evaluate "$(tg_req_json example)"
    [ "$TG_STATUS" = 200 ] || break
    tg_jget id 'j["execution_id"]'
    ids+=("$id")
done
tg_check "--store-max-entries 16: the receipt index fills up after ${#ids[@]} receipts" test "${#ids[@]}" -ge 1 -a "${#ids[@]}" -le 16
tg_expect_error 503 overloaded "receipt index full: refused before signing"
readable=0
for id in "${ids[@]}"; do
    tg_req GET "/v1/receipts/$id" "${TG_AUTH_A[@]}"
    [ "$TG_STATUS" = 200 ] && readable=$((readable + 1))
done
tg_eq "$readable" "${#ids[@]}" "every receipt handed out is readable from GET /v1/receipts"
tg_stop rindex

# ---- --max-connections: at the limit new connections wait in the backlog ----------------
# Three idle connections fill --max-connections 3; a fourth completes its handshake in the
# kernel but gets no answer while they are open, and is served once one of them closes.

tg_std_args maxc
tg_start maxc -- "${TG_STD_ARGS[@]}" --max-connections 3
tg_check "--max-connections 3: a 4th connection waits until one of the 3 closes" python3 - "${TG_PORTS[maxc]}" <<'PY2'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
time.sleep(0.5)
extra = socket.create_connection(("127.0.0.1", port), timeout=5)
extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
extra.settimeout(1.5)
try:
    early = extra.recv(64)
    sys.exit("answered (%r) with 3 connections open at --max-connections 3" % early)
except socket.timeout:
    pass
held[0].close()
extra.settimeout(10)
reply = b""
while True:
    chunk = extra.recv(4096)
    if not chunk:
        break
    reply += chunk
line = reply.split(b"\r\n", 1)[0]
if line != b"HTTP/1.1 200 OK":
    sys.exit("after one closed: %r" % line)
PY2
tg_stop maxc

# Out of descriptors: accept() fails with EMFILE; the daemon says so (once, though clients
# come and go meanwhile, so some accepts succeed between the failures), waits, and serves
# again as soon as descriptors free up (connections wait in the backlog meanwhile).
tg_std_args fds
tg_start fds -- "${TG_STD_ARGS[@]}"
prlimit --pid "$(tg_pid fds)" --nofile=64:64
tg_check "out of descriptors: accept_failed logged, served again once they free up" python3 - "${TG_PORTS[fds]}" <<'PY2'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(90)]
time.sleep(0.5)
end = time.time() + 1.5
while time.time() < end:  # churn: a freed descriptor lets one accept through, then EMFILE again
    held.pop(0).close()
    held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    time.sleep(0.01)
for s in held:
    s.close()
deadline = time.time() + 10
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        if s.recv(64).startswith(b"HTTP/1.1 200 "):
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("no 200 within 10 s of the descriptors freeing up")
    time.sleep(0.1)
PY2
tg_eq "$(grep -c '"event":"accept_failed"' "$(tg_logfile fds)")" 1 \
    "out of descriptors: one accept_failed line, not one per failure"
tg_stop fds

# ---- no signing key: fail closed ---------------------------------------------------------

tg_start nokey -- --policy "$TG_POLICY" --ledger "$TG_TMP/ledger-nokey" --threads 2
tg_req GET /healthz
tg_expect_status 200 "no key: /healthz (alive)"
tg_req GET /readyz
tg_expect_status 503 "no key: /readyz not ready"
tg_expect_py "j['ready'] is False and j['signing_key'] is False and j['policy'] is True" "no key: /readyz says the key is missing"
tg_req GET /.well-known/trigguard/keys.json
tg_expect_error 503 keys_unavailable "no key: keys.json"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"nk-1","nonce":"nk-n1"')"
tg_expect_error 503 keys_unavailable "no key: a PERMIT cannot be signed"
tg_expect_py "'receipt' not in j and 'decision' not in j" "no key: no unsigned decision leaks"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"nk-1","nonce":"nk-n1"')"
tg_expect_error 503 keys_unavailable "no key: the retry is refused the same way (key and nonce released, not 409)"
tg_post /v1/evaluate "$(tg_req_json deny)"
tg_expect_error 503 keys_unavailable "no key: a DENY needs a receipt too"
tg_post /execute "$(tg_req_json permit)"
tg_expect_error 503 keys_unavailable "no key: /execute"
tg_post /v1/evaluate "$(tg_req_json silence)"
tg_expect_py "s == 200 and j['decision'] == 'SILENCE' and 'receipt' not in j" "no key: SILENCE needs no signature"
tg_post /decide "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "no key: /decide (no receipt) still answers"
tg_req GET /version
tg_expect_status 200 "no key: /version"
tg_stop nokey

tg_done
