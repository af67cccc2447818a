// A plain .npy file: the preamble (magic, version, the Python-dict header) and the data.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "qnn_debug/importers/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("array.npy", std::span(data, size));
  auto array = qd::fuzz::checked(qd::importers::NpyArrayReader::open_file(path));
  if (!array.is_ok()) return 0;
  // Odd-sized pieces, so element boundaries and big-endian swaps fall across reads.
  std::vector<uint8_t> piece(24);
  for (;;) {
    auto got = qd::fuzz::checked(array->read(piece));
    if (!got.is_ok() || *got == 0) return 0;
  }
}
