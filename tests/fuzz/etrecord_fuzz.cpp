// An ExecuTorch ETRecord (a zip with JSON members debug_handle_map and delegate_map): loaded for
// the default and for a named method, then asked for handles as the ETDump importer asks.
#include <cstddef>
#include <cstdint>
#include <span>

#include "etrecord.h"
#include "fuzz_util.h"

namespace {

void query(const qd::importers::EtrecordHandles& handles) {
  for (int32_t id = -1; id < 8; ++id) {
    (void)handles.instruction(id);
    (void)handles.delegate(id, "aten_relu_default@0");
    (void)handles.delegate(id, "0");
  }
  (void)handles.delegate_identifier_count();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("etrecord.bin", std::span(data, size));
  for (const char* method : {"", "forward"}) {
    auto handles = qd::fuzz::checked(qd::importers::EtrecordHandles::load(path, method));
    if (handles.is_ok()) query(*handles);
  }
  return 0;
}
