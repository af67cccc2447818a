#include "commands.h"

#include <fmt/core.h>

#include <cstdio>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "qnn_debug/base/output_file.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/pipeline/export.h"
#include "qnn_debug/report/inspect.h"
#include "qnn_debug/report/render.h"

namespace qd::cli {

int bad_input(const std::string& message) {
  fmt::print(stderr, "qnn-debug: error: {}\n", report::printable(message));
  return kExitBadInput;
}

namespace {

// Reads every tensor through its checksum; the first damaged one is the error.
Status verify_all(const StoreReader& store) {
  for (const TensorEntry& tensor : store.tensors()) QD_RETURN_IF_ERROR(store.verify_tensor(tensor));
  return Status::ok();
}

struct Outputs {
  std::string json, html, csv;  // "" = not wanted
};

Status write_outputs(const report::Document& doc, const Outputs& outputs) {
  if (!outputs.json.empty())
    QD_RETURN_IF_ERROR(write_output_file(outputs.json, report::report_text(doc)));
  if (!outputs.html.empty())
    QD_RETURN_IF_ERROR(write_output_file(outputs.html, report::render_html(doc)));
  if (!outputs.csv.empty())
    QD_RETURN_IF_ERROR(write_output_file(outputs.csv, report::render_csv(doc)));
  return Status::ok();
}

void print_summary(const report::Document& doc, size_t top) {
  const std::string summary = report::render_summary(doc, top, isatty(STDOUT_FILENO) != 0);
  std::fwrite(summary.data(), 1, summary.size(), stdout);
}

int exit_code_of(const report::Document& doc) {
  return report::report_verdict(doc) == compare::Verdict::kFail ? kExitPolicyFailed : kExitOk;
}

}  // namespace

int run_inspect(const InspectArgs& args) {
  if (const std::optional<int> handled = inspect_other_input(args)) return *handled;
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

namespace {

pipeline::DiffRequest diff_request(const DiffArgs& args) {
  pipeline::DiffRequest request;
  request.reference = importers::with_shared_options(args.reference, args.shared);
  request.device = importers::with_shared_options(args.device, args.shared);
  request.policy_path = args.policy;
  request.mapping_path = args.mapping;
  request.atol = args.atol;
  request.rtol = args.rtol;
  request.ref_run = args.ref_run;
  request.jobs = args.jobs;
  request.chunk_elements = std::max<uint64_t>(1, args.chunk_kib) << 8;  // 4-byte floats
  request.tool_version = args.version;
  return request;
}

// Peak resident memory of this process image (VmHWM: reset by exec, so it is qnn-debug's own).
std::string peak_memory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      const double kib = std::strtod(line.c_str() + 6, nullptr);
      return fmt::format("{:.1f} MiB", kib / 1024);
    }
  }
  return "unknown";
}

// Bytes of tensor data the comparison read: every compared pair, both sides.
uint64_t compared_bytes(const report::Document& doc) {
  uint64_t bytes = 0;
  for (const auto& run : doc["runs"]) {
    for (const auto& group : run["groups"]) {
      for (const auto& pair : group["pairs"]) {
        if (pair["metrics"].is_null()) continue;
        for (const char* side : {"reference", "device"}) {
          bytes += pair[side].value("data_nbytes", uint64_t{0});
        }
      }
    }
  }
  return bytes;
}

}  // namespace

void print_stats(std::chrono::steady_clock::time_point start, uint64_t bytes, const char* verb) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "stats: {} bytes {} in {:.3f} s ({:.2f} GB/s), peak memory {}\n", bytes, verb,
             seconds, double(bytes) / seconds / 1e9, peak_memory());
}

int run_diff(const DiffArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  auto doc = pipeline::run_diff(diff_request(args));
  if (!doc) return bad_input(doc.status().message());
  const Status written = write_outputs(*doc, {args.json_out, args.html_out, args.csv_out});
  if (!written.is_ok()) return bad_input(written.message());
  print_summary(*doc, args.top);
  if (args.stats) print_stats(start, compared_bytes(*doc), "compared");
  return exit_code_of(*doc);
}

int run_report(const ReportArgs& args) {
  auto doc = report::load_report(args.report);
  if (!doc) return bad_input(doc.status().message());
  const Status written = write_outputs(*doc, {"", args.html_out, args.csv_out});
  if (!written.is_ok()) return bad_input(written.message());
  print_summary(*doc, args.top);
  return kExitOk;
}

int run_check(const CheckArgs& args) {
  auto doc = report::load_report(args.report);
  if (!doc) return bad_input(doc.status().message());
  auto policy = args.policy.empty()
                    ? compare::Policy::from_json((*doc)["policy"].dump(), args.report + " (policy)")
                    : compare::Policy::load(args.policy);
  if (!policy) return bad_input(policy.status().message());
  report::rejudge(*doc, *policy);
  const Status written = write_outputs(*doc, {args.json_out, "", ""});
  if (!written.is_ok()) return bad_input(written.message());
  print_summary(*doc, args.top);
  return exit_code_of(*doc);
}

// What the importer ignored or doubted (its summary's warnings), one line each.
void print_capture_warnings(const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) fmt::print("  warning: {}\n", warning);
}

int run_capture(const pipeline::InputFormat& format, const CaptureArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  const auto outcome = format.import(args.input, args.out);
  if (!outcome) return bad_input(outcome.status().message());
  fmt::print("{}", outcome->said);
  print_capture_warnings(outcome->warnings);
  if (args.stats) print_stats(start, outcome->tensor_bytes, "captured");
  return kExitOk;
}

int run_export_npz(const ExportNpzArgs& args) {
  pipeline::NpzExportOptions options;
  options.store_path = args.store;
  options.output_path = args.out;
  options.dequantize = args.dequantize;
  options.run = args.run;
  const auto summary = pipeline::export_npz(options);
  if (!summary) return bad_input(summary.status().message());
  const pipeline::NpzExportSummary& s = *summary;
  fmt::print("wrote {}: {} arrays of {} runs ({} bytes, {})\n", args.out, s.arrays, s.runs, s.bytes,
             args.dequantize ? "float32 real values in the reference layout" : "values as stored");
  if (s.widened > 0) {
    fmt::print(
        "  note: {} tensors of a dtype numpy lacks were widened (4-bit to int8/uint8, "
        "BFLOAT_16 to float32)\n",
        s.widened);
  }
  if (s.renamed > 0) {
    fmt::print("  note: {} tensors could not keep their name as a key:", s.renamed);
    for (const std::string& example : s.renamed_examples) fmt::print(" {};", example);
    fmt::print("\n");
  }
  return kExitOk;
}

namespace {

// Did the report find the injection? The first divergence must be the group holding the
// injected op's handle; a clean pair must pass.
bool found(const report::Document& doc, const fixtures::Injection& injection) {
  if (injection.fault == fixtures::Fault::kNone) {
    return report::report_verdict(doc) != compare::Verdict::kFail;
  }
  const auto& first = doc["summary"]["first_divergence"];
  if (first.is_null()) return false;
  for (const auto& run : doc["runs"]) {
    for (const auto& group : run["groups"]) {
      if (group["id"] != first["group"]) continue;
      for (const auto& handle : group["handles"]) {
        if (handle.get<int64_t>() == injection.debug_handle) return true;
      }
    }
  }
  return false;
}

}  // namespace

int run_demo(const DemoArgs& args) {
  const auto fault = fixtures::parse_fault(args.fault);
  if (!fault) {
    std::string kinds;
    for (fixtures::Fault f : fixtures::all_faults()) {
      kinds += (kinds.empty() ? "" : ", ") + std::string(fixtures::fault_name(f));
    }
    return bad_input("unknown fault '" + args.fault + "' (one of: " + kinds + ")");
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) return bad_input(args.out_dir + ": cannot create the directory (" + ec.message() + ")");
  const std::filesystem::path dir(args.out_dir);
  fixtures::FixtureOptions options;
  options.fault = *fault;
  options.fault_op = args.at;
  options.seed = args.seed;
  options.runs = args.runs;
  DiffArgs diff;
  diff.reference.path = (dir / "reference.h5").string();
  diff.device.path = (dir / "device.h5").string();
  diff.json_out = (dir / "report.json").string();
  diff.html_out = (dir / "report.html").string();
  diff.csv_out = (dir / "report.csv").string();
  diff.jobs = std::max(1u, args.jobs);
  diff.version = args.version;
  const std::string etdump_dir = args.etdump ? (dir / "executorch").string() : "";
  const auto injection =
      fixtures::write_fixture({diff.reference.path, diff.device.path, etdump_dir}, options);
  if (!injection) return bad_input(injection.status().message());
  auto doc = pipeline::run_diff(diff_request(diff));
  if (!doc) return bad_input(doc.status().message());
  const Status written = write_outputs(*doc, {diff.json_out, diff.html_out, diff.csv_out});
  if (!written.is_ok()) return bad_input(written.message());
  print_summary(*doc, 5);
  const bool ok = found(*doc, *injection);
  const std::string injected = injection->fault == fixtures::Fault::kNone
                                   ? "no fault injected"
                                   : fmt::format("injected {} at {} (debug handle {})",
                                                 fixtures::fault_name(injection->fault),
                                                 injection->op, injection->debug_handle);
  fmt::print("\nstores   {}\n         {}\nreports  {}\n         {}\n         {}\n",
             diff.reference.path, diff.device.path, diff.html_out, diff.json_out, diff.csv_out);
  if (args.etdump) {
    fmt::print("executorch dump of the device run (qnn-debug capture etdump): {}/\n", etdump_dir);
  }
  fmt::print("{}: {}; the report {}\n", ok ? "demo ok" : "DEMO FAILED", injected,
             injection->fault == fixtures::Fault::kNone
                 ? (ok ? "passes" : "does not pass")
                 : (ok ? "names it as the first divergence" : "does not name it first"));
  return ok ? kExitOk : kExitPolicyFailed;
}

}  // namespace qd::cli
