// Many devices against one reference (`qnn-debug diff REF DEV1 DEV2 ...`): three device stores of
// the same model (one clean, one with a kernel fault at op A, one whose SDK "version" breaks op
// B) must show A and B as the ops where the devices disagree, each with the device that departs,
// in the report model and in every view (terminal, JSON, CSV, HTML data, Model Explorer).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using fixtures::Fault;
using nlohmann::json;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;

constexpr char kOpA[] = "conv3";  // the kernel fault of the second device
constexpr char kOpB[] = "norm1";  // what the third device's "version" breaks

// A 32 x 32 input: what these tests check (labels, matrices, outliers, causes per device) is
// about devices and ops, not tensor sizes, and each test writes three fixtures.
constexpr int kInputSize = 32;

class MultiDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    // One seed: every fixture's reference holds the same bytes, so one reference serves all.
    write("clean", {Fault::kNone, "", 7, 1, kInputSize});
    group_a_ = write("kernel", {Fault::kRequantScale, kOpA, 7, 1, kInputSize});
    group_b_ = write("version", {Fault::kClipping, kOpB, 7, 1, kInputSize});
  }

  // Writes the pair; returns the fault's group id ("h<debug handle>").
  std::string write(const std::string& stem, const fixtures::FixtureOptions& options) {
    const std::string ref = stem == "clean" ? reference() : dir_.file(stem + "_ref.h5");
    const auto injection = fixtures::write_fixture({ref, device(stem), ""}, options);
    EXPECT_THAT(injection, IsOk());
    return injection.is_ok() ? "h" + std::to_string(injection->debug_handle) : "";
  }

  std::string reference() const { return dir_.file("clean_ref.h5"); }
  std::string device(const std::string& stem) const { return dir_.file(stem + "_dev.h5"); }

  pipeline::DiffRequest request() const {
    pipeline::DiffRequest r;
    r.reference.path = reference();
    for (const char* stem : {"clean", "kernel", "version"}) {
      r.devices.push_back({device(stem), {}, {}, {}});
    }
    r.labels = {"HTP QNN 2.28", "HTP kernel fault", "HTP QNN 2.30"};
    r.jobs = 1;
    return r;
  }

  std::string cli_inputs() const {
    return reference() + " " + device("clean") + " " + device("kernel") + " " + device("version") +
           " --label 'HTP QNN 2.28' --label 'HTP kernel fault' --label 'HTP QNN 2.30'";
  }

  TempDir dir_;
  std::string group_a_, group_b_;
};

std::vector<const report::DeviceRow*> by_disagreement(const report::ReportEnding& ending) {
  std::vector<const report::DeviceRow*> rows;
  for (const report::DeviceRow& row : ending.device_matrix) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return a->disagreement_db > b->disagreement_db;
  });
  return rows;
}

TEST_F(MultiDevice, TheOpsWhereDevicesDisagreeAreTheFaultsEachWithItsDevice) {
  const Result<report::Report> report = pipeline::run_diff(request());
  ASSERT_THAT(report, IsOk());
  const report::ReportEnding& ending = report->ending;
  ASSERT_EQ(report->header.devices.size(), 3u);
  EXPECT_EQ(report->header.devices[2].label, "HTP QNN 2.30");
  ASSERT_EQ(report->runs.size(), 3u);
  for (uint32_t d = 0; d < 3; ++d) EXPECT_EQ(report->runs[d].device, d);

  const auto rows = by_disagreement(ending);
  ASSERT_GE(rows.size(), 3u);
  const std::set<std::string> top_two = {rows[0]->id, rows[1]->id};
  EXPECT_EQ(top_two, (std::set<std::string>{group_a_, group_b_}));
  for (const report::DeviceRow* row : {rows[0], rows[1]}) {
    ASSERT_TRUE(row->outlier);
    EXPECT_EQ(*row->outlier, row->id == group_a_ ? 1u : 2u) << row->id;
    ASSERT_EQ(row->cells.size(), 3u);
  }
  // What the faults leave downstream is inherited, not a new disagreement: far below them.
  EXPECT_GT(rows[1]->disagreement_db, 3 * rows[2]->disagreement_db);

  ASSERT_EQ(ending.devices.size(), 3u);
  EXPECT_EQ(ending.devices[0].verdict, compare::Verdict::kPass);
  EXPECT_FALSE(ending.devices[0].first_divergence);
  ASSERT_TRUE(ending.devices[1].first_divergence);
  EXPECT_EQ(ending.devices[1].first_divergence->group, group_a_);
  EXPECT_EQ(ending.devices[1].first_divergence->device, 1u);
  ASSERT_TRUE(ending.devices[2].first_divergence);
  EXPECT_EQ(ending.devices[2].first_divergence->group, group_b_);
  ASSERT_TRUE(ending.summary.first_divergence);
  EXPECT_EQ(ending.summary.first_divergence->device, 1u);
}

TEST_F(MultiDevice, ASavedReportKeepsTheDevicesAndRebuildsTheMatrix) {
  const Result<report::Report> report = pipeline::run_diff(request());
  ASSERT_THAT(report, IsOk());
  const std::string text = report::report_text(*report);
  const Result<report::Report> again = report::parse_report(text, "multi.json");
  ASSERT_THAT(again, IsOk());
  ASSERT_EQ(again->header.devices.size(), 3u);
  EXPECT_EQ(again->header.devices[1].label, "HTP kernel fault");
  EXPECT_EQ(report::report_text(*again), text);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["device"]["label"], "HTP QNN 2.28");  // the first, for one-device readers
  EXPECT_EQ(doc["runs"][2]["device_index"], 2);
  ASSERT_EQ(doc["device_outcomes"].size(), 3u);
  EXPECT_EQ(doc["device_outcomes"][1]["first_divergence"]["group"], group_a_);

  json bad = doc;
  bad["runs"][2]["device_index"] = 5;
  const Result<report::Report> refused = report::parse_report(bad.dump(), "bad.json");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("device_index 5 names no device"), std::string::npos)
      << refused.status().message();
}

TEST_F(MultiDevice, EveryViewShowsEachDevice) {
  const std::string out = dir_.file("out");
  const auto r = run_cli("diff " + cli_inputs() + " --json " + out + ".json --csv " + out +
                         ".csv --html " + out + ".html --model-explorer " + out +
                         ".me.json --model-explorer-graph " + out + ".graph.json");
  EXPECT_EQ(r.exit_code, 1) << r.err;  // two devices fail
  // Terminal: each device with its first divergence, then the disagreement rows, A and B first.
  EXPECT_NE(r.out.find("devices (3, each against the reference):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  1  HTP kernel fault         fail"), std::string::npos) << r.out;
  const size_t table = r.out.find("where the devices disagree most");
  ASSERT_NE(table, std::string::npos) << r.out;
  const size_t first_row = r.out.find('\n', r.out.find('\n', table) + 1) + 1;
  const std::string two_rows =
      r.out.substr(first_row, r.out.find('\n', r.out.find('\n', first_row) + 1) - first_row);
  EXPECT_NE(two_rows.find(group_a_ + " "), std::string::npos) << r.out;
  EXPECT_NE(two_rows.find(group_b_ + " "), std::string::npos) << r.out;
  EXPECT_NE(two_rows.find("HTP kernel fault"), std::string::npos) << two_rows;
  EXPECT_NE(two_rows.find("HTP QNN 2.30"), std::string::npos) << two_rows;

  // CSV, long form: a device column naming each row's device, every device's rows.
  const std::string csv = slurp(out + ".csv");
  EXPECT_EQ(csv.rfind("device,device_run,", 0), 0u) << csv.substr(0, 80);
  for (const char* label : {"\nHTP QNN 2.28,", "\nHTP kernel fault,", "\nHTP QNN 2.30,"}) {
    EXPECT_NE(csv.find(label), std::string::npos) << label;
  }

  // JSON: the matrix, and the same report from `report` as from `diff`.
  const json doc = json::parse(slurp(out + ".json"));
  EXPECT_EQ(doc["devices"].size(), 3u);
  EXPECT_FALSE(doc["device_matrix"].empty());
  const auto again = run_cli("report " + out + ".json --csv " + out + "2.csv");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(slurp(out + "2.csv"), csv);

  // The page embeds the devices and the matrix it draws.
  const std::string page = slurp(out + ".html");
  EXPECT_NE(page.find("\"device_matrix\":"), std::string::npos);
  EXPECT_NE(page.find("HTP kernel fault"), std::string::npos);

  // Model Explorer: one graph id per device, in the node data and in the graph file alike.
  const json node_data = json::parse(slurp(out + ".me.json"));
  const json graphs = json::parse(slurp(out + ".graph.json"));
  ASSERT_EQ(node_data.size(), 3u);
  ASSERT_EQ(graphs["graphs"].size(), 3u);
  for (const json& graph : graphs["graphs"]) {
    const std::string id = graph["id"];
    ASSERT_TRUE(node_data.contains(id)) << id;
    EXPECT_EQ(node_data[id]["results"].size(), graph["nodes"].size()) << id;
  }
  EXPECT_LT(node_data["HTP kernel fault"]["results"]["conv3__debugID_5"]["value"].get<double>(),
            node_data["HTP QNN 2.28"]["results"]["conv3__debugID_5"]["value"].get<double>() - 10);
}

// A device that recovers error at an op (its input was worse than its output) is not the one
// that adds the most error there: after conv3's fault, add1 reads 30.4 dB on the clean devices and
// 3.8 dB on the kernel fault, which inherits, so no device stands out. And an op every device
// reads alike is no disagreement, whatever error each one introduced (docs/metrics.md, 6d).
TEST_F(MultiDevice, ARecoveringDeviceIsNoOutlierAndTheSameSqnrIsNoDisagreement) {
  const Result<report::Report> report = pipeline::run_diff(request());
  ASSERT_THAT(report, IsOk());
  const auto row_of = [](const report::ReportEnding& ending, const std::string& id) {
    for (const report::DeviceRow& row : ending.device_matrix) {
      if (row.id == id) return row;
    }
    ADD_FAILURE() << "no row " << id;
    return report::DeviceRow{};
  };
  const report::DeviceRow add1 = row_of(report->ending, "h6");
  ASSERT_EQ(add1.cells.size(), 3u);
  EXPECT_LT(*add1.cells[1].introduced_db, 0);  // the kernel fault's add1 recovers a little
  EXPECT_FALSE(add1.outlier) << "device " << *add1.outlier << " marked at add1";
  EXPECT_LT(add1.disagreement_db, 1.5);
  EXPECT_EQ(row_of(report->ending, group_a_).outlier, std::optional<uint32_t>(1));

  // The same SQNR on every device, with introduced error that differs: no disagreement.
  json doc = json::parse(report::report_text(*report));
  for (json& run : doc["runs"]) {
    for (json& group : run["groups"]) {
      if (group["id"] != "h2") continue;
      group["sqnr_db"] = 28.7 + 0.01 * run["device_index"].get<int>();
      group["introduced_db"] = run["device_index"] == 1 ? -26.0 : 0.2;
    }
  }
  const Result<report::Report> edited = report::parse_report(doc.dump(), "edited.json");
  ASSERT_THAT(edited, IsOk());
  const report::DeviceRow same = row_of(edited->ending, "h2");
  EXPECT_EQ(same.disagreement_db, 0);
  EXPECT_FALSE(same.outlier);

  // Not a row of the terminal's table either (its rows are the indented lines under the heading).
  const std::string summary = report::render_summary(*report, 10, false);
  const size_t table = summary.find("where the devices disagree most");
  ASSERT_NE(table, std::string::npos) << summary;
  size_t end = summary.find('\n', table);
  while (summary.compare(end + 1, 2, "  ") == 0) end = summary.find('\n', end + 1);
  const std::string rows = summary.substr(table, end - table);
  EXPECT_NE(rows.find("\n  " + group_a_ + " "), std::string::npos) << rows;
  EXPECT_EQ(rows.find("\n  h6 "), std::string::npos) << rows;
}

// Each failing device gets its own causes and its own per-run block, each under its own
// heading: the first device's runs are not shown under another device's first failing output.
TEST_F(MultiDevice, EachDeviceHasItsCausesAndItsRunsUnderItsOwnHeading) {
  const std::string two = dir_.file("two");
  std::filesystem::create_directories(two);
  const auto write_two = [&](const std::string& stem, const fixtures::FixtureOptions& options) {
    const auto injection = fixtures::write_fixture(
        {two + "/" + stem + "_ref.h5", two + "/" + stem + "_dev.h5", ""}, options);
    ASSERT_THAT(injection, IsOk());
  };
  write_two("clean", {Fault::kNone, "", 7, 2, kInputSize});
  write_two("kernel", {Fault::kRequantScale, kOpA, 7, 2, kInputSize});
  write_two("version", {Fault::kClipping, kOpB, 7, 2, kInputSize});
  const auto r = run_cli("diff " + two + "/clean_ref.h5 " + two + "/clean_dev.h5 " + two +
                         "/kernel_dev.h5 " + two +
                         "/version_dev.h5 --label 'HTP QNN 2.28' --label 'HTP kernel fault' "
                         "--label 'HTP QNN 2.30'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string& out = r.out;
  // Causes: the kernel fault's conv3 and QNN 2.30's norm1, each in its device's block.
  const size_t kernel_why = out.find("why (device run 0 of HTP kernel fault):\n");
  const size_t version_why = out.find("why (device run 0 of HTP QNN 2.30):\n");
  ASSERT_NE(kernel_why, std::string::npos) << out;
  ASSERT_NE(version_why, std::string::npos) << out;
  EXPECT_EQ(out.find("why (device run 0 of HTP QNN 2.28)"), std::string::npos) << out;
  EXPECT_NE(out.find("  " + group_a_ + "           conv3__debugID_5: kernel_suspect", kernel_why),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  " + group_b_ + "          norm1__debugID_10: clipping: ", version_why),
            std::string::npos)
      << out;
  // Runs: a block per device, its heading about that device's outputs, its rows its runs.
  const auto block = [&](const std::string& label) {
    const size_t at = out.find("per run of " + label + " (2 runs; ");
    EXPECT_NE(at, std::string::npos) << label << ":\n" << out;
    if (at == std::string::npos) return std::string();
    return out.substr(at, out.find("\n", out.find("\n  1 ", at) + 1) - at);
  };
  const std::string clean = block("HTP QNN 2.28");
  EXPECT_NE(clean.find("the first whose output fails: none)"), std::string::npos) << clean;
  EXPECT_NE(clean.find("\n  0     pass "), std::string::npos) << clean;
  EXPECT_NE(clean.find("\n  1     pass "), std::string::npos) << clean;
  const std::string kernel = block("HTP kernel fault");
  EXPECT_NE(kernel.find("the first whose output fails: run 0, h16 at SQNR"), std::string::npos)
      << kernel;
  EXPECT_NE(kernel.find("\n  0     fail    " + group_a_ + " "), std::string::npos) << kernel;
  const std::string version = block("HTP QNN 2.30");
  EXPECT_NE(version.find("\n  0     fail    " + group_b_ + " "), std::string::npos) << version;
  EXPECT_NE(version.find("\n  1     fail    " + group_b_ + " "), std::string::npos) << version;
  EXPECT_EQ(out.find("per run ("), std::string::npos) << out;  // no block without its device
}

TEST_F(MultiDevice, DefaultLabelsAreTheStoresMetadataAndStayDistinct) {
  const auto r = run_cli("diff " + reference() + " " + device("clean") + " " + device("kernel") +
                         " --json " + dir_.file("d.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const json doc = json::parse(slurp(dir_.file("d.json")));
  const std::string first = doc["devices"][0]["label"];
  const std::string second = doc["devices"][1]["label"];
  EXPECT_NE(first.find(doc["devices"][0]["backend"].get<std::string>()), std::string::npos);
  EXPECT_NE(first, second);
  EXPECT_NE(second.find("kernel_dev.h5"), std::string::npos) << second;
}

TEST_F(MultiDevice, BadDeviceArgumentsAreClearErrors) {
  auto r = run_cli("diff " + reference() + " " + device("clean") + " --label a --label b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("2 --label for 1 device input(s)"), std::string::npos) << r.err;
  r = run_cli("diff " + reference() + " " + device("clean") + " " + device("kernel") +
              " --isolated " + device("clean"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--isolated replays one device's values"), std::string::npos) << r.err;
  r = run_cli("diff " + reference() + " " + device("clean") + " " + dir_.file("missing.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.h5"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace qd
