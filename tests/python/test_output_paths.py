"""Where the Python package writes (docs/output-files.md): two StoreWriters on one path never
share a staging file, report views go through symlinks and FIFOs, and a missing folder is named
as the user gave it.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest tests/python
"""
import os
import stat
import threading

import numpy as np
import pytest

import qnn_debug
from qnn_debug import QnnDebugError, Store, StoreWriter


def write_one(path, value):
    w = StoreWriter(path)
    w.begin_run("r")
    w.write("t", np.full(3, value, np.float32))
    w.end_run()
    return w


def only_value(path):
    (tensor,) = Store(path).tensors
    return float(tensor.numpy()[0])


def test_two_writers_on_one_path_each_publish_their_own_store(tmp_path):
    path = str(tmp_path / "s.h5")
    first = write_one(path, 1.0)
    second = write_one(path, 2.0)
    second.close()
    assert only_value(path) == 2.0
    first.close()  # before: the two shared one temporary file and this close failed
    assert only_value(path) == 1.0
    assert sorted(os.listdir(tmp_path)) == ["s.h5"]


def test_rerunning_a_notebook_cell_replaces_the_store(tmp_path):
    path = str(tmp_path / "s.h5")
    abandoned = write_one(path, 1.0)  # the cell's first run never closed its writer
    write_one(path, 2.0).close()
    assert only_value(path) == 2.0
    abandoned.abort()
    assert only_value(path) == 2.0
    assert sorted(os.listdir(tmp_path)) == ["s.h5"]


def test_a_missing_folder_is_named_as_given(tmp_path):
    path = str(tmp_path / "nonexistent" / "ct.h5")
    with pytest.raises(QnnDebugError) as raised:
        StoreWriter(path)
    message = str(raised.value)
    assert message == f"'{path}': cannot be written (no such folder: '{tmp_path / 'nonexistent'}')"


def test_capture_torch_names_the_missing_folder(tmp_path):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "nonexistent" / "ct.h5")
    with pytest.raises(QnnDebugError) as raised:
        qnn_debug.capture_torch(torch.nn.ReLU().eval(), [torch.ones(2)], path)
    message = str(raised.value)
    assert message.startswith(f"'{path}': cannot be written (no such folder: ")
    assert ".partial" not in message and ".creating" not in message and "HDF5" not in message


def report(tmp_path):
    path = str(tmp_path / "s.h5")
    write_one(path, 1.0).close()
    return qnn_debug.diff(path, path)


def test_report_views_follow_symlinks(tmp_path):
    r = report(tmp_path)
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.json"
    link.symlink_to("real/r.json")
    r.write_json(link)
    assert link.is_symlink()
    assert (tmp_path / "real" / "r.json").read_text() == r.text


def test_report_views_write_through_a_fifo(tmp_path):
    r = report(tmp_path)
    fifo = str(tmp_path / "r.csv")
    os.mkfifo(fifo)
    received = []
    # A daemon: if the write fails, the reader blocked in open() must not hang the test run.
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    r.write_csv(fifo)
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert received[0].startswith(b"device_run,")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
