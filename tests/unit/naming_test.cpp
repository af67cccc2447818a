// Tests for tensor-name parsing (naming/) and the handle map (naming/src/handle_map.*).
#include "qnn_debug/naming/naming.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "handle_map.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::naming {
namespace {

using Handles = std::vector<int64_t>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

bool contains(std::string_view text, std::string_view fragment) {
  return text.find(fragment) != std::string_view::npos;
}

// A file under the test temp directory that is removed when the test ends.
class TempFile {
 public:
  explicit TempFile(std::string_view content) {
    static std::atomic<int> counter{0};
    path_ =
        std::filesystem::path(::testing::TempDir()) /
        ("naming_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".json");
    std::ofstream out(path_, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Creates a parser or fails the calling test with the error message.
NameParser make_parser(std::string_view preset, std::string_view pattern = "",
                       std::string_view map_path = "") {
  Result<NameParser> parser = NameParser::create(preset, pattern, map_path);
  EXPECT_THAT(parser, IsOk());
  if (!parser.is_ok()) return NameParser::create("debug-id", "", "").value();
  return std::move(parser).value();
}

Status create_error(std::string_view preset, std::string_view pattern,
                    std::string_view map_path = "") {
  Result<NameParser> parser = NameParser::create(preset, pattern, map_path);
  if (parser.is_ok()) return Status::ok();
  return parser.status();
}

void expect_unmatched(const ParsedName& parsed) {
  EXPECT_FALSE(parsed.matched);
  EXPECT_TRUE(parsed.handles.empty());
  EXPECT_EQ(parsed.output_index, -1);
}

// ------------------------------------------------------------------------------------------------
// qnn_sanitize

TEST(QnnSanitize, ReplacesEveryNonWordByte) {
  EXPECT_EQ(qnn_sanitize("aten.relu.default"), "aten_relu_default");
  EXPECT_EQ(qnn_sanitize("conv/relu:0"), "conv_relu_0");
  EXPECT_EQ(qnn_sanitize("<script>"), "_script_");
  EXPECT_EQ(qnn_sanitize("a b-c@0"), "a_b_c_0");
}

TEST(QnnSanitize, LeadingDigitGetsUnderscorePrefix) {
  EXPECT_EQ(qnn_sanitize("1conv"), "_1conv");
  EXPECT_EQ(qnn_sanitize("9"), "_9");
  EXPECT_EQ(qnn_sanitize("a1"), "a1");
  EXPECT_EQ(qnn_sanitize("_1"), "_1");
  EXPECT_EQ(qnn_sanitize(".1"), "_1");  // the prefix rule looks at the original first byte
}

TEST(QnnSanitize, EmptyStaysEmpty) { EXPECT_EQ(qnn_sanitize(""), ""); }

// ---------------------------------------------------------------------------------------------
// split_output_suffix

TEST(OutputSuffix, SplitsAtOrColonDigits) {
  const auto at = split_output_suffix("aten_add_tensor@1");
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->stem, "aten_add_tensor");
  EXPECT_EQ(at->index, 1);
  const auto colon = split_output_suffix("conv:0");
  ASSERT_TRUE(colon.has_value());
  EXPECT_EQ(colon->stem, "conv");
  EXPECT_EQ(colon->index, 0);
  const auto leading_zeros = split_output_suffix("x@007");
  ASSERT_TRUE(leading_zeros.has_value());
  EXPECT_EQ(leading_zeros->index, 7);
  const auto last_mark = split_output_suffix("a@1@2");
  ASSERT_TRUE(last_mark.has_value());
  EXPECT_EQ(last_mark->stem, "a@1");
  EXPECT_EQ(last_mark->index, 2);
  const auto empty_stem = split_output_suffix("@3");
  ASSERT_TRUE(empty_stem.has_value());
  EXPECT_EQ(empty_stem->stem, "");
}

TEST(OutputSuffix, RejectsWhatIsNoIndex) {
  EXPECT_FALSE(split_output_suffix("relu").has_value());
  EXPECT_FALSE(split_output_suffix("relu@").has_value());
  EXPECT_FALSE(split_output_suffix("123").has_value());           // digits only: no mark
  EXPECT_FALSE(split_output_suffix("relu_3").has_value());        // '_' is not a default mark
  EXPECT_FALSE(split_output_suffix("relu@3x").has_value());       // digits must end the name
  EXPECT_FALSE(split_output_suffix("x@2147483648").has_value());  // past int32
  EXPECT_FALSE(split_output_suffix("").has_value());
  const auto max = split_output_suffix("x@2147483647");
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(max->index, kInt32Max);
}

TEST(OutputSuffix, MarksAreTheCallersChoice) {
  EXPECT_FALSE(split_output_suffix("conv:0", "@").has_value());
  const auto legacy = split_output_suffix("aten_relu_default_3", "_");
  ASSERT_TRUE(legacy.has_value());
  EXPECT_EQ(legacy->stem, "aten_relu_default");
  EXPECT_EQ(legacy->index, 3);
}

TEST(QnnSanitize, EachByteOfMultiByteUtf8BecomesUnderscore) {
  EXPECT_EQ(qnn_sanitize("caf\xC3\xA9"), "caf__");              // U+00E9, two bytes
  EXPECT_EQ(qnn_sanitize("\xE2\x82\xAC\x31"), "___1");          // U+20AC, three bytes
  EXPECT_EQ(qnn_sanitize("\xF0\x9F\x98\x80"), "____");          // U+1F600, four bytes
  EXPECT_EQ(qnn_sanitize("a\xFFz"), "a_z");                     // not UTF-8 at all
  EXPECT_EQ(qnn_sanitize(std::string_view("a\0b", 3)), "a_b");  // NUL is a byte like any other
}

TEST(QnnSanitize, KeepsWordNamesAndIsIdempotent) {
  EXPECT_EQ(qnn_sanitize("aten_relu_default_0"), "aten_relu_default_0");
  for (std::string_view name : {"1conv", "conv/relu:0", "caf\xC3\xA9", "x.y"}) {
    const std::string once = qnn_sanitize(name);
    EXPECT_EQ(qnn_sanitize(once), once) << name;
  }
}

// ------------------------------------------------------------------------------------------------
// debug-id

TEST(DebugIdPreset, SingleHandle) {
  const ParsedName parsed = make_parser("debug-id").parse("relu__debugID_1");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({1}));
  EXPECT_EQ(parsed.output_index, -1);
  EXPECT_EQ(parsed.role, TensorRole::kIntermediate);
}

TEST(DebugIdPreset, CounterBeforeTheMarkerIsNotAHandle) {
  const NameParser parser = make_parser("debug-id");
  EXPECT_EQ(parser.parse("aten_add_tensor_0_debugID_12").handles, Handles({12}));
  EXPECT_EQ(parser.parse("aten_convolution_default_1_debugID_12").handles, Handles({12}));
}

TEST(DebugIdPreset, FusedNameCarriesEveryHandle) {
  const ParsedName parsed = make_parser("debug-id").parse("conv_relu__debugID_4_debugID_5");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({4, 5}));
}

TEST(DebugIdPreset, RepeatedHandlesAreDeduplicatedInFirstSeenOrder) {
  const ParsedName parsed = make_parser("debug-id").parse("x_debugID_7_debugID_3_debugID_7");
  EXPECT_EQ(parsed.handles, Handles({7, 3}));
}

TEST(DebugIdPreset, TrailingAtOrColonIndexIsTheOutputIndex) {
  const NameParser parser = make_parser("debug-id");
  EXPECT_EQ(parser.parse("relu__debugID_1@2").output_index, 2);
  EXPECT_EQ(parser.parse("relu__debugID_1@2").handles, Handles({1}));
  EXPECT_EQ(parser.parse("conv/relu_debugID_3:1").output_index, 1);
  EXPECT_EQ(parser.parse("relu__debugID_1").output_index, -1);
  EXPECT_EQ(parser.parse("a@1_debugID_2").output_index, -1);  // not at the end
  EXPECT_EQ(parser.parse("a_debugID_2@").output_index, -1);   // no digits
}

TEST(DebugIdPreset, NameWithoutHandleIsUnmatchedButKeepsItsIndex) {
  const NameParser parser = make_parser("debug-id");
  const ParsedName parsed = parser.parse("aten_relu_default@0");
  EXPECT_FALSE(parsed.matched);
  EXPECT_TRUE(parsed.handles.empty());
  EXPECT_EQ(parsed.output_index, 0);
  expect_unmatched(parser.parse("relu_debugID_"));
  expect_unmatched(parser.parse("relu_debugid_3"));  // the marker is case-sensitive
  expect_unmatched(parser.parse("relu_debugID_x3"));
}

TEST(DebugIdPreset, HandlesOutsideInt64AreNotHandles) {
  const NameParser parser = make_parser("debug-id");
  expect_unmatched(parser.parse("a_debugID_9223372036854775808"));
  expect_unmatched(parser.parse("a_debugID_99999999999999999999999999999"));
  EXPECT_EQ(parser.parse("a_debugID_9223372036854775807").handles, Handles({kInt64Max}));
  const ParsedName mixed = parser.parse("a_debugID_99999999999999999999_debugID_4");
  EXPECT_TRUE(mixed.matched);
  EXPECT_EQ(mixed.handles, Handles({4}));
}

TEST(DebugIdPreset, OutputIndexOutsideInt32IsNone) {
  const NameParser parser = make_parser("debug-id");
  EXPECT_EQ(parser.parse("a_debugID_1@2147483648").output_index, -1);
  EXPECT_EQ(parser.parse("a_debugID_1@2147483647").output_index, kInt32Max);
}

TEST(DebugIdPreset, RoleIsAlwaysIntermediate) {
  const ParsedName parsed = make_parser("debug-id").parse("input_1_tokens_debugID_3@0");
  EXPECT_EQ(parsed.role, TensorRole::kIntermediate);
  EXPECT_EQ(parsed.handles, Handles({3}));
}

TEST(DebugIdPreset, MapAddsHandlesForTheExactName) {
  const TempFile map(R"({"conv": 9, "conv_debugID_4": [7]})");
  const NameParser parser = make_parser("debug-id", "", map.path());
  const ParsedName conv = parser.parse("conv");
  EXPECT_TRUE(conv.matched);
  EXPECT_EQ(conv.handles, Handles({9}));
  EXPECT_EQ(parser.parse("conv_debugID_4").handles, Handles({4, 7}));  // name first, then map
  const ParsedName indexed = parser.parse("conv@0");  // debug-id looks up the exact name only
  EXPECT_FALSE(indexed.matched);
  EXPECT_TRUE(indexed.handles.empty());
}

// ------------------------------------------------------------------------------------------------
// executorch-qnn

TEST(ExecutorchQnnPreset, AtSuffixIsTheOutputIndex) {
  const NameParser parser = make_parser("executorch-qnn");
  const ParsedName parsed = parser.parse("aten_relu_default@0");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.output_index, 0);
  EXPECT_EQ(parsed.role, TensorRole::kIntermediate);
  EXPECT_TRUE(parsed.handles.empty());
  EXPECT_EQ(parser.parse("aten_split_with_sizes_copy_default@2").output_index, 2);
  EXPECT_EQ(parsed.node, "aten_relu_default");
}

// The op's own name, what per-op profile events are named after, for every preset.
TEST(NodeName, IsTheNameWithoutSuffixAndRolePrefix) {
  const NameParser qnn = make_parser("executorch-qnn");
  EXPECT_EQ(qnn.parse("output_aten_add_tensor@0").node, "aten_add_tensor");
  EXPECT_EQ(qnn.parse("input_1_tokens@0").node, "tokens");
  EXPECT_EQ(qnn.parse("aten_relu_default_3@1").node, "aten_relu_default_3");
  EXPECT_EQ(qnn.parse("aten_relu_default_3").node, "aten_relu_default");  // legacy "_k" suffix
  EXPECT_EQ(qnn.parse("output_").node, "output_");  // a prefix alone is not a node name
  EXPECT_EQ(make_parser("debug-id").parse("relu__debugID_1@2").node, "relu__debugID_1");
  EXPECT_EQ(make_parser("debug-id").parse("relu__debugID_1").node, "relu__debugID_1");
  EXPECT_EQ(make_parser("qnn-sanitized").parse("conv:1").node, "conv");
  const std::string name = "x";
  EXPECT_EQ(make_parser("custom", R"(id(?P<handle>\d+))").parse(name).node, "x");
}

TEST(ExecutorchQnnPreset, InputPrefixMarksGraphInput) {
  const ParsedName parsed = make_parser("executorch-qnn").parse("input_1_tokens@0");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.role, TensorRole::kGraphInput);
  EXPECT_EQ(parsed.output_index, 0);
}

TEST(ExecutorchQnnPreset, OutputPrefixMarksGraphOutput) {
  const NameParser parser = make_parser("executorch-qnn");
  const ParsedName parsed = parser.parse("output_aten_add_tensor@0");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.role, TensorRole::kGraphOutput);
  EXPECT_EQ(parsed.output_index, 0);
  // A name taken from a real QNN-delegated program.
  EXPECT_EQ(parser.parse("output_aten_permute_copy_default_59_sha_concat@0").role,
            TensorRole::kGraphOutput);
}

TEST(ExecutorchQnnPreset, LegacyUnderscoreSuffixIsTheOutputIndex) {
  const NameParser parser = make_parser("executorch-qnn");
  const ParsedName parsed = parser.parse("aten_relu_default_3");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.output_index, 3);
  EXPECT_EQ(parser.parse("aten_relu_default_1_0").output_index, 0);
  const ParsedName input = parser.parse("input_0_x_0");
  EXPECT_EQ(input.role, TensorRole::kGraphInput);
  EXPECT_EQ(input.output_index, 0);
}

TEST(ExecutorchQnnPreset, AtSuffixWinsOverTrailingCounter) {
  EXPECT_EQ(make_parser("executorch-qnn").parse("aten_convolution_default_1@0").output_index, 0);
}

TEST(ExecutorchQnnPreset, DebugIdDigitsAreAHandleNotAnOutputIndex) {
  const NameParser parser = make_parser("executorch-qnn");
  const ParsedName parsed = parser.parse("aten_add_tensor_0_debugID_12");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({12}));
  EXPECT_EQ(parsed.output_index, -1);
  const ParsedName indexed = parser.parse("conv_relu__debugID_4_debugID_5@1");
  EXPECT_EQ(indexed.handles, Handles({4, 5}));
  EXPECT_EQ(indexed.output_index, 1);
}

TEST(ExecutorchQnnPreset, UnrecognizedShapesAreUnmatched) {
  const NameParser parser = make_parser("executorch-qnn");
  expect_unmatched(parser.parse("conv"));
  expect_unmatched(parser.parse("relu@"));
  expect_unmatched(parser.parse("relu@x"));
  expect_unmatched(parser.parse("relu@99999999999"));  // beyond int32
  const ParsedName input = parser.parse("input_1_tokens");
  expect_unmatched(input);
  EXPECT_EQ(input.role, TensorRole::kGraphInput);  // the role is still reported
}

TEST(ExecutorchQnnPreset, MapLookupByFullName) {
  const TempFile map(R"({"aten_relu_default@0": 7})");
  const ParsedName parsed =
      make_parser("executorch-qnn", "", map.path()).parse("aten_relu_default@0");
  EXPECT_EQ(parsed.handles, Handles({7}));
}

TEST(ExecutorchQnnPreset, MapLookupByNameWithoutSuffix) {
  const TempFile map(R"({"aten_relu_default": 7})");
  const NameParser parser = make_parser("executorch-qnn", "", map.path());
  EXPECT_EQ(parser.parse("aten_relu_default@0").handles, Handles({7}));
  EXPECT_EQ(parser.parse("aten_relu_default_0").handles, Handles({7}));
  EXPECT_TRUE(parser.parse("aten_relu_default_1@0").handles.empty());
}

TEST(ExecutorchQnnPreset, MapLookupByNodeNameWithoutRolePrefix) {
  const TempFile map(R"({"aten_add_tensor": [3, 4], "tokens": 1})");
  const NameParser parser = make_parser("executorch-qnn", "", map.path());
  const ParsedName output = parser.parse("output_aten_add_tensor@0");
  EXPECT_EQ(output.handles, Handles({3, 4}));
  EXPECT_EQ(output.role, TensorRole::kGraphOutput);
  EXPECT_EQ(parser.parse("input_1_tokens@0").handles, Handles({1}));
  EXPECT_TRUE(parser.parse("aten_add_tensor_x@0").handles.empty());
}

TEST(ExecutorchQnnPreset, MapLookupFallsBackToSanitizedForms) {
  const TempFile map(R"({"aten_mul_tensor_0": 9, "_1conv": 2})");
  const NameParser parser = make_parser("executorch-qnn", "", map.path());
  EXPECT_EQ(parser.parse("aten_mul_tensor@0").handles, Handles({9}));  // "@0" -> "_0"
  EXPECT_EQ(parser.parse("1conv@0").handles, Handles({2}));            // stem "1conv" -> "_1conv"
}

TEST(ExecutorchQnnPreset, FullNameWinsOverShorterForms) {
  const TempFile map(R"({"aten_relu_default@0": 1, "aten_relu_default": 2})");
  EXPECT_EQ(make_parser("executorch-qnn", "", map.path()).parse("aten_relu_default@0").handles,
            Handles({1}));
}

TEST(ExecutorchQnnPreset, NameHandlesComeBeforeMapHandles) {
  const TempFile map(R"({"conv_debugID_4@0": [7, 4]})");
  const ParsedName parsed = make_parser("executorch-qnn", "", map.path()).parse("conv_debugID_4@0");
  EXPECT_EQ(parsed.handles, Handles({4, 7}));
}

TEST(ExecutorchQnnPreset, EmptyMapEntryGivesNoHandles) {
  const TempFile map(R"({"x": []})");
  const ParsedName parsed = make_parser("executorch-qnn", "", map.path()).parse("x@0");
  EXPECT_TRUE(parsed.matched);  // the suffix was recognized
  EXPECT_TRUE(parsed.handles.empty());
}

TEST(ExecutorchQnnPreset, MapHandlesAloneMakeAMatch) {
  const TempFile map(R"({"weird name": 5})");
  const ParsedName parsed = make_parser("executorch-qnn", "", map.path()).parse("weird name");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({5}));
  EXPECT_EQ(parsed.output_index, -1);
}

// ------------------------------------------------------------------------------------------------
// qnn-sanitized

TEST(QnnSanitizedPreset, MapKeysAreSanitizedWhenLoaded) {
  const TempFile map(R"({"aten.relu.default": 5, "conv/relu:0": [8, 9]})");
  const NameParser parser = make_parser("qnn-sanitized", "", map.path());
  const ParsedName relu = parser.parse("aten_relu_default");
  EXPECT_TRUE(relu.matched);
  EXPECT_EQ(relu.handles, Handles({5}));
  EXPECT_EQ(parser.parse("conv_relu_0").handles, Handles({8, 9}));
  EXPECT_EQ(parser.parse("aten.relu.default").handles, Handles({5}));  // raw name also works
}

TEST(QnnSanitizedPreset, LooksUpTheNameWithoutItsIndexSuffix) {
  const TempFile map(R"({"aten.relu.default": 5})");
  const ParsedName parsed =
      make_parser("qnn-sanitized", "", map.path()).parse("aten_relu_default@0");
  EXPECT_EQ(parsed.handles, Handles({5}));
  EXPECT_EQ(parsed.output_index, 0);
}

TEST(QnnSanitizedPreset, ParsesDebugIdsAndIndexLikeDebugId) {
  const NameParser parser = make_parser("qnn-sanitized");
  const ParsedName parsed = parser.parse("conv_relu__debugID_4_debugID_5@2");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({4, 5}));
  EXPECT_EQ(parsed.output_index, 2);
  expect_unmatched(parser.parse("aten_relu_default"));
}

TEST(QnnSanitizedPreset, KeysCollidingAfterSanitizingAreMerged) {
  // Keys merge in byte order of the originals: "a-b" (0x2D) before "a.b" (0x2E).
  const TempFile map(R"({"a.b": [1, 3], "a-b": [2, 1]})");
  EXPECT_EQ(make_parser("qnn-sanitized", "", map.path()).parse("a_b").handles, Handles({2, 1, 3}));
}

TEST(QnnSanitizedPreset, LeadingDigitKeysMatchPrefixedDeviceNames) {
  const TempFile map(R"({"1conv": 4})");
  EXPECT_EQ(make_parser("qnn-sanitized", "", map.path()).parse("_1conv").handles, Handles({4}));
}

// ------------------------------------------------------------------------------------------------
// custom

TEST(CustomPreset, EveryOccurrenceGivesAHandle) {
  const ParsedName parsed = make_parser("custom", R"(h(?P<handle>\d+))").parse("h1_h2_h1");
  EXPECT_TRUE(parsed.matched);
  EXPECT_EQ(parsed.handles, Handles({1, 2}));
  EXPECT_EQ(parsed.output_index, -1);
}

TEST(CustomPreset, OutputGroupGivesTheOutputIndex) {
  const NameParser parser = make_parser("custom", R"(_id(?P<handle>\d+)(?:#(?P<output>\d+))?)");
  const ParsedName parsed = parser.parse("conv_id4_id5#2");
  EXPECT_EQ(parsed.handles, Handles({4, 5}));
  EXPECT_EQ(parsed.output_index, 2);
  EXPECT_EQ(parser.parse("conv_id4#1_id5#2").output_index, 1);  // the first index wins
}

TEST(CustomPreset, OutputIndexAloneCountsAsAMatch) {
  const ParsedName parsed =
      make_parser("custom", R"(h(?P<handle>\d+)|#(?P<output>\d+))").parse("conv#3");
  EXPECT_TRUE(parsed.matched);
  EXPECT_TRUE(parsed.handles.empty());
  EXPECT_EQ(parsed.output_index, 3);
}

TEST(CustomPreset, NonNumericHandleTextIsIgnored) {
  const NameParser parser = make_parser("custom", R"((?P<handle>[a-z]+))");
  expect_unmatched(parser.parse("abc"));
  const NameParser signed_parser = make_parser("custom", R"(n(?P<handle>-?\d+))");
  EXPECT_EQ(signed_parser.parse("n-3_n4").handles, Handles({4}));  // handles are never negative
}

TEST(CustomPreset, StartAnchorMatchesOnlyAtTheStartOfTheName) {
  // Unlike repeated FindAndConsume, scanning keeps the whole name as context.
  EXPECT_EQ(make_parser("custom", R"(^n(?P<handle>\d+))").parse("n1n2").handles, Handles({1}));
}

TEST(CustomPreset, RejectsPatternThatDoesNotCompile) {
  const Status status = create_error("custom", R"((?P<handle>\d+)");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), "does not compile")) << status.message();
  EXPECT_TRUE(contains(status.message(), "missing )")) << status.message();
}

TEST(CustomPreset, RejectsPatternWithoutHandleGroup) {
  for (std::string_view pattern :
       {R"((\d+))", R"((?P<id>\d+))", R"(\(?P<handle>\d+\))", R"([(?P<handle>]\d+)",
        R"(\Q(?P<handle>\E\d+)", R"((?P<output>\d+))"}) {
    const Status status = create_error("custom", pattern);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << pattern;
    EXPECT_TRUE(contains(status.message(), "has no (?P<handle>...) group")) << status.message();
  }
}

TEST(CustomPreset, RejectsHandleGroupThatCanMatchEmpty) {
  for (std::string_view pattern :
       {R"((?P<handle>\d*))", R"((?P<handle>\d+|))", R"(x(?P<handle>(?:y\d)?))",
        R"((?P<handle>\b))", R"((?P<handle>^))", R"(x(?P<handle>\d*?)y)",
        R"(a(?P<handle>(\d+)?)[)]b)", R"((?P<handle>(?:\d+)*)\d)"}) {
    const Status status = create_error("custom", pattern);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << pattern;
    EXPECT_TRUE(contains(status.message(), "can match an empty string")) << status.message();
  }
}

TEST(CustomPreset, RejectsEmptyPattern) {
  const Status status = create_error("custom", "");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), "needs a pattern")) << status.message();
}

TEST(CustomPreset, FindsTheHandleGroupBehindTrickySyntax) {
  // Parentheses inside classes, \Q...\E quotes and escapes must not confuse the group finder.
  EXPECT_EQ(make_parser("custom", R"(\Q(\E(?P<handle>\d+))").parse("x(42").handles, Handles({42}));
  EXPECT_EQ(make_parser("custom", R"((?P<handle>[)0-9]+))").parse("a12b").handles, Handles({12}));
  EXPECT_EQ(make_parser("custom", R"([(](?P<handle>[0-9]+)[)])").parse("(7)").handles,
            Handles({7}));
  EXPECT_EQ(make_parser("custom", R"(\\(?P<handle>[[:digit:]]+)\))").parse("\\3)").handles,
            Handles({3}));
  EXPECT_EQ(make_parser("custom", R"([]x](?P<handle>\d+))").parse("]5x6").handles, Handles({5, 6}));
}

TEST(CustomPreset, EmptyMatchesElsewhereDoNotStallTheScan) {
  const NameParser parser = make_parser("custom", R"((?P<handle>\d+)|z*)");
  EXPECT_EQ(parser.parse("a1b22c").handles, Handles({1, 22}));
  const std::string long_name = std::string(100000, 'q') + "7";
  EXPECT_EQ(parser.parse(long_name).handles, Handles({7}));
}

TEST(CustomPreset, PatternIsReadAsLatin1Bytes) {
  // "." is one byte, so it steps over half of a UTF-8 sequence or over an invalid byte.
  const NameParser parser = make_parser("custom", R"(\xff.(?P<handle>\d+))");
  const std::string name = std::string("\xff\xfe") + "12";
  EXPECT_EQ(parser.parse(name).handles, Handles({12}));
}

// ------------------------------------------------------------------------------------------------
// Parser creation

TEST(NameParserCreate, RejectsUnknownPreset) {
  const Status status = create_error("debugid", "");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), "\"debugid\"")) << status.message();
  EXPECT_TRUE(contains(status.message(), "executorch-qnn")) << status.message();
}

TEST(NameParserCreate, RejectsCustomPatternWithBuiltinPreset) {
  const Status status = create_error("debug-id", R"((?P<handle>\d+))");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), "only used with preset \"custom\"")) << status.message();
}

TEST(NameParserCreate, ReportsPreset) {
  EXPECT_EQ(make_parser("executorch-qnn").preset(), "executorch-qnn");
  EXPECT_EQ(make_parser("custom", R"((?P<handle>\d+))").preset(), "custom");
}

TEST(NameParserCreate, MissingMapFileIsNotFound) {
  const std::string path = ::testing::TempDir() + "/naming_test_no_such_map.json";
  const Status status = create_error("executorch-qnn", "", path);
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  EXPECT_TRUE(contains(status.message(), path)) << status.message();
}

TEST(NameParserCreate, MalformedMapFileFailsCreation) {
  const TempFile map(R"({"a": 1,})");
  const Status status = create_error("qnn-sanitized", "", map.path());
  EXPECT_EQ(status.code(), ErrorCode::kCorrupt);
  EXPECT_TRUE(contains(status.message(), map.path())) << status.message();
}

TEST(NameParserCreate, CopiesShareRulesAndMovedFromParserMatchesNothing) {
  NameParser original = make_parser("debug-id");
  const NameParser copy = original;
  const NameParser moved = std::move(original);
  EXPECT_EQ(copy.parse("a_debugID_3").handles, Handles({3}));
  EXPECT_EQ(moved.parse("a_debugID_3").handles, Handles({3}));
  expect_unmatched(original.parse("a_debugID_3"));  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(original.preset(), "");                 // NOLINT(bugprone-use-after-move)
}

// ------------------------------------------------------------------------------------------------
// Handle map parsing

TEST(HandleMapParse, ReadsIntegersAndArrays) {
  const Result<HandleMap> map = HandleMap::parse(R"({"a": 3, "b": [4, 5], "c": []})", "inline");
  ASSERT_THAT(map, IsOk());
  EXPECT_EQ(map->size(), 3u);
  ASSERT_NE(map->find("a"), nullptr);
  EXPECT_EQ(*map->find("a"), Handles({3}));
  EXPECT_EQ(*map->find("b"), Handles({4, 5}));
  EXPECT_EQ(*map->find("c"), Handles({}));
  EXPECT_EQ(map->find("d"), nullptr);
}

TEST(HandleMapParse, AcceptsWhitespaceEscapesAndByteOrderMark) {
  const Result<HandleMap> map = HandleMap::parse(
      "\xEF\xBB\xBF \t\r\n{ \"a\\u0062c\" : 1 ,\n\"q\\\"\\\\\\/\\b\\f\\n\\r\\t\":\r\n[ 2 ] }\n",
      "inline");
  ASSERT_THAT(map, IsOk());
  ASSERT_NE(map->find("abc"), nullptr);
  EXPECT_EQ(*map->find("abc"), Handles({1}));
  ASSERT_NE(map->find("q\"\\/\b\f\n\r\t"), nullptr);
  EXPECT_EQ(*map->find("q\"\\/\b\f\n\r\t"), Handles({2}));
}

TEST(HandleMapParse, DecodesUnicodeEscapesAndSurrogatePairs) {
  const std::string raw_utf8_key = "caf\xC3\xA9";
  const std::string json =
      R"({"\u00e9": 1, "\u20AC": 2, "\ud83d\ude00": 3, "\u0000": 4, ")" + raw_utf8_key + R"(": 5})";
  const Result<HandleMap> map = HandleMap::parse(json, "inline");
  ASSERT_THAT(map, IsOk());
  EXPECT_NE(map->find("\xC3\xA9"), nullptr);
  EXPECT_NE(map->find("\xE2\x82\xAC"), nullptr);
  ASSERT_NE(map->find("\xF0\x9F\x98\x80"), nullptr);
  EXPECT_EQ(*map->find("\xF0\x9F\x98\x80"), Handles({3}));
  EXPECT_NE(map->find(std::string_view("\0", 1)), nullptr);
  EXPECT_NE(map->find("caf\xC3\xA9"), nullptr);
}

TEST(HandleMapParse, AcceptsEmptyObjectAndExtremeHandles) {
  const Result<HandleMap> empty = HandleMap::parse(" {} ", "inline");
  ASSERT_THAT(empty, IsOk());
  EXPECT_TRUE(empty->empty());
  const Result<HandleMap> extremes =
      HandleMap::parse(R"({"a": 0, "b": 9223372036854775807, "c": [4, 4, 5, 4]})", "inline");
  ASSERT_THAT(extremes, IsOk());
  EXPECT_EQ(*extremes->find("a"), Handles({0}));
  EXPECT_EQ(*extremes->find("b"), Handles({kInt64Max}));
  EXPECT_EQ(*extremes->find("c"), Handles({4, 5}));  // duplicates dropped, order kept
}

TEST(HandleMapParse, DeduplicatesLongArraysInLinearTime) {
  std::string json = R"({"a": [)";
  for (int i = 0; i < 200000; ++i) json += std::to_string(i % 1000) + ",";
  json += "1]}";
  const Result<HandleMap> map = HandleMap::parse(json, "inline");
  ASSERT_THAT(map, IsOk());
  EXPECT_EQ(map->find("a")->size(), 1000u);
  EXPECT_EQ(map->find("a")->at(999), 999);
}

struct MalformedCase {
  std::string json;
  std::string problem;  // a fragment of the expected message
  size_t offset;        // byte offset the message must point at
};

TEST(HandleMapParse, RejectsEveryMalformedShapeWithItsPosition) {
  const std::vector<MalformedCase> cases = {
      {"", "empty", 0},
      {"  \n ", "empty", 4},
      {"[1]", "expected a JSON object", 0},
      {"7", "expected a JSON object", 0},
      {R"({"a":1,})", "expected a tensor name", 7},
      {R"({a:1})", "expected a tensor name", 1},
      {R"({"a" 1})", "expected ':'", 5},
      {R"({"a":"x"})", "expected a handle", 5},
      {R"({"a":true})", "expected a handle", 5},
      {R"({"a":null})", "expected a handle", 5},
      {R"({"a":{}})", "expected a handle", 5},
      {R"({"a":-1})", "must not be negative", 5},
      {R"({"a":[2,-1]})", "must not be negative", 8},
      {R"({"a":1.5})", "must be an integer", 6},
      {R"({"a":1e3})", "must be an integer", 6},
      {R"({"a":01})", "leading zeros", 5},
      {R"({"a":9223372036854775808})", "64-bit", 5},
      {R"({"a":[1,99999999999999999999999999]})", "64-bit", 8},
      {R"({"a":[[1]]})", "expected a handle", 6},
      {R"({"a":[1,]})", "expected a handle", 8},
      {R"({"a":[1 2]})", "expected ',' or ']'", 8},
      {R"({"a":[1)", "expected ',' or ']'", 7},
      {R"({"a":1 "b":2})", "expected ',' or '}'", 7},
      {R"({"a":1)", "expected ',' or '}'", 6},
      {R"({"a":1,"a":2})", "duplicate tensor name", 7},
      {R"({"a":1} x)", "after the closing", 8},
      {R"({"a":1}{})", "after the closing", 7},
      {R"({"a)", "unterminated string", 3},
      {R"({"a\x":1})", "invalid escape", 4},
      {R"({"a\)", "unterminated escape", 4},
      {R"({"\ud800":1})", "not followed by a low surrogate", 2},
      {R"({"\ud800\u0041":1})", "not followed by a low surrogate", 2},
      {R"({"\udc00":1})", "unpaired low surrogate", 2},
      {R"({"\u12G4":1})", "four hexadecimal digits", 6},
      {"{\"a\tb\":1}", "control character", 3},
      {"{\"\xFF\":1}", "invalid UTF-8", 2},
      {"{\"\xC0\x80\":1}", "invalid UTF-8", 2},          // overlong NUL
      {"{\"\xED\xA0\x80\":1}", "invalid UTF-8", 2},      // encoded surrogate
      {"{\"\xF4\x90\x80\x80\":1}", "invalid UTF-8", 2},  // beyond U+10FFFF
      {"{\"\xE2\x82\":1}", "invalid UTF-8", 2},          // truncated sequence
  };
  for (const MalformedCase& c : cases) {
    const Result<HandleMap> map = HandleMap::parse(c.json, "cases.json");
    ASSERT_FALSE(map.is_ok()) << "accepted: " << c.json;
    const std::string& message = map.status().message();
    EXPECT_EQ(map.status().code(), ErrorCode::kCorrupt) << c.json;
    EXPECT_TRUE(contains(message, c.problem)) << c.json << " -> " << message;
    EXPECT_TRUE(contains(message, "byte offset " + std::to_string(c.offset) + ")"))
        << c.json << " -> " << message;
    EXPECT_TRUE(contains(message, "'cases.json'")) << message;
  }
}

TEST(HandleMapParse, ReportsLineAndColumn) {
  const Result<HandleMap> map = HandleMap::parse("{\n  \"a\": 1,\n  \"b\": x\n}", "lines.json");
  ASSERT_FALSE(map.is_ok());
  EXPECT_TRUE(contains(map.status().message(), "line 3, column 8 (byte offset 19)"))
      << map.status().message();
}

TEST(HandleMapLoad, ReadsAFile) {
  const TempFile file(R"({"conv": [1, 2]})");
  const Result<HandleMap> map = HandleMap::load(file.path());
  ASSERT_THAT(map, IsOk());
  EXPECT_EQ(*map->find("conv"), Handles({1, 2}));
}

TEST(HandleMapLoad, ErrorsNameTheFile) {
  const TempFile file("{\"conv\": [1, 2]");
  const Result<HandleMap> map = HandleMap::load(file.path());
  ASSERT_THAT(map, StatusIs(ErrorCode::kCorrupt));
  // Appended piecewise: GCC 12 -O2 gives a false -Wrestrict for "'" + std::string.
  std::string quoted_path = "'";
  quoted_path.append(file.path()).append("'");
  EXPECT_TRUE(contains(map.status().message(), quoted_path)) << map.status().message();
  EXPECT_TRUE(contains(map.status().message(), "line 1, column 16")) << map.status().message();
}

TEST(HandleMapLoad, MissingFileDirectoryAndNulPath) {
  const Result<HandleMap> missing = HandleMap::load(::testing::TempDir() + "/absent_map.json");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(contains(missing.status().message(), "absent_map.json"));
  const Result<HandleMap> directory = HandleMap::load(::testing::TempDir());
  EXPECT_EQ(directory.status().code(), ErrorCode::kIo) << directory.status().message();
  const Result<HandleMap> nul = HandleMap::load(std::string_view("a\0b", 3));
  EXPECT_EQ(nul.status().code(), ErrorCode::kInvalidArgument);
}

TEST(HandleMapSanitize, MergesCollidingKeys) {
  const Result<HandleMap> map = HandleMap::parse(R"({"x.y": [2], "x/y": [1, 2], "z": 3})", "m");
  ASSERT_THAT(map, IsOk());
  const Result<HandleMap> sanitized = map->with_sanitized_keys();
  ASSERT_THAT(sanitized, IsOk());
  EXPECT_EQ(sanitized->size(), 2u);
  EXPECT_EQ(*sanitized->find("x_y"), Handles({2, 1}));  // '.' (0x2E) sorts before '/' (0x2F)
  EXPECT_EQ(*sanitized->find("z"), Handles({3}));
  EXPECT_EQ(sanitized->find("x.y"), nullptr);
}

// ------------------------------------------------------------------------------------------------
// Hostile names

std::vector<NameParser> every_preset() {
  return {make_parser("debug-id"), make_parser("executorch-qnn"), make_parser("qnn-sanitized"),
          make_parser("custom", R"(_debugID_(?P<handle>\d+)(?:@(?P<output>\d+))?)")};
}

// What each hostile name parses to. How long it takes (linear in the name: RE2 runs in linear
// time) is measured by tests/bench/naming_bench.cpp against a scan of the same bytes
// (docs/performance.md, "Hostile names"), not asserted here.

TEST(HostileNames, EmptyNameMatchesNothing) {
  for (const NameParser& parser : every_preset()) {
    expect_unmatched(parser.parse(""));
    expect_unmatched(parser.parse(std::string_view()));
  }
}

TEST(HostileNames, MegabyteNamesParseWhole) {
  const std::string filler(1 << 20, 'a');
  for (const NameParser& parser : every_preset()) {
    ParsedName parsed = parser.parse(filler);
    expect_unmatched(parsed);
    parsed = parser.parse(filler + "_debugID_5");
    EXPECT_EQ(parsed.handles, Handles({5})) << parser.preset();
  }
}

TEST(HostileNames, ThousandsOfDebugIdRepetitions) {
  std::string same;
  std::string distinct;
  std::string bare;
  Handles expected;
  for (int i = 0; i < 100000; ++i) {
    same += "_debugID_1";
    bare += "_debugID_";
  }
  for (int i = 0; i < 5000; ++i) {
    distinct += "_debugID_" + std::to_string(i);
    expected.push_back(i);
  }
  for (const NameParser& parser : every_preset()) {
    ParsedName parsed = parser.parse(same);
    EXPECT_EQ(parsed.handles, Handles({1})) << parser.preset();
    parsed = parser.parse(distinct);
    EXPECT_EQ(parsed.handles, expected) << parser.preset();
    parsed = parser.parse(bare);
    EXPECT_TRUE(parsed.handles.empty()) << parser.preset();
  }
}

TEST(HostileNames, HugeDigitRunsAreNotNumbers) {
  const std::string nines(1 << 20, '9');
  for (const NameParser& parser : every_preset()) {
    ParsedName parsed = parser.parse("_debugID_" + nines);
    EXPECT_TRUE(parsed.handles.empty()) << parser.preset();
    parsed = parser.parse("x@" + nines);
    EXPECT_EQ(parsed.output_index, -1) << parser.preset();
  }
  expect_unmatched(make_parser("executorch-qnn").parse("x_" + nines));
}

TEST(HostileNames, InvalidUtf8BytesDoNotBreakMatching) {
  for (const NameParser& parser : every_preset()) {
    const ParsedName parsed = parser.parse("\xFF\xFE_debugID_7\x80\xC3");
    EXPECT_EQ(parsed.handles, Handles({7})) << parser.preset();
    EXPECT_EQ(parser.parse("\xC3_debugID_2@1").output_index, 1) << parser.preset();
  }
  EXPECT_EQ(make_parser("executorch-qnn").parse("output_\xE9\xFF@3").role,
            TensorRole::kGraphOutput);
}

TEST(HostileNames, EmbeddedNulSlashesAndMarkup) {
  const std::string with_nul("a\0b_debugID_3", 13);
  for (const NameParser& parser : every_preset()) {
    EXPECT_EQ(parser.parse(with_nul).handles, Handles({3})) << parser.preset();
    EXPECT_EQ(parser.parse("<script>alert(1)</script>/conv/relu_debugID_5").handles, Handles({5}))
        << parser.preset();
    EXPECT_EQ(parser.parse("../../etc/passwd_debugID_6@0").handles, Handles({6}))
        << parser.preset();
  }
}

TEST(HostileNames, MegabyteNamesWithAMapLoaded) {
  const TempFile map(R"({"a.b": 1, "aten_relu_default": 2})");
  const std::string filler(1 << 20, '.');
  for (std::string_view preset : {"executorch-qnn", "qnn-sanitized"}) {
    const NameParser parser = make_parser(preset, "", map.path());
    ParsedName parsed = parser.parse("output_" + filler + "@0");
    EXPECT_TRUE(parsed.handles.empty()) << preset;
    EXPECT_EQ(parsed.output_index, 0) << preset;
  }
}

// ------------------------------------------------------------------------------------------------
// Threads

TEST(NameParserThreads, ConcurrentParsesAgreeWithSerialResults) {
  const TempFile map(R"({"aten_relu_default": 11, "aten_add_tensor": [3, 4]})");
  const NameParser parser = make_parser("executorch-qnn", "", map.path());
  const std::vector<std::string> names = {"aten_relu_default@0",
                                          "output_aten_add_tensor@1",
                                          "conv_relu__debugID_4_debugID_5",
                                          "input_1_tokens@0",
                                          "aten_relu_default_2",
                                          "nothing here",
                                          "\xFF_debugID_9@3",
                                          std::string(4096, 'x') + "_debugID_1"};
  std::vector<ParsedName> serial;
  for (const std::string& name : names) serial.push_back(parser.parse(name));
  ASSERT_EQ(serial[0].handles, Handles({11}));
  ASSERT_EQ(serial[1].handles, Handles({3, 4}));
  ASSERT_EQ(serial[2].handles, Handles({4, 5}));

  std::atomic<int> mismatches{0};
  std::atomic<int> parses{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 500; ++round) {
        const size_t i = static_cast<size_t>(round + t) % names.size();
        const ParsedName parsed = parser.parse(names[i]);
        const ParsedName& want = serial[i];
        if (parsed.handles != want.handles || parsed.output_index != want.output_index ||
            parsed.role != want.role || parsed.matched != want.matched) {
          ++mismatches;
        }
        ++parses;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(parses.load(), 2000);
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace qd::naming
