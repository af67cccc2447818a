// The typed report (report/model.h): the metric declarations and the schema agree, a report of
// schema version 1 loads and renders exactly as it did, and the streamed JSON reads back as the
// same report.
#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../common/files.h"
#include "../common/same_report.h"
#include "../common/status_matchers.h"
#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/base/tensor.h"
#include "qnn_debug/compare/align.h"
#include "qnn_debug/compare/flags.h"
#include "qnn_debug/compare/hint.h"
#include "qnn_debug/compare/metric_fields.h"
#include "qnn_debug/compare/parts.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;

json schema() { return json::parse(testing::slurp(QD_DOCS_DIR "/report-schema.json")); }

// The schema's flags are the table's, in its order (compare/flags.h).
TEST(FlagTable, IsTheSchemasEnum) {
  std::vector<std::string> declared;
  for (const compare::FlagInfo& info : compare::kFlags) declared.emplace_back(info.name);
  EXPECT_EQ(schema()["$defs"]["flags"]["items"]["enum"].get<std::vector<std::string>>(), declared);
  for (const compare::FlagInfo& info : compare::kFlags) {
    EXPECT_EQ(compare::parse_flag(info.name), info.value) << info.name;
  }
  EXPECT_FALSE(compare::parse_flag("saturated"));
}

// The schema's hint kinds are the evidence types' names, in HintKind's order (compare/hint.h).
TEST(HintKinds, AreTheSchemasEnum) {
  const std::vector<std::string> declared(compare::kHintKindNames.begin(),
                                          compare::kHintKindNames.end());
  EXPECT_EQ(schema()["$defs"]["hint"]["properties"]["kind"]["enum"].get<std::vector<std::string>>(),
            declared);
  for (size_t k = 0; k < declared.size(); ++k) {
    EXPECT_EQ(compare::parse_hint_kind(declared[k]), static_cast<compare::HintKind>(k));
  }
  EXPECT_FALSE(compare::parse_hint_kind("unknown"));
}

template <typename Enum, size_t N>
std::vector<std::string> names_of(const std::array<Term<Enum>, N>& terms) {
  std::vector<std::string> out;
  for (std::string_view name : term_names(terms)) out.emplace_back(name);
  return out;
}

// Every closed vocabulary's table (base/vocabulary.h) is the schema's enum where the report
// writes it, in order, and reads back both ways.
TEST(Vocabularies, AreTheSchemasEnums) {
  const json s = schema();
  const auto enum_at = [&](const std::string& pointer) {
    return s.at(json::json_pointer(pointer)).at("enum").get<std::vector<std::string>>();
  };
  EXPECT_EQ(enum_at("/$defs/verdict"), names_of(compare::kVerdicts));
  EXPECT_EQ(enum_at("/properties/policy/properties/gate"), names_of(compare::kGates));
  EXPECT_EQ(enum_at("/$defs/parts/oneOf/1/properties/attribution/oneOf/1/properties/kind"),
            names_of(compare::kAttributionKinds));
  EXPECT_EQ(enum_at("/$defs/pair/properties/match"), names_of(compare::kMatchKinds));
  EXPECT_EQ(enum_at("/$defs/excess/oneOf/1/properties/source"), names_of(compare::kExcessSources));
  EXPECT_EQ(enum_at("/$defs/tensor/properties/encoding_problems/items/properties/problem"),
            names_of(kEncodingProblems));
  EXPECT_EQ(enum_at("/$defs/quantization/oneOf/1/properties/convention"),
            names_of(kQuantConventions));
  for (const auto& part : compare::kParts) {  // the parts are keys of a group's parts object
    EXPECT_TRUE(s.at(json::json_pointer("/$defs/parts/oneOf/1/properties"))
                    .contains(std::string(part.name)))
        << part.name;
  }
  for (const auto& verdict : compare::kVerdicts) {
    EXPECT_EQ(compare::parse_verdict(verdict.name), verdict.value);
  }
  EXPECT_FALSE(compare::parse_verdict("passed"));
  EXPECT_EQ(compare::attribution_from_name("kernel"), compare::AttributionKind::kKernel);
}

// Each declared figure is in the schema's metrics object with the type its kind says, and
// every scalar figure of the schema is declared: the declaration and the schema cannot drift.
TEST(MetricFields, AreTheSchemasFigures) {
  const json metrics = schema()["$defs"]["metrics"];
  const json& properties = metrics["properties"];
  std::set<std::string> declared;
  for (const compare::MetricField& field : compare::metric_fields()) {
    declared.insert(field.key);
    ASSERT_TRUE(properties.contains(field.key)) << field.key << " is not in the schema";
    const json& type = properties[field.key];
    switch (field.kind) {
      case compare::MetricField::Kind::kReal:
        EXPECT_EQ(type, json({{"$ref", "#/$defs/real"}})) << field.key;
        break;
      case compare::MetricField::Kind::kOptionalReal:
        EXPECT_EQ(type, json({{"$ref", "#/$defs/optional_real"}})) << field.key;
        break;
      case compare::MetricField::Kind::kCount:
        EXPECT_EQ(type["type"], "integer") << field.key;
        break;
    }
    if (field.located_at != nullptr) {
      EXPECT_TRUE(properties.contains(std::string(field.key) + "_index")) << field.key;
      EXPECT_TRUE(properties.contains(std::string(field.key) + "_coordinates")) << field.key;
    }
  }
  for (const auto& [key, type] : properties.items()) {
    const bool scalar =
        type.contains("$ref") || (type.contains("type") && type["type"] == "integer");
    if (scalar && !key.ends_with("_index") && key != "worst_channel" && key != "channel_axis") {
      EXPECT_TRUE(declared.count(key)) << key << " is in the schema but not in metric_fields()";
    }
  }
}

// Files of tests/golden/schema-v1: reports written by schema version 1 (keys sorted, before
// hints existed) and what was rendered from them then.
std::string schema_v1_file(const std::string& name) {
  return testing::slurp(std::string(QD_GOLDEN_DIR) + "/schema-v1/" + name);
}

// A version 1 report with its version back in.
std::string version_1_report(const std::string& golden) {
  json doc = json::parse(schema_v1_file(golden + ".json"));
  doc["schema_version"] = 1;
  doc["tool_version"] = "0.1.0";
  return doc.dump(2);
}

// The CSV without the columns added since version 1 (they come out empty for its reports).
std::string without_later_columns(const std::string& csv) {
  const std::set<std::string> later = {"hints",
                                       "why",
                                       "time",
                                       "time_unit",
                                       "time_share",
                                       "ideal_sqnr_db",
                                       "masked",
                                       "allowed_sqnr_db",
                                       "excess_db",
                                       "excess_noise_ratio",
                                       "excess_source",
                                       "departure_baseline_db",
                                       "departure_sqnr_db",
                                       "departure_baseline_runs"};
  std::vector<size_t> dropped;
  std::string out;
  std::istringstream lines(csv);
  bool header = true;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    std::string kept;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (header && later.count(fields[i])) dropped.push_back(i);
      if (std::find(dropped.begin(), dropped.end(), i) != dropped.end()) continue;
      kept += (kept.empty() && i == 0 ? "" : ",") + fields[i];
    }
    out += kept + "\n";
    header = false;
  }
  return out;
}

TEST(SchemaVersion1, LoadsAndRendersAsItDid) {
  const std::string golden = "etdump-requant-scale";
  const Result<report::Report> report = report::parse_report(version_1_report(golden), "v1.json");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report::render_summary(*report, 10, false), schema_v1_file(golden + ".summary.txt"));
  EXPECT_EQ(without_later_columns(report::render(*report, *report::find_view("csv"))),
            without_later_columns(schema_v1_file(golden + ".csv")));
}

// Written again (version 2, streamed), the report holds the same fields and values.
TEST(SchemaVersion1, WrittenAgainHoldsTheSameFields) {
  const std::string text = version_1_report("demo-clipping");
  const Result<report::Report> report = report::parse_report(text, "v1.json");
  ASSERT_THAT(report, IsOk());
  json written = json::parse(report::report_text(*report));
  json original = json::parse(text);
  // Hints and the excess came later: none for a version 1 report, whose pairs have no ideal.
  for (json& run : written["runs"]) {
    for (json& group : run["groups"]) {
      EXPECT_EQ(group["hints"], json::array());
      EXPECT_EQ(group["excess"], json(nullptr));
      group.erase("hints");
      group.erase("excess");
      for (json& pair : group["pairs"]) {
        if (!pair["metrics"].is_object()) continue;
        EXPECT_EQ(pair["metrics"]["ideal_sqnr_db"], json(nullptr));
        pair["metrics"].erase("ideal_sqnr_db");
        EXPECT_EQ(pair["metrics"]["masked"], 0);  // masked positions came later: none
        pair["metrics"].erase("masked");
      }
    }
  }
  // Labels came later: the loader gives the device its default label (the store's metadata).
  EXPECT_EQ(written["device"]["label"], report::default_label(report->header.device()));
  written["device"].erase("label");
  for (json& entry : written["aggregate"]) {  // rebuilt from the runs, with what came later
    EXPECT_TRUE(entry.contains("first_failing_device_run"));
    entry.erase("first_failing_device_run");
    for (json& cell : entry["per_run"]) {  // each run's verdict, the judge's
      EXPECT_TRUE(cell.contains("verdict"));
      cell.erase("verdict");
    }
  }
  // Also later: the device index of runs and first divergences, the steps and the first failing
  // step, all rebuilt from the runs.
  for (json& run : written["runs"]) {
    EXPECT_EQ(run["device_index"], 0);
    run.erase("device_index");
  }
  EXPECT_EQ(written["summary"]["first_divergence"]["device_index"], 0);
  written["summary"]["first_divergence"].erase("device_index");
  EXPECT_EQ(written["steps"].size(), written["runs"].size());
  EXPECT_TRUE(written["summary"].contains("first_failing_step"));
  written.erase("steps");
  written["summary"].erase("first_failing_step");
  // The token view and --logits came later: unset, written as null.
  EXPECT_EQ(written["options"]["logits"], json(nullptr));
  written["options"].erase("logits");
  for (json& run : written["runs"]) {
    if (!run["classification"].is_object()) continue;
    for (const char* key : {"kl_divergence", "kl_max", "top5_overlap", "top10_overlap",
                            "reference_token", "device_token", "reference_token_probability",
                            "reference_token_rank", "reference_margin"}) {
      EXPECT_EQ(run["classification"][key], json(nullptr)) << key;
      run["classification"].erase(key);
    }
  }
  EXPECT_EQ(written["schema_version"], report::kReportSchemaVersion);
  for (json* doc : {&written, &original}) doc->erase("schema_version");
  EXPECT_EQ(written, original) << "differs: "
                               << json::diff(original, written).dump().substr(0, 600);
  const Result<report::Report> again =
      report::parse_report(report::report_text(*report), "v2.json");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(report::report_text(*again), report::report_text(*report));
}

// tests/golden/schema-v2: a long decode as version 2 wrote it (its passing groups past run 0
// objects without element lists), with what was rendered from it then.
std::string schema_v2_file(const std::string& name) {
  return testing::slurp(std::string(QD_GOLDEN_DIR) + "/schema-v2/" + name);
}

TEST(SchemaVersion2, ALongDecodeLoadsAndRendersAsItDid) {
  const Result<report::Report> report =
      report::parse_report(schema_v2_file("long-decode.json"), "v2.json");
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->runs.size(), 20u);
  EXPECT_EQ(report::render_summary(*report, 10, false), schema_v2_file("long-decode.summary.txt"));
  EXPECT_EQ(report::render(*report, *report::find_view("csv")), schema_v2_file("long-decode.csv"));
}

// Written again, version 3 packs the passing groups past run 0, and reads back to the report
// the version 2 file held, figure by figure.
TEST(SchemaVersion2, ALongDecodeWrittenAgainPacksTheSameFigures) {
  const Result<report::Report> v2 =
      report::parse_report(schema_v2_file("long-decode.json"), "v2.json");
  ASSERT_THAT(v2, IsOk());
  const std::string text = report::report_text(*v2);
  const json doc = json::parse(text);
  EXPECT_EQ(doc["schema_version"], 3);
  size_t packed = 0;
  for (const json& run : doc["runs"])
    packed += run.value("packed", json::object()).value("groups", 0);
  EXPECT_GT(packed, 100u);
  EXPECT_LT(text.size(), schema_v2_file("long-decode.json").size() / 2);
  const Result<report::Report> v3 = report::parse_report(text, "v3.json");
  ASSERT_THAT(v3, IsOk());
  ASSERT_EQ(v3->runs.size(), v2->runs.size());
  for (size_t r = 0; r < v2->runs.size(); ++r) {
    // Version 3 keeps the lists of the groups that fail, warn or depart (version 2 kept the
    // first run's too).
    testing::expect_same_run(
        v2->runs[r], v3->runs[r],
        [&](const report::GroupReport& group) {
          return group.verdict != compare::Verdict::kPass || group.departure;
        },
        "run " + std::to_string(r));
  }
  EXPECT_EQ(report::render(*v3, *report::find_view("csv")), schema_v2_file("long-decode.csv"));
  EXPECT_EQ(report::report_text(*v3), text);
}

// The file views are the registry's, each named once; the HTML page carries the declarations.
TEST(FileViews, AreListedOnceAndTheHtmlCarriesTheMetricDeclarations) {
  std::set<std::string> names;
  for (const report::FileView& view : report::file_views()) {
    EXPECT_TRUE(names.insert(view.name).second) << view.name;
    EXPECT_EQ(report::find_view(view.name), &view);
  }
  EXPECT_EQ(names, (std::set<std::string>{"json", "html", "csv", "suggest-overrides",
                                          "model-explorer", "model-explorer-graph"}));
  const Result<report::Report> report =
      report::parse_report(version_1_report("demo-none"), "v1.json");
  ASSERT_THAT(report, IsOk());
  const std::string html = report::render(*report, *report::find_view("html"));
  for (const compare::MetricField& field : compare::metric_fields()) {
    EXPECT_NE(html.find("\"key\":\"" + std::string(field.key) + "\""), std::string::npos)
        << field.key;
  }
}

}  // namespace
}  // namespace qd
