# pgtest.sh — sourced (after lib/daemon.sh) by the integration tests that need PostgreSQL:
# a throwaway cluster (scripts/lib/pg.sh) and the few helpers every such test uses.
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
