// `qnn-debug demo`, `report` and `check` end to end: every fault kind is found where it was
// injected, a clean device run passes, a saved report re-renders identically, a stricter policy
// flips the verdict and the exit code, and damaged reports are one clear error with exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/cli_runner.h"
#include "qnn_debug/fixtures/model.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::run_cli;
using testing::slurp;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The handles of the report's first divergence group (empty when there is none).
std::vector<int64_t> first_divergence_handles(const json& report) {
  const json& first = report["summary"]["first_divergence"];
  if (first.is_null()) return {};
  for (const json& run : report["runs"]) {
    for (const json& group : run["groups"]) {
      if (group["id"] == first["group"]) return group["handles"].get<std::vector<int64_t>>();
    }
  }
  return {};
}

TEST(Demo, EveryFaultKindIsTheFirstDivergenceAndACleanRunPasses) {
  testing::TempDir dir;
  for (fixtures::Fault fault : fixtures::all_faults()) {
    const std::string name(fixtures::fault_name(fault));
    const std::string out = dir.file(name);
    const auto r = run_cli("demo --out " + out + " --fault " + name);
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.out << r.err;
    const json report = json::parse(slurp(out + "/report.json"));
    const auto injection = fixtures::plan_injection({fault, "", 1, 1});
    ASSERT_TRUE(injection.is_ok());
    if (fault == fixtures::Fault::kNone) {
      EXPECT_EQ(report["summary"]["verdict"], "pass") << r.out;
      EXPECT_TRUE(report["summary"]["first_divergence"].is_null());
      continue;
    }
    EXPECT_EQ(report["summary"]["verdict"], "fail") << name;
    const auto handles = first_divergence_handles(report);
    EXPECT_NE(std::find(handles.begin(), handles.end(), injection->debug_handle), handles.end())
        << name << ": first divergence " << report["summary"]["first_divergence"].dump();
    EXPECT_NE(r.out.find("demo ok: injected " + name + " at " + injection->op), std::string::npos)
        << r.out;
    for (const char* file : {"/report.html", "/report.csv", "/reference.h5", "/device.h5"}) {
      EXPECT_TRUE(std::filesystem::exists(out + file)) << out + file;
    }
  }
}

TEST(Demo, AFaultAtAChosenOpAndBadArguments) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d") + " --fault requant-scale --at fc2");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("first divergence: group h13 (fc2__debugID_13)"), std::string::npos)
      << r.out;
  const auto unknown_fault = run_cli("demo --out " + dir.file("e") + " --fault gremlins");
  EXPECT_EQ(unknown_fault.exit_code, 2);
  EXPECT_NE(unknown_fault.err.find("unknown fault 'gremlins' (one of: none, requant-scale"),
            std::string::npos)
      << unknown_fault.err;
  const auto unknown_op = run_cli("demo --out " + dir.file("f") + " --fault nan --at conv9");
  EXPECT_EQ(unknown_op.exit_code, 2);
  EXPECT_NE(unknown_op.err.find("conv9"), std::string::npos) << unknown_op.err;
}

class SavedReport : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto r = run_cli("demo --out " + dir_.file("demo") + " --fault clipping");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    report_ = dir_.file("demo/report.json");
  }
  testing::TempDir dir_;
  std::string report_;
};

TEST_F(SavedReport, ReRendersToTheSameHtmlCsvAndSummary) {
  const std::string html = dir_.file("again.html"), csv = dir_.file("again.csv");
  const auto r = run_cli("report " + report_ + " --html " + html + " --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(html), slurp(dir_.file("demo/report.html")));
  EXPECT_EQ(slurp(csv), slurp(dir_.file("demo/report.csv")));
  EXPECT_NE(r.out.find("first divergence: group h6 (add1__debugID_6)"), std::string::npos) << r.out;
  // One CSV row per compared pair, plus the header.
  const json report = json::parse(slurp(report_));
  const std::string text = slurp(csv);
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')),
            report["summary"]["compared_pairs"].get<size_t>() + 1);
}

TEST_F(SavedReport, CheckFlipsWithThePolicyAndReJudgesLikeDiff) {
  // The stored policy reproduces diff's verdict.
  EXPECT_EQ(run_cli("check " + report_).exit_code, 1);
  // Generous enough for the clipped op and everything after it: pass.
  const std::string lenient = dir_.file("lenient.json");
  write_text(lenient, R"({"default": {"fail_below_db": -50, "warn_below_db": -40}})");
  const std::string judged = dir_.file("judged.json");
  auto r = run_cli("check " + report_ + " --policy " + lenient + " --json " + judged);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: pass"), std::string::npos) << r.out;
  const json rejudged = json::parse(slurp(judged));
  EXPECT_EQ(rejudged["summary"]["fail"], 0);
  EXPECT_TRUE(rejudged["summary"]["first_divergence"].is_null());
  EXPECT_EQ(rejudged["policy"]["default"]["fail_below_db"], -50);
  // Strict for one op type only: that op becomes the first divergence.
  const std::string strict = dir_.file("strict.json");
  write_text(strict, R"({"default": {"fail_below_db": -50, "warn_below_db": -40},
                         "rules": [{"op_type": "Relu", "fail_below_db": 40, "warn_below_db": 50}]})");
  r = run_cli("check " + report_ + " --policy " + strict + " --json " + judged);
  EXPECT_EQ(r.exit_code, 1);
  const json strict_judged = json::parse(slurp(judged));
  EXPECT_EQ(strict_judged["summary"]["first_divergence"]["group"], "h2") << "relu1 is op 2";
  EXPECT_EQ(strict_judged["runs"][0]["groups"][1]["policy_rule"], 0);
  // Re-judging with diff's own default policy gives back diff's verdicts.
  const std::string defaults = dir_.file("defaults.json");
  write_text(defaults, R"({"default": {"fail_below_db": 10, "warn_below_db": 20}})");
  r = run_cli("check " + judged + " --policy " + defaults + " --json " + dir_.file("back.json"));
  EXPECT_EQ(r.exit_code, 1);
  const json original = json::parse(slurp(report_));
  const json back = json::parse(slurp(dir_.file("back.json")));
  EXPECT_EQ(back["summary"], original["summary"]);
  EXPECT_EQ(back["runs"], original["runs"]);
}

TEST_F(SavedReport, DamagedReportsAreOneLineAndExitTwo) {
  json report = json::parse(slurp(report_));
  const std::string bad = dir_.file("bad.json");
  const auto expect_error = [&](const std::string& args, const std::string& part) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  write_text(bad, slurp(report_).substr(0, 5000));
  expect_error("report " + bad, "not valid JSON");
  json wrong_type = report;
  wrong_type["runs"][0]["groups"][3]["sqnr_db"] = "loud";
  write_text(bad, wrong_type.dump());
  expect_error("check " + bad, "runs[0].groups[3].sqnr_db: expected a number");
  json newer = report;
  newer["schema_version"] = 99;
  write_text(bad, newer.dump());
  expect_error("report " + bad, "newer than this qnn-debug reads");
  expect_error("report " + dir_.file("missing.json"), "missing.json: cannot be opened");
  expect_error("check " + report_ + " --policy " + dir_.file("nope.json"), "nope.json");
  expect_error("report " + report_ + " --html " + dir_.file("no/such/dir/r.html"),
               "r.html: cannot be written");
}

TEST(Csv, HostileNamesAreQuotedAndDefused) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d") + " --fault none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(dir.file("d/report.json")));
  json& pair = report["runs"][0]["groups"][0]["pairs"][0];
  pair["reference"]["name"] = "=HYPERLINK(\"http://x\",\"a,b\")";
  pair["device"]["name"] = "line\nbreak";
  const std::string edited = dir.file("edited.json"), csv = dir.file("edited.csv");
  write_text(edited, report.dump());
  ASSERT_EQ(run_cli("report " + edited + " --csv " + csv).exit_code, 0);
  const std::string text = slurp(csv);
  EXPECT_NE(text.find(R"x("'=HYPERLINK(""http://x"",""a,b"")")x"), std::string::npos) << text;
  EXPECT_NE(text.find("\"line\nbreak\""), std::string::npos);
}

// Cells that are not names are defused and quoted too, should a damaged or hand-edited report
// carry text where numbers belong.
TEST(Csv, EveryCellIsDefusedAndQuoted) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d") + " --fault none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(dir.file("d/report.json")));
  json& pair = report["runs"][0]["groups"][0]["pairs"][0];
  pair["metrics"]["max_abs_coordinates"] = {"@SUM(A1)", "x,y"};
  report["runs"][0]["groups"][0]["flags"] = {"-2+3"};
  const std::string edited = dir.file("edited.json"), csv = dir.file("edited.csv");
  write_text(edited, report.dump());
  const auto rendered = run_cli("report " + edited + " --csv " + csv);
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  const std::string text = slurp(csv);
  EXPECT_NE(text.find(R"("'@SUM(A1);x,y")"), std::string::npos) << text;
  EXPECT_NE(text.find(",'-2+3,"), std::string::npos) << text;
  // Every line starts with a digit (device_run) or is the header: no cell broke a row apart.
  size_t rows = 0;
  for (size_t at = 0; at < text.size(); at = text.find("\r\n", at) + 2, ++rows) {
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(text[at])) || at == 0) << at;
  }
  EXPECT_GT(rows, 2u);
}

}  // namespace
}  // namespace qd
