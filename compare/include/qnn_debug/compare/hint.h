// A typed cause for a group's error, with the numbers that support it (docs/metrics.md,
// "Hints"). explain.h measures them; the report carries them to every view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace qd::compare {

// An activation encoding fitted to the reference's range, in the device encoding's raw range and
// QNN's offset convention (real = (q + offset) * scale).
struct FittedEncoding {
  double min = 0;  // the range it covers (the reference's, widened to hold 0.0)
  double max = 0;
  double scale = 0;
  int64_t offset = 0;
  int bitwidth = 0;
  bool is_signed = false;  // raw values signed (SFIXED) or not (UFIXED)
};

// The fitted range at the next bit width (16), when even the fitted encoding stays below the
// policy's pass threshold for the output (docs/metrics.md, "Hints").
struct WiderEncoding {
  FittedEncoding encoding;
  double sqnr_db = 0;  // the reference quantized with `encoding`, against itself
};

// Some permutation of the device tensor matches the reference far better than its stored order.
struct LayoutSuspect {
  std::string permutation;  // e.g. "H and W swapped", "written as NHWC, read as NCHW"
  double sqnr_db = 0;       // the output's SQNR with the device read that way
};
// The reference uses a small part of the encoding's representable range.
struct CoarseEncoding {
  double range_fraction = 0;  // (ref max - ref min) / (encoding max - encoding min)
  double fitted_sqnr_db = 0;  // the reference quantized with `fitted`, against itself
  FittedEncoding fitted;
  std::optional<WiderEncoding> wider = {};
};
// Reference values outside the encoding's range.
struct Clipping {
  double below_fraction = 0;   // of the finite reference values, below the encoding's minimum
  double above_fraction = 0;   // above its maximum
  double sqnr_without_db = 0;  // the output's SQNR over the elements that were not clipped
  FittedEncoding fitted;       // an encoding that holds the reference's whole range
  double fitted_sqnr_db = 0;
  std::optional<WiderEncoding> wider = {};
};
// The input was already bad and this op added little.
struct Inherited {
  std::string upstream_group;  // the group that introduced the error upstream
  double introduced_db = 0;    // what this group added; NaN when NaN or Inf came in
};
// More NaN/Inf on the device than in the reference, and none in the inputs.
struct NanInfIntroduced {
  uint64_t device_nan = 0, device_inf = 0, reference_nan = 0, reference_inf = 0;
};
// An encoding that cannot be right (encoding_lint.h): zero, negative or non-finite scale...
struct DegenerateEncoding {
  std::string finding;
};
// Neither layout, encoding, clipping nor the inputs account for the error.
struct KernelSuspect {
  double ideal_sqnr_db = 0;  // the reference quantized with the device's own encoding
};

using HintEvidence = std::variant<LayoutSuspect, CoarseEncoding, Clipping, Inherited,
                                  NanInfIntroduced, DegenerateEncoding, KernelSuspect>;

enum class HintKind : uint8_t {
  kLayoutSuspect,
  kCoarseEncoding,
  kClipping,
  kInherited,
  kNanInfIntroduced,
  kDegenerateEncoding,
  kKernelSuspect,
};
// "layout_suspect", "coarse_encoding", ...: the names reports use.
std::string_view hint_kind_name(HintKind kind);

struct Hint {
  std::string tensor;  // the reference output it is about
  // How much SQNR the cause accounts for (dB; +inf: all of it): a group's hints are ordered by it.
  double explained_db = 0;
  std::string sentence;  // for people
  HintEvidence evidence;

  HintKind kind() const { return static_cast<HintKind>(evidence.index()); }
};

}  // namespace qd::compare
