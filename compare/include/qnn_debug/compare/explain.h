// Why a group's output is wrong: a typed cause (hint.h), with the numbers that support it, for
// every failing or warning group (docs/metrics.md, "Hints"). Each cause is measured, not
// guessed: a layout is tried, an encoding is applied to the reference, a fitted encoding is
// computed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/excess.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

struct HintOptions {
  double layout_gain_db = 20;          // a permutation must raise SQNR this much
  double coarse_range_fraction = 0.1;  // the reference spans at most this share of the range
  double coarse_gain_db = 6;           // and a fitted encoding gains this much
  double clipped_fraction = 0.001;     // at least this share of reference values clipped
  double clipping_gain_db = 3;         // and leaving them out gains this much
  double inherited_below_db = 1;       // introduced less than this: inherited
  double kernel_gap_db = 10;           // the device this far below what it is allowed: the kernel
  // A per-channel gain carries an input's error to the output only with at least this many
  // elements per channel (fewer give no stable gain).
  uint64_t gain_channel_elements = 32;
  // Per side: a larger tensor gets no layout, encoding or kernel hint (the measurements hold a few
  // copies of it, 16 MiB each at this size).
  uint64_t element_budget = uint64_t{1} << 22;
};

// ---- the measurements, on decoded values in the reference layout ----------------------------

// 10 log10(sum r^2 / sum (d - r)^2) over the pairs where both are finite, in double.
double sqnr_db(std::span<const float> ref, std::span<const float> dev);

struct LayoutTrial {
  std::string permutation;
  double sqnr_db = 0;
};
// The SQNR of `dev` read in each plausible wrong order of `dims` (the last two axes transposed,
// NHWC and NCHW mixed up, channels reversed): at most six trials, the best first.
std::vector<LayoutTrial> try_layouts(std::span<const float> ref, std::span<const float> dev,
                                     const std::vector<uint64_t>& dims, int channel_axis);

// What the device's encoding does to the reference: its ideal quantization, what it clips, and
// the encoding that fits the reference. `channel` gives each element's channel (per-axis), or
// is empty.
struct EncodingEvidence {
  double ideal_sqnr_db = 0;  // ref against ref quantized with the device's encoding
  double range_fraction = 1;
  double below_fraction = 0, above_fraction = 0;
  double sqnr_without_clipped_db = 0;  // dev against ref over the unclipped elements
  FittedEncoding fitted;
  double fitted_sqnr_db = 0;
  std::optional<WiderEncoding> wider;  // when fitted_sqnr_db < pass_db and a wider grid exists
};
// `pass_db`: the SQNR the policy passes the output at (its warn_below_db).
EncodingEvidence examine_encoding(std::span<const float> ref, std::span<const float> dev,
                                  const TensorRecord& device, std::span<const uint32_t> channel,
                                  double pass_db);

// The encoding that covers [min, max] (widened to hold 0.0) with the raw range of `device`, or
// with `bitwidth` bits of the same signedness.
FittedEncoding fit_encoding(double min, double max, const TensorRecord& device);
FittedEncoding fit_encoding(double min, double max, bool is_signed, int bitwidth);
// The bit width a wider suggestion uses: QNN's activation grids are 8 or 16 bits.
inline constexpr int kWiderBitwidth = 16;

// ---- a run -----------------------------------------------------------------------------------

// What the judge (report/judge.h) decided of an analysis group: whether it fails or warns, the
// SQNR its policy line passes at (the suggestions aim above it), its own excess error and what
// the excess rule made of it (a non-pass: the op's own error is a cause of the verdict).
struct JudgedGroup {
  Verdict verdict = Verdict::kPass;
  double pass_db = Thresholds{}.warn_below_db;
  std::optional<Excess> excess;
  Verdict excess_verdict = Verdict::kPass;
};

// Fills GroupFinding::hints for every group of `analysis` (the run's findings) that `judged`
// (one entry per analysis group) says fails or warns, reading the tensors it needs again from the
// stores. A tensor that cannot be read gives no hint, never an error: hints explain, the verdicts
// stand without them.
void explain(const StoreReader& ref, const StoreReader& device, const RunComparison& run,
             RunAnalysis& analysis, std::span<const JudgedGroup> judged,
             const HintOptions& options = {});

}  // namespace qd::compare
