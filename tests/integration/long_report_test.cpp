// A long decode's report (more than kDetailedRuns device runs: its passing groups are rows of
// packed blocks, docs/reports.md "A long decode's JSON") read back is the report the diff made:
// run by run, group by group, figure by figure, bit for bit, for the packed groups (all but their
// element lists) and the whole ones (everything) alike;
// `check` of the saved file gives the diff's verdicts, with the diff's policy and with another.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/many_runs_stores.h"
#include "../common/same_report.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"

using qd::testing::IsOk;

// Its own namespace: the unity build (QD_UNITY_TEST_PROGRAMS) compiles it with other tests.
namespace qd::long_report {
namespace {

using nlohmann::json;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;

// 40 steps of 24 tensors (float32, KV caches measured per position, UFIXED_POINT_16), tensor 17
// and the ones after it wrong from step 30: passing groups to pack, failing ones and departures
// to keep whole.
constexpr testing::ManyRunsShape kShape{.runs = 40,
                                        .tensors_per_run = 24,
                                        .elements = 64,
                                        .mixed = true,
                                        .fault_run = 30,
                                        .fault_tensor = 17};

class LongReport : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_THAT(testing::write_many_runs_pair(ref_, dev_, kShape), IsOk()); }
  Result<report::Report> diff() const {
    pipeline::DiffRequest request;
    request.reference.path = ref_;
    request.devices = {{dev_, {}, {}, {}}};
    request.jobs = 1;
    return pipeline::run_diff(request);
  }
  TempDir dir_;
  const std::string ref_ = dir_.file("ref.h5"), dev_ = dir_.file("dev.h5");
};

// The groups the file keeps whole (JsonWriter's rule): those that fail, warn or depart.
bool kept_whole(const report::GroupReport& group) {
  return group.verdict != compare::Verdict::kPass || group.departure;
}

TEST_F(LongReport, LoadsBackToTheDiffsFiguresBitForBit) {
  const Result<report::Report> diffed = diff();
  ASSERT_THAT(diffed, IsOk());
  const std::string text = report::report_text(*diffed);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["schema_version"], 3);
  const Result<report::Report> loaded = report::parse_report(text, "long.json");
  ASSERT_THAT(loaded, IsOk());
  ASSERT_EQ(loaded->runs.size(), diffed->runs.size());
  size_t packed = 0, whole = 0, departing = 0, channels = 0, quantized = 0;
  for (size_t r = 0; r < diffed->runs.size(); ++r) {
    const report::RunReport& run = diffed->runs[r];
    testing::expect_same_run(
        run, loaded->runs[r], [&](const report::GroupReport& group) { return kept_whole(group); },
        "run " + std::to_string(r));
    for (const report::GroupReport& group : run.groups) {
      const bool kept = kept_whole(group);
      (kept ? whole : packed)++;
      departing += group.departure.has_value();
      if (kept) continue;
      channels += !group.pairs.front().metrics->channels.empty();
      quantized += group.pairs.front().metrics->lsb_max.has_value();
    }
  }
  // Every kind of group was there to compare, and the packed ones are rows, not objects.
  EXPECT_GT(whole, 2 * kShape.tensors_per_run);
  EXPECT_GT(packed, 20 * kShape.tensors_per_run);
  EXPECT_GT(departing, 0u);
  EXPECT_GT(channels, 0u);
  EXPECT_GT(quantized, 0u);
  size_t objects = 0;
  for (const json& run : doc["runs"]) objects += run["groups"].size();
  EXPECT_EQ(objects, whole);
  // The ending, rebuilt from the runs read, is the diff's.
  for (const auto section : {report::ReportSection::kSummary, report::ReportSection::kSteps,
                             report::ReportSection::kAggregate}) {
    EXPECT_EQ(report::section_text(*loaded, section), report::section_text(*diffed, section));
  }
  ASSERT_EQ(loaded->ending.kv_cache.size(), diffed->ending.kv_cache.size());
  EXPECT_FALSE(diffed->ending.kv_cache.empty());
  for (size_t k = 0; k < diffed->ending.kv_cache.size(); ++k) {
    const report::KvCacheTrack &a = diffed->ending.kv_cache[k], &b = loaded->ending.kv_cache[k];
    EXPECT_EQ(a.tensor, b.tensor);
    EXPECT_EQ(a.runs, b.runs);
    ASSERT_EQ(a.steps.size(), b.steps.size()) << a.tensor;
    for (size_t s = 0; s < a.steps.size(); ++s) {
      EXPECT_EQ(a.steps[s].differing, b.steps[s].differing);
    }
  }
  // Written again, the file is the same text.
  EXPECT_EQ(report::report_text(*loaded), text);
}

// The text of blocks written before base85.
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string to_base64(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);  // bytes in this group of 3
    uint32_t word = 0;
    for (size_t k = 0; k < 3; ++k) {
      word = (word << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kBase64[(word >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// RFC 1924's digits (the block's "text": "base85"; Python's base64.b85decode reads it).
constexpr char kBase85[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

std::string from_base85(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); i += 5) {
    const size_t m = std::min<size_t>(5, text.size() - i);
    uint64_t word = 0;
    for (size_t k = 0; k < 5; ++k) {
      word = word * 85 + (k < m ? std::strchr(kBase85, text[i + k]) - kBase85 : 84);
    }
    for (size_t k = 0; k + 1 < m; ++k) out += static_cast<char>(word >> (24 - 8 * k));
  }
  return out;
}

std::string to_base85(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 4) {
    const size_t n = std::min<size_t>(4, bytes.size() - i);
    uint32_t word = 0;
    for (size_t k = 0; k < 4; ++k) {
      word = (word << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    }
    std::string digits(5, '0');
    for (size_t k = 5; k-- > 0; word /= 85) digits[k] = kBase85[word % 85];
    out += digits.substr(0, n + 1);
  }
  return out;
}

// A block's templates as JSON (the file has them deflated, json_rows.h).
json templates_of(const json& block) {
  EXPECT_EQ(block["text"], "base85");
  std::string text(block["template_bytes"].get<size_t>(), '\0');
  const std::string deflated = from_base85(block["templates"].get<std::string>());
  uLongf size = text.size();
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(text.data()), &size,
                       reinterpret_cast<const Bytef*>(deflated.data()), deflated.size()),
            Z_OK);
  return json::parse(text);
}

void put_templates(json& block, const json& templates) {
  const std::string text = templates.dump();
  std::string deflated(compressBound(text.size()), '\0');
  uLongf size = deflated.size();
  compress(reinterpret_cast<Bytef*>(deflated.data()), &size,
           reinterpret_cast<const Bytef*>(text.data()), text.size());
  deflated.resize(size);
  block["templates"] = to_base85(deflated);
  block["template_bytes"] = text.size();
}

// The block's templates edited by `edit` and written back.
template <typename Edit>
void edit_templates(json& block, Edit edit) {
  json templates = templates_of(block);
  edit(templates);
  put_templates(block, templates);
}

// A block written before base85 (schema version 3 at first): base64 text and no "text" key. It
// reads to the same report.
TEST_F(LongReport, ABase64BlockOfAnEarlierFileReadsTheSame) {
  const Result<report::Report> diffed = diff();
  ASSERT_THAT(diffed, IsOk());
  const std::string text = report::report_text(*diffed);
  json doc = json::parse(text);
  size_t blocks = 0;
  for (json& run : doc["runs"]) {
    if (!run.contains("packed")) continue;
    json& block = run["packed"];
    for (const char* key : {"templates", "data"}) {
      block[key] = to_base64(from_base85(block[key].get<std::string>()));
    }
    block.erase("text");
    ++blocks;
  }
  ASSERT_GT(blocks, 1u);
  const Result<report::Report> loaded = report::parse_report(doc.dump(), "earlier.json");
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(report::report_text(*loaded), text);
}

// A damaged block is an error naming it, never a crash nor a report with made-up figures. Run 0's
// block defines the templates (and their rules) that run 5's rows fill.
TEST_F(LongReport, ADamagedBlockIsAnErrorNamingIt) {
  const Result<report::Report> diffed = diff();
  ASSERT_THAT(diffed, IsOk());
  const json doc = json::parse(report::report_text(*diffed));
  ASSERT_FALSE(templates_of(doc["runs"][0]["packed"]).empty());
  // The templates read back as they were written: the edits below are what damages them.
  json unchanged = doc;
  edit_templates(unchanged["runs"][0]["packed"], [](json&) {});
  ASSERT_THAT(report::parse_report(unchanged.dump(), "long.json"), IsOk());
  using Edit = void (*)(json&);
  struct Case {
    size_t run;
    Edit edit;
    const char* expected;
  };
  const Case cases[] = {
      {5, [](json& b) { b["data"] = b["data"].get<std::string>().substr(5); },  // a group less
       "data: does not inflate to its bytes"},
      {5, [](json& b) { b["data"] = "." + b["data"].get<std::string>().substr(1); },
       "data: not base85"},
      {5, [](json& b) { b["data"] = b["data"].get<std::string>() + "~~~~~"; },  // above 2^32
       "data: not base85"},
      {5, [](json& b) { b["text"] = "base32"; }, "packed.text: expected \"base85\""},
      {5, [](json& b) { b["bytes"] = b["bytes"].get<uint64_t>() + 1; },
       "data: does not inflate to its bytes"},
      {5, [](json& b) { b["bytes"] = uint64_t{1} << 40; }, "bytes: more than a block may hold"},
      {5, [](json& b) { b["groups"] = b["groups"].get<uint64_t>() + 1; }, ".packed: data: "},
      {5, [](json& b) { b["groups"] = uint64_t{1} << 40; }, "groups: more than its bytes hold"},
      {5, [](json& b) { b.erase("data"); }, ".data: missing"},
      {0, [](json& b) { b["templates"] = "." + b["templates"].get<std::string>(); }, "not base85"},
      {0, [](json& b) { b["template_bytes"] = b["template_bytes"].get<uint64_t>() - 1; },
       "does not inflate"},
      {0, [](json& b) { edit_templates(b, [](json& t) { t = json::object(); }); },
       "templates: not a JSON array"},
      {0, [](json& b) { edit_templates(b, [](json& t) { t[0].erase("rules"); }); },
       "templates: an entry without its group and rules"},
      {0,
       [](json& b) {
         edit_templates(b, [](json& t) {
           t[0]["rules"] = json::array({json::array({0, "cube", 1})});
         });
       },
       "rules: unknown operation cube"},
      {0,
       [](json& b) {
         edit_templates(b, [](json& t) {
           t[0]["rules"] = json::array({json::array({100000, "copy", 1})});
         });
       },
       "rules: a rule's slots"},
      {0, [](json& b) { edit_templates(b, [](json& t) { t[0]["group"].erase("verdict"); }); },
       "verdict: missing"},
  };
  for (const Case& c : cases) {
    json edited = doc;
    c.edit(edited["runs"][c.run]["packed"]);
    const Result<report::Report> loaded = report::parse_report(edited.dump(), "long.json");
    ASSERT_FALSE(loaded.is_ok()) << c.expected;
    const std::string message = loaded.status().message();
    EXPECT_NE(message.find("runs[" + std::to_string(c.run) + "].packed"), std::string::npos)
        << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.expected << ": " << message;
  }
}

// A policy under which some packed groups fail: `check` judges them from their rows as diff
// judges the groups it compares.
constexpr char kStricter[] = R"({"default": {"fail_below_db": 78, "warn_below_db": 80}})";

TEST_F(LongReport, CheckJudgesThePackedGroupsAsTheDiffDoes) {
  const std::string saved = dir_.file("long.json"), policy = dir_.file("strict.json");
  testing::write_text(policy, kStricter);
  const auto diffed = run_cli("diff " + ref_ + " " + dev_ + " --jobs 1 --json " + saved);
  ASSERT_EQ(diffed.exit_code, 1) << diffed.err;
  // With the diff's own policy: the same bytes and the same terminal summary.
  const std::string checked = dir_.file("checked.json");
  const auto same = run_cli("check " + saved + " --json " + checked);
  EXPECT_EQ(same.exit_code, 1) << same.err;
  EXPECT_EQ(slurp(checked), slurp(saved));
  EXPECT_EQ(same.out, diffed.out);
  // With another: every group's verdict, the summary and the step lines are what diff gives.
  const std::string strict_diff = dir_.file("strict_diff.json"),
                    strict_check = dir_.file("sc.json");
  ASSERT_EQ(run_cli("diff " + ref_ + " " + dev_ + " --jobs 1 --policy " + policy + " --json " +
                    strict_diff)
                .exit_code,
            1);
  ASSERT_EQ(run_cli("check " + saved + " --policy " + policy + " --json " + strict_check).exit_code,
            1);
  const Result<report::Report> a = report::load_report(strict_diff);
  const Result<report::Report> b = report::load_report(strict_check);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  // The verdicts, not the first divergence: check keeps the hints the file has (made with the
  // diff's policy) and traces a first divergence through them, where a diff with this policy
  // explains its new failures anew (report/judge.h, trace_first_divergence).
  const auto without_first_divergence = [](json j) {
    if (!j.is_array()) j = json::array({j});
    for (json& item : j) item.erase("first_divergence");
    return j;
  };
  const Result<report::Report> original = report::load_report(saved);
  ASSERT_THAT(original, IsOk());
  size_t flipped = 0;
  for (size_t r = 0; r < a->runs.size(); ++r) {
    ASSERT_EQ(a->runs[r].groups.size(), b->runs[r].groups.size());
    EXPECT_EQ(a->runs[r].verdict, b->runs[r].verdict) << r;
    for (size_t g = 0; g < a->runs[r].groups.size(); ++g) {
      EXPECT_EQ(a->runs[r].groups[g].verdict, b->runs[r].groups[g].verdict) << r << " " << g;
      EXPECT_EQ(a->runs[r].groups[g].policy_rule, b->runs[r].groups[g].policy_rule)
          << r << " " << g;
      flipped += original->runs[r].groups[g].verdict != b->runs[r].groups[g].verdict;
    }
  }
  EXPECT_GT(flipped, 100u);
  for (const auto section : {report::ReportSection::kSummary, report::ReportSection::kSteps,
                             report::ReportSection::kAggregate}) {
    EXPECT_EQ(without_first_divergence(json::parse(report::section_text(*b, section))),
              without_first_divergence(json::parse(report::section_text(*a, section))));
  }
}

}  // namespace
}  // namespace qd::long_report
