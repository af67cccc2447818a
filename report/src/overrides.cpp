// `--suggest-overrides FILE`: for every tensor with a coarse_encoding or clipping hint, an
// activation encoding fitted to the reference's range, in the AIMET encodings JSON that QNN's
// converters take with --quantization_overrides (docs/reports.md, "Suggested overrides").
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <variant>

#include "qnn_debug/jsonio/jsonio.h"
#include "views_internal.h"

namespace qd::report {
namespace {

using nlohmann::json;

// The range a tensor's suggestion must cover: over every run where it was hinted.
struct Suggestion {
  double min = 0;
  double max = 0;
  int bitwidth = 0;
};

// The hint's suggestion: the fitted encoding, or its wider one when the fitted one cannot reach
// the policy.
const compare::FittedEncoding* fitted_of(const compare::Hint& hint) {
  const auto suggestion = [](const auto& e) { return e.wider ? &e.wider->encoding : &e.fitted; };
  if (const auto* e = std::get_if<compare::CoarseEncoding>(&hint.evidence)) return suggestion(*e);
  if (const auto* e = std::get_if<compare::Clipping>(&hint.evidence)) return suggestion(*e);
  return nullptr;
}

// The device tensor of the group's pair whose reference is `reference`: the converter's name.
const std::string* device_name(const GroupReport& group, const std::string& reference) {
  for (const PairReport& pair : group.pairs) {
    if (pair.reference.name == reference) return &pair.device.name;
  }
  return nullptr;
}

// AIMET's encoding (version 0.4 fields, plus dtype): an unsigned grid of 2^bitwidth - 1 steps
// from min, real = (q + offset) * scale with offset = round(min / scale).
json aimet_encoding(const Suggestion& s) {
  const double steps = std::ldexp(1.0, s.bitwidth) - 1;
  const double scale = s.max > s.min ? (s.max - s.min) / steps : 1.0;
  const double offset = std::nearbyint(s.min / scale);
  return json::array({{{"bitwidth", s.bitwidth},
                       {"dtype", "int"},
                       {"is_symmetric", "False"},
                       {"max", (steps + offset) * scale},
                       {"min", offset * scale},
                       {"offset", static_cast<int64_t>(offset)},
                       {"scale", scale}}});
}

class OverridesView : public ReportSink {
 public:
  explicit OverridesView(TextOut out) : out_(std::move(out)) {}

  Status add_run(const RunReport& run) override {
    for (const GroupReport& group : run.groups) {
      for (const compare::Hint& hint : group.hints) {
        const compare::FittedEncoding* fitted = fitted_of(hint);
        const std::string* name = device_name(group, hint.tensor);
        if (fitted == nullptr || name == nullptr) continue;
        auto [at, fresh] =
            suggestions_.try_emplace(*name, Suggestion{fitted->min, fitted->max, fitted->bitwidth});
        if (!fresh) {
          at->second.min = std::min(at->second.min, fitted->min);
          at->second.max = std::max(at->second.max, fitted->max);
          at->second.bitwidth = std::max(at->second.bitwidth, fitted->bitwidth);
        }
      }
    }
    return Status::ok();
  }

  Status finish(const ReportEnding&) override {
    json activations = json::object();
    for (const auto& [name, suggestion] : suggestions_) {
      activations[name] = aimet_encoding(suggestion);
    }
    const json doc = {{"version", "0.4.0"},
                      {"activation_encodings", std::move(activations)},
                      {"param_encodings", json::object()}};
    return out_(jsonio::dump(doc, {2}) + "\n");
  }

 private:
  TextOut out_;
  std::map<std::string, Suggestion> suggestions_;  // sorted: the file is the same every time
};

}  // namespace

std::unique_ptr<ReportSink> make_overrides_view(TextOut out) {
  return std::make_unique<OverridesView>(std::move(out));
}

}  // namespace qd::report
