// A small reader for ZIP archives (PKWARE APPNOTE): the ExecuTorch ETRecord (written by Python's
// zipfile) and numpy .npz files; and the writer of the .npz files qnn-debug exports (ZipWriter).
// Members are stored (method 0) or deflated (method 8); ZIP64 sizes and offsets are understood, so
// members larger than 4 GiB can be streamed with bounded memory. Multi-disk archives and encrypted
// members are refused.
//
// The archive reads its file with pread only (no shared file position, no mmap: a file truncated
// while mapped would raise SIGBUS), so one archive may be read from several threads at once.
// Every damaged input is an error value whose message starts with the quoted file path; no
// exception leaves the API (running out of memory is ErrorCode::kNoMemory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd {
class InputFile;  // the open file, shared by an archive and its member readers
}  // namespace qd

namespace qd::importers {

// Record signatures (APPNOTE), the same for the reader and the writer.
inline constexpr uint32_t kEndRecordSignature = 0x06054b50;
inline constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
inline constexpr uint32_t kZip64EndRecordSignature = 0x06064b50;
inline constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
inline constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
inline constexpr uint16_t kZip64ExtraId = 0x0001;

// One member, as the central directory describes it (ZIP64 values already applied).
struct ZipEntry {
  std::string name;     // the raw bytes of the stored name (UTF-8 for Python's zipfile)
  uint16_t method = 0;  // 0 stored, 8 deflate; anything else is listed but cannot be read
  uint16_t flags = 0;   // general-purpose bits; bit 0 = encrypted, bit 3 = data descriptor
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
};

// Yields one member's uncompressed bytes in order. Obtained from ZipArchive::open_member; keeps
// the file open by itself, so it stays usable after the archive is moved or destroyed. Movable,
// not copyable; one reader is for one thread at a time.
class ZipMemberReader {
 public:
  ZipMemberReader(ZipMemberReader&&) noexcept;
  ZipMemberReader& operator=(ZipMemberReader&&) noexcept;
  ~ZipMemberReader();

  // Fills `out` with the next bytes of the member and returns how many: out.size() unless fewer
  // remain. The call that delivers the last byte also checks that the data has exactly the size
  // the central directory states, that a deflate stream ends there with no trailing data, and the
  // CRC-32; if any check fails that call returns the error instead, so a caller that stops after
  // uncompressed_size bytes has still had everything verified. Afterwards it returns 0 (an empty
  // member is verified by the first call, which returns 0).
  // Errors: kCorrupt (CRC mismatch, corrupt or short deflate stream, data past the end of the
  // file), kIo (the read failed), kInvalidArgument (empty `out`), kState (moved-from reader). A
  // kCorrupt or kIo error is final: later calls return it again.
  Result<size_t> read(std::span<uint8_t> out);

  // Uncompressed bytes not yet delivered.
  uint64_t remaining() const;

 private:
  friend class ZipArchive;
  struct State;
  explicit ZipMemberReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class ZipArchive {
 public:
  // Opens `path` and reads its end record(s) and central directory, checking that they are
  // consistent: the directory lies inside the file right before the end record, holds exactly the
  // stated number of entries, and every member's local header and compressed data lie before it.
  // Member data is not read. Errors: kNotFound (no such file), kIo (cannot be opened or read, not
  // a regular file), kCorrupt (not a zip, truncated, bad signature, inconsistent sizes or counts,
  // multi-disk, a central directory over 256 MiB), kNoMemory.
  static Result<ZipArchive> open(const std::string& path);

  const std::string& path() const;

  // Every member, in central directory order.
  const std::vector<ZipEntry>& entries() const;

  // The member named exactly `name` (byte comparison), or null. When a name occurs more than once
  // the last one wins, as in Python's zipfile (which wrote it and whose readers see that one).
  const ZipEntry* find(std::string_view name) const;

  // The whole member, every check of ZipMemberReader::read done. `entry` comes from entries() or
  // find(). Errors: those of open_member and read, and kCorrupt naming the member when its stated
  // uncompressed size is larger than `max_bytes` (checked before anything is allocated; whatever
  // `max_bytes`, a deflated member is never believed beyond 1032 times its compressed size).
  Result<std::vector<uint8_t>> read_all(const ZipEntry& entry, uint64_t max_bytes) const;

  // A streaming reader of the member; memory use is bounded (64 KiB of input buffer plus zlib's
  // ~40 KiB of state) whatever the member's size. Checks the local header (signature, same name
  // as the central directory) and that the data lies before the central directory. Errors:
  // kCorrupt (encrypted member, unsupported method, bad local header, a stored member whose two
  // sizes differ, a deflated one claiming more than 1032 times its compressed size, data past the
  // central directory), kIo, kNoMemory, kState (moved-from archive).
  Result<ZipMemberReader> open_member(const ZipEntry& entry) const;

 private:
  ZipArchive(std::shared_ptr<const InputFile> source, std::vector<ZipEntry> entries,
             uint64_t central_directory_offset);

  std::shared_ptr<const InputFile> source_;
  std::vector<ZipEntry> entries_;
  std::vector<size_t> by_name_;            // indexes into entries_, sorted by (name, index)
  uint64_t central_directory_offset_ = 0;  // member data must end before it
};

// Writes an archive of stored members (method 0) whose sizes are known before their data: the
// .npz files of NpzWriter (npy.h), which checks its arguments and keeps the calls in order.
// ZIP64 records are written where a size, an offset or the member count does not fit the classic
// fields, or for everything with `force_zip64`. Every member carries the same date, so the same
// members give the same bytes. Everything goes to a temporary file beside the target, renamed
// over it by finish(); discard() and the destructor remove it unless finish() succeeded, so the
// target is never a partial file. Movable, not copyable, one thread at a time; no call on a
// moved-from writer.
//
// Calls: begin_member, write until the member's size is reached, end_member; repeat; then finish.
// After an error the archive is unusable: the caller discards it. Running out of memory throws
// std::bad_alloc, for the caller to report.
class ZipWriter {
 public:
  // Creates the temporary file in the target's folder. Errors: kInvalidArgument (`path` ends in
  // '/'), kIo (the folder cannot be written).
  static Result<ZipWriter> create(const std::string& path, bool force_zip64);

  ZipWriter(ZipWriter&&) noexcept;
  ZipWriter& operator=(ZipWriter&&) noexcept;
  ~ZipWriter();  // removes the temporary unless finish() succeeded

  // Writes the local header of member `name` (flagged UTF-8 unless ASCII) of exactly `size`
  // bytes. Errors: kIo.
  Status begin_member(std::string name, uint64_t size);

  // Appends data bytes of the open member. Errors: kIo.
  Status write(std::span<const uint8_t> bytes);

  // Completes the open member: its CRC-32 goes into its local header. Errors: kIo.
  Status end_member();

  // Writes the central directory, syncs, and renames the temporary over the target path.
  // Errors: kIo.
  Status finish();

  // Closes the temporary and removes it, unless finish() succeeded.
  void discard();

 private:
  struct State;
  explicit ZipWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace qd::importers
