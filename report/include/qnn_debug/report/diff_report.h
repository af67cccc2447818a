// Builds the report document of a store comparison.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/report/document.h"

namespace qd::report {

// What the user named as an input: the path as given and its format ("store", "qnn-net-run",
// ...), when the compared store is a conversion of it.
struct InputLabel {
  std::string path;
  std::string format = "store";
};

struct DiffReportInputs {
  const StoreReader& ref;
  const StoreReader& device;
  const compare::StoreComparison& comparison;
  const std::vector<compare::RunAnalysis>& analyses;  // one per comparison.runs entry
  const compare::Policy& policy;
  const compare::CompareOptions& options;
  std::string tool_version;
  InputLabel ref_input;  // empty path: the store's own
  InputLabel device_input;
};

// The report document of a comparison (docs/report-schema.json); render it with render.h.
Document build_report(const DiffReportInputs& inputs);

}  // namespace qd::report
