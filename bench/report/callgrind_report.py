#!/usr/bin/env python3
"""callgrind_report.py — callgrind.json from scripts/callgrind's work directory.

usage: callgrind_report.py --work DIR --out FILE --requests N --warmup N --cases "LIST"
           --tree-commit SHA --tree-dirty true|false --build-dir DIR --valgrind VERSION
           --toggles "FN..." --command CMD [--ref GITREF --ref-commit SHA]

Reads DIR/<build>/<case>/<measure>/dump (callgrind's dump of the measured phase) and
client.json (the client's verified count). The figure of a dump is its "summary:" line (the
instructions callgrind counted between the zero and the dump, what callgrind_annotate calls
PROGRAM TOTALS); "totals:" (the sum of the cost lines written; a little larger, 0.05-0.2 % in the
first runs) is kept beside it, and the self costs per function and per object
are read from the cost lines and add up to it exactly. The schema is in
docs/BENCHMARKS.md ("callgrind.json"); validate_callgrind.py checks it.
Standard library only.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402

SCHEMA = "trigguard-callgrind/1"
CASES = {
    "decide": ("/decide", None),
    "evaluate_none": ("/v1/evaluate", "none"),
    "evaluate_fsync": ("/v1/evaluate", "fsync"),
}
MEASURES = ("handler", "process")
TOP = 15


def read_dump(path):
    """The "events:", "summary:" and "totals:" lines of a callgrind output file."""
    found = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            for key in ("events", "summary", "totals"):
                if line.startswith(key + ":"):
                    found[key] = line.split(":", 1)[1].strip()
    if found.get("events") != "Ir":
        raise ValueError(f"{path}: events are {found.get('events')!r}, expected Ir only")
    try:
        return int(found["summary"]), int(found["totals"])
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: no integer summary:/totals: line") from e


NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


def self_costs(path):
    """{(object, function): self Ir} from the dump itself (callgrind's format: name
    compression "(id) name", a cost line "<position> <Ir>", and the line after "calls=" an
    inclusive cost of a call, which is not self cost). The values add up to the "totals:"
    line. callgrind_annotate is not used for this: for the frames still on a stack when the
    dump is taken (thread starts, main, the event loop) it shows their inclusive cost as
    self, so its self column adds up to far more than the total."""
    names = {"ob": {}, "fn": {}}
    kinds = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn"}
    ob = fn = None
    costs, after_calls = {}, False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line[0].isdigit() or line[0] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                t = line.split()
                if len(t) > 1:
                    costs[(ob, fn)] = costs.get((ob, fn), 0) + int(t[1])
                continue
            after_calls = False
            key, _, val = line.partition("=")
            if key == "calls":
                after_calls = True
            elif key in kinds:
                m = NAMED.match(val)
                name = val
                if m is not None:
                    if m.group(2) is not None:
                        names[kinds[key]][m.group(1)] = m.group(2)
                    name = names[kinds[key]].get(m.group(1), "?")
                if key == "ob":
                    ob = name
                elif key == "fn":
                    fn = name
    return [(fn or "?", os.path.basename(ob or "") or "unknown", ir)
            for (ob, fn), ir in costs.items() if ir > 0]


def per_req(ir, n):
    return round(ir / n, 1)


def top_functions(rows, n, total):
    rows = sorted(rows, key=lambda r: -r[2])[:TOP]
    return [{"function": fn, "object": obj, "ir": ir, "ir_per_request": per_req(ir, n),
             "share": round(ir / total, 4)} for fn, obj, ir in rows]


def by_object(rows, n, total):
    sums = {}
    for _, obj, ir in rows:
        sums[obj] = sums.get(obj, 0) + ir
    return [{"object": obj, "ir": ir, "ir_per_request": per_req(ir, n),
             "share": round(ir / total, 4)}
            for obj, ir in sorted(sums.items(), key=lambda kv: -kv[1])]


def measure(work, build, case, what, n):
    d = os.path.join(work, build, case, what)
    summary, totals = read_dump(os.path.join(d, "dump"))
    client = benchlib.load_json(os.path.join(d, "client.json"))
    runs = client.get("runs") or [client]
    ok = sum(r.get("ok", 0) for r in runs)
    sent = sum(r.get("requests", 0) for r in runs)
    if sent != n or ok != n:
        raise ValueError(f"{d}: the client sent {sent} requests, {ok} verified; expected {n}")
    m = {"summary_ir": summary, "totals_ir": totals, "requests": n,
         "ir_per_request": per_req(summary, n)}
    rows = self_costs(os.path.join(d, "dump"))
    if sum(r[2] for r in rows) != totals:
        raise ValueError(f"{d}/dump: the self costs add up to {sum(r[2] for r in rows)}, "
                         f"its totals: line says {totals}")
    m["sha256_compress"] = sorted({fn for fn, _, _ in rows
                                   if fn.startswith("_nettle_sha256_compress")})
    m["top_self"] = top_functions(rows, n, totals)
    m["by_object"] = by_object(rows, n, totals)
    return m


def main(argv):
    ap = argparse.ArgumentParser(prog="callgrind_report.py")
    for opt in ("--work", "--out", "--cases", "--tree-commit", "--tree-dirty", "--build-dir",
                "--valgrind", "--toggles", "--command"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--ref")
    ap.add_argument("--ref-commit")
    a = ap.parse_args(argv)
    n = a.requests
    builds = ["tree"] + (["ref"] if a.ref else [])
    cases = []
    for name in a.cases.split():
        endpoint, dur = CASES[name]
        c = {"name": name, "endpoint": endpoint, "durability": dur}
        for b in builds:
            c[b] = {w: measure(a.work, b, name, w, n) for w in MEASURES}
        if a.ref:
            c["ratio"] = {w: round(c["tree"][w]["summary_ir"] / c["ref"][w]["summary_ir"], 4)
                          for w in MEASURES}
        cases.append(c)
    env = benchlib.environment(build_dir=a.build_dir, git_commit=a.tree_commit)
    # valgrind's CPU has no SHA extensions: nettle's run-time choice takes its plain x86_64
    # assembly here even where the machine has SHA-NI, so hashing counts more instructions
    # under callgrind than it executes natively. Said in the document, not left to guess.
    flags = benchlib._read_field("/proc/cpuinfo", "flags").split()
    used = sorted({f for c in cases for b in builds for w in MEASURES
                   for f in c[b][w].pop("sha256_compress")})
    sha = {"host_has_sha_ni": "sha_ni" in flags, "compress_functions_under_valgrind": used,
           "note": "valgrind's emulated CPU has no SHA extensions, so nettle's SHA-256 runs "
                   "its x86_64 assembly under callgrind; where the host has SHA-NI the daemon "
                   "runs _nettle_sha256_compress_sha_ni natively, with fewer instructions: "
                   "the hashing counts here are those of the fallback path"}
    doc = {
        "schema": SCHEMA,
        "date": benchlib.utc_now(),
        "command": a.command,
        "valgrind": a.valgrind,
        "tree": {"commit": a.tree_commit, "dirty": a.tree_dirty == "true"},
        "ref": {"gitref": a.ref, "commit": a.ref_commit} if a.ref else None,
        "requests": n,
        "warmup": a.warmup,
        "daemon": "trigguard serve --threads 1 on 127.0.0.1, a fresh ledger per daemon; "
                  "bench/http_latency_bench, one keep-alive connection, sequential requests, "
                  "a fresh idempotency key each",
        "measures": {
            "handler": {"toggle_collect": a.toggles.split(),
                        "what": "instructions inside the toggled functions and their callees "
                                "(the request handler on the event thread)"},
            "process": {"toggle_collect": [],
                        "what": "every instruction of every thread of the daemon between "
                                "callgrind_control --zero and --dump (HTTP, handler, ledger "
                                "writer and completion threads, timers)"},
        },
        "environment": {k: env[k] for k in ("cpu_model", "cpu_cores", "kernel", "os", "compiler",
                                            "build_type", "c_flags", "libraries")},
        "sha256": sha,
        "cases": cases,
    }
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, a.out)
    for c in cases:
        line = f"{c['name']:15s}"
        for w in MEASURES:
            line += f"  {w}: tree {c['tree'][w]['ir_per_request']:>12,.1f}"
            if a.ref:
                line += f" ref {c['ref'][w]['ir_per_request']:>12,.1f} ({c['ratio'][w]:.4f}x)"
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
