#include "tensor_fields.h"

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/report/document.h"

namespace qd::report {

using nlohmann::json;

json quantization_json(const Quantization& quant) {
  if (!quant.is_quantized()) return nullptr;
  json scales = json::array();
  for (double scale : quant.scales) scales.push_back(json_real(scale));
  return {{"scales", std::move(scales)},
          {"offsets", quant.offsets},
          {"axis", quant.axis},
          {"bitwidth", quant.bitwidth},
          {"convention",
           quant.convention == QuantConvention::kQnnOffset ? "qnn_offset" : "zero_point"}};
}

json encoding_problems_json(const TensorRecord& tensor) {
  json problems = json::array();
  for (const EncodingFinding& finding : lint_encoding(tensor)) {
    problems.push_back({{"problem", encoding_problem_name(finding.problem)},
                        {"channel", finding.channel},
                        {"channels", finding.channels},
                        {"scale", json_real(finding.scale)}});
  }
  return problems;
}

}  // namespace qd::report
