// Departure across runs (compare/departure.h): the first run whose SQNR falls well below the
// median of the group's earlier runs, each case worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "qnn_debug/compare/departure.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/compare/policy.h"

namespace qd::compare {
namespace {

using Series = std::vector<std::optional<double>>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::optional<FoundDeparture> first(const Series& series, const DepartureRule& rule = {}) {
  return first_departure(series, rule);
}

TEST(Departure, AWanderingCleanDecodeNeverDeparts) {
  // A clean int16 decode: some 60 dB, a few dB either way from step to step, one step 8 dB down,
  // one 12 dB (a clean decode of tests/python/emulated_decoder.py has such dips).
  const Series series = {61.2, 58.7, 60.4, 63.1, 57.9, 59.5, 62.0, 56.8, 60.9, 52.1,
                         58.3, 61.7, 59.0, 57.4, 47.2, 60.1, 55.9, 58.8, 61.3, 59.9};
  EXPECT_FALSE(first(series));
}

TEST(Departure, AStepDropDepartsAtItsRun) {
  // The rope fault at step 20: 60 dB before it, 11.5 dB from it on.
  Series series;
  for (int run = 0; run < 20; ++run) series.push_back(run % 2 ? 59.0 : 61.0);
  for (int run = 20; run < 25; ++run) series.push_back(11.5);
  const auto found = first(series);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, 20u);
  // 10 of each: the median is the mean of 59 and 61, every deviation 1 dB.
  EXPECT_DOUBLE_EQ(found->departure.baseline_db, 60);
  EXPECT_DOUBLE_EQ(found->departure.spread_db, 1.4826);
  EXPECT_DOUBLE_EQ(found->departure.sqnr_db, 11.5);
  EXPECT_EQ(found->departure.baseline_runs, 20u);
}

TEST(Departure, ADropOfLessThanDropDbIsNone) {
  // 19.9 dB below a flat baseline: short of drop_db (20).
  EXPECT_FALSE(first({40, 40, 40, 40, 20.1}));
  const auto found = first({40, 40, 40, 40, 19.9});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, 4u);
  EXPECT_DOUBLE_EQ(found->departure.spread_db, 0);
}

TEST(Departure, ANoisyBaselineNeedsALargerDrop) {
  // Baseline {30, 40, 50, 40, 30, 50}: median 40, deviations {10, 0, 10, 0, 10, 10} -> MAD 10,
  // spread 14.826; a departure needs 4 x 14.826 = 59.3 dB below 40.
  const Series noisy = {30, 40, 50, 40, 30, 50};
  Series series = noisy;
  series.push_back(-15);
  EXPECT_FALSE(first(series));
  series.back() = -20;
  const auto found = first(series);
  ASSERT_TRUE(found);
  EXPECT_NEAR(found->departure.spread_db, 14.826, 1e-12);
}

TEST(Departure, TooShortASeriesHasNoBaseline) {
  // min_baseline_runs (3): the third run has two earlier figures only.
  EXPECT_FALSE(first({60, 60, 5}));
  EXPECT_FALSE(first({}));
  EXPECT_FALSE(first({5}));
  DepartureRule two;
  two.min_baseline_runs = 2;
  ASSERT_TRUE(first({60, 60, 5}, two));
  EXPECT_EQ(first({60, 60, 5}, two)->run, 2u);
}

TEST(Departure, RunsNotComparedAreSkipped) {
  const Series series = {60, std::nullopt, 60, std::nullopt, std::nullopt, 5};
  EXPECT_FALSE(first(series));  // two figures before run 5
  const Series more = {60, std::nullopt, 60, 60, std::nullopt, 5};
  const auto found = first(more);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, 5u);
  EXPECT_EQ(found->departure.baseline_runs, 3u);
}

TEST(Departure, NanOnTheDeviceDepartsAndIsLeftOutOfTheBaseline) {
  // NaN before there is a baseline: no departure, and no figure for the baseline either.
  EXPECT_FALSE(first({kNan, 60, 60, 50}));
  const auto found = first({kNan, 60, 60, 60, kNan});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, 4u);
  EXPECT_TRUE(std::isnan(found->departure.sqnr_db));
  EXPECT_EQ(found->departure.baseline_runs, 3u);
}

TEST(Departure, ExactRunsAreCappedAndAnExactGroupDepartsOnlyBelowTheCeiling) {
  // Exact in every run, then a tiny rounding difference: far below the capped baseline, but
  // above departs_below_db (60), which no view calls an error.
  EXPECT_FALSE(first({kInf, kInf, kInf, 120}));
  const auto found = first({kInf, kInf, kInf, 45});
  ASSERT_TRUE(found);
  EXPECT_DOUBLE_EQ(found->departure.baseline_db, kExactSqnrDb);
  // An exact run after a departure-free series is no departure.
  EXPECT_FALSE(first({60, 60, 60, kInf}));
}

TEST(Departure, ASlowDriftNeverDeparts) {
  // 0.5 dB lower every run, 90 dB down to 50.5. The drift is its own spread: the MAD of the
  // earlier runs grows with them, and 4 spreads are always more than the drop.
  Series series;
  for (int run = 0; run < 80; ++run) series.push_back(90.0 - 0.5 * run);
  EXPECT_FALSE(first(series));
  // Without the spread and with a 10 dB drop, the window alone follows it: the latest 32
  // figures' median is always 8.25 dB above the run's (16.5 steps), while the median of all
  // earlier runs is (r + 1) / 4 dB above run r's: 15.5 dB at run 61, the first below
  // departs_below_db (59.5 dB).
  DepartureRule window;
  window.spread_factor = 0;
  window.drop_db = 10;
  EXPECT_FALSE(first(series, window));
  DepartureRule all = window;
  all.window = 0;
  const auto found = first(series, all);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->run, 61u);
  EXPECT_DOUBLE_EQ(found->departure.baseline_db, 75);
}

TEST(Departure, OnlyTheFirstRunIsReportedAndOffIsOff) {
  const Series series = {60, 60, 60, 10, 60, 5};
  ASSERT_TRUE(first(series));
  EXPECT_EQ(first(series)->run, 3u);
  DepartureRule off;
  off.enabled = false;
  EXPECT_FALSE(first(series, off));
}

TEST(DeparturePolicy, ReadsWritesAndRefuses) {
  const auto policy = Policy::from_json(
      R"({"departure": {"drop_db": 6, "min_baseline_runs": 5, "window": 0}})", "p.json");
  ASSERT_TRUE(policy.is_ok());
  EXPECT_EQ(policy->departure().drop_db, 6);
  EXPECT_EQ(policy->departure().min_baseline_runs, 5u);
  EXPECT_EQ(policy->departure().window, 0u);
  EXPECT_EQ(policy->departure().spread_factor, DepartureRule{}.spread_factor);
  const auto again = Policy::from_json(policy->to_json(), "again");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->departure(), policy->departure());
  // The defaults are not written; off is false.
  EXPECT_EQ(Policy().to_json().find("departure"), std::string::npos);
  const auto off = Policy::from_json(R"({"departure": false})", "off");
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->departure().enabled);
  EXPECT_NE(off->to_json().find("\"departure\":false"), std::string::npos);
  EXPECT_TRUE(Policy::from_json(R"({"departure": true})", "on")->departure().enabled);
  for (const char* bad : {R"({"departure": {"drop": 6}})", R"({"departure": {"drop_db": -1}})",
                          R"({"departure": {"min_baseline_runs": 0}})",
                          R"({"departure": {"window": 1.5}})", R"({"departure": 3})"}) {
    EXPECT_FALSE(Policy::from_json(bad, "bad").is_ok()) << bad;
  }
}

}  // namespace
}  // namespace qd::compare
