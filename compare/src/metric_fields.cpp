#include "qnn_debug/compare/metric_fields.h"

namespace qd::compare {
namespace {

using Kind = MetricField::Kind;

constexpr const char* kDefinitions = "docs/metrics.md#2-metric-definitions";
constexpr const char* kEdgeCases = "docs/metrics.md#3-edge-cases";

MetricField real(const char* key, const char* label, const char* unit, Better better,
                 double Metrics::*member) {
  return {key, label, unit, better, kDefinitions, Kind::kReal, member};
}

MetricField quantized(const char* key, const char* label, const char* unit, Better better,
                      std::optional<double> Metrics::*member) {
  return {key, label, unit, better, kDefinitions, Kind::kOptionalReal, nullptr, member};
}

MetricField count(const char* key, const char* label, uint64_t Metrics::*member) {
  return {key,     label,   "values", Better::kNeither, kEdgeCases, Kind::kCount,
          nullptr, nullptr, member};
}

MetricField in_overview(MetricField field) {
  field.in_overview = true;
  return field;
}

MetricField not_in_csv(MetricField field) {
  field.in_csv = false;
  return field;
}

MetricField located(MetricField field, uint64_t Metrics::*index) {
  field.located_at = index;
  return field;
}

std::vector<MetricField> declare() {
  return {
      real("sqnr_db", "SQNR", "dB", Better::kHigher, &Metrics::sqnr_db),
      real("mse", "MSE", "", Better::kLower, &Metrics::mse),
      real("rmse", "RMSE", "", Better::kLower, &Metrics::rmse),
      real("mae", "MAE", "", Better::kLower, &Metrics::mae),
      not_in_csv(real("l1_sum", "L1 sum", "", Better::kLower, &Metrics::l1_sum)),
      in_overview(located(real("max_abs", "max |e|", "", Better::kLower, &Metrics::max_abs),
                          &Metrics::max_abs_index)),
      real("rel_l2", "relative L2", "", Better::kLower, &Metrics::rel_l2),
      in_overview(real("cosine", "cosine", "", Better::kHigher, &Metrics::cosine)),
      real("allclose_frac", "allclose share", "", Better::kHigher, &Metrics::allclose_frac),
      in_overview(quantized("lsb_mae", "MAE (LSB)", "LSB", Better::kLower, &Metrics::lsb_mae)),
      quantized("lsb_max", "max |e| (LSB)", "LSB", Better::kLower, &Metrics::lsb_max),
      quantized("noise_ratio", "noise ratio", "", Better::kLower, &Metrics::noise_ratio),
      quantized("ideal_sqnr_db", "ideal SQNR", "dB", Better::kHigher, &Metrics::ideal_sqnr_db),
      in_overview(quantized("saturation", "saturation", "", Better::kLower, &Metrics::saturation)),
      count("ref_nan", "NaN (reference)", &Metrics::ref_nan),
      count("ref_inf", "Inf (reference)", &Metrics::ref_inf),
      count("dev_nan", "NaN (device)", &Metrics::dev_nan),
      count("dev_inf", "Inf (device)", &Metrics::dev_inf),
      count("masked", "masked positions", &Metrics::masked),
      not_in_csv(count("elements", "elements", &Metrics::elements)),
      not_in_csv(count("n", "finite pairs", &Metrics::n)),
      not_in_csv(count("saturated_low", "raw values at the minimum", &Metrics::saturated_low)),
      not_in_csv(count("saturated_high", "raw values at the maximum", &Metrics::saturated_high)),
  };
}

}  // namespace

std::optional<double> MetricField::value(const Metrics& m) const {
  switch (kind) {
    case Kind::kReal:
      return m.*real;
    case Kind::kOptionalReal:
      return m.*optional;
    case Kind::kCount:
      return static_cast<double>(m.*count);
  }
  return std::nullopt;
}

std::span<const MetricField> metric_fields() {
  static const std::vector<MetricField> fields = declare();
  return fields;
}

}  // namespace qd::compare
