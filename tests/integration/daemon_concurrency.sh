#!/usr/bin/env bash
# daemon_concurrency.sh — 16 client threads x 100 requests (two tenants, all three
# decisions, /v1/evaluate, /execute, /decide) against one daemon: every answer correct,
# execution ids unique, every receipt verifies, the metrics add up, and the ledger holds
# exactly the decisions made, with a valid chain and valid signatures.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}"
tg_fetch_keys "$TG_TMP/keys.json"

python3 - "${TG_PORTS[main]}" "$TG_TMP" <<'PY' || tg_fail "the concurrent load found wrong answers (see above)"
import json, sys, threading, time, tgclient
port, tmp = int(sys.argv[1]), sys.argv[2]
THREADS, PER_THREAD = 16, 100
tokens = {"acme": "tok-acme", "beta": "tok-beta"}

def plan(t, i):
    """(tenant, path, body, expected status, expected decision, expected reason)"""
    tenant = "acme" if t % 2 == 0 else "beta"
    k = (t * PER_THREAD + i) % 10
    key = "c-%d-%d" % (t, i)
    base = {"surface": "payments.charge", "action": "pay", "actor": "agent.billing",
            "context": {"amount": 100 + i, "currency": "USD"}, "signals": {"riskScore": 0.05}}
    if k <= 4:
        return tenant, "/v1/evaluate", dict(base, idempotency_key=key), 200, "PERMIT", "NO_POLICY_VIOLATION"
    if k == 5:
        return tenant, "/v1/evaluate", dict(base, nonce="n-" + key), 200, "PERMIT", "NO_POLICY_VIOLATION"
    if k == 6:
        b = dict(base, idempotency_key=key, context={"amount": 20000 + i, "currency": "USD"},
                 signals={"riskScore": 0.2})
        return tenant, "/v1/evaluate", b, 200, "DENY", "HIGH_RISK_SPEND"
    if k == 7:
        b = dict(base, idempotency_key=key, context={"currency": "USD"})
        return tenant, "/v1/evaluate", b, 200, "SILENCE", "MISSING_CONTEXT"
    if k == 8:
        return tenant, "/decide", base, 200, "PERMIT", "NO_POLICY_VIOLATION"
    b = dict(base, idempotency_key=key, actor="agent.mallory")
    return tenant, "/execute", b, 403, "DENY", "ACTOR_NOT_AUTHORIZED"

results = []
lock = threading.Lock()
barrier = threading.Barrier(THREADS)
def worker(t):
    barrier.wait()
    mine = []
    for i in range(PER_THREAD):
        tenant, path, body, want_st, want_dec, want_reason = plan(t, i)
        try:
            st, h, data = tgclient.request(port, "POST", path, body, tgclient.bearer(tokens[tenant]))
            mine.append((t, i, tenant, path, want_st, want_dec, want_reason, st, h, data))
        except Exception as e:
            mine.append((t, i, tenant, path, want_st, want_dec, want_reason, "error", {}, repr(e).encode()))
    with lock:
        results.extend(mine)
t0 = time.monotonic()
threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
for th in threads: th.start()
for th in threads: th.join()
elapsed = time.monotonic() - t0
problems = []
exec_ids, receipts = {}, []
counts = {}
for (t, i, tenant, path, want_st, want_dec, want_reason, st, h, data) in results:
    where = "thread %d request %d %s" % (t, i, path)
    if st != want_st:
        problems.append("%s: status %s, want %s: %s" % (where, st, want_st, data[:200]))
        continue
    j = json.loads(data)
    if j["decision"] != want_dec or j["reason_code"] != want_reason:
        problems.append("%s: %s/%s, want %s/%s" % (where, j["decision"], j["reason_code"], want_dec, want_reason))
    if "idempotent-replayed" in h:
        problems.append("%s: unexpected replay" % where)
    counts[(path, want_dec)] = counts.get((path, want_dec), 0) + 1
    if path == "/decide":
        if set(j) != {"decision", "reason_code", "policy_version", "policy_hash"}:
            problems.append("%s: /decide members %s" % (where, sorted(j)))
        continue
    eid = j["execution_id"]
    if eid in exec_ids:
        problems.append("%s: execution id %s also used by %s" % (where, eid, exec_ids[eid]))
    exec_ids[eid] = where
    if want_dec == "SILENCE":
        if "receipt" in j:
            problems.append("%s: SILENCE with a receipt" % where)
        continue
    r = j["receipt"]
    if r["tenantId"] != tenant or r["executionId"] != eid or r["requestHash"] != j["request_hash"] \
            or r["decision"] != want_dec:
        problems.append("%s: receipt does not match the response: %s" % (where, r))
    receipts.append((tenant, r))
print("%d requests in %.1fs (%.0f/s); %d receipts; outcomes %s"
      % (len(results), elapsed, len(results) / elapsed, len(receipts), sorted(counts.items())))
if len(results) != THREADS * PER_THREAD:
    problems.append("only %d results" % len(results))
if problems:
    print("\n".join(problems[:30])); sys.exit(1)
json.dump({"receipts": [r for _, r in receipts], "tenants": [t for t, _ in receipts],
           "signed": len(receipts), "recorded": len(exec_ids),
           "decide": counts.get(("/decide", "PERMIT"), 0)}, open(tmp + "/conc.json", "w"))
PY

tg_check "conc.json written by the load run" test -s "$TG_TMP/conc.json"

# Every receipt verifies: independently in python (when 'cryptography' is present),
# through POST /v1/verify for all, and with `trigguard verify` for a sample.
if python3 -c 'import tgclient,sys; sys.exit(not tgclient.have_crypto())'; then
    tg_check "all receipts verify with an independent Ed25519/JCS verifier" python3 - "$TG_TMP" <<'PY'
import json, sys, tgclient
d = json.load(open(sys.argv[1] + "/conc.json"))
keys = json.load(open(sys.argv[1] + "/keys.json"))
bad = [(r["executionId"], why) for r in d["receipts"] for why in [tgclient.verify_receipt(r, keys)] if why]
assert not bad, bad[:5]
print("%d receipts verified independently" % len(d["receipts"]))
PY
else
    tg_log "note: python 'cryptography' missing, independent verifier skipped"
fi
tg_check "all receipts verify at POST /v1/verify, and each tenant reads only its own" \
    python3 - "${TG_PORTS[main]}" "$TG_TMP" <<'PY'
import json, sys, threading, tgclient
port, tmp = int(sys.argv[1]), sys.argv[2]
d = json.load(open(tmp + "/conc.json"))
items = list(zip(d["tenants"], d["receipts"]))
bad, lock = [], threading.Lock()
other = {"acme": "tok-beta", "beta": "tok-acme"}
own = {"acme": "tok-acme", "beta": "tok-beta"}
def check(chunk):
    for k, (tenant, r) in enumerate(chunk):
        st, _, body = tgclient.request(port, "POST", "/v1/verify", r)
        j = json.loads(body)
        if st != 200 or j["valid"] is not True:
            with lock: bad.append(("verify", r["executionId"], body[:200]))
        if k % 10 == 0:  # receipt reads: own tenant 200 and identical, other tenant 404
            st, _, body = tgclient.request(port, "GET", "/v1/receipts/" + r["executionId"], None, tgclient.bearer(own[tenant]))
            if st != 200 or json.loads(body) != r:
                with lock: bad.append(("own read", r["executionId"], st))
            st, _, _ = tgclient.request(port, "GET", "/v1/receipts/" + r["executionId"], None, tgclient.bearer(other[tenant]))
            if st != 404:
                with lock: bad.append(("cross-tenant read", r["executionId"], st))
ths = [threading.Thread(target=check, args=(items[i::8],)) for i in range(8)]
for t in ths: t.start()
for t in ths: t.join()
assert not bad, bad[:5]
PY
python3 - "$TG_TMP" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/conc.json"))
for k, r in enumerate(d["receipts"][::max(1, len(d["receipts"]) // 8)][:8]):
    json.dump(r, open("%s/sample-%d.json" % (sys.argv[1], k), "w"))
PY
for f in "$TG_TMP"/sample-*.json; do
    out=$("$TG_BIN" verify --keys "$TG_TMP/keys.json" "$f" 2>&1)
    tg_eq "$?:$out" "0:VALID" "trigguard verify $(basename "$f")"
done

# The metrics add up to exactly what was sent.
SIGNED=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["signed"])' "$TG_TMP/conc.json")
RECORDED=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["recorded"])' "$TG_TMP/conc.json")
tg_req GET /metrics
tg_check "metrics count every request and decision of the run" python3 - "$TG_BODY_FILE" "$RECORDED" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
recorded = int(sys.argv[2])
m = lambda n, **l: int(tgclient.metric(s, n, **l))
want = {
    ("trigguard_http_requests_total", (("route", "/v1/evaluate"), ("status", "200"))): 1280,
    ("trigguard_http_requests_total", (("route", "/execute"), ("status", "403"))): 160,
    ("trigguard_http_requests_total", (("route", "/decide"), ("status", "200"))): 160,
    ("trigguard_decisions_total", (("decision", "PERMIT"), ("surface", "payments.charge"))): 1120,
    ("trigguard_decisions_total", (("decision", "DENY"), ("surface", "payments.charge"))): 320,
    ("trigguard_decisions_total", (("decision", "SILENCE"), ("surface", "payments.charge"))): 160,
    ("trigguard_ledger_records_total", ()): recorded,
    ("trigguard_in_flight", ()): 0,
}
bad = ["%s%s = %d, want %d" % (n, dict(l), m(n, **dict(l)), v) for (n, l), v in want.items() if m(n, **dict(l)) != v]
assert recorded == 1440, recorded
assert not bad, bad
PY
tg_stop main

if [ "${TG_TEST_STORE:-file}" == postgres ]; then
    out=$("$TG_BIN" ledger verify --database-url "$(tg_pg_store_url main)" --keys "$TG_TMP/keys.json" 2>&1)
    tg_eq "$?" 0 "trigguard ledger verify --database-url --keys after the run"
    tg_check "the database holds exactly the decisions made: $out" grep -q \
        "records: *$RECORDED ($SIGNED receipts, $((RECORDED - SIGNED)) silence)" <<<"$out"
    tg_check "every signature verified: $out" grep -q "signatures: $SIGNED verified" <<<"$out"
    tg_done
fi
out=$("$TG_BIN" ledger verify "$TG_TMP/ledger-main" --keys "$TG_TMP/keys.json" --json 2>&1)
tg_eq "$?" 0 "trigguard ledger verify --keys after the run"
tg_check "the ledger holds exactly the decisions made: $out" python3 -c '
import json, sys
j = json.loads(sys.argv[1]); signed, recorded = int(sys.argv[2]), int(sys.argv[3])
sys.exit(not (j["ok"] and j["records"] == recorded and j["receipts"] == signed
              and j["silences"] == recorded - signed and j["signatures_verified"] == signed))' \
    "$out" "$SIGNED" "$RECORDED"

tg_done
