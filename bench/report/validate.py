#!/usr/bin/env python3
"""validate.py — check benchmark artifacts and a summary against docs/BENCHMARKS.md.

usage: validate.py [--expect-zero-errors] SUMMARY.json | ARTIFACT.json...

For a summary: the summary schema, every artifact it lists (read from the summary's
directory: schema, and the sha256 recorded in the summary), and for every artifact with raw
samples an independent recomputation of the nearest-rank percentiles from the raw file,
which must equal the harness's figures, and the "floor" block recomputed from the artifact
files (benchlib.floor_block). For an artifact: its schema. Exit 0 when all holds.
"""
import gzip
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402


def check_raw(raw_path, run, where):
    with gzip.open(raw_path, "rt", encoding="ascii") as f:
        vals = [int(line) for line in f if line.strip()]
    ok = sorted(v for v in vals if v >= 0)
    if len(vals) != run["requests"] or len(ok) != run["ok"]:
        raise benchlib.SchemaError(f"{where}: raw file has {len(vals)} samples ({len(ok)} ok), "
                                   f"the run says {run['requests']} ({run['ok']} ok)")
    lat = run["latency_ms"]
    for key, p in (("min", 0), ("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99),
                   ("p99_9", 99.9), ("max", 100)):
        mine = benchlib.nearest_rank(ok, p) / 1e6
        if abs(mine - lat[key]) > 1.5e-6:
            raise benchlib.SchemaError(f"{where}: {key} recomputed from the raw samples is "
                                       f"{mine:.6f} ms, the artifact says {lat[key]}")
    return len(ok)


def main(argv):
    expect_zero = "--expect-zero-errors" in argv
    paths = [a for a in argv if a != "--expect-zero-errors"]
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    checked = 0
    for path in paths:
        doc = benchlib.load_json(path)
        if doc.get("schema") == benchlib.SUMMARY_SCHEMA:
            benchlib.validate_summary(doc, path)
            base = os.path.dirname(os.path.abspath(path))
            for art in doc["artifacts"]:
                apath = os.path.join(base, art["file"])
                with open(apath, "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != art["sha256"]:
                        raise benchlib.SchemaError(f"{apath}: sha256 differs from the summary")
                adoc = benchlib.load_json(apath)
                benchlib.validate_artifact(adoc, apath)
                if art.get("raw_samples"):
                    n = check_raw(os.path.join(base, art["raw_samples"]), adoc["runs"][0],
                                  apath)
                    print(f"validate.py: {art['file']}: percentiles recomputed from {n} raw "
                          "samples match")
                checked += 1
            if "floor" in doc:
                # The floor from the artifacts themselves, not from the summary's copies of
                # their runs: a summary edited consistently with itself is still caught.
                hs = []
                for h in doc["harnesses"]:
                    adoc = benchlib.load_json(os.path.join(base, h["file"]))
                    hs.append(dict(h, runs=adoc["runs"], server=adoc.get("server")))
                if benchlib.floor_block(hs) != doc["floor"]:
                    raise benchlib.SchemaError(f"{path}: floor is not what its artifacts give")
                print(f"validate.py: floor: {len(doc['floor']['rows'])} rows recomputed from "
                      "their artifacts match")
            ab = (doc.get("stores") or {}).get("ab")
            if ab is not None:
                docs = [(a["file"], benchlib.load_json(os.path.join(base, a["file"])))
                        for a in doc["artifacts"] if a["file"].startswith("store_ab/")]
                if benchlib.store_ab(docs) != ab:
                    raise benchlib.SchemaError(f"{path}: stores.ab is not what its round "
                                               "artifacts give")
                print(f"validate.py: store A/B: {len(ab['rounds'])} rounds recomputed from "
                      "their artifacts match")
            lab = (doc.get("transparency_log") or {}).get("ab")
            if lab is not None:
                docs = [(a["file"], benchlib.load_json(os.path.join(base, a["file"])))
                        for a in doc["artifacts"] if a["file"].startswith("log_ab/")]
                if benchlib.log_ab(docs) != lab:
                    raise benchlib.SchemaError(f"{path}: transparency_log.ab is not what its "
                                               "round artifacts give")
                print(f"validate.py: log A/B: {len(lab['rounds'])} rounds recomputed from "
                      "their artifacts match")
            runs = [r for h in doc["harnesses"] for r in h["runs"]]
        else:
            benchlib.validate_artifact(doc, path)
            runs = doc["runs"]
        checked += 1
        if expect_zero:
            bad = [r["name"] for r in runs if r["errors"]["count"]]
            if bad:
                raise benchlib.SchemaError(f"{path}: runs with errors: {', '.join(bad)}")
    print(f"validate.py: {checked} documents valid")
    return 0


if __name__ == "__main__":
    benchlib.run_main(main, "validate.py",
                      (benchlib.SchemaError, OSError, ValueError, KeyError), what="")
