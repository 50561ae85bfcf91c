// SPDX-License-Identifier: Apache-2.0
// runtime/device: the device count, default contexts counted per aclrtSetDevice, contexts per
// thread, aclInit/aclFinalize and the float-overflow mode.
#include "runtime/device.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "hzc_test.h"
#include "runtime/event.h"
#include "runtime/stream.h"

namespace hzc::runtime {
namespace {

class DeviceTest : public test::Test {
 protected:
  void TearDown() override {
    if (Initialized()) {
      EXPECT_TRUE(Finalize().ok());
    }
    test::Test::TearDown();
  }
};

// The calling thread's device, or the error code.
int CurrentDevice() {
  int32_t d = -1;
  AclStatus st = GetDevice(&d);
  return st.ok() ? d : -st.code();
}

TEST_F(DeviceTest, CountIsAtLeastOnePerCoreAndEight) {
  if (std::getenv("HZC_DEVICE_COUNT") != nullptr) {
    GTEST_SKIP() << "HZC_DEVICE_COUNT is set";
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(DeviceCount(), 8U);
  EXPECT_GE(static_cast<long>(DeviceCount()), cpus);
  EXPECT_TRUE(DeviceCount() == 8U || static_cast<long>(DeviceCount()) == cpus);
}

// HZC_DEVICE_COUNT sets the count: this test runs itself again with it set.
TEST_F(DeviceTest, CountFromTheEnvironment) {
  if (const char *env = std::getenv("HZC_DEVICE_COUNT"); env != nullptr) {
    EXPECT_EQ(DeviceCount(), static_cast<uint32_t>(std::atoi(env)));
    EXPECT_EQ(SetDevice(static_cast<int32_t>(DeviceCount())).code(), ACL_ERROR_RT_INVALID_DEVICEID);
    return;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string command = "HZC_DEVICE_COUNT=3 " + self +
                              " --gtest_filter=DeviceTest.CountFromTheEnvironment >/dev/null 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST_F(DeviceTest, SetDeviceIsCountedPerCall) {
  const size_t before = ContextCount();
  EXPECT_EQ(CurrentDevice(), -ACL_ERROR_RT_CONTEXT_NULL);
  ASSERT_TRUE(SetDevice(1).ok());
  ASSERT_TRUE(SetDevice(1).ok());
  EXPECT_EQ(CurrentDevice(), 1);
  EXPECT_EQ(ContextCount(), before + 1) << "one default context per device";
  aclrtContext first = nullptr;
  ASSERT_TRUE(GetCurrentContext(&first).ok());
  ASSERT_TRUE(ResetDevice(1).ok());
  EXPECT_EQ(CurrentDevice(), 1) << "one aclrtSetDevice is left";
  ASSERT_TRUE(ResetDevice(1).ok());
  EXPECT_EQ(ContextCount(), before);
  EXPECT_EQ(CurrentDevice(), -ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_TRUE(ResetDevice(1).ok()) << "a device not set is no error";
  // The default context of a device set again is a new one.
  ASSERT_TRUE(SetDevice(1).ok());
  aclrtContext second = nullptr;
  ASSERT_TRUE(GetCurrentContext(&second).ok());
  EXPECT_NE(first, second);
  EXPECT_EQ(DestroyContext(second).code(), ACL_ERROR_RT_PARAM_INVALID) << "a default context";
  ASSERT_TRUE(ResetDevice(1).ok());
}

TEST_F(DeviceTest, BadDeviceIds) {
  const auto n = static_cast<int32_t>(DeviceCount());
  for (int32_t id : {-1, n, n + 1}) {
    EXPECT_EQ(SetDevice(id).code(), ACL_ERROR_RT_INVALID_DEVICEID) << id;
    EXPECT_EQ(ResetDevice(id).code(), ACL_ERROR_RT_INVALID_DEVICEID) << id;
    aclrtContext c = nullptr;
    EXPECT_EQ(CreateContext(id, &c).code(), ACL_ERROR_RT_INVALID_DEVICEID) << id;
  }
  EXPECT_TRUE(SetDevice(n - 1).ok());
  EXPECT_TRUE(ResetDevice(n - 1).ok());
}

TEST_F(DeviceTest, ContextsArePerThread) {
  const size_t before = ContextCount();
  aclrtContext c = nullptr;
  ASSERT_TRUE(CreateContext(2, &c).ok());
  EXPECT_EQ(CurrentDevice(), 2) << "a new context is the thread's current one";
  int other = 0;
  std::thread([&]() { other = CurrentDevice(); }).join();
  EXPECT_EQ(other, -ACL_ERROR_RT_CONTEXT_NULL);
  std::thread([&]() {
    EXPECT_TRUE(SetCurrentContext(c).ok());
    other = CurrentDevice();
  }).join();
  EXPECT_EQ(other, 2);
  ASSERT_TRUE(DestroyContext(c).ok());
  EXPECT_EQ(ContextCount(), before);
  EXPECT_EQ(CurrentDevice(), -ACL_ERROR_RT_CONTEXT_NULL);
  aclrtContext out = nullptr;
  EXPECT_EQ(GetCurrentContext(&out).code(), ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_EQ(DestroyContext(c).code(), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(SetCurrentContext(c).code(), ACL_ERROR_RT_INVALID_HANDLE);
}

TEST_F(DeviceTest, SatMode) {
  EXPECT_EQ(GetSatMode(), ACL_RT_OVERFLOW_MODE_SATURATION);
  ASSERT_TRUE(SetSatMode(ACL_RT_OVERFLOW_MODE_INFNAN).ok());
  EXPECT_EQ(GetSatMode(), ACL_RT_OVERFLOW_MODE_INFNAN);
  EXPECT_EQ(SetSatMode(ACL_RT_OVERFLOW_MODE_UNDEF).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(SetSatMode(static_cast<aclrtFloatOverflowMode>(-1)).code(), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(GetSatMode(), ACL_RT_OVERFLOW_MODE_INFNAN);
  ASSERT_TRUE(SetSatMode(ACL_RT_OVERFLOW_MODE_SATURATION).ok());
}

// A file of @text, removed with the object.
struct TempFile {
  explicit TempFile(const std::string &text) { std::ofstream(path) << text; }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path = "/tmp/hzc-acl-init-" + std::to_string(getpid()) + ".json";
};

TEST_F(DeviceTest, InitAndFinalizeOrder) {
  EXPECT_FALSE(Initialized());
  EXPECT_EQ(Finalize().code(), ACL_ERROR_REPEAT_FINALIZE);
  ASSERT_TRUE(Init(nullptr).ok());
  EXPECT_TRUE(Initialized());
  EXPECT_EQ(Init(nullptr).code(), ACL_ERROR_REPEAT_INITIALIZE);
  EXPECT_EQ(Init("").code(), ACL_ERROR_REPEAT_INITIALIZE);
  ASSERT_TRUE(Finalize().ok());
  EXPECT_EQ(Finalize().code(), ACL_ERROR_REPEAT_FINALIZE);
  ASSERT_TRUE(Init("").ok());
  ASSERT_TRUE(Finalize().ok());
}

TEST_F(DeviceTest, InitChecksTheConfigFile) {
  EXPECT_EQ(Init("/nonexistent/acl.json").code(), ACL_ERROR_INVALID_FILE);
  EXPECT_EQ(Init("/tmp").code(), ACL_ERROR_INVALID_FILE) << "a directory";
  {
    TempFile bad("{\"dump\": ");
    EXPECT_EQ(Init(bad.path.c_str()).code(), ACL_ERROR_PARSE_FILE);
  }
  EXPECT_FALSE(Initialized());
  TempFile good("{\"dump\": {\"dump_mode\": \"output\"}}");
  ASSERT_TRUE(Init(good.path.c_str()).ok());
  ASSERT_TRUE(Finalize().ok());
  TempFile empty_object("{}");
  ASSERT_TRUE(Init(empty_object.path.c_str()).ok());
}

TEST_F(DeviceTest, FinalizeReleasesEverything) {
  ASSERT_TRUE(Init(nullptr).ok());
  aclrtStream s = CreateStream();
  int done = 0;
  ASSERT_TRUE(Submit(s, "late", [&]() {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                done = 1;
                return Status::Ok();
              }).ok());
  aclrtEvent e = nullptr;
  ASSERT_TRUE(CreateEvent(0, &e).ok());
  aclrtContext c = nullptr;
  ASSERT_TRUE(CreateContext(0, &c).ok());
  ASSERT_TRUE(SetDevice(3).ok());
  ASSERT_TRUE(Finalize().ok());
  EXPECT_EQ(done, 1) << "queued work ran before the stream went";
  EXPECT_FALSE(IsStream(s));
  EXPECT_FALSE(IsEvent(e));
  EXPECT_EQ(ContextCount(), 0U);
  EXPECT_EQ(CurrentDevice(), -ACL_ERROR_RT_CONTEXT_NULL);
}

}  // namespace
}  // namespace hzc::runtime
