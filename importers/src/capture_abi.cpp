#include "capture_abi.h"

#include <limits>
#include <string_view>
#include <utility>

namespace qd::importers {
namespace {

const std::string kNulWhy =
    "contains a NUL byte, which the capture ABI cannot carry (its names are C strings)";

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

Status invalid_tensor(const TensorRecord& record, const std::string& why) {
  return error(ErrorCode::kInvalidArgument, "tensor " + quote_name(record.name) + ": " + why);
}

// -1 means "unknown" (output_index) or "per tensor" (axis); the ABI reads any negative value so.
Status check_index(const TensorRecord& record, std::string_view what, int64_t value) {
  if (value >= -1) return Status::ok();
  return invalid_tensor(
      record, std::string(what) + " " + std::to_string(value) + " is neither -1 nor an index");
}

}  // namespace

// Any text handed to the ABI as a C string: a NUL byte would silently cut it there.
Status check_c_string(std::string_view what, const std::string& text) {
  if (!has_nul(text)) return Status::ok();
  return error(ErrorCode::kInvalidArgument,
               std::string(what) + " " + quote_name(text) + " " + kNulWhy);
}

Status check_list_count(std::string_view what, const std::string& owner, size_t count) {
  if (count <= QD_MAX_LIST_COUNT) return Status::ok();
  return error(ErrorCode::kInvalidArgument,
               owner + ": " + std::to_string(count) + " " + std::string(what) + ", more than the " +
                   std::to_string(QD_MAX_LIST_COUNT) + " the capture ABI carries");
}

Status check_sink_options(const SinkOptions& o) {
  const std::pair<std::string_view, const std::string*> texts[] = {
      {"output path", &o.output_path}, {"producer", &o.producer},
      {"backend", &o.backend},         {"model", &o.model},
      {"naming preset", &o.naming},    {"handle map path", &o.handle_map_path}};
  for (const auto& [what, text] : texts) QD_RETURN_IF_ERROR(check_c_string(what, *text));
  return Status::ok();
}

Status check_graph_node_abi(const GraphNode& node) {
  QD_RETURN_IF_ERROR(check_c_string("graph node", node.name));
  const std::string owner = "graph node " + quote_name(node.name);
  QD_RETURN_IF_ERROR(check_c_string(owner + ": op type", node.op_type));
  for (const std::vector<std::string>* names : {&node.inputs, &node.outputs}) {
    for (const std::string& name : *names) {
      QD_RETURN_IF_ERROR(check_c_string(owner + ": tensor", name));
    }
  }
  QD_RETURN_IF_ERROR(check_list_count("inputs", owner, node.inputs.size()));
  QD_RETURN_IF_ERROR(check_list_count("outputs", owner, node.outputs.size()));
  return check_list_count("handles", owner, node.handles.size());
}

bool offset_fits_capture_abi(int64_t offset) {
  return offset >= std::numeric_limits<int32_t>::min() &&
         offset <= std::numeric_limits<int32_t>::max();
}

Status check_capture_abi(const TensorRecord& record, uint64_t nbytes) {
  if (has_nul(record.name)) return invalid_tensor(record, "the name " + kNulWhy);
  // The store's rules first: they bound the rank and tie the offsets' count to the scales'.
  QD_RETURN_IF_ERROR(validate_tensor(record, nbytes));
  QD_RETURN_IF_ERROR(check_index(record, "output_index", record.output_index));
  QD_RETURN_IF_ERROR(check_index(record, "quantization axis", record.quant.axis));
  for (const int64_t offset : record.quant.offsets) {
    if (!offset_fits_capture_abi(offset)) {
      return invalid_tensor(record, "quantization offset " + std::to_string(offset) +
                                        " is outside int32 (QNN offsets and the capture ABI's)");
    }
  }
  QD_RETURN_IF_ERROR(
      check_list_count("handles", "tensor " + quote_name(record.name), record.handles.size()));
  return check_list_count("scales", "tensor " + quote_name(record.name),
                          record.quant.scales.size());
}

}  // namespace qd::importers
