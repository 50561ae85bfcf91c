// SPDX-License-Identifier: Apache-2.0
// The collectives with real processes (tests/vm/coll/coll_rank.cpp) against the real module:
// 2, 3, 4 and 8 ranks, each protocol (inline, staging, zero-copy), and the fault cases (the
// staging ones at the default HZC_INLINE_MAX, so their small calls go inline); the exchanges
// (Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll(V/VC)) with 2, 3 and 4 ranks.
#include <hccl/hccl.h>
#include <hzc/hzc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hzc_test.h"
#include "root_info_hex.h"

namespace {

// Exit status of each rank (-signal when killed); @wrapper: a program (and its arguments) that
// runs each rank program (setpriv).
std::vector<int> RunRanks(uint32_t n, const char *scenario, const char *mode,
                          const std::map<std::string, std::string> &env = {},
                          const std::vector<std::string> &wrapper = {}) {
  HcclRootInfo root;
  EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
  const std::string hex = hzc::test::RootInfoToHex(root), nranks = std::to_string(n);
  std::vector<pid_t> pids;
  for (uint32_t r = 0; r < n; ++r) {
    const std::string me = std::to_string(r);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("HCCL_BUFFSIZE", "1", 1);
      setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
      setenv("HCCL_EXEC_TIMEOUT", "60", 1);
      for (const auto &[k, v] : env) {
        setenv(k.c_str(), v.c_str(), 1);
      }
      std::vector<std::string> args = wrapper;
      for (const std::string &a : {std::string(HZC_COLL_RANK), hex, nranks, me,
                                   std::string(scenario), std::string(mode)}) {
        args.push_back(a);
      }
      std::vector<char *> argv;
      for (std::string &a : args) {
        argv.push_back(a.data());
      }
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> out;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    out.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
  return out;
}

// The zero-copy fault tests make small calls: without this they would go inline.
const std::map<std::string, std::string> kNoInline = {{"HZC_INLINE_MAX", "0"}};

class CollTest : public hzc::test::Test {
 protected:
  static bool HaveModule() { return access(hzc_device_path(), F_OK) == 0; }
  // Zero-copy needs a peer transport: hzc.ko, or else the memfd transport (HZC_TRANSPORT unset,
  // auto or memfd), which runs these tests on a host without the module.
  static bool HaveTransport() {
    const char *t = std::getenv("HZC_TRANSPORT");
    return HaveModule() || t == nullptr || std::string(t) != "kernel";
  }
};

// How a matrix runs: the ranks' buffers (coll_rank.cpp's MODE) and HZC_INLINE_MAX, which
// forces a protocol at every size: 0 turns the inline protocol off (staging, zero-copy); 1 MiB
// sends every call inline that fits (larger ones go zero-copy). @path is what the library's
// debug log says the calls take ("takes the ... path"); a matrix checks that its protocol ran.
struct Protocol {
  const char *name;
  const char *buffers;
  const char *inline_max;
  const char *path;
};

constexpr Protocol kProtocols[] = {{"staging", "staging", "0", "staging"},
                                   {"zerocopy", "zerocopy", "0", "zero-copy"},
                                   {"inline", "zerocopy", "1048576", "inline"}};

// The path each call of the ranks' debug logs in @dir took, with its kind and input bytes per
// rank ("call 7 (AllReduce, 4096 bytes in) takes the zero-copy path").
struct Taken {
  std::string kind;
  uint64_t bytes;
  std::string path;
};
std::vector<Taken> CallsTaken(const std::string &dir) {
  std::vector<Taken> calls;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      char kind[32] = {};
      char path[32] = {};
      unsigned long long seq = 0, bytes = 0;
      const size_t at = line.find("collectives: call ");
      if (at != std::string::npos &&
          std::sscanf(line.c_str() + at,
                      "collectives: call %llu (%31[^,], %llu bytes in) takes the %31s", &seq, kind,
                      &bytes, path) == 4) {
        calls.push_back({kind, bytes, path});
      }
    }
  }
  return calls;
}

// Run @scenario on @n ranks with @buffers and @env, logging at debug level; the calls they
// logged.
std::vector<Taken> RunLogged(uint32_t n, const char *scenario, const char *buffers,
                             std::map<std::string, std::string> env) {
  char dir[] = "/tmp/hzc-coll-paths-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  env["HZC_LOG"] = "DEBUG";
  env["HZC_LOG_FILE"] = std::string(dir) + "/rank.%p";
  EXPECT_EQ(RunRanks(n, scenario, buffers, env), std::vector<int>(n, 0));
  auto calls = CallsTaken(dir);
  std::filesystem::remove_all(dir);
  return calls;
}

// Run @scenario on @n ranks with @p; how many calls took each path.
std::map<std::string, int> RunProtocol(uint32_t n, const char *scenario, const Protocol &p,
                                       std::map<std::string, std::string> env = {}) {
  env.emplace("HZC_INLINE_MAX", p.inline_max);
  env.emplace("HZC_ZERO_COPY_MIN", "0");  // inline wherever it fits: the protocol is forced
  std::map<std::string, int> paths;
  for (const Taken &t : RunLogged(n, scenario, p.buffers, env)) {
    ++paths[t.path];
  }
  return paths;
}

class CollMatrixTest : public CollTest,
                       public ::testing::WithParamInterface<std::tuple<uint32_t, Protocol>> {
 protected:
  void Run(const char *scenario) {
    const auto [n, p] = GetParam();
    if (std::string(p.buffers) == "zerocopy" && !HaveTransport()) {
      GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
    }
    auto paths = RunProtocol(n, scenario, p);
    EXPECT_GT(paths[p.path], 0) << "no call took the " << p.path << " path";
    if (std::string(p.inline_max) == "0") {
      EXPECT_EQ(paths["inline"], 0) << "HZC_INLINE_MAX=0, yet calls went inline";
    }
  }
};

std::string MatrixName(const ::testing::TestParamInfo<std::tuple<uint32_t, Protocol>> &info) {
  return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param).name;
}

// Every collective, type and op, from 1 element to ~3 MiB, in place or not, over each protocol.
TEST_P(CollMatrixTest, EveryCollectiveTypeOpAndSize) {
  Run("matrix");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollMatrixTest,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u, 8u),
                                            ::testing::ValuesIn(kProtocols)),
                         MatrixName);

// Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll, AlltoAllV, AlltoAllVC: every type
// (and op), counts 0 to above the staging area, in place, over each protocol.
class CollExchangeTest : public CollMatrixTest {};

TEST_P(CollExchangeTest, EveryExchangeTypeOpAndSize) {
  Run("xmatrix");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollExchangeTest,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u),
                                            ::testing::ValuesIn(kProtocols)),
                         MatrixName);

// The inline protocol's threshold (HZC_INLINE_MAX=4096): inputs of an element less, exactly
// the threshold and an element more, on both kinds of buffers; an exchange where one rank's
// input fits and another's does not.
TEST_F(CollTest, InlineThresholdEdges) {
  for (const Protocol &p : {Protocol{"staging", "staging", "4096", "staging"},
                            Protocol{"zerocopy", "zerocopy", "4096", "zero-copy"}}) {
    if (std::string(p.buffers) == "zerocopy" && !HaveTransport()) {
      continue;
    }
    auto paths = RunProtocol(3, "edges", p);
    EXPECT_GT(paths["inline"], 0) << p.name;
    EXPECT_GT(paths[p.path], 0) << p.name;
  }
}

// HZC_ZERO_COPY_MIN=1024 with HZC_INLINE_MAX=4096: on activated buffers, inputs of 1024 bytes
// or more per rank go zero-copy and smaller ones inline (but a Broadcast's 256 bytes beside
// its root's line, always inline); on plain buffers everything up to 4096 goes inline.
TEST_F(CollTest, ZeroCopyThresholdEdges) {
  for (const char *buffers : {"staging", "zerocopy"}) {
    const bool zero_copy = std::string(buffers) == "zerocopy";
    if (zero_copy && !HaveTransport()) {
      GTEST_SKIP() << "the plain buffers passed; activated ones need " << hzc_device_path()
                   << " (absent, HZC_TRANSPORT=kernel)";
    }
    std::map<std::string, int> seen;  // path, and "between" for the calls of 1024-4096 bytes
    for (const Taken &t : RunLogged(3, "edges", buffers,
                                    {{"HZC_INLINE_MAX", "4096"}, {"HZC_ZERO_COPY_MIN", "1024"}})) {
      if (t.kind != "AllGather" && t.kind != "Broadcast" && t.kind != "ReduceScatter" &&
          t.kind != "AllReduce") {
        continue;  // the exchanges keep HZC_INLINE_MAX alone
      }
      const bool between = t.bytes >= 1024 && t.bytes <= 4096;
      const char *want = t.bytes > 4096 ? (zero_copy ? "zero-copy" : "staging")
                         : between      ? (zero_copy ? "zero-copy" : "inline")
                                        : "inline";
      EXPECT_EQ(t.path, want) << buffers << " " << t.kind << " " << t.bytes << " bytes";
      ++seen[t.path];
      seen["between"] += between ? 1 : 0;
    }
    EXPECT_GT(seen["inline"], 0) << buffers;
    EXPECT_GT(seen["between"], 0) << buffers << ": no call of 1024-4096 bytes";
    EXPECT_GT(seen[zero_copy ? "zero-copy" : "staging"], 0) << buffers;
  }
}

TEST_F(CollTest, MismatchedExchangesFailEverywhereAndChangeNothing) {
  ExpectErrorLog("ranks disagree on call");
  EXPECT_EQ(RunRanks(3, "xmismatch", "staging"), std::vector<int>(3, 0));
}

TEST_F(CollTest, MismatchedExchangesZeroCopy) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("ranks disagree on call");
  EXPECT_EQ(RunRanks(3, "xmismatch", "zerocopy", kNoInline), std::vector<int>(3, 0));
}

// One rank's bad arguments to an exchange: it gets its own code at once, the others
// HCCL_E_PARA at once, and the communicator still works.
TEST_F(CollTest, BadExchangeArgumentsAreRefusedOnEveryRank) {
  for (const char *name : {"HcclAlltoAllV: ", "HcclScatter: ", "HcclAlltoAll: ", "HcclReduce: ",
                           "HcclReduceScatterV: ", "HcclAllGatherV: ", "HcclAlltoAllVC: "}) {
    ExpectErrorLog(name);
  }
  EXPECT_EQ(RunRanks(3, "xrefuse", "staging"), std::vector<int>(3, 0));
}

TEST_F(CollTest, LargeBuffersStaging) {
  EXPECT_EQ(RunRanks(2, "large", "staging", {{"HCCL_BUFFSIZE", "8"}}), std::vector<int>(2, 0));
}

TEST_F(CollTest, LargeBuffersZeroCopy) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  EXPECT_EQ(RunRanks(2, "large", "zerocopy"), std::vector<int>(2, 0));
}

// Small Broadcasts whose root returns at once, among calls that wait, from every root; a root
// that runs ahead of the others as far as it may (7 calls).
TEST_F(CollTest, SmallBroadcastRootsRunAhead) {
  EXPECT_EQ(RunRanks(3, "eager", "staging"), std::vector<int>(3, 0));
  if (HaveTransport()) {
    EXPECT_EQ(RunRanks(2, "eager", "zerocopy"), std::vector<int>(2, 0));
  }
}

// HCCL's one-sided calls between the ranks of one server, through the peer transport
// (onesided_local_rank.cpp): pairs, what a queued batch holds, global memory, and a peer that
// deactivates its memory.
TEST_F(CollTest, OneSidedTransfersInsideAServer) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclRegisterMem: addr=");
  ExpectErrorLog("HcclEnableMemAccess: remoteMemDesc: rank");
  ExpectErrorLog("HcclBatchPut: desc[0]");
  ExpectErrorLog("HcclDeregisterMem: desc: registration");
  ExpectErrorLog("HcclDeregisterMem: desc: a batch of this rank that is still queued");
  ExpectErrorLog("HcclDisableMemAccess: remoteMemDesc: a batch of this rank that is still queued");
  ExpectErrorLog("HcclCommDestroy: comm: 2 global memory handle(s) bound");
  EXPECT_EQ(RunRanks(2, "onesidedlocal", "zerocopy"), std::vector<int>(2, 0));
  EXPECT_EQ(RunRanks(4, "onesidedlocal", "zerocopy"), std::vector<int>(4, 0));
}

TEST_F(CollTest, MismatchedCallsFailEverywhereAndChangeNothing) {
  ExpectErrorLog("ranks disagree on call");
  ExpectErrorLog("refused call");  // the call after a small Broadcast with two roots
  EXPECT_EQ(RunRanks(3, "mismatch", "staging"), std::vector<int>(3, 0));
}

// The memfd transport where the ranks may not take each other's descriptors with pidfd_getfd
// (Yama's ptrace_scope=1 and no CAP_SYS_PTRACE, as for a user's ranks on Ubuntu): with the
// hand-off over the ranks' sockets off they fail, with it (the default) the zero-copy matrix
// passes. Needs root and Yama (the guest's kernel); the ranks run under setpriv without the
// capability.
TEST_F(CollTest, MemfdTransportWithoutPtraceRights) {
  const char *scope_file = "/proc/sys/kernel/yama/ptrace_scope";
  std::ifstream in(scope_file);
  std::string scope;
  if (geteuid() != 0 || !(in >> scope) || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root, Yama (" << scope_file << ") and /usr/bin/setpriv";
  }
  auto set_scope = [&](const std::string &v) {
    std::ofstream out(scope_file);
    out << v << "\n";
    return static_cast<bool>(out.flush());
  };
  if (scope != "1" && !set_scope("1")) {
    GTEST_SKIP() << "cannot set " << scope_file << " to 1 (it was " << scope << ")";
  }
  const std::vector<std::string> no_ptrace = {"/usr/bin/setpriv", "--inh-caps=-sys_ptrace",
                                              "--bounding-set=-sys_ptrace", "--"};
  std::map<std::string, std::string> env = {{"HZC_TRANSPORT", "memfd"}, {"HZC_FD_HANDOFF", "off"}};
  ExpectErrorLog("pidfd_getfd");
  const std::vector<int> refused = RunRanks(2, "matrix", "zerocopy", env, no_ptrace);
  env.erase("HZC_FD_HANDOFF");
  const std::vector<int> handed = RunRanks(2, "matrix", "zerocopy", env, no_ptrace);
  if (scope != "1") {
    set_scope(scope);
  }
  EXPECT_NE(refused, std::vector<int>(2, 0)) << "pidfd_getfd between the ranks was not refused";
  EXPECT_EQ(handed, std::vector<int>(2, 0));
}

TEST_F(CollTest, MismatchedCallsZeroCopy) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("ranks disagree on call");
  EXPECT_EQ(RunRanks(3, "mismatch", "zerocopy", kNoInline), std::vector<int>(3, 0));
}

TEST_F(CollTest, AbsentRankTimesOut) {
  ExpectErrorLog("HcclAllReduce: ");
  const auto rc = RunRanks(3, "absent", "staging", {{"HCCL_EXEC_TIMEOUT", "1"}});
  EXPECT_EQ(rc, (std::vector<int>{HCCL_E_TIMEOUT, HCCL_E_TIMEOUT, 0}));
}

TEST_F(CollTest, DeadRankIsAnErrorNotAHang) {
  ExpectErrorLog("HcclAllReduce: ");
  const auto rc = RunRanks(3, "die", "staging");
  EXPECT_EQ(rc, (std::vector<int>{HCCL_E_REMOTE, -SIGKILL, HCCL_E_REMOTE}));
}

// The same on the zero-copy path: the survivors' mappings of the dead rank's memory are no help.
TEST_F(CollTest, DeadRankZeroCopyIsAnErrorNotAHang) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclAllReduce: ");
  const auto rc = RunRanks(3, "die", "zerocopy", kNoInline);
  EXPECT_EQ(rc, (std::vector<int>{HCCL_E_REMOTE, -SIGKILL, HCCL_E_REMOTE}));
}

// A rank whose own arguments are bad posts the call as refused: the others do not wait for
// HCCL_EXEC_TIMEOUT (60 s here) but fail the call at once naming it, and the communicator
// still works.
TEST_F(CollTest, BadArgumentOnOneRankFailsTheOthersAtOnce) {
  ExpectErrorLog("HcclAllReduce: ");
  EXPECT_EQ(RunRanks(3, "refuse", "staging"),
            (std::vector<int>{HCCL_E_PARA, HCCL_E_PARA, HCCL_E_PARA}));
  EXPECT_EQ(RunRanks(3, "refusenull", "staging"),
            (std::vector<int>{HCCL_E_PARA, HCCL_E_PARA, HCCL_E_PTR}));
}

// As the first call there is no control area to abort (it is opened by every rank together):
// the others time out opening it.
TEST_F(CollTest, BadArgumentInTheFirstCallTimesTheOthersOut) {
  ExpectErrorLog("HcclAllReduce: ");
  EXPECT_EQ(RunRanks(3, "refusefirst", "staging", {{"HCCL_CONNECT_TIMEOUT", "2"}}),
            (std::vector<int>{HCCL_E_TIMEOUT, HCCL_E_PARA, HCCL_E_TIMEOUT}));
}

TEST_F(CollTest, PeerMemoryDeactivatedDuringACallIsAnError) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclAllGather: ");
  ExpectErrorLog("HcclCommDeactivateCommMemory: ");  // the rank's clean-up, already done
  const auto rc = RunRanks(2, "revoke", "zerocopy");
  EXPECT_EQ(rc, (std::vector<int>{HCCL_E_REMOTE, HCCL_E_REMOTE}));
}

// The same for a peer that writes: the ranks of a Broadcast copy into each other's buffers.
TEST_F(CollTest, PeerMemoryDeactivatedWhileAPeerWritesIntoItIsAnError) {
  if (!HaveTransport()) {
    GTEST_SKIP() << hzc_device_path() << " is absent and HZC_TRANSPORT=kernel";
  }
  ExpectErrorLog("HcclBroadcast: ");
  ExpectErrorLog("HcclCommDeactivateCommMemory: ");
  const auto rc = RunRanks(2, "revokewrite", "zerocopy");
  EXPECT_EQ(rc, (std::vector<int>{HCCL_E_REMOTE, HCCL_E_REMOTE}));
}

}  // namespace
