#include "qnn_debug/compare/policy.h"
#include "../common/status_matchers.h"
#include "qnn_debug/pipeline/settings.h"

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/compare/parts.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "../common/text.h"

using qd::testing::IsOk;

namespace qd::compare {
namespace {

TEST(Policy, DefaultsFailBelowTenAndWarnBelowTwenty) {
  const Policy policy;
  EXPECT_EQ(policy.judge(9.99, "", "t", "FLOAT_32"), Verdict::kFail);
  EXPECT_EQ(policy.judge(10.0, "", "t", "FLOAT_32"), Verdict::kWarn);
  EXPECT_EQ(policy.judge(19.99, "", "t", "FLOAT_32"), Verdict::kWarn);
  EXPECT_EQ(policy.judge(20.0, "", "t", "FLOAT_32"), Verdict::kPass);
  EXPECT_EQ(policy.judge(std::numeric_limits<double>::infinity(), "", "t", ""), Verdict::kPass);
  EXPECT_EQ(policy.judge(std::nan(""), "", "t", ""), Verdict::kFail);
}

TEST(Policy, FirstMatchingRuleWinsByOpTypeNameAndDtype) {
  auto policy = Policy::from_json(R"({
    "default": {"fail_below_db": 15, "warn_below_db": 25},
    "rules": [
      {"op_type": "Softmax", "fail_below_db": 5, "warn_below_db": 8},
      {"name": "^lm_head", "fail_below_db": 30, "warn_below_db": 40},
      {"dtype": "SFIXED_POINT_16", "name": "attn", "fail_below_db": 20, "warn_below_db": 30}
    ]})",
                                  "p.json");
  ASSERT_THAT(policy, IsOk());
  EXPECT_EQ(policy->judge(12, "Conv2d", "conv", "SFIXED_POINT_8"), Verdict::kFail);  // default 15
  EXPECT_EQ(policy->judge(6, "Softmax", "lm_head_softmax", ""), Verdict::kWarn);     // rule 0 first
  EXPECT_EQ(policy->judge(35, "MatMul", "lm_head_proj", ""), Verdict::kWarn);        // rule 1
  EXPECT_EQ(policy->thresholds_for("MatMul", "q_attn", "SFIXED_POINT_16").second, 2);
  EXPECT_EQ(policy->thresholds_for("MatMul", "q_attn", "SFIXED_POINT_8").second, -1);
  // The policy as used round-trips.
  auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->rules().size(), 3u);
  EXPECT_EQ(again->defaults().fail_below_db, 15);
}

TEST(Policy, RejectsMalformedFilesWithTheFileName) {
  for (const char* text :
       {"[1, 2]", "{\"default\": 3}", "{\"rules\": 3}", "{\"default\": {\"fail_below_db\": \"x\"}}",
        "{\"rules\": [{\"name\": \"(unclosed\"}]}",
        "{\"default\": {\"fail_below_db\": 30, \"warn_below_db\": 20}}", "not json"}) {
    auto policy = Policy::from_json(text, "bad.json");
    ASSERT_FALSE(policy.is_ok()) << text;
    EXPECT_EQ(policy.status().message().rfind("bad.json: invalid policy", 0), 0u)
        << policy.status().message();
  }
  EXPECT_EQ(pipeline::load_policy("/nonexistent/policy.json").status().code(),
            ErrorCode::kNotFound);
}

}  // namespace
}  // namespace qd::compare

namespace qd::compare {
namespace {

std::string refusal(const std::string& text) {
  const Result<Policy> policy = Policy::from_json(text, "p.json");
  EXPECT_FALSE(policy.is_ok()) << text;
  return policy.is_ok() ? "" : policy.status().message();
}

using testing::contains;

// A misspelt key used to pass silently for the defaults it did not change.
TEST(Policy, UnknownKeysAreRefusedWithTheAcceptedOnes) {
  const std::string top = refusal(R"({"defaults": {"fail_below": 10}})");
  EXPECT_TRUE(contains(top, "p.json")) << top;
  EXPECT_TRUE(contains(top, "unknown key \"defaults\"")) << top;
  EXPECT_TRUE(contains(top, "accepted: default, rules, min_matched_fraction")) << top;
  const std::string nested = refusal(R"({"default": {"fail_below": 10}})");
  EXPECT_TRUE(contains(nested, "default: unknown key \"fail_below\"")) << nested;
  EXPECT_TRUE(contains(nested, "fail_below_db, warn_below_db")) << nested;
  const std::string rule = refusal(R"({"rules": [{"op": "Softmax", "fail_below_db": 5}]})");
  EXPECT_TRUE(contains(rule, "rules[0]: unknown key \"op\"")) << rule;
  EXPECT_TRUE(contains(refusal(R"({"rules": [{"op_type": 3}]})"), "rules[0].op_type must be"));
  EXPECT_TRUE(contains(refusal(R"({"min_matched_fraction": 1.5})"), "from 0 to 1"));
  EXPECT_TRUE(contains(refusal(R"({"min_top1_agreement": "high"})"), "min_top1_agreement"));
}

// Every field is checked for its type, and the message names it by its JSON path.
TEST(Policy, EveryFieldHasItsTypeCheckedWithItsPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"default": 3})", "p.json: invalid policy: default must be an object"},
      {R"({"default": [10, 20]})", "default must be an object"},
      {R"({"default": {"warn_below_db": true}})", "default.warn_below_db must be a number"},
      {R"({"default": {"fail_below_db": null}})", "default.fail_below_db must be a number"},
      {R"({"rules": {}})", "rules must be an array"},
      {R"({"rules": [3]})", "rules[0] must be an object"},
      {R"({"rules": [{"op_type": "Add"}, {"dtype": []}]})", "rules[1].dtype must be a string"},
      {R"({"rules": [{"name": {}}]})", "rules[0].name must be a string"},
      {R"({"rules": [{"fail_below_db": "5"}]})", "rules[0].fail_below_db must be a number"},
      {R"({"rules": [{"warn_below_db": [1]}]})", "rules[0].warn_below_db must be a number"},
      {R"({"min_matched_fraction": "all"})", "min_matched_fraction must be a number from 0 to 1"},
      {R"({"min_top5_agreement": null})", "min_top5_agreement must be a number from 0 to 1"},
      {R"({"min_top1_agreement": false})", "min_top1_agreement must be a number from 0 to 1"}};
  for (const auto& [text, expected] : cases) {
    const std::string message = refusal(text);
    EXPECT_TRUE(contains(message, expected)) << text << "\n" << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// nlohmann's parser and serializer recurse per level: deep nesting is refused before parsing,
// wherever it is, with the line and column.
TEST(Policy, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& text :
       {R"({"rules": [], "comment": )" + deep + "}", R"({"default": )" + deep + "}", deep}) {
    const std::string message = refusal(text);
    EXPECT_EQ(message.rfind("p.json: invalid policy: nested deeper than 64 levels at line 1", 0),
              0u)
        << message;
  }
  const std::string ok_depth = R"({"rules": [{"op_type": "Add"}]})";
  EXPECT_THAT(Policy::from_json(ok_depth, "p.json"), IsOk());
}

TEST(Policy, RunRulesRoundTripThroughJson) {
  auto policy = Policy::from_json(
      R"({"min_matched_fraction": 0.75, "min_top1_agreement": 0.9, "min_top5_agreement": 1})",
      "p.json");
  ASSERT_THAT(policy, IsOk());
  auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->run_rules().min_matched_fraction, 0.75);
  EXPECT_EQ(again->run_rules().min_top1_agreement, 0.9);
  EXPECT_EQ(again->run_rules().min_top5_agreement, 1.0);
  EXPECT_FALSE(Policy().run_rules().min_top1_agreement.has_value());
}

TEST(Policy, NothingComparedAlwaysFails) {
  const RunJudgement judgement = Policy().judge_run({12, 0, 0, std::nullopt, std::nullopt});
  EXPECT_EQ(judgement.verdict, Verdict::kFail);
  ASSERT_EQ(judgement.reasons.size(), 1u);
  EXPECT_TRUE(contains(judgement.reasons[0], "no tensor pair was compared"));
  EXPECT_EQ(Policy().judge_run({12, 3, 3, std::nullopt, std::nullopt}).verdict, Verdict::kPass);
}

TEST(Policy, MatchedFractionAndAgreementsGateTheRun) {
  auto policy = Policy::from_json(
      R"({"min_matched_fraction": 0.5, "min_top1_agreement": 0.9, "min_top5_agreement": 0.99})",
      "p.json");
  ASSERT_THAT(policy, IsOk());
  EXPECT_EQ(policy->judge_run({10, 5, 5, 0.9, 0.99}).verdict, Verdict::kPass);
  const RunJudgement low = policy->judge_run({10, 4, 4, 0.85, 1.0});
  EXPECT_EQ(low.verdict, Verdict::kFail);
  ASSERT_EQ(low.reasons.size(), 2u);
  EXPECT_TRUE(contains(low.reasons[0], "4 of 10 reference tensors (40.0%)")) << low.reasons[0];
  EXPECT_TRUE(contains(low.reasons[1], "top-1 agreement 85.0% is below the policy's 90.0%"))
      << low.reasons[1];
  const RunJudgement unmeasured = policy->judge_run({10, 10, 10, std::nullopt, std::nullopt});
  EXPECT_EQ(unmeasured.verdict, Verdict::kFail);
  EXPECT_TRUE(contains(unmeasured.reasons[0], "no classifier output was found"));
}

// Issue 17: a reference tensor without a device counterpart, in a run whose other pairs were
// compared. A graph output fails by default; others only warn (pass here) unless
// max_unmatched_reference sets a limit for every kind.
TEST(Policy, UnmatchedReferenceTensorsAndGraphOutputs) {
  RunFacts facts{12, 11, 11, std::nullopt, std::nullopt};
  facts.unmatched_reference_tensors = 1;
  EXPECT_EQ(Policy().judge_run(facts).verdict, Verdict::kPass) << "an intermediate one warns";
  facts.unmatched_graph_outputs = {"argmax"};
  const RunJudgement missing = Policy().judge_run(facts);
  EXPECT_EQ(missing.verdict, Verdict::kFail);
  ASSERT_EQ(missing.reasons.size(), 1u);
  EXPECT_EQ(missing.reasons[0],
            "graph output 'argmax' has no device counterpart (a missing graph output fails unless "
            "the policy's max_unmatched_reference allows it)");

  auto allow = Policy::from_json(R"({"max_unmatched_reference": 1})", "p.json");
  ASSERT_THAT(allow, IsOk());
  EXPECT_EQ(allow->judge_run(facts).verdict, Verdict::kPass);
  auto strict = Policy::from_json(R"({"max_unmatched_reference": 0})", "p.json");
  ASSERT_THAT(strict, IsOk());
  facts.unmatched_graph_outputs.clear();
  const RunJudgement over = strict->judge_run(facts);
  EXPECT_EQ(over.verdict, Verdict::kFail);
  ASSERT_EQ(over.reasons.size(), 1u);
  EXPECT_EQ(over.reasons[0],
            "1 reference tensor has no device counterpart, above the policy's "
            "max_unmatched_reference 0");
  auto again = Policy::from_json(strict->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->run_rules().max_unmatched_reference, 0u);
  EXPECT_FALSE(Policy().run_rules().max_unmatched_reference.has_value());
  for (const char* bad :
       {R"({"max_unmatched_reference": -1})", R"({"max_unmatched_reference": 1.5})",
        R"({"max_unmatched_reference": "2"})"}) {
    auto refused = Policy::from_json(bad, "p.json");
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_TRUE(contains(refused.status().message(), "max_unmatched_reference must be a whole"))
        << refused.status().message();
  }
}

// Issue 17: names matched but shapes did not; the reason said "nothing matched".
TEST(Policy, MatchedButNotComparedSaysWhy) {
  RunFacts facts{1, 0, 0, std::nullopt, std::nullopt};
  facts.not_compared = {
      "reference 'b' and device 'b' matched (exact_name) but could not be "
      "compared: shape mismatch"};
  const RunJudgement judgement = Policy().judge_run(facts);
  EXPECT_EQ(judgement.verdict, Verdict::kFail);
  ASSERT_EQ(judgement.reasons.size(), 1u);
  EXPECT_EQ(judgement.reasons[0],
            "no tensor pair was compared: 1 pair matched but could not be compared; reference "
            "'b' and device 'b' matched (exact_name) but could not be compared: shape mismatch");
}

TEST(Policy, KernelThresholdsJudgeTheKernelPartByLsbOrDb) {
  auto policy = Policy::from_json(R"({"gate": "kernel",
    "default": {"kernel_fail_above_lsb": 1, "kernel_warn_above_lsb": 0.5},
    "rules": [{"op_type": "Softmax", "kernel_fail_below_db": 30, "kernel_warn_below_db": 40}]})",
                                  "p.json");
  ASSERT_THAT(policy, IsOk());
  EXPECT_EQ(policy->gate(), Gate::kKernel);
  OutputFacts conv{"Conv2d", "conv", "SFIXED_POINT_8"};
  conv.sqnr_db = 5;  // the LSB bound judges a quantized output, not its SQNR
  conv.lsb_max = 0.4;
  EXPECT_EQ(policy->judge_kernel_output(conv).verdict, Verdict::kPass);
  conv.lsb_max = 0.75;
  EXPECT_EQ(policy->judge_kernel_output(conv).verdict, Verdict::kWarn);
  conv.lsb_max = 1.5;
  EXPECT_EQ(policy->judge_kernel_output(conv).verdict, Verdict::kFail);
  OutputFacts fp32{"Conv2d", "conv", "FLOAT_32"};  // no LSB: the total's dB thresholds
  fp32.sqnr_db = 15;
  EXPECT_EQ(policy->judge_kernel_output(fp32).verdict, Verdict::kWarn);
  OutputFacts softmax{"Softmax", "softmax", "UFIXED_POINT_16"};  // rule 0: dB and inherited LSB
  softmax.sqnr_db = 35;
  softmax.lsb_max = 0.1;
  EXPECT_EQ(policy->judge_kernel_output(softmax).verdict, Verdict::kWarn);
  softmax.lsb_max = 3;
  EXPECT_EQ(policy->judge_kernel_output(softmax).verdict, Verdict::kFail);
  // The policy as used round-trips, kernel thresholds and gate included.
  auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->to_json(), policy->to_json());
}

TEST(Policy, BadGateOrKernelThresholdsAreRefusedWithTheFileName) {
  for (const char* text :
       {R"({"gate": "device"})", R"({"gate": 1})",
        R"({"default": {"kernel_fail_above_lsb": 1, "kernel_warn_above_lsb": 2}})",
        R"({"default": {"kernel_fail_below_db": 20, "kernel_warn_below_db": 10}})",
        R"({"default": {"kernel_fail_above_lsb": -1}})",
        R"({"rules": [{"kernel_fail_above_lsb": "1"}]})"}) {
    const auto policy = Policy::from_json(text, "bad.json");
    ASSERT_FALSE(policy.is_ok()) << text;
    EXPECT_NE(policy.status().message().find("bad.json: invalid policy"), std::string::npos)
        << policy.status().message();
  }
}

// The excess rule (docs/metrics.md, 6a): a measured own error judges alone, an estimate only with
// its dB and below the line it judges under; a rule can tune it or switch it off.
TEST(Policy, TheExcessRuleJudgesTheOpsOwnError) {
  auto policy = Policy::from_json(R"({"rules": [{"op_type": "Linear", "excess": false},
    {"op_type": "Softmax", "excess": {"fail_noise": 100, "judges_below_db": 50}}]})",
                                  "p.json");
  ASSERT_THAT(policy, IsOk());
  OutputFacts probs{"Add", "layers.5.attn.probs", "UFIXED_POINT_16"};
  probs.sqnr_db = 11.5;  // above the fail line: the lines warn
  probs.excess_db = 45;
  probs.excess_noise_ratio = 320;
  EXPECT_EQ(policy->judge_output(probs).verdict, Verdict::kFail);
  probs.excess_db = 2;  // an estimate with little dB: the op's gain, not its kernel
  EXPECT_EQ(policy->judge_output(probs).verdict, Verdict::kWarn);
  probs.excess_measured = true;  // measured by replay, the ratio alone judges
  EXPECT_EQ(policy->judge_output(probs).verdict, Verdict::kFail);
  probs.sqnr_db = 40;  // above judges_below_db: a measured excess warns
  EXPECT_EQ(policy->judge_output(probs).verdict, Verdict::kWarn);
  probs.excess_measured = false;  // an estimate above it does not judge
  probs.excess_db = 45;
  EXPECT_EQ(policy->judge_output(probs).verdict, Verdict::kPass);
  OutputFacts linear = probs;
  linear.op_type = "Linear";
  linear.sqnr_db = 11.5;
  EXPECT_EQ(policy->judge_output(linear).verdict, Verdict::kWarn);  // the lines only
  OutputFacts softmax = linear;
  softmax.op_type = "Softmax";
  softmax.excess_noise_ratio = 99;  // below its rule's fail_noise: warns
  EXPECT_EQ(policy->judge_output(softmax).verdict, Verdict::kWarn);
  auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->to_json(), policy->to_json());
  EXPECT_NE(policy->to_json().find(R"("excess":false)"), std::string::npos) << policy->to_json();
  for (const char* text :
       {R"({"default": {"excess": 1}})", R"({"default": {"excess": {"fail_nois": 3}}})",
        R"({"default": {"excess": {"fail_noise": -1}}})",
        R"({"default": {"excess": {"fail_noise": 2, "warn_noise": 3}}})"}) {
    const auto bad = Policy::from_json(text, "bad.json");
    ASSERT_FALSE(bad.is_ok()) << text;
    EXPECT_NE(bad.status().message().find("excess"), std::string::npos) << bad.status().message();
  }
}

// Issue 35: an all-zero reference reads SQNR -inf and failed on any 1-LSB difference. Its RMS
// below one step of the device encoding, it is judged on its largest error in steps instead.
TEST(Policy, ANearZeroReferenceIsJudgedInLsb) {
  // An int8 output, scale 0.1, all-zero reference; the device is off by 1 step (0.1) in 2 of 100.
  Metrics m;
  m.elements = m.n = 100;
  m.mse = 2 * 0.01 / 100;
  m.rmse = std::sqrt(m.mse);
  m.max_abs = 0.1;
  m.sqnr_db = sqnr_of(0, 2 * 0.01);
  m.lsb_max = 1;
  m.noise_ratio = m.rmse / (0.1 / std::sqrt(12.0));
  ASSERT_TRUE(reference_rms_lsb(m).has_value());
  EXPECT_DOUBLE_EQ(*reference_rms_lsb(m), 0.0);
  EXPECT_TRUE(near_zero_reference(m));
  const Policy defaults;
  OutputFacts facts = output_facts("Conv2d", "conv_out", "SFIXED_POINT_8", false, &m);
  EXPECT_TRUE(facts.near_zero_reference);
  EXPECT_EQ(defaults.judge_output(facts).verdict, Verdict::kPass) << "1 LSB: within the rule";
  EXPECT_EQ(defaults.judge_kernel_output(facts).verdict, Verdict::kPass);
  facts.lsb_max = 2;
  EXPECT_EQ(defaults.judge_output(facts).verdict, Verdict::kWarn);
  facts.lsb_max = 5;
  EXPECT_EQ(defaults.judge_output(facts).verdict, Verdict::kFail) << "5 LSB: beyond 3";
  EXPECT_EQ(defaults.judge_kernel_output(facts).verdict, Verdict::kFail);

  // A reference of RMS 0.005 (a twentieth of a step) with the same error: 10 log10(2.5e-5 / 2e-4).
  m.sqnr_db = 10 * std::log10(0.000025 / 0.0002);
  EXPECT_NEAR(*reference_rms_lsb(m), 0.05, 1e-12);
  EXPECT_TRUE(near_zero_reference(m));
  // RMS 0.08 (0.8 steps, what a 25x too-wide encoding leaves): the SQNR judges.
  m.sqnr_db = 10 * std::log10(0.0064 / 0.0002);
  EXPECT_FALSE(near_zero_reference(m));
  Metrics float_pair = m;  // no encoding: the rule does not apply
  float_pair.noise_ratio.reset();
  float_pair.lsb_max.reset();
  float_pair.sqnr_db = sqnr_of(0, 1);
  EXPECT_FALSE(near_zero_reference(float_pair));
  EXPECT_EQ(
      defaults.judge_output(output_facts("Conv2d", "x", "FLOAT_32", false, &float_pair)).verdict,
      Verdict::kFail);

  auto tuned = Policy::from_json(R"({"default": {"near_zero": {"fail_above_lsb": 8}},
    "rules": [{"op_type": "Softmax", "near_zero": false}]})",
                                 "p.json");
  ASSERT_THAT(tuned, IsOk());
  facts.lsb_max = 5;
  EXPECT_EQ(tuned->judge_output(facts).verdict, Verdict::kWarn);
  facts.op_type = "Softmax";
  EXPECT_EQ(tuned->judge_output(facts).verdict, Verdict::kFail) << "off: the SQNR (-inf) judges";
  auto again = Policy::from_json(tuned->to_json(), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->to_json(), tuned->to_json());
  for (const char* text :
       {R"({"default": {"near_zero": 1}})", R"({"default": {"near_zero": {"fail_above": 3}}})",
        R"({"default": {"near_zero": {"fail_above_lsb": 1, "warn_above_lsb": 2}}})"}) {
    const auto bad = Policy::from_json(text, "bad.json");
    ASSERT_FALSE(bad.is_ok()) << text;
    EXPECT_NE(bad.status().message().find("near_zero"), std::string::npos)
        << bad.status().message();
  }
}

TEST(Attribution, TheOpsOwnErrorDecidesBeyondTheUncertainty) {
  // Nothing to explain: none.
  EXPECT_EQ(attribute(Verdict::kPass, Verdict::kPass, {1e-3, 0}, {0, 0}, false).kind,
            AttributionKind::kNone);
  // A rounding 100x the kernel's own (measured) error: quantization by 20 dB.
  Attribution a = attribute(Verdict::kWarn, Verdict::kPass, {1e-2, 0}, {1e-4, 0}, false);
  EXPECT_EQ(a.kind, AttributionKind::kQuantization);
  EXPECT_NEAR(a.margin_db, 20, 1e-9);
  EXPECT_FALSE(a.inherited);
  // A kernel that adds 4x the rounding, and the input carries more than both: kernel, inherited.
  a = attribute(Verdict::kFail, Verdict::kFail, {1e-4, 0}, {4e-4, 0}, true);
  EXPECT_EQ(a.kind, AttributionKind::kKernel);
  EXPECT_TRUE(a.inherited);
  EXPECT_NEAR(a.margin_db, 10 * std::log10(4.0), 1e-9);
  // Within 3 dB of each other: within noise, whichever is larger.
  a = attribute(Verdict::kWarn, Verdict::kPass, {1e-4, 0}, {1.5e-4, 0}, false);
  EXPECT_EQ(a.kind, AttributionKind::kWithinNoise);
  // 10x apart, but the kernel estimate's uncertainty covers the gap: within noise.
  a = attribute(Verdict::kWarn, Verdict::kPass, {1e-4, 0}, {1e-3, 9e-4}, false);
  EXPECT_EQ(a.kind, AttributionKind::kWithinNoise);
  EXPECT_NEAR(a.margin_db, 10, 1e-9);
  // An exact kernel against a lossy quantization: quantization at the cap.
  a = attribute(Verdict::kWarn, Verdict::kPass, {1e-3, 0}, {0, 0}, false);
  EXPECT_EQ(a.kind, AttributionKind::kQuantization);
  EXPECT_DOUBLE_EQ(a.margin_db, kExactSqnrDb);
  // Both exact: nothing leads.
  EXPECT_EQ(attribute(Verdict::kWarn, Verdict::kPass, {0, 0}, {0, 0}, false).kind,
            AttributionKind::kWithinNoise);
}

}  // namespace
}  // namespace qd::compare
