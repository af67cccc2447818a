// The C ABI: argument checking, translation to the C++ session, and the guarantee that no
// exception ever crosses into the host runtime.
//
// A qd_session* is an id, not a pointer: a registry maps live ids to sessions, so a handle that
// was closed (or never opened) is refused instead of dereferenced, and ids are never reused, so
// a stale handle cannot reach a newer session either.
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "qnn_debug/capture.h"
#include "session.h"

namespace {

using qd::ErrorCode;
using qd::Status;
using qd::capture::Session;

// Lists a caller hands in are bounded before they are read: a garbage count must be refused,
// not trusted for a read far past the end of the caller's array.
constexpr uint32_t kMaxListCount = QD_MAX_LIST_COUNT;

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

// Sets the calling thread's message from parts, so that guarded's handlers need not build a
// string themselves: a throw there would escape into the host.
qd_status fail(qd_status status, std::string_view message, std::string_view detail = {}) noexcept {
  try {
    t_last_error.assign(message);
    t_last_error.append(detail);
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
    return fail(QD_ERR_INTERNAL, "internal error: ", e.what());
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

std::string count_text(const char* what, uint64_t count) {
  return std::string(what) + " " + std::to_string(count);
}

std::string too_many(const char* what, uint32_t count) {
  return count_text(what, count) + " exceeds " + std::to_string(kMaxListCount);
}

// ---- handles: ids of open sessions ----

// A session as the registry holds it. `calls` counts the API calls inside it right now: close
// waits for it to drop to zero before it tears the session down.
struct OpenSession {
  explicit OpenSession(std::unique_ptr<Session> session) : impl(std::move(session)) {}
  std::unique_ptr<Session> impl;
  std::atomic<uint64_t> calls{0};
};

// Maps handles to open sessions. A handle is an id from a counter that never goes back, so a
// closed handle can never name a later session. Lookups share the lock: threads capturing at
// once do not serialize on it; only open and close take it exclusively, briefly.
class Registry {
 public:
  // The new session's id; 0 once ids ran out (2^32 opens on a 32-bit target).
  uintptr_t add(std::unique_ptr<OpenSession> session) {
    std::unique_lock lock(mutex_);
    if (last_id_ == UINTPTR_MAX) return 0;
    sessions_.emplace(last_id_ + 1, std::move(session));
    return ++last_id_;
  }

  // The session, with this call counted in it; null if `id` is not open.
  OpenSession* enter(uintptr_t id) {
    std::shared_lock lock(mutex_);
    const auto found = sessions_.find(id);
    if (found == sessions_.end()) return nullptr;
    // Counted under the lock: once remove() has run, no call can get in any more, so the count
    // close waits on covers every call that did.
    found->second->calls.fetch_add(1, std::memory_order_relaxed);
    return found->second.get();
  }

  // Takes every session out, for closing at exit.
  std::vector<std::unique_ptr<OpenSession>> remove_all() {
    std::unique_lock lock(mutex_);
    std::vector<std::unique_ptr<OpenSession>> all;
    for (auto& [id, session] : sessions_) all.push_back(std::move(session));
    sessions_.clear();
    return all;
  }

  // Takes the session out: later lookups fail; calls already inside stay counted.
  std::unique_ptr<OpenSession> remove(uintptr_t id) {
    std::unique_lock lock(mutex_);
    const auto found = sessions_.find(id);
    if (found == sessions_.end()) return nullptr;
    std::unique_ptr<OpenSession> session = std::move(found->second);
    sessions_.erase(found);
    return session;
  }

 private:
  std::shared_mutex mutex_;
  std::unordered_map<uintptr_t, std::unique_ptr<OpenSession>> sessions_;
  uintptr_t last_id_ = 0;
};

// Never destroyed: a host may still call in (and get "not open") from its own static destructors.
Registry& registry() {
  static Registry* const instance = new Registry;
  return *instance;
}

uintptr_t id_of(const qd_session* handle) { return reinterpret_cast<uintptr_t>(handle); }

// One API call inside a session: admitted only while the session is open, counted while inside.
class SessionCall {
 public:
  explicit SessionCall(qd_session* handle)
      : open_(handle != nullptr ? registry().enter(id_of(handle)) : nullptr) {}
  // The decrement is the call's last touch of the session: close may free it right after.
  ~SessionCall() {
    if (open_ != nullptr) open_->calls.fetch_sub(1, std::memory_order_release);
  }
  SessionCall(const SessionCall&) = delete;
  SessionCall& operator=(const SessionCall&) = delete;

  explicit operator bool() const { return open_ != nullptr; }
  Session* operator->() const { return open_->impl.get(); }

 private:
  OpenSession* open_;
};

qd_status not_open(const qd_session* handle) {
  if (handle == nullptr) return bad_argument("session is NULL");
  return bad_argument("session " + std::to_string(id_of(handle)) +
                      " is not open (closed, or never opened)");
}

// Polls instead of waiting on a condition variable: a leaving call's decrement must be its last
// touch of the session, or close could free the session under a notify. The calls are short,
// or (a capture blocked on a full queue, a flush) end as the writer keeps draining.
void wait_for_calls(const OpenSession& session) {
  while (session.calls.load(std::memory_order_acquire) != 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Closes a session already taken out of the registry, once the calls inside it have returned.
Status finish(OpenSession& session) {
  wait_for_calls(session);
  return session.impl->close();
}

// A host may exit (return from main, call exit) with sessions still open. The static destructors
// and HDF5's own exit handler would then run under the pipeline threads (a use after free in the
// host), and the queued tensors would be lost. Registered once a session is open, so after HDF5's
// handler and the store schema's statics, this runs before them: it closes every open session,
// which writes its queue and closes its store.
void close_sessions_at_exit() noexcept {
  try {
    for (const std::unique_ptr<OpenSession>& session : registry().remove_all()) {
      (void)finish(*session);
    }
  } catch (...) {  // nothing may escape an exit handler
  }
}

void close_sessions_at_exit_from_now() {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit([] { close_sessions_at_exit(); }); });
}

// ---- tensors ----

qd_status tensor_error(const qd_tensor& in, const std::string& why) {
  return bad_argument("tensor " + qd::quote_name(in.name) + ": " + why);
}

// `count` is all that says how long the caller's scales and offsets are: it must agree with the
// shape (1 per tensor, dims[axis] per axis) before either array is read.
qd_status check_quant_count(const qd_tensor& in) {
  const qd_quantization& quant = in.quant;
  if (quant.axis < 0) {
    if (quant.count == 1) return QD_OK;
    return tensor_error(in, "per-tensor quantization (axis < 0) needs count 1, got " +
                                count_text("count", quant.count));
  }
  const auto axis = static_cast<uint32_t>(quant.axis);
  if (axis >= in.rank) {
    return tensor_error(in, "quantization axis " + std::to_string(quant.axis) +
                                " is outside rank " + std::to_string(in.rank) + " (" +
                                count_text("count", quant.count) + ")");
  }
  if (quant.count != in.dims[axis]) {
    return tensor_error(in, "per-axis quantization " + count_text("count", quant.count) +
                                " differs from dims[" + std::to_string(axis) +
                                "] = " + std::to_string(in.dims[axis]));
  }
  return QD_OK;
}

qd_status check_quantization(const qd_tensor& in) {
  const qd_quantization& quant = in.quant;
  if (quant.count == 0) return QD_OK;  // not quantized: the other fields are ignored
  if (quant.scales == nullptr || quant.offsets == nullptr) {
    return tensor_error(
        in, "quantization " + count_text("count", quant.count) + " but scales or offsets is NULL");
  }
  if (quant.convention > QD_QUANT_ZERO_POINT) {
    return tensor_error(in, "unknown quantization convention " + std::to_string(quant.convention));
  }
  return check_quant_count(in);
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

// Every pointer and count of the struct, checked before the arrays behind them are copied. Only
// dims is read here (dims[axis], for the quantization count), once `rank` has bounded it.
qd_status check_tensor(const qd_tensor& in) {
  if (in.struct_size != sizeof(qd_tensor) && in.struct_size != kTensorSizeAbi2) {
    return bad_argument("tensor.struct_size is " + std::to_string(in.struct_size) + ", expected " +
                        std::to_string(sizeof(qd_tensor)) +
                        " (call qd_tensor_init; QD_CAPTURE_ABI_VERSION " +
                        std::to_string(QD_CAPTURE_ABI_VERSION) + ")");
  }
  if (in.name == nullptr) return bad_argument("tensor name is NULL");
  if (!qd::dtype_info(in.dtype)) {
    return tensor_error(in, "unknown dtype code " + std::to_string(in.dtype));
  }
  if (in.rank > static_cast<uint32_t>(qd::kMaxRank)) {
    return tensor_error(in, "rank " + std::to_string(in.rank) + " exceeds 8");
  }
  if (in.rank > 0 && in.dims == nullptr) return tensor_error(in, "dims is NULL");
  if (in.nbytes > 0 && in.data == nullptr) return tensor_error(in, "data is NULL");
  if (in.handles != nullptr && in.handle_count > kMaxListCount) {
    return tensor_error(in, too_many("handle_count", in.handle_count));
  }
  if (has_role(in) && (in.role < QD_ROLE_INTERMEDIATE || in.role > QD_ROLE_GRAPH_OUTPUT)) {
    return tensor_error(in, "unknown role " + std::to_string(in.role));
  }
  return check_quantization(in);
}

void copy_quantization(const qd_quantization& in, qd::Quantization* out) {
  if (in.count == 0) return;
  out->scales.assign(in.scales, in.scales + in.count);
  out->offsets.assign(in.offsets, in.offsets + in.count);
  out->axis = in.axis < 0 ? -1 : in.axis;
  out->bitwidth = in.bitwidth;
  out->convention = static_cast<qd::QuantConvention>(in.convention);
}

// Builds the record from C arguments; the session re-validates against the store's rules.
qd_status convert_tensor(const qd_tensor& in, qd::TensorRecord* out) {
  if (qd_status status = check_tensor(in); status != QD_OK) return status;
  out->name = in.name;
  out->dtype = static_cast<qd::DType>(in.dtype);
  if (in.rank > 0) out->dims.assign(in.dims, in.dims + in.rank);
  if (in.axis_order != nullptr) out->axis_order.assign(in.axis_order, in.axis_order + in.rank);
  if (in.handles != nullptr) out->handles.assign(in.handles, in.handles + in.handle_count);
  out->output_index = in.output_index < 0 ? -1 : in.output_index;
  if (has_role(in)) out->role = static_cast<qd::TensorRole>(in.role);
  copy_quantization(in.quant, &out->quant);
  const Status valid = qd::validate_tensor(*out, in.nbytes);
  return valid.is_ok() ? QD_OK : report(valid);
}

// ---- events and graph nodes ----

qd_status check_profile_event(const qd_profile_event& in) {
  if (in.struct_size != sizeof(qd_profile_event)) {
    return bad_argument("profile event struct_size is " + std::to_string(in.struct_size) +
                        ", expected " + std::to_string(sizeof(qd_profile_event)) +
                        " (call qd_profile_event_init)");
  }
  if (in.name == nullptr) return bad_argument("profile event name is NULL");
  auto who = [&] { return "profile event " + qd::quote_name(in.name) + ": "; };
  if (in.handles != nullptr && in.handle_count > kMaxListCount) {
    return bad_argument(who() + too_many("handle_count", in.handle_count));
  }
  if (in.handle_count > 0 && in.handles == nullptr) {
    return bad_argument(who() + "handles is NULL with " +
                        count_text("handle_count", in.handle_count));
  }
  if (in.instruction_id < -1) {
    return bad_argument(who() + "instruction_id is " + std::to_string(in.instruction_id) +
                        " (an index, or -1 for none)");
  }
  return QD_OK;
}

qd_status check_graph_node(const qd_graph_node* node) {
  if (node == nullptr || node->name == nullptr) return bad_argument("graph node or name is NULL");
  auto who = [&] { return "graph node " + qd::quote_name(node->name) + ": "; };
  const struct {
    const char* count_name;
    const void* list;
    uint32_t count;
  } lists[] = {{"input_count", node->inputs, node->input_count},
               {"output_count", node->outputs, node->output_count},
               {"handle_count", node->handles, node->handle_count}};
  for (const auto& list : lists) {
    if (list.count > kMaxListCount) {
      return bad_argument(who() + too_many(list.count_name, list.count));
    }
    if (list.count > 0 && list.list == nullptr) {
      return bad_argument(who() + "a list is NULL with " + count_text(list.count_name, list.count));
    }
  }
  return QD_OK;
}

std::vector<std::string> names_of(const char* const* names, uint32_t count) {
  std::vector<std::string> out;
  out.reserve(count);
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

void qd_profile_event_init(qd_profile_event* event) {
  if (event == nullptr) return;
  *event = qd_profile_event{};
  event->struct_size = sizeof(qd_profile_event);
  event->unit = "ns";
  event->instruction_id = -1;
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
    auto session = Session::open(config);
    if (!session) return report(session.status());
    const uintptr_t id = registry().add(std::make_unique<OpenSession>(std::move(session).value()));
    if (id == 0) return fail(QD_ERR_INTERNAL, "no session ids left in this process");
    close_sessions_at_exit_from_now();
    *out_session = reinterpret_cast<qd_session*>(id);
    return report(Status::ok());
  });
}

qd_status qd_begin_run(qd_session* session, const char* name) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    return report(call->begin_run(text_or(name, "")));
  });
}

qd_status qd_end_run(qd_session* session) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    return report(call->end_run());
  });
}

qd_status qd_capture_tensor(qd_session* session, const qd_tensor* tensor) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (tensor == nullptr) return bad_argument("tensor is NULL");
    qd::TensorRecord record;
    if (qd_status status = convert_tensor(*tensor, &record); status != QD_OK) return status;
    const qd::capture::StatedFacts stated{tensor->handles != nullptr, has_role(*tensor)};
    return report(call->capture(std::move(record), static_cast<const uint8_t*>(tensor->data),
                                tensor->nbytes, stated));
  });
}

qd_status qd_record_profile(qd_session* session, const qd_profile_event* in) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (in == nullptr) return bad_argument("profile event is NULL");
    if (qd_status status = check_profile_event(*in); status != QD_OK) return status;
    qd::ProfileEvent event;
    event.name = in->name;
    if (in->handles != nullptr) event.handles.assign(in->handles, in->handles + in->handle_count);
    event.start = in->start;
    event.end = in->end;
    event.unit = text_or(in->unit, "ns");
    event.instruction_id = in->instruction_id;
    return report(call->record_profile_event(std::move(event), in->handles == nullptr));
  });
}

qd_status qd_record_profile_event(qd_session* session, const char* name, const int64_t* handles,
                                  uint32_t handle_count, int64_t start, int64_t end,
                                  const char* unit) {
  qd_profile_event event;
  qd_profile_event_init(&event);
  event.name = name;
  event.handles = handles;
  event.handle_count = handle_count;
  event.start = start;
  event.end = end;
  event.unit = unit;
  return qd_record_profile(session, &event);
}

qd_status qd_record_memory_checkpoint(qd_session* session, const char* label, uint64_t bytes) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (label == nullptr) return bad_argument("memory checkpoint label is NULL");
    return report(call->record_memory_checkpoint({0, label, bytes, 0}));
  });
}

qd_status qd_add_graph_node(qd_session* session, const qd_graph_node* node) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (qd_status status = check_graph_node(node); status != QD_OK) return status;
    qd::GraphNode converted;
    converted.name = node->name;
    converted.op_type = text_or(node->op_type, "");
    converted.inputs = names_of(node->inputs, node->input_count);
    converted.outputs = names_of(node->outputs, node->output_count);
    if (node->handles != nullptr) {
      converted.handles.assign(node->handles, node->handles + node->handle_count);
    }
    return report(call->add_graph_node(std::move(converted)));
  });
}

qd_status qd_record_shape_guess(qd_session* session, const char* tensor_name) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (tensor_name == nullptr) return bad_argument("tensor_name is NULL");
    return report(call->record_shape_guess(tensor_name));
  });
}

qd_status qd_flush(qd_session* session) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    return report(call->flush());
  });
}

qd_status qd_get_stats(qd_session* session, qd_session_stats* out_stats) {
  return guarded([&] {
    SessionCall call(session);
    if (!call) return not_open(session);
    if (out_stats == nullptr) return bad_argument("out_stats is NULL");
    const qd::capture::SessionStats stats = call->stats();
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

// Takes the handle out of the registry first, so calls that start from now on are refused;
// then waits for the calls already inside to leave, and only then closes and frees.
qd_status qd_session_close(qd_session* session) {
  return guarded([&] {
    std::unique_ptr<OpenSession> closing =
        session != nullptr ? registry().remove(id_of(session)) : nullptr;
    if (!closing) return not_open(session);
    return report(finish(*closing));
  });
}

const char* qd_last_error(void) { return t_last_error.c_str(); }

const char* qd_status_name(qd_status status) {
  // error_code_name's spelling in C: "io" is "QD_ERR_IO"; a drop is "QD_DROPPED". Fixed arrays,
  // built once: nothing here can fail or throw.
  static constexpr size_t kCodes = static_cast<size_t>(qd::ErrorCode::kInternal) + 1;
  static const auto names = [] {
    std::array<std::array<char, 40>, kCodes> out{};
    for (size_t c = 0; c < kCodes; ++c) {
      const auto code = static_cast<qd::ErrorCode>(c);
      std::string_view name = qd::error_code_name(code);
      const char* lead = code == qd::ErrorCode::kOk ? "QD_" : "QD_ERR_";
      if (code == qd::ErrorCode::kQueueFull) lead = "QD_", name = "dropped";
      int at = std::snprintf(out[c].data(), out[c].size(), "%s", lead);
      for (char ch : name) {
        out[c][static_cast<size_t>(at++)] =
            static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      }
    }
    return out;
  }();
  // A C caller may pass any int: read the enum's bytes as one, since a C++ load of an enum
  // value outside its enumerators is undefined (and UBSan's enum check says so).
  static_assert(sizeof(qd_status) == sizeof(int), "qd_status is an int in C");
  int code = 0;
  std::memcpy(&code, &status, sizeof code);
  return code >= 0 && static_cast<size_t>(code) < kCodes ? names[static_cast<size_t>(code)].data()
                                                         : "QD_UNKNOWN_STATUS";
}

}  // extern "C"
