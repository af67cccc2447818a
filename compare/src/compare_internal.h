// What the parts of the comparison share: compare.cpp runs it batch by batch of run pairs;
// run_pairing.cpp chooses the run pairs and plans each one, measure.cpp computes the metrics of
// the planned pairs on the worker threads, classification.cpp measures a classifier's agreement.
// parts.cpp (error parts) plans and measures the pairs it builds from another store the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

inline bool is_identity(const std::vector<uint8_t>& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) return false;
  }
  return true;
}

// ---- run_pairing.cpp ------------------------------------------------------------------------

std::string run_label(const RunInfo& run);

// Reads the tensors of run `run_id` of `store` (what RunComparison keeps alive).
Result<RunTensors> read_run(const StoreReader& store, uint32_t run_id);

// A PairResult for `pair` of group `group`, its layout planned (or the reason it cannot be), its
// metrics not yet computed.
PairResult plan_pair(const ComparedPair& pair, size_t group);

Result<RunComparison> plan_run(const StoreReader& ref, const RunInfo& ref_run,
                               const StoreReader& device, const RunInfo& device_run,
                               const CompareOptions& options);

Result<std::vector<std::pair<const RunInfo*, const RunInfo*>>> pair_runs(
    const StoreReader& ref, const StoreReader& device, const CompareOptions& options,
    std::vector<std::string>& warnings);

// ---- measure.cpp ----------------------------------------------------------------------------

// `first`: work of its own (a classifier's agreement) for the same threads, started before the
// slices.
void compute_all(const StoreReader& ref, const StoreReader& device, std::vector<PairResult*>& work,
                 const CompareOptions& options,
                 const std::vector<std::function<void()>>& first = {});

// Computes the metrics of every planned pair of `run` (those with a layout), pairs and slices of
// large pairs on options.jobs threads: `ref` holds the pairs' ref tensors, `device` their device
// tensors. compare_runs does this for the runs it aligns; error parts (parts.h) for the pairs they
// build from another store.
void measure_pairs(const StoreReader& ref, const StoreReader& device, RunComparison& run,
                   const CompareOptions& options);

// ---- classification.cpp ---------------------------------------------------------------------

// The classifier's agreement measured beside the run's pairs, on the same threads, for the pair
// measure_classifier will take if every planned pair compares (else it measures its own).
struct EarlyClassifier {
  const PairResult* output = nullptr;  // the pair guessed, or none
  std::optional<ClassAgreement> agreement;
  bool measured = false;
};
EarlyClassifier guess_classifier(const std::string& logits, const RunComparison& run);
void measure_early(const StoreReader& ref, const StoreReader& device, EarlyClassifier& early);

void measure_classifier(const StoreReader& ref, const StoreReader& device,
                        const std::string& logits, RunComparison& run,
                        const EarlyClassifier* early = nullptr);

}  // namespace qd::compare
