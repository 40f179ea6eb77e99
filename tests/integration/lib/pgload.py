"""pgload.py — the load of the multi-instance PostgreSQL tests (pg_instance*.sh, pg_db_outage.sh):
many requests at once through a thread pool (fire), and a background load that keeps sending
requests with fresh idempotency keys to several instances and logs every answer with its
times (the `load` command), so a test can line the answers up with what it did meanwhile
(killed an instance, stopped the database).

Requests go to 127.0.0.1 on a fresh connection each (tgclient.request): a connection the
daemon closed between two requests can never turn into a transport error here."""

import json
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import tgclient

# The test policy's PERMIT (tests/integration/data/daemon_policy.json, tg_req_json permit).
PERMIT = {"surface": "payments.charge", "action": "transfer_funds", "actor": "agent.billing",
          "context": {"amount": 2500, "currency": "USD"},
          "signals": {"riskScore": 0.12, "rsdSpike": False}}


def permit(**extra):
    """The PERMIT request with extra members (idempotency_key=..., nonce=..., amount in
    context via amount=...)."""
    req = json.loads(json.dumps(PERMIT))
    amount = extra.pop("amount", None)
    if amount is not None:
        req["context"]["amount"] = amount
    req.update(extra)
    return req


def one(port, method, path, body=None, token=None, headers=None, timeout=20.0):
    """One request; a transport error is status 0 with the error's text as the body."""
    h = dict(headers or {})
    if token:
        h.update(tgclient.bearer(token))
    try:
        return tgclient.request(port, method, path, body, h, timeout=timeout)
    except Exception as e:  # the caller counts and reports these
        return 0, {}, repr(e).encode()


def fire(jobs, workers=16):
    """Runs jobs, each (port, method, path, body, token), on a pool of workers; returns their
    (status, headers, body) in the order of jobs."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(one, *job) for job in jobs]
        return [f.result() for f in futs]


def error_code(body):
    try:
        return json.loads(body).get("error")
    except Exception:
        return None


def load(ports, token, prefix, out, stop, workers, timeout, path="/v1/evaluate"):
    """Until the file `stop` exists: every worker sends PERMITs with keys prefix-W-N to a
    random port of ports, one after the other, and appends one JSON line per answer to out:
    {"key", "port", "t0", "t1" (wall clock, seconds), "status", "error", "exec", "replayed",
    "body" (the body of a 2xx, for byte comparisons)}."""
    lock = threading.Lock()
    f = open(out, "w")
    rng = random.Random(os.getpid())

    def worker(w):
        n = 0
        while not os.path.exists(stop):
            key = "%s-%d-%d" % (prefix, w, n)
            n += 1
            port = rng.choice(ports)
            t0 = time.time()
            st, h, body = one(port, "POST", path, permit(idempotency_key=key), token,
                              timeout=timeout)
            t1 = time.time()
            rec = {"key": key, "port": port, "t0": t0, "t1": t1, "status": st,
                   "error": error_code(body) if st >= 400 else None,
                   "replayed": h.get("idempotent-replayed") == "true"}
            if 200 <= st < 300:
                try:
                    rec["exec"] = json.loads(body)["execution_id"]
                except Exception:
                    rec["exec"] = None
                rec["body"] = body.decode("utf-8", "replace")
            elif st == 0:
                rec["transport"] = body.decode("utf-8", "replace")[:200]
            with lock:
                f.write(json.dumps(rec) + "\n")
                f.flush()
            if st == 0:
                time.sleep(0.05)  # a dead instance refuses at once: do not spin on it

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    f.close()


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    # python3 pgload.py load PORTS(comma) TOKEN PREFIX OUT STOPFILE [WORKERS] [TIMEOUT]
    if len(sys.argv) < 7 or sys.argv[1] != "load":
        sys.exit("usage: pgload.py load PORT,PORT... TOKEN PREFIX OUT STOPFILE [WORKERS] [TIMEOUT]")
    load([int(p) for p in sys.argv[2].split(",")], sys.argv[3], sys.argv[4], sys.argv[5],
         sys.argv[6], int(sys.argv[7]) if len(sys.argv) > 7 else 4,
         float(sys.argv[8]) if len(sys.argv) > 8 else 20.0)
