// Error metrics of a device tensor against its reference (docs/metrics.md), accumulated in one
// streaming pass over chunks of decoded values. docs/metrics.md gives every formula, edge case and
// the accuracy of the accumulation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/worst.h"

#include "qnn_debug/etdump/store.h"

namespace qd::compare {

struct MetricOptions {
  double atol = 1e-5;  // allclose: |e| <= atol + rtol * |r|
  double rtol = 1e-3;
};

// Figures of one channel (the channel's finite pairs only).
struct ChannelMetrics {
  double sqnr_db = 0;
  double mae = 0;
  double max_abs = 0;
  uint64_t n = 0;
  std::optional<double> lsb_mae;  // mae / the channel's scale (device quantized only)
  std::optional<double> lsb_max;  // max_abs / the channel's scale
};

// What the verdict and the words read of a tensor's channels: the worst one against the median.
// Kept beside the list, so that a report file which leaves a passing pair's list out
// (docs/reports.md, "A long decode's JSON") judges and says what the diff did.
struct ChannelSummary {
  uint64_t count = 0;         // channels
  double worst_sqnr_db = 0;   // channel worst_channel's
  double median_sqnr_db = 0;  // the lower middle one of the channels' sqnr_db
};

// A KV cache's heads x positions cells (ChannelMap::heads > 1): which of each head's positions
// differ, their SQNR below kHealthyChannelDb as for a channel (docs/metrics.md, "KV caches").
struct KvCells {
  struct Range {
    uint64_t head = 0;
    uint64_t first = 0, last = 0;  // positions
    bool operator==(const Range&) const = default;
  };
  uint64_t heads = 0;
  uint64_t positions = 0;
  std::vector<Range> differing;  // by head, then position
};

// Bins of Metrics::error_histogram.
inline constexpr size_t kHistogramBins = 32;
// The SQNR an exact tensor counts as where SQNRs are subtracted: float32's resolution,
// 20 log10(2^24) dB (docs/metrics.md, "Introduced error").
inline constexpr double kExactSqnrDb = 144.49439791871097;
// 10 log10(signal / noise) for sums of squares, with the conventions of docs/metrics.md for zero
// sums: +inf without noise, else -inf without signal.
double sqnr_of(double signal, double noise);
// Channels named in Metrics::worst_channels.
inline constexpr size_t kWorstChannels = 5;

struct Metrics {
  uint64_t elements = 0;  // pairs added, finite or not
  uint64_t n = 0;         // pairs where both values are finite: the figures below cover these
  uint64_t ref_nan = 0;   // NaN / Inf values on each side (any pair)
  uint64_t ref_inf = 0;
  uint64_t dev_nan = 0;
  uint64_t dev_inf = 0;
  // Pairs masked on both sides (mask.h): in `elements`, in no other figure, and not counted as
  // NaN / Inf above.
  uint64_t masked = 0;

  double sqnr_db = 0;  // 10 log10(sum r^2 / sum e^2)
  double mse = 0;
  double rmse = 0;
  double mae = 0;
  double l1_sum = 0;
  double max_abs = 0;
  uint64_t max_abs_index = 0;  // flat index in reference order (the caller makes coordinates)
  double rel_l2 = 0;           // |e| / |r|
  double cosine = 0;
  double allclose_frac = 0;

  // Quantized device tensors only (else nullopt).
  std::optional<double> lsb_mae;
  std::optional<double> lsb_max;
  std::optional<double> noise_ratio;
  std::optional<double> saturation;
  uint64_t saturated_low = 0;   // raw values at the range's minimum / maximum (saturation's parts;
  uint64_t saturated_high = 0;  // filled by compare_tensors for quantized device tensors)
  // The reference quantized with the device's own encoding, against the reference: what an ideal
  // integer kernel with that encoding reaches (compare_tensors fills it; docs/metrics.md, "What the
  // encoding allows").
  std::optional<double> ideal_sqnr_db;

  // Accumulators built with more than one channel: one entry per channel, the channel with the
  // lowest sqnr_db, and up to kWorstChannels channels by rising sqnr_db (ties: lower index first).
  std::vector<ChannelMetrics> channels;
  std::optional<uint64_t> worst_channel;
  std::vector<uint64_t> worst_channels;
  std::optional<ChannelSummary> channel_summary;  // with channels (summarize_channels)
  std::optional<uint32_t> channel_axis;  // the reference axis of `channels` (compare_tensors)
  std::optional<KvCells> kv_cells;       // a KV cache read per head (its channels: positions)

  // kHistogramBins counts of |e| over the n finite pairs, one octave per bin below the octave of
  // max_abs; bin 0 also holds everything smaller, exact zeros included. histogram_edges has
  // kHistogramBins + 1 entries: bin i is [edges[i], edges[i+1]).
  std::vector<uint64_t> error_histogram;
  std::vector<double> histogram_edges;

  // The largest errors, largest first (compare_tensors fills it; the accumulator does not).
  std::vector<WorstElement> worst;
  // An even sample of the pairs (EvenSamples), by rising index (compare_tensors fills it).
  std::vector<WorstElement> samples;
};

// Values were compared but none of the pairs is finite on both sides (docs/metrics.md, section 3):
// nothing was measured, which no policy passes. An empty tensor (no values) has nothing to differ,
// nor has one whose every pair is masked on both sides.
inline bool no_evidence(const Metrics& m) { return m.n == 0 && m.elements > m.masked; }

// A reference with (next to) no signal for its device encoding (docs/metrics.md, "Near-zero
// reference"): its RMS below kNearZeroReferenceLsb steps of the encoding, where its SQNR (-inf, or
// hugely negative) weighs nothing but the rounding. The policy judges such an output on lsb_max
// instead (NearZeroRule). Device outputs without an encoding are never near-zero by this rule.
// A tenth of a step: the encoding cannot tell such a reference from zero (an all-zero output, a
// ReLU of negatives). A too-wide encoding is not near zero: 25 times too wide leaves a reference of
// some 0.8 steps RMS, which its SQNR judges (and the hints call coarse).
inline constexpr double kNearZeroReferenceLsb = 0.1;
// The reference's RMS in steps of the device encoding, from figures a report keeps (so `check`
// reads the same): noise_ratio 10^(sqnr_db / 20) / sqrt(12), since noise_ratio is the RMS error
// over scale / sqrt(12) and 10^(sqnr_db / 20) the RMS reference over the RMS error. nullopt
// without an encoding, and for an exact pair (no error, nothing to judge).
std::optional<double> reference_rms_lsb(const Metrics& m);
inline bool near_zero_reference(const Metrics& m) {
  const std::optional<double> rms = reference_rms_lsb(m);
  return rms && *rms < kNearZeroReferenceLsb;
}

// A channel that stands out: the worst channel when its SQNR is at least kStandoutChannelDb below
// the median channel's and the median channel is healthy (at least kHealthyChannelDb): one broken
// channel among good ones. nullopt otherwise, and without channels.
inline constexpr double kStandoutChannelDb = 10;
inline constexpr double kHealthyChannelDb = 20;
std::optional<uint64_t> standout_channel(const Metrics& m);
// The median of the channels' sqnr_db (the lower middle one of an even count); NaN without any.
double median_channel_sqnr_db(const Metrics& m);
// The summary of m.channels and m.worst_channel; nullopt without channels or a worst one.
std::optional<ChannelSummary> summarize_channels(const Metrics& m);

class MetricAccumulator {
 public:
  // `channels`: how elements map to the channels of the per-channel figures; one channel (the
  // default) gives none.
  explicit MetricAccumulator(MetricOptions options = {}, ChannelMap channels = {});

  // Adds `count` pairs: reference r[i] and normalized device d[i] are element first + i in
  // reference order. Chunks may arrive in any order; each element must be added once. R and D
  // are float or Split (a float32 side is read as stored, every other one decoded to Split by
  // compare_tensors), or both double, or one float and one double.
  // With `block_bounds`, also writes for each kErrorBlock pairs from r, d on a bound of their
  // largest exact |d - r| (+inf where it has none), for WorstElements::add to skip blocks by.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first, double* block_bounds = nullptr);
  // Raw device values at the ends of their range (DecodeCounts::saturated()).
  void add_saturation(uint64_t saturated_raw_values);
  // Pairs masked on both sides (mask.h) that add() was given as NaN on both sides: counted as
  // masked, not as NaN.
  void add_masked(uint64_t masked_pairs) { masked_ += masked_pairs; }
  uint64_t masked() const { return masked_; }
  // Folds in an accumulator fed other elements of the same tensor pair (e.g. by another thread).
  // Both must have the same options and channel count.
  void merge(const MetricAccumulator& other);
  // `device_quant`: the device tensor's encoding, nullptr (or unquantized) if it has none.
  // A per-axis encoding must have one scale per accumulator channel; otherwise the LSB figures
  // and noise_ratio stay nullopt.
  Metrics finish(const Quantization* device_quant) const;

  const MetricOptions& options() const { return options_; }
  uint64_t channels() const { return map_.count; }

  // Sums over the finite pairs of one channel.
  struct Sums {
    double r2 = 0;     // sum r^2
    double d2 = 0;     // sum d^2
    double e2 = 0;     // sum e^2
    double abs_e = 0;  // sum |e|
    double rd = 0;     // sum r d
    uint64_t n = 0;
    uint64_t close = 0;  // pairs within atol + rtol |r|
    float max_key = -1;  // |e| of the largest error as the float pass has it, -1 before any pair
    double max_abs = 0;  // its exact |e|
    uint64_t max_index = 0;

    void merge(const Sums& other);
  };

  // The per-channel sums of channels whose runs are short (see by_rows()), one entry per channel.
  struct ChannelColumns {
    std::vector<double> r2, e2, abs_e, max_abs;
    std::vector<uint64_t> n;
  };

 private:
  // The float allclose test (docs/metrics.md): tolerances as floats, usable when they are finite,
  // non-negative and within the float range.
  struct Tolerance {
    bool fast = false;
    float atol = 0;
    float rtol = 0;
  };

  // Channel runs shorter than a block (the channel axis last, or nearly): the tensor's sums go
  // through the float pass whole, and a second, light pass keeps the channels' sums in columns.
  // Otherwise each channel's runs go through the float pass into that channel's Sums.
  bool by_rows() const;
  template <class R, class D>
  void add_rows(const R* r, const D* d, uint64_t count, uint64_t first);
  ChannelColumns channel_columns() const;
  void add_channels(Metrics& m) const;
  void add_quantized(Metrics& m, const Quantization& quant) const;
  template <class R, class D>
  void add_run(const R* r, const D* d, uint64_t count, uint64_t first, Sums& sums,
               double* block_bounds);
  // Returns the block's bound on its largest exact |e| (see add()).
  template <class R, class D>
  double add_block(const R* r, const D* d, uint32_t count, uint64_t first, Sums& sums);
  double add_zero_block(uint32_t count, uint64_t first, Sums& sums);
  template <class R, class D>
  void add_exact(const R* r, const D* d, uint64_t count, uint64_t first, Sums& sums);
  void flush_pair_counts();
  std::array<uint64_t, 256> exponent_histogram() const;

  MetricOptions options_;
  Tolerance tolerance_;
  ChannelMap map_;
  std::vector<Sums> sums_;  // one per channel, or the tensor's only (one channel, or by_rows())
  ChannelColumns columns_;  // by_rows() only
  uint64_t elements_ = 0;
  uint64_t ref_nan_ = 0, ref_inf_ = 0, dev_nan_ = 0, dev_inf_ = 0;
  uint64_t saturated_ = 0;
  uint64_t masked_ = 0;
  // The histogram is kept per float exponent field of the float-rounded |e| (0: zero or subnormal,
  // 255: beyond the float range). Two interleaved copies (even and odd elements of the float
  // pass)...
  std::array<std::array<uint64_t, 256>, 2> exponent_counts_{};
  // ...until the float pass has seen kPairTableAfter pairs; from then on one increment per two
  // elements, in a table of 65536 counts indexed by both exponents (lazily allocated, 256 KiB).
  std::vector<uint32_t> pair_counts_;
  uint64_t float_pass_pairs_ = 0;
  uint64_t pair_counts_total_ = 0;  // increments since the table was last folded
};

}  // namespace qd::compare
