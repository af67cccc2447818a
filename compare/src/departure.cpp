#include "qnn_debug/compare/departure.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qnn_debug/compare/metrics.h"

namespace qd::compare {

namespace {

// The median of `values` (reordered); the mean of the middle two for an even count.
double median(std::vector<double>& values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// The scale that makes the median absolute deviation a normal distribution's sigma.
constexpr double kMadToSigma = 1.4826;

}  // namespace

std::optional<double> baseline_figure(double sqnr_db) {
  if (std::isnan(sqnr_db)) return std::nullopt;
  return std::min(sqnr_db, kExactSqnrDb);
}

std::optional<Departure> departs(std::span<const double> baseline, double sqnr_db,
                                 const DepartureRule& rule) {
  if (!rule.enabled || baseline.size() < std::max<uint64_t>(rule.min_baseline_runs, 1)) {
    return std::nullopt;
  }
  if (rule.window > 0 && baseline.size() > rule.window) baseline = baseline.last(rule.window);
  std::vector<double> values(baseline.begin(), baseline.end());
  Departure d;
  d.baseline_runs = values.size();
  d.baseline_db = median(values);
  for (double& v : values) v = std::abs(v - d.baseline_db);
  d.spread_db = kMadToSigma * median(values);
  d.sqnr_db = std::min(sqnr_db, kExactSqnrDb);
  if (std::isnan(sqnr_db)) return d;  // worse than any SQNR
  const double drop = std::max(rule.drop_db, rule.spread_factor * d.spread_db);
  if (d.sqnr_db < d.baseline_db - drop && d.sqnr_db < rule.departs_below_db) return d;
  return std::nullopt;
}

std::optional<FoundDeparture> first_departure(std::span<const std::optional<double>> series,
                                              const DepartureRule& rule) {
  if (!rule.enabled) return std::nullopt;
  std::vector<double> baseline;
  for (size_t run = 0; run < series.size(); ++run) {
    if (!series[run]) continue;
    if (auto found = departs(baseline, *series[run], rule)) return FoundDeparture{run, *found};
    if (const auto figure = baseline_figure(*series[run])) baseline.push_back(*figure);
  }
  return std::nullopt;
}

}  // namespace qd::compare
