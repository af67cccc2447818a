#include "qnn_debug/importers/store_sink.h"

#include <utility>

#include "capture_abi.h"
#include "heap_profile.h"

namespace qd::importers {
namespace {

// The reader keeps the pipeline fed from the page cache; a bigger queue only costs start-up (the
// ring is pre-faulted) and memory.
constexpr uint64_t kQueueBudgetBytes = uint64_t{16} << 20;

// The capture hook names the file it was given, the staging file; the user named the output.
Status naming_the_output(Status status, const StagedOutput& staged) {
  std::string message = status.message();
  const std::string& staging = staged.staging_path();
  for (size_t at = message.find(staging); at != std::string::npos;
       at = message.find(staging, at + staged.path().size())) {
    message.replace(at, staging.size(), staged.path());
  }
  return error(status.code(), std::move(message));
}

}  // namespace

Result<StoreSink> StoreSink::open(const SinkOptions& o) {
  QD_RETURN_IF_ERROR(check_sink_options(o));
  std::vector<MemoryCheckpoint> heap;
  if (!o.heap_profile_path.empty()) {
    QD_ASSIGN_OR_RETURN(heap, read_heap_profile(o.heap_profile_path));
  }
  QD_ASSIGN_OR_RETURN(StagedOutput staged, StagedOutput::prepare(o.output_path, "partial"));
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = staged.staging_path().c_str();
  options.naming = o.naming.c_str();
  options.handle_map_path = o.handle_map_path.empty() ? nullptr : o.handle_map_path.c_str();
  options.producer = o.producer.c_str();
  options.backend = o.backend.c_str();
  options.model = o.model.c_str();
  options.queue_budget_bytes = kQueueBudgetBytes;
  options.durable = 0;  // the inputs stay on disk; publishing the store needs no fsync
  Result<CaptureSession> session = CaptureSession::open(options);
  if (!session.is_ok()) return naming_the_output(session.status(), staged);
  return StoreSink(std::move(staged), std::move(session).value(), std::move(heap));
}

StoreSink::StoreSink(StoreSink&& other) noexcept
    : staged_(std::move(other.staged_)),
      session_(std::move(other.session_)),
      heap_(std::move(other.heap_)),
      committed_(std::exchange(other.committed_, true)) {}

StoreSink::~StoreSink() {
  if (!committed_) (void)session_.close();  // then staged_ removes the staging file
}

Status StoreSink::begin_run(const std::string& name) {
  QD_RETURN_IF_ERROR(check_c_string("run", name));
  return session_.begin_run(name);
}

Status StoreSink::profile_event(const std::string& name, const std::vector<int64_t>& handles,
                                int64_t start, int64_t end, const std::string& unit,
                                int64_t instruction_id) {
  QD_RETURN_IF_ERROR(check_c_string("profile event", name));
  QD_RETURN_IF_ERROR(check_c_string("profile event unit", unit));
  QD_RETURN_IF_ERROR(
      check_list_count("handles", "profile event " + quote_name(name), handles.size()));
  return session_.profile_event(name, handles, start, end, unit,
                                instruction_id < 0 ? -1 : instruction_id);
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
  for (const MemoryCheckpoint& checkpoint : heap_) {  // after the last run: outside any run
    QD_RETURN_IF_ERROR(memory_checkpoint(checkpoint.label, checkpoint.bytes));
  }
  Status closed = session_.close();
  if (!closed.is_ok()) return naming_the_output(closed, staged_);
  QD_RETURN_IF_ERROR(staged_.publish(/*durable=*/false));
  committed_ = true;
  return Status::ok();
}

}  // namespace qd::importers
