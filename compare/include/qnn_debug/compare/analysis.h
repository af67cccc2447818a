// From per-pair metrics to the facts a run is judged by: the op order, each group's worst figure,
// the error each introduced, and flags that say why (which groups rank as introducers is the
// judge's, from these figures). The facts carry no verdict: the one judge
// (report/judge.h) decides those from the facts and a policy, for diff and check alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/flags.h"
#include "qnn_debug/compare/hint.h"
#include "qnn_debug/compare/policy.h"

namespace qd::compare {

// Flag::kNoEvidence: some output was compared but no element pair is finite on both sides: it
// fails, and the group's sqnr_db is left unset (an SQNR of nothing is not a figure).

struct AnalysisOptions {
  double saturation_flag_fraction = 0.01;  // flag when more raw values than this sit at a limit
};

struct GroupFinding {
  size_t group = 0;                     // index into the run's alignment.groups
  std::vector<size_t> pairs;            // indices into the run's pairs
  std::optional<double> sqnr_db;        // the worst output with evidence; nullopt if none
  std::string op_type;                  // from the stored graph, "" when unknown
  std::optional<double> input_sqnr_db;  // worst SQNR among its inputs (graph) or the previous group
  std::optional<double> introduced_db;  // introduced_db(input_sqnr_db, sqnr_db): how much this
                                        // op made worse (+inf when it introduced NaN/Inf its
                                        // inputs lacked)
  bool non_finite = false;     // some output has more NaN/Inf on the device than the reference
  std::vector<size_t> inputs;  // the groups its input SQNR comes from (into RunAnalysis::groups)
  // The groups holding the inputs its member ops (all of a fused chain's) take from outside the
  // group in the stored graph, compared or not, through ops no group holds (indices into
  // RunAnalysis::groups); empty without a graph node. The edges of the report's graph view.
  std::vector<size_t> graph_inputs;
  std::vector<Flag> flags;  // in the order found
  std::vector<Hint> hints;  // why it fails or warns, most explaining first (explain.h)
};

struct RunCoverage {
  uint64_t reference_tensors = 0;          // in the reference run
  uint64_t matched_reference_tensors = 0;  // of those, in a group with a compared pair
  uint64_t compared_pairs = 0;             // pairs with metrics
};

struct RunAnalysis {
  std::vector<GroupFinding> groups;  // in op order (see order_from_graph)
  bool order_from_graph = false;     // topological order of the stored graph, else capture
  RunCoverage coverage;
};

// How much SQNR an op lost (docs/metrics.md, "Introduced error"): min(in, kExactSqnrDb) -
// min(out, kExactSqnrDb), 0 when those are equal. An exact input (+inf) and a finite output give
// a finite loss; a negative value is a gain.
double introduced_db(double input_sqnr_db, double output_sqnr_db);

// What the run pair covers: reference tensors in groups with a compared pair (and not left
// unmatched) out of all its reference tensors, and the pairs with metrics.
RunCoverage run_coverage(const RunComparison& run);

// What the policy judges of one output (Policy::judge_output), as the judge (report/judge.h)
// builds it from a report's pair. `metrics` is nullptr when the pair was not
// compared; `bad_encoding` when either side's encoding has lint findings (encoding_lint.h).
OutputFacts output_facts(std::string_view op_type, std::string_view ref_name,
                         std::string_view device_dtype, bool bad_encoding, const Metrics* metrics);

// `graph` is the op graph from either store (empty if neither has one); it supplies the op
// order (topological), op types and, for introduced error, each op's inputs. Without it the op
// order is the reference capture order.
RunAnalysis analyze(const RunComparison& run, const std::vector<GraphNode>& graph,
                    const AnalysisOptions& options = {});

}  // namespace qd::compare
