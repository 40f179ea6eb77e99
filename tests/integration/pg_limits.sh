#!/usr/bin/env bash
# pg_limits.sh — stateful limits shared by two instances on one PostgreSQL (issue 21): 40
# requests of 300 fired at both instances at once against a daily cap of 10,000 give
# exactly 33 PERMIT (the sum of permitted amounts never passes the cap), the rest DENY with
# the limit's reason; an idempotent replay on the other instance never counts; the total
# is the same on both instances and after both restart; tg_limit_totals holds it.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

tg_keygen "$TG_TMP/key.pem"
TG_POLICY=$TG_TMP/limits_policy.json
cat >"$TG_POLICY" <<'JSON'
{
  "version": "pg-limits-1",
  "surfaces": {
    "payments.charge": {
      "tier": 2,
      "required_context": {"amount": "number"},
      "rules": [{"id": "small", "effect": "permit",
                 "when": [{"field": "context.amount", "op": "lte", "value": 5000}]}]
    }
  },
  "limits": [
    {"id": "daily-spend", "surface": "payments.charge", "key": ["actor"],
     "sum": "context.amount", "window_s": 86400, "max": 10000,
     "reason": "DAILY_LIMIT_EXCEEDED"}
  ]
}
JSON
pg_migrate
pg_serve a
pg_serve b

pay() { # pay ACTOR AMOUNT [extra JSON members]
    printf '{"surface":"payments.charge","action":"pay","actor":"%s","context":{"amount":%s}%s}' \
        "$1" "$2" "${3:-}"
}

FIRST_KEY=$(python3 - "${TG_PORTS[a]}" "${TG_PORTS[b]}" <<'PY'
import json, sys, threading, tgclient
ports = [int(sys.argv[1]), int(sys.argv[2])]
reqs = [{"surface": "payments.charge", "action": "pay", "actor": "agent-1",
         "context": {"amount": 300}, "idempotency_key": "race-%d" % i} for i in range(40)]
barrier = threading.Barrier(len(reqs))
res = [None] * len(reqs)
def worker(i):
    barrier.wait()
    res[i] = tgclient.request(ports[i % 2], "POST", "/v1/evaluate", reqs[i],
                              tgclient.bearer("tok-acme"))
ths = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
for t in ths: t.start()
for t in ths: t.join()
assert all(r is not None and r[0] == 200 for r in res), [r and r[0] for r in res]
out = [json.loads(r[2]) for r in res]
permits = [i for i, o in enumerate(out) if o["decision"] == "PERMIT"]
denies = [o for o in out if o["decision"] == "DENY"]
assert len(permits) == 33, "permits: %d" % len(permits)
assert len(denies) == 7 and all(o["reason_code"] == "DAILY_LIMIT_EXCEEDED" for o in denies)
assert {i % 2 for i in permits} == {0, 1}, "both instances permitted some"
print(reqs[permits[0]]["idempotency_key"], permits[0] % 2)
PY
)
tg_eq "$?" 0 "40 requests on two instances race one cap: exactly 33 PERMIT, 7 DENY"
read -r KEY FROM <<<"$FIRST_KEY"
tg_eq "$(sql "$TG_PG_URL" "select total from tg_limit_totals where limit_id = 'daily-spend'")" 9900 \
    "tg_limit_totals holds 33 x 300"

# the replay goes to the instance that did not answer it first: never counted again
if [ "${FROM:-0}" = 0 ]; then tg_use b; else tg_use a; fi
tg_post /v1/evaluate "$(pay agent-1 300 ",\"idempotency_key\":\"$KEY\"")"
tg_expect_py "j['decision'] == 'PERMIT'" "replay of $KEY on the other instance"
tg_eq "$(sql "$TG_PG_URL" "select total from tg_limit_totals where limit_id = 'daily-spend'")" 9900 \
    "the replay did not count"
tg_use a
tg_post /v1/evaluate "$(pay agent-1 100)"
tg_expect_py "j['decision'] == 'PERMIT'" "A: 9,900 + 100 = the cap"
tg_use b
tg_post /v1/evaluate "$(pay agent-1 1)"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'DAILY_LIMIT_EXCEEDED'" \
    "B sees A's total: one more unit is DENY"

tg_stop a
tg_stop b
pg_serve a2
tg_post /v1/evaluate "$(pay agent-1 1)"
tg_expect_py "j['decision'] == 'DENY' and j['reason_code'] == 'DAILY_LIMIT_EXCEEDED'" \
    "after both restart the total stands"
tg_post /v1/evaluate "$(pay agent-2 300)"
tg_expect_py "j['decision'] == 'PERMIT'" "another actor has its own total"
tg_stop a2
tg_done
