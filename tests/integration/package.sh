#!/usr/bin/env bash
# package.sh — the Debian package end to end on this machine (issue 24): scripts/package
# builds the .deb (release settings, in a temporary build directory), dpkg -i installs it,
# the files, modes, owners and the trigguard user are as documented, the unit passes
# `systemd-analyze verify`, the unit's own ExecStart command line runs as the trigguard user
# (runuser, a free loopback port added) and signs a PERMIT for a token added to the
# installed tokens file, a reinstall keeps the key, and dpkg -r then dpkg --purge leave
# nothing behind (the configuration, key and ledger only until the purge).
# With strace present the daemon runs under it and every system call it made must be one
# the unit's SystemCallFilter allows.
# TG_PACKAGE_DEB=FILE tests that .deb instead of building one.
# Needs root and dpkg (CI: root on Debian 12); otherwise exit 77 (skipped) with the reason.
# Never leaves the package installed: the EXIT trap purges it, whatever failed.
set -uo pipefail

skip() {
    echo "package.sh: SKIP: $*"
    exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i, a system user)"
for tool in dpkg dpkg-deb dpkg-query cmake cpack runuser curl python3; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool not found"
done
src=${TG_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
# An operator's trigguard (package or user) is not ours to install over or remove.
if dpkg-query -W -f='${db:Status-Abbrev}' trigguard 2>/dev/null | grep -q '^[a-z]i\|^[a-z]c\|^[a-z][a-zH]'; then
    skip "a trigguard package is already on this machine ($(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' trigguard))"
fi
getent passwd trigguard >/dev/null && skip "a trigguard user already exists"
[ -e /var/lib/trigguard ] && skip "/var/lib/trigguard already exists"
[ -e /etc/trigguard ] && skip "/etc/trigguard already exists"
# Two runs at once would install over each other: one at a time per machine.
exec 9>/tmp/trigguard-package-test.lock
flock -n 9 || skip "another package test holds /tmp/trigguard-package-test.lock"

# The start and stop helpers of scripts/lib, not the test library: this test builds and
# runs its own release binary, so scripts/test's second pass under ThreadSanitizer (the
# scripts naming the test library's file) must not pick it up; keep that name out of here.
helpers=$src/scripts/lib
# shellcheck disable=SC1091
source "$helpers/daemon.sh"
tgd_clean_env

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-package.XXXXXX")
chmod 0755 "$tmp"
fails=0 checks=0 daemon_pid=""
log() { echo "[package] $*"; }
fail() { echo "[package] FAIL: $*" >&2; fails=$((fails + 1)); }
check() { # check LABEL COMMAND...
    checks=$((checks + 1))
    "${@:2}" || fail "$1"
}
eq() { # eq ACTUAL EXPECTED LABEL
    checks=$((checks + 1))
    [ "$1" == "$2" ] || fail "$3: got '$1', want '$2'"
}
quiet() { "$@" >/dev/null; }
die() {
    fail "$*"
    exit 1
}

cleanup() {
    local pid
    for pid in $(pgrep -u trigguard 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
    [ -z "$daemon_pid" ] || tgd_stop "$daemon_pid" 10
    if dpkg-query -W -f='${db:Status-Abbrev}' trigguard 2>/dev/null | grep -q '^.[^n]'; then
        echo "[package] cleanup: purging the trigguard package" >&2
        dpkg --purge trigguard >"$tmp/cleanup-purge.log" 2>&1 || cat "$tmp/cleanup-purge.log" >&2
    fi
    if [ -n "${TG_KEEP_TMP:-}" ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
# A stopped test (Ctrl-C, ctest's timeout) still purges: exit runs the EXIT trap.
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# ---- build ---------------------------------------------------------------------------
if [ -n "${TG_PACKAGE_DEB:-}" ]; then
    deb=$TG_PACKAGE_DEB # a .deb scripts/package built already (CI's artifact)
    log "testing $deb"
else
    log "building the package (release settings) in $tmp/build"
    "$src/scripts/package" --build-dir "$tmp/build" --out "$tmp/out" >"$tmp/package.log" 2>&1 ||
        die "scripts/package failed: $(tail -30 "$tmp/package.log")"
    deb=$(tail -1 "$tmp/package.log")
fi
[ -f "$deb" ] || die "scripts/package printed no .deb: $(tail -5 "$tmp/package.log")"
eq "$(dpkg-deb -f "$deb" Package)" trigguard "package name"
check "Depends names the runtime libraries" \
    grep -q 'libmicrohttpd12.*libjansson4.*libsodium23.*libnettle8.*libpq5.*libssl3.*libgnutls30.*libcurl4' \
    <(dpkg-deb -f "$deb" Depends)

# ---- install -------------------------------------------------------------------------
dpkg -i "$deb" >"$tmp/install.log" 2>&1 || die "dpkg -i failed: $(cat "$tmp/install.log")"
eq "$(dpkg-query -W -f='${db:Status-Abbrev}' trigguard)" "ii " "dpkg state after dpkg -i"

# mode owner:group of a path
meta() { stat -c '%a %U:%G' "$1" 2>/dev/null || echo missing; }
check "/usr/bin/trigguard is executable" test -x /usr/bin/trigguard
check "trigguard --version runs" bash -c '/usr/bin/trigguard --version >/dev/null'
unit=/lib/systemd/system/trigguard.service
check "the unit is installed" test -f "$unit"
eq "$(meta /etc/trigguard/policy.json)" "644 root:root" "policy.json"
eq "$(meta /etc/trigguard/tokens.json)" "600 trigguard:trigguard" "tokens.json"
eq "$(tr -d '[:space:]' </etc/trigguard/tokens.json)" "[]" "tokens.json is an empty list"
check "/etc/default/trigguard is installed" test -f /etc/default/trigguard
eq "$(meta /var/lib/trigguard)" "700 trigguard:trigguard" "/var/lib/trigguard"
eq "$(meta /var/lib/trigguard/signing-key.pem)" "600 trigguard:trigguard" "the signing key"
check "the key's public half is beside it" grep -q 'BEGIN PUBLIC KEY' /var/lib/trigguard/signing-key.pub
conffiles=$(dpkg-query -W -f='${Conffiles}' trigguard)
for f in /etc/trigguard/policy.json /etc/trigguard/tokens.json /etc/trigguard/trigguard.conf /etc/default/trigguard; do
    check "$f is a conffile" grep -q " $f " <<<"$conffiles"
done
check "the serve --help page is installed" grep -q -- '--policy' /usr/share/doc/trigguard/trigguard-serve.txt
check "the example OIDC config is installed" test -f /usr/share/trigguard/examples/oidc-github.json
# The user: a system account that cannot log in.
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd trigguard) || die "no trigguard user after dpkg -i"
check "trigguard is a system user (uid $uid)" test "$uid" -lt 1000
eq "$home" /var/lib/trigguard "the user's home"
check "the user has no login shell ($shell)" grep -qE 'nologin|false' <<<"$shell"
check "a trigguard group" bash -c 'getent group trigguard >/dev/null'

if command -v systemd-analyze >/dev/null 2>&1; then
    # verify wants the unit's binary to exist: checked only now it is installed.
    systemd-analyze verify "$unit" >"$tmp/verify.log" 2>&1 ||
        fail "systemd-analyze verify $unit: $(cat "$tmp/verify.log")"
    checks=$((checks + 1))
else
    log "systemd-analyze not found: unit not verified (scripts/deps test installs systemd)"
fi
# shellcheck disable=SC2016 # $MAINPID is the unit's, literally
for d in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
    ReadWritePaths=/var/lib/trigguard LimitNOFILE=65536 User=trigguard Restart=on-failure \
    'ExecReload=/bin/kill -HUP $MAINPID' CapabilityBoundingSet= SystemCallFilter=@system-service; do
    check "unit has $d" grep -qxF "$d" "$unit"
done

# A reinstall (what an upgrade runs too) keeps the key: receipts it signed stay verifiable.
key_sum=$(sha256sum /var/lib/trigguard/signing-key.pem | cut -d' ' -f1)
dpkg -i "$deb" >"$tmp/reinstall.log" 2>&1 || fail "dpkg -i again: $(cat "$tmp/reinstall.log")"
eq "$(sha256sum /var/lib/trigguard/signing-key.pem | cut -d' ' -f1)" "$key_sum" "key after a reinstall"
eq "$(meta /var/lib/trigguard/signing-key.pem)" "600 trigguard:trigguard" "the key after a reinstall"

# ---- run the unit's command line as its user ----------------------------------------
# The documented way to add a token: as root, then give the file back to the daemon's user.
token=$(/usr/bin/trigguard token create --tokens /etc/trigguard/tokens.json --tenant ops 2>"$tmp/token.err") ||
    die "token create: $(cat "$tmp/token.err")"
chown trigguard:trigguard /etc/trigguard/tokens.json

execstart=$(sed -n 's/^ExecStart=//p' "$unit")
[ -n "$execstart" ] || die "no ExecStart in $unit"
read -r -a cmd <<<"$execstart"
# systemd drops an unset $VAR word (the shipped /etc/default/trigguard sets nothing).
args=()
for w in "${cmd[@]}"; do
    case $w in \$*) ;; *) args+=("$w") ;; esac
done
eq "${args[0]}" /usr/bin/trigguard "ExecStart runs the installed binary"
eq "${args[*]:1}" "serve --config /etc/trigguard/trigguard.conf" "ExecStart reads the installed config file"
run=$tmp/run
install -d -o trigguard -g trigguard -m 0700 "$run"
args+=(--listen 127.0.0.1 --port 0 --port-file "$run/port")
if command -v strace >/dev/null 2>&1 && command -v systemd-analyze >/dev/null 2>&1; then
    args=(strace -f -qq -o "$run/strace" "${args[@]}")
fi
log "running as trigguard: ${args[*]}"
tgd_start "$run/port" "$tmp/daemon.log" 60 \
    runuser -u trigguard -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${args[@]}" ||
    die "the unit's command line did not serve ($TGD_ERROR): $(tail -20 "$tmp/daemon.log")"
daemon_pid=$TGD_PID
url=$TGD_URL

req='{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.05,"rsdSpike":false}}'
status=$(curl -s -o "$tmp/permit.json" -w '%{http_code}' --max-time 20 -X POST "$url/v1/evaluate" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' --data-binary "$req")
eq "$status" 200 "evaluate with the added token"
eq "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decision"])' "$tmp/permit.json" 2>/dev/null)" \
    PERMIT "the decision"
check "the receipt verifies offline with the installed key's public half" \
    quiet /usr/bin/trigguard verify --key /var/lib/trigguard/signing-key.pub "$tmp/permit.json"
status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -X POST "$url/v1/evaluate" \
    -H "Authorization: Bearer not-$token" -H 'Content-Type: application/json' --data-binary "$req")
eq "$status" 401 "evaluate with an unknown token"
check "the ledger is under /var/lib/trigguard" test -d /var/lib/trigguard/ledger
eq "$(stat -c %U /var/lib/trigguard/ledger 2>/dev/null)" trigguard "the ledger's owner"

# ExecReload: SIGHUP to the daemon, which keeps serving.
dpid=$(pgrep -u trigguard -x trigguard | head -1)
[ -n "$dpid" ] || fail "no trigguard process of the trigguard user"
if [ -n "$dpid" ]; then
    kill -HUP "$dpid"
    sleep 1
    check "still serving after SIGHUP" curl -sf -o /dev/null --max-time 5 "$url/healthz"
    # systemd would signal the main process: SIGTERM to the daemon, not to runuser/strace.
    kill -TERM "$dpid"
    # runuser (and strace) exit with it: wait for that, the status is the daemon's.
    for ((i = 0; i < 300; i++)); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
fi
tgd_stop "$daemon_pid" 10
daemon_pid=""
eq "$TGD_KILLED:$TGD_STATUS" 0:0 "exit status after SIGTERM (killed:status)"
check "no trigguard process left" test -z "$(pgrep -u trigguard)"

if [ -f "$run/strace" ]; then
    # Every system call made must pass SystemCallFilter=@system-service ~@privileged
    # @resources (the groups as this systemd defines them).
    systemd-analyze syscall-filter >"$tmp/groups.txt" 2>/dev/null
    bad=$(python3 - "$tmp/groups.txt" "$run/strace" <<'PY'
import re, sys
groups, cur = {}, None
for line in open(sys.argv[1]):
    s = line.strip()
    if not s or s.startswith("#"):
        continue
    if not line.startswith((" ", "\t")):
        cur = s
        groups[cur] = []
    elif cur:
        groups[cur].append(s)
def expand(name, seen=()):
    out = set()
    for m in groups.get(name, []):
        out |= expand(m, seen + (name,)) if m.startswith("@") and m not in seen else {m}
    return out
allowed = expand("@system-service") - expand("@privileged") - expand("@resources")
used = set()
for line in open(sys.argv[2]):
    m = re.match(r"^\d+\s+([a-z0-9_]+)\(", line)
    if m:
        used.add(m.group(1))
print(" ".join(sorted(used - allowed)))
PY
    )
    eq "$bad" "" "system calls outside the unit's SystemCallFilter"
    # MemoryDenyWriteExecute=yes refuses writable-and-executable mappings and making any
    # mapping executable after the fact: none of either.
    wx=$(grep -E '^[0-9]+ +(mmap|mprotect|pkey_mprotect)\(' "$run/strace" |
        grep -E '(mmap\(.*PROT_WRITE\|PROT_EXEC|mmap\(.*PROT_EXEC\|PROT_WRITE|mprotect\(.*PROT_EXEC)' | head -3)
    eq "$wx" "" "writable-executable memory (MemoryDenyWriteExecute)"
fi

# ---- remove, then purge --------------------------------------------------------------
dpkg -r trigguard >"$tmp/remove.log" 2>&1 || fail "dpkg -r: $(cat "$tmp/remove.log")"
eq "$(dpkg-query -W -f='${db:Status-Abbrev}' trigguard 2>/dev/null)" "rc " "dpkg state after dpkg -r"
check "dpkg -r removes the binary" test ! -e /usr/bin/trigguard
check "dpkg -r removes the unit" test ! -e "$unit"
check "dpkg -r removes the docs" test ! -e /usr/share/doc/trigguard/trigguard-serve.txt
check "dpkg -r keeps the configuration" test -f /etc/trigguard/policy.json
check "dpkg -r keeps the tokens" grep -q token_sha256 /etc/trigguard/tokens.json
check "dpkg -r keeps the key" test -f /var/lib/trigguard/signing-key.pem
check "dpkg -r keeps the ledger" test -d /var/lib/trigguard/ledger

dpkg --purge trigguard >"$tmp/purge.log" 2>&1 || fail "dpkg --purge: $(cat "$tmp/purge.log")"
eq "$(dpkg-query -W -f='${db:Status-Abbrev}' trigguard 2>/dev/null)" "" "dpkg knows nothing of trigguard after --purge"
for p in /etc/trigguard /etc/default/trigguard /var/lib/trigguard /usr/share/trigguard /usr/share/doc/trigguard; do
    check "purge leaves no $p" test ! -e "$p"
done
check "purge removes the trigguard user" bash -c '! getent passwd trigguard'
check "purge removes the trigguard group" bash -c '! getent group trigguard'

if [ "$fails" -ne 0 ]; then
    echo "[package] FAILED: $fails of $((checks + fails)) checks failed"
    exit 1
fi
echo "[package] PASSED: $checks checks"
