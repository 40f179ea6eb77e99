"""evalsrv.py — the assertion evaluator behind tg_expect_py / tg_json in daemon.sh.

Runs once per test script as a bash coprocess, so an assertion costs a pipe round trip
instead of a Python start-up. Protocol, one command per line on stdin:
    EVAL <dir>   evaluate the expression in <dir>/expr over the last response
    JSON <dir>   print the value of the expression in <dir>/expr
The last response is <dir>/last.body, <dir>/last.headers, <dir>/last.status. Replies are
one line: "OK", "FAIL <why>" or "VAL <json or text>"."""

import datetime
import json
import re
import sys

hex64 = lambda x: isinstance(x, str) and re.fullmatch(r"[0-9a-f]{64}", x) is not None
is_exec_id = lambda x: isinstance(x, str) and re.fullmatch(r"exec_[0-9a-f]{32}", x) is not None


def iso(x):
    return datetime.datetime.fromisoformat(x.replace("Z", "+00:00"))


def load(d):
    b = open(d + "/last.body", "rb").read()
    try:
        j = json.loads(b)
    except ValueError:
        j = None
    h = {}
    try:
        for line in open(d + "/last.headers", encoding="latin-1").read().splitlines():
            if ":" in line and not line.startswith("HTTP/"):
                k, v = line.split(":", 1)
                h[k.strip().lower()] = v.strip()
    except OSError:
        pass
    try:
        s = int(open(d + "/last.status").read().strip() or 0)
    except (OSError, ValueError):
        s = 0
    return b, j, h, s


def main():
    for line in sys.stdin:
        cmd, _, d = line.rstrip("\n").partition(" ")
        try:
            expr = open(d + "/expr").read()
            b, j, h, s = load(d)
            env = {"b": b, "j": j, "h": h, "s": s, "hex64": hex64, "is_exec_id": is_exec_id,
                   "iso": iso, "datetime": datetime, "json": json, "re": re}
            v = eval(expr, env)
            if cmd == "EVAL":
                out = "OK" if v else "FAIL false"
            else:
                out = "VAL " + (v if isinstance(v, str) else json.dumps(v))
        except Exception as e:  # the expression is the test's, report anything
            out = "FAIL %s: %s" % (type(e).__name__, e)
        sys.stdout.write(out.replace("\n", " ") + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
