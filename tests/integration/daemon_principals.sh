#!/usr/bin/env bash
# daemon_principals.sh — tokens bound to principals (tokens file "subject", "actors",
# "surfaces", "role") against the real daemon: the 403s, the single-actor default, old
# entries and TRIGGUARD_API_KEYS unchanged, the subject in the request log, and the
# refusals at start (a mistyped observe, unknown members).
source "$(dirname "$0")/lib/daemon.sh"

sha() { printf %s "$1" | sha256sum | cut -c1-64; }

tg_keygen
TOKENS=$TG_TMP/tokens.json
cat >"$TOKENS" <<EOF
[
  {"tenant": "acme", "token_sha256": "$(sha tok-old)"},
  {"tenant": "acme", "token_sha256": "$(sha tok-bill)", "subject": "billing-bot",
   "actors": ["agent.billing"], "surfaces": ["payments.charge"]},
  {"tenant": "acme", "token_sha256": "$(sha tok-multi)", "subject": "payers",
   "actors": ["agent.billing", "agent.treasury"]},
  {"tenant": "acme", "token_sha256": "$(sha tok-appr)", "subject": "reviewer", "role": "approver"},
  {"tenant": "acme", "token_sha256": "$(sha tok-exec)", "subject": "runner", "role": "executor"},
  {"tenant": "acme", "token_sha256": "$(sha tok-admin)", "subject": "ops", "role": "admin",
   "observe": false},
  {"tenant": "acme", "token_sha256": "$(sha tok-caller)", "subject": "explicit-caller", "role": "caller"}
]
EOF
chmod 600 "$TOKENS"
tg_std_args main
tg_start main TRIGGUARD_API_KEYS="beta:tok-beta" -- "${TG_STD_ARGS[@]}" --tokens "$TOKENS"
LOG=$(tg_logfile main)

as() { # as TOKEN PATH JSON [curl args]
    local tok=$1 path=$2 body=$3
    shift 3
    tg_req POST "$path" -H "Authorization: Bearer $tok" --json-body "$body" "$@"
}
records() {
    curl -s --max-time 5 "$TG_URL/metrics" | awk '/^trigguard_ledger_records_total/ {print $2}'
}
NOACTOR='{"surface":"payments.charge","action":"transfer_funds","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false}}'
TREASURY='{"surface":"payments.charge","action":"transfer_funds","actor":"agent.treasury","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false}}'

# ---- old-format entries and TRIGGUARD_API_KEYS keep working ----------------------------

as tok-old /v1/evaluate "$(tg_req_json permit)"
tg_expect_status 200 "old-format entry: evaluate"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['tenantId'] == 'acme'" "old-format entry: PERMIT for tenant acme"
tg_jget OLD_HASH 'j["request_hash"]'
as tok-old /v1/evaluate "$(tg_req_json example)"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['actorId'] == 'someone'" "old-format entry: any surface, any actor"
as tok-old /v1/evaluate "$NOACTOR"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'ACTOR_NOT_AUTHORIZED' and j['receipt']['actorId'] == ''" \
    "old-format entry: no actor stays no actor (the policy denies it)"
as tok-beta /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['tenantId'] == 'beta'" "TRIGGUARD_API_KEYS beside --tokens: unchanged"

# ---- the single-actor default ----------------------------------------------------------

as tok-bill /v1/evaluate "$NOACTOR"
tg_expect_status 200 "bound token, no actor"
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['actorId'] == 'agent.billing'" \
    "bound token, no actor: the token's single actor decides and is signed"
tg_jget BILL_HASH 'j["request_hash"]'
tg_eq "$BILL_HASH" "$OLD_HASH" "the defaulted actor hashes like the same actor sent by the caller"
as tok-bill /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT' and j['request_hash'] == '$OLD_HASH'" "bound token naming its own actor"
as tok-bill /decide "$NOACTOR"
tg_expect_py "j['decision'] == 'PERMIT'" "/decide: the default actor too"
as tok-bill /v1/evaluate '{"tool":"stripe.charge","args":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.1}}'
tg_expect_py "j['decision'] == 'PERMIT' and j['receipt']['surface'] == 'payments.charge'" \
    "a tool mapped to an allowed surface is allowed"

# ---- actor and surface refusals: 403, no decision, nothing recorded or consumed ---------

BEFORE=$(records)
as tok-bill /v1/evaluate "${TREASURY%\}},\"idempotency_key\":\"k-refused\",\"nonce\":\"n-refused\"}"
tg_expect_error 403 actor_not_allowed "bound token, another actor"
tg_expect_py "'decision' not in j and 'receipt' not in j and 'agent.treasury' in j['message']" "actor refusal is not a decision"
as tok-bill /execute "$TREASURY"
tg_expect_error 403 actor_not_allowed "/execute: actor refusal is an error body, not a decision"
tg_expect_py "'decision' not in j" "/execute 403 without a decision"
as tok-bill /decide "$TREASURY"
tg_expect_error 403 actor_not_allowed "/decide: actor refusal"
as tok-bill /v1/evaluate '{"surface":"payments.charge","actorId":"agent.treasury","context":{"amount":1,"currency":"USD"}}'
tg_expect_error 403 actor_not_allowed "the actorId alias is checked too"
as tok-bill /v1/evaluate '{"surface":"payments.charge","actor":"","context":{"amount":1,"currency":"USD"}}'
tg_expect_error 403 actor_not_allowed "an empty actor is not the bound one"
as tok-bill /v1/evaluate "$(tg_req_json example)"
tg_expect_error 403 surface_not_allowed "bound token, another surface"
tg_expect_py "'example' in j['message']" "the message names the surface"
as tok-bill /decide "$(tg_req_json example)"
tg_expect_error 403 surface_not_allowed "/decide: surface refusal"
as tok-bill /execute '{"tool":"example.echo","actor":"agent.billing"}'
tg_expect_error 403 surface_not_allowed "a tool mapped to another surface is refused"
as tok-bill /v1/evaluate '{"surface":"no.such.surface","actor":"agent.billing"}'
tg_expect_error 400 unknown_surface "an unknown surface is still 400 unknown_surface"
tg_eq "$(records)" "$BEFORE" "refused requests wrote no ledger record"
as tok-bill /v1/evaluate "${NOACTOR%\}},\"idempotency_key\":\"k-refused\",\"nonce\":\"n-refused\"}"
tg_expect_status 200 "key and nonce of a refused request are free for the next one"
tg_expect_py "j['decision'] == 'PERMIT' and h.get('idempotent-replayed') is None" "a fresh decision, not a replay"

# ---- several actors: one must be named --------------------------------------------------

as tok-multi /v1/evaluate "$NOACTOR"
tg_expect_error 400 invalid_request "several actors and none named"
tg_expect_py "'several actors' in j['message']" "the 400 says why"
as tok-multi /v1/evaluate "$TREASURY"
tg_expect_py "j['decision'] == 'DENY' and j['receipt']['actorId'] == 'agent.treasury'" "several actors: a named one is decided"
as tok-multi /v1/evaluate "$(tg_req_json example)"
tg_expect_error 403 actor_not_allowed "several actors: another one is refused"
as tok-multi /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT'" "several actors, no surface binding: payments.charge"
tg_jget EXEC_ID 'j["execution_id"]'

# ---- roles ----------------------------------------------------------------------------

for path in /v1/evaluate /execute /decide; do
    as tok-appr "$path" "$(tg_req_json permit)"
    tg_expect_error 403 role_not_allowed "approver on $path"
    tg_expect_py "'approver' in j['message'] and 'decision' not in j" "approver on $path: not a decision"
    as tok-exec "$path" "$(tg_req_json permit)"
    tg_expect_error 403 role_not_allowed "executor on $path"
done
as tok-admin /v1/evaluate "$(tg_req_json permit)"
tg_expect_py "j['decision'] == 'PERMIT'" "admin may ask for decisions"
as tok-caller /execute "$(tg_req_json permit)"
tg_expect_status 200 "an explicit caller role may ask for decisions"
tg_req GET "/v1/receipts/$EXEC_ID" -H "Authorization: Bearer tok-exec"
tg_expect_status 200 "executor reads its tenant's receipt"
tg_req GET "/v1/receipts/$EXEC_ID" -H "Authorization: Bearer tok-bill"
tg_expect_status 200 "a caller of the same tenant reads it"
tg_req GET "/v1/receipts/$EXEC_ID" -H "Authorization: Bearer tok-appr"
tg_expect_error 403 role_not_allowed "approver may not read receipts"
tg_req GET "/v1/receipts/$EXEC_ID" -H "Authorization: Bearer tok-beta"
tg_expect_error 404 not_found "another tenant's receipt stays 404"
as tok-nobody /v1/evaluate "$(tg_req_json permit)"
tg_expect_error 401 unauthorized "an unknown token is still 401"

# ---- the request log names the subject -------------------------------------------------

as tok-bill /v1/evaluate "$NOACTOR" -H "X-Request-Id: itest-subject-1"
as tok-old /v1/evaluate "$NOACTOR" -H "X-Request-Id: itest-subject-2"
as tok-appr /v1/evaluate "$NOACTOR" -H "X-Request-Id: itest-subject-3"
tg_req GET "/v1/receipts/$EXEC_ID" -H "Authorization: Bearer tok-exec" -H "X-Request-Id: itest-subject-4"
sleep 0.3
logline() { grep "\"request_id\":\"$1\"" "$LOG" | grep '"event":"request"' | tail -1; }
tg_check "log line of a bound token names its subject" \
    bash -c "grep -q '\"subject\":\"billing-bot\"' <<<'$(logline itest-subject-1)'"
tg_check "log line of an old entry names the derived subject" \
    bash -c "grep -q '\"subject\":\"acme:$(sha tok-old | cut -c1-8)\"' <<<'$(logline itest-subject-2)'"
tg_check "log line of a refused request names its subject and 403" \
    bash -c "grep -q '\"subject\":\"reviewer\".*\"status\":403' <<<'$(logline itest-subject-3)'"
tg_check "log line of a receipt read names tenant and subject" \
    bash -c "grep -q '\"tenant\":\"acme\",\"subject\":\"runner\"' <<<'$(logline itest-subject-4)'"
tg_check "no token reaches the log" bash -c "! grep -q 'tok-bill\|tok-old\|tok-appr' '$LOG'"
tg_stop main

# ---- refused at start ------------------------------------------------------------------

refused() { # refused LABEL NEEDLE JSON
    printf '%s' "$3" >"$TG_TMP/bad.json"
    "$TG_BIN" serve --check-config --policy "$TG_POLICY" --key "$TG_KEY" \
        --ledger "$TG_TMP/ledger-check" --tokens "$TG_TMP/bad.json" >"$TG_TMP/bad.out" 2>&1
    local rc=$?
    tg_eq "$rc" 2 "$1: exit 2"
    tg_check "$1: says \"$2\"" grep -qF -- "$2" "$TG_TMP/bad.out"
}
H=$(sha tok-x)
refused "observe: a string" "[0].observe: expected true or false" "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"observe\":\"yes\"}]"
refused "unknown member" "unknown member \\\"actor\\\"" "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"actor\":\"x\"}]"
refused "unknown role" "[0].role" "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"role\":\"root\"}]"
refused "duplicate subject" "duplicate subject \\\"s\\\"" "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"subject\":\"s\"},{\"tenant\":\"b\",\"token_sha256\":\"$(sha tok-y)\",\"subject\":\"s\"}]"
refused "empty actors" "[0].actors" "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"actors\":[]}]"
printf '%s' "[{\"tenant\":\"a\",\"token_sha256\":\"$H\",\"observe\":true,\"role\":\"executor\",\"subject\":\"x\"}]" >"$TG_TMP/good.json"
"$TG_BIN" serve --check-config --policy "$TG_POLICY" --key "$TG_KEY" --ledger "$TG_TMP/ledger-check" \
    --tokens "$TG_TMP/good.json" >"$TG_TMP/good.out" 2>&1
tg_eq "$?" 0 "--check-config accepts a bound entry"

tg_done
