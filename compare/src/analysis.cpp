#include "qnn_debug/compare/analysis.h"

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/compare/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace qd::compare {
namespace {

// Which graph node produced each tensor name, and the groups each tensor name belongs to.
struct GraphIndex {
  std::unordered_map<std::string, const GraphNode*> producer;
  std::unordered_map<std::string, size_t> finding_of_tensor;  // tensor name -> finding index
};

GraphIndex index_graph(const std::vector<GraphNode>& graph) {
  GraphIndex index;
  for (const GraphNode& node : graph) {
    for (const std::string& output : node.outputs) index.producer.emplace(output, &node);
  }
  return index;
}

// The node that stands for a group in op order and gives its op type: the producer of its last
// member (a fused conv+bn+relu is its relu).
const GraphNode* node_of(const GraphIndex& index, const Group& group) {
  for (const auto* members : {&group.ref_members, &group.device_members}) {
    for (auto it = members->rbegin(); it != members->rend(); ++it) {
      if (auto found = index.producer.find((*it)->name); found != index.producer.end()) {
        return found->second;
      }
    }
  }
  return nullptr;
}

// Every node producing a member of the group: one op, or each op a backend fused into one device
// tensor (on HTP conv+bn+relu is one tensor carrying the three debug handles).
std::vector<const GraphNode*> member_nodes(const GraphIndex& index, const Group& group) {
  std::vector<const GraphNode*> nodes;
  for (const auto* members : {&group.ref_members, &group.device_members}) {
    for (const TensorEntry* member : *members) {
      const auto found = index.producer.find(member->name);
      if (found != index.producer.end() &&
          std::find(nodes.begin(), nodes.end(), found->second) == nodes.end()) {
        nodes.push_back(found->second);
      }
    }
  }
  return nodes;
}

// An encoding no value can be trusted through (encoding_lint.h), on either side.
bool bad_encoding(const ComparedPair& pair) {
  return !lint_encoding(*pair.ref).empty() || !lint_encoding(*pair.device).empty();
}

void add_flag(GroupFinding& finding, Flag flag) {
  if (std::find(finding.flags.begin(), finding.flags.end(), flag) == finding.flags.end()) {
    finding.flags.push_back(flag);
  }
}

// True when raw value `q` means exactly 0.0 in every channel of the encoding.
bool encodes_zero(const Quantization& quant, int64_t q) {
  for (size_t c = 0; c < quant.scales.size(); ++c) {
    if (quant.dequantize(static_cast<double>(q), c) != 0.0) return false;
  }
  return true;
}

// The share of raw values at an end of the range that does not stand for 0.0. An end that
// encodes zero is where a ReLU-like output keeps its (many, exact) zeros, not clipping.
double clipped_fraction(const TensorEntry& device, const Metrics& m) {
  const auto range = saturation_range(device);
  if (!range || m.elements == 0 || !device.quant.is_quantized()) return 0;
  uint64_t clipped = 0;
  if (!encodes_zero(device.quant, range->min)) clipped += m.saturated_low;
  const auto high = static_cast<int64_t>(std::min<uint64_t>(range->max, INT64_MAX));
  if (!encodes_zero(device.quant, high)) clipped += m.saturated_high;
  return static_cast<double>(clipped) / static_cast<double>(m.elements);
}

// The flags and the worst figure one output adds to its group.
void note_pair(const PairResult& pair, GroupFinding& finding, const AnalysisOptions& options) {
  const TensorEntry& device = *pair.pair.device;
  if (pair.layout && pair.layout->inferred) add_flag(finding, Flag::kLayoutInferred);
  if (bad_encoding(pair.pair)) add_flag(finding, Flag::kDegenerateEncoding);
  if (!pair.metrics) {
    add_flag(finding, Flag::kNotCompared);
    return;
  }
  const Metrics& m = *pair.metrics;
  finding.non_finite = finding.non_finite || m.dev_nan > m.ref_nan || m.dev_inf > m.ref_inf;
  if (no_evidence(m)) {
    add_flag(finding, Flag::kNoEvidence);
    return;
  }
  if (clipped_fraction(device, m) > options.saturation_flag_fraction) {
    add_flag(finding, Flag::kSaturation);
  }
  if (near_zero_reference(m)) add_flag(finding, Flag::kNearZeroReference);
  if (!finding.sqnr_db || m.sqnr_db < *finding.sqnr_db) finding.sqnr_db = m.sqnr_db;
}

// The groups feeding group `index` in the stored graph, in input order: the groups holding the
// inputs of its member nodes that come from outside the group. A tensor no group holds (an op
// that was not captured) is passed through to its producer's inputs.
std::vector<size_t> graph_input_groups(size_t index, const std::vector<const GraphNode*>& nodes,
                                       const GraphIndex& graph) {
  std::vector<size_t> inputs;
  std::unordered_set<const GraphNode*> visited(nodes.begin(), nodes.end());
  std::vector<const std::string*> pending;  // a stack: the next tensor to resolve is at the back
  const auto push_inputs = [&](const GraphNode& node) {
    for (auto it = node.inputs.rbegin(); it != node.inputs.rend(); ++it) pending.push_back(&*it);
  };
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) push_inputs(**it);
  while (!pending.empty()) {
    const std::string& tensor = *pending.back();
    pending.pop_back();
    if (const auto found = graph.finding_of_tensor.find(tensor);
        found != graph.finding_of_tensor.end()) {
      if (found->second != index &&
          std::find(inputs.begin(), inputs.end(), found->second) == inputs.end()) {
        inputs.push_back(found->second);
      }
      continue;
    }
    const auto producer = graph.producer.find(tensor);
    if (producer != graph.producer.end() && visited.insert(producer->second).second) {
      push_inputs(*producer->second);
    }
  }
  return inputs;
}

// The groups whose figures an op's input SQNR comes from: its graph inputs, passing through
// those with no figure (not compared, no evidence) to theirs; else (no graph, or no input with a
// figure) the previous group in op order.
std::vector<size_t> input_groups(const RunAnalysis& analysis, size_t index) {
  std::vector<size_t> inputs;
  std::vector<bool> seen(analysis.groups.size(), false);
  const std::vector<size_t>& direct = analysis.groups[index].graph_inputs;
  std::vector<size_t> pending(direct.rbegin(), direct.rend());
  while (!pending.empty()) {
    const size_t g = pending.back();
    pending.pop_back();
    if (seen[g] || g == index) continue;
    seen[g] = true;
    const GroupFinding& input = analysis.groups[g];
    if (input.sqnr_db) {
      inputs.push_back(g);
    } else {
      pending.insert(pending.end(), input.graph_inputs.rbegin(), input.graph_inputs.rend());
    }
  }
  if (inputs.empty() && index > 0) inputs.push_back(index - 1);
  return inputs;
}

}  // namespace

OutputFacts output_facts(std::string_view op_type, std::string_view ref_name,
                         std::string_view device_dtype, bool bad_encoding, const Metrics* metrics) {
  OutputFacts facts{op_type, ref_name, device_dtype};
  facts.bad_encoding = bad_encoding;
  facts.compared = metrics != nullptr;
  if (metrics != nullptr) {
    facts.sqnr_db = metrics->sqnr_db;
    if (metrics->channel_summary) {
      facts.worst_channel_sqnr_db = metrics->channel_summary->worst_sqnr_db;
    }
    facts.non_finite_introduced =
        metrics->dev_nan > metrics->ref_nan || metrics->dev_inf > metrics->ref_inf;
    facts.lsb_max = metrics->lsb_max;
    facts.no_evidence = no_evidence(*metrics);
    facts.near_zero_reference = near_zero_reference(*metrics);
  }
  return facts;
}

double introduced_db(double input_sqnr_db, double output_sqnr_db) {
  const double in = std::min(input_sqnr_db, kExactSqnrDb);
  const double out = std::min(output_sqnr_db, kExactSqnrDb);
  return in == out ? 0.0 : in - out;  // -inf in and out is "nothing changed", not NaN
}

namespace {

// Input SQNR (the worst among the inputs) and introduced error; NaN/Inf that no input carried
// were introduced here: flagged, and ranked above any finite introduced error.
void measure_introduced(RunAnalysis& analysis, size_t index, const std::vector<size_t>& inputs) {
  GroupFinding& finding = analysis.groups[index];
  bool inputs_non_finite = false;
  for (size_t i : inputs) {
    const GroupFinding& input = analysis.groups[i];
    inputs_non_finite = inputs_non_finite || input.non_finite;
    if (input.sqnr_db && (!finding.input_sqnr_db || *input.sqnr_db < *finding.input_sqnr_db)) {
      finding.input_sqnr_db = input.sqnr_db;
    }
  }
  if (finding.non_finite && !inputs_non_finite) {
    add_flag(finding, Flag::kNonFiniteIntroduced);
    finding.introduced_db = std::numeric_limits<double>::infinity();
  } else if (finding.input_sqnr_db && finding.sqnr_db) {
    finding.introduced_db = introduced_db(*finding.input_sqnr_db, *finding.sqnr_db);
  }
}

// Rank of every graph node in a topological order (Kahn's algorithm; among ready nodes the one
// stored first goes first, so an already ordered graph keeps its order). Nodes on a cycle, which
// a valid graph has none of, follow in stored order.
std::unordered_map<const GraphNode*, size_t> topological_ranks(const std::vector<GraphNode>& graph,
                                                               const GraphIndex& index) {
  std::vector<std::vector<size_t>> consumers(graph.size());
  std::vector<size_t> pending(graph.size(), 0);
  std::unordered_map<const GraphNode*, size_t> position;
  for (size_t n = 0; n < graph.size(); ++n) position.emplace(&graph[n], n);
  for (size_t n = 0; n < graph.size(); ++n) {
    for (const std::string& input : graph[n].inputs) {
      auto producer = index.producer.find(input);
      if (producer == index.producer.end() || producer->second == &graph[n]) continue;
      consumers[position.at(producer->second)].push_back(n);
      ++pending[n];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t n = 0; n < graph.size(); ++n) {
    if (pending[n] == 0) ready.push(n);
  }
  std::unordered_map<const GraphNode*, size_t> rank;
  while (!ready.empty()) {
    const size_t n = ready.top();
    ready.pop();
    rank.emplace(&graph[n], rank.size());
    for (size_t c : consumers[n]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  for (size_t n = 0; n < graph.size(); ++n) rank.emplace(&graph[n], rank.size());
  return rank;
}

// Op order of the groups: by the topological rank of their graph node. A group without a node
// keeps its place right after the group captured before it, so a partial graph never scatters
// the capture order. Without any graph node this is the reference capture order.
std::vector<size_t> op_order(const std::vector<const GraphNode*>& nodes,
                             const std::unordered_map<const GraphNode*, size_t>& rank) {
  std::vector<size_t> key(nodes.size(), 0);
  for (size_t g = 0; g < nodes.size(); ++g) {
    key[g] = nodes[g] != nullptr ? rank.at(nodes[g]) : g > 0 ? key[g - 1] : 0;
  }
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  return order;
}

}  // namespace

RunAnalysis analyze(const RunComparison& run, const std::vector<GraphNode>& graph,
                    const AnalysisOptions& options) {
  RunAnalysis analysis;
  GraphIndex index = index_graph(graph);
  std::vector<const GraphNode*> group_nodes;
  for (const Group& group : run.alignment.groups) group_nodes.push_back(node_of(index, group));
  analysis.order_from_graph =
      std::any_of(group_nodes.begin(), group_nodes.end(), [](auto* n) { return n != nullptr; });
  const std::vector<size_t> order = op_order(group_nodes, topological_ranks(graph, index));
  std::vector<size_t> finding_of_group(order.size());
  for (size_t g : order) {
    GroupFinding finding;
    finding.group = g;
    if (const GraphNode* node = group_nodes[g]; node != nullptr) finding.op_type = node->op_type;
    finding_of_group[g] = analysis.groups.size();
    for (const TensorEntry* member : run.alignment.groups[g].ref_members) {
      index.finding_of_tensor[member->name] = analysis.groups.size();
    }
    for (const TensorEntry* member : run.alignment.groups[g].device_members) {
      index.finding_of_tensor.emplace(member->name, analysis.groups.size());
    }
    analysis.groups.push_back(std::move(finding));
  }
  for (size_t p = 0; p < run.pairs.size(); ++p) {
    GroupFinding& finding = analysis.groups[finding_of_group[run.pairs[p].group]];
    finding.pairs.push_back(p);
    note_pair(run.pairs[p], finding, options);
  }
  for (size_t g = 0; g < analysis.groups.size(); ++g) {
    const Group& group = run.alignment.groups[analysis.groups[g].group];
    analysis.groups[g].graph_inputs = graph_input_groups(g, member_nodes(index, group), index);
  }
  for (size_t g = 0; g < analysis.groups.size(); ++g) {
    GroupFinding& finding = analysis.groups[g];
    if (finding.pairs.empty()) continue;  // nothing comparable: listed as unmatched instead
    finding.inputs = input_groups(analysis, g);
    measure_introduced(analysis, g, finding.inputs);
  }
  analysis.coverage = run_coverage(run);
  return analysis;
}

RunCoverage run_coverage(const RunComparison& run) {
  std::unordered_set<const TensorEntry*> all, unmatched, covered;
  for (const Unmatched& u : run.alignment.unmatched) {
    if (u.side == Side::kReference) {
      all.insert(u.tensor);
      unmatched.insert(u.tensor);
    }
  }
  RunCoverage coverage;
  std::vector<bool> compared(run.alignment.groups.size(), false);
  for (const PairResult& pair : run.pairs) {
    if (!pair.metrics) continue;
    compared[pair.group] = true;
    ++coverage.compared_pairs;
  }
  for (size_t g = 0; g < run.alignment.groups.size(); ++g) {
    for (const TensorEntry* t : run.alignment.groups[g].ref_members) {
      all.insert(t);
      if (compared[g] && unmatched.count(t) == 0) covered.insert(t);
    }
  }
  coverage.reference_tensors = all.size();
  coverage.matched_reference_tensors = covered.size();
  return coverage;
}

}  // namespace qd::compare
