"""`qnn-debug diff CPU_OUT/ HTP_OUT/ --net-json model_net.json` on two qnn-net-run output folders
of 10 results each, checked against an independent float64 numpy computation of every SQNR.

The CPU folder holds float32 .raw files (qnn-net-run's CPU backend); the HTP folder the native
container bytes of its quantized tensors (uint8 NHWC per-tensor, int16 per-axis) and float16,
plus float32 .raw for its float32 output. numpy dequantizes exactly as docs/metrics.md says:
(q + offset) * scale in float64, never rounded to float32, then every sum in float64.

Usage: qnn_net_run_sqnr.py --cli QNN_DEBUG --workdir DIR
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np

RESULTS = 10

# name -> (QNN data type on the device, dims as stored, encoding or None)
TENSORS = {
    "conv/Relu:0": (1032, [1, 4, 4, 8], {"scale": 0.05, "offset": -20}),
    "linear": (790, [6, 5], {"axis": 1, "scales": [0.001, 0.002, 0.0015, 0.003, 0.0025],
                             "offsets": [0, -2, 3, 0, 1]}),
    "norm": (534, [6, 5], None),
    "logits": (562, [6, 10], None),
}


def quant_params(encoding):
    if encoding is None:
        return {"definition": 2147483647, "encoding": 2147483647}
    if "axis" in encoding:
        pairs = [{"scale": s, "offset": o} for s, o in zip(encoding["scales"], encoding["offsets"])]
        return {"definition": 1, "encoding": 1,
                "axis_scale_offset": {"axis": encoding["axis"], "num_scale_offsets": len(pairs),
                                      "scale_offsets": pairs}}
    return {"definition": 1, "encoding": 0,
            "scale_offset": {"scale": encoding["scale"], "offset": encoding["offset"]}}


def write_net_json(path):
    tensors = {}
    for name, (data_type, dims, encoding) in TENSORS.items():
        tensors[name] = {"id": len(tensors), "type": 3, "data_type": data_type, "dims": dims,
                         "quant_params": quant_params(encoding)}
    tensors["conv/Relu:0"].update({"axis_format": "NHWC", "src_axis_format": "NCHW"})
    nodes = {"conv": {"type": "Conv2d", "input_names": ["input"], "output_names": ["conv/Relu:0"]},
             "linear": {"type": "FullyConnected", "input_names": ["conv/Relu:0"],
                        "output_names": ["linear"]},
             "norm": {"type": "LayerNorm", "input_names": ["linear"], "output_names": ["norm"]},
             "head": {"type": "FullyConnected", "input_names": ["norm"], "output_names": ["logits"]}}
    with open(path, "w") as f:
        json.dump({"graph": {"tensors": tensors, "nodes": nodes}}, f)


def scales_offsets(encoding, dims):
    """Per-element scale and offset arrays broadcast over the stored dims."""
    if "axis" not in encoding:
        return encoding["scale"], encoding["offset"]
    shape = [1] * len(dims)
    shape[encoding["axis"]] = dims[encoding["axis"]]
    return (np.array(encoding["scales"], dtype=np.float64).reshape(shape),
            np.array(encoding["offsets"], dtype=np.float64).reshape(shape))


def quantize(values, encoding, dims, dtype):
    scale, offset = scales_offsets(encoding, dims)
    info = np.iinfo(dtype)
    return np.clip(np.rint(values / scale - offset), info.min, info.max).astype(dtype)


def dequantize(raw, encoding, dims):
    """As the comparator decodes: in float64."""
    scale, offset = scales_offsets(encoding, dims)
    return (raw.astype(np.float64) + offset) * scale


def write_trees(work, rng):
    """Both folders; returns {(k, name): (reference float32, device real values)}."""
    expected = {}
    for k in range(RESULTS):
        cpu = os.path.join(work, "CPU_OUT", f"Result_{k}")
        htp = os.path.join(work, "HTP_OUT", f"Result_{k}")
        os.makedirs(cpu)
        os.makedirs(htp)
        for name, (data_type, dims, encoding) in TENSORS.items():
            ref = (rng.standard_normal(dims) * (k + 1) * 0.5).astype(np.float32)
            stem = name.replace("/", "_").replace(":", "_")
            ref.tofile(os.path.join(cpu, stem + ".raw"))
            if data_type == 562:  # float32: the HTP computes it with a small error
                dev = (ref + rng.standard_normal(dims).astype(np.float32) * 0.01).astype(np.float32)
                dev.tofile(os.path.join(htp, stem + ".raw"))
            elif data_type == 534:  # float16 native, float32 dequantized beside it
                half = ref.astype(np.float16)
                half.tofile(os.path.join(htp, stem + "_native.raw"))
                dev = half.astype(np.float32)
                dev.tofile(os.path.join(htp, stem + ".raw"))
            else:
                dtype = np.uint8 if data_type == 1032 else np.int16
                raw = quantize(ref.astype(np.float64), encoding, dims, dtype)
                raw.tofile(os.path.join(htp, stem + "_native.raw"))
                dev = dequantize(raw, encoding, dims)  # what the native file stands for
                dev.astype(np.float32).tofile(os.path.join(htp, stem + ".raw"))
            expected[(k, name)] = (ref, dev)
    return expected


def sqnr_db(ref, dev):
    r = ref.astype(np.float64).ravel()
    e = dev.astype(np.float64).ravel() - r
    signal, noise = float(np.dot(r, r)), float(np.dot(e, e))
    return math.inf if noise == 0 else 10 * math.log10(signal / noise)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    net_json = os.path.join(args.workdir, "model_net.json")
    write_net_json(net_json)
    expected = write_trees(args.workdir, np.random.default_rng(7))
    report = os.path.join(args.workdir, "report.json")
    run = subprocess.run([args.cli, "diff", os.path.join(args.workdir, "CPU_OUT"),
                          os.path.join(args.workdir, "HTP_OUT"), "--net-json", net_json,
                          "--json", report], capture_output=True, text=True)
    if run.returncode not in (0, 1):
        sys.exit(f"diff failed ({run.returncode}): {run.stderr}")
    with open(report) as f:
        doc = json.load(f)
    runs = doc["runs"]
    assert len(runs) == RESULTS, f"{len(runs)} runs compared, expected {RESULTS}"
    checked = 0
    for run_doc in runs:
        k = run_doc["device_run"]
        groups = {g["pairs"][0]["reference"]["name"]: g for g in run_doc["groups"]}
        assert set(groups) == set(TENSORS), f"run {k}: groups {sorted(groups)}"
        for name, group in groups.items():
            ref, dev = expected[(k, name)]
            want = sqnr_db(ref, dev)
            got = group["pairs"][0]["metrics"]["sqnr_db"]
            assert abs(got - want) <= 1e-6 * abs(want), f"run {k} {name}: {got} vs numpy {want}"
            checked += 1
    print(f"ok: {checked} SQNRs over {RESULTS} runs equal numpy's float64 values to 1e-6")


if __name__ == "__main__":
    main()
