// SPDX-License-Identifier: Apache-2.0
// Communicators that span two servers: this binary runs in both guests of
// `scripts/vm-run --hosts 2` at once (scripts/vm-tests build/bin/hosts-tests/hzc_hosts_span in
// each), and the two guests' tests meet in order: each test starts this guest's ranks of one
// communicator (hzc-coll-rank, HZC_TEST_PER_SERVER ranks per server; guest N runs ranks
// (N-1)*L .. N*L-1) and checks their exit statuses. Root info travels from guest 1 to guest 2
// over a TCP port of the test's own; rank tables name the guests' addresses.
// Outside such a pair (HZC_HOST_INDEX unset) every test skips.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hccl/hccl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rank_launch.h"
#include "root_info_hex.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kMeetTime = std::chrono::seconds(180);

struct Hosts {
  uint32_t index = 0;  // 1 or 2
  std::vector<std::string> addrs;
};

// The pair this guest belongs to, or index 0 outside one.
Hosts GetHosts() {
  Hosts h;
  const char *index = std::getenv("HZC_HOST_INDEX");
  const char *addrs = std::getenv("HZC_HOST_ADDRS");
  if (index == nullptr || addrs == nullptr) {
    return h;
  }
  std::istringstream in(addrs);
  for (std::string a; in >> a;) {
    h.addrs.push_back(a);
  }
  h.index = static_cast<uint32_t>(std::atoi(index));
  if (h.addrs.size() != 2 || h.index < 1 || h.index > 2) {
    h.index = 0;
  }
  return h;
}

// Where the ranks' logs go: the results folder of the guest when there is one.
std::string LogPath(const std::string &test, uint32_t rank) {
  const char *out = std::getenv("HZC_VM_OUT");
  return std::string(out != nullptr ? out : "/tmp") + "/" + test + "-rank" + std::to_string(rank) +
         ".log";
}

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

std::string TmpPath(const std::string &name) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

// Guest 1 hands @hex to guest 2 on @port (one connection); guest 2 gets it. Empty on failure.
std::string ShareText(const Hosts &h, uint16_t port, const std::string &hex) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, h.addrs[0].c_str(), &addr.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::string out;
  if (h.index == 1) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    pollfd p{fd, POLLIN, 0};
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 && listen(fd, 1) == 0 &&
        poll(&p, 1, static_cast<int>(kMeetTime.count() * 1000)) == 1) {
      const int c = accept(fd, nullptr, nullptr);
      if (c >= 0 && send(c, hex.data(), hex.size(), MSG_NOSIGNAL) == ssize_t(hex.size())) {
        out = hex;
      }
      close(c);
    }
  } else {
    const auto deadline = Clock::now() + kMeetTime;
    bool connected = false;
    while (!(connected = connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    const timeval wait{static_cast<time_t>(kMeetTime.count()), 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    char buf[512];
    for (ssize_t n; connected && (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
      out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

// A version 1.0 rank table of the two guests with @per ranks each.
std::string WriteTable(const Hosts &h, uint32_t per, const std::string &name) {
  std::ostringstream t;
  t << R"({"status": "completed", "version": "1.0", "server_count": "2", "server_list": [)";
  for (uint32_t s = 0; s < 2; ++s) {
    t << (s ? ", " : "") << R"({"server_id": ")" << h.addrs[s] << R"(", "device": [)";
    for (uint32_t d = 0; d < per; ++d) {
      const uint32_t r = s * per + d;
      t << (d ? ", " : "") << R"({"device_id": ")" << d << R"(", "device_ip": "192.168.7.)" << r + 1
        << R"(", "rank_id": ")" << r << R"("})";
    }
    t << "]}";
  }
  t << "]}";
  const std::string path = TmpPath(name);
  std::ofstream(path) << t.str();
  return path;
}

class SpanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hosts_ = GetHosts();
    if (hosts_.index == 0) {
      GTEST_SKIP() << "needs two guests: scripts/vm-run --hosts 2 (HZC_HOST_INDEX unset)";
    }
    if (!unmet_.empty()) {
      GTEST_FAIL() << "not run: the guests could not meet since " << unmet_
                   << " (the network between them is down)";
    }
  }

  // How ranks meet: root info shared on a port of this test, or a rank table.
  std::string Meeting(bool table, uint32_t per) {
    static uint16_t port = 62000;
    ++port;
    if (table) {
      return "table:" + WriteTable(hosts_, per, "hzc-span-table-" + std::to_string(port) + ".json");
    }
    std::string hex;
    if (hosts_.index == 1) {
      HcclRootInfo root;
      EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
      hex = hzc::test::RootInfoToHex(root);
    }
    hex = ShareText(hosts_, port, hex);
    EXPECT_EQ(hex.size(), 2 * sizeof(HcclRootInfo)) << "root info from guest 1";
    if (hex.empty()) {
      unmet_ = TestName();
    }
    return hex;
  }

  // Start this guest's @per ranks of a 2 x @per communicator met by @how; @env for them.
  std::vector<pid_t> Start(const std::string &how, uint32_t per, const char *scenario,
                           const char *mode, const std::map<std::string, std::string> &env = {}) {
    const uint32_t first = (hosts_.index - 1) * per;
    return hzc::test::StartRanks(
        per,
        [&](uint32_t j) {
          return std::vector<std::string>{
              HZC_COLL_RANK, how, std::to_string(2 * per), std::to_string(first + j),
              scenario,      mode};
        },
        [&](uint32_t j) {
          setenv("HZC_TEST_PER_SERVER", std::to_string(per).c_str(), 1);
          setenv("HCCL_BUFFSIZE", "1", 1);
          setenv("HCCL_CONNECT_TIMEOUT", "120", 1);
          setenv("HCCL_EXEC_TIMEOUT", "120", 1);
          setenv("HZC_RDMA_DEVICE", "rxe0", 1);
          setenv("HZC_LOG_FILE", LogPath(TestName(), first + j).c_str(), 1);
          for (const auto &[k, v] : env) {
            setenv(k.c_str(), v.c_str(), 1);
          }
        });
  }

  std::vector<int> Run(bool table, uint32_t per, const char *scenario, const char *mode,
                       const std::map<std::string, std::string> &env = {}) {
    const std::string how = Meeting(table, per);
    if (HasFailure()) {
      return {};
    }
    const std::vector<int> st = hzc::test::WaitRanks(Start(how, per, scenario, mode, env));
    const uint32_t first = (hosts_.index - 1) * per;
    for (uint32_t j = 0; j < st.size(); ++j) {
      if (st[j] != 0) {
        PrintLogTail(first + j);
      }
    }
    return st;
  }

  static void PrintLogTail(uint32_t rank) {
    hzc::test::PrintLogTail(LogPath(TestName(), rank), rank);
  }

  // The log of this guest's rank @rank (HZC_LOG_FILE of Start).
  static std::string RankLog(uint32_t rank) {
    std::ifstream in(LogPath(TestName(), rank));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Guest 2: wait until this guest's ranks from @first on (@per of them) made their first
  // call (hzc-coll-rank's "cut" scenario), then cut the link: every packet either way is
  // dropped from then on (netem). Not `ip link set eth0 down`: the guest kernel's soft-RoCE
  // (Debian 6.1) frees a queue pair's socket on destroy while its packets are still held by the
  // downed virtio card, which frees them when the link comes back and panics in
  // rxe_skb_tx_dtor (seen once, in the destructor of a freed socket).
  void CutWhenReady(uint32_t first, uint32_t per) {
    const auto deadline = Clock::now() + kMeetTime;
    for (uint32_t r = first; r < first + per; ++r) {
      const std::string ready = TmpPath("hzc-span-ready-" + std::to_string(r));
      while (access(ready.c_str(), F_OK) != 0 && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      EXPECT_EQ(access(ready.c_str(), F_OK), 0) << "rank " << r << " never made its first call";
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));  // inside the calls that follow
    EXPECT_EQ(std::system("tc qdisc add dev eth0 root netem loss 100%"), 0);
  }

  // Guest 2: the link back and rxe0's port active, for the tests after this one.
  static void Reconnect() {
    EXPECT_EQ(std::system("tc qdisc del dev eth0 root"), 0);
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    std::string state;
    while (state.find("ACTIVE") == std::string::npos && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::ifstream in("/sys/class/infiniband/rxe0/ports/1/state");
      std::getline(in, state);
    }
    EXPECT_NE(state.find("ACTIVE"), std::string::npos) << "rxe0 after eth0 came back: " << state;
  }

  // A server's link is cut (@kill: and its ranks die with it, so nothing of it answers
  // again) during calls: every rank that lives fails cleanly (hzc-coll-rank @scenario, "cut"
  // or "cutp2p").
  void Fault(uint32_t per, bool kill, const char *scenario = "cut",
             std::map<std::string, std::string> env = {}) {
    const std::string how = Meeting(false, per);
    ASSERT_FALSE(HasFailure());
    const uint32_t first = (hosts_.index - 1) * per;
    for (uint32_t r = first; r < first + per; ++r) {  // an earlier fault test's
      std::remove(TmpPath("hzc-span-ready-" + std::to_string(r)).c_str());
    }
    env["HCCL_EXEC_TIMEOUT"] = "60";
    // A job that wants a dead server found fast: 7 x 1.07 s instead of HCCL's 34 s.
    env["HCCL_RDMA_TIMEOUT"] = "18";
    env["HCCL_RDMA_RETRY_CNT"] = "6";
    const auto pids = Start(how, per, scenario, "staging", env);
    std::vector<int> want(per, 0);
    if (hosts_.index == 2) {
      CutWhenReady(first, per);
      if (kill) {
        for (pid_t pid : pids) {
          ::kill(pid, SIGKILL);
        }
        want.assign(per, -SIGKILL);
      }
    }
    const std::vector<int> st = hzc::test::WaitRanks(pids);
    EXPECT_EQ(st, want);
    for (uint32_t j = 0; j < st.size() && j < want.size(); ++j) {
      if (st[j] != want[j]) {
        PrintLogTail(first + j);
      }
    }
    if (hosts_.index == 2) {
      Reconnect();
    }
  }

  Hosts hosts_;
  // The first test whose guests could not meet: the network between them is down, and every
  // later test fails at once instead of waiting kMeetTime for it.
  static inline std::string unmet_;
};

TEST_F(SpanTest, RootInfoTwoServersOfOneRankEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(false, 1, "matrix", "staging"), std::vector<int>(1, 0));
}

// Rank table, 2 x 2 ranks, every collective and type (ops: coll_rank.h AcrossServersCase). Memory
// set and activated through the server-local sub-communicator is used without staging inside each
// server (the local calls' debug log says which path they take).
TEST_F(SpanTest, RankTableTwoServersOfTwoRanksZeroCopyEveryCollectiveTypeAndOp) {
  EXPECT_EQ(Run(true, 2, "matrix", "zerocopy", {{"HZC_LOG", "debug"}}), std::vector<int>(2, 0));
  const uint32_t first = (hosts_.index - 1) * 2;
  for (uint32_t r = first; r < first + 2; ++r) {
    EXPECT_NE(RankLog(r).find("takes the zero-copy path"), std::string::npos) << "rank " << r;
  }
}

TEST_F(SpanTest, SixtyFourMegabytesAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(false, 2, "large", "zerocopy"), std::vector<int>(2, 0));
}

// Guest 2's network falls silent for 15 s in the middle of the calls (everything it sends is
// dropped, as from a stalled host or a congested switch): the calls wait for it and complete,
// over RDMA (the queue pairs' retries: HCCL_RDMA_TIMEOUT, HCCL_RDMA_RETRY_CNT) and over the
// TCP connections beside it alike (hzc-coll-rank "matrix"). A peer taken for dead after 8 s of
// silence fails it.
TEST_F(SpanTest, AServerSilentForFifteenSecondsDelaysTheCallsAndFailsNone) {
  const std::string how = Meeting(false, 2);
  ASSERT_FALSE(HasFailure());
  const auto pids = Start(how, 2, "matrix", "zerocopy");
  if (hosts_.index == 2) {
    std::this_thread::sleep_for(std::chrono::seconds(5));  // inside the calls
    EXPECT_EQ(std::system("tc qdisc add dev eth0 root netem loss 100%"), 0);
    std::this_thread::sleep_for(std::chrono::seconds(15));
    EXPECT_EQ(std::system("tc qdisc del dev eth0 root"), 0);
  }
  const std::vector<int> st = hzc::test::WaitRanks(pids);
  EXPECT_EQ(st, std::vector<int>(2, 0));
  for (uint32_t j = 0; j < st.size(); ++j) {
    if (st[j] != 0) {
      PrintLogTail((hosts_.index - 1) * 2 + j);
    }
  }
}

// Every exchange (Reduce, Scatter, AllGatherV, ReduceScatterV, AlltoAll, AlltoAllV,
// AlltoAllVC) with every type and op, counts 0, 1, 7 and 1001, in place and with the root-only
// buffers NULL elsewhere, then larger sizes (hzc-coll-rank "xmatrix"; the references reduce
// each server's ranks first).
TEST_F(SpanTest, EveryExchangeAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(false, 2, "xmatrix", "staging"), std::vector<int>(2, 0));
}

// Exchanges whose ranks disagree (a pair's counts, the arrays every rank shares, count, root,
// op, collective) fail with HCCL_E_PARA on every rank of both servers and move nothing; then
// an AlltoAllV works (hzc-coll-rank "xmismatch").
TEST_F(SpanTest, ExchangesThatDisagreeAcrossServersFailOnEveryRankAndMoveNothing) {
  EXPECT_EQ(Run(false, 2, "xmismatch", "staging"), std::vector<int>(2, 0));
}

TEST_F(SpanTest, CallsThatDisagreeAcrossServersFailOnEveryRankAndMoveNothing) {
  EXPECT_EQ(Run(false, 2, "mismatch", "staging"), std::vector<int>(2, 0));
}

// A rank whose own arguments fail its checks (rank 1: an unknown type, not its server's first
// rank; rank 2: a null buffer, server 2's first rank) tells the others, which fail the call
// at once with HCCL_E_PARA; the communicator stays usable (hzc-coll-rank "refuse*").
TEST_F(SpanTest, ARankThatRefusesACallTellsEveryServer) {
  std::vector<int> want{HCCL_E_PARA, HCCL_E_PARA};
  if (hosts_.index == 1) {
    want[1] = HCCL_E_PARA;  // rank 1 itself: an unknown dataType
  }
  EXPECT_EQ(Run(false, 2, "refuse", "staging"), want);
  want = {HCCL_E_PARA, HCCL_E_PARA};
  if (hosts_.index == 2) {
    want[0] = HCCL_E_PTR;  // rank 2 itself: sendBuf NULL
  }
  EXPECT_EQ(Run(false, 2, "refusenull", "staging"), want);
}

// HcclSend, HcclRecv and HcclBatchSendRecv between the servers (hzc-coll-rank "p2p"):
// types and sizes up to 3 MiB, batches both ways, a ring that mixes transfers inside and
// across servers, mismatches and refusals on both sides (HCCL_E_PARA within 5 s, nothing
// moved), each followed by a transfer that works. 2 x 1 ranks by root info, 2 x 2 by rank
// table.
TEST_F(SpanTest, PointToPointAcrossTwoServersOfOneRank) {
  EXPECT_EQ(Run(false, 1, "p2p", "staging"), std::vector<int>(1, 0));
}

TEST_F(SpanTest, PointToPointAcrossTwoServersOfTwoRanksByRankTable) {
  EXPECT_EQ(Run(true, 2, "p2p", "staging"), std::vector<int>(2, 0));
}

// Sub-communicators whose ranks span the servers, of a 2 x 2 communicator from a rank table
// (hzc-coll-rank "subcomm"): {0,2} and {1,3} (one rank per server) and {0,1,2}, the first two
// and the last at once from two threads of each rank. AllReduce (several types and ops, up to
// 3 MiB + odd bytes), AllGather, Broadcast from each server, Send and Recv, an AllReduce whose
// members disagree (HCCL_E_PARA on both), and calls after the parent was destroyed; every byte
// checked against a reference.
TEST_F(SpanTest, SubCommunicatorsThatSpanTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(true, 2, "subcomm", "staging"), std::vector<int>(2, 0));
}

// HCCL's one-sided calls between the ranks of the two servers over RDMA (hzc-coll-rank
// "onesided": registration, descriptor exchange, batches of writes now and of reads on a stream,
// every byte checked, and the calls that must fail).
TEST_F(SpanTest, OneSidedTransfersAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(false, 2, "onesided", "staging"), std::vector<int>(2, 0));
}

// One-sided transfers when the link between the servers is cut, and when a server dies
// (hzc-coll-rank "cutonesided"): HCCL_E_ROCE_TRANSFER on the ranks that live, the link to the
// pair broken for good, the communicator destroyed at once.
TEST_F(SpanTest, ACutLinkFailsOneSidedTransfersOfBothServersCleanly) {
  Fault(2, false, "cutonesided");
}

TEST_F(SpanTest, AServerThatDiesFailsOneSidedTransfersCleanly) {
  Fault(1, true, "cutonesided");
}

// The same with global memory: bound windows, HcclCommPrepare (hzc-coll-rank "onesidedglobal").
TEST_F(SpanTest, OneSidedTransfersIntoGlobalMemoryAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(true, 2, "onesidedglobal", "staging"), std::vector<int>(2, 0));
}

// examples/cann/hccl_kv_transfer, a CANN program: the first server's ranks move a KV cache of
// 16-256 KiB blocks to their pairs on the second, one HcclBatchPut per layer, checked there.
TEST_F(SpanTest, KvCacheExampleAcrossTwoServersOfTwoRanks) {
#ifndef HZC_CANN_KV
  GTEST_SKIP() << "examples/cann not built (no Open MPI compiler: scripts/deps check)";
#else
  const uint32_t per = 2, first = (hosts_.index - 1) * per;
  const std::string table = WriteTable(hosts_, per, "hzc-span-kv-table.json");
  const std::vector<int> st = hzc::test::WaitRanks(hzc::test::StartRanks(
      per,
      [&](uint32_t j) {
        return std::vector<std::string>{HZC_CANN_KV, table, std::to_string(first + j), "6"};
      },
      [&](uint32_t j) {
        setenv("HCCL_CONNECT_TIMEOUT", "120", 1);
        setenv("HZC_RDMA_DEVICE", "rxe0", 1);
        setenv("HZC_LOG_FILE", LogPath(TestName(), first + j).c_str(), 1);
      }));
  EXPECT_EQ(st, std::vector<int>(per, 0));
  for (uint32_t j = 0; j < st.size(); ++j) {
    if (st[j] != 0) {
      PrintLogTail(first + j);
    }
  }
#endif
}

// The link of server 2 goes down in the middle of calls: the ranks of both servers fail with
// HCCL_E_ROCE_TRANSFER or HCCL_E_REMOTE within HCCL_EXEC_TIMEOUT, destroy their communicators
// at once and leave no verbs object behind.
TEST_F(SpanTest, ACutLinkFailsTheCallsOfBothServersCleanly) {
  Fault(2, false);
}

// The same during point-to-point transfers between the servers (HcclBatchSendRecv, each rank
// with its partner on the other server, both ways at once).
TEST_F(SpanTest, ACutLinkFailsPointToPointTransfersOfBothServersCleanly) {
  Fault(2, false, "cutp2p");
}

// Server 2 goes away for good (its link cut, its ranks killed: nothing answers, nothing
// closes a connection): server 1's ranks fail the same way.
TEST_F(SpanTest, AServerThatDiesFailsTheOthersCleanly) {
  Fault(1, true);
}

// The same over TCP between the servers (HZC_NET=socket; tests/vm/span/span_socket_test.cpp runs
// the rest of the scenarios between simulated servers on one kernel).
const std::map<std::string, std::string> kSocket{{"HZC_NET", "socket"}};

TEST_F(SpanTest, SocketTwoServersOfTwoRanksZeroCopyEveryCollectiveTypeAndOp) {
  std::map<std::string, std::string> env = kSocket;
  env["HZC_LOG"] = "debug";
  EXPECT_EQ(Run(false, 2, "matrix", "zerocopy", env), std::vector<int>(2, 0));
  const uint32_t first = (hosts_.index - 1) * 2;
  EXPECT_NE(RankLog(first).find("(TCP)"), std::string::npos) << "no TCP wire";
}

TEST_F(SpanTest, SocketPointToPointAcrossTwoServersOfTwoRanksByRankTable) {
  EXPECT_EQ(Run(true, 2, "p2p", "staging", kSocket), std::vector<int>(2, 0));
}

// TCP gives up on the cut link after 7.5 s without an acknowledgement (Fault's HCCL_RDMA_*):
// HCCL_E_TCP_TRANSFER (or HCCL_E_REMOTE from a peer that learnt it first) on both servers, well
// within HCCL_EXEC_TIMEOUT.
TEST_F(SpanTest, SocketACutLinkFailsTheCallsOfBothServersCleanly) {
  Fault(2, false, "cut", kSocket);
}

TEST_F(SpanTest, SocketAServerThatDiesFailsTheOthersCleanly) {
  Fault(1, true, "cut", kSocket);
}

// The one-sided calls over TCP (transport/socket_window.h): the same scenario as over RDMA, and
// a cut link during transfers (HCCL_E_TCP_TRANSFER once TCP gives up, the pair broken for good).
TEST_F(SpanTest, SocketOneSidedTransfersAcrossTwoServersOfTwoRanks) {
  EXPECT_EQ(Run(false, 2, "onesided", "staging", kSocket), std::vector<int>(2, 0));
}

TEST_F(SpanTest, SocketACutLinkFailsOneSidedTransfersOfBothServersCleanly) {
  Fault(2, false, "cutonesided", kSocket);
}

}  // namespace
