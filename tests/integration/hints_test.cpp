// Every fault of the fixture model gets the hint that names its cause, with the numbers behind
// it, at the op it was injected at; the ops downstream are told where their error came from; a
// clean run gets no hint (docs/metrics.md, "Hints").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include <fmt/format.h>
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"

#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using compare::HintKind;
using fixtures::Fault;

struct Diffed {
  std::shared_ptr<testing::TempDir> dir;  // the stores live as long as the result
  fixtures::FixturePaths paths;
  fixtures::Injection injection;
  report::Report report;

  const report::GroupReport& injected() const {
    for (const report::GroupReport& g : report.runs.at(0).groups) {
      if (g.handles == std::vector<int64_t>{injection.debug_handle}) return g;
    }
    throw std::runtime_error("no group for the injected op");
  }
};

// `policy`: the policy's JSON text, "" for the default one.
Diffed diff_fixture(Fault fault, const std::string& op = "", const std::string& policy = "") {
  auto dir = std::make_shared<testing::TempDir>();
  const fixtures::FixturePaths paths{dir->file("ref.h5"), dir->file("dev.h5"), ""};
  Result<fixtures::Injection> injection = fixtures::write_fixture(paths, {fault, op, 1, 1});
  EXPECT_THAT(injection, IsOk());
  pipeline::DiffRequest request;
  request.reference.path = paths.reference;
  request.devices = {qd::pipeline::InputSpec{paths.device, {}, {}, {}}};
  if (!policy.empty()) {
    request.policy_path = dir->file("policy.json");
    std::FILE* file = std::fopen(request.policy_path.c_str(), "w");
    EXPECT_NE(file, nullptr);
    if (file != nullptr) {
      std::fputs(policy.c_str(), file);
      std::fclose(file);
    }
  }
  request.jobs = 2;
  Result<report::Report> report = pipeline::run_diff(request);
  EXPECT_THAT(report, IsOk());
  return {dir, paths, std::move(injection).value(), std::move(report).value()};
}

template <typename Evidence>
const Evidence& first_hint_as(const report::GroupReport& group) {
  EXPECT_FALSE(group.hints.empty()) << group.id;
  const auto* evidence = std::get_if<Evidence>(&group.hints.at(0).evidence);
  if (evidence == nullptr) {
    ADD_FAILURE() << group.id << ": first hint is "
                  << compare::hint_kind_name(group.hints.at(0).kind()) << ": "
                  << group.hints.at(0).sentence;
    static const Evidence kNone{};
    return kNone;
  }
  return *evidence;
}

// Downstream of the injected op, every failing group's first hint is "inherited", from it.
void expect_downstream_inherits(const Diffed& d) {
  const report::GroupReport& injected = d.injected();
  for (const report::GroupReport& g : d.report.runs.at(0).groups) {
    if (g.order <= injected.order || g.verdict != compare::Verdict::kFail) continue;
    const auto& inherited = first_hint_as<compare::Inherited>(g);
    EXPECT_EQ(inherited.upstream_group, injected.id) << g.id;
  }
  for (const report::GroupReport& g : d.report.runs.at(0).groups) {
    if (g.order < injected.order) {
      EXPECT_TRUE(g.hints.empty()) << g.id;
    }
  }
}

TEST(Hints, ACleanRunRaisesNone) {
  const Diffed d = diff_fixture(Fault::kNone);
  for (const report::GroupReport& g : d.report.runs.at(0).groups) {
    EXPECT_TRUE(g.hints.empty()) << g.id << ": " << g.hints.at(0).sentence;
  }
}

TEST(Hints, SwappedHAndWIsALayoutSuspectWithTheSqnrItWouldHave) {
  const Diffed d = diff_fixture(Fault::kHwSwap);
  const report::GroupReport& g = d.injected();
  const auto& layout = first_hint_as<compare::LayoutSuspect>(g);
  EXPECT_EQ(layout.permutation, "H and W swapped");
  EXPECT_GT(layout.sqnr_db, 28);  // an 8-bit encoding's own error, as the clean op has
  EXPECT_LT(*g.sqnr_db, 5);
  EXPECT_NEAR(g.hints[0].explained_db, layout.sqnr_db - *g.sqnr_db, 1e-9);
  expect_downstream_inherits(d);
}

TEST(Hints, ChannelFirstDataReadAsChannelLastIsALayoutSuspect) {
  const Diffed d = diff_fixture(Fault::kLayoutMixup);
  const auto& layout = first_hint_as<compare::LayoutSuspect>(d.injected());
  EXPECT_EQ(layout.permutation, "channel-first data read as channel-last");
  EXPECT_GT(layout.sqnr_db, 28);
}

TEST(Hints, A25xWideEncodingIsCoarseWithTheFittedEncodingsSqnr) {
  const Diffed d = diff_fixture(Fault::kWideEncoding);
  const report::GroupReport& g = d.injected();
  const auto& coarse = first_hint_as<compare::CoarseEncoding>(g);
  // The reference spans about 1/25 of the range (less: the clean encoding has some headroom).
  EXPECT_GT(coarse.range_fraction, 0.02);
  EXPECT_LT(coarse.range_fraction, 0.05);
  EXPECT_GT(coarse.fitted_sqnr_db, *g.sqnr_db + 20);  // 25x finer steps: about 28 dB
  const report::PairReport& pair = g.pairs.at(0);
  EXPECT_NEAR(coarse.fitted.min, pair.reference.stats.min, 1e-9);
  EXPECT_NEAR(coarse.fitted.max, pair.reference.stats.max, 1e-9);
  EXPECT_EQ(coarse.fitted.bitwidth, 8);
  EXPECT_TRUE(coarse.fitted.is_signed);
  EXPECT_NEAR(coarse.fitted.scale * 255, coarse.fitted.max - coarse.fitted.min, 1e-12);
  expect_downstream_inherits(d);
}

TEST(Hints, ANarrowEncodingClipsWithTheShareOnEachSide) {
  const Diffed d = diff_fixture(Fault::kClipping);
  const report::GroupReport& g = d.injected();
  const auto& clipping = first_hint_as<compare::Clipping>(g);
  // 1/16 of the range is kept: most values of both signs fall outside.
  EXPECT_GT(clipping.below_fraction, 0.1);
  EXPECT_GT(clipping.above_fraction, 0.1);
  EXPECT_GT(clipping.sqnr_without_db, *g.sqnr_db + 3);
  EXPECT_GT(clipping.fitted_sqnr_db, 30);
  const report::PairReport& pair = g.pairs.at(0);
  EXPECT_LE(clipping.fitted.min, pair.reference.stats.min);
  EXPECT_GE(clipping.fitted.max, pair.reference.stats.max);
  for (const compare::Hint& hint : g.hints) EXPECT_NE(hint.kind(), HintKind::kKernelSuspect);
  expect_downstream_inherits(d);
}

TEST(Hints, WrongArithmeticIsAKernelSuspect) {
  for (const Fault fault : {Fault::kRequantScale, Fault::kBrokenChannel}) {
    const Diffed d = diff_fixture(fault);
    const report::GroupReport& g = d.injected();
    const auto& kernel = first_hint_as<compare::KernelSuspect>(g);
    EXPECT_GT(kernel.ideal_sqnr_db, 30) << fixtures::fault_name(fault);
    EXPECT_EQ(g.hints.size(), 1u) << g.hints.back().sentence;
    expect_downstream_inherits(d);
  }
}

TEST(Hints, NanAndInfAreIntroducedWhereTheyAppearAndInheritedAfter) {
  const Diffed nan = diff_fixture(Fault::kNan);
  const auto& introduced = first_hint_as<compare::NanInfIntroduced>(nan.injected());
  EXPECT_GT(introduced.device_nan, 0u);
  EXPECT_EQ(introduced.reference_nan, 0u);
  EXPECT_TRUE(std::isinf(nan.injected().hints[0].explained_db));
  expect_downstream_inherits(nan);
  const Diffed inf = diff_fixture(Fault::kFp16Overflow);
  EXPECT_GT(first_hint_as<compare::NanInfIntroduced>(inf.injected()).device_inf, 0u);
}

// The reference's values of `tensor`, as stored (float32).
std::vector<float> reference_values(const std::string& store, const std::string& tensor) {
  auto reader = StoreReader::open(store);
  EXPECT_THAT(reader, IsOk());
  Result<std::vector<TensorEntry>> tensors = (*reader)->tensors_of_run(0);
  for (const TensorEntry& t : tensors.value()) {
    if (t.name != tensor) continue;
    const std::vector<uint8_t> bytes = (*reader)->read_tensor(t).value();
    std::vector<float> values(bytes.size() / sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  ADD_FAILURE() << "no tensor " << tensor;
  return {};
}

// One negated channel among 32: the per-channel view names it first, far below the median
// channel, and a policy that gates on the worst channel fails the op where its SQNR alone passes.
TEST(ChannelView, ABrokenChannelIsNamedAndCanFailThePolicy) {
  const Diffed d = diff_fixture(Fault::kBrokenChannel);
  const report::PairReport& pair = d.injected().pairs.at(0);
  ASSERT_TRUE(pair.metrics);
  const compare::Metrics& m = *pair.metrics;
  const uint64_t channels = pair.reference.dims.at(1);
  const auto broken = static_cast<uint64_t>(fixtures::broken_channel(int64_t(channels)));
  EXPECT_EQ(m.channel_axis, 1u);
  ASSERT_EQ(m.channels.size(), channels);
  ASSERT_FALSE(m.worst_channels.empty());
  EXPECT_EQ(m.worst_channels[0], broken);
  EXPECT_EQ(compare::standout_channel(m), broken);
  EXPECT_LT(m.channels[broken].sqnr_db, 0);  // negated: the error is twice the signal
  EXPECT_GT(compare::median_channel_sqnr_db(m), 25);
  const std::string summary = report::render_summary(d.report, 5, false);
  EXPECT_NE(summary.find("channel " + std::to_string(broken) + " of " + std::to_string(channels) +
                         " (axis 1)"),
            std::string::npos)
      << summary;

  const double sqnr = m.sqnr_db;  // about 8 dB: the other 31 channels are fine
  // Lines below it pass it (the excess rule, which sees the op far below what its encoding
  // allows, switched off); the channel line fails it.
  const std::string lenient = fmt::format(
      R"({{"default": {{"fail_below_db": {0}, "warn_below_db": {0}, "excess": false}}}})",
      sqnr - 1);
  EXPECT_EQ(diff_fixture(Fault::kBrokenChannel, "", lenient).injected().verdict,
            compare::Verdict::kPass);
  const std::string gated = fmt::format(
      R"({{"default": {{"fail_below_db": {0}, "warn_below_db": {0}, "fail_channel_below_db": 0}}}})",
      sqnr - 1);
  const Diffed judged = diff_fixture(Fault::kBrokenChannel, "", gated);
  EXPECT_EQ(judged.injected().verdict, compare::Verdict::kFail);
  for (const report::GroupReport& g : judged.report.runs.at(0).groups) {
    if (g.order < judged.injected().order) {
      EXPECT_EQ(g.verdict, compare::Verdict::kPass) << g.id;
    }
  }
}

// The SQNR of the reference quantized on an override's grid, as a converter would apply it.
double sqnr_on_grid(const std::vector<float>& reference, const nlohmann::json& encoding) {
  const double scale = encoding["scale"].get<double>();
  const double offset = encoding["offset"].get<double>();
  const double steps = std::ldexp(1.0, encoding["bitwidth"].get<int>()) - 1;
  EXPECT_EQ(encoding["is_symmetric"], "False");
  EXPECT_NEAR(encoding["min"].get<double>(), offset * scale, 1e-12);
  double signal = 0, noise = 0;
  for (const float value : reference) {
    const double r = value;
    const double q = std::clamp(std::nearbyint(r / scale) - offset, 0.0, steps);
    signal += r * r;
    noise += ((q + offset) * scale - r) * ((q + offset) * scale - r);
  }
  return 10 * std::log10(signal / noise);
}

// The hint's fitted encoding and its SQNR, or its wider one's.
std::pair<const compare::FittedEncoding*, double> promised(const compare::Hint& hint) {
  const auto of = [](const auto& e) {
    return e.wider ? std::pair{&e.wider->encoding, e.wider->sqnr_db}
                   : std::pair{&e.fitted, e.fitted_sqnr_db};
  };
  if (const auto* coarse = std::get_if<compare::CoarseEncoding>(&hint.evidence)) return of(*coarse);
  return of(std::get<compare::Clipping>(hint.evidence));
}

// The override --suggest-overrides writes, applied as a converter would (the reference quantized
// on its grid), gives the SQNR the hint promised; under a policy that 8 bits cannot meet, the
// suggestion is the same range at 16 bits, and gives its promise too.
TEST(Hints, TheSuggestedOverrideGivesThePromisedSqnr) {
  for (const Fault fault : {Fault::kWideEncoding, Fault::kClipping}) {
    for (const bool strict : {false, true}) {
      SCOPED_TRACE(std::string(fixtures::fault_name(fault)) + (strict ? ", strict policy" : ""));
      const Diffed d = diff_fixture(
          fault, "", strict ? R"({"default": {"fail_below_db": 60, "warn_below_db": 70}})" : "");
      const report::GroupReport& g = d.injected();
      ASSERT_FALSE(g.hints.empty());
      const compare::Hint& hint = g.hints.front();
      const auto [fitted, sqnr] = promised(hint);
      EXPECT_EQ(fitted->bitwidth, strict ? 16 : 8);
      const nlohmann::json overrides =
          nlohmann::json::parse(report::render(d.report, *report::find_view("suggest-overrides")));
      EXPECT_EQ(overrides["param_encodings"], nlohmann::json::object());
      const nlohmann::json& encoding =
          overrides["activation_encodings"].at(g.pairs.at(0).device.name).at(0);
      EXPECT_EQ(encoding["bitwidth"], strict ? 16 : 8);
      EXPECT_NEAR(sqnr_on_grid(reference_values(d.paths.reference, hint.tensor), encoding), sqnr,
                  1e-6 * sqnr);
      EXPECT_GT(sqnr, strict ? 70 : 30);
      EXPECT_EQ(hint.sentence.find("16 bits") != std::string::npos, strict) << hint.sentence;
    }
  }
}

// A device name that is not UTF-8 (stores hold bytes) is written replaced, never thrown on: the
// overrides file and the page both measure and write the report's JSON.
TEST(Hints, NamesThatAreNotUtf8StillWriteTheOverridesAndThePage) {
  Diffed d = diff_fixture(Fault::kClipping, "", "");
  report::GroupReport* injected = nullptr;
  for (report::GroupReport& group : d.report.runs.at(0).groups) {
    if (&group == &d.injected()) injected = &group;
  }
  ASSERT_NE(injected, nullptr);
  injected->pairs.at(0).device.name = "conv\xff\xfe";
  const nlohmann::json overrides =
      nlohmann::json::parse(report::render(d.report, *report::find_view("suggest-overrides")));
  EXPECT_TRUE(overrides["activation_encodings"].contains("conv\uFFFD\uFFFD")) << overrides.dump();
  const std::string page = report::render(d.report, *report::find_view("html"));
  EXPECT_NE(page.find("conv\\ufffd\\ufffd"), std::string::npos);
}

// Pairs are cut and merged the same way whatever the thread count: one thread or several give
// the same report, hints included, byte for byte.
TEST(Hints, OneThreadAndManyWriteTheSameReport) {
  auto dir = std::make_shared<testing::TempDir>();
  const fixtures::FixturePaths paths{dir->file("ref.h5"), dir->file("dev.h5"), ""};
  ASSERT_THAT(fixtures::write_fixture(paths, {Fault::kClipping, "", 3, 3}), IsOk());
  pipeline::DiffRequest request;
  request.reference.path = paths.reference;
  request.devices = {qd::pipeline::InputSpec{paths.device, {}, {}, {}}};
  std::vector<std::string> texts;
  for (const unsigned jobs : {1u, 4u, 0u}) {
    request.jobs = jobs;
    request.chunk_elements = 4096;  // many chunks a pair
    Result<report::Report> report = pipeline::run_diff(request);
    ASSERT_THAT(report, IsOk());
    texts.push_back(report::report_text(*report));
  }
  EXPECT_EQ(texts[1], texts[0]);
  EXPECT_EQ(texts[2], texts[0]);
  EXPECT_NE(texts[0].find("\"clipping\""), std::string::npos);
}

// Three ops that only warn, none of which the rules above explain: a 3-bit encoding whose own
// steps cannot reach the pass line, a 4-bit one on which the op adds a few dB (less than a
// kernel fault), and a float output with a wrong bias. Each gets a cause, and the terminal's
// why block shows the first (docs/metrics.md, "Hints").
constexpr uint64_t kRamp = 4096;

double ramp(uint64_t i) { return -1 + 2 * (double(i) + 0.5) / double(kRamp); }

Status write_warning_store(const std::string& path, bool device) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"warn-test", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  for (uint32_t run = 0; run < 3; ++run) {
    QD_RETURN_IF_ERROR(store->begin_run("case" + std::to_string(run), run).status());
    TensorRecord record;
    record.name = "op__debugID_1";
    record.handles = {1};
    record.dims = {kRamp};
    std::vector<uint8_t> bytes;
    if (device && run < 2) {
      // 3 bits over [-1.33, 1] (scale 1/3) or 4 bits over [-1.14, 1] (scale 1/7): the ramp fits.
      const int bits = run == 0 ? 3 : 4;
      const double scale = 1.0 / ((1 << (bits - 1)) - 1);
      record.dtype = DType::kSFixed8;
      record.quant.scales = {scale};
      record.quant.offsets = {0};
      record.quant.bitwidth = static_cast<uint8_t>(bits);
      for (uint64_t i = 0; i < kRamp; ++i) {
        double q = std::nearbyint(ramp(i) / scale);
        if (run == 1 && i % 3 == 0) q = std::min(q + 1, double((1 << (bits - 1)) - 1));
        bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
      }
    } else {
      std::vector<float> values(kRamp);
      for (uint64_t i = 0; i < kRamp; ++i) {
        values[i] = static_cast<float>(ramp(i) + (device ? 0.12 : 0));  // the bias
      }
      bytes.resize(values.size() * sizeof(float));
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    QD_RETURN_IF_ERROR(store->append_tensor(record, bytes, run));
    QD_RETURN_IF_ERROR(store->end_run(run, 0));
  }
  return store->close();
}

TEST(Hints, EveryWarningGroupGetsOneAndTheTerminalShowsIt) {
  testing::TempDir dir;
  ASSERT_THAT(write_warning_store(dir.file("ref.h5"), false), IsOk());
  ASSERT_THAT(write_warning_store(dir.file("dev.h5"), true), IsOk());
  pipeline::DiffRequest request;
  request.reference.path = dir.file("ref.h5");
  request.devices = {qd::pipeline::InputSpec{dir.file("dev.h5"), {}, {}, {}}};
  request.jobs = 1;
  const Result<report::Report> report = pipeline::run_diff(request);
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->runs.size(), 3u);
  std::vector<const report::GroupReport*> groups;
  for (const report::RunReport& run : report->runs) {
    ASSERT_EQ(run.groups.size(), 1u);
    const report::GroupReport& g = run.groups[0];
    EXPECT_EQ(g.verdict, compare::Verdict::kWarn) << run.device_run << ": " << *g.sqnr_db;
    EXPECT_FALSE(g.hints.empty()) << run.device_run << " (" << *g.sqnr_db << " dB) has no hint";
    groups.push_back(&g);
  }
  // The encoding's own steps: the same range at 16 bits is the suggestion.
  const auto& steps = first_hint_as<compare::CoarseEncoding>(*groups[0]);
  ASSERT_TRUE(steps.wider);
  EXPECT_GT(steps.wider->sqnr_db, 60);
  EXPECT_NE(groups[0]->hints[0].sentence.find("allows only"), std::string::npos)
      << groups[0]->hints[0].sentence;
  // The op adds less than a kernel fault would: said with its figures.
  const auto& loses = first_hint_as<compare::KernelSuspect>(*groups[1]);
  EXPECT_GT(loses.ideal_sqnr_db, 20);
  EXPECT_NE(groups[1]->hints[0].sentence.find("the op itself loses"), std::string::npos)
      << groups[1]->hints[0].sentence;
  // A float output: no encoding is said to allow 144.5 dB.
  first_hint_as<compare::KernelSuspect>(*groups[2]);
  const std::string& bias = groups[2]->hints.at(0).sentence;
  EXPECT_EQ(bias.find("144"), std::string::npos) << bias;
  EXPECT_NE(bias.find("has no encoding"), std::string::npos) << bias;

  const std::string summary = report::render_summary(*report, 5, false);
  EXPECT_NE(summary.find("why (device run 0):\n  h1           op__debugID_1 (warn): "
                         "coarse_encoding: the device's own encoding allows only"),
            std::string::npos)
      << summary;
}

// The hints are part of the saved report: written and read back, they are the same.
TEST(Hints, SurviveTheJsonReport) {
  const Diffed d = diff_fixture(Fault::kClipping);
  const std::string text = report::report_text(d.report);
  const Result<report::Report> again = report::parse_report(text, "again.json");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(report::report_text(*again), text);
  EXPECT_FALSE(again->runs.at(0).groups.at(5).hints.empty());
}

// A saved hint missing a field its kind needs (the schema cannot say which) is a clear error,
// never a read past the object.
TEST(Hints, ASavedHintWithoutItsEvidenceIsAnError) {
  const Diffed d = diff_fixture(Fault::kClipping);
  nlohmann::json doc = nlohmann::json::parse(report::report_text(d.report));
  nlohmann::json& hint = doc["runs"][0]["groups"][5]["hints"][0];
  ASSERT_EQ(hint["kind"], "clipping");
  hint["evidence"].erase("fitted");
  const Result<report::Report> broken = report::parse_report(doc.dump(), "broken.json");
  ASSERT_FALSE(broken.is_ok());
  EXPECT_NE(broken.status().message().find("broken.json"), std::string::npos);
  EXPECT_NE(broken.status().message().find("fitted"), std::string::npos)
      << broken.status().message();
}

}  // namespace
}  // namespace qd
