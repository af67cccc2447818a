// Tensors described by fuzz bytes, for the harnesses that fuzz what diff does with them (layout,
// diff): every dtype, small dims (sometimes any 64-bit value), permuted layouts, per-tensor and
// per-axis quantization with any scale a producer could state.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <vector>

#include "qnn_debug/etdump/store.h"

namespace qd::fuzz {

DType pick_dtype(FuzzedDataProvider& in);
std::vector<uint64_t> pick_dims(FuzzedDataProvider& in);
// Empty (the reference layout) or a permutation of 0..rank-1.
std::vector<uint8_t> pick_axis_order(FuzzedDataProvider& in, size_t rank);
// Per tensor or per axis, with the scale count right for the axis (else the reader refuses the
// tensor); zero, negative, NaN and infinite scales are kept as the producer gave them.
Quantization pick_quantization(FuzzedDataProvider& in, const std::vector<uint64_t>& dims);

}  // namespace qd::fuzz
