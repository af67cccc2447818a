#include "qnn_debug/importers/encodings.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <new>
#include <unordered_map>
#include <utility>

#include "encodings_internal.h"
#include "qnn_debug/base/input_file.h"

namespace qd::importers {
namespace encodings_detail {
namespace {

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

}  // namespace

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
// Shape detection and the whole document

namespace {

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

// Each shape's test and reader, in kEncodingFormats' order: the first shape that fits is read.
struct ShapeReader {
  bool (*fits)(const json& doc);
  Status (*read)(const Src& src, ParsedDocument& parsed, EncodingTable& table);
};
constexpr ShapeReader kShapeReaders[] = {
    {[](const json& doc) { return has_object_with(doc, "graph", "tensors"); }, read_net_json},
    {[](const json& doc) { return has_object_with(doc, "info", "graphs"); },
     [](const Src& src, ParsedDocument& parsed, EncodingTable& table) {
       return read_context_binary_json(src, parsed.doc, table);
     }},
    {looks_like_plain_map,
     [](const Src& src, ParsedDocument& parsed, EncodingTable& table) {
       return read_plain_map(src, parsed.doc, table);
     }},
};
static_assert(std::size(kShapeReaders) == kEncodingFormats.size());

Result<EncodingFormat> detect_format(const Src& src, const json& doc) {
  if (doc.is_object()) {
    for (size_t i = 0; i < kEncodingFormats.size(); ++i) {
      if (kShapeReaders[i].fits(doc)) return kEncodingFormats[i].value;
    }
  }
  std::string expected;
  for (size_t i = 0; i < kEncodingFormats.size(); ++i) {
    expected += i == 0 ? "" : i + 1 == kEncodingFormats.size() ? " or " : ", ";
    expected += std::string(kEncodingFormats[i].meaning) + " (" +
                std::string(kEncodingFormats[i].name) + ")";
  }
  const std::string found =
      doc.is_object() ? "an object with keys " + some_keys(doc) : describe_value(doc);
  return src.fail_doc("not an encodings file: expected " + expected + ", found " + found);
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
  QD_RETURN_IF_ERROR(kShapeReaders[static_cast<size_t>(format)].read(src, parsed, table));
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
}  // namespace encodings_detail

const TensorEncoding* EncodingTable::find(std::string_view name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Result<EncodingTable> parse_encodings(std::string_view json_text, const std::string& source) {
  using encodings_detail::one_line;
  const encodings_detail::Src src(source);
  try {
    return encodings_detail::parse_document(src, json_text, source);
  } catch (const std::bad_alloc&) {
    return src.fail_doc("out of memory while reading", ErrorCode::kNoMemory);
  } catch (const nlohmann::json::exception& e) {
    return src.fail_doc("cannot read the JSON: " + one_line(e.what()));
  } catch (const std::exception& e) {
    return src.fail_doc("internal error: " + one_line(e.what()), ErrorCode::kInternal);
  }
}

Result<EncodingTable> load_encodings(const std::string& path) {
  const encodings_detail::Src src(path);
  try {
    QD_ASSIGN_OR_RETURN(const std::string text, encodings_detail::read_encodings_file(path));
    return parse_encodings(text, path);
  } catch (const std::bad_alloc&) {
    return src.fail_doc("out of memory while reading", ErrorCode::kNoMemory);
  } catch (const std::exception& e) {
    return src.fail_doc("cannot read: " + encodings_detail::one_line(e.what()), ErrorCode::kIo);
  }
}

Status merge_encodings(EncodingTable& into, EncodingTable&& more) {
  const std::string later = more.sources.empty() ? "a later table" : more.sources.back().path;
  const encodings_detail::Src src(later);
  try {
    std::unordered_map<std::string, size_t> node_index;
    for (size_t i = 0; i < into.graph.size(); ++i) node_index.emplace(into.graph[i].name, i);
    QD_RETURN_IF_ERROR(encodings_detail::check_merge(into, more, src, node_index));
    EncodingTable merged = into;  // copy first: a bad_alloc halfway must leave `into` as it was
    for (auto& [name, tensor] : more.tensors) {
      const auto [it, inserted] = merged.tensors.try_emplace(name, std::move(tensor));
      if (!inserted) {
        encodings_detail::absorb_duplicate(it->second, tensor, quote_name(tensor.source));
      }
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
