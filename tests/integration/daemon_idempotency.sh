#!/usr/bin/env bash
# daemon_idempotency.sh — idempotent replay (byte for byte), conflicts, the Idempotency-Key
# header alias, concurrent duplicates, single-use nonces, and tenant isolation of both.
source "$(dirname "$0")/lib/daemon.sh"

tg_keygen
tg_std_args main
tg_start main -- "${TG_STD_ARGS[@]}"

expect_replay_of() { # expect_replay_of SAVED LABEL: last response replays saved response
    tg_eq "$TG_STATUS" "$(cat "$TG_TMP/saved-$1.status")" "$2: same status as the original"
    tg_expect_header Idempotent-Replayed true "$2"
    tg_check "$2: body byte-identical to the original" cmp -s "$TG_BODY_FILE" "$(tg_saved_body "$1")"
}

# ---- replay: PERMIT, DENY, SILENCE, /execute ----------------------------------------

tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-permit"')" -H "X-Request-Id: first-1"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "original PERMIT"
tg_expect_no_header Idempotent-Replayed "an original response is not marked replayed"
tg_save permit
tg_jget PERMIT_EXEC 'j["execution_id"]'
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-permit"')" -H "X-Request-Id: retry-1"
expect_replay_of permit "PERMIT retry"
tg_expect_header X-Request-Id retry-1 "a replay carries the retry's own request id"
# Transport-only members and formatting do not change the request: still a replay.
tg_post /v1/evaluate '{"idempotency_key":"k-permit","signals":{"rsdSpike":false,"riskScore":0.12},"context":{"currency":"USD","amount":2500.0},"actor":"agent.billing","action":"transfer_funds","surface":"payments.charge"}'
expect_replay_of permit "PERMIT retry with members reordered"
tg_post "/v1/evaluate?explain=1" "$(tg_req_json permit ',"idempotency_key":"k-permit"')"
expect_replay_of permit "?explain=1 retry replays the stored response"

tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-deny"')"
tg_expect_py "j['decision'] == 'DENY' and 'receipt' in j" "original DENY"
tg_save deny
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-deny"')"
expect_replay_of deny "DENY retry"

tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"k-silence"')"
tg_expect_py "j['decision'] == 'SILENCE' and 'receipt' not in j" "original SILENCE"
tg_save silence
tg_post /v1/evaluate "$(tg_req_json silence ',"idempotency_key":"k-silence"')"
expect_replay_of silence "SILENCE retry"

tg_post /execute "$(tg_req_json deny ',"idempotency_key":"k-exec-deny"')"
tg_expect_py "s == 403 and j['decision'] == 'DENY'" "/execute original DENY (403)"
tg_save execdeny
tg_post /execute "$(tg_req_json deny ',"idempotency_key":"k-exec-deny"')"
expect_replay_of execdeny "/execute DENY retry keeps 403"

# A key replayed on the other route: the stored body byte for byte, with the status of the
# route asked now. /execute must never answer 200 to a DENY or SILENCE first evaluated on
# /v1/evaluate (a gate trusting /execute's status would run the denied action).
for kind in deny silence permit; do
    tg_post /v1/evaluate "$(tg_req_json $kind ",\"idempotency_key\":\"k-cross-$kind\"")"
    tg_save cross-$kind
    tg_post /execute "$(tg_req_json $kind ",\"idempotency_key\":\"k-cross-$kind\"")"
    want=403
    [ $kind = permit ] && want=200
    tg_eq "$TG_STATUS" "$want" "$kind first on /v1/evaluate, replayed on /execute: $want"
    tg_expect_header Idempotent-Replayed true "$kind replayed on /execute"
    tg_check "$kind replayed on /execute: body byte-identical" cmp -s "$TG_BODY_FILE" \
        "$(tg_saved_body cross-$kind)"
done
tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-exec-deny"')"
tg_eq "$TG_STATUS" 200 "DENY first on /execute (403), replayed on /v1/evaluate: 200"
tg_check "/execute DENY replayed on /v1/evaluate: body byte-identical" cmp -s "$TG_BODY_FILE" \
    "$(tg_saved_body execdeny)"

# ?explain=1 on the original: the trace is not stored; the replay is the plain response.
tg_post "/v1/evaluate?explain=1" "$(tg_req_json permit ',"idempotency_key":"k-explain"')"
tg_expect_py "'trace' in j" "explained original has a trace"
tg_save explain
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-explain"')"
tg_expect_header Idempotent-Replayed true "replay after an explained original"
tg_check "replay = the explained response without its trace and explain" python3 -c '
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
a.pop("trace"); a.pop("explain"); sys.exit(a != b or "trace" in b or "explain" in b)' "$(tg_saved_body explain)" "$TG_BODY_FILE"

# ---- conflict --------------------------------------------------------------------------

tg_post /v1/evaluate "$(tg_req_json deny ',"idempotency_key":"k-permit"')"
tg_expect_error 409 idempotency_conflict "same key, different request"
tg_expect_no_header Idempotent-Replayed "a conflict is not a replay"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-permit","subjectDigest":"sha256:00"')"
tg_expect_error 409 idempotency_conflict "same key, request differing only in subjectDigest"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-permit"')"
expect_replay_of permit "the original still replays after conflicts"

# ---- Idempotency-Key header ------------------------------------------------------------

tg_post /v1/evaluate "$(tg_req_json permit)" -H "Idempotency-Key: k-header"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "Idempotency-Key header original"
tg_expect_no_header Idempotent-Replayed "header original"
tg_save header
tg_post /v1/evaluate "$(tg_req_json permit)" -H "Idempotency-Key: k-header"
expect_replay_of header "Idempotency-Key header retry"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-header"')"
expect_replay_of header "body idempotency_key replays the header's key"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-header"')" -H "Idempotency-Key: k-header"
expect_replay_of header "header and body naming the same key"
tg_post /v1/evaluate "$(tg_req_json deny)" -H "Idempotency-Key: k-header"
tg_expect_error 409 idempotency_conflict "header key, different request"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-one"')" -H "Idempotency-Key: k-two"
tg_expect_error 400 invalid_request "header and body keys differ"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-a","intent_id":"k-a"')"
tg_expect_error 400 invalid_request "idempotency_key and intent_id together"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":""')"
tg_expect_error 400 invalid_request "empty idempotency key"
LONGKEY=$(head -c 256 /dev/zero | tr '\0' k)
tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"$LONGKEY\"")"
tg_expect_error 400 invalid_request "256-byte idempotency key (limit 255)"
tg_post /v1/evaluate "$(tg_req_json permit ",\"idempotency_key\":\"${LONGKEY:1}\"")"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "255-byte idempotency key"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":7')"
tg_expect_error 400 invalid_request "numeric idempotency key"

# ---- execution id: derived from tenant, surface, request hash and key --------------------

tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-exec-id"')"
tg_jget EXEC_A 'j["execution_id"]'
tg_jget HASH_A 'j["request_hash"]'
tg_check "execution id = exec_ + 32 hex of SHA-256(tenant,0,surface,0,request_hash,0,key)" python3 -c '
import hashlib, sys
exec_id, rh = sys.argv[1:3]
d = hashlib.sha256(b"acme\0payments.charge\0" + rh.encode() + b"\0k-exec-id").hexdigest()
sys.exit(exec_id != "exec_" + d[:32])' "$EXEC_A" "$HASH_A"

# ---- nonces ----------------------------------------------------------------------------

tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-1"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "first use of a nonce"
tg_jget NONCE_EXEC 'j["execution_id"]'
tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-1"')"
tg_expect_error 409 replay_detected "same request, same nonce"
tg_post /v1/evaluate "$(tg_req_json deny ',"nonce":"n-1"')"
tg_expect_error 409 replay_detected "other request, same nonce"
tg_post /execute "$(tg_req_json permit ',"nonce":"n-1"')"
tg_expect_error 409 replay_detected "nonce reused through /execute"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json permit ',"nonce":"n-1"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['receipt']['tenantId'] == 'beta'" "tenant beta's nonce space is its own"
tg_post /v1/evaluate '{"surface":"no.such.surface","nonce":"n-2"}'
tg_expect_error 400 unknown_surface "rejected request carrying nonce n-2"
tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-2"')"
tg_expect_py "s == 200" "a request rejected before the nonce step does not burn the nonce"
tg_post /v1/evaluate "$(tg_req_json silence ',"nonce":"n-3"')"
tg_expect_py "s == 200 and j['decision'] == 'SILENCE'" "SILENCE with nonce n-3"
tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":"n-3"')"
tg_expect_error 409 replay_detected "a SILENCE decision used its nonce"
tg_post /v1/evaluate "$(tg_req_json permit ',"nonce":""')"
tg_expect_error 400 invalid_request "empty nonce"
# Idempotency (step 5) comes before the nonce check (step 6): a retry with the same key
# and nonce is a replay, not a replay attack.
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-nonce","nonce":"n-4"')"
tg_expect_py "s == 200" "key + nonce original"
tg_save keynonce
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-nonce","nonce":"n-4"')"
expect_replay_of keynonce "retry with the same key and nonce"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-nonce-2","nonce":"n-4"')"
tg_expect_error 409 replay_detected "new key, used nonce"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-nonce-2","nonce":"n-5"')"
tg_expect_py "s == 200 and 'idempotent-replayed' not in h" "a key whose request hit 409 replay_detected is still fresh"

# ---- tenant isolation ------------------------------------------------------------------

tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json permit ',"idempotency_key":"k-permit"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and j['execution_id'] != '$PERMIT_EXEC' and j['receipt']['tenantId'] == 'beta'" \
    "tenant beta reusing acme's key gets its own fresh decision"
tg_expect_no_header Idempotent-Replayed "beta does not get acme's stored response"
tg_save beta
tg_jget BETA_EXEC 'j["execution_id"]'
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json permit ',"idempotency_key":"k-permit"')"
expect_replay_of beta "beta's retry replays beta's response"
tg_req POST /v1/evaluate "${TG_AUTH_B[@]}" --json-body "$(tg_req_json deny ',"idempotency_key":"k-deny-b"')"
tg_expect_py "s == 200 and j['decision'] == 'DENY'" "beta, own key"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-deny-b"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT' and 'idempotent-replayed' not in h" \
    "acme using beta's key for another request: no conflict across tenants"
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-permit"')"
expect_replay_of permit "acme's replay is untouched by beta"
tg_req GET "/v1/receipts/$PERMIT_EXEC" "${TG_AUTH_B[@]}"
tg_expect_error 404 not_found "beta cannot read acme's receipt"
tg_req GET "/v1/receipts/$BETA_EXEC" "${TG_AUTH_A[@]}"
tg_expect_error 404 not_found "acme cannot read beta's receipt"
tg_req GET "/v1/receipts/$BETA_EXEC" "${TG_AUTH_B[@]}"
tg_expect_py "s == 200 and j['tenantId'] == 'beta' and j['executionId'] == '$BETA_EXEC'" "beta reads its own receipt"
tg_req GET "/v1/receipts/$NONCE_EXEC" "${TG_AUTH_A[@]}"
tg_expect_py "s == 200 and j['executionId'] == '$NONCE_EXEC'" "acme reads its own receipt"

# ---- concurrent duplicates --------------------------------------------------------------

PORT=${TG_PORTS[main]}
tg_check "concurrent duplicates: one original, the rest replays or 409 in flight, one execution id" \
    python3 - "$PORT" <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
N = 32
req = {"surface": "payments.charge", "action": "transfer_funds", "actor": "agent.billing",
       "context": {"amount": 99, "currency": "EUR"}, "signals": {"riskScore": 0.05},
       "idempotency_key": "k-concurrent"}

def metric(name):
    st, _, body = tgclient.request(port, "GET", "/metrics")
    return tgclient.metric(tgclient.parse_prometheus(body.decode())[0], name)

before = metric("trigguard_ledger_records_total")
results = tgclient.post_together(port, [req] * N, "tok-acme")
originals = [r for r in results if r[0] == 200 and "idempotent-replayed" not in r[1]]
replays = [r for r in results if r[0] == 200 and r[1].get("idempotent-replayed") == "true"]
inflight = [r for r in results if r[0] == 409]
other = [r for r in results if r[0] not in (200, 409)]
print("originals %d, replays %d, 409 %d, other %d" % (len(originals), len(replays), len(inflight), len(other)))
assert not other, "unexpected statuses: %r" % [(r[0], r[2][:200]) for r in other]
assert len(originals) == 1, "expected exactly one original"
orig = originals[0][2]
ids = {json.loads(r[2])["execution_id"] for r in originals + replays}
assert len(ids) == 1, "several execution ids: %s" % ids
for r in replays:
    assert r[2] == orig, "a replay differs from the original"
for r in inflight:
    assert json.loads(r[2])["error"] == "idempotency_conflict", r[2]
st, h, body = tgclient.request(port, "POST", "/v1/evaluate", req, tgclient.bearer("tok-acme"))
assert st == 200 and h.get("idempotent-replayed") == "true" and body == orig, "later retry"
after = metric("trigguard_ledger_records_total")
assert after - before == 1, "ledger records grew by %s, expected 1" % (after - before)
PY

tg_check "concurrent different requests on one key: one wins, the others 409" \
    python3 - "$PORT" <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
N = 16
reqs = [{"surface": "example", "action": "a%d" % i, "idempotency_key": "k-race"} for i in range(N)]
results = tgclient.post_together(port, reqs, "tok-acme")
ok = [r for r in results if r[0] == 200]
rej = [r for r in results if r[0] == 409 and json.loads(r[2])["error"] == "idempotency_conflict"]
assert len(ok) == 1 and len(rej) == N - 1, "200: %d, 409: %d, statuses %s" % (len(ok), len(rej), [r[0] for r in results])
winner = json.loads(ok[0][2])
req = {"surface": "example", "action": winner["receipt"]["action"], "idempotency_key": "k-race"}
st, h, body = tgclient.request(port, "POST", "/v1/evaluate", req, tgclient.bearer("tok-acme"))
assert st == 200 and h.get("idempotent-replayed") == "true" and body == ok[0][2], "winner's retry"
PY

tg_check "concurrent reuse of one nonce: exactly one 200, the rest 409 replay_detected" \
    python3 - "$PORT" <<'PY'
import json, sys, tgclient
port = int(sys.argv[1])
N = 16
reqs = [{"surface": "example", "action": "n%d" % i, "nonce": "n-concurrent"} for i in range(N)]
results = tgclient.post_together(port, reqs, "tok-acme")
ok = [r for r in results if r[0] == 200]
rej = [r for r in results if r[0] == 409 and json.loads(r[2])["error"] == "replay_detected"]
assert len(ok) == 1 and len(rej) == N - 1, "200: %d, 409: %d, statuses %s" % (len(ok), len(rej), [r[0] for r in results])
PY

tg_req GET /metrics
tg_check "replays are counted in /metrics" python3 - "$TG_BODY_FILE" <<'PY'
import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
v = tgclient.metric(s, "trigguard_idempotent_replays_total")
assert v >= 14, v
PY

# ---- a stored response whose ledger record cannot be read back --------------------------
# Entries keep the record's ledger position; a replay rebuilds the response from the record.
# If the record no longer verifies, the retry gets 500 and is not executed a second time.
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-damaged"')"
tg_expect_py "s == 200 and j['decision'] == 'PERMIT'" "original before the damage"
records_of() { # records_of -> $RECORDS: trigguard_ledger_records_total
    tg_req GET /metrics
    RECORDS=$(python3 -c 'import sys, tgclient
s, _ = tgclient.parse_prometheus(open(sys.argv[1]).read())
print(int(tgclient.metric(s, "trigguard_ledger_records_total")))' "$TG_BODY_FILE")
}
records_of
before=$RECORDS
if [ "${TG_TEST_STORE:-file}" == postgres ]; then
    tg_check "flip a byte inside the last record's payload" "$TG_PG_PSQL" "$(tg_pg_store_url main)" \
        -X -q -v ON_ERROR_STOP=1 -c "update tg_records set payload = set_byte(payload,
        length(payload) / 2, get_byte(payload, length(payload) / 2) # 32)
        where seq = (select max(seq) from tg_records)"
else
tg_check "flip a byte inside the last record's payload" python3 - "$TG_TMP/ledger-main" <<'PY'
import glob, os, struct, sys
seg = sorted(glob.glob(os.path.join(sys.argv[1], "ledger-*.tgl")))[-1]
data = open(seg, "rb").read()
off, last = 0, None
while off + 60 <= len(data):   # header: magic(4) ver type flags(2) seq(8) prev(32) mlen(4) plen(4) check(4)
    mlen, plen = struct.unpack("<II", data[off + 48:off + 56])
    last = (off, mlen, plen)
    off += 60 + mlen + plen + 32
off, mlen, plen = last
pos = off + 60 + mlen + plen // 2
with open(seg, "r+b") as f:
    f.seek(pos)
    b = f.read(1)
    f.seek(pos)
    f.write(bytes([b[0] ^ 0x20]))
PY
fi
tg_post /v1/evaluate "$(tg_req_json permit ',"idempotency_key":"k-damaged"')"
tg_expect_py "s == 500 and j['error'] == 'internal_error'" "retry of a damaged record: 500"
tg_expect_no_header Idempotent-Replayed "the 500 is not a replay"
records_of
tg_eq "$RECORDS" "$before" "the retry was not executed again (no new ledger record)"
tg_check "the log names the failed rebuild" grep -q '"event":"idempotent_replay"' "$(tg_logfile main)"

tg_stop main
tg_done
