// SPDX-License-Identifier: Apache-2.0
// Peer access with real processes: every rank reads every peer's activated memory through
// the library and writes into it; a rank killed mid-flow makes the others fail with
// HCCL_E_REMOTE and leaves no kernel state.
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "kernel_counters.h"
#include "rdma_resources.h"
#include "root_info_hex.h"
#include "shared_sync.h"

namespace {

using hzc::test::SharedSync;

class PeerAccessTest : public hzc::test::Test {
 protected:
  void SetUp() override {
    hzc::test::Test::SetUp();
    // Without the module the ranks use the memfd transport (HZC_TRANSPORT unset, auto or memfd):
    // these tests then run on the host, without the kernel's counters.
    module_ = access(hzc_device_path(), F_OK) == 0;
    const char *transport = std::getenv("HZC_TRANSPORT");
    if (!module_ && transport != nullptr && std::string(transport) == "kernel") {
      GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
    }
    if (module_) {
      baseline_ = hzc::test::KernelCounters();
    }
    sync_ = SharedSync::Create(&sync_fd_);
    ASSERT_NE(sync_, nullptr);
  }
  void TearDown() override {
    if (sync_ != nullptr) {
      SharedSync::Detach(sync_);
      close(sync_fd_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // root thread exit
    hzc::test::Test::TearDown();
  }

  // Start @nranks ranks in @mode; returns their pids.
  std::vector<pid_t> Start(const char *mode, uint32_t nranks, int victim = -1) {
    HcclRootInfo root;
    EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    const std::string hex = hzc::test::RootInfoToHex(root), n = std::to_string(nranks),
                      fd = std::to_string(sync_fd_), v = std::to_string(victim);
    std::vector<pid_t> pids;
    for (uint32_t r = 0; r < nranks; ++r) {
      const std::string me = std::to_string(r);
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
        execl(HZC_PEER_RANK, HZC_PEER_RANK, mode, hex.c_str(), n.c_str(), me.c_str(), fd.c_str(),
              victim >= 0 ? v.c_str() : nullptr, nullptr);
        _exit(127);
      }
      pids.push_back(pid);
    }
    return pids;
  }

  // Exit status of @pid (-signal if killed), waiting at most @timeout, then killing it.
  static int Wait(pid_t pid, std::chrono::seconds timeout = std::chrono::seconds(300)) {
    int status = 0;
    const bool done =
        SharedSync::WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                            std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!done) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "rank pid " << pid << " hung";
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  void ExpectBaseline() {
    if (module_) {
      hzc::test::ExpectKernelBaseline(baseline_);
    }
  }

  void Flow(uint32_t nranks) {
    // Each rank checks that memory outside or after its activation is refused.
    ExpectErrorLog("hzc_comm_peer_ptr: ");
    ExpectErrorLog("is not activated memory of rank");
    if (hzc::test::RdmaLinksExpected()) {  // and that a read across two activations is refused
      ExpectErrorLog("hzc_comm_rdma_read: ");
      ExpectErrorLog("is not inside one activation of rank");
    }
    for (pid_t pid : Start("flow", nranks)) {
      EXPECT_EQ(Wait(pid), 0) << "a rank failed (its stderr names the step)";
    }
    ExpectBaseline();
  }

  void KillOne(uint32_t nranks, uint32_t victim) {
    ExpectErrorLog(fmt::format("hzc_comm_peer_ptr: rank {} (pid", victim));
    ExpectErrorLog(
        fmt::format("hzc_comm_peer_activations: cannot list the ranges of rank {}", victim));
    const std::vector<pid_t> pids = Start("kill", nranks, static_cast<int>(victim));
    // Every rank has activated its memory; the survivors have read the victim's.
    ASSERT_TRUE(SharedSync::WaitFor([&] { return sync_->arrived[1].load() >= nranks - 1; },
                                    std::chrono::milliseconds(300'000)));
    kill(pids[victim], SIGKILL);
    EXPECT_EQ(Wait(pids[victim]), -SIGKILL);
    sync_->flags[0].store(1);
    for (uint32_t r = 0; r < nranks; ++r) {
      if (r != victim) {
        EXPECT_EQ(Wait(pids[r]), 0) << "rank " << r << " (its stderr names the step)";
      }
    }
    ExpectBaseline();
  }

  bool module_ = false;
  std::map<std::string, long> baseline_;
  SharedSync *sync_ = nullptr;
  int sync_fd_ = -1;
};

TEST_F(PeerAccessTest, TwoRanksSeeEachOther) {
  Flow(2);
}

TEST_F(PeerAccessTest, FourRanksSeeEachOther) {
  Flow(4);
}

TEST_F(PeerAccessTest, EightRanksSeeEachOther) {
  Flow(8);
}

TEST_F(PeerAccessTest, KilledRankGivesRemoteErrorAndNoKernelState) {
  KillOne(4, 2);
}

TEST_F(PeerAccessTest, KilledRootRankGivesRemoteError) {
  KillOne(2, 0);
}

// Activation beyond RLIMIT_MEMLOCK (without CAP_IPC_LOCK) is HCCL_E_MEMORY with a hint and
// changes nothing; with RDMA links the registration pins the activation too, which the hint says.
TEST_F(PeerAccessTest, MemlockLimitIsMemoryErrorWithHint) {
  if (!module_) {
    GTEST_SKIP() << "the memfd transport pins nothing (README: Without the kernel module)";
  }
  ExpectErrorLog("HcclCommActivateCommMemory: ");
  ExpectErrorLog("RLIMIT_MEMLOCK");
  if (hzc::test::RdmaLinksExpected()) {
    ExpectErrorLog("counts twice against RLIMIT_MEMLOCK");
  }
  for (pid_t pid : Start("memlock", 2)) {
    EXPECT_EQ(Wait(pid), 0) << "a rank failed (its stderr names the step)";
  }
  ExpectBaseline();
}

}  // namespace
