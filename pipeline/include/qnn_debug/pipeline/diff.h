// `qnn-debug diff` as a library call: everything between two input paths and the typed report
// (qnn_debug/report/model.h). The CLI and the Python package both call run_diff, so they give the
// same report for the same inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/pipeline/inputs.h"
#include "qnn_debug/report/model.h"

namespace qd::pipeline {

struct DiffRequest {
  InputSpec reference;  // the CPU execution: a store or any dump inputs.h accepts
  // Captured on the NPU, likewise: one or more (several backends, SDK versions or SoCs), each
  // compared with the reference in turn into one report.
  std::vector<InputSpec> devices;
  // The devices' names in the views, by position; a missing or empty one is the store's metadata
  // (report::default_label). More labels than devices is an error.
  std::vector<std::string> labels;
  // A quantized simulation of the reference (--sim): splits each group's error into its
  // quantization part (REF vs SIM) and its kernel part (SIM vs DEV). Any input kind, as above.
  std::optional<InputSpec> simulation;
  // Each op replayed alone on the device's inputs (--isolated, qnn_debug.replay): ISO vs DEV.
  // One device only: a replay is of one device's values.
  std::optional<InputSpec> isolated;
  std::string policy_path;                      // "" = the default policy
  std::string mapping_path;                     // "" = none: JSON {"reference name": "device name"}
  double atol = compare::MetricOptions{}.atol;  // allclose tolerances (defaults: metrics.h)
  double rtol = compare::MetricOptions{}.rtol;
  std::optional<uint32_t> ref_run;  // every device run against this reference run
  // The reference tensor holding a decoder's logits when they are not each run's final output:
  // the classifier figures and the token view measure it ("" = the final output).
  std::string logits;
  // Worker threads; 0, the default: one per core. Pairs, and slices of large pairs, are cut and
  // merged the same way whatever the number (docs/metrics.md, "Slices and threads"), so the
  // report is the same for any.
  unsigned jobs = 0;
  uint64_t chunk_elements = uint64_t{1} << 16;  // streaming chunk per side and worker
  std::string tool_version;                     // recorded in the report
};

// Opens every input (converting dumps into temporary stores), loads the policy and the mapping,
// compares every run pair (and, with a simulation or a replay, its error parts: compare/parts.h),
// analyses each and streams the report into `sink` run by run, so
// memory does not grow with the number of runs. Errors (exit-code-2 material, messages naming
// the file): a missing or damaged input, a bad policy or mapping, no runs to compare, a tensor
// whose bytes fail their checksum, and the sink's own; after an error the sink has seen only
// part of the report (begin without finish). A failing verdict is not an error: it is in the
// summary returned.
Result<report::Summary> run_diff(const DiffRequest& request, report::ReportSink& sink);

// The same, the report held whole (the Python package, tests).
Result<report::Report> run_diff(const DiffRequest& request);

}  // namespace qd::pipeline
