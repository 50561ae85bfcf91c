// SPDX-License-Identifier: Apache-2.0
// The device wrapper without the module: every failure is HCCL_E_DRV naming the path.
#include "device/device.h"

#include <hccl/hccl.h>
#include <hzc/hzc.h>

#include <cstdlib>
#include <string>

#include "hzc_test.h"

namespace hzc {
namespace {

using ::testing::HasSubstr;

class DeviceTest : public test::Test {};

TEST_F(DeviceTest, MissingPathIsDrvError) {
  auto dev = Device::Open("/nonexistent/hzc");
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), HCCL_E_DRV);
  EXPECT_THAT(dev.status().message(), HasSubstr("/nonexistent/hzc"));
  EXPECT_THAT(dev.status().message(), HasSubstr("No such file or directory"));
}

TEST_F(DeviceTest, NotAnHzcDeviceIsDrvError) {
  auto dev = Device::Open("/dev/null");
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), HCCL_E_DRV);
  EXPECT_THAT(dev.status().message(), HasSubstr("/dev/null"));
  EXPECT_THAT(dev.status().message(), HasSubstr("not an hzc device"));
}

TEST_F(DeviceTest, DirectoryIsDrvError) {
  auto dev = Device::Open("/");
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), HCCL_E_DRV);
  EXPECT_THAT(dev.status().message(), HasSubstr("Is a directory"));
}

TEST_F(DeviceTest, NullInfoIsPtrError) {
  ExpectErrorLog("hzc_get_device_info: ");
  EXPECT_EQ(hzc_get_device_info(nullptr), HCCL_E_PTR);
}

TEST_F(DeviceTest, FeatureNames) {
  EXPECT_STREQ(hzc_feature_name(1), "info");
  EXPECT_STREQ(hzc_feature_name(HZC_FEATURE_ACTIVATION_COOKIE), "activation_cookie");
  EXPECT_EQ(hzc_feature_name(1ULL << 63), nullptr);
  EXPECT_EQ(hzc_feature_name(0), nullptr);
}

class DeviceDeathTest : public test::Test {
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
TEST_F(DeviceDeathTest, EnvDeviceMissingGivesDrvAndOneLine) {
  EXPECT_EXIT(GetInfoAndExit("/nonexistent"), testing::ExitedWithCode(HCCL_E_DRV),
              std::string("^") + test::kLogPrefixRe +
                  "ERROR hzc_get_device_info: cannot open /nonexistent: No such "
                  "file or directory \\(is hzc.ko loaded\\?\\)\n$");
}

TEST_F(DeviceDeathTest, EnvDeviceNotHzc) {
  EXPECT_EXIT(GetInfoAndExit("/dev/null"), testing::ExitedWithCode(HCCL_E_DRV),
              "hzc_get_device_info: /dev/null: info ioctl not understood");
}

TEST_F(DeviceDeathTest, DevicePathFollowsEnv) {
  EXPECT_EXIT(
      {
        setenv("HZC_DEVICE", "/tmp/elsewhere", 1);
        std::exit(std::string(hzc_device_path()) == "/tmp/elsewhere" ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hzc
