// `qnn-debug capture npz`: arrays any framework saved with numpy (np.savez, np.savez_compressed,
// np.save) into a store. docs/formats.md ("npz and npy") describes what is read.
//
// Each file is a run, or several: when every key of an npz is "run<k>/<name>", each k is a run,
// in k order. An .npy file is a run of one tensor named after the file. Arrays are captured in
// archive order (the order the dict had when saved), which the comparator takes as the order
// of execution. Big-endian data is swapped; a Fortran-ordered array is stored as its memory
// holds it (reversed dims) with the axis order that gives the array back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

struct NpzImportOptions {
  std::vector<std::string> paths;  // .npz or .npy files, in run order
  // Quantization and layout for arrays named in them: an integer array becomes the fixed-point
  // tensor the encoding describes; a float array takes only the encoding's axis order.
  std::vector<std::string> encodings_paths;
  std::string naming = "debug-id";  // the preset that finds handles and output indices in keys
  std::string handle_map_path;
  std::string heap_profile_path;  // an HTP heap profile to store, "" for none
  std::string output_path;
};

struct NpzImportSummary {
  uint32_t runs = 0;
  uint64_t tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t with_encoding = 0;  // integer arrays stored with an encoding's quantization
  uint64_t fortran_order = 0;  // arrays stored column-major, with their axis order
  // Inputs read but partly ignored, and encoding problems (encoding_lint.h), one line each naming
  // the file and the entry: `capture` prints them, `diff` adds them to its report's warnings.
  std::vector<std::string> warnings;
};

// Errors (exit-code-2 material) name the file and the array: a damaged archive or header, a
// dtype numpy has and a store does not (complex, strings, objects...), keys that mix
// "run<k>/" with plain names, an encoding that contradicts the array's dtype or shape.
// Written atomically, like every capture.
Result<NpzImportSummary> import_npz(const NpzImportOptions& options);

}  // namespace qd::importers
