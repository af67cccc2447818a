// The C ABI: argument checking, translation to the C++ session, and the guarantee that no
// exception ever crosses into the host runtime.
#include <chrono>
#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "qnn_debug/capture.h"
#include "session.h"

struct qd_session {
  std::unique_ptr<qd::capture::Session> impl;
};

namespace {

using qd::ErrorCode;
using qd::Status;

thread_local std::string t_last_error;

static_assert(static_cast<int>(ErrorCode::kInvalidArgument) == QD_ERR_INVALID_ARGUMENT &&
                  static_cast<int>(ErrorCode::kIo) == QD_ERR_IO &&
                  static_cast<int>(ErrorCode::kCorrupt) == QD_ERR_CORRUPT &&
                  static_cast<int>(ErrorCode::kNotFound) == QD_ERR_NOT_FOUND &&
                  static_cast<int>(ErrorCode::kState) == QD_ERR_STATE &&
                  static_cast<int>(ErrorCode::kQueueFull) == QD_DROPPED &&
                  static_cast<int>(ErrorCode::kNoMemory) == QD_ERR_NO_MEMORY &&
                  static_cast<int>(ErrorCode::kInternal) == QD_ERR_INTERNAL,
              "qd_status mirrors qd::ErrorCode");

qd_status to_c(ErrorCode code) { return static_cast<qd_status>(code); }

qd_status fail(qd_status status, std::string message) {
  try {
    t_last_error = std::move(message);
  } catch (...) {
    t_last_error.clear();  // out of memory for the message itself: the code still tells
  }
  return status;
}

qd_status report(const Status& status) {
  if (status.is_ok()) {
    t_last_error.clear();
    return QD_OK;
  }
  return fail(to_c(status.code()), status.message());
}

// Runs `body` and turns anything it throws into a status: the ABI's no-throw promise.
template <typename Body>
qd_status guarded(Body body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(QD_ERR_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(QD_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(QD_ERR_INTERNAL, "internal error");
  }
}

std::string text_or(const char* text, const char* fallback) {
  return text != nullptr ? text : fallback;
}

qd_status bad_argument(const std::string& message) {
  return fail(QD_ERR_INVALID_ARGUMENT, message);
}

qd_status convert_quantization(const qd_quantization& in, qd::Quantization* out) {
  if (in.count == 0) return QD_OK;  // not quantized: the other fields are ignored
  if (in.scales == nullptr || in.offsets == nullptr) {
    return bad_argument("quantization count is " + std::to_string(in.count) +
                        " but scales or offsets is NULL");
  }
  if (in.convention > QD_QUANT_ZERO_POINT) {
    return bad_argument("unknown quantization convention " + std::to_string(in.convention));
  }
  out->scales.assign(in.scales, in.scales + in.count);
  out->offsets.assign(in.offsets, in.offsets + in.count);
  out->axis = in.axis < 0 ? -1 : in.axis;
  out->bitwidth = in.bitwidth;
  out->convention = static_cast<qd::QuantConvention>(in.convention);
  return QD_OK;
}

// ABI 2's qd_tensor ended before `role`. On 64-bit targets `role` took what was padding, so the
// size did not change (and qd_tensor_init sets it); on 32-bit ones an ABI 2 struct is shorter:
// accepted, its roles come from names.
constexpr uint32_t kTensorSizeAbi2 = offsetof(qd_tensor, role);

// The producer states the role: an ABI 3 struct with a role other than QD_ROLE_FROM_NAME.
bool has_role(const qd_tensor& in) {
  return in.struct_size >= offsetof(qd_tensor, role) + sizeof(in.role) &&
         in.role != QD_ROLE_FROM_NAME;
}

// Builds the record from C arguments; the session re-validates against the store's rules.
qd_status convert_tensor(const qd_tensor& in, qd::TensorRecord* out) {
  if (in.struct_size != sizeof(qd_tensor) && in.struct_size != kTensorSizeAbi2) {
    return bad_argument("tensor.struct_size is " + std::to_string(in.struct_size) + ", expected " +
                        std::to_string(sizeof(qd_tensor)) +
                        " (call qd_tensor_init; QD_CAPTURE_ABI_VERSION " +
                        std::to_string(QD_CAPTURE_ABI_VERSION) + ")");
  }
  if (in.name == nullptr) return bad_argument("tensor name is NULL");
  out->name = in.name;
  // Built only on failure: the success path is the runtime's hot path.
  auto who = [&] { return "tensor " + qd::quote_name(out->name) + ": "; };
  if (!qd::dtype_info(in.dtype)) {
    return bad_argument(who() + "unknown dtype code " + std::to_string(in.dtype));
  }
  if (in.rank > static_cast<uint32_t>(qd::kMaxRank)) {
    return bad_argument(who() + "rank " + std::to_string(in.rank) + " exceeds 8");
  }
  if (in.rank > 0 && in.dims == nullptr) return bad_argument(who() + "dims is NULL");
  if (in.nbytes > 0 && in.data == nullptr) return bad_argument(who() + "data is NULL");
  if (in.handles != nullptr) out->handles.assign(in.handles, in.handles + in.handle_count);
  out->dtype = static_cast<qd::DType>(in.dtype);
  if (in.rank > 0) out->dims.assign(in.dims, in.dims + in.rank);
  if (in.axis_order != nullptr) out->axis_order.assign(in.axis_order, in.axis_order + in.rank);
  out->output_index = in.output_index < 0 ? -1 : in.output_index;
  if (has_role(in)) {
    if (in.role < QD_ROLE_INTERMEDIATE || in.role > QD_ROLE_GRAPH_OUTPUT) {
      return bad_argument(who() + "unknown role " + std::to_string(in.role));
    }
    out->role = static_cast<qd::TensorRole>(in.role);
  }
  if (qd_status status = convert_quantization(in.quant, &out->quant); status != QD_OK) {
    return fail(status, who() + t_last_error);
  }
  const Status valid = qd::validate_tensor(*out, in.nbytes);
  return valid.is_ok() ? QD_OK : report(valid);
}

std::vector<std::string> names_of(const char* const* names, uint32_t count) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < count; ++i) out.emplace_back(text_or(names[i], ""));
  return out;
}

}  // namespace

extern "C" {

void qd_tensor_init(qd_tensor* tensor) {
  if (tensor == nullptr) return;
  *tensor = qd_tensor{};
  tensor->struct_size = sizeof(qd_tensor);
  tensor->dtype = 562;  // FLOAT_32
  tensor->output_index = -1;
  tensor->quant.axis = -1;
  tensor->role = QD_ROLE_FROM_NAME;
}

void qd_session_options_init(qd_session_options* options) {
  if (options == nullptr) return;
  *options = qd_session_options{};
  options->struct_size = sizeof(qd_session_options);
  options->full_queue_policy = QD_FULL_QUEUE_BLOCK;
  options->durable = 1;
}

qd_status qd_session_open(const qd_session_options* options, qd_session** out_session) {
  return guarded([&] {
    if (out_session == nullptr) return bad_argument("out_session is NULL");
    *out_session = nullptr;
    if (options == nullptr) return bad_argument("options is NULL");
    if (options->struct_size != sizeof(qd_session_options)) {
      return bad_argument("options.struct_size is " + std::to_string(options->struct_size) +
                          ", expected " + std::to_string(sizeof(qd_session_options)) +
                          " (call qd_session_options_init)");
    }
    if (options->path == nullptr) return bad_argument("options.path is NULL");
    if (options->full_queue_policy > QD_FULL_QUEUE_DROP) {
      return bad_argument("unknown full_queue_policy " +
                          std::to_string(options->full_queue_policy));
    }
    if (options->deflate_level < 0 || options->deflate_level > 9) {
      return bad_argument("deflate_level must be 0-9");
    }
    qd::capture::SessionConfig config;
    config.path = options->path;
    config.naming = text_or(options->naming, "debug-id");
    config.custom_pattern = text_or(options->custom_pattern, "");
    config.handle_map_path = text_or(options->handle_map_path, "");
    if (options->queue_budget_bytes != 0) config.queue_budget_bytes = options->queue_budget_bytes;
    config.policy = options->full_queue_policy == QD_FULL_QUEUE_DROP
                        ? qd::capture::FullQueuePolicy::kDrop
                        : qd::capture::FullQueuePolicy::kBlock;
    config.metadata = {text_or(options->producer, "qnn-debug capture"),
                       text_or(options->backend, ""), text_or(options->soc, ""),
                       text_or(options->model, ""),
                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()};
    config.writer.deflate_level = options->deflate_level;
    config.writer.durable = options->durable != 0;
    auto session = qd::capture::Session::open(config);
    if (!session) return report(session.status());
    *out_session = new qd_session{std::move(session).value()};
    return report(Status::ok());
  });
}

qd_status qd_begin_run(qd_session* session, const char* name) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    return report(session->impl->begin_run(text_or(name, "")));
  });
}

qd_status qd_end_run(qd_session* session) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    return report(session->impl->end_run());
  });
}

qd_status qd_capture_tensor(qd_session* session, const qd_tensor* tensor) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    if (tensor == nullptr) return bad_argument("tensor is NULL");
    qd::TensorRecord record;
    if (qd_status status = convert_tensor(*tensor, &record); status != QD_OK) return status;
    const qd::capture::StatedFacts stated{tensor->handles != nullptr, has_role(*tensor)};
    return report(session->impl->capture(
        std::move(record), static_cast<const uint8_t*>(tensor->data), tensor->nbytes, stated));
  });
}

qd_status qd_record_profile_event(qd_session* session, const char* name, const int64_t* handles,
                                  uint32_t handle_count, int64_t start, int64_t end,
                                  const char* unit) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    if (name == nullptr) return bad_argument("profile event name is NULL");
    if (handle_count > 0 && handles == nullptr) return bad_argument("handles is NULL");
    qd::ProfileEvent event;
    event.name = name;
    if (handles != nullptr) event.handles.assign(handles, handles + handle_count);
    event.start = start;
    event.end = end;
    event.unit = text_or(unit, "ns");
    return report(session->impl->record_profile_event(std::move(event), handles == nullptr));
  });
}

qd_status qd_record_memory_checkpoint(qd_session* session, const char* label, uint64_t bytes) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    if (label == nullptr) return bad_argument("memory checkpoint label is NULL");
    return report(session->impl->record_memory_checkpoint({0, label, bytes, 0}));
  });
}

qd_status qd_add_graph_node(qd_session* session, const qd_graph_node* node) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    if (node == nullptr || node->name == nullptr) return bad_argument("graph node or name is NULL");
    if ((node->input_count > 0 && node->inputs == nullptr) ||
        (node->output_count > 0 && node->outputs == nullptr) ||
        (node->handle_count > 0 && node->handles == nullptr)) {
      return bad_argument("graph node " + qd::quote_name(node->name) + ": a list is NULL");
    }
    qd::GraphNode converted;
    converted.name = node->name;
    converted.op_type = text_or(node->op_type, "");
    converted.inputs = names_of(node->inputs, node->input_count);
    converted.outputs = names_of(node->outputs, node->output_count);
    if (node->handles != nullptr) {
      converted.handles.assign(node->handles, node->handles + node->handle_count);
    }
    return report(session->impl->add_graph_node(std::move(converted)));
  });
}

qd_status qd_flush(qd_session* session) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    return report(session->impl->flush());
  });
}

qd_status qd_get_stats(qd_session* session, qd_session_stats* out_stats) {
  return guarded([&] {
    if (session == nullptr || out_stats == nullptr) return bad_argument("session or stats NULL");
    const qd::capture::SessionStats stats = session->impl->stats();
    *out_stats = {stats.captured,
                  stats.dropped,
                  stats.written,
                  stats.bytes_written,
                  stats.queue_peak_bytes,
                  stats.lost,
                  to_c(stats.writer_status.code())};
    return report(stats.writer_status);
  });
}

qd_status qd_session_close(qd_session* session) {
  return guarded([&] {
    if (session == nullptr) return bad_argument("session is NULL");
    std::unique_ptr<qd_session> owned(session);
    return report(owned->impl->close());
  });
}

const char* qd_last_error(void) { return t_last_error.c_str(); }

const char* qd_status_name(qd_status status) {
  switch (status) {
    case QD_OK:
      return "QD_OK";
    case QD_ERR_INVALID_ARGUMENT:
      return "QD_ERR_INVALID_ARGUMENT";
    case QD_ERR_IO:
      return "QD_ERR_IO";
    case QD_ERR_CORRUPT:
      return "QD_ERR_CORRUPT";
    case QD_ERR_NOT_FOUND:
      return "QD_ERR_NOT_FOUND";
    case QD_ERR_STATE:
      return "QD_ERR_STATE";
    case QD_DROPPED:
      return "QD_DROPPED";
    case QD_ERR_NO_MEMORY:
      return "QD_ERR_NO_MEMORY";
    case QD_ERR_INTERNAL:
      return "QD_ERR_INTERNAL";
  }
  return "QD_UNKNOWN_STATUS";
}

}  // extern "C"
