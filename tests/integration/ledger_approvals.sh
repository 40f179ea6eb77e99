#!/usr/bin/env bash
# ledger_approvals.sh — `trigguard ledger verify` audits approvals (SPEC §11.2) from the
# records alone: a valid two-approver history exits 0 with its counts; a duplicated approver
# and a PERMIT without quorum exit 1 naming the record's seq, the approval and the problem.
# The records are written here from docs/LEDGER.md's description (an independent writer of
# the approval document), appended with `ledger append`.
set -u
BIN=${TG_BIN:?TG_BIN must point at the trigguard binary}
WORK=$(mktemp -d /tmp/tg_ledger_approvals.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 2
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

run() {
    local name=$1 want=$2
    shift 2
    OUT=$("$@" 2>&1)
    local got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$name: exit $got, wanted $want"
        echo "$OUT" | sed 's/^/    /'
        return 1
    fi
    ok "$name"
}

contains() {
    if ! grep -qF -- "$2" <<<"$OUT"; then
        fail "$1: output lacks '$2'"
        echo "$OUT" | sed 's/^/    /'
    fi
}

# gen DIR CASE: writes one record per line of the case into DIR/rec-N.{type,meta,payload}.
cat >gen.py <<'EOF'
import json, os, sys

ID = "appr_0123456789abcdef0123456789abcdef"
EXEC = "exec_00112233445566778899aabbccddeeff"
EXEC2 = "exec_ffeeddccbbaa99887766554433221100"
RH = "01" * 32
T0 = 1796017500000

def canon(o):  # ASCII only, integers only: sorted and compact is RFC 8785 here
    return json.dumps(o, sort_keys=True, separators=(",", ":"))

def state(v, status, reviews, resolved=None, consumed=None):
    d = {"approvers": ["@ops", "alice"], "consumeWithinMs": 900000, "createdAt": T0,
         "escalationId": EXEC, "expiresAt": T0 + 3600000, "id": ID, "reason": "NEEDS_TWO",
         "requestHash": RH, "required": 2, "rule": "big", "status": status,
         "surface": "payments", "tenant": "acme", "v": v,
         "reviews": [{"at": at, "decision": "approve", "entry": e, "subject": s}
                     for (s, e, at) in reviews]}
    if resolved is not None:
        d["resolvedAt"] = resolved
    if consumed is not None:
        d["consumedAt"], d["consumedBy"] = consumed, EXEC2
    return d

def meta(a, at):
    return canon({"a": a, "at": at, "rh": RH, "s": 200, "t": "acme"})

def escalate():
    p = {"approvalId": ID, "decision": "ESCALATE", "executionId": EXEC, "requestHash": RH,
         "tenantId": "acme", "reasonCode": "NEEDS_TWO"}
    return ("receipt", meta(state(1, "pending", []), T0), canon(p))

def iso(ms):
    import datetime
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)

def review(a, subject, entry, at):
    p = {"approvalId": ID, "at": iso(at), "decision": "approve", "entry": entry,
         "event": "review", "requestHash": RH, "status": a["status"], "subject": subject,
         "tenantId": "acme", "type": "approval"}
    return ("approval", meta(a, at), canon(p))

def permit(a, approvals, at):
    p = {"approvalId": ID, "approvals": [{"at": iso(t), "decision": "approve", "subject": s}
                                         for (s, t) in approvals],
         "decision": "PERMIT", "executionId": EXEC2, "requestHash": RH, "tenantId": "acme",
         "reasonCode": "APPROVED"}
    return ("receipt", meta(a, at), canon(p))

bob = ("bob", 0, T0 + 10)
alice = ("alice", 1, T0 + 20)
carol = ("carol", 0, T0 + 20)
cases = {
    "valid": [escalate(),
              review(state(2, "pending", [bob]), "bob", 0, T0 + 10),
              review(state(3, "approved", [bob, alice], resolved=T0 + 20), "alice", 1, T0 + 20),
              permit(state(4, "consumed", [bob, alice], resolved=T0 + 20, consumed=T0 + 30),
                     [("bob", T0 + 10), ("alice", T0 + 20)], T0 + 30)],
    # bob reviews twice; the forged state names carol so that it is a valid document
    "dup": [escalate(),
            review(state(2, "pending", [bob]), "bob", 0, T0 + 10),
            review(state(3, "approved", [bob, carol], resolved=T0 + 20), "bob", 0, T0 + 20)],
    # one approval of two, then a PERMIT that claims the approval
    "noquorum": [escalate(),
                 review(state(2, "pending", [bob]), "bob", 0, T0 + 10),
                 permit(state(4, "consumed", [bob, alice], resolved=T0 + 20, consumed=T0 + 30),
                        [("bob", T0 + 10), ("alice", T0 + 20)], T0 + 30)],
}
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for i, (typ, m, p) in enumerate(cases[sys.argv[2]]):
    for ext, text in (("type", typ), ("meta", m), ("payload", p)):
        with open(os.path.join(out, "rec-%d.%s" % (i, ext)), "w") as f:
            f.write(text)
EOF

# build CASE: the ledger directory CASE.ledger from the case's records, in order.
build() {
    local c=$1 i=0
    python3 gen.py "src-$c" "$c" || { fail "gen $c"; return 1; }
    while [ -f "src-$c/rec-$i.type" ]; do
        local flag=()
        [ "$(cat "src-$c/rec-$i.type")" = approval ] && flag=(--approval)
        "$BIN" ledger append "$c.ledger" "${flag[@]}" --meta "$(cat "src-$c/rec-$i.meta")" \
            "src-$c/rec-$i.payload" >/dev/null || { fail "append $c record $i"; return 1; }
        i=$((i + 1))
    done
}

build valid
build dup
build noquorum

run "valid history verifies" 0 "$BIN" ledger verify valid.ledger
contains "valid history" "approvals:  1 escalated, 2 reviews, 1 consumed, 0 expired, 0 problems"
contains "valid history" "records:    4"

run "duplicated approver fails" 1 "$BIN" ledger verify dup.ledger
contains "duplicated approver" \
    "approval PROBLEM: seq 3 approval appr_0123456789abcdef0123456789abcdef: duplicated approver: bob"
contains "duplicated approver" "approvals FAULT: 1 problems"

run "PERMIT without quorum fails" 1 "$BIN" ledger verify noquorum.ledger
contains "no quorum" "approval PROBLEM: seq 3 approval appr_0123456789abcdef0123456789abcdef: PERMIT without quorum: 1 of 2 required approvals"

run "--json: problems on stderr, exit 1" 1 "$BIN" ledger verify --json noquorum.ledger
contains "--json" '"ok":false'
contains "--json" "PERMIT without quorum"
run "--json valid" 0 "$BIN" ledger verify --json valid.ledger
contains "--json valid" '"ok":true'

# dump shows the approval record (type 4) like any other
run "dump" 0 "$BIN" ledger dump valid.ledger
contains "dump" '"type":"approval"'

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS failure(s)"
    exit 1
fi
echo "all ok"
