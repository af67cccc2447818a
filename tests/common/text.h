// Small text helpers the tests share.
#pragma once

#include <string>

namespace qd::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace qd::testing
