// SPDX-License-Identifier: Apache-2.0
// Communicators that span servers, over TCP between the servers (HZC_NET=socket), with the
// servers simulated on one machine: each test starts the ranks of one communicator as processes
// of hzc-coll-rank, HZC_TEST_PER_SERVER ranks per server, each server a distinct HZC_HOST_ID, and
// checks their exit statuses (hzc-coll-rank checks every byte). Inside a server the ranks use the
// process's transport (memfd on the host, hzc.ko in the guest). The two-guest suite
// (span_hosts_test.cpp) runs the same scenarios between two kernels, over RDMA and over TCP.
// HZC_TEST_NET=rdma (or auto) runs these over the guest's soft-RoCE device instead, every
// simulated server on it:
//   scripts/vm-run -e HZC_TEST_NET=rdma -- build/bin/host-tests/hzc_host_span
#include <gtest/gtest.h>
#include <hccl/hccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "rank_launch.h"
#include "root_info_hex.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

std::string TmpPath(const std::string &name) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

std::string LogPath(uint32_t rank) {
  const char *out = std::getenv("HZC_VM_OUT");
  return std::string(out != nullptr ? out : "/tmp") + "/" + TestName() + "-rank" +
         std::to_string(rank) + ".log";
}

class SpanSocketTest : public ::testing::Test {
 protected:
  // The ranks of a @servers x @per communicator (root info), running @scenario in @mode.
  // With @interleave, rank r runs on server r % @servers (the servers' ranks are not
  // consecutive), else on server r / @per.
  std::vector<pid_t> Start(uint32_t servers, uint32_t per, const char *scenario, const char *mode,
                           const std::map<std::string, std::string> &env = {},
                           bool interleave = false) {
    HcclRootInfo root;
    EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    const std::string hex = hzc::test::RootInfoToHex(root);
    const uint32_t n = servers * per;
    return hzc::test::StartRanks(
        n,
        [&](uint32_t r) {
          return std::vector<std::string>{HZC_COLL_RANK,     hex,      std::to_string(n),
                                          std::to_string(r), scenario, mode};
        },
        [&](uint32_t r) {
          const uint32_t server = interleave ? r % servers : r / per;
          setenv("HZC_HOST_ID", ("server-" + std::to_string(server)).c_str(), 1);
          const char *net = std::getenv("HZC_TEST_NET");
          setenv("HZC_NET", net != nullptr ? net : "socket", 1);
          setenv("HZC_TEST_PER_SERVER", std::to_string(per).c_str(), 1);
          setenv("HCCL_BUFFSIZE", "1", 1);
          setenv("HCCL_CONNECT_TIMEOUT", "120", 1);
          setenv("HCCL_EXEC_TIMEOUT", "120", 1);
          setenv("HZC_LOG_FILE", LogPath(r).c_str(), 1);
          for (const auto &[k, v] : env) {
            setenv(k.c_str(), v.c_str(), 1);
          }
        });
  }

  std::vector<int> Wait(const std::vector<pid_t> &pids, const std::vector<int> &want) {
    const std::vector<int> st = hzc::test::WaitRanks(pids);
    // HcclGetRootInfo's root thread closes its socket just after serving the last rank.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (uint32_t r = 0; r < st.size(); ++r) {
      if (r >= want.size() || st[r] != want[r]) {
        PrintLogTail(r);
      }
    }
    return st;
  }

  std::vector<int> Run(uint32_t servers, uint32_t per, const char *scenario, const char *mode,
                       const std::map<std::string, std::string> &env = {}) {
    return Wait(Start(servers, per, scenario, mode, env), std::vector<int>(servers * per, 0));
  }

  static std::string RankLog(uint32_t rank) {
    std::ifstream in(LogPath(rank));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static void PrintLogTail(uint32_t rank) { hzc::test::PrintLogTail(LogPath(rank), rank); }

  // The ranks of the last server are killed during calls (hzc-coll-rank @scenario, "cut" or
  // "cutp2p", loops until a call fails): every other rank fails cleanly.
  void KillAServer(uint32_t servers, uint32_t per, const char *scenario) {
    const uint32_t n = servers * per, first = n - per;
    for (uint32_t r = 0; r < n; ++r) {
      std::remove(TmpPath("hzc-span-ready-" + std::to_string(r)).c_str());
    }
    // HCCL_RDMA_*: a job that wants a dead server found fast (7 x 1.07 s, not HCCL's 34 s).
    const auto pids = Start(
        servers, per, scenario, "staging",
        {{"HCCL_EXEC_TIMEOUT", "60"}, {"HCCL_RDMA_TIMEOUT", "18"}, {"HCCL_RDMA_RETRY_CNT", "6"}});
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    for (uint32_t r = first; r < n; ++r) {
      const std::string ready = TmpPath("hzc-span-ready-" + std::to_string(r));
      while (access(ready.c_str(), F_OK) != 0 && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      EXPECT_EQ(access(ready.c_str(), F_OK), 0) << "rank " << r << " never made its first call";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // inside the calls that follow
    for (uint32_t r = first; r < n; ++r) {
      kill(pids[r], SIGKILL);
    }
    std::vector<int> want(n, 0);
    for (uint32_t r = first; r < n; ++r) {
      want[r] = -SIGKILL;
    }
    EXPECT_EQ(Wait(pids, want), want);
  }
};

TEST_F(SpanSocketTest, TwoServersOfOneRankEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(2, 1, "matrix", "staging", {{"HZC_LOG", "debug"}}), std::vector<int>(2, 0));
  EXPECT_NE(RankLog(0).find("(TCP)"), std::string::npos) << "rank 0 opened no TCP wire";
}

// Activated memory inside each server, TCP between them.
TEST_F(SpanSocketTest, TwoServersOfTwoRanksZeroCopyEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(2, 2, "matrix", "zerocopy"), std::vector<int>(4, 0));
}

// What the first ranks send each other leaves activated memory without a copy over RDMA, and is
// copied first from plain memory (hzc_comm_net_sends, hzc-coll-rank "direct": an AllReduce, a
// send, then the memory deactivated and other memory activated at its address: the next
// AllReduce sends the new bytes). Over TCP (the host) neither count moves. Two servers of two
// ranks, and three of one.
TEST_F(SpanSocketTest, ActivatedMemoryLeavesForOtherServersWithoutACopy) {
  const char *net = std::getenv("HZC_TEST_NET");
  const std::map<std::string, std::string> env{
      {"HZC_NET", net != nullptr && std::string(net) != "socket" ? "rdma" : "socket"}};
  EXPECT_EQ(Run(2, 2, "direct", "zerocopy", env), std::vector<int>(4, 0));
  EXPECT_EQ(Run(2, 2, "direct", "staging", env), std::vector<int>(4, 0));
  EXPECT_EQ(Run(3, 1, "direct", "zerocopy", env), std::vector<int>(3, 0));
}

TEST_F(SpanSocketTest, ThreeServersOfTwoRanksEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(3, 2, "matrix", "staging"), std::vector<int>(6, 0));
}

// Five servers: the leaders' Broadcast is scattered and all-gathered from 256 KiB, and their
// Barrier takes three rounds, the last one to a leader 4 ahead (wrapping around).
TEST_F(SpanSocketTest, FiveServersOfOneRankEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(5, 1, "matrix", "staging"), std::vector<int>(5, 0));
}

// The leaders' algorithms forced at every size of the matrix (1 element to 3 MiB, every type and
// op) by HZC_SPAN_RING_MIN on every rank: 0, the ring always (AllReduce, AllGather,
// ReduceScatter); its largest value, below it up to 16 MiB (AllReduce by recursive doubling,
// AllGather by Bruck, ReduceScatter by recursive halving). Between five servers (one beyond the
// largest power of two: the doubling's and the halving's hand-over), seven (three beyond), two,
// and three whose ranks interleave (server 0 = ranks 0 and 3: the segments are staged); the
// leaders' logs name the algorithms taken.
TEST_F(SpanSocketTest, LeadersAlgorithmsByRingAndBelowItAtEverySize) {
  struct Layout {
    uint32_t servers, per;
    bool interleave;
  };
  for (const Layout l :
       {Layout{5, 1, false}, Layout{7, 1, false}, Layout{2, 1, false}, Layout{3, 2, true}}) {
    for (const char *ring_min : {"0", "16777216"}) {
      SCOPED_TRACE(std::to_string(l.servers) + " x " + std::to_string(l.per) +
                   (l.interleave ? " interleaved" : "") + ", HZC_SPAN_RING_MIN=" + ring_min);
      const uint32_t n = l.servers * l.per;
      for (uint32_t r = 0; r < n; ++r) {
        std::remove(LogPath(r).c_str());  // the logs append
      }
      EXPECT_EQ(Wait(Start(l.servers, l.per, "matrix", "staging",
                           {{"HZC_LOG", "debug"}, {"HZC_SPAN_RING_MIN", ring_min}}, l.interleave),
                     std::vector<int>(n, 0)),
                std::vector<int>(n, 0));
      const bool ring = std::string(ring_min) == "0";
      for (uint32_t r = 0; r < l.servers; ++r) {  // the leaders: server r's first rank
        const std::string log = RankLog(l.interleave ? r : r * l.per);
        for (const char *coll : {"AllReduce", "AllGather", "ReduceScatter"}) {
          const std::string below = std::string(coll) == "AllReduce"   ? "recursive doubling"
                                    : std::string(coll) == "AllGather" ? "Bruck"
                                                                       : "recursive halving";
          const std::string want = ring ? "ring" : below, other = ring ? below : "ring";
          const std::string head = std::string("leaders' ") + coll + " of [0-9]+ bytes: ";
          const std::regex taken_re(head + want), other_re(head + other);
          EXPECT_TRUE(std::regex_search(log, taken_re)) << "server " << r << ": " << coll;
          EXPECT_FALSE(std::regex_search(log, other_re)) << "server " << r << ": " << coll;
        }
      }
    }
  }
}

// 16 MiB Broadcasts (and the other collectives) across three servers: scattered and
// all-gathered between the leaders.
TEST_F(SpanSocketTest, LargeBuffersAcrossThreeServersOfOneRank) {
  EXPECT_EQ(Run(3, 1, "large", "staging", {{"HZC_LOG", "debug"}}), std::vector<int>(3, 0));
  EXPECT_NE(RankLog(0).find("scattered and all-gathered between 3 leaders"), std::string::npos);
}

// Eight servers: reductions across the leaders combine in an order fixed by the servers, whatever
// order their data arrives in (a float product or sum would differ by a bit from run to run).
TEST_F(SpanSocketTest, EightServersOfTwoRanksEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(8, 2, "matrix", "staging"), std::vector<int>(16, 0));
}

// 64 ranks over 8 servers (scripts run far more ranks than cores here): every collective at a
// few sizes, checked (hzc-coll-rank "scale").
TEST_F(SpanSocketTest, SixtyFourRanksOverEightServers) {
  EXPECT_EQ(Run(8, 8, "scale", "staging"), std::vector<int>(64, 0));
}

// HCCL's one-sided calls into global memory among three servers of two ranks, every rank
// writing into every window of the other servers (hzc-coll-rank "onesidedglobal"): over TCP on
// the host, over soft-RoCE in the guest with HZC_TEST_NET=rdma (make check runs both).
TEST_F(SpanSocketTest, OneSidedGlobalMemoryAmongThreeServers) {
  EXPECT_EQ(Run(3, 2, "onesidedglobal", "staging"), std::vector<int>(6, 0));
}

// The one-sided calls between two servers of two ranks (hzc-coll-rank "onesided": exchange,
// batches now and on a stream, a neighbour on the same server, every byte checked, the calls
// that must fail).
TEST_F(SpanSocketTest, OneSidedTransfersAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(2, 2, "onesided", "staging"), std::vector<int>(4, 0));
}

// The second server asks for TCP (HZC_NET=socket), the first for HZC_NET=auto: each pair of
// ranks agrees on its link, TCP between the servers and, where there is an RDMA device, RDMA
// between the ranks of the first server; the "onesided" scenario passes as it does everywhere.
TEST_F(SpanSocketTest, OneSidedPairsAgreeOnTheirLinkWhenOneServerAsksForTcp) {
  EXPECT_EQ(Run(2, 2, "onesided", "staging",
                {{"HZC_LOG", "debug"}, {"HZC_TEST_NET_BY_SERVER", "auto,socket"}}),
            std::vector<int>(4, 0));
  const std::string log = RankLog(0);
  EXPECT_NE(log.find("rank 0 links with rank 2 over TCP"), std::string::npos);
  std::error_code ec;
  const bool rdma = !std::filesystem::is_empty("/sys/class/infiniband", ec) && !ec;
  EXPECT_NE(log.find(std::string("rank 0 links with rank 1 over ") + (rdma ? "RDMA" : "TCP")),
            std::string::npos);
  EXPECT_NE(RankLog(3).find("rank 3 links with rank 1 over TCP"), std::string::npos);
}

// Three servers asking for RDMA, TCP and either: the first two have no kind of link in common and
// fail HcclCommPrepare naming it; the third, linked with both, is told they gave up instead of
// waiting for their descriptors with no time limit (hzc-coll-rank "onesidedmixed").
TEST_F(SpanSocketTest, OneSidedPrepareFailsFastWhereTwoServersHaveNoLinkInCommon) {
  std::error_code ec;
  if (std::filesystem::is_empty("/sys/class/infiniband", ec) || ec) {
    GTEST_SKIP() << "no RDMA device (/sys/class/infiniband): HZC_NET=rdma would not open";
  }
  EXPECT_EQ(Run(3, 1, "onesidedmixed", "staging", {{"HZC_TEST_NET_BY_SERVER", "rdma,socket,auto"}}),
            std::vector<int>(3, 0));
  EXPECT_NE(RankLog(0).find("rank 1 links over TCP only"), std::string::npos);
  EXPECT_NE(RankLog(1).find("rank 0 links over RDMA only"), std::string::npos);
  EXPECT_NE(RankLog(2).find("gave up the exchange"), std::string::npos);
}

// A server dies during one-sided transfers: its peers fail within HCCL_EXEC_TIMEOUT, the pair
// stays broken, the communicator is destroyed at once (hzc-coll-rank "cutonesided").
TEST_F(SpanSocketTest, AServerThatDiesFailsOneSidedTransfersCleanly) {
  KillAServer(2, 2, "cutonesided");
}

// HZC_NET=rdma without an RDMA device: the one-sided calls to another server are
// HCCL_E_NOT_SUPPORT, naming why (hzc-coll-rank "onesidednone").
TEST_F(SpanSocketTest, OneSidedCallsWithRdmaAskedAndNoDeviceAreNotSupported) {
  std::error_code ec;
  if (!std::filesystem::is_empty("/sys/class/infiniband", ec) && !ec) {
    GTEST_SKIP() << "an RDMA device is present (/sys/class/infiniband): the calls would work";
  }
  EXPECT_EQ(Run(2, 1, "onesidednone", "staging", {{"HZC_NET", "rdma"}}), std::vector<int>(2, 0));
  EXPECT_NE(RankLog(0).find("HZC_NET=rdma and this server has no RDMA device"), std::string::npos);
}

// The bytes between servers per call (hzc_comm_net_stats), against the schedules, to the byte:
// four servers of two ranks and eight of one (hzc-coll-rank "traffic").
TEST_F(SpanSocketTest, BytesBetweenServersPerCallAreTheSchedules) {
  EXPECT_EQ(Run(4, 2, "traffic", "staging"), std::vector<int>(8, 0));
  EXPECT_EQ(Run(8, 1, "traffic", "staging"), std::vector<int>(8, 0));
}

TEST_F(SpanSocketTest, SixtyFourMegabytesAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(2, 2, "large", "zerocopy"), std::vector<int>(4, 0));
}

TEST_F(SpanSocketTest, EveryExchangeAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(2, 2, "xmatrix", "staging"), std::vector<int>(4, 0));
}

// AlltoAll(V/VC) move each pair's block only (through the leaders), with every layout of the
// servers' ranks: three servers, and three whose ranks interleave (server 0 has ranks 0 and 3).
TEST_F(SpanSocketTest, EveryExchangeAcrossThreeServersOfTwoRanks) {
  EXPECT_EQ(Run(3, 2, "xmatrix", "zerocopy"), std::vector<int>(6, 0));
}

TEST_F(SpanSocketTest, EveryExchangeAcrossThreeServersWhoseRanksInterleave) {
  EXPECT_EQ(Wait(Start(3, 2, "xmatrix", "staging", {}, true), std::vector<int>(6, 0)),
            std::vector<int>(6, 0));
}

TEST_F(SpanSocketTest, ExchangesThatDisagreeAcrossServersFailOnEveryRankAndMoveNothing) {
  EXPECT_EQ(Run(2, 2, "xmismatch", "staging"), std::vector<int>(4, 0));
}

// Each pair is checked by its sender's server's first rank: three servers whose ranks interleave.
TEST_F(SpanSocketTest, ExchangesThatDisagreeAcrossInterleavedServersFailOnEveryRank) {
  EXPECT_EQ(Wait(Start(3, 2, "xmismatch", "staging", {}, true), std::vector<int>(6, 0)),
            std::vector<int>(6, 0));
}

TEST_F(SpanSocketTest, CallsThatDisagreeAcrossServersFailOnEveryRankAndMoveNothing) {
  EXPECT_EQ(Run(2, 2, "mismatch", "staging"), std::vector<int>(4, 0));
}

// Rank 1 (not its server's first) passes an unknown type, rank 2 (server 2's first) a null
// buffer: every rank fails the call with HCCL_E_PARA (the refusing rank its own code), and the
// communicator stays usable.
TEST_F(SpanSocketTest, ARankThatRefusesACallTellsEveryServer) {
  const std::vector<int> type{HCCL_E_PARA, HCCL_E_PARA, HCCL_E_PARA, HCCL_E_PARA};
  EXPECT_EQ(Wait(Start(2, 2, "refuse", "staging"), type), type);
  const std::vector<int> null{HCCL_E_PARA, HCCL_E_PARA, HCCL_E_PTR, HCCL_E_PARA};
  EXPECT_EQ(Wait(Start(2, 2, "refusenull", "staging"), null), null);
}

TEST_F(SpanSocketTest, PointToPointAcrossTwoServersOfOneRank) {
  EXPECT_EQ(Run(2, 1, "p2p", "staging"), std::vector<int>(2, 0));
}

TEST_F(SpanSocketTest, PointToPointAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(2, 2, "p2p", "staging"), std::vector<int>(4, 0));
}

TEST_F(SpanSocketTest, SubCommunicatorsThatSpanTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(2, 2, "subcomm", "staging"), std::vector<int>(4, 0));
}

// A server dies during calls (its ranks killed: the kernel closes their connections): the
// ranks of the others fail with HCCL_E_REMOTE within HCCL_EXEC_TIMEOUT, destroy their
// communicators at once and exit 0 (hzc-coll-rank "cut").
TEST_F(SpanSocketTest, AServerThatDiesFailsTheOthersCleanly) {
  KillAServer(2, 2, "cut");
}

TEST_F(SpanSocketTest, AServerThatDiesFailsPointToPointTransfersCleanly) {
  KillAServer(2, 2, "cutp2p");
}

// The same among three servers of two ranks: collectives (hzc-coll-rank "cut"), and one-sided
// transfers into global memory of every other server ("cutonesidedglobal"). One kernel holds
// every simulated server here, so a cut link between two of them is not shown (the two-guest
// suite cuts one).
TEST_F(SpanSocketTest, AServerThatDiesAmongThreeFailsTheOthersCleanly) {
  KillAServer(3, 2, "cut");
}

TEST_F(SpanSocketTest, AServerThatDiesAmongThreeFailsOneSidedTransfersCleanly) {
  KillAServer(3, 2, "cutonesidedglobal");
}

}  // namespace
