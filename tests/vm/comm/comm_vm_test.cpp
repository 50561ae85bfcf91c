// SPDX-License-Identifier: Apache-2.0
// The HCCL zero-copy calls against the real module: the flow of DESIGN.md section 1, process-wide
// ranges, concurrency, link establishment with real processes.
#include <acl/acl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "kernel_counters.h"

namespace {

const size_t kPage = static_cast<size_t>(getpagesize());

class HcclApiTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    if (access(hzc_device_path(), F_OK) != 0) {
      GTEST_SKIP() << hzc_device_path() << " is absent: hzc.ko is not loaded";
    }
    baseline_ = hzc::test::KernelCounters();
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    ASSERT_EQ(HcclCommInitRootInfo(1, &root, 0, &comm_), HCCL_SUCCESS);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(HcclCommDestroy(comm_), HCCL_SUCCESS);
      hzc::test::ExpectKernelBaseline(baseline_);  // ranges, pins and the domain are gone
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
    hzc::test::Test::TearDown();
  }
  HcclComm comm_ = nullptr;
  std::map<std::string, long> baseline_;
};

TEST_F(HcclApiTest, SetUnsetAndOverlaps) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("HcclCommUnsetMemoryRange: ");
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 4 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  char *p = static_cast<char *>(va);
  ASSERT_EQ(HcclCommSetMemoryRange(comm_, p, 4 * kPage, 0, 0), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, 4 * kPage, 0, 0), HCCL_E_PARA);  // repeat
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p + kPage, kPage, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p + kPage), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p), HCCL_E_PARA);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(HcclApiTest, UnmappedMemoryIsRefusedAndNothingChanges) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("HcclCommUnsetMemoryRange: ");
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 2 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  ASSERT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);  // now nothing is mapped there
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, va, 2 * kPage, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, va), HCCL_E_PARA);  // registry unchanged
}

TEST_F(HcclApiTest, TenThousandSetUnsetPairs) {
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, kPage, 0, nullptr, 0), ACL_SUCCESS);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(HcclCommSetMemoryRange(comm_, va, kPage, 0, 0), HCCL_SUCCESS) << i;
    ASSERT_EQ(HcclCommUnsetMemoryRange(comm_, va), HCCL_SUCCESS) << i;
  }
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

// DESIGN.md section 1, host side: reserve, set, malloc, map, activate, ..., release.
TEST_F(HcclApiTest, ElevenStepFlowGrowingInAdjacentChunks) {
  ExpectErrorLog("HcclCommActivateCommMemory: ");
  ExpectErrorLog("HcclCommDeactivateCommMemory: ");
  ExpectErrorLog("HcclCommUnsetMemoryRange: ");
  void *va = nullptr;
  const size_t chunk = 2 * kPage;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 3 * chunk, 0, nullptr, 0), ACL_SUCCESS);
  ASSERT_EQ(HcclCommSetMemoryRange(comm_, va, 3 * chunk, 0, 0), HCCL_SUCCESS);
  aclrtPhysicalMemProp prop{};
  prop.memAttr = ACL_HBM_MEM_NORMAL;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  std::vector<aclrtDrvMemHandle> handles(3);
  aclrtDrvMemHandle other = nullptr;
  ASSERT_EQ(aclrtMallocPhysical(&other, chunk, &prop, 0), ACL_SUCCESS);
  for (size_t i = 0; i < 3; ++i) {
    char *at = static_cast<char *>(va) + i * chunk;
    ASSERT_EQ(aclrtMallocPhysical(&handles[i], chunk, &prop, 0), ACL_SUCCESS);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, handles[i], 0), HCCL_E_PARA)
        << "activated before aclrtMapMem";
    ASSERT_EQ(aclrtMapMem(at, chunk, 0, handles[i], 0), ACL_SUCCESS);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, other, 0), HCCL_E_PARA)
        << "another allocation's handle";
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk / 2, 0, handles[i], 0), HCCL_E_PARA);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, kPage, handles[i], 0), HCCL_E_PARA);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, handles[i], 1), HCCL_E_PARA);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, 0, 0, handles[i], 0), HCCL_E_PARA);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, nullptr, chunk, 0, handles[i], 0), HCCL_E_PTR);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, nullptr, 0), HCCL_E_PTR);
    EXPECT_EQ(HcclCommActivateCommMemory(nullptr, at, chunk, 0, handles[i], 0), HCCL_E_PTR);
    ASSERT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, handles[i], 0), HCCL_SUCCESS);
    EXPECT_EQ(HcclCommActivateCommMemory(comm_, at, chunk, 0, handles[i], 0), HCCL_E_PARA)
        << "activated twice";
    at[0] = static_cast<char>(i);
  }
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, va), HCCL_E_PARA);  // activated memory remains
  for (size_t i = 0; i < 3; ++i) {
    char *at = static_cast<char *>(va) + i * chunk;
    EXPECT_EQ(HcclCommDeactivateCommMemory(comm_, at + kPage), HCCL_E_PARA);
    EXPECT_EQ(HcclCommDeactivateCommMemory(comm_, nullptr), HCCL_E_PTR);
    EXPECT_EQ(HcclCommDeactivateCommMemory(nullptr, at), HCCL_E_PTR);
    if (i == 1) {  // some callers unmap before deactivating
      ASSERT_EQ(aclrtUnmapMem(at), ACL_SUCCESS);
      ASSERT_EQ(HcclCommDeactivateCommMemory(comm_, at), HCCL_SUCCESS);
    } else {
      ASSERT_EQ(HcclCommDeactivateCommMemory(comm_, at), HCCL_SUCCESS);
      ASSERT_EQ(aclrtUnmapMem(at), ACL_SUCCESS);
    }
    ASSERT_EQ(aclrtFreePhysical(handles[i]), ACL_SUCCESS);
  }
  ASSERT_EQ(aclrtFreePhysical(other), ACL_SUCCESS);
  // Release before unset must work too.
  ASSERT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
  ASSERT_EQ(HcclCommUnsetMemoryRange(comm_, va), HCCL_SUCCESS);
}

TEST_F(HcclApiTest, RangesAreProcessWide) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  HcclRootInfo root;
  HcclComm other = nullptr;
  ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  ASSERT_EQ(HcclCommInitRootInfo(1, &root, 0, &other), HCCL_SUCCESS);
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 2 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  ASSERT_EQ(HcclCommSetMemoryRange(comm_, va, 2 * kPage, 0, 0), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommSetMemoryRange(other, va, kPage, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(other, va), HCCL_SUCCESS);  // visible through any
  EXPECT_EQ(HcclCommDestroy(other), HCCL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

TEST_F(HcclApiTest, ConcurrentSetFromThreads) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  constexpr int kThreads = 8;
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, kThreads * kPage, 0, nullptr, 0), ACL_SUCCESS);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      char *mine = static_cast<char *>(va) + t * kPage;
      for (int i = 0; i < 500; ++i) {
        if (HcclCommSetMemoryRange(comm_, mine, kPage, 0, 0) != HCCL_SUCCESS ||
            HcclCommUnsetMemoryRange(comm_, mine) != HCCL_SUCCESS) {
          return;
        }
      }
      // All threads race for one range: exactly one wins.
      if (HcclCommSetMemoryRange(comm_, va, kThreads * kPage, 0, 0) == HCCL_SUCCESS) {
        ++ok;
      }
    });
  }
  for (auto &t : threads) {
    t.join();
  }
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, va), HCCL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

// Ranks as forked processes; two simulated servers (HZC_HOST_ID) -> HCCL_E_NOT_SUPPORT.
class HcclMultiProcessTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    if (access(hzc_device_path(), F_OK) != 0) {
      GTEST_SKIP() << hzc_device_path() << " is absent: hzc.ko is not loaded";
    }
    baseline_ = hzc::test::KernelCounters();
  }
  void TearDown() override {
    if (!IsSkipped()) {
      hzc::test::ExpectKernelBaseline(baseline_);  // no half state after any outcome
    }
    hzc::test::Test::TearDown();
  }
  std::map<std::string, long> baseline_;
};

std::string Hex(const HcclRootInfo &root) {
  std::string out;
  for (char c : root.internal) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return out;
}

// Each rank is a fresh process (tests/unit/api/rank_main.cpp), so it reads its own
// environment (HZC_HOST_ID).
void RunProcesses(uint32_t nranks, bool two_servers, int expect) {
  HcclRootInfo root;
  ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = Hex(root);
  std::vector<pid_t> pids;
  for (uint32_t r = 0; r < nranks; ++r) {
    const std::string n = std::to_string(nranks), me = std::to_string(r);
    const char *host = two_servers && r % 2 ? "server-b" : "server-a";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("HZC_HOST_ID", host, 1);
      execl(HZC_RANK_MAIN, HZC_RANK_MAIN, hex.c_str(), n.c_str(), me.c_str(), nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), expect);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST_F(HcclMultiProcessTest, TwoRanksOneServer) {
  RunProcesses(2, false, HCCL_SUCCESS);
}

TEST_F(HcclMultiProcessTest, FourRanksOneServer) {
  RunProcesses(4, false, HCCL_SUCCESS);
}

TEST_F(HcclMultiProcessTest, EightRanksOneServer) {
  RunProcesses(8, false, HCCL_SUCCESS);
}

// Two ranks; rank 1 calls HcclCommSetMemoryRange @delay_ms late. Exit statuses of both.
std::vector<int> LateRank(int delay_ms, int timeout_s, int retries0, int retries1) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = Hex(root), t = std::to_string(timeout_s);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const std::string me = std::to_string(r), delay = std::to_string(r == 1 ? delay_ms : 0),
                      retries = std::to_string(r == 0 ? retries0 : retries1);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("HCCL_CONNECT_TIMEOUT", t.c_str(), 1);
      execl(HZC_RANK_MAIN, HZC_RANK_MAIN, hex.c_str(), "2", me.c_str(), delay.c_str(),
            retries.c_str(), nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> out;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    out.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return out;
}

TEST_F(HcclMultiProcessTest, LateRankWithinTimeoutSucceeds) {
  EXPECT_EQ(LateRank(500, 5, 0, 0), (std::vector<int>{HCCL_SUCCESS, HCCL_SUCCESS}));
}

TEST_F(HcclMultiProcessTest, AbsentRankTimesOutThenRetryWorks) {
  ExpectErrorLog("HcclCommSetMemoryRange: link establishment: rank(s) ");
  ExpectErrorLog(
      "rank(s) 1 of 2 did not call HcclCommSetMemoryRange within HCCL_CONNECT_TIMEOUT=1s");
  // Rank 1 arrives 2.5 s late with a 1 s timeout: rank 0 times out once, then retries and
  // meets rank 1.
  EXPECT_EQ(LateRank(2500, 1, 0, 0)[0], HCCL_E_TIMEOUT);
  EXPECT_EQ(LateRank(1500, 1, 3, 0), (std::vector<int>{HCCL_SUCCESS, HCCL_SUCCESS}));
}

TEST_F(HcclMultiProcessTest, TwoServersAreNotSupported) {
  ExpectErrorLog("HcclCommSetMemoryRange: comm=");
  ExpectErrorLog("span 2 servers");
  RunProcesses(4, true, HCCL_E_NOT_SUPPORT);
}

}  // namespace
