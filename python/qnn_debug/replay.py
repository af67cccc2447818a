"""Replay: every op of a PyTorch model run alone on the device's values of its inputs.

``replay(model, inputs, device_store, path)`` runs the model's fx graph node by node, as
``capture_torch(naming="fx")`` does, but each node reads, for every input tensor the device
store has, the DEVICE's value (dequantized, in the reference layout) instead of the value the
reference computed upstream. The store it writes has exactly the names, handles, output indices
and roles of ``capture_torch(naming="fx")``, so ``qnn_debug.diff(replay_store, device_store)``
aligns as a reference capture does, but each group's error is the error its own op added on the
device: an op that only inherits error from upstream compares exact (or at the quantization
step with ``encodings``).

- Device tensors are matched to the stored names by ``compare::align`` (``_native.
  align_tensors``), the diff's own alignment: debug handles first, then names.
- An input with no device counterpart (fused away on the device: conv+relu stored only as relu)
  is the value replayed for it in this run, so a fused chain is measured from the last device
  tensors before it.
- Graph inputs: the device store's graph-input tensor when one matches (the value the device
  actually ran on), else the given input. The replay store keeps the given input under the
  placeholder's name.
- Streaming: a device tensor is read when its producer node is replayed and dropped with the
  node's value after its last consumer ran (``torch.fx.Interpreter`` frees values after their
  last use), so memory follows the live values of the graph, not the whole run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from . import simulate
from .store import Store
from .torch_capture import (_graph_module, _is_container, _names_in, _normalize_runs,
                            _rebuilt, _run_fx, _simulation, _Sink, _stored_keys,
                            _warn_simulation)

__all__ = ["replay", "ReplaySummary"]


@dataclass(frozen=True)
class ReplaySummary:
    """What ``replay`` wrote."""

    path: str
    device_path: str
    run_names: Tuple[str, ...]
    tensors: int  # tensors stored, all runs
    bytes: int  # tensor bytes stored, all runs
    nodes: int  # op nodes replayed per run
    # op nodes that read a replayed value for at least one input (no device counterpart), in
    # graph order, any run
    replayed_inputs: Tuple[str, ...] = ()
    # device tensors no stored name matched, any run (first seen first)
    device_unmatched: Tuple[str, ...] = ()
    # stored names whose device counterpart has another element count: the replayed value was
    # used instead
    shape_mismatches: Tuple[str, ...] = ()
    not_quantized: Tuple[str, ...] = ()  # with encodings: as CaptureSummary
    unused_encodings: Tuple[str, ...] = ()

    def __str__(self) -> str:
        return (f"{self.path}: {len(self.run_names)} run(s) replayed on {self.device_path}, "
                f"{self.tensors} tensors, {self.nodes} nodes per run, "
                f"{len(self.replayed_inputs)} node(s) with replayed inputs, "
                f"{len(self.device_unmatched)} device tensor(s) unmatched")


class _DeviceValues:
    """The value hook of the replay: after each node is replayed and stored, the value its
    consumers read is the device's where the device store has the tensor."""

    def __init__(self, device: Store, stored_keys, torch):
        self.device = device
        self.keys = [(name, handles, index) for name, handles, index, _ in stored_keys]
        self.torch = torch
        self.run_index = -1
        self.by_name: Dict[str, Any] = {}  # stored name -> device Tensor of the current run
        self.nodes = 0
        self.replayed_inputs: Dict[str, None] = {}  # ordered sets
        self.device_unmatched: Dict[str, None] = {}
        self.shape_mismatches: Dict[str, None] = {}

    def _begin_run(self, run_index: int) -> None:
        """Matches the device run's tensors to the stored names (the diff's alignment)."""
        tensors = self.device.runs[run_index].tensors
        pairs, unmatched = simulate.align(
            self.keys, [(t.name, t.handles, t.output_index) for t in tensors])
        self.by_name = {self.keys[r][0]: tensors[d] for r, d in pairs}
        for d in unmatched:
            self.device_unmatched.setdefault(tensors[d].name)
        self.run_index = run_index
        self.nodes = 0

    def __call__(self, interpreter, node, value):
        if interpreter.run_index != self.run_index:
            self._begin_run(interpreter.run_index)
        if node.op != "placeholder":
            self.nodes += 1
            if any(name not in self.by_name for arg in node.all_input_nodes
                   for name in _names_in(interpreter.names.get(arg))):
                self.replayed_inputs.setdefault(node.name)
        return self._substituted(value, interpreter.names[node])

    def _substituted(self, value, names):
        """`value` with each stored tensor leaf that the device has replaced by the device's
        value (`names` mirrors `value` with stored names)."""
        if isinstance(names, str):
            return self._device_value(names, value)
        if not _is_container(value) or not _is_container(names):
            return value
        keys = list(value.keys()) if isinstance(value, dict) else range(len(value))
        items = [self._substituted(value[k], names[k]) for k in keys]
        if all(item is value[k] for k, item in zip(keys, items)):
            return value
        return _rebuilt(value, items)

    def _device_value(self, name, replayed):
        tensor = self.by_name.get(name)
        if tensor is None:
            return replayed
        torch = self.torch
        real = torch.from_numpy(tensor.numpy(dequantize=True))  # reference layout
        if real.numel() != replayed.numel():
            self.shape_mismatches.setdefault(name)
            return replayed
        return real.reshape(replayed.shape).to(dtype=replayed.dtype, device=replayed.device)


def _refuse_writing_over(path, inputs):
    """An output that is one of the call's inputs (the same file: device and inode, as the
    command line compares them, docs/output-files.md) would destroy it: ValueError first."""
    for source, what in inputs:
        try:
            same = os.path.samefile(path, source)
        except OSError:  # either does not exist (yet): no clash
            continue
        if same and os.path.isfile(path):
            raise ValueError(f"replay: path {os.fspath(path)!r} is {what} ({os.fspath(source)!r}); "
                             "writing the replay there would destroy it: give another path")


def replay(model, inputs, device_store, path, *, encodings=None, run_names=None,
           producer: Optional[str] = None, model_name: Optional[str] = None) -> ReplaySummary:
    """Replays every fx node of `model` on the device's values of its inputs and writes the
    results to a new store at `path` (see the module documentation).

    inputs: one element per run, as for capture_torch; device run k is replayed with inputs[k]
    (ValueError when the run counts differ). device_store: a path or a Store. encodings: as for
    capture_torch; the replayed outputs are fake-quantized and stored as integer codes.
    run_names: default the device runs' names. Returns a ReplaySummary."""
    try:
        import torch
        import torch.fx  # noqa: F401
    except ImportError as e:
        raise ImportError(f"replay needs PyTorch, which cannot be imported ({e})") from e
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"replay: path must be a str or os.PathLike, got {type(path).__name__}")
    device = device_store if isinstance(device_store, Store) else Store(device_store)
    _refuse_writing_over(path, [(device.path, "the device store")] +
                         ([(encodings, "the encodings file")]
                          if isinstance(encodings, (str, os.PathLike)) else []))
    runs, names = _normalize_runs(inputs, run_names, torch)
    if len(runs) != len(device.runs):
        raise ValueError(f"replay: {len(runs)} input run(s) for the {len(device.runs)} run(s) of "
                         f"{device.path}: device run k is replayed with inputs[k]")
    if run_names is None:
        names = [run.name for run in device.runs]
    gm, lifted, fixed = _graph_module(model, torch)
    keys = _stored_keys(gm, lifted, fixed, runs[0], torch)
    quantizer, not_quantized, unused, _ = _simulation(encodings, gm, lifted, fixed, runs[0],
                                                      torch, keys)
    _warn_simulation("replay", not_quantized, unused)
    hook = _DeviceValues(device, keys.keys, torch)

    from . import StoreWriter

    path = os.fspath(path)
    with StoreWriter(path, producer=producer or f"qnn_debug replay (torch {torch.__version__})",
                     backend="cpu", model=model_name or type(model).__name__,
                     naming="executorch-qnn") as writer:
        sink = _Sink(writer, torch)
        sink.encode = quantizer
        with torch.no_grad():
            _run_fx(gm, lifted, fixed, runs, names, writer, sink, torch, value_hook=hook)
    return ReplaySummary(path=path, device_path=device.path, run_names=tuple(names),
                         tensors=sink.tensors, bytes=sink.bytes, nodes=hook.nodes,
                         replayed_inputs=tuple(hook.replayed_inputs),
                         device_unmatched=tuple(hook.device_unmatched),
                         shape_mismatches=tuple(hook.shape_mismatches),
                         not_quantized=tuple(not_quantized), unused_encodings=tuple(unused))
