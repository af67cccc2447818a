#include "fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "qnn_debug/etdump/store_reader.h"

namespace qd::fuzz {
namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what.c_str());
  std::abort();
}

void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
}

std::string make_scratch_dir() {
  const char* base = std::getenv("QD_FUZZ_SCRATCH");
  const std::filesystem::path dir = std::filesystem::path(base != nullptr ? base : "/dev/shm") /
                                    ("qd-fuzz-" + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) die("cannot create " + dir.string() + ": " + ec.message());
  return dir.string();
}

}  // namespace

void expect_no_internal_error(const Status& status) {
  static const bool verbose = std::getenv("QD_FUZZ_VERBOSE") != nullptr;
  if (verbose && !status.is_ok()) std::fprintf(stderr, "error: %s\n", status.message().c_str());
  if (status.code() != ErrorCode::kInternal) return;
  std::fprintf(stderr, "internal error for this input: %s\n", status.message().c_str());
  std::abort();
}

void expect_readable_store(const std::string& path) {
  auto store = StoreReader::open(path);
  if (!store.is_ok()) die("an imported store does not open: " + store.status().message());
  const Status read = (*store)->for_each_tensor(
      [&](const TensorEntry& tensor) { return (*store)->read_tensor(tensor).status(); });
  if (!read.is_ok()) die("an imported tensor does not read: " + read.message());
}

const std::string& scratch_dir() {
  // Never destroyed: the exit handler that removes the folder runs after static destructors.
  static const std::string* const dir = [] {
    const auto* made = new std::string(make_scratch_dir());
    std::atexit(remove_scratch);
    return made;
  }();
  return *dir;
}

std::string write_file(std::string_view name, std::span<const uint8_t> bytes) {
  return write_file(name,
                    std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string write_file(std::string_view name, std::string_view text) {
  const std::string path = scratch_dir() + "/" + std::string(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) die("cannot write " + path);  // a harness fuzzing nothing would look clean
  return path;
}

std::string_view take_until(std::string_view& input, char separator) {
  const size_t at = input.find(separator);
  const std::string_view head = input.substr(0, at);
  input.remove_prefix(at == std::string_view::npos ? input.size() : at + 1);
  return head;
}

}  // namespace qd::fuzz

// LeakSanitizer's built-in suppressions. libhdf5 1.10 (Debian 12) leaks the object header it
// was loading into its metadata cache when the header turns out damaged (H5Dopen2 on a corrupt
// store): memory the library lost track of, that no caller can free. Only leaks allocated under
// the cache's load are suppressed, so a buffer HDF5 hands to our code (a variable-length string)
// and our code fails to free is still reported. libhdf5 has no frame pointers: the harnesses that
// read stores unwind allocations the slow way (store_fuzz.cpp), or no frame would name the cache.
extern "C" const char* __lsan_default_suppressions() { return "leak:H5C_protect\n"; }
