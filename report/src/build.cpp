#include "qnn_debug/report/build.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace qd::report {
namespace {

using compare::GroupFinding;
using compare::PairResult;
using compare::RunAnalysis;
using compare::RunComparison;

PairReport pair_report(const PairResult& result) {
  PairReport pair;
  pair.output_index = result.pair.output_index;
  pair.match = compare::match_kind_name(result.pair.how);
  pair.reference = tensor_summary(*result.pair.ref);
  pair.device = tensor_summary(*result.pair.device);
  if (result.layout) {
    pair.layout =
        LayoutSummary{result.layout->axis_order, result.layout->inferred, result.layout->reshaped};
  }
  pair.metrics = result.metrics;
  pair.error = result.error;
  return pair;
}

GroupReport group_report(const RunComparison& run, const GroupFinding& finding, size_t order) {
  const compare::Group& group = run.alignment.groups[finding.group];
  GroupReport out;
  out.id = group.id;
  out.order = order;
  out.handles = group.handles;
  out.op_type = finding.op_type;
  out.sqnr_db = finding.sqnr_db;
  out.input_sqnr_db = finding.input_sqnr_db;
  out.introduced_db = finding.introduced_db;
  out.flags = finding.flags;
  for (size_t p : finding.pairs) out.pairs.push_back(pair_report(run.pairs[p]));
  // Another op's output carries other handles than the compared outputs (an op's own outputs,
  // compared or left unmatched, share its handles).
  for (const auto* member : group.ref_members) {
    const bool own = std::any_of(out.pairs.begin(), out.pairs.end(), [&](const PairReport& p) {
      return p.reference.handles == member->handles;
    });
    if (!own) out.fused.push_back(member->name);
  }
  return out;
}

PartFigures part_figures(const RunComparison& run, const GroupFinding& finding) {
  PartFigures figures;
  figures.sqnr_db = finding.sqnr_db;
  figures.introduced_db = finding.introduced_db;
  figures.non_finite_introduced = finding.non_finite;
  bool all_near_zero = true, any_compared = false;
  for (size_t p : finding.pairs) {
    const PairResult& pair = run.pairs[p];
    const std::optional<compare::Metrics>& m = pair.metrics;
    if (!m) {
      if (!figures.error.empty()) figures.error += "; ";
      figures.error += compare::describe_not_compared(pair.pair.ref->name, pair.pair.device->name,
                                                      match_kind_name(pair.pair.how), pair.error);
      continue;
    }
    figures.no_evidence = figures.no_evidence || compare::no_evidence(*m);
    figures.noise_power += m->mse * static_cast<double>(m->n);
    if (m->lsb_max) figures.lsb_max = std::max(figures.lsb_max.value_or(0), *m->lsb_max);
    any_compared = true;
    all_near_zero = all_near_zero && compare::near_zero_reference(*m);
  }
  // The part's figures are its worst output's: the near-zero rule judges them only when it would
  // judge every output.
  figures.near_zero_reference = any_compared && all_near_zero;
  return figures;
}

// The member of a part-indexed triple (ErrorParts' figures, RunReport's PartRuns) for `part`.
template <class T>
T& of_part(compare::Part part, T& quantization, T& kernel, T& isolated) {
  return part == compare::Part::kKernel     ? kernel
         : part == compare::Part::kIsolated ? isolated
                                            : quantization;
}

// The reported groups feeding analysis group `index` in the stored graph: a group without
// compared pairs is not in the report, so the walk passes through it to its own inputs.
std::vector<std::string> reported_inputs(const RunComparison& run, const RunAnalysis& analysis,
                                         size_t index) {
  std::vector<std::string> out;
  std::vector<bool> seen(analysis.groups.size(), false);
  std::vector<size_t> pending(analysis.groups[index].graph_inputs.rbegin(),
                              analysis.groups[index].graph_inputs.rend());
  while (!pending.empty()) {
    const size_t g = pending.back();
    pending.pop_back();
    if (seen[g]) continue;
    seen[g] = true;
    const GroupFinding& input = analysis.groups[g];
    if (!input.pairs.empty()) {
      out.push_back(run.alignment.groups[input.group].id);
      continue;
    }
    pending.insert(pending.end(), input.graph_inputs.rbegin(), input.graph_inputs.rend());
  }
  return out;
}

// Where a profile event's op is among a run's groups: by debug handle, else by tensor name;
// the first group in op order wins either way.
class GroupIndex {
 public:
  explicit GroupIndex(RunReport& run) {
    for (GroupReport& group : run.groups) {
      for (int64_t handle : group.handles) by_handle_.emplace(handle, &group);
      for (const PairReport& pair : group.pairs) {
        by_name_.emplace(pair.device.name, &group);
        by_name_.emplace(pair.reference.name, &group);
      }
    }
  }
  GroupReport* of(const ProfileEvent& event) const {
    for (int64_t handle : event.handles) {
      if (auto found = by_handle_.find(handle); found != by_handle_.end()) return found->second;
    }
    const auto found = by_name_.find(event.name);
    return found == by_name_.end() ? nullptr : found->second;
  }

 private:
  std::unordered_map<int64_t, GroupReport*> by_handle_;
  std::unordered_map<std::string, GroupReport*> by_name_;
};

}  // namespace

void join_profile(RunReport& run, const std::vector<ProfileEvent>& device_events) {
  const GroupIndex groups(run);
  std::unordered_map<std::string, double> unit_total;
  for (const ProfileEvent& event : device_events) {
    if (event.run_id != run.device_run) continue;
    const auto duration = static_cast<double>(event.end - event.start);
    unit_total[event.unit] += duration;
    GroupReport* group = groups.of(event);
    if (group == nullptr) continue;
    // A group whose events come in two units keeps the first unit's: durations in different
    // clocks do not add up.
    if (group->time && group->time->unit != event.unit) continue;
    OpTime& time = group->time ? *group->time : group->time.emplace();
    time.unit = event.unit;
    time.duration += duration;
    ++time.events;
  }
  for (GroupReport& group : run.groups) {
    if (!group.time) continue;
    const double total = unit_total[group.time->unit];
    group.time->share = total > 0 ? group.time->duration / total : 0;
  }
}

void add_part(RunReport& report, const compare::PartComparison& part, const RunAnalysis& analysis) {
  const RunComparison& run = part.run;
  std::unordered_map<std::string_view, GroupReport*> by_id;
  for (GroupReport& group : report.groups) {
    if (!group.parts) group.parts.emplace();
    by_id.emplace(group.id, &group);
  }
  for (const GroupFinding& finding : analysis.groups) {
    const auto group = by_id.find(run.alignment.groups[finding.group].id);
    if (finding.pairs.empty() || group == by_id.end()) continue;
    ErrorParts& parts = *group->second->parts;
    of_part(part.part, parts.quantization, parts.kernel, parts.isolated) =
        part_figures(run, finding);
  }
  PartRun summary;
  summary.third_run = part.third_run;
  summary.missing_pairs = part.missing_pairs;  // its introducers are the judge's
  of_part(part.part, report.quantization, report.kernel, report.isolated) = std::move(summary);
}

TensorSummary tensor_summary(const TensorEntry& t) {
  TensorSummary out;
  out.name = t.name;
  out.seq = t.seq;
  out.handles = t.handles;
  out.output_index = t.output_index;
  out.dtype = info(t.dtype).name;
  out.dims = t.dims;
  out.data_nbytes = t.data_nbytes;
  out.axis_order = t.axis_order;
  out.quant = t.quant;
  out.encoding_problems = lint_encoding(t);
  out.stats = t.stats;
  return out;
}

RunReport run_report(const RunComparison& run, const RunAnalysis& analysis) {
  RunReport out;
  out.reference_run = run.ref_run;
  out.device_run = run.device_run;
  const compare::RunCoverage& c = analysis.coverage;
  out.coverage = Coverage{c.reference_tensors, c.matched_reference_tensors, c.compared_pairs};
  out.classification = run.classification;
  out.order_from_graph = analysis.order_from_graph;  // its introducers are the judge's
  for (size_t i = 0; i < analysis.groups.size(); ++i) {
    if (!analysis.groups[i].pairs.empty()) {
      out.groups.push_back(group_report(run, analysis.groups[i], i));
      out.groups.back().inputs = reported_inputs(run, analysis, i);
    }
  }
  for (const compare::Unmatched& u : run.alignment.unmatched) {
    out.unmatched.push_back({u.side == compare::Side::kReference, u.tensor->name, u.tensor->seq,
                             u.reason, u.ambiguous, u.graph_output});
  }
  return out;
}

std::vector<compare::JudgedGroup> judged_groups(const RunReport& report,
                                                const std::vector<compare::Judgement>& judged,
                                                const RunAnalysis& analysis) {
  std::vector<compare::JudgedGroup> out(analysis.groups.size());
  for (size_t g = 0; g < report.groups.size() && g < judged.size(); ++g) {
    const uint64_t at = report.groups[g].order;
    if (at < out.size()) {
      out[at] = {judged[g].verdict, judged[g].thresholds.warn_below_db, report.groups[g].excess,
                 judged[g].excess};
    }
  }
  return out;
}

void add_hints(RunReport& report, RunAnalysis&& analysis) {
  for (GroupReport& group : report.groups) {
    if (group.order < analysis.groups.size()) {
      group.hints = std::move(analysis.groups[group.order].hints);
    }
  }
}

StoreSummary store_summary(const StoreReader& store, const InputLabel& input) {
  StoreSummary out;
  out.path = input.path.empty() ? store.path() : input.path;
  out.format = input.format;
  out.metadata = store.metadata();
  for (const RunInfo& r : store.runs()) {
    out.runs.push_back({r.id, r.name, r.complete, r.tensor_count, r.dropped_count});
  }
  out.profile_events = store.profile_events();
  out.memory_checkpoints = store.memory_checkpoints();
  return out;
}

}  // namespace qd::report
