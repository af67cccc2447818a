#include "qnn_debug/report/diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "qnn_debug/report/inspect.h"

namespace qd::report {
namespace {

using compare::GroupFinding;
using compare::Metrics;
using compare::PairResult;
using compare::RunAnalysis;
using compare::RunComparison;
using compare::Verdict;
using nlohmann::json;

// JSON has no infinities: +inf SQNR (identical tensors) is written as the string "inf", and
// -inf / NaN as "-inf" / "nan" (docs/report-schema.json).
json number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

json optional_number(const std::optional<double>& value) {
  return value ? number(*value) : json(nullptr);
}

json quantization_json(const Quantization& quant) {
  if (!quant.is_quantized()) return nullptr;
  return {{"scales", quant.scales},
          {"offsets", quant.offsets},
          {"axis", quant.axis},
          {"bitwidth", quant.bitwidth},
          {"convention",
           quant.convention == QuantConvention::kQnnOffset ? "qnn_offset" : "zero_point"}};
}

json tensor_json(const TensorEntry& t) {
  return {{"name", t.name},
          {"seq", t.seq},
          {"handles", t.handles},
          {"output_index", t.output_index},
          {"dtype", info(t.dtype).name},
          {"dims", t.dims},
          {"axis_order", t.axis_order},
          {"quantization", quantization_json(t.quant)},
          {"stats",
           {{"min", number(t.stats.min)},
            {"max", number(t.stats.max)},
            {"mean", number(t.stats.mean)},
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

json metrics_json(const Metrics& m, const TensorEntry& ref) {
  json channels = json::array();
  for (const auto& c : m.channels) {
    channels.push_back({{"sqnr_db", number(c.sqnr_db)},
                        {"mae", number(c.mae)},
                        {"max_abs", number(c.max_abs)},
                        {"n", c.n}});
  }
  return {{"elements", m.elements},
          {"n", m.n},
          {"ref_nan", m.ref_nan},
          {"ref_inf", m.ref_inf},
          {"dev_nan", m.dev_nan},
          {"dev_inf", m.dev_inf},
          {"sqnr_db", number(m.sqnr_db)},
          {"mse", number(m.mse)},
          {"rmse", number(m.rmse)},
          {"mae", number(m.mae)},
          {"l1_sum", number(m.l1_sum)},
          {"max_abs", number(m.max_abs)},
          {"max_abs_index", m.max_abs_index},
          {"max_abs_coordinates", coordinates(m.max_abs_index, ref.dims)},
          {"rel_l2", number(m.rel_l2)},
          {"cosine", number(m.cosine)},
          {"allclose_frac", number(m.allclose_frac)},
          {"lsb_mae", optional_number(m.lsb_mae)},
          {"lsb_max", optional_number(m.lsb_max)},
          {"noise_ratio", optional_number(m.noise_ratio)},
          {"saturation", optional_number(m.saturation)},
          {"channels", std::move(channels)},
          {"worst_channel", m.worst_channel ? json(*m.worst_channel) : json(nullptr)},
          {"error_histogram", {{"edges", m.histogram_edges}, {"counts", m.error_histogram}}}};
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
                           {"introduced_db", number(*analysis.groups[i].introduced_db)}});
  }
  for (const compare::Unmatched& u : run.alignment.unmatched) {
    unmatched.push_back({{"side", u.side == compare::Side::kReference ? "reference" : "device"},
                         {"name", u.tensor->name},
                         {"seq", u.tensor->seq},
                         {"reason", u.reason}});
  }
  json first = nullptr;
  if (analysis.first_divergence) {
    first = run.alignment.groups[analysis.groups[*analysis.first_divergence].group].id;
  }
  return {{"reference_run", run.ref_run},
          {"device_run", run.device_run},
          {"verdict", compare::verdict_name(analysis.verdict)},
          {"op_order", analysis.order_from_graph ? "graph" : "capture"},
          {"first_divergence", first},
          {"introducers", std::move(introducers)},
          {"groups", std::move(groups)},
          {"unmatched", std::move(unmatched)}};
}

json store_json(const StoreReader& store) {
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
  return {{"path", store.path()},
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
      per_run.push_back({{"device_run", v.first}, {"sqnr_db", number(v.second)}});
    out.push_back({{"id", id},
                   {"worst_sqnr_db", number(worst->second)},
                   {"worst_device_run", worst->first},
                   {"mean_sqnr_db", number(sum / static_cast<double>(values.size()))},
                   {"per_run", std::move(per_run)}});
  }
  return out;
}

struct Counts {
  size_t groups = 0, compared = 0, pass = 0, warn = 0, fail = 0, unmatched_ref = 0,
         unmatched_device = 0;
};

Counts count(const DiffReportInputs& in) {
  Counts c;
  for (size_t r = 0; r < in.comparison.runs.size(); ++r) {
    for (const GroupFinding& f : in.analyses[r].groups) {
      if (f.pairs.empty()) continue;
      ++c.groups;
      c.compared += f.pairs.size();
      (f.verdict == Verdict::kPass ? c.pass : f.verdict == Verdict::kWarn ? c.warn : c.fail)++;
    }
    for (const auto& u : in.comparison.runs[r].alignment.unmatched) {
      (u.side == compare::Side::kReference ? c.unmatched_ref : c.unmatched_device)++;
    }
  }
  return c;
}

// The first divergence of the first run that has one.
std::optional<std::pair<size_t, const GroupFinding*>> first_divergence(const DiffReportInputs& in) {
  for (size_t r = 0; r < in.analyses.size(); ++r) {
    if (in.analyses[r].first_divergence) {
      return std::pair{r, &in.analyses[r].groups[*in.analyses[r].first_divergence]};
    }
  }
  return std::nullopt;
}

}  // namespace

Verdict overall_verdict(const DiffReportInputs& inputs) {
  Verdict verdict = Verdict::kPass;
  for (const RunAnalysis& a : inputs.analyses) {
    if (static_cast<int>(a.verdict) > static_cast<int>(verdict)) verdict = a.verdict;
  }
  return verdict;
}

std::string diff_report_json(const DiffReportInputs& in) {
  const Counts c = count(in);
  json runs = json::array();
  for (size_t r = 0; r < in.comparison.runs.size(); ++r) {
    runs.push_back(run_json(in.comparison.runs[r], in.analyses[r]));
  }
  json first = nullptr;
  if (auto fd = first_divergence(in)) {
    const RunComparison& run = in.comparison.runs[fd->first];
    first = {{"device_run", run.device_run},
             {"group", run.alignment.groups[fd->second->group].id},
             {"sqnr_db", optional_number(fd->second->sqnr_db)},
             {"flags", fd->second->flags}};
  }
  json doc = {{"schema", kReportSchema},
              {"schema_version", kReportSchemaVersion},
              {"tool_version", in.tool_version},
              {"reference", store_json(in.ref)},
              {"device", store_json(in.device)},
              {"policy", json::parse(in.policy.to_json())},
              {"options",
               {{"atol", in.options.metrics.atol},
                {"rtol", in.options.metrics.rtol},
                {"ref_run", in.options.ref_run ? json(*in.options.ref_run) : json(nullptr)}}},
              {"metric_definitions", "docs/metrics.md"},
              {"summary",
               {{"verdict", compare::verdict_name(overall_verdict(in))},
                {"runs_compared", in.comparison.runs.size()},
                {"groups", c.groups},
                {"compared_pairs", c.compared},
                {"pass", c.pass},
                {"warn", c.warn},
                {"fail", c.fail},
                {"unmatched_reference", c.unmatched_ref},
                {"unmatched_device", c.unmatched_device},
                {"first_divergence", first}}},
              {"runs", std::move(runs)},
              {"aggregate", aggregate_json(in)},
              {"warnings", in.comparison.warnings}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string diff_summary_text(const DiffReportInputs& in, size_t worst_n, bool color) {
  auto paint = [color](Verdict v, const std::string& text) {
    if (!color) return text;
    const char* code = v == Verdict::kFail   ? "\033[31m"
                       : v == Verdict::kWarn ? "\033[33m"
                                             : "\033[32m";
    return code + text + "\033[0m";
  };
  const Counts c = count(in);
  const Verdict verdict = overall_verdict(in);
  std::string out = fmt::format("reference {}\ndevice    {}\n", printable(in.ref.path()),
                                printable(in.device.path()));
  out += fmt::format(
      "compared  {} runs, {} groups, {} pairs: {} pass, {} warn, {} fail; "
      "unmatched {} reference, {} device\n",
      in.comparison.runs.size(), c.groups, c.compared, c.pass, c.warn, c.fail, c.unmatched_ref,
      c.unmatched_device);
  if (auto fd = first_divergence(in)) {
    const RunComparison& run = in.comparison.runs[fd->first];
    const compare::Group& group = run.alignment.groups[fd->second->group];
    const TensorEntry* ref = run.pairs[fd->second->pairs.front()].pair.ref;
    out +=
        paint(Verdict::kFail,
              fmt::format("first divergence: group {} ({}) in device run {}: SQNR {} dB{}",
                          printable(group.id), printable(ref->name), run.device_run,
                          fd->second->sqnr_db ? fmt::format("{:.2f}", *fd->second->sqnr_db) : "n/a",
                          fd->second->flags.empty()
                              ? ""
                              : fmt::format(" [{}]", fmt::join(fd->second->flags, ", "))));
    out += "\n";
  } else {
    out += "first divergence: none\n";
  }
  // Worst groups of all runs by SQNR.
  std::vector<std::tuple<double, size_t, const GroupFinding*>> ranked;
  for (size_t r = 0; r < in.analyses.size(); ++r) {
    for (const GroupFinding& f : in.analyses[r].groups) {
      if (f.sqnr_db) ranked.emplace_back(*f.sqnr_db, r, &f);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](auto& a, auto& b) { return std::get<0>(a) < std::get<0>(b); });
  if (!ranked.empty()) out += fmt::format("worst {} groups:\n", std::min(worst_n, ranked.size()));
  for (size_t i = 0; i < std::min(worst_n, ranked.size()); ++i) {
    const auto& [sqnr, r, f] = ranked[i];
    const RunComparison& run = in.comparison.runs[r];
    const TensorEntry* ref = run.pairs[f->pairs.front()].pair.ref;
    out += fmt::format(
        "  {:>9.2f} dB  {:<5} run {:<3} {:<12} {}{}\n", sqnr,
        paint(f->verdict, std::string(compare::verdict_name(f->verdict))), run.device_run,
        printable(run.alignment.groups[f->group].id), printable(ref->name),
        f->introduced_db ? fmt::format("  (introduced {:+.2f} dB)", *f->introduced_db) : "");
  }
  for (const std::string& w : in.comparison.warnings) out += "warning: " + printable(w) + "\n";
  out += paint(verdict, fmt::format("verdict: {}", compare::verdict_name(verdict))) + "\n";
  return out;
}

}  // namespace qd::report
