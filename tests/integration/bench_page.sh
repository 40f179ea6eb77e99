#!/usr/bin/env bash
# bench_page.sh — the evidence page generator on a synthetic summary (no daemon, ~1 s).
#
# Builds artifacts with known figures (bench/report/benchlib.py's schema), aggregates them
# with summarize.py, renders the page with render_page.py, and checks: every section and one
# chart per harness, the figures and ratios appear as computed by hand, nothing is loaded
# from anywhere (check_page.py --static-only), text is escaped, and a summary that breaks the
# schema is refused. BENCH_PAGE_CHROMIUM=1 also renders it in headless chromium.
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" bench_page

mkdir -p "$tmp/bench"
check "synthetic artifacts written" "$py" - "$TG_SRC/bench/report" "$tmp/bench" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
out = sys.argv[2]
env = benchlib.environment(None, "fsync", "abc123def456")

def run(name, conc, ms_values, rps, errors=0):
    # ms_values: 1000 samples; digest and figures by nearest rank, as the harnesses do
    s = sorted(ms_values)
    n = len(s)
    at = lambda p: s[max(1, min(n, -(-round(p * 1e6) * n // 10**8))) - 1]
    return {"name": name, "concurrency": conc, "iterations": n, "duration_s": 1.0,
            "requests": n, "ok": n - errors,
            "latency_ms": {"min": s[0], "mean": sum(s) / n, "p50": at(50), "p90": at(90),
                           "p95": at(95), "p99": at(99), "p99_9": at(99.9), "max": s[-1]},
            "digest": {"definition": "nearest-rank", "percentiles": benchlib.DIGEST_PCTS,
                       "latency_ms": [at(p) for p in benchlib.DIGEST_PCTS]},
            "throughput_per_s": rps,
            "errors": {"count": errors, "rate": errors / n, "by_kind": {"status": errors}}}

def doc(bench, runs, durability, extra=None):
    d = {"schema": benchlib.SCHEMA, "benchmark": bench, "what": f"{bench} <synthetic & co>",
         "harness": "tests/integration/bench_page.sh", "method": "made up for the test",
         "not_measured": "anything real", "parameters": {"iterations": 1000, "warmup": 10},
         "server": {"durability": durability}, "environment": env, "runs": runs}
    d.update(extra or {})
    return d

lin = [i / 1000 for i in range(1, 1001)]          # 0.001 .. 1.000 ms
k = doc("kernel_fsm_latency",
        [dict(run("default", 1, [v / 100 for v in lin], 1e7), per_call_throughput_per_s=170686.0),
         dict(run("spend", 1, [v / 50 for v in lin], 5e6), per_call_throughput_per_s=139716.0)],
        "not applicable", {"clock": {"source": "CLOCK_MONOTONIC", "overhead_ns_p50": 30}})
# Handler runs whose p50s (sample 500 of 1000) are 34000, 5500, 14000, 850, 2000, 190 ns.
hr = [run(name, 1, [v * 2 * ns / 1e6 for v in lin], 1e5) for name, ns in (
    ("evaluate_handler", 34000), ("decide_handler", 5500), ("sign_receipt_hash", 14000),
    ("sha256_request", 850), ("sha256_receipt", 2000), ("sha256_token", 190))]
hd = doc("handler_latency", hr, "none", {"floor": {
    "what": "sign + three SHA-256 <synthetic>", "mandatory_crypto_p50_ns": 17040,
    "evaluate_handler_p50_ns": 34000, "decide_handler_p50_ns": 5500,
    "evaluate_minus_decide_p50_ns": 28500}})
del hd["server"]  # in process: no daemon
hd["environment"] = dict(env, durability="none")
dec = doc("http_decide_sequential", [run("sequential", 1, [v * 0.2 for v in lin], 9000.0)],
          "fsync")
ev = doc("http_evaluate_sequential", [run("sequential", 1, [v * 2.558 for v in lin], 934.0)],
         "fsync")
ld = doc("http_evaluate_load", [run("c10", 10, [v * 5 for v in lin], 3000.0),
                                run("c50", 50, [v * 10 for v in lin], 8312.0, errors=3),
                                run("c100", 100, [v * 20 for v in lin], 8000.0)], "fsync")
for name, d in (("k", k), ("h", hd), ("d", dec), ("e", ev), ("l", ld)):
    benchlib.validate_artifact(d, name)
    json.dump(d, open(f"{out}/{name}.json", "w"))
PY

check "summarize.py aggregates them" "$py" "$TG_SRC/bench/report/summarize.py" --mode custom \
    --command "test command" --loadavg-before "0.10 0.20 0.30" --note "A <note> & more." \
    --output "$tmp/summary.json" "$tmp/bench/k.json" "$tmp/bench/h.json" "$tmp/bench/d.json" \
    "$tmp/bench/e.json" "$tmp/bench/l.json"
check "render_page.py writes the page" "$py" "$TG_SRC/bench/report/render_page.py" \
    --output "$tmp/index.html" "$tmp/summary.json"
check "the page is self-contained with every section" \
    "$py" "$TG_SRC/bench/report/check_page.py" --static-only "$tmp/index.html"

# Figures worked out by hand from the synthetic samples above:
#   kernel default p99 = 0.99/100 = 0.0099 ms vs 0.018 published -> x1.82 better
#   per-call kernel default 170,686/s vs 85,343/s -> x2.00 better
#   evaluate p99 = 0.990 * 2.558 = 2.53242 ms vs 1.279 -> ratio 1.98, x1.98 worse
#   load c50 8,312 RPS vs 4,156 -> x2.00 better; c50 p99 9.90 ms vs 21.33 -> x2.15 better
#   peak 8,312 vs 4,200 -> x1.98 better
check "summary ratios" "$py" - "$tmp/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
adv = {c["metric"]: c["advantage"] for c in s["comparison"]}
want = {"Kernel p99, default": 1.818, "Kernel throughput, default": 2.0,
        "/v1/evaluate sequential p99 (durability fsync)": 0.505,
        "50 connections RPS (durability fsync)": 2.0,
        "50 connections p99 (durability fsync)": 2.155,
        "Highest RPS measured vs their saturation (durability fsync)": 1.979}
for k, v in want.items():
    assert abs(adv[k] - v) < 0.002, (k, adv.get(k), v)
assert any("A <note> & more." == m for m in s["methodology"])
assert any("0.10 0.20 0.30" in m and "mostly idle" in m for m in s["methodology"])
head = {i["key"]: i["value"] for i in s["headline"]["items"]}
assert abs(head["handler_evaluate_p50_ms"] - 0.034) < 1e-9, head
assert abs(head["handler_decide_p50_ms"] - 0.0055) < 1e-9, head
assert abs(head["handler_crypto_floor_p50_ms"] - 0.01704) < 1e-12, head
h = next(x for x in s["harnesses"] if x["benchmark"] == "handler_latency")
assert h["floor"]["mandatory_crypto_p50_ns"] == 17040 and h["durability"] == "none"
assert any("(17.0 us here)" in m for m in s["methodology"])
PY
check "a handler floor that disagrees with its runs is refused" "$py" - "$TG_SRC/bench/report" \
    "$tmp/bench/h.json" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
d = json.load(open(sys.argv[2]))
benchlib.validate_artifact(d)
for key, bad in (("mandatory_crypto_p50_ns", 17999), ("decide_handler_p50_ns", -1),
                 ("what", ""), ("evaluate_minus_decide_p50_ns", 28499)):
    b = json.loads(json.dumps(d))
    b["floor"][key] = bad
    try:
        benchlib.validate_artifact(b)
    except benchlib.SchemaError:
        continue
    raise AssertionError(f"floor.{key} = {bad!r} accepted")
b = json.loads(json.dumps(d))
del b["floor"]
try:
    benchlib.validate_artifact(b)
    raise AssertionError("a handler document without floor accepted")
except benchlib.SchemaError:
    pass
PY
page=$tmp/index.html
check "one chart per harness" test "$(grep -c '<svg' "$page")" = 5
for text in '×1.82 better' '×2.00 better' '×1.98 worse' '8,312' '0.009900 ms (9,900 ns)' \
    '2.53 ms' 'A &lt;note&gt; &amp; more.' 'synthetic &amp; co' 'Apple M4 Pro' \
    'k6 run --env BASE_URL=http://127.0.0.1:8080 --env VUS=50' 'test command' \
    '>3<' '0.300%' 'Request handler, in process' 'Mandatory crypto floor p50' \
    'sign + three SHA-256 &lt;synthetic&gt;: 17.0 µs' 'difference 28.5 µs' 'sha256_token'; do
    check "page shows: $text" grep -qF -- "$text" "$page"
done
check "no unescaped markup from the data" bash -c "! grep -qF '<note>' '$page'"

# A summary that breaks the schema is refused, and no page is written.
"$py" - "$tmp/summary.json" "$tmp/bad.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
del s["published"]["hardware"]
json.dump(s, open(sys.argv[2], "w"))
PY
rc=0
"$py" "$TG_SRC/bench/report/render_page.py" --output "$tmp/bad.html" "$tmp/bad.json" 2>/dev/null || rc=$?
check "render_page.py refuses a summary without the original's hardware" test "$rc" = 1
check "no page for a bad summary" test ! -e "$tmp/bad.html"

# The PostgreSQL store beside the file ledger: one instance and two behind a balancer at 50
# connections, with hand-made /metrics and CPU blocks.
check "synthetic PostgreSQL artifacts written" "$py" - "$TG_SRC/bench/report" "$tmp/bench" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
out = sys.argv[2]
ld = json.load(open(f"{out}/l.json"))
c50 = next(r for r in ld["runs"] if r["concurrency"] == 50)

def pg_doc(instances, rps, records, commits, commit_s):
    r = dict(json.loads(json.dumps(c50)), throughput_per_s=rps,
             errors={"count": 0, "rate": 0.0, "by_kind": {}})
    r["ok"] = r["requests"]
    r["ledger"] = {"source": "synthetic", "instances": instances, "records": records,
                   "commits": commits, "batch_records_sum": records,
                   "batch_records_count": commits, "records_per_commit": records / commits,
                   "commit_seconds_sum": commit_s, "commit_seconds_count": commits,
                   "mean_commit_ms": 1000 * commit_s / commits}
    if instances > 1:
        half = {k: r["ledger"][k] // 2 for k in ("records", "commits", "batch_records_sum",
                                                  "batch_records_count")}
        r["ledger"]["per_instance"] = [half, half]
    r["cpu"] = {"source": "synthetic", "window_s": 1.0, "cores": 2,
                "machine": {"cpu_s": 0.5, "us_per_request": 500.0, "utilization": 0.25},
                "processes": {"postgres": {"cpu_s": 0.25, "us_per_request": 250.0}}}
    d = json.loads(json.dumps(ld))
    d["runs"] = [r]
    d["store"] = {"kind": "postgres", "instances": instances,
                  "postgres": {"settings": {"fsync": "on", "synchronous_commit": "on"}}}
    if instances > 1:
        d["store"]["balancer"] = "nginx 1.22.1, <1> worker"
    benchlib.validate_artifact(d, "pg")
    return d

# 4,156 / 8,312 = 50.0 %; 6,234 / 8,312 = 75.0 %; 1,000 records in 100 commits of 0.15 s
json.dump(pg_doc(1, 4156.0, 1000, 100, 0.15), open(f"{out}/p1.json", "w"))
# 2,078 / 8,312 = 25.0 %: below the bar, and the page says why.
json.dump(pg_doc(1, 2078.0, 1000, 100, 0.15), open(f"{out}/p1low.json", "w"))
json.dump(pg_doc(2, 6234.0, 1000, 400, 0.8), open(f"{out}/p2.json", "w"))
# The validator refuses a PostgreSQL run without its counters, and a derived figure that is
# not the ratio of its counts.
bad = pg_doc(1, 4156.0, 1000, 100, 0.15)
del bad["runs"][0]["ledger"]
try:
    benchlib.validate_artifact(bad)
    raise AssertionError("a PostgreSQL run without ledger counters accepted")
except benchlib.SchemaError:
    pass
bad = pg_doc(1, 4156.0, 1000, 100, 0.15)
bad["runs"][0]["ledger"]["records_per_commit"] = 12.0
try:
    benchlib.validate_artifact(bad)
    raise AssertionError("records_per_commit that is not sum/count accepted")
except benchlib.SchemaError:
    pass
PY
check "summarize.py aggregates them with the file runs" "$py" \
    "$TG_SRC/bench/report/summarize.py" --mode custom --command "test command" \
    --skip "a <skipped> step" --output "$tmp/summary-pg.json" "$tmp/bench/k.json" \
    "$tmp/bench/d.json" "$tmp/bench/e.json" "$tmp/bench/l.json" "$tmp/bench/p1.json" \
    "$tmp/bench/p2.json"
check "stores: ratios, bar and counters as computed by hand" "$py" - "$tmp/summary-pg.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
st = s["stores"]
rows = {r["variant"]: r for r in st["rows"]}
assert st["reference"] == "l.json" and st["skipped"] == ["a <skipped> step"], st
f, one = rows["file ledger, durability fsync"], rows["PostgreSQL, 1 instance"]
two = rows["PostgreSQL, 2 instances behind nginx 1.22.1"]
assert f["ratio_to_file_fsync"] == 1.0 and f["meets_criteria"] is None
assert one["ratio_to_file_fsync"] == 0.5 and one["meets_criteria"] is True, one
assert one["p99_ms"] == 9.9 and one["records_per_commit"] == 10.0, one
assert abs(one["mean_commit_ms"] - 1.5) < 1e-9 and one["cpu_us_per_request"] == 500.0, one
assert two["ratio_to_file_fsync"] == 0.75 and two["meets_criteria"] is None, two
assert two["records_per_commit"] == 2.5 and abs(two["mean_commit_ms"] - 2.0) < 1e-9, two
head = {i["key"]: i for i in s["headline"]["items"]}
assert head["load_postgres_c50_rps"]["value"] == 4156.0
assert "50 % of the file ledger" in head["load_postgres_c50_rps"]["detail"]
assert head["load_postgres_x2_c50_rps"]["value"] == 6234.0
# The PostgreSQL runs are not compared with the original (only the file ledger's are).
assert not any("postgres" in c["metric"].lower() for c in s["comparison"])
PY
check "render_page.py writes the page with the PostgreSQL section" "$py" \
    "$TG_SRC/bench/report/render_page.py" --output "$tmp/index-pg.html" "$tmp/summary-pg.json"
for text in 'id="stores"' '50.0 %' '75.0 %' '>met<' '10.00' '2.50' '>500<' \
    'Skipped: a &lt;skipped&gt; step' 'PostgreSQL ×2, nginx 1.22.1' 'fsync on, synchronous_commit on'; do
    check "PostgreSQL page shows: $text" grep -qF -- "$text" "$tmp/index-pg.html"
done
check "a run below the bar" "$py" "$TG_SRC/bench/report/summarize.py" --mode custom \
    --command "test command" --output "$tmp/summary-low.json" "$tmp/bench/l.json" \
    "$tmp/bench/p1low.json"
check "render_page.py writes it" "$py" "$TG_SRC/bench/report/render_page.py" \
    --output "$tmp/index-low.html" "$tmp/summary-low.json"
check "the page says the bar was not met, and why" \
    grep -qF 'not met</span><br><span class="note">25.0 % &lt; 40 %</span>' "$tmp/index-low.html"
check "the PostgreSQL page is self-contained" \
    "$py" "$TG_SRC/bench/report/check_page.py" --static-only "$tmp/index-pg.html"

# The instructions section: scripts/callgrind's committed file, validated before it is shown.
cg="$TG_SRC/evidence/artifacts/callgrind/callgrind.json"
check "render_page.py shows the committed callgrind counts" "$py" \
    "$TG_SRC/bench/report/render_page.py" --callgrind "$cg" --output "$tmp/index-cg.html" \
    "$tmp/summary.json"
want=$("$py" -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][1]
print(format(c["tree"]["handler"]["ir_per_request"], ",.0f"))' "$cg")
check "the page has the instructions section with the file's evaluate count ($want)" \
    grep -qF -- "<td>$want</td>" "$tmp/index-cg.html"
check "without --callgrind the section says where the counts come from" \
    grep -qF -- 'No callgrind file was given' "$tmp/index.html"
"$py" - "$cg" "$tmp/cg-bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cases"][1]["ratio"]["handler"] += 0.1
json.dump(d, open(sys.argv[2], "w"))
PY
rc=0
"$py" "$TG_SRC/bench/report/render_page.py" --callgrind "$tmp/cg-bad.json" \
    --output "$tmp/index-cgbad.html" "$tmp/summary.json" 2>/dev/null || rc=$?
check "render_page.py refuses a callgrind file whose ratio does not follow from its counts" \
    test "$rc" = 1
check "and writes no page for it" test ! -e "$tmp/index-cgbad.html"

if [ "${BENCH_PAGE_CHROMIUM:-0}" = 1 ]; then
    check "renders in headless chromium without console messages" \
        "$py" "$TG_SRC/bench/report/check_page.py" --screenshot "$tmp/index.png" "$page"
fi

checks_done
