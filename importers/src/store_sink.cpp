#include "qnn_debug/importers/store_sink.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "capture_abi.h"

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

}  // namespace

Result<StoreSink> StoreSink::open(const SinkOptions& o) {
  QD_RETURN_IF_ERROR(check_sink_options(o));
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
  QD_RETURN_IF_ERROR(check_graph_node_abi(node));
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
