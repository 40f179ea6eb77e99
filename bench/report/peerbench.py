#!/usr/bin/env python3
"""peerbench.py — the evidence scripts/peerbench writes, built from the raw outputs of a run.

usage: peerbench.py ledger-summary METRICS.prom
       peerbench.py ab-point --points POINTS.jsonl --durability fsync|none --round N
                             --connections C --before BEFORE.prom --after AFTER.prom
                             --wrk WRK.json
       peerbench.py ab-summary --points POINTS.jsonl --connections C --duration S
                               [--trigguard BIN] --output http_durability_ab.json

scripts/peerbench runs the processes (daemons, wrk, the peerbench harness) and keeps raw
outputs; everything computed from them is here, so it is tested on fixtures
(tests/integration/bench_peerbench.sh):
- ledger-summary: one log line of a daemon's last /metrics scrape (records, batches, mean
  batch size, fsyncs, mean fsync time, the cumulative batch-size histogram);
- ab-point: one point of the durability A/B — the ledger counters' change between the
  scrapes before and after the measured wrk run, and the JSON bench/load/evaluate.lua
  wrote (JSON_OUT) — appended as one line to POINTS, and a log line on stdout;
- ab-summary: http_durability_ab.json from every point, with the machine's facts, the
  median RPS per mode and their ratio; validated (validate_ab) before it is written.
Standard library only. Exit status 0, 1 for bad input (with a message), 2 for usage.
"""
import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402

MODES = ("fsync", "none")
WHAT = ("POST /v1/evaluate (bench/load/evaluate.lua, unique idempotency keys) at a fixed "
        "connection count, --durability fsync and none alternately, a fresh daemon and "
        "ledger per point")
NOT_MEASURED = ("open-loop latency (wrk is closed-loop); other processes on the shared 2 cores "
                "are not excluded")


# ---- /metrics -------------------------------------------------------------------------

def read_metrics(path):
    """The samples of a Prometheus text scrape: {name: value} for plain samples and
    {name: [(labels, value), ...]} under name + "{}" for labelled ones. A missing or empty
    file (a failed scrape) is no samples."""
    plain, labelled = {}, {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    for name, labels, value in benchlib.metric_samples(lines):
        if labels:
            labelled.setdefault(name, []).append((labels, value))
        else:
            plain[name] = value
    return plain, labelled


def _num(v):
    """A counter for JSON and log lines: an integer when it is one."""
    return int(v) if float(v).is_integer() else v


def ledger_counters(path):
    """records, batches and fsync seconds (sum) of one scrape; 0 for what it lacks."""
    plain, _ = read_metrics(path)
    return (plain.get("trigguard_ledger_records_total", 0.0),
            plain.get("trigguard_ledger_batches_total", 0.0),
            plain.get("trigguard_ledger_fsync_seconds_sum", 0.0))


def ledger_summary(path):
    plain, labelled = read_metrics(path)
    r = plain.get("trigguard_ledger_records_total", 0.0)
    b = plain.get("trigguard_ledger_batches_total", 0.0)
    fs = plain.get("trigguard_ledger_fsync_seconds_sum", 0.0)
    fc = plain.get("trigguard_ledger_fsync_seconds_count", 0.0)
    hist = ""
    for labels, v in labelled.get("trigguard_ledger_batch_records_bucket", []):
        le = re.search(r'le="([^"]*)"', labels)
        hist += f" <={le.group(1) if le else '?'}:{_num(v)}"
    return (f"records={_num(r)} batches={_num(b)} mean_batch={r / b if b > 0 else 0:.2f} "
            f"fsyncs={_num(fc)} mean_fsync_ms={1000 * fs / fc if fc > 0 else 0:.3f} "
            f"cumulative batch sizes:{hist}")


# ---- the durability A/B -------------------------------------------------------------------

def ab_point(durability, rnd, connections, before, after, wrk):
    """One A/B point: the ledger's work during the measured run and wrk's summary."""
    r0, b0, s0 = ledger_counters(before)
    r1, b1, s1 = ledger_counters(after)
    return {"durability": durability, "round": rnd, "connections": connections,
            "ledger": {"records": _num(r1 - r0), "batches": _num(b1 - b0),
                       "fsync_seconds": round(s1 - s0, 6)},
            "wrk": wrk}


def point_line(p):
    w, led = p["wrk"], p["ledger"]
    lat = w.get("latency_us", {})
    errors = json.dumps(w.get("errors"), separators=(",", ":"))
    return (f"A/B round {p['round']} {p['durability']} c={p['connections']}: rps={w.get('rps')} "
            f"p50={lat.get('p50')}us p99={lat.get('p99')}us errors={errors} "
            f"batches={led['batches']} records={led['records']}")


def median(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 == 1 else (s[n // 2 - 1] + s[n // 2]) / 2


def ratio(f, n):
    """fsync over none, to three decimals (half away from zero); None without both."""
    if f is None or n is None or n <= 0:
        return None
    return math.floor(f / n * 1000 + 0.5) / 1000


def _run(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (out.stdout or out.stderr).strip()


def machine_facts(trigguard_bin):
    """What the A/B document says of the machine and the binaries; "unknown" for what cannot
    be found (no wrk, no gcc, no binary)."""
    cpu = benchlib._read_field("/proc/cpuinfo", "model name") or "unknown"
    try:
        cores = len(os.sched_getaffinity(0))  # what `nproc` says
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    wrk = _run(["wrk", "-v"]).splitlines()
    wrk_version = wrk[0].split()[1] if wrk and len(wrk[0].split()) > 1 else "unknown"
    version = _run([trigguard_bin, "--version"]).splitlines() if trigguard_bin else []
    return {"cpu": cpu, "cores": cores, "kernel": platform.release(),
            "gcc": _run(["gcc", "-dumpfullversion"]) or "unknown",
            "trigguard": version[0] if version else "unknown",
            "wrk": wrk_version, "build": "CMAKE_BUILD_TYPE=Release"}


def git_commit():
    return _run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]) or "unknown"


def ab_document(points, connections, duration, environment, date, commit):
    by_mode = {m: median([p["wrk"]["rps"] for p in points if p["durability"] == m])
               for m in MODES}
    return {
        "what": WHAT,
        "method": (f"wrk -t1 -c{connections} -d{duration}s --latency after a 2 s warm-up at "
                   "c=10; ledger counters from GET /metrics before and after each point"),
        "not_measured": NOT_MEASURED,
        "date": date, "git_commit": commit, "environment": environment,
        "connections": connections, "duration_s": duration, "points": points,
        "median_rps": by_mode,
        "fsync_over_none_rps": ratio(by_mode["fsync"], by_mode["none"]),
    }


def validate_ab(doc, where="http_durability_ab"):
    """The shape of http_durability_ab.json, and its medians and ratio held to its points."""
    req = benchlib._req
    for k in ("what", "method", "not_measured", "date", "git_commit"):
        req(benchlib._nonempty_str(doc.get(k)), where, f"{k} must be a non-empty string")
    env = doc.get("environment")
    req(isinstance(env, dict), where, "environment must be an object")
    for k in ("cpu", "kernel", "gcc", "trigguard", "wrk", "build"):
        req(benchlib._nonempty_str(env.get(k)), where, f"environment.{k} must be a string")
    req(benchlib._is_int(env.get("cores")) and env["cores"] >= 1, where, "environment.cores >= 1")
    conns = doc.get("connections")
    req(benchlib._is_int(conns) and conns >= 1, where, "connections >= 1")
    req(benchlib._is_num(doc.get("duration_s")) and doc["duration_s"] > 0, where,
        "duration_s > 0")
    points = doc.get("points")
    req(isinstance(points, list) and points, where, "points must be a non-empty array")
    for i, p in enumerate(points):
        w = f"{where}.points[{i}]"
        req(p.get("durability") in MODES, w, "durability must be fsync or none")
        req(benchlib._is_int(p.get("round")) and p["round"] >= 1, w, "round >= 1")
        req(p.get("connections") == conns, w, "connections differ from the document's")
        led = p.get("ledger")
        req(isinstance(led, dict), w, "ledger must be an object")
        for k in ("records", "batches"):
            req(benchlib._is_int(led.get(k)) and led[k] >= 0, w, f"ledger.{k} must be >= 0")
        req(benchlib._is_num(led.get("fsync_seconds")) and led["fsync_seconds"] >= 0, w,
            "ledger.fsync_seconds must be >= 0")
        req(isinstance(p.get("wrk"), dict) and benchlib._is_num(p["wrk"].get("rps")), w,
            "wrk.rps must be a number")
    want = {m: median([p["wrk"]["rps"] for p in points if p["durability"] == m]) for m in MODES}
    req(doc.get("median_rps") == want, where, f"median_rps must be {want}")
    req(doc.get("fsync_over_none_rps") == ratio(want["fsync"], want["none"]), where,
        "fsync_over_none_rps must be median fsync / median none")


def read_points(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv):
    ap = argparse.ArgumentParser(prog="peerbench.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("ledger-summary")
    s.add_argument("metrics")
    s = sub.add_parser("ab-point")
    s.add_argument("--points", required=True)
    s.add_argument("--durability", required=True, choices=MODES)
    s.add_argument("--round", required=True, type=int)
    s.add_argument("--connections", required=True, type=int)
    s.add_argument("--before", required=True)
    s.add_argument("--after", required=True)
    s.add_argument("--wrk", required=True)
    s = sub.add_parser("ab-summary")
    s.add_argument("--points", required=True)
    s.add_argument("--connections", required=True, type=int)
    s.add_argument("--duration", required=True, type=int)
    s.add_argument("--trigguard", default=None)
    s.add_argument("--output", required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "ledger-summary":
            print(ledger_summary(a.metrics))
        elif a.cmd == "ab-point":
            p = ab_point(a.durability, a.round, a.connections, a.before, a.after,
                         benchlib.load_json(a.wrk))
            with open(a.points, "a", encoding="utf-8") as f:
                f.write(json.dumps(p, separators=(",", ":")) + "\n")
            print(point_line(p))
        else:
            doc = ab_document(read_points(a.points), a.connections, a.duration,
                              machine_facts(a.trigguard), benchlib.utc_now(), git_commit())
            validate_ab(doc)
            with open(a.output, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
            print(json.dumps({"median_rps": doc["median_rps"],
                              "fsync_over_none_rps": doc["fsync_over_none_rps"]},
                             separators=(",", ":")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"peerbench.py {a.cmd}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
