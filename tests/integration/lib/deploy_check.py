#!/usr/bin/env python3
"""deploy_check.py — checks of deploy/ for tests/integration/deploy_rules.sh.

  dashboard DASH.json                 structure of the Grafana dashboard (exit 1 on a problem)
  exprs DASH.json OUT.yml             every PromQL expression of the dashboard as a recording
                                      rule of OUT.yml, its Grafana variables replaced, so that
                                      `promtool check rules OUT.yml` parses each of them
  names RULES.yml DASH.json METRICS   every metric name the rules and the dashboard use must be
                                      a family of METRICS (a live /metrics), a recording rule of
                                      RULES.yml, or `up`; prints the names checked

Problems go to stderr, one a line; the exit status is 1 when there is any.
"""
import json
import re
import sys

import yaml

# Grafana's variables, replaced by values PromQL accepts (the dashboard's own `$job` and
# `$instance` only appear inside label matchers, where any string parses).
GRAFANA_VARS = [("$__rate_interval", "5m"), ("$__range", "1h"), ("$__interval", "1m"),
                ("$job", ".*"), ("$instance", ".*")]

# Words of PromQL that look like identifiers but name no series.
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "offset", "bool", "inf", "nan", "atan2"}

problems = []


def problem(msg):
    problems.append(msg)
    print("deploy_check: " + msg, file=sys.stderr)


def finish():
    sys.exit(1 if problems else 0)


def load_dashboard(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def panels_of(dash):
    """Every panel, those nested in collapsed rows included."""
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []) or []:
            yield q


def dashboard_exprs(dash):
    """(where, expression) for every query of the dashboard: panel targets and variables."""
    out = []
    for p in panels_of(dash):
        for t in p.get("targets", []) or []:
            if "expr" in t:
                out.append(("panel %r target %s" % (p.get("title"), t.get("refId")), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            out.append(("variable %s" % v.get("name"), q or ""))
    return out


def cmd_dashboard(path):
    dash = load_dashboard(path)
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
        problem("schemaVersion is %r, want an integer >= 36" % dash.get("schemaVersion"))
    for key in ("title", "uid"):
        if not isinstance(dash.get(key), str) or not dash[key]:
            problem("dashboard has no %s" % key)
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if ds is None or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problem("no `datasource` variable of type datasource for prometheus")
    for name in ("job", "instance"):
        v = variables.get(name)
        if v is None or v.get("type") != "query":
            problem("no `%s` query variable" % name)
        elif v.get("datasource", {}).get("uid") != "${datasource}":
            problem("variable %s does not query ${datasource}" % name)
    ids = set()
    n_targets = 0
    for p in panels_of(dash):
        title = p.get("title")
        if not isinstance(title, str) or not title:
            problem("a panel has no title: %r" % p.get("id"))
        if p.get("id") in ids:
            problem("panel id %r is used twice" % p.get("id"))
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")) or \
                g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24:
            problem("panel %r: gridPos %r is not within the 24 columns" % (title, g))
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            problem("panel %r does not use the ${datasource} variable" % title)
        targets = p.get("targets") or []
        if not targets:
            problem("panel %r has no query" % title)
        for t in targets:
            n_targets += 1
            expr = t.get("expr", "")
            if not expr.strip():
                problem("panel %r target %s has an empty expression" % (title, t.get("refId")))
            # Every series a panel shows must be the chosen job's and instances'.
            for sel in re.findall(r"\b(?:trigguard_|process_|up\b)[\w:]*\{([^}]*)\}", expr):
                if '$job' not in sel or '$instance' not in sel:
                    problem("panel %r: a selector without $job and $instance: {%s}" % (title, sel))
    if n_targets < 20:
        problem("only %d queries in the dashboard" % n_targets)
    finish()


def cmd_exprs(path, out):
    rules = []
    for i, (where, expr) in enumerate(dashboard_exprs(load_dashboard(path))):
        m = re.match(r"\s*label_values\((.*),\s*\w+\)\s*$", expr, re.S)
        if m:  # a variable: its series selector is PromQL, label_values() is Grafana's
            expr = m.group(1)
        for var, val in GRAFANA_VARS:
            expr = expr.replace(var, val)
        rules.append({"record": "dashboard:expr_%d" % i, "expr": expr,
                      "labels": {"where": where[:200]}})
    with open(out, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)


def metric_names(expr):
    """The series names a PromQL expression reads (approximate, but errs by finding more)."""
    m = re.match(r"\s*label_values\((.*),\s*\w+\)\s*$", expr, re.S)
    if m:
        expr = m.group(1)
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)        # strings (label values, regexes)
    s = re.sub(r"\{[^}]*\}", " ", s)                   # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                  # ranges and subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\$\w+", " ", s)                       # Grafana variables left over
    names = set()
    for mm in re.finditer(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(?=\s*(\(?))", s):
        word, paren = mm.group(1), mm.group(2)
        if paren == "(" or word.lower() in KEYWORDS:
            continue  # a function or an operator
        names.add(word)
    return names


def live_families(path):
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                names.add(m.group(1))
                if m.group(2) in ("histogram", "summary"):
                    names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
                continue
            m = re.match(r"([a-zA-Z_:][\w:]*)", line)
            if m:
                names.add(m.group(1))
    return names


def cmd_names(rules_path, dash_path, metrics_path):
    with open(rules_path, encoding="utf-8") as f:
        groups = yaml.safe_load(f)["groups"]
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    used = {}
    for g in groups:
        for r in g["rules"]:
            for n in metric_names(r["expr"]):
                used.setdefault(n, "rule %s" % (r.get("alert") or r.get("record")))
    for where, expr in dashboard_exprs(load_dashboard(dash_path)):
        for n in metric_names(expr):
            used.setdefault(n, where)
    live = live_families(metrics_path)
    if len(used) < 20:
        problem("only %d metric names found in the rules and the dashboard: %s"
                % (len(used), sorted(used)))
    for n in sorted(used):
        if n == "up" or n in recorded or n in live:
            print(n)
        elif ":" in n:
            problem("%s (%s) is no recording rule of %s" % (n, used[n], rules_path))
        else:
            problem("%s (%s) is not in the daemon's /metrics" % (n, used[n]))
    finish()


def main(argv):
    if len(argv) == 3 and argv[1] == "dashboard":
        cmd_dashboard(argv[2])
    elif len(argv) == 4 and argv[1] == "exprs":
        cmd_exprs(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "names":
        cmd_names(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
