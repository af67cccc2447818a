"""The qnn_debug package without torch: StoreWriter -> Store round trips for every dtype,
quantization and layout; atomic writes; errors as QnnDebugError; diff() giving the CLI's report
byte for byte; the report views.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest tests/python
"""
import json
import re
import os
import subprocess
import sys

import numpy as np
import pytest

import qnn_debug
from qnn_debug import QnnDebugError, Store, StoreWriter

CLI = os.environ.get("QD_CLI", "qnn-debug")

rng = np.random.default_rng(11)

PLAIN = {
    "f32": rng.standard_normal((2, 3, 4)).astype(np.float32),
    "f16": np.array([1.5, -2.0, 65504.0, -0.0], np.float16),
    "f64": rng.standard_normal(5),
    "i8": np.array([-128, 0, 127], np.int8),
    "u8": np.arange(10, dtype=np.uint8),
    "i16": np.array([-32768, 32767], np.int16),
    "u16": np.array([0, 65535], np.uint16),
    "i32": np.array([-(2**31), 2**31 - 1], np.int32),
    "u32": np.array([0, 2**32 - 1], np.uint32),
    "i64": np.array([-(2**63), 2**63 - 1], np.int64),
    "u64": np.array([0, 2**64 - 1], np.uint64),
    "mask": np.array([[True, False]]),
    "scalar": np.float32(2.5),
    "empty": np.zeros((0, 4), np.float32),
}


def write_every_kind(path):
    with StoreWriter(path, backend="test", model="m") as w:
        w.begin_run("first")
        for name, array in PLAIN.items():
            w.write(name, array, handles=[len(name)])
        # Quantized: per tensor (QNN offset), per channel (zero point), NHWC stored.
        w.write("q", np.array([0, 100, 255], np.uint8), dtype="UFIXED_POINT_8", scale=0.5,
                offset=-128, handles=[1, 2], output_index=1, role="graph_output")
        w.write("qa", np.array([[1, -1], [2, -2], [3, -3]], np.int8), dtype="SFIXED_POINT_8",
                scale=[0.1, 0.2], zero_point=[1, -1], axis=1)
        nhwc = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)  # N, H, W, C
        w.write("nhwc", nhwc, axis_order=[0, 3, 1, 2])
        w.end_run()
        w.begin_run("second")
        w.write("f32", PLAIN["f32"] * 2)
        w.end_run()
        w.graph_node("conv", "Conv2d", ["input"], ["f32"], handles=[4])


def test_every_dtype_reads_back_bit_for_bit(tmp_path):
    path = tmp_path / "s.h5"
    write_every_kind(path)
    store = Store(path)
    assert [r.name for r in store.runs] == ["first", "second"]
    assert store.metadata["backend"] == "test"
    first = store.runs[0]
    for name, array in PLAIN.items():
        t = first.tensor(name)
        back = t.numpy()
        assert back.dtype == np.asarray(array).dtype, name
        assert back.shape == np.shape(array), name
        assert back.tobytes() == np.ascontiguousarray(array).tobytes(), name
        assert t.handles == [len(name)]
    assert store.tensor("f32", run=1).numpy().tobytes() == (PLAIN["f32"] * 2).tobytes()
    assert store.graph == [{"name": "conv", "op_type": "Conv2d", "inputs": ["input"],
                            "outputs": ["f32"], "handles": [4]}] or \
        store.graph[0]["name"] == "conv" and store.graph[0]["handles"] == [4]


def test_quantization_and_layout(tmp_path):
    path = tmp_path / "s.h5"
    write_every_kind(path)
    store = Store(path)
    q = store.tensor("q")
    assert (q.dtype, q.handles, q.output_index, q.role) == ("UFIXED_POINT_8", [1, 2], 1,
                                                            "graph_output")
    assert q.numpy().dtype == np.uint8
    np.testing.assert_array_equal(q.numpy(dequantize=True),
                                  np.array([-64.0, -14.0, 63.5], np.float32))
    qa = store.tensor("qa").numpy(dequantize=True)
    raw = np.array([[1, -1], [2, -2], [3, -3]], np.float64)
    expected = ((raw - np.array([1, -1])) * np.array([0.1, 0.2])).astype(np.float32)
    np.testing.assert_array_equal(qa, expected)
    nhwc = store.tensor("nhwc")
    assert nhwc.dims == [1, 2, 3, 4] and nhwc.shape == (1, 4, 2, 3)
    stored = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_array_equal(nhwc.numpy(), stored)
    np.testing.assert_array_equal(nhwc.numpy(dequantize=True), stored.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(nhwc.numpy(dequantize=True, layout="stored"), stored)


def test_chunks_stream_the_stored_values(tmp_path):
    path = tmp_path / "s.h5"
    big = rng.standard_normal(100_003).astype(np.float32)
    with StoreWriter(path) as w:
        w.begin_run("r")
        w.write("big", big)
        w.end_run()
    pieces = list(Store(path).tensor("big").chunks(piece_bytes=40_000))
    assert [len(p) for p in pieces[:2]] == [10_000, 10_000] and len(pieces) == 11
    assert np.concatenate(pieces).tobytes() == big.tobytes()


def test_the_cli_reads_what_python_wrote(tmp_path):
    path = tmp_path / "s.h5"
    write_every_kind(path)
    doc = json.loads(subprocess.run([CLI, "inspect", str(path), "--json"], check=True,
                                    capture_output=True, text=True).stdout)
    assert [t["name"] for t in doc["tensors"]][:3] == ["f32", "f16", "f64"]
    subprocess.run([CLI, "inspect", "--verify", str(path)], check=True, capture_output=True)


def test_a_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "s.h5"
    with pytest.raises(RuntimeError, match="boom"):
        with StoreWriter(path) as w:
            w.begin_run("r")
            w.write("x", np.ones(3, np.float32))
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    # An existing store is kept when a rewrite fails.
    write_every_kind(path)
    before = path.read_bytes()
    w = StoreWriter(path)
    w.begin_run("r")
    w.abort()
    assert path.read_bytes() == before


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(QnnDebugError) as missing:
        Store(tmp_path / "nope.h5")
    assert missing.value.code == "not_found" and "nope.h5" in str(missing.value)
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(QnnDebugError) as damaged:
        Store(bad)
    assert "bad.h5" in str(damaged.value)

    w = StoreWriter(tmp_path / "w.h5")
    w.begin_run("r")
    with pytest.raises(TypeError, match="UFIXED_POINT_8 holds uint8"):
        w.write("x", np.ones(3, np.int8), dtype="UFIXED_POINT_8")
    with pytest.raises(TypeError, match="complex"):
        w.write("x", np.ones(3, np.complex64))
    with pytest.raises(QnnDebugError) as quant:
        w.write("per_axis", np.ones((2, 3), np.int8), dtype="SFIXED_POINT_8", scale=[1.0, 2.0],
                offset=[0, 0], axis=1)
    assert quant.value.code == "invalid_argument" and "per_axis" in str(quant.value)
    w.end_run()
    w.close()
    with pytest.raises(QnnDebugError) as closed:
        w.begin_run("again")
    assert closed.value.code == "state"


INT8_Q = {"dtype": "SFIXED_POINT_8", "scale": 0.5}


def write_one(path, name, array, **keywords):
    with StoreWriter(path) as w:
        w.begin_run("r")
        w.write(name, array, **keywords)
        w.end_run()


@pytest.mark.parametrize("offset", [2**31 + 5, 2**40, 2**32 + 5, -(2**31) - 1])
def test_offsets_beyond_int32_are_refused_not_wrapped(tmp_path, offset):
    # Before: 2**31 + 5 was stored as -2147483643, 2**40 as 0, 2**32 + 5 as 5.
    path = tmp_path / "s.h5"
    with pytest.raises(QnnDebugError) as refused:
        write_one(path, "wide", np.array([1, 2], np.int8), offset=offset, **INT8_Q)
    assert refused.value.code == "invalid_argument"
    assert str(refused.value) == (f"tensor 'wide': quantization offset {offset} is outside int32 "
                                  "(QNN offsets and the capture ABI's)")
    assert not path.exists()


def test_int32_boundary_offsets_are_stored_exactly(tmp_path):
    path = tmp_path / "s.h5"
    write_one(path, "edge", np.array([1, 2], np.int8), dtype="SFIXED_POINT_8", scale=[0.5, 0.25],
              offset=[-(2**31), 2**31 - 1], axis=0)
    assert Store(path).tensor("edge").quantization["offsets"] == [-(2**31), 2**31 - 1]


def test_a_name_with_nul_is_refused_not_cut(tmp_path):
    # Before: 'a\x00b' was stored as 'a', next to a tensor really named 'a'.
    path = tmp_path / "s.h5"
    with StoreWriter(path) as w:
        w.begin_run("r")
        w.write("a", np.zeros(2, np.float32))
        with pytest.raises(QnnDebugError) as refused:
            w.write("a\x00b", np.zeros(2, np.float32))
        with pytest.raises(QnnDebugError, match="graph node 'n': tensor 'a.x00b' contains a NUL"):
            w.graph_node("n", "Relu", ["a\x00b"], ["a"])
        w.end_run()
    assert str(refused.value) == ("tensor 'a\\x00b': the name contains a NUL byte, which the "
                                  "capture ABI cannot carry (its names are C strings)")
    assert [t.name for t in Store(path).tensors] == ["a"]


def test_a_path_or_run_name_with_nul_is_refused_not_cut(tmp_path):
    with pytest.raises(QnnDebugError) as path_refused:
        StoreWriter(str(tmp_path / "a") + "\x00b.h5")
    assert path_refused.value.code == "invalid_argument"
    assert "a\\x00b.h5' contains a NUL byte, which the capture ABI cannot carry" in \
        str(path_refused.value)
    w = StoreWriter(tmp_path / "s.h5")
    with pytest.raises(QnnDebugError, match=r"^run 'r\\x00x' contains a NUL byte"):
        w.begin_run("r\x00x")
    w.abort()
    assert os.listdir(tmp_path) == []  # before: a store named 'a' appeared


def test_the_cli_refuses_an_npz_member_name_with_nul(tmp_path):
    # The CLI's importers write through the same StoreSink: exit 2, naming the file and tensor.
    import io
    packed = io.BytesIO()
    np.savez(packed, aXb=np.zeros(3, np.float32), a=np.ones(3, np.float32))
    npz = tmp_path / "nul.npz"
    npz.write_bytes(packed.getvalue().replace(b"aXb.npy", b"a\x00b.npy"))  # zipfile cuts at NUL
    out = tmp_path / "s.h5"
    result = subprocess.run([CLI, "capture", "npz", str(npz), "-o", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == (f"qnn-debug: error: '{npz}': array 'a\\x00b': tensor 'a\\x00b': the "
                             "name contains a NUL byte, which the capture ABI cannot carry (its "
                             "names are C strings)\n")
    assert not out.exists()


@pytest.mark.parametrize("keywords, message", [
    ({"bitwidth": 264, **INT8_Q}, "tensor 't': bitwidth 264 is outside 0..255"),  # was 8
    ({"bitwidth": -1, **INT8_Q}, "tensor 't': bitwidth -1 is outside 0..255"),
    ({"axis": 2**32, **INT8_Q}, "tensor 't': axis 4294967296 is outside -2147483648..2147483647"),
    ({"axis": -3, **INT8_Q}, "tensor 't': quantization axis -3 is neither -1 nor an index"),
    ({"output_index": 2**31}, "tensor 't': output_index 2147483648 is outside"),
    ({"output_index": -7}, "tensor 't': output_index -7 is neither -1 nor an index"),  # was -1
    ({"handles": [2**64]}, "tensor 't': handle 18446744073709551616 is outside"),
    ({"axis_order": [256]}, "tensor 't': axis_order entry 256 is outside 0..255"),
    ({"offset": 2**70, **INT8_Q}, "tensor 't': offset 1180591620717411303424 is outside"),
    ({"offset": 3}, "tensor 't': quantization has offsets or an axis but no scales"),  # was dropped
    ({"dtype": "SFIXED_POINT_8", "scale": [0.5, 0.25], "offset": [1], "axis": 0},
     "tensor 't': quantization has 2 scales but 1 offsets"),
])
def test_every_integer_is_range_checked_with_the_tensor_name(tmp_path, keywords, message):
    with pytest.raises(QnnDebugError) as refused:
        write_one(tmp_path / "s.h5", "t", np.array([1, 2], np.int8), **keywords)
    assert refused.value.code == "invalid_argument"
    assert str(refused.value).startswith(message)


def test_a_non_finite_scale_is_kept_as_given(tmp_path):
    # By design (store.h, validate_tensor): the scale is the producer's; the lint flags it.
    path = tmp_path / "s.h5"
    write_one(path, "t", np.array([1, 2], np.int8), dtype="SFIXED_POINT_8",
              scale=[float("inf"), float("nan")], offset=[0, 0], axis=0)
    scales = Store(path).tensor("t").quantization["scales"]
    assert scales == ["inf", "nan"]  # the inspect JSON's spelling of non-finite numbers


def diff_pair(tmp_path):
    ref, dev = tmp_path / "ref.h5", tmp_path / "dev.h5"
    x = rng.standard_normal((4, 16)).astype(np.float32)
    with StoreWriter(ref) as w, StoreWriter(dev) as d:
        w.begin_run("r")
        d.begin_run("r")
        for k, name in enumerate(["fc1", "relu", "fc2", "logits"]):
            y = x * (k + 1)
            w.write(name, y, handles=[k + 1])
            scale = float(np.abs(y).max()) / 127
            q = np.clip(np.rint(y / scale), -128, 127).astype(np.int8)
            if name == "fc2":
                q = np.clip(q.astype(np.int16) + 40, -128, 127).astype(np.int8)  # the fault
            d.write(f"{name}@0", q, dtype="SFIXED_POINT_8", scale=scale, offset=0,
                    handles=[k + 1])
        w.end_run()
        d.end_run()
    return ref, dev


def test_diff_gives_the_cli_report_byte_for_byte(tmp_path):
    ref, dev = diff_pair(tmp_path)
    report = qnn_debug.diff(ref, dev)
    assert report.verdict == "fail"
    first = report.first_divergence
    assert "fc2" in json.dumps(first)
    cli_json = tmp_path / "cli.json"
    run = subprocess.run([CLI, "diff", str(ref), str(dev), "--json", str(cli_json)],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert report.text == cli_json.read_text()
    assert "fc2" in report.summary_text()
    report.write_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    # Every library view has its writer, a hyphenated name included, writing what the CLI does.
    report.write_suggest_overrides(tmp_path / "o.json")
    cli_overrides = tmp_path / "cli_o.json"
    subprocess.run([CLI, "report", str(cli_json), "--suggest-overrides", str(cli_overrides)],
                   check=True, capture_output=True)
    assert (tmp_path / "o.json").read_text() == cli_overrides.read_text()
    assert "activation_encodings" in json.loads(cli_overrides.read_text())


def test_diff_options_and_errors(tmp_path):
    ref, dev = diff_pair(tmp_path)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"defaults": {"fail_below": 10}}))
    with pytest.raises(QnnDebugError) as bad_policy:
        qnn_debug.diff(ref, dev, policy=policy)
    assert "defaults" in str(bad_policy.value) and "accepted" in str(bad_policy.value)
    with pytest.raises(TypeError, match="dev_nonsense"):
        qnn_debug.diff(ref, dev, dev_nonsense=1)
    with pytest.raises(QnnDebugError) as missing:
        qnn_debug.diff(tmp_path / "none.npz", dev)
    assert missing.value.code == "not_found"
    # npz on one side, with a per-side format override.
    npz = tmp_path / "ref.npz"
    np.savez(npz, **{t.name: t.numpy() for t in Store(ref).runs[0].tensors})
    report = qnn_debug.diff(npz, dev, ref_format="npz")
    assert report.json["reference"]["path"].endswith("ref.npz") or "ref.npz" in report.text
    assert report.verdict == "fail"


def test_settings_are_the_clis_and_build_the_same_request(tmp_path):
    """diff()'s own settings are the CLI's list (pipeline/request.h): each is a keyword, each has
    its CLI option, and a value is parsed by the function the CLI uses."""
    settings = qnn_debug._native.diff_settings()
    keys = {s["key"] for s in settings}
    assert {"labels", "policy", "mapping", "jobs", "ref_run", "logits", "atol", "rtol", "chunk_kib"} == keys
    cli_help = subprocess.run([CLI, "diff", "--help"], capture_output=True, text=True).stdout
    for flag in ("--label", "--policy", "--map", "--jobs", "--ref-run", "--atol", "--rtol",
                 "--chunk-kib"):
        assert re.search(rf"[ ,]{flag} ", cli_help), flag
    ref, dev = diff_pair(tmp_path)
    plain = qnn_debug.diff(ref, dev)
    # A chunk of 1 KiB streams the pairs in 256-value pieces: the same figures, to the byte.
    small = qnn_debug.diff(ref, dev, chunk_kib=1, jobs=1, atol=1e-5, labels=["npu"])
    assert small.devices == ["npu"]
    assert small.groups == plain.groups
    cli_json = tmp_path / "cli.json"
    subprocess.run([CLI, "diff", str(ref), str(dev), "--chunk-kib", "1", "--jobs", "1",
                    "--atol", "1e-05", "--label", "npu", "--json", str(cli_json)],
                   capture_output=True, text=True)
    assert small.text == cli_json.read_text()
    with pytest.raises(QnnDebugError) as bad:
        qnn_debug.diff(ref, dev, jobs=-2)
    assert str(bad.value).endswith("--jobs: must be 0 or more, not -2")
    with pytest.raises(QnnDebugError, match="--atol: must be a number"):
        qnn_debug.diff(ref, dev, atol="x")
    # The typed parts: each run's verdict of every group across runs, the judge's.
    for entry in plain.aggregate:
        assert all(cell["verdict"] in ("pass", "warn", "fail") for cell in entry["per_run"])
    by_id = {g["id"]: g["verdict"] for g in plain.groups}
    assert all(e["per_run"][0]["verdict"] == by_id[e["id"]] for e in plain.aggregate)


def test_side_options_come_from_the_formats_as_the_clis_do(tmp_path):
    """diff()'s keywords are the native list of every input format's options
    (importers/input_format.h), the same list `qnn-debug diff` makes --ref-*/--dev-* from."""
    options = qnn_debug._native.input_options()
    keys = [o["key"] for o in options]
    assert len(keys) == len(set(keys))
    assert {"encodings", "naming", "handle_map", "heap_profile", "debug_buffer", "etrecord",
            "etrecord_method", "net_json", "input_list", "shapes"} == set(keys)
    cli_help = subprocess.run([CLI, "diff", "--help"], capture_output=True, text=True).stdout
    for o in options:
        for side in ("ref", "dev"):
            assert f"  --{side}-{o['flag']} " in cli_help, o
        assert (f"  --{o['flag']} " in cli_help) == o["both_sides"], o
    # Every option is a keyword for each side, and for both when the CLI has it for both (a
    # store reads none of them, so the diff runs as without them).
    ref, dev = diff_pair(tmp_path)
    given = {}
    for o in options:
        value = ["x"] if o["many"] else "x"
        given.update({f"ref_{o['key']}": value, f"dev_{o['key']}": value})
        if o["both_sides"]:
            given[o["key"]] = value
    assert qnn_debug.diff(ref, dev, **given).verdict == "fail"
    # Options for both sides reach each side's conversion.
    npz = tmp_path / "ref.npz"
    np.savez(npz, x=np.zeros(2, np.float32))
    with pytest.raises(QnnDebugError) as missing:
        qnn_debug.diff(npz, dev, encodings=[tmp_path / "missing.json"])
    assert "missing.json" in str(missing.value)


def test_to_pandas_has_one_row_per_pair(tmp_path):
    pd = pytest.importorskip("pandas")
    ref, dev = diff_pair(tmp_path)
    report = qnn_debug.diff(ref, dev)
    frame = report.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    pairs = sum(len(g["pairs"]) for g in report.groups)
    assert len(frame) == pairs == 4


def test_bfloat16_goes_in_as_its_bits_and_reads_back_as_float32(tmp_path):
    values = np.array([1.5, -2.0, 2.0**127, 0.0078125], np.float32)
    bits = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact: the low halves are zero
    path = tmp_path / "bf.h5"
    with StoreWriter(path) as w:
        w.begin_run("r")
        w.write("bf", bits, dtype="BFLOAT_16")
        with pytest.raises(TypeError, match="uint16 or int16 view"):
            w.write("wrong", values, dtype="BFLOAT_16")
        w.end_run()
    t = Store(path).tensor("bf")
    assert t.dtype == "BFLOAT_16"
    assert t.numpy().dtype == np.float32 and t.numpy().tobytes() == values.tobytes()
    with pytest.raises(QnnDebugError, match="read it whole"):
        t.chunks()


REAL_ETDUMP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "realdata",
                           "executorch", "etdump.etdp")


@pytest.mark.skipif(not os.path.exists(REAL_ETDUMP), reason="../shared/realdata is absent")
def test_profile_events_carry_the_etdump_instruction_id(tmp_path):
    # The real tutorial ETDump: instruction i runs native_call_<op>.out and OPERATOR_CALL;
    # Method::init runs outside any instruction.
    store_path = tmp_path / "tutorial.h5"
    subprocess.run([CLI, "capture", "etdump", REAL_ETDUMP, "-o", str(store_path)], check=True,
                   capture_output=True)
    events = Store(store_path).profile_events
    by_name = {}
    for e in events:
        by_name.setdefault(e["name"], []).append(e["instruction_id"])
    assert by_name["Method::init"] == [None]
    assert by_name["native_call_convolution.out"] == [0, 3]
    assert by_name["OPERATOR_CALL"] == list(range(14))


# Run in a child process: writes a permuted pair, limits its own address space to what it has
# plus 112 MiB (room for a small diff, not for un-permuting one 32 Mi-element tensor as 128 MiB
# of floats) and prints what diff() raised.
OUT_OF_MEMORY_CHILD = r"""
import resource, sys
import numpy as np
import qnn_debug

def write_pair(ref, dev, side):
    values = np.full((1, 32, side, side), 3, np.int8)
    with qnn_debug.StoreWriter(ref, model="m") as w:
        for t in range(2):
            w.write(f"conv{t}", values, dtype="SFIXED_POINT_8", scale=0.5, offset=0, handles=[t + 1])
    with qnn_debug.StoreWriter(dev, model="m") as w:
        for t in range(2):
            w.write(f"conv{t}", values.transpose(0, 2, 3, 1).copy(), dtype="SFIXED_POINT_8",
                    scale=0.5, offset=0, handles=[t + 1], axis_order=[0, 3, 1, 2])

d = sys.argv[1]
write_pair(d + "/small_ref.h5", d + "/small_dev.h5", 64)
write_pair(d + "/ref.h5", d + "/dev.h5", 1024)
with open("/proc/self/status") as status:
    vm = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmSize:"))
limit = vm + (112 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
print("small:", qnn_debug.diff(d + "/small_ref.h5", d + "/small_dev.h5").verdict)
try:
    qnn_debug.diff(d + "/ref.h5", d + "/dev.h5")
    print("large: no error")
except qnn_debug.QnnDebugError as e:
    print("large:", e.code, str(e))
"""


def test_out_of_memory_is_an_error_naming_the_files_not_an_abort(tmp_path):
    run = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY_CHILD, str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    ref, dev = tmp_path / "ref.h5", tmp_path / "dev.h5"
    assert run.stdout == (f"small: pass\nlarge: no_memory out of memory while comparing {ref} "
                          f"with {dev}\n")
