#include <algorithm>
#include <array>
#include <iterator>
#include <span>
#include <utility>

#include "encodings_internal.h"

namespace qd::importers::encodings_detail {
namespace {

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

}  // namespace

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
// Shape 2: qnn-context-binary-utility JSON

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

Status read_plain_map(const Src& src, const json& doc, EncodingTable& table) {
  for (const auto& item : doc.items()) {
    QD_ASSIGN_OR_RETURN(TensorEncoding tensor,
                        read_plain_entry(src, item.key(), item.value(), json_path_key(item.key())));
    table.tensors.emplace(item.key(), std::move(tensor));
  }
  return Status::ok();
}

}  // namespace qd::importers::encodings_detail
