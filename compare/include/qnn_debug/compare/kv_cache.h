// KV-cache tensors of a decoder (docs/metrics.md, "KV cache"): recognised by name, measured per
// cache position, so a report can say which positions of the cache differ at each decode step.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace qd::compare {

// A name that says key/value cache: "k_cache", "v_cache", "kv_cache", "key_cache",
// "value_cache", "cache_k", "cache_v", "past_key", "past_value", "present_key",
// "present_value", in any case and anywhere in the name ("layers.1.attn.k_cache",
// "past_key_values.0.key").
bool is_kv_cache(std::string_view tensor_name);

// The axis of a cache's positions: its longest axis after the batch axis (the first, when the
// tensor has three or more), the earlier one of equal lengths. Caches are laid out [B, H, S, D],
// [B, S, H, D] or, for keys, [B, H, D, S]; the sequence is the longest axis once the cache
// holds more positions than a head has dimensions. nullopt below two dimensions.
std::optional<uint32_t> kv_position_axis(const std::vector<uint64_t>& dims);

// The head axis of a cache laid out [B, H, S, D] or [B, S, H, D] (rank 4, the position axis 1 or
// 2): the other of axes 1 and 2, so each head's positions are tracked apart. With grouped-query
// attention the cache has its own, fewer, KV heads: its shape says how many. nullopt for other
// shapes (a key cache stored [B, H, D, S] is tracked by position only: its heads are not next to
// its positions) and for a single head.
std::optional<uint32_t> kv_head_axis(const std::vector<uint64_t>& dims);

// The [first, last] runs of the indices 0 .. n - 1 where `holds(i)`: how differing positions and
// heads are written.
template <class Holds>
std::vector<std::pair<uint64_t, uint64_t>> ranges_where(uint64_t n, Holds holds) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t i = 0; i < n; ++i) {
    if (!holds(i)) continue;
    if (!out.empty() && out.back().second + 1 == i) {
      out.back().second = i;
    } else {
      out.emplace_back(i, i);
    }
  }
  return out;
}

}  // namespace qd::compare
