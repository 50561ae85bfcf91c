// SPDX-License-Identifier: Apache-2.0
// libhzc talking to the real module: INFO through the library matches the kernel.
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <linux/hzc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "hzc_test.h"

namespace {

// The module's sysfs abi_version, wherever the module puts its directory.
std::string SysfsAbiVersion() {
  for (const char *path : {"/sys/class/misc/hzc/abi_version", "/sys/kernel/hzc/abi_version",
                           "/sys/module/hzc/abi_version"}) {
    std::ifstream in(path);
    std::string value;
    if (in >> value) {
      return value;
    }
  }
  return "";
}

class DeviceVmTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    if (access(hzc_device_path(), F_OK) != 0) {
      GTEST_SKIP() << hzc_device_path() << " is absent: hzc.ko is not loaded";
    }
  }
};

TEST_F(DeviceVmTest, InfoMatchesKernel) {
  hzc_device_info info{};
  ASSERT_EQ(hzc_get_device_info(&info), HCCL_SUCCESS);
  EXPECT_EQ(info.abi_version, static_cast<uint32_t>(HZC_ABI_VERSION));
  EXPECT_EQ(info.page_size, static_cast<uint32_t>(getpagesize()));
  EXPECT_NE(info.features & HZC_FEATURE_INFO, 0U);
  EXPECT_GT(info.max_ranks, 0U);
  const std::string sysfs = SysfsAbiVersion();
  ASSERT_FALSE(sysfs.empty()) << "no abi_version file in sysfs";
  EXPECT_EQ(sysfs, std::to_string(info.abi_version));
}

TEST_F(DeviceVmTest, RepeatedCallsUseOneDescriptor) {
  hzc_device_info a{}, b{};
  ASSERT_EQ(hzc_get_device_info(&a), HCCL_SUCCESS);
  const auto fds = hzc::test::OpenFds();
  ASSERT_EQ(hzc_get_device_info(&b), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::OpenFds(), fds);
  EXPECT_EQ(a.abi_version, b.abi_version);
  int device_fds = 0;
  for (const auto &[fd, target] : fds) {
    device_fds += target == hzc_device_path();
  }
  EXPECT_EQ(device_fds, 1);
}

// A forked child must not use the parent's context (bound to the parent's mm): the
// library reopens the device in the child.
TEST_F(DeviceVmTest, ForkedChildReopens) {
  hzc_device_info info{};
  ASSERT_EQ(hzc_get_device_info(&info), HCCL_SUCCESS);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    hzc_device_info child{};
    _exit(hzc_get_device_info(&child) == HCCL_SUCCESS && child.abi_version == info.abi_version ? 0
                                                                                               : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(DeviceVmTest, ExampleRuns) {
  const std::string cmd = std::string(HZC_INFO_PATH) + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// Run a command through the shell; its exit status and its stderr.
std::pair<int, std::string> RunShell(const std::string &cmd) {
  std::string err;
  FILE *p = popen((cmd + " 2>&1 >/dev/null").c_str(), "r");
  if (p == nullptr) {
    return {-1, ""};
  }
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) {
    err += buf;
  }
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, err};
}

// The environment is read once per process, so the bad path is tried in a new process.
TEST_F(DeviceVmTest, BadDeviceEnvIsDrvError) {
  auto [status, err] = RunShell(std::string("HZC_DEVICE=/dev/hzc-nonexistent ") + HZC_INFO_PATH);
  EXPECT_EQ(status, 1);
  EXPECT_THAT(err, testing::HasSubstr("hzc_get_device_info: cannot open /dev/hzc-nonexistent: "
                                      "No such file or directory"));
  EXPECT_THAT(err, testing::HasSubstr("driver error (16)"));
}

}  // namespace
