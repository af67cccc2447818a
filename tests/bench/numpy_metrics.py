#!/usr/bin/python3
"""The baseline for the VersusNumpy benchmark: the comparison done the way Python tools do it
today, with h5py + numpy and float64 arrays.

    /usr/bin/python3 numpy_metrics.py REF.h5 DEVICE.h5 [--sqnr-only]

Reads tensors with the documented recipe of docs/store-format.md (executed as it stands, without
its pure-Python CRC check, which would be unfairly slow), pairs reference and device tensors of
the first run by (debug handles, output index), and computes the metrics of docs/metrics.md for
each pair: SQNR, MSE, RMSE, MAE, max |e| and where, relative L2, cosine, allclose fraction,
NaN/Inf counts, the |e| histogram, and for quantized tensors saturation, lsb_mae, lsb_max and
the noise ratio. The histogram takes each |e|'s octave from np.frexp and counts them with
np.bincount, as a numpy user who knows the bins are octaves would (np.histogram with these edges
sorts the errors, and spent 2.9 s of 4.9 s doing so). With --sqnr-only it computes the SQNR alone:
the cheapest script that still answers "which op diverges". Prints {"reference tensor name":
sqnr_db, ...} as JSON.
"""
import json
import math
import os
import re
import sys

import h5py
import numpy as np

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                   "store-format.md")


def load_recipe():
    with open(DOC, encoding="utf-8") as handle:
        blocks = [b for b in re.findall(r"```python\n(.*?)```", handle.read(), re.S)
                  if b.startswith("# recipe: read")]
    namespace = {"__name__": "recipe"}
    exec(compile(blocks[0], DOC, "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def sqnr_only(ref, dev):
    r = np.asarray(ref, np.float64).ravel()
    e = np.asarray(dev, np.float64).ravel() - r
    finite = np.isfinite(r) & np.isfinite(e)
    r2, e2 = float(np.dot(r[finite], r[finite])), float(np.dot(e[finite], e[finite]))
    return {"sqnr_db": math.inf if e2 == 0 else -math.inf if r2 == 0 else 10 * math.log10(r2 / e2)}


def metrics(ref, dev, quant, stored):
    r = np.asarray(ref, np.float64).ravel()
    d = np.asarray(dev, np.float64).ravel()
    finite = np.isfinite(r) & np.isfinite(d)
    out = {"ref_nan": int(np.isnan(r).sum()), "ref_inf": int(np.isinf(r).sum()),
           "dev_nan": int(np.isnan(d).sum()), "dev_inf": int(np.isinf(d).sum())}
    r, d = r[finite], d[finite]
    e = d - r
    ae = np.abs(e)
    r2, d2, e2 = float(np.dot(r, r)), float(np.dot(d, d)), float(np.dot(e, e))
    n = r.size
    out["sqnr_db"] = math.inf if e2 == 0 else -math.inf if r2 == 0 else 10 * math.log10(r2 / e2)
    out["mse"] = e2 / n if n else 0.0
    out["rmse"] = math.sqrt(out["mse"])
    out["mae"] = float(ae.mean()) if n else 0.0
    out["max_abs"] = float(ae.max()) if n else 0.0
    out["max_abs_index"] = int(ae.argmax()) if n else 0
    out["rel_l2"] = 0.0 if e2 == 0 else math.inf if r2 == 0 else math.sqrt(e2 / r2)
    out["cosine"] = float(np.dot(r, d)) / math.sqrt(r2 * d2) if r2 and d2 else float(r2 == d2)
    out["allclose_frac"] = float(np.isclose(d, r, rtol=1e-5, atol=1e-8).mean()) if n else 1.0
    top = math.floor(math.log2(max(float(ae.max()) if n else 1.0, 2.0 ** -126)))
    octave = np.frexp(ae)[1] - 1  # floor(log2 |e|); a zero lands far below, in bin 0
    out["histogram"] = np.bincount(np.clip(octave - (top - 30), 0, 31), minlength=32).tolist()
    if quant:
        scale = np.asarray(quant["scales"], np.float64)
        raw = np.asarray(stored)
        info = np.iinfo(raw.dtype) if raw.dtype.kind in "iu" else None
        if info is not None:
            out["saturation"] = float(((raw <= info.min) | (raw >= info.max)).mean())
        if scale.size == 1:
            out["lsb_mae"] = out["mae"] / scale[0]
            out["lsb_max"] = out["max_abs"] / scale[0]
            out["noise_ratio"] = out["rmse"] / (scale[0] / math.sqrt(12))
    return out


def main():
    recipe = load_recipe()
    results = {}
    with h5py.File(sys.argv[1], "r") as ref_file, h5py.File(sys.argv[2], "r") as dev_file:
        ref_rows, dev_rows = ref_file["tensors"][:], dev_file["tensors"][:]
        run = int(ref_rows["run"].min()) if len(ref_rows) else 0
        by_key = {}
        for row in dev_rows:
            if int(row["run"]) == run:
                t = recipe["read_tensor"](dev_file, row, verify=False)
                by_key[(tuple(t["handles"]), t["output_index"])] = (row, t)
        for row in ref_rows:
            if int(row["run"]) != run:
                continue
            ref = recipe["read_tensor"](ref_file, row, verify=False)
            match = by_key.get((tuple(ref["handles"]), ref["output_index"]))
            if match is None:
                continue
            dev = match[1]
            m = (sqnr_only(ref["values"], dev["values"]) if "--sqnr-only" in sys.argv[3:]
                 else metrics(ref["values"], dev["values"], dev["quant"], dev["stored"]))
            results[ref["name"]] = m["sqnr_db"]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
