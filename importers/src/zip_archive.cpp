#include "zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <new>
#include <optional>
#include <tuple>
#include <utility>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/etdump/store.h"

namespace qd::importers {
namespace {

// Fixed record sizes, from the APPNOTE (the signatures are zip_archive.h's).
constexpr size_t kEndRecordSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EndRecordSize = 56;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kMaxCommentSize = 0xFFFF;

constexpr uint16_t kFlagEncrypted = 1u << 0;
constexpr uint16_t kFlagStrongEncryption = 1u << 6;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;

// The central directory is read whole; real ones (ETRecord, npz) are kilobytes. The cap keeps a
// hostile but self-consistent multi-gigabyte directory from exhausting memory.
constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t{256} << 20;
// The cheapest deflate copy is a 1-bit length code and a 1-bit distance code for 258 bytes, so
// one compressed byte never inflates to more than 4 * 258 = 1032 bytes.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr size_t kInputBufferBytes = size_t{64} << 10;
// zlib counts in 32-bit uInt: feed it output space in pieces no larger than this.
constexpr size_t kMaxInflateChunk = size_t{1} << 30;

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(load_u16(p)) | (static_cast<uint32_t>(load_u16(p + 2)) << 16);
}
uint64_t load_u64(const uint8_t* p) {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string member(std::string_view name) { return "member " + quote_name(name); }

Status bad_signature(const InputFile& source, uint64_t offset, uint32_t found, uint32_t expected,
                     const std::string& what) {
  return source.corrupt("bad signature " + hex32(found) + " at offset " + std::to_string(offset) +
                        ": expected " + what + " (" + hex32(expected) + ")");
}

// Where the central directory is, as the end record(s) state it.
struct DirectoryLocation {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entry_count = 0;
  uint64_t end_limit = 0;  // where the directory must end: the first end record after it
};

// The fields of the classic end record this reader uses.
struct EndRecord {
  uint64_t offset = 0;
  uint16_t disk = 0;
  uint16_t directory_disk = 0;
  uint16_t entries_on_disk = 0;
  uint16_t entries_total = 0;
  uint32_t directory_size = 0;
  uint32_t directory_offset = 0;
};

EndRecord parse_end_record(const uint8_t* p, uint64_t offset) {
  EndRecord record;
  record.offset = offset;
  record.disk = load_u16(p + 4);
  record.directory_disk = load_u16(p + 6);
  record.entries_on_disk = load_u16(p + 8);
  record.entries_total = load_u16(p + 10);
  record.directory_size = load_u32(p + 12);
  record.directory_offset = load_u32(p + 16);
  return record;
}

// Why the end record signature last seen, at `offset`, is not the end record: its comment does
// not end exactly at the end of the file.
Status describe_misplaced_end_record(const InputFile& source, uint64_t offset,
                                     uint64_t comment_size) {
  const uint64_t record_end = offset + kEndRecordSize + comment_size;
  if (record_end > source.size()) {
    return source.corrupt("truncated: the end of central directory record at offset " +
                          std::to_string(offset) + " declares a " + std::to_string(comment_size) +
                          "-byte comment but the file ends " +
                          std::to_string(record_end - source.size()) + " bytes short of it");
  }
  return source.corrupt(std::to_string(source.size() - record_end) +
                        " unexpected bytes after the end of central directory record at offset " +
                        std::to_string(offset) + " and its " + std::to_string(comment_size) +
                        "-byte comment");
}

// The end record is the last thing in the file, followed only by its comment (<= 65,535 bytes):
// search backwards for its signature and take the one whose comment ends exactly at the end of
// the file (a comment may itself contain the signature bytes).
Result<EndRecord> find_end_record(const InputFile& source) {
  if (source.size() < kEndRecordSize) {
    return source.corrupt("not a zip archive: the file is " + std::to_string(source.size()) +
                          " bytes, too short for an end of central directory record");
  }
  const uint64_t tail_size = std::min<uint64_t>(source.size(), kEndRecordSize + kMaxCommentSize);
  const uint64_t tail_offset = source.size() - tail_size;
  std::vector<uint8_t> tail(tail_size);
  QD_RETURN_IF_ERROR(source.read_at(tail_offset, tail, "the end of central directory record"));
  std::optional<size_t> last_seen;
  for (size_t pos = tail.size() - kEndRecordSize + 1; pos-- > 0;) {
    if (load_u32(&tail[pos]) != kEndRecordSignature) continue;
    const size_t comment_size = load_u16(&tail[pos + 20]);
    if (pos + kEndRecordSize + comment_size == tail.size()) {
      return parse_end_record(&tail[pos], tail_offset + pos);
    }
    if (!last_seen) last_seen = pos;
  }
  if (last_seen) {
    return describe_misplaced_end_record(source, tail_offset + *last_seen,
                                         load_u16(&tail[*last_seen + 20]));
  }
  return source.corrupt(
      "not a zip archive: no end of central directory record (signature 0x06054b50) in the last " +
      std::to_string(tail_size) + " bytes");
}

// Fills `location` from the ZIP64 end record found through the locator at `locator_offset`.
Status read_zip64_end_record(const InputFile& source, uint64_t locator_offset,
                             const uint8_t* locator, DirectoryLocation& location) {
  const uint32_t record_disk = load_u32(locator + 4);
  const uint64_t record_offset = load_u64(locator + 8);
  const uint32_t disk_count = load_u32(locator + 16);
  if (record_disk != 0 || disk_count > 1) {
    return source.corrupt("multi-disk archives are not supported (the ZIP64 locator at offset " +
                          std::to_string(locator_offset) + " counts " + std::to_string(disk_count) +
                          " disks)");
  }
  if (record_offset > locator_offset || locator_offset - record_offset < kZip64EndRecordSize) {
    return source.corrupt("the ZIP64 end record offset " + std::to_string(record_offset) +
                          " given by the locator at offset " + std::to_string(locator_offset) +
                          " leaves no room for the record before the locator");
  }
  std::array<uint8_t, kZip64EndRecordSize> record{};
  QD_RETURN_IF_ERROR(source.read_at(record_offset, record, "the ZIP64 end record"));
  if (load_u32(record.data()) != kZip64EndRecordSignature) {
    return bad_signature(source, record_offset, load_u32(record.data()), kZip64EndRecordSignature,
                         "a ZIP64 end of central directory record");
  }
  const uint64_t declared_size = load_u64(record.data() + 4);  // excludes the first 12 bytes
  if (declared_size < kZip64EndRecordSize - 12 ||
      declared_size > locator_offset - record_offset - 12) {
    return source.corrupt("the ZIP64 end record at offset " + std::to_string(record_offset) +
                          " declares " + std::to_string(declared_size) +
                          " bytes, which do not fit between it and the locator");
  }
  const uint32_t disk = load_u32(record.data() + 16);
  const uint32_t directory_disk = load_u32(record.data() + 20);
  const uint64_t entries_on_disk = load_u64(record.data() + 24);
  location.entry_count = load_u64(record.data() + 32);
  location.size = load_u64(record.data() + 40);
  location.offset = load_u64(record.data() + 48);
  location.end_limit = record_offset;
  if (disk != 0 || directory_disk != 0 || entries_on_disk != location.entry_count) {
    return source.corrupt(
        "multi-disk archives are not supported (the ZIP64 end record names disk " +
        std::to_string(disk) + ", directory on disk " + std::to_string(directory_disk) + ", " +
        std::to_string(entries_on_disk) + " of " + std::to_string(location.entry_count) +
        " entries on it)");
  }
  return Status::ok();
}

Result<DirectoryLocation> read_end_records(const InputFile& source) {
  QD_ASSIGN_OR_RETURN(const EndRecord end, find_end_record(source));
  DirectoryLocation location;
  if (end.offset >= kZip64LocatorSize) {
    const uint64_t locator_offset = end.offset - kZip64LocatorSize;
    std::array<uint8_t, kZip64LocatorSize> locator{};
    QD_RETURN_IF_ERROR(source.read_at(locator_offset, locator, "the ZIP64 end record locator"));
    if (load_u32(locator.data()) == kZip64LocatorSignature) {
      QD_RETURN_IF_ERROR(read_zip64_end_record(source, locator_offset, locator.data(), location));
      return location;
    }
  }
  if (end.disk != 0 || end.directory_disk != 0 || end.entries_on_disk != end.entries_total) {
    return source.corrupt("multi-disk archives are not supported (the end record at offset " +
                          std::to_string(end.offset) + " names disk " + std::to_string(end.disk) +
                          ", directory on disk " + std::to_string(end.directory_disk) + ", " +
                          std::to_string(end.entries_on_disk) + " of " +
                          std::to_string(end.entries_total) + " entries on it)");
  }
  location.offset = end.directory_offset;
  location.size = end.directory_size;
  location.entry_count = end.entries_total;
  location.end_limit = end.offset;
  return location;
}

// The directory must end exactly where the end record(s) begin, and hold its entry count.
Status check_directory_location(const InputFile& source, const DirectoryLocation& location) {
  const std::string directory = "the central directory at offset " +
                                std::to_string(location.offset) + " (" +
                                std::to_string(location.size) + " bytes)";
  if (location.offset > source.size() || location.size > source.size() - location.offset) {
    return source.corrupt("truncated: " + directory + " extends past the end of the file (" +
                          std::to_string(source.size()) + " bytes)");
  }
  const uint64_t directory_end = location.offset + location.size;
  if (directory_end != location.end_limit) {
    return source.corrupt(directory + " ends at offset " + std::to_string(directory_end) +
                          ", not where the end record begins (offset " +
                          std::to_string(location.end_limit) + ")");
  }
  if (location.size > kMaxCentralDirectoryBytes) {
    return source.corrupt(directory + " is larger than this reader's limit of " +
                          std::to_string(kMaxCentralDirectoryBytes) + " bytes");
  }
  const uint64_t capacity = location.size / kCentralHeaderSize;
  if (location.entry_count > capacity) {
    return source.corrupt("entry count does not match: the end record claims " +
                          std::to_string(location.entry_count) + " entries but " + directory +
                          " can hold at most " + std::to_string(capacity));
  }
  return Status::ok();
}

// The ZIP64 extra field of a central header holds, in this order, only the values whose fixed
// field is saturated (0xFFFFFFFF, or 0xFFFF for the disk number).
struct Zip64Needs {
  bool uncompressed_size = false;
  bool compressed_size = false;
  bool local_header_offset = false;
  bool disk = false;
  bool any() const { return uncompressed_size || compressed_size || local_header_offset || disk; }
  size_t bytes() const {
    return 8 * (uncompressed_size + compressed_size + local_header_offset) + 4 * disk;
  }
};

// The data of the extra block with id `wanted`, or nullopt if absent.
Result<std::optional<std::span<const uint8_t>>> find_extra_block(const InputFile& source,
                                                                 std::span<const uint8_t> extra,
                                                                 uint16_t wanted,
                                                                 const std::string& owner) {
  size_t at = 0;
  while (extra.size() - at >= 4) {  // fewer bytes are padding some writers leave
    const uint16_t id = load_u16(&extra[at]);
    const uint16_t size = load_u16(&extra[at + 2]);
    if (size > extra.size() - at - 4) {
      return source.corrupt(owner + ": extra field block " + hex32(id) + " of " +
                            std::to_string(size) + " bytes runs past the end of the " +
                            std::to_string(extra.size()) + "-byte extra field");
    }
    if (id == wanted) return std::optional(extra.subspan(at + 4, size));
    at += 4 + size;
  }
  return std::optional<std::span<const uint8_t>>();
}

Status apply_zip64_extra(const InputFile& source, std::span<const uint8_t> extra,
                         const Zip64Needs& needs, ZipEntry& entry, uint32_t& disk) {
  if (!needs.any()) return Status::ok();
  const std::string owner = member(entry.name);
  QD_ASSIGN_OR_RETURN(const auto block, find_extra_block(source, extra, kZip64ExtraId, owner));
  if (!block) {
    return source.corrupt(owner + " has saturated sizes or offset but no ZIP64 extra field");
  }
  if (block->size() < needs.bytes()) {
    return source.corrupt(owner + ": its ZIP64 extra field has " + std::to_string(block->size()) +
                          " bytes, fewer than the " + std::to_string(needs.bytes()) +
                          " its saturated fields need");
  }
  const uint8_t* p = block->data();
  auto next_u64 = [&p] {
    const uint64_t value = load_u64(p);
    p += 8;
    return value;
  };
  if (needs.uncompressed_size) entry.uncompressed_size = next_u64();
  if (needs.compressed_size) entry.compressed_size = next_u64();
  if (needs.local_header_offset) entry.local_header_offset = next_u64();
  if (needs.disk) disk = load_u32(p);
  return Status::ok();
}

// A member's local header (30 bytes) and compressed data must lie before the central directory.
Status check_member_location(const InputFile& source, const ZipEntry& entry,
                             uint64_t directory_offset) {
  const uint64_t offset = entry.local_header_offset;
  if (offset >= source.size()) {
    return source.corrupt(member(entry.name) + ": local header offset " + std::to_string(offset) +
                          " is past the end of the file (" + std::to_string(source.size()) +
                          " bytes)");
  }
  if (offset > directory_offset || directory_offset - offset < kLocalHeaderSize) {
    return source.corrupt(member(entry.name) + ": local header offset " + std::to_string(offset) +
                          " leaves no room for the header before the central directory (offset " +
                          std::to_string(directory_offset) + ")");
  }
  if (entry.compressed_size > directory_offset - offset - kLocalHeaderSize) {
    return source.corrupt("truncated: " + member(entry.name) + " (local header at offset " +
                          std::to_string(offset) + ", " + std::to_string(entry.compressed_size) +
                          " compressed bytes) extends past the start of the central directory "
                          "(offset " +
                          std::to_string(directory_offset) + ")");
  }
  return Status::ok();
}

// Parses the central header at `pos` of `directory` (entry number `index`), advancing `pos`.
Result<ZipEntry> parse_central_header(const InputFile& source, std::span<const uint8_t> directory,
                                      uint64_t directory_offset, uint64_t index, size_t& pos) {
  const uint64_t offset = directory_offset + pos;
  auto where = [&] {
    return "central directory entry #" + std::to_string(index) + " at offset " +
           std::to_string(offset);
  };
  if (directory.size() - pos < kCentralHeaderSize) {
    return source.corrupt(where() + " is cut off by the end of the central directory");
  }
  const uint8_t* h = &directory[pos];
  if (load_u32(h) != kCentralHeaderSignature) {
    return bad_signature(source, offset, load_u32(h), kCentralHeaderSignature,
                         "central directory file header #" + std::to_string(index));
  }
  const size_t name_size = load_u16(h + 28), extra_size = load_u16(h + 30);
  const size_t record_size = kCentralHeaderSize + name_size + extra_size + load_u16(h + 32);
  if (directory.size() - pos < record_size) {
    return source.corrupt(where() + ": its name, extra field and comment (" +
                          std::to_string(record_size) +
                          " bytes with the header) run past the end of the central directory");
  }
  ZipEntry entry;
  entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_size);
  entry.flags = load_u16(h + 8);
  entry.method = load_u16(h + 10);
  entry.crc32 = load_u32(h + 16);
  entry.compressed_size = load_u32(h + 20);
  entry.uncompressed_size = load_u32(h + 24);
  entry.local_header_offset = load_u32(h + 42);
  uint32_t disk = load_u16(h + 34);
  const Zip64Needs needs{entry.uncompressed_size == 0xFFFFFFFF, entry.compressed_size == 0xFFFFFFFF,
                         entry.local_header_offset == 0xFFFFFFFF, disk == 0xFFFF};
  QD_RETURN_IF_ERROR(
      apply_zip64_extra(source, directory.subspan(pos + kCentralHeaderSize + name_size, extra_size),
                        needs, entry, disk));
  if (disk != 0) {
    return source.corrupt("multi-disk archives are not supported: " + member(entry.name) +
                          " starts on disk " + std::to_string(disk));
  }
  pos += record_size;
  return entry;
}

Result<std::vector<ZipEntry>> read_central_directory(const InputFile& source,
                                                     const DirectoryLocation& location) {
  std::vector<uint8_t> directory(location.size);
  QD_RETURN_IF_ERROR(source.read_at(location.offset, directory, "the central directory"));
  std::vector<ZipEntry> entries;
  entries.reserve(location.entry_count);  // bounded by the directory size, checked before
  size_t pos = 0;
  for (uint64_t index = 0; index < location.entry_count; ++index) {
    if (pos == directory.size()) {
      return source.corrupt("entry count does not match: the end record claims " +
                            std::to_string(location.entry_count) +
                            " entries but the central directory holds " + std::to_string(index));
    }
    QD_ASSIGN_OR_RETURN(ZipEntry entry,
                        parse_central_header(source, directory, location.offset, index, pos));
    QD_RETURN_IF_ERROR(check_member_location(source, entry, location.offset));
    entries.push_back(std::move(entry));
  }
  if (pos != directory.size()) {
    return source.corrupt("entry count does not match: the end record claims " +
                          std::to_string(location.entry_count) + " entries but " +
                          std::to_string(directory.size() - pos) +
                          " bytes of the central directory follow them");
  }
  return entries;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ZipMemberReader

struct ZipMemberReader::State {
  std::shared_ptr<const InputFile> source;
  std::string name;
  bool deflated = false;
  uint32_t expected_crc = 0;
  uint64_t uncompressed_size = 0;
  uint64_t next_offset = 0;  // file offset of the next compressed byte to read
  uint64_t compressed_left = 0;
  uint64_t uncompressed_left = 0;
  uint32_t crc = 0;
  z_stream stream{};
  bool stream_initialised = false;
  bool stream_ended = false;
  std::vector<uint8_t> input;
  bool finished = false;
  Status failure;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (stream_initialised) inflateEnd(&stream);
  }

  Status corrupt(const std::string& what) const { return fail(ErrorCode::kCorrupt, what); }
  Status fail(ErrorCode code, const std::string& what) const {
    return error(code, quote_name(source->path()) + ": " + member(name) + ": " + what);
  }
  uint64_t delivered() const { return uncompressed_size - uncompressed_left; }

  Status refill();
  Result<bool> inflate_step();
  Status read_stored(std::span<uint8_t> out);
  Status read_deflated(std::span<uint8_t> out);
  Status finish_deflate();
  Status finish();
};

Status ZipMemberReader::State::refill() {
  const size_t size = static_cast<size_t>(std::min<uint64_t>(input.size(), compressed_left));
  QD_RETURN_IF_ERROR(source->read_at(next_offset, std::span(input.data(), size), member(name)));
  next_offset += size;
  compressed_left -= size;
  stream.next_in = input.data();
  stream.avail_in = static_cast<uInt>(size);
  return Status::ok();
}

// Feeds input if zlib has none and runs inflate once: true when the deflate stream has ended.
// Each call that does not fail makes progress (zlib returns Z_BUF_ERROR otherwise), so loops
// around it terminate.
Result<bool> ZipMemberReader::State::inflate_step() {
  if (stream.avail_in == 0 && compressed_left > 0) QD_RETURN_IF_ERROR(refill());
  const int code = inflate(&stream, Z_NO_FLUSH);
  switch (code) {
    case Z_STREAM_END:
      return true;
    case Z_OK:
      return false;
    case Z_BUF_ERROR:
      if (stream.avail_in == 0 && compressed_left == 0) {
        return corrupt("deflate stream ends early: its " + std::to_string(stream.total_in) +
                       " compressed bytes stop before the end of the stream (" +
                       std::to_string(stream.total_out) + " bytes inflated)");
      }
      return fail(ErrorCode::kInternal, "inflate made no progress with input and output space");
    case Z_DATA_ERROR:
      return corrupt("corrupt deflate stream after " + std::to_string(stream.total_in) +
                     " compressed bytes (zlib: " + (stream.msg ? stream.msg : "data error") + ")");
    case Z_NEED_DICT:
      return corrupt("corrupt deflate stream: it asks for a preset dictionary");
    case Z_MEM_ERROR:
      return fail(ErrorCode::kNoMemory, "out of memory inflating");
    default:
      return fail(ErrorCode::kInternal, "inflate returned " + std::to_string(code));
  }
}

Status ZipMemberReader::State::read_stored(std::span<uint8_t> out) {
  QD_RETURN_IF_ERROR(source->read_at(next_offset, out, member(name)));
  next_offset += out.size();
  compressed_left -= out.size();
  return Status::ok();
}

// Fills all of `out` (no larger than what remains) from the deflate stream.
Status ZipMemberReader::State::read_deflated(std::span<uint8_t> out) {
  size_t filled = 0;
  while (filled < out.size()) {
    const size_t piece = std::min(out.size() - filled, kMaxInflateChunk);
    stream.next_out = out.data() + filled;
    stream.avail_out = static_cast<uInt>(piece);
    while (stream.avail_out > 0 && !stream_ended) {
      QD_ASSIGN_OR_RETURN(stream_ended, inflate_step());
    }
    filled += piece - stream.avail_out;
    if (stream_ended && filled < out.size()) {
      return corrupt("deflate stream ends after " + std::to_string(delivered() + filled) +
                     " bytes, short of the stated uncompressed size " +
                     std::to_string(uncompressed_size));
    }
  }
  return Status::ok();
}

// All stated bytes were delivered: the stream must end here, with no compressed bytes left over.
Status ZipMemberReader::State::finish_deflate() {
  uint8_t probe = 0;
  while (!stream_ended) {
    stream.next_out = &probe;
    stream.avail_out = 1;
    QD_ASSIGN_OR_RETURN(stream_ended, inflate_step());
    if (stream.avail_out == 0) {
      return corrupt("deflate stream holds more than the stated uncompressed size " +
                     std::to_string(uncompressed_size));
    }
  }
  const uint64_t trailing = stream.avail_in + compressed_left;
  if (trailing > 0) {
    return corrupt(std::to_string(trailing) +
                   " bytes of trailing data after the end of the deflate stream, within the "
                   "stated compressed size");
  }
  return Status::ok();
}

Status ZipMemberReader::State::finish() {
  if (deflated) QD_RETURN_IF_ERROR(finish_deflate());
  if (crc != expected_crc) {
    return corrupt("CRC mismatch: the central directory says " + hex32(expected_crc) +
                   ", the data has " + hex32(crc));
  }
  return Status::ok();
}

ZipMemberReader::ZipMemberReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
ZipMemberReader::ZipMemberReader(ZipMemberReader&&) noexcept = default;
ZipMemberReader& ZipMemberReader::operator=(ZipMemberReader&&) noexcept = default;
ZipMemberReader::~ZipMemberReader() = default;

uint64_t ZipMemberReader::remaining() const { return state_ ? state_->uncompressed_left : 0; }

Result<size_t> ZipMemberReader::read(std::span<uint8_t> out) {
  if (!state_) return error(ErrorCode::kState, "zip: read from a moved-from member reader");
  State& s = *state_;
  if (!s.failure.is_ok()) return s.failure;
  if (s.finished) return size_t{0};
  if (out.empty()) {
    return s.fail(ErrorCode::kInvalidArgument, "read into an empty buffer");
  }
  const size_t count = static_cast<size_t>(std::min<uint64_t>(out.size(), s.uncompressed_left));
  const std::span<uint8_t> piece = out.first(count);
  Status status = s.deflated ? s.read_deflated(piece) : s.read_stored(piece);
  if (status.is_ok()) {
    if (count > 0) s.crc = static_cast<uint32_t>(crc32_z(s.crc, piece.data(), piece.size()));
    s.uncompressed_left -= count;
    if (s.uncompressed_left == 0) status = s.finish();
  }
  if (!status.is_ok()) {
    s.failure = status;
    return status;
  }
  s.finished = s.uncompressed_left == 0;
  return count;
}

// ---------------------------------------------------------------------------------------------
// ZipArchive

ZipArchive::ZipArchive(std::shared_ptr<const InputFile> source, std::vector<ZipEntry> entries,
                       uint64_t central_directory_offset)
    : source_(std::move(source)),
      entries_(std::move(entries)),
      central_directory_offset_(central_directory_offset) {
  by_name_.resize(entries_.size());
  for (size_t i = 0; i < by_name_.size(); ++i) by_name_[i] = i;
  std::sort(by_name_.begin(), by_name_.end(), [this](size_t a, size_t b) {
    return std::tie(entries_[a].name, a) < std::tie(entries_[b].name, b);
  });
}

Result<ZipArchive> ZipArchive::open(const std::string& path) {
  try {
    QD_ASSIGN_OR_RETURN(std::shared_ptr<const InputFile> source,
                        InputFile::open(path, "a zip archive"));
    QD_ASSIGN_OR_RETURN(const DirectoryLocation location, read_end_records(*source));
    QD_RETURN_IF_ERROR(check_directory_location(*source, location));
    QD_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, read_central_directory(*source, location));
    return ZipArchive(std::move(source), std::move(entries), location.offset);
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 quote_name(path) + ": out of memory reading the central directory");
  }
}

const std::string& ZipArchive::path() const {
  static const std::string kNoPath;
  return source_ ? source_->path() : kNoPath;
}

const std::vector<ZipEntry>& ZipArchive::entries() const { return entries_; }

const ZipEntry* ZipArchive::find(std::string_view name) const {
  // The first index past every entry named `name`; the one before it, if so named, is the last.
  const auto after = std::upper_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](std::string_view wanted, size_t index) { return wanted < entries_[index].name; });
  if (after == by_name_.begin()) return nullptr;
  const ZipEntry& candidate = entries_[*std::prev(after)];
  return candidate.name == name ? &candidate : nullptr;
}

namespace {

// Refuses what this reader cannot decode, before any byte of the member is read.
Status check_readable(const InputFile& source, const ZipEntry& entry) {
  if (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) {
    return source.corrupt(member(entry.name) + " is encrypted, which is not supported");
  }
  if (entry.method != kMethodStored && entry.method != kMethodDeflate) {
    return source.corrupt("unsupported compression method " + std::to_string(entry.method) +
                          " for " + member(entry.name) + " (only 0 stored and 8 deflate)");
  }
  if (entry.method == kMethodStored && entry.compressed_size != entry.uncompressed_size) {
    return source.corrupt("stored " + member(entry.name) + " has compressed size " +
                          std::to_string(entry.compressed_size) + " but uncompressed size " +
                          std::to_string(entry.uncompressed_size));
  }
  if (entry.method == kMethodDeflate &&
      entry.uncompressed_size / kMaxDeflateRatio > entry.compressed_size) {
    return source.corrupt(member(entry.name) + " claims " +
                          std::to_string(entry.uncompressed_size) + " bytes inflated from " +
                          std::to_string(entry.compressed_size) +
                          ", more than deflate can expand to (1032:1)");
  }
  return Status::ok();
}

// The file offset of the member's data: after its local header's own name and extra field, whose
// lengths may differ from the central directory's.
Result<uint64_t> locate_member_data(const InputFile& source, const ZipEntry& entry,
                                    uint64_t directory_offset) {
  QD_RETURN_IF_ERROR(check_member_location(source, entry, directory_offset));
  const uint64_t offset = entry.local_header_offset;
  std::array<uint8_t, kLocalHeaderSize> header{};
  QD_RETURN_IF_ERROR(source.read_at(offset, header, "the local header of " + member(entry.name)));
  if (load_u32(header.data()) != kLocalHeaderSignature) {
    return bad_signature(source, offset, load_u32(header.data()), kLocalHeaderSignature,
                         "the local file header of " + member(entry.name));
  }
  const uint64_t name_size = load_u16(&header[26]);
  const uint64_t data_offset = offset + kLocalHeaderSize + name_size + load_u16(&header[28]);
  if (data_offset > directory_offset || entry.compressed_size > directory_offset - data_offset) {
    return source.corrupt("truncated: " + member(entry.name) + " (data at offset " +
                          std::to_string(data_offset) + ", " +
                          std::to_string(entry.compressed_size) +
                          " compressed bytes) extends past the start of the central directory "
                          "(offset " +
                          std::to_string(directory_offset) + ")");
  }
  std::string local_name(name_size, '\0');
  QD_RETURN_IF_ERROR(
      source.read_at(offset + kLocalHeaderSize,
                     std::span(reinterpret_cast<uint8_t*>(local_name.data()), local_name.size()),
                     "the local header of " + member(entry.name)));
  if (local_name != entry.name) {
    return source.corrupt(member(entry.name) + ": the local header at offset " +
                          std::to_string(offset) + " names " + quote_name(local_name) + " instead");
  }
  return data_offset;
}

}  // namespace

Result<ZipMemberReader> ZipArchive::open_member(const ZipEntry& entry) const {
  if (!source_) return error(ErrorCode::kState, "zip: open_member on a moved-from archive");
  try {
    QD_RETURN_IF_ERROR(check_readable(*source_, entry));
    QD_ASSIGN_OR_RETURN(const uint64_t data_offset,
                        locate_member_data(*source_, entry, central_directory_offset_));
    auto state = std::make_unique<ZipMemberReader::State>();
    state->source = source_;
    state->name = entry.name;
    state->expected_crc = entry.crc32;
    state->uncompressed_size = state->uncompressed_left = entry.uncompressed_size;
    state->next_offset = data_offset;
    state->compressed_left = entry.compressed_size;
    // An empty member may have no deflate stream at all: there is nothing to inflate.
    state->deflated = entry.method == kMethodDeflate &&
                      !(entry.compressed_size == 0 && entry.uncompressed_size == 0);
    if (state->deflated) {
      state->input.resize(
          static_cast<size_t>(std::min<uint64_t>(kInputBufferBytes, entry.compressed_size)));
      if (inflateInit2(&state->stream, -MAX_WBITS) != Z_OK) {  // raw deflate: no zlib header
        return state->fail(ErrorCode::kNoMemory, "cannot start inflating");
      }
      state->stream_initialised = true;
    }
    return ZipMemberReader(std::move(state));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 quote_name(source_->path()) + ": out of memory opening " + member(entry.name));
  }
}

Result<std::vector<uint8_t>> ZipArchive::read_all(const ZipEntry& entry, uint64_t max_bytes) const {
  if (!source_) return error(ErrorCode::kState, "zip: read_all on a moved-from archive");
  if (entry.uncompressed_size > max_bytes) {
    return source_->corrupt(member(entry.name) + " is " + std::to_string(entry.uncompressed_size) +
                            " bytes uncompressed, more than the " + std::to_string(max_bytes) +
                            " this reader accepts");
  }
  QD_ASSIGN_OR_RETURN(ZipMemberReader reader, open_member(entry));
  try {
    std::vector<uint8_t> bytes(static_cast<size_t>(entry.uncompressed_size));
    uint8_t scratch = 0;  // an empty member still needs one read, which verifies it
    std::span<uint8_t> target = bytes.empty() ? std::span(&scratch, 1) : std::span(bytes);
    QD_ASSIGN_OR_RETURN(const size_t count, reader.read(target));
    if (count != bytes.size() || reader.remaining() != 0) {
      return error(ErrorCode::kInternal,
                   quote_name(source_->path()) + ": short read of " + member(entry.name));
    }
    return bytes;
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, quote_name(source_->path()) + ": out of memory reading " +
                                           member(entry.name) + " (" +
                                           std::to_string(entry.uncompressed_size) + " bytes)");
  }
}

}  // namespace qd::importers
