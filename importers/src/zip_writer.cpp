#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <utility>

#include "qnn_debug/base/output_file.h"
#include "qnn_debug/base/text.h"
#include "zip_archive.h"

namespace qd::importers {
namespace {

constexpr uint64_t kSaturated32 = 0xFFFFFFFF;  // a 32-bit field this full means "see ZIP64"
constexpr uint64_t kSaturated16 = 0xFFFF;
constexpr uint16_t kVersionClassic = 20;  // 2.0: stored members, directories
constexpr uint16_t kVersionZip64 = 45;    // 4.5: ZIP64 records
constexpr uint16_t kMadeByUnix = 3 << 8;  // so unzip applies the permission bits below
constexpr uint32_t kRegularFile0644 = 0100644u << 16;
constexpr uint16_t kFlagUtf8Name = 1u << 11;
// 1980-01-01 00:00, the earliest DOS date: written for every member so that the same arrays give
// the same bytes.
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (1 << 5) | 1;
constexpr size_t kBufferBytes = size_t{1} << 20;

// Little-endian record fields, appended in order.
class RecordBytes {
 public:
  RecordBytes& u16(uint64_t value) { return put(value, 2); }
  RecordBytes& u32(uint64_t value) { return put(value, 4); }
  RecordBytes& u64(uint64_t value) { return put(value, 8); }
  RecordBytes& text(std::string_view value) {
    bytes_.insert(bytes_.end(), value.begin(), value.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  RecordBytes& put(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

// What the central directory needs of a written member (stored: compressed size == size).
struct WrittenMember {
  std::string name;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
  uint32_t crc = 0;
  bool zip64_sizes = false;  // the local header's sizes are in a ZIP64 extra field
  uint16_t flags() const {
    const bool ascii = std::all_of(name.begin(), name.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    return ascii ? 0 : kFlagUtf8Name;  // as Python's zipfile: the flag only when it matters
  }
};

std::vector<uint8_t> local_header(const WrittenMember& m) {
  RecordBytes r;
  r.u32(kLocalHeaderSignature).u16(m.zip64_sizes ? kVersionZip64 : kVersionClassic);
  r.u16(m.flags()).u16(0).u16(kDosTime).u16(kDosDate).u32(m.crc);
  const uint64_t size_field = m.zip64_sizes ? kSaturated32 : m.size;
  r.u32(size_field).u32(size_field).u16(m.name.size()).u16(m.zip64_sizes ? 20 : 0).text(m.name);
  // In a local header the ZIP64 field holds both sizes, uncompressed first.
  if (m.zip64_sizes) r.u16(kZip64ExtraId).u16(16).u64(m.size).u64(m.size);
  return r.bytes();
}

std::vector<uint8_t> central_header(const WrittenMember& m, bool force_zip64) {
  const bool big_size = force_zip64 || m.size >= kSaturated32;
  const bool big_offset = force_zip64 || m.local_header_offset >= kSaturated32;
  // Only the saturated fields appear in the ZIP64 field, in the order usize, csize, offset.
  const uint64_t zip64_bytes = 8 * (2 * big_size + big_offset);
  const uint16_t version = (big_size || big_offset) ? kVersionZip64 : kVersionClassic;
  RecordBytes r;
  r.u32(kCentralHeaderSignature).u16(kMadeByUnix | version).u16(version);
  r.u16(m.flags()).u16(0).u16(kDosTime).u16(kDosDate).u32(m.crc);
  r.u32(big_size ? kSaturated32 : m.size).u32(big_size ? kSaturated32 : m.size);
  r.u16(m.name.size()).u16(zip64_bytes > 0 ? zip64_bytes + 4 : 0).u16(0).u16(0).u16(0);
  r.u32(kRegularFile0644).u32(big_offset ? kSaturated32 : m.local_header_offset).text(m.name);
  if (zip64_bytes > 0) {
    r.u16(kZip64ExtraId).u16(zip64_bytes);
    if (big_size) r.u64(m.size).u64(m.size);
    if (big_offset) r.u64(m.local_header_offset);
  }
  return r.bytes();
}

// The ZIP64 end record and locator when needed, then the classic end record.
std::vector<uint8_t> end_records(uint64_t count, uint64_t directory_offset, uint64_t directory_size,
                                 bool force_zip64) {
  const bool zip64 = force_zip64 || count >= kSaturated16 || directory_offset >= kSaturated32 ||
                     directory_size >= kSaturated32;
  RecordBytes r;
  if (zip64) {
    const uint64_t record_offset = directory_offset + directory_size;
    r.u32(kZip64EndRecordSignature).u64(44).u16(kMadeByUnix | kVersionZip64).u16(kVersionZip64);
    r.u32(0).u32(0).u64(count).u64(count).u64(directory_size).u64(directory_offset);
    r.u32(kZip64LocatorSignature).u32(0).u64(record_offset).u32(1);
  }
  r.u32(kEndRecordSignature).u16(0).u16(0);
  r.u16(std::min(count, kSaturated16)).u16(std::min(count, kSaturated16));
  r.u32(std::min(directory_size, kSaturated32)).u32(std::min(directory_offset, kSaturated32));
  r.u16(0);
  return r.bytes();
}

}  // namespace

struct ZipWriter::State {
  std::string path;
  std::optional<StagedOutput> staged;  // published by finish, removed by discard
  std::string temporary;               // its staging path, for messages
  int fd = -1;
  bool force_zip64 = false;
  std::vector<uint8_t> buffer;  // the bytes after the first `flushed` of the file
  uint64_t flushed = 0;
  std::vector<WrittenMember> members;
  WrittenMember current;  // the open member
  bool finished = false;

  ~State() { discard(); }

  uint64_t end() const { return flushed + buffer.size(); }
  void discard();
  Status io_error(std::string_view doing) const;
  Status write_at(uint64_t offset, std::span<const uint8_t> bytes) const;
  Status flush();
  Status append(std::span<const uint8_t> bytes);
  Status patch(uint64_t offset, std::span<const uint8_t> bytes);
  Status write_directory();
  Status publish();
};

void ZipWriter::State::discard() {
  if (fd >= 0) ::close(fd);
  fd = -1;
  if (!finished) staged.reset();
}

Status ZipWriter::State::io_error(std::string_view doing) const {
  return error(ErrorCode::kIo, quote_name(path) + ": " + std::string(doing) + " " +
                                   quote_name(temporary) + " failed: " + std::strerror(errno));
}

Status ZipWriter::State::write_at(uint64_t offset, std::span<const uint8_t> bytes) const {
  while (!bytes.empty()) {
    const ssize_t done = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      if (done == 0) errno = EIO;
      return io_error("writing at offset " + std::to_string(offset) + " of");
    }
    bytes = bytes.subspan(static_cast<size_t>(done));
    offset += static_cast<uint64_t>(done);
  }
  return Status::ok();
}

Status ZipWriter::State::flush() {
  QD_RETURN_IF_ERROR(write_at(flushed, buffer));
  flushed += buffer.size();
  buffer.clear();
  return Status::ok();
}

Status ZipWriter::State::append(std::span<const uint8_t> bytes) {
  if (buffer.size() + bytes.size() > kBufferBytes) QD_RETURN_IF_ERROR(flush());
  if (bytes.size() >= kBufferBytes) {  // large pieces go straight to the file
    QD_RETURN_IF_ERROR(write_at(flushed, bytes));
    flushed += bytes.size();
    return Status::ok();
  }
  buffer.insert(buffer.end(), bytes.begin(), bytes.end());
  return Status::ok();
}

// Rewrites bytes already appended, in the buffer or in the file.
Status ZipWriter::State::patch(uint64_t offset, std::span<const uint8_t> bytes) {
  if (offset < flushed && offset + bytes.size() > flushed) QD_RETURN_IF_ERROR(flush());
  if (offset < flushed) return write_at(offset, bytes);
  std::copy(bytes.begin(), bytes.end(),
            buffer.begin() + static_cast<std::ptrdiff_t>(offset - flushed));
  return Status::ok();
}

Status ZipWriter::State::write_directory() {
  const uint64_t directory_offset = end();
  for (const WrittenMember& m : members) QD_RETURN_IF_ERROR(append(central_header(m, force_zip64)));
  const uint64_t directory_size = end() - directory_offset;
  QD_RETURN_IF_ERROR(
      append(end_records(members.size(), directory_offset, directory_size, force_zip64)));
  return flush();
}

// Syncs the temporary and publishes it (qnn_debug/base/output_file.h), so a replaced target is the
// old file or the whole new one, never a part.
Status ZipWriter::State::publish() {
  const int closing = fd;
  fd = -1;
  if (::close(closing) != 0) return io_error("closing");
  QD_RETURN_IF_ERROR(staged->publish(/*durable=*/true));
  finished = true;
  return Status::ok();
}

ZipWriter::ZipWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
ZipWriter::ZipWriter(ZipWriter&&) noexcept = default;
ZipWriter& ZipWriter::operator=(ZipWriter&&) noexcept = default;
ZipWriter::~ZipWriter() = default;

Result<ZipWriter> ZipWriter::create(const std::string& path, bool force_zip64) {
  if (!std::filesystem::path(path).has_filename()) {
    return error(ErrorCode::kInvalidArgument, quote_name(path) + ": not a file name");
  }
  auto state = std::make_unique<State>();
  state->path = path;
  state->force_zip64 = force_zip64;
  state->buffer.reserve(kBufferBytes);
  QD_ASSIGN_OR_RETURN(StagedOutput staged, StagedOutput::prepare(path, "partial"));
  state->temporary = staged.staging_path();
  state->staged.emplace(std::move(staged));
  state->fd = ::open(state->temporary.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (state->fd < 0) return state->io_error("opening");
  return ZipWriter(std::move(state));
}

Status ZipWriter::begin_member(std::string name, uint64_t size) {
  State& s = *state_;
  const bool zip64_sizes = s.force_zip64 || size >= kSaturated32;
  s.current = WrittenMember{std::move(name), size, s.end(), 0, zip64_sizes};
  return s.append(local_header(s.current));  // its CRC is patched in by end_member
}

Status ZipWriter::write(std::span<const uint8_t> bytes) {
  State& s = *state_;
  s.current.crc = static_cast<uint32_t>(crc32_z(s.current.crc, bytes.data(), bytes.size()));
  return s.append(bytes);
}

Status ZipWriter::end_member() {
  State& s = *state_;
  QD_RETURN_IF_ERROR(s.patch(s.current.local_header_offset, local_header(s.current)));
  s.members.push_back(std::move(s.current));
  return Status::ok();
}

Status ZipWriter::finish() {
  State& s = *state_;
  QD_RETURN_IF_ERROR(s.write_directory());
  return s.publish();
}

void ZipWriter::discard() {
  if (state_) state_->discard();
}

}  // namespace qd::importers
