#include "qnn_debug/pipeline/inputs.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace qd::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr std::array<unsigned char, 8> kHdf5Signature = {0x89, 'H',  'D',  'F',
                                                         '\r', '\n', 0x1a, '\n'};

bool starts_with(const std::vector<char>& head, std::string_view prefix) {
  return head.size() >= prefix.size() &&
         std::memcmp(head.data(), prefix.data(), prefix.size()) == 0;
}

std::vector<char> first_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> head(16);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// A flatbuffer's file identifier sits at byte 4: two letters and a schema version.
bool flatbuffer_identifier(const std::vector<char>& head, std::string_view letters) {
  const auto digit = [&](size_t i) { return head[i] >= '0' && head[i] <= '9'; };
  return head.size() >= 8 && std::memcmp(head.data() + 4, letters.data(), 2) == 0 && digit(6) &&
         digit(7);
}

OtherContent other_content_of(const std::vector<char>& head) {
  if (flatbuffer_identifier(head, "ET")) return OtherContent::kExecutorchProgram;
  if (flatbuffer_identifier(head, "BP")) return OtherContent::kBundledProgram;
  for (const char c : head) {
    if (c == '{') return OtherContent::kJson;
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
  }
  return OtherContent::kUnknown;
}

// What detect_format says of a file it recognizes but does not read.
std::string not_an_input(const std::string& path, const std::vector<char>& head) {
  const std::string identifier = head.size() >= 8 ? std::string(head.data() + 4, 4) : "";
  switch (other_content_of(head)) {
    case OtherContent::kExecutorchProgram:
      return quote_name(path) + ": an ExecuTorch program (flatbuffer " + identifier +
             "), not a dump of its tensors: run it with ETDump enabled "
             "(qnn_executor_runner --dump_intermediate_outputs) and give the .etdp it writes";
    case OtherContent::kBundledProgram:
      return quote_name(path) + ": an ExecuTorch bundled program (flatbuffer " + identifier +
             "): a program and its test inputs, not a dump of tensors: run it with ETDump "
             "enabled and give the .etdp it writes";
    case OtherContent::kJson:
      return quote_name(path) +
             ": a JSON document, not a store or a dump of tensors (encodings go to "
             "--encodings; `qnn-debug inspect` lists and lints them)";
    case OtherContent::kUnknown:
      break;
  }
  return quote_name(path) +
         ": not a qnn-debug store, an npz or npy file, an ETDump or a qnn-net-run output folder "
         "(its first bytes match none of them)";
}

// A fresh path for a converted input, in the temporary folder.
std::string temporary_store() {
  static std::atomic<int> counter{0};
  return (fs::temp_directory_path() / ("qnn-debug-input-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter++) + ".h5"))
      .string();
}

// The importer's warnings, when it succeeded.
template <typename Summary>
Result<std::vector<std::string>> warnings_of(Result<Summary> imported) {
  if (!imported.is_ok()) return imported.status();
  return std::move(imported->warnings);
}

Result<std::vector<std::string>> convert(InputFormat format, const InputSpec& spec,
                                         const std::string& out) {
  switch (format) {
    case InputFormat::kEtdump:
      return warnings_of(importers::import_etdump(etdump_import_options(spec, out)));
    case InputFormat::kQnnNetRun:
      return warnings_of(importers::import_qnn_net_run(qnn_net_run_import_options(spec, out)));
    case InputFormat::kNpz:
      return warnings_of(importers::import_npz(npz_import_options(spec, out)));
    case InputFormat::kStore:
      break;
  }
  return error(ErrorCode::kInternal, "no converter for " + std::string(format_name(format)));
}

}  // namespace

importers::EtdumpImportOptions etdump_import_options(const InputSpec& spec, std::string output) {
  importers::EtdumpImportOptions o;
  o.etdump_path = spec.path;
  o.debug_buffer_path = spec.debug_buffer;
  o.encodings_paths = spec.encodings;
  o.etrecord_path = spec.etrecord;
  o.etrecord_method = spec.etrecord_method;
  if (!spec.naming.empty()) o.naming = spec.naming;
  o.handle_map_path = spec.handle_map;
  o.output_path = std::move(output);
  return o;
}

importers::QnnNetRunImportOptions qnn_net_run_import_options(const InputSpec& spec,
                                                             std::string output) {
  importers::QnnNetRunImportOptions o;
  o.output_dir = spec.path;
  o.net_json = spec.net_json;
  o.input_list = spec.input_list;
  o.encodings_paths = spec.encodings;
  o.shapes = spec.shapes;
  if (!spec.naming.empty()) o.naming = spec.naming;
  o.handle_map_path = spec.handle_map;
  o.output_path = std::move(output);
  return o;
}

importers::NpzImportOptions npz_import_options(const InputSpec& spec, std::string output) {
  importers::NpzImportOptions o;
  o.paths = {spec.path};
  o.encodings_paths = spec.encodings;
  if (!spec.naming.empty()) o.naming = spec.naming;
  o.handle_map_path = spec.handle_map;
  o.output_path = std::move(output);
  return o;
}

std::string_view format_name(InputFormat format) {
  switch (format) {
    case InputFormat::kStore:
      return "store";
    case InputFormat::kNpz:
      return "npz";
    case InputFormat::kEtdump:
      return "etdump";
    case InputFormat::kQnnNetRun:
      return "qnn-net-run";
  }
  return "unknown";
}

Result<InputFormat> parse_format(std::string_view name) {
  for (InputFormat f :
       {InputFormat::kStore, InputFormat::kNpz, InputFormat::kEtdump, InputFormat::kQnnNetRun}) {
    if (name == format_name(f)) return f;
  }
  return error(ErrorCode::kInvalidArgument, "unknown input format " + quote_name(name) +
                                                "; expected store, npz, etdump or qnn-net-run");
}

Result<InputFormat> detect_format(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return error(ErrorCode::kNotFound, quote_name(path) + ": no such file or folder");
  }
  if (fs::is_directory(status)) return InputFormat::kQnnNetRun;
  const std::vector<char> head = first_bytes(path);
  const std::string_view hdf5(reinterpret_cast<const char*>(kHdf5Signature.data()), 8);
  if (starts_with(head, hdf5)) return InputFormat::kStore;
  if (starts_with(head, "PK\x03\x04") || starts_with(head, "PK\x05\x06") ||
      starts_with(head, "\x93NUMPY")) {
    return InputFormat::kNpz;
  }
  const std::string_view etdump_mark = "ED00";
  const auto at = [&](size_t offset) {
    return head.size() >= offset + 4 &&
           std::memcmp(head.data() + offset, etdump_mark.data(), 4) == 0;
  };
  if (at(4) || at(8)) return InputFormat::kEtdump;
  return error(ErrorCode::kCorrupt, not_an_input(path, head));
}

OtherContent other_content(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return OtherContent::kUnknown;
  return other_content_of(first_bytes(path));
}

Result<OpenedInput> OpenedInput::open(const InputSpec& spec) {
  InputFormat format = InputFormat::kStore;
  if (spec.format.empty()) {
    QD_ASSIGN_OR_RETURN(format, detect_format(spec.path));
  } else {
    QD_ASSIGN_OR_RETURN(format, parse_format(spec.format));
  }
  if (format == InputFormat::kStore) {
    QD_ASSIGN_OR_RETURN(auto store, StoreReader::open(spec.path));
    return OpenedInput(std::move(store), format, spec.path, "", {});
  }
  std::string temporary = temporary_store();
  Result<std::vector<std::string>> converted = convert(format, spec, temporary);
  if (!converted.is_ok()) {
    std::remove(temporary.c_str());
    return converted.status();
  }
  auto store = StoreReader::open(temporary);
  if (!store.is_ok()) {
    std::remove(temporary.c_str());
    return store.status();
  }
  return OpenedInput(std::move(store).value(), format, spec.path, std::move(temporary),
                     std::move(converted).value());
}

void OpenedInput::add_store_warnings() {
  for (const std::string& warning : store_->warnings()) {
    const bool converted = !temporary_.empty() && warning.starts_with(temporary_);
    warnings_.push_back(converted ? path_ + warning.substr(temporary_.size()) : warning);
  }
}

OpenedInput::OpenedInput(OpenedInput&& other) noexcept
    : store_(std::move(other.store_)),
      format_(other.format_),
      path_(std::move(other.path_)),
      temporary_(std::exchange(other.temporary_, std::string())),
      warnings_(std::move(other.warnings_)) {}

OpenedInput::~OpenedInput() {
  store_.reset();  // closed before its file goes
  if (!temporary_.empty()) std::remove(temporary_.c_str());
}

}  // namespace qd::pipeline
