#include "qnn_debug/pipeline/diff.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/explain.h"
#include "qnn_debug/compare/parts.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/pipeline/settings.h"
#include "qnn_debug/report/build.h"
#include "qnn_debug/report/judge.h"

namespace qd::pipeline {
namespace {

std::string fmt_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A damaged store is bad input, not a numerical finding.
Status first_damaged_pair(const compare::RunComparison& run) {
  for (const auto& pair : run.pairs) {
    if (pair.error_code == ErrorCode::kCorrupt || pair.error_code == ErrorCode::kIo) {
      return error(pair.error_code, pair.error);
    }
  }
  return Status::ok();
}

// allclose's tolerances: a NaN or negative one would make every element fail or pass unseen.
Status check_tolerances(const DiffRequest& request) {
  for (const auto& [flag, value] : {std::pair{"--atol", request.atol}, {"--rtol", request.rtol}}) {
    if (!std::isfinite(value) || value < 0) {
      return error(ErrorCode::kInvalidArgument, std::string(flag) + " " + fmt_number(value) +
                                                    ": a tolerance must be a finite number >= 0");
    }
  }
  return Status::ok();
}

compare::CompareOptions compare_options(const DiffRequest& request,
                                        const compare::NameMapping* mapping) {
  compare::CompareOptions options;
  options.mapping = mapping;
  options.metrics.atol = request.atol;
  options.metrics.rtol = request.rtol;
  options.ref_run = request.ref_run;
  options.logits = request.logits;
  options.jobs =
      request.jobs != 0 ? request.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.chunk_elements = std::max<uint64_t>(1, request.chunk_elements);
  return options;
}

report::InputLabel label_of(const OpenedInput& input) {
  return {input.path(), std::string(format_name(input.format()))};
}

// The third stores of a diff (a simulation, a replay) and the error parts each gives.
struct ThirdInputs {
  std::optional<OpenedInput> simulation, isolated;

  static Result<ThirdInputs> open(const DiffRequest& request) {
    ThirdInputs out;
    if (request.simulation) {
      QD_ASSIGN_OR_RETURN(OpenedInput sim, OpenedInput::open(*request.simulation));
      out.simulation.emplace(std::move(sim));
    }
    if (request.isolated) {
      QD_ASSIGN_OR_RETURN(OpenedInput iso, OpenedInput::open(*request.isolated));
      out.isolated.emplace(std::move(iso));
    }
    return out;
  }

  std::vector<std::pair<compare::Part, const OpenedInput*>> parts() const {
    std::vector<std::pair<compare::Part, const OpenedInput*>> out;
    if (simulation) {
      out.emplace_back(compare::Part::kQuantization, &*simulation);
      out.emplace_back(compare::Part::kKernel, &*simulation);
    }
    if (isolated) out.emplace_back(compare::Part::kIsolated, &*isolated);
    return out;
  }
};

// How many pairs of a run have no metrics, and the first one's description.
std::pair<size_t, std::string> not_compared(const compare::RunComparison& run) {
  std::pair<size_t, std::string> out{0, {}};
  for (const compare::PairResult& pair : run.pairs) {
    if (pair.metrics) continue;
    if (out.first++ == 0) {
      out.second =
          compare::describe_not_compared(pair.pair.ref->name, pair.pair.device->name,
                                         compare::match_kind_name(pair.pair.how), pair.error);
    }
  }
  return out;
}

// Adds the error parts of one run pair to its report (judged with the rest of it afterwards):
// `warned` keeps each part's warnings to one per diff.
Status add_parts(const ThirdInputs& thirds, const StoreReader& ref, const StoreReader& device,
                 const compare::RunComparison& run, const compare::CompareOptions& options,
                 report::RunReport& report, std::vector<std::string>& warnings,
                 std::vector<compare::Part>& warned) {
  const auto warn_once = [&](compare::Part part, std::string text) {
    if (std::find(warned.begin(), warned.end(), part) != warned.end()) return;
    warned.push_back(part);
    warnings.push_back(std::string(compare::part_name(part)) + " part: " + text);
  };
  for (const auto& [part, input] : thirds.parts()) {
    const StoreReader& third = input->store();
    const std::optional<uint32_t> third_run = compare::third_run_for(part, ref, device, third, run);
    if (!third_run) {
      warn_once(part, input->path() + " has " + std::to_string(third.runs().size()) +
                          " runs: none for device run " + std::to_string(run.device_run) +
                          " (runs are taken by position, or its only run for every one)");
      continue;
    }
    QD_ASSIGN_OR_RETURN(const compare::PartComparison compared,
                        compare::compare_part(part, ref, device, third, *third_run, run, options));
    QD_RETURN_IF_ERROR(first_damaged_pair(compared.run));
    if (compared.missing_pairs > 0) {
      warn_once(part, std::to_string(compared.missing_pairs) + " of the " +
                          std::to_string(run.pairs.size()) + " compared pairs of device run " +
                          std::to_string(run.device_run) + " have no counterpart in " +
                          input->path() + " (left out of the part)");
    }
    if (const auto [count, first] = not_compared(compared.run); count > 0) {
      warn_once(part, std::to_string(count) + " of the " +
                          std::to_string(compared.run.pairs.size()) + " pairs of device run " +
                          std::to_string(run.device_run) + " with " + input->path() +
                          " could not be compared (each part says why), first: " + first);
    }
    const compare::RunAnalysis analysis =
        compare::analyze(compared.run, compare::comparison_graph(ref, device));
    report::add_part(report, compared, analysis);
  }
  return Status::ok();
}

// Several devices share one reference; a replay (--isolated) is of one device's values, and a
// label names one device.
Status check_devices(const DiffRequest& request) {
  if (request.devices.empty()) {
    return error(ErrorCode::kInvalidArgument, "no device input to compare with the reference");
  }
  if (request.labels.size() > request.devices.size()) {
    return error(ErrorCode::kInvalidArgument,
                 std::to_string(request.labels.size()) + " --label for " +
                     std::to_string(request.devices.size()) +
                     " device input(s): give at most one label per device, in order");
  }
  if (request.isolated && request.devices.size() > 1) {
    return error(ErrorCode::kInvalidArgument,
                 "--isolated replays one device's values: diff one device with it, not " +
                     std::to_string(request.devices.size()));
  }
  return Status::ok();
}

Result<std::vector<OpenedInput>> open_devices(const DiffRequest& request) {
  std::vector<OpenedInput> devices;
  devices.reserve(request.devices.size());
  for (const InputSpec& spec : request.devices) {
    QD_ASSIGN_OR_RETURN(OpenedInput device, OpenedInput::open(spec));
    devices.push_back(std::move(device));
  }
  return devices;
}

report::StoreSummary device_summary(const OpenedInput& input, const std::string& label) {
  report::StoreSummary summary = report::store_summary(input.store(), label_of(input));
  summary.label = label.empty() ? report::default_label(summary) : label;
  return summary;
}

// Labels tell the devices apart in every view, and Model Explorer keys graphs by them: a label
// another device already has gets its input's path (or its position) added.
void make_labels_distinct(std::vector<report::StoreSummary>& devices) {
  std::set<std::string> taken;
  for (size_t d = 0; d < devices.size(); ++d) {
    std::string& label = devices[d].label;
    if (taken.count(label)) label += " (" + devices[d].path + ")";
    if (taken.count(label)) label += " #" + std::to_string(d);
    taken.insert(label);
  }
}

// The header's store lines: the reference, each device with its label, the third stores.
void describe_stores(const DiffRequest& request, const OpenedInput& ref,
                     const std::vector<OpenedInput>& devices, const ThirdInputs& thirds,
                     report::ReportHeader& header) {
  header.reference = report::store_summary(ref.store(), label_of(ref));
  header.devices.clear();
  for (size_t d = 0; d < devices.size(); ++d) {
    header.devices.push_back(
        device_summary(devices[d], d < request.labels.size() ? request.labels[d] : std::string()));
  }
  make_labels_distinct(header.devices);
  for (auto [input, summary] : {std::pair{&thirds.simulation, &header.simulation},
                                std::pair{&thirds.isolated, &header.isolated}}) {
    if (*input) *summary = report::store_summary((*input)->store(), label_of(**input));
  }
}

void append_warnings(const OpenedInput& input, std::vector<std::string>& warnings) {
  warnings.insert(warnings.end(), input.warnings().begin(), input.warnings().end());
}

}  // namespace

Result<report::Summary> run_diff(const DiffRequest& request, report::ReportSink& sink) {
  QD_RETURN_IF_ERROR(check_tolerances(request));
  QD_RETURN_IF_ERROR(check_devices(request));
  QD_ASSIGN_OR_RETURN(const OpenedInput ref_input, OpenedInput::open(request.reference));
  QD_ASSIGN_OR_RETURN(const std::vector<OpenedInput> device_inputs, open_devices(request));
  QD_ASSIGN_OR_RETURN(const ThirdInputs thirds, ThirdInputs::open(request));
  const StoreReader& ref = ref_input.store();
  report::ReportHeader header;
  if (!request.policy_path.empty()) {
    QD_ASSIGN_OR_RETURN(header.policy, load_policy(request.policy_path));
  }
  compare::NameMapping mapping;
  if (!request.mapping_path.empty()) {
    QD_ASSIGN_OR_RETURN(mapping, load_name_mapping(request.mapping_path));
  }
  const compare::CompareOptions options =
      compare_options(request, request.mapping_path.empty() ? nullptr : &mapping);
  header.tool_version = request.tool_version;
  describe_stores(request, ref_input, device_inputs, thirds, header);
  header.options = {options.metrics.atol, options.metrics.rtol, options.ref_run, options.logits};
  QD_RETURN_IF_ERROR(sink.begin(header));
  report::EndingBuilder ending(header);
  report::DepartureJudge departures(header.policy.departure());
  std::vector<std::string> warnings;
  std::vector<compare::Part> warned;
  for (uint32_t d = 0; d < device_inputs.size(); ++d) {
    const StoreReader& device = device_inputs[d].store();
    const auto& graph = compare::comparison_graph(ref, device);
    const compare::RunConsumer report_run = [&](compare::RunComparison&& run) -> Status {
      QD_RETURN_IF_ERROR(first_damaged_pair(run));
      compare::RunAnalysis analysis = compare::analyze(run, graph);
      report::RunReport report = report::run_report(run, analysis);
      report.device = d;
      report::join_profile(report, header.devices[d].profile_events);
      if (!thirds.parts().empty()) {
        QD_RETURN_IF_ERROR(add_parts(thirds, ref, device, run, options, report, warnings, warned));
      }
      const std::vector<compare::Judgement> judged = report::judge(report, header.policy);
      compare::explain(ref, device, run, analysis, report::judged_groups(report, judged, analysis));
      report::add_hints(report, std::move(analysis));
      report::trace_first_divergence(report);
      departures.judge(report);
      ending.add_run(report);
      return sink.add_run(report);
    };
    std::vector<std::string> device_warnings;
    QD_RETURN_IF_ERROR(compare::compare_runs(ref, device, options, device_warnings, report_run));
    for (std::string& warning : device_warnings) {
      warnings.push_back(device_inputs.size() > 1 ? header.devices[d].label + ": " + warning
                                                  : std::move(warning));
    }
  }
  append_warnings(ref_input, warnings);
  for (const OpenedInput& input : device_inputs) append_warnings(input, warnings);
  for (const auto* input : {&thirds.simulation, &thirds.isolated}) {
    if (*input) append_warnings(**input, warnings);
  }
  report::ReportEnding end = std::move(ending).finish(std::move(warnings));
  QD_RETURN_IF_ERROR(sink.finish(end));
  return std::move(end.summary);
}

Result<report::Report> run_diff(const DiffRequest& request) {
  report::ReportCollector collector;
  QD_RETURN_IF_ERROR(run_diff(request, collector).status());
  return std::move(collector).report();
}

}  // namespace qd::pipeline
