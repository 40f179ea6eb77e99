#!/usr/bin/env bash
# tls.sh — HTTPS through libmicrohttpd's GnuTLS support: a self-signed EC P-256 certificate
# made here with openssl, the daemon started with --tls-cert/--tls-key, curl --cacert gets a
# PERMIT with a verifiable receipt; plain HTTP to the TLS port fails fast without an HTTP
# answer; a client that does not trust the certificate is refused; bad TLS material stops
# the start with a clear message; silent TLS connections are closed after the connection
# timeout.
source "$(dirname "$0")/lib/daemon.sh"

command -v openssl >/dev/null || tg_die "openssl is needed to make the test certificate"
CERT=$TG_TMP/tls.crt
TKEY=$TG_TMP/tls.key
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TKEY" \
    -out "$CERT" -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    >"$TG_TMP/openssl.out" 2>&1 || tg_die "openssl req failed: $(cat "$TG_TMP/openssl.out")"
chmod 600 "$TKEY"
tg_keygen

# The library's own start waits on plain-HTTP /healthz; a TLS daemon is waited on here.
tls_start() { # tls_start NAME serve-args...
    local name=$1 pf=$TG_TMP/port-$1 log=$TG_TMP/daemon-$1.log
    shift
    rm -f "$pf"
    env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --port 0 --port-file "$pf" "$@" >>"$log" 2>&1 &
    TG_PIDS[$name]=$!
    TG_LOGS[$name]=$log
    TG_HOSTS[$name]=127.0.0.1
    local deadline=$((SECONDS + TG_START_TIMEOUT))
    while [ ! -s "$pf" ]; do
        kill -0 "${TG_PIDS[$name]}" 2>/dev/null || tg_die "TLS daemon exited before listening: $(tail -5 "$log")"
        [ $SECONDS -lt $deadline ] || tg_die "TLS daemon wrote no port file"
        sleep 0.05
    done
    TG_PORTS[$name]=$(tr -d '[:space:]' <"$pf")
    until curl -s -o /dev/null --max-time 2 --cacert "$CERT" "https://127.0.0.1:${TG_PORTS[$name]}/healthz"; do
        [ $SECONDS -lt $deadline ] || tg_die "TLS daemon: https /healthz did not answer"
        sleep 0.05
    done
    tg_log "TLS daemon $name: pid ${TG_PIDS[$name]}, port ${TG_PORTS[$name]}"
}

tg_std_args tls
tls_start tls "${TG_STD_ARGS[@]}" --tls-cert "$CERT" --tls-key "$TKEY"
PORT=${TG_PORTS[tls]}
HTTPS=https://127.0.0.1:$PORT
tg_check "the startup log says TLS" grep -q '"listening".*(TLS)' "$(tg_logfile tls)"

# ---- a decision over HTTPS ----------------------------------------------------------------
TG_URL=$HTTPS
tg_req POST /v1/evaluate --cacert "$CERT" "${TG_AUTH_A[@]}" --json-body "$(tg_req_json permit)"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['enforcement'] == 'EXECUTED'" "PERMIT over HTTPS"
tg_save_receipt "$TG_TMP/receipt.json"
curl -sf --max-time 10 --cacert "$CERT" -o "$TG_TMP/keys.json" "$HTTPS/.well-known/trigguard/keys.json" ||
    tg_fail "cannot fetch keys.json over HTTPS"
tg_req POST /v1/verify --cacert "$CERT" -H "Content-Type: application/json" --data-binary "@$TG_TMP/receipt.json"
tg_expect_py "s == 200 and j['valid'] is True" "the receipt served over HTTPS verifies"
"$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/receipt.json" >"$TG_TMP/verify.out" 2>&1
tg_eq "$?" 0 "trigguard verify accepts the receipt offline ($(head -c 200 "$TG_TMP/verify.out"))"
tg_req POST /v1/evaluate --cacert "$CERT" --json-body "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "no token over HTTPS"

# ---- a reload does not replace the certificate (docs/OPERATIONS.md, "Reload") ------------
served_fp() {
    openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
FP_OLD=$(served_fp)
tg_ne "$FP_OLD" "" "the served certificate's fingerprint can be read"
cp "$CERT" "$TG_TMP/tls-old.crt"
cp -p "$TKEY" "$TG_TMP/tls-old.key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TKEY.new" \
    -out "$CERT.new" -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    >"$TG_TMP/openssl.out" 2>&1 || tg_die "openssl req (second certificate) failed"
chmod 600 "$TKEY.new"
mv "$CERT.new" "$CERT"
mv "$TKEY.new" "$TKEY"
kill -HUP "${TG_PIDS[tls]}"
for _ in $(seq 1 100); do
    curl -s --max-time 2 --cacert "$TG_TMP/tls-old.crt" "$HTTPS/version" | grep -q '"last_reload":{' && break
    sleep 0.1
done
tg_req GET /version --cacert "$TG_TMP/tls-old.crt"
tg_expect_py '"tls" in j["last_reload"]["failed"] and "restart" in j["last_reload"]["failed"]["tls"] and j["last_reload"]["reloaded"] == ["policy", "tokens", "keys"]' \
    "SIGHUP on a TLS daemon: policy, tokens and keys reload, tls is reported not reloaded"
tg_eq "$(served_fp)" "$FP_OLD" "after the reload the daemon still serves the certificate it started with"
tg_check "trigguard_reload_total counts the tls failure" bash -c \
    "curl -s --cacert '$TG_TMP/tls-old.crt' '$HTTPS/metrics' | grep -q '^trigguard_reload_total{what=\"tls\",result=\"failed\"} 1\$'"
mv "$TG_TMP/tls-old.crt" "$CERT" # the rest of the test trusts the certificate being served
mv "$TG_TMP/tls-old.key" "$TKEY"
for v in 1.2 1.3; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$CERT" --tlsv$v --tls-max $v "$HTTPS/healthz")
    tg_eq "$code" 200 "TLS $v handshake and request"
done

# ---- what must fail ---------------------------------------------------------------------------
curl -s -o /dev/null --max-time 10 "$HTTPS/healthz"
tg_eq "$?" 60 "curl without --cacert refuses the self-signed certificate (exit 60)"
start=$(date +%s%N)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$PORT/healthz")
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
tg_eq "$code" 000 "plain HTTP to the TLS port gets no HTTP answer"
tg_check "plain HTTP fails with a transport error, not a timeout (curl exit $rc in $ms ms)" \
    test "$rc" -ne 0 -a "$rc" -ne 28 -a "$ms" -lt 5000
python3 - "$PORT" <<'PY' || tg_fail "raw plain-text request to the TLS port"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-acme\r\n"
          b"Content-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"surface\":\"example\"}")
data = b""
try:
    while len(data) < 65536:
        c = s.recv(4096)
        if not c:
            break
        data += c
except ConnectionResetError:
    pass
assert b"HTTP/1." not in data and b"PERMIT" not in data, data[:200]
print("plain text answered with %d bytes (a TLS alert at most), then closed" % len(data))
PY
tg_req GET /healthz --cacert "$CERT"
tg_expect_status 200 "HTTPS still served after plain-text clients"
tg_stop tls

# ---- silent TLS connections are timed out ---------------------------------------------------
# In libmicrohttpd 0.9.75's turbo mode a TLS connection that never sends a byte escapes
# --connection-timeout, so TLS servers run without it. With --max-connections 2, two silent
# connections (one sends nothing, one half a ClientHello) would otherwise lock the listener.
tg_std_args tlsidle
tls_start tlsidle "${TG_STD_ARGS[@]}" --tls-cert "$CERT" --tls-key "$TKEY" \
    --connection-timeout 2 --max-connections 2
python3 - "${TG_PORTS[tlsidle]}" >"$TG_TMP/tlsidle.out" 2>&1 <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
silent = socket.create_connection(("127.0.0.1", port))
half = socket.create_connection(("127.0.0.1", port))
half.sendall(bytes([0x16, 0x03, 0x01, 0x00, 0xC8, 0x01]))  # a ClientHello's first bytes
t0 = time.time()
for s in (silent, half):
    s.settimeout(12)
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        sys.exit("a silent TLS connection was still open after 12 s")
print("both closed after %.1f s" % (time.time() - t0))
PY
SILENT_PID=$!
sleep 0.5
start=$(date +%s%N)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 --cacert "$CERT" \
    "https://127.0.0.1:${TG_PORTS[tlsidle]}/healthz")
ms=$((($(date +%s%N) - start) / 1000000))
tg_eq "$code" 200 "with both slots held by silent TLS connections, a real client is served once they are cut ($ms ms)"
wait $SILENT_PID
tg_eq "$?" 0 "silent TLS connections are closed after --connection-timeout: $(cat "$TG_TMP/tlsidle.out")"
tg_stop tlsidle

# ---- bad TLS material stops the start -------------------------------------------------------
TG_URL=""
printf 'not a certificate\n' >"$TG_TMP/bad.crt"
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$TG_TMP/bad.crt" --tls-key "$TKEY" \
    >"$TG_TMP/bad.log" 2>&1
tg_eq "$?" 2 "a malformed certificate stops the start (exit 2)"
tg_check "and the log says why: $(tail -1 "$TG_TMP/bad.log" | head -c 300)" \
    grep -q '"startup_failed".*TLS' "$TG_TMP/bad.log"
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$CERT" >"$TG_TMP/half.log" 2>&1
tg_eq "$?" 2 "--tls-cert without --tls-key is refused (exit 2)"
tg_check "with a message naming both flags" grep -q 'tls-cert and --tls-key' "$TG_TMP/half.log"
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$TG_TMP/missing.crt" --tls-key "$TKEY" \
    >"$TG_TMP/missing.log" 2>&1
tg_eq "$?" 2 "a missing certificate file stops the start (exit 2)"
tg_check "with a message naming the file" grep -q 'missing.crt' "$TG_TMP/missing.log"

tg_done
