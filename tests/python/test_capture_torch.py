"""qnn_debug.capture_torch: every op's output of a PyTorch model, bit for bit, into a store.

The expected values come from outside capture_torch: forward hooks on the original modules and a
plain recording torch.fx.Interpreter that clones each node's value the moment it is computed.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_capture_torch.py
"""
import copy
import json
import operator
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="capture_torch needs PyTorch (python3-torch)")
import torch.fx  # noqa: E402
from torch import nn  # noqa: E402

qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
from qnn_debug.torch_capture import (  # noqa: E402
    CaptureSummary, CaptureWarning, TorchTraceError, capture_torch)


# ---- helpers --------------------------------------------------------------------------------

def same_bits(a, b):
    """Equal dtype, shape and bytes (-0.0 and NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def as_numpy(t):
    return t.detach().cpu().contiguous().numpy().copy()


class Recorder(torch.fx.Interpreter):
    """A plain Interpreter that keeps a copy of every node's value when it is computed."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        value = super().run_node(n)
        self.values[n.name] = copy_value(value)
        return value


def copy_value(value):
    if isinstance(value, torch.Tensor):
        return as_numpy(value)
    if isinstance(value, (tuple, list)):
        return type(value)(copy_value(v) for v in value)
    return value


def hook_outputs(model, args):
    """{qualified module name: [copies of the output, one per call]} from forward hooks."""
    seen = {}
    handles = [m.register_forward_hook(
        lambda mod, inp, out, name=name: seen.setdefault(name, []).append(copy_value(out)))
        for name, m in model.named_modules() if name and next(m.children(), None) is None]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for h in handles:
            h.remove()
    return seen


def by_name(run):
    tensors = {t.name: t for t in run.tensors}
    assert len(tensors) == len(run.tensors), "duplicate tensor names in a run"
    return tensors


# ---- models ---------------------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)  # overwrites bn1's output: the store must not see it
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        z = self.bn2(self.conv2(y))
        z = torch.relu(z + y)
        z = self.pool(z)
        z = torch.flatten(z, 1)
        return self.fc(z)


def make_cnn():
    torch.manual_seed(0)
    model = SmallCNN()
    for bn in (model.bn1, model.bn2):  # non-trivial running statistics
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


CNN_TENSORS = ["x", "conv1", "bn1", "relu", "conv2", "bn2", "add", "relu_1", "pool", "flatten",
               "fc"]
CNN_OPS = {"conv1": "Conv2d", "bn1": "BatchNorm2d", "relu": "ReLU", "conv2": "Conv2d",
           "bn2": "BatchNorm2d", "add": "add", "relu_1": "relu", "pool": "MaxPool2d",
           "flatten": "flatten", "fc": "Linear"}
CNN_INPUTS = {"conv1": ["x"], "bn1": ["conv1"], "relu": ["bn1"], "conv2": ["relu"],
              "bn2": ["conv2"], "add": ["bn2", "relu"], "relu_1": ["add"], "pool": ["relu_1"],
              "flatten": ["pool"], "fc": ["flatten"]}


class Block(nn.Module):
    """Pre-norm attention with q/k/v from one linear, top-k sparse attention and a GLU MLP."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.d, self.heads = d, heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        h = self.ln1(x)
        parts = torch.split(self.qkv(h), self.d, dim=-1)  # one node, three outputs
        q = parts[0].reshape(b, t, self.heads, -1).transpose(1, 2)
        k = parts[1].reshape(b, t, self.heads, -1).transpose(1, 2)
        v = parts[2].reshape(b, t, self.heads, -1).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (self.d // self.heads) ** -0.5
        top = torch.topk(scores, 3, dim=-1)  # values and indices both used
        sparse = torch.full_like(scores, -1e9).scatter(-1, top[1], top[0])
        attn = torch.softmax(sparse, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, self.d)
        x = x + self.proj(out)
        ab = self.fc1(self.ln2(x)).chunk(2, dim=-1)  # call_method with two outputs
        return x + self.fc2(ab[0] * torch.sigmoid(ab[1]))


# ---- 1. fx capture of a CNN -----------------------------------------------------------------

def test_cnn_every_tensor_bit_for_bit(tmp_path):
    model = make_cnn()
    torch.manual_seed(1)
    inputs = [torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8) * 3]
    path = tmp_path / "ref.h5"
    summary = capture_torch(model, inputs, path, run_names=["cat", "dog"], model_name="cnn")
    assert isinstance(summary, CaptureSummary)
    assert (summary.runs, summary.run_names, summary.nodes) == (2, ("cat", "dog"), 10)
    assert summary.tensors == 2 * len(CNN_TENSORS) and summary.skipped == ()

    store = qnn_debug.Store(str(path))
    assert [(r.name, r.complete) for r in store.runs] == [("cat", True), ("dog", True)]
    assert store.metadata["model"] == "cnn"
    gm = torch.fx.symbolic_trace(model)
    total = 0
    for run, x in zip(store.runs, inputs):
        assert [t.name for t in run.tensors] == CNN_TENSORS
        recorder = Recorder(gm)
        with torch.no_grad():
            recorder.run(x)
        hooks = hook_outputs(model, (x,))
        tensors = by_name(run)
        for name in CNN_TENSORS:
            stored = tensors[name].numpy()
            assert same_bits(stored, recorder.values[name]), name
            assert tensors[name].dtype == "FLOAT_32"
            assert tensors[name].dims == list(recorder.values[name].shape)
            assert tensors[name].output_index == 0
            total += stored.nbytes
        for fx_name, module in [("conv1", "conv1"), ("bn1", "bn1"), ("relu", "relu"),
                                ("conv2", "conv2"), ("bn2", "bn2"), ("pool", "pool"),
                                ("fc", "fc")]:
            assert same_bits(tensors[fx_name].numpy(), hooks[module][0]), fx_name
        # The in-place ReLU overwrote bn1's output after bn1 finished: the copy predates it.
        assert (tensors["bn1"].numpy() < 0).any()
        assert same_bits(tensors["x"].numpy(), as_numpy(x))
        assert same_bits(tensors["fc"].numpy(), as_numpy(model(x).detach()))
        roles = {t.name: t.role for t in run.tensors}
        assert roles == {**{n: "intermediate" for n in CNN_TENSORS}, "x": "graph_input",
                         "fc": "graph_output"}
        handles = {t.name: list(t.handles) for t in run.tensors}
        assert handles == {"x": [], **{n: [i] for i, n in enumerate(CNN_TENSORS[1:], 1)}}
    assert summary.bytes == total

    graph = {g["name"]: g for g in store.graph}
    assert [g["name"] for g in store.graph] == CNN_TENSORS[1:]
    for name in CNN_TENSORS[1:]:
        assert graph[name]["op_type"] == CNN_OPS[name], name
        assert list(graph[name]["inputs"]) == CNN_INPUTS[name], name
        assert list(graph[name]["outputs"]) == [name]
        assert list(graph[name]["handles"]) == [CNN_TENSORS.index(name)]


# ---- 2. multi-output nodes ------------------------------------------------------------------

BLOCK_TENSORS = [  # (name, handle); getattr_1 (1) and getattr_2 (2) give torch.Size values
    ("x", None), ("ln1", 3), ("qkv", 4), ("split@0", 5), ("split@1", 5), ("split@2", 5),
    ("reshape", 6), ("transpose", 7), ("reshape_1", 8), ("transpose_1", 9), ("reshape_2", 10),
    ("transpose_2", 11), ("transpose_3", 12), ("matmul", 13), ("mul", 14), ("topk@0", 15),
    ("topk@1", 15), ("full_like", 16), ("scatter", 17), ("softmax", 18), ("matmul_1", 19),
    ("transpose_4", 20), ("reshape_3", 21), ("proj", 22), ("add", 23), ("ln2", 24), ("fc1", 25),
    ("chunk@0", 26), ("chunk@1", 26), ("sigmoid", 27), ("mul_1", 28), ("fc2", 29), ("add_1", 30)]


def test_transformer_multi_output_nodes(tmp_path):
    torch.manual_seed(2)
    model = Block().eval()
    x = torch.randn(2, 5, 16)
    path = tmp_path / "block.h5"
    summary = capture_torch(model, [x], path)
    gm = torch.fx.symbolic_trace(model)
    recorder = Recorder(gm)
    with torch.no_grad():
        final = recorder.run(x)

    store = qnn_debug.Store(str(path))
    run = store.runs[0]
    assert [(t.name, list(t.handles)) for t in run.tensors] == \
        [(name, [] if h is None else [h]) for name, h in BLOCK_TENSORS]
    assert summary.tensors == len(BLOCK_TENSORS)
    tensors = by_name(run)
    for name, _ in BLOCK_TENSORS:
        node, _, k = name.partition("@")
        expected = recorder.values[node][int(k)] if k else recorder.values[node]
        assert same_bits(tensors[name].numpy(), expected), name
        assert tensors[name].output_index == (int(k) if k else 0), name
    assert tensors["topk@1"].dtype == "INT_64" and tensors["topk@0"].dtype == "FLOAT_32"
    assert tensors["add_1"].role == "graph_output"
    assert same_bits(tensors["add_1"].numpy(), as_numpy(final))
    assert {t.role for t in run.tensors if t.name not in ("x", "add_1")} == {"intermediate"}

    getitems = [n.name for n in gm.graph.nodes if n.target is operator.getitem]
    assert len(getitems) == 9  # shape x2, split x3, topk x2, chunk x2: none stored or in the graph
    graph = {g["name"]: g for g in store.graph}
    assert not set(getitems) & (set(tensors) | set(graph))
    assert "getattr_1" not in graph  # no tensor output: not an op of the tensor graph
    assert list(graph["split"]["outputs"]) == ["split@0", "split@1", "split@2"]
    assert list(graph["reshape_1"]["inputs"]) == ["split@1"]  # torch.Size arguments are no tensors
    assert list(graph["topk"]["outputs"]) == ["topk@0", "topk@1"]
    assert list(graph["scatter"]["inputs"]) == ["full_like", "topk@1", "topk@0"]
    assert list(graph["sigmoid"]["inputs"]) == ["chunk@1"]
    assert list(graph["mul_1"]["inputs"]) == ["chunk@0", "sigmoid"]
    assert graph["chunk"]["op_type"] == "chunk" and graph["ln1"]["op_type"] == "LayerNorm"
    assert list(graph["chunk"]["handles"]) == [26]


# ---- 3. handle numbering --------------------------------------------------------------------

class Tiny(nn.Module):
    def forward(self, x):
        a = torch.relu(x)                  # relu       1
        parts = torch.split(a, 2, dim=1)   # split      2   (getitem, getitem_1: 2, not stored)
        s = parts[0] + parts[1]            # add        3
        t = torch.topk(s, 1, dim=1)        # topk       4   (getitem_2, getitem_3: 4)
        y = t[0] * t[1].float()            # float_1    5,  mul 6
        z = s[:, 0]                        # getitem_4  7   (indexing a tensor is an op)
        return y, z, parts[1]              # split@1 is returned through getitem_1


def test_handles_follow_executorch_numbering(tmp_path):
    path = tmp_path / "tiny.h5"
    capture_torch(Tiny(), [torch.randn(2, 4)], path)
    store = qnn_debug.Store(str(path))
    got = [(t.name, list(t.handles), t.output_index, t.role) for t in store.runs[0].tensors]
    assert got == [
        ("x", [], 0, "graph_input"),
        ("relu", [1], 0, "intermediate"),
        ("split@0", [2], 0, "intermediate"),
        ("split@1", [2], 1, "graph_output"),
        ("add", [3], 0, "intermediate"),
        ("topk@0", [4], 0, "intermediate"),
        ("topk@1", [4], 1, "intermediate"),
        ("float_1", [5], 0, "intermediate"),
        ("mul", [6], 0, "graph_output"),
        ("getitem_4", [7], 0, "graph_output"),
    ]
    graph = [(g["name"], g["op_type"], list(g["inputs"]), list(g["handles"])) for g in store.graph]
    assert graph == [
        ("relu", "relu", ["x"], [1]),
        ("split", "split", ["relu"], [2]),
        ("add", "add", ["split@0", "split@1"], [3]),
        ("topk", "topk", ["add"], [4]),
        ("float_1", "float", ["topk@1"], [5]),
        ("mul", "mul", ["topk@0", "float_1"], [6]),
        ("getitem_4", "getitem", ["add"], [7]),
    ]


class QnnLookalikeNames(nn.Module):
    """fx names that the executorch-qnn preset would read as roles or output indices."""

    def __init__(self):
        super().__init__()
        self.input_proj = nn.Linear(4, 4)
        self.output_proj = nn.Linear(4, 4)

    def forward(self, input_1):
        a = torch.relu(self.input_proj(input_1))
        b = torch.relu(a)
        c = torch.relu(b)
        return self.output_proj(c) + 1


def test_roles_and_indices_are_given_not_parsed_from_names(tmp_path):
    path = tmp_path / "names.h5"
    capture_torch(QnnLookalikeNames(), [torch.randn(2, 4)], path)
    got = [(t.name, t.output_index, t.role) for t in qnn_debug.Store(str(path)).runs[0].tensors]
    assert got == [("input_1", 0, "graph_input"), ("input_proj", 0, "intermediate"),
                   ("relu", 0, "intermediate"), ("relu_1", 0, "intermediate"),
                   ("relu_2", 0, "intermediate"), ("output_proj", 0, "intermediate"),
                   ("add", 0, "graph_output")]


# ---- 4. an emulated int8 device run against the fx reference ---------------------------------

def quantize_int8(values):
    values = np.asarray(values, np.float32)
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    scale = peak / 127 if peak > 0 else 1.0
    return np.clip(np.rint(values / scale), -127, 127).astype(np.int8), scale


def write_device(ref_path, dev_path, fault=None, factor=1.5):
    """A QNN-like device store: every reference tensor quantized to int8 (per-tensor, symmetric),
    named <node>@<k>, same handles; the `fault` node's values are scaled by `factor` first."""
    ref = qnn_debug.Store(str(ref_path))
    with qnn_debug.StoreWriter(str(dev_path), producer="emulated htp", backend="htp",
                               naming="executorch-qnn") as w:
        for run in ref.runs:
            w.begin_run(run.name)
            for t in run.tensors:
                values = t.numpy(dequantize=True)
                if t.name == fault:
                    values = values * np.float32(factor)
                q, scale = quantize_int8(values)
                name = t.name if "@" in t.name else f"{t.name}@{max(t.output_index, 0)}"
                w.write(name, q, dtype="SFIXED_POINT_8", handles=list(t.handles),
                        output_index=max(t.output_index, 0), role=t.role, scale=scale, offset=0)
            w.end_run()


def test_emulated_int8_device_run_finds_the_fault(tmp_path):
    model = make_cnn()
    torch.manual_seed(3)
    ref_path = tmp_path / "ref.h5"
    capture_torch(model, [torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)], ref_path)

    clean = tmp_path / "clean.h5"
    write_device(ref_path, clean)
    report = qnn_debug.diff(str(ref_path), str(clean))
    assert report.verdict == "pass", json.dumps(report.summary)
    assert report.first_divergence is None
    for run in report.runs:
        pairs = [p for g in run["groups"] for p in g["pairs"]]
        assert sorted(p["reference"]["name"] for p in pairs) == sorted(CNN_TENSORS)
        for p in pairs:
            name = p["reference"]["name"]
            assert p["device"]["name"] == f"{name}@0"
            assert p["metrics"]["sqnr_db"] > 30, name

    for fault in ("conv2", "relu_1"):
        faulty = tmp_path / f"fault_{fault}.h5"
        write_device(ref_path, faulty, fault=fault)
        report = qnn_debug.diff(str(ref_path), str(faulty))
        assert report.verdict == "fail" and report.first_divergence is not None
        assert len(report.runs) == 2
        for run in report.runs:
            groups = {g["id"]: g for g in run["groups"]}
            first = groups[run["first_divergence"]]
            assert [(p["reference"]["name"], p["device"]["name"]) for p in first["pairs"]] == \
                [(fault, f"{fault}@0")], (fault, first)
            assert first["verdict"] == "fail"
            assert first["handles"] == [CNN_TENSORS.index(fault)]


# ---- 5. module hooks ------------------------------------------------------------------------

class Looping(nn.Module):
    """Data-dependent control flow (fx cannot trace it) and a module called three times."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = self.act(self.inp(x))
        for block in self.blocks:
            h = self.act(block(h))
        if h.sum() > 0:
            h = h * 2
        out = self.rnn(h)[0]
        return self.head(out)


LOOPING_TENSORS = [("input_0", [], 0, "graph_input"), ("inp", [1], 0, "intermediate"),
                   ("act", [2], 0, "intermediate"), ("blocks.0", [3], 0, "intermediate"),
                   ("act#1", [4], 0, "intermediate"), ("blocks.1", [5], 0, "intermediate"),
                   ("act#2", [6], 0, "intermediate"), ("rnn@0", [7], 0, "intermediate"),
                   ("rnn@1", [7], 1, "intermediate"), ("head", [8], 0, "intermediate"),
                   ("output_0", [], 0, "graph_output")]


def test_module_hooks_name_by_qualified_name(tmp_path):
    torch.manual_seed(4)
    model = Looping().eval()
    xs = [torch.randn(1, 3, 4), torch.randn(1, 3, 4)]
    path = tmp_path / "hooks.h5"
    summary = capture_torch(model, xs, path, naming="module")
    assert summary.naming == "module" and summary.tensors == 2 * len(LOOPING_TENSORS)
    assert all(not m._forward_hooks for m in model.modules())  # hooks removed

    store = qnn_debug.Store(str(path))
    assert store.metadata["model"] == "Looping"
    for run, x in zip(store.runs, xs):
        got = [(t.name, list(t.handles), t.output_index, t.role) for t in run.tensors]
        assert got == LOOPING_TENSORS
        hooks = hook_outputs(model, (x,))
        tensors = by_name(run)
        expected = {"inp": hooks["inp"][0], "act": hooks["act"][0], "act#1": hooks["act"][1],
                    "act#2": hooks["act"][2], "blocks.0": hooks["blocks.0"][0],
                    "blocks.1": hooks["blocks.1"][0], "rnn@0": hooks["rnn"][0][0],
                    "rnn@1": hooks["rnn"][0][1], "head": hooks["head"][0],
                    "input_0": as_numpy(x)}
        with torch.no_grad():
            expected["output_0"] = as_numpy(model(x))
        assert not same_bits(expected["act"], expected["act#1"])
        for name, value in expected.items():
            assert same_bits(tensors[name].numpy(), value), name
    graph = [(g["name"], g["op_type"], list(g["inputs"]), list(g["outputs"]), list(g["handles"]))
             for g in store.graph]
    assert graph == [
        ("inp", "Linear", ["input_0"], ["inp"], [1]),
        ("act", "ReLU", ["inp"], ["act"], [2]),
        ("blocks.0", "Linear", ["act"], ["blocks.0"], [3]),
        ("act#1", "ReLU", ["blocks.0"], ["act#1"], [4]),
        ("blocks.1", "Linear", ["act#1"], ["blocks.1"], [5]),
        ("act#2", "ReLU", ["blocks.1"], ["act#2"], [6]),
        ("rnn", "GRU", [], ["rnn@0", "rnn@1"], [7]),  # h * 2 is no module: its input is unknown
        ("head", "Linear", ["rnn@0"], ["head"], [8]),
    ]


# ---- 5b. what module hooks would miss ------------------------------------------------------

def encoder_layer():
    torch.manual_seed(5)
    return nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                      batch_first=True).eval()


def test_transformer_encoder_layer_runs_its_submodules_during_capture(tmp_path):
    # Before: PyTorch's fused fast path skipped every submodule: only input_0 and output_0.
    layer = encoder_layer()
    x = torch.randn(2, 4, 8)
    path = tmp_path / "layer.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)  # every hooked module ran
        summary = capture_torch(layer, [x], path, naming="module")
    run = qnn_debug.Store(str(path)).runs[0]
    assert [t.name for t in run.tensors] == [
        "input_0", "self_attn@0", "dropout1", "norm1", "linear1", "dropout", "linear2",
        "dropout2", "norm2", "output_0"]  # need_weights=False: self_attn@1 is None, not stored
    assert summary.modules_not_run == ()
    tensors = by_name(run)
    with torch.no_grad():  # the ordinary (post-norm) path, by hand
        attn = layer.self_attn(x, x, x, need_weights=False)[0]
        h = layer.norm1(x + attn)
        inner = layer.linear1(h)
        ff = layer.linear2(torch.relu(inner))
        expected = {"self_attn@0": attn, "norm1": h, "linear1": inner, "linear2": ff,
                    "norm2": layer.norm2(h + ff), "output_0": layer.norm2(h + ff)}
        fused = layer(x)  # after capture: the fast path again
    for name, value in expected.items():
        assert same_bits(tensors[name].numpy(), as_numpy(value)), name
    np.testing.assert_allclose(tensors["output_0"].numpy(), as_numpy(fused), rtol=0, atol=1e-5)
    assert layer.activation_relu_or_gelu == 1  # the fast-path switch is restored


def test_transformer_encoder_skips_its_nested_tensor_path_during_capture(tmp_path):
    encoder = nn.TransformerEncoder(encoder_layer(), num_layers=2).eval()
    x = torch.randn(1, 4, 8)
    padding = torch.tensor([[False, False, False, True]])
    path = tmp_path / "encoder.h5"
    summary = capture_torch(encoder, [(x, None, padding)], path, naming="module")
    layer_names = ["self_attn@0", "dropout1", "norm1", "linear1", "dropout", "linear2",
                   "dropout2", "norm2"]
    run = qnn_debug.Store(str(path)).runs[0]
    assert [t.name for t in run.tensors] == (
        ["input_0", "input_2"] + [f"layers.0.{n}" for n in layer_names] +
        [f"layers.1.{n}" for n in layer_names] + ["output_0"])
    tensors = by_name(run)
    assert same_bits(tensors["output_0"].numpy(), tensors["layers.1.norm2"].numpy())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype"
        fused = encoder(x, src_key_padding_mask=padding)  # the nested path zeroes padding
    np.testing.assert_allclose(tensors["output_0"].numpy()[:, :3], as_numpy(fused)[:, :3],
                               rtol=0, atol=1e-5)
    assert all(m.activation_relu_or_gelu == 1 for m in encoder.layers)
    assert summary.modules_not_run == ()


def test_multihead_attention_outputs_are_captured(tmp_path):
    # Before: MultiheadAttention has a child (out_proj, never called), so it was not hooked.
    torch.manual_seed(6)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q, k, v = torch.randn(1, 3, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8)
    path = tmp_path / "mha.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        capture_torch(mha, [(q, k, v)], path, naming="module")
    store = qnn_debug.Store(str(path))
    tensors = by_name(store.runs[0])
    assert list(tensors) == ["input_0", "input_1", "input_2", "MultiheadAttention@0",
                             "MultiheadAttention@1", "output_0", "output_1"]
    with torch.no_grad():
        out, weights = mha(q, k, v)
    assert same_bits(tensors["MultiheadAttention@0"].numpy(), as_numpy(out))
    assert same_bits(tensors["MultiheadAttention@1"].numpy(), as_numpy(weights))
    assert tensors["MultiheadAttention@1"].dims == [1, 3, 5]
    assert [(g["name"], g["op_type"], list(g["inputs"]), list(g["outputs"])) for g in store.graph] \
        == [("MultiheadAttention", "MultiheadAttention", ["input_0", "input_1", "input_2"],
             ["MultiheadAttention@0", "MultiheadAttention@1"])]


class WithSpare(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.spare = nn.Linear(4, 4)  # never called

    def forward(self, x):
        return self.fc(x)


class CallsNoSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x):  # the submodules' parameters, used directly
        return torch.nn.functional.linear(x, self.fc.weight, self.fc.bias).clamp(min=0)


def test_a_module_that_never_runs_is_named_in_a_warning(tmp_path):
    xs = [torch.randn(2, 4), torch.randn(2, 4)]
    with pytest.warns(CaptureWarning) as caught:
        summary = capture_torch(WithSpare().eval(), xs, tmp_path / "s.h5", naming="module")
    assert [str(w.message) for w in caught] == [
        "capture_torch: 1 module(s) of WithSpare never ran as a module in any run, so no tensor "
        "of theirs is stored: spare"]
    assert caught[0].filename == __file__  # points at the capture_torch call
    assert summary.modules_not_run == ("spare",)
    assert str(summary).endswith(", 1 module(s) never ran")
    store = qnn_debug.Store(str(tmp_path / "s.h5"))
    assert [[t.name for t in run.tensors] for run in store.runs] == \
        [["input_0", "fc", "output_0"]] * 2


def test_a_model_that_calls_no_submodule_says_only_its_ends_are_stored(tmp_path):
    with pytest.warns(CaptureWarning) as caught:
        summary = capture_torch(CallsNoSubmodule(), [torch.randn(2, 4)], tmp_path / "s.h5",
                                naming="module")
    assert [str(w.message) for w in caught] == [
        "capture_torch: no submodule of CallsNoSubmodule ran as a module, so only its inputs and "
        "outputs are stored; the model computes without calling fc, act (e.g. it uses their "
        "parameters directly or a fused kernel)"]
    assert summary.modules_not_run == ("fc", "act") and summary.tensors == 2


def test_fx_on_a_transformer_layer_says_to_use_module_naming(tmp_path):
    with pytest.raises(TorchTraceError) as info:
        capture_torch(encoder_layer(), [torch.randn(1, 4, 8)], tmp_path / "x.h5")
    assert str(info.value).startswith(
        "capture_torch: torch.fx.symbolic_trace cannot trace TransformerEncoderLayer (")
    assert str(info.value).endswith(
        "capture it with capture_torch(..., naming=\"module\"), which runs the model as itself "
        "and stores the outputs of its submodules (leaf modules and MultiheadAttention) through "
        "forward hooks")
    assert list(tmp_path.iterdir()) == []


# ---- 6. errors ------------------------------------------------------------------------------

def test_untraceable_module_suggests_module_naming(tmp_path):
    path = tmp_path / "x.h5"
    with pytest.raises(TorchTraceError, match='naming="module"') as info:
        capture_torch(Looping(), [torch.randn(1, 3, 4)], path)
    assert isinstance(info.value, RuntimeError) and info.value.__cause__ is not None
    assert list(tmp_path.iterdir()) == []


class FailsOnSecondRun(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.mark.parametrize("naming", ["fx", "module"])
def test_failing_forward_leaves_no_file(tmp_path, naming):
    model = FailsOnSecondRun()
    path = tmp_path / "x.h5"
    with pytest.raises(RuntimeError, match="mat1 and mat2|size mismatch|shapes cannot"):
        capture_torch(model, [torch.randn(2, 4), torch.randn(2, 5)], path, naming=naming)
    assert list(tmp_path.iterdir()) == []  # neither the store nor a temporary file
    assert all(not m._forward_hooks for m in model.modules())

    class Boom(Exception):
        pass

    def explode(*_):
        raise Boom("in a hook")
    handle = model.fc.register_forward_hook(explode)
    try:
        with pytest.raises(Boom):
            capture_torch(model, [torch.randn(2, 4)], path, naming=naming)
    finally:
        handle.remove()
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments_are_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "x.h5"
    model = FailsOnSecondRun()
    x = torch.randn(2, 4)
    with pytest.raises(TypeError, match=r"list.*\[x\]"):
        capture_torch(model, x, path)
    with pytest.raises(TypeError, match="list"):
        capture_torch(model, (x,), path)
    with pytest.raises(ValueError, match="empty"):
        capture_torch(model, [], path)
    with pytest.raises(TypeError, match=r"inputs\[1\]"):
        capture_torch(model, [x, 3.0], path)
    with pytest.raises(ValueError, match="run_names"):
        capture_torch(model, [x, x], path, run_names=["only one"])
    with pytest.raises(ValueError, match="naming"):
        capture_torch(model, [x], path, naming="debug-id")
    with pytest.raises(TypeError, match="nn.Module"):
        capture_torch(lambda t: t, [x], path)
    assert list(tmp_path.iterdir()) == []


# ---- 7. ExportedProgram-like objects --------------------------------------------------------

def edge_graph(lifted):
    """An edge-dialect-like graph: aten call_function ops, a multi-output op read by getitem,
    weights as get_attr (or, when `lifted`, as leading placeholders as torch.export lifts them)."""
    root = nn.Module()
    root.weight = nn.Parameter(torch.randn(4, 4))
    g = torch.fx.Graph()
    if lifted:
        w = g.placeholder("p_weight")
    x = g.placeholder("x")
    if not lifted:
        w = g.get_attr("weight")
    aten = torch.ops.aten
    mm = g.call_function(aten.mm.default, (x, w))
    mm.name = "aten_mm_default"
    relu = g.call_function(aten.relu.default, (mm,))
    relu.name = "aten_relu_default"
    split = g.call_function(aten.split.Tensor, (relu, 2, 1))
    split.name = "aten_split_tensor"
    first = g.call_function(operator.getitem, (split, 0))
    second = g.call_function(operator.getitem, (split, 1))
    add = g.call_function(aten.add.Tensor, (first, second))
    add.name = "aten_add_tensor"
    g.output((add,))
    return torch.fx.GraphModule(root, g), root.weight.detach()


class DuckProgram:
    def __init__(self, graph_module, **extra):
        self.graph_module = graph_module
        self.__dict__.update(extra)


def test_exported_program_like_objects(tmp_path):
    x = torch.randn(3, 4)
    gm, weight = edge_graph(lifted=False)
    relu = torch.relu(x @ weight)
    expected = {"x": x, "aten_mm_default": x @ weight, "aten_relu_default": relu,
                "aten_split_tensor@0": relu[:, :2], "aten_split_tensor@1": relu[:, 2:],
                "aten_add_tensor": relu[:, :2] + relu[:, 2:]}
    handles = {"x": [], "aten_mm_default": [1], "aten_relu_default": [2],
               "aten_split_tensor@0": [3], "aten_split_tensor@1": [3], "aten_add_tensor": [4]}

    def check(path):
        store = qnn_debug.Store(str(path))
        run = store.runs[0]
        assert [t.name for t in run.tensors] == list(expected)
        for t in run.tensors:
            assert same_bits(t.numpy(), as_numpy(expected[t.name])), t.name
            assert list(t.handles) == handles[t.name], t.name
        assert run.tensors[-1].role == "graph_output"
        assert [(g["name"], g["op_type"]) for g in store.graph] == [
            ("aten_mm_default", "aten.mm.default"), ("aten_relu_default", "aten.relu.default"),
            ("aten_split_tensor", "aten.split.Tensor"), ("aten_add_tensor", "aten.add.Tensor")]
        assert store.metadata["model"] == "DuckProgram"

    # graph_module only: run as is.
    capture_torch(DuckProgram(gm), [x], tmp_path / "a.h5")
    check(tmp_path / "a.h5")

    # module() giving a GraphModule wins over graph_module (which here cannot run).
    called = []

    def module():
        called.append(True)
        return gm
    capture_torch(DuckProgram(object(), module=module), [x], tmp_path / "b.h5")
    assert called
    check(tmp_path / "b.h5")

    # module() may add nodes of its own (newer torch adds guards): they get no handle, and the
    # others keep ExecuTorch's numbering of graph_module.
    guarded = copy.deepcopy(gm)
    placeholder = next(n for n in guarded.graph.nodes if n.op == "placeholder")
    with guarded.graph.inserting_after(placeholder):
        extra = guarded.graph.call_function(torch.abs, (placeholder,))
    extra.name = "guards"
    guarded.recompile()
    capture_torch(DuckProgram(gm, module=lambda: guarded), [x], tmp_path / "g.h5")
    run = qnn_debug.Store(str(tmp_path / "g.h5")).runs[0]
    assert [(t.name, list(t.handles)) for t in run.tensors] == \
        [("x", []), ("guards", [])] + [(n, h) for n, h in handles.items() if n != "x"]

    # A lifted graph_module with its signature: the weight placeholder is fed from state_dict
    # and is not a graph input.
    lifted, _ = edge_graph(lifted=True)
    signature = DuckProgram(None, inputs_to_parameters={"p_weight": "weight"})
    capture_torch(DuckProgram(lifted, graph_signature=signature, state_dict={"weight": weight}),
                  [x], tmp_path / "c.h5")
    check(tmp_path / "c.h5")

    with pytest.raises(TypeError, match="graph_module"):
        capture_torch(DuckProgram("not a graph"), [x], tmp_path / "d.h5")
    assert not (tmp_path / "d.h5").exists()


# ---- dtypes ---------------------------------------------------------------------------------

class Dtypes(nn.Module):
    def forward(self, x):
        half = x.half()
        bf = x.bfloat16()
        mask = x > 0
        idx = torch.argmax(x, dim=1)
        i8 = (x * 10).to(torch.int8)
        q = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
        qc = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                        torch.tensor([0, 1, -1, 2]), 1, torch.qint8)
        cplx = torch.complex(x, x)
        return half, bf, mask, idx, i8, q, qc, cplx


def test_dtypes_and_quantized_tensors(tmp_path):
    x = torch.randn(3, 4)
    x[0, 0] = -0.0
    path = tmp_path / "dtypes.h5"
    summary = capture_torch(Dtypes(), [x], path)
    assert [s[1] for s in summary.skipped] == ["complex_1"]
    store = qnn_debug.Store(str(path))
    t = by_name(store.runs[0])
    assert t["half"].dtype == "FLOAT_16" and same_bits(t["half"].numpy(), as_numpy(x.half()))
    assert t["bfloat16"].dtype == "BFLOAT_16"  # read back as float32, which holds it exactly
    assert same_bits(t["bfloat16"].numpy(), as_numpy(x.bfloat16().float()))
    assert not same_bits(t["bfloat16"].numpy(), as_numpy(x))
    assert t["gt"].dtype == "BOOL_8" and same_bits(t["gt"].numpy(), as_numpy(x > 0))
    assert t["argmax"].dtype == "INT_64"
    assert t["to"].dtype == "INT_8"
    q = torch.quantize_per_tensor(x, 0.05, 3, torch.quint8)
    qt = t["quantize_per_tensor"]
    assert qt.dtype == "UFIXED_POINT_8" and same_bits(qt.numpy(), as_numpy(q.int_repr()))
    assert (qt.quantization["scales"], qt.quantization["offsets"], qt.quantization["axis"],
            qt.quantization["convention"]) == ([0.05], [3], -1, "zero_point")
    np.testing.assert_allclose(qt.numpy(dequantize=True), as_numpy(q.dequantize()), rtol=1e-6)
    qc = t["quantize_per_channel"]
    ref = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                     torch.tensor([0, 1, -1, 2]), 1, torch.qint8)
    assert qc.dtype == "SFIXED_POINT_8" and same_bits(qc.numpy(), as_numpy(ref.int_repr()))
    assert (qc.quantization["scales"], qc.quantization["offsets"], qc.quantization["axis"],
            qc.quantization["convention"]) == \
        (ref.q_per_channel_scales().tolist(), [0, 1, -1, 2], 1, "zero_point")
    np.testing.assert_allclose(qc.numpy(dequantize=True), as_numpy(ref.dequantize()), rtol=1e-6)
    assert "complex_1" not in t
