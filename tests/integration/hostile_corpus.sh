#!/usr/bin/env bash
# hostile_corpus.sh — replays tests/hostile/*.json (malformed and malicious requests) against
# the live daemon over raw loopback sockets, 20 rounds: every case gets its documented 4xx
# (exact status and error code), never a 5xx or a PERMIT, the daemon stays up and its RSS
# stays flat after a warm-up. Then clients that reset the connection in the middle of a
# response must not kill the process (SIGPIPE is ignored).
source "$(dirname "$0")/lib/daemon.sh"

ROUNDS=${TG_HOSTILE_ROUNDS:-20}
WARMUP=5
# Growth allowed between the end of the warm-up and the last round. Under ASan, freed memory
# sits in a quarantine (256 MB by default) and RSS grows with every request until it is
# full; a small quarantine makes the measurement about the daemon, not the sanitizer.
RSS_LIMIT_KIB=${TG_HOSTILE_RSS_LIMIT_KIB:-4096}
ASAN_ENV="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4:thread_local_quarantine_size_kb=256"

tg_keygen
tg_std_args hostile
tg_start hostile "$ASAN_ENV" -- "${TG_STD_ARGS[@]}" --log-level warn
PID=$(tg_pid hostile)
PORT=${TG_PORTS[hostile]}

# ---- the corpus -----------------------------------------------------------------------
NCASES=$(find "$TG_SRC/tests/hostile" -maxdepth 1 -name '*.json' | wc -l)
tg_check "the hostile corpus has at least 60 cases ($NCASES)" test "$NCASES" -ge 60
if python3 "$TG_SRC/tests/hostile/replay.py" --port "$PORT" --pid "$PID" --rounds "$ROUNDS" \
    --warmup "$WARMUP" --rss-limit-kib "$RSS_LIMIT_KIB" >"$TG_TMP/replay.out" 2>&1; then
    tg_pass "hostile corpus: $NCASES cases x $ROUNDS rounds"
else
    tg_fail "hostile corpus replay:
$(tail -40 "$TG_TMP/replay.out")"
fi
sed 's/^/    /' "$TG_TMP/replay.out" | grep -E 'replayed|VmRSS' || true

# ---- SIGPIPE ----------------------------------------------------------------------------
SIGIGN=$(awk '/^SigIgn:/ {print $2}' "/proc/$PID/status")
tg_check "SIGPIPE is ignored by the daemon (SigIgn $SIGIGN has bit 13)" \
    python3 -c "import sys; sys.exit(0 if int('$SIGIGN', 16) >> 12 & 1 else 1)"
# Clients that ask for a large response and reset the connection at once (SO_LINGER 0)
# make the server write into a dead socket: EPIPE, never a signal that kills it.
python3 - "$PORT" <<'PY' || tg_fail "reset-in-the-middle clients"
import socket, struct, sys
port = int(sys.argv[1])
req = (b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 8 +
       b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n")
for i in range(200):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(req)
    if i % 2:
        s.recv(1)  # let the server start writing first
    s.close()      # RST
PY
sleep 0.5
tg_check "the daemon survives 200 connections reset under its writes" kill -0 "$PID"
tg_req GET /healthz
tg_expect_status 200 "still serving after resets"

tg_stop hostile

# ---- every limit is configurable: at its value accepted, one past it refused by name ------
tg_std_args small
tg_start small -- "${TG_STD_ARGS[@]}" --log-level warn --max-body 2048 --max-depth 4 \
    --max-string 64 --max-keys 8 --max-url 512 --max-header-bytes 2048 \
    --max-idempotency-key 16 --max-nonce 8
python3 - "${TG_PORTS[small]}" >"$TG_TMP/small.out" 2>&1 <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
A = tgclient.bearer("tok-acme")
def ev(body, headers=None, path="/v1/evaluate", raw=False):
    h = dict(A, **(headers or {}))
    return tgclient.request(port, "POST", path, body if raw else json.dumps(body).encode(), h)
def ok(label, r):
    st, h, b = r
    assert st == 200 and json.loads(b)["decision"] == "PERMIT", "%s: %d %r" % (label, st, b[:200])
def refused(label, r, status, limit, mx):
    st, h, b = r
    j = json.loads(b)
    assert st == status and j.get("limit") == limit and j.get("max") == mx, \
        "%s: %d %r, want %d limit %s max %d" % (label, st, b[:300], status, limit, mx)
    print("ok %-22s %d %s" % (label, st, j["message"]))
base = {"surface": "example"}
def nest(n):  # n levels of objects in total, the request object included
    v = 1
    for _ in range(n - 1):
        v = {"a": v}
    return dict(base, context=v)
ok("depth 4", ev(nest(4)))
refused("depth 5", ev(nest(5)), 400, "max_depth", 4)
ok("string 64", ev(dict(base, action="a" * 64)))
refused("string 65", ev(dict(base, action="a" * 65)), 400, "max_string", 64)
ok("keys 8", ev(dict(base, context={"k%d" % i: i for i in range(8)})))
refused("keys 9", ev(dict(base, context={"k%d" % i: i for i in range(9)})), 400, "max_keys", 8)
ok("idempotency key 16", ev(dict(base, idempotency_key="k" * 16)))
refused("idempotency key 17", ev(dict(base, idempotency_key="k" * 17)), 400, "max_idempotency_key", 16)
refused("Idempotency-Key 17", ev(base, {"Idempotency-Key": "h" * 17}), 400, "max_idempotency_key", 16)
ok("nonce 8", ev(dict(base, nonce="n" * 8)))
refused("nonce 9", ev(dict(base, nonce="m" * 9)), 400, "max_nonce", 8)
doc = b'{"surface":"example"}'  # padded with JSON whitespace to the exact size
ok("body 2048", ev(doc + b" " * (2048 - len(doc)), raw=True))
refused("body 2049", ev(doc + b" " * (2049 - len(doc)), raw=True), 413, "max_body", 2048)
st, h, b = tgclient.request(port, "GET", "/healthz?q=" + "a" * 600)
j = json.loads(b)
assert st == 414 and j["limit"] == "max_url" and j["max"] == 512, b
print("ok url 600 bytes         414", j["message"])
st, h, b = tgclient.request(port, "GET", "/healthz", headers={"X-Pad": "p" * 2100})
j = json.loads(b)
assert st == 431 and j["limit"] == "max_header_bytes" and j["max"] == 2048, b
print("ok headers 2100 bytes    431", j["message"])
PY
rc=$?
sed 's/^/    /' "$TG_TMP/small.out"
tg_eq "$rc" 0 "lowered limits: each accepted at its value and refused one past it, by name"
tg_stop small
tg_done
