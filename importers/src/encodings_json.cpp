#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "encodings_internal.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/jsonio/jsonio.h"

namespace qd::importers::encodings_detail {

// ---------------------------------------------------------------------------------------------
// Message pieces

std::string format_double(double value) {
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

std::string format_dims(const std::vector<uint64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

// What was found where something else was expected, short enough for one line.
std::string describe_value(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "the string " + quote_name(value.get_ref<const std::string&>(), 40);
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::null:
      return "null";
    case json::value_t::number_float:
      return "the number " + format_double(value.get<double>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "the number " + jsonio::dump(value);
    case json::value_t::binary:
    case json::value_t::discarded:
      break;
  }
  return "nothing";
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag, safe for one line.
std::string one_line(std::string_view text) {
  if (text.starts_with("[json.exception.")) {
    const size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return escape_text(text, 300, "");
}

// ---------------------------------------------------------------------------------------------
// Typed access to parsed JSON. Every reader names the JSON path of what it rejects.

namespace {

const char* type_article(json::value_t type) {
  switch (type) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    default:
      return "a value";
  }
}

}  // namespace

Status expect_type(const Src& src, const json& value, const std::string& path, json::value_t type) {
  if (value.type() == type) return Status::ok();
  return src.fail(
      path, std::string("expected ") + type_article(type) + ", found " + describe_value(value));
}

// Field `key` of object `object` (at `path`): null when absent and optional.
Result<const json*> field(const Src& src, const json& object, std::string_view key,
                          const std::string& path, bool required) {
  const auto it = object.find(key);
  if (it != object.end()) return &*it;
  if (required) return src.fail(path + json_path_field(key), "required field missing");
  return static_cast<const json*>(nullptr);
}

// Field `key` that must be present and hold `type`.
Result<const json*> typed_field(const Src& src, const json& object, std::string_view key,
                                const std::string& path, json::value_t type) {
  QD_ASSIGN_OR_RETURN(const json* value, field(src, object, key, path, true));
  QD_RETURN_IF_ERROR(expect_type(src, *value, path + json_path_field(key), type));
  return value;
}

Result<double> read_number(const Src& src, const json& value, const std::string& path) {
  if (!value.is_number()) {
    return src.fail(path, "expected a number, found " + describe_value(value));
  }
  return value.get<double>();
}

namespace {

// The value of an integral JSON number within int64. Numbers written with a fraction or an
// exponent count when their value is integral (Python writers emit 3.0 for integer fields).
std::optional<int64_t> integral_value(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t number = value.get<uint64_t>();
    if (number > static_cast<uint64_t>(kInt64Max)) return std::nullopt;
    return static_cast<int64_t>(number);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && std::trunc(number) == number && number >= -0x1p63 &&
        number < 0x1p63) {
      return static_cast<int64_t>(number);
    }
  }
  return std::nullopt;
}

std::string integer_range_text(int64_t min, int64_t max) {
  if (min == kInt64Min && max == kInt64Max) return "an integer within int64";
  if (max == kInt64Max) return "an integer >= " + std::to_string(min);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

Result<int64_t> read_integer(const Src& src, const json& value, const std::string& path,
                             int64_t min, int64_t max) {
  const std::optional<int64_t> number = integral_value(value);
  if (!number || *number < min || *number > max) {
    return src.fail(
        path, "expected " + integer_range_text(min, max) + ", found " + describe_value(value));
  }
  return *number;
}

Result<std::string> read_string(const Src& src, const json& value, const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, value, path, json::value_t::string));
  return value.get<std::string>();
}

Result<std::vector<std::string>> read_string_list(const Src& src, const json& value,
                                                  const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, value, path, json::value_t::array));
  std::vector<std::string> strings;
  strings.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    QD_ASSIGN_OR_RETURN(std::string text, read_string(src, value[i], path + json_path_index(i)));
    strings.push_back(std::move(text));
  }
  return strings;
}

Result<std::vector<uint64_t>> read_dims(const Src& src, const json& value,
                                        const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, value, path, json::value_t::array));
  std::vector<uint64_t> dims;
  dims.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    QD_ASSIGN_OR_RETURN(const int64_t dim,
                        read_integer(src, value[i], path + json_path_index(i), 0));
    dims.push_back(static_cast<uint64_t>(dim));
  }
  return dims;
}

Result<std::vector<double>> read_number_list(const Src& src, const json& value,
                                             const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, value, path, json::value_t::array));
  std::vector<double> numbers;
  numbers.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    QD_ASSIGN_OR_RETURN(const double number, read_number(src, value[i], path + json_path_index(i)));
    numbers.push_back(number);
  }
  return numbers;
}

Result<std::vector<int64_t>> read_integer_list(const Src& src, const json& value,
                                               const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, value, path, json::value_t::array));
  std::vector<int64_t> numbers;
  numbers.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    QD_ASSIGN_OR_RETURN(const int64_t number,
                        read_integer(src, value[i], path + json_path_index(i)));
    numbers.push_back(number);
  }
  return numbers;
}

// A dtype given as a QNN code (1032) or a QNN name ("QNN_DATATYPE_UFIXED_POINT_8").
Result<DType> read_dtype(const Src& src, const json& value, const std::string& path) {
  if (value.is_string()) {
    Result<DType> dtype = dtype_from_qnn_name(value.get_ref<const std::string&>());
    if (!dtype) {
      return src.fail(
          path, "unknown QNN data type " + quote_name(value.get_ref<const std::string&>(), 60));
    }
    return dtype;
  }
  QD_ASSIGN_OR_RETURN(const int64_t code, read_integer(src, value, path, 0, 0xFFFFFFFF));
  const std::optional<DTypeInfo> dtype_entry = dtype_info(static_cast<uint32_t>(code));
  if (!dtype_entry) return src.fail(path, "unknown QNN data type code " + std::to_string(code));
  return dtype_entry->dtype;
}

// ---------------------------------------------------------------------------------------------
// Parsing: a quick scan, then nlohmann.

namespace {

// What the scan before parsing learned. Python's json module writes NaN, Infinity and -Infinity
// as bare words, which JSON (and nlohmann) refuse; they are blanked to a same-length "0   " so
// positions in messages stay right, and restored by their rank among the document's numbers.
struct TextScan {
  bool patched = false;
  std::string text;                                     // the patched copy, when patched
  std::vector<std::pair<uint64_t, double>> non_finite;  // number rank -> value, ascending
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '+' || c == '.';
}

// Consumes the bare word (number or literal) at `start`; returns where it ends.
size_t scan_word(std::string_view text, size_t start, uint64_t& number_rank, TextScan& scan) {
  size_t end = start;
  while (end < text.size() && is_word_char(text[end])) ++end;
  const std::string_view word = text.substr(start, end - start);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::optional<double> special;
  if (word == "NaN") special = std::numeric_limits<double>::quiet_NaN();
  if (word == "Infinity") special = kInf;
  if (word == "-Infinity") special = -kInf;
  if (special) {
    if (!scan.patched) scan.text.assign(text);
    scan.patched = true;
    scan.text[start] = '0';
    std::fill_n(scan.text.begin() + static_cast<std::ptrdiff_t>(start) + 1, word.size() - 1, ' ');
    scan.non_finite.emplace_back(number_rank, *special);
  }
  if (special || word[0] == '-' || (word[0] >= '0' && word[0] <= '9')) ++number_rank;
  return end;
}

// Refuses nesting deeper than kMaxEncodingsDepth (a 100,000-deep array must not reach a parser)
// and finds Python's non-finite literals.
Result<TextScan> scan_text(const Src& src, std::string_view text) {
  TextScan scan;
  uint64_t number_rank = 0;
  QD_RETURN_IF_ERROR(scan_json(
      text, src.label(), [&](size_t at) { return scan_word(text, at, number_rank, scan); },
      kMaxEncodingsDepth));
  return scan;
}

// Builds the document from nlohmann's SAX events. (nlohmann's own callback parser rescans the
// parent object at the end of every child: quadratic, minutes for a 60,000-tensor net JSON.)
// It also sees what the built object cannot show: repeated keys (an object keeps only the last),
// the file order of graph.nodes (objects sort their keys), and each number's rank, by which
// Python's NaN/Infinity blanked by scan_text are restored.
class DomBuilder final : public nlohmann::json_sax<json> {
 public:
  explicit DomBuilder(const TextScan& scan) : scan_(scan) {}

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool value) override { return add(json(value)); }
  bool number_integer(number_integer_t value) override { return add_number(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add_number(json(value)); }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return add_number(json(value));
  }
  bool string(string_t& value) override { return add(json(std::move(value))); }
  bool binary(binary_t& /*value*/) override { return true; }  // JSON text has no binary values
  bool start_object(std::size_t /*size*/) override { return open(json::object()); }
  bool start_array(std::size_t /*size*/) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    Frame& top = frames_.back();
    if (top.container->contains(name) && first_repeat_.empty()) {
      first_repeat_ = path_to(frames_.size() - 1) + json_path_key(name);
    }
    const bool in_nodes = frames_.size() == 3 && frames_[0].key == "graph" &&
                          frames_[1].key == "nodes" && frames_[0].container->is_object() &&
                          frames_[1].container->is_object();
    if (in_nodes && first_repeat_.empty()) node_order_.push_back(name);
    top.key = std::move(name);
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const json::exception& failure) override {
    syntax_error_ = dynamic_cast<const json::parse_error*>(&failure) != nullptr;
    error_position_ = position;
    error_ = one_line(failure.what());
    return false;
  }

  // Why the parse stopped, for a document `text`.
  std::string error_message(std::string_view text) const {
    if (syntax_error_) return "not valid JSON: " + error_;  // nlohmann names line and column
    const size_t at = std::min(error_position_ > 0 ? error_position_ - 1 : 0, text.size());
    return "cannot read the JSON: " + error_ + " at " + line_and_column(text, at);
  }
  const std::string& first_repeat() const { return first_repeat_; }
  json& root() { return root_; }
  std::vector<std::string>& node_order() { return node_order_; }

 private:
  struct Frame {
    json* container;
    std::string key;   // objects: the key whose value is being read
    size_t count = 0;  // arrays: elements so far
  };

  // Stores `value` where the innermost open container expects it; returns its address, which
  // stays valid while it is open (only the innermost container grows).
  json* place(json&& value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& top = frames_.back();
    if (top.container->is_array()) {
      top.container->push_back(std::move(value));
      ++top.count;
      return &top.container->back();
    }
    json& slot = (*top.container)[top.key];
    slot = std::move(value);
    return &slot;
  }
  bool add(json&& value) {
    place(std::move(value));
    return true;
  }
  bool add_number(json&& value) {
    const auto& non_finite = scan_.non_finite;
    if (next_non_finite_ < non_finite.size() && non_finite[next_non_finite_].first == rank_) {
      value = non_finite[next_non_finite_++].second;
    }
    ++rank_;
    return add(std::move(value));
  }
  bool open(json&& container) {
    json* where = place(std::move(container));
    frames_.push_back({where, "", 0});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  // The JSON path of the value being read in frame `depth - 1` ("" for the root).
  std::string path_to(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Frame& frame = frames_[i];
      path += frame.container->is_array() ? json_path_index(frame.count - 1)
                                          : json_path_field(frame.key);
    }
    return path.starts_with('.') ? path.substr(1) : path;
  }

  const TextScan& scan_;
  json root_;
  std::vector<Frame> frames_;
  uint64_t rank_ = 0;
  size_t next_non_finite_ = 0;
  std::vector<std::string> node_order_;
  std::string first_repeat_;
  bool syntax_error_ = false;
  size_t error_position_ = 0;
  std::string error_;
};

}  // namespace

Result<ParsedDocument> parse_json(const Src& src, std::string_view text) {
  QD_ASSIGN_OR_RETURN(const TextScan scan, scan_text(src, text));
  const std::string_view input = scan.patched ? std::string_view(scan.text) : text;
  DomBuilder builder(scan);
  if (!jsonio::sax_parse<nlohmann::json_sax<json>>(input, builder)) {
    return src.fail_doc(builder.error_message(text));
  }
  if (!builder.first_repeat().empty()) {
    return src.fail(builder.first_repeat(), "the same name appears twice in one JSON object");
  }
  return ParsedDocument{std::move(builder.root()), std::move(builder.node_order())};
}

}  // namespace qd::importers::encodings_detail
