// Masked positions (docs/metrics.md, "Masked positions"): an attention score the model masked out
// is -inf, or its float dtype's lowest value, in the reference, and the same (or, quantized, the
// encoding's lowest raw code) on the device. Where both sides are masked the pair agrees on
// "masked" and its values carry no error to measure; such pairs are counted apart
// (Metrics::masked) and left out of every figure. A position masked on one side only is a real
// difference (a mask leak) and stays in.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "qnn_debug/base/tensor.h"
#include "qnn_debug/compare/layout.h"

namespace qd::compare {

class MaskRule {
 public:
  // `channels`: each reference element's channel of a per-axis device encoding (the pair's
  // channel view). Inactive for a reference that is not float, or a device that can hold no mask
  // (an unquantized integer, or a per-axis encoding whose channels the view does not give).
  MaskRule(const TensorRecord& ref, const TensorRecord& device, ChannelMap channels);

  bool active() const { return active_; }
  // A reference value at or below this is masked (its float dtype's lowest; -inf counts).
  double reference_floor() const { return ref_floor_; }
  // Whether the pair of reference element `element` is masked on both sides.
  bool masked(double r, double d, uint64_t element) const {
    return r <= ref_floor_ && d <= device_floor(element);
  }
  // Whether a device value of 0 can be part of a masked pair (at or below a device floor).
  bool masks_device_zero() const {
    for (const double floor : device_floors_) {
      if (floor >= 0) return true;
    }
    return false;
  }

 private:
  double device_floor(uint64_t element) const {
    if (device_floors_.size() == 1) return device_floors_[0];
    return device_floors_[(element / channels_.inner) % channels_.count];
  }

  bool active_ = false;
  double ref_floor_ = 0;
  // Per channel of a per-axis encoding, else one: a device value at or below it is masked (a
  // float dtype's lowest; half a step above the value of the lowest raw code).
  std::vector<double> device_floors_;
  ChannelMap channels_;
};

// The lowest finite value of a float dtype; nullopt for any other dtype.
std::optional<double> float_lowest(DType dtype);

}  // namespace qd::compare
