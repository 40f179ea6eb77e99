"""failover_load.py — the load client of tests/integration/pg_failover.sh, loopback only.

THREADS keep-alive clients POST /v1/evaluate (the test policy's PERMIT request, each with an
idempotency key of its own: PREFIX-thread-n) to one or more daemons, round robin per thread,
until the file STOP exists. Every acknowledged answer (a 2xx whose body carries a receipt)
is appended at once to ACKS as one line "executionId<TAB>key<TAB>seconds since start", so
the file is complete whatever happens to the daemon or the database; the test compares it
with tg_receipts on the promoted standby.

A 2xx without a receipt, or whose receipt.executionId differs from execution_id, is a fault
("bad"). A 503 must be the JSON error store_unavailable (others are "bad" too). A transport
error (connection refused, reset, timeout) is counted and the client reconnects.

At the end one JSON line goes to stdout: {"acks", "status": {code: n}, "errors":
{code: n}, "transport", "bad": [first few], "first_ack_after": {mark: seconds},
"window": {mark: {code: n}}}. Each MARK file named with --mark is created by the test at
some moment (the walreceiver stopped, the primary killed, the standby promoted):
first_ack_after is the time from its appearance to the first ack after it, window the
statuses answered from then until the next mark appeared (or the end).
"""

import argparse
import http.client
import json
import os
import threading
import time

LOOPBACK = "127.0.0.1"


def permit_body(key):
    return json.dumps({
        "surface": "payments.charge", "action": "transfer_funds", "actor": "agent.billing",
        "context": {"amount": 2500, "currency": "USD"},
        "signals": {"riskScore": 0.12, "rsdSpike": False},
        "idempotency_key": key,
    }, separators=(",", ":")).encode()


class Tally:
    def __init__(self, acks_path):
        self.lock = threading.Lock()
        self.acks = 0
        self.status = {}
        self.errors = {}
        self.transport = 0
        self.bad = []
        self.ack_times = []
        self.events = []  # (seconds since start, status): every answer
        self.out = open(acks_path, "a", buffering=1)

    def ack(self, exec_id, key, t):
        with self.lock:
            self.out.write("%s\t%s\t%.3f\n" % (exec_id, key, t))
            self.out.flush()
            self.acks += 1
            self.ack_times.append(t)

    def count(self, st, t, err=None):
        with self.lock:
            self.events.append((t, st))
            self.status[str(st)] = self.status.get(str(st), 0) + 1
            if err is not None:
                self.errors[err] = self.errors.get(err, 0) + 1

    def fault(self, what):
        with self.lock:
            if len(self.bad) < 10:
                self.bad.append(what)

    def lost_link(self):
        with self.lock:
            self.transport += 1


def worker(tid, ports, args, tally, t0, stop):
    conns = {}
    n = 0
    while not stop.is_set():
        port = ports[n % len(ports)]
        n += 1
        key = "%s-%d-%d" % (args.prefix, tid, n)
        conn = conns.get(port)
        if conn is None:
            conn = conns[port] = http.client.HTTPConnection(LOOPBACK, port, timeout=args.timeout)
        try:
            conn.request("POST", "/v1/evaluate", body=permit_body(key), headers={
                "Content-Type": "application/json", "Authorization": "Bearer " + args.token})
            resp = conn.getresponse()
            data = resp.read()
            st = resp.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conns.pop(port, None)
            tally.lost_link()
            time.sleep(0.05)
            continue
        try:
            j = json.loads(data)
        except ValueError:
            j = None
        if 200 <= st < 300:
            r = j.get("receipt") if isinstance(j, dict) else None
            eid = r.get("executionId") if isinstance(r, dict) else None
            if not eid or eid != j.get("execution_id"):
                tally.count(st, time.monotonic() - t0, "no_receipt")
                tally.fault("%d without a matching receipt.executionId: %s" % (st, data[:200]))
                continue
            now = time.monotonic() - t0
            tally.ack(eid, key, now)
            tally.count(st, now)
        else:
            err = j.get("error") if isinstance(j, dict) else None
            tally.count(st, time.monotonic() - t0, err or "non-json")
            if st == 503 and err != "store_unavailable":
                tally.fault("503 with error %r: %s" % (err, data[:200]))
            elif st != 503:
                tally.fault("status %d: %s" % (st, data[:200]))
            time.sleep(0.02)  # the store is away: do not spin
    for conn in conns.values():
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True, help="comma-separated daemon ports")
    ap.add_argument("--token", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--acks", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--mark", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=15.0)
    args = ap.parse_args()
    ports = [int(p) for p in args.ports.split(",")]
    tally = Tally(args.acks)
    t0 = time.monotonic()
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(i, ports[i % len(ports):] + ports[:i % len(ports)],
                                                     args, tally, t0, stop))
               for i in range(args.threads)]
    for t in threads:
        t.start()
    marks = {}
    while not os.path.exists(args.stop):
        for m in args.mark:
            if m not in marks and os.path.exists(m):
                marks[m] = time.monotonic() - t0
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join()
    tally.out.close()
    first, windows = {}, {}
    order = sorted(marks.items(), key=lambda kv: kv[1])
    for i, (m, at) in enumerate(order):
        end = order[i + 1][1] if i + 1 < len(order) else float("inf")
        after = [t for t in tally.ack_times if t >= at]
        first[os.path.basename(m)] = round(min(after) - at, 3) if after else None
        w = {}
        for t, st in tally.events:
            if at <= t < end:
                w[str(st)] = w.get(str(st), 0) + 1
        windows[os.path.basename(m)] = w
    print(json.dumps({"acks": tally.acks, "status": tally.status, "errors": tally.errors,
                      "transport": tally.transport, "bad": tally.bad,
                      "first_ack_after": first, "window": windows}, sort_keys=True))


if __name__ == "__main__":
    main()
