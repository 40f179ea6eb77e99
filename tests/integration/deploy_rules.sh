#!/usr/bin/env bash
# deploy_rules.sh — deploy/ (issue 24): the Prometheus rules pass `promtool check rules` and
# their unit tests (`promtool test rules`); the Grafana dashboard is valid JSON of the expected
# shape and every one of its PromQL expressions parses; and every metric name the rules and
# the dashboard use is one a real daemon exports: a daemon with a shadow policy and an OIDC
# issuer (so that their families are there too) is sent requests, its /metrics passes
# `promtool check metrics`, and the names are compared with it. Skipped (77) only when
# promtool is missing and cannot be installed (the Debian package prometheus, scripts/deps
# test).
source "$(dirname "$0")/lib/daemon.sh"

RULES=$TG_SRC/deploy/prometheus/trigguard.rules.yml
RULES_TEST=$TG_SRC/deploy/prometheus/trigguard.rules.test.yml
DASH=$TG_SRC/deploy/grafana/trigguard.json
CHECK=$TG_PYLIB/deploy_check.py

if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    "$TG_SRC/scripts/deps" run prometheus >"$TG_TMP/deps.out" 2>&1 || true
fi
if ! command -v promtool >/dev/null 2>&1; then
    tg_log "SKIP: promtool is missing and could not be installed (apt-get install prometheus)"
    exit 77
fi
python3 -c 'import yaml' 2>/dev/null || tg_die "python3-yaml is needed (scripts/deps test)"

# ---- the rules --------------------------------------------------------------------------

tg_check "promtool check rules" promtool check rules "$RULES"
# promtool resolves rule_files against the test file's directory: run from anywhere.
tg_check "promtool test rules" promtool test rules "$RULES_TEST"

# Every alert of the rules has a unit test that expects it to fire and one that expects
# nothing (exp_alerts: []), and every alert has for:, severity, summary, description, runbook.
tg_check "each alert: tested firing and quiet, for:, severity and annotations" python3 - "$RULES" "$RULES_TEST" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
tests = yaml.safe_load(open(sys.argv[2]))
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
fires, quiet = set(), set()
for t in tests["tests"]:
    for a in t.get("alert_rule_test", []):
        (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
bad = []
for r in alerts:
    n = r["alert"]
    if n not in fires: bad.append(n + ": no test where it fires")
    if n not in quiet: bad.append(n + ": no test where it stays quiet")
    if "for" not in r: bad.append(n + ": no for:")
    if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
        bad.append(n + ": severity is not critical, warning or info")
    for k in ("summary", "description", "runbook"):
        if not r.get("annotations", {}).get(k): bad.append(n + ": no " + k)
    if "docs/OPERATIONS.md" not in r.get("annotations", {}).get("runbook", ""):
        bad.append(n + ": the runbook does not name docs/OPERATIONS.md")
if len(alerts) < 11: bad.append("only %d alerts" % len(alerts))
for b in bad: print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# ---- the dashboard ----------------------------------------------------------------------

tg_check "dashboard is JSON of the expected shape" python3 "$CHECK" dashboard "$DASH"
tg_check "dashboard expressions as rules" python3 "$CHECK" exprs "$DASH" "$TG_TMP/dash-exprs.yml"
tg_check "every dashboard expression parses (promtool check rules)" \
    promtool check rules "$TG_TMP/dash-exprs.yml"

# ---- the names, against a live daemon ---------------------------------------------------

tg_keygen
tg_std_args main
python3 "$TG_PYLIB/jwt_tool.py" keygen --kind ed --out "$TG_TMP/oidc.pem" ||
    tg_die "jwt_tool keygen (python3-cryptography, scripts/deps test)"
python3 "$TG_PYLIB/jwt_tool.py" jwks --out "$TG_TMP/oidc-jwks.json" oidc-1="$TG_TMP/oidc.pem" ||
    tg_die "jwt_tool jwks"
tg_start main -- "${TG_STD_ARGS[@]}" --shadow-policy "$TG_POLICY" \
    --oidc "ci=https://ci.test" --oidc-jwks "ci=$TG_TMP/oidc-jwks.json" \
    --oidc-audience ci=trigguard --oidc-tenant-claim ci=org

for kind in permit deny silence example; do
    tg_post /v1/evaluate "$(tg_req_json "$kind")"
    tg_check "evaluate $kind answered" test "$TG_STATUS" != 000
done
tg_req POST /v1/evaluate --json-body "$(tg_req_json permit)" # no token: 401
tg_expect_status 401 "evaluate without a token"

tg_req GET /metrics
tg_expect_status 200 "GET /metrics"
cp "$TG_BODY_FILE" "$TG_TMP/metrics.txt"
tg_check "promtool check metrics accepts /metrics" \
    bash -c 'promtool check metrics <"$1" >"$2" 2>&1' _ "$TG_TMP/metrics.txt" "$TG_TMP/lint.out"
[ -s "$TG_TMP/lint.out" ] && tg_log "promtool check metrics: $(head -c 2000 "$TG_TMP/lint.out")"
tg_check "every metric name of the rules and the dashboard is exported" \
    bash -c 'python3 "$1" names "$2" "$3" "$4" >"$5"' _ "$CHECK" "$RULES" "$DASH" \
    "$TG_TMP/metrics.txt" "$TG_TMP/names.txt"
tg_log "$(wc -l <"$TG_TMP/names.txt") metric names checked against /metrics"

# The check itself catches a name the daemon does not export.
sed 's/trigguard_ledger_stalled == 1/trigguard_ledger_stuck == 1/' "$RULES" >"$TG_TMP/bad.rules.yml"
tg_check "the name check refuses an unknown metric" \
    bash -c '! python3 "$1" names "$2" "$3" "$4" >/dev/null 2>&1' _ "$CHECK" \
    "$TG_TMP/bad.rules.yml" "$DASH" "$TG_TMP/metrics.txt"

tg_stop main
tg_done
