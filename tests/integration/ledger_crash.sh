#!/usr/bin/env bash
# ledger_crash.sh — crash safety of the receipt ledger (issue 5, SPEC §9): the real daemon
# under concurrent load is SIGKILLed at seeded random moments and restarted on the same
# ledger; nothing answered before a kill is lost or duplicated, the chain verifies with
# signatures, retries replay byte for byte and nonces stay spent (lib/crash.py says how).
# Runs --durability fsync (5 kills, small segments so kills also land around rotation) and
# a short --durability batch campaign (a process crash loses nothing there either).
#
# Environment: TG_BIN (required), TG_SRC; TG_CRASH_SEED=N replays a campaign (the seed is
# printed on every run); TG_CRASH_ROUNDS (default 5) and TG_CRASH_BATCH_ROUNDS (default 2);
# TG_KEEP_TMP=1 keeps the temporary directory (ledgers, daemon logs) for a post-mortem.
set -u
BIN=${TG_BIN:?TG_BIN must point at the trigguard binary}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=$(command -v python3); fi
# The daemon tests' policy if present, else the bundled one: the requests of lib/crash.py
# get the same PERMIT / DENY / SILENCE from both.
POLICY=""
for p in "$HERE/data/daemon_policy.json" "$HERE/data/policy.json" \
    "${TG_SRC:-$HERE/../..}/examples/policy.json"; do
    [ -f "$p" ] && { POLICY=$p; break; }
done
[ -n "$POLICY" ] || { echo "FAIL: no policy file found" >&2; exit 1; }
# Loopback only: no proxy may route the test traffic elsewhere.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost PYTHONDONTWRITEBYTECODE=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tg-ledger-crash.XXXXXX")
DRIVER_PID=""
cleanup() {
    # The driver stops its daemon itself; this covers an interrupted run.
    [ -n "$DRIVER_PID" ] && kill -TERM "$DRIVER_PID" 2>/dev/null && wait "$DRIVER_PID" 2>/dev/null
    local pid
    for f in "$WORK"/*/daemon.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        # only our own daemon: the pid must still run this binary
        [ -n "$pid" ] || continue
        if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$BIN")" ]; then
            kill -KILL "$pid" 2>/dev/null
        fi
    done
    if [ -n "${TG_KEEP_TMP:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SEED=${TG_CRASH_SEED:-$(( ($(date +%s%N) / 1000) % 1000000007 ))}
echo "[ledger_crash] seed $SEED (replay with TG_CRASH_SEED=$SEED), policy $POLICY"

"$BIN" keygen --out "$WORK/key.pem" --key-id crash-key-1 >"$WORK/keygen.out" 2>&1 || {
    echo "FAIL: trigguard keygen: $(cat "$WORK/keygen.out")"
    exit 1
}

START=$SECONDS
campaign() { # campaign DURABILITY ROUNDS BUDGET_S SEED [extra driver args]
    local mode=$1 rounds=$2 budget=$3 seed=$4
    shift 4
    mkdir -p "$WORK/$mode"
    "$PY" -u "$HERE/lib/crash.py" --bin "$BIN" --policy "$POLICY" --key "$WORK/key.pem" \
        --dir "$WORK/$mode" --durability "$mode" --rounds "$rounds" --seed "$seed" \
        --budget "$budget" "$@" &
    DRIVER_PID=$!
    wait "$DRIVER_PID"
    local rc=$?
    DRIVER_PID=""
    if [ $rc -ne 0 ]; then
        echo "FAIL: ledger crash campaign, --durability $mode, seed $seed (exit $rc)" >&2
        exit 1
    fi
}

campaign fsync "${TG_CRASH_ROUNDS:-5}" 50 "$SEED" --segment-bytes 65536
campaign batch "${TG_CRASH_BATCH_ROUNDS:-2}" 22 "$((SEED + 1))"
echo "[ledger_crash] PASSED in $((SECONDS - START)) s (seed $SEED)"
