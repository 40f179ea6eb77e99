#!/usr/bin/env bash
# scripts_cli.sh — scripts/run, scripts/cluster, scripts/package and scripts/deps as a new
# user meets them: --help, the refusals that come before anything is installed, built or
# printed (bad PORT, missing --policy file, a bad --instances, a bad package argument), and
# the package groups (`scripts/deps --list GROUP`, no dpkg, no network).
# Nothing is installed or built: cmake, apt-get and dpkg-query are stubs here that record a
# call and fail, so a refusal that came too late shows up as a call.
set -u

: "${TG_SRC:?TG_SRC must point at the repository root}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { # check LABEL COMMAND...
    checks=$((checks + 1))
    "${@:2}" || fail "$1"
}

mkdir "$tmp/stubs"
for tool in cmake apt-get dpkg-query ninja; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\nexit 1\n' "$tool" "$tmp" >"$tmp/stubs/$tool"
    chmod +x "$tmp/stubs/$tool"
done
export PATH="$tmp/stubs:$PATH"
export TG_STATE_DIR=$tmp/state
unset PORT

# runit ARGS... — scripts/run with the stubs; exit status in $rc, streams in $out/$err.
runit() {
    rc=0
    "$TG_SRC/scripts/run" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out") err=$(cat "$tmp/err")
}
nothing_done() { # LABEL [--quiet]: no install, build or state dir (--quiet: nor stdout)
    check "$1: called $(cat "$tmp/calls" 2>/dev/null)" test ! -e "$tmp/calls"
    check "$1: created $TG_STATE_DIR" test ! -e "$TG_STATE_DIR"
    [ "${2:-}" != --quiet ] || check "$1: printed '$out'" test -z "$out"
    rm -f "$tmp/calls"
}

# ---- scripts/run --help ----
runit --help
check "run --help: exit $rc" test "$rc" = 0
check "run --help: usage line" grep -q '^usage: scripts/run \[--policy FILE\] \[--no-serve\]' "$tmp/out"
for word in "scripts/deps run" "--policy FILE" "PORT" "1 to 65535" "TG_STATE_DIR" "--no-serve" \
    "scripts/test and scripts/bench"; do
    check "run --help mentions '$word'" grep -qF -- "$word" "$tmp/out"
done
check "run --help: stderr '$err'" test -z "$err"
nothing_done "run --help"

# ---- refused before anything happens ----
for bad in abc 0 65536 99999 123456 -1 "+80" " 8080" "8080 " 80.0 0x50; do
    PORT=$bad runit --no-serve
    check "PORT='$bad': exit $rc, want 2" test "$rc" = 2
    check "PORT='$bad': message '$err'" \
        grep -qF "run: PORT must be a TCP port from 1 to 65535 in decimal digits, not '$bad'" "$tmp/err"
    nothing_done "PORT='$bad'" --quiet
done
# a bad PORT is refused even when serving was asked for
PORT=abc runit
check "PORT=abc serving: exit $rc" test "$rc" = 2
nothing_done "PORT=abc serving" --quiet
runit --policy "$tmp/no-such-policy.json"
check "--policy missing: exit $rc" test "$rc" = 2
check "--policy missing: message '$err'" grep -qF "run: --policy $tmp/no-such-policy.json: not a readable file" "$tmp/err"
nothing_done "--policy missing" --quiet
runit --policy "$tmp"
check "--policy DIR: exit $rc" test "$rc" = 2
nothing_done "--policy DIR" --quiet
runit --policy
check "--policy without a file: exit $rc ($err)" test "$rc" = 2
check "--policy without a file: message" grep -qF "run: --policy needs a file" "$tmp/err"
nothing_done "--policy without a file" --quiet
runit --frobnicate
check "unknown argument: exit $rc" test "$rc" = 2
check "unknown argument: message" grep -qF "run: unknown argument --frobnicate" "$tmp/err"
nothing_done "unknown argument" --quiet
# and a good one gets past the checks: the first thing after them is scripts/deps run,
# which asks the dpkg-query stub (and so the run stops there, having built nothing)
PORT=08080 runit --no-serve --policy "$TG_SRC/examples/policy.json"
check "good PORT and --policy get past the checks ($(cat "$tmp/calls" 2>/dev/null))" \
    grep -q '^dpkg-query ' "$tmp/calls"
check "... and stop before cmake" bash -c "! grep -q '^cmake' '$tmp/calls'"
rm -f "$tmp/calls"

# ---- scripts/package: --help and the refusals before anything is built ----
runp() {
    rc=0
    "$TG_SRC/scripts/package" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out") err=$(cat "$tmp/err")
}
runp --help
check "package --help: exit $rc" test "$rc" = 0
check "package --help: usage line" grep -q '^usage: scripts/package \[--build-dir DIR\] \[--out DIR\]' "$tmp/out"
for word in /usr/bin/trigguard /etc/trigguard /var/lib/trigguard trigguard.service "dpkg -i" systemctl; do
    check "package --help mentions '$word'" grep -qF -- "$word" "$tmp/out"
done
nothing_done "package --help"
runp --frobnicate
check "package unknown argument: exit $rc" test "$rc" = 2
nothing_done "package unknown argument" --quiet
runp --build-dir
check "package --build-dir without a value: exit $rc" test "$rc" = 2
nothing_done "package --build-dir without a value" --quiet
runp --build-dir "$tmp/pkg-build"
check "package: good arguments reach cmake ($(cat "$tmp/calls" 2>/dev/null))" \
    grep -q '^cmake --preset release .*-DTG_INSTALL_ETC=ON' "$tmp/calls"
check "package: a failed configure fails the script (exit $rc)" test "$rc" -ne 0
rm -rf "$tmp/calls" "$tmp/pkg-build"

# ---- scripts/cluster: --help and the refusals before anything happens ----
runc() {
    rc=0
    "$TG_SRC/scripts/cluster" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out") err=$(cat "$tmp/err")
}
runc --help
check "cluster --help: exit $rc" test "$rc" = 0
check "cluster --help: usage line" grep -q '^usage: scripts/cluster \[--policy FILE\] \[--instances N\]' "$tmp/out"
for word in "scripts/deps cluster" "scripts/run --no-serve" "nginx" "PostgreSQL" "db migrate" \
    "PORT" "Ctrl-C" "never a POST"; do
    check "cluster --help mentions '$word'" grep -qF -- "$word" "$tmp/out"
done
nothing_done "cluster --help"
for bad in abc 0 65536 " 8080" 0x50; do
    PORT=$bad runc
    check "cluster PORT='$bad': exit $rc, want 2" test "$rc" = 2
    check "cluster PORT='$bad': message '$err'" \
        grep -qF "cluster: PORT must be a TCP port from 1 to 65535 in decimal digits, not '$bad'" "$tmp/err"
    nothing_done "cluster PORT='$bad'" --quiet
done
for bad in 0 17 x -1 ""; do
    runc --instances "$bad"
    check "cluster --instances '$bad': exit $rc, want 2" test "$rc" = 2
    check "cluster --instances '$bad': message '$err'" \
        grep -qF "cluster: --instances must be a number from 1 to 16, not '$bad'" "$tmp/err"
    nothing_done "cluster --instances '$bad'" --quiet
done
runc --policy "$tmp/no-such-policy.json"
check "cluster --policy missing: exit $rc" test "$rc" = 2
check "cluster --policy missing: message '$err'" grep -qF "cluster: --policy $tmp/no-such-policy.json: not a readable file" "$tmp/err"
nothing_done "cluster --policy missing" --quiet
runc --frobnicate
check "cluster unknown argument: exit $rc" test "$rc" = 2
nothing_done "cluster unknown argument" --quiet
# good arguments get past the checks to scripts/deps cluster (the dpkg-query stub stops it)
PORT=9090 runc --instances 3
check "cluster: good arguments get past the checks ($(cat "$tmp/calls" 2>/dev/null))" \
    grep -q '^dpkg-query ' "$tmp/calls"
check "cluster: ... and stop before cmake" bash -c "! grep -q '^cmake' '$tmp/calls'"
rm -f "$tmp/calls"

# ---- scripts/deps groups ----
deps() { "$TG_SRC/scripts/deps" "$@" 2>"$tmp/deps.err"; }
run_list=$(deps --list run) || fail "deps --list run: exit $?"
test_list=$(deps --list test) || fail "deps --list test: exit $?"
bench_list=$(deps --list bench) || fail "deps --list bench: exit $?"
cluster_list=$(deps --list cluster) || fail "deps --list cluster: exit $?"
all_list=$(deps --list) || fail "deps --list: exit $?"
has() { grep -qxF "$2" <<<"$1"; }
for p in build-essential cmake pkg-config libmicrohttpd-dev libjansson-dev libsodium-dev nettle-dev curl openssl; do
    check "run group has $p" has "$run_list" "$p"
    check "test group has $p (it builds too)" has "$test_list" "$p"
    check "bench group has $p (it builds too)" has "$bench_list" "$p"
done
for p in clang llvm clang-tidy clang-format libcmocka-dev wrk libclang-rt-14-dev jq; do
    checks=$((checks + 1))
    ! has "$run_list" "$p" || fail "run group installs $p, which only tests, lint, fuzz or bench need"
    check "test group has $p" has "$test_list" "$p"
done
check "bench group has wrk" has "$bench_list" wrk
check "bench group has python3" has "$bench_list" python3
check "bench group has postgresql-15 (the PostgreSQL store runs)" has "$bench_list" postgresql-15
check "bench group has nginx-light (the two-instance run)" has "$bench_list" nginx-light
checks=$((checks + 1))
! has "$bench_list" clang-tidy || fail "bench group installs clang-tidy"
for p in build-essential cmake libpq-dev postgresql-15 nginx-light; do
    check "cluster group has $p" has "$cluster_list" "$p"
done
check "test group has nginx-light (the pg_instance* tests)" has "$test_list" nginx-light
for p in systemd strace; do
    checks=$((checks + 1))
    ! has "$run_list" "$p" || fail "run group installs $p, which only the package test needs"
    check "test group has $p (the package test)" has "$test_list" "$p"
done
checks=$((checks + 1))
! has "$cluster_list" clang-tidy || fail "cluster group installs clang-tidy"
check "no group = every group" test "$all_list" = "$(printf '%s\n' "$run_list" "$test_list" "$bench_list" "$cluster_list" | awk '!s[$0]++')"
check "each package listed once" test "$(sort <<<"$all_list" | uniq -d)" = ""
extra=$(deps --list run nginx-light) || fail "deps --list run nginx-light: exit $?"
check "an extra package is listed after the group" test "$extra" = "$(printf '%s\n' "$run_list" nginx-light)"
check "deps --list touched nothing ($(cat "$tmp/calls" 2>/dev/null))" test ! -e "$tmp/calls"
check "deps --help names the groups" bash -c "'$TG_SRC/scripts/deps' --help | grep -q '^  run  ' && '$TG_SRC/scripts/deps' --help | grep -q '^  bench  '"
rc=0
deps --frobnicate || rc=$?
check "deps unknown option: exit $rc" test "$rc" = 2
# the scripts ask for their own group
check "scripts/run installs the run group" grep -q '^scripts/deps run$' "$TG_SRC/scripts/run"
check "scripts/test installs the test group" grep -q '^scripts/deps test$' "$TG_SRC/scripts/test"
check "scripts/bench installs the bench group" grep -q 'scripts/deps bench' "$TG_SRC/scripts/bench"
check "scripts/cluster installs the cluster group" grep -q '^scripts/deps cluster$' "$TG_SRC/scripts/cluster"

echo "scripts_cli: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
