// Departure across runs (docs/metrics.md, "Departure across runs"): over the runs of one device
// (decode steps, a data set), a group's SQNR in its earlier runs is its baseline, and the first
// run whose SQNR falls well below that baseline is where the group departs from it.
//
// With b the capped (kExactSqnrDb) figures of the `window` latest earlier runs that have one,
// m = median(b) and s = 1.4826 * median(|b - m|) (the MAD, scaled to a normal's sigma), a run
// departs when b holds at least `min_baseline_runs` figures and its SQNR x (capped) satisfies
//   x < m - max(drop_db, spread_factor * s)   and   x < departs_below_db,
// or when its figure is NaN (NaN or Inf introduced on the device, or nothing finite to weigh),
// which is worse than any SQNR. The drop is at least `drop_db`, so a run that loses a little
// never departs, and a baseline that wanders widens it; the ceiling keeps a group exact in
// most runs from departing at a figure no view would call an error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace qd::compare {

// The defaults (docs/metrics.md, 6e): a clean int16 decode of tests/python/emulated_decoder.py
// dips up to some 12 dB below its median for a step (the cache grows, a softmax row turns peaky),
// so a departure needs 20; a position fault there drops 50 dB and more.
struct DepartureRule {
  bool enabled = true;
  uint64_t min_baseline_runs = 3;
  uint64_t window = 32;  // the latest earlier figures the baseline is made of; 0: all of them
  double drop_db = 20;
  double spread_factor = 4;
  double departs_below_db = 60;

  bool operator==(const DepartureRule&) const = default;
};

// Where a group departs: its baseline and its own figure (NaN: NaN or Inf on the device).
struct Departure {
  double baseline_db = 0;  // the median of the baseline figures
  double spread_db = 0;    // 1.4826 x their median absolute deviation
  double sqnr_db = 0;      // the departing run's, capped at kExactSqnrDb
  uint64_t baseline_runs = 0;
};

// Whether a run with `sqnr_db` departs from the earlier runs' figures `baseline` (capped, in
// run order, NaN left out: see baseline_figure).
std::optional<Departure> departs(std::span<const double> baseline, double sqnr_db,
                                 const DepartureRule& rule);

// What a run's figure adds to a baseline: capped at kExactSqnrDb; nullopt for NaN, which ranks
// below every SQNR and so says nothing of the level the group keeps.
std::optional<double> baseline_figure(double sqnr_db);

struct FoundDeparture {
  size_t run = 0;  // index into the series
  Departure departure;
};

// The first run of `series` (one group's SQNR per run, in run order; unset: not compared in
// that run, +inf: exact, NaN: NaN or Inf on the device) that departs; nullopt when none does or
// the rule is off.
std::optional<FoundDeparture> first_departure(std::span<const std::optional<double>> series,
                                              const DepartureRule& rule);

}  // namespace qd::compare
