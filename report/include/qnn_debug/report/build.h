// From a comparison to the typed report (model.h): the one place where the comparator's and the
// analysis' results become report fields.
#pragma once

#include <string>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/compare/explain.h"
#include "qnn_debug/compare/parts.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// What the user named as an input: the path as given and its format ("store", "qnn-net-run",
// ...), when the compared store is a conversion of it.
struct InputLabel {
  std::string path;  // "": the store's own
  std::string format = "store";
};

StoreSummary store_summary(const StoreReader& store, const InputLabel& input);
// The tensor with its encoding's lint findings (encoding_lint.h).
TensorSummary tensor_summary(const TensorEntry& tensor);
// A run pair's report: its groups in the analysis' op order (groups without a compared pair
// are left to the unmatched list), with the analysis' facts. It is not judged yet: judge.h
// decides its verdicts, then explain (compare/explain.h) and add_hints say why.
RunReport run_report(const compare::RunComparison& run, const compare::RunAnalysis& analysis);

// What the judge decided of each group of `analysis`, for the explanation: the judged report
// groups' verdicts and pass lines, by their analysis group (GroupReport::order). `judged` is
// judge()'s result for `report`.
std::vector<compare::JudgedGroup> judged_groups(const RunReport& report,
                                                const std::vector<compare::Judgement>& judged,
                                                const compare::RunAnalysis& analysis);

// The hints the explanation found, onto the report's groups.
void add_hints(RunReport& report, compare::RunAnalysis&& analysis);

// Joins the device store's profile events to the run's groups (OpTime). An event of the run's
// device run belongs to the group of its first debug handle that any group has (the first such
// group in op order), else to the first group with a tensor of the event's name; an event of no
// group still counts in the total. Shares are of all the run's events in the same unit.
void join_profile(RunReport& run, const std::vector<ProfileEvent>& device_events);

// Adds an error part (compare/parts.h) to the report run_report made of the part's total: each
// group's figures in the part. The part's verdicts, the gate, the attribution and where the
// part's error enters (its introducers) are then set by the judge (judge.h), the one place
// verdicts of a report are made.
void add_part(RunReport& report, const compare::PartComparison& part,
              const compare::RunAnalysis& analysis);

}  // namespace qd::report
