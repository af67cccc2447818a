// The few largest errors of a pair, with where they are: what an engineer looks at first when a
// tensor diverges (one bad channel? a saturated corner? a single NaN?).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "qnn_debug/compare/split.h"

namespace qd::compare {

// Elements per block of the largest-error scan and of the metric float pass, so that the bounds
// the pass gives per block (MetricAccumulator::add) line up with the scan's blocks.
inline constexpr uint32_t kErrorBlock = 256;

struct WorstElement {
  uint64_t index = 0;  // flat index in reference order
  double reference = 0;
  double device = 0;
  double abs_error = 0;  // |device - reference|; +inf when one side is infinite
};

// Keeps the `capacity` pairs with the largest |d - r| (NaN pairs are skipped: they are counted
// separately), ties to the lower index. Blocks whose largest error cannot enter are skipped
// after one vectorizable pass, so steady-state cost is a max-reduction per element.
class WorstElements {
 public:
  explicit WorstElements(size_t capacity = 8) : capacity_(capacity) {}

  // Pairs r[i], d[i] are reference elements first + i; R and D as for MetricAccumulator::add. With
  // `block_bounds` (one per kErrorBlock elements, from MetricAccumulator::add over the same
  // pairs), a block whose bound is below the entry threshold is skipped without a pass.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first,
           const double* block_bounds = nullptr);

  // Folds in the elements kept from other pairs of the same tensors (another slice). The kept set
  // does not depend on the order: ties go to the lower index.
  void merge(const WorstElements& other);

  // Largest error first.
  std::vector<WorstElement> sorted() const;

 private:
  void offer(const WorstElement& element);
  // The error an element must exceed to enter (-1 while not full: any non-NaN error enters).
  double threshold() const { return heap_.size() < capacity_ ? -1.0 : heap_.front().abs_error; }

  size_t capacity_;
  std::vector<WorstElement> heap_;  // heap whose root is the lowest-ranked kept element
};

// An even sample of a pair's values, for a scatter plot of device against reference: the elements
// at flat indices floor(k * elements / n), k = 0 .. n - 1 (n = min(capacity, elements)). The set
// depends on the tensor's size alone, so chunks and slices may arrive in any order. Non-finite
// pairs are kept: they are part of the picture.
class EvenSamples {
 public:
  explicit EvenSamples(uint64_t elements = 0, size_t capacity = 24);

  // As WorstElements::add: r[i], d[i] are reference elements first + i.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first);
  // Folds in the samples another slice of the same pair took.
  void merge(const EvenSamples& other);
  // By rising index.
  std::vector<WorstElement> sorted() const;

 private:
  uint64_t index_of(uint64_t k) const { return k * elements_ / count_; }

  uint64_t elements_;
  uint64_t count_;
  std::vector<WorstElement> taken_;
};

}  // namespace qd::compare
