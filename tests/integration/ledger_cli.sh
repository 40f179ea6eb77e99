#!/usr/bin/env bash
# ledger_cli.sh — `trigguard ledger verify|dump|append` on real signed receipts: a good ledger
# verifies (exit 0), tampering, damaged headers, truncation and missing segments are found
# (exit 1, naming the segment, seq and offset), unusable input is exit 2, and an independent
# reader written from docs/LEDGER.md alone agrees with the CLI (and re-chained tampering is
# caught by signatures).
set -u
BIN=${TG_BIN:?TG_BIN must point at the trigguard binary}
WORK=$(mktemp -d /tmp/tg_ledger_cli.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 2
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

# run NAME EXPECTED_EXIT CMD... — runs CMD, keeps its output in $OUT, checks the exit code.
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

hex64() { printf "%064d" 0 | tr 0 "$1"; }

# --- fixtures: a key, keys.json, signed receipts, a SILENCE record ---
"$BIN" keygen --out k.pem --key-id ledger-test-1 >/dev/null || { echo "keygen failed"; exit 1; }
"$BIN" keygen --out other.pem --key-id other-key >/dev/null || exit 1
"$BIN" keys k.pem >keys.json || exit 1
"$BIN" keys other.pem >other.json || exit 1
HA=$(hex64 a) HB=$(hex64 b) HC=$(hex64 c)
for i in 1 2 3 4 5 6; do
    dec=PERMIT
    [ "$i" = 3 ] && dec=DENY
    cat >body$i.json <<EOF
{"protocolVersion":"trigguard/v1","executionId":"exec_$(printf '%032d' "$i")","authorityId":"trigguard-local","tenantId":"acme","surface":"payments.charge","action":"transfer_funds","actorId":"agent.billing","decision":"$dec","reasonCode":"NO_POLICY_VIOLATION","requestHash":"$HA","policyVersion":"2026-11-30.1","policyHash":"$HB","protocolFingerprint":"$HC","engineVersion":"trigguard/0.1.0","timestamp":"2021-01-01T00:00:00.000Z","expiresAt":"2021-01-01T00:10:00.000Z"}
EOF
    "$BIN" receipt sign --key k.pem <body$i.json >r$i.json || { echo "receipt sign failed"; exit 1; }
done
echo '{"decision":"SILENCE","reason_code":"MISSING_CONTEXT","surface":"payments.charge"}' >s1.json

run "append" 0 "$BIN" ledger append L --meta "tenant=acme" r1.json r2.json
run "append silence" 0 "$BIN" ledger append L --silence s1.json
run "append more" 0 "$BIN" ledger append L r3.json
contains "append more" "seq 4 segment 1"
OFF4=$(sed -n 's/^seq 4 segment 1 offset \([0-9]*\).*/\1/p' <<<"$OUT")

# --- a good ledger ---
run "verify good (structure)" 0 "$BIN" ledger verify L
contains "verify good" "ledger OK"
contains "verify good" "records:    4 (3 receipts, 1 silence)"
contains "verify good" "sequence:   1 .. 4"
contains "verify good" "signatures: not checked"
HEAD=$(sed -n 's/^  head hash:  \([0-9a-f]*\)$/\1/p' <<<"$OUT")
[ ${#HEAD} -eq 64 ] || fail "no head hash in the summary"
run "verify good (signatures, expired receipts are history)" 0 \
    "$BIN" ledger verify L --keys keys.json
contains "verify signatures" "signatures: 3 verified"
run "verify one segment file" 0 "$BIN" ledger verify L/ledger-000001.tgl --key k.pem
run "verify --head" 0 "$BIN" ledger verify L --head "$HEAD"
run "verify --head mismatch" 1 "$BIN" ledger verify L --head "$(hex64 0)"
contains "head mismatch" "head hash differs"
run "verify --json" 0 "$BIN" ledger verify L --json --keys keys.json
contains "json" "\"ok\":true"
contains "json" "\"head_hash\":\"$HEAD\""
run "dump" 0 "$BIN" ledger dump L
[ "$(wc -l <<<"$OUT")" -eq 4 ] || fail "dump: expected 4 lines"
contains "dump" "\"meta_hex\":\"$(printf 'tenant=acme' | od -An -tx1 | tr -d ' \n')\""
contains "dump" "\"decision\":\"SILENCE\""

# --- wrong keys: the receipts are not signed by them ---
run "verify with another key ring" 1 "$BIN" ledger verify L --keys other.json
contains "other keys" "seq:    1"
contains "other keys" "unknown_key"

# --- one tampered byte in record 4's payload ---
cp -r L T
# 'X', or 'Y' where the byte already is 'X' (the receipts' keys and signatures are random
# each run, so a fixed byte is sometimes no change at all)
WAS=$(dd if=T/ledger-000001.tgl bs=1 skip=$((OFF4 + 200)) count=1 2>/dev/null)
NEW=X
[ "$WAS" = X ] && NEW=Y
printf '%s' "$NEW" | dd of=T/ledger-000001.tgl bs=1 seek=$((OFF4 + 200)) conv=notrunc 2>/dev/null
cmp -s L/ledger-000001.tgl T/ledger-000001.tgl && fail "the tamper changed nothing"
run "tampered byte" 1 "$BIN" ledger verify T
contains "tampered" "ledger FAULT"
contains "tampered" "file:   T/ledger-000001.tgl"
contains "tampered" "seq:    4"
contains "tampered" "offset: $OFF4"
contains "tampered" "record hash mismatch"
contains "tampered" "valid prefix: 3 records"
run "tampered (dump stops)" 1 "$BIN" ledger dump T
run "append refuses a corrupt ledger" 1 "$BIN" ledger append T r4.json
contains "append corrupt" "seq 4 at offset $OFF4"

# --- a damaged header whose header_check was recomputed: each field is still checked ---
# (the check catches a random flip; these are headers written wrong, or forged with care)
hdr_edit() { # hdr_edit DIR FIELD VALUE [keep-check]: rewrite record 4's header in DIR
    python3 - "$1/ledger-000001.tgl" "$OFF4" "$2" "$3" "${4:-}" <<'PY'
import hashlib, struct, sys
path, off, field, value, keep = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
b = bytearray(open(path, "rb").read())
at = {"magic": (0, "4s"), "version": (4, "<B"), "type": (5, "<B"), "flags": (6, "<H"),
      "seq": (8, "<Q"), "meta_len": (48, "<I"), "payload_len": (52, "<I")}[field]
v = value.encode() if at[1] == "4s" else int(value)
struct.pack_into(at[1], b, off + at[0], v)
if not keep:
    b[off + 56:off + 60] = hashlib.sha256(bytes(b[off:off + 56])).digest()[:4]
open(path, "wb").write(b)
PY
}
hdr_case() { # hdr_case LABEL FIELD VALUE EXPECTED_REASON [keep-check]
    rm -rf H && cp -r L H
    hdr_edit H "$2" "$3" "${5:-}"
    run "header: $1" 1 "$BIN" ledger verify H
    contains "header: $1" "seq:    4"
    contains "header: $1" "offset: $OFF4"
    contains "header: $1" "$4"
    contains "header: $1" "valid prefix: 3 records"
}
hdr_case "unknown type" type 9 "unknown record type 9"
hdr_case "reserved flags" flags 1 "reserved flags are not zero"
hdr_case "meta too long" meta_len 16385 "meta length 16385 exceeds 16384"
hdr_case "payload too long" payload_len 65537 "payload length 65537 exceeds 65536"
hdr_case "sequence 0" seq 0 "sequence number 0"
hdr_case "future version" version 3 "unsupported record format version 3"
hdr_case "bad magic" magic XXXX "bad magic"
hdr_case "changed seq, check not updated" seq 5 "header check mismatch" keep
hdr_case "skipped seq" seq 5 "sequence number 5 where 4 was expected"
rm -rf H && cp -r L H
hdr_edit H type 9
run "a damaged header is not cut as a torn tail on open" 1 "$BIN" ledger append H r4.json
contains "damaged header, append" "unknown record type 9"

# --- a cut last record: durable (ledger.head records it) or torn (it does not) ---
cp -r L C
SIZE=$(stat -c %s C/ledger-000001.tgl)
truncate -s $((SIZE - 7)) C/ledger-000001.tgl
# seq 4 was acknowledged and ledger.head records it: losing it is not a torn write
run "a cut durable record" 1 "$BIN" ledger verify C
contains "durable loss" "file:   C/ledger.head"
contains "durable loss" "seq:    4"
contains "durable loss" "but the ledger ends at seq 3: 1 durable records lost"
run "--allow-torn does not cover a durable loss" 1 "$BIN" ledger verify C --allow-torn
run "a cut durable record, json" 1 "$BIN" ledger verify C --json
contains "durable loss, json" '"durable_head":{"seq":4,'
contains "durable loss, json" '"error":"TG_ERR_LEDGER_CORRUPT"'
run "a cut durable record is refused on open" 1 "$BIN" ledger append C r4.json
contains "durable head" "seq 4 was on disk"
contains "durable head" "1 durable records lost"
contains "durable head" "move ledger.head away"
[ "$(stat -c %s C/ledger-000001.tgl)" = $((SIZE - 7)) ] && ok "refusal left the segment as it was" ||
    fail "the refusal changed the segment"
# as after a crash before ledger.head recorded seq 4: the torn-tail rules alone
mv C/ledger.head C/ledger.head.moved
run "torn tail" 1 "$BIN" ledger verify C
contains "torn" "torn final record"
contains "torn" "seq:    4"
contains "torn" "offset: $OFF4"
run "torn tail allowed" 0 "$BIN" ledger verify C --allow-torn
contains "torn allowed" "records:    3"
run "open truncates the torn tail" 0 "$BIN" ledger append C r4.json
contains "reopen" "seq 4 segment 1 offset $OFF4"
run "after recovery" 0 "$BIN" ledger verify C --keys keys.json
contains "after recovery" "durable:    seq 4 recorded in ledger.head at "
# a damaged ledger.head is a fault of its own, named as such
printf 'x%.0s' $(seq 1 1024) >C/ledger.head
run "damaged ledger.head" 1 "$BIN" ledger verify C
contains "damaged head" "neither slot is valid"
run "damaged ledger.head, open" 1 "$BIN" ledger append C r5.json
contains "damaged head, open" "move it away"

# --- rotation and a missing middle segment ---
run "rotating appends" 0 "$BIN" ledger append R --segment-bytes 1500 r1.json r2.json r3.json \
    r4.json r5.json r6.json
run "verify segments" 0 "$BIN" ledger verify R --keys keys.json
contains "segments" "segments:   6 (ledger-000001.tgl .. ledger-000006.tgl)"
rm R/ledger-000003.tgl
run "missing middle segment" 1 "$BIN" ledger verify R
contains "missing" "ledger-000003.tgl"

# --- unusable input ---
run "no such path" 2 "$BIN" ledger verify "$WORK/nope"
mkdir empty
run "no segments" 2 "$BIN" ledger verify empty
run "bad keys file" 2 "$BIN" ledger verify L --keys body1.json
run "usage" 2 "$BIN" ledger verify
run "unknown subcommand" 2 "$BIN" ledger frobnicate

# --- an independent reader written from docs/LEDGER.md agrees; re-chained tampering ---
if command -v python3 >/dev/null 2>&1; then
    cat >reader.py <<'PY'
import hashlib, json, os, struct, sys

def record_hash(version, rec):
    # version 1: SHA-256 over header, meta and payload; version 2: over the 60 header bytes
    # followed by SHA-256(meta || payload)
    if version == 1:
        return hashlib.sha256(rec).digest()
    return hashlib.sha256(rec[:60] + hashlib.sha256(rec[60:]).digest()).digest()

def records(path):
    data = open(path, "rb").read()
    off = 0
    while off < len(data):
        h = data[off:off + 60]
        assert h[0:4] == b"TGLR" and h[4] in (1, 2) and h[5] in (1, 2), "bad header"
        assert struct.unpack("<H", h[6:8])[0] == 0
        seq, = struct.unpack("<Q", h[8:16])
        prev = h[16:48]
        mlen, plen = struct.unpack("<II", h[48:56])
        assert hashlib.sha256(h[:56]).digest()[:4] == h[56:60], "header check"
        end = off + 60 + mlen + plen
        rec_hash = record_hash(h[4], data[off:end])
        assert data[end:end + 32] == rec_hash, "record hash"
        yield dict(type=h[5], seq=seq, prev=prev, meta=data[off + 60:off + 60 + mlen],
                   payload=data[off + 60 + mlen:end], hash=rec_hash, off=off)
        off = end + 32

def encode(version, type_, seq, prev, meta, payload):
    h = b"TGLR" + bytes([version, type_]) + struct.pack("<HQ", 0, seq) + prev + \
        struct.pack("<II", len(meta), len(payload))
    h += hashlib.sha256(h).digest()[:4]
    body = h + meta + payload
    rh = record_hash(version, body)
    return body + rh, rh

# argv: a segment to read (prints its head hash) and a copy to tamper with: record 2's
# decision is rewritten and every hash after it recomputed, so only signatures can tell. The
# copy is written as version 1 up to seq 2 and version 2 after it: a mixed ledger, as an
# upgrade leaves one, must read exactly like a new one.
path, tamper = sys.argv[1], sys.argv[2]
recs = list(records(path))
prev, seq = b"\0" * 32, 1
for r in recs:
    assert r["seq"] == seq and r["prev"] == prev, "chain"
    prev, seq = r["hash"], seq + 1
print(prev.hex())
out, prev = b"", b"\0" * 32
for r in recs:
    payload = r["payload"]
    if r["seq"] == 2:
        payload = payload.replace(b'"decision":"PERMIT"', b'"decision":"DENY"')
    rec, prev = encode(1 if r["seq"] <= 2 else 2, r["type"], r["seq"], prev, r["meta"], payload)
    out += rec
open(tamper, "wb").write(out)
PY
    cp -r L X
    PYHEAD=$(python3 reader.py L/ledger-000001.tgl X/ledger-000001.tgl) || fail "reader.py"
    if [ "$PYHEAD" = "$HEAD" ]; then ok "independent reader: same head hash"; else
        fail "independent reader head $PYHEAD != $HEAD"; fi
    # ledger.head still holds the old seq 4 record_hash: the rewrite shows at once
    run "re-chained tamper differs from ledger.head" 1 "$BIN" ledger verify X
    contains "rechain, head" "seq 4 is not the record ledger.head recorded"
    # one who also rewrites or removes ledger.head (it is not keyed) passes the structure
    # check; the signatures, or a head kept elsewhere (--head), still tell
    rm X/ledger.head
    run "re-chained tamper passes the structure check" 0 "$BIN" ledger verify X
    run "re-chained tamper fails the signature check" 1 "$BIN" ledger verify X --keys keys.json
    contains "rechain" "seq:    2"
    contains "rechain" "receipt does not verify"
    run "re-chained tamper changes the head" 1 "$BIN" ledger verify X --head "$HEAD"
else
    echo "skip: python3 not found (independent reader check)"
fi

# --- the directory's files are its own: a symlink or a FIFO is refused, never followed ---
run "append to a fresh ledger S" 0 "$BIN" ledger append S --silence s1.json
rm S/ledger.lock
ln -s "$WORK/lock-victim" S/ledger.lock
run "append refuses a symlinked lock file" 2 "$BIN" ledger append S --silence s1.json
contains "symlinked lock" "ledger.lock"
[ ! -e "$WORK/lock-victim" ] || fail "the lock symlink's target was created"
rm S/ledger.lock
mkfifo S/ledger.lock
run "append refuses a FIFO as the lock file" 2 "$BIN" ledger append S --silence s1.json
contains "FIFO lock" "ledger.lock: lock file is not a regular file"
rm S/ledger.lock
printf 'x' >not-a-dir
run "append to a ledger path that is a file" 2 "$BIN" ledger append not-a-dir --silence s1.json
contains "ledger path is a file" "not-a-dir: cannot open ledger directory: Not a directory"
mkdir -p elsewhere
mv S/ledger-000001.tgl elsewhere/
ln -s "$WORK/elsewhere/ledger-000001.tgl" S/ledger-000001.tgl
run "append refuses a symlinked segment" 2 "$BIN" ledger append S --silence s1.json
run "verify refuses a symlinked segment" 2 "$BIN" ledger verify S
rm S/ledger-000001.tgl
mkfifo S/ledger-000001.tgl
run "append refuses a FIFO segment without waiting for a writer" 2 timeout 20 "$BIN" ledger append S --silence s1.json
contains "FIFO segment (append)" "not a readable regular file"
run "verify refuses a FIFO segment without waiting for a writer" 2 timeout 20 "$BIN" ledger verify S
contains "FIFO segment (verify)" "not a regular file"

# an ESCALATE receipt (SPEC §11.2) is a receipt record like PERMIT and DENY
sed -e 's/"decision":"PERMIT"/"decision":"ESCALATE","approvalId":"appr_0123456789abcdef0123456789abcdef"/' \
    -e 's/NO_POLICY_VIOLATION/APPROVAL_REQUIRED/' body1.json >body-esc.json
"$BIN" receipt sign --key k.pem <body-esc.json >r-esc.json || fail "sign an ESCALATE receipt"
run "append an ESCALATE receipt" 0 "$BIN" ledger append E r-esc.json r2.json
run "verify a ledger with an ESCALATE receipt" 0 "$BIN" ledger verify E --keys keys.json
contains "verify ESCALATE" "signatures: 2 verified"

if [ "$FAILS" -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all ledger CLI checks passed"
