#include "qnn_debug/base/text.h"

#include <algorithm>

namespace qd {

std::string escape_text(std::string_view text, size_t max_chars, std::string_view also) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string escaped;
  for (unsigned char c : text) {
    if (escaped.size() >= max_chars) return escaped + "...";
    if (c >= 0x20 && c < 0x7F && also.find(static_cast<char>(c)) == std::string_view::npos) {
      escaped.push_back(static_cast<char>(c));
    } else {
      escaped += "\\x";
      escaped.push_back(kHex[c >> 4]);
      escaped.push_back(kHex[c & 0xF]);
    }
  }
  return escaped;
}

std::string quote_name(std::string_view name, size_t max_chars) {
  return "'" + escape_text(name, max_chars, "\\'") + "'";
}

std::string json_path_key(std::string_view key) {
  return "[\"" + escape_text(key, 120, "\"\\") + "\"]";
}

std::string json_path_field(std::string_view key) {
  const bool identifier = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
  return identifier ? "." + std::string(key) : json_path_key(key);
}

std::string json_path_index(size_t index) { return "[" + std::to_string(index) + "]"; }

}  // namespace qd
