# daemon.sh — sourced by tests/integration/*.sh: run the real `trigguard serve` on an
# ephemeral loopback port in a temporary state directory, drive it with curl, assert.
#
# Usage in a test script:
#   source "$(dirname "$0")/lib/daemon.sh"
#   tg_keygen                                  # $TG_KEY (key id itest-key-1)
#   tg_start main -- "${TG_STD_ARGS[@]}"       # env assignments may precede the "--"
#   tg_req POST /v1/evaluate -H "Authorization: Bearer tok-acme" --json-body "$REQ"
#   tg_expect_status 200 "evaluate permits"
#   tg_expect_py 'j["decision"] == "PERMIT"' "decision"
#   tg_done                                    # exit status: 0 only when nothing failed
#
# Every daemon started here is stopped (SIGTERM, then waited for) by the EXIT trap, and
# the temporary directory is removed. Failures are counted and printed with the last
# response so a red ctest says what went wrong.

set -uo pipefail

: "${TG_BIN:?TG_BIN must name the trigguard binary}"
: "${TG_SRC:?TG_SRC must name the repository root}"
TG_IT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TG_DATA=$TG_IT_DIR/data
TG_POLICY=$TG_DATA/daemon_policy.json
TG_PYLIB=$TG_IT_DIR/lib
# The system interpreter: a version-manager shim can take seconds per start on a busy host.
if [ -x /usr/bin/python3 ]; then TG_PY=/usr/bin/python3; else TG_PY=$(command -v python3); fi
python3() { "$TG_PY" "$@"; }
export PYTHONPATH="$TG_PYLIB${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

# Starting, waiting for and stopping a daemon: the code scripts/bench and scripts/peerbench
# use too. The daemon reads the environment, so a test sets what it needs explicitly.
# shellcheck source=scripts/lib/daemon.sh
source "$TG_IT_DIR/../../scripts/lib/daemon.sh"
tgd_clean_env

TG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tg-itest.XXXXXX")
TG_FAILS=0
TG_CHECKS=0
TG_TEST_NAME=$(basename "$0" .sh)
TG_API_KEYS="acme:tok-acme,beta:tok-beta"
TG_AUTH_A=(-H "Authorization: Bearer tok-acme")
TG_AUTH_B=(-H "Authorization: Bearer tok-beta")
TG_START_TIMEOUT=${TG_START_TIMEOUT:-30}

declare -A TG_PIDS=()   # name -> pid of a running daemon
declare -A TG_PORTS=()  # name -> bound port
declare -A TG_LOGS=()   # name -> stderr log file
declare -A TG_HOSTS=()  # name -> host part of its URL (127.0.0.1, or [::1] for --listen ::1)
TG_NAME=""              # the daemon tg_req talks to (the last one started, or tg_use)
TG_WRAPPER=()           # a command tg_start runs the daemon under (it must exec it), e.g.
                        # TG_WRAPPER=(prlimit --nofile=96:96); empty: none
TG_URL=""

# ---- reporting ------------------------------------------------------------------------

tg_log() { printf '[%s] %s\n' "$TG_TEST_NAME" "$*"; }

# Prints the last response (status, headers, start of the body) for a failure message.
tg_show_last() {
    [ -f "$TG_TMP/last.status" ] || return 0
    printf '    last request: %s\n' "$(cat "$TG_TMP/last.request" 2>/dev/null)"
    printf '    status: %s\n' "$(cat "$TG_TMP/last.status")"
    sed 's/^/    < /' "$TG_TMP/last.headers" 2>/dev/null | tr -d '\r' | head -20
    printf '    body: %s\n' "$(head -c 1500 "$TG_TMP/last.body" 2>/dev/null)"
}

tg_fail() {
    TG_FAILS=$((TG_FAILS + 1))
    printf '[%s] FAIL: %s\n' "$TG_TEST_NAME" "$*" >&2
    tg_show_last >&2
}

tg_pass() {
    TG_CHECKS=$((TG_CHECKS + 1))
    [ -n "${TG_VERBOSE:-}" ] && printf '[%s] ok: %s\n' "$TG_TEST_NAME" "$*"
    return 0
}

# Stops the script at once (a precondition failed, going on would only cascade).
tg_die() {
    tg_fail "$*"
    exit 1
}

# Asserts a shell condition: tg_check "label" cmd args...
tg_check() {
    local label=$1
    shift
    if "$@"; then tg_pass "$label"; else tg_fail "$label (command: $*)"; fi
}

tg_eq() { # tg_eq ACTUAL EXPECTED LABEL
    if [ "$1" == "$2" ]; then tg_pass "$3"; else tg_fail "$3: got '$1', want '$2'"; fi
}

tg_ne() { # tg_ne ACTUAL UNEXPECTED LABEL
    if [ "$1" != "$2" ]; then tg_pass "$3"; else tg_fail "$3: got '$1', which it must not be"; fi
}

tg_done() {
    if [ "$TG_FAILS" -ne 0 ]; then
        tg_log "FAILED: $TG_FAILS of $((TG_CHECKS + TG_FAILS)) checks failed"
        exit 1
    fi
    tg_log "PASSED: $TG_CHECKS checks"
    exit 0
}

# ---- setup ------------------------------------------------------------------------------

# A fresh signing key in the state dir: $TG_KEY, key id itest-key-1 (or $1 / $2).
tg_keygen() {
    local out=${1:-$TG_TMP/key.pem} kid=${2:-itest-key-1}
    "$TG_BIN" keygen --out "$out" --key-id "$kid" >"$TG_TMP/keygen.out" 2>&1 ||
        tg_die "trigguard keygen failed: $(cat "$TG_TMP/keygen.out")"
    [ "$out" == "$TG_TMP/key.pem" ] && TG_KEY=$out
    return 0
}

# The usual daemon arguments: test policy, the key, a ledger in the state dir.
tg_std_args() { # tg_std_args NAME  -> fills TG_STD_ARGS
    TG_STD_ARGS=(--policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-$1"
        --log-format json --threads 2)
    if [ "${TG_TEST_STORE:-file}" == postgres ]; then
        tg_pg_store_for "$1"
        TG_STD_ARGS+=(--store postgres --database-url "$TG_PG_STORE_URL")
    fi
}

# TG_TEST_STORE=postgres (the integration_pg_* variants of some tests, CMakeLists.txt):
# the same test against --store postgres. tg_pg_store_for NAME: a throwaway cluster for the
# test (started once, removed at exit) and a migrated database for daemon NAME (the same one
# again for the same NAME, so a restarted daemon finds its state, as with --ledger).
tg_pg_store_url() { # tg_pg_store_url NAME: the database URL of daemon NAME
    local db=tg_${1//[^a-zA-Z0-9_]/_}
    printf '%s\n' "${TG_PG_URL/trigguard?/$db?}"
}
tg_pg_store_for() {
    local db=tg_${1//[^a-zA-Z0-9_]/_}
    if [ -z "${TG_PG_URL:-}" ]; then
        # shellcheck source=scripts/lib/pg.sh
        source "$TG_SRC/scripts/lib/pg.sh"
        unset TRIGGUARD_DATABASE_URL
        tg_pg_start || tg_die "start PostgreSQL: $TG_PG_ERROR"
    fi
    TG_PG_STORE_URL=${TG_PG_URL/trigguard?/$db?}
    if ! "$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -At -c "select 1 from pg_database where datname = '$db'" | grep -q 1; then
        "$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -q -c "create database $db owner trigguard" >/dev/null ||
            tg_die "create database $db"
        "$TG_BIN" db migrate --database-url "$TG_PG_STORE_URL" >/dev/null 2>&1 ||
            tg_die "migrate database $db"
    fi
}

# A port that was free a moment ago (for listeners without a port file).
tg_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# tg_start NAME [VAR=value ...] -- serve-args...
# Starts `trigguard serve --port 0 --port-file F serve-args` with the given environment
# (TRIGGUARD_API_KEYS defaults to the acme/beta tokens unless given, even empty), waits
# until the port file exists and /healthz answers, and makes it the current daemon.
tg_start() {
    local name=$1
    shift
    local -a envs=()
    local have_keys=0
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        envs+=("$1")
        case $1 in TRIGGUARD_API_KEYS=*) have_keys=1 ;; esac
        shift
    done
    [ "${1:-}" == "--" ] && shift
    [ $have_keys -eq 1 ] || envs+=("TRIGGUARD_API_KEYS=$TG_API_KEYS")
    local pf=$TG_TMP/port-$name log=$TG_TMP/daemon-$name.log a prev=""
    TG_HOSTS[$name]=127.0.0.1
    for a in "$@"; do
        [ "$prev" == "--listen" ] && [ "$a" == "::1" ] && TG_HOSTS[$name]="[::1]"
        prev=$a
    done
    TGD_HOST=${TG_HOSTS[$name]}
    TG_LOGS[$name]=$log
    if ! tgd_start "$pf" "$log" "$TG_START_TIMEOUT" \
        "${TG_WRAPPER[@]}" env "${envs[@]}" "$TG_BIN" serve --port 0 --port-file "$pf" "$@"; then
        [ -z "$TGD_PID" ] || TG_PIDS[$name]=$TGD_PID # still running: the EXIT trap stops it
        tg_die "daemon $name $TGD_ERROR; log:
$(tail -20 "$log")"
    fi
    local pid=$TGD_PID
    TG_PIDS[$name]=$pid
    TG_PORTS[$name]=$TGD_PORT
    tg_use "$name"
    tg_log "daemon $name: pid $pid, port ${TG_PORTS[$name]}"
}

tg_use() {
    TG_NAME=$1
    TG_URL="http://${TG_HOSTS[$1]:-127.0.0.1}:${TG_PORTS[$1]}"
}

tg_pid() { echo "${TG_PIDS[$1]}"; }
tg_logfile() { echo "${TG_LOGS[$1]}"; }

# Sanitizer reports in a daemon log are failures whatever the exit status was.
tg_check_sanitizers() { # tg_check_sanitizers NAME
    local log=${TG_LOGS[$1]}
    if grep -qE '(ERROR|WARNING): (Address|Leak|Thread)Sanitizer|runtime error:' "$log"; then
        tg_fail "daemon $1: sanitizer report in its log:
$(grep -A15 -E '(ERROR|WARNING): (Address|Leak|Thread)Sanitizer|runtime error:' "$log" | head -40)"
    fi
}

# tg_stop NAME [expected-exit-status]: SIGTERM, wait (20 s at most), check the status.
tg_stop() {
    local name=$1 want=${2:-0}
    local pid=${TG_PIDS[$name]:-}
    [ -n "$pid" ] || return 0
    tgd_stop "$pid" 20
    [ "$TGD_KILLED" = 0 ] || tg_fail "daemon $name did not exit within 20 s of SIGTERM"
    unset "TG_PIDS[$name]"
    tg_expect_exit "$name" "$TGD_STATUS" "$want" "daemon $name exit status after SIGTERM"
    tg_check_sanitizers "$name"
    return 0
}

# tg_expect_exit NAME RC WANT LABEL: a daemon's exit status; when it is wrong, the failure
# carries the last lines of its log other than access-log lines (an abort says why there).
tg_expect_exit() {
    if [ "$2" == "$3" ]; then
        tg_pass "$4"
    else
        tg_fail "$4: got '$2', want '$3'; last lines of its log:
$(grep -v '"event":"request"' "${TG_LOGS[$1]}" | tail -15 | sed 's/^/    | /')"
    fi
}

tg_cleanup() {
    local name
    for name in "${!TG_PIDS[@]}"; do
        kill -TERM "${TG_PIDS[$name]}" 2>/dev/null
    done
    for name in "${!TG_PIDS[@]}"; do
        tgd_stop "${TG_PIDS[$name]}" 10
    done
    if [ -n "${TG_KEEP_TMP:-}" ]; then
        echo "kept $TG_TMP" >&2
    else
        rm -rf "$TG_TMP"
    fi
}
trap tg_cleanup EXIT

coproc TG_EVAL { "$TG_PY" -u "$TG_PYLIB/evalsrv.py"; }

# ---- requests ---------------------------------------------------------------------------

# tg_req METHOD PATH [curl args...]: one request to the current daemon. Afterwards
# $TG_STATUS is the HTTP status (000 = no response), $TG_BODY_FILE / $TG_HDR_FILE hold
# the raw body and headers. --json-body TEXT posts TEXT as application/json.
tg_req() {
    local method=$1 path=$2
    shift 2
    local -a args=()
    while [ $# -gt 0 ]; do
        if [ "$1" == "--json-body" ]; then
            printf '%s' "$2" >"$TG_TMP/req.body"
            args+=(-H "Content-Type: application/json" --data-binary "@$TG_TMP/req.body")
            shift 2
        else
            args+=("$1")
            shift
        fi
    done
    TG_BODY_FILE=$TG_TMP/last.body
    TG_HDR_FILE=$TG_TMP/last.headers
    printf '%s %s%s' "$method" "$TG_URL" "$path" >"$TG_TMP/last.request"
    TG_STATUS=$(curl -s -X "$method" -o "$TG_BODY_FILE" -D "$TG_HDR_FILE" -w '%{http_code}' \
        --max-time 20 "${args[@]}" "$TG_URL$path")
    echo "$TG_STATUS" >"$TG_TMP/last.status"
}

# Evaluate-style POST with acme's token: tg_post PATH JSON [more curl args].
tg_post() {
    local path=$1 body=$2
    shift 2
    tg_req POST "$path" "${TG_AUTH_A[@]}" --json-body "$body" "$@"
}

tg_body() { cat "$TG_BODY_FILE"; }

# Value of response header NAME (case-insensitive), without CR; empty if absent.
tg_header() {
    awk -v n="$(echo "$1" | tr 'A-Z' 'a-z')" 'BEGIN{FS=": *"} {
        k=tolower($1); sub(/\r$/, "")
        if (k == n) { v=$0; sub(/^[^:]*: */, "", v); print v; exit } }' "$TG_HDR_FILE"
}

tg_has_header() {
    grep -qi "^$1:" "$TG_HDR_FILE"
}

# Saves the last response (body, headers, status) under $TG_TMP/saved-NAME.*
tg_save() {
    cp "$TG_BODY_FILE" "$TG_TMP/saved-$1.body"
    cp "$TG_HDR_FILE" "$TG_TMP/saved-$1.headers"
    echo "$TG_STATUS" >"$TG_TMP/saved-$1.status"
}

tg_saved_body() { echo "$TG_TMP/saved-$1.body"; }

# ---- assertions on the last response ----------------------------------------------------

# tg_hup PID [URL [CURL ARGS...]]: SIGHUP, then wait until URL/version (default $TG_URL) shows a
# last_reload newer than the one before, so that what follows sees the reloaded state.
tg_hup() {
    local pid=$1 url=${2:-$TG_URL} before after
    shift $(($# < 2 ? $# : 2))
    before=$(curl -s --max-time 5 "$@" "$url/version" | jq -c '.last_reload.at // ""')
    kill -HUP "$pid"
    for _ in $(seq 1 150); do
        after=$(curl -s --max-time 5 "$@" "$url/version" | jq -c '.last_reload.at // ""')
        [ "$after" != "$before" ] && return 0
        sleep 0.1
    done
    tg_fail "SIGHUP: /version shows no new last_reload within 15 s"
}

tg_expect_status() { # tg_expect_status CODE LABEL
    tg_eq "$TG_STATUS" "$1" "$2: HTTP status"
}

tg_expect_header() { # tg_expect_header NAME VALUE LABEL
    tg_eq "$(tg_header "$1")" "$2" "$3: header $1"
}

tg_expect_no_header() { # tg_expect_no_header NAME LABEL
    if tg_has_header "$1"; then tg_fail "$2: unexpected header $1: $(tg_header "$1")"; else tg_pass "$2"; fi
}

# tg_expect_py EXPR LABEL: a Python expression over j (parsed JSON body, None if the body
# is not JSON), b (raw body bytes), h (lower-cased header dict) and s (status int) must be
# true. Helpers: hex64(x), is_exec_id(x), iso(timestamp) -> datetime. Evaluated by one
# long-lived python coprocess (lib/evalsrv.py) per script.
tg_py_ask() { # tg_py_ask CMD EXPR -> $TG_PY_REPLY (no subshell: the coprocess fds
    # are not available in one)
    printf '%s' "$2" >"$TG_TMP/expr"
    printf '%s %s\n' "$1" "$TG_TMP" >&"${TG_EVAL[1]}"
    IFS= read -r TG_PY_REPLY <&"${TG_EVAL[0]}" || TG_PY_REPLY="FAIL the evaluator died"
}

tg_expect_py() {
    tg_py_ask EVAL "$1"
    if [ "$TG_PY_REPLY" == "OK" ]; then
        tg_pass "$2"
    else
        tg_fail "$2: expected $1 (${TG_PY_REPLY#FAIL })"
    fi
}

# An error response per SPEC §3: STATUS, {"error": CODE, "message": non-empty,
# "request_id": equal to the X-Request-Id header}, JSON content type.
tg_expect_error() { # tg_expect_error STATUS CODE LABEL
    tg_expect_status "$1" "$3"
    tg_expect_py "isinstance(j, dict) and j.get('error') == '$2' and isinstance(j.get('message'), str) and len(j['message']) > 0 and j.get('request_id') == h.get('x-request-id') and len(j['request_id']) > 0 and h.get('content-type','').startswith('application/json')" \
        "$3: error body {error: $2, message, request_id = X-Request-Id}"
}

# tg_jget VAR EXPR: sets VAR to a value of the last response (string as is, else JSON),
# e.g. tg_jget EXEC 'j["receipt"]["executionId"]'.
tg_jget() {
    tg_py_ask JSON "$2"
    case $TG_PY_REPLY in
    "VAL "*) printf -v "$1" '%s' "${TG_PY_REPLY#VAL }" ;;
    *) tg_fail "cannot read $2 from the last response: $TG_PY_REPLY"; printf -v "$1" '%s' "" ;;
    esac
}

# Extract the receipt of the last evaluate response into FILE (exact bytes as served).
tg_save_receipt() {
    python3 - "$TG_BODY_FILE" "$1" <<'PY' || tg_fail "no receipt to save in the last response"
import json, sys
j = json.load(open(sys.argv[1]))
r = j["receipt"]
open(sys.argv[2], "w").write(json.dumps(r, separators=(",", ":"), ensure_ascii=False))
PY
}

# tg_wait_status PATH STATUS TRIES INTERVAL: polls GET PATH on the current daemon (outside
# tg_req: the last response is left alone) until it answers STATUS, at most TRIES times
# INTERVAL seconds apart. Succeeds once it does: tg_check "label" tg_wait_status ...
tg_wait_status() {
    local i
    for ((i = 0; i < $3; i++)); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$TG_URL$1")" == "$2" ] && return 0
        sleep "$4"
    done
    return 1
}

# Fetches keys.json from the current daemon into FILE.
tg_fetch_keys() {
    curl -sf --max-time 10 -o "$1" "$TG_URL/.well-known/trigguard/keys.json" ||
        tg_fail "cannot fetch keys.json from $TG_URL"
}

# Requests that give the test policy's outcomes (tests/integration/data/daemon_policy.json).
tg_req_json() { # tg_req_json KIND [extra JSON members, e.g. ',"idempotency_key":"k"']
    local extra=${2:-}
    case $1 in
    permit) echo '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false}'"$extra"'}' ;;
    deny) echo '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":20000,"currency":"USD"},"signals":{"riskScore":0.2}'"$extra"'}' ;;
    silence) echo '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"currency":"USD"}'"$extra"'}' ;;
    example) echo '{"surface":"example","action":"noop","actor":"someone"'"$extra"'}' ;;
    *) tg_die "tg_req_json: unknown kind $1" ;;
    esac
}
