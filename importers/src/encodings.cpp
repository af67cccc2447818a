#include "qnn_debug/importers/encodings.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <span>
#include <unordered_map>
#include <utility>

#include "qnn_debug/base/input_file.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/jsonio/jsonio.h"

namespace qd::importers {
namespace {

using nlohmann::json;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxBitwidth = 64;  // no storage type is wider; a larger value is no bitwidth

// QNN_DEFINITION_* codes (QnnTypes.h); UNDEFINED is also QNN's "undefined encoding".
constexpr int64_t kDefinitionImplGenerated = 0;
constexpr int64_t kDefinitionDefined = 1;
constexpr int64_t kQnnUndefined = 0x7FFFFFFF;

// QNN_QUANTIZATION_ENCODING_* codes in order (docs/formats.md, section 4).
constexpr std::array<std::string_view, 7> kEncodingNames = {
    "SCALE_OFFSET", "AXIS_SCALE_OFFSET",   "BW_SCALE_OFFSET", "BW_AXIS_SCALE_OFFSET",
    "BLOCK",        "BLOCKWISE_EXPANSION", "VECTOR"};
constexpr int64_t kScaleOffset = 0;
constexpr int64_t kAxisScaleOffset = 1;
constexpr int64_t kBwScaleOffset = 2;
constexpr int64_t kBwAxisScaleOffset = 3;

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

// The file being read; builds its messages.
class Src {
 public:
  explicit Src(const std::string& path)
      : label_("encodings " + quote_name(path)), prefix_(label_ + ": ") {}

  Status fail(const std::string& json_path, const std::string& what) const {
    return error(ErrorCode::kCorrupt, prefix_ + json_path + ": " + what);
  }
  Status fail_doc(const std::string& what, ErrorCode code = ErrorCode::kCorrupt) const {
    return error(code, prefix_ + what);
  }
  const std::string& label() const { return label_; }

 private:
  std::string label_;
  std::string prefix_;
};

// ---------------------------------------------------------------------------------------------
// Typed access to parsed JSON. Every reader names the JSON path of what it rejects.

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

Result<int64_t> read_integer(const Src& src, const json& value, const std::string& path,
                             int64_t min = kInt64Min, int64_t max = kInt64Max) {
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

struct ParsedDocument {
  json doc;
  std::vector<std::string> node_order;  // graph.nodes keys in file order
};

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

// ---------------------------------------------------------------------------------------------
// Pieces shared by the three shapes

// A tensor being read, with whether its file stated dims (a scalar's stated dims are empty).
struct Draft {
  TensorEncoding tensor;
  bool dims_known = false;
};

std::string encoding_label(int64_t code) {
  const std::string number = std::to_string(code);
  if (code >= 0 && code < static_cast<int64_t>(kEncodingNames.size())) {
    return number + " (" + std::string(kEncodingNames[static_cast<size_t>(code)]) + ")";
  }
  return code == kQnnUndefined ? number + " (UNDEFINED)" : number;
}

void note_unsupported(Draft& draft, const std::string& encoding) {
  draft.tensor.notes.push_back("unsupported encoding " + encoding + ": kept without quantization");
}

Result<uint8_t> read_bitwidth(const Src& src, const json& value, const std::string& path) {
  QD_ASSIGN_OR_RETURN(const int64_t bits, read_integer(src, value, path, 0, kMaxBitwidth));
  return static_cast<uint8_t>(bits);
}

// Optional "bitwidth" of `object`; 0 (the storage width) when absent.
Result<uint8_t> optional_bitwidth(const Src& src, const json& object, const std::string& path) {
  QD_ASSIGN_OR_RETURN(const json* bits, field(src, object, "bitwidth", path, false));
  if (bits == nullptr) return uint8_t{0};
  return read_bitwidth(src, *bits, path + ".bitwidth");
}

Result<int32_t> read_axis(const Src& src, const json& value, const std::string& path) {
  QD_ASSIGN_OR_RETURN(const int64_t axis, read_integer(src, value, path, 0, kInt32Max));
  return static_cast<int32_t>(axis);
}

// {"scale": s, "offset": o}, both required (converter and context-binary forms).
Status read_scale_offset_pair(const Src& src, const json& pair, const std::string& path,
                              Quantization& quant) {
  QD_RETURN_IF_ERROR(expect_type(src, pair, path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* scale, field(src, pair, "scale", path, true));
  QD_ASSIGN_OR_RETURN(const json* offset, field(src, pair, "offset", path, true));
  QD_ASSIGN_OR_RETURN(const double scale_value, read_number(src, *scale, path + ".scale"));
  QD_ASSIGN_OR_RETURN(const int64_t offset_value, read_integer(src, *offset, path + ".offset"));
  quant.scales.push_back(scale_value);
  quant.offsets.push_back(offset_value);
  return Status::ok();
}

// A list of {"scale", "offset"} pairs, with the count the file states for it (when it does).
Status read_pair_list(const Src& src, const json& list, const std::string& path,
                      const json* stated_count, const std::string& count_path,
                      Quantization& quant) {
  QD_RETURN_IF_ERROR(expect_type(src, list, path, json::value_t::array));
  if (list.empty()) return src.fail(path, "expected at least one scale/offset pair, found none");
  if (stated_count != nullptr) {
    QD_ASSIGN_OR_RETURN(const int64_t count, read_integer(src, *stated_count, count_path, 0));
    if (static_cast<uint64_t>(count) != list.size()) {
      return src.fail(count_path, "states " + std::to_string(count) + " entries, but " + path +
                                      " has " + std::to_string(list.size()));
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    QD_RETURN_IF_ERROR(read_scale_offset_pair(src, list[i], path + json_path_index(i), quant));
  }
  return Status::ok();
}

// A per-axis encoding must name an axis within the dims and have one entry per element on it.
Status check_axis_against_dims(const Src& src, const Draft& draft, const std::string& axis_path,
                               const std::string& list_path) {
  const Quantization& quant = draft.tensor.quant;
  const std::vector<uint64_t>& dims = draft.tensor.dims;
  if (!quant.per_axis() || !draft.dims_known) return Status::ok();
  const auto axis = static_cast<size_t>(quant.axis);
  if (axis >= dims.size()) {
    return src.fail(axis_path, "axis " + std::to_string(axis) + " is outside dims " +
                                   format_dims(dims) + " (rank " + std::to_string(dims.size()) +
                                   ")");
  }
  if (dims[axis] != quant.scales.size()) {
    return src.fail(list_path, std::to_string(quant.scales.size()) +
                                   " per-axis entries, but dims " + format_dims(dims) + " have " +
                                   std::to_string(dims[axis]) + " on axis " + std::to_string(axis));
  }
  return Status::ok();
}

// Sets the axis order from the two layout strings, refusing one that does not fit the rank.
void apply_axis_formats(Draft& draft) {
  TensorEncoding& tensor = draft.tensor;
  std::vector<uint8_t> order = axis_order_from_formats(tensor.axis_format, tensor.src_axis_format);
  if (!order.empty() && draft.dims_known && order.size() != tensor.dims.size()) {
    tensor.notes.push_back("axis formats " + quote_name(tensor.axis_format) + " / " +
                           quote_name(tensor.src_axis_format) + " do not fit dims " +
                           format_dims(tensor.dims) + ": no axis order");
    return;
  }
  // Two layouts of one length that are not the same letters reordered: one of them is damaged,
  // and the tensor is compared as stored; said, not silently dropped.
  if (order.empty() && tensor.axis_format != tensor.src_axis_format &&
      tensor.axis_format.size() == tensor.src_axis_format.size()) {
    tensor.notes.push_back("axis_format " + quote_name(tensor.axis_format) +
                           " and src_axis_format " + quote_name(tensor.src_axis_format) +
                           " are not the same axes reordered: no layout, compared as stored");
  }
  tensor.axis_order = std::move(order);
}

// ---------------------------------------------------------------------------------------------
// Shape 1: the converter's <model>_net.json

Result<Quantization> read_net_scale_offset(const Src& src, const json& params,
                                           const std::string& path) {
  const std::string where = path + ".scale_offset";
  QD_ASSIGN_OR_RETURN(const json* body,
                      typed_field(src, params, "scale_offset", path, json::value_t::object));
  Quantization quant;
  QD_RETURN_IF_ERROR(read_scale_offset_pair(src, *body, where, quant));
  QD_ASSIGN_OR_RETURN(quant.bitwidth, optional_bitwidth(src, *body, where));
  return quant;
}

Result<Quantization> read_net_axis_scale_offset(const Src& src, const json& params,
                                                const std::string& path) {
  const std::string where = path + ".axis_scale_offset";
  QD_ASSIGN_OR_RETURN(const json* body,
                      typed_field(src, params, "axis_scale_offset", path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* axis, field(src, *body, "axis", where, true));
  QD_ASSIGN_OR_RETURN(const json* list, field(src, *body, "scale_offsets", where, true));
  QD_ASSIGN_OR_RETURN(const json* count, field(src, *body, "num_scale_offsets", where, false));
  Quantization quant;
  QD_ASSIGN_OR_RETURN(quant.axis, read_axis(src, *axis, where + ".axis"));
  QD_RETURN_IF_ERROR(read_pair_list(src, *list, where + ".scale_offsets", count,
                                    where + ".num_scale_offsets", quant));
  QD_ASSIGN_OR_RETURN(quant.bitwidth, optional_bitwidth(src, *body, where));
  return quant;
}

Result<Quantization> read_net_bw_scale_offset(const Src& src, const json& params,
                                              const std::string& path) {
  const std::string where = path + ".bw_scale_offset";
  QD_ASSIGN_OR_RETURN(const json* body,
                      typed_field(src, params, "bw_scale_offset", path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* bits, field(src, *body, "bitwidth", where, true));
  Quantization quant;
  QD_RETURN_IF_ERROR(read_scale_offset_pair(src, *body, where, quant));
  QD_ASSIGN_OR_RETURN(quant.bitwidth, read_bitwidth(src, *bits, where + ".bitwidth"));
  return quant;
}

// Per-axis offsets (BW form, plain map): absent or [] means all zero, else one per scale.
Result<std::vector<int64_t>> read_bw_offsets(const Src& src, const json* offsets,
                                             const std::string& path, size_t scale_count) {
  if (offsets == nullptr) return std::vector<int64_t>(scale_count, 0);
  QD_ASSIGN_OR_RETURN(std::vector<int64_t> values, read_integer_list(src, *offsets, path));
  if (values.empty()) values.assign(scale_count, 0);
  if (values.size() != scale_count) {
    return src.fail(path, std::to_string(values.size()) + " offsets for " +
                              std::to_string(scale_count) + " scales");
  }
  return values;
}

Result<Quantization> read_net_bw_axis_scale_offset(const Src& src, const json& params,
                                                   const std::string& path) {
  const std::string where = path + ".bw_axis_scale_offset";
  QD_ASSIGN_OR_RETURN(const json* body, typed_field(src, params, "bw_axis_scale_offset", path,
                                                    json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* bits, field(src, *body, "bitwidth", where, true));
  QD_ASSIGN_OR_RETURN(const json* axis, field(src, *body, "axis", where, true));
  QD_ASSIGN_OR_RETURN(const json* scales, field(src, *body, "scales", where, true));
  QD_ASSIGN_OR_RETURN(const json* offsets, field(src, *body, "offsets", where, false));
  QD_ASSIGN_OR_RETURN(const json* count, field(src, *body, "num_elements", where, false));
  Quantization quant;
  QD_ASSIGN_OR_RETURN(quant.bitwidth, read_bitwidth(src, *bits, where + ".bitwidth"));
  QD_ASSIGN_OR_RETURN(quant.axis, read_axis(src, *axis, where + ".axis"));
  QD_ASSIGN_OR_RETURN(quant.scales, read_number_list(src, *scales, where + ".scales"));
  if (quant.scales.empty()) return src.fail(where + ".scales", "expected at least one scale");
  if (count != nullptr) {
    QD_ASSIGN_OR_RETURN(const int64_t stated,
                        read_integer(src, *count, where + ".num_elements", 0));
    if (static_cast<uint64_t>(stated) != quant.scales.size()) {
      return src.fail(where + ".num_elements", "states " + std::to_string(stated) +
                                                   ", but there are " +
                                                   std::to_string(quant.scales.size()) + " scales");
    }
  }
  QD_ASSIGN_OR_RETURN(quant.offsets,
                      read_bw_offsets(src, offsets, where + ".offsets", quant.scales.size()));
  return quant;
}

// The JSON path of the per-axis list of a converter encoding, for count mismatches.
std::string net_list_path(const std::string& path, int64_t encoding) {
  return encoding == kAxisScaleOffset ? path + ".axis_scale_offset.scale_offsets"
                                      : path + ".bw_axis_scale_offset.scales";
}

Status read_net_encoding(const Src& src, const json& params, const std::string& path,
                         int64_t encoding, Draft& draft) {
  Result<Quantization> quant = Quantization{};
  switch (encoding) {
    case kScaleOffset:
      quant = read_net_scale_offset(src, params, path);
      break;
    case kAxisScaleOffset:
      quant = read_net_axis_scale_offset(src, params, path);
      break;
    case kBwScaleOffset:
      quant = read_net_bw_scale_offset(src, params, path);
      break;
    case kBwAxisScaleOffset:
      quant = read_net_bw_axis_scale_offset(src, params, path);
      break;
    default:
      note_unsupported(draft, encoding_label(encoding));
      return Status::ok();
  }
  if (!quant) return quant.status();
  draft.tensor.quant = std::move(quant).value();
  const std::string body =
      encoding == kAxisScaleOffset ? ".axis_scale_offset" : ".bw_axis_scale_offset";
  return check_axis_against_dims(src, draft, path + body + ".axis", net_list_path(path, encoding));
}

// "quant_params": {"definition", "encoding", <the encoding's body>}. Only a defined encoding is
// read: the converter writes placeholder bodies for undefined ones.
Status read_net_quant_params(const Src& src, const json& params, const std::string& path,
                             Draft& draft) {
  QD_RETURN_IF_ERROR(expect_type(src, params, path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* definition_value, field(src, params, "definition", path, true));
  QD_ASSIGN_OR_RETURN(const int64_t definition,
                      read_integer(src, *definition_value, path + ".definition"));
  if (definition == kQnnUndefined) return Status::ok();
  if (definition == kDefinitionImplGenerated) {
    draft.tensor.notes.push_back("quantization left to the backend (definition 0, IMPL_GENERATED)");
    return Status::ok();
  }
  if (definition != kDefinitionDefined) {
    return src.fail(path + ".definition",
                    "expected 0, 1 or 2147483647, found " + std::to_string(definition));
  }
  QD_ASSIGN_OR_RETURN(const json* encoding_value, field(src, params, "encoding", path, true));
  QD_ASSIGN_OR_RETURN(const int64_t encoding,
                      read_integer(src, *encoding_value, path + ".encoding", 0, kInt32Max));
  return read_net_encoding(src, params, path, encoding, draft);
}

// Optional string field into `out`.
Status read_optional_string(const Src& src, const json& object, std::string_view key,
                            const std::string& path, std::string& out) {
  QD_ASSIGN_OR_RETURN(const json* value, field(src, object, key, path, false));
  if (value == nullptr) return Status::ok();
  QD_ASSIGN_OR_RETURN(out, read_string(src, *value, path + json_path_field(key)));
  return Status::ok();
}

Result<TensorEncoding> read_net_tensor(const Src& src, const std::string& name, const json& entry,
                                       const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, entry, path, json::value_t::object));
  Draft draft;
  draft.tensor.name = name;
  QD_ASSIGN_OR_RETURN(const json* data_type, field(src, entry, "data_type", path, false));
  if (data_type != nullptr) {
    QD_ASSIGN_OR_RETURN(draft.tensor.dtype, read_dtype(src, *data_type, path + ".data_type"));
  }
  QD_ASSIGN_OR_RETURN(const json* dims, field(src, entry, "dims", path, false));
  if (dims != nullptr) {
    QD_ASSIGN_OR_RETURN(draft.tensor.dims, read_dims(src, *dims, path + ".dims"));
    draft.dims_known = true;
  }
  QD_RETURN_IF_ERROR(
      read_optional_string(src, entry, "axis_format", path, draft.tensor.axis_format));
  QD_RETURN_IF_ERROR(
      read_optional_string(src, entry, "src_axis_format", path, draft.tensor.src_axis_format));
  apply_axis_formats(draft);
  QD_ASSIGN_OR_RETURN(const json* params, field(src, entry, "quant_params", path, false));
  if (params != nullptr) {
    QD_RETURN_IF_ERROR(read_net_quant_params(src, *params, path + ".quant_params", draft));
  }
  return std::move(draft.tensor);
}

Result<GraphNode> read_net_node(const Src& src, const std::string& name, const json& entry,
                                const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, entry, path, json::value_t::object));
  GraphNode node;
  node.name = name;
  QD_RETURN_IF_ERROR(read_optional_string(src, entry, "type", path, node.op_type));
  QD_ASSIGN_OR_RETURN(const json* inputs, field(src, entry, "input_names", path, false));
  if (inputs != nullptr) {
    QD_ASSIGN_OR_RETURN(node.inputs, read_string_list(src, *inputs, path + ".input_names"));
  }
  QD_ASSIGN_OR_RETURN(const json* outputs, field(src, entry, "output_names", path, false));
  if (outputs != nullptr) {
    QD_ASSIGN_OR_RETURN(node.outputs, read_string_list(src, *outputs, path + ".output_names"));
  }
  return node;
}

// graph.nodes in file order. The key tracker saw every key once; if the object somehow holds
// other names, its own (sorted) order is used rather than losing nodes.
Status read_net_nodes(const Src& src, const json& nodes, std::vector<std::string> order,
                      EncodingTable& table) {
  QD_RETURN_IF_ERROR(expect_type(src, nodes, "graph.nodes", json::value_t::object));
  const bool order_complete =
      order.size() == nodes.size() &&
      std::all_of(order.begin(), order.end(), [&](auto& name) { return nodes.contains(name); });
  if (!order_complete) {
    order.clear();
    for (const auto& item : nodes.items()) order.push_back(item.key());
  }
  table.graph.reserve(order.size());
  for (const std::string& name : order) {
    QD_ASSIGN_OR_RETURN(GraphNode node, read_net_node(src, name, nodes.at(name),
                                                      "graph.nodes" + json_path_key(name)));
    table.graph.push_back(std::move(node));
  }
  return Status::ok();
}

Status read_net_json(const Src& src, ParsedDocument& parsed, EncodingTable& table) {
  const json& graph = parsed.doc.at("graph");
  const json& tensors = graph.at("tensors");
  QD_RETURN_IF_ERROR(expect_type(src, tensors, "graph.tensors", json::value_t::object));
  for (const auto& item : tensors.items()) {
    const std::string path = "graph.tensors" + json_path_key(item.key());
    QD_ASSIGN_OR_RETURN(TensorEncoding tensor,
                        read_net_tensor(src, item.key(), item.value(), path));
    table.tensors.emplace(item.key(), std::move(tensor));
  }
  const auto nodes = graph.find("nodes");
  if (nodes == graph.end()) return Status::ok();
  return read_net_nodes(src, *nodes, std::move(parsed.node_order), table);
}

// ---------------------------------------------------------------------------------------------
// Agreement of two entries for one tensor (context-binary graphs, several files)

std::string describe_offset(const Quantization& quant, size_t channel) {
  const std::string value = std::to_string(quant.offsets[channel]);
  return quant.convention == QuantConvention::kQnnOffset ? "offset " + value
                                                         : "zero point " + value;
}

// The offsets of `a` and `b` at `channel` mean the same, whatever convention each uses.
bool same_offset(const Quantization& a, const Quantization& b, size_t channel) {
  const int64_t x = a.offsets[channel];
  const int64_t y = b.offsets[channel];
  if (a.convention == b.convention) return x == y;
  return x != kInt64Min && x == -y;  // offset = -zero_point; -INT64_MIN does not exist
}

bool same_scale(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

std::string describe_layout(const Quantization& quant) {
  if (!quant.is_quantized()) return "no quantization";
  if (!quant.per_axis()) return "per-tensor";
  return "per-axis on axis " + std::to_string(quant.axis) + " with " +
         std::to_string(quant.scales.size()) + " channels";
}

// Why `a` and `b` cannot describe the same tensor, or "" when they agree.
std::string quant_difference(const Quantization& a, const Quantization& b) {
  if (a.is_quantized() != b.is_quantized() || a.axis != b.axis ||
      a.scales.size() != b.scales.size()) {
    return describe_layout(a) + " vs " + describe_layout(b);
  }
  if (a.bitwidth != 0 && b.bitwidth != 0 && a.bitwidth != b.bitwidth) {
    return "bitwidth " + std::to_string(a.bitwidth) + " vs " + std::to_string(b.bitwidth);
  }
  for (size_t i = 0; i < a.scales.size(); ++i) {
    const std::string where = a.per_axis() ? "channel " + std::to_string(i) + ": " : "";
    if (!same_scale(a.scales[i], b.scales[i])) {
      return where + "scale " + format_double(a.scales[i]) + " vs " + format_double(b.scales[i]);
    }
    if (!same_offset(a, b, i))
      return where + describe_offset(a, i) + " vs " + describe_offset(b, i);
  }
  return "";
}

std::string encoding_difference(const TensorEncoding& a, const TensorEncoding& b) {
  if (a.dtype && b.dtype && *a.dtype != *b.dtype) {
    return "dtype " + std::string(info(*a.dtype).name) + " vs " + std::string(info(*b.dtype).name);
  }
  return quant_difference(a.quant, b.quant);
}

// Completes `kept` with what a duplicate entry `other` (from `origin`) states and it lacks.
void absorb_duplicate(TensorEncoding& kept, const TensorEncoding& other,
                      const std::string& origin) {
  if (!kept.dtype) kept.dtype = other.dtype;
  if (kept.quant.bitwidth == 0) kept.quant.bitwidth = other.quant.bitwidth;
  if (kept.dims.empty() && !other.dims.empty()) kept.dims = other.dims;
  if (!other.dims.empty() && kept.dims != other.dims) {
    kept.notes.push_back("dims " + format_dims(kept.dims) + ", but " + format_dims(other.dims) +
                         " in " + origin);
  }
  const bool kept_has_formats = !kept.axis_format.empty() || !kept.src_axis_format.empty();
  if (!kept_has_formats && kept.dims == other.dims) {
    kept.axis_format = other.axis_format;
    kept.src_axis_format = other.src_axis_format;
    kept.axis_order = other.axis_order;
  }
}

// ---------------------------------------------------------------------------------------------
// Shape 2: qnn-context-binary-utility JSON

struct NamedCode {
  std::string_view name;
  int64_t code;
};

constexpr NamedCode kDefinitionNames[] = {
    {"QNN_DEFINITION_IMPL_GENERATED", kDefinitionImplGenerated},
    {"QNN_DEFINITION_DEFINED", kDefinitionDefined},
    {"QNN_DEFINITION_UNDEFINED", kQnnUndefined},
};

// A code written as its QNN name or its number. nullopt: a name not in `names`.
Result<std::optional<int64_t>> read_named_code(const Src& src, const json& value,
                                               const std::string& path,
                                               std::span<const NamedCode> names) {
  if (!value.is_string()) {
    QD_ASSIGN_OR_RETURN(const int64_t code, read_integer(src, value, path, 0, kInt32Max));
    return std::optional<int64_t>(code);
  }
  const std::string& text = value.get_ref<const std::string&>();
  for (const NamedCode& entry : names) {
    if (entry.name == text) return std::optional<int64_t>(entry.code);
  }
  return std::optional<int64_t>();
}

std::vector<NamedCode> encoding_name_table() {
  std::vector<NamedCode> names;
  for (size_t i = 0; i < kEncodingNames.size(); ++i) {
    names.push_back({kEncodingNames[i], static_cast<int64_t>(i)});
  }
  names.push_back({"UNDEFINED", kQnnUndefined});
  return names;
}

// "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET" or 0 -> 0; nullopt for a name QNN does not define.
Result<std::optional<int64_t>> read_encoding_code(const Src& src, const json& value,
                                                  const std::string& path) {
  static const std::vector<NamedCode> kNames = encoding_name_table();
  constexpr std::string_view kPrefix = "QNN_QUANTIZATION_ENCODING_";
  if (value.is_string()) {
    std::string_view text = value.get_ref<const std::string&>();
    if (!text.starts_with(kPrefix)) return std::optional<int64_t>();
    json bare = std::string(text.substr(kPrefix.size()));
    return read_named_code(src, bare, path, kNames);
  }
  return read_named_code(src, value, path, kNames);
}

// quantizeParams.axisScaleOffset: {"axis", "numScaleOffsets", "scaleOffset": [{"scale",
// "offset"}]}. Inferred from the member names of QNN's C struct Qnn_AxisScaleOffset_t (axis,
// numScaleOffsets, scaleOffset); no public sample of this form was available.
Result<Quantization> read_context_axis_scale_offset(const Src& src, const json& params,
                                                    const std::string& path) {
  const std::string where = path + ".axisScaleOffset";
  QD_ASSIGN_OR_RETURN(const json* body,
                      typed_field(src, params, "axisScaleOffset", path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* axis, field(src, *body, "axis", where, true));
  QD_ASSIGN_OR_RETURN(const json* list, field(src, *body, "scaleOffset", where, true));
  QD_ASSIGN_OR_RETURN(const json* count, field(src, *body, "numScaleOffsets", where, false));
  Quantization quant;
  QD_ASSIGN_OR_RETURN(quant.axis, read_axis(src, *axis, where + ".axis"));
  QD_RETURN_IF_ERROR(
      read_pair_list(src, *list, where + ".scaleOffset", count, where + ".numScaleOffsets", quant));
  return quant;
}

Status read_context_encoding(const Src& src, const json& params, const std::string& path,
                             Draft& draft) {
  QD_ASSIGN_OR_RETURN(const json* value, field(src, params, "quantizationEncoding", path, true));
  QD_ASSIGN_OR_RETURN(const std::optional<int64_t> encoding,
                      read_encoding_code(src, *value, path + ".quantizationEncoding"));
  if (!encoding) {  // a name this reader does not know, e.g. from a newer SDK
    note_unsupported(draft, quote_name(value->get_ref<const std::string&>(), 80));
    return Status::ok();
  }
  if (*encoding == kScaleOffset) {
    QD_ASSIGN_OR_RETURN(const json* body,
                        typed_field(src, params, "scaleOffset", path, json::value_t::object));
    return read_scale_offset_pair(src, *body, path + ".scaleOffset", draft.tensor.quant);
  }
  if (*encoding != kAxisScaleOffset) {  // the BW forms' field names are not known in this JSON
    note_unsupported(draft, encoding_label(*encoding));
    return Status::ok();
  }
  QD_ASSIGN_OR_RETURN(draft.tensor.quant, read_context_axis_scale_offset(src, params, path));
  return check_axis_against_dims(src, draft, path + ".axisScaleOffset.axis",
                                 path + ".axisScaleOffset.scaleOffset");
}

Status read_context_quantize_params(const Src& src, const json& params, const std::string& path,
                                    Draft& draft) {
  QD_RETURN_IF_ERROR(expect_type(src, params, path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* value, field(src, params, "definition", path, true));
  QD_ASSIGN_OR_RETURN(const std::optional<int64_t> definition,
                      read_named_code(src, *value, path + ".definition", kDefinitionNames));
  if (!definition || (*definition != kDefinitionDefined && *definition != kQnnUndefined &&
                      *definition != kDefinitionImplGenerated)) {
    return src.fail(path + ".definition",
                    "expected QNN_DEFINITION_DEFINED, _UNDEFINED or _IMPL_GENERATED, found " +
                        describe_value(*value));
  }
  if (*definition == kDefinitionImplGenerated) {
    draft.tensor.notes.push_back(
        "quantization left to the backend (QNN_DEFINITION_IMPL_GENERATED)");
  }
  if (*definition != kDefinitionDefined) return Status::ok();
  return read_context_encoding(src, params, path, draft);
}

Result<TensorEncoding> read_context_tensor(const Src& src, const json& entry,
                                           const std::string& path, const std::string& graph) {
  QD_RETURN_IF_ERROR(expect_type(src, entry, path, json::value_t::object));
  const std::string where = path + ".info";
  QD_ASSIGN_OR_RETURN(const json* tensor,
                      typed_field(src, entry, "info", path, json::value_t::object));
  Draft draft;
  draft.tensor.graph = graph;
  QD_ASSIGN_OR_RETURN(const json* name, field(src, *tensor, "name", where, true));
  QD_ASSIGN_OR_RETURN(draft.tensor.name, read_string(src, *name, where + ".name"));
  QD_ASSIGN_OR_RETURN(const json* data_type, field(src, *tensor, "dataType", where, false));
  if (data_type != nullptr) {
    QD_ASSIGN_OR_RETURN(draft.tensor.dtype, read_dtype(src, *data_type, where + ".dataType"));
  }
  QD_ASSIGN_OR_RETURN(const json* dims, field(src, *tensor, "dimensions", where, false));
  if (dims != nullptr) {
    QD_ASSIGN_OR_RETURN(draft.tensor.dims, read_dims(src, *dims, where + ".dimensions"));
    draft.dims_known = true;
  }
  QD_ASSIGN_OR_RETURN(const json* params, field(src, *tensor, "quantizeParams", where, false));
  if (params != nullptr) {
    QD_RETURN_IF_ERROR(
        read_context_quantize_params(src, *params, where + ".quantizeParams", draft));
  }
  return std::move(draft.tensor);
}

// A tensor may be listed by several graphs of one context: the entries must agree.
Status add_context_tensor(const Src& src, TensorEncoding&& tensor, const std::string& path,
                          EncodingTable& table) {
  const auto [it, inserted] = table.tensors.try_emplace(tensor.name, std::move(tensor));
  if (inserted) return Status::ok();
  TensorEncoding& kept = it->second;
  const std::string difference = encoding_difference(kept, tensor);
  if (!difference.empty()) {
    return src.fail(path, "tensor " + quote_name(tensor.name) + " in graph " +
                              quote_name(tensor.graph) + " differs from graph " +
                              quote_name(kept.graph) + ": " + difference);
  }
  absorb_duplicate(kept, tensor, "graph " + quote_name(tensor.graph));
  return Status::ok();
}

Status read_context_graph(const Src& src, const json& graph, const std::string& path,
                          EncodingTable& table) {
  QD_RETURN_IF_ERROR(expect_type(src, graph, path, json::value_t::object));
  const std::string where = path + ".info";
  QD_ASSIGN_OR_RETURN(const json* info,
                      typed_field(src, graph, "info", path, json::value_t::object));
  QD_ASSIGN_OR_RETURN(const json* name_value, field(src, *info, "graphName", where, true));
  QD_ASSIGN_OR_RETURN(const std::string name, read_string(src, *name_value, where + ".graphName"));
  for (const char* list_key : {"graphInputs", "graphOutputs"}) {
    QD_ASSIGN_OR_RETURN(const json* list, field(src, *info, list_key, where, false));
    if (list == nullptr) continue;
    const std::string list_path = where + "." + list_key;
    QD_RETURN_IF_ERROR(expect_type(src, *list, list_path, json::value_t::array));
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string tensor_path = list_path + json_path_index(i);
      QD_ASSIGN_OR_RETURN(TensorEncoding tensor,
                          read_context_tensor(src, (*list)[i], tensor_path, name));
      QD_RETURN_IF_ERROR(add_context_tensor(src, std::move(tensor), tensor_path, table));
    }
  }
  return Status::ok();
}

Status read_context_binary_json(const Src& src, const json& doc, EncodingTable& table) {
  const json& graphs = doc.at("info").at("graphs");
  QD_RETURN_IF_ERROR(expect_type(src, graphs, "info.graphs", json::value_t::array));
  for (size_t i = 0; i < graphs.size(); ++i) {
    QD_RETURN_IF_ERROR(
        read_context_graph(src, graphs[i], "info.graphs" + json_path_index(i), table));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Shape 3: a plain map {"<tensor>": {"scale", "offset", ...}}

constexpr std::string_view kPlainKeys[] = {"scale",   "scales",     "offset",
                                           "offsets", "zero_point", "zero_points",
                                           "axis",    "bitwidth",   "dtype"};

// Every key must be known: a typo ("offest") must not silently become offset 0.
Status check_plain_keys(const Src& src, const json& entry, const std::string& path) {
  for (const auto& item : entry.items()) {
    if (std::find(std::begin(kPlainKeys), std::end(kPlainKeys), item.key()) ==
        std::end(kPlainKeys)) {
      return src.fail(path + json_path_field(item.key()),
                      "unknown key (expected scale, offset or zero_point; scales, offsets or "
                      "zero_points with axis; bitwidth; dtype)");
    }
  }
  return Status::ok();
}

// Refuses two keys that say the same thing or contradict each other.
Status check_plain_exclusive(const Src& src, const json& entry, const std::string& path) {
  constexpr std::pair<std::string_view, std::string_view> kExclusive[] = {
      {"scale", "scales"},  {"offset", "zero_point"}, {"offsets", "zero_points"},
      {"scale", "offsets"}, {"scale", "zero_points"}, {"scale", "axis"},
      {"scales", "offset"}, {"scales", "zero_point"}};
  for (const auto& [first, second] : kExclusive) {
    if (entry.contains(first) && entry.contains(second)) {
      return src.fail(path + json_path_field(second),
                      "cannot be combined with \"" + std::string(first) + "\"");
    }
  }
  if (!entry.contains("scale") && !entry.contains("scales")) {
    return src.fail(path + ".scale",
                    "required field missing (\"scale\", or \"scales\" with \"axis\")");
  }
  if (entry.contains("scales") && !entry.contains("axis")) {
    return src.fail(path + ".axis", "required field missing (\"scales\" are per axis)");
  }
  return Status::ok();
}

Status read_plain_per_tensor(const Src& src, const json& entry, const std::string& path,
                             Quantization& quant) {
  QD_ASSIGN_OR_RETURN(const double scale, read_number(src, entry.at("scale"), path + ".scale"));
  quant.scales = {scale};
  quant.offsets = {0};
  // Required: a forgotten offset read as 0 would shift every value by offset * scale unseen.
  if (!entry.contains("offset") && !entry.contains("zero_point")) {
    return src.fail(path + ".offset",
                    "required field missing (\"offset\" or \"zero_point\"; 0 for a symmetric "
                    "encoding)");
  }
  for (const char* key : {"offset", "zero_point"}) {
    QD_ASSIGN_OR_RETURN(const json* value, field(src, entry, key, path, false));
    if (value == nullptr) continue;
    QD_ASSIGN_OR_RETURN(quant.offsets[0], read_integer(src, *value, path + "." + key));
    if (std::string_view(key) == "zero_point") quant.convention = QuantConvention::kZeroPoint;
  }
  return Status::ok();
}

Status read_plain_per_axis(const Src& src, const json& entry, const std::string& path,
                           Quantization& quant) {
  QD_ASSIGN_OR_RETURN(quant.axis, read_axis(src, entry.at("axis"), path + ".axis"));
  QD_ASSIGN_OR_RETURN(quant.scales, read_number_list(src, entry.at("scales"), path + ".scales"));
  if (quant.scales.empty()) return src.fail(path + ".scales", "expected at least one scale");
  quant.offsets.assign(quant.scales.size(), 0);
  for (const char* key : {"offsets", "zero_points"}) {
    QD_ASSIGN_OR_RETURN(const json* value, field(src, entry, key, path, false));
    if (value == nullptr) continue;
    QD_ASSIGN_OR_RETURN(quant.offsets,
                        read_bw_offsets(src, value, path + "." + key, quant.scales.size()));
    if (std::string_view(key) == "zero_points") quant.convention = QuantConvention::kZeroPoint;
  }
  return Status::ok();
}

Result<TensorEncoding> read_plain_entry(const Src& src, const std::string& name, const json& entry,
                                        const std::string& path) {
  QD_RETURN_IF_ERROR(expect_type(src, entry, path, json::value_t::object));
  QD_RETURN_IF_ERROR(check_plain_keys(src, entry, path));
  QD_RETURN_IF_ERROR(check_plain_exclusive(src, entry, path));
  TensorEncoding tensor;
  tensor.name = name;
  if (entry.contains("scale")) {
    QD_RETURN_IF_ERROR(read_plain_per_tensor(src, entry, path, tensor.quant));
  } else {
    QD_RETURN_IF_ERROR(read_plain_per_axis(src, entry, path, tensor.quant));
  }
  QD_ASSIGN_OR_RETURN(tensor.quant.bitwidth, optional_bitwidth(src, entry, path));
  if (entry.contains("dtype")) {
    QD_ASSIGN_OR_RETURN(tensor.dtype, read_dtype(src, entry.at("dtype"), path + ".dtype"));
  }
  return tensor;
}

Status read_plain_map(const Src& src, const json& doc, EncodingTable& table) {
  for (const auto& item : doc.items()) {
    QD_ASSIGN_OR_RETURN(TensorEncoding tensor,
                        read_plain_entry(src, item.key(), item.value(), json_path_key(item.key())));
    table.tensors.emplace(item.key(), std::move(tensor));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Shape detection and the whole document

bool has_object_with(const json& doc, std::string_view key, std::string_view inner) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_object() && it->contains(inner);
}

// A plain map: every value an object, at least one holding a scale (so unrelated JSON is not
// read as a map of typos); {} is an empty map.
bool looks_like_plain_map(const json& doc) {
  bool any_scale = doc.empty();
  for (const auto& item : doc.items()) {
    if (!item.value().is_object()) return false;
    any_scale = any_scale || item.value().contains("scale") || item.value().contains("scales");
  }
  return any_scale;
}

std::string some_keys(const json& doc) {
  std::string keys;
  size_t shown = 0;
  for (const auto& item : doc.items()) {
    if (shown++ == 4) return keys + ", ...";
    keys += (keys.empty() ? "" : ", ") + quote_name(item.key(), 40);
  }
  return keys.empty() ? "none" : keys;
}

Result<EncodingFormat> detect_format(const Src& src, const json& doc) {
  if (doc.is_object()) {
    if (has_object_with(doc, "graph", "tensors")) return EncodingFormat::kConverterNetJson;
    if (has_object_with(doc, "info", "graphs")) return EncodingFormat::kContextBinaryJson;
    if (looks_like_plain_map(doc)) return EncodingFormat::kPlainMap;
  }
  const std::string found =
      doc.is_object() ? "an object with keys " + some_keys(doc) : describe_value(doc);
  return src.fail_doc(
      "not an encodings file: expected {\"graph\": {\"tensors\": ...}} (converter net JSON), "
      "{\"info\": {\"graphs\": [...]}} (context-binary JSON) or {\"<tensor>\": {\"scale\": ...}} "
      "(plain map), found " +
      found);
}

Result<EncodingTable> parse_document(const Src& src, std::string_view text,
                                     const std::string& source) {
  if (text.size() > kMaxEncodingsBytes) {
    return src.fail_doc(std::to_string(text.size()) + " bytes, more than the " +
                        std::to_string(kMaxEncodingsBytes) + " an encodings file may have");
  }
  QD_ASSIGN_OR_RETURN(ParsedDocument parsed, parse_json(src, text));
  QD_ASSIGN_OR_RETURN(const EncodingFormat format, detect_format(src, parsed.doc));
  EncodingTable table;
  if (format == EncodingFormat::kConverterNetJson) {
    QD_RETURN_IF_ERROR(read_net_json(src, parsed, table));
  } else if (format == EncodingFormat::kContextBinaryJson) {
    QD_RETURN_IF_ERROR(read_context_binary_json(src, parsed.doc, table));
  } else {
    QD_RETURN_IF_ERROR(read_plain_map(src, parsed.doc, table));
  }
  for (auto& [name, tensor] : table.tensors) tensor.source = source;
  table.sources.push_back({source, format, table.tensors.size()});
  return table;
}

// ---------------------------------------------------------------------------------------------
// Files and merging

Result<std::string> read_encodings_file(const std::string& path) {
  const auto labelled = [](const Status& status) {
    return error(status.code(), "encodings " + status.message());
  };
  auto file = InputFile::open(path, "an encodings file");
  if (!file.is_ok()) return labelled(file.status());
  auto bytes = (*file)->read_all(kMaxEncodingsBytes, "the encodings file");
  if (!bytes.is_ok()) return labelled(bytes.status());
  return std::string(bytes->begin(), bytes->end());
}

bool same_node(const GraphNode& a, const GraphNode& b) {
  return a.name == b.name && a.op_type == b.op_type && a.inputs == b.inputs &&
         a.outputs == b.outputs && a.handles == b.handles;
}

std::string joined_paths(const std::vector<EncodingSource>& sources) {
  std::string text;
  for (const EncodingSource& source : sources) {
    text += (text.empty() ? "" : ", ") + quote_name(source.path);
  }
  return text.empty() ? "an earlier table" : text;
}

// Checks everything `more` adds against `into` before anything changes.
Status check_merge(const EncodingTable& into, const EncodingTable& more, const Src& src,
                   const std::unordered_map<std::string, size_t>& node_index) {
  for (const auto& [name, tensor] : more.tensors) {
    const TensorEncoding* kept = into.find(name);
    if (kept == nullptr) continue;
    const std::string difference = encoding_difference(*kept, tensor);
    if (!difference.empty()) {
      return src.fail_doc("tensor " + quote_name(name) + " conflicts with " +
                          quote_name(kept->source) + ": " + difference);
    }
  }
  for (const GraphNode& node : more.graph) {
    const auto it = node_index.find(node.name);
    if (it != node_index.end() && !same_node(into.graph[it->second], node)) {
      return src.fail_doc("node " + quote_name(node.name) +
                          " differs from the node of that name in " + joined_paths(into.sources));
    }
  }
  return Status::ok();
}

}  // namespace

std::string_view encoding_format_name(EncodingFormat format) {
  switch (format) {
    case EncodingFormat::kConverterNetJson:
      return "converter net JSON";
    case EncodingFormat::kContextBinaryJson:
      return "context-binary JSON";
    case EncodingFormat::kPlainMap:
      break;
  }
  return "plain encodings map";
}

const TensorEncoding* EncodingTable::find(std::string_view name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Result<EncodingTable> parse_encodings(std::string_view json_text, const std::string& source) {
  const Src src(source);
  try {
    return parse_document(src, json_text, source);
  } catch (const std::bad_alloc&) {
    return src.fail_doc("out of memory while reading", ErrorCode::kNoMemory);
  } catch (const json::exception& e) {
    return src.fail_doc("cannot read the JSON: " + one_line(e.what()));
  } catch (const std::exception& e) {
    return src.fail_doc("internal error: " + one_line(e.what()), ErrorCode::kInternal);
  }
}

Result<EncodingTable> load_encodings(const std::string& path) {
  const Src src(path);
  try {
    QD_ASSIGN_OR_RETURN(const std::string text, read_encodings_file(path));
    return parse_encodings(text, path);
  } catch (const std::bad_alloc&) {
    return src.fail_doc("out of memory while reading", ErrorCode::kNoMemory);
  } catch (const std::exception& e) {
    return src.fail_doc("cannot read: " + one_line(e.what()), ErrorCode::kIo);
  }
}

Status merge_encodings(EncodingTable& into, EncodingTable&& more) {
  const std::string later = more.sources.empty() ? "a later table" : more.sources.back().path;
  const Src src(later);
  try {
    std::unordered_map<std::string, size_t> node_index;
    for (size_t i = 0; i < into.graph.size(); ++i) node_index.emplace(into.graph[i].name, i);
    QD_RETURN_IF_ERROR(check_merge(into, more, src, node_index));
    EncodingTable merged = into;  // copy first: a bad_alloc halfway must leave `into` as it was
    for (auto& [name, tensor] : more.tensors) {
      const auto [it, inserted] = merged.tensors.try_emplace(name, std::move(tensor));
      if (!inserted) absorb_duplicate(it->second, tensor, quote_name(tensor.source));
    }
    for (GraphNode& node : more.graph) {
      if (node_index.emplace(node.name, merged.graph.size()).second) {
        merged.graph.push_back(std::move(node));
      }
    }
    for (EncodingSource& source : more.sources) merged.sources.push_back(std::move(source));
    into = std::move(merged);
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return src.fail_doc("out of memory while merging", ErrorCode::kNoMemory);
  }
}

Result<DType> dtype_from_qnn_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  const auto fail = [&] {
    return error(ErrorCode::kInvalidArgument, "unknown QNN data type " + quote_name(name, 60));
  };
  uint32_t code = 0;
  const auto [end, ec] = std::from_chars(upper.data(), upper.data() + upper.size(), code);
  if (!upper.empty() && ec == std::errc() && end == upper.data() + upper.size()) {
    const std::optional<DTypeInfo> entry = dtype_info(code);
    if (!entry) return fail();
    return entry->dtype;
  }
  std::string_view bare = upper;
  if (bare.starts_with("QNN_DATATYPE_"))
    bare.remove_prefix(std::string_view("QNN_DATATYPE_").size());
  const std::string canonical =
      bare.starts_with("FIXED_POINT_") ? "S" + std::string(bare) : std::string(bare);
  size_t count = 0;
  const DTypeInfo* dtypes = all_dtypes(&count);
  for (size_t i = 0; i < count; ++i) {
    if (dtypes[i].name == canonical) return dtypes[i].dtype;
  }
  return fail();
}

std::vector<uint8_t> axis_order_from_formats(std::string_view axis_format,
                                             std::string_view src_axis_format) {
  const auto distinct_letters = [](std::string_view text) {
    std::array<bool, 256> seen{};
    for (unsigned char c : text) {
      const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
      if (!letter || seen[c]) return false;
      seen[c] = true;
    }
    return true;
  };
  if (axis_format == src_axis_format || axis_format.size() != src_axis_format.size() ||
      axis_format.size() > static_cast<size_t>(kMaxRank) || !distinct_letters(axis_format) ||
      !distinct_letters(src_axis_format)) {
    return {};
  }
  std::vector<uint8_t> order;
  for (char letter : src_axis_format) {
    const size_t position = axis_format.find(letter);
    if (position == std::string_view::npos) return {};
    order.push_back(static_cast<uint8_t>(position));
  }
  return order;
}

}  // namespace qd::importers
