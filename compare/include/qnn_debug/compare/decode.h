// Decoding stored tensor elements into real values: every storage dtype, dequantized
// per tensor or per axis in both quantization conventions. docs/metrics.md ("Decoding")
// states the rules.
#pragma once

#include <cstdint>
#include <optional>

#include "qnn_debug/compare/split.h"
#include "qnn_debug/etdump/store.h"

namespace qd::compare {

// Raw values found at the ends of the saturation range while decoding (integer dtypes only).
struct DecodeCounts {
  uint64_t at_min = 0;  // raw values <= the range's minimum
  uint64_t at_max = 0;  // raw values >= the range's maximum

  uint64_t saturated() const { return at_min + at_max; }
  DecodeCounts& operator+=(const DecodeCounts& other) {
    at_min += other.at_min;
    at_max += other.at_max;
    return *this;
  }
};

// The raw range whose ends count as saturated for `t`: qd::integer_range of the dtype, narrowed to
// a quantization bitwidth smaller than the dtype's width (bitwidth 4 on INT_8: -8..7, on UINT_8:
// 0..15). nullopt for float and bool dtypes, which never saturate.
struct SaturationRange {
  int64_t min = 0;
  uint64_t max = 0;  // unsigned so UINT_64's 2^64 - 1 fits
};
std::optional<SaturationRange> saturation_range(const TensorRecord& t);

// Decodes elements [first_element, first_element + count) of `t` into `out` (count values).
// `bytes` points at the byte holding element `first_element`: element * width for byte-aligned
// dtypes, byte first_element / 2 for the 4-bit types (two per byte, low nibble first, so an odd
// first_element starts at the high nibble). Values are little-endian, as the store keeps them.
// Quantized integers follow Quantization::dequantize, computed in double; unquantized integers and
// bool convert directly. Into double every value is exact (docs/metrics.md, "Decoding"); into
// float each is rounded once (FLOAT_64 beyond the float range: +-inf), for
// estimates and exports. Precondition: `t` passed qd::validate_tensor (the store reader checks
// every row), `bytes` holds the elements, and `out` does not overlap `bytes`.
// Returns the saturation counts of the decoded raw values (zero for float and bool dtypes).
DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, double* out);
DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, float* out);
// Into Split, what the metrics read: per-tensor 8- and 16-bit encodings are computed directly in
// float lanes as t = q + offset (exact), hi = float(t * s1), lo = (t * s1 - hi) + t * s2 with
// scale = s1 + s2 split into floats, the same bits on every instruction set; every other dtype is
// decoded to double and split (Split::of).
DecodeCounts decode(const TensorRecord& t, const uint8_t* bytes, uint64_t first_element,
                    uint64_t count, Split* out);

// The raw code, as its low 8 or 16 bits, of a per-tensor 8- or 16-bit encoding that decode() into
// Split turns into +0 in both floats, strictly inside the saturation range (never counted): a run
// of it needs no decoding (a KV cache's unwritten slots). nullopt for any other tensor.
std::optional<uint16_t> split_zero_code(const TensorRecord& t);

// The quantization channel of flat element `element` (stored order) of a per-axis encoding:
// (element / inner) % dims[axis], inner = product of the dims after the axis. 0 when per-tensor.
uint64_t channel_of(const TensorRecord& t, uint64_t element);

// channel_of for elements [first_element, first_element + count), written to `out`.
void channels_of(const TensorRecord& t, uint64_t first_element, uint64_t count, uint32_t* out);

}  // namespace qd::compare
