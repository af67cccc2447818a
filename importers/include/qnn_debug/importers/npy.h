// NumPy .npy arrays and .npz archives (numpy.lib.format, NEP 1): read arrays numpy wrote, and
// write .npz files numpy.load reads. Data is streamed in the caller's pieces, so memory stays
// bounded whatever the array size.
//
// Errors are values; no exception leaves the API (running out of memory is ErrorCode::kNoMemory).
// Every message is one line that starts with the quoted file path, followed inside an .npz by the
// quoted member name ("'a.npz': member 'run0/conv.npy': ...").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/status.h"

namespace qd::importers {

// What an .npy preamble says, checked: a supported descr, rank <= kMaxRank, at most 2^60
// elements.
struct NpyHeader {
  uint8_t version_major = 1;      // 1, 2 or 3 (the minor version is always 0)
  std::string descr;              // as written, e.g. "<f4"
  DType dtype = DType::kFloat32;  // a plain numeric type or BOOL_8, never a fixed-point one
  bool big_endian = false;        // the data is big-endian; readers deliver it little-endian
  bool fortran_order = false;     // column-major data: as C order it has the reversed shape
  std::vector<uint64_t> shape;    // empty for a 0-d array
  uint64_t element_count = 1;     // the product of shape (1 for 0-d)
  uint64_t item_bytes = 4;        // 1, 2, 4 or 8
  uint64_t data_offset = 0;       // bytes before the data: magic, version, length, dict
  uint64_t data_bytes = 0;        // element_count * item_bytes
};

// The descr numpy reads `dtype`'s values with ("<f4", "|i1", "|b1"): fixed-point types as their
// storage integers. kInvalidArgument for BFLOAT_16 and the 4-bit types, which numpy lacks.
Result<std::string> npy_descr(DType dtype);

// Reads the next bytes of a stream into `out`: all of them unless the stream ends first; returns
// how many. ZipMemberReader::read and positioned file reads have this form.
using NpyByteSource = std::function<Result<size_t>(std::span<uint8_t> out)>;

// Reads and checks the preamble at the start of `source`, leaving it positioned at the data.
// `context` starts every message (the quoted path, and the member in an npz). When
// `stream_bytes` (the whole .npy's length) is given, the data must fill the rest exactly.
// The dict is parsed as numpy writes it, not as general Python: single or double quoted strings
// without escapes, True/False, int tuples ("(3,)", "()", an "L" suffix allowed), the three keys
// descr, fortran_order and shape in any order, spaces and a trailing comma.
// Errors (kCorrupt): wrong magic, a version other than 1.0/2.0/3.0, a header over 1 MiB or past
// the end of the stream, a malformed dict (syntax, a missing, unknown or repeated key, a negative
// dimension), an unsupported descr (complex, strings, objects, structured, datetime...), too
// many dimensions or elements, data shorter (truncated) or longer (trailing bytes) than the
// header states. Errors of `source` are passed through.
Result<NpyHeader> parse_npy_header(const NpyByteSource& source,
                                   std::optional<uint64_t> stream_bytes, std::string_view context);

// Streams one array's data, in order and little-endian. Movable, not copyable; one thread at a
// time. Stays usable after the NpzReader it came from is moved or destroyed.
class NpyArrayReader {
 public:
  // Opens a plain .npy file and checks its header against the file size. Errors: those of
  // parse_npy_header, kNotFound (no such file), kIo (cannot be opened or read, not a regular
  // file), kNoMemory.
  static Result<NpyArrayReader> open_file(const std::string& path);

  NpyArrayReader(NpyArrayReader&&) noexcept;
  NpyArrayReader& operator=(NpyArrayReader&&) noexcept;
  ~NpyArrayReader();

  const NpyHeader& header() const;

  // Fills `out` with the next whole elements of the data, converted to little-endian, and returns
  // how many bytes: the largest multiple of item_bytes that fits, fewer only at the end, 0 once
  // everything was delivered. In an npz the call that delivers the last byte also has the zip
  // CRC checked. Errors: kInvalidArgument (`out` smaller than one element while data remains),
  // kCorrupt (the data ends early, a zip CRC mismatch, a corrupt deflate stream), kIo, kState
  // (moved-from reader). Any error but kInvalidArgument is final: later calls return it again.
  Result<size_t> read(std::span<uint8_t> out);

  // Data bytes not yet delivered.
  uint64_t remaining() const;

 private:
  friend class NpzReader;
  struct State;
  explicit NpyArrayReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// One array of an npz: the key numpy.load shows (the member name without ".npy"; it may contain
// '/') and its checked header.
struct NpzArray {
  std::string key;
  NpyHeader header;
};

class NpzReader {
 public:
  // Opens an npz (stored members as np.savez writes, or deflated as np.savez_compressed) and
  // parses every member's header, checking it against the member's size. Errors: those of
  // ZipArchive::open and parse_npy_header, kCorrupt for a member whose name does not end in
  // ".npy" or whose name appears twice.
  static Result<NpzReader> open(const std::string& path);

  const std::string& path() const;

  // Every array, in archive order.
  const std::vector<NpzArray>& arrays() const;

  // A reader of arrays()[index]'s data. Errors: kInvalidArgument (index out of range), those of
  // ZipArchive::open_member, kCorrupt if the member no longer holds the header it held at open.
  Result<NpyArrayReader> open_array(size_t index) const;

  NpzReader(NpzReader&&) noexcept;
  NpzReader& operator=(NpzReader&&) noexcept;
  ~NpzReader();

 private:
  struct State;
  explicit NpzReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Writes an npz numpy.load reads (allow_pickle=False is enough): one stored member "<key>.npy"
// per array, C order, little-endian, a 1.0 header (2.0 if it would exceed 65535 bytes) padded so
// the data starts at a multiple of 64 bytes. ZIP64 records are written where a size, an offset or
// the member count does not fit the classic fields. Everything goes to a temporary file beside
// the target, renamed over it by finish(); an unfinished or failed writer removes it, so the
// target is never a partial file. Movable, not copyable, one thread at a time.
//
// Calls: begin_array, write any number of times, end_array; repeat; then finish. Errors of
// begin_array's checks and calls out of order (kState) change nothing and may be retried
// differently; any other error is final: the temporary is removed and later calls return it.
class NpzWriter {
 public:
  enum class Zip64 { kWhenNeeded, kAlways };

  // Creates the temporary file in the target's folder. kAlways writes ZIP64 records for every
  // member and the end of the archive, as numpy does; readers that know ZIP64 accept both.
  // Errors: kInvalidArgument (`path` ends in '/'), kIo (the folder cannot be written), kNoMemory.
  static Result<NpzWriter> create(const std::string& path, Zip64 zip64 = Zip64::kWhenNeeded);

  NpzWriter(NpzWriter&&) noexcept;
  NpzWriter& operator=(NpzWriter&&) noexcept;
  ~NpzWriter();  // removes the temporary unless finish() succeeded

  // Starts the member "<key>.npy" for an array of `dtype` and `shape` (empty: 0-d). Fixed-point
  // dtypes are written as their storage integers (SFIXED_POINT_8 as int8, UFIXED_POINT_16 as
  // uint16...). Errors: kInvalidArgument (an empty key, one with a NUL byte or invalid UTF-8, over
  // 65000 bytes, or already written; BFLOAT_16 or a 4-bit dtype, which numpy lacks: convert
  // first; rank > kMaxRank; over 2^60 elements), kState (an array is open, or finished).
  Status begin_array(std::string_view key, DType dtype, std::span<const uint64_t> shape);

  // Appends data bytes of the open array, little-endian, in C order, in pieces of any size.
  // Errors: kState (no open array), kInvalidArgument (more bytes than the shape holds), kIo.
  Status write(std::span<const uint8_t> bytes);

  // Completes the open array. Errors: kInvalidArgument (fewer bytes written than the shape
  // holds), kState (no open array), kIo.
  Status end_array();

  // Writes the central directory, syncs, and renames the temporary over the target path.
  // Errors: kState (an array is open, or already finished), kIo.
  Status finish();

 private:
  struct State;
  explicit NpzWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace qd::importers
