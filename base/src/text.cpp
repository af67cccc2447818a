#include "qnn_debug/base/text.h"

namespace qd {

std::string quote_name(std::string_view name, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string quoted = "'";
  for (unsigned char c : name) {
    if (quoted.size() > max_chars) {
      quoted += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') {
      quoted.push_back(static_cast<char>(c));
    } else {
      quoted += "\\x";
      quoted.push_back(kHex[c >> 4]);
      quoted.push_back(kHex[c & 0xF]);
    }
  }
  return quoted + "'";
}

}  // namespace qd
