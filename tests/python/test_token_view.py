"""Issue 36's token view (docs/metrics.md, "Token view") against numpy in float64.

On tests/python/emulated_decoder.py's int16 decode with a rope fault (layer 2's key rotated by one
position from step 20 on): for every step, the report's KL divergence of the device's softmax from
the reference's, its top-5 and top-10 overlap, both sides' next token and the device's probability
and rank of the reference's token are what numpy computes from the stored logits (read back
through qnn_debug.Store, dequantized); the first diverging token is the first step whose tokens
differ, with the device's first departure before it. Then rows numpy would get wrong if it were
careless: masked classes (-inf on both sides), a device row with NaN, a device that puts -inf where
the reference has weight, and `--logits` naming scores that are not the run's final output.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest \
     tests/python/test_token_view.py
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

qd = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_decoder as emu  # noqa: E402

CLI = os.environ.get("QD_CLI", "qnn-debug")
STEPS, FAULT_LAYER, FAULT_STEP = 24, 2, 20


def diff(ref, dev, out, *extra):
    done = subprocess.run([CLI, "diff", ref, dev, "--json", out, *extra], capture_output=True,
                          text=True)
    assert done.returncode in (0, 1), done.stderr
    with open(out) as f:
        return done.stdout, json.load(f)


def log_softmax(x):
    """float64 log-softmax of each row; rows with NaN are all NaN."""
    x = x.astype(np.float64)
    top = np.max(x, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        return x - top - np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))


def kl_rows(ref, dev):
    lp, lq = log_softmax(ref), log_softmax(dev)
    out = []
    for p_row, q_row in zip(lp, lq):
        if np.isnan(q_row).any():
            out.append(np.inf)
            continue
        weight = p_row > -np.inf
        if np.any(q_row[weight] == -np.inf):
            out.append(np.inf)
            continue
        out.append(max(0.0, float(np.sum(np.exp(p_row[weight]) * (p_row[weight] - q_row[weight])))))
    return np.array(out)


def kl_rows_stable(ref, dev):
    """The same, each term's log-ratio taken as the logits' difference less the normalisers'
    (no cancellation of two ~log(classes) numbers: what float64 allows for nearly equal rows)."""
    out = kl_rows(ref, dev)
    for i, (r, d) in enumerate(zip(ref.astype(np.float64), dev.astype(np.float64))):
        if not np.isfinite(out[i]) or not np.isfinite(r).all() or not np.isfinite(d).all():
            continue
        lse = [m + np.log(np.sum(np.exp(x - m))) for x, m in ((r, r.max()), (d, d.max()))]
        p = np.exp(r - lse[0])
        out[i] = max(0.0, float(np.sum(p * ((r - d) - (lse[0] - lse[1])))))
    return np.array(out)


def top_k(row, k):
    """The k highest classes, ties to the lower index, NaN lowest (the report's ranking)."""
    key = np.where(np.isnan(row), -np.inf, row.astype(np.float64))
    nan_last = np.isnan(row).astype(np.int8)
    return list(np.lexsort((np.arange(row.size), -key, nan_last))[:k])


def expected_tokens(ref, dev):
    """The token view numpy computes for logits [..., classes]."""
    ref = ref.reshape(-1, ref.shape[-1])
    dev = dev.reshape(-1, dev.shape[-1])
    kl = kl_rows_stable(ref, dev)
    overlap = {k: np.mean([len(set(top_k(r, k)) & set(top_k(d, k))) / k for r, d in zip(ref, dev)])
               for k in (5, 10)}
    best, last = top_k(ref[-1], 1)[0], dev[-1]
    key = np.where(np.isnan(last), -np.inf, last)
    rank = 1 + int(np.sum(key > key[best]) + np.sum(key[:best] == key[best]))
    q = log_softmax(last[None])[0]
    return {"kl_divergence": float(np.mean(kl)), "kl_max": float(np.max(kl)),
            "top5_overlap": overlap[5], "top10_overlap": overlap[10],
            "reference_token": int(best), "device_token": int(top_k(last, 1)[0]),
            "reference_token_probability": None if np.isnan(q).any() else float(np.exp(q[best])),
            "reference_token_rank": rank,
            "reference_margin": float(np.float64(ref[-1][best]) - np.float64(ref[-1][top_k(last, 1)[0]]))}


def assert_tokens(report_tokens, want, where):
    for key, value in want.items():
        got = report_tokens[key]
        if isinstance(value, float) and np.isfinite(value):
            # float64's rounding of a log-normaliser (about 1e-16 of log(classes)) bounds a KL
            assert got == pytest.approx(value, rel=1e-9, abs=1e-14), (where, key)
        elif isinstance(value, float):
            assert got == "inf", (where, key, got)
        else:
            assert got == value, (where, key)


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("rope"))
    emu.emulate(out, emu.Config(), emu.Settings(steps=STEPS, fault="rope", fault_layer=FAULT_LAYER,
                                                 fault_step=FAULT_STEP, bits=16))
    stdout, report = diff(f"{out}/ref.h5", f"{out}/dev.h5", f"{out}/report.json")
    return out, stdout, report


def test_every_step_matches_numpy(decode):
    out, _, report = decode
    ref, dev = qd.Store(f"{out}/ref.h5"), qd.Store(f"{out}/dev.h5")
    steps = report["steps"]
    assert len(steps) == STEPS + 1
    for step in steps:
        r = ref.tensor(emu.GRAPH_OUTPUT, run=step["reference_run"]).numpy(dequantize=True)
        d = dev.tensor(emu.GRAPH_OUTPUT, run=step["device_run"]).numpy(dequantize=True)
        want = expected_tokens(r, d)
        assert_tokens(step["tokens"], want, f"run {step['device_run']}")
        assert step["tokens"]["differs"] == (want["reference_token"] != want["device_token"])
        run = next(x for x in report["runs"] if x["device_run"] == step["device_run"])
        assert run["classification"]["kl_divergence"] == step["tokens"]["kl_divergence"]


def test_prefill_averages_its_rows(decode):
    _, _, report = decode
    prefill = report["runs"][0]["classification"]
    assert prefill["rows"] > 1, "the emulator's prefill ranks every prompt position"
    assert prefill["kl_max"] >= prefill["kl_divergence"]


def test_first_diverging_token_and_the_op_before_it(decode):
    _, stdout, report = decode
    steps = report["steps"]
    first = next(s for s in steps if s["tokens"]["differs"])
    token = report["summary"]["first_diverging_token"]
    assert token["device_run"] == first["device_run"] >= FAULT_STEP
    assert (token["device_token"], token["reference_token"]) == (
        first["tokens"]["device_token"], first["tokens"]["reference_token"])
    departure = token["first_departure"]
    assert departure["device_run"] <= token["device_run"]
    assert departure == report["summary"]["first_departure"]
    assert departure["name"] == f"layers.{FAULT_LAYER}.attn.rope_k"
    assert f"first diverging token: device run {first['device_run']}" in stdout
    assert "layers.2.attn.rope_k" in stdout.split("first diverging token:")[1].splitlines()[0]
    line = next(x for x in stdout.splitlines() if x.strip().startswith(f"{first['device_run']} "))
    assert f"{token['device_token']}!={token['reference_token']}" in line


def test_python_report_steps_and_reload(decode):
    out, _, report = decode
    with open(f"{out}/report.json") as f:
        loaded = qd.Report(f.read())
    assert [s["tokens"] for s in loaded.steps] == [s["tokens"] for s in report["steps"]]
    assert loaded.summary["first_diverging_token"] == report["summary"]["first_diverging_token"]


def write_scores(path, rows):
    with qd.StoreWriter(path) as w:
        w.begin_run("step")
        w.write("hidden", np.ones((1, 64), np.float32), handles=[1])
        w.write("head", rows[0], handles=[2])
        w.write("scores", rows[1], handles=[3])
        w.end_run()


def test_masked_nan_and_impossible_rows(tmp_path):
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(4, 64)).astype(np.float32) * 3
    dev = ref + rng.normal(size=ref.shape).astype(np.float32) * 0.05
    ref[0, 10:20] = dev[0, 10:20] = -np.inf  # masked classes on both sides: no weight, no cost
    dev[1, 5] = np.nan                        # a device row with NaN: no distribution
    dev[2, 30] = -np.inf                      # the device rules out a class the reference weighs
    ref[3, :] = ref[3, :] + 100               # large logits: a shift must not cost precision
    dev[3, :] = ref[3, :]
    write_scores(str(tmp_path / "r.h5"), [ref, ref])
    write_scores(str(tmp_path / "d.h5"), [ref, dev])
    _, report = diff(str(tmp_path / "r.h5"), str(tmp_path / "d.h5"), str(tmp_path / "r.json"))
    tokens = report["runs"][0]["classification"]
    assert tokens["tensor"] == "scores"
    want = expected_tokens(ref, dev)
    assert want["kl_divergence"] == np.inf and want["kl_max"] == np.inf
    assert_tokens(tokens, want, "crafted rows")
    assert tokens["reference_token_probability"] == pytest.approx(1 / np.sum(np.exp(
        ref[3].astype(np.float64) - ref[3].max())) * np.exp(0.0), rel=1e-12)
    kl = kl_rows(ref, dev)
    assert kl[0] > 0 and np.isfinite(kl[0]) and kl[3] == 0


def test_logits_named_when_not_the_final_output(tmp_path):
    rng = np.random.default_rng(3)
    head = rng.normal(size=(1, 100)).astype(np.float32)
    dev_head = head.copy()
    dev_head[0, np.argmax(head)] -= 10  # the device's token differs
    scores = rng.normal(size=(1, 50)).astype(np.float32)
    write_scores(str(tmp_path / "r.h5"), [head, scores])
    write_scores(str(tmp_path / "d.h5"), [dev_head, scores])
    _, by_default = diff(str(tmp_path / "r.h5"), str(tmp_path / "d.h5"), str(tmp_path / "a.json"))
    assert by_default["runs"][0]["classification"]["tensor"] == "scores"
    assert "first_diverging_token" not in by_default["summary"]
    _, named = diff(str(tmp_path / "r.h5"), str(tmp_path / "d.h5"), str(tmp_path / "b.json"),
                    "--logits", "head")
    assert named["options"]["logits"] == "head"
    assert named["runs"][0]["classification"]["tensor"] == "head"
    assert named["summary"]["first_diverging_token"]["device_token"] != int(np.argmax(head))
    assert_tokens(named["runs"][0]["classification"], expected_tokens(head, dev_head), "--logits")
    # A name no run holds is not replaced by a guess: no figures, and a warning that says so.
    _, missing = diff(str(tmp_path / "r.h5"), str(tmp_path / "d.h5"), str(tmp_path / "c.json"),
                      "--logits", "lm_head")
    assert missing["runs"][0]["classification"] is None
    assert any(w.startswith("--logits 'lm_head': 1 of 1 runs have no classifier figures")
               for w in missing["warnings"]), missing["warnings"]
