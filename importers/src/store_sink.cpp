#include "qnn_debug/importers/store_sink.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>
#include <utility>

namespace qd::importers {
namespace {

// The reader keeps the pipeline fed from the page cache; a bigger queue only costs start-up (the
// ring is pre-faulted) and memory.
constexpr uint64_t kQueueBudgetBytes = uint64_t{16} << 20;

std::string temporary_beside(const std::string& path) {
  const std::filesystem::path target(path);
  return (target.parent_path() /
          ("." + target.filename().string() + ".partial-" + std::to_string(::getpid())))
      .string();
}

const std::string kNulWhy =
    "contains a NUL byte, which the capture ABI cannot carry (its names are C strings)";

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

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

Status check_options(const SinkOptions& o) {
  const std::pair<std::string_view, const std::string*> texts[] = {
      {"output path", &o.output_path}, {"producer", &o.producer},
      {"backend", &o.backend},         {"model", &o.model},
      {"naming preset", &o.naming},    {"handle map path", &o.handle_map_path}};
  for (const auto& [what, text] : texts) QD_RETURN_IF_ERROR(check_c_string(what, *text));
  return Status::ok();
}

Status check_graph_node(const GraphNode& node) {
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

Result<StoreSink> StoreSink::open(const SinkOptions& o) {
  QD_RETURN_IF_ERROR(check_options(o));
  std::string temporary = temporary_beside(o.output_path);
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = temporary.c_str();
  options.naming = o.naming.c_str();
  options.handle_map_path = o.handle_map_path.empty() ? nullptr : o.handle_map_path.c_str();
  options.producer = o.producer.c_str();
  options.backend = o.backend.c_str();
  options.model = o.model.c_str();
  options.queue_budget_bytes = kQueueBudgetBytes;
  options.durable = 0;  // the inputs stay on disk; the rename publishes the store, not an fsync
  QD_ASSIGN_OR_RETURN(CaptureSession session, CaptureSession::open(options));
  return StoreSink(std::move(session), o.output_path, std::move(temporary));
}

StoreSink::StoreSink(StoreSink&& other) noexcept
    : session_(std::move(other.session_)),
      path_(std::move(other.path_)),
      temporary_(std::move(other.temporary_)),
      committed_(std::exchange(other.committed_, true)) {}

StoreSink::~StoreSink() {
  if (committed_) return;
  (void)session_.close();
  std::remove(temporary_.c_str());
}

Status StoreSink::begin_run(const std::string& name) {
  QD_RETURN_IF_ERROR(check_c_string("run", name));
  return session_.begin_run(name);
}

Status StoreSink::profile_event(const std::string& name, const std::vector<int64_t>& handles,
                                int64_t start, int64_t end, const std::string& unit) {
  QD_RETURN_IF_ERROR(check_c_string("profile event", name));
  QD_RETURN_IF_ERROR(check_c_string("profile event unit", unit));
  QD_RETURN_IF_ERROR(
      check_list_count("handles", "profile event " + quote_name(name), handles.size()));
  return session_.profile_event(name, handles, start, end, unit);
}

Status StoreSink::memory_checkpoint(const std::string& label, uint64_t bytes) {
  QD_RETURN_IF_ERROR(check_c_string("memory checkpoint", label));
  return session_.memory_checkpoint(label, bytes);
}

Status StoreSink::capture(const TensorRecord& record, std::span<const uint8_t> data,
                          bool handles_given, bool role_given) {
  QD_RETURN_IF_ERROR(check_capture_abi(record, data.size()));
  qd_tensor tensor;
  qd_tensor_init(&tensor);
  tensor.name = record.name.c_str();
  tensor.dtype = static_cast<uint32_t>(record.dtype);
  tensor.rank = static_cast<uint32_t>(record.dims.size());
  tensor.dims = record.dims.data();
  tensor.axis_order = record.axis_order.empty() ? nullptr : record.axis_order.data();
  tensor.data = data.data();
  tensor.nbytes = data.size();
  tensor.output_index = record.output_index;
  tensor.role = role_given ? static_cast<int32_t>(record.role) : QD_ROLE_FROM_NAME;
  const std::vector<int32_t> offsets(record.quant.offsets.begin(), record.quant.offsets.end());
  tensor.quant.count = static_cast<uint32_t>(record.quant.scales.size());
  tensor.quant.axis = record.quant.axis;
  tensor.quant.scales = record.quant.scales.data();
  tensor.quant.offsets = offsets.data();
  tensor.quant.bitwidth = record.quant.bitwidth;
  tensor.quant.convention = static_cast<uint8_t>(record.quant.convention);
  if (handles_given) {
    static const int64_t kNoHandles = 0;  // non-NULL: "exactly these handles", even none
    tensor.handles = record.handles.empty() ? &kNoHandles : record.handles.data();
    tensor.handle_count = static_cast<uint32_t>(record.handles.size());
  }
  return session_.capture(tensor);
}

Status StoreSink::graph_node(const GraphNode& node) {
  QD_RETURN_IF_ERROR(check_graph_node(node));
  std::vector<const char*> inputs, outputs;
  for (const std::string& name : node.inputs) inputs.push_back(name.c_str());
  for (const std::string& name : node.outputs) outputs.push_back(name.c_str());
  const qd_graph_node converted{node.name.c_str(),   node.op_type.c_str(),
                                inputs.data(),       static_cast<uint32_t>(inputs.size()),
                                outputs.data(),      static_cast<uint32_t>(outputs.size()),
                                node.handles.data(), static_cast<uint32_t>(node.handles.size())};
  return session_.graph_node(converted);
}

Status StoreSink::commit() {
  QD_RETURN_IF_ERROR(session_.close());
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    return error(ErrorCode::kIo,
                 quote_name(path_) + ": cannot be written (" + std::strerror(errno) + ")");
  }
  committed_ = true;
  return Status::ok();
}

}  // namespace qd::importers
