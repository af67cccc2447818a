// KV-cache tensors across decode steps (docs/metrics.md, "KV cache"): recognised by name,
// measured per position, and tracked run by run, so the report says which positions of the cache
// differ and from which step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

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

// Layer 0's key cache of one step, float32 values of `dims`.
Status append_cache(StoreWriter& store, std::vector<uint64_t> dims,
                    const std::vector<float>& values, uint32_t step) {
  TensorRecord record;
  record.name = "layers.0.attn.k_cache";
  record.handles = {1};
  record.dims = std::move(dims);
  return store.append_tensor(
      record,
      std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)),
      step);
}

Status write_decode(const std::string& path, bool device) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"kv-test", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  for (uint32_t step = 0; step < kSteps; ++step) {
    QD_RETURN_IF_ERROR(store->begin_run("step" + std::to_string(step), step).status());
    const std::vector<float> values = cache(step, device);
    QD_RETURN_IF_ERROR(append_cache(*store, {1, kHeads, kPositions, kHeadDim}, values, step));
    QD_RETURN_IF_ERROR(store->end_run(step, 0));
  }
  return store->close();
}

// diff ref.h5 dev.h5 of `dir`, on one thread.
Result<report::Report> diff_in(const TempDir& dir) {
  pipeline::DiffRequest request;
  request.reference.path = dir.file("ref.h5");
  request.devices = {{dir.file("dev.h5"), {}, {}, {}}};
  request.jobs = 1;
  return pipeline::run_diff(request);
}

TEST(KvCacheTrack, NamesThePositionsThatDifferAndTheStepTheyStart) {
  TempDir dir;
  ASSERT_THAT(write_decode(dir.file("ref.h5"), false), IsOk());
  ASSERT_THAT(write_decode(dir.file("dev.h5"), true), IsOk());
  const Result<report::Report> report = diff_in(dir);
  ASSERT_THAT(report, IsOk());
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
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(report::report_text(*again), report::report_text(*report));
}

// A grouped-query cache (8 KV heads for 16 query heads, so the cache's own shape says 8), laid out
// [B, H, S, D] or [B, S, H, D]: one head goes wrong from one step on, at the positions written
// from then; the other heads stay right. The report names that head, its positions and the step.
constexpr uint64_t kKvHeads = 8, kCachePositions = 48, kDim = 16;
constexpr uint64_t kBrokenHead = 3;
constexpr uint32_t kGqaSteps = 10, kHeadFaultFrom = 6;

Status write_gqa_decode(const std::string& path, bool device, bool heads_first) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"kv-test", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  for (uint32_t step = 0; step < kGqaSteps; ++step) {
    QD_RETURN_IF_ERROR(store->begin_run("step" + std::to_string(step), step).status());
    std::vector<float> values(kKvHeads * kCachePositions * kDim, 0.0f);
    const uint64_t written = 17 + step;  // a prefill of 16, then one position a step
    for (uint64_t h = 0; h < kKvHeads; ++h) {
      for (uint64_t p = 0; p < written; ++p) {
        for (uint64_t d = 0; d < kDim; ++d) {
          double v = std::sin(0.37 * double(p) + 0.11 * double(d) + 0.5 * double(h));
          if (device) v += 1e-6 * std::cos(3.0 * v);
          const bool broken = device && h == kBrokenHead && p >= 16 + kHeadFaultFrom;
          if (broken) v = -v;  // a rotation by the wrong position, say
          const uint64_t at =
              heads_first ? (h * kCachePositions + p) * kDim + d : (p * kKvHeads + h) * kDim + d;
          values[at] = static_cast<float>(v);
        }
      }
    }
    QD_RETURN_IF_ERROR(append_cache(*store,
                                    heads_first
                                        ? std::vector<uint64_t>{1, kKvHeads, kCachePositions, kDim}
                                        : std::vector<uint64_t>{1, kCachePositions, kKvHeads, kDim},
                                    values, step));
    QD_RETURN_IF_ERROR(store->end_run(step, 0));
  }
  return store->close();
}

class GqaCache : public ::testing::TestWithParam<bool> {};

TEST_P(GqaCache, NamesTheHeadAndPositionsThatDifferAndTheirStep) {
  const bool heads_first = GetParam();
  TempDir dir;
  ASSERT_THAT(write_gqa_decode(dir.file("ref.h5"), false, heads_first), IsOk());
  ASSERT_THAT(write_gqa_decode(dir.file("dev.h5"), true, heads_first), IsOk());
  const Result<report::Report> report = diff_in(dir);
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->ending.kv_cache.size(), 1u);
  const report::KvCacheTrack& track = report->ending.kv_cache.front();
  EXPECT_EQ(track.heads, kKvHeads);
  EXPECT_EQ(track.axis, heads_first ? 2u : 1u);
  EXPECT_EQ(track.positions, kCachePositions);
  ASSERT_EQ(track.steps.size(), kGqaSteps - kHeadFaultFrom);
  using Cells = std::vector<compare::KvCells::Range>;
  const uint64_t first = 16 + kHeadFaultFrom;
  EXPECT_EQ(track.steps.front().device_run, kHeadFaultFrom);
  EXPECT_EQ(track.steps.front().cells, (Cells{{kBrokenHead, first, first}}));
  EXPECT_EQ(track.steps.back().cells, (Cells{{kBrokenHead, first, 16 + kGqaSteps - 1}}));
  // Each new position of the broken head first differs in the step that writes it.
  ASSERT_EQ(track.first_differ.size(), kGqaSteps - kHeadFaultFrom);
  for (uint32_t k = 0; k < track.first_differ.size(); ++k) {
    const report::KvCacheTrack::FirstDiffer& f = track.first_differ[k];
    EXPECT_EQ(f.cells, (compare::KvCells::Range{kBrokenHead, first + k, first + k}));
    EXPECT_EQ(f.device_run, kHeadFaultFrom + k);
  }
  // The per-position figures are every head's: the positions whose one head of 8 is wrong.
  const compare::Metrics& m = *report->runs.back().groups.at(0).pairs.at(0).metrics;
  ASSERT_EQ(m.channels.size(), kCachePositions);
  EXPECT_LT(m.channels[first].sqnr_db, compare::kHealthyChannelDb);
  EXPECT_GT(m.channels[first - 1].sqnr_db, 60);

  const std::string summary = report::render_summary(*report, 5, false);
  EXPECT_NE(
      summary.find(fmt::format("kv cache layers.0.attn.k_cache ({} positions on axis {}, 8 "
                               "heads, {} runs): positions {} (head 3) first differ in run {}",
                               kCachePositions, track.axis, kGqaSteps, first, kHeadFaultFrom)),
      std::string::npos)
      << summary;
  const json doc = json::parse(report::report_text(*report));
  EXPECT_EQ(doc["kv_cache"][0]["heads"], kKvHeads);
  EXPECT_EQ(doc["kv_cache"][0]["first_differ"][0],
            json::parse(fmt::format("[3, {0}, {0}, 0, {1}]", first, kHeadFaultFrom)));
  const Result<report::Report> again = report::parse_report(doc.dump(), "kv.json");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(report::report_text(*again), report::report_text(*report));
}

INSTANTIATE_TEST_SUITE_P(Layouts, GqaCache, ::testing::Values(true, false),
                         [](const auto& layout) { return layout.param ? "BHSD" : "BSHD"; });

TEST(KvCacheHeads, AreTheAxisBesideThePositions) {
  EXPECT_EQ(compare::kv_head_axis({1, 8, 512, 128}), 1u);            // [B, H, S, D]
  EXPECT_EQ(compare::kv_head_axis({1, 512, 8, 128}), 2u);            // [B, S, H, D]
  EXPECT_EQ(compare::kv_head_axis({1, 8, 128, 512}), std::nullopt);  // keys [B, H, D, S]
  EXPECT_EQ(compare::kv_head_axis({1, 1, 512, 128}), std::nullopt);  // one head
  EXPECT_EQ(compare::kv_head_axis({512, 128}), std::nullopt);
}

// One op with two outputs, its keys right and its values wrong: the group is named by the
// broken output (its worst: the one its verdict and SQNR come from), not by its first.
Status write_two_outputs(const std::string& path, bool device) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"kv-test", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  QD_RETURN_IF_ERROR(store->begin_run("step0", 0).status());
  for (int32_t output = 0; output < 2; ++output) {
    std::vector<float> values(kHeads * kPositions * kHeadDim);
    for (size_t i = 0; i < values.size(); ++i) {
      const double x = std::sin(0.3 * double(i) + output);
      values[i] = static_cast<float>(x + (device && output == 1 ? 0.9 * std::cos(7.0 * i) : 0));
    }
    TensorRecord record;
    record.name = "layers.0.attn.kv_cache@" + std::to_string(output);
    record.handles = {1};
    record.output_index = output;
    record.dims = {1, kHeads, kPositions, kHeadDim};
    QD_RETURN_IF_ERROR(store->append_tensor(
        record,
        std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)),
        0));
  }
  QD_RETURN_IF_ERROR(store->end_run(0, 0));
  return store->close();
}

TEST(KvCacheGroup, IsNamedByItsWorstOutput) {
  TempDir dir;
  ASSERT_THAT(write_two_outputs(dir.file("ref.h5"), false), IsOk());
  ASSERT_THAT(write_two_outputs(dir.file("dev.h5"), true), IsOk());
  const Result<report::Report> report = diff_in(dir);
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->runs.at(0).groups.size(), 1u);
  const report::GroupReport& group = report->runs[0].groups[0];
  ASSERT_EQ(group.pairs.size(), 2u);
  EXPECT_EQ(group.pairs[0].reference.name, "layers.0.attn.kv_cache@0");
  EXPECT_EQ(group.name(), "layers.0.attn.kv_cache@1");
  const std::string summary = report::render_summary(*report, 5, false);
  EXPECT_NE(summary.find("first divergence: group h1 (layers.0.attn.kv_cache@1) in device run 0"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("h1           layers.0.attn.kv_cache@1: kernel_suspect"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("run 0   h1           layers.0.attn.kv_cache@1\n"), std::string::npos)
      << summary;
}

// Every list of the terminal summary is bounded: the first few lines, then how many more and
// where they all are (a qnn-net-run tree of thousands of empty results, an LLM's caches).
TEST(SummaryLists, AreBoundedWithWhereTheRestIs) {
  report::Report report;
  constexpr size_t kRuns = 5000;
  for (uint32_t run = 0; run < kRuns; ++run) {
    report::RunReport r;
    r.device_run = r.reference_run = run;
    r.verdict = compare::Verdict::kFail;
    r.verdict_reasons = {"no tensor pair was compared"};
    report.runs.push_back(r);
    report.ending.summary.verdict_reasons.push_back("device run " + std::to_string(run) +
                                                    ": no tensor pair was compared");
    report.ending.warnings.push_back("run " + std::to_string(run) + ": 3 tensors unmatched");
  }
  report.ending.summary.verdict = compare::Verdict::kFail;
  report.ending.summary.runs_compared = kRuns;
  for (int t = 0; t < 20; ++t) {
    report::KvCacheTrack track{"h1", "layers." + std::to_string(t) + ".k_cache", 2, 4096, 0, 3, {},
                               {}};
    report::KvCacheTrack::Step step{0, 2, {}, {}};
    for (uint64_t p = 0; p < 30; ++p) step.differing.emplace_back(2 * p, 2 * p);
    track.steps.push_back(step);
    report.ending.kv_cache.push_back(track);
  }
  const std::string text = report::render_summary(report, 5, false);
  size_t lines = 0, reasons = 0, warnings = 0, caches = 0;
  for (size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
    ++lines;
    reasons += text.compare(at, 14, "fails because ") == 0;
    warnings += text.compare(at, 9, "warning: ") == 0;
    caches += text.compare(at, 9, "kv cache ") == 0;
  }
  EXPECT_LT(lines, 80u) << text;
  EXPECT_EQ(reasons, 11u);
  EXPECT_EQ(warnings, 11u);
  EXPECT_EQ(caches, 8u);
  EXPECT_NE(text.find("fails because ... and 4,990 more reasons: the JSON report (--json) lists "
                      "them all\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("warning: ... and 4,990 more warnings: the JSON report (--json) lists them "
                      "all\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("... and 12 more kv caches: "), std::string::npos) << text;
  EXPECT_NE(
      text.find("positions 0, 2, 4, 6, 8, 10, 12, 14 (+22 more ranges) first differ in run 2"),
      std::string::npos)
      << text;
}

}  // namespace
}  // namespace qd
