#!/usr/bin/env bash
# pg_cluster.sh — scripts/lib/pg.sh starts a throwaway PostgreSQL that answers queries on its
# own socket, halts and resumes it with its data, freezes and thaws it, and stopping it
# leaves nothing behind: no server process, no directory.
set -uo pipefail

# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" pg_cluster
# shellcheck source=scripts/lib/pg.sh
source "$TG_SRC/scripts/lib/pg.sh"

if ! tg_pg_start; then
    fail "start: $TG_PG_ERROR"
    checks_done
fi
dir=$TG_PG_DIR sock=$TG_PG_SOCK
check "the cluster has a postmaster pid" test -n "$TG_PG_PID"
check "the postmaster is alive" kill -0 "$TG_PG_PID"

# The test role reaches its own database through the URL, and only through the socket.
out=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -v ON_ERROR_STOP=1 \
    -c 'select current_user, current_database(), 6 * 7' 2>&1)
check "psql through TG_PG_URL: $out" test "$out" = "trigguard|trigguard|42"
listen=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -c 'show listen_addresses' 2>&1)
check "no TCP listener (listen_addresses='$listen')" test -z "$listen"
check "the socket is in the cluster's directory" test -S "$sock/.s.PGSQL.$TG_PG_PORT"
if [ "$(id -u)" -eq 0 ]; then
    check "as root the server runs as postgres" \
        test "$(ps -o user= -p "$TG_PG_PID" | tr -d ' ')" = postgres
fi
# Writes work (the role owns its database).
out=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -v ON_ERROR_STOP=1 \
    -c 'create table t (x int)' -c 'insert into t values (1), (2)' -c 'select sum(x) from t' 2>&1)
check "the test role creates and fills a table: $out" test "$(tail -n 1 <<<"$out")" = 3

# Halted (as if it crashed) and resumed: down in between, the committed rows kept.
check "halt" tg_pg_halt
check "after a halt nothing answers" bash -c "! '$TG_PG_PSQL' '$TG_PG_URL' -X -At -c 'select 1' >/dev/null 2>&1"
check "resume" tg_pg_resume
out=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -c 'select sum(x) from t' 2>&1)
check "resumed with the committed rows: $out" test "$out" = 3
# Frozen (SIGSTOP to every server process) and thawed: no answer in between, then answers.
check "freeze" tg_pg_signal STOP
check "a frozen server does not answer within 2 s" \
    bash -c "! timeout 2 '$TG_PG_PSQL' '$TG_PG_URL' -X -At -c 'select 1' >/dev/null 2>&1"
check "thaw" tg_pg_signal CONT
out=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -c 'select 2' 2>&1)
check "a thawed server answers: $out" test "$out" = 2

# Every process of this cluster: the postmaster and its children (checkpointer, ...).
pids="$TG_PG_PID $(pgrep -P "$TG_PG_PID" | tr '\n' ' ')"
check "the postmaster has children" test "$(wc -w <<<"$pids")" -gt 1
tg_pg_start >/dev/null 2>&1 && fail "a second tg_pg_start succeeded"
check "stop" tg_pg_stop
left=""
for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
check "no process of the cluster is left:$left" test -z "$left"
check "the temporary directory is gone" test ! -e "$dir"
check "the results are cleared" test -z "$TG_PG_DIR"
check "a second stop is harmless" tg_pg_stop

# A cluster left running when the script exits is removed by the trap.
out=$(bash -c 'source "$1"; tg_pg_start || exit 1; echo "$TG_PG_DIR $TG_PG_PID"' _ \
    "$TG_SRC/scripts/lib/pg.sh" 2>&1)
read -r dir2 pid2 <<<"$out"
check "a cluster in a child script started: $out" test -n "${pid2:-}"
check "its EXIT trap removed the directory" test ! -e "${dir2:-/nonexistent}"
if [ -n "${pid2:-}" ]; then
    sleep 0.2
    check "its EXIT trap stopped the server" bash -c "! kill -0 $pid2 2>/dev/null"
fi
checks_done
