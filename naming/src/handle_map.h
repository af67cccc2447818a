// A tensor-name -> debug-handles table read from a small JSON file, for runtimes whose tensor
// names carry no handles themselves. Example file:
//   {"aten_relu_default": 3, "aten_add_tensor": [4, 5], "tokens": []}
// naming/ ships in the capture-only device build, which may not depend on a JSON library, so
// this reads exactly that shape with a strict
// hand-written parser and reports any other input with the file, line, column and byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::naming {

// Appends debug handles to a list in first-seen order, skipping duplicates. Short lists are
// scanned; past a few dozen entries a hash set takes over so hostile inputs stay linear.
// May throw std::bad_alloc: for use inside code that turns that into a Status.
class UniqueHandleAppender {
 public:
  explicit UniqueHandleAppender(std::vector<int64_t>& handles);
  void add(int64_t handle);

 private:
  static constexpr size_t kLinearScanLimit = 32;
  std::vector<int64_t>& handles_;
  std::unordered_set<int64_t> seen_;  // filled once handles_ outgrows kLinearScanLimit
};

class HandleMap {
 public:
  // A handle map is a few kilobytes per thousand tensors; anything this large is not one.
  static constexpr size_t kMaxFileBytes = size_t{256} << 20;

  // Errors: kInvalidArgument (a path with a NUL byte), kNotFound (no such file), kIo (the file
  // cannot be read), kCorrupt (too large, not UTF-8, malformed JSON or the wrong shape),
  // kNoMemory.
  static Result<HandleMap> load(std::string_view path) noexcept;

  // Parses JSON text; `source_name` only labels error messages. Errors: kCorrupt, kNoMemory.
  static Result<HandleMap> parse(std::string_view json, std::string_view source_name) noexcept;

  // The same table keyed by qnn_sanitize(key). Keys that collide once sanitized (say "a.b" and
  // "a-b") are merged: their handles are joined in byte order of the original keys, deduplicated.
  Result<HandleMap> with_sanitized_keys() const noexcept;

  // The handles stored under exactly `name`, or nullptr. The list may be empty ("name": []).
  const std::vector<int64_t>* find(std::string_view name) const noexcept;

  size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }

  HandleMap() = default;

 private:
  using Entries = std::map<std::string, std::vector<int64_t>, std::less<>>;
  explicit HandleMap(Entries entries) noexcept : entries_(std::move(entries)) {}

  Entries entries_;
};

}  // namespace qd::naming
