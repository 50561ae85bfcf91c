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
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "kernel_counters.h"
#include "rank_launch.h"
#include "rdma_resources.h"

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

// One chunk of memory-range memory: reserved, set through @comm, mapped and activated.
struct Block {
  char *va = nullptr;
  size_t size = 0;
  aclrtDrvMemHandle handle = nullptr;

  // Reserve and set (the first set of @comm establishes its links).
  HcclResult Set(HcclComm comm, size_t bytes) {
    size = bytes;
    void *v = nullptr;
    if (aclrtReserveMemAddress(&v, size, 0, nullptr, 0) != ACL_SUCCESS) {
      return HCCL_E_MEMORY;
    }
    va = static_cast<char *>(v);
    return HcclCommSetMemoryRange(comm, va, size, 0, 0);
  }
  HcclResult Activate(HcclComm comm) {
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    if (aclrtMallocPhysical(&handle, size, &prop, 0) != ACL_SUCCESS ||
        aclrtMapMem(va, size, 0, handle, 0) != ACL_SUCCESS) {
      return HCCL_E_MEMORY;
    }
    return HcclCommActivateCommMemory(comm, va, size, 0, handle, 0);
  }
  // Deactivate through @comm (nullptr: not activated), unmap, free, unset, release.
  void Release(HcclComm comm, HcclComm unset_through) {
    if (comm != nullptr) {
      EXPECT_EQ(HcclCommDeactivateCommMemory(comm, va), HCCL_SUCCESS);
    }
    if (handle != nullptr) {
      EXPECT_EQ(aclrtUnmapMem(va), ACL_SUCCESS);
      EXPECT_EQ(aclrtFreePhysical(handle), ACL_SUCCESS);
    }
    EXPECT_EQ(HcclCommUnsetMemoryRange(unset_through, va), HCCL_SUCCESS);
    EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
  }
};

// Two ranks of one communicator in this process, each with a range set (the first set of
// both ranks must run concurrently: a thread per rank).
struct Pair {
  HcclComm c[2] = {};
  Block blk[2];
  int qps[2] = {-1, -1};  // each rank's queue pairs per `rdma resource show`, -1: not counted

  ::testing::AssertionResult Make(size_t bytes) {
    HcclRootInfo root;
    if (HcclGetRootInfo(&root) != HCCL_SUCCESS) {
      return ::testing::AssertionFailure() << "HcclGetRootInfo failed";
    }
    HcclResult init[2] = {}, set[2] = {};
    // The kernel files RDMA objects under the thread that made them, and under nobody once
    // it has exited: count each rank's queue pairs before the threads end.
    std::atomic<int> linked{0}, counted{0};
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        init[r] = HcclCommInitRootInfo(2, &root, r, &c[r]);
        set[r] = init[r] == HCCL_SUCCESS ? blk[r].Set(c[r], bytes) : init[r];
        for (++linked; linked.load() < 2;) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        qps[r] = hzc::test::RdmaObjects("qp", gettid());
        for (++counted; counted.load() < 2;) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
    for (auto &t : threads) {
      t.join();
    }
    for (uint32_t r = 0; r < 2; ++r) {
      if (init[r] != HCCL_SUCCESS || set[r] != HCCL_SUCCESS) {
        return ::testing::AssertionFailure()
               << "rank " << r << ": init " << init[r] << ", set " << set[r];
      }
    }
    return ::testing::AssertionSuccess();
  }
  void Destroy() {
    for (HcclComm &comm : c) {
      if (comm != nullptr) {
        EXPECT_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
        comm = nullptr;
      }
    }
  }
};

// RDMA objects made by user processes, by kind.
std::map<std::string, int> UserRdmaObjects() {
  std::map<std::string, int> out;
  for (const char *kind : {"mr", "qp", "cq", "pd"}) {
    out[kind] = hzc::test::RdmaUserObjects(kind);
  }
  return out;
}

bool RdmaTestable() {
  return hzc::test::RdmaLinksExpected() && hzc::test::RdmaUserObjects("mr") >= 0;
}

TEST_F(HcclApiTest, LinkInfoBeforeAndAfterTheFirstSet) {
  ExpectErrorLog("hzc_comm_link_info: ");
  hzc_link_info info;
  std::memset(&info, 0xff, sizeof(info));
  ASSERT_EQ(hzc_comm_link_info(comm_, &info), HCCL_SUCCESS);
  EXPECT_EQ(info.linked, 0U);
  EXPECT_EQ(info.rdma, 0U);
  EXPECT_STREQ(info.device, "");
  EXPECT_EQ(hzc_comm_link_info(nullptr, &info), HCCL_E_PTR);
  EXPECT_EQ(hzc_comm_link_info(comm_, nullptr), HCCL_E_PTR);
  EXPECT_EQ(hzc_comm_link_info(reinterpret_cast<HcclComm>(0x1234), &info), HCCL_E_PARA);
  Block b;
  ASSERT_EQ(b.Set(comm_, kPage), HCCL_SUCCESS);
  ASSERT_EQ(hzc_comm_link_info(comm_, &info), HCCL_SUCCESS);
  EXPECT_EQ(info.linked, 1U);
  if (info.rdma == 0) {  // kernel-only (a single rank may not need queue pairs)
    EXPECT_STREQ(info.device, "");
    EXPECT_EQ(info.port, 0U);
  }
  b.Release(nullptr, comm_);

  // Two ranks: RDMA links whenever there is a device.
  Pair pair;
  ASSERT_TRUE(pair.Make(kPage));
  for (HcclComm c : pair.c) {
    ASSERT_EQ(hzc_comm_link_info(c, &info), HCCL_SUCCESS);
    EXPECT_EQ(info.linked, 1U);
    EXPECT_EQ(info.rdma, hzc::test::RdmaLinksExpected() ? 1U : 0U);
    if (info.rdma != 0) {
      EXPECT_GT(std::strlen(info.device), 0U);
      EXPECT_LT(std::strlen(info.device), sizeof(info.device));
      EXPECT_GT(info.port, 0U);
    }
  }
  for (uint32_t r = 0; r < 2; ++r) {
    pair.blk[r].Release(nullptr, pair.c[r]);
  }
  pair.Destroy();
}

// With RDMA links each activation is a memory region of the communicator it was activated
// through; deactivation through any communicator and destruction release it.
TEST_F(HcclApiTest, ActivationsAreMemoryRegions) {
  if (!RdmaTestable()) {
    GTEST_SKIP() << "no RDMA device or no working `rdma resource show`";
  }
  const pid_t pid = getpid();
  const auto baseline = UserRdmaObjects();
  Pair pair;
  ASSERT_TRUE(pair.Make(4 * kPage));
  HcclComm other = pair.c[0];
  Block &a = pair.blk[0];
  Block b;
  ASSERT_EQ(b.Set(other, 2 * kPage), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 0);
  ASSERT_EQ(a.Activate(other), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 1);
  ASSERT_EQ(b.Activate(other), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 2);
  // comm_ has no links: deactivation through it drops the region @other holds.
  ASSERT_EQ(HcclCommDeactivateCommMemory(comm_, b.va), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 1);
  ASSERT_EQ(HcclCommActivateCommMemory(other, b.va, b.size, 0, b.handle, 0), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 2);
  ASSERT_EQ(HcclCommDeactivateCommMemory(other, b.va), HCCL_SUCCESS);
  EXPECT_EQ(hzc::test::RdmaObjects("mr", pid), 1);
  // Destroying the communicators releases their regions and links; the activation
  // (process-wide) stays until deactivated through another communicator.
  pair.Destroy();
  EXPECT_EQ(UserRdmaObjects(), baseline) << "RDMA objects left after HcclCommDestroy";
  a.Release(comm_, comm_);
  b.Release(nullptr, comm_);
  pair.blk[1].Release(nullptr, comm_);
}

// Two ranks of one communicator in one process (threads): RDMA between their activations;
// activations are process-wide, so each rank's listing shows the other's blocks too, but only
// the blocks a rank registered itself carry its key.
TEST_F(HcclApiTest, RdmaBetweenTwoRanksOfOneProcess) {
  if (!RdmaTestable()) {
    GTEST_SKIP() << "no RDMA device or no working `rdma resource show`";
  }
  ExpectErrorLog("hzc_comm_rdma_write: ");
  ExpectErrorLog("was not made by rank 1 on comm=");
  ExpectErrorLog("not inside one activation this process made on comm=");
  const auto baseline = UserRdmaObjects();
  Pair pair;
  ASSERT_TRUE(pair.Make(4 * kPage));
  HcclComm *c = pair.c;
  EXPECT_EQ(pair.qps[0], 1) << "rank 0: one queue pair per peer";
  EXPECT_EQ(pair.qps[1], 1) << "rank 1: one queue pair per peer";
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(pair.blk[r].Activate(c[r]), HCCL_SUCCESS);
    std::memset(pair.blk[r].va, 'a' + static_cast<int>(r), pair.blk[r].size);
  }
  EXPECT_EQ(hzc::test::RdmaObjects("mr", getpid()), 2);
  char *a = pair.blk[0].va, *b = pair.blk[1].va;
  hzc_link_info info{};
  ASSERT_EQ(hzc_comm_link_info(c[0], &info), HCCL_SUCCESS);
  ASSERT_EQ(info.rdma, 1U);

  ASSERT_EQ(hzc_comm_rdma_write(c[0], 1, a, b + kPage, 3 * kPage), HCCL_SUCCESS);
  EXPECT_EQ(b[0], 'b');
  EXPECT_EQ(b[kPage], 'a');
  EXPECT_EQ(b[4 * kPage - 1], 'a');
  std::memset(b, 'B', kPage);
  ASSERT_EQ(hzc_comm_rdma_read(c[0], 1, a + 100, b, 50), HCCL_SUCCESS);
  EXPECT_EQ(a[99], 'a');
  EXPECT_EQ(a[100], 'B');
  EXPECT_EQ(a[149], 'B');
  EXPECT_EQ(a[150], 'a');
  ASSERT_EQ(hzc_comm_rdma_read(c[1], 0, b, a + 100, 50), HCCL_SUCCESS);  // the other way
  EXPECT_EQ(b[0], 'B');

  // Rank 0's activation appears in rank 1's listing (same process) but carries rank 0's key.
  EXPECT_EQ(hzc_comm_rdma_write(c[0], 1, a, a + kPage, 64), HCCL_E_PARA);
  // Local memory must be registered through the communicator used.
  EXPECT_EQ(hzc_comm_rdma_write(c[1], 0, a, a + kPage, 64), HCCL_E_PARA);
  // The links still work after refused requests.
  ASSERT_EQ(hzc_comm_rdma_write(c[1], 0, b, a, 64), HCCL_SUCCESS);
  EXPECT_EQ(a[0], 'B');

  for (uint32_t r = 0; r < 2; ++r) {
    pair.blk[r].Release(c[r], c[r]);
  }
  pair.Destroy();
  EXPECT_EQ(UserRdmaObjects(), baseline) << "RDMA objects left after HcclCommDestroy";
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

TEST_F(HcclMultiProcessTest, TwoRanksOneServer) {
  hzc::test::RunRankMain(HZC_RANK_MAIN, 2, false, HCCL_SUCCESS);
}

TEST_F(HcclMultiProcessTest, FourRanksOneServer) {
  hzc::test::RunRankMain(HZC_RANK_MAIN, 4, false, HCCL_SUCCESS);
}

TEST_F(HcclMultiProcessTest, EightRanksOneServer) {
  hzc::test::RunRankMain(HZC_RANK_MAIN, 8, false, HCCL_SUCCESS);
}

// Two ranks; rank 1 calls HcclCommSetMemoryRange @delay_ms late. Exit statuses of both.
std::vector<int> LateRank(int delay_ms, int timeout_s, int retries0, int retries1) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = hzc::test::RootInfoToHex(root), t = std::to_string(timeout_s);
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
      "rank(s) 1 of 2 did not call HcclCommSetMemoryRange within HCCL_CONNECT_TIMEOUT=2s");
  // Rank 1 arrives 5 s late with a 2 s timeout: rank 0 times out. Then rank 1 arrives 3 s late:
  // rank 0 times out once, retries and meets it with 1 s of its wait left; the RDMA link setup
  // that follows has a full timeout of its own.
  EXPECT_EQ(LateRank(5000, 2, 0, 0)[0], HCCL_E_TIMEOUT);
  EXPECT_EQ(LateRank(3000, 2, 3, 0), (std::vector<int>{HCCL_SUCCESS, HCCL_SUCCESS}));
}

TEST_F(HcclMultiProcessTest, TwoServersAreNotSupported) {
  ExpectErrorLog("HcclCommSetMemoryRange: comm=");
  ExpectErrorLog("span 2 servers");
  hzc::test::RunRankMain(HZC_RANK_MAIN, 4, true, HCCL_E_NOT_SUPPORT);
}

}  // namespace
