#!/usr/bin/env bash
# pg_instances.sh — two instances sharing one PostgreSQL, behind nginx (scripts/lib/lb.sh, as
# scripts/cluster runs them), keep the one-instance contract across both (SPEC §13): 10,000
# requests over 1,000 idempotency keys sent to either instance at random make exactly 1,000
# records, every replay is the first response byte for byte; another request under a used
# key is 409; a key fired at both instances at once executes once; a reused nonce is 409
# replay_detected whichever instance saw it first; every receipt is readable from both; a
# second tenant reads and replays nothing of the first; the records verify. serve refuses a
# database without the schema, or with a newer one.
# shellcheck source=tests/integration/lib/daemon.sh
source "$(dirname "$0")/lib/daemon.sh"
# shellcheck source=tests/integration/lib/pgtest.sh
source "$(dirname "$0")/lib/pgtest.sh"

tg_keygen "$TG_TMP/key.pem"
# serve_refused NAME URL: `serve --store postgres` on URL exits non-zero without listening
# (at most 30 s); its exit status in $rc, its stderr in $TG_TMP/NAME.err.
serve_refused() {
    timeout 30 env TRIGGUARD_API_KEYS="$TG_API_KEYS" "$TG_BIN" serve --port 0 \
        --policy "$TG_POLICY" --key "$TG_KEY" --store postgres --database-url "$2" \
        >"$TG_TMP/$1.out" 2>"$TG_TMP/$1.err"
    rc=$?
}
serve_refused unmigrated "$TG_PG_URL"
tg_check "serve refuses a database without the schema (exit $rc: $(head -c 200 "$TG_TMP/unmigrated.err"))" \
    test "$rc" -ne 0 -a "$rc" -ne 124
pg_migrate
newdb tgnewer
run mnewer db migrate --database-url "$url_new"
sql "$url_new" "insert into trigguard_schema (version) values (99)" >/dev/null
serve_refused newer "$url_new"
tg_check "serve refuses a newer schema with exit 2 (exit $rc: $(head -c 200 "$TG_TMP/newer.err"))" \
    test "$rc" -eq 2
pg_serve a
pg_serve b
pg_lb a b
A=${TG_PORTS[a]} B=${TG_PORTS[b]}
tg_log "instances on $A and $B, nginx on $LB_PORT"

# Each instance's generated request ids share a prefix of its own (all but the counter).
tg_check "the balancer answers /readyz 200 from both instances in turn" python3 - "$LB_PORT" <<'PY'
import sys, pgload
lb = int(sys.argv[1])
ids = set()
for _ in range(4):
    st, h, _ = pgload.one(lb, "GET", "/readyz")
    assert st == 200, st
    ids.add(h["x-request-id"][:-8])
assert len(ids) == 2, ids
PY

# ---- 10,000 requests over 1,000 keys, each to a or b or through nginx, at random ----------
tg_check "10,000 requests over 1,000 keys: one execution per key, every replay byte-identical" \
    python3 - "$A" "$B" "$LB_PORT" "$TG_TMP/originals.json" <<'PY'
import json, random, sys, pgload
a, b, lb, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
KEYS, REPS = 1000, 10

def req(i):
    # 8 PERMITs, a DENY and a SILENCE in every ten keys; each key its own request
    if i % 10 == 9:
        r = pgload.permit(idempotency_key="k-%d" % i)
        del r["context"]["amount"]
        r["context"]["note"] = "silence-%d" % i
        return r
    return pgload.permit(idempotency_key="k-%d" % i, amount=(10001 + i) if i % 10 == 8 else 1 + i)

rng = random.Random(19)
jobs = [(i, rng.choice((a, b, lb))) for i in range(KEYS) for _ in range(REPS)]
rng.shuffle(jobs)
res = pgload.fire([(port, "POST", "/v1/evaluate", req(i), "tok-acme") for i, port in jobs], 16)
by_key = {}
for (i, port), r in zip(jobs, res):
    by_key.setdefault(i, []).append((port, r))
bad = [(i, p, r[0], r[2][:200]) for i, rs in by_key.items() for p, r in rs
       if not (r[0] == 200 or (r[0] == 409 and pgload.error_code(r[2]) == "idempotency_conflict"))]
assert not bad, "answers other than 200 or 409 idempotency_conflict: %d, first %r" % (len(bad), bad[:3])
originals, replays, conflicts = {}, 0, 0
for i, rs in by_key.items():
    first = [r for p, r in rs if r[0] == 200 and r[1].get("idempotent-replayed") != "true"]
    assert len(first) <= 1, "key k-%d executed %d times" % (i, len(first))
    conflicts += sum(1 for p, r in rs if r[0] == 409)
    if first:
        originals[i] = first[0][2]
for i, rs in by_key.items():
    for p, r in rs:
        if r[0] == 200 and r[1].get("idempotent-replayed") == "true":
            replays += 1
            assert i in originals, "k-%d: a replay without an original answer" % i
            assert r[2] == originals[i], "k-%d: a replay from port %d differs from the original" % (i, p)
# every key once more, at random: a replay of what the first answer was
again = [(i, rng.choice((a, b, lb))) for i in range(KEYS)]
res2 = pgload.fire([(port, "POST", "/v1/evaluate", req(i), "tok-acme") for i, port in again], 16)
for (i, port), r in zip(again, res2):
    assert r[0] == 200 and r[1].get("idempotent-replayed") == "true", \
        "k-%d on port %d afterwards: %d %r %r" % (i, port, r[0], r[1].get("idempotent-replayed"), r[2][:200])
    if i in originals:
        assert r[2] == originals[i], "k-%d: the later replay differs from the original" % i
    else:
        originals[i] = r[2]  # every one of its ten tries met the first in flight
decisions = {}
for i, body in originals.items():
    j = json.loads(body)
    decisions[j["decision"]] = decisions.get(j["decision"], 0) + 1
assert decisions == {"PERMIT": 800, "DENY": 100, "SILENCE": 100}, decisions
json.dump({str(i): body.decode() for i, body in originals.items()}, open(out, "w"))
print("originals answered %d, replays %d, 409 in flight %d" % (len(originals), replays, conflicts))
PY
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records")" 1000 "exactly 1,000 records for 1,000 keys"
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_idem_claims where tenant = 'acme' and state = 'done'")" \
    1000 "1,000 done idempotency claims"
tg_eq "$(sql "$TG_PG_URL" "select count(distinct instance_id) from tg_records")" 2 "both instances wrote records"
pg_no_double_execution "10,000 requests"

# ---- another request under a used key: 409 on either instance ------------------------------
tg_check "another request under a used key: 409 idempotency_conflict from a, b and nginx" \
    python3 - "$A" "$B" "$LB_PORT" <<'PY'
import sys, pgload
ports = [int(p) for p in sys.argv[1:4]]
jobs = [(ports[i % 3], "POST", "/v1/evaluate",
         pgload.permit(idempotency_key="k-%d" % i, amount=5000 + i), "tok-acme") for i in range(0, 300)]
res = pgload.fire(jobs, 8)
bad = [(i, r[0], r[2][:160]) for i, r in enumerate(res)
       if r[0] != 409 or pgload.error_code(r[2]) != "idempotency_conflict" or "idempotent-replayed" in r[1]]
assert not bad, "%d not 409 idempotency_conflict, first %r" % (len(bad), bad[:3])
PY
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records")" 1000 "conflicting requests wrote nothing"

# ---- one key fired at both instances at the same moment -----------------------------------
tg_check "a key fired at a and b at once: one execution, the other a 409 or the same response" \
    python3 - "$A" "$B" <<'PY'
import sys, threading, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
stats = {"409": 0, "replay": 0}
for n in range(200):
    req = pgload.permit(idempotency_key="dup-%d" % n, amount=100 + n)
    barrier = threading.Barrier(2)
    out = [None, None]
    def go(k, port):
        barrier.wait()
        out[k] = pgload.one(port, "POST", "/v1/evaluate", req, "tok-acme")
    ts = [threading.Thread(target=go, args=(k, p)) for k, p in ((0, a), (1, b))]
    for t in ts: t.start()
    for t in ts: t.join()
    first = [r for r in out if r[0] == 200 and r[1].get("idempotent-replayed") != "true"]
    assert len(first) == 1, "dup-%d: %d originals: %r" % (n, len(first), [(r[0], r[2][:120]) for r in out])
    for r in out:
        if r is first[0]:
            continue
        if r[0] == 409:
            assert pgload.error_code(r[2]) == "idempotency_conflict", r[2]
            stats["409"] += 1
        else:
            assert r[0] == 200 and r[1].get("idempotent-replayed") == "true", (r[0], r[2][:200])
            assert r[2] == first[0][2], "dup-%d: two different responses" % n
            stats["replay"] += 1
    for port in (a, b):
        st, h, body = pgload.one(port, "POST", "/v1/evaluate", req, "tok-acme")
        assert st == 200 and h.get("idempotent-replayed") == "true" and body == first[0][2], \
            "dup-%d retried on %d: %d %r" % (n, port, st, body[:200])
print("the loser got 409 %d times, the replay %d times" % (stats["409"], stats["replay"]))
PY
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records")" 1200 "200 duplicated keys made 200 records"
pg_no_double_execution "concurrent duplicates"

# ---- nonces: single-use across the instances -----------------------------------------------
tg_check "1,000 nonces used on one instance, reused on the other: 1,000 replay_detected" \
    python3 - "$A" "$B" <<'PY'
import sys, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
first = pgload.fire([((a, b)[i % 2], "POST", "/v1/evaluate", pgload.permit(nonce="n-%d" % i, amount=1 + i),
                      "tok-acme") for i in range(1000)], 16)
bad = [(i, r[0], r[2][:160]) for i, r in enumerate(first) if r[0] != 200]
assert not bad, "first uses not 200: %d, first %r" % (len(bad), bad[:3])
again = pgload.fire([((b, a)[i % 2], "POST", "/v1/evaluate", pgload.permit(nonce="n-%d" % i, amount=2 + i),
                      "tok-acme") for i in range(1000)], 16)
hits = sum(1 for r in again if r[0] == 409 and pgload.error_code(r[2]) == "replay_detected")
assert hits == 1000, "replay_detected %d of 1000; others %r" % (
    hits, [(r[0], r[2][:160]) for r in again if pgload.error_code(r[2]) != "replay_detected"][:3])
PY
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_nonces where tenant = 'acme'")" 1000 "1,000 nonces stored"
tg_eq "$(sql "$TG_PG_URL" "select count(*) from tg_records")" 2200 "reused nonces wrote nothing"

# ---- a replay on the other instance keeps the rules of one ----------------------------------
tg_check "a key's replay on the other instance: the route's status, and before its nonce" \
    python3 - "$A" "$B" <<'PY'
import sys, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
deny = pgload.permit(idempotency_key="x-deny", amount=20000)
st, h, body = pgload.one(a, "POST", "/v1/evaluate", deny, "tok-acme")
assert st == 200 and b'"DENY"' in body, (st, body[:200])
st2, h2, body2 = pgload.one(b, "POST", "/execute", deny, "tok-acme")
assert st2 == 403 and h2.get("idempotent-replayed") == "true" and body2 == body, \
    ("a DENY from a's /v1/evaluate replayed on b's /execute", st2, body2[:200])
permit = pgload.permit(idempotency_key="x-permit", nonce="x-nonce")
st, h, body = pgload.one(b, "POST", "/execute", permit, "tok-acme")
assert st == 200 and b'"PERMIT"' in body, (st, body[:200])
st2, h2, body2 = pgload.one(a, "POST", "/v1/evaluate", permit, "tok-acme")
assert st2 == 200 and h2.get("idempotent-replayed") == "true" and body2 == body, \
    ("the same key and nonce again on a: a replay, not replay_detected", st2, body2[:200])
st3, h3, body3 = pgload.one(a, "POST", "/v1/evaluate", pgload.permit(idempotency_key="x-other", nonce="x-nonce"), "tok-acme")
assert st3 == 409 and pgload.error_code(body3) == "replay_detected", (st3, body3[:200])
PY

# ---- receipts: each one from either instance ---------------------------------------------
tg_check "every PERMIT and DENY receipt of the 1,000 keys is served by a and by b" \
    python3 - "$A" "$B" "$TG_TMP/originals.json" <<'PY'
import json, sys, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
orig = {k: json.loads(v) for k, v in json.load(open(sys.argv[3])).items()}
signed = [j for j in orig.values() if "receipt" in j]
assert len(signed) == 900, len(signed)
jobs = [(port, "GET", "/v1/receipts/" + j["execution_id"], None, "tok-acme") for j in signed for port in (a, b)]
res = pgload.fire(jobs, 16)
for job, r in zip(jobs, res):
    assert r[0] == 200, "%s on %d: %d %r" % (job[2], job[0], r[0], r[2][:200])
by_exec = {j["execution_id"]: j["receipt"] for j in signed}
for (port, _, path, _, _), r in zip(jobs, res):
    exec_id = path.rsplit("/", 1)[1]
    assert json.loads(r[2]) == by_exec[exec_id], "%s on %d: not the receipt of the response" % (path, port)
PY

# ---- tenants: beta sees nothing of acme's ---------------------------------------------------
tg_check "tenant beta can neither read acme's receipts nor replay acme's keys, on either instance" \
    python3 - "$A" "$B" "$TG_TMP/originals.json" <<'PY'
import json, sys, pgload
a, b = int(sys.argv[1]), int(sys.argv[2])
orig = {int(k): v for k, v in json.load(open(sys.argv[3])).items()}
for i in (0, 1, 2, 3, 4, 5, 6, 7, 10, 11):  # PERMITs (k-8 is a DENY, k-9 a SILENCE)
    j = json.loads(orig[i])
    for port in (a, b):
        st, h, body = pgload.one(port, "GET", "/v1/receipts/" + j["execution_id"], None, "tok-beta")
        assert st == 404 and pgload.error_code(body) == "not_found", (port, st, body[:200])
    req = pgload.permit(idempotency_key="k-%d" % i, amount=1 + i)
    st, h, body = pgload.one(a, "POST", "/v1/evaluate", req, "tok-beta")
    jb = json.loads(body)
    assert st == 200 and "idempotent-replayed" not in h, ("beta under acme's key", st, h)
    assert jb["execution_id"] != j["execution_id"] and jb["receipt"]["tenantId"] == "beta", jb
    st, h, body2 = pgload.one(b, "POST", "/v1/evaluate", req, "tok-beta")
    assert st == 200 and h.get("idempotent-replayed") == "true" and body2 == body, "beta's replay on b"
    st, h, body3 = pgload.one(b, "POST", "/v1/evaluate", req, "tok-acme")
    assert st == 200 and h.get("idempotent-replayed") == "true" and body3 == orig[i].encode(), \
        ("acme's replay", st, body3[:200])
    st, h, body = pgload.one(b, "GET", "/v1/receipts/" + jb["execution_id"], None, "tok-acme")
    assert st == 404, ("acme reads beta's receipt", st)
# a nonce acme used is fresh for beta
st, h, body = pgload.one(b, "POST", "/v1/evaluate", pgload.permit(nonce="n-1"), "tok-beta")
assert st == 200, ("beta's own nonce space", st, body[:200])
PY

# ---- the records the two instances wrote verify --------------------------------------------
tg_fetch_keys "$TG_TMP/keys.json"
run verify ledger verify --database-url "$TG_PG_URL" --keys "$TG_TMP/keys.json"
tg_eq "$rc" 0 "ledger verify --database-url over both instances' chains ($(head -c 300 "$TG_TMP/verify.out" "$TG_TMP/verify.err"))"

tg_check "stop nginx" tg_lb_stop
tg_stop a
tg_stop b
tg_check "stop PostgreSQL" tg_pg_stop
tg_done
