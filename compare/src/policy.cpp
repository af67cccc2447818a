#include "qnn_debug/compare/policy.h"

#include <re2/re2.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace qd::compare {

struct Policy::Compiled {
  std::vector<std::unique_ptr<RE2>> patterns;  // null where a rule has no name pattern
};

namespace {

using nlohmann::json;

Status policy_error(const std::string& source, const std::string& what) {
  return error(ErrorCode::kInvalidArgument, source + ": invalid policy: " + what);
}

Result<Thresholds> read_thresholds(const json& node, Thresholds fallback, const std::string& source,
                                   const std::string& where) {
  if (!node.is_object()) return policy_error(source, where + " must be an object");
  for (const char* key : {"fail_below_db", "warn_below_db"}) {
    if (node.contains(key) && !node[key].is_number()) {
      return policy_error(source, where + "." + key + " must be a number");
    }
  }
  Thresholds t = fallback;
  t.fail_below_db = node.value("fail_below_db", t.fail_below_db);
  t.warn_below_db = node.value("warn_below_db", t.warn_below_db);
  if (!std::isfinite(t.fail_below_db) || !std::isfinite(t.warn_below_db) ||
      t.warn_below_db < t.fail_below_db) {
    return policy_error(source, where + ": warn_below_db must be >= fail_below_db");
  }
  return t;
}

std::string string_field(const json& node, const char* key) {
  return node.contains(key) && node[key].is_string() ? node[key].get<std::string>() : "";
}

}  // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kWarn:
      return "warn";
    case Verdict::kFail:
      return "fail";
    case Verdict::kPass:
      break;
  }
  return "pass";
}

Policy::Policy() : compiled_(std::make_shared<Compiled>()) {}

Result<Policy> Policy::from_json(std::string_view text, const std::string& source) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return policy_error(source, "not a JSON object");
  }
  Policy policy;
  if (doc.contains("default")) {
    QD_ASSIGN_OR_RETURN(policy.defaults_,
                        read_thresholds(doc["default"], policy.defaults_, source, "default"));
  }
  auto compiled = std::make_shared<Compiled>();
  const json rules = doc.value("rules", json::array());
  if (!rules.is_array()) return policy_error(source, "'rules' must be an array");
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = "rules[" + std::to_string(i) + "]";
    if (!rules[i].is_object()) return policy_error(source, where + " must be an object");
    PolicyRule rule;
    rule.op_type = string_field(rules[i], "op_type");
    rule.name_pattern = string_field(rules[i], "name");
    rule.dtype = string_field(rules[i], "dtype");
    QD_ASSIGN_OR_RETURN(rule.thresholds,
                        read_thresholds(rules[i], policy.defaults_, source, where));
    std::unique_ptr<RE2> pattern;
    if (!rule.name_pattern.empty()) {
      pattern = std::make_unique<RE2>(rule.name_pattern, RE2::Quiet);
      if (!pattern->ok()) {
        return policy_error(source, where + ".name: " + pattern->error());
      }
    }
    compiled->patterns.push_back(std::move(pattern));
    policy.rules_.push_back(std::move(rule));
  }
  policy.compiled_ = std::move(compiled);
  return policy;
}

Result<Policy> Policy::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return error(ErrorCode::kNotFound, path + ": cannot open policy file");
  std::stringstream text;
  text << file.rdbuf();
  return from_json(text.str(), path);
}

std::pair<Thresholds, int> Policy::thresholds_for(std::string_view op_type, std::string_view name,
                                                  std::string_view dtype) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const PolicyRule& rule = rules_[i];
    const RE2* pattern = compiled_->patterns[i].get();
    const bool applies = (rule.op_type.empty() || rule.op_type == op_type) &&
                         (rule.dtype.empty() || rule.dtype == dtype) &&
                         (pattern == nullptr || RE2::PartialMatch(name, *pattern));
    if (applies) return {rule.thresholds, static_cast<int>(i)};
  }
  return {defaults_, -1};
}

Verdict verdict_for(double sqnr_db, const Thresholds& t) {
  if (std::isnan(sqnr_db) || sqnr_db < t.fail_below_db) return Verdict::kFail;
  if (sqnr_db < t.warn_below_db) return Verdict::kWarn;
  return Verdict::kPass;
}

Verdict Policy::judge(double sqnr_db, std::string_view op_type, std::string_view name,
                      std::string_view dtype) const {
  return verdict_for(sqnr_db, thresholds_for(op_type, name, dtype).first);
}

Judgement Policy::judge_output(const OutputFacts& output) const {
  const auto [thresholds, rule] =
      thresholds_for(output.op_type, output.ref_name, output.device_dtype);
  if (!output.compared || output.non_finite_introduced || output.bad_encoding) {
    return {Verdict::kFail, rule};
  }
  return {verdict_for(output.sqnr_db, thresholds), rule};
}

Verdict worse(Verdict a, Verdict b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

std::string Policy::to_json() const {
  json rules = json::array();
  for (const PolicyRule& rule : rules_) {
    json entry = {{"fail_below_db", rule.thresholds.fail_below_db},
                  {"warn_below_db", rule.thresholds.warn_below_db}};
    if (!rule.op_type.empty()) entry["op_type"] = rule.op_type;
    if (!rule.name_pattern.empty()) entry["name"] = rule.name_pattern;
    if (!rule.dtype.empty()) entry["dtype"] = rule.dtype;
    rules.push_back(std::move(entry));
  }
  return json({{"default",
                {{"fail_below_db", defaults_.fail_below_db},
                 {"warn_below_db", defaults_.warn_below_db}}},
               {"rules", std::move(rules)}})
      .dump();
}

}  // namespace qd::compare
