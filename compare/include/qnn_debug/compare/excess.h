// What an op's inputs and its encoding allow, and how far the device falls below it: the op's
// own excess error (docs/metrics.md, "What the encoding allows"). The figures come from SQNRs the
// report already has, so a saved report gives the same ones again.
//
// With every SQNR read as a noise power relative to its signal, n(x) = 10^(-x/10) (x bounded
// above by kExactSqnrDb):
//   allowed = -10 log10(n(input) + n(ideal))     the input's error carried through, plus the
//                                                encoding's own rounding
//   own     = the noise power the op adds beyond an ideal integer kernel with its encoding, by
//             the best evidence there is (Source)
//   excess_db          = 10 log10((n_allowed + own) / n_allowed)   (dB below `allowed`)
//   excess_noise_ratio = sqrt(own / n(ideal))     in RMS units of the encoding's rounding noise
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <optional>

namespace qd::compare {

// Where the op's own error is read from: the replay of the op alone on the device's inputs (ISO
// vs DEV: measured, nothing inherited), the kernel part of a chained simulation (SIM vs DEV, less
// what its inputs' kernel error carries in), or the total (REF vs DEV, less what its input's
// error and its encoding's rounding account for).
enum class ExcessSource { kIsolated, kKernel, kTotal };
inline constexpr auto kExcessSources = std::to_array<Term<ExcessSource>>({
    {ExcessSource::kIsolated, "isolated",
     "ISO vs DEV: the op replayed alone on the device's inputs"},
    {ExcessSource::kKernel, "kernel", "SIM vs DEV, less the kernel error its inputs carry in"},
    {ExcessSource::kTotal, "total",
     "REF vs DEV, less its input's error and its encoding's rounding"},
});
static_assert(in_declaration_order(kExcessSources));
constexpr std::string_view excess_source_name(ExcessSource source) {
  return term_name(kExcessSources, source);
}
constexpr std::optional<ExcessSource> parse_excess_source(std::string_view name) {
  return parse_term(kExcessSources, name);
}

struct Excess {
  ExcessSource source = ExcessSource::kTotal;
  double allowed_sqnr_db = 0;
  double excess_db = 0;           // >= 0
  double excess_noise_ratio = 0;  // >= 0
  double added_noise_db = 0;      // 10 log10(own): the op's own noise relative to its signal
};

// The SQNRs of one group (its worst output) the estimate reads. Unset: not measured.
struct ExcessInputs {
  double sqnr_db = 0;                          // REF vs DEV
  std::optional<double> input_sqnr_db;         // the worst input's REF vs DEV; unset: none compared
  std::optional<double> ideal_sqnr_db;         // REF quantized with DEV's encoding
  std::optional<double> isolated_sqnr_db;      // ISO vs DEV
  std::optional<double> kernel_sqnr_db;        // SIM vs DEV
  std::optional<double> kernel_input_sqnr_db;  // its inputs' SIM vs DEV; unset: none compared
};

// nullopt without an ideal figure (a device output without an encoding) or a finite-or-infinite
// SQNR to weigh (NaN).
std::optional<Excess> estimate_excess(const ExcessInputs& in);

// The noise power relative to the signal an SQNR stands for, 10^(-min(x, C)/10).
double relative_noise(double sqnr_db);

}  // namespace qd::compare
