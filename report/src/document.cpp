#include "qnn_debug/report/document.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/compare/compare.h"
#include "report_schema.h"

namespace qd::report {
namespace {

using compare::Verdict;
using nlohmann::json;

Verdict parse_verdict(const json& value) {
  return value == "fail" ? Verdict::kFail : value == "warn" ? Verdict::kWarn : Verdict::kPass;
}

// What the policy judges of one compared pair of `group` (its SQNR and the NaN/Inf test).
compare::OutputFacts facts_of(const json& group, const json& pair) {
  compare::OutputFacts facts;
  facts.op_type = group["op_type"].get_ref<const std::string&>();
  facts.ref_name = pair["reference"]["name"].get_ref<const std::string&>();
  facts.device_dtype = pair["device"]["dtype"].get_ref<const std::string&>();
  for (const char* side : {"reference", "device"}) {
    const auto problems = pair[side].find("encoding_problems");
    facts.bad_encoding = facts.bad_encoding || (problems != pair[side].end() && !problems->empty());
  }
  const json& m = pair["metrics"];
  facts.compared = m.is_object();
  if (facts.compared) {
    facts.sqnr_db = real(m["sqnr_db"]);
    facts.non_finite_introduced = m["dev_nan"].get<uint64_t>() > m["ref_nan"].get<uint64_t>() ||
                                  m["dev_inf"].get<uint64_t>() > m["ref_inf"].get<uint64_t>();
  }
  return facts;
}

// The run facts a saved report holds; reports written before they existed give what their groups
// and unmatched tensors tell.
compare::RunFacts run_facts_of(const json& run) {
  compare::RunFacts facts;
  if (const auto coverage = run.find("coverage"); coverage != run.end()) {
    facts.reference_tensors = (*coverage)["reference_tensors"].get<uint64_t>();
    facts.matched_reference_tensors = (*coverage)["matched_reference_tensors"].get<uint64_t>();
    facts.compared_pairs = (*coverage)["compared_pairs"].get<uint64_t>();
  } else {
    for (const json& group : run["groups"]) {
      for (const json& pair : group["pairs"]) facts.compared_pairs += pair["metrics"].is_object();
    }
    facts.matched_reference_tensors = run["groups"].size();
    facts.reference_tensors = facts.matched_reference_tensors;
  }
  for (const json& u : run["unmatched"]) {
    if (u["side"] != "reference") continue;
    ++facts.unmatched_reference_tensors;
    if (u.value("graph_output", false)) facts.unmatched_graph_outputs.push_back(u["name"]);
  }
  for (const json& group : run["groups"]) {
    for (const json& pair : group["pairs"]) {
      if (pair["metrics"].is_object()) continue;
      facts.not_compared.push_back(compare::describe_not_compared(
          pair["reference"]["name"].get<std::string>(), pair["device"]["name"].get<std::string>(),
          pair["match"].get<std::string>(),
          pair["error"].is_string() ? pair["error"].get<std::string>() : ""));
    }
  }
  const auto classification = run.find("classification");
  if (classification != run.end() && classification->is_object()) {
    for (auto [key, field] : {std::pair{"top1_agreement", &facts.top1_agreement},
                              std::pair{"top5_agreement", &facts.top5_agreement}}) {
      if (!(*classification)[key].is_null()) *field = real((*classification)[key]);
    }
  }
  return facts;
}

void rejudge_run(json& run, const compare::Policy& policy) {
  Verdict run_verdict = Verdict::kPass;
  json first = nullptr;
  for (json& group : run["groups"]) {
    Verdict verdict = Verdict::kPass;
    int rule = -1;
    for (const json& pair : group["pairs"]) {
      const compare::Judgement judgement = policy.judge_output(facts_of(group, pair));
      verdict = compare::worse(verdict, judgement.verdict);
      rule = std::max(rule, judgement.rule);
    }
    group["verdict"] = compare::verdict_name(verdict);
    group["policy_rule"] = rule;
    run_verdict = compare::worse(run_verdict, verdict);
    if (verdict == Verdict::kFail && first.is_null()) first = group["id"];
  }
  const compare::RunJudgement judgement = policy.judge_run(run_facts_of(run));
  run["verdict"] = compare::verdict_name(compare::worse(run_verdict, judgement.verdict));
  run["verdict_reasons"] = judgement.reasons;
  run["first_divergence"] = first;
}

}  // namespace

double real(const json& value) {
  if (value.is_number()) return value.get<double>();
  if (value == "inf") return std::numeric_limits<double>::infinity();
  if (value == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

json json_real(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

Status validate_report(const Document& doc, const std::string& source) {
  if (!doc.is_object()) return error(ErrorCode::kInvalidArgument, source + ": not a JSON object");
  // Another kind of file, or a newer version, first: the schema would only name a field.
  if (const auto schema = doc.find("schema"); schema == doc.end() || *schema != kReportSchema) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": not a qnn-debug report (\"schema\" is not \"" + kReportSchema + "\")");
  }
  if (const auto version = doc.find("schema_version");
      version != doc.end() && version->is_number_integer() && *version > kReportSchemaVersion) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": report schema version " + version->dump() +
                     " is newer than this qnn-debug reads (" +
                     std::to_string(kReportSchemaVersion) + "); upgrade qnn-debug");
  }
  const Status fits = check_against_schema(doc);
  if (fits.is_ok()) return fits;
  const char* what =
      fits.code() == ErrorCode::kInternal ? "cannot be validated" : "not a valid report";
  return error(fits.code(), source + ": " + what + ": " + fits.message());
}

Result<Document> parse_report(std::string_view text, const std::string& source) {
  if (text.starts_with("\x89HDF\r\n\x1a\n")) {
    return error(ErrorCode::kInvalidArgument,
                 source +
                     ": is a qnn-debug store (HDF5), not a report: compare two stores with "
                     "`qnn-debug diff REF DEV --json report.json`, then check that report");
  }
  QD_RETURN_IF_ERROR(check_json_depth(text, source));
  Document doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return error(ErrorCode::kInvalidArgument, source + ": not valid JSON (truncated or damaged?)");
  }
  QD_RETURN_IF_ERROR(validate_report(doc, source));
  return doc;
}

Result<Document> load_report(const std::string& path) {
  constexpr uint64_t kMaxReportBytes = uint64_t{8} << 30;  // nlohmann's parse holds it whole
  QD_ASSIGN_OR_RETURN(const std::string text,
                      read_text_file(path, "report", "a report", kMaxReportBytes));
  return parse_report(text, path);
}

std::string report_text(const Document& doc) {
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void summarize(Document& doc) {
  size_t groups = 0, pairs = 0, pass = 0, warn = 0, fail = 0, unmatched_ref = 0,
         unmatched_device = 0;
  Verdict verdict = Verdict::kPass;
  json first = nullptr;
  json reasons = json::array();
  for (const json& run : doc["runs"]) {
    verdict = compare::worse(verdict, parse_verdict(run["verdict"]));
    for (const json& reason : run.value("verdict_reasons", json::array())) {
      reasons.push_back("device run " + run["device_run"].dump() + ": " +
                        reason.get<std::string>());
    }
    for (const json& group : run["groups"]) {
      ++groups;
      pairs += group["pairs"].size();
      const Verdict v = parse_verdict(group["verdict"]);
      (v == Verdict::kPass ? pass : v == Verdict::kWarn ? warn : fail)++;
      verdict = compare::worse(verdict, v);
      if (first.is_null() && run["first_divergence"] == group["id"]) {
        first = {{"device_run", run["device_run"]},
                 {"group", group["id"]},
                 {"sqnr_db", group["sqnr_db"]},
                 {"flags", group["flags"]}};
      }
    }
    for (const json& u : run["unmatched"])
      (u["side"] == "reference" ? unmatched_ref : unmatched_device)++;
  }
  doc["summary"] = {{"verdict", compare::verdict_name(verdict)},
                    {"runs_compared", doc["runs"].size()},
                    {"groups", groups},
                    {"compared_pairs", pairs},
                    {"pass", pass},
                    {"warn", warn},
                    {"fail", fail},
                    {"unmatched_reference", unmatched_ref},
                    {"unmatched_device", unmatched_device},
                    {"first_divergence", first},
                    {"verdict_reasons", std::move(reasons)}};
}

void rejudge(Document& doc, const compare::Policy& policy) {
  for (json& run : doc["runs"]) rejudge_run(run, policy);
  doc["policy"] = json::parse(policy.to_json());
  summarize(doc);
}

Verdict report_verdict(const Document& doc) {
  return parse_verdict(doc["summary"].value("verdict", "fail"));
}

}  // namespace qd::report
