// The records of a qnn-debug store, shared by its writer and reader. docs/store-format.md
// describes how they are laid out in HDF5.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/dtype.h"
#include "qnn_debug/status.h"

namespace qd {

inline constexpr std::string_view kStoreFormatName = "qnn-debug-store";
inline constexpr int32_t kStoreFormatVersion = 2;
inline constexpr int kMaxRank = 8;
// Run id of profile events and memory checkpoints recorded outside any run (e.g. at load time).
inline constexpr uint32_t kNoRun = 0xFFFFFFFFu;

struct StoreMetadata {
  std::string producer;  // the program that wrote the store
  std::string backend;   // e.g. "QnnHtp", "cpu-reference"
  std::string soc;       // e.g. "SM8650"
  std::string model;
  int64_t created_unix_ns = 0;
};

// Which formula turns a raw integer q into a real value.
enum class QuantConvention : uint8_t {
  kQnnOffset = 0,  // real = (q + offset) * scale, offset = -zero_point (QNN)
  kZeroPoint = 1,  // real = (q - zero_point) * scale (PyTorch, ExecuTorch)
};

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
std::string_view role_name(TensorRole role);

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

// A tensor as read back from a store.
struct TensorEntry : TensorRecord {
  uint64_t seq = 0;  // position in the store-wide capture order
  uint32_t run_id = 0;
  int64_t capture_unix_ns = 0;
  uint64_t data_offset = 0;  // into /data
  uint64_t data_nbytes = 0;
  uint32_t data_crc32c = 0;
  TensorStats stats;
};

struct RunInfo {
  uint32_t id = 0;
  std::string name;
  bool complete = false;  // false: the writer never reached end_run (crash, kill, disk full)
  int64_t begin_unix_ns = 0;
  int64_t end_unix_ns = 0;
  uint64_t tensor_count = 0;   // tensors stored for this run
  uint64_t dropped_count = 0;  // tensors the capture hook dropped (drop policy), from end_run
};

struct ProfileEvent {
  uint32_t run_id = 0;
  std::string name;
  std::vector<int64_t> handles;
  int64_t start = 0;
  int64_t end = 0;
  std::string unit;  // "ns", "cycles", "ticks", ...
  // The runtime's instruction index (ETDump's instruction_id): tells two calls of one op apart.
  // -1: the producer gave none.
  int64_t instruction_id = -1;
};

struct MemoryCheckpoint {
  uint32_t run_id = 0;
  std::string label;  // e.g. "DSP:before_context_created"
  uint64_t bytes = 0;
  int64_t time_unix_ns = 0;
};

struct GraphNode {
  std::string name;
  std::string op_type;
  std::vector<std::string> inputs;   // tensor names
  std::vector<std::string> outputs;  // tensor names
  std::vector<int64_t> handles;
};

// Checks a record against the store's rules before anything is written: rank <= kMaxRank,
// `nbytes` equal to the dims' element count in the dtype, axis_order a permutation of the rank,
// quantization consistent (one scale and offset per tensor or per channel of the axis, only on
// integer dtypes). Scale values are not judged here: a zero, negative or non-finite scale is kept
// as the producer gave it, and encoding_lint.h flags it.
// The message names the tensor.
Status validate_tensor(const TensorRecord& record, uint64_t nbytes);

// A tensor name made safe for one line of a message: quoted, control and non-ASCII bytes as
// \xNN, cut to `max_chars` with "..." so a hostile 1 MB name cannot flood a terminal.
std::string quote_name(std::string_view name, size_t max_chars = 160);

// "NHWC->NCHW" style label for common axis orders, else the numbers ("0,2,3,1").
std::string describe_axis_order(const std::vector<uint8_t>& axis_order);

}  // namespace qd
