#!/usr/bin/env python3
"""check_page.py — check that the evidence page is self-contained and renders cleanly.

usage: check_page.py [--screenshot PNG] [--static-only] PAGE.html

Static checks (always): the HTML parses, has the required sections, inline SVG charts, and
loads nothing: no <script>, <img>, <link>, <iframe>, <object>, <embed>, no url(...) in CSS,
and no link leaving the page other than relative ones (no scheme, no //host).
Render check (unless --static-only): headless chromium opens the file with logging on and
takes a screenshot (--screenshot, default PAGE without .html + .png); any console message
(the page has no script, so any message is a fault) or a missing screenshot fails.
Exit status 0 clean, 1 a check failed, 2 chromium is missing (render check impossible).
"""
import argparse
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile

REQUIRED_IDS = ("headline", "original", "environment", "methodology", "harnesses", "load",
                "reproduce")
FORBIDDEN_TAGS = ("script", "img", "link", "iframe", "object", "embed", "audio", "video",
                  "source", "base")


class Scan(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.problems, self.svgs, self.tags = set(), [], 0, 0

    def handle_starttag(self, tag, attrs):
        self.tags += 1
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "svg":
            self.svgs += 1
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}> would load or run something")
        for k in ("src", "href", "xlink:href", "action", "poster", "srcset"):
            v = a.get(k)
            if v is None:
                continue
            if re.match(r"^\s*([a-zA-Z][a-zA-Z0-9+.-]*:|//)", v):
                self.problems.append(f"{tag} {k}={v!r} leaves the page")
        if re.search(r"url\s*\(", a.get("style", "") or ""):
            self.problems.append(f"{tag} style loads a url()")


def static_check(text):
    s = Scan()
    s.feed(text)
    s.close()
    problems = list(s.problems)
    for m in re.finditer(r"<style>(.*?)</style>", text, re.S):
        if re.search(r"url\s*\(|@import", m.group(1)):
            problems.append("the stylesheet loads a url() or @import")
    missing = [i for i in REQUIRED_IDS if i not in s.ids]
    if missing:
        problems.append(f"missing sections: {', '.join(missing)}")
    if s.svgs < 1:
        problems.append("no inline SVG chart")
    if not text.lstrip().lower().startswith("<!doctype html>"):
        problems.append("no <!DOCTYPE html>")
    return problems, s.svgs


def render_check(page, png):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    problems = []
    with tempfile.TemporaryDirectory(prefix="tg-chromium.") as prof:
        if os.path.exists(png):
            os.unlink(png)
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", f"--user-data-dir={prof}",
               "--enable-logging=stderr", "--v=0", f"--screenshot={png}",
               "--window-size=1280,3000", "file://" + os.path.abspath(page)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                                  check=False)
        except subprocess.TimeoutExpired:
            return ["chromium did not finish in 180 s"]
        for line in proc.stderr.splitlines():
            if ":CONSOLE" in line or "Failed to load resource" in line:
                problems.append("console: " + line.split("]", 1)[-1].strip())
        if proc.returncode != 0:
            problems.append(f"chromium exited with {proc.returncode}")
    if not os.path.exists(png) or os.path.getsize(png) < 1000:
        problems.append("no screenshot was written")
    return problems


def main(argv):
    p = argparse.ArgumentParser(prog="check_page.py")
    p.add_argument("--screenshot")
    p.add_argument("--static-only", action="store_true")
    p.add_argument("page")
    a = p.parse_args(argv)
    with open(a.page, encoding="utf-8") as f:
        text = f.read()
    problems, svgs = static_check(text)
    rendered = ""
    if not a.static_only:
        png = a.screenshot or (re.sub(r"\.html?$", "", a.page) + ".png")
        r = render_check(a.page, png)
        if r is None:
            print("check_page.py: chromium is not installed (apt-get install chromium)",
                  file=sys.stderr)
            return 2
        problems += r
        rendered = f", rendered to {png} without console messages" if not r else ""
    for prob in problems:
        print(f"check_page.py: {a.page}: {prob}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_page.py: {a.page}: self-contained, {svgs} charts{rendered}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
