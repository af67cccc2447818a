#include "json_codec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "json_rows.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/compare/metric_fields.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/judge.h"
#include "report_schema.h"

namespace qd::report::codec {

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

// In place: a copy at every level would copy each subtree once per level above it.
void shorten_numbers(json& value) {
  if (value.is_number_float()) {
    value = std::stod(fmt::format("{:.5g}", value.get<double>()));
  } else if (value.is_structured()) {
    for (json& item : value) shorten_numbers(item);
  }
}

json short_numbers(const json& value) {
  json out = value;
  shorten_numbers(out);
  return out;
}

namespace {

using compare::MetricField;
using compare::Metrics;

json optional_real(const std::optional<double>& value) {
  return value ? json_real(*value) : json(nullptr);
}

std::optional<double> optional_real_from(const json& j) {
  return j.is_null() ? std::nullopt : std::optional<double>(real(j));
}

template <typename T>
std::vector<T> list_from(const json& j) {
  return j.get<std::vector<T>>();
}

json flags_json(const std::vector<compare::Flag>& flags) {
  json out = json::array();
  for (std::string_view name : compare::flag_names(flags)) out.push_back(name);
  return out;
}

// The schema admits only known names; one it does not know is left out.
std::vector<compare::Flag> flags_from(const json& j) {
  std::vector<compare::Flag> out;
  for (const json& name : j) {
    if (const auto flag = compare::parse_flag(name.get<std::string>())) out.push_back(*flag);
  }
  return out;
}

// The schema admits only the table's names.
compare::Verdict verdict_from(const json& j) {
  return compare::parse_verdict(j.get<std::string>()).value_or(compare::Verdict::kPass);
}

// ---- quantization, lint findings, stats

Quantization quantization_from(const json& j) {
  Quantization q;
  if (j.is_null()) return q;
  for (const json& scale : j["scales"]) q.scales.push_back(real(scale));
  q.offsets = list_from<int64_t>(j["offsets"]);
  q.axis = j["axis"].get<int32_t>();
  q.bitwidth = j["bitwidth"].get<uint8_t>();
  q.convention = parse_term(kQuantConventions, j["convention"].get<std::string>())
                     .value_or(QuantConvention::kQnnOffset);
  return q;
}

EncodingProblem problem_from(const json& j) {
  for (EncodingProblem p : {EncodingProblem::kMissing, EncodingProblem::kScaleNotFinite,
                            EncodingProblem::kScaleNotPositive, EncodingProblem::kRangeOverflow,
                            EncodingProblem::kRangeCollapsed}) {
    if (j == encoding_problem_name(p)) return p;
  }
  return EncodingProblem::kMissing;
}

std::vector<EncodingFinding> problems_from(const json& j) {
  std::vector<EncodingFinding> out;
  for (const json& f : j) {
    out.push_back({problem_from(f["problem"]), f["channel"].get<size_t>(),
                   f["channels"].get<size_t>(), real(f["scale"])});
  }
  return out;
}

// ---- metrics

json channels_json(const std::vector<compare::ChannelMetrics>& channels) {
  json out = json::array();
  for (const auto& c : channels) {
    out.push_back({{"sqnr_db", json_real(c.sqnr_db)},
                   {"mae", json_real(c.mae)},
                   {"max_abs", json_real(c.max_abs)},
                   {"n", c.n}});
  }
  return out;
}

// A KV cache's differing cells: [head, first position, last position] ranges.
json kv_cells_json(const compare::KvCells& cells) {
  json differing = json::array();
  for (const auto& r : cells.differing) differing.push_back({r.head, r.first, r.last});
  return {{"heads", cells.heads}, {"positions", cells.positions}, {"differing", differing}};
}

compare::KvCells kv_cells_from(const json& j) {
  compare::KvCells cells{j["heads"].get<uint64_t>(), j["positions"].get<uint64_t>(), {}};
  for (const json& r : j["differing"]) {
    cells.differing.push_back({r[0].get<uint64_t>(), r[1].get<uint64_t>(), r[2].get<uint64_t>()});
  }
  return cells;
}

json worst_json(const std::vector<compare::WorstElement>& worst,
                const std::vector<uint64_t>& dims) {
  json out = json::array();
  for (const compare::WorstElement& w : worst) {
    out.push_back({{"index", w.index},
                   {"coordinates", coordinates(w.index, dims)},
                   {"reference", json_real(w.reference)},
                   {"device", json_real(w.device)},
                   {"abs_error", json_real(w.abs_error)}});
  }
  return out;
}

// Columns rather than objects: a scatter's points are many and need no coordinates.
json samples_json(const std::vector<compare::WorstElement>& samples) {
  json index = json::array(), reference = json::array(), device = json::array();
  for (const compare::WorstElement& s : samples) {
    index.push_back(s.index);
    reference.push_back(json_real(s.reference));
    device.push_back(json_real(s.device));
  }
  return {{"index", std::move(index)},
          {"reference", std::move(reference)},
          {"device", std::move(device)}};
}

std::vector<compare::WorstElement> samples_from(const json& j) {
  std::vector<compare::WorstElement> out;
  const json& index = j.at("index");
  const json& reference = j.at("reference");
  const json& device = j.at("device");
  for (size_t i = 0; i < index.size() && i < reference.size() && i < device.size(); ++i) {
    const double r = real(reference[i]), d = real(device[i]);
    out.push_back({index[i].get<uint64_t>(), r, d, std::fabs(d - r)});
  }
  return out;
}

Metrics metrics_from(const json& j) {
  Metrics m;
  for (const MetricField& field : compare::metric_fields()) {
    const auto value = j.find(field.key);
    if (value == j.end()) continue;  // saturated_low/high: optional in version 1
    switch (field.kind) {
      case MetricField::Kind::kReal:
        m.*field.real = real(*value);
        break;
      case MetricField::Kind::kOptionalReal:
        m.*field.optional = optional_real_from(*value);
        break;
      case MetricField::Kind::kCount:
        m.*field.count = value->get<uint64_t>();
        break;
    }
  }
  for (const MetricField& field : compare::metric_fields()) {
    if (field.located_at)
      m.*field.located_at = j[std::string(field.key) + "_index"].get<uint64_t>();
  }
  for (const json& c : j["channels"]) {
    compare::ChannelMetrics channel;
    channel.sqnr_db = real(c["sqnr_db"]);
    channel.mae = real(c["mae"]);
    channel.max_abs = real(c["max_abs"]);
    channel.n = c["n"].get<uint64_t>();
    m.channels.push_back(channel);
  }
  if (!j["worst_channel"].is_null()) m.worst_channel = j["worst_channel"].get<uint64_t>();
  // Reports written before the summary have every channel, which gives it.
  if (const auto summary = j.find("channel_summary"); summary != j.end() && !summary->is_null()) {
    m.channel_summary = compare::ChannelSummary{summary->at("count").get<uint64_t>(),
                                                real(summary->at("worst_sqnr_db")),
                                                real(summary->at("median_sqnr_db"))};
  } else {
    m.channel_summary = compare::summarize_channels(m);
  }
  // Absent in reports written before the per-channel view covered every tensor.
  if (const auto worst = j.find("worst_channels"); worst != j.end()) {
    m.worst_channels = worst->get<std::vector<uint64_t>>();
  }
  if (const auto axis = j.find("channel_axis"); axis != j.end()) {
    m.channel_axis = axis->get<uint32_t>();
  }
  if (const auto cells = j.find("kv_cells"); cells != j.end()) m.kv_cells = kv_cells_from(*cells);
  m.histogram_edges.clear();
  for (const json& edge : j["error_histogram"]["edges"]) m.histogram_edges.push_back(real(edge));
  m.error_histogram = list_from<uint64_t>(j["error_histogram"]["counts"]);
  for (const json& w : j["worst"]) {
    m.worst.push_back({w["index"].get<uint64_t>(), real(w["reference"]), real(w["device"]),
                       real(w["abs_error"])});
  }
  if (const auto samples = j.find("samples"); samples != j.end()) {
    m.samples = samples_from(*samples);
  }
  return m;
}

// ---- pairs, groups, runs

json pair_json(const PairReport& pair) {
  json layout = nullptr;
  if (pair.layout) {
    layout = {{"axis_order", pair.layout->axis_order},
              {"inferred", pair.layout->inferred},
              {"reshaped", pair.layout->reshaped}};
  }
  return {{"output_index", pair.output_index},
          {"match", pair.match},
          {"reference", to_json(pair.reference)},
          {"device", to_json(pair.device)},
          {"layout", layout},
          {"metrics", pair.metrics ? to_json(*pair.metrics, pair.reference.dims) : json(nullptr)},
          {"error", pair.error.empty() ? json(nullptr) : json(pair.error)}};
}

PairReport pair_from(const json& j) {
  PairReport pair;
  pair.output_index = j["output_index"].get<int32_t>();
  pair.match = j["match"].get<std::string>();
  pair.reference = tensor_from(j["reference"]);
  pair.device = tensor_from(j["device"]);
  if (j["layout"].is_object()) {
    const json& l = j["layout"];
    pair.layout = LayoutSummary{list_from<uint8_t>(l["axis_order"]), l["inferred"].get<bool>(),
                                l["reshaped"].get<bool>()};
  }
  if (j["metrics"].is_object()) pair.metrics = metrics_from(j["metrics"]);
  if (j["error"].is_string()) pair.error = j["error"].get<std::string>();
  return pair;
}

json fitted_json(const compare::FittedEncoding& f) {
  return {{"min", json_real(f.min)}, {"max", json_real(f.max)}, {"scale", json_real(f.scale)},
          {"offset", f.offset},      {"bitwidth", f.bitwidth},  {"is_signed", f.is_signed}};
}

compare::FittedEncoding fitted_from(const json& j) {
  return {real(j.at("min")),           real(j.at("max")),
          real(j.at("scale")),         j.at("offset").get<int64_t>(),
          j.at("bitwidth").get<int>(), j.at("is_signed").get<bool>()};
}

// A coarse_encoding or clipping hint's "wider" suggestion: absent when the fitted one is enough.
void add_wider(json& out, const std::optional<compare::WiderEncoding>& wider) {
  if (wider)
    out["wider"] = {{"encoding", fitted_json(wider->encoding)},
                    {"sqnr_db", json_real(wider->sqnr_db)}};
}

std::optional<compare::WiderEncoding> wider_from(const json& evidence) {
  const auto wider = evidence.find("wider");
  if (wider == evidence.end()) return std::nullopt;
  return compare::WiderEncoding{fitted_from(wider->at("encoding")), real(wider->at("sqnr_db"))};
}

// Each kind's evidence, beside its reader: docs/report-schema.json, "hint". The schema cannot
// say which fields each kind needs, so the reader asks with at(): a missing one is an error
// naming it (parse_report), never a read past the object.
json evidence_json(const compare::HintEvidence& evidence) {
  using namespace compare;
  struct Writer {
    json operator()(const LayoutSuspect& e) const {
      return {{"permutation", e.permutation}, {"sqnr_db", json_real(e.sqnr_db)}};
    }
    json operator()(const CoarseEncoding& e) const {
      json out = {{"range_fraction", json_real(e.range_fraction)},
                  {"fitted_sqnr_db", json_real(e.fitted_sqnr_db)},
                  {"fitted", fitted_json(e.fitted)}};
      add_wider(out, e.wider);
      return out;
    }
    json operator()(const Clipping& e) const {
      json out = {{"below_fraction", json_real(e.below_fraction)},
                  {"above_fraction", json_real(e.above_fraction)},
                  {"sqnr_without_db", json_real(e.sqnr_without_db)},
                  {"fitted", fitted_json(e.fitted)},
                  {"fitted_sqnr_db", json_real(e.fitted_sqnr_db)}};
      add_wider(out, e.wider);
      return out;
    }
    json operator()(const Inherited& e) const {
      return {{"upstream_group", e.upstream_group}, {"introduced_db", json_real(e.introduced_db)}};
    }
    json operator()(const NanInfIntroduced& e) const {
      return {{"device_nan", e.device_nan},
              {"device_inf", e.device_inf},
              {"reference_nan", e.reference_nan},
              {"reference_inf", e.reference_inf}};
    }
    json operator()(const DegenerateEncoding& e) const { return {{"finding", e.finding}}; }
    json operator()(const KernelSuspect& e) const {
      return {{"ideal_sqnr_db", json_real(e.ideal_sqnr_db)}};
    }
  };
  return std::visit(Writer{}, evidence);
}

// A switch over every kind: a new kind without its reader does not compile (-Wswitch).
compare::HintEvidence evidence_from(compare::HintKind kind, const json& j) {
  using namespace compare;
  switch (kind) {
    case HintKind::kLayoutSuspect:
      return LayoutSuspect{j.at("permutation").get<std::string>(), real(j.at("sqnr_db"))};
    case HintKind::kCoarseEncoding:
      return CoarseEncoding{real(j.at("range_fraction")), real(j.at("fitted_sqnr_db")),
                            fitted_from(j.at("fitted")), wider_from(j)};
    case HintKind::kClipping:
      return Clipping{real(j.at("below_fraction")),  real(j.at("above_fraction")),
                      real(j.at("sqnr_without_db")), fitted_from(j.at("fitted")),
                      real(j.at("fitted_sqnr_db")),  wider_from(j)};
    case HintKind::kInherited:
      return Inherited{j.at("upstream_group").get<std::string>(), real(j.at("introduced_db"))};
    case HintKind::kNanInfIntroduced:
      return NanInfIntroduced{
          j.at("device_nan").get<uint64_t>(), j.at("device_inf").get<uint64_t>(),
          j.at("reference_nan").get<uint64_t>(), j.at("reference_inf").get<uint64_t>()};
    case HintKind::kDegenerateEncoding:
      return DegenerateEncoding{j.at("finding").get<std::string>()};
    case HintKind::kKernelSuspect:
      break;
  }
  return KernelSuspect{real(j.at("ideal_sqnr_db"))};
}

json hints_json(const std::vector<compare::Hint>& hints) {
  json out = json::array();
  for (const compare::Hint& hint : hints) {
    out.push_back({{"kind", compare::hint_kind_name(hint.kind())},
                   {"tensor", hint.tensor},
                   {"explained_db", json_real(hint.explained_db)},
                   {"sentence", hint.sentence},
                   {"evidence", evidence_json(hint.evidence)}});
  }
  return out;
}

std::vector<compare::Hint> hints_from(const json& j) {
  std::vector<compare::Hint> hints;
  if (!j.is_array()) return hints;  // reports written before hints existed
  for (const json& h : j) {
    // The schema admits only known kinds; one it does not know is left out.
    const auto kind = compare::parse_hint_kind(h.at("kind").get<std::string>());
    if (!kind) continue;
    hints.push_back({h.at("tensor").get<std::string>(), real(h.at("explained_db")),
                     h.at("sentence").get<std::string>(), evidence_from(*kind, h.at("evidence"))});
  }
  return hints;
}

// ---- error parts (--sim, --isolated)

json part_json(const std::optional<PartFigures>& part) {
  if (!part) return nullptr;
  return {{"verdict", compare::verdict_name(part->verdict)},
          {"sqnr_db", optional_real(part->sqnr_db)},
          {"introduced_db", optional_real(part->introduced_db)},
          {"lsb_max", optional_real(part->lsb_max)},
          {"noise_power", json_real(part->noise_power)},
          {"non_finite_introduced", part->non_finite_introduced},
          {"no_evidence", part->no_evidence},
          {"near_zero_reference", part->near_zero_reference},
          {"error", part->error}};
}

std::optional<PartFigures> part_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  PartFigures part;
  part.verdict = verdict_from(j["verdict"]);
  part.sqnr_db = optional_real_from(j["sqnr_db"]);
  part.introduced_db = optional_real_from(j["introduced_db"]);
  part.lsb_max = optional_real_from(j["lsb_max"]);
  part.noise_power = real(j["noise_power"]);
  part.non_finite_introduced = j["non_finite_introduced"].get<bool>();
  part.no_evidence = j.value("no_evidence", false);  // absent before schema 2's no_evidence
  part.near_zero_reference = j.value("near_zero_reference", false);  // absent before it existed
  part.error = j.value("error", std::string());
  return part;
}

json parts_json(const ErrorParts& parts) {
  json attribution = nullptr;
  if (parts.attribution) {
    attribution = {{"kind", compare::attribution_name(parts.attribution->kind)},
                   {"margin_db", json_real(parts.attribution->margin_db)},
                   {"inherited", parts.attribution->inherited}};
  }
  json out = {{"total_verdict", compare::verdict_name(parts.total)},
              {"attribution", std::move(attribution)}};
  for (const auto& term : compare::kParts) {
    out[term.name] = part_json(parts.*kGroupParts[part_index(term.value)]);
  }
  return out;
}

ErrorParts parts_from(const json& j) {
  ErrorParts parts;
  parts.total = verdict_from(j["total_verdict"]);
  for (const auto& term : compare::kParts) {
    parts.*kGroupParts[part_index(term.value)] = part_from(j[std::string(term.name)]);
  }
  if (const json& a = j["attribution"]; !a.is_null()) {
    parts.attribution =
        compare::Attribution{compare::attribution_from_name(a["kind"].get<std::string>())
                                 .value_or(compare::AttributionKind::kNone),
                             real(a["margin_db"]), a.value("inherited", false)};
  }
  return parts;
}

json introducers_json(const std::vector<Introducer>& introducers) {
  json out = json::array();
  for (const Introducer& i : introducers) {
    json entry = {{"id", i.id}, {"introduced_db", json_real(i.introduced_db)}};
    if (i.added_noise_db) entry["added_noise_db"] = json_real(*i.added_noise_db);
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<Introducer> introducers_from(const json& j) {
  std::vector<Introducer> out;
  for (const json& i : j) {
    Introducer entry{i["id"].get<std::string>(), real(i["introduced_db"]), std::nullopt};
    if (const auto added = i.find("added_noise_db"); added != i.end()) {
      entry.added_noise_db = real(*added);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json part_run_json(const std::optional<PartRun>& part) {
  if (!part) return nullptr;
  return {
      {"third_run", part->third_run},
      {"first_divergence", part->first_divergence ? json(*part->first_divergence) : json(nullptr)},
      {"introducers", introducers_json(part->introducers)},
      {"missing_pairs", part->missing_pairs}};
}

std::optional<PartRun> part_run_from(const json& run, const std::string& key) {
  const auto found = run.find(key);
  if (found == run.end() || found->is_null()) return std::nullopt;
  const json& j = *found;
  PartRun part;
  part.third_run = j["third_run"].get<uint32_t>();
  if (j["first_divergence"].is_string()) {
    part.first_divergence = j["first_divergence"].get<std::string>();
  }
  part.introducers = introducers_from(j["introducers"]);
  part.missing_pairs = j["missing_pairs"].get<uint64_t>();
  return part;
}

// ---- what the encoding allows (compare/excess.h)

json excess_json(const std::optional<compare::Excess>& e) {
  if (!e) return nullptr;
  return {{"source", compare::excess_source_name(e->source)},
          {"allowed_sqnr_db", json_real(e->allowed_sqnr_db)},
          {"excess_db", json_real(e->excess_db)},
          {"excess_noise_ratio", json_real(e->excess_noise_ratio)},
          {"added_noise_db", json_real(e->added_noise_db)}};
}

std::optional<compare::Excess> excess_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  compare::Excess e;
  const std::string source = j.at("source").get<std::string>();
  e.source = compare::parse_excess_source(source).value_or(compare::ExcessSource::kTotal);
  e.allowed_sqnr_db = real(j.at("allowed_sqnr_db"));
  e.excess_db = real(j.at("excess_db"));
  e.excess_noise_ratio = real(j.at("excess_noise_ratio"));
  e.added_noise_db = real(j.at("added_noise_db"));
  return e;
}

// ---- departure across runs (compare/departure.h)

json departure_json(const compare::Departure& d) {
  return {{"baseline_db", json_real(d.baseline_db)},
          {"spread_db", json_real(d.spread_db)},
          {"sqnr_db", json_real(d.sqnr_db)},
          {"baseline_runs", d.baseline_runs}};
}

compare::Departure departure_from(const json& j) {
  return {real(j.at("baseline_db")), real(j.at("spread_db")), real(j.at("sqnr_db")),
          j.at("baseline_runs").get<uint64_t>()};
}

json time_json(const OpTime& time) {
  return {{"duration", json_real(time.duration)},
          {"unit", time.unit},
          {"events", time.events},
          {"share", json_real(time.share)}};
}

json group_json(const GroupReport& group) {
  json pairs = json::array();
  for (const PairReport& pair : group.pairs) pairs.push_back(pair_json(pair));
  json out = {{"id", group.id},
              {"order", group.order},
              {"handles", group.handles},
              {"op_type", group.op_type},
              {"verdict", compare::verdict_name(group.verdict)},
              {"policy_rule", group.policy_rule},
              {"sqnr_db", optional_real(group.sqnr_db)},
              {"input_sqnr_db", optional_real(group.input_sqnr_db)},
              {"introduced_db", optional_real(group.introduced_db)},
              {"excess", excess_json(group.excess)},
              {"flags", flags_json(group.flags)},
              {"hints", hints_json(group.hints)},
              {"pairs", std::move(pairs)}};
  if (group.parts) out["parts"] = parts_json(*group.parts);  // only in a diff with parts
  if (!group.inputs.empty()) out["inputs"] = group.inputs;   // only with a stored graph
  if (!group.fused.empty()) out["fused"] = group.fused;      // only for a fused chain
  if (group.time) out["time"] = time_json(*group.time);
  if (group.departure) out["departure"] = departure_json(*group.departure);  // its one run
  return out;
}

// ---- a large page's rows: what the table, the graph and the chart draw (docs/reports.md, HTML)

json row_tensor_json(const TensorSummary& tensor) {
  return {{"name", tensor.name}, {"dims", tensor.dims}, {"dtype", tensor.dtype}};
}

// The overview figures of a pair (the table's columns) and its SQNR.
json row_metrics_json(const Metrics& m) {
  json out = {{"sqnr_db", json_real(m.sqnr_db)}};
  for (const MetricField& field : compare::metric_fields()) {
    if (!field.in_overview) continue;
    const std::optional<double> value = field.value(m);
    out[field.key] = field.kind == MetricField::Kind::kCount ? json(m.*field.count)
                     : value                                 ? json_real(*value)
                                                             : json(nullptr);
  }
  return out;
}

// A row leaves out what is empty, the default rule, and the device's name and dims where they
// are the reference's: the page reads each missing one as that default.
json group_row_json(const GroupReport& group) {
  json out = {{"light", true},
              {"id", group.id},
              {"order", group.order},
              {"op_type", group.op_type},
              {"verdict", compare::verdict_name(group.verdict)},
              {"sqnr_db", optional_real(group.sqnr_db)},
              {"input_sqnr_db", optional_real(group.input_sqnr_db)},
              {"introduced_db", optional_real(group.introduced_db)}};
  // A row keeps its excess only where the op adds error of its own: what the details would say.
  if (group.excess && group.verdict != compare::Verdict::kPass && group.excess->excess_db > 0) {
    out["excess"] = excess_json(group.excess);
  }
  if (!group.handles.empty()) out["handles"] = group.handles;
  if (group.policy_rule != -1) out["policy_rule"] = group.policy_rule;
  if (!group.flags.empty()) out["flags"] = flags_json(group.flags);
  if (!group.hints.empty()) {
    // The first cause without the fitted encoding's parameters: its sentence states the range.
    out["hints"] = hints_json({group.hints.front()});
    out["hints"][0]["evidence"].erase("fitted");
  }
  if (!group.inputs.empty()) out["inputs"] = group.inputs;
  if (group.parts) out["parts"] = parts_json(*group.parts);
  if (group.time) out["time"] = time_json(*group.time);
  if (group.departure) out["departure"] = departure_json(*group.departure);
  json pairs = json::array();
  for (const PairReport& pair : group.pairs) {
    json device = row_tensor_json(pair.device);
    if (pair.device.dims == pair.reference.dims) device.erase("dims");
    if (pair.device.name == pair.reference.name) device.erase("name");
    json row = {{"reference", row_tensor_json(pair.reference)},
                {"device", std::move(device)},
                {"metrics", pair.metrics ? row_metrics_json(*pair.metrics) : json(nullptr)}};
    if (!pair.error.empty()) row["error"] = pair.error;
    pairs.push_back(std::move(row));
  }
  out["pairs"] = std::move(pairs);
  shorten_numbers(out);
  return out;
}

// A pair's element lists emptied (the keys stay: the schema requires them), its figures kept.
// The channels are one too but for a KV cache's, whose positions the report's tracks follow
// (EndingBuilder rebuilds them on load); channel_summary keeps what is judged of the others.
// The lists are cleared before the JSON is built: a prefill's FFN tensor has 3,072 channels.
json group_figures_json(const GroupReport& group) {
  GroupReport figures = group;
  for (PairReport& pair : figures.pairs) {
    if (!pair.metrics) continue;
    compare::Metrics& m = *pair.metrics;
    m.worst.clear();
    m.samples.clear();
    m.error_histogram.clear();
    m.histogram_edges.clear();
    if (!compare::is_kv_cache(pair.reference.name)) m.channels.clear();
  }
  return group_json(figures);
}

// A page's cell of a run it keeps no groups of (json_rows.h): the light row without its hint,
// whose sentence (numbers in words) would make every cell a template of its own.
json group_cell_json(const GroupReport& group) {
  json out = group_row_json(group);
  out.erase("hints");
  return out;
}

}  // namespace

GroupReport group_from(const json& j) {
  GroupReport group;
  group.id = j["id"].get<std::string>();
  group.order = j["order"].get<uint64_t>();
  group.handles = list_from<int64_t>(j["handles"]);
  group.op_type = j["op_type"].get<std::string>();
  group.verdict = verdict_from(j["verdict"]);
  group.policy_rule = j["policy_rule"].get<int>();
  group.sqnr_db = optional_real_from(j["sqnr_db"]);
  group.input_sqnr_db = optional_real_from(j["input_sqnr_db"]);
  group.introduced_db = optional_real_from(j["introduced_db"]);
  if (const auto excess = j.find("excess"); excess != j.end()) group.excess = excess_from(*excess);
  if (const auto departure = j.find("departure"); departure != j.end()) {
    group.departure = departure_from(*departure);
  }
  group.flags = flags_from(j["flags"]);
  if (j.contains("hints")) group.hints = hints_from(j.at("hints"));
  for (const json& pair : j["pairs"]) group.pairs.push_back(pair_from(pair));
  if (const auto parts = j.find("parts"); parts != j.end() && !parts->is_null()) {
    group.parts = parts_from(*parts);
  }
  if (const auto inputs = j.find("inputs"); inputs != j.end()) {
    group.inputs = list_from<std::string>(*inputs);
  }
  if (const auto fused = j.find("fused"); fused != j.end()) {
    group.fused = list_from<std::string>(*fused);
  }
  if (const auto time = j.find("time"); time != j.end()) {
    group.time = OpTime{real(time->at("duration")), time->at("unit").get<std::string>(),
                        time->at("events").get<uint64_t>(), real(time->at("share"))};
  }
  return group;
}

namespace {

json optional_count(const std::optional<uint64_t>& value) {
  return value ? json(*value) : json(nullptr);
}
std::optional<uint64_t> optional_count_from(const json& j, const char* key) {
  const auto at = j.find(key);
  if (at == j.end() || at->is_null()) return std::nullopt;
  return at->get<uint64_t>();
}
std::optional<double> optional_real_at(const json& j, const char* key) {
  const auto at = j.find(key);
  return at == j.end() ? std::nullopt : optional_real_from(*at);
}

json classification_json(const std::optional<compare::ClassAgreement>& c) {
  if (!c) return nullptr;
  return {{"tensor", c->tensor},
          {"rows", c->rows},
          {"classes", c->classes},
          {"top1_agreement", optional_real(c->top1)},
          {"top5_agreement", optional_real(c->top5)},
          {"kl_divergence", optional_real(c->kl_divergence)},
          {"kl_max", optional_real(c->kl_max)},
          {"top5_overlap", optional_real(c->top5_overlap)},
          {"top10_overlap", optional_real(c->top10_overlap)},
          {"reference_token", optional_count(c->reference_token)},
          {"device_token", optional_count(c->device_token)},
          {"reference_token_probability", optional_real(c->reference_token_probability)},
          {"reference_token_rank", optional_count(c->reference_token_rank)},
          {"reference_margin", optional_real(c->reference_margin)}};
}

// A step's token view: the run's classification, and whether its next token differs.
json token_view_json(const std::optional<compare::ClassAgreement>& c) {
  if (!c) return nullptr;
  json out = classification_json(c);
  out["differs"] = c->reference_token && c->device_token && *c->reference_token != *c->device_token;
  return out;
}

// The token view's fields are absent from reports written before it (read as unset).
std::optional<compare::ClassAgreement> classification_from(const json& run) {
  const auto c = run.find("classification");
  if (c == run.end() || !c->is_object()) return std::nullopt;
  compare::ClassAgreement out;
  out.tensor = (*c)["tensor"].get<std::string>();
  out.rows = (*c)["rows"].get<uint64_t>();
  out.classes = (*c)["classes"].get<uint64_t>();
  out.top1 = optional_real_from((*c)["top1_agreement"]);
  out.top5 = optional_real_from((*c)["top5_agreement"]);
  out.kl_divergence = optional_real_at(*c, "kl_divergence");
  out.kl_max = optional_real_at(*c, "kl_max");
  out.top5_overlap = optional_real_at(*c, "top5_overlap");
  out.top10_overlap = optional_real_at(*c, "top10_overlap");
  out.reference_token = optional_count_from(*c, "reference_token");
  out.device_token = optional_count_from(*c, "device_token");
  out.reference_token_probability = optional_real_at(*c, "reference_token_probability");
  out.reference_token_rank = optional_count_from(*c, "reference_token_rank");
  out.reference_margin = optional_real_at(*c, "reference_margin");
  return out;
}

json event_run(uint32_t run) { return run == kNoRun ? json(nullptr) : json(run); }
uint32_t event_run_from(const json& j) { return j.is_null() ? kNoRun : j.get<uint32_t>(); }

}  // namespace

json to_json(const Quantization& quant) {
  if (!quant.is_quantized()) return nullptr;
  json scales = json::array();
  for (double scale : quant.scales) scales.push_back(json_real(scale));
  return {{"scales", std::move(scales)},
          {"offsets", quant.offsets},
          {"axis", quant.axis},
          {"bitwidth", quant.bitwidth},
          {"convention", term_name(kQuantConventions, quant.convention)}};
}

json to_json(const std::vector<EncodingFinding>& problems) {
  json out = json::array();
  for (const EncodingFinding& finding : problems) {
    out.push_back({{"problem", encoding_problem_name(finding.problem)},
                   {"channel", finding.channel},
                   {"channels", finding.channels},
                   {"scale", json_real(finding.scale)}});
  }
  return out;
}

json to_json(const TensorSummary& t) {
  return {{"name", t.name},
          {"seq", t.seq},
          {"handles", t.handles},
          {"output_index", t.output_index},
          {"dtype", t.dtype},
          {"dims", t.dims},
          {"data_nbytes", t.data_nbytes},
          {"axis_order", t.axis_order},
          {"quantization", to_json(t.quant)},
          {"encoding_problems", to_json(t.encoding_problems)},
          {"stats",
           {{"min", json_real(t.stats.min)},
            {"max", json_real(t.stats.max)},
            {"mean", json_real(t.stats.mean)},
            {"nan_count", t.stats.nan_count},
            {"inf_count", t.stats.inf_count}}}};
}

TensorSummary tensor_from(const json& j) {
  TensorSummary t;
  t.name = j["name"].get<std::string>();
  t.seq = j["seq"].get<uint64_t>();
  t.handles = list_from<int64_t>(j["handles"]);
  t.output_index = j["output_index"].get<int32_t>();
  t.dtype = j["dtype"].get<std::string>();
  t.dims = list_from<uint64_t>(j["dims"]);
  t.data_nbytes = j["data_nbytes"].get<uint64_t>();
  t.axis_order = list_from<uint8_t>(j["axis_order"]);
  t.quant = quantization_from(j["quantization"]);
  if (const auto problems = j.find("encoding_problems"); problems != j.end()) {
    t.encoding_problems = problems_from(*problems);
  }
  const json& s = j["stats"];
  t.stats = {real(s["min"]), real(s["max"]), real(s["mean"]), s["nan_count"].get<uint64_t>(),
             s["inf_count"].get<uint64_t>()};
  return t;
}

json to_json(const Metrics& m, const std::vector<uint64_t>& reference_dims) {
  json out = json::object();
  for (const MetricField& field : compare::metric_fields()) {
    const std::optional<double> value = field.value(m);
    out[field.key] = field.kind == MetricField::Kind::kCount ? json(m.*field.count)
                     : value                                 ? json_real(*value)
                                                             : json(nullptr);
  }
  for (const MetricField& field : compare::metric_fields()) {
    if (field.located_at == nullptr) continue;
    out[std::string(field.key) + "_index"] = m.*field.located_at;
    out[std::string(field.key) + "_coordinates"] = coordinates(m.*field.located_at, reference_dims);
  }
  out["channels"] = channels_json(m.channels);
  out["worst_channel"] = m.worst_channel ? json(*m.worst_channel) : json(nullptr);
  if (m.channel_summary) {
    out["channel_summary"] = {{"count", m.channel_summary->count},
                              {"worst_sqnr_db", json_real(m.channel_summary->worst_sqnr_db)},
                              {"median_sqnr_db", json_real(m.channel_summary->median_sqnr_db)}};
  }
  // Only with channels: a report read from before they existed is written back as it was.
  if (!m.worst_channels.empty()) out["worst_channels"] = m.worst_channels;
  if (m.channel_axis) out["channel_axis"] = *m.channel_axis;
  if (m.kv_cells) out["kv_cells"] = kv_cells_json(*m.kv_cells);
  out["error_histogram"] = {{"edges", m.histogram_edges}, {"counts", m.error_histogram}};
  out["worst"] = worst_json(m.worst, reference_dims);
  if (!m.samples.empty()) out["samples"] = samples_json(m.samples);
  return out;
}

json to_json(const GroupReport& group, GroupDetail detail) {
  switch (detail) {
    case GroupDetail::kFull:
      return group_json(group);
    case GroupDetail::kFigures:
    case GroupDetail::kPacked:  // without the writer's RowTables
      return group_figures_json(group);
    case GroupDetail::kRow:
      return group_row_json(group);
  }
  return group_json(group);
}

namespace {

// The run's groups as its detail says: objects, rows of its packed block (`packed`, null when
// none is) or the page's cells.
json groups_json(const RunReport& run, const RunDetail& detail, RowTables* tables, json& packed) {
  json groups = json::array();
  if (!detail.groups) {
    if (!detail.cells || tables == nullptr || !tables->cells.has_room()) return groups;
    for (const GroupReport& group : run.groups) tables->cells.add(group_cell_json(group));
    packed = tables->cells.finish_run();
    return groups;
  }
  for (size_t i = 0; i < run.groups.size(); ++i) {
    const GroupDetail d =
        i < detail.group_detail.size() ? detail.group_detail[i] : GroupDetail::kFull;
    if (d == GroupDetail::kPacked && tables != nullptr) {
      json figures = group_figures_json(run.groups[i]);
      if (tables->packed.add(i, figures)) continue;
      groups.push_back(std::move(figures));
      continue;
    }
    groups.push_back(to_json(run.groups[i], d));
  }
  if (tables != nullptr) packed = tables->packed.finish_run();
  return groups;
}

}  // namespace

json to_json(const RunReport& run, const RunDetail& detail, RowTables* tables) {
  json unmatched = json::array(), rows = nullptr;
  json groups = groups_json(run, detail, tables, rows);
  for (const UnmatchedTensor& u : run.unmatched) {
    unmatched.push_back({{"side", u.reference_side ? "reference" : "device"},
                         {"name", u.name},
                         {"seq", u.seq},
                         {"reason", u.reason},
                         {"ambiguous", u.ambiguous},
                         {"graph_output", u.graph_output}});
  }
  json out = {
      {"device_index", run.device},
      {"reference_run", run.reference_run},
      {"device_run", run.device_run},
      {"verdict", compare::verdict_name(run.verdict)},
      {"verdict_reasons", run.verdict_reasons},
      {"classification", classification_json(run.classification)},
      {"op_order", run.order_from_graph ? "graph" : "capture"},
      {"first_divergence", run.first_divergence ? json(*run.first_divergence) : json(nullptr)},
      {"introducers", introducers_json(run.introducers)},
      {"groups", std::move(groups)},
      {"unmatched", std::move(unmatched)}};
  if (run.quantization || run.kernel || run.isolated) {
    json& parts = out["parts"] = json::object();
    for (const auto& term : compare::kParts) {
      parts[term.name] = part_run_json(run.*kRunParts[part_index(term.value)]);
    }
  }
  if (!rows.is_null() && detail.groups) out["packed"] = std::move(rows);
  if (run.coverage) {
    out["coverage"] = {{"reference_tensors", run.coverage->reference_tensors},
                       {"matched_reference_tensors", run.coverage->matched_reference_tensors},
                       {"compared_pairs", run.coverage->compared_pairs}};
  }
  json& introducers = out["introducers"];
  if (introducers.size() > detail.introducers) {
    out["introducers_total"] = introducers.size();  // the reader ranks them all again
    introducers.erase(introducers.begin() + static_cast<std::ptrdiff_t>(detail.introducers),
                      introducers.end());
  }
  if (detail.groups) return out;
  out["groups_in_page"] = false;
  shorten_numbers(out);
  if (!rows.is_null()) out["cells"] = std::move(rows);  // its light rows' numbers are short
  return out;
}

RunReport run_from(const json& j) {
  RunReport run;
  run.device = j.value("device_index", uint32_t{0});  // reports before multi-device diffs: 0
  run.reference_run = j["reference_run"].get<uint32_t>();
  run.device_run = j["device_run"].get<uint32_t>();
  run.verdict = verdict_from(j["verdict"]);
  if (const auto reasons = j.find("verdict_reasons"); reasons != j.end()) {
    run.verdict_reasons = list_from<std::string>(*reasons);
  }
  if (const auto c = j.find("coverage"); c != j.end()) {
    run.coverage = Coverage{(*c)["reference_tensors"].get<uint64_t>(),
                            (*c)["matched_reference_tensors"].get<uint64_t>(),
                            (*c)["compared_pairs"].get<uint64_t>()};
  }
  run.classification = classification_from(j);
  run.order_from_graph = j["op_order"] == "graph";
  if (j["first_divergence"].is_string()) {
    run.first_divergence = j["first_divergence"].get<std::string>();
  }
  run.introducers = introducers_from(j["introducers"]);
  if (const auto parts = j.find("parts"); parts != j.end()) {
    for (const auto& term : compare::kParts) {
      run.*kRunParts[part_index(term.value)] = part_run_from(*parts, std::string(term.name));
    }
  }
  for (const json& group : j["groups"]) run.groups.push_back(group_from(group));
  for (const json& u : j["unmatched"]) {
    run.unmatched.push_back({u["side"] == "reference", u["name"].get<std::string>(),
                             u["seq"].get<uint64_t>(), u["reason"].get<std::string>(),
                             u.value("ambiguous", false), u.value("graph_output", false)});
  }
  return run;
}

json to_json(const StoreSummary& store) {
  json runs = json::array(), profile = json::array(), memory = json::array();
  for (const RunSummary& r : store.runs) {
    runs.push_back({{"id", r.id},
                    {"name", r.name},
                    {"complete", r.complete},
                    {"tensor_count", r.tensor_count},
                    {"dropped_count", r.dropped_count}});
  }
  for (const ProfileEvent& e : store.profile_events) {
    profile.push_back({{"run", event_run(e.run_id)},
                       {"name", e.name},
                       {"instruction_id", e.instruction_id < 0 ? json() : json(e.instruction_id)},
                       {"handles", e.handles},
                       {"start", e.start},
                       {"end", e.end},
                       {"unit", e.unit}});
  }
  for (const MemoryCheckpoint& c : store.memory_checkpoints) {
    memory.push_back({{"run", event_run(c.run_id)}, {"label", c.label}, {"bytes", c.bytes}});
  }
  const StoreMetadata& m = store.metadata;
  json out = {{"path", store.path},
              {"format", store.format},
              {"producer", m.producer},
              {"backend", m.backend},
              {"soc", m.soc},
              {"model", m.model},
              {"created_unix_ns", m.created_unix_ns},
              {"runs", std::move(runs)},
              {"profile_events", std::move(profile)},
              {"memory_checkpoints", std::move(memory)}};
  if (!store.label.empty()) out["label"] = store.label;
  return out;
}

StoreSummary store_from(const json& j) {
  StoreSummary store;
  store.path = j["path"].get<std::string>();
  store.format = j.value("format", "store");
  store.label = j.value("label", "");
  store.metadata = {j["producer"].get<std::string>(), j["backend"].get<std::string>(),
                    j["soc"].get<std::string>(), j["model"].get<std::string>(),
                    j.value("created_unix_ns", int64_t{0})};
  for (const json& r : j["runs"]) {
    store.runs.push_back({r["id"].get<uint32_t>(), r["name"].get<std::string>(),
                          r["complete"].get<bool>(), r["tensor_count"].get<uint64_t>(),
                          r["dropped_count"].get<uint64_t>()});
  }
  for (const json& e : j["profile_events"]) {
    ProfileEvent event;
    event.run_id = event_run_from(e["run"]);
    event.name = e["name"].get<std::string>();
    event.handles = list_from<int64_t>(e["handles"]);
    event.start = e["start"].get<int64_t>();
    event.end = e["end"].get<int64_t>();
    event.unit = e["unit"].get<std::string>();
    const auto instruction = e.find("instruction_id");
    event.instruction_id =
        instruction == e.end() || instruction->is_null() ? -1 : instruction->get<int64_t>();
    store.profile_events.push_back(std::move(event));
  }
  for (const json& c : j["memory_checkpoints"]) {
    store.memory_checkpoints.push_back(
        {event_run_from(c["run"]), c["label"].get<std::string>(), c["bytes"].get<uint64_t>(), 0});
  }
  return store;
}

json to_json(const ReportOptions& options) {
  return {{"atol", options.atol},
          {"rtol", options.rtol},
          {"ref_run", options.ref_run ? json(*options.ref_run) : json(nullptr)},
          {"logits", options.logits.empty() ? json(nullptr) : json(options.logits)}};
}

ReportOptions options_from(const json& j) {
  ReportOptions options;
  options.atol = real(j["atol"]);
  options.rtol = real(j["rtol"]);
  if (!j["ref_run"].is_null()) options.ref_run = j["ref_run"].get<uint32_t>();
  if (const auto logits = j.find("logits"); logits != j.end() && logits->is_string()) {
    options.logits = logits->get<std::string>();
  }
  return options;
}

json to_json(const AggregateEntry& entry, bool with_runs) {
  const AggregateEntry::RunSqnr& worst = entry.worst();
  json out = {{"id", entry.id},
              {"worst_sqnr_db", json_real(worst.sqnr_db)},
              {"worst_device_run", worst.device_run},
              {"mean_sqnr_db", json_real(entry.mean_sqnr_db())},
              {"first_failing_device_run",
               entry.first_failing_run ? json(*entry.first_failing_run) : json(nullptr)}};
  if (with_runs) {
    json& per_run = out["per_run"] = json::array();
    for (const auto& r : entry.per_run) {
      per_run.push_back({{"device_run", r.device_run},
                         {"sqnr_db", json_real(r.sqnr_db)},
                         {"verdict", compare::verdict_name(r.verdict)}});
      if (r.device != 0) per_run.back()["device_index"] = r.device;  // only in multi-device reports
    }
  }
  if (worst.device != 0) out["worst_device_index"] = worst.device;
  if (entry.first_failing_run && entry.first_failing_device != 0) {
    out["first_failing_device_index"] = entry.first_failing_device;
  }
  return out;
}

namespace {

json first_divergence_json(const std::optional<FirstDivergence>& first) {
  if (!first) return nullptr;
  return {{"device_index", first->device},
          {"device_run", first->device_run},
          {"group", first->group},
          {"sqnr_db", optional_real(first->sqnr_db)},
          {"flags", flags_json(first->flags)}};
}

json first_departure_json(const FirstDeparture& first) {
  return {{"device_index", first.device},
          {"device_run", first.device_run},
          {"group", first.group},
          {"name", first.name},
          {"departure", departure_json(first.departure)}};
}

json first_diverging_token_json(const FirstDivergingToken& t) {
  json out = {{"device_index", t.device},
              {"device_run", t.device_run},
              {"reference_token", t.reference_token},
              {"device_token", t.device_token},
              {"reference_token_probability", optional_real(t.reference_token_probability)},
              {"reference_token_rank", optional_count(t.reference_token_rank)},
              {"kl_divergence", optional_real(t.kl_divergence)},
              {"reference_margin", optional_real(t.reference_margin)},
              {"first_divergence", t.first_divergence ? json(*t.first_divergence) : json()}};
  out["first_departure"] = t.departure ? first_departure_json(*t.departure) : json();
  return out;
}

}  // namespace

json to_json(const Summary& s) {
  json out = {{"verdict", compare::verdict_name(s.verdict)},
              {"runs_compared", s.runs_compared},
              {"groups", s.groups},
              {"compared_pairs", s.compared_pairs},
              {"pass", s.pass},
              {"warn", s.warn},
              {"fail", s.fail},
              {"unmatched_reference", s.unmatched_reference},
              {"unmatched_device", s.unmatched_device},
              {"first_divergence", first_divergence_json(s.first_divergence)},
              {"first_failing_step", first_divergence_json(s.first_failing_step)},
              {"verdict_reasons", s.verdict_reasons}};
  if (s.first_departure) out["first_departure"] = first_departure_json(*s.first_departure);
  if (s.first_diverging_token) {
    out["first_diverging_token"] = first_diverging_token_json(*s.first_diverging_token);
  }
  if (s.quantization_first_divergence || s.kernel_first_divergence || s.isolated_first_divergence) {
    json& firsts = out["parts_first_divergence"] = json::object();
    for (const auto& term : compare::kParts) {
      firsts[term.name] = first_divergence_json(s.*kPartFirstDivergences[part_index(term.value)]);
    }
  }
  return out;
}

json to_json(const StepLine& step) {
  return {{"device_index", step.device},
          {"device_run", step.device_run},
          {"reference_run", step.reference_run},
          {"verdict", compare::verdict_name(step.verdict)},
          {"first_divergence", step.first_divergence ? json(*step.first_divergence) : json()},
          {"worst", step.worst ? json(*step.worst) : json()},
          {"worst_sqnr_db", optional_real(step.worst_sqnr_db)},
          {"output", step.output ? json(*step.output) : json()},
          {"output_verdict", compare::verdict_name(step.output_verdict)},
          {"output_sqnr_db", optional_real(step.output_sqnr_db)},
          {"top1", optional_real(step.tokens ? step.tokens->top1 : std::nullopt)},
          {"tokens", token_view_json(step.tokens)}};
}

json to_json(const DeviceOutcome& outcome) {
  json out = {{"device_index", outcome.device},
              {"verdict", compare::verdict_name(outcome.verdict)},
              {"runs_compared", outcome.runs_compared},
              {"pass", outcome.pass},
              {"warn", outcome.warn},
              {"fail", outcome.fail},
              {"first_divergence", first_divergence_json(outcome.first_divergence)}};
  if (outcome.first_departure)
    out["first_departure"] = first_departure_json(*outcome.first_departure);
  return out;
}

json to_json(const DeviceRow& row) {
  json cells = json::array();
  for (const DeviceCell& c : row.cells) {
    cells.push_back({{"device_index", c.device},
                     {"device_run", c.device_run},
                     {"verdict", compare::verdict_name(c.verdict)},
                     {"sqnr_db", optional_real(c.sqnr_db)},
                     {"introduced_db", optional_real(c.introduced_db)},
                     {"hint", c.hint.empty() ? json() : json(c.hint)}});
  }
  return {{"id", row.id},
          {"name", row.name},
          {"disagreement_db", json_real(row.disagreement_db)},
          {"outlier", row.outlier ? json(*row.outlier) : json()},
          {"cells", std::move(cells)}};
}

json to_json(const KvCacheTrack& track) {
  const auto cells_json = [](const std::vector<compare::KvCells::Range>& cells) {
    json out = json::array();
    for (const auto& r : cells) out.push_back({r.head, r.first, r.last});
    return out;
  };
  json steps = json::array();
  for (const KvCacheTrack::Step& step : track.steps) {
    json ranges = json::array();
    for (const auto& [first, last] : step.differing) ranges.push_back({first, last});
    json line = {{"device_index", step.device},
                 {"device_run", step.device_run},
                 {"differing", std::move(ranges)}};
    if (track.heads > 0) line["cells"] = cells_json(step.cells);
    steps.push_back(std::move(line));
  }
  json firsts = json::array();
  for (const KvCacheTrack::FirstDiffer& f : track.first_differ) {
    firsts.push_back({f.cells.head, f.cells.first, f.cells.last, f.device, f.device_run});
  }
  return {{"group", track.group},      {"tensor", track.tensor},
          {"axis", track.axis},        {"positions", track.positions},
          {"heads", track.heads},      {"runs", track.runs},
          {"steps", std::move(steps)}, {"first_differ", std::move(firsts)}};
}

// ---- the document

Status validate_report(const json& doc, const std::string& source) {
  if (!doc.is_object()) return error(ErrorCode::kInvalidArgument, source + ": not a JSON object");
  // Another kind of file, or a newer version, first: the schema would only name a field.
  if (const auto schema = doc.find("schema"); schema == doc.end() || *schema != kReportSchema) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": not a qnn-debug report (\"schema\" is not \"" + kReportSchema + "\")");
  }
  if (const auto version = doc.find("schema_version");
      version != doc.end() && version->is_number_integer() && *version > kReportSchemaVersion) {
    return error(ErrorCode::kInvalidArgument,
                 source + ": report schema version " + jsonio::dump(*version) +
                     " is newer than this qnn-debug reads (" +
                     std::to_string(kReportSchemaVersion) + "); upgrade qnn-debug");
  }
  const Status fits = check_against_schema(doc);
  if (fits.is_ok()) return fits;
  const char* what =
      fits.code() == ErrorCode::kInternal ? "cannot be validated" : "not a valid report";
  return error(fits.code(), source + ": " + what + ": " + fits.message());
}

Result<Report> report_from(const json& doc, const std::string& source) {
  Report report;
  ReportHeader& h = report.header;
  h.tool_version = doc["tool_version"].get<std::string>();
  h.reference = store_from(doc["reference"]);
  h.devices = {store_from(doc["device"])};
  if (const auto devices = doc.find("devices"); devices != doc.end() && !devices->empty()) {
    h.devices.clear();
    for (const json& device : *devices) h.devices.push_back(store_from(device));
  }
  // A report written before labels gets each device's default label here, once: every view, the
  // JSON and Python read StoreSummary::label and nothing else.
  for (StoreSummary& device : h.devices) {
    if (device.label.empty()) device.label = default_label(device);
  }
  for (auto [key, store] : {std::pair{"simulation", &h.simulation}, {"isolated", &h.isolated}}) {
    if (const auto found = doc.find(key); found != doc.end()) *store = store_from(*found);
  }
  QD_ASSIGN_OR_RETURN(
      h.policy, compare::Policy::from_json(jsonio::dump(doc["policy"]), source + " (policy)"));
  h.options = options_from(doc["options"]);
  EndingBuilder ending(h);
  PackedReader packed;
  for (const json& run : doc["runs"]) {
    report.runs.push_back(run_from(run));
    const std::string where = "runs" + json_path_index(report.runs.size() - 1);
    if (const Status read = packed.read(run, where, report.runs.back().groups); !read.is_ok()) {
      return error(read.code(), source + ": not a valid report: " + read.message());
    }
    // A long decode's list cut short: its groups' figures rank them all, as the judge did.
    if (const auto total = run.find("introducers_total");
        total != run.end() && total->get<uint64_t>() > report.runs.back().introducers.size()) {
      find_introducers(report.runs.back());
    }
    if (report.runs.back().device >= h.devices.size()) {
      return error(ErrorCode::kInvalidArgument,
                   source + ": not a valid report: a run's device_index " +
                       std::to_string(report.runs.back().device) + " names no device (it has " +
                       std::to_string(h.devices.size()) + ")");
    }
    ending.add_run(report.runs.back());
  }
  report.ending = std::move(ending).finish(doc["warnings"].get<std::vector<std::string>>());
  return report;
}

}  // namespace qd::report::codec
