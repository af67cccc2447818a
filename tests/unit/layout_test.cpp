#include "qnn_debug/compare/layout.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/text.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::compare {
namespace {

TensorEntry tensor(const std::string& name, std::vector<uint64_t> dims,
                   std::vector<uint8_t> axis_order = {}) {
  TensorEntry entry;
  entry.name = name;
  entry.dims = std::move(dims);
  entry.axis_order = std::move(axis_order);
  return entry;
}

using testing::contains;

using Order = std::vector<uint8_t>;

TEST(PlanLayout, StoredNhwcToNchw) {
  const TensorEntry ref = tensor("conv", {1, 3, 4, 5});
  const TensorEntry dev = tensor("conv_nhwc", {1, 4, 5, 3}, {0, 3, 1, 2});
  auto plan = plan_layout(ref, dev);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->axis_order, (Order{0, 3, 1, 2}));
  EXPECT_FALSE(plan->inferred);
  EXPECT_FALSE(plan->reshaped);
}

// A reference may itself be stored NHWC with its axis order (a store compared with itself, or an
// NHWC CPU reference): orders are then taken relative to the reference's stored axes.
TEST(PlanLayout, BothSidesStoredNhwcNeedNoPermutation) {
  const TensorEntry ref = tensor("conv", {1, 4, 5, 3}, {0, 3, 1, 2});
  auto plan = plan_layout(ref, tensor("conv_dev", {1, 4, 5, 3}, {0, 3, 1, 2}));
  ASSERT_THAT(plan, IsOk());
  EXPECT_TRUE(plan->axis_order.empty());
  plan = plan_layout(ref, tensor("conv_dev", {1, 4, 5, 3}));  // same bytes, order not recorded
  ASSERT_THAT(plan, IsOk());
  EXPECT_TRUE(plan->axis_order.empty());
}

TEST(PlanLayout, NhwcReferenceAgainstALogicalNchwDevice) {
  const TensorEntry ref = tensor("conv", {1, 4, 5, 3}, {0, 3, 1, 2});  // stored N,H,W,C
  auto plan = plan_layout(ref, tensor("conv_dev", {1, 3, 4, 5}));      // stored N,C,H,W
  ASSERT_THAT(plan, IsOk());
  // Reference stored axes N,H,W,C are device axes 0, 2, 3, 1.
  EXPECT_EQ(plan->axis_order, (Order{0, 2, 3, 1}));
  EXPECT_FALSE(plan->inferred);
}

TEST(PlanLayout, StoredOrderThatDoesNotFitIsAMismatch) {
  const TensorEntry ref = tensor("conv", {1, 3, 4, 5});
  const TensorEntry dev = tensor("conv_dev", {1, 4, 5, 3}, {0, 2, 3, 1});
  auto plan = plan_layout(ref, dev);
  ASSERT_THAT(plan, StatusIs(ErrorCode::kInvalidArgument));
  const std::string& message = plan.status().message();
  EXPECT_TRUE(contains(message,
                       "shape mismatch: reference 'conv' [1,3,4,5] vs device "
                       "'conv_dev' [1,4,5,3]"))
      << message;
  EXPECT_TRUE(contains(message, "after the stored axis order 0,2,3,1: [1,5,3,4]")) << message;
}

TEST(PlanLayout, StoredOrderMustBeAPermutation) {
  const TensorEntry ref = tensor("a", {2, 3});
  auto plan = plan_layout(ref, tensor("b", {3, 2}, {1, 1}));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_TRUE(contains(plan.status().message(), "not a permutation")) << plan.status().message();
  EXPECT_FALSE(plan_layout(ref, tensor("b", {3, 2}, {0, 1, 2})).is_ok());
}

TEST(PlanLayout, StoredIdentityOrderIsIdentity) {
  auto plan = plan_layout(tensor("a", {2, 3}), tensor("b", {2, 3}, {0, 1}));
  ASSERT_THAT(plan, IsOk());
  EXPECT_TRUE(plan->axis_order.empty());
  EXPECT_FALSE(plan->inferred);
}

TEST(PlanLayout, EqualDimsAreIdentity) {
  auto plan = plan_layout(tensor("a", {1, 8, 8, 8}), tensor("b", {1, 8, 8, 8}));
  ASSERT_THAT(plan, IsOk());
  EXPECT_TRUE(plan->axis_order.empty());
  EXPECT_FALSE(plan->inferred);
  EXPECT_FALSE(plan->reshaped);
  auto scalar = plan_layout(tensor("a", {}), tensor("b", {}));
  ASSERT_THAT(scalar, IsOk());
}

TEST(PlanLayout, InfersAUniquePermutation) {
  auto plan = plan_layout(tensor("a", {1, 3, 4, 5}), tensor("b", {1, 4, 5, 3}));
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->axis_order, (Order{0, 3, 1, 2}));
  EXPECT_TRUE(plan->inferred);
  EXPECT_FALSE(plan->reshaped);

  // Several size-1 axes do not make it ambiguous: where they go does not move any element.
  auto ones = plan_layout(tensor("a", {1, 1, 3, 5}), tensor("b", {1, 5, 1, 3}));
  ASSERT_THAT(ones, IsOk());
  EXPECT_EQ(ones->axis_order, (Order{0, 2, 3, 1}));
  EXPECT_TRUE(ones->inferred);
}

TEST(PlanLayout, AmbiguousPermutationIsAnError) {
  auto plan = plan_layout(tensor("a", {1, 8, 8, 3}), tensor("b", {1, 3, 8, 8}));
  ASSERT_THAT(plan, StatusIs(ErrorCode::kInvalidArgument));
  const std::string& message = plan.status().message();
  EXPECT_TRUE(contains(message,
                       "ambiguous permutation: reference 'a' [1,8,8,3] vs device 'b' "
                       "[1,3,8,8]: 2 axis orders fit ({0,2,3,1}, {0,3,2,1})"))
      << message;

  auto many = plan_layout(tensor("a", {4, 4, 4, 4, 4, 9}), tensor("b", {9, 4, 4, 4, 4, 4}));
  ASSERT_FALSE(many.is_ok());
  EXPECT_TRUE(contains(many.status().message(), "120 axis orders fit")) << many.status().message();
  EXPECT_TRUE(contains(many.status().message(), "... (120 in all)")) << many.status().message();
}

TEST(PlanLayout, IrreconcilableShapesAreMismatches) {
  auto plan = plan_layout(tensor("a", {1, 3, 4, 5}), tensor("b", {1, 3, 4, 6}));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(plan.status().message(),
            "shape mismatch: reference 'a' [1,3,4,5] vs device 'b' [1,3,4,6]");

  // Same element count, but a real reshape: refused, never guessed.
  auto reshape = plan_layout(tensor("a", {1, 256}), tensor("b", {1, 4, 8, 8}));
  ASSERT_FALSE(reshape.is_ok());
  EXPECT_TRUE(contains(reshape.status().message(), "shape mismatch")) << reshape.status().message();
  EXPECT_TRUE(contains(reshape.status().message(), "same element count"));

  // Never broadcast.
  EXPECT_FALSE(plan_layout(tensor("a", {4, 5}), tensor("b", {1, 5})).is_ok());
  EXPECT_FALSE(plan_layout(tensor("a", {4, 5}), tensor("b", {5})).is_ok());
  // Same rank, different multiset.
  EXPECT_FALSE(plan_layout(tensor("a", {2, 3}), tensor("b", {3, 3})).is_ok());
}

TEST(PlanLayout, SqueezeOnlyReshapeIsAccepted) {
  for (const auto& [r, d] : std::vector<std::pair<std::vector<uint64_t>, std::vector<uint64_t>>>{
           {{1, 256}, {1, 256, 1, 1}},
           {{256}, {1, 256}},
           {{1, 1, 4, 5}, {1, 4, 1, 5}},  // only size-1 axes move: no inferred layout flag
           {{}, {1, 1}}}) {
    auto plan = plan_layout(tensor("a", r), tensor("b", d));
    ASSERT_THAT(plan, IsOk()) << format_dims(r);
    EXPECT_TRUE(plan->reshaped) << format_dims(r);
    EXPECT_FALSE(plan->inferred);
    EXPECT_TRUE(plan->axis_order.empty());
  }
  // After a stored order, too: NHWC [1,1,1,256] -> [1,256,1,1] ~ [1,256].
  auto stored = plan_layout(tensor("a", {1, 256}), tensor("b", {1, 1, 1, 256}, {0, 3, 1, 2}));
  ASSERT_THAT(stored, IsOk());
  EXPECT_TRUE(stored->reshaped);
  EXPECT_EQ(stored->axis_order, (Order{0, 3, 1, 2}));
}

TEST(PlanLayout, RankAboveTheStoreLimitIsRefused) {
  auto plan = plan_layout(tensor("a", std::vector<uint64_t>(9, 2)), tensor("b", {512}));
  ASSERT_FALSE(plan.is_ok());
  EXPECT_TRUE(contains(plan.status().message(), "rank above 8"));
}

// ---- Permuter ------------------------------------------------------------------------------

// Device flat index of every reference flat index, by full index arithmetic.
std::vector<uint64_t> naive_map(const std::vector<uint64_t>& device_dims, const Order& order) {
  const size_t rank = device_dims.size();
  std::vector<uint64_t> ref_dims(rank);
  for (size_t i = 0; i < rank; ++i) ref_dims[i] = device_dims[order[i]];
  uint64_t count = 1;
  for (uint64_t dim : device_dims) count *= dim;
  std::vector<uint64_t> result(count);
  for (uint64_t f = 0; f < count; ++f) {
    std::vector<uint64_t> ref_coord(rank);
    uint64_t rest = f;
    for (size_t i = rank; i-- > 0;) {
      ref_coord[i] = rest % ref_dims[i];
      rest /= ref_dims[i];
    }
    std::vector<uint64_t> dev_coord(rank);
    for (size_t i = 0; i < rank; ++i) dev_coord[order[i]] = ref_coord[i];
    uint64_t index = 0;
    for (size_t j = 0; j < rank; ++j) index = index * device_dims[j] + dev_coord[j];
    result[f] = index;
  }
  return result;
}

TEST(Permuter, MatchesNaiveTransposeForRandomShapes) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t rank = 1 + rng() % 6;
    std::vector<uint64_t> dims(rank);
    for (auto& dim : dims) dim = 1 + rng() % 5;
    Order order;
    for (size_t i = 0; i < rank; ++i) order.push_back(static_cast<uint8_t>(i));
    std::shuffle(order.begin(), order.end(), rng);
    LayoutPlan plan;
    plan.axis_order = order;
    auto permuter = Permuter::create(plan, dims);
    ASSERT_THAT(permuter, IsOk());
    const std::vector<uint64_t> expected = naive_map(dims, order);
    ASSERT_EQ(permuter->element_count(), expected.size());

    std::vector<uint64_t> whole;
    ASSERT_THAT(permuter->map(0, expected.size(), &whole), IsOk());
    ASSERT_EQ(whole, expected) << "trial " << trial << " dims " << format_dims(dims);

    // Random chunks, starting anywhere.
    for (int chunk = 0; chunk < 10; ++chunk) {
      const uint64_t first = rng() % (expected.size() + 1);
      const uint64_t count = rng() % (expected.size() - first + 1);
      std::vector<uint64_t> part;
      ASSERT_THAT(permuter->map(first, count, &part), IsOk());
      ASSERT_TRUE(std::equal(part.begin(), part.end(), expected.begin() + first))
          << "trial " << trial << " first " << first << " count " << count;
    }
  }
}

TEST(Permuter, GathersTheReferenceLayout) {
  // NHWC device data gathered through the plan equals the NCHW reference data.
  const std::vector<uint64_t> nchw = {2, 3, 4, 5};
  const std::vector<uint64_t> nhwc = {2, 4, 5, 3};
  std::vector<float> reference(120);
  std::iota(reference.begin(), reference.end(), 0.0f);
  std::vector<float> device(120);
  for (uint64_t n = 0; n < 2; ++n)
    for (uint64_t c = 0; c < 3; ++c)
      for (uint64_t h = 0; h < 4; ++h)
        for (uint64_t w = 0; w < 5; ++w)
          device[((n * 4 + h) * 5 + w) * 3 + c] = reference[((n * 3 + c) * 4 + h) * 5 + w];
  auto plan = plan_layout(tensor("r", nchw), tensor("d", nhwc, {0, 3, 1, 2}));
  ASSERT_THAT(plan, IsOk());
  auto permuter = Permuter::create(*plan, nhwc);
  ASSERT_THAT(permuter, IsOk());
  EXPECT_FALSE(permuter->is_identity());
  std::vector<uint64_t> index;
  ASSERT_THAT(permuter->map(0, 120, &index), IsOk());
  for (size_t k = 0; k < 120; ++k) ASSERT_EQ(device[index[k]], reference[k]) << k;
}

TEST(Permuter, IdentityAndReshapedPlansNeedNoGather) {
  LayoutPlan identity;
  auto a = Permuter::create(identity, {2, 3, 4});
  ASSERT_THAT(a, IsOk());
  EXPECT_TRUE(a->is_identity());
  std::vector<uint64_t> out;
  ASSERT_THAT(a->map(5, 7, &out), IsOk());
  EXPECT_EQ(out, (std::vector<uint64_t>{5, 6, 7, 8, 9, 10, 11}));

  // A permutation that only moves size-1 axes is the identity too.
  LayoutPlan ones;
  ones.axis_order = {1, 0, 2};
  auto b = Permuter::create(ones, {1, 6, 1});
  ASSERT_THAT(b, IsOk());
  EXPECT_TRUE(b->is_identity());

  auto scalar = Permuter::create(identity, {});
  ASSERT_THAT(scalar, IsOk());
  EXPECT_EQ(scalar->element_count(), 1u);
  ASSERT_THAT(scalar->map(0, 1, &out), IsOk());
  EXPECT_EQ(out, (std::vector<uint64_t>{0}));
}

TEST(Permuter, RangeAndPlanErrors) {
  LayoutPlan plan;
  plan.axis_order = {1, 0};
  auto permuter = Permuter::create(plan, {3, 4});
  ASSERT_THAT(permuter, IsOk());
  std::vector<uint64_t> out;
  EXPECT_THAT(permuter->map(12, 0, &out), IsOk());
  EXPECT_FALSE(permuter->map(10, 3, &out).is_ok());
  EXPECT_FALSE(permuter->map(13, 0, &out).is_ok());
  EXPECT_FALSE(permuter->map(1, UINT64_MAX, &out).is_ok());

  EXPECT_FALSE(Permuter::create(plan, {3, 4, 5}).is_ok());
  plan.axis_order = {0, 0};
  EXPECT_FALSE(Permuter::create(plan, {3, 4}).is_ok());

  LayoutPlan empty;
  auto zero = Permuter::create(empty, {3, 0, 2});
  ASSERT_THAT(zero, IsOk());
  EXPECT_EQ(zero->element_count(), 0u);
  EXPECT_THAT(zero->map(0, 0, &out), IsOk());
}

}  // namespace
}  // namespace qd::compare
