// SPDX-License-Identifier: Apache-2.0
// Symmetric memory windows with real processes (tests/vm/symwin/symwin_rank.cpp): HCCL's flow on
// reserved and mapped memory at 2 and 4 ranks (its collectives zero-copy), the refusals and
// mismatches, a communicator across servers, HcclCommDestroy with a live window, the limit of
// hcclSymWinMaxMemSizePerRank on a rank's windows together, allocations freed under a live
// window, and windows on the communicators of HcclCommInitAll (threads of this process). In the
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
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "mapped.h"
#include "rank_launch.h"

namespace {

// Run @scenario on @n ranks with @env; every rank's exit status.
std::vector<int> RunRanks(uint32_t n, const char *scenario,
                          const std::map<std::string, std::string> &env = {},
                          bool two_servers = false) {
  return hzc::test::RunRankProcesses(HZC_SYMWIN_RANK, n, {scenario}, [&](uint32_t r) {
    setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    setenv("HZC_HOST_ID", two_servers && r % 2 ? "server-b" : "server-a", 1);
    for (const auto &[k, v] : env) {
      setenv(k.c_str(), v.c_str(), 1);
    }
  });
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
  ExpectErrorLog("HcclCommSymWinRegister: winHandle is null");
  ExpectErrorLog("HcclCommSymWinRegister: size=0: must not be 0");
  ExpectErrorLog("HcclCommSymWinRegister: size=0x80000000: above hcclSymWinMaxMemSizePerRank");
  ExpectErrorLog("HcclCommSymWinRegister: the bytes mapped from addr (the window) differs");
  ExpectErrorLog("HcclCommSymWinDeregister: the window (its number on the communicator) differs");
  ExpectErrorLog("HcclCommSymWinDeregister: winHandle=");
  ExpectErrorLog("HcclCommSymWinDeregister: rank(s) 0 failed their part of the deregistration");
  ExpectErrorLog("(aclrtFreePhysical) before the registration");
  ExpectErrorLog("(HcclCommSetMemoryRange); a window sets a range of its own");
  EXPECT_EQ(RunRanks(2, "refuse"), std::vector<int>(2, 0));
}

TEST_F(SymWinTest, WindowsTogetherAboveTheLimitFailUntilOneIsDeregistered) {
  ExpectErrorLog("other windows on the communicator exceed hcclSymWinMaxMemSizePerRank (1 GB)");
  EXPECT_EQ(RunRanks(2, "limit"), std::vector<int>(2, 0));
}

TEST_F(SymWinTest, FreeingTheAllocationsUnderALiveWindowIsHarmless) {
  ExpectErrorLog("aclrtUnmapMem: ");
  ExpectErrorLog("aclrtReleaseMemAddress: ");
  EXPECT_EQ(RunRanks(2, "free"), std::vector<int>(2, 0));
}

// One rank of WindowsOnCommunicatorsOfOneProcess, on thread @rank with @comm.
void ThreadRank(HcclComm comm, uint32_t rank) {
  hzc::test::Mapped m;
  ASSERT_TRUE(m.Make(1, 1));
  HcclCommSymWindow win = nullptr;
  ASSERT_EQ(HcclCommSymWinRegister(comm, m.va, hzc::test::kMappedBlock, &win, 1), HCCL_SUCCESS);
  auto *mine = static_cast<int64_t *>(m.va);
  mine[0] = 100 + rank;
  ASSERT_EQ(HcclBarrier(comm, nullptr), HCCL_SUCCESS);
  void *at = nullptr;
  ASSERT_EQ(HcclSymWinGetPeerPointer(win, 0, 1 - rank, &at), HCCL_SUCCESS);
  EXPECT_NE(at, m.va);
  EXPECT_EQ(static_cast<int64_t *>(at)[0], 101 - rank);
  static_cast<int64_t *>(at)[1] = 200 + rank;  // the peer's second slot
  ASSERT_EQ(HcclBarrier(comm, nullptr), HCCL_SUCCESS);
  EXPECT_EQ(mine[1], 201 - rank);
  auto *in = reinterpret_cast<int32_t *>(m.At(0) + 4096);
  auto *out = reinterpret_cast<int32_t *>(m.At(0) + (64 << 10));
  for (int i = 0; i < 4096; ++i) {
    in[i] = static_cast<int32_t>(rank + i);
  }
  ASSERT_EQ(HcclAllReduce(in, out, 4096, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, nullptr),
            HCCL_SUCCESS);
  EXPECT_EQ(out[4095], 1 + 2 * 4095);
  HcclCommSymWindow found = nullptr;
  size_t offset = 0;
  EXPECT_EQ(HcclCommSymWinGet(comm, out, 16, &found, &offset), HCCL_SUCCESS);
  EXPECT_EQ(found, win);
  EXPECT_EQ(offset, size_t{64} << 10);
  EXPECT_EQ(HcclCommSymWinDeregister(win), HCCL_SUCCESS);
}

// Windows on the communicators of HcclCommInitAll, whose ranks are threads of this process:
// the registration across the threads, stores and loads through peer pointers into the other
// thread's memory, an AllReduce on the windows, deregistration.
TEST_F(SymWinTest, WindowsOnCommunicatorsOfOneProcess) {
  int32_t devices[] = {0, 1};
  HcclComm comms[2] = {};
  ASSERT_EQ(HcclCommInitAll(2, devices, comms), HCCL_SUCCESS);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { ThreadRank(comms[r], r); });
  }
  for (std::thread &t : threads) {
    t.join();
  }
  for (HcclComm c : comms) {
    EXPECT_EQ(HcclCommDestroy(c), HCCL_SUCCESS);
  }
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
