"""Departure across runs (docs/metrics.md, section 6e) on tests/python/emulated_decoder.py's
emulated int16 decode: the rope fault from decode step S on is the earliest departure, at run S,
at the op it breaks (layer L's rope_k); the same device without the fault departs nowhere, its
per-step SQNR wandering by a few dB as its cache grows. `qnn-debug check` of the saved report
finds the same departure, and the terminal says it beside the first divergence.

The emulation's defaults (dim 256, 4 layers, a 64-slot cache, 24 decode steps): a few seconds.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest \
     tests/python/test_departure.py
"""
import json
import os
import subprocess
import sys

import pytest

qd = pytest.importorskip("qnn_debug", reason="build the package: cmake --build build")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emulated_decoder as emu  # noqa: E402

CLI = os.environ.get("QD_CLI", "qnn-debug")
STEPS, FAULT_LAYER, FAULT_STEP = 24, 2, 20


def emulated(factory, name, fault):
    out = factory.mktemp(name)
    settings = emu.Settings(steps=STEPS, fault=fault, fault_layer=FAULT_LAYER,
                            fault_step=FAULT_STEP)
    return str(out), emu.emulate(str(out), emu.Config(), settings)


def diff(out):
    """`qnn-debug diff ref dev --json` on an emulation: its terminal summary and its report."""
    done = subprocess.run([CLI, "diff", f"{out}/ref.h5", f"{out}/dev.h5", "--json",
                           f"{out}/report.json"], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    with open(f"{out}/report.json") as f:
        return done.stdout, json.load(f)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    out, truth = emulated(tmp_path_factory, "rope", "rope")
    return (out, truth) + diff(out)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out, truth = emulated(tmp_path_factory, "clean", "none")
    return (out, truth) + diff(out)


def departures(report):
    """(device run, group id) of every group that departs."""
    return [(run["device_run"], g["id"]) for run in report["runs"] for g in run["groups"]
            if "departure" in g]


def test_the_rope_fault_departs_first_at_its_step_and_op(faulty):
    out, truth, text, report = faulty
    fault = truth["fault"]
    first = report["summary"]["first_departure"]
    assert (first["device_run"], first["group"]) == (FAULT_STEP, fault["first_tensor_group_id"])
    assert first["name"] == fault["first_tensor"]
    d = first["departure"]
    assert d["baseline_runs"] == FAULT_STEP  # the prefill and every step before the fault
    assert d["baseline_db"] > 50 and d["sqnr_db"] < 20
    # Nothing departs before the fault's step, and the group departs once.
    runs = departures(report)
    assert min(run for run, _ in runs) == FAULT_STEP
    assert [g for _, g in runs].count(first["group"]) == 1
    line = (f"first departure: group {first['group']} ({first['name']}) departs in device run "
            f"{FAULT_STEP}: ")
    assert line in text, text
    assert f"(baseline over {FAULT_STEP} runs)\n" in text


def test_check_finds_the_same_departure(faulty):
    out, _, text, report = faulty
    done = subprocess.run([CLI, "check", f"{out}/report.json", "--json", "-"],
                          capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    checked = json.loads(done.stdout)
    assert checked["summary"]["first_departure"] == report["summary"]["first_departure"]
    assert departures(checked) == departures(report)


def test_a_clean_decode_departs_nowhere(clean):
    out, _, text, report = clean
    assert "first_departure" not in report["summary"]
    assert departures(report) == []
    assert "first departure" not in text
    # It does wander: the same group's SQNR moves by more than a dB from step to step (every
    # group in full: the file packs the passing ones).
    with open(f"{out}/report.json") as f:
        runs = qd.Report(f.read()).runs
    per_run = {}
    for run in runs:
        for g in run["groups"]:
            if isinstance(g["sqnr_db"], float):
                per_run.setdefault(g["id"], []).append(g["sqnr_db"])
    assert max(max(s) - min(s) for s in per_run.values()) > 3
