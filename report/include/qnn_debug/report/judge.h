// The one judge: a run's verdicts, decided from the facts a report carries and a policy.
// `qnn-debug diff` (with or without --sim / --isolated), `check`, `report` and the Python package
// all judge here, so a saved report re-judged with the policy it was written with is the report
// diff wrote (docs/metrics.md, "Verdicts").
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qnn_debug/compare/policy.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// Judges `run` with `policy`: every group's verdict and rule from its outputs' facts; with error
// parts, each part's verdict, the policy's gate on the group's verdict and the attribution; the
// first divergence of the run and of each part; the run rules and their reasons; the run's
// verdict; the introducers of the run and of each part, by the noise each adds itself. Returns each
// group's judgement in the run's group order: its verdict, and the rule and thresholds of its worst
// output (the line its hints aim above).
std::vector<compare::Judgement> judge(RunReport& run, const compare::Policy& policy);

// The first divergence traced to where its error comes from (docs/metrics.md, "First
// divergence"): when the first failing group's first cause says it inherited its error from an
// earlier group that warns, that group is the first divergence. judge() applies it to the hints a
// run already has; diff, whose hints come after the judge, applies it again once they are in.
void trace_first_divergence(RunReport& run);

// The introducers of `run` and of each of its error parts, ranked from its groups' figures
// (docs/metrics.md, "Introducers"), as judge() finds them: a reader rebuilds with it the lists a
// long decode's report file cuts short (RunReport::introducers, docs/reports.md).
void find_introducers(RunReport& run);

// Each group's first departure across the runs of its device (compare/departure.h): fed every
// run in report order after judge(run) (a device's runs come in device_run order), it sets
// GroupReport::departure in the run where the group departs and clears it elsewhere. A group is
// the same group across runs by its id. `qnn-debug diff` feeds it as the runs stream, and
// judge(Report&) over a saved report does the same, so both find the same departures.
class DepartureJudge {
 public:
  explicit DepartureJudge(const compare::DepartureRule& rule) : rule_(rule) {}
  void judge(RunReport& run);

 private:
  struct Series {
    std::vector<double> baseline;  // the capped figures of its runs so far, the latest `window`
    bool departed = false;         // a group departs once
  };
  compare::DepartureRule rule_;
  std::map<std::pair<uint32_t, std::string>, Series> series_;  // by device, group id
};

// Judges every run of `report` (and its departures), rebuilds its ending from its header and
// records the policy.
void judge(Report& report, const compare::Policy& policy);

}  // namespace qd::report
