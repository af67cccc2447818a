// read_text_file (base/input_file.h): the one reader of small text inputs (policies, reports,
// name mappings, handle maps): what it reads, and how each refusal is worded.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/base/input_file.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd {
namespace {

using testing::TempDir;

TEST(ReadTextFile, ReadsARegularFileWhole) {
  TempDir dir;
  const std::string path = dir.file("p.json");
  const std::string content = std::string(200'000, 'x') + "\n{\"rules\": []}";
  std::ofstream(path, std::ios::binary) << content;
  const Result<std::string> text = read_text_file(path, "policy", "a policy", 1 << 20);
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text, content);
}

// `--policy <(make_policy)`: the shell hands over a FIFO, read to its end.
TEST(ReadTextFile, ReadsAFifoToItsEnd) {
  TempDir dir;
  const std::string path = dir.file("fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(path, std::ios::binary) << "{\"rules\": []}"; });
  const Result<std::string> text = read_text_file(path, "policy", "a policy", 1 << 20);
  writer.join();
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(*text, "{\"rules\": []}");
}

TEST(ReadTextFile, EachRefusalNamesTheFileAndItsKind) {
  TempDir dir;
  const std::string missing = dir.file("missing.json");
  const Result<std::string> absent = read_text_file(missing, "policy", "a policy", 1 << 20);
  ASSERT_THAT(absent, StatusIs(ErrorCode::kNotFound));
  EXPECT_EQ(absent.status().message(),
            "policy '" + missing + "': cannot open: No such file or directory");

  const Result<std::string> folder =
      read_text_file(dir.path().string(), "name mapping", "a name mapping", 1 << 20);
  ASSERT_THAT(folder, StatusIs(ErrorCode::kIo));
  EXPECT_EQ(folder.status().message(),
            "name mapping '" + dir.path().string() + "': is a directory, not a name mapping");

  const std::string big = dir.file("big.json");
  std::ofstream(big, std::ios::binary) << std::string(1001, ' ');
  const Result<std::string> large = read_text_file(big, "report", "a report", 1000);
  ASSERT_THAT(large, StatusIs(ErrorCode::kCorrupt));
  EXPECT_EQ(large.status().message(), "report '" + big + "': larger than 1000 bytes, not a report");
}

}  // namespace
}  // namespace qd
