// SPDX-License-Identifier: Apache-2.0
#include "base/config.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
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
  // The byte count @name into @field: @def when unset, 0 and @max taken, and @max + 1, a
  // negative number, @suffixed (a number with a unit) and an empty value each @def with one
  // warning naming the value.
  void ExpectBytes(const char *name, uint64_t Config::*field, uint64_t def, uint64_t max,
                   const char *suffixed = "4k") {
    EXPECT_EQ(Parse({}).*field, def) << name;
    EXPECT_EQ(Parse({{name, "0"}}).*field, 0U) << name;
    EXPECT_EQ(Parse({{name, std::to_string(max)}}).*field, max) << name;
    for (const std::string &bad :
         {std::to_string(max + 1), std::string("-1"), std::string(suffixed), std::string()}) {
      const Config c = Parse({{name, bad}});
      EXPECT_EQ(c.*field, def) << name << "=" << bad;
      ASSERT_EQ(c.warnings.size(), 1U) << name << "=" << bad;
      EXPECT_THAT(c.warnings[0], testing::HasSubstr(std::string(name) + "=\"" + bad + "\""));
    }
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
                          {"HZC_LOG_FILE", "/tmp/hzc.%h.%p"},
                          {"HZC_DEVICE", "/tmp/x"},
                          {"HCCL_CONNECT_TIMEOUT", "3"},
                          {"HCCL_EXEC_TIMEOUT", "40"},
                          {"HCCL_BUFFSIZE", "64"},
                          {"HZC_RDMA_DEVICE", "rxe0"},
                          {"HZC_RDMA_GID_INDEX", "3"},
                          {"HCCL_RDMA_TIMEOUT", "18"},
                          {"HCCL_RDMA_RETRY_CNT", "5"},
                          {"HZC_HOST_ID", "node-b"},
                          {"HCCL_IF_IP", "10.0.0.1"},
                          {"HCCL_IF_BASE_PORT", "50000"}});
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.device_path, "/tmp/x");
  EXPECT_EQ(c.connect_timeout.count(), 3);
  EXPECT_EQ(c.buff_size_mb, 64U);
  EXPECT_EQ(c.rdma_device, "rxe0");
  EXPECT_EQ(c.rdma_gid_index, 3U);
  EXPECT_EQ(c.rdma_timeout, 18U);
  EXPECT_EQ(c.rdma_retry_cnt, 5U);
  EXPECT_EQ(c.host_id, "node-b");
  EXPECT_EQ(c.log_file, "/tmp/hzc.%h.%p");
  EXPECT_EQ(c.exec_timeout.count(), 40);
  EXPECT_EQ(c.if_ip, "10.0.0.1");
  EXPECT_EQ(c.if_base_port, 50000);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_THAT(
      c.Describe(),
      testing::ElementsAre(
          "HZC_LOG=DEBUG", "HZC_LOG_FILE=/tmp/hzc.%h.%p", "HZC_DEVICE=/tmp/x",
          "HCCL_CONNECT_TIMEOUT=3", "HCCL_EXEC_TIMEOUT=40", "HCCL_BUFFSIZE=64",
          "HZC_RDMA_DEVICE=rxe0", "HZC_RDMA_GID_INDEX=3", "HCCL_RDMA_TIMEOUT=18",
          "HCCL_RDMA_RETRY_CNT=5", "HZC_HOST_ID=node-b", "HCCL_IF_IP=10.0.0.1",
          "HCCL_IF_BASE_PORT=50000", "HZC_DEVICE_COUNT=(max(online CPUs, 8))", "HZC_TRANSPORT=auto",
          "HZC_FD_HANDOFF=auto", "HZC_NET=auto", "HZC_INLINE_MAX=16384", "HZC_ZERO_COPY_MIN=8192",
          "HZC_P2P_ZERO_COPY_MIN=4096", "HZC_P2P_BUFFERED_MAX=2048", "HZC_SPAN_RING_MIN=262144",
          "HZC_JOB_SECRET=(unset)", "HZC_JOB_SECRET_FILE=(unset)", "HCCL_WHITELIST_DISABLE=1",
          "HCCL_WHITELIST_FILE=(unset)"));
}

TEST_F(ConfigTest, DescribeDefaults) {
  EXPECT_THAT(
      Parse({}).Describe(),
      testing::ElementsAre(
          "HZC_LOG=WARN", "HZC_LOG_FILE=(stderr)", "HZC_DEVICE=/dev/hzc",
          "HCCL_CONNECT_TIMEOUT=120", "HCCL_EXEC_TIMEOUT=1836", "HCCL_BUFFSIZE=200",
          "HZC_RDMA_DEVICE=(first active port)", "HZC_RDMA_GID_INDEX=(RoCE v2, IPv4 first)",
          "HCCL_RDMA_TIMEOUT=20", "HCCL_RDMA_RETRY_CNT=7", "HZC_HOST_ID=(boot id + hostname)",
          "HCCL_IF_IP=(first up interface)", "HCCL_IF_BASE_PORT=60000",
          "HZC_DEVICE_COUNT=(max(online CPUs, 8))", "HZC_TRANSPORT=auto", "HZC_FD_HANDOFF=auto",
          "HZC_NET=auto", "HZC_INLINE_MAX=16384", "HZC_ZERO_COPY_MIN=8192",
          "HZC_P2P_ZERO_COPY_MIN=4096", "HZC_P2P_BUFFERED_MAX=2048", "HZC_SPAN_RING_MIN=262144",
          "HZC_JOB_SECRET=(unset)", "HZC_JOB_SECRET_FILE=(unset)", "HCCL_WHITELIST_DISABLE=1",
          "HCCL_WHITELIST_FILE=(unset)"));
}

// The job secret is never shown; the trust list's switch takes 0 or 1 only.
TEST_F(ConfigTest, JobSecretAndTrustList) {
  const Config c = Parse({{"HZC_JOB_SECRET", "hunter2"},
                          {"HZC_JOB_SECRET_FILE", "/run/secret"},
                          {"HCCL_WHITELIST_DISABLE", "0"},
                          {"HCCL_WHITELIST_FILE", "/etc/w.json"}});
  EXPECT_EQ(c.job_secret, "hunter2");
  EXPECT_FALSE(c.whitelist_disable);
  EXPECT_THAT(c.Describe(), testing::IsSupersetOf(
                                {"HZC_JOB_SECRET=(set)", "HZC_JOB_SECRET_FILE=/run/secret",
                                 "HCCL_WHITELIST_DISABLE=0", "HCCL_WHITELIST_FILE=/etc/w.json"}));
  for (const auto &line : c.Describe()) {
    EXPECT_THAT(line, testing::Not(testing::HasSubstr("hunter2")));
  }
  const Config bad = Parse({{"HCCL_WHITELIST_DISABLE", "yes"}});
  EXPECT_TRUE(bad.whitelist_disable);
  ASSERT_EQ(bad.warnings.size(), 1U);
  EXPECT_THAT(bad.warnings[0], testing::HasSubstr("HCCL_WHITELIST_DISABLE=\"yes\""));
}

TEST_F(ConfigTest, InlineMax) {
  ExpectBytes("HZC_INLINE_MAX", &Config::inline_max, Config::kDefaultInlineMax, 1048576);
}

TEST_F(ConfigTest, ZeroCopyMin) {
  ExpectBytes("HZC_ZERO_COPY_MIN", &Config::zero_copy_min, Config::kDefaultZeroCopyMin, 1048576);
}

TEST_F(ConfigTest, P2pZeroCopyMin) {
  ExpectBytes("HZC_P2P_ZERO_COPY_MIN", &Config::p2p_zero_copy_min, Config::kDefaultP2pZeroCopyMin,
              1048576);
}

TEST_F(ConfigTest, P2pBufferedMax) {
  ExpectBytes("HZC_P2P_BUFFERED_MAX", &Config::p2p_buffered_max, Config::kDefaultP2pBufferedMax,
              65536);
}

TEST_F(ConfigTest, SpanRingMin) {
  ExpectBytes("HZC_SPAN_RING_MIN", &Config::span_ring_min, Config::kDefaultSpanRingMin, 16777216,
              "256k");
}

TEST_F(ConfigTest, Transport) {
  EXPECT_EQ(Parse({}).transport, TransportChoice::kAuto);
  EXPECT_EQ(Parse({{"HZC_TRANSPORT", "memfd"}}).transport, TransportChoice::kMemfd);
  EXPECT_EQ(Parse({{"HZC_FD_HANDOFF", "socket"}}).fd_handoff, FdHandoffChoice::kSocket);
  EXPECT_EQ(Parse({{"HZC_FD_HANDOFF", "off"}}).fd_handoff, FdHandoffChoice::kOff);
  EXPECT_EQ(Parse({{"HZC_FD_HANDOFF", "sometimes"}}).fd_handoff, FdHandoffChoice::kAuto);
  EXPECT_THAT(Parse({{"HZC_FD_HANDOFF", "sometimes"}}).warnings,
              testing::ElementsAre(testing::HasSubstr("HZC_FD_HANDOFF=\"sometimes\"")));
  EXPECT_EQ(Parse({{"HZC_TRANSPORT", "kernel"}}).transport, TransportChoice::kKernel);
  EXPECT_EQ(Parse({}).net, NetChoice::kAuto);
  EXPECT_EQ(Parse({{"HZC_NET", "rdma"}}).net, NetChoice::kRdma);
  EXPECT_EQ(Parse({{"HZC_NET", "socket"}}).net, NetChoice::kSocket);
  EXPECT_THAT(Parse({{"HZC_NET", "socket"}}).Describe(), testing::Contains("HZC_NET=socket"));
  EXPECT_EQ(Parse({{"HZC_NET", "ib"}}).net, NetChoice::kAuto);
  EXPECT_THAT(Parse({{"HZC_NET", "ib"}}).warnings,
              testing::ElementsAre(testing::HasSubstr("HZC_NET=\"ib\"")));
  EXPECT_THAT(Parse({{"HZC_TRANSPORT", "kernel"}}).Describe(),
              testing::Contains("HZC_TRANSPORT=kernel"));
  const Config bad = Parse({{"HZC_TRANSPORT", "shm"}});
  EXPECT_EQ(bad.transport, TransportChoice::kAuto);
  ASSERT_EQ(bad.warnings.size(), 1U);
  EXPECT_THAT(bad.warnings[0], testing::HasSubstr("HZC_TRANSPORT=\"shm\""));
}

// Every variable the library's sources read (getenv or the config lookup) is read by Config
// (so it is in the INFO dump) and listed in the README.
TEST_F(ConfigTest, EveryVariableReadIsDumpedAndDocumented) {
  std::set<std::string> read;
  const std::regex use(R"re((getenv|getenv_fn)\("([A-Z0-9_]+)"\))re");
  for (const auto &e :
       std::filesystem::recursive_directory_iterator(HZC_SOURCE_DIR "/userspace/src")) {
    if (!e.is_regular_file()) {
      continue;
    }
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    const std::string s = text.str();
    for (auto it = std::sregex_iterator(s.begin(), s.end(), use); it != std::sregex_iterator();
         ++it) {
      read.insert((*it)[2]);
      EXPECT_EQ((*it)[1], "getenv_fn")
          << e.path() << " reads " << (*it)[2] << " itself: read it in base/config.cpp";
    }
  }
  EXPECT_GE(read.size(), 10U);
  std::set<std::string> dumped;
  for (const std::string &line : Parse({}).Describe()) {
    dumped.insert(line.substr(0, line.find('=')));
  }
  EXPECT_EQ(read, dumped);
  std::ifstream f(HZC_SOURCE_DIR "/README.md");
  std::stringstream readme;
  readme << f.rdbuf();
  for (const std::string &name : read) {
    EXPECT_NE(readme.str().find("`" + name + "`"), std::string::npos)
        << name << " is not in README.md";
  }
}

// HCCL's ranges: timeout 5-24, retry count 1-7; anything else keeps HCCL's defaults (20, 7).
TEST_F(ConfigTest, RdmaTimeoutAndRetryCount) {
  Config c = Parse({{"HCCL_RDMA_TIMEOUT", "5"}, {"HCCL_RDMA_RETRY_CNT", "1"}});
  EXPECT_EQ(c.rdma_timeout, 5U);
  EXPECT_EQ(c.rdma_retry_cnt, 1U);
  EXPECT_TRUE(c.warnings.empty());
  c = Parse({{"HCCL_RDMA_TIMEOUT", "24"}, {"HCCL_RDMA_RETRY_CNT", "7"}});
  EXPECT_EQ(c.rdma_timeout, 24U);
  EXPECT_EQ(c.rdma_retry_cnt, 7U);
  c = Parse({{"HCCL_RDMA_TIMEOUT", "4"}, {"HCCL_RDMA_RETRY_CNT", "0"}});
  EXPECT_EQ(c.rdma_timeout, 20U);
  EXPECT_EQ(c.rdma_retry_cnt, 7U);
  EXPECT_THAT(c.warnings,
              testing::ElementsAre("HCCL_RDMA_TIMEOUT=\"4\": not an integer in [5, 24]; using 20",
                                   "HCCL_RDMA_RETRY_CNT=\"0\": not an integer in [1, 7]; using 7"));
  EXPECT_EQ(c.PeerSilence(), std::chrono::milliseconds(34'360));  // 8 x 4.096 us x 2^20
  c = Parse({{"HCCL_RDMA_TIMEOUT", "25"}, {"HCCL_RDMA_RETRY_CNT", "8"}});
  EXPECT_EQ(c.rdma_timeout, 20U);
  EXPECT_EQ(c.rdma_retry_cnt, 7U);
  EXPECT_EQ(c.warnings.size(), 2U);
  c = Parse({{"HCCL_RDMA_TIMEOUT", "18"}, {"HCCL_RDMA_RETRY_CNT", "6"}});
  EXPECT_EQ(c.PeerSilence(), std::chrono::milliseconds(7'517));  // 7 x 1.07 s
}

TEST_F(ConfigTest, LogFileAndExecTimeout) {
  Config c = Parse({{"HZC_LOG_FILE", ""}, {"HCCL_EXEC_TIMEOUT", "0"}});
  EXPECT_TRUE(c.log_file.empty());
  EXPECT_EQ(c.exec_timeout.count(), 1836);
  ASSERT_EQ(c.warnings.size(), 2U);
  EXPECT_EQ(c.warnings[0], "HZC_LOG_FILE is empty; logging to stderr");
  EXPECT_EQ(c.warnings[1],
            "HCCL_EXEC_TIMEOUT=\"0\": not a number of seconds in [1, 86400]; using 1836");
  c = Parse({{"HCCL_EXEC_TIMEOUT", "86400"}});
  EXPECT_EQ(c.exec_timeout.count(), 86400);
  c = Parse({{"HCCL_EXEC_TIMEOUT", "86401"}});
  EXPECT_EQ(c.exec_timeout.count(), 1836);
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

TEST_F(ConfigTest, IfBasePort) {
  EXPECT_EQ(Parse({}).if_base_port, 60000);
  EXPECT_EQ(Parse({{"HCCL_IF_BASE_PORT", "1024"}}).if_base_port, 1024);
  EXPECT_EQ(Parse({{"HCCL_IF_BASE_PORT", "65520"}}).if_base_port, 65520);
  for (const char *bad : {"1023", "65521", "-1", "port", ""}) {
    const Config c = Parse({{"HCCL_IF_BASE_PORT", bad}});
    EXPECT_EQ(c.if_base_port, 60000) << bad;
    ASSERT_EQ(c.warnings.size(), 1U) << bad;
    EXPECT_EQ(c.warnings[0], std::string("HCCL_IF_BASE_PORT=\"") + bad +
                                 "\": not a port in [1024, 65520]; using 60000");
  }
}

TEST_F(ConfigTest, DeviceCount) {
  Config c = Parse({{"HZC_DEVICE_COUNT", "3"}});
  EXPECT_EQ(c.device_count, 3U);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_THAT(c.Describe(), testing::Contains("HZC_DEVICE_COUNT=3"));
  c = Parse({{"HZC_DEVICE_COUNT", "1024"}});
  EXPECT_EQ(c.device_count, 1024U);
  for (const char *bad : {"0", "1025", "-1", "two", ""}) {
    c = Parse({{"HZC_DEVICE_COUNT", bad}});
    EXPECT_EQ(c.device_count, std::nullopt) << bad;
    ASSERT_EQ(c.warnings.size(), 1U) << bad;
    EXPECT_EQ(c.warnings[0], std::string("HZC_DEVICE_COUNT=\"") + bad +
                                 "\": not a number of devices in [1, 1024]; using max(CPUs, 8)");
  }
}

}  // namespace
}  // namespace hzc
