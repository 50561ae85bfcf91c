// SPDX-License-Identifier: Apache-2.0
// hzc's own entry points (hzc/hzc.h) without the module: argument checks, the device path and
// the feature names; a missing or foreign device is HCCL_E_DRV with one log line.
#include <hccl/hccl.h>
#include <hzc/hzc.h>

#include <cstdlib>
#include <string>

#include "hzc_test.h"

namespace hzc {
namespace {

class HzcApiTest : public test::Test {};

TEST_F(HzcApiTest, NullInfoIsPtrError) {
  ExpectErrorLog("hzc_get_device_info: ");
  EXPECT_EQ(hzc_get_device_info(nullptr), HCCL_E_PTR);
}

TEST_F(HzcApiTest, FeatureNames) {
  EXPECT_STREQ(hzc_feature_name(1), "info");
  EXPECT_STREQ(hzc_feature_name(HZC_DEVICE_FEATURE_ACTIVATION_COOKIE), "activation_cookie");
  EXPECT_EQ(hzc_feature_name(1ULL << 63), nullptr);
  EXPECT_EQ(hzc_feature_name(0), nullptr);
}

class HzcApiDeathTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

[[noreturn]] void GetInfoAndExit(const char *device) {
  setenv("HZC_DEVICE", device, 1);
  unsetenv("HZC_LOG");
  hzc_device_info info{};
  std::exit(hzc_get_device_info(&info));
}

// HZC_DEVICE=/nonexistent: HCCL_E_DRV and exactly one log line naming API, path and cause.
TEST_F(HzcApiDeathTest, EnvDeviceMissingGivesDrvAndOneLine) {
  EXPECT_EXIT(GetInfoAndExit("/nonexistent"), testing::ExitedWithCode(HCCL_E_DRV),
              std::string("^") + test::kLogPrefixRe +
                  "ERROR hzc_get_device_info: cannot open /nonexistent: No such "
                  "file or directory \\(is hzc.ko loaded\\?\\)\n$");
}

TEST_F(HzcApiDeathTest, EnvDeviceNotHzc) {
  EXPECT_EXIT(GetInfoAndExit("/dev/null"), testing::ExitedWithCode(HCCL_E_DRV),
              "hzc_get_device_info: /dev/null: info ioctl not understood");
}

TEST_F(HzcApiDeathTest, DevicePathFollowsEnv) {
  EXPECT_EXIT(
      {
        setenv("HZC_DEVICE", "/tmp/elsewhere", 1);
        std::exit(std::string(hzc_device_path()) == "/tmp/elsewhere" ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hzc
