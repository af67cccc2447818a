// `qnn-debug demo`, `report` and `check` end to end: every fault kind is found where it was
// injected, a clean device run passes, a saved report re-renders identically, a stricter policy
// flips the verdict and the exit code, and damaged reports are one clear error with exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "../common/test_scale.h"
#include "qnn_debug/fixtures/model.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;
using testing::run_cli;
using testing::slurp;
using testing::write_text;

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
    // What diff writes fits docs/report-schema.json, whatever the fault.
    const auto reloaded = run_cli("report " + out + "/report.json");
    EXPECT_EQ(reloaded.exit_code, 0) << name << "\n" << reloaded.err;
    const auto injection = fixtures::plan_injection({fault, "", 1, 1});
    ASSERT_THAT(injection, IsOk());
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
  expect_error("report " + dir_.file("missing.json"),
               "missing.json': cannot open: No such file or directory");
  expect_error("check " + report_ + " --policy " + dir_.file("nope.json"), "nope.json");
  expect_error("report " + report_ + " --html " + dir_.file("no/such/dir/r.html"),
               "r.html': cannot be written (no such folder: ");
}

// A valid report with a 100,000-deep array under a key no view reads: nlohmann's parser and
// serializer recurse per level, so it used to overflow the stack. Refused before parsing.
TEST_F(SavedReport, DeepNestingIsRefusedBeforeParsing) {
  std::string text = slurp(report_);
  const size_t last = text.rfind('}');
  ASSERT_NE(last, std::string::npos);
  text.insert(last, ", \"zzz\": " + std::string(100000, '[') + std::string(100000, ']'));
  const std::string deep = dir_.file("deep.json");
  write_text(deep, text);
  for (const std::string& args : {"report " + deep + " --html " + dir_.file("deep.html"),
                                  "report " + deep + " --csv " + dir_.file("deep.csv"),
                                  "check " + deep + " --json " + dir_.file("deep_checked.json")}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(
        r.err.rfind("qnn-debug: error: " + deep + ": nested deeper than 64 levels at line ", 0), 0u)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// What each view and `check` reads is checked against docs/report-schema.json, with the JSON
// path: a missing field used to be read out of bounds ("+nan dB", exit 0) and a mistyped one
// ended in "internal error".
TEST_F(SavedReport, EveryFieldTheViewsReadIsCheckedWithItsPath) {
  const json report = json::parse(slurp(report_));
  ASSERT_FALSE(report["runs"][0]["introducers"].empty());
  ASSERT_TRUE(report["runs"][0]["groups"][0]["pairs"][0]["layout"].is_object());
  ASSERT_TRUE(report["runs"][0]["classification"].is_object());
  using Edit = void (*)(json&);
  const std::pair<Edit, const char*> cases[] = {
      {[](json& r) { r["runs"][0]["introducers"][0].erase("introduced_db"); },
       "runs[0].introducers[0].introduced_db: missing"},
      {[](json& r) { r["runs"][0]["introducers"][1]["id"] = 3; },
       "runs[0].introducers[1].id: expected a string, got 3"},
      {[](json& r) { r["runs"][0]["groups"][2].erase("introduced_db"); },
       "runs[0].groups[2].introduced_db: missing"},
      {[](json& r) { r["runs"][0]["groups"][0]["pairs"][0]["layout"]["inferred"] = json::array(); },
       "runs[0].groups[0].pairs[0].layout.inferred: expected true or false, got an array"},
      {[](json& r) { r["runs"][0]["groups"][1]["pairs"][0]["metrics"].erase("lsb_mae"); },
       "runs[0].groups[1].pairs[0].metrics.lsb_mae: missing"},
      {[](json& r) { r["runs"][0]["groups"][1]["pairs"][0]["metrics"]["dev_nan"] = -1.5; },
       "runs[0].groups[1].pairs[0].metrics.dev_nan: expected an integer, got -1.5"},
      {[](json& r) { r["runs"][0]["groups"][1]["pairs"][0]["device"]["dims"][0] = -1; },
       "runs[0].groups[1].pairs[0].device.dims[0]: expected an integer >= 0, got -1"},
      {[](json& r) { r["runs"][0]["groups"][3]["verdict"] = "ok"; },
       R"(runs[0].groups[3].verdict: expected "pass", "warn" or "fail", got "ok")"},
      {[](json& r) {
         r["runs"][0]["groups"][3]["flags"] = {"saturation", 7};
       },
       "runs[0].groups[3].flags[1]: expected \"saturation\""},
      {[](json& r) { r["runs"][0]["classification"].erase("top5_agreement"); },
       "runs[0].classification.top5_agreement: missing"},
      {[](json& r) { r["runs"][0]["coverage"]["compared_pairs"] = "16"; },
       "runs[0].coverage.compared_pairs: expected an integer, got \"16\""},
      {[](json& r) {
         r["runs"][0]["unmatched"] = {{{"name", "x"}, {"seq", 1}, {"reason", "r"}}};
       },
       "runs[0].unmatched[0].side: missing"},
      {[](json& r) { r["summary"]["first_divergence"].erase("device_run"); },
       "summary.first_divergence.device_run: missing"},
      {[](json& r) { r["summary"]["pass"] = "5"; }, "summary.pass: expected an integer"},
      {[](json& r) {
         r["device"]["memory_checkpoints"] = {{{"run", 0}, {"label", "x"}}};
       },
       "device.memory_checkpoints[0].bytes: missing"},
      {[](json& r) { r["policy"]["default"]["warn_below_db"] = "20"; },
       "policy.default.warn_below_db: expected a number, got \"20\""},
      {[](json& r) {
         r["aggregate"] = {{{"id", "h1"}}};
       },
       "aggregate[0].worst_sqnr_db: missing"},
      {[](json& r) { r["warnings"] = {nullptr}; }, "warnings[0]: expected a string, got null"},
      {[](json& r) { r["tool_version"] = std::string(100, 'v'); }, ""},  // valid: renders
  };
  const std::string bad = dir_.file("bad.json");
  for (const auto& [edit, expected] : cases) {
    json edited = report;
    edit(edited);
    write_text(bad, edited.dump());
    for (const char* name : {"report", "check"}) {
      const std::string command = name;
      const auto r = run_cli(command + " " + bad + " --top 100");
      if (std::string(expected).empty()) {
        EXPECT_EQ(r.exit_code, command == "report" ? 0 : 1) << r.err;
        continue;
      }
      EXPECT_EQ(r.exit_code, 2) << command << expected << "\n" << r.out << r.err;
      EXPECT_EQ(r.err.rfind("qnn-debug: error: " + bad + ": not a valid report: " + expected, 0),
                0u)
          << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  // Not a report at all, and the version check, come before the schema's field checks.
  json no_schema = report;
  no_schema["schema"] = json::object();
  write_text(bad, no_schema.dump());
  const auto r = run_cli("report " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a qnn-debug report (\"schema\" is not \"qnn-debug-report\")"),
            std::string::npos)
      << r.err;
}

// "/runs/0/groups/3/sqnr_db" -> "/runs/*/groups/*/sqnr_db"
std::string kind_of(const std::string& pointer) {
  std::string kind;
  for (size_t at = 0; at < pointer.size();) {
    const size_t end = std::min(pointer.find('/', at + 1), pointer.size());
    const std::string part = pointer.substr(at + 1, end - at - 1);
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    kind += "/" + (index ? std::string("*") : part);
    at = end;
  }
  return kind;
}

// `report` with HTML and CSV, and `check`, on one mutated report: what is wrong, if anything.
std::vector<std::string> misbehaviour(const json& mutated, const std::string& dir) {
  const std::string file = dir + "/mutated.json";
  write_text(file, mutated.dump());
  std::vector<std::string> found;
  for (const std::string& args :
       {"report " + file + " --top 100 --html " + dir + "/m.html" + " --csv " + dir + "/m.csv",
        "check " + file + " --top 100 --json " + dir + "/m.json"}) {
    const auto r = run_cli(args);
    const bool report_command = args.starts_with("report");
    const bool exit_ok =
        r.exit_code == 0 || r.exit_code == 2 || (r.exit_code == 1 && !report_command);
    const bool one_line =
        std::count(r.err.begin(), r.err.end(), '\n') == 1 && r.err.find(file) != std::string::npos;
    if (!exit_ok || r.err.find("internal error") != std::string::npos ||
        (r.exit_code == 2 && !one_line)) {
      found.push_back(args.substr(0, args.find(' ')) + " exit " + std::to_string(r.exit_code) +
                      ": " + r.err);
    }
  }
  return found;
}

// Every path of a real report (one of each kind, array indexes aside) deleted or replaced by a
// value of every JSON type, through `report --csv --html` and `check`: each run exits 0, 1 or 2,
// never crashes, never says "internal error", and a refusal is one line naming the file.
TEST_F(SavedReport, MutatedReportsNeverCrashTheViewsOrCheck) {
  json report = json::parse(slurp(report_));
  // The demo has none of these; add one of each so their fields are mutated too.
  report["runs"][0]["unmatched"].push_back(
      {{"side", "device"}, {"name", "extra"}, {"seq", 99}, {"reason", "no counterpart"}});
  report["device"]["profile_events"].push_back({{"run", 0},
                                                {"name", "conv1"},
                                                {"handles", {1}},
                                                {"start", 0},
                                                {"end", 10},
                                                {"unit", "cycles"}});
  report["device"]["memory_checkpoints"].push_back(
      {{"run", nullptr}, {"label", "init"}, {"bytes", 1024}});
  report["policy"]["rules"].push_back(
      {{"op_type", "Add"}, {"fail_below_db", 5}, {"warn_below_db", 8}});
  // One path per kind: runs/0/groups/3/sqnr_db and runs/0/groups/4/sqnr_db are the same kind.
  std::map<std::string, json::json_pointer> kinds;
  const json flat = report.flatten();
  for (const auto& [leaf, value] : flat.items()) {
    for (json::json_pointer at(leaf); !at.empty(); at = at.parent_pointer()) {
      kinds.emplace(kind_of(at.to_string()), at);  // the first in document order
    }
  }
  ASSERT_GT(kinds.size(), 200u);
  const std::vector<json> replacements = {"text", 7, json::array(), json::object(), nullptr, true};
  // Each kind's mutations: 0 deletes it, 1 + r replaces it with replacements[r]. Under
  // QD_TEST_SCALE (scripts/sanitize.sh: each run of the CLI costs several times as much there)
  // kind k keeps the mutations m with (k + m) % stride == 0, one in `stride`: every kind is still
  // mutated at least once, and deletion and each replacement still reach one kind in `stride`.
  const size_t per_kind = 1 + replacements.size();
  const size_t stride = std::min(testing::repetition_stride(), per_kind);
  // What to do, not its result: each worker makes one mutated document at a time, so the test
  // process stays small (it used to hold every mutated document at once).
  struct Mutation {
    std::string what;
    json::json_pointer at;
    size_t m;  // 0: deleted; 1 + r: replacements[r]
  };
  std::vector<Mutation> mutations;
  size_t k = 0;
  for (const auto& [kind, at] : kinds) {
    for (size_t m = 0; m < per_kind; ++m) {
      if ((k + m) % stride != 0) continue;
      mutations.push_back(
          {m == 0 ? kind + " deleted" : kind + " = " + replacements[m - 1].dump(), at, m});
    }
    ++k;
  }
  const auto mutated = [&](const Mutation& mutation) {
    json result = report;
    if (mutation.m > 0) {
      result[mutation.at] = replacements[mutation.m - 1];
      return result;
    }
    json& parent = result[mutation.at.parent_pointer()];
    if (parent.is_array()) {
      parent.erase(std::stoul(mutation.at.back()));
    } else {
      parent.erase(mutation.at.back());
    }
    return result;
  };
  std::cout << mutations.size() << " mutations of " << kinds.size() << " kinds (one in " << stride
            << ")\n";
  // Thousands of runs: two at a time, their outputs on a tmpfs when there is one, where the
  // CLI's fsync of every output costs nothing. Deterministic: every mutation runs once.
  const testing::TempDir scratch(std::filesystem::is_directory("/dev/shm")
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path());
  constexpr size_t kWorkers = 2;
  std::vector<std::vector<std::string>> failures(kWorkers);
  std::vector<std::thread> workers;
  for (size_t w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      const std::string dir = scratch.file(std::to_string(w));
      std::filesystem::create_directory(dir);
      for (size_t i = w; i < mutations.size(); i += kWorkers) {
        for (const std::string& wrong : misbehaviour(mutated(mutations[i]), dir)) {
          failures[w].push_back(mutations[i].what + ": " + wrong);
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  for (const auto& found : failures) {
    EXPECT_TRUE(found.empty()) << found.size() << " runs misbehaved, e.g.\n" << found.front();
  }
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

// Every text cell is defused and quoted, not only names. Text where numbers belong (a damaged or
// hand-edited report) never reaches the CSV: the schema refuses it.
TEST(Csv, EveryCellIsDefusedAndQuoted) {
  testing::TempDir dir;
  const auto r = run_cli("demo --out " + dir.file("d") + " --fault none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(slurp(dir.file("d/report.json")));
  json& group = report["runs"][0]["groups"][0];
  group["op_type"] = "@SUM(A1)";
  group["id"] = "-2+3";
  group["pairs"][0]["device"]["dtype"] = "=1,2";
  group["pairs"][0]["error"] = "+\"x\"";
  const std::string edited = dir.file("edited.json"), csv = dir.file("edited.csv");
  write_text(edited, report.dump());
  const auto rendered = run_cli("report " + edited + " --csv " + csv);
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;
  const std::string text = slurp(csv);
  EXPECT_NE(text.find(",'-2+3,"), std::string::npos) << text;
  EXPECT_NE(text.find(",'@SUM(A1),"), std::string::npos) << text;
  EXPECT_NE(text.find(",\"'=1,2\","), std::string::npos) << text;
  EXPECT_NE(text.find(",\"'+\"\"x\"\"\","), std::string::npos) << text;  // then the time
  group["pairs"][0]["metrics"]["max_abs_coordinates"] = {"@SUM(A1)", "x,y"};
  write_text(edited, report.dump());
  const auto refused = run_cli("report " + edited + " --csv " + csv);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("runs[0].groups[0].pairs[0].metrics.max_abs_coordinates[0]: "
                             "expected an integer, got \"@SUM(A1)\""),
            std::string::npos)
      << refused.err;
  // Every line starts with a digit (device_run) or is the header: no cell broke a row apart.
  size_t rows = 0;
  for (size_t at = 0; at < text.size(); at = text.find("\r\n", at) + 2, ++rows) {
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(text[at])) || at == 0) << at;
  }
  EXPECT_GT(rows, 2u);
}

}  // namespace
}  // namespace qd
