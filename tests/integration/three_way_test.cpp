// Three-way diffs (--sim): a chain of ops run three times, as a float reference (REF), as an
// ideal integer execution with per-op int8 encodings (SIM), and as a "device" (DEV) that is SIM
// with one change: a kernel fault at one op, or (in SIM and DEV alike) one encoding 25x too wide.
// Each op really computes from its input, so error travels down the chain on every side, and
// the parts must still name the op where it enters, and which part it belongs to.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;

constexpr int kOps = 6;
constexpr uint64_t kElements = 4096;

// Op k of the chain: a smooth, range-keeping function of its input.
float apply_op(int op, float input, uint64_t i) {
  return std::sin(0.9f * input + 0.002f * float(i) + float(op)) * (1.0f + 0.1f * float(op));
}

double range_of(int op) { return 1.0 + 0.1 * op; }

enum class Side { kReference, kSimulation, kDevice };

struct Execution {
  std::optional<int> wide_encoding_at;  // this op's int8 scale is 25x too wide
  std::optional<int> kernel_fault_at;   // this op's kernel adds a bias to a quarter of its outputs
};

// Stores that hold no evidence or cannot be compared.
struct Damage {
  std::optional<Side> all_nan;     // this side's tensors are float32 NaN throughout
  bool simulation_halved = false;  // the simulation's tensors hold half the elements
};

// Writes one side of the chain: float for the reference, int8 per-tensor (QNN offset 0) else.
void write_side(const std::string& path, Side side, const Execution& run,
                const Damage& damage = {}) {
  auto store = StoreWriter::create(path, {"three_way_test",
                                          side == Side::kDevice ? "QnnHtp" : "cpu", "", "chain", 1})
                   .value();
  ASSERT_THAT(store->begin_run("r", 1), IsOk());
  std::vector<float> values(kElements);
  for (uint64_t i = 0; i < kElements; ++i) values[i] = std::cos(0.01f * float(i));
  for (int op = 1; op <= kOps; ++op) {
    for (uint64_t i = 0; i < kElements; ++i) values[i] = apply_op(op, values[i], i);
    TensorRecord r;
    r.name = "op" + std::to_string(op);
    r.handles = {op};
    r.dims = {kElements};
    if (side == Side::kReference || damage.all_nan == side) {
      r.dtype = DType::kFloat32;
      std::vector<float> written = values;
      if (damage.all_nan == side) std::fill(written.begin(), written.end(), NAN);
      const auto* bytes = reinterpret_cast<const uint8_t*>(written.data());
      ASSERT_THAT(store->append_tensor(r, {bytes, kElements * 4}, 0), IsOk());
      continue;
    }
    if (side == Side::kDevice && run.kernel_fault_at == op) {
      for (uint64_t i = 0; i < kElements / 4; ++i) values[i] += 1.0f;
    }
    const double scale = range_of(op) / 127 * (run.wide_encoding_at == op ? 25 : 1);
    std::vector<int8_t> q(kElements);
    for (uint64_t i = 0; i < kElements; ++i) {
      q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(values[i] / scale), -128.0, 127.0));
      values[i] = static_cast<float>(q[i] * scale);  // what the next op reads
    }
    r.dtype = DType::kSFixed8;
    r.quant.scales = {scale};
    r.quant.offsets = {0};
    const bool halved = side == Side::kSimulation && damage.simulation_halved;
    if (halved) r.dims = {kElements / 2};
    const auto* bytes = reinterpret_cast<const uint8_t*>(q.data());
    ASSERT_THAT(store->append_tensor(r, {bytes, halved ? kElements / 2 : kElements}, 0), IsOk());
  }
  ASSERT_THAT(store->end_run(kOps, 0), IsOk());
  ASSERT_THAT(store->close(), IsOk());
}

class ThreeWay : public ::testing::Test {
 protected:
  // The three stores of `run`; returns the report of diff REF DEV --sim SIM.
  // With `as_replay`, the simulation's store is given as the replay (--isolated) instead.
  report::Report diff(const Execution& run, const std::string& policy = "",
                      const Damage& damage = {}, bool as_replay = false) {
    write_side(ref_, Side::kReference, run, damage);
    write_side(sim_, Side::kSimulation, run, damage);
    write_side(device_, Side::kDevice, run, damage);
    pipeline::DiffRequest request;
    request.reference.path = ref_;
    request.devices = {qd::pipeline::InputSpec{device_, {}, {}, {}}};
    (as_replay ? request.isolated : request.simulation) = pipeline::InputSpec{};
    (as_replay ? request.isolated : request.simulation)->path = sim_;
    if (!policy.empty()) {
      testing::write_text(policy_, policy);
      request.policy_path = policy_;
    }
    auto report = pipeline::run_diff(request);
    EXPECT_THAT(report, IsOk());
    return std::move(report).value();
  }

  static const report::GroupReport& group(const report::Report& report, int op) {
    const report::GroupReport* g = report.runs.at(0).group("h" + std::to_string(op));
    EXPECT_NE(g, nullptr) << op;
    return *g;
  }
  static compare::AttributionKind attribution(const report::Report& report, int op) {
    const auto& parts = group(report, op).parts;
    EXPECT_TRUE(parts && parts->attribution) << op;
    return parts->attribution->kind;
  }

  testing::TempDir dir_;
  std::string ref_ = dir_.file("ref.h5"), sim_ = dir_.file("sim.h5"),
              device_ = dir_.file("device.h5"), policy_ = dir_.file("policy.json");
};

TEST_F(ThreeWay, AKernelFaultIsTheKernelsAtItsOp) {
  const report::Report report = diff({std::nullopt, 3});
  const report::RunReport& run = report.runs.at(0);
  ASSERT_TRUE(run.kernel && run.quantization);
  EXPECT_EQ(run.kernel->first_divergence, "h3");
  ASSERT_FALSE(run.kernel->introducers.empty());
  EXPECT_EQ(run.kernel->introducers.front().id, "h3");
  EXPECT_EQ(run.quantization->first_divergence, std::nullopt);  // the encodings are fine
  for (int op = 1; op < 3; ++op) {
    EXPECT_EQ(attribution(report, op), compare::AttributionKind::kNone) << op;
  }
  EXPECT_EQ(attribution(report, 3), compare::AttributionKind::kKernel);
  EXPECT_GT(group(report, 3).parts->attribution->margin_db, 10);
  EXPECT_FALSE(group(report, 3).parts->attribution->inherited);
  // What inherits it is attributed on what it adds itself, which the chained parts cannot split
  // from what it carries: within noise, and inherited.
  for (int op = 4; op <= kOps; ++op) {
    EXPECT_EQ(attribution(report, op), compare::AttributionKind::kWithinNoise) << op;
    EXPECT_TRUE(group(report, op).parts->attribution->inherited) << op;
  }
  // The parts add up: the kernel part is the bad one, quantization stays that of int8.
  const report::ErrorParts& at_fault = *group(report, 3).parts;
  EXPECT_LT(*at_fault.kernel->sqnr_db, 20);
  EXPECT_GT(*at_fault.quantization->sqnr_db, 35);
  EXPECT_GT(*at_fault.kernel->lsb_max, 90);  // 1.0 of a 1.3/127 step, where not clipped
  EXPECT_EQ(report.ending.summary.kernel_first_divergence->group, "h3");
}

// 25x too wide costs int8 about 28 dB: from near 50 dB to near 22, which the default policy
// (warn below 20 dB) lets pass; a policy for int8 models expects more.
constexpr const char* kInt8Policy = R"({"default": {"fail_below_db": 20, "warn_below_db": 30}})";

TEST_F(ThreeWay, ATooWideEncodingIsQuantizationsAtItsOp) {
  const report::Report report = diff({4, std::nullopt}, kInt8Policy);
  const report::RunReport& run = report.runs.at(0);
  ASSERT_TRUE(run.kernel && run.quantization);
  ASSERT_FALSE(run.quantization->introducers.empty());
  EXPECT_EQ(run.quantization->introducers.front().id, "h4");
  EXPECT_EQ(run.kernel->first_divergence, std::nullopt);  // the device is the ideal kernel
  EXPECT_TRUE(run.kernel->introducers.empty());
  for (int op = 1; op < 4; ++op) {
    EXPECT_EQ(attribution(report, op), compare::AttributionKind::kNone) << op;
  }
  EXPECT_EQ(attribution(report, 4), compare::AttributionKind::kQuantization);
  EXPECT_NE(group(report, 4).verdict, compare::Verdict::kPass);
  // SIM and DEV are the same integers: the kernel part is exact, its noise 0. Op 4 loses over
  // 20 dB in the quantization part (a 25x coarser step is 28 dB more noise), none in the kernel.
  EXPECT_EQ(group(report, 4).parts->kernel->noise_power, 0);
  EXPECT_FALSE(group(report, 4).parts->attribution->inherited);
  EXPECT_GT(group(report, 4).parts->attribution->margin_db, 20);
}

TEST_F(ThreeWay, ACleanDeviceAttributesNothing) {
  const report::Report report = diff({});
  const report::RunReport& run = report.runs.at(0);
  EXPECT_EQ(report.ending.summary.verdict, compare::Verdict::kPass);
  EXPECT_EQ(run.kernel->first_divergence, std::nullopt);
  EXPECT_EQ(run.quantization->first_divergence, std::nullopt);
  for (int op = 1; op <= kOps; ++op) {
    EXPECT_EQ(attribution(report, op), compare::AttributionKind::kNone) << op;
  }
}

TEST_F(ThreeWay, APolicyCanGateOnTheKernelAlone) {
  // "The kernel may add at most 1 LSB": the wide encoding is accepted, the kernel fault is not.
  const std::string policy =
      R"({"gate": "kernel", "default": {"fail_below_db": 20, "warn_below_db": 30,
                                         "kernel_fail_above_lsb": 1}})";
  const report::Report wide = diff({4, std::nullopt}, policy);
  EXPECT_EQ(wide.ending.summary.verdict, compare::Verdict::kPass);
  EXPECT_NE(group(wide, 4).parts->total, compare::Verdict::kPass);  // still shown as it is
  const report::Report faulty = diff({std::nullopt, 3}, policy);
  EXPECT_EQ(faulty.ending.summary.verdict, compare::Verdict::kFail);
  EXPECT_EQ(faulty.runs.at(0).first_divergence, "h3");
  // "both": the worse of the two.
  const report::Report both =
      diff({4, std::nullopt},
           R"({"gate": "both", "default": {"fail_below_db": 25, "warn_below_db": 30}})");
  EXPECT_EQ(group(both, 4).verdict, compare::Verdict::kFail);  // the total's verdict
  EXPECT_EQ(group(both, 4).parts->kernel->verdict, compare::Verdict::kPass);
}

TEST_F(ThreeWay, EveryViewShowsTheParts) {
  diff({std::nullopt, 3});  // writes the stores
  const std::string json_path = dir_.file("r.json"), csv_path = dir_.file("r.csv");
  const testing::CliResult r = testing::run_cli("diff " + ref_ + " " + device_ + " --sim " + sim_ +
                                                " --json " + json_path + " --csv " + csv_path);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("simulation " + sim_), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel       (SIM vs DEV): first divergence h3 op3"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("quantization (REF vs SIM): first divergence none"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(": kernel (by "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": within_noise, inherited (by "), std::string::npos) << r.out;
  const json doc = json::parse(testing::slurp(json_path));
  EXPECT_EQ(doc["simulation"]["path"], sim_);
  EXPECT_EQ(doc["runs"][0]["parts"]["kernel"]["first_divergence"], "h3");
  EXPECT_EQ(doc["runs"][0]["groups"][2]["parts"]["attribution"]["kind"], "kernel");
  const std::string csv = testing::slurp(csv_path);
  EXPECT_NE(csv.find(",attribution,attribution_margin_db\r\n"), std::string::npos);
  EXPECT_NE(csv.find(",kernel,"), std::string::npos);
  // A saved report keeps its parts, and `check` re-judges them: gating on the kernel part alone
  // with a generous LSB bound passes what the default policy failed.
  testing::write_text(policy_, R"({"gate": "kernel", "default": {"kernel_fail_above_lsb": 300}})");
  const testing::CliResult check = testing::run_cli("check " + json_path + " --policy " + policy_);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const testing::CliResult strict = testing::run_cli("check " + json_path);
  EXPECT_EQ(strict.exit_code, 1) << strict.out << strict.err;
}

TEST_F(ThreeWay, AMissingOrDamagedThirdStoreIsBadInput) {
  diff({});
  const testing::CliResult missing =
      testing::run_cli("diff " + ref_ + " " + device_ + " --sim " + dir_.file("nowhere.h5"));
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_NE(missing.err.find("nowhere.h5"), std::string::npos) << missing.err;
  testing::write_text(dir_.file("junk.h5"), "not a store at all");
  const testing::CliResult junk =
      testing::run_cli("diff " + ref_ + " " + device_ + " --isolated " + dir_.file("junk.h5"));
  EXPECT_EQ(junk.exit_code, 2) << junk.out;
  EXPECT_NE(junk.err.find("junk.h5"), std::string::npos) << junk.err;
}

TEST_F(ThreeWay, ASimulationOfAnotherGraphIsWarnedAbout) {
  diff({});
  // A simulation whose tensors match nothing of the reference: every pair is missing from it.
  auto other = StoreWriter::create(sim_, {"three_way_test", "cpu", "", "other", 1}).value();
  ASSERT_THAT(other->begin_run("r", 1), IsOk());
  TensorRecord r;
  r.name = "unrelated";
  r.handles = {99};
  r.dims = {1};
  r.dtype = DType::kFloat32;
  const float one = 1;
  ASSERT_THAT(other->append_tensor(r, {reinterpret_cast<const uint8_t*>(&one), 4}, 0), IsOk());
  ASSERT_THAT(other->end_run(1, 0), IsOk());
  ASSERT_THAT(other->close(), IsOk());
  pipeline::DiffRequest request;
  request.reference.path = ref_;
  request.devices = {qd::pipeline::InputSpec{device_, {}, {}, {}}};
  request.simulation = pipeline::InputSpec{};
  request.simulation->path = sim_;
  const auto report = pipeline::run_diff(request);
  ASSERT_THAT(report, IsOk());
  const auto& warnings = report->ending.warnings;
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("quantization part: 6 of the 6 compared pairs") != std::string::npos;
  }));
  EXPECT_EQ(report->runs.at(0).kernel->missing_pairs, 6u);
}

// Issue 33: no evidence is never a pass. A simulation of NaN gave the kernel part +inf dB, and
// the kernel gate passed every group of a device that the total fails.
TEST_F(ThreeWay, ASimulationOfNanIsNoEvidenceUnderTheKernelGate) {
  const report::Report report =
      diff({std::nullopt, 3}, R"({"gate": "kernel"})", {Side::kSimulation, false});
  EXPECT_EQ(report.ending.summary.verdict, compare::Verdict::kFail);
  EXPECT_EQ(report.ending.summary.pass, 0u);
  for (int op = 1; op <= kOps; ++op) {
    const report::GroupReport& g = group(report, op);
    EXPECT_EQ(g.verdict, compare::Verdict::kFail) << op;
    ASSERT_TRUE(g.parts && g.parts->kernel) << op;
    EXPECT_TRUE(g.parts->kernel->no_evidence) << op;
    EXPECT_FALSE(g.parts->kernel->sqnr_db) << op << ": an SQNR of nothing is not a figure";
  }
  const auto& reasons = report.runs.at(0).verdict_reasons;
  EXPECT_TRUE(std::any_of(reasons.begin(), reasons.end(), [](const std::string& r) {
    return r.find("kernel part: 6 group(s) had no element finite") != std::string::npos;
  })) << ::testing::PrintToString(reasons);
  // `check` with the same policy, and the terminal, say the same.
  const std::string json_path = dir_.file("nan.json");
  const testing::CliResult r = testing::run_cli("diff " + ref_ + " " + device_ + " --sim " + sim_ +
                                                " --policy " + policy_ + " --json " + json_path);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("no evidence"), std::string::npos) << r.out;
  EXPECT_EQ(testing::run_cli("check " + json_path + " --policy " + policy_).exit_code, 1);
}

// An all-NaN reference vouches for no device: every group fails, flagged, with no SQNR.
TEST_F(ThreeWay, ANanReferenceFailsEveryGroup) {
  const report::Report report = diff({}, "", {Side::kReference, false});
  EXPECT_EQ(report.ending.summary.fail, static_cast<uint64_t>(kOps));
  for (int op = 1; op <= kOps; ++op) {
    const report::GroupReport& g = group(report, op);
    EXPECT_FALSE(g.sqnr_db) << op;
    EXPECT_NE(std::find(g.flags.begin(), g.flags.end(), compare::Flag::kNoEvidence), g.flags.end())
        << op;
  }
  ASSERT_TRUE(report.ending.summary.first_divergence);
  EXPECT_EQ(report.ending.summary.first_divergence->group, "h1");
}

// A replay (--isolated) of NaN: the isolated part has no evidence and fails, not "inf dB, pass".
TEST_F(ThreeWay, AReplayOfNanIsNoEvidence) {
  const report::Report report = diff({}, "", {Side::kSimulation, false}, true);
  for (int op = 1; op <= kOps; ++op) {
    const report::GroupReport& g = group(report, op);
    ASSERT_TRUE(g.parts && g.parts->isolated) << op;
    EXPECT_TRUE(g.parts->isolated->no_evidence) << op;
    EXPECT_EQ(g.parts->isolated->verdict, compare::Verdict::kFail) << op;
  }
  EXPECT_EQ(report.runs.at(0).verdict, compare::Verdict::kFail);
}

// A simulation whose tensors have other shapes: each part says why, per group, and a warning.
TEST_F(ThreeWay, ASimulationOfOtherShapesSaysWhy) {
  const report::Report report = diff({}, "", {std::nullopt, true});
  for (int op = 1; op <= kOps; ++op) {
    const report::GroupReport& g = group(report, op);
    ASSERT_TRUE(g.parts && g.parts->kernel) << op;
    EXPECT_NE(g.parts->kernel->error.find("could not be compared"), std::string::npos)
        << g.parts->kernel->error;
    EXPECT_NE(g.parts->kernel->error.find("op" + std::to_string(op)), std::string::npos);
  }
  const auto& warnings = report.ending.warnings;
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("kernel part: 6 of the 6 pairs") != std::string::npos &&
           w.find("could not be compared") != std::string::npos;
  })) << ::testing::PrintToString(warnings);
}

}  // namespace
}  // namespace qd
