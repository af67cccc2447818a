// Shared by the harnesses: scratch files for the APIs that take a path, and a bounded reader loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"

namespace qd::fuzz {

// kInternal means "a case the code did not expect" (an exception caught at the API boundary, a
// zlib state thought impossible): for any input it is a bug, so it stops the run like a crash.
// With QD_FUZZ_VERBOSE=1 in the environment every error is printed: to see why a seed is refused.
void expect_no_internal_error(const Status& status);
template <typename T>
Result<T> checked(Result<T> result) {
  expect_no_internal_error(result.status());
  return result;
}

// A folder of this process's own under $QD_FUZZ_SCRATCH (scripts/fuzz.sh sets it and removes it)
// or /dev/shm: tmpfs, so a million runs never touch a disk. Created on first use, reused by every
// run, removed at a normal exit. Several fuzzing processes (-jobs, -fork) never share one.
const std::string& scratch_dir();

// Writes `bytes` to `name` in the scratch folder, replacing what a previous run left; returns the
// full path. Aborts if the file cannot be written: a harness that silently fuzzed nothing would
// look like a clean run.
std::string write_file(std::string_view name, std::span<const uint8_t> bytes);
std::string write_file(std::string_view name, std::string_view text);

// An importer that reports success has written a whole store: it must open and every tensor must
// read back with its checksum. Aborts otherwise.
void expect_readable_store(const std::string& path);

// The input as text, for the parsers that take a string_view.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Returns the part of `input` before the first `separator` (all of it when there is none) and
// leaves `input` holding what follows the separator. Lets one input carry several text fields
// without a binary format the fuzzer would have to learn.
std::string_view take_until(std::string_view& input, char separator);

}  // namespace qd::fuzz
