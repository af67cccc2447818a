#include "tensor_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "qnn_debug/base/elements.h"

namespace qd {
namespace {

constexpr uint64_t kBlockElements = 4096;

// Raw (not yet dequantized) summary of a run of elements.
struct RawSummary {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  uint64_t finite = 0;
  uint64_t nan = 0;
  uint64_t inf = 0;

  void merge(const RawSummary& other) {
    min = std::min(min, other.min);
    max = std::max(max, other.max);
    sum += other.sum;
    finite += other.finite;
    nan += other.nan;
    inf += other.inf;
  }
};

// Floating point: partial sums in float over short blocks, folded into double, keep the mean
// accurate to ~1e-7 while the loop vectorizes (the comparator's metric kernel uses the same scheme).
template <typename Load>
RawSummary summarize_floats(Load load, uint64_t begin, uint64_t end) {
  RawSummary summary;
  for (uint64_t block = begin; block < end; block += kBlockElements) {
    const auto count = static_cast<int32_t>(std::min(end - block, kBlockElements));
    float lo = std::numeric_limits<float>::infinity();
    float hi = -lo;
    float part = 0;
    int32_t finite = 0, nan = 0;  // 32-bit lanes, like the floats: twice the width of 64-bit
#pragma omp simd reduction(min : lo) reduction(max : hi) reduction(+ : part, finite, nan)
    for (int32_t j = 0; j < count; ++j) {
      const float x = load(block + static_cast<uint64_t>(j));
      const bool is_finite = (x - x) == 0.0f;  // false for NaN and +-Inf
      lo = is_finite ? std::min(lo, x) : lo;
      hi = is_finite ? std::max(hi, x) : hi;
      part += is_finite ? x : 0.0f;
      finite += is_finite;
      nan += (x != x);
    }
    summary.min = std::min<double>(summary.min, lo);
    summary.max = std::max<double>(summary.max, hi);
    summary.sum += part;
    summary.finite += static_cast<uint64_t>(finite);
    summary.nan += static_cast<uint64_t>(nan);
    summary.inf += static_cast<uint64_t>(count - finite - nan);
  }
  return summary;
}

template <typename Load>
RawSummary summarize_doubles(Load load, uint64_t begin, uint64_t end) {
  RawSummary summary;
  for (uint64_t i = begin; i < end; ++i) {
    const double x = load(i);
    if (std::isnan(x)) {
      ++summary.nan;
    } else if (std::isinf(x)) {
      ++summary.inf;
    } else {
      summary.min = std::min(summary.min, x);
      summary.max = std::max(summary.max, x);
      summary.sum += x;
      ++summary.finite;
    }
  }
  return summary;
}

// The summary of `count` integers whose exact minimum, maximum and sum are known.
RawSummary exact_summary(int64_t lo, int64_t hi, int64_t sum, uint64_t count) {
  RawSummary summary;
  if (count > 0) {
    summary.min = static_cast<double>(lo);
    summary.max = static_cast<double>(hi);
    summary.sum = static_cast<double>(sum);
    summary.finite = count;
  }
  return summary;
}

// Integers up to 16 bits, block by block: min and max in lanes of the element's own width and
// the sum in 32-bit lanes (4096 values below 2^16 sum exactly), each loop at full vector width;
// one loop over 64-bit lanes does not vectorize on SSE2 and took half of a whole capture's time.
template <class R>
RawSummary summarize_narrow_ints(const uint8_t* data, uint64_t begin, uint64_t end) {
  using Value = typename R::Value;
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  int64_t sum = 0;
  for (uint64_t block = begin; block < end; block += kBlockElements) {
    const auto count = static_cast<int32_t>(std::min(end - block, kBlockElements));
    Value block_lo = std::numeric_limits<Value>::max();
    Value block_hi = std::numeric_limits<Value>::min();
    int32_t block_sum = 0;
#pragma omp simd reduction(min : block_lo) reduction(max : block_hi)
    for (int32_t j = 0; j < count; ++j) {
      const Value x = R::at(data, block + static_cast<uint64_t>(j));
      block_lo = std::min(block_lo, x);
      block_hi = std::max(block_hi, x);
    }
#pragma omp simd reduction(+ : block_sum)
    for (int32_t j = 0; j < count; ++j) {
      block_sum += static_cast<int32_t>(R::at(data, block + static_cast<uint64_t>(j)));
    }
    lo = std::min<int64_t>(lo, block_lo);
    hi = std::max<int64_t>(hi, block_hi);
    sum += block_sum;
  }
  return exact_summary(lo, hi, sum, end - begin);
}

// 32-bit integers: exact 64-bit sums.
template <typename Load>
RawSummary summarize_ints(Load load, uint64_t begin, uint64_t end) {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  int64_t sum = 0;
#pragma omp simd reduction(min : lo) reduction(max : hi) reduction(+ : sum)
  for (uint64_t i = begin; i < end; ++i) {
    const int64_t x = load(i);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return exact_summary(lo, hi, sum, end - begin);
}

template <typename Load>
RawSummary summarize_wide_ints(Load load, uint64_t begin, uint64_t end) {
  RawSummary summary;
  for (uint64_t i = begin; i < end; ++i) {
    const auto x = static_cast<double>(load(i));
    summary.min = std::min(summary.min, x);
    summary.max = std::max(summary.max, x);
    summary.sum += x;
  }
  summary.finite = end - begin;
  return summary;
}

RawSummary summarize_range(DType dtype, const uint8_t* data, uint64_t begin, uint64_t end) {
  return elements::visit_dtype(dtype, [&](auto reader) {
    using R = decltype(reader);
    using Value = typename R::Value;
    const auto load = [data](uint64_t i) { return R::at(data, i); };
    if constexpr (std::is_same_v<Value, double>) {
      return summarize_doubles(load, begin, end);
    } else if constexpr (elements::kIsFloat<R>) {
      return summarize_floats(load, begin, end);
    } else if constexpr (sizeof(Value) == 8) {
      return summarize_wide_ints(load, begin, end);  // exact sums would need 128 bits
    } else if constexpr (sizeof(Value) <= 2) {
      return summarize_narrow_ints<R>(data, begin, end);
    } else {
      return summarize_ints([data](uint64_t i) { return int64_t{R::at(data, i)}; }, begin, end);
    }
  });
}

// Elements of channel c of a per-axis encoding form `outer` runs of `inner` contiguous values.
struct ChannelLayout {
  uint64_t outer = 1;
  uint64_t channels = 1;
  uint64_t inner = 1;
};

ChannelLayout channel_layout(const TensorRecord& record) {
  ChannelLayout layout;
  if (!record.quant.per_axis()) {
    layout.inner = record.element_count();
    return layout;
  }
  const auto axis = static_cast<size_t>(record.quant.axis);
  for (size_t d = 0; d < record.dims.size(); ++d) {
    if (d < axis) layout.outer *= record.dims[d];
    if (d == axis) layout.channels = record.dims[d];
    if (d > axis) layout.inner *= record.dims[d];
  }
  return layout;
}

// Folds per-channel raw summaries into real-value statistics.
TensorStats dequantized_stats(const TensorRecord& record, const std::vector<RawSummary>& raw) {
  TensorStats stats;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  double real_sum = 0;
  uint64_t finite = 0;
  for (size_t c = 0; c < raw.size(); ++c) {
    stats.nan_count += raw[c].nan;
    stats.inf_count += raw[c].inf;
    if (raw[c].finite == 0) continue;
    const auto count = static_cast<double>(raw[c].finite);
    const bool quantized = record.quant.is_quantized();
    const double a = quantized ? record.quant.dequantize(raw[c].min, c) : raw[c].min;
    const double b = quantized ? record.quant.dequantize(raw[c].max, c) : raw[c].max;
    const double mean =
        quantized ? record.quant.dequantize(raw[c].sum / count, c) : raw[c].sum / count;
    lo = std::min({lo, a, b});  // a negative scale would swap the ends
    hi = std::max({hi, a, b});
    real_sum += mean * count;
    finite += raw[c].finite;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  stats.min = finite ? lo : nan;
  stats.max = finite ? hi : nan;
  stats.mean = finite ? real_sum / static_cast<double>(finite) : nan;
  return stats;
}

}  // namespace

TensorStats compute_stats(const TensorRecord& record, const uint8_t* data) {
  // Nothing to walk: with a zero dim, the others can be anything (2^40 empty rows of channels),
  // and their product may even overflow.
  if (record.element_count() == 0) return dequantized_stats(record, {});
  const ChannelLayout layout = channel_layout(record);
  std::vector<RawSummary> per_channel(layout.channels);
  uint64_t begin = 0;
  for (uint64_t o = 0; o < layout.outer; ++o) {
    for (uint64_t c = 0; c < layout.channels; ++c) {
      for (uint64_t done = 0; done < layout.inner;) {
        const uint64_t step = std::min(layout.inner - done, uint64_t{1} << 20);
        per_channel[c].merge(summarize_range(record.dtype, data, begin, begin + step));
        begin += step;
        done += step;
      }
    }
  }
  return dequantized_stats(record, per_channel);
}

}  // namespace qd
