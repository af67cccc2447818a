// What the device's own encoding allows a pair: the reference quantized with that encoding, an
// ideal integer kernel's output, against the reference itself (docs/metrics.md, "What the
// encoding allows"). Accumulated beside the metrics in the same pass over the decoded values.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/split.h"
#include "qnn_debug/etdump/store.h"

namespace qd::compare {

class IdealNoise {
 public:
  // `device`: the device tensor (its encoding and raw range); `channels`: each reference element's
  // channel of a per-axis encoding (the pair's channel view). Inactive for a device tensor without
  // an encoding, or a per-axis one whose channels the view does not give.
  IdealNoise(const TensorRecord& device, ChannelMap channels);

  bool active() const { return !scales_.empty(); }
  // Pairs r[i], d[i] are reference elements first + i, as for MetricAccumulator::add; only the
  // pairs finite on both sides count, as for the metrics.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first);
  void merge(const IdealNoise& other);
  // 10 log10(sum r^2 / sum (Q(r) - r)^2): +inf when the reference is on the grid, nullopt when
  // inactive or no pair was finite.
  std::optional<double> sqnr_db() const;

 private:
  std::vector<double> scales_, offsets_;  // QNN convention: real = (q + offset) * scale
  double raw_min_ = 0, raw_max_ = 0;
  ChannelMap channels_;
  double signal_ = 0, noise_ = 0;
  uint64_t n_ = 0;
};

}  // namespace qd::compare
