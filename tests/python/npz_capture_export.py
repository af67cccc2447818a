"""`qnn-debug capture npz` and `qnn-debug export npz` with numpy at both ends: numpy writes the
arrays (np.savez, np.savez_compressed, np.save), qnn-debug captures them, `inspect --json` shows
what the store holds, and `export npz` gives them back to numpy, which compares every value bit
for bit. Bad files exit 2 naming the file and the array; `diff` reads npz files directly.

Usage: QD_CLI=path/to/qnn-debug python3 npz_capture_export.py [unittest options]
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

CLI = os.environ.get("QD_CLI", "qnn-debug")


def run(*args, expect=0):
    result = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
    if result.returncode != expect:
        raise AssertionError(f"qnn-debug {' '.join(map(str, args))}: exit {result.returncode}, "
                             f"expected {expect}\nstdout: {result.stdout}\nstderr: {result.stderr}")
    return result


def inspect(store):
    return json.loads(run("inspect", store, "--json", "--limit", "0").stdout)


def tensors_by_run(doc):
    """{run name: {tensor name: tensor}}, both in store order."""
    names = {r["id"]: r["name"] for r in doc["runs"]}
    runs = {name: {} for name in names.values()}
    for t in doc["tensors"]:
        runs[names[t["run"]]][t["name"]] = t
    return runs


# Every dtype a store keeps, in the shapes that are easy to get wrong.
rng = np.random.default_rng(7)
ARRAYS = {
    "conv": rng.standard_normal((1, 3, 4, 5)).astype(np.float32),
    "half": np.array([1.5, -2.0, 65504.0, 6.1e-5, np.inf, -0.0], dtype=np.float16),
    "q8": np.array([-128, -1, 0, 5, 127], dtype=np.int8),
    "u8": np.arange(256, dtype=np.uint8).reshape(16, 16),
    "i16": np.array([-32768, 32767, 1], dtype=np.int16),
    "i32": np.array([[7, -7], [2**31 - 1, -2**31]], dtype=np.int32),
    "i64": np.array([2**62, -5], dtype=np.int64),
    "u16": np.array([65535, 3], dtype=np.uint16),
    "mask": np.array([[True, False, True]]),
    "scalar": np.float64(3.25),
    "scalar_int": np.int8(-3),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "double": rng.standard_normal(7),
    "fortran": np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)),
    "big": np.arange(6, dtype=">f4").reshape(2, 3) / 7,
    "big_int": np.array([1, -300, 3000], dtype=">i2"),
    "aten_relu_default_3": np.maximum(rng.standard_normal((2, 8)), 0).astype(np.float32),
}

STORE_DTYPE = {
    "conv": "FLOAT_32", "half": "FLOAT_16", "q8": "INT_8", "u8": "UINT_8", "i16": "INT_16",
    "i32": "INT_32", "i64": "INT_64", "u16": "UINT_16", "mask": "BOOL_8", "scalar": "FLOAT_64",
    "scalar_int": "INT_8", "empty": "FLOAT_32", "double": "FLOAT_64", "fortran": "FLOAT_32",
    "big": "FLOAT_32", "big_int": "INT_16", "aten_relu_default_3": "FLOAT_32",
}


def same_bits(a, b):
    """Equal dtype (byte order aside), shape and bytes: -0.0, inf and NaN payloads included."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.newbyteorder("=") != b.dtype.newbyteorder("=") or a.shape != b.shape:
        return False
    native = a.dtype.newbyteorder("=")
    return np.ascontiguousarray(a, dtype=native).tobytes() == \
        np.ascontiguousarray(b, dtype=native).tobytes()


class NpzTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="qd_npz_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def capture(self, *files, extra=()):
        store = self.path("store.h5")
        run("capture", "npz", *files, *extra, "-o", store)
        return store

    def test_every_dtype_reads_back_bit_for_bit(self):
        for save in (np.savez, np.savez_compressed):
            with self.subTest(save=save.__name__):
                src = self.path(f"{save.__name__}.npz")
                save(src, **ARRAYS)
                store = self.capture(src)
                (run_name, tensors), = tensors_by_run(inspect(store)).items()
                self.assertEqual(run_name, os.path.basename(src))
                self.assertEqual(list(tensors), list(ARRAYS))  # archive order kept
                for name, array in ARRAYS.items():
                    t = tensors[name]
                    self.assertEqual(t["dtype"], STORE_DTYPE[name], name)
                    dims = list(np.shape(array))
                    if name == "fortran":  # stored as its memory holds it, the order to undo it
                        self.assertEqual(t["dims"], dims[::-1])
                        self.assertEqual(t["axis_order"], [2, 1, 0])
                    else:
                        self.assertEqual(t["dims"], dims, name)
                        self.assertEqual(t["axis_order"], [], name)

                raw = self.path("raw.npz")
                run("export", "npz", store, "-o", raw)
                with np.load(raw) as back:
                    self.assertEqual(list(back.keys()), list(ARRAYS))
                    for name, array in ARRAYS.items():
                        expected = np.asarray(array)
                        if name == "fortran":  # raw export: the stored (memory) order
                            expected = np.ascontiguousarray(expected.T)
                        self.assertTrue(same_bits(back[name], expected), name)
                        self.assertEqual(back[name].dtype.byteorder in "<=|", True, name)

    def test_dequantized_export_is_float32_in_the_reference_layout(self):
        src = self.path("ref.npz")
        np.savez(src, **ARRAYS)
        store = self.capture(src)
        out = self.path("real.npz")
        run("export", "npz", store, "-o", out, "--dequantize")
        with np.load(out) as back:
            for name, array in ARRAYS.items():
                expected = np.asarray(array).astype(np.float32)
                self.assertEqual(back[name].dtype, np.float32, name)
                self.assertTrue(same_bits(back[name], expected), name)

    def test_run_prefixes_and_several_files_are_runs(self):
        runs_file = self.path("runs.npz")
        np.savez_compressed(runs_file, **{"run1/x": np.ones(3, np.float32),
                                          "run0/x": np.zeros(3, np.float32),
                                          "run0/y": np.full(2, 4, np.int8),
                                          "run10/x": np.full(3, 10, np.float32)})
        single = self.path("single.npz")
        np.savez(single, x=np.full(3, 7, np.float32))
        npy = self.path("logits.npy")
        np.save(npy, np.arange(10, dtype=">f8"))
        store = self.capture(runs_file, single, npy)
        doc = inspect(store)
        names = [r["name"] for r in doc["runs"]]
        self.assertEqual(names, ["runs.npz/run0", "runs.npz/run1", "runs.npz/run10",
                                 "single.npz", "logits.npy"])
        by_run = tensors_by_run(doc)
        self.assertEqual(list(by_run["runs.npz/run0"]), ["x", "y"])
        self.assertEqual(list(by_run["logits.npy"]), ["logits"])

        out = self.path("back.npz")
        run("export", "npz", store, "-o", out)
        with np.load(out) as back:
            ids = [r["id"] for r in doc["runs"]]
            self.assertEqual(sorted(back.keys()),
                             sorted([f"run{ids[0]}/x", f"run{ids[0]}/y", f"run{ids[1]}/x",
                                     f"run{ids[2]}/x", f"run{ids[3]}/x", f"run{ids[4]}/logits"]))
            self.assertTrue(same_bits(back[f"run{ids[2]}/x"], np.full(3, 10, np.float32)))
            self.assertTrue(same_bits(back[f"run{ids[4]}/logits"], np.arange(10, dtype="<f8")))
        one = self.path("one.npz")
        run("export", "npz", store, "-o", one, "--run", ids[3])
        with np.load(one) as back:
            self.assertEqual(list(back.keys()), ["x"])  # one run: no prefix
        # The export reads back as the same runs.
        again = self.path("again.h5")
        run("capture", "npz", out, "-o", again)
        self.assertEqual([r["name"] for r in inspect(again)["runs"]],
                         [f"back.npz/run{i}" for i in ids])

    def test_encodings_quantize_integer_arrays_and_lay_out_floats(self):
        src = self.path("device.npz")
        q = np.array([[[[0, 10], [20, 255]], [[3, 4], [5, 6]], [[7, 8], [9, 1]]]], np.uint8)
        nhwc = q.transpose(0, 2, 3, 1)  # what an NHWC device holds for NCHW [1, 3, 2, 2]
        np.savez(src, act=nhwc, logits=np.array([0.5, 1.5], np.float32))
        encodings = self.path("enc.json")
        with open(encodings, "w") as f:
            json.dump({"act": {"scale": 0.25, "offset": -128, "dtype": "UFIXED_POINT_8"}}, f)
        store = self.capture(src, extra=("--encodings", encodings))
        t = tensors_by_run(inspect(store))["device.npz"]["act"]
        self.assertEqual(t["dtype"], "UFIXED_POINT_8")
        self.assertEqual(t["dims"], [1, 2, 2, 3])
        out = self.path("real.npz")
        run("export", "npz", store, "-o", out, "--dequantize")
        with np.load(out) as back:
            real = ((nhwc.astype(np.float64) - 128) * 0.25).astype(np.float32)
            self.assertTrue(same_bits(back["act"], real))  # NHWC as stored: no axis order given

    def test_bad_files_exit_2_naming_the_file_and_the_array(self):
        good = self.path("good.npz")
        np.savez(good, a=np.ones(4, np.float32), b=np.ones(4, np.float32))
        with open(good, "rb") as f:
            data = f.read()
        cases = {}
        cases["truncated.npz"] = (data[: len(data) // 2], ["truncated.npz"])
        cases["empty.npz"] = (b"", ["empty.npz"])
        cases["text.npz"] = (b"not a zip at all", ["text.npz"])
        for name, (content, needles) in cases.items():
            with open(self.path(name), "wb") as f:
                f.write(content)
        np.savez(self.path("complex.npz"), c=np.ones(2, np.complex64))
        cases["complex.npz"] = (None, ["complex.npz", "c.npy"])
        np.savez(self.path("objects.npz"), o=np.array([{"a": 1}], dtype=object))
        cases["objects.npz"] = (None, ["objects.npz", "o.npy"])
        np.savez(self.path("mixed.npz"), **{"run0/x": np.ones(2, np.float32), "y": np.ones(2)})
        cases["mixed.npz"] = (None, ["mixed.npz", "'y'", "run<k>/"])
        np.save(self.path("strings.npy"), np.array(["ab", "cd"]))
        cases["strings.npy"] = (None, ["strings.npy"])
        # One data byte short: the file is shorter than its header says.
        np.save(self.path("short.npy"), np.arange(8, dtype=np.float32))
        with open(self.path("short.npy"), "rb") as f:
            npy = f.read()
        with open(self.path("short.npy"), "wb") as f:
            f.write(npy[:-1])
        cases["short.npy"] = (None, ["short.npy"])
        for name, (_, needles) in cases.items():
            with self.subTest(file=name):
                out = self.path(name + ".h5")
                result = run("capture", "npz", self.path(name), "-o", out, expect=2)
                for needle in needles:
                    self.assertIn(needle, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertFalse(os.path.exists(out), "a failed capture leaves no store")
        # diff refuses them the same way.
        result = run("diff", self.path("mixed.npz"), good, expect=2)
        self.assertIn("mixed.npz", result.stderr)

    def test_export_of_a_damaged_store_fails_and_writes_nothing(self):
        src = self.path("ref.npz")
        marker = np.frombuffer(b"QNNDEBUGMARKER!!" * 64, dtype=np.uint8).copy()
        np.savez(src, marker=marker, other=np.ones(3, np.float32))
        store = self.capture(src)
        with open(store, "rb") as f:
            content = bytearray(f.read())
        at = content.find(b"QNNDEBUGMARKER!!" * 64)
        self.assertGreater(at, 0, "the tensor data is stored as written")
        content[at + 100] ^= 0x01
        with open(store, "wb") as f:
            f.write(content)
        out = self.path("out.npz")
        result = run("export", "npz", store, "-o", out, expect=2)
        self.assertIn("'marker'", result.stderr)
        self.assertIn("CRC", result.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(self.dir) if "partial" in n], [])

    def test_diff_reads_npz_on_both_sides(self):
        ref = {name: a for name, a in ARRAYS.items() if np.asarray(a).dtype == np.float32
               and np.asarray(a).size > 0}
        device = {name: a.copy() for name, a in ref.items()}
        device["big"] = device["big"] + np.float32(0.5)  # the one op that went wrong
        # QNN names an fx node's output k "<node>@<k>": it meets the fx name without a map.
        device["aten_relu_default_3@0"] = device.pop("aten_relu_default_3")
        ref_path, dev_path = self.path("ref.npz"), self.path("dev.npz")
        np.savez(ref_path, **ref)
        np.savez(dev_path, **device)
        report = self.path("report.json")
        result = run("diff", ref_path, dev_path, "--json", report, expect=1)
        with open(report) as f:
            doc = json.load(f)
        first = doc["runs"][0]["first_divergence"]
        self.assertIn("big", json.dumps(first))
        self.assertIn("big", result.stdout)
        # The ref side's SQNR of the faulty op, against numpy's float64 computation.
        r = np.asarray(ref["big"], np.float64)
        d = np.asarray(device["big"], np.float64)
        sqnr = 10 * np.log10(np.sum(r * r) / np.sum((r - d) ** 2))
        groups = [g for g in doc["runs"][0]["groups"] if "big" in json.dumps(g["pairs"])]
        self.assertEqual(len(groups), 1)
        self.assertAlmostEqual(groups[0]["pairs"][0]["metrics"]["sqnr_db"] / sqnr, 1, delta=1e-6)
        relu = [p for g in doc["runs"][0]["groups"] for p in g["pairs"]
                if p["reference"]["name"] == "aten_relu_default_3"]
        self.assertEqual(len(relu), 1)
        self.assertEqual(relu[0]["device"]["name"], "aten_relu_default_3@0")
        self.assertIn(relu[0]["match"], ("sanitized_name", "node_name"))
        coverage = doc["runs"][0]["coverage"]
        self.assertEqual(coverage["matched_reference_tensors"], coverage["reference_tensors"])


if __name__ == "__main__":
    unittest.main()
