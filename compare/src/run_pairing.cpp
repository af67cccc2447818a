#include <algorithm>

#include "compare_internal.h"
#include "qnn_debug/compare/compare.h"

namespace qd::compare {

std::string run_label(const RunInfo& run) { return std::to_string(run.id) + " (" + run.name + ")"; }

Result<RunTensors> read_run(const StoreReader& store, uint32_t run_id) {
  QD_ASSIGN_OR_RETURN(std::vector<TensorEntry> tensors, store.tensors_of_run(run_id));
  return std::make_shared<const std::vector<TensorEntry>>(std::move(tensors));
}

PairResult plan_pair(const ComparedPair& pair, size_t group) {
  PairResult result;
  result.pair = pair;
  result.group = group;
  auto layout = plan_layout(*pair.ref, *pair.device);
  if (layout.is_ok()) {
    result.layout = std::move(layout).value();
  } else {
    result.error = layout.status().message();
    result.error_code = layout.status().code();
  }
  return result;
}

// Reads the run pair's tensors and fills `run` with the alignment and one PairResult per
// compared pair (layouts planned, metrics not yet computed).
Result<RunComparison> plan_run(const StoreReader& ref, const RunInfo& ref_run,
                               const StoreReader& device, const RunInfo& device_run,
                               const CompareOptions& options) {
  RunComparison run;
  run.ref_run = ref_run.id;
  run.device_run = device_run.id;
  QD_ASSIGN_OR_RETURN(run.ref_tensors, read_run(ref, ref_run.id));
  QD_ASSIGN_OR_RETURN(run.device_tensors, read_run(device, device_run.id));
  run.alignment = align(*run.ref_tensors, *run.device_tensors, options.mapping);
  for (size_t g = 0; g < run.alignment.groups.size(); ++g) {
    for (const ComparedPair& pair : run.alignment.groups[g].pairs) {
      run.pairs.push_back(plan_pair(pair, g));
    }
  }
  return run;
}

// The run pairs to compare, in report order: every device run against options.ref_run, else
// runs paired by position (the unpaired ones are warned about).
Result<std::vector<std::pair<const RunInfo*, const RunInfo*>>> pair_runs(
    const StoreReader& ref, const StoreReader& device, const CompareOptions& options,
    std::vector<std::string>& warnings) {
  const auto& ref_runs = ref.runs();
  const auto& device_runs = device.runs();
  if (ref_runs.empty()) return error(ErrorCode::kInvalidArgument, ref.path() + ": no runs");
  if (device_runs.empty()) return error(ErrorCode::kInvalidArgument, device.path() + ": no runs");
  std::vector<std::pair<const RunInfo*, const RunInfo*>> pairs;
  if (options.ref_run) {
    auto it = std::find_if(ref_runs.begin(), ref_runs.end(),
                           [&](const RunInfo& r) { return r.id == *options.ref_run; });
    if (it == ref_runs.end()) {
      return error(ErrorCode::kInvalidArgument, ref.path() + ": no run " +
                                                    std::to_string(*options.ref_run) + " (it has " +
                                                    std::to_string(ref_runs.size()) + " runs)");
    }
    for (const RunInfo& run : device_runs) pairs.emplace_back(&*it, &run);
    return pairs;
  }
  const size_t paired = std::min(ref_runs.size(), device_runs.size());
  for (size_t i = 0; i < paired; ++i) pairs.emplace_back(&ref_runs[i], &device_runs[i]);
  for (size_t i = paired; i < ref_runs.size(); ++i) {
    warnings.push_back("reference run " + run_label(ref_runs[i]) +
                       " has no device run to compare with");
  }
  for (size_t i = paired; i < device_runs.size(); ++i) {
    warnings.push_back("device run " + run_label(device_runs[i]) +
                       " has no reference run (use --ref-run to reuse one)");
  }
  return pairs;
}

}  // namespace qd::compare
