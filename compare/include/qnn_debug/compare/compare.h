// Compares a device store with a reference store: aligns each run pair, reconciles layouts,
// streams every compared pair through the metric accumulator in bounded chunks, on N threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/align.h"
#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

struct CompareOptions {
  MetricOptions metrics;
  std::optional<uint32_t> ref_run;              // every device run against this reference run
  const NameMapping* mapping = nullptr;         // explicit ref -> device names, the last fallback
  unsigned jobs = 1;                            // worker threads
  uint64_t chunk_elements = uint64_t{1} << 16;  // per worker and side: the streaming budget
  // A permuted device tensor is un-permuted in memory (8 bytes an element, as Split); above this
  // many elements it is reported instead of compared, so memory stays bounded.
  uint64_t max_permuted_elements = uint64_t{1} << 28;
  size_t worst_elements = 8;    // largest errors kept per pair, with their coordinates
  size_t scatter_samples = 24;  // values kept per pair for a scatter plot (EvenSamples)
  // The reference tensor whose scores the classifier figures and the token view measure (a
  // decoder's logits, when they are not the run's final output; a run without it has none of
  // those figures, never another tensor's); "": the final output.
  std::string logits;
};

struct PairResult {
  ComparedPair pair;
  size_t group = 0;  // index into RunComparison::alignment.groups
  std::optional<LayoutPlan> layout;
  std::optional<Metrics> metrics;
  std::string error;  // why there are no metrics (shape mismatch, unreadable data...)
  ErrorCode error_code = ErrorCode::kOk;  // kCorrupt / kIo: the store itself is damaged
};

// How often a classifier's decision agrees (docs/metrics.md, "Classifier agreement"): over the
// rows of the final output's class axis, the share where the device's top-1 class is the
// reference's (top1), and where the reference's top-1 class is among the device's top 5 (top5,
// nullopt with fewer than 5 classes). For a decoder's logits, the token view too (docs/metrics.md,
// "Token view"): the distributions' divergence over the rows, and the next token (the last row).
struct ClassAgreement {
  std::string tensor;  // the reference tensor measured
  uint64_t rows = 0;
  uint64_t classes = 0;
  std::optional<double> top1;
  std::optional<double> top5;
  // The mean over the measured rows of KL(softmax(reference) || softmax(device)), in nats; rows
  // whose reference holds NaN or +inf are not measured. nullopt: no row measured.
  std::optional<double> kl_divergence;
  std::optional<double> kl_max;  // the largest row's
  // The mean over the rows of |top-k(reference) & top-k(device)| / k (k = 5, 10; top-1 overlap
  // is `top1`); nullopt with fewer than k classes.
  std::optional<double> top5_overlap;
  std::optional<double> top10_overlap;
  // The last row: the token each side would pick (its top-1 class), and the device's probability
  // (its softmax) and rank (1: its top) of the reference's token. The probability is nullopt when
  // the device row holds NaN.
  std::optional<uint64_t> reference_token;
  std::optional<uint64_t> device_token;
  std::optional<double> reference_token_probability;
  std::optional<uint64_t> reference_token_rank;
  // The reference's own margin between its token and the device's, log p(reference token) -
  // log p(device token) on the reference (its logits' difference, nats): 0 when they agree; a
  // small one is a near tie the device's rounding may flip.
  std::optional<double> reference_margin;
};

// The tensors of one run of a store, read for its comparison: the alignment and the pairs point
// into them, so they live as long as the comparison of the run (not the store's whole index).
using RunTensors = std::shared_ptr<const std::vector<TensorEntry>>;

struct RunComparison {
  uint32_t ref_run = 0;
  uint32_t device_run = 0;
  RunTensors ref_tensors, device_tensors;
  Alignment alignment;
  std::vector<PairResult> pairs;
  std::optional<ClassAgreement> classification;  // when the run ends in a classifier output
};

// The op graph a comparison reads: the reference store's, else the device's (the reference graph
// names ops by reference tensor names).
const std::vector<GraphNode>& comparison_graph(const StoreReader& ref, const StoreReader& device);

// "reference 'b' and device 'b' matched (exact_name) but could not be compared: <why>": the one
// wording of a pair without metrics, for warnings and verdict reasons (`how` is a
// match_kind_name, `why` the PairResult::error).
std::string describe_not_compared(std::string_view ref_name, std::string_view device_name,
                                  std::string_view how, std::string_view why);

// Takes each run pair once its metrics are complete; an error stops the comparison.
using RunConsumer = std::function<Status(RunComparison&& run)>;

// Compares run pair after run pair, in order, handing each to `consume`: memory holds one batch
// of runs (a few hundred pairs) whatever the number of runs, and the workers share each batch.
// Warnings about the stores as a whole are appended to `warnings` first, each run's before it
// is consumed. Unmatched::graph_output is set from comparison_graph. Errors only for
// whole-store problems (no runs to compare, a reference run that does not exist) and those of
// `consume`; per-tensor problems land in PairResult::error.
Status compare_runs(const StoreReader& ref, const StoreReader& device,
                    const CompareOptions& options, std::vector<std::string>& warnings,
                    const RunConsumer& consume);

}  // namespace qd::compare
