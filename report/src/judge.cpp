#include "qnn_debug/report/judge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <variant>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/excess.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/compare/parts.h"

namespace qd::report {
namespace {

using compare::Verdict;

// What the policy's run rules look at, from what a report keeps of the run; reports written
// before "coverage" existed give what their groups and unmatched tensors tell.
compare::RunFacts run_facts(const RunReport& run) {
  compare::RunFacts facts;
  if (run.coverage) {
    facts.reference_tensors = run.coverage->reference_tensors;
    facts.matched_reference_tensors = run.coverage->matched_reference_tensors;
    facts.compared_pairs = run.coverage->compared_pairs;
  } else {
    for (const GroupReport& group : run.groups) {
      for (const PairReport& pair : group.pairs) facts.compared_pairs += pair.metrics.has_value();
    }
    facts.matched_reference_tensors = run.groups.size();
    facts.reference_tensors = facts.matched_reference_tensors;
  }
  for (const UnmatchedTensor& u : run.unmatched) {
    if (!u.reference_side) continue;
    ++facts.unmatched_reference_tensors;
    if (u.graph_output) facts.unmatched_graph_outputs.push_back(u.name);
  }
  for (const GroupReport& group : run.groups) {
    for (const PairReport& pair : group.pairs) {
      if (pair.metrics && compare::no_evidence(*pair.metrics)) {
        facts.no_evidence.push_back(pair.reference.name);
      }
      if (pair.metrics) continue;
      facts.not_compared.push_back(compare::describe_not_compared(
          pair.reference.name, pair.device.name, pair.match, pair.error));
    }
  }
  if (run.classification) {
    facts.top1_agreement = run.classification->top1;
    facts.top5_agreement = run.classification->top5;
  }
  return facts;
}

compare::OutputFacts output_facts(const GroupReport& group, const PairReport& pair) {
  const bool bad_encoding =
      !pair.reference.encoding_problems.empty() || !pair.device.encoding_problems.empty();
  return compare::output_facts(group.op_type, pair.reference.name, pair.device.dtype, bad_encoding,
                               pair.metrics ? &*pair.metrics : nullptr);
}

// What the policy judges a group's part by: its worst output's figures, under the group's first
// output's name and device dtype (the rules a part falls under).
compare::OutputFacts part_facts(const GroupReport& group, const PartFigures& part) {
  // Views into the group's own strings (a conditional with "" would make a temporary string).
  std::string_view name, dtype;
  if (!group.pairs.empty()) {
    name = group.pairs.front().reference.name;
    dtype = group.pairs.front().device.dtype;
  }
  compare::OutputFacts facts{group.op_type, name, dtype};
  facts.compared = part.sqnr_db.has_value();
  facts.sqnr_db = part.sqnr_db.value_or(0);
  facts.non_finite_introduced = part.non_finite_introduced;
  facts.no_evidence = part.no_evidence;
  facts.lsb_max = part.lsb_max;
  facts.near_zero_reference = part.near_zero_reference;
  return facts;
}

// A part's input SQNR: its SQNR plus what the op lost in it; unset when no input was compared.
std::optional<double> part_input_sqnr(const PartFigures& part) {
  if (!part.sqnr_db || !part.introduced_db) return std::nullopt;
  return std::min(*part.sqnr_db, compare::kExactSqnrDb) + *part.introduced_db;
}

bool has_evidence(const std::optional<PartFigures>& part) {
  return part && part->sqnr_db && !part->no_evidence;
}

// What a chained part adds at this op beyond what its inputs carry in, with half of what they
// carry in as its uncertainty: an op's gain reshapes the relative error it passes on.
compare::OwnError added_in_part(const PartFigures& part) {
  const std::optional<double> input = part_input_sqnr(part);
  const double carried = input ? compare::relative_noise(*input) : 0;
  return {std::max(0.0, compare::relative_noise(*part.sqnr_db) - carried), carried / 2};
}

// The op's own quantization error: its encoding's rounding (measured on the reference), or, in
// the chained frame (no replay to set the kernel's against), what the simulation adds at this op
// when that is more (weights, gains on what its inputs carry).
compare::OwnError own_quantization(const ErrorParts& parts, std::optional<double> ideal_sqnr_db) {
  const double rounding = ideal_sqnr_db ? compare::relative_noise(*ideal_sqnr_db) : 0;
  if (has_evidence(parts.isolated) && ideal_sqnr_db) return {rounding, 0};
  const compare::OwnError added = added_in_part(*parts.quantization);
  return added.noise > rounding ? added : compare::OwnError{rounding, 0};
}

// The op's own kernel error: measured by its replay, else what the kernel part adds at it.
compare::OwnError own_kernel(const ErrorParts& parts) {
  if (has_evidence(parts.isolated)) return {compare::relative_noise(*parts.isolated->sqnr_db), 0};
  return added_in_part(*parts.kernel);
}

// The largest error the op's own kernel makes, in steps of its encoding, for the kernel gate:
// measured by the replay; else the kernel part's where its inputs are exact there (nothing is
// inherited); else the kernel part's, which then includes what upstream kernels carry in.
std::optional<double> own_kernel_lsb(const ErrorParts& parts) {
  if (has_evidence(parts.isolated) && parts.isolated->lsb_max) return parts.isolated->lsb_max;
  return parts.kernel->lsb_max;
}

// Each part's verdict, then the gate on the group's verdict (the total's, on entry), then which
// part the error comes from. A total without evidence fails whatever the gate: the gate chooses
// which figures judge, and no figure is not a pass.
void judge_parts(GroupReport& group, const compare::Policy& policy, bool total_has_no_evidence,
                 const PairReport* worst) {
  ErrorParts& parts = *group.parts;
  parts.total = group.verdict;
  for (std::optional<PartFigures>* part : {&parts.quantization, &parts.isolated}) {
    if (*part) (*part)->verdict = policy.judge_output(part_facts(group, **part)).verdict;
  }
  if (parts.kernel) {
    compare::OutputFacts facts = part_facts(group, *parts.kernel);
    facts.lsb_max = own_kernel_lsb(parts);
    const Verdict kernel = policy.judge_kernel_output(facts).verdict;
    parts.kernel->verdict = kernel;
    if (policy.gate() == compare::Gate::kKernel) group.verdict = kernel;
    if (policy.gate() == compare::Gate::kBoth)
      group.verdict = compare::worse(group.verdict, kernel);
    if (total_has_no_evidence) group.verdict = Verdict::kFail;
  }
  parts.attribution.reset();
  if (has_evidence(parts.quantization) && has_evidence(parts.kernel)) {
    const std::optional<double> ideal =
        worst != nullptr ? worst->metrics->ideal_sqnr_db : std::nullopt;
    const compare::OwnError quantization = own_quantization(parts, ideal);
    const compare::OwnError kernel = own_kernel(parts);
    const double carried = group.input_sqnr_db ? compare::relative_noise(*group.input_sqnr_db) : 0;
    parts.attribution = compare::attribute(parts.total, parts.kernel->verdict, quantization, kernel,
                                           quantization.noise + kernel.noise < carried);
  }
}

// The first group, in op order, whose figures in `part` fail.
void find_part_divergence(RunReport& run, std::optional<PartRun>& part_run,
                          std::optional<PartFigures> ErrorParts::*part) {
  if (!part_run) return;
  part_run->first_divergence.reset();
  for (const GroupReport& group : run.groups) {
    if (group.parts && (*group.parts).*part && ((*group.parts).*part)->verdict == Verdict::kFail) {
      part_run->first_divergence = group.id;
      return;
    }
  }
}

// A part with groups measured on nothing (a simulation or replay of NaN, say) fails the run, with
// the reason: the part's own figures say nothing there.
void judge_part_evidence(const RunReport& run, compare::RunJudgement& judgement) {
  for (const auto& term : compare::kParts) {
    const std::string_view name = term.name;
    const auto part = kGroupParts[part_index(term.value)];
    std::vector<std::string> ids;
    for (const GroupReport& group : run.groups) {
      if (group.parts && (*group.parts).*part && ((*group.parts).*part)->no_evidence) {
        ids.push_back(group.id);
      }
    }
    if (ids.empty()) continue;
    judgement.verdict = Verdict::kFail;
    judgement.reasons.push_back(std::string(name) + " part: " + std::to_string(ids.size()) +
                                " group(s) had no element finite on both sides, so the part " +
                                "measured nothing there (no evidence), first " + ids.front());
  }
}

// The pair a group's SQNR is, its worst output with evidence; nullptr when it has none.
const PairReport* worst_pair(const GroupReport& group) {
  for (const PairReport& pair : group.pairs) {
    if (pair.metrics && !compare::no_evidence(*pair.metrics) &&
        group.sqnr_db == pair.metrics->sqnr_db) {
      return &pair;
    }
  }
  return nullptr;
}

// More NaN or Inf on the device than in the reference, in some output of `group`.
bool device_non_finite(const GroupReport& group) {
  return std::any_of(group.pairs.begin(), group.pairs.end(), [](const PairReport& pair) {
    return pair.metrics && (pair.metrics->dev_nan > pair.metrics->ref_nan ||
                            pair.metrics->dev_inf > pair.metrics->ref_inf);
  });
}

// The groups group `index` of `run` takes its input from: its graph inputs, else the group before
// it (as the analysis measures its input SQNR).
std::vector<const GroupReport*> input_groups(const RunReport& run, size_t index) {
  const GroupReport& group = run.groups[index];
  std::vector<const GroupReport*> inputs;
  if (group.inputs.empty() && index > 0) inputs.push_back(&run.groups[index - 1]);
  for (const std::string& id : group.inputs) {
    if (const GroupReport* input = run.group(id); input != nullptr) inputs.push_back(input);
  }
  return inputs;
}

// Whether NaN or Inf the reference lacks reach group `index` of `run` (its graph inputs, else the
// group before it): its figures then cover the finite pairs only, and say nothing of what it adds.
bool input_non_finite(const RunReport& run, size_t index) {
  const std::vector<const GroupReport*> inputs = input_groups(run, index);
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const GroupReport* input) { return device_non_finite(*input); });
}

// The error a group's inputs carry in, as one SQNR: their relative noises add (exactly so for a
// product of its inputs; an upper bound for a sum). The input SQNR itself without graph inputs.
std::optional<double> carried_sqnr(const RunReport& run, const GroupReport& group) {
  double noise = 0;
  bool any = false;
  for (const std::string& id : group.inputs) {
    const GroupReport* input = run.group(id);
    if (input == nullptr || !input->sqnr_db) continue;
    noise += compare::relative_noise(*input->sqnr_db);
    any = true;
  }
  if (!any) return group.input_sqnr_db;
  return noise > 0 ? -10 * std::log10(noise) : std::numeric_limits<double>::infinity();
}

// The group's own excess error, from the best evidence it has: its replay, its kernel part, or
// its total (compare/excess.h). None where NaN or Inf come in or go out: the finite pairs' figures
// then do not weigh what the op adds.
std::optional<compare::Excess> group_excess(const RunReport& run, const GroupReport& group,
                                            const PairReport* worst, bool non_finite_input) {
  if (worst == nullptr || !group.sqnr_db) return std::nullopt;
  if (non_finite_input || device_non_finite(group)) return std::nullopt;
  compare::ExcessInputs in;
  in.sqnr_db = *group.sqnr_db;
  in.input_sqnr_db = carried_sqnr(run, group);
  in.ideal_sqnr_db = worst->metrics->ideal_sqnr_db;
  if (group.parts) {
    const ErrorParts& parts = *group.parts;
    if (parts.isolated && parts.isolated->sqnr_db && !parts.isolated->no_evidence) {
      in.isolated_sqnr_db = parts.isolated->sqnr_db;
    }
    if (parts.kernel && parts.kernel->sqnr_db && !parts.kernel->no_evidence) {
      in.kernel_sqnr_db = parts.kernel->sqnr_db;
      in.kernel_input_sqnr_db = part_input_sqnr(*parts.kernel);
    }
  }
  return compare::estimate_excess(in);
}

// A group's verdict from its outputs: the worst of theirs, the highest rule that judged one, and
// the judgement of its worst output with evidence (the one its SQNR is), which the excess rule
// also judges.
compare::Judgement judge_outputs(const RunReport& run, GroupReport& group,
                                 const compare::Policy& policy, bool non_finite_input,
                                 bool& no_evidence) {
  compare::Judgement worst{Verdict::kPass, -1, policy.defaults()};
  Verdict verdict = Verdict::kPass;
  int rule = -1;
  const PairReport* worst_output = worst_pair(group);
  group.excess = group_excess(run, group, worst_output, non_finite_input);
  for (const PairReport& pair : group.pairs) {
    compare::OutputFacts facts = output_facts(group, pair);
    if (&pair == worst_output && group.excess) {
      facts.excess_db = group.excess->excess_db;
      facts.excess_noise_ratio = group.excess->excess_noise_ratio;
      facts.excess_measured = group.excess->source == compare::ExcessSource::kIsolated;
    }
    const compare::Judgement judgement = policy.judge_output(facts);
    verdict = compare::worse(verdict, judgement.verdict);
    rule = std::max(rule, judgement.rule);
    no_evidence = no_evidence || facts.no_evidence;
    if (&pair == worst_output) worst = judgement;
  }
  group.verdict = verdict;
  group.policy_rule = rule;
  return worst;
}

// ---- introducers (docs/metrics.md, "Introducers")

constexpr double kInf = std::numeric_limits<double>::infinity();

// 10 log10(power), -inf for none.
double db_of(double power) { return power > 0 ? 10 * std::log10(power) : -kInf; }

// The noise an op adds itself, relative to its signal, when nothing better measures it: what its
// output's noise has beyond what its input carried in (none without a compared input).
double own_noise_db(double sqnr_db, std::optional<double> input_sqnr_db) {
  if (sqnr_db >= compare::kExactSqnrDb) return -kInf;  // exact: no noise at all
  const double carried = input_sqnr_db ? compare::relative_noise(*input_sqnr_db) : 0;
  return db_of(std::max(0.0, compare::relative_noise(sqnr_db) - carried));
}

// An entry when the figure says the op adds something (NaN/Inf of its own rank first).
std::optional<Introducer> introducer(const std::string& id, double added_noise_db,
                                     double introduced_db) {
  if (!(added_noise_db > -kInf)) return std::nullopt;
  return Introducer{id, introduced_db, added_noise_db};
}

// The SQNR a group lost, for its introducer entry: its `introduced_db`, except that without a
// compared input, or with one compared exact (a graph input, a replay's own inputs), the loss is
// measured against what its encoding allows (its worst output's ideal SQNR; +inf without one),
// so that an ordinary first op does not read as losing all of float32's resolution.
double loss_db(const GroupReport& group, std::optional<double> introduced,
               std::optional<double> input_sqnr_db, double sqnr_db) {
  if (introduced && input_sqnr_db && *input_sqnr_db < compare::kExactSqnrDb) return *introduced;
  const PairReport* worst = worst_pair(group);
  const double allowed =
      worst != nullptr && worst->metrics->ideal_sqnr_db ? *worst->metrics->ideal_sqnr_db : kInf;
  return compare::introduced_db(allowed, sqnr_db);
}

// A group of the total (REF vs DEV): ranked by the noise it adds, its encoding's rounding and
// clipping included (an op whose encoding clips introduces that error as surely as a faulty
// kernel): its replay's when it has one (the excess estimate's measured added_noise_db, excess.h),
// else its output's noise beyond its input's. The kernel and total excess estimates leave the
// encoding's own rounding out, so they do not rank. Inputs carrying NaN/Inf the reference lacks
// make its figures say nothing of what it adds: never an introducer then.
std::optional<Introducer> total_introducer(const RunReport& run, size_t index) {
  const GroupReport& group = run.groups[index];
  if (input_non_finite(run, index)) return std::nullopt;
  if (device_non_finite(group)) return Introducer{group.id, kInf, kInf};
  if (!group.sqnr_db) return std::nullopt;
  const bool replayed = group.excess && group.excess->source == compare::ExcessSource::kIsolated;
  const double added =
      replayed ? group.excess->added_noise_db : own_noise_db(*group.sqnr_db, group.input_sqnr_db);
  return introducer(group.id, added,
                    loss_db(group, group.introduced_db, group.input_sqnr_db, *group.sqnr_db));
}

// A group within an error part: the replay (ISO vs DEV) measures the op alone, so all its noise is
// its own; the other parts' noise is the op's beyond what its inputs carried in within the part.
std::optional<Introducer> part_introducer(const RunReport& run, size_t index,
                                          std::optional<PartFigures> ErrorParts::*member) {
  const GroupReport& group = run.groups[index];
  if (!group.parts || !((*group.parts).*member)) return std::nullopt;
  const PartFigures& part = *((*group.parts).*member);
  const auto carries_non_finite = [&](const GroupReport* input) {
    return input->parts && (*input->parts).*member &&
           ((*input->parts).*member)->non_finite_introduced;
  };
  const std::vector<const GroupReport*> inputs = input_groups(run, index);
  if (std::any_of(inputs.begin(), inputs.end(), carries_non_finite)) return std::nullopt;
  if (part.non_finite_introduced) return Introducer{group.id, kInf, kInf};
  if (!part.sqnr_db || part.no_evidence) return std::nullopt;
  const bool alone = member == &ErrorParts::isolated;
  const std::optional<double> input = alone ? std::nullopt : part_input_sqnr(part);
  const double added = own_noise_db(*part.sqnr_db, input);
  return introducer(group.id, added, loss_db(group, part.introduced_db, input, *part.sqnr_db));
}

// Most noise added first; ties keep the op order.
void rank(std::vector<Introducer>& introducers) {
  std::stable_sort(introducers.begin(), introducers.end(),
                   [](const Introducer& a, const Introducer& b) {
                     return *a.added_noise_db > *b.added_noise_db;
                   });
}

}  // namespace

void find_introducers(RunReport& run) {
  run.introducers.clear();
  for (size_t g = 0; g < run.groups.size(); ++g) {
    if (auto found = total_introducer(run, g)) run.introducers.push_back(std::move(*found));
  }
  rank(run.introducers);
  for (const auto& term : compare::kParts) {
    std::optional<PartRun>& part_run = run.*kRunParts[part_index(term.value)];
    if (!part_run) continue;
    part_run->introducers.clear();
    for (size_t g = 0; g < run.groups.size(); ++g) {
      auto found = part_introducer(run, g, kGroupParts[part_index(term.value)]);
      if (found) part_run->introducers.push_back(std::move(*found));
    }
    rank(part_run->introducers);
  }
}

void trace_first_divergence(RunReport& run) {
  if (!run.first_divergence) return;
  const GroupReport* first = run.group(*run.first_divergence);
  if (first == nullptr || first->hints.empty()) return;
  const auto* inherited = std::get_if<compare::Inherited>(&first->hints.front().evidence);
  if (inherited == nullptr) return;
  const GroupReport* source = run.group(inherited->upstream_group);
  // A warning source before it: the op whose own error the failure carries, though it stays above
  // the fail line itself (a clipping whose error the ops after it amplify).
  if (source != nullptr && source->verdict == Verdict::kWarn && source->order < first->order) {
    run.first_divergence = source->id;
  }
}

std::vector<compare::Judgement> judge(RunReport& run, const compare::Policy& policy) {
  std::vector<compare::Judgement> judged;
  judged.reserve(run.groups.size());
  Verdict run_verdict = Verdict::kPass;
  run.first_divergence.reset();
  for (size_t g = 0; g < run.groups.size(); ++g) {
    GroupReport& group = run.groups[g];
    bool no_evidence = false;
    compare::Judgement judgement =
        judge_outputs(run, group, policy, input_non_finite(run, g), no_evidence);
    if (group.parts) judge_parts(group, policy, no_evidence, worst_pair(group));
    judgement.verdict = group.verdict;
    run_verdict = compare::worse(run_verdict, group.verdict);
    if (group.verdict == Verdict::kFail && !run.first_divergence) run.first_divergence = group.id;
    judged.push_back(std::move(judgement));
  }
  compare::RunJudgement judgement = policy.judge_run(run_facts(run));
  judge_part_evidence(run, judgement);
  run.verdict = compare::worse(run_verdict, judgement.verdict);
  run.verdict_reasons = judgement.reasons;
  find_part_divergence(run, run.quantization, &ErrorParts::quantization);
  find_part_divergence(run, run.kernel, &ErrorParts::kernel);
  find_part_divergence(run, run.isolated, &ErrorParts::isolated);
  trace_first_divergence(run);
  find_introducers(run);
  return judged;
}

namespace {

// What a group's run adds to its departure series: NaN (worse than any SQNR) where the device
// has NaN or Inf the reference lacks, else its SQNR; nullopt when nothing was compared.
std::optional<double> departure_figure(const GroupReport& group) {
  if (!group.sqnr_db) return std::nullopt;
  return device_non_finite(group) ? std::numeric_limits<double>::quiet_NaN() : *group.sqnr_db;
}

}  // namespace

void DepartureJudge::judge(RunReport& run) {
  for (GroupReport& group : run.groups) {
    group.departure.reset();
    const std::optional<double> figure = departure_figure(group);
    if (!figure || !rule_.enabled) continue;
    Series& series = series_[{run.device, group.id}];
    if (series.departed) continue;
    group.departure = compare::departs(series.baseline, *figure, rule_);
    series.departed = group.departure.has_value();
    const std::optional<double> kept = compare::baseline_figure(*figure);
    if (!kept) continue;
    series.baseline.push_back(*kept);
    // Only the latest `window` figures make a baseline: keep at most twice that, trimmed at once.
    if (rule_.window > 0 && series.baseline.size() >= 2 * rule_.window) {
      series.baseline.erase(series.baseline.begin(),
                            series.baseline.end() - static_cast<std::ptrdiff_t>(rule_.window));
    }
  }
}

void judge(Report& report, const compare::Policy& policy) {
  EndingBuilder ending(report.header);
  DepartureJudge departures(policy.departure());
  for (RunReport& run : report.runs) {
    judge(run, policy);
    departures.judge(run);
    ending.add_run(run);
  }
  report.header.policy = policy;
  report.ending = std::move(ending).finish(std::move(report.ending.warnings));
}

}  // namespace qd::report
