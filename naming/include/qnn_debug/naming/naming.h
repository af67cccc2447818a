// Tensor-name parsing, the one home of these rules for the capture hook, the importers and the
// comparator: turns the name a runtime gives an output tensor into debug handles, an output index
// and a graph role, using RE2 so that hostile names cost linear time. The presets and their exact
// rules are documented in docs/naming.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/base/tensor.h"

namespace qd::naming {

// The store's role enum: a parsed name's role goes into the tensor row unchanged.
using qd::TensorRole;

struct ParsedName {
  // Debug handles in order of appearance, deduplicated; empty if none.
  std::vector<int64_t> handles;
  int32_t output_index = -1;  // -1 when the name carries none
  TensorRole role = TensorRole::kIntermediate;
  bool matched = false;  // false: the name matched nothing; it is kept and flagged, never dropped
  // The op's own name, a view into the parsed name: without the output suffix, and for
  // executorch-qnn without the graph input/output prefix ("output_aten_add_tensor@0" ->
  // "aten_add_tensor"). What a profiler's per-op events are named after.
  std::string_view node;
};

// QNN's sanitizing: every byte that is not [A-Za-z0-9_] becomes '_' (so each byte of a multi-byte
// UTF-8 sequence becomes its own '_'), and a leading digit gets a '_' prefix. Empty stays empty.
// Out of memory throws std::bad_alloc: an empty result would make different names equal.
std::string qnn_sanitize(std::string_view name);

// A trailing output index: the last byte of `marks` found before a run of decimal digits that
// ends the name, the digits fitting int32. "aten_add@1" -> {"aten_add", 1} (marks "@:");
// "conv:0" -> {"conv", 0}; "relu" or "x@99999999999" -> nullopt.
struct OutputSuffix {
  std::string_view stem;  // the name without the mark and the digits
  int32_t index = 0;
};
std::optional<OutputSuffix> split_output_suffix(std::string_view name,
                                                std::string_view marks = "@:") noexcept;

namespace detail {
struct ParserRules;  // compiled patterns and the handle map; defined in naming.cpp
}

class NameParser {
 public:
  // preset: "debug-id", "executorch-qnn", "qnn-sanitized", or "custom" (then custom_pattern is the
  // RE2 pattern; it must be empty for the other presets).
  // handle_map_path: "" for none, else a JSON file mapping tensor name -> handle or handle list.
  // Errors: kInvalidArgument (unknown preset, bad custom pattern), kNotFound / kIo / kCorrupt
  // (the handle map file is missing, unreadable or malformed), kNoMemory.
  static Result<NameParser> create(std::string_view preset, std::string_view custom_pattern,
                                   std::string_view handle_map_path) noexcept;

  // A name that yields nothing comes back with matched == false. Out of memory throws
  // std::bad_alloc: an unmatched name instead would silently lose the handles. Safe to call from
  // several threads at once on the same parser.
  ParsedName parse(std::string_view name) const;

  // The preset this parser was created with.
  std::string_view preset() const noexcept;

  // Copies share the immutable compiled state, so they are cheap.
  NameParser(const NameParser&) = default;
  NameParser& operator=(const NameParser&) = default;
  NameParser(NameParser&&) noexcept = default;
  NameParser& operator=(NameParser&&) noexcept = default;
  ~NameParser() = default;

 private:
  explicit NameParser(std::shared_ptr<const detail::ParserRules> rules) noexcept;

  std::shared_ptr<const detail::ParserRules> rules_;
};

}  // namespace qd::naming
