// What a producer knows about one tensor: dtype, dims, layout, quantization, debug handles and
// graph role, and the rules a record must meet (validate_tensor). The vocabulary of every
// component: the capture hook, the store, the importers, the comparator.
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/base/text.h"

namespace qd {

inline constexpr int kMaxRank = 8;

// Which formula turns a raw integer q into a real value.
enum class QuantConvention : uint8_t {
  kQnnOffset = 0,  // real = (q + offset) * scale, offset = -zero_point (QNN)
  kZeroPoint = 1,  // real = (q - zero_point) * scale (PyTorch, ExecuTorch)
};
inline constexpr auto kQuantConventions = std::to_array<Term<QuantConvention>>({
    {QuantConvention::kQnnOffset, "qnn_offset", "real = (q + offset) * scale (QNN)"},
    {QuantConvention::kZeroPoint, "zero_point", "real = (q - zero_point) * scale (PyTorch)"},
});
static_assert(in_declaration_order(kQuantConventions));

struct Quantization {
  std::vector<double> scales;    // empty: not quantized; one entry: per-tensor; else per axis
  std::vector<int64_t> offsets;  // same length as scales; meaning set by `convention`
  int32_t axis = -1;             // the channel axis of a per-axis encoding, -1 for per-tensor
  uint8_t bitwidth = 0;          // 0: the storage dtype's width
  QuantConvention convention = QuantConvention::kQnnOffset;

  bool is_quantized() const { return !scales.empty(); }
  bool per_axis() const { return axis >= 0; }
  // Real value of raw `q` in channel `channel` (0 for per-tensor).
  double dequantize(double q, size_t channel) const {
    const double offset = static_cast<double>(offsets[channel]);
    return convention == QuantConvention::kQnnOffset ? (q + offset) * scales[channel]
                                                     : (q - offset) * scales[channel];
  }
};

enum class TensorRole : uint8_t { kIntermediate = 0, kGraphInput = 1, kGraphOutput = 2 };
inline constexpr auto kTensorRoles = std::to_array<Term<TensorRole>>({
    {TensorRole::kIntermediate, "intermediate", "an op's output inside the graph"},
    {TensorRole::kGraphInput, "graph_input", "an input of the graph"},
    {TensorRole::kGraphOutput, "graph_output", "an output of the graph"},
});
static_assert(in_declaration_order(kTensorRoles));
constexpr std::string_view role_name(TensorRole role) { return term_name(kTensorRoles, role); }

// Summary computed at capture time over the real values (dequantized when quantized).
// min, max and mean cover the finite values only; all three are NaN when there are none.
struct TensorStats {
  double min = 0;
  double max = 0;
  double mean = 0;
  uint64_t nan_count = 0;
  uint64_t inf_count = 0;
};

// What a producer knows about one captured tensor.
struct TensorRecord {
  std::string name;              // as the runtime spelled it; any bytes
  std::vector<int64_t> handles;  // parsed debug handles, empty if none
  int32_t output_index = -1;     // -1 when unknown
  TensorRole role = TensorRole::kIntermediate;
  bool name_matched = true;  // false: the naming pattern matched nothing (kept, flagged)
  DType dtype = DType::kFloat32;
  std::vector<uint64_t> dims;
  // Axis order back to the reference layout: reference axis i is stored axis axis_order[i]
  // (NHWC stored, NCHW reference: {0, 3, 1, 2}). Empty: same layout as the reference.
  std::vector<uint8_t> axis_order;
  Quantization quant;

  uint64_t element_count() const;
};

// Checks a record against the rules every tensor meets before anything is written: rank <=
// kMaxRank, `nbytes` equal to the dims' element count in the dtype, axis_order a permutation of the
// rank, quantization consistent (one scale and offset per tensor or per channel of the axis, only
// on integer dtypes). Scale values are not judged here: a zero, negative or non-finite scale is
// kept as the producer gave it, and encoding_lint.h flags it. The message names the tensor.
Status validate_tensor(const TensorRecord& record, uint64_t nbytes);

// "NHWC->NCHW" style label for common axis orders, else the numbers ("0,2,3,1").
std::string describe_axis_order(const std::vector<uint8_t>& axis_order);

}  // namespace qd
