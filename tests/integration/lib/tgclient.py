"""tgclient.py — small helpers for the daemon integration tests (imported by the inline
python of tests/integration/*.sh): one-shot HTTP requests to 127.0.0.1, a Prometheus
text-format checker, and an independent receipt verifier (SPEC §5) used when the
`cryptography` package is importable."""

import base64
import hashlib
import http.client
import json
import re
import socket
import threading

LOOPBACK = "127.0.0.1"


def request(port, method, path, body=None, headers=None, timeout=20.0):
    """One request on a fresh connection. Returns (status, headers, body bytes);
    headers is a dict with lower-cased names. Raises OSError / http.client errors."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        hdrs = {"Connection": "close"}
        if body is not None:
            if not isinstance(body, (bytes, bytearray)):
                body = json.dumps(body, separators=(",", ":")).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        h = {k.lower(): v for k, v in resp.getheaders()}
        cl = h.get("content-length")
        if cl is not None and int(cl) != len(data):
            raise http.client.IncompleteRead(data, int(cl) - len(data))
        return resp.status, h, data
    finally:
        conn.close()


def post_together(port, reqs, token, path="/v1/evaluate"):
    """POSTs every request of reqs at the same moment (one thread each, released by one
    barrier) and returns their (status, headers, body) in order; a transport error fails."""
    barrier = threading.Barrier(len(reqs))
    results = [None] * len(reqs)

    def worker(i):
        barrier.wait()
        try:
            results[i] = request(port, "POST", path, reqs[i], bearer(token))
        except Exception as e:  # reported below, with the others
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, "transport errors: %r" % errors[:3]
    return results


def bearer(token):
    return {"Authorization": "Bearer " + token}


# ---- Prometheus text exposition format (0.0.4) --------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
_SAMPLE = re.compile(
    r"^(" + _NAME + r")(\{(?:" + _LABEL + r")(?:," + _LABEL + r")*,?\})?"
    r" ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|"
    r"NaN|\+Inf|-Inf))( -?[0-9]+)?$")
_LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_prometheus(text):
    """Checks the text format strictly enough to catch what promtool would reject and
    returns (samples, types): samples = [(name, {label: value}, float)]. Raises
    ValueError naming the bad line."""
    samples, types, helps = [], {}, set()
    seen_series = set()
    family_done = set()
    current = None
    if not text.endswith("\n"):
        raise ValueError("exposition does not end with a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                if len(parts) < 4 or not re.fullmatch(_NAME, parts[2]):
                    raise ValueError("line %d: malformed %s: %r" % (n, parts[1], line))
                name = parts[2]
                if parts[1] == "TYPE":
                    if parts[3] not in _TYPES:
                        raise ValueError("line %d: unknown type %r" % (n, parts[3]))
                    if name in types:
                        raise ValueError("line %d: second TYPE for %s" % (n, name))
                    if any(s[0] in (name, name + "_bucket", name + "_sum", name + "_count")
                           for s in samples):
                        raise ValueError("line %d: TYPE after samples of %s" % (n, name))
                    types[name] = parts[3]
                else:
                    if name in helps:
                        raise ValueError("line %d: second HELP for %s" % (n, name))
                    helps.add(name)
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a valid sample line: %r" % (n, line))
        name, lbl, val = m.group(1), m.group(2) or "", m.group(3)
        labels = dict(_LABELS.findall(lbl))
        key = (name, tuple(sorted(labels.items())))
        if key in seen_series:
            raise ValueError("line %d: duplicate series %s%s" % (n, name, lbl))
        seen_series.add(key)
        fam = _family(name, types)
        if fam != current:
            if fam in family_done:
                raise ValueError("line %d: samples of %s are not contiguous" % (n, fam))
            if current is not None:
                family_done.add(current)
            current = fam
        if types.get(fam) == "histogram" and name == fam:
            raise ValueError("line %d: bare sample of histogram %s" % (n, fam))
        if types.get(fam) == "counter" and float(val.replace("Inf", "inf")) < 0:
            raise ValueError("line %d: negative counter" % n)
        samples.append((name, labels, float(val.replace("+Inf", "inf").replace("-Inf", "-inf"))))
    _check_histograms(samples, types)
    return samples, types


def _family(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return name


def _check_histograms(samples, types):
    for fam, t in types.items():
        if t != "histogram":
            continue
        groups = {}
        for name, labels, v in samples:
            if _family(name, types) != fam:
                continue
            base = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
            g = groups.setdefault(base, {"buckets": [], "sum": None, "count": None})
            if name == fam + "_bucket":
                if "le" not in labels:
                    raise ValueError("%s: bucket without le" % fam)
                g["buckets"].append((float(labels["le"].replace("+Inf", "inf")), v))
            elif name == fam + "_sum":
                g["sum"] = v
            elif name == fam + "_count":
                g["count"] = v
        for base, g in groups.items():
            b = g["buckets"]
            if not b or b[-1][0] != float("inf"):
                raise ValueError("%s%s: no +Inf bucket last" % (fam, base))
            for (le1, v1), (le2, v2) in zip(b, b[1:]):
                if not le1 < le2 or v1 > v2:
                    raise ValueError("%s%s: buckets not increasing" % (fam, base))
            if g["count"] is None or g["sum"] is None:
                raise ValueError("%s%s: missing _sum or _count" % (fam, base))
            if g["count"] != b[-1][1]:
                raise ValueError("%s%s: _count %s != +Inf bucket %s"
                                 % (fam, base, g["count"], b[-1][1]))


def metric(samples, name, **labels):
    """Sum of the samples called name whose labels include `labels`."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == x for k, x in labels.items()))


# ---- independent receipt verification ------------------------------------------------

def have_crypto():
    try:
        import cryptography.hazmat.primitives.serialization  # noqa: F401
        return True
    except ImportError:
        return False


def jcs_strings(obj):
    """RFC 8785 for an object whose values are all strings (receipts): members sorted
    by UTF-16 code units, minimal escapes, no whitespace."""
    def s(x):
        out = ['"']
        for ch in x:
            o = ord(ch)
            if ch == '"':
                out.append('\\"')
            elif ch == "\\":
                out.append("\\\\")
            elif ch in "\b\f\n\r\t":
                out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
            elif o < 0x20:
                out.append("\\u%04x" % o)
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)

    def key16(k):
        return k.encode("utf-16-be")
    parts = []
    for k in sorted(obj, key=key16):
        v = obj[k]
        if not isinstance(v, str):
            raise ValueError("receipt member %s is not a string" % k)
        parts.append(s(k) + ":" + s(v))
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def verify_receipt(receipt, keys_doc):
    """Returns None when receipt is authentic under keys_doc (a keys.json object), else a
    reason string. Checks key id, receiptHash recomputation and the Ed25519 signature over
    the 32 raw bytes of receiptHash (SPEC §5). Needs the cryptography package."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    # receipt keys only: the transparency log's checkpoint key (SPEC §12) signs no receipt
    keys = {k["keyId"]: k for k in keys_doc["keys"] if k.get("use", "receipt") == "receipt"}
    kid = receipt.get("authorityKeyId")
    if kid not in keys:
        return "unknown key id %r" % kid
    body = {k: v for k, v in receipt.items()
            if k not in ("receiptHash", "authoritySignature", "authorityKeyId")}
    h = hashlib.sha256(jcs_strings(body)).hexdigest()
    if h != receipt.get("receiptHash"):
        return "receiptHash mismatch: computed %s" % h
    pub = load_pem_public_key(keys[kid]["publicKeyPem"].encode())
    try:
        sig = base64.b64decode(receipt["authoritySignature"], validate=True)
        pub.verify(sig, bytes.fromhex(h))
    except (InvalidSignature, ValueError) as e:
        return "bad signature (%s)" % type(e).__name__
    return None


def port_is_closed(port):
    """True when nothing accepts TCP connections on 127.0.0.1:port."""
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect((LOOPBACK, port))
        return False
    except ConnectionRefusedError:
        return True
    finally:
        s.close()
