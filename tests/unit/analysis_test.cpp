// Analysis on hand-built comparisons: the op order (stored graph, else capture order), the first
// divergence along it (as the judge reads the analysed run), and introduced error measured from
// each op's graph inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/report/build.h"
#include "qnn_debug/report/judge.h"

namespace qd::compare {
namespace {

// Three ops A -> B -> C whose reference tensors were captured in the order C, A, B (a runtime
// may dump in completion order, not graph order). A is fine, B fails, C inherits B's error and
// makes it a little worse.
class OpOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    add_group("C", 3, 7.0);
    add_group("A", 1, 45.0);
    add_group("B", 2, 8.0);
  }

  void add_group(const std::string& op, int64_t handle, double sqnr_db, uint64_t device_nan = 0) {
    TensorEntry& tensor = tensors_.emplace_back();
    tensor.name = op + "_out";
    tensor.handles = {handle};
    tensor.dtype = DType::kFloat32;
    tensor.dims = {4};
    Group group;
    group.id = "h" + std::to_string(handle);
    group.handles = {handle};
    group.ref_members = group.device_members = {&tensor};
    group.pairs = {{&tensor, &tensor, 0, MatchKind::kDebugHandles}};
    PairResult pair;
    pair.pair = group.pairs[0];
    pair.group = run_.alignment.groups.size();
    pair.layout = LayoutPlan{};
    pair.metrics = Metrics{};
    pair.metrics->elements = pair.metrics->n = 4;  // every pair finite: there is evidence
    pair.metrics->sqnr_db = sqnr_db;
    pair.metrics->dev_nan = device_nan;
    run_.alignment.groups.push_back(std::move(group));
    run_.pairs.push_back(std::move(pair));
  }

  static std::vector<GraphNode> chain() {
    return {{"C", "Softmax", {"B_out"}, {"C_out"}, {3}},
            {"B", "Conv2d", {"A_out"}, {"B_out"}, {2}},
            {"A", "Relu", {"input"}, {"A_out"}, {1}}};
  }

  // The analysed run as the judge reads it (its groups in the analysis' order).
  report::RunReport judged(const RunAnalysis& analysis, const Policy& policy = Policy{}) const {
    report::RunReport run = report::run_report(run_, analysis);
    report::judge(run, policy);
    return run;
  }

  std::string id_at(const RunAnalysis& analysis, size_t i) const {
    return run_.alignment.groups[analysis.groups[i].group].id;
  }

  std::deque<TensorEntry> tensors_;  // stable addresses for the pairs
  RunComparison run_;
};

TEST_F(OpOrder, WithoutAGraphFollowsTheCaptureOrder) {
  const RunAnalysis analysis = analyze(run_, {});
  EXPECT_FALSE(analysis.order_from_graph);
  ASSERT_EQ(analysis.groups.size(), 3u);
  EXPECT_EQ(id_at(analysis, 0), "h3");
  EXPECT_EQ(judged(analysis).first_divergence, "h3") << "C was captured first";
}

TEST_F(OpOrder, AStoredGraphGivesTheTopologicalOrderAndTheTrueCulprit) {
  const RunAnalysis analysis = analyze(run_, chain());
  EXPECT_TRUE(analysis.order_from_graph);
  ASSERT_EQ(analysis.groups.size(), 3u);
  EXPECT_EQ(id_at(analysis, 0), "h1");
  EXPECT_EQ(id_at(analysis, 1), "h2");
  EXPECT_EQ(id_at(analysis, 2), "h3");
  EXPECT_EQ(analysis.groups[1].op_type, "Conv2d");
  EXPECT_EQ(judged(analysis).first_divergence, "h2");
  // B's input is A (45 dB): B introduced 37 dB; C's input is B: C introduced 1 dB.
  ASSERT_TRUE(analysis.groups[1].introduced_db);
  EXPECT_DOUBLE_EQ(*analysis.groups[1].introduced_db, 37.0);
  EXPECT_DOUBLE_EQ(*analysis.groups[2].introduced_db, 1.0);
  // Ranked by the noise each adds itself (no encoding: beyond its input's): B 10^-0.8 - 10^-4.5,
  // C 10^-0.7 - 10^-0.8, A (no input) 10^-4.5.
  const report::RunReport run = judged(analysis);
  ASSERT_EQ(run.introducers.size(), 3u);
  EXPECT_EQ(run.introducers[0].id, "h2");
  EXPECT_NEAR(*run.introducers[0].added_noise_db,
              10 * std::log10(std::pow(10, -0.8) - std::pow(10, -4.5)), 1e-9);
  EXPECT_DOUBLE_EQ(run.introducers[0].introduced_db, 37.0);
  EXPECT_EQ(run.introducers[1].id, "h3");
  EXPECT_NEAR(*run.introducers[1].added_noise_db,
              10 * std::log10(std::pow(10, -0.7) - std::pow(10, -0.8)), 1e-9);
  EXPECT_EQ(run.introducers[2].id, "h1");
  EXPECT_NEAR(*run.introducers[2].added_noise_db, -45.0, 1e-9);
}

TEST_F(OpOrder, GroupsMissingFromAPartialGraphStayAfterTheirCapturePredecessor) {
  add_group("D", 4, 50.0);  // captured last, not in the graph
  std::vector<GraphNode> graph = chain();
  const RunAnalysis analysis = analyze(run_, graph);
  ASSERT_EQ(analysis.groups.size(), 4u);
  // D follows B (captured right before it), which sits at rank 1.
  EXPECT_EQ(id_at(analysis, 0), "h1");
  EXPECT_EQ(id_at(analysis, 1), "h2");
  EXPECT_EQ(id_at(analysis, 2), "h4");
  EXPECT_EQ(id_at(analysis, 3), "h3");
}

TEST_F(OpOrder, NanIsIntroducedByTheOpWhoseInputsHadNone) {
  run_ = {};
  tensors_.clear();
  add_group("A", 1, 45.0);
  add_group("B", 2, 40.0, 3);  // NaN appear here: SQNR over the finite pairs still looks fine
  add_group("C", 3, 35.0, 5);  // and propagate
  const RunAnalysis analysis = analyze(run_, chain());
  auto has_flag = [&](size_t i) {
    const auto& flags = analysis.groups[i].flags;
    return std::find(flags.begin(), flags.end(), Flag::kNonFiniteIntroduced) != flags.end();
  };
  EXPECT_FALSE(has_flag(0));
  EXPECT_TRUE(has_flag(1));
  EXPECT_FALSE(has_flag(2)) << "C only carries B's NaN";
  const report::RunReport run = judged(analysis);
  EXPECT_EQ(run.groups[2].verdict, Verdict::kFail) << "but still fails: it has NaN";
  EXPECT_EQ(run.first_divergence, "h2");
  ASSERT_FALSE(run.introducers.empty());
  EXPECT_EQ(run.introducers[0].id, "h2");
  EXPECT_TRUE(std::isinf(*run.introducers[0].added_noise_db));
  EXPECT_TRUE(std::isinf(*analysis.groups[1].introduced_db));
  // C's finite pairs lose 5 dB, but what reaches it is NaN: its figures weigh nothing it adds.
  for (const report::Introducer& item : run.introducers) EXPECT_NE(item.id, "h3");
}

// Issue 35: a graph input compared exact made the first op "introduce" all of float32's resolution
// (144.5 - 50 = 94.5 dB) and lead the introducers. Ranked by the noise each adds, an ordinary first
// op (50 dB) adds 10^-5 of its signal, less than the op that breaks the chain (C, 20 dB).
TEST_F(OpOrder, AnOrdinaryFirstOpDoesNotLeadTheIntroducers) {
  run_ = {};
  tensors_.clear();
  add_group("input", 9, std::numeric_limits<double>::infinity());
  add_group("A", 1, 50.0);
  add_group("B", 2, 45.0);
  add_group("C", 3, 20.0);
  std::vector<GraphNode> graph = chain();
  graph.push_back({"input", "Input", {}, {"input_out"}, {9}});
  graph[2].inputs = {"input_out"};
  const RunAnalysis analysis = analyze(run_, graph);
  ASSERT_EQ(id_at(analysis, 1), "h1");
  EXPECT_NEAR(*analysis.groups[1].introduced_db, 144.49439791871097 - 50, 1e-9);
  const report::RunReport run = judged(analysis);
  ASSERT_EQ(run.introducers.size(), 3u);
  EXPECT_EQ(run.introducers[0].id, "h3");
  EXPECT_NEAR(*run.introducers[0].added_noise_db,
              10 * std::log10(std::pow(10, -2.0) - std::pow(10, -4.5)), 1e-9);
  EXPECT_EQ(run.introducers[1].id, "h2");
  EXPECT_EQ(run.introducers[2].id, "h1");
  EXPECT_NEAR(*run.introducers[2].added_noise_db, -50.0, 1e-6);
}

// Issue 17: an exact input (+inf dB) and a passing 35 dB output gave "+inf dB introduced". An
// exact SQNR counts as float32's resolution, 20 log10(2^24) = 144.494397918711 dB, so B lost
// 144.494397918711 - 35 = 109.494397918711 dB; C (input 35, output 7) lost 28 dB; A (no input) has
// none; a group exact in and out lost nothing.
TEST_F(OpOrder, AnExactInputGivesAFiniteIntroducedError) {
  const double inf = std::numeric_limits<double>::infinity();
  run_ = {};
  tensors_.clear();
  add_group("A", 1, inf);
  add_group("B", 2, 35.0);
  add_group("C", 3, 7.0);
  const RunAnalysis analysis = analyze(run_, chain());
  ASSERT_EQ(analysis.groups.size(), 3u);
  EXPECT_FALSE(analysis.groups[0].introduced_db);
  ASSERT_TRUE(analysis.groups[1].introduced_db);
  EXPECT_NEAR(*analysis.groups[1].introduced_db, 109.494397918711, 1e-9);
  EXPECT_EQ(judged(analysis).groups[1].verdict, Verdict::kPass);
  ASSERT_TRUE(analysis.groups[2].introduced_db);
  EXPECT_DOUBLE_EQ(*analysis.groups[2].introduced_db, 28.0);
  // By the noise each adds, C (7 dB) comes before B (35 dB); A, exact, adds none.
  const report::RunReport run = judged(analysis);
  ASSERT_EQ(run.introducers.size(), 2u);
  EXPECT_EQ(run.introducers[0].id, "h3");
  EXPECT_EQ(run.introducers[1].id, "h2");
  EXPECT_NEAR(run.introducers[1].introduced_db, 109.494397918711, 1e-9);
}

TEST(IntroducedError, IsTheClampedSqnrLoss) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(introduced_db(45, 8), 37);
  EXPECT_DOUBLE_EQ(introduced_db(inf, 35), 144.49439791871097 - 35);
  EXPECT_DOUBLE_EQ(introduced_db(inf, inf), 0) << "exact in and out";
  EXPECT_DOUBLE_EQ(introduced_db(200, 150), 0) << "both above float32's resolution";
  EXPECT_DOUBLE_EQ(introduced_db(-inf, -inf), 0);
  EXPECT_DOUBLE_EQ(introduced_db(20, 30), -10) << "a gain";
  EXPECT_TRUE(std::isinf(introduced_db(20, -inf)));
}

// A ReLU output encoded so that the lowest raw value means 0.0 holds many exact zeros there:
// that is not clipping. Values piled at the other end are.
TEST_F(OpOrder, SaturationFlagIgnoresTheEndThatEncodesZero) {
  run_ = {};
  tensors_.clear();
  add_group("relu", 1, 40.0);
  TensorEntry& device = tensors_.back();
  device.dtype = DType::kSFixed8;
  device.quant.scales = {0.05};
  device.quant.offsets = {128};  // QNN: real = (q + 128) * 0.05, so q = -128 is 0.0
  Metrics& m = *run_.pairs.back().metrics;
  m.elements = 1000;
  m.saturated_low = 500;
  m.saturation = 0.5;
  auto flagged = [&] {
    const auto flags = analyze(run_, {}).groups[0].flags;
    return std::find(flags.begin(), flags.end(), Flag::kSaturation) != flags.end();
  };
  EXPECT_FALSE(flagged()) << "half zeros at the zero end";
  m.saturated_high = 20;  // 2% at 127, which means 12.75: clipped
  EXPECT_TRUE(flagged());
  m.saturated_high = 0;
  device.quant.offsets = {0};  // now -128 means -6.4: those 50% are clipped
  EXPECT_TRUE(flagged());
}

TEST_F(OpOrder, ACyclicGraphStillOrdersEveryGroupOnce) {
  std::vector<GraphNode> graph = chain();
  graph[2].inputs = {"C_out"};  // A <- C: a cycle A -> B -> C -> A
  const RunAnalysis analysis = analyze(run_, graph);
  ASSERT_EQ(analysis.groups.size(), 3u);
  std::vector<std::string> ids;
  for (size_t i = 0; i < 3; ++i) ids.push_back(id_at(analysis, i));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"h1", "h2", "h3"}));
}

// Issue 33: on HTP a conv+bn+relu is one device tensor carrying the three debug handles. The
// group's inputs are the inputs its members take from outside it (A), not the previous group in
// capture order (X, a side branch): its introduced error is measured against A.
TEST_F(OpOrder, AFusedGroupTakesTheInputsOfEveryMemberFromOutsideIt) {
  run_ = {};
  tensors_.clear();
  add_group("A", 1, 40.0);
  add_group("X", 5, 20.0);
  add_group("relu", 4, 30.0);
  // The fused group: conv (h2) and bn (h3) join relu's group; the device tensor has all three.
  Group& fused = run_.alignment.groups.back();
  for (auto [op, handle] : {std::pair{"conv", 2}, {"bn", 3}}) {
    TensorEntry& member = tensors_.emplace_back();
    member.name = std::string(op) + "_out";
    member.handles = {handle};
    fused.ref_members.insert(fused.ref_members.end() - 1, &member);
  }
  fused.id = "h2-4";
  add_group("C", 6, 29.0);
  const std::vector<GraphNode> graph = {{"A", "Relu", {"input"}, {"A_out"}, {1}},
                                        {"X", "Relu", {"input"}, {"X_out"}, {5}},
                                        {"conv", "Conv2d", {"A_out", "w"}, {"conv_out"}, {2}},
                                        {"bn", "BatchNorm", {"conv_out"}, {"bn_out"}, {3}},
                                        {"relu", "Relu", {"bn_out"}, {"relu_out"}, {4}},
                                        {"C", "Add", {"relu_out", "X_out"}, {"C_out"}, {6}}};
  const RunAnalysis analysis = analyze(run_, graph);
  ASSERT_EQ(analysis.groups.size(), 4u);
  const auto at = [&](const std::string& id) {
    for (size_t i = 0; i < analysis.groups.size(); ++i) {
      if (id_at(analysis, i) == id) return i;
    }
    ADD_FAILURE() << id;
    return size_t{0};
  };
  const GroupFinding& group = analysis.groups[at("h2-4")];
  EXPECT_EQ(group.op_type, "Relu") << "the chain's last op names it";
  EXPECT_EQ(group.graph_inputs, std::vector<size_t>{at("h1")});
  EXPECT_EQ(group.inputs, std::vector<size_t>{at("h1")});
  ASSERT_TRUE(group.introduced_db);
  EXPECT_DOUBLE_EQ(*group.introduced_db, 10.0) << "40 dB in (A), 30 dB out";
  EXPECT_EQ(analysis.groups[at("h6")].graph_inputs, (std::vector<size_t>{at("h2-4"), at("h5")}));
}

// An op no group holds passes its inputs through: B was not captured, so C's input is A.
TEST_F(OpOrder, AnOpNoGroupHoldsIsPassedThrough) {
  run_ = {};
  tensors_.clear();
  add_group("A", 1, 45.0);
  add_group("C", 3, 7.0);
  const RunAnalysis analysis = analyze(run_, chain());
  ASSERT_EQ(analysis.groups.size(), 2u);
  EXPECT_EQ(analysis.groups[1].graph_inputs, std::vector<size_t>{0});
  EXPECT_DOUBLE_EQ(*analysis.groups[1].introduced_db, 38.0);
}

// Issue 33: a pair with no finite element pair (n = 0) is no evidence: it fails under any policy,
// is flagged, has no SQNR and feeds no introduced error downstream.
TEST_F(OpOrder, NoEvidenceFailsAndIsFlagged) {
  Metrics& b = *run_.pairs[2].metrics;  // B
  b.n = 0;
  b.ref_nan = b.dev_nan = b.elements;
  b.sqnr_db = std::numeric_limits<double>::infinity();  // what an empty sum gives
  Policy lenient =
      Policy::from_json(R"({"default": {"fail_below_db": -1000, "warn_below_db": -1000}})", "test")
          .value();
  const RunAnalysis analysis = analyze(run_, chain());
  const GroupFinding& group = analysis.groups[1];
  ASSERT_EQ(id_at(analysis, 1), "h2");
  EXPECT_FALSE(group.sqnr_db);
  EXPECT_NE(std::find(group.flags.begin(), group.flags.end(), Flag::kNoEvidence),
            group.flags.end());
  const report::RunReport run = judged(analysis, lenient);
  EXPECT_EQ(run.groups[1].verdict, Verdict::kFail);
  EXPECT_EQ(run.first_divergence, "h2");
  // C's input figure comes from past B, from A (45 dB): 45 - 7 = 38 dB.
  EXPECT_DOUBLE_EQ(*analysis.groups[2].introduced_db, 38.0);
}

}  // namespace
}  // namespace qd::compare
