#include "qnn_debug/pipeline/diff.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/report/diff_report.h"

namespace qd::pipeline {
namespace {

std::string fmt_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A damaged store is bad input, not a numerical finding.
Status first_damaged_pair(const compare::StoreComparison& comparison) {
  for (const auto& run : comparison.runs) {
    for (const auto& pair : run.pairs) {
      if (pair.error_code == ErrorCode::kCorrupt || pair.error_code == ErrorCode::kIo) {
        return error(pair.error_code, pair.error);
      }
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
  options.jobs = std::max(1u, request.jobs);
  options.chunk_elements = std::max<uint64_t>(1, request.chunk_elements);
  return options;
}

}  // namespace

Result<report::Document> run_diff(const DiffRequest& request) {
  QD_RETURN_IF_ERROR(check_tolerances(request));
  QD_ASSIGN_OR_RETURN(const OpenedInput ref_input, OpenedInput::open(request.reference));
  QD_ASSIGN_OR_RETURN(const OpenedInput device_input, OpenedInput::open(request.device));
  const StoreReader* ref = &ref_input.store();
  const StoreReader* device = &device_input.store();
  compare::Policy policy;
  if (!request.policy_path.empty()) {
    QD_ASSIGN_OR_RETURN(policy, compare::Policy::load(request.policy_path));
  }
  compare::NameMapping mapping;
  if (!request.mapping_path.empty()) {
    QD_ASSIGN_OR_RETURN(mapping, compare::load_name_mapping(request.mapping_path));
  }
  const compare::CompareOptions options =
      compare_options(request, request.mapping_path.empty() ? nullptr : &mapping);
  QD_ASSIGN_OR_RETURN(compare::StoreComparison comparison,
                      compare::compare_stores(*ref, *device, options));
  for (const OpenedInput* input : {&ref_input, &device_input}) {
    comparison.warnings.insert(comparison.warnings.end(), input->warnings().begin(),
                               input->warnings().end());
  }
  QD_RETURN_IF_ERROR(first_damaged_pair(comparison));
  const auto& graph = compare::comparison_graph(*ref, *device);
  std::vector<compare::RunAnalysis> analyses;
  analyses.reserve(comparison.runs.size());
  for (const auto& run : comparison.runs) analyses.push_back(compare::analyze(run, graph, policy));
  return report::build_report(
      {*ref,
       *device,
       comparison,
       analyses,
       policy,
       options,
       request.tool_version,
       {ref_input.path(), std::string(format_name(ref_input.format()))},
       {device_input.path(), std::string(format_name(device_input.format()))}});
}

}  // namespace qd::pipeline
