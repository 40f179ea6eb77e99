#!/usr/bin/env bash
# daemon_oidc_policy.sh — issue 20 end to end, on the bundled policy: a GitHub-Actions-shaped ID
# token is verified (JWKS), mapped to a principal, its claims decide the bundled
# release-to-production-from-main rule whatever the body says, the signed receipt names the
# principal {issuer, subject}, an idempotency key is the principal's alone, and an executor that
# authenticates with its own ID token redeems the receipt once.
#
# The pieces have tests of their own (daemon_oidc: every refusal shape of a JWT;
# daemon_principal_facts: facts from tokens-file principals; daemon_redeem: every redemption
# answer). This one checks that they hold together: a verified claim is the only way to the
# PERMIT, and nothing in the request body stands in for it.
source "$(dirname "$0")/lib/daemon.sh"

python3 -c 'import cryptography' 2>/dev/null || tg_die "python3-cryptography is needed (scripts/deps test)"

JT=$TG_PYLIB/jwt_tool.py
jt() { python3 "$JT" "$@"; }
GH=https://token.actions.githubusercontent.com
RUNNER=https://runner.test

jt keygen --kind rsa --out "$TG_TMP/gh.pem"
jt keygen --kind ed --out "$TG_TMP/runner.pem"
jt jwks --out "$TG_TMP/gh-jwks.json" gh-1="$TG_TMP/gh.pem"
jt jwks --out "$TG_TMP/runner-jwks.json" run-1="$TG_TMP/runner.pem"
cat >"$TG_TMP/oidc.json" <<EOF
{"issuers": [
  {"name": "github", "issuer": "$GH", "jwks": "$TG_TMP/gh-jwks.json", "audiences": ["trigguard"],
   "tenant_claim": "repository_owner", "tenants": ["acme"], "subject": "{sub}",
   "actors": ["{repository}:{workflow}"]},
  {"name": "runner", "issuer": "$RUNNER", "jwks": "$TG_TMP/runner-jwks.json",
   "audiences": ["trigguard"], "tenant": "acme", "role": "executor"}
]}
EOF

tg_keygen
tg_std_args main
TG_STD_ARGS=("${TG_STD_ARGS[@]/#$TG_POLICY/$TG_SRC/examples/policy.json}")
tg_start main -- "${TG_STD_ARGS[@]}" --oidc-config "$TG_TMP/oidc.json"

ghclaims() { # ghclaims REF ENVIRONMENT [WORKFLOW]: a GitHub Actions ID token's claims
    local wf=${3:-release}
    printf '{"iss":"%s","aud":"trigguard","sub":"repo:acme/app:environment:%s","repository":"acme/app","repository_owner":"acme","ref":"%s","environment":"%s","workflow":"%s","actor":"octocat","run_id":"7"}' \
        "$GH" "$2" "$1" "$2" "$wf"
}
ghtoken() { jt sign --key "$TG_TMP/gh.pem" --kid gh-1 --claims "$(ghclaims "$@")"; }
# The body a release job sends. Its context carries what a caller could assert about itself
# (branch, ref, environment): the bundled rule reads none of it.
SHIP='{"surface":"deploy.release","action":"ship","context":{"target":"production","version":"1.4.2","branch":"main","ref":"refs/heads/main","environment":"production"}}'
ship() { # ship TOKEN [extra top-level members]
    tg_req POST /v1/evaluate -H "Authorization: Bearer $1" --json-body "${SHIP%\}}${2:-}}"
}

# ---- only the verified ref and environment reach the PERMIT -----------------------------------

MAIN=$(ghtoken refs/heads/main production)
ship "$MAIN"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['actorId'] == 'acme/app:release'" \
    "verified ref main + environment production: PERMIT, the actor is the token's"
tg_expect_py "j['receipt']['principal'] == {'issuer': '$GH', 'subject': 'repo:acme/app:environment:production'}" \
    "the receipt names the verified principal {issuer, subject}"
tg_save_receipt "$TG_TMP/main-receipt.json"
tg_jget EXEC 'j["receipt"]["executionId"]'
tg_jget RHASH 'j["receipt"]["requestHash"]'

ship "$(ghtoken refs/heads/feature-x production)"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'NO_MATCHING_POLICY'" \
    "a feature branch's token: DENY, though the body says branch main and ref refs/heads/main"
ship "$(ghtoken refs/heads/main staging)"
tg_expect_py "s == 200 and j['decision'] == 'DENY'" \
    "environment staging in the token: DENY, though the body says production"
ship tok-acme
tg_expect_py "s == 200 and j['decision'] == 'DENY'" \
    "a static token has no claims: the same body gets DENY"
ship "$MAIN" ',"principal":{"claims":{"ref":"refs/heads/main"}}'
tg_expect_error 400 invalid_request "a body cannot carry principal facts (unknown member)"

# ---- the receipt verifies offline, and a changed principal does not ---------------------------

tg_fetch_keys "$TG_TMP/keys.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/main-receipt.json" 2>&1)
tg_eq "$?:$out" "0:VALID" "trigguard verify: the OIDC caller's receipt is valid"
python3 - "$TG_TMP/main-receipt.json" "$TG_TMP/forged.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["principal"]["subject"] = "repo:acme/app:ref:refs/heads/feature-x"
json.dump(r, open(sys.argv[2], "w"))
PY
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/forged.json" 2>&1)
tg_ne "$?" 0 "trigguard verify: a receipt whose principal was rewritten is refused ($out)"

# ---- an idempotency key is its principal's --------------------------------------------------------

ship "$MAIN" ',"idempotency_key":"rel-1.4.2"'
tg_expect_status 200 "a PERMIT with an idempotency key"
FIRST=$(tg_body)
ship "$MAIN" ',"idempotency_key":"rel-1.4.2"'
tg_eq "$(tg_body)" "$FIRST" "the same token replays the same bytes"
PROD2=$(jt sign --key "$TG_TMP/gh.pem" --kid gh-1 \
    --claims "$(ghclaims refs/heads/main production | sed 's/environment:production"/environment:prod2"/')")
ship "$PROD2" ',"idempotency_key":"rel-1.4.2"'
tg_expect_error 409 idempotency_conflict "the same key, body and actor from another subject: 409, not the other's receipt"

# ---- an executor with its own ID token redeems the receipt once ---------------------------------

EXECTOK=$(jt sign --key "$TG_TMP/runner.pem" --kid run-1 --claims "{\"iss\":\"$RUNNER\",\"aud\":\"trigguard\",\"sub\":\"deploy-runner\"}")
tg_req POST "/v1/receipts/$EXEC/redeem" -H "Authorization: Bearer $MAIN" \
    --json-body "{\"request_hash\":\"$RHASH\"}"
tg_expect_error 403 role_not_allowed "the caller's own token cannot redeem"
tg_req POST "/v1/receipts/$EXEC/redeem" -H "Authorization: Bearer $EXECTOK" \
    --json-body "{\"request_hash\":\"$RHASH\"}"
tg_expect_py "s == 200 and j['redeemed'] is True and j['execution_id'] == '$EXEC'" \
    "an executor authenticated by its ID token redeems the PERMIT"
tg_req POST "/v1/receipts/$EXEC/redeem" -H "Authorization: Bearer $EXECTOK" \
    --json-body "{\"request_hash\":\"$RHASH\"}"
tg_expect_error 409 receipt_already_redeemed "a second redemption"
grep -q '"issuer":"https://runner.test"' "$(tg_logfile main)"
tg_check "the redemption's access line names the executor's issuer" test $? -eq 0

# ---- the OIDC part reloads under load: no JWT caller's request fails because of it -------------

PID=$(tg_pid main)
cp "$TG_TMP/oidc.json" "$TG_TMP/oidc-full.json"
python3 - "$TG_TMP/oidc.json" "$TG_TMP/oidc-github-only.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["issuers"] = [i for i in c["issuers"] if i["name"] == "github"]
json.dump(c, open(sys.argv[2], "w"))
PY
LOAD_OUT=$TG_TMP/load-statuses
(
    for i in $(seq 1 300); do
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 -X POST "$TG_URL/decide" \
            -H "Authorization: Bearer $MAIN" -H 'Content-Type: application/json' \
            --data-binary "$SHIP" || echo "curl-failed"
    done >"$LOAD_OUT"
) &
LOADER=$!
RELOADS=0
for round in 1 2 3 4 5 6; do
    if [ $((round % 2)) -eq 1 ]; then src=$TG_TMP/oidc-github-only.json; else src=$TG_TMP/oidc-full.json; fi
    cp "$src" "$TG_TMP/oidc.json"
    before=$(curl -s --max-time 5 "$TG_URL/version" | jq -c '.last_reload.at // ""')
    kill -HUP "$PID"
    for i in $(seq 1 100); do
        after=$(curl -s --max-time 5 "$TG_URL/version" | jq -c '.last_reload.at // ""')
        [ "$after" != "$before" ] && { RELOADS=$((RELOADS + 1)); break; }
        sleep 0.1
    done
done
wait "$LOADER"
tg_eq "$RELOADS" 6 "six reloads, the runner issuer removed and added back in turn"
tg_eq "$(sort "$LOAD_OUT" | uniq -c | awk '{printf "%s:%s ", $2, $1}')" "200:300 " \
    "300 JWT requests during the reloads: every one answered 200"
curl -s --max-time 5 "$TG_URL/version" | jq -e '.last_reload.result == "ok"' >/dev/null
tg_check "the last reload reports ok" test $? -eq 0
tg_req POST /decide -H "Authorization: Bearer $EXECTOK" --json-body "$SHIP"
tg_expect_error 403 role_not_allowed "the runner issuer is back after the reloads (its executor is known, and may not decide)"

tg_stop main
tg_done
