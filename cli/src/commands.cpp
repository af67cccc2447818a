#include "commands.h"

#include <fmt/core.h>

#include <cstdio>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "qnn_debug/base/output_file.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/pipeline/export.h"
#include "qnn_debug/pipeline/settings.h"
#include "qnn_debug/report/inspect.h"
#include "qnn_debug/report/judge.h"
#include "qnn_debug/report/views.h"

namespace qd::cli {

int bad_input(const std::string& message) {
  fmt::print(stderr, "qnn-debug: error: {}\n", report::printable(message));
  return kExitBadInput;
}

namespace {

// Reads every tensor through its checksum; the first damaged one is the error.
Status verify_all(const StoreReader& store) {
  return store.for_each_tensor(
      [&](const TensorEntry& tensor) { return store.verify_tensor(tensor); });
}

// The file views the user asked for, each streaming into its output; nothing is published
// unless the whole report was written (commit).
class ViewFiles {
 public:
  static Result<ViewFiles> open(const ViewOutputs& outputs) {
    ViewFiles files;
    for (const report::FileView& view : report::file_views()) {
      const auto wanted = outputs.find(view.name);
      if (wanted == outputs.end() || wanted->second.empty()) continue;
      QD_ASSIGN_OR_RETURN(OutputStream stream, OutputStream::open(wanted->second));
      files.streams_.push_back(std::make_unique<OutputStream>(std::move(stream)));
      OutputStream* out = files.streams_.back().get();
      files.views_.push_back(view.make([out](std::string_view text) { return out->write(text); }));
      files.sinks_.add(*files.views_.back());
    }
    return files;
  }
  report::SinkList& sinks() { return sinks_; }
  Status commit() {
    for (auto& stream : streams_) QD_RETURN_IF_ERROR(stream->commit());
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<OutputStream>> streams_;
  std::vector<std::unique_ptr<report::ReportSink>> views_;
  report::SinkList sinks_;
};

// Bytes of tensor data the comparison read: every compared pair, both sides.
class ComparedBytes : public report::ReportSink {
 public:
  Status add_run(const report::RunReport& run) override {
    for (const report::GroupReport& group : run.groups) {
      for (const report::PairReport& pair : group.pairs) {
        if (pair.metrics) bytes_ += pair.reference.data_nbytes + pair.device.data_nbytes;
      }
    }
    return Status::ok();
  }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

void print_text(std::FILE* stream, const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stream);
}

// Where a command's own lines (its summary, "wrote ...") go: standard output, unless one of its
// files is written there ("-"); then stderr, so stdout holds that file alone.
std::FILE* text_stream(bool stdout_taken) { return stdout_taken ? stderr : stdout; }

bool writes_stdout(const ViewOutputs& outputs) {
  return std::any_of(outputs.begin(), outputs.end(),
                     [](const auto& output) { return is_standard_output(output.second); });
}

// The file views asked for, as outputs for check_outputs, named by their options.
std::vector<CommandFile> view_outputs(const ViewOutputs& outputs) {
  std::vector<CommandFile> files;
  for (const report::FileView& view : report::file_views()) {
    const auto wanted = outputs.find(view.name);
    if (wanted != outputs.end() && !wanted->second.empty()) {
      files.push_back({wanted->second, std::string("--") + view.name});
    }
  }
  return files;
}

// The files an input's options name (encodings, ETRecord, debug buffer, handle map...), each
// called by the option that gave it: `prefix` is "--", "--ref-" or "--dev-".
void add_option_inputs(const pipeline::InputSpec& spec,
                       std::span<const importers::InputOption> known, const std::string& prefix,
                       std::vector<CommandFile>& inputs) {
  for (const importers::InputOption& option : known) {
    if (!option.path) continue;
    for (const std::string& value : spec.values(option.key)) {
      inputs.push_back({value, "the " + prefix + option.flag + " input"});
    }
  }
}

// Exit 2 naming the clash when an output would destroy an input or two share stdout; nullopt
// when the outputs may be written. Called before anything is opened for writing.
std::optional<int> refuse_clashing_outputs(const std::vector<CommandFile>& outputs,
                                           const std::vector<CommandFile>& inputs) {
  const Status checked = check_outputs(outputs, inputs);
  if (checked.is_ok()) return std::nullopt;
  return bad_input(checked.message());
}

int exit_code_of(const report::Summary& summary) {
  return summary.verdict == compare::Verdict::kFail ? kExitPolicyFailed : kExitOk;
}

// The views asked for, the terminal summary and `extra` fed by `produce` (a diff, or a saved
// report replayed); the files are published and the summary printed only when it succeeds.
Result<report::Summary> into_views(
    const ViewOutputs& outputs, size_t top, const std::vector<report::ReportSink*>& extra,
    const std::function<Result<report::Summary>(report::ReportSink&)>& produce) {
  QD_ASSIGN_OR_RETURN(ViewFiles files, ViewFiles::open(outputs));
  std::FILE* const text = text_stream(writes_stdout(outputs));
  report::SummaryView summary(top, isatty(fileno(text)) != 0);
  files.sinks().add(summary);
  for (report::ReportSink* sink : extra) files.sinks().add(*sink);
  QD_ASSIGN_OR_RETURN(report::Summary result, produce(files.sinks()));
  QD_RETURN_IF_ERROR(files.commit());
  print_text(text, summary.text());
  return result;
}

// A saved report through the views asked for and the terminal summary.
Result<report::Summary> show(const report::Report& report, const ViewOutputs& outputs, size_t top) {
  return into_views(outputs, top, {}, [&](report::ReportSink& sink) -> Result<report::Summary> {
    QD_RETURN_IF_ERROR(report::replay(report, sink));
    return report.ending.summary;
  });
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
  const Result<std::string> out =
      args.json ? report::inspect_json(**store, options) : report::inspect_text(**store, options);
  if (!out.is_ok()) return bad_input(out.status().message());
  print_text(stdout, *out);
  return kExitOk;
}

namespace {

// Every file a diff reads, named as the user gave it: both sides and their options, the third
// stores, the settings that name files (the policy, the name map).
std::vector<CommandFile> diff_inputs(const DiffArgs& args) {
  const pipeline::DiffInputs& in = args.inputs;
  std::vector<CommandFile> inputs{{in.reference.path, "the reference input"}};
  for (size_t i = 0; i < in.device_paths.size(); ++i) {
    inputs.push_back({in.device_paths[i], in.device_paths.size() == 1
                                              ? std::string("the device input")
                                              : fmt::format("device input {}", i + 1)});
  }
  inputs.push_back({in.simulation, "the --sim input"});
  inputs.push_back({in.isolated, "the --isolated input"});
  for (const pipeline::DiffSetting& setting : pipeline::diff_settings()) {
    const auto given = args.settings.find(setting.key);
    if (!setting.path || given == args.settings.end()) continue;
    for (const std::string& path : given->second) {
      inputs.push_back({path, "the " + setting.flag() + " file"});
    }
  }
  const std::vector<importers::InputOption> options = importers::side_options();
  add_option_inputs(in.reference, options, "--ref-", inputs);
  add_option_inputs(in.device, options, "--dev-", inputs);
  add_option_inputs(in.shared, options, "--", inputs);
  return inputs;
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

}  // namespace

void print_stats(std::chrono::steady_clock::time_point start, uint64_t bytes, const char* verb) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "stats: {} bytes {} in {:.3f} s ({:.2f} GB/s), peak memory {}\n", bytes, verb,
             seconds, double(bytes) / seconds / 1e9, peak_memory());
}

namespace {

// `diff` streaming into the views asked for, the terminal summary and `extra`.
Result<report::Summary> diff_into_views(const DiffArgs& args, size_t top,
                                        const std::vector<report::ReportSink*>& extra = {}) {
  QD_ASSIGN_OR_RETURN(const pipeline::DiffRequest request,
                      pipeline::make_diff_request(args.inputs, args.settings, args.version));
  return into_views(args.outputs, top, extra,
                    [&](report::ReportSink& sink) { return pipeline::run_diff(request, sink); });
}

}  // namespace

int run_diff(const DiffArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  if (auto refused = refuse_clashing_outputs(view_outputs(args.outputs), diff_inputs(args))) {
    return *refused;
  }
  ComparedBytes compared;
  auto summary = diff_into_views(args, args.top, {&compared});
  if (!summary) return bad_input(summary.status().message());
  if (args.stats) print_stats(start, compared.bytes(), "compared");
  return exit_code_of(*summary);
}

int run_report(const ReportArgs& args) {
  if (auto refused =
          refuse_clashing_outputs(view_outputs(args.outputs), {{args.report, "the report"}})) {
    return *refused;
  }
  auto report = report::load_report(args.report);
  if (!report) return bad_input(report.status().message());
  auto shown = show(*report, args.outputs, args.top);
  if (!shown) return bad_input(shown.status().message());
  return kExitOk;
}

int run_check(const CheckArgs& args) {
  if (auto refused = refuse_clashing_outputs(
          view_outputs(args.outputs),
          {{args.report, "the report"}, {args.policy, "the --policy file"}})) {
    return *refused;
  }
  auto report = report::load_report(args.report);
  if (!report) return bad_input(report.status().message());
  if (!args.policy.empty()) {
    auto policy = pipeline::load_policy(args.policy);
    if (!policy) return bad_input(policy.status().message());
    report::judge(*report, *policy);
  } else {
    report::judge(*report, compare::Policy(report->header.policy));
  }
  auto shown = show(*report, args.outputs, args.top);
  if (!shown) return bad_input(shown.status().message());
  return exit_code_of(*shown);
}

namespace {

// What the importer ignored or doubted (its summary's warnings), one line each.
void print_capture_warnings(std::FILE* stream, const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) fmt::print(stream, "  warning: {}\n", warning);
}

// The files a capture reads: its inputs and the files its options name.
std::vector<CommandFile> capture_inputs(const pipeline::InputFormat& format,
                                        const CaptureArgs& args) {
  std::vector<CommandFile> inputs{{args.input.path, "the input"}};
  for (size_t i = 0; i < args.input.more_paths.size(); ++i) {
    inputs.push_back({args.input.more_paths[i], fmt::format("input {}", i + 2)});
  }
  add_option_inputs(args.input, format.options, "--", inputs);
  return inputs;
}

}  // namespace

int run_capture(const pipeline::InputFormat& format, const CaptureArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  if (auto refused = refuse_clashing_outputs({{args.out, "-o"}}, capture_inputs(format, args))) {
    return *refused;
  }
  const auto outcome = format.import(args.input, args.out);
  if (!outcome) return bad_input(outcome.status().message());
  std::FILE* const text = text_stream(is_standard_output(args.out));
  fmt::print(text, "{}", outcome->said);
  print_capture_warnings(text, outcome->warnings);
  if (args.stats) print_stats(start, outcome->tensor_bytes, "captured");
  return kExitOk;
}

int run_export_npz(const ExportNpzArgs& args) {
  if (auto refused = refuse_clashing_outputs({{args.out, "-o"}}, {{args.store, "the store"}})) {
    return *refused;
  }
  pipeline::NpzExportOptions options;
  options.store_path = args.store;
  options.output_path = args.out;
  options.dequantize = args.dequantize;
  options.run = args.run;
  const auto summary = pipeline::export_npz(options);
  if (!summary) return bad_input(summary.status().message());
  const pipeline::NpzExportSummary& s = *summary;
  std::FILE* const text = text_stream(is_standard_output(args.out));
  fmt::print(text, "wrote {}: {} arrays of {} runs ({} bytes, {})\n", args.out, s.arrays, s.runs,
             s.bytes,
             args.dequantize ? "float32 real values in the reference layout" : "values as stored");
  if (s.widened > 0) {
    fmt::print(text,
               "  note: {} tensors of a dtype numpy lacks were widened (4-bit to int8/uint8, "
               "BFLOAT_16 to float32)\n",
               s.widened);
  }
  if (s.renamed > 0) {
    fmt::print(text, "  note: {} tensors could not keep their name as a key:", s.renamed);
    for (const std::string& example : s.renamed_examples) fmt::print(text, " {};", example);
    fmt::print(text, "\n");
  }
  return kExitOk;
}

namespace {

// The handles of the first divergence's group, as the report streams by.
class FirstDivergenceHandles : public report::ReportSink {
 public:
  Status add_run(const report::RunReport& run) override {
    if (found_ || !run.first_divergence) return Status::ok();
    if (const report::GroupReport* group = run.group(*run.first_divergence)) {
      handles_ = group->handles;
      found_ = true;
    }
    return Status::ok();
  }
  const std::vector<int64_t>& handles() const { return handles_; }

 private:
  bool found_ = false;
  std::vector<int64_t> handles_;
};

// Did the report find the injection? The first divergence must be the group holding the
// injected op's handle; a clean pair must pass.
bool found(const report::Summary& summary, const std::vector<int64_t>& first_divergence_handles,
           const fixtures::Injection& injection) {
  if (injection.fault == fixtures::Fault::kNone) return summary.verdict != compare::Verdict::kFail;
  return std::find(first_divergence_handles.begin(), first_divergence_handles.end(),
                   injection.debug_handle) != first_divergence_handles.end();
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
  options.input_size = args.input_size;
  DiffArgs diff;
  diff.inputs.reference.path = (dir / "reference.h5").string();
  diff.inputs.device_paths = {(dir / "device.h5").string()};
  for (const char* view : {"json", "html", "csv"}) {
    diff.outputs[view] = (dir / (std::string("report.") + view)).string();
  }
  diff.settings["jobs"] = {std::to_string(args.jobs)};
  diff.version = args.version;
  const std::string etdump_dir = args.etdump ? (dir / "executorch").string() : "";
  const auto injection = fixtures::write_fixture(
      {diff.inputs.reference.path, diff.inputs.device_paths[0], etdump_dir}, options);
  if (!injection) return bad_input(injection.status().message());
  FirstDivergenceHandles first;
  auto summary = diff_into_views(diff, 5, {&first});
  if (!summary) return bad_input(summary.status().message());
  const bool ok = found(*summary, first.handles(), *injection);
  const std::string injected = injection->fault == fixtures::Fault::kNone
                                   ? "no fault injected"
                                   : fmt::format("injected {} at {} (debug handle {})",
                                                 fixtures::fault_name(injection->fault),
                                                 injection->op, injection->debug_handle);
  fmt::print("\nstores   {}\n         {}\nreports  {}\n         {}\n         {}\n",
             diff.inputs.reference.path, diff.inputs.device_paths[0], diff.outputs["html"],
             diff.outputs["json"], diff.outputs["csv"]);
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
