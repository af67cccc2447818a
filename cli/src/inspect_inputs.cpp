// `qnn-debug inspect` given something that is not a store: an encodings file is listed and
// linted directly; a dump `capture` reads (npz, ETDump, qnn-net-run folder) or an ExecuTorch
// program is named, with the command that reads it. What a file is comes from the content
// detection `diff` uses (pipeline/inputs.h), so the two never disagree.
#include <fmt/core.h>

#include <cstdio>

#include "commands.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/pipeline/inputs.h"
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

std::string capture_command(pipeline::InputFormat format, const std::string& path) {
  switch (format) {
    case pipeline::InputFormat::kNpz:
      return "qnn-debug capture npz " + path + " -o store.h5";
    case pipeline::InputFormat::kEtdump:
      return "qnn-debug capture etdump " + path + " --debug-buffer debug_output.bin -o store.h5";
    case pipeline::InputFormat::kQnnNetRun:
      return "qnn-debug capture qnn-net-run " + path + " --net-json model_net.json -o store.h5";
    case pipeline::InputFormat::kStore:
      break;
  }
  return "";
}

std::string what_it_is(pipeline::InputFormat format) {
  switch (format) {
    case pipeline::InputFormat::kNpz:
      return "an npz/npy file";
    case pipeline::InputFormat::kEtdump:
      return "an ExecuTorch ETDump";
    case pipeline::InputFormat::kQnnNetRun:
      return "a folder (read as a qnn-net-run output)";
    case pipeline::InputFormat::kStore:
      break;
  }
  return "a store";
}

}  // namespace

std::optional<int> inspect_other_input(const InspectArgs& args) {
  const Result<pipeline::InputFormat> format = pipeline::detect_format(args.store);
  if (!format) {
    switch (pipeline::other_content(args.store)) {
      case pipeline::OtherContent::kJson:
        return inspect_encodings(args);
      case pipeline::OtherContent::kExecutorchProgram:
      case pipeline::OtherContent::kBundledProgram:
        return bad_input(format.status().message());
      case pipeline::OtherContent::kUnknown:
        break;
    }
    return std::nullopt;  // the store reader says what is wrong with it
  }
  if (*format == pipeline::InputFormat::kStore) return std::nullopt;
  return bad_input(fmt::format(
      "'{}' is {}, not a qnn-debug store: make one with `{}` (diff also reads it as it is)",
      args.store, what_it_is(*format), capture_command(*format, args.store)));
}

std::optional<int> refuse_non_etdump(const std::string& path) {
  const Result<pipeline::InputFormat> format = pipeline::detect_format(path);
  if (!format) {
    const pipeline::OtherContent other = pipeline::other_content(path);
    if (other == pipeline::OtherContent::kUnknown) return std::nullopt;  // the importer says
    return bad_input(format.status().message());
  }
  if (*format == pipeline::InputFormat::kEtdump) return std::nullopt;
  if (*format == pipeline::InputFormat::kStore) {
    return bad_input(fmt::format("'{}' is already a qnn-debug store, not an ETDump", path));
  }
  return bad_input(fmt::format("'{}' is {}, not an ETDump: use `{}`", path, what_it_is(*format),
                               capture_command(*format, path)));
}

}  // namespace qd::cli
