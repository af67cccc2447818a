// qnn-debug's entry point: argument parsing only (CLI11 lives in this one translation unit; it
// costs seconds of compile time per file that includes it).
#include <CLI/CLI.hpp>

#include "commands.h"

#ifndef QD_VERSION
#define QD_VERSION "unknown"
#endif

namespace {

void add_inspect(CLI::App& app, qd::cli::InspectArgs& args) {
  CLI::App* inspect =
      app.add_subcommand("inspect",
                         "List a store: runs, tensors (name, handles, dtype, shape, layout, "
                         "quantization, stats), profile and memory events");
  inspect->add_option("store", args.store, "Store file (.h5) written by the capture hook")
      ->required();
  inspect->add_flag("--json", args.json, "Print JSON for machines instead of a table");
  inspect->add_option("--run", args.run, "Only this run id");
  inspect->add_option("--limit", args.limit, "Tensor lines per run in the table (0: all)")
      ->capture_default_str();
  inspect->add_flag("--verify", args.verify,
                    "Read every tensor and check its CRC-32C; exit 2 on the first damaged one");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "qnn-debug: find which op of a quantized model goes wrong on a Qualcomm NPU, "
      "and why"};
  app.set_version_flag("--version", std::string("qnn-debug ") + QD_VERSION);
  app.require_subcommand(1);
  qd::cli::InspectArgs inspect_args;
  add_inspect(app, inspect_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return qd::cli::kExitBadInput;
  }
  if (app.got_subcommand("inspect")) return qd::cli::run_inspect(inspect_args);
  return qd::cli::kExitBadInput;
}
