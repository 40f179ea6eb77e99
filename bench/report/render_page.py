#!/usr/bin/env python3
"""render_page.py — evidence/index.html from benchmark_summary.json.

usage: render_page.py [--output evidence/index.html] SUMMARY.json

A self-contained static page: inline CSS, inline SVG charts, no script, no network fetch
(the only links are relative ones to the JSON artifacts beside it). Sections: headline
figures, beside the original (their published figures, ours, the ratio, both machines),
environment, methodology, one table and one percentile-curve chart per harness (drawn from
the 105-point digests of the raw samples), the load table, reproduce, artifacts.
Every number on the page is read from the summary; nothing is computed but the ratios
(already in the summary) and chart coordinates.
"""
import argparse
import html
import math
import os
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import benchlib  # noqa: E402
import validate_callgrind  # noqa: E402

PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2"]

CSS = """
:root { --fg:#1f2933; --muted:#52606d; --line:#d9e2ec; --bg:#ffffff; --soft:#f5f7fa;
        --good:#047857; --bad:#b91c1c; --accent:#2563eb; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--fg); background:var(--bg); }
main { max-width:1180px; margin:0 auto; padding:28px 32px 60px; }
h1 { font-size:28px; margin:0 0 4px; }
h2 { font-size:21px; margin:40px 0 10px; padding-bottom:6px; border-bottom:2px solid var(--line); }
h3 { font-size:17px; margin:26px 0 6px; }
p { margin:6px 0; }
.sub { color:var(--muted); margin:0 0 18px; }
nav { display:flex; flex-wrap:wrap; gap:6px 16px; font-size:14px; margin:10px 0 6px; }
nav a { color:var(--accent); text-decoration:none; }
.cards { display:grid; grid-template-columns:repeat(auto-fill,minmax(250px,1fr)); gap:12px; }
.card { border:1px solid var(--line); border-radius:8px; padding:12px 14px; background:var(--soft); }
.card .v { font-size:24px; font-weight:650; font-variant-numeric:tabular-nums; }
.card .l { font-size:13px; color:var(--muted); }
.card .d { font-size:12px; color:var(--muted); }
table { border-collapse:collapse; width:100%; margin:8px 0 4px; font-size:13.5px; }
th, td { border-bottom:1px solid var(--line); padding:5px 8px; text-align:right;
         font-variant-numeric:tabular-nums; vertical-align:top; }
th { background:var(--soft); font-weight:600; }
th:first-child, td:first-child { text-align:left; }
td.t, th.t { text-align:left; }
.good { color:var(--good); font-weight:600; } .bad { color:var(--bad); font-weight:600; }
.kv td:first-child { width:230px; color:var(--muted); }
.kv td { text-align:left; }
pre { background:#0f172a; color:#e2e8f0; padding:10px 12px; border-radius:6px; overflow-x:auto;
      font-size:12.5px; white-space:pre-wrap; word-break:break-all; margin:4px 0 12px; }
.note { font-size:13px; color:var(--muted); }
.chart { margin:8px 0 0; }
.hw { display:grid; grid-template-columns:1fr 1fr; gap:12px; margin:8px 0; }
.hw div { border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
ul { margin:6px 0; padding-left:22px; } li { margin:3px 0; }
footer { margin-top:40px; font-size:12px; color:var(--muted); }
"""


def esc(x):
    return html.escape(str(x), quote=True)


def fmt_ms(v):
    if v is None:
        return "n/a"
    if v >= 100:
        return f"{v:,.1f}"
    if v >= 1:
        return f"{v:.2f}"
    if v >= 0.01:
        return f"{v:.3f}"
    return f"{v:.6f}"


def fmt_rate(v):
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def fmt_value(v, unit):
    if unit == "ratio":
        return f"{100 * v:.1f} %"
    if unit == "ms" and v is not None and v < 0.01:
        return f"{fmt_ms(v)} ms ({v * 1e6:,.0f} ns)"
    return (fmt_ms(v) + " ms") if unit == "ms" else (fmt_rate(v) + (" /s" if unit == "/s" else
                                                                    " " + unit))


# ---- SVG percentile curve ---------------------------------------------------------------

def nines(p):
    """x position of percentile p on a 'nines' axis: 0 at p0, 1 at p90, 2 at p99, ..."""
    return -math.log10(max(1e-4, 1.0 - p / 100.0))


def unit_for(vmax):
    if vmax < 0.01:
        return "ns", 1e6
    if vmax < 1:
        return "µs", 1e3
    return "ms", 1.0


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def percentile_chart(series, title):
    """series: [(label, percentiles, latency_ms)] -> inline SVG (x: percentile on a nines
    scale up to p99.99; y: latency, linear from 0, or logarithmic when the tail is more than
    30 times the smallest value, so a few preempted samples do not flatten the curve)."""
    w, h, ml, mr, mt, mb = 1080, 300, 70, 180, 28, 44
    pw, ph = w - ml - mr, h - mt - mb
    pts_all = [(p, v) for _, ps, vs in series for p, v in zip(ps, vs) if p <= 99.99]
    vmax = max((v for _, v in pts_all), default=1.0)
    vmin = min((v for _, v in pts_all if v > 0), default=vmax)
    unit, mult = unit_for(vmax)
    xmax = 4.0
    log_y = vmax > 30 * vmin
    if log_y:
        lo = 10 ** math.floor(math.log10(vmin * mult))
        hi = 10 ** math.ceil(math.log10(vmax * mult))
        ticks = []
        d = lo
        while d <= hi * 1.0001:
            ticks += [d * m for m in ((1, 2, 5) if hi / lo <= 1000 else (1,)) if d * m <= hi]
            d *= 10
    else:
        lo, hi = 0.0, nice_max(vmax * mult)
        ticks = [hi * i / 5 for i in range(6)]

    def X(p):
        return ml + pw * min(nines(p), xmax) / xmax

    def frac(y):  # 0 at the bottom of the plot, 1 at the top
        if log_y:
            return (math.log10(max(y, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return y / hi

    def Y(v):
        return mt + ph - ph * frac(v * mult)

    out = [f'<svg class="chart" role="img" aria-label="{esc(title)}" viewBox="0 0 {w} {h}" '
           f'width="100%" font-family="sans-serif" '
           f'font-size="12">',
           f'<title>{esc(title)}</title>',
           f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fbfcfe" '
           f'stroke="#d9e2ec"/>']
    for yv in ticks:
        y = mt + ph - ph * frac(yv)
        out.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{ml + pw}" y2="{y:.1f}" stroke="#e4e7eb"/>')
        label = f"{yv:,.0f}" if yv >= 1000 else f"{yv:.3g}"
        out.append(f'<text x="{ml - 8}" y="{y + 4:.1f}" text-anchor="end" fill="#52606d">'
                   f'{esc(label)}</text>')
    for p, lab in ((0, "p0"), (50, "p50"), (90, "p90"), (99, "p99"), (99.9, "p99.9"),
                   (99.99, "p99.99")):
        x = X(p)
        out.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{mt + ph}" stroke="#e4e7eb"/>')
        out.append(f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle" '
                   f'fill="#52606d">{lab}</text>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{h - 6}" text-anchor="middle" fill="#52606d">'
               f'percentile (log scale of 1 - p: each step right is one more nine)</text>')
    out.append(f'<text x="16" y="{mt + ph / 2:.1f}" text-anchor="middle" fill="#52606d" '
               f'transform="rotate(-90 16 {mt + ph / 2:.1f})">latency ({unit}'
               f'{", log scale" if log_y else ""})</text>')
    for i, (label, ps, vs) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{X(p):.1f},{Y(v):.1f}" for p, v in zip(ps, vs) if p <= 99.99)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        ly = mt + 14 + 20 * i
        out.append(f'<line x1="{ml + pw + 14}" y1="{ly - 4}" x2="{ml + pw + 36}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="3"/>')
        out.append(f'<text x="{ml + pw + 42}" y="{ly}" fill="#1f2933">{esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


# ---- sections -----------------------------------------------------------------------------

def run_table(h):
    load = h["benchmark"].endswith("_load")
    head = ["run", "concurrency", "duration" if load else "iterations", "requests", "p50",
            "p90", "p95", "p99", "p99.9", "max", "mean", "throughput /s", "errors",
            "error rate"]
    rows = []
    for r in h["runs"]:
        lat = r["latency_ms"]
        size = f"{r['duration_s']:.1f} s" if load else f"{r['iterations']:,}"
        err_cls = "bad" if r["errors"]["count"] else ""
        rows.append(
            f"<tr><td>{esc(r['name'])}</td><td>{r['concurrency']}</td><td>{size}</td>"
            f"<td>{r['requests']:,}</td>"
            + "".join(f"<td>{fmt_ms(lat[k])}</td>"
                      for k in ("p50", "p90", "p95", "p99", "p99_9", "max", "mean"))
            + f"<td>{fmt_rate(r['throughput_per_s'])}</td>"
            f"<td class=\"{err_cls}\">{r['errors']['count']:,}</td>"
            f"<td class=\"{err_cls}\">{100 * r['errors']['rate']:.3f}%</td></tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head)
            + "</tr><tr><th></th><th></th><th></th><th></th>"
            + "<th colspan=\"7\" style=\"text-align:center\">latency, ms</th>"
            + "<th></th><th></th><th></th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def harness_section(h, idx):
    parts = [f'<section id="h{idx}"><h3>{esc(h["title"])}</h3>',
             f"<p>{esc(h['what'].rstrip('.'))}.</p>",
             f'<p class="note"><b>Method:</b> {esc(h["method"].rstrip("."))}. '
             f'<b>Not measured:</b> {esc(h["not_measured"].rstrip("."))}. '
             f'<b>Harness:</b> <code>{esc(h["harness"])}</code>, '
             f'artifact <a href="artifacts/benchmarks/{esc(h["file"])}">'
             f'{esc(h["file"])}</a>.</p>',
             run_table(h)]
    extra = []
    for r in h["runs"]:
        if "per_call_throughput_per_s" in r:
            extra.append(f"{esc(r['name'])}: {fmt_rate(r['per_call_throughput_per_s'])}/s in "
                         f"the per-call loop (each call timed); headline throughput "
                         f"{fmt_rate(r['throughput_per_s'])}/s from "
                         f"{esc(r.get('throughput_source', ''))}")
    if h.get("clock"):
        extra.append(f"clock: {esc(h['clock'].get('source'))}, one read costs about "
                     f"{esc(h['clock'].get('overhead_ns_p50'))} ns (p50), included in every "
                     "per-call sample")
    fl = h.get("floor")
    if fl:
        us = {k: f"{fl[k] / 1e3:,.1f} µs" if isinstance(fl.get(k), (int, float)) else "n/a"
              for k in benchlib.FLOOR_NS_KEYS}
        extra.append(f"floor: {esc(fl.get('what', ''))}: {us['mandatory_crypto_p50_ns']}; "
                     f"evaluate handler p50 {us['evaluate_handler_p50_ns']}, decide handler "
                     f"p50 {us['decide_handler_p50_ns']}, difference "
                     f"{us['evaluate_minus_decide_p50_ns']}")
    if extra:
        parts.append('<p class="note">' + "; ".join(extra) + ".</p>")
    series = [(r["name"], r["digest"]["percentiles"],
               r["digest"]["latency_ms"]) for r in h["runs"]]
    parts.append(percentile_chart(series, f"Latency percentiles: {h['title']}"))
    parts.append('<p class="note">The curve is drawn from the 105-point digest of the raw '
                 "samples (nearest rank); the maximum is in the table.</p></section>")
    return "\n".join(parts)


def load_table(s):
    loads = [h for h in s["harnesses"] if h["benchmark"].endswith("_load")]
    if not loads:
        return "<p>No load run in this summary.</p>"
    head = ["store, durability", "connections", "RPS", "p50", "p95", "p99", "p99.9", "max",
            "requests", "errors", "error rate"]
    rows = []
    for h in loads:
        st = h.get("store") or {"kind": "file", "instances": 1}
        label = (f"file, {h['durability']}" if st["kind"] == "file" else
                 "PostgreSQL" if st["instances"] == 1 else
                 f"PostgreSQL ×{st['instances']}, {st.get('balancer', '').split(',')[0]}")
        for r in h["runs"]:
            lat = r["latency_ms"]
            rows.append(f"<tr><td>{esc(label)}</td><td>{r['concurrency']}</td>"
                        f"<td><b>{fmt_rate(r['throughput_per_s'])}</b></td>"
                        + "".join(f"<td>{fmt_ms(lat[k])}</td>"
                                  for k in ("p50", "p95", "p99", "p99_9", "max"))
                        + f"<td>{r['requests']:,}</td><td>{r['errors']['count']:,}</td>"
                        f"<td>{100 * r['errors']['rate']:.3f}%</td></tr>")
    return ('<table><thead><tr>' + "".join(f"<th>{esc(c)}</th>" for c in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            + '<p class="note">Latencies in ms. RPS = responses per second over the timed '
              "window (wrk); every response checked for 2xx and PERMIT.</p>")


def opt(v, fmt):
    return "n/a" if v is None else fmt(v)


def floor_section(s):
    """Today's CPU per request against the floor of issue 25, per component (the summary's
    "floor": every term measured by this run)."""
    fl = s.get("floor")
    if not fl:
        return ("<p>This run has no floor: it needs the nginx load (step 3c of scripts/bench) "
                "and the in-process handler harness.</p>")
    crit = fl["criteria"]
    src = fl["sources"]
    out = [f"<p>{esc(fl['what'])}. The bar: {esc(crit['what'])}. Terms: HTTP = {esc(src['http'])}; "
           f"signature = {esc(src['signature'])}; hashing = {esc(src['hashing'])}; ledger = "
           f"{esc(src['ledger'])}. “Today” splits the daemon's CPU into the handler in "
           f"process ({esc(src['handler_in_process'])}) and the rest (HTTP, threads, ledger), "
           "each beside its share of the floor. Everything shares this machine's cores, so "
           "the figures are noisy; the ratios are the point.</p>"]
    for row in fl["rows"]:
        c = row["concurrency"]
        ms = row["evaluate"]
        out.append(f"<h3>{c} connections</h3>")
        if not ms:
            out.append("<p>No /v1/evaluate load run at this connection count.</p>")
        else:
            head = "".join(f'<th class="t">{esc(m["durability"])}: floor</th>'
                           f'<th class="t">{esc(m["durability"])}: today</th>' for m in ms)
            body = []

            def line(label, floor_of, today_of, cls=""):
                # No "today" of its own for a single term: the daemon's CPU is not split
                # that finely (the two rows below split it).
                cells = "".join(f"<td>{opt(floor_of(m), lambda v: f'{v:.2f}')}</td>"
                                f"<td>{'—' if today_of(m) is None else f'{today_of(m):.2f}'}"
                                "</td>" for m in ms)
                body.append(f'<tr{cls}><td class="t">{esc(label)}</td>{cells}</tr>')

            none = (lambda m: None)
            line(f"HTTP ({fl['static_server']}, CPU/request)", lambda m: m["terms_us"]["http"],
                 none)
            line("Ed25519 signature", lambda m: m["terms_us"]["signature"], none)
            line("SHA-256, each text once", lambda m: m["terms_us"]["hashing"], none)
            line("ledger append + sync share", lambda m: m["terms_us"]["ledger"], none)
            line("handler in process (signature + hashing | evaluate_handler p50)",
                 lambda m: m["floor_of_today_us"]["handler_in_process"],
                 lambda m: m["today_us"]["handler_in_process"])
            line("the rest (HTTP + ledger | daemon − handler)",
                 lambda m: m["floor_of_today_us"]["rest"], lambda m: m["today_us"]["rest"])
            line("total: floor | daemon CPU per request", lambda m: m["floor_us"],
                 lambda m: m["daemon_cpu_us_per_request"], ' class="sum"')
            ratios = "".join(
                f'<td colspan="2" class="{"good" if m["meets_criteria"] else "bad"}">'
                f'{opt(m["ratio_to_floor"], lambda v: f"{v:.2f}×")} the floor '
                f'({m["throughput_per_s"]:,.0f} RPS)</td>' for m in ms)
            body.append(f'<tr><td class="t">today ÷ floor (bar ≤ {crit["max_ratio_to_floor"]}×)'
                        f"</td>{ratios}</tr>")
            out.append('<table><thead><tr><th class="t">CPU per request against the floor, '
                       f'per component (µs)</th>{head}</tr></thead><tbody>{"".join(body)}'
                       "</tbody></table>")
        d = row["decide"]
        if d:
            cls = "good" if d["meets_criteria"] else "bad"
            out.append(f'<p class="{cls}">/decide: {d["daemon_cpu_us_per_request"]:.2f} µs of '
                       f'daemon CPU per request, {d["ratio_to_static"]:.2f}× nginx\'s '
                       f'{row["static_cpu_us_per_request"]:.2f} µs (bar ≤ '
                       f'{crit["max_decide_ratio_to_static"]}×).</p>')
    st = next((h.get("static") for h in s["harnesses"] if h.get("static")), None)
    if st:
        out.append(f'<p class="note">The static server: {esc(st["what"])}. Body '
                   f'{st["body_bytes"]} B; headers {st["daemon_header_bytes"]} B from the '
                   f'daemon, {st["static_header_bytes"]} B from nginx. What differs: '
                   f'{esc(st["differs"])}.</p>')
    return "\n".join(out)


def stores_section(s):
    """PostgreSQL beside the file ledger of the same run (the summary's "stores")."""
    st = s.get("stores")
    if not st:
        return ("<p>This run measured the file ledger only (no PostgreSQL runs were "
                "asked for).</p>")
    crit = st["criteria"]
    out = [f"<p>The bar ({esc(crit['applies_to'])}): {esc(crit['what'])}. Everything shares "
           "this machine's cores (database server, daemons, balancer and wrk), so the "
           "PostgreSQL figures are read as ratios to the file ledger measured by the same "
           "run.</p>"]
    for why in st["skipped"]:
        out.append(f'<p class="bad">Skipped: {esc(why)}.</p>')
    if st["rows"]:
        head = ["store", "connections", "RPS", "÷ file fsync", "p50", "p99", "errors",
                "records / commit", "commit, mean ms", "CPU µs / request", "bar"]
        rows = []
        for r in st["rows"]:
            bar = {True: '<span class="good">met</span>', False: '<span class="bad">not met'
                   "</span>", None: ""}[r["meets_criteria"]]
            if r["meets_criteria"] is False:
                why = []
                ratio = r["ratio_to_file_fsync"]
                if ratio is None:
                    why.append("no file-fsync run at this count")
                elif ratio < crit["min_ratio_to_file_fsync"]:
                    why.append(f"{100 * ratio:.1f} % &lt; "
                               f"{100 * crit['min_ratio_to_file_fsync']:.0f} %")
                if r["p99_ms"] > crit["max_p99_ms"]:
                    why.append(f"p99 {fmt_ms(r['p99_ms'])} &gt; {crit['max_p99_ms']:g} ms")
                if r["errors"] > crit["max_errors"]:
                    why.append(f"{r['errors']:,} errors")
                bar += '<br><span class="note">' + "; ".join(why) + "</span>"
            err_cls = "bad" if r["errors"] else ""
            rows.append(
                f"<tr><td>{esc(r['variant'])}</td><td>{r['concurrency']}</td>"
                f"<td><b>{fmt_rate(r['throughput_per_s'])}</b></td>"
                f"<td>{opt(r['ratio_to_file_fsync'], lambda v: f'{100 * v:.1f} %')}</td>"
                f"<td>{fmt_ms(r['p50_ms'])}</td><td>{fmt_ms(r['p99_ms'])}</td>"
                f"<td class=\"{err_cls}\">{r['errors']:,}</td>"
                f"<td>{opt(r['records_per_commit'], lambda v: f'{v:.2f}')}</td>"
                f"<td>{opt(r['mean_commit_ms'], fmt_ms)}</td>"
                f"<td>{opt(r['cpu_us_per_request'], lambda v: f'{v:,.0f}')}</td>"
                f"<td>{bar}</td></tr>")
        out.append("<table><thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head)
                   + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
        out.append(
            '<p class="note">Records per commit and commit latency are differences of the '
            "ledger's own /metrics counters over the timed window "
            "(trigguard_ledger_batch_records, trigguard_ledger_fsync_seconds: fdatasync for "
            "the file ledger, one transaction's COMMIT round trip for PostgreSQL). CPU per "
            "request is the whole machine's busy time from /proc/stat over the window "
            "divided by the requests (it includes anything else that ran meanwhile: see the "
            "load average under Environment); the benchmark's own processes, per "
            "request:</p>")
        procs = []
        for h in s["harnesses"]:
            if h["benchmark"] != "http_evaluate_load":
                continue
            for r in h["runs"]:
                cpu = r.get("cpu")
                if not cpu or r["concurrency"] not in {x["concurrency"] for x in st["rows"]}:
                    continue
                parts = ", ".join(f"{esc(n)} {e['us_per_request']:,.0f} µs"
                                  for n, e in cpu["processes"].items()
                                  if e.get("us_per_request") is not None)
                procs.append(f"<li>{esc(h['title'])}, {r['concurrency']} connections: "
                             f"{parts} (machine {cpu['machine']['utilization'] * 100:.0f} % "
                             "busy)</li>")
        out.append("<ul>" + "".join(procs) + "</ul>")
        ab = st.get("ab")
        if ab:
            out.append(f"<h3>A/B: alternating rounds</h3><p>{esc(ab['what'])}. Median ratio "
                       f"<b>{100 * ab['median_ratio']:.1f} %</b> (min "
                       f"{100 * ab['min_ratio']:.1f} %, max {100 * ab['max_ratio']:.1f} %).</p>")
            head = ["round", "connections", "file RPS", "file p99", "PostgreSQL RPS",
                    "PostgreSQL p99", "PostgreSQL errors", "records / commit",
                    "commit, mean ms", "÷ file fsync"]
            rows = []
            for r in ab["rounds"]:
                f, p = r["file"], r["postgres"]
                rows.append(
                    f"<tr><td>{r['round']}</td><td>{r['concurrency']}</td>"
                    f"<td>{fmt_rate(f['throughput_per_s'])}</td><td>{fmt_ms(f['p99_ms'])}</td>"
                    f"<td>{fmt_rate(p['throughput_per_s'])}</td><td>{fmt_ms(p['p99_ms'])}</td>"
                    f"<td>{p['errors']:,}</td>"
                    f"<td>{opt(p['records_per_commit'], lambda v: f'{v:.2f}')}</td>"
                    f"<td>{opt(p['mean_commit_ms'], fmt_ms)}</td>"
                    f"<td><b>{100 * r['ratio']:.1f} %</b></td></tr>")
            out.append("<table><thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head)
                       + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
        pg = next((h for h in s["harnesses"] if (h.get("store") or {}).get("kind")
                   == "postgres"), None)
        if pg:
            sett = pg["store"].get("postgres", {}).get("settings", {})
            out.append('<p class="note">PostgreSQL settings read from the server: '
                       + esc(", ".join(f"{k} {v}" for k, v in sorted(sett.items())))
                       + ".</p>")
    return "\n".join(out)


def log_section(s):
    """The transparency log's runs beside the reference of the same run (the summary's
    "transparency_log")."""
    tl = s.get("transparency_log")
    if not tl:
        return "<p>This run did not measure the transparency log.</p>"
    out = []
    lab = tl.get("ab")
    if lab:
        rows = "".join(
            f"<tr><td>{r['round']}</td><td>{r['concurrency']}</td>"
            f"<td>{fmt_rate(r['no_log']['throughput_per_s'])}</td>"
            f"<td>{fmt_rate(r['log']['throughput_per_s'])}</td><td>{r['log_ratio']:.3f}</td>"
            f"<td>{opt(r['batch'], lambda b: fmt_rate(b['throughput_per_s']))}</td>"
            f"<td>{opt(r['batch_ratio'], lambda v: f'{v:.3f}')}</td></tr>"
            for r in lab["rounds"])
        out.append(f"<p><b>A/B, the figure to quote</b>: {esc(lab['what'])}. Median log ÷ no log "
                   f"{lab['median_log_ratio']:.3f} (the log's cost "
                   f"{100 * lab['log_cost']:.1f} %), batch ÷ no log "
                   f"{opt(lab['median_batch_ratio'], lambda v: f'{v:.3f}')}.</p>"
                   "<table><thead><tr><th>round</th><th>connections</th><th>no log RPS</th>"
                   "<th>log RPS</th><th>log ÷ no log</th><th>batch RPS</th>"
                   "<th>batch ÷ no log</th></tr></thead><tbody>" + rows + "</tbody></table>")
    if "criteria" not in tl:
        return "\n".join(out)
    crit = tl["criteria"]
    out += [f"<p>The long runs, one daemon after another. Reference: {esc(crit['reference'])}. The bars: the log costs at most "
           f"{100 * crit['max_log_cost']:.0f} % of the reference's throughput; checkpoint lag "
           f"p99 at most {crit['max_lag_p99_ms']:g} ms where the load reaches "
           f"{crit['lag_at_rps']:,} requests/s; batch-signed receipts at "
           f"{', '.join(str(c) for c in crit['batch_connections'])} connections at least "
           f"{crit['min_batch_ratio']:g}× the reference with p99 at most "
           f"{crit['batch_max_p99_ms']:g} ms and no errors.</p>"]
    for k, v in sorted(tl["log_settings"].items()):
        out.append(f"<p class=\"note\">{esc(k)}: receipt signing {esc(v['receipt_signing'])}, "
                   f"--checkpoint-min-interval {v['checkpoint_min_interval_ms']} ms, "
                   f"--checkpoint-interval {v['checkpoint_interval_ms']} ms.</p>")
    head = ["connections", "daemon", "RPS", "÷ reference", "p99", "errors",
            "daemon CPU µs / request", "checkpoints / s", "leaves / checkpoint",
            "lag mean", "lag p99 ≤", "bar"]
    names = {"no_log": "no log (reference)", "log": "log, every receipt signed",
             "batch": "log, batch-signed receipts"}
    rows = []
    for r in tl["rows"]:
        base = r["no_log"]["throughput_per_s"] if r["no_log"] else None
        for k in ("no_log", "log", "batch"):
            x = r[k]
            if x is None:
                continue
            check = {"log": r["checks"].get("log_cost"), "batch": r["checks"].get("batch"),
                     "no_log": None}[k]
            bar = {True: '<span class="good">met</span>',
                   False: '<span class="bad">not met</span>', None: ""}[check]
            lag = x["lag_p99_bucket_le_ms"]
            rows.append(
                f"<tr><td>{r['concurrency']}</td><td>{esc(names[k])}</td>"
                f"<td><b>{fmt_rate(x['throughput_per_s'])}</b></td>"
                f"<td>{opt(x['throughput_per_s'] / base if base else None, lambda v: f'{100 * v:.1f} %')}</td>"
                f"<td>{fmt_ms(x['p99_ms'])}</td>"
                f"<td class=\"{'bad' if x['errors'] else ''}\">{x['errors']:,}</td>"
                f"<td>{opt(x['daemon_cpu_us_per_request'], lambda v: f'{v:,.1f}')}</td>"
                f"<td>{opt(x['signatures_per_s'], lambda v: f'{v:,.1f}')}</td>"
                f"<td>{opt(x['leaves_per_checkpoint'], lambda v: f'{v:,.1f}')}</td>"
                f"<td>{opt(x['lag_mean_ms'], lambda v: fmt_ms(v) + ' ms')}</td>"
                f"<td>{esc('n/a' if lag is None else (lag if lag == '+Inf' else fmt_ms(lag) + ' ms'))}</td>"
                f"<td>{bar}</td></tr>")
        lagc = r["checks"].get("lag_p99")
        if lagc is not None:
            rows.append(f"<tr><td>{r['concurrency']}</td><td colspan=\"10\">checkpoint lag "
                        f"p99 at or above {crit['lag_at_rps']:,}/s</td><td>"
                        + ('<span class="good">met</span>' if lagc
                           else '<span class="bad">not met</span>') + "</td></tr>")
    out.append("<table><thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head)
               + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    out.append('<p class="note">Checkpoints per second are the log key\'s signatures per '
               "second (one per checkpoint, whatever the load); the lag's p99 is the upper "
               "bound of the first trigguard_log_checkpoint_lag_seconds bucket reaching 99 % of "
               "the window's checkpoints (bounds 50 µs … 100 ms, then +Inf). Daemon CPU per "
               "request is the daemon's own utime+stime from /proc over the window.</p>")
    return "\n".join(out)


def comparison_table(s):
    rows = []
    for c in s["comparison"]:
        adv = c["advantage"]
        verdict = (f'<span class="good">×{adv:.2f} better</span>' if adv >= 1
                   else f'<span class="bad">×{(1 / adv if adv else float("inf")):.2f} '
                        "worse</span>")
        ratio = c["ours"] / c["theirs"]
        rows.append(f"<tr><td>{esc(c['metric'])}</td>"
                    f"<td>{fmt_value(c['ours'], c['unit'])}</td>"
                    f"<td>{fmt_value(c['theirs'], c['unit'])}</td>"
                    f"<td>{ratio:.3g}</td><td>{verdict}</td>"
                    f"<td class=\"t note\">{esc(c.get('note', ''))}</td></tr>")
    return ("<table><thead><tr><th>metric</th><th>trigguard (this run)</th>"
            "<th>original (published)</th><th>ratio ours ÷ theirs</th>"
            "<th>for trigguard</th><th class=\"t\">note</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def env_table(s):
    e = s["environment"]
    libs = "; ".join(f"{n} {e['libraries'][n]['runtime']} ({e['libraries'][n]['package']})"
                     for n in benchlib.LIBRARIES)
    rows = [("CPU", f"{e['cpu_model']} ({e['cpu_cores']} cores online, shared by the daemon "
                    "and the load generator)"),
            ("memory", f"{e['memory_total_mib']:,} MiB"), ("kernel", e["kernel"]),
            ("OS", e["os"]), ("compiler", e["compiler"]),
            ("build", f"{e['build_type']}; sanitizers {'on' if e['sanitizers'] else 'off'}"),
            ("C flags (daemon)", e["c_flags"]), ("libraries", libs),
            ("git commit", f"{s['git']['commit']}"
                           + (" (source tree had uncommitted changes)"
                              if s["git"].get("source_tree_modified") else "")),
            ("durability modes", e["durability"]),
            ("load average before / after", f"{s.get('loadavg_before', 'unknown')} / "
                                            f"{e['loadavg']}"),
            ("date", s["generated"]), ("mode", f"{s['mode']} ({s['command']})")]
    return ('<table class="kv"><tbody>'
            + "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows)
            + "</tbody></table>")


def callgrind_section(cg):
    """Instructions per request from scripts/callgrind (its own file, validated first): the
    one measure here that does not move with the machine's noise."""
    if cg is None:
        return ("<p>No callgrind file was given (<code>scripts/callgrind</code> writes "
                "<code>evidence/artifacts/callgrind/callgrind.json</code>; "
                "<code>render_page.py --callgrind FILE</code> shows it).</p>")
    ref = cg.get("ref") or {}
    tree_c, ref_c = cg["tree"]["commit"][:12], (ref.get("commit") or "")[:12]
    out = [f"<p>{esc(cg['valgrind'])}, {cg['requests']:,} sequential requests per case after "
           f"{cg['warmup']:,} warm-up, one daemon thread; this tree (<code>{esc(tree_c)}</code>) "
           + (f"beside <code>{esc(ref_c)}</code> ({esc(ref.get('gitref', ''))})" if ref_c else "")
           + f". Command: <code>{esc(cg['command'])}</code>. <b>handler</b>: inside the request "
           "handler and its callees; <b>process</b>: every thread of the daemon while the "
           "requests ran.</p>"]
    rows = []
    for c in cg["cases"]:
        for m in ("handler", "process"):
            t = c["tree"][m]["ir_per_request"]
            r = c["ref"][m]["ir_per_request"] if c.get("ref") else None
            ratio = (c.get("ratio") or {}).get(m)
            rows.append(f'<tr><td class="t">{esc(c["endpoint"])}'
                        f'{" (" + esc(c["durability"]) + ")" if c.get("durability") else ""}</td>'
                        f'<td class="t">{m}</td><td>{t:,.0f}</td>'
                        f'<td>{opt(r, lambda v: f"{v:,.0f}")}</td>'
                        f'<td>{opt(ratio, lambda v: f"{v:.4f}")}</td></tr>')
    out.append('<table><thead><tr><th class="t">case</th><th class="t">measure</th>'
               '<th>this tree, instructions per request</th><th>ref</th><th>tree ÷ ref</th>'
               f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    for c in cg["cases"]:
        objs = c["tree"]["process"].get("by_object") or []
        if not objs:
            continue
        cells = "".join(f'<tr><td class="t">{esc(o["object"])}</td>'
                        f'<td>{o["ir_per_request"]:,.0f}</td><td>{o["share"] * 100:.1f} %</td></tr>'
                        for o in objs[:8])
        out.append(f'<table><thead><tr><th class="t">{esc(c["endpoint"])}'
                   f'{" (" + esc(c["durability"]) + ")" if c.get("durability") else ""}: '
                   'where the process\'s instructions go, by object</th><th>per request</th>'
                   f'<th>share</th></tr></thead><tbody>{cells}</tbody></table>')
    note = (cg.get("sha256") or {}).get("note")
    if note:
        out.append(f'<p class="note">{esc(note)}</p>')
    return "\n".join(out)


def render(s, cg=None):
    benchlib.validate_summary(s)
    e, pub = s["environment"], s["published"]
    cards = "".join(
        f'<div class="card"><div class="l">{esc(i["label"])}</div>'
        f'<div class="v">{esc(fmt_value(i["value"], i["unit"]))}</div>'
        f'<div class="d">{esc(i["detail"])}</div></div>' for i in s["headline"]["items"])
    harnesses = "\n".join(harness_section(h, i) for i, h in enumerate(s["harnesses"]))
    toc = "".join(f'<a href="#h{i}">{esc(h["title"])}</a>' for i, h in enumerate(s["harnesses"]))
    repro = "".join(f"<p>{esc(r['what'])}:</p><pre>{esc(r['command'])}</pre>"
                    for r in s["reproduce"])
    arts = "".join(
        f'<tr><td><a href="artifacts/benchmarks/{esc(a["file"])}">{esc(a["file"])}</a></td>'
        f'<td class="t">{esc(a["benchmark"])}</td>'
        f'<td class="t">{esc(a["raw_samples"] or "digest only")}</td>'
        f'<td class="t"><code>{esc(a["sha256"][:16])}…</code></td></tr>'
        for a in s["artifacts"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trigguard benchmark evidence</title>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>trigguard benchmark evidence</h1>
<p class="sub">Generated {esc(s['generated'])} from
<code>evidence/artifacts/benchmarks/benchmark_summary.json</code> ({esc(s['mode'])} run,
commit {esc(s['git']['commit'])}). Every figure below was measured by the run that wrote
these files; none is typed in except the original product's published figures.</p>
<nav><a href="#headline">Headline</a><a href="#original">Beside the original</a>
<a href="#environment">Environment</a><a href="#methodology">Methodology</a>
<a href="#harnesses">Harnesses</a><a href="#load">Load</a><a href="#stores">PostgreSQL</a>
<a href="#tlog">Transparency log</a><a href="#floor">Floor</a>
<a href="#callgrind">Instructions</a>
<a href="#reproduce">Reproduce</a>
<a href="#artifacts">Artifacts</a></nav>

<h2 id="headline">Headline figures</h2>
<div class="cards">{cards}</div>

<h2 id="original">Beside the original</h2>
<div class="hw"><div><b>trigguard (these runs)</b><br>{esc(e['cpu_model'])},
{e['cpu_cores']} cores shared by the daemon and the load generator,
{e['memory_total_mib']:,} MiB, {esc(e['kernel'])}</div>
<div><b>original (published)</b><br>{esc(pub['hardware'])}<br>
<span class="note">Source: {esc(pub['source'])}</span></div></div>
{comparison_table(s)}
<p class="note">“×N better” means trigguard's figure is N times lower (latency) or higher
(throughput) than the published one; the machines differ, so this compares systems on their
own hardware, not code on equal hardware.</p>

<h2 id="environment">Environment</h2>
{env_table(s)}

<h2 id="methodology">Methodology</h2>
<ul>{"".join(f"<li>{esc(m)}</li>" for m in s["methodology"])}</ul>

<h2 id="harnesses">Harnesses</h2>
<nav>{toc}</nav>
{harnesses}

<h2 id="load">Load: RPS and percentiles per concurrency</h2>
{load_table(s)}

<h2 id="stores">PostgreSQL store beside the file ledger</h2>
{stores_section(s)}

<h2 id="tlog">Transparency log: its cost and batch-signed receipts</h2>
{log_section(s)}

<h2 id="floor">CPU per request against the floor, per component</h2>
{floor_section(s)}

<h2 id="callgrind">Instructions per request (callgrind)</h2>
{callgrind_section(cg)}

<h2 id="reproduce">Reproduce</h2>
<p>From a clone of the repository on Debian 12 (the scripts install what is missing when
run as root). <code>$TOKEN</code> is any secret string you choose.</p>
{repro}

<h2 id="artifacts">Artifacts</h2>
<table><thead><tr><th>file</th><th class="t">benchmark</th><th class="t">raw samples</th>
<th class="t">sha256</th></tr></thead><tbody>{arts}</tbody></table>
<footer>Schema: docs/BENCHMARKS.md. Page generated by bench/report/render_page.py.</footer>
</main>
</body>
</html>
"""


def main(argv):
    p = argparse.ArgumentParser(prog="render_page.py")
    p.add_argument("--output", default="evidence/index.html")
    p.add_argument("--callgrind", default=None,
                   help="scripts/callgrind's JSON (validated) for the instructions section")
    p.add_argument("summary")
    a = p.parse_args(argv)
    cg = None
    if a.callgrind:
        cg = benchlib.load_json(a.callgrind)
        validate_callgrind.validate(cg)
    page = render(benchlib.load_json(a.summary), cg)
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, a.output)
    return 0


if __name__ == "__main__":
    benchlib.run_main(main, "render_page.py")
