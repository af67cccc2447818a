// Guards for JSON from files: nlohmann's parser, serializer and comparisons recurse once per
// nesting level, so a hostile file of 100,000 '[' would overflow the stack before any shape
// check could refuse it. Every JSON file qnn-debug reads (reports, policies, name mappings,
// encodings, ETRecord members) goes through check_json_depth or scan_json first. It lives in
// the lowest library, with no JSON dependency, so importers and the report library share it.
#pragma once

#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"

namespace qd {

// Real reports nest about a dozen levels, maps and encodings a handful.
inline constexpr int kMaxJsonDepth = 64;

// "line L, column C" (1-based, in bytes) of byte `offset` of `text`.
std::string line_and_column(std::string_view text, size_t offset);

// Walks `text` outside its strings: kCorrupt ("<label>: nested deeper than 64 levels at line L,
// column C") when arrays and objects nest deeper than `max_depth`, brackets inside strings not
// counting. `on_word(offset)` is called at the first byte of every bare word (numbers, true,
// false, null, and the NaN / Infinity that Python's json module writes) and returns the offset
// just past it. Linear.
template <typename OnWord>
Status scan_json(std::string_view text, const std::string& label, OnWord on_word,
                 int max_depth = kMaxJsonDepth) {
  const auto is_word_start = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '+' || c == '.';
  };
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return error(ErrorCode::kCorrupt, label + ": nested deeper than " +
                                              std::to_string(max_depth) + " levels at " +
                                              line_and_column(text, i));
      }
    } else if (c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
    } else if (is_word_start(c)) {
      i = on_word(i) - 1;
    }
  }
  return Status::ok();
}

// scan_json for the depth alone.
inline Status check_json_depth(std::string_view text, const std::string& label,
                               int max_depth = kMaxJsonDepth) {
  return scan_json(
      text, label, [&](size_t at) { return at + 1; }, max_depth);
}

}  // namespace qd
