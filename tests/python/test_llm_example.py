"""examples/llama_decoder end to end: an emulated device whose attention scores overflow fp16
after some decode steps, captured one run per step, against a teacher-forced float reference.

The step the fault starts is computed here from its mechanism, not taken from the example: the
float32 model runs on the device's tokens (a plain forward, no capture) and the first run whose
layer-FAULT_LAYER scores do not fit fp16 is the step the report must name.

Run: PYTHONPATH=build/python python3 -m pytest tests/python/test_llm_example.py
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the example needs PyTorch (python3-torch)")
qnn_debug = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")

EXAMPLE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                       "llama_decoder"))
sys.path.insert(0, EXAMPLE)
import llama  # noqa: E402

PROMPT, STEPS = 16, 64
SCORES = f"layers.{llama.FAULT_LAYER}.attn.scores"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """Runs the example as its documentation says; (output folder, what it printed)."""
    out = tmp_path_factory.mktemp("llm")
    done = subprocess.run([sys.executable, os.path.join(EXAMPLE, "run.py"), "--out", str(out),
                           "--prompt", str(PROMPT), "--steps", str(STEPS)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


@pytest.fixture(scope="module")
def stores(example):
    out, _ = example
    return qnn_debug.Store(out / "device.h5"), qnn_debug.Store(out / "reference.h5")


def float_scores_overflow(device):
    """Per device run: do the float32 model's scores at layer FAULT_LAYER, on that run's tokens,
    exceed what fp16 holds (65504; from 65520 up a float rounds to inf in fp16)?"""
    model = llama.build_model()
    overflows = []
    hook = model.layers[llama.FAULT_LAYER].attn.scores.register_forward_hook(
        lambda module, args, out: overflows.append(bool(torch.isinf(out.half()).any())))
    model.reset()
    try:
        with torch.no_grad():
            for run in device.runs:
                model(torch.from_numpy(run.tensor("input_0").numpy()))
    finally:
        hook.remove()
    return overflows


def test_the_report_names_the_overflowing_scores_at_the_step_they_overflow(example, stores):
    out, printed = example
    device, _ = stores
    overflows = float_scores_overflow(device)
    assert len(overflows) == 1 + STEPS
    fault_step = overflows.index(True)
    assert 0 < fault_step < STEPS  # after the prefill and some decode steps

    with open(out / "report.json") as f:
        report = json.load(f)
    runs = report["runs"]
    assert [r["device_run"] for r in runs] == list(range(1 + STEPS))
    verdicts = [r["verdict"] for r in runs]
    assert verdicts.index("fail") == fault_step
    assert verdicts[:fault_step] == ["pass"] * fault_step  # the quantization alone passes

    run = runs[fault_step]
    in_op_order = sorted(run["groups"], key=lambda g: g["order"])
    first = next(g for g in in_op_order if g["verdict"] == "fail")
    assert first["id"] == run["first_divergence"]
    assert first["pairs"][0]["reference"]["name"] == SCORES
    assert first["op_type"] == "Scores" and "nan_inf_introduced" in first["flags"]
    assert first["pairs"][0]["device"]["dtype"] == "FLOAT_16"
    aggregate = next(a for a in report["aggregate"] if a["id"] == first["id"])
    assert aggregate["first_failing_device_run"] == fault_step
    # The other ops of the layer that fail start failing there too, none earlier.
    assert min(a["first_failing_device_run"] for a in report["aggregate"]
               if a["first_failing_device_run"] is not None) == fault_step

    assert f"first failing run: {fault_step} (decode step {fault_step})" in printed
    assert f"first failing op:  {SCORES} (group {first['id']}, Scores," in printed
    assert (out / "report.html").stat().st_size > 0

    # The token view: the printed first diverging token is the report's, the first step whose
    # tokens differ; before the fault such a flip can only be a near tie on the reference (the
    # device is then its quantization alone), and the fault raises the logits' KL divergence.
    steps = report["steps"]
    differs = [s["device_run"] for s in steps if s["tokens"]["differs"]]
    token = report["summary"].get("first_diverging_token")
    if differs:
        assert token["device_run"] == differs[0]
        assert f"first diverging token: step {differs[0]}:" in printed
        for s in steps:
            if s["tokens"]["differs"] and s["device_run"] < fault_step:
                assert float(s["tokens"]["reference_margin"]) < 0.05, s
    else:
        assert token is None and "first diverging token: none" in printed
    kl = [float(s["tokens"]["kl_divergence"]) for s in steps]
    assert max(kl[fault_step:]) > 3 * max(kl[:fault_step])
    assert f"up to {max(kl[fault_step:]):.3g} from it" in printed


def test_the_reference_ran_on_the_device_tokens_run_by_run(stores):
    device, reference = stores
    names = ["prefill"] + [f"step {k}" for k in range(1, STEPS + 1)]
    assert [r.name for r in device.runs] == [r.name for r in reference.runs] == names
    for d, r in zip(device.runs, reference.runs):
        assert np.array_equal(d.tensor("input_0").numpy(), r.tensor("input_0").numpy())
    assert device.runs[0].tensor("input_0").dims == [1, PROMPT]
    # Each device step's token is the device's own greedy pick from its previous logits...
    picks = [int(np.argmax(run.tensor("output_0").numpy()[0, -1])) for run in device.runs]
    fed = [int(run.tensor("input_0").numpy()[0, 0]) for run in device.runs[1:]]
    assert fed == picks[:-1]
    # ...which the float model would not always have picked, even before the fault: without
    # teacher forcing the reference's runs would run on other tokens.
    fault_step = float_scores_overflow(device).index(True)
    reference_picks = [int(np.argmax(run.tensor("output_0").numpy()[0, -1]))
                       for run in reference.runs]
    assert fed[:fault_step] != reference_picks[:fault_step]
