// Entry points for the tests and benchmarks only (tests/ reach compare/src through their include
// directories): the library and the CLI stream run pairs through compare_runs (compare.h), and
// never need a whole comparison in memory nor one pair measured on its own.
#pragma once

#include <string>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

struct StoreComparison {
  std::vector<RunComparison> runs;
  // e.g. runs present on one side only, tensors left out of an ambiguous claim, reference tensors
  // with no device counterpart in a run where others were compared, pairs that matched but could
  // not be compared
  std::vector<std::string> warnings;
};

// compare_runs collected whole (tests, benchmarks and small inputs).
Result<StoreComparison> compare_stores(const StoreReader& ref, const StoreReader& device,
                                       const CompareOptions& options);

// Metrics of one pair.
Result<Metrics> compare_tensors(const StoreReader& ref_store, const TensorEntry& ref,
                                const StoreReader& device_store, const TensorEntry& device,
                                const LayoutPlan& layout, const CompareOptions& options);

}  // namespace qd::compare
