// The qnn-debug executable as a user runs it: exit codes, one-line errors, inspect output.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/cli_runner.h"

namespace qd {
namespace {

using testing::CliResult;
using testing::run_cli;
using testing::slurp;

size_t line_count(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = dir_.file("example.h5");
    ASSERT_EQ(std::system((std::string(QD_EXAMPLE_CAPTURE) + " " + store_ + " >/dev/null").c_str()),
              0);
  }
  testing::TempDir dir_;
  std::string store_;
};

TEST_F(Cli, VersionAndHelpExitZero) {
  CliResult version = run_cli("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("qnn-debug 0."), std::string::npos) << version.out;
  CliResult help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("inspect"), std::string::npos);
  CliResult inspect_help = run_cli("inspect --help");
  EXPECT_EQ(inspect_help.exit_code, 0);
  EXPECT_NE(inspect_help.out.find("--json"), std::string::npos);
}

TEST_F(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(run_cli("").exit_code, 2);
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("inspect").exit_code, 2);
  EXPECT_EQ(run_cli("inspect " + store_ + " --no-such-flag").exit_code, 2);
}

// Damaged stores (truncated, bytes flipped) give one line on stderr and exit 2 (or, for a flip
// that changes nothing, a normal run): HDF5's own error stack, its "infinite loop closing
// library" and its h5clear advice never reach the user.
TEST_F(Cli, DamagedStoresGiveOneLineOnStderr) {
  std::ifstream in(store_, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string damaged = dir_.file("damaged.h5");
  std::vector<std::string> variants;
  for (size_t cut : {size_t{0}, size_t{47}, size_t{512}, bytes.size() / 3, bytes.size() - 1}) {
    variants.push_back(bytes.substr(0, cut));
  }
  for (size_t i = 0; i < 40; ++i) {
    std::string flipped = bytes;
    const size_t at = (i * 7919 + 13) % std::min<size_t>(bytes.size(), 8192);
    flipped[at] = static_cast<char>(flipped[at] ^ 0xFF);
    variants.push_back(std::move(flipped));
  }
  for (size_t v = 0; v < variants.size(); ++v) {
    std::ofstream(damaged, std::ios::binary | std::ios::trunc) << variants[v];
    for (const std::string& command :
         {"inspect --verify " + damaged, "diff " + store_ + " " + damaged}) {
      const CliResult r = run_cli(command);
      SCOPED_TRACE("variant " + std::to_string(v) + ": " + command);
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2) << r.exit_code;
      EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      for (const char* noise : {"HDF5-DIAG", "infinite loop", "h5clear"}) {
        EXPECT_EQ(r.err.find(noise), std::string::npos) << r.err;
      }
    }
  }
}

TEST_F(Cli, InspectListsRunsTensorsAndEvents) {
  CliResult r = run_cli("inspect " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* expected :
       {"qnn-debug-store v2", "SM8650", "sample_0", "complete", "aten_relu_default__debugID_3",
        "SFIXED_POINT_8", "[1,8,8,4]", "NHWC->NCHW", "per-axis 4 ch on axis 0",
        "DSP:before_context_created", "850 cycles"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected;
  }
}

TEST_F(Cli, InspectJsonIsMachineReadable) {
  CliResult r = run_cli("inspect --json " + store_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["format"], "qnn-debug-store");
  EXPECT_EQ(doc["runs"].size(), 3u);
  EXPECT_EQ(doc["tensors"].size(), 7u);
  const auto& conv = doc["tensors"][1];
  EXPECT_EQ(conv["name"], "aten_convolution_default__debugID_2");
  EXPECT_EQ(conv["handles"], nlohmann::json::array({2}));
  EXPECT_EQ(conv["dtype"], "SFIXED_POINT_8");
  EXPECT_EQ(conv["axis_order"], nlohmann::json::array({0, 3, 1, 2}));
  EXPECT_EQ(conv["quantization"]["convention"], "qnn_offset");
  EXPECT_NEAR(conv["stats"]["max"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(doc["memory_checkpoints"][0]["run"], nullptr);
  EXPECT_EQ(doc["graph_nodes"].size(), 3u);
  CliResult one = run_cli("inspect --json --run 2 " + store_);
  EXPECT_EQ(nlohmann::json::parse(one.out)["tensors"].size(), 3u);
  EXPECT_EQ(run_cli("inspect --run 9 " + store_).exit_code, 2);
  EXPECT_EQ(run_cli("inspect --verify " + store_).exit_code, 0);
}

// The examples docs/c-api.md shows write stores that inspect accepts and verifies.
TEST_F(Cli, DocumentedExamplesWriteValidStores) {
  for (const char* example : {QD_EXAMPLE_MINIMAL, QD_EXAMPLE_MINIMAL_CPP}) {
    const std::string out = dir_.file(std::filesystem::path(example).filename().string() + ".h5");
    ASSERT_EQ(std::system((std::string(example) + " " + out + " >/dev/null").c_str()), 0)
        << example;
    CliResult r = run_cli("inspect --verify " + out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("NHWC->NCHW"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("complete"), std::string::npos) << r.out;
  }
}

// Bad input: exit 2 and exactly one line on stderr that names the file.
void expect_one_line_error(const CliResult& r, const std::string& path, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(line_count(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(Cli, InspectRejectsMissingNonHdf5AndTruncatedFiles) {
  const std::string missing = dir_.file("missing.h5");
  expect_one_line_error(run_cli("inspect " + missing), missing, "no such file");

  const std::string text = dir_.file("notes.txt");
  std::ofstream(text) << "hello\n";
  expect_one_line_error(run_cli("inspect " + text), text, "not an HDF5 file");

  const std::string cut = dir_.file("cut.h5");
  std::filesystem::copy_file(store_, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(store_) / 3);
  CliResult truncated = run_cli("inspect --verify " + cut);
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_EQ(line_count(truncated.err), 1u) << truncated.err;
  EXPECT_NE(truncated.err.find(cut), std::string::npos) << truncated.err;
}

}  // namespace
}  // namespace qd
