#include "commands.h"

#include <fmt/core.h>

#include <cstdio>

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

}  // namespace qd::cli
