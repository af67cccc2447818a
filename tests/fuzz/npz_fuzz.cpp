// An .npz archive (zip of .npy members, stored or deflated): open, then stream every array.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "qnn_debug/importers/npy.h"

namespace {

// Reads an array to its end in small pieces, as the importer streams it. The piece is a whole
// number of elements of every dtype (8 bytes at most).
void drain(qd::importers::NpyArrayReader& reader) {
  std::vector<uint8_t> piece(4096);
  for (;;) {
    auto got = qd::fuzz::checked(reader.read(piece));
    if (!got.is_ok() || *got == 0) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("arrays.npz", std::span(data, size));
  auto npz = qd::fuzz::checked(qd::importers::NpzReader::open(path));
  if (!npz.is_ok()) return 0;
  for (size_t i = 0; i < npz->arrays().size(); ++i) {
    auto array = qd::fuzz::checked(npz->open_array(i));
    if (array.is_ok()) drain(*array);
  }
  return 0;
}
