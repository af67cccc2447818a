"""Report.write_model_explorer / write_model_explorer_graph (docs/reports.md, "Model Explorer"):
a PyTorch model's capture keyed by its fx node names, the same files the CLI writes.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest tests/python/test_model_explorer.py
"""
import json
import os
import subprocess

import pytest

import qnn_debug

torch = pytest.importorskip("torch", reason="capture_torch needs PyTorch (python3-torch)")

from qnn_debug import capture_torch  # noqa: E402
from test_capture_torch import CNN_INPUTS, CNN_TENSORS, make_cnn, write_device  # noqa: E402

CLI = os.environ.get("QD_CLI", "qnn-debug")
EXACT_DB = 144.49439791871097  # float32's resolution: an exact op's value


def colour(result, thresholds):
    """As Model Explorer picks it: the result's own colour, else the first threshold >= value."""
    if "bgColor" in result:
        return result["bgColor"]
    return next((t["bgColor"] for t in thresholds if result["value"] <= t["value"]), None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref.h5"
    torch.manual_seed(3)
    capture_torch(make_cnn(), [torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)], path)
    return path


def test_a_device_run_colours_the_fx_nodes(reference, tmp_path):
    device = tmp_path / "dev.h5"
    write_device(reference, device, fault="conv2")  # QNN-like names: "conv2@0", "relu_1@0"
    report = qnn_debug.diff(str(reference), str(device))
    report.write_model_explorer(tmp_path / "me.json")
    report.write_model_explorer_graph(tmp_path / "graph.json")
    data = json.loads((tmp_path / "me.json").read_text())
    assert set(data["results"]) == set(CNN_TENSORS)  # the graph input "x" is a node too
    for node in CNN_TENSORS:  # the worst of the two device runs
        sqnrs = [g["sqnr_db"] for run in report.runs for g in run["groups"]
                 if g["pairs"][0]["device"]["name"] == f"{node}@0"]
        assert len(sqnrs) == 2 and data["results"][node]["value"] == min(sqnrs), node
    assert colour(data["results"]["conv2"], data["thresholds"]) == "#c62828"
    assert colour(data["results"]["conv1"], data["thresholds"]) == "#2e7d32"

    graph = json.loads((tmp_path / "graph.json").read_text())
    nodes = {n["id"]: n for n in graph["graphs"][0]["nodes"]}
    assert set(nodes) == set(CNN_TENSORS)
    for node, inputs in CNN_INPUTS.items():
        sources = [e["sourceNodeId"] for e in nodes[node]["incomingEdges"]]
        assert sources == inputs, node
        assert nodes[node]["outputsMetadata"][0]["attrs"][0] == \
            {"key": "tensor_name", "value": f"{node}@0"}

    # The library writes what the CLI writes from the saved report.
    (tmp_path / "r.json").write_text(report.text)
    subprocess.run([CLI, "report", str(tmp_path / "r.json"), "--model-explorer",
                    str(tmp_path / "cli.json"), "--model-explorer-graph",
                    str(tmp_path / "cli_graph.json")], check=True, capture_output=True)
    assert (tmp_path / "cli.json").read_text() == (tmp_path / "me.json").read_text()
    assert (tmp_path / "cli_graph.json").read_text() == (tmp_path / "graph.json").read_text()


def test_fx_names_keep_their_own_counter(reference, tmp_path):
    """Two captures of the model: "relu_1" is fx's second relu, not output 1 of "relu"."""
    report = qnn_debug.diff(str(reference), str(reference))
    report.write_model_explorer(tmp_path / "me.json")
    data = json.loads((tmp_path / "me.json").read_text())
    assert set(data["results"]) == set(CNN_TENSORS)
    assert {r["value"] for r in data["results"].values()} == {EXACT_DB}  # exact: the finite cap
