// How a failed Status leaves the extension: thrown as NativeError, which the translator module.cpp
// registers turns into qnn_debug.QnnDebugError with the message and the `code`. Shared by every
// source of the extension, so they raise the same exception the same way.
#pragma once

#include <string>
#include <utility>

#include "qnn_debug/base/status.h"

namespace qd::python {

struct NativeError {
  ErrorCode code;
  std::string message;
};

inline void check(const Status& status) {
  if (!status.is_ok()) throw NativeError{status.code(), status.message()};
}

template <typename T>
T take(Result<T> result) {
  check(result.status());
  return std::move(result).value();
}

}  // namespace qd::python
