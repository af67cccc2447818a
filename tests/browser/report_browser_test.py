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
  - `qnn-debug report` re-renders the saved JSON into the same table (and the same bytes);
and, driving the page through the DevTools protocol (--remote-debugging-pipe), what is VISIBLE:
  - typing in the filter and choosing a verdict leave exactly the matching rows with a layout
    box (offsetParent, getBoundingClientRect, computed display) and the others with none;
  - a screenshot of the table after choosing "fail" shows the fail colour and no pass colour;
  - at 1,400 px wide the page and the table need no horizontal scroll and no header is cut.
Prints the page's own timings (data-table-ms: script start to the table laid out) for
docs/performance.md. Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import base64
import fcntl
import html.parser
import json
import os
import pathlib
import subprocess
import sys
import struct
import tempfile
import time
import zlib

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


class Page:
    """One Chromium tab driven through the DevTools protocol over --remote-debugging-pipe
    (NUL-terminated JSON on file descriptors 3 and 4): the checks type, choose and measure what
    a user would see, instead of reading the DOM only."""

    def __init__(self, chromium, width, height):
        self._profile = tempfile.TemporaryDirectory()
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        os.set_inheritable(to_browser_r, True)
        os.set_inheritable(from_browser_w, True)

        def child_fds():  # the protocol's fixed descriptors: 3 reads commands, 4 writes replies
            read, write = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
            os.dup2(read, 3)
            os.dup2(write, 4)

        self._process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + self._profile.name,
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._session = None
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target,
                                  flatten=True)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def send(self, method, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.evaluate("document.body && document.body.dataset.ready === '1'"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{url}: the page script did not finish")

    def screenshot(self, clip, save_to=None):
        """The pixels of `clip` (CSS px in page coordinates, scale 1) as rows of (r, g, b)."""
        data = base64.b64decode(self.send("Page.captureScreenshot", format="png",
                                          captureBeyondViewport=True,
                                          clip=dict(clip, scale=1))["data"])
        if save_to:
            pathlib.Path(save_to).write_bytes(data)
        return decode_png(data)

    def close(self):
        try:
            self.send("Browser.close")
        except RuntimeError:
            pass
        self._process.wait(timeout=60)
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()


def decode_png(data):
    """Rows of (r, g, b) pixels of an 8-bit RGB or RGBA PNG (what Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat = 8, b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"PNG depth {depth} colour type {colour}"
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    channels = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return rows


# The verdict colours of report.css (--fail, --pass), as a screenshot shows them.
FAIL_RGB, PASS_RGB = (0xc6, 0x28, 0x28), (0x2e, 0x7d, 0x32)

# Per row of #groups-body: its group id and whether a user can see it (it has a layout box).
VISIBLE_ROWS = """Array.from(document.querySelectorAll('#groups-body > [role=row]')).map(tr => {
  const box = tr.getBoundingClientRect();
  return [tr.dataset.group, tr.offsetParent !== null && box.height > 0 && box.width > 0 &&
          getComputedStyle(tr).display !== 'none'];
})"""


def set_control(page, selector, value, event):
    page.evaluate(f"""(() => {{ const c = document.querySelector({json.dumps(selector)});
      c.focus(); c.value = ''; c.dispatchEvent(new Event('{event}', {{bubbles: true}})); }})()""")
    if event == "input":  # typed as keys, as a user types: the page debounces its filter
        page.send("Input.insertText", text=value)
    else:
        page.evaluate(f"""(() => {{ const c = document.querySelector({json.dumps(selector)});
          c.value = {json.dumps(value)}; c.dispatchEvent(new Event('change', {{bubbles: true}})); }})()""")


def wait_shown(page, shown, total):
    """Waits (up to 60 s: a loaded machine) until the page says it filtered to SHOWN rows: the
    filter runs 120 ms after the last key, then walks every row."""
    expected = f"{shown} of {total} groups shown"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if page.evaluate("document.getElementById('shown-count').textContent") == expected:
            return
        time.sleep(0.1)


def visible_ids(page):
    return [group for group, visible in page.evaluate(VISIBLE_ROWS) if visible]


def colour_count(pixels, rgb):
    return sum(1 for row in pixels for p in row if p == rgb)


def check_filters(checks, page, groups, table_screenshot):
    """Typing and choosing hide the rows that do not match, as a user sees them."""
    wanted = [g["id"] for g in groups if any(HOSTILE in p["reference"]["name"] for p in g["pairs"])]
    set_control(page, "#filter", "onerror", "input")
    wait_shown(page, len(wanted), len(groups))
    shown = visible_ids(page)
    checks.check(shown == wanted, f"filter 'onerror': visible rows {shown[:5]} (of {len(shown)}) "
                                  f"are the matching ones {wanted}")
    count = page.evaluate("document.getElementById('shown-count').textContent")
    checks.check(count == f"1 of {len(groups)} groups shown", f"shown count says {count!r}")
    set_control(page, "#filter", "", "input")
    wait_shown(page, len(groups), len(groups))
    checks.check(len(visible_ids(page)) == len(groups), "clearing the filter shows every row")

    failing = [g["id"] for g in groups if g["verdict"] == "fail"]
    set_control(page, "#verdict-filter", "fail", "change")
    wait_shown(page, len(failing), len(groups))
    shown = visible_ids(page)
    checks.check(shown == failing, f"verdict 'fail': {len(shown)} visible rows, "
                                   f"{len(failing)} failing groups")
    page.evaluate("document.querySelector('.table-wrap').scrollIntoView();"  # and the verdicts,
                  "document.querySelector('#groups-head [data-key=verdict]')"  # should the table
                  ".scrollIntoView({block: 'nearest', inline: 'nearest'})")   # scroll sideways
    box = page.evaluate("(() => { const b = document.querySelector('.table-wrap')"
                        ".getBoundingClientRect(); return {x: b.x + scrollX, y: b.y + scrollY,"
                        " width: b.width, height: Math.min(b.height, innerHeight - b.y)}; })()")
    pixels = page.screenshot(box, table_screenshot)
    checks.check(colour_count(pixels, FAIL_RGB) > 0 and colour_count(pixels, PASS_RGB) == 0,
                 f"screenshot of the table after choosing 'fail': {colour_count(pixels, FAIL_RGB)} "
                 f"fail-coloured pixels, {colour_count(pixels, PASS_RGB)} pass-coloured")
    set_control(page, "#verdict-filter", "", "change")


LAYOUT = """(() => {
  const wrap = document.querySelector('.table-wrap'), root = document.scrollingElement;
  const cut = Array.from(document.querySelectorAll('#groups-head > div'))
    .filter(h => h.scrollWidth > h.clientWidth || h.scrollHeight > h.clientHeight)
    .map(h => h.textContent);
  return {page: [root.scrollWidth, root.clientWidth], table: [wrap.scrollWidth, wrap.clientWidth],
          cut: cut};
})()"""


def check_layout(checks, page, width):
    """At WIDTH px the table fits: no horizontal scroll, every header's text whole."""
    layout = page.evaluate(LAYOUT)
    checks.check(layout["page"][0] <= layout["page"][1],
                 f"at {width} px the page needs no horizontal scroll: {layout['page']}")
    checks.check(layout["table"][0] <= layout["table"][1],
                 f"at {width} px the table needs no horizontal scroll: {layout['table']}")
    checks.check(not layout["cut"], f"at {width} px no header is cut: {layout['cut']}")


HINTS_SHOWN = """(() => {
  const items = [...document.querySelectorAll('#details ul.hints li')];
  return items.filter(li => li.offsetParent !== null && li.getBoundingClientRect().height > 0)
              .map(li => li.textContent);
})()"""


def check_hints(checks, page, page_path, group):
    """The selected group's details show each of its hints, kind and sentence, on screen."""
    page.open(pathlib.Path(page_path).resolve().as_uri() + "#group=" + group["id"])
    shown = page.evaluate(HINTS_SHOWN) or []
    wanted = [h["kind"] + " " + h["sentence"] for h in group["hints"]]
    checks.check(wanted and shown == wanted,
                 f"group {group['id']}'s hints are visible in its details: {shown[:2]} vs {wanted[:2]}")


def check_visible(checks, chromium, page_path, groups, screenshot_to):
    page = Page(chromium, 1400, 900)
    try:
        page.open(pathlib.Path(page_path).resolve().as_uri())
        check_layout(checks, page, 1400)
        if screenshot_to:
            shot = page.send("Page.captureScreenshot", format="png")["data"]
            pathlib.Path(screenshot_to).write_bytes(base64.b64decode(shot))
        check_filters(checks, page, groups,
                      screenshot_to and str(pathlib.Path(screenshot_to).with_suffix(".fail.png")))
        explained = [g for g in groups if g.get("hints")]
        checks.check(bool(explained), "some failing group has a hint")
        if explained:
            check_hints(checks, page, page_path, explained[0])
    finally:
        page.close()


PARTS_SHOWN = """(() => {
  const shown = e => e !== null && e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const heads = [...document.querySelectorAll('#groups-head > div')].filter(shown)
    .map(h => h.textContent);
  const row = document.querySelector('#groups-body > [role=row][data-verdict=fail]');
  const keys = [...document.querySelectorAll('#groups-head > div')].map(h => h.dataset.key);
  const cell = row && shown(row) ? row.children[keys.indexOf('attribution')].textContent : null;
  const part = document.getElementById('part-kernel');
  const details = [...document.querySelectorAll('#details th')].filter(shown).map(t => t.textContent);
  return {heads, cell, kernelLine: shown(part) ? part.textContent : null, details};
})()"""


def check_parts(checks, args, work):
    """A diff with --sim and --isolated: the part columns, the attribution, each part's first
    divergence and the details' part rows are on screen, and the table still fits 1,400 px."""
    ref, dev = work / "parts_ref.h5", work / "parts_dev.h5"
    page_path, report_json = work / "parts.html", work / "parts.json"
    written = run([args.writer, str(ref), str(dev), "300"])
    checks.check(written.returncode == 0, f"wrote the parts stores: {written.stderr}")
    # The reference as its own simulation: quantization is exact, the kernel part is the total.
    diff = run([args.cli, "diff", str(ref), str(dev), "--sim", str(ref), "--isolated", str(ref),
                "--json", str(report_json), "--html", str(page_path)])
    checks.check(diff.returncode == 1, f"the parts diff exits 1: {diff.returncode} {diff.stderr}")
    doc = json.loads(report_json.read_text())
    first = doc["summary"]["parts_first_divergence"]["kernel"]["group"]
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(pathlib.Path(page_path).resolve().as_uri() + "#group=" + first)
        check_layout(checks, page, 1400)
        shown = page.evaluate(PARTS_SHOWN)
        for head in ("quant. dB", "kernel dB", "isolated dB", "attribution"):
            checks.check(head in shown["heads"], f"the {head!r} column is shown: {shown['heads']}")
        checks.check(shown["cell"] and shown["cell"].startswith("kernel"),
                     f"a failing row's attribution reads kernel: {shown['cell']!r}")
        checks.check(shown["kernelLine"] and first in shown["kernelLine"],
                     f"the kernel part's first divergence {first} is shown: {shown['kernelLine']!r}")
        for row in ("total (REF vs DEV)", "quantization (REF vs SIM)", "kernel (SIM vs DEV)",
                    "isolated (ISO vs DEV)", "attribution"):
            checks.check(row in shown["details"], f"the details show {row!r}: {shown['details']}")
        if args.screenshot:
            shot = page.send("Page.captureScreenshot", format="png")["data"]
            pathlib.Path(args.screenshot).with_suffix(".parts.png").write_bytes(
                base64.b64decode(shot))
    finally:
        page.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--groups", type=int, default=10000)
    parser.add_argument("--screenshot", help="save the page at 1,400 px here (PNG)")
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

    check_visible(checks, args.chromium, report_html, groups, args.screenshot)
    check_parts(checks, args, work)

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
