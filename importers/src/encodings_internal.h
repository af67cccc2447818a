// What the parts of the encodings reader share: encodings_json.cpp reads the JSON (tolerant of
// Python's NaN and Infinity) and gives typed access to it, encodings_formats.cpp reads the three
// shapes of encodings.h, encodings.cpp detects the shape, merges tables and holds the public
// entry points. A namespace of their own keeps these names apart from the other importers'
// file-local helpers when a unity build compiles them together.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/importers/encodings.h"

namespace qd::importers::encodings_detail {

using nlohmann::json;

inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// ---------------------------------------------------------------------------------------------
// Message pieces (encodings_json.cpp)

std::string format_double(double value);
std::string format_dims(const std::vector<uint64_t>& dims);
std::string describe_value(const json& value);
std::string one_line(std::string_view text);

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
// Typed access to parsed JSON (encodings_json.cpp). Every reader names the JSON path of what it
// rejects.

Status expect_type(const Src& src, const json& value, const std::string& path, json::value_t type);
Result<const json*> field(const Src& src, const json& object, std::string_view key,
                          const std::string& path, bool required);
Result<const json*> typed_field(const Src& src, const json& object, std::string_view key,
                                const std::string& path, json::value_t type);
Result<double> read_number(const Src& src, const json& value, const std::string& path);
Result<int64_t> read_integer(const Src& src, const json& value, const std::string& path,
                             int64_t min = kInt64Min, int64_t max = kInt64Max);
Result<std::string> read_string(const Src& src, const json& value, const std::string& path);
Result<std::vector<std::string>> read_string_list(const Src& src, const json& value,
                                                  const std::string& path);
Result<std::vector<uint64_t>> read_dims(const Src& src, const json& value, const std::string& path);
Result<std::vector<double>> read_number_list(const Src& src, const json& value,
                                             const std::string& path);
Result<std::vector<int64_t>> read_integer_list(const Src& src, const json& value,
                                               const std::string& path);
Result<DType> read_dtype(const Src& src, const json& value, const std::string& path);

// ---------------------------------------------------------------------------------------------
// Parsing (encodings_json.cpp): a quick scan, then nlohmann.

struct ParsedDocument {
  json doc;
  std::vector<std::string> node_order;  // graph.nodes keys in file order
};

Result<ParsedDocument> parse_json(const Src& src, std::string_view text);

// ---------------------------------------------------------------------------------------------
// The three shapes (encodings_formats.cpp)

Status read_net_json(const Src& src, ParsedDocument& parsed, EncodingTable& table);
Status read_context_binary_json(const Src& src, const json& doc, EncodingTable& table);
Status read_plain_map(const Src& src, const json& doc, EncodingTable& table);

// ---------------------------------------------------------------------------------------------
// Agreement of two entries for one tensor (encodings.cpp): context-binary graphs, several files

std::string encoding_difference(const TensorEncoding& a, const TensorEncoding& b);
void absorb_duplicate(TensorEncoding& kept, const TensorEncoding& other, const std::string& origin);

}  // namespace qd::importers::encodings_detail
