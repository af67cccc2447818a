#include "qnn_debug/importers/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <new>
#include <unordered_set>
#include <utility>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/etdump/store.h"
#include "zip_archive.h"

namespace qd::importers {
namespace {

constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr size_t kMagicSize = sizeof kMagic;
constexpr size_t kPrefixV1 = 10;  // magic, major, minor, 2-byte header length
constexpr size_t kPrefixV2 = 12;  // the same with a 4-byte header length (versions 2.0 and 3.0)
// numpy's own reader refuses headers over 10 KB unless told otherwise; 1 MiB is ample for any
// dict numpy writes while keeping a hostile length from allocating gigabytes.
constexpr uint32_t kMaxHeaderBytes = uint32_t{1} << 20;
constexpr uint64_t kMaxElements = uint64_t{1} << 60;  // elements * 8 bytes still fits in 64 bits
constexpr size_t kArrayAlign = 64;                    // numpy aligns the data to 64 bytes

// The descr kinds and sizes this module maps onto store dtypes (reading) and back (writing).
struct DescrType {
  char kind;
  uint8_t size;
  DType dtype;
};
constexpr DescrType kDescrTypes[] = {
    {'f', 2, DType::kFloat16}, {'f', 4, DType::kFloat32}, {'f', 8, DType::kFloat64},
    {'i', 1, DType::kInt8},    {'i', 2, DType::kInt16},   {'i', 4, DType::kInt32},
    {'i', 8, DType::kInt64},   {'u', 1, DType::kUInt8},   {'u', 2, DType::kUInt16},
    {'u', 4, DType::kUInt32},  {'u', 8, DType::kUInt64},  {'b', 1, DType::kBool8},
};

Status corrupt(std::string_view context, const std::string& what) {
  return error(ErrorCode::kCorrupt, std::string(context) + ": " + what);
}

std::string member_context(const std::string& path, std::string_view member) {
  return quote_name(path) + ": member " + quote_name(member);
}

// The shape as Python prints a tuple: "()", "(3,)", "(2, 3)".
std::string python_shape(std::span<const uint64_t> shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The element count of `shape`, or nullopt beyond kMaxElements (each dimension too, so that a
// zero elsewhere cannot hide an absurd one).
std::optional<uint64_t> element_count(std::span<const uint64_t> shape) {
  uint64_t count = 1;
  for (const uint64_t dim : shape) {
    if (dim > kMaxElements) return std::nullopt;
    if (dim != 0 && count > kMaxElements / dim) return std::nullopt;
    count *= dim;
  }
  return count;
}

// ---- the header dict ---------------------------------------------------------------------------

struct HeaderDict {
  std::optional<std::string> descr;
  bool descr_is_list = false;  // a structured dtype: `descr` holds the list's text
  std::optional<bool> fortran_order;
  std::optional<std::vector<uint64_t>> shape;
};

// A parser for the Python dict literal numpy writes. Its errors are kCorrupt with a message
// saying what was expected where and what was found; the caller adds the context.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Result<HeaderDict> parse() {
    HeaderDict dict;
    QD_RETURN_IF_ERROR(expect('{', "'{' opening the header dict"));
    while (!consume('}')) {
      QD_RETURN_IF_ERROR(parse_entry(dict));
      if (consume(',')) continue;  // a trailing comma before '}' is what numpy writes
      QD_RETURN_IF_ERROR(expect('}', "',' or '}' after a value"));
      break;
    }
    skip_spaces();
    if (pos_ != text_.size()) return unexpected("only spaces after the closing '}'");
    return dict;
  }

 private:
  void skip_spaces() {
    while (pos_ < text_.size() &&
           std::string_view(" \t\n\r\f\v").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status expect(char c, std::string_view what) {
    return consume(c) ? Status::ok() : unexpected(what);
  }
  Status unexpected(std::string_view what) const {
    const std::string found =
        pos_ >= text_.size() ? "the end of the header" : quote_name(text_.substr(pos_, 12));
    return error(ErrorCode::kCorrupt, "expected " + std::string(what) + " at offset " +
                                          std::to_string(pos_) + ", found " + found);
  }

  Status parse_entry(HeaderDict& dict);
  Result<std::string> parse_string(std::string_view what);
  Result<std::string> parse_list_text();
  Result<bool> parse_bool();
  Result<std::vector<uint64_t>> parse_shape();
  Result<uint64_t> parse_dimension();

  std::string_view text_;
  size_t pos_ = 0;
};

Status HeaderParser::parse_entry(HeaderDict& dict) {
  QD_ASSIGN_OR_RETURN(const std::string key, parse_string("a quoted key or '}'"));
  QD_RETURN_IF_ERROR(expect(':', "':' after the key " + quote_name(key)));
  const bool repeated = (key == "descr" && dict.descr) ||
                        (key == "fortran_order" && dict.fortran_order) ||
                        (key == "shape" && dict.shape);
  if (repeated) return error(ErrorCode::kCorrupt, "the key " + quote_name(key) + " appears twice");
  if (key == "descr") {
    skip_spaces();
    dict.descr_is_list = pos_ < text_.size() && text_[pos_] == '[';
    QD_ASSIGN_OR_RETURN(dict.descr,
                        dict.descr_is_list ? parse_list_text() : parse_string("a quoted descr"));
  } else if (key == "fortran_order") {
    QD_ASSIGN_OR_RETURN(dict.fortran_order, parse_bool());
  } else if (key == "shape") {
    QD_ASSIGN_OR_RETURN(dict.shape, parse_shape());
  } else {
    return error(ErrorCode::kCorrupt, "unknown key " + quote_name(key) +
                                          " (expected only 'descr', 'fortran_order', 'shape')");
  }
  return Status::ok();
}

// A string in single or double quotes. numpy never writes escapes, so a backslash is refused
// rather than interpreted.
Result<std::string> HeaderParser::parse_string(std::string_view what) {
  skip_spaces();
  if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return unexpected(what);
  const char quote = text_[pos_];
  const size_t start = pos_ + 1;
  const size_t end = text_.find(quote, start);
  if (end == std::string_view::npos) return unexpected("a closing quote for the string");
  const std::string_view content = text_.substr(start, end - start);
  if (content.find('\\') != std::string_view::npos) {
    pos_ = start + content.find('\\');
    return unexpected("a string without escape sequences");
  }
  pos_ = end + 1;
  return std::string(content);
}

// The text of a list (a structured dtype's descr), kept only to name it in the error.
Result<std::string> HeaderParser::parse_list_text() {
  const size_t start = pos_;
  int depth = 0;
  char quote = 0;
  for (; pos_ < text_.size(); ++pos_) {
    const char c = text_[pos_];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '(') {
      ++depth;
    } else if ((c == ']' || c == ')') && --depth == 0) {
      ++pos_;
      return std::string(text_.substr(start, pos_ - start));
    }
  }
  return unexpected("the end of the descr list");
}

Result<bool> HeaderParser::parse_bool() {
  skip_spaces();
  for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
    const std::string_view name = word;
    if (text_.substr(pos_, name.size()) == name) {
      const size_t after = pos_ + name.size();
      if (after < text_.size() &&
          (std::isalnum(static_cast<unsigned char>(text_[after])) || text_[after] == '_')) {
        break;
      }
      pos_ = after;
      return value;
    }
  }
  return unexpected("True or False for 'fortran_order'");
}

// "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int to Python, not a tuple, and numpy refuses it.
Result<std::vector<uint64_t>> HeaderParser::parse_shape() {
  QD_RETURN_IF_ERROR(expect('(', "a tuple '(' for 'shape'"));
  std::vector<uint64_t> shape;
  if (consume(')')) return shape;
  while (true) {
    if (shape.size() == static_cast<size_t>(kMaxRank)) {
      return error(ErrorCode::kCorrupt, "the shape has more than " + std::to_string(kMaxRank) +
                                            " dimensions, the most a stored tensor can have");
    }
    QD_ASSIGN_OR_RETURN(const uint64_t dim, parse_dimension());
    shape.push_back(dim);
    if (consume(',')) {
      if (consume(')')) return shape;
      continue;
    }
    QD_RETURN_IF_ERROR(expect(')', "',' or ')' in the shape tuple"));
    if (shape.size() == 1) {
      return error(ErrorCode::kCorrupt,
                   "the shape (" + std::to_string(shape[0]) +
                       ") is an int to Python, not a tuple: a one-element shape needs a "
                       "trailing comma, as in (3,)");
    }
    return shape;
  }
}

// A non-negative Python int, with the "L" suffix of Python 2 longs allowed.
Result<uint64_t> HeaderParser::parse_dimension() {
  skip_spaces();
  if (pos_ < text_.size() && text_[pos_] == '-') {
    return error(ErrorCode::kCorrupt,
                 "negative dimension at offset " + std::to_string(pos_) + " of the shape");
  }
  if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
    return unexpected("a dimension (a non-negative integer)");
  }
  uint64_t value = 0;
  const size_t start = pos_;
  for (; pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])); ++pos_) {
    value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
    if (value > kMaxElements) {
      return error(ErrorCode::kCorrupt, "the dimension at offset " + std::to_string(start) +
                                            " exceeds the limit of 2^60 elements");
    }
  }
  if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
  return value;
}

// ---- header checks -----------------------------------------------------------------------------

std::string_view describe_descr_kind(char kind) {
  switch (kind) {
    case 'c':
      return " (complex numbers)";
    case 'U':
      return " (unicode strings)";
    case 'S':
    case 'a':
      return " (byte strings)";
    case 'O':
      return " (Python objects, which need pickle)";
    case 'M':
      return " (datetimes)";
    case 'm':
      return " (timedeltas)";
    case 'V':
      return " (raw void records)";
    default:
      return "";
  }
}

// Sets dtype, item_bytes and big_endian from header.descr.
Status apply_descr(std::string_view context, bool is_list, NpyHeader& header) {
  const std::string& descr = header.descr;
  const std::string unsupported = "unsupported descr " + quote_name(descr);
  if (is_list) return corrupt(context, unsupported + " (a structured dtype)");
  if (descr.size() == 3 && std::string_view("<>=|").find(descr[0]) != std::string_view::npos) {
    for (const DescrType& type : kDescrTypes) {
      if (descr[1] != type.kind || descr[2] != static_cast<char>('0' + type.size)) continue;
      if (descr[0] == '|' && type.size > 1) {
        return corrupt(context, unsupported + ": '|' (no byte order) on a " +
                                    std::to_string(type.size) + "-byte type");
      }
      header.dtype = type.dtype;
      header.item_bytes = type.size;
      header.big_endian = descr[0] == '>' && type.size > 1;  // '=' is native: little-endian here
      return Status::ok();
    }
  }
  const char kind = descr.size() >= 2 ? descr[1] : '\0';
  return corrupt(context, unsupported + std::string(describe_descr_kind(kind)) +
                              ": only bool, int8-64, uint8-64 and float16/32/64 are read");
}

// Fills the header from the parsed dict: every key present, the descr supported, the shape small
// enough.
Status apply_dict(std::string_view context, HeaderDict dict, NpyHeader& header) {
  for (const auto& [present, key] : {std::pair{dict.descr.has_value(), "descr"},
                                     std::pair{dict.fortran_order.has_value(), "fortran_order"},
                                     std::pair{dict.shape.has_value(), "shape"}}) {
    if (!present) {
      return corrupt(context,
                     std::string("malformed .npy header: the key '") + key + "' is missing");
    }
  }
  header.descr = std::move(*dict.descr);
  header.fortran_order = *dict.fortran_order;
  header.shape = std::move(*dict.shape);
  QD_RETURN_IF_ERROR(apply_descr(context, dict.descr_is_list, header));
  const std::optional<uint64_t> count = element_count(header.shape);
  if (!count) {
    return corrupt(context, "shape " + python_shape(header.shape) + " has more than 2^60 elements");
  }
  header.element_count = *count;
  header.data_bytes = *count * header.item_bytes;
  return Status::ok();
}

// The data must fill the rest of the stream exactly.
Status check_data_length(std::string_view context, const NpyHeader& header, uint64_t stream_bytes) {
  const uint64_t present = stream_bytes - header.data_offset;
  const std::string needed = std::to_string(header.data_bytes) + " bytes of data that shape " +
                             python_shape(header.shape) + " of " + header.descr + " needs";
  if (present < header.data_bytes) {
    return corrupt(context, "truncated: " + std::to_string(present) +
                                " bytes follow the header, "
                                "short of the " +
                                needed);
  }
  if (present > header.data_bytes) {
    return corrupt(context, std::to_string(present - header.data_bytes) +
                                " trailing bytes after the " + needed);
  }
  return Status::ok();
}

// Reads exactly `out` or says the stream ended inside `what`.
Status read_exactly(const NpyByteSource& source, std::span<uint8_t> out, uint64_t offset,
                    std::string_view context, std::string_view what) {
  QD_ASSIGN_OR_RETURN(const size_t got, source(out));
  if (got == out.size()) return Status::ok();
  return corrupt(context, "truncated: the stream ends at offset " + std::to_string(offset + got) +
                              ", inside " + std::string(what));
}

// Reads the magic, version and header length; returns the header length and sets version_major
// and data_offset (to the start of the dict for now).
Result<uint32_t> read_prefix(const NpyByteSource& source, std::string_view context,
                             NpyHeader& header) {
  uint8_t prefix[kPrefixV2] = {};
  QD_ASSIGN_OR_RETURN(const size_t got, source(std::span(prefix, kPrefixV1)));
  const size_t compared = std::min(got, kMagicSize);
  if (std::memcmp(prefix, kMagic, compared) != 0) {
    const std::string_view start(reinterpret_cast<const char*>(prefix), compared);
    return corrupt(context, "not an .npy array: it starts with " + quote_name(start) +
                                ", not the magic '\\x93NUMPY'");
  }
  if (got < kPrefixV1) {
    return corrupt(context, "truncated: the stream ends at offset " + std::to_string(got) +
                                ", inside the 10-byte .npy preamble");
  }
  const uint8_t major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0) {
    return corrupt(context, "unsupported .npy format version " + std::to_string(major) + "." +
                                std::to_string(minor) + " (known: 1.0, 2.0, 3.0)");
  }
  header.version_major = major;
  if (major == 1) {
    header.data_offset = kPrefixV1;
    return static_cast<uint32_t>(prefix[8] | prefix[9] << 8);
  }
  QD_RETURN_IF_ERROR(read_exactly(source, std::span(prefix + kPrefixV1, 2), kPrefixV1, context,
                                  "the 12-byte .npy preamble"));
  header.data_offset = kPrefixV2;
  return static_cast<uint32_t>(prefix[8] | prefix[9] << 8 | prefix[10] << 16 |
                               static_cast<uint32_t>(prefix[11]) << 24);
}

Result<NpyHeader> parse_header_unguarded(const NpyByteSource& source,
                                         std::optional<uint64_t> stream_bytes,
                                         std::string_view context) {
  NpyHeader header;
  QD_ASSIGN_OR_RETURN(const uint32_t length, read_prefix(source, context, header));
  if (length > kMaxHeaderBytes) {
    return corrupt(context,
                   "the .npy header length " + std::to_string(length) + " is over the 1 MiB limit");
  }
  const uint64_t end = header.data_offset + length;
  if (stream_bytes && end > *stream_bytes) {
    return corrupt(context, "truncated: the .npy header of " + std::to_string(length) +
                                " bytes at offset " + std::to_string(header.data_offset) +
                                " runs past the end of the " + std::to_string(*stream_bytes) +
                                "-byte array");
  }
  std::string text(length, '\0');
  QD_RETURN_IF_ERROR(read_exactly(source,
                                  std::span(reinterpret_cast<uint8_t*>(text.data()), text.size()),
                                  header.data_offset, context, "the .npy header"));
  Result<HeaderDict> dict = HeaderParser(text).parse();
  if (!dict) {
    return corrupt(context, "malformed .npy header: " + dict.status().message() +
                                "; the header reads " + quote_name(text));
  }
  header.data_offset = end;
  QD_RETURN_IF_ERROR(apply_dict(context, std::move(dict.value()), header));
  if (stream_bytes) QD_RETURN_IF_ERROR(check_data_length(context, header, *stream_bytes));
  return header;
}

// ---- byte sources ------------------------------------------------------------------------------

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // As NpyByteSource: all of `out` unless the stream ends first.
  virtual Result<size_t> read(std::span<uint8_t> out) = 0;
  NpyByteSource as_function() {
    return [this](std::span<uint8_t> out) { return read(out); };
  }
};

class FileSource final : public ByteSource {
 public:
  explicit FileSource(std::shared_ptr<const InputFile> file) : file_(std::move(file)) {}
  Result<size_t> read(std::span<uint8_t> out) override {
    const uint64_t left = file_->size() - std::min(offset_, file_->size());
    const size_t count = static_cast<size_t>(std::min<uint64_t>(out.size(), left));
    QD_RETURN_IF_ERROR(file_->read_at(offset_, out.first(count), "the .npy array"));
    offset_ += count;
    return count;
  }

 private:
  std::shared_ptr<const InputFile> file_;
  uint64_t offset_ = 0;
};

class MemberSource final : public ByteSource {
 public:
  explicit MemberSource(ZipMemberReader reader) : reader_(std::move(reader)) {}
  Result<size_t> read(std::span<uint8_t> out) override {
    if (out.empty()) return size_t{0};  // the zip reader refuses empty buffers
    return reader_.read(out);
  }

 private:
  ZipMemberReader reader_;
};

// Converts whole big-endian items to little-endian in place.
void swap_items(std::span<uint8_t> data, size_t item_bytes) {
  for (size_t at = 0; at + item_bytes <= data.size(); at += item_bytes) {
    std::reverse(data.begin() + static_cast<std::ptrdiff_t>(at),
                 data.begin() + static_cast<std::ptrdiff_t>(at + item_bytes));
  }
}

struct OpenedMember {
  std::unique_ptr<ByteSource> source;
  NpyHeader header;
};

// Opens an npz member and reads its header, leaving the member at the start of the data.
Result<OpenedMember> open_member_array(const ZipArchive& archive, const ZipEntry& entry,
                                       std::string_view context) {
  QD_ASSIGN_OR_RETURN(ZipMemberReader reader, archive.open_member(entry));
  OpenedMember opened{std::make_unique<MemberSource>(std::move(reader)), {}};
  QD_ASSIGN_OR_RETURN(opened.header, parse_npy_header(opened.source->as_function(),
                                                      entry.uncompressed_size, context));
  return opened;
}

}  // namespace

Result<NpyHeader> parse_npy_header(const NpyByteSource& source,
                                   std::optional<uint64_t> stream_bytes, std::string_view context) {
  try {
    return parse_header_unguarded(source, stream_bytes, context);
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 std::string(context) + ": out of memory reading the .npy header");
  }
}

// ---- NpyArrayReader ----------------------------------------------------------------------------

struct NpyArrayReader::State {
  std::unique_ptr<ByteSource> source;
  std::string context;
  NpyHeader header;
  uint64_t remaining = 0;
  Status failure;
};

NpyArrayReader::NpyArrayReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
NpyArrayReader::NpyArrayReader(NpyArrayReader&&) noexcept = default;
NpyArrayReader& NpyArrayReader::operator=(NpyArrayReader&&) noexcept = default;
NpyArrayReader::~NpyArrayReader() = default;

Result<NpyArrayReader> NpyArrayReader::open_file(const std::string& path) {
  try {
    QD_ASSIGN_OR_RETURN(std::shared_ptr<const InputFile> file,
                        InputFile::open(path, "an .npy file"));
    auto state = std::make_unique<State>();
    state->source = std::make_unique<FileSource>(file);
    state->context = quote_name(path);
    QD_ASSIGN_OR_RETURN(state->header, parse_npy_header(state->source->as_function(), file->size(),
                                                        state->context));
    state->remaining = state->header.data_bytes;
    return NpyArrayReader(std::move(state));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, quote_name(path) + ": out of memory opening the array");
  }
}

const NpyHeader& NpyArrayReader::header() const {
  static const NpyHeader kNoHeader;
  return state_ ? state_->header : kNoHeader;
}

uint64_t NpyArrayReader::remaining() const { return state_ ? state_->remaining : 0; }

Result<size_t> NpyArrayReader::read(std::span<uint8_t> out) {
  if (!state_) return error(ErrorCode::kState, "npy: read from a moved-from array reader");
  State& s = *state_;
  if (!s.failure.is_ok()) return s.failure;
  if (s.remaining == 0) return size_t{0};
  const size_t item = static_cast<size_t>(s.header.item_bytes);
  if (out.size() < item) {
    return error(ErrorCode::kInvalidArgument,
                 s.context + ": a read buffer of " + std::to_string(out.size()) +
                     " bytes cannot hold one " + std::to_string(item) + "-byte element");
  }
  const size_t wanted =
      static_cast<size_t>(std::min<uint64_t>(out.size() - out.size() % item, s.remaining));
  Result<size_t> got = s.source->read(out.first(wanted));
  if (!got) {
    s.failure = got.status();
  } else if (*got != wanted) {
    const uint64_t delivered = s.header.data_bytes - s.remaining + *got;
    s.failure = corrupt(s.context, "truncated: the data ends after " + std::to_string(delivered) +
                                       " of the " + std::to_string(s.header.data_bytes) +
                                       " bytes the header states");
  }
  if (!s.failure.is_ok()) return s.failure;
  s.remaining -= wanted;
  if (s.header.big_endian) swap_items(out.first(wanted), item);
  return wanted;
}

// ---- NpzReader ---------------------------------------------------------------------------------

struct NpzReader::State {
  ZipArchive archive;
  std::vector<NpzArray> arrays;
  std::vector<size_t> entry_index;  // arrays[i] is archive.entries()[entry_index[i]]

  // Names each member's array and reads its header.
  Status list_arrays() {
    static constexpr std::string_view kSuffix = ".npy";
    const std::vector<ZipEntry>& entries = archive.entries();
    for (size_t i = 0; i < entries.size(); ++i) {
      const ZipEntry& entry = entries[i];
      const std::string context = member_context(archive.path(), entry.name);
      if (entry.name.size() <= kSuffix.size() || !entry.name.ends_with(kSuffix)) {
        return corrupt(context, "is not an array: npz members are named '<key>.npy'");
      }
      if (archive.find(entry.name) != &entry) {  // find() gives the last of equal names
        return corrupt(context, "appears more than once in the archive");
      }
      QD_ASSIGN_OR_RETURN(OpenedMember opened, open_member_array(archive, entry, context));
      arrays.push_back(
          {entry.name.substr(0, entry.name.size() - kSuffix.size()), std::move(opened.header)});
      entry_index.push_back(i);
    }
    return Status::ok();
  }
};

NpzReader::NpzReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
NpzReader::NpzReader(NpzReader&&) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&&) noexcept = default;
NpzReader::~NpzReader() = default;

Result<NpzReader> NpzReader::open(const std::string& path) {
  try {
    QD_ASSIGN_OR_RETURN(ZipArchive archive, ZipArchive::open(path));
    auto state = std::unique_ptr<State>(new State{std::move(archive), {}, {}});
    QD_RETURN_IF_ERROR(state->list_arrays());
    return NpzReader(std::move(state));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, quote_name(path) + ": out of memory listing the arrays");
  }
}

const std::string& NpzReader::path() const {
  static const std::string kNoPath;
  return state_ ? state_->archive.path() : kNoPath;
}

const std::vector<NpzArray>& NpzReader::arrays() const {
  static const std::vector<NpzArray> kNoArrays;
  return state_ ? state_->arrays : kNoArrays;
}

Result<NpyArrayReader> NpzReader::open_array(size_t index) const {
  if (!state_) return error(ErrorCode::kState, "npz: open_array on a moved-from reader");
  if (index >= state_->arrays.size()) {
    return error(ErrorCode::kInvalidArgument,
                 quote_name(path()) + ": array index " + std::to_string(index) + " of " +
                     std::to_string(state_->arrays.size()) + " arrays");
  }
  const ZipEntry& entry = state_->archive.entries()[state_->entry_index[index]];
  try {
    auto state = std::make_unique<NpyArrayReader::State>();
    state->context = member_context(path(), entry.name);
    QD_ASSIGN_OR_RETURN(OpenedMember opened,
                        open_member_array(state_->archive, entry, state->context));
    const NpyHeader& listed = state_->arrays[index].header;
    if (opened.header.descr != listed.descr || opened.header.shape != listed.shape ||
        opened.header.data_offset != listed.data_offset ||
        opened.header.fortran_order != listed.fortran_order) {
      return corrupt(state->context, "its header changed since the archive was opened");
    }
    state->source = std::move(opened.source);
    state->header = std::move(opened.header);
    state->remaining = state->header.data_bytes;
    return NpyArrayReader(std::move(state));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory,
                 member_context(path(), entry.name) + ": out of memory opening the array");
  }
}

// ---- NpzWriter ---------------------------------------------------------------------------------

namespace {

constexpr size_t kMaxKeyBytes = 65000;  // the name (key + ".npy") has a 16-bit length field

// The .npy preamble: version 1.0 unless the header needs more than 65535 bytes, padded with
// spaces and a final newline so that the data starts at a multiple of 64 bytes.
std::vector<uint8_t> npy_preamble(std::string_view descr, std::span<const uint64_t> shape) {
  const std::string dict = "{'descr': '" + std::string(descr) +
                           "', 'fortran_order': False, 'shape': " + python_shape(shape) + ", }";
  size_t prefix = kPrefixV1;
  auto padded = [&] {
    return (prefix + dict.size() + 1 + kArrayAlign - 1) / kArrayAlign * kArrayAlign;
  };
  if (padded() - prefix > 0xFFFF) prefix = kPrefixV2;
  const size_t length = padded() - prefix;
  std::vector<uint8_t> bytes(kMagic, kMagic + kMagicSize);
  bytes.push_back(prefix == kPrefixV1 ? 1 : 2);
  bytes.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) bytes.push_back(static_cast<uint8_t>(length >> (8 * i)));
  bytes.insert(bytes.end(), dict.begin(), dict.end());
  bytes.resize(padded() - 1, ' ');
  bytes.push_back('\n');
  return bytes;
}

// Python decodes a name flagged UTF-8 strictly: no overlong forms, surrogates or values past
// U+10FFFF.
bool is_valid_utf8(std::string_view text) {
  struct Form {
    uint8_t lead_mask, lead_bits, payload_mask;
    uint32_t smallest;  // below this the sequence is an overlong form
  };
  static constexpr Form kForms[] = {
      {0xE0, 0xC0, 0x1F, 0x80}, {0xF0, 0xE0, 0x0F, 0x800}, {0xF8, 0xF0, 0x07, 0x10000}};
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t form_index = 0;
    while (form_index < 3 &&
           (lead & kForms[form_index].lead_mask) != kForms[form_index].lead_bits) {
      ++form_index;
    }
    const size_t continuations = form_index + 1;
    if (form_index == 3 || text.size() - i <= continuations) return false;
    const Form& form = kForms[form_index];
    uint32_t code = lead & form.payload_mask;
    for (size_t k = 1; k <= continuations; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = code << 6 | (next & 0x3F);
    }
    if (code < form.smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += continuations + 1;
  }
  return true;
}

}  // namespace

Result<std::string> npy_descr(DType dtype) {
  const std::optional<DTypeInfo> known = dtype_info(static_cast<uint32_t>(dtype));
  if (!known) return error(ErrorCode::kInvalidArgument, "unknown dtype code");
  if (dtype == DType::kBFloat16 || known->bits % 8 != 0) {
    return error(ErrorCode::kInvalidArgument,
                 std::string(known->name) +
                     " has no numpy dtype: convert it first (to float32, or 4-bit values to "
                     "one per byte)");
  }
  static constexpr char kKind[] = {'i', 'u', 'f', 'b'};  // in DTypeKind order
  const uint8_t size = static_cast<uint8_t>(known->bits / 8);
  const char order = size == 1 ? '|' : '<';
  std::string descr(3, order);
  descr[1] = kKind[static_cast<size_t>(known->kind)];
  descr[2] = static_cast<char>('0' + size);
  return descr;
}

struct NpzWriter::State {
  explicit State(ZipWriter writer) : zip(std::move(writer)) {}

  std::string path;
  ZipWriter zip;
  std::unordered_set<std::string> names;
  // The open array, if any.
  bool open = false;
  uint64_t data_expected = 0;
  uint64_t data_written = 0;
  std::string current_context;
  bool finished = false;
  Status failure;

  Status fail(Status status);
  Status check_usable(bool want_open) const;
  Status start_member(std::string_view key, DType dtype, std::span<const uint64_t> shape);
};

// Makes `status` final: later calls return it, and the partial file is removed now.
Status NpzWriter::State::fail(Status status) {
  failure = status;
  zip.discard();
  return status;
}

Status NpzWriter::State::check_usable(bool want_open) const {
  if (!failure.is_ok()) return failure;
  if (finished) return error(ErrorCode::kState, quote_name(path) + ": the npz is already finished");
  if (open && !want_open) {
    return error(ErrorCode::kState, current_context + " is still open: call end_array first");
  }
  if (!open && want_open) {
    return error(ErrorCode::kState, quote_name(path) + ": no array is open: call begin_array");
  }
  return Status::ok();
}

Status NpzWriter::State::start_member(std::string_view key, DType dtype,
                                      std::span<const uint64_t> shape) {
  const std::string context = quote_name(path) + ": array " + quote_name(key);
  auto invalid = [&](const std::string& why) {
    return error(ErrorCode::kInvalidArgument, context + ": " + why);
  };
  if (key.empty()) return invalid("an empty key");
  if (key.size() > kMaxKeyBytes)
    return invalid("a key over " + std::to_string(kMaxKeyBytes) + " bytes");
  if (key.find('\0') != std::string_view::npos) return invalid("a NUL byte in the key");
  if (!is_valid_utf8(key)) return invalid("the key is not valid UTF-8");
  const std::string name = std::string(key) + ".npy";
  if (names.count(name) != 0) return invalid("the key was already written");
  Result<std::string> descr = npy_descr(dtype);
  if (!descr) return invalid(descr.status().message());
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return invalid("rank " + std::to_string(shape.size()) + " is over the limit of " +
                   std::to_string(kMaxRank));
  }
  const std::optional<uint64_t> count = element_count(shape);
  if (!count) return invalid("shape " + python_shape(shape) + " has more than 2^60 elements");
  const std::vector<uint8_t> preamble = npy_preamble(*descr, shape);
  data_expected = *count * (info(dtype).bits / 8);
  data_written = 0;
  current_context = context;
  // From here on the file changes: errors are final.
  names.insert(name);
  open = true;
  Status status = zip.begin_member(name, preamble.size() + data_expected);
  if (status.is_ok()) status = zip.write(preamble);
  if (!status.is_ok()) return fail(status);
  return Status::ok();
}

NpzWriter::NpzWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
NpzWriter::NpzWriter(NpzWriter&&) noexcept = default;
NpzWriter& NpzWriter::operator=(NpzWriter&&) noexcept = default;
NpzWriter::~NpzWriter() = default;

Result<NpzWriter> NpzWriter::create(const std::string& path, Zip64 zip64) {
  try {
    QD_ASSIGN_OR_RETURN(ZipWriter zip, ZipWriter::create(path, zip64 == Zip64::kAlways));
    auto state = std::make_unique<State>(std::move(zip));
    state->path = path;
    return NpzWriter(std::move(state));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, quote_name(path) + ": out of memory creating the writer");
  }
}

Status NpzWriter::begin_array(std::string_view key, DType dtype, std::span<const uint64_t> shape) {
  if (!state_) return error(ErrorCode::kState, "npz: begin_array on a moved-from writer");
  QD_RETURN_IF_ERROR(state_->check_usable(false));
  try {
    return state_->start_member(key, dtype, shape);
  } catch (const std::bad_alloc&) {
    return state_->fail(error(ErrorCode::kNoMemory,
                              quote_name(state_->path) + ": out of memory starting an array"));
  }
}

Status NpzWriter::write(std::span<const uint8_t> bytes) {
  if (!state_) return error(ErrorCode::kState, "npz: write on a moved-from writer");
  State& s = *state_;
  QD_RETURN_IF_ERROR(s.check_usable(true));
  if (bytes.size() > s.data_expected - s.data_written) {
    return s.fail(error(ErrorCode::kInvalidArgument,
                        s.current_context + ": " + std::to_string(bytes.size()) +
                            " more bytes after " + std::to_string(s.data_written) + " exceed the " +
                            std::to_string(s.data_expected) + " bytes its shape holds"));
  }
  if (bytes.empty()) return Status::ok();
  const Status status = s.zip.write(bytes);
  if (!status.is_ok()) return s.fail(status);
  s.data_written += bytes.size();
  return Status::ok();
}

Status NpzWriter::end_array() {
  if (!state_) return error(ErrorCode::kState, "npz: end_array on a moved-from writer");
  State& s = *state_;
  QD_RETURN_IF_ERROR(s.check_usable(true));
  if (s.data_written != s.data_expected) {
    return s.fail(error(ErrorCode::kInvalidArgument,
                        s.current_context + ": ended after " + std::to_string(s.data_written) +
                            " of the " + std::to_string(s.data_expected) +
                            " data bytes its shape holds"));
  }
  try {
    Status status = s.zip.end_member();
    if (!status.is_ok()) return s.fail(status);
    s.open = false;
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return s.fail(error(ErrorCode::kNoMemory, s.current_context + ": out of memory ending it"));
  }
}

Status NpzWriter::finish() {
  if (!state_) return error(ErrorCode::kState, "npz: finish on a moved-from writer");
  State& s = *state_;
  QD_RETURN_IF_ERROR(s.check_usable(false));
  try {
    Status status = s.zip.finish();
    if (status.is_ok()) s.finished = true;
    return status.is_ok() ? status : s.fail(status);
  } catch (const std::bad_alloc&) {
    return s.fail(error(ErrorCode::kNoMemory,
                        quote_name(s.path) + ": out of memory writing the central directory"));
  }
}

}  // namespace qd::importers
