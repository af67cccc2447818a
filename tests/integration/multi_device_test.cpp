// Many devices against one reference (`qnn-debug diff REF DEV1 DEV2 ...`): three device stores of
// the same model (one clean, one with a kernel fault at op A, one whose SDK "version" breaks op
// B) must show A and B as the ops where the devices disagree, each with the device that departs,
// in the report model and in every view (terminal, JSON, CSV, HTML data, Model Explorer).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"

namespace qd {
namespace {

using fixtures::Fault;
using nlohmann::json;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;

constexpr char kOpA[] = "conv3";  // the kernel fault of the second device
constexpr char kOpB[] = "norm1";  // what the third device's "version" breaks

class MultiDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    // One seed: every fixture's reference holds the same bytes, so one reference serves all.
    write("clean", {Fault::kNone, "", 7, 1});
    group_a_ = write("kernel", {Fault::kRequantScale, kOpA, 7, 1});
    group_b_ = write("version", {Fault::kClipping, kOpB, 7, 1});
  }

  // Writes the pair; returns the fault's group id ("h<debug handle>").
  std::string write(const std::string& stem, const fixtures::FixtureOptions& options) {
    const std::string ref = stem == "clean" ? reference() : dir_.file(stem + "_ref.h5");
    const auto injection = fixtures::write_fixture({ref, device(stem), ""}, options);
    EXPECT_TRUE(injection.is_ok()) << injection.status().message();
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
  ASSERT_TRUE(report.is_ok()) << report.status().message();
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
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const std::string text = report::report_text(*report);
  const Result<report::Report> again = report::parse_report(text, "multi.json");
  ASSERT_TRUE(again.is_ok()) << again.status().message();
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
