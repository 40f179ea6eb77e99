#!/usr/bin/env bash
# daemon_principal_facts.sh — verified facts of the caller (issue 20) against the real
# daemon: rules on tenant and principal.subject decide whatever the body says; a token with
# an explicit subject gets a signed receipt "principal", an old-format entry none (its
# receipt stays v1); an idempotent replay by another principal of the tenant is a 409, by
# the same one the original bytes, before and after a restart; GET /v1/receipts serves it.
# Run on both backends (integration_pg_daemon_principal_facts).
source "$(dirname "$0")/lib/daemon.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen
POLICY=$TG_TMP/facts_policy.json
cat >"$POLICY" <<'EOF'
{"version": "facts-1",
 "surfaces": {
  "open": {"tier": 3, "default": "permit"},
  "ops.run": {"tier": 3, "rules": [{"id": "only-ci-deploy", "effect": "permit",
    "when": [{"field": "principal.subject", "op": "eq", "value": "ci-deploy"}]}]},
  "tenant.run": {"tier": 3, "rules": [{"id": "only-acme", "effect": "permit",
    "when": [{"field": "tenant", "op": "eq", "value": "acme"},
             {"field": "principal.issuer", "op": "exists", "value": false}]}]},
  "deploy.prod": {"tier": 1, "rules": [{"id": "from-main", "effect": "permit",
    "when": [{"field": "principal.claims.ref", "op": "eq", "value": "refs/heads/main"}]}]}
 }}
EOF
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOF
[
  {"tenant": "acme", "token_sha256": "$(sha tok-old)"},
  {"tenant": "acme", "token_sha256": "$(sha tok-ci)", "subject": "ci-deploy"},
  {"tenant": "acme", "token_sha256": "$(sha tok-ops)", "subject": "ops"},
  {"tenant": "beta", "token_sha256": "$(sha tok-beta)", "subject": "beta-bot"}
]
EOF
chmod 600 "$TOKENS"
tg_std_args main
TG_STD_ARGS[1]=$POLICY # --policy
tg_start main TRIGGUARD_API_KEYS="zeta:tok-zeta" -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS"

as() { # as TOKEN PATH JSON [curl args]
    local tok=$1 path=$2 body=$3
    shift 3
    tg_req POST "$path" -H "Authorization: Bearer $tok" --json-body "$body" "$@"
}

# ---- the receipt names who asked -------------------------------------------------------

as tok-ci /v1/evaluate '{"surface":"open","action":"a","actor":"x"}'
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['principal'] == {'subject': 'ci-deploy'}" \
    "explicit subject: the receipt has principal {subject}"
tg_expect_py "b'\"principal\":{\"subject\":\"ci-deploy\"},\"protocolFingerprint\"' in b" \
    "the principal sits in canonical order, issuer omitted for a tokens-file principal"
tg_save_receipt "$TG_TMP/ci-receipt.json"
tg_fetch_keys "$TG_TMP/keys.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/ci-receipt.json" 2>&1)
tg_eq "$?:$out" "0:VALID" "trigguard verify: the receipt with a principal is valid"
python3 - "$TG_TMP/ci-receipt.json" "$TG_TMP/forged.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["principal"]["subject"] = "ops"
open(sys.argv[2], "w").write(json.dumps(r, separators=(",", ":")))
PY
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/forged.json" 2>&1)
tg_ne "$?" 0 "trigguard verify: a receipt whose principal was changed is refused ($out)"
tg_req POST /v1/verify -H "Content-Type: application/json" --data-binary "@$TG_TMP/ci-receipt.json"
tg_expect_py "s == 200 and j['valid'] is True" "POST /v1/verify: valid"
tg_req POST /v1/verify -H "Content-Type: application/json" --data-binary "@$TG_TMP/forged.json"
tg_expect_py "j['valid'] is False" "POST /v1/verify: a changed principal is not valid"

tg_req POST /protocol/verify-receipt -H "Content-Type: application/json" --data-binary "@$TG_TMP/forged.json"
tg_expect_py "j['valid'] is False" "POST /protocol/verify-receipt: a changed principal is not valid"
tg_req POST /protocol/verify-receipt -H "Content-Type: application/json" --data-binary "@$TG_TMP/ci-receipt.json"
tg_expect_py "j['valid'] is True" "POST /protocol/verify-receipt: valid"

as tok-old /v1/evaluate '{"surface":"open","action":"a","actor":"x"}'
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and 'principal' not in j['receipt']" \
    "old-format entry (derived subject): no principal, a v1 receipt"

# ---- rules on verified facts decide, whatever the body says ----------------------------

SNEAKY='{"surface":"ops.run","action":"a","actor":"ci-deploy","context":{"subject":"ci-deploy","principal":{"subject":"ci-deploy"},"tenant":"acme"}}'
as tok-ci /v1/evaluate '{"surface":"ops.run","action":"a"}'
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['principal']['subject'] == 'ci-deploy'" "principal.subject: the named token permits"
as tok-ops /v1/evaluate "$SNEAKY"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'NO_MATCHING_POLICY'" \
    "principal.subject: another token is denied, whatever the body claims"
as tok-old /decide "$SNEAKY"
tg_expect_py "s == 200 and j['decision'] == 'DENY'" "/decide: the same rule on the same facts"
as tok-ci /decide '{"surface":"ops.run"}'
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "/decide: the named token permits"
as tok-ci /execute '{"surface":"ops.run","action":"a"}'
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "/execute: the named token permits"
as tok-ops /execute "$SNEAKY"
tg_expect_py "s == 403 and j['decision'] == 'DENY'" "/execute: another token gets its 403"

as tok-ops /v1/evaluate '{"surface":"tenant.run"}'
tg_expect_py "j['decision'] == 'PERMIT'" "tenant: any principal of acme permits"
as tok-beta /v1/evaluate '{"surface":"tenant.run","context":{"tenant":"acme"}}'
tg_expect_py "j['decision'] == 'DENY' and j['receipt']['tenantId'] == 'beta'" "tenant: beta is denied, whatever the body says"

as tok-ci /v1/evaluate '{"surface":"deploy.prod","context":{"ref":"refs/heads/main","claims":{"ref":"refs/heads/main"}}}'
tg_expect_py "j['decision'] == 'DENY'" "principal.claims: a static token has no claims; the body's ref is no fact"

# ---- idempotency is bound to the principal ----------------------------------------------

BODY='{"surface":"open","action":"a","actor":"x","idempotency_key":"facts-k1"}'
as tok-ci /v1/evaluate "$BODY"
tg_expect_status 200 "first use of the key by ci-deploy"
tg_save first
tg_jget EXEC 'j["receipt"]["executionId"]'
as tok-ci /v1/evaluate "$BODY"
tg_check "replay by the same principal: the original bytes" cmp -s "$(tg_saved_body first)" "$TG_BODY_FILE"
tg_expect_header Idempotent-Replayed true "replay by the same principal"
as tok-ops /v1/evaluate "$BODY"
tg_expect_error 409 idempotency_conflict "replay by another principal of the tenant"
tg_check "the 409 hands out nothing of the first receipt" bash -c "! grep -q '$EXEC' '$TG_BODY_FILE'"
as tok-old /v1/evaluate "$BODY"
tg_expect_error 409 idempotency_conflict "replay by an old-format token of the tenant"
as tok-ci /v1/evaluate '{"surface":"open","action":"b","actor":"x","idempotency_key":"facts-k1"}'
tg_expect_error 409 idempotency_conflict "same principal, another body: the same 409"
as tok-beta /v1/evaluate "$BODY"
tg_expect_py "s == 200 and j['receipt']['tenantId'] == 'beta'" "another tenant's key space is its own"

tg_req GET "/v1/receipts/$EXEC" -H "Authorization: Bearer tok-ci"
tg_expect_py "s == 200 and (j.get('receipt') or j)['principal'] == {'subject': 'ci-deploy'}" "GET /v1/receipts: the principal"
tg_save get1

LOG=$(tg_logfile main)
tg_check "the access line names the subject (and no issuer for a token)" python3 - "$LOG" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
reqs = [l for l in lines if l.get("event") == "request" and l.get("subject") == "ci-deploy"]
assert reqs and all("issuer" not in l for l in reqs), reqs[:2]
PY

# ---- after a restart -----------------------------------------------------------------------

tg_stop main
tg_start main TRIGGUARD_API_KEYS="zeta:tok-zeta" -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS"
as tok-ci /v1/evaluate "$BODY"
tg_check "replay after a restart: the original bytes" cmp -s "$(tg_saved_body first)" "$TG_BODY_FILE"
as tok-ops /v1/evaluate "$BODY"
tg_expect_error 409 idempotency_conflict "another principal after a restart: still 409"
tg_req GET "/v1/receipts/$EXEC" -H "Authorization: Bearer tok-ci"
tg_check "GET /v1/receipts after a restart: the same bytes" cmp -s "$(tg_saved_body get1)" "$TG_BODY_FILE"

tg_stop main
if [ "${TG_TEST_STORE:-file}" == file ]; then
    out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-main" --keys "$TG_TMP/keys.json" 2>&1)
    tg_eq "$?" 0 "trigguard ledger verify: every receipt, principals included, verifies ($out)"
else
    out=$("$TG_BIN" ledger verify --database-url "$TG_PG_STORE_URL" --keys "$TG_TMP/keys.json" 2>&1)
    tg_eq "$?" 0 "trigguard ledger verify --database-url: every receipt verifies ($out)"
fi
tg_done
