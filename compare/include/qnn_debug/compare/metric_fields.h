// Every figure of a compared pair, declared once: its report key, unit, which way is better, where
// its formula is written, and which views show it. The JSON report, the CSV columns, the HTML
// page and docs/report-schema.json follow this list (tests/unit/metric_fields_test.cpp holds the
// schema to it), so a new figure is one entry here plus its computation in metrics.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "qnn_debug/compare/metrics.h"

namespace qd::compare {

enum class Better : uint8_t { kHigher, kLower, kNeither };

struct MetricField {
  enum class Kind : uint8_t {
    kReal,          // always set; non-finite values are "inf" / "-inf" / "nan" in JSON
    kOptionalReal,  // set for quantized device tensors only (null otherwise)
    kCount,         // a count of elements or values
  };
  const char* key;    // JSON key and CSV column
  const char* label;  // how the HTML page names it
  const char* unit;   // "dB", "LSB", "" for plain numbers, "values" for counts
  Better better;
  const char* formula;  // where docs/metrics.md defines it
  Kind kind;
  double Metrics::*real = nullptr;                     // kReal
  std::optional<double> Metrics::*optional = nullptr;  // kOptionalReal
  uint64_t Metrics::*count = nullptr;                  // kCount
  bool in_csv = true;                                  // a CSV column (in this order)
  bool in_overview = false;  // a column of the HTML page's table (the group's first output)
  // The element the figure is about (max_abs: max_abs_index), as a flat index in reference
  // order: the CSV follows the figure with "<key>_coordinates".
  uint64_t Metrics::*located_at = nullptr;

  // The value as a double (nullopt: an unset optional figure).
  std::optional<double> value(const Metrics& m) const;
};

// The figures in CSV order.
std::span<const MetricField> metric_fields();

}  // namespace qd::compare
