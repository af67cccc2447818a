#include "qnn_debug/compare/excess.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qnn_debug/compare/metrics.h"

namespace qd::compare {

double relative_noise(double sqnr_db) {
  return std::pow(10.0, -std::min(sqnr_db, kExactSqnrDb) / 10);
}

namespace {

double db_of_power(double power) {
  return power > 0 ? 10 * std::log10(power) : -std::numeric_limits<double>::infinity();
}

// The op's own noise power and where it was read.
std::pair<double, ExcessSource> own_noise(const ExcessInputs& in, double carried, double rounding) {
  if (in.isolated_sqnr_db) return {relative_noise(*in.isolated_sqnr_db), ExcessSource::kIsolated};
  if (in.kernel_sqnr_db) {
    const double inherited = in.kernel_input_sqnr_db ? relative_noise(*in.kernel_input_sqnr_db) : 0;
    return {std::max(0.0, relative_noise(*in.kernel_sqnr_db) - inherited), ExcessSource::kKernel};
  }
  return {std::max(0.0, relative_noise(in.sqnr_db) - carried - rounding), ExcessSource::kTotal};
}

}  // namespace

std::optional<Excess> estimate_excess(const ExcessInputs& in) {
  if (!in.ideal_sqnr_db || std::isnan(in.sqnr_db) || std::isnan(*in.ideal_sqnr_db)) {
    return std::nullopt;
  }
  const double rounding = relative_noise(*in.ideal_sqnr_db);
  const double carried = in.input_sqnr_db ? relative_noise(*in.input_sqnr_db) : 0;
  const double allowed = carried + rounding;
  const auto [own, source] = own_noise(in, carried, rounding);
  Excess out;
  out.source = source;
  out.allowed_sqnr_db = -db_of_power(allowed);
  out.excess_db = db_of_power(allowed + own) - db_of_power(allowed);
  out.excess_noise_ratio = std::sqrt(own / rounding);
  out.added_noise_db = db_of_power(own);
  return out;
}

}  // namespace qd::compare
