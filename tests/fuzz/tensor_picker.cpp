#include "tensor_picker.h"

#include <algorithm>
#include <numeric>

namespace qd::fuzz {

DType pick_dtype(FuzzedDataProvider& in) {
  size_t count = 0;
  const DTypeInfo* all = all_dtypes(&count);
  return all[in.ConsumeIntegralInRange<size_t>(0, count - 1)].dtype;
}

// Mostly small dims; sometimes any 64-bit value (element count 0 keeps it cheap, and the
// element-count checks see an overflow).
std::vector<uint64_t> pick_dims(FuzzedDataProvider& in) {
  std::vector<uint64_t> dims(in.ConsumeIntegralInRange<size_t>(0, kMaxRank));
  for (uint64_t& dim : dims) {
    dim = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint64_t>(0, 6)
                           : in.ConsumeIntegral<uint64_t>();
  }
  return dims;
}

std::vector<uint8_t> pick_axis_order(FuzzedDataProvider& in, size_t rank) {
  if (rank == 0 || !in.ConsumeBool()) return {};
  std::vector<uint8_t> order(rank);
  std::iota(order.begin(), order.end(), uint8_t{0});
  for (size_t i = rank - 1; i > 0; --i)
    std::swap(order[i], order[in.ConsumeIntegralInRange<size_t>(0, i)]);
  return order;
}

Quantization pick_quantization(FuzzedDataProvider& in, const std::vector<uint64_t>& dims) {
  Quantization quant;
  if (!in.ConsumeBool()) return quant;
  const bool per_axis = !dims.empty() && in.ConsumeBool();
  quant.axis =
      per_axis ? in.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(dims.size()) - 1) : -1;
  const uint64_t count =
      per_axis ? std::min<uint64_t>(dims[static_cast<size_t>(quant.axis)], 64) : 1;
  for (uint64_t c = 0; c < count; ++c) {
    quant.scales.push_back(in.ConsumeFloatingPoint<double>());
    quant.offsets.push_back(in.ConsumeIntegral<int32_t>());
  }
  quant.bitwidth = in.ConsumeIntegral<uint8_t>();
  quant.convention = in.ConsumeBool() ? QuantConvention::kQnnOffset : QuantConvention::kZeroPoint;
  return quant;
}

}  // namespace qd::fuzz
