// The qnn-debug executable as a user runs it: exit codes, one-line errors, inspect output.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "../common/cli_runner.h"
#include "qnn_debug/importers/input_format.h"

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

namespace qd {
namespace {

// ---- usage errors: one line, the prefix, the nearest valid word, exit 2 (issue 17) ----------

void expect_usage_error(const std::string& args, const std::string& line) {
  const testing::CliResult r = testing::run_cli(args);
  SCOPED_TRACE(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "qnn-debug: error: " + line + "\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliUsage, UnknownOptionNamesTheNearestFlag) {
  expect_usage_error("diff a.h5 b.h5 --net-jsn net.json",
                     "unknown option '--net-jsn' for 'qnn-debug diff'; did you mean '--net-json'?");
  expect_usage_error("inspect a.h5 --jsn",
                     "unknown option '--jsn' for 'qnn-debug inspect'; did you mean '--json'?");
  expect_usage_error("capture npz a.npz -o s.h5 --encoding e.json",
                     "unknown option '--encoding' for 'qnn-debug capture npz'; did you mean "
                     "'--encodings'?");
  expect_usage_error("inspect a.h5 --frobnicate",
                     "unknown option '--frobnicate' for 'qnn-debug inspect'");
  expect_usage_error("inspect a.h5 b.h5", "unexpected argument 'b.h5' for 'qnn-debug inspect'");
}

TEST(CliUsage, UnknownCommandNamesTheNearestCommand) {
  expect_usage_error("dif a b",
                     "unknown command 'dif' for 'qnn-debug'; did you mean 'diff'? (commands: "
                     "inspect, diff, report, check, capture, export, demo)");
  expect_usage_error("capture npzz a.npz -o s.h5",
                     "unknown command 'npzz' for 'qnn-debug capture'; did you mean 'npz'? "
                     "(commands: qnn-net-run, npz, etdump)");
  expect_usage_error("frobnicate",
                     "unknown command 'frobnicate' for 'qnn-debug' (commands: inspect, diff, "
                     "report, check, capture, export, demo)");
  expect_usage_error("",
                     "'qnn-debug' needs a command: inspect, diff, report, check, capture, "
                     "export, demo");
  expect_usage_error("capture", "'qnn-debug capture' needs a command: qnn-net-run, npz, etdump");
}

TEST(CliUsage, NegativeCountsAreRefusedByName) {
  expect_usage_error("diff a.h5 b.h5 --top -1", "--top: must be 0 or more, not -1");
  expect_usage_error("diff a.h5 b.h5 --jobs=-2", "--jobs: must be 0 or more, not -2");
  expect_usage_error("inspect a.h5 --limit -5", "--limit: must be 0 or more, not -5");
  expect_usage_error("report r.json --top -3", "--top: must be 0 or more, not -3");
}

// ---- inspect on what is not a store (issue 17) ---------------------------------------------

const std::string kRealEtdump = std::string(QD_REALDATA_DIR) + "/executorch/etdump.etdp";
const std::string kRealProgram =
    std::string(QD_REALDATA_DIR) + "/executorch/stories260k_hybrid_llama_qnn.pte";
const std::string kRealBundled = std::string(QD_REALDATA_DIR) + "/executorch/bundled_program.bp";

// The real files live beside the repository (../shared/realdata), as in CI; a clone elsewhere
// skips what needs them.
#define QD_SKIP_WITHOUT_REAL_DATA() \
  if (!std::filesystem::exists(kRealEtdump)) GTEST_SKIP() << kRealEtdump << " is not here"

void expect_error_line(const testing::CliResult& r, const std::string& line) {
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "qnn-debug: error: " + line + "\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliInspect, NamesDumpsAndPointsToCapture) {
  testing::TempDir dir;
  const std::string npz = dir.file("ref.npz");
  std::ofstream(npz, std::ios::binary) << std::string("PK\x03\x04", 4) << "rest";
  expect_error_line(run_cli("inspect " + npz),
                    "'" + npz +
                        "' is an npz/npy file, not a qnn-debug store: make one with "
                        "`qnn-debug capture npz " +
                        npz + " -o store.h5` (diff also reads it as it is)");
  const std::string folder = dir.file("HTP_OUT");
  std::filesystem::create_directory(folder);
  expect_error_line(run_cli("inspect " + folder),
                    "'" + folder +
                        "' is a folder (read as a qnn-net-run output), not a qnn-debug "
                        "store: make one with `qnn-debug capture qnn-net-run " +
                        folder +
                        " --net-json model_net.json -o store.h5` (diff also reads it as it is)");
  QD_SKIP_WITHOUT_REAL_DATA();
  expect_error_line(
      run_cli("inspect " + kRealEtdump),
      "'" + kRealEtdump +
          "' is an ExecuTorch ETDump, not a qnn-debug store: make "
          "one with `qnn-debug capture etdump " +
          kRealEtdump +
          " --debug-buffer debug_output.bin -o store.h5` (diff also reads it as it is)");
}

TEST(CliInspect, NamesExecutorchPrograms) {
  QD_SKIP_WITHOUT_REAL_DATA();
  testing::TempDir dir;
  const std::string out = dir.file("s.h5");
  const std::string program_line =
      "'" + kRealProgram +
      "': an ExecuTorch program (flatbuffer ET12), not a dump of its "
      "tensors: run it with ETDump enabled (qnn_executor_runner --dump_intermediate_outputs) and "
      "give the .etdp it writes";
  expect_error_line(run_cli("capture etdump " + kRealProgram + " -o " + out), program_line);
  expect_error_line(run_cli("inspect " + kRealProgram), program_line);
  expect_error_line(run_cli("capture etdump " + kRealBundled + " -o " + out),
                    "'" + kRealBundled +
                        "': an ExecuTorch bundled program (flatbuffer BP08): a "
                        "program and its test inputs, not a dump of tensors: run it with ETDump "
                        "enabled and give the .etdp it writes");
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The real tutorial ETDump: 14 instructions, each a native_call_<op>.out and an OPERATOR_CALL
// (../shared/realdata/executorch/SOURCES.md). Rows are per instruction, by the ETDump's own
// instruction_id: two convolutions (instructions 0 and 3) are two rows, 14 OPERATOR_CALLs 14
// rows, Method::init (outside any instruction) has none, and every duration is an integer.
TEST(CliInspect, ProfileEventsPerInstructionOnTheRealEtdump) {
  QD_SKIP_WITHOUT_REAL_DATA();
  testing::TempDir dir;
  const std::string store = dir.file("tutorial.h5");
  ASSERT_EQ(run_cli("capture etdump " + kRealEtdump + " -o " + store).exit_code, 0);
  const testing::CliResult r = run_cli("inspect --limit 0 " + store);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t table = r.out.find("profile: duration per op, one row per instruction");
  ASSERT_NE(table, std::string::npos) << r.out;
  const std::string durations = r.out.substr(table, r.out.find("\nevents\n") - table);
  std::vector<std::string> convolutions, operator_calls, method_init;
  std::istringstream lines(durations);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("native_call_convolution.out ") != std::string::npos)
      convolutions.push_back(line);
    if (line.find("OPERATOR_CALL ") != std::string::npos) operator_calls.push_back(line);
    if (line.find("Method::init ") != std::string::npos) method_init.push_back(line);
  }
  ASSERT_EQ(convolutions.size(), 2u) << durations;
  EXPECT_EQ(operator_calls.size(), 14u) << durations;
  ASSERT_EQ(method_init.size(), 1u) << durations;
  // The first convolution, instruction 0, ran from tick 426786 to 971569: 544783 ticks.
  std::istringstream first(convolutions[0]);
  std::string name, instruction, occurrence, handles, calls, mean, max, total, unit;
  first >> name >> instruction >> occurrence >> handles >> calls >> mean >> max >> total >> unit;
  EXPECT_EQ(instruction, "0");
  EXPECT_EQ(occurrence, "0");
  EXPECT_EQ(calls, "1");
  EXPECT_EQ(mean, "544783");
  EXPECT_EQ(max, "544783");
  EXPECT_EQ(total, "544783");
  EXPECT_EQ(unit, "ticks");
  std::istringstream second(convolutions[1]);
  second >> name >> instruction;
  EXPECT_EQ(instruction, "3");
  std::istringstream init(method_init[0]);
  init >> name >> instruction;
  EXPECT_EQ(instruction, "-");
  EXPECT_EQ(durations.find("e+"), std::string::npos) << "a duration in exponent form:\n"
                                                     << durations;

  const testing::CliResult j = run_cli("inspect --json " + store);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  std::vector<int64_t> conv_instructions, call_instructions;
  for (const auto& e : doc["profile_events"]) {
    if (e["name"] == "native_call_convolution.out")
      conv_instructions.push_back(e["instruction_id"]);
    if (e["name"] == "OPERATOR_CALL") call_instructions.push_back(e["instruction_id"]);
    if (e["name"] == "Method::init") {
      EXPECT_TRUE(e["instruction_id"].is_null()) << e;
    }
    EXPECT_EQ(e["occurrence"], 0) << e;  // each instruction runs once per run here
  }
  EXPECT_EQ(conv_instructions, (std::vector<int64_t>{0, 3}));
  ASSERT_EQ(call_instructions.size(), 14u);
  for (int64_t k = 0; k < 14; ++k) EXPECT_EQ(call_instructions[static_cast<size_t>(k)], k);
}

// `inspect` of an encodings file: every tensor's encoding and the lint's findings, no store.
TEST(CliInspect, ListsAndLintsAnEncodingsFile) {
  testing::TempDir dir;
  const std::string map = dir.file("encodings.json");
  std::ofstream(map) << R"({"conv1_out": {"scale": 0.05, "offset": -128, "bitwidth": 8},
                             "dead_out": {"scale": 0, "offset": 0},
                             "wild_out": {"scale": 1e36, "offset": 0, "bitwidth": 8}})";
  const testing::CliResult r = run_cli("inspect " + map);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("format    plain encodings map\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensors   3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("problems  2 tensors have an encoding that cannot be right"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("encoding: scale_not_positive (scale 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("encoding: range_overflow"), std::string::npos) << r.out;

  const testing::CliResult j = run_cli("inspect --json " + map);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["format"], "plain encodings map");
  EXPECT_EQ(doc["flagged_tensors"], 2);
  ASSERT_EQ(doc["tensors"].size(), 3u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& t : doc["tensors"]) by_name[t["name"]] = t;
  EXPECT_TRUE(by_name["conv1_out"]["encoding_problems"].empty());
  EXPECT_EQ(by_name["conv1_out"]["quantization"]["scales"][0], 0.05);
  EXPECT_EQ(by_name["conv1_out"]["quantization"]["offsets"][0], -128);
  ASSERT_EQ(by_name["dead_out"]["encoding_problems"].size(), 1u);
  EXPECT_EQ(by_name["dead_out"]["encoding_problems"][0]["problem"], "scale_not_positive");
  EXPECT_EQ(by_name["wild_out"]["encoding_problems"][0]["problem"], "range_overflow");

  const std::string broken = dir.file("broken.json");
  std::ofstream(broken) << R"({"a": {"scale": "x"}})";
  const testing::CliResult bad = run_cli("inspect " + broken);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(line_count(bad.err), 1u) << bad.err;
  EXPECT_NE(bad.err.find(broken), std::string::npos) << bad.err;
}

// The demo's converter net JSON (what qnn-net-run users have): read as one.
TEST(CliInspect, ListsAConverterNetJson) {
  testing::TempDir dir;
  ASSERT_EQ(run_cli("demo --out " + dir.path().string() + " --etdump").exit_code, 0);
  const std::string net_json = dir.file("executorch/model_net.json");
  const testing::CliResult r = run_cli("inspect --json " + net_json);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["format"], "converter net JSON");
  EXPECT_GT(doc["tensors"].size(), 0u);
  for (const auto& t : doc["tensors"]) EXPECT_FALSE(t["dtype"].is_null()) << t.dump();
}

}  // namespace
}  // namespace qd

// ---- the command line made from the input formats' registry (importers/input_format.h) -------

namespace qd {
namespace {

// "  --flag " or "  --flag," as CLI11's help lists an option (not a longer flag it prefixes).
bool lists_option(const std::string& help, const std::string& flag) {
  return help.find("  " + flag + " ") != std::string::npos ||
         help.find("  " + flag + "\n") != std::string::npos;
}

TEST(CliFormats, DiffHasEveryFormatsOptionForEachSideAndForBoth) {
  const testing::CliResult help = testing::run_cli("diff --help");
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find(importers::format_names() + " (default: told by content)"),
            std::string::npos)
      << help.out;
  size_t both = 0;
  for (const importers::InputOption& option : importers::side_options()) {
    SCOPED_TRACE(option.key);
    EXPECT_TRUE(lists_option(help.out, "--ref-" + option.flag)) << help.out;
    EXPECT_TRUE(lists_option(help.out, "--dev-" + option.flag)) << help.out;
    EXPECT_NE(help.out.find(option.side_help), std::string::npos);
    EXPECT_EQ(lists_option(help.out, "--" + option.flag), !option.both_help.empty());
    both += option.both_help.empty() ? 0 : 1;
  }
  EXPECT_EQ(both, 4u);  // --encodings, --net-json, --input-list, --shape
}

TEST(CliFormats, CaptureHasACommandPerConversionWithItsOptions) {
  std::vector<std::string> commands;
  for (const importers::InputFormat* format : importers::input_formats()) {
    if (!format->import) continue;
    commands.push_back(format->name);
    const testing::CliResult help = testing::run_cli("capture " + format->name + " --help");
    SCOPED_TRACE(format->name);
    ASSERT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find(format->input_help), std::string::npos) << help.out;
    for (const importers::InputOption& option : format->options) {
      const std::string flag = "--" + option.flag;
      EXPECT_TRUE(lists_option(help.out, flag) ||
                  help.out.find("  " + flag + " TEXT=" + option.default_value) != std::string::npos)
          << flag << "\n"
          << help.out;
      EXPECT_NE(help.out.find(option.help), std::string::npos) << option.help;
    }
  }
  EXPECT_EQ(commands, (std::vector<std::string>{"qnn-net-run", "npz", "etdump"}));
}

}  // namespace
}  // namespace qd
