#include "qnn_debug/compare/kv_cache.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace qd::compare {

bool is_kv_cache(std::string_view tensor_name) {
  static constexpr std::array<std::string_view, 11> kMarks = {
      "k_cache", "v_cache",  "kv_cache",   "key_cache",   "value_cache",  "cache_k",
      "cache_v", "past_key", "past_value", "present_key", "present_value"};
  std::string lower(tensor_name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::any_of(kMarks.begin(), kMarks.end(),
                     [&](std::string_view mark) { return lower.find(mark) != std::string::npos; });
}

std::optional<uint32_t> kv_position_axis(const std::vector<uint64_t>& dims) {
  if (dims.size() < 2) return std::nullopt;
  const size_t first = dims.size() >= 3 ? 1 : 0;
  size_t longest = first;
  for (size_t axis = first + 1; axis < dims.size(); ++axis) {
    if (dims[axis] > dims[longest]) longest = axis;
  }
  return static_cast<uint32_t>(longest);
}

std::optional<uint32_t> kv_head_axis(const std::vector<uint64_t>& dims) {
  const std::optional<uint32_t> positions = kv_position_axis(dims);
  if (dims.size() != 4 || !positions || (*positions != 1 && *positions != 2)) return std::nullopt;
  const uint32_t heads = *positions == 1 ? 2 : 1;
  if (dims[heads] < 2) return std::nullopt;
  return heads;
}

}  // namespace qd::compare
