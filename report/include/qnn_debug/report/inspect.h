// `qnn-debug inspect`: a store's content for people (text) and machines (JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "qnn_debug/store_reader.h"

namespace qd::report {

struct InspectOptions {
  std::optional<uint32_t> run;  // only this run's tensors and events
  // 0: all; else at most this many tensor lines per run, and profile event lines (text only)
  size_t max_tensors = 0;
};

std::string inspect_text(const StoreReader& store, const InspectOptions& options);
// Schema: docs/reports.md, "inspect".
std::string inspect_json(const StoreReader& store, const InspectOptions& options);

// A name or label made safe for a terminal line: control bytes become \xNN, the rest is kept.
std::string printable(std::string_view text);

}  // namespace qd::report
