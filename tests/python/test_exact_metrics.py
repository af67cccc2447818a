"""Every metric of `diff` against an independent float64 numpy computation, at 1e-6 relative
(docs/metrics.md, "Accumulation and accuracy"): a float32 reference against quantized device
tensors that dequantize to values float32 cannot hold, int8, uint8 with a non-zero offset,
int16 and per-axis, at SQNRs where rounding each dequantized value to float32 would already be
off by more than that.

Run: PYTHONPATH=build/python QD_CLI=build/cli/qnn-debug python3 -m pytest tests/python
"""
import numpy as np
import pytest

import qnn_debug
from qnn_debug import StoreWriter

ATOL, RTOL = 1e-5, 1e-3  # the default allclose tolerances (docs/metrics.md)
REL = 1e-6

rng = np.random.default_rng(2026)


def quantize(real, scale, offset, lo, hi, axis=None):
    """QNN convention: q = round(real / scale) - offset, clipped to the dtype's range."""
    if axis is not None:
        shape = [1] * real.ndim
        shape[axis] = -1
        scale = np.reshape(scale, shape)
        offset = np.reshape(offset, shape)
    return np.clip(np.round(real / scale) - offset, lo, hi)


def dequantize(q, scale, offset, axis=None):
    """(q + offset) * scale in float64, never rounded to float32."""
    q = q.astype(np.float64)
    if axis is None:
        return (q + offset) * scale
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q + np.reshape(np.asarray(offset, np.float64), shape)) * np.reshape(
        np.asarray(scale, np.float64), shape)


# name -> (numpy dtype, store dtype, scale(s), offset(s), axis, shape)
CASES = {
    "int8": (np.int8, "SFIXED_POINT_8", 0.0173, 0, None, (4, 8, 16, 16)),
    "uint8_offset": (np.uint8, "UFIXED_POINT_8", 0.0123, -89, None, (2, 3, 40, 40)),
    "int16": (np.int16, "SFIXED_POINT_16", 1.7e-4, 0, None, (3, 7000)),
    "uint16_offset": (np.uint16, "UFIXED_POINT_16", 9.1e-5, -31000, None, (5000,)),
    "int8_tokens": (np.int8, "SFIXED_POINT_8", 0.021, -3, None, (2, 50, 24)),
    "per_axis": (np.int8, "SFIXED_POINT_8", [0.011, 0.023, 0.0071, 0.019, 0.031, 0.0127], [0, -3, 5, 0, 2, -1],
                 1, (3, 6, 20, 30)),
}


def make_case(name):
    np_dtype, store_dtype, scale, offset, axis, shape = CASES[name]
    info = np.iinfo(np_dtype)
    # Reference values spread over the encoding's range, a few of them clipped.
    if axis is None:
        span = (info.max - info.min) * scale
        centre = (offset + (info.max + info.min) / 2) * scale
    else:
        s = np.asarray(scale)
        span = np.reshape((info.max - info.min) * s, [-1 if d == axis else 1 for d in range(len(shape))])
        centre = 0
    ref = (centre + 0.12 * span * rng.standard_normal(shape)).astype(np.float32)
    ref64 = ref.astype(np.float64)
    # The device: the quantized reference, with a little kernel noise of +-1 LSB here and there.
    q = quantize(ref64, scale, offset, info.min, info.max, axis)
    q = np.clip(q + rng.choice([-1] + [0] * 8 + [1], size=shape), info.min, info.max).astype(np_dtype)
    return ref, q, store_dtype, scale, offset, axis


def write_stores(tmp_path, names):
    ref_path, dev_path = tmp_path / "ref.h5", tmp_path / "dev.h5"
    cases = {}
    with StoreWriter(ref_path) as ref_w, StoreWriter(dev_path) as dev_w:
        ref_w.begin_run("r")
        dev_w.begin_run("r")
        for handle, name in enumerate(names, start=1):
            ref, q, store_dtype, scale, offset, axis = make_case(name)
            ref_w.write(name, ref, handles=[handle])
            dev_w.write(name, q, handles=[handle], dtype=store_dtype, scale=scale, offset=offset,
                        axis=axis)
            cases[name] = (ref, q, scale, offset, axis)
        ref_w.end_run()
        dev_w.end_run()
    return ref_path, dev_path, cases


def expected_metrics(ref, q, scale, offset, axis):
    r = ref.astype(np.float64).ravel()
    d = dequantize(q, scale, offset, axis).ravel()
    e = d - r
    n = r.size
    r2, e2, d2 = np.sum(r * r), np.sum(e * e), np.sum(d * d)
    out = {
        "sqnr_db": 10 * np.log10(r2 / e2),
        "mse": e2 / n,
        "rmse": np.sqrt(e2 / n),
        "mae": np.sum(np.abs(e)) / n,
        "l1_sum": np.sum(np.abs(e)),
        "max_abs": np.max(np.abs(e)),
        "rel_l2": np.sqrt(e2 / r2),
        "cosine": np.sum(r * d) / (np.sqrt(r2) * np.sqrt(d2)),
        "allclose_frac": np.count_nonzero(np.abs(e) <= ATOL + RTOL * np.abs(r)) / n,
    }
    if axis is None:
        out["lsb_mae"] = out["mae"] / scale
        out["lsb_max"] = out["max_abs"] / scale
        out["noise_ratio"] = out["rmse"] / (scale / np.sqrt(12))
    view = axis if axis is not None else channel_axis(ref.shape)
    if view is not None:
        moved = lambda a: np.moveaxis(a, view, 0).reshape(a.shape[view], -1)
        rc = moved(ref.astype(np.float64))
        ec = moved(dequantize(q, scale, offset, axis)) - rc
        out["channels"] = [{"sqnr_db": 10 * np.log10(np.sum(rc[c] ** 2) / np.sum(ec[c] ** 2)),
                            "mae": np.mean(np.abs(ec[c])), "max_abs": np.max(np.abs(ec[c]))}
                           for c in range(rc.shape[0])]
        out["channel_axis"] = view
        out["worst_channels"] = sorted(range(rc.shape[0]),
                                       key=lambda c: (out["channels"][c]["sqnr_db"], c))[:5]
    if axis is not None:
        scales = np.asarray(scale, np.float64)
        out["lsb_mae"] = np.sum(np.abs(ec) / scales[:, None]) / n
        out["lsb_max"] = np.max(np.max(np.abs(ec), axis=1) / scales)
        out["noise_ratio"] = np.sqrt(12 * e2 / np.sum(ec.shape[1] * scales ** 2))
    return out


def channel_axis(shape):
    """docs/metrics.md, "Per-channel figures": axis 1 of rank 4 and 5, the last of rank 2 and 3,
    with 2 to 4096 channels of at least 8 elements."""
    axis = {2: 1, 3: 2, 4: 1, 5: 1}.get(len(shape))
    if axis is None or not 2 <= shape[axis] <= 4096 or np.prod(shape) < 8 * shape[axis]:
        return None
    return axis


def assert_close(actual, expected, what):
    assert actual is not None, what
    assert abs(actual - expected) <= REL * abs(expected), \
        f"{what}: {actual!r} vs float64 {expected!r} ({abs(actual / expected - 1):.3g} relative)"


def test_every_metric_equals_a_float64_computation(tmp_path):
    ref_path, dev_path, cases = write_stores(tmp_path, list(CASES))
    report = qnn_debug.diff(ref_path, dev_path)
    pairs = {p["reference"]["name"]: p for g in report.runs[0]["groups"] for p in g["pairs"]}
    assert sorted(pairs) == sorted(CASES)
    for name, case in cases.items():
        metrics = pairs[name]["metrics"]
        expected = expected_metrics(*case)
        assert ("channels" in expected) == bool(metrics["channels"]), name
        # Rounding each dequantized value to float32 would miss by more than the tolerance here.
        assert expected["sqnr_db"] > 30, (name, expected["sqnr_db"])
        for key, value in expected.items():
            if key in ("channel_axis", "worst_channels"):
                assert metrics[key] == value, (name, key)
            elif key == "channels":
                assert len(metrics["channels"]) == len(value), name
                for c, (got, want) in enumerate(zip(metrics["channels"], value)):
                    for field, number in want.items():
                        assert_close(got[field], number, f"{name} channel {c} {field}")
            elif key == "allclose_frac":
                assert metrics[key] == value, (name, key)  # an exact count
            else:
                assert_close(metrics[key], value, f"{name} {key}")


def test_float32_rounding_of_the_device_would_have_failed_the_check():
    """The check above can fail: the old computation, each dequantized value rounded to float32
    first, misses float64 by more than 1e-6 on these tensors (max_abs above all: one element's
    rounding, relative to its small error)."""
    worst = 0.0
    for name in CASES:
        ref, q, _, scale, offset, axis = make_case(name)
        exact = expected_metrics(ref, q, scale, offset, axis)
        rounded = dequantize(q, scale, offset, axis).astype(np.float32)
        # The same figures from the rounded values: a float "scale" of 1 on the rounded reals.
        old = expected_metrics(ref, rounded, 1.0, 0.0, None)
        for key in ("mse", "mae", "max_abs", "rel_l2", "sqnr_db"):
            worst = max(worst, abs(old[key] / exact[key] - 1))
    assert worst > 2 * REL, worst
