#!/usr/bin/env bash
# config_ranges.sh — `serve --help` states every numeric option's range exactly as start-up
# enforces it: for each "range MIN..MAX" it prints, MAX and MIN pass `serve --check-config`
# (which loads and checks everything serve does but the state) and MAX+1 and MIN-1 are
# refused (exit 2, naming the option and, for a number in 64 bits, the same range).
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
"$TG_BIN" serve --help >"$TG_TMP/help.txt" 2>&1 || tg_die "serve --help failed"
python3 - "$TG_BIN" "$TG_POLICY" "$TG_KEY" "$TG_TMP" "$TG_TMP/help.txt" >"$TG_TMP/ranges.out" 2>&1 <<'PY'
import os, re, subprocess, sys

binary, policy, key, tmp, helpfile = sys.argv[1:6]
lines = open(helpfile).read().splitlines()
opts = []  # (flag, min, max)
for i, ln in enumerate(lines):
    m = re.match(r"^  --([a-z0-9-]+) N\s", ln)
    if not m or i + 1 >= len(lines):
        continue
    r = re.search(r"; range (\d+)\.\.(\d+)$", lines[i + 1])
    assert r, "--%s: no range in %r" % (m.group(1), lines[i + 1])
    opts.append((m.group(1), int(r.group(1)), int(r.group(2))))
print("%d numeric options in serve --help" % len(opts))
assert len(opts) >= 28, opts

BASE = ["serve", "--check-config", "--policy", policy, "--key", key,
        "--ledger", os.path.join(tmp, "ledger-ranges")]
# What a value needs beside it to meet the bound that applies to it at its worst: a burst
# must fit at the slowest rate (1/min); threads and connections are also fitted under the
# open-files limit, so each is tried with the other at its smallest; the checkpoint intervals
# with the other at its widest.
WITH = {"rate-limit-burst": ["--rate-limit-per-tenant", "1", "--rate-limit-global", "1",
                             "--rate-limit-verify", "1"],
        "threads": ["--max-connections", "1"],
        "max-connections": ["--threads", "1"],
        # the log's two intervals: the least gap may not exceed the longest wait
        "checkpoint-min-interval": ["--checkpoint-interval", "600000"],
        "checkpoint-interval": ["--checkpoint-min-interval", "1"]}
FD_LIMITED = ("threads", "max-connections")
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("TRIGGUARD_", "RATE_LIMIT_", "BULKHEAD_")) and k not in ("PORT", "TG_DECIDE_PORT")}
env["TRIGGUARD_API_KEYS"] = "acme:tok-acme"
fails = []
fd_limited = []


def run(flag, value):
    p = subprocess.run([binary] + BASE + WITH.get(flag, []) + ["--%s" % flag, value], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace")
    # Without the start-up info lines, so that a failure shows the refusal itself.
    return p.returncode, "\n".join(ln for ln in out.splitlines() if '"level":"info"' not in ln)


for flag, lo, hi in opts:
    for value in (hi, lo):
        rc, out = run(flag, str(value))
        if rc == 0 and "configuration OK" in out:
            continue
        if flag in FD_LIMITED and rc == 2 and "does not fit the open-files limit" in out:
            # The range took it; this machine's descriptor limit is what refused it.
            fd_limited.append("--%s %d" % (flag, value))
            continue
        fails.append("--%s %d (the %s of its range) refused: %d %s"
                     % (flag, value, "max" if value == hi else "min", rc, out.strip()[-300:]))
    for value in (hi + 1, lo - 1):
        rc, out = run(flag, str(value))
        # "option port: 65536 is outside [0, 65535]"; a value with a sign or past 64 bits is
        # not a number to the parser at all.
        outside = "option %s: %d is outside [%d, %d]" % (flag, value, lo, hi)
        not_int = 'option %s: "%d" is not an integer' % (flag, value)
        ok = rc == 2 and (outside in out or (not_int in out and (value < 0 or value > 2**63 - 1)))
        if not ok:
            fails.append("--%s %d (one past its %s) not refused as outside [%d, %d]: %d %s"
                         % (flag, value, "max" if value > hi else "min", lo, hi, rc,
                            out.strip()[-300:]))
print("each checked at max, min (accepted) and max+1, min-1 (refused)")
for f in fd_limited:
    print("note: %s passed the range but not this machine's open-files limit" % f)
for f in fails:
    print("FAIL " + f)
sys.exit(1 if fails else 0)
PY
rc=$?
sed 's/^/    /' "$TG_TMP/ranges.out"
tg_eq "$rc" 0 "every numeric option: max and min start, max+1 and min-1 are refused"
tg_done
