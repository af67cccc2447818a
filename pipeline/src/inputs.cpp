#include "qnn_debug/pipeline/inputs.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

namespace qd::pipeline {
namespace {

namespace fs = std::filesystem;

// A fresh path for a converted input, in the temporary folder.
std::string temporary_store() {
  static std::atomic<int> counter{0};
  return (fs::temp_directory_path() / ("qnn-debug-input-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter++) + ".h5"))
      .string();
}

Result<const InputFormat*> format_of(const InputSpec& spec) {
  return spec.format.empty() ? importers::detect_format(spec.path)
                             : importers::parse_format(spec.format);
}

}  // namespace

Result<OpenedInput> OpenedInput::open(const InputSpec& spec) {
  QD_ASSIGN_OR_RETURN(const InputFormat* format, format_of(spec));
  if (!format->import) {  // a store: read as it is
    QD_ASSIGN_OR_RETURN(auto store, StoreReader::open(spec.path));
    return OpenedInput(std::move(store), format, spec.path, "", {});
  }
  std::string temporary = temporary_store();
  Result<importers::ImportOutcome> converted = format->import(spec, temporary);
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
                     std::move(converted->warnings));
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
