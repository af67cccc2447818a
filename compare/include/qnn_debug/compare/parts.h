// Error parts: a run pair's total error (REF vs DEV) split with a third store of the same graph.
//
// - quantization: REF vs SIM, where SIM is a quantized simulation of the reference (every op
//   output fake-quantized to its encoding): what the encodings cost;
// - kernel: SIM vs DEV: what the device adds beyond an ideal integer kernel;
// - isolated: ISO vs DEV, where ISO replays each op alone on the device's own inputs
//   (qnn_debug.replay): each op's own error, with no inherited error.
//
// A part keeps the total's groups (same ids, same op order, same members) so that every figure
// of a group lines up across the parts; each pair (R, D) of the total becomes (R, S) or (T, D),
// where S / T is the third store's tensor that aligning the third run with the reference run
// (align.h, the same rules as any diff) pairs with R. docs/metrics.md, "Quantization or kernel?".
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

enum class Part { kQuantization, kKernel, kIsolated };
inline constexpr auto kParts = std::to_array<Term<Part>>({
    // The meaning is the pair compared: what the encodings cost, what the device's kernel adds,
    // and each op's own error on the device's inputs.
    {Part::kQuantization, "quantization", "REF vs SIM"},
    {Part::kKernel, "kernel", "SIM vs DEV"},
    {Part::kIsolated, "isolated", "ISO vs DEV"},
});
static_assert(in_declaration_order(kParts));
constexpr std::string_view part_name(Part part) { return term_name(kParts, part); }

struct PartComparison {
  Part part = Part::kQuantization;
  uint32_t third_run = 0;  // the run of the third store
  // The run pair with the third store's tensors in place of one side. Its ref_tensors and
  // device_tensors are the sides it compares; the group members still point into the total's
  // reference tensors, so the part lives no longer than the total it was made from.
  RunComparison run;
  uint64_t missing_pairs = 0;  // total pairs whose reference tensor the third run lacks
};

// The third store's run that goes with the total's run pair: the one at the position of the
// reference run among the reference store's runs (a simulation runs the reference's inputs), or,
// for the isolated part, at the device run's position (a replay runs the device's inputs). A
// third store with one run serves every run pair. nullopt when there is none.
std::optional<uint32_t> third_run_for(Part part, const StoreReader& ref, const StoreReader& device,
                                      const StoreReader& third, const RunComparison& total);

// Builds part `part` of `total` from run `third_run` of `third` and computes its metrics:
// quantization compares `ref` with `third`, kernel and isolated compare `third` with `device`.
// Pairs whose reference tensor has no counterpart in the third run are left out (counted in
// missing_pairs). Errors: the third run cannot be read.
Result<PartComparison> compare_part(Part part, const StoreReader& ref, const StoreReader& device,
                                    const StoreReader& third, uint32_t third_run,
                                    const RunComparison& total, const CompareOptions& options);

// Which part the error a group adds itself comes from (docs/metrics.md, "Quantization or
// kernel?"): never what it inherits.
// - none when neither the total nor the kernel part warns or fails: nothing to explain;
// - else the part whose own error (OwnError) is larger, when it leads by more than
//   kAttributionMarginDb beyond the uncertainty of both estimates: (larger - its uncertainty) >=
//   10^(margin/10) x (smaller + its uncertainty); otherwise within_noise;
// - `inherited` when the op's own error, both parts together, is less than what its input
//   carries in: the group's error comes mostly from upstream.
enum class AttributionKind { kNone, kQuantization, kKernel, kWithinNoise };
inline constexpr auto kAttributionKinds = std::to_array<Term<AttributionKind>>({
    {AttributionKind::kNone, "none", "nothing to split: the total and the kernel part pass"},
    {AttributionKind::kQuantization, "quantization",
     "the op's encodings cost most of its own error"},
    {AttributionKind::kKernel, "kernel", "the device's kernel adds most of the op's own error"},
    {AttributionKind::kWithinNoise, "within_noise",
     "the two parts of the op's own error are alike within what their estimates can tell"},
});
static_assert(in_declaration_order(kAttributionKinds));
constexpr std::string_view attribution_name(AttributionKind kind) {
  return term_name(kAttributionKinds, kind);
}
constexpr std::optional<AttributionKind> attribution_from_name(std::string_view name) {
  return parse_term(kAttributionKinds, name);
}

// How far one part's own error must lead the other's, beyond their uncertainties.
inline constexpr double kAttributionMarginDb = 3;

struct Attribution {
  AttributionKind kind = AttributionKind::kNone;
  // 10 log10 of the larger own error over the smaller, in dB: >= 0, at most kExactSqnrDb (an
  // exact part against a lossy one); 0 for none.
  double margin_db = 0;
  bool inherited = false;  // the group's error comes mostly from upstream
};

// The error an op adds itself in one part, as a noise power relative to its output's signal, and
// the uncertainty of that figure in the same unit (0 when measured, as the replay and the
// encoding's own rounding are).
struct OwnError {
  double noise = 0;
  double uncertainty = 0;
};

Attribution attribute(Verdict total, Verdict kernel, const OwnError& quantization,
                      const OwnError& kernel_part, bool inherited);

}  // namespace qd::compare
