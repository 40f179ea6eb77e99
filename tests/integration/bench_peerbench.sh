#!/usr/bin/env bash
# bench_peerbench.sh — what scripts/peerbench computes, on fixtures (no daemon, no wrk, ~1 s).
#
# bench/report/peerbench.py turns the raw outputs of a peerbench run into evidence: the
# ledger line of a /metrics scrape, one A/B point per wrk run (the ledger counters' change
# between two scrapes, and evaluate.lua's JSON), and http_durability_ab.json with the median
# RPS per mode. Here it runs on tests/integration/data/peerbench (two scrapes of a real run,
# trimmed, and the wrk JSON of its first two points) and the figures are checked against
# values worked out by hand; the committed evidence/artifacts/benchmarks/http_durability_ab.json
# (written by the jq program this replaced) must come out of ab_document unchanged; and bad
# points are refused without writing a document.
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" bench_peerbench
report=$TG_SRC/bench/report/peerbench.py
data=$TG_SRC/tests/integration/data/peerbench

# The ledger line of one scrape: 157934 records in 7183 batches = 21.99 a batch; fsync sum
# 5.438234 s over 7183 = 0.757 ms.
line=$("$py" "$report" ledger-summary "$data/after.prom")
check "ledger-summary runs" test $? = 0
check "ledger line: $line" test "$line" = \
    "records=157934 batches=7183 mean_batch=21.99 fsyncs=7183 mean_fsync_ms=0.757 cumulative batch sizes: <=1:2000 <=4:4000 <=+Inf:7183"
line=$("$py" "$report" ledger-summary "$tmp/no-such-scrape.prom")
check "a missing scrape is all zero: $line" test "$line" = \
    "records=0 batches=0 mean_batch=0.00 fsyncs=0 mean_fsync_ms=0.000 cumulative batch sizes:"

# Three rounds of both modes. The wrk JSON is the fixture's with rps set per round:
# fsync 15679, 10000, 20000 (median 15679); none 23119.3, 30000, 20000 (median 23119.3);
# fsync over none = 15679 / 23119.3 = 0.67818... -> 0.678.
points=$tmp/ab.jsonl
for round in 1 2 3; do
    for mode in fsync none; do
        "$py" - "$data/wrk-$mode.json" "$tmp/wrk.json" "$mode" "$round" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))
w["rps"] = {"fsync": [15679, 10000, 20000], "none": [23119.3, 30000, 20000]}[sys.argv[3]][
    int(sys.argv[4]) - 1]
json.dump(w, open(sys.argv[2], "w"))
PY
        line=$("$py" "$report" ab-point --points "$points" --durability "$mode" --round "$round" \
            --connections 50 --before "$data/before.prom" --after "$data/after.prom" \
            --wrk "$tmp/wrk.json")
        check "ab-point $mode $round runs" test $? = 0
        [ "$round$mode" != 1fsync ] || check "point line: $line" test "$line" = \
            'A/B round 1 fsync c=50: rps=15679 p50=2900us p99=6136us errors={"connect":0,"read":0,"write":0,"timeout":0,"status":0,"non_2xx":0,"non_permit":0} batches=6783 records=156934'
    done
done
check "six points, one line each" test "$(wc -l <"$points")" = 6

line=$("$py" "$report" ab-summary --points "$points" --connections 50 --duration 10 \
    --trigguard "${TG_BIN:-}" --output "$tmp/ab.json")
check "ab-summary runs" test $? = 0
check "ab-summary prints the medians: $line" test "$line" = \
    '{"median_rps":{"fsync":15679,"none":23119.3},"fsync_over_none_rps":0.678}'

check "the document holds what was measured" "$py" - "$tmp/ab.json" "$data/wrk-none.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["connections"] == 50 and d["duration_s"] == 10, d
assert d["method"].startswith("wrk -t1 -c50 -d10s --latency"), d["method"]
assert len(d["points"]) == 6
assert [(p["round"], p["durability"]) for p in d["points"]] == [
    (r, m) for r in (1, 2, 3) for m in ("fsync", "none")]
# the ledger's work during each run: after.prom minus before.prom
for p in d["points"]:
    assert p["connections"] == 50
    assert p["ledger"] == {"records": 156934, "batches": 6783, "fsync_seconds": 5.188234}, p
# wrk's JSON is kept whole (only rps was changed by this test)
w = json.load(open(sys.argv[2]))
kept = dict(d["points"][1]["wrk"], rps=w["rps"])
assert kept == w, (kept, w)
assert d["median_rps"] == {"fsync": 15679, "none": 23119.3}
assert d["fsync_over_none_rps"] == 0.678
env = d["environment"]
assert set(env) == {"cpu", "cores", "kernel", "gcc", "trigguard", "wrk", "build"}, env
assert isinstance(env["cores"], int) and env["cores"] >= 1
assert len(d["date"]) == 20 and d["date"].endswith("Z")
PY

check "medians, ratios and the committed evidence" "$py" - "$TG_SRC" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench/report")
import benchlib
import peerbench as pb
assert pb.median([]) is None and pb.median([3]) == 3
assert pb.median([4, 1, 3]) == 3 and pb.median([4, 1, 3, 2]) == 2.5
assert pb.ratio(1, 3) == 0.333 and pb.ratio(2, 3) == 0.667 and pb.ratio(1, 8) == 0.125
assert pb.ratio(None, 2) is None and pb.ratio(2, None) is None and pb.ratio(2, 0) is None
# one mode missing: no median for it and no ratio, and the document is still valid
ev = json.load(open(sys.argv[1] + "/evidence/artifacts/benchmarks/http_durability_ab.json"))
only = [p for p in ev["points"] if p["durability"] == "fsync"]
d = pb.ab_document(only, ev["connections"], ev["duration_s"], ev["environment"], ev["date"],
                   ev["git_commit"])
assert d["median_rps"]["none"] is None and d["fsync_over_none_rps"] is None
pb.validate_ab(d)
# The committed A/B document (made by the jq program scripts/peerbench had before) comes out
# of ab_document unchanged, and validates.
again = pb.ab_document(ev["points"], ev["connections"], ev["duration_s"], ev["environment"],
                       ev["date"], ev["git_commit"])
assert again == ev, [k for k in ev if ev[k] != again.get(k)]
pb.validate_ab(ev)
# The validator can fail: a median that is not its points', a point of another size.
for key, bad in (("median_rps", {"fsync": 1, "none": 2}), ("fsync_over_none_rps", 0.5),
                 ("connections", 10), ("git_commit", "")):
    b = json.loads(json.dumps(ev))
    b[key] = bad
    try:
        pb.validate_ab(b)
    except benchlib.SchemaError:
        continue
    raise AssertionError(f"{key} = {bad!r} accepted")
PY

# A point that is not one (a round that is not a number) is refused, and no document written.
sed 's/"round":1,/"round":"one",/' "$points" >"$tmp/bad.jsonl"
rc=0
"$py" "$report" ab-summary --points "$tmp/bad.jsonl" --connections 50 --duration 10 \
    --output "$tmp/bad.json" 2>"$tmp/bad.err" || rc=$?
check "ab-summary refuses a bad point" test "$rc" = 1
check "and says why: $(cat "$tmp/bad.err")" grep -q "round >= 1" "$tmp/bad.err"
check "no document for bad points" test ! -e "$tmp/bad.json"
rc=0
"$py" "$report" ab-point --points "$tmp/p.jsonl" --durability fsync --round 1 --connections 50 \
    --before "$data/before.prom" --after "$data/after.prom" --wrk "$tmp/no-wrk.json" \
    2>/dev/null || rc=$?
check "ab-point without wrk's JSON fails" test "$rc" = 1
check "and appends nothing" test ! -e "$tmp/p.jsonl"

checks_done
