"""Diffing two runs from Python: the same pipeline, numbers and report as `qnn-debug diff`."""
import json
import os

from . import _native

# Every input format's options (the CLI's --ref-* / --dev-* options and those for both sides), by
# keyword: the native module's list, made from the formats' registry (importers/input_format.h).
_OPTIONS = {option["key"]: option for option in _native.input_options()}


class Report:
    """A diff report. It wraps the typed report the library made (the same as `qnn-debug diff`'s):
    the views render from it without reading JSON back, and `text` / `json` (the document `qnn-debug
    diff --json` writes, docs/report-schema.json) are made once, when first asked for.
    `Report(text)` loads a saved report's text, as `qnn-debug report` loads a file."""

    def __init__(self, report):
        self._native = _native.Report.parse(report) if isinstance(report, str) else report
        self._doc = None

    @property
    def text(self):
        """The report's JSON text."""
        return self._native.text()

    @property
    def json(self):
        """The report's JSON document, parsed from `text` on first use."""
        if self._doc is None:
            self._doc = json.loads(self.text)
        return self._doc

    @property
    def verdict(self):
        return self._native.verdict()

    @property
    def summary(self):
        return self.json["summary"]

    @property
    def runs(self):
        return self.json["runs"]

    @property
    def first_divergence(self):
        """The first diverging group of the first run pair (None when nothing diverges)."""
        if not self.runs or self.runs[0].get("first_divergence") is None:
            return None
        wanted = self.runs[0]["first_divergence"]
        return next((g for g in self.groups if g["id"] == wanted), None)

    @property
    def groups(self):
        """The groups of the first run pair."""
        return self.runs[0]["groups"] if self.runs else []

    @property
    def devices(self):
        """The device labels, in the order diffed (one for a one-device report): the report's
        own, as every view shows them."""
        return self._native.devices()

    @property
    def device_matrix(self):
        """With several devices, the ops x devices rows, most disagreement first
        (docs/metrics.md, 6d); [] with one device."""
        rows = self.json.get("device_matrix", [])
        return sorted(rows, key=lambda row: -_sort_key(row["disagreement_db"]))

    @property
    def steps(self):
        """One line per run pair (prefill, then a run per decode step): verdict, first
        divergence, worst group, the output's SQNR, top-1."""
        return self.json.get("steps", [])

    def summary_text(self, top=10):
        """The terminal summary `qnn-debug diff` prints."""
        return self._native.render("summary", top)

    # write_json, write_html, write_csv...: one method per file view of the library
    # (report/views.h), added below the class. Writes go through the CLI's own writer
    # (docs/output-files.md): a regular file is replaced whole, a symlink is followed, a device or
    # FIFO is written in place.

    def to_pandas(self):
        """One row per compared pair (the CSV's columns) as a pandas DataFrame."""
        import io

        import pandas as pd  # optional: only this method needs it
        return pd.read_csv(io.StringIO(self._native.render("csv")))

    def __repr__(self):
        s = self.summary
        return f"Report(verdict={self.verdict!r}, runs={len(self.runs)}, summary={s})"


def _sort_key(value):
    """A report number ("inf", "-inf", "nan" strings too) as a float to sort by."""
    return float(value) if not isinstance(value, str) or value != "nan" else float("-inf")


def _add_view_writer(view):
    def write(self, path):
        _write(path, self.text if view == "json" else self._native.render(view))
    write.__name__ = "write_" + view.replace("-", "_")
    write.__doc__ = f"Writes the report's {view} view (`qnn-debug diff --{view} FILE`)."
    setattr(Report, write.__name__, write)


for _view in _native.views():
    _add_view_writer(_view)


def _value(option, value):
    convert = os.fspath if option["path"] else (lambda v: v)
    return [convert(v) for v in value] if option["many"] else convert(value)


def _options(given, prefix, both_sides):
    """The options in `given` named prefix + key (removed from it), by key."""
    found = {}
    for key, option in _OPTIONS.items():
        if both_sides and not option["both_sides"]:
            continue
        value = given.pop(prefix + key, None)
        if value is not None:
            found[key] = _value(option, value)
    return found


def diff(reference, device, *, labels=None, sim=None, isolated=None, policy=None, mapping=None,
         atol=None, rtol=None, ref_run=None, jobs=0, **options):
    """Compares `device` with `reference` and returns the Report.

    Each side is a store, an npz/npy, an ETDump or a qnn-net-run folder, as for `qnn-debug diff`.
    device: one input, or a list of them (several backends, QNN versions or SoCs), each compared
    with the reference into one report with an ops x devices matrix (`qnn-debug diff REF DEV1
    DEV2 ...`); labels: their names in the report, in order (default: each store's backend, SoC
    and producer metadata).
    sim: a quantized simulation of the reference (`capture_torch(..., encodings=...)`), and
    isolated: a replay of each op on the device's inputs (`replay`, one device only), as `--sim` /
    `--isolated`: each group then also has its error parts (docs/metrics.md, "Quantization or
    kernel?").
    Side options are the CLI's with ref_/dev_ prefixes (dev_encodings=[...], ref_format="npz",
    dev_debug_buffer=...; the dev_ ones apply to every device); encodings, net_json, input_list
    and shapes apply to both sides.
    jobs: worker threads, 0 (the default) for one per core; the report is the same for any.
    A failing verdict is a report, not an error; bad input raises QnnDebugError.
    """
    devices = list(device) if isinstance(device, (list, tuple)) else [device]
    if not devices:
        raise ValueError("diff: no device input to compare with the reference")
    ref_side, dev_side = ({"format": options.pop(f"{prefix}_format", None),
                           "options": _options(options, f"{prefix}_", both_sides=False)}
                          for prefix in ("ref", "dev"))
    shared = _options(options, "", both_sides=True)
    if options:
        raise TypeError(f"unknown options: {', '.join(sorted(options))}")
    ref = {"path": os.fspath(reference), **ref_side, "shared": shared}
    devs = [{"path": os.fspath(path), **dev_side, "shared": shared} for path in devices]
    sim, isolated = (None if path is None else
                     {"path": os.fspath(path), "format": None, "options": {}, "shared": shared}
                     for path in (sim, isolated))
    native = _native.diff(ref, devs, [str(label) for label in labels or []], sim, isolated,
                        "" if policy is None else os.fspath(policy),
                        "" if mapping is None else os.fspath(mapping),
                        None if atol is None else float(atol), None if rtol is None else float(rtol),
                        ref_run, int(jobs))
    return Report(native)


def _write(path, text):
    _native.write_output_file(os.fspath(path), text.encode("utf-8"))
