#include "qnn_debug/compare/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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
  ASSERT_TRUE(policy.is_ok()) << policy.status().message();
  EXPECT_EQ(policy->judge(12, "Conv2d", "conv", "SFIXED_POINT_8"), Verdict::kFail);  // default 15
  EXPECT_EQ(policy->judge(6, "Softmax", "lm_head_softmax", ""), Verdict::kWarn);     // rule 0 first
  EXPECT_EQ(policy->judge(35, "MatMul", "lm_head_proj", ""), Verdict::kWarn);        // rule 1
  EXPECT_EQ(policy->thresholds_for("MatMul", "q_attn", "SFIXED_POINT_16").second, 2);
  EXPECT_EQ(policy->thresholds_for("MatMul", "q_attn", "SFIXED_POINT_8").second, -1);
  // The policy as used round-trips.
  auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_TRUE(again.is_ok());
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
  EXPECT_EQ(Policy::load("/nonexistent/policy.json").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace qd::compare
