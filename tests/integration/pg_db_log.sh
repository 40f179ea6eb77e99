#!/usr/bin/env bash
# pg_db_log.sh — test_pg_db_log (db.h "the transparency log" on PostgreSQL: the integrator
# under its advisory lock, takeovers, the checks of the stored log, readers on every
# instance) against a throwaway PostgreSQL (scripts/lib/pg.sh) at the schema `trigguard db
# migrate` makes; then what the cases left in the log's rows. (Some cases insert records
# behind the writers' backs, so `ledger verify` is pg_tlog.sh's business, on real records.)
set -uo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_BUILD:?TG_BUILD must point at the build directory}"
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" pg_db_log
# shellcheck source=scripts/lib/pg.sh
source "$TG_SRC/scripts/lib/pg.sh"
unset TRIGGUARD_DATABASE_URL

if ! tg_pg_start; then
    fail "start PostgreSQL: $TG_PG_ERROR"
    checks_done
fi
"$TG_BIN" db migrate --database-url "$TG_PG_URL" >"$tmp/migrate.out" 2>&1
rc=$?
check "db migrate exits 0 (rc=$rc: $(cat "$tmp/migrate.out"))" test "$rc" -eq 0

unit="$TG_BUILD/tests/unit/test_pg_db_log"
TG_PG_DB_LOG_URL=$TG_PG_URL "$unit" >"$tmp/unit.out" 2>&1
rc=$?
check "test_pg_db_log on pg exits 0 (rc=$rc: $(grep -E 'FAILED|ERROR|LINE|Failure' "$tmp/unit.out" | head -5))" \
    test "$rc" -eq 0
check "no case skipped ($(grep -c SKIPPED "$tmp/unit.out") skip lines)" \
    bash -c "! grep -q SKIPPED '$tmp/unit.out'"
sql() { "$TG_PG_PSQL" "$TG_PG_URL" -X -At -c "$1" 2>&1; }
# what the cases left: leaves 0..size-1 once each, one level-0 hash per leaf
state=$(sql "select size > 30, (select count(*) from tg_records where log_index is not null) = size, (select max(log_index) from tg_records) = size - 1, (select count(*) from tg_log_hashes where level = 0) = size from tg_log_state")
check "the log's rows agree with its checkpoint ($state)" test "$state" = "t|t|t|t"
checks_done
