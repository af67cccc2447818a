// `qnn-debug capture qnn-net-run`: the output folder of the QNN SDK's qnn-net-run into a store.
// docs/formats.md ("qnn-net-run output") describes the layouts read.
//
// Every `Result_<k>` folder (under `<graph>/` when the context holds several graphs) becomes a
// run, in graph then k order. Every `.raw` file in it becomes a tensor: `<name>_native.raw`
// holds the raw container bytes of a non-float tensor, `<name>.raw` float32 values (dequantized
// for quantized tensors). When both exist the native bytes are stored, with their encoding, so
// the comparison sees exactly what the device computed. Dims, dtype, layout and encoding come
// from the converter's net JSON; without one, a file is read as --shape says, or as float32 of
// one dimension when that is the only reading its size allows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

struct QnnNetRunImportOptions {
  std::string output_dir;                    // qnn-net-run's --output_dir
  std::string net_json;                      // the converter's <model>_net.json, "" for none
  std::string input_list;                    // qnn-net-run's --input_list: names the runs
  std::vector<std::string> encodings_paths;  // more encodings, merged after the net JSON
  // "NAME=D0,D1,...[:DTYPE]" for files the net JSON does not describe; DTYPE is a QNN data-type
  // name ("UFIXED_POINT_8"), FLOAT_32 when left out.
  std::vector<std::string> shapes;
  std::string naming = "qnn-sanitized";  // naming preset for the tensor names
  std::string handle_map_path;
  std::string heap_profile_path;  // an HTP heap profile to store, "" for none
  std::string output_path;
};

struct QnnNetRunImportSummary {
  uint32_t runs = 0;
  uint32_t graphs = 0;
  uint64_t tensors = 0;
  uint64_t tensor_bytes = 0;
  uint64_t native = 0;       // tensors stored from `_native.raw` container bytes
  uint64_t float_only = 0;   // quantized tensors whose only file held dequantized floats
  uint64_t undescribed = 0;  // files read as 1-D float32: the net JSON did not describe them
  uint64_t graph_nodes = 0;
  // Inputs read but partly ignored, and encoding problems (encoding_lint.h), one line each naming
  // the file and the entry: `capture` prints them, `diff` adds them to its report's warnings.
  std::vector<std::string> warnings;
};

// Errors (exit-code-2 material) name the file: a folder with no Result_<k>, a file whose size
// is not its dims times its dtype, a native file whose dtype nothing states, a bad --shape, a
// damaged net JSON or encodings file. Written atomically, like every capture.
Result<QnnNetRunImportSummary> import_qnn_net_run(const QnnNetRunImportOptions& options);

}  // namespace qd::importers
