// The `--map` file of `qnn-debug diff` (reference name -> device name, JSON), loaded from a path.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "qnn_debug/compare/align.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("map.json", std::span(data, size));
  (void)qd::fuzz::checked(qd::compare::load_name_mapping(path));
  return 0;
}
