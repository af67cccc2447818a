// The HDF5 layout of a store, format version 2 (docs/store-format.md is the user-facing copy).
// Every table row is a fixed-size compound; variable-length parts (names, handle lists, per-axis
// quantization) live in the /meta byte pool and tensor bytes in the /data byte pool, referenced
// by (offset, nbytes). All datasets exist before SWMR starts and only ever grow: the one layout
// that survived random SIGKILLs on this stack (docs/store-format.md, section 14).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "h5.h"

namespace qd::schema {

inline constexpr const char* kDataPool = "data";
inline constexpr const char* kMetaPool = "meta";
inline constexpr const char* kTensorTable = "tensors";
inline constexpr const char* kRunTable = "runs";
inline constexpr const char* kProfileTable = "profile_events";
inline constexpr const char* kMemoryTable = "memory_checkpoints";
inline constexpr const char* kGraphTable = "graph_nodes";
// Optional: stores written before it have none, and read as having no guessed shapes.
inline constexpr const char* kShapeGuessTable = "shape_guesses";
// Optional, as /shape_guesses: stores written before it read as knowing no instruction ids.
inline constexpr const char* kProfileInstructionTable = "profile_instructions";

// A span of the /meta pool.
struct MetaRef {
  uint64_t offset;
  uint64_t nbytes;
};

struct TensorRow {
  uint64_t seq;
  int64_t capture_unix_ns;
  uint64_t data_offset;
  uint64_t data_nbytes;
  uint64_t dims[8];
  MetaRef name;
  MetaRef handles;  // little-endian int64 values
  MetaRef quant;    // quant_count float64 scales, then quant_count int64 offsets
  double stat_min;
  double stat_max;
  double stat_mean;
  uint64_t stat_nan_count;
  uint64_t stat_inf_count;
  uint32_t run;
  uint32_t dtype;  // QNN data type code
  uint32_t data_crc32c;
  int32_t output_index;
  int32_t quant_axis;  // -1: per-tensor
  uint32_t quant_count;
  int8_t axis_order[8];  // -1 padded; all -1: same layout as the reference
  uint8_t rank;
  uint8_t role;
  uint8_t name_matched;
  uint8_t quant_convention;
  uint8_t quant_bitwidth;
  uint32_t row_crc32c;  // row_checksum
};

enum RunEvent : uint8_t { kRunBegin = 0, kRunEnd = 1 };

struct RunRow {
  int64_t unix_ns;
  MetaRef name;
  uint64_t tensor_count;
  uint64_t dropped_count;
  uint32_t run;
  uint8_t event;
  uint32_t row_crc32c;
};

struct ProfileRow {
  int64_t start;
  int64_t end;
  MetaRef name;
  MetaRef handles;
  MetaRef unit;
  uint32_t run;
  uint32_t row_crc32c;
};

struct MemoryRow {
  int64_t unix_ns;
  uint64_t bytes;
  MetaRef label;
  uint32_t run;
  uint32_t row_crc32c;
};

struct GraphRow {
  MetaRef name;
  MetaRef op_type;
  MetaRef inputs;   // tensor names, each followed by one NUL byte
  MetaRef outputs;  // same
  MetaRef handles;
  uint32_t row_crc32c;
};

// A tensor whose shape its producer guessed (an importer that read bare bytes).
struct ShapeGuessRow {
  MetaRef name;  // the tensor name, as in /tensors
  uint32_t row_crc32c;
};

// The runtime's instruction index of a profile event (ETDump's instruction_id), only for the
// events whose producer knows one: most producers know none, and then pay nothing.
struct ProfileInstructionRow {
  uint64_t event;  // the event's row index in /profile_events
  int64_t instruction_id;
  uint32_t row_crc32c;
};

// What a row's checksum covers, in order: the /meta bytes of each of its MetaRefs, then every
// other field as stored (its HDF5 size, little-endian), row_crc32c itself left out.
struct RowLayout {
  std::vector<size_t> refs;                       // offsets of the MetaRefs in the row
  std::vector<std::pair<size_t, size_t>> fields;  // (offset, size) of the checksummed fields
};

// Compound types (native layout, the same in memory and on disk), built once per process.
hid_t tensor_row_type();
hid_t run_row_type();
hid_t profile_row_type();
hid_t memory_row_type();
hid_t graph_row_type();
hid_t shape_guess_row_type();
hid_t profile_instruction_row_type();

template <typename Row>
const RowLayout& row_layout();

// CRC-32C of a row: `meta_crc` (the CRC of its MetaRefs' bytes, in order) extended with its
// fields as `layout` lists them.
uint32_t row_checksum(const RowLayout& layout, const void* row, uint32_t meta_crc);

}  // namespace qd::schema
