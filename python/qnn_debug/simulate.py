"""Quantized simulation: encodings matched to stored tensor names, and fake quantization.

``capture_torch(..., encodings=...)`` and ``replay(..., encodings=...)`` use this module. Two
rules are not restated here but reached in the C++ library, so that Python and ``qnn-debug``
cannot disagree:

- reading encodings files (converter ``*_net.json``, context-binary JSON, the plain map; several
  files merged as ``--encodings A --encodings B`` merges them): ``_native.load_encodings``, over
  ``importers::load_encodings`` / ``merge_encodings``;
- which name matches which: ``_native.align_tensors``, over ``compare::align``, the alignment
  ``qnn-debug diff`` uses (handles, then exact, sanitized, ``@k``-suffix and node-name matches).

Fake quantization follows QNN's offset convention, computed in float64:
``q = clamp(round(x / scale) - offset, qmin, qmax)`` with ``round`` half to even
(``torch.round``), and ``real = (q + offset) * scale``, cast back to the tensor's dtype. A NaN is
quantized as 0.0; infinities saturate.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _dtypes, _native

# The storage widths a dtype-less encoding is given, smallest first (QNN's fixed-point widths).
_WIDTHS = (4, 8, 16, 32)


@dataclass(frozen=True)
class Encoding:
    """One tensor's encoding, as the encodings file states it (offsets in QNN's convention), with
    the integer range and the store dtype the simulation uses for it."""

    name: str
    source: str  # the file it came from
    dtype: str  # the encoding's integer dtype (QNN name)
    scales: Tuple[float, ...]
    offsets: Tuple[int, ...]
    axis: int  # per-axis: the channel axis in the STORED layout; -1 per tensor
    axis_order: Tuple[int, ...]  # reference axis i is stored axis axis_order[i]; () same layout
    qmin: int
    qmax: int
    store_dtype: str  # what the codes are written as (4-bit: the 8-bit type with bitwidth 4)
    store_bitwidth: int  # 0: the store dtype's width

    def reference_axis(self, rank: int) -> int:
        """The channel axis in the reference (PyTorch) layout, -1 per tensor."""
        if self.axis < 0:
            return -1
        if not self.axis_order:
            return self.axis
        if len(self.axis_order) != rank:
            raise ValueError(f"encoding of {self.name!r} ({self.source}): axis order "
                             f"{list(self.axis_order)} does not fit a tensor of rank {rank}")
        return self.axis_order.index(self.axis)


def _integer_range(dtype: str, bitwidth: int) -> Tuple[int, int]:
    entry = _dtypes.info(dtype)
    bits = bitwidth if 0 < bitwidth < entry["bits"] else entry["bits"]
    if entry["kind"] == "signed":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _encoding(entry: dict) -> Encoding:
    """An Encoding from one dict of _native.load_encodings (which must carry a scale)."""
    name, source, bitwidth = entry["name"], entry["source"], int(entry["bitwidth"])
    dtype = entry["dtype"]
    if dtype is None:
        # The file states no dtype (a plain map may not): QNN's activation type, unsigned, of
        # the smallest width that holds the bitwidth.
        width = next((w for w in _WIDTHS if w >= (bitwidth or 8)), None)
        if width is None:
            raise ValueError(f"encoding of {name!r} ({source}): bitwidth {bitwidth} is wider "
                             "than 32 bits")
        dtype = f"UFIXED_POINT_{width}"
    info = _dtypes.info(dtype)
    if info["kind"] not in ("signed", "unsigned") or info["bits"] > 32:
        raise ValueError(f"encoding of {name!r} ({source}): a scale on dtype {dtype}; fake "
                         "quantization needs an integer dtype of at most 32 bits")
    qmin, qmax = _integer_range(dtype, bitwidth)
    store_dtype, store_bitwidth = dtype, (bitwidth if 0 < bitwidth < info["bits"] else 0)
    if info["bits"] == 4:  # numpy has no 4-bit type: the 8-bit type narrowed to 4 bits
        store_dtype = dtype.replace("_4", "_8")
        store_bitwidth = 4
    return Encoding(name=name, source=source, dtype=dtype,
                    scales=tuple(float(s) for s in entry["scales"]),
                    offsets=tuple(int(o) for o in entry["offsets"]), axis=int(entry["axis"]),
                    axis_order=tuple(int(a) for a in entry["axis_order"]), qmin=qmin, qmax=qmax,
                    store_dtype=store_dtype, store_bitwidth=store_bitwidth)


def encodings_paths(encodings) -> List[str]:
    """`encodings` (a path or a list of paths) as a list of str paths."""
    if isinstance(encodings, (str, os.PathLike)):
        return [os.fspath(encodings)]
    if isinstance(encodings, (list, tuple)) and encodings and all(
            isinstance(p, (str, os.PathLike)) for p in encodings):
        return [os.fspath(p) for p in encodings]
    raise TypeError("encodings must be a path or a non-empty list of paths, got "
                    f"{type(encodings).__name__}")


def load_encodings(encodings) -> Dict[str, Optional[Encoding]]:
    """Every tensor the encodings files describe, by name: its Encoding, or None when the file
    defines no quantization for it (a float tensor). Several files merge in order, as the CLI's
    repeated --encodings do; a file's error is a QnnDebugError naming it."""
    table: Dict[str, Optional[Encoding]] = {}
    for entry in _native.load_encodings(encodings_paths(encodings)):
        table[entry["name"]] = _encoding(entry) if entry["scales"] else None
    return table


def encoding_table(encodings) -> Dict[str, Optional[Encoding]]:
    """`encodings` as a table: a dict (load_encodings' result, perhaps changed) as it is, paths
    loaded by load_encodings."""
    return dict(encodings) if isinstance(encodings, dict) else load_encodings(encodings)


# A tensor as the alignment sees it: (name, handles, output_index).
TensorKey = Tuple[str, Sequence[int], int]


def align(reference: Sequence[TensorKey], device: Sequence[TensorKey]
          ) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Pairs reference tensors with device tensors as `qnn-debug diff` does (compare::align).
    Returns ([(reference index, device index)], [device indices paired with nothing])."""
    result = _native.align_tensors([(n, [int(h) for h in hs], int(k)) for n, hs, k in reference],
                                   [(n, [int(h) for h in hs], int(k)) for n, hs, k in device])
    pairs = [(int(r), int(d)) for r, d, _how in result["pairs"]]
    paired = {d for _, d in pairs}
    return pairs, [d for d in range(len(device)) if d not in paired]


def match_encodings(stored: Sequence[TensorKey], table: Dict[str, Optional[Encoding]],
                    floating: Optional[set] = None
                    ) -> Tuple[Dict[str, Encoding], Tuple[str, ...], Tuple[str, ...]]:
    """Which stored tensor gets which encoding, by the diff's name rules (the encodings carry no
    handles, so only names count). Only the names in `floating` (None: all) are quantized: an
    integer or bool tensor stays as it is. Returns ({stored name: Encoding}, stored names left
    unquantized, encoding names no stored tensor matched)."""
    names = list(table)
    pairs, unused = align([(name, [], index) for name, _, index in stored],
                          [(name, [], -1) for name in names])
    matched = {}
    for r, d in pairs:
        if table[names[d]] is not None and (floating is None or stored[r][0] in floating):
            matched[stored[r][0]] = table[names[d]]
    not_quantized = tuple(name for name, _, _ in stored if name not in matched)
    return matched, not_quantized, tuple(names[d] for d in unused)


def fake_quantize(x, encoding: Encoding):
    """(fake-quantized x in x's dtype, integer codes as a numpy array of the store dtype, the
    StoreWriter.write keywords that describe the codes). The codes are in x's (reference)
    layout, so a per-axis encoding's axis is given in that layout."""
    import torch  # only called with torch tensors

    axis = encoding.reference_axis(x.dim())
    scale = torch.tensor(encoding.scales, dtype=torch.float64)
    offset = torch.tensor(encoding.offsets, dtype=torch.float64)
    if axis >= 0:
        if axis >= x.dim() or x.shape[axis] != len(encoding.scales):
            raise ValueError(f"encoding of {encoding.name!r} ({encoding.source}): "
                             f"{len(encoding.scales)} channels on axis {axis} (reference layout)"
                             f" of a tensor of shape {tuple(x.shape)}")
        shape = [1] * x.dim()
        shape[axis] = len(encoding.scales)
        scale, offset = scale.reshape(shape), offset.reshape(shape)
    elif len(encoding.scales) != 1:
        raise ValueError(f"encoding of {encoding.name!r} ({encoding.source}): "
                         f"{len(encoding.scales)} scales without an axis")
    wide = torch.nan_to_num(x.detach().to(torch.float64), nan=0.0)
    q = torch.clamp(torch.round(wide / scale) - offset, encoding.qmin, encoding.qmax)
    real = ((q + offset) * scale).to(x.dtype)
    numpy_type = np.dtype(_dtypes.info(encoding.store_dtype)["numpy"])
    codes = q.cpu().contiguous().numpy().astype(numpy_type)
    per_axis = axis >= 0
    keywords = {"dtype": encoding.store_dtype, "bitwidth": encoding.store_bitwidth,
                "scale": list(encoding.scales) if per_axis else encoding.scales[0],
                "offset": list(encoding.offsets) if per_axis else encoding.offsets[0],
                "axis": axis if per_axis else None}
    return real, codes, keywords


class FakeQuantizer:
    """The capture sink's `encode` hook: fake-quantizes the float tensors that have an encoding,
    by stored name; everything else is left as it is (None)."""

    def __init__(self, by_name: Dict[str, Encoding]):
        self.by_name = by_name

    def __call__(self, name: str, tensor):
        encoding = self.by_name.get(name)
        if encoding is None or not tensor.is_floating_point():
            return None
        return fake_quantize(tensor, encoding)

