// Departure across runs (docs/metrics.md, "Departure across runs") end to end: a decode of
// kRuns runs whose per-run SQNR wanders by a few dB, one op of which drops to some 11 dB from
// run kFaultRun on. The diff names that op's departure in the summary, the JSON, the CSV and
// the terminal; `check` re-judges the saved report to the same; a clean decode departs nowhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/judge.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

// Its own namespace: the unity build (QD_UNITY_TEST_PROGRAMS) compiles it with other tests.
namespace qd::departure_e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr uint32_t kRuns = 12;
constexpr uint32_t kOps = 3;
constexpr uint32_t kFaultRun = 8;
constexpr uint32_t kFaultOp = 1;  // group h2, "layer1"
constexpr uint64_t kElements = 256;

// The error's RMS relative to the signal's for an SQNR of `db`.
double error_ratio(double db) { return std::pow(10.0, -db / 20); }

// A clean run's SQNR: about 60 dB, wandering by 3 dB from run to run; the faulty op's 11.5 dB.
double run_sqnr_db(uint32_t run, uint32_t op, bool faulty) {
  if (faulty && op == kFaultOp && run >= kFaultRun) return 11.5;
  return 60 + 3 * std::sin(1.7 * run + op);
}

Status write_decode(const std::string& path, bool device, bool faulty) {
  QD_ASSIGN_OR_RETURN(auto store,
                      StoreWriter::create(path, {"decode", device ? "QnnHtp" : "cpu", "", "", 0},
                                          WriterOptions{.deflate_level = 0, .durable = false}));
  std::vector<float> values(kElements);
  for (uint32_t run = 0; run < kRuns; ++run) {
    QD_RETURN_IF_ERROR(store->begin_run("step " + std::to_string(run), run).status());
    for (uint32_t op = 0; op < kOps; ++op) {
      // sin and cos(7 x) over whole periods: both of RMS 1/sqrt(2), uncorrelated.
      const double error = device ? error_ratio(run_sqnr_db(run, op, faulty)) : 0;
      for (uint64_t i = 0; i < kElements; ++i) {
        const double x = 2 * M_PI * double(i) / double(kElements);
        values[i] = static_cast<float>(std::sin(x + 0.1 * run) + error * std::cos(7 * x));
      }
      TensorRecord record;
      record.name = "layer" + std::to_string(op);
      record.handles = {int64_t{op} + 1};
      record.dims = {kElements};
      QD_RETURN_IF_ERROR(store->append_tensor(
          record,
          std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)),
          run));
    }
    QD_RETURN_IF_ERROR(store->end_run(run, 0));
  }
  return store->close();
}

Result<report::Report> diff_in(const TempDir& dir) {
  pipeline::DiffRequest request;
  request.reference.path = dir.file("ref.h5");
  request.devices = {{dir.file("dev.h5"), {}, {}, {}}};
  request.jobs = 1;
  return pipeline::run_diff(request);
}

// A CSV line's cells, quoted ones (a hint's sentence) as they are written.
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (char c : line) {
    quoted = quoted != (c == '"');
    if (c == ',' && !quoted) {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

// The CSV's `column` in the row of `group` in device run `run`.
std::string csv_field(const std::string& csv, uint32_t run, const std::string& group,
                      const std::string& column) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  const std::vector<std::string> header = csv_cells(line);
  const size_t at = std::find(header.begin(), header.end(), column) - header.begin();
  while (std::getline(lines, line)) {
    const std::vector<std::string> cells = csv_cells(line);
    if (cells.size() == header.size() && cells[0] == std::to_string(run) && cells[3] == group) {
      return cells[at];
    }
  }
  return "no such row";
}

class Departure : public ::testing::Test {
 protected:
  void write(bool faulty) {
    ASSERT_THAT(write_decode(dir_.file("ref.h5"), false, faulty), IsOk());
    ASSERT_THAT(write_decode(dir_.file("dev.h5"), true, faulty), IsOk());
  }
  TempDir dir_;
};

TEST_F(Departure, TheFaultyOpDepartsAtItsRunInEveryView) {
  write(true);
  const Result<report::Report> report = diff_in(dir_);
  ASSERT_THAT(report, IsOk());
  const auto& first = report->ending.summary.first_departure;
  ASSERT_TRUE(first);
  EXPECT_EQ(first->group, "h2");
  EXPECT_EQ(first->name, "layer1");
  EXPECT_EQ(first->device_run, kFaultRun);
  EXPECT_EQ(first->departure.baseline_runs, kFaultRun);
  EXPECT_NEAR(first->departure.baseline_db, 60, 3.5);
  EXPECT_NEAR(first->departure.sqnr_db, 11.5, 0.5);
  // Set on the group of the run where it departs, and nowhere else; the ops around it keep
  // their level (layer2's input is the reference's, not layer1's: nothing is inherited).
  for (const report::RunReport& run : report->runs) {
    for (const report::GroupReport& group : run.groups) {
      EXPECT_EQ(group.departure.has_value(), group.id == "h2" && run.device_run == kFaultRun)
          << group.id << " in run " << run.device_run;
    }
  }

  const std::string summary = report::render_summary(*report, 5, false);
  EXPECT_NE(summary.find("first departure: group h2 (layer1) departs in device run 8: "),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find(" dB (baseline over 8 runs)\n"), std::string::npos) << summary;

  // JSON: on the group and in the summary; read back and re-judged (what `check` does) it is the
  // same report.
  const std::string text = report::report_text(*report);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["summary"]["first_departure"]["group"], "h2");
  EXPECT_EQ(doc["summary"]["first_departure"]["device_run"], kFaultRun);
  const json& group = doc["runs"][kFaultRun]["groups"][kFaultOp];
  EXPECT_EQ(group["departure"]["baseline_runs"], kFaultRun);
  EXPECT_FALSE(doc["runs"][kFaultRun + 1]["groups"][kFaultOp].contains("departure"));
  Result<report::Report> again = report::parse_report(text, "departure.json");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(report::report_text(*again), text);
  report::judge(*again, compare::Policy(again->header.policy));
  EXPECT_EQ(report::report_text(*again), text);

  // CSV: the departing run's rows carry the baseline, its figure and the baseline's runs.
  const std::string csv = report::render(*report, *report::find_view("csv"));
  EXPECT_NE(csv.find("departure_baseline_db,departure_sqnr_db,departure_baseline_runs"),
            std::string::npos);
  EXPECT_EQ(csv_field(csv, kFaultRun, "h2", "departure_baseline_runs"), "8");
  EXPECT_EQ(csv_field(csv, kFaultRun + 1, "h2", "departure_baseline_runs"), "");
  EXPECT_EQ(csv_field(csv, kFaultRun, "h1", "departure_baseline_runs"), "");
}

TEST_F(Departure, CheckReJudgesToTheSameAndThePolicyCanSwitchItOff) {
  write(true);
  const std::string saved = dir_.file("r.json");
  // layer1 at 11.5 dB warns (below 20 dB, above 10): the departure is beside the verdict.
  ASSERT_EQ(testing::run_cli("diff " + dir_.file("ref.h5") + " " + dir_.file("dev.h5") +
                             " --json " + saved)
                .exit_code,
            0);
  const testing::CliResult checked = testing::run_cli("check " + saved);
  EXPECT_NE(checked.out.find("first departure: group h2 (layer1) departs in device run 8"),
            std::string::npos)
      << checked.out;
  const std::string off = dir_.file("off.json");
  testing::write_text(off, R"({"departure": false})");
  const testing::CliResult none = testing::run_cli("check " + saved + " --policy " + off);
  EXPECT_EQ(none.out.find("first departure"), std::string::npos) << none.out;
  // A stricter rule: no drop is large enough when it must be 60 dB.
  const std::string strict = dir_.file("strict.json");
  testing::write_text(strict, R"({"departure": {"drop_db": 60}})");
  const testing::CliResult strict_check =
      testing::run_cli("check " + saved + " --policy " + strict + " --json -");
  EXPECT_FALSE(json::parse(strict_check.out)["summary"].contains("first_departure"));
}

TEST_F(Departure, ACleanDecodeDepartsNowhere) {
  write(false);
  const Result<report::Report> report = diff_in(dir_);
  ASSERT_THAT(report, IsOk());
  EXPECT_FALSE(report->ending.summary.first_departure);
  for (const report::RunReport& run : report->runs) {
    for (const report::GroupReport& group : run.groups) EXPECT_FALSE(group.departure);
  }
  EXPECT_EQ(report::render_summary(*report, 5, false).find("first departure"), std::string::npos);
}

}  // namespace
}  // namespace qd::departure_e2e
