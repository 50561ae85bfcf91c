// SPDX-License-Identifier: Apache-2.0
#include "base/fd_limit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "forked_child.h"
#include "hzc_test.h"

namespace hzc {
namespace {

using testing::HasSubstr;

class FdLimitTest : public test::Test {};

TEST_F(FdLimitTest, RoomEnoughIsLeftAlone) {
  auto soft = SoftLimitFor(10, 100, {.rlim_cur = 1024, .rlim_max = 4096});
  ASSERT_TRUE(soft.ok());
  EXPECT_FALSE(soft->has_value());
  soft = SoftLimitFor(10, 1'000'000, {.rlim_cur = RLIM_INFINITY, .rlim_max = RLIM_INFINITY});
  ASSERT_TRUE(soft.ok());
  EXPECT_FALSE(soft->has_value());
}

// Short of the spare too: raised to what is needed and the spare, at most the hard limit.
TEST_F(FdLimitTest, AShortSoftLimitIsRaisedUpToTheHardOne) {
  auto soft = SoftLimitFor(10, 1023, {.rlim_cur = 1024, .rlim_max = 524288});
  ASSERT_TRUE(soft.ok());
  EXPECT_EQ(soft->value(), 10 + 1023 + kSpareDescriptors);
  soft = SoftLimitFor(10, 1000, {.rlim_cur = 1024, .rlim_max = 1050});
  ASSERT_TRUE(soft.ok());
  EXPECT_EQ(soft->value(), 1050u);
  soft = SoftLimitFor(10, 5000, {.rlim_cur = 1024, .rlim_max = RLIM_INFINITY});
  ASSERT_TRUE(soft.ok());
  EXPECT_EQ(soft->value(), 10 + 5000 + kSpareDescriptors);
}

TEST_F(FdLimitTest, AShortHardLimitIsAnError) {
  auto soft = SoftLimitFor(10, 4096, {.rlim_cur = 1024, .rlim_max = 4096});
  EXPECT_EQ(soft.status().code(), HCCL_E_UNAVAIL);
  EXPECT_THAT(soft.status().message(), HasSubstr("4106 descriptors are needed"));
  EXPECT_THAT(soft.status().message(), HasSubstr("hard limit is 4096"));
}

// In a child whose soft limit is low: raised, and then the descriptors open; a hard limit that
// is too low fails naming the caller's purpose and changes nothing.
TEST_F(FdLimitTest, ReserveRaisesTheProcesssSoftLimit) {
  test::ForkedChild child([](test::ForkedChild::Pipes) {
    const rlimit low{.rlim_cur = 100, .rlim_max = 2000};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) {
      return 10;
    }
    if (!ReserveDescriptors(500, "test").ok()) {
      return 11;
    }
    rlimit now{};
    getrlimit(RLIMIT_NOFILE, &now);
    if (now.rlim_cur < 500 || now.rlim_cur > 2000 || now.rlim_max != 2000) {
      return 12;
    }
    const Status st = ReserveDescriptors(5000, "the connections of a test");
    if (st.code() != HCCL_E_UNAVAIL ||
        st.message().find("the connections of a test") == std::string::npos) {
      return 13;
    }
    rlimit after{};
    getrlimit(RLIMIT_NOFILE, &after);
    return after.rlim_cur == now.rlim_cur ? 0 : 14;
  });
  EXPECT_EQ(child.Wait(), 0);
}

}  // namespace
}  // namespace hzc
