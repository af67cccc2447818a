"""A fix you can trust: proposed changes to a model's encodings, predicted on the host before the
device, ranked by what they recover, and written in the forms the toolchains take.

- ``predict(model, inputs, encodings, changes)`` re-simulates the whole model (the quantized
  simulation of ``capture_torch(..., encodings=...)``) with the changes applied to the encodings
  the device used, and diffs it against the float reference with the same C++ judge as
  ``qnn-debug diff``: every op's SQNR and the output's (top-1 for a classifier, the token view for
  a decoder), per run and over all runs. That is the fix's promise: the figure for the chain,
  not for the op alone on a perfect input.
- ``search(model, inputs, encodings, target)`` ranks candidate changes (a range refitted to the
  reference, 16 bits, float) by the output SQNR each recovers per unit of cost, then adds them
  greedily, each step predicted, until the target holds, and drops any change the others make
  unneeded; it says when the target cannot be reached.
- ``write_qnn_overrides`` writes changes as the QNN converter's ``--quantization_overrides``
  JSON (AIMET's encoding format 0.6.1); ``write_executorch_settings`` as the per-node settings of
  ExecuTorch's ``QnnQuantizer``.

docs/fix.md has the rules, the file formats and the sources they follow.
"""
from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _native, simulate
from .diff import Report, diff
from .simulate import Encoding
from .store import Store

__all__ = ["CHANGE_KINDS", "Change", "Costs", "Prediction", "Search", "Target", "apply_changes",
           "predict", "search", "write_executorch_settings", "write_qnn_overrides"]

# The kinds of change, declared once: the prediction file, the writers and the docs follow it.
CHANGE_KINDS = ("encode", "widen", "float")

# The reference's finite range is what a refit covers; a grid that misses either end by more than
# this share of its range, or spans more than COARSE_RATIO times the range, is worth refitting.
_MISS_SHARE = 0.01
_COARSE_RATIO = 1.5
_WIDE_BITS = 16  # the width search proposes for a tensor narrower than it
_MIN_GAIN_DB = 0.1  # a step that recovers less is not taken


@dataclass(frozen=True)
class Change:
    """One change to the encodings, keyed by the tensor's name in the encodings file (the
    device's name for it).

    kind "encode": a new grid over [min, max] (widened to hold 0.0) in `bits` (0: the tensor's
    current width); "widen": the current range in `bits`; "float": no quantization (the tensor,
    and so its op, computed in floating point)."""

    kind: str
    tensor: str
    bits: int = 0
    min: Optional[float] = None
    max: Optional[float] = None

    def __post_init__(self):
        if self.kind not in CHANGE_KINDS:
            raise ValueError(f"change kind {self.kind!r}: not one of {', '.join(CHANGE_KINDS)}")
        if self.kind == "encode" and (self.min is None or self.max is None
                                      or not math.isfinite(self.min)
                                      or not math.isfinite(self.max) or self.min > self.max):
            raise ValueError(f"encode {self.tensor!r}: needs finite min <= max, got "
                             f"[{self.min}, {self.max}]")
        if self.kind != "float" and not 0 <= self.bits <= 32:
            raise ValueError(f"{self.kind} {self.tensor!r}: bits {self.bits} outside 0..32")

    @classmethod
    def encode(cls, tensor: str, min: float, max: float, bits: int = 0) -> "Change":
        return cls("encode", tensor, int(bits), float(min), float(max))

    @classmethod
    def widen(cls, tensor: str, bits: int = _WIDE_BITS) -> "Change":
        return cls("widen", tensor, int(bits))

    @classmethod
    def keep_float(cls, tensor: str) -> "Change":
        return cls("float", tensor)

    def __str__(self) -> str:
        if self.kind == "float":
            return f"{self.tensor}: float"
        width = f"{self.bits} bits" if self.bits else "same bits"
        if self.kind == "widen":
            return f"{self.tensor}: {width}, same range"
        return f"{self.tensor}: [{self.min:.6g}, {self.max:.6g}], {width}"

    def to_json(self) -> dict:
        doc = {"kind": self.kind, "tensor": self.tensor}
        if self.kind != "float":
            doc["bits"] = self.bits
        if self.kind == "encode":
            doc.update(min=self.min, max=self.max)
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "Change":
        return cls(doc["kind"], doc["tensor"], int(doc.get("bits", 0)), doc.get("min"),
                   doc.get("max"))


# ---- encodings with changes applied --------------------------------------------------------

def _bits_of(encoding: Encoding) -> int:
    return (encoding.qmax - encoding.qmin + 1).bit_length() - 1


def _signed(encoding: Encoding) -> bool:
    return encoding.qmin < 0


def _grid(encoding: Encoding, ranges: Sequence[Tuple[float, float]], bits: int) -> Encoding:
    """`encoding` re-gridded: each channel's [lo, hi] (widened to hold 0.0) in `bits`, of the
    same signedness, axis and layout; QNN's offset convention."""
    signed = _signed(encoding)
    qmin = -(1 << (bits - 1)) if signed else 0
    steps = (1 << bits) - 1
    scales, offsets = [], []
    for lo, hi in ranges:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = (hi - lo) / steps if hi > lo else 1.0
        scales.append(scale)
        offsets.append(int(round(lo / scale)) - qmin)
    width = next(w for w in (8, 16, 32) if w >= bits)
    entry = {"name": encoding.name, "source": encoding.source,
             "dtype": f"{'S' if signed else 'U'}FIXED_POINT_{width}",
             "bitwidth": bits if bits < width else 0, "scales": scales, "offsets": offsets,
             "axis": encoding.axis, "axis_order": list(encoding.axis_order)}
    return simulate._encoding(entry)


def _real_ranges(encoding: Encoding) -> List[Tuple[float, float]]:
    """Each channel's real range: [(qmin + offset) * scale, (qmax + offset) * scale]."""
    return [((encoding.qmin + o) * s, (encoding.qmax + o) * s)
            for s, o in zip(encoding.scales, encoding.offsets)]


def changed_encoding(encoding: Encoding, change: Change) -> Optional[Encoding]:
    """What `change` makes of `encoding` (None: float)."""
    if change.kind == "float":
        return None
    bits = change.bits or _bits_of(encoding)
    if change.kind == "widen":
        return _grid(encoding, _real_ranges(encoding), bits)
    return _grid(encoding, [(change.min, change.max)] * len(encoding.scales), bits)


def apply_changes(table: Dict[str, Optional[Encoding]], changes: Iterable[Change]
                  ) -> Dict[str, Optional[Encoding]]:
    """A copy of the encodings `table` (simulate.load_encodings) with `changes` applied. A change
    naming no quantized tensor of the table, or a tensor changed twice, is a ValueError."""
    result = dict(table)
    seen = set()
    for change in changes:
        if change.tensor in seen:
            raise ValueError(f"{change.tensor!r} is changed twice: give one change per tensor")
        seen.add(change.tensor)
        encoding = table.get(change.tensor)
        if encoding is None:
            why = "has no encoding (it is float already)" if change.tensor in table else \
                "is not in the encodings"
            raise ValueError(f"change {change}: the tensor {why}")
        result[change.tensor] = changed_encoding(encoding, change)
    return result


# ---- what a prediction holds ---------------------------------------------------------------

def _finite(value) -> float:
    return -math.inf if value is None else float(value)


@dataclass
class Prediction:
    """The whole model re-simulated with `changes`, judged against the float reference."""

    changes: Tuple[Change, ...]
    report: Report

    @property
    def runs(self) -> List[dict]:
        """Per run: the output group, its SQNR and verdict, top-1 and the token view (the
        report's `steps`)."""
        return self.report.steps

    @property
    def output_sqnr_db(self) -> float:
        """The output's SQNR in the worst run (-inf when a run has none)."""
        return min((_finite(step["output_sqnr_db"]) for step in self.runs), default=-math.inf)

    @property
    def mean_output_sqnr_db(self) -> float:
        values = [_finite(step["output_sqnr_db"]) for step in self.runs]
        return sum(values) / len(values) if values else -math.inf

    @property
    def top1(self) -> Optional[float]:
        """The share of runs whose top-1 agrees (each run's own share of rows), None when the
        output is not ranked."""
        values = [step["top1"] for step in self.runs if step.get("top1") is not None]
        return sum(values) / len(values) if values else None

    @property
    def kl_divergence(self) -> Optional[float]:
        """The token view's largest KL divergence over the runs (each run's worst row), None
        when the output is not ranked."""
        values = [step["tokens"]["kl_max"] for step in self.runs if step.get("tokens")]
        return max(values) if values else None

    @property
    def verdict(self) -> str:
        return self.report.verdict

    @property
    def ops(self) -> List[dict]:
        """Every group across the runs (the report's `aggregate`): id, SQNR and verdict per
        run, worst and mean."""
        return self.report.aggregate

    def tensor_sqnr_db(self, name: str) -> List[Optional[float]]:
        """The SQNR of the stored (reference) tensor `name` in each run (None where a run did
        not compare it)."""
        found = []
        for run in self.report.runs:
            pair = next((p for g in run["groups"] for p in g["pairs"]
                         if p["reference"]["name"] == name), None)
            found.append(None if pair is None or pair["metrics"] is None
                         else pair["metrics"].get("sqnr_db"))
        return found

    def op(self, group_id: str) -> dict:
        for entry in self.ops:
            if entry["id"] == group_id:
                return entry
        raise KeyError(f"no group {group_id!r} in the prediction")

    def summary(self) -> str:
        top1 = "" if self.top1 is None else f", top-1 {self.top1:.0%}"
        return (f"{len(self.changes)} change(s): output {self.output_sqnr_db:.2f} dB worst, "
                f"{self.mean_output_sqnr_db:.2f} dB mean{top1}, verdict {self.verdict}")

    def to_json(self) -> dict:
        return {"changes": [c.to_json() for c in self.changes],
                "output": {"worst_sqnr_db": _json_number(self.output_sqnr_db),
                           "mean_sqnr_db": _json_number(self.mean_output_sqnr_db),
                           "top1": self.top1, "kl_divergence": self.kl_divergence,
                           "verdict": self.verdict},
                "runs": [{key: step.get(key) for key in
                          ("device_run", "output", "output_sqnr_db", "output_verdict", "top1",
                           "tokens")} for step in self.runs],
                "ops": [{"id": op["id"], "worst_sqnr_db": op["worst_sqnr_db"],
                         "mean_sqnr_db": op["mean_sqnr_db"],
                         "per_run": [{"device_run": r["device_run"], "sqnr_db": r["sqnr_db"],
                                      "verdict": r["verdict"]} for r in op["per_run"]]}
                        for op in self.ops]}


def _json_number(value: float):
    return value if math.isfinite(value) else None


# ---- the simulator -------------------------------------------------------------------------

PRECISIONS = ("float64", "float32")


def _widened(value, torch):
    """`value` with every floating tensor in it as float64 (containers rebuilt)."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v, torch) for v in value)
    if isinstance(value, dict):
        return {k: _widened(v, torch) for k, v in value.items()}
    return value


class _Simulator:
    """The model traced once, its stored names learned once, the reference captured once: each
    `predict(changes)` is one quantized capture of every run and one diff.

    precision "float64" (the default) runs the simulation's ops in float64: the device's integer
    kernels accumulate exactly, and float64 reproduces those sums where float32 rounds them and
    moves codes that sit at a rounding tie, noise of the arithmetic, not of the encodings (on a
    10-class output it moved one run's SQNR by 3 dB). "float32" runs the model as given."""

    def __init__(self, model, inputs, encodings, reference, folder, diff_options,
                 precision="float64"):
        from .torch_capture import (_graph_module, _import_torch, _normalize_runs,
                                    _stored_keys)

        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: not one of {', '.join(PRECISIONS)}")
        torch = _import_torch("qnn_debug.fix")
        self.torch = torch
        self.table = simulate.encoding_table(encodings)
        self.runs, self.run_names = _normalize_runs(inputs, None, torch)
        gm, lifted, fixed = _graph_module(model, torch, "qnn_debug.fix")
        self.model_name = type(model).__name__
        keys = _stored_keys(gm, lifted, fixed, self.runs[0], torch)
        if precision == "float64":
            gm, lifted = copy.deepcopy(gm).double(), _widened(dict(lifted), torch)
            self.sim_runs = [_widened(args, torch) for args in self.runs]
        else:
            self.sim_runs = self.runs
        self.graph = (gm, lifted, fixed)
        self.matched, _, _ = simulate.match_encodings(
            [(name, handles, index) for name, handles, index, _ in keys.keys], self.table,
            keys.floating)
        self.folder = folder
        self.diff_options = dict(diff_options)
        if reference is None:
            from .torch_capture import capture_torch

            reference = os.path.join(folder, "reference.h5")
            capture_torch(model, self.runs, reference, run_names=self.run_names)
        self.reference = os.fspath(reference)
        self.evaluations = 0

    def stored_name(self, tensor: str) -> Optional[str]:
        """The stored (reference) name the encodings' `tensor` matched."""
        return next((s for s, e in self.matched.items() if e.name == tensor), None)

    def simulate(self, changes: Sequence[Change], path: str) -> None:
        from . import StoreWriter
        from .torch_capture import _run_fx, _Sink

        table = apply_changes(self.table, changes)
        by_stored = {stored: table[e.name] for stored, e in self.matched.items()
                     if table[e.name] is not None}
        with StoreWriter(path, producer="qnn_debug.fix prediction", backend="sim",
                         model=self.model_name, naming="executorch-qnn") as writer:
            sink = _Sink(writer, self.torch)
            sink.encode = simulate.FakeQuantizer(by_stored)
            with self.torch.no_grad():
                _run_fx(*self.graph, self.sim_runs, self.run_names, writer, sink, self.torch)

    def predict(self, changes: Sequence[Change]) -> Prediction:
        changes = tuple(changes)
        path = os.path.join(self.folder, f"prediction_{self.evaluations}.h5")
        self.simulate(changes, path)
        self.evaluations += 1
        try:
            report = diff(self.reference, path, **self.diff_options)
        finally:
            os.unlink(path)
        return Prediction(changes, report)


def _folder(out):
    """(the folder stores are written in, the TemporaryDirectory to clean up or None)."""
    if out is not None:
        os.makedirs(out, exist_ok=True)
        return os.fspath(out), None
    temporary = tempfile.TemporaryDirectory(prefix="qnn_debug_fix_")
    return temporary.name, temporary


def predict(model, inputs, encodings, changes: Sequence[Change] = (), *, reference=None,
            out=None, precision: str = "float64", **diff_options) -> Prediction:
    """Re-simulates `model` on `inputs` (one element per run, as for capture_torch) with the
    encodings the device used (`encodings`: paths, as for capture_torch, or a table from
    simulate.load_encodings) changed by `changes`, and diffs it against the float reference
    (`reference`: a store of the float model on the same inputs; captured when None).
    diff_options are qnn_debug.diff's (policy=, logits=, ...). `out`: a folder to keep the
    reference in (default: a temporary one). precision: the simulation's arithmetic, "float64"
    (default: the device's exact integer sums) or "float32" (the model as given). Returns the
    Prediction."""
    folder, temporary = _folder(out)
    try:
        return _Simulator(model, inputs, encodings, reference, folder, diff_options, precision
                          ).predict(changes)
    finally:
        if temporary is not None:
            temporary.cleanup()


# ---- the search ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """What the search must reach; every given part must hold. output_sqnr_db: the output's SQNR
    in every run at least this; top1: the top-1 agreement over the runs at least this;
    kl_divergence: the token view's KL divergence (nats) in every run at most this; passes: the
    report's verdict is pass under the diff's policy (the policy= option)."""

    output_sqnr_db: Optional[float] = None
    top1: Optional[float] = None
    kl_divergence: Optional[float] = None
    passes: bool = False

    def __post_init__(self):
        if self.output_sqnr_db is None and self.top1 is None and self.kl_divergence is None \
                and not self.passes:
            raise ValueError("Target: give output_sqnr_db, top1, kl_divergence or passes=True")

    def shortfalls(self, prediction: Prediction) -> List[str]:
        """What `prediction` misses of the target, in words ([] when it is met)."""
        missing = []
        if self.output_sqnr_db is not None and \
                not prediction.output_sqnr_db >= self.output_sqnr_db:
            missing.append(f"output {prediction.output_sqnr_db:.2f} dB < "
                           f"{self.output_sqnr_db:g} dB")
        if self.top1 is not None:
            top1 = prediction.top1
            if top1 is None:
                missing.append("the output is not ranked: no top-1 to judge")
            elif top1 < self.top1:
                missing.append(f"top-1 {top1:.0%} < {self.top1:.0%}")
        if self.kl_divergence is not None:
            kl = prediction.kl_divergence
            if kl is None:
                missing.append("the output is not ranked: no KL divergence to judge")
            elif not kl <= self.kl_divergence:
                missing.append(f"KL divergence {kl:.3g} > {self.kl_divergence:g}")
        if self.passes and prediction.verdict != "pass":
            missing.append(f"verdict {prediction.verdict}")
        return missing

    def met(self, prediction: Prediction) -> bool:
        return not self.shortfalls(prediction)

    def __str__(self) -> str:
        parts = []
        if self.output_sqnr_db is not None:
            parts.append(f"output >= {self.output_sqnr_db:g} dB")
        if self.top1 is not None:
            parts.append(f"top-1 >= {self.top1:.0%}")
        if self.kl_divergence is not None:
            parts.append(f"KL <= {self.kl_divergence:g}")
        if self.passes:
            parts.append("the policy passes")
        return " and ".join(parts)


@dataclass(frozen=True)
class Costs:
    """What a change costs: 1 for any change, plus the bits it adds per element, plus
    `float_penalty` for a tensor taken off the quantized path (its op leaves the integer
    accelerator path: a CPU fallback, or a float kernel)."""

    float_penalty: float = 16.0
    float_bits: int = 32

    def of(self, change: Change, encoding: Encoding) -> float:
        now = _bits_of(encoding)
        if change.kind == "float":
            return 1 + max(self.float_bits - now, 0) + self.float_penalty
        return 1 + max((change.bits or now) - now, 0)


@dataclass
class Ranked:
    """A candidate alone: its change, cost, the output SQNR it recovers and its prediction."""

    change: Change
    cost: float
    gain_db: float
    prediction: Prediction

    @property
    def gain_per_cost(self) -> float:
        return self.gain_db / self.cost


@dataclass
class Step:
    """A step of the search: the change added (or dropped) and the prediction after it."""

    action: str  # "add" or "drop"
    change: Change
    prediction: Prediction


@dataclass
class Search:
    """What `search` found: the baseline (no change), every candidate ranked, the steps, the
    final prediction, whether the target holds and, when it does not, why."""

    target: Target
    baseline: Prediction
    ranked: List[Ranked]
    steps: List[Step]
    final: Prediction
    reached: bool
    shortfalls: List[str]
    table: Dict[str, Optional[Encoding]] = field(repr=False)
    node_names: Dict[str, str] = field(repr=False)  # encodings' name -> stored (reference) name
    evaluations: int = 0

    @property
    def changes(self) -> Tuple[Change, ...]:
        return self.final.changes

    def summary(self) -> str:
        lines = [f"target: {self.target}", f"baseline: {self.baseline.summary()}"]
        for step in self.steps:
            lines.append(f"{step.action} {step.change}: {step.prediction.summary()}")
        if self.reached:
            lines.append(f"reached with {len(self.changes)} change(s)")
        else:
            lines.append("cannot reach the target with these candidates: " +
                         "; ".join(self.shortfalls))
        return "\n".join(lines)

    def write_qnn_overrides(self, path) -> None:
        write_qnn_overrides(path, self.changes, self.table)

    def write_executorch_settings(self, path) -> None:
        write_executorch_settings(path, self.changes, self.node_names)

    def to_json(self) -> dict:
        return {"version": 1, "target": {"output_sqnr_db": self.target.output_sqnr_db,
                                         "top1": self.target.top1,
                                         "kl_divergence": self.target.kl_divergence,
                                         "passes": self.target.passes},
                "reached": self.reached, "shortfalls": self.shortfalls,
                "baseline": self.baseline.to_json(),
                "ranked": [{"change": r.change.to_json(), "cost": r.cost,
                            "gain_db": _json_number(r.gain_db),
                            "output_sqnr_db": _json_number(r.prediction.output_sqnr_db)}
                           for r in self.ranked],
                "steps": [{"action": s.action, "change": s.change.to_json(),
                           "output_sqnr_db": _json_number(s.prediction.output_sqnr_db),
                           "top1": s.prediction.top1} for s in self.steps],
                "prediction": self.final.to_json(), "evaluations": self.evaluations}

    def write_json(self, path) -> None:
        _write_text(path, json.dumps(self.to_json(), indent=1) + "\n")


def _finite_range(store: Store, name: str) -> Optional[Tuple[float, float]]:
    """The stored tensor's finite [min, max] over every run of the reference."""
    low, high = math.inf, -math.inf
    for run in store.runs:
        tensor = next((t for t in run.tensors if t.name == name), None)
        if tensor is None:
            continue
        values = tensor.numpy(dequantize=True)
        values = values[np.isfinite(values)]
        if values.size:
            low, high = min(low, float(values.min())), max(high, float(values.max()))
    return (low, high) if low <= high else None


def _needs_refit(encoding: Encoding, low: float, high: float) -> bool:
    """The grid misses the reference's range, or is much coarser than it (per tensor only)."""
    if len(encoding.scales) != 1:
        return False
    grid_low, grid_high = _real_ranges(encoding)[0]
    span = max(high - low, 1e-30)
    missed = max(grid_low - low, high - grid_high, 0.0) > _MISS_SHARE * span
    return missed or (grid_high - grid_low) > _COARSE_RATIO * (max(high, 0) - min(low, 0))


def candidate_changes(table, tensor: str, reference_range, hint_ranges=()) -> List[Change]:
    """The changes the search tries for one tensor: its range refitted to the reference (when
    the grid misses or is coarse), each fitted encoding a hint suggested, the reference's range
    at 16 bits (when narrower), and float."""
    encoding = table[tensor]
    bits = _bits_of(encoding)
    found: List[Change] = []
    if reference_range is not None:
        low, high = reference_range
        if _needs_refit(encoding, low, high):
            found.append(Change.encode(tensor, low, high, bits))
        if bits < _WIDE_BITS:
            found.append(Change.encode(tensor, low, high, _WIDE_BITS) if len(encoding.scales) == 1
                         else Change.widen(tensor))
    for low, high, hint_bits in hint_ranges:
        change = Change.encode(tensor, low, high, hint_bits or bits)
        if change not in found:
            found.append(change)
    found.append(Change.keep_float(tensor))
    return found


def _introducing_tensors(prediction: Prediction, simulator: _Simulator) -> List[str]:
    """The encodings' tensors whose groups add the most noise in the simulation (the report's
    introducers, each group's largest over the runs), most first."""
    noise: Dict[str, float] = {}
    for run in prediction.report.runs:
        for entry in run["introducers"]:
            noise[entry["id"]] = max(noise.get(entry["id"], -math.inf),
                                        _finite(entry.get("added_noise_db")))
    by_group = {}
    for run in prediction.report.runs:
        for group in run["groups"]:
            by_group.setdefault(group["id"], [p["reference"]["name"] for p in group["pairs"]])
    ordered = []
    for group_id in sorted(noise, key=lambda g: -noise[g]):
        for stored in by_group.get(group_id, ()):
            encoding = simulator.matched.get(stored)
            if encoding is not None and encoding.name not in ordered:
                ordered.append(encoding.name)
    return ordered


def _hint_ranges(device_report: Optional[Report]) -> Dict[str, List[Tuple[float, float, int]]]:
    """The fitted encodings of a device diff's clipping and coarse_encoding hints (and their
    16-bit `wider` ones), by the device tensor's name: per bit width, the union of the ranges
    fitted in every run that hinted it (as --suggest-overrides writes them)."""
    found: Dict[str, Dict[int, Tuple[float, float]]] = {}
    if device_report is None:
        return {}
    for run in device_report.runs:
        for group in run["groups"]:
            names = {p["reference"]["name"]: p["device"]["name"] for p in group["pairs"]}
            for hint in group["hints"]:
                evidence = hint.get("evidence") or {}
                tensor = names.get(hint.get("tensor"))
                for fitted in (evidence.get("fitted"),
                               (evidence.get("wider") or {}).get("encoding")):
                    if not fitted or not tensor:
                        continue
                    by_bits = found.setdefault(tensor, {})
                    low, high = by_bits.get(fitted["bitwidth"], (math.inf, -math.inf))
                    by_bits[fitted["bitwidth"]] = (min(low, fitted["min"]),
                                                   max(high, fitted["max"]))
    return {tensor: [(low, high, bits) for bits, (low, high) in sorted(by_bits.items())]
            for tensor, by_bits in found.items()}


def search(model, inputs, encodings, target: Target, *, reference=None, candidates=None,
           max_tensors: int = 12, max_steps: int = 8, costs: Costs = Costs(),
           device_report: Optional[Report] = None, out=None, precision: str = "float64",
           **diff_options) -> Search:
    """Finds a small set of changes that brings the re-simulated model within `target`.

    1. The baseline: the simulation with no change (predict).
    2. Candidates: `candidates` (Changes) when given; else, for each of the `max_tensors`
       tensors whose ops add the most noise in the baseline (and every tensor a
       `device_report`'s clipping or coarse_encoding hint names), candidate_changes.
    3. Greedy rounds, at most `max_steps`, while the target is not met: every remaining
       candidate is predicted added to the changes chosen so far (replacing a change of the
       same tensor) and ranked by the worst run's output SQNR it recovers per unit of cost
       (Costs); the best is taken when it recovers at least 0.1 dB. Re-ranking every round
       matters: a dominant fault (a clipping encoding) hides what the others recover.
       Search.ranked is the first round's ranking (each candidate alone).
    4. Once met, each change is dropped in turn when the target still holds without it.
    Every step's prediction is kept (Search.steps). When the candidates are spent without
    meeting the target, Search.reached is False and Search.shortfalls says what is missing.
    diff_options and `reference`, `out`, `precision` are as for predict."""
    folder, temporary = _folder(out)
    try:
        simulator = _Simulator(model, inputs, encodings, reference, folder, diff_options,
                               precision)
        baseline = simulator.predict(())
        pool = list(candidates) if candidates is not None else \
            _default_candidates(simulator, baseline, max_tensors, device_report)
        ranked, steps, final = _greedy(simulator, baseline, pool, costs, target, max_steps)
        return Search(target=target, baseline=baseline, ranked=ranked, steps=steps, final=final,
                      reached=target.met(final), shortfalls=target.shortfalls(final),
                      table=simulator.table,
                      node_names={e.name: s for s, e in simulator.matched.items()},
                      evaluations=simulator.evaluations)
    finally:
        if temporary is not None:
            temporary.cleanup()


def _default_candidates(simulator, baseline, max_tensors, device_report) -> List[Change]:
    hints = _hint_ranges(device_report)
    tensors = _introducing_tensors(baseline, simulator)[:max_tensors]
    tensors += [t for t in hints if t not in tensors and simulator.table.get(t) is not None]
    reference = Store(simulator.reference)
    pool = []
    for tensor in tensors:
        stored = simulator.stored_name(tensor)
        span = _finite_range(reference, stored) if stored else None
        pool += candidate_changes(simulator.table, tensor, span, hints.get(tensor, ()))
    return pool


def _rank(simulator, current: Prediction, chosen: Dict[str, Change], pool, costs
          ) -> List[Ranked]:
    """Each candidate added to `chosen` (replacing a change of the same tensor), predicted and
    ranked by the output SQNR it recovers over `current` per unit of its cost."""
    ranked = []
    for change in pool:
        encoding = simulator.table.get(change.tensor)
        if encoding is None:
            raise ValueError(f"candidate {change}: the tensor has no encoding")
        trial = dict(chosen)
        trial[change.tensor] = change
        prediction = simulator.predict(tuple(trial.values()))
        gain = prediction.output_sqnr_db - current.output_sqnr_db
        if math.isnan(gain):  # -inf to -inf: nothing recovered
            gain = 0.0
        ranked.append(Ranked(change, costs.of(change, encoding), gain, prediction))
    ranked.sort(key=lambda r: (-r.gain_per_cost, r.cost))
    return ranked


def _greedy(simulator, baseline, pool, costs, target, max_steps
            ) -> Tuple[List[Ranked], List[Step], Prediction]:
    """(the first round's ranking, the steps, the final prediction): see search."""
    chosen: Dict[str, Change] = {}
    current, steps, first_round = baseline, [], None
    remaining = list(pool)
    for _ in range(max_steps):
        if target.met(current) or not remaining:
            break
        ranked = _rank(simulator, current, chosen, remaining, costs)
        if first_round is None:
            first_round = ranked
        best = next((r for r in ranked if r.gain_db >= _MIN_GAIN_DB), None)
        if best is None:
            break
        chosen[best.change.tensor] = best.change
        current = best.prediction
        steps.append(Step("add", best.change, current))
        remaining.remove(best.change)
    if target.met(current):
        for tensor in list(chosen):
            if len(chosen) == 1:
                break
            rest = {t: c for t, c in chosen.items() if t != tensor}
            trial = simulator.predict(tuple(rest.values()))
            if target.met(trial):
                steps.append(Step("drop", chosen[tensor], trial))
                chosen, current = rest, trial
    return first_round or [], steps, current


# ---- writers -------------------------------------------------------------------------------

def _write_text(path, text: str) -> None:
    _native.write_output_file(os.fspath(path), text.encode("utf-8"))


def _aimet_encoding(encoding: Encoding) -> List[dict]:
    """AIMET 0.6.1 encodings (one per channel) of an integer encoding: the unsigned grid
    real = (q + offset) * scale, q in [0, 2^bitwidth - 1], min/max its ends."""
    bits = _bits_of(encoding)
    entries = []
    for scale, offset in zip(encoding.scales, encoding.offsets):
        unsigned = offset + encoding.qmin  # the signed grid's offset as the unsigned grid's
        entries.append({"bitwidth": bits, "dtype": "int", "is_symmetric": "False",
                        "max": ((1 << bits) - 1 + unsigned) * scale, "min": unsigned * scale,
                        "offset": unsigned, "scale": scale})
    return entries


def qnn_overrides(changes: Iterable[Change], table: Dict[str, Optional[Encoding]]) -> dict:
    """The --quantization_overrides document of `changes` (see write_qnn_overrides)."""
    activations = {}
    for change in changes:
        encoding = table.get(change.tensor)
        if encoding is None:
            raise ValueError(f"change {change}: the tensor has no encoding")
        changed = changed_encoding(encoding, change)
        activations[change.tensor] = [{"bitwidth": 16, "dtype": "float"}] if changed is None \
            else _aimet_encoding(changed)
    return {"version": "0.6.1", "activation_encodings": dict(sorted(activations.items())),
            "param_encodings": {}}


def write_qnn_overrides(path, changes: Iterable[Change], table) -> None:
    """Writes `changes` as the QNN converter's --quantization_overrides file: AIMET's encoding
    format 0.6.1, activation encodings keyed by the encodings file's tensor names (the
    converter's), an integer change as {bitwidth, dtype "int", is_symmetric "False", min, max,
    offset, scale}, a float one as {bitwidth 16, dtype "float"}."""
    _write_text(path, json.dumps(qnn_overrides(changes, table), indent=2) + "\n")


def executorch_settings(changes: Iterable[Change], node_names: Dict[str, str]) -> str:
    """The Python text of write_executorch_settings."""
    discard, sixteen, ranges = [], [], {}
    for change in changes:
        node = node_names.get(change.tensor, change.tensor)
        if change.kind == "float":
            discard.append(node)
            continue
        if change.bits == 16:
            sixteen.append(node)
        elif change.bits not in (0, 8):
            raise ValueError(f"change {change}: ExecuTorch's QnnQuantizer takes 8- or 16-bit "
                             "activations (QuantDtype use_8a8w / use_16a8w)")
        if change.kind == "encode":
            ranges[node] = [change.min, change.max]
    return _EXECUTORCH_TEMPLATE.format(discard=json.dumps(sorted(discard)),
                                       sixteen=json.dumps(sorted(sixteen)),
                                       ranges=json.dumps(dict(sorted(ranges.items())), indent=1))


_EXECUTORCH_TEMPLATE = '''\
"""Per-node settings for ExecuTorch's QnnQuantizer, written by qnn_debug.fix.

Node names are the fx node names of the graph the quantizer annotates (what capture_torch stored
for the model given to qnn_debug.fix). In your export script, before prepare_pt2e:

    import qnn_debug_settings
    qnn_debug_settings.apply(quantizer)

backends/qualcomm/quantizer/quantizer.py: add_discard_nodes(names) leaves nodes unannotated
(not quantized: computed in floating point); set_submodule_qconfig_list([(predicate,
ModuleQConfig)]) gives the nodes a predicate matches their own config, the first match winning.
"""
FLOAT_NODES = {discard}
SIXTEEN_BIT_NODES = {sixteen}
# The ranges the prediction assumed for these nodes' outputs ([min, max]). The quantizer takes
# ranges from its observers: calibrate on data that covers them.
RANGES = {ranges}


def apply(quantizer):
    """Adds these settings to `quantizer`, keeping the ones it has."""
    from executorch.backends.qualcomm.quantizer.quantizer import ModuleQConfig, QuantDtype

    quantizer.add_discard_nodes(sorted(set(quantizer.discard_nodes) | set(FLOAT_NODES)))
    if SIXTEEN_BIT_NODES:
        base = quantizer.default_quant_config
        wide = ModuleQConfig(quant_dtype=QuantDtype.use_16a8w, is_qat=base.is_qat,
                             is_conv_per_channel=base.is_conv_per_channel,
                             is_linear_per_channel=base.is_linear_per_channel,
                             act_observer=base.act_observer)
        chosen = set(SIXTEEN_BIT_NODES)
        quantizer.set_submodule_qconfig_list(
            [(lambda node: node.name in chosen, wide)] + list(quantizer.submodule_qconfig_list))
    return quantizer
'''


def write_executorch_settings(path, changes: Iterable[Change], node_names: Dict[str, str]) -> None:
    """Writes `changes` as a Python module of per-node settings for ExecuTorch's QnnQuantizer
    (its `apply(quantizer)` adds them): float changes as discarded nodes, 16-bit changes as a
    use_16a8w ModuleQConfig for those nodes. `node_names` maps the encodings' names to the fx
    node names (Search.node_names)."""
    _write_text(path, executorch_settings(changes, node_names))
