// A stored tensor's values as numpy sees them: the one home of these rules for `export npz` and
// the Python package (docs/formats.md, "What export npz writes").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::pipeline {

// The dtype of a tensor's values as stored, in a type numpy has: the stored dtype (fixed-point
// types are their storage integers), except 4-bit types (int8 / uint8) and BFLOAT_16 (float32).
DType numpy_dtype(DType stored);

// The dims in the reference layout: reference axis i is stored axis axis_order[i].
std::vector<uint64_t> reference_dims(const TensorEntry& t);

// A tensor's stored bytes in order, in pieces of the caller's size, checked against the row's
// CRC-32C: the call that delivers the last byte returns kCorrupt (naming the store and the
// tensor) instead if they do not match. For tensors whose numpy_dtype is their stored dtype.
// Borrows `store` and `t`.
class StoredBytes {
 public:
  StoredBytes(const StoreReader& store, const TensorEntry& t) : store_(&store), tensor_(&t) {}
  // The next bytes into `out`; how many (fewer only at the end, 0 after it).
  Result<size_t> read(std::span<uint8_t> out);
  uint64_t remaining() const { return tensor_->data_nbytes - offset_; }

 private:
  const StoreReader* store_;
  const TensorEntry* tensor_;
  uint64_t offset_ = 0;
  uint32_t crc_ = 0;
};

// The whole tensor in numpy_dtype, stored dims and layout, little-endian; CRC checked.
Result<std::vector<uint8_t>> read_stored_values(const StoreReader& store, const TensorEntry& t);

// Real values (dequantized, docs/metrics.md "Decoding") as float32; in the reference layout
// (reference_dims) when `reference_layout`, else in the stored one. CRC checked.
Result<std::vector<float>> read_real_values(const StoreReader& store, const TensorEntry& t,
                                            bool reference_layout);

// "'store.h5': tensor 'conv' (seq 3)": how messages name a tensor.
std::string tensor_context(const StoreReader& store, const TensorEntry& t);

}  // namespace qd::pipeline
