#!/usr/bin/env bash
# db_import.sh — `trigguard db import DIR` against a throwaway PostgreSQL (scripts/lib/pg.sh)
# with a ledger the real daemon wrote: the rows land in ledger order with their claims,
# nonces and receipts; a second run writes nothing; a damaged ledger, a database at another
# schema version and a bad URL are refused with exit 2 and nothing written.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

# A ledger written by the daemon: 3 PERMITs with keys (two with nonces), a DENY with a key,
# a SILENCE with a key, and one PERMIT with neither.
tg_keygen "$TG_TMP/key.pem"
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-1","nonce":"n-1"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "PERMIT k-1"
tg_save k1
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-2","nonce":"n-2"')"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT k-2"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-3"')"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT k-3"
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-deny"')"
tg_expect_py "j['decision'] == 'DENY'" "DENY"
tg_save kdeny
tg_jget DENY_EXEC 'j["execution_id"]'
tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"k-silence"')"
tg_expect_py "j['decision'] == 'SILENCE'" "SILENCE"
tg_save ksilence
tg_post /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT without key or nonce"
tg_stop main
ledger=$TG_TMP/ledger-main

run m1 db migrate --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "migrate exits 0"

# first import: 6 records, 5 keys, 2 nonces, 5 receipts (PERMIT and DENY, not SILENCE)
run i1 db import "$ledger" --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "import exits 0 ($(cat "$TG_TMP/i1.err"))"
tg_check "import reports its counts ($(cat "$TG_TMP/i1.out"))" \
    has i1.out 'imported 6 records (0 already present), 5 idempotency keys, 2 nonces, 5 receipts'
tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_records')" 6 "six records"
tg_eq "$(sql "$TG_PG_URL" "select string_agg(chain_seq::text, ',' order by seq) from tg_records")" \
    "1,2,3,4,5,6" "records keep their ledger order (seq follows chain_seq)"
tg_eq "$(sql "$TG_PG_URL" "select count(distinct instance_id) from tg_records where instance_id like 'import:%'")" \
    1 "one import chain"
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records r join tg_records p on p.instance_id = r.instance_id and p.chain_seq = r.chain_seq - 1 where p.record_hash <> r.prev_hash")" \
    0 "every prev_hash is the record_hash before it"
tg_eq "$(sql "$TG_PG_URL" "select string_agg(c.idem_key || ':' || r.chain_seq, ',' order by r.chain_seq) from tg_idem_claims c join tg_records r on r.seq = c.record_seq where c.state = 'done' and c.tenant = 'acme'")" \
    "k-1:1,k-2:2,k-3:3,k-deny:4,k-silence:5" "done claims point at their records"
tg_eq "$(sql "$TG_PG_URL" "select string_agg(http_status::text, ',' order by idem_key) from tg_idem_claims")" \
    "200,200,200,200,200" "claims keep the answered status"
tg_eq "$(sql "$TG_PG_URL" "select string_agg(nonce, ',' order by nonce) from tg_nonces where tenant = 'acme' and expires_at > now()")" \
    "n-1,n-2" "used nonces, not yet expired"
tg_eq "$(sql "$TG_PG_URL" "select r.chain_seq from tg_receipts x join tg_records r on r.seq = x.record_seq where x.execution_id = '$DENY_EXEC'")" \
    4 "the DENY's receipt index row points at its record"
tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_receipts')" 5 "five receipt rows (no SILENCE)"
tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_records where log_entry is null')" 0 \
    "every record carries its transparency-log entry (ledger verify checks each below)"

# again: nothing duplicated, nothing changed
before=$(sql "$TG_PG_URL" "select md5(string_agg(seq || instance_id || chain_seq || encode(record_hash, 'hex'), ',' order by seq)) || (select count(*) from tg_idem_claims) || (select count(*) from tg_nonces) || (select count(*) from tg_receipts) from tg_records")
TRIGGUARD_DATABASE_URL=$TG_PG_URL run i2 db import "$ledger"
tg_eq "$rc" 0 "import again (URL from the environment) exits 0 ($(cat "$TG_TMP/i2.err"))"
tg_check "import again reports everything as already present ($(cat "$TG_TMP/i2.out"))" \
    has i2.out 'imported 6 records (6 already present), 5 idempotency keys, 2 nonces, 5 receipts'
after=$(sql "$TG_PG_URL" "select md5(string_agg(seq || instance_id || chain_seq || encode(record_hash, 'hex'), ',' order by seq)) || (select count(*) from tg_idem_claims) || (select count(*) from tg_nonces) || (select count(*) from tg_receipts) from tg_records")
tg_eq "$after" "$before" "the second import changed nothing"

# the ledger grew: only the new record is written, at the end of the same chain
tg_start main -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-4"')"
tg_expect_py "j['decision'] == 'PERMIT'" "PERMIT k-4 after a restart"
tg_stop main
run i3 db import "$ledger" --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "import of the grown ledger exits 0 ($(cat "$TG_TMP/i3.err"))"
tg_check "only the new record is new ($(cat "$TG_TMP/i3.out"))" \
    has i3.out 'imported 7 records (6 already present), 6 idempotency keys, 2 nonces, 6 receipts'
tg_eq "$(sql "$TG_PG_URL" "select string_agg(chain_seq::text, ',' order by seq) || ' ' || count(distinct instance_id) from tg_records")" \
    "1,2,3,4,5,6,7 1" "the new record extends the same chain, last"

# --retention 1 after the records aged: records and receipts, no keys or nonces
newdb tgret
run mret db migrate --database-url "$url_new"
sleep 2
run iret db import "$ledger" --database-url "$url_new" --retention 1
tg_eq "$rc" 0 "import with a short retention exits 0"
tg_check "expired keys and nonces are not imported ($(cat "$TG_TMP/iret.out"))" \
    has iret.out 'imported 7 records (0 already present), 0 idempotency keys, 0 nonces, 6 receipts'

# a tampered ledger: refused, nothing written (the damage is in the 5th record, after four
# records were already inserted in the transaction)
cp -r "$ledger" "$TG_TMP/tampered"
python3 - "$TG_TMP/tampered/ledger-000001.tgl" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
off = 0
for _ in range(4):
    m, n = struct.unpack_from('<II', b, off + 48)
    off += 92 + m + n
m, n = struct.unpack_from('<II', b, off + 48)
b[off + 60 + m + n // 2] ^= 1
open(p, 'wb').write(b)
EOF
newdb tgtamper
run mt db migrate --database-url "$url_new"
run it db import "$TG_TMP/tampered" --database-url "$url_new"
tg_eq "$rc" 2 "a tampered ledger is refused with exit 2"
tg_check "and says why ($(cat "$TG_TMP/it.err"))" has it.err 'trigguard db import: '
tg_eq "$(sql "$url_new" 'select (select count(*) from tg_records) + (select count(*) from tg_idem_claims) + (select count(*) from tg_nonces) + (select count(*) from tg_receipts)')" \
    0 "nothing written from a tampered ledger"

run missing db import "$TG_TMP/nowhere" --database-url "$url_new"
tg_check "a missing directory is refused with exit 2, without a crash (rc=$rc)" \
    bash -c "[ $rc -eq 2 ] && ! grep -q Sanitizer '$TG_TMP/missing.err'"
tg_check "and named" has missing.err 'nowhere'

# The imported history, served from the database: a daemon on --store postgres replays the
# imported keys byte for byte, refuses their nonces and a changed body, and reads receipts.
# With a transparency log: the imported records are its first leaves.
LOG_KEY=$TG_TMP/log-key.pem
tg_keygen "$LOG_KEY" itest-log-1
tg_start pgimp -- "${TG_STD_ARGS[@]}" --store postgres --database-url "$TG_PG_URL" \
    --log-key "$LOG_KEY" --checkpoint-interval 50
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-1","nonce":"n-1"')"
tg_expect_status 200 "an imported key replays through PostgreSQL"
tg_expect_header Idempotent-Replayed true "marked as a replay"
tg_check "byte for byte the file backend's first response" cmp -s "$TG_BODY_FILE" "$(tg_saved_body k1)"
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-deny"')"
tg_check "the DENY replays byte for byte" cmp -s "$TG_BODY_FILE" "$(tg_saved_body kdeny)"
tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"k-silence"')"
tg_check "the SILENCE replays byte for byte" cmp -s "$TG_BODY_FILE" "$(tg_saved_body ksilence)"
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-1"')"
tg_expect_error 409 idempotency_conflict "another body under an imported key is 409"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-new","nonce":"n-2"')"
tg_expect_error 409 replay_detected "an imported nonce is used"
tg_req GET "/v1/receipts/$DENY_EXEC" "${TG_AUTH_A[@]}"
tg_expect_status 200 "an imported receipt is read from the database"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-new2","nonce":"n-new"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "a new request is decided and committed"
# the log covers every record, the imported ones first, in their order
for _ in $(seq 1 100); do
    [ "$(sql "$TG_PG_URL" "select size = (select count(*) from tg_records) from tg_log_state")" == t ] &&
        break
    sleep 0.1
done
tg_eq "$(sql "$TG_PG_URL" "select size || ' ' || (select count(*) from tg_records) from tg_log_state")" \
    "8 8" "the log's checkpoint covers every record (7 imported, 1 new)"
tg_eq "$(sql "$TG_PG_URL" "select string_agg(log_index::text, ',' order by seq) from tg_records")" \
    "0,1,2,3,4,5,6,7" "leaves follow the record order"
tg_req GET /v1/log/checkpoint
tg_expect_py "s == 200 and b.decode().split('\\n')[1] == '8'" "the daemon serves the checkpoint of 8"
tg_stop pgimp
run lv ledger verify --database-url "$TG_PG_URL"
tg_eq "$rc" 0 "ledger verify --database-url after the import: exit 0 ($(grep -E 'FAULT|what' "$TG_TMP/lv.out") $(cat "$TG_TMP/lv.err"))"
tg_check "it checked the log: 8 leaves" grep -qE '^  log: +checkpoint of 8 leaves' "$TG_TMP/lv.out"

# a database at another schema version: refused, untouched
newdb tgempty
run ie db import "$ledger" --database-url "$url_new"
tg_eq "$rc" 2 "a database without the schema is refused with exit 2"
tg_check "and names the version" has ie.err 'schema version 0; this binary imports into 5'
sql "$TG_PG_URL" "insert into trigguard_schema (version) values (99)" >/dev/null
run inew db import "$ledger" --database-url "$TG_PG_URL"
tg_eq "$rc" 2 "a newer schema is refused with exit 2"
tg_check "and names the version" has inew.err 'schema version 99; this binary imports into 5'

# bad URLs and usage
run bad1 db import "$ledger" --database-url 'postgresql://%zz'
tg_eq "$rc" 2 "an unparseable URL exits 2"
tg_check "an unparseable URL is named, without a crash" \
    bash -c "grep -q 'database URL does not parse' '$TG_TMP/bad1.err' && ! grep -q Sanitizer '$TG_TMP/bad1.err'"
run nourl db import "$ledger"
tg_eq "$rc" 2 "no URL exits 2"
run nodir db import --database-url "$TG_PG_URL"
tg_eq "$rc" 2 "no directory exits 2"
run help db import --help
tg_check "db import --help exits 0 and shows the usage" \
    bash -c "[ $rc -eq 0 ] && grep -q 'usage: trigguard db import DIR' '$TG_TMP/help.out'"

tg_check "stop PostgreSQL" tg_pg_stop
tg_done
