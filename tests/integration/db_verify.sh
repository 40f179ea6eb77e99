#!/usr/bin/env bash
# db_verify.sh — `trigguard ledger verify --database-url URL` against a throwaway PostgreSQL
# (scripts/lib/pg.sh) holding a ledger the real daemon wrote, imported with `db import`: the
# intact rows verify (with keys too); a deleted record, an altered payload byte, an altered
# prev_hash, two swapped chain places, a ring without the signing key and a claim pointing at
# a missing record are each found (exit 1, named); a bad URL and another schema version
# exit 2. Each damage gets its own freshly imported database.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"
# fresh NAME: a new database with the ledger imported; its URL in $url_new.
fresh() {
    newdb "$1"
    "$TG_BIN" db migrate --database-url "$url_new" >/dev/null 2>&1 || tg_die "migrate $1"
    "$TG_BIN" db import "$ledger" --database-url "$url_new" >/dev/null 2>&1 || tg_die "import $1"
}
# damaged NAME SQL WHAT: a fresh import damaged by SQL must fail verify with exit 1, saying WHAT.
damaged() {
    fresh "$1"
    sql "$url_new" "$2" >/dev/null || tg_die "damage $1: $2"
    run "$1" ledger verify --database-url "$url_new"
    tg_eq "$rc" 1 "$1: verify exits 1 ($(cat "$TG_TMP/$1.err"))"
    tg_check "$1: the fault is named ($(tr '\n' ' ' <"$TG_TMP/$1.out"))" has "$1.out" "$3"
}

# A ledger written by the daemon: PERMITs with keys and nonces, a DENY, a SILENCE.
tg_keygen "$TG_TMP/key.pem"
tg_keygen "$TG_TMP/other.pem"
"$TG_BIN" keys "$TG_TMP/key.pem" >"$TG_TMP/keys.json" || tg_die "keys.json"
"$TG_BIN" keys "$TG_TMP/other.pem" >"$TG_TMP/other.json" || tg_die "other.json"
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-1","nonce":"n-1"')"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT k-1"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-2"')"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT k-2"
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-deny"')"
tg_expect_py "j['decision'] == 'DENY'" "DENY"
tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"k-silence"')"
tg_expect_py "j['decision'] == 'SILENCE'" "SILENCE"
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT without key"
tg_stop main
ledger=$TG_TMP/ledger-main

fresh tgok
run ok ledger verify --database-url "$url_new"
tg_eq "$rc" 0 "an intact import verifies ($(cat "$TG_TMP/ok.err"))"
tg_check "with a summary ($(tr '\n' ' ' <"$TG_TMP/ok.out"))" \
    has ok.out 'records:    5 (4 receipts, 1 silence)'
TRIGGUARD_DATABASE_URL=$url_new run okkeys ledger verify --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "it verifies with --keys, URL from the environment ($(cat "$TG_TMP/okkeys.err"))"
tg_check "every signature checked" has okkeys.out 'signatures: 4 verified'
run okkey ledger verify --database-url "$url_new" --key "$TG_TMP/key.pem"
tg_eq "$rc" 0 "and with --key PEM"

run other ledger verify --database-url "$url_new" --keys "$TG_TMP/other.json"
tg_eq "$rc" 1 "receipts signed by a key not in the ring are a fault"
tg_check "named ($(tr '\n' ' ' <"$TG_TMP/other.out"))" has other.out 'receipt does not verify'

damaged tgdel "delete from tg_records where chain_seq = 4" 'record 4 is missing'
damaged tgpay "update tg_records set payload = overlay(payload placing decode(lpad(to_hex(get_byte(payload, 20) # 1), 2, '0'), 'hex') from 21 for 1) where chain_seq = 2" \
    'record hash mismatch'
damaged tgprev "update tg_records set prev_hash = set_byte(prev_hash, 0, get_byte(prev_hash, 0) # 1) where chain_seq = 3" \
    'prev_hash differs'
damaged tgswap "update tg_records set chain_seq = 100 where chain_seq = 2; update tg_records set chain_seq = 2 where chain_seq = 3; update tg_records set chain_seq = 3 where chain_seq = 100" \
    'chain_seq: 2'
damaged tgtype "update tg_records set type = 257 where chain_seq = 1" 'unknown record type'
damaged tgtenant "update tg_records set tenant = 'other' where chain_seq = 2" 'tenant column differs'
damaged tgclaim "update tg_idem_claims set record_seq = 999 where idem_key = 'k-2'" \
    'tg_idem_claims row (tenant acme, k-2) points at record seq 999: no such record'
damaged tgdup "insert into tg_receipts (tenant, execution_id, record_seq) select tenant, 'exec_' || repeat('0', 32), record_seq from tg_receipts limit 1" \
    'two tg_receipts rows point at record seq'
damaged tgtail "delete from tg_receipts where record_seq in (select seq from tg_records where chain_seq = 5); delete from tg_records where chain_seq = 5" 'records were deleted from its end'
damaged tghead "delete from tg_chains" 'without a head row in tg_chains'

# A database the daemon itself wrote (--store postgres): its chain verifies, every
# signature too, and deleting its last record is found as for an imported one.
newdb tgserve
"$TG_BIN" db migrate --database-url "$url_new" >/dev/null 2>&1 || tg_die "migrate tgserve"
serve_url=$url_new
tg_start pg -- "${TG_STD_ARGS[@]}" --store postgres --database-url "$serve_url"
for k in 1 2 3; do
    tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"s-$k\",\"nonce\":\"sn-$k\"")"
    tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT s-$k through PostgreSQL"
done
tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"s-silence"')"
tg_expect_py "j['decision'] == 'SILENCE'" "SILENCE through PostgreSQL"
tg_stop pg
run served ledger verify --database-url "$serve_url" --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "what serve wrote verifies ($(cat "$TG_TMP/served.out" "$TG_TMP/served.err" | tr '\n' ' '))"
tg_check "4 records, 3 signatures" has served.out 'signatures: 3 verified'
sql "$serve_url" "delete from tg_receipts where record_seq = (select max(seq) from tg_records where type = 1)" >/dev/null
sql "$serve_url" "delete from tg_idem_claims where record_seq = (select max(seq) from tg_records)" >/dev/null
sql "$serve_url" "delete from tg_records where seq = (select max(seq) from tg_records)" >/dev/null
run servedtail ledger verify --database-url "$serve_url"
tg_eq "$rc" 1 "a deleted last record of serve's chain is a fault"
tg_check "named ($(tr '\n' ' ' <"$TG_TMP/servedtail.out"))" has servedtail.out 'deleted from its end'

# unusable: exit 2
run bad ledger verify --database-url 'postgresql://%zz'
tg_eq "$rc" 2 "an unparseable URL exits 2"
tg_check "without a crash" bash -c "! grep -q Sanitizer '$TG_TMP/bad.err'"
sql "$url_new" "insert into trigguard_schema (version) values (99)" >/dev/null
run newer ledger verify --database-url "$url_new"
tg_eq "$rc" 2 "a newer schema exits 2"
tg_check "and names the version" has newer.err 'schema version 99'
run both ledger verify "$ledger" --database-url "$url_new"
tg_eq "$rc" 2 "PATH and --database-url together are a usage error"

tg_check "stop PostgreSQL" tg_pg_stop
tg_done
