// `qnn-debug inspect`: a store's content for people (text) and machines (JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store_reader.h"

namespace qd::report {

struct InspectOptions {
  std::optional<uint32_t> run;  // only this run's tensors and events
  // 0: all; else at most this many tensor lines per run, and profile event lines (text only)
  size_t max_tensors = 0;
};

// Errors: the store's tensor rows cannot be read (changed or damaged since it was opened).
Result<std::string> inspect_text(const StoreReader& store, const InspectOptions& options);
// Schema: docs/reports.md, "inspect".
Result<std::string> inspect_json(const StoreReader& store, const InspectOptions& options);

// `qnn-debug inspect FILE.json`: an encodings file's tensors and what the encoding lint
// (etdump/encoding_lint.h) finds in them, without a store. The CLI fills it from the importers'
// EncodingTable; the report does not depend on the importers.
struct EncodingEntry {
  TensorRecord tensor;  // name, dtype, dims, axis order and quantization as the file gives them
  bool dtype_stated = false;  // false: the file names no dtype (tensor.dtype is the lint's guess)
  std::string graph;          // context-binary graph, "" otherwise
  std::vector<std::string> notes;
};
struct EncodingsListing {
  std::string path;
  std::string format;  // "converter net JSON", "context-binary JSON", "plain encodings map"
  std::vector<EncodingEntry> tensors;
};
// `max_lines` tensor lines (0: all); every tensor counts in the summary line.
std::string encodings_text(const EncodingsListing& listing, size_t max_lines);
// Schema: docs/reports.md, "inspect" (encodings).
std::string encodings_json(const EncodingsListing& listing);

// A name or label made safe for a terminal line: control bytes become \xNN, the rest is kept.
std::string printable(std::string_view text);

}  // namespace qd::report
