"""overload.py — load generators for tests/integration/overload.sh, loopback only.

  flood     closed loop: THREADS keep-alive clients per process x PROCS processes POST a
            decision request as fast as the daemon answers, for SECONDS.
  pace      open loop: one request every 1/RPS s (a pool of keep-alive workers), for SECONDS.
  probe     one request at a time every INTERVAL s (the victim tenant), latencies recorded.
  slowloris IDLE connections that never send a byte and TRICKLE connections that send a
            request one byte every INTERVAL s; reports which ones the server closed and when.

Each prints one JSON summary line on stdout. Every 429 must carry Retry-After, RateLimit and
RateLimit-Policy; every 503 Retry-After and a JSON error `overloaded`; any other status than
200/429/503 is listed under "bad". Bodies are checked for PERMIT only where the tenant was
meant to be refused (--no-permit).
"""

import argparse
import http.client
import json
import multiprocessing
import socket
import threading
import time

LOOPBACK = "127.0.0.1"
PERMIT_BODY = json.dumps({"surface": "example", "action": "noop", "actor": "load"}).encode()


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.status = {}
        self.bad = []
        self.lat_ms = []
        self.permits = 0

    def add(self, st, h, body, ms, args):
        problems = []
        if st == 429:
            for k in ("retry-after", "ratelimit", "ratelimit-policy"):
                if not h.get(k):
                    problems.append("429 without %s" % k)
        elif st == 503:
            if not h.get("retry-after"):
                problems.append("503 without Retry-After")
            try:
                if json.loads(body).get("error") != "overloaded":
                    problems.append("503 error is not overloaded: %r" % body[:120])
            except ValueError:
                problems.append("503 body is not JSON: %r" % body[:120])
        elif st == 200:
            if json.loads(body).get("decision") == "PERMIT":
                with self.lock:
                    self.permits += 1
        else:
            problems.append("status %d: %r" % (st, body[:160]))
        with self.lock:
            self.status[st] = self.status.get(st, 0) + 1
            self.lat_ms.append(ms)
            if problems and len(self.bad) < 20:
                self.bad.extend(problems)

    def summary(self):
        lat = sorted(self.lat_ms)

        def pct(p):
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 2) if lat else None
        return {"status": {str(k): v for k, v in sorted(self.status.items())},
                "n": len(lat), "permits": self.permits, "bad": self.bad[:20],
                "p50_ms": pct(0.50), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
                "max_ms": round(lat[-1], 2) if lat else None}


def one(conn, token, timeout):
    t0 = time.monotonic()
    conn.request("POST", "/v1/evaluate", body=PERMIT_BODY,
                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = conn.getresponse()
    body = r.read()
    ms = (time.monotonic() - t0) * 1000
    h = {k.lower(): v for k, v in r.getheaders()}
    if h.get("connection", "").lower() == "close":
        conn.close()
    return r.status, h, body, ms


def worker(port, token, deadline, tally, timeout, args, next_slot=None):
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    while time.monotonic() < deadline:
        if next_slot is not None:
            t = next_slot()
            if t is None:
                break
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        try:
            st, h, body, ms = one(conn, token, timeout)
            tally.add(st, h, body, ms, args)
        except (OSError, http.client.HTTPException) as e:
            with tally.lock:
                tally.status["error"] = tally.status.get("error", 0) + 1
                if len(tally.bad) < 20:
                    tally.bad.append("transport error: %r" % e)
            conn.close()
            conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    conn.close()


def flood_proc(a, q):
    tally = Tally()
    deadline = time.monotonic() + a.seconds
    ts = [threading.Thread(target=worker, args=(a.port, a.token, deadline, tally, a.timeout, a))
          for _ in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put((tally.status, tally.bad, tally.lat_ms, tally.permits))


def cmd_flood(a):
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=flood_proc, args=(a, q)) for _ in range(a.procs)]
    for p in ps:
        p.start()
    total = Tally()
    for _ in ps:
        st, bad, lat, permits = q.get(timeout=a.seconds + 60)
        for k, v in st.items():
            total.status[k] = total.status.get(k, 0) + v
        total.bad.extend(bad)
        total.lat_ms.extend(lat)
        total.permits += permits
    for p in ps:
        p.join()
    return total.summary()


def cmd_pace(a):
    tally = Tally()
    start = time.monotonic() + 0.1
    n_total = int(a.rps * a.seconds)
    lock = threading.Lock()
    counter = [0]

    def next_slot():
        with lock:
            i = counter[0]
            counter[0] += 1
        return start + i / a.rps if i < n_total else None

    deadline = start + a.seconds + 30
    tokens = a.token.split(",")
    ts = [threading.Thread(target=worker, args=(a.port, tokens[i % len(tokens)], deadline, tally,
                                                a.timeout, a, next_slot))
          for i in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    s = tally.summary()
    s["wall_s"] = round(time.monotonic() - start, 2)
    s["offered_rps"] = a.rps
    return s


def cmd_probe(a):
    tally = Tally()
    conn = http.client.HTTPConnection(LOOPBACK, a.port, timeout=a.timeout)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            st, h, body, ms = one(conn, a.token, a.timeout)
            tally.add(st, h, body, ms, a)
        except (OSError, http.client.HTTPException) as e:
            tally.status["error"] = tally.status.get("error", 0) + 1
            tally.bad.append("transport error: %r" % e)
            conn.close()
            conn = http.client.HTTPConnection(LOOPBACK, a.port, timeout=a.timeout)
        rest = a.interval - (time.monotonic() - t0)
        if rest > 0:
            time.sleep(rest)
    conn.close()
    return tally.summary()


def cmd_slowloris(a):
    req = (b"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-acme\r\n"
           b"Content-Type: application/json\r\nContent-Length: 64\r\n\r\n" + b" " * 64)
    socks = []
    refused = 0
    for i in range(a.idle + a.trickle):
        try:
            s = socket.create_connection((LOOPBACK, a.port), timeout=5)
            s.setblocking(False)
            socks.append([s, i >= a.idle, 0, None])  # sock, trickles, bytes sent, closed at
        except OSError:
            refused += 1
    t0 = time.monotonic()
    if a.ready_file:
        with open(a.ready_file, "w") as f:
            f.write("%d\n" % len(socks))
    end = t0 + a.seconds
    while time.monotonic() < end:
        for c in socks:
            s, trickles, sent, closed = c
            if closed is not None:
                continue
            try:
                d = s.recv(4096)
                if d == b"":
                    c[3] = time.monotonic() - t0
                    continue
                # A response before the request was complete would be a protocol error.
                c[3] = time.monotonic() - t0
                continue
            except BlockingIOError:
                pass
            except OSError:
                c[3] = time.monotonic() - t0
                continue
            if trickles and sent < len(req):
                try:
                    s.send(req[sent:sent + 1])
                    c[2] += 1
                except BlockingIOError:
                    pass
                except OSError:
                    c[3] = time.monotonic() - t0
        time.sleep(a.interval)
    idle = [c for c in socks if not c[1]]
    trick = [c for c in socks if c[1]]
    out = {
        "opened": len(socks), "refused": refused,
        "idle_closed": sum(1 for c in idle if c[3] is not None),
        "idle_closed_first_s": round(min([c[3] for c in idle if c[3] is not None] or [-1]), 2),
        "idle_closed_last_s": round(max([c[3] for c in idle if c[3] is not None] or [-1]), 2),
        "trickle_open": sum(1 for c in trick if c[3] is None),
        "trickle_bytes": sum(c[2] for c in trick),
        "seconds": a.seconds,
    }
    for c in socks:
        c[0].close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["flood", "pace", "probe", "slowloris"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", default="tok-acme", help="bearer token(s), comma-separated")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rps", type=float, default=50.0)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--idle", type=int, default=150)
    ap.add_argument("--trickle", type=int, default=150)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--ready-file")
    a = ap.parse_args()
    fn = {"flood": cmd_flood, "pace": cmd_pace, "probe": cmd_probe,
          "slowloris": cmd_slowloris}[a.mode]
    print(json.dumps(fn(a), sort_keys=True))


if __name__ == "__main__":
    main()
