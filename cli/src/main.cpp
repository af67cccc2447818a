// qnn-debug's entry point: argument parsing only (CLI11 lives in this one translation unit; it
// costs seconds of compile time per file that includes it).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/fixtures/model.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/pipeline/memory_reserve.h"
#include "qnn_debug/report/views.h"

#ifndef QD_VERSION
#define QD_VERSION "unknown"
#endif

namespace {

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// ---- usage errors: one line, "qnn-debug: error: ...", the closest valid word, exit 2 -------

// Levenshtein distance: insertions, deletions and substitutions each cost one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "; did you mean 'X'?" for the candidate nearest to `word`, when it is near enough to be a
// typo (at most a third of the word's letters, and at least 2, differ); "" otherwise.
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) best = &candidate, best_distance = distance;
  }
  return best != nullptr ? "; did you mean '" + *best + "'?" : "";
}

std::vector<CLI::App*> subcommands_of(CLI::App& app) {
  return app.get_subcommands([](CLI::App*) { return true; });
}

// "qnn-debug capture npz": the command words that lead to `app`.
std::string command_path(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* parent = app->get_parent(); parent != nullptr;
       parent = parent->get_parent()) {
    path = (parent->get_parent() != nullptr ? parent->get_name() : "qnn-debug") + " " + path;
  }
  return app->get_parent() != nullptr ? path : "qnn-debug";
}

std::string names_of(const std::vector<CLI::App*>& commands) {
  std::string names;
  for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
  return names;
}

// The command words are checked before CLI11 parses: it would take an unknown one for a
// positional argument and say "A subcommand is required". Returns the message, or "".
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* current = &app;
  int i = 1;
  for (; i < argc && argv[i][0] != '-'; ++i) {
    const std::vector<CLI::App*> commands = subcommands_of(*current);
    if (commands.empty()) return "";
    std::vector<std::string> names;
    CLI::App* next = nullptr;
    for (CLI::App* c : commands) {
      names.push_back(c->get_name());
      if (c->get_name() == argv[i]) next = c;
    }
    if (next == nullptr) {
      return "unknown command '" + std::string(argv[i]) + "' for '" + command_path(current) + "'" +
             suggestion(argv[i], names) + " (commands: " + names_of(commands) + ")";
    }
    current = next;
  }
  const std::vector<CLI::App*> commands = subcommands_of(*current);
  if (i == argc && !commands.empty()) {
    return "'" + command_path(current) + "' needs a command: " + names_of(commands);
  }
  return "";
}

// The deepest command given: its options are the ones an unknown option was meant to be.
const CLI::App* deepest_command(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return deepest_command(*sub);
  return &app;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// Arguments no option or positional took (every command allows extras, so they land here
// rather than in CLI11's "The following arguments were not expected").
std::string unexpected_argument(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining(true);
  if (extras.empty()) return "";
  const CLI::App* command = deepest_command(app);
  for (const std::string& extra : extras) {
    if (extra.size() > 1 && extra[0] == '-') {
      const std::string flag = extra.substr(0, extra.find('='));
      return "unknown option '" + flag + "' for '" + command_path(command) + "'" +
             suggestion(flag, option_names(*command));
    }
  }
  return "unexpected argument '" + extras.front() + "' for '" + command_path(command) + "'";
}

void allow_extras_everywhere(CLI::App& app) {
  app.allow_extras();
  for (CLI::App* sub : subcommands_of(app)) allow_extras_everywhere(*sub);
}

// CLI11 reads "-1" into an unsigned option as a huge count; this check refuses it by name.
const CLI::Validator kNotNegative(
    [](const std::string& value) {
      const size_t first = value.find_first_not_of(" \t");
      return first != std::string::npos && value[first] == '-' ? "must be 0 or more, not " + value
                                                               : std::string();
    },
    "", "not negative");

// CLI11's own message as one line: "--top: must be 0 or more, not -1".
std::string one_line(std::string message) {
  std::replace(message.begin(), message.end(), '\n', ' ');
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

void add_inspect(CLI::App& app, qd::cli::InspectArgs& args) {
  CLI::App* inspect =
      app.add_subcommand("inspect",
                         "List a store: runs, tensors (name, handles, dtype, shape, layout, "
                         "quantization, stats), profile and memory events");
  inspect->add_option("store", args.store, "Store file (.h5) written by the capture hook")
      ->required();
  inspect->add_flag("--json", args.json, "Print JSON for machines instead of a table");
  inspect->add_option("--run", args.run, "Only this run id")->check(kNotNegative);
  inspect->add_option("--limit", args.limit, "Tensor lines per run in the table (0: all)")
      ->check(kNotNegative)
      ->capture_default_str();
  inspect->add_flag("--verify", args.verify,
                    "Read every tensor and check its CRC-32C; exit 2 on the first damaged one");
}

// An input format's option as the command-line option `name`, filling `spec` (a list for an
// option that takes several values, one value otherwise).
CLI::Option* add_input_option(CLI::App& app, const std::string& name,
                              const qd::importers::InputOption& option, const std::string& help,
                              qd::pipeline::InputSpec& spec) {
  const std::string key = option.key;
  CLI::Option* added =
      option.many
          ? app.add_option_function<std::vector<std::string>>(
                name, [&spec, key](const std::vector<std::string>& v) { spec.options[key] = v; },
                help)
          : app.add_option_function<std::string>(
                name, [&spec, key](const std::string& v) { spec.options[key] = {v}; }, help);
  if (!option.default_value.empty()) added->default_str(option.default_value);
  return added;
}

// How each side of a diff is read when it is not a store (docs/formats.md): every format's
// options, --ref-FLAG and --dev-FLAG.
void add_side_options(CLI::App& diff, const std::string& side, qd::pipeline::InputSpec& spec) {
  const std::string group = side == "ref" ? "reference input" : "device input";
  diff.add_option("--" + side + "-format", spec.format,
                  qd::importers::format_names() + " (default: told by content)")
      ->group(group);
  for (const qd::importers::InputOption& option : qd::importers::side_options()) {
    add_input_option(diff, "--" + side + "-" + option.flag, option, option.side_help, spec)
        ->group(group);
  }
}

void add_input_options(CLI::App& diff, qd::pipeline::DiffInputs& inputs) {
  add_side_options(diff, "ref", inputs.reference);
  add_side_options(diff, "dev", inputs.device);
  for (const qd::importers::InputOption& option : qd::importers::side_options()) {
    if (option.both_help.empty()) continue;
    add_input_option(diff, "--" + option.flag, option, option.both_help, inputs.shared)
        ->group("both inputs");
  }
}

// --label, --policy, --jobs...: one option per setting of the diff (pipeline/request.h), kept as
// text: the request parses it, for the CLI as for Python.
void add_setting_options(CLI::App& diff, qd::pipeline::DiffSettingValues& values) {
  for (const qd::pipeline::DiffSetting& setting : qd::pipeline::diff_settings()) {
    const std::string key = setting.key;
    CLI::Option* added =
        setting.many
            ? diff.add_option_function<std::vector<std::string>>(
                  setting.flags,
                  [&values, key](const std::vector<std::string>& v) { values[key] = v; },
                  setting.help)
            : diff.add_option_function<std::string>(
                  setting.flags, [&values, key](const std::string& v) { values[key] = {v}; },
                  setting.help);
    added->type_name(setting.value_name);
    if (!setting.default_text.empty()) added->default_str(setting.default_text);
  }
}

// --json, --html, --csv...: one option per file view (report/views.h).
void add_view_options(CLI::App& command, qd::cli::ViewOutputs& outputs) {
  for (const qd::report::FileView& view : qd::report::file_views()) {
    command.add_option(std::string("--") + view.name, outputs[view.name], view.help);
  }
}

void add_diff(CLI::App& app, qd::cli::DiffArgs& args) {
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Compare a device store with a reference store: per-op SQNR and other gaps, "
      "the first divergence, the ops that introduce error. Exit 1 if the policy fails");
  diff->add_option("reference", args.inputs.reference.path,
                   "The CPU execution: " + qd::importers::format_nouns())
      ->required();
  diff->add_option("device", args.inputs.device_paths,
                   "The device execution, or several (backends, SDK versions, SoCs) each compared "
                   "with the reference into one report: " +
                       qd::importers::format_nouns())
      ->required();
  diff->add_option("--sim", args.inputs.simulation,
                   "A quantized simulation of the reference (any input kind): splits each op's "
                   "error into quantization (REF vs SIM) and kernel (SIM vs DEV)");
  diff->add_option("--isolated", args.inputs.isolated,
                   "Each op replayed alone on the device's inputs (qnn_debug.replay): each op's "
                   "own error, ISO vs DEV");
  add_input_options(*diff, args.inputs);
  add_view_options(*diff, args.outputs);
  add_setting_options(*diff, args.settings);
  diff->add_option("--top", args.top, "Worst groups listed in the summary")
      ->check(kNotNegative)
      ->capture_default_str();
  diff->add_flag("--stats", args.stats,
                 "Print wall time, bytes compared and peak memory to stderr");
}

void add_report(CLI::App& app, qd::cli::ReportArgs& args) {
  CLI::App* report = app.add_subcommand("report",
                                        "Re-render a saved JSON report in any view (HTML, CSV, "
                                        "JSON in the current schema) and print its summary");
  report->add_option("report", args.report, "JSON report written by diff --json")->required();
  add_view_options(*report, args.outputs);
  report->add_option("--top", args.top, "Worst groups listed in the summary")
      ->check(kNotNegative)
      ->capture_default_str();
}

void add_check(CLI::App& app, qd::cli::CheckArgs& args) {
  CLI::App* check = app.add_subcommand(
      "check",
      "Re-judge a saved JSON report with a policy, without the stores: exit 0 pass, 1 fail");
  check->add_option("report", args.report, "JSON report written by diff --json")->required();
  check->add_option("--policy", args.policy,
                    "Policy JSON (docs/metrics.md); default: the policy stored in the report");
  add_view_options(*check, args.outputs);
  check->add_option("--top", args.top, "Worst groups listed in the summary")
      ->check(kNotNegative)
      ->capture_default_str();
}

// `capture <format>` for one format: its input, its options, the output and --stats.
void add_capture_format(CLI::App& capture, const qd::importers::InputFormat& format,
                        qd::cli::CaptureArgs& a) {
  CLI::App* sub = capture.add_subcommand(format.name, format.capture_help);
  sub->add_option(format.input_name, a.input.path, format.input_help)->required();
  if (!format.more_inputs_help.empty()) {
    sub->add_option("more", a.input.more_paths, format.more_inputs_help);
  }
  for (const qd::importers::InputOption& option : format.options) {
    add_input_option(*sub, "--" + option.flag, option, option.help, a.input);
  }
  sub->add_option("-o,--out", a.out, "The store to write")->required();
  sub->add_flag("--stats", a.stats, "Print wall time, bytes captured and peak memory to stderr");
}

// A capture subcommand's format and arguments.
struct CaptureCommand {
  const qd::importers::InputFormat* format;
  qd::cli::CaptureArgs args;
};

// One subcommand per format that converts (input_format.h), in the registry's order.
CLI::App* add_capture(CLI::App& app, std::vector<CaptureCommand>& commands) {
  CLI::App* capture = app.add_subcommand(
      "capture", "Turn a dump another tool wrote into a qnn-debug store (docs/formats.md)");
  capture->require_subcommand(1);
  for (const qd::importers::InputFormat* format : qd::importers::input_formats()) {
    if (format->import) commands.push_back({format, {}});
  }
  for (CaptureCommand& command : commands)
    add_capture_format(*capture, *command.format, command.args);
  return capture;
}

CLI::App* add_export(CLI::App& app, qd::cli::ExportNpzArgs& a) {
  CLI::App* exporter =
      app.add_subcommand("export", "Write a store's tensors in another tool's format");
  exporter->require_subcommand(1);
  CLI::App* npz = exporter->add_subcommand(
      "npz",
      "Every tensor as a numpy array (np.load reads it); with several runs the keys are "
      "'run<id>/<name>'");
  npz->add_option("store", a.store, "The store (.h5)")->required();
  npz->add_option("-o,--out", a.out, "The .npz to write")->required();
  npz->add_flag("--dequantize", a.dequantize,
                "float32 real values in the reference layout instead of the stored values");
  npz->add_option("--run", a.run, "Only this run id (its keys then carry no prefix)")
      ->check(kNotNegative);
  return exporter;
}

void add_demo(CLI::App& app, qd::cli::DemoArgs& args) {
  CLI::App* demo = app.add_subcommand(
      "demo",
      "Generate a reference and an emulated quantized device run of a small model (with one "
      "injected fault), diff them and write report.html, report.json and report.csv");
  demo->add_option("--out", args.out_dir, "Directory for the stores and reports")
      ->capture_default_str();
  std::string faults;
  for (qd::fixtures::Fault f : qd::fixtures::all_faults()) {
    faults += (faults.empty() ? "" : ", ") + std::string(qd::fixtures::fault_name(f));
  }
  demo->add_option("--fault", args.fault, "The fault: " + faults)->capture_default_str();
  demo->add_option("--at", args.at, "Op to inject the fault at (default: one per fault kind)");
  demo->add_option("--seed", args.seed, "Weights and inputs")
      ->check(kNotNegative)
      ->capture_default_str();
  demo->add_option("--runs", args.runs, "Runs per store")
      ->check(kNotNegative)
      ->capture_default_str();
  demo->add_option("--input-size", args.input_size,
                   "The input's height and width in pixels, a multiple of 4 from 8 to 512 "
                   "(smaller stores for many runs)")
      ->check(kNotNegative)
      ->capture_default_str();
  demo->add_option("--jobs,-j", args.jobs, "Worker threads for the diff (0: one per core)")
      ->check(kNotNegative)
      ->capture_default_str();
  demo->add_flag("--etdump", args.etdump,
                 "Also write the device run as ExecuTorch's QNN backend dumps it, into "
                 "OUT/executorch: device.etdp, debug_output.bin, model_net.json, etrecord.bin");
}

// A subcommand, whether it was given, and what it does to which inputs (for the one line that
// says it ran out of memory).
struct Command {
  bool chosen = false;
  std::function<int()> run;
  std::string doing;
};

int run_guarded(const Command& command) {
  const qd::pipeline::MemoryReserve reserve;  // lets the unwinding of a std::bad_alloc finish
  try {
    return command.run();
  } catch (const std::bad_alloc&) {
    // The command's memory is released by the unwinding, so the message can be formatted.
    return qd::cli::bad_input("out of memory while " + command.doing +
                              " (the input needs more memory than this process may use)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qnn-debug: internal error: %s\n", e.what());
    return qd::cli::kExitBadInput;
  }
}

}  // namespace

int main(int argc, char** argv) {
  qd::keep_hdf5_quiet_at_exit();
  CLI::App app{
      "qnn-debug: find which op of a quantized model goes wrong on a Qualcomm NPU, "
      "and why"};
  app.set_version_flag("--version", std::string("qnn-debug ") + QD_VERSION);
  app.require_subcommand(1);
  qd::cli::InspectArgs inspect_args;
  add_inspect(app, inspect_args);
  qd::cli::DiffArgs diff_args;
  diff_args.version = QD_VERSION;
  add_diff(app, diff_args);
  qd::cli::ReportArgs report_args;
  add_report(app, report_args);
  qd::cli::CheckArgs check_args;
  add_check(app, check_args);
  std::vector<CaptureCommand> capture_commands;
  CLI::App* capture = add_capture(app, capture_commands);
  qd::cli::ExportNpzArgs export_npz_args;
  CLI::App* exporter = add_export(app, export_npz_args);
  qd::cli::DemoArgs demo_args;
  demo_args.version = QD_VERSION;
  add_demo(app, demo_args);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    return qd::cli::bad_input(unknown);
  }
  allow_extras_everywhere(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return qd::cli::bad_input(one_line(e.what()));
  }
  if (const std::string unexpected = unexpected_argument(app); !unexpected.empty()) {
    return qd::cli::bad_input(unexpected);
  }
  // Errors are values below this point; running out of memory (an input too big for this
  // machine) is said in one line naming the inputs, and anything else thrown is a bug, reported
  // rather than aborting.
  std::vector<Command> commands = {
      {app.got_subcommand("inspect"), [&] { return qd::cli::run_inspect(inspect_args); },
       "reading " + inspect_args.store},
      {app.got_subcommand("diff"), [&] { return qd::cli::run_diff(diff_args); },
       "comparing " + diff_args.inputs.reference.path + " with " +
           joined(diff_args.inputs.device_paths, ", ")},
      {app.got_subcommand("report"), [&] { return qd::cli::run_report(report_args); },
       "rendering " + report_args.report},
      {app.got_subcommand("check"), [&] { return qd::cli::run_check(check_args); },
       "checking " + check_args.report},
      {app.got_subcommand("demo"), [&] { return qd::cli::run_demo(demo_args); },
       "writing the demo into " + demo_args.out_dir},
      {exporter->got_subcommand("npz"), [&] { return qd::cli::run_export_npz(export_npz_args); },
       "exporting " + export_npz_args.store},
  };
  for (const CaptureCommand& c : capture_commands) {
    commands.push_back({capture->got_subcommand(c.format->name),
                        [&c] { return qd::cli::run_capture(*c.format, c.args); },
                        "capturing " + c.args.input.path});
  }
  for (const Command& command : commands) {
    if (command.chosen) return run_guarded(command);
  }
  return qd::cli::kExitBadInput;
}
