#!/usr/bin/env bash
# lang_cli.sh — issue 21's condition language end to end through `trigguard check` and
# `trigguard policy check`: groups, prefix/suffix/glob and value_from decide as the kernel
# vectors say from a bundle file, and misuse is refused with the JSON path.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_SRC:?TG_SRC must point at the repository root}"

policy="$TG_SRC/tests/unit/vectors/kernel/policies/lang.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
command -v jq >/dev/null || { echo "FAIL: lang_cli.sh needs jq" >&2; exit 1; }

# decide WANT_EXIT WANT_DECISION WANT_RULE NAME REQUEST — `trigguard check` on REQUEST.
decide() {
    local want=$1 decision=$2 rule=$3 name=$4 rc=0
    checks=$((checks + 1))
    printf '%s' "$5" >"$tmp/req.json"
    # --no-strict: the vectors' bundle reads context fields it does not declare (absent on
    # purpose in some vectors); `policy lint` reports them, the language is what is tested
    "$TG_BIN" check --no-strict --policy "$policy" "$tmp/req.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit $rc, want $want: $(head -c 300 "$tmp/out") $(head -c 300 "$tmp/err")"
        return
    fi
    jq -e --arg d "$decision" --arg r "$rule" \
        '.decision == $d and ((.trace.rule // "") == $r)' "$tmp/out" >/dev/null ||
        fail "$name: want $decision by '$rule': $(head -c 600 "$tmp/out")"
}

decide 0 PERMIT protected "release branch (glob)" \
    '{"surface":"lang.branch","actor":"alice","context":{"ref":"refs/heads/release/1.4"}}'
decide 3 DENY "" "feature branch (no any_of member)" \
    '{"surface":"lang.branch","actor":"alice","context":{"ref":"refs/heads/feature/x"}}'
decide 3 DENY no-bots "bot without a ref (not over a missing field holds)" \
    '{"surface":"lang.branch","actor":"ci-bot"}'
decide 0 PERMIT within-limit "refund within the approved limit (value_from)" \
    '{"surface":"lang.refund","actor":"alice","context":{"amount":100,"approved_limit":100,"approver":"bob"}}'
decide 3 DENY "" "refund without an approver (ne with a side absent)" \
    '{"surface":"lang.refund","actor":"alice","context":{"amount":1,"approved_limit":100}}'
decide 3 DENY self-approved "self-approval (eq value_from actor)" \
    '{"surface":"lang.refund","actor":"alice","context":{"amount":1,"approved_limit":100,"approver":"alice"}}'

# refuse NAME WHEN MESSAGE — a bundle whose one rule has this when list fails policy check
# with exit 2 (usage/invalid input) and MESSAGE on stderr.
refuse() {
    local name=$1 rc=0
    checks=$((checks + 1))
    printf '{"version":"x","surfaces":{"s":{"tier":3,"required_context":{"n":"number"},"rules":[{"id":"r","effect":"permit","when":%s}]}}}' \
        "$2" >"$tmp/bad.json"
    "$TG_BIN" policy check "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -eq 0 ]; then
        fail "$name: accepted"
    elif ! grep -qF -- "$3" "$tmp/err"; then
        fail "$name: stderr lacks '$3': $(head -c 400 "$tmp/err")"
    fi
}

leaf='{"field":"context.x","op":"eq","value":1}'
refuse "five nested groups" "[{\"not\":{\"not\":{\"not\":{\"not\":{\"not\":$leaf}}}}}]" \
    'surfaces.s.rules[0].when[0].not.not.not.not.not: groups nested more than 4 deep'
refuse "empty any_of" '[{"any_of":[]}]' 'surfaces.s.rules[0].when[0].any_of: an empty any_of'
refuse "glob on a number field" '[{"field":"context.n","op":"glob","value":"1*"}]' \
    'surfaces.s.rules[0].when[0].op: glob matches strings but context.n is of type number'
refuse "value and value_from" \
    '[{"field":"context.n","op":"lte","value":1,"value_from":"context.m"}]' \
    'surfaces.s.rules[0].when[0].value: value and value_from together'

# The explain names groups by their bundle member and value_from by its field, with both values.
printf '%s' '{"surface":"lang.branch","actor":"x-bot","context":{"ref":"refs/heads/main"}}' >"$tmp/req-bot.json"
"$TG_BIN" check --explain --policy "$policy" "$tmp/req-bot.json" >"$tmp/ex.json" 2>"$tmp/err" || true
checks=$((checks + 1))
jq -e '.explain.rules[0] | .id == "no-bots" and .matched and .conditions[1].op == "not" and .conditions[1].held
    and (.conditions[1].conditions[0] | .op == "prefix" and .actual == "refs/heads/main" and (.held | not))' \
    "$tmp/ex.json" >/dev/null || fail "explain of a not group: $(head -c 600 "$tmp/ex.json")"
printf '%s' '{"surface":"lang.refund","actor":"alice","context":{"amount":101,"approved_limit":100,"approver":"bob"}}' >"$tmp/req-refund.json"
"$TG_BIN" check --explain --policy "$policy" "$tmp/req-refund.json" >"$tmp/ex.json" 2>"$tmp/err" || true
checks=$((checks + 1))
jq -e '[.explain.rules[] | select(.id == "within-limit")][0].conditions[0]
    | .value_from == "context.approved_limit" and .actual == 101 and .other_actual == 100 and (.held | not)' \
    "$tmp/ex.json" >/dev/null || fail "explain of value_from: $(head -c 600 "$tmp/ex.json")"

echo "lang_cli: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
