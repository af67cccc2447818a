#include "qnn_debug/pipeline/tensor_values.h"

#include <algorithm>

#include "qnn_debug/base/checksum.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/layout.h"

namespace qd::pipeline {
namespace {

// Every element decoded to float: real values, or the raw integers when `quantized` is false.
Result<std::vector<float>> decode_all(const StoreReader& store, const TensorEntry& t,
                                      bool quantized) {
  QD_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, store.read_tensor(t));
  TensorRecord record = t;
  if (!quantized) record.quant = Quantization{};
  std::vector<float> values(t.element_count());
  compare::decode(record, bytes.data(), 0, values.size(), values.data());
  return values;
}

// Undoes the stored axis order. Reads out of order, so the whole tensor is decoded first.
Result<std::vector<float>> to_reference_layout(const TensorEntry& t, std::vector<float> stored) {
  compare::LayoutPlan plan;
  plan.axis_order = t.axis_order;
  QD_ASSIGN_OR_RETURN(const compare::Permuter permuter, compare::Permuter::create(plan, t.dims));
  std::vector<float> ordered(stored.size());
  std::vector<uint64_t> index;
  constexpr uint64_t kPiece = 1u << 16;
  for (uint64_t first = 0; first < ordered.size(); first += kPiece) {
    const uint64_t n = std::min<uint64_t>(kPiece, ordered.size() - first);
    QD_RETURN_IF_ERROR(permuter.map(first, n, &index));
    for (uint64_t k = 0; k < n; ++k) ordered[first + k] = stored[index[k]];
  }
  return ordered;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& values) {
  const auto* raw = reinterpret_cast<const uint8_t*>(values.data());
  return std::vector<uint8_t>(raw, raw + values.size() * sizeof(float));
}

}  // namespace

DType numpy_dtype(DType stored) {
  const DTypeInfo dtype = info(stored);
  if (dtype.bits == 4) return dtype.kind == DTypeKind::kSignedInt ? DType::kInt8 : DType::kUInt8;
  if (stored == DType::kBFloat16) return DType::kFloat32;
  return stored;
}

std::vector<uint64_t> reference_dims(const TensorEntry& t) {
  std::vector<uint64_t> dims = t.dims;
  if (t.axis_order.size() == dims.size()) {
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = t.dims[t.axis_order[i]];
  }
  return dims;
}

std::string tensor_context(const StoreReader& store, const TensorEntry& t) {
  return quote_name(store.path()) + ": tensor " + quote_name(t.name) + " (seq " +
         std::to_string(t.seq) + ")";
}

Result<size_t> StoredBytes::read(std::span<uint8_t> out) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), remaining()));
  if (n == 0) return size_t{0};
  QD_RETURN_IF_ERROR(store_->read_tensor_range(*tensor_, offset_, out.first(n)));
  crc_ = crc32c_extend(crc_, out.data(), n);
  offset_ += n;
  if (remaining() == 0 && crc_ != tensor_->data_crc32c) {
    return error(ErrorCode::kCorrupt, tensor_context(*store_, *tensor_) +
                                          ": data does not match its CRC-32C (the store is "
                                          "damaged)");
  }
  return n;
}

Result<std::vector<uint8_t>> read_stored_values(const StoreReader& store, const TensorEntry& t) {
  const DType dtype = numpy_dtype(t.dtype);
  if (dtype == t.dtype) return store.read_tensor(t);
  QD_ASSIGN_OR_RETURN(const std::vector<float> values, decode_all(store, t, /*quantized=*/false));
  if (dtype == DType::kFloat32) return float_bytes(values);
  // 4-bit integers: each decoded value is an exact small integer.
  std::vector<uint8_t> bytes(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(values[i]));
  }
  return bytes;
}

Result<std::vector<float>> read_real_values(const StoreReader& store, const TensorEntry& t,
                                            bool reference_layout) {
  QD_ASSIGN_OR_RETURN(std::vector<float> values, decode_all(store, t, /*quantized=*/true));
  if (!reference_layout || t.axis_order.empty()) return values;
  return to_reference_layout(t, std::move(values));
}

}  // namespace qd::pipeline
