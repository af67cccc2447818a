// The one judge: a run's verdicts, decided from the facts a report carries and a policy.
// `qnn-debug diff` (with or without --sim / --isolated), `check`, `report` and the Python package
// all judge here, so a saved report re-judged with the policy it was written with is the report
// diff wrote (docs/metrics.md, "Verdicts").
#pragma once

#include <vector>

#include "qnn_debug/compare/policy.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// Judges `run` with `policy`: every group's verdict and rule from its outputs' facts; with error
// parts, each part's verdict, the policy's gate on the group's verdict and the attribution; the
// first divergence of the run and of each part; the run rules and their reasons; the run's
// verdict. Returns each group's judgement in the run's group order: its verdict, and the rule and
// thresholds of its worst output (the line its hints aim above).
std::vector<compare::Judgement> judge(RunReport& run, const compare::Policy& policy);

// Judges every run of `report`, rebuilds its ending from its header and records the policy.
void judge(Report& report, const compare::Policy& policy);

}  // namespace qd::report
