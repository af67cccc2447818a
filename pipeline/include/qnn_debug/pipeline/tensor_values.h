// A stored tensor's values as numpy sees them: the one home of these rules for `export npz` and
// the Python package (docs/formats.md, "What export npz writes").
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "qnn_debug/status.h"
#include "qnn_debug/store_reader.h"

namespace qd::pipeline {

// The dtype of a tensor's values as stored, in a type numpy has: the stored dtype (fixed-point
// types are their storage integers), except 4-bit types (int8 / uint8) and BFLOAT_16 (float32).
DType numpy_dtype(DType stored);

// The dims in the reference layout: reference axis i is stored axis axis_order[i].
std::vector<uint64_t> reference_dims(const TensorEntry& t);

// Streams the stored bytes of `t` to `sink` in pieces of at most `piece_bytes`, checking them
// against the row's CRC-32C at the end (kCorrupt naming the store and the tensor on a mismatch,
// after the last piece). For tensors whose numpy_dtype is their stored dtype.
Status stream_stored_bytes(const StoreReader& store, const TensorEntry& t, uint64_t piece_bytes,
                           const std::function<Status(std::span<const uint8_t>)>& sink);

// The whole tensor in numpy_dtype, stored dims and layout, little-endian; CRC checked.
Result<std::vector<uint8_t>> read_stored_values(const StoreReader& store, const TensorEntry& t);

// Real values (dequantized, docs/metrics.md "Decoding") as float32; in the reference layout
// (reference_dims) when `reference_layout`, else in the stored one. CRC checked.
Result<std::vector<float>> read_real_values(const StoreReader& store, const TensorEntry& t,
                                            bool reference_layout);

// "'store.h5': tensor 'conv' (seq 3)": how messages name a tensor.
std::string tensor_context(const StoreReader& store, const TensorEntry& t);

}  // namespace qd::pipeline
