"""qnn_debug.capture_torch(..., encodings=...): the quantized simulation.

Expected codes come from a numpy float64 implementation of QNN's formula, written here:
q = clip(round_half_even(x / scale) - offset, qmin, qmax), real = (q + offset) * scale.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_simulation.py
"""
import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="capture_torch needs PyTorch (python3-torch)")
import torch.fx  # noqa: E402
from torch import nn  # noqa: E402

qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")


def qnn_fake_quant(x, scales, offsets, qmin, qmax, axis=None):
    """(codes, real values) in float64, numpy only."""
    x = np.asarray(x, dtype=np.float64)
    scale, offset = np.asarray(scales, np.float64), np.asarray(offsets, np.float64)
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale, offset = scale.reshape(shape), offset.reshape(shape)
    q = np.clip(np.round(x / scale) - offset, qmin, qmax)
    return q, (q + offset) * scale


class Branches(nn.Module):
    """Independent ops of the input, so that each one's float input is known exactly."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        a = x * 3.0  # UFIXED_POINT_8, per tensor, asymmetric (saturates)
        b = x - 1.0  # SFIXED_POINT_16, per tensor
        c = self.conv(x)  # SFIXED_POINT_8, per axis 1
        d = x + 0.5  # UFIXED_POINT_16, per axis 1 (3 channels)
        e = torch.relu(a)  # no encoding: reads the fake-quantized a
        g = x * 0.25  # SFIXED_POINT_4: stored as SFIXED_POINT_8 with bitwidth 4
        return e, b, c, d, g


PLAIN = {
    "mul": {"scale": 0.05, "offset": -128, "dtype": "UFIXED_POINT_8"},
    "sub": {"scale": 2.0 ** -8, "offset": 0, "dtype": "SFIXED_POINT_16"},
    "conv": {"axis": 1, "scales": [0.01, 0.02, 0.03, 0.04], "offsets": [0, 0, 0, 0],
             "dtype": "SFIXED_POINT_8"},
    "add": {"axis": 1, "scales": [1e-4, 2e-4, 3e-4], "offsets": [-32768, -30000, -20000],
            "dtype": "UFIXED_POINT_16"},
    "mul_1": {"scale": 0.07, "offset": 0, "dtype": "SFIXED_POINT_4"},
    "ghost": {"scale": 1.0, "offset": 0, "dtype": "UFIXED_POINT_8"},
}
RANGES = {"mul": (0, 255), "sub": (-32768, 32767), "conv": (-128, 127), "add": (0, 65535),
          "mul_1": (-8, 7)}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    work = tmp_path_factory.mktemp("sim")
    torch.manual_seed(0)
    model = Branches().eval()
    inputs = [torch.randn(1, 3, 5, 5) * 2 for _ in range(2)]
    # x - 1 at exact halves of sub's scale (2^-8): ties, rounded to even.
    inputs[0][0, 0, 0, :4] = 1 + torch.tensor([0.5, 1.5, -0.5, 2.5]) * 2.0 ** -8
    (work / "enc.json").write_text(json.dumps(PLAIN))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = qnn_debug.capture_torch(model, inputs, work / "sim.h5",
                                          encodings=work / "enc.json")
    return work, model, inputs, summary, caught


def test_codes_equal_the_float64_formula(simulated):
    work, model, inputs, _, _ = simulated
    store = qnn_debug.Store(work / "sim.h5")
    for run, x in zip(store.runs, inputs):
        with torch.no_grad():
            floats = {"mul": x * 3.0, "sub": x - 1.0, "conv": model.conv(x), "add": x + 0.5,
                      "mul_1": x * 0.25}
        for name, value in floats.items():
            enc = PLAIN[name]
            axis = enc.get("axis")
            codes, real = qnn_fake_quant(value.numpy(), enc.get("scales", enc.get("scale")),
                                         enc.get("offsets", enc.get("offset")), *RANGES[name],
                                         axis)
            t = run.tensor(name)
            np.testing.assert_array_equal(t.numpy().astype(np.float64), codes, err_msg=name)
            np.testing.assert_array_equal(t.numpy(dequantize=True), real.astype(np.float32),
                                          err_msg=name)
        # The fake-quantized `mul` is what relu read.
        _, mul_real = qnn_fake_quant((x * 3.0).numpy(), 0.05, -128, 0, 255)
        np.testing.assert_array_equal(run.tensor("relu").numpy(),
                                      np.maximum(mul_real.astype(np.float32), 0))


def test_ties_round_half_to_even(simulated):
    work, _, _, _, _ = simulated
    sub = qnn_debug.Store(work / "sim.h5").tensor("sub").numpy()
    assert sub[0, 0, 0, :4].tolist() == [0, 2, 0, 2]  # 0.5, 1.5, -0.5, 2.5 steps


def test_stored_dtype_and_encoding_are_the_files(simulated):
    work, _, _, _, _ = simulated
    store = qnn_debug.Store(work / "sim.h5")
    for name, enc in PLAIN.items():
        if name == "ghost":
            continue
        t = store.tensor(name)
        q = t.quantization
        expected_dtype = "SFIXED_POINT_8" if name == "mul_1" else enc["dtype"]
        assert t.dtype == expected_dtype, name
        assert q["scales"] == list(enc.get("scales", [enc.get("scale")])), name
        assert q["offsets"] == list(enc.get("offsets", [enc.get("offset")])), name
        assert q["axis"] == enc.get("axis", -1), name
        assert q["bitwidth"] == (4 if name == "mul_1" else 0), name


def test_unencoded_tensors_stay_float_and_are_listed(simulated):
    work, _, _, summary, caught = simulated
    assert set(summary.not_quantized) == {"x", "relu"}
    assert summary.unused_encodings == ("ghost",)
    store = qnn_debug.Store(work / "sim.h5")
    assert store.tensor("relu").dtype == "FLOAT_32" and store.tensor("x").dtype == "FLOAT_32"
    messages = [str(w.message) for w in caught if issubclass(w.category, qnn_debug.CaptureWarning)]
    assert any("stay float" in m and "relu" in m for m in messages), messages
    assert any("ghost" in m for m in messages), messages


def test_the_simulation_diffs_exactly_with_itself(simulated, tmp_path):
    work, model, inputs, _, _ = simulated
    qnn_debug.capture_torch(model, inputs, tmp_path / "again.h5", encodings=work / "enc.json")
    report = qnn_debug.diff(work / "sim.h5", tmp_path / "again.h5")
    groups = report.json["runs"][0]["groups"]
    stored = len(qnn_debug.Store(work / "sim.h5").runs[0].tensors)
    assert len(groups) == stored == 7, groups
    assert all(g["sqnr_db"] == "inf" for g in groups), [(g["id"], g["sqnr_db"]) for g in groups]


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)

    def forward(self, x):
        return torch.relu(self.conv(x) * 2.0)


# The same three encodings (the conv output per axis, stored NHWC: channel axis 3) in the three
# formats the importers read, named as each tool names the fx nodes' tensors.
def net_json():
    def tensor(data_type, quant, dims, fmt="NHWC"):
        return {"id": 1, "type": 3, "data_type": data_type, "dims": dims,
                "src_axis_format": "NCHW", "axis_format": fmt, "quant_params": quant}
    return {"graph": {"tensors": {
        "conv@0": tensor(776, {"definition": 1, "encoding": 1, "axis_scale_offset": {
            "axis": 3, "num_scale_offsets": 2,
            "scale_offsets": [{"scale": 0.02, "offset": 0}, {"scale": 0.03, "offset": 0}]}},
            [1, 4, 4, 2]),
        "mul@0": tensor(1032, {"definition": 1, "encoding": 0,
                               "scale_offset": {"scale": 0.04, "offset": -100}}, [1, 4, 4, 2]),
        "output_relu@0": tensor(1046, {"definition": 1, "encoding": 0,
                                       "scale_offset": {"scale": 1e-4, "offset": 0}},
                                [1, 4, 4, 2])},
        "nodes": {}}}


def context_binary_json():
    def tensor(name, dtype, quant):
        return {"info": {"name": name, "dataType": "QNN_DATATYPE_" + dtype,
                         "dimensions": [1, 2, 4, 4], "quantizeParams": quant}}
    per_axis = {"definition": "QNN_DEFINITION_DEFINED",
                "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET",
                "axisScaleOffset": {"axis": 1, "numScaleOffsets": 2,
                                    "scaleOffset": [{"scale": 0.02, "offset": 0},
                                                    {"scale": 0.03, "offset": 0}]}}

    def per_tensor(scale, offset):
        return {"definition": "QNN_DEFINITION_DEFINED",
                "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
                "scaleOffset": {"scale": scale, "offset": offset}}
    return {"info": {"graphs": [{"info": {"graphName": "forward", "graphInputs": [],
                                          "graphOutputs": [
        tensor("conv@0", "SFIXED_POINT_8", per_axis),
        tensor("mul@0", "UFIXED_POINT_8", per_tensor(0.04, -100)),
        tensor("output_relu@0", "UFIXED_POINT_16", per_tensor(1e-4, 0))]}}]}}


def plain_map():
    return {"conv": {"axis": 1, "scales": [0.02, 0.03], "offsets": [0, 0],
                     "dtype": "SFIXED_POINT_8"},
            "mul": {"scale": 0.04, "offset": -100, "dtype": "UFIXED_POINT_8"},
            "relu": {"scale": 1e-4, "zero_point": 0, "dtype": "UFIXED_POINT_16"}}


@pytest.mark.parametrize("make", [net_json, context_binary_json, plain_map])
def test_each_encodings_format_is_matched_to_fx_nodes(make, tmp_path):
    torch.manual_seed(1)
    model = ConvRelu().eval()
    x = torch.randn(1, 3, 4, 4)
    path = tmp_path / "enc.json"
    path.write_text(json.dumps(make()))
    summary = qnn_debug.capture_torch(model, [x], tmp_path / "sim.h5", encodings=path)
    assert summary.not_quantized == ("x",) and summary.unused_encodings == ()
    store = qnn_debug.Store(tmp_path / "sim.h5")
    conv = store.tensor("conv")
    assert conv.dtype == "SFIXED_POINT_8" and conv.quantization["axis"] == 1  # reference NCHW
    assert conv.quantization["scales"] == [0.02, 0.03]
    assert store.tensor("mul").dtype == "UFIXED_POINT_8"
    assert store.tensor("relu").dtype == "UFIXED_POINT_16"
    with torch.no_grad():
        c = model.conv(x).numpy()
    codes, real = qnn_fake_quant(c, [0.02, 0.03], [0, 0], -128, 127, axis=1)
    np.testing.assert_array_equal(conv.numpy(), codes.astype(np.int8))
    _, mul = qnn_fake_quant(real.astype(np.float32) * np.float32(2.0), 0.04, -100, 0, 255)
    np.testing.assert_array_equal(store.tensor("mul").numpy(dequantize=True),
                                  mul.astype(np.float32))


def test_several_files_merge(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"conv": plain_map()["conv"]}))
    (tmp_path / "b.json").write_text(json.dumps({"mul": plain_map()["mul"]}))
    summary = qnn_debug.capture_torch(ConvRelu().eval(), [torch.randn(1, 3, 4, 4)],
                                      tmp_path / "sim.h5",
                                      encodings=[tmp_path / "a.json", tmp_path / "b.json"])
    assert set(summary.not_quantized) == {"x", "relu"}


def test_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"conv": {"scale": 0.1}}')  # neither offset nor zero_point
    with pytest.raises(qnn_debug.QnnDebugError, match="bad.json"):
        qnn_debug.capture_torch(ConvRelu().eval(), [torch.randn(1, 3, 4, 4)],
                                tmp_path / "sim.h5", encodings=bad)
    assert not (tmp_path / "sim.h5").exists()
    with pytest.raises(ValueError, match="encodings needs naming=\"fx\""):
        qnn_debug.capture_torch(ConvRelu().eval(), [torch.randn(1, 3, 4, 4)],
                                tmp_path / "sim.h5", naming="module", encodings=bad)
