#!/usr/bin/env bash
# check_time.sh — `trigguard check --at`: time.* conditions decide exactly at given instants
# (a change freeze in Europe/Berlin), the receipt's timestamp is the instant decided at, and
# a data set file beside the bundle (hash follows its content). Uses the host's tzdata.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"

[ -f /usr/share/zoneinfo/Europe/Berlin ] || { echo "SKIP: no tzdata (scripts/deps run)"; exit 77; }
command -v jq >/dev/null || { echo "FAIL: check_time.sh needs jq" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

cat >"$tmp/policy.json" <<'JSON'
{"version": "freeze-1", "timezone": "Europe/Berlin",
 "sets": {"approved": {"file": "approved.txt"}},
 "surfaces": {
  "deploy.release": {"tier": 2, "optional_context": {"environment": "string"}, "rules": [
   {"id": "freeze", "effect": "deny", "reason": "CHANGE_FREEZE", "when": [
     {"field": "context.environment", "op": "eq", "value": "production"},
     {"field": "time.date", "op": "gte", "value": "2026-12-20"},
     {"field": "time.date", "op": "lte", "value": "2027-01-02"}]},
   {"id": "weekend", "effect": "deny", "reason": "OUTSIDE_CHANGE_WINDOW", "when": [
     {"field": "context.environment", "op": "eq", "value": "production"},
     {"field": "time.weekday", "op": "in", "value": ["sat", "sun"]}]},
   {"id": "hours", "effect": "deny", "reason": "OUTSIDE_CHANGE_WINDOW", "when": [
     {"field": "context.environment", "op": "eq", "value": "production"},
     {"field": "time.hour", "op": "not_in", "value": [9, 10, 11, 12, 13, 14, 15, 16]}]},
   {"id": "approved", "effect": "permit", "when": [
     {"field": "actor", "op": "in", "set": "approved"}]}]}}}
JSON
printf 'ci-bot\nrelease-manager\n' >"$tmp/approved.txt"
printf '%s' '{"surface":"deploy.release","action":"deploy","actor":"ci-bot","context":{"environment":"production"}}' >"$tmp/prod.json"
printf '%s' '{"surface":"deploy.release","action":"deploy","actor":"intern","context":{"environment":"staging"}}' >"$tmp/intern.json"

# at INSTANT REQUEST WANT_DECISION WANT_REASON
at() {
    checks=$((checks + 1))
    local rc=0
    "$TG_BIN" check --policy "$tmp/policy.json" --at "$1" "$tmp/$2.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
    local got
    got=$(jq -r '.decision + " " + .reason_code' "$tmp/out" 2>/dev/null || echo "exit $rc: $(cat "$tmp/err")")
    [ "$got" = "$3 $4" ] || fail "at $1 $2: got '$got', want '$3 $4'"
}
at 2026-12-04T08:00:00Z prod PERMIT NO_POLICY_VIOLATION          # Friday 09:00 CET
at 2026-12-04T07:59:59Z prod DENY OUTSIDE_CHANGE_WINDOW          # 08:59:59
at 2026-12-04T15:59:59.999Z prod PERMIT NO_POLICY_VIOLATION      # 16:59:59.999
at 2026-12-04T16:00:00Z prod DENY OUTSIDE_CHANGE_WINDOW          # 17:00
at 2026-12-04T10:00:00+02:00 prod PERMIT NO_POLICY_VIOLATION     # an offset: 09:00 CET
at 2026-12-05T12:00:00Z prod DENY OUTSIDE_CHANGE_WINDOW          # Saturday
at 2026-12-18T12:00:00Z prod PERMIT NO_POLICY_VIOLATION          # Friday before the freeze
at 2026-12-19T23:00:00Z prod DENY CHANGE_FREEZE                  # 2026-12-20 00:00 CET
at 2027-01-02T22:59:59Z prod DENY CHANGE_FREEZE                  # its last second
at 2027-01-04T09:00:00Z prod PERMIT NO_POLICY_VIOLATION          # Monday 10:00 after
at 2026-07-01T07:30:00Z prod PERMIT NO_POLICY_VIOLATION          # summer: 09:30 CEST
at 2026-07-01T06:59:59Z prod DENY OUTSIDE_CHANGE_WINDOW          # 08:59:59 CEST
at 2026-12-21T12:00:00Z intern DENY NO_MATCHING_POLICY           # not in the data set

# --at is checked
checks=$((checks + 1))
rc=0
"$TG_BIN" check --policy "$tmp/policy.json" --at 2026-13-01T00:00:00Z "$tmp/prod.json" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--at needs an RFC 3339" "$tmp/err" || fail "bad --at: exit $rc, $(cat "$tmp/err")"

# the receipt records the instant decided at
if "$TG_BIN" keygen --out "$tmp/key.pem" --key-id time-key >/dev/null 2>"$tmp/err"; then
    checks=$((checks + 1))
    "$TG_BIN" check --policy "$tmp/policy.json" --key "$tmp/key.pem" --at 2026-12-04T08:00:00.250Z \
        "$tmp/prod.json" >"$tmp/out" 2>"$tmp/err" || fail "check with key: $(cat "$tmp/err")"
    ts=$(jq -r .receipt.timestamp "$tmp/out")
    [ "$ts" = "2026-12-04T08:00:00.250Z" ] || fail "receipt timestamp $ts, want 2026-12-04T08:00:00.250Z"
else
    fail "keygen: $(cat "$tmp/err")"
fi

# explain shows time.date as a date and a set condition by its set's name
checks=$((checks + 1))
"$TG_BIN" check --policy "$tmp/policy.json" --at 2026-12-19T23:00:00Z --explain "$tmp/prod.json" >"$tmp/out" 2>"$tmp/err" || true
jq -e '(.explain.rules[0].conditions[1] == {"field":"time.date","op":"gte","value":"2026-12-20","present":true,"actual_type":"string","actual":"2026-12-20","held":true})
       and (.explain.rules[3].conditions[0] | .op == "in" and .set == "approved" and .value_count == 2 and .held == true)' \
    "$tmp/out" >/dev/null || fail "explain: $(jq -c .explain "$tmp/out" 2>/dev/null || cat "$tmp/err")"

# the data set file: policyHash follows its content, and a symlinked set file is refused
hash_of() { "$TG_BIN" policy check "$tmp/policy.json" | sed -n 's/.*hash \([0-9a-f]*\),.*/\1/p'; }
checks=$((checks + 1))
h1=$(hash_of)
printf 'ci-bot\n' >"$tmp/approved.txt"
h2=$(hash_of)
[ -n "$h1" ] && [ "$h1" != "$h2" ] || fail "policy hash did not change with the set file ($h1, $h2)"
checks=$((checks + 1))
mv "$tmp/approved.txt" "$tmp/real.txt" && ln -s real.txt "$tmp/approved.txt"
rc=0
"$TG_BIN" policy check "$tmp/policy.json" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "sets.approved.file: data set file approved.txt: is a symbolic link" "$tmp/err" ||
    fail "symlinked set file: exit $rc, $(cat "$tmp/err")"

if [ "$fails" -ne 0 ]; then
    echo "check_time: $fails of $checks checks failed" >&2
    exit 1
fi
echo "check_time: $checks checks passed"
