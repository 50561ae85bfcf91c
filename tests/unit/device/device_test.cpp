// SPDX-License-Identifier: Apache-2.0
// The device wrapper without the module: every failure is HCCL_E_DRV naming the path.
#include "device/device.h"

#include <hccl/hccl.h>

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

}  // namespace
}  // namespace hzc
