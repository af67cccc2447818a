#!/usr/bin/python3
"""Writes the fuzzing seed corpus, tests/fuzz/corpus/<harness>/: small valid inputs of every
format, made by the project's own tools where it has one (so they are what qnn-debug really
reads) and by numpy, zipfile and flatc otherwise. The committed corpus came from this script;
rerun it only to change the seeds (it replaces the folders it writes).

Usage: /usr/bin/python3 tests/fuzz/make_corpus.py [BUILD_DIR]   (default: build, a normal build
with qnn-debug, qd-fixture-gen and qd_write_known_store built). Needs numpy and flatc.
"""

import io
import json
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
SCHEMA = ROOT / "importers" / "schema" / "etdump.fbs"


def write(harness, name, data):
    folder = CORPUS / harness
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def fresh(harnesses):
    for harness in harnesses:
        shutil.rmtree(CORPUS / harness, ignore_errors=True)


def run(*args, cwd=None):
    subprocess.run([str(a) for a in args], check=True, cwd=cwd, stdout=subprocess.DEVNULL)


# ---- stores and reports: written by the project ------------------------------------------------


def store_seeds(build, tmp):
    # The known store has every table filled (per-axis quantization, a layout, a profile event,
    # a memory checkpoint, a graph node); HDF5's chunk allocation makes any store ~1.2 MB, so it
    # is the only store seed.
    path = tmp / "known.h5"
    run(build / "tests/integration/qd_write_known_store", path)
    write("store", "known_store.bin", path.read_bytes())  # not *.h5: .gitignore skips those


def report_seeds(build, tmp):
    # Two tiny stores captured from npz and diffed: a real report of a few KB (the demo's is 150).
    qd = build / "cli/qnn-debug"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    probs = np.array([[0.1, 0.7, 0.2]], dtype=np.float32)
    np.savez(tmp / "ref.npz", conv1__debugID_1=x, softmax__debugID_2=probs, only_ref=x)
    np.savez(tmp / "dev.npz", conv1__debugID_1=x * 1.01, softmax__debugID_2=probs[:, ::-1].copy(),
             only_dev=x)
    for side in ("ref", "dev"):
        run(qd, "capture", "npz", tmp / f"{side}.npz", "-o", tmp / f"{side}.h5")
    policy = tmp / "policy.json"
    policy.write_text(json.dumps({"rules": [{"name": "softmax", "fail_below_db": 30,
                                             "warn_below_db": 40}],
                                  "min_top1_agreement": 1}))
    for name, extra in (("default", []), ("policy", ["--policy", policy])):
        out = tmp / f"{name}.json"
        subprocess.run([str(a) for a in [qd, "diff", tmp / "ref.h5", tmp / "dev.h5", "--json", out,
                                         *extra]], stdout=subprocess.DEVNULL)  # exit 1: a fail
        write("report", f"{name}_report.json", out.read_bytes())
    # A long decode (more than 16 runs): passing groups as packed rows (docs/reports.md), op 2 of
    # 3 wrong from run 15.
    run(build / "tests/integration/qd_write_decode_stores", tmp / "lref.h5", tmp / "ldev.h5", 18, 3,
        15, 2)
    out = tmp / "long.json"
    subprocess.run([str(a) for a in [qd, "diff", tmp / "lref.h5", tmp / "ldev.h5", "--json", out]],
                   stdout=subprocess.DEVNULL)  # exit 1: a fail
    write("report", "long_report.json", out.read_bytes())


# ---- ETDump: flatc from the project's schema, and the fixture generator's real dump ------------


def tensor(scalar_type, sizes, offset, strides=None):
    t = {"scalar_type": scalar_type, "sizes": sizes, "offset": offset}
    if strides is not None:
        t["strides"] = strides
    return t


def debug(value, delegate=None, name=None, instruction=1):
    event = {"instruction_id": instruction, "debug_entry": value}
    if delegate is not None:
        event["delegate_debug_id_str"] = delegate
    if name is not None:
        event["name"] = name
    return {"debug_event": event}


def etdump_document():
    # Every value type, a channels-last layout, a tensor list, profile and allocation events.
    events = [
        debug({"val": "Tensor", "tensor": tensor(1, [1, 2, 2, 3], 0, [12, 1, 6, 2])},
              delegate="aten_convolution_default@0"),
        debug({"val": "Tensor", "tensor": tensor(6, [2, 2], 64)}, name="native_call_relu.out"),
        debug({"val": "TensorList", "tensor_list": {"tensors": [tensor(0, [4], 128),
                                                                tensor(2, [2], 192)]}},
              delegate="aten_split_default"),
        debug({"val": "Int", "int_value": {"int_val": -7}}, name="count"),
        debug({"val": "Double", "double_value": {"double_val": 2.5}}, name="ratio"),
        debug({"val": "Bool", "bool_value": {"bool_val": True}}, name="flag"),
        debug({"val": "Null"}, name="nothing"),
        {"profile_event": {"delegate_debug_id_str": "aten_convolution_default:OpId_3 (cycles)",
                           "start_time": 10, "end_time": 250}},
        {"profile_event": {"name": "Method::execute", "instruction_id": 1, "start_time": 0,
                           "end_time": 900}},
        {"allocation_event": {"allocator_id": 0, "allocation_size": 4096}},
    ]
    return {"version": 0, "run_data": [
        {"name": "Execute", "bundled_input_index": 0, "allocators": [{"name": "planned"}],
         "events": events},
        {"name": "Execute", "events": events[:2]}]}


def debug_buffer():
    buffer = bytearray(256)
    buffer[0:12] = bytes(range(200, 212))
    buffer[64:80] = np.array([0.5, -1.0, 2.0, float("nan")], dtype="<f4").tobytes()
    buffer[128:132] = bytes([1, 2, 3, 4])
    buffer[192:196] = np.array([-3, 300], dtype="<i2").tobytes()
    return bytes(buffer)


def etdump_seeds(build, tmp):
    doc = tmp / "dump.json"
    doc.write_text(json.dumps(etdump_document()))
    run("flatc", "-b", "--size-prefixed", "-o", tmp, SCHEMA, doc)
    flat = (tmp / "dump.etdp").read_bytes()
    run("flatc", "-b", "-o", tmp / "plain", SCHEMA, doc)  # without the size prefix
    plain = (tmp / "plain/dump.etdp").read_bytes()
    run(build / "fixtures/qd-fixture-gen", tmp / "r.h5", tmp / "d.h5", "--etdump-dir", tmp / "fx")
    fixture = (tmp / "fx/device.etdp").read_bytes()
    for name, data in (("every_value.etdp", flat), ("not_size_prefixed.etdp", plain),
                       ("fixture_device.etdp", fixture)):
        write("etdump", name, data)
    # etdump_import: a 4-byte length, the dump, then its debug buffer. The fixture's buffer is
    # 4 MB, so it goes with an empty one (its import stops at the first tensor).
    write("etdump_import", "every_value.bin", struct.pack("<I", len(flat)) + flat + debug_buffer())
    write("etdump_import", "fixture_no_buffer.bin", struct.pack("<I", len(fixture)) + fixture)
    write("etrecord", "fixture_etrecord.bin", (tmp / "fx/etrecord.bin").read_bytes())
    write("encodings", "fixture_model_net.json", (tmp / "fx/model_net.json").read_bytes())


# ---- zip, npz, npy, ETRecord: numpy and zipfile -------------------------------------------------


def npy_bytes(array, fortran=False):
    out = io.BytesIO()
    np.save(out, np.asfortranarray(array) if fortran else array)
    return out.getvalue()


def npy_seeds():
    arrays = {
        "f4_2x3.npy": npy_bytes(np.arange(6, dtype="<f4").reshape(2, 3)),
        "big_endian_i2.npy": npy_bytes(np.array([1, -2, 300], dtype=">i2")),
        "fortran_f8.npy": npy_bytes(np.arange(6, dtype="<f8").reshape(2, 3), fortran=True),
        "bool_0d.npy": npy_bytes(np.array(True)),
        "u1_empty.npy": npy_bytes(np.zeros((0, 4), dtype="u1")),
        "f2_u8.npy": npy_bytes(np.array([1.5, -2], dtype="<f2")),
    }
    for name, data in arrays.items():
        write("npy", name, data)
    # Version 2.0 and 3.0 headers, which numpy writes only when needed: same dict, longer length.
    header = b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"
    for major, length_format in ((2, "<I"), (3, "<I")):
        pad = 64 - (6 + 2 + 4 + len(header) + 1) % 64
        dict_bytes = header + b" " * pad + b"\n"
        data = (b"\x93NUMPY" + bytes([major, 0]) + struct.pack(length_format, len(dict_bytes)) +
                dict_bytes + np.array([7, -8], dtype="<i4").tobytes())
        write("npy", f"version_{major}.npy", data)


def npz_seeds(tmp):
    arrays = {"run0/conv__debugID_1": np.arange(4, dtype=np.float32),
              "run0/relu__debugID_2": np.array([[1, 2], [3, 4]], dtype=np.uint8),
              "run1/conv__debugID_1": np.array([0.5], dtype=">f4")}
    np.savez(tmp / "stored.npz", **arrays)
    np.savez_compressed(tmp / "deflated.npz", **arrays)
    np.savez(tmp / "one.npz", x=np.array(3.0))
    for name in ("stored.npz", "deflated.npz", "one.npz"):
        data = (tmp / name).read_bytes()
        write("npz", name, data)
        write("zip", name, data)


def zip_bytes(members, method=zipfile.ZIP_STORED, force_zip64=False):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as archive:
        for name, data in members:
            with archive.open(zipfile.ZipInfo(name), "w", force_zip64=force_zip64) as member:
                member.write(data)
    return out.getvalue()


def etrecord_members():
    handle_map = {"forward": {"0": 1, "1": [2, 3], "4": []}}
    delegate_map = {"forward": {"2": {"name": "QnnBackend", "delegate_map": {
        "aten_relu_default@0": [4], "aten_add_tensor@0": [5, 6], "7": [7]}}}}
    return [("etrecord/debug_handle_map", json.dumps(handle_map).encode()),
            ("etrecord/delegate_map", json.dumps(delegate_map).encode()),
            ("etrecord/version", b"0")]


def zip_and_etrecord_seeds():
    members = etrecord_members()
    write("etrecord", "stored.bin", zip_bytes(members))
    write("etrecord", "deflated.bin", zip_bytes(members, zipfile.ZIP_DEFLATED))
    # Two methods: "" must pick "forward".
    two_methods = [("etrecord/debug_handle_map",
                    json.dumps({"forward": {"0": 1}, "prefill": {"0": [2]}}).encode()),
                   members[1]]
    write("etrecord", "two_methods.bin", zip_bytes(two_methods))
    write("zip", "zip64_deflated.zip", zip_bytes(members, zipfile.ZIP_DEFLATED, force_zip64=True))
    write("zip", "empty_member.zip", zip_bytes([("a", b""), ("dir/b.txt", b"hello")]))


# ---- JSON and text inputs: written here ---------------------------------------------------------

CONTEXT_JSON = {"info": {"graphs": [
    {"info": {"graphName": "prefill", "graphInputs": [
        {"info": {"name": "kv_in", "dataType": "QNN_DATATYPE_UFIXED_POINT_8",
                  "dimensions": [1, 8, 4],
                  "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
                                     "quantizationEncoding":
                                         "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
                                     "scaleOffset": {"scale": 0.0625, "offset": -128}}}}],
              "graphOutputs": [
        {"info": {"name": "w", "dataType": "QNN_DATATYPE_SFIXED_POINT_8", "dimensions": [2, 3],
                  "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
                                     "quantizationEncoding":
                                         "QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET",
                                     "axisScaleOffset": {"axis": 0, "numScaleOffsets": 2,
                                                         "scaleOffset": [
                                                             {"scale": 0.5, "offset": 0},
                                                             {"scale": 0.75, "offset": -1}]}}}}]}},
    {"info": {"graphName": "decode", "graphInputs": [
        {"info": {"name": "kv_in", "dataType": "QNN_DATATYPE_UFIXED_POINT_8",
                  "dimensions": [1, 8, 1],
                  "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
                                     "quantizationEncoding":
                                         "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
                                     "scaleOffset": {"scale": 0.0625, "offset": -128}}}}]}}]}}

PLAIN_MAP = {"act": {"scale": 0.02, "offset": -5, "bitwidth": 8, "dtype": "UFIXED_POINT_8"},
             "zp": {"scale": 0.02, "zero_point": 128, "dtype": 1032},
             "weight": {"axis": 0, "scales": [0.1, 0.2], "offsets": [1, 2],
                        "dtype": "QNN_DATATYPE_SFIXED_POINT_16"}}

NET_JSON = {"graph": {"tensors": {
    "conv/Relu:0": {"id": 1, "type": 3, "data_type": 1032, "dims": [1, 2, 2, 3],
                    "axis_format": "NHWC", "src_axis_format": "NCHW",
                    "quant_params": {"definition": 1, "encoding": 0,
                                     "scale_offset": {"scale": 0.1, "offset": -10}}},
    "fc": {"id": 2, "type": 3, "data_type": 790, "dims": [3, 2],
           "quant_params": {"definition": 1, "encoding": 1, "axis_scale_offset": {
               "axis": 1, "num_scale_offsets": 2, "scale_offsets": [
                   {"scale": 0.01, "offset": 0}, {"scale": 0.02, "offset": -3}]}}},
    "bw": {"id": 3, "type": 3, "data_type": 1032, "dims": [4],
           "quant_params": {"definition": 1, "encoding": 2, "bw_scale_offset": {
               "bitwidth": 4, "scale": 0.5, "offset": -8}}},
    "logits": {"id": 4, "type": 1, "data_type": 562, "dims": [3, 2],
               "quant_params": {"definition": 2147483647, "encoding": 2147483647}}},
    "nodes": {"conv": {"type": "Conv2d", "input_names": ["input"],
                       "output_names": ["conv/Relu:0"]},
              "fc": {"type": "FullyConnected", "input_names": ["conv/Relu:0"],
                     "output_names": ["fc", "logits"]}}}}


def json_seeds():
    write("encodings", "context_binary.json", json.dumps(CONTEXT_JSON))
    write("encodings", "plain_map.json", json.dumps(PLAIN_MAP))
    write("encodings", "net.json", json.dumps(NET_JSON))
    write("policy", "rules.json", json.dumps({
        "default": {"fail_below_db": 12, "warn_below_db": 25},
        "rules": [{"op_type": "Softmax", "fail_below_db": 5, "warn_below_db": 8},
                  {"name": "^conv[0-9]+(/|_)", "dtype": "SFIXED_POINT_16", "fail_below_db": 20}],
        "min_matched_fraction": 0.9, "min_top1_agreement": 0.99, "min_top5_agreement": 1}))
    write("policy", "empty.json", "{}")
    write("mapping", "map.json", json.dumps({"conv1": "conv1__debugID_1",
                                             "aten.relu.default": "aten_relu_default@0",
                                             "\u00e9t\u00e9": "x"}))
    write("mapping", "empty.json", "{}")
    write("handle_map", "handles.json",
          '{"aten_relu_default": 3, "aten_add_tensor": [4, 5], "tokens": [],'
          ' "conv.0": [0, 9223372036854775807], "\\u00e9\\ud83d\\ude00": 1}')


def text_seeds():
    names = {
        "debug_id.txt": "conv_relu__debugID_4_debugID_5@1",
        "executorch_qnn.txt": "output_aten_add_tensor_3@0",
        "sanitized.txt": "conv/Relu:0",
        "big_suffix.txt": "x@99999999999",
        "utf8.txt": "\u00e9t\u00e9_tensor:2",
        "custom.txt": "#(?P<handle>\\d+)(?:/out(?P<output>\\d+))?\nlayer#12/out3",
    }
    for name, text in names.items():
        write("naming", name, text)
    # qnn_net_run: "<--shape>\n<input list>\n<raw bytes>".
    floats = np.array([0.5, -1, 2, 3], dtype="<f4").tobytes()
    write("qnn_net_run", "no_shape.bin", b"\n#out\n" + floats)
    write("qnn_net_run", "u8_shape.bin", b"t=2,2:UFIXED_POINT_8\ninput_0.raw\n" + bytes([1, 2, 3, 4]))
    write("qnn_net_run", "f32_shape.bin", b"t=1,4\ninput.raw other.raw\r\n" + floats)
    write("qnn_net_run", "i16_shape.bin", b"t=2:QNN_DATATYPE_INT_16\n\n" + bytes([1, 0, 255, 255]))


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build").resolve()
    # Not the layout, align and diff seeds: FuzzedDataProvider bytes with no format to write by hand,
    # they are the largest inputs of a one-minute run's merged corpus, kept as they are.
    fresh(["store", "etdump", "etdump_import", "encodings", "qnn_net_run", "npz", "npy", "zip",
           "etrecord", "report", "policy", "mapping", "naming", "handle_map"])
    with tempfile.TemporaryDirectory() as name:
        tmp = pathlib.Path(name)
        store_seeds(build, tmp)
        report_seeds(build, tmp)
        etdump_seeds(build, tmp)
        npz_seeds(tmp)
    npy_seeds()
    zip_and_etrecord_seeds()
    json_seeds()
    text_seeds()


if __name__ == "__main__":
    main()
