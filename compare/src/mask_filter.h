// The metrics' side of masked positions (qnn_debug/compare/mask.h): a piece of decoded pairs is
// scanned for masked reference values, and only a piece that has some is copied with its masked
// pairs set to NaN on both sides, which every accumulator skips as it skips any non-finite pair;
// the accumulator then counts them as masked instead of NaN (MetricAccumulator::add_masked).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "qnn_debug/compare/mask.h"
#include "qnn_debug/compare/split.h"

namespace qd::compare {

class MaskFilter {
 public:
  explicit MaskFilter(MaskRule rule) : rule_(std::move(rule)) {}

  // Points r and d at copies of [r, r + count), [d, d + count) with the masked pairs set to NaN
  // (reference elements first .. first + count - 1), or leaves them be when none is masked.
  // Returns how many pairs were masked.
  template <class R, class D>
  uint64_t apply(const R*& r, const D*& d, uint64_t count, uint64_t first);

  const MaskRule& rule() const { return rule_; }

 private:
  template <class T>
  std::vector<T>& scratch(int side);

  MaskRule rule_;
  std::vector<float> float_scratch_[2];
  std::vector<Split> split_scratch_[2];
};

}  // namespace qd::compare
