// SPDX-License-Identifier: Apache-2.0
// The device wrapper without the module: every failure to open is HCCL_E_DRV naming the path;
// how the module's errnos map to HcclResult.
#include "device/device.h"

#include <linux/hzc.h>

#include <hccl/hccl.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

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

// Caller mistakes are E_PARA for every command; the board's own keys and strides are the
// library's, so a second publish and an oversized blob are E_INTERNAL there.
TEST_F(DeviceTest, ResultOfErrno) {
  struct Case {
    unsigned long request;
    int err;
    HcclResult want;
  };
  const Case cases[] = {
      {HZC_IOC_BOARD_PUT, EEXIST, HCCL_E_INTERNAL},
      {HZC_IOC_BOARD_PUT, ECONNRESET, HCCL_E_REMOTE},
      {HZC_IOC_BOARD_PUT, ENOENT, HCCL_E_PARA},
      {HZC_IOC_BOARD_PUT, EINVAL, HCCL_E_PARA},
      {HZC_IOC_BOARD_PUT, ENOSPC, HCCL_E_UNAVAIL},
      {HZC_IOC_BOARD_WAIT, ETIMEDOUT, HCCL_E_TIMEOUT},
      {HZC_IOC_BOARD_WAIT, ECONNRESET, HCCL_E_REMOTE},
      {HZC_IOC_BOARD_WAIT, EMSGSIZE, HCCL_E_INTERNAL},
      {HZC_IOC_BOARD_WAIT, EEXIST, HCCL_E_PARA},
      {HZC_IOC_BOARD_WAIT, EIO, HCCL_E_DRV},
      {HZC_IOC_RANGE_REGISTER, EEXIST, HCCL_E_PARA},
      {HZC_IOC_ACTIVATE, ENOMEM, HCCL_E_MEMORY},
      {HZC_IOC_DOMAIN_JOIN, EPERM, HCCL_E_NOT_SUPPORT},
      {HZC_IOC_DOMAIN_JOIN, EBUSY, HCCL_E_PARA},
      {HZC_IOC_LIST_ACTIVATIONS, ENOENT, HCCL_E_NOT_FOUND},
      {HZC_IOC_LIST_RANGES, ENOENT, HCCL_E_PARA},
      {HZC_IOC_LIST_RANGES, EMSGSIZE, HCCL_E_DRV},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(ResultOfErrno(c.request, c.err), c.want)
        << "request " << std::hex << c.request << std::dec << ", errno " << c.err;
  }
}

TEST_F(DeviceTest, RanksOfBits) {
  const std::vector<uint64_t> bits{(1ULL << 0) | (1ULL << 63), 1ULL << 2};
  EXPECT_EQ(RanksOfBits(bits, 70), (std::vector<uint32_t>{0, 63, 66}));
  EXPECT_EQ(RanksOfBits(bits, 64), (std::vector<uint32_t>{0, 63}));
  EXPECT_EQ(RanksOfBits(bits, 200), (std::vector<uint32_t>{0, 63, 66}));  // no word 2
  EXPECT_TRUE(RanksOfBits({}, 5).empty());
}

}  // namespace
}  // namespace hzc
