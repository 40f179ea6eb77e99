#!/usr/bin/env bash
# check_cli.sh — `trigguard check` exit codes 0/3/4/5/2, decision JSON, signed receipts, and
# `trigguard policy check`.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
: "${TG_SRC:?TG_SRC must point at the repository root}"

policy="$TG_SRC/examples/policy.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# run WANT_EXIT NAME ARGS... — runs the binary, keeps stdout/stderr in $tmp/out, $tmp/err.
run() {
    local want=$1 name=$2
    shift 2
    checks=$((checks + 1))
    local rc=0
    "$TG_BIN" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit $rc, want $want; stdout: $(head -c 400 "$tmp/out"); stderr: $(head -c 400 "$tmp/err")"
        return 1
    fi
    return 0
}

command -v jq >/dev/null || { echo "FAIL: check_cli.sh needs jq" >&2; exit 1; }

# json_is FILTER NAME — a jq filter over the decision JSON in $tmp/out must yield true.
json_is() {
    checks=$((checks + 1))
    jq -e "$1" "$tmp/out" >/dev/null 2>&1 || fail "$2: $(head -c 600 "$tmp/out")"
}

req() { printf '%s' "$2" >"$tmp/$1.json"; }

req permit '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing",
 "context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false},
 "idempotency_key":"tx_9921","nonce":"6f1c","subjectDigest":"sha256:abc","prevReceiptHash":"abc"}'
req deny '{"surface":"payments.charge","actor":"agent.billing",
 "context":{"amount":20000,"currency":"USD"},"signals":{"riskScore":0.2}}'
req silence '{"surface":"payments.charge","actor":"agent.billing","context":{"currency":"USD"}}'
req escalate '{"surface":"prod.deploy","action":"deploy","actor":"ci.deployer",
 "context":{"service":"api","environment":"production"}}'
req tool '{"tool":"stripe.charge","args":{"amount":100,"currency":"EUR"},"intent_id":"i-1",
 "actor":"agent.billing"}'
req unknown '{"surface":"payments.chargeback","context":{"amount":1}}'
req unknown_tool '{"tool":"stripe.payout","args":{}}'
req bad_member '{"surface":"example","extra":true}'
req bad_type '{"surface":"example","context":"x"}'
printf '{"surface":' >"$tmp/truncated.json"
printf '{"surface":"example","surface":"example"}' >"$tmp/dup.json"

# ---- exit codes and decision JSON ----
if run 0 "permit" check --policy "$policy" "$tmp/permit.json"; then
    json_is '.decision == "PERMIT" and .enforcement == "EXECUTED"' "permit decision"
    json_is '.reason_code == "NO_POLICY_VIOLATION"' "permit reason"
    json_is '.request_hash == "f002da74746f7ad6586ea3aca600e28e570755f6803107e9272fea9df51cca20"' \
        "request hash (normalized canonical request, known answer)"
    json_is '.execution_id | test("^exec_[0-9a-f]{32}$")' "execution id"
    json_is '.policy_version == "2026-12-04.2" and (has("receipt") | not)' "no receipt without --key"
    json_is '.trace.states == ["RECEIVED","VALIDATED","CLASSIFIED","SIGNALS_EVALUATED","RULES_EVALUATED"]' \
        "trace states"
    json_is '.trace.rule == "billing-agent-within-limit" and .trace.decided_by == "rule"' \
        "trace rule"
    cp "$tmp/out" "$tmp/permit.out"
fi
# ESCALATE (SPEC §11.2): exit 5, PENDING_APPROVAL, the escalate rule named; --explain shows it
if run 5 "escalate" check --policy "$policy" --explain "$tmp/escalate.json"; then
    json_is '.decision == "ESCALATE" and .enforcement == "PENDING_APPROVAL"' "escalate decision"
    json_is '.reason_code == "TWO_PERSON_RULE" and .trace.rule == "production-needs-two-approvals"' \
        "escalate reason and rule"
    json_is '[.explain.rules[] | select(.effect == "escalate" and .matched)] | length == 1' \
        "explain shows the escalate rule that held"
fi
# the same request twice: identical execution id (idempotency key) and hash
if run 0 "permit again" check --policy "$policy" "$tmp/permit.json"; then
    checks=$((checks + 1))
    cmp -s "$tmp/out" "$tmp/permit.out" || fail "deterministic output: two runs differ"
fi
if run 3 "deny" check --policy "$policy" "$tmp/deny.json"; then
    json_is '.decision == "DENY" and .enforcement == "BLOCKED"' "deny decision"
    json_is '.reason_code == "HIGH_RISK_SPEND" and .trace.rule == "high-risk-spend"' "deny reason"
fi
if run 4 "silence" check --policy "$policy" "$tmp/silence.json"; then
    json_is '.decision == "SILENCE" and .enforcement == "BLOCKED"' "silence decision"
    json_is '.reason_code == "MISSING_CONTEXT" and .trace.subject == "amount"' "silence reason"
    json_is '.trace.states == ["RECEIVED"] and .trace.decided_in == "RECEIVED"' "silence trace"
fi
if run 0 "tool call" check --policy "$policy" "$tmp/tool.json"; then
    json_is '.decision == "PERMIT" and .trace.surface == "payments.charge"' "tool mapping"
fi
run 0 "stdin request" check --policy "$policy" - <"$tmp/permit.json" || true

# ---- bad input: exit 2, nothing on stdout, a reason on stderr ----
bad() {
    local name=$1 pattern=$2
    shift 2
    if run 2 "$name" "$@"; then
        checks=$((checks + 1))
        [ -s "$tmp/out" ] && fail "$name: unexpected stdout: $(cat "$tmp/out")"
        grep -q -- "$pattern" "$tmp/err" || fail "$name: stderr lacks '$pattern': $(cat "$tmp/err")"
    fi
}
bad "unknown surface" 'unknown surface "payments.chargeback"' check --policy "$policy" "$tmp/unknown.json"
bad "unknown tool" 'stripe.payout' check --policy "$policy" "$tmp/unknown_tool.json"
bad "unknown member" 'request.extra: unknown member' check --policy "$policy" "$tmp/bad_member.json"
bad "wrong type" 'request.context: must be an object' check --policy "$policy" "$tmp/bad_type.json"
bad "invalid JSON" 'request' check --policy "$policy" "$tmp/truncated.json"
bad "duplicate member" 'request' check --policy "$policy" "$tmp/dup.json"
bad "missing request file" 'cannot open' check --policy "$policy" "$tmp/nope.json"
bad "no --policy" '--policy' check "$tmp/permit.json"
bad "no request" 'request file' check --policy "$policy"
bad "unknown option" "unknown option" check --policy "$policy" --frobnicate "$tmp/permit.json"
bad "missing policy file" 'cannot open policy' check --policy "$tmp/none.json" "$tmp/permit.json"
printf '{"version":"1","surfaces":{"x":{"tier":7}}}' >"$tmp/badpolicy.json"
bad "invalid policy" 'surfaces.x.tier: must be 1, 2 or 3' check --policy "$tmp/badpolicy.json" "$tmp/permit.json"

# ---- signed receipts ----
if "$TG_BIN" keygen --out "$tmp/key.pem" --key-id check-key-1 >/dev/null 2>"$tmp/err"; then
    receipt_of() { jq -c .receipt "$tmp/out" >"$tmp/receipt.json"; }
    if run 0 "permit with key" check --policy "$policy" --key "$tmp/key.pem" --tenant acme "$tmp/permit.json"; then
        json_is '.receipt.decision == "PERMIT" and .receipt.tenantId == "acme"' "receipt decision"
        json_is '.receipt.executionId == .execution_id and .receipt.requestHash == .request_hash' \
            "receipt ids"
        json_is '.receipt.authorityKeyId == "check-key-1" and .receipt.subjectDigest == "sha256:abc"' \
            "receipt key id"
        receipt_of
        "$TG_BIN" keys "$tmp/key.pem" >"$tmp/keys.json" 2>/dev/null || fail "keys.json"
        checks=$((checks + 1))
        "$TG_BIN" verify --keys "$tmp/keys.json" "$tmp/receipt.json" >"$tmp/v" 2>&1 ||
            fail "permit receipt does not verify: $(cat "$tmp/v")"
    fi
    if run 3 "deny with key" check --policy "$policy" --key "$tmp/key.pem" "$tmp/deny.json"; then
        json_is '.receipt.decision == "DENY" and .receipt.reasonCode == "HIGH_RISK_SPEND"' \
            "deny receipt"
        json_is '.receipt.tenantId == "local"' "default tenant"
        receipt_of
        checks=$((checks + 1))
        "$TG_BIN" verify --keys "$tmp/keys.json" "$tmp/receipt.json" >"$tmp/v" 2>&1 ||
            fail "deny receipt does not verify: $(cat "$tmp/v")"
    fi
    if run 4 "silence with key" check --policy "$policy" --key "$tmp/key.pem" "$tmp/silence.json"; then
        json_is 'has("receipt") | not' "SILENCE never carries a receipt"
    fi
    if run 5 "escalate with key" check --policy "$policy" --key "$tmp/key.pem" "$tmp/escalate.json"; then
        json_is 'has("receipt") | not' "check opens no approval, so an ESCALATE has no receipt"
    fi
    chmod 0644 "$tmp/key.pem"
    bad "group-readable key" 'key' check --policy "$policy" --key "$tmp/key.pem" "$tmp/permit.json"
else
    fail "keygen: $(cat "$tmp/err")"
fi

# ---- policy check ----
if run 0 "policy check" policy check "$policy"; then
    checks=$((checks + 1))
    [ "$(wc -l <"$tmp/out")" -eq 1 ] || fail "policy check: not one line: $(cat "$tmp/out")"
    grep -Eq '^policy ok: version 2026-12-04\.2, authority trigguard-local, hash [0-9a-f]{64}, 12 surfaces, [0-9]+ rules, [0-9]+ signals, [0-9]+ tools$' \
        "$tmp/out" || fail "policy check summary: $(cat "$tmp/out")"
fi
# the hash it prints is SHA-256 of the canonical bundle (trigguard canon --sha256 agrees)
if "$TG_BIN" canon --sha256 <"$policy" >"$tmp/canon" 2>/dev/null; then
    checks=$((checks + 1))
    grep -q "$(tr -d '\n' <"$tmp/canon" | grep -Eo '[0-9a-f]{64}' | head -1)" "$tmp/out" ||
        fail "policy hash differs from trigguard canon --sha256"
fi
run 0 "policy check stdin" policy check - <"$policy" || true
if run 0 "policy check --help" policy check --help; then
    grep -q '^usage: trigguard policy check FILE' "$tmp/out" || fail "policy check --help: $(cat "$tmp/out")"
fi
bad "policy check invalid" 'badpolicy.json: surfaces.x.tier: must be 1, 2 or 3' policy check "$tmp/badpolicy.json"
bad "policy check missing" 'cannot open' policy check "$tmp/none.json"
bad "policy check usage" 'usage' policy
bad "policy unknown subcommand" 'usage' policy frob "$policy"
# ---- verified facts given offline (issue 20): --tenant, --subject, --issuer, --claim ----
req prod '{"surface":"deploy.release","action":"deploy","actor":"ci.release-bot",
 "context":{"target":"production","version":"1.4.2","branch":"main","ref":"refs/heads/main"}}'
if run 3 "production deploy, no claims" check --policy "$policy" "$tmp/prod.json"; then
    json_is '.decision == "DENY" and .reason_code == "NO_MATCHING_POLICY"' \
        "production deploy: the body's branch and ref are no verified facts"
fi
if run 0 "production deploy, verified claims" check --policy "$policy" --subject repo:acme/app \
    --issuer https://token.actions.githubusercontent.com --claim ref=refs/heads/main \
    --claim environment=production "$tmp/prod.json"; then
    json_is '.decision == "PERMIT" and .trace.rule == "release-to-production-from-main"' \
        "production deploy permitted by the verified-claims rule"
fi
run 3 "production deploy, another ref" check --policy "$policy" --claim ref=refs/heads/dev \
    --claim environment=production "$tmp/prod.json" || true
run 3 "production deploy, ref only" check --policy "$policy" --claim ref=refs/heads/main \
    "$tmp/prod.json" || true
bad "--claim with an array" 'must be a string, number or boolean' check --policy "$policy" \
    --claim 'ref="refs/heads/main"' --claim 'environment=["production"]' "$tmp/prod.json"
run 0 "production deploy, JSON-quoted strings" check --policy "$policy" \
    --claim 'ref="refs/heads/main"' --claim 'environment="production"' "$tmp/prod.json" || true
bad "--claim without =" 'expected NAME=VALUE' check --policy "$policy" --claim ref "$tmp/prod.json"
bad "--claim twice" 'given twice' check --policy "$policy" --claim a=1 --claim a=2 "$tmp/prod.json"
bad "--claim null" 'must be a string, number or boolean' check --policy "$policy" --claim a=null \
    "$tmp/prod.json"
bad "--issuer alone" '--issuer needs --subject' check --policy "$policy" --issuer https://i \
    "$tmp/prod.json"
bad "--subject empty" '--subject and --issuer take' check --policy "$policy" --subject '' \
    "$tmp/prod.json"
if [ -f "$tmp/key.pem" ] && chmod 0600 "$tmp/key.pem" &&
    run 0 "receipt principal" check --policy "$policy" --key "$tmp/key.pem" --subject repo:acme/app \
        --issuer https://token.actions.githubusercontent.com --claim ref=refs/heads/main \
        --claim environment=production "$tmp/prod.json"; then
    json_is '.receipt.principal == {"issuer":"https://token.actions.githubusercontent.com","subject":"repo:acme/app"}' \
        "the signed receipt names the principal"
    jq -c .receipt "$tmp/out" >"$tmp/receipt-principal.json"
    "$TG_BIN" verify --keys "$tmp/keys.json" "$tmp/receipt-principal.json" >"$tmp/v" 2>&1 ||
        fail "verify a receipt with a principal: $(cat "$tmp/v")"
    checks=$((checks + 1))
    run 0 "receipt without --subject" check --policy "$policy" --key "$tmp/key.pem" "$tmp/permit.json" &&
        json_is '.receipt | has("principal") | not' "no --subject: no principal (a v1 receipt)"
fi
if run 0 "check --help" check --help; then
    grep -q -- '--claim NAME=VALUE' "$tmp/out" || fail "check --help names --claim"
fi

run 0 "policy help" policy --help || true
run 0 "check help" check --help || true
for f in "$TG_SRC"/tests/unit/vectors/kernel/policies/*.json; do
    run 0 "policy check $(basename "$f")" policy check "$f" || true
done

echo "check_cli: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
