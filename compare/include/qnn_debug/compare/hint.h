// A typed cause for a group's error, with the numbers that support it (docs/metrics.md,
// "Hints"). explain.h measures them; the report carries them to every view.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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
  static constexpr std::string_view kName = "layout_suspect";  // the kind, in reports
  static constexpr std::string_view kBadge = "L";              // its mark on the page's graph
  std::string permutation;  // e.g. "H and W swapped", "written as NHWC, read as NCHW"
  double sqnr_db = 0;       // the output's SQNR with the device read that way
};
// The reference uses a small part of the encoding's representable range.
struct CoarseEncoding {
  static constexpr std::string_view kName = "coarse_encoding";  // the kind, in reports
  static constexpr std::string_view kBadge = "Q";               // its mark on the page's graph
  double range_fraction = 0;  // (ref max - ref min) / (encoding max - encoding min)
  double fitted_sqnr_db = 0;  // the reference quantized with `fitted`, against itself
  FittedEncoding fitted;
  std::optional<WiderEncoding> wider = {};
};
// Reference values outside the encoding's range.
struct Clipping {
  static constexpr std::string_view kName = "clipping";  // the kind, in reports
  static constexpr std::string_view kBadge = "C";        // its mark on the page's graph
  double below_fraction = 0;   // of the finite reference values, below the encoding's minimum
  double above_fraction = 0;   // above its maximum
  double sqnr_without_db = 0;  // the output's SQNR over the elements that were not clipped
  FittedEncoding fitted;       // an encoding that holds the reference's whole range
  double fitted_sqnr_db = 0;
  std::optional<WiderEncoding> wider = {};
};
// The input was already bad and this op added little.
struct Inherited {
  static constexpr std::string_view kName = "inherited";      // the kind, in reports
  static constexpr std::string_view kBadge = "\xE2\x86\x91";  // its mark on the page's graph
  std::string upstream_group;  // the group that introduced the error upstream
  double introduced_db = 0;    // what this group added; NaN when NaN or Inf came in
};
// More NaN/Inf on the device than in the reference, and none in the inputs.
struct NanInfIntroduced {
  static constexpr std::string_view kName = "nan_inf_introduced";  // the kind, in reports
  static constexpr std::string_view kBadge = "N";                  // its mark on the page's graph
  uint64_t device_nan = 0, device_inf = 0, reference_nan = 0, reference_inf = 0;
};
// An encoding that cannot be right (encoding_lint.h): zero, negative or non-finite scale...
struct DegenerateEncoding {
  static constexpr std::string_view kName = "degenerate_encoding";  // the kind, in reports
  static constexpr std::string_view kBadge = "D";                   // its mark on the page's graph
  std::string finding;
};
// Neither layout, encoding, clipping nor the inputs account for the error.
struct KernelSuspect {
  static constexpr std::string_view kName = "kernel_suspect";  // the kind, in reports
  static constexpr std::string_view kBadge = "K";              // its mark on the page's graph
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
// Each kind is the evidence type at its position in HintEvidence, and its name that type's kName.
template <HintKind kind>
using EvidenceOf = std::variant_alternative_t<static_cast<size_t>(kind), HintEvidence>;
static_assert(std::variant_size_v<HintEvidence> ==
              static_cast<size_t>(HintKind::kKernelSuspect) + 1);
static_assert(std::is_same_v<EvidenceOf<HintKind::kLayoutSuspect>, LayoutSuspect>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kCoarseEncoding>, CoarseEncoding>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kClipping>, Clipping>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kInherited>, Inherited>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kNanInfIntroduced>, NanInfIntroduced>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kDegenerateEncoding>, DegenerateEncoding>);
static_assert(std::is_same_v<EvidenceOf<HintKind::kKernelSuspect>, KernelSuspect>);

namespace detail {
template <typename... Evidence>
constexpr std::array<std::string_view, sizeof...(Evidence)> kind_names(
    const std::variant<Evidence...>*) {
  return {Evidence::kName...};
}
template <typename... Evidence>
constexpr std::array<std::string_view, sizeof...(Evidence)> kind_badges(
    const std::variant<Evidence...>*) {
  return {Evidence::kBadge...};
}
}  // namespace detail
// Every kind's name and badge (one character, UTF-8), by HintKind: the evidence types' own.
inline constexpr auto kHintKindNames =
    detail::kind_names(static_cast<const HintEvidence*>(nullptr));
inline constexpr auto kHintKindBadges =
    detail::kind_badges(static_cast<const HintEvidence*>(nullptr));

// "layout_suspect", "coarse_encoding", ...: the names reports use.
constexpr std::string_view hint_kind_name(HintKind kind) {
  return kHintKindNames[static_cast<size_t>(kind)];
}
constexpr std::optional<HintKind> parse_hint_kind(std::string_view name) {
  for (size_t k = 0; k < kHintKindNames.size(); ++k) {
    if (kHintKindNames[k] == name) return static_cast<HintKind>(k);
  }
  return std::nullopt;
}

struct Hint {
  std::string tensor;  // the reference output it is about
  // How much SQNR the cause accounts for (dB; +inf: all of it): a group's hints are ordered by it.
  double explained_db = 0;
  std::string sentence;  // for people
  HintEvidence evidence;

  HintKind kind() const { return static_cast<HintKind>(evidence.index()); }
};

}  // namespace qd::compare
