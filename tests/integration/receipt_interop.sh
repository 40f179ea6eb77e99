#!/usr/bin/env bash
# receipt_interop.sh — receipts cross-checked with an independent implementation:
# python3 (json + hashlib: RFC 8785 form of an all-string object, SHA-256) and openssl
# (Ed25519 over the 32 raw hash bytes). (a) trigguard -> python/openssl, (b) python/openssl
# -> trigguard verify, (c) tampered receipts are rejected with the right reason.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" receipt_interop
tg_require openssl python3
PY=$py
cd "$tmp"
NOW=2026-11-30T05:45:00.000Z

# The independent side. JCS of an object whose members are all strings with ASCII names is
# json.dumps(sort_keys, compact, ensure_ascii=False): same member order (UTF-16 = bytes for
# ASCII), same minimal string escapes.
cat >jcs.py <<'EOF'
import base64, hashlib, json, subprocess, sys

SIG_MEMBERS = ("receiptHash", "authoritySignature", "authorityKeyId")

def canon(obj):
    assert all(isinstance(v, str) for v in obj.values()), "non-string member"
    assert all(k.isascii() for k in obj), "non-ASCII name"
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

def check(receipt_path, pub_pem):
    """(a): recompute receiptHash, verify the signature with openssl."""
    text = open(receipt_path, "rb").read().rstrip(b"\n")
    r = json.loads(text)
    body = {k: v for k, v in r.items() if k not in SIG_MEMBERS}
    h = hashlib.sha256(canon(body)).digest()
    if h.hex() != r["receiptHash"]:
        sys.exit("receiptHash mismatch: %s != %s" % (h.hex(), r["receiptHash"]))
    if canon(r) != text:
        sys.exit("signed receipt is not in canonical form")
    open("hash.bin", "wb").write(h)
    open("sig.bin", "wb").write(base64.b64decode(r["authoritySignature"], validate=True))
    subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub_pem, "-rawin",
                    "-in", "hash.bin", "-sigfile", "sig.bin"], check=True,
                   stdout=subprocess.DEVNULL)
    print("python+openssl: ok")

def make(body_path, key_pem, pub_pem, out_path):
    """(b): build and sign a receipt without trigguard; key id = tg- + 16 hex of
    SHA-256(raw public key) (the default trigguard derives, checked against keys.json)."""
    body = json.load(open(body_path))
    h = hashlib.sha256(canon(body)).digest()
    open("hash.bin", "wb").write(h)
    subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", key_pem, "-rawin",
                    "-in", "hash.bin", "-out", "sig.bin"], check=True)
    spki = base64.b64decode("".join(l for l in open(pub_pem).read().splitlines()
                                    if not l.startswith("-----")))
    assert len(spki) == 44 and spki[:12].hex() == "302a300506032b6570032100"
    r = dict(body)
    r["receiptHash"] = h.hex()
    r["authoritySignature"] = base64.b64encode(open("sig.bin", "rb").read()).decode()
    r["authorityKeyId"] = "tg-" + hashlib.sha256(spki[12:]).hexdigest()[:16]
    # deliberately NOT canonical on the wire: indented, unsorted; verifiers canonicalize
    open(out_path, "w").write(json.dumps(r, indent=2, ensure_ascii=False))

if __name__ == "__main__":
    {"check": check, "make": make}[sys.argv[1]](*sys.argv[2:])
EOF

cat >body.json <<'EOF'
{"protocolVersion":"trigguard/v1","executionId":"exec_00112233445566778899aabbccddeeff",
 "authorityId":"trigguard-local","tenantId":"acme","surface":"payments.charge",
 "action":"transfer_funds","actorId":"agent.billing \u00fc\u20ac \"q\" \\ \t\u0001",
 "decision":"PERMIT","reasonCode":"NO_POLICY_VIOLATION",
 "requestHash":"9d12000000000000000000000000000000000000000000000000000000000001",
 "executionContextHash":"9d12000000000000000000000000000000000000000000000000000000000002",
 "subjectDigest":"sha256:\ud83d\ude00",
 "policyVersion":"2026-11-30.1",
 "policyHash":"9d12000000000000000000000000000000000000000000000000000000000003",
 "protocolFingerprint":"9d12000000000000000000000000000000000000000000000000000000000004",
 "engineVersion":"trigguard/0.1.0","timestamp":"2026-11-30T05:40:10.123Z",
 "expiresAt":"2026-11-30T05:50:10.123Z"}
EOF

# (a) trigguard signs, python + openssl verify.
"$TG_BIN" keygen --out tg.pem --key-id interop-1 >/dev/null
openssl pkey -in tg.pem -pubout -out tg.pub.pem
"$TG_BIN" receipt sign --key tg.pem <body.json >a.json || fail "receipt sign: exit $?"
"$PY" jcs.py check a.json tg.pub.pem || fail "(a) independent verification of a trigguard receipt"
grep -q '"authorityKeyId":"interop-1"' a.json || fail "(a) key id not in the receipt"
"$TG_BIN" keys tg.pem >tg.keys.json
out=$("$TG_BIN" verify --keys tg.keys.json --now "$NOW" a.json) || fail "(a) trigguard verify: $out"
[ "$out" = VALID ] || fail "(a) trigguard verify printed '$out'"
# the independent check must be able to fail: a receipt signed by another key
openssl genpkey -algorithm ed25519 -out other.pem && chmod 600 other.pem
openssl pkey -in other.pem -pubout -out other.pub.pem
if "$PY" jcs.py check a.json other.pub.pem 2>/dev/null; then
    fail "(a) openssl accepted the receipt under the wrong public key"
fi

# (b) python + openssl sign, trigguard verifies.
openssl genpkey -algorithm ed25519 -out py.pem && chmod 600 py.pem
openssl pkey -in py.pem -pubout -out py.pub.pem
"$PY" jcs.py make body.json py.pem py.pub.pem b.json || fail "(b) python could not make a receipt"
"$TG_BIN" keys py.pub.pem >py.keys.json
"$PY" - <<'EOF' || fail "(b) python's default key id differs from trigguard keys"
import json
k = json.load(open("py.keys.json"))["keys"][0]["keyId"]
r = json.load(open("b.json"))["authorityKeyId"]
assert k == r, (k, r)
EOF
out=$("$TG_BIN" verify --keys py.keys.json --now "$NOW" b.json) || fail "(b) verify exit $? ($out)"
[ "$out" = VALID ] || fail "(b) trigguard verify printed '$out'"
out=$("$TG_BIN" verify --keys py.keys.json --now "$NOW" - <b.json) || fail "(b) verify stdin: $out"
[ "$out" = VALID ] || fail "(b) verify from stdin printed '$out'"
# python's receipt, canonicalized by trigguard, is byte-identical to what trigguard signs
# for the same body with the same key (Ed25519 is deterministic)
"$TG_BIN" receipt sign --key py.pem <body.json >b.tg.json
"$TG_BIN" canon <b.json | cmp -s - <(tr -d '\n' <b.tg.json) ||
    fail "(b) python+openssl receipt differs from trigguard's for the same key and body"

# (c) tampering: one byte in a hashed field, in receiptHash, in the signature.
# mutate.py IN OUT MEMBER INDEX CHARS: replaces one character of a member's value with the
# first of CHARS that differs from it.
cat >mutate.py <<'EOF'
import json, sys
src, dst, name, idx, chars = sys.argv[1:6]
r = json.load(open(src))
v = r[name]
i = int(idx) % len(v)
ch = next(c for c in chars if c != v[i])
r[name] = v[:i] + ch + v[i + 1:]
open(dst, "w").write(json.dumps(r, ensure_ascii=False))
EOF
expect_invalid() { # FILE KEYS REASON [NOW]
    local rc=0 out
    out=$("$TG_BIN" verify --keys "$2" --now "${4:-$NOW}" "$1" 2>&1) || rc=$?
    [ "$rc" = 1 ] || fail "$1: exit $rc, want 1 ($out)"
    case "$out" in
    "INVALID: $3"*) ;;
    *) fail "$1: printed '$out', want INVALID: $3" ;;
    esac
}
for src in a:tg.keys.json b:py.keys.json; do
    f=${src%%:*} keys=${src#*:}
    "$PY" mutate.py "$f.json" t1.json surface 0 qr
    expect_invalid t1.json "$keys" hash_mismatch
    "$PY" mutate.py "$f.json" t2.json actorId 3 XY
    expect_invalid t2.json "$keys" hash_mismatch
    "$PY" mutate.py "$f.json" t3.json expiresAt -3 98
    expect_invalid t3.json "$keys" hash_mismatch
    "$PY" mutate.py "$f.json" t4.json receiptHash 7 fe
    expect_invalid t4.json "$keys" bad_signature
    "$PY" mutate.py "$f.json" t5.json authoritySignature 10 ZY
    expect_invalid t5.json "$keys" bad_signature
    "$PY" mutate.py "$f.json" t6.json decision 0 QR
    expect_invalid t6.json "$keys" malformed
    "$PY" mutate.py "$f.json" t7.json authorityKeyId -1 ZY
    expect_invalid t7.json "$keys" unknown_key
    # authentic but expired: reported separately, with its own exit status
    rc=0
    out=$("$TG_BIN" verify --keys "$keys" --now 2026-11-30T05:50:10.123Z "$f.json" 2>&1) || rc=$?
    [ "$rc" = 6 ] || fail "$f.json at its expiresAt: exit $rc, want 6 ($out)"
    case "$out" in
    "EXPIRED: since 2026-11-30T05:50:10.123Z (now 2026-11-30T05:50:10.123Z); "*) ;;
    *) fail "$f.json at its expiresAt: printed '$out', want EXPIRED: since ..." ;;
    esac
done
# the wrong ring: a's receipt against python's keys
expect_invalid a.json py.keys.json unknown_key

# SPEC §3/§5: {"receipt": {...}} is verified as POST /v1/verify verifies it, and so is a
# whole evaluate response (tests/integration/verify_documents.sh); a receipt with some
# other member beside it is not one.
{ printf '{"receipt":'; cat a.json; printf '}'; } >wrapped.json
out=$("$TG_BIN" verify --keys tg.keys.json --now "$NOW" wrapped.json) || fail "wrapped receipt: $out"
[ "$out" = VALID ] || fail "wrapped receipt printed '$out'"
{ printf '{"receipt":'; cat t1.json; printf '}'; } >wrapped-bad.json
expect_invalid wrapped-bad.json py.keys.json hash_mismatch # t1 is b.json tampered
{ printf '{"decision":"PERMIT","receipt":'; cat a.json; printf '}'; } >response.json
expect_invalid response.json tg.keys.json malformed

# unusable input: exit 2
rc=0
echo 'not json' | "$TG_BIN" verify --keys tg.keys.json - >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "verify of non-JSON: exit $rc, want 2"
rc=0
"$TG_BIN" verify --keys tg.keys.json missing.json >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "verify of a missing file: exit $rc, want 2"
echo '{"protocol":"trigguard/v1","keys":[]}' >bad.keys.json
rc=0
"$TG_BIN" verify --keys bad.keys.json a.json >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "verify with a bad keys.json: exit $rc, want 2"
rc=0
"$TG_BIN" verify --keys tg.keys.json --now yesterday a.json >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "verify with a bad --now: exit $rc, want 2"
"$TG_BIN" verify --help | grep -q "authentic" || fail "verify --help does not explain expired"

checks_done
