"""tests/python/emulated_cnn.py, the emulated HTP device: the emulator itself, not the diff's
verdicts.

- the four stores align: every reference op is compared or fused into a device op, with the same
  names, handles, encodings and layout in the device, simulation and replay stores;
- an ideal device (no flips, no fault) stores exactly the simulation's codes, and so does its
  replay;
- each fault does what it says, at the op truth.json names.

Small inputs (32x32) keep it to a few seconds.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_emulated_cnn.py
"""
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch", reason="the emulator needs PyTorch (python3-torch)")
qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_cnn  # noqa: E402

SIZE = 32
MODELS = ["resnet18", "mobilenet_v2", "vit"]


def _models():
    """The models as parameters; the CNNs need torchvision (the ViT is the emulator's own)."""
    skip = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                              reason="needs torchvision (python3-torchvision)")
    return [pytest.param(m, marks=[] if m == "vit" else [skip]) for m in MODELS]


def tensors(path):
    """[{name: Tensor}] per run."""
    return [{t.name: t for t in run.tensors} for run in qnn_debug.Store(str(path)).runs]


@pytest.fixture(scope="module", params=_models())
def faulty(request, tmp_path_factory):
    """A device with flips and a kernel fault, two runs."""
    out = tmp_path_factory.mktemp(f"{request.param}_kernel5")
    truth = emulated_cnn.emulate(str(out), request.param, size=SIZE, flip=0.02, fault="kernel5")
    return out, truth


@pytest.fixture(scope="module", params=_models())
def ideal(request, tmp_path_factory):
    """A device with ideal kernels: no flips, no fault."""
    out = tmp_path_factory.mktemp(f"{request.param}_ideal")
    truth = emulated_cnn.emulate(str(out), request.param, size=SIZE, flip=0.0, fault="none")
    return out, truth


def test_truth_names_the_files_and_the_ops(faulty):
    out, truth = faulty
    for name in ("ref.h5", "dev.h5", "sim.h5", "iso.h5", "encodings.json", "truth.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "truth.json").read_text()) == truth
    names = [op["name"] for op in truth["device_ops"]]
    assert truth["device_tensors"] == [truth["graph_input"]] + names
    assert truth["fault"]["op"] in names
    members = [m for op in truth["device_ops"] for m in op["members"]]
    assert len(members) == len(set(members)) == truth["reference_ops"]
    handles = sorted(h for op in truth["device_ops"] for h in op["handles"])
    assert handles == list(range(1, truth["reference_ops"] + 1))


def test_reference_store_has_every_op_and_its_graph(faulty):
    out, truth = faulty
    store = qnn_debug.Store(str(out / "ref.h5"))
    assert len(store.runs) == 2
    run = store.runs[0].tensors
    assert run[0].name == truth["graph_input"] and run[0].role == "graph_input"
    assert run[0].handles == []
    assert run[-1].name == truth["graph_output"] and run[-1].role == "graph_output"
    assert [t.handles for t in run[1:]] == [[h] for h in range(1, truth["reference_ops"] + 1)]
    graph = store.graph
    assert [n["name"] for n in graph] == [t.name for t in run[1:]]
    stored = {t.name for t in run}
    for node in graph:
        assert node["outputs"] == [node["name"]] and set(node["inputs"]) <= stored, node
    assert not np.array_equal(store.runs[0].tensors[0].numpy(), store.runs[1].tensors[0].numpy())


def test_fused_chains_are_conv_bn_and_an_activation(faulty):
    out, truth = faulty
    for op in truth["fused"]:
        assert op["op_types"][:2] == ["Conv2d", "BatchNorm2d"], op
        assert op["op_types"][2:] in ([], ["ReLU"], ["ReLU6"], ["Hardtanh"]), op
        assert op["name"] == op["members"][-1]
    if truth["model"] == "vit":
        assert truth["fused"] == []
    else:
        assert truth["fused"], "a torchvision CNN has conv+bn chains"


def test_device_sim_and_iso_stores_agree_on_everything_but_the_codes(faulty):
    out, truth = faulty
    encodings = json.loads((out / "encodings.json").read_text())
    ops = {op["name"]: op for op in truth["device_ops"]}
    dev, sim, iso = (tensors(out / f) for f in ("dev.h5", "sim.h5", "iso.h5"))
    ref = tensors(out / "ref.h5")
    assert len(dev) == len(sim) == len(iso) == 2
    for k in range(2):
        assert list(dev[k]) == list(sim[k]) == list(iso[k]) == truth["device_tensors"]
        for name, d in dev[k].items():
            for other in (sim[k][name], iso[k][name]):
                assert (other.handles, other.role, other.dtype, other.dims, other.axis_order,
                        other.quantization) == (d.handles, d.role, d.dtype, d.dims,
                                                d.axis_order, d.quantization), name
            assert d.handles == ops.get(name, {"handles": []})["handles"]
            assert d.role == ref[k][name].role
            assert d.dtype == "UFIXED_POINT_8"
            q = d.quantization
            assert (q["scales"], q["offsets"]) == ([encodings[name]["scale"]],
                                                   [encodings[name]["offset"]])
            assert tuple(d.shape) == tuple(ref[k][name].dims)  # the reference layout
            assert d.axis_order == ([0, 3, 1, 2] if len(d.dims) == 4 else [])


def test_the_diff_aligns_every_reference_op(faulty):
    out, truth = faulty
    report = qnn_debug.diff(str(out / "ref.h5"), str(out / "dev.h5"), sim=str(out / "sim.h5"),
                            isolated=str(out / "iso.h5"))
    ids = {op["group_id"] for op in truth["device_ops"]}
    for run in report.runs:
        cov = run["coverage"]
        assert cov["matched_reference_tensors"] == cov["reference_tensors"] == \
            truth["reference_ops"] + 1
        assert cov["compared_pairs"] == len(truth["device_tensors"])
        assert run["unmatched"] == []
        groups = {g["id"] for g in run["groups"]}
        assert ids <= groups
        for g in run["groups"]:
            for part in ("quantization", "kernel", "isolated"):
                assert part in g["parts"], (g["id"], part)
    assert report.summary["unmatched_device"] == 0


def test_the_ideal_device_is_the_simulation_and_so_is_its_replay(ideal):
    out, truth = ideal
    dev, sim, iso = (tensors(out / f) for f in ("dev.h5", "sim.h5", "iso.h5"))
    for k in range(2):
        for name in truth["device_tensors"]:
            assert np.array_equal(dev[k][name].numpy(), sim[k][name].numpy()), name
            assert np.array_equal(iso[k][name].numpy(), sim[k][name].numpy()), name


def test_the_ideal_device_compares_exact_with_the_simulation(ideal):
    out, _ = ideal
    report = qnn_debug.diff(str(out / "ref.h5"), str(out / "dev.h5"), sim=str(out / "sim.h5"),
                            isolated=str(out / "iso.h5"))
    for run in report.runs:
        for g in run["groups"]:
            for part in ("kernel", "isolated"):
                assert float(g["parts"][part]["sqnr_db"]) == float("inf"), (g["id"], part)


def test_flips_move_codes_one_step_and_the_fault_a_few(faulty):
    out, truth = faulty
    dev, iso = tensors(out / "dev.h5"), tensors(out / "iso.h5")
    exact = set(truth["exact_ops"])
    moved, codes = 0, 0
    for name in truth["device_tensors"][1:]:
        d = dev[0][name].numpy().astype(np.int64)
        i = iso[0][name].numpy().astype(np.int64)
        err = np.abs(d - i)
        if name == truth["fault"]["op"]:
            assert err.max() <= emulated_cnn.KERNEL_LSB + 1
            assert np.mean(err > 1) > 0.3, "kernel5 moves most codes more than a flip"
        elif name in exact:
            assert err.max() == 0, name
        else:
            assert err.max() <= 1, name
            moved, codes = moved + np.count_nonzero(err), codes + err.size
    assert 0.015 < moved / codes < 0.021  # 2%, less the flips a clamp undid


@pytest.mark.parametrize("fault", ["wide", "clip", "scale"])
def test_the_other_faults(tmp_path, fault):
    truth = emulated_cnn.emulate(str(tmp_path), "vit", size=SIZE, flip=0.0, fault=fault,
                                 runs=1, fault_op="blocks_2_fc1")
    f = truth["fault"]
    assert f["op"] == "blocks_2_fc1" and f["device_only"] == (fault == "scale")
    calibrated, used = f["calibrated_encoding"], f["used_encoding"]
    factor = {"wide": emulated_cnn.WIDE_FACTOR, "clip": emulated_cnn.CLIP_FRACTION,
              "scale": 1}[fault]
    assert used["scale"] == pytest.approx(calibrated["scale"] * factor)
    centre = lambda e: (2 * e["offset"] + 255) * e["scale"] / 2  # noqa: E731
    assert centre(used) == pytest.approx(centre(calibrated), abs=used["scale"])
    dev, sim = tensors(tmp_path / "dev.h5")[0], tensors(tmp_path / "sim.h5")[0]
    iso = tensors(tmp_path / "iso.h5")[0]
    upstream = truth["device_tensors"][:truth["device_tensors"].index(f["op"])]
    for name in upstream:  # no flips: everything before the fault is the simulation's
        assert np.array_equal(dev[name].numpy(), sim[name].numpy()), name
    same = np.array_equal(dev[f["op"]].numpy(), iso[f["op"]].numpy())
    assert same == (fault != "scale"), "only `scale` is the device's own"
    if fault == "scale":  # the device's codes are those of 1.5x the replay's values
        scale, offset = used["scale"], used["offset"]
        d = (dev[f["op"]].numpy().astype(np.float64) + offset) * scale
        i = (iso[f["op"]].numpy().astype(np.float64) + offset) * scale
        low, high = offset * scale, (255 + offset) * scale
        inside = (1.5 * i > low) & (1.5 * i < high)
        assert inside.mean() > 0.5
        assert np.abs(d - 1.5 * i)[inside].max() <= 1.25 * scale * (1 + 1e-9)


def test_the_vit_has_a_massive_activation_and_an_exact_rescale(tmp_path):
    out = tmp_path
    truth = emulated_cnn.emulate(str(out), "vit", size=SIZE, runs=1)
    massive = truth["massive_activation"]
    assert massive["op"] in truth["exact_ops"]
    assert massive["rms_ratio"] > 50
    ref = tensors(out / "ref.h5")[0][massive["op"]].numpy()
    rms = np.sqrt(np.mean(ref.reshape(-1, ref.shape[-1]) ** 2, axis=0))
    assert rms.argmax() == massive["channel"]


def test_bad_arguments_are_refused(tmp_path):
    assert emulated_cnn.main(["--model", "vit", "--fault-op", "nope", "--out", str(tmp_path)]) == 2
    with pytest.raises(ValueError, match="flip"):
        emulated_cnn.run_emulation("vit", flip=2)
