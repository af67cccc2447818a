// Alignment (compare/include/qnn_debug/compare/align.h): which reference tensor meets which device
// tensor, from the names, debug handles and output indices a store holds, all untrusted. The
// input describes up to 12 tensors a side and a name mapping. Beyond crashes, checks what the
// alignment promises: every tensor is in a group or listed unmatched, in at most one group, and
// group ids are unique.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "qnn_debug/compare/align.h"

namespace {

using namespace qd;
using namespace qd::compare;

// Names from a small alphabet meet each other often; sometimes any bytes.
std::string pick_name(FuzzedDataProvider& in) {
  static const char* const kPieces[] = {"conv",        "relu", "@0", "@1",      ":0",
                                        "/",           ".",    "_",  "output_", "aten_add_tensor",
                                        "__debugID_3", "1"};
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(24);
  std::string name;
  const size_t pieces = in.ConsumeIntegralInRange<size_t>(0, 4);
  for (size_t i = 0; i < pieces; ++i) name += kPieces[in.ConsumeIntegralInRange<size_t>(0, 11)];
  return name;
}

std::vector<TensorEntry> pick_tensors(FuzzedDataProvider& in, uint64_t& seq) {
  std::vector<TensorEntry> tensors(in.ConsumeIntegralInRange<size_t>(0, 12));
  for (TensorEntry& t : tensors) {
    t.name = pick_name(in);
    t.seq = in.ConsumeBool() ? seq++ : in.ConsumeIntegralInRange<uint64_t>(0, 30);  // ties too
    t.output_index = in.ConsumeIntegralInRange<int32_t>(-1, 2);
    const size_t handles = in.ConsumeIntegralInRange<size_t>(0, 3);
    for (size_t h = 0; h < handles; ++h) {
      t.handles.push_back(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 8)
                                           : in.ConsumeIntegral<int64_t>());
    }
  }
  return tensors;
}

std::vector<const TensorEntry*> pointers(const std::vector<TensorEntry>& tensors) {
  std::vector<const TensorEntry*> out;
  for (const TensorEntry& t : tensors) out.push_back(&t);
  return out;
}

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "alignment broke its promise: %s\n", what.c_str());
  std::abort();
}

void check(const Alignment& alignment, size_t tensor_count) {
  std::map<const TensorEntry*, int> groups_of;
  std::set<std::string> ids;
  for (const Group& group : alignment.groups) {
    if (!ids.insert(group.id).second) broken("group id " + group.id + " repeats");
    std::set<const TensorEntry*> members(group.ref_members.begin(), group.ref_members.end());
    members.insert(group.device_members.begin(), group.device_members.end());
    for (const TensorEntry* t : members) ++groups_of[t];
  }
  std::set<const TensorEntry*> placed;
  for (const auto& [t, count] : groups_of) {
    if (count > 1) broken("tensor '" + t->name + "' is in " + std::to_string(count) + " groups");
    placed.insert(t);
  }
  for (const Unmatched& u : alignment.unmatched) placed.insert(u.tensor);
  if (placed.size() != tensor_count) {
    broken(std::to_string(tensor_count - placed.size()) +
           " tensors are neither grouped nor unmatched");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  uint64_t seq = 0;
  const std::vector<TensorEntry> ref = pick_tensors(in, seq);
  const std::vector<TensorEntry> device = pick_tensors(in, seq);
  NameMapping mapping;
  const size_t entries = in.ConsumeIntegralInRange<size_t>(0, 4);
  for (size_t i = 0; i < entries; ++i)
    mapping.ref_to_device.emplace_back(pick_name(in), pick_name(in));
  const Alignment alignment = align(pointers(ref), pointers(device), &mapping);
  check(alignment, ref.size() + device.size());
  return 0;
}
