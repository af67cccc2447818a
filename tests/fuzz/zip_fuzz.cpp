// A zip archive (importers/src/zip_archive.h): the end records and central directory at open,
// then every member read whole and streamed, so the local headers, sizes, deflate streams and
// CRCs are all checked.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "zip_archive.h"

namespace {

using qd::importers::ZipArchive;
using qd::importers::ZipEntry;

// Whole members are capped low: the fuzzer should explore formats, not allocate gigabytes.
constexpr uint64_t kMaxWholeMember = uint64_t{1} << 20;

void stream(const ZipArchive& zip, const ZipEntry& entry) {
  auto reader = qd::fuzz::checked(zip.open_member(entry));
  if (!reader.is_ok()) return;
  std::vector<uint8_t> piece(1000);
  for (;;) {
    auto got = qd::fuzz::checked(reader->read(piece));
    if (!got.is_ok() || *got == 0) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("archive.zip", std::span(data, size));
  auto zip = qd::fuzz::checked(ZipArchive::open(path));
  if (!zip.is_ok()) return 0;
  for (const ZipEntry& entry : zip->entries()) {
    (void)zip->find(entry.name);
    (void)qd::fuzz::checked(zip->read_all(entry, kMaxWholeMember));
    stream(*zip, entry);
  }
  return 0;
}
