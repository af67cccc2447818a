#include "handle_map.h"

#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <system_error>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/naming/naming.h"

namespace qd::naming {

UniqueHandleAppender::UniqueHandleAppender(std::vector<int64_t>& handles) : handles_(handles) {
  if (handles_.size() > kLinearScanLimit) seen_.insert(handles_.begin(), handles_.end());
}

void UniqueHandleAppender::add(int64_t handle) {
  if (seen_.empty()) {
    for (int64_t existing : handles_) {
      if (existing == handle) return;
    }
    handles_.push_back(handle);
    if (handles_.size() > kLinearScanLimit) seen_.insert(handles_.begin(), handles_.end());
    return;
  }
  if (seen_.insert(handle).second) handles_.push_back(handle);
}

namespace {

using NameHandleTable = std::map<std::string, std::vector<int64_t>, std::less<>>;

bool is_json_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Length of the well-formed UTF-8 sequence starting at text[pos] (RFC 3629: no overlong forms,
// no surrogates, nothing past U+10FFFF), or 0 if the bytes there are not one.
size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // beyond U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - pos < length) return 0;
  if (byte(pos + 1) < second_min || byte(pos + 1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(pos + i) < 0x80 || byte(pos + i) > 0xBF) return 0;
  }
  return length;
}

// Recursive descent over the one shape a handle map may have. Every method returns a Status
// whose message points at the byte where reading stopped.
class HandleMapParser {
 public:
  HandleMapParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Status parse(NameHandleTable& table) {
    skip_byte_order_mark();
    skip_whitespace();
    if (at_end()) return fail("the file is empty; expected a JSON object");
    if (peek() != '{') return fail("expected a JSON object '{' mapping tensor names to handles");
    QD_RETURN_IF_ERROR(parse_object(table));
    skip_whitespace();
    if (!at_end()) return fail("unexpected content after the closing '}'");
    return Status::ok();
  }

 private:
  Status parse_object(NameHandleTable& table) {
    ++pos_;  // '{'
    skip_whitespace();
    if (consume('}')) return Status::ok();
    while (true) {
      QD_RETURN_IF_ERROR(parse_member(table));
      skip_whitespace();
      if (consume('}')) return Status::ok();
      if (!consume(',')) return fail("expected ',' or '}' after a value");
      skip_whitespace();
    }
  }

  Status parse_member(NameHandleTable& table) {
    const size_t key_offset = pos_;
    if (at_end() || peek() != '"') return fail("expected a tensor name in double quotes");
    std::string key;
    QD_RETURN_IF_ERROR(parse_string(key));
    skip_whitespace();
    if (!consume(':')) return fail("expected ':' after the tensor name");
    skip_whitespace();
    std::vector<int64_t> handles;
    QD_RETURN_IF_ERROR(parse_handles(handles));
    if (!table.emplace(std::move(key), std::move(handles)).second) {
      pos_ = key_offset;
      return fail("duplicate tensor name");
    }
    return Status::ok();
  }

  Status parse_handles(std::vector<int64_t>& handles) {
    if (at_end()) return fail("expected a handle or an array of handles");
    if (peek() == '[') return parse_handle_array(handles);
    int64_t handle = 0;
    QD_RETURN_IF_ERROR(parse_handle(handle));
    handles.push_back(handle);
    return Status::ok();
  }

  Status parse_handle_array(std::vector<int64_t>& handles) {
    ++pos_;  // '['
    skip_whitespace();
    if (consume(']')) return Status::ok();
    UniqueHandleAppender appender(handles);
    while (true) {
      int64_t handle = 0;
      QD_RETURN_IF_ERROR(parse_handle(handle));
      appender.add(handle);
      skip_whitespace();
      if (consume(']')) return Status::ok();
      if (!consume(',')) return fail("expected ',' or ']' in the array of handles");
      skip_whitespace();
    }
  }

  // A handle is a JSON integer in [0, INT64_MAX]: no sign, fraction, exponent or leading zero.
  Status parse_handle(int64_t& handle) {
    if (at_end()) return fail("expected a handle (a non-negative integer)");
    if (peek() == '-') return fail("a handle must not be negative");
    if (!is_digit(peek())) return fail("expected a handle (a non-negative integer)");
    const size_t start = pos_;
    if (peek() == '0' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1])) {
      return fail("a number must not have leading zeros");
    }
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    int64_t value = 0;
    for (; !at_end() && is_digit(peek()); ++pos_) {
      const int digit = peek() - '0';
      if (value > (kMax - digit) / 10) {
        pos_ = start;
        return fail("handle does not fit in a signed 64-bit integer");
      }
      value = value * 10 + digit;
    }
    if (!at_end() && (peek() == '.' || peek() == 'e' || peek() == 'E')) {
      return fail("a handle must be an integer (no fraction or exponent)");
    }
    handle = value;
    return Status::ok();
  }

  Status parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (at_end()) return fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (c == '\\') {
        QD_RETURN_IF_ERROR(parse_escape(out));
      } else if (c < 0x20) {
        return fail("control character in a string (write it as an escape such as \\n)");
      } else {
        QD_RETURN_IF_ERROR(copy_utf8_sequence(out));
      }
    }
  }

  Status copy_utf8_sequence(std::string& out) {
    const size_t length = utf8_sequence_length(text_, pos_);
    if (length == 0) return fail("invalid UTF-8 in a string");
    out.append(text_.substr(pos_, length));
    pos_ += length;
    return Status::ok();
  }

  Status parse_escape(std::string& out) {
    ++pos_;  // backslash
    if (at_end()) return fail("unterminated escape sequence");
    const char kind = peek();
    ++pos_;
    switch (kind) {
      case '"':
        out.push_back('"');
        return Status::ok();
      case '\\':
        out.push_back('\\');
        return Status::ok();
      case '/':
        out.push_back('/');
        return Status::ok();
      case 'b':
        out.push_back('\b');
        return Status::ok();
      case 'f':
        out.push_back('\f');
        return Status::ok();
      case 'n':
        out.push_back('\n');
        return Status::ok();
      case 'r':
        out.push_back('\r');
        return Status::ok();
      case 't':
        out.push_back('\t');
        return Status::ok();
      case 'u':
        return parse_unicode_escape(out);
      default:
        --pos_;
        return fail("invalid escape sequence");
    }
  }

  // After "\u": one code unit, or a high surrogate that must be followed by "\u" + low surrogate.
  Status parse_unicode_escape(std::string& out) {
    const size_t escape_start = pos_ - 2;
    uint32_t unit = 0;
    QD_RETURN_IF_ERROR(parse_hex4(unit));
    if (unit >= 0xDC00 && unit <= 0xDFFF) {
      pos_ = escape_start;
      return fail("unpaired low surrogate in a \\u escape");
    }
    if (unit < 0xD800 || unit > 0xDBFF) {
      append_utf8(out, unit);
      return Status::ok();
    }
    if (text_.substr(pos_, 2) != "\\u") {
      pos_ = escape_start;
      return fail("high surrogate in a \\u escape is not followed by a low surrogate");
    }
    pos_ += 2;
    uint32_t low = 0;
    QD_RETURN_IF_ERROR(parse_hex4(low));
    if (low < 0xDC00 || low > 0xDFFF) {
      pos_ = escape_start;
      return fail("high surrogate in a \\u escape is not followed by a low surrogate");
    }
    append_utf8(out, 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00));
    return Status::ok();
  }

  Status parse_hex4(uint32_t& unit) {
    unit = 0;
    for (int i = 0; i < 4; ++i) {
      const int value = at_end() ? -1 : hex_digit_value(peek());
      if (value < 0) return fail("a \\u escape needs four hexadecimal digits");
      unit = unit * 16 + static_cast<uint32_t>(value);
      ++pos_;
    }
    return Status::ok();
  }

  void skip_byte_order_mark() {
    // Editors on Windows like to prepend one; it carries no meaning.
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  }

  void skip_whitespace() {
    while (!at_end() && is_json_whitespace(peek())) ++pos_;
  }

  bool consume(char expected) {
    if (at_end() || peek() != expected) return false;
    ++pos_;
    return true;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  Status fail(std::string_view problem) const {
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::string message = "handle map '";
    message.append(source_);
    message += "': line " + std::to_string(line) + ", column " +
               std::to_string(pos_ - line_start + 1) + " (byte offset " + std::to_string(pos_) +
               "): ";
    message.append(problem);
    return error(ErrorCode::kCorrupt, std::move(message));
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

Status out_of_memory() { return error(ErrorCode::kNoMemory, "out of memory"); }

}  // namespace

Result<HandleMap> HandleMap::load(std::string_view path) noexcept {
  try {
    if (path.find('\0') != std::string_view::npos) {
      return error(ErrorCode::kInvalidArgument, "handle map path contains a NUL byte");
    }
    Result<std::string> content =
        read_text_file(std::string(path), "handle map", "a handle map", kMaxFileBytes);
    if (!content) return content.status();
    return parse(*content, path);
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (...) {
    return error(ErrorCode::kInternal, "unexpected failure loading a handle map");
  }
}

Result<HandleMap> HandleMap::parse(std::string_view json, std::string_view source_name) noexcept {
  try {
    NameHandleTable table;
    QD_RETURN_IF_ERROR(HandleMapParser(json, source_name).parse(table));
    return HandleMap(std::move(table));
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (...) {
    return error(ErrorCode::kInternal, "unexpected failure parsing a handle map");
  }
}

Result<HandleMap> HandleMap::with_sanitized_keys() const noexcept {
  try {
    NameHandleTable sanitized;
    // entries_ iterates in byte order of the original keys, which fixes the merge order.
    for (const auto& [key, handles] : entries_) {
      UniqueHandleAppender merged(sanitized[qnn_sanitize(key)]);
      for (int64_t handle : handles) merged.add(handle);
    }
    return HandleMap(std::move(sanitized));
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (...) {
    return error(ErrorCode::kInternal, "unexpected failure sanitizing a handle map");
  }
}

const std::vector<int64_t>* HandleMap::find(std::string_view name) const noexcept {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace qd::naming
