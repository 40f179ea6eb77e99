#!/usr/bin/env python3
"""replay.py — send the hostile corpus (tests/hostile/*.json) to a live trigguard daemon
over raw loopback sockets and check every answer.

Each case file is one JSON object:
  description   what the case is
  method, path, headers, body          a request built by this script, or
  raw                                  the exact bytes to send (several requests = pipelining)
  content_length (optional)            null = send no Content-Length; else its value
  expect        {"status", "error", "limit"?, "message_contains"?} or a list of them (one per
                pipelined response), or {"closed": true} (the server drops the connection)

`path`, header values, `body` and `raw` are "parts": a string (sent as UTF-8), a list of
parts, {"hex": "c0af"} (raw bytes), or {"repeat": PART, "times": N}. "error": null marks
answers libmicrohttpd writes itself (an HTML body; only the status is checked). The
placeholder {{ACME_EXEC_ID}} is replaced by the executionId of a receipt tenant acme owns.
Built requests get Host and Connection: close unless they set them, and a Content-Length
when they have a body.

For every response: the exact status; for JSON errors the error code, a non-empty message,
request_id equal to X-Request-Id, the named limit; never a 5xx (except a 505 that
libmicrohttpd itself sends for an HTTP/2+ request line, which a case must expect
explicitly), never a PERMIT. Between
rounds the daemon must still answer /healthz. With --pid, VmRSS is sampled after the
warm-up rounds and after the last round. Exit status 0 only when every check passed.

  replay.py --port N [--pid P] [--rounds 20] [--warmup 5] [--rss-limit-kib K] [CASE...]
"""

import argparse
import glob
import http.client
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOOPBACK = "127.0.0.1"

# A DENY under tests/integration/data/daemon_policy.json (amount over the limit with risk):
# gives tenant acme a receipt whose id the other-tenant cases try to read.
SETUP_DENY = {"surface": "payments.charge", "action": "transfer_funds", "actor": "agent.billing",
              "context": {"amount": 20000, "currency": "USD"}, "signals": {"riskScore": 0.2}}


def parts(p, subst):
    if isinstance(p, str):
        for k, v in subst.items():
            p = p.replace(k, v)
        return p.encode("utf-8")
    if isinstance(p, list):
        return b"".join(parts(x, subst) for x in p)
    if isinstance(p, dict) and "hex" in p:
        return bytes.fromhex(p["hex"])
    if isinstance(p, dict) and "repeat" in p:
        return parts(p["repeat"], subst) * int(p["times"])
    raise ValueError("bad part %r" % (p,))


def build(case, subst):
    if "raw" in case:
        return parts(case["raw"], subst)
    method = case.get("method", "POST")
    path = parts(case.get("path", "/v1/evaluate"), subst)
    headers = [(parts(k, subst), parts(v, subst)) for k, v in case.get("headers", [])]
    names = {k.lower() for k, _ in headers}
    body = parts(case["body"], subst) if "body" in case else None
    out = [method.encode() + b" " + path + b" HTTP/1.1\r\n"]
    if b"host" not in names:
        out.append(b"Host: 127.0.0.1\r\n")
    for k, v in headers:
        out.append(k + b": " + v + b"\r\n")
    if b"connection" not in names:
        out.append(b"Connection: close\r\n")
    if "content_length" in case:
        if case["content_length"] is not None:
            out.append(b"Content-Length: %s\r\n" % str(case["content_length"]).encode())
    elif body is not None and b"content-length" not in names:
        out.append(b"Content-Length: %d\r\n" % len(body))
    out.append(b"\r\n")
    if body:
        out.append(body)
    return b"".join(out)


def exchange(port, data, timeout):
    """Sends data, reads until the server closes. Returns (bytes, send_error or None)."""
    s = socket.create_connection((LOOPBACK, port), timeout=timeout)
    err = None
    try:
        try:
            s.sendall(data)
        except OSError as e:  # the server answered early and closed: read what it sent
            err = e
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            chunks.append(c)
        return b"".join(chunks), err
    finally:
        s.close()


def parse_responses(buf):
    """Splits a byte stream into [(status, headers dict, body)]; stops at anything odd."""
    out = []
    while buf:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        try:
            version, status = lines[0].split(b" ", 2)[:2]
            status = int(status)
        except ValueError:
            break
        if not version.startswith(b"HTTP/1."):
            break
        h = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(b":")
            h[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        n = int(h.get("content-length", "0") or 0)
        out.append((status, h, rest[:n]))
        buf = rest[n:]
    return out


def check_response(name, idx, resp, exp, fails):
    status, h, body = resp
    where = "%s (response %d)" % (name, idx + 1)
    # The one 5xx allowed: libmicrohttpd answers an HTTP/2+ request line with 505 itself
    # before trigguard sees the request, and a case must say so explicitly.
    if status >= 500 and not (status == 505 == exp["status"] and exp.get("error") is None):
        fails.append("%s: 5xx answer %d: %r" % (where, status, body[:200]))
    if b'"PERMIT"' in body:
        fails.append("%s: a PERMIT in the answer: %r" % (where, body[:200]))
    if status != exp["status"]:
        fails.append("%s: status %d, want %d: %r" % (where, status, exp["status"], body[:300]))
        return
    if exp.get("error") is None:
        return  # libmicrohttpd's own answer (HTML)
    if not h.get("content-type", "").startswith("application/json"):
        fails.append("%s: content-type %r is not JSON" % (where, h.get("content-type")))
        return
    try:
        j = json.loads(body)
    except ValueError:
        fails.append("%s: body is not JSON: %r" % (where, body[:300]))
        return
    if not isinstance(j, dict) or j.get("error") != exp["error"]:
        fails.append("%s: error %r, want %r: %r" % (where, j.get("error") if isinstance(j, dict)
                                                    else j, exp["error"], body[:300]))
        return
    msg = j.get("message")
    if not isinstance(msg, str) or not msg:
        fails.append("%s: no message: %r" % (where, body[:300]))
    if not j.get("request_id") or j.get("request_id") != h.get("x-request-id"):
        fails.append("%s: request_id %r differs from X-Request-Id %r"
                     % (where, j.get("request_id"), h.get("x-request-id")))
    if "limit" in exp and (j.get("limit") != exp["limit"] or not isinstance(j.get("max"), int)):
        fails.append("%s: limit %r (max %r), want %r: %r"
                     % (where, j.get("limit"), j.get("max"), exp["limit"], body[:300]))
    if "message_contains" in exp and exp["message_contains"] not in (msg or ""):
        fails.append("%s: message %r does not mention %r" % (where, msg, exp["message_contains"]))


def run_case(port, name, case, subst, timeout, fails):
    data = build(case, subst)
    got, send_err = exchange(port, data, timeout)
    exp = case["expect"]
    if isinstance(exp, dict) and exp.get("closed"):
        # Dropped without an answer, or answered with a 4xx: never a 2xx/5xx.
        for st, _, body in parse_responses(got):
            if not 400 <= st < 500:
                fails.append("%s: want the connection dropped or a 4xx, got %d: %r"
                             % (name, st, body[:200]))
        return
    exps = exp if isinstance(exp, list) else [exp]
    resps = parse_responses(got)
    if len(resps) < len(exps):
        fails.append("%s: %d response(s), want %d (send error %r); got %r"
                     % (name, len(resps), len(exps), send_err, got[:300]))
    for i, (resp, e) in enumerate(zip(resps, exps)):
        check_response(name, i, resp, e, fails)
    if len(exps) > 1 or exps[0].get("error") is not None:
        # Anything after the expected answers must not be a success of some smuggled request.
        for resp in resps[len(exps):]:
            fails.append("%s: unexpected extra response %d: %r" % (name, resp[0], resp[2][:200]))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def healthy(port):
    try:
        conn = http.client.HTTPConnection(LOOPBACK, port, timeout=10)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def setup_receipt(port):
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=20)
    conn.request("POST", "/v1/evaluate", body=json.dumps(SETUP_DENY),
                 headers={"Authorization": "Bearer tok-acme", "Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    j = json.loads(body)
    if r.status != 200 or j.get("decision") != "DENY":
        raise RuntimeError("setup DENY failed: %d %r" % (r.status, body[:200]))
    return j["execution_id"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0, help="rounds before the first RSS sample")
    ap.add_argument("--rss-limit-kib", type=int, default=0,
                    help="fail when VmRSS grows more than this after the warm-up")
    ap.add_argument("--timeout", type=float, default=15.0)
    ap.add_argument("--min-cases", type=int, default=60)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()

    files = a.cases or sorted(glob.glob(os.path.join(HERE, "*.json")))
    corpus = []
    for path in files:
        with open(path) as f:
            corpus.append((os.path.basename(path), json.load(f)))
    if not a.cases and len(corpus) < a.min_cases:
        sys.exit("corpus has %d cases, want at least %d" % (len(corpus), a.min_cases))
    subst = {"{{ACME_EXEC_ID}}": setup_receipt(a.port)}

    fails = []
    rss0 = None
    t0 = time.monotonic()
    for rnd in range(max(a.rounds, 1)):
        rfails = []
        for name, case in corpus:
            try:
                run_case(a.port, name, case, subst, a.timeout, rfails)
            except OSError as e:
                rfails.append("%s: %r" % (name, e))
        if a.pid is not None and not os.path.exists("/proc/%d" % a.pid):
            rfails.append("round %d: the daemon (pid %d) is gone" % (rnd + 1, a.pid))
        elif not healthy(a.port):
            rfails.append("round %d: /healthz does not answer 200" % (rnd + 1))
        if rnd == 0 or rfails:
            fails.extend("round %d: %s" % (rnd + 1, f) for f in rfails)
        if rfails:
            break  # the first failing round says it all
        if a.pid is not None and rnd + 1 == a.warmup:
            rss0 = rss_kib(a.pid)
    elapsed = time.monotonic() - t0
    print("replayed %d cases x %d rounds in %.1f s (%.1f ms per request)"
          % (len(corpus), a.rounds, elapsed, 1000 * elapsed / max(1, len(corpus) * a.rounds)))
    if a.pid is not None and not fails and os.path.exists("/proc/%d" % a.pid):
        rss1 = rss_kib(a.pid)
        if rss0 is None:
            rss0 = rss1
        print("VmRSS after %d warm-up rounds: %d KiB; after %d rounds: %d KiB; growth %d KiB "
              "(limit %d KiB)" % (a.warmup, rss0, a.rounds, rss1, rss1 - rss0, a.rss_limit_kib))
        if a.rss_limit_kib and rss1 - rss0 > a.rss_limit_kib:
            fails.append("VmRSS grew %d KiB over %d rounds after warm-up (limit %d KiB)"
                         % (rss1 - rss0, a.rounds - a.warmup, a.rss_limit_kib))
    for f in fails:
        print("FAIL: " + f)
    print("%d cases, %d failures" % (len(corpus), len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
