#!/usr/bin/env bash
# db_migrate.sh — `trigguard db migrate|status` against a throwaway PostgreSQL
# (scripts/lib/pg.sh): from empty, again (nothing to do), two at once, a newer schema
# refused, bad URLs refused with exit 2 or 1 and a sentence, never a crash.
set -uo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" db_migrate
# shellcheck source=scripts/lib/pg.sh
source "$TG_SRC/scripts/lib/pg.sh"
unset TRIGGUARD_DATABASE_URL

if ! tg_pg_start; then
    fail "start PostgreSQL: $TG_PG_ERROR"
    checks_done
fi
sql() { "$TG_PG_PSQL" "$TG_PG_URL" -X -At -v ON_ERROR_STOP=1 -c "$1" 2>&1; }
# shellcheck disable=SC2317 # called through check
sql_quiet() { sql "$1" >/dev/null; }
# run NAME ARGS...: the binary's exit status in $rc, its output in $tmp/NAME.{out,err}.
run() {
    local name=$1
    shift
    "$TG_BIN" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
}
# shellcheck disable=SC2317 # called through check
has() { grep -q -- "$2" "$tmp/$1"; }
# A sanitizer report or a signal is a crash whatever the exit status says.
# shellcheck disable=SC2317 # called through check
no_crash() { ! grep -q -e 'Sanitizer' -e 'runtime error' "$tmp/$1.err" && [ "$rc" -lt 128 ]; }

# status on an empty database: version 0
run status0 db status --database-url "$TG_PG_URL"
check "status on an empty database exits 0 (rc=$rc)" test "$rc" -eq 0
check "status on an empty database says version 0" has status0.out 'schema version 0 '

# from empty: version 5, every table of docs/POSTGRES.md
run m1 db migrate --database-url "$TG_PG_URL"
check "migrate from empty exits 0 (rc=$rc: $(cat "$tmp/m1.err"))" test "$rc" -eq 0
check "migrate from empty says 0 -> 5" has m1.out 'schema version 0 -> 5: migrated'
tables=$(sql "select string_agg(tablename, ',' order by tablename) from pg_tables where schemaname = 'public'")
check "the tables of schema v5 ($tables)" \
    test "$tables" = "tg_approvals,tg_chains,tg_idem_claims,tg_limit_totals,tg_log_hashes,tg_log_state,tg_nonces,tg_receipts,tg_records,trigguard_schema"
check "five version rows" test "$(sql 'select count(*), max(version) from trigguard_schema')" = "5|5"

# from the previous version, with data in it: v1 rows survive, v2 adds the chain heads
# (backfilled from the records) and the nonce claim columns (old nonces stay consumed)
"$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -q -c "create database trigguard_v1 owner trigguard" >/dev/null
url_v1=${TG_PG_URL/trigguard?/trigguard_v1?}
run up1 db migrate --database-url "$url_v1" --target-version 1
check "migrate --target-version 1 exits 0 (rc=$rc)" test "$rc" -eq 0
check "and says 0 -> 1" has up1.out 'schema version 0 -> 1: migrated'
zero="\\x$(printf '%064d' 0)"
one="\\x$(printf '%064d' 1)"
"$TG_PG_PSQL" "$url_v1" -X -q -v ON_ERROR_STOP=1 \
    -c "insert into tg_records (instance_id, chain_seq, tenant, type, meta, payload, prev_hash, record_hash) values ('i1', 1, 't', 1, '', '', '$zero', '$one'), ('i1', 2, 't', 1, '', '', '$one', '$zero')" \
    -c "insert into tg_nonces (tenant, nonce, expires_at) values ('t', 'n-old', now() + interval '1 hour')" >/dev/null
run up2 db migrate --database-url "$url_v1"
check "then migrate exits 0 (rc=$rc: $(cat "$tmp/up2.err"))" test "$rc" -eq 0
check "and says 1 -> 5" has up2.out 'schema version 1 -> 5: migrated'
heads=$("$TG_PG_PSQL" "$url_v1" -X -At -c "select instance_id, head_seq, head_hash = '$zero' from tg_chains")
check "the chain head is backfilled from the records ($heads)" test "$heads" = "i1|2|t"
old=$("$TG_PG_PSQL" "$url_v1" -X -At -c "select nonce, lease_until is null from tg_nonces")
check "an old nonce stays consumed ($old)" test "$old" = "n-old|t"
# v5: records from before keep no entry and no leaf (the integrator derives theirs); the
# log starts empty and unsigned, in one row
logrows=$("$TG_PG_PSQL" "$url_v1" -X -At -c "select count(*) filter (where log_entry is null and log_index is null) from tg_records")
check "records from before v5 have no entry and no leaf yet ($logrows)" test "$logrows" = 2
state=$("$TG_PG_PSQL" "$url_v1" -X -At -c "select count(*), min(size), bool_and(note is null and root is null and origin is null) from tg_log_state")
check "tg_log_state is one unsigned row of size 0 ($state)" test "$state" = "1|0|t"
run up3 db migrate --database-url "$url_v1" --target-version 1
check "a target below the database's version changes nothing" has up3.out 'up to date, nothing to do'
run badt db migrate --database-url "$url_v1" --target-version 99
check "an unknown target version exits 2 (rc=$rc)" test "$rc" -eq 2

# again: nothing to do, nothing written
TRIGGUARD_DATABASE_URL=$TG_PG_URL run m2 db migrate
check "migrate again (URL from the environment) exits 0 (rc=$rc)" test "$rc" -eq 0
check "migrate again says nothing to do" has m2.out 'up to date, nothing to do'
check "still five version rows" test "$(sql 'select count(*) from trigguard_schema')" = 5

run status1 db status --database-url="$TG_PG_URL"
check "status says version 5, up to date" has status1.out 'schema version 5 .*up to date'

# The constraints that make uniqueness exact.
sql "insert into tg_nonces (tenant, nonce, expires_at) values ('a', 'n1', now())" >/dev/null
out=$(sql "insert into tg_nonces (tenant, nonce, expires_at) values ('a', 'n1', now())")
check "a nonce is single-use per tenant" grep -q 'duplicate key' <<<"$out"
check "the same nonce in another tenant is fine" \
    sql_quiet "insert into tg_nonces (tenant, nonce, expires_at) values ('b', 'n1', now())"
out=$(sql "insert into tg_idem_claims (tenant, idem_key, request_hash, state, claim_id, owner, expires_at) values ('a', 'k', '\\x$(printf '%064d' 0)', 'in_flight', 1, 'i1', now())")
check "an in-flight claim needs its lease" grep -q 'tg_idem_claims_state' <<<"$out"
out=$(sql "insert into tg_approvals (tenant, id, version, status, created_at, expires_at, consume_within_ms, doc) values ('a', 'appr_XYZ', 1, 'pending', 0, 1, 1, '{}')")
check "an approval id has its shape" grep -q 'tg_approvals_id_check' <<<"$out"
out=$(sql "insert into tg_approvals (tenant, id, version, status, created_at, expires_at, consume_within_ms, doc) values ('a', 'appr_$(printf '%032d' 0)', 1, 'open', 0, 1, 1, '{}')")
check "an approval status is one of five" grep -q 'tg_approvals_status_check' <<<"$out"
out=$(sql "insert into tg_log_state (size) values (0)")
check "tg_log_state has one row" grep -q 'duplicate key' <<<"$out"
out=$(sql "update tg_log_state set size = 3")
check "a size needs its signed checkpoint" grep -q 'tg_log_state_signed' <<<"$out"
out=$(sql "update tg_log_state set note = 'x'")
check "a checkpoint needs its root and origin" grep -q 'tg_log_state_signed' <<<"$out"
out=$(sql "insert into tg_log_hashes (level, idx, hash) values (64, 0, '\\x$(printf '%064d' 0)')")
check "a stored hash's level is 0..63" grep -q 'tg_log_hashes_level_check' <<<"$out"
out=$(sql "insert into tg_log_hashes (level, idx, hash) values (0, 0, '\\x00')")
check "a stored hash is 32 bytes" grep -q 'tg_log_hashes_hash_check' <<<"$out"

# two at once on a fresh database: both succeed, one schema, one version row
"$TG_PG_PSQL" "$TG_PG_ADMIN_URL" -X -q -c "create database trigguard2 owner trigguard" >/dev/null
url2=${TG_PG_URL/trigguard?/trigguard2?}
"$TG_BIN" db migrate --database-url "$url2" >"$tmp/c1.out" 2>"$tmp/c1.err" &
p1=$!
"$TG_BIN" db migrate --database-url "$url2" >"$tmp/c2.out" 2>"$tmp/c2.err" &
p2=$!
wait "$p1"
rc1=$?
wait "$p2"
rc2=$?
check "two concurrent migrations both exit 0 ($rc1, $rc2: $(cat "$tmp/c1.err" "$tmp/c2.err"))" \
    test "$rc1" -eq 0 -a "$rc2" -eq 0
check "exactly one of them migrated" \
    test "$(cat "$tmp/c1.out" "$tmp/c2.out" | grep -c 'migrated')" -eq 1
v2=$("$TG_PG_PSQL" "$url2" -X -At -c 'select count(*), max(version) from trigguard_schema' 2>&1)
check "one version row each after both ($v2)" test "$v2" = "5|5"

# a newer schema is refused, and left alone
sql "insert into trigguard_schema (version) values (6)" >/dev/null
run newer db migrate --database-url "$TG_PG_URL"
check "migrate refuses a newer schema with exit 2 (rc=$rc)" test "$rc" -eq 2
check "and says why" has newer.err 'schema version 6; this binary knows up to 5'
check "the newer schema is untouched" test "$(sql 'select count(*) from trigguard_schema')" = 6
run newer_status db status --database-url "$TG_PG_URL"
check "status reports the newer version" has newer_status.out 'schema version 6 .*newer than this binary'

# bad URLs: a sentence and an exit status, never a crash
run bad1 db migrate --database-url 'postgresql://%zz'
check "an unparseable URI exits 2 (rc=$rc)" test "$rc" -eq 2
check "an unparseable URI is named as such" has bad1.err 'database URL does not parse'
check "an unparseable URI does not crash" no_crash bad1
run bad2 db status --database-url 'no equals sign'
check "an unparseable conninfo exits 2 (rc=$rc)" test "$rc" -eq 2
check "an unparseable conninfo does not crash" no_crash bad2
run bad3 db migrate --database-url "postgresql:///trigguard?host=$tmp/nowhere"
check "an unreachable server exits 1 (rc=$rc)" test "$rc" -eq 1
check "an unreachable server is named" has bad3.err 'cannot connect to the database'
check "an unreachable server does not crash" no_crash bad3
run bad4 db migrate --database-url "${TG_PG_URL/user=trigguard/user=nobody}"
check "an unknown role exits 1 (rc=$rc)" test "$rc" -eq 1
check "an unknown role is named" has bad4.err 'role "nobody" does not exist'
run nourl db migrate
check "no URL at all exits 2 (rc=$rc)" test "$rc" -eq 2
check "no URL at all says how to give one" has nourl.err 'TRIGGUARD_DATABASE_URL'
run nosub db --database-url "$TG_PG_URL"
check "no subcommand exits 2 (rc=$rc)" test "$rc" -eq 2
run help db --help
check "db --help exits 0 and names both subcommands" \
    bash -c "[ $rc -eq 0 ] && grep -q 'db migrate' '$tmp/help.out' && grep -q 'db status' '$tmp/help.out'"

check "stop PostgreSQL" tg_pg_stop
checks_done
