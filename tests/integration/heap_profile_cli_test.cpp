// `qnn-debug capture <format> --heap-profile FILE`: the HTP heap profile ExecuTorch's QNN backend
// writes is stored beside the captured dump as memory checkpoints, shown with their change by
// `inspect` and carried into the report; a bad profile writes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/importers/npy.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using testing::run_cli;

class HeapProfileCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(run_cli("demo --etdump --fault none --out " + out_).exit_code, 0);
  }
  // `capture etdump` of the demo's device dump with `more` options.
  testing::CliResult capture(const std::string& more, const std::string& store) {
    const std::string et = out_ + "/executorch";
    return run_cli("capture etdump " + et + "/device.etdp --debug-buffer " + et +
                   "/debug_output.bin --encodings " + et + "/model_net.json --etrecord " + et +
                   "/etrecord.bin " + more + " -o " + store);
  }
  std::string file(const std::string& name) const { return dir_.file(name); }

  testing::TempDir dir_;
  std::string out_ = dir_.file("demo");
};

TEST_F(HeapProfileCapture, StoresTheCheckpointsAndTheReportCarriesThem) {
  testing::write_text(file("heap.txt"),
                      "DSP:before_context_created (bytes), 6291456\r\n"
                      "DSP:after_context_freed (bytes), 6299648\r\n");
  const auto captured = capture("--heap-profile " + file("heap.txt"), file("dev.h5"));
  ASSERT_EQ(captured.exit_code, 0) << captured.err;
  const auto inspected = run_cli("inspect " + file("dev.h5"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  EXPECT_NE(inspected.out.find("DSP:before_context_created               6291456 bytes\n"),
            std::string::npos)
      << inspected.out;
  EXPECT_NE(inspected.out.find("DSP:after_context_freed                  6299648 bytes (+8192)\n"),
            std::string::npos)
      << inspected.out;
  const auto diffed =
      run_cli("diff " + out_ + "/reference.h5 " + file("dev.h5") + " --json " + file("r.json"));
  ASSERT_LE(diffed.exit_code, 1) << diffed.err;
  const nlohmann::json report = nlohmann::json::parse(testing::slurp(file("r.json")));
  const nlohmann::json& memory = report["device"]["memory_checkpoints"];
  ASSERT_EQ(memory.size(), 2u) << memory;
  EXPECT_EQ(memory[0]["label"], "DSP:before_context_created");
  EXPECT_EQ(memory[1]["bytes"], 6299648);
  EXPECT_TRUE(memory[1]["run"].is_null());  // recorded outside the dump's runs
}

TEST_F(HeapProfileCapture, ABadProfileWritesNothingAndKeepsTheOldStore) {
  testing::write_text(file("dev.h5"), "an older store");
  testing::write_text(file("bad.txt"), "DSP:before_context_created (bytes), 6291456\nDSP:x 12\n");
  const auto bad = capture("--heap-profile " + file("bad.txt"), file("dev.h5"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "qnn-debug: error: heap profile '" + file("bad.txt") +
                         "': line 2: expected \"<identifier> (bytes), <value>\": \"DSP:x 12\"\n");
  EXPECT_EQ(testing::slurp(file("dev.h5")), "an older store");
  const auto missing = capture("--heap-profile " + file("none.txt"), file("new.h5"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("heap profile '" + file("none.txt") + "': cannot open"),
            std::string::npos)
      << missing.err;
  EXPECT_FALSE(std::filesystem::exists(file("new.h5")));
}

// The names in `dir`, to show that a failed capture left nothing behind (no staging file either).
std::set<std::string> names_in(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

// An npz of one float32 array, as np.savez writes it.
void write_npz(const std::string& path) {
  Result<importers::NpzWriter> npz = importers::NpzWriter::create(path);
  ASSERT_THAT(npz, IsOk());
  const std::vector<float> values = {1.0f, -2.5f, 3.0f, 0.25f, 8.0f, -1.0f};
  const std::vector<uint64_t> shape = {2, 3};
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  ASSERT_THAT(npz->begin_array("conv_out__debugID_3", DType::kFloat32, shape), IsOk());
  ASSERT_THAT(npz->write(bytes), IsOk());
  ASSERT_THAT(npz->end_array(), IsOk());
  ASSERT_THAT(npz->finish(), IsOk());
}

class HeapProfileNpz : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(write_npz(file("ref.npz"))); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  testing::CliResult capture(const std::string& heap, const std::string& store) {
    return run_cli("capture npz " + file("ref.npz") + " --heap-profile " + heap + " -o " + store);
  }
  testing::TempDir dir_;
};

TEST_F(HeapProfileNpz, CaptureNpzStoresTheCheckpointsOutsideTheRun) {
  testing::write_text(file("heap.txt"),
                      "DSP:before_context_created (bytes), 6291456\n"
                      "DSP:after_context_freed (bytes), 6299648\n");
  const auto captured = capture(file("heap.txt"), file("s.h5"));
  ASSERT_EQ(captured.exit_code, 0) << captured.err;
  auto store = StoreReader::open(file("s.h5"));
  ASSERT_THAT(store, IsOk());
  EXPECT_EQ((*store)->tensor_count(), 1u);  // the dump itself is captured as without the option
  ASSERT_EQ((*store)->runs().size(), 1u);
  const std::vector<MemoryCheckpoint>& memory = (*store)->memory_checkpoints();
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0].label, "DSP:before_context_created");
  EXPECT_EQ(memory[0].bytes, 6291456u);
  EXPECT_EQ(memory[0].run_id, kNoRun);
  EXPECT_EQ(memory[1].label, "DSP:after_context_freed");
  EXPECT_EQ(memory[1].bytes, 6299648u);
  EXPECT_EQ(memory[1].run_id, kNoRun);
  EXPECT_GT(memory[1].time_unix_ns, 0);  // when the capture stored it: the file has no times

  const auto inspected = run_cli("inspect " + file("s.h5"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  EXPECT_NE(inspected.out.find("  memory  run - DSP:before_context_created               6291456 "
                               "bytes\n  memory  run - DSP:after_context_freed                  "
                               "6299648 bytes (+8192)\n"),
            std::string::npos)
      << inspected.out;
}

TEST_F(HeapProfileNpz, ABadProfileFailsWithExit2AndLeavesNoStore) {
  const std::set<std::string> before = names_in(dir_.path());
  testing::write_text(file("heap.txt"),
                      "DSP:before_context_created (bytes), 6291456\r\n"
                      "DSP:after_context_freed (bytes), -8192\r\n");
  const auto bad = capture(file("heap.txt"), file("s.h5"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "qnn-debug: error: heap profile '" + file("heap.txt") +
                         "': line 2: the value is not a whole number of bytes below 2^64: "
                         "\"DSP:after_context_freed (bytes), -8192\"\n");
  EXPECT_EQ(bad.out, "");
  std::set<std::string> after = names_in(dir_.path());
  after.erase("heap.txt");
  EXPECT_EQ(after, before);  // no s.h5, no staging file

  testing::write_text(file("empty.txt"), "");
  const auto empty = capture(file("empty.txt"), file("s.h5"));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_EQ(empty.err, "qnn-debug: error: heap profile '" + file("empty.txt") +
                           "': a heap profile with no checkpoint\n");
  EXPECT_FALSE(std::filesystem::exists(file("s.h5")));
}

// The option comes from the formats' registry: every capture command and both sides of diff.
TEST(HeapProfileOption, EveryCaptureFormatAndDiffTakeIt) {
  for (const std::string format : {"etdump", "qnn-net-run", "npz"}) {
    const auto help = run_cli("capture " + format + " --help");
    ASSERT_EQ(help.exit_code, 0) << format << help.err;
    EXPECT_NE(help.out.find("--heap-profile TEXT"), std::string::npos) << format << help.out;
  }
  const auto help = run_cli("diff --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("--ref-heap-profile"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--dev-heap-profile"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace qd
