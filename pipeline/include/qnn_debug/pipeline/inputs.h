// The inputs `qnn-debug diff` accepts: a store, or any dump `qnn-debug capture` reads, recognized
// by content (docs/formats.md). A dump is converted into a temporary store first, streaming, so
// a whole qnn-net-run tree or debug buffer is never held in memory.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/importers/etdump_import.h"
#include "qnn_debug/importers/npz_import.h"
#include "qnn_debug/importers/qnn_net_run_import.h"

namespace qd::pipeline {

enum class InputFormat { kStore, kNpz, kEtdump, kQnnNetRun };

// "store", "npz", "etdump", "qnn-net-run".
std::string_view format_name(InputFormat format);
// kInvalidArgument listing the names for anything else.
Result<InputFormat> parse_format(std::string_view name);

// A folder is a qnn-net-run output; a file is told by its first bytes: HDF5's signature (a
// store), a zip or NumPy's magic (npz, npy), ETDump's "ED00". kNotFound for a missing path,
// kCorrupt for anything else, naming the path and what was looked for.
Result<InputFormat> detect_format(const std::string& path);

// Files no command reads as tensors but whose first bytes say what they are, so a refusal can
// name them: a JSON document (encodings, a net JSON, a report), an ExecuTorch program (.pte:
// flatbuffer identifier "ET" and two digits at byte 4, "ET12" today) or bundled program ("BP"
// and two digits, "BP08" today). detect_format's error for such a file says which it is.
enum class OtherContent { kUnknown, kJson, kExecutorchProgram, kBundledProgram };
OtherContent other_content(const std::string& path);

// One side of a diff and what converting it needs; options a format does not use are ignored.
struct InputSpec {
  std::string path;
  std::string format;  // "" = detect_format
  std::string naming;  // "" = the format's own default
  std::string handle_map;
  std::vector<std::string> encodings;  // etdump, qnn-net-run, npz
  std::string debug_buffer;            // etdump
  std::string etrecord;                // etdump
  std::string etrecord_method;         // etdump: "" = the ETRecord's only method
  std::string net_json;                // qnn-net-run
  std::string input_list;              // qnn-net-run
  std::vector<std::string> shapes;     // qnn-net-run
};

// The importer options that convert `spec` into the store `output`: the one place where a
// spec's fields meet each importer's (diff's conversions and the capture commands share it).
importers::EtdumpImportOptions etdump_import_options(const InputSpec& spec, std::string output);
importers::QnnNetRunImportOptions qnn_net_run_import_options(const InputSpec& spec,
                                                             std::string output);
importers::NpzImportOptions npz_import_options(const InputSpec& spec, std::string output);

// A store ready to compare: the input itself, or a temporary conversion of it that is removed
// when this object goes.
class OpenedInput {
 public:
  static Result<OpenedInput> open(const InputSpec& spec);
  OpenedInput(OpenedInput&& other) noexcept;
  OpenedInput& operator=(OpenedInput&&) = delete;
  ~OpenedInput();

  const StoreReader& store() const { return *store_; }
  InputFormat format() const { return format_; }
  const std::string& path() const { return path_; }  // what the user gave
  // What the conversion ignored or doubted (the importer's warnings), then everything the
  // store's reader warned about (StoreReader::warnings: torn rows of a killed writer...). `diff`
  // puts them in its report's warnings.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  OpenedInput(std::unique_ptr<StoreReader> store, InputFormat format, std::string path,
              std::string temporary, std::vector<std::string> warnings)
      : store_(std::move(store)),
        format_(format),
        path_(std::move(path)),
        temporary_(std::move(temporary)),
        warnings_(std::move(warnings)) {
    add_store_warnings();
  }
  // The store's warnings, a temporary conversion's named after the input the user gave.
  void add_store_warnings();
  std::unique_ptr<StoreReader> store_;
  InputFormat format_;
  std::string path_;
  std::string temporary_;  // "" when the input is a store
  std::vector<std::string> warnings_;
};

}  // namespace qd::pipeline
