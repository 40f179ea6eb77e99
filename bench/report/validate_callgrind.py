#!/usr/bin/env python3
"""validate_callgrind.py — check a callgrind.json (scripts/callgrind) against docs/BENCHMARKS.md.

usage: validate_callgrind.py [--raw DIR] CALLGRIND.json

Holds the document to its schema and recomputes every derived figure from the raw counts in
it: each measure's ir_per_request from summary_ir / requests, each ratio from the tree's and
the ref's summary_ir, each top function's and object's per-request figure and share (of
totals_ir), and that the objects' self costs add up to totals_ir exactly. A zero
count is an error (a toggle that matched nothing would otherwise pass as "no instructions").
With --raw DIR (the raw/ directory scripts/callgrind writes beside the JSON), every count is
also read again from its dump, <build>-<case>-<measure>.callgrind.out.gz. Exit 0 when all
holds, 1 with the first violation on stderr. Standard library only.
"""
import gzip
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402
from benchlib import SchemaError, _is_int, _is_num  # noqa: E402

SCHEMA = "trigguard-callgrind/1"
CASES = {"decide": ("/decide", None), "evaluate_none": ("/v1/evaluate", "none"),
         "evaluate_fsync": ("/v1/evaluate", "fsync")}
MEASURES = ("handler", "process")


def req(cond, where, msg):
    if not cond:
        raise SchemaError(f"{where}: {msg}")


def close(a, b, tol):
    return _is_num(a) and abs(a - b) <= tol


def check_rows(rows, key, n, total, where, whole):
    req(isinstance(rows, list) and rows, where, "must be a non-empty list")
    prev = None
    for i, r in enumerate(rows):
        w = f"{where}[{i}]"
        req(isinstance(r, dict) and isinstance(r.get(key), str) and r[key], w, f"no {key}")
        req(_is_int(r.get("ir")) and r["ir"] > 0, w, "ir must be a positive integer")
        req(prev is None or r["ir"] <= prev, w, "rows must be sorted by ir, largest first")
        prev = r["ir"]
        req(close(r.get("ir_per_request"), r["ir"] / n, 0.051), w,
            f"ir_per_request {r.get('ir_per_request')} != ir / requests = {r['ir'] / n:.1f}")
        req(close(r.get("share"), r["ir"] / total, 0.00006), w,
            f"share {r.get('share')} != ir / totals_ir = {r['ir'] / total:.4f}")
    got = sum(r["ir"] for r in rows)
    if whole:
        req(got == total, where, f"the rows add up to {got}, not totals_ir {total}")
    else:
        req(got <= total, where, f"the rows add up to {got}, more than totals_ir {total}")


def check_measure(m, n, where):
    req(isinstance(m, dict), where, "must be an object")
    for k in ("summary_ir", "totals_ir"):
        req(_is_int(m.get(k)) and m[k] > 0, where, f"{k} must be a positive integer")
    req(m.get("requests") == n, where, f"requests {m.get('requests')} != the document's {n}")
    req(close(m.get("ir_per_request"), m["summary_ir"] / n, 0.051), where,
        f"ir_per_request {m.get('ir_per_request')} != summary_ir / requests = "
        f"{m['summary_ir'] / n:.1f}")
    check_rows(m.get("top_self"), "function", n, m["totals_ir"], where + ".top_self", False)
    check_rows(m.get("by_object"), "object", n, m["totals_ir"], where + ".by_object", True)


def read_raw(path):
    found = {}
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            for key in ("summary", "totals"):
                if line.startswith(key + ":"):
                    found[key] = int(line.split(":", 1)[1])
    return found.get("summary"), found.get("totals")


def validate(doc, raw=None):
    req(isinstance(doc, dict) and doc.get("schema") == SCHEMA, "document",
        f"schema must be {SCHEMA}")
    for k in ("date", "command", "valgrind", "daemon"):
        req(isinstance(doc.get(k), str) and doc[k], "document", f"{k} must be a non-empty string")
    req(doc["valgrind"].startswith("valgrind-"), "document",
        "valgrind must be `valgrind --version`")
    tree = doc.get("tree")
    req(isinstance(tree, dict) and isinstance(tree.get("commit"), str) and
        len(tree["commit"]) == 40 and isinstance(tree.get("dirty"), bool), "tree",
        "needs a 40-digit commit and a boolean dirty")
    ref = doc.get("ref")
    req(ref is None or (isinstance(ref, dict) and isinstance(ref.get("gitref"), str) and
                        isinstance(ref.get("commit"), str) and len(ref["commit"]) == 40),
        "ref", "must be null or {gitref, commit (40 digits)}")
    n = doc.get("requests")
    req(_is_int(n) and n > 0, "document", "requests must be a positive integer")
    req(_is_int(doc.get("warmup")) and doc["warmup"] >= 0, "document", "warmup must be >= 0")
    ms = doc.get("measures")
    req(isinstance(ms, dict) and set(ms) == set(MEASURES), "measures", f"must be {MEASURES}")
    req(isinstance(ms["handler"].get("toggle_collect"), list) and ms["handler"]["toggle_collect"],
        "measures.handler", "toggle_collect must name the handler's functions")
    req(ms["process"].get("toggle_collect") == [], "measures.process",
        "toggle_collect must be empty (the whole process)")
    req(isinstance(doc.get("environment"), dict), "environment", "must be an object")
    sha = doc.get("sha256")
    req(isinstance(sha, dict) and isinstance(sha.get("host_has_sha_ni"), bool) and
        isinstance(sha.get("compress_functions_under_valgrind"), list) and
        isinstance(sha.get("note"), str), "sha256",
        "needs host_has_sha_ni, compress_functions_under_valgrind and note")
    cases = doc.get("cases")
    req(isinstance(cases, list) and cases, "cases", "must be a non-empty list")
    builds = ("tree", "ref") if ref is not None else ("tree",)
    seen = set()
    for i, c in enumerate(cases):
        w = f"cases[{i}]"
        req(isinstance(c, dict) and c.get("name") in CASES, w, f"name must be one of {list(CASES)}")
        req(c["name"] not in seen, w, f"{c['name']} appears twice")
        seen.add(c["name"])
        w = f"cases.{c['name']}"
        endpoint, dur = CASES[c["name"]]
        req(c.get("endpoint") == endpoint and c.get("durability") == dur, w,
            f"endpoint/durability must be {endpoint}/{dur}")
        for b in builds:
            req(isinstance(c.get(b), dict) and set(c[b]) == set(MEASURES), f"{w}.{b}",
                f"must have {MEASURES}")
            for m in MEASURES:
                check_measure(c[b][m], n, f"{w}.{b}.{m}")
                if raw is not None:
                    p = os.path.join(raw, f"{b}-{c['name']}-{m}.callgrind.out.gz")
                    req(os.path.exists(p), f"{w}.{b}.{m}", f"raw dump {p} is missing")
                    s, t = read_raw(p)
                    req((s, t) == (c[b][m]["summary_ir"], c[b][m]["totals_ir"]), f"{w}.{b}.{m}",
                        f"the raw dump says summary {s}, totals {t}; the document says "
                        f"{c[b][m]['summary_ir']}, {c[b][m]['totals_ir']}")
        if ref is None:
            req("ratio" not in c, w, "a ratio without a ref")
            continue
        ratio = c.get("ratio")
        req(isinstance(ratio, dict) and set(ratio) == set(MEASURES), w + ".ratio",
            f"must have {MEASURES}")
        for m in MEASURES:
            want = c["tree"][m]["summary_ir"] / c["ref"][m]["summary_ir"]
            req(close(ratio[m], want, 0.00006), f"{w}.ratio.{m}",
                f"{ratio[m]} != tree/ref summary_ir = {want:.4f}")


def main(argv):
    raw = None
    if len(argv) >= 2 and argv[0] == "--raw":
        raw, argv = argv[1], argv[2:]
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    validate(benchlib.load_json(argv[0]), raw)
    print(f"{argv[0]}: valid", file=sys.stderr)
    return 0


if __name__ == "__main__":
    benchlib.run_main(main, "validate_callgrind.py", catch=(ValueError, OSError),
                      what="")
