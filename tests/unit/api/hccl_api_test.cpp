// SPDX-License-Identifier: Apache-2.0
// The HCCL entry points on the host: argument checks, handles, the 11-step flow in one rank.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "core/range_registry.h"
#include "hzc_test.h"

namespace {

const size_t kPage = static_cast<size_t>(getpagesize());

class HcclApiTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    ASSERT_EQ(HcclCommInitRootInfo(1, &root, 0, &comm_), HCCL_SUCCESS);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(HcclCommDestroy(comm_), HCCL_SUCCESS);
    }
    EXPECT_EQ(hzc::RangeRegistry::Process().RangeCount(), 0U);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
    hzc::test::Test::TearDown();
  }
  HcclComm comm_ = nullptr;
};

TEST_F(HcclApiTest, RankQueries) {
  uint32_t n = 0, r = 99;
  EXPECT_EQ(HcclGetRankSize(comm_, &n), HCCL_SUCCESS);
  EXPECT_EQ(n, 1U);
  EXPECT_EQ(HcclGetRankId(comm_, &r), HCCL_SUCCESS);
  EXPECT_EQ(r, 0U);
  EXPECT_EQ(HcclGetRankSize(nullptr, &n), HCCL_E_PTR);
  EXPECT_EQ(HcclGetRankSize(comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclGetRankId(nullptr, &r), HCCL_E_PTR);
  EXPECT_EQ(HcclGetRankId(comm_, nullptr), HCCL_E_PTR);
}

TEST_F(HcclApiTest, DestroyedAndForeignHandlesAreErrors) {
  int foreign = 0;
  uint32_t n = 0;
  EXPECT_EQ(HcclGetRankSize(&foreign, &n), HCCL_E_PARA);
  EXPECT_EQ(HcclCommDestroy(&foreign), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(&foreign, &foreign, kPage, 0, 0), HCCL_E_PARA);
  ASSERT_EQ(HcclCommDestroy(comm_), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommDestroy(comm_), HCCL_E_PARA);
  EXPECT_EQ(HcclGetRankSize(comm_, &n), HCCL_E_PARA);
  EXPECT_EQ(HcclCommDestroy(nullptr), HCCL_E_PTR);
  comm_ = nullptr;
}

TEST_F(HcclApiTest, InitArguments) {
  HcclRootInfo root{};
  HcclComm c = nullptr;
  EXPECT_EQ(HcclCommInitRootInfo(1, nullptr, 0, &c), HCCL_E_PTR);
  EXPECT_EQ(HcclCommInitRootInfo(1, &root, 0, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclCommInitRootInfo(0, &root, 0, &c), HCCL_E_PARA);
  EXPECT_EQ(HcclCommInitRootInfo(2, &root, 2, &c), HCCL_E_PARA);
  EXPECT_EQ(HcclCommInitRootInfo(2, &root, 0, &c), HCCL_E_PARA);  // not a root info
  EXPECT_EQ(HcclGetRootInfo(nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclCommInitClusterInfo(nullptr, 0, &c), HCCL_E_PTR);
  EXPECT_EQ(HcclCommInitClusterInfo("/nonexistent.json", 0, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclCommInitClusterInfo("/nonexistent.json", 0, &c), HCCL_E_OPEN_FILE_FAILURE);
  EXPECT_EQ(c, nullptr);
}

TEST_F(HcclApiTest, SetMemoryRangeArguments) {
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 4 * kPage, 0, nullptr, 0), ACL_SUCCESS);
  char *p = static_cast<char *>(va);
  EXPECT_EQ(HcclCommSetMemoryRange(nullptr, p, kPage, 0, 0), HCCL_E_PTR);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, nullptr, kPage, 0, 0), HCCL_E_PTR);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, kPage, kPage, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, kPage, 0, 1), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, 0, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p + 1, kPage, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, kPage + 1, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, SIZE_MAX - kPage + 1, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(hzc::RangeRegistry::Process().RangeCount(), 0U);
  ASSERT_EQ(HcclCommSetMemoryRange(comm_, p, 4 * kPage, 0, 0), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p, 4 * kPage, 0, 0), HCCL_E_PARA);  // repeat
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, p + kPage, kPage, 0, 0), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(nullptr, p), HCCL_E_PTR);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p + kPage), HCCL_E_PARA);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p), HCCL_SUCCESS);
  EXPECT_EQ(HcclCommUnsetMemoryRange(comm_, p), HCCL_E_PARA);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

// DESIGN.md section 1, host side: reserve, set, malloc, map, activate, ..., release.
TEST_F(HcclApiTest, ElevenStepFlowGrowingInAdjacentChunks) {
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
  EXPECT_EQ(hzc::RangeRegistry::Process().ActivationCount(), 3U);
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

TEST_F(HcclApiTest, FailureLogLineNamesApiArgumentAndCause) {
  int x = 0;
  testing::internal::CaptureStderr();
  EXPECT_EQ(HcclCommSetMemoryRange(comm_, &x, kPage, 64, 0), HCCL_E_PARA);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              testing::MatchesRegex("hzc\\[[0-9]+\\]: error: HcclCommSetMemoryRange: "
                                    "alignment=0x40: reserved, must be 0\n"));
}

// Ranks as forked processes; two simulated servers (HZC_HOST_ID) -> HCCL_E_NOT_SUPPORT.
class HcclMultiProcessTest : public hzc::test::Test {};

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

TEST_F(HcclMultiProcessTest, FourRanksOneServer) {
  RunProcesses(4, false, HCCL_SUCCESS);
}

TEST_F(HcclMultiProcessTest, TwoServersAreNotSupported) {
  RunProcesses(4, true, HCCL_E_NOT_SUPPORT);
}

}  // namespace
