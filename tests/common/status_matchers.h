// gMock matchers for qd::Status and qd::Result<T>, so a failing check prints the error's code and
// message without each test spelling them out:
//   ASSERT_THAT(store.close(), IsOk());
//   EXPECT_THAT(Policy::from_json("[", "p"), StatusIs(ErrorCode::kInvalidArgument,
//                                                     HasSubstr("not a JSON object")));
//   EXPECT_THAT(parse_dims("2x3"), IsOkAndHolds(ElementsAre(2, 3)));
#pragma once

#include <gmock/gmock.h>

#include <ostream>
#include <string>

#include "qnn_debug/base/status.h"

namespace qd {

// What gtest prints for a Status: "ok", or the code's name and the message.
inline void PrintTo(const Status& status, std::ostream* out) {
  if (status.is_ok()) {
    *out << "ok";
  } else {
    *out << error_code_name(status.code()) << ": " << status.message();
  }
}

namespace testing {

inline const Status& status_of(const Status& status) { return status; }
template <typename T>
const Status& status_of(const Result<T>& result) {
  return result.status();
}

// A Status or Result that holds no error.
MATCHER(IsOk, negation ? "is an error" : "is ok") {
  const Status& status = status_of(arg);
  if (!status.is_ok()) {
    *result_listener << "the error is " << error_code_name(status.code()) << ": "
                     << status.message();
  }
  return status.is_ok();
}

// An error of `code` whose message matches `message` (a string or a matcher of one).
MATCHER_P2(StatusIs, code, message,
           std::string(negation ? "is not " : "is ") + "a " + std::string(error_code_name(code)) +
               " error whose message " + ::testing::DescribeMatcher<std::string>(message)) {
  const Status& status = status_of(arg);
  if (status.is_ok()) {
    *result_listener << "it is ok";
    return false;
  }
  if (status.code() != code) {
    *result_listener << "the error is " << error_code_name(status.code()) << ": "
                     << status.message();
    return false;
  }
  return ::testing::ExplainMatchResult(::testing::SafeMatcherCast<const std::string&>(message),
                                       status.message(), result_listener);
}

// An error of `code`, whatever its message.
MATCHER_P(StatusIs, code,
          std::string(negation ? "is not " : "is ") + "a " + std::string(error_code_name(code)) +
              " error") {
  const Status& status = status_of(arg);
  if (status.is_ok()) {
    *result_listener << "it is ok";
    return false;
  }
  if (status.code() != code) {
    *result_listener << "the error is " << error_code_name(status.code()) << ": "
                     << status.message();
  }
  return status.code() == code;
}

// A Result holding a value that `inner` matches.
MATCHER_P(IsOkAndHolds, inner,
          negation ? "is an error or holds a value that does not match"
                   : "holds a value that matches") {
  if (!arg.is_ok()) {
    *result_listener << "the error is " << error_code_name(arg.status().code()) << ": "
                     << arg.status().message();
    return false;
  }
  return ::testing::ExplainMatchResult(inner, *arg, result_listener);
}

}  // namespace testing
}  // namespace qd
