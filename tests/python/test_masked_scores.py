"""Masked attention scores (docs/metrics.md, "Masked positions"), end to end on the emulated int16
decode (tests/python/emulated_decoder.py): with the reference's masked scores at float32's lowest
value instead of -inf (`--mask-value lowest`) and the device's at its lowest code, the masked
positions agree on "masked". They are counted apart and left out of the scores' figures, so a
clean decode passes as it does with -inf, and softmax is not blamed for them.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest \
     tests/python/test_masked_scores.py
"""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_decoder as emu  # noqa: E402

CLI = os.environ.get("QD_CLI", "qnn-debug")
CONFIG = emu.Config(vocab=64, dim=64, layers=2, heads=4, cache=16)


def diff(out):
    """The report of `qnn-debug diff ref dev` on an emulation in `out`, and its exit code."""
    done = subprocess.run([CLI, "diff", f"{out}/ref.h5", f"{out}/dev.h5", "--json",
                           f"{out}/report.json"], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    with open(f"{out}/report.json") as f:
        return json.load(f), done.returncode, done.stdout


@pytest.fixture(scope="module", params=["lowest", "inf"])
def clean(request, tmp_path_factory):
    """A clean decode (2% of codes one step off, no fault), masked with `request.param`."""
    out = tmp_path_factory.mktemp(f"clean_{request.param}")
    emu.run_emulation(str(out), CONFIG, emu.Settings(prefill=6, steps=4, mask_value=request.param,
                                                     seed=3))
    return (request.param, *diff(out))


def score_groups(report):
    return [g for run in report["runs"] for g in run["groups"]
            if g["pairs"][0]["reference"]["name"].endswith("attn.scores")]


def test_a_clean_decode_passes_whatever_the_mask_value(clean):
    mask, report, code, stdout = clean
    assert code == 0, stdout
    assert all(run["verdict"] == "pass" for run in report["runs"]), stdout


def test_masked_scores_are_counted_apart_and_left_out(clean):
    mask, report, _, _ = clean
    scores = score_groups(report)
    assert scores, "the decode has attention scores"
    for group in scores:
        m = group["pairs"][0]["metrics"]
        assert group["verdict"] != "fail", group["id"]
        assert m["masked"] > 0, group["id"]
        assert m["ref_inf"] == 0 and m["dev_inf"] == 0, (mask, group["id"])
        assert m["n"] + m["masked"] == m["elements"]
        assert m["sqnr_db"] > 40, (group["id"], m["sqnr_db"])  # not 0 dB
        assert m["lsb_max"] < 1000, (group["id"], m["lsb_max"])  # not the mask's 1e34 steps
        assert m["saturated_low"] < m["masked"], "the mask is not clipping"
        assert "saturation" not in group["flags"]


def test_the_mask_value_changes_no_figure(tmp_path_factory):
    """The same decode masked with -inf and with float32's lowest: the same figures everywhere."""
    figures = {}
    for mask in ("inf", "lowest"):
        out = tmp_path_factory.mktemp(f"same_{mask}")
        emu.run_emulation(str(out), CONFIG, emu.Settings(prefill=6, steps=4, mask_value=mask,
                                                         seed=3))
        report, _, _ = diff(out)
        figures[mask] = [(g["id"], g["verdict"], g["sqnr_db"], g["pairs"][0]["metrics"]["masked"])
                         for run in report["runs"] for g in run["groups"]]
        figures[mask + " introducers"] = [run["introducers"][:3] for run in report["runs"]]
    assert figures["inf"] == figures["lowest"]
    assert figures["inf introducers"] == figures["lowest introducers"]
