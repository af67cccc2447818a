// The naming module's handle-map file (tensor name -> debug handle or list), read by its own
// strict JSON parser (naming/src/handle_map.h): parse, sanitize the keys, look every key up.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "handle_map.h"
#include "qnn_debug/naming/naming.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using qd::naming::HandleMap;
  auto map = qd::fuzz::checked(HandleMap::parse(qd::fuzz::as_text(data, size), "fuzz.json"));
  if (!map.is_ok()) return 0;
  auto sanitized = qd::fuzz::checked(map->with_sanitized_keys());
  (void)map->find("aten_relu_default");
  if (sanitized.is_ok()) (void)sanitized->find("aten_relu_default");
  // The loader a preset uses, from a file: the same parse plus reading and sanitizing.
  const std::string path = qd::fuzz::write_file("handles.json", std::span(data, size));
  (void)qd::fuzz::checked(qd::naming::NameParser::create("qnn-sanitized", "", path));
  return 0;
}
