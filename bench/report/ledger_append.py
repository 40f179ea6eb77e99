#!/usr/bin/env python3
"""ledger_append.py — the ledger's floor term: CPU per record of appending batches to a file
and (durability fsync) one fdatasync per batch, measured as one JSON document.

usage: ledger_append.py --dir DIR --load LOAD.json --metrics URL --ledger-dir DIR
                        [--commits N] [--build-dir DIR] --output FILE

What a group commit cannot avoid: one write() of the batch's records and, with fsync, one
fdatasync(). The record size is the daemon's own mean (the bytes of its ledger segment files
÷ trigguard_ledger_records_total of its /metrics, read while it runs); the batch size at each
connection count is the records per commit its load run saw (LOAD.json: the http_evaluate_load
artifact of the same daemon), rounded, at least 1. For each, N commits into a fresh file in
DIR (on the file system of the daemon's ledger), each timed (wall, per commit) and the whole
loop's CPU read from this thread's clock (user + system, CLOCK_THREAD_CPUTIME_ID): the run's
cpu.processes.append.us_per_request is that CPU per record. The durability mode is the load
artifact's. The interpreter's own cost per commit (a few hundred ns) is included; it is
divided by the batch.
"""
import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402


def one_level(path, record_bytes, batch, commits, sync):
    payload = (b"x" * (record_bytes - 1) + b"\n") * batch
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        samples = []
        t0, c0 = time.monotonic(), time.thread_time()
        for _ in range(commits):
            s = time.perf_counter_ns()
            os.write(fd, payload)
            if sync:
                os.fdatasync(fd)
            samples.append(time.perf_counter_ns() - s)
        c1, t1 = time.thread_time(), time.monotonic()
    finally:
        os.close(fd)
        os.unlink(path)
    return samples, c1 - c0, t1 - t0


def main(argv):
    p = argparse.ArgumentParser(prog="ledger_append.py")
    p.add_argument("--dir", required=True)
    p.add_argument("--load", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--ledger-dir", required=True)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--build-dir", default="")
    p.add_argument("--output", required=True)
    a = p.parse_args(argv)
    if a.commits < 10 or a.commits > 1000000:
        p.error("--commits in 10..1000000")
    load = benchlib.load_json(a.load)
    benchlib.validate_artifact(load, a.load)
    if load["benchmark"] != "http_evaluate_load":
        p.error("--load must be an http_evaluate_load artifact")
    mode = load["server"]["durability"]
    plain, _ = benchlib.scrape_metrics(a.metrics)
    records = int(plain["trigguard_ledger_records_total"])
    seg_bytes = sum(os.path.getsize(f) for f in glob.glob(os.path.join(a.ledger_dir, "*.tgl")))
    if records < 1 or seg_bytes < 1:
        raise ValueError(f"no records to size from ({records} records, {seg_bytes} bytes)")
    record_bytes = max(2, round(seg_bytes / records))
    runs = []
    for lr in load["runs"]:
        rpc = (lr.get("ledger") or {}).get("records_per_commit") or 1.0
        batch = max(1, round(rpc))
        samples, cpu_s, window = one_level(os.path.join(a.dir, f"append-c{lr['concurrency']}"),
                                           record_bytes, batch, a.commits, mode == "fsync")
        ns = sorted(samples)
        recs = batch * a.commits
        mean = sum(ns) / len(ns)
        sd = (sum((x - mean) ** 2 for x in ns) / len(ns)) ** 0.5
        lat = {k: benchlib.nearest_rank(ns, q) / 1e6
               for k, q in (("min", 0), ("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99),
                            ("p99_9", 99.9), ("max", 100))}
        lat["mean"], lat["stdev"] = mean / 1e6, sd / 1e6
        runs.append({
            "name": f"c{lr['concurrency']}", "concurrency": lr["concurrency"],
            "what": f"{a.commits} commits of {batch} record(s) of {record_bytes} B"
                    + (", each with fdatasync" if mode == "fsync" else ", no sync"),
            "batch_records": batch, "record_bytes": record_bytes,
            "iterations": a.commits, "duration_s": round(window, 3), "requests": recs,
            "ok": recs, "latency_ms": {k: round(v, 6) for k, v in lat.items()},
            "digest": {"definition": "nearest-rank over the per-commit wall times",
                       "percentiles": benchlib.DIGEST_PCTS,
                       "latency_ms": [round(benchlib.nearest_rank(ns, q) / 1e6, 6)
                                      for q in benchlib.DIGEST_PCTS]},
            "throughput_per_s": round(recs / window, 1) if window > 0 else 0.0,
            "throughput_source": "records per second of the timed loop",
            "errors": {"count": 0, "rate": 0.0, "by_kind": {}},
            "cpu": {"source": "time.thread_time() (CLOCK_THREAD_CPUTIME_ID, user + system) "
                              "around the loop; per request = per record",
                    "window_s": round(window, 6), "cores": 1,
                    "machine": {"cpu_s": round(cpu_s, 6),
                                "us_per_request": round(1e6 * cpu_s / recs, 3)},
                    "processes": {"append": {"cpu_s": round(cpu_s, 6),
                                             "us_per_request": round(1e6 * cpu_s / recs, 3)}}},
        })
        print(f"ledger_append.py: {mode} c={lr['concurrency']} batch={batch} "
              f"record={record_bytes}B "
              f"cpu={runs[-1]['cpu']['processes']['append']['us_per_request']}"
              f"us/record commit p50={lat['p50']:.4f}ms", file=sys.stderr)
    doc = {
        "schema": benchlib.SCHEMA, "benchmark": "ledger_append",
        "harness": "bench/report/ledger_append.py",
        "what": "the ledger's floor: write() of one batch of records and (fsync) one "
                "fdatasync per batch, the daemon's record size and batch sizes",
        "method": __doc__.split("\n\n", 2)[1].replace("\n", " "),
        "not_measured": "the daemon's framing, hashing and queueing of the records (they are "
                        "other terms or above the floor); contention with other threads",
        "parameters": {"commits": a.commits, "record_bytes": record_bytes,
                       "record_bytes_source": f"{seg_bytes} B of segments / {records} records",
                       "load_file": os.path.basename(a.load), "durability": mode},
        "environment": benchlib.environment(a.build_dir or None, mode,
                                            load["server"]["build_commit"]),
        "runs": runs,
    }
    benchlib.validate_artifact(doc, "ledger_append output")
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(benchlib.json.dumps(doc, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    benchlib.run_main(main, "ledger_append.py", (benchlib.SchemaError, OSError, ValueError,
                                                  KeyError), what="")
