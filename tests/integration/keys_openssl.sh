#!/usr/bin/env bash
# keys_openssl.sh — trigguard and openssl read each other's Ed25519 key files; 0600 rules.
set -euo pipefail

: "${TG_BIN:?TG_BIN must point at the trigguard binary}"
# shellcheck source=tests/integration/lib/checks.sh
source "$(dirname "$0")/lib/checks.sh" keys_openssl
tg_require openssl python3
PY=$py
cd "$tmp"
umask 022

# Field $2 of key number $3 in the keys.json file $1.
keys_field() {
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["keys"][int(sys.argv[3])][sys.argv[2]], end="")' "$1" "$2" "$3"
}

cat >body.json <<'EOF'
{"protocolVersion":"trigguard/v1","executionId":"exec_0123456789abcdef0123456789abcdef",
 "authorityId":"trigguard-local","tenantId":"acme","surface":"deploy.release",
 "action":"deploy","actorId":"ci.pipeline","decision":"PERMIT","reasonCode":"NO_POLICY_VIOLATION",
 "requestHash":"0000000000000000000000000000000000000000000000000000000000000001",
 "policyVersion":"2026-11-30.1",
 "policyHash":"0000000000000000000000000000000000000000000000000000000000000002",
 "protocolFingerprint":"0000000000000000000000000000000000000000000000000000000000000003",
 "engineVersion":"trigguard/0.1.0","timestamp":"2026-11-30T05:40:10.123Z",
 "expiresAt":"2026-11-30T05:50:10.123Z"}
EOF
NOW=2026-11-30T05:45:00.000Z

# 1. A key made by `openssl genpkey` loads, signs, and its receipts verify.
openssl genpkey -algorithm ed25519 -out ossl.pem
chmod 600 ossl.pem
openssl pkey -in ossl.pem -pubout -out ossl.pub.pem
"$TG_BIN" keys --authority test-authority ossl.pem >keys.json || fail "keys ossl.pem: exit $?"
[ "$(keys_field keys.json status 0)" = active ] || fail "openssl key is not listed as active"
keys_field keys.json publicKeyPem 0 >listed.pub.pem
cmp -s listed.pub.pem ossl.pub.pem || fail "keys.json publicKeyPem differs from openssl pkey -pubout"
grep -q '"authority":"test-authority"' keys.json || fail "--authority not in keys.json"
grep -q 'PRIVATE' keys.json && fail "keys.json mentions a private key"
"$TG_BIN" receipt sign --key ossl.pem <body.json >r1.json || fail "receipt sign with openssl key: exit $?"
out=$("$TG_BIN" verify --keys keys.json --now "$NOW" r1.json) || fail "verify r1: exit $? ($out)"
[ "$out" = VALID ] || fail "verify r1 printed '$out'"
kid=$(keys_field keys.json keyId 0)
grep -q "\"authorityKeyId\":\"$kid\"" r1.json || fail "receipt does not carry key id $kid"
# A file without a key-id line gets the derived id tg-<16 hex of SHA-256(public key)>, the
# same for both halves (docs/OPERATIONS.md, Keys).
derived=tg-$(openssl pkey -pubin -in ossl.pub.pem -outform DER | tail -c 32 | sha256sum | cut -c1-16)
[ "$kid" = "$derived" ] || fail "derived key id $kid, want $derived"
# Signed under another id (as a daemon given --key-id does), the openssl public key given
# with --key still verifies it, by its signature, and says so; keys.json matches by id.
"$TG_BIN" receipt sign --key ossl.pem --key-id prod-signer-7 <body.json >r1b.json ||
    fail "receipt sign --key-id: exit $?"
out=$("$TG_BIN" verify --key ossl.pub.pem --now "$NOW" r1b.json) || fail "verify --key ossl.pub.pem: exit $? ($out)"
[ "$out" = "VALID (signed by --key ossl.pub.pem, key id $kid; the receipt names key id prod-signer-7)" ] ||
    fail "verify --key of a receipt under another id printed '$out'"
rc=0
out=$("$TG_BIN" verify --keys keys.json --now "$NOW" r1b.json) || rc=$?
[ "$rc" = 1 ] && [[ $out == "INVALID: unknown_key"* ]] || fail "verify --keys, other id: exit $rc, '$out'"

# 2. A key made by `trigguard keygen` loads in openssl; both derive the same public key.
"$TG_BIN" keygen --out tg.pem --key-id trig-1 >keygen.out || fail "keygen: exit $?"
[ "$(stat -c %a tg.pem)" = 600 ] || fail "keygen wrote mode $(stat -c %a tg.pem), want 600"
grep -q PRIVATE keygen.out && fail "keygen printed private key material"
[ "$(head -1 keygen.out)" = "trigguard-key-id: trig-1" ] || fail "keygen first line: $(head -1 keygen.out)"
openssl pkey -in tg.pem -noout || fail "openssl cannot read the keygen key"
# a private key never goes to stdout, and one --out only (a second one used to win silently)
rc=0; "$TG_BIN" keygen --out - >dash.out 2>&1 || rc=$?
[ "$rc" = 2 ] && [ ! -e ./- ] && ! grep -q PRIVATE dash.out || fail "keygen --out -: exit $rc"
rc=0; "$TG_BIN" keygen --out a.pem --out b.pem >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] && [ ! -e a.pem ] && [ ! -e b.pem ] || fail "keygen with two --out: exit $rc"
openssl pkey -in tg.pem -pubout -out tg.ossl.pub.pem || fail "openssl pkey -pubout failed"
tail -n +2 keygen.out | cmp -s - tg.ossl.pub.pem || fail "keygen's public key differs from openssl's"
# the private key re-encoded by openssl is byte-identical to the PEM block trigguard wrote
openssl pkey -in tg.pem | cmp -s - <(grep -v '^trigguard-key-id:' tg.pem) ||
    fail "openssl re-encoding of the keygen key differs"
"$TG_BIN" keys tg.pem >keys2.json || fail "keys tg.pem: exit $?"
keys_field keys2.json publicKeyPem 0 | cmp -s - tg.ossl.pub.pem ||
    fail "trigguard keys publicKeyPem differs from openssl pkey -pubout"
[ "$(keys_field keys2.json keyId 0)" = trig-1 ] || fail "key id line not read back"
# keygen output is itself a loadable public key file (with its id)
"$TG_BIN" receipt sign --key tg.pem <body.json >r2.json || fail "sign with keygen key: exit $?"
out=$("$TG_BIN" verify --key keygen.out --now "$NOW" r2.json) || fail "verify --key: exit $? ($out)"
[ "$out" = VALID ] || fail "verify with keygen stdout as key printed '$out'"
# without --key-id: default id tg-<16 hex>, no id line in the file
"$TG_BIN" keygen --out tg2.pem >keygen2.out || fail "keygen without --key-id: exit $?"
head -1 tg2.pem | grep -q BEGIN || fail "keygen without --key-id wrote an id line"
head -1 keygen2.out | grep -Eq '^trigguard-key-id: tg-[0-9a-f]{16}$' || fail "default key id: $(head -1 keygen2.out)"
# umask does not loosen the mode
(umask 000 && "$TG_BIN" keygen --out tg3.pem >/dev/null) || fail "keygen under umask 000"
[ "$(stat -c %a tg3.pem)" = 600 ] || fail "umask 000: mode $(stat -c %a tg3.pem)"

# 3. Refusals.
sum=$(sha256sum tg.pem)
rc=0
"$TG_BIN" keygen --out tg.pem >/dev/null 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "keygen over an existing file: exit $rc, want 2"
grep -q "already exists" err.txt || fail "keygen overwrite message: $(cat err.txt)"
[ "$(sha256sum tg.pem)" = "$sum" ] || fail "keygen modified an existing key file"
rc=0
"$TG_BIN" keygen >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "keygen without --out: exit $rc"
rc=0
"$TG_BIN" keygen --out x.pem --key-id 'bad id' >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "keygen with a bad key id: exit $rc"
[ -e x.pem ] && fail "keygen with a bad key id created a file"

cp ossl.pem open.pem
chmod 644 open.pem
for cmd in "keys open.pem" "receipt sign --key open.pem"; do
    rc=0
    # shellcheck disable=SC2086
    "$TG_BIN" $cmd <body.json >out.txt 2>err.txt || rc=$?
    [ "$rc" = 2 ] || fail "$cmd with a 0644 key: exit $rc, want 2"
    grep -q "chmod 600" err.txt || fail "$cmd with a 0644 key: message lacks the fix: $(cat err.txt)"
    [ -s out.txt ] && fail "$cmd with a 0644 key printed output"
done
chmod 640 open.pem
rc=0
"$TG_BIN" keys open.pem >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "keys with a 0640 key: exit $rc"
# a public key cannot sign
rc=0
"$TG_BIN" receipt sign --key ossl.pub.pem <body.json >/dev/null 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "receipt sign with a public key: exit $rc"
grep -q "public key" err.txt || fail "public-key signing message: $(cat err.txt)"
# keys of other algorithms are refused
openssl genpkey -algorithm x25519 -out x.pem 2>/dev/null && chmod 600 x.pem
rc=0
"$TG_BIN" keys x.pem >/dev/null 2>err.txt || rc=$?
[ "$rc" = 2 ] || fail "keys with an X25519 key: exit $rc"
# the same key twice, or two files with the same key id
rc=0
"$TG_BIN" keys ossl.pem ossl.pub.pem >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "keys with a duplicate key: exit $rc"

# 4. Rotation: first private key active, the rest verify-only; old receipts still verify.
"$TG_BIN" keys tg.pem ossl.pem >ring.json || fail "keys with two keys: exit $?"
[ "$(keys_field ring.json status 0)" = active ] || fail "first key not active"
[ "$(keys_field ring.json status 1)" = verify-only ] || fail "second key not verify-only"
out=$("$TG_BIN" verify --keys ring.json --now "$NOW" r1.json) || fail "rotation verify: $out"
[ "$out" = VALID ] || fail "receipt of the verify-only key: '$out'"

checks_done
