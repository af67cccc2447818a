// What the views show beside the numerics: the stored graph's edges between groups, the profile
// events joined to their groups (report/build.h, join_profile), and the HTML page's light rows
// for reports too large to carry every group's figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/report_json.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "../common/test_scale.h"
#include "qnn_debug/report/build.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;
using testing::run_cli;
using testing::slurp;

report::GroupReport group(const std::string& id, std::vector<int64_t> handles,
                          const std::string& tensor) {
  report::GroupReport g;
  g.id = id;
  g.handles = std::move(handles);
  report::PairReport pair;
  pair.reference.name = tensor;
  pair.device.name = tensor + "@0";
  g.pairs.push_back(pair);
  return g;
}

ProfileEvent event(uint32_t run, const std::string& name, std::vector<int64_t> handles,
                   int64_t cycles, const std::string& unit = "cycles") {
  ProfileEvent e;
  e.run_id = run;
  e.name = name;
  e.handles = std::move(handles);
  e.start = 1000;
  e.end = 1000 + cycles;
  e.unit = unit;
  return e;
}

TEST(JoinProfile, ByHandleThenByNameWithSharesOfTheRunsTotal) {
  report::RunReport run;
  run.device_run = 1;
  run.groups = {group("h1", {1}, "conv"), group("h2", {2, 3}, "relu"), group("h4", {4}, "add")};
  const std::vector<ProfileEvent> events = {
      event(1, "conv:OpId_0 (cycles)", {1}, 600),
      event(1, "fused", {3}, 100),       // a handle the group shares
      event(1, "fused again", {2}, 50),  // the same group: durations add up
      event(1, "add@0", {}, 200),        // no handles: by the device tensor's name
      event(1, "launch", {}, 50),        // no group: still part of the run's total
      event(0, "conv", {1}, 9999),       // another device run
      event(1, "add", {4}, 7, "ns"),     // another clock: not added to cycles
  };
  report::join_profile(run, events);
  ASSERT_TRUE(run.groups[0].time);
  EXPECT_EQ(run.groups[0].time->duration, 600);
  EXPECT_EQ(run.groups[0].time->unit, "cycles");
  EXPECT_EQ(run.groups[0].time->events, 1u);
  EXPECT_DOUBLE_EQ(run.groups[0].time->share, 0.6);  // of 1,000 cycles in run 1
  ASSERT_TRUE(run.groups[1].time);
  EXPECT_EQ(run.groups[1].time->duration, 150);
  EXPECT_EQ(run.groups[1].time->events, 2u);
  ASSERT_TRUE(run.groups[2].time);
  EXPECT_EQ(run.groups[2].time->duration, 200);
  EXPECT_EQ(run.groups[2].time->unit, "cycles");
  EXPECT_DOUBLE_EQ(run.groups[2].time->share, 0.2);

  report::RunReport other;
  other.device_run = 5;
  other.groups = {group("h1", {1}, "conv")};
  report::join_profile(other, events);
  EXPECT_FALSE(other.groups[0].time);  // no event of device run 5
}

// The demo's stores carry a graph and per-op cycles: the report's groups name their inputs
// (the residual add has two) and each group joins its op's cycles, which add up to the run.
TEST(DemoReport, JoinsTheGraphAndEveryOpsCycles) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d") + " --fault none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(slurp(dir.file("d/report.json")));
  const json& groups = report["runs"][0]["groups"];
  ASSERT_EQ(groups.size(), 16u);
  EXPECT_FALSE(groups[0].contains("inputs"));  // fed by the model input alone
  EXPECT_EQ(groups[1]["inputs"], json({"h1"}));
  EXPECT_EQ(groups[5]["id"], "h6");
  EXPECT_EQ(groups[5]["inputs"], json({"h5", "h4"}));  // add1 = conv3 + gelu1
  double share = 0, cycles = 0;
  for (const json& g : groups) {
    ASSERT_TRUE(g.contains("time")) << g["id"];
    EXPECT_EQ(g["time"]["unit"], "cycles");
    EXPECT_EQ(g["time"]["events"], 1);
    EXPECT_GT(g["time"]["duration"].get<double>(), 0);
    share += g["time"]["share"].get<double>();
    cycles += g["time"]["duration"].get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-12);
  double stored = 0;
  for (const json& e : report["device"]["profile_events"]) {
    stored += e["end"].get<double>() - e["start"].get<double>();
  }
  EXPECT_EQ(cycles, stored);
  const std::string csv = slurp(dir.file("d/report.csv"));
  EXPECT_NE(csv.find(",time,time_unit,time_share\r\n"), std::string::npos);
  // The terminal names where the time went: conv2 has the most work.
  EXPECT_NE(r.out.find("time (device run 0): most in h3 conv2__debugID_3 (41.6%, 295312 cycles), "
                       "h5 conv3__debugID_5 (20.8%"),
            std::string::npos)
      << r.out;
}

// A group's verdict in one run of a sequence (decode steps, say).
report::GroupReport judged(const std::string& id, compare::Verdict verdict, double sqnr_db) {
  report::GroupReport g = group(id, {}, id);
  g.verdict = verdict;
  g.sqnr_db = sqnr_db;
  return g;
}

// Over several runs, each group records the first run where it fails, and the terminal lists
// the groups in the order they start failing: the shape of a failure over decode steps.
TEST(Aggregate, NamesTheRunWhereEachGroupFirstFails) {
  using compare::Verdict;
  report::Report r;
  for (uint32_t step = 0; step < 4; ++step) {
    report::RunReport run;
    run.device_run = step;
    run.reference_run = step;
    run.groups = {judged("attn", step >= 2 ? Verdict::kFail : Verdict::kPass, 40.0 - step),
                  judged("mlp", step >= 3 ? Verdict::kFail : Verdict::kWarn, 30.0),
                  judged("norm", Verdict::kPass, 50.0)};
    r.runs.push_back(std::move(run));
  }
  report::EndingBuilder ending(r.header);
  for (const report::RunReport& run : r.runs) ending.add_run(run);
  r.ending = std::move(ending).finish({});
  ASSERT_EQ(r.ending.aggregate.size(), 3u);
  EXPECT_EQ(r.ending.aggregate[0].first_failing_run, std::optional<uint32_t>(2));
  EXPECT_EQ(r.ending.aggregate[1].first_failing_run, std::optional<uint32_t>(3));
  EXPECT_FALSE(r.ending.aggregate[2].first_failing_run);
  const json doc = json::parse(report::report_text(r));
  EXPECT_EQ(doc["aggregate"][0]["first_failing_device_run"], 2);
  EXPECT_TRUE(doc["aggregate"][2]["first_failing_device_run"].is_null());
  const std::string summary = report::render_summary(r, 3, false);
  EXPECT_NE(summary.find("first fails: attn in run 2, mlp in run 3\n"), std::string::npos)
      << summary;
}

// The data a page embeds, parsed back.
json page_data(const std::string& page) {
  const std::string open = "<script id=\"qd-data\" type=\"application/json\">";
  const size_t from = page.find(open) + open.size();
  return json::parse(page.substr(from, page.find("</script>", from) - from));
}

// A report too large for a page keeps every group as a row, and the full figures of failing
// groups before passing ones until each budget is spent; the JSON report keeps everything.
TEST(HtmlPage, LargeReportsKeepEveryRowAndTheFiguresOfFailingGroupsFirst) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(slurp(dir.file("d/report.json")));
  const json groups = doc["runs"][0]["groups"];
  json& many = doc["runs"][0]["groups"];
  many = json::array();
  // 16 groups, 11 failing, a copy each time. Under QD_TEST_SCALE 3,000: still more than both
  // budgets hold (about 1,200 failing and 300 passing groups in full), a fourth of the work.
  const size_t wanted = testing::test_scale() < 1 ? 3'000 : 12'000;
  for (int copy = 0; many.size() < wanted; ++copy) {
    for (json g : groups) {
      g["id"] = g["id"].get<std::string>() + "_" + std::to_string(copy);
      g["order"] = many.size();
      many.push_back(std::move(g));
    }
  }
  const std::string path = dir.file("many.json");
  testing::write_text(path, doc.dump());
  const Result<report::Report> loaded = report::load_report(path);
  ASSERT_THAT(loaded, IsOk());
  const std::string page = report::render(*loaded, *report::find_view("html"));
  const json data = page_data(page);
  const json& rows = data["runs"][0]["groups"];
  ASSERT_EQ(rows.size(), many.size());
  size_t full_fail = 0, full_pass = 0, light = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    EXPECT_EQ(row["id"], many[i]["id"]);
    EXPECT_EQ(row["verdict"], many[i]["verdict"]);
    if (!row.value("light", false)) {
      (row["verdict"] == "pass" ? full_pass : full_fail) += 1;
      EXPECT_EQ(row, many[i]);
      continue;
    }
    ++light;
    const json& pair = row["pairs"][0];
    EXPECT_EQ(pair["reference"]["name"], many[i]["pairs"][0]["reference"]["name"]);
    EXPECT_FALSE(pair["metrics"].contains("worst"));
    EXPECT_FALSE(pair["metrics"].contains("samples"));
    EXPECT_NEAR(pair["metrics"]["sqnr_db"].get<double>(),
                testing::real(many[i]["pairs"][0]["metrics"]["sqnr_db"]), 1e-3);
    EXPECT_LE(row.value("hints", json::array()).size(), 1u);
    // Defaults are left out: the demo's device names and dims are the reference's (NHWC aside).
    EXPECT_FALSE(pair["device"].contains("name"));
    EXPECT_EQ(pair["device"].contains("dims"),
              many[i]["pairs"][0]["device"]["dims"] != many[i]["pairs"][0]["reference"]["dims"]);
    EXPECT_FALSE(pair.contains("error"));
    EXPECT_EQ(row.value("inputs", json::array()), many[i].value("inputs", json::array()));
    EXPECT_EQ(row.at("time").at("unit"), "cycles");
  }
  EXPECT_GT(light, 0u);
  EXPECT_GT(full_fail, 2 * full_pass);  // the failing groups' budget is the larger
  EXPECT_GT(full_pass, 0u);
  // The light rows cost a few hundred bytes each, the whole page stays near the budgets.
  EXPECT_LT(page.size(), (size_t{10} << 20) + light * 700 + (size_t{1} << 20));
}

}  // namespace
}  // namespace qd

namespace qd {
namespace {

// A long decode's report file (more than kDetailedRuns runs): one line; a passing group is a row
// of its run's packed block, without its element lists; failing and departing groups are objects
// with everything. It loads back to the same text, the packed groups at their places, passing and
// with their figures.
TEST(JsonReport, ALongReportPacksThePassingGroups) {
  testing::TempDir dir;
  // A small input keeps 20 runs' stores small (the rule is about runs, not tensor sizes).
  const auto demo = run_cli("demo --out " + dir.file("d") + " --runs 20 --input-size 32 --jobs 1");
  ASSERT_EQ(demo.exit_code, 0) << demo.err;
  const std::string text = slurp(dir.file("d/report.json"));
  EXPECT_EQ(text.find("\n"), text.size() - 1);  // one line
  const json doc = json::parse(text);
  ASSERT_EQ(doc["runs"].size(), 20u);
  const Result<report::Report> loaded = report::parse_report(text, "long.json");
  ASSERT_THAT(loaded, IsOk());
  size_t whole = 0, packed = 0;
  for (size_t r = 0; r < 20; ++r) {
    const json& run = doc["runs"][r];
    for (const json& group : run["groups"]) {
      EXPECT_TRUE(group["verdict"] != "pass" || group.contains("departure"))
          << r << " " << group["id"];
      for (const json& pair : group["pairs"]) {
        EXPECT_FALSE(pair["metrics"]["worst"].empty()) << r << " " << group["id"];
      }
      ++whole;
    }
    const size_t in_block = run.contains("packed") ? run["packed"]["groups"].get<size_t>() : 0;
    packed += in_block;
    const report::RunReport& typed = loaded->runs[r];
    ASSERT_EQ(typed.groups.size(), run["groups"].size() + in_block) << r;
    // The packed groups take the places the objects leave, in op order.
    size_t object = 0;
    for (const report::GroupReport& group : typed.groups) {
      if (object < run["groups"].size() && run["groups"][object]["id"] == group.id) {
        ++object;
        continue;
      }
      EXPECT_EQ(group.verdict, compare::Verdict::kPass) << r << " " << group.id;
      ASSERT_TRUE(group.pairs.front().metrics.has_value());
      EXPECT_TRUE(group.pairs.front().metrics->worst.empty());
      EXPECT_GT(group.pairs.front().metrics->n, 0u);
    }
    EXPECT_EQ(object, run["groups"].size()) << r;
  }
  EXPECT_GT(whole, 0u);
  EXPECT_GT(packed, 0u);
  EXPECT_EQ(report::report_text(*loaded), text);
  // The short demo keeps its indented, complete file.
  const auto one = run_cli("demo --out " + dir.file("one") + " --jobs 1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(slurp(dir.file("one/report.json")).find("\n  \"schema_version\""), std::string::npos);
}

}  // namespace
}  // namespace qd
