// Errors as values: every library boundary in qnn-debug returns Status or Result<T>.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace qd {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the caller passed something malformed
  kIo = 2,               // the file system or HDF5 refused
  kCorrupt = 3,          // a file exists but its content is damaged or not ours
  kNotFound = 4,         // a file, run or tensor that is not there
  kState = 5,            // the call is not allowed in the object's current state
  kQueueFull = 6,        // drop policy: the tensor was dropped and counted
  kNoMemory = 7,
  kInternal = 8,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// "invalid_argument", "io", "not_found", ...: the one spelling of each code, for messages and
// for Python's QnnDebugError.code (the C ABI's qd_status_name derives its names from it).
std::string_view error_code_name(ErrorCode code);

inline Status error(ErrorCode code, std::string message) { return {code, std::move(message)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : state_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(state_).is_ok() && "a Result built from a Status must carry an error");
  }

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return is_ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(state_);
  }

 private:
  std::variant<T, Status> state_;
};

}  // namespace qd

// Propagates a failed Status from an expression returning Status.
#define QD_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::qd::Status qd_status_ = (expr);           \
    if (!qd_status_.is_ok()) return qd_status_; \
  } while (false)

#define QD_CONCAT_INNER_(a, b) a##b
#define QD_CONCAT_(a, b) QD_CONCAT_INNER_(a, b)

// Binds the value of a Result to `lhs` or returns its error.
#define QD_ASSIGN_OR_RETURN(lhs, expr)                                                             \
  auto QD_CONCAT_(qd_result_, __LINE__) = (expr);                                                  \
  if (!QD_CONCAT_(qd_result_, __LINE__).is_ok()) return QD_CONCAT_(qd_result_, __LINE__).status(); \
  lhs = std::move(QD_CONCAT_(qd_result_, __LINE__)).value()
