#!/usr/bin/env bash
# daemon_reload.sh — SIGHUP and POST /v1/admin/reload replace the tokens and the keys (and
# the policy) each on its own: a revoked token gets 401 and a new one works right after the
# reload, a bad file keeps the old state and says so in /version and /metrics, a key
# rotation (publish verify-only, switch, drop) keeps old receipts verifiable until the
# drop, the admin route answers by role, and reloads under load fail no request.
source "$(dirname "$0")/lib/daemon.sh"

D=$TG_TMP/reload
mkdir -p "$D"
ADMIN=(-H "Authorization: Bearer tok-adm")
# keygen prints the public key (with its key-id line) on stdout: the verify-only form.
"$TG_BIN" keygen --out "$D/k1.pem" --key-id rot-k1 >"$D/k1.pub" || tg_die "keygen k1"
"$TG_BIN" keygen --out "$D/k2.pem" --key-id rot-k2 >"$D/k2.pub" || tg_die "keygen k2"
cp -p "$D/k1.pem" "$D/active.pem"
cp "$D/k1.pub" "$D/next.pem" # the active key named again: allowed (rotation's last step)
cat >"$D/tokens.json" <<EOF
[{"tenant": "acme", "token_sha256": "$(printf %s tok-c1 | sha256sum | cut -c1-64)", "subject": "c1"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-adm | sha256sum | cut -c1-64)", "subject": "adm", "role": "admin"},
 {"tenant": "acme", "token_sha256": "$(printf %s tok-appr | sha256sum | cut -c1-64)", "subject": "appr", "role": "approver"}]
EOF
chmod 600 "$D/tokens.json"
cp "$TG_POLICY" "$D/policy.json"

tg_start rl TRIGGUARD_API_KEYS="beta:tok-beta" -- --policy "$D/policy.json" --key "$D/active.pem" \
    --verify-keys "$D/next.pem" --tokens "$D/tokens.json" --ledger "$TG_TMP/ledger-rl" \
    --log-format json --threads 2
PID=$(tg_pid rl)

evaluate() { # evaluate TOKEN: POST a PERMIT request
    tg_req POST /v1/evaluate -H "Authorization: Bearer $1" --json-body "$(tg_req_json permit)"
}
admin_reload() { tg_req POST /v1/admin/reload "${ADMIN[@]}"; }
# hup: SIGHUP, then wait until /version shows a reload newer than the one before.
hup() { tg_hup "$PID"; }
metric() { # metric 'NAME{labels}': its value in /metrics, or "absent"
    curl -s --max-time 5 "$TG_URL/metrics" | awk -v k="$1" '$1 == k { v = $2 } END { print v == "" ? "absent" : v }'
}

# ---- before any reload ---------------------------------------------------------------------

tg_req GET /version
tg_expect_py 'j["last_reload"] is None and j["signing_key_id"] == "rot-k1"' "version: no reload yet, key rot-k1"
tg_eq "$(metric 'trigguard_reload_total{what="tokens",result="ok"}')" 0 "metrics: reload_total starts at 0"
tg_check "metrics: config_info names the policy and the key" bash -c \
    "curl -s '$TG_URL/metrics' | grep -Eq '^trigguard_config_info\\{policy_version=\"itest-1\",policy_hash=\"[0-9a-f]{64}\",signing_key_id=\"rot-k1\"\\} 1\$'"

# ---- the admin route's roles ---------------------------------------------------------------

tg_req POST /v1/admin/reload
tg_expect_error 401 unauthorized "admin reload without a token"
tg_req POST /v1/admin/reload -H "Authorization: Bearer tok-nope"
tg_expect_error 401 unauthorized "admin reload with an unknown token"
tg_req POST /v1/admin/reload -H "Authorization: Bearer tok-c1"
tg_expect_error 403 role_not_allowed "admin reload with a caller token"
tg_req POST /v1/admin/reload -H "Authorization: Bearer tok-appr"
tg_expect_error 403 role_not_allowed "admin reload with an approver token"
tg_req POST /v1/admin/reload -H "Authorization: Bearer tok-beta"
tg_expect_error 403 role_not_allowed "admin reload with an environment (caller) token"
admin_reload
tg_expect_status 200 "admin reload with an admin token"
tg_expect_py 'j["result"] == "ok" and j["reloaded"] == ["policy", "tokens", "keys"] and j["failed"] == {} and j["trigger"] == "admin"' \
    "admin reload: every configured part reloaded"
tg_eq "$(metric 'trigguard_reload_total{what="keys",result="ok"}')" 1 "metrics: one keys reload counted"

# ---- tokens: revoke and add, effective right after the reload ---------------------------

evaluate tok-c1
tg_expect_status 200 "c1 evaluates before the revocation"
"$TG_BIN" token revoke --tokens "$D/tokens.json" --subject c1 >/dev/null 2>&1 || tg_fail "token revoke"
NEW=$("$TG_BIN" token create --tokens "$D/tokens.json" --tenant acme --subject c3 2>/dev/null | tail -1)
[ -n "$NEW" ] || tg_fail "token create printed no token"
evaluate tok-c1
tg_expect_status 200 "before the reload the revoked token still works (nothing re-read yet)"
admin_reload
tg_expect_py '"tokens" in j["reloaded"]' "admin reload: tokens reloaded"
evaluate tok-c1
tg_expect_error 401 unauthorized "a revoked token gets 401 right after the admin reload"
evaluate "$NEW"
tg_expect_status 200 "a new token works right after the admin reload"
tg_expect_py 'j["decision"] == "PERMIT"' "the new token gets its PERMIT"
evaluate tok-beta
tg_expect_status 200 "a TRIGGUARD_API_KEYS token survives the reload (the environment cannot change)"
# The same by signal: revoke c3, SIGHUP.
"$TG_BIN" token revoke --tokens "$D/tokens.json" --subject c3 >/dev/null 2>&1 || tg_fail "token revoke c3"
hup
evaluate "$NEW"
tg_expect_error 401 unauthorized "a token revoked and SIGHUPed gets 401 right after"
tg_check "reloaded logged for tokens" grep -q '"event":"reloaded".*tokens reloaded (signal)' "$(tg_logfile rl)"

# ---- a bad file keeps the old state, each part on its own --------------------------------

cp "$D/tokens.json" "$D/tokens.good"
echo '[{"tenant": "acme", "token_sha256": "not hex"}]' >"$D/tokens.json"
admin_reload
tg_expect_status 200 "admin reload with a broken tokens file answers 200"
tg_expect_py 'j["result"] == "failed" and set(j["failed"]) == {"tokens"} and "token_sha256" in j["failed"]["tokens"] and j["reloaded"] == ["policy", "keys"]' \
    "the report: tokens failed (with the JSON path), policy and keys reloaded"
tg_expect_py '"tok-" not in str(j)' "the report names no token"
evaluate tok-adm
tg_expect_status 200 "the old tokens keep working after a failed tokens reload"
tg_req GET /version
tg_expect_py 'j["last_reload"]["result"] == "failed" and "tokens" in j["last_reload"]["failed"]' "version: last_reload shows the tokens failure"
tg_eq "$(metric 'trigguard_reload_total{what="tokens",result="failed"}')" 1 "metrics: the tokens failure counted"
tg_check "reload_failed logged" grep -q '"event":"reload_failed".*tokens: kept the old one' "$(tg_logfile rl)"
cp "$D/tokens.good" "$D/tokens.json"

cp -p "$D/active.pem" "$D/active.good"
echo "not a key" >"$D/active.pem"
hup
tg_req GET /version
tg_expect_py 'set(j["last_reload"]["failed"]) == {"keys"} and j["signing_key_id"] == "rot-k1" and j["last_reload"]["trigger"] == "signal"' \
    "a broken key file: keys failed by signal, rot-k1 still signs"
tg_expect_py '"PRIVATE" not in str(j)' "the key error shows no key material"
evaluate tok-adm
tg_expect_py 'j["receipt"]["authorityKeyId"] == "rot-k1"' "receipts still signed by rot-k1 after the failed keys reload"
tg_eq "$(metric 'trigguard_reload_total{what="keys",result="failed"}')" 1 "metrics: the keys failure counted"
cp -p "$D/active.good" "$D/active.pem"

sed 's/"version": *"itest-1"/"version": "itest-bad", "nonsense": 1/' "$TG_POLICY" >"$D/policy.json"
admin_reload
tg_expect_py 'set(j["failed"]) == {"policy"} and j["reloaded"] == ["tokens", "keys"]' "a broken policy: policy failed, tokens and keys reloaded"
tg_req GET /version
tg_expect_py 'j["policy_version"] == "itest-1"' "the old policy keeps serving"
cp "$TG_POLICY" "$D/policy.json"

# ---- key rotation: publish verify-only, switch, drop ----------------------------------

evaluate tok-adm
tg_save_receipt "$D/R1.json"
cp "$D/k2.pub" "$D/next.pem" # 1. publish the next key, verify-only
admin_reload
tg_expect_py 'j["result"] == "ok"' "rotation 1 (publish rot-k2 verify-only) reloads"
tg_req GET /.well-known/trigguard/keys.json
tg_expect_py 'sorted(k["keyId"] for k in j["keys"]) == ["rot-k1", "rot-k2"]' "keys.json publishes both keys"
tg_expect_header Cache-Control "public, max-age=300" "keys.json may be cached 300 s"
evaluate tok-adm
tg_expect_py 'j["receipt"]["authorityKeyId"] == "rot-k1"' "rot-k1 still signs while rot-k2 is only published"
cp -p "$D/k2.pem" "$D/active.pem" # 2. switch: the next key signs, the old one verifies
cp "$D/k1.pub" "$D/next.pem"
hup
tg_req GET /version
tg_expect_py 'j["signing_key_id"] == "rot-k2" and j["last_reload"]["result"] == "ok"' "rotation 2 (switch): rot-k2 signs"
evaluate tok-adm
tg_expect_py 'j["receipt"]["authorityKeyId"] == "rot-k2"' "receipts after the switch are signed by rot-k2"
tg_save_receipt "$D/R2.json"
tg_check "config_info names rot-k2" bash -c "curl -s '$TG_URL/metrics' | grep -q 'signing_key_id=\"rot-k2\"'"
tg_req POST /v1/verify --json-body "$(cat "$D/R1.json")"
tg_expect_py 'j["valid"] is True' "a receipt signed by rot-k1 before the switch still verifies"
tg_req POST /v1/verify --json-body "$(cat "$D/R2.json")"
tg_expect_py 'j["valid"] is True' "a receipt signed by rot-k2 verifies"
cp "$D/k2.pub" "$D/next.pem" # 3. drop rot-k1: the slot names the active key again
admin_reload
tg_expect_py 'j["result"] == "ok"' "rotation 3 (drop rot-k1) reloads"
tg_req GET /.well-known/trigguard/keys.json
tg_expect_py '[k["keyId"] for k in j["keys"]] == ["rot-k2"]' "keys.json publishes only rot-k2"
tg_req POST /v1/verify --json-body "$(cat "$D/R1.json")"
tg_expect_py 'j["valid"] is False' "once rot-k1 is dropped its receipts no longer verify here"

# ---- reloads under load ---------------------------------------------------------------------

tg_check "6 threads evaluate during 8 SIGHUPs and 4 admin reloads (keys switching each time): no request fails" \
    python3 - "${TG_PORTS[rl]}" "$PID" "$D" <<'PY'
import json, os, shutil, signal, sys, threading, time, tgclient
port, pid, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
stop = threading.Event()
results, lock = [], threading.Lock()
req = {"surface": "payments.charge", "action": "a", "actor": "agent.billing",
       "context": {"amount": 500, "currency": "USD"}}
def worker():
    while not stop.is_set():
        try:
            st, h, body = tgclient.request(port, "POST", "/v1/evaluate", req, tgclient.bearer("tok-adm"))
            r = (st, json.loads(body))
        except Exception as e:
            r = ("error", repr(e))
        with lock:
            results.append(r)
threads = [threading.Thread(target=worker) for _ in range(6)]
for t in threads: t.start()
keys = [("k1.pem", "k2.pub"), ("k2.pem", "k1.pub")]
admins = []
for k in range(12):
    act, nxt = keys[k % 2]
    shutil.copy2(os.path.join(d, act), os.path.join(d, "active.pem.tmp"))
    os.rename(os.path.join(d, "active.pem.tmp"), os.path.join(d, "active.pem"))
    shutil.copy(os.path.join(d, nxt), os.path.join(d, "next.pem.tmp"))
    os.rename(os.path.join(d, "next.pem.tmp"), os.path.join(d, "next.pem"))
    if k % 3 == 2:
        st, h, body = tgclient.request(port, "POST", "/v1/admin/reload", None, tgclient.bearer("tok-adm"))
        admins.append((st, json.loads(body)))
    else:
        os.kill(pid, signal.SIGHUP)
    time.sleep(0.3)
stop.set()
for t in threads: t.join()
bad = [r for r in results if r[0] != 200]
assert not bad, "failed requests during reloads: %r" % bad[:5]
assert len(results) > 50, "too few requests to mean anything: %d" % len(results)
ids = {j["receipt"]["authorityKeyId"] for _, j in results}
assert ids == {"rot-k1", "rot-k2"}, "receipts signed by %r" % ids
assert all(st == 200 and j["result"] == "ok" for st, j in admins), admins
print("%d requests, signed by %s, %d admin reloads" % (len(results), sorted(ids), len(admins)))
PY
tg_check "every reload counted: 14+ keys reloads ok" python3 -c "
import sys, urllib.request
t = urllib.request.urlopen('$TG_URL/metrics').read().decode()
v = [l for l in t.splitlines() if l.startswith('trigguard_reload_total{what=\"keys\",result=\"ok\"}')]
sys.exit(0 if v and int(v[0].split()[1]) >= 14 else 1)"

tg_stop rl
tg_done
