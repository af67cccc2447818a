// KV-cache tensors across decode steps (docs/metrics.md, "KV cache"): recognised by name,
// measured per position, and tracked run by run, so the report says which positions of the cache
// differ and from which step.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::TempDir;

TEST(KvCacheNames, AreRecognisedWhereverTheMarkIs) {
  for (const char* name : {"layers.1.attn.k_cache", "V_CACHE_3", "past_key_values.0.key",
                           "model/layer_2/kv_cache:0", "present_value.5", "cache_k"}) {
    EXPECT_TRUE(compare::is_kv_cache(name)) << name;
  }
  for (const char* name : {"layers.1.attn.scores", "k_proj", "cached_norm", "value"}) {
    EXPECT_FALSE(compare::is_kv_cache(name)) << name;
  }
}

TEST(KvCachePositions, AreTheLongestAxisAfterTheBatch) {
  EXPECT_EQ(compare::kv_position_axis({1, 8, 128, 64}), 2u);  // [B, H, S, D]
  EXPECT_EQ(compare::kv_position_axis({1, 128, 8, 64}), 1u);  // [B, S, H, D]
  EXPECT_EQ(compare::kv_position_axis({1, 8, 64, 128}), 3u);  // keys [B, H, D, S]
  EXPECT_EQ(compare::kv_position_axis({256, 64}), 0u);        // [S, D]
  EXPECT_EQ(compare::kv_position_axis({64}), std::nullopt);
}

constexpr uint32_t kSteps = 12;
constexpr uint64_t kHeads = 2, kPositions = 24, kHeadDim = 4;
constexpr uint32_t kFaultFrom = 7;      // the step where the device's cache goes wrong
constexpr uint64_t kFaultPosition = 9;  // from this position on

// The cache after `step`: positions 0 .. step + 4 written (a prefill of 5), the rest zero; the
// device's also carries a wrong value at kFaultPosition and beyond from kFaultFrom on.
std::vector<float> cache(uint32_t step, bool device) {
  std::vector<float> values(kHeads * kPositions * kHeadDim, 0.0f);
  for (uint64_t h = 0; h < kHeads; ++h) {
    for (uint64_t p = 0; p <= step + 4 && p < kPositions; ++p) {
      for (uint64_t d = 0; d < kHeadDim; ++d) {
        const double x = std::sin(0.7 * double(p) + 0.3 * double(d) + double(h));
        double v = x + (device ? 1e-6 * std::cos(5 * x) : 0);
        if (device && step >= kFaultFrom && p >= kFaultPosition) v += 0.8;
        values[(h * kPositions + p) * kHeadDim + d] = static_cast<float>(v);
      }
    }
  }
  return values;
}

Status write_decode(const std::string& path, bool device) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"kv-test", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  for (uint32_t step = 0; step < kSteps; ++step) {
    QD_RETURN_IF_ERROR(store->begin_run("step" + std::to_string(step), step).status());
    const std::vector<float> values = cache(step, device);
    TensorRecord record;
    record.name = "layers.0.attn.k_cache";
    record.handles = {1};
    record.dims = {1, kHeads, kPositions, kHeadDim};
    QD_RETURN_IF_ERROR(store->append_tensor(
        record,
        std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)),
        step));
    QD_RETURN_IF_ERROR(store->end_run(step, 0));
  }
  return store->close();
}

TEST(KvCacheTrack, NamesThePositionsThatDifferAndTheStepTheyStart) {
  TempDir dir;
  ASSERT_TRUE(write_decode(dir.file("ref.h5"), false).is_ok());
  ASSERT_TRUE(write_decode(dir.file("dev.h5"), true).is_ok());
  pipeline::DiffRequest request;
  request.reference.path = dir.file("ref.h5");
  request.devices = {{dir.file("dev.h5"), {}, {}, {}}};
  request.jobs = 1;
  const Result<report::Report> report = pipeline::run_diff(request);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_EQ(report->ending.kv_cache.size(), 1u);
  const report::KvCacheTrack& track = report->ending.kv_cache.front();
  EXPECT_EQ(track.tensor, "layers.0.attn.k_cache");
  EXPECT_EQ(track.axis, 2u);
  EXPECT_EQ(track.positions, kPositions);
  EXPECT_EQ(track.runs, kSteps);
  ASSERT_EQ(track.steps.size(), kSteps - kFaultFrom);
  EXPECT_EQ(track.steps.front().device_run, kFaultFrom);
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(track.steps.front().differing, (Ranges{{kFaultPosition, kFaultFrom + 4}}));
  EXPECT_EQ(track.steps.back().differing, (Ranges{{kFaultPosition, kSteps - 1 + 4}}));

  const std::string summary = report::render_summary(*report, 5, false);
  EXPECT_NE(summary.find("kv cache layers.0.attn.k_cache (24 positions on axis 2, 12 runs): "
                         "positions 9-11 first differ in run 7; in run 11: 9-15\n"),
            std::string::npos)
      << summary;
  const json doc = json::parse(report::report_text(*report));
  EXPECT_EQ(doc["kv_cache"][0]["steps"][0]["differing"], json::parse("[[9, 11]]"));
  const Result<report::Report> again = report::parse_report(doc.dump(), "kv.json");
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(report::report_text(*again), report::report_text(*report));
}

}  // namespace
}  // namespace qd
