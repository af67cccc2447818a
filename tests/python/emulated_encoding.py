"""The per-tensor activation encoding both emulated devices use (emulated_cnn.py,
emulated_decoder.py): unsigned 8 or 16 bits, QNN's offset convention."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_RANGE = 1e-6  # the narrowest encoding range (a constant-zero tensor), far from the lint's


@dataclass(frozen=True)
class Encoding:
    """A per-tensor asymmetric encoding, QNN convention: real = (q + offset) * scale."""

    scale: float
    offset: int
    bits: int

    @property
    def qmax(self) -> int:
        return (1 << self.bits) - 1

    @property
    def dtype(self) -> str:
        return f"UFIXED_POINT_{self.bits}"

    @property
    def storage(self):
        return np.uint8 if self.bits == 8 else np.uint16

    @property
    def real_range(self):
        return self.offset * self.scale, (self.qmax + self.offset) * self.scale

    @property
    def zero_code(self) -> int:
        """The code of 0.0 (exact: the range holds 0)."""
        return -self.offset

    @classmethod
    def fitted(cls, low: float, high: float, bits: int) -> "Encoding":
        """The encoding over [min(low, 0), max(high, 0)]: code 0 stands for the low end."""
        low, high = min(low, 0.0), max(high, 0.0)
        scale = max(high - low, MIN_RANGE) / ((1 << bits) - 1)
        return cls(scale, int(round(low / scale)), bits)

    def unrounded(self, x: np.ndarray) -> np.ndarray:
        """x / scale - offset in float64: the code before rounding and clamping."""
        return np.asarray(x, np.float64) / self.scale - self.offset

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Codes of float values: round half to even, clamp to the raw range (float64 codes)."""
        return np.clip(np.rint(self.unrounded(x)), 0, self.qmax)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (np.asarray(q, np.float64) + self.offset) * self.scale

    def widened(self, factor: float) -> "Encoding":
        """The same centre, `factor` times the range (a factor below 1 narrows it)."""
        low, high = self.real_range
        centre, scale = (low + high) / 2, self.scale * factor
        return Encoding(scale, int(round(centre / scale - self.qmax / 2)), self.bits)

    def to_json(self) -> dict:
        return {"scale": self.scale, "offset": self.offset, "dtype": self.dtype}
