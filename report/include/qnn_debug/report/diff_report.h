// Renders a store comparison: the versioned JSON report (docs/report-schema.json) and the
// terminal summary.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/store_reader.h"

namespace qd::report {

inline constexpr const char* kReportSchema = "qnn-debug-report";
inline constexpr int kReportSchemaVersion = 1;

struct DiffReportInputs {
  const StoreReader& ref;
  const StoreReader& device;
  const compare::StoreComparison& comparison;
  const std::vector<compare::RunAnalysis>& analyses;  // one per comparison.runs entry
  const compare::Policy& policy;
  const compare::CompareOptions& options;
  std::string tool_version;
};

// The overall verdict: the worst run verdict.
compare::Verdict overall_verdict(const DiffReportInputs& inputs);

std::string diff_report_json(const DiffReportInputs& inputs);

// First divergence, worst `worst_n` groups, counts; ANSI colour only when `color`.
std::string diff_summary_text(const DiffReportInputs& inputs, size_t worst_n, bool color);

}  // namespace qd::report
