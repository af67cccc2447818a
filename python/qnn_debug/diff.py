"""Diffing two runs from Python: the same pipeline, numbers and report as `qnn-debug diff`."""
import json
import os

from . import _native

# Every input format's options (the CLI's --ref-* / --dev-* options and those for both sides), by
# keyword: the native module's list, made from the formats' registry (importers/input_format.h).
_OPTIONS = {option["key"]: option for option in _native.input_options()}
# The diff's own settings (labels, policy, jobs, ...), as the CLI's: pipeline/request.h.
_SETTINGS = _native.diff_settings()


class Report:
    """A diff report. It wraps the typed report the library made (the same as `qnn-debug diff`'s):
    the views render from it without reading JSON back, and `text` / `json` (the document `qnn-debug
    diff --json` writes, docs/report-schema.json) are made once, when first asked for.
    `Report(text)` loads a saved report's text, as `qnn-debug report` loads a file."""

    def __init__(self, report):
        self._native = _native.Report.parse(report) if isinstance(report, str) else report
        self._doc = None
        self._sections = {}

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

    def _section(self, name):
        """A part of the typed report (summary, runs, ...), in the report file's JSON form."""
        if name not in self._sections:
            self._sections[name] = json.loads(self._native.section(name))
        return self._sections[name]

    @property
    def summary(self):
        return self._section("summary")

    @property
    def runs(self):
        """Every run pair, each group in full (the report file keeps less of a long decode's)."""
        return self._section("runs")

    @property
    def first_divergence(self):
        """The first diverging group of the first run pair (None when nothing diverges)."""
        return self._section("first_divergence")

    @property
    def groups(self):
        """The groups of the first run pair."""
        return self._section("groups")

    @property
    def devices(self):
        """The device labels, in the order diffed (one for a one-device report): the report's
        own, as every view shows them."""
        return self._native.devices()

    @property
    def device_matrix(self):
        """With several devices, the ops x devices rows, most disagreement first
        (docs/metrics.md, 6d); [] with one device."""
        return self._section("device_matrix")

    @property
    def steps(self):
        """One line per run pair (prefill, then a run per decode step): verdict, first
        divergence, worst group, the output's SQNR, top-1, and `tokens`, the token view of its
        logits (KL divergence, top-5/10 overlap, both sides' next token, the device's probability
        and rank of the reference's; docs/metrics.md, "Token view"), None when not ranked."""
        return self._section("steps")

    @property
    def aggregate(self):
        """Each group across the runs: worst and mean SQNR, its SQNR and verdict in every run."""
        return self._section("aggregate")

    @property
    def kv_cache(self):
        """Each KV-cache tensor's track over the runs: its position axis and heads, the
        positions (and head x position cells) that differ at each step, and where each range
        first differs (docs/metrics.md, "KV caches by head"); [] when no tensor is a cache."""
        return self._section("kv_cache")

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
        return f"Report(verdict={self.verdict!r}, runs={self._native.run_count()}, summary={s})"


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


def _settings(given):
    """The diff's own settings in `given` (removed from it), as text, by key."""
    found = {}
    for setting in _SETTINGS:
        value = given.pop(setting["key"], None)
        if value is None:
            continue
        values = list(value) if setting["many"] else [value]
        convert = os.fspath if setting["path"] else _text
        found[setting["key"]] = [convert(v) for v in values]
    return found


def _text(value):
    """A setting's value as the request parses it: numbers exactly (repr round-trips floats)."""
    return repr(value) if isinstance(value, float) else str(value)


def diff(reference, device, *, sim=None, isolated=None, **options):
    """Compares `device` with `reference` and returns the Report.

    Each side is a store, an npz/npy, an ETDump or a qnn-net-run folder, as for `qnn-debug diff`.
    device: one input, or a list of them (several backends, QNN versions or SoCs), each compared
    with the reference into one report with an ops x devices matrix (`qnn-debug diff REF DEV1
    DEV2 ...`).
    sim: a quantized simulation of the reference (`capture_torch(..., encodings=...)`), and
    isolated: a replay of each op on the device's inputs (`replay`, one device only), as `--sim` /
    `--isolated`: each group then also has its error parts (docs/metrics.md, "Quantization or
    kernel?").
    The diff's settings are the CLI's (`_native.diff_settings()`, the same list): labels=[...]
    (their names in the report, in order; default: each store's backend, SoC and producer),
    policy, mapping (`--map`), atol, rtol, ref_run, jobs (worker threads, 0 for one per core: the
    report is the same for any) and chunk_kib.
    Side options are the CLI's with ref_/dev_ prefixes (dev_encodings=[...], ref_format="npz",
    dev_debug_buffer=...; the dev_ ones apply to every device); encodings, net_json, input_list
    and shapes apply to both sides.
    A failing verdict is a report, not an error; bad input raises QnnDebugError.
    """
    devices = list(device) if isinstance(device, (list, tuple)) else [device]
    if not devices:
        raise ValueError("diff: no device input to compare with the reference")
    settings = _settings(options)
    sides = {prefix: (options.pop(f"{prefix}_format", None),
                      _options(options, f"{prefix}_", both_sides=False))
             for prefix in ("ref", "dev")}
    shared = _options(options, "", both_sides=True)
    if options:
        raise TypeError(f"unknown options: {', '.join(sorted(options))}")
    native = _native.diff(os.fspath(reference), *sides["ref"], [os.fspath(p) for p in devices],
                          *sides["dev"], shared, "" if sim is None else os.fspath(sim),
                          "" if isolated is None else os.fspath(isolated), settings)
    return Report(native)


def _write(path, text):
    _native.write_output_file(os.fspath(path), text.encode("utf-8"))
