# pgtest.sh — sourced (after lib/daemon.sh) by the integration tests that need PostgreSQL:
# a throwaway cluster (scripts/lib/pg.sh) and the few helpers every such test uses.
# shellcheck shell=bash
# shellcheck disable=SC2034 # url_new, LB_PORT: read by the tests
# shellcheck source=scripts/lib/pg.sh
source "$TG_SRC/scripts/lib/pg.sh"
unset TRIGGUARD_DATABASE_URL

tg_pg_start || tg_die "start PostgreSQL: $TG_PG_ERROR"

# sql URL STATEMENT: psql's unaligned output (errors too, on stdout).
sql() { "$TG_PG_PSQL" "$1" -X -At -v ON_ERROR_STOP=1 -c "$2" 2>&1; }

# run NAME ARGS...: the binary's exit status in $rc, its output in $TG_TMP/NAME.{out,err}.
run() {
    local name=$1
    shift
    "$TG_BIN" "$@" >"$TG_TMP/$name.out" 2>"$TG_TMP/$name.err"
    rc=$?
}

# has FILE TEXT: TEXT is in $TG_TMP/FILE.
# shellcheck disable=SC2317 # called through tg_check
has() { grep -q -- "$2" "$TG_TMP/$1"; }

# newdb NAME: a fresh database owned by trigguard; its URL in $url_new.
newdb() {
    "$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -q -c "create database $1 owner trigguard" >/dev/null
    url_new=${TG_PG_URL/trigguard?/$1?}
}

# ---- several instances on the test database (pg_instances.sh, pg_instance_kill.sh, ...) ----

# pg_serve NAME [serve args...]: tg_start NAME with the test policy and key ($TG_KEY: call
# tg_keygen first) on the PostgreSQL store of the test database. The
# database must be migrated first (pg_migrate).
pg_serve() {
    local name=$1
    shift
    tg_start "$name" -- --policy "$TG_POLICY" --key "$TG_KEY" --store postgres \
        --database-url "$TG_PG_URL" --log-format json --threads 2 "$@"
}

# pg_migrate: `trigguard db migrate` on the test database, or the test stops.
pg_migrate() {
    run migrate db migrate --database-url "$TG_PG_URL"
    [ "$rc" -eq 0 ] || tg_die "db migrate: exit $rc: $(cat "$TG_TMP/migrate.err")"
}

# shellcheck source=scripts/lib/lb.sh
source "$TG_SRC/scripts/lib/lb.sh"

# pg_lb NAME...: nginx (scripts/lib/lb.sh) on a free loopback port in front of the named
# daemons, as scripts/cluster runs it: $LB_PORT. Stopped by the EXIT trap.
pg_lb() {
    local name i
    local -a ports=()
    for name in "$@"; do ports+=("${TG_PORTS[$name]}"); done
    # A port free a moment ago may be taken by the time nginx binds it: try a few.
    for i in 1 2 3; do
        LB_PORT=$(tg_free_port)
        tg_lb_start "$LB_PORT" "${ports[@]}" && return 0
        tg_lb_stop
    done
    tg_die "start nginx: $TG_LB_ERROR"
}

# pg_no_double_execution LABEL: no execution id is in two records of tg_records (a signed
# receipt's payload names it): whatever happened, no request was executed twice.
pg_no_double_execution() {
    tg_eq "$(sql "$TG_PG_URL" "select count(*) - count(distinct convert_from(payload, 'UTF8')::json->>'executionId') from tg_records where type = 1")" \
        0 "$1: no execution id in two records"
}
