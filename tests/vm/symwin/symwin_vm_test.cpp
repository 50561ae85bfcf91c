// SPDX-License-Identifier: Apache-2.0
// Symmetric memory windows with real processes (tests/vm/symwin/symwin_rank.cpp): HCCL's flow on
// reserved and mapped memory at 2 and 4 ranks (its collectives zero-copy), the refusals and
// mismatches, a communicator across servers, and HcclCommDestroy with a live window. In the
// guest over hzc.ko; natively over the memfd transport (HZC_TRANSPORT=memfd).
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hzc_test.h"
#include "rank_launch.h"

namespace {

// Run @scenario on @n ranks with @env; every rank's exit status.
std::vector<int> RunRanks(uint32_t n, const char *scenario,
                          const std::map<std::string, std::string> &env = {},
                          bool two_servers = false) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = hzc::test::RootInfoToHex(root);
  const auto pids = hzc::test::StartRanks(
      n,
      [&](uint32_t r) {
        return std::vector<std::string>{HZC_SYMWIN_RANK, hex, std::to_string(n), std::to_string(r),
                                        scenario};
      },
      [&](uint32_t r) {
        setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
        setenv("HCCL_EXEC_TIMEOUT", "60", 1);
        setenv("HZC_HOST_ID", two_servers && r % 2 ? "server-b" : "server-a", 1);
        for (const auto &[k, v] : env) {
          setenv(k.c_str(), v.c_str(), 1);
        }
      });
  const std::vector<int> out = hzc::test::WaitRanks(pids);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // root thread exit
  return out;
}

class SymWinTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    const char *t = std::getenv("HZC_TRANSPORT");
    if (access(hzc_device_path(), F_OK) != 0 && t != nullptr && std::string(t) == "kernel") {
      GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
    }
  }
};

// Calls of the ranks' debug logs in @dir that took the zero-copy path.
int ZeroCopyCalls(const std::string &dir) {
  int calls = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      calls += line.find(") takes the zero-copy path") != std::string::npos ? 1 : 0;
    }
  }
  return calls;
}

class SymWinFlowTest : public SymWinTest, public ::testing::WithParamInterface<uint32_t> {};

// Register, peer pointers, collectives on the window (zero-copy: the five of the flow and the
// AllReduce from a range, on every rank), guards, deregister.
TEST_P(SymWinFlowTest, RegisterPeerPointersCollectivesDeregister) {
  const uint32_t n = GetParam();
  char dir[] = "/tmp/hzc-symwin-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  EXPECT_EQ(RunRanks(n, "flow",
                     {{"HZC_INLINE_MAX", "0"},
                      {"HZC_LOG", "DEBUG"},
                      {"HZC_LOG_FILE", std::string(dir) + "/rank.%p"}}),
            std::vector<int>(n, 0));
  EXPECT_GE(ZeroCopyCalls(dir), static_cast<int>(6 * n));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymWinFlowTest, ::testing::Values(2u, 4u),
                         [](const auto &p) { return std::to_string(p.param) + "ranks"; });

TEST_F(SymWinTest, MismatchesBadArgumentsAndWindowsInUseFailOnEveryRank) {
  ExpectErrorLog("failed their part of the registration (see their log)");
  ExpectErrorLog("HcclCommSymWinRegister: size differs between the ranks");
  ExpectErrorLog("HcclCommSymWinRegister: flag=0 (HCCL_WIN_DEFAULT)");
  ExpectErrorLog("HcclCommSymWinRegister: flag=2");
  ExpectErrorLog("HcclCommSymWinRegister: addr=0x");
  ExpectErrorLog("HcclCommSymWinRegister: addr is null");
  ExpectErrorLog("HcclCommSymWinRegister: size=0x80000000: above hcclSymWinMaxMemSizePerRank");
  ExpectErrorLog("HcclCommSymWinRegister: the bytes mapped from addr (the window) differs");
  ExpectErrorLog("HcclCommSymWinDeregister: the window (its number on the communicator) differs");
  ExpectErrorLog("HcclCommSymWinDeregister: winHandle=");
  ExpectErrorLog("HcclCommSymWinDeregister: rank(s) 0 failed their part of the deregistration");
  EXPECT_EQ(RunRanks(2, "refuse"), std::vector<int>(2, 0));
}

TEST_F(SymWinTest, WindowAcrossServersIsNotSupported) {
  ExpectErrorLog("HcclCommSymWinRegister: comm=");
  EXPECT_EQ(RunRanks(2, "servers", {}, true), std::vector<int>(2, 0));
}

TEST_F(SymWinTest, DestroyReleasesLiveWindows) {
  ExpectErrorLog("aclrtUnmapMem: ");
  ExpectErrorLog("HcclCommSymWinDeregister: winHandle=");
  EXPECT_EQ(RunRanks(2, "destroy"), std::vector<int>(2, 0));
}

}  // namespace
