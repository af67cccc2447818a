"""qnn_debug.diff with several devices (docs/python.md, docs/user-guide.md section 12): one
report, the same as `qnn-debug diff REF DEV1 DEV2 ... --label ...` writes."""
import json
import os
import subprocess

import pytest

import qnn_debug

CLI = os.environ["QD_CLI"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The demo's reference with a clean device and one whose conv3 kernel is wrong."""
    root = tmp_path_factory.mktemp("side")
    for name, fault in (("clean", ["--fault", "none"]),
                        ("kernel", ["--fault", "requant-scale", "--at", "conv3"])):
        subprocess.run([CLI, "demo", "--out", str(root / name), "--seed", "7", *fault],
                       stdout=subprocess.DEVNULL, check=False)
    return root


def test_a_list_of_devices_gives_one_report_with_the_matrix(stores, tmp_path):
    ref = stores / "clean" / "reference.h5"
    devices = [stores / "clean" / "device.h5", stores / "kernel" / "device.h5"]
    report = qnn_debug.diff(ref, devices, labels=["good", "bad kernel"], jobs=1)
    doc = report.json
    assert [d["label"] for d in doc["devices"]] == ["good", "bad kernel"]
    assert [run["device_index"] for run in doc["runs"]] == [0, 1]
    top = max(doc["device_matrix"], key=lambda row: row["disagreement_db"])
    assert top["name"] == "conv3__debugID_5"
    assert doc["devices"][top["outlier"]]["label"] == "bad kernel"
    assert [o["verdict"] for o in doc["device_outcomes"]] == ["pass", "fail"]
    assert report.devices == ["good", "bad kernel"]
    assert report.device_matrix[0]["id"] == top["id"]
    assert [s["device_index"] for s in report.steps] == [0, 1]

    out = tmp_path / "cli.json"
    subprocess.run([CLI, "diff", str(ref), *map(str, devices), "--label", "good", "--label",
                    "bad kernel", "--jobs", "1", "--json", str(out)], check=False,
                   stdout=subprocess.DEVNULL)
    cli = json.loads(out.read_text())
    for doc_ in (cli, doc):
        for store in [doc_["reference"], doc_["device"], *doc_["devices"]]:
            store.pop("path")  # the same files, named alike
    assert cli["device_matrix"] == doc["device_matrix"]
    assert cli["summary"] == doc["summary"]


def test_one_device_as_a_path_or_a_list_is_the_same_report(stores):
    ref = stores / "clean" / "reference.h5"
    device = stores / "kernel" / "device.h5"
    alone = qnn_debug.diff(ref, device, jobs=1).json
    listed = qnn_debug.diff(ref, [device], jobs=1).json
    assert "devices" not in alone and alone == listed


def test_bad_device_lists_are_clear_errors(stores):
    ref = stores / "clean" / "reference.h5"
    with pytest.raises(ValueError, match="no device input"):
        qnn_debug.diff(ref, [])
    with pytest.raises(qnn_debug.QnnDebugError, match="3 --label for 1 device"):
        qnn_debug.diff(ref, [stores / "clean" / "device.h5"], labels=["a", "b", "c"])
