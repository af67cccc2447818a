// The reports of the demo and of the fixture model's faults, pinned byte for byte: a refactor of
// the comparison, the analysis or the views must leave every figure, verdict and word as it was.
// Only what changes by itself is masked: the temporary folder, store creation times, the tool
// and schema versions.
//
// After an intended change to a report, rewrite the goldens and review their diff:
//   QD_UPDATE_GOLDEN=1 ctest --test-dir build -R GoldenReport
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/cli_runner.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Every string with `folder` in it says "<out>" instead; creation times are 0.
void mask(json& value, const std::string& folder) {
  if (value.is_string()) {
    value = replace_all(value.get<std::string>(), folder, "<out>");
  } else if (value.is_structured()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (value.is_object() && it.key() == "created_unix_ns") {
        it.value() = 0;
      } else {
        mask(it.value(), folder);
      }
    }
  }
}

std::string masked_report(const std::string& path, const std::string& folder) {
  json report = json::parse(slurp(path));
  report.erase("schema_version");
  report.erase("tool_version");
  mask(report, folder);
  return report.dump(1) + "\n";
}

// Compares `actual` with tests/golden/<name>, or rewrites it under QD_UPDATE_GOLDEN=1.
void expect_golden(const std::string& name, const std::string& actual) {
  const std::filesystem::path golden = std::filesystem::path(QD_GOLDEN_DIR) / name;
  if (std::getenv("QD_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(golden.parent_path());
    testing::write_text(golden.string(), actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden << " is missing: see this file's header";
  const std::string expected = slurp(golden.string());
  if (expected == actual) return;
  size_t line = 1, at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) {
    line += expected[at] == '\n';
    ++at;
  }
  ADD_FAILURE() << name << " differs from the golden from line " << line
                << ":\n  golden: " << expected.substr(expected.rfind('\n', at) + 1, 160)
                << "\n  actual: " << actual.substr(actual.rfind('\n', at) + 1, 160);
}

// The three views a run of `diff` writes, and its terminal summary, as the goldens hold them.
void expect_views_golden(const std::string& name, const std::string& folder, const CliResult& run) {
  expect_golden(name + "/report.json", masked_report(folder + "/report.json", folder));
  expect_golden(name + "/report.csv", replace_all(slurp(folder + "/report.csv"), folder, "<out>"));
  expect_golden(name + "/summary.txt", replace_all(run.out, folder, "<out>"));
}

class GoldenReport : public ::testing::TestWithParam<const char*> {};

// Every fault kind, two runs each (the demo's default model and seed).
TEST_P(GoldenReport, DemoOfEachFaultIsUnchanged) {
  TempDir dir;
  const std::string out = dir.file("demo");
  const CliResult run =
      run_cli("demo --runs 2 --fault " + std::string(GetParam()) + " --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expect_views_golden(std::string("demo-") + GetParam(), out, run);
}

INSTANTIATE_TEST_SUITE_P(Faults, GoldenReport,
                         ::testing::Values("none", "requant-scale", "clipping", "layout",
                                           "fp16-overflow", "nan"));

// The device run as ExecuTorch's QNN backend dumps it: captured, then diffed (exit 1: a fault).
TEST(GoldenReportEtdump, CapturedDumpDiffIsUnchanged) {
  TempDir dir;
  const std::string out = dir.file("demo");
  ASSERT_EQ(run_cli("demo --etdump --fault requant-scale --out " + out).exit_code, 0);
  const std::string et = out + "/executorch";
  const CliResult captured =
      run_cli("capture etdump " + et + "/device.etdp --debug-buffer " + et +
              "/debug_output.bin --encodings " + et + "/model_net.json --etrecord " + et +
              "/etrecord.bin -o " + out + "/captured.h5");
  ASSERT_EQ(captured.exit_code, 0) << captured.err;
  const CliResult diff = run_cli("diff " + out + "/reference.h5 " + out + "/captured.h5 --json " +
                                 out + "/report.json --csv " + out + "/report.csv");
  ASSERT_EQ(diff.exit_code, 1) << diff.err;
  expect_views_golden("etdump-requant-scale", out, diff);
}

// The Model Explorer node data and graph (docs/reports.md, "Model Explorer") of the NaN demo,
// two runs: the op that makes the NaN fails at an SQNR the thresholds pass, so it carries its
// verdict's colour.
TEST(GoldenReportModelExplorer, DemoNodeDataAndGraphAreUnchanged) {
  TempDir dir;
  const std::string out = dir.file("demo");
  ASSERT_EQ(run_cli("demo --runs 2 --fault nan --out " + out).exit_code, 0);
  const CliResult views = run_cli("report " + out + "/report.json --model-explorer " + out +
                                  "/me.json --model-explorer-graph " + out + "/graph.json");
  ASSERT_EQ(views.exit_code, 0) << views.err;
  expect_golden("demo-nan/model-explorer.json", slurp(out + "/me.json"));
  expect_golden("demo-nan/model-explorer-graph.json", slurp(out + "/graph.json"));
}

}  // namespace
}  // namespace qd
