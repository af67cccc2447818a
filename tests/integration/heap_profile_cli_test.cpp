// `qnn-debug capture <format> --heap-profile FILE`: the HTP heap profile ExecuTorch's QNN backend
// writes is stored beside the captured dump as memory checkpoints, shown with their change by
// `inspect` and carried into the report; a bad profile writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/temp_dir.h"

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

}  // namespace
}  // namespace qd
