// Layout reconciliation: how to read a device tensor in the reference tensor's layout
// (docs/metrics.md). Shapes are reconciled only in ways that provably keep element
// identity; anything else is an error, never a silent broadcast or a guessed permutation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd::compare {

struct LayoutPlan {
  // Reference axis i is device axis axis_order[i] (NHWC device, NCHW reference: {0, 3, 1, 2}).
  // Empty: identity (an identity order is normalized to empty).
  std::vector<uint8_t> axis_order;
  // The order was not stored with the device tensor but inferred from the shapes.
  bool inferred = false;
  // The dims, after axis_order, differ from the reference only by size-1 axes (a squeeze or
  // unsqueeze, e.g. [1, 256] vs [1, 256, 1, 1] or [256]); removing or inserting size-1 axes never
  // changes the order of the elements of a contiguous tensor, and store tensors are always
  // contiguous, so element k of the permuted device view is element k of the reference. General
  // reshapes that merge or split axes of size > 1 ([1, 256] vs [1, 4, 8, 8]) are NOT accepted:
  // the same element count says nothing about element order (NHWC flattened is not NCHW
  // flattened).
  bool reshaped = false;
};

// Decides how the device tensor maps onto the reference tensor, in this order:
//   1. the device has a stored axis_order: apply it; the permuted dims must equal the reference
//      dims, or differ from them only by size-1 axes (then `reshaped`);
//   2. equal dims: identity;
//   3. dims differ only by size-1 axes: `reshaped`, identity order (checked before 4, because a
//      permutation that only moves size-1 axes is no layout change and must not be flagged as an
//      inferred layout);
//   4. same rank and a permutation of the device dims equals the reference dims: the permutation
//      if it is unique (`inferred`); permutations that differ only in where size-1 axes go count
//      as one. Several distinct ones (repeated sizes, e.g. [1,8,8,8]) are an error
//      "ambiguous permutation: ..." listing the candidates;
//   5. otherwise the error "shape mismatch: ...".
// Errors are kInvalidArgument and name both tensors and their dims. Ranks above kMaxRank and a
// stored axis_order that is not a permutation of the device rank are errors too.
Result<LayoutPlan> plan_layout(const TensorEntry& ref, const TensorEntry& device);

// Maps reference flat indices (row-major over the reference layout) to device flat indices
// (row-major over the stored device dims), for streaming: map a chunk of the reference order and
// gather the device elements it names. Incremental (an odometer over the permuted axes, adjacent
// axes that stay adjacent merged, size-1 axes dropped): one division per axis per call, none per
// element.
class Permuter {
 public:
  // `device_dims` are the stored dims of the device tensor the plan was made for. Error
  // (kInvalidArgument) when the plan's axis_order is not a permutation of their rank.
  static Result<Permuter> create(const LayoutPlan& plan, const std::vector<uint64_t>& device_dims);

  uint64_t element_count() const { return count_; }
  // Reference index k is device index k: no gather needed.
  bool is_identity() const { return axes_.size() <= 1 && (axes_.empty() || axes_[0].stride == 1); }

  // out[k] = device flat index of reference flat index first + k. Error (kInvalidArgument) when
  // [first, first + out.size()) is not inside [0, element_count()).
  Status map(uint64_t first, std::span<uint64_t> out) const;
  // Convenience: resizes *out to `count` and fills it.
  Status map(uint64_t first, uint64_t count, std::vector<uint64_t>* out) const;

 private:
  struct Axis {
    uint64_t size;    // extent in the reference order
    uint64_t stride;  // device elements per step
  };
  Permuter() = default;
  Status check_range(uint64_t first, uint64_t n) const;
  std::vector<Axis> axes_;  // outermost first; merged, no size-1 axes
  uint64_t count_ = 0;
};

// Which channel each element belongs to: reference element i is in channel (i / inner) % count.
struct ChannelMap {
  uint64_t count = 1;
  uint64_t inner = 1;
  // A KV cache read per head and position (kv_cache.h): its `count` channels are heads x
  // positions cells, head h at position p being cell h * positions + p ([B, H, S, D]) or
  // p * heads + h ([B, S, H, D], heads_inner). The figures' channels are then the positions (each
  // the sum of its heads' cells), and Metrics::kv_cells says which cells differ.
  uint64_t heads = 1;
  bool heads_inner = false;
};

// The channels of a compared pair's per-channel figures (docs/metrics.md, "Per-channel figures"):
// a per-axis device encoding's axis, read in the reference order through `layout`; else the
// reference's conventional channel axis (axis 1 of rank 4 and 5, the last of rank 2 and 3) when it
// has 2 to 4096 channels of at least 8 elements each. No view: one channel, no axis.
struct ChannelView {
  ChannelMap map;
  std::optional<uint32_t> axis;  // in reference order; unset when no reference axis matches
};
ChannelView channel_view(const TensorEntry& ref, const TensorEntry& device,
                         const LayoutPlan& layout);

// "[1,3,8,8]": dims as written in messages.
std::string format_dims(const std::vector<uint64_t>& dims);

}  // namespace qd::compare
