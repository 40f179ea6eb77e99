#!/usr/bin/env bash
# http_framing.sh — request-line and header framing that libmicrohttpd 0.9.75 lets through,
# sent as raw bytes over loopback sockets (curl would normalize them): each must be a 400
# with the JSON error body, and none may reach a decision. Then the absolute form of the
# request target (RFC 9112 §3.2.2), which must be routed by its path.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args framing
tg_start framing -- "${TG_STD_ARGS[@]}" --log-level warn

python3 - "${TG_PORTS[framing]}" >"$TG_TMP/framing.out" 2>&1 <<'PY'
import json, socket, sys, tgclient

port = int(sys.argv[1])
BODY = b'{"surface":"example","action":"noop","actor":"someone"}'
fails = []


def exchange(data):
    """Sends data on a fresh connection and reads until the server closes (10 s at most)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                return out
            out += c
    finally:
        s.close()


def parse(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ")[1]) if lines[0].startswith(b"HTTP/1.") else 0
    h = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        h[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return status, h, body[: int(h.get("content-length", "0") or 0)]


def request(line, headers, body=BODY, chunked=False):
    """A POST with acme's token and a body that PERMITs, unless the test changes it; framed
    by Content-Length, or as one chunk."""
    hs = [b"Authorization: Bearer tok-acme", b"Content-Type: application/json", b"Connection: close"]
    if chunked:
        hs.append(b"Transfer-Encoding: chunked")
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    else:
        hs.append(b"Content-Length: %d" % len(body))
    return line + b"\r\n" + b"".join(x + b"\r\n" for x in headers + hs) + b"\r\n" + body


def decisions():
    """Decisions made and ledger records written so far, from /metrics."""
    st, _, b = tgclient.request(port, "GET", "/metrics")
    assert st == 200, st
    n = rec = 0
    for ln in b.decode().splitlines():
        if ln.startswith("trigguard_decisions_total{"):
            n += int(float(ln.rsplit(" ", 1)[1]))
        elif ln.startswith("trigguard_ledger_records_total "):
            rec = int(ln.split()[1])
    return n, rec


def refused(label, data, word):
    raw = exchange(data)
    st, h, b = parse(raw)
    try:
        j = json.loads(b)
    except ValueError:
        j = None
    ok = (st == 400 and h.get("content-type", "").startswith("application/json")
          and isinstance(j, dict) and j.get("error") == "invalid_request"
          and word in j.get("message", "") and j.get("request_id")
          and j.get("request_id") == h.get("x-request-id")
          # One answer, and the connection ends with it: what follows a request whose
          # framing is in doubt is never read as another request.
          and raw.count(b"HTTP/1.1 ") == 1 and h.get("connection") == "close")
    if ok:
        print("ok   %-44s 400 %s" % (label, j["message"]))
    else:
        fails.append("%s: want 400 invalid_request mentioning %r, got %d %r" % (label, word, st, b[:300]))


def permitted(label, data, check=None):
    st, h, b = parse(exchange(data))
    try:
        j = json.loads(b)
    except ValueError:
        j = None
    if st == 200 and isinstance(j, dict) and j.get("decision") == "PERMIT" and (check is None or check(j)):
        print("ok   %-44s 200 PERMIT" % label)
    else:
        fails.append("%s: want 200 PERMIT, got %d %r" % (label, st, b[:300]))


EV = b"POST /v1/evaluate HTTP/1.1"
HOST = [b"Host: 127.0.0.1"]

# The controls: the same requests without their defect are decided.
permitted("control: a plain request", request(EV, HOST))
permitted("control: a chunked request", request(EV, HOST, chunked=True))
permitted("control: X-Note: a", request(EV, HOST + [b"X-Note: a"]))
permitted("control: no blank, trailing blanks, empty values",
          request(EV, HOST + [b"X-A:a", b"X-B: b \t", b"X-C:", b"X-D:   "]))
permitted("control: two spaces after the method", request(b"POST  /v1/evaluate HTTP/1.1", HOST))
permitted("control: HTTP/1.0 without Host", request(b"POST /v1/evaluate HTTP/1.0", []))

before = decisions()
# RFC 9112 §5.1: no whitespace between a field name and its colon. libmicrohttpd hands over
# "Transfer-Encoding " (with the space), so without a token check the two-framings rule
# never saw this Transfer-Encoding beside the Content-Length.
refused("Transfer-Encoding<SP>: chunked + Content-Length",
        request(EV, HOST + [b"Transfer-Encoding : chunked"], b"4\r\nabcd\r\n0\r\n\r\n"), "token")
refused("Content-Length<SP>: beside Content-Length",
        request(EV, HOST + [b"Content-Length : 4"]), "token")
refused("whitespace before the colon of any header", request(EV, HOST + [b"X-Note : a"]), "token")
refused("tab before the colon", request(EV, HOST + [b"X-Note\t: a"]), "token")
refused("empty header name first", request(EV, [b": a"] + HOST), "empty name")
# libmicrohttpd takes ": a" after another header for the end of the headers and reads what
# follows as the next request: Authorization went missing from this one (a 401 before).
refused("empty header name after another", request(EV, HOST + [b": a"]), "empty name")
refused("a colon alone", request(EV, HOST + [b":"]), "empty name")
refused("header name with a non-token character", request(EV, HOST + [b"X(Note): a"]), "token")
refused("header name with a control byte", request(EV, HOST + [b"X-\x01Note: a"]), "token")
# A raw NUL in the target: libmicrohttpd ends every string it hands over at the NUL, so
# this was decided as /v1/evaluate.
refused("raw NUL in the path", request(b"POST /v1/evaluate\x00.json HTTP/1.1", HOST), "NUL")
refused("raw NUL at the end of the path", request(b"POST /v1/evaluate\x00 HTTP/1.1", HOST), "NUL")
refused("raw NUL in the query", request(b"POST /v1/evaluate?explain=1\x00x HTTP/1.1", HOST), "NUL")
refused("raw TAB in the path", request(b"POST /v1/eval\tuate HTTP/1.1", HOST), "control")
refused("raw CR in the path", request(b"POST /v1/evaluate\r.json HTTP/1.1", HOST), "control")
refused("raw DEL in the query", request(b"POST /v1/evaluate?x=\x7f HTTP/1.1", HOST), "control")
# libmicrohttpd ends a header value at a raw NUL: this token was read as "tok-acme".
refused("raw NUL inside the Authorization value",
        request(EV, HOST).replace(b"Bearer tok-acme", b"Bearer tok-acme\x00junk"), "NUL")
refused("raw NUL at the end of a header value", request(EV, HOST + [b"X-Note: a\x00"]), "NUL")
refused("a header line ending in a bare LF", request(EV, HOST + [b"X-Note: a\nX-Other: b"]), "bare LF")
refused("a header line folded onto the next (obs-fold)",
        request(EV, HOST + [b"X-Note: a\r\n b"]), "folded")
# RFC 9110 §7.2: several Host lines are a 400.
refused("two Host headers", request(EV, HOST + [b"Host: evil.example"]), "Host")
refused("two Host headers, same value", request(EV, HOST + HOST), "Host")
refused("absolute form with userinfo", request(b"POST http://u@h/v1/evaluate HTTP/1.1", HOST), "absolute")
refused("absolute form without a host", request(b"POST http:///v1/evaluate HTTP/1.1", HOST), "absolute")
refused("absolute form with '%' in the host",
        request(b"POST http://h%2Fv1/evaluate HTTP/1.1", HOST), "absolute")
after = decisions()
if after != before:
    fails.append("refused requests reached a decision: (decisions, ledger records) %r -> %r"
                 % (before, after))
else:
    print("ok   no refusal reached a decision or the ledger %r" % (after,))

# RFC 9112 §3.2.2: the absolute form is routed by its path, query handling unchanged.
permitted("absolute form http://host/v1/evaluate",
          request(b"POST http://127.0.0.1/v1/evaluate HTTP/1.1", HOST),
          lambda j: "trace" not in j)
permitted("absolute form, scheme in capitals, https",
          request(b"POST HTTPS://other.example:8443/v1/evaluate HTTP/1.1", HOST))
permitted("absolute form with ?explain=1", request(b"POST http://h/v1/evaluate?explain=1 HTTP/1.1", HOST),
          lambda j: "trace" in j)
st, h, b = parse(exchange(b"GET http://h/healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
if st != 200:
    fails.append("GET http://h/healthz: %d %r" % (st, b[:200]))
st, h, b = parse(exchange(b"GET http://h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
if st != 404 or json.loads(b).get("error") != "not_found":
    fails.append("GET http://h (the path /): want 404 not_found, got %d %r" % (st, b[:200]))
st, h, b = parse(exchange(request(b"POST http://h/v1/evaluate HTTP/1.1", HOST)
                          .replace(b"Authorization: Bearer tok-acme\r\n", b"")))
if st != 401:
    fails.append("absolute form without a token: want 401 from /v1/evaluate, got %d %r" % (st, b[:200]))
print("ok   absolute forms: /healthz 200, the bare host 404, no token 401")
for f in fails:
    print("FAIL " + f)
sys.exit(1 if fails else 0)
PY
rc=$?
sed 's/^/    /' "$TG_TMP/framing.out"
tg_eq "$rc" 0 "raw framing cases: each refused with a JSON 400 and no decision, absolute form routed"
tg_req GET /healthz
tg_expect_status 200 "still serving"
tg_stop framing
tg_done
