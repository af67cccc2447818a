// The qnn-debug subcommands, each returning the process exit code (docs/user-guide.md): 0 ok, 1
// policy failed, 2 bad usage or bad input. main.cpp only parses arguments.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/pipeline/inputs.h"
#include "qnn_debug/pipeline/request.h"

namespace qd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitPolicyFailed = 1;
inline constexpr int kExitBadInput = 2;

// Prints "qnn-debug: error: MESSAGE" as one line (control bytes escaped) and returns exit 2:
// every bad-usage and bad-input error of the CLI goes through it.
int bad_input(const std::string& message);

struct InspectArgs {
  std::string store;
  bool json = false;
  std::optional<uint32_t> run;
  size_t limit = 50;
  bool verify = false;
};
int run_inspect(const InspectArgs& args);
// inspect_inputs.cpp: `inspect` of what is not a store (an encodings JSON is listed and linted,
// a dump or program is named with the command that reads it); nullopt: read it as a store.
std::optional<int> inspect_other_input(const InspectArgs& args);

// Where each file view (report/views.h) is wanted: view name -> path; absent or "" = not wanted.
using ViewOutputs = std::map<std::string, std::string>;

struct DiffArgs {
  // Each side: a store or any dump `capture` reads (pipeline/inputs.h), with its own options;
  // --sim / --isolated, read with the shared options.
  pipeline::DiffInputs inputs;
  // The diff's own settings as given (pipeline::diff_settings(): --label, --policy, --jobs...).
  pipeline::DiffSettingValues settings;
  ViewOutputs outputs;
  size_t top = 10;
  bool stats = false;  // print wall time, bytes compared and peak memory to stderr
  std::string version;
};
int run_diff(const DiffArgs& args);

// "stats: N bytes <verb> in S s (G GB/s), peak memory M MiB" on stderr: --stats of diff and
// capture (the benchmarks read the peak memory, qnn-debug's own VmHWM, from it).
void print_stats(std::chrono::steady_clock::time_point start, uint64_t bytes, const char* verb);

// Re-renders a saved JSON report (exit 0, or 2 for a bad report or unwritable output).
struct ReportArgs {
  std::string report;
  ViewOutputs outputs;  // --json writes it again, in the current schema version
  size_t top = 10;
};
int run_report(const ReportArgs& args);

// Re-judges a saved JSON report with a policy (its own when none is given): exit 0 / 1 / 2.
struct CheckArgs {
  std::string report;
  std::string policy;
  ViewOutputs outputs;  // of the re-judged report
  size_t top = 10;
};
int run_check(const CheckArgs& args);

// `capture <format>`: a dump another tool wrote, read as `diff` reads it (pipeline/inputs.h),
// into a store.
struct CaptureArgs {
  pipeline::InputSpec input;  // its path (the ETDump, the output folder, the npz) and options
  std::string out;
  bool stats = false;  // print wall time, bytes captured and peak memory to stderr
};
int run_capture(const pipeline::InputFormat& format, const CaptureArgs& args);

// `export npz`: a store back to numpy (raw stored values, or dequantized float32 in the reference
// layout).
struct ExportNpzArgs {
  std::string store;
  std::string out;
  bool dequantize = false;
  std::optional<uint32_t> run;
};
int run_export_npz(const ExportNpzArgs& args);

// Generates the fixture pair (fixtures/), diffs it and writes report.json / .html / .csv into
// `out_dir`. Exit 0 when the report finds what was injected (or a clean pair passes), 1 when it
// does not, 2 for bad usage or unwritable output.
struct DemoArgs {
  std::string out_dir = "qnn-debug-demo";
  std::string fault = "clipping";  // "none" for a clean device run
  std::string at;                  // the op to inject at; "" = the fault's default op
  uint32_t seed = 1;
  int runs = 1;
  int input_size = fixtures::kDefaultInputSize;
  unsigned jobs = 0;    // 0: one per core
  bool etdump = false;  // also write the device run as ExecuTorch's QNN backend dumps it
  std::string version;
};
int run_demo(const DemoArgs& args);

}  // namespace qd::cli
