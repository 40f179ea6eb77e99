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
#
# Replication (a primary and its standbys, for the failover tests: docs/POSTGRES.md "High
# availability"): named nodes, each a cluster of its own beside the one of tg_pg_start, with
# its own temporary directory, socket directory and port (5440 up, one per node), so two
# nodes never clash and a node keeps its socket and port when it is rebuilt.
#
#   tg_pg_node_primary a "synchronous_standby_names = 'ANY 1 (a, b)'" || die "$TG_PG_ERROR"
#   tg_pg_node_standby b a                # pg_basebackup -R from a, application_name b, started
#   tg_pg_multi_url a b                   # TG_PG_MULTI_URL: both nodes, read-write only
#   tg_pg_node_walreceiver b              # TG_PG_WALRECEIVER: pid of b's walreceiver
#   tg_pg_node_kill a                     # SIGKILL to a's postmaster and all its children
#   tg_pg_node_promote b                  # b accepts writes
#   tg_pg_node_rebuild a b                # a's data thrown away; a is a fresh standby of b
#   tg_pg_node_set b synchronous_standby_names "''"   # ALTER SYSTEM, then reload
#   tg_pg_nodes_stop                      # every node; also run by the EXIT trap
#
# A primary is configured for replication in its postgresql.conf (wal_level replica,
# max_wal_senders, hot_standby, synchronous_commit on, and the caller's lines), which
# pg_basebackup copies, so a promoted standby is configured as its primary was. pg_hba.conf
# trusts local replication connections; standbys connect as `postgres` over the primary's
# socket. What names a node (socket directory, port, no TCP) is given on the server's command
# line, never in a file a base backup copies.
#
# Node results, by node name (associative arrays):
#   TG_PG_NODE_DIR[n]   the node's temporary directory (data/, run/, server.log)
#   TG_PG_NODE_DATA[n]  data directory;  TG_PG_NODE_SOCK[n] socket directory;  TG_PG_NODE_PORT[n]
#   TG_PG_NODE_PID[n]   the postmaster's pid while it runs (empty once killed or stopped)
#   TG_PG_NODE_URL[n]   the trigguard database on that node alone (postgresql:///trigguard?...)
#   TG_PG_NODE_ADMIN_URL[n]  the same for `postgres`/`postgres`
#   TG_PG_MULTI_URL     set by tg_pg_multi_url: postgresql:///trigguard?host=S1,S2&port=P1,P2&
#                       user=trigguard&target_session_attrs=read-write (libpq tries the hosts
#                       in order and keeps the first that accepts writes)
#   TG_PG_WALRECEIVER   set by tg_pg_node_walreceiver
# shellcheck shell=bash
# shellcheck disable=SC2034 # the TG_PG_* results are read by the scripts that source this

TG_PG_DIR="" TG_PG_PID="" TG_PG_ERROR="" TG_PG_PORT=${TG_PG_PORT:-}

# tg_pg_find_bin: sets TG_PG_BIN to TG_PG_BIN if set, else Debian's PostgreSQL 15, else the
# newest version installed under /usr/lib/postgresql. /usr/bin/psql is Debian's wrapper that
# looks up system clusters; the version's own psql talks to ours without guessing.
tg_pg_find_bin() {
    local d
    if [ -n "${TG_PG_BIN:-}" ] && [ -x "$TG_PG_BIN/initdb" ]; then
        TG_PG_PSQL=$TG_PG_BIN/psql
        return 0
    fi
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
    tg_pg_as_server_in "$TG_PG_DIR" "$@"
}

# tg_pg_as_server_in DIR CMD...: the same from DIR (a node's directory).
tg_pg_as_server_in() {
    local dir=$1
    shift
    if [ "$(id -u)" -eq 0 ]; then
        (cd "$dir" && runuser -u postgres -- "$@")
    else
        (cd "$dir" && "$@")
    fi
}

# tg_pg_trap_add CMD: runs CMD on exit, in front of whatever EXIT trap was there.
tg_pg_trap_add() {
    local old_trap
    # `trap -p` prints "trap -- 'CMD' EXIT", quoted for the shell: eval splits it back.
    local -a prev=()
    eval "prev=($(trap -p EXIT))"
    old_trap=${prev[2]:-}
    # shellcheck disable=SC2064 # the old trap is expanded now, on purpose
    trap "$1; $old_trap" EXIT
}

# tg_pg_tmp_base: sets TG_PG_BASE to where a cluster's temporary directory goes: under /tmp
# (or TG_PG_TMPDIR) as root, where the server runs as postgres, which must exist; else under
# TMPDIR too.
tg_pg_tmp_base() {
    if [ "$(id -u)" -eq 0 ]; then
        if ! id -u postgres >/dev/null 2>&1; then
            TG_PG_ERROR="running as root and there is no postgres user to run the server (install postgresql-15)"
            return 1
        fi
        TG_PG_BASE=${TG_PG_TMPDIR:-/tmp}
    else
        TG_PG_BASE=${TG_PG_TMPDIR:-${TMPDIR:-/tmp}}
    fi
}

# tg_pg_start: creates, starts and fills a cluster (role and database `trigguard`, owned by
# that role). The port (TG_PG_PORT if set, else 5432) only names the socket file: the
# directory is ours alone, so the default never collides. Adds tg_pg_stop to the EXIT trap, in front of whatever trap was there.
tg_pg_start() {
    local port=${TG_PG_PORT:-5432} base
    TG_PG_ERROR=""
    if [ -n "$TG_PG_DIR" ]; then
        TG_PG_ERROR="a cluster is already running in $TG_PG_DIR"
        return 1
    fi
    tg_pg_find_bin || return 1
    tg_pg_tmp_base || return 1
    base=$TG_PG_BASE
    TG_PG_DIR=$(mktemp -d "$base/tg-pg.XXXXXX") || {
        TG_PG_ERROR="cannot create a temporary directory under $base"
        TG_PG_DIR=""
        return 1
    }
    # The trap first: a failure from here on still removes the directory.
    tg_pg_trap_add tg_pg_stop
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

# ---- replication nodes -----------------------------------------------------------------

declare -gA TG_PG_NODE_DIR=() TG_PG_NODE_DATA=() TG_PG_NODE_SOCK=() TG_PG_NODE_PORT=() \
    TG_PG_NODE_PID=() TG_PG_NODE_URL=() TG_PG_NODE_ADMIN_URL=()
TG_PG_NODE_NEXT_PORT=5440 TG_PG_NODES_TRAP="" TG_PG_MULTI_URL="" TG_PG_WALRECEIVER=""

# tg_pg_gone PID: no such process, or only its zombie is left (a postmaster that pg_ctl
# started belongs to whoever reaps orphans here, which may never reap it).
tg_pg_gone() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
    case $st in Z*) return 0 ;; esac
    return 1
}

# tg_pg_node_dir NAME: creates NAME's temporary directory and socket directory and picks its
# port, once: a rebuilt node keeps them, so a URL naming it stays valid. The first node adds
# tg_pg_nodes_stop to the EXIT trap. NAME is the standby's application_name: lower-case
# letters, digits and _.
tg_pg_node_dir() {
    local name=$1 base dir
    TG_PG_ERROR=""
    case $name in
    "" | *[!a-z0-9_]*)
        TG_PG_ERROR="node name '$name': use lower-case letters, digits and _ (it is an application_name)"
        return 1
        ;;
    esac
    [ -z "${TG_PG_NODE_DIR[$name]:-}" ] || return 0
    tg_pg_find_bin || return 1
    tg_pg_tmp_base || return 1
    base=$TG_PG_BASE
    dir=$(mktemp -d "$base/tg-pg-$name.XXXXXX") || {
        TG_PG_ERROR="cannot create a temporary directory under $base"
        return 1
    }
    if [ -z "$TG_PG_NODES_TRAP" ]; then
        tg_pg_trap_add tg_pg_nodes_stop
        TG_PG_NODES_TRAP=1
    fi
    local port=$TG_PG_NODE_NEXT_PORT
    TG_PG_NODE_NEXT_PORT=$((port + 1))
    TG_PG_NODE_DIR[$name]=$dir TG_PG_NODE_DATA[$name]=$dir/data TG_PG_NODE_SOCK[$name]=$dir/run
    TG_PG_NODE_PORT[$name]=$port TG_PG_NODE_PID[$name]=""
    TG_PG_NODE_URL[$name]="postgresql:///trigguard?host=$dir/run&port=$port&user=trigguard"
    TG_PG_NODE_ADMIN_URL[$name]="postgresql:///postgres?host=$dir/run&port=$port&user=postgres"
    mkdir "$dir/run"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres: "$dir" && chmod 0700 "$dir"
    fi
}

# tg_pg_node_run NAME: starts NAME's server on its socket and port (pg_ctl -w: a standby
# is then accepting read-only connections) and sets TG_PG_NODE_PID[NAME].
tg_pg_node_run() {
    local name=$1 dir=${TG_PG_NODE_DIR[$1]}
    # A killed postmaster leaves its socket and lock file behind; it is gone (tg_pg_node_kill
    # waited for that), and a lock naming a reused pid would stop the new server.
    rm -f "${TG_PG_NODE_SOCK[$name]}"/.s.PGSQL.*
    if ! tg_pg_as_server_in "$dir" "$TG_PG_BIN/pg_ctl" -D "${TG_PG_NODE_DATA[$name]}" \
        -l "$dir/server.log" -w -t 60 \
        -o "-k ${TG_PG_NODE_SOCK[$name]} -p ${TG_PG_NODE_PORT[$name]} -c listen_addresses=''" \
        start >/dev/null 2>&1; then
        TG_PG_ERROR="node $name did not start: $(tail -n 5 "$dir/server.log" 2>/dev/null | tr '\n' ' ')"
        return 1
    fi
    TG_PG_NODE_PID[$name]=$(head -n 1 "${TG_PG_NODE_DATA[$name]}/postmaster.pid" 2>/dev/null)
}

# tg_pg_node_primary NAME [CONF_LINE...]: a new cluster configured for replication, the
# CONF_LINEs (e.g. "synchronous_standby_names = 'ANY 1 (a, b)'") appended to its
# postgresql.conf, started, with the role and database `trigguard`.
tg_pg_node_primary() {
    local name=$1 dir line
    shift
    tg_pg_node_dir "$name" || return 1
    dir=${TG_PG_NODE_DIR[$name]}
    if [ -e "${TG_PG_NODE_DATA[$name]}" ]; then
        TG_PG_ERROR="node $name already has a data directory"
        return 1
    fi
    if ! tg_pg_as_server_in "$dir" "$TG_PG_BIN/initdb" -D "${TG_PG_NODE_DATA[$name]}" -U postgres \
        --auth=trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
        TG_PG_ERROR="initdb for node $name failed: $(tail -n 5 "$dir/initdb.log" | tr '\n' ' ')"
        return 1
    fi
    {
        echo "# tg_pg_node_primary: replication (copied to every standby by pg_basebackup)"
        echo "wal_level = replica"
        echo "max_wal_senders = 10"
        echo "hot_standby = on"
        echo "synchronous_commit = on"
    } >>"${TG_PG_NODE_DATA[$name]}/postgresql.conf"
    # initdb --auth=trust already trusts local replication; said here, not relied upon.
    echo "local replication all trust" >>"${TG_PG_NODE_DATA[$name]}/pg_hba.conf"
    tg_pg_node_run "$name" || return 1
    if ! "$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$name]}" -X -q -v ON_ERROR_STOP=1 \
        -c 'CREATE ROLE trigguard LOGIN' -c 'CREATE DATABASE trigguard OWNER trigguard' \
        >"$dir/setup.log" 2>&1; then
        TG_PG_ERROR="creating the trigguard role and database on node $name failed: $(tr '\n' ' ' <"$dir/setup.log")"
        return 1
    fi
    # The caller's lines only now: with synchronous_standby_names and no standby yet, the
    # commits above would wait forever.
    [ $# -gt 0 ] || return 0
    printf '%s\n' "$@" >>"${TG_PG_NODE_DATA[$name]}/postgresql.conf"
    if ! "$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$name]}" -X -q -At -v ON_ERROR_STOP=1 \
        -c 'select pg_reload_conf()' >>"$dir/setup.log" 2>&1; then
        TG_PG_ERROR="reloading node $name's configuration failed: $(tail -n 3 "$dir/setup.log" | tr '\n' ' ')"
        return 1
    fi
}

# tg_pg_node_standby NAME PRIMARY: NAME becomes a standby of the running node PRIMARY: a
# fresh base backup (pg_basebackup -R -X stream, a fast checkpoint) into NAME's data
# directory, primary_conninfo with application_name=NAME, started; returns once PRIMARY
# reports it streaming (at most 60 s). NAME must not be running.
tg_pg_node_standby() {
    local name=$1 primary=$2 dir conninfo i n
    tg_pg_node_dir "$name" || return 1
    dir=${TG_PG_NODE_DIR[$name]}
    if [ -n "${TG_PG_NODE_PID[$name]}" ]; then
        TG_PG_ERROR="node $name is running (tg_pg_node_kill it first)"
        return 1
    fi
    if [ -z "${TG_PG_NODE_PID[$primary]:-}" ]; then
        TG_PG_ERROR="node $primary is not running"
        return 1
    fi
    rm -rf "${TG_PG_NODE_DATA[$name]}"
    conninfo="host=${TG_PG_NODE_SOCK[$primary]} port=${TG_PG_NODE_PORT[$primary]} user=postgres application_name=$name"
    if ! tg_pg_as_server_in "$dir" "$TG_PG_BIN/pg_basebackup" -D "${TG_PG_NODE_DATA[$name]}" \
        -d "$conninfo" -R -X stream -c fast --no-sync >>"$dir/basebackup.log" 2>&1; then
        TG_PG_ERROR="pg_basebackup of node $name from $primary failed: $(tail -n 5 "$dir/basebackup.log" | tr '\n' ' ')"
        return 1
    fi
    # -R wrote a primary_conninfo from the connection; this one is said outright (the last
    # setting in the file wins).
    echo "primary_conninfo = '$conninfo'" >>"${TG_PG_NODE_DATA[$name]}/postgresql.auto.conf"
    tg_pg_node_run "$name" || return 1
    for i in $(seq 1 600); do
        n=$("$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$primary]}" -X -At -c \
            "select count(*) from pg_stat_replication where application_name = '$name' and state = 'streaming'" 2>/dev/null)
        [ "$n" = 1 ] && return 0
        sleep 0.1
    done
    TG_PG_ERROR="node $primary does not report standby $name streaming after 60 s (i=$i)"
    return 1
}

# tg_pg_node_kill NAME: SIGKILL to NAME's postmaster and every child at once (what a
# machine's death looks like to the standby: no process sends anything more), then waits
# until they are gone. Nothing running: nothing to do.
tg_pg_node_kill() {
    local name=$1 pid p i
    pid=${TG_PG_NODE_PID[$name]:-}
    [ -n "$pid" ] || return 0
    local -a procs=("$pid")
    while read -r p; do [ -n "$p" ] && procs+=("$p"); done < <(pgrep -P "$pid")
    kill -KILL "${procs[@]}" 2>/dev/null
    for p in "${procs[@]}"; do
        for i in $(seq 1 100); do
            tg_pg_gone "$p" && break
            sleep 0.1
        done
        if ! tg_pg_gone "$p"; then
            TG_PG_ERROR="process $p of node $name survived SIGKILL for 10 s"
            return 1
        fi
    done
    TG_PG_NODE_PID[$name]=""
}

# tg_pg_node_promote NAME: promotes the standby NAME (pg_ctl promote -w) and returns once it
# accepts writes (at most 60 s).
tg_pg_node_promote() {
    local name=$1 i
    if ! tg_pg_as_server_in "${TG_PG_NODE_DIR[$name]}" "$TG_PG_BIN/pg_ctl" \
        -D "${TG_PG_NODE_DATA[$name]}" -w -t 60 promote >/dev/null 2>&1; then
        TG_PG_ERROR="pg_ctl promote of node $name failed: $(tail -n 5 "${TG_PG_NODE_DIR[$name]}/server.log" | tr '\n' ' ')"
        return 1
    fi
    for i in $(seq 1 600); do
        [ "$("$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$name]}" -X -At -c 'select pg_is_in_recovery()' 2>/dev/null)" = f ] &&
            return 0
        sleep 0.1
    done
    TG_PG_ERROR="node $name is still in recovery 60 s after its promotion (i=$i)"
    return 1
}

# tg_pg_node_rebuild NAME PRIMARY: whatever NAME was (a killed primary, a standby), it is
# killed if running, its data thrown away, and it is a fresh standby of PRIMARY
# (tg_pg_node_standby), on the same socket and port.
tg_pg_node_rebuild() {
    tg_pg_node_kill "$1" && tg_pg_node_standby "$1" "$2"
}

# tg_pg_node_walreceiver NAME: TG_PG_WALRECEIVER is the pid of the standby NAME's
# walreceiver (pg_stat_wal_receiver), the process that writes and flushes what the primary
# streams; fails when there is none.
tg_pg_node_walreceiver() {
    TG_PG_WALRECEIVER=$("$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$1]}" -X -At -c \
        'select pid from pg_stat_wal_receiver' 2>/dev/null)
    case $TG_PG_WALRECEIVER in
    "" | *[!0-9]*)
        TG_PG_ERROR="node $1 has no walreceiver ($TG_PG_WALRECEIVER)"
        TG_PG_WALRECEIVER=""
        return 1
        ;;
    esac
}

# tg_pg_node_set NAME PARAM VALUE: ALTER SYSTEM SET PARAM = VALUE on the running NAME (VALUE
# as SQL: quote a string yourself), then a reload. A later base backup copies it.
tg_pg_node_set() {
    local out
    if ! out=$("$TG_PG_PSQL" "${TG_PG_NODE_ADMIN_URL[$1]}" -X -q -At -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET $2 = $3" -c 'select pg_reload_conf()' 2>&1); then
        TG_PG_ERROR="ALTER SYSTEM SET $2 on node $1 failed: $out"
        return 1
    fi
}

# tg_pg_node_stop NAME: stops NAME (immediate), removes its directory and forgets it.
# Returns 1 if a process had to be killed.
tg_pg_node_stop() {
    local name=$1 rc=0 pid p
    [ -n "${TG_PG_NODE_DIR[$name]:-}" ] || return 0
    pid=${TG_PG_NODE_PID[$name]:-}
    if [ -n "$pid" ]; then
        # A SIGSTOPped child (a walreceiver held by a test) would never quit.
        for p in $(pgrep -P "$pid"); do kill -CONT "$p" 2>/dev/null; done
        tg_pg_as_server_in "${TG_PG_NODE_DIR[$name]}" "$TG_PG_BIN/pg_ctl" \
            -D "${TG_PG_NODE_DATA[$name]}" -m immediate -w -t 30 stop >/dev/null 2>&1 || rc=1
        if ! tg_pg_gone "$pid"; then
            tg_pg_node_kill "$name"
            rc=1
        fi
    fi
    rm -rf "${TG_PG_NODE_DIR[$name]}"
    unset "TG_PG_NODE_DIR[$name]" "TG_PG_NODE_DATA[$name]" "TG_PG_NODE_SOCK[$name]" \
        "TG_PG_NODE_PORT[$name]" "TG_PG_NODE_PID[$name]" "TG_PG_NODE_URL[$name]" \
        "TG_PG_NODE_ADMIN_URL[$name]"
    return "$rc"
}

# tg_pg_nodes_stop: tg_pg_node_stop for every node. Safe to call twice.
tg_pg_nodes_stop() {
    local name rc=0
    for name in "${!TG_PG_NODE_DIR[@]}"; do tg_pg_node_stop "$name" || rc=1; done
    return "$rc"
}

# tg_pg_multi_url NAME...: TG_PG_MULTI_URL, the trigguard database on the given nodes in
# that order, for the node that accepts writes (libpq's target_session_attrs=read-write).
tg_pg_multi_url() {
    local name hosts="" ports=""
    for name in "$@"; do
        hosts+=${hosts:+,}${TG_PG_NODE_SOCK[$name]}
        ports+=${ports:+,}${TG_PG_NODE_PORT[$name]}
    done
    TG_PG_MULTI_URL="postgresql:///trigguard?host=$hosts&port=$ports&user=trigguard&target_session_attrs=read-write"
}
