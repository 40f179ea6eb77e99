"""crash.py — the SIGKILL campaign of tests/integration/ledger_crash.sh (issue 5).

Runs the real `trigguard serve` under concurrent keep-alive load on 127.0.0.1, kills it
with SIGKILL at seeded random moments, restarts it on the same ledger each time and checks
what SPEC §9 and docs/LEDGER.md promise for a process crash:

  1. every request answered (200/403) before a kill has its record in the ledger, with the
     receipt bytes the caller got, in the valid prefix of the ledger as the kill left it;
  2. `trigguard ledger verify DIR --keys keys.json` passes once the daemon restarted (a torn
     tail is dropped by the restart and nothing else is);
  3. an idempotent retry of every acknowledged request returns the byte-identical response
     with `Idempotent-Replayed: true`;
  4. the nonce of an acknowledged request is refused (409 replay_detected);
  5. nothing lost, nothing duplicated: each acknowledged executionId, idempotency key and
     nonce appears in exactly one record, and every record belongs to a request we sent.

A request in flight at a kill (no response) may or may not be in the ledger; when it is,
its retry must replay that record, when it is not, its retry creates exactly one record.
Also: GET /v1/receipts/{id} serves the answered receipt bytes after a restart; a restart
drops a torn tail (left by the kill, or appended by hand as the cut-short next record)
and nothing else, and says so in its log; a restart killed during recovery does no harm;
a clean SIGTERM at the end exits 0 and the daemon logs carry no sanitizer report.

Usage: crash.py --bin TG_BIN --policy P --key K --dir TMPDIR --durability fsync|batch
                --rounds N --seed S [--segment-bytes N] [--threads N] [--budget SECONDS]
Exit status 0 when every check passed, 1 on any violation (each printed), 2 on a setup
error. The daemon is always stopped before exit.
"""

import argparse
import ctypes
import hashlib
import http.client
import json
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time

LOOPBACK = "127.0.0.1"
TENANT = "crash"
TOKEN = "tok-crash-campaign"
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
# Load per thread: keep sending until the kill, but at most one request per PACE_S and
# MAX_PER_THREAD per round, so the ledger (and every check over it) stays small on a fast
# machine while each thread still has a request in flight most of the time under ASan.
PACE_S = 0.02
MAX_PER_THREAD = 100
SAMPLE_OLD = 40             # earlier acknowledged requests re-checked after each restart
START_TIMEOUT = 30.0
MIN_ROUNDS = 3              # kills done whatever the budget says


class Setup(Exception):
    """The campaign could not run (not a finding about the daemon)."""


class Campaign:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.t0 = time.monotonic()
        self.proc = None
        self.port = None
        self.instance = 0
        self.ledger = os.path.join(a.dir, "ledger")
        self.keys_path = os.path.join(a.dir, "keys.json")
        self.pidfile = os.path.join(a.dir, "daemon.pid")
        self.violations = []
        self.acked = {}        # idempotency key -> Req (answered, or retried after a kill)
        self.order = []        # acknowledged keys in the order they were acknowledged
        self.unsent = []       # connection refused: never reached the daemon
        self.sent_keys = set()
        self.probe_keys = set()
        self.stats = dict(acked=0, inflight=0, recovered=0, redone=0, unsent=0, torn=0,
                          torn_made=0, replays=0, nonce_probes=0, receipt_reads=0, permit=0,
                          deny=0, silence=0, killed_in_recovery=0)
        self.lock = threading.Lock()
        self.phases = {}       # phase name -> seconds spent (printed at the end)
        self.phase_t = time.monotonic()

    # ---- reporting ---------------------------------------------------------------

    def log(self, msg):
        print("[ledger_crash:%s] %6.1fs %s" % (self.a.durability, time.monotonic() - self.t0,
                                              msg), flush=True)

    def bad(self, msg):
        self.violations.append(msg)

    def checkpoint(self, stage):
        """Stops the campaign at the first stage that found violations: later stages would
        only repeat them."""
        if self.violations:
            print("[ledger_crash:%s] FAIL: %d violation(s) %s (seed %d):"
                  % (self.a.durability, len(self.violations), stage, self.a.seed),
                  file=sys.stderr, flush=True)
            for v in self.violations[:25]:
                print("  - " + v, file=sys.stderr)
            if len(self.violations) > 25:
                print("  ... and %d more" % (len(self.violations) - 25), file=sys.stderr)
            self.tail_log()
            raise SystemExit(1)

    def tail_log(self):
        path = self.logpath(self.instance)
        try:
            with open(path, errors="replace") as f:
                lines = f.readlines()[-15:]
            print("  daemon log (%s), last lines:" % path, file=sys.stderr)
            for line in lines:
                print("    " + line.rstrip()[:400], file=sys.stderr)
        except OSError:
            pass

    def phase(self, name):
        """Charges the time since the previous call to phase `name`."""
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.phase_t
        self.phase_t = now

    def budget_left(self):
        return self.a.budget - (time.monotonic() - self.t0)

    # ---- the daemon --------------------------------------------------------------

    def logpath(self, n):
        return os.path.join(self.a.dir, "daemon-%s-%d.log" % (self.a.durability, n))

    def spawn(self):
        """Starts a daemon on the ledger; returns once the port file exists (or the
        process died, which the caller sees in proc.poll())."""
        self.instance += 1
        pf = os.path.join(self.a.dir, "port")
        try:
            os.unlink(pf)
        except FileNotFoundError:
            pass
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TRIGGUARD_", "RATE_LIMIT_", "BULKHEAD_"))
               and k not in ("PORT", "TG_DECIDE_PORT") and "proxy" not in k.lower()}
        env["TRIGGUARD_API_KEYS"] = TENANT + ":" + TOKEN
        args = [self.a.bin, "serve", "--port", "0", "--port-file", pf,
                "--ledger", self.ledger, "--key", self.a.key, "--policy", self.a.policy,
                "--durability", self.a.durability, "--log-level", "warn",
                "--threads", "2"]
        if self.a.segment_bytes:
            args += ["--segment-bytes", str(self.a.segment_bytes)]
        log = open(self.logpath(self.instance), "ab")
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        with open(self.pidfile, "w") as f:
            f.write("%d\n" % self.proc.pid)
        return pf

    def start(self):
        pf = self.spawn()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                self.bad("daemon instance %d exited with %s while starting on the crashed "
                         "ledger" % (self.instance, self.proc.returncode))
                self.checkpoint("at restart")
            try:
                with open(pf) as f:
                    txt = f.read().strip()
                if txt:
                    self.port = int(txt)
                    break
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise Setup("daemon wrote no port file in %.0f s" % START_TIMEOUT)
            time.sleep(0.02)
        while True:
            try:
                st, _, _ = self.request("GET", "/readyz", None, {})
                if st == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.bad("daemon instance %d did not become ready" % self.instance)
                self.checkpoint("at restart")
            time.sleep(0.02)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(timeout=30)
        if rc != -signal.SIGKILL:
            self.bad("daemon instance %d ended with %s before the SIGKILL" % (self.instance, rc))
        self.check_sanitizers()

    def stop(self):
        """Clean shutdown (SIGTERM) at the end: must exit 0 and be sanitizer-clean."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "a hang (no exit 30 s after SIGTERM)"
        if rc != 0:
            self.bad("daemon instance %d: exit status %s after SIGTERM" % (self.instance, rc))
        self.check_sanitizers()

    def check_sanitizers(self):
        try:
            with open(self.logpath(self.instance), errors="replace") as f:
                text = f.read()
        except OSError:
            return
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if marker in text:
                i = text.index(marker)
                self.bad("daemon instance %d: sanitizer report: %s"
                         % (self.instance, text[i:i + 600]))

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    # ---- HTTP ----------------------------------------------------------------------

    def request(self, method, path, body, headers, conn=None):
        own = conn is None
        if own:
            conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            if own:
                conn.close()

    # ---- requests ------------------------------------------------------------------

    def new_req(self, rng, rnd, tid, i):
        """A fresh request: unique idempotency key and nonce, PERMIT/DENY/SILENCE mixed,
        on /v1/evaluate (always 200) or /execute (403 unless PERMIT)."""
        kind = rng.choices(("permit", "deny", "silence"), (5, 4, 1))[0]
        amount = rng.randint(1, 10000) if kind == "permit" else rng.randint(10001, 10 ** 6)
        ctx = {"amount": amount, "currency": "USD"}
        if kind == "silence":
            del ctx["amount"]  # required context missing: the kernel stays silent
        body = {"surface": "payments.charge", "action": "transfer_funds",
                "actor": "agent.billing", "context": ctx,
                "signals": {"riskScore": 0.05 if kind == "permit" else 0.2},
                "idempotency_key": "%s-r%d-t%d-%d-%08x" % (self.a.durability, rnd, tid, i,
                                                          rng.getrandbits(32)),
                "nonce": "n-%032x" % rng.getrandbits(128)}
        path = "/execute" if rng.random() < 0.3 else "/v1/evaluate"
        return Req(kind, path, body)

    # ---- load and kill -------------------------------------------------------------

    def worker(self, rnd, tid, rng, stop, out):
        conn = None
        i = 0
        next_at = time.monotonic()
        while not stop.is_set() and i < MAX_PER_THREAD:
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            next_at = max(next_at + PACE_S, time.monotonic())
            req = self.new_req(rng, rnd, tid, i)
            i += 1
            with self.lock:
                self.sent_keys.add(req.key)
            if conn is None:
                conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=30)
            try:
                st, h, data = self.request("POST", req.path, req.raw, AUTH, conn)
            except ConnectionRefusedError:
                out["unsent"].append(req)  # no connection: the daemon never saw it
                conn.close()
                conn = None
                time.sleep(0.005)
                continue
            except (OSError, http.client.HTTPException) as e:
                req.failed_at = time.monotonic()
                req.error = "%s: %s" % (type(e).__name__, e)
                out["inflight"].append(req)
                conn.close()
                conn = None
                continue
            req.answer(st, h, data)
            out["acked"].append(req)
        if conn is not None:
            conn.close()

    def load_and_kill(self, rnd):
        stop = threading.Event()
        outs, threads = [], []
        for tid in range(self.a.threads):
            out = {"acked": [], "inflight": [], "unsent": []}
            outs.append(out)
            rng = random.Random(self.rng.getrandbits(64))
            t = threading.Thread(target=self.worker, args=(rnd, tid, rng, stop, out),
                                 daemon=True)
            threads.append(t)
        delay = self.rng.uniform(0.2, 1.5)
        for t in threads:
            t.start()
        time.sleep(delay)
        kill_at = time.monotonic()
        self.kill()
        stop.set()
        for t in threads:
            t.join(timeout=40)
            if t.is_alive():
                raise Setup("a load thread hung after the kill")
        acked = [r for o in outs for r in o["acked"]]
        inflight = [r for o in outs for r in o["inflight"]]
        unsent = [r for o in outs for r in o["unsent"]]
        for r in inflight:
            if r.failed_at < kill_at:
                self.bad("%s failed while the daemon was alive (%s)" % (r.key, r.error))
        for r in acked:
            self.check_fresh_answer(r)
        self.unsent.extend(unsent)
        return delay, acked, inflight, unsent

    def check_fresh_answer(self, r):
        """A first answer: 200/403 per the path, the expected decision, never a replay."""
        want = {"permit": "PERMIT", "deny": "DENY", "silence": "SILENCE"}[r.kind]
        want_status = 200 if r.path == "/v1/evaluate" or r.kind == "permit" else 403
        if r.status != want_status or r.json is None or r.json.get("decision") != want:
            self.bad("%s %s: got %s %s, expected %d with decision %s"
                     % (r.path, r.key, r.status, r.data[:200], want_status, want))
            return False
        if r.headers.get("idempotent-replayed") is not None:
            self.bad("%s: a first request was answered as a replay" % r.key)
            return False
        self.stats[r.kind] += 1
        return True

    # ---- the ledger ------------------------------------------------------------------

    def verify(self, allow_torn, with_keys):
        args = [self.a.bin, "ledger", "verify", self.ledger, "--json"]
        if with_keys:
            args += ["--keys", self.keys_path]
        if allow_torn:
            args.append("--allow-torn")
        p = subprocess.run(args, capture_output=True, timeout=60)
        try:
            rep = json.loads(p.stdout)
        except ValueError:
            rep = None
        return p.returncode, rep, p.stdout.decode(errors="replace") + \
            p.stderr.decode(errors="replace")

    def dump(self):
        """The valid prefix of the ledger: a list of Rec (dump stops at the first fault)."""
        p = subprocess.run([self.a.bin, "ledger", "dump", self.ledger], capture_output=True,
                           timeout=60)
        recs = []
        for line in p.stdout.split(b"\n"):
            if line:
                recs.append(Rec(line))
        return recs, p.returncode, p.stderr.decode(errors="replace").strip()

    def index(self, recs, when):
        """Maps idempotency key -> record; flags duplicates and records nobody asked for."""
        by_key, by_exec, by_nonce = {}, {}, {}
        for rec in recs:
            if rec.key is None or rec.nonce is None or rec.exec_id is None:
                self.bad("%s: seq %d has no idempotency key, nonce or executionId: %s"
                         % (when, rec.seq, rec.line[:300]))
                continue
            for table, k, what in ((by_key, rec.key, "idempotency key"),
                                   (by_exec, rec.exec_id, "executionId"),
                                   (by_nonce, rec.nonce, "nonce")):
                if k in table:
                    self.bad("%s: DUPLICATE: %s %s in seq %d and seq %d"
                             % (when, what, k, table[k].seq, rec.seq))
                table[k] = rec
            if rec.key not in self.sent_keys:
                self.bad("%s: seq %d carries idempotency key %s that no load request used%s"
                         % (when, rec.seq, rec.key,
                            " (a refused nonce probe wrote a record)"
                            if rec.key in self.probe_keys else ""))
            if rec.tenant != TENANT:
                self.bad("%s: seq %d has tenant %r" % (when, rec.seq, rec.tenant))
        return by_key

    def check_acked_in(self, by_key, reqs, when):
        """Check 1 and 5 for acknowledged requests: exactly the record the caller was told."""
        for r in reqs:
            rec = by_key.get(r.key)
            if rec is None:
                self.bad("%s: LOST: %s was answered %d (%s) but is not in the ledger"
                         % (when, r.key, r.status, r.exec_id))
                continue
            problem = rec.matches(r)
            if problem:
                self.bad("%s: %s: ledger seq %d differs from the answer: %s"
                         % (when, r.key, rec.seq, problem))

    # ---- retries and probes -------------------------------------------------------

    def parallel(self, items, fn, nthreads=4):
        """Runs fn(conn, item) over items on a few keep-alive connections."""
        items = list(items)
        errors = []

        def run(part):
            conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=30)
            try:
                for it in part:
                    try:
                        fn(conn, it)
                    except Exception as e:  # noqa: BLE001 - any failure is a finding
                        errors.append("%s: %s" % (type(e).__name__, e))
                        conn.close()
                        conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=30)
            finally:
                conn.close()
        ts = [threading.Thread(target=run, args=(items[i::nthreads],), daemon=True)
              for i in range(nthreads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=120)
        if errors:
            self.bad("%d request(s) of a check got no usable response, e.g. %s"
                     % (len(errors), errors[0]))

    def retry_acked(self, conn, r):
        """Check 3: same body, same key -> the stored response, byte for byte."""
        st, h, data = self.request("POST", r.path, r.raw, AUTH, conn)
        with self.lock:
            self.stats["replays"] += 1
        if st != r.status or data != r.data or h.get("idempotent-replayed") != "true":
            self.bad("NOT REPLAYED: %s: retry gave %d (Idempotent-Replayed: %s), %d bytes, "
                     "first answer %d, %d bytes; first differing byte %s"
                     % (r.key, st, h.get("idempotent-replayed"), len(data), r.status,
                        len(r.data), _first_diff(r.data, data)))

    def fetch_receipt(self, conn, r):
        """The receipt index is rebuilt from the ledger: GET /v1/receipts/{id} serves the
        receipt bytes the caller got."""
        st, h, data = self.request("GET", "/v1/receipts/" + r.exec_id, None, AUTH, conn)
        with self.lock:
            self.stats["receipt_reads"] += 1
        if st != 200 or data != r.receipt_raw():
            self.bad("GET /v1/receipts/%s (%s): got %d, %d bytes (%s)"
                     % (r.exec_id, r.key, st, len(data),
                        "differs from the receipt answered" if st == 200 else data[:200]))

    def probe_nonce(self, conn, r):
        """Check 4: the nonce of an acknowledged request, under a new idempotency key (or
        none), is refused."""
        body = dict(r.body)
        if len(r.key) % 2:
            del body["idempotency_key"]
        else:
            body["idempotency_key"] = "probe-" + r.key
            with self.lock:
                self.probe_keys.add(body["idempotency_key"])
        st, _, data = self.request("POST", r.path, _raw(body), AUTH, conn)
        with self.lock:
            self.stats["nonce_probes"] += 1
        try:
            err = json.loads(data).get("error")
        except (ValueError, AttributeError):
            err = None
        if st != 409 or err != "replay_detected":
            self.bad("NONCE ACCEPTED AGAIN: %s (nonce %s): got %d %s"
                     % (r.key, r.nonce, st, data[:200]))

    def settle_inflight(self, inflight, by_key, when):
        """An unanswered request: if its record survived, its retry must replay that
        record; otherwise the retry is a first answer and creates one record."""
        def one(conn, r):
            rec = by_key.get(r.key)
            st, h, data = self.request("POST", r.path, r.raw, AUTH, conn)
            replayed = h.get("idempotent-replayed") == "true"
            if rec is not None:
                r.answer(st, h, data)
                problem = rec.matches(r) if r.json is not None else "no JSON body"
                if not replayed or problem:
                    self.bad("%s: in flight at the kill, in the ledger as seq %d, but its retry "
                             "%s: %d %s" % (r.key, rec.seq,
                                            problem or "was not a replay", st, data[:200]))
                with self.lock:
                    self.stats["recovered"] += 1
                    self.stats[r.kind] += 1
            else:
                r.answer(st, h, data)
                if replayed:
                    self.bad("%s: not in the ledger, yet its retry was replayed: %s"
                             % (r.key, data[:200]))
                self.check_fresh_answer(r)
                if not r.injected:
                    with self.lock:
                        self.stats["redone"] += 1
        self.parallel(inflight, one)
        for r in inflight:
            if r.status is not None:
                self.add_acked(r)

    def add_acked(self, r):
        self.acked[r.key] = r
        self.order.append(r.key)

    # ---- one round and the whole campaign -----------------------------------------

    def after_restart(self, rnd, fresh, inflight, final, before):
        when = "round %d after restart" % rnd
        self.phase("restart")
        rc, rep, text = self.verify(allow_torn=False, with_keys=True)
        if rc != 0 or rep is None or not rep.get("ok"):
            self.bad("%s: ledger verify --keys failed (exit %d): %s" % (when, rc, text[:600]))
        elif rep["receipts"] and rep["signatures_verified"] != rep["receipts"]:
            self.bad("%s: verify checked %s of %s signatures"
                     % (when, rep["signatures_verified"], rep["receipts"]))
        elif before is not None and (rep["head_hash"] != before["head_hash"] or
                                     rep["records"] != before["records"]):
            # Recovery may drop a torn tail and nothing else.
            self.bad("%s: the restart changed the valid records: %s records head %s before, "
                     "%s records head %s after" % (when, before["records"],
                                                   before["head_hash"], rep["records"],
                                                   rep["head_hash"]))
        recs, drc, derr = self.dump()
        if drc != 0:
            self.bad("%s: ledger dump stopped early: %s" % (when, derr))
        self.checkpoint("verifying the ledger " + when)
        by_key = self.index(recs, when)
        if final:
            olds = [self.acked[k] for k in self.order]
        else:
            olds = [self.acked[k] for k in self.order[:-len(fresh)]] if fresh else \
                [self.acked[k] for k in self.order]
            olds = self.rng.sample(olds, min(SAMPLE_OLD, len(olds)))
            olds += fresh
        # Every acknowledged request so far, not only the ones retried below.
        self.check_acked_in(by_key, [self.acked[k] for k in self.order], when)
        for r in self.unsent:
            if r.key in by_key:
                self.bad("%s: %s was refused a connection yet is in the ledger" % (when, r.key))
        self.checkpoint("checking the ledger " + when)
        self.phase("verify+dump")
        self.parallel(olds, self.retry_acked)
        with_receipt = [r for r in olds if r.json.get("decision") != "SILENCE"]
        self.parallel(self.rng.sample(with_receipt, min(len(with_receipt), 200)),
                      self.fetch_receipt)
        self.checkpoint("replaying acknowledged requests " + when)
        self.settle_inflight(inflight, by_key, when)
        self.checkpoint("retrying in-flight requests " + when)
        self.phase("retries")
        probes = olds if final else self.rng.sample(olds, min(len(olds), 60)) + \
            [r for r in inflight if r.status is not None]
        self.parallel(probes, self.probe_nonce)
        self.checkpoint("reusing nonces " + when)
        self.phase("nonce probes")
        return len(recs)

    def round(self, rnd, final):
        self.phase("other")
        delay, fresh, inflight, unsent = self.load_and_kill(rnd)
        self.phase("load")
        self.checkpoint("during the load of round %d" % rnd)
        for r in fresh:
            self.add_acked(r)
        self.stats["acked"] += len(fresh)
        self.stats["inflight"] += len(inflight)
        self.stats["unsent"] += len(unsent)
        # The ledger as the SIGKILL left it: every acknowledged record is in the valid
        # prefix; at most a torn tail follows it.
        when = "round %d after the kill" % rnd
        rc, before, text = self.verify(allow_torn=False, with_keys=False)
        fault = (before or {}).get("fault") or {}
        torn = rc == 1 and fault.get("error") == "TG_ERR_LEDGER_TORN"
        if before is None or (rc != 0 and not torn):
            self.bad("%s: the crashed ledger is damaged beyond a torn tail (exit %d): %s"
                     % (when, rc, text[:600]))
        recs, _, _ = self.dump()
        self.check_acked_in(self.index(recs, when), [self.acked[k] for k in self.order], when)
        self.checkpoint("checking the crashed ledger of round %d" % rnd)
        # SIGKILL rarely lands inside a pwrite, so a torn tail is also made by hand (in half
        # the rounds, and at least once per campaign): the cut-short record the next group
        # commit would have written (docs/LEDGER.md layout), holding an unanswered request
        # that the restart must forget.
        injected = None
        first_tear = final and not (self.stats["torn"] or self.stats["torn_made"])
        if not torn and before is not None and (self.rng.random() < 0.5 or first_tear):
            injected = self.inject_torn(rnd, before)
            inflight.append(injected[0])
            torn = True
        self.phase("crashed ledger")
        # Sometimes (at least once per campaign) crash the restart itself, in the middle of
        # recovery: a second recovery of the same files must reach the same state.
        logs = []
        recovery_killed = False
        if self.rng.random() < 0.35 or (final and not self.stats["killed_in_recovery"]):
            self.spawn()
            logs.append(self.logpath(self.instance))
            time.sleep(self.rng.uniform(0.0, 0.12))
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
                self.stats["killed_in_recovery"] += 1
                recovery_killed = True
            rc = self.proc.wait(timeout=30)
            if rc != -signal.SIGKILL:
                self.bad("%s: a restart exited with %s during recovery" % (when, rc))
            self.check_sanitizers()
        self.start()
        logs.append(self.logpath(self.instance))
        self.check_torn_log(torn, logs, when, recovery_killed)
        if injected is not None:
            req, seg, size = injected
            if os.path.getsize(seg) != size:
                self.bad("%s: the restart left %s at %d bytes; the torn record began at %d"
                         % (when, seg, os.path.getsize(seg), size))
        n = self.after_restart(rnd, fresh, inflight, final, before)
        if injected is not None and injected[0].json is not None and \
                injected[0].headers.get("idempotent-replayed") is not None:
            self.bad("%s: the torn record of %s was replayed" % (when, injected[0].key))
            self.checkpoint("after a torn tail")
        self.log("round %d: killed after %.2f s of load: %d answered, %d in flight, "
                 "%d refused; %s; ledger now %d records"
                 % (rnd, delay, len(fresh), len(inflight), len(unsent),
                    "no torn tail" if not torn else "torn tail %s, dropped on restart"
                    % ("made by hand" if injected else "left by the kill"), n))
        if torn:
            self.stats["torn_made" if injected else "torn"] += 1

    def inject_torn(self, rnd, before):
        """Appends the first bytes of record seq last+1 (header cut short, or body cut
        short) to the last segment. Returns (its request, segment path, clean size)."""
        rng = self.rng
        req = self.new_req(rng, rnd, 99, 0)
        req.key = req.body["idempotency_key"] = "torn-r%d-%08x" % (rnd, rng.getrandbits(32))
        req.raw = _raw(req.body)
        req.injected = True
        self.sent_keys.add(req.key)
        meta = json.dumps({"at": int(time.time() * 1000), "k": req.key, "n": req.nonce,
                           "rh": "%064x" % rng.getrandbits(256), "s": 200, "t": TENANT},
                          separators=(",", ":")).encode()
        payload = json.dumps({"decision": "PERMIT", "executionId": "exec_%032x"
                              % rng.getrandbits(128)}, separators=(",", ":")).encode()
        head = struct.pack("<4sBBHQ32sII", b"TGLR", 1, 1, 0, before["last_seq"] + 1,
                           bytes.fromhex(before["head_hash"]), len(meta), len(payload))
        head += hashlib.sha256(head).digest()[:4]
        body = meta + payload
        record = head + body + hashlib.sha256(head + body).digest()
        if rng.random() < 0.3:
            cut = rng.randint(1, len(head) - 1)          # a header cut short
        else:
            cut = rng.randint(len(head), len(record) - 1)  # a body cut short
        segs = sorted(f for f in os.listdir(self.ledger)
                      if f.startswith("ledger-") and f.endswith(".tgl"))
        seg = os.path.join(self.ledger, segs[-1])
        size = os.path.getsize(seg)
        with open(seg, "ab") as f:
            f.write(record[:cut])
        return req, seg, size

    def check_torn_log(self, torn, logs, when, recovery_killed):
        """A torn tail seen by verify is reported by the restart that dropped it, and never
        invented. A restart killed during recovery may have dropped it without living to
        log it; that the tail is gone is checked on the files either way."""
        said = False
        for path in logs:
            try:
                with open(path, errors="replace") as f:
                    said = said or "ledger_torn_tail" in f.read()
            except OSError:
                pass
        if torn and not said and not recovery_killed:
            self.bad("%s: the ledger had a torn tail but no restart reported it" % when)
        if not torn and said:
            self.bad("%s: a restart reported a torn tail the ledger did not have" % when)

    def run(self):
        self.log("seed %d, %d rounds, %d load threads, durability %s%s"
                 % (self.a.seed, self.a.rounds, self.a.threads, self.a.durability,
                    ", segments of %d bytes" % self.a.segment_bytes
                    if self.a.segment_bytes else ""))
        self.start()
        st, _, data = self.request("GET", "/.well-known/trigguard/keys.json", None, {})
        if st != 200:
            raise Setup("keys.json: HTTP %d" % st)
        with open(self.keys_path, "wb") as f:
            f.write(data)
        # At least MIN_ROUNDS kills; later rounds only while the budget leaves room for
        # one more round plus the final one (rounds slow down as the ledger grows).
        rnd, longest = 0, 0.0
        while rnd < self.a.rounds:
            rnd += 1
            final = rnd == self.a.rounds or (
                rnd >= min(MIN_ROUNDS, self.a.rounds) and self.budget_left() < 2 * longest + 5)
            t = time.monotonic()
            self.round(rnd, final)
            longest = max(longest, time.monotonic() - t)
            if final:
                break
        # Every check of the final round is done: nothing more may appear, nothing vanish.
        recs, drc, derr = self.dump()
        by_key = self.index(recs, "at the end")
        if drc != 0:
            self.bad("at the end: ledger dump stopped early: %s" % derr)
        self.check_acked_in(by_key, [self.acked[k] for k in self.order], "at the end")
        if len(recs) != len(self.acked):
            extra = sorted(set(by_key) - set(self.acked))[:5]
            self.bad("at the end: %d records but %d acknowledged requests (extra keys: %s)"
                     % (len(recs), len(self.acked), extra))
        self.stop()
        rc, rep, text = self.verify(allow_torn=False, with_keys=True)
        if rc != 0:
            self.bad("after a clean stop: ledger verify --keys failed: %s" % text[:600])
        self.checkpoint("at the end")
        self.phase("final checks")
        s = self.stats
        self.log("PASSED: seed %d, %d rounds (%d kills during recovery): %d answered before a "
                 "kill, %d in flight at a kill (%d recovered from the ledger and replayed, "
                 "%d absent and redone), %d refused; %d torn tails left by a kill and %d made "
                 "by hand dropped; %d records "
                 "(%d PERMIT, %d DENY, %d SILENCE); %d byte-identical replays, %d nonce "
                 "reuses refused, %d receipts read back; 0 lost, 0 duplicated; %.1f s"
                 % (self.a.seed, rnd, s["killed_in_recovery"], s["acked"], s["inflight"],
                    s["recovered"], s["redone"], s["unsent"], s["torn"], s["torn_made"], len(recs),
                    s["permit"], s["deny"], s["silence"], s["replays"], s["nonce_probes"],
                    s["receipt_reads"],
                    time.monotonic() - self.t0))
        self.log("time by phase: " + ", ".join("%s %.1f s" % kv for kv in self.phases.items()))


class Req:
    def __init__(self, kind, path, body):
        self.kind = kind
        self.path = path
        self.body = body
        self.raw = _raw(body)
        self.key = body["idempotency_key"]
        self.nonce = body["nonce"]
        self.status = None
        self.injected = False      # its record was written torn by inject_torn
        self.failed_at = None
        self.error = None
        self.json = None

    def answer(self, st, h, data):
        self.status, self.headers, self.data = st, h, data
        try:
            self.json = json.loads(data)
        except ValueError:
            self.json = None

    @property
    def exec_id(self):
        return self.json.get("execution_id") if isinstance(self.json, dict) else None

    def receipt_raw(self):
        """The receipt's bytes exactly as served (the response embeds them verbatim)."""
        i = self.data.find(b',"receipt":')
        return None if i < 0 else self.data[i + len(b',"receipt":'):-1]


class Rec:
    """One line of `trigguard ledger dump`."""

    def __init__(self, line):
        self.line = line.decode(errors="replace")
        j = json.loads(line)
        self.seq = j["seq"]
        self.type = j["type"]
        self.payload = j.get("payload")
        i = line.find(b'","payload":')
        self.payload_raw = line[i + len(b'","payload":'):-1] if i >= 0 else None
        try:
            self.meta = json.loads(bytes.fromhex(j["meta_hex"]))
        except ValueError:
            self.meta = {}
        self.key = self.meta.get("k")
        self.nonce = self.meta.get("n")
        self.tenant = self.meta.get("t")
        self.exec_id = self.payload.get("executionId") if isinstance(self.payload, dict) \
            else None

    def matches(self, r):
        """'' when this record is the one behind answer r, else what differs."""
        j = r.json if isinstance(r.json, dict) else {}
        if self.exec_id != j.get("execution_id"):
            return "executionId %s, answer %s" % (self.exec_id, j.get("execution_id"))
        if self.key != r.key or self.nonce != r.nonce:
            return "meta key/nonce %s/%s" % (self.key, self.nonce)
        if self.meta.get("s") != r.status:
            return "meta status %s, answer %s" % (self.meta.get("s"), r.status)
        if self.meta.get("rh") != j.get("request_hash"):
            return "meta request hash %s, answer %s" % (self.meta.get("rh"), j.get("request_hash"))
        if j.get("decision") == "SILENCE":
            if self.type != "silence" or "receipt" in j:
                return "a SILENCE answer but a %s record" % self.type
        elif self.type != "receipt" or r.receipt_raw() != self.payload_raw:
            return "receipt bytes differ from the record's payload"
        return ""


def _raw(body):
    return json.dumps(body, separators=(",", ":")).encode()


def _first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return "at %d: %r vs %r" % (i, a[max(0, i - 20):i + 40], b[max(0, i - 20):i + 40])
    return "none in the common prefix (lengths %d and %d)" % (len(a), len(b))


def _die_with_parent():
    """The daemon gets SIGKILL if this driver dies without cleaning up."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--durability", required=True, choices=("fsync", "batch", "none"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--segment-bytes", type=int, default=0)
    ap.add_argument("--budget", type=float, default=60.0)
    a = ap.parse_args()
    c = Campaign(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        c.run()
    except Setup as e:
        print("[ledger_crash:%s] setup error: %s" % (a.durability, e), file=sys.stderr)
        c.tail_log()
        return 2
    finally:
        c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
