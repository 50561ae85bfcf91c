// SPDX-License-Identifier: Apache-2.0
#include "core/config.h"

#include <map>
#include <string>

#include "hzc_test.h"

namespace hzc {
namespace {

class ConfigTest : public test::Test {
 protected:
  Config Parse(const std::map<std::string, std::string> &env) {
    return Config::FromLookup([&](const char *name) -> const char * {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  }
};

TEST_F(ConfigTest, LogLevels) {
  EXPECT_EQ(ParseLogLevel("ERROR"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("Warning"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("INFO"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel(""), std::nullopt);
  EXPECT_EQ(ParseLogLevel("TRACE"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("INFO "), std::nullopt);
  EXPECT_EQ(ParseLogLevel("3"), std::nullopt);
}

TEST_F(ConfigTest, Unsigned) {
  EXPECT_EQ(ParseUnsigned("120", 1, 7200), 120U);
  EXPECT_EQ(ParseUnsigned("1", 1, 7200), 1U);
  EXPECT_EQ(ParseUnsigned("7200", 1, 7200), 7200U);
  EXPECT_EQ(ParseUnsigned("0", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("7201", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("-5", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("+5", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("5s", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned(" 5", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("", 1, 7200), std::nullopt);
  EXPECT_EQ(ParseUnsigned("99999999999999999999999", 0, UINT64_MAX), std::nullopt);
}

TEST_F(ConfigTest, Defaults) {
  const Config c = Parse({});
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.device_path, "/dev/hzc");
  EXPECT_EQ(c.connect_timeout.count(), 120);
  EXPECT_EQ(c.buff_size_mb, 200U);
  EXPECT_TRUE(c.rdma_device.empty());
  EXPECT_EQ(c.rdma_gid_index, std::nullopt);
  EXPECT_TRUE(c.host_id.empty());
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(ConfigTest, AllSet) {
  const Config c = Parse({{"HZC_LOG", "debug"},
                          {"HZC_DEVICE", "/tmp/x"},
                          {"HCCL_CONNECT_TIMEOUT", "3"},
                          {"HCCL_BUFFSIZE", "64"},
                          {"HZC_RDMA_DEVICE", "rxe0"},
                          {"HZC_RDMA_GID_INDEX", "3"},
                          {"HZC_HOST_ID", "node-b"}});
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.device_path, "/tmp/x");
  EXPECT_EQ(c.connect_timeout.count(), 3);
  EXPECT_EQ(c.buff_size_mb, 64U);
  EXPECT_EQ(c.rdma_device, "rxe0");
  EXPECT_EQ(c.rdma_gid_index, 3U);
  EXPECT_EQ(c.host_id, "node-b");
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.Describe().size(), 8U);
}

TEST_F(ConfigTest, InvalidValuesWarnAndKeepDefaults) {
  const Config c = Parse({{"HZC_LOG", "loud"},
                          {"HZC_DEVICE", ""},
                          {"HCCL_CONNECT_TIMEOUT", "0"},
                          {"HCCL_BUFFSIZE", "lots"},
                          {"HZC_RDMA_GID_INDEX", "65536"}});
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.device_path, "/dev/hzc");
  EXPECT_EQ(c.connect_timeout.count(), 120);
  EXPECT_EQ(c.buff_size_mb, 200U);
  EXPECT_EQ(c.rdma_gid_index, std::nullopt);
  ASSERT_EQ(c.warnings.size(), 5U);
  EXPECT_NE(c.warnings[0].find("HZC_LOG=\"loud\""), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[1].find("HZC_DEVICE"), std::string::npos) << c.warnings[1];
  EXPECT_NE(c.warnings[2].find("HCCL_CONNECT_TIMEOUT=\"0\""), std::string::npos);
  EXPECT_NE(c.warnings[3].find("HCCL_BUFFSIZE=\"lots\""), std::string::npos);
  EXPECT_NE(c.warnings[4].find("HZC_RDMA_GID_INDEX=\"65536\""), std::string::npos);
}

}  // namespace
}  // namespace hzc
