#!/usr/bin/env bash
# daemon_shadow.sh — --shadow-policy (issue 22): a candidate bundle decided beside the live one
# for every request; disagreements counted (trigguard_shadow_disagreements_total{surface,live,
# shadow}) and logged with both reasons; never an outcome changed; reloadable (part
# "shadow_policy"; a broken candidate keeps the previous one, and refuses a start). On
# /v1/evaluate, /execute and /decide. Also run on --store postgres (integration_pg_daemon_shadow).
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
metric() { # metric 'NAME{labels}': its value in /metrics, or 0
    curl -s --max-time 5 "$TG_URL/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? 0 : v }'
}
# The shadow: example denies, payments.charge's limit drops to 5000, deploy.release is gone.
SHADOW=$TG_TMP/shadow.json
python3 - "$TG_POLICY" "$SHADOW" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["version"] = "candidate-2"
p["surfaces"]["example"] = {"tier": 3, "default": {"effect": "deny", "reason": "CANDIDATE_SAYS_NO"}}
p["surfaces"]["payments.charge"]["rules"][1]["when"][1]["value"] = 5000
del p["surfaces"]["deploy.release"]
json.dump(p, open(sys.argv[2], "w"))
PY

# A broken candidate refuses the start: the operator asked for it, and it is not there.
printf '{"version": ' >"$TG_TMP/broken.json"
tg_std_args main
OUT=$(timeout 30 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve "${TG_STD_ARGS[@]}" \
    --shadow-policy "$TG_TMP/broken.json" --check-config 2>&1)
tg_eq "$?" 2 "a broken --shadow-policy refuses the configuration"
tg_check "the error names --shadow-policy: $OUT" grep -q -- '--shadow-policy' <<<"$OUT"

tg_start main -- "${TG_STD_ARGS[@]}" --shadow-policy "$SHADOW"
PID=$(tg_pid main)
LOG=$(tg_logfile main)

# Live PERMIT, shadow DENY: the answer is the live one, the disagreement is counted.
for i in 1 2 3; do
    tg_post /v1/evaluate "{\"surface\":\"example\",\"action\":\"echo\",\"actor\":\"me\",\"idempotency_key\":\"ex-$i\"}"
    tg_expect_status 200 "example $i"
    tg_eq "$(tg_body | jq -r .decision)" PERMIT "example $i: the live decision stands"
done
tg_eq "$(metric 'trigguard_shadow_disagreements_total{surface="example",live="PERMIT",shadow="DENY"}')" 3 \
    "three disagreements on example"
tg_eq "$(metric trigguard_shadow_decisions_total)" 3 "three shadow decisions"
tg_check "a log line names both reasons" grep -q '"event":"shadow_disagreement".*live PERMIT NO_POLICY_VIOLATION (policy itest-1), shadow DENY CANDIDATE_SAYS_NO (policy candidate-2)' "$LOG"

# Agreement: counted as decided, not as a disagreement.
tg_post /v1/evaluate '{"surface":"payments.charge","action":"charge","actor":"agent.billing","context":{"amount":100,"currency":"EUR"}}'
tg_eq "$(tg_body | jq -r .decision)" PERMIT "a small charge"
tg_eq "$(metric trigguard_shadow_decisions_total)" 4 "four shadow decisions"
tg_eq "$(metric 'trigguard_shadow_disagreements_total{surface="payments.charge",live="PERMIT",shadow="DENY"}')" 0 "no disagreement"
# The candidate's lower limit: /execute answers the live PERMIT, the shadow says DENY.
tg_post /execute '{"surface":"payments.charge","action":"charge","actor":"agent.billing","context":{"amount":7000,"currency":"EUR"}}'
tg_expect_status 200 "/execute under the live limit"
tg_eq "$(metric 'trigguard_shadow_disagreements_total{surface="payments.charge",live="PERMIT",shadow="DENY"}')" 1 \
    "the candidate's limit disagrees"
# A surface the candidate does not have: INVALID. /decide is shadowed too.
tg_post /decide '{"surface":"deploy.release","action":"ship","actor":"ci","context":{"target":"prod","version":"1"}}'
tg_expect_status 200 "/decide on a frozen surface"
tg_eq "$(tg_body | jq -r .decision)" DENY "live: frozen"
tg_eq "$(metric 'trigguard_shadow_disagreements_total{surface="deploy.release",live="DENY",shadow="INVALID"}')" 1 \
    "a surface the candidate lacks is INVALID"
# A replay is not decided again: nothing new for the shadow.
before=$(metric trigguard_shadow_decisions_total)
tg_post /v1/evaluate '{"surface":"example","action":"echo","actor":"me","idempotency_key":"ex-1"}'
tg_expect_status 200 "a replay"
tg_eq "$(metric trigguard_shadow_decisions_total)" "$before" "a replay is not shadowed"

# ---- reload: the candidate changes; a broken one keeps the last good one -------------------
python3 - "$TG_POLICY" "$SHADOW" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["version"] = "candidate-3"
json.dump(p, open(sys.argv[2], "w"))
PY
tg_hup "$PID"
tg_eq "$(curl -s "$TG_URL/version" | jq -r '.last_reload.reloaded | index("shadow_policy") != null')" true \
    "the reload took the new candidate"
tg_post /v1/evaluate '{"surface":"example","action":"echo","actor":"me"}'
tg_eq "$(metric 'trigguard_shadow_disagreements_total{surface="example",live="PERMIT",shadow="DENY"}')" 3 \
    "the new candidate agrees on example"
cp "$TG_TMP/broken.json" "$SHADOW"
tg_hup "$PID"
tg_eq "$(curl -s "$TG_URL/version" | jq -r '.last_reload.failed | has("shadow_policy")')" true \
    "a broken candidate fails its part of the reload"
tg_eq "$(curl -s "$TG_URL/version" | jq -r '.last_reload.reloaded | index("policy") != null')" true \
    "the live policy reloads all the same"
tg_eq "$(metric 'trigguard_reload_total{what="shadow_policy",result="failed"}')" 1 "counted as failed"
tg_post /v1/evaluate '{"surface":"example","action":"echo","actor":"me"}'
tg_expect_status 200 "still serving with the last good candidate"
tg_eq "$(metric trigguard_shadow_decisions_total)" "$((before + 2))" "the last good candidate still decides"
tg_stop main
tg_done
