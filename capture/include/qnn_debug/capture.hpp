// Thin C++ wrapper over the C ABI in capture.h: RAII for the session, qd::Status for errors.
// Header-only on purpose, so C++ callers cross the same stable C boundary as everyone else.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/capture.h"

namespace qd {

class CaptureSession {
 public:
  static Result<CaptureSession> open(const qd_session_options& options) {
    qd_session* session = nullptr;
    const qd_status status = qd_session_open(&options, &session);
    if (status != QD_OK) return to_status(status);
    return CaptureSession(session);
  }

  CaptureSession(CaptureSession&& other) noexcept
      : session_(std::exchange(other.session_, nullptr)) {}
  CaptureSession& operator=(CaptureSession&& other) noexcept {
    if (this != &other) {
      (void)close();
      session_ = std::exchange(other.session_, nullptr);
    }
    return *this;
  }
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;
  ~CaptureSession() { (void)close(); }

  Status begin_run(const std::string& name) { return check(qd_begin_run(session_, name.c_str())); }
  Status end_run() { return check(qd_end_run(session_)); }
  Status capture(const qd_tensor& tensor) { return check(qd_capture_tensor(session_, &tensor)); }
  Status profile_event(const std::string& name, int64_t start, int64_t end,
                       const std::string& unit = "ns") {
    return check(
        qd_record_profile_event(session_, name.c_str(), nullptr, 0, start, end, unit.c_str()));
  }
  // With the op's debug handles as the producer knows them (empty: none), not parsed from `name`,
  // and the runtime's instruction index (-1: none known).
  Status profile_event(const std::string& name, const std::vector<int64_t>& handles, int64_t start,
                       int64_t end, const std::string& unit, int64_t instruction_id = -1) {
    static const int64_t kNoHandles = 0;  // a non-NULL pointer: "these handles", even none
    qd_profile_event event;
    qd_profile_event_init(&event);
    event.name = name.c_str();
    event.handles = handles.empty() ? &kNoHandles : handles.data();
    event.handle_count = static_cast<uint32_t>(handles.size());
    event.start = start;
    event.end = end;
    event.unit = unit.c_str();
    event.instruction_id = instruction_id;
    return check(qd_record_profile(session_, &event));
  }
  Status memory_checkpoint(const std::string& label, uint64_t bytes) {
    return check(qd_record_memory_checkpoint(session_, label.c_str(), bytes));
  }
  Status shape_guess(const std::string& tensor_name) {
    return check(qd_record_shape_guess(session_, tensor_name.c_str()));
  }
  Status graph_node(const qd_graph_node& node) { return check(qd_add_graph_node(session_, &node)); }
  Status flush() { return check(qd_flush(session_)); }
  // The counters, also after a write error (then stats.writer_status says which): they matter
  // most exactly then. Fails only for a closed wrapper.
  Result<qd_session_stats> stats() const {
    qd_session_stats stats{};
    const qd_status status = qd_get_stats(session_, &stats);
    if (status == QD_ERR_INVALID_ARGUMENT) return to_status(status);
    return stats;
  }
  // Closes now (the destructor would too, but silently).
  Status close() {
    if (session_ == nullptr) return Status::ok();
    return check(qd_session_close(std::exchange(session_, nullptr)));
  }

  qd_session* get() const { return session_; }

 private:
  explicit CaptureSession(qd_session* session) : session_(session) {}

  static Status to_status(qd_status status) {
    return Status(static_cast<ErrorCode>(status), qd_last_error());
  }
  static Status check(qd_status status) {
    return status == QD_OK ? Status::ok() : to_status(status);
  }

  qd_session* session_ = nullptr;
};

}  // namespace qd
