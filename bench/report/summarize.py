#!/usr/bin/env python3
"""summarize.py — aggregate benchmark artifacts into benchmark_summary.json.

usage: summarize.py [--mode full|quick|custom] [--command CMD] [--loadavg-before L]
                    [--build-dir DIR] [--note TEXT] --output SUMMARY.json ARTIFACT.json...
       summarize.py --print SUMMARY.json

Every artifact is validated against docs/BENCHMARKS.md first (a bad one stops the run);
the summary carries each harness's runs (with their 105-point latency digests, so the page
needs nothing else), headline figures, the original product's published figures
(bench/report/published.json) with the ratio, methodology and the reproduce commands.
No number is computed here except ratios and maxima of numbers the harnesses wrote.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402

TITLES = {
    "kernel_fsm_latency": "Kernel FSM, in process",
    "handler_latency": "Request handler, in process",
    "http_decide_sequential": "Decision core over HTTP: POST /decide, sequential",
    "http_evaluate_sequential": "End to end, sequential: POST /v1/evaluate",
    "http_evaluate_load": "Concurrent load: POST /v1/evaluate with wrk",
    "http_decide_load": "Concurrent load: POST /decide with wrk",
    "http_static_load": "Concurrent load: nginx answering the bytes of a /v1/evaluate reply",
    "ledger_append": "The ledger's floor: batches written and synced, in process",
}


def git_facts():
    def run(*args):
        try:
            return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                                  timeout=20, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = run("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(run("status", "--porcelain", "--untracked-files=no", "--", "src", "include",
                     "bench", "CMakeLists.txt"))
    return {"commit": commit, "source_tree_modified": dirty}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def run_by_name(h, name):
    for r in h["runs"]:
        if r["name"] == name:
            return r
    return None


def build_summary(a):
    harnesses, artifacts = [], []
    out_dir = os.path.dirname(os.path.abspath(a.output))
    for path in a.artifacts:
        doc = benchlib.load_json(path)
        benchlib.validate_artifact(doc, os.path.basename(path))
        name = os.path.basename(path)
        raw = os.path.join(os.path.dirname(path), "raw", name[:-5] + ".ns.txt.gz")
        artifacts.append({"file": name, "benchmark": doc["benchmark"], "sha256": sha256(path),
                          "raw_samples": os.path.relpath(raw, out_dir)
                          if os.path.exists(raw) else None})
        # In-process harnesses have no daemon: the mode their environment block names.
        durability = (doc.get("server", {}).get("durability")
                      or doc["environment"].get("durability", "not applicable"))
        title = TITLES[doc["benchmark"]]
        store = doc.get("store")
        if store and store["kind"] == "postgres":
            title += (" (PostgreSQL store, one instance)" if store["instances"] == 1 else
                      f" (PostgreSQL store, {store['instances']} instances behind "
                      f"{store['balancer'].split(',')[0]})")
        elif doc["benchmark"] in ("http_evaluate_sequential", "http_evaluate_load"):
            title += f" (durability {durability})"
        if doc.get("log"):
            title += (", transparency log on, "
                      + ("batch-signed receipts" if doc["log"]["receipt_signing"] == "batch"
                         else "every receipt signed"))
        h = {"benchmark": doc["benchmark"], "file": name, "title": title, "what": doc["what"],
             "method": doc["method"], "not_measured": doc["not_measured"],
             "durability": durability, "harness": doc["harness"],
             "parameters": doc["parameters"], "server": doc.get("server"),
             "environment": doc["environment"], "runs": doc["runs"]}
        if doc["benchmark"] == "kernel_fsm_latency":
            h["clock"] = doc.get("clock")
        if doc["benchmark"] == "handler_latency":
            h["floor"] = doc.get("floor")
        if store:
            h["store"] = store
        if doc.get("log"):
            h["log"] = doc["log"]
        if doc.get("static"):
            h["static"] = doc["static"]
        harnesses.append(h)

    def kind(h):
        return (h.get("store") or {}).get("kind", "file")

    def find(bench, durability=None, store="file"):
        """The harnesses of one benchmark on one store (the file ledger unless asked), without
        the transparency log (those runs have their own section)."""
        return [h for h in harnesses if h["benchmark"] == bench and kind(h) == store
                and not h.get("log")
                and (durability is None or h["durability"] == durability)]

    pub = benchlib.load_json(os.path.join(HERE, "published.json"))
    fig = pub["figures"]
    headline, comparison = [], []

    def item(key, label, value, unit, detail):
        headline.append({"key": key, "label": label, "value": value, "unit": unit,
                         "detail": detail})

    def compare(metric, ours, theirs, unit, better, note=""):
        if ours is None or theirs is None:
            return
        adv = (theirs / ours if ours > 0 else 0.0) if better == "lower" else ours / theirs
        comparison.append({"metric": metric, "ours": ours, "theirs": theirs, "unit": unit,
                           "better": better, "advantage": round(adv, 3), "note": note})

    for h in find("kernel_fsm_latency"):
        for variant, label in (("default", "default"), ("spend", "spend")):
            r = run_by_name(h, variant)
            if r is None:
                continue
            item(f"kernel_{variant}_p99_ms", f"Kernel p99 ({label})", r["latency_ms"]["p99"],
                 "ms", f"{r['iterations']:,} calls, per-call clock reads included")
            item(f"kernel_{variant}_throughput_per_s", f"Kernel decisions/s ({label})",
                 r["throughput_per_s"], "/s", "median batch of calls, one thread")
            compare(f"Kernel p99, {label}", r["latency_ms"]["p99"],
                    fig.get(f"kernel_{variant}_p99_ms"), "ms", "lower")
            compare(f"Kernel throughput, {label}", r.get("per_call_throughput_per_s"),
                    fig.get(f"kernel_{variant}_throughput_per_s"), "/s", "higher",
                    "ours: the per-call loop (each call timed), the conservative figure")
    for h in find("handler_latency"):
        for key, variant, label, detail in (
                ("evaluate", "evaluate_handler", "Evaluate handler p50, no HTTP",
                 "POST /v1/evaluate, durability none: parse to ledger and reply"),
                ("decide", "decide_handler", "Decide handler p50, no HTTP",
                 "POST /decide, same body, no receipt")):
            r = run_by_name(h, variant)
            if r is not None:
                item(f"handler_{key}_p50_ms", label, r["latency_ms"]["p50"], "ms",
                     f"{r['iterations']:,} calls, one thread; {detail}")
        fl = h.get("floor") or {}
        if "mandatory_crypto_p50_ns" in fl:
            item("handler_crypto_floor_p50_ms", "Mandatory crypto floor p50",
                 fl["mandatory_crypto_p50_ns"] / 1e6, "ms",
                 "sign(32 B) + SHA-256 of canonical request, canonical receipt and token: "
                 "the least a signed receipt costs")
    for h in find("http_decide_sequential"):
        r = h["runs"][0]
        item("decide_p99_ms", "/decide sequential p99", r["latency_ms"]["p99"], "ms",
             f"{r['requests']:,} requests, one keep-alive connection")
        compare("/decide sequential p99", r["latency_ms"]["p99"],
                fig.get("decide_sequential_p99_ms"), "ms", "lower")
    modes = []
    for h in find("http_evaluate_sequential"):
        modes.append(h["durability"])
        r, d = h["runs"][0], h["durability"]
        item(f"evaluate_{d}_p99_ms", f"/v1/evaluate sequential p99 ({d})",
             r["latency_ms"]["p99"], "ms", f"{r['requests']:,} signed, ledgered evaluations")
        item(f"evaluate_{d}_throughput_per_s", f"/v1/evaluate sequential req/s ({d})",
             r["throughput_per_s"], "/s", "one connection, one request in flight")
        compare(f"/v1/evaluate sequential p99 (durability {d})", r["latency_ms"]["p99"],
                fig.get("evaluate_sequential_p99_ms"), "ms", "lower")
        compare(f"/v1/evaluate sequential throughput (durability {d})",
                r["throughput_per_s"], fig.get("evaluate_sequential_throughput_per_s"), "/s",
                "higher")
    for h in find("http_evaluate_load"):
        d = h["durability"]
        c50 = next((r for r in h["runs"] if r["concurrency"] == 50), None)
        peak = max(h["runs"], key=lambda r: r["throughput_per_s"])
        if c50 is not None:
            item(f"load_{d}_c50_rps", f"50 connections RPS ({d})", c50["throughput_per_s"],
                 "/s", f"p99 {c50['latency_ms']['p99']:.2f} ms, "
                       f"errors {c50['errors']['count']}")
            compare(f"50 connections RPS (durability {d})", c50["throughput_per_s"],
                    fig.get("load_c50_rps"), "/s", "higher",
                    "theirs: k6, 50 virtual users; ours: wrk, 50 connections")
            compare(f"50 connections p99 (durability {d})", c50["latency_ms"]["p99"],
                    fig.get("load_c50_p99_ms"), "ms", "lower")
        item(f"load_{d}_peak_rps", f"Peak RPS measured ({d})", peak["throughput_per_s"], "/s",
             f"at {peak['concurrency']} connections")
        compare(f"Highest RPS measured vs their saturation (durability {d})",
                peak["throughput_per_s"], fig.get("saturation_rps"), "/s", "higher",
                f"ours: the best of {', '.join(str(r['concurrency']) for r in h['runs'])} "
                "connections, not a saturation search")

    stores = benchlib.store_comparison(harnesses, a.skip)
    if a.store_ab:
        docs = []
        for path in a.store_ab:
            doc = benchlib.load_json(path)
            name = os.path.relpath(os.path.abspath(path), out_dir)
            benchlib.validate_artifact(doc, name)
            artifacts.append({"file": name, "benchmark": doc["benchmark"],
                              "sha256": sha256(path), "raw_samples": None})
            docs.append((name, doc))
        if stores is None:
            stores = {"reference": None, "criteria": benchlib.STORE_CRITERIA, "rows": [],
                      "skipped": list(a.skip)}
        stores["ab"] = benchlib.store_ab(docs)
    for row in (stores or {}).get("rows", []):
        if row["store"] != "postgres":
            continue
        tag = "postgres" if row["instances"] == 1 else f"postgres_x{row['instances']}"
        c = row["concurrency"]
        ratio = ("" if row["ratio_to_file_fsync"] is None
                 else f"{100 * row['ratio_to_file_fsync']:.0f} % of the file ledger (fsync); ")
        item(f"load_{tag}_c{c}_rps", f"{c} connections RPS ({row['variant']})",
             row["throughput_per_s"], "/s",
             f"{ratio}p99 {row['p99_ms']:.2f} ms, errors {row['errors']}, "
             f"{row['records_per_commit']} records per commit, commit "
             f"{row['mean_commit_ms']} ms (mean)")

    ab = (stores or {}).get("ab")
    if ab:
        item("store_ab_median_ratio", "PostgreSQL ÷ file ledger (fsync), A/B median",
             ab["median_ratio"], "ratio",
             f"{len(ab['rounds'])} alternating rounds at {ab['rounds'][0]['concurrency']} "
             f"connections; min {ab['min_ratio']:.3f}, max {ab['max_ratio']:.3f}")

    tlog = benchlib.log_comparison(harnesses)
    if a.log_ab:
        docs = []
        for path in a.log_ab:
            doc = benchlib.load_json(path)
            name = os.path.relpath(os.path.abspath(path), out_dir)
            benchlib.validate_artifact(doc, name)
            artifacts.append({"file": name, "benchmark": doc["benchmark"],
                              "sha256": sha256(path), "raw_samples": None})
            docs.append((name, doc))
        tlog = tlog if tlog is not None else {}
        tlog["ab"] = benchlib.log_ab(docs)
        lab = tlog["ab"]
        item("log_ab_cost", "Transparency log's cost, A/B median", lab["log_cost"], "ratio",
             f"1 − median of {len(lab['rounds'])} alternating rounds' RPS ratio (log ÷ no log, "
             f"every receipt signed) at {lab['rounds'][0]['concurrency']} connections; "
             f"ratios {lab['min_log_ratio']:.3f} … {lab['max_log_ratio']:.3f}")
        if lab["median_batch_ratio"] is not None:
            item("log_ab_batch_ratio", "Batch-signed ÷ no log, A/B median",
                 lab["median_batch_ratio"], "ratio",
                 f"ratios {lab['min_batch_ratio']:.3f} … {lab['max_batch_ratio']:.3f}")
    for row in (tlog or {}).get("rows", []):
        c = row["concurrency"]
        if row["log_cost"] is not None:
            item(f"log_cost_c{c}", f"Transparency log's cost, {c} connections",
                 row["log_cost"], "ratio",
                 f"1 − RPS with the log ÷ without it (fsync, every receipt signed): "
                 f"{row['log']['throughput_per_s']:,.0f} vs {row['no_log']['throughput_per_s']:,.0f}"
                 f"/s; checkpoint lag p99 ≤ {row['log']['lag_p99_bucket_le_ms']} ms")
        if row["batch_ratio"] is not None:
            b = row["batch"]
            item(f"batch_ratio_c{c}", f"Batch-signed ÷ per-receipt RPS, {c} connections",
                 row["batch_ratio"], "ratio",
                 f"{b['throughput_per_s']:,.0f}/s, p99 {b['p99_ms']:.2f} ms, errors "
                 f"{b['errors']}, {b['signatures_per_s']} checkpoint signatures/s")

    env = benchlib.environment(a.build_dir or None, ", ".join(modes) or "not applicable",
                               git_facts()["commit"])
    kernel = find("kernel_fsm_latency")
    clock = kernel[0].get("clock") if kernel else None
    handler = find("handler_latency")
    floor = (handler[0].get("floor") or {}) if handler else {}
    cores = env["cpu_cores"]
    load1 = None
    try:
        load1 = float((a.loadavg_before or "").split()[0])
    except (ValueError, IndexError):
        pass
    methodology = [
        "Every latency is measured on the client with clock_gettime(CLOCK_MONOTONIC) (the C "
        "harnesses) or by wrk (1 us resolution); every raw sample is kept and percentiles are "
        "nearest-rank over them (wrk: rank round(p/100*n + 0.5) over its 1 us buckets): no "
        "server-side timings, no interpolation, no averaging of percentiles across runs.",
        "Kernel: tg_kernel_decide in process on one thread, on a pre-built frame, after a "
        "warm-up; each per-call sample includes one clock read"
        + (f" (about {clock.get('overhead_ns_p50')} ns here)" if clock else "")
        + "; throughput is the median of batches of calls between two clock reads.",
        "Sequential HTTP: one keep-alive HTTP/1.1 connection (TCP_NODELAY), one request in "
        "flight, a unique idempotency key per request so nothing is an idempotent replay; "
        "every response is checked (status 200, the expected decision, no replay header); "
        "failures are excluded from the samples and counted as errors.",
        "Load: wrk, closed loop (each connection sends its next request when the previous "
        "reply arrives), a discarded warm-up before each level, every reply checked for 2xx "
        "and PERMIT; wrk and the daemon run on the same machine.",
        "The daemon is the release build (-O3), one HTTP event thread per core, 127.0.0.1, "
        "log level warn, examples/policy.json, a fresh key and ledger in a temporary "
        "directory per durability mode. durability fsync: a response leaves only after "
        "fdatasync of the ledger record (group commit: one fsync covers every request "
        "waiting); none: the record is written but not synced.",
        f"This machine: {env['cpu_model']}, {cores} cores, {env['memory_total_mib']:,} MiB, "
        f"{env['kernel']}. The daemon and the load generator share these {cores} cores. "
        f"The original figures come from {pub['hardware']}: ratios compare different "
        "machines, not only different software.",
    ]
    if handler:
        methodology.insert(2, (  # after the kernel's sentence
            "Request handler: tg_pipeline_handle in process on one thread, without HTTP: POST "
            "/v1/evaluate with a fresh idempotency key per call and durability none (the ledger "
            "record reaches the page cache, not the disk), and POST /decide with the same body. "
            "Beside them, timed alone, the cryptography SPEC 3.3 and 6 require of every signed "
            "receipt: one Ed25519 signature over the 32-byte receiptHash and SHA-256 over the "
            "canonical request, the canonical receipt and the bearer token; the sum of their "
            "medians"
            + (f" ({floor['mandatory_crypto_p50_ns'] / 1e3:.1f} us here)"
               if "mandatory_crypto_p50_ns" in floor else "")
            + " is a floor under any /v1/evaluate handler on this machine."))
    pg_h = find("http_evaluate_load", store="postgres")
    if pg_h:
        pst = pg_h[0]["store"].get("postgres", {})
        sett = pst.get("settings", {})
        changed = pst.get("changed_from_initdb_defaults") or []
        methodology.append(
            "PostgreSQL store: a throwaway PostgreSQL "
            f"{sett.get('server_version', '')} cluster on this machine (scripts/lib/pg.sh, "
            "Unix socket, trust authentication), one fresh database per run migrated with "
            "trigguard db migrate, fsync " + sett.get("fsync", "?") + ", synchronous_commit "
            + sett.get("synchronous_commit", "?") + ", wal_sync_method "
            + sett.get("wal_sync_method", "?") + "; "
            + ("settings changed from initdb's defaults: " + ", ".join(changed)
               if changed else "no setting changed from initdb's defaults") + ". The "
            "daemon runs with --store postgres (claim pool " + str(pst.get("db_pool", "?"))
            + "); the same wrk load as the file runs; records per commit and commit latency "
            "are the differences of the ledger's /metrics counters (batches, batch_records, "
            "fsync_seconds: for PostgreSQL one transaction's COMMIT) over the timed window. "
            "The database server, the daemons, the balancer and wrk share the same cores, so "
            "the PostgreSQL figures are quoted as ratios to the file ledger of the same run.")
    if load1 is not None:
        busy = ("other processes were competing for the CPU during this run, which inflates "
                "tails and lowers throughput" if load1 > 0.5 * cores
                else "the machine was otherwise mostly idle")
        methodology.append(f"Load average when the run started: {a.loadavg_before} "
                           f"(1/5/15 min) on {cores} cores: {busy}.")
    if a.note:
        methodology.append(a.note)

    bdir = "build/evidence"  # where the one command builds (scripts/bench)
    first = (find("http_evaluate_sequential") or [{}])[0]
    p_dec = (find("http_decide_sequential") or [{"parameters": {}}])[0]["parameters"]
    p_eval = first.get("parameters", {})
    load = (find("http_evaluate_load") or [{"parameters": {}}])[0]["parameters"]
    k_it = kernel[0]["parameters"].get("count", 100000) if kernel else 100000
    h_it = handler[0]["parameters"].get("count", 20000) if handler else 20000
    conns = " ".join(str(c) for c in load.get("connections", [10, 50, 100]))
    reproduce = [
        {"what": f"this {a.mode} run, end to end (build, daemon, every harness, summary, page)",
         "command": a.command},
        {"what": "the quick variant (about a minute)" if a.mode != "quick"
         else "the full run (about 6 minutes)",
         "command": "scripts/bench --quick" if a.mode != "quick"
         else "scripts/bench"},
        {"what": "kernel harness alone",
         "command": f"{bdir}/bench/kernel_latency_bench --count {k_it} "
                    "--output kernel_fsm_latency.json"},
        {"what": "request handler harness alone (in process, no daemon needed)",
         "command": f"{bdir}/bench/handler_latency_bench --count {h_it} "
                    "--output handler_latency.json"},
        {"what": "a daemon to measure (another shell)",
         "command": f"{bdir}/src/cli/trigguard keygen --out /tmp/tg-key.pem && "
                    "TRIGGUARD_API_KEYS=bench:$TOKEN "
                    f"{bdir}/src/cli/trigguard serve --port 8080 --policy "
                    "examples/policy.json --key /tmp/tg-key.pem --ledger /tmp/tg-ledger "
                    "--durability fsync --log-level warn"},
        {"what": "/decide, sequential",
         "command": "BASE_URL=http://127.0.0.1:8080 ENDPOINT=/decide "
                    f"ITERATIONS={p_dec.get('iterations', 20000)} "
                    f"WARMUP={p_dec.get('warmup', 500)} TOKEN=$TOKEN "
                    f"{bdir}/bench/http_latency_bench --output decide.json"},
        {"what": "/v1/evaluate, sequential",
         "command": "BASE_URL=http://127.0.0.1:8080 ENDPOINT=/v1/evaluate "
                    f"ITERATIONS={p_eval.get('iterations', 5000)} "
                    f"WARMUP={p_eval.get('warmup', 500)} TOKEN=$TOKEN "
                    f"{bdir}/bench/http_latency_bench --output evaluate.json"},
        {"what": "load with wrk at each connection count",
         "command": f"scripts/loadtest --url http://127.0.0.1:8080 --token $TOKEN "
                    f"--conns \"{conns}\" --duration {load.get('duration_s', 30)} "
                    f"--build-dir {bdir} --output load.json"},
        {"what": "the same load with k6, as the original was run",
         "command": "k6 run --env BASE_URL=http://127.0.0.1:8080 --env VUS=50 "
                    "--env DURATION=60s --env TOKEN=$TOKEN bench/load/evaluate_bench.js"},
        {"what": "this page from the summary",
         "command": "python3 bench/report/render_page.py --output evidence/index.html "
                    "evidence/artifacts/benchmarks/benchmark_summary.json"},
    ]
    if pg_h:
        reproduce.insert(2, {
            "what": "only the PostgreSQL runs beside the file ledger with fsync (the reference "
                    "of their ratio)",
            "command": "scripts/bench --durability fsync --stores file,postgres --lb"})
    summary = {
        "schema": benchlib.SUMMARY_SCHEMA,
        "generated": benchlib.utc_now(),
        "mode": a.mode,
        "command": a.command,
        "git": git_facts(),
        "loadavg_before": a.loadavg_before or "unknown",
        "build_dir": os.path.relpath(a.build_dir, ROOT) if a.build_dir else "unknown",
        "environment": env,
        "methodology": methodology,
        "artifacts": artifacts,
        "harnesses": harnesses,
        "headline": {"items": headline},
        "published": pub,
        "comparison": comparison,
        "reproduce": reproduce,
    }
    if stores is not None:
        summary["stores"] = stores
    floor = benchlib.floor_block(harnesses)
    if floor is not None:
        summary["floor"] = floor
        for row in floor["rows"]:
            for m in row["evaluate"]:
                if row["concurrency"] != 50:
                    continue
                item(f"floor_ratio_{m['durability']}",
                     f"CPU per request ÷ the floor, 50 connections ({m['durability']})",
                     m["ratio_to_floor"], "ratio",
                     f"{m['daemon_cpu_us_per_request']} µs against a floor of "
                     f"{m['floor_us']} µs (nginx {row['static_cpu_us_per_request']} µs + "
                     f"signature {m['terms_us']['signature']} + hashing "
                     f"{m['terms_us']['hashing']} + ledger {m['terms_us']['ledger']})")
        methodology.append(
            "The floor (issue 25): in the same run, nginx (one worker, loopback, `return 200` "
            "with the bytes of a reply the daemon gave and its extra headers) under the same wrk "
            "load gives HTTP's CPU per request from /proc; handler_latency's p50s give one "
            "Ed25519 signature and SHA-256 of the request, receipt and token texts; "
            "ledger_append.py, beside each mode's daemon, gives the CPU per record of writing "
            "batches of its record size and records per commit (and, with fsync, one "
            "fdatasync per batch). Their sum is "
            "the floor; the daemon's CPU per request is set against it per connection count and "
            "durability mode, and /decide's against nginx's.")
    if tlog is not None:
        summary["transparency_log"] = tlog
        methodology.append(
            "Transparency log: the same fsync load on three daemons one after another, each "
            "with a fresh key and ledger: no log (the reference), the log on (--log-key) with "
            "every receipt signed, and the log on with --receipt-signing batch (no signature per "
            "receipt; each reply waits for a signed checkpoint covering its record, then carries "
            "the inclusion proof). Checkpoints signed, leaves per checkpoint and the checkpoint "
            "lag (a checkpoint's newest record's durability to its publication) are the "
            "differences of the daemon's trigguard_log_* counters and lag histogram over the "
            "timed window; the lag's p99 is the bound of the histogram bucket that reaches 99 %."
            + (" Then alternating A/B rounds of the three (a fresh daemon and ledger per side "
               "and round, the order rotating), whose median ratios are the figures to quote: "
               "consecutive long runs on a shared VM differ by several per cent on their own."
               if "ab" in tlog else ""))
    benchlib.validate_summary(summary)
    return summary


def print_summary(path):
    s = benchlib.load_json(path)
    benchlib.validate_summary(s)
    print(f"benchmark summary ({s['mode']}, {s['generated']}, commit {s['git']['commit']}):")
    for h in s["harnesses"]:
        for r in h["runs"]:
            lat = r["latency_ms"]
            print(f"  {h['benchmark']:<26} {h['durability'][:14]:<14} {r['name']:<17} "
                  f"p50 {lat['p50']:9.4f} ms  p99 {lat['p99']:9.4f} ms  "
                  f"p99.9 {lat['p99_9']:9.4f} ms  {r['throughput_per_s']:>12,.0f}/s  "
                  f"errors {r['errors']['count']}")
    for c in s["comparison"]:
        print(f"  vs original: {c['metric']:<62} ours {c['ours']:>12,.4g} theirs "
              f"{c['theirs']:>10,.4g} {c['unit']:<3} x{c['advantage']:.2f}")
    st = s.get("stores")
    if st:
        for row in st["rows"]:
            ratio = row["ratio_to_file_fsync"]
            verdict = {True: "  meets the bar", False: "  BELOW the bar", None: ""}[
                row["meets_criteria"]]
            print(f"  store: {row['variant']:<44} c={row['concurrency']:<4} "
                  f"{row['throughput_per_s']:>10,.0f}/s  p99 {row['p99_ms']:8.3f} ms  "
                  f"errors {row['errors']}  ratio {'n/a' if ratio is None else f'{ratio:.3f}'}"
                  f"  records/commit {row['records_per_commit']}  commit "
                  f"{row['mean_commit_ms']} ms  cpu {row['cpu_us_per_request']} us/req"
                  f"{verdict}")
        ab = st.get("ab")
        if ab:
            for r in ab["rounds"]:
                print(f"  store A/B round {r['round']}: file {r['file']['throughput_per_s']:,.0f}/s"
                      f" (p99 {r['file']['p99_ms']:.2f} ms), postgres "
                      f"{r['postgres']['throughput_per_s']:,.0f}/s (p99 "
                      f"{r['postgres']['p99_ms']:.2f} ms, errors {r['postgres']['errors']}): "
                      f"ratio {r['ratio']:.3f}")
            print(f"  store A/B: median ratio {ab['median_ratio']:.3f} (min {ab['min_ratio']:.3f},"
                  f" max {ab['max_ratio']:.3f}) over {len(ab['rounds'])} rounds")
        for why in st["skipped"]:
            print(f"  skipped: {why}")
    tl = s.get("transparency_log")
    lab = (tl or {}).get("ab")
    if lab:
        for r in lab["rounds"]:
            print(f"  log A/B round {r['round']}: no log {r['no_log']['throughput_per_s']:,.0f}/s,"
                  f" log {r['log']['throughput_per_s']:,.0f}/s (ratio {r['log_ratio']:.3f})"
                  + (f", batch {r['batch']['throughput_per_s']:,.0f}/s (ratio "
                     f"{r['batch_ratio']:.3f})" if r["batch"] else ""))
        print(f"  log A/B: median log ratio {lab['median_log_ratio']:.3f} (cost "
              f"{lab['log_cost']}), median batch ratio {lab['median_batch_ratio']}")
    for row in (tl or {}).get("rows", []):
        for k in ("no_log", "log", "batch"):
            x = row[k]
            if x is None:
                continue
            print(f"  log: {k:<7} c={row['concurrency']:<4} {x['throughput_per_s']:>10,.0f}/s  "
                  f"p99 {x['p99_ms']:8.3f} ms  errors {x['errors']}  daemon cpu "
                  f"{x['daemon_cpu_us_per_request']} us/req  checkpoints/s "
                  f"{x['signatures_per_s']}  lag mean {x['lag_mean_ms']} ms, p99 <= "
                  f"{x['lag_p99_bucket_le_ms']} ms")
        print(f"  log: c={row['concurrency']} cost {row['log_cost']}  batch ratio "
              f"{row['batch_ratio']}  checks {row['checks']}")
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="summarize.py")
    p.add_argument("--mode", default="custom", choices=("full", "quick", "custom"))
    p.add_argument("--command", default="scripts/bench")
    p.add_argument("--loadavg-before", default="")
    p.add_argument("--build-dir", default="")
    p.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    p.add_argument("--log-ab", action="append", default=[],
                   help="an artifact of the transparency log's A/B rounds (log_ab/r<N>_*.json)")
    p.add_argument("--store-ab", action="append", default=[],
                   help="an A/B round's load artifact, r<N>_file.json or r<N>_postgres.json")
    p.add_argument("--skip", action="append", default=[],
                   help="a step the pipeline skipped and why (repeatable; shown on the page)")
    p.add_argument("--output")
    p.add_argument("--print", dest="print_path")
    p.add_argument("artifacts", nargs="*")
    a = p.parse_args(argv)
    if a.print_path:
        return print_summary(a.print_path)
    if not a.output or not a.artifacts:
        p.error("--output and at least one artifact are required")
    summary = build_summary(a)
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.output)
    return 0


if __name__ == "__main__":
    benchlib.run_main(main, "summarize.py")
