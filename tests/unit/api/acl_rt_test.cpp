// SPDX-License-Identifier: Apache-2.0
// aclInit/aclFinalize, devices, contexts, the SoC name, the float-overflow mode and
// aclGetRecentErrMsg (api/acl_rt_api.cpp over runtime/device): argument checks, codes, log lines.
#include <acl/acl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "hzc_test.h"
#include "runtime/device.h"

namespace {

using ::testing::HasSubstr;

class AclRtTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    if (hzc::runtime::Initialized()) {
      EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
    }
    aclGetRecentErrMsg();  // leave no message to the next test
    hzc::test::Test::TearDown();
  }
};

TEST_F(AclRtTest, InitFinalizeOrder) {
  ExpectErrorLog("aclFinalize: ACL is not initialized (aclInit)");
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
  ExpectErrorLog("aclInit: ACL is already initialized (aclInit)");
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
  EXPECT_EQ(aclInit(""), ACL_SUCCESS);
  // Streams and events made before are gone after aclFinalize.
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
  ExpectErrorLog("aclrtDestroyStream: stream=");
  EXPECT_EQ(aclrtDestroyStream(s), ACL_ERROR_RT_INVALID_HANDLE);
  ExpectErrorLog("aclrtDestroyEvent: event=");
  EXPECT_EQ(aclrtDestroyEvent(e), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(AclRtTest, InitConfigFile) {
  const std::string path = "/tmp/hzc-acl-api-" + std::to_string(getpid()) + ".json";
  ExpectErrorLog("aclInit: configPath=\"/nonexistent/acl.json\": No such file or directory");
  EXPECT_EQ(aclInit("/nonexistent/acl.json"), ACL_ERROR_INVALID_FILE);
  ExpectErrorLog("aclInit: configPath=\"/tmp\": not a regular file");
  EXPECT_EQ(aclInit("/tmp"), ACL_ERROR_INVALID_FILE);
  std::ofstream(path) << "{ not json";
  ExpectErrorLog("aclInit: configPath=\"" + path + "\": not a JSON document");
  EXPECT_EQ(aclInit(path.c_str()), ACL_ERROR_PARSE_FILE);
  EXPECT_FALSE(hzc::runtime::Initialized());
  std::ofstream(path) << R"({"err_msg_mode": "1"})";
  EXPECT_EQ(aclInit(path.c_str()), ACL_SUCCESS);
  std::remove(path.c_str());
}

TEST_F(AclRtTest, Devices) {
  uint32_t count = 0;
  ASSERT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
  EXPECT_EQ(count, hzc::runtime::DeviceCount());
  EXPECT_GE(count, 1U);
  std::thread([count]() {
    int32_t d = -1;
    ASSERT_EQ(aclrtSetDevice(static_cast<int32_t>(count) - 1), ACL_SUCCESS);
    ASSERT_EQ(aclrtGetDevice(&d), ACL_SUCCESS);
    EXPECT_EQ(d, static_cast<int32_t>(count) - 1);
    EXPECT_EQ(aclrtResetDevice(static_cast<int32_t>(count) - 1), ACL_SUCCESS);
  }).join();
  std::thread([this, count]() {
    int32_t d = -1;
    ExpectErrorLog("aclrtGetDevice: the calling thread has no context");
    EXPECT_EQ(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    ExpectErrorLog("aclrtGetDevice: deviceId is null");
    EXPECT_EQ(aclrtGetDevice(nullptr), ACL_ERROR_INVALID_PARAM);
    ExpectErrorLog("aclrtGetDeviceCount: count is null");
    EXPECT_EQ(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
    const std::string devices = fmt::format("devices are 0..{}", count - 1);
    ExpectErrorLog("aclrtSetDevice: deviceId=-1: " + devices);
    EXPECT_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    ExpectErrorLog(fmt::format("aclrtSetDevice: deviceId={}: {}", count, devices));
    EXPECT_EQ(aclrtSetDevice(static_cast<int32_t>(count)), ACL_ERROR_RT_INVALID_DEVICEID);
    ExpectErrorLog(fmt::format("aclrtResetDevice: deviceId={}: {}", count, devices));
    EXPECT_EQ(aclrtResetDevice(static_cast<int32_t>(count)), ACL_ERROR_RT_INVALID_DEVICEID);
  }).join();
}

TEST_F(AclRtTest, Contexts) {
  std::thread([this]() {
    aclrtContext c = nullptr;
    ASSERT_EQ(aclrtCreateContext(&c, 0), ACL_SUCCESS);
    aclrtContext current = nullptr;
    ASSERT_EQ(aclrtGetCurrentContext(&current), ACL_SUCCESS);
    EXPECT_EQ(current, c);
    ASSERT_EQ(aclrtSetDevice(1), ACL_SUCCESS);
    ASSERT_EQ(aclrtGetCurrentContext(&current), ACL_SUCCESS);
    EXPECT_NE(current, c);
    ExpectErrorLog("aclrtDestroyContext: context=");
    EXPECT_EQ(aclrtDestroyContext(current), ACL_ERROR_RT_PARAM_INVALID) << "a default context";
    ASSERT_EQ(aclrtSetCurrentContext(c), ACL_SUCCESS);
    int32_t d = -1;
    ASSERT_EQ(aclrtGetDevice(&d), ACL_SUCCESS);
    EXPECT_EQ(d, 0);
    EXPECT_EQ(aclrtDestroyContext(c), ACL_SUCCESS);
    ExpectErrorLog("aclrtGetCurrentContext: the calling thread has no context");
    EXPECT_EQ(aclrtGetCurrentContext(&current), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_EQ(aclrtDestroyContext(c), ACL_ERROR_RT_INVALID_HANDLE) << "destroyed twice";
    ExpectErrorLog("aclrtSetCurrentContext: context=");
    EXPECT_EQ(aclrtSetCurrentContext(c), ACL_ERROR_RT_INVALID_HANDLE);
    EXPECT_EQ(aclrtResetDevice(1), ACL_SUCCESS);
    ExpectErrorLog("aclrtCreateContext: context is null");
    EXPECT_EQ(aclrtCreateContext(nullptr, 0), ACL_ERROR_INVALID_PARAM);
    ExpectErrorLog("aclrtCreateContext: deviceId=-3");
    EXPECT_EQ(aclrtCreateContext(&c, -3), ACL_ERROR_RT_INVALID_DEVICEID);
    ExpectErrorLog("aclrtDestroyContext: context is null");
    EXPECT_EQ(aclrtDestroyContext(nullptr), ACL_ERROR_INVALID_PARAM);
    ExpectErrorLog("aclrtSetCurrentContext: context is null");
    EXPECT_EQ(aclrtSetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
    ExpectErrorLog("aclrtGetCurrentContext: context is null");
    EXPECT_EQ(aclrtGetCurrentContext(nullptr), ACL_ERROR_INVALID_PARAM);
  }).join();
}

TEST_F(AclRtTest, SocNameAndSatMode) {
  ASSERT_NE(aclrtGetSocName(), nullptr);
  EXPECT_STREQ(aclrtGetSocName(), "Ascend910B1");
  aclrtFloatOverflowMode mode = ACL_RT_OVERFLOW_MODE_UNDEF;
  ASSERT_EQ(aclrtGetDeviceSatMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_RT_OVERFLOW_MODE_SATURATION);
  ASSERT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetDeviceSatMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_RT_OVERFLOW_MODE_INFNAN);
  ExpectErrorLog("aclrtSetDeviceSatMode: mode=2: not SATURATION (0) nor INFNAN (1)");
  EXPECT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclrtGetDeviceSatMode: mode is null");
  EXPECT_EQ(aclrtGetDeviceSatMode(nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), ACL_SUCCESS);
}

TEST_F(AclRtTest, RecentErrorMessageIsPerThreadAndReadOnce) {
  aclGetRecentErrMsg();
  EXPECT_EQ(aclGetRecentErrMsg(), nullptr) << "no failed call";
  ExpectErrorLog("aclrtGetDeviceCount: count is null");
  EXPECT_EQ(aclrtGetDeviceCount(nullptr), ACL_ERROR_INVALID_PARAM);
  uint32_t count = 0;
  EXPECT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS) << "a success keeps the message";
  std::thread([]() { EXPECT_EQ(aclGetRecentErrMsg(), nullptr) << "another thread's"; }).join();
  const char *msg = aclGetRecentErrMsg();
  ASSERT_NE(msg, nullptr);
  EXPECT_STREQ(msg, "aclrtGetDeviceCount: count is null");
  EXPECT_EQ(aclGetRecentErrMsg(), nullptr) << "read once";
  // HCCL calls leave their message too; the latest failure wins.
  ExpectErrorLog("aclrtSetDevice: deviceId=-1");
  EXPECT_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
  ExpectErrorLog("HcclGetRankSize: ");
  EXPECT_NE(HcclGetRankSize(nullptr, &count), HCCL_SUCCESS);
  msg = aclGetRecentErrMsg();
  ASSERT_NE(msg, nullptr);
  EXPECT_THAT(std::string(msg), HasSubstr("HcclGetRankSize: "));
}

}  // namespace
