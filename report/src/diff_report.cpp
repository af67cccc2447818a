#include "qnn_debug/report/diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "tensor_fields.h"

namespace qd::report {
namespace {

using compare::GroupFinding;
using compare::Metrics;
using compare::PairResult;
using compare::RunAnalysis;
using compare::RunComparison;
using compare::Verdict;
using nlohmann::json;

json optional_number(const std::optional<double>& value) {
  return value ? json_real(*value) : json(nullptr);
}

json tensor_json(const TensorEntry& t) {
  return {{"name", t.name},
          {"seq", t.seq},
          {"handles", t.handles},
          {"output_index", t.output_index},
          {"dtype", info(t.dtype).name},
          {"dims", t.dims},
          {"data_nbytes", t.data_nbytes},
          {"axis_order", t.axis_order},
          {"quantization", quantization_json(t.quant)},
          {"encoding_problems", encoding_problems_json(t)},
          {"stats",
           {{"min", json_real(t.stats.min)},
            {"max", json_real(t.stats.max)},
            {"mean", json_real(t.stats.mean)},
            {"nan_count", t.stats.nan_count},
            {"inf_count", t.stats.inf_count}}}};
}

// Flat index in reference order -> coordinates in the reference shape.
std::vector<uint64_t> coordinates(uint64_t index, const std::vector<uint64_t>& dims) {
  std::vector<uint64_t> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    coords[d] = dims[d] ? index % dims[d] : 0;
    index = dims[d] ? index / dims[d] : 0;
  }
  return coords;
}

json worst_json(const std::vector<compare::WorstElement>& worst, const TensorEntry& ref) {
  json out = json::array();
  for (const compare::WorstElement& w : worst) {
    out.push_back({{"index", w.index},
                   {"coordinates", coordinates(w.index, ref.dims)},
                   {"reference", json_real(w.reference)},
                   {"device", json_real(w.device)},
                   {"abs_error", json_real(w.abs_error)}});
  }
  return out;
}

json metrics_json(const Metrics& m, const TensorEntry& ref) {
  json channels = json::array();
  for (const auto& c : m.channels) {
    channels.push_back({{"sqnr_db", json_real(c.sqnr_db)},
                        {"mae", json_real(c.mae)},
                        {"max_abs", json_real(c.max_abs)},
                        {"n", c.n}});
  }
  return {{"elements", m.elements},
          {"n", m.n},
          {"ref_nan", m.ref_nan},
          {"ref_inf", m.ref_inf},
          {"dev_nan", m.dev_nan},
          {"dev_inf", m.dev_inf},
          {"sqnr_db", json_real(m.sqnr_db)},
          {"mse", json_real(m.mse)},
          {"rmse", json_real(m.rmse)},
          {"mae", json_real(m.mae)},
          {"l1_sum", json_real(m.l1_sum)},
          {"max_abs", json_real(m.max_abs)},
          {"max_abs_index", m.max_abs_index},
          {"max_abs_coordinates", coordinates(m.max_abs_index, ref.dims)},
          {"rel_l2", json_real(m.rel_l2)},
          {"cosine", json_real(m.cosine)},
          {"allclose_frac", json_real(m.allclose_frac)},
          {"lsb_mae", optional_number(m.lsb_mae)},
          {"lsb_max", optional_number(m.lsb_max)},
          {"noise_ratio", optional_number(m.noise_ratio)},
          {"saturation", optional_number(m.saturation)},
          {"saturated_low", m.saturated_low},
          {"saturated_high", m.saturated_high},
          {"channels", std::move(channels)},
          {"worst_channel", m.worst_channel ? json(*m.worst_channel) : json(nullptr)},
          {"error_histogram", {{"edges", m.histogram_edges}, {"counts", m.error_histogram}}},
          {"worst", worst_json(m.worst, ref)}};
}

json pair_json(const PairResult& pair) {
  json layout = nullptr;
  if (pair.layout) {
    layout = {{"axis_order", pair.layout->axis_order},
              {"inferred", pair.layout->inferred},
              {"reshaped", pair.layout->reshaped}};
  }
  return {{"output_index", pair.pair.output_index},
          {"match", compare::match_kind_name(pair.pair.how)},
          {"reference", tensor_json(*pair.pair.ref)},
          {"device", tensor_json(*pair.pair.device)},
          {"layout", layout},
          {"metrics", pair.metrics ? metrics_json(*pair.metrics, *pair.pair.ref) : json(nullptr)},
          {"error", pair.error.empty() ? json(nullptr) : json(pair.error)}};
}

json group_json(const RunComparison& run, const GroupFinding& finding, size_t order) {
  const compare::Group& group = run.alignment.groups[finding.group];
  json pairs = json::array();
  for (size_t p : finding.pairs) pairs.push_back(pair_json(run.pairs[p]));
  return {{"id", group.id},
          {"order", order},
          {"handles", group.handles},
          {"op_type", finding.op_type},
          {"verdict", compare::verdict_name(finding.verdict)},
          {"policy_rule", finding.policy_rule},
          {"sqnr_db", optional_number(finding.sqnr_db)},
          {"input_sqnr_db", optional_number(finding.input_sqnr_db)},
          {"introduced_db", optional_number(finding.introduced_db)},
          {"flags", finding.flags},
          {"pairs", std::move(pairs)}};
}

json run_json(const RunComparison& run, const RunAnalysis& analysis) {
  json groups = json::array(), unmatched = json::array(), introducers = json::array();
  for (size_t i = 0; i < analysis.groups.size(); ++i) {
    if (!analysis.groups[i].pairs.empty()) {
      groups.push_back(group_json(run, analysis.groups[i], i));
    }
  }
  for (size_t i : analysis.introducers) {
    introducers.push_back({{"id", run.alignment.groups[analysis.groups[i].group].id},
                           {"introduced_db", json_real(*analysis.groups[i].introduced_db)}});
  }
  for (const compare::Unmatched& u : run.alignment.unmatched) {
    unmatched.push_back({{"side", u.side == compare::Side::kReference ? "reference" : "device"},
                         {"name", u.tensor->name},
                         {"seq", u.tensor->seq},
                         {"reason", u.reason},
                         {"ambiguous", u.ambiguous},
                         {"graph_output", u.graph_output}});
  }
  json first = nullptr;
  if (analysis.first_divergence) {
    first = run.alignment.groups[analysis.groups[*analysis.first_divergence].group].id;
  }
  const compare::RunFacts& f = analysis.facts;
  json classification = nullptr;
  if (run.classification) {
    classification = {{"tensor", run.classification->tensor},
                      {"rows", run.classification->rows},
                      {"classes", run.classification->classes},
                      {"top1_agreement", optional_number(run.classification->top1)},
                      {"top5_agreement", optional_number(run.classification->top5)}};
  }
  return {{"reference_run", run.ref_run},
          {"device_run", run.device_run},
          {"verdict", compare::verdict_name(analysis.verdict)},
          {"verdict_reasons", analysis.judgement.reasons},
          {"coverage",
           {{"reference_tensors", f.reference_tensors},
            {"matched_reference_tensors", f.matched_reference_tensors},
            {"compared_pairs", f.compared_pairs}}},
          {"classification", classification},
          {"op_order", analysis.order_from_graph ? "graph" : "capture"},
          {"first_divergence", first},
          {"introducers", std::move(introducers)},
          {"groups", std::move(groups)},
          {"unmatched", std::move(unmatched)}};
}

json store_json(const StoreReader& store, const InputLabel& input) {
  const StoreMetadata& m = store.metadata();
  json runs = json::array();
  for (const RunInfo& r : store.runs()) {
    runs.push_back({{"id", r.id},
                    {"name", r.name},
                    {"complete", r.complete},
                    {"tensor_count", r.tensor_count},
                    {"dropped_count", r.dropped_count}});
  }
  json profile = json::array(), memory = json::array();
  for (const ProfileEvent& e : store.profile_events()) {
    profile.push_back({{"run", e.run_id == kNoRun ? json(nullptr) : json(e.run_id)},
                       {"name", e.name},
                       {"instruction_id", e.instruction_id < 0 ? json() : json(e.instruction_id)},
                       {"handles", e.handles},
                       {"start", e.start},
                       {"end", e.end},
                       {"unit", e.unit}});
  }
  for (const MemoryCheckpoint& c : store.memory_checkpoints()) {
    memory.push_back({{"run", c.run_id == kNoRun ? json(nullptr) : json(c.run_id)},
                      {"label", c.label},
                      {"bytes", c.bytes}});
  }
  return {{"path", input.path.empty() ? store.path() : input.path},
          {"format", input.format},
          {"producer", m.producer},
          {"backend", m.backend},
          {"soc", m.soc},
          {"model", m.model},
          {"created_unix_ns", m.created_unix_ns},
          {"runs", std::move(runs)},
          {"profile_events", std::move(profile)},
          {"memory_checkpoints", std::move(memory)}};
}

// Per group id across runs: worst and mean SQNR, and the run where it was worst.
json aggregate_json(const DiffReportInputs& in) {
  struct Across {
    std::vector<std::pair<uint32_t, double>> per_run;
  };
  std::map<std::string, Across> by_id;
  std::vector<std::string> order;
  for (size_t r = 0; r < in.comparison.runs.size(); ++r) {
    const RunComparison& run = in.comparison.runs[r];
    for (const GroupFinding& f : in.analyses[r].groups) {
      if (!f.sqnr_db) continue;
      const std::string& id = run.alignment.groups[f.group].id;
      if (!by_id.count(id)) order.push_back(id);
      by_id[id].per_run.emplace_back(run.device_run, *f.sqnr_db);
    }
  }
  json out = json::array();
  for (const std::string& id : order) {
    const auto& values = by_id[id].per_run;
    auto worst = std::min_element(values.begin(), values.end(),
                                  [](auto& a, auto& b) { return a.second < b.second; });
    double sum = 0;
    for (const auto& v : values) sum += v.second;
    json per_run = json::array();
    for (const auto& v : values)
      per_run.push_back({{"device_run", v.first}, {"sqnr_db", json_real(v.second)}});
    out.push_back({{"id", id},
                   {"worst_sqnr_db", json_real(worst->second)},
                   {"worst_device_run", worst->first},
                   {"mean_sqnr_db", json_real(sum / static_cast<double>(values.size()))},
                   {"per_run", std::move(per_run)}});
  }
  return out;
}

}  // namespace

Document build_report(const DiffReportInputs& in) {
  json runs = json::array();
  for (size_t r = 0; r < in.comparison.runs.size(); ++r) {
    runs.push_back(run_json(in.comparison.runs[r], in.analyses[r]));
  }
  Document doc = {{"schema", kReportSchema},
                  {"schema_version", kReportSchemaVersion},
                  {"tool_version", in.tool_version},
                  {"reference", store_json(in.ref, in.ref_input)},
                  {"device", store_json(in.device, in.device_input)},
                  {"policy", json::parse(in.policy.to_json())},
                  {"options",
                   {{"atol", in.options.metrics.atol},
                    {"rtol", in.options.metrics.rtol},
                    {"ref_run", in.options.ref_run ? json(*in.options.ref_run) : json(nullptr)}}},
                  {"metric_definitions", "docs/metrics.md"},
                  {"summary", json::object()},
                  {"runs", std::move(runs)},
                  {"aggregate", aggregate_json(in)},
                  {"warnings", in.comparison.warnings}};
  summarize(doc);
  return doc;
}

}  // namespace qd::report
