#!/usr/bin/env bash
# bench_quick.sh — scripts/bench end to end against a live daemon, with tiny counts.
#
# Runs the evidence pipeline on the binaries of this build (--no-build: kernel and handler
# harnesses, daemon on 127.0.0.1 per durability mode, /decide and /v1/evaluate sequential, wrk load,
# summary, page) into a temporary directory, then checks every JSON document against the
# schema of docs/BENCHMARKS.md (bench/report/validate.py: schema, sha256, percentiles
# recomputed from the raw samples, zero errors), that the validator rejects a corrupted
# artifact, that the page is self-contained, and that the harnesses refuse non-loopback
# targets. With a PostgreSQL server installed and a binary that has `serve --store`, the
# pipeline's default stores include PostgreSQL: one instance, and two behind nginx when
# nginx is installed, at the last connection count; their artifacts must then be there and
# carry the ledger's /metrics counters, and without them the summary must say what was
# skipped. Counts can be raised through BENCH_* variables; ~20 s under ASan (~30 s with
# PostgreSQL).
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" bench_quick
: "${TG_BIN:?TG_BIN must name the trigguard binary}"
: "${TG_BUILD:?TG_BUILD must name the build directory}"

command -v wrk >/dev/null || { echo "[bench_quick] wrk is not installed (scripts/deps wrk)" >&2; exit 1; }

# What the pipeline should run here, decided the way it decides (scripts/bench step 3).
pg=0 lb=0
# (The help is read whole first: grep -q stopping early would SIGPIPE it under pipefail.)
help=$("$TG_BIN" serve --help 2>&1 || true)
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && grep -qE '^ +--store [A-Z]' <<<"$help"; then
    pg=1
    PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null 2>&1 && lb=1
fi
echo "[bench_quick] PostgreSQL runs expected: $pg; behind nginx: $lb" >&2

out=$tmp/out
rc=0
KERNEL_ITERATIONS=${BENCH_KERNEL_ITERATIONS:-2000} DECIDE_ITERATIONS=${BENCH_DECIDE_ITERATIONS:-200} \
    HANDLER_ITERATIONS=${BENCH_HANDLER_ITERATIONS:-500} \
    EVALUATE_ITERATIONS=${BENCH_EVALUATE_ITERATIONS:-50} HTTP_WARMUP=${BENCH_HTTP_WARMUP:-20} \
    LOAD_CONNS=${BENCH_LOAD_CONNS:-2 8} LOAD_DURATION=${BENCH_LOAD_DURATION:-1} LOAD_WARMUP=0 \
    LOG_AB_CONNS=8 \
    WRK_THREADS=1 BUILD_DIR=$TG_BUILD TG_BIN=$TG_BIN OUT_DIR=$out PAGE=$tmp/index.html \
    bash "$TG_SRC/scripts/bench" --quick --no-build --durability fsync,none \
    >"$tmp/pipeline.log" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
    tail -40 "$tmp/pipeline.log" >&2
    fail "scripts/bench exited with $rc"
else
    ok
fi

for f in kernel_fsm_latency handler_latency http_decide_sequential http_evaluate_sequential_fsync \
    http_evaluate_sequential_none http_evaluate_load_fsync http_evaluate_load_none \
    http_decide_load http_static_load benchmark_summary; do
    check "artifact $f.json written" test -s "$out/$f.json"
done
check "raw samples of /decide kept" test -s "$out/raw/http_decide_sequential.ns.txt.gz"
if [ "$pg" = 1 ]; then
    check "artifact http_evaluate_load_postgres.json written" \
        test -s "$out/http_evaluate_load_postgres.json"
fi
if [ "$lb" = 1 ]; then
    check "artifact http_evaluate_load_postgres_lb.json written" \
        test -s "$out/http_evaluate_load_postgres_lb.json"
fi

if "$py" "$TG_SRC/bench/report/validate.py" --expect-zero-errors "$out/benchmark_summary.json" \
    >"$tmp/validate.log" 2>&1; then
    ok
else
    cat "$tmp/validate.log" >&2
    fail "the artifacts do not validate against docs/BENCHMARKS.md"
fi

# The requested counts reached the documents (no silent defaults).
check "counts as requested" "$py" - "$out" "${BENCH_HANDLER_ITERATIONS:-500}" "$pg" "$lb" <<'PY'
import json, sys
d = sys.argv[1]
pg, lb = sys.argv[3] == "1", sys.argv[4] == "1"
k = json.load(open(f"{d}/kernel_fsm_latency.json"))
h = json.load(open(f"{d}/handler_latency.json"))
dec = json.load(open(f"{d}/http_decide_sequential.json"))
ev = json.load(open(f"{d}/http_evaluate_sequential_none.json"))
ld = json.load(open(f"{d}/http_evaluate_load_fsync.json"))
s = json.load(open(f"{d}/benchmark_summary.json"))
# every kernel variant (default, spend and the language variants) ran the requested count
assert len(k["runs"]) >= 2 and all(r["iterations"] == 2000 for r in k["runs"]), k["runs"]
assert dec["runs"][0]["requests"] == dec["runs"][0]["ok"] == 200
assert ev["runs"][0]["requests"] == 50 and ev["server"]["durability"] == "none"
assert [r["concurrency"] for r in ld["runs"]] == [2, 8] and ld["server"]["durability"] == "fsync"
assert all(r["requests"] > 0 and r["errors"]["count"] == 0 for r in ld["runs"])
# 7 + the transparency log's two long runs (per-receipt and batch signing)
# ... + /decide under load, nginx serving a reply's bytes and the two ledger_append runs
assert s["mode"] == "quick" and len(s["harnesses"]) == 13 + pg + lb and s["comparison"]
# The floor: nginx's reply was the daemon's bytes, every term measured, the sum and the ratio
# what the terms and the daemon's CPU give, at each connection count, both modes.
sl = json.load(open(f"{d}/http_static_load.json"))
assert sl["static"]["server"].startswith("nginx/") and sl["static"]["body_bytes"] > 0, sl["static"]
assert [r["concurrency"] for r in sl["runs"]] == [2, 8], sl["runs"]
for r in sl["runs"]:
    assert r["errors"]["count"] == 0 and r["ok"] == r["requests"] > 0, r
    assert r["cpu"]["processes"]["static"]["cpu_s"] > 0, r["cpu"]
dl = json.load(open(f"{d}/http_decide_load.json"))
assert dl["parameters"]["endpoint"] == "/decide"
assert [r["concurrency"] for r in dl["runs"]] == [2, 8], dl["runs"]
fb = s["floor"]
assert [row["concurrency"] for row in fb["rows"]] == [2, 8], fb["rows"]
for row in fb["rows"]:
    assert sorted(m["durability"] for m in row["evaluate"]) == ["fsync", "none"], row
    for m in row["evaluate"]:
        t = m["terms_us"]
        assert t["http"] > 0 and t["signature"] > 0 and t["hashing"] > 0 and t["ledger"] >= 0, t
        assert abs(m["floor_us"] - sum(t.values())) <= 0.011, m
        assert m["ratio_to_floor"] == round(m["daemon_cpu_us_per_request"] / m["floor_us"], 3)
        if m["durability"] == "fsync":
            assert t["ledger"] > 0, t  # fdatasync per batch, shared by its records
    assert row["decide"] is not None and row["decide"]["daemon_cpu_us_per_request"] > 0, row
assert any(i["key"] == "floor_ratio_fsync" for i in s["headline"]["items"]) or 50 not in \
    [row["concurrency"] for row in fb["rows"]]
# The log's runs: every level read the log's counters; the A/B's one round, three sides.
for name, signing in (("fsync_log_receipt", "receipt"), ("fsync_log_batch", "batch")):
    lg = json.load(open(f"{d}/http_evaluate_load_{name}.json"))
    assert lg["log"]["receipt_signing"] == signing, lg["log"]
    for r in lg["runs"]:
        assert r["errors"]["count"] == 0 and r["log"]["checkpoints"] > 0, r["log"]
        assert r["log"]["leaves"] >= r["ok"], (r["ok"], r["log"])
tl = s["transparency_log"]
assert [row["concurrency"] for row in tl["rows"]] == [2, 8], tl["rows"]
lab = tl["ab"]
assert [r["round"] for r in lab["rounds"]] == [1] and lab["rounds"][0]["concurrency"] == 8, lab
n0 = json.load(open(f"{d}/log_ab/r1_no_log.json"))["runs"][0]
n1 = json.load(open(f"{d}/log_ab/r1_log.json"))["runs"][0]
assert lab["median_log_ratio"] == round(n1["throughput_per_s"] / n0["throughput_per_s"], 4), lab
assert lab["rounds"][0]["batch"] is not None and lab["median_batch_ratio"] is not None, lab
# Every load level read the ledger's /metrics and the CPU of the daemon around it.
for r in ld["runs"]:
    # wrk stops with a request in flight per connection: those commit uncounted by wrk.
    assert 0 <= r["ledger"]["records"] - r["ok"] <= 2 * r["concurrency"], (r["ok"], r["ledger"])
    assert r["ledger"]["commits"] > 0, r["ledger"]
    assert r["cpu"]["processes"]["daemon"]["cpu_s"] > 0, r["cpu"]
    # ...and how full its tables were: the default caps (sized from memory) hold every key
    # of the run (a fresh key and a receipt per request) with room to spare.
    occ = r["store"]["per_instance"][0]
    assert occ["keys"] >= r["ok"] and occ["receipts"] >= r["ok"], (r["ok"], occ)
    assert occ["keys_capacity"] > 0 and r["store"]["fullest_fraction"] < 0.5, r["store"]
st = s["stores"]
if not pg:
    assert not st["rows"] and st["skipped"], st
else:
    # PostgreSQL at the last connection count beside the file fsync run at that count.
    p1 = json.load(open(f"{d}/http_evaluate_load_postgres.json"))
    assert p1["store"]["kind"] == "postgres" and p1["store"]["instances"] == 1
    assert p1["store"]["postgres"]["settings"]["fsync"] == "on"
    assert p1["store"]["postgres"]["settings"]["synchronous_commit"] == "on"
    assert [r["concurrency"] for r in p1["runs"]] == [8], p1["runs"]
    r = p1["runs"][0]
    assert r["errors"]["count"] == 0 and r["ok"] > 0, r
    assert 0 <= r["ledger"]["records"] - r["ok"] <= 2 * r["concurrency"], (r["ok"], r["ledger"])
    assert r["ledger"]["commits"] > 0 and r["ledger"]["mean_commit_ms"] > 0, r["ledger"]
    assert "postgres" in r["cpu"]["processes"], r["cpu"]
    rows = {x["variant"]: x for x in st["rows"]}
    ref = rows["file ledger, durability fsync"]
    one = rows["PostgreSQL, 1 instance"]
    assert abs(one["ratio_to_file_fsync"]
               - round(r["throughput_per_s"] / ref["throughput_per_s"], 4)) < 1e-9, rows
    assert isinstance(one["meets_criteria"], bool)
    # --quick: one A/B round, file then PostgreSQL, at the same count.
    ab = st["ab"]
    assert [r["round"] for r in ab["rounds"]] == [1] and ab["rounds"][0]["concurrency"] == 8, ab
    ra = json.load(open(f"{d}/store_ab/r1_file.json"))["runs"][0]
    rb = json.load(open(f"{d}/store_ab/r1_postgres.json"))["runs"][0]
    assert ab["median_ratio"] == round(rb["throughput_per_s"] / ra["throughput_per_s"], 4), ab
    assert rb["errors"]["count"] == 0 and rb["ledger"]["commits"] > 0, rb
    if lb:
        p2 = json.load(open(f"{d}/http_evaluate_load_postgres_lb.json"))
        assert p2["store"]["instances"] == 2 and "nginx" in p2["store"]["balancer"]
        r2 = p2["runs"][0]
        assert r2["errors"]["count"] == 0 and len(r2["ledger"]["per_instance"]) == 2
        # Round robin: both instances committed records.
        assert all(x["records"] > 0 for x in r2["ledger"]["per_instance"]), r2["ledger"]
        assert 0 <= r2["ledger"]["records"] - r2["ok"] <= 2 * r2["concurrency"], r2["ledger"]
        assert "nginx" in r2["cpu"]["processes"], r2["cpu"]
# The handler harness: every call of each run answered as expected, and its floor is there.
n = int(sys.argv[2])
assert [r["iterations"] for r in h["runs"]] == [n] * 6, h["runs"]
ev_h = next(r for r in h["runs"] if r["name"] == "evaluate_handler")
assert ev_h["ok"] == ev_h["iterations"] == n, ev_h
fl = h["floor"]
for key in ("mandatory_crypto_p50_ns", "evaluate_handler_p50_ns", "decide_handler_p50_ns",
            "evaluate_minus_decide_p50_ns"):
    assert isinstance(fl[key], int) and fl[key] > 0, (key, fl)
assert fl["what"].strip()
sh = next(x for x in s["harnesses"] if x["benchmark"] == "handler_latency")
assert sh["floor"] == fl and sh["durability"] == "none", sh["durability"]
keys = {i["key"] for i in s["headline"]["items"]}
assert {"handler_evaluate_p50_ms", "handler_decide_p50_ms",
        "handler_crypto_floor_p50_ms"} <= keys, keys
PY

# The validator must be able to fail: p99 above max, and a stale sha256.
cp -r "$out" "$tmp/bad"
"$py" - "$tmp/bad/http_decide_sequential.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["runs"][0]["latency_ms"]["p99"] = d["runs"][0]["latency_ms"]["max"] + 1
json.dump(d, open(p, "w"))
PY
if "$py" "$TG_SRC/bench/report/validate.py" "$tmp/bad/http_decide_sequential.json" >/dev/null 2>&1; then
    fail "validate.py accepted p99 > max"
else ok; fi
if "$py" "$TG_SRC/bench/report/validate.py" "$tmp/bad/benchmark_summary.json" >/dev/null 2>&1; then
    fail "validate.py accepted an artifact whose sha256 differs from the summary"
else ok; fi
# ... and a handler floor that is not the sum of its own runs' p50s.
"$py" - "$tmp/bad/handler_latency.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["floor"]["mandatory_crypto_p50_ns"] += 1000
json.dump(d, open(p, "w"))
PY
if "$py" "$TG_SRC/bench/report/validate.py" "$tmp/bad/handler_latency.json" >/dev/null 2>&1; then
    fail "validate.py accepted a handler floor that disagrees with the runs"
else ok; fi

# ... and a stores block whose ratio (or bar) is not what its harnesses give.
"$py" - "$tmp/bad/benchmark_summary.json" "$tmp/bad/stores.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
st = s["stores"]
if st["rows"]:
    row = next(r for r in st["rows"] if r["store"] == "postgres")
    row["ratio_to_file_fsync"] = round(row["ratio_to_file_fsync"] * 2, 4)
else:
    st["criteria"]["min_ratio_to_file_fsync"] = 0.1
json.dump(s, open(sys.argv[2], "w"))
PY
rc=0
"$py" - "$TG_SRC/bench/report" "$tmp/bad/stores.json" >/dev/null 2>&1 <<'PY' || rc=$?
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
benchlib.validate_summary(json.load(open(sys.argv[2])))
PY
check "a summary whose stores block disagrees with its harnesses is refused" test "$rc" != 0
if [ "$pg" = 1 ]; then
    # ... and an A/B median that is not its rounds', or rounds that are not their artifacts'.
    rm -rf "$tmp/ab-bad"
    cp -r "$out" "$tmp/ab-bad"
    for what in median round; do
        rc=0
        "$py" - "$TG_SRC/bench/report" "$out/benchmark_summary.json" "$what" \
            "$tmp/ab-bad/benchmark_summary.json" >/dev/null 2>&1 <<'PY' || rc=$?
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
s = json.load(open(sys.argv[2]))
ab = s["stores"]["ab"]
if sys.argv[3] == "median":
    ab["median_ratio"] += 0.1
    benchlib.validate_summary(s)
else:  # consistent in itself, but not what r1_postgres.json says
    ab["rounds"][0]["postgres"]["throughput_per_s"] *= 2
    r = ab["rounds"][0]
    r["ratio"] = ab["median_ratio"] = ab["min_ratio"] = ab["max_ratio"] = round(
        r["postgres"]["throughput_per_s"] / r["file"]["throughput_per_s"], 4)
    benchlib.validate_summary(s)  # passes: only the artifacts can tell
    json.dump(s, open(sys.argv[4], "w"))
PY
        if [ "$what" = round ]; then
            [ "$rc" = 0 ] || fail "the tampered A/B round was not written"
            rc=0
            "$py" "$TG_SRC/bench/report/validate.py" "$tmp/ab-bad/benchmark_summary.json" \
                >/dev/null 2>&1 || rc=$?
        fi
        check "an A/B $what that disagrees is refused" test "$rc" != 0
    done
fi
check "the page has the PostgreSQL section" grep -q 'id="stores"' "$tmp/index.html"
check "the page has the floor table" grep -q 'CPU per request against the floor, per component' \
    "$tmp/index.html"
# ... and a floor block whose sum, or whose nginx term, is not what the harnesses give.
for what in sum http; do
    rc=0
    "$py" - "$TG_SRC/bench/report" "$out/benchmark_summary.json" "$what" >/dev/null \
        2>"$tmp/floor-$what.err" <<'PY' || rc=$?
import json, sys
sys.path.insert(0, sys.argv[1])
import benchlib
s = json.load(open(sys.argv[2]))
m = s["floor"]["rows"][-1]["evaluate"][0]
if sys.argv[3] == "sum":
    m["floor_us"] = round(m["floor_us"] / 2, 2)
else:  # the static harness's own CPU figure changed: the floor no longer follows from it
    h = next(h for h in s["harnesses"] if h["benchmark"] == "http_static_load")
    e = h["runs"][-1]["cpu"]["processes"]["static"]
    e["cpu_s"] *= 3  # still consistent in itself: only the floor can tell
    e["us_per_request"] = round(1e6 * e["cpu_s"] / h["runs"][-1]["requests"], 2)
benchlib.validate_summary(s)
PY
    check "a floor whose $what disagrees with its harnesses is refused" test "$rc" != 0
    check "... because of the floor ($what)" grep -q "floor must be what" "$tmp/floor-$what.err"
done

check "page is self-contained with every section" \
    "$py" "$TG_SRC/bench/report/check_page.py" --static-only "$tmp/index.html"

# Loopback only: both harnesses refuse anything else before sending a byte.
hb=$TG_BUILD/bench/http_latency_bench
for url in http://10.0.0.1:8080 http://example.com http://127.0.0.2:80 https://127.0.0.1:1 \
    http://127.0.0.1:8080/prefix http://127.0.0.1.evil:80; do
    rc=0
    BASE_URL=$url ITERATIONS=1 "$hb" >/dev/null 2>"$tmp/refuse.err" || rc=$?
    check "http_latency_bench refuses $url" test "$rc" = 2
    check "http_latency_bench says why for $url" grep -q "loopback only" "$tmp/refuse.err"
done
rc=0
"$py" "$TG_SRC/scripts/loadtest" --url http://192.0.2.1:80 >/dev/null 2>&1 || rc=$?
check "scripts/loadtest refuses a non-loopback URL" test "$rc" = 2
free_port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
rc=0
BASE_URL=http://127.0.0.1:$free_port ITERATIONS=1 "$hb" >/dev/null 2>&1 || rc=$?
check "http_latency_bench: nothing listening is a setup error" test "$rc" = 2

checks_done
