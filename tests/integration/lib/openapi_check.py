"""openapi_check.py — live responses against docs/openapi.yaml (tests/integration/api_contract.sh).

Usage: openapi_check.py SPEC.yaml DIR

DIR holds one exchange per NNN prefix, as api_contract.sh saved them:
    NNN.meta     JSON {"label", "method", "path", "request_body": file name or null,
                 "listener": "main" or "decide" (the --decide-port listener)}
    NNN.status   the HTTP status
    NNN.headers  the response headers as curl -D wrote them
    NNN.body     the response body
For each exchange: the operation (path template and method) must be in the document; the
status must be one of its documented responses; every required response header must be
there and every documented header that is there must match its schema; the content type
must be a documented one and the body must validate against its schema (JSON Schema 2020-12,
python3-jsonschema). A decision request answered 2xx must also validate against the
operation's request body schema. Afterwards, every operation must have been seen with at
least one success and one error, and every schema and example in the document must be valid.
Prints one line per failure and a summary; exits 1 on any failure."""

import glob
import json
import os
import re
import sys

import jsonschema
import yaml

DIALECT = "https://json-schema.org/draft/2020-12/schema"


class Checker:
    def __init__(self, spec_path):
        with open(spec_path, encoding="utf-8") as f:
            self.spec = yaml.safe_load(f)
        self.failures = []
        self.checked = 0
        self.seen = {}  # (path, method) -> set of statuses
        self.ops = {}  # (path, method) -> (regex, operation)
        for path, item in self.spec["paths"].items():
            rx = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")
            for method, op in item.items():
                if method in ("get", "post", "put", "delete", "patch", "head", "options"):
                    self.ops[(path, method)] = (rx, op)
                    self.seen[(path, method)] = set()

    def fail(self, msg):
        self.failures.append(msg)

    def deref(self, obj):
        """Follows an OpenAPI $ref (#/components/...) to the object it names."""
        seen = 0
        while isinstance(obj, dict) and "$ref" in obj and set(obj) <= {"$ref", "description", "summary"}:
            ref = obj["$ref"]
            if not ref.startswith("#/"):
                raise ValueError("only local references are used: " + ref)
            node = self.spec
            for part in ref[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            obj = node
            seen += 1
            if seen > 20:
                raise ValueError("reference loop at " + ref)
        return obj

    def validator(self, schema):
        # The schema's "#/components/schemas/..." references resolve against this root.
        root = {"$schema": DIALECT, "components": self.spec.get("components", {}), "allOf": [schema]}
        return jsonschema.Draft202012Validator(root)

    def validate(self, schema, value, where):
        errors = sorted(self.validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
        for e in errors[:5]:
            loc = "/".join(str(p) for p in e.absolute_path) or "(root)"
            self.fail(f"{where}: at {loc}: {e.message[:300]}")
        return not errors

    # ---- the document itself -----------------------------------------------------------

    def check_document(self):
        if not str(self.spec.get("openapi", "")).startswith("3.1"):
            self.fail("the document is not OpenAPI 3.1")
        for name, schema in self.spec["components"]["schemas"].items():
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as e:
                self.fail(f"components.schemas.{name} is not a valid JSON Schema: {e.message}")

        def walk(node, where):
            if isinstance(node, dict):
                for media, mobj in (node.get("content") or {}).items():
                    if isinstance(mobj, dict) and "schema" in mobj:
                        try:
                            jsonschema.Draft202012Validator.check_schema(mobj["schema"])
                        except jsonschema.SchemaError as e:
                            self.fail(f"{where} {media}: invalid schema: {e.message}")
                        if "example" in mobj:
                            self.validate(mobj["schema"], mobj["example"], f"example of {where} {media}")
                for k, v in node.items():
                    walk(v, f"{where}.{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{where}[{i}]")

        walk(self.spec["paths"], "paths")
        walk(self.spec["components"].get("responses", {}), "components.responses")
        walk(self.spec["components"].get("requestBodies", {}), "components.requestBodies")

    # ---- one exchange ------------------------------------------------------------------

    def operation(self, method, path):
        for (p, m), (rx, op) in self.ops.items():
            if m == method and rx.match(path):
                return p, op
        return None, None

    def check_exchange(self, d, prefix):
        meta = json.load(open(f"{prefix}.meta", encoding="utf-8"))
        label = meta["label"]
        method = meta["method"].lower()
        path = meta["path"].split("?", 1)[0]
        status = int(open(f"{prefix}.status").read().strip() or 0)
        body = open(f"{prefix}.body", "rb").read()
        headers = parse_headers(open(f"{prefix}.headers", encoding="latin-1").read())
        where = f"{label} ({meta['method']} {meta['path']} -> {status})"
        self.checked += 1
        if status == 0:
            self.fail(f"{where}: no response")
            return
        op_method = "get" if method == "head" else method
        tpath, op = self.operation(op_method, path)
        if meta.get("listener") == "decide" and tpath != "/decide":
            # The /decide-only listener: every other path is 404 (info.description).
            tpath, op = None, None
            if status != 404:
                self.fail(f"{where}: the --decide-port listener answered {status}, not 404")
                return
            resp = self.deref(self.spec["components"]["responses"]["NotFound"])
        elif op is None:
            # A path (or method) the document does not have: only the router's answers.
            known = [p for (p, m), (rx, _) in self.ops.items() if rx.match(path)]
            fallback = {404: "NotFound", 414: "UriTooLong", 431: "HeadersTooLarge",
                        400: "BadRequestTransport", 503: "Overloaded"}
            if known:
                fallback = {405: "MethodNotAllowed", 414: "UriTooLong", 431: "HeadersTooLarge",
                            400: "BadRequestTransport", 503: "Overloaded"}
                tpath = known[0]
            if status not in fallback:
                self.fail(f"{where}: not a documented operation, and {status} is not what the router answers")
                return
            resp = self.deref(self.spec["components"]["responses"][fallback[status]])
        else:
            self.seen[(tpath, op_method)].add(status)
            resp = op["responses"].get(str(status))
            if resp is None:
                self.fail(f"{where}: status {status} is not documented for {op_method.upper()} {tpath}")
                return
            resp = self.deref(resp)
        for name, hobj in (resp.get("headers") or {}).items():
            hobj = self.deref(hobj)
            value = headers.get(name.lower())
            if value is None:
                if hobj.get("required"):
                    self.fail(f"{where}: required header {name} is missing")
                continue
            if "schema" in hobj:
                self.validate(hobj["schema"], value, f"{where}: header {name}")
        content = resp.get("content")
        if method == "head":
            return  # no body (curl -I writes the headers where the body would go)
        if not content:
            if body:
                self.fail(f"{where}: undocumented body {body[:80]!r}")
            return
        ctype = headers.get("content-type", "")
        media = None
        for key in content:
            if base_media(key) == base_media(ctype):
                media = key
                break
        if media is None:
            self.fail(f"{where}: Content-Type {ctype!r} is not one of {list(content)}")
            return
        schema = content[media].get("schema")
        if schema is None:
            return
        if base_media(media).endswith("json"):
            try:
                value = json.loads(body)
            except ValueError:
                self.fail(f"{where}: body is not JSON: {body[:120]!r}")
                return
        else:
            value = body.decode("utf-8", errors="replace")
        self.validate(schema, value, where)
        # A request the server accepted must fit the documented request body.
        rb = meta.get("request_body")
        if op is not None and rb and 200 <= status < 300 and tpath in ("/v1/evaluate", "/execute", "/decide"):
            rbody = self.deref(op.get("requestBody", {}))
            rschema = ((rbody.get("content") or {}).get("application/json") or {}).get("schema")
            if rschema is not None:
                try:
                    rvalue = json.load(open(os.path.join(d, rb), encoding="utf-8"))
                except ValueError:
                    self.fail(f"{where}: the request body was accepted but is not JSON")
                    return
                self.validate(rschema, rvalue, f"{where}: request body")

    def check_coverage(self):
        for (path, method), statuses in sorted(self.seen.items()):
            ok = any(200 <= s < 300 for s in statuses)
            err = any(s >= 400 for s in statuses)
            if not ok or not err:
                self.fail(f"{method.upper()} {path}: seen {sorted(statuses)}; want at least one success and one error")
        untested = []
        for (path, method), (_, op) in sorted(self.ops.items()):
            for st in op["responses"]:
                if int(st) not in self.seen[(path, method)]:
                    untested.append(f"{method.upper()} {path} {st}")
        return untested


def base_media(s):
    return s.split(";", 1)[0].strip().lower()


def parse_headers(text):
    """The last header block curl wrote (after any 100 Continue), names lower-cased."""
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.strip()]
    h = {}
    if not blocks:
        return h
    for line in blocks[-1].splitlines()[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            h.setdefault(k.strip().lower(), v.strip())
    return h


def main():
    spec, d = sys.argv[1], sys.argv[2]
    c = Checker(spec)
    c.check_document()
    for meta in sorted(glob.glob(os.path.join(d, "*.meta"))):
        c.check_exchange(d, meta[: -len(".meta")])
    untested = c.check_coverage()
    for f in c.failures:
        print("FAIL: " + f)
    print(f"openapi_check: {c.checked} responses against {len(c.ops)} operations, "
          f"{len(c.failures)} failure(s); documented but not provoked here: "
          + (", ".join(untested) if untested else "none"))
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
