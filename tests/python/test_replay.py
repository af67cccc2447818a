"""qnn_debug.replay: every op run alone on the device's values of its inputs.

The "device" is capture_torch of a copy of the model with two injected faults (one upstream op,
one downstream op), float or quantized with encodings. Diffed against the replay, only the two
faulty ops lose SQNR; the ops between them, which only inherit error, compare exact. Diffed
against the ordinary reference, everything after the first fault is bad.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_replay.py
"""
import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="replay needs PyTorch (python3-torch)")
import torch.fx  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")

BAD_DB = 20  # a faulty op (or one inheriting a fault, against the reference) is below this
GOOD_DB = 60  # an op that only inherits error, against the replay, is above this


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        a = torch.relu(self.conv1(x))
        b = torch.relu(self.conv2(a))
        c = torch.relu(self.conv3(b) + a)  # residual
        d = F.max_pool2d(c, 2)
        return self.fc(torch.flatten(self.pool(d), 1))


class Block(nn.Module):
    """A transformer block: pre-norm single-head attention and an MLP, residual adds."""

    def __init__(self, width=16):
        super().__init__()
        self.width = width
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        w = self.width
        qkv = self.qkv(self.ln1(x))
        q, k, v = qkv[..., :w], qkv[..., w:2 * w], qkv[..., 2 * w:]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * w ** -0.5, dim=-1)
        x = x + self.proj(torch.matmul(att, v))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def scaled(fn):
    def faulty(*args, **kwargs):
        return fn(*args, **kwargs) * 1.4 + 0.1
    return faulty


def with_faults(gm, faults):
    """A copy of `gm` whose nodes named in `faults` compute wrongly. The graph keeps its node
    names and order (so its handles): a function node gets a faulty target, a module node
    faulty weights."""
    bad = copy.deepcopy(gm)
    for node in bad.graph.nodes:
        if node.name not in faults:
            continue
        if node.op == "call_module":
            with torch.no_grad():
                bad.get_submodule(node.target).weight.mul_(1.5)
        else:
            node.target = scaled(node.target)
    bad.recompile()
    return bad


def encodings_for(store_path, path):
    """A plain map of 8-bit asymmetric encodings, one per stored tensor, from its range."""
    ranges = {}
    for t in qnn_debug.Store(store_path).tensors:
        lo, hi = ranges.get(t.name, (0.0, 0.0))
        ranges[t.name] = (min(lo, t.stats["min"]), max(hi, t.stats["max"]))
    encodings = {}
    for name, (lo, hi) in ranges.items():
        scale = max(hi - lo, 1e-6) / 255
        encodings[name] = {"scale": scale, "offset": int(round(lo / scale)),
                           "dtype": "UFIXED_POINT_8"}
    path.write_text(json.dumps(encodings))
    return path


def sqnr_by_name(report):
    return {g["pairs"][0]["reference"]["name"]: float(g["sqnr_db"])
            for g in report.json["runs"][0]["groups"] if g["pairs"]}


CASES = {
    # model, input shape, upstream fault, downstream fault, the ops between them
    "cnn": (SmallCNN, (1, 3, 8, 8), "conv2", "add", ["relu_1", "conv3"]),
    "transformer": (Block, (1, 6, 16), "softmax", "gelu",
                    ["matmul_1", "proj", "add", "ln2", "fc1"]),
}


@pytest.mark.parametrize("quantized", [False, True], ids=["float", "int8"])
@pytest.mark.parametrize("case", list(CASES))
def test_replay_isolates_the_faulty_ops(case, quantized, tmp_path):
    make, shape, upstream, downstream, between = CASES[case]
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(make().eval())
    inputs = [torch.randn(*shape) for _ in range(2)]
    encodings = None
    if quantized:
        qnn_debug.capture_torch(gm, inputs, tmp_path / "float.h5")
        encodings = encodings_for(tmp_path / "float.h5", tmp_path / "enc.json")
    bad = with_faults(gm, {upstream, downstream})
    qnn_debug.capture_torch(bad, inputs, tmp_path / "device.h5", encodings=encodings)
    qnn_debug.capture_torch(gm, inputs, tmp_path / "reference.h5", encodings=encodings)
    summary = qnn_debug.replay(gm, inputs, tmp_path / "device.h5", tmp_path / "replay.h5",
                               encodings=encodings)
    assert summary.replayed_inputs == () and summary.device_unmatched == ()
    assert summary.nodes == sum(n.op.startswith("call_") for n in gm.graph.nodes)

    replayed = sqnr_by_name(qnn_debug.diff(tmp_path / "replay.h5", tmp_path / "device.h5"))
    against_reference = sqnr_by_name(qnn_debug.diff(tmp_path / "reference.h5",
                                                     tmp_path / "device.h5"))
    bad_ops = {name for name, db in replayed.items() if db < GOOD_DB}
    assert bad_ops == {upstream, downstream}, replayed
    assert replayed[upstream] < BAD_DB and replayed[downstream] < BAD_DB
    for name in between:
        assert replayed[name] == float("inf") or replayed[name] > GOOD_DB, (name, replayed)
        assert against_reference[name] < BAD_DB, (name, against_reference)
    # The same as the report's "isolated" column (diff REF DEV --isolated REPLAY): its part names
    # both faulty ops, the first of them as where the isolated part diverges.
    report = qnn_debug.diff(tmp_path / "reference.h5", tmp_path / "device.h5",
                            isolated=tmp_path / "replay.h5")
    isolated = {g["pairs"][0]["reference"]["name"]: float(g["parts"]["isolated"]["sqnr_db"])
                for g in report.groups if g["parts"]["isolated"] is not None}
    assert isolated == replayed
    first_isolated = report.runs[0]["parts"]["isolated"]["first_divergence"]
    assert next(g for g in report.groups if g["id"] == first_isolated)["pairs"][0]["reference"][
        "name"] == upstream
    assert "isolated     (ISO vs DEV): first divergence" in report.summary_text()
    # Against the reference every op from the first fault on is bad; before it, good.
    order = [n.name for n in gm.graph.nodes if n.name in against_reference]
    first = order.index(upstream)
    assert all(against_reference[name] > GOOD_DB for name in order[:first])
    assert all(against_reference[name] < BAD_DB + 10 for name in order[first:]), \
        against_reference


def test_replay_store_has_the_capture_names_handles_and_roles(tmp_path):
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(SmallCNN().eval())
    inputs = [torch.randn(1, 3, 8, 8)]
    qnn_debug.capture_torch(gm, inputs, tmp_path / "reference.h5")
    qnn_debug.replay(gm, inputs, tmp_path / "reference.h5", tmp_path / "replay.h5")

    def keys(path):
        return [(t.name, t.handles, t.output_index, t.role, t.dtype)
                for t in qnn_debug.Store(path).tensors]
    assert keys(tmp_path / "replay.h5") == keys(tmp_path / "reference.h5")
    report = qnn_debug.diff(tmp_path / "replay.h5", tmp_path / "reference.h5")
    assert all(g["sqnr_db"] == "inf" for g in report.json["runs"][0]["groups"])


def test_a_fused_device_chain_is_replayed_from_the_tensors_before_it(tmp_path):
    """The device stores conv2+relu_1 as one tensor (relu_1 with both handles): conv2 has no
    device counterpart, so relu_1 is replayed from the replayed conv2, which read the device's
    relu (the last device tensor before the chain)."""
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(SmallCNN().eval())
    inputs = [torch.randn(1, 3, 8, 8)]
    qnn_debug.capture_torch(with_faults(gm, {"conv2"}), inputs, tmp_path / "faulty.h5")
    faulty = qnn_debug.Store(tmp_path / "faulty.h5")
    conv2 = faulty.tensor("conv2").handles
    with qnn_debug.StoreWriter(tmp_path / "fused.h5", backend="emulated") as w:
        w.begin_run("run0")
        for t in faulty.runs[0].tensors:
            if t.name == "conv2":
                continue
            handles = conv2 + t.handles if t.name == "relu_1" else t.handles
            w.write(f"{t.name}@0" if t.handles else t.name, t.numpy(), handles=handles,
                    role=t.role)
        w.end_run()
    summary = qnn_debug.replay(gm, inputs, tmp_path / "fused.h5", tmp_path / "replay.h5")
    assert summary.replayed_inputs == ("relu_1",)
    replayed = qnn_debug.diff(tmp_path / "replay.h5", tmp_path / "fused.h5")
    by_id = {g["id"]: g for g in replayed.json["runs"][0]["groups"]}
    assert "h3,4" in by_id, list(by_id)
    fused = by_id["h3,4"]
    assert fused["pairs"][0]["reference"]["name"] == "relu_1"
    assert float(fused["sqnr_db"]) < BAD_DB
    assert all(g["sqnr_db"] == "inf" for gid, g in by_id.items() if gid != "h3,4"), by_id


def test_run_counts_must_match(tmp_path):
    gm = torch.fx.symbolic_trace(SmallCNN().eval())
    qnn_debug.capture_torch(gm, [torch.randn(1, 3, 8, 8)], tmp_path / "device.h5")
    with pytest.raises(ValueError, match="2 input run"):
        qnn_debug.replay(gm, [torch.randn(1, 3, 8, 8)] * 2, tmp_path / "device.h5",
                         tmp_path / "replay.h5")
    assert not (tmp_path / "replay.h5").exists()


def test_a_replay_over_its_device_store_is_refused(tmp_path):
    # Issue 33: an output that names an input destroyed it; the device store stays as it was.
    gm = torch.fx.symbolic_trace(SmallCNN().eval())
    device = tmp_path / "device.h5"
    qnn_debug.capture_torch(gm, [torch.randn(1, 3, 8, 8)], device)
    before = device.read_bytes()
    (tmp_path / "link.h5").symlink_to(device)
    for path in (device, tmp_path / "link.h5"):
        with pytest.raises(ValueError, match="is the device store"):
            qnn_debug.replay(gm, [torch.randn(1, 3, 8, 8)], device, path)
    assert device.read_bytes() == before


def test_device_values_are_read_in_the_reference_layout(tmp_path):
    """A device store in NHWC (axis order 0,3,1,2) is replayed from its NCHW values."""
    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(SmallCNN().eval())
    inputs = [torch.randn(1, 3, 8, 8)]
    qnn_debug.capture_torch(gm, inputs, tmp_path / "reference.h5")
    with qnn_debug.StoreWriter(tmp_path / "nhwc.h5") as w:
        w.begin_run("run0")
        for t in qnn_debug.Store(tmp_path / "reference.h5").runs[0].tensors:
            values = t.numpy()
            order = [0, 2, 3, 1] if values.ndim == 4 else None
            w.write(t.name, np.ascontiguousarray(values.transpose(order)) if order else values,
                    handles=t.handles, role=t.role,
                    axis_order=[0, 3, 1, 2] if order else None)
        w.end_run()
    qnn_debug.replay(gm, inputs, tmp_path / "nhwc.h5", tmp_path / "replay.h5")
    report = qnn_debug.diff(tmp_path / "replay.h5", tmp_path / "nhwc.h5")
    assert all(g["sqnr_db"] == "inf" for g in report.json["runs"][0]["groups"])
