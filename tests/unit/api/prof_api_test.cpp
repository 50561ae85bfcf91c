// SPDX-License-Identifier: Apache-2.0
// The ACL profiling entry points (api/prof_api.cpp over runtime/profiling): each call's argument
// checks, its codes and log line, and the order of the calls.
#include <acl/acl_prof.h>
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "hzc_test.h"
#include "runtime/device.h"
#include "runtime/profiling.h"

namespace {

constexpr uint64_t kTypes = ACL_PROF_ACL_API | ACL_PROF_HCCL_TRACE | ACL_PROF_TASK_TIME;
const char kPath[] = "/tmp/hzc-prof";

class AclProfTest : public hzc::test::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(aclprofFinalize(), ACL_SUCCESS);
    EXPECT_EQ(hzc::runtime::ProfLiveConfigs(), 0U) << "test left configurations";
    hzc::test::Test::TearDown();
  }

  static aclprofConfig *Config() {
    uint32_t devices[] = {0, 1};
    return aclprofCreateConfig(devices, 2, ACL_AICORE_NONE, nullptr, kTypes);
  }
};

TEST_F(AclProfTest, InitStartStopFinalize) {
  ASSERT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
  aclprofConfig *config = Config();
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(hzc::runtime::ProfLiveConfigs(), 1U);
  EXPECT_EQ(aclprofStart(config), ACL_SUCCESS);
  EXPECT_EQ(aclprofStop(config), ACL_SUCCESS);
  // Started again after a stop, then finalized while started.
  EXPECT_EQ(aclprofStart(config), ACL_SUCCESS);
  EXPECT_EQ(aclprofFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclprofDestroyConfig(config), ACL_SUCCESS);
  EXPECT_EQ(hzc::runtime::ProfLiveConfigs(), 0U);
  // A new session after the finalize.
  EXPECT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
}

TEST_F(AclProfTest, InitChecksThePath) {
  ExpectErrorLog("aclprofInit: profilerResultPath is null");
  EXPECT_EQ(aclprofInit(nullptr, 4), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclprofInit: length=0: must be 1..4096");
  EXPECT_EQ(aclprofInit("", 0), ACL_ERROR_INVALID_PARAM);
  const std::string long_path(hzc::runtime::kProfMaxPathLength + 1, 'p');
  ExpectErrorLog("aclprofInit: length=4097: must be 1..4096");
  EXPECT_EQ(aclprofInit(long_path.c_str(), long_path.size()), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclprofInit: length=3: profilerResultPath has 13 characters");
  EXPECT_EQ(aclprofInit(kPath, 3), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclprofInit: length=20: profilerResultPath has 13 characters");
  EXPECT_EQ(aclprofInit(kPath, 20), ACL_ERROR_INVALID_PARAM);
  // The longest path is accepted; none of the refused calls initialized anything.
  const std::string max_path(hzc::runtime::kProfMaxPathLength, 'p');
  EXPECT_EQ(aclprofInit(max_path.c_str(), max_path.size()), ACL_SUCCESS);
}

TEST_F(AclProfTest, InitTwiceIsRefused) {
  ASSERT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
  ExpectErrorLog("aclprofInit: profiling is already initialized");
  EXPECT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_ERROR_REPEAT_INITIALIZE);
}

TEST_F(AclProfTest, FinalizeWithoutInitSucceeds) {
  EXPECT_EQ(aclprofFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclprofFinalize(), ACL_SUCCESS);
}

TEST_F(AclProfTest, CreateConfigAcceptsWhatCannDocuments) {
  const uint32_t n = hzc::runtime::DeviceCount();
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i) {
    all[i] = n - 1 - i;
  }
  for (auto metrics :
       {ACL_AICORE_ARITHMETIC_UTILIZATION, ACL_AICORE_MEMORY_ACCESS, ACL_AICORE_NONE}) {
    aclprofConfig *c = aclprofCreateConfig(all.data(), n, metrics, nullptr,
                                           ACL_PROF_ACL_API | ACL_PROF_AICORE_METRICS);
    ASSERT_NE(c, nullptr) << metrics;
    EXPECT_EQ(aclprofDestroyConfig(c), ACL_SUCCESS);
  }
  // No device list when there are no devices.
  aclprofConfig *c = aclprofCreateConfig(nullptr, 0, ACL_AICORE_NONE, nullptr, kTypes);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(aclprofDestroyConfig(c), ACL_SUCCESS);
  // Every documented data type at once.
  const uint64_t every = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS |
                         ACL_PROF_AICPU | ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE |
                         ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX | ACL_PROF_RUNTIME_API |
                         ACL_PROF_GE_API_L0 | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY |
                         ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3 |
                         ACL_PROF_GE_API_L1 | ACL_PROF_API_STATS;
  c = aclprofCreateConfig(all.data(), 1, ACL_AICORE_PIPE_UTILIZATION, nullptr, every);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(aclprofDestroyConfig(c), ACL_SUCCESS);
}

TEST_F(AclProfTest, CreateConfigChecksItsArguments) {
  const uint32_t n = hzc::runtime::DeviceCount();
  uint32_t devices[] = {0, 3, n};
  ExpectErrorLog("aclprofCreateConfig: deviceIdList is null");
  EXPECT_EQ(aclprofCreateConfig(nullptr, 1, ACL_AICORE_NONE, nullptr, kTypes), nullptr);
  ExpectErrorLog(
      fmt::format("aclprofCreateConfig: deviceNums={}: at most {} (the device count)", n + 1, n));
  std::vector<uint32_t> many(n + 1);
  EXPECT_EQ(aclprofCreateConfig(many.data(), n + 1, ACL_AICORE_NONE, nullptr, kTypes), nullptr);
  ExpectErrorLog(
      fmt::format("aclprofCreateConfig: deviceIdList[2]={}: device ids are below {}", n, n));
  EXPECT_EQ(aclprofCreateConfig(devices, 3, ACL_AICORE_NONE, nullptr, kTypes), nullptr);
  uint32_t twice[] = {5, 2, 5};
  ExpectErrorLog("aclprofCreateConfig: deviceIdList[2]=5: listed twice");
  EXPECT_EQ(aclprofCreateConfig(twice, 3, ACL_AICORE_NONE, nullptr, kTypes), nullptr);
  ExpectErrorLog("aclprofCreateConfig: aicoreMetrics=9: not an aclprofAicoreMetrics");
  EXPECT_EQ(aclprofCreateConfig(devices, 2, static_cast<aclprofAicoreMetrics>(9), nullptr, kTypes),
            nullptr);
  ExpectErrorLog("aclprofCreateConfig: aicoreEvents=");
  const auto *events = reinterpret_cast<const aclprofAicoreEvents *>(devices);
  EXPECT_EQ(aclprofCreateConfig(devices, 2, ACL_AICORE_NONE, events, kTypes), nullptr);
  ExpectErrorLog("aclprofCreateConfig: dataTypeConfig=0x0: not a non-empty set of ACL_PROF_*");
  EXPECT_EQ(aclprofCreateConfig(devices, 2, ACL_AICORE_NONE, nullptr, 0), nullptr);
  ExpectErrorLog("aclprofCreateConfig: dataTypeConfig=0x401: not a non-empty set of ACL_PROF_*");
  EXPECT_EQ(aclprofCreateConfig(devices, 2, ACL_AICORE_NONE, nullptr, ACL_PROF_ACL_API | 0x400),
            nullptr);
  EXPECT_EQ(hzc::runtime::ProfLiveConfigs(), 0U);
}

TEST_F(AclProfTest, DestroyConfigChecksItIsLive) {
  ExpectErrorLog("aclprofDestroyConfig: profilerConfig is null");
  EXPECT_EQ(aclprofDestroyConfig(nullptr), ACL_ERROR_INVALID_PARAM);
  aclprofConfig *config = Config();
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(aclprofDestroyConfig(config), ACL_SUCCESS);
  ExpectErrorLog("aclprofDestroyConfig: profilerConfig=0x");
  EXPECT_EQ(aclprofDestroyConfig(config), ACL_ERROR_INVALID_PARAM);
}

TEST_F(AclProfTest, StartAndStopCheckTheConfig) {
  ASSERT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
  ExpectErrorLog("aclprofStart: profilerConfig is null");
  EXPECT_EQ(aclprofStart(nullptr), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclprofStop: profilerConfig is null");
  EXPECT_EQ(aclprofStop(nullptr), ACL_ERROR_INVALID_PARAM);
  aclprofConfig *config = Config();
  ASSERT_NE(config, nullptr);
  ASSERT_EQ(aclprofDestroyConfig(config), ACL_SUCCESS);
  ExpectErrorLog("aclprofStart: profilerConfig=0x");
  EXPECT_EQ(aclprofStart(config), ACL_ERROR_INVALID_PARAM);
  ExpectErrorLog("aclprofStop: profilerConfig=0x");
  EXPECT_EQ(aclprofStop(config), ACL_ERROR_INVALID_PARAM);
}

TEST_F(AclProfTest, StartAndStopNeedInit) {
  aclprofConfig *config = Config();
  ASSERT_NE(config, nullptr);
  ExpectErrorLog("aclprofStart: aclprofInit was not called");
  EXPECT_EQ(aclprofStart(config), ACL_ERROR_PROF_NOT_RUN);
  ExpectErrorLog("aclprofStop: aclprofInit was not called");
  EXPECT_EQ(aclprofStop(config), ACL_ERROR_PROF_NOT_RUN);
  // Finalize ends the session: a start after it needs a new aclprofInit.
  ASSERT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
  ASSERT_EQ(aclprofFinalize(), ACL_SUCCESS);
  EXPECT_EQ(aclprofStart(config), ACL_ERROR_PROF_NOT_RUN);
  EXPECT_EQ(aclprofDestroyConfig(config), ACL_SUCCESS);
}

TEST_F(AclProfTest, StartTwiceAndStopWithoutStart) {
  ASSERT_EQ(aclprofInit(kPath, strlen(kPath)), ACL_SUCCESS);
  aclprofConfig *config = Config();
  ASSERT_NE(config, nullptr);
  ExpectErrorLog("aclprofStop: profiling was not started (aclprofStart)");
  EXPECT_EQ(aclprofStop(config), ACL_ERROR_PROF_NOT_RUN);
  ASSERT_EQ(aclprofStart(config), ACL_SUCCESS);
  ExpectErrorLog("aclprofStart: profiling is already started");
  EXPECT_EQ(aclprofStart(config), ACL_ERROR_PROF_ALREADY_RUN);
  EXPECT_EQ(aclprofStop(config), ACL_SUCCESS);
  EXPECT_EQ(aclprofStop(config), ACL_ERROR_PROF_NOT_RUN);
  EXPECT_EQ(aclprofDestroyConfig(config), ACL_SUCCESS);
}

}  // namespace
