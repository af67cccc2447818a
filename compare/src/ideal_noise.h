// What the device's own encoding allows a pair: the reference quantized with that encoding, an
// ideal integer kernel's output, against the reference itself (docs/metrics.md, "What the
// encoding allows"). Accumulated beside the metrics in the same pass over the decoded values.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/split.h"
#include "qnn_debug/etdump/store.h"

namespace qd::compare {

// One channel's grid: QNN's convention, real = (q + offset) * scale, q within [raw_min, raw_max].
struct IdealGrid {
  double scale, offset, raw_min, raw_max;
};

// A chunk's piece that add_pieces keeps for the next chunk's to share the chains with: its
// `length` values (copied; zeros after the first `used`), what its chunk's scan found.
struct HeldPiece {
  uint64_t at, used, length;  // at: where its values start in the copies
  bool clamp, non_finite;
};

class IdealNoise {
 public:
  // `device`: the device tensor (its encoding and raw range); `channels`: each reference element's
  // channel of a per-axis encoding (the pair's channel view). Inactive for a device tensor without
  // an encoding, or a per-axis one whose channels the view does not give.
  IdealNoise(const TensorRecord& device, ChannelMap channels);

  bool active() const { return !grids_.empty(); }
  // Pairs r[i], d[i] are reference elements first + i, as for MetricAccumulator::add; only the
  // pairs finite on both sides count, as for the metrics.
  template <class R, class D>
  void add(const R* r, const D* d, uint64_t count, uint64_t first);
  // The same sums as add() called for each piece of `piece` elements of a chunk of float32
  // reference values r[0, count) (reference elements first..; the last piece may be shorter),
  // the pieces' chains computed side by side. The device values are not read: true only when every
  // one is finite and none is masked, as the chunk's reference shows. Where zero is on the grid, a
  // piece's zeros after its last other value (a KV cache's unwritten slots) add nothing to its
  // chain and are only counted. False, with nothing added, where that or the same bits cannot be
  // had this way (no AVX2, a per-axis encoding, one piece or more than 64, a reference value at
  // float32's lowest or far off the grid): the caller then calls add() per piece.
  // A chunk's last pieces with values (fewer than eight) wait for the next chunk's, so that eight
  // chains still run side by side when each chunk has only a few (a KV cache's heads: one or
  // two); they are added, in order, before any later pair (add(), merge(), sqnr_db(), flush()).
  bool add_pieces(const float* r, uint64_t count, uint64_t first, uint64_t piece);
  // Adds the pieces held by add_pieces, each on its own chain.
  void flush();
  void merge(const IdealNoise& other);
  // 10 log10(sum r^2 / sum (Q(r) - r)^2): +inf when the reference is on the grid, nullopt when
  // inactive or no pair was finite.
  std::optional<double> sqnr_db() const;

 private:
  std::vector<IdealGrid> grids_;  // one per channel of the encoding
  bool device_finite_ = false;    // no code decodes to a value beyond the float range
  ChannelMap channels_;
  bool zeros_add_nothing() const;  // zero is on the (per-tensor) grid

  double signal_ = 0, noise_ = 0;
  uint64_t n_ = 0;
  std::vector<HeldPiece> held_;
  std::vector<float> held_values_;
};

}  // namespace qd::compare
