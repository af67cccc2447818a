#include "qnn_debug/compare/policy.h"

#include <re2/re2.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/jsonio/jsonio.h"

namespace qd::compare {

struct Policy::Compiled {
  std::vector<std::unique_ptr<RE2>> patterns;  // null where a rule has no name pattern
};

namespace {

using nlohmann::json;

Status policy_error(const std::string& source, const std::string& what) {
  return error(ErrorCode::kInvalidArgument, source + ": invalid policy: " + what);
}

// Every key of `node` must be one of `accepted`: a misspelt key must not pass for a default.
Status check_keys(const json& node, const std::vector<const char*>& accepted,
                  const std::string& source, const std::string& where) {
  for (const auto& [key, value] : node.items()) {
    bool known = false;
    std::string list;
    for (const char* name : accepted) {
      known = known || key == name;
      list += (list.empty() ? "" : ", ") + std::string(name);
    }
    if (!known) {
      return policy_error(source, (where.empty() ? "" : where + ": ") + "unknown key \"" + key +
                                      "\" (accepted: " + list + ")");
    }
  }
  return Status::ok();
}

// A fraction in [0, 1], or nothing when absent.
Result<std::optional<double>> read_fraction(const json& doc, const char* key,
                                            const std::string& source) {
  if (!doc.contains(key)) return std::optional<double>();
  const json& value = doc[key];
  if (!value.is_number() || !(value.get<double>() >= 0 && value.get<double>() <= 1)) {
    return policy_error(source, std::string(key) + " must be a number from 0 to 1");
  }
  return std::optional<double>(value.get<double>());
}

Result<std::string> read_string(const json& node, const char* key, const std::string& source,
                                const std::string& where) {
  if (!node.contains(key)) return std::string();
  if (!node[key].is_string())
    return policy_error(source, where + json_path_field(key) + " must be a string");
  return node[key].get<std::string>();
}

// A count >= 0, or nothing when absent.
Result<std::optional<uint64_t>> read_count(const json& doc, const char* key,
                                           const std::string& source) {
  if (!doc.contains(key)) return std::optional<uint64_t>();
  const json& value = doc[key];
  if (!value.is_number_unsigned()) {
    return policy_error(source, std::string(key) + " must be a whole number >= 0");
  }
  return std::optional<uint64_t>(value.get<uint64_t>());
}

Result<RunRules> read_run_rules(const json& doc, const std::string& source) {
  RunRules rules;
  QD_ASSIGN_OR_RETURN(const std::optional<double> matched,
                      read_fraction(doc, "min_matched_fraction", source));
  rules.min_matched_fraction = matched.value_or(0);
  QD_ASSIGN_OR_RETURN(rules.min_top1_agreement, read_fraction(doc, "min_top1_agreement", source));
  QD_ASSIGN_OR_RETURN(rules.min_top5_agreement, read_fraction(doc, "min_top5_agreement", source));
  QD_ASSIGN_OR_RETURN(rules.max_unmatched_reference,
                      read_count(doc, "max_unmatched_reference", source));
  return rules;
}

Result<Gate> read_gate(const json& doc, const std::string& source) {
  if (!doc.contains("gate")) return Gate::kTotal;
  if (doc["gate"].is_string()) {
    if (const auto gate = parse_term(kGates, doc["gate"].get<std::string>())) return *gate;
  }
  std::string names;  // "\"total\", \"kernel\" or \"both\""
  for (size_t i = 0; i < kGates.size(); ++i) {
    names += i == 0 ? "" : i + 1 == kGates.size() ? " or " : ", ";
    names += "\"" + std::string(kGates[i].name) + "\"";
  }
  return policy_error(source, "gate must be " + names);
}

// "1 pair", "3 pairs"
std::string count_of(size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Reference tensors without a device counterpart (docs/metrics.md, "Run rules").
template <typename Fail>
void judge_unmatched(const RunFacts& run, const RunRules& rules, const Fail& fail) {
  if (rules.max_unmatched_reference) {
    if (run.unmatched_reference_tensors > *rules.max_unmatched_reference) {
      fail(count_of(run.unmatched_reference_tensors, "reference tensor") +
           (run.unmatched_reference_tensors == 1 ? " has" : " have") +
           " no device counterpart, above the policy's max_unmatched_reference " +
           std::to_string(*rules.max_unmatched_reference));
    }
    return;
  }
  if (run.unmatched_graph_outputs.empty()) return;
  std::string names;
  for (const std::string& name : run.unmatched_graph_outputs) {
    names += (names.empty() ? "" : ", ") + quote_name(name);
  }
  const bool one = run.unmatched_graph_outputs.size() == 1;
  fail((one ? "graph output " : "graph outputs ") + names + (one ? " has" : " have") +
       " no device counterpart (a missing graph output fails unless the policy's "
       "max_unmatched_reference allows it)");
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * fraction);
  return text;
}

// The optional thresholds, each with its JSON key (the other two: fail_below_db, warn_below_db).
constexpr std::pair<const char*, std::optional<double> Thresholds::*> kOptionalThresholds[] = {
    {"fail_channel_below_db", &Thresholds::fail_channel_below_db},
    {"warn_channel_below_db", &Thresholds::warn_channel_below_db},
    {"kernel_fail_below_db", &Thresholds::kernel_fail_below_db},
    {"kernel_warn_below_db", &Thresholds::kernel_warn_below_db},
    {"kernel_fail_above_lsb", &Thresholds::kernel_fail_above_lsb},
    {"kernel_warn_above_lsb", &Thresholds::kernel_warn_above_lsb}};

// The excess rule's numbers, each with its key in the rule's object.
constexpr std::pair<const char*, double ExcessRule::*> kExcessFields[] = {
    {"fail_db", &ExcessRule::fail_db},
    {"fail_noise", &ExcessRule::fail_noise},
    {"warn_db", &ExcessRule::warn_db},
    {"warn_noise", &ExcessRule::warn_noise},
    {"judges_below_db", &ExcessRule::judges_below_db}};

// A rule a thresholds object switches: false switches it off, true keeps `fallback`
// switched on, and an object sets some of its `fields` (each a number >= 0; the rest are
// `fallback`'s), switched on.
template <class Rule, size_t N>
Result<Rule> read_switched_rule(const json& node, Rule fallback,
                                const std::pair<const char*, double Rule::*> (&fields)[N],
                                const std::string& source, const std::string& at) {
  if (node.is_boolean()) {
    fallback.enabled = node.get<bool>();
    return fallback;
  }
  if (!node.is_object()) return policy_error(source, at + " must be true, false or an object");
  std::vector<const char*> keys;
  for (const auto& [name, field] : fields) keys.push_back(name);
  QD_RETURN_IF_ERROR(check_keys(node, keys, source, at));
  fallback.enabled = true;
  for (const auto& [name, field] : fields) {
    if (!node.contains(name)) continue;
    const json& value = node.at(name);
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      return policy_error(source, at + json_path_field(name) + " must be a number >= 0");
    }
    fallback.*field = value.get<double>();
  }
  return fallback;
}

Result<ExcessRule> read_excess_rule(const json& node, ExcessRule fallback,
                                    const std::string& source, const std::string& where) {
  const std::string at = where + json_path_field("excess");
  QD_ASSIGN_OR_RETURN(ExcessRule rule,
                      read_switched_rule(node, fallback, kExcessFields, source, at));
  if (rule.fail_db < rule.warn_db || rule.fail_noise < rule.warn_noise) {
    return policy_error(source, at + ": fail_db and fail_noise must be >= warn_db and warn_noise");
  }
  return rule;
}

// The departure rule's numbers and counts, each with its key in the rule's object.
constexpr std::pair<const char*, double DepartureRule::*> kDepartureFields[] = {
    {"drop_db", &DepartureRule::drop_db},
    {"spread_factor", &DepartureRule::spread_factor},
    {"departs_below_db", &DepartureRule::departs_below_db}};
constexpr std::pair<const char*, uint64_t DepartureRule::*> kDepartureCounts[] = {
    {"min_baseline_runs", &DepartureRule::min_baseline_runs}, {"window", &DepartureRule::window}};

// "departure": false switches the rule off, true keeps the defaults, and an object sets some of
// its numbers (the rest are the defaults').
Result<DepartureRule> read_departure_rule(const json& doc, const std::string& source) {
  DepartureRule rule;
  if (!doc.contains("departure")) return rule;
  const json& node = doc["departure"];
  if (node.is_boolean()) {
    rule.enabled = node.get<bool>();
    return rule;
  }
  if (!node.is_object()) return policy_error(source, "departure must be true, false or an object");
  std::vector<const char*> keys;
  for (const auto& [key, field] : kDepartureFields) keys.push_back(key);
  for (const auto& [key, field] : kDepartureCounts) keys.push_back(key);
  QD_RETURN_IF_ERROR(check_keys(node, keys, source, "departure"));
  for (const auto& [key, field] : kDepartureFields) {
    if (!node.contains(key)) continue;
    if (!node[key].is_number() || !std::isfinite(node[key].get<double>()) ||
        (node[key].get<double>() < 0 && std::string_view(key) != "departs_below_db")) {
      return policy_error(source, "departure" + json_path_field(key) + " must be a number >= 0");
    }
    rule.*field = node[key].get<double>();
  }
  for (const auto& [key, field] : kDepartureCounts) {
    if (!node.contains(key)) continue;
    if (!node[key].is_number_unsigned()) {
      return policy_error(source,
                          "departure" + json_path_field(key) + " must be a whole number >= 0");
    }
    rule.*field = node[key].get<uint64_t>();
  }
  if (rule.min_baseline_runs == 0) {
    return policy_error(source, "departure.min_baseline_runs must be 1 or more");
  }
  return rule;
}

// The near-zero rule's numbers, each with its key in the rule's object.
constexpr std::pair<const char*, double NearZeroRule::*> kNearZeroFields[] = {
    {"warn_above_lsb", &NearZeroRule::warn_above_lsb},
    {"fail_above_lsb", &NearZeroRule::fail_above_lsb}};

Result<NearZeroRule> read_near_zero_rule(const json& node, NearZeroRule fallback,
                                         const std::string& source, const std::string& where) {
  const std::string at = where + json_path_field("near_zero");
  QD_ASSIGN_OR_RETURN(NearZeroRule rule,
                      read_switched_rule(node, fallback, kNearZeroFields, source, at));
  if (rule.fail_above_lsb < rule.warn_above_lsb) {
    return policy_error(source, at + ": fail_above_lsb must be >= warn_above_lsb");
  }
  return rule;
}

// A pair of optional thresholds where `lower` must not exceed `upper` when both are set.
Status check_order(const std::optional<double>& lower, const std::optional<double>& upper,
                   const char* lower_key, const char* upper_key, const std::string& source,
                   const std::string& where) {
  if (lower && upper && *upper < *lower) {
    return policy_error(source, where + ": " + upper_key + " must be >= " + lower_key);
  }
  return Status::ok();
}

// The keys of an object of thresholds, and `others`.
std::vector<const char*> threshold_keys(std::initializer_list<const char*> others = {}) {
  std::vector<const char*> keys(others);
  keys.insert(keys.end(), {"fail_below_db", "warn_below_db", "excess", "near_zero"});
  for (const auto& [key, field] : kOptionalThresholds) keys.push_back(key);
  return keys;
}

Result<Thresholds> read_thresholds(const json& node, Thresholds fallback, const std::string& source,
                                   const std::string& where) {
  if (!node.is_object()) return policy_error(source, where + " must be an object");
  for (const char* key : threshold_keys()) {
    const bool rule = std::string_view(key) == "excess" || std::string_view(key) == "near_zero";
    if (node.contains(key) && !node[key].is_number() && !rule) {
      return policy_error(source, where + json_path_field(key) + " must be a number");
    }
  }
  Thresholds t = fallback;
  t.fail_below_db = node.value("fail_below_db", t.fail_below_db);
  t.warn_below_db = node.value("warn_below_db", t.warn_below_db);
  if (!std::isfinite(t.fail_below_db) || !std::isfinite(t.warn_below_db) ||
      t.warn_below_db < t.fail_below_db) {
    return policy_error(source, where + ": warn_below_db must be >= fail_below_db");
  }
  for (auto [key, field] : kOptionalThresholds) {
    if (!node.contains(key)) continue;
    t.*field = node[key].get<double>();
    if (!std::isfinite(*(t.*field))) {
      return policy_error(source, where + json_path_field(key) + " must be a finite number");
    }
  }
  if (node.contains("excess")) {
    QD_ASSIGN_OR_RETURN(t.excess, read_excess_rule(node["excess"], t.excess, source, where));
  }
  if (node.contains("near_zero")) {
    QD_ASSIGN_OR_RETURN(t.near_zero,
                        read_near_zero_rule(node["near_zero"], t.near_zero, source, where));
  }
  QD_RETURN_IF_ERROR(check_order(t.fail_channel_below_db, t.warn_channel_below_db,
                                 "fail_channel_below_db", "warn_channel_below_db", source, where));
  QD_RETURN_IF_ERROR(check_order(t.kernel_fail_below_db, t.kernel_warn_below_db,
                                 "kernel_fail_below_db", "kernel_warn_below_db", source, where));
  // LSB thresholds judge from above: the warning comes at the smaller error.
  QD_RETURN_IF_ERROR(check_order(t.kernel_warn_above_lsb, t.kernel_fail_above_lsb,
                                 "kernel_warn_above_lsb", "kernel_fail_above_lsb", source, where));
  for (const auto& lsb : {t.kernel_fail_above_lsb, t.kernel_warn_above_lsb}) {
    if (lsb && *lsb < 0) return policy_error(source, where + ": an LSB threshold must be >= 0");
  }
  return t;
}

}  // namespace

Policy::Policy() : compiled_(std::make_shared<Compiled>()) {}

struct Policy::Reader {
  static Result<Policy> read(const json& doc, const std::string& source);
};

Result<Policy> Policy::Reader::read(const json& doc, const std::string& source) {
  if (!doc.is_object()) return policy_error(source, "not a JSON object");
  QD_RETURN_IF_ERROR(
      check_keys(doc,
                 {"default", "rules", "min_matched_fraction", "min_top1_agreement",
                  "min_top5_agreement", "max_unmatched_reference", "gate", "departure"},
                 source, ""));
  Policy policy;
  QD_ASSIGN_OR_RETURN(policy.gate_, read_gate(doc, source));
  QD_ASSIGN_OR_RETURN(policy.departure_, read_departure_rule(doc, source));
  if (doc.contains("default")) {
    if (!doc["default"].is_object()) return policy_error(source, "default must be an object");
    QD_RETURN_IF_ERROR(check_keys(doc["default"], threshold_keys(), source, "default"));
    QD_ASSIGN_OR_RETURN(policy.defaults_,
                        read_thresholds(doc["default"], policy.defaults_, source, "default"));
  }
  QD_ASSIGN_OR_RETURN(policy.run_rules_, read_run_rules(doc, source));
  auto compiled = std::make_shared<Compiled>();
  const json rules = doc.value("rules", json::array());
  if (!rules.is_array()) return policy_error(source, "rules must be an array");
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = "rules" + json_path_index(i);
    if (!rules[i].is_object()) return policy_error(source, where + " must be an object");
    QD_RETURN_IF_ERROR(
        check_keys(rules[i], threshold_keys({"op_type", "name", "dtype"}), source, where));
    PolicyRule rule;
    QD_ASSIGN_OR_RETURN(rule.op_type, read_string(rules[i], "op_type", source, where));
    QD_ASSIGN_OR_RETURN(rule.name_pattern, read_string(rules[i], "name", source, where));
    QD_ASSIGN_OR_RETURN(rule.dtype, read_string(rules[i], "dtype", source, where));
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

Result<Policy> Policy::from_json(std::string_view text, const std::string& source) {
  QD_RETURN_IF_ERROR(check_json_depth(text, source + ": invalid policy"));
  json doc;
  if (!jsonio::parse(text, doc)) return policy_error(source, "not a JSON object");
  return Reader::read(doc, source);
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

namespace {

// What fails whatever the thresholds say: nothing to measure, or values no threshold can weigh.
bool fails_on_its_facts(const OutputFacts& output) {
  return !output.compared || output.no_evidence || output.non_finite_introduced ||
         output.bad_encoding;
}

// The excess rule's verdict (ExcessRule): pass when the output has no excess figures.
Verdict excess_verdict(const OutputFacts& output, const ExcessRule& rule) {
  if (!rule.enabled || !output.excess_db || !output.excess_noise_ratio) return Verdict::kPass;
  const double db = *output.excess_db, noise = *output.excess_noise_ratio;
  const bool low = output.sqnr_db < rule.judges_below_db;
  if (output.excess_measured) {
    if (noise >= rule.fail_noise) return low ? Verdict::kFail : Verdict::kWarn;
    return noise >= rule.warn_noise ? Verdict::kWarn : Verdict::kPass;
  }
  if (!low) return Verdict::kPass;
  if (noise >= rule.fail_noise && db >= rule.fail_db) return Verdict::kFail;
  if (noise >= rule.warn_noise && db >= rule.warn_db) return Verdict::kWarn;
  return Verdict::kPass;
}

// Whether the near-zero rule judges the output instead of its SQNR (NearZeroRule).
bool judged_near_zero(const OutputFacts& output, const NearZeroRule& rule) {
  return rule.enabled && output.near_zero_reference && output.lsb_max.has_value();
}

// The near-zero rule's verdict: the largest error in steps against its two lines.
Verdict near_zero_verdict(const OutputFacts& output, const NearZeroRule& rule) {
  if (*output.lsb_max > rule.fail_above_lsb) return Verdict::kFail;
  return *output.lsb_max > rule.warn_above_lsb ? Verdict::kWarn : Verdict::kPass;
}

}  // namespace

Judgement Policy::judge_output(const OutputFacts& output) const {
  const auto [thresholds, rule] =
      thresholds_for(output.op_type, output.ref_name, output.device_dtype);
  if (fails_on_its_facts(output)) return {Verdict::kFail, rule, thresholds};
  if (judged_near_zero(output, thresholds.near_zero)) {
    return {near_zero_verdict(output, thresholds.near_zero), rule, thresholds};
  }
  Verdict verdict = verdict_for(output.sqnr_db, thresholds);
  if (output.worst_channel_sqnr_db) {
    const double channel = *output.worst_channel_sqnr_db;
    if (thresholds.fail_channel_below_db && channel < *thresholds.fail_channel_below_db) {
      verdict = Verdict::kFail;
    } else if (thresholds.warn_channel_below_db && channel < *thresholds.warn_channel_below_db) {
      verdict = worse(verdict, Verdict::kWarn);
    }
  }
  const Verdict excess = excess_verdict(output, thresholds.excess);
  return {worse(verdict, excess), rule, thresholds, excess};
}

Judgement Policy::judge_kernel_output(const OutputFacts& output) const {
  const auto [t, rule] = thresholds_for(output.op_type, output.ref_name, output.device_dtype);
  if (fails_on_its_facts(output)) return {Verdict::kFail, rule, t};
  if (judged_near_zero(output, t.near_zero))
    return {near_zero_verdict(output, t.near_zero), rule, t};
  const bool by_lsb = output.lsb_max && (t.kernel_fail_above_lsb || t.kernel_warn_above_lsb);
  const bool by_db = !by_lsb || t.kernel_fail_below_db || t.kernel_warn_below_db;
  Verdict verdict = Verdict::kPass;
  if (by_db) {
    Thresholds db;
    db.fail_below_db = t.kernel_fail_below_db.value_or(t.fail_below_db);
    db.warn_below_db = t.kernel_warn_below_db.value_or(std::max(db.fail_below_db, t.warn_below_db));
    verdict = verdict_for(output.sqnr_db, db);
  }
  if (by_lsb) {
    // A step measured through a float scale can read 1.0000000000000193 steps: within the
    // tolerance, it is one step.
    const double lsb = *output.lsb_max - kLsbTolerance;
    if (t.kernel_fail_above_lsb && lsb > *t.kernel_fail_above_lsb) {
      verdict = Verdict::kFail;
    } else if (t.kernel_warn_above_lsb && lsb > *t.kernel_warn_above_lsb) {
      verdict = worse(verdict, Verdict::kWarn);
    }
  }
  return {verdict, rule, t};
}

Verdict worse(Verdict a, Verdict b) { return static_cast<int>(a) >= static_cast<int>(b) ? a : b; }

namespace {

std::string no_evidence_reason(const std::vector<std::string>& tensors) {
  constexpr size_t kNamed = 3;
  std::string named;
  for (size_t i = 0; i < std::min(kNamed, tensors.size()); ++i) {
    named += (i > 0 ? ", " : "") + quote_name(tensors[i]);
  }
  if (tensors.size() > kNamed) named += " and " + std::to_string(tensors.size() - kNamed) + " more";
  return count_of(tensors.size(), "compared pair") +
         " had no element finite on both sides, so nothing was measured there (no evidence): " +
         named;
}

}  // namespace

RunJudgement Policy::judge_run(const RunFacts& run) const {
  RunJudgement judgement;
  const auto fail = [&](std::string reason) {
    judgement.verdict = Verdict::kFail;
    judgement.reasons.push_back(std::move(reason));
  };
  if (run.compared_pairs == 0 && !run.not_compared.empty()) {
    fail("no tensor pair was compared: " + count_of(run.not_compared.size(), "pair") +
         " matched but could not be compared; " + run.not_compared.front() +
         (run.not_compared.size() > 1
              ? " (and " + std::to_string(run.not_compared.size() - 1) + " more, see the warnings)"
              : ""));
  } else if (run.compared_pairs == 0) {
    fail(
        "no tensor pair was compared: nothing matched between the runs (see the unmatched "
        "tensors and their reasons)");
  }
  if (!run.no_evidence.empty()) fail(no_evidence_reason(run.no_evidence));
  if (run.compared_pairs > 0) judge_unmatched(run, run_rules_, fail);
  const double matched = run.reference_tensors == 0 ? 0
                                                    : double(run.matched_reference_tensors) /
                                                          double(run.reference_tensors);
  if (run.compared_pairs > 0 && matched < run_rules_.min_matched_fraction) {
    fail(std::to_string(run.matched_reference_tensors) + " of " +
         std::to_string(run.reference_tensors) + " reference tensors (" + percent(matched) +
         ") were compared, below the policy's min_matched_fraction " +
         percent(run_rules_.min_matched_fraction));
  }
  const auto agreement = [&](const std::optional<double>& value, const std::optional<double>& min,
                             const char* what) {
    if (!min) return;
    if (!value) {
      fail(std::string("the policy requires a ") + what +
           " agreement, but no classifier output was found to measure it");
    } else if (*value < *min) {
      fail(std::string(what) + " agreement " + percent(*value) + " is below the policy's " +
           percent(*min));
    }
  };
  agreement(run.top1_agreement, run_rules_.min_top1_agreement, "top-1");
  agreement(run.top5_agreement, run_rules_.min_top5_agreement, "top-5");
  return judgement;
}

namespace {

// A switched rule as read_switched_rule reads it: false when off, its numbers when not the
// defaults, nothing (the key left out) otherwise.
template <class Rule, size_t N>
void write_switched_rule(json& out, const char* key, const Rule& rule,
                         const std::pair<const char*, double Rule::*> (&fields)[N]) {
  if (!rule.enabled) {
    out[key] = false;
  } else if (rule != Rule{}) {
    json numbers = json::object();
    for (const auto& [name, field] : fields) numbers[name] = rule.*field;
    out[key] = std::move(numbers);
  }
}

json thresholds_json(const Thresholds& t) {
  json out = {{"fail_below_db", t.fail_below_db}, {"warn_below_db", t.warn_below_db}};
  for (auto [key, field] : kOptionalThresholds) {
    if (t.*field) out[key] = *(t.*field);
  }
  write_switched_rule(out, "excess", t.excess, kExcessFields);
  write_switched_rule(out, "near_zero", t.near_zero, kNearZeroFields);
  return out;
}

}  // namespace

std::string Policy::to_json() const {
  json rules = json::array();
  for (const PolicyRule& rule : rules_) {
    json entry = thresholds_json(rule.thresholds);
    if (!rule.op_type.empty()) entry["op_type"] = rule.op_type;
    if (!rule.name_pattern.empty()) entry["name"] = rule.name_pattern;
    if (!rule.dtype.empty()) entry["dtype"] = rule.dtype;
    rules.push_back(std::move(entry));
  }
  json doc = {{"default", thresholds_json(defaults_)},
              {"rules", std::move(rules)},
              {"min_matched_fraction", run_rules_.min_matched_fraction}};
  if (run_rules_.min_top1_agreement) doc["min_top1_agreement"] = *run_rules_.min_top1_agreement;
  if (run_rules_.min_top5_agreement) doc["min_top5_agreement"] = *run_rules_.min_top5_agreement;
  if (run_rules_.max_unmatched_reference) {
    doc["max_unmatched_reference"] = *run_rules_.max_unmatched_reference;
  }
  if (gate_ != Gate::kTotal) doc["gate"] = gate_name(gate_);
  if (!departure_.enabled) {
    doc["departure"] = false;
  } else if (departure_ != DepartureRule{}) {
    json& departure = doc["departure"] = json::object();
    for (const auto& [key, field] : kDepartureFields) departure[key] = departure_.*field;
    for (const auto& [key, field] : kDepartureCounts) departure[key] = departure_.*field;
  }
  return jsonio::dump(doc);
}

}  // namespace qd::compare
