#!/usr/bin/python3
"""How long the HTML report takes to write, to open and to answer, in Debian's headless Chromium
(docs/performance.md, "HTML report in the browser"). The browser test
(tests/browser/report_browser_test.py) checks what these pages show; this measures them, and
asserts nothing about time.

    report_page_bench.py --cli QNN_DEBUG --writer QD_WRITE_WIDE_STORES
                         --decode-writer QD_WRITE_DECODE_STORES --workdir DIR
                         [--chromium chromium] [--groups 100000] [--decode-runs 5000]
                         [--decode-ops 200] [--graph-ops 2000] [--repeats 3]
                         [--pages wide,decode,graph]

Three pages, as the browser test writes them:
  wide     GROUPS groups of one 64-element pair each (`diff --html`, no JSON report); after the
           load, a real click on row 5,010 until its details show
  decode   DECODE_RUNS runs of DECODE_OPS ops, the op at three fifths and all after it wrong from
           three fifths of the runs; after the load, a real click on op 10 of run DECODE_RUNS / 5
           in the heatmap (a run whose groups are cells, not in the table) until its details show,
           and a search: the failing op's name typed into the filter until the table shows it
  graph    GRAPH_OPS ops with a graph (the wide report with inputs added, `qnn-debug report`)
For each: the seconds `qnn-debug` took to write it, its size, and, REPEATS times alternately,
the page's own `data-ready-ms` (from the navigation's start, HTML and JSON parsed included) and
the baseline's: the same file with the page's script replaced by one that only JSON.parses the
page's data elements, the least any page holding these bytes can do. Printed per page: the
medians, the ratio page / baseline, the click's and the graph's milliseconds. Exit 0 unless a
page could not be written or opened.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "browser"))
import report_browser_test as browser  # noqa: E402  (Page, the graph report)

BASELINE_SCRIPT = """<script>
for (const id of ['qd-metrics', 'qd-data', 'qd-aggregate']) {
  const e = document.getElementById(id), text = e ? e.textContent.trim() : '';
  if (text.startsWith('{') || text.startsWith('[')) JSON.parse(text);
}
document.body.dataset.readyMs = performance.now().toFixed(1);
document.body.dataset.ready = '1';
</script>"""


def baseline_page(page_path, out_path):
    """PAGE_PATH with its own script (the one after the data elements) replaced by
    BASELINE_SCRIPT."""
    text = page_path.read_text()
    data_end = text.index("</script>", text.index('id="qd-aggregate"')) + len("</script>")
    start = text.index("<script>", data_end)
    end = text.rindex("</script>") + len("</script>")
    out_path.write_text(text[:start] + BASELINE_SCRIPT + text[end:])
    return out_path


def timed(command):
    started = time.monotonic()
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode not in (0, 1):
        raise RuntimeError(f"{command[:2]} exited {result.returncode}: {result.stderr[-500:]}")
    return seconds


def ready_ms(page, path):
    page.open(path.resolve().as_uri())
    return float(page.evaluate("document.body.dataset.readyMs"))


def click_row_ms(page, row_index):
    """A real click on the table's row ROW_INDEX (aria-rowindex), until its details show."""
    page.evaluate(f"document.querySelector('.table-wrap').scrollTop = 24 * {row_index - 10};"
                  "document.querySelector('.table-wrap').dispatchEvent(new Event('scroll'))")
    row = page.evaluate(f"(() => {{ const r = [...document.querySelectorAll('#groups-body > [role=row]')]"
                        f".find(r => r.getAttribute('aria-rowindex') === '{row_index}'); return r && r.dataset.group; }})()")
    centre = page.centre_of(f"#groups-body > [role=row][aria-rowindex='{row_index}'] > .name")
    started = time.monotonic()
    page.click(*centre)
    answered = page.wait_for(f"(document.querySelector('#details .details-id') || {{}}).textContent === {json.dumps(row)}")
    if not answered:
        raise RuntimeError(f"a click on row {row_index} showed no details")
    return (time.monotonic() - started) * 1000


def measure(args, name, page_path, write_seconds, extra=None):
    """Opens PAGE_PATH and its baseline alternately, REPEATS times each; EXTRA(page), if given,
    runs after each load of the page and returns more figures. Prints one line."""
    base_path = baseline_page(page_path, page_path.with_suffix(".baseline.html"))
    page_ms, base_ms, extras = [], [], []
    page = browser.Page(args.chromium, 1400, 900)
    try:
        for _ in range(args.repeats):
            base_ms.append(ready_ms(page, base_path))
            page_ms.append(ready_ms(page, page_path))
            if extra:
                extras.append(extra(page))
    finally:
        page.close()
    ready, base = statistics.median(page_ms), statistics.median(base_ms)
    more = ""
    for key in (extras[0] if extras else {}):
        more += f" {key}={statistics.median(e[key] for e in extras):.0f}"
    print(f"{name}: write_s={write_seconds:.1f} page_mb={page_path.stat().st_size / 1e6:.1f} "
          f"ready_ms={ready:.0f} baseline_ms={base:.0f} ratio={ready / base:.2f}{more} "
          f"(medians of {args.repeats}; ready {[round(v) for v in page_ms]}, "
          f"baseline {[round(v) for v in base_ms]})", flush=True)


def bench_wide(args, work):
    ref, dev, page_path = work / "wide_ref.h5", work / "wide_dev.h5", work / "wide.html"
    timed([args.writer, ref, dev, args.groups])
    seconds = timed([args.cli, "diff", ref, dev, "--html", page_path])
    row = min(5010, args.groups)

    def click(page):
        return {"click_ms": click_row_ms(page, row),
                "table_ms": float(page.evaluate("document.body.dataset.tableMs"))}
    measure(args, f"wide groups={args.groups}", page_path, seconds, click)


def cell_click_ms(page, run, op):
    """A real click on op OP of run RUN in the steps heatmap, until its details show."""
    page.evaluate("document.getElementById('steps-heatmap').scrollIntoView({block: 'center'})")
    centre = browser.step_cell_centre(page, run, op)
    started = time.monotonic()
    page.click(*centre)
    if not page.wait_for(f"((document.querySelector('#details h2') || {{}}).textContent || '')"
                         f".includes('h{op + 1}') && document.querySelector('#details h2').textContent"
                         f".includes('device run {run}')"):
        raise RuntimeError(f"a click on op {op} of run {run} showed no details")
    return (time.monotonic() - started) * 1000


def search_ms(page, text):
    """TEXT typed into the filter, until the shown count says the table holds fewer rows (the
    page waits 120 ms after the last key before filtering)."""
    before = page.evaluate("document.getElementById('shown-count').textContent")
    started = time.monotonic()
    browser.set_control(page, "#filter", text, "input")
    if not page.wait_for(f"document.getElementById('shown-count').textContent !== {json.dumps(before)}"):
        raise RuntimeError(f"searching {text!r} changed nothing")
    took = (time.monotonic() - started) * 1000
    browser.set_control(page, "#filter", "", "input")
    return took


def bench_decode(args, work):
    runs, ops = args.decode_runs, args.decode_ops
    ref, dev, page_path = work / "decode_ref.h5", work / "decode_dev.h5", work / "decode.html"
    started = time.monotonic()
    timed([args.decode_writer, ref, dev, runs, ops, runs * 3 // 5, ops * 3 // 5])
    print(f"decode stores of {runs} x {ops} written in {time.monotonic() - started:.1f} s", flush=True)
    seconds = timed([args.cli, "diff", ref, dev, "--html", page_path])

    def answers(page):
        return {"steps_ms": float(page.evaluate("document.body.dataset.stepsMs")),
                "cell_click_ms": cell_click_ms(page, runs // 5, 10),
                "search_ms": search_ms(page, f"layer{ops * 3 // 5}")}
    measure(args, f"decode runs={runs} ops={ops}", page_path, seconds, answers)


def bench_graph(args, work):
    checks = browser.Checks()
    started = time.monotonic()
    page_path = browser.graph_report(checks, args, work, args.graph_ops)
    seconds = time.monotonic() - started
    if checks.failures:
        raise RuntimeError(f"the graph report: {checks.failures}")
    measure(args, f"graph ops={args.graph_ops}", page_path, seconds,
            lambda page: {"graph_ms": float(page.evaluate("document.body.dataset.graphMs"))})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--decode-writer", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--groups", type=int, default=100000)
    parser.add_argument("--decode-runs", type=int, default=5000)
    parser.add_argument("--decode-ops", type=int, default=200)
    parser.add_argument("--graph-ops", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pages", default="wide,decode,graph",
                        help="which pages to measure, comma-separated")
    args = parser.parse_args()
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    benches = {"wide": bench_wide, "decode": bench_decode, "graph": bench_graph}
    try:
        for name in args.pages.split(","):
            benches[name](args, work)
    except RuntimeError as e:
        print(f"report_page_bench: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
