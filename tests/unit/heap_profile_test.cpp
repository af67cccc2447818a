// The HTP heap profile reader (importers/heap_profile.h): the lines ExecuTorch's QNN backend
// writes, and a precise error for anything else.
#include "qnn_debug/importers/heap_profile.h"

#include <gtest/gtest.h>

#include <string>

namespace qd::importers {
namespace {

TEST(HeapProfile, ReadsEachCheckpointInFileOrder) {
  const auto got = parse_heap_profile(
      "DSP:before_context_created (bytes), 6291456\n"
      "\n"
      "DSP:after_context_freed (bytes), 6299648\r\n"
      "odd, label: with, commas (bytes), 0\n"
      "DSP:peak (bytes), 18446744073709551615",  // 2^64 - 1, no final line break
      "h.txt");
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*got)[0].label, "DSP:before_context_created");
  EXPECT_EQ((*got)[0].bytes, 6291456u);
  EXPECT_EQ((*got)[1].label, "DSP:after_context_freed");
  EXPECT_EQ((*got)[1].bytes - (*got)[0].bytes, 8192u);
  EXPECT_EQ((*got)[2].label, "odd, label: with, commas");
  EXPECT_EQ((*got)[2].bytes, 0u);
  EXPECT_EQ((*got)[3].bytes, UINT64_MAX);
  for (const MemoryCheckpoint& c : *got) EXPECT_EQ(c.run_id, kNoRun);
}

void expect_error(const std::string& text, const std::string& message) {
  const auto got = parse_heap_profile(text, "heap profile 'h.txt'");
  ASSERT_FALSE(got.is_ok()) << text;
  EXPECT_EQ(got.status().code(), ErrorCode::kCorrupt);
  EXPECT_EQ(got.status().message(), message);
}

TEST(HeapProfile, RefusesWhatIsNotAHeapProfile) {
  expect_error("", "heap profile 'h.txt': a heap profile with no checkpoint");
  expect_error("\n  \n", "heap profile 'h.txt': a heap profile with no checkpoint");
  expect_error("a (bytes), 1\nDSP:after (kB), 12\n",
               "heap profile 'h.txt': line 2: expected \"<identifier> (bytes), <value>\": "
               "\"DSP:after (kB), 12\"");
  expect_error("DSP:x (bytes) 12",
               "heap profile 'h.txt': line 1: expected \"<identifier> (bytes), <value>\": "
               "\"DSP:x (bytes) 12\"");
  expect_error(" (bytes), 12", "heap profile 'h.txt': line 1: no identifier: \" (bytes), 12\"");
  const std::string why = "the value is not a whole number of bytes below 2^64";
  expect_error("a (bytes), -5", "heap profile 'h.txt': line 1: " + why + ": \"a (bytes), -5\"");
  expect_error("a (bytes), 1.5", "heap profile 'h.txt': line 1: " + why + ": \"a (bytes), 1.5\"");
  expect_error("a (bytes), ", "heap profile 'h.txt': line 1: " + why + ": \"a (bytes), \"");
  expect_error("a (bytes), 18446744073709551616",
               "heap profile 'h.txt': line 1: " + why + ": \"a (bytes), 18446744073709551616\"");
  expect_error(std::string("a (bytes), 1\0\n", 14),
               "heap profile 'h.txt': not a heap profile (binary data)");
  const std::string long_line = std::string(100, 'x') + " (bytes), z";
  expect_error(long_line,
               "heap profile 'h.txt': line 1: " + why + ": \"" + std::string(80, 'x') + "...\"");
}

}  // namespace
}  // namespace qd::importers
