#include "qnn_debug/pipeline/diff.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/explain.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/report/build.h"

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
  options.jobs =
      request.jobs != 0 ? request.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.chunk_elements = std::max<uint64_t>(1, request.chunk_elements);
  return options;
}

report::InputLabel label_of(const OpenedInput& input) {
  return {input.path(), std::string(format_name(input.format()))};
}

}  // namespace

Result<report::Summary> run_diff(const DiffRequest& request, report::ReportSink& sink) {
  QD_RETURN_IF_ERROR(check_tolerances(request));
  QD_ASSIGN_OR_RETURN(const OpenedInput ref_input, OpenedInput::open(request.reference));
  QD_ASSIGN_OR_RETURN(const OpenedInput device_input, OpenedInput::open(request.device));
  const StoreReader& ref = ref_input.store();
  const StoreReader& device = device_input.store();
  report::ReportHeader header;
  if (!request.policy_path.empty()) {
    QD_ASSIGN_OR_RETURN(header.policy, compare::Policy::load(request.policy_path));
  }
  compare::NameMapping mapping;
  if (!request.mapping_path.empty()) {
    QD_ASSIGN_OR_RETURN(mapping, compare::load_name_mapping(request.mapping_path));
  }
  const compare::CompareOptions options =
      compare_options(request, request.mapping_path.empty() ? nullptr : &mapping);
  header.tool_version = request.tool_version;
  header.reference = report::store_summary(ref, label_of(ref_input));
  header.device = report::store_summary(device, label_of(device_input));
  header.options = {options.metrics.atol, options.metrics.rtol, options.ref_run};
  QD_RETURN_IF_ERROR(sink.begin(header));
  const auto& graph = compare::comparison_graph(ref, device);
  report::EndingBuilder ending;
  std::vector<std::string> warnings;
  const compare::RunConsumer report_run = [&](compare::RunComparison&& run) -> Status {
    QD_RETURN_IF_ERROR(first_damaged_pair(run));
    compare::RunAnalysis analysis = compare::analyze(run, graph, header.policy);
    compare::explain(ref, device, run, analysis);
    const report::RunReport report = report::run_report(run, analysis);
    ending.add_run(report);
    return sink.add_run(report);
  };
  QD_RETURN_IF_ERROR(compare::compare_runs(ref, device, options, warnings, report_run));
  for (const OpenedInput* input : {&ref_input, &device_input}) {
    warnings.insert(warnings.end(), input->warnings().begin(), input->warnings().end());
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
