# pg.sh — a throwaway PostgreSQL cluster in a temporary directory, for the tests and scripts
# that need a database (docs/POSTGRES.md). Sourced; bash only.
#
#   source "$root/scripts/lib/pg.sh"
#   tg_pg_start || die "$TG_PG_ERROR"     # sets TG_PG_URL, TG_PG_DIR, TG_PG_DATA, ...
#   "$TG_PG_PSQL" "$TG_PG_URL" -c 'select 1'
#   tg_pg_stop                            # also run by the EXIT trap tg_pg_start adds
#   tg_pg_halt; tg_pg_resume              # the server down and up again, data kept
#   tg_pg_signal STOP; tg_pg_signal CONT  # the server frozen and thawed
#
# The cluster listens on a Unix socket in its own temporary directory only (no TCP), so two
# clusters never collide on a port and nothing outside this machine can reach it. Local
# connections are trusted: it holds test data only. PostgreSQL refuses to run as root, so as
# root the server runs as the `postgres` user (Debian's postgresql package creates it); the
# temporary directory is then owned by postgres and lives under /tmp (or TG_PG_TMPDIR), never
# under the caller's TMPDIR or the checkout, which may be a 0700 directory such as /root that
# postgres cannot enter. Nothing of the checkout is copied into it.
#
# Results (the functions report through these and their status, never by exiting):
#   TG_PG_URL    libpq URI of the test database: postgresql:///trigguard?host=SOCKDIR&port=N&user=trigguard
#   TG_PG_ADMIN_URL  the same for the superuser `postgres` and its database `postgres`
#   TG_PG_DIR    the temporary directory (data/, run/ = socket directory, server.log)
#   TG_PG_DATA   the data directory;  TG_PG_SOCK the socket directory;  TG_PG_PORT the port
#   TG_PG_BIN    the server binaries (initdb, pg_ctl, psql);  TG_PG_PSQL that psql
#   TG_PG_PID    the postmaster's pid once started
#   TG_PG_ERROR  why the last call failed
# shellcheck shell=bash
# shellcheck disable=SC2034 # the TG_PG_* results are read by the scripts that source this

TG_PG_DIR="" TG_PG_PID="" TG_PG_ERROR="" TG_PG_PORT=${TG_PG_PORT:-}

# tg_pg_find_bin: sets TG_PG_BIN to TG_PG_BIN if set, else Debian's PostgreSQL 15, else the
# newest version installed under /usr/lib/postgresql. /usr/bin/psql is Debian's wrapper that
# looks up system clusters; the version's own psql talks to ours without guessing.
tg_pg_find_bin() {
    local d
    if [ -n "${TG_PG_BIN:-}" ] && [ -x "$TG_PG_BIN/initdb" ]; then return 0; fi
    TG_PG_BIN=""
    for d in /usr/lib/postgresql/15/bin $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/psql" ]; then
            TG_PG_BIN=$d
            break
        fi
    done
    if [ -z "$TG_PG_BIN" ]; then
        TG_PG_ERROR="no PostgreSQL server found under /usr/lib/postgresql (install postgresql-15: scripts/deps test)"
        return 1
    fi
    TG_PG_PSQL=$TG_PG_BIN/psql
}

# tg_pg_as_server CMD...: runs CMD as the user that owns the cluster (postgres when we are
# root, else ourselves), from inside the cluster's directory so that a working directory
# postgres cannot enter never matters.
tg_pg_as_server() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd "$TG_PG_DIR" && runuser -u postgres -- "$@")
    else
        (cd "$TG_PG_DIR" && "$@")
    fi
}

# tg_pg_start: creates, starts and fills a cluster (role and database `trigguard`, owned by
# that role). The port (TG_PG_PORT if set, else 5432) only names the socket file: the
# directory is ours alone, so the default never collides. Adds tg_pg_stop to the EXIT trap, in front of whatever trap was there.
tg_pg_start() {
    local port=${TG_PG_PORT:-5432} base old_trap
    TG_PG_ERROR=""
    if [ -n "$TG_PG_DIR" ]; then
        TG_PG_ERROR="a cluster is already running in $TG_PG_DIR"
        return 1
    fi
    tg_pg_find_bin || return 1
    if [ "$(id -u)" -eq 0 ]; then
        if ! id -u postgres >/dev/null 2>&1; then
            TG_PG_ERROR="running as root and there is no postgres user to run the server (install postgresql-15)"
            return 1
        fi
        base=${TG_PG_TMPDIR:-/tmp}
    else
        base=${TG_PG_TMPDIR:-${TMPDIR:-/tmp}}
    fi
    TG_PG_DIR=$(mktemp -d "$base/tg-pg.XXXXXX") || {
        TG_PG_ERROR="cannot create a temporary directory under $base"
        TG_PG_DIR=""
        return 1
    }
    # The trap first: a failure from here on still removes the directory.
    # `trap -p` prints "trap -- 'CMD' EXIT", quoted for the shell: eval splits it back.
    local -a prev=()
    eval "prev=($(trap -p EXIT))"
    old_trap=${prev[2]:-}
    # shellcheck disable=SC2064 # the old trap is expanded now, on purpose
    trap "tg_pg_stop; $old_trap" EXIT
    TG_PG_DATA=$TG_PG_DIR/data TG_PG_SOCK=$TG_PG_DIR/run TG_PG_PORT=$port
    mkdir "$TG_PG_SOCK"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres: "$TG_PG_DIR" && chmod 0700 "$TG_PG_DIR"
    fi
    if ! tg_pg_as_server "$TG_PG_BIN/initdb" -D "$TG_PG_DATA" -U postgres --auth=trust \
        -E UTF8 --locale=C --no-sync >"$TG_PG_DIR/initdb.log" 2>&1; then
        TG_PG_ERROR="initdb failed: $(tail -n 5 "$TG_PG_DIR/initdb.log" | tr '\n' ' ')"
        return 1
    fi
    tg_pg_server_start || return 1
    TG_PG_ADMIN_URL="postgresql:///postgres?host=$TG_PG_SOCK&port=$port&user=postgres"
    TG_PG_URL="postgresql:///trigguard?host=$TG_PG_SOCK&port=$port&user=trigguard"
    if ! "$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -q -v ON_ERROR_STOP=1 \
        -c 'CREATE ROLE trigguard LOGIN' -c 'CREATE DATABASE trigguard OWNER trigguard' \
        >"$TG_PG_DIR/setup.log" 2>&1; then
        TG_PG_ERROR="creating the trigguard role and database failed: $(tr '\n' ' ' <"$TG_PG_DIR/setup.log")"
        return 1
    fi
}

# tg_pg_server_start: starts the cluster's server (again) on its data directory, socket and
# port, and waits until it accepts connections. Sets TG_PG_PID.
tg_pg_server_start() {
    if ! tg_pg_as_server "$TG_PG_BIN/pg_ctl" -D "$TG_PG_DATA" -l "$TG_PG_DIR/server.log" -w -t 60 \
        -o "-k $TG_PG_SOCK -p $TG_PG_PORT -c listen_addresses=''" start >/dev/null 2>&1; then
        TG_PG_ERROR="the server did not start: $(tail -n 5 "$TG_PG_DIR/server.log" 2>/dev/null | tr '\n' ' ')"
        return 1
    fi
    TG_PG_PID=$(head -n 1 "$TG_PG_DATA/postmaster.pid" 2>/dev/null)
}

# tg_pg_halt [MODE]: stops the server (pg_ctl stop -m MODE, default immediate: as if it
# crashed; its committed data stays) but keeps the cluster, for tg_pg_resume. For the tests
# of what the daemon does while its database is gone.
tg_pg_halt() {
    [ -n "$TG_PG_DIR" ] || { TG_PG_ERROR="no cluster"; return 1; }
    if ! tg_pg_as_server "$TG_PG_BIN/pg_ctl" -D "$TG_PG_DATA" -m "${1:-immediate}" -w -t 30 stop \
        >/dev/null 2>&1; then
        TG_PG_ERROR="pg_ctl stop failed"
        return 1
    fi
    TG_PG_PID=""
}

# tg_pg_resume: starts a halted cluster again (crash recovery after an immediate stop).
tg_pg_resume() {
    [ -n "$TG_PG_DIR" ] || { TG_PG_ERROR="no cluster"; return 1; }
    tg_pg_server_start
}

# tg_pg_signal SIGNAL: sends SIGNAL to the postmaster and every process it started (the
# server processes of each connection included): STOP freezes the whole server as a hung
# machine would, CONT thaws it.
tg_pg_signal() {
    local pids="" more i
    [ -n "$TG_PG_PID" ] || { TG_PG_ERROR="the server is not running"; return 1; }
    # The postmaster first: stopped, it forks no new process; a child it forked just before
    # is found by the next listing (twice more, to be sure none slipped through).
    kill -"$1" "$TG_PG_PID" || return 1
    for i in 1 2 3; do
        more=$(pgrep -P "$TG_PG_PID" | tr '\n' ' ')
        # shellcheck disable=SC2086 # one word per pid
        [ -z "$more" ] || kill -"$1" $more 2>/dev/null
        [ "$more" = "$pids" ] && [ "$i" -gt 1 ] && break
        pids=$more
        sleep 0.02
    done
}

# tg_pg_stop: stops the server (immediate: its data is thrown away anyway) and removes the
# directory. Safe to call twice and when nothing was started. Returns 1 if the postmaster
# would not stop (it is then killed).
tg_pg_stop() {
    local rc=0 i
    [ -n "$TG_PG_DIR" ] || return 0
    # A frozen server (tg_pg_signal STOP) would neither stop nor die with its children.
    [ -z "$TG_PG_PID" ] || tg_pg_signal CONT 2>/dev/null || true
    if [ -f "$TG_PG_DATA/postmaster.pid" ]; then
        tg_pg_as_server "$TG_PG_BIN/pg_ctl" -D "$TG_PG_DATA" -m immediate -w -t 30 stop \
            >/dev/null 2>&1 || rc=1
    fi
    # pg_ctl waits for the postmaster; make sure of it before the directory goes.
    if [ -n "$TG_PG_PID" ]; then
        for i in $(seq 1 100); do
            kill -0 "$TG_PG_PID" 2>/dev/null || break
            [ "$i" -eq 50 ] && { kill -KILL "$TG_PG_PID" 2>/dev/null; rc=1; }
            sleep 0.1
        done
    fi
    rm -rf "$TG_PG_DIR"
    TG_PG_DIR="" TG_PG_PID=""
    return "$rc"
}
