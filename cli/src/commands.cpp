#include "commands.h"

#include <fmt/core.h>

#include <cstdio>

#include <unistd.h>

#include <fstream>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/report/diff_report.h"
#include "qnn_debug/report/inspect.h"
#include "qnn_debug/store_reader.h"

namespace qd::cli {
namespace {

int bad_input(const std::string& message) {
  fmt::print(stderr, "qnn-debug: error: {}\n", report::printable(message));
  return kExitBadInput;
}

// Reads every tensor through its checksum; the first damaged one is the error.
Status verify_all(const StoreReader& store) {
  for (const TensorEntry& tensor : store.tensors()) QD_RETURN_IF_ERROR(store.verify_tensor(tensor));
  return Status::ok();
}

}  // namespace

int run_inspect(const InspectArgs& args) {
  auto store = StoreReader::open(args.store);
  if (!store) return bad_input(store.status().message());
  if (args.run) {
    bool found = false;
    for (const RunInfo& run : store.value()->runs()) found = found || run.id == *args.run;
    if (!found) {
      return bad_input(fmt::format("{}: no run {} (the store has {} runs)", args.store, *args.run,
                                   store.value()->runs().size()));
    }
  }
  if (args.verify) {
    const Status verified = verify_all(**store);
    if (!verified.is_ok()) return bad_input(verified.message());
  }
  const report::InspectOptions options{args.run, args.limit};
  const std::string out =
      args.json ? report::inspect_json(**store, options) : report::inspect_text(**store, options);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

int run_diff(const DiffArgs& args) {
  auto ref = StoreReader::open(args.reference);
  if (!ref) return bad_input(ref.status().message());
  auto device = StoreReader::open(args.device);
  if (!device) return bad_input(device.status().message());
  compare::Policy policy;
  if (!args.policy.empty()) {
    auto loaded = compare::Policy::load(args.policy);
    if (!loaded) return bad_input(loaded.status().message());
    policy = std::move(loaded).value();
  }
  compare::NameMapping mapping;
  compare::CompareOptions options;
  if (!args.mapping.empty()) {
    auto loaded = compare::load_name_mapping(args.mapping);
    if (!loaded) return bad_input(loaded.status().message());
    mapping = std::move(loaded).value();
    options.mapping = &mapping;
  }
  options.metrics.atol = args.atol;
  options.metrics.rtol = args.rtol;
  options.ref_run = args.ref_run;
  options.jobs = std::max(1u, args.jobs);
  options.chunk_elements = std::max<uint64_t>(1, args.chunk_mib) << 18;  // 4-byte floats
  auto comparison = compare::compare_stores(**ref, **device, options);
  if (!comparison) return bad_input(comparison.status().message());

  // A damaged store is bad input, not a numerical finding.
  for (const auto& run : comparison->runs) {
    for (const auto& pair : run.pairs) {
      if (pair.error_code == ErrorCode::kCorrupt || pair.error_code == ErrorCode::kIo) {
        return bad_input(pair.error);
      }
    }
  }
  // The reference graph names ops by reference tensor names; the device's is the fallback.
  const auto& graph = (*ref)->graph().empty() ? (*device)->graph() : (*ref)->graph();
  std::vector<compare::RunAnalysis> analyses;
  for (const auto& run : comparison->runs) analyses.push_back(compare::analyze(run, graph, policy));
  const report::DiffReportInputs inputs{**ref,  **device, *comparison, analyses,
                                        policy, options,  args.version};
  if (!args.json_out.empty()) {
    std::ofstream out(args.json_out, std::ios::binary | std::ios::trunc);
    out << report::diff_report_json(inputs);
    if (!out.flush()) return bad_input(args.json_out + ": cannot write the JSON report");
  }
  const std::string summary = report::diff_summary_text(inputs, args.top, isatty(STDOUT_FILENO));
  std::fwrite(summary.data(), 1, summary.size(), stdout);
  return report::overall_verdict(inputs) == compare::Verdict::kFail ? kExitPolicyFailed : kExitOk;
}

}  // namespace qd::cli
