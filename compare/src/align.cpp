#include "qnn_debug/compare/align.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "qnn_debug/naming/naming.h"

namespace qd::compare {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

using naming::qnn_sanitize;

std::string_view side_word(Side side) { return side == Side::kReference ? "reference" : "device"; }
Side other(Side side) { return side == Side::kReference ? Side::kDevice : Side::kReference; }

// "{3,4,5}", at most 12 handles spelled out.
std::string format_handles(const std::vector<int64_t>& handles) {
  constexpr size_t kShown = 12;
  std::string text = "{";
  for (size_t i = 0; i < handles.size() && i < kShown; ++i) {
    if (i > 0) text += ",";
    text += std::to_string(handles[i]);
  }
  if (handles.size() > kShown) text += ",... (" + std::to_string(handles.size()) + " in all)";
  return text + "}";
}

// "h3-5", "h1,4,7-9": sorted handles, runs of three or more collapsed.
std::string handle_group_id(const std::vector<int64_t>& sorted) {
  std::string id = "h";
  size_t i = 0;
  while (i < sorted.size()) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (i > 0) id += ",";
    id += std::to_string(sorted[i]);
    if (j - i >= 2) {
      id += "-" + std::to_string(sorted[j]);
    } else if (j > i) {
      id += "," + std::to_string(sorted[j]);
    }
    i = j + 1;
  }
  return id;
}

// Disjoint sets over dense handle ids: path halving, union by size.
class DisjointSets {
 public:
  explicit DisjointSets(size_t n) : parent_(n), size_(n, 1) {
    std::iota(parent_.begin(), parent_.end(), 0u);
  }
  uint32_t find(uint32_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void unite(uint32_t a, uint32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
  }

 private:
  std::vector<uint32_t> parent_;
  std::vector<uint32_t> size_;
};

// One tensor of either run.
struct Node {
  const TensorEntry* tensor = nullptr;
  Side side = Side::kReference;
  int64_t key_handle = 0;        // greatest handle; meaningless without handles
  uint32_t handle_miss = kNone;  // index into handle_misses_: why its handles met nothing
  uint32_t partner = kNone;      // the node it was paired with (any pass)
  bool placed = false;           // member of a two-sided handle group or paired by name
};

std::vector<int64_t> sorted_unique(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

class Aligner {
 public:
  Aligner(const std::vector<const TensorEntry*>& ref, const std::vector<const TensorEntry*>& device,
          const NameMapping* mapping)
      : mapping_(mapping) {
    add_side(ref, Side::kReference);
    ref_count_ = nodes_.size();
    add_side(device, Side::kDevice);
  }

  Alignment run() {
    group_by_handles();
    match_names();
    describe_leftovers();
    finish();
    return std::move(result_);
  }

 private:
  void add_side(const std::vector<const TensorEntry*>& tensors, Side side) {
    std::vector<const TensorEntry*> sorted;
    sorted.reserve(tensors.size());
    for (const TensorEntry* tensor : tensors) {
      if (tensor != nullptr) sorted.push_back(tensor);
    }
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const TensorEntry* a, const TensorEntry* b) { return a->seq < b->seq; });
    nodes_.reserve(nodes_.size() + sorted.size());
    for (const TensorEntry* tensor : sorted) {
      Node& node = nodes_.emplace_back();
      node.tensor = tensor;
      node.side = side;
      if (!tensor->handles.empty()) {
        node.key_handle = *std::max_element(tensor->handles.begin(), tensor->handles.end());
      }
    }
  }

  const TensorEntry& t(uint32_t node) const { return *nodes_[node].tensor; }

  // ---- handle groups ----------------------------------------------------------------------

  void group_by_handles() {
    std::vector<int64_t> all;
    for (const Node& node : nodes_) {
      all.insert(all.end(), node.tensor->handles.begin(), node.tensor->handles.end());
    }
    all = sorted_unique(std::move(all));
    auto id_of = [&](int64_t handle) {
      return static_cast<uint32_t>(std::lower_bound(all.begin(), all.end(), handle) - all.begin());
    };
    DisjointSets sets(all.size());
    for (const Node& node : nodes_) {
      const auto& handles = node.tensor->handles;
      for (size_t i = 1; i < handles.size(); ++i) sets.unite(id_of(handles[0]), id_of(handles[i]));
    }

    struct Component {
      std::vector<uint32_t> members[2];  // by Side, capture order
      std::vector<int64_t> handles;
    };
    std::vector<uint32_t> component_of_root(all.size(), kNone);
    std::vector<Component> components;
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      const auto& handles = nodes_[n].tensor->handles;
      if (handles.empty()) continue;
      uint32_t& component = component_of_root[sets.find(id_of(handles[0]))];
      if (component == kNone) {
        component = static_cast<uint32_t>(components.size());
        components.emplace_back();
      }
      components[component].members[static_cast<int>(nodes_[n].side)].push_back(n);
    }
    for (uint32_t h = 0; h < all.size(); ++h) {
      components[component_of_root[sets.find(h)]].handles.push_back(all[h]);
    }

    for (Component& component : components) {
      const auto& ref_members = component.members[0];
      const auto& device_members = component.members[1];
      if (ref_members.empty() || device_members.empty()) {
        const Side present = ref_members.empty() ? Side::kDevice : Side::kReference;
        const auto why = static_cast<uint32_t>(handle_misses_.size());
        handle_misses_.push_back("no " + std::string(side_word(other(present))) +
                                 " tensor shares debug handles " +
                                 format_handles(component.handles));
        for (uint32_t n : component.members[static_cast<int>(present)]) nodes_[n].handle_miss = why;
        continue;
      }
      build_handle_group(ref_members, device_members, std::move(component.handles));
    }
  }

  // The tensors that claim each output of the last op on one side: the members whose key handle
  // is `key`, by effective output index, each list in capture order (see align.h).
  using Claims = std::map<int32_t, std::vector<uint32_t>>;
  Claims last_op_outputs(const std::vector<uint32_t>& members, int64_t key) const {
    std::vector<uint32_t> op;
    for (uint32_t n : members) {
      if (nodes_[n].key_handle == key) op.push_back(n);
    }
    const bool has_zero =
        std::any_of(op.begin(), op.end(), [&](uint32_t n) { return t(n).output_index == 0; });
    Claims outputs;
    for (uint32_t n : op) {
      const int32_t index = t(n).output_index;
      outputs[index == -1 && !has_zero ? 0 : index].push_back(n);
    }
    return outputs;
  }

  static std::vector<int64_t> key_handles(const std::vector<Node>& nodes,
                                          const std::vector<uint32_t>& members) {
    std::vector<int64_t> keys;
    keys.reserve(members.size());
    for (uint32_t n : members) keys.push_back(nodes[n].key_handle);
    return sorted_unique(std::move(keys));
  }

  // The comparison point of a group: the greatest key handle found on both sides, else each
  // side's greatest. Returns {reference key, device key}.
  std::pair<int64_t, int64_t> comparison_keys(const std::vector<uint32_t>& ref_members,
                                              const std::vector<uint32_t>& device_members) const {
    const std::vector<int64_t> ref_keys = key_handles(nodes_, ref_members);
    const std::vector<int64_t> device_keys = key_handles(nodes_, device_members);
    auto r = ref_keys.rbegin();
    auto d = device_keys.rbegin();
    while (r != ref_keys.rend() && d != device_keys.rend() && *r != *d) {
      if (*r > *d) {
        ++r;
      } else {
        ++d;
      }
    }
    if (r != ref_keys.rend() && d != device_keys.rend()) return {*r, *r};
    return {ref_keys.back(), device_keys.back()};
  }

  void build_handle_group(const std::vector<uint32_t>& ref_members,
                          const std::vector<uint32_t>& device_members,
                          std::vector<int64_t> handles) {
    Group group;
    group.id = handle_group_id(handles);
    group.handles = std::move(handles);
    for (uint32_t n : ref_members) {
      group.ref_members.push_back(nodes_[n].tensor);
      nodes_[n].placed = true;
    }
    for (uint32_t n : device_members) {
      group.device_members.push_back(nodes_[n].tensor);
      nodes_[n].placed = true;
    }
    const auto [ref_key, device_key] = comparison_keys(ref_members, device_members);
    const Claims ref_outputs = last_op_outputs(ref_members, ref_key);
    const Claims device_outputs = last_op_outputs(device_members, device_key);
    for (const auto& [index, refs] : ref_outputs) {
      auto found = device_outputs.find(index);
      if (found != device_outputs.end()) pair_claimants(group, index, refs, found->second);
    }
    report_missing_outputs(group, ref_outputs, device_outputs, Side::kReference);
    report_missing_outputs(group, device_outputs, ref_outputs, Side::kDevice);
    result_.groups.push_back(std::move(group));
  }

  void pair_nodes(Group& group, int32_t index, uint32_t r, uint32_t d) {
    group.pairs.push_back({nodes_[r].tensor, nodes_[d].tensor, index, MatchKind::kDebugHandles});
    nodes_[r].partner = d;
    nodes_[d].partner = r;
  }

  // One output index that both sides have. A single tensor on each side is a pair. When several
  // tensors of a side claim the index, the claim is ambiguous: tensors of the same name are
  // paired (each at most once); if no name agrees, the tensors captured last are. Every other
  // claimant is listed as unmatched, ambiguous, with what was compared instead.
  void pair_claimants(Group& group, int32_t index, const std::vector<uint32_t>& refs,
                      const std::vector<uint32_t>& devs) {
    const size_t first_pair = group.pairs.size();
    const bool ambiguous = refs.size() > 1 || devs.size() > 1;
    if (ambiguous) {
      for (uint32_t r : refs) {
        for (uint32_t d : devs) {
          if (nodes_[d].partner == kNone && t(r).name == t(d).name) {
            pair_nodes(group, index, r, d);
            break;
          }
        }
      }
    }
    const bool by_name = group.pairs.size() > first_pair;
    if (!by_name) pair_nodes(group, index, refs.back(), devs.back());
    if (!ambiguous) return;
    std::string compared;
    for (size_t p = first_pair; p < group.pairs.size(); ++p) {
      compared += (p > first_pair ? ", " : "") + quote_name(group.pairs[p].ref->name) + " with " +
                  quote_name(group.pairs[p].device->name);
    }
    compared += by_name ? " (same name)" : " (the tensors captured last; no names agree)";
    for (Side side : {Side::kReference, Side::kDevice}) {
      const std::vector<uint32_t>& mine = side == Side::kReference ? refs : devs;
      for (uint32_t n : mine) {
        if (nodes_[n].partner != kNone) continue;
        unmatched_.push_back(
            {side, nodes_[n].tensor,
             "ambiguous: " + std::to_string(mine.size()) + " " + std::string(side_word(side)) +
                 " tensors claim " + output_words(index) + " of the last op of group " + group.id +
                 " (handles " + format_handles(t(n).handles) + "); compared " + compared,
             /*ambiguous=*/true});
      }
    }
  }

  static std::string output_words(int32_t index) {
    return index >= 0 ? "output " + std::to_string(index)
                      : std::string("an output with unknown index");
  }

  void report_missing_outputs(const Group& group, const Claims& mine, const Claims& theirs,
                              Side side) {
    for (const auto& [index, claimants] : mine) {
      if (theirs.count(index) != 0) continue;
      std::string present;
      for (const auto& entry : theirs) {
        present += (present.empty() ? "" : ",") + std::to_string(entry.first);
      }
      for (uint32_t n : claimants) {
        unmatched_.push_back({side, nodes_[n].tensor,
                              output_words(index) + " of the last op of group " + group.id +
                                  " has no " + std::string(side_word(other(side))) +
                                  " counterpart (the " + std::string(side_word(other(side))) +
                                  " side has outputs {" + present + "})"});
      }
    }
  }

  // ---- name fallbacks ---------------------------------------------------------------------

  // Free device nodes by key, each list in capture order (linked through next_), split by whether
  // they carry handles, since a reference tensor with handles may only meet a device tensor
  // without.
  struct Queue {
    uint32_t head = kNone;
    uint32_t tail = kNone;
  };
  using Pool = std::unordered_map<std::string_view, Queue>;

  void push(Pool& pool, std::string_view key, uint32_t n) {
    Queue& queue = pool[key];
    next_[n] = kNone;
    if (queue.head == kNone) {
      queue.head = n;
    } else {
      next_[queue.tail] = n;
    }
    queue.tail = n;
  }

  // One fallback pass. A key function gives a node's key (a view of its name or of key_storage_)
  // or nullopt when the node takes no part.
  template <typename RefKey, typename DeviceKey>
  void name_pass(MatchKind how, RefKey ref_key, DeviceKey device_key) {
    bool any_ref = false;
    for (size_t r = 0; r < ref_count_ && !any_ref; ++r) any_ref = !nodes_[r].placed;
    if (!any_ref) return;
    Pool pools[2];  // [0] without handles, [1] with handles
    pools[0].reserve(nodes_.size() - ref_count_);
    for (uint32_t n = static_cast<uint32_t>(ref_count_); n < nodes_.size(); ++n) {
      if (nodes_[n].placed) continue;
      if (std::optional<std::string_view> key = device_key(n)) {
        push(pools[t(n).handles.empty() ? 0 : 1], *key, n);
      }
    }
    if (pools[0].empty() && pools[1].empty()) return;
    for (uint32_t r = 0; r < ref_count_; ++r) {
      if (nodes_[r].placed) continue;
      std::optional<std::string_view> key = ref_key(r);
      if (!key) continue;
      Queue* best = nullptr;
      for (int p = 0; p < (t(r).handles.empty() ? 2 : 1); ++p) {
        auto it = pools[p].find(*key);
        if (it == pools[p].end() || it->second.head == kNone) continue;
        if (best == nullptr || t(it->second.head).seq < t(best->head).seq) best = &it->second;
      }
      if (best == nullptr) continue;
      const uint32_t d = best->head;
      best->head = next_[d];
      pair_by_name(r, d, how);
    }
  }

  void pair_by_name(uint32_t r, uint32_t d, MatchKind how) {
    nodes_[r].placed = nodes_[d].placed = true;
    nodes_[r].partner = d;
    nodes_[d].partner = r;
    Group group;
    group.id = "name:" + t(r).name;
    std::vector<int64_t> handles = t(r).handles;
    handles.insert(handles.end(), t(d).handles.begin(), t(d).handles.end());
    group.handles = sorted_unique(std::move(handles));
    group.ref_members = {nodes_[r].tensor};
    group.device_members = {nodes_[d].tensor};
    const int32_t index = t(r).output_index >= 0 ? t(r).output_index : t(d).output_index;
    group.pairs.push_back({nodes_[r].tensor, nodes_[d].tensor, index, how});
    result_.groups.push_back(std::move(group));
  }

  // "aten_relu_default@0" for "aten.relu.default@0", "aten.relu.default:0" or "aten.relu.default"
  // with output index 0 or unknown.
  std::string suffix_key(uint32_t n) const {
    const std::string_view name = t(n).name;
    if (auto split = naming::split_output_suffix(name)) {
      return qnn_sanitize(split->stem) + "@" + std::to_string(split->index);
    }
    return qnn_sanitize(name) + "@" + std::to_string(std::max(t(n).output_index, 0));
  }

  // "aten_add_tensor@0" for "output_aten_add_tensor@0": the op's own name and output index of a
  // device name that has an "@<k>" suffix.
  std::optional<std::string_view> node_key(uint32_t n) {
    const std::string_view name = t(n).name;
    if (!naming::split_output_suffix(name, "@")) return std::nullopt;
    const naming::ParsedName parsed = node_parser().parse(name);
    key_storage_[n] = qnn_sanitize(parsed.node) + "@" + std::to_string(parsed.output_index);
    return std::optional<std::string_view>(key_storage_[n]);
  }

  static const naming::NameParser& node_parser() {
    static const naming::NameParser parser =
        naming::NameParser::create("executorch-qnn", "", "").value();
    return parser;
  }

  void match_names() {
    next_.assign(nodes_.size(), kNone);
    key_storage_.resize(nodes_.size());
    auto exact = [&](uint32_t n) { return std::optional<std::string_view>(t(n).name); };
    auto sanitized = [&](uint32_t n) {
      key_storage_[n] = qnn_sanitize(t(n).name);
      return std::optional<std::string_view>(key_storage_[n]);
    };
    auto suffixed = [&](uint32_t n) {
      key_storage_[n] = suffix_key(n);
      return std::optional<std::string_view>(key_storage_[n]);
    };
    name_pass(MatchKind::kExactName, exact, exact);
    name_pass(MatchKind::kSanitizedName, sanitized, sanitized);
    name_pass(MatchKind::kSanitizedName, suffixed, suffixed);
    name_pass(MatchKind::kNodeName, suffixed, [&](uint32_t n) { return node_key(n); });
    if (mapping_ != nullptr) {
      for (const auto& [from, to] : mapping_->ref_to_device) mapped_.emplace(from, to);
      auto mapped = [&](uint32_t n) -> std::optional<std::string_view> {
        auto it = mapped_.find(t(n).name);
        if (it == mapped_.end()) return std::nullopt;
        return it->second;
      };
      name_pass(MatchKind::kMappingFile, mapped, exact);
    }
    key_storage_ = {};
  }

  // ---- reasons for what is left -----------------------------------------------------------

  // Why `found`, a tensor of the other side with a matching name, was not paired with `n`.
  std::string state_of(uint32_t n, uint32_t found) const {
    if (!t(n).handles.empty() && !t(found).handles.empty()) {
      return "carries other debug handles " + format_handles(t(found).handles);
    }
    if (nodes_[found].partner != kNone) {
      return "is already paired with " + quote_name(t(nodes_[found].partner).name);
    }
    return "is a member of a debug-handle group";
  }

  void describe_leftovers() {
    bool any = false;
    for (const Node& node : nodes_) any = any || !node.placed;
    if (!any) return;
    // First tensor of each side by exact and by sanitized name, for the explanations.
    std::unordered_map<std::string_view, uint32_t> by_name[2];
    std::unordered_map<std::string, uint32_t> by_sanitized[2];
    std::unordered_map<std::string_view, std::string_view> mapped_from;  // device -> first ref
    for (int side = 0; side < 2; ++side) {
      const size_t count = side == 0 ? ref_count_ : nodes_.size() - ref_count_;
      by_name[side].reserve(count);
      by_sanitized[side].reserve(count);
    }
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      const int side = static_cast<int>(nodes_[n].side);
      by_name[side].emplace(t(n).name, n);
      by_sanitized[side].emplace(qnn_sanitize(t(n).name), n);
    }
    if (mapping_ != nullptr) {
      for (const auto& [from, to] : mapping_->ref_to_device) mapped_from.emplace(to, from);
    }

    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      if (node.placed) continue;
      const int there = static_cast<int>(other(node.side));
      const std::string there_word(side_word(other(node.side)));
      std::string reason =
          node.tensor->handles.empty() ? "no debug handles" : handle_misses_[node.handle_miss];

      if (auto it = by_name[there].find(t(n).name); it != by_name[there].end()) {
        reason += "; the " + there_word + " tensor of the same name " + state_of(n, it->second);
      } else if (auto s = by_sanitized[there].find(qnn_sanitize(t(n).name));
                 s != by_sanitized[there].end()) {
        reason += "; the " + there_word + " tensor " + quote_name(t(s->second).name) +
                  " (same sanitized name) " + state_of(n, s->second);
      } else {
        reason += "; no " + there_word + " tensor named " + quote_name(t(n).name) +
                  ", not even after sanitizing";
      }

      if (mapping_ != nullptr) {
        const bool is_ref = node.side == Side::kReference;
        const auto& lookup = is_ref ? mapped_ : mapped_from;
        auto entry = lookup.find(t(n).name);
        if (entry == lookup.end()) {
          reason += is_ref ? "; the mapping file has no entry for it"
                           : "; no mapping file entry maps to it";
        } else {
          reason += is_ref ? "; the mapping file maps it to " + quote_name(entry->second)
                           : "; the mapping file maps " + quote_name(entry->second) + " to it";
          if (auto m = by_name[there].find(entry->second); m == by_name[there].end()) {
            reason += ", which is not in the " + there_word + " run";
          } else {
            reason += ", which " + state_of(n, m->second);
          }
        }
      }
      unmatched_.push_back({node.side, node.tensor, std::move(reason)});
    }
  }

  // ---- order ------------------------------------------------------------------------------

  void finish() {
    auto last_ref_seq = [](const Group& group) {
      uint64_t seq = 0;
      for (const TensorEntry* tensor : group.ref_members) seq = std::max(seq, tensor->seq);
      return seq;
    };
    std::vector<std::pair<uint64_t, size_t>> order;
    order.reserve(result_.groups.size());
    for (size_t i = 0; i < result_.groups.size(); ++i) {
      order.emplace_back(last_ref_seq(result_.groups[i]), i);
    }
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return result_.groups[a.second].id < result_.groups[b.second].id;
    });
    std::vector<Group> groups;
    groups.reserve(order.size());
    std::unordered_map<std::string, int> seen;
    for (const auto& entry : order) {
      Group& group = result_.groups[entry.second];
      const int count = ++seen[group.id];
      if (count > 1) group.id += "#" + std::to_string(count);
      groups.push_back(std::move(group));
    }
    result_.groups = std::move(groups);

    std::stable_sort(unmatched_.begin(), unmatched_.end(), [](const auto& a, const auto& b) {
      if (a.side != b.side) return a.side == Side::kReference;
      return a.tensor->seq < b.tensor->seq;
    });
    result_.unmatched = std::move(unmatched_);
  }

  const NameMapping* mapping_;
  std::unordered_map<std::string_view, std::string_view> mapped_;  // ref name -> device name
  std::vector<Node> nodes_;  // reference nodes [0, ref_count_), then device nodes
  std::vector<std::string> handle_misses_;
  std::vector<uint32_t> next_;            // name passes: next node of the same key
  std::vector<std::string> key_storage_;  // name passes: derived keys
  size_t ref_count_ = 0;
  std::vector<Unmatched> unmatched_;
  Alignment result_;
};

}  // namespace

Alignment align(const std::vector<const TensorEntry*>& ref,
                const std::vector<const TensorEntry*>& device, const NameMapping* mapping) {
  return Aligner(ref, device, mapping).run();
}

Alignment align(const std::vector<TensorEntry>& ref, const std::vector<TensorEntry>& device,
                const NameMapping* mapping) {
  const auto pointers = [](const std::vector<TensorEntry>& tensors) {
    std::vector<const TensorEntry*> out;
    out.reserve(tensors.size());
    for (const TensorEntry& tensor : tensors) out.push_back(&tensor);
    return out;
  };
  return align(pointers(ref), pointers(device), mapping);
}

namespace {

// Reads a name mapping as the parser meets it, so the file's order is kept and a repeated
// reference name is seen (a parsed object keeps only one of them). Every problem is noted and
// parsing goes on: a syntax error anywhere is reported before what the values say.
class MappingReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return scalar("null"); }
  bool boolean(bool /*value*/) override { return scalar("boolean"); }
  bool number_integer(number_integer_t /*value*/) override { return scalar("number"); }
  bool number_unsigned(number_unsigned_t /*value*/) override { return scalar("number"); }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override {
    return scalar("number");
  }
  bool binary(binary_t& /*value*/) override { return scalar("binary"); }
  bool string(string_t& value) override {
    if (depth_ == 1) mapping_.ref_to_device.emplace_back(std::move(key_), std::move(value));
    return scalar("string");
  }
  bool start_object(std::size_t /*size*/) override { return open("object"); }
  bool start_array(std::size_t /*size*/) override { return open("array"); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    if (depth_ == 1) {
      if (!keys_.insert(name).second && duplicate_.empty()) duplicate_ = name;
      key_ = std::move(name);
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::json::exception& failure) override {
    syntax_error_ = failure.what();
    return false;
  }

  // The mapping, or what is wrong with the file (`label` names it).
  Result<NameMapping> result(const std::string& label) && {
    if (!syntax_error_.empty()) {
      return error(ErrorCode::kCorrupt, label + ": not valid JSON: " + syntax_error_);
    }
    if (!duplicate_.empty()) {
      return error(ErrorCode::kCorrupt,
                   label + ": duplicate reference name " + quote_name(duplicate_));
    }
    if (top_type_ != "object") {
      return error(ErrorCode::kCorrupt,
                   label +
                       ": expected a JSON object {\"reference name\": \"device name\", ...}, got " +
                       top_type_);
    }
    if (!bad_key_.empty()) {
      return error(ErrorCode::kCorrupt, label + ": the value for " + quote_name(bad_key_) +
                                            " must be a device tensor name (a string), got " +
                                            bad_type_);
    }
    return std::move(mapping_);
  }

 private:
  // A value of type `type` begins at the current depth.
  void note(const char* type) {
    if (depth_ == 0) top_type_ = type;
    if (depth_ == 1 && std::string_view(type) != "string" && bad_key_.empty()) {
      bad_key_ = key_;
      bad_type_ = type;
    }
  }
  bool scalar(const char* type) {
    note(type);
    return true;
  }
  bool open(const char* type) {
    note(type);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  NameMapping mapping_;
  std::unordered_set<std::string> keys_;
  std::string key_;  // the reference name whose value comes next
  int depth_ = 0;
  std::string top_type_, duplicate_, bad_key_, bad_type_, syntax_error_;
};

}  // namespace

Result<NameMapping> parse_name_mapping(std::string_view text, const std::string& source) {
  QD_RETURN_IF_ERROR(check_json_depth(text, source));
  MappingReader reader;
  jsonio::sax_parse<nlohmann::json_sax<nlohmann::json>>(text, reader);
  return std::move(reader).result(source);
}

}  // namespace qd::compare
