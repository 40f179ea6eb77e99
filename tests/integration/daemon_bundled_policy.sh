#!/usr/bin/env bash
# daemon_bundled_policy.sh — the shipped examples/policy.json loads in the daemon, carries
# the SPEC §8 surface registry (tiers, required context), permits the representative spend
# request of SPEC §3.1 with a verifiable receipt, and reaches the HIGH_RISK_SPEND rule.
source "$(dirname "$0")/lib/daemon.sh"

BUNDLED=$TG_SRC/examples/policy.json
[ -f "$BUNDLED" ] || tg_die "examples/policy.json is missing"
out=$("$TG_BIN" policy check "$BUNDLED" 2>&1)
tg_eq "$?" 0 "trigguard policy check examples/policy.json: $out"

tg_keygen
tg_start main -- --policy "$BUNDLED" --key "$TG_KEY" --ledger "$TG_TMP/ledger-main" --threads 2

tg_req GET /protocol/capabilities
tg_expect_py "{s['name']: s['tier'] for s in j['surfaces']} == {'deploy.release': 1, 'infra.apply': 1, 'database.migrate': 1, 'secrets.access': 1, 'artifact.publish': 1, 'data.export': 2, 'payments.charge': 1, 'payments.refund': 1, 'identity.role_grant': 1, 'model.publish': 1, 'prod.deploy': 2, 'example': 3}" \
    "the bundled policy serves the SPEC §8 surface registry with its tiers"

SPEND='{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":false},"idempotency_key":"tx_9921"}'
tg_post /v1/evaluate "$SPEND"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['enforcement'] == 'EXECUTED' and j['reason_code'] == 'NO_POLICY_VIOLATION' and j['receipt']['surface'] == 'payments.charge'" \
    "the representative spend request of SPEC §3.1 is permitted"
tg_save_receipt "$TG_TMP/receipt.json"
tg_fetch_keys "$TG_TMP/keys.json"
out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$TG_TMP/receipt.json" 2>&1)
tg_eq "$?:$out" "0:VALID" "its receipt verifies against the served keys.json"

tg_post /v1/evaluate '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":12000,"currency":"USD"},"signals":{"riskScore":0.2}}'
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'HIGH_RISK_SPEND'" \
    "amount above 10,000 with riskScore 0.2 (below the tier threshold): DENY HIGH_RISK_SPEND"
tg_post /v1/evaluate '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.31}}'
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'RISK_THRESHOLD_EXCEEDED'" "riskScore above 0.3 on tier 1"
tg_post /v1/evaluate '{"surface":"payments.charge","action":"transfer_funds","actor":"agent.billing","context":{"amount":2500,"currency":"USD"},"signals":{"riskScore":0.12,"rsdSpike":true}}'
tg_expect_py "s == 200 and j['decision'] == 'DENY'" "rsdSpike on a tier-1 surface denies"
tg_post /v1/evaluate '{"tool":"stripe.charge","args":{"amount":2500,"currency":"USD"},"actor":"agent.billing","signals":{"riskScore":0.12}}'
tg_expect_py "s == 200 and j['receipt']['surface'] == 'payments.charge'" "tool-call shape: stripe.charge maps to payments.charge"

# The production deploy on verified facts (issue 20): the rule wants the caller's OIDC claims
# ref and environment; a static token has none, so whatever the body says it is no PERMIT.
DEPLOY='{"surface":"deploy.release","action":"deploy","actor":"ci.release-bot","context":{"target":"production","version":"1.4.2","branch":"main","ref":"refs/heads/main","environment":"production"}}'
tg_post /decide "$DEPLOY"
tg_expect_py "s == 200 and j['decision'] == 'DENY' and j['reason_code'] == 'NO_MATCHING_POLICY'" \
    "production deploy with caller-sent branch/ref/environment and a static token: not permitted"
tg_post /v1/evaluate '{"surface":"deploy.release","action":"deploy","actor":"ci.release-bot","context":{"target":"production","version":"1.4.2"},"signals":{"humanApproved":true}}'
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt'].get('principal') is None" \
    "the approved production deploy still permits (a derived-subject token: no principal in the receipt)"

# Required context of SPEC §8: each field missing -> SILENCE MISSING_CONTEXT; all present
# -> something other than MISSING_CONTEXT (the rules then decide).
tg_check "required context of every surface in the SPEC §8 table" python3 - "${TG_PORTS[main]}" <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
table = {"deploy.release": ["target", "version"], "infra.apply": ["changeId"],
         "database.migrate": ["migrationId", "schemaRef"], "secrets.access": ["scope", "principal"],
         "artifact.publish": ["artifactId", "version"], "data.export": ["scope", "format"],
         "payments.charge": ["amount", "currency"], "payments.refund": ["amount", "currency", "reference"],
         "identity.role_grant": ["role", "principal"], "model.publish": ["artifactId", "version"]}
bad = []
def decide(surface, ctx):
    st, _, body = tgclient.request(port, "POST", "/decide", {"surface": surface, "actor": "x", "context": ctx},
                                   tgclient.bearer("tok-acme"))
    assert st == 200, (surface, st, body)
    return json.loads(body)
for surface, fields in table.items():
    full = {f: (5 if f == "amount" else "v") for f in fields}
    j = decide(surface, full)
    if j["reason_code"] in ("MISSING_CONTEXT",):
        bad.append("%s: all required fields given, still %s" % (surface, j["reason_code"]))
    for f in fields:
        ctx = {k: v for k, v in full.items() if k != f}
        j = decide(surface, ctx)
        if j["decision"] != "SILENCE" or j["reason_code"] != "MISSING_CONTEXT":
            bad.append("%s without %s: %s %s" % (surface, f, j["decision"], j["reason_code"]))
    if "amount" in fields:
        j = decide(surface, dict(full, amount="5"))
        if j["decision"] != "SILENCE":
            bad.append("%s: amount as a string is %s" % (surface, j["decision"]))
j = decide("example", {})
if j["reason_code"] == "MISSING_CONTEXT":
    bad.append("example requires context")
assert not bad, bad
PY
tg_stop main
tg_done
