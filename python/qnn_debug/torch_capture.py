"""Capture every intermediate tensor of a PyTorch model into a qnn-debug store.

``capture_torch(model, inputs, path)`` runs the model once per input and writes each op's
output tensors, bit for bit, into a store that ``qnn_debug.diff`` compares against a device
capture. Two naming schemes:

``naming="fx"`` (default)
    The model runs node by node through a ``torch.fx.Interpreter``: a ``torch.fx.GraphModule``
    as is, an ``nn.Module`` after ``torch.fx.symbolic_trace``, an ExportedProgram (anything with
    a ``graph_module``) through its ``module()`` when that gives a GraphModule, else through its
    ``graph_module``.

    - Tensor names are fx node names: a node whose value is one tensor is ``<node>``
      (output_index 0); a node whose value is a tuple/list/dict is flattened depth first and its
      leaf k is ``<node>@<k>`` (output_index k; k counts every leaf, tensors or not, so
      k is the tuple index for a flat tuple). Non-tensor leaves are not stored.
    - Debug handles follow ExecuTorch's Qualcomm backend (``ResolveDebugHandle``): a counter
      starting at 1 walks the nodes in graph order; an ``operator.getitem`` node that picks an
      element of another node's tuple/list/dict output takes that node's handle and is not
      stored again (its value is one of the source's outputs); every other op node
      (``call_function``, ``call_module``, ``call_method``, including ``getitem`` on a tensor,
      which is tensor indexing, and ops whose output is not a tensor) takes the next number.
      ``placeholder``, ``get_attr`` and ``output`` nodes take none. For an ExportedProgram the
      numbering is done on its ``graph_module`` (the graph ExecuTorch numbers, where every op is
      ``call_function``) and carried by node name to the ``module()`` graph that runs; nodes
      only ``module()`` has (e.g. input guards) get no handle.
    - Roles: placeholders are ``graph_input`` (no handles). A tensor the ``output`` node returns
      (directly or through getitem) is stored once, under its producing node's name, with role
      ``graph_output``; a graph input returned as is stays ``graph_input``. Everything else is
      ``intermediate``. ``get_attr`` values (parameters, buffers, constants) are not stored.
    - The op graph is stored once (from the first run): one node per op node whose value holds
      a tensor, in graph order,
      ``op_type`` ``aten.relu.default`` for ``torch.ops`` targets, the function's ``__name__``
      for other functions (``torch.relu`` -> ``relu``), the module class for ``call_module``
      (``Conv2d``), the method name for ``call_method``; inputs are the stored tensor names among
      the node's arguments (a getitem argument as its source's ``<node>@<k>``), in argument
      order; outputs are the node's stored tensor names.

    - With ``encodings=`` (files any ``--encodings`` reads), every stored floating-point tensor
      that has an encoding is fake-quantized when its op finishes, the fake-quantized value
      flows downstream, and its integer codes are stored with the encoding
      (``qnn_debug.simulate``: the formula, the name matching by the diff's alignment). The
      stored names are learned first by one float run of the first input that stores nothing
      (``_stored_keys``). ``qnn_debug.replay`` runs the same interpreter with the device's
      values substituted (``value_hook``).

``naming="module"``
    The model runs as itself, with a forward hook on every leaf submodule (one without
    children) and on every ``nn.MultiheadAttention`` (which uses its ``out_proj`` child's
    weights without calling it: it is hooked whole, its children are not), for models fx cannot
    trace.

    - PyTorch's fused fast path of ``nn.TransformerEncoderLayer`` (and ``nn.TransformerEncoder``'s
      nested-tensor path) computes the layer without calling its submodules; it is turned off
      during capture and restored afterwards (``_fast_paths_off``).
    - A hooked module that never ran as a module in any run is named in a ``CaptureWarning``
      and in ``CaptureSummary.modules_not_run``.

    - A leaf module's output is named by its qualified name (``layer1.0.conv1``); its c-th call
      after the first in one forward is ``<name>#<c>`` (``block.act``, ``block.act#1``,
      ``block.act#2``). A tuple/list/dict output is flattened as above: leaf k is
      ``<name>@<k>`` (or ``<name>#<c>@<k>``), output_index k.
    - Handles: the hook call's position in the forward, counting from 1 (one handle per module
      call, shared by its outputs). They match between captures only when the modules run in
      the same order; they are not ExecuTorch handles.
    - The model's positional arguments are stored as ``input_<k>`` (role ``graph_input``) and
      its return value as ``output_<k>`` (role ``graph_output``), k the leaf index after
      flattening as above, without handles; ``output_<k>`` is a separate copy even when it is
      also a leaf module's output.
    - The graph (first run): one node per module call, op_type the module class, inputs the
      stored tensors among the call's positional arguments.

The model runs as it is (call ``model.eval()`` first for inference behaviour), under
``torch.no_grad()``. The store is written with the ``executorch-qnn`` naming preset, backend
``cpu``, model ``model_name`` or the model's class name; handles, output indices and roles are
given explicitly for every tensor, never parsed from the names.

Tensors are copied with ``detach().cpu().contiguous()`` and handed to the writer as a numpy
view (the writer copies before returning, so values are those at the moment the op finished,
even if a later in-place op changes the tensor). dtypes: float16/32/64, int8/16/32/64, uint8
and bool are stored as such; bfloat16 as BFLOAT_16 (read back as float32, which holds every
bfloat16 value exactly); quantized tensors as their
integer representation (qint8 -> SFIXED_POINT_8, quint8 -> UFIXED_POINT_8, qint32 ->
SFIXED_POINT_32) with scale and zero point, per channel with the channel axis. Other tensors
(complex, sparse, unsupported dtypes) are skipped and listed in ``CaptureSummary.skipped``.

Runs one call at a time: ``capture_session(model, path)`` keeps the store open and each call of
the session is one run, stored as capture_torch stores one input (capture_torch is a session
called once per input: ``CaptureSession``, over ``_FxRuns`` / ``_ModuleRuns``), for a decode
loop whose next input comes from the last output. ``teacher_inputs(store)`` reads a store's
graph inputs, run by run, as capture_torch's inputs (teacher forcing: the reference runs on the
device's tokens).
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .writer import CommitOnExit

__all__ = ["capture_session", "capture_torch", "teacher_inputs", "CaptureSession", "CaptureSummary",
           "CaptureWarning", "TeacherInputs", "TorchTraceError"]


class TorchTraceError(RuntimeError):
    """``torch.fx.symbolic_trace`` could not trace the model (naming="fx")."""


class CaptureWarning(UserWarning):
    """capture_torch stored less than the model computed (naming="module": a hooked module
    never ran as a module), or, with encodings, some tensors stay float or some encodings
    match no tensor."""


@dataclass(frozen=True)
class CaptureSummary:
    """What ``capture_torch`` or a capture session wrote."""

    path: str
    naming: str
    run_names: Tuple[str, ...]
    tensors: int  # tensors stored, all runs
    bytes: int  # tensor bytes stored, all runs
    nodes: int  # graph nodes stored
    skipped: Tuple[Tuple[str, str, str], ...] = field(default=())  # (run, tensor, why)
    # naming="module": hooked modules that never ran as modules in any run (a CaptureWarning
    # names them too)
    modules_not_run: Tuple[str, ...] = field(default=())
    # encodings=: stored tensors left float (no encoding matched them, or it defines no
    # quantization, or they are not floating point), and encoding names no tensor matched
    not_quantized: Tuple[str, ...] = field(default=())
    unused_encodings: Tuple[str, ...] = field(default=())

    @property
    def runs(self) -> int:
        return len(self.run_names)

    def __str__(self) -> str:
        text = (f"{self.path}: {self.runs} run(s), {self.tensors} tensors, "
                f"{self.bytes / 1e6:.1f} MB, {self.nodes} graph nodes")
        if self.skipped:
            text += f", {len(self.skipped)} skipped"
        if self.modules_not_run:
            text += f", {len(self.modules_not_run)} module(s) never ran"
        if self.not_quantized:
            text += f", {len(self.not_quantized)} not quantized"
        if self.unused_encodings:
            text += f", {len(self.unused_encodings)} encoding(s) unused"
        return text


# ---- inputs ---------------------------------------------------------------------------------

def _normalize_runs(inputs, run_names, torch) -> Tuple[List[tuple], List[str]]:
    if isinstance(inputs, torch.Tensor):
        raise TypeError("capture_torch: inputs must be a list with one element per run; "
                        "for a single run with one tensor pass [x]")
    if not isinstance(inputs, list):
        raise TypeError("capture_torch: inputs must be a list with one element per run (a tensor, "
                        "or a tuple of positional arguments), got " + type(inputs).__name__ +
                        "; for one run with arguments (a, b) pass [(a, b)]")
    if not inputs:
        raise ValueError("capture_torch: inputs is empty: give at least one run")
    runs = []
    for i, item in enumerate(inputs):
        if isinstance(item, torch.Tensor):
            runs.append((item,))
        elif isinstance(item, (tuple, list)):
            runs.append(tuple(item))
        else:
            raise TypeError(f"capture_torch: inputs[{i}] is a {type(item).__name__}; each run must "
                            "be a tensor or a tuple/list of positional arguments")
    if run_names is None:
        run_names = getattr(inputs, "run_names", None)  # teacher_inputs: the store's run names
    if run_names is None:
        names = [f"run{i}" for i in range(len(runs))]
    else:
        if isinstance(run_names, str) or not isinstance(run_names, Sequence):
            raise TypeError("capture_torch: run_names must be a list of strings")
        names = list(run_names)
        if len(names) != len(runs):
            raise ValueError(f"capture_torch: {len(names)} run_names for {len(runs)} inputs")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"capture_torch: run name {name!r} is not a string")
    return runs, names


# ---- tensors --------------------------------------------------------------------------------

class _Unsupported(Exception):
    pass


def _plain_dtypes(torch):
    return {torch.float32, torch.float16, torch.float64, torch.int8, torch.int16, torch.int32,
            torch.int64, torch.uint8, torch.bool}


class _Converter:
    """torch tensor -> (numpy array to hand to the writer, extra write() keywords)."""

    def __init__(self, torch):
        self.torch = torch
        self.plain = _plain_dtypes(torch)
        self.quantized = {torch.qint8: "SFIXED_POINT_8", torch.quint8: "UFIXED_POINT_8",
                          torch.qint32: "SFIXED_POINT_32"}
        self.per_tensor = {torch.per_tensor_affine, torch.per_tensor_symmetric}
        self.per_channel = {torch.per_channel_affine, torch.per_channel_symmetric}

    def __call__(self, t) -> Tuple[Any, Dict[str, Any]]:
        torch = self.torch
        if t.layout != torch.strided:
            raise _Unsupported(f"layout {t.layout} is not stored")
        if t.device.type == "meta":
            raise _Unsupported("a meta tensor has no values")
        t = t.detach()
        dtype = t.dtype
        if dtype in self.plain:
            if t.device.type != "cpu":
                t = t.cpu()
            return t.contiguous().numpy(), {}
        if dtype == torch.bfloat16:
            # numpy has no bfloat16: its bits go in as a 16-bit integer view.
            return t.cpu().contiguous().view(torch.int16).numpy(), {"dtype": "BFLOAT_16"}
        if dtype in self.quantized:
            return self._quantized(t)
        raise _Unsupported(f"dtype {dtype} has no store dtype")

    def _quantized(self, t):
        torch = self.torch
        if t.device.type != "cpu":
            t = t.cpu()
        scheme = t.qscheme()
        extra: Dict[str, Any] = {"dtype": self.quantized[t.dtype]}
        if scheme in self.per_tensor:
            extra["scale"] = float(t.q_scale())
            extra["zero_point"] = int(t.q_zero_point())
        elif scheme in self.per_channel:
            extra["scale"] = t.q_per_channel_scales().tolist()
            zero_points = t.q_per_channel_zero_points()
            if zero_points.is_floating_point():
                if not bool(torch.all(zero_points == zero_points.round())):
                    raise _Unsupported("per-channel float zero points are not stored")
                zero_points = zero_points.round()
            extra["zero_point"] = [int(z) for z in zero_points.tolist()]
            extra["axis"] = int(t.q_per_channel_axis())
        else:
            raise _Unsupported(f"quantization scheme {scheme} is not stored")
        return t.int_repr().contiguous().numpy(), extra


def _is_container(value) -> bool:
    return isinstance(value, (tuple, list, dict))


def _leaves(value):
    """Depth-first leaves of nested tuples/lists/dicts (dict values in order)."""
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


class _Sink:
    """Writes tensors through the StoreWriter and counts what was written."""

    def __init__(self, writer, torch):
        self.writer = writer
        self.torch = torch
        self.convert = _Converter(torch)
        self.tensors = 0
        self.bytes = 0
        self.skipped: List[Tuple[str, str, str]] = []
        self.run_name = ""
        # encode(name, tensor) -> None, or (fake-quantized tensor, integer codes, write
        # keywords): the quantized simulation's hook (simulate.FakeQuantizer)
        self.encode = None

    def write(self, name, tensor, handles, output_index, role) -> bool:
        try:
            array, extra = self.convert(tensor)
        except _Unsupported as why:
            self.skipped.append((self.run_name, name, str(why)))
            return False
        self._write_array(name, array, extra, handles, output_index, role)
        return True

    def _write_array(self, name, array, extra, handles, output_index, role) -> None:
        self.writer.write(name, array, handles=handles, output_index=output_index, role=role,
                          **extra)
        self.tensors += 1
        self.bytes += array.nbytes

    def _store_leaf(self, name, tensor, handles, output_index, role):
        """(the value that flows on, its stored name or None)."""
        coded = self.encode(name, tensor) if self.encode is not None else None
        if coded is None:
            return tensor, (name if self.write(name, tensor, handles, output_index, role)
                            else None)
        fake, codes, extra = coded
        self._write_array(name, codes, extra, handles, output_index, role)
        return fake, name

    def write_value(self, base, value, handles, role, graph_outputs=frozenset(), leaf_name=None):
        """Stores every tensor leaf of `value`: a lone tensor as `base`, leaf k of a container
        as `base@k` (or leaf_name(k)). Returns a mirror of `value` whose tensor leaves are their
        stored names (None where nothing was stored). Tensors whose id is in graph_outputs get
        role graph_output instead of intermediate."""
        return self.store_value(base, value, handles, role, graph_outputs, leaf_name)[0]

    def store_value(self, base, value, handles, role, graph_outputs=frozenset(), leaf_name=None):
        """write_value's (mirror, value that flows on): `value` itself, or, with an `encode`
        hook, `value` with each encoded tensor leaf replaced by its fake-quantized value."""
        Tensor = self.torch.Tensor
        if isinstance(value, Tensor):
            r = "graph_output" if id(value) in graph_outputs and role == "intermediate" else role
            flowing, name = self._store_leaf(base, value, handles, 0, r)
            return name, flowing
        counter = [0]

        def walk(v):  # (mirror, value that flows on)
            if isinstance(v, (tuple, list, dict)):
                keys = list(v.keys()) if isinstance(v, dict) else range(len(v))
                walked = [walk(v[key]) for key in keys]
                names = [m for m, _ in walked]
                flowing = v if all(f is v[key] for key, (_, f) in zip(keys, walked)) else \
                    _rebuilt(v, [f for _, f in walked])
                if isinstance(v, dict):
                    return dict(zip(keys, names)), flowing
                return (tuple(names) if isinstance(v, tuple) else names), flowing
            k = counter[0]
            counter[0] += 1
            if not isinstance(v, Tensor):
                return None, v
            name = f"{base}@{k}" if leaf_name is None else leaf_name(k)
            r = "graph_output" if id(v) in graph_outputs and role == "intermediate" else role
            flowing, stored = self._store_leaf(name, v, handles, k, r)
            return stored, flowing

        return walk(value)


def _rebuilt(container, items):
    """A container of the same type as `container` holding `items` (for a dict, its values in
    key order): tuple, list, dict, named tuples and torch's structseq return types."""
    if isinstance(container, dict):
        return type(container)(zip(container.keys(), items))
    if isinstance(container, tuple) and hasattr(container, "_fields"):
        return type(container)(*items)  # a namedtuple
    if type(container) in (tuple, list):
        return type(container)(items)
    return type(container)(items)  # a structseq (torch.return_types.topk) or a list subclass


def _has_tensor(value, torch) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in _leaves(value))


def _names_in(tree) -> List[str]:
    return [name for name in _leaves(tree) if isinstance(name, str)]


# ---- fx -------------------------------------------------------------------------------------

def _op_type(node, module, torch) -> str:
    if node.op == "call_module":
        try:
            return type(module.get_submodule(node.target)).__name__
        except AttributeError:
            return str(node.target)
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    if type(target).__module__ == "torch._ops":  # OpOverload / OpOverloadPacket
        return str(target)
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) else str(target)


def _graph_module(model, torch, who="capture_torch"):
    """(GraphModule to interpret, {placeholder name: value} for lifted parameters,
    {node name: handle} fixed in advance or None to number while running)."""
    fx = torch.fx
    if isinstance(model, fx.GraphModule):
        return model, {}, None
    graph_module = getattr(model, "graph_module", None)
    if graph_module is not None and not isinstance(model, torch.nn.Module):
        # An ExportedProgram: ExecuTorch numbers the nodes of its graph_module.
        fixed = _executorch_handles(graph_module) if isinstance(graph_module, fx.GraphModule) \
            else None
        module_fn = getattr(model, "module", None)
        if callable(module_fn) and not isinstance(module_fn, torch.nn.Module):
            unlifted = module_fn()
            if isinstance(unlifted, fx.GraphModule):
                return unlifted, {}, _carried_handles(fixed, unlifted)
        if not isinstance(graph_module, fx.GraphModule):
            raise TypeError(f"{who}: model.graph_module is a "
                            f"{type(graph_module).__name__}, not a torch.fx.GraphModule")
        return graph_module, _lifted_constants(model), fixed
    if isinstance(model, torch.nn.Module):
        try:
            return fx.symbolic_trace(model), {}, None
        except Exception as e:  # anything the tracer raises
            raise TorchTraceError(
                f"{who}: torch.fx.symbolic_trace cannot trace {type(model).__name__} "
                f"({type(e).__name__}: {e}); capture it with "
                f"{who}(..., naming=\"module\"), which runs the model as itself and "
                "stores the outputs of its submodules (leaf modules and MultiheadAttention) "
                "through forward hooks") from e
    raise TypeError(f"{who}: model must be a torch.nn.Module, a torch.fx.GraphModule or an "
                    f"ExportedProgram-like object with a graph_module, got {type(model).__name__}")


def _executorch_handles(gm) -> Dict[str, Optional[int]]:
    """ExecuTorch's numbering of an edge program's nodes, by node name: a counter from 1 over
    the call_function nodes in order; operator.getitem takes its source's handle."""
    handles: Dict[str, Optional[int]] = {}
    counter = 1
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is operator.getitem and node.args and \
                isinstance(node.args[0], type(node)):
            handles[node.name] = handles.get(node.args[0].name)
        else:
            handles[node.name] = counter
            counter += 1
    return handles


def _carried_handles(fixed, unlifted) -> Optional[Dict[str, Optional[int]]]:
    """The graph_module's handles for the module() graph, by node name, when module() kept the
    names (it replaces lifted placeholders by get_attr nodes and may add nodes of its own, which
    then get no handle); None (number while running) when it did not."""
    if not fixed:
        return None
    names = {n.name for n in unlifted.graph.nodes}
    return fixed if all(name in names for name in fixed) else None


def _lifted_constants(program) -> Dict[str, Any]:
    """An ExportedProgram's lifted parameters, buffers and constants by placeholder name, for
    running its graph_module directly."""
    signature = getattr(program, "graph_signature", None)
    if signature is None:
        return {}
    state = dict(getattr(program, "state_dict", None) or {})
    state.update(getattr(program, "constants", None) or {})
    lifted = {}
    for attr in ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants"):
        for placeholder, fqn in (getattr(signature, attr, None) or {}).items():
            if fqn not in state:
                raise ValueError(f"capture_torch: the program's {attr} names {fqn!r}, which is "
                                 "not in its state_dict or constants")
            lifted[placeholder] = state[fqn]
    return lifted


def _output_marks(graph) -> Dict[Any, List[tuple]]:
    """{node: [index paths]}: the parts of node values the output node returns. A returned
    getitem node marks itself and, through the getitem chain, the element of its source."""
    marks: Dict[Any, List[tuple]] = {}
    output = next((n for n in graph.nodes if n.op == "output"), None)
    if output is None:
        return marks
    returned = []
    torch_fx_node = type(output)

    def collect(arg):
        if isinstance(arg, torch_fx_node):
            returned.append(arg)
        elif isinstance(arg, (tuple, list)):
            for a in arg:
                collect(a)
        elif isinstance(arg, dict):
            for a in arg.values():
                collect(a)

    collect(output.args)
    for node in returned:
        path: tuple = ()
        marks.setdefault(node, []).append(path)
        while (node.op == "call_function" and node.target is operator.getitem
               and len(node.args) == 2 and isinstance(node.args[0], torch_fx_node)
               and not isinstance(node.args[1], torch_fx_node)):
            path = (node.args[1],) + path
            node = node.args[0]
            marks.setdefault(node, []).append(path)
    return marks


def _marked_tensor_ids(value, paths, torch) -> frozenset:
    ids = set()
    for path in paths:
        v = value
        try:
            for index in path:
                if not _is_container(v):
                    v = None
                    break
                v = v[index]
        except (IndexError, KeyError, TypeError):
            continue
        if isinstance(v, torch.Tensor):
            ids.add(id(v))
        elif _is_container(v):
            ids.update(id(x) for x in _leaves(v) if isinstance(x, torch.Tensor))
    return frozenset(ids)


class _Runs:
    """One run of the store per call of `run`: begin_run, the model's forward (`_forward`, which
    fills `graph_rows` during the first run), end_run, then after the first run the op graph.
    capture_torch calls it once per input, a capture session once per call."""

    def __init__(self, writer, sink):
        self.writer = writer
        self.sink = sink
        self.graph_rows: List[tuple] = []
        self.count = 0  # runs done

    def run(self, args, name):
        self.sink.run_name = name
        self.writer.begin_run(name)
        output = self._forward(args, record=(self.count == 0))
        self.writer.end_run()
        if self.count == 0:
            for row in self.graph_rows:
                self.writer.graph_node(*row)
        self.count += 1
        return output

    def _forward(self, args, record):
        raise NotImplementedError

    def not_run(self, who: str) -> Tuple[str, ...]:
        """Hooked modules that never ran (naming="module" only)."""
        return ()

    @property
    def nodes(self) -> int:
        return len(self.graph_rows)


class _FxRuns(_Runs):
    """naming="fx": `gm` runs node by node through a capturing Interpreter, storing every
    node's outputs through `sink`. `value_hook(interpreter, node, value)`, when given, is called
    after each placeholder and op node is stored and returns the value downstream nodes read
    (replay: the device's values); the interpreter's `run_index` is the run and `names` maps each
    node run so far to the mirror of its value with stored names."""

    def __init__(self, gm, lifted, fixed_handles, writer, sink, torch, value_hook=None):
        super().__init__(writer, sink)
        self.gm = gm
        self.capturer = _capturer_class(gm, lifted, fixed_handles, sink, torch, value_hook,
                                        self.graph_rows)

    def _forward(self, args, record):
        return self.capturer(self.gm, record_graph=record, run_index=self.count).run(*args)


def _run_fx(gm, lifted, fixed_handles, runs, run_names, writer, sink, torch,
            value_hook=None) -> int:
    """Runs `gm` once per run (_FxRuns); returns the number of graph nodes stored."""
    runner = _FxRuns(gm, lifted, fixed_handles, writer, sink, torch, value_hook)
    for args, name in zip(runs, run_names):
        runner.run(args, name)
    return runner.nodes


def _capturer_class(gm, lifted, fixed_handles, sink, torch, value_hook, graph_rows):
    """The torch.fx.Interpreter subclass that stores each node's outputs (see _FxRuns)."""
    fx = torch.fx
    marks = _output_marks(gm.graph)

    class Capturer(fx.Interpreter):
        def __init__(self, module, record_graph, run_index):
            super().__init__(module)
            self.record_graph = record_graph
            self.run_index = run_index
            self.next_handle = 1
            self.handles: Dict[Any, Optional[int]] = {}
            self.names: Dict[Any, Any] = {}  # node -> mirror of its value with stored names

        def run_node(self, n):
            op = n.op
            if op == "placeholder" and n.name in lifted:
                return lifted[n.name]  # a lifted parameter: not a graph input, not stored
            value = super().run_node(n)
            if op == "placeholder":
                self.names[n], value = sink.store_value(n.name, value, [], "graph_input")
                return self.after(n, value)
            if op in ("get_attr", "output"):
                return value
            if (op == "call_function" and n.target is operator.getitem
                    and isinstance(n.args[0], fx.Node) and not isinstance(
                        self.env.get(n.args[0]), torch.Tensor)):
                # An element of another node's outputs: same handle, not stored again.
                source = n.args[0]
                self.handles[n] = self.handles.get(source)
                try:
                    self.names[n] = self.names.get(source)[n.args[1]]
                except (IndexError, KeyError, TypeError):
                    self.names[n] = None
                return value
            if fixed_handles is None:
                handle = self.next_handle
                self.next_handle += 1
            else:
                handle = fixed_handles.get(n.name)
            self.handles[n] = handle
            handle_list = [] if handle is None else [handle]
            outputs = _marked_tensor_ids(value, marks[n], torch) if n in marks else frozenset()
            self.names[n], flowing = sink.store_value(n.name, value, handle_list,
                                                      "intermediate", outputs)
            if self.record_graph and _has_tensor(value, torch):
                inputs: List[str] = []

                def collect(arg):
                    if isinstance(arg, fx.Node):
                        inputs.extend(_names_in(self.names.get(arg)))
                    return arg

                fx.node.map_arg((n.args, n.kwargs), collect)
                graph_rows.append((n.name, _op_type(n, gm, torch), inputs,
                                   _names_in(self.names[n]), handle_list))
            return self.after(n, flowing)

        def after(self, n, value):
            if value_hook is None:
                return value
            return value_hook(self, n, value)

    return Capturer


class _KeyRecorder:
    """A StoreWriter stand-in for the name pass: records what would be stored, stores nothing."""

    def __init__(self):
        self.keys: List[Tuple[str, List[int], int, str]] = []  # (name, handles, index, role)
        self.floating: set = set()  # names of floating-point tensors

    def begin_run(self, name):
        pass

    def end_run(self):
        pass

    def graph_node(self, *row):
        pass

    def write(self, name, array, *, handles, output_index, role, **extra):
        self.keys.append((name, list(handles), output_index, role))
        if array.dtype.kind == "f" or extra.get("dtype") == "BFLOAT_16":
            self.floating.add(name)


def _stored_keys(gm, lifted, fixed, args, torch) -> _KeyRecorder:
    """What capture_torch(naming="fx") stores for one run on `args`: names, handles, output
    indices and roles in capture order. Which leaves of a node's value are tensors is known only
    by running it, so this runs the graph once (float, nothing stored)."""
    recorder = _KeyRecorder()
    with torch.no_grad():
        _run_fx(gm, lifted, fixed, [args], ["names"], recorder, _Sink(recorder, torch), torch)
    return recorder


def _simulation(encodings, gm, lifted, fixed, first_run, torch, keys=None):
    """(FakeQuantizer, stored tensors left float, unused encoding names, the name pass's
    _KeyRecorder) for `encodings` (None: no quantization, and no name pass). `keys`: the name
    pass when already run."""
    from . import simulate

    if encodings is None:
        return None, (), (), keys
    table = simulate.encoding_table(encodings)  # first: a bad file fails before any run
    return _matched_simulation(table, gm, lifted, fixed, first_run, torch, keys)


def _matched_simulation(table, gm, lifted, fixed, first_run, torch, keys=None):
    """_simulation for encodings already loaded (`table`, simulate.load_encodings)."""
    from . import simulate

    if keys is None:
        keys = _stored_keys(gm, lifted, fixed, first_run, torch)
    matched, not_quantized, unused = simulate.match_encodings(
        [(name, handles, index) for name, handles, index, _ in keys.keys], table, keys.floating)
    return simulate.FakeQuantizer(matched), not_quantized, unused, keys


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _warn(message: str) -> None:
    """A CaptureWarning at the first frame outside this package: the line of the caller's code
    that called capture_torch, replay, or a session (its call, close or `with` exit)."""
    frame, level = sys._getframe(0), 1
    while frame is not None and \
            os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIR:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, CaptureWarning, stacklevel=level)


def _warn_simulation(who: str, not_quantized: Sequence[str], unused: Sequence[str]) -> None:
    """Says which stored tensors stay float and which encodings matched nothing."""
    if not_quantized:
        _warn(f"{who}: {len(not_quantized)} stored tensor(s) have no encoding and stay "
              f"float: {_listed(list(not_quantized))}")
    if unused:
        _warn(f"{who}: {len(unused)} encoding(s) name no stored tensor: {_listed(list(unused))}")


# ---- module hooks ---------------------------------------------------------------------------

def _opaque_types(torch) -> tuple:
    """Modules whose forward uses their children's parameters without calling the children
    (MultiheadAttention reads out_proj.weight): hooked themselves, their children never are."""
    return (torch.nn.MultiheadAttention,)


def _hooked_modules(model, torch) -> List[Tuple[str, Any]]:
    """(qualified name, module) of every module whose calls are captured: leaves (no children)
    and opaque modules, not the descendants of an opaque module. The model itself, when it is
    one of these, is named by its class."""
    opaque = _opaque_types(torch)
    hooked: List[Tuple[str, Any]] = []
    inside_opaque: List[str] = []
    for qname, m in model.named_modules():
        if any(qname.startswith(prefix + ".") or prefix == "" for prefix in inside_opaque):
            continue
        if isinstance(m, opaque):
            inside_opaque.append(qname)
        elif next(m.children(), None) is not None:
            continue
        hooked.append((qname or type(model).__name__, m))
    return hooked


@contextlib.contextmanager
def _fast_paths_off(model, torch):
    """Turns off PyTorch's fused fast paths that compute a TransformerEncoderLayer (and a
    TransformerEncoder's nested-tensor path) without calling its submodules, and restores them.
    torch 1.13 has no switch for it: the layer's `activation_relu_or_gelu` flag is read only by
    the fast-path test (a false value takes the ordinary path, which calls self_attn, linear1,
    norm1...); torch.backends.mha.set_fastpath_enabled is used too where it exists (torch 2.x)."""
    layers = [m for m in model.modules() if isinstance(m, torch.nn.TransformerEncoderLayer)
              and hasattr(m, "activation_relu_or_gelu")]
    saved = [m.activation_relu_or_gelu for m in layers]
    mha = getattr(getattr(torch, "backends", None), "mha", None)
    switch = mha if hasattr(mha, "set_fastpath_enabled") else None
    was_enabled = switch.get_fastpath_enabled() if switch is not None else None
    try:
        for m in layers:
            m.activation_relu_or_gelu = 0
        if switch is not None:
            switch.set_fastpath_enabled(False)
        yield
    finally:
        for m, flag in zip(layers, saved):
            m.activation_relu_or_gelu = flag
        if switch is not None:
            switch.set_fastpath_enabled(was_enabled)


def _listed(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _warn_modules_not_run(who: str, model, hooked, not_run: Sequence[str]) -> None:
    """Says which hooked modules never ran as modules, so that their missing outputs are not
    mistaken for a complete capture."""
    if not not_run:
        return
    model_name = type(model).__name__
    if len(not_run) == len(hooked):
        message = (f"{who}: no submodule of {model_name} ran as a module, so only its "
                   f"inputs and outputs are stored; the model computes without calling "
                   f"{_listed(list(not_run))} (e.g. it uses their parameters directly or a "
                   "fused kernel)")
    else:
        message = (f"{who}: {len(not_run)} module(s) of {model_name} never ran as a "
                   f"module in any run, so no tensor of theirs is stored: {_listed(list(not_run))}")
    _warn(message)


def _known(tensor_names: Dict[int, Tuple[Any, str]], value) -> List[str]:
    """The stored names of the tensor leaves of `value` that a hook stored in this run."""
    found = []
    for leaf in _leaves(value):
        entry = tensor_names.get(id(leaf))
        if entry is not None and entry[0]() is leaf:
            found.append(entry[1])
    return found


def _remember(tensor_names, value, mirror) -> None:
    """Notes the stored name of each tensor leaf of `value` (by id, checked through a weak
    reference, since an id is reused once its tensor is freed)."""
    for leaf, name in zip(_leaves(value), _leaves(mirror)):
        if isinstance(name, str):
            tensor_names[id(leaf)] = (weakref.ref(leaf), name)


class _ModuleRuns(_Runs):
    """naming="module": the model runs as itself, with a forward hook on every hooked module.
    The hooks (and _fast_paths_off) are in place for one run at a time, so between the runs of a
    session the model is untouched: its caller may run it without capturing."""

    def __init__(self, model, writer, sink, torch):
        super().__init__(writer, sink)
        self.model = model
        self.torch = torch
        self.hooked = _hooked_modules(model, torch)
        self.fired: set = set()

    def _forward(self, args, record):
        state = {"handle": 0, "calls": {}, "record": record, "tensor_names": {}}
        handles = []
        try:
            for qname, m in self.hooked:
                handles.append(m.register_forward_hook(self._hook(qname, state)))
            with _fast_paths_off(self.model, self.torch):
                return self._hooked_forward(args, state)
        finally:
            for h in handles:
                h.remove()

    def _hook(self, qname, state):
        def hook(module, args, output):
            state["handle"] += 1
            handle = state["handle"]
            self.fired.add(qname)
            c = state["calls"].get(qname, 0)
            state["calls"][qname] = c + 1
            base = qname if c == 0 else f"{qname}#{c}"
            mirror = self.sink.write_value(base, output, [handle], "intermediate")
            if state["record"] and _has_tensor(output, self.torch):
                tensor_names = state["tensor_names"]
                self.graph_rows.append((base, type(module).__name__, _known(tensor_names, args),
                                        _names_in(mirror), [handle]))
                _remember(tensor_names, output, mirror)
        return hook

    def _hooked_forward(self, args, state):
        inputs = self.sink.write_value("input", list(args), [], "graph_input",
                                       leaf_name=lambda k: f"input_{k}")
        if state["record"]:
            _remember(state["tensor_names"], list(args), inputs)
        output = self.model(*args)
        self.sink.write_value("output", [output], [], "graph_output",
                              leaf_name=lambda k: f"output_{k}")
        return output

    def not_run(self, who: str) -> Tuple[str, ...]:
        """The hooked modules that never ran as modules in any run so far (and a warning)."""
        not_run = tuple(qname for qname, _ in self.hooked if qname not in self.fired)
        _warn_modules_not_run(who, self.model, self.hooked, not_run)
        return not_run


# ---- entry points ---------------------------------------------------------------------------

def _import_torch(who: str):
    try:  # lazily: qnn_debug works without torch
        import torch
        import torch.fx  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{who} needs PyTorch, which cannot be imported ({e})") from e
    return torch


def _check_arguments(who, model, path, naming, encodings, torch) -> None:
    if naming not in ("fx", "module"):
        raise ValueError(f"{who}: naming must be \"fx\" or \"module\", got {naming!r}")
    if encodings is not None and naming != "fx":
        raise ValueError(f"{who}: encodings needs naming=\"fx\" (tensors are matched to "
                         "encodings by their fx node names)")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{who}: path must be a str or os.PathLike, got {type(path).__name__}")
    if naming == "module" and not isinstance(model, torch.nn.Module):
        raise TypeError(f"{who}: naming=\"module\" needs a torch.nn.Module, got "
                        f"{type(model).__name__}")


class CaptureSession(CommitOnExit):
    """A store kept open across forwards (made by ``capture_session``): each call runs the model
    once, as the next run of the store, and returns the model's output; ``close()``, or leaving
    a ``with`` block, commits the store at ``path``; ``abort()``, an exception in the block or
    an error in a call leaves nothing there. ``summary`` is the CaptureSummary once committed."""

    def __init__(self, model, path, *, naming="fx", producer=None, model_name=None,
                 encodings=None, _who="capture_session"):
        torch = _import_torch(_who)
        _check_arguments(_who, model, path, naming, encodings, torch)
        from . import StoreWriter, simulate

        self.path = os.fspath(path)
        self.naming = naming
        self.summary: Optional[CaptureSummary] = None
        self._who, self._torch = _who, torch
        self._graph = _graph_module(model, torch, _who) if naming == "fx" else None
        # Loaded now, so that a bad file fails before anything is written; matched to the
        # stored names at the first call, whose inputs the name pass needs.
        self._table = None if encodings is None else simulate.encoding_table(encodings)
        self._float = ((), ())  # with encodings: (stored names left float, unused encodings)
        self._writer = StoreWriter(
            self.path, producer=producer or f"qnn_debug {_who} (torch {torch.__version__})",
            backend="cpu", model=model_name or type(model).__name__, naming="executorch-qnn")
        self._sink = _Sink(self._writer, torch)
        self._runs = _FxRuns(*self._graph, self._writer, self._sink, torch) \
            if naming == "fx" else _ModuleRuns(model, self._writer, self._sink, torch)
        self._run_names: List[str] = []
        self._abandoned: Optional[str] = None  # why nothing will be written

    def __call__(self, *args, run_name: Optional[str] = None):
        """Runs the model on the positional arguments `args` as the next run of the store, named
        `run_name` (default ``run<k>``, k counting from 0), and returns the model's output. If
        the model (or the capture) raises, the store is abandoned and the error propagates."""
        self._check_open()
        name = f"run{len(self._run_names)}" if run_name is None else run_name
        if not isinstance(name, str):
            raise TypeError(f"{self._who}: run_name must be a string, got {type(name).__name__}")
        try:
            with self._torch.no_grad():
                if not self._run_names and self._table is not None:
                    self._simulate(args)
                output = self._runs.run(args, name)
        except BaseException as e:
            self._abandon(f"run {name!r} failed ({type(e).__name__})")
            raise
        self._run_names.append(name)
        return output

    def _simulate(self, first_args) -> None:
        """Matches the encodings to the stored names (the name pass runs `first_args` once in
        float, storing nothing) and turns on fake quantization."""
        quantizer, not_quantized, unused, _ = _matched_simulation(
            self._table, *self._graph, first_args, self._torch)
        _warn_simulation(self._who, not_quantized, unused)
        self._sink.encode = quantizer
        self._float = (tuple(not_quantized), tuple(unused))

    def close(self) -> CaptureSummary:
        """Commits the store at `path` and returns the CaptureSummary (again if already
        committed). A session with no run writes nothing (ValueError)."""
        if self.summary is not None:
            return self.summary
        self._check_open()
        if not self._run_names:
            self._abandon("no run was captured")
            raise ValueError(f"{self._who}: no run was captured, so {self.path} is not written: "
                             "call the session once per run before closing it")
        not_run = self._runs.not_run(self._who)
        try:
            self._writer.close()
        except BaseException as e:
            self._abandon(f"committing it failed ({type(e).__name__})")
            raise
        self.summary = CaptureSummary(
            path=self.path, naming=self.naming, run_names=tuple(self._run_names),
            tensors=self._sink.tensors, bytes=self._sink.bytes, nodes=self._runs.nodes,
            skipped=tuple(self._sink.skipped), modules_not_run=not_run,
            not_quantized=self._float[0], unused_encodings=self._float[1])
        return self.summary

    def abort(self) -> None:
        """Drops everything written: nothing is left at `path` (no effect once committed)."""
        if self.summary is None:
            self._abandon("it was aborted")

    def _abandon(self, why: str) -> None:
        if self._abandoned is None:
            self._abandoned = why
            self._writer.abort()

    def _check_open(self) -> None:
        if self.summary is not None:
            raise RuntimeError(f"{self._who}: {self.path} is already written; open a new session")
        if self._abandoned is not None:
            raise RuntimeError(f"{self._who}: nothing is written at {self.path}: the session "
                               f"was abandoned when {self._abandoned}")

    def __repr__(self):
        state = "written" if self.summary is not None else \
            "abandoned" if self._abandoned is not None else "open"
        return f"CaptureSession({self.path!r}, {len(self._run_names)} run(s), {state})"


def capture_session(model, path, *, naming: str = "fx", producer: Optional[str] = None,
                    model_name: Optional[str] = None, encodings=None) -> CaptureSession:
    """A CaptureSession writing a new store at `path`: for a model whose inputs are not known up
    front (an LLM decode loop: each step's token is picked from the previous step's output).

    >>> with capture_session(model, "device.h5", naming="module") as session:
    ...     logits = session(prompt, run_name="prefill")
    ...     for step in range(1, 65):
    ...         logits = session(logits[:, -1:].argmax(-1), run_name=f"step {step}")

    Each call stores one run exactly as capture_torch stores one input (names, handles, roles,
    the op graph from the first run); the arguments are as capture_torch's. Arguments are
    checked, and an fx model traced, before anything is written."""
    return CaptureSession(model, path, naming=naming, producer=producer, model_name=model_name,
                          encodings=encodings)


def capture_torch(model, inputs, path, *, naming: str = "fx", run_names=None,
                  producer: Optional[str] = None, model_name: Optional[str] = None,
                  encodings=None) -> CaptureSummary:
    """Runs `model` on each element of `inputs` (one run each) and stores every op's output
    tensors in a new store at `path` (see the module documentation for names, handles and
    roles). Returns a CaptureSummary. On any error nothing is left at `path` and the error
    propagates: TypeError/ValueError for bad arguments, TorchTraceError when fx cannot trace the
    model, and whatever the model raises.

    inputs: a list, one element per run: a tensor or a tuple/list of positional arguments; or
    teacher_inputs(store) (another store's graph inputs, run by run, whose run names are then the
    default run_names).

    encodings (naming="fx" only): a path or list of paths of encodings files (converter
    *_net.json, context-binary JSON, plain map; merged as the CLI's repeated --encodings). Every
    stored floating-point tensor with an encoding is fake-quantized (qnn_debug.simulate), the
    fake-quantized value flows to the nodes downstream, and its integer codes are stored with
    the encoding. A bad file is a QnnDebugError naming it. A dict (simulate.load_encodings'
    table, perhaps changed by fix.apply_changes) is taken as the loaded encodings."""
    torch = _import_torch("capture_torch")
    runs, names = _normalize_runs(inputs, run_names, torch)
    with CaptureSession(model, path, naming=naming, producer=producer, model_name=model_name,
                        encodings=encodings, _who="capture_torch") as session:
        for args, name in zip(runs, names):
            session(*args, run_name=name)
    return session.summary


# ---- teacher forcing ------------------------------------------------------------------------

class TeacherInputs(list):
    """capture_torch's `inputs` read from a store (teacher_inputs): one tuple of torch tensors
    per run, in run order; `run_names` are the store's run names (capture_torch's default run
    names for these inputs) and `path` the store."""

    def __init__(self, runs, run_names, path):
        super().__init__(runs)
        self.run_names = tuple(run_names)
        self.path = path


def teacher_inputs(store, *, names: Optional[Sequence[str]] = None) -> TeacherInputs:
    """Every run's graph inputs of `store` (a path or a Store), as the positional arguments of
    one run each: capture_torch(model, teacher_inputs("device.h5"), "reference.h5") runs the
    reference on exactly what the device ran on, run by run, so that the two stores' runs align
    even where the device's own outputs (its generated tokens) went wrong.

    Matching: without `names`, the run's tensors of role graph_input, in capture order, are the
    arguments in that order (capture_torch stores positional argument k as ``input_<k>`` with
    naming="module", and the fx placeholders in the forward's parameter order). `names` gives
    the tensors by name, in argument order, whatever their role. Values: a quantized tensor
    dequantized (float32), any other as stored (int64 token ids stay int64), in the reference
    layout. A run without them is a ValueError naming the store and the run."""
    torch = _import_torch("teacher_inputs")
    from .store import Store

    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence)):
        raise TypeError("teacher_inputs: names must be a list of tensor names")
    store = store if isinstance(store, Store) else Store(store)
    if not store.runs:
        raise ValueError(f"teacher_inputs: {store.path} has no run")
    runs = [tuple(torch.from_numpy(_argument_value(t)) for t in _run_inputs(store, run, names))
            for run in store.runs]
    return TeacherInputs(runs, [run.name for run in store.runs], store.path)


def _run_inputs(store, run, names):
    """The stored tensors that are `run`'s arguments (see teacher_inputs)."""
    where = f"teacher_inputs: run {run.id} ({run.name!r}) of {store.path}"
    if names is None:
        found = [t for t in run.tensors if t.role == "graph_input"]
        if not found:
            raise ValueError(f"{where} has no graph_input tensor, so there is nothing to feed "
                             "the model; name the tensors to use with names=[...]")
        return found
    by_name: Dict[str, Any] = {}
    for t in run.tensors:
        by_name.setdefault(t.name, t)
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ValueError(f"{where} has no tensor {_listed(missing)}")
    return [by_name[name] for name in names]


def _argument_value(tensor):
    """A stored tensor as a model argument: a quantized one dequantized in the reference layout
    (Tensor.numpy), any other with its stored values in the reference layout."""
    if tensor.quantization:
        return tensor.numpy(dequantize=True)
    values = tensor.numpy()
    order = list(tensor.axis_order)
    if len(order) == values.ndim and order != sorted(order):
        values = values.transpose(order)  # reference axis i is stored axis order[i]
    return values
