# daemon.sh — start a `trigguard serve` with a fresh key and token, wait until it answers,
# stop it. Sourced by scripts/bench, scripts/peerbench and tests/integration/lib/daemon.sh,
# so the three start and stop the daemon the same way.
#
#   source "$root/scripts/lib/daemon.sh"
#   tgd_clean_env                                     # nothing of the caller's leaks in
#   tgd_credentials "$bin" "$state" bench-1           # $state/key.pem, $TGD_TOKEN, $TGD_TOKEN_SHA
#   tgd_start "$state/port" "$state/daemon.log" 30 \
#       env TRIGGUARD_API_KEYS="bench:sha256:$TGD_TOKEN_SHA" "$bin" serve --port 0 \
#       --port-file "$state/port" --key "$state/key.pem" ... || die "$TGD_ERROR"
#   curl "$TGD_URL/healthz"
#   tgd_stop "$TGD_PID" 20; echo "exit status $TGD_STATUS"
#
# The functions report through variables (TGD_*) and their return status, never by exiting:
# each caller fails in its own way (tg_die in the tests, die in the bench scripts). They
# work with and without `set -e`. A daemon is started in the calling shell, not in a
# subshell, so that `wait` can collect its exit status: call tgd_start directly, never
# inside $(...).
# shellcheck shell=bash
# shellcheck disable=SC2034 # the TGD_* results are read by the scripts that source this

# The daemon reads these from the environment: a caller sets what it needs explicitly.
# Loopback only: a proxy setting must never route local traffic elsewhere.
tgd_clean_env() {
    local v
    unset PORT TG_DECIDE_PORT RATE_LIMIT_PER_TENANT RATE_LIMIT_GLOBAL RATE_LIMIT_BURST \
        BULKHEAD_TENANT_MAX_IN_FLIGHT BULKHEAD_GLOBAL_MAX_IN_FLIGHT
    while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^TRIGGUARD_' || true)
    unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
    export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
}

# tgd_token: sets TGD_TOKEN to a fresh random bearer token (48 hex digits) and
# TGD_TOKEN_SHA to its SHA-256 in hex, the form TRIGGUARD_API_KEYS and tokens files take
# ("tenant:sha256:<hex>"), so the token itself never appears in a process list.
tgd_token() {
    TGD_TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
    TGD_TOKEN_SHA=$(printf %s "$TGD_TOKEN" | sha256sum | cut -d' ' -f1)
    [ ${#TGD_TOKEN} -eq 48 ] && [ ${#TGD_TOKEN_SHA} -eq 64 ]
}

# tgd_credentials BIN DIR KEY_ID: a new signing key DIR/key.pem (trigguard keygen; its output
# goes to stdout/stderr, for the caller to redirect) and a new token (tgd_token).
tgd_credentials() {
    "$1" keygen --out "$2/key.pem" --key-id "$3" && tgd_token
}

# tgd_wait_ready PID URL DEADLINE: polls URL/healthz until it answers, while PID lives and
# until $SECONDS reaches DEADLINE. Fails with TGD_ERROR set.
tgd_wait_ready() {
    local pid=$1 url=$2 deadline=$3
    until curl -s -o /dev/null --max-time 2 "$url/healthz"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            TGD_ERROR="died after listening"
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            TGD_ERROR="/healthz did not answer in time"
            return 1
        fi
        sleep 0.05
    done
}

# tgd_start PORT_FILE LOG TIMEOUT CMD...: runs CMD in the background (stdout and stderr
# appended to LOG). CMD is, or execs, a `trigguard serve --port 0 --port-file PORT_FILE`, so
# the port is the kernel's choice and is known once the file is written. Waits at most
# TIMEOUT seconds for the port file and then for /healthz on $TGD_HOST (default 127.0.0.1;
# "[::1]" for a daemon listening on ::1). Sets TGD_PID (empty again if the daemon exited),
# TGD_PORT and TGD_URL; on failure returns 1 with TGD_ERROR saying what happened, and
# TGD_STATUS the exit status when the daemon exited before listening. A daemon that is still
# running after a failure is left to the caller to stop (TGD_PID).
tgd_start() {
    local pf=$1 log=$2 timeout=$3
    shift 3
    TGD_PID="" TGD_PORT="" TGD_URL="" TGD_ERROR="" TGD_STATUS=""
    rm -f "$pf"
    "$@" >>"$log" 2>&1 &
    TGD_PID=$!
    local deadline=$((SECONDS + timeout))
    while [ ! -s "$pf" ]; do
        if ! kill -0 "$TGD_PID" 2>/dev/null; then
            TGD_STATUS=0
            wait "$TGD_PID" || TGD_STATUS=$?
            TGD_PID=""
            TGD_ERROR="exited with $TGD_STATUS before listening"
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            TGD_ERROR="wrote no port file in ${timeout}s"
            return 1
        fi
        sleep 0.05
    done
    TGD_PORT=$(tr -d '[:space:]' <"$pf")
    TGD_URL="http://${TGD_HOST:-127.0.0.1}:$TGD_PORT"
    tgd_wait_ready "$TGD_PID" "$TGD_URL" "$deadline"
}

# tgd_stop PID TIMEOUT: SIGTERM, up to TIMEOUT seconds for the process to exit, then
# SIGKILL. Sets TGD_STATUS to its exit status (from `wait`: PID must be a child of this
# shell) and TGD_KILLED to 1 when it had to be killed, else 0. An empty PID does nothing
# (TGD_STATUS 0).
tgd_stop() {
    local pid=$1 timeout=$2
    TGD_STATUS=0 TGD_KILLED=0
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + timeout))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
    if kill -0 "$pid" 2>/dev/null; then
        TGD_KILLED=1
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || TGD_STATUS=$?
    return 0
}
