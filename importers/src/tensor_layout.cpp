#include "tensor_layout.h"

#include <algorithm>
#include <numeric>

#include "capture_abi.h"

namespace qd::importers {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 60;

std::string join(std::span<const uint64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i > 0 ? "," : "") + std::to_string(values[i]);
  }
  return text + "]";
}

}  // namespace

Result<uint64_t> element_count(std::span<const int64_t> sizes) {
  if (sizes.size() > static_cast<size_t>(kMaxRank)) {
    return corrupt_input("rank " + std::to_string(sizes.size()) + " exceeds " +
                         std::to_string(kMaxRank));
  }
  uint64_t count = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0)
      return corrupt_input("size " + std::to_string(sizes[d]) + " of axis " + std::to_string(d) +
                           " is negative");
    const auto extent = static_cast<uint64_t>(sizes[d]);
    if (extent != 0 && count > kMaxElements / extent) {
      return corrupt_input("sizes overflow: more than 2^60 elements");
    }
    count *= extent;
  }
  return count;
}

Result<StoredLayout> layout_from_strides(std::span<const int64_t> sizes,
                                         std::span<const int64_t> strides) {
  StoredLayout layout;
  for (int64_t size : sizes)
    layout.dims.push_back(static_cast<uint64_t>(std::max<int64_t>(size, 0)));
  if (strides.empty()) return layout;
  if (strides.size() != sizes.size()) {
    return corrupt_input(std::to_string(strides.size()) + " strides for " +
                         std::to_string(sizes.size()) + " sizes");
  }
  // Memory order: largest stride first; equal strides keep the logical order.
  std::vector<uint8_t> order(sizes.size());
  std::iota(order.begin(), order.end(), uint8_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](uint8_t a, uint8_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (size_t j = order.size(); j-- > 0;) {
    const uint8_t axis = order[j];
    if (sizes[axis] != 1 && strides[axis] != expected) {
      return corrupt_input("strides describe no dense layout (axis " + std::to_string(axis) +
                           " has stride " + std::to_string(strides[axis]) + ", expected " +
                           std::to_string(expected) + ")");
    }
    expected *= std::max<int64_t>(sizes[axis], 1);
  }
  if (std::is_sorted(order.begin(), order.end())) return layout;
  layout.axis_order.resize(order.size());
  for (size_t j = 0; j < order.size(); ++j) {
    layout.dims[j] = static_cast<uint64_t>(sizes[order[j]]);
    layout.axis_order[order[j]] = static_cast<uint8_t>(j);
  }
  return layout;
}

Result<DType> reconcile_dtype(DType stored, const TensorEncoding& encoding) {
  if (!encoding.dtype || *encoding.dtype == stored) return stored;
  const DTypeInfo from_dump = info(stored);
  const DTypeInfo from_encoding = info(*encoding.dtype);
  if (from_dump.bits != from_encoding.bits || from_dump.kind != from_encoding.kind) {
    return corrupt_input("the encodings (" + encoding.source + ") say " +
                         std::string(from_encoding.name) + ", the dump stores " +
                         std::string(from_dump.name));
  }
  return *encoding.dtype;
}

Status apply_encoding(const TensorEncoding& encoding, TensorRecord& record) {
  if (!encoding.dims.empty() && encoding.dims != record.dims) {
    return corrupt_input("the encodings (" + encoding.source + ") give dims " +
                         join(encoding.dims) + ", the dump stores " + join(record.dims));
  }
  if (encoding.axis_order.size() == record.dims.size() && record.axis_order.empty()) {
    record.axis_order = encoding.axis_order;
  }
  if (!encoding.quant.is_quantized()) return Status::ok();
  const DTypeKind kind = info(record.dtype).kind;
  if (kind == DTypeKind::kFloat || kind == DTypeKind::kBool) {
    return corrupt_input("the encodings (" + encoding.source +
                         ") quantize it, but it is stored as " +
                         std::string(info(record.dtype).name));
  }
  for (int64_t offset : encoding.quant.offsets) {
    if (!offset_fits_capture_abi(offset)) {  // checked here too, to name the encodings file
      return corrupt_input("the encodings (" + encoding.source + ") give offset " +
                           std::to_string(offset) + ", beyond 32 bits");
    }
  }
  record.quant = encoding.quant;
  return Status::ok();
}

}  // namespace qd::importers
