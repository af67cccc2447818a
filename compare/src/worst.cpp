#include "qnn_debug/compare/worst.h"

#include <algorithm>
#include <cmath>

#include "kernel_dispatch.h"

namespace qd::compare {
namespace {

constexpr uint64_t kScanBlock = kErrorBlock;

// The ranking: larger error first, ties to the lower index. As the heap's comparator it puts
// the lowest-ranked kept element at the root, the one a better newcomer replaces.
bool ranks_before(const WorstElement& a, const WorstElement& b) {
  return a.abs_error > b.abs_error || (a.abs_error == b.abs_error && a.index < b.index);
}

// max |d - r| over a block; NaN pairs do not count (the comparison is false for NaN). Exact in
// any instruction set, so the AVX2 build of the same loop is chosen freely. The tag only makes
// a separate instantiation for each caller, so each is compiled for its caller's target.
template <int kTag, class R, class D>
inline double block_max_body(const R* r, const D* d, uint64_t count) {
  double best = 0;
#pragma omp simd reduction(max : best)
  for (uint64_t i = 0; i < count; ++i) {
    const double e = std::fabs(static_cast<double>(d[i]) - static_cast<double>(r[i]));
    best = e > best ? e : best;
  }
  return best;
}

template <class R, class D>
double block_max_baseline(const R* r, const D* d, uint64_t count) {
  return block_max_body<0>(r, d, count);
}

#if defined(__x86_64__)
template <class R, class D>
__attribute__((target("avx2"))) double block_max_avx2(const R* r, const D* d, uint64_t count) {
  return block_max_body<1>(r, d, count);
}
#endif

template <class R, class D>
double block_max(const R* r, const D* d, uint64_t count) {
#if defined(__x86_64__)
  if (kernels::active() == kernels::Isa::kAvx2) return block_max_avx2(r, d, count);
#endif
  return block_max_baseline(r, d, count);
}

}  // namespace

void WorstElements::offer(const WorstElement& element) {
  if (heap_.size() < capacity_) {
    heap_.push_back(element);
    std::push_heap(heap_.begin(), heap_.end(), ranks_before);
    return;
  }
  if (!ranks_before(element, heap_.front())) return;  // not better than the current last place
  std::pop_heap(heap_.begin(), heap_.end(), ranks_before);
  heap_.back() = element;
  std::push_heap(heap_.begin(), heap_.end(), ranks_before);
}

template <class R, class D>
void WorstElements::add(const R* r, const D* d, uint64_t count, uint64_t first,
                        const double* block_bounds) {
  if (capacity_ == 0) return;
  for (uint64_t start = 0; start < count; start += kScanBlock) {
    const uint64_t n = std::min(kScanBlock, count - start);
    if (block_bounds != nullptr && block_bounds[start / kScanBlock] < threshold()) continue;
    if (block_max(r + start, d + start, n) < threshold()) continue;
    for (uint64_t i = start; i < start + n; ++i) {
      const double e = std::fabs(static_cast<double>(d[i]) - static_cast<double>(r[i]));
      if (e >= threshold()) offer({first + i, double(r[i]), double(d[i]), e});  // false for NaN
    }
  }
}

void WorstElements::merge(const WorstElements& other) {
  for (const WorstElement& element : other.heap_) offer(element);
}

std::vector<WorstElement> WorstElements::sorted() const {
  std::vector<WorstElement> out = heap_;
  std::sort(out.begin(), out.end(), ranks_before);
  return out;
}

EvenSamples::EvenSamples(uint64_t elements, size_t capacity)
    : elements_(elements), count_(std::min<uint64_t>(capacity, elements)) {}

template <class R, class D>
void EvenSamples::add(const R* r, const D* d, uint64_t count, uint64_t first) {
  if (count_ == 0) return;
  // The first k whose index is at or after `first`: ceil(first * count_ / elements_).
  for (uint64_t k = (first * count_ + elements_ - 1) / elements_; k < count_; ++k) {
    const uint64_t index = index_of(k);
    if (index >= first + count) break;
    const double rv = static_cast<double>(r[index - first]);
    const double dv = static_cast<double>(d[index - first]);
    taken_.push_back({index, rv, dv, std::fabs(dv - rv)});
  }
}

void EvenSamples::merge(const EvenSamples& other) {
  taken_.insert(taken_.end(), other.taken_.begin(), other.taken_.end());
}

std::vector<WorstElement> EvenSamples::sorted() const {
  std::vector<WorstElement> out = taken_;
  std::sort(out.begin(), out.end(),
            [](const WorstElement& a, const WorstElement& b) { return a.index < b.index; });
  return out;
}

#define QD_BOTH_ADDS(R, D)                                                                 \
  template void WorstElements::add(const R*, const D*, uint64_t, uint64_t, const double*); \
  template void EvenSamples::add(const R*, const D*, uint64_t, uint64_t);
QD_BOTH_ADDS(float, float)
QD_BOTH_ADDS(float, double)
QD_BOTH_ADDS(float, Split)
QD_BOTH_ADDS(double, float)
QD_BOTH_ADDS(double, double)
QD_BOTH_ADDS(Split, float)
QD_BOTH_ADDS(Split, Split)
#undef QD_BOTH_ADDS

}  // namespace qd::compare
