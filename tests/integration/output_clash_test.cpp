// Outputs that clash (docs/output-files.md): a file written to "-" is all that reaches stdout (the
// summary and "wrote ..." lines go to stderr), two outputs may not share "-", and an output
// naming one of the command's inputs (by device and inode: the same name, a hard link or a
// symlink) is refused with exit 2 before anything is written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/cli_runner.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::kHdf5Signature;
using testing::run_cli;
using testing::slurp;

// What a zip archive ends with when it has no comment: the end of central directory record,
// 22 bytes from the end. Anything printed after the archive moves it.
bool ends_as_a_zip(const std::string& bytes) {
  return bytes.size() >= 22 && bytes.compare(bytes.size() - 22, 4, "PK\x05\x06") == 0;
}

class OutputClash : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = dir_.file("ref.h5");
    ASSERT_EQ(std::system((std::string(QD_EXAMPLE_CAPTURE) + " " + store_ + " >/dev/null").c_str()),
              0);
    device_ = dir_.file("dev.h5");
    fs::copy_file(store_, device_);
  }
  CliResult diff(const std::string& outputs) {
    return run_cli("diff " + store_ + " " + device_ + " " + outputs);
  }
  // Runs `command`, which must be refused as naming `input` (by `path`) and leave it as it was.
  void expect_refused(const std::string& command, const std::string& input, const std::string& path,
                      const std::string& what) {
    const std::string before = slurp(input);
    ASSERT_FALSE(before.empty()) << input;
    CliResult result = run_cli(command);
    EXPECT_EQ(result.exit_code, 2) << command << "\n" << result.err;
    EXPECT_EQ(slurp(input), before) << command << ": the input was changed";
    EXPECT_NE(result.err.find("'" + path + "' is " + what), std::string::npos) << command << "\n"
                                                                               << result.err;
    EXPECT_NE(result.err.find("would destroy that input"), std::string::npos) << result.err;
    EXPECT_EQ(result.out, "") << command;
    for (const auto& entry : fs::directory_iterator(dir_.path())) {
      EXPECT_NE(entry.path().filename().string().front(), '.') << "left behind: " << entry.path();
    }
  }
  std::string npz() {
    const std::string path = dir_.file("x.npz");
    EXPECT_EQ(run_cli("export npz " + store_ + " -o " + path).exit_code, 0);
    return path;
  }
  testing::TempDir dir_;
  std::string store_, device_;
};

TEST_F(OutputClash, DiffJsonOnStdoutIsTheWholeOfStdout) {
  CliResult result = diff("--json - --csv " + dir_.file("r.csv"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json report = nlohmann::json::parse(result.out);  // throws on anything extra
  EXPECT_EQ(report.at("schema"), "qnn-debug-report");
  // The summary is still printed, on stderr.
  EXPECT_NE(result.err.find("first divergence"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_.file("-")));
}

TEST_F(OutputClash, ReportAndCheckViewsOnStdoutAreTheWholeOfStdout) {
  ASSERT_EQ(diff("--json " + dir_.file("r.json")).exit_code, 0);
  for (const std::string& command : {"report " + dir_.file("r.json") + " --json -",
                                     "check " + dir_.file("r.json") + " --json -"}) {
    CliResult result = run_cli(command);
    ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.err;
    EXPECT_EQ(nlohmann::json::parse(result.out).at("schema"), "qnn-debug-report") << command;
    EXPECT_NE(result.err.find("first divergence"), std::string::npos) << result.err;
  }
}

TEST_F(OutputClash, WithoutDashTheSummaryStaysOnStdout) {
  CliResult result = diff("--json " + dir_.file("r.json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("first divergence"), std::string::npos) << result.out;
}

TEST_F(OutputClash, CaptureToStdoutWritesTheStoreAlone) {
  const std::string x = npz();
  CliResult piped = run_cli("capture npz " + x + " -o -");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out.substr(0, 8), std::string(kHdf5Signature, 8));
  EXPECT_NE(piped.err.find("wrote -"), std::string::npos) << piped.err;
  CliResult normal = run_cli("capture npz " + x + " -o " + dir_.file("file.h5"));
  ASSERT_EQ(normal.exit_code, 0) << normal.err;
  EXPECT_EQ(piped.out.size(), slurp(dir_.file("file.h5")).size());
  // The bytes from stdout are a whole store with the same content.
  testing::write_text(dir_.file("piped.h5"), piped.out);
  CliResult verified = run_cli("inspect --verify --json " + dir_.file("piped.h5"));
  ASSERT_EQ(verified.exit_code, 0) << verified.err;
  CliResult expected = run_cli("inspect --json " + dir_.file("file.h5"));
  EXPECT_EQ(nlohmann::json::parse(verified.out).at("tensors"),  // names, values' CRC-32C...
            nlohmann::json::parse(expected.out).at("tensors"));
}

TEST_F(OutputClash, ExportToStdoutWritesTheNpzAlone) {
  CliResult piped = run_cli("export npz " + store_ + " -o -");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out.substr(0, 4), std::string("PK\x03\x04", 4));
  EXPECT_TRUE(ends_as_a_zip(piped.out)) << "text after the archive";
  EXPECT_NE(piped.err.find("wrote -"), std::string::npos) << piped.err;
  EXPECT_EQ(piped.out, slurp(npz()));
}

TEST_F(OutputClash, TwoOutputsOnStdoutAreRefused) {
  CliResult result = diff("--json - --csv -");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find("--json and --csv both write to '-'"), std::string::npos) << result.err;
}

// Two views into one file kept only the one written last; through a link or "./" it is the same.
TEST_F(OutputClash, TwoOutputsIntoOneFileAreRefused) {
  const std::string report = dir_.file("r.out");
  fs::create_symlink(report, dir_.file("link.out"));
  for (const std::string& other : {report, dir_.file("link.out"), dir_.file("./r.out")}) {
    CliResult result = diff("--json " + report + " --csv " + other);
    EXPECT_EQ(result.exit_code, 2) << other;
    EXPECT_NE(result.err.find("--json and --csv both write"), std::string::npos) << result.err;
    EXPECT_FALSE(fs::exists(report)) << "nothing is written";
  }
  EXPECT_NE(diff("--json /dev/null --csv /dev/null").exit_code, 2) << "a device takes both";
}

TEST_F(OutputClash, DiffRefusesAnOutputThatIsAnInput) {
  expect_refused("diff " + store_ + " " + device_ + " --json " + store_, store_, store_,
                 "the reference input");
  expect_refused(
      "diff " + store_ + " " + device_ + " --html " + dir_.file("r.html") + " --csv " + device_,
      device_, device_, "the device input");
  expect_refused("diff " + store_ + " " + device_ + " " + store_ + " --json " + store_ + "x " +
                     "--csv " + store_,
                 store_, store_, "the reference input");
}

TEST_F(OutputClash, AHardLinkOrASymlinkToAnInputIsTheSameFile) {
  const std::string hard = dir_.file("hard.json"), soft = dir_.file("soft.json");
  ASSERT_EQ(::link(device_.c_str(), hard.c_str()), 0);
  fs::create_symlink(device_, soft);
  expect_refused("diff " + store_ + " " + device_ + " --json " + hard, device_, hard,
                 "the device input '" + device_ + "' (the same file)");
  expect_refused("diff " + store_ + " " + device_ + " --json " + soft, device_, soft,
                 "the device input '" + device_ + "' (the same file)");
  EXPECT_TRUE(fs::is_symlink(soft));
  // A symlink given as the input, the real file as the output.
  expect_refused("diff " + store_ + " " + soft + " --json " + device_, device_, device_,
                 "the device input '" + soft + "' (the same file)");
}

TEST_F(OutputClash, InputsGivenByOptionsCount) {
  const std::string policy = dir_.file("policy.json"), map = dir_.file("map.json");
  testing::write_text(policy, R"({"default": {"fail_below_db": 10}})");
  testing::write_text(map, "{}");
  const std::string pair = "diff " + store_ + " " + device_;
  expect_refused(pair + " --policy " + policy + " --json " + policy, policy, policy,
                 "the --policy file");
  expect_refused(pair + " --map " + map + " --csv " + map, map, map, "the --map file");
  const std::string third = dir_.file("third.h5");
  fs::copy_file(store_, third);
  expect_refused(pair + " --sim " + third + " --json " + third, third, third, "the --sim input");
  expect_refused(pair + " --isolated " + third + " --html " + third, third, third,
                 "the --isolated input");
  expect_refused("diff " + npz() + " " + device_ + " --ref-encodings " + map + " --json " + map,
                 map, map, "the --ref-encodings input");
  expect_refused("diff " + store_ + " " + npz() + " --encodings " + map + " --json " + map, map,
                 map, "the --encodings input");
}

TEST_F(OutputClash, CaptureAndExportRefuseToOverwriteTheirInput) {
  const std::string x = npz();
  expect_refused("capture npz " + x + " -o " + x, x, x, "the input");
  const std::string encodings = dir_.file("enc.json");
  testing::write_text(encodings, "{}");
  expect_refused("capture npz " + x + " --encodings " + encodings + " -o " + encodings, encodings,
                 encodings, "the --encodings input");
  expect_refused("export npz " + store_ + " -o " + store_, store_, store_, "the store");
}

TEST_F(OutputClash, ReportAndCheckRefuseToOverwriteTheSavedReport) {
  const std::string saved = dir_.file("r.json");
  ASSERT_EQ(diff("--json " + saved).exit_code, 0);
  expect_refused("report " + saved + " --json " + saved, saved, saved, "the report");
  expect_refused("check " + saved + " --html " + saved, saved, saved, "the report");
  const std::string policy = dir_.file("policy.json");
  testing::write_text(policy, R"({"default": {"fail_below_db": 10}})");
  expect_refused("check " + saved + " --policy " + policy + " --csv " + policy, policy, policy,
                 "the --policy file");
}

}  // namespace
}  // namespace qd
