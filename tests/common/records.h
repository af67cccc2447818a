// Tensor records and status checks shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/base/tensor.h"

namespace qd::testing {

// A record with a name, dtype and dims; everything else as TensorRecord's defaults.
inline TensorRecord tensor_record(std::string name, DType dtype, std::vector<uint64_t> dims) {
  TensorRecord record;
  record.name = std::move(name);
  record.dtype = dtype;
  record.dims = std::move(dims);
  return record;
}

// A failure with `code` whose one-line message contains `fragment`.
inline void expect_failure(const Status& status, ErrorCode code, std::string_view fragment) {
  ASSERT_FALSE(status.is_ok()) << "expected an error mentioning " << fragment;
  const std::string& message = status.message();
  EXPECT_EQ(status.code(), code) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace qd::testing
