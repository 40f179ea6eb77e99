"""tlog_verify.py — an independent verifier of trigguard's transparency log (SPEC §12), for
tests/integration/daemon_tlog.sh.

Written from the texts, not from trigguard's C code: RFC 6962 §2.1 and RFC 9162 §2.1 (leaf
and node hashes, the Merkle Tree Hash, inclusion and consistency proof verification), C2SP
signed-note (Ed25519 key ids, signature lines, vkeys), tlog-checkpoint (the note's text) and
tlog-tiles (tile paths, hash tiles, entry bundles). Ed25519 is python3-cryptography's.

Commands (URL: the daemon's base URL; every failure is one line on stdout, exit status 1):
  load URL TOKEN ACKS NOTES SECONDS THREADS
      POSTs PERMIT decisions (each with its own idempotency key) from THREADS threads for
      SECONDS seconds or until the daemon stops answering, appending "executionId
      receiptHash" to ACKS for each 200 that carried a receipt (flushed at once: an
      acknowledged receipt is on disk before the daemon is killed), while another thread
      polls the checkpoint and appends every new one to NOTES (JSON lines).
  fill URL TOKEN N
      N PERMIT decisions on one connection (leaves for full tiles).
  prove-at URL TOKEN EXECUTION_ID RECEIPT_HASH SIZE
      the receipt's proof into the tree of SIZE leaves (?size=), without a checkpoint,
      verified against that tree's root recomputed from the tiles.
  check URL TOKEN ACKS NOTES [--all-pairs]
      keys.json's checkpoint key; the newest checkpoint's signature; every checkpoint in
      NOTES (and the newest) signed by that key, no two of one size different, each
      consistent with the newest (with --all-pairs also: each with the next larger one,
      and every pair among 24 sizes spread over the range) by the log's
      consistency proofs; every receipt in ACKS has an inclusion proof
      (GET /v1/receipts/{id}/proof) into a signed checkpoint, its leaf SHA-256(0x00 ‖
      receiptHash); the newest root recomputed from the tiles and entry bundles.
  batch KEYS_JSON FILE...
      offline, each FILE a batch-signed receipt (SPEC §12: "transparency" instead of
      authoritySignature), alone, as {"receipt": ...} or inside an evaluate response: the
      checkpoint key of KEYS_JSON named by logOrigin and logKeyId, the checkpoint note's
      signature, its origin and size against logOrigin and treeSize, receiptHash recomputed
      as SHA-256 of the RFC 8785 canonical JSON of the other members without transparency,
      and the inclusion proof of SHA-256(0x00 ‖ receiptHash) at leafIndex under the root.
"""

import base64
import hashlib
import http.client
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key


class VerifyError(Exception):
    pass


# ---- RFC 6962 §2.1 / RFC 9162 §2.1.1: hashes --------------------------------------------


def sha256(b):
    return hashlib.sha256(b).digest()


def leaf_hash(entry):
    return sha256(b"\x00" + entry)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def mth(hashes):
    """The Merkle Tree Hash of a list of leaf hashes: SHA-256 of nothing for none, the leaf
    hash for one, else node(MTH(first k), MTH(rest)) with k the largest power of two
    smaller than n."""
    n = len(hashes)
    if n == 0:
        return sha256(b"")
    if n == 1:
        return hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node_hash(mth(hashes[:k]), mth(hashes[k:]))


# ---- RFC 9162 §2.1.3.2 and §2.1.4.2: proof verification -----------------------------------


def verify_inclusion(leaf, index, size, proof, root):
    """True when proof shows leaf is leaf `index` of the tree (size, root)."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(size1, size2, proof, root1, root2):
    """True when proof shows the tree (size1, root1) is a prefix of (size2, root2). Equal
    sizes need an empty proof and equal roots; there is no proof from the empty tree."""
    if size1 == 0 or size1 > size2:
        return False
    if size1 == size2:
        return len(proof) == 0 and root1 == root2
    if not proof:
        return False
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # an exact power of two: the old root is a stored subtree
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == root1 and sr == root2


# ---- C2SP signed-note, tlog-checkpoint ------------------------------------------------------


def b64d(s):
    raw = base64.b64decode(s, validate=True)
    if base64.b64encode(raw).decode() != s:
        raise VerifyError("non-canonical base64: %r" % s)
    return raw


def note_key_id(name, pub):
    return sha256(name.encode() + b"\n" + b"\x01" + pub)[:4]


def parse_vkey(vkey):
    """<name>+<8 hex key id>+<base64(0x01 ‖ public key)>, the id checked."""
    parts = vkey.split("+", 2)  # names hold no '+'; base64 may
    if len(parts) != 3 or len(parts[1]) != 8:
        raise VerifyError("vkey %r: not name+id+key" % vkey)
    name, hid, k = parts
    raw = b64d(k)
    if len(raw) != 33 or raw[0] != 1:
        raise VerifyError("vkey %r: not an Ed25519 key" % vkey)
    pub = raw[1:]
    if note_key_id(name, pub).hex() != hid:
        raise VerifyError("vkey %r: the key id is not the name's and key's" % vkey)
    return name, bytes.fromhex(hid), pub


def verify_note(note, name, key_id, pub):
    """The text of a signed note that carries a valid signature by (name, key_id, pub)."""
    i = note.rfind("\n\n")
    if i < 0 or not note.endswith("\n"):
        raise VerifyError("not a signed note: %r" % note[:80])
    text = note[: i + 1]
    key = Ed25519PublicKey.from_public_bytes(pub)
    ok = False
    for line in note[i + 2 :].split("\n")[:-1]:
        if not line.startswith("\u2014 "):
            raise VerifyError("malformed signature line %r" % line)
        lname, _, sig = line[2:].rpartition(" ")
        raw = b64d(sig)
        if lname != name or raw[:4] != key_id:
            continue  # another key's signature
        if len(raw) != 68:
            raise VerifyError("the log's signature is not 68 bytes")
        try:
            key.verify(raw[4:], text.encode())
        except InvalidSignature:
            raise VerifyError("the log's signature does not verify") from None
        ok = True
    if not ok:
        raise VerifyError("no signature by the log's key")
    return text


def parse_checkpoint(text):
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise VerifyError("checkpoint text %r" % text)
    origin, size, root = lines[0], lines[1], lines[2]
    if not size.isdigit() or (size != "0" and size[0] == "0"):
        raise VerifyError("checkpoint size %r" % size)
    r = b64d(root)
    if len(r) != 32:
        raise VerifyError("checkpoint root is not 32 bytes")
    return origin, int(size), r


# ---- HTTP --------------------------------------------------------------------------------


def get(url, token=None, want=200):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            status, body, hdr = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, body, hdr = e.code, e.read(), e.headers
    if want is not None and status != want:
        raise VerifyError("GET %s: %d %s" % (url, status, body[:200]))
    return status, body, hdr


class Log:
    """The log as keys.json describes it."""

    def __init__(self, url):
        self.url = url
        _, body, _ = get(url + "/.well-known/trigguard/keys.json")
        keys = [k for k in json.loads(body)["keys"] if k.get("use") == "checkpoint"]
        if len(keys) != 1:
            raise VerifyError("keys.json lists %d checkpoint keys, want 1" % len(keys))
        k = keys[0]
        self.name, self.key_id, self.pub = parse_vkey(k["vkey"])
        pem = load_pem_public_key(k["publicKeyPem"].encode())
        if pem.public_bytes(Encoding.Raw, PublicFormat.Raw) != self.pub:
            raise VerifyError("keys.json: publicKeyPem is not the vkey's key")
        if k["origin"] != self.name or k["algorithm"] != "Ed25519" or k["status"] != "active":
            raise VerifyError("keys.json: checkpoint key %r" % k)
        if k["keyId"] != self.key_id.hex():
            raise VerifyError("keys.json: keyId %r is not the note key id" % k["keyId"])

    def checkpoint(self, note):
        """(size, root) of a signed checkpoint note of this log."""
        origin, size, root = parse_checkpoint(verify_note(note, self.name, self.key_id, self.pub))
        if origin != self.name:
            raise VerifyError("checkpoint origin %r, want %r" % (origin, self.name))
        return size, root

    def newest(self):
        _, body, hdr = get(self.url + "/v1/log/checkpoint")
        if hdr.get("Content-Type") != "text/plain; charset=utf-8":
            raise VerifyError("checkpoint content type %r" % hdr.get("Content-Type"))
        note = body.decode()
        return note, self.checkpoint(note)

    def consistent(self, a, b):
        (m, ra), (n, rb) = sorted([a, b])
        _, body, _ = get("%s/v1/log/proof/consistency?old=%d&new=%d" % (self.url, m, n))
        j = json.loads(body)
        if j["oldSize"] != m or j["newSize"] != n:
            raise VerifyError("consistency proof for the wrong sizes: %r" % j)
        proof = [b64d(p) for p in j["consistencyProof"]]
        if not verify_consistency(m, n, proof, ra, rb):
            raise VerifyError("checkpoints %d and %d are not consistent" % (m, n))

    def tile(self, level, index, width, entries=False):
        groups = []  # N in 3-digit groups, most significant first, all but the last x-prefixed
        n = index
        while True:
            groups.insert(0, n % 1000)
            n //= 1000
            if n == 0:
                break
        last = len(groups) - 1
        path = "/".join(("%03d" if i == last else "x%03d") % g for i, g in enumerate(groups))
        path = "tile/%s/%s%s" % ("entries" if entries else level, path,
                                 "" if width == 256 else ".p/%d" % width)
        _, body, hdr = get(self.url + "/v1/log/" + path)
        if hdr.get("Content-Type") != "application/octet-stream":
            raise VerifyError("%s: content type %r" % (path, hdr.get("Content-Type")))
        full = width == 256
        if full != ("immutable" in (hdr.get("Cache-Control") or "")):
            raise VerifyError("%s: Cache-Control %r" % (path, hdr.get("Cache-Control")))
        if entries:
            out, i = [], 0
            while i < len(body):
                ln = int.from_bytes(body[i : i + 2], "big")
                out.append(body[i + 2 : i + 2 + ln])
                i += 2 + ln
        else:
            if len(body) % 32:
                raise VerifyError("%s: %d bytes" % (path, len(body)))
            out = [body[i : i + 32] for i in range(0, len(body), 32)]
        if len(out) != width:
            raise VerifyError("%s: %d items, want %d" % (path, len(out), width))
        return out

    def root_from_tiles(self, size):
        """MTH of the tree of `size` leaves from its tiles: the entry bundles hash to the
        level-0 tiles, every level-L hash is the MTH of its full tile below, and the root is
        computed from the leaves."""
        leaves = []
        levels = {}
        level, width_total = 0, size
        while True:
            hashes = []
            for t in range((width_total + 255) // 256):
                w = min(256, width_total - 256 * t)
                hashes += self.tile(level, t, w)
                if level == 0:
                    ent = self.tile(0, t, w, entries=True)
                    if [leaf_hash(e) for e in ent] != hashes[256 * t :]:
                        raise VerifyError("entry bundle %d does not hash to tile 0/%d" % (t, t))
            levels[level] = hashes
            if level > 0:
                below = levels[level - 1]
                for i, h in enumerate(hashes):
                    if mth(below[256 * i : 256 * (i + 1)]) != h:
                        raise VerifyError("tile level %d hash %d is not its tile's MTH" % (level, i))
            width_total //= 256
            if width_total == 0:
                break
            level += 1
        leaves = levels[0]
        if len(leaves) != size:
            raise VerifyError("tiles hold %d leaves, want %d" % (len(leaves), size))
        return mth(leaves), leaves


# ---- load ------------------------------------------------------------------------------------

PERMIT = {
    "surface": "payments.charge",
    "action": "transfer_funds",
    "actor": "agent.billing",
    "context": {"amount": 2500, "currency": "USD"},
    "signals": {"riskScore": 0.12, "rsdSpike": False},
}


def load(url, token, acks, notes, seconds, threads):
    u = urllib.parse.urlparse(url)
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    ack_f = open(acks, "a", encoding="utf-8")
    note_f = open(notes, "a", encoding="utf-8")
    dead = threading.Event()
    prefix = "%d-%d" % (os.getpid(), int(time.time() * 1000))

    def decide(t):
        conn, i = None, 0
        while time.monotonic() < stop and not dead.is_set():
            i += 1
            body = dict(PERMIT, idempotency_key="tl-%s-%d-%d" % (prefix, t, i))
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
                conn.request("POST", "/v1/evaluate", json.dumps(body),
                             {"Content-Type": "application/json", "Authorization": "Bearer " + token})
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                dead.set()  # killed: what was acknowledged is in ACKS already
                return
            if r.status == 200:
                rec = json.loads(data).get("receipt")
                if rec:
                    with lock:
                        ack_f.write("%s %s\n" % (rec["executionId"], rec["receiptHash"]))
                        ack_f.flush()

    def poll():
        last = None
        while time.monotonic() < stop and not dead.is_set():
            try:
                _, body, _ = get(url + "/v1/log/checkpoint")
            except (OSError, VerifyError, http.client.HTTPException):
                return
            if body != last:
                last = body
                with lock:
                    note_f.write(json.dumps(body.decode()) + "\n")
                    note_f.flush()
            time.sleep(0.02)

    ts = [threading.Thread(target=decide, args=(t,)) for t in range(threads)]
    ts.append(threading.Thread(target=poll))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ack_f.close()
    note_f.close()
    return 0


# ---- check -----------------------------------------------------------------------------------


PAIR_SAMPLE = 24  # check --all-pairs: every pair among this many sizes (see below)


def check(url, token, acks, notes, all_pairs):
    failures = []
    log = Log(url)
    note, newest = log.newest()
    seen = {}  # size -> (root, note)
    texts = [note]
    if os.path.exists(notes):
        texts += [json.loads(line) for line in open(notes, encoding="utf-8") if line.strip()]
    receipts = []
    if os.path.exists(acks):
        receipts = [line.split() for line in open(acks, encoding="utf-8") if line.strip()]

    # every receipt's proof (several at once: each is one request and a few hashes)
    lock = threading.Lock()

    def prove(items):
        for exec_id, rh in items:
            try:
                for _ in range(50):
                    st, body, hdr = get("%s/v1/receipts/%s/proof" % (url, exec_id), token, None)
                    if st != 202:
                        break
                    if hdr.get("Retry-After") != "1":
                        raise VerifyError("202 without Retry-After: 1")
                    time.sleep(0.1)
                if st != 200:
                    raise VerifyError("HTTP %d %s" % (st, body[:200]))
                j = json.loads(body)
                size, root = log.checkpoint(j["checkpoint"])
                if j["logOrigin"] != log.name or j["treeSize"] != size:
                    raise VerifyError("origin or size: %r" % {k: j[k] for k in ("logOrigin", "treeSize")})
                proof = [b64d(p) for p in j["inclusionProof"]]
                if not verify_inclusion(leaf_hash(bytes.fromhex(rh)), j["leafIndex"], size, proof, root):
                    raise VerifyError("the inclusion proof does not verify")
                with lock:
                    texts.append(j["checkpoint"])
            except (VerifyError, KeyError, ValueError, OSError) as e:
                with lock:
                    failures.append("receipt %s: %s" % (exec_id, e))

    ts = [threading.Thread(target=prove, args=(receipts[i::4],)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

    # every checkpoint ever served: signed, one root per size, consistent with the newest
    for text in texts:
        try:
            size, root = log.checkpoint(text)
        except VerifyError as e:
            failures.append("checkpoint %r: %s" % (text[:60], e))
            continue
        if size in seen and seen[size][0] != root:
            failures.append("two checkpoints of size %d with different roots" % size)
        seen.setdefault(size, (root, text))
    note, newest = log.newest()  # the proofs above may have seen a newer one
    size_n, root_n = newest
    if size_n in seen and seen[size_n][0] != root_n:
        failures.append("two checkpoints of size %d with different roots" % size_n)
    seen.setdefault(size_n, (root_n, note))
    sizes = sorted(s for s in seen if s > 0)
    # Each seen tree is a prefix of the newest, so any two are prefixes of one another:
    # checking each against the newest covers every pair; --all-pairs asks the log for each.
    pairs = [(s, size_n) for s in sizes]
    if all_pairs:
        # Every pair is quadratic (146 checkpoints after pg_tlog's takeover: 10,700 proofs,
        # most of that test's time), and one pair's proof exercises the same code as the
        # next: every pair among at most PAIR_SAMPLE sizes spread over the range (the
        # smallest and the largest included), and each size with its successor, so every
        # checkpoint is also proved against an older tree than the newest.
        sample = sizes
        if len(sizes) > PAIR_SAMPLE:
            step = (len(sizes) - 1) / (PAIR_SAMPLE - 1)
            sample = sorted({sizes[round(i * step)] for i in range(PAIR_SAMPLE)})
        chosen = {(a, b) for i, a in enumerate(sample) for b in sample[i + 1:]}
        chosen |= set(zip(sizes, sizes[1:]))
        pairs += sorted(chosen - set(pairs))
    for a, b in pairs:
        try:
            log.consistent((a, seen[a][0]), (b, seen[b][0]))
        except VerifyError as e:
            failures.append(str(e))
    if size_n > 0:
        try:
            root, leaves = log.root_from_tiles(size_n)
            if root != root_n:
                failures.append("the root recomputed from the tiles is not the checkpoint's")
            for s in sizes:  # every seen root, recomputed from the leaves
                if mth(leaves[:s]) != seen[s][0]:
                    failures.append("checkpoint %d: its root is not the MTH of the first %d leaves" % (s, s))
        except VerifyError as e:
            failures.append("tiles: %s" % e)
    for f in failures:
        print("FAIL " + f)
    print("checked %d receipts, %d checkpoints (sizes %s..%s), %d consistency proofs" % (
        len(receipts), len(seen), sizes[0] if sizes else 0, size_n, len(pairs)))
    return 1 if failures else 0


def fill(url, token, n):
    """N PERMIT decisions, one connection, each its own idempotency key: leaves for tiles."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    prefix = "%d-%d" % (os.getpid(), int(time.time() * 1000))
    for i in range(n):
        body = dict(PERMIT, idempotency_key="fill-%s-%d" % (prefix, i))
        conn.request("POST", "/v1/evaluate", json.dumps(body),
                     {"Content-Type": "application/json", "Authorization": "Bearer " + token})
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            print("FAIL decision %d: HTTP %d" % (i, r.status))
            return 1
    return 0


def prove_at(url, token, exec_id, receipt_hash, size):
    """A receipt's proof into the older tree of `size` leaves (?size=): no checkpoint in the
    answer; it verifies against that tree's root, recomputed from the tiles."""
    log = Log(url)
    _, (newest, _) = log.newest()
    _, body, _ = get("%s/v1/receipts/%s/proof?size=%d" % (url, exec_id, size), token)
    j = json.loads(body)
    if "checkpoint" in j or j["treeSize"] != size or j["logOrigin"] != log.name:
        raise VerifyError("?size=%d: %r" % (size, j))
    _, leaves = log.root_from_tiles(newest)
    proof = [b64d(p) for p in j["inclusionProof"]]
    leaf = leaf_hash(bytes.fromhex(receipt_hash))
    if not verify_inclusion(leaf, j["leafIndex"], size, proof, mth(leaves[:size])):
        raise VerifyError("?size=%d: the proof does not verify" % size)
    return 0


# ---- batch-signed receipts (SPEC §12), offline -------------------------------------------


def canonical(v):
    """RFC 8785 for a receipt's members: strings, objects and arrays of them, ASCII names
    (sorted by UTF-16 code units = bytes for ASCII), minimal escapes, raw UTF-8."""
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def verify_batch_receipt(keys_doc, r):
    if "authoritySignature" in r or "authorityKeyId" in r:
        raise VerifyError("a batch receipt carries no authority signature")
    t = r["transparency"]
    want = {"checkpoint", "inclusionProof", "leafIndex", "logKeyId", "logOrigin", "treeSize"}
    if not isinstance(t, dict) or set(t) != want:
        raise VerifyError("transparency members %r" % sorted(t))
    key = None
    for k in keys_doc["keys"]:
        if k.get("use") == "checkpoint" and k.get("origin") == t["logOrigin"]:
            name, key_id, pub = parse_vkey(k["vkey"])
            if key_id.hex() == t["logKeyId"] and name == t["logOrigin"]:
                key = (name, key_id, pub)
    if key is None:
        raise VerifyError("no checkpoint key %s+%s in keys.json" % (t["logOrigin"], t["logKeyId"]))
    origin, size, root = parse_checkpoint(verify_note(t["checkpoint"], *key))
    if origin != t["logOrigin"] or size != t["treeSize"]:
        raise VerifyError("the checkpoint is %s size %d, the receipt says %s size %r" % (
            origin, size, t["logOrigin"], t["treeSize"]))
    body = {k: v for k, v in r.items() if k not in ("receiptHash", "transparency")}
    h = sha256(canonical(body))
    if h.hex() != r["receiptHash"]:
        raise VerifyError("receiptHash is not the hash of the receipt's members")
    proof = [b64d(p) for p in t["inclusionProof"]]
    for p in proof:
        if len(p) != 32:
            raise VerifyError("a proof hash is not 32 bytes")
    if not isinstance(t["leafIndex"], int) or not verify_inclusion(leaf_hash(h), t["leafIndex"], size, proof, root):
        raise VerifyError("the inclusion proof does not verify")
    return size


def batch(keys_path, files):
    keys_doc = json.load(open(keys_path))
    fails = 0
    for f in files:
        try:
            doc = json.load(open(f))
            verify_batch_receipt(keys_doc, doc.get("receipt", doc))
        except (VerifyError, KeyError, TypeError, ValueError) as e:
            print("FAIL %s: %s" % (f, e))
            fails += 1
    print("checked %d batch receipts, %d failed" % (len(files), fails))
    return 1 if fails else 0


def main(argv):
    if len(argv) == 5 and argv[1] == "fill":
        return fill(argv[2], argv[3], int(argv[4]))
    if len(argv) == 7 and argv[1] == "prove-at":
        try:
            return prove_at(argv[2], argv[3], argv[4], argv[5], int(argv[6]))
        except VerifyError as e:
            print("FAIL " + str(e))
            return 1
    if len(argv) == 8 and argv[1] == "load":
        return load(argv[2], argv[3], argv[4], argv[5], float(argv[6]), int(argv[7]))
    if len(argv) >= 4 and argv[1] == "batch":
        return batch(argv[2], argv[3:])
    if len(argv) >= 6 and argv[1] == "check":
        return check(argv[2], argv[3], argv[4], argv[5], "--all-pairs" in argv[6:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
