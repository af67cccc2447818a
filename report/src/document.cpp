#include "qnn_debug/report/document.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace qd::report {
namespace {

using compare::Verdict;
using nlohmann::json;

enum class Kind { kString, kInteger, kReal, kBool, kArray, kObject };

bool has_kind(const json& value, Kind kind) {
  switch (kind) {
    case Kind::kString:
      return value.is_string();
    case Kind::kInteger:
      return value.is_number_integer();
    case Kind::kReal:
      return value.is_number() ||
             (value.is_string() && (value == "inf" || value == "-inf" || value == "nan"));
    case Kind::kBool:
      return value.is_boolean();
    case Kind::kArray:
      return value.is_array();
    case Kind::kObject:
      return value.is_object();
  }
  return false;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString:
      return "a string";
    case Kind::kInteger:
      return "an integer";
    case Kind::kReal:
      return "a number (or \"inf\", \"-inf\", \"nan\")";
    case Kind::kBool:
      return "true or false";
    case Kind::kArray:
      return "an array";
    case Kind::kObject:
      return "an object";
  }
  return "?";
}

// Walks the fields the renderers and `check` read, remembering the first mismatch with its path.
class Validator {
 public:
  explicit Validator(std::string source) : source_(std::move(source)) {}

  // `parent[key]` must have `kind` (or be null when `nullable`); true if it may be descended.
  bool field(const json& parent, const char* key, Kind kind, const std::string& where,
             bool nullable = false) {
    if (!status_.is_ok()) return false;
    const std::string path = where.empty() ? key : where + "." + key;
    auto it = parent.find(key);
    if (it == parent.end()) return fail(path + ": missing");
    if (nullable && it->is_null()) return false;
    if (!has_kind(*it, kind)) return fail(path + ": expected " + std::string(kind_name(kind)));
    return true;
  }

  bool fail(const std::string& what) {
    if (status_.is_ok()) {
      status_ = error(ErrorCode::kInvalidArgument, source_ + ": not a valid report: " + what);
    }
    return false;
  }

  const Status& status() const { return status_; }

 private:
  std::string source_;
  Status status_ = Status::ok();
};

std::string at(const std::string& where, size_t index) {
  return where + "[" + std::to_string(index) + "]";
}

void validate_tensor(Validator& v, const json& tensor, const std::string& where) {
  v.field(tensor, "name", Kind::kString, where);
  v.field(tensor, "dtype", Kind::kString, where);
  v.field(tensor, "handles", Kind::kArray, where);
  if (v.field(tensor, "dims", Kind::kArray, where)) {
    for (size_t i = 0; i < tensor["dims"].size(); ++i) {
      if (!tensor["dims"][i].is_number_unsigned())
        v.fail(at(where + ".dims", i) + ": expected a size");
    }
  }
  v.field(tensor, "quantization", Kind::kObject, where, true);
  if (tensor.contains("encoding_problems")) {  // absent in reports written before the lint
    v.field(tensor, "encoding_problems", Kind::kArray, where);
  }
}

void validate_metrics(Validator& v, const json& m, const std::string& where) {
  for (const char* key :
       {"sqnr_db", "mse", "rmse", "mae", "max_abs", "rel_l2", "cosine", "allclose_frac"}) {
    v.field(m, key, Kind::kReal, where);
  }
  for (const char* key : {"lsb_mae", "lsb_max", "noise_ratio", "saturation"}) {
    v.field(m, key, Kind::kReal, where, true);
  }
  for (const char* key : {"elements", "n", "ref_nan", "ref_inf", "dev_nan", "dev_inf"}) {
    v.field(m, key, Kind::kInteger, where);
  }
  v.field(m, "max_abs_coordinates", Kind::kArray, where);
  v.field(m, "channels", Kind::kArray, where);
  if (v.field(m, "error_histogram", Kind::kObject, where)) {
    v.field(m["error_histogram"], "edges", Kind::kArray, where + ".error_histogram");
    v.field(m["error_histogram"], "counts", Kind::kArray, where + ".error_histogram");
  }
  v.field(m, "worst", Kind::kArray, where);
}

void validate_group(Validator& v, const json& group, const std::string& where) {
  v.field(group, "id", Kind::kString, where);
  v.field(group, "order", Kind::kInteger, where);
  v.field(group, "handles", Kind::kArray, where);
  v.field(group, "op_type", Kind::kString, where);
  v.field(group, "verdict", Kind::kString, where);
  for (const char* key : {"sqnr_db", "input_sqnr_db", "introduced_db"}) {
    v.field(group, key, Kind::kReal, where, true);
  }
  v.field(group, "flags", Kind::kArray, where);
  if (!v.field(group, "pairs", Kind::kArray, where)) return;
  for (size_t p = 0; p < group["pairs"].size(); ++p) {
    const json& pair = group["pairs"][p];
    const std::string pair_at = at(where + ".pairs", p);
    if (!pair.is_object()) {
      v.fail(pair_at + ": expected an object");
      return;
    }
    v.field(pair, "match", Kind::kString, pair_at);
    if (v.field(pair, "reference", Kind::kObject, pair_at)) {
      validate_tensor(v, pair["reference"], pair_at + ".reference");
    }
    if (v.field(pair, "device", Kind::kObject, pair_at)) {
      validate_tensor(v, pair["device"], pair_at + ".device");
    }
    v.field(pair, "layout", Kind::kObject, pair_at, true);
    v.field(pair, "error", Kind::kString, pair_at, true);
    if (v.field(pair, "metrics", Kind::kObject, pair_at, true)) {
      validate_metrics(v, pair["metrics"], pair_at + ".metrics");
    }
  }
}

// The run-level facts (absent in reports written before they existed).
void validate_run_facts(Validator& v, const json& run, const std::string& where) {
  if (run.contains("coverage") && v.field(run, "coverage", Kind::kObject, where)) {
    for (const char* key : {"reference_tensors", "matched_reference_tensors", "compared_pairs"}) {
      v.field(run["coverage"], key, Kind::kInteger, where + ".coverage");
    }
  }
  if (run.contains("classification") &&
      v.field(run, "classification", Kind::kObject, where, true)) {
    for (const char* key : {"top1_agreement", "top5_agreement"}) {
      v.field(run["classification"], key, Kind::kReal, where + ".classification", true);
    }
  }
  if (run.contains("verdict_reasons") && v.field(run, "verdict_reasons", Kind::kArray, where)) {
    for (size_t i = 0; i < run["verdict_reasons"].size(); ++i) {
      if (!run["verdict_reasons"][i].is_string()) {
        v.fail(at(where + ".verdict_reasons", i) + ": expected a string");
      }
    }
  }
}

void validate_run(Validator& v, const json& run, const std::string& where) {
  validate_run_facts(v, run, where);
  v.field(run, "reference_run", Kind::kInteger, where);
  v.field(run, "device_run", Kind::kInteger, where);
  v.field(run, "verdict", Kind::kString, where);
  v.field(run, "first_divergence", Kind::kString, where, true);
  v.field(run, "introducers", Kind::kArray, where);
  if (v.field(run, "unmatched", Kind::kArray, where)) {
    for (size_t u = 0; u < run["unmatched"].size(); ++u) {
      const json& item = run["unmatched"][u];
      const std::string item_at = at(where + ".unmatched", u);
      if (!item.is_object()) {
        v.fail(item_at + ": expected an object");
        return;
      }
      for (const char* key : {"side", "name", "reason"}) v.field(item, key, Kind::kString, item_at);
    }
  }
  if (!v.field(run, "groups", Kind::kArray, where)) return;
  for (size_t g = 0; g < run["groups"].size(); ++g) {
    if (!run["groups"][g].is_object()) {
      v.fail(at(where + ".groups", g) + ": expected an object");
      return;
    }
    validate_group(v, run["groups"][g], at(where + ".groups", g));
  }
}

void validate_store(Validator& v, const json& store, const std::string& where) {
  for (const char* key : {"path", "producer", "backend", "soc", "model"}) {
    v.field(store, key, Kind::kString, where);
  }
  for (const char* key : {"runs", "profile_events", "memory_checkpoints"}) {
    v.field(store, key, Kind::kArray, where);
  }
}

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
  Validator v(source);
  if (!doc.is_object()) return error(ErrorCode::kInvalidArgument, source + ": not a JSON object");
  if (doc.value("schema", "") != kReportSchema) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": not a qnn-debug report (\"schema\" is not \"" + kReportSchema + "\")");
  }
  if (v.field(doc, "schema_version", Kind::kInteger, "") &&
      doc["schema_version"].get<int64_t>() > kReportSchemaVersion) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": report schema version " + doc["schema_version"].dump() +
                     " is newer than this qnn-debug reads (" +
                     std::to_string(kReportSchemaVersion) + "); upgrade qnn-debug");
  }
  v.field(doc, "tool_version", Kind::kString, "");
  for (const char* side : {"reference", "device"}) {
    if (v.field(doc, side, Kind::kObject, "")) validate_store(v, doc[side], side);
  }
  if (v.field(doc, "policy", Kind::kObject, "")) {
    v.field(doc["policy"], "default", Kind::kObject, "policy");
    v.field(doc["policy"], "rules", Kind::kArray, "policy");
  }
  if (v.field(doc, "summary", Kind::kObject, "")) {
    const json& summary = doc["summary"];
    v.field(summary, "verdict", Kind::kString, "summary");
    for (const char* key : {"runs_compared", "groups", "compared_pairs", "pass", "warn", "fail",
                            "unmatched_reference", "unmatched_device"}) {
      v.field(summary, key, Kind::kInteger, "summary");
    }
    v.field(summary, "first_divergence", Kind::kObject, "summary", true);
  }
  v.field(doc, "aggregate", Kind::kArray, "");
  v.field(doc, "warnings", Kind::kArray, "");
  if (v.field(doc, "runs", Kind::kArray, "")) {
    for (size_t r = 0; r < doc["runs"].size(); ++r) {
      if (!doc["runs"][r].is_object()) {
        v.fail(at("runs", r) + ": expected an object");
        break;
      }
      validate_run(v, doc["runs"][r], at("runs", r));
    }
  }
  return v.status();
}

Result<Document> load_report(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(ErrorCode::kNotFound, path + ": cannot be opened");
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  if (content.starts_with("\x89HDF\r\n\x1a\n")) {
    return error(ErrorCode::kInvalidArgument,
                 path +
                     ": is a qnn-debug store (HDF5), not a report: compare two stores with "
                     "`qnn-debug diff REF DEV --json report.json`, then check that report");
  }
  Document doc = json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return error(ErrorCode::kInvalidArgument, path + ": not valid JSON (truncated or damaged?)");
  }
  QD_RETURN_IF_ERROR(validate_report(doc, path));
  return doc;
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
