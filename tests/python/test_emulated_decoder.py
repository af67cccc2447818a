"""tests/python/emulated_decoder.py, the emulated int16 HTP decode of a Llama-style decoder:
the emulator itself, not the diff's verdicts.

- the three stores align: the same runs (prefill + one per decode step), the same tensor names,
  handles, roles and shapes in every run, the same graph, the device and simulation with the
  same encodings;
- the caches and the mask are what the emulator says: whole caches with zero unwritten slots
  holding the codes of the keys and values, the masked scores -inf (or float32's lowest) in the
  reference and the lowest code on the device;
- an ideal device (no flips, no fault) stores exactly the simulation's codes;
- the rope fault changes nothing before its step and, at its step, starts at the faulty layer's
  rope_k and the k_cache slot truth.json names.

A tiny model (dim 64, 2 layers, 10 runs) keeps it to a few seconds.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_emulated_decoder.py
"""
import json
import os
import sys

import numpy as np
import pytest

qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_decoder as emu  # noqa: E402

CONFIG = emu.Config(vocab=64, dim=64, layers=2, heads=4, cache=16)
PREFILL, STEPS, FAULT_LAYER, FAULT_STEP = 6, 9, 1, 4
FAULTY = emu.Settings(prefill=PREFILL, steps=STEPS, fault="rope", fault_layer=FAULT_LAYER,
                      fault_step=FAULT_STEP, seed=3)


def tensors(path):
    """[{name: Tensor}] per run."""
    return [{t.name: t for t in run.tensors} for run in qnn_debug.Store(str(path)).runs]


def emulated(factory, name, config=CONFIG, **changes):
    out = factory.mktemp(name)
    settings = emu.Settings(**{**vars(FAULTY), **changes})
    return out, emu.emulate(str(out), config, settings)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """The rope fault with 2% flips."""
    return emulated(tmp_path_factory, "rope")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The same device (the same flips), without the fault."""
    return emulated(tmp_path_factory, "clean", fault="none")


@pytest.fixture(scope="module")
def ideal(tmp_path_factory):
    """A device with ideal kernels: no flips, no fault."""
    return emulated(tmp_path_factory, "ideal", fault="none", flip=0.0)


def test_truth_names_the_fault(faulty):
    out, truth = faulty
    assert json.loads((out / "truth.json").read_text()) == truth
    f = truth["fault"]
    prefix = f"layers.{FAULT_LAYER}.attn."
    assert (f["kind"], f["layer"], f["step"]) == ("rope", FAULT_LAYER, FAULT_STEP)
    assert f["first_tensor"] == prefix + "rope_k" and f["k_cache"] == prefix + "k_cache"
    assert f["runs"] == list(range(FAULT_STEP, STEPS + 1))
    assert f["first_differing_slot"] == PREFILL + FAULT_STEP - 1
    assert f["first_differing_run"] == FAULT_STEP
    ops = {op["name"]: op for op in truth["ops"]}
    assert f["first_tensor_group_id"] == ops[f["first_tensor"]]["group_id"]
    assert [op["handle"] for op in truth["ops"]] == list(range(1, len(ops) + 1))
    assert [r["start"] for r in truth["runs"]] == [0] + list(range(PREFILL, PREFILL + STEPS))
    assert [len(r["tokens"]) for r in truth["runs"]] == [PREFILL] + [1] * STEPS


def test_the_stores_align(faulty):
    out, truth = faulty
    ref, dev, sim = (tensors(out / f) for f in ("ref.h5", "dev.h5", "sim.h5"))
    names = [emu.GRAPH_INPUT] + [op["name"] for op in truth["ops"]]
    handles = {op["name"]: [op["handle"]] for op in truth["ops"]}
    stores = [qnn_debug.Store(str(out / f)) for f in ("ref.h5", "dev.h5", "sim.h5")]
    assert [[r.name for r in s.runs] for s in stores] == \
        [[r["name"] for r in truth["runs"]]] * 3
    for s in stores:
        assert [(n["name"], n["inputs"], n["outputs"], n["handles"]) for n in s.graph] == \
            [(op["name"], op["inputs"], [op["name"]], [op["handle"]]) for op in truth["ops"]]
    assert len(ref) == len(dev) == len(sim) == STEPS + 1
    for k in range(STEPS + 1):
        assert list(ref[k]) == list(dev[k]) == list(sim[k]) == names
        t = len(truth["runs"][k]["tokens"])
        for name in names:
            r, d, s = ref[k][name], dev[k][name], sim[k][name]
            assert r.handles == d.handles == s.handles == handles.get(name, []), name
            assert r.role == d.role == s.role, name
            assert r.dims == d.dims == s.dims, name
            if name == emu.GRAPH_INPUT:
                assert r.role == "graph_input" and r.dtype == d.dtype == "INT_32"
                assert r.dims == [1, t]
                continue
            assert r.dtype == "FLOAT_32" and d.dtype == s.dtype == "UFIXED_POINT_16", name
            enc = truth["encodings"][name]
            assert d.quantization == s.quantization
            assert (d.quantization["scales"], d.quantization["offsets"]) == \
                ([enc["scale"]], [enc["offset"]])
        assert ref[k][emu.GRAPH_OUTPUT].role == "graph_output"
        for cache in truth["kv_caches"]:
            assert ref[k][cache].dims == [1, CONFIG.heads, CONFIG.cache, CONFIG.head_dim]


def test_the_diff_pairs_every_tensor(faulty):
    out, truth = faulty
    report = qnn_debug.diff(str(out / "ref.h5"), str(out / "dev.h5"), sim=str(out / "sim.h5"))
    assert len(report.runs) == STEPS + 1
    for run in report.runs:
        cov = run["coverage"]
        assert cov["matched_reference_tensors"] == cov["reference_tensors"] == \
            len(truth["ops"]) + 1
        assert run["unmatched"] == []
    assert report.summary["unmatched_device"] == report.summary["unmatched_reference"] == 0
    assert {c["tensor"] for c in report.json["kv_cache"]} == set(truth["kv_caches"])


def test_caches_hold_the_keys_codes_and_zero_elsewhere(faulty):
    out, truth = faulty
    ref, dev = tensors(out / "ref.h5"), tensors(out / "dev.h5")
    for k, run in enumerate(truth["runs"]):
        start, t = run["start"], len(run["tokens"])
        for cache in truth["kv_caches"]:
            source = emu.cache_source(cache)
            assert truth["encodings"][cache] == truth["encodings"][source]
            zero = -truth["encodings"][cache]["offset"]
            codes = dev[k][cache].numpy()
            written = codes[:, :, start:start + t]
            new = dev[k][source].numpy()
            if source.endswith("v_proj"):
                new = emu.split_heads(new, CONFIG.heads)
            assert np.array_equal(written, new), (k, cache)
            assert np.all(codes[:, :, start + t:] == zero), (k, cache)
            assert np.all(ref[k][cache].numpy()[:, :, start + t:] == 0), (k, cache)
            if k:  # the slots before stay as the run before left them
                assert np.array_equal(codes[:, :, :start], dev[k - 1][cache].numpy()[:, :, :start])


@pytest.mark.parametrize("mask_value", ["inf", "lowest"])
def test_masked_scores(tmp_path_factory, mask_value):
    out, truth = emulated(tmp_path_factory, f"mask_{mask_value}", fault="none",
                          mask_value=mask_value, steps=3)
    ref, dev = tensors(out / "ref.h5"), tensors(out / "dev.h5")
    mask = -np.inf if mask_value == "inf" else np.finfo(np.float32).min
    for k, run in enumerate(truth["runs"]):
        positions = run["start"] + np.arange(len(run["tokens"]))
        masked = np.arange(CONFIG.cache)[None, :] > positions[:, None]
        for layer in range(CONFIG.layers):
            name = f"layers.{layer}.attn.scores"
            r, d = ref[k][name].numpy(), dev[k][name].numpy()
            masked_all = np.broadcast_to(masked, r.shape)
            assert np.all(r[masked_all] == mask) and np.all(np.isfinite(r[~masked_all]))
            assert np.all(d[masked_all] == 0), "masked: the encoding's lowest code"
            # only the calibrated minimum itself may sit at code 0 unmasked
            assert np.count_nonzero(d[~masked_all] == 0) <= 1
            probs = ref[k][f"layers.{layer}.attn.probs"].numpy()
            assert np.all(probs[masked_all] == 0)
            assert np.allclose(probs.sum(-1), 1, atol=1e-5)


def test_attention_is_not_uniform(faulty):
    out, truth = faulty
    ref = tensors(out / "ref.h5")
    last = ref[-1]
    for layer in range(CONFIG.layers):
        probs = last[f"layers.{layer}.attn.probs"].numpy()
        visible = truth["runs"][-1]["start"] + 1
        assert probs.max(-1).mean() > 3 / visible, layer  # well above uniform 1 / visible


def test_the_ideal_device_is_the_simulation(ideal):
    out, truth = ideal
    dev, sim = tensors(out / "dev.h5"), tensors(out / "sim.h5")
    for k in range(STEPS + 1):
        for name in dev[k]:
            assert np.array_equal(dev[k][name].numpy(), sim[k][name].numpy()), (k, name)


def test_flips_move_codes_one_step(faulty):
    out, _ = faulty
    dev, sim = tensors(out / "dev.h5"), tensors(out / "sim.h5")
    assert np.array_equal(dev[0]["embed"].numpy(), sim[0]["embed"].numpy()), "a gather: exact"
    diff = np.abs(dev[0]["layers.0.attn_norm"].numpy().astype(np.int64) -
                  sim[0]["layers.0.attn_norm"].numpy().astype(np.int64))
    assert diff.max() == 1  # the same input: only the flips differ
    assert 0.01 < np.mean(diff) < 0.03


def test_the_rope_fault_starts_at_its_step_layer_and_slot(faulty, clean):
    (out, truth), (clean_out, _) = faulty, clean
    dev, reference = tensors(out / "dev.h5"), tensors(clean_out / "dev.h5")
    f = truth["fault"]
    names = list(dev[0])
    for k in range(FAULT_STEP):  # nothing before the step
        for name in names:
            assert np.array_equal(dev[k][name].numpy(), reference[k][name].numpy()), (k, name)
    step = dev[FAULT_STEP]
    first = names.index(f["first_tensor"])
    for name in names[:first]:  # everything before the faulty key, at the fault step
        assert np.array_equal(step[name].numpy(), reference[FAULT_STEP][name].numpy()), name
    assert not np.array_equal(step[f["first_tensor"]].numpy(),
                              reference[FAULT_STEP][f["first_tensor"]].numpy())
    slot = f["first_differing_slot"]
    for k in range(FAULT_STEP, STEPS + 1):
        bad = dev[k][f["k_cache"]].numpy() != reference[k][f["k_cache"]].numpy()
        slots = np.flatnonzero(bad.any(axis=(0, 1, 3)))
        assert slots.min() == slot and slots.max() <= truth["runs"][k]["start"], (k, slots)
    # the simulation has no fault
    sim, clean_sim = tensors(out / "sim.h5"), tensors(clean_out / "sim.h5")
    for name in names:
        assert np.array_equal(sim[-1][name].numpy(), clean_sim[-1][name].numpy()), name


def test_8_bits(tmp_path_factory):
    out, truth = emulated(tmp_path_factory, "bits8", bits=8, steps=2, fault="none")
    dev = tensors(out / "dev.h5")
    assert len(dev) == 3
    assert {t.dtype for t in dev[1].values()} == {"INT_32", "UFIXED_POINT_8"}
    assert all(e["dtype"] == "UFIXED_POINT_8" for e in truth["encodings"].values())


def test_bad_arguments_are_refused(tmp_path):
    base = ["--dim", "64", "--layers", "2", "--heads", "4", "--vocab", "64", "--out", str(tmp_path)]
    assert emu.main(base + ["--cache", "8", "--prefill", "6", "--steps", "4"]) == 2
    assert emu.main(base + ["--fault", "rope", "--fault-layer", "2"]) == 2
    assert emu.main(base + ["--fault", "rope", "--fault-step", "0"]) == 2
    assert emu.main(base + ["--heads", "3"]) == 2
    with pytest.raises(ValueError, match="flip"):
        emu.Settings(flip=2).check(CONFIG)
