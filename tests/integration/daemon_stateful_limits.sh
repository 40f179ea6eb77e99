#!/usr/bin/env bash
# daemon_stateful_limits.sh — stateful limits (docs/POLICY.md "Limits") on a real daemon: a
# daily sum cap raced by 40 concurrent requests (exactly 33 × 300 of 10,000 pass, the rest
# DENY with the limit's reason), an hourly count cap, an idempotent replay that never counts
# twice, /decide that reads totals without counting, separate totals per actor and tenant,
# the metrics, and totals that survive a restart and a SIGKILL (rebuilt from the ledger).
# (daemon_limits.sh is the protective request limits; this is the policy's limits.) Run
# again on --store postgres by integration_pg_daemon_stateful_limits.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
POLICY=$TG_TMP/limits_policy.json
cat >"$POLICY" <<'JSON'
{
  "version": "limits-1",
  "surfaces": {
    "payments.charge": {
      "tier": 2,
      "required_context": {"amount": "number"},
      "rules": [{"id": "small", "effect": "permit",
                 "when": [{"field": "context.amount", "op": "lte", "value": 5000}]}]
    },
    "deploy.prod": {"tier": 2, "default": "permit"},
    "deploy.shadow": {"tier": 2, "default": "permit", "mode": "observe"}
  },
  "limits": [
    {"id": "daily-spend", "surface": "payments.charge", "key": ["actor"],
     "sum": "context.amount", "window_s": 86400, "max": 10000,
     "reason": "DAILY_LIMIT_EXCEEDED"},
    {"id": "deploys", "surface": "deploy.prod", "key": ["actor"], "count": true,
     "window_s": 3600, "max": 3, "reason": "DEPLOY_RATE_EXCEEDED"},
    {"id": "shadow-deploys", "surface": "deploy.shadow", "key": ["actor"], "count": true,
     "window_s": 3600, "max": 1, "reason": "DEPLOY_RATE_EXCEEDED"}
  ]
}
JSON
tg_std_args lim
TG_STD_ARGS=("${TG_STD_ARGS[@]/#$TG_POLICY/$POLICY}")
tg_start lim -- "${TG_STD_ARGS[@]}"

pay() { # pay ACTOR AMOUNT [extra JSON members]
    printf '{"surface":"payments.charge","action":"pay","actor":"%s","context":{"amount":%s}%s}' \
        "$1" "$2" "${3:-}"
}
expect_decision() { # expect_decision DECISION REASON LABEL
    tg_expect_status 200 "$3"
    tg_expect_py "j['decision'] == '$1' and j['reason_code'] == '$2'" "$3: $1 $2"
}

# ---- 40 concurrent requests race one daily cap --------------------------------------
FIRST_KEY=$(python3 - "${TG_PORTS[lim]}" <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
reqs = [{"surface": "payments.charge", "action": "pay", "actor": "agent-1",
         "context": {"amount": 300}, "idempotency_key": "race-%d" % i} for i in range(40)]
res = tgclient.post_together(port, reqs, "tok-acme")
out = [json.loads(b) for _, _, b in res]
assert all(st == 200 for st, _, _ in res), [st for st, _, _ in res]
permits = [o for o in out if o["decision"] == "PERMIT"]
denies = [o for o in out if o["decision"] == "DENY"]
assert len(permits) == 33, "permits: %d" % len(permits)
assert len(denies) == 7, "denies: %d" % len(denies)
assert all(o["reason_code"] == "DAILY_LIMIT_EXCEEDED" for o in denies), denies[:2]
assert 300 * len(permits) <= 10000
# the first permitted key, for the replay below
print([r["idempotency_key"] for r, o in zip(reqs, out) if o["decision"] == "PERMIT"][0])
PY
)
tg_eq "$?" 0 "the race on the daily cap: exactly 33 PERMIT, 7 DENY DAILY_LIMIT_EXCEEDED"
tg_ne "$FIRST_KEY" "" "a permitted key of the race"

# ---- a replay never counts twice: 9,900 held, so 100 more still fits -----------------
tg_post /v1/evaluate "$(pay agent-1 300 ",\"idempotency_key\":\"$FIRST_KEY\"")"
tg_expect_header Idempotent-Replayed true "replay of $FIRST_KEY"
expect_decision PERMIT NO_POLICY_VIOLATION "replay of $FIRST_KEY"
tg_post /decide "$(pay agent-1 100)"
expect_decision PERMIT NO_POLICY_VIOLATION "/decide reads the total (9,900 + 100)"
tg_post /decide "$(pay agent-1 100)"
expect_decision PERMIT NO_POLICY_VIOLATION "/decide never counts"
tg_post /v1/evaluate "$(pay agent-1 100)"
expect_decision PERMIT NO_POLICY_VIOLATION "9,900 + 100 = the cap itself"
tg_post /v1/evaluate "$(pay agent-1 1)"
expect_decision DENY DAILY_LIMIT_EXCEEDED "one more unit over the cap"
tg_post /execute "$(pay agent-1 1)"
tg_expect_status 403 "/execute over the cap is blocked"
tg_post /decide "$(pay agent-1 1)"
expect_decision DENY DAILY_LIMIT_EXCEEDED "/decide over the cap"
# a request without the summed field is SILENCE before any limit
tg_post /v1/evaluate '{"surface":"payments.charge","action":"pay","actor":"agent-1","context":{}}'
expect_decision SILENCE MISSING_CONTEXT "no amount"

# ---- separate totals: another actor, another tenant ----------------------------------
tg_post /v1/evaluate "$(pay agent-2 300)"
expect_decision PERMIT NO_POLICY_VIOLATION "agent-2 has its own total"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(pay agent-1 5000)"
expect_decision PERMIT NO_POLICY_VIOLATION "tenant beta's agent-1 has its own total"

# ---- an hourly count cap -----------------------------------------------------------
for i in 1 2 3; do
    tg_post /v1/evaluate '{"surface":"deploy.prod","action":"deploy","actor":"ci"}'
    expect_decision PERMIT NO_POLICY_VIOLATION "deploy $i of 3"
done
tg_post /v1/evaluate '{"surface":"deploy.prod","action":"deploy","actor":"ci"}'
expect_decision DENY DEPLOY_RATE_EXCEEDED "deploy 4 of 3"

# ---- observe mode reads totals but never reserves: the cap of 1 is never spent ---------
for i in 1 2 3; do
    tg_post /v1/evaluate '{"surface":"deploy.shadow","action":"deploy","actor":"ci"}'
    tg_expect_py "j['would_decision'] == 'PERMIT'" "observed deploy $i: would PERMIT (never counted)"
done

tg_req GET /metrics
tg_check "metrics: limit denials by surface and limit" python3 -c '
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
m = lambda name, **labels: tgclient.metric(s, name, **labels)
assert m("trigguard_limit_denials_total", surface="payments.charge", limit="daily-spend") == 10
assert m("trigguard_limit_denials_total", surface="deploy.prod", limit="deploys") == 1
assert m("trigguard_limit_reservations_total", result="full") == 0
assert m("trigguard_limit_reservations_total", result="error") == 0' "$TG_BODY_FILE"

# ---- a PERMIT whose record never becomes durable gives its reservation back -------------
# (file backend: a file-size limit on the running daemon makes the ledger refuse the write,
# as daemon_ledger_failure.sh does; agent-9 then still has its whole cap)
if [ "${TG_TEST_STORE:-file}" = file ]; then
    pid=$(tg_pid lim)
    seg=$TG_TMP/ledger-lim/ledger-000001.tgl
    tg_check "prlimit stops the ledger at its current size" \
        prlimit --pid "$pid" --fsize="$(stat -c %s "$seg")":unlimited
    tg_post /v1/evaluate "$(pay agent-9 5000)"
    tg_expect_error 503 ledger_unavailable "a PERMIT the ledger cannot record"
    tg_post /v1/evaluate "$(pay agent-9 5000)"
    tg_expect_error 503 ledger_unavailable "and another"
    tg_check "prlimit lifts the limit" prlimit --pid "$pid" --fsize=unlimited:unlimited
    tg_check "/readyz is 200 again" tg_wait_status /readyz 200 100 0.1
    tg_post /v1/evaluate "$(pay agent-9 5000)"
    expect_decision PERMIT NO_POLICY_VIOLATION "agent-9: the refused requests were released (5,000)"
    tg_post /v1/evaluate "$(pay agent-9 5000)"
    expect_decision PERMIT NO_POLICY_VIOLATION "agent-9: 10,000, the cap"
fi

# ---- totals survive a restart (rebuilt from the ledger) and a SIGKILL -----------------
tg_stop lim
tg_start lim2 -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(pay agent-1 1)"
expect_decision DENY DAILY_LIMIT_EXCEEDED "after a restart: agent-1 still at its cap"
tg_post /v1/evaluate "$(pay agent-2 4700)"
expect_decision PERMIT NO_POLICY_VIOLATION "after a restart: agent-2 at 300 + 4,700"
tg_post /v1/evaluate '{"surface":"deploy.prod","action":"deploy","actor":"ci"}'
expect_decision DENY DEPLOY_RATE_EXCEEDED "after a restart: deploys still counted"
kill -KILL "$(tg_pid lim2)"
wait "$(tg_pid lim2)" 2>/dev/null
unset "TG_PIDS[lim2]"
tg_start lim3 -- "${TG_STD_ARGS[@]}"
tg_post /v1/evaluate "$(pay agent-2 5000)"
expect_decision PERMIT NO_POLICY_VIOLATION "after SIGKILL: agent-2 at 5,000 + 5,000"
tg_post /v1/evaluate "$(pay agent-2 1)"
expect_decision DENY DAILY_LIMIT_EXCEEDED "after SIGKILL: agent-2 at its cap"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(pay agent-1 5000)"
expect_decision PERMIT NO_POLICY_VIOLATION "after SIGKILL: beta's agent-1 at 5,000 + 5,000"
tg_stop lim3
tg_done
