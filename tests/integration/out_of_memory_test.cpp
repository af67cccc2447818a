// Running out of memory is a clean exit 2 with one line naming the command and its inputs, never
// an abort (std::bad_alloc escaping a worker thread used to end `diff` with exit 134). The CLI
// runs under an address-space limit (`ulimit -v`) that lets it start, open both stores and
// compare a small pair, but not hold one tensor of the large pair whole: a device tensor stored
// in a permuted layout is un-permuted in memory (compare/src/measure.cpp), 128 MiB of floats.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/memory_reserve.h"

using qd::testing::IsOk;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define QD_RESERVES_SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define QD_RESERVES_SHADOW_MEMORY 1
#endif
#endif

namespace qd {
namespace {

using testing::CliResult;
using testing::TempDir;

// Above what the CLI needs to start and compare the small pair (about 40 MiB of address space,
// with a second thread's stack), below one large tensor un-permuted (128 MiB).
constexpr uint64_t kLimitMiB = 112;

// `tensors` int8 tensors of 1 x 32 x side x side: the reference in NCHW, the device stored NHWC
// (axis order {0, 3, 1, 2}), same values and scale.
Status write_permuted_pair(const std::string& ref_path, const std::string& device_path, int tensors,
                           uint64_t side) {
  const WriterOptions scratch{.deflate_level = 0, .durable = false};
  QD_ASSIGN_OR_RETURN(auto ref, StoreWriter::create(ref_path, {"oom", "cpu", "", "m", 0}, scratch));
  QD_ASSIGN_OR_RETURN(auto device,
                      StoreWriter::create(device_path, {"oom", "QnnHtp", "", "m", 0}, scratch));
  constexpr uint64_t kChannels = 32;
  const std::vector<uint8_t> bytes(kChannels * side * side, 3);
  for (int t = 0; t < tensors; ++t) {
    TensorRecord record;
    record.name = "conv" + std::to_string(t);
    record.handles = {t + 1};
    record.dtype = DType::kSFixed8;
    record.quant.scales = {0.5};
    record.quant.offsets = {0};
    record.dims = {1, kChannels, side, side};
    QD_RETURN_IF_ERROR(ref->append_tensor(record, bytes, 0));
    record.dims = {1, side, side, kChannels};
    record.axis_order = {0, 3, 1, 2};
    QD_RETURN_IF_ERROR(device->append_tensor(record, bytes, 0));
  }
  QD_RETURN_IF_ERROR(ref->close());
  return device->close();
}

CliResult diff_limited(const std::string& ref, const std::string& device, unsigned jobs) {
  TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err");
  const std::string command = "ulimit -v " + std::to_string(kLimitMiB * 1024) + " && exec " +
                              QD_CLI + " diff " + ref + " " + device + " --jobs " +
                              std::to_string(jobs) + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), testing::slurp(out),
          testing::slurp(err)};
}

class OutOfMemory : public ::testing::TestWithParam<unsigned> {
 protected:
  void SetUp() override {
#ifdef QD_RESERVES_SHADOW_MEMORY
    GTEST_SKIP() << "the sanitizer reserves terabytes of address space for its shadow memory: "
                    "under an address-space limit the CLI cannot even start";
#endif
  }
  TempDir dir_;
};

TEST_P(OutOfMemory, DiffSaysSoInOneLineAndExits2) {
  const unsigned jobs = GetParam();
  const std::string small_ref = dir_.file("small_ref.h5"), small_device = dir_.file("small_dev.h5");
  const std::string ref = dir_.file("ref.h5"), device = dir_.file("dev.h5");
  ASSERT_THAT(write_permuted_pair(small_ref, small_device, 2, 64), IsOk());
  ASSERT_THAT(write_permuted_pair(ref, device, 2, 1024), IsOk());  // 32 Mi elements each

  // The limit leaves room for everything but the large tensors: the small pair compares.
  const CliResult small = diff_limited(small_ref, small_device, jobs);
  ASSERT_EQ(small.exit_code, 0) << small.err;

  const CliResult large = diff_limited(ref, device, jobs);
  EXPECT_EQ(large.exit_code, 2) << large.err;
  EXPECT_EQ(large.err, "qnn-debug: error: out of memory while comparing " + ref + " with " +
                           device + " (the input needs more memory than this process may use)\n");
  EXPECT_EQ(large.out, "");
}

// With two jobs the worker thread takes a large tensor too (whichever fails first stops the
// other), so its std::bad_alloc must reach the command, not std::terminate.
INSTANTIATE_TEST_SUITE_P(Jobs, OutOfMemory, ::testing::Values(1u, 2u));

// This process's address space in bytes (VmSize), 0 if unknown.
uint64_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
  }
  return 0;
}

// The report is a JSON document; when memory runs out while it grows, its destructor (which
// allocates a stack of the children it frees) must still run during the unwinding, or
// std::terminate ends the process: what `diff` did at 5,000 runs. A child process, limited to
// 192 MiB more than it has, grows a document until std::bad_alloc under a MemoryReserve and
// must reach its catch.
TEST(MemoryReserve, LetsAGrowingJsonDocumentUnwindAfterAFailedAllocation) {
#ifdef QD_RESERVES_SHADOW_MEMORY
  GTEST_SKIP() << "the sanitizer reserves terabytes of address space for its shadow memory";
#endif
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlim_t limit = address_space_bytes() + (rlim_t{192} << 20);
    const rlimit as{limit, limit};
    if (setrlimit(RLIMIT_AS, &as) != 0) _exit(3);
    const pipeline::MemoryReserve reserve;
    try {
      nlohmann::json doc = nlohmann::json::array();
      for (uint64_t i = 0;; ++i) doc.push_back({{"pair", i}, {"metrics", {{"sqnr", 1.5}}}});
    } catch (const std::bad_alloc&) {
      _exit(2);
    }
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace qd
