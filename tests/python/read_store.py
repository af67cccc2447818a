#!/usr/bin/python3
"""Checks the store written by qd_write_known_store (tests/integration/write_known_store.cpp)
using nothing but h5py, numpy and docs/store-format.md.

    /usr/bin/python3 read_store.py STORE.h5

The reader code is not copied here: the "# recipe:" Python blocks of docs/store-format.md are
executed as they stand, so this test also proves the documented recipe runs and is right.
Expected values are recomputed from the formulas at the top of write_known_store.cpp.
Prints "N passed, 0 failed" and exits 0, or prints every failure and exits 1.
"""
import contextlib
import io
import math
import os
import re
import sys
import time
import traceback

import h5py
import numpy as np

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                   "store-format.md")


class Checker:
    def __init__(self):
        self.passed = 0
        self.failures = []

    def ok(self, condition, what):
        if condition:
            self.passed += 1
        else:
            self.failures.append(what)
        return bool(condition)

    def eq(self, actual, expected, what):
        return self.ok(actual == expected, f"{what}: got {actual!r}, expected {expected!r}")

    def near(self, actual, expected, what, rel=1e-12, scale=None):
        """|actual - expected| <= rel * max(|expected|, scale); NaN only equals NaN."""
        actual, expected = float(actual), float(expected)
        if math.isnan(expected) or math.isnan(actual):
            good = math.isnan(expected) and math.isnan(actual)
        else:
            bound = rel * max(abs(expected), scale or 0.0, 1e-300)
            good = abs(actual - expected) <= bound
        return self.ok(good, f"{what}: got {actual!r}, expected {expected!r} (rel {rel})")

    def arrays(self, actual, expected, what, rel=0.0):
        actual, expected = np.asarray(actual), np.asarray(expected)
        if not self.eq(actual.shape, expected.shape, what + " shape"):
            return False
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        same_nan = np.array_equal(np.isnan(a), np.isnan(e))
        finite = np.isfinite(e)
        close = (np.array_equal(a[~finite & ~np.isnan(e)], e[~finite & ~np.isnan(e)]) and
                 np.all(np.abs(a[finite] - e[finite]) <= rel * np.abs(e[finite])))
        return self.ok(same_nan and close,
                       f"{what}: got {actual.ravel().tolist()}, expected "
                       f"{expected.ravel().tolist()}")

    def guard(self, what, body):
        """Runs one group of checks; an exception is one failure, the rest still run."""
        try:
            body()
        except Exception:  # noqa: BLE001 - every error is a test failure, reported in full
            self.failures.append(f"{what}: exception\n{traceback.format_exc()}")


# ---------------------------------------------------------------------------------------------
# The documented recipe.

def load_recipe(doc_path):
    with open(doc_path, encoding="utf-8") as handle:
        text = handle.read()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
              if b.startswith("# recipe:")]
    if len(blocks) < 2:
        raise RuntimeError(f"{doc_path}: expected the '# recipe:' python blocks, found "
                           f"{len(blocks)}")
    namespace = {"__name__": "store_format_recipe"}
    for block in blocks:
        exec(compile(block, doc_path, "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


# ---------------------------------------------------------------------------------------------
# What write_known_store.cpp wrote (its header comment is the source of these formulas).

NO_RUN = 0xFFFFFFFF
HOSTILE = "<script>alert('\u00fc')</script>/x__debugID_60"


def conv_tensor(seq, run):
    ref = np.zeros((1, 2, 3, 4))  # NCHW reference
    for c in range(2):
        for h in range(3):
            for w in range(4):
                ref[0, c, h, w] = 100 * c + 10 * h + w - 20.25 + 1000 * run
    stored = ref.transpose(0, 2, 3, 1).astype("<f4")  # NHWC storage
    return dict(seq=seq, run=run, name="conv_relu__debugID_4_debugID_5", handles=[4, 5],
                output_index=-1, dtype=562, dtype_name="FLOAT_32", dims=(1, 3, 4, 2),
                axis_order=[0, 3, 1, 2], quant=None, matched=1, raw=stored.tobytes(),
                stored=stored, values=ref, real=stored.astype(np.float64))


def expected_tensors():
    out = [conv_tensor(0, 0)]

    i = np.arange(30)
    q = ((37 * i) % 256 - 128).astype("<i1")
    real = (q.astype(np.float64) - 3) * 0.05
    out.append(dict(seq=1, run=0, name="aten_add_tensor_0_debugID_12@1", handles=[12],
                    output_index=1, dtype=776, dtype_name="SFIXED_POINT_8", dims=(2, 3, 5),
                    axis_order=[], matched=1,
                    quant=dict(scales=[0.05], offsets=[-3], axis=-1, convention="qnn",
                               bitwidth=8),
                    raw=q.tobytes(), stored=q.reshape(2, 3, 5), values=real.reshape(2, 3, 5),
                    real=real))

    i = np.arange(16)
    q = ((17 * i + 5) % 256).astype("<u1")
    real = (q.astype(np.float64) - 128) * 0.1
    out.append(dict(seq=2, run=0, name="relu__debugID_1", handles=[1], output_index=-1,
                    dtype=1032, dtype_name="UFIXED_POINT_8", dims=(4, 4), axis_order=[],
                    matched=1,
                    quant=dict(scales=[0.1], offsets=[128], axis=-1, convention="zero_point",
                               bitwidth=8),
                    raw=q.tobytes(), stored=q.reshape(4, 4), values=real.reshape(4, 4),
                    real=real))

    i = np.arange(24)
    q = ((5003 * i) % 65536 - 32768).astype("<i2")
    scales, offsets = [0.001, 0.002, 0.004], [0, -10, 25]
    channel = (i // 4) % 3
    real = np.array([(int(q[k]) + offsets[channel[k]]) * scales[channel[k]] for k in range(24)])
    out.append(dict(seq=3, run=0, name="linear__debugID_20@0", handles=[20], output_index=2,
                    dtype=790, dtype_name="SFIXED_POINT_16", dims=(2, 3, 4), axis_order=[],
                    matched=1,
                    quant=dict(scales=scales, offsets=offsets, axis=1, convention="qnn",
                               bitwidth=16),
                    raw=q.tobytes(), stored=q.reshape(2, 3, 4), values=real.reshape(2, 3, 4),
                    real=real))

    v = np.array([(k - 7) * 0.375 for k in range(15)])
    v[3], v[5], v[11] = np.inf, np.nan, -np.inf
    bits = v.astype("<f2").view("<u2").copy()
    bits[5] = 0x7E00  # the NaN bit pattern the writer used
    out.append(dict(seq=4, run=0, name="layer_norm__debugID_30", handles=[30], output_index=-1,
                    dtype=534, dtype_name="FLOAT_16", dims=(3, 5), axis_order=[], matched=1,
                    quant=None, raw=bits.tobytes(), stored=v.reshape(3, 5),
                    values=v.reshape(3, 5), real=v))

    v = np.array([math.ldexp(2 * k - 5, 10 * k) for k in range(7)])
    bits = (v.astype("<f4").view("<u4") >> 16).astype("<u2")
    out.append(dict(seq=5, run=0, name="bf16_out__debugID_31", handles=[31], output_index=-1,
                    dtype=550, dtype_name="BFLOAT_16", dims=(7,), axis_order=[], matched=1,
                    quant=None, raw=bits.tobytes(), stored=v, values=v, real=v))

    q = np.array([(5 * k + 3) % 16 for k in range(9)])
    packed = bytearray(5)
    for k in range(9):
        packed[k // 2] |= int(q[k]) if k % 2 == 0 else int(q[k]) << 4
    packed[4] |= 0xA0  # padding nibble
    real = (q - 8) * 0.5
    out.append(dict(seq=6, run=0, name="w4__debugID_40", handles=[40], output_index=-1,
                    dtype=1028, dtype_name="UFIXED_POINT_4", dims=(3, 3), axis_order=[],
                    matched=1,
                    quant=dict(scales=[0.5], offsets=[-8], axis=-1, convention="qnn",
                               bitwidth=4),
                    raw=bytes(packed), stored=q.reshape(3, 3), values=real.reshape(3, 3),
                    real=real))

    v = np.array([(k - 2) * 3000000000 + k for k in range(6)], dtype="<i8")
    out.append(dict(seq=7, run=0, name="index_tensor__debugID_50", handles=[50],
                    output_index=-1, dtype=100, dtype_name="INT_64", dims=(6,), axis_order=[],
                    matched=1, quant=None, raw=v.tobytes(), stored=v, values=v,
                    real=v.astype(np.float64)))

    v = np.array([1 if k % 3 == 0 else 0 for k in range(10)], dtype="<u1")
    out.append(dict(seq=8, run=0, name="mask__debugID_51", handles=[51], output_index=-1,
                    dtype=1288, dtype_name="BOOL_8", dims=(2, 5), axis_order=[], matched=1,
                    quant=None, raw=v.tobytes(), stored=v.reshape(2, 5) != 0,
                    values=v.reshape(2, 5) != 0, real=v.astype(np.float64)))

    v = np.array(2.71875, dtype="<f4")
    out.append(dict(seq=9, run=0, name="loss_scalar", handles=[], output_index=-1, dtype=562,
                    dtype_name="FLOAT_32", dims=(), axis_order=[], matched=0, quant=None,
                    raw=v.tobytes(), stored=v, values=v, real=v.reshape(1).astype(np.float64)))

    out.append(conv_tensor(10, 1))

    v = np.array([-1.5, 1.5], dtype="<f4")
    out.append(dict(seq=11, run=1, name=HOSTILE, handles=[60], output_index=-1, dtype=562,
                    dtype_name="FLOAT_32", dims=(2,), axis_order=[], matched=1, quant=None,
                    raw=v.tobytes(), stored=v, values=v, real=v.astype(np.float64)))
    return out


# The compound fields documented in docs/store-format.md, with their numpy types.
U8, I8, U4, I4, F8 = "<u8", "<i8", "<u4", "<i4", "<f8"
TABLES = {
    "tensors": {
        "seq": U8, "capture_unix_ns": I8, "data_offset": U8, "data_nbytes": U8,
        "dims": ("<u8", (8,)), "name_offset": U8, "name_nbytes": U8, "handles_offset": U8,
        "handles_nbytes": U8, "quant_offset": U8, "quant_nbytes": U8, "stat_min": F8,
        "stat_max": F8, "stat_mean": F8, "stat_nan_count": U8, "stat_inf_count": U8,
        "run": U4, "dtype": U4, "data_crc32c": U4, "output_index": I4, "quant_axis": I4,
        "quant_count": U4, "axis_order": ("i1", (8,)), "rank": "u1", "role": "u1",
        "name_matched": "u1", "quant_convention": "u1", "quant_bitwidth": "u1",
        "row_crc32c": U4,
    },
    "runs": {"unix_ns": I8, "name_offset": U8, "name_nbytes": U8, "tensor_count": U8,
             "dropped_count": U8, "run": U4, "event": "u1", "row_crc32c": U4},
    "profile_events": {"start": I8, "end": I8, "name_offset": U8, "name_nbytes": U8,
                       "handles_offset": U8, "handles_nbytes": U8, "unit_offset": U8,
                       "unit_nbytes": U8, "run": U4, "row_crc32c": U4},
    "memory_checkpoints": {"unix_ns": I8, "bytes": U8, "label_offset": U8, "label_nbytes": U8,
                           "run": U4, "row_crc32c": U4},
    "graph_nodes": {"name_offset": U8, "name_nbytes": U8, "op_type_offset": U8,
                    "op_type_nbytes": U8, "inputs_offset": U8, "inputs_nbytes": U8,
                    "outputs_offset": U8, "outputs_nbytes": U8, "handles_offset": U8,
                    "handles_nbytes": U8, "row_crc32c": U4},
    "shape_guesses": {"name_offset": U8, "name_nbytes": U8, "row_crc32c": U4},
    "profile_instructions": {"event": U8, "instruction_id": I8, "row_crc32c": U4},
}


# ---------------------------------------------------------------------------------------------
# Checks.

def check_root(c, f):
    # Format 2 strings are fixed-length (h5py gives bytes): no global heap, under the header's
    # checksum.
    def text(name):
        value = f.attrs.get(name)
        c.ok(isinstance(value, bytes), f"root attribute {name} is a fixed-length string")
        return value.decode() if isinstance(value, bytes) else value

    c.eq(text("format"), "qnn-debug-store", "root attribute format")
    version = f.attrs.get("format_version")
    c.ok(isinstance(version, np.integer) and version.dtype == np.int64,
         f"format_version is an int64 scalar (got {type(version).__name__})")
    c.eq(int(version), 2, "root attribute format_version")
    c.eq(text("producer"), "qd_write_known_store", "root attribute producer")
    c.eq(text("backend"), "cpu-test", "root attribute backend")
    c.eq(text("soc"), "SM8650", "root attribute soc")
    c.eq(text("model"), "known-store-v1", "root attribute model")
    created = int(f.attrs["created_unix_ns"])
    c.ok(1_577_836_800 * 10**9 < created <= time.time_ns() + 60 * 10**9,
         f"created_unix_ns {created} is a plausible recent time")


def check_layout(c, f):
    for pool in ("data", "meta"):
        ds = f[pool]
        c.eq((ds.dtype, ds.ndim, ds.maxshape), (np.dtype("u1"), 1, (None,)),
             f"/{pool} is an extendible 1-D uint8 dataset")
        c.ok(ds.chunks is not None, f"/{pool} is chunked")
    for table, fields in TABLES.items():
        ds = f[table]
        c.eq((ds.ndim, ds.maxshape), (1, (None,)), f"/{table} is an extendible 1-D table")
        c.eq(list(ds.dtype.names), list(fields), f"/{table} field names")
        for name, numpy_type in fields.items():
            c.eq(ds.dtype[name], np.dtype(numpy_type), f"/{table}.{name} type")
    c.eq(sorted(f.keys()), sorted(["data", "meta", *TABLES]), "datasets at the root")


def check_runs(c, f, r, tensor_rows):
    rows = f["runs"][:]
    c.eq([(int(x["run"]), int(x["event"])) for x in rows], [(0, 0), (0, 1), (1, 0), (1, 1)],
         "/runs rows (run, event)")
    c.eq([r["text"](f, x, "name") for x in rows], ["run_a", "", "run_b", ""], "/runs names")
    c.eq([int(x["tensor_count"]) for x in rows], [0, 10, 0, 2], "/runs tensor_count")
    c.eq([int(x["dropped_count"]) for x in rows], [0, 0, 0, 0], "/runs dropped_count")
    times = [int(x["unix_ns"]) for x in rows]
    created = int(f.attrs["created_unix_ns"])
    c.ok(created <= times[0] <= times[1] <= times[2] <= times[3],
         f"run times ordered after creation: {created} {times}")

    runs = r["read_runs"](f, tensor_rows)
    c.eq([(x["id"], x["name"], x["tensors"], x["dropped"], x["complete"]) for x in runs],
         [(0, "run_a", 10, 0, True), (1, "run_b", 2, 0, True)], "runs derived by the recipe")
    c.eq([(x["begin_ns"], x["end_ns"]) for x in runs], [(times[0], times[1]),
                                                         (times[2], times[3])],
         "run begin/end times derived by the recipe")
    return runs


def check_tensor(c, f, r, row, index, exp, runs):
    where = f"tensor #{index} ({exp['name']!r})"
    c.eq(int(row["seq"]), exp["seq"], f"{where} seq")
    c.eq(int(row["run"]), exp["run"], f"{where} run")
    run = runs[exp["run"]]
    begin, end = run["begin_ns"], run["end_ns"]
    c.ok(begin is not None and end is not None and begin <= int(row["capture_unix_ns"]) <= end,
         f"{where} capture_unix_ns {int(row['capture_unix_ns'])} within its run "
         f"[{run['begin_ns']}, {run['end_ns']}]")
    c.eq(int(row["dtype"]), exp["dtype"], f"{where} dtype code")
    c.eq(int(row["rank"]), len(exp["dims"]), f"{where} rank")
    c.eq([int(d) for d in row["dims"]], list(exp["dims"]) + [0] * (8 - len(exp["dims"])),
         f"{where} dims (0 padded)")
    padded_order = exp["axis_order"] or [-1] * len(exp["dims"])
    c.eq([int(a) for a in row["axis_order"]], padded_order + [-1] * (8 - len(padded_order)),
         f"{where} axis_order (-1 padded)")
    c.eq(int(row["role"]), 0, f"{where} role")
    c.eq(int(row["name_matched"]), exp["matched"], f"{where} name_matched")
    c.eq(int(row["output_index"]), exp["output_index"], f"{where} output_index")
    c.eq(r["meta"](f, row, "name"), exp["name"].encode("utf-8"), f"{where} raw name bytes")
    c.eq(int(row["handles_nbytes"]), 8 * len(exp["handles"]), f"{where} handles_nbytes")

    quant = exp["quant"]
    count = len(quant["scales"]) if quant else 0
    c.eq(int(row["quant_count"]), count, f"{where} quant_count")
    c.eq(int(row["quant_nbytes"]), 16 * count, f"{where} quant_nbytes")
    c.eq(int(row["quant_axis"]), quant["axis"] if quant else -1, f"{where} quant_axis")
    if quant:
        c.eq(int(row["quant_convention"]), 0 if quant["convention"] == "qnn" else 1,
             f"{where} quant_convention")
        c.eq(int(row["quant_bitwidth"]), quant["bitwidth"], f"{where} quant_bitwidth")

    raw = r["pool_bytes"](f, "data", row["data_offset"], row["data_nbytes"])
    c.eq(raw, exp["raw"], f"{where} stored bytes")
    c.eq(int(row["data_crc32c"]), r["crc32c"](raw), f"{where} CRC-32C of the stored bytes")
    c.eq(int(row["data_crc32c"]), r["crc32c"](exp["raw"]), f"{where} CRC-32C of the formula")

    t = r["read_tensor"](f, row)  # verifies size and CRC too
    c.eq(t["seq"], exp["seq"], f"{where} recipe seq")
    c.eq(t["run"], exp["run"], f"{where} recipe run")
    c.eq(t["name"], exp["name"], f"{where} recipe name")
    c.eq(t["handles"], exp["handles"], f"{where} recipe handles")
    c.eq(t["output_index"], exp["output_index"], f"{where} recipe output_index")
    c.eq(t["dtype"], exp["dtype_name"], f"{where} recipe dtype name")
    c.eq(t["shape"], tuple(exp["dims"]), f"{where} recipe stored shape")
    c.eq(t["axis_order"], exp["axis_order"], f"{where} recipe axis_order")
    if quant:
        c.eq(t["quant"]["offsets"], quant["offsets"], f"{where} recipe quant offsets")
        c.eq(t["quant"]["axis"], quant["axis"], f"{where} recipe quant axis")
        c.eq(t["quant"]["convention"], quant["convention"], f"{where} recipe quant convention")
        c.eq(t["quant"]["bitwidth"], quant["bitwidth"], f"{where} recipe quant bitwidth")
        for k, (got, want) in enumerate(zip(t["quant"]["scales"], quant["scales"])):
            c.eq(got, want, f"{where} recipe quant scale {k}")
        c.eq(len(t["quant"]["scales"]), len(quant["scales"]), f"{where} recipe scale count")
    else:
        c.eq(t["quant"], None, f"{where} recipe quant")
    c.arrays(t["stored"], exp["stored"], f"{where} decoded stored elements")
    c.arrays(t["values"], exp["values"], f"{where} real values in the reference layout",
             rel=1e-12)
    if exp["dtype"] == 534:
        c.eq(t["stored"].dtype, np.dtype("<f2"), f"{where} float16 decodes as numpy float16")
    if exp["dtype"] == 550:
        c.eq(t["stored"].dtype, np.dtype("<f4"), f"{where} bfloat16 decodes as float32")
    if exp["axis_order"]:
        reference_shape = tuple(exp["dims"][a] for a in exp["axis_order"])
        c.eq(t["values"].shape, reference_shape, f"{where} reference shape")

    real = exp["real"]
    finite = real[np.isfinite(real)]
    c.eq(int(row["stat_nan_count"]), int(np.isnan(real).sum()), f"{where} stat_nan_count")
    c.eq(int(row["stat_inf_count"]), int(np.isinf(real).sum()), f"{where} stat_inf_count")
    magnitude = float(np.abs(finite).max()) if finite.size else 0.0
    c.near(row["stat_min"], finite.min() if finite.size else math.nan, f"{where} stat_min")
    c.near(row["stat_max"], finite.max() if finite.size else math.nan, f"{where} stat_max")
    c.near(row["stat_mean"], finite.mean() if finite.size else math.nan, f"{where} stat_mean",
           rel=1e-6, scale=magnitude)


def check_tensors(c, f, r, tensor_rows, runs):
    expected = expected_tensors()
    c.eq(len(tensor_rows), len(expected), "tensor row count")
    spans = sorted((int(x["data_offset"]), int(x["data_nbytes"])) for x in tensor_rows)
    c.ok(all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:])) and
         (not spans or spans[-1][0] + spans[-1][1] <= f["data"].shape[0]),
         f"/data spans do not overlap and lie inside the pool: {spans}")
    for index, (row, exp) in enumerate(zip(tensor_rows, expected)):
        c.guard(f"tensor #{index}", lambda: check_tensor(c, f, r, row, index, exp, runs))


def check_events(c, f, r):
    text, int64_list = r["text"], r["int64_list"]
    rows = f["profile_events"][:]
    c.eq(len(rows), 2, "profile event count")
    got = [(text(f, x, "name"), int64_list(f, x, "handles"), int(x["start"]), int(x["end"]),
            text(f, x, "unit"), int(x["run"])) for x in rows]
    c.eq(got[:1], [("conv_relu__debugID_4_debugID_5", [4, 5], 1000, 2500, "ns", 0)],
         "profile event in run_a (handles parsed from its name)")
    c.eq(got[1:], [("graph_execute", [7, 8000000000], -5, 40, "cycles", r["NO_RUN"])],
         "profile event outside any run (kNoRun)")
    c.eq(r["NO_RUN"], NO_RUN, "recipe NO_RUN is 0xFFFFFFFF")
    c.eq([(int(x["event"]), int(x["instruction_id"])) for x in f["profile_instructions"][:]],
         [(0, 2)], "instruction ids: one row, for the event that has one (profile row 0)")

    rows = f["memory_checkpoints"][:]
    c.eq([(text(f, x, "label"), int(x["bytes"]), int(x["run"])) for x in rows],
         [("DSP:before_context_created", 123456789, NO_RUN)], "memory checkpoints")
    if len(rows) == 1:
        begin = int(f["runs"][0]["unix_ns"])
        created = int(f.attrs["created_unix_ns"])
        c.ok(created <= int(rows[0]["unix_ns"]) <= begin,
             f"memory checkpoint time {int(rows[0]['unix_ns'])} between creation {created} "
             f"and the first run {begin}")

    name_list = r["name_list"]
    rows = f["graph_nodes"][:]
    got = [(text(f, x, "name"), text(f, x, "op_type"), name_list(f, x, "inputs"),
            name_list(f, x, "outputs"), int64_list(f, x, "handles")) for x in rows]
    c.eq(got, [("conv_relu", "Conv2d+ReLU", ["input_0", "weights/conv<1>"],
                ["conv_relu__debugID_4_debugID_5"], [4, 5]),
               ("loss", "Mean", [], ["loss_scalar"], [])], "graph nodes")
    if len(rows) == 2:
        c.eq(r["meta"](f, rows[0], "inputs"), b"input_0\0weights/conv<1>\0",
             "graph inputs are NUL-terminated names")
        c.eq(int(rows[1]["inputs_nbytes"]), 0, "an empty input list has 0 bytes")


def check_listing(c, r, path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        r["list_store"](path)
    listing = out.getvalue()
    c.ok("run 0 'run_a': 10 tensors, complete" in listing, "listing shows run_a complete")
    c.ok("run 1 'run_b': 2 tensors, complete" in listing, "listing shows run_b complete")
    c.ok("INCOMPLETE" not in listing, "listing shows no incomplete run")
    c.ok(repr(HOSTILE) in listing, "listing shows the hostile name quoted")
    c.eq(listing.count("\n  #"), 12, "listing shows 12 tensors")
    c.ok("'conv_relu__debugID_4_debugID_5' run=0x0 handles=[4, 5] instruction=2 " in listing,
         "listing shows the profile event's instruction id")
    c.ok("'graph_execute' run=0xffffffff handles=[7, 8000000000] instruction=-1 " in listing,
         "listing shows -1 for an event without an instruction id")


def main(argv):
    if len(argv) != 2:
        print("usage: read_store.py STORE.h5", file=sys.stderr)
        return 2
    path = argv[1]
    c = Checker()
    try:
        recipe = load_recipe(DOC)
    except Exception:  # noqa: BLE001
        print(f"FAIL: cannot load the recipe from {DOC}\n{traceback.format_exc()}")
        return 1
    c.eq(recipe["crc32c"](b"123456789"), 0xE3069283, "recipe crc32c check value")
    with h5py.File(path, "r", swmr=True) as f:
        c.guard("root attributes", lambda: check_root(c, f))
        c.guard("layout", lambda: check_layout(c, f))
        tensor_rows = f["tensors"][:]
        runs = []
        c.guard("runs", lambda: runs.extend(check_runs(c, f, recipe, tensor_rows)))
        if len(runs) == 2:
            c.guard("tensors", lambda: check_tensors(c, f, recipe, tensor_rows, runs))
        else:
            c.failures.append("runs unreadable: tensors not checked")
        c.guard("events", lambda: check_events(c, f, recipe))
    c.guard("listing", lambda: check_listing(c, recipe, path))

    for failure in c.failures:
        print(f"FAIL: {failure}")
    print(f"{c.passed} passed, {len(c.failures)} failed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
