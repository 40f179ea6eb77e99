#!/usr/bin/env python3
"""jwt_tool.py — keys, key sets, JWTs (good ones and attack shapes) and a JWKS server for the
OIDC tests (tests/integration/daemon_oidc.sh). Uses python3-cryptography; test traffic stays on
loopback.

  keygen --kind rsa|ec|ed --out KEY.pem
  jwks --out FILE KID=KEY.pem ...          public JWKS of those keys (kty, crv, alg, use)
  sign --key KEY.pem --kid KID [--alg A] [--claims JSON] [--ttl S] [--expired] [--nbf-in S]
       [--none] [--hs-secret FILE] [--pad N] [--many-claims N] [--no-kid]
       prints a compact JWT; --alg overrides the header's alg only (the signature is still the
       key's), --none sends alg none with an empty signature, --hs-secret signs HS256 with that
       file's bytes as the secret (the public-key-as-HMAC-secret attack)
  serve --dir D --cert C --key K --port-file P
       HTTPS GET /jwks/NAME answers D/NAME.json; D/slow (seconds) delays every answer,
       D/fail makes it 500. Runs until killed.
"""
import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import ssl
import sys
import threading
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def load_key(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def key_alg(k):
    if isinstance(k, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(k, ec.EllipticCurvePrivateKey):
        return "ES256"
    return "EdDSA"


def cmd_keygen(a):
    if a.kind == "rsa":
        k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif a.kind == "ec":
        k = ec.generate_private_key(ec.SECP256R1())
    else:
        k = ed25519.Ed25519PrivateKey.generate()
    pem = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
    with open(a.out, "wb") as f:
        f.write(pem)
    pub = k.public_key().public_bytes(serialization.Encoding.PEM,
                                      serialization.PublicFormat.SubjectPublicKeyInfo)
    with open(a.out + ".pub", "wb") as f:
        f.write(pub)


def jwk_of(kid, k):
    pub = k.public_key()
    if isinstance(k, rsa.RSAPrivateKey):
        n = pub.public_numbers()
        ln = (n.n.bit_length() + 7) // 8
        return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": b64u(n.n.to_bytes(ln, "big")), "e": b64u(n.e.to_bytes(3, "big"))}
    if isinstance(k, ec.EllipticCurvePrivateKey):
        n = pub.public_numbers()
        return {"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                "x": b64u(n.x.to_bytes(32, "big")), "y": b64u(n.y.to_bytes(32, "big"))}
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "kid": kid, "use": "sig", "alg": "EdDSA", "crv": "Ed25519",
            "x": b64u(raw)}


def cmd_jwks(a):
    keys = []
    for spec in a.keys:
        kid, path = spec.split("=", 1)
        keys.append(jwk_of(kid, load_key(path)))
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"keys": keys}, f)
    os.replace(tmp, a.out)  # the server never serves half a file


def sign_with(k, data):
    if isinstance(k, rsa.RSAPrivateKey):
        return k.sign(data, padding.PKCS1v15(), hashes.SHA256())
    if isinstance(k, ec.EllipticCurvePrivateKey):
        r, s = utils.decode_dss_signature(k.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return k.sign(data)


def cmd_sign(a):
    k = load_key(a.key)
    now = int(time.time())
    claims = {"iat": now, "exp": now + a.ttl}
    if a.expired:
        claims["iat"] = now - 3600
        claims["exp"] = now - 600  # past any leeway the daemon allows by default
    if a.nbf_in:
        claims["nbf"] = now + a.nbf_in
    claims.update(json.loads(a.claims))
    if a.pad:
        claims["pad"] = "x" * a.pad
    for i in range(a.many_claims):
        claims["c%d" % i] = i
    header = {"alg": a.alg or key_alg(k), "typ": "JWT"}
    if not a.no_kid:
        header["kid"] = a.kid
    if a.none:
        header["alg"] = "none"
    if a.hs_secret:
        header["alg"] = "HS256"
    signing_input = (b64u(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     b64u(json.dumps(claims, separators=(",", ":")).encode())).encode()
    if a.none:
        sig = b""
    elif a.hs_secret:
        with open(a.hs_secret, "rb") as f:
            sig = hmac.new(f.read(), signing_input, hashlib.sha256).digest()
    else:
        sig = sign_with(k, signing_input)
    print(signing_input.decode() + "." + b64u(sig))


class Handler(http.server.BaseHTTPRequestHandler):
    root = "."

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        slow = os.path.join(self.root, "slow")
        if os.path.exists(slow):
            with open(slow) as f:
                time.sleep(float(f.read().strip() or "0"))
        name = os.path.basename(self.path.rstrip("/"))
        path = os.path.join(self.root, name + ".json")
        if os.path.exists(os.path.join(self.root, "fail")) or not self.path.startswith("/jwks/") \
                or not os.path.exists(path):
            self.send_response(500 if os.path.exists(os.path.join(self.root, "fail")) else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (a timeout the test provoked)


def cmd_serve(a):
    Handler.root = a.dir
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, a.port_file)
    srv.serve_forever()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("keygen")
    g.add_argument("--kind", choices=["rsa", "ec", "ed"], required=True)
    g.add_argument("--out", required=True)
    j = sub.add_parser("jwks")
    j.add_argument("--out", required=True)
    j.add_argument("keys", nargs="+")
    s = sub.add_parser("sign")
    s.add_argument("--key", required=True)
    s.add_argument("--kid", default="k")
    s.add_argument("--alg")
    s.add_argument("--claims", default="{}")
    s.add_argument("--ttl", type=int, default=600)
    s.add_argument("--expired", action="store_true")
    s.add_argument("--nbf-in", type=int, default=0)
    s.add_argument("--none", action="store_true")
    s.add_argument("--hs-secret")
    s.add_argument("--pad", type=int, default=0)
    s.add_argument("--many-claims", type=int, default=0)
    s.add_argument("--no-kid", action="store_true")
    v = sub.add_parser("serve")
    v.add_argument("--dir", required=True)
    v.add_argument("--cert", required=True)
    v.add_argument("--key", required=True)
    v.add_argument("--port-file", required=True)
    a = p.parse_args()
    {"keygen": cmd_keygen, "jwks": cmd_jwks, "sign": cmd_sign, "serve": cmd_serve}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
