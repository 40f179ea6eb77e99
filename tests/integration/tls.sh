#!/usr/bin/env bash
# tls.sh — HTTPS through libmicrohttpd's GnuTLS support: a self-signed EC P-256 certificate
# made here with openssl, the daemon started with --tls-cert/--tls-key, curl --cacert gets a
# PERMIT with a verifiable receipt; plain HTTP to the TLS port fails fast without an HTTP
# answer; a client that does not trust the certificate is refused; bad TLS material stops
# the start with a clear message; silent TLS connections are closed after the connection
# timeout. SIGHUP and POST /v1/admin/reload replace the certificate for new connections (open
# ones keep theirs), a bad pair keeps the old one and says so in /version and /metrics, and
# reloads under load fail no request.
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

# An admin token for POST /v1/admin/reload (the environment's tokens are callers).
cat >"$TG_TMP/tokens.json" <<EOF
[{"tenant": "acme", "token_sha256": "$(printf %s tok-adm | sha256sum | cut -c1-64)", "subject": "adm", "role": "admin"}]
EOF
chmod 600 "$TG_TMP/tokens.json"
tg_std_args tls
tls_start tls "${TG_STD_ARGS[@]}" --tls-cert "$CERT" --tls-key "$TKEY" --tokens "$TG_TMP/tokens.json"
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

# ---- a reload replaces the certificate (docs/OPERATIONS.md, "Reload", "TLS") ---------------
# Two pairs, A (the one started with) and B; the files at $CERT/$TKEY are replaced by rename,
# as a deploy does, and the clients here trust both certificates, so a request succeeds
# whichever one it gets.
served_fp() { # the SHA-256 fingerprint of the certificate a new connection gets
    openssl s_client -connect "127.0.0.1:$PORT" </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256 2>/dev/null
}
file_fp() { openssl x509 -in "$1" -noout -fingerprint -sha256; }
cp "$CERT" "$TG_TMP/A.crt"
cp -p "$TKEY" "$TG_TMP/A.key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TG_TMP/B.key" \
    -out "$TG_TMP/B.crt" -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    >"$TG_TMP/openssl.out" 2>&1 || tg_die "openssl req (certificate B) failed"
chmod 600 "$TG_TMP/B.key"
cat "$TG_TMP/A.crt" "$TG_TMP/B.crt" >"$TG_TMP/both.crt"
FP_A=$(file_fp "$TG_TMP/A.crt")
FP_B=$(file_fp "$TG_TMP/B.crt")
tg_ne "$FP_A" "$FP_B" "the two test certificates differ"
tg_eq "$(served_fp)" "$FP_A" "the daemon serves the certificate it started with"

install_pair() { # install_pair CERTFILE KEYFILE: each file replaced by one rename
    cp "$1" "$CERT.tmp" && mv -f "$CERT.tmp" "$CERT"
    cp -p "$2" "$TKEY.tmp" && mv -f "$TKEY.tmp" "$TKEY"
}
get() { curl -s --max-time 5 --cacert "$TG_TMP/both.crt" "$HTTPS$1"; }
metric() { # metric 'NAME{labels}': its value in /metrics, or "absent"
    get /metrics | awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? "absent" : v }'
}
hup() { tg_hup "${TG_PIDS[tls]}" "$HTTPS" --cacert "$TG_TMP/both.crt"; }
admin_reload() {
    tg_req POST /v1/admin/reload --cacert "$TG_TMP/both.crt" -H "Authorization: Bearer tok-adm"
}

# A connection opened before the reload keeps its certificate, and works, after it.
python3 - "$PORT" "$TG_TMP/both.crt" "$TG_TMP/kept.ready" "$TG_TMP/kept.go" >"$TG_TMP/kept.out" 2>&1 <<'PY' &
import hashlib, http.client, os, ssl, sys, time
port, ca, ready, go = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPSConnection("127.0.0.1", port, timeout=20,
                                context=ssl.create_default_context(cafile=ca))
def healthz():  # one request on the same keep-alive connection
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    return r.status
first = healthz()
fp = hashlib.sha256(c.sock.getpeercert(binary_form=True)).hexdigest()
open(ready, "w").close()
for _ in range(400):
    if os.path.exists(go):
        break
    time.sleep(0.05)
second = healthz()
same = hashlib.sha256(c.sock.getpeercert(binary_form=True)).hexdigest() == fp
print(fp, first, second, "same connection" if same else "another certificate")
PY
KEPT_PID=$!
for _ in $(seq 1 200); do
    [ -e "$TG_TMP/kept.ready" ] && break
    sleep 0.05
done

install_pair "$TG_TMP/B.crt" "$TG_TMP/B.key"
hup
tg_req GET /version --cacert "$TG_TMP/both.crt"
tg_expect_py 'j["last_reload"]["reloaded"] == ["policy", "tokens", "keys", "tls"] and j["last_reload"]["failed"] == {} and j["last_reload"]["result"] == "ok"' \
    "SIGHUP on a TLS daemon: every part, tls too, reloaded"
tg_eq "$(served_fp)" "$FP_B" "after SIGHUP a new connection gets the new certificate"
tg_eq "$(metric 'trigguard_reload_total{what="tls",result="ok"}')" 1 "metrics: one tls reload ok"
touch "$TG_TMP/kept.go"
wait $KEPT_PID
tg_eq "$?" 0 "a connection opened before the reload still works after it: $(cat "$TG_TMP/kept.out")"
want=$(echo "$FP_A" | sed 's/.*=//; s/://g' | tr 'A-F' 'a-f')
tg_check "and it kept the certificate it started with ($(cat "$TG_TMP/kept.out"))" \
    grep -q "^$want 200 200 same connection" "$TG_TMP/kept.out"

install_pair "$TG_TMP/A.crt" "$TG_TMP/A.key"
admin_reload
tg_expect_py 's == 200 and "tls" in j["reloaded"] and j["failed"] == {} and j["trigger"] == "admin"' \
    "POST /v1/admin/reload reloads tls"
tg_eq "$(served_fp)" "$FP_A" "after the admin reload a new connection gets the files' certificate"

# ---- a bad pair leaves the served certificate in place ---------------------------------------
printf 'not a certificate\n' >"$TG_TMP/broken.crt"
install_pair "$TG_TMP/broken.crt" "$TG_TMP/A.key"
hup
tg_req GET /version --cacert "$TG_TMP/both.crt"
tg_expect_py '"certificate" in j["last_reload"]["failed"].get("tls", "") and "tls" not in j["last_reload"]["reloaded"] and j["last_reload"]["result"] == "failed"' \
    "an unparsable certificate: tls failed in /version's last_reload"
tg_eq "$(served_fp)" "$FP_A" "an unparsable certificate: the old one is still served"
tg_eq "$(metric 'trigguard_reload_total{what="tls",result="failed"}')" 1 \
    "metrics: the failed tls reload counted"
tg_check "the failure is logged" grep -q '"reload_failed".*tls: kept the old one' "$(tg_logfile tls)"

install_pair "$TG_TMP/A.crt" "$TG_TMP/B.key"
admin_reload
tg_expect_py 's == 200 and j["result"] == "failed" and "does not match" in j["failed"].get("tls", "") and "tls" not in j["reloaded"]' \
    "a key that is not the certificate's: tls failed, named as a mismatch"
tg_eq "$(served_fp)" "$FP_A" "a mismatched key: the old certificate is still served"
rm -f "$TKEY"
hup
tg_req GET /version --cacert "$TG_TMP/both.crt"
tg_expect_py '"tls" in j["last_reload"]["failed"]' "a missing key file: tls failed"
tg_eq "$(served_fp)" "$FP_A" "a missing key file: the old certificate is still served"
tg_eq "$(metric 'trigguard_reload_total{what="tls",result="failed"}')" 3 \
    "metrics: three failed tls reloads"

# ---- reloads under load fail no request ------------------------------------------------------
# Two clients, each a bounded loop of requests on new TLS connections (one asks /healthz, the
# other evaluates with a token, so the tokens and keys swap under it too), while the pair
# flips between B and A six times.
install_pair "$TG_TMP/A.crt" "$TG_TMP/A.key"
load() { # load N OUT [curl args...]: up to N requests, each on a new connection, until load.stop
    local n=$1 out=$2 ok=0 bad=0 code
    shift 2
    for _ in $(seq 1 "$n"); do
        [ -e "$TG_TMP/load.stop" ] && break
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$TG_TMP/both.crt" "$@")
        if [ "$code" = 200 ]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    done
    echo "$ok $bad" >"$out"
}
oks_before=$(metric 'trigguard_reload_total{what="tls",result="ok"}')
load 3000 "$TG_TMP/load1.out" "$HTTPS/healthz" &
L1=$!
load 3000 "$TG_TMP/load2.out" "${TG_AUTH_A[@]}" -H "Content-Type: application/json" \
    --data-binary "$(tg_req_json permit)" "$HTTPS/v1/evaluate" &
L2=$!
for i in 1 2 3 4 5 6; do
    if [ $((i % 2)) = 1 ]; then
        install_pair "$TG_TMP/B.crt" "$TG_TMP/B.key"
    else
        install_pair "$TG_TMP/A.crt" "$TG_TMP/A.key"
    fi
    hup
    sleep 0.3
done
touch "$TG_TMP/load.stop"
wait $L1 $L2
read -r ok1 bad1 <"$TG_TMP/load1.out"
read -r ok2 bad2 <"$TG_TMP/load2.out"
tg_eq "$((bad1 + bad2))" 0 "no request failed during six certificate reloads"
tg_log "under reloads: $ok1 /healthz and $ok2 /v1/evaluate answered 200, $((bad1 + bad2)) not"
tg_check "both clients were served meanwhile ($ok1 /healthz, $ok2 /v1/evaluate)" \
    test "$ok1" -gt 0 -a "$ok2" -gt 0
tg_eq "$(metric 'trigguard_reload_total{what="tls",result="ok"}')" "$((oks_before + 6))" \
    "the six tls reloads all succeeded"
tg_eq "$(served_fp)" "$FP_A" "after an even number of flips the first certificate is served again"
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
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$TG_TMP/A.crt" --tls-key "$TG_TMP/B.key" \
    >"$TG_TMP/mismatch.log" 2>&1
tg_eq "$?" 2 "a key that is not the certificate's stops the start (exit 2)"
tg_check "and the log says so: $(tail -1 "$TG_TMP/mismatch.log" | head -c 300)" \
    grep -q '"startup_failed".*does not match the certificate' "$TG_TMP/mismatch.log"
"$TG_BIN" serve --check-config "${TG_STD_ARGS[@]}" --tls-cert "$TG_TMP/A.crt" \
    --tls-key "$TG_TMP/B.key" >"$TG_TMP/mismatch-check.log" 2>&1
tg_eq "$?" 2 "--check-config refuses a key that is not the certificate's (exit 2)"
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$CERT" >"$TG_TMP/half.log" 2>&1
tg_eq "$?" 2 "--tls-cert without --tls-key is refused (exit 2)"
tg_check "with a message naming both flags" grep -q 'tls-cert and --tls-key' "$TG_TMP/half.log"
"$TG_BIN" serve --port 0 "${TG_STD_ARGS[@]}" --tls-cert "$TG_TMP/missing.crt" --tls-key "$TKEY" \
    >"$TG_TMP/missing.log" 2>&1
tg_eq "$?" 2 "a missing certificate file stops the start (exit 2)"
tg_check "with a message naming the file" grep -q 'missing.crt' "$TG_TMP/missing.log"

tg_done
