// SPDX-License-Identifier: Apache-2.0
#include "core/comm_init.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <span>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "bootstrap/group.h"
#include "bootstrap/host_id.h"
#include "bootstrap/root_info.h"
#include "core/comm.h"
#include "hzc_test.h"
#include "rank_launch.h"

namespace hzc {
namespace {

using ::testing::HasSubstr;

// A port of loopback nobody listens on now (bound once, then released), for a rank table's
// rendezvous: not HCCL_IF_BASE_PORT's 60000, which other tests on this host may use.
uint16_t FreePort() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    return 0;
  }
  return ntohs(a.sin_port);
}

class CommInitTest : public test::Test {
 protected:
  void TearDown() override {
    for (HcclComm h : made_) {
      EXPECT_TRUE(CommRegistry::Process().Remove(h).ok());
    }
    for (const std::string &path : paths_) {
      std::remove(path.c_str());
    }
    test::Test::TearDown();
  }
  // Write a table of two ranks: on one server @server, or (@second not empty) rank 0 on @server
  // and rank 1 on @second.
  std::string Table(const std::string &server, const std::string &second = "") {
    const std::string path = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") +
                             "/hzc-comm-init-" + std::to_string(getpid()) + "-" +
                             std::to_string(paths_.size()) + ".json";
    paths_.push_back(path);
    const std::string rank1 = R"({"device_id": "1", "device_ip": "192.168.1.11", "rank_id": "1"})";
    std::ofstream(path) << R"({"status": "completed", "version": "1.0", "server_count": ")"
                        << (second.empty() ? 1 : 2) << R"(", "server_list": [{"server_id": ")"
                        << server << R"(", "device": [
        {"device_id": "0", "device_ip": "192.168.1.10", "rank_id": "0"})"
                        << (second.empty() ? ", " + rank1 + "]}"
                                           : R"(]}, {"server_id": ")" + second +
                                                 R"(", "device": [)" + rank1 + "]}")
                        << "]}";
    return path;
  }
  // Both ranks of the table at @path, each in a thread, on @port.
  std::vector<Expected<HcclComm>> BothRanks(const std::string &path, uint16_t port) {
    auto r1 =
        std::async(std::launch::async, [&] { return FromRankTable(path.c_str(), 1, {}, port); });
    std::vector<Expected<HcclComm>> out;
    out.push_back(FromRankTable(path.c_str(), 0, {}, port));
    out.push_back(r1.get());
    return out;
  }
  std::shared_ptr<Communicator> Made(Expected<HcclComm> handle) {
    EXPECT_TRUE(handle.ok()) << handle.status().message();
    if (!handle.ok()) {
      return nullptr;
    }
    made_.push_back(*handle);
    return CommRegistry::Process().Get(*handle).value();
  }

  std::vector<std::string> paths_;
  std::vector<HcclComm> made_;
};

// The ranks of one table (as threads) meet at rank 0's rendezvous and join the same
// communicator; another table is another. Their identities are their real ones.
TEST_F(CommInitTest, RankTableRanksRendezvous) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  auto a = BothRanks(Table("node-a"), port);
  auto b = BothRanks(Table("node-b"), port);  // the same port again, once a's root is done
  auto r0 = Made(std::move(a[0]));
  auto r1 = Made(std::move(a[1]));
  auto other = Made(std::move(b[0]));
  Made(std::move(b[1]));
  ASSERT_TRUE(r0 && r1 && other);
  EXPECT_EQ(r0->id(), r1->id());
  EXPECT_NE(r0->id(), other->id());
  EXPECT_EQ(r0->size(), 2U);
  EXPECT_EQ(r1->rank(), 1U);
  EXPECT_EQ(r0->ServerCount(), 1U);
  EXPECT_EQ(r0->ranks()[1].host, bootstrap::HostIdentity());
  EXPECT_EQ(r0->ranks()[1].pid, static_cast<uint32_t>(getpid()));
  EXPECT_NE(r0->ranks()[0].address, r0->ranks()[1].address);
  EXPECT_EQ(r0->group(), nullptr);  // one server: no connections between the ranks
}

// Two tables' communicators at once on one port: the second waits for it.
TEST_F(CommInitTest, TwoRankTablesAtOnceShareThePort) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  const std::string a = Table("node-a");
  const std::string b = Table("node-b");
  auto second = std::async(std::launch::async, [&] { return BothRanks(b, port); });
  for (auto &h : BothRanks(a, port)) {
    Made(std::move(h));
  }
  for (auto &h : second.get()) {
    Made(std::move(h));
  }
  EXPECT_EQ(made_.size(), 4U);
}

TEST_F(CommInitTest, RankTableServerCountMustMatch) {
  auto both = BothRanks(Table("127.0.0.1", "127.0.0.2"), FreePort());
  for (auto &r : both) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), HCCL_E_PARA);
    EXPECT_THAT(r.status().message(),
                HasSubstr("the rank table lists 2 server(s) but the ranks run on 1"));
  }
}

TEST_F(CommInitTest, RankTableFirstServerNeedsAnIp) {
  const std::string path = Table("node-a", "127.0.0.2");
  for (uint32_t rank : {0U, 1U}) {
    auto r = FromRankTable(path.c_str(), rank, {}, FreePort());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), HCCL_E_PARA);
    EXPECT_THAT(r.status().message(),
                HasSubstr("server_list[0].server_id \"node-a\" (the server of rank 0"));
  }
}

// A rank of a two-server table in a process of its own (the environment names the table, the
// rank and the port; HZC_HOST_ID its server): it joins, is connected to the other rank, and
// gathers over the connections, then over those of two sub-communicators of both ranks, which
// outlive their parent. Skipped unless CommInitTest.TwoServerRankTable started it.
TEST(CommInitChild, RankOfTwoServerTable) {
  const char *path = getenv("HZC_TEST_TABLE");
  if (path == nullptr) {
    GTEST_SKIP() << "a rank process of CommInitTest.TwoServerRankTable";
  }
  const auto rank = static_cast<uint32_t>(std::atoi(getenv("HZC_TEST_RANK")));
  const auto port = static_cast<uint16_t>(std::atoi(getenv("HZC_TEST_PORT")));
  auto h = FromRankTable(path, rank, {}, port);
  if (const char *fails = getenv("HZC_TEST_FAILS"); fails != nullptr) {
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), HCCL_E_TCP_CONNECT);
    EXPECT_THAT(h.status().message(), HasSubstr(rank == 0 ? "rank 1's address: none"
                                                          : "cannot listen for their connections"));
    return;
  }
  ASSERT_TRUE(h.ok()) << h.status().message();
  auto c = CommRegistry::Process().Get(*h).value();
  EXPECT_EQ(c->ServerCount(), 2U);
  ASSERT_NE(c->group(), nullptr);
  const std::string mine = "rank " + std::to_string(rank);
  const std::vector<uint32_t> members{0, 1};
  auto all =
      c->group()->AllGather(members, 1, std::as_bytes(std::span(mine.data(), mine.size())),
                            bootstrap::Group::Clock::now() + std::chrono::seconds(10), "test");
  ASSERT_TRUE(all.ok()) << all.status().message();
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(std::string(reinterpret_cast<const char *>((*all)[r].data()), (*all)[r].size()),
              "rank " + std::to_string(r));
  }
  // Two sub-communicators of both ranks (they span the servers) get views of the connections,
  // each in a space of its own, the same on both ranks; one of this rank alone gets none.
  std::vector<HcclComm> subs;
  for (uint64_t sub_id : {5, 6}) {
    auto sub = SubCommunicator(*h, members, sub_id, rank, {});
    ASSERT_TRUE(sub.ok()) << sub.status().message();
    subs.push_back(*sub);
  }
  auto alone = SubCommunicator(*h, {rank}, 7, 0, {});
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(CommRegistry::Process().Get(*alone).value()->group(), nullptr);
  EXPECT_TRUE(CommRegistry::Process().Remove(*alone).ok());
  c.reset();
  EXPECT_TRUE(CommRegistry::Process().Remove(*h).ok());  // the parent first
  uint64_t spaces[2] = {};
  for (size_t i = 0; i < subs.size(); ++i) {
    auto sc = CommRegistry::Process().Get(subs[i]).value();
    ASSERT_NE(sc->group(), nullptr);
    EXPECT_EQ(sc->group()->rank(), rank);
    EXPECT_EQ(sc->group()->size(), 2U);
    spaces[i] = sc->group()->space();
    EXPECT_NE(spaces[i], 0U);
    const std::string text = "sub " + std::to_string(i) + " rank " + std::to_string(rank) + " " +
                             std::to_string(spaces[i]);
    auto got =
        sc->group()->AllGather(members, 1, std::as_bytes(std::span(text.data(), text.size())),
                               bootstrap::Group::Clock::now() + std::chrono::seconds(10), "sub");
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (uint32_t r = 0; r < 2; ++r) {
      EXPECT_EQ(std::string(reinterpret_cast<const char *>((*got)[r].data()), (*got)[r].size()),
                "sub " + std::to_string(i) + " rank " + std::to_string(r) + " " +
                    std::to_string(spaces[i]));
    }
    sc.reset();
    EXPECT_TRUE(CommRegistry::Process().Remove(subs[i]).ok());
  }
  EXPECT_NE(spaces[0], spaces[1]);
}

// Two ranks of a table of two servers, as processes with a host identity each; with
// @bad_if_ip, rank 1 has an HCCL_IF_IP it cannot listen on: both fail to connect, saying why.
void RunTwoServerTable(const std::string &path, bool bad_if_ip) {
  const std::string port = std::to_string(FreePort());
  const auto pids = test::StartRanks(
      2,
      [](uint32_t) {
        return std::vector<std::string>{"/proc/self/exe",
                                        "--gtest_filter=CommInitChild.RankOfTwoServerTable"};
      },
      [&](uint32_t r) {
        setenv("HZC_HOST_ID", r == 0 ? "server-a" : "server-b", 1);
        setenv("HZC_TEST_TABLE", path.c_str(), 1);
        setenv("HZC_TEST_RANK", std::to_string(r).c_str(), 1);
        setenv("HZC_TEST_PORT", port.c_str(), 1);
        if (bad_if_ip) {
          setenv("HZC_TEST_FAILS", "1", 1);
          if (r == 1) {
            setenv("HCCL_IF_IP", "not-an-ip", 1);
          }
        }
      });
  ASSERT_EQ(pids.size(), 2U);
  for (int status : test::WaitRanks(pids)) {
    EXPECT_EQ(status, 0);
  }
}

TEST_F(CommInitTest, TwoServerRankTable) {
  RunTwoServerTable(Table("127.0.0.1", "127.0.0.2"), false);
}

TEST_F(CommInitTest, TwoServerRankTableFailsWhenARankCannotListen) {
  RunTwoServerTable(Table("127.0.0.1", "127.0.0.2"), true);
}

TEST_F(CommInitTest, RankTableWithoutTheRank) {
  const std::string path = Table("node-a");
  auto st = FromRankTable(path.c_str(), 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), HCCL_E_PARA);
  EXPECT_EQ(st.status().message(), "rank=2: no such rank_id in " + path + " (ranks 0..1)");
  EXPECT_EQ(FromRankTable("/nonexistent.json", 0).status().code(), HCCL_E_OPEN_FILE_FAILURE);
}

TEST_F(CommInitTest, RootInfoOfOneRank) {
  HcclRootInfo root{};
  ASSERT_TRUE(NewRootInfo(&root).ok());
  auto c = Made(FromRootInfo(root, 1, 0));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->size(), 1U);
  EXPECT_EQ(c->rank(), 0U);
  HcclRootInfo garbage{};
  EXPECT_EQ(FromRootInfo(garbage, 1, 0).status().code(), HCCL_E_PARA);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // root thread exit
}

// Ranks on hosts a, b, a, c: three servers, ordered by their lowest rank.
std::vector<bootstrap::RankIdentity> FourRanksOnThreeServers() {
  std::vector<bootstrap::RankIdentity> ranks;
  for (const char *host : {"host-a", "host-b", "host-a", "host-c"}) {
    ranks.push_back({.host = host, .pid = 0, .address = ""});
  }
  return ranks;
}

TEST(ServerLayoutTest, GroupsRanksByHostInOrderOfTheirLowestRank) {
  const ServerLayout l = LayOutServers(FourRanksOnThreeServers(), 2);
  EXPECT_EQ(l.servers, (std::vector<std::vector<uint32_t>>{{0, 2}, {1}, {3}}));
  EXPECT_EQ(l.leaders, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(l.server_of, (std::vector<uint32_t>{0, 1, 0, 2}));
  EXPECT_EQ(l.server, 0U);
  EXPECT_EQ(l.pos(0), 0U);
  EXPECT_EQ(l.pos(2), 1U);
  EXPECT_EQ(l.pos(3), 0U);
  EXPECT_EQ(LayOutServers(FourRanksOnThreeServers(), 3).server, 2U);
}

TEST(ServerLayoutTest, OneServer) {
  const std::vector<bootstrap::RankIdentity> ranks(3, {.host = "h", .pid = 0, .address = ""});
  const ServerLayout l = LayOutServers(ranks, 1);
  EXPECT_EQ(l.servers, (std::vector<std::vector<uint32_t>>{{0, 1, 2}}));
  EXPECT_EQ(l.leaders, (std::vector<uint32_t>{0}));
  EXPECT_EQ(l.pos(1), 1U);
}

// A rank alone on its server gets a communicator of one rank (never linked), with the parent's
// options and an id that every rank of that server derives alike and the other servers do not.
TEST(ServerLayoutTest, ServerLocalCommunicatorOfALoneRank) {
  CommOptions options;
  options.buffer_mb = 3;
  const bootstrap::UniqueId id{};
  const Communicator b(id, 1, FourRanksOnThreeServers(), options);
  const Communicator c(id, 3, FourRanksOnThreeServers(), options);
  auto local_b = MakeServerLocal(b, LayOutServers(b.ranks(), b.rank()));
  auto local_c = MakeServerLocal(c, LayOutServers(c.ranks(), c.rank()));
  ASSERT_TRUE(local_b && local_c);
  EXPECT_EQ(local_b->size(), 1U);
  EXPECT_EQ(local_b->rank(), 0U);
  EXPECT_EQ(local_b->ranks()[0].host, "host-b");
  EXPECT_EQ(local_b->StagingBytes(), size_t{3} << 20);
  EXPECT_EQ(local_b->ServerCount(), 1U);
  EXPECT_NE(bootstrap::IdString(local_b->id()), bootstrap::IdString(b.id()));
  EXPECT_NE(bootstrap::IdString(local_b->id()), bootstrap::IdString(local_c->id()));
  auto again = MakeServerLocal(b, LayOutServers(b.ranks(), b.rank()));
  EXPECT_EQ(bootstrap::IdString(again->id()), bootstrap::IdString(local_b->id()));
}

}  // namespace
}  // namespace hzc
