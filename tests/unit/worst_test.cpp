#include "qnn_debug/compare/worst.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace qd::compare {
namespace {

// Brute force: every non-NaN pair ranked by |d - r| (double), larger first, ties to lower index.
std::vector<uint64_t> expected_indices(const std::vector<double>& r, const std::vector<double>& d,
                                       size_t k) {
  std::vector<uint64_t> order;
  for (uint64_t i = 0; i < r.size(); ++i) {
    if (!std::isnan(std::fabs(d[i] - r[i]))) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return std::fabs(d[a] - r[a]) > std::fabs(d[b] - r[b]);
  });
  order.resize(std::min(k, order.size()));
  return order;
}

std::vector<uint64_t> indices(const std::vector<WorstElement>& worst) {
  std::vector<uint64_t> out;
  for (const WorstElement& w : worst) out.push_back(w.index);
  return out;
}

TEST(WorstElements, KeepsTheLargestErrorsInChunksOfAnySize) {
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> r(10'000), d(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = noise(rng);
    d[i] = r[i] + 0.01 * noise(rng) * static_cast<double>(1 + i % 97);
  }
  d[1234] = std::numeric_limits<double>::quiet_NaN();  // skipped
  d[4321] = r[4321] + 1e6;                             // the largest
  for (uint64_t chunk : {1u, 7u, 64u, 1000u, 10'000u}) {
    WorstElements worst(8);
    for (uint64_t first = 0; first < r.size(); first += chunk) {
      const uint64_t n = std::min<uint64_t>(chunk, r.size() - first);
      worst.add(r.data() + first, d.data() + first, n, first);
    }
    const auto got = worst.sorted();
    EXPECT_EQ(indices(got), expected_indices(r, d, 8)) << "chunk " << chunk;
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got[0].index, 4321u);
    EXPECT_EQ(got[0].reference, r[4321]);
    EXPECT_EQ(got[0].device, d[4321]);
    EXPECT_EQ(got[0].abs_error, std::fabs(d[4321] - r[4321]));
  }
}

TEST(WorstElements, TiesGoToTheLowerIndexAndInfinityRanksFirst) {
  std::vector<double> r(200, 1.0), d(200, 1.5);  // every |e| is 0.5
  d[150] = std::numeric_limits<double>::infinity();
  WorstElements worst(4);
  worst.add(r.data(), d.data(), r.size(), 1000);
  EXPECT_EQ(indices(worst.sorted()), (std::vector<uint64_t>{1150, 1000, 1001, 1002}));
}

TEST(WorstElements, FewerPairsThanCapacityAndAllNaN) {
  const std::vector<double> r = {1, 2, 3}, d = {1, 2.5, std::nan("")};
  WorstElements worst(8);
  worst.add(r.data(), d.data(), r.size(), 0);
  EXPECT_EQ(indices(worst.sorted()), (std::vector<uint64_t>{1, 0}));
  WorstElements none(0);
  none.add(r.data(), d.data(), r.size(), 0);
  EXPECT_TRUE(none.sorted().empty());
}

// The sample is the same set of elements, floor(k * n / 24), however the pairs arrive: in chunks
// of any size, in any order, or split between two samplers that are merged.
TEST(EvenSamples, TakesEvenlySpacedElementsWhateverTheChunks) {
  std::vector<double> r(1000), d(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    r[i] = static_cast<double>(i);
    d[i] = static_cast<double>(i) + 0.5;
  }
  d[500] = std::numeric_limits<double>::quiet_NaN();  // kept: a scatter shows what is there
  std::vector<uint64_t> expected;
  for (uint64_t k = 0; k < 24; ++k) expected.push_back(k * 1000 / 24);
  for (uint64_t chunk : {1u, 7u, 41u, 1000u}) {
    EvenSamples forward(r.size(), 24), backward(r.size(), 24), second(r.size(), 24);
    for (uint64_t first = 0; first < r.size(); first += chunk) {
      const uint64_t n = std::min<uint64_t>(chunk, r.size() - first);
      forward.add(r.data() + first, d.data() + first, n, first);
      (first < 500 ? backward : second).add(r.data() + first, d.data() + first, n, first);
    }
    backward.merge(second);
    EXPECT_EQ(indices(forward.sorted()), expected) << "chunk " << chunk;
    EXPECT_EQ(indices(backward.sorted()), expected) << "chunk " << chunk;
  }
  EvenSamples all(r.size(), 24);
  all.add(r.data(), d.data(), r.size(), 0);
  const auto got = all.sorted();
  ASSERT_EQ(got.size(), 24u);
  EXPECT_EQ(got[1].reference, 41.0);  // floor(1000 / 24)
  EXPECT_EQ(got[1].device, 41.5);
  EXPECT_EQ(got[1].abs_error, 0.5);
  EXPECT_EQ(got[12].index, 500u);
  EXPECT_TRUE(std::isnan(got[12].device));
}

TEST(EvenSamples, FewerElementsThanSamplesTakesEach) {
  const std::vector<double> r = {1, 2, 3}, d = {1, 2.5, 3};
  EvenSamples few(r.size(), 24);
  few.add(r.data(), d.data(), r.size(), 0);
  EXPECT_EQ(indices(few.sorted()), (std::vector<uint64_t>{0, 1, 2}));
  EvenSamples none(0, 24);
  none.add(r.data(), d.data(), 0, 0);
  EXPECT_TRUE(none.sorted().empty());
}

}  // namespace
}  // namespace qd::compare
