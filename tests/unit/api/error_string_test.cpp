// SPDX-License-Identifier: Apache-2.0
#include <hccl/hccl.h>

#include <set>
#include <string>

#include "hzc_test.h"

namespace {

class ErrorStringTest : public hzc::test::Test {};

TEST_F(ErrorStringTest, EveryCodeHasItsOwnString) {
  std::set<std::string> seen;
  const std::string unknown = HcclGetErrorString(static_cast<HcclResult>(-1));
  auto check = [&](int value) {
    const char *s = HcclGetErrorString(static_cast<HcclResult>(value));
    ASSERT_NE(s, nullptr) << value;
    EXPECT_STRNE(s, "") << value;
    EXPECT_NE(s, unknown) << value;
    EXPECT_TRUE(seen.insert(s).second) << value << " repeats \"" << s << "\"";
  };
  for (int v = HCCL_SUCCESS; v <= HCCL_E_OOM; ++v) {
    check(v);
  }
  check(HCCL_E_IN_STATUS);
}

TEST_F(ErrorStringTest, UnknownCodes) {
  for (int v : {-1, 25, 1040, 1042, 100000, 0x7fffffff}) {
    EXPECT_STREQ(HcclGetErrorString(static_cast<HcclResult>(v)), "unknown error code") << v;
  }
}

TEST_F(ErrorStringTest, SuccessAndCommonCodes) {
  EXPECT_STREQ(HcclGetErrorString(HCCL_SUCCESS), "success");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_PARA), "invalid parameter");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_DRV), "driver error");
}

}  // namespace
