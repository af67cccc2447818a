#!/usr/bin/python3
"""The HTML report in a real browser: Debian's headless Chromium opens reports from file URLs,
driven through the DevTools protocol (--remote-debugging-pipe): the checks scroll, type, choose,
click and check what a user would see; a few read the DOM after the scripts ran (--dump-dom).
It asserts behaviour only: how long a page takes to write, open and answer is measured by
tests/bench/report_page_bench.py against a baseline page (docs/performance.md).

    report_browser_test.py --cli QNN_DEBUG --writer QD_WRITE_WIDE_STORES --workdir DIR
                           [--decode-writer QD_WRITE_DECODE_STORES] [--fixture-gen QD_FIXTURE_GEN]
                           [--python-dir BUILD/python]
                           [--chromium chromium] [--groups 10000] [--screenshot PNG]
                           [--images DIR] [--large] [--decode-runs N] [--decode-ops N]
                           [--max-mb MB] [--pages-only]

On a report of GROUPS groups (default 10,000, no graph) with a tensor named
`<img src=x onerror=alert(1)>`, the table (virtualised: only rows near its scrolled window exist):
  - scrolled through, it shows one row per group of the JSON report, in op order, each with a
    layout box, and never more than a window's rows in the DOM at once;
  - the first divergence callout names the JSON report's first divergence;
  - #sort=sqnr_db&dir=asc orders rows by ascending SQNR (the header click runs the same code),
    and differs from the op order; dir=desc reverses it; a header click sorts and writes the
    fragment; #sort=time&dir=desc puts the longest op first;
  - the hostile name is a cell's text, and the DOM holds no <img> element at all;
  - typing in the filter and choosing a verdict leave exactly the matching rows (all with a
    layout box) and the others without any element;
  - a screenshot of the table after choosing "fail" shows the fail colour and no pass colour;
  - at 1,400 px wide the page and the table need no horizontal scroll and no header is cut, with
    the time columns (the stores carry profile events) and with the error-part columns;
  - the page has no graph section (the stores carry no graph); a light group's details say where
    its full figures are;
  - `qnn-debug report` re-renders the saved JSON into the same bytes;
on the demo (`qnn-debug demo`: a stored graph):
  - the graph shows every op; searching a name marks and centres it (Enter: the next match); a
    real mouse click on its node selects it: the details name its group and tensor, the table row
    is selected, the fragment says group=...; its pictures have boxes and the scatter has points;
    the wheel and the buttons zoom, a drag pans without selecting;
on a 2,000-op graph (the wide report with inputs added): every op is laid out, only those near
the view are in the DOM, and the hostile name is a node's text, with no <img> anywhere;
on three devices against one reference (qd-fixture-gen: clean, a kernel fault at conv3, clipping
at norm1): the summary gives each device's verdict and first divergence; the heatmap has three
labelled columns, the two faults' cells fail-coloured (computed style and screenshot pixels) and
no cell of the clean column; conv3 and norm1 lead where the devices disagree; a real click on a
cell opens that op on that device;
on runs side by side (the demo's 12 runs; 150 decode steps of qd_write_decode_stores): a real
click on a canvas cell opens that op in that run; the verdict strip turns fail-coloured at the
first failing run; a click on a run whose groups the page left out says where they are;
what the user sees (an npz pair written here: long op names with a shared prefix, a KV cache, an
op of two outputs; the clipping demo): the first-divergence callout leads with the hint's cause,
flags after; a group is named by its worst output; the KV-cache table says which positions first
differ in which run and its link opens the cache there; the chart's op names differ, lie inside
it and overlap nothing; bitwidth 0 shows the dtype's width; a float op's hint draws no "encoding
allows" bar; the three devices' add1, where the faulty device only recovers, marks no device.
--large writes a GROUPS-group report (e.g. 100,000) and checks only its size (--max-mb) and the
table (every group counted, a window of rows in the DOM, a real click on row 5,010 answered by
its details). --decode-runs N checks only a long generation's page (N runs of --decode-ops ops,
default 200): its size (--max-mb), the heatmap of runs and clicks on it. --pages-only writes
every page and checks only what needs no browser (exit codes, sizes, the re-rendered bytes): the
C++ side, which the sanitizer build runs (scripts/sanitize.sh). With --images, the screenshots of
docs/images (graph, details, devices, steps) go to DIR.
Exit 0 when every check passes, 1 otherwise.
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
        """Loads URL afresh (a fragment change alone would not reload the page) and waits until
        its script says it is ready."""
        self.send("Page.navigate", url="about:blank")
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

    def click(self, x, y):
        """A real left click at viewport point (x, y), as the mouse sends it."""
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1)

    def drag(self, x, y, dx, dy):
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.send("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left",
                  clickCount=1)
        for step in range(1, 6):
            self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x + dx * step / 5,
                      y=y + dy * step / 5, button="left", buttons=1)
        self.send("Input.dispatchMouseEvent", type="mouseReleased", x=x + dx, y=y + dy,
                  button="left", clickCount=1)

    def wheel(self, x, y, delta_y):
        self.send("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0,
                  deltaY=delta_y)

    def centre_of(self, selector):
        """Scrolls the element into view and returns its box's centre in the viewport, or None
        when it has no box."""
        return self.evaluate(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
          if (!e) return null; e.scrollIntoView({{block: 'center', inline: 'center'}});
          const b = e.getBoundingClientRect();
          return b.width > 0 && b.height > 0 ? [b.x + b.width / 2, b.y + b.height / 2] : null; }})()""")

    def wait_for(self, expression, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        return None

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

# The table scrolled through its own scroll handler (dispatched at once, not at the next frame):
# each row met once, by aria-rowindex, with its group, SQNR, cells and whether it has a layout
# box; the most rows the DOM held at once; the announced row count. With ENDS = n, only the
# first and the last n rows of the view are scrolled through (a pass over 10,000 rows lays out
# about 400 windows: 20 s on a busy machine), else every row from the top to the bottom.
READ_ROWS = """((withCells, ends) => {
  const wrap = document.querySelector('.table-wrap'), body = document.getElementById('groups-body');
  const seen = new Map();
  let unboxed = 0, most = 0;
  const scrollTo = top => { wrap.scrollTop = top; wrap.dispatchEvent(new Event('scroll')); };
  // From TOP down, until the bottom or until WANTED new rows were met.
  const pass = (top, wanted) => {
    scrollTo(top);
    for (let met = 0, step = 0; step < 1e6 && met < wanted; ++step) {
      const rows = body.querySelectorAll(':scope > [role=row]');
      most = Math.max(most, rows.length);
      for (const tr of rows) {
        const index = Number(tr.getAttribute('aria-rowindex'));
        if (seen.has(index)) continue;
        ++met;
        const box = tr.getBoundingClientRect();
        if (!(tr.offsetParent !== null && box.height > 0 && box.width > 0 && getComputedStyle(tr).display !== 'none')) ++unboxed;
        seen.set(index, [tr.dataset.group, tr.dataset.sqnr, withCells ? [...tr.children].map(c => c.textContent) : null]);
      }
      if (wrap.scrollTop + wrap.clientHeight >= wrap.scrollHeight - 1) break;
      wrap.scrollTop += wrap.clientHeight;
      wrap.dispatchEvent(new Event('scroll'));
    }
  };
  if (ends === null) {
    pass(0, Infinity);
  } else {
    pass(0, ends);
    const rowHeight = body.firstElementChild ? body.firstElementChild.offsetHeight : 0;
    pass(Math.max(0, wrap.scrollHeight - wrap.clientHeight - ends * rowHeight), Infinity);
  }
  const indices = [...seen.keys()].sort((a, b) => a - b);
  scrollTo(0);
  return {rowcount: Number(document.getElementById('groups').getAttribute('aria-rowcount')),
          contiguous: indices.every((v, k) => v === k + 2), unboxed, most,
          indices, rows: indices.map(i => seen.get(i))};
})"""


def read_rows(page, cells=False, ends=None):
    """Every row of the table's view in order, or with ENDS only its first and last ENDS rows
    ('head' and 'tail'; they overlap when the view is short)."""
    read = page.evaluate(READ_ROWS + f"({'true' if cells else 'false'}, "
                         f"{'null' if ends is None else int(ends)})")
    if ends is not None:
        count = read["rowcount"] - 1
        by_index = dict(zip(read["indices"], read["rows"]))
        read["head"] = [by_index.get(i + 2) for i in range(min(ends, count))]
        read["tail"] = [by_index.get(i + 2) for i in range(max(0, count - ends), count)]
    return read


def sqnr_value(text):
    return float(text) if text not in ("", "NaN", None) else None


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
    filter runs 120 ms after the last key."""
    page.wait_for(f"document.getElementById('shown-count').textContent === "
                  f"{json.dumps(f'{shown} of {total} groups shown')}")


def colour_count(pixels, rgb):
    return sum(1 for row in pixels for p in row if p == rgb)


def check_rows(checks, what, read, wanted_ids, window_limit):
    """The rows a scroll through the table met are exactly WANTED_IDS in order, each once, each
    with a layout box, and the DOM never held more than WINDOW_LIMIT rows. A read of the ends
    (read_rows(ends=n)) is checked against the first and last n of WANTED_IDS."""
    if "head" in read:
        ends = len(read["head"])
        for part, got, wanted in (("first", read["head"], wanted_ids[:ends]),
                                  ("last", read["tail"], wanted_ids[len(wanted_ids) - ends:])):
            ids = [row and row[0] for row in got]
            checks.check(ids == wanted, f"{what}: the table's {part} {ends} rows {ids[:4]}... are "
                                        f"the expected {wanted[:4]}...")
        checks.check(read["rowcount"] == len(wanted_ids) + 1,
                     f"{what}: aria-rowcount {read['rowcount']} for {len(wanted_ids)} rows")
    else:
        ids = [row[0] for row in read["rows"]]
        checks.check(ids == wanted_ids, f"{what}: the table's rows {ids[:4]}... ({len(ids)}) are "
                                        f"the expected {wanted_ids[:4]}... ({len(wanted_ids)})")
        checks.check(read["contiguous"] and read["rowcount"] == len(wanted_ids) + 1,
                     f"{what}: aria-rowcount {read['rowcount']} and contiguous aria-rowindex")
    checks.check(read["unboxed"] == 0, f"{what}: {read['unboxed']} rows in the DOM without a box")
    checks.check(read["most"] <= window_limit, f"{what}: at most {window_limit} rows in the DOM at "
                                               f"once (virtualised): {read['most']}")


WINDOW_LIMIT = 120  # 900 px of 24 px rows plus the overscan: a window, never the whole table
# Rows read at each end of the view where the whole view was read once already (op order,
# ascending SQNR): a descending sort and a cleared filter are checked at both ends.
ENDS = 200


def check_order_and_sort(checks, page, page_path, groups, first):
    """Op order by default, the callout, sorting by SQNR both ways and by time, a header click."""
    uri = pathlib.Path(page_path).resolve().as_uri()
    page.open(uri)
    read = read_rows(page)
    ids = [g["id"] for g in groups]
    check_rows(checks, "op order", read, ids, WINDOW_LIMIT)
    callout = page.evaluate("document.getElementById('first-divergence').textContent")
    checks.check(first is not None and first["group"] in callout,
                 f"first divergence {first and first['group']} in the callout: {callout!r}")

    page.open(uri + "#sort=sqnr_db&dir=asc")
    read = read_rows(page)
    values = [sqnr_value(row[1]) for row in read["rows"]]
    present = [v for v in values if v is not None]
    checks.check(len(values) == len(groups), f"sorting keeps every row: {len(values)}")
    checks.check(present == sorted(present) and values[:len(present)] == present,
                 "rows sorted by ascending SQNR, groups without one last")
    checks.check([row[0] for row in read["rows"]] != ids, "sorting by SQNR changes the row order")
    page.open(uri + "#sort=sqnr_db&dir=desc")
    down = read_rows(page, ends=ENDS)
    wanted = sorted(present, reverse=True) + [None] * (len(values) - len(present))
    got = [sqnr_value(row and row[1]) for row in down["head"] + down["tail"]]
    checks.check(got == wanted[:ENDS] + wanted[-ENDS:],
                 "dir=desc sorts by descending SQNR, groups without one still last")

    timed = sorted((g for g in groups if g.get("time")), key=lambda g: -g["time"]["duration"])
    page.open(uri + "#sort=time&dir=desc")
    top = [row[0] for row in read_rows(page, ends=3)["head"]]
    checks.check(timed and top == [g["id"] for g in timed[:3]],
                 f"#sort=time&dir=desc puts the longest ops first: {top}")
    # A header click sorts (ascending first) and writes the fragment.
    page.open(uri)
    centre = page.centre_of("#groups-head [data-key=sqnr_db]")
    page.click(*centre)
    hash_ = page.evaluate("location.hash")
    first_rows = read_rows(page, ends=5)["head"]
    checks.check("sort=sqnr_db" in hash_ and [sqnr_value(r[1]) for r in first_rows] == present[:5],
                 f"a click on the SQNR header sorts ascending: {hash_}, {[r[1] for r in first_rows]}")


def check_filters(checks, page, page_path, groups, table_screenshot):
    """Typing and choosing leave exactly the matching rows, as a user sees them."""
    page.open(pathlib.Path(page_path).resolve().as_uri())
    wanted = [g["id"] for g in groups if any(HOSTILE in p["reference"]["name"] for p in g["pairs"])]
    set_control(page, "#filter", "onerror", "input")
    wait_shown(page, len(wanted), len(groups))
    check_rows(checks, "filter 'onerror'", read_rows(page), wanted, WINDOW_LIMIT)
    count = page.evaluate("document.getElementById('shown-count').textContent")
    checks.check(count == f"1 of {len(groups)} groups shown", f"shown count says {count!r}")
    set_control(page, "#filter", "", "input")
    wait_shown(page, len(groups), len(groups))
    check_rows(checks, "filter cleared", read_rows(page, ends=ENDS), [g["id"] for g in groups],
               WINDOW_LIMIT)

    failing = [g["id"] for g in groups if g["verdict"] == "fail"]
    set_control(page, "#verdict-filter", "fail", "change")
    wait_shown(page, len(failing), len(groups))
    check_rows(checks, "verdict 'fail'", read_rows(page), failing, WINDOW_LIMIT)
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
          cut: cut, heads: Array.from(document.querySelectorAll('#groups-head > div')).map(h => h.textContent)};
})()"""


def check_layout(checks, page, width, heads=()):
    """At WIDTH px the table fits: no horizontal scroll, every header's text whole; HEADS shown."""
    layout = page.evaluate(LAYOUT)
    checks.check(layout["page"][0] <= layout["page"][1],
                 f"at {width} px the page needs no horizontal scroll: {layout['page']}")
    checks.check(layout["table"][0] <= layout["table"][1],
                 f"at {width} px the table needs no horizontal scroll: {layout['table']}")
    checks.check(not layout["cut"], f"at {width} px no header is cut: {layout['cut']}")
    for head in heads:
        checks.check(head in layout["heads"], f"the {head!r} column is shown: {layout['heads']}")


HINTS_SHOWN = """(() => {
  const items = [...document.querySelectorAll('#details ul.hints > li')];
  return items.filter(li => li.offsetParent !== null && li.getBoundingClientRect().height > 0)
              .map(li => li.firstChild.textContent + ' ' + li.childNodes[1].textContent.trim());
})()"""


def check_hints(checks, page, page_path, group):
    """The selected group's details show each of its hints, kind and sentence, on screen."""
    page.open(pathlib.Path(page_path).resolve().as_uri() + "#group=" + group["id"])
    shown = page.evaluate(HINTS_SHOWN) or []
    wanted = [h["kind"] + " " + h["sentence"] for h in group["hints"]]
    checks.check(wanted and shown == wanted,
                 f"group {group['id']}'s hints are visible in its details: {shown[:2]} vs {wanted[:2]}")


LIGHT = """(() => {
  const doc = JSON.parse(document.getElementById('qd-data').textContent);
  const light = doc.runs.flatMap(r => r.groups).filter(g => g.light);
  return {light: light.length, id: light.length ? light[0].id : null};
})()"""


def check_light(checks, page, page_path):
    """A large page keeps some groups light (overview only): their details say so and still show
    the group's table facts."""
    uri = pathlib.Path(page_path).resolve().as_uri()
    page.open(uri)
    light = page.evaluate(LIGHT)
    checks.check(light["light"] > 0, f"the page keeps {light['light']} groups light")
    if not light["id"]:
        return
    page.open(uri + "#group=" + light["id"])
    shown = page.evaluate("""(() => { const note = document.querySelector('#details .light-note');
      return {note: note && note.offsetParent !== null ? note.textContent : null,
              id: (document.querySelector('#details .details-id') || {}).textContent}; })()""")
    checks.check(shown["id"] == light["id"] and shown["note"] and
                 "qnn-debug diff --json" in shown["note"],
                 f"light group {light['id']}'s details say where its figures are: {shown}")


def check_visible(checks, args, page_path, groups, first):
    page = Page(args.chromium, 1400, 900)
    try:
        check_order_and_sort(checks, page, page_path, groups, first)
        page.open(pathlib.Path(page_path).resolve().as_uri())
        check_layout(checks, page, 1400, ("time", "time %"))
        if args.screenshot:
            shot = page.send("Page.captureScreenshot", format="png")["data"]
            pathlib.Path(args.screenshot).write_bytes(base64.b64decode(shot))
        graph = page.evaluate("(() => { const s = document.getElementById('graph-section');"
                              " return [s.hidden, s.querySelectorAll('svg').length]; })()")
        checks.check(graph == [True, 0], f"no stored graph, no graph section: hidden, svgs {graph}")
        check_filters(checks, page, page_path, groups,
                      args.screenshot and str(pathlib.Path(args.screenshot).with_suffix(".fail.png")))
        explained = [g for g in groups if g.get("hints")]
        checks.check(bool(explained), "some failing group has a hint")
        if explained:
            check_hints(checks, page, page_path, explained[0])
        check_light(checks, page, page_path)
    finally:
        page.close()


PARTS_SHOWN = """(() => {
  const shown = e => e !== null && e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const row = document.querySelector('#groups-body > [role=row][data-verdict=fail]');
  const keys = [...document.querySelectorAll('#groups-head > div')].map(h => h.dataset.key);
  const cell = row && shown(row) ? row.children[keys.indexOf('attribution')].textContent : null;
  const part = document.getElementById('part-kernel');
  const details = [...document.querySelectorAll('#details th')].filter(shown).map(t => t.textContent);
  const bars = document.querySelector('#details .parts-bars svg');
  return {cell, kernelLine: shown(part) ? part.textContent : null, details,
          bars: bars && shown(bars) ? bars.querySelectorAll('rect.bar').length : 0};
})()"""


def check_parts(checks, args, work):
    """A diff with --sim and --isolated: the part columns, the attribution, each part's first
    divergence and the details' part rows and bars are on screen, and the table still fits."""
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
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(pathlib.Path(page_path).resolve().as_uri() + "#group=" + first)
        check_layout(checks, page, 1400, ("quant. dB", "kernel dB", "isolated dB", "attribution"))
        shown = page.evaluate(PARTS_SHOWN)
        # The device sits at its encoding's ideal and the "replay" is the float reference, so the
        # op's own kernel error measures its rounding: the two parts are alike.
        checks.check(shown["cell"] and shown["cell"].startswith("within_noise"),
                     f"a failing row's attribution reads within_noise: {shown['cell']!r}")
        checks.check(shown["kernelLine"] and first in shown["kernelLine"],
                     f"the kernel part's first divergence {first} is shown: {shown['kernelLine']!r}")
        for row in ("total (REF vs DEV)", "quantization (REF vs SIM)", "kernel (SIM vs DEV)",
                    "isolated (ISO vs DEV)", "attribution"):
            checks.check(row in shown["details"], f"the details show {row!r}: {shown['details']}")
        checks.check(shown["bars"] == 4, f"the parts are drawn as 4 bars: {shown['bars']}")
        if args.screenshot:
            shot = page.send("Page.captureScreenshot", format="png")["data"]
            pathlib.Path(args.screenshot).with_suffix(".parts.png").write_bytes(
                base64.b64decode(shot))
    finally:
        page.close()


# ---- the graph ----------------------------------------------------------------------------
GRAPH_STATE = """(() => {
  const world = document.querySelector('#graph svg > g');
  const m = /translate\\(([-\\d.]+),([-\\d.]+)\\) scale\\(([-\\d.]+)\\)/.exec(world.getAttribute('transform'));
  const current = document.querySelector('#graph .node.current');
  const box = document.getElementById('graph').getBoundingClientRect();
  const cb = current && current.querySelector('.box').getBoundingClientRect();
  return {tx: +m[1], ty: +m[2], k: +m[3], matches: document.getElementById('graph-matches').textContent,
          current: current ? Number(current.dataset.node) : null,
          currentCentred: cb ? Math.abs(cb.x + cb.width / 2 - (box.x + box.width / 2)) < 2 &&
                               Math.abs(cb.y + cb.height / 2 - (box.y + box.height / 2)) < 2 : false,
          nodes: Number(document.body.dataset.graphNodes), ms: Number(document.body.dataset.graphMs)};
})()"""

DETAILS_SHOWN = """(() => {
  const shown = e => e && e.offsetParent !== null && e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0;
  const pic = cls => shown(document.querySelector('#details svg.' + cls));
  const selectedRow = document.querySelector('#groups-body > [role=row].selected');
  return {id: (document.querySelector('#details .details-id') || {}).textContent,
          name: (document.querySelector('#details .details-name') || {}).textContent,
          scatter: pic('scatter'), points: document.querySelectorAll('#details svg.scatter circle.pt').length,
          histogram: pic('histogram'), range: pic('range'), channels: pic('channels'),
          evidence: shown(document.querySelector('#details .evidence svg')),
          row: selectedRow ? selectedRow.dataset.group : null, hash: location.hash};
})()"""


def search_node(page, text, enter=False):
    """Types TEXT in the graph's search box (Enter: the next match) and returns the view."""
    if enter:
        page.evaluate("document.getElementById('graph-search').focus()")
        for kind in ("keyDown", "keyUp"):
            page.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                      windowsVirtualKeyCode=13)
    else:
        set_control(page, "#graph-search", text, "input")
    time.sleep(0.4)  # the search runs 150 ms after the last key
    return page.evaluate(GRAPH_STATE)


def check_graph_demo(checks, args, work):
    """The demo's stored graph: every op drawn, search, a real click, zoom, pan, the details'
    pictures; screenshots for docs/images with --images."""
    out = work / "demo"
    demo = run([args.cli, "demo", "--out", str(out)])
    checks.check(demo.returncode in (0, 1), f"qnn-debug demo ran: {demo.returncode} {demo.stderr[-500:]}")
    doc = json.loads((out / "report.json").read_text())
    groups = doc["runs"][0]["groups"]
    checks.check(all("inputs" in g for g in groups[1:]), "the demo's groups carry their inputs")
    target = [g for g in groups if g.get("hints") and g["id"] != doc["summary"]["first_divergence"]["group"]][-1]
    name = target["pairs"][0]["reference"]["name"]
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open((out / "report.html").resolve().as_uri())
        state = page.evaluate(GRAPH_STATE)
        checks.check(state["nodes"] == len(groups), f"the graph draws {state['nodes']} ops of {len(groups)}")
        found = search_node(page, name)
        checks.check(found["matches"] == "1 of 1" and found["currentCentred"],
                     f"searching {name!r} marks and centres one node: {found}")
        node = f"#graph .node[data-node='{found['current']}'] .box"
        centre = page.centre_of(node)
        page.click(*centre)
        time.sleep(0.2)
        shown = page.evaluate(DETAILS_SHOWN)
        checks.check(shown["id"] == target["id"] and shown["name"] == name,
                     f"a click on {target['id']}'s node shows its details: {shown['id']} {shown['name']}")
        checks.check(shown["row"] == target["id"] and f"group={target['id']}" in shown["hash"],
                     f"the click selects the table row and writes the fragment: {shown['row']} {shown['hash']}")
        checks.check(shown["scatter"] and shown["points"] > 0 and shown["histogram"] and shown["range"]
                     and shown["channels"] and shown["evidence"],
                     f"the details' pictures have boxes and the scatter has points: {shown}")
        shot = work / "graph_details.png"
        page.send("Page.captureScreenshot", format="png")  # settle the layout
        box = page.evaluate("(() => { const b = document.getElementById('details').getBoundingClientRect();"
                            " return {x: b.x + scrollX, y: b.y + scrollY, width: b.width, height: Math.min(b.height, 2400)}; })()")
        page.screenshot(box, shot)
        checks.check(shot.stat().st_size > 10000, f"saved a screenshot of the details: {shot}")
        if args.images:
            first = next(g for g in groups if g["id"] == doc["summary"]["first_divergence"]["group"])
            save_doc_images(page, pathlib.Path(args.images), first["pairs"][0]["reference"]["name"])
        check_graph_moves(checks, page)
        several = search_node(page, "debugID_1")
        after = search_node(page, "", enter=True)
        checks.check(several["matches"].endswith("of 8") and after["matches"].startswith("2 of")
                     and after["current"] != several["current"] and after["currentCentred"],
                     f"Enter steps to the next match and centres it: {several['matches']} -> {after['matches']}")
    finally:
        page.close()


HEATMAP_STATE = """(() => {
  const style = e => e ? getComputedStyle(e).backgroundColor : null;
  const shown = e => { const b = e.getBoundingClientRect(); return e.offsetParent !== null && b.width > 0 && b.height > 0; };
  const section = document.getElementById('devices-section');
  const columns = Array.from(document.querySelectorAll('#device-heatmap th.device'));
  const rows = Array.from(document.querySelectorAll('#device-heatmap tr[data-group]'));
  return {shown: !section.hidden && shown(section),
          heads: columns.map(e => e.textContent), headsShown: columns.every(shown),
          cells: Object.fromEntries(rows.map(tr => [tr.dataset.group, [0, 1, 2].map(d => {
            const td = tr.querySelector(`td[data-device="${d}"]`); return td && shown(td) ? style(td) : null; })])),
          names: Object.fromEntries(rows.map(tr => [tr.dataset.group, tr.querySelector('.name').textContent])),
          fail: getComputedStyle(document.documentElement).getPropertyValue('--fail').trim(),
          disagree: Array.from(document.querySelectorAll('#disagreement li')).filter(shown).map(
            li => [li.dataset.group, li.querySelector('strong').textContent, li.querySelector('.outlier').textContent]),
          outcomes: Array.from(document.querySelectorAll('#summary #device-outcomes tr[data-device]')).filter(shown).map(
            tr => [...tr.children].map(td => td.textContent))};
})()"""

DETAILS_HEADER = "(document.querySelector('#details h2') || {}).textContent"


def rgb(hex_colour):
    value = int(hex_colour.lstrip("#"), 16)
    return f"rgb({value >> 16}, {(value >> 8) & 255}, {value & 255})"


def device_stores(checks, args, work):
    """The issue's three devices against one reference, each written by qd-fixture-gen with the
    same seed (so the three reference stores are the same): QNN 2.28 clean, a kernel fault at
    conv3 (requant-scale), QNN 2.30 clipping norm1. Returns the page of their diff."""
    out = work / "devices"
    out.mkdir(parents=True, exist_ok=True)
    for ref, device, fault in (("ref.h5", "clean.h5", []),
                               ("r2.h5", "kfault.h5", ["--fault", "requant-scale", "--at", "conv3"]),
                               ("r3.h5", "v230.h5", ["--fault", "clipping", "--at", "norm1"])):
        # 32 x 32 inputs: the page's devices, matrix and causes do not depend on tensor sizes.
        made = run([args.fixture_gen, str(out / ref), str(out / device), "--seed", "7",
                    "--input-size", "32", *fault])
        checks.check(made.returncode == 0, f"qd-fixture-gen wrote {device}: {made.stderr[-300:]}")
    page_path = out / "m.html"
    diff = run([args.cli, "diff", str(out / "ref.h5"), *(str(out / d) for d in ("clean.h5", "kfault.h5", "v230.h5")),
                "--label", "HTP QNN 2.28", "--label", "HTP kernel fault", "--label", "HTP QNN 2.30",
                "--html", str(page_path)])
    checks.check(diff.returncode == 1, f"the three-device diff exits 1: {diff.returncode} {diff.stderr[-300:]}")
    return page_path


def cell_pixel(page, selector):
    """The colour a screenshot shows inside SELECTOR's box, 3 px from its left edge (clear of
    its right-aligned text), scrolled into view."""
    centre = page.centre_of(selector)
    if not centre:
        return None
    left = page.evaluate(f"document.querySelector({json.dumps(selector)}).getBoundingClientRect().x")
    x, y = left + 3 + page.evaluate("scrollX"), centre[1] + page.evaluate("scrollY")
    return page.screenshot({"x": x, "y": y, "width": 1, "height": 1})[0][0]


def check_device_heatmap(checks, args, work):
    """Three devices: the summary names each device's verdict and first divergence; the heatmap
    shows three labelled columns, conv3 (h5) fail-coloured on the kernel fault only, norm1 (h10)
    on QNN 2.30 and the kernel fault (which it inherits) but no cell of the clean column; conv3
    and norm1 lead where the devices disagree; a real click on a cell opens that op in that
    device's run."""
    labels = ["HTP QNN 2.28", "HTP kernel fault", "HTP QNN 2.30"]
    page_path = device_stores(checks, args, work)
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(page_path.resolve().as_uri())
        state = page.evaluate(HEATMAP_STATE)
        fail = rgb(state["fail"])
        cells, names = state["cells"], state["names"]
        checks.check(state["shown"] and state["heads"] == labels and state["headsShown"],
                     f"the heatmap has a labelled column per device: {state['heads']}")
        checks.check(names.get("h5", "").startswith("conv3") and names.get("h10", "").startswith("norm1"),
                     f"rows h5 and h10 are conv3 and norm1: {names.get('h5')} {names.get('h10')}")
        checks.check(cells["h5"][1] == fail and fail not in (cells["h5"][0], cells["h5"][2]),
                     f"conv3 (h5) is fail-coloured on the kernel fault only: {cells['h5']} (fail {fail})")
        checks.check(cells["h10"][2] == fail and cells["h10"][0] != fail,
                     f"norm1 (h10) is fail-coloured on QNN 2.30, not on the clean device: {cells['h10']}")
        clean = [group for group, colours in cells.items() if colours[0] in (fail, None)]
        checks.check(len(cells) == 16 and not clean, f"no cell of the clean column is fail-coloured (or hidden): {clean}")
        checks.check([d[0] for d in state["disagree"][:2]] == ["h5", "h10"] and
                     state["disagree"][0][1].startswith("conv3") and state["disagree"][1][1].startswith("norm1") and
                     [d[2] for d in state["disagree"][:2]] == labels[1:],
                     f"where the devices disagree most: conv3 on the kernel fault, then norm1 on 2.30: {state['disagree'][:3]}")
        outcomes = [(row[0], row[5], row[9].split(" (")[0]) for row in state["outcomes"]]
        checks.check(outcomes == [(labels[0], "pass", "none"), (labels[1], "fail", "h5 in run 0"), (labels[2], "fail", "h10 in run 0")],
                     f"the summary gives each device's verdict and first divergence: {outcomes}")
        shown = {(g, d): cell_pixel(page, f'#device-heatmap tr[data-group="{g}"] td[data-device="{d}"]') for g, d in (("h5", 1), ("h10", 2), ("h5", 0))}
        shown["h5"], shown["h10"] = shown["h5", 1], shown["h10", 2]
        checks.check(shown["h5"] == FAIL_RGB and shown["h10"] == FAIL_RGB and shown["h5", 0] not in (FAIL_RGB, None),
                     f"a screenshot shows the two faults' cells in the fail colour, conv3's clean one not: {shown}")
        if args.images:
            page.evaluate("document.getElementById('devices-section').scrollIntoView()")
            box = page.evaluate("(() => { const b = document.getElementById('devices-section').getBoundingClientRect();"
                                " return {x: b.x + scrollX, y: b.y + scrollY, width: b.width, height: Math.min(b.height, 900)}; })()")
            page.screenshot(box, pathlib.Path(args.images) / "report-devices.png")
        for group, device, label in (("h10", 2, labels[2]), ("h5", 1, labels[1])):
            page.click(*page.centre_of(f'#device-heatmap tr[data-group="{group}"] td[data-device="{device}"]'))
            time.sleep(0.2)
            shown = page.evaluate(DETAILS_SHOWN)
            header = page.evaluate(DETAILS_HEADER)
            checks.check(shown["id"] == group and f"{label} run 0" in header and shown["scatter"],
                         f"a click on {group} x {label} shows that op on that device, with its pictures: {header!r}")
    finally:
        page.close()


def check_step_heatmap(checks, args, work):
    """A store of 12 runs (the demo, as decode steps would be): the ops x runs heatmap draws a
    cell per op and run, and a real click on the cell of op 4 in run 7 opens that op in run 7."""
    out = work / "steps"
    # A 32x32 input: the heatmap is ops x runs, whatever the tensors' size.
    run([args.cli, "demo", "--out", str(out), "--runs", "12", "--seed", "3", "--input-size", "32"])
    doc = json.loads((out / "report.json").read_text())
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open((out / "report.html").resolve().as_uri())
        shape = page.evaluate("Object.assign({}, (document.getElementById('steps-heatmap') || {dataset: {}}).dataset)")
        checks.check(shape.get("steps") == "12" and int(shape.get("ops", 0)) == len(doc["aggregate"]) and shape.get("per") == "1",
                     f"the steps heatmap has 12 runs x {len(doc['aggregate'])} ops: {shape}")
        if not shape.get("steps"):
            return
        op = doc["aggregate"][4]["id"]
        x, y = step_cell_centre(page, 7, 4)
        pixel = page.screenshot({"x": x + page.evaluate("scrollX"), "y": y + page.evaluate("scrollY"), "width": 1, "height": 1})
        checks.check(pixel[0][0] != (255, 255, 255), f"the cell is drawn: {pixel[0][0]}")
        page.click(x, y)
        time.sleep(0.2)
        header = page.evaluate(DETAILS_HEADER)
        shown = page.evaluate(DETAILS_SHOWN)
        checks.check(shown["id"] == op and "device run 7" in header,
                     f"a click on {op} in run 7 shows it: {header!r}")
        readout = page.evaluate("document.getElementById('steps-readout').textContent")
        checks.check(readout.startswith(f"{op} in run 7"), f"hovering names the cell: {readout!r}")
    finally:
        page.close()


def step_cell_centre(page, run, op):
    """The viewport centre of the steps heatmap's cell of OP (its row) in RUN (its column), the
    canvas scrolled to show it; None on the strips when OP is None (the run verdict's)."""
    return page.evaluate(f"""(() => {{ const c = document.getElementById('steps-heatmap'), d = c.dataset;
      const x = (Math.floor({run} / Number(d.per)) + 0.5) * Number(d.cellW);
      c.parentElement.scrollLeft = Math.max(0, x - 300); c.scrollIntoView({{block: 'center'}});
      const y = {'5' if op is None else f"Number(d.top) + ({op} + 0.5) * Number(d.cellH)"};
      const b = c.getBoundingClientRect(); return [b.x + x, b.y + y]; }})()""")


def zoom_to_runs(page, clicks=20):
    """Real clicks on the steps heatmap's + (at most CLICKS) until a pixel column holds one run."""
    for _ in range(clicks):
        if page.evaluate("document.getElementById('steps-heatmap').dataset.per") == "1":
            break
        page.click(*page.centre_of("#steps-wider"))
    return page.evaluate("Object.assign({}, document.getElementById('steps-heatmap').dataset)")


CELL_SHOWN = """(() => {
  const note = document.getElementById('cell-note'), d = document.getElementById('details');
  const shown = e => !!e && e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const facts = [...d.querySelectorAll('tr')].map(tr => tr.textContent);
  return {header: (d.querySelector('h2') || {}).textContent, note: shown(note),
          sqnr: facts.find(t => t.startsWith('SQNR')) || '', verdict: facts.find(t => t.startsWith('verdict')) || ''};
})()"""


def check_cell_click(checks, page, run_, op):
    """A real click on op OP (group h<OP + 1>) of run RUN_, a run whose groups are not in the
    table: its details show, with its figures at that step and a note that they are its overview."""
    page.click(*step_cell_centre(page, run_, op))
    group = f"h{op + 1}"
    page.wait_for(f"((document.querySelector('#details h2') || {{}}).textContent || '').includes('device run {run_}')", 10)
    shown = page.evaluate(CELL_SHOWN)
    checks.check(group in shown["header"] and f"device run {run_}" in shown["header"] and shown["note"],
                 f"a click on {group} of run {run_} (not in the table) opens its overview at that step: {shown}")
    checks.check(shown["sqnr"].endswith(" dB") and shown["verdict"].startswith("verdict"),
                 f"its details give its SQNR and verdict in run {run_}: {shown}")
    return shown


def check_decode_steps(checks, args, work, runs=150, ops=40, fault_run=100, fault_op=25):
    """A long generation in small (qd_write_decode_stores: op FAULT_OP and every op after it go
    wrong from run FAULT_RUN): the page keeps the groups of the first 32 runs and the failing
    ones; the steps heatmap draws every run, shows the first failing run in the fail colour
    after passing runs, marks the runs whose groups are on the page; real clicks open the failing
    op of the failing run, a run's first divergence from its verdict strip, and say that a
    passing run left out of the page has its groups in the JSON report."""
    ref, dev, page_path = work / "steps_ref.h5", work / "steps_dev.h5", work / "steps.html"
    written = run([args.decode_writer, str(ref), str(dev), str(runs), str(ops), str(fault_run), str(fault_op)])
    checks.check(written.returncode == 0, f"the decode stores are written: {written.stderr[-300:]}")
    diff = run([args.cli, "diff", str(ref), str(dev), "--html", str(page_path)])
    checks.check(diff.returncode == 1, f"diff exits 1: {diff.returncode} {diff.stderr[-300:]}")
    failing, trimmed = f"h{fault_op + 1}", fault_run - 40
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(page_path.resolve().as_uri())
        shape = page.evaluate("Object.assign({}, document.getElementById('steps-heatmap').dataset)")
        checks.check(int(shape["steps"]) == runs and int(shape["ops"]) == ops and shape["firstFailing"] == str(fault_run),
                     f"every run and op is drawn, the first failing run marked: {shape}")
        first = page.evaluate("document.getElementById('steps-first').textContent")
        checks.check(first.startswith(f"First failing run: {fault_run} (first divergence {failing})"),
                     f"the first failing run is named: {first!r}")
        strip = lambda r, y: page.screenshot({"x": step_cell_centre(page, r, None)[0] + page.evaluate("scrollX"),
                                              "y": page.evaluate("document.getElementById('steps-heatmap').getBoundingClientRect().y") + page.evaluate("scrollY") + y,
                                              "width": 1, "height": 1})[0][0]
        verdicts = [strip(fault_run - 1, 5), strip(fault_run, 5)]
        checks.check(verdicts[1] == FAIL_RGB and verdicts[0] not in (FAIL_RGB, (255, 255, 255)),
                     f"the verdict strip turns fail-coloured at run {fault_run}: {verdicts}")
        kept = [strip(10, 33), strip(trimmed, 33)]  # STRIP.kept in heatmap.js
        checks.check(kept[0] != (255, 255, 255) and kept[1] == (255, 255, 255),
                     f"the groups-on-page strip marks run 10 and not run {trimmed}: {kept}")
        page.click(*step_cell_centre(page, fault_run, fault_op))
        time.sleep(0.3)
        header = page.evaluate(DETAILS_HEADER)
        checks.check(failing in header and f"device run {fault_run}" in header,
                     f"a click on the failing op of the failing run opens it: {header!r}")
        page.click(*step_cell_centre(page, fault_run + 3, None))
        time.sleep(0.3)
        header = page.evaluate(DETAILS_HEADER)
        checks.check(failing in header and f"device run {fault_run + 3}" in header,
                     f"a click on run {fault_run + 3}'s verdict opens its first divergence: {header!r}")
        check_cell_click(checks, page, trimmed, 3)
        readout = page.evaluate("document.getElementById('steps-readout').textContent")
        checks.check(readout.startswith(f"h4 in run {trimmed}: SQNR") and "overview only" in readout,
                     f"hovering names the cell and what the page has of its run: {readout!r}")
        width = int(shape["cellW"])
        page.click(*page.centre_of("#steps-wider"))
        wider = page.evaluate("Number(document.getElementById('steps-heatmap').dataset.cellW)")
        checks.check(wider == min(16, 2 * width), f"+ doubles the run width: {width} -> {wider}")
        page.click(*page.centre_of("#steps-fit"))
        if args.images:
            page.evaluate("document.getElementById('steps-section').scrollIntoView()")
            box = page.evaluate("(() => { const b = document.getElementById('steps-section').getBoundingClientRect();"
                                " return {x: b.x + scrollX, y: b.y + scrollY, width: b.width, height: Math.min(b.height, 900)}; })()")
            page.screenshot(box, pathlib.Path(args.images) / "report-steps.png")
    finally:
        page.close()


def check_decode_page(checks, args, work):
    """A long generation: --decode-runs runs of --decode-ops ops whose op at three fifths (h121
    of 200) and all after it go wrong from three fifths of the runs. The page stays within
    --max-mb, draws every run (several a pixel), names the first failing run; zoomed in by real
    clicks, a click opens the failing op of that run, and one on a passing run left out says that
    its groups are in the JSON report only. How long it takes to write and to open is
    tests/bench/report_page_bench.py's (docs/performance.md, "HTML report in the browser")."""
    runs, ops = args.decode_runs, args.decode_ops
    fault_op = ops * 3 // 5
    fault_run = runs * 3 // 5
    ref, dev, page_path = work / "decode_ref.h5", work / "decode_dev.h5", work / "decode.html"
    written = run([args.decode_writer, str(ref), str(dev), str(runs), str(ops), str(fault_run), str(fault_op)])
    checks.check(written.returncode == 0, f"the decode stores are written: {written.stderr[-300:]}")
    diff = run([args.cli, "diff", str(ref), str(dev), "--html", str(page_path)])
    checks.check(diff.returncode == 1, f"diff exits 1: {diff.returncode} {diff.stderr[-300:]}")
    mb = page_path.stat().st_size / 1e6
    checks.check(mb <= args.max_mb, f"the {runs}-run page is {mb:.1f} MB, at most {args.max_mb}")
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(page_path.resolve().as_uri())
        shape = page.evaluate("Object.assign({}, document.getElementById('steps-heatmap').dataset)")
        checks.check(int(shape["steps"]) == runs and int(shape["ops"]) == ops and int(shape["per"]) > 1,
                     f"every run and op is drawn, several runs a pixel: {shape}")
        first = page.evaluate("document.getElementById('steps-first').textContent")
        checks.check(first.startswith(f"First failing run: {fault_run} (first divergence h{fault_op + 1})"),
                     f"the first failing run is named: {first!r}")
        zoomed = zoom_to_runs(page)
        checks.check(zoomed["per"] == "1", f"+ zooms in to a run a pixel column: {zoomed}")
        page.click(*step_cell_centre(page, fault_run, fault_op))
        time.sleep(0.3)
        header = page.evaluate(DETAILS_HEADER)
        checks.check(f"h{fault_op + 1}" in header and f"device run {fault_run}" in header,
                     f"a click on the failing op of the failing run opens it: {header!r}")
        # Ops at steps whose groups are not in the table: a passing one and a failing one.
        check_cell_click(checks, page, runs // 5, 10)
        late = runs - 7  # failing, and past the failing runs the table keeps
        shown = check_cell_click(checks, page, late, fault_op + 2)
        checks.check("fail" in shown["verdict"], f"run {late}'s h{fault_op + 3} fails: {shown}")
        check_search(checks, page, f"layer{fault_op}", ops)
        print(f"decode_runs={runs} ops={ops} page_mb={mb:.1f}")
    finally:
        page.close()


def check_llm_decode(checks, args, work):
    """An int16 LLM decode (tests/python/emulated_decoder.py: layer 2's key rotated by one
    position from step 20 on): the runs strip's "next token" row is red at the first diverging
    token's run and green before it, the line above the canvas names that token and the op that
    departed before it, and the layers x heads x positions view colours the broken cache's cells
    and names them on hover: a real mouse over the cell of layer 2's key cache at the position the
    fault first writes says it first differs in run 20; a click opens that cache in run 20."""
    if not args.python_dir:
        return  # the emulator writes its stores with the Python package
    sys.path[:0] = [args.python_dir, str(pathlib.Path(__file__).resolve().parents[1] / "python")]
    import emulated_decoder as emu
    out = work / "llm"
    emu.emulate(str(out), emu.Config(), emu.Settings(steps=24, fault="rope", fault_layer=2,
                                                      fault_step=20, bits=16))
    page_path = out / "report.html"
    diff = run([args.cli, "diff", str(out / "ref.h5"), str(out / "dev.h5"), "--html", str(page_path),
                "--json", str(out / "report.json")])
    checks.check(diff.returncode == 1, f"the decode's diff exits 1: {diff.stderr[-300:]}")
    if args.pages_only:
        return
    doc = json.loads((out / "report.json").read_text())
    token = doc["summary"]["first_diverging_token"]
    track = next(t for t in doc["kv_cache"] if t["tensor"] == "layers.2.attn.k_cache")
    head, position, _, _, first_run = track["first_differ"][0]
    row = sum(max(1, t["heads"]) for t in doc["kv_cache"][:doc["kv_cache"].index(track)]) + head
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(page_path.resolve().as_uri())
        first = page.evaluate("document.getElementById('steps-first').textContent")
        checks.check(f"First diverging token: run {token['device_run']}" in first and "layers.2.attn.rope_k" in first,
                     f"the first diverging token and the op before it are named: {first!r}")
        strip_y = 26  # the "next token" strip: STRIP.token in heatmap.js
        for run_, colour in ((token["device_run"], "fail"), (token["device_run"] - 3, "pass")):
            x, y = step_cell_centre(page, run_, None)
            pixel = page.screenshot({"x": x + page.evaluate("scrollX"), "y": y - 5 + strip_y + page.evaluate("scrollY"),
                                     "width": 1, "height": 1})[0][0]
            fail = int(page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--fail')").strip()[1:], 16)
            want = (fail >> 16, (fail >> 8) & 255, fail & 255) if colour == "fail" else (0xb9, 0xdc, 0xbc)
            checks.check(pixel == want, f"the next-token strip at run {run_} is {colour}: {pixel} vs {want}")
        centre = page.evaluate(f"""(() => {{ const c = document.getElementById('kv-map'); if (!c) return null;
          c.scrollIntoView({{block: 'center'}}); const b = c.getBoundingClientRect(), d = c.dataset;
          return [b.x + ({position} + 0.5) * Number(d.cellW), b.y + ({row} + 0.5) * Number(d.cellH)]; }})()""")
        checks.check(centre is not None, "the page has the layers x heads x positions view")
        if centre is None:
            return
        page.send("Input.dispatchMouseEvent", type="mouseMoved", x=centre[0], y=centre[1])
        time.sleep(0.1)
        readout = page.evaluate("document.getElementById('kv-map-readout').textContent")
        checks.check(readout == f"layers.2.attn.k_cache head {head} position {position}: first differs in run {first_run}",
                     f"hovering the broken cell names it: {readout!r}")
        pixel = page.screenshot({"x": centre[0] + page.evaluate("scrollX"), "y": centre[1] + page.evaluate("scrollY"),
                                 "width": 1, "height": 1})[0][0]
        checks.check(pixel != (0xe4, 0xe7, 0xeb), f"the broken cell is coloured, not grey: {pixel}")
        page.click(*centre)
        time.sleep(0.3)
        header = page.evaluate(DETAILS_HEADER)
        checks.check(track["group"] in header and f"device run {first_run}" in header,
                     f"a click opens the cache in its first differing run: {header!r}")
    finally:
        page.close()


def check_search(checks, page, text, ops):
    """Typing TEXT, the name of one op of OPS a run, into the filter leaves that op's rows: one
    per run whose groups are in the table."""
    total = int(page.evaluate("document.getElementById('shown-count').textContent").split(" of ")[1].split(" ")[0])
    wanted = total // ops
    set_control(page, "#filter", text, "input")
    wait_shown(page, wanted, total)
    names = page.evaluate("[...document.querySelectorAll('#groups-body > [role=row] > .name')].map(c => c.textContent)")
    checks.check(wanted > 0 and names and all(n == text for n in names),
                 f"searching {text!r} leaves {wanted} rows, each named with it: {names[:3]}")
    set_control(page, "#filter", "", "input")


def check_graph_moves(checks, page):
    """The wheel and the buttons zoom, a drag pans and selects nothing."""
    page.evaluate("document.getElementById('graph').scrollIntoView({block: 'center'})")
    before = page.evaluate(GRAPH_STATE)
    x, y = page.evaluate("(() => { const b = document.getElementById('graph').getBoundingClientRect();"
                         " return [b.x + 40, b.y + 40]; })()")  # empty background
    page.wheel(x, y, -400)
    wheeled = page.evaluate(GRAPH_STATE)
    checks.check(wheeled["k"] > before["k"] * 1.2, f"the wheel zooms in: {before['k']} -> {wheeled['k']}")
    page.click(*page.centre_of("#graph-zoom-out"))
    out = page.evaluate(GRAPH_STATE)
    checks.check(out["k"] < wheeled["k"], f"the - button zooms out: {wheeled['k']} -> {out['k']}")
    # select() renders the details afresh: the same heading element after the drag means none ran.
    page.evaluate("window.qdHeading = document.querySelector('#details h2')")
    page.evaluate("document.getElementById('graph').scrollIntoView({block: 'center'})")
    x, y = page.evaluate("(() => { const b = document.getElementById('graph').getBoundingClientRect();"
                         " return [b.x + b.width / 2, b.y + b.height / 2]; })()")
    page.drag(x, y, 120, 80)
    dragged = page.evaluate(GRAPH_STATE)
    checks.check(abs(dragged["tx"] - out["tx"] - 120) < 2 and abs(dragged["ty"] - out["ty"] - 80) < 2,
                 f"a drag pans by the mouse's move: {out['tx']},{out['ty']} -> {dragged['tx']},{dragged['ty']}")
    checks.check(page.evaluate("document.querySelector('#details h2') === window.qdHeading"),
                 "a drag that starts on a node selects nothing")


def save_doc_images(page, folder, name):
    """docs/images: the graph view around op NAME (selected) and its details, clipped to their
    regions."""
    folder.mkdir(parents=True, exist_ok=True)
    found = search_node(page, name)
    page.click(*page.centre_of(f"#graph .node[data-node='{found['current']}'] .box"))
    search_node(page, "")  # no search marks in the picture
    page.evaluate("document.getElementById('graph-section').scrollIntoView()")
    for selector, name, height in (("#graph-section", "report-graph.png", 700),
                                   ("#details", "report-details.png", 1250)):
        box = page.evaluate(f"(() => {{ const b = document.querySelector('{selector}').getBoundingClientRect();"
                            f" return {{x: b.x + scrollX, y: b.y + scrollY, width: b.width, height: Math.min(b.height, {height})}}; }})()")
        page.screenshot(box, folder / name)


def graph_report(checks, args, work, ops):
    """The wide report of OPS ops with a graph added: each op reads the previous one, every
    fifth also the op four back, every seventh the op two back (skip connections)."""
    ref, dev = work / "graph_ref.h5", work / "graph_dev.h5"
    report_json, with_graph, page_path = work / "graph.json", work / "graph_inputs.json", work / "graph.html"
    written = run([args.writer, str(ref), str(dev), str(ops)])
    checks.check(written.returncode == 0, f"wrote the graph stores: {written.stderr}")
    run([args.cli, "diff", str(ref), str(dev), "--json", str(report_json)])
    doc = json.loads(report_json.read_text())
    for run_ in doc["runs"]:
        run_["op_order"] = "graph"
        ids = [g["id"] for g in run_["groups"]]
        for k, group in enumerate(run_["groups"]):
            group["inputs"] = [ids[j] for j in (k - 1, k - 4 if k % 5 == 0 else -1,
                                                k - 2 if k % 7 == 3 else -1) if j >= 0]
    with_graph.write_text(json.dumps(doc))
    rendered = run([args.cli, "report", str(with_graph), "--html", str(page_path)])
    checks.check(rendered.returncode in (0, 1), f"report renders the graph JSON: {rendered.stderr}")
    return page_path


HOSTILE_NODE = """(() => {
  const node = document.querySelector('#graph .node.current');
  const allowed = new Set(['svg', 'g', 'rect', 'text', 'title', 'path', 'circle']);
  return {label: node ? node.querySelector('.label').textContent : null,
          title: node ? node.querySelector(':scope > title').textContent : null,
          imgs: document.querySelectorAll('img').length,
          foreign: [...document.querySelectorAll('#graph svg *')].filter(e => !allowed.has(e.tagName)).map(e => e.tagName)};
})()"""


def check_graph_scale(checks, args, work):
    """2,000 ops: every op laid out, only those near the view drawn; the hostile name stays
    text. How long the layout takes is tests/bench/report_page_bench.py's."""
    page_path = graph_report(checks, args, work, 2000)
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(pathlib.Path(page_path).resolve().as_uri())
        state = page.evaluate(GRAPH_STATE)
        checks.check(state["nodes"] == 2000, f"the graph has 2,000 ops: {state['nodes']}")
        drawn = page.evaluate("document.querySelectorAll('#graph .node').length")
        checks.check(0 < drawn < 2000, f"only the ops near the view are in the DOM: {drawn}")
        found = search_node(page, "onerror")
        hostile = page.evaluate(HOSTILE_NODE)
        checks.check(found["matches"] == "1 of 1" and hostile["label"] and
                     hostile["label"].startswith("<img src=x") and HOSTILE in hostile["title"],
                     f"the hostile name is a node's text: {hostile}")
        checks.check(hostile["imgs"] == 0 and not hostile["foreign"],
                     f"no <img> and nothing but shapes and text in the graph: {hostile}")
        print(f"graph_ops=2000 graph_ms={state['ms']}")
    finally:
        page.close()


# ---- the hostile name in a dumped DOM, the re-rendered page ------------------------------
def check_rerendered(checks, args, report_html, rerendered, report_json):
    again = run([args.cli, "report", str(report_json), "--html", str(rerendered)])
    checks.check(again.returncode == 0, f"report exits 0: {again.stderr}")
    checks.check(rerendered.read_bytes() == report_html.read_bytes(),
                 "qnn-debug report renders the saved JSON to the same HTML bytes")


def check_dumped(checks, args, report_html, rerendered, report_json):
    dom, seconds = dump_dom(args.chromium, report_html, "#filter=onerror")
    checks.check(dom.body.get("data-ready") == "1", "the page script ran to the end")
    hostile_rows = [row for row in dom.rows if HOSTILE in row[1]]
    checks.check(len(hostile_rows) == 1, "the hostile name is shown as a cell's text")
    checks.check("img" not in dom.tags, "no <img> element exists: the name was not parsed as HTML")
    check_rerendered(checks, args, report_html, rerendered, report_json)
    redom, _ = dump_dom(args.chromium, rerendered, "#filter=onerror")
    checks.check([r[1] for r in redom.rows] == [r[1] for r in dom.rows],
                 "the re-rendered table has the same cells")
    return dom, seconds


# ---- --large: a large report's table and a click --------------------------------------------
def check_large(checks, args, report_html):
    """The page within --max-mb; loaded, its table holds every group in a window of rows, and a
    real click on row 5,010 is answered by that group's details. How long the load and the click
    take is tests/bench/report_page_bench.py's (docs/performance.md)."""
    size = report_html.stat().st_size
    if args.max_mb:
        checks.check(size < args.max_mb * 1e6, f"the page is {size / 1e6:.1f} MB (< {args.max_mb} MB)")
    if args.pages_only:
        return
    page = Page(args.chromium, 1400, 900)
    try:
        page.open(pathlib.Path(report_html).resolve().as_uri())
        count = page.evaluate("Number(document.getElementById('groups').getAttribute('aria-rowcount')) - 1")
        checks.check(count == args.groups, f"the table holds {count} groups of {args.groups}")
        rows = page.evaluate("document.querySelectorAll('#groups-body > [role=row]').length")
        checks.check(0 < rows <= WINDOW_LIMIT, f"{rows} rows in the DOM for {count} groups")
        page.evaluate("document.querySelector('.table-wrap').scrollTop = 24 * 5000;"
                      "document.querySelector('.table-wrap').dispatchEvent(new Event('scroll'))")
        row = page.evaluate("(() => { const r = [...document.querySelectorAll('#groups-body > [role=row]')]"
                            ".find(r => r.getAttribute('aria-rowindex') === '5010'); return r && r.dataset.group; })()")
        centre = page.centre_of(f"#groups-body > [role=row][aria-rowindex='5010'] > .name")
        page.click(*centre)
        answered = page.wait_for(f"(document.querySelector('#details .details-id') || {{}}).textContent === {json.dumps(row)}")
        checks.check(bool(answered), f"a click on row 5,010 ({row}) shows its details")
        print(f"large groups={count} html_bytes={size}")
    finally:
        page.close()


def npy(values, shape):
    """A float32 .npy file (numpy format 1.0), written without numpy."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % dims
    header += " " * ((64 - (11 + len(header)) % 64) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
            struct.pack(f"<{len(values)}f", *values))


def write_views_npz(path, device, runs=4, ops=24):
    """RUNS runs of OPS float ops with long names that share a prefix (op 12 wrong on the device:
    it warns), a KV cache whose positions from 9 on go wrong from run 2, and an op of two outputs
    whose second (the values) is wrong: an npz of `run<k>/<name>` arrays (docs/formats.md, 4c)."""
    import math
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for r in range(runs):
            for op in range(ops):
                values = [math.sin(0.37 * i + 0.11 * op + 0.013 * r) +
                          ((0.2 if op == 12 else 1e-3) * math.cos(7 * (0.37 * i + 0.11 * op + 0.013 * r)) if device else 0)
                          for i in range(64)]
                z.writestr(f"run{r}/model.decoder.layers.{op}.self_attn.output_projection__debugID_{op + 1}.npy", npy(values, [64]))
            heads, positions, dim = 2, 24, 4
            cache = [0.0] * (heads * positions * dim)
            for h in range(heads):
                for p in range(min(positions, 4 * r + 6)):
                    for d in range(dim):
                        cache[(h * positions + p) * dim + d] = math.sin(0.7 * p + 0.3 * d + h) + (0.8 if device and r >= 2 and p >= 9 else 0)
            z.writestr(f"run{r}/model.decoder.layers.0.self_attn.k_cache.npy", npy(cache, [1, heads, positions, dim]))
            for k in (0, 1):
                values = [math.cos(0.2 * i + k) + (0.9 * math.sin(3 * i) if device and k == 1 else 0) for i in range(32)]
                z.writestr(f"run{r}/attn_out__debugID_90@{k}.npy", npy(values, [32]))


# The error-growth chart's op names as they are drawn: their text and title, whether each
# rotated box lies inside the picture, and how many pairs of them (and the captions) overlap,
# by the separating axis test on their boxes as the screen shows them.
AXIS_NAMES = """(() => {
  const chart = document.querySelector('#chart svg.growth'), frame = chart.getBoundingClientRect();
  const corners = t => { const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
  const names = [...chart.querySelectorAll('text.axis-name')], captions = [...chart.querySelectorAll('text.caption')];
  const boxes = names.concat(captions).map(corners);
  const apart = (p, q) => [p, q].some(poly => poly.some((a, i) => {
    const b = poly[(i + 1) % 4], n = [a[1] - b[1], b[0] - a[0]];
    const span = s => s.map(([x, y]) => x * n[0] + y * n[1]);
    const u = span(p), v = span(q);
    return Math.max(...u) <= Math.min(...v) + 0.01 || Math.max(...v) <= Math.min(...u) + 0.01; }));
  let overlaps = 0;
  for (let i = 0; i < boxes.length; ++i) for (let j = i + 1; j < boxes.length; ++j) if (!apart(boxes[i], boxes[j])) ++overlaps;
  return {texts: names.map(t => t.textContent), titles: names.map(t => (t.querySelector('title') || {}).textContent),
          inside: boxes.every(p => p.every(([x, y]) => x >= frame.left - 0.5 && x <= frame.right + 0.5 && y >= frame.top - 0.5 && y <= frame.bottom + 0.5)),
          overlaps, shown: names.filter(t => t.getBoundingClientRect().width > 0).length};
})()"""


def check_what_the_user_sees(checks, args, work, wide_page, wide_group):
    """Issue 33, what the user sees: the first-divergence callout leads with the cause the hints
    found, flags after; a group is named by its worst output; the KV caches have their table,
    whose links open the cache in its run; the chart's op names (long, with a shared prefix) are
    told apart, inside the picture and clear of each other; an encoding of bitwidth 0 shows its
    dtype's width; a float output's kernel hint draws no "encoding allows" bar; on three devices
    the op where the kernel fault only recovers (add1) marks no device."""
    out = work / "views"
    out.mkdir(parents=True, exist_ok=True)
    write_views_npz(out / "ref.npz", False)
    write_views_npz(out / "dev.npz", True)
    page_path, report_json = out / "views.html", out / "views.json"
    diff = run([args.cli, "diff", str(out / "ref.npz"), str(out / "dev.npz"), "--html", str(page_path), "--json", str(report_json)])
    checks.check(diff.returncode == 1, f"the views diff exits 1: {diff.returncode} {diff.stderr[-300:]}")
    demo = run([args.cli, "demo", "--out", str(out / "demo"), "--fault", "clipping"])
    checks.check(demo.returncode == 0, f"the clipping demo runs: {demo.stderr[-300:]}")
    if getattr(args, "pages_only", False):
        return
    doc = json.loads(report_json.read_text())
    page = Page(args.chromium, 1400, 900)
    try:
        # The callout: the hint's kind and sentence first, then SQNR and the flags.
        demo_doc = json.loads((out / "demo" / "report.json").read_text())
        first = demo_doc["summary"]["first_divergence"]
        hint = next(g for g in demo_doc["runs"][0]["groups"] if g["id"] == first["group"])["hints"][0]
        page.open((out / "demo" / "report.html").resolve().as_uri())
        callout = page.evaluate("""(() => { const c = document.getElementById('first-divergence'), cause = document.getElementById('first-divergence-cause');
          return {text: c.textContent, cause: cause ? cause.textContent : null,
                  shown: !!cause && cause.getBoundingClientRect().height > 0}; })()""")
        text = callout["text"]
        checks.check(callout["shown"] and callout["cause"] == hint["kind"] + " " + hint["sentence"],
                     f"the callout shows the first hint ({hint['kind']}): {callout['cause']!r}")
        checks.check("saturation" in first["flags"] and 0 <= text.find(hint["sentence"]) < text.find("SQNR") < text.find("[saturation]"),
                     f"the cause leads the callout, the SQNR and the flags follow: {text!r}")

        page.open(page_path.resolve().as_uri())
        # The two-output op is named by its wrong output, in the table as in the terminal.
        name_of = next((cells for group, _, cells in read_rows(page, cells=True)["rows"] if group == "h90"), [])
        checks.check("attn_out__debugID_90@1" in name_of and "attn_out__debugID_90@0" not in name_of,
                     f"group h90 is named by its worst output, @1: {name_of}")
        checks.check("(attn_out__debugID_90@1)" in diff.stdout, "the terminal names h90 by @1 too")
        # KV caches: a row per cache tensor, where positions first differ and at the last run.
        kv = page.evaluate("""(() => { const s = document.getElementById('kv-cache-section');
          const rows = [...document.querySelectorAll('#kv-cache tr[data-tensor]')];
          return {shown: !!s && !s.hidden && s.getBoundingClientRect().height > 0,
                  rows: rows.map(tr => [...tr.children].map(td => td.textContent.trim()))}; })()""")
        track = doc["kv_cache"][0]
        checks.check(kv["shown"] and len(kv["rows"]) == len(doc["kv_cache"]) == 1,
                     f"the page has a KV-cache table of {len(doc['kv_cache'])} cache: {kv}")
        row = kv["rows"][0] if kv["rows"] else [""] * 7
        # heads: this cache is [1, 2, 24, 4], cells of 4 elements, tracked by position only
        checks.check(row[0] == track["tensor"] == "model.decoder.layers.0.self_attn.k_cache" and row[2] == "24 on axis 2" and
                     row[3] == "\u2013" and row[4] == "4" and
                     row[5].startswith("positions 9\u201313 in device run 2") and row[6].startswith("positions 9\u201317 in device run 3"),
                     f"the KV-cache row says which positions first differ in which run: {row}")
        link = page.centre_of("#kv-cache tr[data-tensor] td:nth-child(6) button")
        if link:
            page.click(*link)
            time.sleep(0.2)
        header = page.evaluate(DETAILS_HEADER) if link else ""

        checks.check(track["group"] in header and "device run 2" in header, f"its link opens the cache in run 2: {header!r}")
        # The chart's op names: told apart, inside the picture, clear of each other.
        axis = page.evaluate(AXIS_NAMES)
        checks.check(axis["shown"] == len(axis["texts"]) >= 20 and len(set(axis["texts"])) == len(axis["texts"]),
                     f"every op name on the chart's axis is drawn and differs from the others: {axis['texts'][:4]}")
        checks.check(axis["inside"] and axis["overlaps"] == 0,
                     f"the chart's op names lie inside it and overlap nothing: inside {axis['inside']}, {axis['overlaps']} overlaps")
        checks.check(all(t and t.endswith(n.replace("\u2026", "")[-6:]) for t, n in zip(axis["titles"], axis["texts"]) if n),
                     f"each name's whole text is its title: {axis['titles'][:2]}")
        # A float output's kernel hint: no encoding allows it anything.
        warned = next(g for g in doc["runs"][0]["groups"] if g["id"] == "h13")
        page.open(page_path.resolve().as_uri() + "#group=h13&run=0")
        bars = page.evaluate("[...document.querySelectorAll('#details .evidence svg text')].map(t => t.textContent)")
        hints = page.evaluate(HINTS_SHOWN) or []
        checks.check(warned["verdict"] == "warn" and warned["hints"] and warned["hints"][0]["kind"] == "kernel_suspect" and
                     hints and "144" not in hints[0] and not any("encoding allows" in b for b in bars),
                     f"the float op's hint names no encoding and draws no 'encoding allows' bar: {hints[:1]} {bars}")
        # Bitwidth 0 (the wide stores' int8 encodings, as StoreWriter writes them) is the dtype's:
        # in the details of WIDE_GROUP, which the page keeps in full.
        page.open(pathlib.Path(wide_page).resolve().as_uri() + "#group=" + wide_group)
        quant = page.evaluate("[...document.querySelectorAll('#details .pair table.kv tr')].filter(tr => tr.firstChild.textContent === 'quantization').map(tr => tr.lastChild.textContent)")
        checks.check(quant and any("8-bit" in q for q in quant) and not any("0-bit" in q for q in quant),
                     f"an encoding of bitwidth 0 shows the dtype's width: {quant}")
        # Three devices: the kernel fault recovers a little at add1 (h6); no device is marked there.
        page.open((work / "devices" / "m.html").resolve().as_uri())
        marks = page.evaluate("""(() => { const tr = document.querySelector('#device-heatmap tr[data-group="h6"]');
          return tr ? [[...tr.querySelectorAll('td.hm')].map(td => td.textContent), tr.querySelector('.outlier-cell').textContent] : null; })()""")
        checks.check(marks and not any("*" in c for c in marks[0]) and marks[1] == "",
                     f"add1, where the kernel fault only recovers, marks no device: {marks}")
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
    parser.add_argument("--images", help="save the graph view and an op's details here (PNG)")
    parser.add_argument("--large", action="store_true",
                        help="only the large report's table, a click and its size")
    parser.add_argument("--max-mb", type=float,
                        help="with --large or --decode-runs: fail a larger page (MB)")
    parser.add_argument("--pages-only", action="store_true",
                        help="write every page and check what needs no browser (exit codes, "
                             "sizes, the re-rendered bytes): the C++ side, for the sanitizer build")
    parser.add_argument("--decode-writer", help="qd_write_decode_stores: a long generation's stores")
    parser.add_argument("--fixture-gen", help="qd-fixture-gen: the three devices' stores")
    parser.add_argument("--python-dir", help="the built qnn_debug package: the LLM decode's page")
    parser.add_argument("--decode-runs", type=int,
                        help="only the long generation's page (with --decode-writer), that many runs")
    parser.add_argument("--decode-ops", type=int, default=200,
                        help="with --decode-runs: ops a run (at least 20)")
    args = parser.parse_args()
    if args.decode_runs and args.decode_ops < 20:
        parser.error("--decode-ops: at least 20 (the clicks need a passing op 10 before the fault)")
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    ref, dev = work / "wide_ref.h5", work / "wide_dev.h5"
    report_json, report_html, rerendered = work / "wide.json", work / "wide.html", work / "wide2.html"
    checks = Checks()
    if args.decode_runs:
        check_decode_page(checks, args, work)
        print(f"{checks.passed} passed, {len(checks.failures)} failed")
        return 0 if not checks.failures else 1

    written = run([args.writer, str(ref), str(dev), str(args.groups)])
    if written.returncode != 0:
        print(written.stderr, file=sys.stderr)
        return 1
    # --large: no JSON report (about 13 KB a group: 1.3 GB at 100,000), the page alone.
    diff = run([args.cli, "diff", str(ref), str(dev), "--html", str(report_html)] +
               ([] if args.large else ["--json", str(report_json)]))
    checks.check(diff.returncode == 1, f"diff exits 1 (some groups fail): {diff.returncode} "
                                       f"{diff.stderr}")
    if args.large:
        check_large(checks, args, report_html)
    elif args.pages_only:
        doc = json.loads(report_json.read_text())
        checks.check(sum(len(run_["groups"]) for run_ in doc["runs"]) == args.groups,
                     "every group in the JSON report")
        del doc
        check_rerendered(checks, args, report_html, rerendered, report_json)
        check_parts(checks, args, work)
        check_graph_demo(checks, args, work)
        check_graph_scale(checks, args, work)
        check_device_heatmap(checks, args, work)
        check_what_the_user_sees(checks, args, work, report_html, None)
        check_step_heatmap(checks, args, work)
        check_decode_steps(checks, args, work)
        check_llm_decode(checks, args, work)
    else:
        doc = json.loads(report_json.read_text())
        groups = [g for run_ in doc["runs"] for g in run_["groups"]]
        first = doc["summary"]["first_divergence"]
        checks.check(len(groups) == args.groups, f"{len(groups)} groups in the JSON report")
        del doc
        dom, seconds = check_dumped(checks, args, report_html, rerendered, report_json)
        check_visible(checks, args, report_html, groups, first)
        check_parts(checks, args, work)
        check_graph_demo(checks, args, work)
        check_graph_scale(checks, args, work)
        check_device_heatmap(checks, args, work)
        check_what_the_user_sees(checks, args, work, report_html, groups[0]["id"])
        check_step_heatmap(checks, args, work)
        check_decode_steps(checks, args, work)
        check_llm_decode(checks, args, work)
        print(f"groups={len(groups)} table_ms={dom.body.get('data-table-ms')} "
              f"paint_ms={dom.body.get('data-paint-ms')} chromium_seconds={seconds:.2f} "
              f"html_bytes={report_html.stat().st_size}")
    print(f"{checks.passed} passed, {len(checks.failures)} failed")
    return 0 if not checks.failures else 1


if __name__ == "__main__":
    sys.exit(main())
