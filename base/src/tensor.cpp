#include <cmath>
#include <string>

#include "qnn_debug/base/tensor.h"

namespace qd {
namespace {

// Element count of `dims`, false on uint64 overflow.
bool checked_element_count(const std::vector<uint64_t>& dims, uint64_t* count) {
  uint64_t product = 1;
  for (uint64_t dim : dims) {
    if (__builtin_mul_overflow(product, dim, &product)) return false;
  }
  *count = product;
  return true;
}

Status invalid(const TensorRecord& record, const std::string& why) {
  return error(ErrorCode::kInvalidArgument, "tensor " + quote_name(record.name) + ": " + why);
}

Status validate_axis_order(const TensorRecord& record) {
  if (record.axis_order.empty()) return Status::ok();
  if (record.axis_order.size() != record.dims.size()) {
    return invalid(record, "axis_order has " + std::to_string(record.axis_order.size()) +
                               " entries for rank " + std::to_string(record.dims.size()));
  }
  std::vector<bool> seen(record.dims.size(), false);
  for (uint8_t axis : record.axis_order) {
    if (axis >= record.dims.size() || seen[axis]) {
      return invalid(record, "axis_order is not a permutation of 0.." +
                                 std::to_string(record.dims.size() - 1));
    }
    seen[axis] = true;
  }
  return Status::ok();
}

Status validate_quantization(const TensorRecord& record) {
  const Quantization& quant = record.quant;
  if (!quant.is_quantized()) {
    if (quant.axis >= 0 || !quant.offsets.empty()) {
      return invalid(record, "quantization has offsets or an axis but no scales");
    }
    return Status::ok();
  }
  const DTypeInfo dtype = info(record.dtype);
  if (dtype.kind == DTypeKind::kFloat || dtype.kind == DTypeKind::kBool) {
    return invalid(record, "quantization given for " + std::string(dtype.name) +
                               ", which is not an integer type");
  }
  if (quant.bitwidth > dtype.bits) {
    return invalid(record, "quantization bitwidth " + std::to_string(quant.bitwidth) +
                               " exceeds the " + std::to_string(dtype.bits) + " bits of " +
                               std::string(dtype.name));
  }
  if (quant.offsets.size() != quant.scales.size()) {
    return invalid(record, "quantization has " + std::to_string(quant.scales.size()) +
                               " scales but " + std::to_string(quant.offsets.size()) + " offsets");
  }
  if (!quant.per_axis()) {
    if (quant.scales.size() != 1) {
      return invalid(record, "per-tensor quantization needs exactly one scale, got " +
                                 std::to_string(quant.scales.size()));
    }
    return Status::ok();
  }
  if (static_cast<size_t>(quant.axis) >= record.dims.size()) {
    return invalid(record, "quantization axis " + std::to_string(quant.axis) + " is outside rank " +
                               std::to_string(record.dims.size()));
  }
  const uint64_t channels = record.dims[static_cast<size_t>(quant.axis)];
  if (quant.scales.size() != channels) {
    return invalid(record, "per-axis quantization has " + std::to_string(quant.scales.size()) +
                               " scales for axis " + std::to_string(quant.axis) + " of length " +
                               std::to_string(channels));
  }
  return Status::ok();
}

}  // namespace

uint64_t TensorRecord::element_count() const {
  uint64_t count = 0;
  return checked_element_count(dims, &count) ? count : 0;
}

Status validate_tensor(const TensorRecord& record, uint64_t nbytes) {
  if (!dtype_info(static_cast<uint32_t>(record.dtype))) {
    return invalid(record,
                   "unknown dtype code " + std::to_string(static_cast<uint32_t>(record.dtype)));
  }
  if (record.dims.size() > static_cast<size_t>(kMaxRank)) {
    return invalid(record, "rank " + std::to_string(record.dims.size()) + " exceeds " +
                               std::to_string(kMaxRank));
  }
  uint64_t elements = 0;
  if (!checked_element_count(record.dims, &elements) || elements > (UINT64_MAX >> 4)) {
    return invalid(record, "dims overflow a 64-bit element count");
  }
  const uint64_t expected = storage_bytes(record.dtype, elements);
  if (nbytes != expected) {
    return invalid(record, std::to_string(nbytes) + " bytes given, but " +
                               std::to_string(elements) + " elements of " +
                               std::string(info(record.dtype).name) + " need " +
                               std::to_string(expected));
  }
  QD_RETURN_IF_ERROR(validate_axis_order(record));
  return validate_quantization(record);
}

std::string describe_axis_order(const std::vector<uint8_t>& axis_order) {
  static const std::vector<uint8_t> kNhwcToNchw = {0, 3, 1, 2};
  static const std::vector<uint8_t> kNwcToNcw = {0, 2, 1};
  if (axis_order.empty()) return "as reference";
  if (axis_order == kNhwcToNchw) return "NHWC->NCHW";
  if (axis_order == kNwcToNcw) return "NWC->NCW";
  std::string text;
  for (uint8_t axis : axis_order) {
    if (!text.empty()) text += ",";
    text += std::to_string(axis);
  }
  return text;
}

}  // namespace qd
