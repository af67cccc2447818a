// Verdict thresholds: what SQNR counts as a failure or a warning, per op type, name or dtype.
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/departure.h"

namespace qd::compare {

enum class Verdict { kPass, kWarn, kFail };
inline constexpr auto kVerdicts = std::to_array<Term<Verdict>>({
    {Verdict::kPass, "pass", "at or above the warn line, and every rule of the run holds"},
    {Verdict::kWarn, "warn", "below the warn line, at or above the fail line"},
    {Verdict::kFail, "fail", "below the fail line, no evidence, or a run rule broken"},
});
static_assert(in_declaration_order(kVerdicts));
constexpr std::string_view verdict_name(Verdict verdict) { return term_name(kVerdicts, verdict); }
constexpr std::optional<Verdict> parse_verdict(std::string_view name) {
  return parse_term(kVerdicts, name);
}

// The excess rule (docs/metrics.md, "What the encoding allows"): besides the lines, an op whose
// own error is far beyond its encoding's rounding noise (compare/excess.h) fails or warns.
// - Measured (the op's replay, ISO vs DEV): at least `fail_noise` times the rounding noise fails
//   below `judges_below_db` and warns above it; at least `warn_noise` times warns.
// - Estimated (from the kernel part or the total, less what the inputs carry in), below
//   `judges_below_db` only: at least `fail_noise` times and `fail_db` below what the inputs and
//   the encoding allow fails; `warn_noise` and `warn_db` warn. The dB condition guards against an
//   op whose gain reshapes the error it inherits (an estimate, not a measurement).
// A kernel that rounds every code one step the other way adds sqrt(12) ~ 3.46 times the rounding
// noise; the defaults sit above that.
struct ExcessRule {
  bool enabled = true;
  double fail_noise = 8;
  double warn_noise = 5;
  double fail_db = 10;
  double warn_db = 3;
  double judges_below_db = 30;

  bool operator==(const ExcessRule&) const = default;
};

// The near-zero rule (docs/metrics.md, "Near-zero reference"): an output whose reference has next
// to no signal for its device encoding (metrics.h, near_zero_reference) is judged on its largest
// error in steps of that encoding (lsb_max) instead of its SQNR: above `fail_above_lsb` fails,
// above `warn_above_lsb` warns, else it passes. Off: the SQNR judges it, as any output.
struct NearZeroRule {
  bool enabled = true;
  double warn_above_lsb = 1;
  double fail_above_lsb = 3;

  bool operator==(const NearZeroRule&) const = default;
};

struct Thresholds {
  double fail_below_db = 10;
  double warn_below_db = 20;
  // The same for an output's worst channel (docs/metrics.md, "Per-channel figures"); unset: the
  // channels are not judged on their own.
  std::optional<double> fail_channel_below_db;
  std::optional<double> warn_channel_below_db;
  // The kernel part of a three-way diff (SIM vs DEV, docs/metrics.md "Quantization or kernel?"):
  // its SQNR, and its largest error in steps of the device encoding (lsb_max). Unset dB
  // thresholds are the total's; unset LSB thresholds do not judge.
  std::optional<double> kernel_fail_below_db;
  std::optional<double> kernel_warn_below_db;
  std::optional<double> kernel_fail_above_lsb;
  std::optional<double> kernel_warn_above_lsb;
  ExcessRule excess;
  NearZeroRule near_zero;
};
// NaN (nothing comparable) fails.
Verdict verdict_for(double sqnr_db, const Thresholds& thresholds);

// A rule applies when every field it sets matches; the first applicable rule wins.
struct PolicyRule {
  std::string op_type;       // exact, "" = any
  std::string name_pattern;  // RE2, searched in the reference tensor name, "" = any
  std::string dtype;         // device dtype name as in the store ("SFIXED_POINT_16"), "" = any
  Thresholds thresholds;
};

// What the policy looks at for one compared output (analysis and `qnn-debug check` both judge
// through Policy::judge_output, so a saved report is re-judged exactly as diff judged it).
struct OutputFacts {
  std::string_view op_type;       // "" when unknown
  std::string_view ref_name;      // rules' name patterns search this
  std::string_view device_dtype;  // store dtype name, e.g. "SFIXED_POINT_8"
  bool compared = true;           // false: no metrics (shape mismatch, damaged data): fails
  double sqnr_db = 0;
  std::optional<double> worst_channel_sqnr_db = {};  // outputs with a per-channel view
  bool non_finite_introduced = false;  // more NaN/Inf on the device than the reference: fails
  bool bad_encoding = false;           // either side's encoding fails qd::lint_encoding: fails
  // Compared, but no element pair has a finite value on both sides (metrics n = 0: an empty
  // tensor, or NaN/Inf everywhere on a side): no evidence, which fails under every policy.
  bool no_evidence = false;
  std::optional<double> lsb_max = {};  // quantized device outputs: the largest error in steps
  bool near_zero_reference = false;    // its reference is below 0.1 step (NearZeroRule)
  // The output's own excess error (compare/excess.h), when its device side has an encoding.
  std::optional<double> excess_db = {};
  std::optional<double> excess_noise_ratio = {};
  bool excess_measured = false;  // read from the op's replay, not estimated
};

// How far past a kernel LSB threshold an error must be to cross it (steps of the encoding).
inline constexpr double kLsbTolerance = 1e-6;

struct Judgement {
  Verdict verdict = Verdict::kPass;
  int rule = -1;  // the policy rule that supplied the thresholds, -1: the defaults
  Thresholds thresholds;
  Verdict excess = Verdict::kPass;  // the excess rule's own verdict of the output
};

// Which figures a group's verdict comes from when a diff has a quantized simulation (SIM) of the
// reference: the total error (REF vs DEV, as without a simulation), the kernel part alone (SIM vs
// DEV: what the device adds beyond an ideal integer kernel), or the worse of both.
enum class Gate { kTotal, kKernel, kBoth };
inline constexpr auto kGates = std::to_array<Term<Gate>>({
    {Gate::kTotal, "total", "a group is judged by its total error (REF vs DEV)"},
    {Gate::kKernel, "kernel", "by its kernel part (SIM vs DEV) when it has one"},
    {Gate::kBoth, "both", "by the worse of the two"},
});
static_assert(in_declaration_order(kGates));
constexpr std::string_view gate_name(Gate gate) { return term_name(kGates, gate); }

// The worse of two verdicts (fail > warn > pass).
Verdict worse(Verdict a, Verdict b);

// What the policy looks at for a whole run pair, beyond its groups.
struct RunFacts {
  uint64_t reference_tensors = 0;          // in the reference run
  uint64_t matched_reference_tensors = 0;  // of those, compared with a device tensor
  uint64_t compared_pairs = 0;             // pairs with metrics
  std::optional<double> top1_agreement;    // classifier outputs only (docs/metrics.md)
  std::optional<double> top5_agreement;
  uint64_t unmatched_reference_tensors = 0;               // reference tensors compared with nothing
  std::vector<std::string> unmatched_graph_outputs = {};  // those of them that are graph outputs
  std::vector<std::string> not_compared = {};  // pairs that matched without metrics, described
  // Reference tensors of compared pairs with no element pair finite on both sides (metrics
  // n = 0): nothing was measured there, which fails the run (docs/metrics.md, section 3).
  std::vector<std::string> no_evidence = {};
};

// Run-level requirements, each optional.
struct RunRules {
  double min_matched_fraction = 0;  // share of reference tensors that must be compared
  std::optional<double> min_top1_agreement;
  std::optional<double> min_top5_agreement;
  // Unset: a graph output without a device counterpart fails, other reference tensors only warn.
  // Set: more unmatched reference tensors than this, of any kind, fail.
  std::optional<uint64_t> max_unmatched_reference;
};

struct RunJudgement {
  Verdict verdict = Verdict::kPass;
  std::vector<std::string> reasons;  // one line per failed requirement
};

class Policy {
 public:
  Policy();  // the defaults: fail below 10 dB, warn below 20 dB
  // JSON: {"default": {"fail_below_db": 10, "warn_below_db": 20},
  //        "rules": [{"op_type": "Softmax", "name": "regex", "dtype": "...",
  //                   "fail_below_db": 5, "warn_below_db": 8,
  //                   "fail_channel_below_db": 0, "warn_channel_below_db": 5}],
  //        "min_matched_fraction": 0.9, "min_top1_agreement": 0.99, "min_top5_agreement": 1,
  //        "max_unmatched_reference": 0, "gate": "total", "departure": {...}}
  // Thresholds (default and rules) may also set kernel_fail_below_db, kernel_warn_below_db,
  // kernel_fail_above_lsb and kernel_warn_above_lsb, and "excess": false (the excess rule off) or
  // {"fail_db", "fail_noise", "warn_db", "warn_noise", "judges_below_db"} (ExcessRule), and
  // "near_zero": false (off) or {"warn_above_lsb", "fail_above_lsb"} (NearZeroRule).
  // "departure" is false (no departures), true, or {"min_baseline_runs", "window", "drop_db",
  // "spread_factor", "departs_below_db"} (DepartureRule, compare/departure.h).
  // Every key is checked: an unknown one is an error naming it and the accepted ones.
  // A saved report's "policy" is read the same way.
  // The pipeline reads a policy file (pipeline/settings.h); `source` names it in errors.
  static Result<Policy> from_json(std::string_view text, const std::string& source);

  // The thresholds and the index of the rule that set them (-1: the default).
  std::pair<Thresholds, int> thresholds_for(std::string_view op_type, std::string_view name,
                                            std::string_view dtype) const;
  Verdict judge(double sqnr_db, std::string_view op_type, std::string_view name,
                std::string_view dtype) const;
  Judgement judge_output(const OutputFacts& output) const;
  // The same output's kernel part (SIM vs DEV): the kernel thresholds, dB and LSB.
  Judgement judge_kernel_output(const OutputFacts& output) const;
  // A run pair with nothing compared always fails, and so does one that lost a graph output
  // (unless max_unmatched_reference is set); the run rules add their requirements.
  RunJudgement judge_run(const RunFacts& run) const;

  const Thresholds& defaults() const { return defaults_; }
  const std::vector<PolicyRule>& rules() const { return rules_; }
  const RunRules& run_rules() const { return run_rules_; }
  Gate gate() const { return gate_; }
  const DepartureRule& departure() const { return departure_; }
  std::string to_json() const;  // the policy as used, as one line of JSON, for reports

 private:
  struct Compiled;
  struct Reader;  // from a parsed document (policy.cpp)
  Thresholds defaults_;
  std::vector<PolicyRule> rules_;
  RunRules run_rules_;
  Gate gate_ = Gate::kTotal;
  DepartureRule departure_;
  std::shared_ptr<const Compiled> compiled_;  // RE2 patterns, one per rule
};

}  // namespace qd::compare
