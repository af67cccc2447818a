// Alignment: which reference tensor is compared with which device tensor (docs/metrics.md).
//
// Tensors are grouped by debug handles: the groups are the connected components of the graph
// whose nodes are the tensors of BOTH runs and where two tensors are linked when they share a
// handle. A fused device tensor with handles {3,4,5} therefore meets reference tensors 3, 4 and 5
// in one group. Within a group the outputs of the group's last op are compared, every output
// index of it. Tensors that reach no two-sided group fall back to names: exact name, then
// sanitized name, then an explicit mapping file. Every pair records how it was matched; every
// tensor that ends up compared with nothing is listed with the reason.
#pragma once

#include "qnn_debug/base/vocabulary.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"

namespace qd::compare {

enum class MatchKind : uint8_t {
  kDebugHandles,
  kExactName,
  kSanitizedName,
  kNodeName,
  kMappingFile
};

inline constexpr auto kMatchKinds = std::to_array<Term<MatchKind>>({
    {MatchKind::kDebugHandles, "debug_handles", "both sides name the same debug handles"},
    {MatchKind::kExactName, "exact_name", "the same tensor name"},
    {MatchKind::kSanitizedName, "sanitized_name", "the same name once QNN's sanitizing is applied"},
    {MatchKind::kNodeName, "node_name", "the same graph node name"},
    {MatchKind::kMappingFile, "mapping_file", "the --map file pairs them"},
});
static_assert(in_declaration_order(kMatchKinds));
constexpr std::string_view match_kind_name(MatchKind kind) { return term_name(kMatchKinds, kind); }

// Explicit reference-name -> device-name pairs, in file order.
struct NameMapping {
  std::vector<std::pair<std::string, std::string>> ref_to_device;
};

// Parses a JSON object {"ref name": "device name", ...}: the text of a `--map` file, which the
// pipeline reads (pipeline/settings.h). Every value must be a string and no reference name may
// appear twice. Errors (kCorrupt: not JSON, wrong shape, duplicate key) begin with `source`.
Result<NameMapping> parse_name_mapping(std::string_view text, const std::string& source);

struct ComparedPair {
  const TensorEntry* ref = nullptr;
  const TensorEntry* device = nullptr;
  // Which output of the group's last op. Handle groups: the output index both sides agree on,
  // where an unknown index (-1) counts as output 0 when its op has no tensor that says 0. Name
  // matches: the reference's index if known, else the device's (-1 when neither knows).
  int32_t output_index = -1;
  MatchKind how = MatchKind::kDebugHandles;
};

struct Group {
  // Stable and unique within one Alignment: "h" + the sorted handles with runs collapsed
  // ("h3-5", "h1,4,7-9") for handle groups, "name:" + the reference name for name matches
  // ("#2", "#3", ... appended when an id would repeat).
  std::string id;
  std::vector<int64_t> handles;  // union of the members' handles, sorted, each once
  // Every tensor of the group, in capture order (seq). For name matches: the two matched tensors.
  std::vector<const TensorEntry*> ref_members, device_members;
  // One per output index of the group's last op present on both sides, by output_index; more
  // than one for an index that several tensors of each side claim under the same names.
  std::vector<ComparedPair> pairs;
};

enum class Side : uint8_t { kReference, kDevice };

struct Unmatched {
  Side side = Side::kReference;
  const TensorEntry* tensor = nullptr;
  std::string reason;  // one line, names quoted with qd::quote_name
  // Several tensors of its side claimed the output it claims, and another one was compared.
  bool ambiguous = false;
  // A graph output of its run (produced by a node of the stored graph, consumed by none); set by
  // compare_runs, which knows the graph.
  bool graph_output = false;
};

struct Alignment {
  // Ordered by the greatest reference seq among ref_members (the reference capture order of the
  // group's last captured reference tensor), then by id.
  std::vector<Group> groups;
  // Reference tensors first, then device tensors, each in capture order (seq).
  std::vector<Unmatched> unmatched;
};

// Aligns the tensors of one reference run with those of one device run. `mapping` may be null.
// Null pointers in the inputs are ignored. O(N log N) in the number of tensors plus handles.
//
// The last op of a handle group. Every member tensor has a "key handle": the greatest of its
// handles. ExecuTorch numbers debug handles in the topological order of the exported graph, on
// both sides, so the member with the greatest key handle is the one furthest down the graph, and
// the handle is a position both runs agree on while capture order (seq) is not (a device runtime
// may dump in any order). The group's comparison point h is the greatest key handle present on
// BOTH sides; when no key handle is shared, each side uses its own greatest key handle. On each
// side, the members whose key handle is h are the outputs of the last op (a multi-output op
// gives each output the same handles). Outputs are paired by output index. When one index is
// claimed by several tensors on a side (several members with key handle h and that output index),
// the claim is ambiguous: tensors of the same name on the two sides are paired; when no names
// agree, the ones captured last are. Every claimant left over is listed in `unmatched` with
// `ambiguous` set and a reason naming what was compared instead. An output present on only one
// side is listed in `unmatched` (it also stays among the group's members).
//
// Name fallbacks apply to every tensor not placed in a two-sided handle group: tensors without
// handles, and tensors whose handles meet nothing on the other side (e.g. a device run whose
// names carry no handles). Two tensors that both carry handles are never paired by name: their
// handles already say they are different ops. Passes, each over what the previous left:
//   1. exact name;
//   2. sanitized name (naming::qnn_sanitize of both), then sanitized name with a trailing "@<k>" or
//      ":<k>" output suffix removed and the output index required to agree (a name without a
//      suffix counts as its output_index, or 0 when unknown): "aten.relu.default" meets
//      "aten_relu_default@0";
//   3. node name: a device name with an "@<k>" suffix and a graph input/output prefix meets the
//      reference named after its op alone, as the naming module's executorch-qnn rule reads it
//      ("output_aten_add_tensor@0" meets "aten_add_tensor"; the fx node name a PyTorch reference
//      is keyed by);
//   4. the mapping file: the reference name's entry gives the exact device name.
// When a name occurs several times on a side, the k-th occurrence (in capture order) on one side
// meets the k-th on the other.
Alignment align(const std::vector<const TensorEntry*>& ref,
                const std::vector<const TensorEntry*>& device, const NameMapping* mapping);
// The same over two runs' tensors as read (the Alignment points into them: keep them alive).
Alignment align(const std::vector<TensorEntry>& ref, const std::vector<TensorEntry>& device,
                const NameMapping* mapping);

}  // namespace qd::compare
