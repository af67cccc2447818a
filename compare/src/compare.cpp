#include "qnn_debug/compare/compare.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "compare_internal.h"
#include "compare_testing.h"

namespace qd::compare {
namespace {

// Mapping entries that name a tensor neither store has: ignored by the alignment, which is worth
// saying (a stale mapping file otherwise looks like it worked).
Result<std::unordered_set<std::string>> tensor_names(const StoreReader& store) {
  std::unordered_set<std::string> names;
  QD_RETURN_IF_ERROR(store.for_each_tensor([&](const TensorEntry& tensor) {
    names.insert(tensor.name);
    return Status::ok();
  }));
  return names;
}

Status warn_unused_mapping(const StoreReader& ref, const StoreReader& device,
                           const NameMapping& mapping, std::vector<std::string>& warnings) {
  QD_ASSIGN_OR_RETURN(const std::unordered_set<std::string> ref_names, tensor_names(ref));
  QD_ASSIGN_OR_RETURN(const std::unordered_set<std::string> device_names, tensor_names(device));
  for (const auto& [from, to] : mapping.ref_to_device) {
    const bool ref_missing = ref_names.count(from) == 0;
    const bool device_missing = device_names.count(to) == 0;
    if (!ref_missing && !device_missing) continue;
    std::string what = ref_missing && device_missing ? "neither tensor exists"
                       : ref_missing                 ? "the reference has no such tensor"
                                                     : "the device has no tensor " + quote_name(to);
    warnings.push_back("mapping entry " + quote_name(from) + " -> " + quote_name(to) +
                       " was not used: " + what);
  }
  return Status::ok();
}

// Tensors a node produces and no node consumes.
std::unordered_set<std::string_view> graph_outputs(const std::vector<GraphNode>& graph) {
  std::unordered_set<std::string_view> produced, consumed;
  for (const GraphNode& node : graph) {
    produced.insert(node.outputs.begin(), node.outputs.end());
    consumed.insert(node.inputs.begin(), node.inputs.end());
  }
  for (std::string_view name : consumed) produced.erase(name);
  return produced;
}

void mark_graph_outputs(const std::unordered_set<std::string_view>& outputs, RunComparison& run) {
  for (Unmatched& u : run.alignment.unmatched) u.graph_output = outputs.count(u.tensor->name) != 0;
}

std::string run_pair_label(const RunComparison& run) {
  return "device run " + std::to_string(run.device_run);
}

// "'a' (graph output), 'b', 'c' and 4 more"
std::string name_list(const std::vector<const Unmatched*>& entries) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < entries.size() && i < kShown; ++i) {
    text += (i > 0 ? ", " : "") + quote_name(entries[i]->tensor->name) +
            (entries[i]->graph_output ? " (graph output)" : "");
  }
  if (entries.size() > kShown) text += " and " + std::to_string(entries.size() - kShown) + " more";
  return text;
}

// What a run left out that its verdict alone would not say (docs/metrics.md, "Run rules"): every
// tensor left out of an ambiguous claim; the reference tensors without a device counterpart when
// other pairs of the run were compared; every pair that matched but could not be compared.
void warn_left_out(const RunComparison& run, std::vector<std::string>& warnings) {
  const std::string label = run_pair_label(run);
  std::vector<const Unmatched*> missing;
  for (const Unmatched& u : run.alignment.unmatched) {
    if (u.ambiguous) {
      warnings.push_back(
          label + ": " + std::string(u.side == Side::kReference ? "reference" : "device") +
          " tensor " + quote_name(u.tensor->name) + " was not compared: " + u.reason);
    } else if (u.side == Side::kReference) {
      missing.push_back(&u);
    }
  }
  const bool any_compared = std::any_of(run.pairs.begin(), run.pairs.end(),
                                        [](const PairResult& p) { return p.metrics.has_value(); });
  if (any_compared && !missing.empty()) {
    warnings.push_back(label + ": " + std::to_string(missing.size()) + " reference tensor" +
                       (missing.size() == 1 ? " has" : "s have") +
                       " no device counterpart while others were compared: " + name_list(missing) +
                       " (see the unmatched tensors and their reasons)");
  }
  for (const PairResult& pair : run.pairs) {
    if (pair.metrics) continue;
    warnings.push_back(label + ": " +
                       describe_not_compared(pair.pair.ref->name, pair.pair.device->name,
                                             match_kind_name(pair.pair.how), pair.error));
  }
}

// Enough pairs per batch that every worker stays busy across run boundaries, few enough that a
// batch's metrics (histograms, channels, worst elements) stay small.
constexpr size_t kBatchPairs = 512;

// Every planned pair of the batch, on options.jobs threads, and beside them each run's classifier
// as it will most likely be chosen: read after the pairs, its scores would keep one thread alone.
std::vector<EarlyClassifier> measure_batch(const StoreReader& ref, const StoreReader& device,
                                           std::vector<RunComparison>& batch,
                                           const CompareOptions& options) {
  std::vector<PairResult*> work;
  for (RunComparison& run : batch) {
    for (PairResult& pair : run.pairs) {
      if (pair.layout) work.push_back(&pair);
    }
  }
  std::vector<EarlyClassifier> early;
  for (const RunComparison& run : batch) early.push_back(guess_classifier(options.logits, run));
  std::vector<std::function<void()>> first;
  for (EarlyClassifier& e : early) {
    if (e.output != nullptr) first.push_back([&, at = &e] { measure_early(ref, device, *at); });
  }
  compute_all(ref, device, work, options, first);
  return early;
}

}  // namespace

std::string describe_not_compared(std::string_view ref_name, std::string_view device_name,
                                  std::string_view how, std::string_view why) {
  return "reference " + quote_name(ref_name) + " and device " + quote_name(device_name) +
         " matched (" + std::string(how) + ") but could not be compared: " + std::string(why);
}

const std::vector<GraphNode>& comparison_graph(const StoreReader& ref, const StoreReader& device) {
  return ref.graph().empty() ? device.graph() : ref.graph();
}

Status compare_runs(const StoreReader& ref, const StoreReader& device,
                    const CompareOptions& options, std::vector<std::string>& warnings,
                    const RunConsumer& consume) {
  QD_ASSIGN_OR_RETURN(const auto run_pairs, pair_runs(ref, device, options, warnings));
  for (const RunInfo& run : device.runs()) {
    if (!run.complete) {
      warnings.push_back("device run " + run_label(run) +
                         " is incomplete (the capture stopped before it ended)");
    }
  }
  if (options.mapping != nullptr) {
    QD_RETURN_IF_ERROR(warn_unused_mapping(ref, device, *options.mapping, warnings));
  }
  const std::unordered_set<std::string_view> outputs = graph_outputs(comparison_graph(ref, device));
  uint64_t without_logits = 0;  // runs the named --logits tensor gave no figures
  for (size_t next = 0; next < run_pairs.size();) {
    std::vector<RunComparison> batch;
    for (size_t pairs = 0; next < run_pairs.size() && pairs < kBatchPairs; ++next) {
      QD_ASSIGN_OR_RETURN(RunComparison run, plan_run(ref, *run_pairs[next].first, device,
                                                      *run_pairs[next].second, options));
      batch.push_back(std::move(run));
      pairs += batch.back().pairs.size();
    }
    const std::vector<EarlyClassifier> early = measure_batch(ref, device, batch, options);
    for (size_t b = 0; b < batch.size(); ++b) {
      RunComparison& run = batch[b];
      measure_classifier(ref, device, options.logits, run, &early[b]);
      without_logits += !options.logits.empty() && !run.classification ? 1 : 0;
      mark_graph_outputs(outputs, run);
      warn_left_out(run, warnings);
      QD_RETURN_IF_ERROR(consume(std::move(run)));
    }
  }
  if (without_logits > 0) {
    warnings.push_back("--logits " + quote_name(options.logits) + ": " +
                       std::to_string(without_logits) + " of " + std::to_string(run_pairs.size()) +
                       " runs have no classifier figures or token view (no compared reference "
                       "tensor of that name with scores over its last axis)");
  }
  return Status::ok();
}

Result<StoreComparison> compare_stores(const StoreReader& ref, const StoreReader& device,
                                       const CompareOptions& options) {
  StoreComparison comparison;
  QD_RETURN_IF_ERROR(
      compare_runs(ref, device, options, comparison.warnings, [&](RunComparison&& run) {
        comparison.runs.push_back(std::move(run));
        return Status::ok();
      }));
  return comparison;
}

}  // namespace qd::compare
