// The fixture generator judged by the comparator: a clean pair passes at every op, and every
// fault is the first divergence exactly where it was injected, whatever op it is put at.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "compare_testing.h"
#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/report/build.h"
#include "qnn_debug/report/judge.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using compare::RunAnalysis;
using compare::Verdict;
using fixtures::Fault;

// A generated pair, compared and analysed with the default policy. The comparison points into
// the readers, so they travel together.
struct Analysed {
  fixtures::Injection injection;
  std::unique_ptr<StoreReader> ref, device;
  compare::StoreComparison comparison;
  std::vector<RunAnalysis> runs;
  std::vector<report::RunReport> judged;  // each run as the judge reads it

  const compare::Group& group(size_t run, size_t finding) const {
    return comparison.runs[run].alignment.groups[runs[run].groups[finding].group];
  }
  Verdict verdict(size_t run) const { return judged[run].verdict; }
  Verdict verdict(size_t run, size_t finding) const {
    for (const report::GroupReport& g : judged[run].groups) {
      if (g.order == finding) return g.verdict;
    }
    return Verdict::kPass;  // no pair: not in the report
  }
  // The analysis group the judge found the run's first divergence at.
  std::optional<size_t> first_divergence(size_t run) const {
    const std::optional<std::string>& id = judged[run].first_divergence;
    const report::GroupReport* g = id ? judged[run].group(*id) : nullptr;
    return g != nullptr ? std::optional<size_t>(g->order) : std::nullopt;
  }
};

class FixtureTest : public ::testing::Test {
 protected:
  // Writes a pair under `stem` and analyses every run pair.
  Analysed generate(const fixtures::FixtureOptions& options, const std::string& stem = "pair") {
    Analysed a;
    const fixtures::FixturePaths paths{dir_.file(stem + "_ref.h5"), dir_.file(stem + "_dev.h5"),
                                       ""};
    auto injection = fixtures::write_fixture(paths, options);
    EXPECT_THAT(injection, IsOk());
    if (!injection) return a;
    a.injection = *injection;
    a.ref = std::move(StoreReader::open(paths.reference).value());
    a.device = std::move(StoreReader::open(paths.device).value());
    a.comparison = compare::compare_stores(*a.ref, *a.device, {}).value();
    for (const compare::RunComparison& run : a.comparison.runs) {
      a.runs.push_back(compare::analyze(run, a.ref->graph()));
      a.judged.push_back(report::run_report(run, a.runs.back()));
      report::judge(a.judged.back(), compare::Policy{});
    }
    return a;
  }

  testing::TempDir dir_;
};

std::string describe(const Analysed& a, size_t run) {
  std::string text;
  for (size_t g = 0; g < a.runs[run].groups.size(); ++g) {
    const compare::GroupFinding& finding = a.runs[run].groups[g];
    char line[160];
    std::snprintf(line, sizeof line, "  %-10s %-15s %8.2f dB  %s\n",
                  a.group(run, g).pairs.empty() ? "?" : a.group(run, g).pairs[0].ref->name.c_str(),
                  finding.op_type.c_str(), finding.sqnr_db.value_or(-999),
                  std::string(compare::verdict_name(a.verdict(run, g))).c_str());
    text += line;
  }
  return text;
}

TEST_F(FixtureTest, CleanPairPassesAtEveryOpInGraphOrder) {
  const Analysed a = generate({Fault::kNone, "", 1, 2});
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_TRUE(a.comparison.warnings.empty());
  const std::vector<std::string> ops = fixtures::op_names();
  for (size_t r = 0; r < a.runs.size(); ++r) {
    const RunAnalysis& run = a.runs[r];
    EXPECT_EQ(a.verdict(r), Verdict::kPass) << describe(a, r);
    EXPECT_FALSE(a.first_divergence(r));
    EXPECT_TRUE(run.order_from_graph);
    EXPECT_TRUE(a.comparison.runs[r].alignment.unmatched.empty());
    ASSERT_EQ(run.groups.size(), ops.size());
    for (size_t g = 0; g < run.groups.size(); ++g) {
      const compare::GroupFinding& finding = run.groups[g];
      EXPECT_EQ(a.group(r, g).handles, std::vector<int64_t>{int64_t(g) + 1});  // graph order
      ASSERT_EQ(finding.pairs.size(), 1u) << ops[g];
      EXPECT_TRUE(a.comparison.runs[r].pairs[finding.pairs[0]].metrics) << ops[g];
      ASSERT_TRUE(finding.sqnr_db) << ops[g];
      EXPECT_GE(*finding.sqnr_db, 20.0) << ops[g];
      EXPECT_TRUE(finding.flags.empty()) << ops[g] << ": " << compare::flag_name(finding.flags[0]);
    }
  }
  // Timing and memory for reports: one profile event per op and run, checkpoints around them.
  EXPECT_EQ(a.device->profile_events().size(), 2 * ops.size());
  EXPECT_EQ(a.device->memory_checkpoints().size(), 4u);
  EXPECT_EQ(a.device->graph().size(), ops.size());
  std::printf("clean fixture, seed 1, run 0:\n%s", describe(a, 0).c_str());
}

struct FaultCase {
  Fault fault;
  std::string op;  // "" = the fault's default op
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << fixtures::fault_name(c.fault) << " at " << (c.op.empty() ? "default" : c.op);
}

class FixtureFaultTest : public FixtureTest, public ::testing::WithParamInterface<FaultCase> {};

// What the analysis must say about the group a fault was injected at.
void expect_flags_for(Fault fault, const compare::GroupFinding& finding) {
  auto has = [&](compare::Flag flag) {
    return std::find(finding.flags.begin(), finding.flags.end(), flag) != finding.flags.end();
  };
  if (fault == Fault::kClipping) {
    EXPECT_TRUE(has(compare::Flag::kSaturation));
  }
  if (fault == Fault::kFp16Overflow || fault == Fault::kNan) {
    EXPECT_TRUE(has(compare::Flag::kNonFiniteIntroduced));
  }
  EXPECT_FALSE(has(compare::Flag::kLayoutInferred));  // every axis order is recorded
}

TEST_P(FixtureFaultTest, InjectedOpIsTheFirstDivergence) {
  const FaultCase& c = GetParam();
  const Analysed a = generate({c.fault, c.op, 7, 1});
  ASSERT_EQ(a.runs.size(), 1u);
  const std::string expected_op =
      c.op.empty() ? std::string(fixtures::default_fault_op(c.fault)) : c.op;
  EXPECT_EQ(a.injection.op, expected_op);
  const RunAnalysis& run = a.runs[0];
  ASSERT_TRUE(a.first_divergence(0)) << describe(a, 0);
  const size_t first = *a.first_divergence(0);
  EXPECT_EQ(a.group(0, first).handles, std::vector<int64_t>{a.injection.debug_handle})
      << describe(a, 0);
  EXPECT_EQ(a.group(0, first).pairs[0].ref->name, a.injection.tensor_name);
  for (size_t g = 0; g < first; ++g) EXPECT_EQ(a.verdict(0, g), Verdict::kPass) << g;
  expect_flags_for(c.fault, run.groups[first]);
  EXPECT_EQ(a.verdict(0), Verdict::kFail);
}

INSTANTIATE_TEST_SUITE_P(
    EveryFault, FixtureFaultTest,
    ::testing::Values(FaultCase{Fault::kRequantScale, ""}, FaultCase{Fault::kRequantScale, "fc2"},
                      FaultCase{Fault::kClipping, ""}, FaultCase{Fault::kClipping, "conv1"},
                      FaultCase{Fault::kLayoutMixup, ""}, FaultCase{Fault::kLayoutMixup, "norm1"},
                      FaultCase{Fault::kFp16Overflow, ""}, FaultCase{Fault::kFp16Overflow, "conv4"},
                      FaultCase{Fault::kNan, ""}, FaultCase{Fault::kNan, "softmax"}));

// Every fault at every op: slow (about a hundred pairs), run by hand with
// --gtest_also_run_disabled_tests when changing the model or the faults.
TEST_F(FixtureTest, DISABLED_EveryFaultAtEveryOp) {
  for (Fault fault : fixtures::all_faults()) {
    if (fault == Fault::kNone) continue;
    for (const std::string& op : fixtures::op_names()) {
      const Analysed a = generate({fault, op, 1, 1});
      ASSERT_EQ(a.runs.size(), 1u);
      const RunAnalysis& run = a.runs[0];
      const bool found =
          a.first_divergence(0) && a.group(0, *a.first_divergence(0)).handles ==
                                       std::vector<int64_t>{a.injection.debug_handle};
      const auto& finding = run.groups[a.injection.debug_handle - 1];
      std::printf("%-14s %-10s %8.2f dB  %s\n", std::string(fixtures::fault_name(fault)).c_str(),
                  op.c_str(), finding.sqnr_db.value_or(-999), found ? "first" : "MISSED");
      EXPECT_TRUE(found) << fixtures::fault_name(fault) << " at " << op << "\n" << describe(a, 0);
      expect_flags_for(fault, finding);
    }
  }
}

// The clean pair over many seeds: the lowest SQNR each op reaches (run by hand, as above).
TEST_F(FixtureTest, DISABLED_CleanPairPassesForManySeeds) {
  const std::vector<std::string> ops = fixtures::op_names();
  std::vector<double> lowest(ops.size(), 1e9);
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Analysed a = generate({Fault::kNone, "", seed, 1});
    ASSERT_EQ(a.runs.size(), 1u);
    EXPECT_EQ(a.verdict(0), Verdict::kPass) << "seed " << seed << "\n" << describe(a, 0);
    for (size_t g = 0; g < ops.size(); ++g) {
      lowest[g] = std::min(lowest[g], a.runs[0].groups[g].sqnr_db.value_or(-999));
    }
  }
  for (size_t g = 0; g < ops.size(); ++g)
    std::printf("%-10s %6.2f dB\n", ops[g].c_str(), lowest[g]);
}

std::vector<std::vector<uint8_t>> all_tensor_bytes(const StoreReader& store) {
  std::vector<std::vector<uint8_t>> tensors;
  for (const TensorEntry& t : testing::all_tensors(store))
    tensors.push_back(store.read_tensor(t).value());
  return tensors;
}

TEST_F(FixtureTest, SameSeedGivesTheSameTensorsInEveryRun) {
  const fixtures::FixtureOptions options{Fault::kNan, "", 5, 2};
  const Analysed first = generate(options, "first");
  const Analysed second = generate(options, "second");
  ASSERT_EQ(first.runs.size(), 2u);
  ASSERT_EQ(second.runs.size(), 2u);
  ASSERT_EQ(first.ref->runs().size(), 2u);
  ASSERT_EQ(first.device->runs().size(), 2u);
  EXPECT_EQ(all_tensor_bytes(*first.ref), all_tensor_bytes(*second.ref));
  EXPECT_EQ(all_tensor_bytes(*first.device), all_tensor_bytes(*second.device));
  // Each run has its own input, each seed its own weights and inputs.
  const auto run0 = testing::run_tensors(*first.ref, 0), run1 = testing::run_tensors(*first.ref, 1);
  EXPECT_NE(first.ref->read_tensor(run0[0]).value(), first.ref->read_tensor(run1[0]).value());
  const Analysed other = generate({Fault::kNan, "", 6, 1}, "other");
  ASSERT_EQ(other.runs.size(), 1u);
  const TensorEntry other_first = testing::all_tensors(*other.ref)[0];
  EXPECT_NE(first.ref->read_tensor(run0[0]).value(), other.ref->read_tensor(other_first).value());
  // The fault shows in every run.
  for (size_t r = 0; r < first.runs.size(); ++r) {
    ASSERT_TRUE(first.first_divergence(r)) << describe(first, r);
    EXPECT_EQ(first.group(r, *first.first_divergence(r)).handles,
              std::vector<int64_t>{first.injection.debug_handle});
  }
}

TEST_F(FixtureTest, UnknownOpIsAnErrorNamingTheValidOps) {
  const fixtures::FixturePaths paths{dir_.file("r.h5"), dir_.file("d.h5"), ""};
  const auto result = fixtures::write_fixture(paths, {Fault::kClipping, "conv9", 1, 1});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  const std::string& message = result.status().message();
  EXPECT_NE(message.find("'conv9'"), std::string::npos) << message;
  for (const std::string& op : fixtures::op_names()) {
    EXPECT_NE(message.find(op), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(paths.reference));  // refused before writing anything
  EXPECT_FALSE(fixtures::write_fixture(paths, {Fault::kNone, "conv1", 1, 1}));
  EXPECT_FALSE(fixtures::write_fixture(paths, {Fault::kNone, "", 1, 0}));
}

TEST(FixtureNames, FaultNamesRoundTrip) {
  for (Fault fault : fixtures::all_faults()) {
    EXPECT_EQ(fixtures::parse_fault(fixtures::fault_name(fault)), fault);
    if (fault != Fault::kNone) {
      EXPECT_FALSE(fixtures::default_fault_op(fault).empty());
    }
  }
  EXPECT_EQ(fixtures::fault_name(Fault::kRequantScale), "requant-scale");
  EXPECT_EQ(fixtures::fault_name(Fault::kLayoutMixup), "layout");
  EXPECT_FALSE(fixtures::parse_fault("Clipping"));
}

int run_generator(const std::string& args) {
  const int status = std::system((std::string(QD_FIXTURE_GEN) + " " + args).c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(FixtureTest, GeneratorProgramExitCodes) {
  const std::string ref = dir_.file("r.h5"), dev = dir_.file("d.h5");
  const std::string quiet = " >/dev/null 2>&1";
  EXPECT_EQ(run_generator(ref + quiet), 2);                                      // one path
  EXPECT_EQ(run_generator(ref + " " + dev + " --fault bogus" + quiet), 2);       // unknown fault
  EXPECT_EQ(run_generator(ref + " " + dev + " --fault nan --at x" + quiet), 2);  // unknown op
  EXPECT_EQ(run_generator(ref + " " + dev + " --runs two" + quiet), 2);
  EXPECT_EQ(run_generator("--help" + quiet), 0);
  EXPECT_EQ(run_generator(ref + " " + dev + " --fault layout --seed 3" + quiet), 0);
  EXPECT_THAT(StoreReader::open(dev), IsOk());
}

}  // namespace
}  // namespace qd
