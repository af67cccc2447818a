// The zip reader against archives written by Python's zipfile (an independent writer), the real
// ETRecord published by ExecuTorch, and damaged copies of them.
#include "zip_archive.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/files.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store.h"

using qd::testing::IsOk;

namespace qd::importers {
namespace {

using qd::testing::TempDir;
using Bytes = std::vector<uint8_t>;
using testing::write_bytes;

// Outside the repository (tests read it in place): <repo>/../shared/realdata/executorch.
const std::filesystem::path kEtRecord = std::filesystem::path(__FILE__).parent_path() /
                                        "../../../shared/realdata/executorch/etrecord.bin";

Bytes text_bytes(std::string_view text) { return Bytes(text.begin(), text.end()); }

bool contains(const Bytes& bytes, std::string_view wanted) {
  return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()).find(wanted) !=
         std::string_view::npos;
}

// Bytes from a small alphabet: deflate shrinks them to about half, so a large member still has
// many 64 KiB input buffers' worth of compressed data.
Bytes pattern_bytes(size_t size, uint32_t seed) {
  Bytes bytes(size);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>('a' + rng() % 16);
  return bytes;
}

uint16_t get_u16(const Bytes& b, size_t at) {
  return static_cast<uint16_t>(b[at] | b[at + 1] << 8);
}
uint32_t get_u32(const Bytes& b, size_t at) {
  return get_u16(b, at) | static_cast<uint32_t>(get_u16(b, at + 2)) << 16;
}
void put_u16(Bytes& b, size_t at, uint16_t v) {
  for (int i = 0; i < 2; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u32(Bytes& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(Bytes& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Offset of the central directory header naming `name` (found by scanning, independently of the
// reader under test); fails the test if absent.
size_t central_header(const Bytes& zip, const std::string& name) {
  for (size_t at = 0; at + 46 + name.size() <= zip.size(); ++at) {
    if (get_u32(zip, at) == 0x02014b50 && get_u16(zip, at + 28) == name.size() &&
        std::memcmp(&zip[at + 46], name.data(), name.size()) == 0) {
      return at;
    }
  }
  ADD_FAILURE() << "no central header for " << name;
  return 0;
}
size_t local_header(const Bytes& zip, const std::string& name) {
  return get_u32(zip, central_header(zip, name) + 42);
}
size_t member_data(const Bytes& zip, const std::string& name) {
  const size_t local = local_header(zip, name);
  return local + 30 + get_u16(zip, local + 26) + get_u16(zip, local + 28);
}
size_t end_record(const Bytes& zip) {
  for (size_t at = zip.size() - 22 + 1; at-- > 0;) {
    if (get_u32(zip, at) == 0x06054b50) return at;
  }
  ADD_FAILURE() << "no end record";
  return 0;
}

// `status` is kCorrupt, its message starts with the quoted path and holds every fragment.
::testing::AssertionResult is_corrupt(const Status& status, const std::string& path,
                                      std::initializer_list<std::string> fragments) {
  if (status.code() != ErrorCode::kCorrupt) {
    return ::testing::AssertionFailure()
           << "code " << static_cast<int>(status.code()) << ": " << status.message();
  }
  if (!status.message().starts_with(quote_name(path) + ": ")) {
    return ::testing::AssertionFailure()
           << "message does not start with the path: " << status.message();
  }
  for (const std::string& fragment : fragments) {
    if (status.message().find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure() << "no \"" << fragment << "\" in: " << status.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// Every member's bytes through the streaming reader, pieces of `piece` bytes.
Result<Bytes> stream_member(const ZipArchive& zip, const ZipEntry& entry, size_t piece) {
  QD_ASSIGN_OR_RETURN(ZipMemberReader reader, zip.open_member(entry));
  Bytes all, buffer(piece);
  while (true) {
    QD_ASSIGN_OR_RETURN(const size_t count, reader.read(buffer));
    if (count == 0) break;
    all.insert(all.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(count));
  }
  return all;
}

class ZipArchiveTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  // Runs `body` under Python with `zipfile` imported and `d` the temporary directory.
  void python(const std::string& body) {
    const std::string script = file("make_zip.py");
    std::ofstream(script) << "import io, os, sys, warnings, zipfile\n"
                             "warnings.simplefilter('ignore')\n"
                             "d = sys.argv[1]\n"
                          << body;
    const std::string command =
        std::string(QD_TEST_PYTHON) + " " + script + " " + dir_.path().string();
    ASSERT_EQ(std::system(command.c_str()), 0) << body;
  }

  // sample.zip: a stored, a deflated and an empty member, in that order, contents kept here.
  void make_sample(size_t deflated_size = 20000) {
    stored_ = pattern_bytes(3000, 1);
    deflated_ = pattern_bytes(deflated_size, 2);
    write_bytes(file("stored.src"), stored_);
    write_bytes(file("deflated.src"), deflated_);
    python(R"(
with zipfile.ZipFile(os.path.join(d, 'sample.zip'), 'w') as z:
    z.write(os.path.join(d, 'stored.src'), 'stored_member.bin', zipfile.ZIP_STORED)
    z.write(os.path.join(d, 'deflated.src'), 'deflated_member.bin', zipfile.ZIP_DEFLATED)
    z.writestr('empty_member.txt', b'')
)");
    sample_ = file("sample.zip");
  }

  // big.zip: 'big.bin', stored, 4 GiB of zeros then "the end" (kBigSize bytes), then
  // 'after.txt'. The zero megabytes become holes of a sparse file, so it takes no disk space; the
  // second member lies past 4 GiB, so its offset, the central directory's offset and the end
  // record need ZIP64 too.
  void make_big_archive() {
    python(R"(
zero = bytes(1 << 20)
class Sparse(io.RawIOBase):
    def __init__(self, f): self.f = f
    def writable(self): return True
    def seekable(self): return True
    def write(self, b):
        if b is zero:
            self.f.seek(len(b), 1)
            return len(b)
        return self.f.write(b)
    def seek(self, *args): return self.f.seek(*args)
    def tell(self): return self.f.tell()
    def flush(self): self.f.flush()
with open(os.path.join(d, 'big.zip'), 'wb') as f:
    with zipfile.ZipFile(Sparse(f), 'w') as z:
        with z.open('big.bin', 'w', force_zip64=True) as m:
            for _ in range(4096): m.write(zero)
            m.write(b'the end')
        z.writestr('after.txt', b'after the big one')
    f.truncate()
)");
  }

  // Opens `path`, failing the test on error.
  ZipArchive open_ok(const std::string& path) {
    auto zip = ZipArchive::open(path);
    EXPECT_THAT(zip, IsOk());
    return std::move(zip).value();
  }

  // A copy of `path` with `patch` applied, at a new path.
  template <typename Patch>
  std::string damaged(const std::string& path, Patch patch) {
    Bytes bytes = qd::testing::read_bytes(path);
    patch(bytes);
    const std::string copy = file("damaged_" + std::to_string(++damage_count_) + ".zip");
    write_bytes(copy, bytes);
    return copy;
  }

  // The error of reading member `name` of the archive at `path`, which must open.
  Status read_error(const std::string& path, const std::string& name) {
    auto zip = ZipArchive::open(path);
    if (!zip.is_ok()) return zip.status();
    const ZipEntry* entry = zip->find(name);
    if (entry == nullptr) return error(ErrorCode::kInternal, "test: no member " + name);
    auto bytes = zip->read_all(*entry, 1 << 20);
    return bytes.is_ok() ? Status::ok() : bytes.status();
  }

  TempDir dir_;
  std::string sample_;
  Bytes stored_, deflated_;
  int damage_count_ = 0;
};

// --- archives written by Python ----------------------------------------------------------------

TEST_F(ZipArchiveTest, ReadsStoredDeflatedAndEmptyMembersAsPythonWroteThem) {
  make_sample();
  const ZipArchive zip = open_ok(sample_);
  EXPECT_EQ(zip.path(), sample_);
  ASSERT_EQ(zip.entries().size(), 3u);
  const ZipEntry& stored = zip.entries()[0];
  const ZipEntry& deflated = zip.entries()[1];
  const ZipEntry& empty = zip.entries()[2];
  EXPECT_EQ(stored.name, "stored_member.bin");
  EXPECT_EQ(stored.method, 0);
  EXPECT_EQ(stored.uncompressed_size, stored_.size());
  EXPECT_EQ(stored.compressed_size, stored_.size());
  EXPECT_EQ(stored.local_header_offset, 0u);
  EXPECT_EQ(deflated.name, "deflated_member.bin");
  EXPECT_EQ(deflated.method, 8);
  EXPECT_EQ(deflated.uncompressed_size, deflated_.size());
  EXPECT_LT(deflated.compressed_size, deflated_.size());
  EXPECT_GT(deflated.local_header_offset, stored.local_header_offset + stored.compressed_size);
  EXPECT_EQ(empty.name, "empty_member.txt");
  EXPECT_EQ(empty.uncompressed_size, 0u);
  EXPECT_EQ(empty.crc32, 0u);

  auto stored_bytes = zip.read_all(stored, 1 << 20);
  ASSERT_THAT(stored_bytes, IsOk());
  EXPECT_EQ(*stored_bytes, stored_);
  auto deflated_bytes = zip.read_all(deflated, 1 << 20);
  ASSERT_THAT(deflated_bytes, IsOk());
  EXPECT_EQ(*deflated_bytes, deflated_);
  auto empty_bytes = zip.read_all(empty, 0);
  ASSERT_THAT(empty_bytes, IsOk());
  EXPECT_TRUE(empty_bytes->empty());
}

TEST_F(ZipArchiveTest, EmptyDeflatedMemberAndEmptyArchive) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'e.zip'), 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('nothing', b'')
zipfile.ZipFile(os.path.join(d, 'none.zip'), 'w').close()
)");
  const ZipArchive zip = open_ok(file("e.zip"));
  ASSERT_EQ(zip.entries().size(), 1u);
  EXPECT_EQ(zip.entries()[0].method, 8);
  auto bytes = stream_member(zip, zip.entries()[0], 16);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_TRUE(bytes->empty());

  const ZipArchive none = open_ok(file("none.zip"));
  EXPECT_TRUE(none.entries().empty());
  EXPECT_EQ(none.find(""), nullptr);
}

TEST_F(ZipArchiveTest, FindsExactNamesAndTheLastOfDuplicatesLikePython) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'names.zip'), 'w') as z:
    z.writestr('delegate_map', b'first')
    z.writestr('delegate_map_extra', b'longer name')
    z.writestr('a/b', b'nested')
    z.writestr('delegate_map', b'second')
)");
  const ZipArchive zip = open_ok(file("names.zip"));
  ASSERT_EQ(zip.entries().size(), 4u);
  EXPECT_EQ(zip.find("delegate"), nullptr);
  EXPECT_EQ(zip.find("delegate_map_"), nullptr);
  EXPECT_EQ(zip.find("A/B"), nullptr);
  ASSERT_NE(zip.find("a/b"), nullptr);
  EXPECT_EQ(zip.find("a/b"), &zip.entries()[2]);
  ASSERT_NE(zip.find("delegate_map_extra"), nullptr);
  EXPECT_EQ(zip.find("delegate_map_extra")->name, "delegate_map_extra");
  const ZipEntry* duplicate = zip.find("delegate_map");
  ASSERT_EQ(duplicate, &zip.entries()[3]);
  auto bytes = zip.read_all(*duplicate, 100);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_EQ(*bytes, text_bytes("second"));
}

TEST_F(ZipArchiveTest, NamesWithOddBytesAreKeptRawAndQuotedInMessages) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'odd.zip'), 'w') as z:
    z.writestr('tab\there \x01 caf\u00e9\x7f \\ \'q\'.bin', b'odd payload')
)");
  const std::string odd_name = "tab\there \x01 caf\xc3\xa9\x7f \\ 'q'.bin";
  const ZipArchive zip = open_ok(file("odd.zip"));
  ASSERT_EQ(zip.entries().size(), 1u);
  EXPECT_EQ(zip.entries()[0].name, odd_name);
  ASSERT_NE(zip.find(odd_name), nullptr);
  auto bytes = zip.read_all(*zip.find(odd_name), 100);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_EQ(*bytes, text_bytes("odd payload"));

  const std::string bad_crc = damaged(file("odd.zip"), [&](Bytes& b) {
    const size_t header = central_header(b, odd_name);
    put_u32(b, header + 16, get_u32(b, header + 16) ^ 1);
  });
  const Status status = read_error(bad_crc, odd_name);
  EXPECT_TRUE(is_corrupt(status, bad_crc, {"CRC mismatch", quote_name(odd_name)}));
  EXPECT_NE(status.message().find("\\x01"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find('\x01'), std::string::npos) << "raw control byte in message";
  EXPECT_EQ(status.message().find('\t'), std::string::npos) << "raw tab in message";
}

TEST_F(ZipArchiveTest, ArchiveCommentsEvenOnesHoldingTheEndSignature) {
  // The end record is found by its comment ending exactly at the end of the file, not by the last
  // signature bytes: these comments contain fake end records.
  python(R"(
fake_end = b'PK\x05\x06' + bytes(16) + b'\x00\x00'
for name, comment in (('short.zip', b'made by a test ' + fake_end + b' and more'),
                      ('max.zip', (fake_end + b'x' * 1000) * 60 + b'y' * (65535 - 60 * 1022))):
    with zipfile.ZipFile(os.path.join(d, name), 'w') as z:
        z.writestr('member.txt', b'commented')
        z.comment = comment
)");
  for (const char* name : {"short.zip", "max.zip"}) {
    const ZipArchive zip = open_ok(file(name));
    ASSERT_EQ(zip.entries().size(), 1u) << name;
    auto bytes = zip.read_all(zip.entries()[0], 100);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(*bytes, text_bytes("commented"));
  }
  const Bytes max = qd::testing::read_bytes(file("max.zip"));
  EXPECT_EQ(get_u16(max, max.size() - 65535 - 2), 65535) << "the comment is not at its maximum";
}

TEST_F(ZipArchiveTest, Zip64RecordsAndExtraFieldsEverywhere) {
  // With Python's limits lowered to 0, every size, offset and count that can go through ZIP64
  // does: ZIP64 end record and locator, extra fields holding sizes and offsets (only those that
  // are saturated: the empty member keeps its 32-bit sizes).
  python(R"(
zipfile.ZIP64_LIMIT = 0
zipfile.ZIP_FILECOUNT_LIMIT = 0
with zipfile.ZipFile(os.path.join(d, 'z64.zip'), 'w') as z:
    z.writestr('deflated', b'hello ' * 500, compress_type=zipfile.ZIP_DEFLATED)
    z.writestr('empty', b'')
    z.writestr('stored', b'xyz')
)");
  const Bytes raw = qd::testing::read_bytes(file("z64.zip"));
  ASSERT_TRUE(contains(raw, "PK\x06\x06")) << "Python wrote no ZIP64 end record";
  ASSERT_TRUE(contains(raw, "PK\x06\x07")) << "Python wrote no ZIP64 end record locator";
  const ZipArchive zip = open_ok(file("z64.zip"));
  ASSERT_EQ(zip.entries().size(), 3u);
  // The empty member's offset is in the ZIP64 extra field only.
  EXPECT_EQ(get_u32(raw, central_header(raw, "empty") + 42), 0xFFFFFFFFu);
  const uint64_t empty_offset = zip.entries()[1].local_header_offset;
  ASSERT_LT(empty_offset + 35, raw.size());
  EXPECT_EQ(get_u32(raw, empty_offset), 0x04034b50u);
  EXPECT_EQ(std::string(raw.begin() + static_cast<std::ptrdiff_t>(empty_offset) + 30,
                        raw.begin() + static_cast<std::ptrdiff_t>(empty_offset) + 35),
            "empty");
  const std::string hello = [] {
    std::string text;
    for (int i = 0; i < 500; ++i) text += "hello ";
    return text;
  }();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"deflated", hello}, {"empty", ""}, {"stored", "xyz"}};
  for (const auto& [name, content] : expected) {
    ASSERT_NE(zip.find(name), nullptr) << name;
    auto bytes = zip.read_all(*zip.find(name), 1 << 20);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(*bytes, text_bytes(content)) << name;
  }
}

TEST_F(ZipArchiveTest, LocalHeaderExtraDiffersFromTheCentralOne) {
  // force_zip64 puts a ZIP64 extra field in the local header only; the data starts after the
  // local header's own extra field.
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'forced.zip'), 'w', zipfile.ZIP_DEFLATED) as z:
    with z.open('forced', 'w', force_zip64=True) as m:
        m.write(b'forced zip64 ' * 100)
    with z.open('plain', 'w') as m:
        m.write(b'plain')
)");
  const Bytes raw = qd::testing::read_bytes(file("forced.zip"));
  const size_t local = local_header(raw, "forced");
  ASSERT_EQ(get_u16(raw, local + 28), 20) << "Python wrote no local ZIP64 extra";
  ASSERT_EQ(get_u16(raw, central_header(raw, "forced") + 30), 0);
  const ZipArchive zip = open_ok(file("forced.zip"));
  auto bytes = zip.read_all(*zip.find("forced"), 1 << 20);
  ASSERT_THAT(bytes, IsOk());
  std::string text;
  for (int i = 0; i < 100; ++i) text += "forced zip64 ";
  EXPECT_EQ(*bytes, text_bytes(text));
  auto plain = zip.read_all(*zip.find("plain"), 100);
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ(*plain, text_bytes("plain"));
}

TEST_F(ZipArchiveTest, MembersWrittenWithDataDescriptors) {
  // On a stream that cannot seek, zipfile writes sizes and CRC after the data (flag bit 3) and
  // zeros in the local header; the central directory has the real values.
  python(R"(
class NoSeek:
    def __init__(self, f): self.f = f
    def write(self, b): return self.f.write(b)
    def flush(self): self.f.flush()
with open(os.path.join(d, 'descriptor.zip'), 'wb') as f:
    with zipfile.ZipFile(NoSeek(f), 'w', zipfile.ZIP_DEFLATED) as z:
        with z.open('deflated', 'w') as m:
            m.write(b'0123456789' * 5000)
        with z.open('zip64', 'w', force_zip64=True) as m:
            m.write(b'z' * 70000)
)");
  const ZipArchive zip = open_ok(file("descriptor.zip"));
  ASSERT_EQ(zip.entries().size(), 2u);
  std::string digits;
  for (int i = 0; i < 5000; ++i) digits += "0123456789";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"deflated", digits}, {"zip64", std::string(70000, 'z')}};
  for (const auto& [name, content] : expected) {
    const ZipEntry* entry = zip.find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->flags & 8, 8) << name;
    EXPECT_EQ(entry->method, 8) << name;
    auto bytes = stream_member(zip, *entry, 1000);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(*bytes, text_bytes(content)) << name;
  }
}

TEST_F(ZipArchiveTest, StoredMemberWithDataDescriptor) {
  python(R"(
class NoSeek:
    def __init__(self, f): self.f = f
    def write(self, b): return self.f.write(b)
    def flush(self): self.f.flush()
with open(os.path.join(d, 'descriptor.zip'), 'wb') as f:
    with zipfile.ZipFile(NoSeek(f), 'w') as z:
        with z.open('stored', 'w') as m:
            m.write(b'abc' * 1000)
)");
  const Bytes raw = qd::testing::read_bytes(file("descriptor.zip"));
  EXPECT_EQ(get_u32(raw, local_header(raw, "stored") + 18), 0u) << "local size not zero";
  const ZipArchive zip = open_ok(file("descriptor.zip"));
  ASSERT_EQ(zip.entries().size(), 1u);
  EXPECT_EQ(zip.entries()[0].flags & 8, 8);
  EXPECT_EQ(zip.entries()[0].method, 0);
  auto bytes = zip.read_all(zip.entries()[0], 3000);
  ASSERT_THAT(bytes, IsOk());
  std::string abc;
  for (int i = 0; i < 1000; ++i) abc += "abc";
  EXPECT_EQ(*bytes, text_bytes(abc));
}

TEST_F(ZipArchiveTest, StreamsALargeDeflatedMemberInPiecesOfAnySize) {
  make_sample(400 << 10);
  const ZipArchive zip = open_ok(sample_);
  const ZipEntry* entry = zip.find("deflated_member.bin");
  ASSERT_NE(entry, nullptr);
  ASSERT_GT(entry->compressed_size, 3u * (64 << 10)) << "too compressible to refill the input";
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, size_t{65537}, size_t{1} << 20}) {
    auto reader = zip.open_member(*entry);
    ASSERT_THAT(reader, IsOk());
    Bytes buffer(piece);
    size_t position = 0;
    while (true) {
      EXPECT_EQ(reader->remaining(), deflated_.size() - position);
      auto count = reader->read(buffer);
      ASSERT_THAT(count, IsOk()) << "piece " << piece;
      if (*count == 0) break;
      // Full pieces until the end: the reader fills the caller's buffer.
      ASSERT_EQ(*count, std::min(piece, deflated_.size() - position));
      ASSERT_TRUE(std::equal(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*count),
                             deflated_.begin() + static_cast<std::ptrdiff_t>(position)))
          << "piece " << piece << " at " << position;
      position += *count;
    }
    EXPECT_EQ(position, deflated_.size()) << "piece " << piece;
    auto again = reader->read(buffer);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(*again, 0u);
  }
}

constexpr uint64_t kBigSize = (uint64_t{1} << 32) + 7;

TEST_F(ZipArchiveTest, Zip64MemberLargerThan4GiB) {
  make_big_archive();
  const ZipArchive zip = open_ok(file("big.zip"));
  ASSERT_EQ(zip.entries().size(), 2u);
  const ZipEntry& big = zip.entries()[0];
  EXPECT_EQ(big.uncompressed_size, kBigSize);
  EXPECT_EQ(big.compressed_size, kBigSize);
  EXPECT_GT(zip.entries()[1].local_header_offset, kBigSize);
  auto after = zip.read_all(zip.entries()[1], 100);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(*after, text_bytes("after the big one"));
  EXPECT_TRUE(is_corrupt(zip.read_all(big, uint64_t{1} << 30).status(), file("big.zip"),
                         {"member 'big.bin' is 4294967303 bytes", "more than the 1073741824"}));
  // The start of the member (reading all of it takes seconds: see the disabled test below).
  auto reader = zip.open_member(big);
  ASSERT_THAT(reader, IsOk());
  Bytes buffer(16 << 20);
  for (int i = 0; i < 4; ++i) {
    auto count = reader->read(buffer);
    ASSERT_THAT(count, IsOk());
    ASSERT_EQ(*count, buffer.size());
    EXPECT_TRUE(std::all_of(buffer.begin(), buffer.end(), [](uint8_t b) { return b == 0; }));
  }
  EXPECT_EQ(reader->remaining(), kBigSize - 4 * buffer.size());
}

// Streams all 4 GiB of the member, CRC included: several seconds and 4 GiB of page cache for the
// file's holes, so run by hand (--gtest_also_run_disabled_tests).
TEST_F(ZipArchiveTest, DISABLED_StreamsAllOfAMemberLargerThan4GiB) {
  make_big_archive();
  const ZipArchive zip = open_ok(file("big.zip"));
  auto reader = zip.open_member(zip.entries()[0]);
  ASSERT_THAT(reader, IsOk());
  Bytes buffer(8 << 20);
  uint64_t position = 0;
  bool all_zero = true;
  Bytes tail;
  while (true) {
    auto count = reader->read(buffer);
    ASSERT_THAT(count, IsOk());  // the CRC check included
    if (*count == 0) break;
    const auto zeros = static_cast<std::ptrdiff_t>(
        std::min<uint64_t>(*count, kBigSize - 7 - std::min(position, kBigSize - 7)));
    all_zero = all_zero && std::all_of(buffer.begin(), buffer.begin() + zeros,
                                       [](uint8_t b) { return b == 0; });
    tail.insert(tail.end(), buffer.begin() + zeros,
                buffer.begin() + static_cast<std::ptrdiff_t>(*count));
    position += *count;
  }
  EXPECT_EQ(position, kBigSize);
  EXPECT_TRUE(all_zero);
  EXPECT_EQ(tail, text_bytes("the end"));
}

TEST_F(ZipArchiveTest, ReadersWorkAfterTheArchiveIsMovedOrDestroyed) {
  make_sample();
  auto opened = ZipArchive::open(sample_);
  ASSERT_THAT(opened, IsOk());
  ZipArchive zip = std::move(opened).value();
  auto reader = zip.open_member(zip.entries()[1]);
  ASSERT_THAT(reader, IsOk());
  Bytes first(100);
  ASSERT_THAT(reader->read(first), IsOk());

  ZipArchive moved = std::move(zip);
  EXPECT_EQ(moved.path(), sample_);
  ASSERT_EQ(moved.entries().size(), 3u);
  ASSERT_NE(moved.find("stored_member.bin"), nullptr);
  { ZipArchive gone = std::move(moved); }

  ZipMemberReader taken = std::move(reader).value();
  Bytes rest(deflated_.size() - 100);
  auto count = taken.read(rest);
  ASSERT_THAT(count, IsOk());
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, deflated_);
  EXPECT_EQ(taken.remaining(), 0u);
}

TEST_F(ZipArchiveTest, ThreadsReadTheSameArchiveAtOnce) {
  make_sample(200 << 10);
  const ZipArchive zip = open_ok(sample_);
  std::vector<int> failures(8, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        auto stored = stream_member(zip, zip.entries()[0], 333 + t);
        auto deflated = stream_member(zip, zip.entries()[1], 4096 + t);
        if (!stored.is_ok() || *stored != stored_) ++failures[t];
        if (!deflated.is_ok() || *deflated != deflated_) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<int>(failures.size(), 0));
}

TEST(ZipArchiveRealData, ReadsTheExecuTorchEtRecord) {
  if (!std::filesystem::exists(kEtRecord)) GTEST_SKIP() << "no " << kEtRecord;
  auto zip = ZipArchive::open(kEtRecord.string());
  ASSERT_THAT(zip, IsOk());
  // Listed independently by Python's zipfile: names, stored sizes and local header offsets.
  const std::vector<std::tuple<std::string, uint64_t, uint64_t>> expected = {
      {"ETRECORD_V0", 0, 0},
      {"aten_dialect_output/forward", 6559, 41},
      {"aten_dialect_output/forward_state_dict", 864, 6657},
      {"edge_dialect_exported_program", 6652, 7589},
      {"edge_dialect_exported_program_state_dict", 864, 14300},
      {"debug_handle_map", 2, 15234},
      {"delegate_map", 2, 15282}};
  ASSERT_EQ(zip->entries().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const ZipEntry& entry = zip->entries()[i];
    EXPECT_EQ(entry.name, std::get<0>(expected[i]));
    EXPECT_EQ(entry.method, 0) << entry.name;
    EXPECT_EQ(entry.uncompressed_size, std::get<1>(expected[i])) << entry.name;
    EXPECT_EQ(entry.local_header_offset, std::get<2>(expected[i])) << entry.name;
    auto whole = zip->read_all(entry, 1 << 20);
    ASSERT_THAT(whole, IsOk());
    EXPECT_EQ(whole->size(), entry.uncompressed_size);
    auto streamed = stream_member(*zip, entry, 1000);
    ASSERT_THAT(streamed, IsOk());
    EXPECT_EQ(*streamed, *whole) << entry.name;
  }
  for (const char* json_member : {"delegate_map", "debug_handle_map"}) {
    const ZipEntry* entry = zip->find(json_member);
    ASSERT_NE(entry, nullptr) << json_member;
    auto bytes = zip->read_all(*entry, 1 << 20);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(*bytes, text_bytes("{}")) << json_member;
  }
}

// --- files that are not there or not archives ----------------------------------------------------

TEST_F(ZipArchiveTest, MissingFileDirectoryAndNonArchives) {
  const auto missing = ZipArchive::open(file("missing.zip"));
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(missing.status().message().starts_with(quote_name(file("missing.zip"))));

  const auto directory = ZipArchive::open(dir_.path().string());
  EXPECT_EQ(directory.status().code(), ErrorCode::kIo);
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);

  ASSERT_EQ(::mkfifo(file("fifo").c_str(), 0600), 0);
  const auto fifo = ZipArchive::open(file("fifo"));  // must not block waiting for a writer
  EXPECT_EQ(fifo.status().code(), ErrorCode::kIo);
  EXPECT_NE(fifo.status().message().find("not a regular file"), std::string::npos);

  write_bytes(file("empty.zip"), {});
  EXPECT_TRUE(is_corrupt(ZipArchive::open(file("empty.zip")).status(), file("empty.zip"),
                         {"not a zip archive", "0 bytes"}));
  write_bytes(file("text.zip"), text_bytes(std::string(100000, 't')));
  EXPECT_TRUE(is_corrupt(ZipArchive::open(file("text.zip")).status(), file("text.zip"),
                         {"not a zip archive", "no end of central directory record", "65557"}));
}

TEST_F(ZipArchiveTest, UnreadableFileIsAnIoError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  make_sample();
  ASSERT_EQ(::chmod(sample_.c_str(), 0), 0);
  const auto zip = ZipArchive::open(sample_);
  EXPECT_EQ(zip.status().code(), ErrorCode::kIo);
  EXPECT_NE(zip.status().message().find("Permission denied"), std::string::npos);
}

// --- damaged archives ----------------------------------------------------------------------------

TEST_F(ZipArchiveTest, EveryTruncationIsACleanError) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'small.zip'), 'w') as z:
    z.writestr('one', b'first member', compress_type=zipfile.ZIP_DEFLATED)
    z.writestr('two', b'second')
    z.comment = b'a comment of some length'
zipfile.ZIP64_LIMIT = 0
zipfile.ZIP_FILECOUNT_LIMIT = 0
with zipfile.ZipFile(os.path.join(d, 'small64.zip'), 'w') as z:
    z.writestr('one', b'first member', compress_type=zipfile.ZIP_DEFLATED)
    z.writestr('two', b'second')
)");
  for (const char* name : {"small.zip", "small64.zip"}) {
    const Bytes whole = qd::testing::read_bytes(file(name));
    const std::string cut = file("cut.zip");
    for (size_t size = 0; size < whole.size(); ++size) {
      write_bytes(cut, Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size)));
      const Status status = ZipArchive::open(cut).status();
      ASSERT_TRUE(is_corrupt(status, cut, {})) << name << " cut to " << size;
      const bool explained = status.message().find("not a zip archive") != std::string::npos ||
                             status.message().find("truncated") != std::string::npos;
      EXPECT_TRUE(explained) << name << " cut to " << size << ": " << status.message();
    }
  }
  // Cut inside the comment: the end record is there but its comment is not.
  const Bytes whole = qd::testing::read_bytes(file("small.zip"));
  write_bytes(file("cut.zip"), Bytes(whole.begin(), whole.end() - 5));
  EXPECT_TRUE(is_corrupt(ZipArchive::open(file("cut.zip")).status(), file("cut.zip"),
                         {"truncated", "24-byte comment", "5 bytes short"}));
}

TEST_F(ZipArchiveTest, FileTruncatedAfterOpenIsReportedWhenRead) {
  make_sample();
  const ZipArchive zip = open_ok(sample_);
  ASSERT_EQ(::truncate(sample_.c_str(), 3100), 0);  // inside the deflated member's data
  EXPECT_TRUE(is_corrupt(zip.read_all(zip.entries()[1], 1 << 20).status(), sample_,
                         {"truncated: the file ends at offset", "deflated_member.bin"}));
}

// Every single-byte change of a small archive either leaves every member intact (a time, an
// attribute or the comment changed) or is reported as kCorrupt with the path; never wrong data.
TEST_F(ZipArchiveTest, EveryByteChangeIsHarmlessOrACleanError) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'small.zip'), 'w') as z:
    z.writestr('stored', b'stored bytes ' * 3)
    z.writestr('deflated', b'deflated bytes ' * 20, compress_type=zipfile.ZIP_DEFLATED)
    z.writestr('empty', b'')
    z.comment = b'comment'
)");
  const std::string original = file("small.zip");
  const ZipArchive reference = open_ok(original);
  std::vector<Bytes> contents;
  for (const ZipEntry& entry : reference.entries()) {
    auto bytes = reference.read_all(entry, 1 << 20);
    ASSERT_THAT(bytes, IsOk());
    contents.push_back(*bytes);
  }
  const Bytes whole = qd::testing::read_bytes(original);
  const std::string path = file("changed.zip");
  int errors = 0;
  for (size_t at = 0; at < whole.size(); ++at) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      Bytes changed = whole;
      changed[at] ^= mask;
      write_bytes(path, changed);
      auto zip = ZipArchive::open(path);
      Status status = zip.status();
      for (size_t i = 0; status.is_ok() && i < zip->entries().size(); ++i) {
        const ZipEntry& entry = zip->entries()[i];
        auto bytes = zip->read_all(entry, 1 << 20);
        status = bytes.status();
        if (!status.is_ok()) break;
        ASSERT_EQ(zip->entries().size(), contents.size()) << "byte " << at;
        EXPECT_EQ(entry.name, reference.entries()[i].name) << "byte " << at;
        EXPECT_EQ(*bytes, contents[i]) << "wrong data, byte " << at << " ^ " << int{mask};
      }
      if (!status.is_ok()) {
        ++errors;
        ASSERT_TRUE(is_corrupt(status, path, {})) << "byte " << at << " ^ " << int{mask};
      }
    }
  }
  EXPECT_GT(errors, static_cast<int>(whole.size()));  // most changes must be noticed
}

TEST_F(ZipArchiveTest, CrcMismatchNamesTheMember) {
  make_sample();
  const std::string bad_data =
      damaged(sample_, [](Bytes& b) { b[member_data(b, "stored_member.bin") + 1500] ^= 0x20; });
  EXPECT_TRUE(is_corrupt(read_error(bad_data, "stored_member.bin"), bad_data,
                         {"member 'stored_member.bin'", "CRC mismatch"}));
  // The damage stays in its member: the others still read.
  EXPECT_THAT(read_error(bad_data, "deflated_member.bin"), IsOk());

  const std::string bad_crc = damaged(sample_, [](Bytes& b) {
    const size_t header = central_header(b, "deflated_member.bin");
    put_u32(b, header + 16, get_u32(b, header + 16) + 1);
  });
  EXPECT_TRUE(is_corrupt(read_error(bad_crc, "deflated_member.bin"), bad_crc,
                         {"member 'deflated_member.bin'", "CRC mismatch"}));
}

TEST_F(ZipArchiveTest, AnErrorIsFinalForItsReader) {
  make_sample();
  const std::string bad =
      damaged(sample_, [](Bytes& b) { b[member_data(b, "stored_member.bin")] ^= 1; });
  const ZipArchive zip = open_ok(bad);
  auto reader = zip.open_member(zip.entries()[0]);
  ASSERT_THAT(reader, IsOk());
  Bytes buffer(stored_.size());
  const auto first = reader->read(buffer);
  EXPECT_TRUE(is_corrupt(first.status(), bad, {"CRC mismatch"}));
  const auto second = reader->read(buffer);
  EXPECT_EQ(second.status().message(), first.status().message());
  Bytes none;
  auto empty_read = zip.open_member(zip.entries()[1])->read(none);
  EXPECT_EQ(empty_read.status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(ZipArchiveTest, CorruptShortAndOverlongDeflateStreams) {
  make_sample();
  const std::string name = "deflated_member.bin";
  const std::string invalid_block = damaged(sample_, [&](Bytes& b) {
    b[member_data(b, name)] = 0x07;  // final block of the reserved type 3
  });
  EXPECT_TRUE(
      is_corrupt(read_error(invalid_block, name), invalid_block,
                 {"member 'deflated_member.bin'", "corrupt deflate stream", "invalid block type"}));

  const std::string ends_early = damaged(sample_, [&](Bytes& b) {
    const size_t header = central_header(b, name);
    put_u32(b, header + 20, get_u32(b, header + 20) / 2);
  });
  EXPECT_TRUE(is_corrupt(read_error(ends_early, name), ends_early,
                         {"member 'deflated_member.bin'", "deflate stream ends early"}));

  const std::string trailing = damaged(sample_, [&](Bytes& b) {
    const size_t header = central_header(b, name);
    put_u32(b, header + 20, get_u32(b, header + 20) + 5);
  });
  EXPECT_TRUE(is_corrupt(read_error(trailing, name), trailing,
                         {"member 'deflated_member.bin'", "5 bytes of trailing data"}));

  const std::string stated_smaller = damaged(sample_, [&](Bytes& b) {
    const size_t header = central_header(b, name);
    put_u32(b, header + 24, get_u32(b, header + 24) - 1);
  });
  EXPECT_TRUE(is_corrupt(read_error(stated_smaller, name), stated_smaller,
                         {"member 'deflated_member.bin'", "more than the stated"}));

  const std::string stated_larger = damaged(sample_, [&](Bytes& b) {
    const size_t header = central_header(b, name);
    put_u32(b, header + 24, get_u32(b, header + 24) + 1);
  });
  EXPECT_TRUE(is_corrupt(read_error(stated_larger, name), stated_larger,
                         {"member 'deflated_member.bin'", "ends after 20000 bytes",
                          "stated uncompressed size 20001"}));

  const std::string impossible_ratio =
      damaged(sample_, [&](Bytes& b) { put_u32(b, central_header(b, name) + 24, 0xFFFFFFF0); });
  // Refused before the 4 GiB it claims are allocated, even with no limit from the caller.
  auto opened = ZipArchive::open(impossible_ratio);
  ASSERT_THAT(opened, IsOk());
  EXPECT_TRUE(is_corrupt(
      opened->read_all(*opened->find(name), ~uint64_t{0}).status(), impossible_ratio,
      {"member 'deflated_member.bin' claims 4294967280 bytes", "more than deflate can expand"}));
}

TEST_F(ZipArchiveTest, StoredMemberWithDifferingSizes) {
  make_sample();
  const std::string bad = damaged(sample_, [](Bytes& b) {
    const size_t header = central_header(b, "stored_member.bin");
    put_u32(b, header + 24, 2999);
  });
  EXPECT_TRUE(is_corrupt(read_error(bad, "stored_member.bin"), bad,
                         {"stored member 'stored_member.bin' has compressed size 3000 but "
                          "uncompressed size 2999"}));
}

TEST_F(ZipArchiveTest, UnsupportedMethodsAndEncryptionAreRefusedByName) {
  python(R"(
with zipfile.ZipFile(os.path.join(d, 'methods.zip'), 'w') as z:
    z.writestr('bzip2 member', b'bz' * 100, compress_type=zipfile.ZIP_BZIP2)
    z.writestr('lzma member', b'xz' * 100, compress_type=zipfile.ZIP_LZMA)
    z.writestr('secret', b'not really secret')
)");
  const std::string path = file("methods.zip");
  EXPECT_TRUE(is_corrupt(read_error(path, "bzip2 member"), path,
                         {"unsupported compression method 12 for member 'bzip2 member'"}));
  EXPECT_TRUE(is_corrupt(read_error(path, "lzma member"), path,
                         {"unsupported compression method 14 for member 'lzma member'"}));
  EXPECT_THAT(read_error(path, "secret"), IsOk());
  const std::string encrypted = damaged(path, [](Bytes& b) {
    const size_t header = central_header(b, "secret");
    put_u16(b, header + 8, get_u16(b, header + 8) | 1);
  });
  EXPECT_TRUE(
      is_corrupt(read_error(encrypted, "secret"), encrypted, {"member 'secret' is encrypted"}));
}

TEST_F(ZipArchiveTest, BadSignaturesGiveTheirOffset) {
  make_sample();
  const std::string bad_local =
      damaged(sample_, [](Bytes& b) { b[local_header(b, "deflated_member.bin")] = 'X'; });
  const Bytes raw = qd::testing::read_bytes(sample_);
  const size_t local = local_header(raw, "deflated_member.bin");
  EXPECT_TRUE(is_corrupt(read_error(bad_local, "deflated_member.bin"), bad_local,
                         {"bad signature 0x04034b58 at offset " + std::to_string(local),
                          "local file header of member 'deflated_member.bin'"}));

  const size_t central = central_header(raw, "empty_member.txt");
  const std::string bad_central = damaged(sample_, [&](Bytes& b) { b[central + 3] = 0; });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(bad_central).status(), bad_central,
                         {"bad signature 0x00014b50 at offset " + std::to_string(central),
                          "central directory file header #2"}));

  const std::string renamed = damaged(sample_, [&](Bytes& b) { b[local + 30] = 'D'; });
  EXPECT_TRUE(is_corrupt(read_error(renamed, "deflated_member.bin"), renamed,
                         {"member 'deflated_member.bin'", "names 'Deflated_member.bin' instead"}));
}

TEST_F(ZipArchiveTest, EntryCountsThatDoNotMatchTheDirectory) {
  make_sample();
  auto set_count = [](uint16_t count) {
    return [count](Bytes& b) {
      const size_t end = end_record(b);
      put_u16(b, end + 8, count);
      put_u16(b, end + 10, count);
    };
  };
  const std::string huge = damaged(sample_, set_count(0xFFFF));
  EXPECT_TRUE(is_corrupt(ZipArchive::open(huge).status(), huge,
                         {"entry count does not match", "claims 65535 entries", "at most 4"}));
  const std::string fewer = damaged(sample_, set_count(2));
  EXPECT_TRUE(is_corrupt(ZipArchive::open(fewer).status(), fewer,
                         {"entry count does not match", "claims 2 entries",
                          "bytes of the central "
                          "directory follow"}));
  const std::string more = damaged(sample_, set_count(4));
  EXPECT_TRUE(
      is_corrupt(ZipArchive::open(more).status(), more,
                 {"entry count does not match", "claims 4 entries", "central directory holds 3"}));
}

TEST_F(ZipArchiveTest, HugeZip64EntryCountFailsFastWithoutAllocating) {
  python(R"(
zipfile.ZIP64_LIMIT = 0
zipfile.ZIP_FILECOUNT_LIMIT = 0
with zipfile.ZipFile(os.path.join(d, 'z64.zip'), 'w') as z:
    z.writestr('member', b'data')
)");
  const std::string path = file("z64.zip");
  const std::string huge = damaged(path, [](Bytes& b) {
    const size_t record = end_record(b) - 20 - 56;
    ASSERT_EQ(get_u32(b, record), 0x06064b50u);
    put_u64(b, record + 24, uint64_t{1} << 60);
    put_u64(b, record + 32, uint64_t{1} << 60);
  });
  EXPECT_TRUE(
      is_corrupt(ZipArchive::open(huge).status(), huge, {"claims 1152921504606846976 entries"}));
  const std::string huge_directory =
      damaged(path, [](Bytes& b) { put_u64(b, end_record(b) - 20 - 56 + 40, uint64_t{1} << 62); });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(huge_directory).status(), huge_directory,
                         {"truncated", "extends past the end of the file"}));
  const std::string huge_size = damaged(path, [](Bytes& b) {
    const size_t extra = central_header(b, "member") + 46 + 6;
    ASSERT_EQ(get_u16(b, extra), 1);
    put_u64(b, extra + 4 + 8, ~uint64_t{0} - 4);  // compressed size: overflows any offset sum
  });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(huge_size).status(), huge_size,
                         {"member 'member'", "extends past the start of the central directory"}));
}

TEST_F(ZipArchiveTest, OffsetsPastTheEndAndInconsistentLocations) {
  make_sample();
  const std::string past_end = damaged(sample_, [](Bytes& b) {
    put_u32(b, central_header(b, "deflated_member.bin") + 42, 0x7FFFFFF0);
  });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(past_end).status(), past_end,
                         {"member 'deflated_member.bin'", "local header offset 2147483632",
                          "past the end of the file"}));

  const std::string too_long = damaged(
      sample_, [](Bytes& b) { put_u32(b, central_header(b, "empty_member.txt") + 20, 1000); });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(too_long).status(), too_long,
                         {"truncated: member 'empty_member.txt'", "1000 compressed bytes",
                          "extends past the start of the central directory"}));

  const std::string directory_past_end =
      damaged(sample_, [](Bytes& b) { put_u32(b, end_record(b) + 16, 0x7FFFFFF0); });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(directory_past_end).status(), directory_past_end,
                         {"truncated: the central directory at offset 2147483632",
                          "extends past the end of the file"}));

  const std::string directory_moved = damaged(sample_, [](Bytes& b) {
    put_u32(b, end_record(b) + 16, get_u32(b, end_record(b) + 16) - 1);
  });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(directory_moved).status(), directory_moved,
                         {"not where the end record begins"}));

  const std::string missing_zip64 = damaged(sample_, [](Bytes& b) {
    put_u32(b, central_header(b, "stored_member.bin") + 20, 0xFFFFFFFF);
  });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(missing_zip64).status(), missing_zip64,
                         {"member 'stored_member.bin'", "no ZIP64 extra field"}));
}

TEST_F(ZipArchiveTest, MultiDiskArchivesAreRefused) {
  make_sample();
  const std::string other_disk =
      damaged(sample_, [](Bytes& b) { put_u16(b, end_record(b) + 4, 1); });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(other_disk).status(), other_disk,
                         {"multi-disk archives are not supported"}));
  const std::string member_disk = damaged(
      sample_, [](Bytes& b) { put_u16(b, central_header(b, "stored_member.bin") + 34, 2); });
  EXPECT_TRUE(is_corrupt(
      ZipArchive::open(member_disk).status(), member_disk,
      {"multi-disk archives are not supported", "member 'stored_member.bin' starts on disk 2"}));
}

TEST_F(ZipArchiveTest, TrailingBytesAfterTheEndRecord) {
  make_sample();
  const std::string trailing = damaged(sample_, [](Bytes& b) { b.push_back('!'); });
  EXPECT_TRUE(is_corrupt(ZipArchive::open(trailing).status(), trailing,
                         {"1 unexpected bytes after the end of central directory record"}));
}

}  // namespace
}  // namespace qd::importers
