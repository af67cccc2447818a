// The HTP heap profile reader (importers/src/heap_profile.h): the lines ExecuTorch's QNN backend
// writes (`ofs << identifier << ", " << value << "\n"`, the identifier ending in " (bytes)";
// docs/formats.md, 4e), and a precise error naming the file and the line for anything else. Then
// the sink that stores them: at commit, outside any run, beside the dump's own checkpoints.
#include "heap_profile.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../common/files.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/importers/store_sink.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::importers {
namespace {

constexpr std::string_view kRealistic =
    "DSP:before_context_created (bytes), 6291456\n"
    "DSP:after_context_freed (bytes), 6299648\n";

std::vector<MemoryCheckpoint> parsed(std::string_view text) {
  Result<std::vector<MemoryCheckpoint>> got = parse_heap_profile(text, "heap profile 'h.txt'");
  EXPECT_THAT(got, IsOk());
  return got.is_ok() ? std::move(got).value() : std::vector<MemoryCheckpoint>{};
}

std::vector<std::string> labels(const std::vector<MemoryCheckpoint>& checkpoints) {
  std::vector<std::string> out;
  for (const MemoryCheckpoint& c : checkpoints) out.push_back(c.label);
  return out;
}

TEST(HeapProfile, ReadsTheTwoCheckpointsTheBackendWrites) {
  const std::vector<MemoryCheckpoint> got = parsed(kRealistic);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].label, "DSP:before_context_created");
  EXPECT_EQ(got[0].bytes, 6291456u);  // 6 MiB
  EXPECT_EQ(got[1].label, "DSP:after_context_freed");
  EXPECT_EQ(got[1].bytes, 6299648u);
  EXPECT_EQ(got[1].bytes - got[0].bytes, 8192u);  // what the context left on the heap
  for (const MemoryCheckpoint& c : got) {
    EXPECT_EQ(c.run_id, kNoRun);
    EXPECT_EQ(c.time_unix_ns, 0);
  }
}

TEST(HeapProfile, TheValueFollowsTheLastSeparatorAndTheLabelStaysData) {
  const std::vector<MemoryCheckpoint> got = parsed(
      "odd, label: with, commas (bytes), 0\n"
      "a (bytes), b (bytes), 5\n"             // only the last " (bytes), " separates
      "DSP: spaced  out :x (bytes), 00042\n"  // leading zeros are still decimal
      "\xE3\x83\x92\xE3\x83\xBC\xE3\x83\x97 <script>&amp; (bytes), 7\n"  // UTF-8, markup
      "\x1b[31mred%s{}\\n (bytes), 9\n"           // control bytes and format directives
      "DSP:peak (bytes), 18446744073709551615");  // 2^64 - 1, no final line break
  EXPECT_EQ(labels(got), (std::vector<std::string>{
                             "odd, label: with, commas", "a (bytes), b", "DSP: spaced  out :x",
                             "\xE3\x83\x92\xE3\x83\xBC\xE3\x83\x97 <script>&amp;",
                             "\x1b[31mred%s{}\\n", "DSP:peak"}));
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].bytes, 0u);
  EXPECT_EQ(got[1].bytes, 5u);
  EXPECT_EQ(got[2].bytes, 42u);
  EXPECT_EQ(got[3].bytes, 7u);
  EXPECT_EQ(got[4].bytes, 9u);
  EXPECT_EQ(got[5].bytes, UINT64_MAX);
}

TEST(HeapProfile, AcceptsCrLfBlankLinesAndAByteOrderMark) {
  const std::vector<MemoryCheckpoint> got = parsed(
      "\xEF\xBB\xBF"  // a UTF-8 BOM is not part of the first label
      "DSP:before_context_created (bytes), 6291456\r\n"
      "\r\n"
      "  \t \n"
      "\n"
      "DSP:after_context_freed (bytes), 6299648\r\n"
      "\r\n");
  EXPECT_EQ(labels(got),
            (std::vector<std::string>{"DSP:before_context_created", "DSP:after_context_freed"}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, 6291456u);  // the CR is not part of the value
  EXPECT_EQ(got[1].bytes, 6299648u);
}

void expect_error(std::string_view text, const std::string& message) {
  const auto got = parse_heap_profile(text, "heap profile 'h.txt'");
  ASSERT_THAT(got, StatusIs(ErrorCode::kCorrupt)) << text;
  EXPECT_EQ(got.status().message(), message);
}

const std::string kShape = "heap profile 'h.txt': line ";
const std::string kExpected = ": expected \"<identifier> (bytes), <value>\": ";
const std::string kNotBytes = ": the value is not a whole number of bytes below 2^64: ";

TEST(HeapProfile, RefusesAFileWithoutCheckpointsOrWithBinaryData) {
  expect_error("", "heap profile 'h.txt': a heap profile with no checkpoint");
  expect_error("\n  \r\n\t\n", "heap profile 'h.txt': a heap profile with no checkpoint");
  expect_error("\xEF\xBB\xBF", "heap profile 'h.txt': a heap profile with no checkpoint");
  expect_error(std::string_view("a (bytes), 1\0\n", 14),
               "heap profile 'h.txt': not a heap profile (binary data)");
}

TEST(HeapProfile, RefusesALineOfAnotherShapeNamingItsNumber) {
  // Line numbers count blank and CR LF lines.
  expect_error("a (bytes), 1\r\n\r\nDSP:after (kB), 12\r\n",
               kShape + "3" + kExpected + "\"DSP:after (kB), 12\"");
  // The profiler's other units: microseconds, counts, cycles (no suffix).
  expect_error("DSP:x (us), 12", kShape + "1" + kExpected + "\"DSP:x (us), 12\"");
  expect_error("DSP:x, 12", kShape + "1" + kExpected + "\"DSP:x, 12\"");
  expect_error("DSP:x (bytes) 12", kShape + "1" + kExpected + "\"DSP:x (bytes) 12\"");
  expect_error("DSP:x (bytes),12", kShape + "1" + kExpected + "\"DSP:x (bytes),12\"");
  expect_error("DSP:x (bytes)", kShape + "1" + kExpected + "\"DSP:x (bytes)\"");
  expect_error(" (bytes), 12", kShape + "1: no identifier: \" (bytes), 12\"");
}

TEST(HeapProfile, RefusesAValueThatIsNotAWholeNumberOfBytes) {
  for (const std::string value : {"-5", "+5", "1.5", "1e6", "0x10", "", " 5", "5 ", "5\t", "12a",
                                  "18446744073709551616", "99999999999999999999999"}) {
    expect_error("a (bytes), " + value, kShape + "1" + kNotBytes + "\"a (bytes), " +
                                            (value == "5\t" ? "5\\x09" : value) + "\"");
  }
}

TEST(HeapProfile, QuotesTheBadLineEscapedAndCutTo80Characters) {
  const std::string long_line = std::string(100, 'x') + " (bytes), z";
  expect_error(long_line, kShape + "1" + kNotBytes + "\"" + std::string(80, 'x') + "...\"");
  const std::string exactly_80 = std::string(69, 'y') + " (bytes), z";  // 69 + 11 characters
  ASSERT_EQ(exactly_80.size(), 80u);
  expect_error(exactly_80, kShape + "1" + kNotBytes + "\"" + exactly_80 + "\"");
  // Control bytes, non-ASCII bytes, quotes and backslashes cannot reach the terminal as they are.
  expect_error("\x1b[2J\"\\\xE3\x83\x92 (kB), 1",
               kShape + "1" + kExpected + "\"\\x1b[2J\\x22\\x5c\\xe3\\x83\\x92 (kB), 1\"");
}

class HeapProfileFile : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }
  std::string source(const std::string& name) const { return "heap profile '" + file(name) + "'"; }
  const qd::testing::TempDir dir_;
};

TEST_F(HeapProfileFile, ReadsAFileAsItsText) {
  testing::write_text(file("heap.txt"), kRealistic);
  const auto got = read_heap_profile(file("heap.txt"));
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(labels(*got),
            (std::vector<std::string>{"DSP:before_context_created", "DSP:after_context_freed"}));
  EXPECT_EQ((*got)[1].bytes, 6299648u);
}

TEST_F(HeapProfileFile, NamesTheFileInEveryError) {
  const auto missing = read_heap_profile(file("none.txt"));
  ASSERT_THAT(missing, StatusIs(ErrorCode::kNotFound));
  EXPECT_EQ(missing.status().message(),
            source("none.txt") + ": cannot open: No such file or directory");

  testing::write_text(file("empty.txt"), "");
  const auto empty = read_heap_profile(file("empty.txt"));
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().message(), source("empty.txt") + ": a heap profile with no checkpoint");

  testing::write_text(file("bad.txt"), std::string(kRealistic) + "DSP:x 12\n");
  const auto bad = read_heap_profile(file("bad.txt"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), source("bad.txt") + ": line 3" + kExpected + "\"DSP:x 12\"");

  std::filesystem::create_directory(file("folder"));
  const auto folder = read_heap_profile(file("folder"));
  ASSERT_FALSE(folder.is_ok());
  EXPECT_EQ(folder.status().message(), source("folder") + ": is a directory, not a heap profile");
}

TEST_F(HeapProfileFile, ReadsUpTo1MiBAndRefusesMore) {
  const std::string line = "DSP:c (bytes), 1\n";  // 17 bytes
  std::string text;
  while (text.size() + line.size() <= kMaxHeapProfileBytes) text += line;
  text += std::string(kMaxHeapProfileBytes - text.size() - 1, ' ') + "\n";  // a blank last line
  ASSERT_EQ(text.size(), kMaxHeapProfileBytes);
  testing::write_text(file("full.txt"), text);
  const auto full = read_heap_profile(file("full.txt"));
  ASSERT_THAT(full, IsOk());
  EXPECT_EQ(full->size(), kMaxHeapProfileBytes / line.size());

  testing::write_text(file("over.txt"), text + "\n");
  const auto over = read_heap_profile(file("over.txt"));
  ASSERT_THAT(over, StatusIs(ErrorCode::kCorrupt));
  EXPECT_EQ(over.status().message(),
            source("over.txt") + ": larger than 1048576 bytes, not a heap profile");
}

// The sink reads the profile when it opens and stores it when it commits: after the dump's runs,
// so outside any run, and beside a checkpoint of the dump with the same label.
TEST_F(HeapProfileFile, TheSinkStoresTheCheckpointsBesideTheDumpsOwn) {
  testing::write_text(file("heap.txt"), kRealistic);
  SinkOptions options;
  options.output_path = file("s.h5");
  options.producer = "heap_profile_test";
  options.heap_profile_path = file("heap.txt");
  {
    Result<StoreSink> sink = StoreSink::open(options);
    ASSERT_THAT(sink, IsOk());
    ASSERT_THAT(sink->begin_run("Execute"), IsOk());
    ASSERT_THAT(sink->memory_checkpoint("DSP:before_context_created", 4096), IsOk());
    ASSERT_THAT(sink->end_run(), IsOk());
    const Status committed = sink->commit();
    ASSERT_THAT(committed, IsOk());
  }
  auto store = StoreReader::open(file("s.h5"));
  ASSERT_THAT(store, IsOk());
  const std::vector<MemoryCheckpoint>& got = (*store)->memory_checkpoints();
  EXPECT_EQ(labels(got),
            (std::vector<std::string>{"DSP:before_context_created", "DSP:before_context_created",
                                      "DSP:after_context_freed"}));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].run_id, 0u);  // the dump's own, in its run
  EXPECT_EQ(got[0].bytes, 4096u);
  EXPECT_EQ(got[1].run_id, kNoRun);
  EXPECT_EQ(got[1].bytes, 6291456u);
  EXPECT_EQ(got[2].run_id, kNoRun);
  EXPECT_EQ(got[2].bytes, 6299648u);
}

TEST_F(HeapProfileFile, ABadProfileFailsTheSinkBeforeItWritesAnything) {
  testing::write_text(file("bad.txt"), "DSP:before_context_created (bytes), 6291456\n\nx, 1\n");
  SinkOptions options;
  options.output_path = file("s.h5");
  options.producer = "heap_profile_test";
  options.heap_profile_path = file("bad.txt");
  const Result<StoreSink> sink = StoreSink::open(options);
  ASSERT_FALSE(sink.is_ok());
  EXPECT_EQ(sink.status().message(), source("bad.txt") + ": line 3" + kExpected + "\"x, 1\"");
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"bad.txt"});  // no store, no staging file
  // Read before the output is prepared: the profile is named even where no store could be made.
  options.output_path = file("no such folder/s.h5");
  const Result<StoreSink> nowhere = StoreSink::open(options);
  ASSERT_FALSE(nowhere.is_ok());
  EXPECT_EQ(nowhere.status().message(), sink.status().message());
}

}  // namespace
}  // namespace qd::importers
