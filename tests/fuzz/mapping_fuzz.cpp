// The `--map` file of `qnn-debug diff` (reference name -> device name, JSON): its text, parsed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "qnn_debug/compare/align.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)qd::fuzz::checked(qd::compare::parse_name_mapping(text, "map.json"));
  return 0;
}
