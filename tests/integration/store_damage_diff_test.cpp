// `qnn-debug diff` on a store whose writer was killed (docs/store-format.md, sections 11 and 14):
// only the torn tail (bad rows after the last good one) is skipped, and the skip is said in the
// terminal and in the report; a bad row before a good one is damage (exit 2 naming the store,
// the table and the row), never a row that silently drops out of the comparison.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../common/cli_runner.h"
#include "../common/report_json.h"
#include "../common/status_matchers.h"
#include "qnn_debug/etdump/store_writer.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using testing::run_cli;
using testing::slurp;

constexpr int kTensors = 13;

std::string tensor_name(int i) {
  return "tensor_row_" + std::string(i < 10 ? "0" : "") + std::to_string(i);
}

// The same 13 tensors in every store: 4 float32 each, with its own debug handle.
void write_tensors(StoreWriter& writer) {
  ASSERT_THAT(writer.begin_run("sample", 1), IsOk());
  for (int i = 0; i < kTensors; ++i) {
    TensorRecord r;
    r.name = tensor_name(i);
    r.handles = {i};
    r.dims = {4};
    const float values[4] = {float(i), 0.5f, -1.0f, 2.0f};
    ASSERT_TRUE(
        writer.append_tensor(r, {reinterpret_cast<const uint8_t*>(values), sizeof values}, 0)
            .is_ok());
  }
}

void write_finished_store(const std::string& path) {
  auto writer = StoreWriter::create(path, {"store_damage_test", "cpu", "", "m", 1});
  ASSERT_THAT(writer, IsOk());
  write_tensors(**writer);
  ASSERT_THAT((*writer)->end_run(2, 0), IsOk());
  ASSERT_THAT((*writer)->close(), IsOk());
}

// A store whose writer committed every row and was then killed: still marked open for writing.
void write_killed_store(const std::string& path) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto writer = StoreWriter::create(path, {"store_damage_test", "QnnHtp", "", "m", 1});
    if (!writer.is_ok()) _exit(3);
    write_tensors(**writer);
    if (!(*writer)->commit().is_ok()) _exit(4);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "writer exited early";
}

// Flips one bit of tensor `i`'s name in /meta: its row no longer matches its checksum.
void flip_name_bit(const std::string& path, int i) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(file)), {});
  const size_t at = content.find(tensor_name(i));
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(content.find(tensor_name(i), at + 1), std::string::npos) << "the name is not unique";
  file.seekp(static_cast<std::streamoff>(at + 2));
  file.put(static_cast<char>(content[at + 2] ^ 0x01));
}

class KilledStoreDiff : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = dir_.file("ref.h5");
    device_ = dir_.file("device.h5");
    write_finished_store(ref_);
    write_killed_store(device_);
  }
  testing::TempDir dir_;
  std::string ref_;
  std::string device_;
};

TEST_F(KilledStoreDiff, ADamagedRowBeforeTheLastGoodOneIsDamageNotASkip) {
  flip_name_bit(device_, 1);
  const auto r = run_cli("diff " + ref_ + " " + device_);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(device_ + ": /tensors row 1 is damaged: checksum mismatch"),
            std::string::npos)
      << r.err;
  // inspect agrees: the store is refused, not listed with a warning.
  EXPECT_EQ(run_cli("inspect " + device_).exit_code, 2);
}

TEST_F(KilledStoreDiff, ATornTailIsSkippedAndSaidInTheSummaryAndTheReport) {
  flip_name_bit(device_, kTensors - 1);
  const std::string json_path = dir_.file("r.json");
  const auto r = run_cli("diff " + ref_ + " " + device_ + " --json " + json_path);
  ASSERT_NE(r.exit_code, 2) << r.err;
  const std::string warning =
      device_ + ": /tensors row 12 ignored (torn when the writer stopped): checksum mismatch";
  EXPECT_NE(r.out.find("warning: " + warning), std::string::npos) << r.out;
  const auto report = nlohmann::json::parse(slurp(json_path));
  EXPECT_TRUE(testing::has_warning(report, warning)) << report.at("warnings").dump();
  // 12 tensors compared, the torn 13th is unmatched on the reference side.
  EXPECT_NE(r.out.find("12"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qd
