// The records of a qnn-debug store, shared by its writer and reader: a tensor as stored, runs,
// profile events, memory checkpoints, graph nodes. docs/store-format.md describes how they are
// laid out in HDF5.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/tensor.h"

namespace qd {

inline constexpr std::string_view kStoreFormatName = "qnn-debug-store";
inline constexpr int32_t kStoreFormatVersion = 2;
// Run id of profile events and memory checkpoints recorded outside any run (e.g. at load time).
inline constexpr uint32_t kNoRun = 0xFFFFFFFFu;

struct StoreMetadata {
  std::string producer;  // the program that wrote the store
  std::string backend;   // e.g. "QnnHtp", "cpu-reference"
  std::string soc;       // e.g. "SM8650"
  std::string model;
  int64_t created_unix_ns = 0;
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

}  // namespace qd
