#!/usr/bin/env python3
# crosscheck.py BODY.json GOLDEN.json PUBLIC.pem — checks a golden receipt without trigguard code:
# python3 json/hashlib for the RFC 8785 form and receiptHash, openssl for the Ed25519 signature.
import json, hashlib, base64, subprocess, sys, tempfile, os
body_path, golden_path, pub_pem = sys.argv[1:4]
body = json.load(open(body_path))
golden_text = open(golden_path, 'rb').read().rstrip(b'\n')
g = json.loads(golden_text)
# 1. golden minus the three signature members == the body fields
unsigned = {k: v for k, v in g.items() if k not in ('receiptHash', 'authoritySignature', 'authorityKeyId')}
assert unsigned == body, "fields differ from body"
# 2. JCS of an all-string object with ASCII names
canon = json.dumps(unsigned, sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode()
h = hashlib.sha256(canon).hexdigest()
assert h == g['receiptHash'], ("hash", h, g['receiptHash'])
# 3. the signed receipt itself is canonical
assert json.dumps(g, sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode() == golden_text, "not canonical"
# 4. signature by openssl over the 32 raw hash bytes
d = tempfile.mkdtemp()
open(os.path.join(d, 'hash.bin'), 'wb').write(bytes.fromhex(h))
sig = base64.b64decode(g['authoritySignature'], validate=True)
assert len(sig) == 64 and base64.b64encode(sig).decode() == g['authoritySignature']
open(os.path.join(d, 'sig.bin'), 'wb').write(sig)
r = subprocess.run(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey', pub_pem, '-rawin',
                    '-in', os.path.join(d, 'hash.bin'), '-sigfile', os.path.join(d, 'sig.bin')],
                   capture_output=True, text=True)
print(r.stdout.strip(), r.returncode)
assert r.returncode == 0
# 5. a tampered hash must fail under openssl too (the check can fail)
open(os.path.join(d, 'hash.bin'), 'wb').write(bytes.fromhex(h)[:-1] + b'\x00')
r = subprocess.run(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey', pub_pem, '-rawin',
                    '-in', os.path.join(d, 'hash.bin'), '-sigfile', os.path.join(d, 'sig.bin')],
                   capture_output=True, text=True)
assert r.returncode != 0
print("OK", golden_path)
