#!/usr/bin/python3
"""The HTML report in a real browser: Debian's headless Chromium opens reports from file URLs
and the checks read the DOM after the page's scripts ran (--dump-dom).

    report_browser_test.py --cli QNN_DEBUG --writer QD_WRITE_WIDE_STORES --workdir DIR
                           [--chromium chromium] [--groups 10000]

Checks, on a report of GROUPS groups (default 10,000) with a tensor named
`<img src=x onerror=alert(1)>`:
  - the table has one row per group of the JSON report, in op order;
  - the first divergence callout names the JSON report's first divergence;
  - #sort=sqnr_db&dir=asc orders rows by ascending SQNR (the header click runs the same code),
    and differs from the op order; dir=desc reverses it;
  - the hostile name is a table cell's text, and the DOM holds no <img> element at all;
  - `qnn-debug report` re-renders the saved JSON into the same table (and the same bytes).
Prints the page's own timings (data-table-ms: script start to the table laid out) for
docs/performance.md. Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import html.parser
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HOSTILE = "<img src=x onerror=alert(1)>"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}  # no end tag: they do not nest


class Dom(html.parser.HTMLParser):
    """The parts of a dumped DOM the checks need: the rows of #groups-body (elements with
    role="row", cells role="cell"), every tag name, the body's attributes, the callout text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows = []          # [(attributes, [cell texts])]
        self.tags = set()
        self.body = {}
        self.callout = ""
        self._depth = 0
        self._body_depth = None     # depth of #groups-body while inside it
        self._row = None
        self._cell_depth = None
        self._cell = None
        self._callout_depth = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag in VOID:
            return
        self._depth += 1
        if tag == "body":
            self.body = attrs
        if attrs.get("id") == "groups-body":
            self._body_depth = self._depth
        elif self._body_depth is not None and attrs.get("role") == "row":
            self._row = (attrs, [])
        elif self._row is not None and attrs.get("role") == "cell":
            self._cell_depth, self._cell = self._depth, []
        if attrs.get("id") == "first-divergence":
            self._callout_depth = self._depth

    def handle_startendtag(self, tag, attrs):
        self.tags.add(tag)

    def handle_endtag(self, tag):
        if self._cell is not None and self._depth == self._cell_depth:
            self._row[1].append("".join(self._cell))
            self._cell = self._cell_depth = None
        elif self._row is not None and self._depth == self._body_depth + 1:
            self.rows.append(self._row)
            self._row = None
        elif self._depth == self._body_depth:
            self._body_depth = None
        if self._depth == self._callout_depth:
            self._callout_depth = None
        self._depth -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._callout_depth is not None:
            self.callout += data


class Checks:
    def __init__(self):
        self.failures = []
        self.passed = 0

    def check(self, condition, what):
        if condition:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL:", what, file=sys.stderr)


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def dump_dom(chromium, page, fragment=""):
    with tempfile.TemporaryDirectory() as profile:
        start = time.monotonic()
        result = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update",
                      "--disable-sync", "--user-data-dir=" + profile, "--dump-dom",
                      pathlib.Path(page).resolve().as_uri() + fragment], timeout=300)
        seconds = time.monotonic() - start
    if result.returncode != 0 or "<html" not in result.stdout:
        raise RuntimeError(f"chromium failed on {page}{fragment}: {result.stderr[-2000:]}")
    dom = Dom()
    dom.feed(result.stdout)
    return dom, seconds


def sqnr_of(row):
    value = row[0].get("data-sqnr", "")
    return float(value) if value not in ("", "NaN") else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--groups", type=int, default=10000)
    args = parser.parse_args()
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    ref, dev = work / "wide_ref.h5", work / "wide_dev.h5"
    report_json, report_html, rerendered = work / "wide.json", work / "wide.html", work / "wide2.html"
    checks = Checks()

    written = run([args.writer, str(ref), str(dev), str(args.groups)])
    if written.returncode != 0:
        print(written.stderr, file=sys.stderr)
        return 1
    diff = run([args.cli, "diff", str(ref), str(dev), "--json", str(report_json),
                "--html", str(report_html)])
    checks.check(diff.returncode == 1, f"diff exits 1 (some groups fail): {diff.returncode} "
                                       f"{diff.stderr}")
    doc = json.loads(report_json.read_text())
    groups = [g for run_ in doc["runs"] for g in run_["groups"]]
    first = doc["summary"]["first_divergence"]
    checks.check(len(groups) == args.groups, f"{len(groups)} groups in the JSON report")

    dom, seconds = dump_dom(args.chromium, report_html)
    ids = [row[0].get("data-group") for row in dom.rows]
    checks.check(dom.body.get("data-ready") == "1", "the page script ran to the end")
    checks.check(len(dom.rows) == len(groups), f"one row per group: {len(dom.rows)} rows")
    checks.check(ids == [g["id"] for g in groups], "rows in op order by default")
    checks.check(first is not None and first["group"] in dom.callout,
                 f"first divergence {first and first['group']} in the callout: {dom.callout!r}")
    hostile_rows = [row for row in dom.rows if HOSTILE in row[1]]
    checks.check(len(hostile_rows) == 1, "the hostile name is shown as a cell's text")
    checks.check("img" not in dom.tags, "no <img> element exists: the name was not parsed as HTML")

    ascending, _ = dump_dom(args.chromium, report_html, "#sort=sqnr_db&dir=asc")
    values = [sqnr_of(row) for row in ascending.rows]
    present = [v for v in values if v is not None]
    checks.check(len(ascending.rows) == len(groups), "sorting keeps every row")
    checks.check(present == sorted(present) and values[:len(present)] == present,
                 "rows sorted by ascending SQNR, groups without one last")
    checks.check([row[0].get("data-group") for row in ascending.rows] != ids,
                 "sorting by SQNR changes the row order")
    descending, _ = dump_dom(args.chromium, report_html, "#sort=sqnr_db&dir=desc")
    down = [v for v in (sqnr_of(row) for row in descending.rows) if v is not None]
    checks.check(down == sorted(present, reverse=True), "dir=desc sorts by descending SQNR")

    again = run([args.cli, "report", str(report_json), "--html", str(rerendered)])
    checks.check(again.returncode == 0, f"report exits 0: {again.stderr}")
    checks.check(rerendered.read_bytes() == report_html.read_bytes(),
                 "qnn-debug report renders the saved JSON to the same HTML bytes")
    redom, _ = dump_dom(args.chromium, rerendered)
    checks.check([r[1] for r in redom.rows] == [r[1] for r in dom.rows],
                 "the re-rendered table has the same cells")

    print(f"groups={len(groups)} table_ms={dom.body.get('data-table-ms')} "
          f"paint_ms={dom.body.get('data-paint-ms')} chromium_seconds={seconds:.2f} "
          f"html_bytes={report_html.stat().st_size}")
    print(f"{checks.passed} passed, {len(checks.failures)} failed")
    return 0 if not checks.failures else 1


if __name__ == "__main__":
    sys.exit(main())
