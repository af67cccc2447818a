// Each report type to JSON and back, side by side so the two directions cannot drift apart
// (docs/report-schema.json). The readers expect a document that validate_report accepted.
#pragma once

#include <nlohmann/json.hpp>

#include "qnn_debug/report/model.h"

namespace qd::report::codec {

using nlohmann::json;

// A report number: JSON numbers, and the strings "inf", "-inf", "nan" for non-finite values.
double real(const json& value);
json json_real(double value);

json to_json(const TensorSummary& tensor);
json to_json(const Quantization& quant);  // null when not quantized
json to_json(const std::vector<EncodingFinding>& problems);
json to_json(const compare::Metrics& metrics, const std::vector<uint64_t>& reference_dims);
json to_json(const RunReport& run);
json to_json(const StoreSummary& store);
json to_json(const ReportOptions& options);
json to_json(const AggregateEntry& entry);
json to_json(const Summary& summary);
json to_json(const StepLine& step);
json to_json(const DeviceOutcome& outcome);
json to_json(const DeviceRow& row);
json to_json(const KvCacheTrack& track);

TensorSummary tensor_from(const json& j);
RunReport run_from(const json& j);
StoreSummary store_from(const json& j);
ReportOptions options_from(const json& j);

}  // namespace qd::report::codec
