// SPDX-License-Identifier: Apache-2.0
// RDMA links at the HCCL API level, with ranks as real processes (hzc-hccl-rdma-rank, see
// hccl_rdma_rank.cpp): links come up in the first HcclCommSetMemoryRange, every rank
// RDMA-WRITEs into every peer's activated memory and RDMA-READs it back
// (hzc_comm_rdma_write / hzc_comm_rdma_read); activations are memory regions; a missing, a
// killed and a misconfigured rank; argument errors; no RDMA object or kernel state is left.
//
// HcclRdmaTest needs an RDMA device (soft-RoCE rxe0 under scripts/vm-run) and skips without
// one. HcclKernelOnlyTest needs a machine WITHOUT an RDMA device (scripts/vm-run --no-rxe;
// scripts/check boots such a guest for it) and skips when there is one.
#include <fcntl.h>
#include <fmt/format.h>
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hccl_rdma_util.h"
#include "hzc_test.h"
#include "kernel_counters.h"
#include "shared_sync.h"

namespace {

using hzc::test::RdmaDevices;
using hzc::test::SharedSync;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The flag a failing rank sets (hccl_rdma_rank.cpp).
constexpr int kAbortFlag = SharedSync::kSlots - 1;

std::string Hex(const HcclRootInfo &root) {
  std::string out;
  for (char c : root.internal) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return out;
}

std::string Join(const std::vector<std::string> &v) {
  std::string out;
  for (const auto &s : v) {
    out += (out.empty() ? "" : ", ") + s;
  }
  return out;
}

// How a rank ended, and everything it wrote to stderr.
struct RankResult {
  int status = 0;  // exit status; -signal when killed; -1000 when it hung
  std::string log;

  // The rank's "FAIL rank R: ..." lines, for the test's message.
  std::string Failures() const {
    std::istringstream lines(log);
    std::string out;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("FAIL ", 0) == 0) {
        out += line + "\n";
      }
    }
    return out;
  }
  // Lines of the log that contain @text and @also, but not @unless.
  int Count(const std::string &text, const std::string &also = "",
            const std::string &unless = "\n") const {
    std::istringstream lines(log);
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      n += line.find(text) != std::string::npos && line.find(also) != std::string::npos &&
                   line.find(unless) == std::string::npos
               ? 1
               : 0;
    }
    return n;
  }
};

class HcclRdmaBase : public hzc::test::Test {
 protected:
  // Environment of one rank: NAME=VALUE entries.
  using EnvFn = std::function<std::vector<std::string>(uint32_t rank)>;

  void SetUp() override {
    hzc::test::Test::SetUp();
    if (access(hzc_device_path(), F_OK) != 0) {
      GTEST_SKIP() << hzc_device_path() << " is absent: hzc.ko is not loaded";
    }
    baseline_ = hzc::test::KernelCounters();
    sync_ = SharedSync::Create(&sync_fd_);
    ASSERT_NE(sync_, nullptr);
  }

  void TearDown() override {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (!reaped_[i]) {
        kill(pids_[i], SIGKILL);
        waitpid(pids_[i], nullptr, 0);
      }
    }
    for (int fd : logs_) {
      close(fd);
    }
    if (sync_ != nullptr) {
      SharedSync::Detach(sync_);
      close(sync_fd_);
    }
    std::this_thread::sleep_for(milliseconds(100));  // root thread exit
    if (!IsSkipped() && !baseline_.empty()) {
      hzc::test::ExpectKernelBaseline(baseline_);  // ranges, pins, domains all gone
    }
    hzc::test::Test::TearDown();
  }

  // Start @nranks ranks: hzc-hccl-rdma-rank MODE ROOT NRANKS RANK SYNC_FD ARGS..., each with
  // HCCL_CONNECT_TIMEOUT=@connect_timeout, no HZC_RDMA_DEVICE and no HZC_LOG unless @env
  // sets them, and its stderr in a memfd of its own.
  void Start(const std::string &mode, uint32_t nranks, const std::vector<std::string> &args,
             const EnvFn &env = {}, int connect_timeout = 120) {
    HcclRootInfo root;
    ASSERT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    const std::string hex = Hex(root), n = std::to_string(nranks), fd = std::to_string(sync_fd_),
                      timeout = std::to_string(connect_timeout);
    for (uint32_t r = 0; r < nranks; ++r) {
      const int log = memfd_create("hzc-rank-stderr", MFD_CLOEXEC);
      ASSERT_GE(log, 0);
      logs_.push_back(log);
      std::vector<std::string> argv = {HZC_HCCL_RDMA_RANK, mode, hex, n, std::to_string(r), fd};
      argv.insert(argv.end(), args.begin(), args.end());
      const std::vector<std::string> vars = env ? env(r) : std::vector<std::string>{};
      std::vector<char *> cargv;
      for (auto &a : argv) {
        cargv.push_back(a.data());
      }
      cargv.push_back(nullptr);
      std::fflush(nullptr);
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        unsetenv("HZC_RDMA_DEVICE");
        unsetenv("HZC_LOG");
        setenv("HCCL_CONNECT_TIMEOUT", timeout.c_str(), 1);
        for (const auto &kv : vars) {
          const size_t eq = kv.find('=');
          setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
        }
        if (dup2(log, 2) < 0) {
          _exit(126);
        }
        execv(cargv[0], cargv.data());
        _exit(127);
      }
      pids_.push_back(pid);
      reaped_.push_back(false);
      status_.push_back(0);
    }
  }

  // Reap rank @i by @deadline, killing it if it is still running then.
  void Reap(size_t i, std::chrono::steady_clock::time_point deadline) {
    if (reaped_[i]) {
      return;
    }
    int status = 0;
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!SharedSync::WaitFor([&] { return waitpid(pids_[i], &status, WNOHANG) == pids_[i]; },
                             std::max(left, milliseconds(0)))) {
      kill(pids_[i], SIGKILL);
      waitpid(pids_[i], &status, 0);
      status_[i] = -1000;
    } else {
      status_[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    reaped_[i] = true;
  }

  // Wait for every rank (at most @limit in all) and collect their results; their stderr is
  // copied to ours, so the base fixture examines what the library logged in them.
  std::vector<RankResult> Finish(seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<RankResult> out(pids_.size());
    for (size_t i = 0; i < pids_.size(); ++i) {
      Reap(i, deadline);
      out[i].status = status_[i];
      char buf[4096];
      ssize_t n;
      off_t off = 0;
      while ((n = pread(logs_[i], buf, sizeof(buf), off)) > 0) {
        out[i].log.append(buf, static_cast<size_t>(n));
        off += n;
      }
      if (!out[i].log.empty() && write(2, out[i].log.data(), out[i].log.size()) < 0) {
        ADD_FAILURE() << "cannot copy the log of rank " << i;
      }
    }
    return out;
  }

  static std::string Describe(int status) {
    if (status == -1000) {
      return "hung (killed at the time limit)";
    }
    return status < 0 ? fmt::format("killed by signal {}", -status)
                      : fmt::format("exit status {}", status);
  }

  // Every rank exited 0.
  static void ExpectAllPassed(const std::vector<RankResult> &results) {
    for (size_t r = 0; r < results.size(); ++r) {
      EXPECT_EQ(results[r].status, 0) << "rank " << r << ": " << Describe(results[r].status) << "\n"
                                      << results[r].Failures();
    }
  }

  void RunAll(const std::string &mode, uint32_t nranks, const std::vector<std::string> &args,
              seconds limit, const EnvFn &env = {}, int connect_timeout = 120) {
    Start(mode, nranks, args, env, connect_timeout);
    if (HasFatalFailure()) {
      return;
    }
    ExpectAllPassed(Finish(limit));
  }

  std::map<std::string, long> baseline_;
  SharedSync *sync_ = nullptr;
  int sync_fd_ = -1;
  std::vector<pid_t> pids_;
  std::vector<bool> reaped_;
  std::vector<int> status_;
  std::vector<int> logs_;
};

class HcclRdmaTest : public HcclRdmaBase {
 protected:
  void SetUp() override {
    HcclRdmaBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    if (RdmaDevices().empty()) {
      GTEST_SKIP() << "no RDMA device (/sys/class/infiniband is empty): these tests need one "
                      "(scripts/vm-run sets up soft-RoCE rxe0 on lo unless --no-rxe)";
    }
  }
};

class HcclKernelOnlyTest : public HcclRdmaBase {
 protected:
  void SetUp() override {
    HcclRdmaBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    if (const auto devices = RdmaDevices(); !devices.empty()) {
      GTEST_SKIP() << "an RDMA device is present (" << Join(devices)
                   << "): the kernel-only tests need a machine without one "
                      "(scripts/vm-run --no-rxe)";
    }
  }
};

// Every rank writes into its slot of every peer's activated memory and reads it back.
TEST_F(HcclRdmaTest, TwoRanksWriteAndReadEveryPeer) {
  RunAll("data", 2, {"0x100000", "0"}, seconds(180));  // 1 MiB per peer
}

TEST_F(HcclRdmaTest, FourRanksWriteAndReadEveryPeerFromThreads) {
  RunAll("data", 4, {"0x40000", "1"}, seconds(240));  // 256 KiB per peer, a thread per peer
}

TEST_F(HcclRdmaTest, EightRanksWriteAndReadEveryPeer) {
  RunAll("data", 8, {"0x10000", "0"}, seconds(300));  // 64 KiB per peer
}

// Activate registers a memory region and Deactivate removes it (rdma resource show mr); a
// transfer into memory the peer deactivated, or spanning two activations, is HCCL_E_PARA and
// does not break the link; memory re-activated at the same address is reachable again.
TEST_F(HcclRdmaTest, ActivationsAreMemoryRegions) {
  ExpectErrorLog("hzc_comm_rdma_write: ");
  ExpectErrorLog("hzc_comm_rdma_read: ");
  RunAll("mr", 2, {}, seconds(180));
}

// NULL pointers are HCCL_E_PTR; own rank, out-of-range rank, size 0, memory not activated on
// either side (or activated through another communicator), foreign or destroyed comm are
// HCCL_E_PARA; no links yet is HCCL_E_UNAVAIL. None of the refusals breaks the link.
TEST_F(HcclRdmaTest, BadArgumentsGiveDocumentedCodes) {
  ExpectErrorLog("hzc_comm_rdma_write: ");
  ExpectErrorLog("hzc_comm_rdma_read: ");
  ExpectErrorLog("hzc_comm_link_info: ");
  HcclRootInfo second;
  ASSERT_EQ(HcclGetRootInfo(&second), HCCL_SUCCESS);
  RunAll("args", 2, {Hex(second)}, seconds(180));
}

// Rank 2 of 3 calls HcclCommSetMemoryRange only after the others failed with
// HCCL_E_TIMEOUT (naming it) holding no QP, CQ, MR or PD; then all three retry and link.
// Rank 1 arrives a second after rank 0, so it still waits when rank 0 times out: it must
// get HCCL_E_TIMEOUT naming rank 2 as well, not an error about rank 0 leaving.
TEST_F(HcclRdmaTest, MissingRankTimesOutWithoutLeftoversThenRetryWorks) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("rank(s) 2 of 3");
  // The retry must set up the links within the same timeout, under emulation too.
  RunAll("missing", 3, {"2"}, seconds(180), {}, 8);
}

// Rank 1 of 3 is killed once links are up: transfers to it fail (HCCL_E_REMOTE or
// HCCL_E_ROCE_TRANSFER) instead of hanging, again on a second attempt, and the survivors'
// tear-down and HcclCommDestroy return promptly leaving no RDMA objects. (The domain breaks
// when a member dies, so the survivors are not expected to reach each other afterwards.)
TEST_F(HcclRdmaTest, KilledRankFailsTransfersAndDestroyIsPrompt) {
  ExpectErrorLog("hzc_comm_rdma_write: ");
  ExpectErrorLog("hzc_comm_rdma_read: ");
  constexpr uint32_t kVictim = 1;
  Start("kill", 3, {std::to_string(kVictim)});
  ASSERT_FALSE(HasFatalFailure());
  SharedSync::WaitFor(
      [&] { return sync_->flags[1].load() != 0 || sync_->flags[kAbortFlag].load() != 0; },
      milliseconds(240'000));
  EXPECT_NE(sync_->flags[1].load(), 0U)
      << "the victim never reported its links up (see the ranks' failures)";
  kill(pids_[kVictim], SIGKILL);
  Reap(kVictim, std::chrono::steady_clock::now() + seconds(30));
  sync_->flags[0].store(1);
  const auto results = Finish(seconds(180));
  for (uint32_t r = 0; r < results.size(); ++r) {
    if (r == kVictim) {
      EXPECT_EQ(results[r].status, -SIGKILL) << "victim: " << Describe(results[r].status) << "\n"
                                             << results[r].Failures();
    } else {
      EXPECT_EQ(results[r].status, 0) << "rank " << r << ": " << Describe(results[r].status) << "\n"
                                      << results[r].Failures();
    }
  }
}

// HZC_RDMA_DEVICE names no device: the first HcclCommSetMemoryRange is HCCL_E_NOT_FOUND, the
// range is not set, and no RDMA object is left.
TEST_F(HcclRdmaTest, WrongDeviceIsNotFound) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("nosuch0");
  RunAll(
      "wrongdev", 2, {}, seconds(120),
      [](uint32_t) { return std::vector<std::string>{"HZC_RDMA_DEVICE=nosuch0"}; }, 60);
}

// Only rank 0 names a wrong device: it gets HCCL_E_NOT_FOUND and rank 1 fails too, without
// waiting for HCCL_CONNECT_TIMEOUT, and holds no RDMA object afterwards (it made its queue
// pairs before it learnt of rank 0's failure).
TEST_F(HcclRdmaTest, WrongDeviceOnOneRankFailsTheOthersEarly) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("nosuch0");
  RunAll(
      "wrongdev", 2, {}, seconds(120),
      [](uint32_t rank) {
        return rank == 0 ? std::vector<std::string>{"HZC_RDMA_DEVICE=nosuch0"}
                         : std::vector<std::string>{};
      },
      60);
}

// Without an RDMA device links are kernel-only: HcclCommSetMemoryRange succeeds,
// hzc_comm_link_info reports rdma=0, the RDMA calls are HCCL_E_UNAVAIL, peer access works,
// and the library says so in one INFO line per process (two communicators here).
TEST_F(HcclKernelOnlyTest, LinksAreKernelOnly) {
  ExpectErrorLog("hzc_comm_rdma_write: ");
  ExpectErrorLog("hzc_comm_rdma_read: ");
  HcclRootInfo second;
  ASSERT_EQ(HcclGetRootInfo(&second), HCCL_SUCCESS);
  Start("kernel", 2, {Hex(second)},
        [](uint32_t) { return std::vector<std::string>{"HZC_LOG=INFO"}; });
  ASSERT_FALSE(HasFatalFailure());
  const auto results = Finish(seconds(120));
  ExpectAllPassed(results);
  for (size_t r = 0; r < results.size(); ++r) {
    // The error lines of the refused RDMA calls say "kernel-only" too: they do not count.
    EXPECT_TRUE(results[r].Count("kernel-only", "", " hzc ERROR ") == 1 &&
                results[r].Count("kernel-only", " hzc INFO ") == 1)
        << "rank " << r << ": want exactly one line about kernel-only links, at INFO level, for "
        << "the process (two communicators); its log:\n"
        << results[r].log;
  }
}

// A named device that is absent is an error, not a silent fall-back to kernel-only links.
TEST_F(HcclKernelOnlyTest, NamedDeviceIsNotFound) {
  ExpectErrorLog("HcclCommSetMemoryRange: ");
  ExpectErrorLog("rxe0");
  RunAll(
      "wrongdev", 2, {}, seconds(120),
      [](uint32_t) { return std::vector<std::string>{"HZC_RDMA_DEVICE=rxe0"}; }, 60);
}

}  // namespace
