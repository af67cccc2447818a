// `qnn-debug inspect` given something that is not a store: an encodings file is listed and
// linted directly; a dump `capture` reads (npz, ETDump, qnn-net-run folder) or an ExecuTorch
// program is named, with the command that reads it. What a file is comes from the content
// detection `diff` uses (importers/input_format.h), so the two never disagree.
#include <fmt/core.h>

#include <cstdio>

#include "commands.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/report/inspect.h"

namespace qd::cli {
namespace {

// The lint judges an encoding by its dtype; a file that states none (a plain map) describes
// QNN's unsigned fixed point of its bitwidth, 8 bits unless it says otherwise.
DType lint_dtype(const importers::TensorEncoding& e) {
  if (e.dtype) return *e.dtype;
  if (!e.quant.is_quantized()) return DType::kFloat32;
  switch (e.quant.bitwidth) {
    case 4:
      return DType::kUFixed4;
    case 16:
      return DType::kUFixed16;
    case 32:
      return DType::kUFixed32;
    default:
      return DType::kUFixed8;
  }
}

report::EncodingsListing listing_of(const std::string& path, const importers::EncodingTable& t) {
  report::EncodingsListing listing;
  listing.path = path;
  if (!t.sources.empty()) {
    listing.format = std::string(importers::encoding_format_name(t.sources.front().format));
  }
  for (const auto& [name, e] : t.tensors) {
    report::EncodingEntry entry;
    entry.tensor.name = name;
    entry.tensor.dtype = lint_dtype(e);
    entry.tensor.dims = e.dims;
    entry.tensor.axis_order = e.axis_order;
    entry.tensor.quant = e.quant;
    entry.dtype_stated = e.dtype.has_value();
    entry.graph = e.graph;
    entry.notes = e.notes;
    listing.tensors.push_back(std::move(entry));
  }
  return listing;
}

int inspect_encodings(const InspectArgs& args) {
  const auto table = importers::load_encodings(args.store);
  if (!table) return bad_input(table.status().message());
  const report::EncodingsListing listing = listing_of(args.store, *table);
  const std::string out =
      args.json ? report::encodings_json(listing) : report::encodings_text(listing, args.limit);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace

std::optional<int> inspect_other_input(const InspectArgs& args) {
  const Result<const importers::InputFormat*> format = importers::detect_format(args.store);
  if (!format) {
    switch (importers::other_content(args.store)) {
      case importers::OtherContent::kJson:
        return inspect_encodings(args);
      case importers::OtherContent::kExecutorchProgram:
      case importers::OtherContent::kBundledProgram:
        return bad_input(format.status().message());
      case importers::OtherContent::kUnknown:
        break;
    }
    return std::nullopt;  // the store reader says what is wrong with it
  }
  if (!(*format)->import) return std::nullopt;  // a store
  return bad_input(fmt::format(
      "'{}' is {}, not a qnn-debug store: make one with `{}` (diff also reads it as it is)",
      args.store, (*format)->detected_as, importers::capture_command(**format, args.store)));
}

}  // namespace qd::cli
