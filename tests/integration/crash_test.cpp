// Crash safety (docs/store-format.md, section 14): SIGKILL the capturing process at many moments,
// then read the store. It must open; every tensor the child saw become durable must read back
// intact; whatever is there must be a prefix of the capture order with correct values; the run must
// be incomplete.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "../common/test_scale.h"
#include "qnn_debug/etdump/store_reader.h"

using qd::testing::IsOk;

namespace qd {
namespace {

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child spawn(const std::string& store, int flush_every, int exit_after = -1) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    const std::string every = std::to_string(flush_every);
    const std::string after = std::to_string(exit_after);
    execl(QD_CRASH_CHILD, QD_CRASH_CHILD, store.c_str(), every.c_str(),
          exit_after >= 0 ? after.c_str() : nullptr, nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  return {pid, fdopen(pipe_fds[0], "r")};
}

// Reads the child's progress until `target` tensors are durable; returns the last count seen.
int wait_for_durable(FILE* out, int target) {
  char line[128];
  int durable = 0;
  while (durable < target && std::fgets(line, sizeof line, out)) {
    std::sscanf(line, "durable %d", &durable);
  }
  return durable;
}

void kill_and_reap(const Child& child) {
  kill(child.pid, SIGKILL);
  int status = 0;
  waitpid(child.pid, &status, 0);
  std::fclose(child.out);
}

void check_store_after_kill(const std::string& path, int durable) {
  auto reader = StoreReader::open(path);
  ASSERT_THAT(reader, IsOk());
  const auto& tensors = testing::all_tensors(**reader);
  ASSERT_GE(tensors.size(), static_cast<size_t>(durable)) << "lost durable tensors";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& t = tensors[i];
    ASSERT_EQ(t.name, "t__debugID_" + std::to_string(i)) << "not a prefix of capture order";
    auto bytes = reader.value()->read_tensor(t);
    ASSERT_THAT(bytes, IsOk());
    const size_t expected = (i % 5) * 20000 + 100;
    ASSERT_EQ(bytes->size(), expected * 4);
    float first, last;
    std::memcpy(&first, bytes->data(), 4);
    std::memcpy(&last, bytes->data() + bytes->size() - 4, 4);
    EXPECT_EQ(first, float(i));
    EXPECT_EQ(last, float(i) + float(expected - 1) * 0.5f);
  }
  // A kill before the first flush point may leave no run at all; otherwise exactly the one.
  const auto& runs = reader.value()->runs();
  ASSERT_EQ(runs.size(), tensors.empty() ? runs.size() : 1u);
  ASSERT_LE(runs.size(), 1u);
  if (!runs.empty()) {
    EXPECT_FALSE(runs[0].complete) << "a killed run must not look complete";
  }
}

class CrashTest : public ::testing::TestWithParam<int> {};

TEST_P(CrashTest, KillAtVariousPointsKeepsEveryDurableTensor) {
  const int flush_every = GetParam();
  std::mt19937 rng(42 + flush_every);
  testing::TempDir dir;
  // 50 kills per flush interval, 100 in all: after 0 to 150 durable tensors, each then delayed
  // by up to 3 ms, so they land inside writes, flushes and HDF5 metadata updates alike. Under
  // QD_TEST_SCALE, every stride-th of the same kills (the first, before any tensor, always).
  const int stride = static_cast<int>(testing::repetition_stride());
  for (int kill = 0; kill < 50; ++kill) {
    const int target = kill == 0 ? 0 : static_cast<int>(rng() % 151);
    const uint32_t delay_us = rng() % 3000;
    if (kill % stride != 0) continue;
    SCOPED_TRACE("kill " + std::to_string(kill) + " after " + std::to_string(target));
    const std::string path = dir.file("kill_" + std::to_string(kill) + ".h5");
    Child child = spawn(path, flush_every);
    ASSERT_GT(child.pid, 0);
    char line[64];
    do {
      ASSERT_TRUE(std::fgets(line, sizeof line, child.out)) << "child did not start";
    } while (std::strncmp(line, "opened", 6) != 0);
    const int durable = target > 0 ? wait_for_durable(child.out, target) : 0;
    // A child that stopped early (every capture refused) would make every check below vacuous.
    ASSERT_GE(durable, target) << "the child stopped capturing before the kill";
    // Land the kill at a random moment of the following writes, not just at a flush boundary.
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    kill_and_reap(child);
    check_store_after_kill(path, durable);
  }
}

INSTANTIATE_TEST_SUITE_P(FlushEvery, CrashTest, ::testing::Values(1, 7));

// Kills aimed at qd_session_open: the store appears at its path only once it opens, so after
// any kill the path holds nothing or a store that opens (never an empty file, a truncated
// superblock or one "already open for write").
TEST(CrashTest, KillDuringOpenLeavesNothingOrAStoreThatOpens) {
  std::mt19937 rng(7);
  testing::TempDir dir;
  // How long an open takes here (HDF5 start-up, the pre-faulted queue): aim across it.
  const auto opened_after = [&] {
    Child child = spawn(dir.file("timing.h5"), 1);
    char line[64];
    (void)std::fgets(line, sizeof line, child.out);
    const auto start = std::chrono::steady_clock::now();
    (void)std::fgets(line, sizeof line, child.out);
    const auto took = std::chrono::steady_clock::now() - start;
    kill_and_reap(child);
    return std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  }();
  const uint32_t window_us = static_cast<uint32_t>(std::max<int64_t>(opened_after, 1000) * 3 / 2);
  int absent = 0, present = 0;
  for (int attempt = 0; attempt < 120; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const std::string path = dir.file("open_" + std::to_string(attempt) + ".h5");
    Child child = spawn(path, 1);
    ASSERT_GT(child.pid, 0);
    char line[64];
    ASSERT_TRUE(std::fgets(line, sizeof line, child.out)) << "child did not start";
    ASSERT_EQ(std::strncmp(line, "opening", 7), 0) << line;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % window_us));
    kill_and_reap(child);
    if (!std::filesystem::exists(path)) {
      ++absent;
      continue;
    }
    ++present;
    check_store_after_kill(path, 0);
  }
  // Both outcomes happened: the kills did land on both sides of the rename.
  EXPECT_GT(absent, 0);
  EXPECT_GT(present, 0) << "an open takes " << opened_after << " us";
}

// A host that returns from main with its session open: the library closes the session at exit,
// before the static destructors and HDF5's exit handler, so every tensor is written and the run
// ends. Before, the pipeline threads ran on under freed statics (a use after free under ASan)
// and the queued tensors were lost (1 of 40 written, the run incomplete).
TEST(CrashTest, ExitWithoutCloseWritesEveryTensor) {
  testing::TempDir dir;
  const std::string path = dir.file("exit.h5");
  Child child = spawn(path, /*flush_every=*/0, /*exit_after=*/40);
  ASSERT_GT(child.pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  std::fclose(child.out);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto reader = StoreReader::open(path);
  ASSERT_THAT(reader, IsOk());
  ASSERT_EQ(testing::all_tensors(**reader).size(), 40u);
  ASSERT_EQ(reader.value()->runs().size(), 1u);
  EXPECT_TRUE(reader.value()->runs()[0].complete);
  for (const TensorEntry& t : testing::all_tensors(**reader)) {
    EXPECT_THAT(reader.value()->verify_tensor(t), IsOk()) << t.name;
  }
}

}  // namespace
}  // namespace qd
