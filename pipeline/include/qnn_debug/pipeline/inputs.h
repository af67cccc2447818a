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
#include "qnn_debug/importers/input_format.h"

namespace qd::pipeline {

// One side of a diff: a path, its format ("" = told by content) and its options by key
// (importers/input_format.h has every format's options).
using importers::InputFormat;
using importers::InputSpec;

// "store", "npz", "etdump", "qnn-net-run".
inline std::string_view format_name(const InputFormat& format) { return format.name; }

// A store ready to compare: the input itself, or a temporary conversion of it that is removed
// when this object goes.
class OpenedInput {
 public:
  static Result<OpenedInput> open(const InputSpec& spec);
  OpenedInput(OpenedInput&& other) noexcept;
  OpenedInput& operator=(OpenedInput&&) = delete;
  ~OpenedInput();

  const StoreReader& store() const { return *store_; }
  const InputFormat& format() const { return *format_; }
  const std::string& path() const { return path_; }  // what the user gave
  // What the conversion ignored or doubted (the importer's warnings), then everything the
  // store's reader warned about (StoreReader::warnings: torn rows of a killed writer...). `diff`
  // puts them in its report's warnings.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  OpenedInput(std::unique_ptr<StoreReader> store, const InputFormat* format, std::string path,
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
  const InputFormat* format_;
  std::string path_;
  std::string temporary_;  // "" when the input is a store
  std::vector<std::string> warnings_;
};

}  // namespace qd::pipeline
