"""benchlib.py — shared code of the benchmark tools: the environment block, the artifact and
summary schemas (docs/BENCHMARKS.md) and their validators.

Standard library only (python3 >= 3.9). The C harnesses write the same environment block
(bench/common/env.c); validate_artifact() holds both to one schema.
"""
import ctypes
import ctypes.util
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import urllib.request

SCHEMA = "trigguard-bench/1"
SUMMARY_SCHEMA = "trigguard-bench-summary/1"

# The 105 percentiles of every digest (bench/common/stats.c, bench/load/evaluate_digest.lua).
DIGEST_PCTS = [float(p) for p in range(100)] + [99.5, 99.9, 99.95, 99.99, 100.0]

BENCHMARKS = (
    "kernel_fsm_latency",
    "handler_latency",
    "http_decide_sequential",
    "http_evaluate_sequential",
    "http_evaluate_load",
    "http_decide_load",
    "http_static_load",
    "ledger_append",
)

LATENCY_KEYS = ("min", "p50", "p90", "p95", "p99", "p99_9", "max")  # must be non-decreasing
ENV_STR_KEYS = ("cpu_model", "kernel", "os", "compiler", "build_type", "c_flags",
                "git_commit", "durability", "date", "loadavg")
LIBRARIES = ("libmicrohttpd", "jansson", "libsodium")
# In-process harnesses: no daemon, so no server block (bench/kernel_latency_bench.c,
# bench/handler_latency_bench.c).
IN_PROCESS = ("kernel_fsm_latency", "handler_latency", "ledger_append")
HANDLER_RUNS = ("evaluate_handler", "decide_handler", "sign_receipt_hash", "sha256_request",
                "sha256_receipt", "sha256_token")
FLOOR_NS_KEYS = ("mandatory_crypto_p50_ns", "evaluate_handler_p50_ns", "decide_handler_p50_ns",
                 "evaluate_minus_decide_p50_ns")


# ---- environment ----------------------------------------------------------------------


def nearest_rank(sorted_vals, p):
    """bench/common/stats.c's percentile rank, in integers: the value at
    ceil(round(p * 1e6) * n / 1e8) of the sorted samples (p in percent)."""
    n = len(sorted_vals)
    rank = max(1, min(n, -(-round(p * 1e6) * n // 10**8)))
    return sorted_vals[rank - 1]

def _read_field(path, key):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if key is None:
                    return line.strip()
                if line.startswith(key):
                    v = re.split(r"[:=]", line[len(key):], maxsplit=1)
                    v = v[1] if len(v) > 1 else v[0]
                    return v.strip().strip('"').strip()
    except OSError:
        pass
    return ""


def _ascii(s):
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in s) or "unknown"


def _dpkg_versions():
    out = {name: "unknown" for name in LIBRARIES}
    try:
        text = subprocess.run(
            ["dpkg-query", "-W", "-f=${Package}=${Version}\n", "libmicrohttpd-dev",
             "libjansson-dev", "libsodium-dev"],
            capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return out
    for line in text.splitlines():
        if "=" not in line or line.endswith("="):
            continue
        for name, prefix in (("libmicrohttpd", "libmicrohttpd"), ("jansson", "libjansson"),
                             ("libsodium", "libsodium")):
            if line.startswith(prefix):
                out[name] = line
    return out


def _runtime_versions():
    """The versions the shared libraries report about themselves (what a daemon linked
    against them loads), read through ctypes."""
    probes = {"libmicrohttpd": ("microhttpd", "MHD_get_version"),
              "jansson": ("jansson", "jansson_version_str"),
              "libsodium": ("sodium", "sodium_version_string")}
    out = {}
    for name, (lib, fn) in probes.items():
        try:
            path = ctypes.util.find_library(lib)
            f = getattr(ctypes.CDLL(path), fn)
            f.restype = ctypes.c_char_p
            out[name] = f().decode("ascii", "replace")
        except (OSError, AttributeError, TypeError):
            out[name] = "unknown"
    return out


def _build_facts(build_dir):
    """compiler, build_type and the flags of src/pipeline/evaluate.c of a CMake build tree
    (the same extraction as bench/common/env.c)."""
    facts = {"compiler": "unknown", "build_type": "unknown", "c_flags": "unknown"}
    if not build_dir:
        return facts
    cache = os.path.join(build_dir, "CMakeCache.txt")
    bt = _read_field(cache, "CMAKE_BUILD_TYPE:")
    if bt:
        facts["build_type"] = bt
    try:
        for entry in os.listdir(os.path.join(build_dir, "CMakeFiles")):
            cc = os.path.join(build_dir, "CMakeFiles", entry, "CMakeCCompiler.cmake")
            if os.path.exists(cc):
                text = open(cc, encoding="utf-8").read()
                cid = re.search(r'set\(CMAKE_C_COMPILER_ID "([^"]*)"\)', text)
                ver = re.search(r'set\(CMAKE_C_COMPILER_VERSION "([^"]*)"\)', text)
                if cid and ver:
                    name = {"GNU": "gcc", "Clang": "clang"}.get(cid.group(1), cid.group(1))
                    facts["compiler"] = f"{name} {ver.group(1)}"
                break
    except OSError:
        pass
    try:
        db = json.load(open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8"))
    except (OSError, ValueError):
        db = []
    for e in db:
        if str(e.get("file", "")).endswith("/src/pipeline/evaluate.c"):
            toks = str(e.get("command", "")).split()[1:]
            flags, skip = [], False
            for t in toks:
                takes_arg = t in ("-o", "-c", "-isystem")
                if not (skip or takes_arg or not t.startswith("-") or t.startswith("-I")):
                    flags.append(t)
                skip = takes_arg
            facts["c_flags"] = " ".join(flags)
            break
    return facts


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def environment(build_dir=None, durability=None, git_commit=None):
    """The "environment" block (same keys as bench/common/env.c)."""
    mem = _read_field("/proc/meminfo", "MemTotal")
    try:
        mem_mib = int(mem.split()[0]) // 1024
    except (ValueError, IndexError):
        mem_mib = 0
    try:
        cores = os.sysconf("SC_NPROCESSORS_ONLN")
    except (ValueError, OSError):
        cores = os.cpu_count() or 0
    u = platform.uname()
    facts = _build_facts(build_dir)
    dpkg, rt = _dpkg_versions(), _runtime_versions()
    flags = facts["c_flags"]
    return {
        "cpu_model": _ascii(_read_field("/proc/cpuinfo", "model name")),
        "cpu_cores": cores,
        "memory_total_mib": mem_mib,
        "kernel": _ascii(f"{u.system} {u.release} {u.machine}"),
        "os": _ascii(_read_field("/etc/os-release", "PRETTY_NAME")),
        "compiler": facts["compiler"],
        "build_type": facts["build_type"],
        "c_flags": flags,
        "optimized": "-O2" in flags or "-O3" in flags,
        "sanitizers": "-fsanitize" in flags,
        "libraries": {n: {"package": dpkg[n], "runtime": rt[n]} for n in LIBRARIES},
        "git_commit": git_commit or "unknown",
        "durability": durability or "not applicable",
        "date": utc_now(),
        "loadavg": _ascii(_read_field("/proc/loadavg", None)),
    }


# ---- loopback -------------------------------------------------------------------------

LOOPBACK_URL = re.compile(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:(\d{1,5}))?/?$")


def check_loopback(url):
    """Raises ValueError unless url is http://127.0.0.1|localhost|[::1][:port][/]."""
    m = LOOPBACK_URL.match(url)
    if not m or (m.group(3) and not 1 <= int(m.group(3)) <= 65535):
        raise ValueError(f"{url}: only http://127.0.0.1, http://localhost or http://[::1] "
                         "(with an optional port, no path) may receive benchmark traffic")
    return url.rstrip("/")


def server_facts(base_url):
    """GET /version of a trigguard daemon (loopback only): engine, build commit, durability,
    store (file or postgres), policy version and hash; "unknown" where it does not answer."""
    url = check_loopback(base_url) + "/version"
    keys = ("engine", "build_commit", "durability", "store", "policy_version", "policy_hash")
    try:
        # No proxy handler: a proxy setting must never route this request elsewhere.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=10) as r:
            j = json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError):
        j = {}
    return {k: str(j.get(k, "unknown")) for k in keys}


# ---- the ledger's own counters: GET /metrics ------------------------------------------------

METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metric_samples(lines):
    """(name, labels or None, value) for each sample line of a Prometheus text exposition;
    comments and lines whose value is not a number are skipped."""
    for line in lines:
        m = METRIC_LINE.match(line)
        if not m or line.startswith("#"):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        yield m.group(1), m.group(2), value
LEDGER_COUNTERS = ("trigguard_ledger_records_total", "trigguard_ledger_batches_total",
                   "trigguard_ledger_batch_records_sum", "trigguard_ledger_batch_records_count",
                   "trigguard_ledger_fsync_seconds_sum", "trigguard_ledger_fsync_seconds_count")


FSYNC_HIST = "trigguard_ledger_fsync_seconds_bucket"
LOG_LAG_HIST = "trigguard_log_checkpoint_lag_seconds_bucket"
LOG_COUNTERS = ("trigguard_log_enabled", "trigguard_log_checkpoints_total",
                "trigguard_log_checkpoint_failures_total", "trigguard_log_tree_size",
                "trigguard_log_checkpoint_lag_seconds_sum",
                "trigguard_log_checkpoint_lag_seconds_count")


def scrape_metrics(base_url):
    """GET /metrics of a daemon (loopback only) -> ({name: value} of the unlabelled samples,
    {histogram: {le: cumulative count}} of the ledger's commit (FSYNC_HIST) and the log's
    checkpoint lag (LOG_LAG_HIST) histograms). Raises OSError when it does not answer: a
    missing scrape must not pass for zero commits."""
    url = check_loopback(base_url) + "/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as r:
        text = r.read().decode("utf-8", "replace")
    plain, hists = {}, {FSYNC_HIST: {}, LOG_LAG_HIST: {}}
    for name, labels, value in metric_samples(text.splitlines()):
        if not labels:
            plain[name] = value
        elif name in hists:
            le = re.search(r'le="([^"]*)"', labels)
            if le:
                hists[name][le.group(1)] = value
    missing = [k for k in LEDGER_COUNTERS if k not in plain]
    if missing:
        raise OSError(f"{url} lacks {', '.join(missing)}")
    return plain, hists


STORE_GAUGES = ("trigguard_store_entries", "trigguard_store_capacity",
                "trigguard_store_bytes", "trigguard_store_bytes_capacity",
                "trigguard_receipt_index_entries", "trigguard_receipt_index_capacity")


def store_occupancy(after):
    """How full the scraped instances' in-memory tables were at the end of a run (issue 25:
    the benchmarks run at the default caps without filling them): per instance the counts and
    caps from /metrics, and the fullest fraction of any cap (null where no cap is exported,
    as with PostgreSQL's key table)."""
    per = []
    for plain, _ in after:
        g = {k: int(plain.get(k, 0)) for k in STORE_GAUGES}
        fr = [g[u] / g[c] for u, c in (("trigguard_store_entries", "trigguard_store_capacity"),
                                       ("trigguard_store_bytes", "trigguard_store_bytes_capacity"),
                                       ("trigguard_receipt_index_entries",
                                        "trigguard_receipt_index_capacity")) if g[c] > 0]
        per.append({"keys": g["trigguard_store_entries"],
                    "keys_capacity": g["trigguard_store_capacity"],
                    "key_bytes": g["trigguard_store_bytes"],
                    "key_bytes_capacity": g["trigguard_store_bytes_capacity"],
                    "receipts": g["trigguard_receipt_index_entries"],
                    "receipts_capacity": g["trigguard_receipt_index_capacity"],
                    "fullest_fraction": round(max(fr), 6) if fr else None})
    worst = [x["fullest_fraction"] for x in per if x["fullest_fraction"] is not None]
    return {"source": "/metrics after the run", "per_instance": per,
            "fullest_fraction": max(worst) if worst else None}


def validate_store_occupancy(so, where):
    """A load run's "store" block (store_occupancy): counts >= 0, fractions that match them."""
    _req(isinstance(so, dict) and isinstance(so.get("per_instance"), list) and so["per_instance"],
         where, "must list the instances")
    for i, x in enumerate(so["per_instance"]):
        w = f"{where}.per_instance[{i}]"
        for k in ("keys", "keys_capacity", "key_bytes", "key_bytes_capacity", "receipts",
                  "receipts_capacity"):
            _req(_is_int(x.get(k)) and x[k] >= 0, w, f"{k} must be an integer >= 0")
        fr = [x[u] / x[c] for u, c in (("keys", "keys_capacity"), ("key_bytes",
              "key_bytes_capacity"), ("receipts", "receipts_capacity")) if x[c] > 0]
        want = round(max(fr), 6) if fr else None
        _req(x.get("fullest_fraction") == want, w, "fullest_fraction must be the fullest cap's")
    worst = [x["fullest_fraction"] for x in so["per_instance"] if x["fullest_fraction"] is not None]
    _req(so.get("fullest_fraction") == (max(worst) if worst else None), where,
         "fullest_fraction must be the fullest instance's")


def _bucket_bound_at(buckets0, buckets1, q):
    """The upper bound (seconds) of the first fsync/commit histogram bucket whose count,
    between two scrapes, reaches the fraction q of all; None when nothing was counted."""
    bounds = sorted(((float("inf") if le == "+Inf" else float(le)), le) for le in buckets1)
    total = buckets1.get("+Inf", 0.0) - buckets0.get("+Inf", 0.0)
    if total <= 0:
        return None
    for bound, le in bounds:
        if buckets1[le] - buckets0.get(le, 0.0) >= q * total:
            return bound
    return None


def ledger_delta(before, after):
    """What the ledgers of the scraped instances did between two lists of scrapes (one per
    instance, same order): records, commits (group commits; for the PostgreSQL store one
    transaction each), records per commit from the batch-size histogram, and the mean commit
    (file: fdatasync; PostgreSQL: COMMIT round trip) latency from its histogram."""
    per = []
    for (p0, h0), (p1, h1) in zip(before, after):
        d = {k: p1[k] - p0[k] for k in LEDGER_COUNTERS}
        bound = _bucket_bound_at(h0[FSYNC_HIST], h1[FSYNC_HIST], 0.99)
        per.append({
            "records": int(d["trigguard_ledger_records_total"]),
            "commits": int(d["trigguard_ledger_batches_total"]),
            "batch_records_sum": int(d["trigguard_ledger_batch_records_sum"]),
            "batch_records_count": int(d["trigguard_ledger_batch_records_count"]),
            "commit_seconds_sum": round(d["trigguard_ledger_fsync_seconds_sum"], 6),
            "commit_seconds_count": int(d["trigguard_ledger_fsync_seconds_count"]),
            "commit_p99_bucket_le_ms": None if bound is None
            else ("+Inf" if math.isinf(bound) else round(bound * 1000.0, 6)),
        })
    tot = {k: sum(x[k] for x in per) for k in ("records", "commits", "batch_records_sum",
                                               "batch_records_count", "commit_seconds_count")}
    tot["commit_seconds_sum"] = round(sum(x["commit_seconds_sum"] for x in per), 6)
    out = {"source": "GET /metrics of every instance right before and right after the timed "
                     "window: differences of the counters",
           "instances": len(per), **tot,
           "records_per_commit": round(tot["batch_records_sum"] / tot["batch_records_count"], 4)
           if tot["batch_records_count"] else None,
           "mean_commit_ms": round(1000.0 * tot["commit_seconds_sum"]
                                   / tot["commit_seconds_count"], 6)
           if tot["commit_seconds_count"] else None}
    if len(per) > 1:
        out["per_instance"] = per
    else:
        out["commit_p99_bucket_le_ms"] = per[0]["commit_p99_bucket_le_ms"] if per else None
    return out


def log_delta(before, after, window_s):
    """What the transparency log did between two lists of scrapes (one per instance): None
    when no instance has the log on. Checkpoints signed (the signatures the log cost),
    leaves added (the tree's growth: with PostgreSQL every instance serves the one log, so
    the largest growth any instance saw), and the checkpoint lag (a checkpoint's newest
    record's durability to the checkpoint's publication) from the signing instances'
    histograms merged bucket by bucket."""
    if not any(p1.get("trigguard_log_enabled") == 1 for p1, _ in after):
        return None
    for p1, _ in after:
        missing = [k for k in LOG_COUNTERS if k not in p1]
        if missing:
            raise OSError(f"a log-enabled scrape lacks {', '.join(missing)}")
    d = {k: sum(p1[k] - p0[k] for (p0, _), (p1, _) in zip(before, after))
         for k in LOG_COUNTERS if k != "trigguard_log_tree_size"}
    growth = max(p1["trigguard_log_tree_size"] - p0["trigguard_log_tree_size"]
                 for (p0, _), (p1, _) in zip(before, after))
    merged0, merged1 = {}, {}
    for (_, h0), (_, h1) in zip(before, after):
        for le, v in h0[LOG_LAG_HIST].items():
            merged0[le] = merged0.get(le, 0.0) + v
        for le, v in h1[LOG_LAG_HIST].items():
            merged1[le] = merged1.get(le, 0.0) + v
    bound = _bucket_bound_at(merged0, merged1, 0.99)
    checkpoints = int(d["trigguard_log_checkpoints_total"])
    lag_n = int(d["trigguard_log_checkpoint_lag_seconds_count"])
    return {"source": "GET /metrics of every instance right before and right after the timed "
                      "window: differences of the trigguard_log_* counters and of the "
                      "checkpoint lag histogram",
            "checkpoints": checkpoints,
            "checkpoint_failures": int(d["trigguard_log_checkpoint_failures_total"]),
            "signatures_per_s": round(checkpoints / window_s, 2) if window_s > 0 else None,
            "leaves": int(growth),
            "leaves_per_checkpoint": round(growth / checkpoints, 3) if checkpoints else None,
            "lag_count": lag_n,
            "lag_mean_ms": round(1000.0 * d["trigguard_log_checkpoint_lag_seconds_sum"] / lag_n,
                                 3) if lag_n else None,
            "lag_p99_bucket_le_ms": None if bound is None
            else ("+Inf" if math.isinf(bound) else round(bound * 1000.0, 6))}


# ---- CPU time from /proc ------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid):
    """(ppid, utime + stime, cutime + cstime) in ticks of /proc/PID/stat, or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    # fields[0] is state (field 3): ppid is field 4, utime..cstime fields 14..17.
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def process_tree_ticks(root):
    """CPU ticks of a process and every live descendant (threads are in their process's
    figure), plus what its reaped children left in its cutime/cstime: a child that exits
    during a window moves from one term to the other instead of vanishing."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None:
                stats[int(name)] = st
    if root not in stats:
        return None
    children = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = stats[root][2], [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total


def machine_busy_ticks():
    """All CPUs' non-idle ticks of /proc/stat (user nice system irq softirq steal; idle and
    iowait left out)."""
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)


def cpu_sample(groups):
    """groups: {name: [pid, ...]} -> {name: ticks} (None for a group none of whose
    processes exists), and "machine"."""
    out = {"machine": machine_busy_ticks()}
    for name, pids in groups.items():
        t = [process_tree_ticks(p) for p in pids]
        out[name] = None if all(x is None for x in t) else sum(x or 0 for x in t)
    return out


def cpu_delta(groups, before, after, window_s, requests, extra=None):
    """The CPU block of a load run: seconds of CPU each group and the whole machine used in
    the window, and per request (µs). extra: {name: seconds} measured otherwise (wrk's
    rusage)."""
    cores = os.cpu_count() or 1

    def entry(seconds, pids=None):
        e = {"cpu_s": round(seconds, 3),
             "us_per_request": round(1e6 * seconds / requests, 2) if requests else None}
        if pids is not None:
            e["pids"] = pids
        return e

    procs = {}
    for name, pids in groups.items():
        if before.get(name) is None or after.get(name) is None:
            continue
        procs[name] = entry((after[name] - before[name]) / CLK_TCK, pids)
    for name, seconds in (extra or {}).items():
        procs[name] = entry(seconds)
    busy = (after["machine"] - before["machine"]) / CLK_TCK
    machine = entry(busy)
    machine["utilization"] = round(busy / (window_s * cores), 4) if window_s > 0 else None
    return {"source": f"/proc/PID/stat utime+stime of each process tree (with reaped "
                      f"children) and /proc/stat busy time, {CLK_TCK} ticks/s, read right "
                      "before and right after the timed window; wrk: getrusage of the child",
            "window_s": round(window_s, 3), "cores": cores, "machine": machine,
            "processes": procs}


# ---- validation -------------------------------------------------------------------------

class SchemaError(ValueError):
    pass


def _req(cond, where, msg):
    if not cond:
        raise SchemaError(f"{where}: {msg}")


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _nonempty_str(v):
    return isinstance(v, str) and v.strip() != ""


def validate_environment(env, where="environment"):
    _req(isinstance(env, dict), where, "must be an object")
    for k in ENV_STR_KEYS:
        _req(_nonempty_str(env.get(k)), where, f"{k} must be a non-empty string")
    _req(_is_int(env.get("cpu_cores")) and env["cpu_cores"] >= 1, where, "cpu_cores >= 1")
    _req(_is_int(env.get("memory_total_mib")) and env["memory_total_mib"] >= 1, where,
         "memory_total_mib >= 1")
    for k in ("optimized", "sanitizers"):
        _req(isinstance(env.get(k), bool), where, f"{k} must be a boolean")
    libs = env.get("libraries")
    _req(isinstance(libs, dict), where, "libraries must be an object")
    for n in LIBRARIES:
        lib = libs.get(n)
        _req(isinstance(lib, dict) and _nonempty_str(lib.get("package"))
             and _nonempty_str(lib.get("runtime")), where,
             f"libraries.{n} needs package and runtime strings")
    _req(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", env["date"]) is not None, where,
         "date must be YYYY-MM-DDTHH:MM:SSZ")


def validate_digest(d, where):
    _req(isinstance(d, dict), where, "digest must be an object")
    _req(_nonempty_str(d.get("definition")), where, "digest.definition must be a string")
    p, v = d.get("percentiles"), d.get("latency_ms")
    _req(isinstance(p, list) and isinstance(v, list) and len(p) == len(v) == len(DIGEST_PCTS),
         where, f"digest needs {len(DIGEST_PCTS)} percentiles and latency_ms values")
    _req(all(_is_num(x) for x in p + v), where, "digest values must be numbers")
    _req(all(abs(a - b) < 1e-9 for a, b in zip(p, DIGEST_PCTS)), where,
         "digest percentiles must be the standard list")
    _req(all(v[i] <= v[i + 1] for i in range(len(v) - 1)), where,
         "digest latency_ms must be non-decreasing")
    _req(v[0] >= 0, where, "digest latency_ms must be >= 0")


def validate_run(run, where):
    _req(isinstance(run, dict), where, "must be an object")
    _req(_nonempty_str(run.get("name")), where, "name must be a string")
    _req(_is_int(run.get("concurrency")) and run["concurrency"] >= 1, where,
         "concurrency must be an integer >= 1")
    it = run.get("iterations")
    _req(it is None or (_is_int(it) and it >= 0), where, "iterations: integer >= 0 or null")
    _req(_is_num(run.get("duration_s")) and run["duration_s"] >= 0, where, "duration_s >= 0")
    _req(_is_int(run.get("requests")) and run["requests"] >= 0, where, "requests >= 0")
    _req(_is_int(run.get("ok")) and 0 <= run["ok"] <= run["requests"], where,
         "ok must be an integer in 0..requests")
    lat = run.get("latency_ms")
    _req(isinstance(lat, dict), where, "latency_ms must be an object")
    _req(all(_is_num(lat.get(k)) and lat[k] >= 0 for k in LATENCY_KEYS + ("mean",)), where,
         "latency_ms needs min, mean, p50, p90, p95, p99, p99_9, max >= 0")
    vals = [lat[k] for k in LATENCY_KEYS]
    _req(all(vals[i] <= vals[i + 1] for i in range(len(vals) - 1)), where,
         "latency_ms must satisfy min <= p50 <= p90 <= p95 <= p99 <= p99_9 <= max")
    _req(lat["min"] <= lat["mean"] <= lat["max"], where, "latency_ms.mean outside min..max")
    _req(_is_num(run.get("throughput_per_s")) and run["throughput_per_s"] >= 0, where,
         "throughput_per_s must be a number >= 0")
    err = run.get("errors")
    _req(isinstance(err, dict), where, "errors must be an object")
    _req(_is_int(err.get("count")) and err["count"] >= 0, where, "errors.count >= 0")
    _req(_is_num(err.get("rate")) and 0 <= err["rate"] <= 1, where, "errors.rate in [0, 1]")
    kinds = err.get("by_kind")
    _req(isinstance(kinds, dict) and all(_is_int(x) and x >= 0 for x in kinds.values()),
         where, "errors.by_kind must map kinds to counts")
    _req(sum(kinds.values()) == err["count"], where, "errors.count must equal sum(by_kind)")
    _req(err["count"] >= run["requests"] - run["ok"], where,
         "errors.count must cover every request that was not ok")
    if "ledger" in run:
        validate_ledger(run["ledger"], where + ".ledger")
    if "log" in run:
        validate_log_run(run["log"], where + ".log")
    if "store" in run:
        validate_store_occupancy(run["store"], where + ".store")
    if "cpu" in run:
        validate_cpu(run["cpu"], run["requests"], where + ".cpu")
    validate_digest(run.get("digest"), where)
    d = run["digest"]["latency_ms"]
    # The digest and the summary come from the same samples: the ends must agree.
    _req(abs(d[0] - lat["min"]) <= 1e-6 + 1e-9 * lat["min"], where, "digest p0 != min")
    _req(abs(d[-1] - lat["max"]) <= 1e-6 + 1e-9 * lat["max"], where, "digest p100 != max")


def validate_ledger(led, where):
    """A load run's "ledger" block (ledger_delta): counts >= 0, and the two derived figures
    are the ratios of the counts beside them."""
    _req(isinstance(led, dict), where, "must be an object")
    _req(_nonempty_str(led.get("source")), where, "source must say where the counts come from")
    _req(_is_int(led.get("instances")) and led["instances"] >= 1, where, "instances >= 1")
    for k in ("records", "commits", "batch_records_sum", "batch_records_count",
              "commit_seconds_count"):
        _req(_is_int(led.get(k)) and led[k] >= 0, where, f"{k} must be an integer >= 0")
    _req(_is_num(led.get("commit_seconds_sum")) and led["commit_seconds_sum"] >= 0, where,
         "commit_seconds_sum must be a number >= 0")
    rpc, mc = led.get("records_per_commit"), led.get("mean_commit_ms")
    if led["batch_records_count"]:
        _req(_is_num(rpc) and abs(rpc - led["batch_records_sum"] / led["batch_records_count"])
             <= 1e-4 * max(1.0, rpc), where, "records_per_commit must be "
             "batch_records_sum / batch_records_count")
    else:
        _req(rpc is None, where, "records_per_commit must be null without commits")
    if led["commit_seconds_count"]:
        _req(_is_num(mc) and abs(mc - 1000 * led["commit_seconds_sum"]
                                 / led["commit_seconds_count"]) <= 1e-5 * max(1.0, mc),
             where, "mean_commit_ms must be 1000 * commit_seconds_sum / commit_seconds_count")
    else:
        _req(mc is None, where, "mean_commit_ms must be null without commits")
    per = led.get("per_instance")
    if per is not None:
        _req(isinstance(per, list) and len(per) == led["instances"], where,
             "per_instance must have one entry per instance")
        for k in ("records", "commits", "batch_records_sum", "batch_records_count"):
            _req(sum(p.get(k, 0) for p in per) == led[k], where,
                 f"{k} must be the sum over per_instance")


def validate_cpu(cpu, requests, where):
    _req(isinstance(cpu, dict), where, "must be an object")
    _req(_nonempty_str(cpu.get("source")), where, "source must say how CPU was read")
    _req(_is_num(cpu.get("window_s")) and cpu["window_s"] > 0, where, "window_s > 0")
    entries = [("machine", cpu.get("machine"))] + list((cpu.get("processes") or {}).items())
    _req(isinstance(cpu.get("processes"), dict), where, "processes must be an object")
    for name, e in entries:
        _req(isinstance(e, dict) and _is_num(e.get("cpu_s")) and e["cpu_s"] >= 0, where,
             f"{name}.cpu_s must be a number >= 0")
        if requests:
            _req(_is_num(e.get("us_per_request"))
                 and abs(e["us_per_request"] - 1e6 * e["cpu_s"] / requests)
                 <= 0.01 + 1e-3 * e["us_per_request"] + 1e6 * 0.0005 / requests, where,
                 f"{name}.us_per_request must be cpu_s / requests")


def validate_log_run(lg, where):
    """A load run's "log" block (log_delta): counts >= 0 and the ratios beside them."""
    _req(isinstance(lg, dict) and _nonempty_str(lg.get("source")), where,
         "must be an object that says where its counts come from")
    for k in ("checkpoints", "checkpoint_failures", "leaves", "lag_count"):
        _req(_is_int(lg.get(k)) and lg[k] >= 0, where, f"{k} must be an integer >= 0")
    lpc = lg.get("leaves_per_checkpoint")
    if lg["checkpoints"]:
        _req(_is_num(lpc) and abs(lpc - lg["leaves"] / lg["checkpoints"]) <= 1e-3 * max(1, lpc),
             where, "leaves_per_checkpoint must be leaves / checkpoints")
    else:
        _req(lpc is None, where, "leaves_per_checkpoint must be null without checkpoints")
    _req(lg.get("signatures_per_s") is None or _is_num(lg["signatures_per_s"]), where,
         "signatures_per_s must be a number")
    _req((lg.get("lag_mean_ms") is None) == (lg["lag_count"] == 0), where,
         "lag_mean_ms must be null exactly when no lag was counted")
    b = lg.get("lag_p99_bucket_le_ms")
    _req(b is None or b == "+Inf" or (_is_num(b) and b > 0), where,
         "lag_p99_bucket_le_ms must be a bucket bound, +Inf or null")


def validate_log_info(lg, where):
    """An artifact's "log": the daemon ran with the transparency log, signing receipts so."""
    _req(isinstance(lg, dict), where, "must be an object")
    _req(lg.get("receipt_signing") in ("receipt", "batch"), where,
         "receipt_signing must be receipt or batch")
    for k in ("checkpoint_min_interval_ms", "checkpoint_interval_ms"):
        _req(_is_int(lg.get(k)) and lg[k] >= 1, where, f"{k} must be an integer >= 1")


def validate_store(st, where):
    """An artifact's "store": which ledger backend and how many instances served the load."""
    _req(isinstance(st, dict), where, "must be an object")
    _req(st.get("kind") in ("file", "postgres"), where, "kind must be file or postgres")
    _req(_is_int(st.get("instances")) and st["instances"] >= 1, where, "instances >= 1")
    _req(st["instances"] == 1 or _nonempty_str(st.get("balancer")), where,
         "more than one instance needs the balancer named")


def validate_floor(doc, where):
    """handler_latency's "floor": the four figures are p50s of its own runs (latency_ms has
    ns resolution), so they must agree with them, not only be well-typed."""
    fl = doc.get("floor")
    _req(isinstance(fl, dict), where, "floor must be an object")
    _req(_nonempty_str(fl.get("what")), where, "floor.what must be a non-empty string")
    for k in FLOOR_NS_KEYS:
        _req(_is_int(fl.get(k)) and fl[k] >= 0, where, f"floor.{k} must be an integer >= 0")
    p50 = {}
    for name in HANDLER_RUNS:
        r = next((r for r in doc["runs"] if r["name"] == name), None)
        _req(r is not None, where, f"runs must include {name}")
        p50[name] = round(r["latency_ms"]["p50"] * 1e6)
    crypto = sum(p50[n] for n in HANDLER_RUNS[2:])
    _req(abs(fl["mandatory_crypto_p50_ns"] - crypto) <= 4, where,
         "floor.mandatory_crypto_p50_ns must be the sum of the four crypto runs' p50")
    _req(abs(fl["evaluate_handler_p50_ns"] - p50["evaluate_handler"]) <= 1, where,
         "floor.evaluate_handler_p50_ns must be evaluate_handler's p50")
    _req(abs(fl["decide_handler_p50_ns"] - p50["decide_handler"]) <= 1, where,
         "floor.decide_handler_p50_ns must be decide_handler's p50")
    _req(fl["evaluate_minus_decide_p50_ns"]
         == fl["evaluate_handler_p50_ns"] - fl["decide_handler_p50_ns"], where,
         "floor.evaluate_minus_decide_p50_ns must be the difference of the two")


def validate_static_info(st, where):
    """scripts/loadtest --static-info: the static server standing in for the daemon's HTTP."""
    _req(isinstance(st, dict), where, "must be an object")
    for k in ("server", "what", "differs"):
        _req(_nonempty_str(st.get(k)), where, f"{k} must be a non-empty string")
    for k in ("body_bytes", "daemon_header_bytes", "static_header_bytes", "workers"):
        _req(_is_int(st.get(k)) and st[k] >= 0, where, f"{k} must be an integer >= 0")


def validate_artifact(doc, where="artifact"):
    """Raises SchemaError unless doc is a benchmark document of docs/BENCHMARKS.md."""
    _req(isinstance(doc, dict), where, "must be a JSON object")
    _req(doc.get("schema") == SCHEMA, where, f"schema must be {SCHEMA}")
    _req(doc.get("benchmark") in BENCHMARKS, where, f"benchmark must be one of {BENCHMARKS}")
    for k in ("what", "method", "not_measured", "harness"):
        _req(_nonempty_str(doc.get(k)), where, f"{k} must be a non-empty string")
    _req(isinstance(doc.get("parameters"), dict), where, "parameters must be an object")
    validate_environment(doc.get("environment"), where + ".environment")
    runs = doc.get("runs")
    _req(isinstance(runs, list) and runs, where, "runs must be a non-empty array")
    for i, run in enumerate(runs):
        validate_run(run, f"{where}.runs[{i}]")
    if doc["benchmark"] in ("http_decide_sequential", "http_evaluate_sequential",
                            "handler_latency"):
        _req(all(r["concurrency"] == 1 for r in runs), where, "sequential runs have concurrency 1")
    if doc["benchmark"] == "handler_latency":
        validate_floor(doc, where)
    if "store" in doc:
        validate_store(doc["store"], where + ".store")
        if doc["store"]["kind"] == "postgres":
            # The point of a PostgreSQL run is what the commits did: no run without them.
            for i, r in enumerate(runs):
                _req("ledger" in r, f"{where}.runs[{i}]",
                     "a PostgreSQL run needs the ledger counters of /metrics")
                _req(r["ledger"]["instances"] == doc["store"]["instances"],
                     f"{where}.runs[{i}]", "ledger.instances must be store.instances")
    _req(("static" in doc) == (doc["benchmark"] == "http_static_load"), where,
         "static is there exactly when the benchmark is http_static_load")
    if "static" in doc:
        validate_static_info(doc["static"], where + ".static")
        for i, r in enumerate(runs):
            _req("static" in (r.get("cpu") or {}).get("processes", {}), f"{where}.runs[{i}]",
                 "a static run needs the static server's CPU (--cpu static=PID)")
    if "log" in doc:
        validate_log_info(doc["log"], where + ".log")
        # A run with the log on is worth only what the log did in it.
        for i, r in enumerate(runs):
            _req("log" in r, f"{where}.runs[{i}]", "a run with the log needs its log counters")
    if doc["benchmark"] not in IN_PROCESS:
        _req(_nonempty_str(doc.get("server", {}).get("durability")), where,
             "server.durability must say the daemon's durability mode")


def validate_summary(s, where="summary"):
    """Raises SchemaError unless s is a benchmark_summary.json of docs/BENCHMARKS.md."""
    _req(isinstance(s, dict), where, "must be a JSON object")
    _req(s.get("schema") == SUMMARY_SCHEMA, where, f"schema must be {SUMMARY_SCHEMA}")
    for k in ("generated", "mode", "command"):
        _req(_nonempty_str(s.get(k)), where, f"{k} must be a non-empty string")
    validate_environment(s.get("environment"), where + ".environment")
    _req(isinstance(s.get("methodology"), list) and all(_nonempty_str(x)
                                                         for x in s["methodology"]),
         where, "methodology must be a list of strings")
    _req(isinstance(s.get("reproduce"), list) and s["reproduce"], where,
         "reproduce must list commands")
    hs = s.get("harnesses")
    _req(isinstance(hs, list) and hs, where, "harnesses must be a non-empty array")
    for i, h in enumerate(hs):
        w = f"{where}.harnesses[{i}]"
        _req(h.get("benchmark") in BENCHMARKS, w, "unknown benchmark")
        for k in ("file", "title", "what", "method", "not_measured", "durability"):
            _req(_nonempty_str(h.get(k)), w, f"{k} must be a non-empty string")
        _req(isinstance(h.get("runs"), list) and h["runs"], w, "runs must be non-empty")
        for j, run in enumerate(h["runs"]):
            validate_run(run, f"{w}.runs[{j}]")
    _req(isinstance(s.get("headline"), dict), where, "headline must be an object")
    comp = s.get("comparison")
    _req(isinstance(comp, list), where, "comparison must be an array")
    for i, c in enumerate(comp):
        w = f"{where}.comparison[{i}]"
        for k in ("metric", "unit", "better"):
            _req(_nonempty_str(c.get(k)), w, f"{k} must be a string")
        _req(c["better"] in ("lower", "higher"), w, "better must be lower or higher")
        _req(_is_num(c.get("ours")) and _is_num(c.get("theirs")) and c["theirs"] > 0, w,
             "ours and theirs must be numbers (theirs > 0)")
        _req(_is_num(c.get("advantage")) and c["advantage"] >= 0, w, "advantage >= 0")
    pub = s.get("published")
    _req(isinstance(pub, dict) and _nonempty_str(pub.get("hardware")), where,
         "published.hardware must say what the original ran on")
    _req(isinstance(s.get("artifacts"), list), where, "artifacts must be an array")
    if "stores" in s:
        sc = s["stores"]
        _req(isinstance(sc, dict) and isinstance(sc.get("skipped"), list), where,
             "stores must be an object with a skipped list")
        _req({k: v for k, v in sc.items() if k != "ab"} == store_comparison(hs, sc["skipped"]),
             where, "stores must be what the harnesses' runs give (ratios, criteria, rows)")
        if "ab" in sc:
            validate_store_ab(sc["ab"], where + ".stores.ab")
    _req(s.get("floor") == floor_block(hs), where,
         "floor must be what the harnesses' runs give (benchlib.floor_block), or absent when "
         "they cannot give it")
    if "transparency_log" in s:
        _req({k: v for k, v in s["transparency_log"].items() if k != "ab"}
             == (log_comparison(hs) or {}), where,
             "transparency_log must be what the harnesses' runs give (ratios, checks, rows)")


# ---- the floor of the signed path: issue 25's terms, measured in the same run ---------------

FLOOR_CRITERIA = {"max_ratio_to_floor": 1.5, "max_decide_ratio_to_static": 2.0,
                  "what": "issue 25: daemon CPU per request of /v1/evaluate (per-receipt "
                          "signing) <= 1.5x the floor in the same run, in each durability "
                          "mode; /decide CPU per request <= 2x the static server's (nginx)"}
FLOOR_HASH_RUNS = ("sha256_request", "sha256_receipt", "sha256_token")


def _us(v, nd=2):
    return None if v is None else round(v, nd)


def floor_block(harnesses):
    """The floor of a signed, durable /v1/evaluate and today's daemon CPU against it, per
    connection count the static server and the evaluate loads share. Terms: HTTP (the static
    server's CPU per request for the same reply bytes), one Ed25519 signature and SHA-256 of
    each hashed text once (handler_latency's p50s), the ledger (ledger_append's CPU per record
    of writing batches of the daemon's size and, with fsync, one fdatasync per batch).
    None when the run has no static load or no handler harness."""
    plain = [h for h in harnesses if not h.get("log")
             and (h.get("store") or {}).get("kind", "file") == "file"]
    handler = next((h for h in plain if h["benchmark"] == "handler_latency"), None)
    static = next((h for h in plain if h["benchmark"] == "http_static_load"), None)
    if handler is None or static is None:
        return None
    p50 = {r["name"]: r["latency_ms"]["p50"] * 1000.0 for r in handler["runs"]}
    if any(n not in p50 for n in ("sign_receipt_hash", "evaluate_handler") + FLOOR_HASH_RUNS):
        return None
    sign_us = _us(p50["sign_receipt_hash"], 3)
    hash_us = _us(sum(p50[n] for n in FLOOR_HASH_RUNS), 3)
    handler_us = _us(p50["evaluate_handler"], 3)
    loads = [h for h in plain if h["benchmark"] == "http_evaluate_load"]
    decide = next((h for h in plain if h["benchmark"] == "http_decide_load"), None)
    appends = [h for h in plain if h["benchmark"] == "ledger_append"]

    def at(h, c):
        return next((r for r in h["runs"] if r["concurrency"] == c), None) if h else None

    def proc_us(r, name):
        e = (r or {}).get("cpu", {}).get("processes", {}).get(name)
        return None if e is None else e["us_per_request"]

    rows = []
    for sr in static["runs"]:
        c = sr["concurrency"]
        http_us = proc_us(sr, "static")
        modes = []
        for h in loads:
            r = at(h, c)
            daemon_us = proc_us(r, "daemon")
            if r is None or daemon_us is None or http_us is None:
                continue
            ar = at(next((x for x in appends if x["durability"] == h["durability"]), None), c)
            ledger_us = proc_us(ar, "append")
            if ledger_us is None:
                continue
            floor = _us(http_us + sign_us + hash_us + ledger_us, 2)
            rest_today = _us(daemon_us - handler_us, 2)
            modes.append({
                "durability": h["durability"], "file": h["file"],
                "throughput_per_s": r["throughput_per_s"],
                "terms_us": {"http": http_us, "signature": sign_us, "hashing": hash_us,
                             "ledger": ledger_us},
                "floor_us": floor, "daemon_cpu_us_per_request": daemon_us,
                "ratio_to_floor": round(daemon_us / floor, 3) if floor > 0 else None,
                "above_floor_us": _us(daemon_us - floor, 2),
                "today_us": {"handler_in_process": handler_us, "rest": rest_today},
                "floor_of_today_us": {"handler_in_process": _us(sign_us + hash_us, 3),
                                      "rest": _us(http_us + ledger_us, 3)},
                "meets_criteria": floor > 0 and daemon_us <= FLOOR_CRITERIA[
                    "max_ratio_to_floor"] * floor})
        d_us = proc_us(at(decide, c), "daemon")
        dec = None
        if d_us is not None and http_us:
            ratio = round(d_us / http_us, 3)
            dec = {"file": decide["file"], "daemon_cpu_us_per_request": d_us,
                   "ratio_to_static": ratio,
                   "meets_criteria": ratio <= FLOOR_CRITERIA["max_decide_ratio_to_static"]}
        rows.append({"concurrency": c, "static_cpu_us_per_request": http_us,
                     "evaluate": modes, "decide": dec})
    return {"what": "the floor of a signed, durable POST /v1/evaluate (issue 25): HTTP + one "
                    "Ed25519 signature + SHA-256 of each hashed text once + the ledger's "
                    "append and its share of the batch's sync; today's daemon CPU per request "
                    "against it, from the same run",
            "sources": {"http": f"{static['file']}: CPU per request of the static server "
                                "(nginx) from /proc, the same reply bytes",
                        "signature": f"{handler['file']}: p50 of sign_receipt_hash",
                        "hashing": f"{handler['file']}: sum of the p50s of "
                                   + ", ".join(FLOOR_HASH_RUNS),
                        "ledger": "ledger_append_<mode>.json at that connection count: CPU "
                                  "per record of write() of a batch of the daemon's record "
                                  "size and count and (fsync) one fdatasync per batch",
                        "handler_in_process": f"{handler['file']}: p50 of evaluate_handler"},
            "static_server": static["server"]["engine"], "static_file": static["file"],
            "criteria": FLOOR_CRITERIA, "rows": rows}


# ---- the store comparison: PostgreSQL beside the file ledger, same run ---------------------

# The bar for one instance on PostgreSQL (shared 2-core machine, so a ratio).
STORE_CRITERIA = {"min_ratio_to_file_fsync": 0.40, "max_p99_ms": 20.0, "max_errors": 0,
                  "applies_to": "postgres, 1 instance",
                  "what": "one instance on PostgreSQL reaches at least 40 % of the RPS of the "
                          "same daemon on the file ledger with --durability fsync at the same "
                          "connection count in the same run, with p99 <= 20 ms and 0 errors"}


def _store_row(h, r, ref):
    st = h.get("store") or {"kind": "file", "instances": 1}
    led, cpu = r.get("ledger") or {}, r.get("cpu") or {}
    ratio = (round(r["throughput_per_s"] / ref["throughput_per_s"], 4)
             if ref is not None and ref["throughput_per_s"] > 0 else None)
    variant = (f"file ledger, durability {h['durability']}" if st["kind"] == "file" else
               "PostgreSQL, 1 instance" if st["instances"] == 1 else
               f"PostgreSQL, {st['instances']} instances behind {st['balancer'].split(',')[0]}")
    return {"variant": variant, "file": h["file"], "store": st["kind"],
            "instances": st["instances"], "concurrency": r["concurrency"],
            "throughput_per_s": r["throughput_per_s"], "p50_ms": r["latency_ms"]["p50"],
            "p99_ms": r["latency_ms"]["p99"], "errors": r["errors"]["count"],
            "ratio_to_file_fsync": ratio,
            "records_per_commit": led.get("records_per_commit"),
            "mean_commit_ms": led.get("mean_commit_ms"),
            "cpu_us_per_request": (cpu.get("machine") or {}).get("us_per_request")}


def store_comparison(harnesses, skipped=()):
    """The PostgreSQL rows beside the file-fsync rows of the same run, at each connection
    count the PostgreSQL runs used; None when no PostgreSQL load ran and nothing was
    skipped. Computed from the harnesses' runs alone (validate_summary recomputes it)."""
    loads = [h for h in harnesses if h["benchmark"] == "http_evaluate_load" and not h.get("log")]
    pg = [h for h in loads if (h.get("store") or {}).get("kind") == "postgres"]
    if not pg and not skipped:
        return None
    ref_h = next((h for h in loads if (h.get("store") or {}).get("kind", "file") == "file"
                  and h["durability"] == "fsync"), None)
    conns = sorted({r["concurrency"] for h in pg for r in h["runs"]})
    rows = []
    for c in conns:
        ref = next((r for r in ref_h["runs"] if r["concurrency"] == c), None) if ref_h else None
        if ref is not None:
            rows.append(_store_row(ref_h, ref, ref))
        for h in sorted(pg, key=lambda x: x["store"]["instances"]):
            for r in h["runs"]:
                if r["concurrency"] == c:
                    rows.append(_store_row(h, r, ref))
    for row in rows:
        row["meets_criteria"] = None
        if row["store"] == "postgres" and row["instances"] == 1:
            row["meets_criteria"] = (row["ratio_to_file_fsync"] is not None
                                     and row["ratio_to_file_fsync"]
                                     >= STORE_CRITERIA["min_ratio_to_file_fsync"]
                                     and row["p99_ms"] <= STORE_CRITERIA["max_p99_ms"]
                                     and row["errors"] <= STORE_CRITERIA["max_errors"])
    return {"reference": ref_h["file"] if ref_h else None, "criteria": STORE_CRITERIA,
            "rows": rows, "skipped": list(skipped)}


# ---- the transparency log: its cost, its lag, batch-signed receipts, same run --------------

# The bars (a 2-core machine shared with wrk, so ratios to the same run's reference).
LOG_CRITERIA = {"max_log_cost": 0.05, "max_lag_p99_ms": 250.0, "lag_at_rps": 10000,
                "min_batch_ratio": 1.6, "batch_max_p99_ms": 10.0, "max_errors": 0,
                "batch_connections": [50, 100],
                "reference": "per-receipt signing, durability fsync, no log, file ledger"}


def _log_side(h, r):
    lg = r.get("log") or {}
    cpu = (r.get("cpu") or {}).get("processes", {}).get("daemon") or {}
    return {"file": h["file"], "throughput_per_s": r["throughput_per_s"],
            "p99_ms": r["latency_ms"]["p99"], "errors": r["errors"]["count"],
            "daemon_cpu_us_per_request": cpu.get("us_per_request"),
            "signatures_per_s": lg.get("signatures_per_s"),
            "leaves_per_checkpoint": lg.get("leaves_per_checkpoint"),
            "lag_mean_ms": lg.get("lag_mean_ms"),
            "lag_p99_bucket_le_ms": lg.get("lag_p99_bucket_le_ms")}


def _le(bound, limit):
    return bound is not None and bound != "+Inf" and bound <= limit


def log_comparison(harnesses):
    """The file-fsync load runs without the log, with it (per-receipt signing) and with
    batch-signed receipts, side by side at each connection count all three used, with the
    issue's criteria applied; None when no run had the log. Computed from the harnesses'
    runs alone (validate_summary recomputes it)."""
    def pick(signing):
        return next((h for h in harnesses if h["benchmark"] == "http_evaluate_load"
                     and (h.get("store") or {}).get("kind", "file") == "file"
                     and h["durability"] == "fsync"
                     and (h.get("log") or {}).get("receipt_signing") == signing), None)
    ref, per, batch = pick(None), pick("receipt"), pick("batch")
    if per is None and batch is None:
        return None
    sides = {"no_log": ref, "log": per, "batch": batch}
    conns = sorted(set.intersection(*[{r["concurrency"] for r in h["runs"]}
                                      for h in sides.values() if h is not None]))
    rows = []
    for c in conns:
        row = {"concurrency": c}
        for k, h in sides.items():
            r = next((x for x in h["runs"] if x["concurrency"] == c), None) if h else None
            row[k] = _log_side(h, r) if r else None
        base = row["no_log"]["throughput_per_s"] if row["no_log"] else None
        row["log_cost"] = (round(1.0 - row["log"]["throughput_per_s"] / base, 4)
                           if base and row["log"] else None)
        row["batch_ratio"] = (round(row["batch"]["throughput_per_s"] / base, 4)
                              if base and row["batch"] else None)
        checks = {}
        if row["log_cost"] is not None:
            checks["log_cost"] = row["log_cost"] <= LOG_CRITERIA["max_log_cost"]
        lagged = [row[k] for k in ("log", "batch") if row[k]
                  and row[k]["throughput_per_s"] >= LOG_CRITERIA["lag_at_rps"]]
        if lagged:
            checks["lag_p99"] = all(_le(x["lag_p99_bucket_le_ms"], LOG_CRITERIA["max_lag_p99_ms"])
                                    for x in lagged)
        if row["batch_ratio"] is not None and c in LOG_CRITERIA["batch_connections"]:
            b = row["batch"]
            checks["batch"] = (row["batch_ratio"] >= LOG_CRITERIA["min_batch_ratio"]
                               and b["p99_ms"] <= LOG_CRITERIA["batch_max_p99_ms"]
                               and b["errors"] <= LOG_CRITERIA["max_errors"])
        row["checks"] = checks
        rows.append(row)
    return {"criteria": LOG_CRITERIA,
            "files": {k: (h["file"] if h else None) for k, h in sides.items()},
            "log_settings": {k: h.get("log") for k, h in sides.items() if h and h.get("log")},
            "rows": rows}


def _median(xs):
    """The lower middle value (nearest rank, as every percentile here)."""
    s = sorted(xs)
    return s[(len(s) - 1) // 2] if s else None


def _ab_side(doc):
    r = doc["runs"][0]
    led, cpu = r.get("ledger") or {}, r.get("cpu") or {}
    return {"file": None, "throughput_per_s": r["throughput_per_s"],
            "p99_ms": r["latency_ms"]["p99"], "errors": r["errors"]["count"],
            "records_per_commit": led.get("records_per_commit"),
            "mean_commit_ms": led.get("mean_commit_ms"),
            "cpu_us_per_request": (cpu.get("machine") or {}).get("us_per_request")}


def store_ab(docs):
    """docs: [(name, artifact)] of the A/B rounds, named r<N>_file.json / r<N>_postgres.json
    -> {rounds: [{round, concurrency, file: side, postgres: side, ratio}], median_ratio,
    min_ratio, max_ratio}: the ratio of each round's PostgreSQL RPS to its file-fsync RPS."""
    sides = {}
    for name, doc in docs:
        m = re.search(r"r(\d+)_(file|postgres)\.json$", name)
        if not m:
            raise SchemaError(f"{name}: A/B rounds are named r<N>_file.json, r<N>_postgres.json")
        kind = (doc.get("store") or {}).get("kind", "file")
        _req(kind == m.group(2), name, "store.kind must be the one its name says")
        _req(len(doc["runs"]) == 1, name, "an A/B round has one run")
        side = _ab_side(doc)
        side["file"] = name
        sides[(int(m.group(1)), kind)] = (side, doc["runs"][0]["concurrency"])
    rounds = []
    for n in sorted({k[0] for k in sides}):
        _req((n, "file") in sides and (n, "postgres") in sides, f"A/B round {n}",
             "needs both its file and its postgres side")
        (f, cf), (p, cp) = sides[(n, "file")], sides[(n, "postgres")]
        _req(cf == cp, f"A/B round {n}", "both sides at one connection count")
        rounds.append({"round": n, "concurrency": cf, "file": f, "postgres": p,
                       "ratio": round(p["throughput_per_s"] / f["throughput_per_s"], 4)
                       if f["throughput_per_s"] > 0 else 0.0})
    ratios = [r["ratio"] for r in rounds]
    return {"what": "The file ledger (--durability fsync) and one PostgreSQL instance "
                    "alternately, a fresh daemon and ledger or database per side and round, "
                    "so both sides of a round see the same background load",
            "rounds": rounds, "median_ratio": _median(ratios),
            "min_ratio": min(ratios) if ratios else None,
            "max_ratio": max(ratios) if ratios else None}


LOG_AB_SIDES = ("no_log", "log", "batch")


def log_ab(docs):
    """docs: [(name, artifact)] of the transparency log's A/B rounds, named
    log_ab/r<N>_{no_log,log,batch}.json -> {rounds: [{round, concurrency, no_log, log, batch
    (sides, batch may be null), log_ratio, batch_ratio}], the medians, minima and maxima of
    both ratios, and log_cost = 1 - the median log_ratio}: each round's RPS with the log (and
    with batch-signed receipts) over the same round's RPS without it."""
    sides = {}
    for name, doc in docs:
        m = re.search(r"r(\d+)_(no_log|log|batch)\.json$", name)
        if not m:
            raise SchemaError(f"{name}: log A/B rounds are named r<N>_{{no_log,log,batch}}.json")
        signing = (doc.get("log") or {}).get("receipt_signing")
        kind = {None: "no_log", "receipt": "log", "batch": "batch"}[signing]
        _req(kind == m.group(2), name, "the artifact's log must be the one its name says")
        _req(len(doc["runs"]) == 1, name, "an A/B round has one run")
        side = _ab_side(doc)
        side["file"] = name
        sides[(int(m.group(1)), kind)] = (side, doc["runs"][0]["concurrency"])
    rounds = []
    for n in sorted({k[0] for k in sides}):
        _req((n, "no_log") in sides and (n, "log") in sides, f"log A/B round {n}",
             "needs its no_log and log sides")
        conns = {c for k, (_, c) in sides.items() if k[0] == n}
        _req(len(conns) == 1, f"log A/B round {n}", "every side at one connection count")
        ref = sides[(n, "no_log")][0]["throughput_per_s"]
        r = {"round": n, "concurrency": conns.pop()}
        for k in LOG_AB_SIDES:
            r[k] = sides[(n, k)][0] if (n, k) in sides else None
        r["log_ratio"] = round(r["log"]["throughput_per_s"] / ref, 4) if ref > 0 else 0.0
        r["batch_ratio"] = (round(r["batch"]["throughput_per_s"] / ref, 4) if ref > 0 else 0.0) \
            if r["batch"] else None
        rounds.append(r)
    lr = [r["log_ratio"] for r in rounds]
    br = [r["batch_ratio"] for r in rounds if r["batch_ratio"] is not None]
    med = _median(lr)
    return {"what": "no log, the log with every receipt signed, and batch-signed receipts "
                    "alternately, a fresh daemon and ledger per side and round (the order "
                    "rotates each round), so every side sees the same background load",
            "rounds": rounds, "median_log_ratio": med,
            "min_log_ratio": min(lr) if lr else None, "max_log_ratio": max(lr) if lr else None,
            "log_cost": round(1.0 - med, 4) if med is not None else None,
            "median_batch_ratio": _median(br), "min_batch_ratio": min(br) if br else None,
            "max_batch_ratio": max(br) if br else None}


def validate_store_ab(ab, where):
    _req(isinstance(ab, dict) and isinstance(ab.get("rounds"), list) and ab["rounds"], where,
         "ab must hold its rounds")
    ratios = []
    for r in ab["rounds"]:
        f, p = r.get("file") or {}, r.get("postgres") or {}
        _req(_is_num(f.get("throughput_per_s")) and _is_num(p.get("throughput_per_s")), where,
             "each round needs both sides' throughput")
        want = round(p["throughput_per_s"] / f["throughput_per_s"], 4) \
            if f["throughput_per_s"] > 0 else 0.0
        _req(r.get("ratio") == want, where, f"round {r.get('round')}: ratio must be "
                                            "postgres / file throughput")
        ratios.append(want)
    _req(ab.get("median_ratio") == _median(ratios) and ab.get("min_ratio") == min(ratios)
         and ab.get("max_ratio") == max(ratios), where,
         "median_ratio, min_ratio, max_ratio must be those of the rounds")


def run_main(main, prog, catch=(SchemaError,), what="schema violation: "):
    """Runs main(argv) as a command: its return value is the exit status, and an exception
    in catch is one line on stderr ("<prog>: <what><error>") and exit status 1."""
    try:
        status = main(sys.argv[1:])
    except catch as e:
        print(f"{prog}: {what}{e}", file=sys.stderr)
        status = 1
    sys.exit(status)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
