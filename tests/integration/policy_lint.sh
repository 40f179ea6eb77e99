#!/usr/bin/env bash
# policy_lint.sh — `policy lint` and `policy check --strict` (findings, --json, --previous,
# exit codes), `check` strict by default, and serve: a bundle with lint errors is refused at
# start (the finding in the log) and on SIGHUP (the old policy keeps answering, /version
# and /metrics say the reload failed and why). Issue 21.
source "$(dirname "$0")/lib/daemon.sh"
tg_keygen

D=$TG_TMP/lint
mkdir -p "$D"
T=$TG_BIN

# payments.charge with the issue's typo (context.amout): compiles, but the cap never holds.
python3 - "$TG_POLICY" "$D/typo.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["version"] = "itest-typo"
s = p["surfaces"]["payments.charge"]
s.setdefault("rules", []).insert(0, {"id": "cap", "effect": "deny", "reason": "AMOUNT_LIMIT_EXCEEDED",
    "when": [{"field": "context.amout", "op": "gt", "value": 10000}]})
json.dump(p, open(sys.argv[2], "w"))
PY
# the test policy with a warning only (a non-integer amount)
python3 - "$TG_POLICY" "$D/warn.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["version"] = "itest-warn"
p["surfaces"]["payments.charge"].setdefault("rules", []).insert(0, {"id": "odd", "effect": "deny",
    "reason": "ODD_AMOUNT", "when": [{"field": "context.amount", "op": "eq", "value": 0.5}]})
json.dump(p, open(sys.argv[2], "w"))
PY

run() { # run LABEL WANT_RC args...: $OUT (stdout), $ERR (stderr)
    local label=$1 want=$2
    shift 2
    "$T" "$@" >"$D/out" 2>"$D/err"
    local rc=$?
    OUT=$(cat "$D/out")
    ERR=$(cat "$D/err")
    tg_eq "$rc" "$want" "$label: exit status (stderr: $(head -c 300 "$D/err"))"
}

# ---- the CLI ---------------------------------------------------------------------------

run "lint: the bundled policy" 0 policy lint "$TG_SRC/examples/policy.json"
tg_check "lint: the bundled policy has no findings: $OUT" grep -q ': 0 errors, 0 warnings' <<<"$OUT"
run "lint: the test policy" 0 policy lint "$TG_POLICY"

run "lint: the typo" 2 policy lint "$D/typo.json"
tg_check "lint: the finding names code and path: $OUT" grep -q \
    '^error undeclared_field surfaces.payments.charge.rules\[0\].when\[0\].field: context.amout ' <<<"$OUT"
tg_check "lint: a summary line" grep -q ': 1 errors, 0 warnings' <<<"$OUT"
run "lint --json: the typo" 2 policy lint --json "$D/typo.json"
tg_check "lint --json: one document with the finding" python3 -c '
import json, sys
j = json.loads(sys.argv[1])
f = j["findings"]
assert j["errors"] == 1 and j["warnings"] == 0 and len(f) == 1, j
assert f[0] == {"severity": "error", "code": "undeclared_field",
                "path": "surfaces.payments.charge.rules[0].when[0].field", "message": f[0]["message"]}, f
' "$OUT"
run "lint from stdin" 2 policy lint - <"$D/typo.json"

run "lint: a warning only" 0 policy lint "$D/warn.json"
tg_check "lint: the warning is printed: $OUT" grep -q '^warning non_integer_amount surfaces.payments.charge.rules\[0\].when\[0\].value: ' <<<"$OUT"

# --previous: the same version with other content
sed 's/"itest-warn"/"itest-1"/' "$D/warn.json" >"$D/reuse.json"
run "lint --previous: version reused" 2 policy lint --previous "$TG_POLICY" "$D/reuse.json"
tg_check "lint --previous: version_reused at version: $OUT" grep -q '^error version_reused version: ' <<<"$OUT"
run "lint --previous: same bundle again" 0 policy lint --previous "$TG_POLICY" "$TG_POLICY"
run "lint --previous: a missing file" 2 policy lint --previous "$D/nope.json" "$TG_POLICY"
run "lint: a bundle that does not compile" 2 policy lint "$TG_SRC/docs/API.md"
run "lint: unknown option" 2 policy lint --nope "$TG_POLICY"

run "check: the typo compiles" 0 policy check "$D/typo.json"
run "check --strict: the typo is refused" 2 policy check --strict "$D/typo.json"
tg_check "check --strict: the finding on stderr: $ERR" grep -q 'undeclared_field' <<<"$ERR"
run "check --strict: a warning passes" 0 policy check --strict "$D/warn.json"
tg_check "check --strict: the warning on stderr: $ERR" grep -q '^warning non_integer_amount' <<<"$ERR"

# `check` (the offline decision) is strict by default
# (the issue's bundle: a cap on a typo'd field and a permit for the billing agent)
cat >"$D/issue.json" <<'EOF'
{"version": "issue-21", "surfaces": {"payments.charge": {"tier": 1,
  "required_context": {"amount": "number", "currency": "string"},
  "rules": [{"id": "cap", "effect": "deny", "reason": "AMOUNT_LIMIT_EXCEEDED",
             "when": [{"field": "context.amout", "op": "gt", "value": 1000000}]},
            {"id": "billing", "effect": "permit",
             "when": [{"field": "actor", "op": "eq", "value": "agent.billing"}]}]}}}
EOF
sed 's/context.amout/context.amount/' "$D/issue.json" >"$D/fixed.json"
printf '{"surface":"payments.charge","action":"transfer","actor":"agent.billing","context":{"amount":4000000,"currency":"USD"}}' >"$D/big.json"
run "check: a strict-failing bundle is refused" 2 check --policy "$D/issue.json" "$D/big.json"
tg_check "check: says why: $ERR" grep -q 'undeclared_field' <<<"$ERR"
run "check --no-strict: the typo permits \$40,000" 0 check --no-strict --policy "$D/issue.json" "$D/big.json"
run "check: the fixed bundle denies it" 3 check --policy "$D/fixed.json" "$D/big.json"

# ---- serve: refused at start -------------------------------------------------------------

OUT=$(timeout 30 "$T" serve --policy "$D/typo.json" --key "$TG_KEY" --ledger "$TG_TMP/ledger-refused" \
    --port 0 --port-file "$D/port-refused" --log-format json 2>&1)
rc=$?
tg_ne "$rc" 0 "serve: a strict-failing bundle is refused at start"
tg_check "serve: the refusal names the finding: $(head -c 400 <<<"$OUT")" grep -q \
    'surfaces.payments.charge.rules\[0\].when\[0\].field: undeclared_field' <<<"$OUT"
tg_check "serve: a refused start writes no port file" test ! -e "$D/port-refused"
OUT=$(timeout 30 env TRIGGUARD_POLICY_STRICT= "$T" serve --check-config --policy "$D/typo.json" \
    --key "$TG_KEY" --ledger "$TG_TMP/ledger-refused" 2>&1)
tg_ne "$?" 0 "serve: an empty TRIGGUARD_POLICY_STRICT keeps the check on"
OUT=$(timeout 30 "$T" serve --check-config --policy-strict=false --policy "$D/typo.json" \
    --key "$TG_KEY" --ledger "$TG_TMP/ledger-refused" 2>&1)
tg_eq "$?" 0 "serve --policy-strict=false: the bundle is taken ($(head -c 300 <<<"$OUT"))"

# ---- serve: refused on SIGHUP, the old policy keeps answering -----------------------------

cp "$TG_POLICY" "$D/live.json"
tg_std_args hup
ARGS=("${TG_STD_ARGS[@]}")
for i in "${!ARGS[@]}"; do [ "${ARGS[$i]}" == "$TG_POLICY" ] && ARGS[$i]=$D/live.json; done
tg_start hup -- "${ARGS[@]}"
PID=$(tg_pid hup)
OLD_HASH=$(curl -s --max-time 5 "$TG_URL/version" | jq -r .policy_hash)

tg_req GET /version
tg_expect_py "j['policy']['version'] == 'itest-1' and j['policy']['hash'] == '$OLD_HASH' and j['policy']['last_reload'] is None and j['policy']['loaded_at'].endswith('Z')" \
    "version: the policy member before any reload"
metric() { curl -s --max-time 5 "$TG_URL/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? "absent" : v }'; }
tg_eq "$(metric trigguard_policy_last_reload_success)" 1 "metrics: last reload success 1 before any"
tg_eq "$(metric trigguard_policy_last_reload_timestamp_seconds)" 0.000 "metrics: no reload timestamp yet"

hup() { # hup: SIGHUP, then wait until /version shows a new last reload
    local before after
    before=$(curl -s --max-time 5 "$TG_URL/version" | jq -c '.last_reload.at // ""')
    kill -HUP "$PID"
    for _ in $(seq 1 150); do
        after=$(curl -s --max-time 5 "$TG_URL/version" | jq -c '.last_reload.at // ""')
        [ "$after" != "$before" ] && return 0
        sleep 0.1
    done
    tg_fail "SIGHUP: no new last_reload within 15 s"
}

cp "$D/typo.json" "$D/live.json"
hup
tg_req GET /version
tg_expect_py "j['policy_hash'] == '$OLD_HASH' and j['policy']['version'] == 'itest-1' and j['policy']['last_reload']['result'] == 'failed' and j['policy']['last_reload']['error_code'] == 'TG_ERR_POLICY_LINT' and 'undeclared_field' in j['policy']['last_reload']['error'] and 'rules[0].when[0].field' in j['policy']['last_reload']['error']" \
    "version: the refused reload, its code and path; the old policy loaded"
tg_post /v1/evaluate "$(tg_req_json permit ",\"nonce\":\"n$RANDOM$RANDOM\"")"
tg_expect_py "s == 200 and j['policy_version'] == 'itest-1'" "the old policy still answers"
tg_eq "$(metric trigguard_policy_last_reload_success)" 0 "metrics: last reload success 0"
tg_ne "$(metric trigguard_policy_last_reload_timestamp_seconds)" 0.000 "metrics: the reload's timestamp"
tg_eq "$(metric 'trigguard_reload_total{what="policy",result="failed"}')" 1 "metrics: one failed policy reload"
tg_check "the refusal is logged with the finding" grep -q 'policy_reload_failed.*undeclared_field' "$(tg_logfile hup)"

# the version reused with other content: refused too (the live policy is the previous one)
cp "$D/reuse.json" "$D/live.json"
hup
tg_req GET /version
tg_expect_py "j['policy_hash'] == '$OLD_HASH' and j['policy']['last_reload']['result'] == 'failed' and 'version_reused' in j['policy']['last_reload']['error']" \
    "version: a reused version is refused on reload"

# a good bundle (with a warning) is taken; the warning is logged
cp "$D/warn.json" "$D/live.json"
hup
tg_req GET /version
tg_expect_py "j['policy']['version'] == 'itest-warn' and j['policy_version'] == 'itest-warn' and j['policy']['last_reload']['result'] == 'ok' and 'error' not in j['policy']['last_reload']" \
    "version: the good bundle is loaded and the reload ok"
tg_eq "$(metric trigguard_policy_last_reload_success)" 1 "metrics: last reload success 1 again"
tg_check "the warning is logged" grep -q '"event":"policy_lint".*non_integer_amount' "$(tg_logfile hup)"

tg_stop hup
tg_done
