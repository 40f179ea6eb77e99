#!/usr/bin/env bash
# daemon_time.sh — time.* conditions in the daemon see the instant the receipt records: a
# surface denies on time.date == the UTC date the test computed, another on time.hour == the
# UTC hour; for every answer, DENY exactly when the receipt's timestamp has that date / hour
# (so a request across midnight or the hour is judged by the receipt's instant, and the test
# holds at any time of day). Also a data set file beside the policy (an actor allow list),
# re-read on reload with a new policyHash. Also run on --store postgres
# (integration_pg_daemon_time).
source "$(dirname "$0")/lib/daemon.sh"

[ -f /usr/share/zoneinfo/Europe/Berlin ] || { echo "SKIP: no tzdata"; exit 77; }
tg_keygen
TODAY=$(date -u +%Y-%m-%d)
HOUR=$(date -u +%H)
HOUR=$((10#$HOUR))
POLICY=$TG_TMP/policy.json
printf 'agent.one\nagent.two\n' >"$TG_TMP/agents.txt"
python3 - "$TG_POLICY" "$POLICY" "$TODAY" "$HOUR" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["sets"] = {"agents": {"file": "agents.txt"}}
def surface(cond):
    return {"tier": 3, "timezone": "UTC", "rules": [
        {"id": "now", "effect": "deny", "reason": "TIME_RULE", "when": [cond]},
        {"id": "agents", "effect": "permit",
         "when": [{"field": "actor", "op": "in", "set": "agents"}]}]}
p["surfaces"]["clock.date"] = surface({"field": "time.date", "op": "eq", "value": sys.argv[3]})
p["surfaces"]["clock.hour"] = surface({"field": "time.hour", "op": "eq", "value": int(sys.argv[4])})
json.dump(p, open(sys.argv[2], "w"))
PY
tg_std_args main
ARGS=("${TG_STD_ARGS[@]}" --policy "$POLICY")
tg_start main -- "${ARGS[@]}"

# one request; the decision must follow the receipt's timestamp
judge() { # judge SURFACE ACTOR
    tg_post /v1/evaluate "{\"surface\":\"$1\",\"action\":\"tick\",\"actor\":\"$2\"}"
    python3 - "$TG_BODY_FILE" "$1" "$2" "$TODAY" "$HOUR" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
surface, actor, today, hour = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
r = j.get("receipt") or {}
ts = r.get("timestamp", "")
hit = ts[:10] == today if surface == "clock.date" else (ts[:10] and int(ts[11:13]) == hour)
known = actor in ("agent.one", "agent.two")
want = ("DENY", "TIME_RULE") if hit else (("PERMIT", "NO_POLICY_VIOLATION") if known
                                          else ("DENY", "NO_MATCHING_POLICY"))
got = (j.get("decision"), j.get("reason_code"))
if got != want or r.get("decision") != want[0]:
    print("at %s on %s as %s: got %s, want %s" % (ts, surface, actor, got, want))
    sys.exit(1)
PY
}
for i in 1 2 3; do
    tg_check "clock.date as agent.one ($i)" judge clock.date agent.one
    tg_check "clock.hour as agent.two ($i)" judge clock.hour agent.two
    tg_check "clock.date as a stranger ($i)" judge clock.date stranger
done

# the set file is part of the policy: a changed file and a reload give a new policyHash
tg_req GET /version
tg_jget H1 'j["policy_hash"]'
printf 'agent.one\nstranger\n' >"$TG_TMP/agents.txt"
# A changed set file is a changed bundle: the strict reload wants a new version for it
# (lint's version_reused), as for any other change.
python3 - "$POLICY" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["version"] = "itest-time-2"; json.dump(p, open(sys.argv[1], "w"))
PY
kill -HUP "$(tg_pid main)"
ok=0
for _ in $(seq 1 50); do
    tg_req GET /version
    tg_jget H2 'j["policy_hash"]'
    [ "$H2" != "$H1" ] && { ok=1; break; }
    sleep 0.2
done
tg_eq "$ok" 1 "reload re-read the set file (policyHash $H1 -> ${H2:-?})"
tg_check "clock.date as stranger after the reload" judge clock.date stranger

tg_done
