// The typed report: what a comparison found, computed once by the comparison and its analysis
// (qnn_debug/report/build.h) or read back from a saved report (qnn_debug/report/json.h). Every view
// (terminal, JSON, CSV, HTML, the Python Report) renders this model; none recomputes a verdict.
//
// A report is a header (the stores, the policy, the options), one RunReport per compared run
// pair, and an ending (summary, aggregate, warnings). A diff streams it through ReportSinks run
// by run, so memory does not grow with the number of runs; a saved report is loaded whole
// (Report) and replayed through the same sinks. docs/reports.md describes the fields;
// docs/report-schema.json is their JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/departure.h"
#include "qnn_debug/compare/excess.h"
#include "qnn_debug/compare/flags.h"
#include "qnn_debug/compare/hint.h"
#include "qnn_debug/compare/parts.h"
#include "qnn_debug/compare/policy.h"

namespace qd::report {

inline constexpr const char* kReportSchema = "qnn-debug-report";
// 2: runs stream before the aggregate, summary and warnings (key order only; version 1 reports
// load unchanged). 3: a long decode's passing groups as rows of their run's packed block
// (docs/reports.md, "JSON"); version 1 and 2 reports load unchanged.
inline constexpr int kReportSchemaVersion = 3;

// A flat index in reference order as coordinates in `dims` (row-major).
std::vector<uint64_t> coordinates(uint64_t flat_index, const std::vector<uint64_t>& dims);

// A stored tensor as a report shows it.
struct TensorSummary {
  std::string name;
  uint64_t seq = 0;
  std::vector<int64_t> handles;
  int32_t output_index = -1;
  std::string dtype;  // store dtype name ("SFIXED_POINT_8")
  std::vector<uint64_t> dims;
  uint64_t data_nbytes = 0;
  std::vector<uint8_t> axis_order;
  Quantization quant;
  std::vector<EncodingFinding> encoding_problems;  // lint_encoding's findings
  TensorStats stats;
};

struct LayoutSummary {
  std::vector<uint8_t> axis_order;
  bool inferred = false;
  bool reshaped = false;
};

struct PairReport {
  int32_t output_index = -1;
  std::string match;  // compare::match_kind_name
  TensorSummary reference;
  TensorSummary device;
  std::optional<LayoutSummary> layout;
  std::optional<compare::Metrics> metrics;  // nullopt: not compared (see error)
  std::string error;                        // why there are no metrics, "" when there are
};

// A group's figures in one error part (compare/parts.h): its worst output's.
struct PartFigures {
  compare::Verdict verdict = compare::Verdict::kPass;  // the part judged on its own (Policy)
  std::optional<double> sqnr_db;        // the worst output; nullopt: no output compared
  std::optional<double> introduced_db;  // as the group's, within the part
  std::optional<double> lsb_max;        // the largest error in steps of the compared encoding
  double noise_power = 0;               // sum of squared errors over the outputs' finite elements
  bool non_finite_introduced = false;   // more NaN/Inf on the right side than the left
  bool no_evidence = false;             // an output with no finite pair on both sides: fails
  bool near_zero_reference = false;     // every compared output's left side is below 0.1 step
  std::string error;                    // why outputs were not compared in the part, "" if none
};

// A group of a diff with a simulation (SIM) or a replay (ISO): its figures in each part.
struct ErrorParts {
  compare::Verdict total =
      compare::Verdict::kPass;                      // the total judged on its own (before the gate)
  std::optional<PartFigures> quantization;          // REF vs SIM
  std::optional<PartFigures> kernel;                // SIM vs DEV
  std::optional<PartFigures> isolated;              // ISO vs DEV
  std::optional<compare::Attribution> attribution;  // with both quantization and kernel
};

// The time a group's ops took in its device run: the profile events joined to it (join_profile).
struct OpTime {
  double duration = 0;  // the events' end - start, summed
  std::string unit;     // theirs ("cycles", "ns", ...)
  uint64_t events = 0;
  double share = 0;  // of all the run's events in the same unit, 0 .. 1
};

struct GroupReport {
  std::string id;
  uint64_t order = 0;  // position in the run's op order
  std::vector<int64_t> handles;
  std::string op_type;
  compare::Verdict verdict = compare::Verdict::kPass;
  int policy_rule = -1;
  std::optional<double> sqnr_db;
  std::optional<double> input_sqnr_db;
  std::optional<double> introduced_db;
  std::vector<compare::Flag> flags;
  std::vector<compare::Hint> hints;  // why it fails or warns, most explaining first
  std::vector<PairReport> pairs;
  std::optional<ErrorParts> parts;  // with --sim / --isolated
  // What its inputs and its encoding allow its worst output, and its own excess error beyond it
  // (compare/excess.h): the judge's estimate from the figures above; unset without an encoding.
  std::optional<compare::Excess> excess;
  // The groups whose ops feed this one's in the stored graph (ids of groups of the same run, a
  // group without compared pairs passed through to its own inputs); empty without a graph.
  std::vector<std::string> inputs;
  // The reference tensors of the other ops fused into this group (on HTP a conv+bn+relu is one
  // device tensor carrying the three handles): the group's members that no pair compares, in
  // capture order; empty for a group of one op.
  std::vector<std::string> fused;
  std::optional<OpTime> time;  // its profile events in the device run, when the device has any
  // Set in the one run of its device where the group first departs from its SQNR over the
  // device's earlier runs (compare/departure.h): the judge's, across the runs (DepartureJudge).
  std::optional<compare::Departure> departure;

  // What the views label the group by: the reference name of its worst output, the one its
  // verdict and SQNR come from (the first not compared, else the lowest SQNR; "" without pairs).
  const std::string& name() const;
};

// A group that adds error, as the judge ranks them (docs/metrics.md, "Introducers").
struct Introducer {
  std::string id;
  double introduced_db = 0;  // the SQNR it lost (its introduced_db; without a compared input,
                             // against what its encoding allows, else against an exact input)
  // What ranks it: the noise power it adds itself, relative to its signal, in dB (+inf: it
  // introduced NaN/Inf). Unset in reports written before it existed.
  std::optional<double> added_noise_db;
};

struct UnmatchedTensor {
  bool reference_side = true;
  std::string name;
  uint64_t seq = 0;
  std::string reason;
  bool ambiguous = false;
  bool graph_output = false;
};

struct Coverage {
  uint64_t reference_tensors = 0;
  uint64_t matched_reference_tensors = 0;
  uint64_t compared_pairs = 0;
};

// One error part of a run pair: where it starts and which groups add most within it.
struct PartRun {
  uint32_t third_run = 0;                       // the run of the simulation / replay store
  std::optional<std::string> first_divergence;  // the first group whose part verdict fails
  std::vector<Introducer> introducers;          // most noise added first, within the part
  uint64_t missing_pairs = 0;                   // pairs whose reference tensor the third run lacks
};

struct RunReport {
  uint32_t device = 0;  // index into ReportHeader::devices
  uint32_t reference_run = 0;
  uint32_t device_run = 0;
  compare::Verdict verdict = compare::Verdict::kPass;
  std::vector<std::string> verdict_reasons;
  std::optional<Coverage> coverage;  // absent in reports written before it existed
  std::optional<compare::ClassAgreement> classification;
  bool order_from_graph = false;                // "op_order": "graph", else "capture"
  std::optional<std::string> first_divergence;  // a group id
  std::vector<Introducer> introducers;          // most noise added first (the judge's)
  std::vector<GroupReport> groups;              // in op order
  std::vector<UnmatchedTensor> unmatched;
  std::optional<PartRun> quantization, kernel, isolated;  // with --sim / --isolated

  const GroupReport* group(const std::string& id) const;
};

struct RunSummary {  // a store's run, as listed in the report
  uint32_t id = 0;
  std::string name;
  bool complete = false;
  uint64_t tensor_count = 0;
  uint64_t dropped_count = 0;
};

struct StoreSummary {
  std::string path;   // as the user named the input
  std::string label;  // a device's name in the views: --label, else default_label
  std::string format = "store";
  StoreMetadata metadata;
  std::vector<RunSummary> runs;
  std::vector<ProfileEvent> profile_events;
  std::vector<MemoryCheckpoint> memory_checkpoints;
};

struct ReportOptions {
  double atol = compare::MetricOptions{}.atol;
  double rtol = compare::MetricOptions{}.rtol;
  std::optional<uint32_t> ref_run;
  std::string logits;  // --logits: the tensor the classifier figures measure, "" = the final output
};

// What is known before the first run.
struct ReportHeader {
  std::string tool_version;
  StoreSummary reference;
  // The device inputs in the order named, at least one; the diff compares each against the
  // reference (`qnn-debug diff REF DEV1 DEV2 ...`). RunReport::device indexes it.
  std::vector<StoreSummary> devices = {StoreSummary{}};
  std::optional<StoreSummary> simulation;  // --sim: the quantized simulation of the reference
  std::optional<StoreSummary> isolated;    // --isolated: each op replayed on the device inputs
  compare::Policy policy;
  ReportOptions options;

  const StoreSummary& device() const { return devices.front(); }  // the first (or only) one
};

// A device's name when the user gave none: its store's backend, SoC and producer metadata, else
// its path's file name.
std::string default_label(const StoreSummary& device);

struct FirstDivergence {
  uint32_t device = 0;  // index into ReportHeader::devices
  uint32_t device_run = 0;
  std::string group;
  std::optional<double> sqnr_db;
  std::vector<compare::Flag> flags;
};

// The earliest group to depart from its earlier runs' SQNR (compare/departure.h): the lowest
// device run, then the first in op order.
struct FirstDeparture {
  uint32_t device = 0;  // index into ReportHeader::devices
  uint32_t device_run = 0;
  uint64_t order = 0;  // the group's position in its run's op order
  std::string group;
  std::string name;  // GroupReport::name()
  compare::Departure departure;
};

// The first step whose next token differs (docs/metrics.md, "Token view"), with the earliest
// departure of its device up to that step: the op whose error led to it.
struct FirstDivergingToken {
  uint32_t device = 0;  // index into ReportHeader::devices
  uint32_t device_run = 0;
  uint64_t reference_token = 0;
  uint64_t device_token = 0;
  std::optional<double> reference_token_probability;  // on the device
  std::optional<uint64_t> reference_token_rank;       // on the device, 1 = its top
  std::optional<double> kl_divergence;                // the step's
  std::optional<double> reference_margin;             // compare::ClassAgreement's
  std::optional<std::string> first_divergence;        // the step's first failing group
  std::optional<FirstDeparture> departure;
};

struct Summary {
  compare::Verdict verdict = compare::Verdict::kPass;
  uint64_t runs_compared = 0;
  uint64_t groups = 0;
  uint64_t compared_pairs = 0;
  uint64_t pass = 0;
  uint64_t warn = 0;
  uint64_t fail = 0;
  uint64_t unmatched_reference = 0;
  uint64_t unmatched_device = 0;
  std::optional<FirstDivergence> first_divergence;
  // The first run's first divergence within each part, with the part's SQNR (--sim, --isolated).
  std::optional<FirstDivergence> quantization_first_divergence;
  std::optional<FirstDivergence> kernel_first_divergence;
  std::optional<FirstDivergence> isolated_first_divergence;
  std::vector<std::string> verdict_reasons;  // "device run N: ..."
  // The first run, in report order, whose output (StepLine::output) fails: over a store of
  // decode steps, the step where generation goes wrong.
  std::optional<FirstDivergence> first_failing_step;
  std::optional<FirstDeparture> first_departure;
  // The first run, in report order, whose next token (compare::ClassAgreement::device_token)
  // is not the reference's: over a decode, the first diverging token.
  std::optional<FirstDivergingToken> first_diverging_token;
};

// Each error part's member, in compare::kParts' order: the views and the codec walk the parts
// through these, by the part's name in the table.
inline constexpr std::array<std::optional<PartFigures> ErrorParts::*, compare::kParts.size()>
    kGroupParts = {&ErrorParts::quantization, &ErrorParts::kernel, &ErrorParts::isolated};
inline constexpr std::array<std::optional<PartRun> RunReport::*, compare::kParts.size()> kRunParts =
    {&RunReport::quantization, &RunReport::kernel, &RunReport::isolated};
inline constexpr std::array<std::optional<FirstDivergence> Summary::*, compare::kParts.size()>
    kPartFirstDivergences = {&Summary::quantization_first_divergence,
                             &Summary::kernel_first_divergence,
                             &Summary::isolated_first_divergence};
constexpr size_t part_index(compare::Part part) { return static_cast<size_t>(part); }

// One run pair as a step of a sequence (prefill, then one run per decode step): what a per-step
// line shows, so that a long generation reads without walking every group of every run.
struct StepLine {
  uint32_t device = 0;
  uint32_t device_run = 0;
  uint32_t reference_run = 0;
  compare::Verdict verdict = compare::Verdict::kPass;
  std::optional<std::string> first_divergence;
  std::optional<std::string> worst;  // the group with the lowest SQNR
  std::optional<double> worst_sqnr_db;
  // The step's output: the group of the tensor the classifier check measured (the logits), else
  // the last group in op order.
  std::optional<std::string> output;
  compare::Verdict output_verdict = compare::Verdict::kPass;
  std::optional<double> output_sqnr_db;
  // The run's classifier figures (top-1 agreement...) and token view (RunReport::classification),
  // when its output was ranked.
  std::optional<compare::ClassAgreement> tokens;
  // Its next token is not the reference's.
  bool token_differs() const;
};

// What one device input of a multi-device diff came to.
struct DeviceOutcome {
  uint32_t device = 0;  // index into ReportHeader::devices
  compare::Verdict verdict = compare::Verdict::kPass;
  uint64_t runs_compared = 0;
  uint64_t pass = 0;
  uint64_t warn = 0;
  uint64_t fail = 0;
  std::optional<FirstDivergence> first_divergence;
  std::optional<FirstDeparture> first_departure;
};

// A group on one device: its figures in that device's worst run (the lowest SQNR).
struct DeviceCell {
  uint32_t device = 0;
  uint32_t device_run = 0;
  compare::Verdict verdict = compare::Verdict::kPass;
  std::optional<double> sqnr_db;
  std::optional<double> introduced_db;
  std::string hint;  // the most explaining hint's kind (compare::hint_kind_name), "" for none
};

// One group id across the devices of a multi-device diff: a row of the ops x devices matrix.
struct DeviceRow {
  std::string id;
  std::string name;               // GroupReport::name() of its first run
  std::vector<DeviceCell> cells;  // by device, devices without the group left out
  // How differently the devices treat this op: the spread (max - min) of the error each device
  // introduces here (docs/metrics.md, "Where devices disagree"). Error that comes in from an
  // earlier op adds nothing, so the op where one device goes its own way stands out, not all
  // the ops after it.
  double disagreement_db = 0;
  // The device that introduces the most error here, at least 1 dB more than every other one.
  std::optional<uint32_t> outlier;
};

// One group id across runs: its SQNR in each device run where it has one.
struct AggregateEntry {
  struct RunSqnr {
    uint32_t device = 0;  // index into ReportHeader::devices
    uint32_t device_run = 0;
    double sqnr_db = 0;
    compare::Verdict verdict = compare::Verdict::kPass;  // the group's, as the judge decided
  };
  std::string id;
  std::vector<RunSqnr> per_run;
  // The first device run, in report order, where the group fails: for a store of decode steps,
  // the step where this op goes wrong. nullopt when it never fails.
  std::optional<uint32_t> first_failing_run;
  uint32_t first_failing_device = 0;  // the device of first_failing_run

  const RunSqnr& worst() const;  // the first lowest
  double mean_sqnr_db() const;
};

// A KV-cache tensor (compare/kv_cache.h) across the runs of a decode: which of its positions
// differ at each step, and, for a cache read per head (compare::KvCells), which head's. A
// position differs when its SQNR (the tensor's per-channel figures along the position axis) is
// below compare::kHealthyChannelDb; a head's position likewise, from its own elements.
struct KvCacheTrack {
  struct Step {
    uint32_t device = 0;
    uint32_t device_run = 0;
    std::vector<std::pair<uint64_t, uint64_t>> differing;  // [first, last] position ranges
    std::vector<compare::KvCells::Range> cells;            // by head; empty without heads
  };
  // Cells of one head, first differing in the same run: the layer x head x position view.
  struct FirstDiffer {
    compare::KvCells::Range cells;
    uint32_t device = 0;
    uint32_t device_run = 0;
  };
  std::string group;   // the group of its first run
  std::string tensor;  // the reference tensor's name
  uint32_t axis = 0;   // the position axis (reference order)
  uint64_t positions = 0;
  uint64_t heads = 0;       // 0: tracked by position only
  uint64_t runs = 0;        // runs that measured it per position
  std::vector<Step> steps;  // the runs where some position differs, in report order
  // Each (head, position)'s first differing run, by head then position; per device in report
  // order (a later device's cells are its own first).
  std::vector<FirstDiffer> first_differ;
};

// What is known after the last run.
struct ReportEnding {
  Summary summary;
  std::vector<AggregateEntry> aggregate;
  std::vector<StepLine> steps;  // one per run pair, in report order
  // With more than one device: each device's outcome, and the ops x devices matrix in the first
  // device's op order (groups only other devices have follow).
  std::vector<DeviceOutcome> devices;
  std::vector<DeviceRow> device_matrix;
  std::vector<KvCacheTrack> kv_cache;  // in the order first seen
  std::vector<std::string> warnings;
};

struct Report {
  ReportHeader header;
  std::vector<RunReport> runs;
  ReportEnding ending;
};

// A view, or anything else that takes a report as it is produced: begin once, then each run in
// order, then finish once. An error stops the report (the caller reports it).
class ReportSink {
 public:
  virtual ~ReportSink() = default;
  virtual Status begin(const ReportHeader&) { return Status::ok(); }  // a sink may need none
  virtual Status add_run(const RunReport& run) = 0;
  virtual Status finish(const ReportEnding&) { return Status::ok(); }
};

// Keeps what it is fed: a whole report.
class ReportCollector : public ReportSink {
 public:
  Status begin(const ReportHeader& header) override;
  Status add_run(const RunReport& run) override;
  Status finish(const ReportEnding& ending) override;
  Report report() && { return std::move(report_); }

 private:
  Report report_;
};

// Feeds a whole report to `sink`.
Status replay(const Report& report, ReportSink& sink);

// Builds the ending from the runs as they pass: the summary (counts, the first divergence, the
// verdict and its reasons) and the aggregate. The one place a report's summary is computed. It is
// made from the report's header, so its device outcomes and matrix are for the header's devices.
class EndingBuilder {
 public:
  explicit EndingBuilder(const ReportHeader& header);
  void add_run(const RunReport& run);
  ReportEnding finish(std::vector<std::string> warnings) &&;

 private:
  void add_to_matrix(const RunReport& run, const GroupReport& group);
  void track_kv_cache(const RunReport& run, const GroupReport& group);

  Summary summary_;
  std::vector<AggregateEntry> aggregate_;
  std::unordered_map<std::string, size_t> aggregate_index_;  // group id -> its aggregate_ entry
  std::vector<StepLine> steps_;
  std::vector<DeviceOutcome> devices_;  // empty with one device
  std::vector<DeviceRow> matrix_;
  std::unordered_map<std::string, size_t> matrix_index_;  // group id -> its matrix_ row
  std::vector<KvCacheTrack> kv_cache_;
  std::unordered_map<std::string, size_t> kv_index_;       // tensor name -> its kv_cache_ entry
  std::vector<std::optional<FirstDeparture>> departures_;  // by device: its earliest so far
  size_t header_devices_ = 0;
  // By kv_cache_ entry, by device, by head: the positions seen differing so far.
  std::vector<std::vector<std::vector<std::vector<bool>>>> kv_seen_;
};

}  // namespace qd::report
