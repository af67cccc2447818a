// `--model-explorer FILE`: each op's SQNR as Model Explorer node data, coloured by the policy, so
// the engineer's own model turns red where the device diverges; `--model-explorer-graph FILE`: the
// stored graph as a Model Explorer graph, for a run with no model file at hand. Both key a group
// by its node's name in the model (docs/reports.md, "Model Explorer", says which fields Model
// Explorer reads and how it applies them).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "qnn_debug/naming/naming.h"
#include "views_internal.h"

namespace qd::report {
namespace {

using nlohmann::json;

// The HTML page's verdict colours (report/assets/report.css), so both views read alike.
const char* page_colour_of(compare::Verdict verdict) {
  switch (verdict) {
    case compare::Verdict::kFail:
      return "#c62828";
    case compare::Verdict::kWarn:
      return "#b26a00";
    case compare::Verdict::kPass:
      break;
  }
  return "#2e7d32";
}

// Model Explorer colours a value by the first threshold it is <= to, while the policy fails a
// value < fail_below_db: the largest double below each threshold makes both agree exactly.
double just_below(double threshold) { return std::nextafter(threshold, -HUGE_VAL); }

// JSON has no infinities: an exact tensor (+inf) reads as float32's resolution, which no
// measured SQNR of float data exceeds, and -inf (an all-zero reference) as its negative.
double finite_sqnr(double sqnr_db) {
  return std::clamp(sqnr_db, -compare::kExactSqnrDb, compare::kExactSqnrDb);
}

Result<naming::NameParser> executorch_parser() {
  return naming::NameParser::create("executorch-qnn", "", "");
}

// The group's node in the model: its first device tensor's name without the QNN output suffix
// and the graph input/output prefix, as the executorch-qnn preset reads it. A name whose suffix
// is not the output index the store holds keeps its digits: an fx node name ends in its own
// counter ("aten_relu_default_3"), which that preset would take for an older-style index.
std::string node_named(const naming::NameParser& parser, const std::string& name,
                       int64_t output_index) {
  const naming::ParsedName parsed = parser.parse(name);
  const bool index_agrees = parsed.output_index < 0 || parsed.output_index == output_index;
  return index_agrees && !parsed.node.empty() ? std::string(parsed.node) : name;
}

std::string node_of(const naming::NameParser& parser, const GroupReport& group) {
  if (group.pairs.empty()) return group.id;
  const TensorSummary& device = group.pairs.front().device;
  return node_named(parser, device.name, device.output_index);
}

// The model's nodes of the other ops fused into the group (their reference tensors' nodes), so
// that a fused conv+bn+relu colours all three.
std::vector<std::string> fused_nodes(const naming::NameParser& parser, const GroupReport& group) {
  std::vector<std::string> nodes;
  // A fused op is taken to be its node's output 0 (the common case), whose suffix is then dropped.
  for (const std::string& name : group.fused) nodes.push_back(node_named(parser, name, 0));
  return nodes;
}

// Every group's key, in op order, unique within the run: a group whose node an earlier group
// already claimed is "<node>#<group id>".
std::vector<std::string> node_keys(const naming::NameParser& parser, const RunReport& run) {
  std::vector<std::string> keys;
  std::set<std::string> taken;
  for (const GroupReport& group : run.groups) {
    std::string key = node_of(parser, group);
    while (!taken.insert(key).second) key += "#" + group.id;
    keys.push_back(std::move(key));
  }
  return keys;
}

std::string dump(const json& doc) { return jsonio::dump(doc, {2}) + "\n"; }

// A node's figure over every run: the lowest SQNR and the worst verdict.
struct NodeFigure {
  double sqnr_db = 0;
  compare::Verdict verdict = compare::Verdict::kPass;
};

// The graph id of each device of a multi-device report (its label: distinct, the pipeline sees
// to it); empty for one device, whose node data and graph keep the single-graph form.
std::vector<std::string> device_graph_ids(const ReportHeader& header) {
  std::vector<std::string> ids;
  if (header.devices.size() < 2) return ids;
  for (const StoreSummary& device : header.devices) {
    ids.push_back(device.label);
  }
  return ids;
}

// The node data file. One device: Model Explorer's single-graph form ({"results",
// "thresholds"}), which it applies to whichever graph is open: the engineer's model, whatever
// that graph's id. Several: its multi-graph form, {graph id: {"results", "thresholds"}}, one
// graph id per device (the ids of --model-explorer-graph's graphs).
class NodeDataView : public ReportSink {
 public:
  explicit NodeDataView(TextOut out) : out_(std::move(out)) {}

  Status begin(const ReportHeader& header) override {
    QD_ASSIGN_OR_RETURN(naming::NameParser parser, executorch_parser());
    parser_ = std::move(parser);
    thresholds_ = header.policy.defaults();
    graph_ids_ = device_graph_ids(header);
    nodes_.resize(header.devices.size());
    runs_.resize(header.devices.size());
    return Status::ok();
  }

  Status add_run(const RunReport& run) override {
    const std::vector<std::string> keys = node_keys(*parser_, run);
    for (size_t i = 0; i < run.groups.size(); ++i) {
      const GroupReport& group = run.groups[i];
      if (!group.sqnr_db || std::isnan(*group.sqnr_db)) continue;  // not compared
      const NodeFigure figure{finite_sqnr(*group.sqnr_db), group.verdict};
      add(run.device, keys[i], figure);
      for (const std::string& node : fused_nodes(*parser_, group)) add(run.device, node, figure);
    }
    ++runs_.at(run.device);
    return Status::ok();
  }

  Status finish(const ReportEnding&) override {
    if (graph_ids_.empty()) return out_(dump(graph_data(0)));
    json graphs = json::object();
    for (size_t d = 0; d < graph_ids_.size(); ++d) graphs[graph_ids_[d]] = graph_data(d);
    return out_(dump(graphs));
  }

 private:
  void add(uint32_t device, const std::string& node, const NodeFigure& figure) {
    const auto [at, fresh] = nodes_.at(device).try_emplace(node, figure);
    if (fresh) return;
    at->second.sqnr_db = std::min(at->second.sqnr_db, figure.sqnr_db);
    at->second.verdict = compare::worse(at->second.verdict, figure.verdict);
  }

  // The verdict's colour goes with the value only where the report's verdict is not the one the
  // default thresholds give the value (a rule for the op, NaN/Inf introduced, a bad encoding):
  // Model Explorer puts a result's own bgColor before the thresholds.
  json result(const NodeFigure& figure) const {
    json entry = {{"value", figure.sqnr_db}};
    if (figure.verdict != compare::verdict_for(figure.sqnr_db, thresholds_)) {
      entry["bgColor"] = page_colour_of(figure.verdict);
    }
    return entry;
  }

  // Fail, warn, pass, in the order Model Explorer tries them; the pass band ends at the
  // largest value a result can hold.
  json bands() const {
    const auto band = [](double value, compare::Verdict verdict) {
      return json{{"value", value}, {"bgColor", page_colour_of(verdict)}};
    };
    return json::array({band(just_below(thresholds_.fail_below_db), compare::Verdict::kFail),
                        band(just_below(thresholds_.warn_below_db), compare::Verdict::kWarn),
                        band(compare::kExactSqnrDb, compare::Verdict::kPass)});
  }

  json graph_data(size_t device) const {
    json results = json::object();
    for (const auto& [key, figure] : nodes_[device]) results[key] = result(figure);
    return {{"name", name(device)}, {"results", std::move(results)}, {"thresholds", bands()}};
  }

  std::string name(size_t device) const {
    const std::string of = graph_ids_.empty() ? "" : ", " + graph_ids_[device];
    if (runs_[device] <= 1) return "qnn-debug SQNR (dB)" + of;
    return fmt::format("qnn-debug SQNR (dB){}, worst of {} device runs", of, runs_[device]);
  }

  TextOut out_;
  std::optional<naming::NameParser> parser_;
  compare::Thresholds thresholds_;
  std::vector<std::string> graph_ids_;
  std::vector<std::map<std::string, NodeFigure>> nodes_;  // by device; sorted: the same file
  std::vector<size_t> runs_;                              // by device
};

// A module path in the name ("layer1.0.conv" or "block/conv") as Model Explorer's namespace:
// the components before the last, '/'-separated ("layer1/0").
std::string namespace_of(std::string_view key) {
  const size_t last = key.find_last_of("./");
  if (last == std::string_view::npos) return "";
  std::string path(key.substr(0, last));
  std::replace(path.begin(), path.end(), '.', '/');
  return path;
}

json key_value(std::string key, std::string value) {
  return {{"key", std::move(key)}, {"value", std::move(value)}};
}

std::string sqnr_text(const std::optional<double>& sqnr_db) {
  return sqnr_db ? fmt::format("{:.2f}", *sqnr_db) : "not compared";
}

// What the side panel lists for the node: Model Explorer shows attribute values as text.
json node_attrs(const GroupReport& group) {
  json attrs = json::array({key_value("group", group.id), key_value("op_type", group.op_type),
                            key_value("verdict", std::string(compare::verdict_name(group.verdict))),
                            key_value("sqnr_db", sqnr_text(group.sqnr_db))});
  if (group.introduced_db) {
    attrs.push_back(key_value("introduced_db", fmt::format("{:+.2f}", *group.introduced_db)));
  }
  if (!group.hints.empty()) attrs.push_back(key_value("why", group.hints.front().sentence));
  return attrs;
}

// One metadata item per compared pair: Model Explorer maps node data keyed by a `tensor_name`
// to its node, so the device's tensor names (QNN's) reach the node too.
json outputs_metadata(const GroupReport& group) {
  json outputs = json::array();
  for (size_t i = 0; i < group.pairs.size(); ++i) {
    const PairReport& pair = group.pairs[i];
    const std::string shape =
        fmt::format("{}[{}]", pair.reference.dtype, fmt::join(pair.reference.dims, ", "));
    outputs.push_back({{"id", std::to_string(i)},
                       {"attrs", json::array({key_value("tensor_name", pair.device.name),
                                              key_value("reference_tensor", pair.reference.name),
                                              key_value("tensor_shape", shape)})}});
  }
  return outputs;
}

// An edge from each group feeding this one, in the op's input order. Which output of the source
// feeds it is not in the report: output "0".
json incoming_edges(const GroupReport& group, const std::map<std::string, std::string>& key_of) {
  json edges = json::array();
  for (size_t i = 0; i < group.inputs.size(); ++i) {
    const auto source = key_of.find(group.inputs[i]);
    if (source == key_of.end()) continue;  // every edge ends at a node of the graph
    edges.push_back({{"sourceNodeId", source->second},
                     {"sourceNodeOutputId", "0"},
                     {"targetNodeInputId", std::to_string(i)}});
  }
  return edges;
}

// Model Explorer's graph collection ({"label", "graphs"}): one graph of the first run's groups,
// node ids the node data's keys; with several devices, one graph per device (its first run),
// with the device's graph id and its figures in the node attributes.
class GraphView : public ReportSink {
 public:
  explicit GraphView(TextOut out) : out_(std::move(out)) {}

  Status begin(const ReportHeader& header) override {
    QD_ASSIGN_OR_RETURN(naming::NameParser parser, executorch_parser());
    parser_ = std::move(parser);
    const std::string& model = header.reference.metadata.model;
    label_ = model.empty() ? "qnn-debug" : "qnn-debug: " + model;
    graph_ids_ = device_graph_ids(header);
    return Status::ok();
  }

  Status add_run(const RunReport& run) override {
    // The graph is the same in every run of a device.
    if (!devices_done_.insert(run.device).second) return Status::ok();
    json nodes = json::array();
    const std::vector<std::string> keys = node_keys(*parser_, run);
    std::map<std::string, std::string> key_of;  // group id -> node id
    for (size_t i = 0; i < run.groups.size(); ++i) key_of.emplace(run.groups[i].id, keys[i]);
    for (size_t i = 0; i < run.groups.size(); ++i) {
      const GroupReport& group = run.groups[i];
      nodes.push_back({{"id", keys[i]},
                       {"label", group.op_type.empty() ? keys[i] : group.op_type},
                       {"namespace", namespace_of(keys[i])},
                       {"attrs", node_attrs(group)},
                       {"incomingEdges", incoming_edges(group, key_of)},
                       {"outputsMetadata", outputs_metadata(group)}});
    }
    const std::string id = graph_ids_.empty() ? "graph" : graph_ids_.at(run.device);
    graphs_.push_back({{"id", id}, {"nodes", std::move(nodes)}});
    return Status::ok();
  }

  Status finish(const ReportEnding&) override {
    return out_(dump({{"label", label_}, {"graphs", std::move(graphs_)}}));
  }

 private:
  TextOut out_;
  std::optional<naming::NameParser> parser_;
  std::string label_;
  std::vector<std::string> graph_ids_;
  std::set<uint32_t> devices_done_;
  json graphs_ = json::array();
};

}  // namespace

std::unique_ptr<ReportSink> make_model_explorer_view(TextOut out) {
  return std::make_unique<NodeDataView>(std::move(out));
}

std::unique_ptr<ReportSink> make_model_explorer_graph_view(TextOut out) {
  return std::make_unique<GraphView>(std::move(out));
}

}  // namespace qd::report
