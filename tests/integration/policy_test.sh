#!/usr/bin/env bash
# policy_test.sh — `trigguard policy test` (issue 21): the bundled policy's tests pass with
# full rule coverage; deliberate failures give the exact summary, exit 1 and the explain;
# coverage numbers; bad test files exit 2 naming the problem; `check --explain`.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_SRC:?TG_SRC must point at the repository root}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# run WANT_EXIT NAME ARGS... — stdout in $tmp/out, stderr in $tmp/err.
run() {
    local want=$1 name=$2
    shift 2
    checks=$((checks + 1))
    local rc=0
    "$TG_BIN" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit $rc, want $want; stdout: $(head -c 600 "$tmp/out"); stderr: $(head -c 400 "$tmp/err")"
        return 1
    fi
    return 0
}

# has FILE REGEX NAME — a line of FILE matches the extended regex.
has() {
    checks=$((checks + 1))
    grep -Eq -- "$2" "$1" || fail "$3: no /$2/ in: $(head -c 800 "$1")"
}

command -v jq >/dev/null || { echo "FAIL: policy_test.sh needs jq" >&2; exit 1; }

# 1. The bundled policy's tests: all pass, every rule covered; the bundle is found beside
#    the tests file (X.tests.jsonl tests X.json) when --policy is not given.
cp "$TG_SRC/examples/policy.json" "$tmp/bundled.json"
cp "$TG_SRC/examples/policy.tests.jsonl" "$tmp/bundled.tests.jsonl"
if run 0 "bundled tests" policy test --coverage "$tmp/bundled.tests.jsonl"; then
    has "$tmp/out" '^rules: ([0-9]+)/\1 covered \(100%\)$' "bundled tests cover every rule"
    checks=$((checks + 1))
    tail -n 1 "$tmp/out" | grep -Eq '^[1-9][0-9]* passed, 0 failed$' ||
        fail "bundled summary line: $(tail -n 1 "$tmp/out")"
fi

# 2. A small policy and a tests file with deliberate failures.
cat >"$tmp/pay.json" <<'JSON'
{"version": "t1",
 "surfaces": {
  "pay": {"tier": 2, "required_context": {"amount": "number"},
   "rules": [
    {"id": "too-big", "effect": "deny", "reason": "TOO_BIG",
     "when": [{"field": "context.amount", "op": "gt", "value": 1000}]},
    {"id": "small-ok", "effect": "permit",
     "when": [{"field": "context.amount", "op": "lte", "value": 100},
              {"field": "actor", "op": "in", "value": ["a", "b"]}]},
    {"id": "never-used", "effect": "permit",
     "when": [{"field": "actor", "op": "eq", "value": "nobody"}]}]},
  "misc": {"tier": 3, "default": "permit"}}}
JSON
cat >"$tmp/pay.tests.jsonl" <<'JSON'
// three pass, two fail on purpose
{"name": "small by a", "request": {"surface": "pay", "actor": "a", "context": {"amount": 50}}, "expect": {"decision": "PERMIT", "rule": "small-ok"}}
{"name": "big", "request": {"surface": "pay", "actor": "a", "context": {"amount": 5000}}, "expect": {"decision": "DENY", "reason_code": "TOO_BIG", "rule": "too-big"}}

{"name": "medium is wrongly expected to pass", "request": {"surface": "pay", "actor": "a", "context": {"amount": 500}}, "expect": {"decision": "PERMIT"}}
{"name": "wrong reason", "request": {"surface": "pay", "actor": "c", "context": {"amount": 5}}, "expect": {"decision": "DENY", "reason_code": "TOO_BIG"}}
{"name": "misc default", "at": "2026-12-04T10:00:00+01:00", "tenant": "acme", "request": {"surface": "misc"}, "expect": {"decision": "PERMIT", "reason_code": "NO_POLICY_VIOLATION"}}
JSON
if run 1 "deliberate failures exit 1" policy test --policy "$tmp/pay.json" --coverage "$tmp/pay.tests.jsonl"; then
    checks=$((checks + 1))
    [ "$(tail -n 1 "$tmp/out")" = "3 passed, 2 failed" ] || fail "summary: $(tail -n 1 "$tmp/out")"
    has "$tmp/out" "^FAIL .*pay.tests.jsonl:5 medium is wrongly expected to pass$" "failure names file:line and case"
    has "$tmp/out" "^  expected PERMIT$" "expected outcome"
    has "$tmp/out" "^  got      DENY NO_MATCHING_POLICY$" "actual outcome"
    has "$tmp/out" "^    rule small-ok \(permit\): not matched$" "explain: every rule"
    has "$tmp/out" "^      context.amount lte 100: 500 -> does not hold$" "explain: the value compared"
    has "$tmp/out" '^      actor in \["a","b"\]: "c" -> does not hold$' "explain: the second failure's actor"
    has "$tmp/out" "^rules: 2/3 covered \(66%\)$" "rule coverage"
    has "$tmp/out" "^  pay: 2/3, not covered: never-used$" "uncovered rules listed"
    has "$tmp/out" "^conditions: 3/4 seen holding and not holding \(75%\)$" "condition coverage"
fi
# The same cases as a JSON array, with --json.
jq -s . <(grep -v '^//' "$tmp/pay.tests.jsonl" | grep -v '^$') >"$tmp/pay.tests.json"
if run 1 "--json, array file" policy test --policy "$tmp/pay.json" --coverage --json "$tmp/pay.tests.json"; then
    checks=$((checks + 1))
    jq -e '.passed == 3 and .failed == 2 and (.failures | length) == 2
           and .failures[0].case == 3 and .failures[0].got.decision == "DENY"
           and .failures[0].explain.rules[1].conditions[0].actual == 500
           and .failures[0].explain.rules[1].conditions[0].held == false
           and .coverage.rules.covered == 2 and .coverage.rules.total == 3
           and .coverage.rules.surfaces[0].uncovered == ["never-used"]
           and .coverage.conditions.covered == 3 and .coverage.conditions.total == 4' \
        "$tmp/out" >/dev/null || fail "--json document: $(head -c 800 "$tmp/out")"
fi

# 3. Bad input: exit 2, the problem named; nothing is silently skipped.
bad() { # bad NAME REGEX CASE-LINE
    printf '%s\n' "$3" >"$tmp/bad.tests.jsonl"
    run 2 "$1" policy test --policy "$tmp/pay.json" "$tmp/bad.tests.jsonl" &&
        has "$tmp/err" "$2" "$1: message"
}
ok_req='"request": {"surface": "pay", "actor": "a", "context": {"amount": 50}}'
bad "typo in a case member" 'bad.tests.jsonl:1 t: unknown member "expct" in the case' \
    "{\"name\": \"t\", $ok_req, \"expect\": {\"decision\": \"PERMIT\"}, \"expct\": 1}"
bad "typo in expect" 'unknown member "reason" in expect' \
    "{\"name\": \"t\", $ok_req, \"expect\": {\"decision\": \"DENY\", \"reason\": \"X\"}}"
bad "unknown decision" 'expect.decision must be' \
    "{\"name\": \"t\", $ok_req, \"expect\": {\"decision\": \"ALLOW\"}}"
bad "no name" 'needs a non-empty string "name"' "{$ok_req, \"expect\": {\"decision\": \"PERMIT\"}}"
bad "bad at" 'at "yesterday" is not an RFC 3339' \
    "{\"name\": \"t\", \"at\": \"yesterday\", $ok_req, \"expect\": {\"decision\": \"PERMIT\"}}"
bad "unknown limit" 'limits_state.daily: the bundle has no such limit' \
    "{\"name\": \"t\", \"limits_state\": {\"daily\": 3}, $ok_req, \"expect\": {\"decision\": \"PERMIT\"}}"
bad "unknown surface" 'request: ' \
    '{"name": "t", "request": {"surface": "nope"}, "expect": {"decision": "PERMIT"}}'
long=$(head -c 5000 /dev/zero | tr '\0' x)
bad "a request over the daemon's limits" 'request: .*limit' \
    "{\"name\": \"t\", \"request\": {\"surface\": \"pay\", \"actor\": \"$long\", \"context\": {\"amount\": 5}}, \"expect\": {\"decision\": \"PERMIT\"}}"
bad "principal without subject" 'principal needs a non-empty string subject' \
    "{\"name\": \"t\", \"principal\": {\"issuer\": \"x\"}, $ok_req, \"expect\": {\"decision\": \"PERMIT\"}}"
bad "not JSON" 'bad.tests.jsonl:1' '{"name": "t",'
bad "only comments" 'no test cases' '// nothing here'
run 2 "missing tests file" policy test --policy "$tmp/pay.json" "$tmp/none.tests.jsonl" || true
run 2 "no policy beside a tests file of another name" policy test "$tmp/bad.jsonl" &&
    has "$tmp/err" '--policy FILE is needed' "no policy: message"
run 2 "unknown option" policy test --policy "$tmp/pay.json" --fast "$tmp/pay.tests.jsonl" || true
run 2 "invalid policy" policy test --policy "$tmp/pay.tests.jsonl" "$tmp/pay.tests.jsonl" || true
run 0 "policy test --help" policy test --help && has "$tmp/out" 'usage: trigguard policy test' "help text"

# 4. check --explain: the explain object after the trace; nothing without the flag.
printf '%s' '{"surface": "pay", "actor": "a", "context": {"amount": 500}}' >"$tmp/req.json"
if run 3 "check --explain" check --policy "$tmp/pay.json" --explain "$tmp/req.json"; then
    checks=$((checks + 1))
    jq -e '.trace.decided_by == "default" and (.explain.rules | length) == 3
           and .explain.rules[0].evaluated == true and .explain.rules[0].matched == false
           and .explain.rules[1].conditions[1].actual == "a"
           and .explain.rules[1].conditions[1].held == true and .explain.limits == []' \
        "$tmp/out" >/dev/null || fail "check --explain: $(head -c 800 "$tmp/out")"
fi
if run 3 "check without --explain" check --policy "$tmp/pay.json" "$tmp/req.json"; then
    checks=$((checks + 1))
    jq -e 'has("explain") | not' "$tmp/out" >/dev/null || fail "explain without --explain"
fi

echo "policy_test.sh: $checks checks, $fails failures"
[ "$fails" -eq 0 ]
