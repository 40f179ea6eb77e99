#!/usr/bin/env bash
# pg_db_approvals.sh — test_db_approvals' PostgreSQL cases (db.h "approvals" on pg: the
# row written in the record's transaction, the hold's lease across two instances, the
# fence that refuses a version written without the hold) against a throwaway PostgreSQL
# (scripts/lib/pg.sh) at the schema `trigguard db migrate` makes.
set -uo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_BUILD:?TG_BUILD must point at the build directory}"
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" pg_db_approvals
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

unit="$TG_BUILD/tests/unit/test_db_approvals"
TG_DB_APPROVALS_PG_URL=$TG_PG_URL "$unit" >"$tmp/unit.out" 2>&1
rc=$?
check "test_db_approvals on pg exits 0 (rc=$rc: $(grep -E 'FAILED|ERROR|LINE' "$tmp/unit.out" | head -5))" \
    test "$rc" -eq 0
# every pg case ran: none skipped for want of the URL
check "no case skipped ($(grep -c SKIPPED "$tmp/unit.out") skip lines)" \
    bash -c "! grep -q SKIPPED '$tmp/unit.out'"
rows=$("$TG_PG_PSQL" "$TG_PG_URL" -X -At -c "select count(*) > 0, count(*) filter (where doc::jsonb->>'v' = version::text) = count(*) from tg_approvals" 2>&1)
check "rows were written, each at the version its document names ($rows)" test "$rows" = "t|t"
checks_done
