"""Diffing two runs from Python: the same pipeline, numbers and report as `qnn-debug diff`."""
import json
import os

from . import _native

# Options of one side (the CLI's --ref-* / --dev-* options), by keyword.
_SIDE_OPTIONS = ("format", "naming", "handle_map", "encodings", "debug_buffer", "etrecord",
                 "etrecord_method", "net_json", "input_list", "shapes")


class Report:
    """A diff report: `json` is the document `qnn-debug diff --json` writes
    (docs/report-schema.json); the properties are views of it."""

    def __init__(self, text):
        self.text = text
        self.json = json.loads(text)

    @property
    def verdict(self):
        return self.json["summary"]["verdict"]

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

    def summary_text(self, top=10):
        """The terminal summary `qnn-debug diff` prints."""
        return _native.render(self.text, "summary", top)

    # write_json, write_html, write_csv...: one method per file view of the library
    # (report/views.h), added below the class. Writes go through the CLI's own writer
    # (docs/output-files.md): a regular file is replaced whole, a symlink is followed, a device or
    # FIFO is written in place.

    def to_pandas(self):
        """One row per compared pair (the CSV's columns) as a pandas DataFrame."""
        import io

        import pandas as pd  # optional: only this method needs it
        return pd.read_csv(io.StringIO(_native.render(self.text, "csv")))

    def __repr__(self):
        s = self.summary
        return f"Report(verdict={self.verdict!r}, runs={len(self.runs)}, summary={s})"


def _add_view_writer(view):
    def write(self, path):
        _write(path, self.text if view == "json" else _native.render(self.text, view))
    write.__name__ = f"write_{view}"
    write.__doc__ = f"Writes the report's {view} view (`qnn-debug diff --{view} FILE`)."
    setattr(Report, write.__name__, write)


for _view in _native.views():
    _add_view_writer(_view)


def _side(path, options, prefix):
    spec = {"path": os.fspath(path)}
    for name in _SIDE_OPTIONS:
        value = options.pop(f"{prefix}_{name}", None)
        if value is not None:
            spec[name] = [os.fspath(v) for v in value] if name in ("encodings", "shapes") \
                else os.fspath(value) if name != "format" else value
    return spec


def diff(reference, device, *, policy=None, mapping=None, atol=None, rtol=None, ref_run=None,
         jobs=1, encodings=(), net_json=None, input_list=None, shapes=(), **side_options):
    """Compares `device` with `reference` and returns the Report.

    Each side is a store, an npz/npy, an ETDump or a qnn-net-run folder, as for `qnn-debug diff`.
    Side options are the CLI's with ref_/dev_ prefixes (dev_encodings=[...], ref_format="npz",
    dev_debug_buffer=...); encodings, net_json, input_list and shapes apply to both sides.
    A failing verdict is a report, not an error; bad input raises QnnDebugError.
    """
    ref = _side(reference, side_options, "ref")
    dev = _side(device, side_options, "dev")
    if side_options:
        raise TypeError(f"unknown options: {', '.join(sorted(side_options))}")
    for spec in (ref, dev):
        spec["encodings"] = spec.get("encodings", []) + [os.fspath(e) for e in encodings]
        spec["shapes"] = spec.get("shapes", []) + list(shapes)
        spec.setdefault("net_json", None if net_json is None else os.fspath(net_json))
        spec.setdefault("input_list", None if input_list is None else os.fspath(input_list))
    text = _native.diff(ref, dev, "" if policy is None else os.fspath(policy),
                        "" if mapping is None else os.fspath(mapping),
                        None if atol is None else float(atol), None if rtol is None else float(rtol),
                        ref_run, int(jobs))
    return Report(text)


def _write(path, text):
    _native.write_output_file(os.fspath(path), text.encode("utf-8"))
