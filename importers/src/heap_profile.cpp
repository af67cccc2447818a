#include "heap_profile.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <utility>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/text.h"

namespace qd::importers {
namespace {

// The unit ExecuTorch's QNN profiler appends to an identifier measured in bytes, and the separator
// it writes before the value (docs/formats.md, "HTP heap profile").
constexpr std::string_view kBytesSuffix = " (bytes)";
constexpr std::string_view kSeparator = ", ";
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
constexpr size_t kQuotedLine = 80;  // a bad line is quoted up to this many characters

// The line is data: quoted with control and non-ASCII bytes as \xNN, so a hostile file cannot
// move the terminal's cursor or flood its line.
Status bad_line(const std::string& source, size_t number, std::string_view line,
                std::string_view why) {
  return error(ErrorCode::kCorrupt, source + ": line " + std::to_string(number) + ": " +
                                        std::string(why) + ": \"" +
                                        escape_text(line, kQuotedLine, "\"\\") + "\"");
}

// A whole non-negative decimal that fits 64 bits: digits only, no sign, no blanks.
bool parse_bytes(std::string_view digits, uint64_t& value) {
  if (digits.empty()) return false;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace

Result<std::vector<MemoryCheckpoint>> parse_heap_profile(std::string_view text,
                                                         const std::string& source) {
  if (text.find('\0') != std::string_view::npos) {
    return error(ErrorCode::kCorrupt, source + ": not a heap profile (binary data)");
  }
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());  // an editor's BOM
  std::vector<MemoryCheckpoint> out;
  size_t number = 0;
  for (size_t from = 0; from < text.size();) {
    const size_t end = std::min(text.find('\n', from), text.size());
    std::string_view line = text.substr(from, end - from);
    from = end + 1;
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    // The identifier may hold ", " itself: the value follows the last one.
    const size_t comma = line.rfind(kSeparator);
    if (comma == std::string_view::npos || !line.substr(0, comma).ends_with(kBytesSuffix)) {
      return bad_line(source, number, line, "expected \"<identifier> (bytes), <value>\"");
    }
    MemoryCheckpoint checkpoint;
    checkpoint.run_id = kNoRun;
    checkpoint.label = std::string(line.substr(0, comma - kBytesSuffix.size()));
    if (checkpoint.label.empty()) return bad_line(source, number, line, "no identifier");
    if (!parse_bytes(line.substr(comma + kSeparator.size()), checkpoint.bytes)) {
      return bad_line(source, number, line, "the value is not a whole number of bytes below 2^64");
    }
    out.push_back(std::move(checkpoint));
  }
  if (out.empty()) {
    return error(ErrorCode::kCorrupt, source + ": a heap profile with no checkpoint");
  }
  return out;
}

Result<std::vector<MemoryCheckpoint>> read_heap_profile(const std::string& path) {
  QD_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(path, "heap profile", "a heap profile", kMaxHeapProfileBytes));
  return parse_heap_profile(text, "heap profile " + quote_name(path));
}

}  // namespace qd::importers
