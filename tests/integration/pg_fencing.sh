#!/usr/bin/env bash
# pg_fencing.sh — no request executes twice when an instance stalls past its claim's lease
# (SPEC §13, docs/POSTGRES.md "Fencing"), with two real daemons on one throwaway PostgreSQL:
#   A claims key K and signs, but its group commit is held (a psql session locks A's chain
#   head row, as a slow disk or a stalled process would hold the commit back);
#   the lease (--claim-timeout 1000) passes; B gets the same request, takes the claim over
#   and commits; then A's commit goes on and must find its claim taken over: A writes
#   nothing and answers 503 store_unavailable, B's 200 is the only record, and a replay on
#   either instance returns B's response byte for byte. The same for a nonce.
# Also: serve refuses a database whose schema it does not know (none, older, newer).
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

tg_keygen "$TG_TMP/key.pem"
# serve refuses a schema it does not know, and says what to do
tg_std_args refuse
newdb tgv0
run v0 serve --port 0 "${TG_STD_ARGS[@]}" --store postgres --database-url "$url_new"
tg_eq "$rc" 2 "serve refuses a database without the schema"
tg_check "and names db migrate" has v0.err 'schema version 0 and this binary uses'
"$TG_BIN" db migrate --database-url "$url_new" --target-version 1 >/dev/null 2>&1 || tg_die "v1"
run v1 serve --port 0 "${TG_STD_ARGS[@]}" --store postgres --database-url "$url_new"
tg_eq "$rc" 2 "serve refuses the previous schema version"
tg_check "and names db migrate" has v1.err 'run trigguard db migrate'
"$TG_BIN" db migrate --database-url "$url_new" >/dev/null 2>&1 || tg_die "v2"
sql "$url_new" "insert into trigguard_schema (version) values (99)" >/dev/null
run v99 serve --port 0 "${TG_STD_ARGS[@]}" --store postgres --database-url "$url_new"
tg_eq "$rc" 2 "serve refuses a newer schema"
tg_check "and says to upgrade" has v99.err 'upgrade trigguard'
run nourl serve --port 0 "${TG_STD_ARGS[@]}" --store postgres
tg_eq "$rc" 2 "--store postgres without a URL is refused"
run dur serve --port 0 "${TG_STD_ARGS[@]}" --store postgres --database-url "$url_new" --durability none
tg_eq "$rc" 2 "--durability none is refused with postgres"

"$TG_BIN" db migrate --database-url "$TG_PG_URL" >/dev/null 2>&1 || tg_die "migrate"
pg_args=(--store postgres --database-url "$TG_PG_URL" --claim-timeout 1000
    --ledger-stall-timeout 20000 --db-timeout 5000)
tg_std_args a
tg_start a -- "${TG_STD_ARGS[@]}" "${pg_args[@]}"
chain_a=$(sql "$TG_PG_URL" "select instance_id from tg_chains")
tg_check "A has its chain row ($chain_a)" test -n "$chain_a"
tg_std_args b
tg_start b -- "${TG_STD_ARGS[@]}" "${pg_args[@]}"
tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_chains')" 2 "two instances, two chains"

# fenced KIND EXTRA: one round of the scenario for a request with EXTRA JSON members
# (a key K, maybe a nonce); the records must go from $before to $before + 1.
fenced() {
    local kind=$1 extra=$2 body
    body=$(tg_req_json permit "$extra")
    local before
    before=$(sql "$TG_PG_URL" 'select count(*) from tg_records')
    # hold A's chain head: A's group statement waits for it before it locks any claim
    "$TG_PG_PSQL" "$TG_PG_URL" -X -q -v ON_ERROR_STOP=1 \
        -c "begin" \
        -c "select 1 from tg_chains where instance_id = '$chain_a' for update" \
        -c "select pg_sleep(4)" -c "commit" >/dev/null 2>&1 &
    local locker=$!
    sleep 0.5
    tg_use a
    printf '%s' "$body" >"$TG_TMP/fence-$kind.body"
    curl -s -o "$TG_TMP/fence-$kind-a.out" -w '%{http_code}' --max-time 30 \
        "${TG_AUTH_A[@]}" -H 'Content-Type: application/json' \
        --data-binary "@$TG_TMP/fence-$kind.body" "$TG_URL/v1/evaluate" >"$TG_TMP/fence-$kind-a.status" &
    local pa=$!
    sleep 1.6 # past A's lease; A's request is still waiting for its commit
    tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_records')" "$before" \
        "$kind: nothing committed while A's commit is held"
    tg_use b
    tg_post /v1/evaluate "$body"
    tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "$kind: B takes the claim over after the lease and commits"
    tg_save "fence-$kind-b"
    wait "$locker"
    wait "$pa"
    tg_eq "$(cat "$TG_TMP/fence-$kind-a.status")" 503 "$kind: A's late commit is fenced: 503"
    tg_check "$kind: with store_unavailable ($(head -c 200 "$TG_TMP/fence-$kind-a.out"))" \
        grep -q '"error":"store_unavailable"' "$TG_TMP/fence-$kind-a.out"
    tg_eq "$(sql "$TG_PG_URL" 'select count(*) from tg_records')" "$((before + 1))" \
        "$kind: exactly one record: B's"
    [ "$kind" == key ] || return 0
    tg_use a
    tg_post /v1/evaluate "$body"
    tg_expect_status 200 "$kind: a retry on A replays"
    tg_expect_header Idempotent-Replayed true "$kind: marked as a replay"
    tg_check "$kind: byte for byte B's response" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "fence-$kind-b")"
}

fenced key ',"idempotency_key":"fence-k1"'
tg_check "A logged the fenced record" grep -q '"event":"claim_fenced"' "$(tg_logfile a)"
tg_eq "$(sql "$TG_PG_URL" "select state || ':' || (owner <> '$chain_a')::text from tg_idem_claims where idem_key = 'fence-k1'")" \
    "done:true" "the key is done, owned by B"

# A nonce alone (no key): A holds it, the lease passes, B takes it over; A's commit fenced.
fenced nonce ',"nonce":"fence-n1"'
tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"fence-n1"')"
tg_expect_error 409 replay_detected "the nonce B consumed is used"

# Both chains still verify, with every signature.
"$TG_BIN" keys "$TG_KEY" >"$TG_TMP/keys.json" || tg_die "keys.json"
run verify ledger verify --database-url "$TG_PG_URL" --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "the database verifies ($(cat "$TG_TMP/verify.out" "$TG_TMP/verify.err" | tr '\n' ' '))"

tg_stop a
tg_stop b
tg_check "stop PostgreSQL" tg_pg_stop
tg_done
