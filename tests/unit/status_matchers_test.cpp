// The test matchers of tests/common/status_matchers.h: what they accept, and what a failure says.
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <string>

namespace qd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::IsOk;
using testing::IsOkAndHolds;
using ::testing::Not;
using testing::StatusIs;

Result<std::vector<int>> two_three() { return std::vector<int>{2, 3}; }
Result<std::vector<int>> refused() { return error(ErrorCode::kInvalidArgument, "bad dims 2y3"); }

// Why `matcher` rejects `value`: the listener's text.
template <typename Matcher, typename Value>
std::string why_not(const Matcher& matcher, const Value& value) {
  ::testing::StringMatchResultListener listener;
  EXPECT_FALSE(::testing::ExplainMatchResult(matcher, value, &listener));
  return listener.str();
}

TEST(StatusMatchers, IsOkAcceptsOkStatusesAndValuesAndNamesTheError) {
  EXPECT_THAT(Status::ok(), IsOk());
  EXPECT_THAT(two_three(), IsOk());
  EXPECT_THAT(refused(), Not(IsOk()));
  EXPECT_EQ(why_not(IsOk(), refused()), "the error is invalid_argument: bad dims 2y3");
}

TEST(StatusMatchers, StatusIsChecksTheCodeAndTheMessage) {
  EXPECT_THAT(refused(), StatusIs(ErrorCode::kInvalidArgument));
  EXPECT_THAT(refused(), StatusIs(ErrorCode::kInvalidArgument, HasSubstr("2y3")));
  EXPECT_THAT(refused(), StatusIs(ErrorCode::kInvalidArgument, "bad dims 2y3"));
  EXPECT_THAT(refused(), Not(StatusIs(ErrorCode::kIo)));
  EXPECT_THAT(refused(), Not(StatusIs(ErrorCode::kInvalidArgument, HasSubstr("3x2"))));
  EXPECT_EQ(why_not(StatusIs(ErrorCode::kIo), refused()),
            "the error is invalid_argument: bad dims 2y3");
  EXPECT_EQ(why_not(StatusIs(ErrorCode::kIo), two_three()), "it is ok");
}

TEST(StatusMatchers, IsOkAndHoldsMatchesTheValue) {
  EXPECT_THAT(two_three(), IsOkAndHolds(ElementsAre(2, 3)));
  EXPECT_THAT(two_three(), Not(IsOkAndHolds(ElementsAre(3, 2))));
  EXPECT_EQ(why_not(IsOkAndHolds(ElementsAre(2, 3)), refused()),
            "the error is invalid_argument: bad dims 2y3");
}

}  // namespace
}  // namespace qd
