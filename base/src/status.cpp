#include "qnn_debug/base/status.h"

namespace qd {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kCorrupt:
      return "corrupt";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kState:
      return "state";
    case ErrorCode::kQueueFull:
      return "queue_full";
    case ErrorCode::kNoMemory:
      return "no_memory";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace qd
