// `qnn-debug capture etdump` end to end: an ETDump and its debug buffer into a store, so the
// dtypes, sizes, strides and offsets a dump states meet the code that trusts them.
// Input: a 4-byte little-endian length N, then N bytes of ETDump, then the debug buffer (the
// seeds are real pairs from qd-fixture-gen; see corpus/README.md).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "etdump_import.h"
#include "fuzz_util.h"
#include "qnn_debug/etdump/store_reader.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  qd::keep_hdf5_quiet_at_exit();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t etdump_size = 0;
  std::memcpy(&etdump_size, data, 4);
  const std::span<const uint8_t> rest(data + 4, size - 4);
  const size_t split = std::min<size_t>(etdump_size, rest.size());
  qd::importers::EtdumpImportOptions options;
  options.etdump_path = qd::fuzz::write_file("dump.etdp", rest.first(split));
  options.debug_buffer_path = qd::fuzz::write_file("debug_output.bin", rest.subspan(split));
  options.output_path = qd::fuzz::scratch_dir() + "/out.h5";
  if (qd::fuzz::checked(qd::importers::import_etdump(options)).is_ok()) {
    qd::fuzz::expect_readable_store(options.output_path);
  }
  return 0;
}
