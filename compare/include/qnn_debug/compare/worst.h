// The few largest errors of a pair, with where they are: what an engineer looks at first when a
// tensor diverges (one bad channel? a saturated corner? a single NaN?).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qd::compare {

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

  // Pairs r[i], d[i] are reference elements first + i; R and D are float or double.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first);

  // Largest error first.
  std::vector<WorstElement> sorted() const;

 private:
  void offer(const WorstElement& element);
  // The error an element must exceed to enter (-1 while not full: any non-NaN error enters).
  double threshold() const { return heap_.size() < capacity_ ? -1.0 : heap_.front().abs_error; }

  size_t capacity_;
  std::vector<WorstElement> heap_;  // heap whose root is the lowest-ranked kept element
};

}  // namespace qd::compare
