// Two typed reports compared field by field, every real bit for bit (NaN equals NaN): what a
// report file must give back of the report that wrote it (tests of the JSON's round trip). The
// figures the file does not hold are left out: a channel's LSB figures (never in the JSON) and,
// where `element_lists` is false, a pair's worst elements, error histogram and samples (a long
// decode's packed groups: docs/reports.md, "A long decode's JSON").
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/compare/metric_fields.h"
#include "qnn_debug/report/model.h"

namespace qd::testing {

using report::GroupReport;
using report::kGroupParts;
using report::PairReport;
using report::PartFigures;
using report::RunReport;
using report::TensorSummary;

inline bool same_real(double a, double b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

inline bool same_real(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a || same_real(*a, *b));
}

inline bool same_reals(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_real(a[i], b[i])) return false;
  }
  return true;
}

#define QD_EXPECT_SAME_REAL(a, b, where) \
  EXPECT_TRUE(::qd::testing::same_real(a, b)) << (where) << ": " << #a

inline void expect_same_tensor(const TensorSummary& a, const TensorSummary& b,
                               const std::string& where) {
  EXPECT_EQ(a.name, b.name) << where;
  EXPECT_EQ(a.seq, b.seq) << where;
  EXPECT_EQ(a.handles, b.handles) << where;
  EXPECT_EQ(a.output_index, b.output_index) << where;
  EXPECT_EQ(a.dtype, b.dtype) << where;
  EXPECT_EQ(a.dims, b.dims) << where;
  EXPECT_EQ(a.data_nbytes, b.data_nbytes) << where;
  EXPECT_EQ(a.axis_order, b.axis_order) << where;
  EXPECT_TRUE(same_reals(a.quant.scales, b.quant.scales)) << where;
  EXPECT_EQ(a.quant.offsets, b.quant.offsets) << where;
  EXPECT_EQ(a.quant.axis, b.quant.axis) << where;
  EXPECT_EQ(a.quant.bitwidth, b.quant.bitwidth) << where;
  EXPECT_EQ(a.quant.convention, b.quant.convention) << where;
  EXPECT_EQ(a.encoding_problems.size(), b.encoding_problems.size()) << where;
  QD_EXPECT_SAME_REAL(a.stats.min, b.stats.min, where);
  QD_EXPECT_SAME_REAL(a.stats.max, b.stats.max, where);
  QD_EXPECT_SAME_REAL(a.stats.mean, b.stats.mean, where);
  EXPECT_EQ(a.stats.nan_count, b.stats.nan_count) << where;
  EXPECT_EQ(a.stats.inf_count, b.stats.inf_count) << where;
}

inline void expect_same_elements(const std::vector<compare::WorstElement>& a,
                                 const std::vector<compare::WorstElement>& b,
                                 const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index) << where;
    QD_EXPECT_SAME_REAL(a[i].reference, b[i].reference, where);
    QD_EXPECT_SAME_REAL(a[i].device, b[i].device, where);
    QD_EXPECT_SAME_REAL(a[i].abs_error, b[i].abs_error, where);
  }
}

// Every figure of compare/metric_fields.h, the channels' summary and, with `element_lists`, the
// lists; the channels themselves with the lists, and always with `channel_list` (a KV cache's).
inline void expect_same_metrics(const compare::Metrics& a, const compare::Metrics& b,
                                bool element_lists, bool channel_list, const std::string& where) {
  for (const compare::MetricField& field : compare::metric_fields()) {
    EXPECT_TRUE(same_real(field.value(a), field.value(b))) << where << ": " << field.key;
    if (field.located_at) {
      EXPECT_EQ(a.*field.located_at, b.*field.located_at) << where;
    }
  }
  ASSERT_EQ(a.channel_summary.has_value(), b.channel_summary.has_value()) << where;
  if (a.channel_summary) {
    EXPECT_EQ(a.channel_summary->count, b.channel_summary->count) << where;
    QD_EXPECT_SAME_REAL(a.channel_summary->worst_sqnr_db, b.channel_summary->worst_sqnr_db, where);
    QD_EXPECT_SAME_REAL(a.channel_summary->median_sqnr_db, b.channel_summary->median_sqnr_db,
                        where);
  }
  if (!element_lists && !channel_list) {
    EXPECT_TRUE(b.channels.empty()) << where;
  } else {
    ASSERT_EQ(a.channels.size(), b.channels.size()) << where;
  }
  for (size_t c = 0; c < b.channels.size(); ++c) {
    const std::string at = where + ": channel " + std::to_string(c);
    QD_EXPECT_SAME_REAL(a.channels[c].sqnr_db, b.channels[c].sqnr_db, at);
    QD_EXPECT_SAME_REAL(a.channels[c].mae, b.channels[c].mae, at);
    QD_EXPECT_SAME_REAL(a.channels[c].max_abs, b.channels[c].max_abs, at);
    EXPECT_EQ(a.channels[c].n, b.channels[c].n) << at;
  }
  EXPECT_EQ(a.worst_channel, b.worst_channel) << where;
  EXPECT_EQ(a.worst_channels, b.worst_channels) << where;
  EXPECT_EQ(a.channel_axis, b.channel_axis) << where;
  if (!element_lists) {
    EXPECT_TRUE(b.worst.empty() && b.samples.empty() && b.error_histogram.empty()) << where;
    return;
  }
  EXPECT_EQ(a.error_histogram, b.error_histogram) << where;
  EXPECT_TRUE(same_reals(a.histogram_edges, b.histogram_edges)) << where;
  expect_same_elements(a.worst, b.worst, where + ": worst");
  expect_same_elements(a.samples, b.samples, where + ": samples");
}

inline void expect_same_part(const std::optional<PartFigures>& a,
                             const std::optional<PartFigures>& b, const std::string& where) {
  ASSERT_EQ(a.has_value(), b.has_value()) << where;
  if (!a) return;
  EXPECT_EQ(a->verdict, b->verdict) << where;
  QD_EXPECT_SAME_REAL(a->sqnr_db, b->sqnr_db, where);
  QD_EXPECT_SAME_REAL(a->introduced_db, b->introduced_db, where);
  QD_EXPECT_SAME_REAL(a->lsb_max, b->lsb_max, where);
  QD_EXPECT_SAME_REAL(a->noise_power, b->noise_power, where);
  EXPECT_EQ(a->non_finite_introduced, b->non_finite_introduced) << where;
  EXPECT_EQ(a->no_evidence, b->no_evidence) << where;
  EXPECT_EQ(a->near_zero_reference, b->near_zero_reference) << where;
  EXPECT_EQ(a->error, b->error) << where;
}

inline void expect_same_hints(const std::vector<compare::Hint>& a,
                              const std::vector<compare::Hint>& b, const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kind(), b[i].kind()) << where;
    EXPECT_EQ(a[i].tensor, b[i].tensor) << where;
    QD_EXPECT_SAME_REAL(a[i].explained_db, b[i].explained_db, where);
    EXPECT_EQ(a[i].sentence, b[i].sentence) << where;
  }
}

inline void expect_same_group(const GroupReport& a, const GroupReport& b, bool element_lists,
                              const std::string& where) {
  EXPECT_EQ(a.id, b.id) << where;
  EXPECT_EQ(a.order, b.order) << where;
  EXPECT_EQ(a.handles, b.handles) << where;
  EXPECT_EQ(a.op_type, b.op_type) << where;
  EXPECT_EQ(a.verdict, b.verdict) << where;
  EXPECT_EQ(a.policy_rule, b.policy_rule) << where;
  QD_EXPECT_SAME_REAL(a.sqnr_db, b.sqnr_db, where);
  QD_EXPECT_SAME_REAL(a.input_sqnr_db, b.input_sqnr_db, where);
  QD_EXPECT_SAME_REAL(a.introduced_db, b.introduced_db, where);
  EXPECT_EQ(a.flags, b.flags) << where;
  expect_same_hints(a.hints, b.hints, where);
  EXPECT_EQ(a.inputs, b.inputs) << where;
  EXPECT_EQ(a.fused, b.fused) << where;
  ASSERT_EQ(a.excess.has_value(), b.excess.has_value()) << where;
  if (a.excess) {
    EXPECT_EQ(a.excess->source, b.excess->source) << where;
    QD_EXPECT_SAME_REAL(a.excess->allowed_sqnr_db, b.excess->allowed_sqnr_db, where);
    QD_EXPECT_SAME_REAL(a.excess->excess_db, b.excess->excess_db, where);
    QD_EXPECT_SAME_REAL(a.excess->excess_noise_ratio, b.excess->excess_noise_ratio, where);
    QD_EXPECT_SAME_REAL(a.excess->added_noise_db, b.excess->added_noise_db, where);
  }
  ASSERT_EQ(a.departure.has_value(), b.departure.has_value()) << where;
  if (a.departure) {
    QD_EXPECT_SAME_REAL(a.departure->baseline_db, b.departure->baseline_db, where);
    QD_EXPECT_SAME_REAL(a.departure->spread_db, b.departure->spread_db, where);
    QD_EXPECT_SAME_REAL(a.departure->sqnr_db, b.departure->sqnr_db, where);
    EXPECT_EQ(a.departure->baseline_runs, b.departure->baseline_runs) << where;
  }
  ASSERT_EQ(a.time.has_value(), b.time.has_value()) << where;
  if (a.time) {
    QD_EXPECT_SAME_REAL(a.time->duration, b.time->duration, where);
    EXPECT_EQ(a.time->unit, b.time->unit) << where;
    EXPECT_EQ(a.time->events, b.time->events) << where;
    QD_EXPECT_SAME_REAL(a.time->share, b.time->share, where);
  }
  ASSERT_EQ(a.parts.has_value(), b.parts.has_value()) << where;
  if (a.parts) {
    EXPECT_EQ(a.parts->total, b.parts->total) << where;
    for (const auto member : kGroupParts) {
      expect_same_part((*a.parts).*member, (*b.parts).*member, where + ": part");
    }
  }
  ASSERT_EQ(a.pairs.size(), b.pairs.size()) << where;
  for (size_t p = 0; p < a.pairs.size(); ++p) {
    const PairReport &x = a.pairs[p], &y = b.pairs[p];
    const std::string at = where + " pair " + std::to_string(p);
    EXPECT_EQ(x.output_index, y.output_index) << at;
    EXPECT_EQ(x.match, y.match) << at;
    expect_same_tensor(x.reference, y.reference, at + " reference");
    expect_same_tensor(x.device, y.device, at + " device");
    ASSERT_EQ(x.layout.has_value(), y.layout.has_value()) << at;
    if (x.layout) {
      EXPECT_EQ(x.layout->axis_order, y.layout->axis_order) << at;
      EXPECT_EQ(x.layout->inferred, y.layout->inferred) << at;
      EXPECT_EQ(x.layout->reshaped, y.layout->reshaped) << at;
    }
    EXPECT_EQ(x.error, y.error) << at;
    ASSERT_EQ(x.metrics.has_value(), y.metrics.has_value()) << at;
    if (x.metrics) {
      expect_same_metrics(*x.metrics, *y.metrics, element_lists,
                          compare::is_kv_cache(x.reference.name), at);
    }
  }
}

// A run's own fields and its groups; `element_lists(group)` says which groups keep theirs.
template <typename KeepsLists>
void expect_same_run(const RunReport& a, const RunReport& b, KeepsLists element_lists,
                     const std::string& where) {
  EXPECT_EQ(a.device, b.device) << where;
  EXPECT_EQ(a.reference_run, b.reference_run) << where;
  EXPECT_EQ(a.device_run, b.device_run) << where;
  EXPECT_EQ(a.verdict, b.verdict) << where;
  EXPECT_EQ(a.verdict_reasons, b.verdict_reasons) << where;
  EXPECT_EQ(a.first_divergence, b.first_divergence) << where;
  EXPECT_EQ(a.order_from_graph, b.order_from_graph) << where;
  ASSERT_EQ(a.introducers.size(), b.introducers.size()) << where;
  for (size_t i = 0; i < a.introducers.size(); ++i) {
    EXPECT_EQ(a.introducers[i].id, b.introducers[i].id) << where;
    QD_EXPECT_SAME_REAL(a.introducers[i].introduced_db, b.introducers[i].introduced_db, where);
    QD_EXPECT_SAME_REAL(a.introducers[i].added_noise_db, b.introducers[i].added_noise_db, where);
  }
  ASSERT_EQ(a.coverage.has_value(), b.coverage.has_value()) << where;
  if (a.coverage) {
    EXPECT_EQ(a.coverage->compared_pairs, b.coverage->compared_pairs) << where;
  }
  ASSERT_EQ(a.classification.has_value(), b.classification.has_value()) << where;
  if (a.classification) {
    QD_EXPECT_SAME_REAL(a.classification->top1, b.classification->top1, where);
    QD_EXPECT_SAME_REAL(a.classification->top5, b.classification->top5, where);
  }
  EXPECT_EQ(a.unmatched.size(), b.unmatched.size()) << where;
  ASSERT_EQ(a.groups.size(), b.groups.size()) << where;
  for (size_t g = 0; g < a.groups.size(); ++g) {
    expect_same_group(a.groups[g], b.groups[g], element_lists(a.groups[g]),
                      where + " group " + a.groups[g].id);
  }
}

}  // namespace qd::testing
