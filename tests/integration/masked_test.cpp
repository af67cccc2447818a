// Masked positions (compare/mask.h): pairs masked on both sides (the reference at -inf or its
// dtype's lowest, the device the same or at its encoding's lowest code) are counted apart and left
// out of every figure; a position masked on one side only is an error like any other.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "compare_testing.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"

namespace qd {
namespace {

using qd::testing::IsOk;

constexpr float kLowest = -std::numeric_limits<float>::max();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// Scores of 64 rows of 64, the upper triangle masked with `mask`; row r, column c unmasked is
// 0.25 (r - c) / 8.
std::vector<float> scores(float mask) {
  std::vector<float> v(64 * 64);
  for (size_t r = 0; r < 64; ++r) {
    for (size_t c = 0; c < 64; ++c) v[r * 64 + c] = c > r ? mask : 0.25f * float(r - c) / 8;
  }
  return v;
}

// Compares `ref` (float32) with `device` (float32, or int16 with scale `scale` when quantized).
template <class D>
compare::Metrics compare_pair(const std::vector<float>& ref, const std::vector<D>& device,
                              double scale = 0) {
  testing::TempDir dir;
  const std::string ref_path = dir.file("ref.h5"), device_path = dir.file("dev.h5");
  TensorRecord r;
  r.name = "scores";
  r.dtype = DType::kFloat32;
  r.dims = {ref.size()};
  TensorRecord d = r;
  if constexpr (std::is_same_v<D, int16_t>) {
    d.dtype = DType::kSFixed16;
    d.quant.scales = {scale};
    d.quant.offsets = {0};
  }
  {
    auto ref_store = StoreWriter::create(ref_path, {}).value();
    EXPECT_THAT(ref_store->append_tensor(r, bytes_of(ref), 0), IsOk());
    EXPECT_THAT(ref_store->close(), IsOk());
    auto device_store = StoreWriter::create(device_path, {}).value();
    EXPECT_THAT(device_store->append_tensor(d, bytes_of(device), 0), IsOk());
    EXPECT_THAT(device_store->close(), IsOk());
  }
  auto ref_store = StoreReader::open(ref_path).value();
  auto device_store = StoreReader::open(device_path).value();
  const TensorEntry rt = testing::all_tensors(*ref_store).at(0);
  const TensorEntry dt = testing::all_tensors(*device_store).at(0);
  auto m = compare::compare_tensors(*ref_store, rt, *device_store, dt,
                                    compare::plan_layout(rt, dt).value(), {});
  EXPECT_THAT(m, IsOk());
  return m.is_ok() ? *m : compare::Metrics{};
}

constexpr uint64_t kMaskedCount = 64 * 63 / 2;

TEST(MaskedPositions, InfAndLowestOnBothSidesAreCountedApartAndLeftOut) {
  for (const float mask : {-kInf, kLowest}) {
    const std::vector<float> ref = scores(mask);
    std::vector<float> device = scores(mask == kLowest ? -kInf : kLowest);  // either way masked
    device[1 * 64 + 0] += 0.5f;  // one error of 0.5 where both hold a score
    const compare::Metrics m = compare_pair(ref, device);
    EXPECT_EQ(m.masked, kMaskedCount) << mask;
    EXPECT_EQ(m.n, 64 * 64 - kMaskedCount);
    EXPECT_EQ(m.ref_inf + m.dev_inf + m.ref_nan + m.dev_nan, 0u);
    EXPECT_DOUBLE_EQ(m.max_abs, 0.5);
    EXPECT_EQ(m.max_abs_index, 64u);
    // Signal: sum over r >= c of (0.25 (r - c) / 8)^2 = (1/1024) sum_k (64 - k) k^2, k < 64.
    double signal = 0;
    for (int k = 0; k < 64; ++k) signal += (64.0 - k) * k * k / 1024;
    const double e = double(0.25f / 8 + 0.5f) - 0.25 / 8;
    EXPECT_NEAR(m.sqnr_db, 10 * std::log10(signal / (e * e)), 1e-9);
    EXPECT_FALSE(compare::no_evidence(m));
  }
}

TEST(MaskedPositions, AQuantizedDeviceMasksAtItsLowestCode) {
  const double scale = 1.0 / 4096;
  const std::vector<float> ref = scores(kLowest);
  std::vector<int16_t> device(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    device[i] =
        ref[i] == kLowest ? int16_t{-32768} : static_cast<int16_t>(std::nearbyint(ref[i] / scale));
  }
  const compare::Metrics m = compare_pair(ref, device, scale);
  EXPECT_EQ(m.masked, kMaskedCount);
  EXPECT_EQ(m.saturated_low, 0u) << "the mask is not clipping";
  EXPECT_DOUBLE_EQ(m.saturation.value_or(-1), 0.0);
  EXPECT_GT(m.sqnr_db, 60) << "the scores are on the grid to half a step";
  ASSERT_TRUE(m.lsb_max.has_value());
  EXPECT_LE(*m.lsb_max, 0.5);
  ASSERT_TRUE(m.ideal_sqnr_db.has_value());
  EXPECT_GT(*m.ideal_sqnr_db, 60) << "the masked positions are out of the ideal figure too";
}

TEST(MaskedPositions, AMaskOnOneSideOnlyIsAnError) {
  const std::vector<float> ref = scores(kLowest);
  std::vector<float> device = ref;
  device[0 * 64 + 5] = 0.0f;     // a leak: the device scores a masked position
  device[3 * 64 + 1] = kLowest;  // and masks a scored one
  const compare::Metrics m = compare_pair(ref, device);
  EXPECT_EQ(m.masked, kMaskedCount - 1);
  EXPECT_EQ(m.n, 64 * 64 - kMaskedCount + 1);
  EXPECT_GT(m.max_abs, 3e38) << "the leak is the largest error";
  EXPECT_LT(m.sqnr_db, 0);
}

TEST(MaskedPositions, EveryPairMaskedIsNotALackOfEvidence) {
  const std::vector<float> ref(16, -kInf), device(16, kLowest);
  const compare::Metrics m = compare_pair(ref, device);
  EXPECT_EQ(m.masked, 16u);
  EXPECT_EQ(m.n, 0u);
  EXPECT_FALSE(compare::no_evidence(m));
}

}  // namespace
}  // namespace qd
