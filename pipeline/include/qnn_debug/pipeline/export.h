// `qnn-debug export npz`: a store back to numpy, for notebooks. docs/formats.md ("npz and npy")
// describes the file written; `qnn-debug capture npz` reads it back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::pipeline {

struct NpzExportOptions {
  std::string store_path;
  std::string output_path;
  // false: each tensor as stored (its dtype, its stored layout; fixed-point as storage integers).
  // true: float32 real values (dequantized) in the reference layout (stored axis order undone).
  bool dequantize = false;
  std::optional<uint32_t> run;  // one run by id; all when unset
};

struct NpzExportSummary {
  uint32_t runs = 0;
  uint64_t arrays = 0;
  uint64_t bytes = 0;  // array data written
  // Tensors numpy has no dtype for, written wider: 4-bit as int8/uint8, BFLOAT_16 as float32.
  uint64_t widened = 0;
  // Keys that could not be the tensor's name (a repeated name in a run, invalid UTF-8, a NUL):
  // "<name>#<seq>" or "tensor_<seq>" instead. Each as "old -> new", the first 10.
  uint64_t renamed = 0;
  std::vector<std::string> renamed_examples;
};

// Keys are the tensor names; with several runs "run<id>/<name>", the layout `capture npz` reads
// as runs. Every tensor's CRC-32C is checked while it is copied: a damaged tensor is an error
// (kCorrupt naming the store and the tensor) and no file is left at `output_path`.
Result<NpzExportSummary> export_npz(const NpzExportOptions& options);

}  // namespace qd::pipeline
