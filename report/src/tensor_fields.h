// JSON fields of a stored tensor that `inspect --json` and the diff report share, written once.
#pragma once

#include <nlohmann/json.hpp>

#include "qnn_debug/etdump/store.h"

namespace qd::report {

// null when not quantized; else scales, offsets, axis, bitwidth, convention.
nlohmann::json quantization_json(const Quantization& quant);

// The encoding lint's findings (qnn_debug/base/encoding_lint.h): [{problem, channel, channels,
// scale}], empty when the encoding is sound. A non-finite scale is "nan" / "inf" / "-inf".
nlohmann::json encoding_problems_json(const TensorRecord& tensor);

}  // namespace qd::report
