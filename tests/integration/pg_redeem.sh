#!/usr/bin/env bash
# pg_redeem.sh — receipts are redeemed once across two instances sharing one PostgreSQL
# (issue 20): a receipt redeemed on A is 409 on B; redemptions of one receipt fired at both
# instances at once give exactly one 200; a receipt issued by A is redeemed on B; after both
# restart, every redemption stands; `ledger verify --database-url` accepts the records.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen "$TG_TMP/key.pem"
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOF
[
  {"tenant": "acme", "token_sha256": "$(sha tok-exec)", "subject": "runner", "role": "executor"}
]
EOF
chmod 600 "$TOKENS"
pg_migrate
pg_serve a --tokens "$TOKENS"
pg_serve b --tokens "$TOKENS"

# permit_on NAME VAR_ID VAR_HASH: a fresh PERMIT from instance NAME.
permit_on() {
    tg_use "$1"
    tg_post /v1/evaluate "$(tg_req_json permit)"
    tg_expect_py "j['decision'] == 'PERMIT'" "a PERMIT from $1"
    tg_jget "$2" 'j["execution_id"]'
    tg_jget "$3" 'j["request_hash"]'
}
# redeem_on NAME EXEC_ID HASH
redeem_on() {
    tg_use "$1"
    tg_req POST "/v1/receipts/$2/redeem" -H "Authorization: Bearer tok-exec" \
        --json-body "{\"request_hash\":\"$3\"}"
}

permit_on a ID1 H1
redeem_on a "$ID1" "$H1"
tg_expect_status 200 "redeemed on A"
redeem_on b "$ID1" "$H1"
tg_expect_error 409 receipt_already_redeemed "then on B: 409"
redeem_on a "$ID1" "$H1"
tg_expect_error 409 receipt_already_redeemed "and on A again: 409"

permit_on a ID2 H2
redeem_on b "$ID2" "$H2"
tg_expect_status 200 "a receipt A issued, redeemed on B"
redeem_on a "$ID2" "$H2"
tg_expect_error 409 receipt_already_redeemed "then on A: 409"

# ---- both instances at once, several rounds --------------------------------------------------

for round in 1 2 3; do
    permit_on a ID H
    tg_check "round $round: 10 redemptions on each instance at once, exactly one 200" \
        python3 - "${TG_PORTS[a]}" "${TG_PORTS[b]}" "$ID" "$H" <<'PY'
import sys, pgload
a, b, eid, h = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
jobs = [(port, "POST", "/v1/receipts/%s/redeem" % eid, {"request_hash": h}, "tok-exec")
        for _ in range(10) for port in (a, b)]
res = pgload.fire(jobs, 20)
st = [r[0] for r in res]
codes = [pgload.error_code(r[2]) for r in res if r[0] != 200]
assert st.count(200) == 1, st
assert all(c == "receipt_already_redeemed" for c in codes), codes
PY
done

# ---- restarts: what is redeemed stays redeemed ---------------------------------------------------

permit_on b ID3 H3
tg_stop a
tg_stop b
pg_serve a --tokens "$TOKENS"
pg_serve b --tokens "$TOKENS"
redeem_on b "$ID1" "$H1"
tg_expect_error 409 receipt_already_redeemed "after both restarted: still redeemed (B)"
redeem_on a "$ID2" "$H2"
tg_expect_error 409 receipt_already_redeemed "after both restarted: still redeemed (A)"
redeem_on a "$ID3" "$H3"
tg_expect_status 200 "after both restarted: an unredeemed receipt redeems once"
redeem_on b "$ID3" "$H3"
tg_expect_error 409 receipt_already_redeemed "and only once"

tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records where type = 3")" 6 \
    "six redemption records in the database"
tg_eq "$(sql "$TG_PG_URL" "select count(*) - count(distinct convert_from(payload, 'UTF8')::json->>'executionId') from tg_records where type = 3")" \
    0 "no receipt in two redemption records"
run verify ledger verify --database-url "$TG_PG_URL" --key "$TG_KEY"
tg_eq "$rc" 0 "ledger verify --database-url accepts the records with their redemptions"
tg_check "it counts them" has verify.out "6 redemptions"
tg_stop a
tg_stop b
tg_done
