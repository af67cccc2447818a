#include "qnn_debug/compare/parts.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "compare_internal.h"
#include "qnn_debug/compare/metrics.h"

namespace qd::compare {
namespace {

// Reference tensor -> the third run's tensor compared with it when the two runs are aligned.
std::unordered_map<const TensorEntry*, const TensorEntry*> counterparts(
    const std::vector<TensorEntry>& ref, const std::vector<TensorEntry>& third) {
  std::unordered_map<const TensorEntry*, const TensorEntry*> out;
  const Alignment alignment = align(ref, third, nullptr);
  for (const Group& group : alignment.groups) {
    for (const ComparedPair& pair : group.pairs) out.emplace(pair.ref, pair.device);
  }
  return out;
}

// The run at `position` among `store`'s runs; a store of one run serves every position.
std::optional<uint32_t> run_at(const StoreReader& store, size_t position) {
  const auto& runs = store.runs();
  if (runs.size() == 1) return runs.front().id;
  if (position < runs.size()) return runs[position].id;
  return std::nullopt;
}

size_t position_of(const StoreReader& store, uint32_t run_id) {
  const auto& runs = store.runs();
  const auto it =
      std::find_if(runs.begin(), runs.end(), [&](const RunInfo& r) { return r.id == run_id; });
  return static_cast<size_t>(it - runs.begin());
}

}  // namespace

std::optional<uint32_t> third_run_for(Part part, const StoreReader& ref, const StoreReader& device,
                                      const StoreReader& third, const RunComparison& total) {
  return run_at(third, part == Part::kIsolated ? position_of(device, total.device_run)
                                               : position_of(ref, total.ref_run));
}

Result<PartComparison> compare_part(Part part, const StoreReader& ref, const StoreReader& device,
                                    const StoreReader& third, uint32_t third_run,
                                    const RunComparison& total, const CompareOptions& options) {
  PartComparison out;
  out.part = part;
  out.third_run = third_run;
  QD_ASSIGN_OR_RETURN(RunTensors third_tensors, read_run(third, third_run));
  const auto counterpart = counterparts(*total.ref_tensors, *third_tensors);
  const bool third_is_ref = part != Part::kQuantization;
  RunComparison& run = out.run;
  run.ref_run = total.ref_run;
  run.device_run = total.device_run;
  run.ref_tensors = third_is_ref ? third_tensors : total.ref_tensors;
  run.device_tensors = third_is_ref ? total.device_tensors : third_tensors;
  run.alignment.groups = total.alignment.groups;
  for (Group& group : run.alignment.groups) group.pairs.clear();
  for (const PairResult& result : total.pairs) {
    const auto found = counterpart.find(result.pair.ref);
    if (found == counterpart.end()) {
      ++out.missing_pairs;
      continue;
    }
    ComparedPair pair = result.pair;
    (third_is_ref ? pair.ref : pair.device) = found->second;
    run.alignment.groups[result.group].pairs.push_back(pair);
    run.pairs.push_back(plan_pair(pair, result.group));
  }
  measure_pairs(third_is_ref ? third : ref, third_is_ref ? device : third, run, options);
  return out;
}

namespace {

// A margin as reports show it: within +-kExactSqnrDb, 0 where both sides are infinite.
double bounded(double margin_db) {
  return std::isnan(margin_db) ? 0.0 : std::clamp(margin_db, -kExactSqnrDb, kExactSqnrDb);
}

}  // namespace

Attribution attribute(Verdict total, Verdict kernel, const OwnError& quantization,
                      const OwnError& kernel_part, bool inherited) {
  Attribution out;
  if (total == Verdict::kPass && kernel == Verdict::kPass) return out;
  out.inherited = inherited;
  const bool kernel_larger = kernel_part.noise > quantization.noise;
  const OwnError& larger = kernel_larger ? kernel_part : quantization;
  const OwnError& smaller = kernel_larger ? quantization : kernel_part;
  // Either may be 0 (an exact part): the ratio is then infinite, shown at the exact cap.
  if (larger.noise > 0) {
    out.margin_db = bounded(10 * std::log10(larger.noise / smaller.noise));
  }
  const double lead = std::pow(10.0, kAttributionMarginDb / 10);
  const bool called =
      larger.noise - larger.uncertainty >= lead * (smaller.noise + smaller.uncertainty) &&
      larger.noise > 0;
  out.kind = !called         ? AttributionKind::kWithinNoise
             : kernel_larger ? AttributionKind::kKernel
                             : AttributionKind::kQuantization;
  return out;
}

}  // namespace qd::compare
