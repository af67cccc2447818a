#include "qnn_debug/compare/align.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "../common/text.h"
#include "qnn_debug/pipeline/settings.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::compare {
namespace {

// The tensors of one run, built in memory; pointers stay valid as tensors are added.
class FakeRun {
 public:
  const TensorEntry* add(const std::string& name, std::vector<int64_t> handles = {},
                         int32_t output_index = -1, TensorRole role = TensorRole::kIntermediate) {
    TensorEntry& tensor = tensors_.emplace_back();
    tensor.name = name;
    tensor.handles = std::move(handles);
    tensor.output_index = output_index;
    tensor.role = role;
    tensor.dims = {1, 4};
    tensor.seq = next_seq_++;
    return &tensor;
  }
  std::vector<const TensorEntry*> all() const {
    std::vector<const TensorEntry*> out;
    for (const TensorEntry& tensor : tensors_) out.push_back(&tensor);
    return out;
  }

 private:
  std::deque<TensorEntry> tensors_;
  uint64_t next_seq_ = 0;
};

const Group* find_group(const Alignment& alignment, const std::string& id) {
  for (const Group& group : alignment.groups) {
    if (group.id == id) return &group;
  }
  return nullptr;
}

const Unmatched* find_unmatched(const Alignment& alignment, const TensorEntry* tensor) {
  for (const Unmatched& entry : alignment.unmatched) {
    if (entry.tensor == tensor) return &entry;
  }
  return nullptr;
}

using testing::contains;

// Everything an Alignment says, as text: equal text means equal alignments.
std::string dump(const Alignment& alignment) {
  std::string text;
  for (const Group& group : alignment.groups) {
    text += "group " + group.id + " h";
    for (int64_t h : group.handles) text += " " + std::to_string(h);
    text += " ref";
    for (const TensorEntry* t : group.ref_members) text += " " + t->name;
    text += " dev";
    for (const TensorEntry* t : group.device_members) text += " " + t->name;
    for (const ComparedPair& pair : group.pairs) {
      text += " [" + pair.ref->name + "|" + pair.device->name + "|" +
              std::to_string(pair.output_index) + "|" + std::string(match_kind_name(pair.how)) +
              "]";
    }
    text += "\n";
  }
  for (const Unmatched& entry : alignment.unmatched) {
    text += (entry.side == Side::kReference ? "ref " : "dev ") + entry.tensor->name + ": " +
            entry.reason + "\n";
  }
  return text;
}

TEST(MatchKind, Names) {
  EXPECT_EQ(match_kind_name(MatchKind::kDebugHandles), "debug_handles");
  EXPECT_EQ(match_kind_name(MatchKind::kExactName), "exact_name");
  EXPECT_EQ(match_kind_name(MatchKind::kSanitizedName), "sanitized_name");
  EXPECT_EQ(match_kind_name(MatchKind::kMappingFile), "mapping_file");
}

TEST(Align, FusedDeviceOpMeetsThreeReferenceOps) {
  FakeRun ref, dev;
  const auto* r_in = ref.add("conv0__debugID_1", {1});
  const auto* r3 = ref.add("conv__debugID_3", {3});
  const auto* r4 = ref.add("bn__debugID_4", {4});
  const auto* r5 = ref.add("relu__debugID_5", {5});
  const auto* d_in = dev.add("conv0__debugID_1", {1});
  const auto* fused = dev.add("conv_bn_relu__debugID_3_debugID_4_debugID_5", {3, 4, 5});

  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 2u) << dump(a);
  EXPECT_TRUE(a.unmatched.empty()) << dump(a);

  const Group& first = a.groups[0];
  EXPECT_EQ(first.id, "h1");
  ASSERT_EQ(first.pairs.size(), 1u);
  EXPECT_EQ(first.pairs[0].ref, r_in);
  EXPECT_EQ(first.pairs[0].device, d_in);

  const Group& group = a.groups[1];
  EXPECT_EQ(group.id, "h3-5");
  EXPECT_EQ(group.handles, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(group.ref_members, (std::vector<const TensorEntry*>{r3, r4, r5}));
  EXPECT_EQ(group.device_members, (std::vector<const TensorEntry*>{fused}));
  ASSERT_EQ(group.pairs.size(), 1u);
  EXPECT_EQ(group.pairs[0].ref, r5);  // the last op of the group: handle 5
  EXPECT_EQ(group.pairs[0].device, fused);
  EXPECT_EQ(group.pairs[0].output_index, 0);
  EXPECT_EQ(group.pairs[0].how, MatchKind::kDebugHandles);
}

TEST(Align, OverlapChainsIntoOneComponent) {
  FakeRun ref, dev;
  ref.add("a", {1});
  ref.add("b", {2});
  const auto* r3 = ref.add("c", {3});
  dev.add("ab", {1, 2});
  const auto* d23 = dev.add("bc", {3, 2});  // handles in appearance order, not sorted
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  EXPECT_EQ(a.groups[0].id, "h1-3");
  ASSERT_EQ(a.groups[0].pairs.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r3);
  EXPECT_EQ(a.groups[0].pairs[0].device, d23);
}

TEST(Align, GroupIdCollapsesRunsOfThree) {
  FakeRun ref, dev;
  for (int64_t h : {1, 3, 4, 7, 8, 9}) ref.add("r" + std::to_string(h), {h});
  dev.add("fused", {1, 3, 4, 7, 8, 9});
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  EXPECT_EQ(a.groups[0].id, "h1,3,4,7-9");
}

TEST(Align, MultiOutputOpPairsEveryOutputByIndex) {
  FakeRun ref, dev;
  ref.add("x__debugID_6", {6});
  const auto* r0 = ref.add("split__debugID_7@0", {7}, 0);
  const auto* r1 = ref.add("split__debugID_7@1", {7}, 1);
  dev.add("x__debugID_6", {6});
  const auto* d1 = dev.add("split__debugID_7@1", {7}, 1);  // the device dumps output 1 first
  const auto* d0 = dev.add("split__debugID_7@0", {7}, 0);

  const Alignment a = align(ref.all(), dev.all(), nullptr);
  const Group* group = find_group(a, "h7");
  ASSERT_NE(group, nullptr) << dump(a);
  ASSERT_EQ(group->pairs.size(), 2u);
  EXPECT_EQ(group->pairs[0].output_index, 0);
  EXPECT_EQ(group->pairs[0].ref, r0);
  EXPECT_EQ(group->pairs[0].device, d0);
  EXPECT_EQ(group->pairs[1].output_index, 1);
  EXPECT_EQ(group->pairs[1].ref, r1);
  EXPECT_EQ(group->pairs[1].device, d1);
  EXPECT_TRUE(a.unmatched.empty()) << dump(a);
}

TEST(Align, MultiOutputFusedWithEarlierOps) {
  FakeRun ref, dev;
  ref.add("conv", {2});
  const auto* r0 = ref.add("topk@0", {3}, 0);
  const auto* r1 = ref.add("topk@1", {3}, 1);
  const auto* d0 = dev.add("conv_topk@0", {2, 3}, 0);
  const auto* d1 = dev.add("conv_topk@1", {2, 3}, 1);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  ASSERT_EQ(a.groups[0].pairs.size(), 2u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r0);
  EXPECT_EQ(a.groups[0].pairs[0].device, d0);
  EXPECT_EQ(a.groups[0].pairs[1].ref, r1);
  EXPECT_EQ(a.groups[0].pairs[1].device, d1);
}

TEST(Align, OutputMissingOnOneSideIsListed) {
  FakeRun ref, dev;
  ref.add("s@0", {7}, 0);
  ref.add("s@1", {7}, 1);
  const auto* r2 = ref.add("s@2", {7}, 2);
  dev.add("s@0", {7}, 0);
  dev.add("s@1", {7}, 1);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs.size(), 2u);
  ASSERT_EQ(a.unmatched.size(), 1u) << dump(a);
  EXPECT_EQ(a.unmatched[0].tensor, r2);
  EXPECT_EQ(a.unmatched[0].side, Side::kReference);
  EXPECT_TRUE(contains(a.unmatched[0].reason, "output 2 of the last op of group h7"))
      << a.unmatched[0].reason;
  EXPECT_TRUE(contains(a.unmatched[0].reason, "no device counterpart")) << a.unmatched[0].reason;
  EXPECT_EQ(a.groups[0].ref_members.size(), 3u);  // still a member
}

TEST(Align, UnknownOutputIndexMeetsOutputZero) {
  FakeRun ref, dev;
  const auto* r = ref.add("relu__debugID_1", {1});       // index unknown
  const auto* d = dev.add("relu__debugID_1@0", {1}, 0);  // index 0
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  EXPECT_EQ(a.groups[0].pairs[0].output_index, 0);
}

TEST(Align, LastOpIsGreatestHandleNotCaptureOrder) {
  FakeRun ref, dev;
  ref.add("a", {3});
  const auto* r4 = ref.add("b", {4});
  // The device dumps the op with handle 4 before the one with handle 3.
  const auto* d4 = dev.add("b", {4});
  const auto* fused = dev.add("a_fused_with_4", {3, 4});
  // Key handle 4 claimed twice on the device: the one with the reference's name is compared, the
  // other is listed, ambiguous.
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r4);
  EXPECT_EQ(a.groups[0].pairs[0].device, d4);
  const Unmatched* left = find_unmatched(a, fused);
  ASSERT_NE(left, nullptr) << dump(a);
  EXPECT_TRUE(left->ambiguous);

  FakeRun ref2, dev2;
  ref2.add("b", {4});
  const auto* r3 = ref2.add("a", {3});  // captured last, but handle 3 comes first in the graph
  dev2.add("b", {4});
  dev2.add("ab", {3, 4});
  const Alignment b = align(ref2.all(), dev2.all(), nullptr);
  ASSERT_EQ(b.groups.size(), 1u);
  EXPECT_NE(b.groups[0].pairs[0].ref, r3);
  EXPECT_EQ(b.groups[0].pairs[0].ref->name, "b");
}

// Issue 17: the device has "s@0" (the reference's name) and "s_copy@0", both handle 5 output 0.
// The old code compared the reference with the one captured last ("s_copy@0") and dropped "s@0"
// without a word.
TEST(Align, AKeyClaimedTwicePrefersTheExactNameAndListsTheOther) {
  FakeRun ref, dev;
  const auto* r = ref.add("s@0", {5}, 0);
  const auto* d = dev.add("s@0", {5}, 0);
  const auto* copy = dev.add("s_copy@0", {5}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u) << dump(a);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  ASSERT_EQ(a.unmatched.size(), 1u) << dump(a);
  EXPECT_EQ(a.unmatched[0].tensor, copy);
  EXPECT_EQ(a.unmatched[0].side, Side::kDevice);
  EXPECT_TRUE(a.unmatched[0].ambiguous);
  EXPECT_EQ(a.unmatched[0].reason,
            "ambiguous: 2 device tensors claim output 0 of the last op of group h5 (handles {5}); "
            "compared 's@0' with 's@0' (same name)");
}

TEST(Align, AKeyClaimedTwiceOnTheReferenceSideToo) {
  FakeRun ref, dev;
  const auto* copy = ref.add("s_copy@0", {5}, 0);
  const auto* r = ref.add("s@0", {5}, 0);
  const auto* d = dev.add("s@0", {5}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u) << dump(a);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  ASSERT_EQ(a.unmatched.size(), 1u) << dump(a);
  EXPECT_EQ(a.unmatched[0].tensor, copy);
  EXPECT_EQ(a.unmatched[0].side, Side::kReference);
  EXPECT_TRUE(a.unmatched[0].ambiguous);
  EXPECT_TRUE(contains(a.unmatched[0].reason, "2 reference tensors claim output 0"))
      << a.unmatched[0].reason;
}

TEST(Align, AKeyClaimedTwiceOnBothSidesPairsEveryName) {
  FakeRun ref, dev;
  const auto* r = ref.add("s@0", {5}, 0);
  const auto* r_copy = ref.add("s_copy@0", {5}, 0);
  const auto* d_copy = dev.add("s_copy@0", {5}, 0);
  const auto* d = dev.add("s@0", {5}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  ASSERT_EQ(a.groups[0].pairs.size(), 2u) << dump(a);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  EXPECT_EQ(a.groups[0].pairs[1].ref, r_copy);
  EXPECT_EQ(a.groups[0].pairs[1].device, d_copy);
  EXPECT_TRUE(a.unmatched.empty()) << dump(a);
}

TEST(Align, AKeyClaimedTwiceWithoutAgreeingNamesComparesTheLastCaptured) {
  FakeRun ref, dev;
  const auto* r = ref.add("t@0", {5}, 0);
  const auto* first = dev.add("u@0", {5}, 0);
  const auto* last = dev.add("v@0", {5}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u) << dump(a);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, last);
  const Unmatched* left = find_unmatched(a, first);
  ASSERT_NE(left, nullptr) << dump(a);
  EXPECT_TRUE(left->ambiguous);
  EXPECT_TRUE(contains(left->reason, "compared 't@0' with 'v@0' (the tensors captured last"))
      << left->reason;
}

// Every claimant of an output the other side lacks is listed, not only the last captured.
TEST(Align, EveryClaimantOfAOneSidedOutputIsListed) {
  FakeRun ref, dev;
  ref.add("s@0", {7}, 0);
  dev.add("s@0", {7}, 0);
  const auto* a1 = dev.add("s@1", {7}, 1);
  const auto* b1 = dev.add("s_copy@1", {7}, 1);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.unmatched.size(), 2u) << dump(a);
  EXPECT_EQ(a.unmatched[0].tensor, a1);
  EXPECT_EQ(a.unmatched[1].tensor, b1);
  EXPECT_FALSE(a.unmatched[0].ambiguous);
}

TEST(Align, ComparesAtGreatestHandleBothSidesHave) {
  // The reference stopped at handle 4 (e.g. a crash); the device exposes its op-3 output and a
  // fused {3,4,5}. Handle 4 exists as a key on the reference only, 5 on the device only, so the
  // comparison point is 3, the greatest key handle both sides have.
  FakeRun ref, dev;
  const auto* r3 = ref.add("r3", {3});
  ref.add("r4", {4});
  const auto* d3 = dev.add("d3", {3});
  dev.add("d345", {3, 4, 5});
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  ASSERT_EQ(a.groups[0].pairs.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r3);
  EXPECT_EQ(a.groups[0].pairs[0].device, d3);

  // No key handle in common: each side's own last op.
  FakeRun ref2, dev2;
  const auto* r35 = ref2.add("r35", {3, 5});
  const auto* d34 = dev2.add("d34", {3, 4});
  const Alignment b = align(ref2.all(), dev2.all(), nullptr);
  ASSERT_EQ(b.groups.size(), 1u);
  ASSERT_EQ(b.groups[0].pairs.size(), 1u);
  EXPECT_EQ(b.groups[0].pairs[0].ref, r35);
  EXPECT_EQ(b.groups[0].pairs[0].device, d34);
}

TEST(Align, HandlesOnOneSideOnlyAreUnmatchedWithReason) {
  FakeRun ref, dev;
  ref.add("a", {1});
  const auto* r2 = ref.add("b", {2});
  const auto* r3 = ref.add("c", {3, 4});
  dev.add("a", {1});
  const auto* d9 = dev.add("z", {9});
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  ASSERT_EQ(a.unmatched.size(), 3u) << dump(a);
  EXPECT_EQ(a.unmatched[0].tensor, r2);
  EXPECT_TRUE(contains(a.unmatched[0].reason, "no device tensor shares debug handles {2}"))
      << a.unmatched[0].reason;
  EXPECT_EQ(a.unmatched[1].tensor, r3);
  EXPECT_TRUE(contains(a.unmatched[1].reason, "no device tensor shares debug handles {3,4}"))
      << a.unmatched[1].reason;
  EXPECT_EQ(a.unmatched[2].tensor, d9);
  EXPECT_EQ(a.unmatched[2].side, Side::kDevice);
  EXPECT_TRUE(contains(a.unmatched[2].reason, "no reference tensor shares debug handles {9}"))
      << a.unmatched[2].reason;
}

TEST(Align, NameOnlyStoresMatchExactlyThenSanitized) {
  FakeRun ref, dev;
  const auto* r_in = ref.add("x", {}, -1, TensorRole::kGraphInput);
  const auto* r_relu = ref.add("aten.relu.default");
  const auto* r_add = ref.add("aten.add.Tensor");
  const auto* r_digit = ref.add("1conv");
  const auto* r_out = ref.add("out", {}, 0, TensorRole::kGraphOutput);
  const auto* d_in = dev.add("x", {}, -1, TensorRole::kGraphInput);
  const auto* d_relu = dev.add("aten_relu_default");
  const auto* d_add = dev.add("aten_add_Tensor@0", {}, 0);
  const auto* d_digit = dev.add("_1conv");
  const auto* d_out = dev.add("out", {}, 0, TensorRole::kGraphOutput);

  const Alignment a = align(ref.all(), dev.all(), nullptr);
  EXPECT_TRUE(a.unmatched.empty()) << dump(a);
  ASSERT_EQ(a.groups.size(), 5u) << dump(a);
  struct Expected {
    const TensorEntry* ref;
    const TensorEntry* dev;
    MatchKind how;
    int32_t index;
  };
  const Expected expected[] = {{r_in, d_in, MatchKind::kExactName, -1},
                               {r_relu, d_relu, MatchKind::kSanitizedName, -1},
                               {r_add, d_add, MatchKind::kSanitizedName, 0},
                               {r_digit, d_digit, MatchKind::kSanitizedName, -1},
                               {r_out, d_out, MatchKind::kExactName, 0}};
  for (size_t i = 0; i < 5; ++i) {
    const Group& group = a.groups[i];  // in reference capture order
    ASSERT_EQ(group.pairs.size(), 1u);
    EXPECT_EQ(group.pairs[0].ref, expected[i].ref) << i;
    EXPECT_EQ(group.pairs[0].device, expected[i].dev) << i;
    EXPECT_EQ(group.pairs[0].how, expected[i].how) << i;
    EXPECT_EQ(group.pairs[0].output_index, expected[i].index) << i;
    EXPECT_EQ(group.id, "name:" + expected[i].ref->name);
    EXPECT_TRUE(group.handles.empty());
  }
}

TEST(Align, SuffixPassNeedsTheSameOutputIndex) {
  FakeRun ref, dev;
  const auto* r = ref.add("topk");
  dev.add("topk@1", {}, 1);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  EXPECT_TRUE(a.groups.empty()) << dump(a);
  const Unmatched* miss = find_unmatched(a, r);
  ASSERT_NE(miss, nullptr);
  EXPECT_EQ(miss->reason,
            "no debug handles; no device tensor named 'topk', not even after sanitizing");
}

// A PyTorch reference keyed by fx node names meets ExecuTorch's QNN tensor names, graph outputs
// and multi-output ops included, with no mapping file.
TEST(Align, FxNodeNamesMeetQnnTensorNames) {
  FakeRun ref, dev;
  const auto* r_relu = ref.add("aten_relu_default_3");
  const auto* r_split0 = ref.add("aten_split_with_sizes_default", {}, 0);
  const auto* r_split1 = ref.add("aten_split_with_sizes_default", {}, 1);
  const auto* r_add = ref.add("aten_add_tensor");
  const auto* d_relu = dev.add("aten_relu_default_3@0", {}, 0);
  const auto* d_split1 = dev.add("aten_split_with_sizes_default@1", {}, 1);
  const auto* d_split0 = dev.add("aten_split_with_sizes_default@0", {}, 0);
  const auto* d_add = dev.add("output_aten_add_tensor@0", {}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 4u) << dump(a);
  EXPECT_TRUE(a.unmatched.empty()) << dump(a);
  const std::vector<std::pair<const TensorEntry*, const TensorEntry*>> want = {
      {r_relu, d_relu}, {r_split0, d_split0}, {r_split1, d_split1}, {r_add, d_add}};
  for (size_t g = 0; g < want.size(); ++g) {
    EXPECT_EQ(a.groups[g].pairs[0].ref, want[g].first) << g;
    EXPECT_EQ(a.groups[g].pairs[0].device, want[g].second) << g;
  }
  EXPECT_EQ(a.groups[0].pairs[0].how, MatchKind::kSanitizedName);
  EXPECT_EQ(a.groups[3].pairs[0].how, MatchKind::kNodeName);
  EXPECT_EQ(match_kind_name(MatchKind::kNodeName), "node_name");
}

TEST(Align, ExactNameWinsOverSanitized) {
  FakeRun ref, dev;
  const auto* r_dot = ref.add("a.b");
  const auto* r_us = ref.add("a_b");
  const auto* d = dev.add("a_b");
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r_us);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  EXPECT_EQ(a.groups[0].pairs[0].how, MatchKind::kExactName);
  const Unmatched* miss = find_unmatched(a, r_dot);
  ASSERT_NE(miss, nullptr);
  EXPECT_TRUE(contains(miss->reason, "'a_b' (same sanitized name) is already paired with 'a_b'"))
      << miss->reason;
}

TEST(Align, RepeatedNamesPairInCaptureOrder) {
  FakeRun ref, dev;
  const auto* r1 = ref.add("loop");
  const auto* r2 = ref.add("loop");
  const auto* d1 = dev.add("loop");
  const auto* d2 = dev.add("loop");
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 2u);
  EXPECT_EQ(a.groups[0].id, "name:loop");
  EXPECT_EQ(a.groups[1].id, "name:loop#2");
  EXPECT_EQ(a.groups[0].pairs[0].ref, r1);
  EXPECT_EQ(a.groups[0].pairs[0].device, d1);
  EXPECT_EQ(a.groups[1].pairs[0].ref, r2);
  EXPECT_EQ(a.groups[1].pairs[0].device, d2);
}

TEST(Align, DisagreeingHandlesAreNeverOverruledByName) {
  FakeRun ref, dev;
  const auto* r = ref.add("conv", {3});
  const auto* d = dev.add("conv", {8});
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  EXPECT_TRUE(a.groups.empty());
  ASSERT_EQ(a.unmatched.size(), 2u);
  EXPECT_EQ(a.unmatched[0].tensor, r);
  EXPECT_EQ(a.unmatched[0].reason,
            "no device tensor shares debug handles {3}; the device tensor of the same name "
            "carries other debug handles {8}");
  EXPECT_EQ(a.unmatched[1].tensor, d);
}

TEST(Align, HandlesOnOneSideFallBackToNames) {
  // A reference with handles, a device whose names carry none: names still pair them, and the
  // group keeps the reference's handles.
  FakeRun ref, dev;
  const auto* r = ref.add("aten.relu.default", {5});
  const auto* d = dev.add("aten_relu_default@0", {}, 0);
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u) << dump(a);
  EXPECT_EQ(a.groups[0].pairs[0].ref, r);
  EXPECT_EQ(a.groups[0].pairs[0].device, d);
  EXPECT_EQ(a.groups[0].pairs[0].how, MatchKind::kSanitizedName);
  EXPECT_EQ(a.groups[0].handles, (std::vector<int64_t>{5}));
}

TEST(Align, MissingOnEitherSideWithReasons) {
  FakeRun ref, dev;
  ref.add("both");
  const auto* r_only = ref.add("only_in_ref");
  dev.add("both");
  const auto* d_only = dev.add("only_on_device");
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 1u);
  ASSERT_EQ(a.unmatched.size(), 2u);
  EXPECT_EQ(a.unmatched[0].side, Side::kReference);
  EXPECT_EQ(a.unmatched[0].tensor, r_only);
  EXPECT_EQ(a.unmatched[0].reason,
            "no debug handles; no device tensor named 'only_in_ref', not even after sanitizing");
  EXPECT_EQ(a.unmatched[1].side, Side::kDevice);
  EXPECT_EQ(a.unmatched[1].tensor, d_only);
  EXPECT_EQ(a.unmatched[1].reason,
            "no debug handles; no reference tensor named 'only_on_device', not even after "
            "sanitizing");
}

TEST(Align, EmptyAndNullInputs) {
  FakeRun ref;
  ref.add("a");
  std::vector<const TensorEntry*> with_null = ref.all();
  with_null.push_back(nullptr);
  const Alignment a = align(with_null, {nullptr}, nullptr);
  EXPECT_TRUE(a.groups.empty());
  ASSERT_EQ(a.unmatched.size(), 1u);
  const Alignment b = align(std::vector<const TensorEntry*>{}, {}, nullptr);
  EXPECT_TRUE(b.groups.empty());
  EXPECT_TRUE(b.unmatched.empty());
}

// ---- mapping file -------------------------------------------------------------------------

std::string write_file(const qd::testing::TempDir& dir, const std::string& name,
                       const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(NameMapping, LoadsInFileOrder) {
  qd::testing::TempDir dir;
  const std::string path = write_file(
      dir, "map.json", "{\"z.ref\": \"dev_z\", \"a/ref\": \"dev_a\", \"\\u00e9\": \"e\"}");
  auto mapping = pipeline::load_name_mapping(path);
  ASSERT_THAT(mapping, IsOk());
  ASSERT_EQ(mapping->ref_to_device.size(), 3u);
  EXPECT_EQ(mapping->ref_to_device[0], (std::pair<std::string, std::string>{"z.ref", "dev_z"}));
  EXPECT_EQ(mapping->ref_to_device[1], (std::pair<std::string, std::string>{"a/ref", "dev_a"}));
  EXPECT_EQ(mapping->ref_to_device[2].first, "\xC3\xA9");
}

TEST(NameMapping, ErrorsNameTheFile) {
  qd::testing::TempDir dir;
  struct Case {
    std::string text;
    std::string expect;
  };
  const Case cases[] = {{"{\"a\": \"b\", ", "not valid JSON"},
                        {"[\"a\"]", "expected a JSON object"},
                        {"{\"a\": 3}", "must be a device tensor name"},
                        {"{\"a\": \"b\", \"a\": \"c\"}", "duplicate reference name 'a'"},
                        {"{\"o\": {\"a\": \"x\", \"a\": \"y\"}}", "must be a device tensor name"},
                        {"{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                         "nested deeper than 64 levels at line 1, column 70"}};
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = write_file(dir, "bad" + std::to_string(i++) + ".json", c.text);
    auto mapping = pipeline::load_name_mapping(path);
    ASSERT_THAT(mapping, StatusIs(ErrorCode::kCorrupt)) << c.text << c.text;
    EXPECT_TRUE(contains(mapping.status().message(), "name mapping '" + path + "'"))
        << mapping.status().message();
    EXPECT_TRUE(contains(mapping.status().message(), c.expect)) << mapping.status().message();
  }
  auto missing = pipeline::load_name_mapping(dir.file("none.json"));
  ASSERT_THAT(missing, StatusIs(ErrorCode::kNotFound));
  EXPECT_TRUE(contains(missing.status().message(), "none.json"));
  auto directory = pipeline::load_name_mapping(dir.path().string());
  ASSERT_THAT(directory, StatusIs(ErrorCode::kIo));
  EXPECT_EQ(pipeline::load_name_mapping("").status().code(), ErrorCode::kInvalidArgument);
}

TEST(Align, MappingFileIsTheLastFallback) {
  qd::testing::TempDir dir;
  const std::string path = write_file(
      dir, "map.json",
      "{\"encoder.block0.relu\": \"node_17\", \"ghost\": \"node_99\", \"same\": \"other\"}");
  auto mapping = pipeline::load_name_mapping(path);
  ASSERT_THAT(mapping, IsOk());

  FakeRun ref, dev;
  const auto* r = ref.add("encoder.block0.relu", {12});
  const auto* r_ghost = ref.add("ghost");
  const auto* r_same = ref.add("same");
  const auto* r_lone = ref.add("lone");
  const auto* d = dev.add("node_17");
  const auto* d_same = dev.add("same");
  dev.add("other");
  const auto* d_extra = dev.add("node_50");
  const Alignment a = align(ref.all(), dev.all(), &*mapping);

  const Group* group = find_group(a, "name:encoder.block0.relu");
  ASSERT_NE(group, nullptr) << dump(a);
  EXPECT_EQ(group->pairs[0].ref, r);
  EXPECT_EQ(group->pairs[0].device, d);
  EXPECT_EQ(group->pairs[0].how, MatchKind::kMappingFile);
  EXPECT_EQ(group->handles, (std::vector<int64_t>{12}));

  // An exact name match comes before the mapping file.
  const Group* same = find_group(a, "name:same");
  ASSERT_NE(same, nullptr);
  EXPECT_EQ(same->pairs[0].device, d_same);
  EXPECT_EQ(same->pairs[0].how, MatchKind::kExactName);
  (void)r_same;

  const Unmatched* ghost = find_unmatched(a, r_ghost);
  ASSERT_NE(ghost, nullptr);
  EXPECT_TRUE(contains(ghost->reason, "maps it to 'node_99', which is not in the device run"))
      << ghost->reason;
  const Unmatched* lone = find_unmatched(a, r_lone);
  ASSERT_NE(lone, nullptr);
  EXPECT_TRUE(contains(lone->reason, "the mapping file has no entry for it")) << lone->reason;
  const Unmatched* extra = find_unmatched(a, d_extra);
  ASSERT_NE(extra, nullptr);
  EXPECT_TRUE(contains(extra->reason, "no mapping file entry maps to it")) << extra->reason;
  const Unmatched* other = nullptr;
  for (const Unmatched& entry : a.unmatched) {
    if (entry.tensor->name == "other") other = &entry;
  }
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(contains(other->reason,
                       "the mapping file maps 'same' to it, which is already "
                       "paired with 'same'"))
      << other->reason;
}

// ---- order ---------------------------------------------------------------------------------

TEST(Align, GroupsFollowReferenceCaptureOrder) {
  FakeRun ref, dev;
  ref.add("in");      // seq 0
  ref.add("b", {2});  // seq 1
  ref.add("a", {1});  // seq 2
  dev.add("a", {1});
  dev.add("b", {2});
  dev.add("in");
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  ASSERT_EQ(a.groups.size(), 3u);
  EXPECT_EQ(a.groups[0].id, "name:in");
  EXPECT_EQ(a.groups[1].id, "h2");
  EXPECT_EQ(a.groups[2].id, "h1");
}

TEST(Align, DeterministicWhateverTheInputOrder) {
  FakeRun ref, dev;
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const int kind = static_cast<int>(rng() % 4);
    const std::string name = "t" + std::to_string(i);
    if (kind == 0) {
      ref.add(name, {i});
      dev.add(name, {i});
    } else if (kind == 1) {
      ref.add(name, {i}, 0);
      ref.add(name + "@1", {i}, 1);
      dev.add(name + "@1", {i}, 1);
      dev.add(name, {i}, 0);
    } else if (kind == 2) {
      ref.add("x." + name);
      dev.add("x_" + name);
    } else {
      ref.add("dup");
      dev.add(rng() % 2 ? "dup" : "gone" + name, {1000 + i});
    }
  }
  const std::string expected = dump(align(ref.all(), dev.all(), nullptr));
  for (int trial = 0; trial < 5; ++trial) {
    auto r = ref.all();
    auto d = dev.all();
    std::shuffle(r.begin(), r.end(), rng);
    std::shuffle(d.begin(), d.end(), rng);
    EXPECT_EQ(dump(align(r, d, nullptr)), expected);
  }
}

// Scale, not speed (speed belongs to benchmarks): 100k tensors and one 100k-long component.
TEST(Align, HundredThousandTensorsAndAChainedComponent) {
  FakeRun ref, dev;
  constexpr int kOps = 100000;
  for (int i = 0; i < kOps; ++i) ref.add("op__debugID_" + std::to_string(i), {i});
  for (int i = 0; i < kOps; i += 2) {
    dev.add("fused__debugID_" + std::to_string(i) + "_debugID_" + std::to_string(i + 1),
            {i, i + 1});
  }
  for (int i = 0; i < 20000; ++i) {
    ref.add("named.tensor." + std::to_string(i));
    dev.add("named_tensor_" + std::to_string(19999 - i));
  }
  const Alignment a = align(ref.all(), dev.all(), nullptr);
  EXPECT_EQ(a.groups.size(), static_cast<size_t>(kOps / 2 + 20000));
  EXPECT_TRUE(a.unmatched.empty());

  // One giant component: a chain of overlapping fused device tensors.
  FakeRun chain_ref, chain_dev;
  for (int i = 0; i < kOps; ++i) chain_ref.add("r", {i});
  for (int i = 0; i + 1 < kOps; ++i) chain_dev.add("d", {i, i + 1});
  const Alignment b = align(chain_ref.all(), chain_dev.all(), nullptr);
  ASSERT_EQ(b.groups.size(), 1u);
  EXPECT_EQ(b.groups[0].id, "h0-" + std::to_string(kOps - 1));
  EXPECT_EQ(b.groups[0].pairs.size(), 1u);
}

}  // namespace
}  // namespace qd::compare
